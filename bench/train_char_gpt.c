/* bench/train_char_gpt: ms per training step of the character GPT of
 * `ctorch train char-gpt` in shared/bench/torch_peer.py's char-cpu configuration
 * (vocab 65, block 64, 4 layers, 4 heads, d 128, batch 16, AdamW lr 3e-4, random
 * tokens), the model of torch_peer.py --what char-cpu.
 *
 *   bench/train_char_gpt [--threads N] [--steps N] [--warmup N]
 *
 * Prints char.cpu.eager.ms_per_step and char.cpu.eager.tokens_per_s: the median over
 * 10 steps after 2 warm-up steps, as torch_peer.py measures them (a step is forward,
 * backward, optimizer step, zero_grad(set_to_none)), and the median process CPU time
 * per step (char.cpu.eager.cpu_ms_per_step), which other load on the machine disturbs
 * less than wall time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/gpt.h"
#include "ctorch.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    ct_runtime_tune_and_reexec(argv); /* as the ctorch CLI runs */
    int steps = 10, warm = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--threads") == 0)
            ct_set_num_threads(atoi(argv[i + 1]));
        else if (strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--warmup") == 0)
            warm = atoi(argv[i + 1]);
    }
    if (steps < 1 || steps > 100000 || warm < 0) {
        fprintf(stderr, "usage: train_char_gpt [--threads N] [--steps N>=1] [--warmup N>=0]\n");
        return 2;
    }
    const ct_char_gpt_config cfg = {.vocab = 65, .block = 64, .n_layer = 4, .n_head = 4, .n_embd = 128};
    const int64_t b = 16, t = cfg.block;
    ct_manual_seed(0);
    ct_char_gpt m;
    if (ct_char_gpt_init(&m, &cfg) != CT_OK) {
        fprintf(stderr, "train_char_gpt: %s\n", ct_last_error());
        return 1;
    }
    ct_optim_options o = ct_adamw_options(3e-4);
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_ADAMW, m.params, m.nparams, &o);
    ct_tensor *x = ct_randint(0, cfg.vocab, CT_SHAPE(b, t), CT_I64, CT_CPU);
    ct_tensor *y = ct_randint(0, cfg.vocab, CT_SHAPE(b, t), CT_I64, CT_CPU);
    double *ts = calloc((size_t)steps, sizeof *ts), *cs = calloc((size_t)steps, sizeof *cs);
    if (!opt || !x || !y || !ts || !cs) {
        fprintf(stderr, "train_char_gpt: %s\n", ct_last_error());
        return 1;
    }
    for (int i = 0; i < warm + steps; i++) {
        double t0 = now(), c0 = cpu_now();
        ct_scope_begin();
        ct_tensor *loss = ct_char_gpt_loss(&m, x, y);
        if (!loss || ct_backward(loss, NULL, false, false) || ct_optimizer_step(opt) ||
            ct_optimizer_zero_grad(opt, true)) {
            fprintf(stderr, "train_char_gpt: %s\n", ct_last_error());
            return 1;
        }
        ct_scope_end();
        if (i >= warm) {
            ts[i - warm] = now() - t0;
            cs[i - warm] = cpu_now() - c0;
        }
    }
    qsort(ts, (size_t)steps, sizeof *ts, cmp);
    qsort(cs, (size_t)steps, sizeof *cs, cmp);
    double med = ts[steps / 2];
    printf("ctorch %s (BLAS: %s) threads %d params %lld\n", ct_version(), ct_blas_info(), ct_get_num_threads(),
           (long long)ct_char_gpt_num_params(&m));
    printf("char.cpu.eager.ms_per_step %.2f ms\n", med * 1e3);
    printf("char.cpu.eager.tokens_per_s %.0f tok/s\n", (double)(b * t) / med);
    /* CPU time of all threads: steadier than wall time on a shared machine */
    printf("char.cpu.eager.cpu_ms_per_step %.2f ms\n", cs[steps / 2] * 1e3);
    free(ts);
    free(cs);
    ct_optimizer_free(opt);
    ct_char_gpt_free(&m);
    ct_release(x);
    ct_release(y);
    return 0;
}
