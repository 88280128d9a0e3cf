/* The host half of the fused normalisation ops and activation gradients on CUDA:
 * rms_norm, layer_norm and their backward ops, gelu_backward, threshold_backward.
 * Argument checks are the CPU's (src/meta/nn_fused.c, src/meta/nn_ops.c); inputs are
 * made contiguous in the CPU's work dtype (float32, or float64 for float64; layer_norm
 * keeps float16/bfloat16 as they are, Note [layer_norm on CUDA] in norm.cu), and
 * weight/bias gradients are summed in float64 before the conversion to their dtype,
 * as on the CPU. */
#include <string.h>

#include "core/factory.h"
#include "ctorch/nn.h"
#include "ctorch/ops.h"
#include "cuda/cuda_ops.h"
#include "cuda/nn_rt.h"
#include "meta/nn_fused.h"
#include "meta/nn_ops.h"

static const void *ptr_or_null(const ct_tensor *t) { return t ? ct_tensor_ptr(t) : NULL; }

/* Device scratch for a backward pass (ct_cuda_norm_scratch bytes), as a byte tensor. */
static ct_tensor *norm_scratch(const ct_rmsnorm_geom *g, ct_device dev) {
    int64_t n = (int64_t)ct_cuda_norm_scratch(g->rows, g->cols);
    return ct_empty_impl(&n, 1, CT_DTYPE_UINT8, dev);
}

/* ------------------------------------------------------------------ rms_norm */

static ct_status rms_norm_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_rmsnorm_geom g;
    const ct_tensor *x0 = call->in[0], *w0 = call->in[1];
    ct_status st = ct_rmsnorm_check(call, x0, w0, &g);
    if (st)
        return st;
    if (!ct_cuda_use_device("rms_norm", x0->device.index))
        return ct_last_status();
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd), *w = ct_nn_as_work(w0, wd);
    ct_tensor *y = ct_empty_impl(x0->shape, x0->ndim, wd, x0->device);
    st = x && y && (!w0 || w) ? ct_cuda_rms_norm_fwd(wd, ct_tensor_ptr(x), ptr_or_null(w), ct_tensor_ptr(y), g.rows,
                                                     g.cols, g.eps, x0->device.index)
                              : ct_last_status();
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, y, x0->dtype);
    ct_scope_end();
    return st;
}

static ct_status rms_norm_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_rmsnorm_geom g;
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1], *w0 = call->in[2];
    ct_status st = ct_rmsnorm_backward_check(call, &g);
    if (st)
        return st;
    if (!ct_cuda_use_device("rms_norm_backward", x0->device.index))
        return ct_last_status();
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_device dev = x0->device;
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd), *w = ct_nn_as_work(w0, wd), *gy = ct_nn_as_work(gy0, wd);
    ct_tensor *gx = ct_empty_impl(x0->shape, x0->ndim, wd, dev);
    ct_tensor *gw = w0 ? ct_zeros_impl(w0->shape, w0->ndim, CT_DTYPE_FLOAT64, dev) : NULL;
    ct_tensor *scratch = norm_scratch(&g, dev);
    bool ok = x && gy && gx && scratch && (!w0 || (w && gw));
    st = ok ? ct_cuda_rms_norm_bwd(wd, ct_tensor_ptr(gy), ct_tensor_ptr(x), ptr_or_null(w), ct_tensor_ptr(gx),
                                   gw ? (double *)ct_tensor_ptr(gw) : NULL, g.rows, g.cols, g.eps,
                                   ct_tensor_ptr(scratch), dev.index)
            : ct_last_status();
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, gx, x0->dtype);
    if (st == CT_OK && gw)
        st = ct_nn_set_out(call, 1, gw, w0->dtype);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ layer_norm */

static ct_status layer_norm_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_rmsnorm_geom g;
    const ct_tensor *x0 = call->in[0], *w0 = call->in[1], *b0 = call->in[2];
    ct_status st = ct_layernorm_check(call, x0, w0, b0, &g);
    if (st)
        return st;
    if (!ct_cuda_use_device("layer_norm", x0->device.index))
        return ct_last_status();
    /* Note [layer_norm on CUDA] in norm.cu: float16/bfloat16 stay as they are */
    ct_dtype wd = ct_cuda_layer_norm_native(x0->dtype, g.cols) ? x0->dtype : ct_nn_work_dtype(x0->dtype);
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd), *w = ct_nn_as_work(w0, wd), *b = ct_nn_as_work(b0, wd);
    ct_tensor *y = ct_empty_impl(x0->shape, x0->ndim, wd, x0->device);
    bool ok = x && y && (!w0 || w) && (!b0 || b);
    st = ok ? ct_cuda_layer_norm_fwd(wd, ct_tensor_ptr(x), ptr_or_null(w), ptr_or_null(b), ct_tensor_ptr(y), g.rows,
                                     g.cols, g.eps, x0->device.index)
            : ct_last_status();
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, y, x0->dtype);
    ct_scope_end();
    return st;
}

static ct_status layer_norm_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_rmsnorm_geom g;
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1], *w0 = call->in[2], *b0 = call->in[3];
    ct_status st = ct_layernorm_backward_check(call, &g);
    if (st)
        return st;
    if (!ct_cuda_use_device("layer_norm_backward", x0->device.index))
        return ct_last_status();
    ct_dtype wd = ct_cuda_layer_norm_native(x0->dtype, g.cols) ? x0->dtype : ct_nn_work_dtype(x0->dtype);
    ct_device dev = x0->device;
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd), *w = ct_nn_as_work(w0, wd), *gy = ct_nn_as_work(gy0, wd);
    /* zeros: with no rows or columns nothing is written, as on the CPU */
    ct_tensor *gx = g.rows > 0 && g.cols > 0 ? ct_empty_impl(x0->shape, x0->ndim, wd, dev)
                                             : ct_zeros_impl(x0->shape, x0->ndim, wd, dev);
    ct_tensor *gw = w0 ? ct_zeros_impl(w0->shape, w0->ndim, CT_DTYPE_FLOAT64, dev) : NULL;
    ct_tensor *gb = b0 ? ct_zeros_impl(b0->shape, b0->ndim, CT_DTYPE_FLOAT64, dev) : NULL;
    ct_tensor *scratch = norm_scratch(&g, dev);
    bool ok = x && gy && gx && scratch && (!w0 || (w && gw)) && (!b0 || gb);
    st = ok ? ct_cuda_layer_norm_bwd(wd, ct_tensor_ptr(gy), ct_tensor_ptr(x), ptr_or_null(w), ct_tensor_ptr(gx),
                                     gw ? (double *)ct_tensor_ptr(gw) : NULL, gb ? (double *)ct_tensor_ptr(gb) : NULL,
                                     g.rows, g.cols, g.eps, ct_tensor_ptr(scratch), dev.index)
            : ct_last_status();
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, gx, x0->dtype);
    if (st == CT_OK && gw)
        st = ct_nn_set_out(call, 1, gw, w0->dtype);
    if (st == CT_OK && gb)
        st = ct_nn_set_out(call, 2, gb, b0->dtype);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ activation gradients */

static ct_status gelu_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1];
    ct_status st = ct_gelu_backward_check(gy0, x0, call->ints[0]);
    if (st)
        return st;
    if (!ct_cuda_use_device("gelu_backward", x0->device.index))
        return ct_last_status();
    /* float16/bfloat16 operands of one dtype are read as they are (the kernel widens) */
    ct_dtype wd = gy0->dtype == x0->dtype ? x0->dtype : ct_nn_work_dtype(x0->dtype);
    bool tanh_form = call->ints[0] == CT_GELU_APPROXIMATE_TANH;
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd), *gy = ct_nn_as_work(gy0, wd);
    ct_tensor *gx = ct_empty_impl(x0->shape, x0->ndim, wd, x0->device);
    st = x && gy && gx ? ct_cuda_gelu_bwd(wd, ct_tensor_ptr(gy), ct_tensor_ptr(x), ct_tensor_ptr(gx), x0->numel,
                                          tanh_form, x0->device.index)
                       : ct_last_status();
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, gx, x0->dtype);
    ct_scope_end();
    return st;
}

static ct_status threshold_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_status st = ct_threshold_backward_check(call);
    if (st)
        return st;
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1];
    if (!ct_cuda_use_device("threshold_backward", x0->device.index))
        return ct_last_status();
    ct_dtype dt = gy0->dtype, wd = ct_nn_work_dtype(dt);
    ct_scope_begin();
    ct_tensor *gy = ct_nn_as_work(gy0, wd), *x = ct_nn_as_work(x0, wd);
    ct_tensor *out = ct_empty_impl(gy0->shape, gy0->ndim, wd, gy0->device);
    st = gy && x && out ? ct_cuda_threshold_bwd(wd, ct_tensor_ptr(gy), ct_tensor_ptr(x), ct_scalar_to_double(call->s[0]),
                                                ct_tensor_ptr(out), out->numel, x0->device.index)
                        : ct_last_status();
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, out, dt);
    ct_scope_end();
    return st;
}

void ct_cuda_register_norm(void) {
    ct_dispatch_register_default(CT_OP_rms_norm, CT_KEY_CUDA, rms_norm_kernel, NULL);
    ct_dispatch_register_default(CT_OP_rms_norm_backward, CT_KEY_CUDA, rms_norm_backward_kernel, NULL);
    ct_dispatch_register_default(CT_OP_layer_norm, CT_KEY_CUDA, layer_norm_kernel, NULL);
    ct_dispatch_register_default(CT_OP_layer_norm_backward, CT_KEY_CUDA, layer_norm_backward_kernel, NULL);
    ct_dispatch_register_default(CT_OP_gelu_backward, CT_KEY_CUDA, gelu_backward_kernel, NULL);
    ct_dispatch_register_default(CT_OP_threshold_backward, CT_KEY_CUDA, threshold_backward_kernel, NULL);
}
