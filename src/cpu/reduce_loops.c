/* CPU row functions of the reductions and scans. Inputs arrive converted to a work
 * dtype (float32, float64 or int64; see src/ops/reduce.c); float work accumulates in
 * double, integer work in int64 with two's-complement wrap-around. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "cpu/reduce.h"

#ifdef CT_HAVE_OPENMP
#include <omp.h>
#endif

/* Note [Deterministic reductions]
 * Float sums are cascaded: each block of CT_RED_BLK contiguous elements is summed with
 * eight independent accumulators (which the compiler vectorises), and the block sums
 * are combined pairwise by a binary counter (casc_push), so the rounding error grows
 * with log(n), not n. A reduction longer than CT_RED_CHUNK elements is cut into chunks
 * of exactly that size; each chunk is summed on its own (in parallel when threads are
 * free) and the chunk results are pushed into a cascade in chunk order. The cut points
 * depend only on the shape, never on the thread count, so results are bit-identical
 * for any ct_set_num_threads. */
#define CT_RED_BLK 256
#define CT_RED_CHUNK ((int64_t)1 << 16)

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

CT_SUM_SEG(seg_sum_f32, float, x)
CT_SUM_SEG(seg_sum_f64, double, x)

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
#ifdef CT_HAVE_OPENMP
    if (ct_get_num_threads() > 1 && !omp_in_parallel())
        part = malloc((size_t)nch * sizeof(double));
#endif
    if (part) {
#ifdef CT_HAVE_OPENMP
#pragma omp parallel for num_threads(ct_get_num_threads()) schedule(static)
#endif
        for (int64_t c = 0; c < nch; c++) {
            int64_t e = (c + 1) * CT_RED_CHUNK;
            part[c] = fsum_range(&j, c * CT_RED_CHUNK, e < n ? e : n);
        }
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

/* ------------------------------------------------------------------ integers */

typedef struct isum_ctx {
    uint64_t acc;
} isum_ctx;

static void seg_isum(void *vctx, const char *p, int64_t n, int64_t s) {
    isum_ctx *c = vctx;
    uint64_t acc = c->acc;
    if (s == (int64_t)sizeof(int64_t)) {
        const int64_t *a = (const int64_t *)(const void *)p;
        for (int64_t i = 0; i < n; i++)
            acc += (uint64_t)a[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            acc += (uint64_t) * (const int64_t *)(const void *)(p + i * s);
    }
    c->acc = acc;
}

static int64_t isum_row(const ct_reduce_iter *it, const char *base) {
    isum_ctx c = {0};
    ct_reduce_walk(it, base, 0, it->red_numel, seg_isum, &c);
    return (int64_t)c.acc;
}

/* ------------------------------------------------------------------ rows */

static ct_seg_fn pick(const ct_reduce_iter *it, ct_seg_fn f32, ct_seg_fn f64) {
    return it->in_dtype == CT_DTYPE_FLOAT32 ? f32 : f64;
}

static void row_sum(const ct_reduce_iter *it, const char *in, char *const *out, const void *vp) {
    const ct_reduce_params *P = vp;
    if (it->in_dtype == CT_DTYPE_INT64) {
        ct_store_int64(out[0], it->out_dtype[0], isum_row(it, in));
        return;
    }
    double s = fsum_row(it, in, pick(it, seg_sum_f32, seg_sum_f64), 0, 0);
    if (P->mean)
        s /= (double)it->red_numel;
    ct_store_double(out[0], it->out_dtype[0], s);
}

void ct_cpu_reduce(const ct_reduce_iter *it, const ct_reduce_params *params) {
    ct_reduce_fn fn = NULL;
    switch (params->kind) {
    case CT_RED_SUM: fn = row_sum; break;
    default: CT_ASSERT(!"reduction kind without a CPU loop"); return;
    }
    ct_reduce_run(it, fn, params);
}
