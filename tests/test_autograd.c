/* Autograd: engine, accumulation, misuse errors, modes, hooks, detach, threads. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "testutil.h"

static ct_tensor *vec(const double *v, int64_t n) {
    return ct_from_data(v, CT_SHAPE(n), CT_F64);
}

static ct_tensor *leaf(const double *v, int64_t n) {
    ct_tensor *t = vec(v, n);
    ct_tensor_set_requires_grad(t, true);
    return t;
}

/* sum of t's elements as a differentiable 0-d tensor (dot with ones). */
static ct_tensor *vsum(const ct_tensor *t) {
    return ct_dot(t, ct_ones_like(t, CT_DTYPE_UNDEFINED));
}

static void assert_vals(const ct_tensor *t, const double *want, int64_t n, double tol) {
    assert_non_null(t);
    assert_int_equal(ct_tensor_numel(t), n);
    for (int64_t i = 0; i < n; i++)
        if (fabs(ct_test_at(t, i) - want[i]) > tol * (1 + fabs(want[i])))
            fail_msg("element %lld: got %.17g, want %.17g", (long long)i, ct_test_at(t, i), want[i]);
}

static void test_basic_chain(void **state) {
    (void)state;
    ct_scope_begin();
    double xv[3] = {0.5, -1.0, 2.0};
    ct_tensor *x = leaf(xv, 3);
    ct_tensor *y = ct_mul(ct_exp(x), x); /* d/dx x e^x = (1 + x) e^x */
    assert_true(ct_tensor_requires_grad(y));
    assert_false(ct_tensor_is_leaf(y));
    assert_string_equal(ct_tensor_grad_fn_name(y), "MulBackward0");
    assert_null(ct_tensor_grad_fn_name(x));
    assert_true(ct_tensor_is_leaf(x));
    assert_int_equal(ct_backward(vsum(y), NULL, false, false), CT_OK);
    double want[3];
    for (int i = 0; i < 3; i++)
        want[i] = (1 + xv[i]) * exp(xv[i]);
    assert_vals(ct_tensor_grad(x), want, 3, 1e-14);
    assert_null(ct_tensor_grad(y)); /* non-leaf: not retained */
    ct_scope_end();
}

static void test_broadcast_and_dtype(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3), CT_F64, CT_CPU);
    ct_tensor *b = ct_from_data((float[]){1, 2, 3}, CT_SHAPE(3), CT_F32);
    ct_tensor_set_requires_grad(a, true);
    ct_tensor_set_requires_grad(b, true);
    ct_tensor *c = ct_mul(a, b); /* float64 [2, 3] */
    assert_int_equal(ct_tensor_dtype(c), CT_F64);
    ct_tensor *g = ct_full(CT_SHAPE(2, 3), ct_scalar_float(2), CT_F64, CT_CPU);
    assert_int_equal(ct_backward(c, g, false, false), CT_OK);
    ct_tensor *gb = ct_tensor_grad(b);
    assert_int_equal(ct_tensor_dtype(gb), CT_F32); /* the input's dtype */
    CT_ASSERT_SHAPE(gb, 3);
    assert_vals(gb, (double[]){4, 4, 4}, 3, 0);
    ct_tensor *ga = ct_tensor_grad(a);
    CT_ASSERT_SHAPE(ga, 2, 3);
    assert_vals(ga, (double[]){2, 4, 6, 2, 4, 6}, 6, 0);
    ct_scope_end();
}

static void test_accumulate_and_retain_graph(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){1, 2}, 2);
    ct_tensor *y = vsum(ct_mul(x, x));
    assert_int_equal(ct_backward(y, NULL, true, false), CT_OK);
    assert_vals(ct_tensor_grad(x), (double[]){2, 4}, 2, 0);
    assert_int_equal(ct_backward(y, NULL, false, false), CT_OK);
    assert_vals(ct_tensor_grad(x), (double[]){4, 8}, 2, 0);
    /* The graph's saved tensors are gone now. */
    CT_ASSERT_ERR(ct_backward(y, NULL, false, false) == CT_OK, CT_ERROR_RUNTIME,
                  "Trying to backward through the graph a second time");
    /* set_grad(NULL) clears, as zero_grad(set_to_none=True). */
    assert_int_equal(ct_tensor_set_grad(x, NULL), CT_OK);
    assert_null(ct_tensor_grad(x));
    ct_scope_end();
}

static void test_first_grad_is_a_copy(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){1, 2}, 2);
    ct_tensor *go = vec((double[]){3, 4}, 2);
    assert_int_equal(ct_backward(x, go, false, false), CT_OK);
    ct_tensor *g = ct_tensor_grad(x);
    assert_vals(g, (double[]){3, 4}, 2, 0);
    assert_false(ct_tensor_shares_storage(g, go));
    assert_false(ct_tensor_requires_grad(g));
    ct_scope_end();
}

static void test_misuse_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){1, 2, 3}, 3);
    CT_ASSERT_ERR(ct_exp_(x) != NULL, CT_ERROR_RUNTIME,
                  "a leaf Variable that requires grad is being used in an in-place operation.");
    ct_tensor *y = ct_exp(x);
    CT_ASSERT_ERR(ct_backward(y, NULL, false, false) == CT_OK, CT_ERROR_RUNTIME,
                  "grad can be implicitly created only for scalar outputs");
    ct_tensor *plain = vec((double[]){1}, 1);
    CT_ASSERT_ERR(ct_backward(plain, NULL, false, false) == CT_OK, CT_ERROR_RUNTIME,
                  "element 0 of tensors does not require grad and does not have a grad_fn");
    CT_ASSERT_ERR(ct_backward(y, vec((double[]){1, 1}, 2), false, false) == CT_OK, CT_ERROR_RUNTIME,
                  "Mismatch in shape");
    CT_ASSERT_ERR(ct_exp_out(x, ct_empty_like(x, CT_DTYPE_UNDEFINED)) != NULL, CT_ERROR_RUNTIME,
                  "functions with out=... arguments don't support automatic differentiation");
    /* In place on a tensor saved for backward: caught at backward, naming the node. */
    ct_tensor *xf = ct_from_data((float[]){1, 2, 3}, CT_SHAPE(3), CT_F32);
    ct_tensor_set_requires_grad(xf, true);
    ct_tensor *b = ct_mul_scalar(xf, ct_scalar_int(1));
    assert_non_null(ct_exp_(b));
    assert_string_equal(ct_tensor_grad_fn_name(b), "ExpBackward0");
    assert_non_null(ct_mul_scalar_(b, ct_scalar_int(2)));
    CT_ASSERT_ERR(ct_backward(ct_dot(b, ct_ones_like(b, CT_DTYPE_UNDEFINED)), NULL, false, false) == CT_OK,
                  CT_ERROR_RUNTIME,
                  "one of the variables needed for gradient computation has been modified by an inplace operation: "
                  "[float32 [3]], which is output 0 of ExpBackward0, is at version 2; expected version 1 instead.");
    /* Leaves may be changed in place under no_grad (an optimizer step). */
    bool prev = ct_set_grad_enabled(false);
    assert_non_null(ct_mul_scalar_(x, ct_scalar_int(2)));
    ct_set_grad_enabled(prev);
    assert_true(ct_tensor_is_leaf(x));
    /* NULL arguments. */
    CT_ASSERT_ERR(ct_backward(NULL, NULL, false, false) == CT_OK, CT_ERROR_NULL_ARGUMENT, "backward");
    CT_ASSERT_ERR(ct_tensor_grad(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "grad");
    CT_ASSERT_ERR(ct_tensor_set_grad(NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "set_grad");
    CT_ASSERT_ERR(ct_tensor_set_grad(x, vec((double[]){1}, 1)) == CT_OK, CT_ERROR_VALUE, "different size");
    CT_ASSERT_ERR(ct_tensor_set_grad(x, ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU)) == CT_OK, CT_ERROR_TYPE,
                  "different type");
    CT_ASSERT_ERR(ct_detach(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "detach");
    CT_ASSERT_ERR(ct_detach_(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "detach_");
    CT_ASSERT_ERR(ct_tensor_retain_grad(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "retain_grad");
    CT_ASSERT_ERR(ct_tensor_retain_grad(plain) == CT_OK, CT_ERROR_RUNTIME, "requires_grad=False");
    assert_false(ct_tensor_is_leaf(NULL));
    assert_null(ct_tensor_grad_fn_name(NULL));
    ct_scope_end();
}

/* Roots where one is reached from another (y and y[1]): y's node waits for the
 * gradient coming through the select before it runs, whatever the roots' order. */
static void test_autograd_grad_overlapping_roots(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){1, 2}, 2);
    ct_tensor *y = ct_mul_scalar(x, ct_scalar_float(2));
    ct_tensor *y1 = ct_select(y, 0, 1);
    const ct_tensor *ins[1] = {x};
    const ct_tensor *gy = vec((double[]){1, 1}, 2), *g1 = ct_scalar_tensor(ct_scalar_float(10), CT_F64, CT_CPU);
    for (int order = 0; order < 2; order++) {
        const ct_tensor *outs[2] = {order ? y1 : y, order ? y : y1};
        const ct_tensor *gouts[2] = {order ? g1 : gy, order ? gy : g1};
        ct_tensor *g[1];
        assert_int_equal(ct_autograd_grad(outs, 2, ins, 1, gouts, true, false, false, g), CT_OK);
        assert_vals(g[0], (double[]){2, 22}, 2, 1e-15);
    }
    ct_scope_end();
}

static void test_autograd_grad(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){1, 2}, 2);
    ct_tensor *z = leaf((double[]){5, 6}, 2);
    ct_tensor *y = vsum(ct_mul(ct_mul(x, x), x)); /* sum x^3 */
    ct_tensor *g[2];
    const ct_tensor *outs[1] = {y};
    const ct_tensor *ins[2] = {x, z};
    CT_ASSERT_ERR(ct_autograd_grad(outs, 1, ins, 2, NULL, true, false, false, g) == CT_OK, CT_ERROR_RUNTIME,
                  "appears to not have been used in the graph");
    assert_int_equal(ct_autograd_grad(outs, 1, ins, 2, NULL, false, true, true, g), CT_OK);
    assert_null(g[1]);
    assert_vals(g[0], (double[]){3, 12}, 2, 1e-15);
    assert_null(ct_tensor_grad(x)); /* .grad untouched */
    assert_true(ct_tensor_requires_grad(g[0])); /* create_graph */
    /* Second derivative: d/dx sum(3x^2) = 6x. */
    ct_tensor *g2[1];
    const ct_tensor *o2[1] = {vsum(g[0])};
    assert_int_equal(ct_autograd_grad(o2, 1, ins, 1, NULL, false, false, false, g2), CT_OK);
    assert_vals(g2[0], (double[]){6, 12}, 2, 1e-15);
    assert_false(ct_tensor_requires_grad(g2[0]));
    /* Errors. */
    const ct_tensor *plain_in[1] = {vec((double[]){1}, 1)};
    CT_ASSERT_ERR(ct_autograd_grad(outs, 1, plain_in, 1, NULL, false, false, false, g) == CT_OK, CT_ERROR_RUNTIME,
                  "does not require grad");
    CT_ASSERT_ERR(ct_autograd_grad(NULL, 1, ins, 1, NULL, false, false, false, g) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "autograd_grad");
    CT_ASSERT_ERR(ct_autograd_grad(outs, 1, ins, 0, NULL, false, false, false, g) == CT_OK, CT_ERROR_VALUE,
                  "at least one input");
    CT_ASSERT_ERR(ct_autograd_grad(outs, 0, ins, 1, NULL, false, false, false, g) == CT_OK, CT_ERROR_VALUE,
                  "no outputs");
    ct_scope_end();
}

static void test_create_graph_backward(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){0.3, -0.7}, 2);
    ct_tensor *y = vsum(ct_sin(x));
    assert_int_equal(ct_backward(y, NULL, false, true), CT_OK);
    /* cos(x): its history saves x, so it is stored without it (Note [Gradients that
     * hold their tensor]) */
    ct_tensor *gx = ct_tensor_grad(x);
    assert_false(ct_tensor_requires_grad(gx));
    assert_vals(gx, (double[]){cos(0.3), cos(-0.7)}, 2, 1e-15);
    /* a gradient penalty sum cos^2 through ct_autograd_grad, which stores nothing */
    assert_int_equal(ct_tensor_set_grad(x, NULL), CT_OK);
    ct_tensor *g[1] = {NULL};
    const ct_tensor *outs[1] = {vsum(ct_sin(x))}, *ins[1] = {x};
    assert_int_equal(ct_autograd_grad(outs, 1, ins, 1, NULL, false, true, false, g), CT_OK);
    assert_true(ct_tensor_requires_grad(g[0]));
    ct_tensor *p = vsum(ct_mul(g[0], g[0]));
    assert_int_equal(ct_backward(p, NULL, false, false), CT_OK);
    double want[2];
    for (int i = 0; i < 2; i++) {
        double v = i ? -0.7 : 0.3;
        want[i] = -2 * cos(v) * sin(v);
    }
    assert_vals(ct_tensor_grad(x), want, 2, 1e-14);
    ct_scope_end();
}

static void test_no_grad_and_inference(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){1, 2}, 2);
    assert_true(ct_is_grad_enabled());
    bool prev = ct_set_grad_enabled(false);
    assert_true(prev);
    assert_false(ct_is_grad_enabled());
    ct_tensor *y = ct_exp(x);
    assert_false(ct_tensor_requires_grad(y));
    assert_true(ct_tensor_is_leaf(y));
    ct_set_grad_enabled(true);
    ct_tensor *z = ct_exp(x);
    assert_true(ct_tensor_requires_grad(z));
    ct_set_grad_enabled(prev);

    ct_inference_mode_begin();
    assert_true(ct_is_inference_mode_enabled());
    assert_false(ct_is_grad_enabled());
    ct_tensor *t = ct_ones(CT_SHAPE(2), CT_F64, CT_CPU);
    ct_tensor *u = ct_exp(x);
    assert_false(ct_tensor_requires_grad(u));
    ct_inference_mode_end();
    assert_false(ct_is_inference_mode_enabled());
    assert_true(ct_is_grad_enabled());
    CT_ASSERT_ERR(ct_tensor_set_requires_grad(t, true) != NULL, CT_ERROR_RUNTIME, "inference tensor");
    CT_ASSERT_ERR(ct_mul(x, t) != NULL, CT_ERROR_RUNTIME, "Inference tensors cannot be saved for backward");
    CT_ASSERT_ERR(ct_mul(x, u) != NULL, CT_ERROR_RUNTIME, "Inference tensors cannot be saved for backward");
    /* A normal tensor made outside works. */
    ct_tensor *w = ct_ones(CT_SHAPE(2), CT_F64, CT_CPU);
    assert_non_null(ct_mul(x, w));
    /* Nesting: grad mode inside inference mode stays off; leaving restores it. */
    ct_inference_mode_begin();
    ct_inference_mode_begin();
    ct_inference_mode_end();
    assert_true(ct_is_inference_mode_enabled());
    ct_inference_mode_end();
    ct_inference_mode_end(); /* unbalanced: ignored */
    assert_true(ct_is_grad_enabled());
    ct_scope_end();
}

static void test_detach(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){1, 2}, 2);
    ct_tensor *y = ct_exp(x);
    ct_tensor *d = ct_detach(y);
    assert_false(ct_tensor_requires_grad(d));
    assert_true(ct_tensor_is_leaf(d));
    assert_true(ct_tensor_shares_storage(d, y));
    /* Gradient stops at the detached tensor. */
    ct_tensor *z = vsum(ct_mul(y, d));
    assert_int_equal(ct_backward(z, NULL, false, false), CT_OK);
    assert_vals(ct_tensor_grad(x), (double[]){exp(2), exp(4)}, 2, 1e-14);
    ct_tensor *y2 = ct_exp(x);
    assert_non_null(ct_detach_(y2));
    assert_false(ct_tensor_requires_grad(y2));
    assert_true(ct_tensor_is_leaf(y2));
    ct_scope_end();
}

static ct_tensor *double_it(const ct_tensor *g, void *ud) {
    (*(int *)ud)++;
    return ct_mul_scalar(g, ct_scalar_int(2));
}

static ct_tensor *observe(const ct_tensor *g, void *ud) {
    *(double *)ud = ct_test_at(g, 0);
    return NULL;
}

static void count_post(ct_tensor *t, void *ud) {
    ct_tensor *g = ct_tensor_grad(t);
    *(double *)ud = ct_test_at(g, 0);
}

static void test_hooks(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){1, 2}, 2);
    int calls = 0;
    int64_t h = ct_tensor_register_hook(x, double_it, &calls);
    assert_true(h > 0);
    double seen_post = 0;
    int64_t hp = ct_tensor_register_post_accumulate_grad_hook(x, count_post, &seen_post);
    assert_true(hp > 0);
    ct_tensor *y = ct_mul_scalar(x, ct_scalar_int(3));
    double seen_y = 0;
    assert_true(ct_tensor_register_hook(y, observe, &seen_y) > 0);
    assert_int_equal(ct_backward(vsum(y), NULL, false, false), CT_OK);
    assert_int_equal(calls, 1);
    assert_true(seen_y == 1.0);
    assert_vals(ct_tensor_grad(x), (double[]){6, 6}, 2, 0);
    assert_true(seen_post == 6.0); /* runs after accumulation */
    assert_int_equal(ct_remove_hook(h), CT_OK);
    CT_ASSERT_ERR(ct_remove_hook(h) == CT_OK, CT_ERROR_VALUE, "no hook");
    assert_int_equal(ct_backward(vsum(ct_mul_scalar(x, ct_scalar_int(3))), NULL, false, false), CT_OK);
    assert_vals(ct_tensor_grad(x), (double[]){9, 9}, 2, 0);
    assert_int_equal(calls, 1);
    /* A hook on an intermediate tensor changes what flows further back. */
    int calls2 = 0;
    ct_tensor *x2 = leaf((double[]){1, 2}, 2);
    ct_tensor *m = ct_mul(x2, x2);
    assert_true(ct_tensor_register_hook(m, double_it, &calls2) > 0);
    assert_int_equal(ct_backward(vsum(ct_exp(m)), NULL, false, false), CT_OK);
    assert_int_equal(calls2, 1);
    assert_vals(ct_tensor_grad(x2), (double[]){2 * exp(1) * 2, 2 * exp(4) * 4}, 2, 1e-14);
    /* An integer grad_output for a float output is refused. */
    ct_tensor *yy = ct_mul(x2, x2);
    CT_ASSERT_ERR(ct_backward(yy, ct_ones(CT_SHAPE(2), CT_I64, CT_CPU), false, false) == CT_OK, CT_ERROR_TYPE,
                  "Mismatch in dtype");
    /* Errors. */
    ct_tensor *plain = vec((double[]){1}, 1);
    CT_ASSERT_ERR(ct_tensor_register_hook(plain, double_it, &calls) > 0, CT_ERROR_RUNTIME, "doesn't require");
    CT_ASSERT_ERR(ct_tensor_register_hook(x, NULL, NULL) > 0, CT_ERROR_NULL_ARGUMENT, "register_hook");
    CT_ASSERT_ERR(ct_tensor_register_post_accumulate_grad_hook(y, count_post, NULL) > 0, CT_ERROR_RUNTIME,
                  "non-leaf");
    ct_scope_end();
}

static void test_retain_grad(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){1, 2}, 2);
    ct_tensor *y = ct_mul_scalar(x, ct_scalar_int(3));
    assert_int_equal(ct_tensor_retain_grad(y), CT_OK);
    ct_tensor *z = vsum(ct_mul(y, y));
    assert_int_equal(ct_backward(z, NULL, true, false), CT_OK);
    assert_vals(ct_tensor_grad(y), (double[]){6, 12}, 2, 0);
    assert_int_equal(ct_backward(z, NULL, false, false), CT_OK);
    assert_vals(ct_tensor_grad(y), (double[]){12, 24}, 2, 0); /* accumulates, as PyTorch */
    assert_int_equal(ct_tensor_retain_grad(x), CT_OK);        /* a leaf: no-op */
    ct_scope_end();
}

static void test_anomaly(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){0, 1}, 2);
    ct_tensor *y = vsum(ct_sqrt(x)); /* d sqrt at 0 is inf */
    ct_set_anomaly_enabled(true);
    CT_ASSERT_ERR(ct_backward(y, NULL, true, false) == CT_OK, CT_ERROR_RUNTIME, "forward op 'sqrt'");
    ct_set_anomaly_enabled(false);
    assert_int_equal(ct_backward(y, NULL, false, false), CT_OK);
    assert_true(isinf(ct_test_at(ct_tensor_grad(x), 0)));
    ct_scope_end();
}

static void test_nondifferentiable(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){1, 2}, 2);
    ct_tensor *m = ct_gt_scalar(x, ct_scalar_int(1));
    assert_false(ct_tensor_requires_grad(m));
    assert_int_equal(ct_tensor_dtype(m), CT_BOOL);
    ct_scope_end();
}

static void test_inplace_rebase(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){1, 2}, 2);
    ct_tensor *w = leaf((double[]){3, 4}, 2);
    ct_tensor *y = ct_mul_scalar(x, ct_scalar_int(1));
    assert_non_null(ct_mul_(y, w)); /* y = x * w, self's old value saved */
    assert_non_null(ct_exp_(y));
    assert_string_equal(ct_tensor_grad_fn_name(y), "ExpBackward0");
    assert_int_equal(ct_backward(vsum(y), NULL, false, false), CT_OK);
    assert_vals(ct_tensor_grad(x), (double[]){3 * exp(3), 4 * exp(8)}, 2, 1e-14);
    assert_vals(ct_tensor_grad(w), (double[]){1 * exp(3), 2 * exp(8)}, 2, 1e-14);
    /* A tensor that does not require grad becomes part of the graph in place. */
    ct_tensor *p = vec((double[]){1, 1}, 2);
    assert_non_null(ct_add_(p, w));
    assert_true(ct_tensor_requires_grad(p));
    assert_string_equal(ct_tensor_grad_fn_name(p), "AddBackward0");
    ct_scope_end();
}

/* A long chain frees without deep recursion (and without leaks under ASan). */
static void test_long_chain(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){1}, 1);
    ct_tensor *y = ct_retain(x);
    for (int i = 0; i < 20000; i++) {
        ct_scope_begin();
        ct_tensor *z = ct_retain(ct_mul_scalar(y, ct_scalar_float(1.0)));
        ct_scope_end();
        ct_release(y);
        y = z;
    }
    assert_int_equal(ct_backward(y, NULL, false, false), CT_OK);
    assert_vals(ct_tensor_grad(x), (double[]){1}, 1, 0);
    ct_release(y);
    ct_scope_end();
}

/* Two threads running backward on two graphs at once. */
static void *worker(void *arg) {
    double k = *(double *)arg;
    double ok = 1;
    for (int it = 0; it < 200; it++) {
        ct_scope_begin();
        ct_tensor *x = ct_full(CT_SHAPE(8), ct_scalar_float(k), CT_F64, CT_CPU);
        ct_tensor_set_requires_grad(x, true);
        ct_tensor *y = ct_dot(ct_mul(x, x), ct_ones_like(x, CT_DTYPE_UNDEFINED));
        if (ct_backward(y, NULL, false, false) != CT_OK)
            ok = 0;
        ct_tensor *g = ct_tensor_grad(x);
        for (int i = 0; g && i < 8; i++)
            if (ct_test_at(g, i) != 2 * k)
                ok = 0;
        if (!g)
            ok = 0;
        ct_scope_end();
    }
    *(double *)arg = ok;
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    pthread_t t1, t2;
    double a = 1.5, b = -2.0;
    assert_int_equal(pthread_create(&t1, NULL, worker, &a), 0);
    assert_int_equal(pthread_create(&t2, NULL, worker, &b), 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    assert_true(a == 1);
    assert_true(b == 1);
}

/* The hook sees the gradient on its way into .grad; it keeps no reference. */
static ct_tensor *note_grad(const ct_tensor *g, void *ud) {
    *(const ct_tensor **)ud = g;
    return NULL;
}

/* Note [Stealing the gradient]: a gradient nothing else holds becomes .grad itself;
 * a gradient shared by two leaves, the caller's grad_output, and one under
 * create_graph are copied, so accumulating into one .grad never changes another. */
/* Counts add calls by kind, then runs the default kernel. */
static ct_status count_adds(ct_keyset ks, ct_call *call, void *ud) {
    int *n = ud;
    n[ct_call_is_inplace(call) ? 1 : 0]++;
    return ct_call_next(ks, call);
}

/* Note [Accumulating in place]: a node input reached by several gradients sums them
 * into the first one's memory when nothing else holds it, and never touches a tensor
 * someone else can see (the caller's grad_output, a retained gradient). */
static void test_accumulate_in_place(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){0.5, -1, 2}, 3);
    ct_tensor *y = ct_exp(x);
    ct_tensor_retain_grad(y);
    int adds[2] = {0, 0};
    /* y reaches the loss through three products: three gradients meet at y */
    ct_tensor *out = ct_add(ct_add(vsum(ct_mul_scalar(y, ct_scalar_int(2))), vsum(ct_mul_scalar(y, ct_scalar_int(3)))),
                            vsum(ct_mul_scalar(y, ct_scalar_int(4))));
    int64_t h = ct_op_override(CT_OP_add, CT_KEY_CPU, count_adds, adds, 0);
    assert_true(h > 0);
    assert_int_equal(ct_backward(out, NULL, false, false), CT_OK);
    assert_int_equal(ct_op_override_remove(h), CT_OK);
    assert_true(adds[1] >= 2); /* the second and third gradients went in place */
    double v, e;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ct_tensor_get(ct_tensor_grad(x), CT_INDEX(i), &v), CT_OK);
        assert_int_equal(ct_tensor_get(y, CT_INDEX(i), &e), CT_OK);
        assert_true(fabs(v - 9 * e) <= 1e-12 * 9 * e);
        assert_int_equal(ct_tensor_get(ct_tensor_grad(y), CT_INDEX(i), &v), CT_OK);
        assert_true(v == 9);
    }
    /* out = y + y with the caller's gradient: both halves of add's backward are that
     * tensor, which must come out unchanged */
    ct_tensor *x2 = leaf((double[]){1, 2}, 2);
    ct_tensor *y2 = ct_exp(x2);
    ct_tensor *go = ct_full(CT_SHAPE(2), ct_scalar_float(3), CT_F64, CT_CPU);
    assert_int_equal(ct_backward(ct_add(y2, y2), go, false, false), CT_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ct_tensor_get(go, CT_INDEX(i), &v), CT_OK);
        assert_true(v == 3);
        assert_int_equal(ct_tensor_get(ct_tensor_grad(x2), CT_INDEX(i), &v), CT_OK);
        assert_int_equal(ct_tensor_get(y2, CT_INDEX(i), &e), CT_OK);
        assert_true(fabs(v - 6 * e) <= 1e-12 * 6 * e);
    }
    /* under create_graph the sums record history (double backward through them) */
    ct_tensor *x3 = leaf((double[]){0.25}, 1);
    ct_tensor *y3 = ct_mul(x3, x3);
    ct_tensor *l3 = ct_add(vsum(ct_mul_scalar(y3, ct_scalar_int(2))), vsum(ct_mul_scalar(y3, ct_scalar_int(5))));
    const ct_tensor *o3[1] = {l3}, *i3[1] = {x3};
    ct_tensor *g3[1], *gg[1];
    assert_int_equal(ct_autograd_grad(o3, 1, i3, 1, NULL, false, true, false, g3), CT_OK);
    assert_vals(g3[0], (double[]){14 * 0.25}, 1, 1e-15); /* d/dx 7x^2 */
    const ct_tensor *o4[1] = {vsum(g3[0])};
    assert_int_equal(ct_autograd_grad(o4, 1, i3, 1, NULL, false, false, false, gg), CT_OK);
    assert_int_equal(ct_tensor_get(gg[0], CT_INDEX(0), &v), CT_OK);
    assert_true(fabs(v - 14) < 1e-12);
    ct_scope_end();
}

static void test_grad_steal(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = leaf((double[]){1, 2, 3}, 3);
    const ct_tensor *seen = NULL;
    double v;
    int64_t h = ct_tensor_register_hook(x, note_grad, &seen);
    assert_int_equal(ct_backward(ct_sum(ct_mul_scalar(x, ct_scalar_int(3)), NULL, 0, false, CT_DTYPE_UNDEFINED), NULL,
                                 false, false),
                     CT_OK);
    ct_tensor *gx = ct_tensor_grad(x);
    assert_ptr_equal(gx, seen); /* taken, not copied */
    assert_int_equal(ct_remove_hook(h), CT_OK);
    /* linear: w's gradient arrives dense (mm gives w^T's in w^T's layout) and the
     * bias's is a private view of a sum: both are kept without a copy */
    ct_tensor *lx = ct_ones(CT_SHAPE(6, 5), CT_F64, CT_CPU);
    ct_tensor *lw = ct_ones(CT_SHAPE(4, 5), CT_F64, CT_CPU), *lb = ct_ones(CT_SHAPE(4), CT_F64, CT_CPU);
    ct_tensor_set_requires_grad(lw, true);
    ct_tensor_set_requires_grad(lb, true);
    const ct_tensor *seen_w = NULL, *seen_b = NULL;
    int64_t hw = ct_tensor_register_hook(lw, note_grad, &seen_w), hb = ct_tensor_register_hook(lb, note_grad, &seen_b);
    assert_int_equal(ct_backward(ct_sum(ct_linear(lx, lw, lb), NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false),
                     CT_OK);
    ct_tensor *glw = ct_tensor_grad(lw);
    assert_ptr_equal(glw, seen_w);
    assert_ptr_equal(ct_tensor_grad(lb), seen_b);
    assert_true(ct_tensor_is_contiguous(glw));
    assert_int_equal(ct_tensor_get(glw, CT_INDEX(3, 4), &v), CT_OK);
    assert_true(v == 6); /* d/dw of sum(x w^T) = column sums of x */
    assert_int_equal(ct_tensor_get(ct_tensor_grad(lb), CT_INDEX(2), &v), CT_OK);
    assert_true(v == 6);
    /* a second backward accumulates in place into the kept tensors */
    assert_int_equal(ct_backward(ct_sum(ct_linear(lx, lw, lb), NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false),
                     CT_OK);
    assert_int_equal(ct_tensor_get(ct_tensor_grad(lw), CT_INDEX(0, 0), &v), CT_OK);
    assert_true(v == 12);
    assert_int_equal(ct_remove_hook(hw), CT_OK);
    assert_int_equal(ct_remove_hook(hb), CT_OK);
    /* a + b hands the same gradient tensor to both leaves: each .grad is its own */
    ct_tensor *a = leaf((double[]){1, 2}, 2), *b = leaf((double[]){3, 4}, 2);
    assert_int_equal(ct_backward(ct_add(a, b), ct_ones(CT_SHAPE(2), CT_F64, CT_CPU), false, false), CT_OK);
    ct_tensor *ga = ct_tensor_grad(a), *gb = ct_tensor_grad(b);
    assert_ptr_not_equal(ga, gb);
    assert_int_equal(ct_backward(ct_mul_scalar(a, ct_scalar_int(5)), ct_ones(CT_SHAPE(2), CT_F64, CT_CPU), false, false),
                     CT_OK);
    assert_int_equal(ct_tensor_get(ct_tensor_grad(a), CT_INDEX(0), &v), CT_OK);
    assert_true(v == 6);
    assert_int_equal(ct_tensor_get(ct_tensor_grad(b), CT_INDEX(0), &v), CT_OK);
    assert_true(v == 1);
    /* the caller's grad_output reaching a leaf directly is copied */
    ct_tensor *c = leaf((double[]){1, 2}, 2);
    ct_tensor *go = ct_full(CT_SHAPE(2), ct_scalar_float(2), CT_F64, CT_CPU);
    assert_int_equal(ct_backward(ct_view(c, CT_SHAPE(2)), go, false, false), CT_OK);
    assert_ptr_not_equal(ct_tensor_grad(c), go);
    ct_fill_(go, ct_scalar_float(7));
    assert_int_equal(ct_tensor_get(ct_tensor_grad(c), CT_INDEX(1), &v), CT_OK);
    assert_true(v == 2);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_chain),
        cmocka_unit_test(test_broadcast_and_dtype),
        cmocka_unit_test(test_accumulate_and_retain_graph),
        cmocka_unit_test(test_first_grad_is_a_copy),
        cmocka_unit_test(test_misuse_errors),
        cmocka_unit_test(test_autograd_grad),
        cmocka_unit_test(test_autograd_grad_overlapping_roots),
        cmocka_unit_test(test_create_graph_backward),
        cmocka_unit_test(test_no_grad_and_inference),
        cmocka_unit_test(test_detach),
        cmocka_unit_test(test_hooks),
        cmocka_unit_test(test_grad_steal),
        cmocka_unit_test(test_accumulate_in_place),
        cmocka_unit_test(test_retain_grad),
        cmocka_unit_test(test_anomaly),
        cmocka_unit_test(test_nondifferentiable),
        cmocka_unit_test(test_inplace_rebase),
        cmocka_unit_test(test_long_chain),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
