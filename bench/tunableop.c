/* TunableOp benchmark: the matrix products of a GPT-2 124M training step (B32 T1024,
 * bfloat16: each linear layer's forward with its bias, the input gradient and the
 * weight gradient, and the tied head), each timed with the heuristic's algorithm and
 * with the one TunableOp chose, medians of 5 timings of 20 runs taken alternately. The
 * floor of each is its FLOPs at the measured peak (the best rate of an 8192^3 bfloat16
 * product or of any product here, in the same run). Prints one line per product, then
 * the step's total with each layer's products counted 12 times, and the tuning time.
 * Without a GPU it says so and exits 0.
 *
 *   tunableop [--quick]   (--quick: B4, so the products are 8x smaller) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctorch.h"

typedef struct {
    const char *name;
    int kind; /* 0 forward with bias: x @ w^T + b; 1 input gradient: dy @ w; 2 weight gradient: dy^T @ x */
    int64_t in, out;
    int per_step; /* times the product runs in one step */
    ct_tensor *x, *w, *b, *dy;
} product;

static int check(bool ok, const char *what) {
    if (!ok)
        fprintf(stderr, "tunableop: %s failed: %s\n", what, ct_last_error());
    return ok ? 0 : 1;
}

static bool run(const product *p) {
    ct_scope_begin();
    ct_tensor *r = p->kind == 0   ? (p->b ? ct_addmm(p->b, p->x, ct_t(p->w), ct_scalar_float(1), ct_scalar_float(1))
                                          : ct_mm(p->x, ct_t(p->w)))
                   : p->kind == 1 ? ct_mm(p->dy, p->w)
                                  : ct_mm(ct_t(p->dy), p->x);
    ct_scope_end();
    return r != NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Mean milliseconds of one run over 20 (-1 on error). */
static double time_once(bool (*fn)(const product *), const product *p, ct_cuda_event *a, ct_cuda_event *b) {
    bool ok = fn(p);
    ct_cuda_event_record(a, NULL);
    for (int i = 0; ok && i < 20; i++)
        ok = fn(p);
    ct_cuda_event_record(b, NULL);
    float ms = 0;
    ok = ok && ct_cuda_event_synchronize(b) == CT_OK && ct_cuda_event_elapsed_ms(a, b, &ms) == CT_OK;
    return ok ? ms / 20.0 : -1;
}

static double median5(double *t) {
    qsort(t, 5, sizeof t[0], cmp_double);
    return t[2];
}

/* The medians of 5 timings each with TunableOp off (the heuristic's algorithm) and on,
 * taken alternately so that the GPU's clocks and temperature drift over both alike. */
static bool time_both(const product *p, double *off, double *on) {
    ct_cuda_event *a = NULL, *b = NULL;
    if (ct_cuda_event_create(true, &a) || ct_cuda_event_create(true, &b))
        return false;
    double t0[5], t1[5];
    bool ok = true;
    for (int r = 0; ok && r < 5; r++) {
        ct_cuda_tunable_enable(false);
        t0[r] = time_once(run, p, a, b);
        ct_cuda_tunable_enable(true);
        t1[r] = time_once(run, p, a, b);
        ok = t0[r] > 0 && t1[r] > 0;
    }
    ct_cuda_event_destroy(a);
    ct_cuda_event_destroy(b);
    *off = median5(t0);
    *on = median5(t1);
    return ok;
}

static ct_tensor *randn(int64_t r, int64_t c, ct_device dev) {
    ct_tensor *t = ct_randn(CT_SHAPE(r, c), CT_F32, dev);
    return t ? ct_to_dtype(ct_mul_scalar(t, ct_scalar_float(0.02 * 50)), CT_BF16) : NULL;
}

static bool square(const product *p) {
    ct_scope_begin();
    ct_tensor *r = ct_mm(p->x, p->w);
    ct_scope_end();
    return r != NULL;
}

int main(int argc, char **argv) {
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (!ct_cuda_is_available()) {
        printf("tunableop: no CUDA device: skipped\n");
        return 0;
    }
    ct_device dev = CT_CUDA(0);
    ct_manual_seed(0);
    int64_t rows = (quick ? 4 : 32) * 1024, V = 50304;
    ct_scope_begin();
    /* the peak: the best rate of an 8192^3 product, or of any product below */
    product sq = {"peak", 0, 0, 0, 0, randn(8192, 8192, dev), randn(8192, 8192, dev), NULL, NULL};
    ct_cuda_event *ea = NULL, *eb = NULL;
    if (check(ct_cuda_event_create(true, &ea) == CT_OK && ct_cuda_event_create(true, &eb) == CT_OK, "events"))
        return 1;
    double sq_ms = 1e30;
    for (int r = 0; r < 5; r++) {
        double ms = time_once(square, &sq, ea, eb);
        if (check(ms > 0, "the 8192^3 product"))
            return 1;
        sq_ms = ms < sq_ms ? ms : sq_ms;
    }
    ct_cuda_event_destroy(ea);
    ct_cuda_event_destroy(eb);
    double peak = 2.0 * 8192.0 * 8192.0 * 8192.0 / (sq_ms * 1e-3);
    static const struct {
        const char *layer;
        int64_t in, out;
        int per_step;
        bool bias;
    } layers[] = {{"qkv", 768, 2304, 12, true},
                  {"attn_proj", 768, 768, 12, true},
                  {"fc", 768, 3072, 12, true},
                  {"fc_proj", 3072, 768, 12, true},
                  {"lm_head", 768, 50304, 1, false}};
    product ps[15];
    int np = 0;
    for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++) {
        int64_t in = layers[l].in, out = layers[l].out == 50304 ? V : layers[l].out;
        ct_tensor *x = randn(rows, in, dev), *w = randn(out, in, dev), *dy = randn(rows, out, dev);
        ct_tensor *b = layers[l].bias ? ct_reshape(randn(1, out, dev), CT_SHAPE(out)) : NULL;
        if (check(x && w && dy && (b || !layers[l].bias), "inputs"))
            return 1;
        for (int k = 0; k < 3; k++)
            ps[np++] = (product){layers[l].layer, k, in, out, layers[l].per_step, x, w, b, dy};
    }
    static const char *const kinds[] = {"forward", "input_grad", "weight_grad"};
    double heur[15], tuned[15];
    ct_cuda_tunable_enable(true);
    ct_cuda_tunable_tuning_enable(true);
    for (int i = 0; i < np; i++) /* the first run tunes */
        if (check(run(&ps[i]), "a product"))
            return 1;
    for (int i = 0; i < np; i++) {
        if (check(time_both(&ps[i], &heur[i], &tuned[i]), "a product"))
            return 1;
        int64_t m = ps[i].kind == 2 ? ps[i].out : rows, n = ps[i].kind == 0 ? ps[i].out : ps[i].in;
        int64_t k = ps[i].kind == 0 ? ps[i].in : ps[i].kind == 1 ? ps[i].out : rows;
        double rate = 2.0 * (double)m * (double)n * (double)k / ((tuned[i] < heur[i] ? tuned[i] : heur[i]) * 1e-3);
        peak = rate > peak ? rate : peak;
    }
    printf("peak: %.1f TFLOP/s (the best rate measured: bf16 8192^3 mm, %.1f TFLOP/s, or a product below)\n",
           peak / 1e12, 2.0 * 8192.0 * 8192.0 * 8192.0 / (sq_ms * 1e9));
    ct_cuda_tunable_stats st;
    if (check(ct_cuda_tunable_get_stats(&st) == CT_OK, "stats"))
        return 1;
    printf("%-12s %-12s %14s %10s %10s %8s %9s %9s\n", "layer", "product", "M x N x K", "heur ms", "tuned ms",
           "gain", "TFLOP/s", "of peak");
    double step_heur = 0, step_tuned = 0, step_floor = 0;
    for (int i = 0; i < np; i++) {
        const product *p = &ps[i];
        int64_t m = p->kind == 2 ? p->out : rows, n = p->kind == 0 ? p->out : p->in;
        int64_t k = p->kind == 0 ? p->in : p->kind == 1 ? p->out : rows;
        double flops = 2.0 * (double)m * (double)n * (double)k, best = tuned[i] < heur[i] ? tuned[i] : heur[i];
        char shape[48];
        snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
        printf("%-12s %-12s %14s %10.4f %10.4f %7.3fx %9.1f %8.1f%%\n", p->name, kinds[p->kind], shape, heur[i],
               tuned[i], heur[i] / tuned[i], flops / (best * 1e9), 100 * flops / (best * 1e-3) / peak);
        step_heur += heur[i] * p->per_step;
        step_tuned += tuned[i] * p->per_step;
        step_floor += flops / peak * 1e3 * p->per_step;
    }
    printf("step's products: heuristic %.2f ms, tuned %.2f ms (%.3fx), floor %.2f ms at the peak\n", step_heur,
           step_tuned, step_heur / step_tuned, step_floor);
    printf("tuning: %lld products, %lld candidates timed (%lld refused), %lld chose another algorithm, %.1f s\n",
           (long long)st.tuned, (long long)st.candidates, (long long)st.rejected, (long long)st.improved,
           st.tuning_ms / 1e3);
    ct_cuda_tunable_enable(false);
    ct_scope_end();
    return 0;
}
