/* The fused nn kernels: argument checks and shape rules (shared by every backend) and
 * the META kernels. The CPU loops are in src/cpu/nn_fused.c, the public wrappers in
 * src/api/nn_fused.c. */
#include "core/checks.h"
#include "core/dtype.h"
#include "core/factory.h"
#include "core/random.h"
#include "core/view.h"
#include "meta/kernels.h"
#include "meta/nn_fused.h"
#include "meta/nn_ops.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/nn.h"
#include "dispatch/dispatch_internal.h"

ct_status ct_nn_need_float_dtype(const char *op, ct_dtype d) {
    if (!ct_dtype_is_floating(d))
        return ct_error(CT_ERROR_TYPE, op, "\"%s\" not implemented for '%s'", op, ct_dtype_name(d));
    return CT_OK;
}

ct_status ct_nn_need_float(const char *op, const ct_tensor *t) { return ct_nn_need_float_dtype(op, t->dtype); }

ct_status ct_nn_need_number(const char *op, const ct_tensor *t) {
    if (t->dtype == CT_DTYPE_BOOL)
        return ct_error(CT_ERROR_TYPE, op, "\"%s\" not implemented for 'bool'", op);
    return CT_OK;
}

ct_status ct_nn_same_device(const char *op, const ct_tensor *const *ts, int n) {
    const ct_tensor *first = NULL;
    for (int i = 0; i < n; i++) {
        if (!ts[i])
            continue;
        if (first && !ct_device_equal(first->device, ts[i]->device)) {
            char a[32], b[32];
            return ct_error(CT_ERROR_DEVICE, op,
                            "Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                            ct_device_str(first->device, a, sizeof a), ct_device_str(ts[i]->device, b, sizeof b));
        }
        first = first ? first : ts[i];
    }
    return CT_OK;
}

ct_dtype ct_nn_work_dtype(ct_dtype d) { return d == CT_DTYPE_FLOAT64 ? CT_DTYPE_FLOAT64 : CT_DTYPE_FLOAT32; }

ct_tensor *ct_nn_as_work(const ct_tensor *t, ct_dtype wd) { return t ? ct_contiguous_impl(ct_to_dtype_impl(t, wd)) : NULL; }

ct_status ct_nn_set_out(ct_call *call, int i, ct_tensor *t, ct_dtype dtype) {
    ct_tensor *o = t ? ct_to_dtype_impl(t, dtype) : NULL;
    return o ? ct_call_set_output(call, i, o) : ct_last_status();
}

ct_status ct_nn_same_shape(const char *op, const ct_tensor *t, const int64_t *shape, int nd) {
    bool same = t->ndim == nd;
    for (int i = 0; same && i < nd; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        char a[96], b[96];
        return ct_error(CT_ERROR_VALUE, op, "grad_output has shape %s, expected %s",
                        ct_shape_str(t->shape, t->ndim, a, sizeof a), ct_shape_str(shape, nd, b, sizeof b));
    }
    return CT_OK;
}

/* ------------------------------------------------------------------ avg_pool2d */

ct_status ct_avgpool_check(const ct_tensor *x, const int64_t *ints, ct_avgpool_geom *g) {
    const char *op = "avg_pool2d";
    memset(g, 0, sizeof *g);
    for (int i = 0; i < 2; i++) {
        g->kernel[i] = ints[i];
        g->stride[i] = ints[2 + i];
        g->padding[i] = ints[4 + i];
    }
    g->ceil_mode = ints[6] != 0;
    g->count_include_pad = ints[7] != 0;
    g->divisor = ints[8];
    if (x->ndim != 3 && x->ndim != 4)
        return ct_error(CT_ERROR_VALUE, op, "non-empty 3D or 4D (batch mode) tensor expected for input");
    for (int i = 0; i < 2; i++) {
        if (g->kernel[i] <= 0)
            return ct_error(CT_ERROR_VALUE, op, "kernel size should be greater than zero, but got kH: %lld kW: %lld",
                            (long long)g->kernel[0], (long long)g->kernel[1]);
        if (g->stride[i] <= 0)
            return ct_error(CT_ERROR_VALUE, op, "stride should be greater than zero, but got dH: %lld dW: %lld",
                            (long long)g->stride[0], (long long)g->stride[1]);
    }
    for (int i = 0; i < 2; i++)
        if (g->padding[i] < 0 || g->padding[i] > g->kernel[i] / 2)
            return ct_error(CT_ERROR_VALUE, op,
                            "pad should be smaller than or equal to half of kernel size, but got padW = %lld, padH = "
                            "%lld, kW = %lld, kH = %lld",
                            (long long)g->padding[1], (long long)g->padding[0], (long long)g->kernel[1],
                            (long long)g->kernel[0]);
    if (g->divisor < 0 || (ints[9] && g->divisor == 0))
        return ct_error(CT_ERROR_VALUE, op, "divisor must be not zero");
    ct_status st = ct_nn_need_number(op, x); /* integers: Note [Integer convolution] */
    if (st)
        return st;
    g->batched = x->ndim == 4;
    int o = g->batched ? 1 : 0;
    g->n = g->batched ? x->shape[0] : 1;
    g->c = x->shape[o];
    g->h = x->shape[o + 1];
    g->w = x->shape[o + 2];
    /* padding <= kernel / 2, so in + 2 * padding - kernel fits; with the stride, the steps
     * go through the checked helper (Note [Checked sizes]) */
    if (!ct_pool_out_len(g->h, g->padding[0], g->kernel[0], g->stride[0], 1, g->ceil_mode, &g->oh) ||
        !ct_pool_out_len(g->w, g->padding[1], g->kernel[1], g->stride[1], 1, g->ceil_mode, &g->ow))
        return ct_error(CT_ERROR_VALUE, op, "the padding, stride and kernel size make the output size overflow int64");
    return ct_pool_check_out(op, g->c, g->h, g->w, g->oh, g->ow);
}

static void pool_shape(bool batched, int64_t n, int64_t c, int64_t oh, int64_t ow, int64_t *shape, int *nd) {
    int k = 0;
    if (batched)
        shape[k++] = n;
    shape[k++] = c;
    shape[k++] = oh;
    shape[k++] = ow;
    *nd = k;
}

/* ------------------------------------------------------------------ adaptive_avg_pool2d */

ct_status ct_adapool_check(const ct_tensor *x, const int64_t *ints, ct_adapool_geom *g) {
    const char *op = "adaptive_avg_pool2d";
    memset(g, 0, sizeof *g);
    if (x->ndim != 3 && x->ndim != 4) {
        char s[96];
        return ct_error(CT_ERROR_VALUE, op, "Expected 3D or 4D tensor, but got %s",
                        ct_shape_str(x->shape, x->ndim, s, sizeof s));
    }
    for (int d = 1; d < x->ndim; d++)
        if (x->shape[d] == 0) {
            char s[96];
            return ct_error(CT_ERROR_VALUE, op,
                            "Expected input to have non-zero size for non-batch dimensions, but input has sizes %s "
                            "with dimension %d being empty",
                            ct_shape_str(x->shape, x->ndim, s, sizeof s), d);
        }
    if (ints[0] < 0 || ints[1] < 0)
        return ct_error(CT_ERROR_VALUE, op, "output_size must be non-negative, got (%lld, %lld)", (long long)ints[0],
                        (long long)ints[1]);
    ct_status st = ct_nn_need_float(op, x);
    if (st)
        return st;
    g->batched = x->ndim == 4;
    int o = g->batched ? 1 : 0;
    g->n = g->batched ? x->shape[0] : 1;
    g->c = x->shape[o];
    g->h = x->shape[o + 1];
    g->w = x->shape[o + 2];
    g->oh = ints[0];
    g->ow = ints[1];
    return CT_OK;
}

/* ------------------------------------------------------------------ rms_norm */

/* The checks rms_norm and layer_norm share: x ends in normalized_shape (ints), weight
 * and bias (either may be NULL) have that shape and x's dtype, x is floating. */
static ct_status norm_check(const char *op, const ct_call *call, const ct_tensor *x, const ct_tensor *w,
                           const ct_tensor *bias, ct_rmsnorm_geom *g) {
    int k = (int)call->ints[0];
    const int64_t *ns = &call->ints[1];
    char a[96], b[96];
    bool ok = k >= 1 && k <= x->ndim;
    for (int i = 0; ok && i < k; i++)
        ok = x->shape[x->ndim - k + i] == ns[i];
    if (!ok) {
        /* "[*, 3, 4]": the normalized shape's sizes after a star */
        char inner[96];
        ct_shape_str(ns, k, inner, sizeof inner);
        inner[strlen(inner) - 1] = 0;
        return ct_error(CT_ERROR_VALUE, op,
                        "Given normalized_shape=%s, expected input with shape [*%s%s], but got input of size%s",
                        ct_shape_str(ns, k, a, sizeof a), k ? ", " : "", inner + 1,
                        ct_shape_str(x->shape, x->ndim, b, sizeof b));
    }
    const ct_tensor *affine[2] = {w, bias};
    for (int t = 0; t < 2; t++) {
        const ct_tensor *p = affine[t];
        const char *what = t ? "bias" : "weight";
        if (!p)
            continue;
        bool same = p->ndim == k;
        for (int i = 0; same && i < k; i++)
            same = p->shape[i] == ns[i];
        if (!same)
            return ct_error(CT_ERROR_VALUE, op, "Expected %s to be of same shape as normalized_shape, but got "
                            "%s of shape %s and normalized_shape = %s", what, what,
                            ct_shape_str(p->shape, p->ndim, a, sizeof a), ct_shape_str(ns, k, b, sizeof b));
        if (p->dtype != x->dtype)
            return ct_error(CT_ERROR_TYPE, op, "expected %s to have dtype %s, but got %s", what,
                            ct_dtype_name(x->dtype), ct_dtype_name(p->dtype));
    }
    const ct_tensor *ts[3] = {x, w, bias};
    ct_status st = ct_nn_need_float(op, x);
    if (st || (st = ct_nn_same_device(op, ts, 3)))
        return st;
    g->cols = 1;
    for (int i = 0; i < k; i++)
        g->cols *= ns[i];
    g->rows = g->cols ? x->numel / g->cols : 0;
    g->eps = ct_scalar_to_double(call->s[0]);
    return CT_OK;
}

ct_status ct_rmsnorm_check(const ct_call *call, const ct_tensor *x, const ct_tensor *w, ct_rmsnorm_geom *g) {
    return norm_check("rms_norm", call, x, w, NULL, g);
}

ct_status ct_layernorm_check(const ct_call *call, const ct_tensor *x, const ct_tensor *w, const ct_tensor *b,
                             ct_rmsnorm_geom *g) {
    return norm_check("layer_norm", call, x, w, b, g);
}

/* grad_output gy must have the pooled shape (n, c, oh, ow), without n when unbatched,
 * and sit on x's device. */
static ct_status pooled_grad_check(const char *op, const ct_tensor *gy, const ct_tensor *x, bool batched, int64_t n,
                                   int64_t c, int64_t oh, int64_t ow) {
    int64_t shape[4] = {n, c, oh, ow};
    const ct_tensor *ts[2] = {x, gy};
    ct_status st = ct_nn_same_shape(op, gy, batched ? shape : shape + 1, batched ? 4 : 3);
    return st ? st : ct_nn_same_device(op, ts, 2);
}

ct_status ct_avgpool_backward_check(const ct_call *call, ct_avgpool_geom *g) {
    ct_status st = ct_avgpool_check(call->in[1], call->ints, g);
    if (st == CT_OK)
        st = ct_nn_need_float("avg_pool2d_backward", call->in[1]);
    return st ? st
              : pooled_grad_check("avg_pool2d_backward", call->in[0], call->in[1], g->batched, g->n, g->c, g->oh,
                                  g->ow);
}

ct_status ct_adapool_backward_check(const ct_call *call, ct_adapool_geom *g) {
    ct_status st = ct_adapool_check(call->in[1], call->ints, g);
    return st ? st
              : pooled_grad_check("adaptive_avg_pool2d_backward", call->in[0], call->in[1], g->batched, g->n, g->c,
                                  g->oh, g->ow);
}

static ct_status norm_backward_check(const char *op, const ct_call *call, int nin, ct_rmsnorm_geom *g) {
    const ct_tensor *gy = call->in[0], *x = call->in[1], *w = call->in[2], *b = nin > 3 ? call->in[3] : NULL;
    ct_status st = norm_check(nin > 3 ? "layer_norm" : "rms_norm", call, x, w, b, g);
    if (st || (st = ct_nn_same_shape(op, gy, x->shape, x->ndim)))
        return st;
    return ct_nn_same_device(op, call->in, nin);
}

ct_status ct_rmsnorm_backward_check(const ct_call *call, ct_rmsnorm_geom *g) {
    return norm_backward_check("rms_norm_backward", call, 3, g);
}

ct_status ct_layernorm_backward_check(const ct_call *call, ct_rmsnorm_geom *g) {
    return norm_backward_check("layer_norm_backward", call, 4, g);
}

/* The GELU's form: none (erf) or tanh. */
static ct_status check_approximate(const char *op, int64_t approximate) {
    if (approximate != CT_GELU_APPROXIMATE_NONE && approximate != CT_GELU_APPROXIMATE_TANH)
        return ct_error(CT_ERROR_VALUE, op, "approximate argument must be either none or tanh, got %lld",
                        (long long)approximate);
    return CT_OK;
}

ct_status ct_gelu_backward_check(const ct_tensor *gy, const ct_tensor *x, int64_t approximate) {
    const char *op = "gelu_backward";
    ct_status st = check_approximate(op, approximate);
    if (st)
        return st;
    if (!ct_dtype_is_floating(x->dtype))
        return ct_error(CT_ERROR_TYPE, op, "\"GeluBackward\" not implemented for '%s'", ct_dtype_name(x->dtype));
    bool same = gy->ndim == x->ndim && gy->dtype == x->dtype;
    for (int i = 0; same && i < x->ndim; i++)
        same = gy->shape[i] == x->shape[i];
    if (!same) {
        char a[96], b[96];
        return ct_error(CT_ERROR_VALUE, op, "grad_output (%s %s) must have the shape and dtype of input (%s %s)",
                        ct_dtype_name(gy->dtype), ct_shape_str(gy->shape, gy->ndim, a, sizeof a),
                        ct_dtype_name(x->dtype), ct_shape_str(x->shape, x->ndim, b, sizeof b));
    }
    const ct_tensor *ts[2] = {gy, x};
    return ct_nn_same_device(op, ts, 2);
}

/* ------------------------------------------------------------------ attention */

ct_status ct_sdpa_check(const char *op, const ct_tensor *q, const ct_tensor *k, const ct_tensor *v,
                        const ct_tensor *mask, bool is_causal, ct_sdpa_geom *g) {
    memset(g, 0, sizeof *g);
    if (q->ndim < 2 || k->ndim != q->ndim || v->ndim != q->ndim)
        return ct_error(CT_ERROR_VALUE, op,
                        "Expected query, key and value to have the same number of dimensions (at least 2), but got "
                        "query.dim()=%d, key.dim()=%d and value.dim()=%d",
                        q->ndim, k->ndim, v->ndim);
    int nd = q->ndim;
    for (int d = 0; d < nd - 2; d++)
        if (k->shape[d] != q->shape[d] || v->shape[d] != q->shape[d]) {
            char a[96], b[96], c[96];
            return ct_error(CT_ERROR_VALUE, op,
                            "Expected query, key and value to have the same batch dimensions, but got query %s, key "
                            "%s and value %s",
                            ct_shape_str(q->shape, nd, a, sizeof a), ct_shape_str(k->shape, nd, b, sizeof b),
                            ct_shape_str(v->shape, nd, c, sizeof c));
        }
    g->l = q->shape[nd - 2];
    g->e = q->shape[nd - 1];
    g->s = k->shape[nd - 2];
    g->ev = v->shape[nd - 1];
    if (k->shape[nd - 1] != g->e)
        return ct_error(CT_ERROR_VALUE, op, "Expected key's last dimension (%lld) to match query's (%lld)",
                        (long long)k->shape[nd - 1], (long long)g->e);
    if (v->shape[nd - 2] != g->s)
        return ct_error(CT_ERROR_VALUE, op, "Expected key and value to have the same sequence length, got %lld and %lld",
                        (long long)g->s, (long long)v->shape[nd - 2]);
    if (k->dtype != q->dtype || v->dtype != q->dtype)
        return ct_error(CT_ERROR_TYPE, op,
                        "Expected query, key, and value to have the same dtype, but got query.dtype: %s key.dtype: %s "
                        "and value.dtype: %s instead.",
                        ct_dtype_name(q->dtype), ct_dtype_name(k->dtype), ct_dtype_name(v->dtype));
    ct_status st = ct_nn_need_float(op, q);
    if (st)
        return st;
    if (mask) {
        if (is_causal)
            return ct_error(CT_ERROR_VALUE, op, "Explicit attn_mask should not be set when is_causal=True");
        if (mask->dtype != CT_DTYPE_BOOL && !ct_dtype_is_floating(mask->dtype))
            return ct_error(CT_ERROR_TYPE, op, "Expected attn_mask dtype to be bool or float, but got %s",
                            ct_dtype_name(mask->dtype));
        /* broadcastable to (..., L, S) */
        bool ok = mask->ndim <= nd;
        for (int i = 0; ok && i < mask->ndim; i++) {
            int64_t want = i == mask->ndim - 1 ? g->s : i == mask->ndim - 2 ? g->l : q->shape[nd - mask->ndim + i];
            ok = mask->shape[i] == 1 || mask->shape[i] == want;
        }
        if (!ok) {
            char a[96];
            return ct_error(CT_ERROR_VALUE, op, "attn_mask of shape %s cannot be broadcast to (..., %lld, %lld)",
                            ct_shape_str(mask->shape, mask->ndim, a, sizeof a), (long long)g->l, (long long)g->s);
        }
    }
    const ct_tensor *all[4] = {q, k, v, mask};
    if ((st = ct_nn_same_device(op, all, 4)))
        return st;
    g->nbatch = nd - 2;
    g->b = 1;
    for (int d = 0; d < nd - 2; d++) {
        g->batch[d] = q->shape[d];
        g->b *= q->shape[d];
    }
    return CT_OK;
}

/* ------------------------------------------------------------------ nll_loss */

ct_status ct_nll_check(const ct_tensor *x, const ct_tensor *t, const ct_tensor *w, ct_nll_geom *g) {
    const char *op = "nll_loss";
    memset(g, 0, sizeof *g);
    if (x->ndim < 1)
        return ct_error(CT_ERROR_VALUE, op, "input tensor should be 1D or 2D");
    if (t->dtype != CT_DTYPE_INT64)
        return ct_error(CT_ERROR_TYPE, op, "expected scalar type Long but found %s", ct_dtype_name(t->dtype));
    ct_status st = ct_nn_need_float(op, x);
    if (st)
        return st;
    g->has_batch = x->ndim >= 2;
    g->n = g->has_batch ? x->shape[0] : 1;
    g->c = x->shape[g->has_batch ? 1 : 0];
    g->inner = 1;
    if (x->ndim == 1) {
        if (t->ndim != 0)
            return ct_error(CT_ERROR_VALUE, op, "0D or 1D target tensor expected, multi-target not supported");
    } else if (x->ndim == 2) {
        if (t->ndim != 1)
            return ct_error(CT_ERROR_VALUE, op, "0D or 1D target tensor expected, multi-target not supported");
        if (t->shape[0] != x->shape[0])
            return ct_error(CT_ERROR_VALUE, op, "Expected input batch_size (%lld) to match target batch_size (%lld).",
                            (long long)x->shape[0], (long long)t->shape[0]);
    } else {
        bool ok = t->ndim == x->ndim - 1 && t->shape[0] == x->shape[0];
        for (int d = 2; ok && d < x->ndim; d++)
            ok = t->shape[d - 1] == x->shape[d];
        if (!ok) {
            int64_t want[CT_MAX_DIMS];
            want[0] = x->shape[0];
            for (int d = 2; d < x->ndim; d++)
                want[d - 1] = x->shape[d];
            char a[96], b[96];
            return ct_error(CT_ERROR_VALUE, op, "Expected target size %s, got %s",
                            ct_shape_str(want, x->ndim - 1, a, sizeof a), ct_shape_str(t->shape, t->ndim, b, sizeof b));
        }
        for (int d = 2; d < x->ndim && x->numel > 0; d++) /* empty: a product past int64 is possible */
            g->inner *= x->shape[d];
        if (x->numel == 0)
            g->inner = 0;
    }
    if (w) {
        if (w->ndim != 1 || w->shape[0] != g->c) {
            char a[96];
            return ct_error(CT_ERROR_VALUE, op,
                            "weight tensor should be defined either for all %lld classes or no classes but got weight "
                            "tensor of shape: %s",
                            (long long)g->c, ct_shape_str(w->shape, w->ndim, a, sizeof a));
        }
        if (w->dtype != x->dtype)
            return ct_error(CT_ERROR_TYPE, op, "expected scalar type %s but found %s", ct_dtype_name(x->dtype),
                            ct_dtype_name(w->dtype));
    }
    const ct_tensor *all[3] = {x, t, w};
    return ct_nn_same_device(op, all, 3);
}

/* ------------------------------------------------------------------ cross_entropy_fused
 *
 * Note [Fused cross_entropy]
 * F.cross_entropy with class-index targets is log_softmax then nll_loss: the
 * log-probabilities are a second tensor of the logits' size, written once, read by
 * nll_loss and kept for the backward, which writes nll_loss's one-hot gradient and
 * reads both again in log_softmax_backward. For a GPT's (B*T, 50304) logits that tensor
 * is the largest activation of the step. cross_entropy_fused computes, per row i,
 *   lse_i = log(sum_c exp(x_ic)),  loss_i = lse_i - x_i,t_i   (0 where t_i is ignored)
 * and keeps only lse (n floats) for the backward, which writes each gradient element once:
 *   dx_ic = g_i (exp(x_ic - lse_i) - [c == t_i]),  0 in ignored rows,
 * with g_i the incoming gradient (g / count of counted rows for the mean, where no row
 * counted gives 0/0 = nan as PyTorch's). Rows are reduced in float32 (float64 for
 * float64 logits) whatever the logits' dtype; the loss comes back in the logits' dtype.
 * ct_cross_entropy routes here for 2-D input, int64 targets, no class weights and no
 * label smoothing (the common case of language models); everything else keeps the
 * log_softmax + nll_loss path. On an H200, forward and backward over (8192, 50304)
 * bf16 logits take 0.705 ms, against 17.8 ms for log_softmax + nll_loss
 * (docs/cuda.md, "Fused kernels").
 *
 * Targets out of [0, C) (other than ignore_index): the CPU raises nll_loss's
 * IndexError ("Target 7 is out of bounds."). On CUDA, checking them means reading a
 * flag back, a device sync every step (what nll_loss does); PyTorch raises a
 * device-side assert instead, which kills the context. ctorch's CUDA kernel marks such a
 * row instead: its loss and lse are nan, so a mean or sum is nan and the gradient of
 * the row is nan, and training visibly diverges at the step with the bad batch. Setting
 * the environment variable CT_CHECK_TARGETS=1 adds the host check (one sync per call)
 * and raises the CPU's error, for debugging. */

bool ct_xent_check_targets_env(void) {
    const char *e = getenv("CT_CHECK_TARGETS");
    return e && *e && strcmp(e, "0") != 0;
}

ct_status ct_xent_check(const char *op, const ct_tensor *x, const ct_tensor *t, ct_xent_geom *g) {
    memset(g, 0, sizeof *g);
    if (x->ndim != 2)
        return ct_error(CT_ERROR_VALUE, op, "expected input of shape (N, C), got %d dimensions", x->ndim);
    ct_status st = ct_nn_need_float(op, x);
    if (st)
        return st;
    if (t->dtype != CT_DTYPE_INT64)
        return ct_error(CT_ERROR_TYPE, op, "expected scalar type Long but found %s", ct_dtype_pt_name(t->dtype));
    if (t->ndim != 1)
        return ct_error(CT_ERROR_VALUE, op, "0D or 1D target tensor expected, multi-target not supported");
    if (t->shape[0] != x->shape[0])
        return ct_error(CT_ERROR_VALUE, op, "Expected input batch_size (%lld) to match target batch_size (%lld).",
                        (long long)x->shape[0], (long long)t->shape[0]);
    g->n = x->shape[0];
    g->c = x->shape[1];
    const ct_tensor *all[2] = {x, t};
    return ct_nn_same_device(op, all, 2);
}

ct_status ct_xent_backward_check(const ct_call *call, ct_xent_geom *g) {
    const char *op = "cross_entropy_fused_backward";
    const ct_tensor *gy = call->in[0], *x = call->in[1], *t = call->in[2], *lse = call->in[3];
    ct_status st = ct_xent_check(op, x, t, g);
    if (st)
        return st;
    if (call->ints[0] == CT_REDUCTION_NONE)
        st = ct_nn_same_shape(op, gy, t->shape, 1);
    else if (gy->numel != 1)
        st = ct_error(CT_ERROR_VALUE, op, "grad_output must have one element, got %lld", (long long)gy->numel);
    if (st)
        return st;
    if ((st = ct_nn_need_float(op, gy)))
        return st;
    ct_dtype wd = ct_nn_work_dtype(x->dtype);
    if (lse->dtype != wd)
        return ct_error(CT_ERROR_TYPE, op, "expected lse of scalar type %s but found %s", ct_dtype_pt_name(wd),
                        ct_dtype_pt_name(lse->dtype));
    if (lse->ndim != 1 || lse->shape[0] != g->n) {
        char a[96];
        return ct_error(CT_ERROR_VALUE, op, "expected lse of shape (%lld), got %s", (long long)g->n,
                        ct_shape_str(lse->shape, lse->ndim, a, sizeof a));
    }
    if ((st = ct_nn_same_device(op, call->in, 4)))
        return st;
    if (call->mode == CT_CALL_OUT) {
        /* written in place by the kernels: the gradient's own shape, dtype and layout */
        const ct_tensor *o = call->out[0];
        char a[96], b[96];
        if (!o)
            return ct_error_null(op);
        if (o->ndim != x->ndim || memcmp(o->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim) != 0)
            return ct_error(CT_ERROR_VALUE, op, "out has shape %s, expected %s",
                            ct_shape_str(o->shape, o->ndim, a, sizeof a), ct_shape_str(x->shape, x->ndim, b, sizeof b));
        if (o->dtype != x->dtype)
            return ct_error(CT_ERROR_TYPE, op, "expected out of scalar type %s but found %s",
                            ct_dtype_pt_name(x->dtype), ct_dtype_pt_name(o->dtype));
        if (!ct_device_equal(o->device, x->device))
            return ct_error(CT_ERROR_DEVICE, op, "out is on another device than input");
        if (!ct_tensor_is_contiguous(o))
            return ct_error(CT_ERROR_VALUE, op, "out must be contiguous");
    }
    return CT_OK;
}

/* ------------------------------------------------------------------ conv_transpose2d */

ct_status ct_convt_check(const ct_call *call, int64_t *shape, int *nd) {
    const char *op = "conv_transpose2d";
    const ct_tensor *x = call->in[0], *w = call->in[1], *b = call->in[2];
    const int64_t *s = &call->ints[0], *p = &call->ints[2], *op_ = &call->ints[4], *d = &call->ints[6];
    int64_t groups = call->ints[8];
    if (x->ndim != 3 && x->ndim != 4)
        return ct_error(CT_ERROR_VALUE, op,
                        "Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, but got input of size: "
                        "[%d dims]",
                        x->ndim);
    if (w->ndim != 4)
        return ct_error(CT_ERROR_VALUE, op, "weight should have 4 dimensions, got %d", w->ndim);
    for (int i = 0; i < 2; i++) {
        if (s[i] <= 0)
            return ct_error(CT_ERROR_VALUE, op, "non-positive stride is not supported");
        if (p[i] < 0)
            return ct_error(CT_ERROR_VALUE, op, "negative padding is not supported");
        if (d[i] <= 0)
            return ct_error(CT_ERROR_VALUE, op, "dilation should be greater than zero");
        if (op_[i] < 0 || (op_[i] >= s[i] && op_[i] >= d[i]))
            return ct_error(CT_ERROR_VALUE, op,
                            "output padding must be smaller than either stride or dilation, but got "
                            "output_padding_height: %lld output_padding_width: %lld stride_height: %lld stride_width: "
                            "%lld dilation_height: %lld dilation_width: %lld",
                            (long long)op_[0], (long long)op_[1], (long long)s[0], (long long)s[1], (long long)d[0],
                            (long long)d[1]);
    }
    if (groups <= 0)
        return ct_error(CT_ERROR_VALUE, op, "non-positive groups is not supported");
    int o = x->ndim == 4 ? 1 : 0;
    int64_t c = x->shape[o];
    if (w->shape[0] != c) {
        char a[96], bb[96];
        return ct_error(CT_ERROR_VALUE, op,
                        "Given transposed=1, weight of size %s, expected input%s to have %lld channels, but got %lld "
                        "channels instead",
                        ct_shape_str(w->shape, 4, a, sizeof a), ct_shape_str(x->shape, x->ndim, bb, sizeof bb),
                        (long long)w->shape[0], (long long)c);
    }
    if (c % groups != 0)
        return ct_error(CT_ERROR_VALUE, op, "in_channels must be divisible by groups");
    int64_t oc = w->shape[1] * groups;
    if (b && (b->ndim != 1 || b->shape[0] != oc))
        return ct_error(CT_ERROR_VALUE, op, "bias should be a 1-D tensor of size %lld", (long long)oc);
    if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return ct_error(CT_ERROR_TYPE, op, "Input type (%s) and weight type (%s) should be the same",
                        ct_dtype_name(x->dtype), ct_dtype_name(b && b->dtype != x->dtype ? b->dtype : w->dtype));
    ct_status st = ct_nn_need_number(op, x); /* integers: Note [Integer convolution] */
    if (st)
        return st;
    const ct_tensor *all[3] = {x, w, b};
    if ((st = ct_nn_same_device(op, all, 3)))
        return st;
    /* (in - 1) * stride - 2 * pad + dilation * (kernel - 1) + output_padding + 1, in 128
     * bits (Note [Checked sizes]): each term is a product of two int64 at most */
    int64_t osz[2];
    for (int i = 0; i < 2; i++) {
        __int128 v = (__int128)(x->shape[o + 1 + i] - 1) * s[i] - (__int128)2 * p[i] +
                     (__int128)d[i] * (w->shape[2 + i] - 1) + op_[i] + 1;
        if (v > INT64_MAX || v < INT64_MIN)
            return ct_error(CT_ERROR_VALUE, op,
                            "the stride, padding, dilation and kernel size make the output size overflow int64");
        osz[i] = (int64_t)v;
    }
    int64_t oh = osz[0], ow = osz[1];
    if (oh <= 0 || ow <= 0)
        return ct_error(CT_ERROR_VALUE, op, "Given input size per channel: (%lld x %lld). Calculated output size per "
                        "channel: (%lld x %lld). Output size is too small",
                        (long long)x->shape[o + 1], (long long)x->shape[o + 2], (long long)oh, (long long)ow);
    pool_shape(o == 1, o ? x->shape[0] : 1, oc, oh, ow, shape, nd);
    return CT_OK;
}

/* ------------------------------------------------------------------ embedding */

ct_status ct_embedding_backward_check(const ct_tensor *gy0, const ct_tensor *idx0, int64_t num) {
    const char *op = "embedding_backward";
    if (idx0->dtype != CT_DTYPE_INT64 && idx0->dtype != CT_DTYPE_INT32)
        return ct_error(CT_ERROR_TYPE, op, "indices must be int64 or int32, got %s", ct_dtype_name(idx0->dtype));
    if (!ct_dtype_is_floating(gy0->dtype))
        return ct_error(CT_ERROR_TYPE, op, "\"%s\" not implemented for '%s'", op, ct_dtype_name(gy0->dtype));
    if (num < 0)
        return ct_error(CT_ERROR_VALUE, op, "num_weights must be non-negative, got %lld", (long long)num);
    bool ok = gy0->ndim == idx0->ndim + 1;
    for (int d = 0; ok && d < idx0->ndim; d++)
        ok = gy0->shape[d] == idx0->shape[d];
    if (!ok) {
        char a[96], b[96];
        return ct_error(CT_ERROR_VALUE, op, "grad_output of shape %s does not match indices of shape %s",
                        ct_shape_str(gy0->shape, gy0->ndim, a, sizeof a),
                        ct_shape_str(idx0->shape, idx0->ndim, b, sizeof b));
    }
    return CT_OK;
}

ct_status ct_embedding_check(const ct_tensor *w, const ct_tensor *idx) {
    const char *op = "embedding";
    if (idx->dtype != CT_DTYPE_INT64 && idx->dtype != CT_DTYPE_INT32)
        return ct_error(CT_ERROR_TYPE, op,
                        "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, "
                        "Int; but got %s instead (while checking arguments for embedding)",
                        ct_dtype_name(idx->dtype));
    if (w->ndim != 2)
        return ct_error(CT_ERROR_VALUE, op, "'weight' must be 2-D");
    if (idx->ndim + 1 > CT_MAX_DIMS)
        return ct_error(CT_ERROR_VALUE, op, "indices have too many dimensions (%d)", idx->ndim);
    const ct_tensor *all[2] = {w, idx};
    return ct_nn_same_device(op, all, 2);
}

/* ------------------------------------------------------------------ META kernels */

static ct_status set_meta(ct_call *call, int i, const int64_t *shape, int nd, ct_dtype dt) {
    ct_tensor *o = ct_empty_impl(shape, nd, dt, CT_META);
    return o ? ct_call_set_output(call, i, o) : ct_last_status();
}

ct_status ct_meta_conv_transpose2d(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    int64_t shape[4];
    int nd;
    ct_status st = ct_convt_check(call, shape, &nd);
    return st ? st : set_meta(call, 0, shape, nd, call->in[0]->dtype);
}

ct_status ct_meta_avg_pool2d(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_avgpool_geom g;
    ct_status st = ct_avgpool_check(call->in[0], call->ints, &g);
    if (st)
        return st;
    int64_t shape[4];
    int nd;
    pool_shape(g.batched, g.n, g.c, g.oh, g.ow, shape, &nd);
    return set_meta(call, 0, shape, nd, call->in[0]->dtype);
}

static ct_status meta_like(ct_call *call, int i, const ct_tensor *t) {
    return set_meta(call, i, t->shape, t->ndim, t->dtype);
}

ct_status ct_meta_avg_pool2d_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return meta_like(call, 0, call->in[1]);
}

ct_status ct_meta_adaptive_avg_pool2d(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_adapool_geom g;
    ct_status st = ct_adapool_check(call->in[0], call->ints, &g);
    if (st)
        return st;
    int64_t shape[4];
    int nd;
    pool_shape(g.batched, g.n, g.c, g.oh, g.ow, shape, &nd);
    return set_meta(call, 0, shape, nd, call->in[0]->dtype);
}

ct_status ct_meta_adaptive_avg_pool2d_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return meta_like(call, 0, call->in[1]);
}

ct_status ct_meta_rms_norm(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_rmsnorm_geom g;
    ct_status st = ct_rmsnorm_check(call, call->in[0], call->in[1], &g);
    return st ? st : meta_like(call, 0, call->in[0]);
}

ct_status ct_meta_layer_norm(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_rmsnorm_geom g;
    ct_status st = ct_layernorm_check(call, call->in[0], call->in[1], call->in[2], &g);
    return st ? st : meta_like(call, 0, call->in[0]);
}

ct_status ct_meta_layer_norm_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_rmsnorm_geom g;
    ct_status st = ct_layernorm_check(call, call->in[1], call->in[2], call->in[3], &g);
    if (st || (st = meta_like(call, 0, call->in[1])))
        return st;
    if (call->in[2] && (st = meta_like(call, 1, call->in[2])))
        return st;
    return call->in[3] ? meta_like(call, 2, call->in[3]) : CT_OK;
}

ct_status ct_meta_gelu_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_status st = ct_gelu_backward_check(call->in[0], call->in[1], call->ints[0]);
    return st ? st : meta_like(call, 0, call->in[1]);
}

ct_status ct_meta_rms_norm_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_rmsnorm_geom g;
    ct_status st = ct_rmsnorm_check(call, call->in[1], call->in[2], &g);
    if (st)
        return st;
    if ((st = meta_like(call, 0, call->in[1])))
        return st;
    return call->in[2] ? meta_like(call, 1, call->in[2]) : CT_OK;
}

ct_dtype ct_flash_lse_dtype(ct_dtype d) { return d == CT_DTYPE_FLOAT64 ? CT_DTYPE_FLOAT64 : CT_DTYPE_FLOAT32; }

/* Note [Flash attention output layout]
 * A (b, h, l, d) output is made in the layout of the input it follows (out and gq
 * q's, gk k's, gv v's): where that input's heads are closer in memory than its rows (a
 * (b, l, h, d) projection transposed, as a transformer makes q, k and v), the output is
 * a transposed view of a dense (b, l, h, d) tensor, else dense (b, h, l, d). A
 * transformer then turns the attention's output back into (b, l, h d) rows, and q, k
 * and v's gradients into their projection's, as views with no copy: on an H200 GPT-2
 * bf16 step those copies were four a layer, 1.3 ms a step. PyTorch's flash attention
 * does the same, on the CPU too; here every backend (and the meta kernels) take their
 * outputs from this function. */
ct_tensor *ct_flash_output_like(const ct_tensor *like, const int64_t *shape, ct_device device) {
    if (like->strides[1] < like->strides[2] && shape[1] > 1 && shape[2] > 1) {
        const int64_t blhd[4] = {shape[0], shape[2], shape[1], shape[3]};
        ct_tensor *d = ct_empty_impl(blhd, 4, like->dtype, device);
        return d ? ct_transpose_impl(d, 1, 2) : NULL;
    }
    return ct_empty_impl(shape, 4, like->dtype, device);
}

ct_status ct_flash_set_out(ct_call *call, int i, const ct_tensor *like, const ct_tensor *work) {
    ct_tensor *o = ct_flash_output_like(like, work->shape, like->device);
    if (!o || !ct_copy_impl(o, work))
        return ct_last_status();
    return ct_call_set_output(call, i, o);
}

ct_status ct_flash_check(const char *op, const ct_tensor *q, const ct_tensor *k, const ct_tensor *v,
                         ct_sdpa_geom *g) {
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return ct_error(CT_ERROR_VALUE, op,
                        "Expected query, key and value to be 4-D (batch, heads, length, head_dim), but got "
                        "query.dim()=%d, key.dim()=%d and value.dim()=%d",
                        q->ndim, k->ndim, v->ndim);
    ct_status st = ct_sdpa_check(op, q, k, v, NULL, false, g);
    if (st)
        return st;
    if (g->ev != g->e)
        return ct_error(CT_ERROR_VALUE, op,
                        "Expected query, key and value to have the same head dim, but got %lld, %lld and %lld",
                        (long long)g->e, (long long)k->shape[3], (long long)g->ev);
    const ct_tensor *ts[3] = {q, k, v};
    return ct_nn_same_device(op, ts, 3);
}

/* The dropout probability of a flash call (its s[1]), checked to lie in [0, 1]. */
static ct_status flash_dropout(const char *op, const ct_call *call, double *p) {
    *p = call->nscalars > 1 ? ct_scalar_to_double(call->s[1]) : 0.0;
    if (!(*p >= 0 && *p <= 1))
        return ct_error(CT_ERROR_VALUE, op, "dropout probability has to be between 0 and 1, but got %g", *p);
    return CT_OK;
}

ct_flash_dropout_consts ct_flash_dropout_consts_of(double p) {
    ct_flash_dropout_consts c = {.threshold = ct_flash_dropout_threshold(1.0 - p),
                                 .scale = p < 1 ? 1.0 / (1.0 - p) : 0.0};
    return c;
}

void ct_flash_mask_shape(const ct_tensor *q, int64_t lk, int64_t shape[4]) {
    shape[0] = q->shape[0];
    shape[1] = q->shape[1];
    shape[2] = q->shape[2];
    shape[3] = (lk + 63) / 64;
}

/* dropout_mask as a flash forward with dropout made it. */
static ct_status check_mask(const char *op, const ct_tensor *m, const ct_tensor *q, int64_t lk) {
    int64_t want[4];
    ct_flash_mask_shape(q, lk, want);
    bool ok = m->dtype == CT_DTYPE_UINT64 && m->ndim == 4 && ct_device_equal(m->device, q->device) &&
              ct_strides_contiguous(m->shape, m->strides, m->ndim);
    for (int d = 0; ok && d < 4; d++)
        ok = m->shape[d] == want[d];
    if (!ok) {
        char a[96], b[96], d0[32], d1[32];
        return ct_error(CT_ERROR_VALUE, op,
                        "dropout_mask (%s %s on %s) must be the forward's: contiguous uint64 %s on %s",
                        ct_dtype_name(m->dtype), ct_shape_str(m->shape, m->ndim, a, sizeof a),
                        ct_device_str(m->device, d0, sizeof d0), ct_shape_str(want, 4, b, sizeof b),
                        ct_device_str(q->device, d1, sizeof d1));
    }
    return CT_OK;
}

/* in: grad_out, q, k, v; list: out, logsumexp, and dropout_mask with dropout. */
ct_status ct_flash_forward_check(const ct_call *call, ct_sdpa_geom *g, double *dropout_p) {
    const char *op = "_flash_attention_forward";
    ct_status st = ct_flash_check(op, call->in[0], call->in[1], call->in[2], g);
    return st ? st : flash_dropout(op, call, dropout_p);
}

ct_status ct_flash_backward_check(const ct_call *call, ct_sdpa_geom *g, double *dropout_p) {
    const char *op = "_flash_attention_backward";
    const ct_tensor *go = call->in[0], *q = call->in[1];
    double p;
    ct_status st = flash_dropout(op, call, &p);
    *dropout_p = p;
    if (st)
        return st;
    const int want = p > 0 ? 3 : 2;
    if (call->nlist != want || !call->list[0] || !call->list[1] || (want == 3 && !call->list[2]))
        return ct_error(CT_ERROR_VALUE, op,
                        p > 0 ? "expected the forward's out, logsumexp and dropout_mask (dropout_p = %g)"
                              : "expected the forward's out and logsumexp (dropout_p = %g: no dropout_mask)",
                        p);
    const ct_tensor *o = call->list[0], *lse = call->list[1];
    st = ct_flash_check(op, q, call->in[2], call->in[3], g);
    if (st)
        return st;
    if (want == 3 && (st = check_mask(op, call->list[2], q, g->s)))
        return st;
    const ct_tensor *pair[2] = {go, o};
    const char *names[2] = {"grad_out", "out"};
    for (int i = 0; i < 2; i++) {
        const ct_tensor *t = pair[i];
        bool same = t->ndim == 4 && t->dtype == q->dtype;
        for (int d = 0; same && d < 4; d++)
            same = t->shape[d] == q->shape[d];
        if (!same) {
            char a[96], b[96];
            return ct_error(CT_ERROR_VALUE, op, "%s (%s %s) must have the shape and dtype of query (%s %s)", names[i],
                            ct_dtype_name(t->dtype), ct_shape_str(t->shape, t->ndim, a, sizeof a),
                            ct_dtype_name(q->dtype), ct_shape_str(q->shape, q->ndim, b, sizeof b));
        }
    }
    ct_dtype ld = ct_flash_lse_dtype(q->dtype);
    if (lse->ndim != 3 || lse->shape[0] != q->shape[0] || lse->shape[1] != q->shape[1] ||
        lse->shape[2] != q->shape[2] || lse->dtype != ld) {
        char a[96];
        return ct_error(CT_ERROR_VALUE, op, "logsumexp (%s %s) must be %s of shape (%lld, %lld, %lld)",
                        ct_dtype_name(lse->dtype), ct_shape_str(lse->shape, lse->ndim, a, sizeof a),
                        ct_dtype_name(ld), (long long)q->shape[0], (long long)q->shape[1], (long long)q->shape[2]);
    }
    const ct_tensor *all[6] = {go, q, call->in[2], call->in[3], o, lse};
    return ct_nn_same_device(op, all, 6);
}

static void sdpa_out_shape(const ct_sdpa_geom *g, int64_t last, int64_t *shape, int *nd) {
    memcpy(shape, g->batch, sizeof(int64_t) * (size_t)g->nbatch);
    shape[g->nbatch] = g->l;
    shape[g->nbatch + 1] = last;
    *nd = g->nbatch + 2;
}

ct_status ct_meta_scaled_dot_product_attention(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_sdpa_geom g;
    ct_status st = ct_sdpa_check("scaled_dot_product_attention", call->in[0], call->in[1], call->in[2], call->in[3],
                                 call->ints[0] != 0, &g);
    if (st)
        return st;
    int64_t shape[CT_MAX_DIMS];
    int nd;
    sdpa_out_shape(&g, g.ev, shape, &nd);
    return set_meta(call, 0, shape, nd, call->in[0]->dtype);
}

ct_status ct_meta_scaled_dot_product_attention_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_status st;
    for (int i = 0; i < 3; i++)
        if ((st = meta_like(call, i, call->in[1 + i])))
            return st;
    return CT_OK;
}

ct_status ct_meta__flash_attention_forward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_sdpa_geom g;
    const ct_tensor *q = call->in[0];
    double p;
    ct_status st = ct_flash_forward_check(call, &g, &p);
    if (st)
        return st;
    ct_tensor *o = ct_flash_output_like(q, q->shape, CT_META);
    if (!o)
        return ct_last_status();
    if ((st = ct_call_set_output(call, 0, o)) || (st = set_meta(call, 1, q->shape, 3, ct_flash_lse_dtype(q->dtype))))
        return st;
    int64_t mshape[4];
    ct_flash_mask_shape(q, g.s, mshape);
    return p > 0 ? set_meta(call, 2, mshape, 4, CT_DTYPE_UINT64) : CT_OK;
}

ct_status ct_meta__flash_attention_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_sdpa_geom g;
    double p;
    ct_status st = ct_flash_backward_check(call, &g, &p);
    for (int i = 0; i < 3 && st == CT_OK; i++) {
        ct_tensor *o = ct_flash_output_like(call->in[1 + i], call->in[1 + i]->shape, CT_META);
        st = o ? ct_call_set_output(call, i, o) : ct_last_status();
    }
    return st;
}

ct_status ct_meta_embedding(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *w = call->in[0], *idx = call->in[1];
    ct_status st = ct_embedding_check(w, idx);
    if (st)
        return st;
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, idx->shape, sizeof(int64_t) * (size_t)idx->ndim);
    shape[idx->ndim] = w->shape[1];
    return set_meta(call, 0, shape, idx->ndim + 1, w->dtype);
}

ct_status ct_meta_embedding_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *g = call->in[0];
    int64_t shape[2] = {call->ints[0], g->ndim ? g->shape[g->ndim - 1] : 1};
    return set_meta(call, 0, shape, 2, g->dtype);
}

ct_status ct_meta_nll_loss(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_nll_geom g;
    ct_status st = ct_nll_check(call->in[0], call->in[1], call->in[2], &g);
    if (st)
        return st;
    if (call->ints[0] == CT_REDUCTION_NONE)
        return set_meta(call, 0, call->in[1]->shape, call->in[1]->ndim, call->in[0]->dtype);
    return set_meta(call, 0, NULL, 0, call->in[0]->dtype);
}

ct_status ct_meta_nll_loss_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return meta_like(call, 0, call->in[1]);
}

/* Note [cross_entropy's loss dtype]
 * The loss comes back in the logits' dtype, or in their work dtype (float32, float64
 * for float64) when the call's dtype asks for it. Autocast asks for float32 with
 * bfloat16 or float16 logits (policy FP32_OUT in src/amp/autocast.def): PyTorch casts
 * the logits to float32 first, but the kernels already widen each element as they
 * read it and round the gradient once into the logits' dtype, so the result is the
 * same bits without the float32 copy of the logits and of their gradient (6.6 GB each
 * for GPT-2's (32768, 50304) logits). */
ct_status ct_xent_loss_dtype(const ct_call *call, ct_dtype *dt) {
    const ct_tensor *x = call->in[0];
    *dt = call->dtype == CT_DTYPE_UNDEFINED ? x->dtype : call->dtype;
    if (*dt != x->dtype && *dt != ct_nn_work_dtype(x->dtype))
        return ct_error(CT_ERROR_TYPE, "cross_entropy_fused",
                        "dtype must be the input's (%s) or %s, got %s", ct_dtype_pt_name(x->dtype),
                        ct_dtype_pt_name(ct_nn_work_dtype(x->dtype)), ct_dtype_pt_name(*dt));
    return CT_OK;
}

ct_status ct_meta_cross_entropy_fused(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_xent_geom g;
    ct_status st = ct_xent_check("cross_entropy_fused", call->in[0], call->in[1], &g);
    if (st)
        return st;
    const ct_tensor *x = call->in[0];
    ct_dtype ld;
    if ((st = ct_xent_loss_dtype(call, &ld)))
        return st;
    st = call->ints[0] == CT_REDUCTION_NONE ? set_meta(call, 0, &g.n, 1, ld) : set_meta(call, 0, NULL, 0, ld);
    return st ? st : set_meta(call, 1, &g.n, 1, ct_nn_work_dtype(x->dtype));
}

ct_status ct_meta_cross_entropy_fused_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_xent_geom g;
    ct_status st = ct_xent_backward_check(call, &g);
    return st || call->mode == CT_CALL_OUT ? st : meta_like(call, 0, call->in[1]);
}

/* ------------------------------------------------------------------ gelu_mlp
 *
 * Note [GELU MLP]
 * A GPT block's MLP is proj(gelu(fc(x))). As three ops, autograd keeps fc's output for
 * the GELU's backward and the GELU's output for proj's weight gradient: two tensors of
 * (tokens, hidden_features) a block, the step's largest activations after the logits
 * (GPT-2 at B32 T1024: 192 MiB each in bfloat16, 12 blocks). gelu_mlp keeps fc's
 * output ("hidden") alone and recomputes the GELU's output in its backward, which is
 * what llm.c does and what torch.compile's partitioner chooses for a pointwise op: one
 * elementwise pass more per block in exchange for 2.25 GiB of GPT-2's peak. The op's
 * kernel is the same on every device: fc and proj are linear's products (the bias in
 * cuBLASLt's epilogue on CUDA), the GELU's output a temporary of the kernel. Its
 * derivative (src/autograd/derivatives_nn.h) is linear's and the GELU's, written with
 * ops, so it runs on any device and twice differentiates; its middle, the gradient at
 * hidden and fc's bias gradient, is one op (gelu_mlp_hidden_backward), which CUDA can
 * run as one product (Note [GELU epilogues] in src/cuda/blas.c).
 * On an H200, GPT-2 124M B32 bf16 (the CLI's GPT, bench/train_gpt2): peak allocated
 * 15551 MiB to 13248 MiB (torch.compile 15496 MiB in the same call), the step 77.3 ms
 * (the call before) to 78.7 ms: the recomputation's elementwise pass costs about 1.4
 * ms a step. */
ct_status ct_gelu_mlp_check(const ct_call *call) {
    const char *op = "gelu_mlp";
    const ct_tensor *x = call->in[0], *w1 = call->in[1], *b1 = call->in[2], *w2 = call->in[3], *b2 = call->in[4];
    char a[96];
    if (!x || !w1 || !w2)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "input, fc_weight and proj_weight must not be NULL");
    ct_status st = check_approximate(op, call->ints[0]);
    if (st)
        return st;
    if (!ct_dtype_is_floating(x->dtype))
        return ct_error(CT_ERROR_TYPE, op, "\"gelu_mlp\" not implemented for '%s'", ct_dtype_pt_name(x->dtype));
    const ct_tensor *ps[4] = {w1, b1, w2, b2};
    static const char *const names[4] = {"fc_weight", "fc_bias", "proj_weight", "proj_bias"};
    for (int i = 0; i < 4; i++)
        if (ps[i] && ps[i]->dtype != x->dtype)
            return ct_error(CT_ERROR_TYPE, op, "expected %s of scalar type %s but found %s", names[i],
                            ct_dtype_pt_name(x->dtype), ct_dtype_pt_name(ps[i]->dtype));
    if (x->ndim < 1)
        return ct_error(CT_ERROR_VALUE, op, "input must have at least one dimension");
    int64_t c = x->shape[x->ndim - 1];
    if (w1->ndim != 2 || w1->shape[1] != c)
        return ct_error(CT_ERROR_VALUE, op, "fc_weight must have shape (hidden_features, %lld), got %s", (long long)c,
                        ct_shape_str(w1->shape, w1->ndim, a, sizeof a));
    int64_t f = w1->shape[0];
    if (w2->ndim != 2 || w2->shape[1] != f)
        return ct_error(CT_ERROR_VALUE, op, "proj_weight must have shape (out_features, %lld), got %s", (long long)f,
                        ct_shape_str(w2->shape, w2->ndim, a, sizeof a));
    if (b1 && (b1->ndim != 1 || b1->shape[0] != f))
        return ct_error(CT_ERROR_VALUE, op, "fc_bias must have shape (%lld), got %s", (long long)f,
                        ct_shape_str(b1->shape, b1->ndim, a, sizeof a));
    if (b2 && (b2->ndim != 1 || b2->shape[0] != w2->shape[0]))
        return ct_error(CT_ERROR_VALUE, op, "proj_bias must have shape (%lld), got %s", (long long)w2->shape[0],
                        ct_shape_str(b2->shape, b2->ndim, a, sizeof a));
    return ct_nn_same_device(op, call->in, 5);
}

ct_status ct_meta_gelu_mlp(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_status st = ct_gelu_mlp_check(call);
    if (st)
        return st;
    const ct_tensor *x = call->in[0];
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[x->ndim - 1] = call->in[3]->shape[0];
    if ((st = set_meta(call, 0, shape, x->ndim, x->dtype)))
        return st;
    shape[x->ndim - 1] = call->in[1]->shape[0];
    return set_meta(call, 1, shape, x->ndim, x->dtype);
}

ct_status ct_gelu_mlp_hidden_backward_check(const ct_call *call) {
    const char *op = "gelu_mlp_hidden_backward";
    const ct_tensor *go = call->in[0], *w2 = call->in[1], *hid = call->in[2];
    char a[96];
    ct_status st = check_approximate(op, call->ints[0]);
    if (st)
        return st;
    if (!ct_dtype_is_floating(go->dtype))
        return ct_error(CT_ERROR_TYPE, op, "\"%s\" not implemented for '%s'", op, ct_dtype_pt_name(go->dtype));
    if (w2->dtype != go->dtype || hid->dtype != go->dtype)
        return ct_error(CT_ERROR_TYPE, op, "expected proj_weight and hidden of scalar type %s but found %s and %s",
                        ct_dtype_pt_name(go->dtype), ct_dtype_pt_name(w2->dtype), ct_dtype_pt_name(hid->dtype));
    if (go->ndim != 2 || w2->ndim != 2 || w2->shape[0] != go->shape[1])
        return ct_error(CT_ERROR_VALUE, op, "expected grad_output (rows, k) and proj_weight (k, hidden_features), got %s and %s",
                        ct_shape_str(go->shape, go->ndim, a, sizeof a),
                        ct_shape_str(w2->shape, w2->ndim, a + 48, sizeof a - 48));
    if (hid->ndim != 2 || hid->shape[0] != go->shape[0] || hid->shape[1] != w2->shape[1])
        return ct_error(CT_ERROR_VALUE, op, "hidden must have shape (%lld, %lld), got %s", (long long)go->shape[0],
                        (long long)w2->shape[1], ct_shape_str(hid->shape, hid->ndim, a, sizeof a));
    return ct_nn_same_device(op, call->in, 3);
}

ct_status ct_meta_gelu_mlp_hidden_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_status st = ct_gelu_mlp_hidden_backward_check(call);
    if (st || (st = meta_like(call, 0, call->in[2])) || !call->ints[1])
        return st;
    return set_meta(call, 1, call->in[2]->shape + 1, 1, call->in[2]->dtype);
}

/* With num_classes given the shape is known (the class values are not checked); with
 * -1 it depends on the data. */
ct_status ct_meta_one_hot(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *t = call->in[0];
    int64_t nc = call->ints[0];
    ct_status st = ct_one_hot_check(t, nc);
    if (st)
        return st;
    if (nc == -1)
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, "one_hot",
                        "the number of classes depends on the data; one_hot is not available on the meta device "
                        "without num_classes");
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    shape[t->ndim] = nc;
    return set_meta(call, 0, shape, t->ndim + 1, CT_DTYPE_INT64);
}

ct_status ct_one_hot_check(const ct_tensor *t, int64_t num_classes) {
    const char *op = "one_hot";
    if (t->dtype != CT_DTYPE_INT64)
        return ct_error(CT_ERROR_TYPE, op, "one_hot is only applicable to index tensor.");
    if (t->ndim + 1 > CT_MAX_DIMS)
        return ct_error(CT_ERROR_VALUE, op, "input has too many dimensions (%d)", t->ndim);
    if (num_classes < -1)
        return ct_error(CT_ERROR_VALUE, op, "num_classes should be positive or -1");
    return CT_OK;
}

ct_tensor *ct_one_hot_zeros(const ct_tensor *t, int64_t mn, int64_t mx, int64_t *nc) {
    const char *op = "one_hot";
    if (t->numel > 0 && mn < 0) {
        ct_error(CT_ERROR_VALUE, op, "Class values must be non-negative.");
        return NULL;
    }
    if (*nc == -1) {
        if (t->numel == 0) {
            ct_error(CT_ERROR_VALUE, op, "Can not infer total number of classes from empty tensor.");
            return NULL;
        }
        *nc = mx + 1;
    }
    if (t->numel > 0 && mx >= *nc) {
        ct_error(CT_ERROR_VALUE, op, "Class values must be smaller than num_classes.");
        return NULL;
    }
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    shape[t->ndim] = *nc;
    return ct_zeros_impl(shape, t->ndim + 1, CT_DTYPE_INT64, t->device);
}
