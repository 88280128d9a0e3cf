/* GPU benchmark: elementwise bandwidth against a device-to-device copy, bf16 matrix
 * products, the host cost of launching an op, and the fused nn kernels: layer_norm
 * forward/backward (against the two-pass kernels, CT_CUDA_LAYER_NORM_TWO_PASS), the
 * fused cross_entropy (against log_softmax + nll_loss) and embedding's backward
 * (against index_add's atomics), and the gradient kernels of a GPT-2 step (column sums,
 * gelu's backward, an add into a slice). Prints "name value unit" lines
 * (bench/torch_cuda_peer.py prints the same names for PyTorch). Without a GPU it says
 * so and exits 0.
 *
 *   cuda_ops [--quick | --attention | --nn]   (--quick: 16M elementwise and 4096 matmul only;
 *                                            --attention: the attention cases only;
 *                                            --nn: the fused nn kernels only) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctorch.h"
#include "ctorch/nn.h"

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

/* Attention at GPT-2 124M's shape (B 32, H 12, T 1024, D 64, causal, bfloat16) and the
 * char model's (B 64, H 6, T 256): the flash op (forward; forward and backward), with
 * dropout 0.1 (Note [Flash attention dropout]) and without, and at GPT-2's shape the
 * math path (the attention op that holds the (B, H, T, T) probabilities). FLOPs as
 * FlashAttention's papers count them: 4 B H T^2 D / 2 for the causal forward, 2.5
 * times that for the backward (dropout's draws not counted). */
typedef struct {
    ct_tensor *q, *k, *v, *go;
    bool flash, backward;
    double dropout;
} attn_job;

static bool run_attention(void *ctx) {
    attn_job *j = ctx;
    ct_scope_begin();
    bool ok;
    if (j->flash) {
        ct_tensor *o, *l, *r, *a, *b, *c;
        ok = ct_flash_attention_forward_dropout(j->q, j->k, j->v, true, NULL, j->dropout, &o, &l, &r) == CT_OK;
        if (ok && j->backward)
            ok = ct_flash_attention_backward_dropout(j->go, j->q, j->k, j->v, o, l, r, true, NULL, j->dropout, &a, &b,
                                                     &c) == CT_OK;
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

/* ------------------------------------------------------------------ fused nn kernels */

typedef struct {
    ct_tensor *x, *w, *b, *gy, *t, *idx;
    int64_t n;
    int op; /* 0 layer_norm, 1 layer_norm_backward, 2 cross_entropy fused fwd+bwd,
               3 log_softmax + nll_loss fwd+bwd, 4 embedding_backward, 5 index_add */
} nn_job;

static bool run_nn(void *ctx) {
    nn_job *j = ctx;
    ct_scope_begin();
    bool ok = false;
    int64_t c = ct_tensor_shape(j->x)[ct_tensor_dim(j->x) - 1];
    switch (j->op) {
    case 0: ok = ct_layer_norm(j->x, &c, 1, j->w, j->b, 1e-5) != NULL; break;
    case 1: {
        ct_tensor *gx, *gw, *gb;
        ok = ct_layer_norm_backward(j->gy, j->x, &c, 1, j->w, j->b, 1e-5, &gx, &gw, &gb) == CT_OK;
        break;
    }
    case 2:
    case 3: {
        ct_tensor_set_grad(j->x, NULL);
        ct_tensor *loss = j->op == 2 ? ct_cross_entropy(j->x, j->t, NULL, CT_REDUCTION_MEAN, -100, 0.0)
                                     : ct_nll_loss(ct_log_softmax(j->x, 1, CT_DTYPE_UNDEFINED), j->t, NULL,
                                                   CT_REDUCTION_MEAN, -100);
        ok = loss && ct_backward(loss, NULL, false, false) == CT_OK;
        break;
    }
    case 4: ok = ct_embedding_backward(j->gy, j->idx, j->n, CT_NO_PADDING_IDX) != NULL; break;
    default: {
        int64_t shape[2] = {j->n, c};
        ct_tensor *z = ct_zeros(shape, 2, ct_tensor_dtype(j->gy), CT_CUDA(0));
        ok = z && ct_index_add(z, 0, j->idx, j->gy, ct_scalar_int(1)) != NULL;
        break;
    }
    }
    ct_scope_end();
    return ok;
}

static int bench_attention_at(int64_t b, int64_t h, int64_t t, const char *label, bool math) {
    ct_scope_begin();
    ct_manual_seed(3);
    int64_t shape[4] = {b, h, t, 64};
    attn_job j = {ct_randn(shape, 4, CT_BF16, CT_CUDA(0)), ct_randn(shape, 4, CT_BF16, CT_CUDA(0)),
                  ct_randn(shape, 4, CT_BF16, CT_CUDA(0)), ct_randn(shape, 4, CT_BF16, CT_CUDA(0)), true, false, 0.0};
    int rc = check(j.q && j.k && j.v && j.go, "allocating the attention operands");
    double fwd_flop = 4.0 * (double)(b * h) * (double)t * (double)t * 64 / 2;
    for (int m = 0; m < 6 && !rc; m++) {
        j.flash = m < 4;
        j.backward = m % 2 == 1;
        j.dropout = m == 2 || m == 3 ? 0.1 : 0.0;
        if (!j.flash && !math)
            break;
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
        const char *tag = j.dropout > 0 ? "_p0.1" : "";
        printf("%s%s_bf16_%s_causal %.3f ms\n", name, tag, label, ms);
        printf("%s%s_bf16_%s_causal %.1f TFLOP/s\n", name, tag, label, flop / (ms * 1e9));
    }
    ct_scope_end();
    return rc;
}

static int bench_attention(void) {
    return bench_attention_at(32, 12, 1024, "b32h12t1024d64", true) |
           bench_attention_at(64, 6, 256, "b64h6t256d64", false);
}

static int bench_layer_norm(int64_t rows, int64_t cols, ct_dtype dt, const char *label) {
    ct_scope_begin();
    ct_manual_seed(3);
    nn_job j = {ct_randn(CT_SHAPE(rows, cols), dt, CT_CUDA(0)), ct_randn(CT_SHAPE(cols), dt, CT_CUDA(0)),
                ct_randn(CT_SHAPE(cols), dt, CT_CUDA(0)), ct_randn(CT_SHAPE(rows, cols), dt, CT_CUDA(0)), NULL, NULL,
                0, 0};
    int rc = check(j.x && j.w && j.b && j.gy, "allocating the layer_norm operands");
    double bytes = (double)rows * (double)cols * (double)ct_dtype_size(dt);
    for (int legacy = 0; legacy < 2 && !rc; legacy++) {
        if (legacy)
            setenv("CT_CUDA_LAYER_NORM_TWO_PASS", "1", 1);
        j.op = 0;
        double fwd = time_ms(run_nn, &j, 3, 50);
        j.op = 1;
        double bwd = time_ms(run_nn, &j, 3, 50);
        unsetenv("CT_CUDA_LAYER_NORM_TWO_PASS");
        rc = check(fwd > 0 && bwd > 0, "layer_norm timing");
        if (!rc) {
            /* the floor: x read and y written; x and grad_output read and grad_input written */
            printf("layer_norm_fwd_%s%s %.1f GB/s (%.3f ms)\n", label, legacy ? "_two_pass" : "", 2 * bytes / (fwd * 1e6),
                   fwd);
            printf("layer_norm_bwd_%s%s %.1f GB/s (%.3f ms)\n", label, legacy ? "_two_pass" : "", 3 * bytes / (bwd * 1e6),
                   bwd);
        }
    }
    ct_scope_end();
    return rc;
}

/* Forward and backward of cross_entropy over (n, 50304) bf16 logits (mean), fused and
 * as log_softmax + nll_loss. The fused floor: the logits read twice, the gradient
 * written once. */
static int bench_cross_entropy(int64_t n) {
    ct_scope_begin();
    ct_manual_seed(4);
    const int64_t v = 50304;
    nn_job j = {ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(n, v), CT_BF16, CT_CUDA(0)), true), NULL, NULL, NULL,
                ct_randint(0, v, CT_SHAPE(n), CT_I64, CT_CUDA(0)), NULL, 0, 2};
    int rc = check(j.x && j.t, "allocating the logits");
    double bytes = (double)n * (double)v * 2;
    if (!rc) {
        double fused = time_ms(run_nn, &j, 2, 10);
        j.op = 3;
        double two = time_ms(run_nn, &j, 2, 10);
        rc = check(fused > 0 && two > 0, "cross_entropy timing");
        if (!rc) {
            printf("cross_entropy_fused_bf16_%lldx%lld %.3f ms (%.1f GB/s of 3 passes)\n", (long long)n, (long long)v,
                   fused, 3 * bytes / (fused * 1e6));
            printf("cross_entropy_log_softmax_nll_bf16_%lldx%lld %.3f ms\n", (long long)n, (long long)v, two);
        }
    }
    ct_scope_end();
    return rc;
}

/* embedding's backward for GPT-2's token table: (n, 768) gradients into 50304 rows. */
static int bench_embedding_backward(int64_t n) {
    ct_scope_begin();
    ct_manual_seed(5);
    nn_job j = {NULL, NULL, NULL, ct_randn(CT_SHAPE(n, 768), CT_F32, CT_CUDA(0)), NULL,
                ct_randint(0, 50304, CT_SHAPE(n), CT_I64, CT_CUDA(0)), 50304, 4};
    j.x = j.gy;
    int rc = check(j.gy && j.idx, "allocating the embedding operands");
    if (!rc) {
        double sorted = time_ms(run_nn, &j, 3, 20);
        j.op = 5;
        double atomics = time_ms(run_nn, &j, 3, 20);
        rc = check(sorted > 0 && atomics > 0, "embedding timing");
        if (!rc) {
            printf("embedding_backward_f32_%lldx768 %.3f ms\n", (long long)n, sorted);
            printf("embedding_backward_index_add_f32_%lldx768 %.3f ms\n", (long long)n, atomics);
        }
    }
    ct_scope_end();
    return rc;
}

/* The gradient kernels of a GPT-2 bf16 step (B32 T1024): the bias gradients as column
 * sums of (32768, n), gelu's backward over (32768, 3072), and a q/k/v gradient added
 * into its third of the (32768, 2304) qkv gradient. GB/s of the bytes each must move. */
typedef struct {
    ct_tensor *a, *b, *c;
    int op; /* 0 column sum, 1 gelu backward, 2 slice add */
} grad_job;

static bool run_grad(void *ctx) {
    grad_job *j = ctx;
    ct_scope_begin();
    bool ok;
    int64_t n = ct_tensor_shape(j->b)[1];
    if (j->op == 0)
        ok = ct_sum(j->a, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED) != NULL;
    else if (j->op == 1)
        ok = ct_gelu_backward(j->a, j->b, CT_GELU_APPROXIMATE_TANH) != NULL;
    else
        ok = ct_add_(ct_narrow(j->c, 1, n, n), j->b) != NULL;
    ct_scope_end();
    return ok;
}

static int bench_grad_kernels(void) {
    ct_scope_begin();
    ct_manual_seed(6);
    const int64_t rows = 32768, cols[3] = {768, 2304, 3072};
    int rc = 0;
    for (int k = 0; k < 3 && !rc; k++) {
        grad_job j = {ct_randn(CT_SHAPE(rows, cols[k]), CT_BF16, CT_CUDA(0)), NULL, NULL, 0};
        j.b = j.a;
        double ms = j.a ? time_ms(run_grad, &j, 3, 30) : -1;
        rc = check(ms > 0, "column sum timing");
        if (!rc)
            printf("column_sum_bf16_%lldx%lld %.1f GB/s (%.3f ms)\n", (long long)rows, (long long)cols[k],
                   (double)rows * (double)cols[k] * 2 / (ms * 1e6), ms);
    }
    grad_job g = {ct_randn(CT_SHAPE(rows, 3072), CT_BF16, CT_CUDA(0)), ct_randn(CT_SHAPE(rows, 3072), CT_BF16, CT_CUDA(0)),
                  NULL, 1};
    double ms = !rc && g.a && g.b ? time_ms(run_grad, &g, 3, 30) : -1;
    rc |= check(ms > 0, "gelu_backward timing");
    if (!rc)
        printf("gelu_backward_bf16_%lldx3072 %.1f GB/s (%.3f ms)\n", (long long)rows, 3.0 * rows * 3072 * 2 / (ms * 1e6),
               ms);
    grad_job s = {NULL, ct_randn(CT_SHAPE(rows, 768), CT_BF16, CT_CUDA(0)), ct_zeros(CT_SHAPE(rows, 2304), CT_BF16, CT_CUDA(0)),
                  2};
    ms = !rc && s.b && s.c ? time_ms(run_grad, &s, 3, 30) : -1;
    rc |= check(ms > 0, "slice add timing");
    if (!rc)
        printf("slice_add_bf16_%lldx768_of_2304 %.1f GB/s (%.3f ms)\n", (long long)rows, 3.0 * rows * 768 * 2 / (ms * 1e6),
               ms);
    ct_scope_end();
    return rc;
}

static int bench_nn(void) {
    int rc = 0;
    rc |= bench_grad_kernels();
    rc |= bench_layer_norm(32768, 768, CT_F32, "f32_32768x768");
    rc |= bench_layer_norm(32768, 768, CT_BF16, "bf16_32768x768");
    rc |= bench_cross_entropy(8192);
    rc |= bench_embedding_backward(32768);
    return rc;
}

int main(int argc, char **argv) {
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    bool attention_only = argc > 1 && strcmp(argv[1], "--attention") == 0;
    bool nn_only = argc > 1 && strcmp(argv[1], "--nn") == 0;
    if (!ct_cuda_is_available()) {
        printf("# cuda_ops: no CUDA device (or a build without CUDA); nothing measured\n");
        return 0;
    }
    ct_cuda_device_properties p;
    if (ct_cuda_get_device_properties(0, &p) == CT_OK)
        printf("# device: %s (sm_%d%d, %.1f GiB)\n", p.name, p.major, p.minor, (double)p.total_memory / (1 << 30));
    if (nn_only)
        return bench_elementwise((int64_t)1 << 28, "256M") | bench_nn();
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
    if (!quick)
        rc |= bench_nn();
    return rc;
}
