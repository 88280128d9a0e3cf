/* torch.nn.functional against PyTorch 1.13 goldens (tests/golden/gen_nn.py): forward
 * values of every function, the fused backward kernels against PyTorch's gradients,
 * error inputs, dropout statistics; normalize, cosine_similarity and pairwise_distance
 * against PyTorch (tests/golden/gen_distance.py) and gradcheck; multinomial's
 * statistics and errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/ext.h"
#include "nn_golden.h"

static int load_golden(void **state) {
    (void)state;
    return load_golden_file(CT_TEST_DATA_DIR "/nn_golden.txt");
}

/* ------------------------------------------------------------------ the cases */

#define TOL 1e-10
static const int64_t P11[2] = {1, 1}, P22[2] = {2, 2}, P33[2] = {3, 3};

static ct_reduction red_of(const char *name) {
    return strstr(name, "_none") ? CT_REDUCTION_NONE : strstr(name, "_sum") ? CT_REDUCTION_SUM : CT_REDUCTION_MEAN;
}

typedef struct pool_args {
    const char *name;
    int64_t k[2], s[2], p[2];
    bool null_stride, ceil, cip;
    int64_t div;
} pool_args;

static const pool_args pools[] = {
    {"avg_pool2d_a", {3, 3}, {2, 2}, {1, 1}, false, false, true, 0},
    {"avg_pool2d_b", {3, 3}, {2, 2}, {1, 1}, false, true, false, 0},
    {"avg_pool2d_c", {2, 3}, {3, 2}, {1, 1}, false, true, true, 0},
    {"avg_pool2d_d", {2, 2}, {0, 0}, {1, 1}, true, false, true, 5},
};

/* Forward of case c; NULL when the case is not a plain forward one. */
static ct_tensor *forward(const gcase *c) {
    const char *n = c->name;
    if (!strcmp(n, "conv1d"))
        return ct_conv1d(T(c, "x"), T(c, "w"), T(c, "b"), 2, 1, 1, 1);
    if (!strcmp(n, "conv1d_same"))
        return ct_conv1d_padding(T(c, "x"), T(c, "w"), NULL, 1, "same", 1, 2);
    if (!strcmp(n, "conv2d_same"))
        return ct_conv2d_padding(T(c, "x"), T(c, "w"), T(c, "b"), NULL, "same", CT_INDEX(2, 1), 1);
    if (!strcmp(n, "conv2d_valid"))
        return ct_conv2d_padding(T(c, "x"), T(c, "w"), NULL, CT_INDEX(2, 1), "valid", NULL, 1);
    if (!strcmp(n, "conv_transpose2d"))
        return ct_conv_transpose2d(T(c, "x"), T(c, "w"), T(c, "b"), P22, P11, P11, 1, NULL);
    if (!strcmp(n, "conv_transpose2d_groups"))
        return ct_conv_transpose2d(T(c, "x"), T(c, "w"), NULL, CT_INDEX(1, 2), CT_INDEX(0, 1), CT_INDEX(0, 1), 2,
                                   CT_INDEX(2, 1));
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
        if (!strcmp(n, pools[i].name))
            return ct_avg_pool2d(T(c, "x"), pools[i].k, pools[i].null_stride ? NULL : pools[i].s, pools[i].p,
                                 pools[i].ceil, pools[i].cip, pools[i].div);
    if (!strcmp(n, "adaptive_avg_pool2d_a"))
        return ct_adaptive_avg_pool2d(T(c, "x"), CT_INDEX(3, 2));
    if (!strcmp(n, "adaptive_avg_pool2d_b"))
        return ct_adaptive_avg_pool2d(T(c, "x"), CT_INDEX(4, 7));
    if (!strcmp(n, "batch_norm_eval"))
        return ct_batch_norm(T(c, "x"), T(c, "rm"), T(c, "rv"), T(c, "w"), T(c, "b"), false, 0.1, 1e-3);
    if (!strcmp(n, "layer_norm"))
        return ct_layer_norm(T(c, "x"), CT_INDEX(3, 4), 2, T(c, "w"), T(c, "b"), 1e-5);
    if (!strcmp(n, "layer_norm_plain"))
        return ct_layer_norm(T(c, "x"), CT_INDEX(4), 1, NULL, NULL, 1e-5);
    if (!strcmp(n, "group_norm"))
        return ct_group_norm(T(c, "x"), 3, T(c, "w"), T(c, "b"), 1e-5);
    if (!strcmp(n, "rms_norm"))
        return ct_rms_norm(T(c, "x"), CT_INDEX(5), 1, T(c, "w"), 1e-6);
    if (!strcmp(n, "rms_norm_plain"))
        return ct_rms_norm(T(c, "x"), CT_INDEX(3, 5), 2, NULL, -1);
    if (!strcmp(n, "embedding"))
        return ct_embedding(I(c, "idx"), T(c, "w"), 2);
    if (!strcmp(n, "sdpa") || !strcmp(n, "sdpa_long_causal"))
        return ct_scaled_dot_product_attention(T(c, "q"), T(c, "k"), T(c, "v"), NULL, 0, n[4] != 0, NULL);
    if (!strcmp(n, "sdpa_causal"))
        return ct_scaled_dot_product_attention(T(c, "q"), T(c, "k"), T(c, "v"), NULL, 0, true, &(double){0.3});
    if (!strcmp(n, "sdpa_bool_mask"))
        return ct_scaled_dot_product_attention(T(c, "q"), T(c, "k"), T(c, "v"), ct_to_dtype(T(c, "mask"), CT_BOOL),
                                               0, false, NULL);
    if (!strcmp(n, "sdpa_float_mask"))
        return ct_scaled_dot_product_attention(T(c, "q"), T(c, "k"), T(c, "v"), T(c, "mask"), 0, false, NULL);
    if (!strncmp(n, "ce_probs", 8))
        return ct_cross_entropy(T(c, "x"), T(c, "p"), find(c, "w") ? T(c, "w") : NULL, red_of(n), -100,
                                strcmp(n, "ce_probs") ? 0 : 0.1);
    if (!strncmp(n, "ce_", 3)) {
        double ls = !strcmp(n, "ce_ls_weight_ignore1") ? 0.2 : !strncmp(n, "ce_ls_sum", 9) ? 0.1
                    : !strncmp(n, "ce_ls", 5) ? 0.3 : !strcmp(n, "ce_spatial") ? 0.1 : 0;
        return ct_cross_entropy(T(c, "x"), I(c, "t"), find(c, "w") ? T(c, "w") : NULL, red_of(n),
                                !strcmp(n, "ce_ls_weight_ignore1") ? 1 : -100, ls);
    }
    if (!strncmp(n, "nll_", 4))
        return ct_nll_loss(T(c, "x"), I(c, "t"), find(c, "w") ? T(c, "w") : NULL, red_of(n),
                           !strcmp(n, "nll_weight_ignore0") ? 0 : -100);
    if (!strncmp(n, "mse_", 4))
        return ct_mse_loss(T(c, "x"), T(c, "t"), red_of(n));
    if (!strncmp(n, "l1_", 3))
        return ct_l1_loss(T(c, "x"), T(c, "t"), red_of(n));
    if (!strncmp(n, "smooth_l1_", 10))
        return ct_smooth_l1_loss(T(c, "x"), T(c, "t"), red_of(n), 0.5);
    if (!strncmp(n, "huber_", 6))
        return ct_huber_loss(T(c, "x"), T(c, "t"), red_of(n), 0.7);
    if (!strcmp(n, "bce") || !strcmp(n, "bce_sum"))
        return ct_binary_cross_entropy(T(c, "x"), T(c, "t"), find(c, "w") ? T(c, "w") : NULL, red_of(n));
    if (!strncmp(n, "bce_logits", 10))
        return ct_binary_cross_entropy_with_logits(T(c, "x"), T(c, "t"), find(c, "w") ? T(c, "w") : NULL,
                                                   find(c, "pw") ? T(c, "pw") : NULL, red_of(n));
    if (!strncmp(n, "kl_", 3))
        return ct_kl_div(T(c, "x"), T(c, "t"), !strcmp(n, "kl_batchmean") ? CT_REDUCTION_BATCHMEAN : red_of(n),
                         strstr(n, "logt") != NULL);
    return NULL;
}

static void test_forward_golden(void **state) {
    (void)state;
    int checked = 0;
    for (int i = 0; i < ncases; i++) {
        const gcase *c = &cases[i];
        ct_scope_begin();
        if (!strcmp(c->name, "batch_norm_train")) {
            ct_tensor *rm = ct_clone(T(c, "rm")), *rv = ct_clone(T(c, "rv"));
            expect(c, "y", ct_batch_norm(T(c, "x"), rm, rv, T(c, "w"), T(c, "b"), true, 0.2, 1e-5), TOL);
            expect(c, "rm_after", rm, TOL);
            expect(c, "rv_after", rv, TOL);
            checked++;
        } else {
            ct_tensor *y = forward(c);
            if (!y)
                fail_msg("%s: %s", c->name, ct_last_error());
            expect(c, "y", y, TOL);
            checked++;
        }
        ct_scope_end();
    }
    assert_int_equal(checked, ncases);
}

/* The fused backward kernels (what the derivative formulas call) against PyTorch. */
static void test_backward_kernels(void **state) {
    (void)state;
    int checked = 0;
    for (int i = 0; i < ncases; i++) {
        const gcase *c = &cases[i];
        const char *n = c->name;
        ct_scope_begin();
        for (size_t k = 0; k < sizeof pools / sizeof pools[0]; k++)
            if (!strcmp(n, pools[k].name)) {
                expect(c, "gx",
                       ct_avg_pool2d_backward(T(c, "gy"), T(c, "x"), pools[k].k, pools[k].null_stride ? NULL : pools[k].s,
                                              pools[k].p, pools[k].ceil, pools[k].cip, pools[k].div),
                       TOL);
                checked++;
            }
        if (!strncmp(n, "adaptive_avg_pool2d", 19)) {
            expect(c, "gx", ct_adaptive_avg_pool2d_backward(T(c, "gy"), T(c, "x")), TOL);
            checked++;
        }
        if (!strcmp(n, "layer_norm") || !strcmp(n, "layer_norm_plain")) {
            bool w = n[10] == 0;
            ct_tensor *gi = NULL, *gw = NULL, *gb = NULL;
            assert_int_equal(ct_layer_norm_backward(T(c, "gy"), T(c, "x"), w ? CT_INDEX(3, 4) : CT_INDEX(4), w ? 2 : 1,
                                                    w ? T(c, "w") : NULL, w ? T(c, "b") : NULL, 1e-5, &gi, &gw, &gb),
                             CT_OK);
            expect(c, "gx", gi, TOL);
            if (w) {
                expect(c, "gw", gw, TOL);
                expect(c, "gb", gb, TOL);
            } else {
                assert_null(gw);
                assert_null(gb);
            }
            checked++;
        }
        if (!strcmp(n, "rms_norm") || !strcmp(n, "rms_norm_plain")) {
            bool w = n[8] == 0;
            ct_tensor *gi = NULL, *gw = NULL;
            assert_int_equal(ct_rms_norm_backward(T(c, "gy"), T(c, "x"), w ? CT_INDEX(5) : CT_INDEX(3, 5), w ? 1 : 2,
                                                  w ? T(c, "w") : NULL, w ? 1e-6 : -1, &gi, &gw),
                             CT_OK);
            expect(c, "gx", gi, TOL);
            if (w)
                expect(c, "gw", gw, TOL);
            checked++;
        }
        if (!strncmp(n, "sdpa", 4)) {
            bool causal = strstr(n, "causal") != NULL;
            ct_tensor *mask = !strcmp(n, "sdpa_bool_mask")    ? ct_to_dtype(T(c, "mask"), CT_BOOL)
                              : !strcmp(n, "sdpa_float_mask") ? T(c, "mask")
                                                              : NULL;
            const double *scale = !strcmp(n, "sdpa_causal") ? &(double){0.3} : NULL;
            ct_tensor *gq, *gk, *gv;
            assert_int_equal(ct_scaled_dot_product_attention_backward(T(c, "gy"), T(c, "q"), T(c, "k"), T(c, "v"), mask,
                                                                      causal, scale, &gq, &gk, &gv),
                             CT_OK);
            expect(c, "gq", gq, TOL);
            expect(c, "gk", gk, TOL);
            expect(c, "gv", gv, TOL);
            checked++;
        }
        if (!strcmp(n, "embedding")) {
            expect(c, "gw", ct_embedding_backward(T(c, "gy"), I(c, "idx"), 10, 2), TOL);
            checked++;
        }
        if (!strncmp(n, "nll_", 4)) {
            expect(c, "gx",
                   ct_nll_loss_backward(T(c, "gy"), T(c, "x"), I(c, "t"), find(c, "w") ? T(c, "w") : NULL, red_of(n),
                                        !strcmp(n, "nll_weight_ignore0") ? 0 : -100),
                   TOL);
            checked++;
        }
        if (!strcmp(n, "conv_transpose2d")) {
            /* the derivative of a transposed convolution: conv2d for the input,
             * conv2d's weight gradient with the roles swapped for the weight */
            expect(c, "gx", ct_conv2d(T(c, "gy"), T(c, "w"), NULL, P22, P11, NULL, 1), TOL);
            ct_tensor *gw = NULL;
            assert_int_equal(ct_conv2d_backward(T(c, "x"), T(c, "gy"), T(c, "w"), P22, P11, NULL, 1, NULL, &gw, NULL),
                             CT_OK);
            expect(c, "gw", gw, TOL);
            checked++;
        }
        ct_scope_end();
    }
    assert_int_equal(checked, 4 + 2 + 2 + 2 + 5 + 1 + 4 + 1);
}

/* float32 runs the same kernels in single precision. */
static void test_float32(void **state) {
    (void)state;
    for (int i = 0; i < ncases; i++) {
        const gcase *c = &cases[i];
        if (strncmp(c->name, "sdpa", 4) && strncmp(c->name, "rms_norm", 8) && strncmp(c->name, "avg_pool", 8))
            continue;
        ct_scope_begin();
        ct_tensor *y = NULL;
        if (!strcmp(c->name, "sdpa_long_causal"))
            y = ct_scaled_dot_product_attention(ct_to_dtype(T(c, "q"), CT_F32), ct_to_dtype(T(c, "k"), CT_F32),
                                                ct_to_dtype(T(c, "v"), CT_F32), NULL, 0, true, NULL);
        else if (!strcmp(c->name, "rms_norm"))
            y = ct_rms_norm(ct_to_dtype(T(c, "x"), CT_F32), CT_INDEX(5), 1, ct_to_dtype(T(c, "w"), CT_F32), 1e-6);
        else if (!strcmp(c->name, "avg_pool2d_b"))
            y = ct_avg_pool2d(ct_to_dtype(T(c, "x"), CT_F32), P33, P22, P11, true, false, 0);
        if (y) {
            assert_int_equal(ct_tensor_dtype(y), CT_F32);
            expect(c, "y", y, 1e-5);
        }
        ct_scope_end();
    }
}

/* ------------------------------------------------------------------ gradients */

#if __has_include("ctorch/autograd.h")
/* Every case's gradients through autograd, against PyTorch's: the composites through
 * their constituents' formulas, the fused ops through src/autograd/derivatives_nn.h. */
static void test_golden_gradients(void **state) {
    (void)state;
    int checked = 0;
    for (int i = 0; i < ncases; i++) {
        const gcase *c = &cases[i];
        ct_scope_begin();
        pin_case(c);
        ct_tensor *inputs[16];
        const char *names[16];
        int n = 0;
        for (int k = 0; k < c->n; k++) {
            char g[72];
            snprintf(g, sizeof g, "g%s", c->t[k].name);
            if (find(c, g) && strcmp(c->t[k].name, "y")) {
                inputs[n] = T(c, c->t[k].name);
                names[n++] = c->t[k].name;
                ct_tensor_set_requires_grad(inputs[n - 1], true);
            }
        }
        ct_tensor *y = NULL;
        if (!strcmp(c->name, "batch_norm_train"))
            y = ct_batch_norm(T(c, "x"), ct_clone(T(c, "rm")), ct_clone(T(c, "rv")), T(c, "w"), T(c, "b"), true, 0.2,
                              1e-5);
        else
            y = forward(c);
        if (!y)
            fail_msg("%s: %s", c->name, ct_last_error());
        ct_tensor *grads[16] = {0};
        const ct_tensor *gy = T(c, "gy");
        if (ct_autograd_grad((const ct_tensor *const *)&y, 1, (const ct_tensor *const *)inputs, n, &gy, false, false,
                             true, grads) != CT_OK)
            fail_msg("%s: backward failed: %s", c->name, ct_last_error());
        for (int k = 0; k < n; k++) {
            char g[72];
            snprintf(g, sizeof g, "g%s", names[k]);
            if (grads[k])
                expect(c, g, grads[k], 1e-9);
            else
                expect(c, g, ct_zeros_like(inputs[k], CT_DTYPE_UNDEFINED), 0);
        }
        pin_case(NULL);
        checked++;
        ct_scope_end();
    }
    assert_int_equal(checked, ncases);
}
#endif

/* ------------------------------------------------------------------ other behaviour */

static void test_dropout(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(123);
    ct_tensor *x = ct_ones(CT_SHAPE(100, 100), CT_F32, CT_CPU);
    ct_tensor *y = ct_dropout(x, 0.3, true);
    CT_ASSERT_OK(y);
    double zeros = 0, sum = 0;
    for (int64_t i = 0; i < 10000; i++) {
        double v = ct_test_at(y, i);
        if (v == 0)
            zeros++;
        else
            assert_true(fabs(v - 1 / 0.7) < 1e-6);
        sum += v;
    }
    assert_true(fabs(zeros / 10000 - 0.3) < 0.03);
    assert_true(fabs(sum / 10000 - 1) < 0.05);
    /* the same seed gives the same mask */
    ct_manual_seed(123);
    ct_tensor *y2 = ct_dropout(x, 0.3, true);
    for (int64_t i = 0; i < 10000; i++)
        assert_true(ct_test_at(y, i) == ct_test_at(y2, i));
    /* eval and p = 0 give the input itself; p = 1 all zeros */
    ct_tensor *e = ct_dropout(x, 0.3, false);
    assert_true(ct_tensor_shares_storage(e, x));
    ct_tensor *z = ct_dropout(x, 1.0, true);
    assert_true(ct_test_at(z, 17) == 0);
    CT_ASSERT_ERR(ct_dropout(x, 1.5, true) != NULL, CT_ERROR_VALUE, "between 0 and 1");
    CT_ASSERT_ERR(ct_dropout(NULL, 0.5, true) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    ct_scope_end();
}

static void test_one_hot(void **state) {
    (void)state;
    ct_scope_begin();
    int64_t v[4] = {0, 2, 1, 2};
    ct_tensor *t = ct_from_data(v, CT_SHAPE(2, 2), CT_I64);
    ct_tensor *y = ct_one_hot(t, -1);
    CT_ASSERT_SHAPE(y, 2, 2, 3);
    assert_int_equal(ct_tensor_dtype(y), CT_I64);
    double want[12] = {1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1};
    for (int i = 0; i < 12; i++)
        assert_true(ct_test_at(y, i) == want[i]);
    CT_ASSERT_SHAPE(ct_one_hot(t, 5), 2, 2, 5);
    CT_ASSERT_ERR(ct_one_hot(t, 2) != NULL, CT_ERROR_VALUE, "smaller than num_classes");
    CT_ASSERT_ERR(ct_one_hot(ct_to_dtype(t, CT_F32), 3) != NULL, CT_ERROR_TYPE, "index tensor");
    int64_t neg[1] = {-1};
    CT_ASSERT_ERR(ct_one_hot(ct_from_data(neg, CT_SHAPE(1), CT_I64), 3) != NULL, CT_ERROR_VALUE, "non-negative");
    CT_ASSERT_ERR(ct_one_hot(ct_empty(CT_SHAPE(0), CT_I64, CT_CPU), -1) != NULL, CT_ERROR_VALUE, "empty");
    CT_ASSERT_ERR(ct_one_hot(NULL, 3) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    /* META knows the shape only when num_classes is given */
    ct_tensor *m = ct_empty(CT_SHAPE(2, 3), CT_I64, CT_META);
    ct_tensor *mh = ct_one_hot(m, 4);
    CT_ASSERT_SHAPE(mh, 2, 3, 4);
    assert_true(ct_tensor_device(mh).type == CT_DEVICE_META && ct_tensor_dtype(mh) == CT_I64);
    CT_ASSERT_ERR(ct_one_hot(m, -1) != NULL, CT_ERROR_NOT_IMPLEMENTED, "without num_classes");
    CT_ASSERT_ERR(ct_one_hot(ct_empty(CT_SHAPE(2), CT_I32, CT_META), 4) != NULL, CT_ERROR_TYPE, "index tensor");
    ct_scope_end();
}

/* A causal attention over a long sequence needs only block-sized scratch: the result
 * matches the reference formula at a size where a full (T, T) matrix per head would
 * be large. */
static void test_sdpa_long_blocks(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(7);
    ct_tensor *q = ct_randn(CT_SHAPE(2, 300, 8), CT_F64, CT_CPU), *k = ct_randn(CT_SHAPE(2, 300, 8), CT_F64, CT_CPU);
    ct_tensor *v = ct_randn(CT_SHAPE(2, 300, 5), CT_F64, CT_CPU);
    ct_tensor *y = ct_scaled_dot_product_attention(q, k, v, NULL, 0, true, NULL);
    /* reference: softmax over keys 0..i of q_i . k_j / sqrt(8) */
    ct_tensor *s = ct_mul_scalar(ct_matmul(q, ct_transpose(k, -2, -1)), ct_scalar_float(1 / sqrt(8.0)));
    const double *ps = ct_tensor_data(ct_contiguous(s));
    const double *pv = ct_tensor_data(v);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 300; i += 37) {
            const double *row = ps + (b * 300 + i) * 300;
            double mx = -INFINITY, den = 0;
            for (int j = 0; j <= i; j++)
                mx = fmax(mx, row[j]);
            for (int j = 0; j <= i; j++)
                den += exp(row[j] - mx);
            for (int e = 0; e < 5; e++) {
                double acc = 0;
                for (int j = 0; j <= i; j++)
                    acc += exp(row[j] - mx) / den * pv[(b * 300 + j) * 5 + e];
                assert_true(fabs(ct_test_at(y, (b * 300 + i) * 5 + e) - acc) < 1e-12);
            }
        }
    /* dropout takes the reference path: p = 1 drops everything */
    ct_tensor *z = ct_scaled_dot_product_attention(q, k, v, NULL, 1.0, true, NULL);
    assert_true(ct_test_at(z, 123) == 0);
    ct_scope_end();
}

static void test_nll_ignored_mean_is_nan(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_zeros(CT_SHAPE(2, 3), CT_F64, CT_CPU);
    int64_t t[2] = {-100, -100};
    double v;
    assert_int_equal(ct_item_double(ct_nll_loss(x, ct_from_data(t, CT_SHAPE(2), CT_I64), NULL, CT_REDUCTION_MEAN, -100), &v),
                     CT_OK);
    assert_true(isnan(v));
    ct_scope_end();
}

/* ------------------------------------------------------------------ fused cross_entropy */

/* Logits (n, c) of dtype dt with values in [-4, 4) and targets in [0, c), every third
 * one ignore (when ignore >= 0 or -100). */
static ct_tensor *xent_logits(int64_t n, int64_t c, ct_dtype dt, uint64_t seed) {
    ct_tensor *x = ct_empty(CT_SHAPE(n, c), CT_F64, CT_CPU);
    double *p = ct_tensor_data(x);
    for (int64_t i = 0; i < n * c; i++)
        p[i] = 8 * ct_test_unit(&seed) - 4;
    return ct_to_dtype(x, dt);
}

static ct_tensor *xent_targets(int64_t n, int64_t c, int64_t ignore, uint64_t seed) {
    ct_tensor *t = ct_empty(CT_SHAPE(n), CT_I64, CT_CPU);
    int64_t *p = ct_tensor_data(t);
    for (int64_t i = 0; i < n; i++)
        p[i] = i % 3 == 2 ? ignore : (int64_t)(ct_test_unit(&seed) * (double)c) % c;
    return t;
}

static void assert_close(const ct_tensor *a, const ct_tensor *b, double rtol, double atol, const char *what) {
    CT_ASSERT_OK(a);
    CT_ASSERT_OK(b);
    bool ok = false;
    assert_int_equal(ct_allclose(ct_to_dtype(a, CT_F64), ct_to_dtype(b, CT_F64), rtol, atol, true, &ok), CT_OK);
    if (!ok)
        fail_msg("%s: values differ", what);
}

/* The fused op against log_softmax + nll_loss, forward and gradient, in every floating
 * dtype, reduction and with an ignored class; lse against logsumexp. */
static void test_cross_entropy_fused(void **state) {
    (void)state;
    ct_dtype dts[] = {CT_F64, CT_F32, CT_BF16, CT_F16};
    ct_reduction reds[] = {CT_REDUCTION_NONE, CT_REDUCTION_MEAN, CT_REDUCTION_SUM};
    int64_t ignores[] = {-100, 3};
    for (int d = 0; d < 4; d++)
        for (int r = 0; r < 3; r++)
            for (int k = 0; k < 2; k++) {
                ct_scope_begin();
                double tol = dts[d] == CT_F64 ? 1e-12 : dts[d] == CT_F32 ? 1e-5 : dts[d] == CT_F16 ? 4e-3 : 3e-2;
                ct_tensor *x = ct_tensor_set_requires_grad(xent_logits(13, 37, dts[d], 100 + d), true);
                ct_tensor *xr = ct_tensor_set_requires_grad(ct_detach(x), true);
                ct_tensor *t = xent_targets(13, 37, ignores[k], 7 + r);
                ct_tensor *lse = NULL;
                ct_tensor *y = ct_cross_entropy_fused(x, t, reds[r], ignores[k], &lse);
                ct_tensor *yr = ct_nll_loss(ct_log_softmax(xr, 1, CT_DTYPE_UNDEFINED), t, NULL, reds[r], ignores[k]);
                assert_int_equal(ct_tensor_dtype(y), dts[d]);
                assert_int_equal(ct_tensor_dtype(lse), dts[d] == CT_F64 ? CT_F64 : CT_F32);
                assert_close(y, yr, tol, tol, "cross_entropy_fused forward");
                assert_close(lse, ct_logsumexp(ct_to_dtype(x, ct_tensor_dtype(lse)), CT_INDEX(1), 1, false), tol, tol,
                             "cross_entropy_fused lse");
                /* the same loss through ct_cross_entropy, which takes the fused op */
                ct_tensor *yc = ct_cross_entropy(x, t, NULL, reds[r], ignores[k], 0.0);
                assert_close(yc, yr, tol, tol, "cross_entropy routed");
                assert_non_null(strstr(ct_tensor_grad_fn_name(yc), "CrossEntropyFused"));
                ct_tensor *go = reds[r] == CT_REDUCTION_NONE ? ct_to_dtype(xent_logits(1, 13, CT_F64, 5), dts[d])
                                                             : ct_full(NULL, 0, ct_scalar_float(0.75), dts[d], CT_CPU);
                if (reds[r] == CT_REDUCTION_NONE)
                    go = ct_reshape(go, CT_SHAPE(13));
                assert_int_equal(ct_backward(y, go, false, false), CT_OK);
                assert_int_equal(ct_backward(yr, go, false, false), CT_OK);
                assert_close(ct_tensor_grad(x), ct_tensor_grad(xr), tol, tol, "cross_entropy_fused gradient");
                /* ignored rows get no gradient */
                for (int64_t i = 2; i < 13; i += 3)
                    for (int64_t j = 0; j < 37; j++)
                        assert_true(ct_test_at(ct_tensor_grad(x), i * 37 + j) == 0);
                ct_scope_end();
            }
}

typedef struct {
    const void *data;
    int calls;
} seen_grad;

static ct_tensor *note_grad(const ct_tensor *g, void *ud) {
    seen_grad *s = ud;
    s->data = ct_tensor_data(g);
    s->calls++;
    return NULL;
}

/* Note [Reusing a saved input's memory]: logits the caller dropped get their gradient
 * written into their memory; logits the caller keeps, or a graph kept for a second
 * backward, get a new tensor; the gradients agree with log_softmax + nll_loss's. */
static void test_cross_entropy_reuses_logits(void **state) {
    (void)state;
    ct_dtype dts[] = {CT_F32, CT_BF16};
    for (int d = 0; d < 2; d++)
        for (int mode = 0; mode < 3; mode++) { /* 0: dropped, 1: kept, 2: retain_graph */
            ct_scope_begin();
            double tol = dts[d] == CT_F32 ? 1e-5 : 3e-2;
            ct_tensor *h = ct_tensor_set_requires_grad(xent_logits(13, 8, dts[d], 40 + mode), true);
            ct_tensor *w = ct_tensor_set_requires_grad(xent_logits(8, 37, dts[d], 50 + mode), true);
            ct_tensor *hr = ct_tensor_set_requires_grad(ct_detach(h), true);
            ct_tensor *wr = ct_tensor_set_requires_grad(ct_detach(w), true);
            ct_tensor *t = xent_targets(13, 37, -100, 60 + mode);
            seen_grad seen = {0};
            ct_scope_begin();
            ct_tensor *logits = ct_mm(h, w);
            const void *mem = ct_tensor_data(logits);
            assert_true(ct_tensor_register_hook(logits, note_grad, &seen) >= 0);
            ct_tensor *loss = ct_keep(ct_cross_entropy(logits, t, NULL, CT_REDUCTION_MEAN, -100, 0.0));
            if (mode == 1)
                ct_keep(logits);
            ct_scope_end();
            assert_int_equal(ct_backward(loss, NULL, mode == 2, false), CT_OK);
            assert_int_equal(seen.calls, 1);
            if (mode == 0)
                assert_ptr_equal(seen.data, mem);
            else
                assert_ptr_not_equal(seen.data, mem);
            ct_tensor *yr = ct_nll_loss(ct_log_softmax(ct_mm(hr, wr), 1, CT_DTYPE_UNDEFINED), t, NULL,
                                        CT_REDUCTION_MEAN, -100);
            assert_int_equal(ct_backward(yr, NULL, false, false), CT_OK);
            assert_close(ct_tensor_grad(h), ct_tensor_grad(hr), tol, tol, "logits reused: h's gradient");
            assert_close(ct_tensor_grad(w), ct_tensor_grad(wr), tol, tol, "logits reused: w's gradient");
            if (mode == 2) { /* the kept graph still has its logits: the same gradients again */
                assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
                assert_ptr_equal(seen.data, mem);
                assert_close(ct_tensor_grad(h), ct_mul_scalar(ct_tensor_grad(hr), ct_scalar_int(2)), tol, tol,
                             "second backward: h's gradient");
            }
            ct_scope_end();
        }
}

/* out= of the backward: into the input itself or another tensor, and its refusals. */
static void test_cross_entropy_backward_out(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = xent_logits(6, 11, CT_F32, 9), *t = xent_targets(6, 11, -100, 3), *lse = NULL;
    ct_tensor *go = ct_full(NULL, 0, ct_scalar_float(0.5), CT_F32, CT_CPU);
    assert_non_null(ct_cross_entropy_fused(x, t, CT_REDUCTION_MEAN, -100, &lse));
    ct_tensor *want = ct_cross_entropy_fused_backward(go, x, t, lse, CT_REDUCTION_MEAN, -100);
    ct_tensor *o = ct_zeros(CT_SHAPE(6, 11), CT_F32, CT_CPU);
    assert_ptr_equal(ct_cross_entropy_fused_backward_out(go, x, t, lse, CT_REDUCTION_MEAN, -100, o), o);
    assert_close(o, want, 0, 0, "backward out=");
    ct_tensor *xb = ct_to_dtype(x, CT_BF16), *ob = ct_clone(xb);
    ct_tensor *wantb = ct_cross_entropy_fused_backward(go, xb, t, lse, CT_REDUCTION_MEAN, -100);
    assert_ptr_equal(ct_cross_entropy_fused_backward_out(go, ob, t, lse, CT_REDUCTION_MEAN, -100, ob), ob);
    assert_close(ob, wantb, 0, 0, "backward out= into bf16 input");
    assert_ptr_equal(ct_cross_entropy_fused_backward_out(go, x, t, lse, CT_REDUCTION_MEAN, -100, x), x);
    assert_close(x, want, 0, 0, "backward out= into the input");
    const char *op = "cross_entropy_fused_backward";
    CT_ASSERT_ERR(ct_cross_entropy_fused_backward_out(go, x, t, lse, CT_REDUCTION_MEAN, -100,
                                                      ct_zeros(CT_SHAPE(6, 10), CT_F32, CT_CPU)) != NULL,
                  CT_ERROR_VALUE, "out has shape");
    CT_ASSERT_ERR(ct_cross_entropy_fused_backward_out(go, x, t, lse, CT_REDUCTION_MEAN, -100,
                                                      ct_zeros(CT_SHAPE(6, 11), CT_F64, CT_CPU)) != NULL,
                  CT_ERROR_TYPE, "out of scalar type");
    CT_ASSERT_ERR(ct_cross_entropy_fused_backward_out(go, x, t, lse, CT_REDUCTION_MEAN, -100,
                                                      ct_t(ct_zeros(CT_SHAPE(11, 6), CT_F32, CT_CPU))) != NULL,
                  CT_ERROR_VALUE, "contiguous");
    CT_ASSERT_ERR(ct_cross_entropy_fused_backward_out(go, x, t, lse, CT_REDUCTION_MEAN, -100, NULL) != NULL,
                  CT_ERROR_NULL_ARGUMENT, op);
    ct_scope_end();
}

/* Note [GELU MLP]: gelu_mlp equals linear, gelu, linear, forward and gradients, in every
 * floating dtype, with and without biases, both forms, on a 3-D input. */
static void test_gelu_mlp(void **state) {
    (void)state;
    ct_dtype dts[] = {CT_F64, CT_F32, CT_BF16, CT_F16};
    for (int d = 0; d < 4; d++)
        for (int bias = 0; bias < 2; bias++)
            for (int ap = 0; ap < 2; ap++) {
                ct_scope_begin();
                double tol = dts[d] == CT_F64 ? 1e-12 : dts[d] == CT_F32 ? 1e-5 : dts[d] == CT_F16 ? 4e-3 : 3e-2;
                ct_tensor *in[5] = {xent_logits(6, 4, dts[d], 70), xent_logits(8, 4, dts[d], 71),
                                    bias ? xent_logits(1, 8, dts[d], 72) : NULL, xent_logits(3, 8, dts[d], 73),
                                    bias ? xent_logits(1, 3, dts[d], 74) : NULL};
                in[0] = ct_reshape(in[0], CT_SHAPE(2, 3, 4));
                for (int i = 2; i < 5; i += 2)
                    in[i] = in[i] ? ct_reshape(in[i], CT_SHAPE(ct_tensor_numel(in[i]))) : NULL;
                ct_tensor *a[5], *r[5];
                for (int i = 0; i < 5; i++) {
                    a[i] = in[i] ? ct_tensor_set_requires_grad(ct_detach(in[i]), true) : NULL;
                    r[i] = in[i] ? ct_tensor_set_requires_grad(ct_detach(in[i]), true) : NULL;
                }
                ct_gelu_approximate apx = ap ? CT_GELU_APPROXIMATE_TANH : CT_GELU_APPROXIMATE_NONE;
                ct_tensor *y = ct_gelu_mlp(a[0], a[1], a[2], a[3], a[4], apx);
                ct_tensor *yr = ct_linear(ct_gelu(ct_linear(r[0], r[1], r[2]), apx), r[3], r[4]);
                assert_int_equal(ct_tensor_dtype(y), dts[d]);
                assert_int_equal(ct_tensor_dim(y), 3);
                assert_int_equal(ct_tensor_shape(y)[2], 3);
                assert_close(y, yr, tol, tol, "gelu_mlp forward");
                assert_non_null(strstr(ct_tensor_grad_fn_name(y), "GeluMlp"));
                ct_tensor *go = ct_to_dtype(ct_reshape(xent_logits(6, 3, CT_F64, 75), CT_SHAPE(2, 3, 3)), dts[d]);
                assert_int_equal(ct_backward(y, go, false, false), CT_OK);
                assert_int_equal(ct_backward(yr, go, false, false), CT_OK);
                static const char *const names[5] = {"input", "fc_weight", "fc_bias", "proj_weight", "proj_bias"};
                for (int i = 0; i < 5; i++)
                    if (a[i])
                        assert_close(ct_tensor_grad(a[i]), ct_tensor_grad(r[i]), tol, tol, names[i]);
                ct_scope_end();
            }
}

/* The gelu_mlp node keeps hidden and not the GELU's output: after the forward, the
 * graph holds one (rows, hidden_features) tensor less than linear, gelu, linear's. */
static void test_gelu_mlp_memory(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_tensor_set_requires_grad(xent_logits(256, 32, CT_F32, 80), true);
    ct_tensor *w1 = ct_tensor_set_requires_grad(xent_logits(128, 32, CT_F32, 81), true);
    ct_tensor *w2 = ct_tensor_set_requires_grad(xent_logits(32, 128, CT_F32, 82), true);
    int64_t held[2];
    for (int k = 0; k < 2; k++) {
        ct_scope_begin();
        int64_t before = ct_memory_allocated(CT_CPU);
        ct_scope_begin(); /* the ops' temporaries go; the result and its graph stay */
        ct_tensor *y = k == 0 ? ct_gelu_mlp(x, w1, NULL, w2, NULL, CT_GELU_APPROXIMATE_TANH)
                              : ct_linear(ct_gelu(ct_linear(x, w1, NULL), CT_GELU_APPROXIMATE_TANH), w2, NULL);
        ct_keep(y);
        ct_scope_end();
        held[k] = ct_memory_allocated(CT_CPU) - before;
        assert_int_equal(ct_backward(y, ct_ones_like(y, CT_DTYPE_UNDEFINED), false, false), CT_OK);
        ct_scope_end();
    }
    const int64_t h = 256 * 128 * (int64_t)sizeof(float);
    if (held[1] - held[0] < h)
        fail_msg("gelu_mlp's graph holds %lld bytes, the three ops' %lld: expected %lld fewer", (long long)held[0],
                 (long long)held[1], (long long)h);
    ct_scope_end();
}

static void test_gelu_mlp_errors(void **state) {
    (void)state;
    ct_scope_begin();
    const char *op = "gelu_mlp";
    ct_tensor *x = xent_logits(5, 4, CT_F32, 90), *w1 = xent_logits(6, 4, CT_F32, 91),
              *w2 = xent_logits(3, 6, CT_F32, 92), *b1 = ct_zeros(CT_SHAPE(6), CT_F32, CT_CPU);
    ct_gelu_approximate t = CT_GELU_APPROXIMATE_TANH;
    CT_ASSERT_ERR(ct_gelu_mlp(x, ct_t(w1), NULL, w2, NULL, t) != NULL, CT_ERROR_VALUE, "fc_weight must have shape");
    CT_ASSERT_ERR(ct_gelu_mlp(x, w1, NULL, ct_t(w2), NULL, t) != NULL, CT_ERROR_VALUE, "proj_weight must have shape");
    CT_ASSERT_ERR(ct_gelu_mlp(x, w1, ct_zeros(CT_SHAPE(5), CT_F32, CT_CPU), w2, NULL, t) != NULL, CT_ERROR_VALUE,
                  "fc_bias must have shape");
    CT_ASSERT_ERR(ct_gelu_mlp(x, w1, b1, w2, b1, t) != NULL, CT_ERROR_VALUE, "proj_bias must have shape");
    CT_ASSERT_ERR(ct_gelu_mlp(x, ct_to_dtype(w1, CT_F64), NULL, w2, NULL, t) != NULL, CT_ERROR_TYPE,
                  "expected fc_weight of scalar type Float but found Double");
    CT_ASSERT_ERR(ct_gelu_mlp(ct_to_dtype(x, CT_I64), ct_to_dtype(w1, CT_I64), NULL, ct_to_dtype(w2, CT_I64), NULL,
                              t) != NULL,
                  CT_ERROR_TYPE, "not implemented for 'Long'");
    CT_ASSERT_ERR(ct_gelu_mlp(x, w1, NULL, w2, NULL, (ct_gelu_approximate)5) != NULL, CT_ERROR_VALUE,
                  "approximate argument must be either none or tanh");
    CT_ASSERT_ERR(ct_gelu_mlp(ct_zeros(NULL, 0, CT_F32, CT_CPU), w1, NULL, w2, NULL, t) != NULL, CT_ERROR_VALUE,
                  "at least one dimension");
    CT_ASSERT_ERR(ct_gelu_mlp(NULL, w1, NULL, w2, NULL, t) != NULL, CT_ERROR_NULL_ARGUMENT, op);
    CT_ASSERT_ERR(ct_gelu_mlp(x, w1, NULL, NULL, NULL, t) != NULL, CT_ERROR_NULL_ARGUMENT, op);
    /* the backward's middle: (g @ w2) * gelu'(hidden) and its column sums, 2-d */
    ct_tensor *g = xent_logits(5, 3, CT_F32, 93), *hid = xent_logits(5, 6, CT_F32, 94), *gh = NULL, *gb = NULL;
    assert_int_equal(ct_gelu_mlp_hidden_backward(g, w2, hid, t, &gh, &gb), CT_OK);
    ct_tensor *want = ct_gelu_backward(ct_mm(g, w2), hid, t);
    const int64_t zero = 0;
    assert_close(gh, want, 0, 0, "gelu_mlp_hidden_backward");
    assert_close(gb, ct_sum(want, &zero, 1, false, CT_DTYPE_UNDEFINED), 0, 0, "gelu_mlp_hidden_backward bias");
    CT_ASSERT_ERR(ct_gelu_mlp_hidden_backward(g, ct_t(w2), hid, t, &gh, NULL) == CT_OK, CT_ERROR_VALUE,
                  "expected grad_output (rows, k) and proj_weight (k, hidden_features)");
    CT_ASSERT_ERR(ct_gelu_mlp_hidden_backward(g, w2, ct_t(hid), t, &gh, NULL) == CT_OK, CT_ERROR_VALUE,
                  "hidden must have shape (5, 6)");
    CT_ASSERT_ERR(ct_gelu_mlp_hidden_backward(g, w2, ct_to_dtype(hid, CT_F64), t, &gh, NULL) == CT_OK, CT_ERROR_TYPE,
                  "expected proj_weight and hidden of scalar type Float");
    CT_ASSERT_ERR(ct_gelu_mlp_hidden_backward(g, w2, hid, t, NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "grad_hidden");
    /* the meta device: shapes only */
    ct_tensor *m = ct_gelu_mlp(ct_empty(CT_SHAPE(2, 7, 4), CT_F32, CT_META), ct_empty(CT_SHAPE(6, 4), CT_F32, CT_META),
                               NULL, ct_empty(CT_SHAPE(3, 6), CT_F32, CT_META), NULL, t);
    CT_ASSERT_OK(m);
    assert_int_equal(ct_tensor_dim(m), 3);
    assert_int_equal(ct_tensor_shape(m)[1], 7);
    assert_int_equal(ct_tensor_shape(m)[2], 3);
    ct_scope_end();
}

static ct_tensor *xent_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    const int *mode = ud;
    int64_t tv[5] = {2, 0, -100, 4, 2};
    ct_tensor *t = ct_from_data(tv, CT_SHAPE(5), CT_I64), *lse = NULL;
    ct_tensor *y = ct_cross_entropy_fused(in[0], t, (ct_reduction)(mode[0] % 3), -100, &lse);
    if (mode[0] < 3)
        return y;
    /* the gradient that reaches lse as well */
    return ct_add(ct_sum(y, NULL, 0, false, CT_DTYPE_UNDEFINED),
                  ct_mul_scalar(ct_sum(ct_mul(lse, lse), NULL, 0, false, CT_DTYPE_UNDEFINED), ct_scalar_float(0.5)));
}

static void test_cross_entropy_fused_gradcheck(void **state) {
    (void)state;
    for (int mode = 0; mode < 6; mode++) {
        ct_scope_begin();
        ct_tensor *x = ct_tensor_set_requires_grad(xent_logits(5, 6, CT_F64, 40 + mode), true);
        if (ct_gradcheck(xent_fn, &mode, &x, 1, 1e-6, 1e-7, 1e-5) != CT_OK)
            fail_msg("cross_entropy_fused mode %d: gradcheck failed: %s", mode, ct_last_error());
        ct_scope_end();
    }
}

static void test_cross_entropy_fused_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = xent_logits(4, 5, CT_F32, 1), *lse = NULL;
    int64_t tv[4] = {0, 5, 1, -100}, tok[4] = {0, 4, 1, -100};
    ct_tensor *bad = ct_from_data(tv, CT_SHAPE(4), CT_I64), *t = ct_from_data(tok, CT_SHAPE(4), CT_I64);
    const char *op = "cross_entropy_fused";
    CT_ASSERT_ERR(ct_cross_entropy_fused(x, ct_to_dtype(t, CT_I32), CT_REDUCTION_MEAN, -100, &lse) != NULL,
                  CT_ERROR_TYPE, "expected scalar type Long but found Int");
    assert_null(lse);
    CT_ASSERT_ERR(ct_cross_entropy_fused(x, ct_narrow(t, 0, 0, 3), CT_REDUCTION_MEAN, -100, NULL) != NULL,
                  CT_ERROR_VALUE, "Expected input batch_size (4) to match target batch_size (3).");
    CT_ASSERT_ERR(ct_cross_entropy_fused(x, ct_reshape(t, CT_SHAPE(2, 2)), CT_REDUCTION_MEAN, -100, NULL) != NULL,
                  CT_ERROR_VALUE, "multi-target not supported");
    CT_ASSERT_ERR(ct_cross_entropy_fused(ct_reshape(x, CT_SHAPE(4, 5, 1)), t, CT_REDUCTION_MEAN, -100, NULL) != NULL,
                  CT_ERROR_VALUE, "expected input of shape (N, C), got 3 dimensions");
    CT_ASSERT_ERR(ct_cross_entropy_fused(ct_to_dtype(x, CT_I64), t, CT_REDUCTION_MEAN, -100, NULL) != NULL,
                  CT_ERROR_TYPE, "not implemented for 'int64'");
    CT_ASSERT_ERR(ct_cross_entropy_fused(x, bad, CT_REDUCTION_MEAN, -100, NULL) != NULL, CT_ERROR_INDEX,
                  "Target 5 is out of bounds.");
    CT_ASSERT_ERR(ct_cross_entropy(x, bad, NULL, CT_REDUCTION_SUM, -100, 0.0) != NULL, CT_ERROR_INDEX,
                  "Target 5 is out of bounds.");
    int64_t tneg[4] = {0, -1, 1, -100};
    CT_ASSERT_ERR(ct_cross_entropy_fused(x, ct_from_data(tneg, CT_SHAPE(4), CT_I64), CT_REDUCTION_NONE, -100, NULL) !=
                      NULL,
                  CT_ERROR_INDEX,
                  "Target -1 is out of bounds.");
    CT_ASSERT_ERR(ct_cross_entropy_fused(x, t, (ct_reduction)7, -100, NULL) != NULL, CT_ERROR_VALUE,
                  "7 is not a valid value for reduction");
    CT_ASSERT_ERR(ct_cross_entropy_fused(NULL, t, CT_REDUCTION_MEAN, -100, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, op);
    CT_ASSERT_ERR(ct_cross_entropy_fused(x, NULL, CT_REDUCTION_MEAN, -100, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, op);
    CT_ASSERT_ERR(ct_cross_entropy_fused(x, ct_to_device(t, CT_META), CT_REDUCTION_MEAN, -100, NULL) != NULL,
                  CT_ERROR_DEVICE, "same device");
    /* the backward's own arguments */
    ct_tensor *y = ct_cross_entropy_fused(x, t, CT_REDUCTION_MEAN, -100, &lse);
    CT_ASSERT_OK(y);
    ct_tensor *one = ct_ones(NULL, 0, CT_F32, CT_CPU);
    CT_ASSERT_OK(ct_cross_entropy_fused_backward(one, x, t, lse, CT_REDUCTION_MEAN, -100));
    CT_ASSERT_ERR(ct_cross_entropy_fused_backward(one, x, t, ct_to_dtype(lse, CT_F64), CT_REDUCTION_MEAN, -100) !=
                      NULL,
                  CT_ERROR_TYPE, "expected lse of scalar type Float but found Double");
    CT_ASSERT_ERR(ct_cross_entropy_fused_backward(one, x, t, ct_narrow(lse, 0, 0, 2), CT_REDUCTION_MEAN, -100) !=
                      NULL,
                  CT_ERROR_VALUE, "expected lse of shape (4)");
    CT_ASSERT_ERR(ct_cross_entropy_fused_backward(ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), x, t, lse, CT_REDUCTION_NONE,
                                                  -100) != NULL,
                  CT_ERROR_VALUE, "grad_output has shape");
    CT_ASSERT_ERR(ct_cross_entropy_fused_backward(ct_ones(CT_SHAPE(4), CT_F32, CT_CPU), x, t, lse, CT_REDUCTION_SUM,
                                                  -100) != NULL,
                  CT_ERROR_VALUE, "grad_output must have one element, got 4");
    CT_ASSERT_ERR(ct_cross_entropy_fused_backward(one, x, bad, lse, CT_REDUCTION_SUM, -100) != NULL, CT_ERROR_INDEX,
                  "out of bounds");
    CT_ASSERT_ERR(ct_cross_entropy_fused_backward(one, x, t, NULL, CT_REDUCTION_SUM, -100) != NULL,
                  CT_ERROR_NULL_ARGUMENT, "cross_entropy_fused_backward");
    CT_ASSERT_ERR(ct_cross_entropy_fused_backward(one, x, t, lse, (ct_reduction)-1, -100) != NULL, CT_ERROR_VALUE,
                  "not a valid value for reduction");
    /* every target ignored: the mean is 0/0 */
    int64_t all[4] = {-100, -100, -100, -100};
    double v = 0;
    assert_int_equal(ct_item_double(ct_cross_entropy_fused(x, ct_from_data(all, CT_SHAPE(4), CT_I64),
                                                           CT_REDUCTION_MEAN, -100, NULL),
                                    &v),
                     CT_OK);
    assert_true(isnan(v));
    /* META: shapes only */
    ct_tensor *mx = ct_empty(CT_SHAPE(6, 50304), CT_BF16, CT_META), *mt = ct_empty(CT_SHAPE(6), CT_I64, CT_META);
    ct_tensor *ml = NULL;
    CT_ASSERT_SHAPE(ct_cross_entropy_fused(mx, mt, CT_REDUCTION_NONE, -100, &ml), 6);
    CT_ASSERT_SHAPE(ml, 6);
    assert_int_equal(ct_tensor_dtype(ml), CT_F32);
    assert_int_equal(ct_tensor_dim(ct_cross_entropy_fused(mx, mt, CT_REDUCTION_MEAN, -100, NULL)), 0);
    CT_ASSERT_SHAPE(ct_cross_entropy_fused_backward(ct_empty(NULL, 0, CT_BF16, CT_META), mx, mt, ml, CT_REDUCTION_MEAN,
                                                    -100),
                    6, 50304);
    ct_scope_end();
}

/* ------------------------------------------------------------------ errors */

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x4 = ct_zeros(CT_SHAPE(2, 3, 5, 5), CT_F32, CT_CPU), *x2 = ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    ct_tensor *w4 = ct_zeros(CT_SHAPE(4, 3, 3, 3), CT_F32, CT_CPU), *i64 = ct_zeros(CT_SHAPE(2), CT_I64, CT_CPU);
    ct_tensor *w3 = ct_zeros(CT_SHAPE(4, 3, 3), CT_F32, CT_CPU);
    /* convolutions */
    CT_ASSERT_ERR(ct_conv1d(x4, w3, NULL, 1, 0, 1, 1) != NULL, CT_ERROR_VALUE, "Expected 2D (unbatched) or 3D");
    CT_ASSERT_ERR(ct_conv1d(ct_zeros(CT_SHAPE(2, 3, 5), CT_F32, CT_CPU), w4, NULL, 1, 0, 1, 1) != NULL, CT_ERROR_VALUE,
                  "3 dimensions");
    CT_ASSERT_ERR(ct_conv1d(NULL, w3, NULL, 1, 0, 1, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_conv2d_padding(x4, w4, NULL, NULL, "full", NULL, 1) != NULL, CT_ERROR_VALUE,
                  "Invalid padding string 'full'");
    CT_ASSERT_ERR(ct_conv2d_padding(x4, w4, NULL, P22, "same", NULL, 1) != NULL, CT_ERROR_VALUE,
                  "not supported for strided convolutions");
    CT_ASSERT_ERR(ct_conv2d_padding(x4, w4, NULL, NULL, NULL, NULL, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "padding");
    CT_ASSERT_ERR(ct_conv1d_padding(ct_zeros(CT_SHAPE(2, 5), CT_F32, CT_CPU), w3, NULL, 1, "same", 1, 1) != NULL,
                  CT_ERROR_VALUE, "channels");
    CT_ASSERT_ERR(ct_conv_transpose2d(x4, w4, NULL, NULL, NULL, NULL, 1, NULL) != NULL, CT_ERROR_VALUE,
                  "Given transposed=1");
    CT_ASSERT_ERR(ct_conv_transpose2d(x4, ct_zeros(CT_SHAPE(3, 2, 3, 3), CT_F32, CT_CPU), NULL, NULL, NULL, P11, 1,
                                      NULL) != NULL,
                  CT_ERROR_VALUE, "output padding must be smaller");
    CT_ASSERT_ERR(ct_conv_transpose2d(x2, w4, NULL, NULL, NULL, NULL, 1, NULL) != NULL, CT_ERROR_VALUE, "3D (unbatched)");
    CT_ASSERT_ERR(ct_conv_transpose2d(x4, ct_zeros(CT_SHAPE(3, 2, 3, 3), CT_F64, CT_CPU), NULL, NULL, NULL, NULL, 1,
                                      NULL) != NULL,
                  CT_ERROR_TYPE, "should be the same");
    CT_ASSERT_ERR(ct_conv_transpose2d(NULL, w4, NULL, NULL, NULL, NULL, 1, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    /* pooling */
    CT_ASSERT_ERR(ct_avg_pool2d(x2, P22, NULL, NULL, false, true, 0) != NULL, CT_ERROR_VALUE, "3D or 4D");
    CT_ASSERT_ERR(ct_avg_pool2d(x4, P22, NULL, P22, false, true, 0) != NULL, CT_ERROR_VALUE, "half of kernel size");
    CT_ASSERT_ERR(ct_avg_pool2d(x4, CT_INDEX(0, 2), NULL, NULL, false, true, 0) != NULL, CT_ERROR_VALUE,
                  "greater than zero");
    CT_ASSERT_ERR(ct_avg_pool2d(x4, CT_INDEX(9, 9), NULL, NULL, false, true, 0) != NULL, CT_ERROR_VALUE, "too small");
    CT_ASSERT_ERR(ct_avg_pool2d(x4, NULL, NULL, NULL, false, true, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "kernel");
    CT_ASSERT_ERR(ct_avg_pool2d(ct_zeros(CT_SHAPE(1, 1, 4, 4), CT_BOOL, CT_CPU), P22, NULL, NULL, false, true, 0) !=
                      NULL,
                  CT_ERROR_TYPE, "not implemented for 'bool'");
    CT_ASSERT_ERR(ct_avg_pool2d_backward(x4, x4, P22, NULL, NULL, false, true, 0) != NULL, CT_ERROR_VALUE,
                  "grad_output has shape");
    CT_ASSERT_ERR(ct_adaptive_avg_pool2d(x2, P22) != NULL, CT_ERROR_VALUE, "Expected 3D or 4D");
    CT_ASSERT_ERR(ct_adaptive_avg_pool2d(ct_zeros(CT_SHAPE(2, 3, 0, 4), CT_F32, CT_CPU), P22) != NULL, CT_ERROR_VALUE,
                  "non-zero size");
    CT_ASSERT_ERR(ct_adaptive_avg_pool2d(x4, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "output_size");
    CT_ASSERT_ERR(ct_adaptive_avg_pool2d_backward(ct_zeros(CT_SHAPE(1, 3, 2, 2), CT_F32, CT_CPU), x4) != NULL, CT_ERROR_VALUE, "grad_output has shape");
    /* normalization */
    ct_tensor *c4 = ct_zeros(CT_SHAPE(4), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_batch_norm(x4, c4, NULL, NULL, NULL, true, 0.1, 1e-5) != NULL, CT_ERROR_VALUE,
                  "running_mean should contain 3 elements not 4");
    CT_ASSERT_ERR(ct_batch_norm(ct_zeros(CT_SHAPE(1, 3), CT_F32, CT_CPU), NULL, NULL, NULL, NULL, true, 0.1, 1e-5) !=
                      NULL,
                  CT_ERROR_VALUE, "Expected more than 1 value per channel");
    CT_ASSERT_ERR(ct_batch_norm(x4, NULL, NULL, NULL, NULL, false, 0.1, 1e-5) != NULL, CT_ERROR_VALUE,
                  "evaluation mode");
    CT_ASSERT_ERR(ct_batch_norm(ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU), NULL, NULL, NULL, NULL, true, 0.1, 1e-5) != NULL,
                  CT_ERROR_VALUE, "2D or higher");
    CT_ASSERT_ERR(ct_layer_norm(x4, CT_INDEX(4), 1, NULL, NULL, 1e-5) != NULL, CT_ERROR_VALUE,
                  "Given normalized_shape=[4], expected input with shape [*, 4], but got input of size[2, 3, 5, 5]");
    CT_ASSERT_ERR(ct_layer_norm(x4, CT_INDEX(5), 1, c4, NULL, 1e-5) != NULL, CT_ERROR_VALUE, "same shape");
    CT_ASSERT_ERR(ct_layer_norm(x4, NULL, 1, NULL, NULL, 1e-5) != NULL, CT_ERROR_NULL_ARGUMENT, "normalized_shape");
    CT_ASSERT_ERR(ct_group_norm(x4, 2, NULL, NULL, 1e-5) != NULL, CT_ERROR_VALUE, "divisible by num_groups");
    CT_ASSERT_ERR(ct_group_norm(x4, 3, c4, NULL, 1e-5) != NULL, CT_ERROR_VALUE, "weight should contain 3");
    CT_ASSERT_ERR(ct_rms_norm(x4, CT_INDEX(4), 1, NULL, 1e-5) != NULL, CT_ERROR_VALUE, "normalized_shape=[4]");
    CT_ASSERT_ERR(ct_rms_norm(x4, CT_INDEX(5), 1, c4, 1e-5) != NULL, CT_ERROR_VALUE, "same shape");
    CT_ASSERT_ERR(ct_rms_norm(x4, CT_INDEX(5), 0, NULL, 1e-5) != NULL, CT_ERROR_VALUE, "between 1 and");
    CT_ASSERT_ERR(ct_rms_norm(ct_zeros(CT_SHAPE(2, 5), CT_I64, CT_CPU), CT_INDEX(5), 1, NULL, 1e-5) != NULL,
                  CT_ERROR_TYPE, "not implemented");
    ct_tensor *gi = NULL;
    CT_ASSERT_ERR(ct_rms_norm_backward(x2, x4, CT_INDEX(5), 1, NULL, 1e-5, &gi, NULL) == CT_OK, CT_ERROR_VALUE,
                  "grad_output has shape");
    CT_ASSERT_ERR(ct_rms_norm_backward(x4, x4, CT_INDEX(5), 1, NULL, 1e-5, NULL, NULL) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "grad_input");
    CT_ASSERT_ERR(ct_layer_norm(x4, CT_INDEX(5), 1, NULL, ct_zeros(CT_SHAPE(4), CT_F32, CT_CPU), 1e-5) != NULL,
                  CT_ERROR_VALUE, "Expected bias to be of same shape");
    CT_ASSERT_ERR(ct_layer_norm(ct_zeros(CT_SHAPE(2, 5), CT_I64, CT_CPU), CT_INDEX(5), 1, NULL, NULL, 1e-5) != NULL,
                  CT_ERROR_TYPE, "not implemented for 'int64'");
    ct_tensor *c5 = ct_zeros(CT_SHAPE(5), CT_F32, CT_CPU), *gw = NULL, *gb = NULL;
    CT_ASSERT_ERR(ct_layer_norm_backward(x2, x4, CT_INDEX(5), 1, c5, c5, 1e-5, &gi, &gw, &gb) == CT_OK,
                  CT_ERROR_VALUE, "grad_output has shape");
    assert_null(gi);
    assert_null(gw);
    CT_ASSERT_ERR(ct_layer_norm_backward(x4, x4, CT_INDEX(5), 1, NULL, NULL, 1e-5, NULL, NULL, NULL) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "grad_input");
    CT_ASSERT_ERR(ct_layer_norm_backward(x4, x4, NULL, 1, NULL, NULL, 1e-5, &gi, NULL, NULL) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "normalized_shape");
    CT_ASSERT_ERR(ct_layer_norm_backward(x4, x4, CT_INDEX(5), 0, NULL, NULL, 1e-5, &gi, NULL, NULL) == CT_OK,
                  CT_ERROR_VALUE, "between 1 and");
    CT_ASSERT_ERR(ct_layer_norm_backward(x4, x4, CT_INDEX(4), 1, NULL, NULL, 1e-5, &gi, NULL, NULL) == CT_OK,
                  CT_ERROR_VALUE, "normalized_shape=[4]");
    CT_ASSERT_ERR(ct_layer_norm_backward(x4, x4, CT_INDEX(5), 1, c4, NULL, 1e-5, &gi, &gw, NULL) == CT_OK,
                  CT_ERROR_VALUE, "Expected weight to be of same shape");
    CT_ASSERT_ERR(ct_layer_norm_backward(x4, x4, CT_INDEX(5), 1, ct_zeros(CT_SHAPE(5), CT_F64, CT_CPU), NULL, 1e-5,
                                         &gi, &gw, NULL) == CT_OK,
                  CT_ERROR_TYPE, "expected weight to have dtype float32");
    CT_ASSERT_ERR(ct_layer_norm_backward(NULL, x4, CT_INDEX(5), 1, NULL, NULL, 1e-5, &gi, NULL, NULL) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "");
    /* gelu_backward */
    CT_ASSERT_ERR(ct_gelu_backward(x4, x4, (ct_gelu_approximate)7) != NULL, CT_ERROR_VALUE, "none or tanh");
    CT_ASSERT_ERR(ct_gelu_backward(x2, x4, CT_GELU_APPROXIMATE_TANH) != NULL, CT_ERROR_VALUE,
                  "must have the shape and dtype of input");
    CT_ASSERT_ERR(ct_gelu_backward(ct_to_dtype(x4, CT_F64), x4, CT_GELU_APPROXIMATE_NONE) != NULL, CT_ERROR_VALUE,
                  "must have the shape and dtype of input");
    ct_tensor *i4 = ct_zeros(CT_SHAPE(2, 3), CT_I64, CT_CPU);
    CT_ASSERT_ERR(ct_gelu_backward(i4, i4, CT_GELU_APPROXIMATE_NONE) != NULL, CT_ERROR_TYPE, "not implemented");
    CT_ASSERT_ERR(ct_gelu_backward(NULL, x4, CT_GELU_APPROXIMATE_NONE) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_gelu_backward(x4, NULL, CT_GELU_APPROXIMATE_NONE) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    /* embedding */
    ct_tensor *emb = ct_zeros(CT_SHAPE(5, 3), CT_F32, CT_CPU);
    int64_t bad[2] = {1, 5};
    CT_ASSERT_ERR(ct_embedding(ct_from_data(bad, CT_SHAPE(2), CT_I64), emb, CT_NO_PADDING_IDX) != NULL, CT_ERROR_INDEX,
                  "index out of range in self");
    CT_ASSERT_ERR(ct_embedding(x2, emb, CT_NO_PADDING_IDX) != NULL, CT_ERROR_TYPE, "'indices'");
    CT_ASSERT_ERR(ct_embedding(i64, c4, CT_NO_PADDING_IDX) != NULL, CT_ERROR_VALUE, "'weight' must be 2-D");
    CT_ASSERT_ERR(ct_embedding(i64, emb, 5) != NULL, CT_ERROR_VALUE, "Padding_idx must be within num_embeddings");
    CT_ASSERT_ERR(ct_embedding(NULL, emb, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_embedding_backward(ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU), ct_from_data(bad, CT_SHAPE(2), CT_I64),
                                        5, CT_NO_PADDING_IDX) != NULL,
                  CT_ERROR_INDEX, "out of range");
    CT_ASSERT_ERR(ct_embedding_backward(x4, i64, 5, CT_NO_PADDING_IDX) != NULL, CT_ERROR_VALUE, "does not match");
    /* attention */
    ct_tensor *q = ct_zeros(CT_SHAPE(2, 4, 8), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_scaled_dot_product_attention(q, ct_zeros(CT_SHAPE(2, 4, 7), CT_F32, CT_CPU), q, NULL, 0, false,
                                                  NULL) != NULL,
                  CT_ERROR_VALUE, "last dimension");
    CT_ASSERT_ERR(ct_scaled_dot_product_attention(q, q, ct_zeros(CT_SHAPE(3, 4, 8), CT_F32, CT_CPU), NULL, 0, false,
                                                  NULL) != NULL,
                  CT_ERROR_VALUE, "same batch dimensions");
    CT_ASSERT_ERR(ct_scaled_dot_product_attention(q, q, ct_to_dtype(q, CT_F64), NULL, 0, false, NULL) != NULL,
                  CT_ERROR_TYPE, "same dtype");
    CT_ASSERT_ERR(ct_scaled_dot_product_attention(q, q, q, ct_zeros(CT_SHAPE(4, 4), CT_BOOL, CT_CPU), 0, true, NULL) !=
                      NULL,
                  CT_ERROR_VALUE, "should not be set when is_causal=True");
    CT_ASSERT_ERR(ct_scaled_dot_product_attention(q, q, q, ct_zeros(CT_SHAPE(3, 4), CT_BOOL, CT_CPU), 0, false, NULL) !=
                      NULL,
                  CT_ERROR_VALUE, "cannot be broadcast");
    CT_ASSERT_ERR(ct_scaled_dot_product_attention(q, q, q, ct_zeros(CT_SHAPE(4, 4), CT_I64, CT_CPU), 0, false, NULL) !=
                      NULL,
                  CT_ERROR_TYPE, "bool or float");
    CT_ASSERT_ERR(ct_scaled_dot_product_attention(q, q, q, NULL, 2, false, NULL) != NULL, CT_ERROR_VALUE,
                  "between 0 and 1");
    CT_ASSERT_ERR(ct_scaled_dot_product_attention(c4, c4, c4, NULL, 0, false, NULL) != NULL, CT_ERROR_VALUE,
                  "at least 2");
    CT_ASSERT_ERR(ct_scaled_dot_product_attention(NULL, q, q, NULL, 0, false, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    ct_tensor *g3[3];
    CT_ASSERT_ERR(ct_scaled_dot_product_attention_backward(x2, q, q, q, NULL, false, NULL, &g3[0], &g3[1], &g3[2]) ==
                      CT_OK,
                  CT_ERROR_VALUE, "grad_output has shape");
    CT_ASSERT_ERR(ct_scaled_dot_product_attention_backward(q, q, q, q, NULL, false, NULL, NULL, &g3[1], &g3[2]) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "must not be NULL");
    /* losses */
    ct_tensor *x53 = ct_zeros(CT_SHAPE(5, 3), CT_F32, CT_CPU);
    int64_t tgt[5] = {0, 1, 2, 7, 1};
    ct_tensor *t5 = ct_from_data(tgt, CT_SHAPE(5), CT_I64);
    CT_ASSERT_ERR(ct_cross_entropy(x53, t5, NULL, CT_REDUCTION_MEAN, -100, 0) != NULL, CT_ERROR_INDEX,
                  "Target 7 is out of bounds.");
    CT_ASSERT_ERR(ct_cross_entropy(x53, i64, NULL, CT_REDUCTION_MEAN, -100, 0) != NULL, CT_ERROR_VALUE,
                  "Expected input batch_size (5) to match target batch_size (2).");
    CT_ASSERT_ERR(ct_cross_entropy(x53, t5, c4, CT_REDUCTION_MEAN, -100, 0) != NULL, CT_ERROR_VALUE,
                  "weight tensor should be defined either for all 3 classes");
    CT_ASSERT_ERR(ct_cross_entropy(x53, t5, NULL, CT_REDUCTION_MEAN, -100, 1.5) != NULL, CT_ERROR_VALUE,
                  "label_smoothing must be between 0.0 and 1.0");
    /* a float target of another shape than the input is class labels of the wrong dtype,
     * as in PyTorch; an integer one of the input's shape is probabilities of the wrong dtype */
    CT_ASSERT_ERR(ct_cross_entropy(x53, x2, NULL, CT_REDUCTION_MEAN, -100, 0) != NULL, CT_ERROR_TYPE,
                  "cross_entropy: expected scalar type Long but found Float");
    CT_ASSERT_ERR(ct_cross_entropy(x53, ct_to_dtype(t5, CT_F32), NULL, CT_REDUCTION_MEAN, -100, 0) != NULL,
                  CT_ERROR_TYPE, "cross_entropy: expected scalar type Long but found Float");
    CT_ASSERT_ERR(ct_cross_entropy(x53, ct_zeros(CT_SHAPE(5, 3), CT_I64, CT_CPU), NULL, CT_REDUCTION_MEAN, -100, 0) !=
                      NULL,
                  CT_ERROR_TYPE, "Expected floating point type for target with class probabilities, got Long");
    CT_ASSERT_ERR(ct_cross_entropy(x53, ct_to_dtype(t5, CT_I32), NULL, CT_REDUCTION_MEAN, -100, 0) != NULL,
                  CT_ERROR_TYPE, "expected scalar type Long");
    CT_ASSERT_ERR(ct_cross_entropy(x53, t5, NULL, (ct_reduction)7, -100, 0) != NULL, CT_ERROR_VALUE,
                  "not a valid value for reduction");
    CT_ASSERT_ERR(ct_cross_entropy(NULL, t5, NULL, CT_REDUCTION_MEAN, -100, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_nll_loss(ct_zeros(CT_SHAPE(2, 3, 4), CT_F32, CT_CPU), i64, NULL, CT_REDUCTION_MEAN, -100) != NULL,
                  CT_ERROR_VALUE, "Expected target size [2, 4], got [2]");
    CT_ASSERT_ERR(ct_nll_loss(x53, ct_zeros(CT_SHAPE(5, 3), CT_I64, CT_CPU), NULL, CT_REDUCTION_MEAN, -100) != NULL,
                  CT_ERROR_VALUE, "multi-target not supported");
    CT_ASSERT_ERR(ct_nll_loss_backward(x2, x53, t5, NULL, CT_REDUCTION_MEAN, -100) != NULL, CT_ERROR_VALUE,
                  "one element");
    CT_ASSERT_ERR(ct_mse_loss(x53, x2, CT_REDUCTION_MEAN) != NULL, CT_ERROR_VALUE, "same size");
    CT_ASSERT_ERR(ct_mse_loss(t5, t5, CT_REDUCTION_MEAN) != NULL, CT_ERROR_TYPE, "not implemented");
    CT_ASSERT_ERR(ct_l1_loss(x53, NULL, CT_REDUCTION_MEAN) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_smooth_l1_loss(x53, x53, CT_REDUCTION_MEAN, -1) != NULL, CT_ERROR_VALUE, "negative values for beta");
    CT_ASSERT_ERR(ct_huber_loss(x53, x53, CT_REDUCTION_MEAN, 0) != NULL, CT_ERROR_VALUE, "non-positive values for delta");
    CT_ASSERT_ERR(ct_huber_loss(x53, x53, CT_REDUCTION_BATCHMEAN, 1) != NULL, CT_ERROR_VALUE, "reduction");
    CT_ASSERT_ERR(ct_binary_cross_entropy(ct_full(CT_SHAPE(2), ct_scalar_float(1.5), CT_F32, CT_CPU),
                                          ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU), NULL, CT_REDUCTION_MEAN) != NULL,
                  CT_ERROR_VALUE, "between 0 and 1");
    CT_ASSERT_ERR(ct_binary_cross_entropy_with_logits(x53, x2, NULL, NULL, CT_REDUCTION_MEAN) != NULL, CT_ERROR_VALUE,
                  "same size");
    CT_ASSERT_ERR(ct_kl_div(x53, x2, CT_REDUCTION_BATCHMEAN, false) != NULL, CT_ERROR_VALUE, "same size");
    CT_ASSERT_ERR(ct_kl_div(x53, NULL, CT_REDUCTION_SUM, false) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    ct_scope_end();
}

/* META: the fused kernels give shapes without data. */
/* The float32 kernels (gelu_backward in SLEEF-vectorised chunks, layer_norm) against
 * float64, on sizes that leave a partial chunk and cross the threading threshold. */
static void test_fused_float32(void **state) {
    (void)state;
    ct_manual_seed(11);
    ct_scope_begin();
    ct_tensor *x = ct_mul_scalar(ct_randn(CT_SHAPE(70, 1031), CT_F64, CT_CPU), ct_scalar_float(3));
    ct_tensor *g = ct_randn(CT_SHAPE(70, 1031), CT_F64, CT_CPU);
    ct_tensor *x32 = ct_to_dtype(x, CT_F32), *g32 = ct_to_dtype(g, CT_F32);
    for (int a = 0; a < 2; a++) {
        ct_tensor *ref = ct_gelu_backward(g, x, (ct_gelu_approximate)a);
        ct_tensor *got = ct_to_dtype(ct_gelu_backward(g32, x32, (ct_gelu_approximate)a), CT_F64);
        CT_ASSERT_OK(got);
        double d = -1;
        ct_item_double(ct_amax(ct_abs(ct_sub(ref, got)), NULL, 0, false), &d);
        assert_true(d >= 0 && d < 1e-5);
    }
    ct_tensor *w = ct_randn(CT_SHAPE(1031), CT_F64, CT_CPU), *b = ct_randn(CT_SHAPE(1031), CT_F64, CT_CPU);
    ct_tensor *ref = ct_layer_norm(x, CT_INDEX(1031), 1, w, b, 1e-5);
    ct_tensor *got = ct_to_dtype(
        ct_layer_norm(x32, CT_INDEX(1031), 1, ct_to_dtype(w, CT_F32), ct_to_dtype(b, CT_F32), 1e-5), CT_F64);
    CT_ASSERT_OK(got);
    double d = -1;
    ct_item_double(ct_amax(ct_abs(ct_sub(ref, got)), NULL, 0, false), &d);
    assert_true(d >= 0 && d < 1e-4);
    ct_tensor *gi = NULL, *gw = NULL, *gb = NULL, *gi32 = NULL, *gw32 = NULL, *gb32 = NULL;
    assert_int_equal(ct_layer_norm_backward(g, x, CT_INDEX(1031), 1, w, b, 1e-5, &gi, &gw, &gb), CT_OK);
    assert_int_equal(ct_layer_norm_backward(g32, x32, CT_INDEX(1031), 1, ct_to_dtype(w, CT_F32),
                                            ct_to_dtype(b, CT_F32), 1e-5, &gi32, &gw32, &gb32),
                     CT_OK);
    const ct_tensor *pairs[3][2] = {{gi, gi32}, {gw, gw32}, {gb, gb32}};
    for (int i = 0; i < 3; i++) {
        ct_tensor *r = ct_to_dtype(pairs[i][1], CT_F64);
        ct_item_double(ct_amax(ct_div(ct_abs(ct_sub(pairs[i][0], r)), ct_add_scalar(ct_abs(pairs[i][0]),
                                                                                    ct_scalar_float(1))),
                               NULL, 0, false),
                       &d);
        assert_true(d >= 0 && d < 1e-4);
    }
    ct_scope_end();
}

static double max_abs_diff(const ct_tensor *a, const ct_tensor *b) {
    double d = -1;
    ct_item_double(ct_amax(ct_abs(ct_sub(a, b)), NULL, 0, false), &d);
    return d;
}

/* The op entries under the nn composites (ct_fused_layer_norm,
 * ct_fused_scaled_dot_product_attention) and the attention check of ctorch/ext.h: the
 * composites' results, their errors, NULL arguments. */
static void test_public_op_entries(void **state) {
    (void)state;
    ct_manual_seed(5);
    ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(2, 3, 4), CT_F32, CT_CPU);
    ct_tensor *w = ct_randn(CT_SHAPE(3, 4), CT_F32, CT_CPU), *b = ct_randn(CT_SHAPE(3, 4), CT_F32, CT_CPU);
    ct_tensor *y = ct_fused_layer_norm(x, CT_INDEX(3, 4), 2, w, b, 1e-5);
    CT_ASSERT_OK(y);
    assert_true(max_abs_diff(y, ct_layer_norm(x, CT_INDEX(3, 4), 2, w, b, 1e-5)) == 0);
    /* the composite takes mixed dtypes, the op does not */
    ct_tensor *w64 = ct_to_dtype(w, CT_F64);
    CT_ASSERT_OK(ct_layer_norm(x, CT_INDEX(3, 4), 2, w64, NULL, 1e-5));
    CT_ASSERT_ERR(ct_fused_layer_norm(x, CT_INDEX(3, 4), 2, w64, NULL, 1e-5) != NULL, CT_ERROR_TYPE, "dtype");
    CT_ASSERT_ERR(ct_fused_layer_norm(x, CT_INDEX(5), 1, NULL, NULL, 1e-5) != NULL, CT_ERROR_VALUE,
                  "normalized_shape");
    CT_ASSERT_ERR(ct_fused_layer_norm(NULL, CT_INDEX(4), 1, NULL, NULL, 1e-5) != NULL, CT_ERROR_NULL_ARGUMENT, "");

    ct_tensor *q = ct_randn(CT_SHAPE(2, 5, 8), CT_F32, CT_CPU), *k = ct_randn(CT_SHAPE(2, 6, 8), CT_F32, CT_CPU);
    ct_tensor *v = ct_randn(CT_SHAPE(2, 6, 3), CT_F32, CT_CPU);
    const double scale = 0.3;
    for (int c = 0; c < 2; c++) {
        ct_tensor *a1 = ct_fused_scaled_dot_product_attention(q, k, v, NULL, c, NULL);
        CT_ASSERT_OK(a1);
        assert_true(max_abs_diff(a1, ct_scaled_dot_product_attention(q, k, v, NULL, 0, c, NULL)) == 0);
        ct_tensor *a2 = ct_fused_scaled_dot_product_attention(q, k, v, NULL, c, &scale);
        assert_true(max_abs_diff(a2, ct_scaled_dot_product_attention(q, k, v, NULL, 0, c, &scale)) == 0);
    }
    assert_int_equal(ct_scaled_dot_product_attention_check(q, k, v, NULL, true), CT_OK);
    ct_tensor *k7 = ct_zeros(CT_SHAPE(2, 6, 7), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_scaled_dot_product_attention_check(q, k7, v, NULL, false) == CT_OK, CT_ERROR_VALUE,
                  "last dimension");
    CT_ASSERT_ERR(ct_fused_scaled_dot_product_attention(q, k7, v, NULL, false, NULL) != NULL, CT_ERROR_VALUE,
                  "last dimension");
    /* the path with dropout refuses what the op refuses */
    CT_ASSERT_ERR(ct_scaled_dot_product_attention(q, k7, v, NULL, 0.5, false, NULL) != NULL, CT_ERROR_VALUE,
                  "last dimension");
    CT_ASSERT_ERR(ct_scaled_dot_product_attention(q, k, v, ct_zeros(CT_SHAPE(5, 6), CT_I64, CT_CPU), 0.5, false,
                                                  NULL) != NULL,
                  CT_ERROR_TYPE, "bool or float");
    CT_ASSERT_ERR(ct_scaled_dot_product_attention_check(q, NULL, v, NULL, false) == CT_OK, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_fused_scaled_dot_product_attention(q, k, NULL, NULL, false, NULL) != NULL, CT_ERROR_NULL_ARGUMENT,
                  "");
    ct_scope_end();
}

/* batch_norm's running statistics are written with grad mode off (Note [Statistics
 * without a graph]) and the caller's grad mode comes back unchanged, on or off. */
static void test_batch_norm_grad_mode(void **state) {
    (void)state;
    ct_manual_seed(6);
    ct_scope_begin();
    ct_tensor *x = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(4, 3, 2), CT_F32, CT_CPU), true);
    ct_tensor *rm = ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU), *rv = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    for (int on = 1; on >= 0; on--) {
        bool prev = ct_set_grad_enabled(on);
        int64_t version = ct_tensor_version(rm);
        ct_tensor *y = ct_batch_norm(x, rm, rv, NULL, NULL, true, 0.1, 1e-5);
        CT_ASSERT_OK(y);
        assert_int_equal(ct_is_grad_enabled(), on);
        assert_true(ct_tensor_version(rm) > version);
        assert_false(ct_tensor_requires_grad(rm));
        assert_null(ct_tensor_grad_fn_name(rm));
        assert_int_equal(ct_tensor_requires_grad(y), on);
        ct_set_grad_enabled(prev);
    }
    ct_scope_end();
}

static void test_meta(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_empty(CT_SHAPE(2, 3, 7, 8), CT_F32, CT_META);
    CT_ASSERT_SHAPE(ct_avg_pool2d(x, P33, P22, P11, true, false, 0), 2, 3, 4, 5);
    CT_ASSERT_SHAPE(ct_adaptive_avg_pool2d(x, CT_INDEX(2, 2)), 2, 3, 2, 2);
    CT_ASSERT_SHAPE(ct_rms_norm(x, CT_INDEX(8), 1, NULL, -1), 2, 3, 7, 8);
    ct_tensor *w8 = ct_empty(CT_SHAPE(8), CT_F32, CT_META);
    CT_ASSERT_SHAPE(ct_layer_norm(x, CT_INDEX(8), 1, w8, w8, 1e-5), 2, 3, 7, 8);
    ct_tensor *gi = NULL, *gw = NULL, *gb = NULL;
    assert_int_equal(ct_layer_norm_backward(x, x, CT_INDEX(8), 1, w8, w8, 1e-5, &gi, &gw, &gb), CT_OK);
    CT_ASSERT_SHAPE(gi, 2, 3, 7, 8);
    CT_ASSERT_SHAPE(gw, 8);
    CT_ASSERT_SHAPE(gb, 8);
    CT_ASSERT_SHAPE(ct_gelu_backward(x, x, CT_GELU_APPROXIMATE_TANH), 2, 3, 7, 8);
    CT_ASSERT_SHAPE(ct_conv_transpose2d(x, ct_empty(CT_SHAPE(3, 4, 3, 3), CT_F32, CT_META), NULL, P22, P11, P11, 1, NULL),
                    2, 4, 14, 16);
    ct_tensor *q = ct_empty(CT_SHAPE(2, 4, 5, 8), CT_F32, CT_META), *v = ct_empty(CT_SHAPE(2, 4, 6, 3), CT_F32, CT_META);
    CT_ASSERT_SHAPE(ct_scaled_dot_product_attention(q, ct_empty(CT_SHAPE(2, 4, 6, 8), CT_F32, CT_META), v, NULL, 0,
                                                    false, NULL),
                    2, 4, 5, 3);
    ct_tensor *t = ct_empty(CT_SHAPE(2, 7), CT_I64, CT_META);
    CT_ASSERT_SHAPE(ct_nll_loss(ct_empty(CT_SHAPE(2, 3, 7), CT_F32, CT_META), t, NULL, CT_REDUCTION_NONE, -100), 2, 7);
    CT_ASSERT_SHAPE(ct_embedding(t, ct_empty(CT_SHAPE(9, 4), CT_F32, CT_META), CT_NO_PADDING_IDX), 2, 7, 4);
    ct_scope_end();
}

/* ------------------------------------------------------------------ distances */

#include "data/distance_golden.h"

typedef struct dist_case {
    const char *name;
    int kind; /* 0 normalize, 1 cosine_similarity, 2 pairwise_distance */
    double p, eps;
    int64_t dim;
    bool keepdim;
    const double *x1, *x2, *out, *g1, *g2;
    const int64_t *s1, *s2, *so;
    int n1, n2, no;
} dist_case;

#define X1(c) c##_x1, NULL, c##_out, c##_g1, NULL, c##_x1_shape, NULL, c##_out_shape, c##_x1_ndim, 0, c##_out_ndim
#define X2(c) c##_x1, c##_x2, c##_out, c##_g1, c##_g2, c##_x1_shape, c##_x2_shape, c##_out_shape, c##_x1_ndim, \
              c##_x2_ndim, c##_out_ndim
static const dist_case dist_cases[] = {
    {"norm_p2_d1", 0, 2, 1e-12, 1, false, X1(norm_p2_d1)},
    {"norm_p1_d0", 0, 1, 1e-12, 0, false, X1(norm_p1_d0)},
    {"norm_clamp", 0, 2, 0.05, 1, false, X1(norm_clamp)},
    {"norm_p3_dm1", 0, 3, 1e-12, -1, false, X1(norm_p3_dm1)},
    {"cos_bcast", 1, 0, 1e-8, 1, false, X2(cos_bcast)},
    {"cos_3d", 1, 0, 1e-8, -1, false, X2(cos_3d)},
    {"cos_eps", 1, 0, 0.1, 1, false, X2(cos_eps)},
    {"pd_p2", 2, 2, 1e-6, 0, false, X2(pd_p2)},
    {"pd_p1_keep", 2, 1, 1e-6, 0, true, X2(pd_p1_keep)},
    {"pd_p3_bcast", 2, 3, 0.01, 0, false, X2(pd_p3_bcast)},
};

static ct_tensor *dist_call(const dist_case *c, ct_tensor *const *x) {
    switch (c->kind) {
    case 0:
        return ct_normalize(x[0], c->p, c->dim, c->eps);
    case 1:
        return ct_cosine_similarity(x[0], x[1], c->dim, c->eps);
    default:
        return ct_pairwise_distance(x[0], x[1], c->p, c->eps, c->keepdim);
    }
}

static ct_tensor *dist_fn(ct_tensor *const *x, int n, void *ud) {
    (void)n;
    return dist_call(ud, x);
}

static void expect_values(const char *what, const char *name, const ct_tensor *t, const double *want,
                          const int64_t *shape, int ndim) {
    if (!t)
        fail_msg("%s %s: %s", name, what, ct_last_error());
    assert_int_equal(ct_tensor_dim(t), ndim);
    for (int i = 0; i < ndim; i++)
        assert_int_equal(ct_tensor_shape(t)[i], shape[i]);
    ct_tensor *c = ct_contiguous(ct_to_dtype(t, CT_F64));
    const double *v = ct_tensor_data(c);
    for (int64_t i = 0; i < ct_tensor_numel(c); i++)
        if (!(fabs(v[i] - want[i]) <= 1e-12 + 1e-10 * fabs(want[i])))
            fail_msg("%s %s[%lld]: %.17g, PyTorch %.17g", name, what, (long long)i, v[i], want[i]);
}

static void test_distance_golden(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof dist_cases / sizeof dist_cases[0]; k++) {
        const dist_case *c = &dist_cases[k];
        ct_scope_begin();
        ct_tensor *x[2] = {ct_tensor_set_requires_grad(ct_from_data(c->x1, c->s1, c->n1, CT_F64), true),
                           c->x2 ? ct_tensor_set_requires_grad(ct_from_data(c->x2, c->s2, c->n2, CT_F64), true)
                                 : NULL};
        ct_tensor *y = dist_call(c, x);
        expect_values("out", c->name, y, c->out, c->so, c->no);
        /* gradients of sum(y * linspace(0.5, 1.5, numel)) */
        const int64_t m = ct_tensor_numel(y);
        double *w = malloc(sizeof(double) * (size_t)m);
        for (int64_t i = 0; i < m; i++)
            w[i] = m > 1 ? 0.5 + (double)i / (double)(m - 1) : 0.5;
        ct_tensor *wt = ct_reshape(ct_from_data(w, CT_SHAPE(m), CT_F64), ct_tensor_shape(y), ct_tensor_dim(y));
        free(w);
        assert_int_equal(ct_backward(ct_sum(ct_mul(y, wt), NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false),
                         CT_OK);
        expect_values("grad x1", c->name, ct_tensor_grad(x[0]), c->g1, c->s1, c->n1);
        if (c->x2)
            expect_values("grad x2", c->name, ct_tensor_grad(x[1]), c->g2, c->s2, c->n2);
        /* and gradcheck in float64; not for cos_eps, whose gradient is PyTorch's (the
         * unclamped norm's, Note [cosine_similarity's eps]) and not the derivative of
         * the clamped function (torch.autograd.gradcheck fails there too) */
        if (!strcmp(c->name, "cos_eps")) {
            ct_scope_end();
            continue;
        }
        ct_tensor *in[2] = {ct_tensor_set_requires_grad(ct_from_data(c->x1, c->s1, c->n1, CT_F64), true),
                            c->x2 ? ct_tensor_set_requires_grad(ct_from_data(c->x2, c->s2, c->n2, CT_F64), true)
                                  : NULL};
        if (ct_gradcheck(dist_fn, (void *)c, in, c->x2 ? 2 : 1, 1e-6, 1e-7, 1e-5) != CT_OK)
            fail_msg("%s: gradcheck failed: %s", c->name, ct_last_error());
        ct_scope_end();
    }
    /* pairwise_distance of equal inputs is eps * n^(1/p), not 0 */
    ct_scope_begin();
    ct_tensor *s = ct_from_data(pd_same_x1, pd_same_x1_shape, pd_same_x1_ndim, CT_F64);
    expect_values("out", "pd_same", ct_pairwise_distance(s, s, 2, 1e-6, false), pd_same_out, pd_same_out_shape,
                  pd_same_out_ndim);
    /* 0-d inputs: the norm of a 0-d difference, |1 - 3 + 0| */
    double v;
    ct_tensor *d0 = ct_pairwise_distance(ct_scalar_tensor(ct_scalar_float(1), CT_F32, CT_CPU),
                                         ct_scalar_tensor(ct_scalar_float(3), CT_F32, CT_CPU), 2, 0, false);
    assert_non_null(d0);
    assert_int_equal(ct_tensor_dim(d0), 0);
    assert_int_equal(ct_item_double(d0, &v), CT_OK);
    assert_true(fabs(v - 2) < 1e-6);
    /* normalize of zeros is zeros (the clamp keeps it finite) */
    ct_tensor *z = ct_normalize(ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU), 2, 1, 1e-12);
    assert_int_equal(ct_item_double(ct_sum(ct_abs(z), NULL, 0, false, CT_DTYPE_UNDEFINED), &v), CT_OK);
    assert_true(v == 0);
    /* integer inputs of cosine_similarity are converted to their floating common dtype */
    ct_tensor *ci = ct_cosine_similarity(ct_ones(CT_SHAPE(2, 3), CT_I64, CT_CPU), ct_ones(CT_SHAPE(3), CT_F32, CT_CPU),
                                         1, 1e-8);
    assert_non_null(ci);
    assert_int_equal(ct_tensor_dtype(ci), CT_F32);
    ct_scope_end();
}

static void test_distance_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3), CT_F32, CT_CPU), *b = ct_ones(CT_SHAPE(4, 3), CT_F32, CT_CPU);
    ct_tensor *i = ct_ones(CT_SHAPE(2, 3), CT_I64, CT_CPU), *v = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    assert_null(ct_normalize(NULL, 2, 1, 1e-12));
    assert_null(ct_normalize(a, 2, 4, 1e-12));
    assert_non_null(strstr(ct_last_error(), "Dimension out of range"));
    assert_null(ct_normalize(i, 2, 1, 1e-12));
    assert_null(ct_cosine_similarity(NULL, a, 1, 1e-8));
    assert_null(ct_cosine_similarity(a, NULL, 1, 1e-8));
    assert_null(ct_cosine_similarity(a, b, 1, 1e-8));
    assert_non_null(strstr(ct_last_error(),
                           "The size of tensor a (2) must match the size of tensor b (4) at non-singleton dimension 0"));
    assert_null(ct_cosine_similarity(a, v, 5, 1e-8));
    assert_non_null(strstr(ct_last_error(), "Dimension out of range"));
    assert_null(ct_cosine_similarity(v, v, 1, 1e-8)); /* the default dim 1 of 1-D inputs */
    assert_null(ct_cosine_similarity(i, i, 1, 1e-8));
    assert_non_null(strstr(ct_last_error(), "expected common dtype to be floating point, yet common dtype is"));
    assert_null(ct_pairwise_distance(NULL, a, 2, 1e-6, false));
    assert_null(ct_pairwise_distance(a, NULL, 2, 1e-6, false));
    assert_null(ct_pairwise_distance(a, b, 2, 1e-6, false));
    ct_scope_end();
}

/* ------------------------------------------------------------------ multinomial */

static void test_multinomial(void **state) {
    (void)state;
    ct_scope_begin();
    /* with replacement: frequencies within 5 sigma of the weights, zero never drawn */
    const double w[5] = {1, 2, 3, 4, 0};
    enum { DRAWS = 100000 };
    ct_manual_seed(5);
    ct_tensor *p = ct_from_data(w, CT_SHAPE(5), CT_F64);
    ct_tensor *s = ct_multinomial(p, DRAWS, true);
    assert_non_null(s);
    assert_int_equal(ct_tensor_dtype(s), CT_I64);
    assert_int_equal(ct_tensor_dim(s), 1);
    assert_int_equal(ct_tensor_shape(s)[0], DRAWS);
    const int64_t *d = ct_tensor_data(ct_contiguous(s));
    int64_t count[5] = {0};
    for (int i = 0; i < DRAWS; i++) {
        assert_true(d[i] >= 0 && d[i] < 5);
        count[d[i]]++;
    }
    assert_int_equal(count[4], 0);
    for (int i = 0; i < 4; i++) {
        double q = w[i] / 10, sd = sqrt(DRAWS * q * (1 - q));
        assert_true(fabs((double)count[i] - DRAWS * q) < 5 * sd);
    }
    /* the seed fixes the draws */
    ct_manual_seed(5);
    ct_tensor *s2 = ct_multinomial(p, DRAWS, true);
    assert_memory_equal(ct_tensor_data(ct_contiguous(s2)), d, sizeof(int64_t) * DRAWS);

    /* 2-D, float32, without replacement: distinct per row; first picks follow the row */
    enum { ROWS = 4000 };
    float *pr = malloc(sizeof(float) * ROWS * 4);
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < 4; j++)
            pr[r * 4 + j] = (float)(j + 1); /* 0.1 .. 0.4 */
    ct_tensor *p2 = ct_from_data(pr, CT_SHAPE(ROWS, 4), CT_F32);
    free(pr);
    ct_tensor *s3 = ct_multinomial(p2, 3, false);
    assert_non_null(s3);
    assert_int_equal(ct_tensor_shape(s3)[0], ROWS);
    assert_int_equal(ct_tensor_shape(s3)[1], 3);
    const int64_t *e = ct_tensor_data(ct_contiguous(s3));
    int64_t first[4] = {0};
    for (int r = 0; r < ROWS; r++) {
        const int64_t *row = e + r * 3;
        for (int j = 0; j < 3; j++) {
            assert_true(row[j] >= 0 && row[j] < 4);
            for (int k = 0; k < j; k++)
                assert_true(row[j] != row[k]);
        }
        first[row[0]]++;
    }
    for (int j = 0; j < 4; j++) {
        double q = (j + 1) / 10.0, sd = sqrt(ROWS * q * (1 - q));
        assert_true(fabs((double)first[j] - ROWS * q) < 5 * sd);
    }
    /* without replacement, zero-probability categories come only after the others */
    const double z[4] = {0, 3, 0, 1};
    ct_tensor *s4 = ct_multinomial(ct_from_data(z, CT_SHAPE(4), CT_F64), 2, false);
    const int64_t *f = ct_tensor_data(ct_contiguous(s4));
    assert_true((f[0] == 1 && f[1] == 3) || (f[0] == 3 && f[1] == 1));
    /* an empty batch of rows */
    ct_tensor *s5 = ct_multinomial(ct_ones(CT_SHAPE(0, 3), CT_F32, CT_CPU), 2, true);
    assert_non_null(s5);
    assert_int_equal(ct_tensor_shape(s5)[0], 0);
    assert_int_equal(ct_tensor_shape(s5)[1], 2);
    /* probabilities that require grad are fine; the result has no gradient */
    ct_tensor *pg = ct_tensor_set_requires_grad(ct_from_data(w, CT_SHAPE(5), CT_F64), true);
    ct_tensor *s6 = ct_multinomial(pg, 3, true);
    assert_non_null(s6);
    assert_false(ct_tensor_requires_grad(s6));
    /* on META: the shape and dtype, no values read */
    ct_tensor *s7 = ct_multinomial(ct_empty(CT_SHAPE(3, 6), CT_F32, CT_META), 4, false);
    if (!s7)
        fail_msg("multinomial on META: %s", ct_last_error());
    assert_int_equal(ct_tensor_device(s7).type, CT_DEVICE_META);
    assert_int_equal(ct_tensor_dtype(s7), CT_I64);
    assert_int_equal(ct_tensor_shape(s7)[0], 3);
    assert_int_equal(ct_tensor_shape(s7)[1], 4);
    ct_scope_end();
}

#define BAD_P "probability tensor contains either `inf`, `nan` or element < 0"
#define BAD_SUM "invalid multinomial distribution (sum of probabilities <= 0)"
#define TOO_MANY "cannot sample n_sample > prob_dist.size(-1) samples without replacement"
static void test_multinomial_errors(void **state) {
    (void)state;
    ct_scope_begin();
    const double neg[3] = {1, -1, 0}, nan_[3] = {1, NAN, 0}, inf[2] = {INFINITY, 1}, zero[3] = {0, 0, 0};
    const double rows[4] = {1, 1, 0, 0};
    struct {
        ct_tensor *p;
        int64_t n;
        bool repl;
        const char *msg;
    } bad[] = {
        {ct_from_data(neg, CT_SHAPE(3), CT_F64), 1, true, BAD_P},
        {ct_from_data(nan_, CT_SHAPE(3), CT_F64), 1, false, BAD_P},
        {ct_from_data(inf, CT_SHAPE(2), CT_F64), 1, true, BAD_P},
        {ct_from_data(zero, CT_SHAPE(3), CT_F64), 1, true, BAD_SUM},
        {ct_from_data(rows, CT_SHAPE(2, 2), CT_F64), 1, true, BAD_SUM},
        {ct_ones(CT_SHAPE(2), CT_F32, CT_CPU), 3, false, TOO_MANY},
        {ct_ones(CT_SHAPE(2), CT_F32, CT_CPU), 0, true, "cannot sample n_sample <= 0 samples"},
        {ct_ones(CT_SHAPE(2), CT_I64, CT_CPU), 1, true, "multinomial only supports floating-point dtypes for input, got: "},
        {ct_ones(CT_SHAPE(2, 2, 2), CT_F32, CT_CPU), 1, true, "prob_dist must be 1 or 2 dim"},
        {ct_ones(CT_SHAPE(0), CT_F32, CT_CPU), 1, false, TOO_MANY},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_null(ct_multinomial(bad[k].p, bad[k].n, bad[k].repl));
        if (!strstr(ct_last_error(), bad[k].msg))
            fail_msg("case %zu: %s", k, ct_last_error());
    }
    assert_null(ct_multinomial(NULL, 1, true));
    assert_int_equal(ct_last_status(), CT_ERROR_NULL_ARGUMENT);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_golden),
        cmocka_unit_test(test_backward_kernels),
        cmocka_unit_test(test_float32),
#if __has_include("ctorch/autograd.h")
        cmocka_unit_test(test_golden_gradients),
#endif
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_one_hot),
        cmocka_unit_test(test_sdpa_long_blocks),
        cmocka_unit_test(test_nll_ignored_mean_is_nan),
        cmocka_unit_test(test_cross_entropy_fused),
        cmocka_unit_test(test_cross_entropy_reuses_logits),
        cmocka_unit_test(test_cross_entropy_backward_out),
        cmocka_unit_test(test_gelu_mlp),
        cmocka_unit_test(test_gelu_mlp_memory),
        cmocka_unit_test(test_gelu_mlp_errors),
        cmocka_unit_test(test_cross_entropy_fused_gradcheck),
        cmocka_unit_test(test_cross_entropy_fused_errors),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_fused_float32),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_public_op_entries),
        cmocka_unit_test(test_batch_norm_grad_mode),
        cmocka_unit_test(test_distance_golden),
        cmocka_unit_test(test_distance_errors),
        cmocka_unit_test(test_multinomial),
        cmocka_unit_test(test_multinomial_errors),
    };
    return cmocka_run_group_tests(tests, load_golden, free_golden);
}
