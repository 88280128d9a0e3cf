/* Reduction bandwidth: sum over 16M float32 against a plain memcpy of the same bytes,
 * with 1 and with all threads. Prints GB/s of input read (the copy also writes as many
 * bytes, which the ratio does not credit it for). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctorch.h"
#include "bench_util.h"

static double best_of(int reps, void (*fn)(void *), void *ctx) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        fn(ctx);
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    return best;
}

typedef struct job {
    ct_tensor *x;
    void *dst;
    const void *src;
    size_t bytes;
    const int64_t *dims;
    int ndims;
} job;

static void run_copy(void *p) {
    job *j = p;
    memcpy(j->dst, j->src, j->bytes);
}

static void run_sum(void *p) {
    job *j = p;
    ct_scope_begin();
    if (!ct_sum(j->x, j->dims, j->ndims, false, CT_DTYPE_UNDEFINED))
        fprintf(stderr, "sum failed: %s\n", ct_last_error());
    ct_scope_end();
}

int main(void) {
    const int64_t n = 16 * 1024 * 1024;
    const size_t bytes = (size_t)n * sizeof(float);
    ct_tensor *x = ct_ones(CT_SHAPE(n), CT_F32, CT_CPU);
    void *dst = malloc(bytes);
    if (!x || !dst)
        return 1;
    memset(dst, 1, bytes);
    job j = {x, dst, ct_tensor_data(x), bytes, NULL, 0};
    int all = ct_get_num_threads();
    double tc = best_of(10, run_copy, &j);
    printf("memcpy 64 MiB:                %6.2f GB/s\n", (double)bytes / tc / 1e9);
    for (int nt = 1; nt <= all; nt = nt == all ? all + 1 : all) {
        ct_set_num_threads(nt);
        double ts = best_of(10, run_sum, &j);
        printf("sum 16M float32, %d thread(s): %6.2f GB/s  (%.2fx memcpy)\n", nt, (double)bytes / ts / 1e9, tc / ts);
    }
    /* Rows: sum over the last dim of (4096, 4096), and over the first dim. */
    ct_tensor *m = ct_view(x, CT_SHAPE(4096, 4096));
    j.x = m;
    j.dims = CT_INDEX(1);
    j.ndims = 1;
    ct_set_num_threads(all);
    double tr = best_of(5, run_sum, &j);
    printf("sum (4096, 4096) over dim 1:  %6.2f GB/s\n", (double)bytes / tr / 1e9);
    j.dims = CT_INDEX(0);
    double t0 = best_of(5, run_sum, &j);
    printf("sum (4096, 4096) over dim 0:  %6.2f GB/s\n", (double)bytes / t0 / 1e9);
    /* Other row reductions over the last dim of (4096, 4096) random values. */
    ct_tensor *r = ct_randn(CT_SHAPE(4096, 4096), CT_F32, CT_CPU);
    static const char *const names[] = {"amax", "argmax", "var", "logsumexp", "softmax", "log_softmax", "cumsum"};
    for (int nt = 1; nt <= all; nt = nt == all ? all + 1 : all) {
        ct_set_num_threads(nt);
        for (int k = 0; k < 7; k++) {
            double best = 1e30;
            for (int rep = 0; rep < 5; rep++) {
                ct_scope_begin();
                double t1 = now();
                ct_tensor *y = NULL;
                switch (k) {
                case 0: y = ct_amax(r, CT_INDEX(1), 1, false); break;
                case 1: y = ct_argmax_dim(r, 1, false); break;
                case 2: y = ct_var(r, CT_INDEX(1), 1, 1.0, false); break;
                case 3: y = ct_logsumexp(r, CT_INDEX(1), 1, false); break;
                case 4: y = ct_softmax(r, 1, CT_DTYPE_UNDEFINED); break;
                case 5: y = ct_log_softmax(r, 1, CT_DTYPE_UNDEFINED); break;
                default: y = ct_cumsum(r, 1, CT_DTYPE_UNDEFINED); break;
                }
                t1 = now() - t1;
                if (!y)
                    fprintf(stderr, "%s failed: %s\n", names[k], ct_last_error());
                ct_scope_end();
                if (t1 < best)
                    best = t1;
            }
            printf("%-12s (4096, 4096) dim 1, %2d thread(s): %7.2f GB/s read\n", names[k], nt,
                   (double)bytes / best / 1e9);
        }
    }
    ct_release(r);
    ct_release(m);
    ct_release(x);
    free(dst);
    return 0;
}
