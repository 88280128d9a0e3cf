/* Profiler overhead on the smallest op there is: add of two 1-element float32
 * tensors, in ns per op, with the profiler off and on (figures in docs/profiling.md).
 *
 *   bench/profiler [n] [mode]     n ops per run (default 200000); mode: both (default),
 *                                 off, on. off builds against a library without the
 *                                 profiler too, which is how the cost of the dispatcher's
 *                                 check is measured (callgrind instruction counts). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctorch.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* n adds; results go back every 1000 so memory stays flat. */
static double loop(const ct_tensor *a, long n) {
    double t0 = now_s();
    for (long i = 0; i < n; i += 1000) {
        ct_scope_begin();
        for (long k = 0; k < 1000 && i + k < n; k++)
            if (!ct_add(a, a)) {
                fprintf(stderr, "add failed: %s\n", ct_last_error());
                exit(1);
            }
        ct_scope_end();
    }
    return (now_s() - t0) * 1e9 / (double)n;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    const char *mode = argc > 2 ? argv[2] : "both";
    if (n < 1000)
        n = 1000;
    ct_tensor *a = ct_ones(CT_SHAPE(1), CT_DTYPE_FLOAT32, CT_CPU);
    loop(a, 1000); /* warm up: dispatcher set-up, allocator cache */
    if (strcmp(mode, "on") != 0) {
        double best = 1e30;
        for (int r = 0; r < 3; r++) {
            double t = loop(a, n);
            best = t < best ? t : best;
        }
        printf("profiler off: %8.1f ns/op\n", best);
    }
#ifdef CTORCH_PROFILER_H
    if (strcmp(mode, "off") != 0) {
        const char *path = "/tmp/ct_bench_profile.json";
        double best = 1e30, stop_best = 1e30;
        for (int r = 0; r < 3; r++) {
            if (ct_profiler_start(path) != CT_OK) {
                fprintf(stderr, "%s\n", ct_last_error());
                return 1;
            }
            double t = loop(a, n);
            double t0 = now_s();
            ct_profiler_stop();
            double stop = (now_s() - t0) * 1e9 / (double)n;
            best = t < best ? t : best;
            stop_best = stop < stop_best ? stop : stop_best;
        }
        printf("profiler on:  %8.1f ns/op while recording, + %.1f ns/op to write the trace at stop\n", best,
               stop_best);
        remove(path);
    }
#endif
    ct_release(a);
    return 0;
}
