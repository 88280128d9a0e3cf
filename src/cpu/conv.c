/* CPU convolution (im2col + GEMM) and max pooling, forward and backward.
 *
 * Note [Convolution on the CPU]
 * For each image and group, the input patches are unrolled into a column matrix
 * (C/g * kh * kw rows, oh * ow columns) and one GEMM with the group's weights
 * (oc/g x C/g*kh*kw) produces the output plane block. Images run in parallel; BLAS
 * inside a parallel region runs on one thread (OpenBLAS's OpenMP build), so the two
 * levels do not oversubscribe. float16/bfloat16 compute in float32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/blas.h"
#include "cpu/loops.h"
#include "ops/nn_ops.h"

#ifdef CT_HAVE_OPENMP
#include <omp.h>
#endif

/* ------------------------------------------------------------------ im2col */

#define IM2COL(T)                                                                                               \
    static void im2col_##T(const T *x, const ct_conv2d_geom *g, int64_t c0, int64_t cn, T *cols) {             \
        int64_t plane = g->oh * g->ow;                                                                          \
        for (int64_t c = 0; c < cn; c++)                                                                        \
            for (int64_t i = 0; i < g->kh; i++)                                                                 \
                for (int64_t j = 0; j < g->kw; j++) {                                                           \
                    T *row = cols + ((c * g->kh + i) * g->kw + j) * plane;                                      \
                    const T *xc = x + (c0 + c) * g->h * g->w;                                                   \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                                    \
                        int64_t y = oy * g->stride[0] - g->padding[0] + i * g->dilation[0];                     \
                        T *r = row + oy * g->ow;                                                                \
                        if (y < 0 || y >= g->h) {                                                               \
                            memset(r, 0, sizeof(T) * (size_t)g->ow);                                            \
                            continue;                                                                           \
                        }                                                                                       \
                        for (int64_t ox = 0; ox < g->ow; ox++) {                                                \
                            int64_t xx = ox * g->stride[1] - g->padding[1] + j * g->dilation[1];                \
                            r[ox] = (xx >= 0 && xx < g->w) ? xc[y * g->w + xx] : (T)0;                          \
                        }                                                                                       \
                    }                                                                                           \
                }                                                                                               \
    }                                                                                                           \
    /* The adjoint of im2col: adds every column entry back into its input pixel. */                           \
    static void col2im_##T(const T *cols, const ct_conv2d_geom *g, int64_t c0, int64_t cn, T *x) {             \
        int64_t plane = g->oh * g->ow;                                                                          \
        for (int64_t c = 0; c < cn; c++)                                                                        \
            for (int64_t i = 0; i < g->kh; i++)                                                                 \
                for (int64_t j = 0; j < g->kw; j++) {                                                           \
                    const T *row = cols + ((c * g->kh + i) * g->kw + j) * plane;                                \
                    T *xc = x + (c0 + c) * g->h * g->w;                                                         \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                                    \
                        int64_t y = oy * g->stride[0] - g->padding[0] + i * g->dilation[0];                     \
                        if (y < 0 || y >= g->h)                                                                 \
                            continue;                                                                           \
                        const T *r = row + oy * g->ow;                                                          \
                        for (int64_t ox = 0; ox < g->ow; ox++) {                                                \
                            int64_t xx = ox * g->stride[1] - g->padding[1] + j * g->dilation[1];                \
                            if (xx >= 0 && xx < g->w)                                                           \
                                xc[y * g->w + xx] += r[ox];                                                     \
                        }                                                                                       \
                    }                                                                                           \
                }                                                                                               \
    }
IM2COL(float)
IM2COL(double)

/* Computes in float32/float64: converts other floating dtypes on the way in and out. */
static ct_dtype work_dtype(ct_dtype d) { return d == CT_DTYPE_FLOAT64 ? CT_DTYPE_FLOAT64 : CT_DTYPE_FLOAT32; }

static const ct_tensor *as_work(const ct_tensor *t, ct_dtype wd) {
    return t ? ct_contiguous(ct_to_dtype(t, wd)) : NULL;
}

/* ------------------------------------------------------------------ conv2d */

static ct_status conv_forward(const ct_conv2d_geom *g, ct_dtype wd, const char *x, const char *w, const char *b,
                              char *y) {
    size_t esz = ct_dtype_size(wd);
    int64_t cg = g->c / g->groups, og = g->oc / g->groups, plane = g->oh * g->ow;
    int64_t krows = cg * g->kh * g->kw;
    bool direct = g->kh == 1 && g->kw == 1 && g->stride[0] == 1 && g->stride[1] == 1 && g->padding[0] == 0 &&
                  g->padding[1] == 0;
    int nth = 1;
#ifdef CT_HAVE_OPENMP
    if (g->n > 1)
        nth = ct_get_num_threads();
#endif
    /* One column buffer per thread, allocated up front so a failure is an error
     * rather than a silently skipped image. */
    char *bufs = direct ? NULL : malloc((size_t)nth * (size_t)(krows * plane) * esz);
    if (!direct && !bufs)
        return ct_error(CT_ERROR_OUT_OF_MEMORY, "conv2d", "could not allocate the column buffers");
#ifdef CT_HAVE_OPENMP
#pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1)
#endif
    for (int64_t n = 0; n < g->n; n++) {
        int tid = 0;
#ifdef CT_HAVE_OPENMP
        tid = omp_get_thread_num();
#endif
        char *cols = direct ? NULL : bufs + (size_t)tid * (size_t)(krows * plane) * esz;
        const char *xn = x + (size_t)(n * g->c * g->h * g->w) * esz;
        char *yn = y + (size_t)(n * g->oc * plane) * esz;
        for (int64_t gi = 0; gi < g->groups; gi++) {
            const char *src;
            if (direct) {
                src = xn + (size_t)(gi * cg * plane) * esz;
            } else {
                if (wd == CT_DTYPE_FLOAT32)
                    im2col_float((const float *)xn, g, gi * cg, cg, (float *)cols);
                else
                    im2col_double((const double *)xn, g, gi * cg, cg, (double *)cols);
                src = cols;
            }
            char *yg = yn + (size_t)(gi * og * plane) * esz;
            /* bias first, then accumulate the product on top of it */
            for (int64_t o = 0; o < og; o++)
                for (int64_t p = 0; p < plane; p++) {
                    double bv = b ? (wd == CT_DTYPE_FLOAT32 ? ((const float *)b)[gi * og + o]
                                                           : ((const double *)b)[gi * og + o])
                                  : 0.0;
                    if (wd == CT_DTYPE_FLOAT32)
                        ((float *)yg)[o * plane + p] = (float)bv;
                    else
                        ((double *)yg)[o * plane + p] = bv;
                }
            ct_cpu_gemm(wd, false, false, og, plane, krows, 1.0, w + (size_t)(gi * og * krows) * esz, krows, src,
                        plane, 1.0, yg, plane);
        }
    }
    free(bufs);
    return CT_OK;
}

ct_status ct_cpu_conv2d(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_conv2d_geom g;
    ct_status st = ct_conv2d_geometry(call, &g);
    if (st)
        return st;
    int64_t shape[4];
    int nd;
    ct_conv2d_out_shape(&g, shape, &nd);
    ct_dtype dt = call->in[0]->dtype, wd = work_dtype(dt);
    ct_scope_begin();
    const ct_tensor *x = as_work(call->in[0], wd), *w = as_work(call->in[1], wd), *b = as_work(call->in[2], wd);
    ct_tensor *y = ct_empty(shape, nd, wd, CT_CPU);
    if (!x || !w || (call->in[2] && !b) || !y) {
        ct_scope_end();
        return ct_last_status();
    }
    if (ct_tensor_numel(y) > 0)
        st = conv_forward(&g, wd, ct_tensor_data(x), ct_tensor_data(w), b ? ct_tensor_data(b) : NULL,
                          ct_tensor_data(y));
    if (st == CT_OK) {
        ct_tensor *out = ct_to_dtype(y, dt);
        st = out ? ct_call_set_output(call, 0, out) : ct_last_status();
    }
    ct_scope_end();
    return st;
}

ct_status ct_cpu_conv2d_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    /* Check the geometry with the forward rule: in[] = (input, weight, no bias). */
    ct_call fwd = *call;
    fwd.in[0] = call->in[1];
    fwd.in[1] = call->in[2];
    fwd.in[2] = NULL;
    fwd.nin = 3;
    ct_conv2d_geom g;
    ct_status st = ct_conv2d_geometry(&fwd, &g);
    if (st)
        return st;
    const ct_tensor *go = call->in[0];
    int64_t shape[4];
    int nd;
    ct_conv2d_out_shape(&g, shape, &nd);
    bool same = go->ndim == nd;
    for (int i = 0; same && i < nd; i++)
        same = go->shape[i] == shape[i];
    if (!same) {
        char a[64], b[64];
        return ct_error(CT_ERROR_VALUE, "conv2d_backward", "grad_output has shape %s, expected %s",
                        ct_shape_str(go->shape, go->ndim, a, sizeof a), ct_shape_str(shape, nd, b, sizeof b));
    }
    ct_dtype dt = call->in[1]->dtype, wd = work_dtype(dt);
    size_t esz = ct_dtype_size(wd);
    int64_t cg = g.c / g.groups, og = g.oc / g.groups, plane = g.oh * g.ow, krows = cg * g.kh * g.kw;
    bool want_in = call->ints[7], want_w = call->ints[8], want_b = call->ints[9];
    ct_scope_begin();
    const ct_tensor *x = as_work(call->in[1], wd), *w = as_work(call->in[2], wd), *gy = as_work(go, wd);
    ct_tensor *gx = want_in ? ct_zeros(call->in[1]->shape, call->in[1]->ndim, wd, CT_CPU) : NULL;
    ct_tensor *gw = want_w ? ct_zeros(call->in[2]->shape, 4, wd, CT_CPU) : NULL;
    ct_tensor *gb = want_b ? ct_zeros(&g.oc, 1, wd, CT_CPU) : NULL;
    if (!x || !w || !gy || (want_in && !gx) || (want_w && !gw) || (want_b && !gb)) {
        ct_scope_end();
        return ct_last_status();
    }
    const char *px = ct_tensor_data(x), *pw = ct_tensor_data(w), *pg = ct_tensor_data(gy);
    char *cols = malloc((size_t)(krows * plane) * esz + 1);
    if (!cols) {
        ct_scope_end();
        return ct_error(CT_ERROR_OUT_OF_MEMORY, "conv2d_backward", "could not allocate the column buffer");
    }
    /* Images one after another: the weight gradient accumulates across them, and
     * each GEMM is big enough to use BLAS's own threads. */
    for (int64_t n = 0; n < g.n && plane > 0; n++) {
        const char *xn = px + (size_t)(n * g.c * g.h * g.w) * esz;
        const char *gn = pg + (size_t)(n * g.oc * plane) * esz;
        for (int64_t gi = 0; gi < g.groups; gi++) {
            const char *gyg = gn + (size_t)(gi * og * plane) * esz;
            if (want_w) {
                if (wd == CT_DTYPE_FLOAT32)
                    im2col_float((const float *)xn, &g, gi * cg, cg, (float *)cols);
                else
                    im2col_double((const double *)xn, &g, gi * cg, cg, (double *)cols);
                /* gW_g += gY_g (og x plane) @ cols^T (plane x krows) */
                ct_cpu_gemm(wd, false, true, og, krows, plane, 1.0, gyg, plane, cols, plane, 1.0,
                            (char *)ct_tensor_data(gw) + (size_t)(gi * og * krows) * esz, krows);
            }
            if (want_in) {
                /* cols = W_g^T (krows x og) @ gY_g (og x plane), then scatter back */
                ct_cpu_gemm(wd, true, false, krows, plane, og, 1.0, pw + (size_t)(gi * og * krows) * esz, krows, gyg,
                            plane, 0.0, cols, plane);
                char *gxn = (char *)ct_tensor_data(gx) + (size_t)(n * g.c * g.h * g.w) * esz;
                if (wd == CT_DTYPE_FLOAT32)
                    col2im_float((const float *)cols, &g, gi * cg, cg, (float *)gxn);
                else
                    col2im_double((const double *)cols, &g, gi * cg, cg, (double *)gxn);
            }
        }
        if (want_b)
            for (int64_t o = 0; o < g.oc; o++) {
                double acc = 0;
                for (int64_t p = 0; p < plane; p++)
                    acc += wd == CT_DTYPE_FLOAT32 ? ((const float *)gn)[o * plane + p] : ((const double *)gn)[o * plane + p];
                if (wd == CT_DTYPE_FLOAT32)
                    ((float *)ct_tensor_data(gb))[o] += (float)acc;
                else
                    ((double *)ct_tensor_data(gb))[o] += acc;
            }
    }
    free(cols);
    ct_tensor *res[3] = {gx, gw, gb};
    st = CT_OK;
    for (int i = 0; i < 3 && st == CT_OK; i++)
        if (res[i]) {
            ct_tensor *r = ct_to_dtype(res[i], dt);
            st = r ? ct_call_set_output(call, i, r) : ct_last_status();
        }
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ max pooling */

#ifdef CT_HAVE_OPENMP
#define CT_POOL_PARALLEL _Pragma("omp parallel for schedule(static) if (planes > 16 && ct_get_num_threads() > 1)")
#else
#define CT_POOL_PARALLEL
#endif

/* One output plane per iteration; T is the element type (float32 and float64 run
 * natively, other dtypes through float64, which holds all their values exactly). */
#define MAX_POOL_PLANES(T)                                                                              \
    static void max_pool_##T(const ct_pool2d_geom *g, const T *px, T *py, int64_t *pi) {               \
        int64_t planes = g->n * g->c;                                                                   \
        CT_POOL_PARALLEL                                                                                \
        for (int64_t p = 0; p < planes; p++) {                                                          \
            const T *xp = px + p * g->h * g->w;                                                         \
            for (int64_t oy = 0; oy < g->oh; oy++)                                                      \
                for (int64_t ox = 0; ox < g->ow; ox++) {                                                \
                    T best = -(T)INFINITY;                                                              \
                    int64_t at = -1;                                                                    \
                    for (int64_t i = 0; i < g->kernel[0]; i++) {                                        \
                        int64_t yy = oy * g->stride[0] - g->padding[0] + i * g->dilation[0];            \
                        if (yy < 0 || yy >= g->h)                                                       \
                            continue;                                                                   \
                        for (int64_t j = 0; j < g->kernel[1]; j++) {                                    \
                            int64_t xx = ox * g->stride[1] - g->padding[1] + j * g->dilation[1];        \
                            if (xx < 0 || xx >= g->w)                                                   \
                                continue;                                                               \
                            T v = xp[yy * g->w + xx];                                                   \
                            /* NaN wins and stays (PyTorch propagates it); ties keep the first */      \
                            if (at < 0 || v > best || (v != v && best == best)) {                       \
                                best = v;                                                               \
                                at = yy * g->w + xx;                                                    \
                            }                                                                           \
                        }                                                                               \
                    }                                                                                   \
                    py[(p * g->oh + oy) * g->ow + ox] = best;                                           \
                    pi[(p * g->oh + oy) * g->ow + ox] = at;                                             \
                }                                                                                       \
        }                                                                                               \
    }
MAX_POOL_PLANES(float)
MAX_POOL_PLANES(double)

ct_status ct_cpu_max_pool2d_with_indices(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_pool2d_geom g;
    ct_status st = ct_pool2d_geometry(call, &g);
    if (st)
        return st;
    int64_t shape[4];
    int nd;
    ct_pool2d_out_shape(&g, shape, &nd);
    ct_dtype dt = call->in[0]->dtype, wd = dt == CT_DTYPE_FLOAT32 ? CT_DTYPE_FLOAT32 : CT_DTYPE_FLOAT64;
    ct_scope_begin();
    const ct_tensor *x = ct_contiguous(ct_to_dtype(call->in[0], wd));
    ct_tensor *y = ct_empty(shape, nd, wd, CT_CPU);
    ct_tensor *idx = ct_empty(shape, nd, CT_DTYPE_INT64, CT_CPU);
    if (!x || !y || !idx) {
        ct_scope_end();
        return ct_last_status();
    }
    if (wd == CT_DTYPE_FLOAT32)
        max_pool_float(&g, ct_tensor_data(x), ct_tensor_data(y), ct_tensor_data(idx));
    else
        max_pool_double(&g, ct_tensor_data(x), ct_tensor_data(y), ct_tensor_data(idx));
    ct_tensor *out = ct_to_dtype(y, dt);
    st = out ? ct_call_set_output(call, 0, out) : ct_last_status();
    if (st == CT_OK)
        st = ct_call_set_output(call, 1, idx);
    ct_scope_end();
    return st;
}

ct_status ct_cpu_max_pool2d_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *go = call->in[0], *x = call->in[1], *ix = call->in[2];
    const char *op = "max_pool2d_backward";
    if (ix->dtype != CT_DTYPE_INT64)
        return ct_error(CT_ERROR_TYPE, op, "indices must be int64, got %s", ct_dtype_name(ix->dtype));
    bool same = go->ndim == ix->ndim && go->ndim == x->ndim && (x->ndim == 3 || x->ndim == 4);
    for (int i = 0; same && i < go->ndim; i++)
        same = go->shape[i] == ix->shape[i] && (i >= go->ndim - 2 || go->shape[i] == x->shape[i]);
    if (!same)
        return ct_error(CT_ERROR_VALUE, op, "grad_output, indices and input shapes do not fit together");
    int64_t h = x->shape[x->ndim - 2], w = x->shape[x->ndim - 1];
    int64_t oh = go->shape[go->ndim - 2], ow = go->shape[go->ndim - 1];
    int64_t planes = x->numel / (h * w > 0 ? h * w : 1);
    ct_scope_begin();
    const ct_tensor *g64 = ct_contiguous(ct_to_dtype(go, CT_DTYPE_FLOAT64));
    const ct_tensor *i64 = ct_contiguous(ix);
    ct_tensor *gx = ct_zeros(x->shape, x->ndim, CT_DTYPE_FLOAT64, CT_CPU);
    ct_status st = CT_OK;
    if (!g64 || !i64 || !gx) {
        ct_scope_end();
        return ct_last_status();
    }
    const double *pg = ct_tensor_data(g64);
    const int64_t *pi = ct_tensor_data(i64);
    double *px = ct_tensor_data(gx);
    for (int64_t p = 0; p < planes && st == CT_OK; p++)
        for (int64_t k = 0; k < oh * ow; k++) {
            int64_t at = pi[p * oh * ow + k];
            if (at < 0 || at >= h * w) {
                st = ct_error(CT_ERROR_INDEX, op, "index %lld is out of bounds for a plane of %lld elements",
                              (long long)at, (long long)(h * w));
                break;
            }
            px[p * h * w + at] += pg[p * oh * ow + k];
        }
    if (st == CT_OK) {
        ct_tensor *out = ct_to_dtype(gx, x->dtype);
        st = out ? ct_call_set_output(call, 0, out) : ct_last_status();
    }
    ct_scope_end();
    return st;
}
