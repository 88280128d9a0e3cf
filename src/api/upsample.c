/* The public wrappers of upsample and upsample_backward (the structured kernels of
 * src/meta/upsample.c, Note [upsample] there), and their stubs made of ops for the
 * devices without loops (Note [Generic upsample]). */
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "api/indexing_generic.h"
#include "dispatch/dispatch_internal.h"
#include "meta/upsample.h"

static int mode_code(const char *op, const char *mode) {
    static const char *const names[] = {"nearest", "nearest-exact", "linear", "bilinear", "bicubic"};
    static const int codes[] = {CT_UPSAMPLE_NEAREST, CT_UPSAMPLE_NEAREST_EXACT, CT_UPSAMPLE_LINEAR,
                                CT_UPSAMPLE_LINEAR, CT_UPSAMPLE_CUBIC};
    for (int i = 0; i < 5; i++)
        if (mode && !strcmp(mode, names[i]))
            return codes[i];
    ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "unknown upsample mode %s (nearest, nearest-exact, linear, bilinear or "
             "bicubic)", mode ? mode : "NULL");
    return -1;
}

static void put_scales(ct_call *c, const double *scales, int n) {
    c->nscalars = 2;
    for (int i = 0; i < 2; i++)
        c->s[i] = ct_scalar_float(scales && i < n ? scales[i] : 0.0);
}

ct_tensor *ct_upsample(const ct_tensor *input, const int64_t *output_size, int n, const char *mode,
                       bool align_corners, const double *scales) {
    CT_CHECK_ARG("upsample", input);
    int m = mode_code("upsample", mode);
    if (m < 0)
        return NULL;
    if (n < 1 || n > 2 || !output_size) {
        ct_error(CT_ERROR_VALUE, "upsample", "output_size must have 1 or 2 sizes");
        return NULL;
    }
    ct_call c = {.op = CT_OP_upsample, .nin = 1, .in = {input}, .nints = 3 + n, .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = m;
    c.ints[1] = align_corners;
    c.ints[2] = n;
    memcpy(c.ints + 3, output_size, sizeof(int64_t) * (size_t)n);
    put_scales(&c, scales, n);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_upsample_backward(const ct_tensor *grad_output, const int64_t *input_size, int ndim, const char *mode,
                                bool align_corners, const double *scales) {
    CT_CHECK_ARG("upsample_backward", grad_output);
    int m = mode_code("upsample_backward", mode);
    if (m < 0)
        return NULL;
    if (ndim < 3 || ndim > 4 || !input_size) {
        ct_error(CT_ERROR_VALUE, "upsample_backward", "input_size must have 3 or 4 sizes");
        return NULL;
    }
    ct_call c = {.op = CT_OP_upsample_backward, .nin = 1, .in = {grad_output}, .nints = 3 + ndim,
                 .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = m;
    c.ints[1] = align_corners;
    c.ints[2] = ndim;
    memcpy(c.ints + 3, input_size, sizeof(int64_t) * (size_t)ndim);
    put_scales(&c, scales, ndim - 2);
    return ct_dispatch_1(&c);
}

/* ------------------------------------------------------------------ generic stubs */

/* Note [Generic upsample]
 * The plan's taps as ops (for devices without loops of their own): along each spatial
 * dim, tap t of every output position is one index_select of the input positions it
 * reads, multiplied by its weights and summed over the taps; the backward adds the
 * weighted gradient back with one index_add per tap. The last dim goes first, as in
 * the CPU loop. The taps are copied to the device once per call. */

/* The taps t of dim d as a device tensor of input positions (int64) and of weights
 * (dtype, shaped to broadcast along dim 1 + d of (planes, out0, out1)). */
static ct_status tap(const ct_upsample_plan *p, int d, int t, ct_dtype dtype, ct_device dev, ct_tensor **idx,
                     ct_tensor **w) {
    int64_t n = p->out[d];
    int64_t *iv = malloc(sizeof(int64_t) * (size_t)n);
    double *wv = malloc(sizeof(double) * (size_t)n);
    if (!iv || !wv) {
        free(iv);
        free(wv);
        return ct_error(CT_ERROR_OUT_OF_MEMORY, "upsample", "out of memory");
    }
    for (int64_t o = 0; o < n; o++) {
        iv[o] = p->idx[d][o * p->ntaps + t];
        wv[o] = p->w[d][o * p->ntaps + t];
    }
    int64_t wshape[3] = {1, d == 0 ? n : 1, d == 1 ? n : 1};
    *idx = ct_to_device(ct_from_data(iv, CT_SHAPE(n), CT_DTYPE_INT64), dev);
    *w = ct_to_device(ct_to_dtype(ct_from_data(wv, wshape, 3, CT_DTYPE_FLOAT64), dtype), dev);
    free(iv);
    free(wv);
    return *idx && *w ? CT_OK : ct_last_status();
}

static ct_status write_result(ct_tensor *dst, const ct_tensor *r) {
    r = r ? ct_reshape(r, dst->shape, dst->ndim) : NULL;
    return r && ct_copy_(dst, r) ? CT_OK : ct_last_status();
}

ct_status ct_generic_upsample(ct_tensor *out, const ct_tensor *in, const ct_upsample_plan *p) {
    ct_status st = CT_OK;
    ct_scope_begin();
    ct_tensor *cur = ct_reshape(in, CT_SHAPE(p->planes, p->in[0], p->in[1]));
    for (int d = 1; d >= 0 && st == CT_OK && cur; d--) {
        ct_tensor *sum = NULL;
        for (int t = 0; t < p->ntaps && st == CT_OK; t++) {
            ct_tensor *idx = NULL, *w = NULL;
            if ((st = tap(p, d, t, in->dtype, in->device, &idx, &w)))
                break;
            ct_tensor *term = ct_mul(ct_index_select(cur, d + 1, idx), w);
            sum = !term ? NULL : sum ? ct_add(sum, term) : term;
            if (!sum)
                st = ct_last_status();
        }
        cur = sum;
    }
    if (st == CT_OK)
        st = write_result(out, cur);
    ct_scope_end();
    return st;
}

ct_status ct_generic_upsample_backward(ct_tensor *gin, const ct_tensor *g, const ct_upsample_plan *p) {
    ct_status st = CT_OK;
    ct_scope_begin();
    ct_tensor *cur = ct_reshape(g, CT_SHAPE(p->planes, p->out[0], p->out[1]));
    for (int d = 0; d < 2 && st == CT_OK && cur; d++) {
        int64_t shape[3] = {p->planes, p->in[0], d == 0 ? p->out[1] : p->in[1]};
        ct_tensor *acc = ct_zeros(shape, 3, g->dtype, g->device);
        for (int t = 0; t < p->ntaps && st == CT_OK && acc; t++) {
            ct_tensor *idx = NULL, *w = NULL;
            if ((st = tap(p, d, t, g->dtype, g->device, &idx, &w)))
                break;
            acc = ct_index_add(acc, d + 1, idx, ct_mul(cur, w), ct_scalar_int(1));
        }
        if (st == CT_OK && !acc)
            st = ct_last_status();
        cur = acc;
    }
    if (st == CT_OK)
        st = write_result(gin, cur);
    ct_scope_end();
    return st;
}
