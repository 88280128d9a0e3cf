/* Elementwise op throughput (bench/ops has the headline figures beside PyTorch's): GB/s moved (inputs read + output written) for a few ops
 * over large float32 tensors, best of several runs.
 *
 *   bench/elementwise [numel] [threads]
 *
 * CT_CPU_ISA=scalar|avx2|avx512 caps the vector math ISA (src/cpu/vecmath.h), so
 *   CT_CPU_ISA=scalar bench/elementwise   vs   bench/elementwise
 * compares the plain C loops with the SLEEF ones. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ctorch.h"
#include "cpu/vecmath.h"
#include "bench_util.h"

typedef struct {
    const char *name;
    int nin;
    ct_tensor *(*u)(const ct_tensor *, ct_tensor *);
    ct_tensor *(*b)(const ct_tensor *, const ct_tensor *, ct_tensor *);
} bench_op;

static ct_tensor *gelu_out(const ct_tensor *a, ct_tensor *o) { return ct_gelu_out(a, CT_GELU_APPROXIMATE_NONE, o); }

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 16 * 1024 * 1024;
    if (argc > 2)
        ct_set_num_threads(atoi(argv[2]));
    static const bench_op ops[] = {
        {"exp", 1, ct_exp_out, NULL},     {"log", 1, ct_log_out, NULL},   {"tanh", 1, ct_tanh_out, NULL},
        {"erf", 1, ct_erf_out, NULL},     {"sigmoid", 1, ct_sigmoid_out, NULL}, {"gelu", 1, gelu_out, NULL},
        {"silu", 1, ct_silu_out, NULL},   {"add", 2, NULL, ct_add_out},   {"remainder", 2, NULL, ct_remainder_out},
    };
    ct_tensor *a = ct_empty(CT_SHAPE(n), CT_F32, CT_CPU);
    ct_tensor *b = ct_empty(CT_SHAPE(n), CT_F32, CT_CPU);
    ct_tensor *o = ct_empty(CT_SHAPE(n), CT_F32, CT_CPU);
    if (!a || !b || !o) {
        fprintf(stderr, "ops: %s\n", ct_last_error());
        return 1;
    }
    /* Values in [-4, 4) for a and [0.5, 4.5) for b (nonzero divisors). */
    float *pa = ct_tensor_data(a), *pb = ct_tensor_data(b);
    uint32_t s = 12345;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        pa[i] = (float)(s >> 8) / 16777216.0f * 8.0f - 4.0f;
        pb[i] = 4.5f - (pa[i] + 4.0f) * 0.5f;
    }
    printf("numel %lld float32, threads %d, vector math %s\n", (long long)n, ct_get_num_threads(), ct_vm_isa());
    printf("%-10s %10s %10s\n", "op", "ms", "GB/s");
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        const bench_op *op = &ops[k];
        double best = 1e30;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = now();
            ct_tensor *r = op->nin == 1 ? op->u(a, o) : op->b(a, b, o);
            double t = now() - t0;
            if (!r) {
                fprintf(stderr, "%s: %s\n", op->name, ct_last_error());
                return 1;
            }
            ct_release(r);
            if (t < best)
                best = t;
        }
        double bytes = (double)n * sizeof(float) * (op->nin + 1);
        printf("%-10s %10.2f %10.2f\n", op->name, best * 1e3, bytes / best / 1e9);
    }
    ct_release(a);
    ct_release(b);
    ct_release(o);
    return 0;
}
