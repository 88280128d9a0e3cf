/* CPU row functions of the reductions and scans. Inputs arrive converted to a work
 * dtype (float32, float64 or int64; see src/meta/reduce.c); float work accumulates in
 * double, integer work in int64 with two's-complement wrap-around. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/parallel.h"
#include "cpu/cpu_backend.h"
#include "cpu/reduce.h"
#include "meta/stubs.h"
#include "cpu/vecmath.h"


/* ctorch never reads floating-point exception flags, so comparisons may be evaluated
 * unconditionally: this lets the compiler turn the selects of the extremum and exp
 * loops into vector blends. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

/* Note [Deterministic reductions]
 * Float sums are cascaded: each block of CT_RED_BLK contiguous elements is summed with
 * eight independent accumulators (which the compiler vectorises; the plain float32 sum
 * uses the sixteen float32 lanes of Note [Float32 block sums] in cpu/vecmath.h), and
 * the block sums are combined pairwise by a binary counter (casc_push), so the rounding
 * error grows with log(n), not n. A reduction longer than CT_RED_CHUNK elements is cut into chunks
 * of exactly that size; each chunk is summed on its own (in parallel when threads are
 * free) and the chunk results are pushed into a cascade in chunk order. The cut points
 * depend only on the shape, never on the thread count, so results are bit-identical
 * for any ct_set_num_threads, and the float32 block sums are the same on every ISA. */
#define CT_RED_BLK 256
#define CT_RED_CHUNK ((int64_t)1 << 16)
#define CT_ID(x) (x)

typedef struct casc {
    double lv[64];
    uint64_t cnt;
    double pend; /* elements that did not fill a block yet */
    int npend;
} casc;

static inline void casc_push(casc *c, double x) {
    uint64_t n = c->cnt++;
    int k = 0;
    while (n & 1u) {
        x = c->lv[k] + x;
        n >>= 1;
        k++;
    }
    c->lv[k] = x;
}

static inline void casc_add(casc *c, double x) {
    c->pend += x;
    if (++c->npend == CT_RED_BLK) {
        casc_push(c, c->pend);
        c->pend = 0;
        c->npend = 0;
    }
}

static double casc_total(const casc *c) {
    double s = c->pend;
    for (int k = 0; k < 64; k++)
        if ((c->cnt >> k) & 1u)
            s += c->lv[k];
    return s;
}

/* exp for float32 within about 1 ulp, written without branches so that loops over it
 * vectorise: x = n ln2 + r with |r| <= ln2/2, a minimax polynomial for exp(r), and 2^n
 * applied as two factors so that subnormal results and overflow to inf come out right.
 * NaN passes through. */
static inline float ct_expf(float x) {
    float xc = x < -104.0f ? -104.0f : x > 89.0f ? 89.0f : x;
    /* Round to nearest by adding and removing 1.5 * 2^23 (|t| < 2^22 here). */
    float fn = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    int32_t n = (int32_t)fn;
    float r = xc - fn * 0.693359375f + fn * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t n1 = n >> 1, n2 = n - n1;
    uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    float e = p * s1 * s2;
    return x != x ? x : e;
}

typedef struct sum_ctx {
    casc c;
    double m; /* shift (var's mean, logsumexp's max) */
    double p; /* power */
} sum_ctx;

/* A segment summing MAP(x) over elements of type T into the cascade. */
#define CT_SUM_SEG(fname, T, MAP)                                                                 \
    static void fname(void *vctx, const char *p, int64_t n, int64_t s) {                          \
        sum_ctx *ctx = vctx;                                                                      \
        const double m = ctx->m, pw = ctx->p;                                                     \
        (void)m;                                                                                  \
        (void)pw;                                                                                 \
        int64_t i = 0;                                                                            \
        if (s == (int64_t)sizeof(T)) {                                                            \
            const T *a = (const T *)(const void *)p;                                              \
            for (; i + CT_RED_BLK <= n; i += CT_RED_BLK) {                                        \
                double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                         \
                for (int64_t j = 0; j < CT_RED_BLK; j += 8)                                       \
                    for (int k = 0; k < 8; k++) {                                                 \
                        double x = (double)a[i + j + k];                                          \
                        acc[k] += MAP;                                                            \
                    }                                                                             \
                casc_push(&ctx->c, ((acc[0] + acc[1]) + (acc[2] + acc[3])) +                      \
                                       ((acc[4] + acc[5]) + (acc[6] + acc[7])));                  \
            }                                                                                     \
        }                                                                                         \
        for (; i < n; i++) {                                                                      \
            double x = (double)*(const T *)(const void *)(p + i * s);                             \
            casc_add(&ctx->c, MAP);                                                               \
        }                                                                                         \
    }

/* Note [Sum streams]
 * A float32 sum is bound by how fast memory reaches the adds, so blocksum_f32 reads its
 * blocks in memory order, one after another (successive blocks' addition chains are
 * independent and the CPU overlaps them by itself). An earlier version interleaved
 * four neighbouring blocks (four 1 KiB streams that jump every 16 lines) with a
 * software prefetch 8 KiB ahead. Measured in one process, alternating, medians of 15
 * (GB/s over 1M and 16M float32, 1 and 2 threads, the loops alone over 64K-element chunks):
 *
 *   AMD EPYC (Zen 4)      1M/1t  16M/1t  1M/2t  16M/2t
 *     four neighbours       43     11      66     20
 *     in order              84     23     138     40
 *     in order + prefetch   72     20     128     34
 *   Intel Xeon (model 207)
 *     four neighbours       19     12-13   39-45  35-39
 *     in order              20     10-11   54-62  35-38
 *     in order + prefetch   20     14-15   63-77  37-40
 *
 * So the loop prefetches 4 KiB ahead on Intel's CPUs only (ct_cpu_is_intel). The order
 * of the additions, and so every result, is the same as before. */

/* The plain float32 sum, the hot one, adds within a block in float32 by Note [Float32
 * block sums] (src/cpu/vecmath.h): sixteen lanes of sixteen values each, at the
 * widest vector width the CPU has and with the same result on every ISA; the block
 * sums join the double cascade. */
_Static_assert(CT_RED_BLK == CT_VM_SUM_BLK, "float32 blocks and cascade blocks must agree");
static void seg_sum_f32(void *vctx, const char *p, int64_t n, int64_t s) {
    sum_ctx *ctx = vctx;
    int64_t i = 0;
    if (s == (int64_t)sizeof(float) && n >= CT_RED_BLK) {
        const float *a = (const float *)(const void *)p;
        const ct_vm_red *vr = ct_vm_red_get();
        /* up to a whole chunk's blocks per call */
        double bs[CT_RED_CHUNK / CT_RED_BLK];
        const int64_t most = CT_RED_CHUNK / CT_RED_BLK;
        while (i + CT_RED_BLK <= n) {
            int64_t nb = (n - i) / CT_RED_BLK;
            nb = nb < most ? nb : most;
            if (vr)
                vr->blocksum_f32(bs, a + i, nb);
            else
                ct_vm_blocksum_ref(bs, a + i, nb);
            for (int64_t k = 0; k < nb; k++)
                casc_push(&ctx->c, bs[k]);
            i += nb * CT_RED_BLK;
        }
    }
    for (; i < n; i++)
        casc_add(&ctx->c, (double)*(const float *)(const void *)(p + i * s));
}
CT_SUM_SEG(seg_sum_f64, double, x)
CT_SUM_SEG(seg_nansum_f32, float, x != x ? 0.0 : x)
CT_SUM_SEG(seg_nansum_f64, double, x != x ? 0.0 : x)
CT_SUM_SEG(seg_abs_f32, float, fabs(x))
CT_SUM_SEG(seg_abs_f64, double, fabs(x))
CT_SUM_SEG(seg_sq_f32, float, x * x)
CT_SUM_SEG(seg_sq_f64, double, x * x)
CT_SUM_SEG(seg_pow_f32, float, pow(fabs(x), pw))
CT_SUM_SEG(seg_pow_f64, double, pow(fabs(x), pw))
CT_SUM_SEG(seg_dev2_f32, float, (x - m) * (x - m))
CT_SUM_SEG(seg_dev2_f64, double, (x - m) * (x - m))
CT_SUM_SEG(seg_expm_f32, float, (double)ct_expf((float)(x - m)))
CT_SUM_SEG(seg_expm_f64, double, exp(x - m))

typedef struct fsum_job {
    const ct_reduce_iter *it;
    const char *base;
    ct_seg_fn seg;
    double m, p;
} fsum_job;

static double fsum_range(const fsum_job *j, int64_t b, int64_t e) {
    sum_ctx c;
    memset(&c, 0, sizeof c);
    c.m = j->m;
    c.p = j->p;
    ct_reduce_walk(j->it, j->base, b, e, j->seg, &c);
    return casc_total(&c.c);
}

typedef struct {
    const fsum_job *j;
    double *part;
    int64_t n;
} fsum_chunks;

static void fsum_chunk(void *ctx, int64_t c) {
    const fsum_chunks *f = ctx;
    int64_t e = (c + 1) * CT_RED_CHUNK;
    f->part[c] = fsum_range(f->j, c * CT_RED_CHUNK, e < f->n ? e : f->n);
}

/* The cascaded sum of MAP(x) over one output element's reduced elements. */
static double fsum_row(const ct_reduce_iter *it, const char *base, ct_seg_fn seg, double m, double p) {
    fsum_job j = {it, base, seg, m, p};
    int64_t n = it->red_numel;
    if (n <= CT_RED_CHUNK)
        return fsum_range(&j, 0, n);
    int64_t nch = (n + CT_RED_CHUNK - 1) / CT_RED_CHUNK;
    casc top;
    memset(&top, 0, sizeof top);
    double *part = NULL;
    int nth = ct_get_num_threads();
    if (nth > 1)
        part = malloc((size_t)nch * sizeof(double));
    if (part) {
        fsum_chunks f = {&j, part, n};
        ct_parallel_for(nch, nth, fsum_chunk, &f);
        for (int64_t c = 0; c < nch; c++)
            casc_push(&top, part[c]);
        free(part);
    } else {
        for (int64_t c = 0; c < nch; c++) {
            int64_t e = (c + 1) * CT_RED_CHUNK;
            casc_push(&top, fsum_range(&j, c * CT_RED_CHUNK, e < n ? e : n));
        }
    }
    return casc_total(&top);
}

/* ------------------------------------------------------------------ folds */

/* State of the order-dependent folds (products, extrema, arg-extrema, counts). */
typedef struct fold_ctx {
    double d;      /* float accumulator or best value */
    uint64_t u;    /* integer accumulator (wraps) */
    int64_t i;     /* integer best value */
    int64_t pos;   /* walk position of the next element */
    int64_t idx;   /* position of the best value */
    bool have;     /* a best value was seen */
    bool done;     /* a NaN was found: nothing can replace it */
} fold_ctx;

#define CT_LOAD(T, p, i, s) (*(const T *)(const void *)((p) + (i) * (s)))

#define CT_FPROD_SEG(fname, T)                                                  \
    static void fname(void *v, const char *p, int64_t n, int64_t s) {           \
        fold_ctx *c = v;                                                        \
        double acc = c->d;                                                      \
        for (int64_t i = 0; i < n; i++)                                         \
            acc *= (double)CT_LOAD(T, p, i, s);                                 \
        c->d = acc;                                                             \
    }
CT_FPROD_SEG(seg_prod_f32, float)
CT_FPROD_SEG(seg_prod_f64, double)

static void seg_prod_i64(void *v, const char *p, int64_t n, int64_t s) {
    fold_ctx *c = v;
    uint64_t acc = c->u;
    for (int64_t i = 0; i < n; i++)
        acc *= (uint64_t)CT_LOAD(int64_t, p, i, s);
    c->u = acc;
}

static void seg_isum(void *v, const char *p, int64_t n, int64_t s) {
    fold_ctx *c = v;
    uint64_t acc = c->u;
    if (s == (int64_t)sizeof(int64_t)) {
        const int64_t *a = (const int64_t *)(const void *)p;
        for (int64_t i = 0; i < n; i++)
            acc += (uint64_t)a[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            acc += (uint64_t)CT_LOAD(int64_t, p, i, s);
    }
    c->u = acc;
}

/* Counts elements with PRED(x). */
#define CT_COUNT_SEG(fname, T, PRED)                                            \
    static void fname(void *v, const char *p, int64_t n, int64_t s) {           \
        fold_ctx *c = v;                                                        \
        uint64_t k = 0;                                                         \
        for (int64_t i = 0; i < n; i++) {                                       \
            T x = CT_LOAD(T, p, i, s);                                          \
            k += (PRED) ? 1u : 0u;                                              \
        }                                                                       \
        c->u += k;                                                              \
    }
CT_COUNT_SEG(seg_nz_f32, float, x != 0)
CT_COUNT_SEG(seg_nz_f64, double, x != 0)
CT_COUNT_SEG(seg_nz_i64, int64_t, x != 0)
CT_COUNT_SEG(seg_notnan_f32, float, x == x)
CT_COUNT_SEG(seg_notnan_f64, double, x == x)

/* Extremum of MAPped values; a NaN wins. BETTER(x, acc). Contiguous runs go in blocks
 * with a NaN flag instead of an early exit, so the loop vectorises. */
#define CT_FEXT_SEG(fname, T, MAP, BETTER)                                      \
    static void fname(void *v, const char *p, int64_t n, int64_t s) {           \
        fold_ctx *c = v;                                                        \
        if (c->done)                                                            \
            return;                                                             \
        int64_t i = 0;                                                          \
        if (s == (int64_t)sizeof(T)) {                                          \
            const T *a = (const T *)(const void *)p;                            \
            for (; i + CT_RED_BLK <= n; i += CT_RED_BLK) {                      \
                T acc = (T)c->d;                                                \
                int nan = 0;                                                    \
                for (int64_t j = 0; j < CT_RED_BLK; j++) {                      \
                    T x = (T)MAP(a[i + j]);                                     \
                    nan |= x != x;                                              \
                    acc = BETTER(x, acc) ? x : acc;                             \
                }                                                               \
                if (nan) {                                                      \
                    c->d = NAN;                                                 \
                    c->done = true;                                             \
                    return;                                                     \
                }                                                               \
                c->d = (double)acc;                                             \
            }                                                                   \
        }                                                                       \
        double acc = c->d;                                                      \
        for (; i < n; i++) {                                                    \
            double x = MAP((double)CT_LOAD(T, p, i, s));                        \
            if (x != x) {                                                       \
                c->d = x;                                                       \
                c->done = true;                                                 \
                return;                                                         \
            }                                                                   \
            acc = BETTER(x, acc) ? x : acc;                                     \
        }                                                                       \
        c->d = acc;                                                             \
    }
#define CT_GT(x, y) ((x) > (y))
#define CT_LT(x, y) ((x) < (y))
CT_FEXT_SEG(seg_max_f32, float, CT_ID, CT_GT)
CT_FEXT_SEG(seg_max_f64, double, CT_ID, CT_GT)
CT_FEXT_SEG(seg_min_f32, float, CT_ID, CT_LT)
CT_FEXT_SEG(seg_min_f64, double, CT_ID, CT_LT)
CT_FEXT_SEG(seg_absmax_f32, float, fabs, CT_GT)
CT_FEXT_SEG(seg_absmax_f64, double, fabs, CT_GT)
CT_FEXT_SEG(seg_absmin_f32, float, fabs, CT_LT)
CT_FEXT_SEG(seg_absmin_f64, double, fabs, CT_LT)

#define CT_IEXT_SEG(fname, BETTER)                                              \
    static void fname(void *v, const char *p, int64_t n, int64_t s) {           \
        fold_ctx *c = v;                                                        \
        int64_t acc = c->i;                                                     \
        for (int64_t i = 0; i < n; i++) {                                       \
            int64_t x = CT_LOAD(int64_t, p, i, s);                              \
            acc = BETTER(x, acc) ? x : acc;                                     \
        }                                                                       \
        c->i = acc;                                                             \
    }
CT_IEXT_SEG(seg_max_i64, CT_GT)
CT_IEXT_SEG(seg_min_i64, CT_LT)

/* Arg-extremum: the first best element in walk order; the first NaN wins. */
#define CT_FARG_SEG(fname, T, BETTER)                                           \
    static void fname(void *v, const char *p, int64_t n, int64_t s) {           \
        fold_ctx *c = v;                                                        \
        if (c->done) {                                                          \
            c->pos += n;                                                        \
            return;                                                             \
        }                                                                       \
        for (int64_t i = 0; i < n; i++) {                                       \
            double x = (double)CT_LOAD(T, p, i, s);                             \
            if (x != x) {                                                       \
                c->d = x;                                                       \
                c->idx = c->pos + i;                                            \
                c->done = true;                                                 \
                break;                                                          \
            }                                                                   \
            if (!c->have || BETTER(x, c->d)) {                                  \
                c->d = x;                                                       \
                c->idx = c->pos + i;                                            \
                c->have = true;                                                 \
            }                                                                   \
        }                                                                       \
        c->pos += n;                                                            \
    }
CT_FARG_SEG(seg_argmax_f32, float, CT_GT)
CT_FARG_SEG(seg_argmax_f64, double, CT_GT)
CT_FARG_SEG(seg_argmin_f32, float, CT_LT)
CT_FARG_SEG(seg_argmin_f64, double, CT_LT)

#define CT_IARG_SEG(fname, BETTER)                                              \
    static void fname(void *v, const char *p, int64_t n, int64_t s) {           \
        fold_ctx *c = v;                                                        \
        for (int64_t i = 0; i < n; i++) {                                       \
            int64_t x = CT_LOAD(int64_t, p, i, s);                              \
            if (!c->have || BETTER(x, c->i)) {                                  \
                c->i = x;                                                       \
                c->idx = c->pos + i;                                            \
                c->have = true;                                                 \
            }                                                                   \
        }                                                                       \
        c->pos += n;                                                            \
    }
CT_IARG_SEG(seg_argmax_i64, CT_GT)
CT_IARG_SEG(seg_argmin_i64, CT_LT)

static fold_ctx fold(const ct_reduce_iter *it, const char *base, ct_seg_fn seg, fold_ctx init) {
    ct_reduce_walk(it, base, 0, it->red_numel, seg, &init);
    return init;
}

/* ------------------------------------------------------------------ stores */

static inline void st_d(char *p, ct_dtype d, double v) {
    if (d == CT_DTYPE_FLOAT32)
        *(float *)(void *)p = (float)v;
    else if (d == CT_DTYPE_FLOAT64)
        *(double *)(void *)p = v;
    else
        ct_store_double(p, d, v);
}

static inline void st_i(char *p, ct_dtype d, int64_t v) {
    if (d == CT_DTYPE_INT64)
        *(int64_t *)(void *)p = v;
    else
        ct_store_int64(p, d, v);
}

/* ------------------------------------------------------------------ rows */

static bool is_f32(const ct_reduce_iter *it) { return it->in_dtype == CT_DTYPE_FLOAT32; }
static bool is_int(const ct_reduce_iter *it) { return it->in_dtype == CT_DTYPE_INT64; }
#define PICK(it, name) (is_f32(it) ? name##_f32 : name##_f64)

static void row_sum(const ct_reduce_iter *it, const char *in, char *const *out, const void *vp) {
    const ct_reduce_params *P = vp;
    if (is_int(it)) {
        fold_ctx c = fold(it, in, seg_isum, (fold_ctx){0});
        st_i(out[0], it->out_dtype[0], (int64_t)c.u);
        return;
    }
    bool nan = P->kind == CT_RED_NANSUM;
    double s = fsum_row(it, in, nan ? PICK(it, seg_nansum) : PICK(it, seg_sum), 0, 0);
    if (P->mean) {
        double n = (double)it->red_numel;
        if (nan)
            n = (double)fold(it, in, PICK(it, seg_notnan), (fold_ctx){0}).u;
        s /= n;
    }
    st_d(out[0], it->out_dtype[0], s);
}

static void row_prod(const ct_reduce_iter *it, const char *in, char *const *out, const void *vp) {
    (void)vp;
    fold_ctx init = {.d = 1.0, .u = 1};
    if (is_int(it))
        st_i(out[0], it->out_dtype[0], (int64_t)fold(it, in, seg_prod_i64, init).u);
    else
        st_d(out[0], it->out_dtype[0], fold(it, in, PICK(it, seg_prod), init).d);
}

static void row_ext(const ct_reduce_iter *it, const char *in, char *const *out, const void *vp) {
    const ct_reduce_params *P = vp;
    bool mx = P->kind == CT_RED_MAX;
    if (is_int(it)) {
        fold_ctx init = {.i = mx ? INT64_MIN : INT64_MAX};
        st_i(out[0], it->out_dtype[0], fold(it, in, mx ? seg_max_i64 : seg_min_i64, init).i);
        return;
    }
    fold_ctx init = {.d = mx ? -INFINITY : INFINITY};
    st_d(out[0], it->out_dtype[0], fold(it, in, mx ? PICK(it, seg_max) : PICK(it, seg_min), init).d);
}

static void row_arg(const ct_reduce_iter *it, const char *in, char *const *out, const void *vp) {
    const ct_reduce_params *P = vp;
    bool mx = P->kind == CT_RED_ARGMAX;
    fold_ctx c;
    if (is_int(it))
        c = fold(it, in, mx ? seg_argmax_i64 : seg_argmin_i64, (fold_ctx){0});
    else
        c = fold(it, in, mx ? PICK(it, seg_argmax) : PICK(it, seg_argmin), (fold_ctx){0});
    if (P->index_only) {
        st_i(out[0], it->out_dtype[0], c.idx);
        return;
    }
    if (is_int(it))
        st_i(out[0], it->out_dtype[0], c.i);
    else
        st_d(out[0], it->out_dtype[0], c.d);
    st_i(out[1], it->out_dtype[1], c.idx);
}

static void row_count(const ct_reduce_iter *it, const char *in, char *const *out, const void *vp) {
    const ct_reduce_params *P = vp;
    uint64_t k = fold(it, in, is_int(it) ? seg_nz_i64 : PICK(it, seg_nz), (fold_ctx){0}).u;
    int64_t r = (int64_t)k;
    if (P->kind == CT_RED_ANY)
        r = k > 0;
    else if (P->kind == CT_RED_ALL)
        r = (int64_t)k == it->red_numel;
    st_i(out[0], it->out_dtype[0], r);
}

static void row_var(const ct_reduce_iter *it, const char *in, char *const *out, const void *vp) {
    const ct_reduce_params *P = vp;
    double n = (double)it->red_numel;
    double mean = fsum_row(it, in, PICK(it, seg_sum), 0, 0) / n;
    double ss = fsum_row(it, in, PICK(it, seg_dev2), mean, 0);
    double div = n - P->p;
    double v = ss / (div > 0 ? div : 0.0);
    st_d(out[0], it->out_dtype[0], P->take_sqrt ? sqrt(v) : v);
    if (it->nout > 1)
        st_d(out[1], it->out_dtype[1], mean);
}

static void row_logsumexp(const ct_reduce_iter *it, const char *in, char *const *out, const void *vp) {
    (void)vp;
    double m = fold(it, in, PICK(it, seg_max), (fold_ctx){.d = -INFINITY}).d;
    double r = m;
    if (m == m) {
        /* An infinite max would give inf - inf: shift by 0 instead, which yields -inf
         * for all -inf and inf when an inf is present. */
        double shift = isinf(m) ? 0.0 : m;
        r = log(fsum_row(it, in, PICK(it, seg_expm), shift, 0)) + shift;
    }
    st_d(out[0], it->out_dtype[0], r);
}

static void row_norm(const ct_reduce_iter *it, const char *in, char *const *out, const void *vp) {
    const ct_reduce_params *P = vp;
    double p = P->p, r;
    if (P->kind == CT_RED_POWSUM)
        r = fsum_row(it, in, p == 2 ? PICK(it, seg_sq) : PICK(it, seg_pow), 0, p);
    else if (it->red_numel == 0)
        r = 0;
    else if (isinf(p))
        r = fold(it, in, p > 0 ? PICK(it, seg_absmax) : PICK(it, seg_absmin), (fold_ctx){.d = p > 0 ? 0 : INFINITY}).d;
    else if (p == 0)
        r = (double)fold(it, in, PICK(it, seg_nz), (fold_ctx){0}).u;
    else if (p == 1)
        r = fsum_row(it, in, PICK(it, seg_abs), 0, 0);
    else if (p == 2)
        r = sqrt(fsum_row(it, in, PICK(it, seg_sq), 0, 0));
    else
        r = pow(fsum_row(it, in, PICK(it, seg_pow), 0, p), 1.0 / p);
    st_d(out[0], it->out_dtype[0], r);
}

/* ------------------------------------------------------------------ scans */

static void row_cum(const ct_reduce_iter *it, const char *in, char *const *out, const void *vp) {
    const ct_reduce_params *P = vp;
    int64_t n = it->rshape[0], s = it->rstride[0], os = it->rout[0];
    ct_dtype od = it->out_dtype[0];
    bool prod = P->kind == CT_RED_CUMPROD;
    if (is_int(it)) {
        uint64_t acc = prod ? 1u : 0u;
        for (int64_t i = 0; i < n; i++) {
            uint64_t x = (uint64_t)CT_LOAD(int64_t, in, i, s);
            acc = prod ? acc * x : acc + x;
            st_i(out[0] + i * os, od, (int64_t)acc);
        }
        return;
    }
    double acc = prod ? 1.0 : 0.0;
    bool f32 = is_f32(it);
    for (int64_t i = 0; i < n; i++) {
        double x = f32 ? (double)CT_LOAD(float, in, i, s) : CT_LOAD(double, in, i, s);
        acc = prod ? acc * x : acc + x;
        st_d(out[0] + i * os, od, acc);
    }
}

/* Running extremum: a later equal value takes over the index (as PyTorch), and once a
 * NaN is seen every later NaN moves the index. */
static void row_cumext(const ct_reduce_iter *it, const char *in, char *const *out, const void *vp) {
    const ct_reduce_params *P = vp;
    int64_t n = it->rshape[0], s = it->rstride[0];
    bool mx = P->kind == CT_RED_CUMMAX;
    int64_t idx = 0;
    if (is_int(it)) {
        int64_t cur = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t x = CT_LOAD(int64_t, in, i, s);
            if (i == 0 || (mx ? x >= cur : x <= cur))
                cur = x, idx = i;
            st_i(out[0] + i * it->rout[0], it->out_dtype[0], cur);
            st_i(out[1] + i * it->rout[1], it->out_dtype[1], idx);
        }
        return;
    }
    bool f32 = is_f32(it);
    double cur = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = f32 ? (double)CT_LOAD(float, in, i, s) : CT_LOAD(double, in, i, s);
        if (i == 0 || x != x || (cur == cur && (mx ? x >= cur : x <= cur)))
            cur = x, idx = i;
        st_d(out[0] + i * it->rout[0], it->out_dtype[0], cur);
        st_i(out[1] + i * it->rout[1], it->out_dtype[1], idx);
    }
}

/* Note [Float32 softmax rows]
 * A float32 row takes three passes: its max (NaN when any element is NaN, and then the
 * whole row is NaN), the sum of exp(x - max) (softmax stores the exps in y on the
 * way), and the scaling by 1/sum or the shift by max + log(sum). A row of -inf, or one
 * holding +inf, gives NaN through inf - inf, as PyTorch.
 * With vector math (cpu/vecmath.h) the exps are SLEEF's and the sum is taken over
 * fixed chunks of CT_RED_CHUNK elements, each in double lanes, the chunk sums added in
 * order. A row longer than a chunk that no outer parallel loop holds (a few long rows)
 * spreads its chunks over the threads. Chunks depend only on the row's length, so a
 * row's values do not depend on the thread count or on how rows were split between
 * threads. While a row's exps are computed, the next row's input and output are
 * prefetched, so that the memory transfers of one row overlap the arithmetic of the
 * other instead of alternating with it. Strided float32 rows are gathered into a
 * contiguous buffer and take the same path, so they agree with contiguous ones. */

/* The scalar path, for CPUs without vector math. x and y may be the same row. */
static void softmax_f32_row_scalar(const float *x, float *y, int64_t n, bool log_out) {
    float m = -INFINITY;
    int nan = 0;
    for (int64_t i = 0; i < n; i++) {
        nan |= x[i] != x[i];
        m = x[i] > m ? x[i] : m;
    }
    if (nan) {
        for (int64_t i = 0; i < n; i++)
            y[i] = NAN;
        return;
    }
    double sum = 0;
    int64_t i = 0;
    double acc[8] = {0};
    if (log_out) {
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++)
                acc[k] += ct_expf(x[i + k] - m);
    } else {
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++) {
                float e = ct_expf(x[i + k] - m);
                y[i + k] = e;
                acc[k] += e;
            }
    }
    for (int k = 0; k < 8; k++)
        sum += acc[k];
    for (; i < n; i++) {
        float e = ct_expf(x[i] - m);
        if (!log_out)
            y[i] = e;
        sum += e;
    }
    if (log_out) {
        float lse = (float)log(sum);
        for (int64_t k = 0; k < n; k++)
            y[k] = (x[k] - m) - lse;
    } else {
        float inv = (float)(1.0 / sum);
        for (int64_t k = 0; k < n; k++)
            y[k] *= inv;
    }
}

/* The last pass over elements [0, n) of a row: the NaN fill, the scaling or the shift. */
static void smx_finish(const float *x, float *y, int64_t n, int how, float m, float c) {
    if (how == 0) {
        for (int64_t i = 0; i < n; i++)
            y[i] = NAN;
    } else if (how == 1) {
        for (int64_t i = 0; i < n; i++)
            y[i] *= c;
    } else {
        for (int64_t i = 0; i < n; i++)
            y[i] = (x[i] - m) - c;
    }
}

/* One pass of a long softmax row over its chunks of CT_RED_CHUNK: the chunk maxima,
 * the chunk sums of exps, the final scaling. */
typedef struct {
    const ct_vm_red *vr;
    const float *x;
    float *y;
    double *part;
    int64_t n, nch;
    int pass, how;
    bool log_out;
    float m, cst;
} smx_job;

static void smx_chunk(void *ctx, int64_t c) {
    const smx_job *j = ctx;
    const int64_t CH = CT_RED_CHUNK;
    int64_t len = c == j->nch - 1 ? j->n - c * CH : CH;
    if (j->pass == 0)
        j->part[c] = (double)j->vr->max_f32(j->x + c * CH, len);
    else if (j->pass == 1)
        j->part[c] = j->vr->expsum_f32(j->log_out ? NULL : j->y + c * CH, j->x + c * CH, len, j->m, NULL, NULL);
    else
        smx_finish(j->x + c * CH, j->y + c * CH, len, j->how, j->m, j->cst);
}

static void softmax_f32_row_vec(const ct_vm_red *vr, const float *x, float *y, int64_t n, bool log_out,
                                const float *next, const float *ynext) {
    const int64_t CH = CT_RED_CHUNK;
    int64_t nch = n <= CH ? 1 : (n + CH - 1) / CH;
    double *part = NULL;
    int nth = ct_get_num_threads();
    if (nch > 1 && nth > 1)
        part = malloc((size_t)nch * sizeof(double));
    smx_job job = {vr, x, y, part, n, nch, 0, 0, log_out, 0, 0};
#define CH_LEN(c) ((c) == nch - 1 ? n - (c) * CH : CH)
    float m;
    if (part) {
        ct_parallel_for(nch, nth, smx_chunk, &job);
        m = -INFINITY;
        for (int64_t c = 0; c < nch; c++)
            m = part[c] != part[c] ? NAN : (m != m || (float)part[c] <= m) ? m : (float)part[c];
    } else {
        m = vr->max_f32(x, n);
    }
    int how = 0;
    float cst = 0;
    if (m == m) {
        double sum = 0;
        if (part) {
            job.pass = 1;
            job.m = m;
            ct_parallel_for(nch, nth, smx_chunk, &job);
            for (int64_t c = 0; c < nch; c++)
                sum += part[c];
        } else if (nch == 1) {
            sum = vr->expsum_f32(log_out ? NULL : y, x, n, m, next, ynext);
        } else {
            for (int64_t c = 0; c < nch; c++)
                sum += vr->expsum_f32(log_out ? NULL : y + c * CH, x + c * CH, CH_LEN(c), m, NULL, NULL);
        }
        how = log_out ? 2 : 1;
        cst = log_out ? (float)log(sum) : (float)(1.0 / sum);
    }
    if (part) {
        job.pass = 2;
        job.m = m;
        job.how = how;
        job.cst = cst;
        ct_parallel_for(nch, nth, smx_chunk, &job);
        free(part);
    } else {
        smx_finish(x, y, n, how, m, cst);
    }
#undef CH_LEN
}

/* softmax/log_softmax of a float32 row (x and y may be the same row). next and ynext,
 * when not NULL, are the input and output rows likely to come next, prefetched while
 * this one's exps are computed: without that each row would wait for memory and then
 * compute, one after the other. */
static void softmax_f32_row(const float *x, float *y, int64_t n, bool log_out, const float *next,
                            const float *ynext) {
    const ct_vm_red *vr = ct_vm_red_get();
    if (vr)
        softmax_f32_row_vec(vr, x, y, n, log_out, next, ynext);
    else
        softmax_f32_row_scalar(x, y, n, log_out);
}

/* GCC cannot see that the gather fills the stack buffer before the row reads it. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
static void row_softmax(const ct_reduce_iter *it, const char *in, char *const *out, const void *vp) {
    const ct_reduce_params *P = vp;
    int64_t n = it->rshape[0], s = it->rstride[0], os = it->rout[0];
    ct_dtype od = it->out_dtype[0];
    bool f32 = is_f32(it), log_out = P->kind == CT_RED_LOG_SOFTMAX;
    if (f32 && od == CT_DTYPE_FLOAT32) {
        if (s == (int64_t)sizeof(float) && os == (int64_t)sizeof(float)) {
            /* the next row along the innermost kept dim (a wrong guess at the end of an
             * outer dim only costs a useless prefetch, which never faults) */
            const float *next = NULL, *ynext = NULL;
            if (it->nk > 0) {
                next = (const float *)(uintptr_t)((uintptr_t)in + (uintptr_t)it->kin[it->nk - 1]);
                ynext = (const float *)(uintptr_t)((uintptr_t)out[0] + (uintptr_t)it->kout[0][it->nk - 1]);
            }
            softmax_f32_row((const float *)(const void *)in, (float *)(void *)out[0], n, log_out, next, ynext);
            return;
        }
        float stack[1024];
        float *buf = n <= 1024 ? stack : malloc((size_t)n * sizeof(float));
        if (buf) { /* else the double path below, which needs no memory */
            for (int64_t i = 0; i < n; i++)
                buf[i] = CT_LOAD(float, in, i, s);
            softmax_f32_row(buf, buf, n, log_out, NULL, NULL);
            for (int64_t i = 0; i < n; i++)
                *(float *)(void *)(out[0] + i * os) = buf[i];
            if (buf != stack)
                free(buf);
            return;
        }
    }
#define X(i) (f32 ? (double)CT_LOAD(float, in, i, s) : CT_LOAD(double, in, i, s))
    /* Subtracting the row's max keeps exp from overflowing. */
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double x = X(i);
        if (x != x) {
            m = x;
            break;
        }
        m = x > m ? x : m;
    }
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += exp(X(i) - m);
    if (P->kind == CT_RED_SOFTMAX) {
        double inv = 1.0 / sum;
        for (int64_t i = 0; i < n; i++)
            st_d(out[0] + i * os, od, exp(X(i) - m) * inv);
    } else {
        double lse = log(sum);
        for (int64_t i = 0; i < n; i++)
            st_d(out[0] + i * os, od, X(i) - m - lse);
    }
#undef X
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* ------------------------------------------------------------------ outer sums */

/* Note [Outer reductions]
 * When the input's innermost dim is kept (sum over dim 0 of a row-major matrix), each
 * output element's values lie a whole row apart and the row walk above would stride
 * through memory. Instead up to CT_OUTER_W neighbouring outputs are summed together:
 * each reduced position adds a contiguous run of inputs to as many accumulators (a
 * loop the compiler vectorises across outputs, reading memory in long runs). Every
 * output accumulates its own values in walk order in double, moving the running sum
 * into a second-level sum every CT_RED_BLK values (a two-level cascade), so the result
 * does not depend on how outputs are grouped or split between threads. */
#define CT_OUTER_W 512

typedef struct outer_ctx {
    int w;    /* outputs in this group (<= CT_OUTER_W) */
    int nacc; /* values accumulated since the last flush */
    bool f32;
    double acc[CT_OUTER_W];
    double hi[CT_OUTER_W];
    uint64_t iacc[CT_OUTER_W];
} outer_ctx;

static void seg_outer_f(void *v, const char *p, int64_t n, int64_t s) {
    outer_ctx *c = v;
    int w = c->w;
    double *restrict acc = c->acc;
    for (int64_t i = 0; i < n; i++) {
        const char *q = p + i * s;
        if (c->f32) {
            const float *restrict x = (const float *)(const void *)q;
            for (int k = 0; k < w; k++)
                acc[k] += (double)x[k];
        } else {
            const double *restrict x = (const double *)(const void *)q;
            for (int k = 0; k < w; k++)
                acc[k] += x[k];
        }
        if (++c->nacc == CT_RED_BLK) {
            for (int k = 0; k < w; k++) {
                c->hi[k] += acc[k];
                acc[k] = 0;
            }
            c->nacc = 0;
        }
    }
}

static void seg_outer_i(void *v, const char *p, int64_t n, int64_t s) {
    outer_ctx *c = v;
    uint64_t *restrict acc = c->iacc;
    for (int64_t i = 0; i < n; i++) {
        const int64_t *restrict x = (const int64_t *)(const void *)(p + i * s);
        for (int k = 0; k < c->w; k++)
            acc[k] += (uint64_t)x[k];
    }
}

/* True when the input's innermost dim is a kept one, contiguous, and smaller in stride
 * than every reduced dim. */
static bool outer_applies(const ct_reduce_iter *it) {
    int64_t esz = (int64_t)ct_dtype_size(it->in_dtype);
    if (it->nk == 0 || it->kin[it->nk - 1] != esz || it->kshape[it->nk - 1] < 4 || it->red_numel <= 1)
        return false;
    for (int d = 0; d < it->nr; d++)
        if (it->rstride[d] == esz || it->rstride[d] == -esz)
            return false;
    return true;
}

/* Output groups: row r of the outer kept dims, columns [c0, c0 + w) of the inner one. */
static void outer_group(const ct_reduce_iter *it, const ct_reduce_params *P, int64_t g, int64_t groups_per_row) {
    int nk = it->nk;
    int64_t K = it->kshape[nk - 1];
    int64_t r = g / groups_per_row, c0 = (g % groups_per_row) * CT_OUTER_W;
    const char *in = it->in + c0 * it->kin[nk - 1];
    char *out = it->out[0] + c0 * it->kout[0][nk - 1];
    for (int d = nk - 2; d >= 0; d--) {
        int64_t i = r % it->kshape[d];
        r /= it->kshape[d];
        in += i * it->kin[d];
        out += i * it->kout[0][d];
    }
    outer_ctx c;
    c.w = (int)(K - c0 < CT_OUTER_W ? K - c0 : CT_OUTER_W);
    c.nacc = 0;
    for (int k = 0; k < c.w; k++)
        c.acc[k] = c.hi[k] = 0, c.iacc[k] = 0;
    c.f32 = is_f32(it);
    int64_t os = it->kout[0][nk - 1];
    if (is_int(it)) {
        ct_reduce_walk(it, in, 0, it->red_numel, seg_outer_i, &c);
        for (int k = 0; k < c.w; k++)
            st_i(out + k * os, it->out_dtype[0], (int64_t)c.iacc[k]);
        return;
    }
    ct_reduce_walk(it, in, 0, it->red_numel, seg_outer_f, &c);
    for (int k = 0; k < c.w; k++) {
        double v = c.hi[k] + c.acc[k];
        if (P->mean)
            v /= (double)it->red_numel;
        st_d(out + k * os, it->out_dtype[0], v);
    }
}

typedef struct {
    const ct_reduce_iter *it;
    const ct_reduce_params *P;
    int64_t per_row;
} outer_job;

static void outer_groups(void *ctx, int64_t g0, int64_t g1) {
    const outer_job *j = ctx;
    for (int64_t g = g0; g < g1; g++)
        outer_group(j->it, j->P, g, j->per_row);
}

static void sum_outer(const ct_reduce_iter *it, const ct_reduce_params *P) {
    int64_t K = it->kshape[it->nk - 1];
    int64_t per_row = (K + CT_OUTER_W - 1) / CT_OUTER_W;
    int64_t groups = (it->out_numel / K) * per_row;
    outer_job j = {it, P, per_row};
    /* each group is a block of outputs of its own: the split does not change results */
    ct_parallel_range(groups, it->out_numel * it->red_numel, 32767, outer_groups, &j);
}

void ct_cpu_reduce(const ct_reduce_iter *it, const ct_reduce_params *params) {
    ct_reduce_fn fn = NULL;
    switch (params->kind) {
    case CT_RED_SUM:
    case CT_RED_NANSUM: fn = row_sum; break;
    case CT_RED_PROD: fn = row_prod; break;
    case CT_RED_MAX:
    case CT_RED_MIN: fn = row_ext; break;
    case CT_RED_ARGMAX:
    case CT_RED_ARGMIN: fn = row_arg; break;
    case CT_RED_COUNT:
    case CT_RED_ANY:
    case CT_RED_ALL: fn = row_count; break;
    case CT_RED_VAR: fn = row_var; break;
    case CT_RED_LOGSUMEXP: fn = row_logsumexp; break;
    case CT_RED_NORM:
    case CT_RED_POWSUM: fn = row_norm; break;
    case CT_RED_CUMSUM:
    case CT_RED_CUMPROD: fn = row_cum; break;
    case CT_RED_CUMMAX:
    case CT_RED_CUMMIN: fn = row_cumext; break;
    case CT_RED_SOFTMAX:
    case CT_RED_LOG_SOFTMAX: fn = row_softmax; break;
    }
    CT_ASSERT(fn != NULL);
    if (params->kind == CT_RED_SUM && outer_applies(it)) {
        sum_outer(it, params);
        return;
    }
    ct_reduce_run(it, fn, params);
}

static ct_status cpu_reduce(const ct_reduce_iter *it, const ct_reduce_params *params, ct_device device,
                            const char *op) {
    (void)device, (void)op;
    ct_cpu_reduce(it, params);
    return CT_OK;
}

void ct_cpu_register_reduce(void) { ct_stub_reduce[CT_DEVICE_CPU] = cpu_reduce; }
