/* bench/optim: one optimizer step over the parameters of the Fashion-MNIST CNN
 * (conv 1->32, conv 32->64, linear 3136->128, linear 128->10: 421,642 float32 values),
 * fused (foreach) loop against the op-by-op path.
 *
 * Prints "name value unit" lines: optim.<kind>_<path>.ms, the median of several runs. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ctorch.h"
#include "optim/grad_access.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define NP 8
#define REPS 15

int main(void) {
    const int64_t shapes[NP][4] = {{32, 1, 3, 3}, {32}, {64, 32, 3, 3}, {64}, {128, 3136}, {128}, {10, 128}, {10}};
    const int ndims[NP] = {4, 1, 4, 1, 2, 1, 2, 1};
    ct_tensor *params[NP];
    ct_manual_seed(0);
    for (int i = 0; i < NP; i++) {
        params[i] = ct_randn(shapes[i], ndims[i], CT_F32, CT_CPU);
        ct_tensor *g = ct_randn(shapes[i], ndims[i], CT_F32, CT_CPU);
        ct_optim_set_grad(params[i], g);
        ct_release(g);
    }
    const struct {
        const char *name;
        ct_optim_kind kind;
    } kinds[] = {{"sgd_momentum", CT_OPTIM_SGD}, {"adam", CT_OPTIM_ADAM}, {"adamw", CT_OPTIM_ADAMW},
                 {"rmsprop", CT_OPTIM_RMSPROP}, {"adagrad", CT_OPTIM_ADAGRAD}};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        for (int fe = 1; fe >= 0; fe--) {
            ct_optim_options o = ct_adam_options(1e-4);
            o.momentum = 0.9;
            o.foreach = fe;
            ct_optimizer *opt = ct_optimizer_new(kinds[k].kind, params, NP, &o);
            if (!opt) {
                fprintf(stderr, "%s\n", ct_last_error());
                return 1;
            }
            double t[REPS];
            ct_optimizer_step(opt);
            for (int r = 0; r < REPS; r++) {
                double t0 = now();
                ct_optimizer_step(opt);
                t[r] = now() - t0;
            }
            qsort(t, REPS, sizeof t[0], cmp_double);
            printf("optim.%s_%s.ms %.3f ms\n", kinds[k].name, fe ? "fused" : "plain", 1e3 * t[REPS / 2]);
            ct_optimizer_free(opt);
        }
    }
    for (int i = 0; i < NP; i++) {
        ct_optim_set_grad(params[i], NULL);
        ct_release(params[i]);
    }
    return 0;
}
