/* bench/compile: what ct_compile costs and gains on the CPU.
 *
 *   bench/compile [--threads N] [--steps N] [--numel N]
 *
 * - chain: a chain of 12 pointwise ops over numel float32 elements (default 2^20),
 *   eager against compiled (one generated kernel), ms per call, median of --steps
 *   calls, alternating; the compile time of its capture with an empty cache (cold)
 *   and with the object cached (warm);
 * - softmax: softmax(x / 8 + bias) over 2048 rows of 1024, eager against compiled (one
 *   row kernel), and against a copy of as many bytes (the bandwidth bound);
 * - ln_gelu: gelu(layer_norm(x)) over 8192 rows of 512, eager against compiled (one
 *   row kernel) and against a copy of as many bytes;
 * - char: bench/train_char_gpt's CPU step (vocab 65, block 64, 4 layers, 4 heads,
 *   embd 128, batch 16, AdamW), ms per step (median, alternating): eager, the whole
 *   step compiled (zero_grad, forward, backward and the AdamW step as host calls),
 *   and forward and backward compiled with the optimizer eager around them; the
 *   compile time of the whole step's capture, cold and warm.
 *
 * The cold figures build in a fresh directory under /tmp (CT_COMPILE_CACHE is set for
 * the run). Results are checked: the chain's compiled result must equal eager's bit
 * for bit, and the step's losses must match. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "cli/gpt.h"
#include "ctorch.h"

static ct_tensor *chain(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *a = ct_sub_alpha(ct_mul(in[0], in[1]), in[1], ct_scalar_float(0.3));
    ct_tensor *b = ct_add(ct_tanh(a), ct_sigmoid(ct_neg(in[0])));
    ct_tensor *c = ct_div(ct_exp(ct_abs(b)), ct_add_scalar(ct_relu(in[1]), ct_scalar_float(1.5)));
    return ct_mul_scalar(c, ct_scalar_int(3));
}

static int fail(void) {
    fprintf(stderr, "bench/compile: %s\n", ct_last_error());
    return 1;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static bool same(const ct_tensor *a, const ct_tensor *b) {
    return a && b && ct_tensor_numel(a) == ct_tensor_numel(b) &&
           memcmp(ct_tensor_data(a), ct_tensor_data(b), (size_t)ct_tensor_numel(a) * sizeof(float)) == 0;
}

/* Captures fn on in (eager call, then the capture) and returns its compile time in ms. */
static double capture_ms(ct_compiled *c, ct_tensor *const *in, int n) {
    for (int k = 0; k < 2; k++) {
        ct_scope_begin();
        ct_tensor *r = ct_compiled_call(c, in, n);
        ct_scope_end();
        if (!r)
            return -1;
    }
    return (double)ct_compiled_stat(c, CT_COMPILE_STAT_COMPILE_US) / 1e3;
}

static int bench_chain(int steps, int64_t numel) {
    ct_scope_begin();
    ct_tensor *in[2] = {ct_randn(CT_SHAPE(numel), CT_F32, CT_CPU), ct_randn(CT_SHAPE(numel), CT_F32, CT_CPU)};
    ct_compiled *cold = ct_compile(chain, NULL, 0), *warm = ct_compile(chain, NULL, 0);
    double cold_ms = capture_ms(cold, in, 2), warm_ms = capture_ms(warm, in, 2);
    if (cold_ms < 0 || warm_ms < 0)
        return fail();
    double *te = calloc((size_t)steps, sizeof *te), *tc = calloc((size_t)steps, sizeof *tc);
    bool ok = te && tc;
    for (int i = 0; ok && i < steps; i++) {
        ct_scope_begin();
        double t0 = now();
        ct_tensor *e = chain(in, 2, NULL);
        double t1 = now();
        ct_tensor *c = ct_compiled_call(warm, in, 2);
        double t2 = now();
        ok = same(e, c);
        te[i] = t1 - t0;
        tc[i] = t2 - t1;
        ct_scope_end();
    }
    if (!ok) {
        fprintf(stderr, "bench/compile: the compiled chain differs from eager (or failed: %s)\n", ct_last_error());
        return 1;
    }
    double me = median(te, steps), mc = median(tc, steps);
    double gb = (double)numel * 4 * 3 / 1e9; /* two inputs read, one output written */
    printf("compile.chain.numel %lld\n", (long long)numel);
    printf("compile.chain.kernels %lld (%lld nodes)\n", (long long)ct_compiled_stat(warm, CT_COMPILE_STAT_FUSED_GROUPS),
           (long long)ct_compiled_stat(warm, CT_COMPILE_STAT_FUSED_NODES));
    printf("compile.chain.cold_compile_ms %.1f ms\n", cold_ms);
    printf("compile.chain.warm_compile_ms %.2f ms\n", warm_ms);
    printf("compile.chain.eager_ms %.3f ms\n", me * 1e3);
    printf("compile.chain.compiled_ms %.3f ms\n", mc * 1e3);
    printf("compile.chain.speedup %.2fx\n", me / mc);
    printf("compile.chain.compiled_gb_per_s %.1f GB/s (inputs read and result written)\n", gb / mc);
    free(te);
    free(tc);
    ct_compiled_free(cold);
    ct_compiled_free(warm);
    ct_scope_end();
    return 0;
}

static ct_tensor *scaled_softmax(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    return ct_softmax(ct_add(ct_mul_scalar(in[0], ct_scalar_float(0.125)), in[1]), -1, CT_DTYPE_UNDEFINED);
}

/* A fused row kernel against eager: fn(in) eager and compiled, and a copy of gb
 * gigabytes (what the fused kernel must move) as the bandwidth bound; prints
 * compile.NAME.* figures. */
static int bench_fused(const char *name, const char *what, ct_compile_fn fn, ct_tensor **in, int nin, int64_t rows,
                       int64_t cols, double gb, int steps) {
    ct_tensor *dst = ct_empty(CT_SHAPE(rows, cols), CT_F32, CT_CPU);
    ct_tensor *src = ct_randn(CT_SHAPE(rows, cols), CT_F32, CT_CPU);
    ct_compiled *c = ct_compile(fn, NULL, 0);
    if (capture_ms(c, in, nin) < 0 || !dst || !src)
        return fail();
    double *te = calloc((size_t)steps, sizeof *te), *tc = calloc((size_t)steps, sizeof *tc),
           *tm = calloc((size_t)steps, sizeof *tm);
    bool ok = te && tc && tm;
    for (int i = 0; ok && i < steps; i++) {
        ct_scope_begin();
        double t0 = now();
        ct_tensor *e = fn(in, nin, NULL);
        double t1 = now();
        ct_tensor *r = ct_compiled_call(c, in, nin);
        double t2 = now();
        ok = same(e, r) && ct_copy_(dst, src) != NULL;
        double t3 = now();
        te[i] = t1 - t0;
        tc[i] = t2 - t1;
        tm[i] = t3 - t2;
        ct_scope_end();
    }
    if (!ok) {
        fprintf(stderr, "bench/compile: the compiled %s differs from eager (or failed: %s)\n", what, ct_last_error());
        return 1;
    }
    double me = median(te, steps), mc = median(tc, steps), mm = median(tm, steps);
    printf("compile.%s.kernels %lld (%lld nodes)\n", name, (long long)ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_GROUPS),
           (long long)ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_NODES));
    printf("compile.%s.eager_ms %.3f ms\n", name, me * 1e3);
    printf("compile.%s.compiled_ms %.3f ms\n", name, mc * 1e3);
    printf("compile.%s.speedup %.2fx\n", name, me / mc);
    printf("compile.%s.compiled_gb_per_s %.1f GB/s\n", name, gb / mc);
    printf("compile.%s.copy_gb_per_s %.1f GB/s (a copy of as many bytes)\n", name, gb / mm);
    printf("compile.%s.fraction_of_copy %.2f\n", name, mm / mc);
    free(te);
    free(tc);
    free(tm);
    ct_compiled_free(c);
    return 0;
}

/* softmax(x / 8 + bias) over rows of 1024: eager, compiled (one row kernel), and the
 * copy of the same bytes (two tensors read, one written) as the bandwidth bound. */
static int bench_softmax(int steps) {
    const int64_t rows = 2048, cols = 1024;
    ct_scope_begin();
    ct_tensor *in[2] = {ct_randn(CT_SHAPE(rows, cols), CT_F32, CT_CPU), ct_randn(CT_SHAPE(rows, cols), CT_F32, CT_CPU)};
    int rc = bench_fused("softmax", "softmax", scaled_softmax, in, 2, 2 * rows, cols,
                         (double)rows * (double)cols * 4 * 3 / 1e9, steps);
    ct_scope_end();
    return rc;
}

static ct_tensor *ln_gelu(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    const int64_t cols = ct_tensor_size(in[0], 1);
    return ct_gelu(ct_layer_norm(in[0], &cols, 1, in[1], in[2], 1e-5), CT_GELU_APPROXIMATE_TANH);
}

/* gelu(layer_norm(x)) (tanh form, with weight and bias) over 8192 rows of 512: eager
 * (two kernels), compiled (one row kernel), and a copy of the bytes the fused kernel
 * must move (x read, the result written) as the bandwidth bound. */
static int bench_ln_gelu(int steps) {
    const int64_t rows = 8192, cols = 512;
    ct_scope_begin();
    ct_tensor *in[3] = {ct_randn(CT_SHAPE(rows, cols), CT_F32, CT_CPU), ct_randn(CT_SHAPE(cols), CT_F32, CT_CPU),
                        ct_randn(CT_SHAPE(cols), CT_F32, CT_CPU)};
    int rc = bench_fused("ln_gelu", "layer_norm + gelu", ln_gelu, in, 3, rows, cols,
                         (double)rows * (double)cols * 4 * 2 / 1e9, steps);
    ct_scope_end();
    return rc;
}

typedef struct step_ctx {
    ct_char_gpt *m;
    ct_optimizer *opt;
    bool whole; /* zero_grad and the AdamW step inside the function */
} step_ctx;

static ct_tensor *step_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    step_ctx *s = ud;
    if (s->whole && ct_optimizer_zero_grad(s->opt, true))
        return NULL;
    ct_tensor *loss = ct_char_gpt_loss(s->m, in[0], in[1]);
    if (!loss || ct_backward(loss, NULL, false, false) != CT_OK)
        return NULL;
    return !s->whole || ct_optimizer_step(s->opt) == CT_OK ? loss : NULL;
}

/* One step of s: the whole step through c (or eagerly when c is NULL), or, for a
 * forward-and-backward function, zero_grad and the step around it. */
static ct_tensor *run_step(step_ctx *s, ct_compiled *c, ct_tensor *const *in) {
    if (s->whole)
        return c ? ct_compiled_call(c, in, 2) : step_fn(in, 2, s);
    if (ct_optimizer_zero_grad(s->opt, true))
        return NULL;
    ct_tensor *loss = c ? ct_compiled_call(c, in, 2) : step_fn(in, 2, s);
    return loss && ct_optimizer_step(s->opt) == CT_OK ? loss : NULL;
}

typedef struct char_model {
    ct_char_gpt m;
    ct_optimizer *opt;
    step_ctx s;
} char_model;

static bool char_model_init(char_model *cm, const ct_char_gpt_config *cfg, bool whole) {
    ct_manual_seed(0);
    if (ct_char_gpt_init(&cm->m, cfg))
        return false;
    ct_optim_options o = ct_adamw_options(3e-4);
    cm->opt = ct_optimizer_new(CT_OPTIM_ADAMW, cm->m.params, cm->m.nparams, &o);
    cm->s = (step_ctx){&cm->m, cm->opt, whole};
    return cm->opt != NULL;
}

static void char_model_free(char_model *cm) {
    ct_optimizer_free(cm->opt);
    ct_char_gpt_free(&cm->m);
}

static int bench_char(int steps) {
    ct_char_gpt_config cfg = {.vocab = 65, .block = 64, .n_layer = 4, .n_head = 4, .n_embd = 128};
    /* eager; the whole step compiled; forward and backward compiled with the optimizer
     * eager around them (the first slice's split); and a model for the warm capture */
    char_model me, mw, mf, mx;
    if (!char_model_init(&me, &cfg, true) || !char_model_init(&mw, &cfg, true) || !char_model_init(&mf, &cfg, false) ||
        !char_model_init(&mx, &cfg, true))
        return fail();
    ct_tensor *x = ct_randint(0, cfg.vocab, CT_SHAPE(16, cfg.block), CT_I64, CT_CPU);
    ct_tensor *y = ct_randint(0, cfg.vocab, CT_SHAPE(16, cfg.block), CT_I64, CT_CPU);
    if (!x || !y)
        return fail();
    ct_compiled *cw = ct_compile(step_fn, &mw.s, 0), *cf = ct_compile(step_fn, &mf.s, 0);
    ct_tensor *in[2] = {x, y};
    /* the first two steps: eager and capture (cold) */
    for (int k = 0; k < 2; k++) {
        ct_scope_begin();
        bool ok = run_step(&me.s, NULL, in) && run_step(&mw.s, cw, in) && run_step(&mf.s, cf, in);
        ct_scope_end();
        if (!ok)
            return fail();
    }
    double cold_ms = (double)ct_compiled_stat(cw, CT_COMPILE_STAT_COMPILE_US) / 1e3;
    /* warm: a second compiled function finds the cache filled */
    ct_compiled *cx = ct_compile(step_fn, &mx.s, 0);
    double warm_ms = capture_ms(cx, in, 2);
    if (warm_ms < 0)
        return fail();
    double *te = calloc((size_t)steps, sizeof *te), *tw = calloc((size_t)steps, sizeof *tw),
           *tf = calloc((size_t)steps, sizeof *tf);
    bool ok = te && tw && tf;
    double max_diff = 0;
    for (int i = 0; ok && i < steps; i++) {
        ct_scope_begin();
        ct_tensor *le, *lw, *lf;
        double t0 = now();
        ok = (le = run_step(&me.s, NULL, in)) != NULL;
        double t1 = now();
        ok = ok && (lw = run_step(&mw.s, cw, in)) != NULL;
        double t2 = now();
        ok = ok && (lf = run_step(&mf.s, cf, in)) != NULL;
        double t3 = now();
        double a = 0, b = 0, c = 0;
        ok = ok && !ct_item_double(le, &a) && !ct_item_double(lw, &b) && !ct_item_double(lf, &c);
        max_diff = fmax(max_diff, fmax(fabs(a - b), fabs(a - c)));
        te[i] = t1 - t0;
        tw[i] = t2 - t1;
        tf[i] = t3 - t2;
        ct_scope_end();
    }
    if (!ok)
        return fail();
    /* peak memory of one step above what is held between steps (ct_max_memory_allocated) */
    int64_t peak[3] = {0, 0, 0};
    for (int v = 0; ok && v < 3; v++) {
        ct_scope_begin();
        const int64_t base = ct_memory_allocated(CT_CPU);
        ct_reset_peak_memory_stats(CT_CPU);
        ok = (v == 0 ? run_step(&me.s, NULL, in) : v == 1 ? run_step(&mw.s, cw, in) : run_step(&mf.s, cf, in)) != NULL;
        peak[v] = ct_max_memory_allocated(CT_CPU) - base;
        ct_scope_end();
    }
    /* the AdamW step alone (the gradients of the last eager step are still there) */
    double *to = calloc((size_t)steps, sizeof *to);
    ok = ok && to;
    for (int i = 0; ok && i < steps; i++) {
        double t0 = now();
        ok = ct_optimizer_step(me.opt) == CT_OK;
        to[i] = now() - t0;
    }
    if (!ok)
        return fail();
    double med_e = median(te, steps), med_w = median(tw, steps), med_f = median(tf, steps), med_o = median(to, steps);
    free(to);
    printf("compile.char.nodes %lld (captured %lld), %lld in %lld generated kernels\n",
           (long long)ct_compiled_stat(cw, CT_COMPILE_STAT_NODES),
           (long long)ct_compiled_stat(cw, CT_COMPILE_STAT_CAPTURED_NODES),
           (long long)ct_compiled_stat(cw, CT_COMPILE_STAT_FUSED_NODES),
           (long long)ct_compiled_stat(cw, CT_COMPILE_STAT_FUSED_GROUPS));
    printf("compile.char.cold_compile_ms %.1f ms\n", cold_ms);
    printf("compile.char.warm_compile_ms %.2f ms\n", warm_ms);
    printf("compile.char.eager_ms_per_step %.2f ms\n", med_e * 1e3);
    printf("compile.char.compiled_ms_per_step %.2f ms (zero_grad, forward, backward and AdamW step)\n", med_w * 1e3);
    printf("compile.char.fwd_bwd_compiled_ms_per_step %.2f ms (AdamW step eager)\n", med_f * 1e3);
    printf("compile.char.speedup %.2fx\n", med_e / med_w);
    printf("compile.char.fwd_bwd_speedup %.2fx\n", med_e / med_f);
    printf("compile.char.max_loss_diff %.3g\n", max_diff);
    printf("compile.char.adamw_step_ms %.2f ms (the fused CPU AdamW of %lld parameters alone)\n", med_o * 1e3,
           (long long)ct_char_gpt_num_params(&me.m));
    printf("compile.char.peak_step_mib eager %.1f, compiled %.1f, fwd_bwd compiled %.1f MiB (above the memory held "
           "between steps)\n",
           (double)peak[0] / 1048576.0, (double)peak[1] / 1048576.0, (double)peak[2] / 1048576.0);
    free(te);
    free(tw);
    free(tf);
    ct_compiled_free(cw);
    ct_compiled_free(cf);
    ct_compiled_free(cx);
    char_model_free(&me);
    char_model_free(&mw);
    char_model_free(&mf);
    char_model_free(&mx);
    return 0;
}

int main(int argc, char **argv) {
    int steps = 21, threads = 0;
    int64_t numel = 1 << 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0)
            threads = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--numel") == 0)
            numel = atoll(argv[i + 1]);
        else
            steps = 0;
    }
    if (steps < 1 || numel < 1 || (argc % 2) == 0) {
        fprintf(stderr, "usage: compile [--threads N] [--steps N>=1] [--numel N>=1]\n");
        return 2;
    }
    if (threads > 0)
        ct_set_num_threads(threads);
    char dir[] = "/tmp/ct_bench_compile_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("bench/compile: mkdtemp");
        return 1;
    }
    setenv("CT_COMPILE_CACHE", dir, 1);
    ct_scope_begin();
    int rc = bench_chain(steps, numel);
    if (!rc)
        rc = bench_softmax(steps);
    if (!rc)
        rc = bench_ln_gelu(steps);
    if (!rc)
        rc = bench_char(steps);
    ct_scope_end();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
}
