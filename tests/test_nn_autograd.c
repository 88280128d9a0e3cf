/* gradcheck (finite differences, float64) of every nn function. Built once autograd
 * (ctorch/autograd.h) is part of the library; before that it reports a skip. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

#if __has_include("ctorch/autograd.h")

typedef struct nn_case {
    const char *name;
    ct_grad_fn_t fn;
    int n;                /* differentiable inputs */
    int64_t shapes[4][5]; /* {ndim, sizes...} per input */
} nn_case;

#define S(...) {__VA_ARGS__}

static ct_tensor *f_conv_transpose2d(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_conv_transpose2d(in[0], in[1], in[2], CT_INDEX(2, 1), CT_INDEX(1, 0), CT_INDEX(1, 0), 1, NULL);
}
static ct_tensor *f_conv_transpose2d_groups(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_conv_transpose2d(in[0], in[1], NULL, NULL, NULL, NULL, 2, CT_INDEX(2, 1));
}
static ct_tensor *f_avg_pool(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_avg_pool2d(in[0], CT_INDEX(3, 2), CT_INDEX(2, 2), CT_INDEX(1, 1), true, false, 0);
}
static ct_tensor *f_avg_pool_div(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_avg_pool2d(in[0], CT_INDEX(2, 2), NULL, CT_INDEX(1, 0), false, true, 3);
}
static ct_tensor *f_adaptive(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_adaptive_avg_pool2d(in[0], CT_INDEX(3, 2));
}
static ct_tensor *f_rms_norm(ct_tensor *const *in, int n, void *ud) {
    (void)ud;
    return ct_rms_norm(in[0], CT_INDEX(4), 1, n > 1 ? in[1] : NULL, 1e-6);
}
static ct_tensor *f_sdpa(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0, false, NULL);
}
static ct_tensor *f_sdpa_causal(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0, true, &(double){0.7});
}
static ct_tensor *f_sdpa_mask(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    uint8_t m[12] = {1, 0, 1, 1, 1, 1, 0, 1, 0, 1, 1, 0};
    return ct_scaled_dot_product_attention(in[0], in[1], in[2], ct_from_data(m, CT_SHAPE(3, 4), CT_BOOL), 0, false,
                                           NULL);
}
static ct_tensor *f_embedding(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    int64_t idx[5] = {1, 3, 3, 0, 4};
    /* padding_idx rows get no gradient by definition, which finite differences cannot
     * agree with: the golden test covers padding_idx */
    return ct_embedding(ct_from_data(idx, CT_SHAPE(5), CT_I64), in[0], CT_NO_PADDING_IDX);
}
static ct_tensor *f_nll(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    int64_t t[4] = {2, 0, -100, 1};
    double w[3] = {0.5, 2.0, 1.5};
    return ct_nll_loss(in[0], ct_from_data(t, CT_SHAPE(4), CT_I64), ct_from_data(w, CT_SHAPE(3), CT_F64),
                       CT_REDUCTION_MEAN, -100);
}
static ct_tensor *f_nll_none(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    int64_t t[6] = {2, 0, 1, 1, 0, 2};
    return ct_nll_loss(in[0], ct_from_data(t, CT_SHAPE(2, 3), CT_I64), NULL, CT_REDUCTION_NONE, 1);
}

static ct_tensor *f_layer_norm_2d(ct_tensor *const *in, int n, void *ud) {
    (void)ud;
    return ct_layer_norm(in[0], CT_INDEX(2, 3), 2, n > 1 ? in[1] : NULL, n > 2 ? in[2] : NULL, 1e-5);
}
static ct_tensor *f_gelu_exact(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_gelu(in[0], CT_GELU_APPROXIMATE_NONE);
}
static ct_tensor *f_gelu_tanh(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_gelu(in[0], CT_GELU_APPROXIMATE_TANH);
}

static const nn_case fused[] = {
    {"layer_norm_2d", f_layer_norm_2d, 3, {S(3, 4, 2, 3), S(2, 2, 3), S(2, 2, 3)}},
    {"layer_norm_weight_only", f_layer_norm_2d, 2, {S(2, 2, 3), S(2, 2, 3)}},
    {"layer_norm_plain", f_layer_norm_2d, 1, {S(3, 2, 2, 3)}},
    {"gelu_exact", f_gelu_exact, 1, {S(2, 4, 5)}},
    {"gelu_tanh", f_gelu_tanh, 1, {S(2, 4, 5)}},
    {"conv_transpose2d", f_conv_transpose2d, 3, {S(4, 2, 2, 3, 3), S(4, 2, 3, 2, 2), S(1, 3)}},
    {"conv_transpose2d_groups", f_conv_transpose2d_groups, 2, {S(4, 1, 4, 3, 3), S(4, 4, 1, 2, 2)}},
    {"avg_pool2d", f_avg_pool, 1, {S(4, 1, 2, 5, 4)}},
    {"avg_pool2d_divisor", f_avg_pool_div, 1, {S(3, 2, 4, 3)}},
    {"adaptive_avg_pool2d", f_adaptive, 1, {S(4, 2, 1, 5, 5)}},
    {"rms_norm", f_rms_norm, 2, {S(2, 3, 4), S(1, 4)}},
    {"rms_norm_no_weight", f_rms_norm, 1, {S(3, 2, 3, 4)}},
    {"sdpa", f_sdpa, 3, {S(3, 2, 3, 2), S(3, 2, 4, 2), S(3, 2, 4, 3)}},
    {"sdpa_causal", f_sdpa_causal, 3, {S(3, 1, 4, 2), S(3, 1, 4, 2), S(3, 1, 4, 2)}},
    {"sdpa_bool_mask", f_sdpa_mask, 3, {S(3, 2, 3, 2), S(3, 2, 4, 2), S(3, 2, 4, 2)}},
    {"embedding", f_embedding, 1, {S(2, 5, 3)}},
    {"nll_loss", f_nll, 1, {S(2, 4, 3)}},
    {"nll_loss_spatial_none", f_nll_none, 1, {S(3, 2, 3, 3)}},
};

static void run_cases(const nn_case *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        ct_scope_begin();
        ct_manual_seed(100 + i);
        ct_tensor *in[4];
        for (int k = 0; k < cases[i].n; k++) {
            const int64_t *s = cases[i].shapes[k];
            in[k] = ct_tensor_set_requires_grad(ct_randn(s + 1, (int)s[0], CT_F64, CT_CPU), true);
        }
        ct_test_through_compile(cases[i].fn, NULL, in, cases[i].n, cases[i].name);
        if (ct_gradcheck(cases[i].fn, NULL, in, cases[i].n, 1e-6, 1e-7, 1e-5) != CT_OK)
            fail_msg("%s: gradcheck failed: %s", cases[i].name, ct_last_error());
        ct_scope_end();
    }
}

static void test_fused_gradcheck(void **state) {
    (void)state;
    run_cases(fused, sizeof fused / sizeof fused[0]);
}

/* ---- composites: differentiable through the ops they are made of */

static ct_tensor *f_conv1d_same(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_conv1d_padding(in[0], in[1], in[2], 1, "same", 2, 1);
}
static ct_tensor *f_batch_norm(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_batch_norm(in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5);
}
static ct_tensor *f_layer_norm(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_layer_norm(in[0], CT_INDEX(3), 1, in[1], in[2], 1e-5);
}
static ct_tensor *f_group_norm(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_group_norm(in[0], 2, in[1], in[2], 1e-5);
}
static ct_tensor *f_dropout(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    ct_manual_seed(9); /* the same mask on every evaluation */
    return ct_dropout(in[0], 0.4, true);
}
static ct_tensor *f_ce(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    int64_t t[4] = {2, 0, 3, 1};
    double w[4] = {0.5, 2.0, 1.5, 1.0};
    return ct_cross_entropy(in[0], ct_from_data(t, CT_SHAPE(4), CT_I64), ct_from_data(w, CT_SHAPE(4), CT_F64),
                            CT_REDUCTION_MEAN, 3, 0.2);
}
static ct_tensor *f_ce_probs(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_cross_entropy(in[0], ct_softmax(in[1], 1, CT_DTYPE_UNDEFINED), NULL, CT_REDUCTION_SUM, -100, 0.1);
}
static ct_tensor *f_losses(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    ct_tensor *a = in[0], *b = in[1];
    ct_tensor *p = ct_sigmoid(a), *t = ct_sigmoid(b);
    ct_tensor *l = ct_add(ct_mse_loss(a, b, CT_REDUCTION_MEAN), ct_l1_loss(a, b, CT_REDUCTION_SUM));
    l = ct_add(l, ct_smooth_l1_loss(a, b, CT_REDUCTION_MEAN, 0.5));
    l = ct_add(l, ct_huber_loss(a, b, CT_REDUCTION_MEAN, 0.7));
    l = ct_add(l, ct_binary_cross_entropy(p, t, NULL, CT_REDUCTION_MEAN));
    l = ct_add(l, ct_binary_cross_entropy_with_logits(a, t, NULL, NULL, CT_REDUCTION_SUM));
    l = ct_add(l, ct_kl_div(ct_log_softmax(a, 1, CT_DTYPE_UNDEFINED), ct_softmax(b, 1, CT_DTYPE_UNDEFINED),
                            CT_REDUCTION_BATCHMEAN, false));
    return l;
}
static ct_tensor *f_sdpa_dropout_math(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    ct_manual_seed(4);
    return ct_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.3, true, NULL);
}

static const nn_case composite[] = {
    {"conv1d_same", f_conv1d_same, 3, {S(3, 2, 2, 7), S(3, 3, 2, 4), S(1, 3)}},
    {"batch_norm", f_batch_norm, 3, {S(3, 4, 3, 2), S(1, 3), S(1, 3)}},
    {"layer_norm", f_layer_norm, 3, {S(2, 4, 3), S(1, 3), S(1, 3)}},
    {"group_norm", f_group_norm, 3, {S(3, 2, 4, 3), S(1, 4), S(1, 4)}},
    {"dropout", f_dropout, 1, {S(2, 4, 5)}},
    {"cross_entropy", f_ce, 1, {S(2, 4, 4)}},
    {"cross_entropy_probs", f_ce_probs, 2, {S(2, 3, 4), S(2, 3, 4)}},
    {"losses", f_losses, 2, {S(2, 3, 4), S(2, 3, 4)}},
    {"sdpa_dropout", f_sdpa_dropout_math, 3, {S(3, 1, 3, 2), S(3, 1, 3, 2), S(3, 1, 3, 2)}},
};

static void test_composite_gradcheck(void **state) {
    (void)state;
    run_cases(composite, sizeof composite / sizeof composite[0]);
}

/* layer_norm and gelu compute their gradients with fused kernels, except under
 * create_graph, where the gradients are built from differentiable ops: second
 * derivatives work. */
static void test_fused_double_backward(void **state) {
    (void)state;
    ct_manual_seed(7);
    ct_scope_begin();
    ct_tensor *ln[3] = {ct_randn(CT_SHAPE(2, 4, 3), CT_F64, CT_CPU), ct_randn(CT_SHAPE(3), CT_F64, CT_CPU),
                        ct_randn(CT_SHAPE(3), CT_F64, CT_CPU)};
    for (int i = 0; i < 3; i++)
        ct_tensor_set_requires_grad(ln[i], true);
    if (ct_gradgradcheck(f_layer_norm, NULL, ln, 3, 1e-6, 1e-6, 1e-4) != CT_OK)
        fail_msg("layer_norm: gradgradcheck failed: %s", ct_last_error());
    ct_tensor *g[1] = {ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(3, 5), CT_F64, CT_CPU), true)};
    if (ct_gradgradcheck(f_gelu_exact, NULL, g, 1, 1e-6, 1e-6, 1e-4) != CT_OK)
        fail_msg("gelu: gradgradcheck failed: %s", ct_last_error());
    ct_scope_end();
}

/* Training through a module: the GPT block's loss goes down with plain SGD. */
static void test_gpt_block_trains(void **state) {
    (void)state;
    ct_manual_seed(1);
    ct_module *blk = ct_nn_gpt_block(8, 2, CT_F64);
    /* No scope is open here: the test owns both and releases them. */
    ct_tensor *x = ct_randn(CT_SHAPE(2, 5, 8), CT_F64, CT_CPU);
    ct_tensor *target = ct_randn(CT_SHAPE(2, 5, 8), CT_F64, CT_CPU);
    ct_tensor *ps[16];
    int64_t np = ct_module_parameters(blk, ps, NULL, 16);
    assert_int_equal(np, 12);
    double first = 0, last = 0;
    for (int step = 0; step < 20; step++) {
        ct_scope_begin();
        ct_tensor *loss = ct_mse_loss(ct_module_forward(blk, x), target, CT_REDUCTION_MEAN);
        CT_ASSERT_OK(loss);
        ct_item_double(loss, step ? &last : &first);
        assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
        bool prev = ct_set_grad_enabled(false);
        for (int64_t i = 0; i < np; i++) {
            ct_tensor *g = ct_tensor_grad(ps[i]);
            assert_non_null(g);
            ct_sub_alpha_(ps[i], g, ct_scalar_float(0.05));
            ct_tensor_set_grad(ps[i], NULL);
        }
        ct_set_grad_enabled(prev);
        ct_scope_end();
    }
    assert_true(last < 0.9 * first);
    ct_release(x);
    ct_release(target);
    ct_module_free(blk);
}

/* ------------------------------------------------------------------ flash attention
 * The flash op's CPU reference kernel: its output and log-sum-exp against the math
 * path, gradcheck of the forward through its backward op, the gradients against the
 * attention op's, and the argument errors. */

static bool flash_close(const ct_tensor *a, const ct_tensor *b, double rtol, double atol) {
    bool r = false;
    return ct_allclose(a, b, rtol, atol, false, &r) == CT_OK && r;
}

static ct_tensor *f_flash(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    ct_tensor *o, *l;
    return ct_flash_attention_forward(in[0], in[1], in[2], ud != NULL, &(double){0.6}, &o, &l) == CT_OK ? o : NULL;
}

static void test_flash_attention_cpu(void **state) {
    (void)state;
    for (int causal = 0; causal < 2; causal++) {
        ct_scope_begin();
        ct_manual_seed(7 + causal);
        /* L != S: causal masking is top-left (key j <= query i) */
        ct_tensor *q = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(2, 3, 5, 4), CT_F64, CT_CPU), true);
        ct_tensor *k = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(2, 3, 6, 4), CT_F64, CT_CPU), true);
        ct_tensor *v = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(2, 3, 6, 4), CT_F64, CT_CPU), true);
        double sc = 0.6;
        ct_tensor *o, *l;
        assert_int_equal(ct_flash_attention_forward(q, k, v, causal, &sc, &o, &l), CT_OK);
        assert_int_equal(ct_tensor_dtype(l), CT_F64);
        assert_int_equal(ct_tensor_dim(l), 3);
        ct_tensor *ref = ct_fused_scaled_dot_product_attention(q, k, v, NULL, causal, &sc);
        assert_true(flash_close(o, ref, 1e-12, 1e-12));
        /* logsumexp of the masked scores */
        ct_tensor *s = ct_mul_scalar(ct_matmul(q, ct_transpose(k, -2, -1)), ct_scalar_float(sc));
        if (causal) {
            ct_tensor *keep = ct_tril(ct_ones(CT_SHAPE(5, 6), CT_BOOL, CT_CPU), 0);
            s = ct_where_scalar_other(keep, s, ct_scalar_float(-INFINITY));
        }
        int64_t last = -1;
        assert_true(flash_close(l, ct_logsumexp(s, &last, 1, false), 1e-12, 1e-12));
        /* gradients through autograd equal the attention op's */
        ct_tensor *go = ct_randn(CT_SHAPE(2, 3, 5, 4), CT_F64, CT_CPU);
        const ct_tensor *ins[3] = {q, k, v}, *outs[1] = {o}, *gos[1] = {go};
        ct_tensor *g1[3], *g2[3];
        assert_int_equal(ct_autograd_grad(outs, 1, ins, 3, gos, false, false, false, g1), CT_OK);
        assert_int_equal(ct_scaled_dot_product_attention_backward(go, q, k, v, NULL, causal, &sc, &g2[0], &g2[1],
                                                                  &g2[2]),
                         CT_OK);
        for (int i = 0; i < 3; i++)
            assert_true(flash_close(g1[i], g2[i], 1e-10, 1e-12));
        /* finite differences */
        ct_tensor *in[3] = {q, k, v};
        if (ct_gradcheck(f_flash, causal ? (void *)1 : NULL, in, 3, 1e-6, 1e-7, 1e-5) != CT_OK)
            fail_msg("flash attention (causal %d): gradcheck failed: %s", causal, ct_last_error());
        ct_scope_end();
    }
    /* float32 and bfloat16 inputs: the same formulas, a float32 log-sum-exp */
    ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(1, 2, 3, 8), CT_BF16, CT_CPU), *o, *l;
    assert_int_equal(ct_flash_attention_forward(x, x, x, true, NULL, &o, &l), CT_OK);
    assert_int_equal(ct_tensor_dtype(o), CT_BF16);
    assert_int_equal(ct_tensor_dtype(l), CT_F32);
    ct_scope_end();
}

/* Note [Flash attention output layout]: from q, k, v made as (B, L, H, E) and
 * transposed, the output and the gradients are transposed views of dense (B, L, H, E)
 * tensors on the CPU and on META alike, with the values of contiguous inputs'; from
 * contiguous inputs they are contiguous. */
static void test_flash_attention_layout(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(5);
    ct_tensor *x[4], *m[4];
    for (int i = 0; i < 4; i++) {
        x[i] = ct_transpose(ct_randn(CT_SHAPE(2, 6, 3, 8), CT_F64, CT_CPU), 1, 2);
        m[i] = ct_transpose(ct_empty(CT_SHAPE(2, 6, 3, 8), CT_F64, CT_META), 1, 2);
    }
    ct_tensor *r[5], *c[5], *mr[5];
    for (int causal = 0; causal < 2; causal++) {
        assert_int_equal(ct_flash_attention_forward(x[0], x[1], x[2], causal, NULL, &r[0], &r[4]), CT_OK);
        assert_int_equal(ct_flash_attention_backward(x[3], x[0], x[1], x[2], r[0], r[4], causal, NULL, &r[1], &r[2],
                                                     &r[3]),
                         CT_OK);
        ct_tensor *xc[4];
        for (int i = 0; i < 4; i++)
            xc[i] = ct_contiguous(x[i]);
        assert_int_equal(ct_flash_attention_forward(xc[0], xc[1], xc[2], causal, NULL, &c[0], &c[4]), CT_OK);
        assert_int_equal(ct_flash_attention_backward(xc[3], xc[0], xc[1], xc[2], c[0], c[4], causal, NULL, &c[1],
                                                     &c[2], &c[3]),
                         CT_OK);
        assert_int_equal(ct_flash_attention_forward(m[0], m[1], m[2], causal, NULL, &mr[0], &mr[4]), CT_OK);
        assert_int_equal(ct_flash_attention_backward(m[3], m[0], m[1], m[2], mr[0], mr[4], causal, NULL, &mr[1],
                                                     &mr[2], &mr[3]),
                         CT_OK);
        for (int i = 0; i < 4; i++) {
            assert_false(ct_tensor_is_contiguous(r[i]));
            assert_true(ct_tensor_is_contiguous(ct_transpose(r[i], 1, 2)));
            assert_memory_equal(ct_tensor_strides(mr[i]), ct_tensor_strides(r[i]), 4 * sizeof(int64_t));
            assert_true(ct_tensor_is_contiguous(c[i]));
            assert_true(flash_close(r[i], c[i], 0, 0));
        }
    }
    ct_scope_end();
}

/* With dropout, one fixed seed per call so that every gradcheck evaluation draws the
 * same mask. */
static ct_tensor *f_flash_dropout(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    ct_tensor *o, *l, *r;
    ct_manual_seed(31);
    return ct_flash_attention_forward_dropout(in[0], in[1], in[2], ud != NULL, &(double){0.6}, 0.3, &o, &l, &r) ==
                   CT_OK
               ? o
               : NULL;
}

/* Note [Flash attention dropout draws]: the flash op with dropout against the formula
 * with the mask it returns (output and gradients), the mask's layout (no bits past the
 * keys a row sees, about 1 - p of them kept), the same mask from the same seed and
 * another from another seed, gradcheck with a fixed seed; then several 64-key tiles. */
static void test_flash_attention_dropout_cpu(void **state) {
    (void)state;
    for (int causal = 0; causal < 2; causal++) {
        ct_scope_begin();
        ct_manual_seed(11 + causal);
        ct_tensor *q = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(2, 3, 5, 4), CT_F64, CT_CPU), true);
        ct_tensor *k = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(2, 3, 7, 4), CT_F64, CT_CPU), true);
        ct_tensor *v = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(2, 3, 7, 4), CT_F64, CT_CPU), true);
        ct_tensor *go = ct_randn(CT_SHAPE(2, 3, 5, 4), CT_F64, CT_CPU);
        double sc = 0.6, p = 0.3;
        ct_tensor *o, *l, *mask, *o2, *l2, *mask2;
        ct_manual_seed(99);
        assert_int_equal(ct_flash_attention_forward_dropout(q, k, v, causal, &sc, p, &o, &l, &mask), CT_OK);
        /* the mask's bits: (2, 3, 5, 1) words; about 1 - p of the keys each row sees */
        assert_int_equal(ct_tensor_dtype(mask), CT_U64);
        assert_int_equal(ct_tensor_dim(mask), 4);
        assert_int_equal(ct_tensor_shape(mask)[3], 1);
        const uint64_t *w = ct_tensor_data(ct_contiguous(mask));
        int kept = 0, seen = 0;
        for (int r = 0; r < 2 * 3 * 5; r++) {
            int n = causal ? (r % 5) + 1 : 7;
            kept += __builtin_popcountll(w[r]);
            seen += n;
            assert_int_equal(w[r] >> n, 0); /* nothing past the keys the row sees */
        }
        assert_true(kept > seen / 2 && kept < seen);
        bool same = false;
        ct_manual_seed(99);
        assert_int_equal(ct_flash_attention_forward_dropout(q, k, v, causal, &sc, p, &o2, &l2, &mask2), CT_OK);
        assert_int_equal(ct_equal(mask, mask2, &same), CT_OK);
        assert_true(same);
        assert_int_equal(ct_flash_attention_forward_dropout(q, k, v, causal, &sc, p, &o2, &l2, &mask2), CT_OK);
        assert_int_equal(ct_equal(mask, mask2, &same), CT_OK);
        assert_false(same); /* the generator moved on */
        ct_tensor *ref = ct_test_masked_attention(q, k, v, mask, causal, sc, p);
        assert_true(flash_close(o, ref, 1e-12, 1e-12));
        /* dropout did drop: the same call without it differs */
        ct_tensor *o0, *l0;
        assert_int_equal(ct_flash_attention_forward(q, k, v, causal, &sc, &o0, &l0), CT_OK);
        assert_false(flash_close(o, o0, 1e-3, 1e-3));
        assert_true(flash_close(l, l0, 0, 0)); /* the normaliser is of the undropped scores */
        /* gradients through the saved mask equal the formula's */
        const ct_tensor *ins[3] = {q, k, v}, *outs[1] = {o}, *routs[1] = {ref}, *gos[1] = {go};
        ct_tensor *g1[3], *g2[3];
        assert_int_equal(ct_autograd_grad(outs, 1, ins, 3, gos, false, false, false, g1), CT_OK);
        assert_int_equal(ct_autograd_grad(routs, 1, ins, 3, gos, false, false, false, g2), CT_OK);
        for (int i = 0; i < 3; i++)
            assert_true(flash_close(g1[i], g2[i], 1e-10, 1e-12));
        ct_tensor *in[3] = {q, k, v};
        if (ct_gradcheck(f_flash_dropout, causal ? (void *)1 : NULL, in, 3, 1e-6, 1e-7, 1e-5) != CT_OK)
            fail_msg("flash attention with dropout (causal %d): gradcheck failed: %s", causal, ct_last_error());
        /* 130 keys: three tiles, the last partial */
        ct_tensor *qb = ct_randn(CT_SHAPE(1, 2, 66, 8), CT_F64, CT_CPU);
        ct_tensor *kb = ct_randn(CT_SHAPE(1, 2, 130, 8), CT_F64, CT_CPU);
        ct_tensor *vb = ct_randn(CT_SHAPE(1, 2, 130, 8), CT_F64, CT_CPU);
        assert_int_equal(ct_flash_attention_forward_dropout(qb, kb, vb, causal, &sc, 0.5, &o, &l, &mask), CT_OK);
        assert_int_equal(ct_tensor_shape(mask)[3], 3);
        assert_true(flash_close(o, ct_test_masked_attention(qb, kb, vb, mask, causal, sc, 0.5), 1e-12, 1e-12));
        ct_scope_end();
    }
    /* p = 1 drops everything; p = 0 is the plain op, with no mask */
    ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(1, 2, 3, 4), CT_F64, CT_CPU), *o, *l, *r = (ct_tensor *)1;
    assert_int_equal(ct_flash_attention_forward_dropout(x, x, x, false, NULL, 1.0, &o, &l, &r), CT_OK);
    assert_true(flash_close(o, ct_zeros_like(o, CT_DTYPE_UNDEFINED), 0, 0));
    assert_int_equal(ct_flash_attention_forward_dropout(x, x, x, false, NULL, 0.0, &o, &l, &r), CT_OK);
    assert_null(r);
    ct_scope_end();
}

static void test_flash_attention_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(1, 2, 3, 4), CT_F64, CT_CPU), *x3 = ct_randn(CT_SHAPE(2, 3, 4), CT_F64, CT_CPU);
    ct_tensor *xv = ct_randn(CT_SHAPE(1, 2, 3, 5), CT_F64, CT_CPU);
    ct_tensor *xf = ct_randn(CT_SHAPE(1, 2, 3, 4), CT_F32, CT_CPU);
    ct_tensor *xi = ct_ones(CT_SHAPE(1, 2, 3, 4), CT_I64, CT_CPU), *xb = ct_randn(CT_SHAPE(2, 2, 3, 4), CT_F64, CT_CPU);
    ct_tensor *o, *l, *a, *b, *c;
    CT_ASSERT_ERR(ct_flash_attention_forward(x3, x3, x3, false, NULL, &o, &l) == CT_OK, CT_ERROR_VALUE, "4-D");
    CT_ASSERT_ERR(ct_flash_attention_forward(x, x, xv, false, NULL, &o, &l) == CT_OK, CT_ERROR_VALUE, "head dim");
    CT_ASSERT_ERR(ct_flash_attention_forward(x, xb, xb, false, NULL, &o, &l) == CT_OK, CT_ERROR_VALUE,
                  "batch dimensions");
    CT_ASSERT_ERR(ct_flash_attention_forward(x, xf, x, false, NULL, &o, &l) == CT_OK, CT_ERROR_TYPE, "same dtype");
    CT_ASSERT_ERR(ct_flash_attention_forward(xi, xi, xi, false, NULL, &o, &l) == CT_OK, CT_ERROR_TYPE,
                  "not implemented");
    CT_ASSERT_ERR(ct_flash_attention_forward(NULL, x, x, false, NULL, &o, &l) == CT_OK, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_flash_attention_forward(x, x, x, false, NULL, &o, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "");
    assert_int_equal(ct_flash_attention_forward(x, x, x, false, NULL, &o, &l), CT_OK);
    CT_ASSERT_ERR(ct_flash_attention_backward(x, x, x, x, o, ct_to_dtype(l, CT_F32), false, NULL, &a, &b, &c) == CT_OK,
                  CT_ERROR_VALUE, "logsumexp");
    CT_ASSERT_ERR(ct_flash_attention_backward(x, x, x, x, o, x, false, NULL, &a, &b, &c) == CT_OK, CT_ERROR_VALUE,
                  "logsumexp");
    CT_ASSERT_ERR(ct_flash_attention_backward(xv, x, x, x, o, l, false, NULL, &a, &b, &c) == CT_OK, CT_ERROR_VALUE,
                  "grad_out");
    CT_ASSERT_ERR(ct_flash_attention_backward(x, x, x, x, xf, l, false, NULL, &a, &b, &c) == CT_OK, CT_ERROR_VALUE,
                  "out");
    CT_ASSERT_ERR(ct_flash_attention_backward(x, x, x, x, NULL, l, false, NULL, &a, &b, &c) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_flash_attention_backward(x, x, x, x, o, l, false, NULL, NULL, &b, &c) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "");
    /* dropout: p outside [0, 1], the backward without (or with a wrong) mask */
    ct_tensor *rs;
    CT_ASSERT_ERR(ct_flash_attention_forward_dropout(x, x, x, false, NULL, 1.5, &o, &l, &rs) == CT_OK, CT_ERROR_VALUE,
                  "between 0 and 1");
    CT_ASSERT_ERR(ct_flash_attention_forward_dropout(x, x, x, false, NULL, NAN, &o, &l, &rs) == CT_OK, CT_ERROR_VALUE,
                  "between 0 and 1");
    CT_ASSERT_ERR(ct_flash_attention_forward_dropout(x, x, x, false, NULL, 0.2, &o, &l, NULL) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "");
    assert_int_equal(ct_flash_attention_forward_dropout(x, x, x, false, NULL, 0.2, &o, &l, &rs), CT_OK);
    CT_ASSERT_ERR(ct_flash_attention_backward_dropout(x, x, x, x, o, l, NULL, false, NULL, 0.2, &a, &b, &c) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_flash_attention_backward_dropout(x, x, x, x, o, l, ct_to_dtype(rs, CT_I64), false, NULL, 0.2, &a,
                                                      &b, &c) == CT_OK,
                  CT_ERROR_VALUE, "dropout_mask");
    CT_ASSERT_ERR(ct_flash_attention_backward_dropout(x, x, x, x, o, l, ct_zeros(CT_SHAPE(1, 2, 3, 2), CT_U64, CT_CPU),
                                                      false, NULL, 0.2, &a, &b, &c) == CT_OK,
                  CT_ERROR_VALUE, "dropout_mask");
    CT_ASSERT_ERR(ct_flash_attention_backward_dropout(x, x, x, x, o, l, rs, false, NULL, -0.5, &a, &b, &c) == CT_OK,
                  CT_ERROR_VALUE, "between 0 and 1");
    assert_int_equal(ct_flash_attention_backward_dropout(x, x, x, x, o, l, rs, false, NULL, 0.2, &a, &b, &c), CT_OK);
    /* the fused op takes dropout only where flash applies (not on the CPU) */
    CT_ASSERT_ERR(ct_fused_scaled_dot_product_attention_dropout(x, x, x, NULL, false, NULL, 0.2) != NULL,
                  CT_ERROR_NOT_IMPLEMENTED, "no fused kernel");
    assert_false(ct_backends_cuda_can_use_flash_attention(x, x, x, NULL));
    /* double backward is refused; the log-sum-exp gets no gradient */
    ct_tensor *q = ct_tensor_set_requires_grad(ct_clone(x), true);
    assert_int_equal(ct_flash_attention_forward(q, q, q, true, NULL, &o, &l), CT_OK);
    const ct_tensor *ins[1] = {q}, *outs[1] = {o}, *louts[1] = {l};
    const ct_tensor *gos[1] = {ct_ones_like(o, CT_DTYPE_UNDEFINED)}, *glo[1] = {ct_ones_like(l, CT_DTYPE_UNDEFINED)};
    ct_tensor *gq = NULL;
    CT_ASSERT_ERR(ct_autograd_grad(outs, 1, ins, 1, gos, true, true, false, &gq) == CT_OK, CT_ERROR_NOT_IMPLEMENTED,
                  "double backward");
    CT_ASSERT_ERR(ct_autograd_grad(louts, 1, ins, 1, glo, true, false, false, &gq) == CT_OK, CT_ERROR_NOT_IMPLEMENTED,
                  "logsumexp");
    /* the switch of scaled_dot_product_attention's flash path */
    bool was = ct_backends_cuda_flash_sdp_enabled();
    ct_backends_cuda_enable_flash_sdp(false);
    assert_false(ct_backends_cuda_flash_sdp_enabled());
    ct_backends_cuda_enable_flash_sdp(true);
    assert_true(ct_backends_cuda_flash_sdp_enabled());
    ct_backends_cuda_enable_flash_sdp(was);
    ct_clear_error();
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_gradcheck),
        cmocka_unit_test(test_composite_gradcheck),
        cmocka_unit_test(test_fused_double_backward),
        cmocka_unit_test(test_gpt_block_trains),
        cmocka_unit_test(test_flash_attention_cpu),
        cmocka_unit_test(test_flash_attention_layout),
        cmocka_unit_test(test_flash_attention_dropout_cpu),
        cmocka_unit_test(test_flash_attention_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

int main(void) {
    puts("nn gradchecks need ctorch/autograd.h; skipped");
    return 77;
}

#endif
