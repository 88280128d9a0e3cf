/* Gradients through views, copies and in-place ops on views. */
#include <math.h>
#include <string.h>

#include "testutil.h"

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static double unit(void) { return ct_test_unit(&rng); }

static ct_tensor *rand_leaf(const int64_t *shape, int ndim) {
    ct_tensor *t = ct_empty(shape, ndim, CT_F64, CT_CPU);
    double *p = ct_tensor_data(t);
    for (int64_t k = 0; k < ct_tensor_numel(t); k++)
        p[k] = 2 * unit() - 1;
    ct_tensor_set_requires_grad(t, true);
    return t;
}

/* Each case: a view op applied to in[0], squared so the second derivative is not 0. */
typedef ct_tensor *(*view_fn)(const ct_tensor *x);

static ct_tensor *v_view(const ct_tensor *x) { return ct_view(x, CT_SHAPE(3, 4)); }
static ct_tensor *v_reshape_copy(const ct_tensor *x) { return ct_reshape(ct_t(x), CT_SHAPE(12)); }
static ct_tensor *v_permute(const ct_tensor *x) { return ct_permute(x, CT_SHAPE(1, 0)); }
static ct_tensor *v_transpose(const ct_tensor *x) { return ct_transpose(x, 0, 1); }
static ct_tensor *v_t(const ct_tensor *x) { return ct_t(x); }
static ct_tensor *v_movedim(const ct_tensor *x) { return ct_movedim(ct_view(x, CT_SHAPE(2, 3, 2)), 0, 2); }
static ct_tensor *v_expand(const ct_tensor *x) {
    return ct_expand(ct_view(x, CT_SHAPE(2, 1, 6)), CT_SHAPE(3, 2, 4, 6));
}
static ct_tensor *v_squeeze(const ct_tensor *x) { return ct_squeeze(ct_view(x, CT_SHAPE(1, 2, 1, 6))); }
static ct_tensor *v_squeeze_dim(const ct_tensor *x) { return ct_squeeze_dim(ct_view(x, CT_SHAPE(1, 12)), 0); }
static ct_tensor *v_unsqueeze(const ct_tensor *x) { return ct_unsqueeze(x, 1); }
static ct_tensor *v_flatten(const ct_tensor *x) { return ct_flatten(ct_t(x), 0, 1); }
static ct_tensor *v_unflatten(const ct_tensor *x) { return ct_unflatten(x, 1, CT_SHAPE(2, 3)); }
static ct_tensor *v_narrow(const ct_tensor *x) { return ct_narrow(x, 1, 1, 3); }
static ct_tensor *v_slice(const ct_tensor *x) { return ct_slice(x, 1, 0, INT64_MAX, 2); }
static ct_tensor *v_select(const ct_tensor *x) { return ct_select(x, 1, -2); }
static ct_tensor *v_unfold(const ct_tensor *x) { return ct_unfold(x, 1, 3, 1); } /* overlapping windows */
static ct_tensor *v_diagonal(const ct_tensor *x) { return ct_diagonal(x, 1, 0, 1); }
static ct_tensor *v_as_strided(const ct_tensor *x) {
    return ct_as_strided(x, CT_INDEX(4, 3), CT_INDEX(2, 1), 2, 1); /* overlapping rows */
}
static ct_tensor *v_alias(const ct_tensor *x) { return ct_alias(x); }
static ct_tensor *v_clone(const ct_tensor *x) { return ct_clone(x); }
static ct_tensor *v_contiguous(const ct_tensor *x) { return ct_contiguous(ct_t(x)); }
static ct_tensor *v_chain(const ct_tensor *x) {
    return ct_select(ct_transpose(ct_unsqueeze(ct_slice(x, 1, 1, 6, 2), 0), 0, 2), 1, 0);
}

static const struct {
    const char *name, *grad_fn;
    view_fn f;
} cases[] = {
    {"view", "ViewBackward0", v_view},
    {"reshape (copy)", "ReshapeBackward0", v_reshape_copy},
    {"permute", "PermuteBackward0", v_permute},
    {"transpose", "TransposeBackward0", v_transpose},
    {"t", "TBackward0", v_t},
    {"movedim", "MovedimBackward0", v_movedim},
    {"expand", "ExpandBackward0", v_expand},
    {"squeeze", "SqueezeBackward0", v_squeeze},
    {"squeeze_dim", "SqueezeDimBackward0", v_squeeze_dim},
    {"unsqueeze", "UnsqueezeBackward0", v_unsqueeze},
    {"flatten", "FlattenBackward0", v_flatten},
    {"unflatten", "UnflattenBackward0", v_unflatten},
    {"narrow", "NarrowBackward0", v_narrow},
    {"slice", "SliceBackward0", v_slice},
    {"select", "SelectBackward0", v_select},
    {"unfold", "UnfoldBackward0", v_unfold},
    {"diagonal", "DiagonalBackward0", v_diagonal},
    {"as_strided", "AsStridedBackward0", v_as_strided},
    {"alias", "AliasBackward0", v_alias},
    {"clone", "CloneBackward0", v_clone},
    {"contiguous", "ContiguousBackward0", v_contiguous},
    {"chain", "SelectBackward0", v_chain},
};

static ct_tensor *squared(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    view_fn f = *(view_fn *)ud;
    ct_tensor *v = f(in[0]);
    return ct_mul(v, v);
}

static void test_view_gradients(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ct_scope_begin();
        ct_tensor *x = rand_leaf(CT_SHAPE(2, 6));
        ct_tensor *v = cases[c].f(x);
        CT_ASSERT_OK(v);
        if (!ct_tensor_requires_grad(v) || !ct_tensor_grad_fn_name(v) ||
            strcmp(ct_tensor_grad_fn_name(v), cases[c].grad_fn) != 0)
            fail_msg("%s: grad_fn %s, expected %s", cases[c].name,
                     ct_tensor_grad_fn_name(v) ? ct_tensor_grad_fn_name(v) : "none", cases[c].grad_fn);
        view_fn f = cases[c].f;
        ct_tensor *in[1] = {x};
        if (ct_gradcheck(squared, &f, in, 1, 1e-6, 1e-7, 1e-5) != CT_OK)
            fail_msg("%s: %s", cases[c].name, ct_last_error());
        if (ct_gradgradcheck(squared, &f, in, 1, 1e-6, 1e-7, 1e-5) != CT_OK)
            fail_msg("%s (second order): %s", cases[c].name, ct_last_error());
        ct_scope_end();
    }
}

static void test_views_under_no_grad(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = rand_leaf(CT_SHAPE(2, 3));
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *v = ct_select(x, 0, 1);
    ct_set_grad_enabled(prev);
    assert_false(ct_tensor_requires_grad(v));
    assert_true(ct_tensor_is_leaf(v));
    /* contiguous() of a contiguous tensor is the tensor itself: no new node. */
    ct_tensor *c = ct_contiguous(x);
    assert_ptr_equal(c, x);
    assert_true(ct_tensor_is_leaf(c));
    ct_scope_end();
}

static void test_to_dtype_and_copy(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = rand_leaf(CT_SHAPE(3));
    ct_tensor *f = ct_to_dtype(x, CT_F32);
    assert_string_equal(ct_tensor_grad_fn_name(f), "ToDtypeBackward0");
    ct_tensor *y = ct_dot(f, ct_full(CT_SHAPE(3), ct_scalar_float(2), CT_F32, CT_CPU));
    assert_int_equal(ct_backward(y, NULL, false, false), CT_OK);
    ct_tensor *g = ct_tensor_grad(x);
    assert_int_equal(ct_tensor_dtype(g), CT_F64);
    for (int i = 0; i < 3; i++)
        assert_true(ct_test_at(g, i) == 2.0);
    /* To an integer dtype: no gradient. */
    assert_false(ct_tensor_requires_grad(ct_to_dtype(x, CT_I64)));

    /* copy_ broadcasts src into a plain tensor, which joins the graph. */
    ct_tensor *s = rand_leaf(CT_SHAPE(4));
    ct_tensor *z = ct_zeros(CT_SHAPE(3, 4), CT_F64, CT_CPU);
    assert_non_null(ct_copy_(z, s));
    assert_string_equal(ct_tensor_grad_fn_name(z), "CopyBackward0");
    ct_tensor *w = ct_full(CT_SHAPE(3, 4), ct_scalar_float(0.5), CT_F64, CT_CPU);
    assert_int_equal(ct_backward(z, w, false, false), CT_OK);
    ct_tensor *gs = ct_tensor_grad(s);
    for (int i = 0; i < 4; i++)
        assert_true(ct_test_at(gs, i) == 1.5);
    CT_ASSERT_ERR(ct_copy_(s, x) != NULL, CT_ERROR_RUNTIME, "a leaf Variable that requires grad");
    ct_scope_end();
}

/* x = leaf.clone(); x[0].mul_(2): the leaf's gradient sees the doubled row. */
static void test_inplace_on_view(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *leaf = rand_leaf(CT_SHAPE(2, 3));
    ct_tensor *x = ct_clone(leaf);
    ct_tensor *row = ct_select(x, 0, 0);
    assert_non_null(ct_mul_scalar_(row, ct_scalar_int(2)));
    assert_string_equal(ct_tensor_grad_fn_name(x), "CopySlices");
    assert_string_equal(ct_tensor_grad_fn_name(row), "AsStridedBackward0");
    ct_tensor *w = ct_from_data((double[]){1, 2, 3, 4, 5, 6}, CT_SHAPE(2, 3), CT_F64);
    assert_int_equal(ct_backward(x, w, false, false), CT_OK);
    ct_tensor *g = ct_tensor_grad(leaf);
    const double want[6] = {2, 4, 6, 4, 5, 6};
    for (int i = 0; i < 6; i++)
        assert_true(ct_test_at(g, i) == want[i]);
    /* In place on a view of a leaf that requires grad is refused. */
    CT_ASSERT_ERR(ct_mul_scalar_(ct_select(leaf, 0, 0), ct_scalar_int(2)) != NULL, CT_ERROR_RUNTIME,
                  "a view of a leaf Variable that requires grad is being used in an in-place operation.");
    ct_scope_end();
}

/* In-place ops with saved values and other differentiable inputs, on views. */
static ct_tensor *inplace_views_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    ct_tensor *x = ct_mul_scalar(in[0], ct_scalar_int(1));
    /* Views share the version counter, so an op that saves its result goes last. */
    ct_mul_(ct_select(x, 0, 1), in[1]); /* self and other saved; other gets a gradient */
    ct_copy_(ct_narrow(ct_select(x, 0, 0), 0, 1, 2), ct_slice(in[1], 0, 0, 2, 1));
    ct_exp_(ct_slice(x, 1, 0, 3, 2)); /* its result is saved */
    return ct_mul(x, x);
}

static void test_inplace_on_views_gradcheck(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *in[2] = {rand_leaf(CT_SHAPE(2, 3)), rand_leaf(CT_SHAPE(3))};
    if (ct_gradcheck(inplace_views_fn, NULL, in, 2, 1e-6, 1e-7, 1e-5) != CT_OK)
        fail_msg("%s", ct_last_error());
    if (ct_gradgradcheck(inplace_views_fn, NULL, in, 2, 1e-6, 1e-7, 1e-5) != CT_OK)
        fail_msg("second order: %s", ct_last_error());
    /* A copy into a view of a tensor that does not require grad. */
    ct_tensor *z = ct_zeros(CT_SHAPE(2, 3), CT_F64, CT_CPU);
    assert_non_null(ct_copy_(ct_select(z, 0, 1), in[1]));
    assert_true(ct_tensor_requires_grad(z));
    assert_int_equal(ct_backward(z, ct_ones_like(z, CT_DTYPE_UNDEFINED), false, false), CT_OK);
    for (int i = 0; i < 3; i++)
        assert_true(ct_test_at(ct_tensor_grad(in[1]), i) == 1.0);
    ct_scope_end();
}

/* Many slices of one non-leaf tensor, each used once (an RNN's per-step slices of its
 * input projection): their gradients are summed into the base's buffer in place
 * (Note [Slice gradients in place] in src/autograd/engine.c). The result must match
 * the whole tensor's gradient taken at once, with overlapping slices, select, narrow
 * and strided slice, a hook on one slice, and under create_graph. */
static ct_tensor *slices_loss(const ct_tensor *x, ct_tensor **base_out) {
    ct_tensor *base = ct_mul_scalar(x, ct_scalar_float(2.0)); /* (6, 4), contiguous, non-leaf */
    ct_tensor *terms[12];
    int n = 0;
    for (int t = 0; t < 6; t++) /* each row, weighted by its index */
        terms[n++] = ct_sum(ct_mul_scalar(ct_select(base, 0, t), ct_scalar_float(t + 1.0)), NULL, 0, false,
                            CT_DTYPE_UNDEFINED);
    terms[n++] = ct_sum(ct_sin(ct_narrow(base, 0, 1, 3)), NULL, 0, false, CT_DTYPE_UNDEFINED);  /* overlaps */
    terms[n++] = ct_sum(ct_exp(ct_narrow(base, 1, 2, 2)), NULL, 0, false, CT_DTYPE_UNDEFINED);  /* columns */
    terms[n++] = ct_sum(ct_slice(base, 0, 0, 6, 2), NULL, 0, false, CT_DTYPE_UNDEFINED);        /* strided */
    if (base_out)
        *base_out = base;
    return ct_sum(ct_stack((const ct_tensor *const *)terms, n, 0), NULL, 0, false, CT_DTYPE_UNDEFINED);
}

static ct_tensor *double_it(const ct_tensor *g, void *ud) {
    (void)ud;
    return ct_mul_scalar(g, ct_scalar_float(2.0));
}

static void test_many_slices(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = rand_leaf(CT_SHAPE(6, 4));
    /* the reference: d/dx of each term written without slices */
    double want[24];
    const double *xv = ct_tensor_data(x);
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 4; j++) {
            double b = 2 * xv[i * 4 + j], g = i + 1.0;
            if (i >= 1 && i <= 3)
                g += cos(b);
            if (j >= 2)
                g += exp(b);
            if (i % 2 == 0)
                g += 1;
            want[i * 4 + j] = 2 * g;
        }
    assert_int_equal(ct_backward(slices_loss(x, NULL), NULL, false, false), CT_OK);
    ct_tensor *g = ct_tensor_grad(x);
    for (int k = 0; k < 24; k++)
        assert_true(fabs(ct_test_at(g, k) - want[k]) < 1e-12);
    /* ct_autograd_grad of the base itself, and create_graph (the plain path) */
    for (int cg = 0; cg < 2; cg++) {
        ct_tensor *base, *loss = slices_loss(x, &base), *gb = NULL;
        const ct_tensor *o[1] = {loss}, *in[1] = {base};
        assert_int_equal(ct_autograd_grad(o, 1, in, 1, NULL, false, cg, false, &gb), CT_OK);
        for (int k = 0; k < 24; k++)
            assert_true(fabs(2 * ct_test_at(gb, k) - want[k]) < 1e-12);
    }
    /* a hook on one slice sees and changes only that slice's gradient */
    ct_tensor_set_grad(x, NULL);
    ct_tensor *base = ct_mul_scalar(x, ct_scalar_float(2.0));
    ct_tensor *s0 = ct_select(base, 0, 0), *s1 = ct_select(base, 0, 1);
    ct_tensor_register_hook(s1, double_it, NULL);
    const ct_tensor *parts[2] = {ct_sum(s0, NULL, 0, false, CT_DTYPE_UNDEFINED),
                                 ct_sum(s1, NULL, 0, false, CT_DTYPE_UNDEFINED)};
    assert_int_equal(ct_backward(ct_sum(ct_stack(parts, 2, 0), NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false,
                                 false),
                     CT_OK);
    g = ct_tensor_grad(x);
    for (int k = 0; k < 24; k++)
        assert_true(ct_test_at(g, k) == (k < 4 ? 2.0 : k < 8 ? 4.0 : 0.0));
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view_gradients),
        cmocka_unit_test(test_views_under_no_grad),
        cmocka_unit_test(test_to_dtype_and_copy),
        cmocka_unit_test(test_inplace_on_view),
        cmocka_unit_test(test_inplace_on_views_gradcheck),
        cmocka_unit_test(test_many_slices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
