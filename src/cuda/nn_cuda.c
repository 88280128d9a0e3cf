/* The host half of the CUDA nn kernels: nll_loss and nll_loss_backward (shape rules
 * shared with the CPU through ct_nll_check, src/meta/nn_fused.c), and attention. Targets are checked
 * on the GPU before the loss is computed (Note [GPU index checks] in indexing_cuda.c),
 * with the CPU's message. */
#include <math.h>
#include <string.h>

#include "core/factory.h"
#include "core/view.h"
#include "cuda/cuda_ops.h"
#include "cuda/flash_attn.h"
#include "cuda/nn_rt.h"
#include "cuda/xent_rt.h"
#include "ctorch/nn.h"
#include "ctorch/ops.h"
#include "meta/nn_fused.h"

static ct_status check_targets(const ct_tensor *t, const ct_nll_geom *g, int64_t ignore) {
    int64_t total = g->n * g->inner;
    if (total == 0)
        return CT_OK;
    ct_scope_begin();
    int64_t one = 1;
    ct_tensor *first = ct_full_impl(&one, 1, ct_scalar_int(-1), CT_DTYPE_INT64, t->device);
    ct_status st = first ? ct_cuda_nll_check((const int64_t *)ct_tensor_ptr(t), total, g->c, ignore,
                                             (uint64_t *)ct_tensor_ptr(first), t->device.index)
                         : ct_last_status();
    int64_t k = -1, v = 0;
    if (st == CT_OK)
        st = ct_cuda_read_flag(first, &k, "nll_loss");
    if (st == CT_OK && k >= 0 && k < total && (st = ct_cuda_read_element(t, k, &v)) == CT_OK)
        st = ct_error(CT_ERROR_INDEX, "nll_loss", "Target %lld is out of bounds.", (long long)v);
    ct_scope_end();
    return st;
}

static ct_status nll_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_nll_geom g;
    const ct_tensor *x0 = call->in[0], *t0 = call->in[1], *w0 = call->in[2];
    ct_status st = ct_nll_check(x0, t0, w0, &g);
    if (st == CT_OK)
        st = ct_nn_same_device("nll_loss", call->in, 3);
    if (st)
        return st;
    int red = (int)call->ints[0];
    int64_t ignore = call->ints[1];
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    if (!ct_cuda_use_device("nll_loss", x0->device.index))
        return ct_last_status();
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd), *t = ct_contiguous(t0), *w = ct_nn_as_work(w0, wd);
    ct_tensor *y = red == CT_REDUCTION_NONE ? ct_empty_impl(t0->shape, t0->ndim, wd, x0->device)
                                            : ct_empty_impl(NULL, 0, wd, x0->device);
    st = x && t && y && (!w0 || w) ? check_targets(t, &g, ignore) : ct_last_status();
    if (st == CT_OK)
        st = ct_cuda_nll_run(wd, false, NULL, ct_tensor_ptr(x), (const int64_t *)ct_tensor_ptr(t),
                             w ? ct_tensor_ptr(w) : NULL, ct_tensor_ptr(y), g.n, g.c, g.inner, red, ignore, NULL,
                             x0->device.index);
    ct_tensor *o = st == CT_OK ? ct_to_dtype(y, x0->dtype) : NULL;
    if (st == CT_OK)
        st = o ? ct_call_set_output(call, 0, o) : ct_last_status();
    ct_scope_end();
    return st;
}

static ct_status nll_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_nll_geom g;
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1], *t0 = call->in[2], *w0 = call->in[3];
    ct_status st = ct_nll_check(x0, t0, w0, &g);
    if (st)
        return st;
    int red = (int)call->ints[0];
    int64_t ignore = call->ints[1];
    if (red == CT_REDUCTION_NONE) {
        bool same = gy0->ndim == t0->ndim;
        for (int d = 0; same && d < t0->ndim; d++)
            same = gy0->shape[d] == t0->shape[d];
        if (!same) {
            char a[96], b[96];
            return ct_error(CT_ERROR_VALUE, "nll_loss_backward", "grad_output has shape %s, expected %s",
                            ct_shape_str(gy0->shape, gy0->ndim, a, sizeof a),
                            ct_shape_str(t0->shape, t0->ndim, b, sizeof b));
        }
    } else if (gy0->numel != 1) {
        return ct_error(CT_ERROR_VALUE, "nll_loss_backward", "grad_output must have one element, got %lld",
                        (long long)gy0->numel);
    }
    if ((st = ct_nn_same_device("nll_loss_backward", call->in, 4)))
        return st;
    if (!ct_cuda_use_device("nll_loss_backward", x0->device.index))
        return ct_last_status();
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_scope_begin();
    ct_tensor *gy = ct_nn_as_work(gy0, wd), *t = ct_contiguous(t0), *w = ct_nn_as_work(w0, wd);
    ct_tensor *gx = ct_zeros_impl(x0->shape, x0->ndim, wd, x0->device);
    int64_t one = 1;
    ct_tensor *tw = ct_zeros_impl(&one, 1, CT_DTYPE_FLOAT64, x0->device);
    st = gy && t && gx && tw && (!w0 || w) ? check_targets(t, &g, ignore) : ct_last_status();
    if (st == CT_OK)
        st = ct_cuda_nll_run(wd, true, ct_tensor_ptr(gy), NULL, (const int64_t *)ct_tensor_ptr(t),
                             w ? ct_tensor_ptr(w) : NULL, ct_tensor_ptr(gx), g.n, g.c, g.inner, red, ignore,
                             (double *)ct_tensor_ptr(tw), x0->device.index);
    ct_tensor *o = st == CT_OK ? ct_to_dtype(gx, x0->dtype) : NULL;
    if (st == CT_OK)
        st = o ? ct_call_set_output(call, 0, o) : ct_last_status();
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ cross_entropy_fused
 *
 * The logits stay in their dtype (no float32 copy); targets out of range mark their row
 * with nan instead of a host check, unless CT_CHECK_TARGETS asks for it (Note [Fused
 * cross_entropy] in src/meta/nn_fused.c). */

static ct_status xent_targets(const ct_tensor *t, const ct_xent_geom *xg, int64_t ignore) {
    if (!ct_xent_check_targets_env())
        return CT_OK;
    ct_nll_geom g = {.n = xg->n, .c = xg->c, .inner = 1, .has_batch = true};
    return check_targets(t, &g, ignore);
}

static ct_status xent_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "cross_entropy_fused";
    const ct_tensor *x0 = call->in[0], *t0 = call->in[1];
    ct_xent_geom g;
    ct_status st = ct_xent_check(op, x0, t0, &g);
    if (st)
        return st;
    int red = (int)call->ints[0];
    int64_t ignore = call->ints[1];
    ct_dtype wd = ct_nn_work_dtype(x0->dtype), ld;
    if ((st = ct_xent_loss_dtype(call, &ld)))
        return st;
    if (!ct_cuda_use_device(op, x0->device.index))
        return ct_last_status();
    ct_scope_begin();
    const ct_tensor *x = ct_contiguous_impl(x0), *t = ct_contiguous_impl(t0);
    ct_tensor *rows = ct_empty_impl(&g.n, 1, wd, x0->device), *lse = ct_empty_impl(&g.n, 1, wd, x0->device);
    ct_tensor *y = red == CT_REDUCTION_NONE ? NULL : ct_empty_impl(NULL, 0, ld, x0->device);
    st = x && t && rows && lse && (red == CT_REDUCTION_NONE || y) ? xent_targets(t, &g, ignore) : ct_last_status();
    if (st == CT_OK)
        st = ct_cuda_xent_fwd(x0->dtype, ct_tensor_ptr(x), (const int64_t *)ct_tensor_ptr(t), ct_tensor_ptr(rows),
                              ct_tensor_ptr(lse), y ? ct_tensor_ptr(y) : NULL, ld == wd && ld != x0->dtype, g.n, g.c,
                              red, ignore, x0->device.index);
    if (st == CT_OK && red == CT_REDUCTION_NONE)
        st = ct_nn_set_out(call, 0, rows, ld);
    else if (st == CT_OK)
        st = ct_call_set_output(call, 0, y);
    if (st == CT_OK)
        st = ct_call_set_output(call, 1, lse);
    ct_scope_end();
    return st;
}

static ct_status xent_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "cross_entropy_fused_backward";
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1], *t0 = call->in[2], *lse0 = call->in[3];
    ct_xent_geom g;
    ct_status st = ct_xent_backward_check(call, &g);
    if (st)
        return st;
    int red = (int)call->ints[0];
    int64_t ignore = call->ints[1];
    if (!ct_cuda_use_device(op, x0->device.index))
        return ct_last_status();
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_scope_begin();
    const ct_tensor *x = ct_contiguous_impl(x0), *t = ct_contiguous_impl(t0), *lse = ct_contiguous_impl(lse0);
    const bool out = call->mode == CT_CALL_OUT; /* contiguous, checked; may be x0 itself */
    ct_tensor *gy = ct_nn_as_work(gy0, wd);
    ct_tensor *gx = out ? call->out[0] : ct_empty_impl(x0->shape, 2, x0->dtype, x0->device);
    int64_t one = 1;
    ct_tensor *scratch = ct_empty_impl(&one, 1, CT_DTYPE_FLOAT64, x0->device);
    st = x && t && lse && gy && gx && scratch ? xent_targets(t, &g, ignore) : ct_last_status();
    if (st == CT_OK)
        st = ct_cuda_xent_bwd(x0->dtype, ct_tensor_ptr(gy), ct_tensor_ptr(x), (const int64_t *)ct_tensor_ptr(t),
                              ct_tensor_ptr(lse), ct_tensor_ptr(gx), g.n, g.c, red, ignore,
                              (double *)ct_tensor_ptr(scratch), x0->device.index);
    if (st == CT_OK && !out)
        st = ct_call_set_output(call, 0, gx);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ attention
 *
 * Note [GPU attention]
 * scaled_dot_product_attention and its backward on CUDA are written with CUDA ops:
 * batched matrix products through cuBLASLt and the row softmax, holding the (..., L, S)
 * probabilities (the CPU's fused kernel works on blocks of queries instead). Causal
 * and boolean masks become -inf scores, float masks are added, as the CPU. The ops run
 * below the autograd key (the op's own derivative is the backward kernel). */

/* softmax(q k^T * scale + mask) over the last dim, on q's device. */
static ct_tensor *attention_probs(const ct_tensor *q, const ct_tensor *k, const ct_tensor *mask, bool causal,
                                  double scale, const ct_sdpa_geom *g) {
    ct_tensor *sc = ct_mul_scalar(ct_matmul(q, ct_transpose(k, -2, -1)), ct_scalar_float(scale));
    if (sc && causal) {
        ct_scalar zero = ct_scalar_int(0), one = ct_scalar_int(1);
        ct_tensor *i = ct_unsqueeze(ct_arange_impl(zero, ct_scalar_int(g->l), one, CT_DTYPE_INT64, q->device), 1);
        ct_tensor *j = ct_arange_impl(zero, ct_scalar_int(g->s), one, CT_DTYPE_INT64, q->device);
        sc = ct_where_scalar_other(ct_ge(i, j), sc, ct_scalar_float(-INFINITY));
    } else if (sc && mask) {
        sc = mask->dtype == CT_DTYPE_BOOL ? ct_where_scalar_other(mask, sc, ct_scalar_float(-INFINITY)) : ct_add(sc, mask);
    }
    return sc ? ct_softmax(sc, -1, CT_DTYPE_UNDEFINED) : NULL;
}

static ct_status sdpa_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "scaled_dot_product_attention";
    const ct_tensor *q = call->in[0], *k = call->in[1], *v = call->in[2], *mask = call->in[3];
    bool causal = call->ints[0] != 0;
    ct_sdpa_geom g;
    ct_status st = ct_sdpa_check(op, q, k, v, mask, causal, &g);
    if (st == CT_OK)
        st = ct_nn_same_device(op, call->in, 4);
    if (st)
        return st;
    ct_scope_begin();
    ct_tensor *p = attention_probs(q, k, mask, causal, ct_scalar_to_double(call->s[0]), &g);
    ct_tensor *y = p ? ct_matmul(p, v) : NULL;
    st = y ? ct_call_set_output(call, 0, y) : ct_last_status();
    ct_scope_end();
    return st;
}

/* With P the probabilities and dO the output's gradient: dV = P^T dO,
 * dS = P * (dO V^T - rowsum(dO V^T * P)), dQ = dS K * scale, dK = dS^T Q * scale. */
static ct_status sdpa_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "scaled_dot_product_attention_backward";
    const ct_tensor *go = call->in[0], *q = call->in[1], *k = call->in[2], *v = call->in[3];
    const ct_tensor *mask = call->nlist > 0 ? call->list[0] : NULL;
    bool causal = call->ints[0] != 0;
    double scale = ct_scalar_to_double(call->s[0]);
    ct_sdpa_geom g;
    ct_status st = ct_sdpa_check(op, q, k, v, mask, causal, &g);
    const ct_tensor *all[5] = {go, q, k, v, mask};
    if (st == CT_OK)
        st = ct_nn_same_device(op, all, 5);
    if (st)
        return st;
    ct_scope_begin();
    ct_tensor *p = attention_probs(q, k, mask, causal, scale, &g);
    ct_tensor *pt = p ? ct_transpose(p, -2, -1) : NULL;
    ct_tensor *dv = pt ? ct_matmul(pt, go) : NULL;
    ct_tensor *dp = p ? ct_matmul(go, ct_transpose(v, -2, -1)) : NULL;
    int64_t last = -1;
    ct_tensor *rs = dp ? ct_sum(ct_mul(dp, p), &last, 1, true, CT_DTYPE_UNDEFINED) : NULL;
    ct_tensor *ds = rs ? ct_mul(p, ct_sub(dp, rs)) : NULL;
    ct_tensor *dq = ds ? ct_mul_scalar(ct_matmul(ds, k), ct_scalar_float(scale)) : NULL;
    ct_tensor *dk = ds ? ct_mul_scalar(ct_matmul(ct_transpose(ds, -2, -1), q), ct_scalar_float(scale)) : NULL;
    st = dq && dk && dv ? CT_OK : ct_last_status();
    if (st == CT_OK)
        st = ct_call_set_output(call, 0, dq);
    if (st == CT_OK)
        st = ct_call_set_output(call, 1, dk);
    if (st == CT_OK)
        st = ct_call_set_output(call, 2, dv);
    ct_scope_end();
    return st;
}

void ct_cuda_register_nn(void) {
    ct_dispatch_register_default(CT_OP_scaled_dot_product_attention, CT_KEY_CUDA, sdpa_kernel, NULL);
    ct_dispatch_register_default(CT_OP_scaled_dot_product_attention_backward, CT_KEY_CUDA, sdpa_backward_kernel, NULL);
    ct_dispatch_register_default(CT_OP_nll_loss, CT_KEY_CUDA, nll_kernel, NULL);
    ct_dispatch_register_default(CT_OP_nll_loss_backward, CT_KEY_CUDA, nll_backward_kernel, NULL);
    ct_dispatch_register_default(CT_OP_cross_entropy_fused, CT_KEY_CUDA, xent_kernel, NULL);
    ct_dispatch_register_default(CT_OP_cross_entropy_fused_backward, CT_KEY_CUDA, xent_backward_kernel, NULL);
    ct_cuda_register_conv();
    ct_cuda_register_pool();
    ct_cuda_register_norm();
    ct_cuda_register_flash_attn();
}
