/* Custom autograd functions from C callbacks (ct_autograd_function_apply) and
 * activation checkpointing (ct_checkpoint). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/ext.h"
#include "testutil.h"

static ct_tensor *randn64(const int64_t *shape, int ndim, bool rg) {
    ct_tensor *t = ct_randn(shape, ndim, CT_F64, CT_CPU);
    if (t && rg)
        ct_tensor_set_requires_grad(t, true);
    return t;
}

static ct_tensor *all_sum(const ct_tensor *t) { return ct_sum(t, NULL, 0, false, CT_DTYPE_UNDEFINED); }

static void assert_close(const ct_tensor *a, const ct_tensor *b, double tol) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(ct_tensor_numel(a), ct_tensor_numel(b));
    for (int64_t i = 0; i < ct_tensor_numel(a); i++)
        if (fabs(ct_test_at(a, i) - ct_test_at(b, i)) > tol)
            fail_msg("element %lld: %.17g vs %.17g", (long long)i, ct_test_at(a, i), ct_test_at(b, i));
}

static void assert_bits(const ct_tensor *a, const ct_tensor *b) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(ct_tensor_numel(a), ct_tensor_numel(b));
    for (int64_t i = 0; i < ct_tensor_numel(a); i++) {
        double x = ct_test_at(a, i), y = ct_test_at(b, i);
        if (memcmp(&x, &y, sizeof x) != 0)
            fail_msg("element %lld: %.17g vs %.17g", (long long)i, x, y);
    }
}

/* ------------------------------------------------------------------ a custom exp */

static int exp_forward_calls, exp_backward_calls;

static ct_status exp_fwd(ct_autograd_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ud) {
    (void)nin, (void)nout, (void)ud;
    exp_forward_calls++;
    if (ct_is_grad_enabled())
        return ct_error(CT_ERROR_RUNTIME, "test", "forward ran with grad mode on");
    out[0] = ct_exp(in[0]);
    if (!out[0])
        return ct_last_status();
    return ct_autograd_ctx_save_for_backward(ctx, out, 1);
}

static int exp_bwd(ct_autograd_ctx *ctx, ct_tensor *const *gout, int nout, ct_tensor **gin, int nin, void *ud) {
    (void)nout, (void)nin, (void)ud;
    exp_backward_calls++;
    ct_tensor *y = ct_autograd_ctx_saved(ctx, 0);
    if (!y)
        return -1;
    gin[0] = ct_mul(gout[0], y);
    return gin[0] ? 1 : -1;
}

static const ct_autograd_function_def MyExp = {"MyExp", exp_fwd, exp_bwd};

static ct_tensor *my_exp(const ct_tensor *x) {
    ct_tensor *y = NULL;
    ct_tensor *in[1] = {(ct_tensor *)x};
    return ct_autograd_function_apply(&MyExp, in, 1, &y, 1, NULL) == CT_OK ? y : NULL;
}

static ct_tensor *my_exp_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_mul(my_exp(in[0]), in[1]);
}

static void test_custom_exp(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(1);
    ct_tensor *x = randn64(CT_SHAPE(3, 4), true);
    ct_tensor *y = my_exp(x);
    CT_ASSERT_OK(y);
    assert_string_equal(ct_tensor_grad_fn_name(y), "MyExpBackward");
    assert_true(ct_tensor_requires_grad(y));
    assert_close(y, ct_exp(x), 0);
    assert_int_equal(ct_backward(all_sum(y), NULL, false, false), CT_OK);
    ct_tensor *g = ct_tensor_grad(x);
    assert_close(g, ct_exp(x), 1e-15);
    /* gradcheck and gradgradcheck: the backward is made of ops, so it differentiates */
    ct_tensor *in[2] = {x, randn64(CT_SHAPE(3, 4), true)};
    assert_int_equal(ct_gradcheck(my_exp_fn, NULL, in, 2, 1e-6, 1e-7, 1e-5), CT_OK);
    assert_int_equal(ct_gradgradcheck(my_exp_fn, NULL, in, 2, 1e-6, 1e-6, 1e-4), CT_OK);
    /* no input requiring grad, or no_grad: the forward runs, nothing is recorded */
    int calls = exp_forward_calls;
    ct_tensor *c = my_exp(ct_detach(x));
    CT_ASSERT_OK(c);
    assert_null(ct_tensor_grad_fn_name(c));
    assert_false(ct_tensor_requires_grad(c));
    bool prev = ct_set_grad_enabled(false);
    c = my_exp(x);
    ct_set_grad_enabled(prev);
    assert_null(ct_tensor_grad_fn_name(c));
    assert_int_equal(exp_forward_calls, calls + 2);
    ct_scope_end();
}

/* ------------------------------------------------------------------ straight-through clamp */

static ct_status ste_fwd(ct_autograd_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ud) {
    (void)ctx, (void)nin, (void)nout, (void)ud;
    ct_scalar lo = ct_scalar_float(-1), hi = ct_scalar_float(1);
    out[0] = ct_clamp(in[0], &lo, &hi);
    return out[0] ? CT_OK : ct_last_status();
}

static int ste_bwd(ct_autograd_ctx *ctx, ct_tensor *const *gout, int nout, ct_tensor **gin, int nin, void *ud) {
    (void)ctx, (void)nout, (void)nin, (void)ud;
    gin[0] = gout[0]; /* passes through */
    return 1;
}

static void test_straight_through(void **state) {
    (void)state;
    ct_scope_begin();
    double v[4] = {-3, -0.5, 0.25, 2};
    ct_tensor *x = ct_from_data(v, CT_SHAPE(4), CT_F64);
    ct_tensor_set_requires_grad(x, true);
    static const ct_autograd_function_def Ste = {"ClampSTE", ste_fwd, ste_bwd};
    ct_tensor *y = NULL;
    assert_int_equal(ct_autograd_function_apply(&Ste, &x, 1, &y, 1, NULL), CT_OK);
    assert_string_equal(ct_tensor_grad_fn_name(y), "ClampSTEBackward");
    double want_y[4] = {-1, -0.5, 0.25, 1};
    for (int i = 0; i < 4; i++)
        assert_true(ct_test_at(y, i) == want_y[i]);
    double w[4] = {1, 2, 3, 4};
    ct_tensor *loss = all_sum(ct_mul(y, ct_from_data(w, CT_SHAPE(4), CT_F64)));
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    ct_tensor *g = ct_tensor_grad(x);
    for (int i = 0; i < 4; i++)
        assert_true(ct_test_at(g, i) == w[i]); /* the clamp's own gradient would zero 0 and 3 */
    ct_scope_end();
}

/* ------------------------------------------------------------------ needs_input_grad, several outputs */

typedef struct {
    bool needs[3];
    int saw_null_grad; /* gout[1] was NULL */
    int saw_zero_grad; /* gout[1] was zeros */
    bool materialize;
} mm_state;

/* (a * b + c, a - b): three inputs, two outputs. */
static ct_status two_fwd(ct_autograd_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ud) {
    (void)nin, (void)nout;
    mm_state *s = ud;
    for (int i = 0; i < 3; i++)
        s->needs[i] = ct_autograd_ctx_needs_input_grad(ctx, i);
    ct_autograd_ctx_set_materialize_grads(ctx, s->materialize);
    out[0] = ct_add(ct_mul(in[0], in[1]), in[2]);
    out[1] = ct_sub(in[0], in[1]);
    ct_tensor *save[2] = {in[0], in[1]};
    return ct_autograd_ctx_save_for_backward(ctx, save, 2);
}

static int two_bwd(ct_autograd_ctx *ctx, ct_tensor *const *gout, int nout, ct_tensor **gin, int nin, void *ud) {
    (void)nout, (void)nin;
    mm_state *s = ud;
    ct_tensor *a = ct_autograd_ctx_saved(ctx, 0), *b = ct_autograd_ctx_saved(ctx, 1);
    if (!gout[1])
        s->saw_null_grad++;
    else {
        double v = -1;
        if (ct_item_double(ct_sum(ct_abs(gout[1]), NULL, 0, false, CT_DTYPE_UNDEFINED), &v) == CT_OK && v == 0)
            s->saw_zero_grad++;
    }
    ct_tensor *g1 = gout[1] ? gout[1] : ct_zeros_like(gout[0], CT_DTYPE_UNDEFINED);
    if (ct_autograd_ctx_needs_input_grad(ctx, 0))
        gin[0] = ct_add(ct_mul(gout[0], b), g1);
    if (ct_autograd_ctx_needs_input_grad(ctx, 1))
        gin[1] = ct_sub(ct_mul(gout[0], a), g1);
    if (ct_autograd_ctx_needs_input_grad(ctx, 2))
        gin[2] = gout[0];
    return 3;
}

static const ct_autograd_function_def Two = {"Two", two_fwd, two_bwd};

static void test_needs_input_grad(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(2);
    ct_tensor *a = randn64(CT_SHAPE(5), true), *b = randn64(CT_SHAPE(5), false), *c = randn64(CT_SHAPE(5), true);
    mm_state s = {.materialize = true};
    ct_tensor *in[3] = {a, b, c}, *out[2];
    assert_int_equal(ct_autograd_function_apply(&Two, in, 3, out, 2, &s), CT_OK);
    assert_true(s.needs[0]);
    assert_false(s.needs[1]);
    assert_true(s.needs[2]);
    assert_string_equal(ct_tensor_grad_fn_name(out[0]), "TwoBackward");
    assert_string_equal(ct_tensor_grad_fn_name(out[1]), "TwoBackward");
    /* only output 0 used: output 1's gradient arrives as zeros */
    ct_tensor *grads[2];
    ct_tensor *ins[2] = {a, c};
    assert_int_equal(ct_autograd_grad((const ct_tensor *const *)&(const ct_tensor *){all_sum(out[0])}, 1,
                                      (const ct_tensor *const *)ins, 2, NULL, false, false, false, grads),
                     CT_OK);
    assert_close(grads[0], b, 0);
    assert_close(grads[1], ct_ones_like(c, CT_DTYPE_UNDEFINED), 0);
    assert_int_equal(s.saw_zero_grad, 1);
    /* with materialize_grads off it is NULL */
    s.materialize = false;
    assert_int_equal(ct_autograd_function_apply(&Two, in, 3, out, 2, &s), CT_OK);
    assert_int_equal(ct_backward(all_sum(out[0]), NULL, false, false), CT_OK);
    assert_int_equal(s.saw_null_grad, 1);
    /* both outputs */
    ct_tensor_set_grad(a, NULL);
    assert_int_equal(ct_autograd_function_apply(&Two, in, 3, out, 2, &s), CT_OK);
    assert_int_equal(ct_backward(all_sum(ct_add(out[0], out[1])), NULL, false, false), CT_OK);
    assert_close(ct_tensor_grad(a), ct_add_scalar(b, ct_scalar_int(1)), 1e-15);
    ct_scope_end();
}

/* ------------------------------------------------------------------ mark_non_differentiable, NULL inputs */

static ct_status sort_fwd(ct_autograd_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ud) {
    (void)nin, (void)nout, (void)ud;
    ct_tensor *idx = NULL;
    out[0] = ct_sort(in[0], 0, false, &idx);
    out[1] = ct_to_dtype(idx, CT_F64); /* floating, yet marked non-differentiable */
    if (!out[0] || !out[1])
        return ct_last_status();
    ct_tensor *save[1] = {idx};
    ct_status st = ct_autograd_ctx_mark_non_differentiable(ctx, out[1]);
    return st ? st : ct_autograd_ctx_save_for_backward(ctx, save, 1);
}

static int sort_bwd(ct_autograd_ctx *ctx, ct_tensor *const *gout, int nout, ct_tensor **gin, int nin, void *ud) {
    (void)nout, (void)nin, (void)ud;
    ct_tensor *idx = ct_autograd_ctx_saved(ctx, 0);
    gin[0] = ct_scatter(ct_zeros_like(gout[0], CT_DTYPE_UNDEFINED), 0, idx, gout[0]);
    gin[1] = NULL;
    return 2;
}

static void test_non_differentiable_and_null_input(void **state) {
    (void)state;
    ct_scope_begin();
    double v[4] = {3, 1, 4, 2};
    ct_tensor *x = ct_from_data(v, CT_SHAPE(4), CT_F64);
    ct_tensor_set_requires_grad(x, true);
    static const ct_autograd_function_def Sort = {"MySort", sort_fwd, sort_bwd};
    ct_tensor *in[2] = {x, NULL}, *out[2];
    assert_int_equal(ct_autograd_function_apply(&Sort, in, 2, out, 2, NULL), CT_OK);
    assert_true(ct_tensor_requires_grad(out[0]));
    assert_false(ct_tensor_requires_grad(out[1]));
    assert_null(ct_tensor_grad_fn_name(out[1]));
    double w[4] = {10, 20, 30, 40};
    assert_int_equal(ct_backward(all_sum(ct_mul(out[0], ct_from_data(w, CT_SHAPE(4), CT_F64))), NULL, false, false),
                     CT_OK);
    double want[4] = {30, 10, 40, 20};
    ct_tensor *g = ct_tensor_grad(x);
    for (int i = 0; i < 4; i++)
        assert_true(ct_test_at(g, i) == want[i]);
    ct_scope_end();
}

/* ------------------------------------------------------------------ errors */

static int bad_count_bwd(ct_autograd_ctx *ctx, ct_tensor *const *gout, int nout, ct_tensor **gin, int nin, void *ud) {
    (void)ctx, (void)gout, (void)nout, (void)gin, (void)nin, (void)ud;
    return 0;
}

static int bad_shape_bwd(ct_autograd_ctx *ctx, ct_tensor *const *gout, int nout, ct_tensor **gin, int nin, void *ud) {
    (void)ctx, (void)gout, (void)nout, (void)nin, (void)ud;
    gin[0] = ct_ones(CT_SHAPE(3), CT_F64, CT_CPU);
    return 1;
}

static int grad_for_null_bwd(ct_autograd_ctx *ctx, ct_tensor *const *gout, int nout, ct_tensor **gin, int nin,
                             void *ud) {
    (void)ctx, (void)nout, (void)nin, (void)ud;
    gin[0] = gout[0];
    gin[1] = gout[0];
    return 2;
}

static int failing_bwd(ct_autograd_ctx *ctx, ct_tensor *const *gout, int nout, ct_tensor **gin, int nin, void *ud) {
    (void)ctx, (void)gout, (void)nout, (void)gin, (void)nin, (void)ud;
    ct_error(CT_ERROR_VALUE, "my_backward", "something the backward did not like");
    return -1;
}

static ct_status id_fwd(ct_autograd_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ud) {
    (void)ctx, (void)nin, (void)nout, (void)ud;
    out[0] = in[0]; /* an input returned as it is */
    return CT_OK;
}

static ct_status no_output_fwd(ct_autograd_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out, int nout,
                               void *ud) {
    (void)ctx, (void)in, (void)nin, (void)out, (void)nout, (void)ud;
    return CT_OK;
}

static ct_status late_save_fwd(ct_autograd_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out, int nout,
                               void *ud) {
    (void)nin, (void)nout;
    *(ct_autograd_ctx **)ud = ctx;
    out[0] = ct_mul_scalar(in[0], ct_scalar_int(2));
    return ct_autograd_ctx_save_for_backward(ctx, in, 1);
}

static int late_save_bwd(ct_autograd_ctx *ctx, ct_tensor *const *gout, int nout, ct_tensor **gin, int nin, void *ud) {
    (void)nout, (void)nin, (void)ud;
    if (ct_autograd_ctx_save_for_backward(ctx, gout, 1) == CT_OK)
        return ct_error(CT_ERROR_RUNTIME, "test", "save in backward was accepted"), -1;
    ct_tensor *x = ct_autograd_ctx_saved(ctx, 0);
    if (!x)
        return -1;
    gin[0] = ct_mul_scalar(gout[0], ct_scalar_int(2));
    return 1;
}

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = randn64(CT_SHAPE(2), true), *y = NULL;
    ct_tensor *in2[2] = {x, NULL};
    /* arguments */
    CT_ASSERT_ERR(ct_autograd_function_apply(NULL, &x, 1, &y, 1, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "must not be NULL");
    ct_autograd_function_def d = {"F", NULL, exp_bwd};
    CT_ASSERT_ERR(ct_autograd_function_apply(&d, &x, 1, &y, 1, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "You must implement the forward function");
    d = (ct_autograd_function_def){"F", exp_fwd, NULL};
    CT_ASSERT_ERR(ct_autograd_function_apply(&d, &x, 1, &y, 1, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "You must implement the backward function");
    CT_ASSERT_ERR(ct_autograd_function_apply(&MyExp, &x, 1, NULL, 1, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "must not be NULL");
    CT_ASSERT_ERR(ct_autograd_function_apply(&MyExp, &x, 1, &y, 0, NULL) == CT_OK, CT_ERROR_VALUE,
                  "1 to 8 outputs, got 0");
    CT_ASSERT_ERR(ct_autograd_function_apply(&MyExp, NULL, 1, &y, 1, NULL) == CT_OK, CT_ERROR_VALUE,
                  "expected an array of 1 inputs");
    d = (ct_autograd_function_def){"NoOut", no_output_fwd, exp_bwd};
    CT_ASSERT_ERR(ct_autograd_function_apply(&d, &x, 1, &y, 1, NULL) == CT_OK, CT_ERROR_RUNTIME,
                  "the forward of NoOut wrote no tensor for output 0 of 1");
    /* the context outside its callbacks */
    CT_ASSERT_ERR(ct_autograd_ctx_save_for_backward(NULL, &x, 1) == CT_OK, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_autograd_ctx_saved(NULL, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    assert_false(ct_autograd_ctx_needs_input_grad(NULL, 0));
    /* wrong number of gradients */
    d = (ct_autograd_function_def){"Count", exp_fwd, bad_count_bwd};
    assert_int_equal(ct_autograd_function_apply(&d, &x, 1, &y, 1, NULL), CT_OK);
    CT_ASSERT_ERR(ct_backward(all_sum(y), NULL, false, false) == CT_OK, CT_ERROR_RUNTIME,
                  "function CountBackward returned an incorrect number of gradients (expected 1, got 0)");
    /* a gradient of the wrong shape */
    d = (ct_autograd_function_def){"Shape", exp_fwd, bad_shape_bwd};
    assert_int_equal(ct_autograd_function_apply(&d, &x, 1, &y, 1, NULL), CT_OK);
    CT_ASSERT_ERR(ct_backward(all_sum(y), NULL, false, false) == CT_OK, CT_ERROR_RUNTIME,
                  "Function ShapeBackward returned an invalid gradient at index 0 - got [3] but expected shape "
                  "compatible with [2]");
    /* a gradient for an input that was NULL */
    d = (ct_autograd_function_def){"Null", exp_fwd, grad_for_null_bwd};
    assert_int_equal(ct_autograd_function_apply(&d, in2, 2, &y, 1, NULL), CT_OK);
    CT_ASSERT_ERR(ct_backward(all_sum(y), NULL, false, false) == CT_OK, CT_ERROR_RUNTIME,
                  "function NullBackward returned a gradient different than None at position 2, but the "
                  "corresponding forward input was not a Variable");
    /* the backward's own error comes through */
    d = (ct_autograd_function_def){"Fail", exp_fwd, failing_bwd};
    assert_int_equal(ct_autograd_function_apply(&d, &x, 1, &y, 1, NULL), CT_OK);
    CT_ASSERT_ERR(ct_backward(all_sum(y), NULL, false, false) == CT_OK, CT_ERROR_VALUE,
                  "something the backward did not like");
    /* save outside forward, read outside backward */
    ct_autograd_ctx *kept = NULL;
    d = (ct_autograd_function_def){"Late", late_save_fwd, late_save_bwd};
    ct_tensor *x2 = ct_mul_scalar(x, ct_scalar_int(1));
    assert_int_equal(ct_autograd_function_apply(&d, &x2, 1, &y, 1, &kept), CT_OK);
    assert_int_equal(ct_backward(all_sum(y), NULL, true, false), CT_OK);
    /* a saved input modified in place */
    assert_non_null(ct_add_scalar_(x2, ct_scalar_int(1)));
    CT_ASSERT_ERR(ct_backward(all_sum(y), NULL, false, false) == CT_OK, CT_ERROR_RUNTIME,
                  "one of the variables needed for gradient computation has been modified by an inplace "
                  "operation: [float64 [2]], which is output 0 of MulBackward0, is at version 1; expected version 0 "
                  "instead");
    /* a saved output after a backward freed it */
    assert_int_equal(ct_autograd_function_apply(&MyExp, &x, 1, &y, 1, NULL), CT_OK);
    ct_tensor *loss = all_sum(y);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    CT_ASSERT_ERR(ct_backward(loss, NULL, false, false) == CT_OK, CT_ERROR_RUNTIME,
                  "Trying to backward through the graph a second time");
    /* an input returned as it is: the output is an alias with the function's history */
    d = (ct_autograd_function_def){"Id", id_fwd, ste_bwd};
    assert_int_equal(ct_autograd_function_apply(&d, &x, 1, &y, 1, NULL), CT_OK);
    assert_true(y != x);
    assert_string_equal(ct_tensor_grad_fn_name(y), "IdBackward");
    assert_true(ct_tensor_is_leaf(x));
    bool prev = ct_set_grad_enabled(false); /* not recorded: still an alias */
    assert_int_equal(ct_autograd_function_apply(&d, &x, 1, &y, 1, NULL), CT_OK);
    ct_set_grad_enabled(prev);
    assert_true(y != x);
    assert_null(ct_tensor_grad_fn_name(y));
    ct_scope_end();
}

/* ------------------------------------------------------------------ memory */

static int state_frees;
static void count_free(void *p) {
    (void)p;
    state_frees++;
}

static ct_status big_fwd(ct_autograd_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ud) {
    (void)nin, (void)nout, (void)ud;
    ct_autograd_ctx_set_state(ctx, &state_frees, count_free);
    ct_tensor *t = ct_mul_scalar(in[0], ct_scalar_int(3)); /* an intermediate, saved */
    out[0] = ct_exp(t);
    ct_tensor *save[3] = {in[0], t, out[0]};
    return ct_autograd_ctx_save_for_backward(ctx, save, 3);
}

static int big_bwd(ct_autograd_ctx *ctx, ct_tensor *const *gout, int nout, ct_tensor **gin, int nin, void *ud) {
    (void)nout, (void)nin, (void)ud;
    if (ct_autograd_ctx_state(ctx) != &state_frees || ct_autograd_ctx_saved_count(ctx) != 3)
        return ct_error(CT_ERROR_RUNTIME, "test", "state or saved count lost"), -1;
    ct_tensor *y = ct_autograd_ctx_saved(ctx, 2);
    gin[0] = ct_mul_scalar(ct_mul(gout[0], y), ct_scalar_int(3));
    return gin[0] ? 1 : -1;
}

static void test_memory(void **state) {
    (void)state;
    static const ct_autograd_function_def Big = {"Big", big_fwd, big_bwd};
    ct_tensor *x = randn64(CT_SHAPE(256, 256), true); /* no scope open: owned */
    int64_t base = ct_memory_allocated(CT_CPU);
    state_frees = 0;
    ct_scope_begin();
    ct_tensor *y = NULL;
    assert_int_equal(ct_autograd_function_apply(&Big, &x, 1, &y, 1, NULL), CT_OK);
    ct_keep(y);
    ct_scope_end();
    /* y and the saved intermediate (256 x 256 float64 each) stay alive */
    assert_true(ct_memory_allocated(CT_CPU) >= base + 2 * 256 * 256 * 8);
    ct_release(y); /* the graph, its saved tensors and the state go with y */
    assert_int_equal(ct_memory_allocated(CT_CPU), base);
    assert_int_equal(state_frees, 1);
    /* after a backward without retain_graph the saved tensors are freed */
    ct_scope_begin();
    assert_int_equal(ct_autograd_function_apply(&Big, &x, 1, &y, 1, NULL), CT_OK);
    ct_tensor *loss = all_sum(y);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    ct_tensor_set_grad(x, NULL);
    ct_scope_end();
    assert_int_equal(ct_memory_allocated(CT_CPU), base);
    assert_int_equal(state_frees, 2);
    ct_release(x);
}

/* ------------------------------------------------------------------ checkpoint */

typedef struct {
    int nlayers;
    ct_tensor **w; /* (d, d) each, require grad */
    double p;      /* dropout */
    int calls;
} stack;

/* tanh(h w) * (h w), dropped out: the plain graph keeps h w, its tanh and the result
 * per layer. */
static ct_tensor *layer(const stack *s, int i, const ct_tensor *h) {
    ct_tensor *a = ct_mm(h, s->w[i]);
    ct_tensor *y = ct_mul(ct_tanh(a), a);
    if (s->p > 0)
        y = ct_dropout(y, s->p, true);
    return y;
}

static ct_status stack_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ud) {
    (void)nin, (void)nout;
    stack *s = ud;
    s->calls++;
    ct_tensor *h = in[0];
    for (int i = 0; i < s->nlayers && h; i++)
        h = layer(s, i, h);
    out[0] = h;
    return h ? CT_OK : ct_last_status();
}

/* One layer per checkpoint. */
typedef struct {
    stack *s;
    int i;
} one_layer;

static ct_status one_layer_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ud) {
    (void)nin, (void)nout;
    one_layer *l = ud;
    l->s->calls++;
    out[0] = layer(l->s, l->i, in[0]);
    return out[0] ? CT_OK : ct_last_status();
}

static stack make_stack(int n, int d, double p) {
    stack s = {.nlayers = n, .p = p};
    s.w = calloc((size_t)n, sizeof *s.w);
    ct_scope_begin();
    for (int i = 0; i < n; i++) {
        s.w[i] = ct_retain(ct_mul_scalar(ct_randn(CT_SHAPE(d, d), CT_F64, CT_CPU), ct_scalar_float(0.3)));
        ct_tensor_set_requires_grad(s.w[i], true);
    }
    ct_scope_end();
    return s;
}

static void free_stack(stack *s) {
    for (int i = 0; i < s->nlayers; i++)
        ct_release(s->w[i]);
    free(s->w);
}

/* Gradients of sum(f(x)) for x and every weight, with each layer checkpointed or not. */
static void run_stack(stack *s, ct_tensor *x, bool ckpt, ct_tensor **grads) {
    ct_scope_begin();
    ct_tensor *h = x;
    one_layer *ls = calloc((size_t)s->nlayers, sizeof *ls);
    for (int i = 0; i < s->nlayers; i++) {
        ls[i] = (one_layer){s, i};
        if (ckpt) {
            ct_tensor *o = NULL;
            assert_int_equal(ct_checkpoint(one_layer_fn, &h, 1, &o, 1, &ls[i]), CT_OK);
            assert_string_equal(ct_tensor_grad_fn_name(o), "CheckpointBackward");
            h = o;
        } else {
            h = layer(s, i, h);
        }
    }
    assert_int_equal(ct_backward(all_sum(h), NULL, false, false), CT_OK);
    grads[0] = ct_retain(ct_tensor_grad(x));
    for (int i = 0; i < s->nlayers; i++) {
        grads[1 + i] = ct_retain(ct_tensor_grad(s->w[i]));
        ct_tensor_set_grad(s->w[i], NULL);
    }
    ct_tensor_set_grad(x, NULL);
    free(ls);
    ct_scope_end();
}

static void compare_stack(double p) {
    ct_manual_seed(7);
    stack s = make_stack(4, 16, p);
    ct_tensor *x = randn64(CT_SHAPE(8, 16), true); /* no scope open: owned */
    ct_tensor *plain[5], *ck[5];
    ct_manual_seed(100);
    run_stack(&s, x, false, plain);
    ct_manual_seed(100);
    int calls = s.calls;
    run_stack(&s, x, true, ck);
    assert_int_equal(s.calls, calls + 2 * s.nlayers); /* forward, then recomputation */
    for (int i = 0; i < 5; i++) {
        assert_bits(plain[i], ck[i]);
        ct_release(plain[i]);
        ct_release(ck[i]);
    }
    ct_release(x);
    free_stack(&s);
}

static void test_checkpoint_same_gradients(void **state) {
    (void)state;
    compare_stack(0.0);
}

static void test_checkpoint_dropout(void **state) {
    (void)state;
    compare_stack(0.5);
    /* the generator continues from where the forward left it, not the recomputation */
    ct_manual_seed(3);
    stack s = make_stack(1, 4, 0.5);
    ct_tensor *x = randn64(CT_SHAPE(2, 4), true); /* no scope open: owned */
    ct_scope_begin();
    ct_manual_seed(5);
    ct_tensor *o = NULL;
    assert_int_equal(ct_checkpoint(stack_fn, &x, 1, &o, 1, &s), CT_OK);
    ct_tensor *after_fwd = ct_rand(CT_SHAPE(4), CT_F64, CT_CPU);
    ct_manual_seed(5);
    ct_tensor *o2 = NULL;
    assert_int_equal(ct_checkpoint(stack_fn, &x, 1, &o2, 1, &s), CT_OK);
    assert_int_equal(ct_backward(all_sum(o2), NULL, false, false), CT_OK);
    ct_tensor *after_bwd = ct_rand(CT_SHAPE(4), CT_F64, CT_CPU);
    assert_bits(after_fwd, after_bwd);
    assert_bits(o, o2);
    ct_scope_end();
    ct_tensor_set_grad(x, NULL);
    ct_release(x);
    free_stack(&s);
}

/* Bytes alive between forward and backward: the plain stack keeps every layer's
 * activations, the checkpointed one only each layer's input. */
static int64_t stack_bytes(stack *s, ct_tensor *x, bool ckpt) {
    int64_t base = ct_memory_allocated(CT_CPU);
    ct_scope_begin();
    ct_tensor *h = x;
    one_layer *ls = calloc((size_t)s->nlayers, sizeof *ls);
    for (int i = 0; i < s->nlayers; i++) {
        ls[i] = (one_layer){s, i};
        ct_scope_begin();
        ct_tensor *o = NULL;
        if (ckpt)
            assert_int_equal(ct_checkpoint(one_layer_fn, &h, 1, &o, 1, &ls[i]), CT_OK);
        else
            o = layer(s, i, h);
        h = ct_keep(o);
        ct_scope_end();
    }
    int64_t held = ct_memory_allocated(CT_CPU) - base;
    assert_int_equal(ct_backward(all_sum(h), NULL, false, false), CT_OK);
    free(ls);
    ct_scope_end();
    return held;
}

static void test_checkpoint_memory(void **state) {
    (void)state;
    ct_manual_seed(9);
    stack s = make_stack(6, 128, 0.0);
    ct_tensor *x = randn64(CT_SHAPE(256, 128), true); /* no scope open: owned */
    int64_t plain = stack_bytes(&s, x, false), ck = stack_bytes(&s, x, true);
    int64_t act = 256 * 128 * 8; /* one activation */
    /* plain: three activations per layer; checkpointed: one (its output, the next
     * one's saved input) */
    assert_true(plain >= 18 * act);
    assert_true(ck <= 6 * act + act / 2);
    ct_tensor_set_grad(x, NULL);
    for (int i = 0; i < s.nlayers; i++)
        ct_tensor_set_grad(s.w[i], NULL);
    ct_release(x);
    free_stack(&s);
}

/* tanh(x w) * (x w) with x and w both inputs of the checkpoint. */
static ct_status xw_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ud) {
    (void)nin, (void)nout, (void)ud;
    ct_tensor *a = ct_mm(in[0], in[1]);
    out[0] = ct_mul(ct_tanh(a), a);
    return out[0] ? CT_OK : ct_last_status();
}

static ct_tensor *ckpt_grad_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    ct_tensor *o = NULL;
    return ct_checkpoint(xw_fn, in, 2, &o, 1, NULL) == CT_OK ? o : NULL;
}

static void test_checkpoint_gradcheck(void **state) {
    (void)state;
    ct_manual_seed(11);
    stack s = make_stack(1, 3, 0.0);
    ct_scope_begin();
    ct_tensor *in[2] = {randn64(CT_SHAPE(2, 3), true), randn64(CT_SHAPE(3, 3), true)};
    if (ct_gradcheck(ckpt_grad_fn, &s, in, 2, 1e-6, 1e-7, 1e-5) != CT_OK)
        fail_msg("gradcheck: %s", ct_last_error());
    if (ct_gradgradcheck(ckpt_grad_fn, &s, in, 2, 1e-6, 1e-6, 1e-4) != CT_OK)
        fail_msg("gradgradcheck: %s", ct_last_error());
    /* ct_autograd_grad reaches a weight used inside through user_data, though the input does not require grad */
    ct_tensor *x = randn64(CT_SHAPE(2, 3), false), *o = NULL, *g = NULL;
    assert_int_equal(ct_checkpoint(stack_fn, &x, 1, &o, 1, &s), CT_OK);
    assert_true(ct_tensor_requires_grad(o));
    const ct_tensor *outs[1] = {all_sum(o)}, *ins[1] = {s.w[0]};
    assert_int_equal(ct_autograd_grad(outs, 1, ins, 1, NULL, false, false, false, &g), CT_OK);
    ct_tensor *want = NULL;
    const ct_tensor *outs2[1] = {all_sum(layer(&s, 0, x))};
    assert_int_equal(ct_autograd_grad(outs2, 1, ins, 1, NULL, false, false, false, &want), CT_OK);
    assert_bits(g, want);
    assert_null(ct_tensor_grad(s.w[0])); /* autograd_grad leaves .grad alone */
    ct_scope_end();
    free_stack(&s);
}

/* Two layers, each in a checkpoint of its own, inside an outer checkpoint; the
 * second layer's tanh replaced by the custom exp. */
static ct_status nested_inner(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ud) {
    (void)nin, (void)nout;
    one_layer *l = ud;
    ct_tensor *a = ct_mm(in[0], l->s->w[l->i]);
    out[0] = l->i == 0 ? ct_mul(ct_tanh(a), a) : ct_dropout(my_exp(ct_mul_scalar(a, ct_scalar_float(0.1))), 0.3, true);
    return out[0] ? CT_OK : ct_last_status();
}

static ct_status nested_outer(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ud) {
    (void)nin, (void)nout;
    one_layer *ls = ud;
    ct_tensor *h = NULL, *o = NULL;
    ct_status st = ct_checkpoint(nested_inner, in, 1, &h, 1, &ls[0]);
    if (st == CT_OK)
        st = ct_checkpoint(nested_inner, &h, 1, &o, 1, &ls[1]);
    out[0] = o;
    return st;
}

static void test_checkpoint_nested(void **state) {
    (void)state;
    ct_manual_seed(13);
    stack s = make_stack(2, 5, 0.0);
    one_layer ls[2] = {{&s, 0}, {&s, 1}};
    ct_tensor *x = randn64(CT_SHAPE(3, 5), true); /* no scope open: owned */
    ct_tensor *g[2][3];
    for (int ck = 0; ck < 2; ck++) {
        ct_scope_begin();
        ct_manual_seed(77);
        ct_tensor *o = NULL;
        if (ck) {
            assert_int_equal(ct_checkpoint(nested_outer, &x, 1, &o, 1, ls), CT_OK);
        } else {
            ct_tensor *h = NULL;
            assert_int_equal(nested_inner(&x, 1, &h, 1, &ls[0]), CT_OK);
            assert_int_equal(nested_inner(&h, 1, &o, 1, &ls[1]), CT_OK);
        }
        const ct_tensor *outs[1] = {all_sum(o)}, *ins[3] = {x, s.w[0], s.w[1]};
        assert_int_equal(ct_autograd_grad(outs, 1, ins, 3, NULL, false, false, false, g[ck]), CT_OK);
        for (int i = 0; i < 3; i++)
            ct_keep(g[ck][i]);
        ct_scope_end();
    }
    for (int i = 0; i < 3; i++) {
        assert_bits(g[0][i], g[1][i]);
        ct_release(g[0][i]);
        ct_release(g[1][i]);
    }
    ct_release(x);
    free_stack(&s);
}

static ct_status bad_ckpt_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ud) {
    (void)in, (void)nin, (void)out, (void)nout, (void)ud;
    return ct_error(CT_ERROR_VALUE, "inner", "the function failed");
}

static ct_status shape_changing_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ud) {
    (void)nin, (void)nout;
    int *calls = ud;
    out[0] = (*calls)++ == 0 ? ct_mul(in[0], in[0]) : ct_sum(in[0], NULL, 0, false, CT_DTYPE_UNDEFINED);
    return out[0] ? CT_OK : ct_last_status();
}

static ct_status identity_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ud) {
    (void)nin, (void)nout, (void)ud;
    out[0] = in[0];
    return CT_OK;
}

static void test_checkpoint_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = randn64(CT_SHAPE(3), true), *o = NULL;
    CT_ASSERT_ERR(ct_checkpoint(NULL, &x, 1, &o, 1, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "must not be NULL");
    CT_ASSERT_ERR(ct_checkpoint(stack_fn, &x, 1, NULL, 1, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "must not be NULL");
    CT_ASSERT_ERR(ct_checkpoint(stack_fn, &x, 1, &o, 9, NULL) == CT_OK, CT_ERROR_VALUE, "1 to 8 outputs, got 9");
    CT_ASSERT_ERR(ct_checkpoint(stack_fn, NULL, 2, &o, 1, NULL) == CT_OK, CT_ERROR_VALUE, "array of 2 inputs");
    CT_ASSERT_ERR(ct_checkpoint(bad_ckpt_fn, &x, 1, &o, 1, NULL) == CT_OK, CT_ERROR_VALUE, "the function failed");
    int calls = 0;
    assert_int_equal(ct_checkpoint(shape_changing_fn, &x, 1, &o, 1, &calls), CT_OK);
    CT_ASSERT_ERR(ct_backward(all_sum(o), NULL, false, false) == CT_OK, CT_ERROR_RUNTIME,
                  "Recomputed values for the following tensors have different metadata than during the forward "
                  "pass");
    /* backward twice without retain_graph */
    ct_tensor *y = ct_mul_scalar(x, ct_scalar_int(2));
    calls = 0;
    assert_int_equal(ct_checkpoint(shape_changing_fn, &y, 1, &o, 1, &calls), CT_OK);
    calls = 0;
    ct_tensor *loss = all_sum(o);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    calls = 0;
    CT_ASSERT_ERR(ct_backward(loss, NULL, false, false) == CT_OK, CT_ERROR_RUNTIME,
                  "Trying to backward through the graph a second time");
    /* under no_grad fn just runs; an input returned as it is comes back as an alias */
    bool prev = ct_set_grad_enabled(false);
    calls = 0;
    assert_int_equal(ct_checkpoint(shape_changing_fn, &x, 1, &o, 1, &calls), CT_OK);
    assert_false(ct_tensor_requires_grad(o));
    assert_int_equal(ct_checkpoint(identity_fn, &x, 1, &o, 1, NULL), CT_OK);
    assert_true(o != x);
    ct_set_grad_enabled(prev);
    /* with grad: the output is the checkpoint's, the gradient passes */
    assert_int_equal(ct_checkpoint(identity_fn, &x, 1, &o, 1, NULL), CT_OK);
    assert_true(o != x);
    assert_string_equal(ct_tensor_grad_fn_name(o), "CheckpointBackward");
    ct_tensor_set_grad(x, NULL);
    assert_int_equal(ct_backward(all_sum(o), NULL, false, false), CT_OK);
    assert_close(ct_tensor_grad(x), ct_ones_like(x, CT_DTYPE_UNDEFINED), 0);
    ct_scope_end();
}

int main(int argc, char **argv) {
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_custom_exp),
        cmocka_unit_test(test_straight_through),
        cmocka_unit_test(test_needs_input_grad),
        cmocka_unit_test(test_non_differentiable_and_null_input),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_checkpoint_same_gradients),
        cmocka_unit_test(test_checkpoint_dropout),
        cmocka_unit_test(test_checkpoint_memory),
        cmocka_unit_test(test_checkpoint_gradcheck),
        cmocka_unit_test(test_checkpoint_nested),
        cmocka_unit_test(test_checkpoint_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
