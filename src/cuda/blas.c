/* CUDA kernels of the matrix products: the shape rules are the op library's
 * (ops/linalg.c), the products run in cuBLASLt (blas.cu). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/factory.h"
#include "ctorch/ops.h"
#include "cuda/cuda_ops.h"
#include "dispatch/dispatch_internal.h"
#include "meta/linalg.h"
#include "meta/nn_fused.h"

static bool unit_or_single(int64_t size, int64_t stride) { return size <= 1 || stride == 1; }

/* Whether a 2-d slice (rows x cols, strides s0, s1) can go to BLAS as it is. */
static bool blas_ok(int64_t rows, int64_t cols, int64_t s0, int64_t s1) {
    int64_t r = rows > 1 ? rows : 1, c = cols > 1 ? cols : 1;
    if (unit_or_single(cols, s1) && (rows <= 1 || s0 >= c))
        return true;
    return unit_or_single(rows, s0) && (cols <= 1 || s1 >= r);
}

/* t itself when its matrices have a BLAS layout and its batch stride is usable, else a
 * contiguous copy (in the current scope). */
static const ct_tensor *blas_operand(const ct_tensor *t) {
    int b = t->ndim == 3;
    bool ok = blas_ok(t->shape[b], t->shape[b + 1], t->strides[b], t->strides[b + 1]);
    if (b && t->shape[0] > 1 && t->strides[0] == 0)
        ok = false; /* an expanded batch: give cuBLASLt real matrices */
    return ok ? t : ct_contiguous(t);
}

/* Products that took the bias epilogue (Note [Bias epilogue] in blas.cu). */
static atomic_uint_fast64_t bias_epilogues;

uint64_t ct_cuda_bias_epilogue_count(void) { return (uint64_t)atomic_load(&bias_epilogues); }

static atomic_uint_fast64_t gelu_epilogues;

uint64_t ct_cuda_gelu_epilogue_count(void) { return (uint64_t)atomic_load(&gelu_epilogues); }

/* work (contiguous, out's shape) = alpha * A @ B + beta * work, or + bias (m elements,
 * beta 0) through the epilogue. */
static ct_status run_gemm_aux(ct_dtype dt, const ct_tensor *out, const ct_tensor *A, const ct_tensor *B,
                              ct_tensor *work, int64_t n, int64_t m, int64_t k, double alpha, double beta,
                              const void *bias, int act, void *aux, int device, const char *op) {
    bool batched = out->ndim == 3;
    ct_cuda_gemm g;
    memset(&g, 0, sizeof g);
    g.dtype = dt;
    g.nb = batched ? out->shape[0] : 1;
    g.n = n;
    g.m = m;
    g.k = k;
    g.a = ct_tensor_ptr(A);
    g.a_s0 = A->strides[batched];
    g.a_s1 = A->strides[batched + 1];
    g.a_sb = batched ? A->strides[0] : 0;
    g.b = ct_tensor_ptr(B);
    g.b_s0 = B->strides[batched];
    g.b_s1 = B->strides[batched + 1];
    g.b_sb = batched ? B->strides[0] : 0;
    g.c = ct_tensor_ptr(work);
    g.ldc = m > 1 ? m : 1;
    g.c_sb = n * m;
    g.alpha = alpha;
    g.beta = beta;
    g.bias = bias;
    g.act = act;
    g.aux = aux;
    g.ldaux = aux ? m : 0;
    return ct_cuda_gemm_run(&g, device, op);
}

static ct_status run_gemm(ct_dtype dt, const ct_tensor *out, const ct_tensor *A, const ct_tensor *B, ct_tensor *work,
                          int64_t n, int64_t m, int64_t k, double alpha, double beta, const void *bias, int act,
                          int device, const char *op) {
    return run_gemm_aux(dt, out, A, B, work, n, m, k, alpha, beta, bias, act, NULL, device, op);
}

/* run_gemm without a bias, retried on fresh copies when cuBLASLt has no algorithm for
 * the operands' alignments. */
static ct_status plain_gemm(ct_dtype dt, const ct_tensor *out, const ct_tensor *A, const ct_tensor *B, ct_tensor *work,
                            int64_t n, int64_t m, int64_t k, double alpha, double beta, int device, const char *op) {
    ct_status st = run_gemm(dt, out, A, B, work, n, m, k, alpha, beta, NULL, CT_CUDA_ACT_NONE, device, op);
    if (st != CT_ERROR_NOT_IMPLEMENTED)
        return st;
    /* Fresh contiguous copies are aligned to the allocator's 512 bytes. */
    ct_clear_error();
    ct_tensor *fa = ct_clone(A), *fb = fa ? ct_clone(B) : NULL;
    ct_tensor *fw = fb ? ct_clone(work) : NULL;
    st = fw ? run_gemm(dt, out, fa, fb, fw, n, m, k, alpha, beta, NULL, CT_CUDA_ACT_NONE, device, op)
            : ct_last_status();
    if (st == CT_OK && !ct_copy_(work, fw))
        st = ct_last_status();
    return st;
}

/* Whether addmm's c can go to the bias epilogue (Note [Bias epilogue] in blas.cu):
 * beta 1, a 2-d product of at least 2 x 2 x 2 (degenerate ones gain nothing from
 * skipping the copy, and cuBLASLt refuses some of them with an epilogue set), and c
 * one packed row of out's dtype broadcast over the rows: shape (m), (1, m), or
 * expanded from one, in memory apart from out's. */
static bool bias_row(const ct_tensor *c, const ct_tensor *out, int64_t k, double beta) {
    if (!c || beta != 1 || out->ndim != 2 || c->dtype != out->dtype || c->device.type != CT_DEVICE_CUDA)
        return false;
    if (out->shape[0] < 2 || out->shape[1] < 2 || k < 2 || c->storage == out->storage)
        return false;
    int64_t s[2];
    return ct_broadcast_strides(c, out->shape, 2, s) && s[0] == 0 && s[1] == 1;
}

/* The device a call runs on: its first CUDA input's (or output's). */
static ct_device call_device(const ct_call *call) {
    for (int i = 0; i < call->nin; i++)
        if (call->in[i] && call->in[i]->device.type == CT_DEVICE_CUDA)
            return call->in[i]->device;
    for (int i = 0; i < call->nout; i++)
        if (call->out[i] && call->out[i]->device.type == CT_DEVICE_CUDA)
            return call->out[i]->device;
    return CT_CUDA(0);
}

/* out = beta * c + alpha * a @ b, then act (CT_CUDA_ACT_*: addmm_activation) in the
 * epilogue when it applies, else as a kernel of its own afterwards. */
static ct_status product(ct_call *call, const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, double alpha,
                         double beta, int act) {
    ct_device dev = call_device(call);
    const char *op = ct_op_name(call->op);
    for (int i = 0; i < call->nin; i++)
        if (call->in[i]->device.type != CT_DEVICE_CUDA) { /* CPU scalars are not matrices */
            char x[32], y[32];
            return ct_error(CT_ERROR_DEVICE, op,
                            "Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                            ct_device_str(dev, x, sizeof x), ct_device_str(call->in[i]->device, y, sizeof y));
        }
    ct_status st = ct_linalg_prepare_out(call, dev);
    if (st)
        return st;
    if (!ct_dtype_is_floating(a->dtype))
        return ct_error(CT_ERROR_TYPE, op, "\"%s_cuda\" not implemented for '%s'", op, ct_dtype_name(a->dtype));
    if (!ct_cuda_use_device(op, dev.index))
        return ct_last_status();
    ct_tensor *out = call->out[0];
    ct_scope_begin();
    ct_tensor *work = ct_tensor_is_contiguous(out) ? out : ct_empty_impl(out->shape, out->ndim, out->dtype, dev);
    bool use_c = c && beta != 0;
    /* cuBLASLt's GELU epilogue is not float64-exact (2e-10 relative measured): float64
     * keeps the CPU's formula as a kernel of its own. */
    bool epilogue = use_c && bias_row(c, out, a->shape[a->ndim - 1], beta) &&
                    !(act == CT_CUDA_ACT_GELU && out->dtype == CT_DTYPE_FLOAT64);
    if (work && use_c && !epilogue && !ct_copy_(work, c))
        work = NULL;
    const ct_tensor *A = work ? blas_operand(a) : NULL;
    const ct_tensor *B = A ? blas_operand(b) : NULL;
    if (!B) {
        ct_scope_end();
        return ct_last_status();
    }
    bool batched = out->ndim == 3;
    int64_t n = out->shape[batched], m = out->shape[batched + 1], k = A->shape[A->ndim - 1];
    if (out->numel == 0) {
        st = CT_OK;
    } else if (k == 0) { /* an empty sum: beta * C */
        if (!use_c)
            st = ct_fill_impl(work, ct_scalar_int(0)) ? CT_OK : ct_last_status();
        else if (beta != 1)
            st = ct_mul_scalar_(work, ct_scalar_float(beta)) ? CT_OK : ct_last_status();
    } else if (epilogue) {
        st = run_gemm(a->dtype, out, A, B, work, n, m, k, alpha, 0.0, ct_tensor_ptr(c), act, dev.index, op);
        if (st == CT_OK) {
            atomic_fetch_add(&bias_epilogues, 1);
            act = CT_CUDA_ACT_NONE; /* done */
        } else if (st == CT_ERROR_NOT_IMPLEMENTED) { /* no algorithm with the epilogue: the copy after all */
            ct_clear_error();
            st = ct_copy_(work, c) ? plain_gemm(a->dtype, out, A, B, work, n, m, k, alpha, beta, dev.index, op)
                                   : ct_last_status();
        }
    } else {
        st = plain_gemm(a->dtype, out, A, B, work, n, m, k, alpha, use_c ? beta : 0.0, dev.index, op);
    }
    if (st == CT_OK && work != out && !ct_copy_(out, work))
        st = ct_last_status();
    if (st == CT_OK && act != CT_CUDA_ACT_NONE)
        st = ct_linalg_activation_(out, act == CT_CUDA_ACT_GELU);
    ct_scope_end();
    return st;
}

ct_status ct_cuda_mm(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return product(call, NULL, call->in[0], call->in[1], 1.0, 0.0, CT_CUDA_ACT_NONE);
}

ct_status ct_cuda_bmm(ct_keyset ks, ct_call *call, void *ud) { return ct_cuda_mm(ks, call, ud); }

ct_status ct_cuda_addmm(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return product(call, call->in[0], call->in[1], call->in[2], ct_scalar_to_double(call->s[1]),
                   ct_scalar_to_double(call->s[0]), CT_CUDA_ACT_NONE);
}

static ct_status addmm_activation_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return product(call, call->in[0], call->in[1], call->in[2], ct_scalar_to_double(call->s[1]),
                   ct_scalar_to_double(call->s[0]), call->ints[0] ? CT_CUDA_ACT_GELU : CT_CUDA_ACT_RELU);
}

ct_status ct_cuda_baddbmm(ct_keyset ks, ct_call *call, void *ud) { return ct_cuda_addmm(ks, call, ud); }

ct_status ct_cuda_dot(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_device dev = call_device(call);
    const ct_tensor *a = call->in[0], *b = call->in[1];
    for (int i = 0; i < 2; i++)
        if (call->in[i]->device.type != CT_DEVICE_CUDA) {
            char x[32], y[32];
            return ct_error(CT_ERROR_DEVICE, "dot",
                            "Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                            ct_device_str(dev, x, sizeof x), ct_device_str(call->in[i]->device, y, sizeof y));
        }
    ct_status st = ct_linalg_prepare_out(call, dev);
    if (st)
        return st;
    if (!ct_dtype_is_floating(a->dtype))
        return ct_error(CT_ERROR_TYPE, "dot", "\"dot\" not implemented for '%s'", ct_dtype_name(a->dtype));
    if (!ct_cuda_use_device("dot", dev.index))
        return ct_last_status();
    ct_tensor *out = call->out[0];
    if (a->shape[0] == 0)
        return ct_fill_impl(out, ct_scalar_int(0)) ? CT_OK : ct_last_status();
    return ct_cuda_dot_run(a->dtype, a->shape[0], ct_tensor_ptr(a), a->strides[0], ct_tensor_ptr(b), b->strides[0],
                           ct_tensor_ptr(out), dev.index);
}

/* ------------------------------------------------------------------ gelu_mlp
 *
 * Note [GELU epilogues]
 * gelu_mlp (Note [GELU MLP] in src/meta/nn_fused.c) runs its GELU inside the products
 * on CUDA. The forward's fc product takes cuBLASLt's GELU_AUX_BIAS epilogue: it writes
 * gelu(x fc_weight^T + fc_bias) as its result, the input of proj's product, and the
 * GELU's input (hidden, which the backward keeps) as its auxiliary output, so no
 * elementwise pass reads and writes the (tokens, hidden_features) tensors. The
 * backward's product grad_output proj_weight takes DGELU_BGRAD: it multiplies the
 * product by gelu'(hidden) as it writes it and sums its columns into fc's bias
 * gradient, in place of gelu_backward and a column sum. cuBLASLt's GELU is the tanh
 * form; the erf form, float64, products of fewer than 2 rows, columns or depth,
 * hidden widths that are no multiple of 8 (the auxiliary matrix's leading dimension)
 * and whatever cuBLASLt refuses take the ops instead (the composite kernel).
 *
 * They are off unless CT_CUDA_GELU_EPILOGUE=1: on an H200 (cuBLASLt 13.1) GPT-2 124M's
 * B32 bf16 step took 81.7 and 81.4 ms with them and 78.7 ms with the ops (the GELU's
 * output recomputed by an elementwise pass, gelu_backward and a column sum), in the
 * same call: the heuristic's algorithms for these epilogues are slower than the plain
 * products by more than the passes they save. */
static bool gelu_epilogue_ok(ct_dtype dt, int64_t approximate, int64_t rows, int64_t k, int64_t f) {
    static int enabled = -1;
    if (enabled < 0) {
        const char *e = getenv("CT_CUDA_GELU_EPILOGUE");
        enabled = e && strcmp(e, "1") == 0;
    }
    /* dt is floating: the op's check ran */
    return enabled && approximate == CT_GELU_APPROXIMATE_TANH && dt != CT_DTYPE_FLOAT64 && rows >= 2 && k >= 2 &&
           f >= 2 && f % 8 == 0;
}

/* A packed 1-d copy of bias (or bias itself), or NULL for none. */
static const ct_tensor *packed_bias(const ct_tensor *bias) {
    return !bias || (bias->ndim == 1 && bias->strides[0] == 1) ? bias : ct_contiguous(bias);
}

static ct_status gelu_mlp_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_status st = ct_gelu_mlp_check(call);
    if (st)
        return st;
    const ct_tensor *x = call->in[0], *w1 = call->in[1];
    const int64_t c = w1->shape[1], f = w1->shape[0], rows = c > 0 ? x->numel / c : 0;
    if (!gelu_epilogue_ok(x->dtype, call->ints[0], rows, c, f))
        return ct_gelu_mlp_ops(call);
    if (!ct_cuda_use_device("gelu_mlp", x->device.index))
        return ct_last_status();
    ct_scope_begin();
    const ct_tensor *x2 = ct_reshape(x, CT_SHAPE(rows, c)), *A = x2 ? blas_operand(x2) : NULL;
    const ct_tensor *w1t = A ? ct_t(w1) : NULL, *B = w1t ? blas_operand(w1t) : NULL;
    const ct_tensor *b1 = B ? packed_bias(call->in[2]) : NULL;
    ct_tensor *h = B ? ct_empty_impl(CT_SHAPE(rows, f), x->dtype, x->device) : NULL;
    ct_tensor *pre = h ? ct_empty_impl(CT_SHAPE(rows, f), x->dtype, x->device) : NULL;
    st = pre && (b1 || !call->in[2]) ? CT_OK : ct_last_status();
    if (st == CT_OK)
        st = run_gemm_aux(x->dtype, h, A, B, h, rows, f, c, 1.0, 0.0, b1 ? ct_tensor_ptr(b1) : NULL,
                          CT_CUDA_ACT_GELU_AUX, ct_tensor_ptr(pre), x->device.index, "gelu_mlp");
    if (st == CT_ERROR_NOT_IMPLEMENTED) { /* cuBLASLt has no such product: the ops */
        ct_clear_error();
        ct_scope_end();
        return ct_gelu_mlp_ops(call);
    }
    if (st == CT_OK)
        atomic_fetch_add(&gelu_epilogues, 1);
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    ct_tensor *y = st == CT_OK ? ct_linear(h, call->in[3], call->in[4]) : NULL;
    shape[x->ndim - 1] = call->in[3]->shape[0];
    y = y ? ct_reshape(y, shape, x->ndim) : NULL;
    shape[x->ndim - 1] = f;
    ct_tensor *hidden = y ? ct_reshape(pre, shape, x->ndim) : NULL;
    if (st == CT_OK)
        st = hidden ? ct_call_set_output(call, 0, y) : ct_last_status();
    if (st == CT_OK)
        st = ct_call_set_output(call, 1, hidden);
    ct_scope_end();
    return st;
}

/* Note [GELU epilogues]: (grad_output @ proj_weight) * gelu'(hidden) in one product,
 * fc's bias gradient as its column sums. */
static ct_status gelu_mlp_hidden_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_status st = ct_gelu_mlp_hidden_backward_check(call);
    if (st)
        return st;
    const ct_tensor *go = call->in[0], *w2 = call->in[1], *hid = call->in[2];
    const int64_t rows = go->shape[0], k = go->shape[1], f = w2->shape[1];
    if (!gelu_epilogue_ok(go->dtype, call->ints[0], rows, k, f))
        return ct_gelu_mlp_hidden_backward_ops(call);
    if (!ct_cuda_use_device("gelu_mlp_hidden_backward", go->device.index))
        return ct_last_status();
    ct_scope_begin();
    const ct_tensor *A = blas_operand(go), *B = A ? blas_operand(w2) : NULL;
    const ct_tensor *aux = B ? ct_contiguous(hid) : NULL;
    ct_tensor *d = aux ? ct_empty_impl(CT_SHAPE(rows, f), go->dtype, go->device) : NULL;
    ct_tensor *db = d && call->ints[1] ? ct_empty_impl(CT_SHAPE(f), go->dtype, go->device) : NULL;
    st = d && (db || !call->ints[1]) ? CT_OK : ct_last_status();
    if (st == CT_OK)
        st = run_gemm_aux(go->dtype, d, A, B, d, rows, f, k, 1.0, 0.0, db ? ct_tensor_ptr(db) : NULL,
                          CT_CUDA_ACT_DGELU, (void *)ct_tensor_ptr(aux), go->device.index, "gelu_mlp_hidden_backward");
    if (st == CT_ERROR_NOT_IMPLEMENTED) {
        ct_clear_error();
        ct_scope_end();
        return ct_gelu_mlp_hidden_backward_ops(call);
    }
    if (st == CT_OK)
        atomic_fetch_add(&gelu_epilogues, 1);
    if (st == CT_OK)
        st = ct_call_set_output(call, 0, d);
    if (st == CT_OK && db)
        st = ct_call_set_output(call, 1, db);
    ct_scope_end();
    return st;
}

void ct_cuda_register_kernels(void) {
    ct_dispatch_register_default(CT_OP_mm, CT_KEY_CUDA, ct_cuda_mm, NULL);
    ct_dispatch_register_default(CT_OP_bmm, CT_KEY_CUDA, ct_cuda_bmm, NULL);
    ct_dispatch_register_default(CT_OP_dot, CT_KEY_CUDA, ct_cuda_dot, NULL);
    ct_dispatch_register_default(CT_OP_addmm, CT_KEY_CUDA, ct_cuda_addmm, NULL);
    ct_dispatch_register_default(CT_OP_baddbmm, CT_KEY_CUDA, ct_cuda_baddbmm, NULL);
    ct_dispatch_register_default(CT_OP_addmm_activation, CT_KEY_CUDA, addmm_activation_kernel, NULL);
    ct_dispatch_register_default(CT_OP_gelu_mlp, CT_KEY_CUDA, gelu_mlp_kernel, NULL);
    ct_dispatch_register_default(CT_OP_gelu_mlp_hidden_backward, CT_KEY_CUDA, gelu_mlp_hidden_backward_kernel, NULL);
    ct_cuda_register_indexing();
    ct_cuda_register_nn();
}
