/* bench/startup: what a CPU program pays once, and when (docs/startup.md).
 *
 * Prints "name value unit" lines:
 *   startup.rss.<point>.kB      resident memory (and its anonymous part) at each point:
 *                               start (before any ctorch call), tiny_add (ct_ones of 2x3
 *                               and ct_add: the registry's start-up), add_1m (a 1M-element
 *                               add: OpenMP's threads start), mm_f32 (the first float32
 *                               GEMM, oneDNN), conv (the first conv2d), mm_f64 (the first
 *                               float64 GEMM, OpenBLAS), backward (a first backward pass)
 *   startup.first.<kernel>.ms   the first call of each, and startup.later.<kernel>.ms the
 *                               median of the next 9, so first - later is the one-time cost;
 *                               mm_f32_128x512x384 runs after mm_f32_256: a second shape
 *                               shows which part of that cost is paid once per process
 * Run it as a fresh process each time: every figure is about the first use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ctorch.h"

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            v = atol(line + n + 1);
    if (f)
        fclose(f);
    return v;
}

static void rss(const char *point) {
    printf("startup.rss.%s.kB %ld kB\n", point, status_kb("VmRSS"));
    printf("startup.rss_anon.%s.kB %ld kB\n", point, status_kb("RssAnon"));
}

typedef ct_tensor *(*kernel_fn)(void *ctx);

/* Times the first call of fn and the median of the next nine; each call in a scope. */
static void first_and_later(const char *name, kernel_fn fn, void *ctx) {
    double t[10];
    for (int i = 0; i < 10; i++) {
        ct_scope_begin();
        double t0 = now();
        ct_tensor *r = fn(ctx);
        t[i] = now() - t0;
        if (!r) {
            fprintf(stderr, "%s: %s\n", name, ct_last_error());
            exit(1);
        }
        ct_scope_end();
    }
    double first = t[0];
    qsort(t + 1, 9, sizeof *t, cmp_double);
    printf("startup.first.%s.ms %.3f ms\n", name, first * 1e3);
    printf("startup.later.%s.ms %.3f ms\n", name, t[5] * 1e3);
}

static ct_tensor *tiny_add(void *ctx) {
    (void)ctx;
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    return ct_add(a, a);
}

static ct_tensor *add_1m(void *ctx) {
    ct_tensor *a = ctx;
    return ct_add(a, a);
}

static ct_tensor *mm(void *ctx) {
    ct_tensor **ab = ctx;
    return ct_mm(ab[0], ab[1]);
}

static ct_tensor *conv(void *ctx) {
    ct_tensor **xw = ctx;
    static const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
    return ct_conv2d(xw[0], xw[1], NULL, one, one, one, 1) ? ct_conv2d(xw[0], xw[1], NULL, one, zero, one, 1) : NULL;
}

static ct_tensor *backward(void *ctx) {
    ct_tensor **xw = ctx;
    ct_tensor *loss = ct_sum(ct_relu(ct_linear(xw[0], xw[1], NULL)), NULL, 0, false, CT_DTYPE_UNDEFINED);
    return loss && ct_backward(loss, NULL, false, false) == CT_OK ? loss : NULL;
}

int main(void) {
    rss("start");
    first_and_later("tiny_add", tiny_add, NULL);
    rss("tiny_add");

    ct_tensor *big = ct_randn(CT_SHAPE(1000, 1000), CT_F32, CT_CPU);
    first_and_later("add_1m", add_1m, big);
    rss("add_1m");

    ct_tensor *ab[2] = {ct_randn(CT_SHAPE(256, 256), CT_F32, CT_CPU), ct_randn(CT_SHAPE(256, 256), CT_F32, CT_CPU)};
    first_and_later("mm_f32_256", mm, ab);
    rss("mm_f32");
    /* another shape after the first: what of the first call's cost is per process */
    ct_tensor *ab2[2] = {ct_randn(CT_SHAPE(128, 512), CT_F32, CT_CPU), ct_randn(CT_SHAPE(512, 384), CT_F32, CT_CPU)};
    first_and_later("mm_f32_128x512x384", mm, ab2);

    ct_tensor *xw[2] = {ct_randn(CT_SHAPE(8, 32, 28, 28), CT_F32, CT_CPU),
                        ct_randn(CT_SHAPE(64, 32, 3, 3), CT_F32, CT_CPU)};
    first_and_later("conv2d_8x32x28x28_64", conv, xw);
    rss("conv");

    ct_tensor *cd[2] = {ct_randn(CT_SHAPE(256, 256), CT_F64, CT_CPU), ct_randn(CT_SHAPE(256, 256), CT_F64, CT_CPU)};
    first_and_later("mm_f64_256", mm, cd);
    rss("mm_f64");

    ct_tensor *lw[2] = {ct_randn(CT_SHAPE(64, 128), CT_F32, CT_CPU),
                        ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(128, 128), CT_F32, CT_CPU), true)};
    first_and_later("linear_backward", backward, lw);
    rss("backward");

    ct_release(big);
    for (int i = 0; i < 2; i++) {
        ct_release(ab[i]);
        ct_release(ab2[i]);
        ct_release(xw[i]);
        ct_release(cd[i]);
        ct_release(lw[i]);
    }
    return 0;
}
