/* bench/optim: one optimizer step over the parameters of the Fashion-MNIST CNN
 * (conv 1->32, conv 32->64, linear 3136->128, linear 128->10: 421,642 float32 values),
 * fused (foreach) loop against the op-by-op path. With a GPU, also AdamW over GPT-2
 * 124M's 148 parameter tensors (124,439,808 float32 values) on CUDA: the fused kernel
 * (fused -1), the same with clip_grad_norm_ folded in (ct_optimizer_step_clipped),
 * and the plain path (fused 0), each step timed to the end of the GPU's work.
 *
 * Prints "name value unit" lines: optim.<kind>_<path>.ms, the median of several runs. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ctorch.h"
#include "optim/grad_access.h"
#include "bench_util.h"

/* GPT-2 124M (n_layer 12, n_embd 768, vocab 50257, block 1024): wte, wpe, per layer
 * ln_1 (w, b), attn.c_attn (w, b), attn.c_proj (w, b), ln_2 (w, b), mlp.c_fc (w, b),
 * mlp.c_proj (w, b), then ln_f (w, b); 2 + 12 * 12 + 2 = 148 tensors. */
static int gpt2_shapes(int64_t (*shape)[2], int *ndim) {
    int n = 0;
#define ADD2(a, b) (shape[n][0] = (a), shape[n][1] = (b), ndim[n++] = 2)
#define ADD1(a) (shape[n][0] = (a), ndim[n++] = 1)
    ADD2(50257, 768);
    ADD2(1024, 768);
    for (int l = 0; l < 12; l++) {
        ADD1(768);
        ADD1(768);
        ADD2(768, 2304);
        ADD1(2304);
        ADD2(768, 768);
        ADD1(768);
        ADD1(768);
        ADD1(768);
        ADD2(768, 3072);
        ADD1(3072);
        ADD2(3072, 768);
        ADD1(768);
    }
    ADD1(768);
    ADD1(768);
#undef ADD1
#undef ADD2
    return n;
}

/* AdamW steps on CUDA over GPT-2's parameters: ms per step (synchronized). */
static int bench_cuda_gpt2(void) {
    enum { GP = 148, GREPS = 10 };
    int64_t shape[GP][2];
    int ndim[GP];
    const int np = gpt2_shapes(shape, ndim);
    ct_tensor *params[GP];
    ct_manual_seed(0);
    for (int i = 0; i < np; i++) {
        params[i] = ct_randn(shape[i], ndim[i], CT_F32, CT_CUDA(0));
        ct_tensor *g = ct_randn(shape[i], ndim[i], CT_F32, CT_CUDA(0));
        if (!params[i] || !g || ct_optim_set_grad(params[i], g)) {
            fprintf(stderr, "%s\n", ct_last_error());
            return 1;
        }
        ct_release(g);
    }
    const struct {
        const char *name;
        int fused;
        bool clipped;
    } paths[] = {{"fused", -1, false}, {"fused_clipped", -1, true}, {"plain", 0, false}};
    for (size_t k = 0; k < sizeof paths / sizeof *paths; k++) {
        ct_optim_options o = ct_adamw_options(1e-4);
        o.fused = paths[k].fused;
        ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_ADAMW, params, np, &o);
        if (!opt) {
            fprintf(stderr, "%s\n", ct_last_error());
            return 1;
        }
        double t[GREPS];
        for (int r = -1; r < GREPS; r++) {
            ct_scope_begin();
            ct_cuda_synchronize(0);
            double t0 = now();
            ct_status st = paths[k].clipped ? ct_optimizer_step_clipped(opt, 1.0, 2.0, NULL) : ct_optimizer_step(opt);
            ct_cuda_synchronize(0);
            if (r >= 0)
                t[r] = now() - t0;
            ct_scope_end();
            if (st) {
                fprintf(stderr, "%s\n", ct_last_error());
                return 1;
            }
        }
        qsort(t, GREPS, sizeof t[0], cmp_double);
        printf("optim.cuda_gpt2_adamw_%s.ms %.3f ms\n", paths[k].name, 1e3 * t[GREPS / 2]);
        ct_optimizer_free(opt);
    }
    for (int i = 0; i < np; i++) {
        ct_optim_set_grad(params[i], NULL);
        ct_release(params[i]);
    }
    return 0;
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
    return ct_cuda_is_available() ? bench_cuda_gpt2() : 0;
}
