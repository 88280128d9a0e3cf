/* The dispatcher's fast lane (Note [Fast lane]): plain elementwise ops on small
 * contiguous CPU tensors skip the boxed route. It must give bit-identical results to
 * the boxed route, and must not be taken when logging, profiling, autograd, an
 * override or anything else the boxed route would act on is in play. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/tensor_impl.h"
#include "cpu/iter.h"
#include "dispatch/dispatch_internal.h"
#include "testutil.h"

typedef ct_tensor *(*unary_fn)(const ct_tensor *);
typedef ct_tensor *(*binary_fn)(const ct_tensor *, const ct_tensor *);

static const struct {
    const char *name;
    unary_fn fn;
} unary_ops[] = {{"exp", ct_exp},   {"log", ct_log},         {"sqrt", ct_sqrt}, {"sigmoid", ct_sigmoid},
                 {"tanh", ct_tanh}, {"neg", ct_neg},         {"abs", ct_abs},   {"relu", ct_relu},
                 {"sin", ct_sin},   {"reciprocal", ct_reciprocal}};

static const struct {
    const char *name;
    binary_fn fn;
} binary_ops[] = {{"add", ct_add},     {"sub", ct_sub},         {"mul", ct_mul}, {"maximum", ct_maximum},
                  {"minimum", ct_minimum}, {"atan2", ct_atan2}, {"lt", ct_lt},   {"eq", ct_eq}};

/* Both results agree in every respect a caller can see, bit for bit. */
static void assert_same(const ct_tensor *x, const ct_tensor *y) {
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(x->dtype, y->dtype);
    assert_int_equal(x->ndim, y->ndim);
    for (int i = 0; i < x->ndim; i++) {
        assert_int_equal(x->shape[i], y->shape[i]);
        assert_int_equal(x->strides[i], y->strides[i]);
    }
    assert_int_equal(x->numel, y->numel);
    assert_int_equal(x->requires_grad, y->requires_grad);
    assert_int_equal(x->inference, y->inference);
    assert_int_equal(x->is_view, y->is_view);
    size_t n = (size_t)x->numel * ct_dtype_size(x->dtype);
    assert_memory_equal(ct_tensor_data(x), ct_tensor_data(y), n);
}

/* Values with both signs, zeros and a NaN, in dtype. */
static ct_tensor *sample(const int64_t *shape, int ndim, ct_dtype dtype, uint64_t seed) {
    ct_manual_seed(seed);
    ct_tensor *t = ct_mul_scalar(ct_randn(shape, ndim, CT_F64, CT_CPU), ct_scalar_float(3.0));
    double *d = ct_tensor_data(t);
    int64_t n = ct_tensor_numel(t);
    if (n > 2)
        d[1] = 0.0;
    if (n > 3)
        d[n - 1] = seed % 2 ? 0.0 / 0.0 : -0.0;
    return ct_to_dtype(t, dtype);
}

static void test_lane_matches_boxed_route(void **state) {
    (void)state;
    const ct_dtype dtypes[] = {CT_F32, CT_F64, CT_F16, CT_BF16};
    const int64_t shapes[][3] = {{1, 0, 0}, {7, 0, 0}, {3, 4, 0}, {2, 1, 5}, {0, 0, 0}};
    const int ndims[] = {1, 1, 2, 3, 0};
    ct_scope_begin();
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++)
        for (size_t s = 0; s < sizeof ndims / sizeof *ndims; s++) {
            ct_tensor *a = sample(shapes[s], ndims[s], dtypes[d], 1);
            ct_tensor *b = sample(shapes[s], ndims[s], dtypes[d], 2);
            for (size_t k = 0; k < sizeof unary_ops / sizeof *unary_ops; k++) {
                uint64_t h0 = ct_dispatch_fast_lane_hits();
                ct_tensor *fast = unary_ops[k].fn(a);
                assert_int_equal(ct_dispatch_fast_lane_hits(), h0 + 1);
                ct_dispatch_set_fast_lane(false);
                ct_tensor *slow = unary_ops[k].fn(a);
                ct_dispatch_set_fast_lane(true);
                assert_int_equal(ct_dispatch_fast_lane_hits(), h0 + 1);
                assert_same(fast, slow);
            }
            for (size_t k = 0; k < sizeof binary_ops / sizeof *binary_ops; k++) {
                uint64_t h0 = ct_dispatch_fast_lane_hits();
                ct_tensor *fast = binary_ops[k].fn(a, b);
                assert_int_equal(ct_dispatch_fast_lane_hits(), h0 + 1);
                ct_dispatch_set_fast_lane(false);
                ct_tensor *slow = binary_ops[k].fn(a, b);
                ct_dispatch_set_fast_lane(true);
                assert_int_equal(ct_dispatch_fast_lane_hits(), h0 + 1);
                assert_same(fast, slow);
            }
        }
    ct_scope_end();
}

/* Runs add(a, b) and reports whether it took the lane; r gets the result. */
static bool add_took_lane(const ct_tensor *a, const ct_tensor *b, ct_tensor **r) {
    uint64_t h0 = ct_dispatch_fast_lane_hits();
    *r = ct_add(a, b);
    return ct_dispatch_fast_lane_hits() != h0;
}

static void test_lane_refuses_other_inputs(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *r;
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    assert_true(add_took_lane(a, a, &r));
    /* broadcasting, promotion, integers, non-contiguous, wrapped scalars, big inputs */
    assert_false(add_took_lane(a, ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), &r));
    CT_ASSERT_SHAPE(r, 2, 3);
    assert_false(add_took_lane(a, ct_ones(CT_SHAPE(2, 3), CT_F64, CT_CPU), &r));
    assert_int_equal(ct_tensor_dtype(r), CT_F64);
    ct_tensor *i = ct_ones(CT_SHAPE(2, 3), CT_I64, CT_CPU);
    assert_false(add_took_lane(i, i, &r));
    assert_int_equal(ct_tensor_dtype(r), CT_I64);
    ct_tensor *at = ct_transpose(ct_ones(CT_SHAPE(3, 2), CT_F32, CT_CPU), 0, 1);
    assert_false(add_took_lane(at, a, &r));
    assert_false(add_took_lane(a, at, &r));
    uint64_t h0 = ct_dispatch_fast_lane_hits();
    assert_non_null(ct_add_scalar(a, ct_scalar_float(1.0)));
    assert_non_null(ct_add_alpha(a, a, ct_scalar_float(2.0)));
    assert_non_null(ct_add_(ct_clone(a), a));
    assert_non_null(ct_add_out(a, a, ct_empty(CT_SHAPE(2, 3), CT_F32, CT_CPU)));
    assert_int_equal(ct_dispatch_fast_lane_hits(), h0);
    ct_tensor *big = ct_ones(CT_SHAPE(CT_ITER_TINY_MAX + 1), CT_F32, CT_CPU);
    assert_false(add_took_lane(big, big, &r));
    ct_tensor *empty = ct_ones(CT_SHAPE(0), CT_F32, CT_CPU);
    assert_false(add_took_lane(empty, empty, &r));
    /* META tensors have no data: the META kernel works out the shape */
    ct_tensor *m = ct_empty(CT_SHAPE(2, 3), CT_F32, CT_META);
    assert_false(add_took_lane(m, m, &r));
    assert_int_equal(ct_tensor_device(r).type, CT_DEVICE_META);
    /* errors still come from the boxed route, with its message */
    assert_false(add_took_lane(a, ct_ones(CT_SHAPE(4), CT_F32, CT_CPU), &r));
    CT_ASSERT_ERR(r != NULL, CT_ERROR_VALUE, "must match the size");
    ct_scope_end();
}

static void test_lane_refuses_autograd(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), *r;
    ct_tensor *w = ct_tensor_set_requires_grad(ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), true);
    assert_false(add_took_lane(a, w, &r));
    assert_true(ct_tensor_requires_grad(r));
    assert_false(add_took_lane(w, a, &r));
    assert_true(ct_tensor_requires_grad(r));
    assert_int_equal(ct_backward(ct_sum(r, NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false), CT_OK);
    assert_float_equal(ct_test_at(ct_tensor_grad(w), 0), 1.0, 0);
    /* under no_grad the boxed route makes a plain result (the lane leaves inputs that
     * require grad to it even then) */
    bool prev = ct_set_grad_enabled(false);
    assert_false(add_took_lane(w, a, &r));
    assert_false(ct_tensor_requires_grad(r));
    assert_float_equal(ct_test_at(r, 2), 2.0, 0);
    ct_set_grad_enabled(prev);
    ct_scope_end();
}

static int override_calls;

static ct_status count_and_pass(ct_keyset ks, ct_call *call, void *ud) {
    (void)ud;
    override_calls++;
    return ct_call_next(ks, call);
}

static void test_lane_refuses_override(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), *r;
    int64_t h = ct_op_override(CT_OP_add, CT_KEY_CPU, count_and_pass, NULL, 0);
    assert_true(h > 0);
    override_calls = 0;
    assert_false(add_took_lane(a, a, &r));
    assert_int_equal(override_calls, 1);
    assert_float_equal(ct_test_at(r, 0), 2.0, 0);
    /* other ops keep the lane */
    uint64_t h0 = ct_dispatch_fast_lane_hits();
    assert_non_null(ct_mul(a, a));
    assert_int_equal(ct_dispatch_fast_lane_hits(), h0 + 1);
    assert_int_equal(ct_op_override_remove(h), CT_OK);
    assert_true(add_took_lane(a, a, &r));
    assert_int_equal(override_calls, 1);
    ct_scope_end();
}

static void test_lane_refuses_logging_and_profiler(void **state) {
    (void)state;
    char path[] = "/tmp/ct_fast_lane_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), *r;
    assert_int_equal(ct_set_op_logging(true, path), CT_OK);
    assert_false(add_took_lane(a, a, &r));
    assert_int_equal(ct_set_op_logging(false, NULL), CT_OK);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[256] = {0};
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    assert_non_null(strstr(line, "add(f32[3] cpu, f32[3] cpu) -> f32[3] cpu"));
    assert_true(add_took_lane(a, a, &r));

    assert_int_equal(ct_profiler_start(path), CT_OK);
    assert_false(add_took_lane(a, a, &r));
    assert_int_equal(ct_profiler_stop(), CT_OK);
    f = fopen(path, "r");
    assert_non_null(f);
    char buf[4096] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    assert_true(n > 0);
    assert_non_null(strstr(buf, "\"add\""));
    assert_true(add_took_lane(a, a, &r));
    ct_scope_end();
    unlink(path);
}

static void test_lane_ownership_and_memory(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_tensor *a = ct_ones(CT_SHAPE(4), CT_F32, CT_CPU);
    ct_scope_begin();
    ct_tensor *r;
    for (int i = 0; i < 100; i++)
        assert_true(add_took_lane(a, a, &r));
    ct_keep(r);
    ct_scope_end();
    assert_float_equal(ct_test_at(r, 3), 2.0, 0);
    ct_release(r);
    ct_release(a);
    assert_int_equal(ct_memory_allocated(CT_CPU), before);

    /* the memory is attributed to the op, as on the boxed route */
    assert_int_equal(ct_memory_record_history(true, 64), CT_OK);
    a = ct_ones(CT_SHAPE(4), CT_F32, CT_CPU);
    assert_true(add_took_lane(a, a, &r));
    ct_alloc_state s;
    assert_int_equal(ct_alloc_state_get(CT_CPU, &s), CT_OK);
    bool found = false;
    for (size_t i = 0; i < s.ntrace; i++)
        if (s.trace[i].action == CT_TRACE_ALLOC && s.trace[i].addr == (uint64_t)(uintptr_t)ct_tensor_data(r))
            found = strcmp(s.trace[i].context, "add") == 0;
    assert_true(found);
    ct_alloc_state_free(&s);
    assert_int_equal(ct_memory_record_history(false, 0), CT_OK);
    ct_release(r);
    ct_release(a);

    /* inference mode marks the result like the boxed route does */
    ct_inference_mode_begin();
    a = ct_ones(CT_SHAPE(4), CT_F32, CT_CPU);
    assert_true(add_took_lane(a, a, &r));
    ct_dispatch_set_fast_lane(false);
    ct_tensor *slow = ct_add(a, a);
    ct_dispatch_set_fast_lane(true);
    ct_inference_mode_end();
    assert_true(r->inference);
    assert_same(r, slow);
    ct_release(r);
    ct_release(slow);
    ct_release(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lane_matches_boxed_route),
        cmocka_unit_test(test_lane_refuses_other_inputs),
        cmocka_unit_test(test_lane_refuses_autograd),
        cmocka_unit_test(test_lane_refuses_override),
        cmocka_unit_test(test_lane_refuses_logging_and_profiler),
        cmocka_unit_test(test_lane_ownership_and_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
