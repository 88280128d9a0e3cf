/* GPU benchmark: elementwise bandwidth against a device-to-device copy, bf16 matrix
 * products, and the host cost of launching an op. Prints "name value unit" lines
 * (bench/torch_cuda_peer.py prints the same names for PyTorch). Without a GPU it says
 * so and exits 0.
 *
 *   cuda_ops [--quick | --attention]   (--quick: 16M elementwise and 4096 matmul only;
 *                                       --attention: the attention cases only) */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ctorch.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int check(bool ok, const char *what) {
    if (!ok)
        fprintf(stderr, "cuda_ops: %s failed: %s\n", what, ct_last_error());
    return ok ? 0 : 1;
}

/* Milliseconds per iteration of fn over iters runs, timed with CUDA events after a
 * warm-up. */
typedef bool (*bench_fn)(void *ctx);

static double time_ms(bench_fn fn, void *ctx, int warmup, int iters) {
    for (int i = 0; i < warmup; i++)
        if (!fn(ctx))
            return -1;
    ct_cuda_event *a = NULL, *b = NULL;
    if (ct_cuda_event_create(true, &a) || ct_cuda_event_create(true, &b))
        return -1;
    ct_cuda_event_record(a, NULL);
    for (int i = 0; i < iters; i++)
        if (!fn(ctx))
            return -1;
    ct_cuda_event_record(b, NULL);
    ct_cuda_event_synchronize(b);
    float ms = 0;
    ct_cuda_event_elapsed_ms(a, b, &ms);
    ct_cuda_event_destroy(a);
    ct_cuda_event_destroy(b);
    return (double)ms / iters;
}

typedef struct {
    ct_tensor *a, *b, *out;
    int op; /* 0 copy, 1 add, 2 mul, 3 mm, 4 sum, 5 softmax along dim 1 */
} job;

static bool run_job(void *ctx) {
    job *j = ctx;
    ct_scope_begin();
    ct_tensor *r = NULL;
    switch (j->op) {
    case 0: r = ct_copy_(j->out, j->a); break;
    case 1: r = ct_add_out(j->a, j->b, j->out); break;
    case 2: r = ct_mul_out(j->a, j->b, j->out); break;
    case 3: r = ct_mm_out(j->a, j->b, j->out); break;
    case 4: r = ct_sum(j->a, NULL, 0, false, CT_DTYPE_UNDEFINED); break;
    default: r = ct_softmax_out(j->a, 1, CT_DTYPE_UNDEFINED, j->out); break;
    }
    ct_scope_end();
    return r != NULL;
}

static int bench_elementwise(int64_t n, const char *label) {
    ct_scope_begin();
    ct_manual_seed(0);
    job j = {ct_rand(&n, 1, CT_F32, CT_CUDA(0)), ct_rand(&n, 1, CT_F32, CT_CUDA(0)), ct_empty(&n, 1, CT_F32, CT_CUDA(0)),
             0};
    int rc = check(j.a && j.b && j.out, "allocating the operands");
    int iters = n > (1 << 26) ? 20 : 100;
    double bytes = 4.0 * (double)n;
    if (!rc) {
        double copy = time_ms(run_job, &j, 3, iters);
        j.op = 1;
        double add = time_ms(run_job, &j, 3, iters);
        j.op = 2;
        double mul = time_ms(run_job, &j, 3, iters);
        j.op = 4;
        double sum = time_ms(run_job, &j, 3, iters);
        rc = check(copy > 0 && add > 0 && mul > 0 && sum > 0, "timing");
        if (!rc) {
            double cbw = 2 * bytes / (copy * 1e6), abw = 3 * bytes / (add * 1e6), mbw = 3 * bytes / (mul * 1e6);
            printf("copy_f32_%s %.1f GB/s\n", label, cbw);
            printf("add_f32_%s %.1f GB/s\n", label, abw);
            printf("mul_f32_%s %.1f GB/s\n", label, mbw);
            printf("add_f32_%s_vs_copy %.3f ratio\n", label, abw / cbw);
            printf("mul_f32_%s_vs_copy %.3f ratio\n", label, mbw / cbw);
            printf("sum_f32_%s %.1f GB/s\n", label, bytes / (sum * 1e6));
            printf("sum_f32_%s_vs_copy %.3f ratio\n", label, bytes / (sum * 1e6) / cbw);
        }
    }
    ct_scope_end();
    return rc;
}

/* softmax over the rows of a 4096 x 4096 float32 matrix: one read and one write. */
static int bench_softmax(void) {
    ct_scope_begin();
    ct_manual_seed(2);
    job j = {ct_randn(CT_SHAPE(4096, 4096), CT_F32, CT_CUDA(0)), NULL, ct_empty(CT_SHAPE(4096, 4096), CT_F32, CT_CUDA(0)),
             5};
    int rc = check(j.a && j.out, "allocating the softmax operands");
    if (!rc) {
        double ms = time_ms(run_job, &j, 3, 50);
        rc = check(ms > 0, "softmax timing");
        if (!rc)
            printf("softmax_f32_4096x4096 %.1f GB/s\n", 2.0 * 4.0 * 4096 * 4096 / (ms * 1e6));
    }
    ct_scope_end();
    return rc;
}

static int bench_matmul(int64_t n) {
    ct_scope_begin();
    ct_manual_seed(1);
    int64_t shape[2] = {n, n};
    job j = {ct_randn(shape, 2, CT_BF16, CT_CUDA(0)), ct_randn(shape, 2, CT_BF16, CT_CUDA(0)),
             ct_empty(shape, 2, CT_BF16, CT_CUDA(0)), 3};
    int rc = check(j.a && j.b && j.out, "allocating the matrices");
    if (!rc) {
        double ms = time_ms(run_job, &j, 3, n >= 8192 ? 10 : 30);
        rc = check(ms > 0, "matmul timing");
        if (!rc)
            printf("mm_bf16_%lld %.1f TFLOP/s\n", (long long)n, 2.0 * (double)n * (double)n * (double)n / (ms * 1e9));
    }
    ct_scope_end();
    return rc;
}

/* Host time per launched op on one-element tensors: the dispatcher, the iterator and
 * the launch, not the kernel (the GPU runs them far faster than they are issued). */
static int bench_launch(void) {
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(1), CT_F32, CT_CUDA(0)), *b = ct_ones(CT_SHAPE(1), CT_F32, CT_CUDA(0));
    ct_tensor *out = ct_empty(CT_SHAPE(1), CT_F32, CT_CUDA(0));
    int rc = check(a && b && out, "allocating tiny tensors");
    const int iters = 20000;
    if (!rc) {
        for (int i = 0; i < 1000; i++) {
            ct_scope_begin();
            ct_add_out(a, b, out);
            ct_add(a, b);
            ct_scope_end();
        }
        ct_cuda_synchronize(0);
        double t0 = now_s();
        for (int i = 0; i < iters; i++) {
            ct_scope_begin();
            ct_add_out(a, b, out);
            ct_scope_end();
        }
        double t1 = now_s();
        ct_cuda_synchronize(0);
        for (int i = 0; i < iters; i++) {
            ct_scope_begin();
            ct_add(a, b);
            ct_scope_end();
        }
        double t2 = now_s();
        ct_cuda_synchronize(0);
        printf("launch_add_out_tiny %.2f us\n", (t1 - t0) * 1e6 / iters);
        printf("launch_add_tiny %.2f us\n", (t2 - t1) * 1e6 / iters);
    }
    ct_scope_end();
    return rc;
}

/* Attention at GPT-2 124M's shape (B 32, H 12, T 1024, D 64, causal, bfloat16): the
 * flash op (forward; forward and backward) against the math path (the attention op
 * that holds the (B, H, T, T) probabilities). FLOPs as FlashAttention's papers count
 * them: 4 B H T^2 D / 2 for the causal forward, 2.5 times that for the backward. */
typedef struct {
    ct_tensor *q, *k, *v, *go;
    bool flash, backward;
} attn_job;

static bool run_attention(void *ctx) {
    attn_job *j = ctx;
    ct_scope_begin();
    bool ok;
    if (j->flash) {
        ct_tensor *o, *l, *a, *b, *c;
        ok = ct_flash_attention_forward(j->q, j->k, j->v, true, NULL, &o, &l) == CT_OK;
        if (ok && j->backward)
            ok = ct_flash_attention_backward(j->go, j->q, j->k, j->v, o, l, true, NULL, &a, &b, &c) == CT_OK;
    } else {
        ct_tensor *a, *b, *c;
        ok = ct_fused_scaled_dot_product_attention(j->q, j->k, j->v, NULL, true, NULL) != NULL;
        if (ok && j->backward)
            ok = ct_scaled_dot_product_attention_backward(j->go, j->q, j->k, j->v, NULL, true, NULL, &a, &b, &c) ==
                 CT_OK;
    }
    ct_scope_end();
    return ok;
}

static int bench_attention(void) {
    ct_scope_begin();
    ct_manual_seed(3);
    int64_t shape[4] = {32, 12, 1024, 64};
    attn_job j = {ct_randn(shape, 4, CT_BF16, CT_CUDA(0)), ct_randn(shape, 4, CT_BF16, CT_CUDA(0)),
                  ct_randn(shape, 4, CT_BF16, CT_CUDA(0)), ct_randn(shape, 4, CT_BF16, CT_CUDA(0)), true, false};
    int rc = check(j.q && j.k && j.v && j.go, "allocating the attention operands");
    double fwd_flop = 4.0 * 32 * 12 * 1024.0 * 1024.0 * 64 / 2;
    for (int m = 0; m < 4 && !rc; m++) {
        j.flash = m < 2;
        j.backward = m % 2 == 1;
        bool was = ct_backends_cuda_flash_sdp_enabled();
        ct_backends_cuda_enable_flash_sdp(j.flash);
        double ms = time_ms(run_attention, &j, 2, j.flash ? 20 : 5);
        ct_backends_cuda_enable_flash_sdp(was);
        rc = check(ms > 0, "attention timing");
        if (rc)
            break;
        double flop = fwd_flop * (j.backward ? 3.5 : 1.0);
        const char *name = j.flash ? (j.backward ? "flash_attn_fwd_bwd" : "flash_attn_fwd")
                                   : (j.backward ? "math_attn_fwd_bwd" : "math_attn_fwd");
        printf("%s_bf16_b32h12t1024d64_causal %.3f ms\n", name, ms);
        printf("%s_bf16_b32h12t1024d64_causal %.1f TFLOP/s\n", name, flop / (ms * 1e9));
    }
    ct_scope_end();
    return rc;
}

int main(int argc, char **argv) {
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    bool attention_only = argc > 1 && strcmp(argv[1], "--attention") == 0;
    if (!ct_cuda_is_available()) {
        printf("# cuda_ops: no CUDA device (or a build without CUDA); nothing measured\n");
        return 0;
    }
    ct_cuda_device_properties p;
    if (ct_cuda_get_device_properties(0, &p) == CT_OK)
        printf("# device: %s (sm_%d%d, %.1f GiB)\n", p.name, p.major, p.minor, (double)p.total_memory / (1 << 30));
    int rc = 0;
    if (attention_only)
        return bench_attention();
    rc |= bench_elementwise((int64_t)1 << 24, "16M");
    if (!quick)
        rc |= bench_elementwise((int64_t)1 << 28, "256M");
    rc |= bench_softmax();
    rc |= bench_matmul(4096);
    if (!quick)
        rc |= bench_matmul(8192);
    rc |= bench_launch();
    rc |= bench_attention();
    return rc;
}
