/* CPU allocator benchmark: is caching worth it on CPU? (Note [CPU caching] in
 * src/core/alloc.c; figures in docs/memory.md.)
 *
 * Each workload runs with the CPU cache on and off. "Off" still goes through the
 * allocator (stats, trace hooks) and then straight to aligned_alloc/free, which is what a
 * non-caching CPU allocator costs. Memory is written once per allocation, as a kernel
 * writing its output would, so page faults on fresh memory are part of the figure.
 *   bench/alloc [scale]     scale multiplies the iteration counts (default 1) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "ctorch.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile unsigned char sink;

static void touch(unsigned char *p, size_t n) {
    memset(p, 1, n);
    sink = p[n - 1];
}

/* A training step's allocation pattern: activations kept until the backward pass,
 * freed in reverse order, plus short-lived temporaries. */
static const size_t step_sizes[] = {
    64 << 10, 256 << 10, 1 << 20, 3 << 20, 4 << 20, 4 << 20, 8 << 20, 12 << 20, 16 << 20, 512 << 10, 2 << 20, 6 << 20,
};
#define NSTEP (sizeof step_sizes / sizeof step_sizes[0])

static double run_steps(int iters) {
    void *live[NSTEP];
    double t0 = now_s();
    for (int it = 0; it < iters; it++) {
        for (size_t i = 0; i < NSTEP; i++) {
            live[i] = ct_alloc(CT_CPU, step_sizes[i]);
            touch(live[i], step_sizes[i]);
            void *tmp = ct_alloc(CT_CPU, step_sizes[i] / 2);
            touch(tmp, step_sizes[i] / 2);
            ct_free(CT_CPU, tmp);
        }
        for (size_t i = NSTEP; i-- > 0;)
            ct_free(CT_CPU, live[i]);
    }
    return (now_s() - t0) / iters;
}

/* Small tensors: scalars, biases, norms' statistics. */
static double run_small(int iters) {
    enum { N = 64 };
    void *p[N];
    double t0 = now_s();
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < N; i++) {
            size_t n = (size_t)(8 << (i % 10)); /* 8 B .. 4 KiB */
            p[i] = ct_alloc(CT_CPU, n);
            touch(p[i], n);
        }
        for (int i = 0; i < N; i++)
            ct_free(CT_CPU, p[i]);
    }
    return (now_s() - t0) / ((double)iters * N);
}

/* One mid-size buffer allocated and freed repeatedly (a temporary in a loop). */
static double run_repeat(size_t n, int iters) {
    double t0 = now_s();
    for (int it = 0; it < iters; it++) {
        void *p = ct_alloc(CT_CPU, n);
        touch(p, n);
        ct_free(CT_CPU, p);
    }
    return (now_s() - t0) / iters;
}

int main(int argc, char **argv) {
    int scale = argc > 1 ? atoi(argv[1]) : 1;
    if (scale < 1)
        scale = 1;
    printf("CPU allocator: caching on vs off (time per operation, lower is better)\n");
    printf("%-34s %12s %12s %8s\n", "workload", "cache on", "cache off", "off/on");
    struct {
        const char *name;
        int kind;
        size_t n;
        int iters;
        const char *unit;
    } w[] = {
        {"training step (12 tensors+temps)", 0, 0, 10, "ms"},
        {"small tensors 8 B..4 KiB", 1, 0, 2000, "ns"},
        {"repeat 256 KiB", 2, 256 << 10, 1000, "us"},
        {"repeat 4 MiB", 2, 4 << 20, 100, "us"},
        {"repeat 32 MiB", 2, 32 << 20, 10, "us"},
        {"repeat 96 MiB", 2, 96 << 20, 4, "us"},
    };
    for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) {
        /* The machine may be shared: alternate the modes and keep each one's best round. */
        double t[2] = {1e30, 1e30};
        for (int round = 0; round < 5; round++)
            for (int mode = 0; mode < 2; mode++) {
                ct_memory_set_caching(CT_CPU, mode == 0);
                int iters = w[k].iters * scale;
                double r;
                if (w[k].kind == 0) {
                    run_steps(1); /* warm-up */
                    r = run_steps(iters);
                } else if (w[k].kind == 1) {
                    run_small(10);
                    r = run_small(iters);
                } else {
                    run_repeat(w[k].n, 2);
                    r = run_repeat(w[k].n, iters);
                }
                if (r < t[mode])
                    t[mode] = r;
            }
        double mul = strcmp(w[k].unit, "ms") == 0 ? 1e3 : strcmp(w[k].unit, "us") == 0 ? 1e6 : 1e9;
        printf("%-34s %9.2f %s %9.2f %s %7.2fx\n", w[k].name, t[0] * mul, w[k].unit, t[1] * mul, w[k].unit,
               t[1] / t[0]);
    }
    ct_memory_set_caching(CT_CPU, ct_alloc_get_device_interface(CT_DEVICE_CPU)->caching_default);
    printf("peak reserved with caching: %.1f MiB\n", (double)ct_max_memory_reserved(CT_CPU) / 1048576.0);
    return 0;
}
