/* The GPT training benchmark shared by bench/train_char_gpt and bench/train_gpt2: the
 * model of `ctorch train` (src/cli/gpt.h) and of shared/bench/torch_peer.py's GPT, one
 * fixed batch of random tokens, AdamW (torch.optim's defaults but lr 3e-4), on the CPU
 * or a GPU, in float32, TF32 or bf16 autocast. A step is forward, backward, optimizer
 * step and zero_grad(set_to_none), as torch_peer.py times it; the figure is the median
 * over the timed steps after the warm-up, with the same names torch_peer.py prints
 * (bench/compare.py pairs them). On a GPU it also prints the peak of allocated memory,
 * the bf16 (or float32) GEMM rate measured here, and the FLOP floor of a step at that
 * rate: torch_peer.py's FLOP estimate (6 per parameter and token, plus attention's
 * 12 * layers * embd * block per token) over the measured rate. */
#ifndef CT_BENCH_GPT_BENCH_H
#define CT_BENCH_GPT_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "cli/commands.h"
#include "cli/gpt.h"
#include "ctorch.h"
#include "ctorch/ext.h"

typedef struct {
    const char *name; /* figure prefix before ".eager": "char.cpu", "char.bf16", "gpt2_124m.b32.bf16" */
    ct_char_gpt_config cfg;
    int64_t batch;
    int steps, warmup;
    ct_device device;
    const char *precision; /* "fp32", "tf32" or "bf16" */
    int threads;
    /* a check against PyTorch (scripts/gpt2_parity.py): the initial weights and the batch
     * from a PyTorch checkpoint {"model": state dict, "x": ids, "y": targets}, and every
     * step's loss printed */
    const char *init;
    bool losses;
    const char *grads; /* the first step's gradients by parameter name, as a PyTorch checkpoint */
} gpt_bench;

static int gb_fail(const char *prog) {
    fprintf(stderr, "%s: %s\n", prog, ct_last_error());
    return 1;
}

static ct_status gb_sync(ct_device d) {
    return d.type == CT_DEVICE_CUDA ? ct_cuda_synchronize(d.index) : CT_OK;
}

/* The GEMM rate of this device at the benchmark's precision: the median of 10 products
 * of two 8192 x 8192 matrices (torch_peer.py's ceiling measures the bf16 one so). */
static double gb_gemm_rate(const gpt_bench *b) {
    const int64_t n = 8192;
    ct_dtype dt = strcmp(b->precision, "bf16") == 0 ? CT_BF16 : CT_F32;
    double ts[10];
    ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(n, n), dt, b->device), *w = ct_randn(CT_SHAPE(n, n), dt, b->device);
    bool ok = x && w;
    for (int i = 0; i < 13 && ok; i++) {
        double t0 = now();
        ct_scope_begin();
        ok = ct_mm(x, w) && !gb_sync(b->device);
        ct_scope_end();
        if (i >= 3)
            ts[i - 3] = now() - t0;
    }
    ct_scope_end();
    if (!ok)
        return 0;
    qsort(ts, 10, sizeof *ts, cmp_double);
    return 2.0 * (double)(n * n * n) / ts[5];
}

/* The gradients of every parameter (float32, on the host) by name, as a PyTorch
 * checkpoint: scripts/gpt2_parity.py --grads compares them with PyTorch's. */
static ct_status gb_save_grads(const ct_char_gpt *m, const char *path) {
    ct_scope_begin();
    ct_tensor **gs = calloc((size_t)m->nparams, sizeof *gs);
    ct_status st = gs ? CT_OK : ct_error(CT_ERROR_OUT_OF_MEMORY, "grads", "out of memory");
    for (int k = 0; !st && k < m->nparams; k++)
        if (!(gs[k] = ct_to_dtype(ct_tensor_grad(m->params[k]), CT_F32)))
            st = ct_last_status();
    ct_value *d = st ? NULL : ct_cli_params_dict((const char *const *)m->names, gs, m->nparams);
    if (!st)
        st = d ? ct_save_pt(path, d) : ct_last_status();
    ct_value_free(d);
    free(gs);
    ct_scope_end();
    return st;
}

static int gpt_bench_run(const char *prog, const gpt_bench *b) {
    if (b->threads > 0)
        ct_set_num_threads(b->threads);
    bool amp = strcmp(b->precision, "bf16") == 0;
    if (ct_set_float32_matmul_precision(strcmp(b->precision, "tf32") == 0 ? "high" : "highest"))
        return gb_fail(prog);
    ct_manual_seed(0);
    ct_char_gpt m;
    if (ct_char_gpt_init(&m, &b->cfg) != CT_OK ||
        (b->device.type != CT_DEVICE_CPU && ct_char_gpt_to(&m, b->device, CT_DTYPE_UNDEFINED) != CT_OK))
        return gb_fail(prog);
    ct_optim_options o = ct_adamw_options(3e-4);
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_ADAMW, m.params, m.nparams, &o);
    const int64_t t = b->cfg.block;
    ct_tensor *x = NULL, *y = NULL;
    if (b->init) {
        ct_value *ck = ct_load(b->init);
        if (!ck || ct_cli_load_params(ct_value_get(ck, "model"), (const char *const *)m.names, m.params, m.nparams,
                                      b->init))
            return gb_fail(prog);
        ct_scope_begin();
        ct_tensor *xv = ct_value_tensor(ct_value_get(ck, "x")), *yv = ct_value_tensor(ct_value_get(ck, "y"));
        x = xv ? ct_retain(ct_to_device(xv, b->device)) : NULL;
        y = yv ? ct_retain(ct_to_device(yv, b->device)) : NULL;
        ct_scope_end();
        ct_value_free(ck);
        if (!x || !y || ct_tensor_numel(x) != b->batch * t || ct_tensor_numel(y) != b->batch * t) {
            fprintf(stderr, "%s: %s needs int64 x and y of shape (%lld, %lld)\n", prog, b->init,
                    (long long)b->batch, (long long)t);
            return 1;
        }
    } else {
        x = ct_randint(0, b->cfg.vocab, CT_SHAPE(b->batch, t), CT_I64, b->device);
        y = ct_randint(0, b->cfg.vocab, CT_SHAPE(b->batch, t), CT_I64, b->device);
    }
    double *ts = calloc((size_t)b->steps, sizeof *ts), *cs = calloc((size_t)b->steps, sizeof *cs);
    if (!opt || !x || !y || !ts || !cs)
        return gb_fail(prog);
    for (int i = 0; i < b->warmup + b->steps; i++) {
        if (i == b->warmup) {
            if (gb_sync(b->device))
                return gb_fail(prog);
            ct_reset_peak_memory_stats(b->device);
        }
        double t0 = now(), c0 = process_cpu_now();
        ct_scope_begin();
        ct_tensor *loss = NULL;
        if (!amp || !ct_autocast_begin((ct_device_type)b->device.type, CT_BF16)) {
            loss = ct_char_gpt_loss(&m, x, y);
            if (amp)
                ct_autocast_end();
        }
        double lv = 0;
        ct_status st = loss ? ct_backward(loss, NULL, false, false) : ct_last_status();
        if (st == CT_OK && b->grads && i == 0)
            st = gb_save_grads(&m, b->grads);
        if (st || ct_optimizer_step(opt) ||
            ct_optimizer_zero_grad(opt, true) || gb_sync(b->device) || (b->losses && ct_item_double(loss, &lv)))
            return gb_fail(prog);
        if (b->losses)
            printf("step %d loss %.9g\n", i, lv);
        ct_scope_end();
        if (i >= b->warmup) {
            ts[i - b->warmup] = now() - t0;
            cs[i - b->warmup] = process_cpu_now() - c0;
        }
    }
    qsort(ts, (size_t)b->steps, sizeof *ts, cmp_double);
    qsort(cs, (size_t)b->steps, sizeof *cs, cmp_double);
    double med = ts[b->steps / 2];
    int64_t nparams = ct_char_gpt_num_params(&m);
    double flops = 6.0 * (double)nparams * (double)(b->batch * t) +
                   12.0 * (double)(b->cfg.n_layer * b->cfg.n_embd * t) * (double)(b->batch * t);
    char dev[32], tag[128];
    ct_device_str(b->device, dev, sizeof dev);
    snprintf(tag, sizeof tag, "%s.eager", b->name);
    printf("ctorch %s %s params %lld batch %lld precision %s", ct_version(), dev, (long long)nparams,
           (long long)b->batch, b->precision);
    if (b->device.type == CT_DEVICE_CPU)
        printf(" (BLAS: %s) threads %d", ct_blas_info(), ct_get_num_threads());
    printf("\n");
    printf("%s.ms_per_step %.2f ms\n", tag, med * 1e3);
    printf("%s.tokens_per_s %.0f tok/s\n", tag, (double)(b->batch * t) / med);
    printf("%s.tflops %.1f TFLOP/s\n", tag, flops / med / 1e12);
    if (b->device.type == CT_DEVICE_CPU) /* CPU time of all threads: steadier than wall time on a shared machine */
        printf("%s.cpu_ms_per_step %.2f ms\n", tag, cs[b->steps / 2] * 1e3);
    if (b->device.type == CT_DEVICE_CUDA) {
        printf("%s.peak_mem %.0f MiB\n", tag, (double)ct_max_memory_allocated(b->device) / (1 << 20));
        double rate = gb_gemm_rate(b);
        if (rate > 0) {
            printf("%s.gemm_rate %.0f TFLOP/s\n", tag, rate / 1e12);
            printf("%s.floor_ms %.2f ms (FLOPs at the GEMM rate; the step is %.2fx the floor)\n", tag,
                   flops / rate * 1e3, med / (flops / rate));
        }
    }
    free(ts);
    free(cs);
    ct_optimizer_free(opt);
    ct_char_gpt_free(&m);
    ct_release(x);
    ct_release(y);
    return 0;
}

/* Parses the options both programs take; returns false on a bad one. */
static bool gpt_bench_args(gpt_bench *b, int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--threads") == 0)
            b->threads = atoi(v);
        else if (strcmp(k, "--steps") == 0)
            b->steps = atoi(v);
        else if (strcmp(k, "--warmup") == 0)
            b->warmup = atoi(v);
        else if (strcmp(k, "--batch") == 0)
            b->batch = atoi(v);
        else if (strcmp(k, "--precision") == 0)
            b->precision = v;
        else if (strcmp(k, "--init") == 0)
            b->init = v;
        else if (strcmp(k, "--grads") == 0)
            b->grads = v;
        else if (strcmp(k, "--losses") == 0)
            b->losses = strcmp(v, "1") == 0;
        else if (strcmp(k, "--shape") == 0) { /* vocab,block,layers,heads,embd: another device's model */
            ct_char_gpt_config *c = &b->cfg;
            long long x[5];
            if (sscanf(v, "%lld,%lld,%lld,%lld,%lld", &x[0], &x[1], &x[2], &x[3], &x[4]) != 5)
                return false;
            *c = (ct_char_gpt_config){.vocab = x[0], .block = x[1], .n_layer = x[2], .n_head = x[3], .n_embd = x[4]};
        }
        else if (strcmp(k, "--device") == 0) {
            if (ct_device_parse(v, &b->device))
                return false;
        } else
            return false;
    }
    return argc % 2 == 1 && b->steps >= 1 && b->steps <= 100000 && b->warmup >= 0 && b->batch >= 1 &&
           (strcmp(b->precision, "fp32") == 0 || strcmp(b->precision, "tf32") == 0 ||
            strcmp(b->precision, "bf16") == 0);
}

#endif
