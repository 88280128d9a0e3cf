/* The host half of convolution on CUDA: conv2d, conv2d_backward and
 * conv_transpose2d. Shape rules are the CPU's (ct_conv2d_geometry, ct_convt_check).
 *
 * Note [GPU convolution]
 * im2col over a chunk of nb images builds one column matrix for all of them: rows
 * (c, i, j), columns (image, oy, ox). Group g's rows are the contiguous block of its
 * input channels, so one batched product over the groups, bmm of the weights viewed
 * (groups, oc/g, c/g * kh * kw) by the columns viewed (groups, c/g * kh * kw, nb * oh *
 * ow), gives the output as (oc, nb, oh * ow), copied into (nb, oc, oh, ow). The batch
 * of images thus becomes the product's long dimension (one large product rather than
 * one per image). The backward pass uses the same layout: gW = gY cols^T (summed over
 * the chunks), gcols = W^T gY and col2im, a gather per input pixel in a fixed order;
 * the bias gradient is a CUDA sum. Chunks hold at most CT_CONV_COLS_MAX column
 * elements (and at least one image), bounding the extra memory. As on the CPU,
 * float16/bfloat16 compute in float32; products go through cuBLASLt (no cuDNN), at
 * full float32 precision unless TF32 is allowed (docs/cuda.md). */
#include <string.h>

#include "core/factory.h"
#include "ctorch/nn.h"
#include "ctorch/ops.h"
#include "cuda/cuda_ops.h"
#include "cuda/nn_rt.h"
#include "meta/nn_fused.h"
#include "meta/nn_ops.h"

/* Column elements per chunk: 2^26 (256 MB in float32). */
#define CT_CONV_COLS_MAX ((int64_t)1 << 26)

/* Images per chunk (Note [GPU convolution]). */
static int64_t chunk_images(const ct_conv2d_geom *g) {
    int64_t per = g->c * g->kh * g->kw * g->oh * g->ow;
    int64_t nb = per > 0 ? CT_CONV_COLS_MAX / per : g->n;
    if (nb < 1)
        nb = 1;
    return nb < g->n ? nb : g->n;
}

static ct_cuda_conv_geom kernel_geom(const ct_conv2d_geom *g, int64_t nb) {
    ct_cuda_conv_geom k;
    memset(&k, 0, sizeof k);
    k.nb = nb;
    k.c = g->c;
    k.h = g->h;
    k.w = g->w;
    k.kh = g->kh;
    k.kw = g->kw;
    k.oh = g->oh;
    k.ow = g->ow;
    for (int i = 0; i < 2; i++) {
        k.stride[i] = g->stride[i];
        k.padding[i] = g->padding[i];
        k.dilation[i] = g->dilation[i];
    }
    return k;
}

/* The column matrix of images [n0, n0 + nb) of x (contiguous, (n, c, h, w), work
 * dtype), as a new tensor (c * kh * kw, nb * oh * ow). */
static ct_tensor *columns(const ct_tensor *x, const ct_conv2d_geom *g, int64_t n0, int64_t nb, ct_dtype wd) {
    int64_t shape[2] = {g->c * g->kh * g->kw, nb * g->oh * g->ow};
    ct_tensor *cols = ct_empty_impl(shape, 2, wd, x->device);
    if (!cols)
        return NULL;
    ct_cuda_conv_geom k = kernel_geom(g, nb);
    const char *src = ct_tensor_ptr(x) + (size_t)(n0 * g->c * g->h * g->w) * ct_dtype_size(wd);
    return ct_cuda_im2col(wd, src, ct_tensor_ptr(cols), &k, x->device.index) == CT_OK ? cols : NULL;
}

/* t (contiguous, (n, ch, oh, ow)) images [n0, n0 + nb) as (groups, ch / groups,
 * nb * oh * ow), contiguous: the product's layout. */
static ct_tensor *images_to_rows(const ct_tensor *t, const ct_conv2d_geom *g, int64_t ch, int64_t n0, int64_t nb) {
    int64_t v3[3] = {nb, ch, g->oh * g->ow}, p[3] = {1, 0, 2};
    ct_tensor *r = ct_contiguous(ct_permute(ct_view(ct_narrow(t, 0, n0, nb), v3, 3), p, 3));
    int64_t gs[3] = {g->groups, ch / g->groups, nb * g->oh * g->ow};
    return r ? ct_view(r, gs, 3) : NULL;
}

static ct_status conv2d_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_conv2d_geom g;
    ct_status st = ct_conv2d_geometry(call, &g);
    if (st == CT_OK) /* integers run on the CPU only, as in PyTorch */
        st = ct_nn_need_float("conv2d", call->in[0]);
    if (st)
        return st;
    int64_t shape[4];
    int nd;
    ct_conv2d_out_shape(&g, shape, &nd);
    const ct_tensor *x0 = call->in[0];
    ct_dtype dt = x0->dtype, wd = ct_nn_work_dtype(dt);
    if (!ct_cuda_use_device("conv2d", x0->device.index))
        return ct_last_status();
    ct_scope_begin();
    int64_t cg = g.c / g.groups, og = g.oc / g.groups, krows = cg * g.kh * g.kw, plane = g.oh * g.ow;
    int64_t x4[4] = {g.n, g.c, g.h, g.w}, y4[4] = {g.n, g.oc, g.oh, g.ow};
    ct_tensor *x = ct_nn_as_work(x0, wd), *w = ct_nn_as_work(call->in[1], wd), *b = ct_nn_as_work(call->in[2], wd);
    ct_tensor *y = ct_empty_impl(y4, 4, wd, x0->device);
    st = x && w && (!call->in[2] || b) && y ? CT_OK : ct_last_status();
    if (st == CT_OK)
        x = ct_view(x, x4, 4);
    int64_t w3[3] = {g.groups, og, krows};
    ct_tensor *wg = st == CT_OK && x ? ct_view(w, w3, 3) : NULL;
    if (st == CT_OK && !wg)
        st = ct_last_status();
    if (st == CT_OK && y->numel > 0 && krows == 0) {
        /* no input channels: an empty sum */
        st = ct_fill_impl(y, ct_scalar_int(0)) ? CT_OK : ct_last_status();
    } else if (st == CT_OK && y->numel > 0) {
        int64_t step = chunk_images(&g);
        for (int64_t n0 = 0; st == CT_OK && n0 < g.n; n0 += step) {
            int64_t nb = g.n - n0 < step ? g.n - n0 : step;
            ct_scope_begin();
            int64_t c3[3] = {g.groups, krows, nb * plane}, o3[3] = {g.oc, nb, plane}, p[3] = {1, 0, 2};
            int64_t d3[3] = {nb, g.oc, plane};
            ct_tensor *cols = columns(x, &g, n0, nb, wd);
            ct_tensor *prod = cols ? ct_bmm(wg, ct_view(cols, c3, 3)) : NULL;
            ct_tensor *src = prod ? ct_permute(ct_view(prod, o3, 3), p, 3) : NULL;
            ct_tensor *dst = src ? ct_view(ct_narrow(y, 0, n0, nb), d3, 3) : NULL;
            st = dst && ct_copy_(dst, src) ? CT_OK : ct_last_status();
            ct_scope_end();
        }
    }
    if (st == CT_OK && b && y->numel > 0) {
        int64_t b4[4] = {1, g.oc, 1, 1};
        st = ct_add_(y, ct_view(b, b4, 4)) ? CT_OK : ct_last_status();
    }
    ct_tensor *out = st == CT_OK ? ct_to_dtype(ct_view(y, shape, nd), dt) : NULL;
    if (st == CT_OK)
        st = out ? ct_call_set_output(call, 0, out) : ct_last_status();
    ct_scope_end();
    return st;
}

/* Gradients of one chunk of images: gw += gY cols^T, gx = col2im(W^T gY). */
static ct_status backward_chunk(const ct_conv2d_geom *g, const ct_tensor *x, const ct_tensor *wg,
                                const ct_tensor *gy, ct_tensor *gx, ct_tensor *gw, int64_t n0, int64_t nb,
                                ct_dtype wd) {
    int64_t cg = g->c / g->groups, krows = cg * g->kh * g->kw, ncols = nb * g->oh * g->ow;
    ct_scope_begin();
    ct_tensor *gyr = images_to_rows(gy, g, g->oc, n0, nb);
    ct_status st = gyr ? CT_OK : ct_last_status();
    if (st == CT_OK && gw) {
        int64_t c3[3] = {g->groups, krows, ncols};
        ct_tensor *cols = columns(x, g, n0, nb, wd);
        ct_tensor *part = cols ? ct_bmm(gyr, ct_transpose(ct_view(cols, c3, 3), 1, 2)) : NULL;
        st = part && ct_add_(gw, part) ? CT_OK : ct_last_status();
    }
    if (st == CT_OK && gx) {
        ct_tensor *gcols = ct_bmm(ct_transpose(wg, 1, 2), gyr); /* (groups, krows, ncols) */
        ct_cuda_conv_geom k = kernel_geom(g, nb);
        char *dst = ct_tensor_ptr(gx) + (size_t)(n0 * g->c * g->h * g->w) * ct_dtype_size(wd);
        st = gcols ? ct_cuda_col2im(wd, ct_tensor_ptr(gcols), dst, &k, gx->device.index) : ct_last_status();
    }
    ct_scope_end();
    return st;
}

/* The grads of x (n, c, h, w), w and the bias as (n, ...) work tensors; the call's
 * want flags choose which. */
static ct_status conv_backward(const ct_conv2d_geom *g, const ct_tensor *x0, const ct_tensor *w0,
                               const ct_tensor *gy0, bool want_in, bool want_w, bool want_b, ct_tensor **res) {
    ct_dtype wd = ct_nn_work_dtype(w0->dtype);
    ct_device dev = w0->device;
    int64_t cg = g->c / g->groups, og = g->oc / g->groups, krows = cg * g->kh * g->kw;
    int64_t x4[4] = {g->n, g->c, g->h, g->w}, y4[4] = {g->n, g->oc, g->oh, g->ow}, w3[3] = {g->groups, og, krows};
    ct_tensor *gy = ct_view(ct_nn_as_work(gy0, wd), y4, 4);
    /* the input is read only for the weight gradient (conv_transpose2d passes a
     * broadcast placeholder, which is never made contiguous) */
    ct_tensor *x = want_w ? ct_view(ct_nn_as_work(x0, wd), x4, 4) : NULL;
    ct_tensor *wg = want_in ? ct_view(ct_nn_as_work(w0, wd), w3, 3) : NULL;
    ct_tensor *gx = want_in ? ct_empty_impl(x4, 4, wd, dev) : NULL;
    ct_tensor *gw = want_w ? ct_zeros_impl(w3, 3, wd, dev) : NULL;
    if (!gy || (want_w && (!x || !gw)) || (want_in && (!wg || !gx)))
        return ct_last_status();
    ct_status st = CT_OK;
    bool empty_sum = g->oc == 0 || g->n == 0; /* gy has no elements */
    if (gx && gx->numel > 0 && empty_sum)
        st = ct_fill_impl(gx, ct_scalar_int(0)) ? CT_OK : ct_last_status();
    if (!empty_sum && ((gx && gx->numel > 0) || (gw && gw->numel > 0))) {
        int64_t step = chunk_images(g);
        for (int64_t n0 = 0; st == CT_OK && n0 < g->n; n0 += step) {
            int64_t nb = g->n - n0 < step ? g->n - n0 : step;
            st = backward_chunk(g, x, wg, gy, gx && gx->numel > 0 ? gx : NULL, gw && gw->numel > 0 ? gw : NULL, n0,
                                nb, wd);
        }
    }
    if (st == CT_OK && want_b) {
        int64_t dims[3] = {0, 2, 3};
        res[2] = ct_sum(gy, dims, 3, false, CT_DTYPE_UNDEFINED);
        if (!res[2])
            return ct_last_status();
    }
    res[0] = gx;
    res[1] = gw;
    return st;
}

static ct_status conv2d_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_conv2d_geom g;
    ct_status st = ct_conv2d_backward_geometry(call, &g);
    if (st == CT_OK)
        st = ct_nn_need_float("conv2d_backward", call->in[1]);
    if (st)
        return st;
    const ct_tensor *go = call->in[0], *x0 = call->in[1], *w0 = call->in[2];
    const ct_tensor *on[2] = {x0, go};
    if ((st = ct_nn_same_device("conv2d_backward", on, 2)))
        return st;
    if (!ct_cuda_use_device("conv2d_backward", x0->device.index))
        return ct_last_status();
    ct_dtype dt = x0->dtype;
    ct_scope_begin();
    ct_tensor *res[3] = {NULL, NULL, NULL};
    st = conv_backward(&g, x0, w0, go, call->ints[7] != 0, call->ints[8] != 0, call->ints[9] != 0, res);
    const ct_tensor *like[3] = {x0, w0, NULL};
    for (int i = 0; i < 3 && st == CT_OK; i++)
        if (res[i]) {
            ct_tensor *r = like[i] ? ct_view(res[i], like[i]->shape, like[i]->ndim) : res[i];
            r = r ? ct_to_dtype(r, dt) : NULL;
            st = r ? ct_call_set_output(call, i, r) : ct_last_status();
        }
    ct_scope_end();
    return st;
}

void ct_cuda_register_conv(void) {
    ct_dispatch_register_default(CT_OP_conv2d, CT_KEY_CUDA, conv2d_kernel, NULL);
    ct_dispatch_register_default(CT_OP_conv2d_backward, CT_KEY_CUDA, conv2d_backward_kernel, NULL);
    ct_dispatch_register_default(CT_OP_conv_transpose2d, CT_KEY_CUDA, ct_conv_transpose2d_kernel, NULL);
}
