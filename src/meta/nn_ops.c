/* Convolution and pooling: argument checks, shape rules (shared by every backend),
 * the public wrappers and the META kernels. */
#include "core/checks.h"
#include "core/factory.h"
#include "meta/kernels.h"
#include "ctorch.h"
#include "meta/nn_ops.h"

#include <string.h>

#include "meta/nn_fused.h"
#include "dispatch/dispatch_internal.h"

/* The padded input size in + 2 * pad and the window's extent dilation * (kernel - 1) +
 * 1 (Note [Checked sizes]); false when either overflows. */
static bool window_extents(int64_t in, int64_t pad, int64_t kernel, int64_t dilation, int64_t *padded,
                           int64_t *extent) {
    int64_t p2, dk;
    return ct_size_mul(pad, 2, &p2) && ct_size_add(in, p2, padded) && ct_size_mul(dilation, kernel - 1, &dk) &&
           ct_size_add(dk, 1, extent);
}

static ct_status window_overflow(const char *op) {
    return ct_error(CT_ERROR_VALUE, op, "the padding, dilation and kernel size make the output size overflow int64");
}

ct_status ct_conv2d_geometry(const ct_call *call, ct_conv2d_geom *g) {
    const char *op = "conv2d";
    const ct_tensor *x = call->in[0], *w = call->in[1], *b = call->in[2];
    memset(g, 0, sizeof *g);
    for (int i = 0; i < 2; i++) {
        g->stride[i] = call->ints[i];
        g->padding[i] = call->ints[2 + i];
        g->dilation[i] = call->ints[4 + i];
    }
    g->groups = call->ints[6];
    if (x->ndim != 3 && x->ndim != 4)
        return ct_error(CT_ERROR_VALUE, op, "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [%d dims]",
                        x->ndim);
    if (w->ndim != 4)
        return ct_error(CT_ERROR_VALUE, op, "weight should have 4 dimensions, got %d", w->ndim);
    for (int i = 0; i < 2; i++) {
        if (g->stride[i] <= 0)
            return ct_error(CT_ERROR_VALUE, op, "non-positive stride is not supported");
        if (g->padding[i] < 0)
            return ct_error(CT_ERROR_VALUE, op, "negative padding is not supported");
        if (g->dilation[i] <= 0)
            return ct_error(CT_ERROR_VALUE, op, "dilation should be greater than zero");
    }
    if (g->groups <= 0)
        return ct_error(CT_ERROR_VALUE, op, "non-positive groups is not supported");
    g->batched = x->ndim == 4;
    int o = g->batched ? 1 : 0;
    g->n = g->batched ? x->shape[0] : 1;
    g->c = x->shape[o];
    g->h = x->shape[o + 1];
    g->w = x->shape[o + 2];
    g->oc = w->shape[0];
    g->kh = w->shape[2];
    g->kw = w->shape[3];
    if (g->c != w->shape[1] * g->groups) {
        char ws[96], xs[96];
        return ct_error(CT_ERROR_VALUE, op,
                        "Given groups=%lld, weight of size %s, expected input%s to have %lld channels, but got %lld "
                        "channels instead",
                        (long long)g->groups, ct_shape_str(w->shape, 4, ws, sizeof ws),
                        ct_shape_str(x->shape, x->ndim, xs, sizeof xs), (long long)(w->shape[1] * g->groups),
                        (long long)g->c);
    }
    if (g->oc % g->groups != 0)
        return ct_error(CT_ERROR_VALUE, op, "out_channels must be divisible by groups");
    if (b && (b->ndim != 1 || b->shape[0] != g->oc))
        return ct_error(CT_ERROR_VALUE, op, "bias should be a 1-D tensor of size %lld", (long long)g->oc);
    if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return ct_error(CT_ERROR_TYPE, op, "Input type (%s) and weight type (%s) should be the same",
                        ct_dtype_name(x->dtype), ct_dtype_name(b && b->dtype != x->dtype ? b->dtype : w->dtype));
    if (x->dtype == CT_DTYPE_BOOL) /* integers run on the CPU: Note [Integer convolution] */
        return ct_error(CT_ERROR_TYPE, op, "not implemented for 'bool'");
    int64_t ph, pw, eh, ew;
    if (!window_extents(g->h, g->padding[0], g->kh, g->dilation[0], &ph, &eh) ||
        !window_extents(g->w, g->padding[1], g->kw, g->dilation[1], &pw, &ew))
        return window_overflow(op);
    if (ph < eh || pw < ew)
        return ct_error(CT_ERROR_VALUE, op,
                        "Calculated padded input size per channel: (%lld x %lld). Kernel size: (%lld x %lld). Kernel "
                        "size can't be greater than actual input size",
                        (long long)ph, (long long)pw, (long long)eh, (long long)ew);
    if (!ct_window_out_size(g->h, g->padding[0], g->padding[0], g->kh, g->stride[0], g->dilation[0], false, &g->oh) ||
        !ct_window_out_size(g->w, g->padding[1], g->padding[1], g->kw, g->stride[1], g->dilation[1], false, &g->ow))
        return window_overflow(op);
    for (int i = 0; i < call->nin; i++)
        if (call->in[i] && !ct_device_equal(call->in[i]->device, x->device))
            return ct_error(CT_ERROR_DEVICE, op, "Expected all tensors to be on the same device");
    return CT_OK;
}

ct_status ct_conv2d_backward_geometry(const ct_call *call, ct_conv2d_geom *g) {
    if (ct_call_check_devices("conv2d_backward", call)) /* grad_output's too */
        return ct_last_status();
    /* the forward rule over in[] = (input, weight, no bias) */
    ct_call fwd = *call;
    fwd.in[0] = call->in[1];
    fwd.in[1] = call->in[2];
    fwd.in[2] = NULL;
    fwd.nin = 3;
    ct_status st = ct_conv2d_geometry(&fwd, g);
    if (st)
        return st;
    int64_t shape[4];
    int nd;
    ct_conv2d_out_shape(g, shape, &nd);
    if ((st = ct_nn_same_shape("conv2d_backward", call->in[0], shape, nd)))
        return st;
    if (call->in[0]->dtype != call->in[1]->dtype)
        return ct_error(CT_ERROR_TYPE, "conv2d_backward", "grad_output (%s) and input (%s) should have the same dtype",
                        ct_dtype_name(call->in[0]->dtype), ct_dtype_name(call->in[1]->dtype));
    return CT_OK;
}

ct_status ct_max_pool2d_backward_check(const ct_tensor *go, const ct_tensor *x, const ct_tensor *ix) {
    const char *op = "max_pool2d_backward";
    if (ix->dtype != CT_DTYPE_INT64)
        return ct_error(CT_ERROR_TYPE, op, "indices must be int64, got %s", ct_dtype_name(ix->dtype));
    bool same = go->ndim == ix->ndim && go->ndim == x->ndim && (x->ndim == 3 || x->ndim == 4);
    for (int i = 0; same && i < go->ndim; i++)
        same = go->shape[i] == ix->shape[i] && (i >= go->ndim - 2 || go->shape[i] == x->shape[i]);
    if (!same)
        return ct_error(CT_ERROR_VALUE, op, "grad_output, indices and input shapes do not fit together");
    return CT_OK;
}

void ct_conv2d_out_shape(const ct_conv2d_geom *g, int64_t *shape, int *ndim) {
    int k = 0;
    if (g->batched)
        shape[k++] = g->n;
    shape[k++] = g->oc;
    shape[k++] = g->oh;
    shape[k++] = g->ow;
    *ndim = k;
}

ct_status ct_pool2d_geometry(const ct_call *call, ct_pool2d_geom *g) {
    const char *op = "max_pool2d";
    const ct_tensor *x = call->in[0];
    memset(g, 0, sizeof *g);
    for (int i = 0; i < 2; i++) {
        g->kernel[i] = call->ints[i];
        g->stride[i] = call->ints[2 + i];
        g->padding[i] = call->ints[4 + i];
        g->dilation[i] = call->ints[6 + i];
    }
    g->ceil_mode = call->ints[8] != 0;
    if (x->ndim != 3 && x->ndim != 4)
        return ct_error(CT_ERROR_VALUE, op, "non-empty 3D or 4D (batch mode) tensor expected for input");
    for (int i = 0; i < 2; i++) {
        if (g->kernel[i] <= 0)
            return ct_error(CT_ERROR_VALUE, op, "kernel size should be greater than zero, but got kH: %lld kW: %lld",
                            (long long)g->kernel[0], (long long)g->kernel[1]);
        if (g->stride[i] <= 0)
            return ct_error(CT_ERROR_VALUE, op, "stride should be greater than zero, but got dH: %lld dW: %lld",
                            (long long)g->stride[0], (long long)g->stride[1]);
        if (g->dilation[i] <= 0)
            return ct_error(CT_ERROR_VALUE, op, "dilation should be greater than zero, but got dilationH: %lld dilationW: %lld",
                            (long long)g->dilation[0], (long long)g->dilation[1]);
        int64_t padded, extent;
        if (!window_extents(0, g->padding[i], g->kernel[i], g->dilation[i], &padded, &extent))
            return window_overflow(op);
        if (g->padding[i] < 0 || g->padding[i] > extent / 2)
            return ct_error(CT_ERROR_VALUE, op,
                            "pad should be at most half of effective kernel size, but got pad=%lld, kernel_size=%lld and "
                            "dilation=%lld",
                            (long long)g->padding[i], (long long)g->kernel[i], (long long)g->dilation[i]);
    }
    if (!ct_dtype_is_floating(x->dtype) && x->dtype != CT_DTYPE_UINT8 && !ct_dtype_is_signed(x->dtype))
        return ct_error(CT_ERROR_TYPE, op, "not implemented for '%s'", ct_dtype_name(x->dtype));
    if (x->dtype == CT_DTYPE_BOOL)
        return ct_error(CT_ERROR_TYPE, op, "not implemented for 'bool'");
    g->batched = x->ndim == 4;
    int o = g->batched ? 1 : 0;
    g->n = g->batched ? x->shape[0] : 1;
    g->c = x->shape[o];
    g->h = x->shape[o + 1];
    g->w = x->shape[o + 2];
    if (!ct_pool_out_len(g->h, g->padding[0], g->kernel[0], g->stride[0], g->dilation[0], g->ceil_mode, &g->oh) ||
        !ct_pool_out_len(g->w, g->padding[1], g->kernel[1], g->stride[1], g->dilation[1], g->ceil_mode, &g->ow))
        return window_overflow(op);
    return ct_pool_check_out(op, g->c, g->h, g->w, g->oh, g->ow);
}

bool ct_pool_out_len(int64_t in, int64_t pad, int64_t kernel, int64_t stride, int64_t dilation, bool ceil_mode,
                     int64_t *out) {
    int64_t padded, extent;
    if (!window_extents(in, pad, kernel, dilation, &padded, &extent) ||
        !ct_window_out_size(in, pad, pad, kernel, stride, dilation, ceil_mode, out))
        return false;
    if ((__int128)padded - extent + (ceil_mode ? stride - 1 : 0) < 0) /* no window fits */
        *out = 0;
    /* the last window must start inside the input or its left padding */
    if (ceil_mode && *out > 0 && (__int128)(*out - 1) * stride >= (__int128)in + pad)
        (*out)--;
    return true;
}

ct_status ct_pool_check_out(const char *op, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow) {
    if (oh < 1 || ow < 1)
        return ct_error(CT_ERROR_VALUE, op,
                        "Given input size: (%lldx%lldx%lld). Calculated output size: (%lldx%lldx%lld). Output size is "
                        "too small",
                        (long long)c, (long long)h, (long long)w, (long long)c, (long long)oh, (long long)ow);
    return CT_OK;
}

void ct_pool2d_out_shape(const ct_pool2d_geom *g, int64_t *shape, int *ndim) {
    int k = 0;
    if (g->batched)
        shape[k++] = g->n;
    shape[k++] = g->c;
    shape[k++] = g->oh;
    shape[k++] = g->ow;
    *ndim = k;
}

ct_status ct_threshold_backward_check(const ct_call *call) {
    const char *op = "threshold_backward";
    const ct_tensor *g = call->in[0], *x = call->in[1];
    bool same = g->ndim == x->ndim;
    for (int i = 0; same && i < g->ndim; i++)
        same = g->shape[i] == x->shape[i];
    if (!same) {
        char a[96], b[96];
        return ct_error(CT_ERROR_VALUE, op, "grad_output has shape %s but input has shape %s",
                        ct_shape_str(g->shape, g->ndim, a, sizeof a), ct_shape_str(x->shape, x->ndim, b, sizeof b));
    }
    if (g->dtype != x->dtype)
        return ct_error(CT_ERROR_TYPE, op, "grad_output (%s) and input (%s) should have the same dtype",
                        ct_dtype_name(g->dtype), ct_dtype_name(x->dtype));
    if (!ct_dtype_is_floating(g->dtype))
        return ct_error(CT_ERROR_TYPE, op, "not implemented for '%s'", ct_dtype_name(g->dtype));
    if (!ct_device_equal(g->device, x->device))
        return ct_error(CT_ERROR_DEVICE, op, "Expected all tensors to be on the same device");
    return CT_OK;
}

/* ------------------------------------------------------------------ META */

ct_status ct_meta_conv2d(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_conv2d_geom g;
    ct_status st = ct_conv2d_geometry(call, &g);
    if (st)
        return st;
    int64_t shape[4];
    int nd;
    ct_conv2d_out_shape(&g, shape, &nd);
    ct_tensor *o = ct_empty_impl(shape, nd, call->in[0]->dtype, CT_META);
    return o ? ct_call_set_output(call, 0, o) : ct_last_status();
}

ct_status ct_meta_conv2d_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *x = call->in[1], *w = call->in[2];
    ct_conv2d_geom g; /* the same checks as every backend's kernel */
    ct_status st = ct_conv2d_backward_geometry(call, &g);
    if (st)
        return st;
    if (call->ints[7] && ct_call_set_output(call, 0, ct_empty_like_impl(x)))
        return ct_last_status();
    if (call->ints[8] && ct_call_set_output(call, 1, ct_empty_like_impl(w)))
        return ct_last_status();
    if (call->ints[9] && ct_call_set_output(call, 2, ct_empty_impl(&w->shape[0], 1, w->dtype, CT_META)))
        return ct_last_status();
    return CT_OK;
}

ct_status ct_meta_max_pool2d_with_indices(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_pool2d_geom g;
    ct_status st = ct_pool2d_geometry(call, &g);
    if (st)
        return st;
    int64_t shape[4];
    int nd;
    ct_pool2d_out_shape(&g, shape, &nd);
    ct_tensor *o = ct_empty_impl(shape, nd, call->in[0]->dtype, CT_META);
    ct_tensor *i = ct_empty_impl(shape, nd, CT_DTYPE_INT64, CT_META);
    if (!o || !i)
        return ct_last_status();
    ct_call_set_output(call, 0, o);
    return ct_call_set_output(call, 1, i);
}

ct_status ct_meta_max_pool2d_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_tensor *o = ct_empty_like_impl(call->in[1]);
    return o ? ct_call_set_output(call, 0, o) : ct_last_status();
}

ct_status ct_meta_threshold_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_status st = ct_threshold_backward_check(call);
    if (st)
        return st;
    ct_tensor *o = ct_empty_like_impl(call->in[0]);
    return o ? ct_call_set_output(call, 0, o) : ct_last_status();
}

