/* CPU convolution (im2col + GEMM) and max pooling, forward and backward.
 *
 * Note [Convolution on the CPU]
 * For each image and group, the input patches are unrolled into a column matrix
 * (C/g * kh * kw rows, oh * ow columns) and one GEMM with the group's weights
 * (oc/g x C/g*kh*kw) produces the output plane block. A 1x1 kernel with stride 1 and
 * no padding reads the input directly. float16/bfloat16 compute in float32.
 *
 * Threads: images are spread over the OpenMP threads, each with its own column
 * buffer, and every GEMM inside runs on its thread alone (OpenBLAS's OpenMP build
 * does so inside a parallel region), so the two levels never oversubscribe the cores.
 * One image per thread keeps its column matrix (conv2 of the Fashion-MNIST model:
 * 288 x 196 floats, 225 KB) in the core's L2 cache between im2col and the GEMM; a
 * single GEMM over the whole batch would stream a 14 MB column matrix through memory
 * instead. A batch smaller than the thread count runs image after image with BLAS's
 * own threads.
 *
 * The backward pass does the same per image: each thread accumulates its images'
 * weight and bias gradients in a private buffer (the GEMM adds into it, beta = 1),
 * and the buffers are summed in thread order at the end, so a given thread count
 * always gives the same result. The input gradient of an image is W^T @ gY scattered
 * back by col2im into that image's slice, which only its thread writes. Gradients
 * that are not asked for (conv1's input, whose input needs none) are not computed. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/factory.h"
#include "core/view.h"
#include "cpu/cpu_backend.h"
#include "cpu/blas.h"
#include "cpu/conv_int.h"
#include "cpu/loops.h"
#include "cpu/vecmath.h"
#include "meta/nn_fused.h"
#include "meta/nn_ops.h"

#include "core/parallel.h"

/* Threads for a loop over n independent images: 1 when the batch is smaller than
 * the thread count (the GEMMs then share the threads, Note [GEMM chunks]). */
static int image_threads(int64_t n) {
    int nth = ct_get_num_threads();
    return nth > 1 && n >= nth ? nth : 1;
}

/* ------------------------------------------------------------------ im2col */

/* The output columns [*lo, *hi) whose input column ox * s + off lies in [0, w). */
static void valid_cols(int64_t ow, int64_t w, int64_t s, int64_t off, int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = w - off <= 0 ? 0 : (w - off + s - 1) / s;
    if (b > ow)
        b = ow;
    if (a > b)
        a = b;
    *lo = a;
    *hi = b;
}

/* Stride 1 and an output as wide as the input (a 3x3 kernel with padding 1, say):
 * see Note [Same-width columns]. */
static bool same_width(const ct_conv2d_geom *g) {
    return g->stride[0] == 1 && g->stride[1] == 1 && g->ow == g->w;
}

/* The contiguous run of a same-width column row for kernel row i, whose window
 * column offset is off and valid output columns [lo, hi): the output rows [ylo, yhi)
 * that read an input row, the run [a, b) of the column row from the first valid entry
 * to the last, and the shift from a column entry to the input element it reads.
 * False when the column row reads no input at all. */
typedef struct {
    int64_t ylo, yhi, a, b, shift;
} col_run;

static bool same_width_run(const ct_conv2d_geom *g, int64_t i, int64_t off, int64_t lo, int64_t hi, col_run *r) {
    int64_t dy = i * g->dilation[0] - g->padding[0];
    valid_cols(g->oh, g->h, 1, dy, &r->ylo, &r->yhi);
    if (r->ylo == r->yhi || lo == hi)
        return false;
    r->a = r->ylo * g->ow + lo;
    r->b = (r->yhi - 1) * g->ow + hi;
    r->shift = dy * g->w + off;
    return true;
}

/* Note [Same-width columns]
 * When same_width holds, entry oy * ow + ox of the column row for (c, i, j) reads
 * input element (oy + dy) * w + ox + dx of channel c, where dy and dx are the
 * window offsets of (i, j): the row is the channel shifted by one constant. So the
 * output rows whose input row exists are filled by one contiguous copy, and then the
 * few entries whose input column lies outside [0, w) (which the copy took from the
 * neighbouring input row) are set to zero. col2im zeroes the same entries of its
 * column row first and adds the rest back in one contiguous run, so every input
 * pixel still receives exactly its own terms, in the same order as the general loop.
 * One long run replaces oh short ones per column row: for the Fashion-MNIST model's
 * second convolution, 288 copies of 182 floats instead of 4032 copies of 13 or 14. */

/* The same-width column rows are a few hundred floats, and most of their zero runs a
 * handful: library memset/memcpy calls for them cost more than the data (twice the
 * whole im2col, measured), so GCC is kept from turning these loops into such calls. */
#if defined(__GNUC__) && !defined(__clang__)
#define CT_INLINE_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define CT_INLINE_LOOPS
#endif

/* im2col writes every column entry (zeros where the window hangs over the padding);
 * col2im, its adjoint, adds every column entry back into its input pixel (and may
 * overwrite the column matrix). The valid span of each row is computed once, so the
 * inner loops are plain copies and adds. */
#define IM2COL(T, S)                                                                                             \
    /* Zeroes the entries of rows [ylo, yhi) of a column row outside columns [lo, hi). */                      \
    CT_INLINE_LOOPS static void zero_edges_##T##S(T *row, int64_t ow, int64_t ylo, int64_t yhi, int64_t lo, int64_t hi) {         \
        for (int64_t oy = ylo; oy < yhi; oy++) {                                                                \
            for (int64_t ox = 0; ox < lo; ox++)                                                                 \
                row[oy * ow + ox] = 0;                                                                          \
            for (int64_t ox = hi; ox < ow; ox++)                                                                \
                row[oy * ow + ox] = 0;                                                                          \
        }                                                                                                       \
    }                                                                                                           \
    CT_INLINE_LOOPS static void im2col_##T##S(const T *x, const ct_conv2d_geom *g, int64_t c0, int64_t cn,        \
                                           T *cols) {                                                           \
        int64_t plane = g->oh * g->ow, sx = g->stride[1];                                                       \
        bool same = same_width(g);                                                                              \
        for (int64_t c = 0; c < cn; c++)                                                                        \
            for (int64_t i = 0; i < g->kh; i++)                                                                 \
                for (int64_t j = 0; j < g->kw; j++) {                                                           \
                    T *row = cols + ((c * g->kh + i) * g->kw + j) * plane;                                      \
                    const T *xc = x + (c0 + c) * g->h * g->w;                                                   \
                    int64_t off = j * g->dilation[1] - g->padding[1], lo, hi;                                   \
                    valid_cols(g->ow, g->w, sx, off, &lo, &hi);                                                 \
                    col_run run = {0};                                                                                \
                    if (same && !same_width_run(g, i, off, lo, hi, &run)) {                                     \
                        memset(row, 0, sizeof(T) * (size_t)plane);                                              \
                        continue;                                                                               \
                    }                                                                                           \
                    if (same) {                                                                                 \
                        int64_t k = 0;                                                                          \
                        for (; k < run.a; k++)                                                                  \
                            row[k] = 0;                                                                         \
                        for (; k < run.b; k++)                                                                  \
                            row[k] = xc[k + run.shift];                                                         \
                        for (; k < plane; k++)                                                                  \
                            row[k] = 0;                                                                         \
                        zero_edges_##T##S(row, g->ow, run.ylo, run.yhi, lo, hi);                                   \
                        continue;                                                                               \
                    }                                                                                           \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                                    \
                        int64_t y = oy * g->stride[0] - g->padding[0] + i * g->dilation[0];                     \
                        T *r = row + oy * g->ow;                                                                \
                        if (y < 0 || y >= g->h || lo == hi) {                                                   \
                            memset(r, 0, sizeof(T) * (size_t)g->ow);                                            \
                            continue;                                                                           \
                        }                                                                                       \
                        const T *xr = xc + y * g->w + off;                                                      \
                        for (int64_t ox = 0; ox < lo; ox++)                                                     \
                            r[ox] = 0;                                                                          \
                        if (sx == 1)                                                                            \
                            memcpy(r + lo, xr + lo, sizeof(T) * (size_t)(hi - lo));                             \
                        else                                                                                    \
                            for (int64_t ox = lo; ox < hi; ox++)                                                \
                                r[ox] = xr[ox * sx];                                                            \
                        for (int64_t ox = hi; ox < g->ow; ox++)                                                 \
                            r[ox] = 0;                                                                          \
                    }                                                                                           \
                }                                                                                               \
    }                                                                                                           \
    static void col2im_##T##S(T *cols, const ct_conv2d_geom *g, int64_t c0, int64_t cn, T *x) {                   \
        int64_t plane = g->oh * g->ow, sx = g->stride[1];                                                       \
        bool same = same_width(g);                                                                              \
        for (int64_t c = 0; c < cn; c++)                                                                        \
            for (int64_t i = 0; i < g->kh; i++)                                                                 \
                for (int64_t j = 0; j < g->kw; j++) {                                                           \
                    T *row = cols + ((c * g->kh + i) * g->kw + j) * plane;                                      \
                    T *xc = x + (c0 + c) * g->h * g->w;                                                         \
                    int64_t off = j * g->dilation[1] - g->padding[1], lo, hi;                                   \
                    valid_cols(g->ow, g->w, sx, off, &lo, &hi);                                                 \
                    col_run run = {0};                                                                                \
                    if (same) {                                                                                 \
                        if (!same_width_run(g, i, off, lo, hi, &run))                                           \
                            continue;                                                                           \
                        zero_edges_##T##S(row, g->ow, run.ylo, run.yhi, lo, hi);                                   \
                        const T *restrict src = row + run.a;                                                    \
                        T *restrict dst = xc + run.a + run.shift;                                               \
                        for (int64_t k = 0; k < run.b - run.a; k++)                                             \
                            dst[k] += src[k];                                                                   \
                        continue;                                                                               \
                    }                                                                                           \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                                    \
                        int64_t y = oy * g->stride[0] - g->padding[0] + i * g->dilation[0];                     \
                        if (y < 0 || y >= g->h)                                                                 \
                            continue;                                                                           \
                        const T *r = row + oy * g->ow;                                                          \
                        T *xr = xc + y * g->w + off;                                                            \
                        if (sx == 1)                                                                            \
                            for (int64_t ox = lo; ox < hi; ox++)                                                \
                                xr[ox] += r[ox];                                                                \
                        else                                                                                    \
                            for (int64_t ox = lo; ox < hi; ox++)                                                \
                                xr[ox * sx] += r[ox];                                                           \
                    }                                                                                           \
                }                                                                                               \
    }

/* Computes in float32/float64: converts other floating dtypes on the way in and out. */
/* ------------------------------------------------------------------ conv2d */

/* Reads a 1x1 kernel with stride 1 and no padding straight from the input. */
static bool conv_direct(const ct_conv2d_geom *g) {
    return g->kh == 1 && g->kw == 1 && g->stride[0] == 1 && g->stride[1] == 1 && g->padding[0] == 0 &&
           g->padding[1] == 0;
}

/* The per-image loops for one element type T (work dtype WD). */
#define CONV_IMAGE(T, WD, S)                                                                                       \
    /* With a column buffer and a bias, w is the weight with the bias appended to each  \
     * row and cols ends in a row of ones (Note [Bias as a column row]). */              \
    static void conv_fwd_image_##T##S(const ct_conv2d_geom *g, const T *xn, const T *w, const T *b, T *yn,        \
                                   T *cols) {                                                                   \
        int64_t cg = g->c / g->groups, og = g->oc / g->groups, plane = g->oh * g->ow, krows = cg * g->kh * g->kw; \
        for (int64_t gi = 0; gi < g->groups; gi++) {                                                            \
            T *yg = yn + gi * og * plane;                                                                       \
            if (cols) {                                                                                         \
                im2col_##T##S(xn, g, gi * cg, cg, cols);                                                           \
                int64_t k = krows + (b != NULL);                                                                \
                ct_cpu_gemm(WD, false, false, og, plane, k, 1.0, w + gi * og * k, k, cols, plane, 0.0, yg, plane); \
                continue;                                                                                       \
            }                                                                                                   \
            if (b) /* bias first, then the product on top of it */                                              \
                for (int64_t o = 0; o < og; o++) {                                                              \
                    T bv = b[gi * og + o], *yr = yg + o * plane;                                                \
                    for (int64_t p = 0; p < plane; p++)                                                         \
                        yr[p] = bv;                                                                             \
                }                                                                                               \
            ct_cpu_gemm(WD, false, false, og, plane, krows, 1.0, w + gi * og * krows, krows, xn + gi * cg * plane, \
                        plane, b ? 1.0 : 0.0, yg, plane);                                                       \
        }                                                                                                       \
    }                                                                                                           \
    /* gw^T (+)= cols @ gY^T per group (the transposed product runs faster in OpenBLAS  \
     * for these shapes: 85 against 77 GFLOP/s per thread for the Fashion-MNIST model's \
     * second layer), gx = col2im(W^T @ gY), gb += row sums of gY, for one image. */   \
    static void conv_bwd_image_##T##S(const ct_conv2d_geom *g, const T *xn, const T *w, const T *gn, T *gxn,      \
                                   T *gw, double *gb, T *cols) {                                                \
        int64_t cg = g->c / g->groups, og = g->oc / g->groups, plane = g->oh * g->ow, krows = cg * g->kh * g->kw; \
        if (gxn && cols)                                                                                        \
            memset(gxn, 0, sizeof(T) * (size_t)(g->c * g->h * g->w));                                           \
        for (int64_t gi = 0; gi < g->groups; gi++) {                                                            \
            const T *gyg = gn + gi * og * plane;                                                                \
            if (gw) {                                                                                           \
                const T *src = xn + gi * cg * plane;                                                            \
                if (cols) {                                                                                     \
                    im2col_##T##S(xn, g, gi * cg, cg, cols);                                                       \
                    src = cols;                                                                                 \
                }                                                                                               \
                ct_cpu_gemm(WD, false, true, krows, og, plane, 1.0, src, plane, gyg, plane, 1.0,                \
                            gw + gi * og * krows, og);                                                          \
            }                                                                                                   \
            if (gxn) {                                                                                          \
                T *dst = cols ? cols : gxn + gi * cg * plane;                                                   \
                ct_cpu_gemm(WD, true, false, krows, plane, og, 1.0, w + gi * og * krows, krows, gyg, plane, 0.0, \
                            dst, plane);                                                                        \
                if (cols)                                                                                       \
                    col2im_##T##S(cols, g, gi * cg, cg, gxn);                                                      \
            }                                                                                                   \
        }                                                                                                       \
        if (gb) /* eight running sums per row: no serial dependency, vectorizes */                           \
            for (int64_t o = 0; o < g->oc; o++) {                                                               \
                const T *r = gn + o * plane;                                                                    \
                T acc[8] = {0};                                                                                 \
                int64_t p = 0;                                                                                  \
                for (; p + 8 <= plane; p += 8)                                                                  \
                    for (int l = 0; l < 8; l++)                                                                 \
                        acc[l] += r[p + l];                                                                     \
                double sum = 0;                                                                                 \
                for (; p < plane; p++)                                                                          \
                    sum += r[p];                                                                                \
                for (int l = 0; l < 8; l++)                                                                     \
                    sum += acc[l];                                                                              \
                gb[o] += sum;                                                                                   \
            }                                                                                                   \
    }

/* The bias rows and the weight-gradient sum, once per element type. */
#define CONV_HELPERS(T)                                                                                         \
    /* The weight rows with the bias appended, and the ones row at the end of each     \
     * thread's column buffer. */                                                       \
    static void conv_bias_rows_##T(const ct_conv2d_geom *g, const T *w, const T *b, T *wb, T *cols, size_t colsz, \
                                   int nth) {                                                                   \
        int64_t krows = g->c / g->groups * g->kh * g->kw, plane = g->oh * g->ow;                                \
        for (int64_t o = 0; o < g->oc; o++) {                                                                   \
            memcpy(wb + o * (krows + 1), w + o * krows, sizeof(T) * (size_t)krows);                             \
            wb[o * (krows + 1) + krows] = b[o];                                                                 \
        }                                                                                                       \
        for (int t = 0; t < nth; t++) {                                                                         \
            T *ones = (T *)(void *)((char *)cols + (size_t)t * colsz) + krows * plane;                          \
            for (int64_t p = 0; p < plane; p++)                                                                 \
                ones[p] = 1;                                                                                    \
        }                                                                                                       \
    }                                                                                                           \
    /* The threads' weight-gradient partials (each group's block transposed) summed in  \
     * thread order into the first, then written to gw in the weight's layout. */        \
    static void conv_gw_finish_##T(const ct_conv2d_geom *g, char *ws, size_t per, size_t off, int nth, T *gw) { \
        int64_t og = g->oc / g->groups, krows = g->c / g->groups * g->kh * g->kw, wnum = g->oc * krows;        \
        T *acc = (T *)(void *)(ws + off);                                                                       \
        for (int t = 1; t < nth; t++) {                                                                         \
            const T *part = (const T *)(const void *)(ws + (size_t)t * per + off);                              \
            for (int64_t i = 0; i < wnum; i++)                                                                  \
                acc[i] += part[i];                                                                              \
        }                                                                                                       \
        for (int64_t gi = 0; gi < g->groups; gi++)                                                              \
            for (int64_t r = 0; r < krows; r++)                                                                 \
                for (int64_t o = 0; o < og; o++)                                                                \
                    gw[(gi * og + o) * krows + r] = acc[(gi * krows + r) * og + o];                             \
    }
/* The column loops and per-image passes of both element types, names suffixed S. */
#define CONV_LOOPS(S)                     \
    IM2COL(float, S)                      \
    IM2COL(double, S)                     \
    CONV_IMAGE(float, CT_DTYPE_FLOAT32, S) \
    CONV_IMAGE(double, CT_DTYPE_FLOAT64, S)
CONV_LOOPS()
CONV_HELPERS(float)
CONV_HELPERS(double)

/* The column loops and per-image passes again for AVX2 and AVX-512 (Note [Loops per
 * ISA] in src/cpu/cpu_isa.h): copies, adds and lane sums in the same order, so the
 * same bits; CT_ISA_PICK(f) picks the variant for this CPU's level. */
#ifdef CT_ISA_VARIANTS
CT_TARGET_AVX2_BEGIN
CONV_LOOPS(_avx2)
CT_TARGET_END
CT_TARGET_AVX512_BEGIN
CONV_LOOPS(_avx512)
CT_TARGET_END
#endif

static void conv_fwd_image(ct_dtype wd, const ct_conv2d_geom *g, const char *x, const char *w, const char *b,
                           char *y, char *cols, int64_t n) {
    int64_t xs = g->c * g->h * g->w, ys = g->oc * g->oh * g->ow;
    if (wd == CT_DTYPE_FLOAT32)
        CT_ISA_PICK(conv_fwd_image_float)(g, (const float *)x + n * xs, (const float *)w, (const float *)b, (float *)y + n * ys,
                             (float *)cols);
    else
        CT_ISA_PICK(conv_fwd_image_double)(g, (const double *)x + n * xs, (const double *)w, (const double *)b,
                              (double *)y + n * ys, (double *)cols);
}

/* Note [Bias as a column row]
 * With a column matrix, the bias joins the product as one more reduction row: each
 * weight row gets its bias appended and the column matrix a last row of ones, so the
 * GEMM writes the finished output (beta = 0). Filling the output with the bias first
 * and accumulating onto it (beta = 1) would cost a pass to write the output plus a
 * second read of it inside the GEMM; the extra row costs 1/K more multiply-adds.
 *
 * Scratch memory (column buffers, the weight with its bias, the backward pass's
 * partial sums) comes from the caching allocator as byte tensors of the call's
 * scope: a malloc of a few hundred KB per call would hand back pages the system
 * zero-fills on first touch, every step. */

/* A byte buffer from the caching allocator, owned by the current scope; NULL after
 * setting the error on failure. */
static char *scratch(size_t nbytes) {
    int64_t n = (int64_t)nbytes + 1;
    ct_tensor *t = ct_empty_impl(&n, 1, CT_DTYPE_UINT8, CT_CPU);
    return t ? ct_tensor_data(t) : NULL;
}

typedef struct {
    ct_dtype wd;
    const ct_conv2d_geom *g;
    const char *x, *w, *b;
    char *y, *bufs;
    size_t colsz;
} conv_job;

/* One image, with the running thread's column buffer. */
static void conv_fwd_chunk(void *ctx, int64_t n) {
    const conv_job *j = ctx;
    conv_fwd_image(j->wd, j->g, j->x, j->w, j->b, j->y,
                   j->bufs ? j->bufs + (size_t)ct_parallel_thread() * j->colsz : NULL, n);
}

static ct_status conv_forward(const ct_conv2d_geom *g, ct_dtype wd, const char *x, const char *w, const char *b,
                              char *y) {
    size_t esz = ct_dtype_size(wd);
    bool direct = conv_direct(g), aug = !direct && b;
    int64_t krows = g->c / g->groups * g->kh * g->kw;
    /* whole cache lines per thread keep the threads' buffers apart */
    size_t colsz = ((size_t)((krows + aug) * g->oh * g->ow) * esz + 63) / 64 * 64;
    int nth = image_threads(g->n);
    /* One column buffer per thread, allocated up front so a failure is an error
     * rather than a silently skipped image. */
    char *bufs = direct ? NULL : scratch((size_t)nth * colsz);
    char *wb = aug ? scratch((size_t)(g->oc * (krows + 1)) * esz) : NULL;
    if ((!direct && !bufs) || (aug && !wb))
        return ct_last_status();
    if (aug) {
        if (wd == CT_DTYPE_FLOAT32)
            conv_bias_rows_float(g, (const float *)w, (const float *)b, (float *)wb, (float *)bufs, colsz, nth);
        else
            conv_bias_rows_double(g, (const double *)w, (const double *)b, (double *)wb, (double *)bufs, colsz, nth);
        w = wb;
    }
    if (nth > 1) {
        conv_job j = {wd, g, x, w, b, y, bufs, colsz};
        ct_parallel_for(g->n, nth, conv_fwd_chunk, &j);
    } else {
        for (int64_t n = 0; n < g->n; n++)
            conv_fwd_image(wd, g, x, w, b, y, bufs, n);
    }
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
    ct_dtype dt = call->in[0]->dtype;
    bool integer = !ct_dtype_is_floating(dt);
    ct_dtype wd = integer ? CT_DTYPE_INT64 : ct_nn_work_dtype(dt);
    ct_scope_begin();
    const ct_tensor *x = ct_nn_as_work(call->in[0], wd), *w = ct_nn_as_work(call->in[1], wd), *b = ct_nn_as_work(call->in[2], wd);
    ct_tensor *y = ct_empty_impl(shape, nd, wd, CT_CPU);
    if (!x || !w || (call->in[2] && !b) || !y) {
        ct_scope_end();
        return ct_last_status();
    }
    if (ct_tensor_numel(y) > 0 && integer)
        ct_conv2d_int_forward(&g, ct_tensor_data(x), ct_tensor_data(w), b ? ct_tensor_data(b) : NULL,
                              ct_tensor_data(y));
    else if (ct_tensor_numel(y) > 0)
        st = conv_forward(&g, wd, ct_tensor_data(x), ct_tensor_data(w), b ? ct_tensor_data(b) : NULL,
                          ct_tensor_data(y));
    if (st == CT_OK) {
        ct_tensor *out = ct_to_dtype_impl(y, dt);
        st = out ? ct_call_set_output(call, 0, out) : ct_last_status();
    }
    ct_scope_end();
    return st;
}

static void conv_bwd_image(ct_dtype wd, const ct_conv2d_geom *g, const char *x, const char *w, const char *gy,
                           char *gx, char *gw, double *gb, char *cols, int64_t n) {
    int64_t xs = g->c * g->h * g->w, ys = g->oc * g->oh * g->ow;
    if (wd == CT_DTYPE_FLOAT32)
        CT_ISA_PICK(conv_bwd_image_float)(g, (const float *)x + n * xs, (const float *)w, (const float *)gy + n * ys,
                             gx ? (float *)gx + n * xs : NULL, (float *)gw, gb, (float *)cols);
    else
        CT_ISA_PICK(conv_bwd_image_double)(g, (const double *)x + n * xs, (const double *)w, (const double *)gy + n * ys,
                              gx ? (double *)gx + n * xs : NULL, (double *)gw, gb, (double *)cols);
}

/* Note [Convolution backward parts]
 * The weight and bias gradients are sums over the images. The batch is cut into parts
 * of consecutive images (at most CONV_BWD_PARTS, fewer when the partial sums would
 * pass CONV_BWD_PART_BYTES); each part is a chunk of a region with partial sums of its
 * own, run image by image, and the parts' sums are added in part order. The cut
 * depends on the batch and the weight's size alone, so the gradients are the same
 * bits for any thread count and whichever thread ran a part. Column buffers are per
 * thread: they hold no result. */
#define CONV_BWD_PARTS 16
#define CONV_BWD_PART_BYTES ((size_t)64 << 20)

typedef struct {
    ct_dtype wd;
    const ct_conv2d_geom *g;
    const char *x, *w, *gy;
    char *gx, *ws, *cols;
    bool want_gw, want_gb;
    size_t per, gbsz, colsz;
    int64_t parts;
} conv_bwd_job;

static void conv_bwd_part(void *ctx, int64_t part) {
    const conv_bwd_job *j = ctx;
    char *ps = j->ws + (size_t)part * j->per;
    char *cols = j->cols ? j->cols + (size_t)ct_parallel_thread() * j->colsz : NULL;
    int64_t n0 = j->g->n * part / j->parts, n1 = j->g->n * (part + 1) / j->parts;
    for (int64_t n = n0; n < n1; n++)
        conv_bwd_image(j->wd, j->g, j->x, j->w, j->gy, j->gx, j->want_gw ? ps + j->gbsz : NULL,
                       j->want_gb ? (double *)(void *)ps : NULL, cols, n);
}

/* Runs the backward pass over the batch into gx (every element written), gw and gb
 * (sums over the images; NULL when not wanted). */
static ct_status conv_backward(const ct_conv2d_geom *g, ct_dtype wd, const char *x, const char *w, const char *gy,
                               char *gx, char *gw, char *gb) {
    size_t esz = ct_dtype_size(wd);
    int64_t wnum = g->oc * (g->c / g->groups) * g->kh * g->kw;
    size_t colsz = conv_direct(g) ? 0 : (size_t)(g->c / g->groups * g->kh * g->kw * g->oh * g->ow) * esz;
    size_t gwsz = gw ? (size_t)wnum * esz : 0, gbsz = gb ? (size_t)g->oc * sizeof(double) : 0;
    /* per part: [gb partial (double)] [gw partial]; doubles first keeps every part
     * aligned for its type, and whole cache lines per part keep the parts' partial
     * sums apart; then one column buffer per thread */
    size_t per = (gbsz + gwsz + 63) / 64 * 64, colper = (colsz + 63) / 64 * 64;
    int nth = image_threads(g->n);
    int64_t parts = g->n < CONV_BWD_PARTS ? g->n : CONV_BWD_PARTS;
    while (parts > 1 && (size_t)parts * per > CONV_BWD_PART_BYTES)
        parts--;
    if (parts < 1)
        parts = 1;
    bool want_cols = colsz > 0 && (gw || gx);
    char *ws = scratch((size_t)parts * per + (want_cols ? (size_t)nth * colper : 0));
    if (!ws)
        return ct_last_status();
    for (int64_t t = 0; t < parts; t++) /* the partial sums start at zero; the columns need not */
        memset(ws + (size_t)t * per, 0, gbsz + gwsz);
    if (g->oh * g->ow == 0) {
        if (gx)
            memset(gx, 0, (size_t)(g->n * g->c * g->h * g->w) * esz);
    } else {
        conv_bwd_job j = {wd, g, x, w, gy, gx, ws, want_cols ? ws + (size_t)parts * per : NULL, gw != NULL,
                          gb != NULL, per, gbsz, colper, parts};
        if (nth > 1) {
            ct_parallel_for(parts, nth, conv_bwd_part, &j);
        } else { /* here, so that the GEMMs can share the threads */
            for (int64_t t = 0; t < parts; t++)
                conv_bwd_part(&j, t);
        }
    }
    for (int64_t t = 0; t < parts; t++) {
        const char *part = ws + (size_t)t * per;
        for (int64_t i = 0; gb && i < g->oc; i++) {
            double v = ((const double *)(const void *)part)[i];
            if (wd == CT_DTYPE_FLOAT32)
                ((float *)gb)[i] = (float)(t ? ((float *)gb)[i] + v : v);
            else
                ((double *)gb)[i] = t ? ((double *)gb)[i] + v : v;
        }
    }
    if (gw) {
        if (wd == CT_DTYPE_FLOAT32)
            conv_gw_finish_float(g, ws, per, gbsz, (int)parts, (float *)gw);
        else
            conv_gw_finish_double(g, ws, per, gbsz, (int)parts, (double *)gw);
    }
    return CT_OK;
}

ct_status ct_cpu_conv2d_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_conv2d_geom g;
    ct_status st = ct_conv2d_backward_geometry(call, &g);
    if (st)
        return st;
    const ct_tensor *go = call->in[0];
    ct_dtype dt = call->in[1]->dtype;
    bool integer = !ct_dtype_is_floating(dt);
    ct_dtype wd = integer ? CT_DTYPE_INT64 : ct_nn_work_dtype(dt);
    bool want_in = call->ints[7], want_w = call->ints[8], want_b = call->ints[9];
    ct_scope_begin();
    /* conv_transpose2d passes a broadcast placeholder input, read only for grad_weight */
    const ct_tensor *x = integer && !want_w ? call->in[1] : ct_nn_as_work(call->in[1], wd);
    const ct_tensor *w = ct_nn_as_work(call->in[2], wd), *gy = ct_nn_as_work(go, wd);
    ct_tensor *gx = want_in ? ct_empty_impl(call->in[1]->shape, call->in[1]->ndim, wd, CT_CPU) : NULL;
    ct_tensor *gw = want_w ? ct_empty_impl(call->in[2]->shape, 4, wd, CT_CPU) : NULL;
    ct_tensor *gb = want_b ? ct_empty_impl(&g.oc, 1, wd, CT_CPU) : NULL;
    if (!x || !w || !gy || (want_in && !gx) || (want_w && !gw) || (want_b && !gb)) {
        ct_scope_end();
        return ct_last_status();
    }
    if (integer)
        ct_conv2d_int_backward(&g, want_w ? ct_tensor_data(x) : NULL, ct_tensor_data(w), ct_tensor_data(gy),
                               gx ? ct_tensor_data(gx) : NULL, gw ? ct_tensor_data(gw) : NULL,
                               gb ? ct_tensor_data(gb) : NULL);
    else
        st = conv_backward(&g, wd, ct_tensor_data(x), ct_tensor_data(w), ct_tensor_data(gy),
                           gx ? ct_tensor_data(gx) : NULL, gw ? ct_tensor_data(gw) : NULL,
                           gb ? ct_tensor_data(gb) : NULL);
    ct_tensor *res[3] = {gx, gw, gb};
    for (int i = 0; i < 3 && st == CT_OK; i++)
        if (res[i]) {
            ct_tensor *r = ct_to_dtype_impl(res[i], dt);
            st = r ? ct_call_set_output(call, i, r) : ct_last_status();
        }
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ max pooling */

/* The operands of the pooling loops over planes. */
typedef struct {
    const ct_pool2d_geom *g;
    const void *x;
    void *y;
    int64_t *idx;
    int64_t in_plane, out_plane, rows;
    atomic_int bad;
} pool_job;

/* The 2x2 fast path four outputs at a time (SSE2): deinterleaves the even and odd
 * columns of the two input rows and applies Note [Max pooling fast path]'s rule with
 * masks. Returns how many outputs of the row it wrote; the caller does the rest. */
#if defined(__SSE2__)
#include <emmintrin.h>
static int64_t max_pool_2x2_sse2_float(const float *r0, const float *r1, float *yr, int64_t *ir, int64_t ow,
                                      int64_t base, int64_t W) {
    int64_t ox = 0;
    for (; ox + 4 <= ow; ox += 4) {
        __m128 a0 = _mm_loadu_ps(r0 + 2 * ox), a1 = _mm_loadu_ps(r0 + 2 * ox + 4);
        __m128 c0 = _mm_loadu_ps(r1 + 2 * ox), c1 = _mm_loadu_ps(r1 + 2 * ox + 4);
        __m128 v[4] = {_mm_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0)), _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 1, 3, 1)),
                       _mm_shuffle_ps(c0, c1, _MM_SHUFFLE(2, 0, 2, 0)), _mm_shuffle_ps(c0, c1, _MM_SHUFFLE(3, 1, 3, 1))};
        __m128 best = v[0];
        __m128i code = _mm_setzero_si128();
        for (int k = 1; k < 4; k++) {
            __m128 t = _mm_andnot_ps(_mm_cmple_ps(v[k], best), _mm_cmpeq_ps(best, best));
            __m128i ti = _mm_castps_si128(t);
            best = _mm_or_ps(_mm_and_ps(t, v[k]), _mm_andnot_ps(t, best));
            code = _mm_or_si128(_mm_and_si128(ti, _mm_set1_epi32(k)), _mm_andnot_si128(ti, code));
        }
        _mm_storeu_ps(yr + ox, best);
        int32_t cs[4];
        _mm_storeu_si128((__m128i *)(void *)cs, code);
        for (int l = 0; l < 4; l++)
            ir[ox + l] = base + (cs[l] >> 1) * W + 2 * (ox + l) + (cs[l] & 1);
    }
    return ox;
}
#else
static int64_t max_pool_2x2_sse2_float(const float *r0, const float *r1, float *yr, int64_t *ir, int64_t ow,
                                       int64_t base, int64_t W) {
    (void)r0, (void)r1, (void)yr, (void)ir, (void)ow, (void)base, (void)W;
    return 0;
}
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CT_POOL_AVX512 1
/* For a chunk of the min(left, 16) outputs left in a row: mo selects them, m0 and m1
 * the 2 * that many inputs of each of the two input rows (two vectors of 16). */
static inline void pool_masks(int64_t left, __mmask16 *mo, __mmask16 *m0, __mmask16 *m1) {
    unsigned n = left < 16 ? (unsigned)left : 16u;
    *mo = (__mmask16)((1u << n) - 1);
    *m0 = (__mmask16)(n >= 8 ? 0xffffu : (1u << 2 * n) - 1);
    *m1 = (__mmask16)(n > 8 ? (1u << (2 * n - 16)) - 1 : 0);
}

/* The 2x2 fast path sixteen outputs at a time with AVX-512: masked loads and stores
 * take a whole output row, the short rows of small feature maps (7 or 14 outputs)
 * included, and the Note [Max pooling fast path] rule runs on comparison masks. */
__attribute__((target("avx512f"))) static int64_t max_pool_2x2_avx512_float(const float *r0, const float *r1, float *yr,
                                                                           int64_t *ir, int64_t ow, int64_t base,
                                                                           int64_t W) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i lane2 = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    for (int64_t ox = 0; ox < ow; ox += 16) {
        __mmask16 mo, m0, m1;
        pool_masks(ow - ox, &mo, &m0, &m1);
        __m512 a0 = _mm512_maskz_loadu_ps(m0, r0 + 2 * ox), a1 = _mm512_maskz_loadu_ps(m1, r0 + 2 * ox + 16);
        __m512 c0 = _mm512_maskz_loadu_ps(m0, r1 + 2 * ox), c1 = _mm512_maskz_loadu_ps(m1, r1 + 2 * ox + 16);
        __m512 v[4] = {_mm512_permutex2var_ps(a0, even, a1), _mm512_permutex2var_ps(a0, odd, a1),
                       _mm512_permutex2var_ps(c0, even, c1), _mm512_permutex2var_ps(c0, odd, c1)};
        __m512 best = v[0];
        __m512i lo = _mm512_add_epi64(_mm512_set1_epi64(base + 2 * ox), lane2);
        __m512i hi = _mm512_add_epi64(lo, _mm512_set1_epi64(16));
        __m512i ilo = lo, ihi = hi;
        const int64_t off[4] = {0, 1, W, W + 1};
        for (int k = 1; k < 4; k++) {
            /* !(v <= best) where best is not NaN */
            __mmask16 t = _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(best, best, _CMP_EQ_OQ), v[k], best, _CMP_NLE_UQ);
            best = _mm512_mask_mov_ps(best, t, v[k]);
            __m512i o = _mm512_set1_epi64(off[k]);
            ilo = _mm512_mask_mov_epi64(ilo, (__mmask8)t, _mm512_add_epi64(lo, o));
            ihi = _mm512_mask_mov_epi64(ihi, (__mmask8)(t >> 8), _mm512_add_epi64(hi, o));
        }
        _mm512_mask_storeu_ps(yr + ox, mo, best);
        _mm512_mask_storeu_epi64(ir + ox, (__mmask8)mo, ilo);
        _mm512_mask_storeu_epi64(ir + ox + 8, (__mmask8)(mo >> 8), ihi);
    }
    return ow;
}

/* The gradient of the 2x2 fast path when the windows tile the planes exactly: each
 * output's gradient goes to the one input of its window its index names and the
 * window's other three inputs get zero, so no separate zeroing pass is needed. The
 * index must name a position of the output's own window; false as soon as one does
 * not (the caller then runs the general scatter, which handles any index). The
 * gradient is added to zero, as the general path does, so -0 becomes +0 there too. */
__attribute__((target("avx512f"))) static bool max_unpool_2x2_avx512_float(const float *gy, const int64_t *idx,
                                                                         float *gx, int64_t r0, int64_t r1,
                                                                         int64_t oh, int64_t ow) {
    const int64_t W = 2 * ow;
    const __m512i even = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i odd = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512i lane2 = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t r = r0; r < r1; r++) { /* output rows of all planes, each over two input rows */
        const int64_t oy = r % oh;
        float *top = gx + 2 * r * W, *bottom = top + W;
        for (int64_t ox = 0; ox < ow; ox += 16) {
            __mmask16 mo, m0, m1;
            pool_masks(ow - ox, &mo, &m0, &m1);
            const float *g = gy + r * ow + ox;
            const int64_t *ip = idx + r * ow + ox;
            __m512 gv = _mm512_maskz_loadu_ps(mo, g);
            __m512i first = _mm512_add_epi64(_mm512_set1_epi64(2 * oy * W + 2 * ox), lane2);
            __m512i dlo = _mm512_sub_epi64(_mm512_maskz_loadu_epi64((__mmask8)mo, ip), first);
            __m512i dhi = _mm512_sub_epi64(_mm512_maskz_loadu_epi64((__mmask8)(mo >> 8), ip + 8),
                                           _mm512_add_epi64(first, _mm512_set1_epi64(16)));
            const int64_t off[4] = {0, 1, W, W + 1};
            __m512 part[4];
            __mmask16 seen = 0;
            for (int k = 0; k < 4; k++) {
                __m512i o = _mm512_set1_epi64(off[k]);
                __mmask16 m = (__mmask16)(_mm512_cmpeq_epi64_mask(dlo, o) | (_mm512_cmpeq_epi64_mask(dhi, o) << 8));
                m &= mo;
                seen |= m;
                part[k] = _mm512_add_ps(_mm512_maskz_mov_ps(m, gv), zero);
            }
            if (seen != mo)
                return false;
            _mm512_mask_storeu_ps(top + 2 * ox, m0, _mm512_permutex2var_ps(part[0], even, part[1]));
            _mm512_mask_storeu_ps(top + 2 * ox + 16, m1, _mm512_permutex2var_ps(part[0], odd, part[1]));
            _mm512_mask_storeu_ps(bottom + 2 * ox, m0, _mm512_permutex2var_ps(part[2], even, part[3]));
            _mm512_mask_storeu_ps(bottom + 2 * ox + 16, m1, _mm512_permutex2var_ps(part[2], odd, part[3]));
        }
    }
    return true;
}

/* Blocks of 16 output rows of the 2x2 gradient (in_plane, out_plane: oh, ow). */
static void max_unpool_2x2_blocks(void *ctx, int64_t c0, int64_t c1) {
    pool_job *jb = ctx;
    int64_t r0 = c0 * 16, r1 = c1 * 16 < jb->rows ? c1 * 16 : jb->rows;
    if (!max_unpool_2x2_avx512_float(jb->x, jb->idx, jb->y, r0, r1, jb->in_plane, jb->out_plane))
        atomic_store(&jb->bad, 1);
}

#endif

static int64_t max_pool_2x2_vec_float(const float *r0, const float *r1, float *yr, int64_t *ir, int64_t ow,
                                      int64_t base, int64_t W, bool avx512) {
#ifdef CT_POOL_AVX512
    if (avx512)
        return max_pool_2x2_avx512_float(r0, r1, yr, ir, ow, base, W);
#endif
    (void)avx512;
    return max_pool_2x2_sse2_float(r0, r1, yr, ir, ow, base, W);
}
static int64_t max_pool_2x2_vec_double(const double *r0, const double *r1, double *yr, int64_t *ir, int64_t ow,
                                       int64_t base, int64_t W, bool avx512) {
    (void)r0, (void)r1, (void)yr, (void)ir, (void)ow, (void)base, (void)W, (void)avx512;
    return 0;
}

/* Note [Max pooling fast path]
 * A 2x2 window with stride 2, no padding and no dilation (the usual downsampling
 * layer) whose windows all lie inside the input takes the four values of each
 * window straight from two input rows, with selects instead of the general loop's
 * bounds checks. The rule is the general loop's: scanning row by row, a value
 * replaces the best so far when it is greater, or when it is NaN and the best is
 * not, so the first NaN wins and stays (PyTorch propagates NaN) and ties keep the
 * first position. */
static bool pool_2x2(const ct_pool2d_geom *g) {
    return g->kernel[0] == 2 && g->kernel[1] == 2 && g->stride[0] == 2 && g->stride[1] == 2 && g->padding[0] == 0 &&
           g->padding[1] == 0 && g->dilation[0] == 1 && g->dilation[1] == 1 && 2 * g->oh <= g->h &&
           2 * g->ow <= g->w;
}

/* The first tap i of a window starting at start (start + i * dilation >= 0), and one
 * past the last inside an input of size n, at most kernel: the loop skips the taps in
 * the padding instead of stepping over them (a kernel of 2^31 rows over a small input
 * took hours). */
static inline int64_t tap_first(int64_t start, int64_t dilation) {
    return start >= 0 ? 0 : (-start + dilation - 1) / dilation;
}
static inline int64_t tap_end(int64_t start, int64_t n, int64_t dilation, int64_t kernel) {
    int64_t end = start >= n ? 0 : (n - 1 - start) / dilation + 1;
    return end < kernel ? end : kernel;
}

/* One output plane per iteration; T is the element type (float32 and float64 run
 * natively, other dtypes through float64, which holds all their values exactly). */
#define MAX_POOL_PLANES(T)                                                                              \
    static void max_pool_planes_##T(void *ctx, int64_t p0, int64_t p1) {                              \
        const pool_job *jb = ctx;                                                                       \
        const ct_pool2d_geom *g = jb->g;                                                                \
        const T *px = jb->x;                                                                            \
        T *py = jb->y;                                                                                  \
        int64_t *pi = jb->idx;                                                                          \
        for (int64_t p = p0; p < p1; p++) {                                                             \
            const T *xp = px + p * g->h * g->w;                                                         \
            for (int64_t oy = 0; oy < g->oh; oy++)                                                      \
                for (int64_t ox = 0; ox < g->ow; ox++) {                                                \
                    T best = -(T)INFINITY;                                                              \
                    int64_t at = -1;                                                                    \
                    /* the taps inside the input, in the same order (a kernel may be far larger) */ \
                    int64_t y0 = oy * g->stride[0] - g->padding[0], x0 = ox * g->stride[1] - g->padding[1]; \
                    int64_t i0 = tap_first(y0, g->dilation[0]), i1 = tap_end(y0, g->h, g->dilation[0], g->kernel[0]); \
                    int64_t j0 = tap_first(x0, g->dilation[1]), j1 = tap_end(x0, g->w, g->dilation[1], g->kernel[1]); \
                    for (int64_t i = i0; i < i1; i++) {                                                 \
                        int64_t yy = y0 + i * g->dilation[0];                                           \
                        if (yy < 0 || yy >= g->h)                                                       \
                            continue;                                                                   \
                        for (int64_t j = j0; j < j1; j++) {                                             \
                            int64_t xx = x0 + j * g->dilation[1];                                       \
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
    }                                                                                                   \
    static void max_pool_##T(const ct_pool2d_geom *g, const T *px, T *py, int64_t *pi) {               \
        pool_job jb = {.g = g, .x = px, .y = py, .idx = pi};                                            \
        ct_parallel_range(g->n * g->c, g->n * g->c, 16, max_pool_planes_##T, &jb);                      \
    }                                                                                                   \
    static void max_pool_2x2_planes_##T(void *ctx, int64_t p0, int64_t p1) {                          \
        const pool_job *jb = ctx;                                                                       \
        const ct_pool2d_geom *g = jb->g;                                                                \
        const T *px = jb->x;                                                                            \
        T *py = jb->y;                                                                                  \
        int64_t *pi = jb->idx;                                                                          \
        int64_t W = g->w, ow = g->ow;                                                                   \
        bool avx512 = ct_cpu_isa_level() == CT_ISA_AVX512;                                              \
        for (int64_t p = p0; p < p1; p++)                                                               \
            for (int64_t oy = 0; oy < g->oh; oy++) {                                                    \
                const T *r0 = px + (p * g->h + 2 * oy) * W, *r1 = r0 + W;                              \
                T *yr = py + (p * g->oh + oy) * ow;                                                     \
                int64_t *ir = pi + (p * g->oh + oy) * ow, base = 2 * oy * W;                            \
                int64_t ox = max_pool_2x2_vec_##T(r0, r1, yr, ir, ow, base, W, avx512);                 \
                for (; ox < ow; ox++) {                                                                 \
                    /* !(v <= best) is v > best or v NaN; best == best stops at a NaN. Bitwise \
                     * operators and selects keep this free of branches, which random data    \
                     * would mispredict. */                                                     \
                    T best = r0[2 * ox], v1 = r0[2 * ox + 1], v2 = r1[2 * ox], v3 = r1[2 * ox + 1];      \
                    int64_t at = base + 2 * ox;                                                         \
                    int t = !(v1 <= best) & (best == best);                                             \
                    best = t ? v1 : best;                                                               \
                    at += t;                                                                            \
                    t = !(v2 <= best) & (best == best);                                                 \
                    best = t ? v2 : best;                                                               \
                    at = t ? base + W + 2 * ox : at;                                                    \
                    t = !(v3 <= best) & (best == best);                                                 \
                    best = t ? v3 : best;                                                               \
                    at = t ? base + W + 2 * ox + 1 : at;                                                \
                    yr[ox] = best;                                                                      \
                    ir[ox] = at;                                                                        \
                }                                                                                       \
            }                                                                                           \
    }                                                                                                   \
    static void max_pool_2x2_##T(const ct_pool2d_geom *g, const T *px, T *py, int64_t *pi) {           \
        pool_job jb = {.g = g, .x = px, .y = py, .idx = pi};                                            \
        ct_parallel_range(g->n * g->c, g->n * g->c, 16, max_pool_2x2_planes_##T, &jb);                  \
    }                                                                                                   \
    /* gx = 0, then each output's gradient added at its index; false on an index   \
     * outside its plane (gx is then incomplete). Planes are independent. */       \
    static void max_unpool_planes_##T(void *ctx, int64_t p0, int64_t p1) {                            \
        pool_job *jb = ctx;                                                                             \
        const T *gy = jb->x;                                                                            \
        T *gx = jb->y;                                                                                  \
        const int64_t *idx = jb->idx, in_plane = jb->in_plane, out_plane = jb->out_plane;               \
        int bad = 0;                                                                                    \
        for (int64_t p = p0; p < p1; p++) {                                                             \
            T *gp = gx + p * in_plane;                                                                  \
            const T *g = gy + p * out_plane;                                                            \
            const int64_t *ip = idx + p * out_plane;                                                    \
            memset(gp, 0, sizeof(T) * (size_t)in_plane);                                                \
            bool ok = true;                                                                             \
            for (int64_t k = 0; k < out_plane; k++) {                                                   \
                int64_t at = ip[k];                                                                     \
                ok &= at >= 0 && at < in_plane;                                                         \
                gp[ok ? at : 0] += ok ? g[k] : (T)0;                                                    \
            }                                                                                           \
            bad |= !ok;                                                                                 \
        }                                                                                               \
        if (bad)                                                                                        \
            atomic_store(&jb->bad, 1);                                                                  \
    }                                                                                                   \
    static bool max_unpool_##T(const T *gy, const int64_t *idx, T *gx, int64_t planes, int64_t in_plane, \
                               int64_t out_plane) {                                                     \
        pool_job jb = {.x = gy, .y = gx, .idx = (int64_t *)(uintptr_t)idx, .in_plane = in_plane,        \
                       .out_plane = out_plane};                                                         \
        ct_parallel_range(planes, planes, 16, max_unpool_planes_##T, &jb);                              \
        return !atomic_load(&jb.bad);                                                                   \
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
    const ct_tensor *x = ct_contiguous_impl(ct_to_dtype_impl(call->in[0], wd));
    ct_tensor *y = ct_empty_impl(shape, nd, wd, CT_CPU);
    ct_tensor *idx = ct_empty_impl(shape, nd, CT_DTYPE_INT64, CT_CPU);
    if (!x || !y || !idx) {
        ct_scope_end();
        return ct_last_status();
    }
    bool fast = pool_2x2(&g);
    if (wd == CT_DTYPE_FLOAT32)
        (fast ? max_pool_2x2_float : max_pool_float)(&g, ct_tensor_data(x), ct_tensor_data(y), ct_tensor_data(idx));
    else
        (fast ? max_pool_2x2_double : max_pool_double)(&g, ct_tensor_data(x), ct_tensor_data(y),
                                                       ct_tensor_data(idx));
    ct_tensor *out = ct_to_dtype_impl(y, dt);
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
    if (ct_max_pool2d_backward_check(go, x, ix))
        return ct_last_status();
    int64_t h = x->shape[x->ndim - 2], w = x->shape[x->ndim - 1];
    int64_t oh = go->shape[go->ndim - 2], ow = go->shape[go->ndim - 1];
    int64_t planes = x->numel / (h * w > 0 ? h * w : 1);
    /* float32 natively, float16/bfloat16 through float32, the rest through float64 */
    ct_dtype wd = x->dtype == CT_DTYPE_FLOAT32 || x->dtype == CT_DTYPE_FLOAT16 || x->dtype == CT_DTYPE_BFLOAT16
                      ? CT_DTYPE_FLOAT32
                      : CT_DTYPE_FLOAT64;
    ct_scope_begin();
    const ct_tensor *gw = ct_contiguous_impl(ct_to_dtype_impl(go, wd));
    const ct_tensor *i64 = ct_contiguous_impl(ix);
    ct_tensor *gx = ct_empty_impl(x->shape, x->ndim, wd, CT_CPU);
    ct_status st = CT_OK;
    if (!gw || !i64 || !gx) {
        ct_scope_end();
        return ct_last_status();
    }
    bool ok = false;
#ifdef CT_POOL_AVX512
    /* windows that tile the planes exactly: the 2x2 / stride 2 layer on even sizes */
    if (wd == CT_DTYPE_FLOAT32 && h == 2 * oh && w == 2 * ow && oh * ow > 0 &&
        ct_cpu_isa_level() == CT_ISA_AVX512) {
        int64_t rows = planes * oh;
        pool_job jb = {.x = ct_tensor_data(gw), .y = ct_tensor_data(gx), .idx = ct_tensor_data(i64),
                       .in_plane = oh, .out_plane = ow, .rows = rows};
        ct_parallel_range((rows + 15) / 16, rows, 64, max_unpool_2x2_blocks, &jb);
        ok = !atomic_load(&jb.bad);
    }
#endif
    if (!ok)
        ok = wd == CT_DTYPE_FLOAT32
                  ? max_unpool_float(ct_tensor_data(gw), ct_tensor_data(i64), ct_tensor_data(gx), planes, h * w, oh * ow)
                  : max_unpool_double(ct_tensor_data(gw), ct_tensor_data(i64), ct_tensor_data(gx), planes, h * w,
                                      oh * ow);
    if (!ok) {
        const int64_t *pi = ct_tensor_data(i64);
        int64_t at = 0;
        for (int64_t k = 0; k < planes * oh * ow; k++)
            if (pi[k] < 0 || pi[k] >= h * w) {
                at = pi[k];
                break;
            }
        st = ct_error(CT_ERROR_INDEX, op, "index %lld is out of bounds for a plane of %lld elements", (long long)at,
                      (long long)(h * w));
    }
    if (st == CT_OK) {
        ct_tensor *out = ct_to_dtype_impl(gx, x->dtype);
        st = out ? ct_call_set_output(call, 0, out) : ct_last_status();
    }
    ct_scope_end();
    return st;
}
