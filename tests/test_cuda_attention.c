/* Flash attention on CUDA (Note [Flash attention kernels] in src/cuda/flash_attn.cu):
 * scaled_dot_product_attention's output and its three gradients through the flash
 * path against the math path in float32 on the GPU, causal and not, over lengths,
 * head dims and batch x heads; strided (transposed) inputs read in place; the routing
 * (which inputs take the flash op, the switch); the allocator's peak staying far
 * below the (B, H, T, T) scores; the ops' argument errors. Skipped (exit 77) without a
 * GPU. */
#include <string.h>

#include "cuda_testutil.h"
#include "ctorch/nn.h"

#define CUDA0 CT_CUDA(0)

/* max |a - b| <= tol * max(max |b|, 1e-2), with a and b brought to float64 on the CPU. */
static void close_rel(const ct_tensor *a, const ct_tensor *b, double tol, const char *what, int64_t t, int64_t d,
                      bool causal, ct_dtype dt) {
    ct_scope_begin();
    ct_tensor *x = ct_contiguous(ct_to_dtype(ct_to_device(a, CT_CPU), CT_F64));
    ct_tensor *y = ct_contiguous(ct_to_dtype(ct_to_device(b, CT_CPU), CT_F64));
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(ct_tensor_numel(x), ct_tensor_numel(y));
    const double *px = ct_tensor_data(x), *py = ct_tensor_data(y);
    double err = 0, mx = 0;
    for (int64_t i = 0; i < ct_tensor_numel(y); i++) {
        double e = fabs(px[i] - py[i]);
        err = e > err || isnan(e) ? e : err;
        mx = fabs(py[i]) > mx ? fabs(py[i]) : mx;
    }
    double lim = tol * (mx > 1e-2 ? mx : 1e-2);
    if (!(err <= lim))
        fail_msg("%s (%s, T=%lld, D=%lld, causal=%d): max error %.3g over the limit %.3g (max |ref| %.3g)", what,
                 ct_dtype_name(dt), (long long)t, (long long)d, causal, err, lim, mx);
    ct_scope_end();
}

typedef struct {
    ct_tensor *y, *gq, *gk, *gv;
} attn_result;

/* Forward and backward of scaled_dot_product_attention through autograd on
 * q (B, H, T, D) etc. (leaves on the GPU, copies of the given tensors in dtype dt). */
static attn_result run_attention(const ct_tensor *q0, const ct_tensor *k0, const ct_tensor *v0, const ct_tensor *go,
                                 ct_dtype dt, bool causal) {
    attn_result r = {0};
    ct_tensor *q = ct_tensor_set_requires_grad(ct_to_device(ct_to_dtype(q0, dt), CUDA0), true);
    ct_tensor *k = ct_tensor_set_requires_grad(ct_to_device(ct_to_dtype(k0, dt), CUDA0), true);
    ct_tensor *v = ct_tensor_set_requires_grad(ct_to_device(ct_to_dtype(v0, dt), CUDA0), true);
    assert_true(q && k && v);
    r.y = ct_scaled_dot_product_attention(q, k, v, NULL, 0.0, causal, NULL);
    assert_non_null(r.y);
    assert_int_equal(ct_backward(r.y, ct_to_device(ct_to_dtype(go, dt), CUDA0), false, false), CT_OK);
    r.gq = ct_tensor_grad(q);
    r.gk = ct_tensor_grad(k);
    r.gv = ct_tensor_grad(v);
    assert_true(r.gq && r.gk && r.gv);
    return r;
}

static void check_case(int64_t b, int64_t h, int64_t t, int64_t d, bool causal, ct_dtype dt, uint64_t seed) {
    ct_scope_begin();
    int64_t shape[4] = {b, h, t, d};
    ct_tensor *q = ct_test_values(shape, 4, CT_F32, -3, 3, seed);
    ct_tensor *k = ct_test_values(shape, 4, CT_F32, -3, 3, seed + 1);
    ct_tensor *v = ct_test_values(shape, 4, CT_F32, -1, 1, seed + 2);
    ct_tensor *go = ct_test_values(shape, 4, CT_F32, -1, 1, seed + 3);
    ct_backends_cuda_enable_flash_sdp(false);
    attn_result ref = run_attention(q, k, v, go, CT_F32, causal);
    ct_backends_cuda_enable_flash_sdp(true);
    attn_result fl = run_attention(q, k, v, go, dt, causal);
    const char *fn = ct_tensor_grad_fn_name(fl.y);
    if (!fn || !strstr(fn, "FlashAttention"))
        fail_msg("the %s case (T=%lld, D=%lld) did not take flash attention (grad_fn %s)", ct_dtype_name(dt),
                 (long long)t, (long long)d, fn ? fn : "none");
    double tol = dt == CT_BF16 ? 4e-2 : 1e-2;
    close_rel(fl.y, ref.y, tol, "output", t, d, causal, dt);
    close_rel(fl.gq, ref.gq, tol, "grad query", t, d, causal, dt);
    close_rel(fl.gk, ref.gk, tol, "grad key", t, d, causal, dt);
    close_rel(fl.gv, ref.gv, tol, "grad value", t, d, causal, dt);
    ct_scope_end();
}

static void test_flash_vs_math(void **state) {
    (void)state;
    const int64_t ts[] = {1, 17, 64, 255, 1024};
    const int64_t ds[] = {64, 128};
    const ct_dtype dts[] = {CT_BF16, CT_F16};
    uint64_t seed = 1;
    for (int di = 0; di < 2; di++)
        for (int ti = 0; ti < 5; ti++)
            for (int c = 0; c < 2; c++)
                for (int x = 0; x < 2; x++) {
                    /* several B x H; fewer at T = 1024 (the float32 reference holds T x T) */
                    int64_t b = ts[ti] >= 1024 ? 1 : 2, h = ts[ti] >= 1024 ? 2 : 3;
                    check_case(b, h, ts[ti], ds[di], c != 0, dts[x], seed += 4);
                }
    /* one B x H above the others, and head dims that are padded (not 64 or 128) */
    check_case(4, 5, 100, 64, true, CT_BF16, 901);
    check_case(1, 2, 33, 40, false, CT_F16, 911);
    check_case(2, 1, 70, 72, true, CT_BF16, 921);
    check_case(1, 1, 130, 8, true, CT_F16, 931);
}

/* q, k, v made as (B, T, H, D) and transposed to (B, H, T, D), as a GPT's projection
 * gives them: the flash path reads them in place and agrees with contiguous copies. */
static void test_strided_inputs(void **state) {
    (void)state;
    ct_scope_begin();
    int64_t bthd[4] = {2, 77, 3, 64};
    ct_tensor *qs = ct_transpose(ct_to_device(ct_test_values(bthd, 4, CT_BF16, -3, 3, 41), CUDA0), 1, 2);
    ct_tensor *ks = ct_transpose(ct_to_device(ct_test_values(bthd, 4, CT_BF16, -3, 3, 42), CUDA0), 1, 2);
    ct_tensor *vs = ct_transpose(ct_to_device(ct_test_values(bthd, 4, CT_BF16, -1, 1, 43), CUDA0), 1, 2);
    assert_false(ct_tensor_is_contiguous(qs));
    for (int causal = 0; causal < 2; causal++) {
        ct_tensor *o1, *l1, *o2, *l2;
        assert_int_equal(ct_flash_attention_forward(qs, ks, vs, causal, NULL, &o1, &l1), CT_OK);
        assert_int_equal(ct_flash_attention_forward(ct_contiguous(qs), ct_contiguous(ks), ct_contiguous(vs), causal,
                                                    NULL, &o2, &l2),
                         CT_OK);
        close_rel(o1, o2, 0, "strided output", 77, 64, causal, CT_BF16);
        close_rel(l1, l2, 0, "strided logsumexp", 77, 64, causal, CT_BF16);
        ct_tensor *go = ct_transpose(ct_to_device(ct_test_values(bthd, 4, CT_BF16, -1, 1, 44), CUDA0), 1, 2);
        ct_tensor *a[3], *c[3];
        assert_int_equal(ct_flash_attention_backward(go, qs, ks, vs, o1, l1, causal, NULL, &a[0], &a[1], &a[2]), CT_OK);
        assert_int_equal(ct_flash_attention_backward(ct_contiguous(go), ct_contiguous(qs), ct_contiguous(ks),
                                                     ct_contiguous(vs), o2, l2, causal, NULL, &c[0], &c[1], &c[2]),
                         CT_OK);
        /* dq accumulates with atomics in varying order: equal up to float32 rounding */
        for (int i = 0; i < 3; i++)
            close_rel(a[i], c[i], 1e-2, "strided gradient", 77, 64, causal, CT_BF16);
        /* Note [Flash attention output layout]: the output and the gradients keep the
         * inputs' (B, T, H, D) memory, so turning them back into rows is a view; from
         * contiguous inputs they are contiguous */
        const ct_tensor *outs[4] = {o1, a[0], a[1], a[2]};
        for (int i = 0; i < 4; i++) {
            assert_false(ct_tensor_is_contiguous(outs[i]));
            assert_true(ct_tensor_is_contiguous(ct_transpose(outs[i], 1, 2)));
        }
        assert_true(ct_tensor_is_contiguous(o2) && ct_tensor_is_contiguous(c[0]) && ct_tensor_is_contiguous(c[2]));
    }
    ct_scope_end();
}

/* A GPT block's attention: q, k and v are thirds of one (B, T, 3C) projection viewed as
 * heads. The projection's gradient through flash attention agrees with the math path's
 * (float32 inputs, which take it), and the output comes back as (B, T, C) rows. */
static void test_projection_gradient(void **state) {
    (void)state;
    ct_scope_begin();
    const int64_t b = 2, t = 50, h = 3, d = 64, c = h * d;
    ct_tensor *x = ct_test_values(CT_SHAPE(b, t, 3 * c), CT_F32, -1, 1, 61);
    ct_tensor *gy = ct_test_values(CT_SHAPE(b, t, c), CT_F32, -1, 1, 62);
    ct_tensor *grads[2], *ys[2];
    for (int flash = 0; flash < 2; flash++) {
        ct_tensor *p = ct_tensor_set_requires_grad(
            flash ? ct_to_dtype(ct_to_device(x, CUDA0), CT_BF16) : ct_to_device(x, CUDA0), true);
        ct_tensor *heads[3];
        for (int i = 0; i < 3; i++)
            heads[i] = ct_transpose(ct_view(ct_narrow(p, 2, i * c, c), CT_SHAPE(b, t, h, d)), 1, 2);
        ct_tensor *y = ct_scaled_dot_product_attention(heads[0], heads[1], heads[2], NULL, 0.0, true, NULL);
        assert_non_null(y);
        ct_tensor *rows = ct_view(ct_transpose(y, 1, 2), CT_SHAPE(b, t, c)); /* a view: no reshape copy */
        if (flash)
            assert_non_null(rows);
        else
            rows = ct_reshape(ct_transpose(y, 1, 2), CT_SHAPE(b, t, c));
        ys[flash] = ct_to_dtype(rows, CT_F32);
        assert_int_equal(ct_backward(rows, ct_to_dtype(ct_to_device(gy, CUDA0), ct_tensor_dtype(rows)), false, false),
                         CT_OK);
        grads[flash] = ct_to_dtype(ct_tensor_grad(p), CT_F32);
        assert_non_null(grads[flash]);
    }
    CT_ASSERT_CLOSE(ys[1], ct_to_device(ys[0], CT_CPU), 3e-2, 3e-2, "projection attention output");
    CT_ASSERT_CLOSE(grads[1], ct_to_device(grads[0], CT_CPU), 5e-2, 5e-2, "projection gradient");
    ct_scope_end();
}

/* The CUDA flash op against the CPU's reference kernel of the same op. */
static void test_flash_vs_cpu_op(void **state) {
    (void)state;
    ct_scope_begin();
    int64_t shape[4] = {2, 2, 45, 64};
    ct_tensor *q = ct_test_values(shape, 4, CT_F16, -3, 3, 51), *k = ct_test_values(shape, 4, CT_F16, -3, 3, 52);
    ct_tensor *v = ct_test_values(shape, 4, CT_F16, -1, 1, 53), *go = ct_test_values(shape, 4, CT_F16, -1, 1, 54);
    for (int causal = 0; causal < 2; causal++) {
        ct_tensor *o, *l, *go_, *gl;
        double sc = 0.2;
        assert_int_equal(ct_flash_attention_forward(q, k, v, causal, &sc, &o, &l), CT_OK);
        assert_int_equal(ct_flash_attention_forward(ct_to_device(q, CUDA0), ct_to_device(k, CUDA0),
                                                    ct_to_device(v, CUDA0), causal, &sc, &go_, &gl),
                         CT_OK);
        assert_int_equal(ct_tensor_dtype(gl), CT_F32);
        close_rel(go_, o, 1e-2, "output vs CPU op", 45, 64, causal, CT_F16);
        close_rel(gl, l, 1e-3, "logsumexp vs CPU op", 45, 64, causal, CT_F16);
        ct_tensor *c[3], *gg[3];
        assert_int_equal(ct_flash_attention_backward(go, q, k, v, o, l, causal, &sc, &c[0], &c[1], &c[2]), CT_OK);
        assert_int_equal(ct_flash_attention_backward(ct_to_device(go, CUDA0), ct_to_device(q, CUDA0),
                                                     ct_to_device(k, CUDA0), ct_to_device(v, CUDA0), go_, gl, causal,
                                                     &sc, &gg[0], &gg[1], &gg[2]),
                         CT_OK);
        for (int i = 0; i < 3; i++)
            close_rel(gg[i], c[i], 2e-2, "gradient vs CPU op", 45, 64, causal, CT_F16);
    }
    ct_scope_end();
}

/* Note [Flash attention dropout]: the CUDA op with dropout against the CPU's reference
 * op from the same generator state (the same mask bit for bit: Note [Flash attention
 * dropout draws]), the generator left where the CPU op leaves it; and
 * scaled_dot_product_attention with dropout, which takes the op, against the formula
 * with the op's mask in float64. S = 45 is odd; 200 keys take four tiles. */
static void test_flash_dropout(void **state) {
    (void)state;
    ct_scope_begin();
    const int64_t lens[2] = {45, 200};
    for (int li = 0; li < 2; li++) {
        int64_t shape[4] = {2, 2, lens[li], 64};
        ct_tensor *q = ct_test_values(shape, 4, CT_BF16, -3, 3, 81), *k = ct_test_values(shape, 4, CT_BF16, -3, 3, 82);
        ct_tensor *v = ct_test_values(shape, 4, CT_BF16, -1, 1, 83), *go = ct_test_values(shape, 4, CT_BF16, -1, 1, 84);
        ct_tensor *qg = ct_to_device(q, CUDA0), *kg = ct_to_device(k, CUDA0), *vg = ct_to_device(v, CUDA0);
        ct_tensor *gog = ct_to_device(go, CUDA0);
        const double p = 0.25;
        for (int causal = 0; causal < 2; causal++) {
            double sc = 0.2;
            ct_tensor *o, *l, *r, *og, *lg, *rg;
            ct_manual_seed(77);
            assert_int_equal(ct_flash_attention_forward_dropout(q, k, v, causal, &sc, p, &o, &l, &r), CT_OK);
            ct_tensor *next_cpu = ct_rand(CT_SHAPE(3), CT_F64, CT_CPU);
            ct_manual_seed(77);
            assert_int_equal(ct_flash_attention_forward_dropout(qg, kg, vg, causal, &sc, p, &og, &lg, &rg), CT_OK);
            ct_tensor *next_gpu = ct_rand(CT_SHAPE(3), CT_F64, CT_CPU);
            assert_true(ct_tensor_device(rg).type == CT_DEVICE_CUDA);
            bool same = false;
            assert_int_equal(ct_equal(ct_to_device(rg, CT_CPU), r, &same), CT_OK);
            if (!same)
                fail_msg("dropout masks of the CUDA and CPU ops differ (T=%lld, causal %d)", (long long)lens[li],
                         causal);
            assert_int_equal(ct_equal(next_cpu, next_gpu, &same), CT_OK);
            assert_true(same);
            close_rel(og, o, 1e-2, "dropout output vs CPU op", lens[li], 64, causal, CT_BF16);
            close_rel(lg, l, 1e-3, "dropout logsumexp vs CPU op", lens[li], 64, causal, CT_BF16);
            ct_tensor *c[3], *gg[3];
            assert_int_equal(
                ct_flash_attention_backward_dropout(go, q, k, v, o, l, r, causal, &sc, p, &c[0], &c[1], &c[2]), CT_OK);
            assert_int_equal(ct_flash_attention_backward_dropout(gog, qg, kg, vg, og, lg, rg, causal, &sc, p, &gg[0],
                                                                 &gg[1], &gg[2]),
                             CT_OK);
            for (int i = 0; i < 3; i++)
                close_rel(gg[i], c[i], 2e-2, "dropout gradient vs CPU op", lens[li], 64, causal, CT_BF16);

            /* scaled_dot_product_attention takes the op: the op's output bit for bit from
             * the same seed, and the formula's with that mask */
            ct_tensor *ql = ct_tensor_set_requires_grad(ct_clone(qg), true);
            ct_tensor *kl = ct_tensor_set_requires_grad(ct_clone(kg), true);
            ct_tensor *vl = ct_tensor_set_requires_grad(ct_clone(vg), true);
            ct_manual_seed(78);
            ct_tensor *y = ct_scaled_dot_product_attention(ql, kl, vl, NULL, p, causal, &sc);
            assert_non_null(y);
            assert_non_null(strstr(ct_tensor_grad_fn_name(y), "FlashAttention"));
            assert_int_equal(ct_backward(y, gog, false, false), CT_OK);
            ct_manual_seed(78);
            assert_int_equal(ct_flash_attention_forward_dropout(qg, kg, vg, causal, &sc, p, &og, &lg, &rg), CT_OK);
            assert_int_equal(ct_equal(y, og, &same), CT_OK);
            assert_true(same);
            ct_tensor *q64 = ct_tensor_set_requires_grad(ct_to_dtype(q, CT_F64), true);
            ct_tensor *k64 = ct_tensor_set_requires_grad(ct_to_dtype(k, CT_F64), true);
            ct_tensor *v64 = ct_tensor_set_requires_grad(ct_to_dtype(v, CT_F64), true);
            ct_tensor *ref = ct_test_masked_attention(q64, k64, v64, rg, causal, sc, p);
            assert_int_equal(ct_backward(ref, ct_to_dtype(go, CT_F64), false, false), CT_OK);
            close_rel(y, ref, 2e-2, "sdpa dropout vs the formula with its mask", lens[li], 64, causal, CT_BF16);
            close_rel(ct_tensor_grad(ql), ct_tensor_grad(q64), 3e-2, "sdpa dropout grad q", lens[li], 64, causal,
                      CT_BF16);
            close_rel(ct_tensor_grad(kl), ct_tensor_grad(k64), 3e-2, "sdpa dropout grad k", lens[li], 64, causal,
                      CT_BF16);
            close_rel(ct_tensor_grad(vl), ct_tensor_grad(v64), 3e-2, "sdpa dropout grad v", lens[li], 64, causal,
                      CT_BF16);
        }
    }
    ct_scope_end();
}

/* Which calls take the flash op, and the switch. */
static void test_routing(void **state) {
    (void)state;
    ct_scope_begin();
    int64_t shape[4] = {1, 2, 16, 64}, shape_d[4] = {1, 2, 16, 12};
    ct_tensor *x = ct_tensor_set_requires_grad(ct_to_device(ct_test_values(shape, 4, CT_BF16, -1, 1, 61), CUDA0), true);
    ct_tensor *x32 =
        ct_tensor_set_requires_grad(ct_to_device(ct_test_values(shape, 4, CT_F32, -1, 1, 62), CUDA0), true);
    ct_tensor *xd =
        ct_tensor_set_requires_grad(ct_to_device(ct_test_values(shape_d, 4, CT_BF16, -1, 1, 63), CUDA0), true);
    ct_tensor *mask = ct_to_device(ct_ones(CT_SHAPE(16, 16), CT_BOOL, CT_CPU), CUDA0);
    assert_true(ct_backends_cuda_flash_sdp_enabled());
    const char *fn = ct_tensor_grad_fn_name(ct_scaled_dot_product_attention(x, x, x, NULL, 0.0, true, NULL));
    assert_non_null(strstr(fn, "FlashAttention"));
    /* float32, a mask, a head dim not a multiple of 8: the math path */
    fn = ct_tensor_grad_fn_name(ct_scaled_dot_product_attention(x32, x32, x32, NULL, 0.0, true, NULL));
    assert_null(strstr(fn, "FlashAttention"));
    fn = ct_tensor_grad_fn_name(ct_scaled_dot_product_attention(x, x, x, mask, 0.0, false, NULL));
    assert_null(strstr(fn, "FlashAttention"));
    fn = ct_tensor_grad_fn_name(ct_scaled_dot_product_attention(xd, xd, xd, NULL, 0.0, false, NULL));
    assert_null(strstr(fn, "FlashAttention"));
    ct_backends_cuda_enable_flash_sdp(false);
    assert_false(ct_backends_cuda_flash_sdp_enabled());
    fn = ct_tensor_grad_fn_name(ct_scaled_dot_product_attention(x, x, x, NULL, 0.0, true, NULL));
    assert_null(strstr(fn, "FlashAttention"));
    ct_backends_cuda_enable_flash_sdp(true);
    ct_scope_end();
}

/* The flash path's memory is O(B H T D): at T = 1024 its peak stays far below the
 * (B, H, T, T) bfloat16 scores the math path holds. */
static void test_memory(void **state) {
    (void)state;
    ct_scope_begin();
    const int64_t b = 1, h = 16, t = 1024, d = 64, scores = b * h * t * t * 2;
    int64_t shape[4] = {b, h, t, d};
    ct_tensor *q = ct_to_device(ct_test_values(shape, 4, CT_BF16, -3, 3, 71), CUDA0);
    ct_tensor *k = ct_to_device(ct_test_values(shape, 4, CT_BF16, -3, 3, 72), CUDA0);
    ct_tensor *v = ct_to_device(ct_test_values(shape, 4, CT_BF16, -1, 1, 73), CUDA0);
    ct_tensor *go = ct_to_device(ct_test_values(shape, 4, CT_BF16, -1, 1, 74), CUDA0);
    assert_true(q && k && v && go);
    assert_int_equal(ct_cuda_synchronize(0), CT_OK);
    ct_tensor *o, *l, *gq, *gk, *gv;
    int64_t base = ct_memory_allocated(CUDA0);
    ct_reset_peak_memory_stats(CUDA0);
    assert_int_equal(ct_flash_attention_forward(q, k, v, true, NULL, &o, &l), CT_OK);
    int64_t fwd = ct_max_memory_allocated(CUDA0) - base;
    base = ct_memory_allocated(CUDA0);
    ct_reset_peak_memory_stats(CUDA0);
    assert_int_equal(ct_flash_attention_backward(go, q, k, v, o, l, true, NULL, &gq, &gk, &gv), CT_OK);
    int64_t bwd = ct_max_memory_allocated(CUDA0) - base;
    base = ct_memory_allocated(CUDA0);
    ct_reset_peak_memory_stats(CUDA0);
    ct_backends_cuda_enable_flash_sdp(false);
    assert_non_null(ct_scaled_dot_product_attention(q, k, v, NULL, 0.0, true, NULL));
    ct_backends_cuda_enable_flash_sdp(true);
    int64_t math = ct_max_memory_allocated(CUDA0) - base;
    printf("attention memory at B=%lld H=%lld T=%lld D=%lld: flash forward %lld bytes, flash backward %lld, "
           "math forward %lld, scores %lld\n",
           (long long)b, (long long)h, (long long)t, (long long)d, (long long)fwd, (long long)bwd, (long long)math,
           (long long)scores);
    /* forward: out + logsumexp (1/16 of the scores here); backward: three gradients and a
     * float32 dq (5/16) */
    assert_true(fwd <= scores / 8);
    assert_true(bwd <= scores / 2);
    assert_true(math >= scores);
    ct_scope_end();
}

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    int64_t shape[4] = {1, 2, 8, 64};
    ct_tensor *x = ct_to_device(ct_test_values(shape, 4, CT_BF16, -1, 1, 81), CUDA0);
    ct_tensor *x32 = ct_to_device(ct_test_values(shape, 4, CT_F32, -1, 1, 82), CUDA0);
    ct_tensor *xh = ct_to_device(ct_test_values(shape, 4, CT_F16, -1, 1, 83), CUDA0);
    ct_tensor *x3 = ct_to_device(ct_test_values(CT_SHAPE(2, 8, 64), CT_BF16, -1, 1, 84), CUDA0);
    ct_tensor *xd = ct_to_device(ct_test_values(CT_SHAPE(1, 2, 8, 12), CT_BF16, -1, 1, 85), CUDA0);
    ct_tensor *xbig = ct_to_device(ct_test_values(CT_SHAPE(1, 2, 8, 136), CT_BF16, -1, 1, 86), CUDA0);
    ct_tensor *xcpu = ct_test_values(shape, 4, CT_BF16, -1, 1, 87);
    ct_tensor *o, *l, *a, *b, *c;
    CT_ASSERT_ERR(ct_flash_attention_forward(x32, x32, x32, false, NULL, &o, &l) == CT_OK, CT_ERROR_NOT_IMPLEMENTED,
                  "float16 or bfloat16");
    CT_ASSERT_ERR(ct_flash_attention_forward(xd, xd, xd, false, NULL, &o, &l) == CT_OK, CT_ERROR_NOT_IMPLEMENTED,
                  "multiple of 8");
    CT_ASSERT_ERR(ct_flash_attention_forward(xbig, xbig, xbig, false, NULL, &o, &l) == CT_OK,
                  CT_ERROR_NOT_IMPLEMENTED, "at most 128");
    CT_ASSERT_ERR(ct_flash_attention_forward(x3, x3, x3, false, NULL, &o, &l) == CT_OK, CT_ERROR_VALUE, "4-D");
    CT_ASSERT_ERR(ct_flash_attention_forward(x, xh, x, false, NULL, &o, &l) == CT_OK, CT_ERROR_TYPE, "same dtype");
    CT_ASSERT_ERR(ct_flash_attention_forward(x, xcpu, x, false, NULL, &o, &l) == CT_OK, CT_ERROR_DEVICE, "");
    CT_ASSERT_ERR(ct_flash_attention_forward(x, x, x, false, NULL, NULL, &l) == CT_OK, CT_ERROR_NULL_ARGUMENT, "");
    assert_int_equal(ct_flash_attention_forward(x, x, x, true, NULL, &o, &l), CT_OK);
    CT_ASSERT_ERR(ct_flash_attention_backward(x, x, x, x, o, o, true, NULL, &a, &b, &c) == CT_OK, CT_ERROR_VALUE,
                  "logsumexp");
    CT_ASSERT_ERR(ct_flash_attention_backward(xh, x, x, x, o, l, true, NULL, &a, &b, &c) == CT_OK, CT_ERROR_VALUE,
                  "grad_out");
    CT_ASSERT_ERR(ct_flash_attention_backward(x, x, x, x, o, NULL, true, NULL, &a, &b, &c) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_flash_attention_backward(x, x, x, x, o, l, true, NULL, &a, NULL, &c) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "");
    /* double backward is refused, as PyTorch's flash attention */
    ct_tensor *q = ct_tensor_set_requires_grad(ct_clone(x), true);
    ct_tensor *y = ct_scaled_dot_product_attention(q, q, q, NULL, 0.0, true, NULL);
    ct_tensor *gq = NULL;
    const ct_tensor *ins[1] = {q}, *outs[1] = {y};
    const ct_tensor *gos[1] = {ct_ones_like(y, CT_DTYPE_UNDEFINED)};
    CT_ASSERT_ERR(ct_autograd_grad(outs, 1, ins, 1, gos, false, true, false, &gq) == CT_OK, CT_ERROR_NOT_IMPLEMENTED,
                  "double backward");
    ct_clear_error();
    ct_scope_end();
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_attention");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flash_vs_math), cmocka_unit_test(test_strided_inputs),
        cmocka_unit_test(test_projection_gradient),
        cmocka_unit_test(test_flash_vs_cpu_op), cmocka_unit_test(test_flash_dropout), cmocka_unit_test(test_routing),
        cmocka_unit_test(test_memory),        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
