/* Double backward through the fused nn kernels (Note [Fused nn backward kernels],
 * Note [Linear backward kernels] in src/autograd/derivatives_nn.h): gradgradcheck in
 * float64 of the average pools, rms_norm, embedding, nll_loss, the fused
 * cross_entropy and scaled_dot_product_attention, and the refusal that remains
 * (flash attention). */
#include <math.h>
#include <string.h>

#include "ctorch/ext.h"
#include "testutil.h"

static ct_tensor *leaf(const int64_t *shape, int nd) {
    ct_tensor *t = ct_randn(shape, nd, CT_F64, CT_CPU);
    ct_tensor_set_requires_grad(t, true);
    return t;
}

static void gradgrad(ct_grad_fn_t fn, void *ud, ct_tensor **in, int n, const char *what) {
    ct_test_through_compile(fn, ud, in, n, what);
    ct_clear_error();
    if (ct_gradgradcheck(fn, ud, in, n, 1e-6, 1e-5, 1e-3) != CT_OK)
        fail_msg("%s: gradgradcheck: %s", what, ct_last_error());
}

static void check(ct_grad_fn_t fn, void *ud, ct_tensor **in, int n, const char *what) {
    ct_clear_error();
    if (ct_gradcheck(fn, ud, in, n, 1e-6, 1e-6, 1e-4) != CT_OK)
        fail_msg("%s: gradcheck: %s", what, ct_last_error());
    gradgrad(fn, ud, in, n, what);
}

/* ------------------------------------------------------------------ pools */

typedef struct {
    int64_t k[2], s[2], p[2];
    bool ceil, count_pad;
    int64_t divisor;
} pool_args;

/* The pool of x * x, so that the second derivative through x is not zero. */
static ct_tensor *avg_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    const pool_args *a = ud;
    return ct_avg_pool2d(ct_mul(in[0], in[0]), a->k, a->s, a->p, a->ceil, a->count_pad, a->divisor);
}

static void test_avg_pool2d(void **state) {
    (void)state;
    ct_manual_seed(31);
    pool_args cases[] = {
        {{2, 2}, {2, 2}, {0, 0}, false, true, 0},
        {{3, 2}, {2, 1}, {1, 1}, true, false, 0},
        {{2, 3}, {1, 2}, {1, 0}, false, true, 5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ct_scope_begin();
        ct_tensor *x = leaf(CT_SHAPE(2, 2, 5, 4));
        check(avg_fn, &cases[i], &x, 1, "avg_pool2d");
        ct_scope_end();
    }
}

static ct_tensor *adaptive_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    return ct_adaptive_avg_pool2d(ct_mul(in[0], in[0]), ud);
}

static void test_adaptive_avg_pool2d(void **state) {
    (void)state;
    ct_manual_seed(32);
    int64_t sizes[2][2] = {{2, 3}, {3, 1}};
    for (int i = 0; i < 2; i++) {
        ct_scope_begin();
        ct_tensor *x = leaf(CT_SHAPE(1, 2, 5, 4));
        check(adaptive_fn, sizes[i], &x, 1, "adaptive_avg_pool2d");
        ct_scope_end();
    }
}

/* ------------------------------------------------------------------ rms_norm, embedding */

static ct_tensor *rms_fn(ct_tensor *const *in, int n, void *ud) {
    int64_t shape[2] = {3, 4};
    int k = *(int *)ud;
    return ct_rms_norm(in[0], shape + 2 - k, k, n > 1 ? in[1] : NULL, 1e-5);
}

static void test_rms_norm(void **state) {
    (void)state;
    ct_manual_seed(33);
    for (int k = 1; k <= 2; k++) {
        ct_scope_begin();
        int64_t ws[2] = {3, 4};
        ct_tensor *in[2] = {leaf(CT_SHAPE(2, 3, 4)), leaf(ws + 2 - k, k)};
        check(rms_fn, &k, in, 2, "rms_norm with weight");
        check(rms_fn, &k, in, 1, "rms_norm");
        ct_scope_end();
    }
}

static ct_tensor *emb_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    int64_t idx[6] = {0, 2, 4, 2, 1, 2};
    ct_tensor *i = ct_from_data(idx, CT_SHAPE(2, 3), CT_I64);
    ct_tensor *e = ct_embedding(i, in[0], *(int64_t *)ud);
    return ct_mul(e, e);
}

static void test_embedding(void **state) {
    (void)state;
    ct_manual_seed(34);
    int64_t pads[3] = {CT_NO_PADDING_IDX, 2, -1};
    for (int i = 0; i < 3; i++) {
        ct_scope_begin();
        ct_tensor *w = leaf(CT_SHAPE(5, 3));
        /* with a padding row the first derivative is not the forward's (that row's
         * gradient is zero by definition); the second is the first's */
        if (pads[i] == CT_NO_PADDING_IDX)
            check(emb_fn, &pads[i], &w, 1, "embedding");
        else
            gradgrad(emb_fn, &pads[i], &w, 1, "embedding with padding_idx");
        /* the padding row gets no gradient, first or second order */
        ct_tensor *o = emb_fn(&w, 1, &pads[i]);
        const ct_tensor *outs[1] = {ct_sum(o, NULL, 0, false, CT_DTYPE_UNDEFINED)}, *ins[1] = {w};
        ct_tensor *g = NULL;
        assert_int_equal(ct_autograd_grad(outs, 1, ins, 1, NULL, false, true, false, &g), CT_OK);
        if (pads[i] != CT_NO_PADDING_IDX) {
            int64_t row = pads[i] < 0 ? pads[i] + 5 : pads[i];
            for (int j = 0; j < 3; j++)
                assert_true(ct_test_at(g, row * 3 + j) == 0);
        }
        ct_scope_end();
    }
}

/* ------------------------------------------------------------------ losses */

typedef struct {
    ct_reduction red;
    int64_t ignore;
    bool weighted;
} loss_args;

/* nll_loss of tanh(x) * x (so that the loss has a second derivative in x). */
static ct_tensor *nll_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    const loss_args *a = ud;
    int64_t t[4] = {1, 0, 3, 1};
    double wv[4] = {0.5, 2.0, 1.0, 1.5};
    ct_tensor *target = ct_from_data(t, CT_SHAPE(4), CT_I64);
    ct_tensor *w = a->weighted ? ct_from_data(wv, CT_SHAPE(4), CT_F64) : NULL;
    return ct_nll_loss(ct_mul(ct_tanh(in[0]), in[0]), target, w, a->red, a->ignore);
}

static ct_tensor *ce_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    const loss_args *a = ud;
    int64_t t[4] = {1, 0, 3, 1};
    ct_tensor *target = ct_from_data(t, CT_SHAPE(4), CT_I64);
    ct_tensor *lse = NULL;
    ct_tensor *l = ct_cross_entropy_fused(in[0], target, a->red, a->ignore, &lse);
    /* both outputs reach the result: the loss and the rows' logsumexp */
    return l ? ct_add(ct_sum(l, NULL, 0, false, CT_DTYPE_UNDEFINED), ct_sum(ct_mul(lse, lse), NULL, 0, false,
                                                                            CT_DTYPE_UNDEFINED))
             : NULL;
}

static void test_losses(void **state) {
    (void)state;
    ct_manual_seed(35);
    loss_args cases[] = {
        {CT_REDUCTION_MEAN, CT_DEFAULT_IGNORE_INDEX, false},
        {CT_REDUCTION_SUM, 1, true},
        {CT_REDUCTION_NONE, 3, false},
        {CT_REDUCTION_MEAN, 0, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ct_scope_begin();
        ct_tensor *x = leaf(CT_SHAPE(4, 4));
        if (ct_gradcheck(nll_fn, &cases[i], &x, 1, 1e-6, 1e-6, 1e-4) != CT_OK)
            fail_msg("nll_loss case %zu: %s", i, ct_last_error());
        check(nll_fn, &cases[i], &x, 1, "nll_loss");
        if (!cases[i].weighted)
            check(ce_fn, &cases[i], &x, 1, "cross_entropy_fused");
        /* an error left over from earlier does not fail the formulas (a missing
         * weight is told apart from a failed unpacking without looking at it) */
        ct_error(CT_ERROR_VALUE, "test", "an earlier error");
        if (ct_gradgradcheck(nll_fn, &cases[i], &x, 1, 1e-6, 1e-5, 1e-3) != CT_OK)
            fail_msg("nll_loss double backward after an earlier error: %s", ct_last_error());
        ct_scope_end();
    }
}

/* ------------------------------------------------------------------ attention */

typedef struct {
    int mask; /* 0 none, 1 bool, 2 float */
    bool causal;
} attn_args;

static ct_tensor *attn_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    const attn_args *a = ud;
    ct_tensor *mask = NULL;
    if (a->mask == 1) {
        bool m[12] = {1, 0, 1, 1, 1, 1, 0, 1, 0, 1, 1, 0}; /* (3, 4): every row keeps some */
        mask = ct_from_data(m, CT_SHAPE(3, 4), CT_BOOL);
    } else if (a->mask == 2) {
        double m[12] = {0.5, -1, 0, 0.25, 2, -0.5, 0, 1, -2, 0.75, 0, 0.1};
        mask = ct_from_data(m, CT_SHAPE(3, 4), CT_F64);
    }
    return ct_scaled_dot_product_attention(in[0], in[1], in[2], mask, 0.0, a->causal, NULL);
}

static void test_attention(void **state) {
    (void)state;
    ct_manual_seed(36);
    attn_args cases[] = {{0, false}, {1, false}, {2, false}, {0, true}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ct_scope_begin();
        ct_tensor *in[3] = {leaf(CT_SHAPE(1, 2, 3, 2)), leaf(CT_SHAPE(1, 2, 4, 2)), leaf(CT_SHAPE(1, 2, 4, 3))};
        check(attn_fn, &cases[i], in, 3, "scaled_dot_product_attention");
        /* one tensor as query, key and value */
        ct_tensor *x = leaf(CT_SHAPE(2, 3, 2));
        ct_tensor *same[3] = {x, x, x};
        attn_args causal = {0, cases[i].causal};
        check(attn_fn, &causal, same, 3, "self-attention");
        ct_scope_end();
    }
}

/* Flash attention refuses double backward, as PyTorch's. */
static void test_flash_attention_refused(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *q = leaf(CT_SHAPE(1, 2, 3, 8)), *o = NULL, *l = NULL;
    assert_int_equal(ct_flash_attention_forward(q, q, q, false, NULL, &o, &l), CT_OK);
    const ct_tensor *outs[1] = {o}, *ins[1] = {q}, *gos[1] = {ct_ones_like(o, CT_DTYPE_UNDEFINED)};
    ct_tensor *g = NULL;
    CT_ASSERT_ERR(ct_autograd_grad(outs, 1, ins, 1, gos, true, true, false, &g) == CT_OK, CT_ERROR_NOT_IMPLEMENTED,
                  "double backward");
    assert_int_equal(ct_autograd_grad(outs, 1, ins, 1, gos, false, false, false, &g), CT_OK);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_avg_pool2d),     cmocka_unit_test(test_adaptive_avg_pool2d),
        cmocka_unit_test(test_rms_norm),       cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_losses),         cmocka_unit_test(test_attention),
        cmocka_unit_test(test_flash_attention_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
