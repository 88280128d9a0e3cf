/* bench/ops: the op library's speed on this machine, with the ceilings it is held to.
 *
 * Prints "name value unit" lines (the same names as PyTorch's side in
 * shared/bench/torch_peer.py --what ops, so bench/compare.py can pair them):
 *   ceil.copy_f32_N.GBps        memcpy of N float32 split over the threads: the bandwidth ceiling
 *   ops.copy_f32_N.GBps         ct_copy_ of N float32 (2 * 4 * N bytes moved)
 *   ops.add_f32_N.GBps          c = a + b  (3 * 4 * N bytes moved)
 *   ops.mul_f32_N.GBps, ops.exp_f32_N.GBps
 *   ops.sum_f32_N.GBps          4 * N bytes read
 *   ops.softmax_f32_4096.GBps   softmax over the rows of a 4096x4096 matrix: 2 * 4 * 4096^2 bytes
 *   ops.matmul_f32_M.gflops     ctorch's mm, and ceil.blas_sgemm_M.gflops (OpenBLAS direct),
 *                               timed alternately
 *   ops.tiny_add.c.us_per_op    a 1-element add from C, allocation included
 *   ops.tiny_add_boxed.c.us_per_op  the same add with alpha = 1, which the fast lane leaves
 *                               to the boxed route (ct_call, key set, kernel table, iterator)
 *   ops.tiny_zeros.c.us_per_op, ops.tiny_empty.c.us_per_op  ct_zeros / ct_empty of 4 float32,
 *                               released: a factory through the dispatcher (docs/factories.md)
 *   ops.cast_S_D_N.GBps         ct_copy_ of N elements of dtype S into dtype D (bytes read
 *                               plus bytes written); ops.clone_f32_N.GBps, ct_clone (fresh
 *                               output memory included); ops.contig_t_f32_M.GBps,
 *                               ct_contiguous of the transpose of an MxM matrix;
 *                               ops.fill_f32_N.GBps, ct_fill_ with 1.5 (4 * N bytes written)
 * Each figure is the median of several runs. Arguments, when given, pick the figures
 * whose names contain one of them ("bench/ops copy exp"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <time.h>

#include "bench_util.h"
#include "ctorch.h"

#ifdef CT_HAVE_OPENBLAS
#include <cblas.h>
#endif

#define REPS 9

static int g_argc;
static char **g_argv;

/* Is the figure called name wanted (no arguments: all are)? */
static int want(const char *name) {
    if (g_argc <= 1)
        return 1;
    for (int i = 1; i < g_argc; i++)
        if (strstr(name, g_argv[i]))
            return 1;
    return 0;
}

/* Does s name an element count: a run of four or more digits ("1048576"; the "32" of
 * "f32" is a dtype)? */
static int names_size(const char *s) {
    int run = 0;
    for (; *s; s++) {
        run = (*s >= '0' && *s <= '9') ? run + 1 : 0;
        if (run >= 4)
            return 1;
    }
    return 0;
}

/* Could a wanted figure's name contain tag ("_1048576")? True when an argument has tag
 * in it or names no size at all. */
static int want_size(const char *tag) {
    for (int i = 1; i < g_argc; i++)
        if (strstr(g_argv[i], tag) || !names_size(g_argv[i]))
            return 1;
    return 0;
}

typedef void (*work_fn)(void *ctx);

/* Median seconds of one call of fn, after a warm-up call. */
static double median_time(work_fn fn, void *ctx, int inner) {
    double t[REPS];
    fn(ctx);
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        for (int i = 0; i < inner; i++)
            fn(ctx);
        t[r] = (now() - t0) / inner;
    }
    qsort(t, REPS, sizeof t[0], cmp_double);
    return t[REPS / 2];
}

/* Median seconds of one call of fa and of fb, timed alternately (each rep runs both,
 * in alternating order), so a change in the machine's load shows in both. */
static void median_time_pair(work_fn fa, work_fn fb, void *ctx, int inner, double *ta, double *tb) {
    double t[2][REPS];
    fa(ctx);
    fb(ctx);
    for (int r = 0; r < REPS; r++)
        for (int k = 0; k < 2; k++) {
            int which = (r + k) % 2;
            work_fn fn = which ? fb : fa;
            double t0 = now();
            for (int i = 0; i < inner; i++)
                fn(ctx);
            t[which][r] = (now() - t0) / inner;
        }
    qsort(t[0], REPS, sizeof t[0][0], cmp_double);
    qsort(t[1], REPS, sizeof t[1][0], cmp_double);
    *ta = t[0][REPS / 2];
    *tb = t[1][REPS / 2];
}

typedef struct {
    ct_tensor *a, *b, *out;
    void *src, *dst;
    size_t bytes;
    ct_tensor *(*unary)(const ct_tensor *, ct_tensor *);
    ct_tensor *(*binary)(const ct_tensor *, const ct_tensor *, ct_tensor *);
    int m;
} bench_ctx;

/* memcpy in one contiguous piece per thread: the machine's copy bandwidth with the
 * threads ctorch's own copies use. */
static void run_memcpy(void *p) {
    bench_ctx *c = p;
#ifdef _OPENMP
    int nth = ct_get_num_threads();
#pragma omp parallel num_threads(nth)
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        size_t per = (c->bytes / (size_t)n + 63) / 64 * 64, lo = per * (size_t)t;
        if (lo < c->bytes)
            memcpy((char *)c->dst + lo, (const char *)c->src + lo, per < c->bytes - lo ? per : c->bytes - lo);
    }
#else
    memcpy(c->dst, c->src, c->bytes);
#endif
}
static void run_binary(void *p) {
    bench_ctx *c = p;
    c->binary(c->a, c->b, c->out);
}
static void run_unary(void *p) {
    bench_ctx *c = p;
    c->unary(c->a, c->out);
}
static void run_copy(void *p) {
    bench_ctx *c = p;
    ct_copy_(c->out, c->a);
}
static void run_clone(void *p) {
    bench_ctx *c = p;
    ct_release(ct_clone(c->a));
}
static void run_contiguous(void *p) {
    bench_ctx *c = p;
    ct_release(ct_contiguous(c->a));
}
static void run_fill(void *p) {
    bench_ctx *c = p;
    ct_fill_(c->out, ct_scalar_float(1.5));
}
static void run_sum(void *p) {
    bench_ctx *c = p;
    ct_release(ct_sum(c->a, NULL, 0, false, CT_DTYPE_UNDEFINED));
}
static void run_softmax(void *p) {
    bench_ctx *c = p;
    ct_release(ct_softmax(c->a, 1, CT_DTYPE_UNDEFINED));
}
static void run_mm(void *p) {
    bench_ctx *c = p;
    ct_mm_out(c->a, c->b, c->out);
}
#ifdef CT_HAVE_OPENBLAS
static void run_sgemm(void *p) {
    bench_ctx *c = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c->m, c->m, c->m, 1.0f, ct_tensor_data(c->a), c->m,
                ct_tensor_data(c->b), c->m, 0.0f, ct_tensor_data(c->out), c->m);
}
#endif
static void run_tiny(void *p) {
    bench_ctx *c = p;
    for (int i = 0; i < 1000; i++) {
        ct_tensor *r = ct_add(c->a, c->b);
        ct_release(r);
    }
}

/* The boxed route of the dispatcher (Note [Fast lane]: alpha is not the lane's). */
static void run_tiny_boxed(void *p) {
    bench_ctx *c = p;
    for (int i = 0; i < 1000; i++) {
        ct_tensor *r = ct_add_alpha(c->a, c->b, ct_scalar_int(1));
        ct_release(r);
    }
}

/* Small factories, as a training loop makes them (Note [Factories as ops]). */
static void run_tiny_zeros(void *p) {
    (void)p;
    for (int i = 0; i < 1000; i++)
        ct_release(ct_zeros(CT_SHAPE(4), CT_F32, CT_CPU));
}

static void run_tiny_empty(void *p) {
    (void)p;
    for (int i = 0; i < 1000; i++)
        ct_release(ct_empty(CT_SHAPE(4), CT_F32, CT_CPU));
}

/* Prints one figure: bytes / the median time of fn, when the figure is wanted. */
static void figure(const char *name, double bytes, work_fn fn, bench_ctx *c, int inner) {
    if (want(name))
        printf("%s %.1f GB/s\n", name, bytes / median_time(fn, c, inner) / 1e9);
}

static void cast_figures(int64_t n) {
    static const struct {
        ct_dtype s, d;
        const char *sn, *dn;
    } pairs[] = {
        {CT_DTYPE_BOOL, CT_DTYPE_FLOAT32, "bool", "f32"},     {CT_DTYPE_FLOAT32, CT_DTYPE_BFLOAT16, "f32", "bf16"},
        {CT_DTYPE_BFLOAT16, CT_DTYPE_FLOAT32, "bf16", "f32"}, {CT_DTYPE_FLOAT32, CT_DTYPE_FLOAT16, "f32", "f16"},
        {CT_DTYPE_FLOAT16, CT_DTYPE_FLOAT32, "f16", "f32"},   {CT_DTYPE_INT64, CT_DTYPE_FLOAT32, "i64", "f32"},
        {CT_DTYPE_FLOAT32, CT_DTYPE_INT64, "f32", "i64"},     {CT_DTYPE_FLOAT32, CT_DTYPE_FLOAT64, "f32", "f64"},
        {CT_DTYPE_UINT8, CT_DTYPE_FLOAT32, "u8", "f32"},      {CT_DTYPE_FLOAT32, CT_DTYPE_INT32, "f32", "i32"},
    };
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        char name[96];
        snprintf(name, sizeof name, "ops.cast_%s_%s_%lld.GBps", pairs[k].sn, pairs[k].dn, (long long)n);
        if (!want(name))
            continue;
        bench_ctx c = {0};
        /* Values around [-4, 4] so integer and bool sources hold more than zeros. */
        ct_scope_begin();
        ct_tensor *v = ct_mul(ct_randn(CT_SHAPE(n), CT_F32, CT_CPU), ct_scalar_tensor(ct_scalar_float(2.0), CT_F32, CT_CPU));
        c.a = ct_keep(ct_to_dtype(v, pairs[k].s));
        ct_scope_end();
        c.out = ct_empty(CT_SHAPE(n), pairs[k].d, CT_CPU);
        double bytes = (double)n * (double)(ct_dtype_size(pairs[k].s) + ct_dtype_size(pairs[k].d));
        figure(name, bytes, run_copy, &c, 5);
        ct_release(c.a);
        ct_release(c.out);
    }
}

int main(int argc, char **argv) {
    ct_runtime_tune_and_reexec(argv); /* as the ctorch CLI runs */
    g_argc = argc;
    g_argv = argv;
    printf("ctorch %s (BLAS: %s) threads %d\n", ct_version(), ct_blas_info(), ct_get_num_threads());
    ct_manual_seed(0);
    char name[96];
    for (int e = 20; e <= 24; e += 4) {
        int64_t n = (int64_t)1 << e;
        /* skip the setup of a size none of whose figures is wanted */
        char tag[32];
        snprintf(tag, sizeof tag, "_%lld", (long long)n);
        if (g_argc > 1 && !want_size(tag))
            continue;
        bench_ctx c = {0};
        c.a = ct_rand(CT_SHAPE(n), CT_F32, CT_CPU);
        c.b = ct_rand(CT_SHAPE(n), CT_F32, CT_CPU);
        c.out = ct_empty(CT_SHAPE(n), CT_F32, CT_CPU);
        c.src = ct_tensor_data(c.a);
        c.dst = ct_tensor_data(c.out);
        c.bytes = (size_t)n * 4;
        /* memcpy reads and writes: 2 * 4 * n bytes */
        snprintf(name, sizeof name, "ceil.copy_f32_%lld.GBps", (long long)n);
        figure(name, 8.0 * (double)n, run_memcpy, &c, 5);
        snprintf(name, sizeof name, "ops.copy_f32_%lld.GBps", (long long)n);
        figure(name, 8.0 * (double)n, run_copy, &c, 5);
        snprintf(name, sizeof name, "ops.clone_f32_%lld.GBps", (long long)n);
        figure(name, 8.0 * (double)n, run_clone, &c, 5);
        snprintf(name, sizeof name, "ops.fill_f32_%lld.GBps", (long long)n);
        figure(name, 4.0 * (double)n, run_fill, &c, 5);
        c.binary = ct_add_out;
        snprintf(name, sizeof name, "ops.add_f32_%lld.GBps", (long long)n);
        figure(name, 12.0 * (double)n, run_binary, &c, 5);
        c.binary = ct_mul_out;
        snprintf(name, sizeof name, "ops.mul_f32_%lld.GBps", (long long)n);
        figure(name, 12.0 * (double)n, run_binary, &c, 5);
        c.unary = ct_exp_out;
        snprintf(name, sizeof name, "ops.exp_f32_%lld.GBps", (long long)n);
        figure(name, 8.0 * (double)n, run_unary, &c, 5);
        snprintf(name, sizeof name, "ops.sum_f32_%lld.GBps", (long long)n);
        figure(name, 4.0 * (double)n, run_sum, &c, 5);
        ct_release(c.a);
        ct_release(c.b);
        ct_release(c.out);
        cast_figures(n);
    }
    {
        int64_t m = 2048;
        bench_ctx c = {0};
        ct_tensor *a = ct_rand(CT_SHAPE(m, m), CT_F32, CT_CPU);
        c.a = ct_transpose(a, 0, 1);
        snprintf(name, sizeof name, "ops.contig_t_f32_%lld.GBps", (long long)m);
        figure(name, 8.0 * (double)(m * m), run_contiguous, &c, 3);
        ct_release(c.a);
        ct_release(a);
    }
    {
        int64_t m = 4096;
        bench_ctx c = {0};
        c.a = ct_rand(CT_SHAPE(m, m), CT_F32, CT_CPU);
        snprintf(name, sizeof name, "ops.softmax_f32_%lld.GBps", (long long)m);
        figure(name, 8.0 * (double)(m * m), run_softmax, &c, 3);
        ct_release(c.a);
    }
    for (int m = 256; m <= 2048; m *= (m == 256 ? 4 : 2)) {
        char cname[96];
        snprintf(name, sizeof name, "ops.matmul_f32_%d.gflops", m);
        snprintf(cname, sizeof cname, "ceil.blas_sgemm_%d.gflops", m);
        if (!want(name) && !want(cname))
            continue;
        bench_ctx c = {0};
        c.m = m;
        c.a = ct_rand(CT_SHAPE(m, m), CT_F32, CT_CPU);
        c.b = ct_rand(CT_SHAPE(m, m), CT_F32, CT_CPU);
        c.out = ct_empty(CT_SHAPE(m, m), CT_F32, CT_CPU);
        double flops = 2.0 * m * (double)m * m;
        int inner = m <= 256 ? 20 : 2;
#ifdef CT_HAVE_OPENBLAS
        /* ctorch's mm and OpenBLAS' sgemm alternate, so their ratio is taken under
         * the same load */
        double tm, tb;
        median_time_pair(run_mm, run_sgemm, &c, inner, &tm, &tb);
        if (want(name))
            printf("%s %.1f GFLOP/s\n", name, flops / tm / 1e9);
        if (want(cname))
            printf("%s %.1f GFLOP/s\n", cname, flops / tb / 1e9);
#else
        if (want(name))
            printf("%s %.1f GFLOP/s\n", name, flops / median_time(run_mm, &c, inner) / 1e9);
#endif
        ct_release(c.a);
        ct_release(c.b);
        ct_release(c.out);
    }
    if (want("ops.tiny_add.c.us_per_op")) {
        bench_ctx c = {0};
        c.a = ct_ones(CT_SHAPE(1), CT_F32, CT_CPU);
        c.b = ct_ones(CT_SHAPE(1), CT_F32, CT_CPU);
        printf("ops.tiny_add.c.us_per_op %.3f us\n", median_time(run_tiny, &c, 10) / 1000 * 1e6);
        ct_release(c.a);
        ct_release(c.b);
    }
    if (want("ops.tiny_add_boxed.c.us_per_op")) {
        bench_ctx c = {0};
        c.a = ct_ones(CT_SHAPE(1), CT_F32, CT_CPU);
        c.b = ct_ones(CT_SHAPE(1), CT_F32, CT_CPU);
        printf("ops.tiny_add_boxed.c.us_per_op %.3f us\n", median_time(run_tiny_boxed, &c, 10) / 1000 * 1e6);
        ct_release(c.a);
        ct_release(c.b);
    }
    if (want("ops.tiny_zeros.c.us_per_op")) {
        bench_ctx c = {0};
        printf("ops.tiny_zeros.c.us_per_op %.3f us\n", median_time(run_tiny_zeros, &c, 10) / 1000 * 1e6);
    }
    if (want("ops.tiny_empty.c.us_per_op")) {
        bench_ctx c = {0};
        printf("ops.tiny_empty.c.us_per_op %.3f us\n", median_time(run_tiny_empty, &c, 10) / 1000 * 1e6);
    }
    return 0;
}
