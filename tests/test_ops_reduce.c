/* Reductions and scans: OpInfo entries, PyTorch goldens, edge cases, errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opinfo.h"
#include "ctorch/ops.h"

/* 0, 1, 2, ... in row-major order. */
static ct_tensor *seq(const int64_t *shape, int nd, ct_dtype d) {
    ct_tensor *t = ct_empty(shape, nd, d, CT_CPU);
    int64_t n = ct_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t idx[8], r = i;
        for (int k = nd - 1; k >= 0; k--) {
            idx[k] = r % shape[k];
            r /= shape[k];
        }
        ct_tensor_set(t, idx, (double)i);
    }
    return t;
}

/* A view of base's memory with other sizes/strides (base must outlive it). */
static ct_tensor *restride(const ct_tensor *base, const int64_t *shape, const int64_t *strides, int nd) {
    return ct_from_blob(ct_tensor_data(base), shape, strides, nd, ct_tensor_dtype(base), NULL, NULL);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double unit(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static ct_tensor *randu(const int64_t *shape, int nd, ct_dtype d, double lo, double hi) {
    ct_tensor *t = ct_empty(shape, nd, d, CT_CPU);
    int64_t n = ct_tensor_numel(t);
    double *v = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * unit();
    ct_tensor *src = ct_from_data(v, shape, nd, CT_F64);
    ct_copy_(t, src);
    free(v);
    return t;
}

static void test_sum_basic(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = seq(CT_SHAPE(2, 3, 4), CT_F32);
    ct_tensor *r = ct_sum(a, NULL, 0, false, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(r, );
    assert_true(ct_test_at(r, 0) == 276);
    r = ct_sum(a, CT_INDEX(-1, 0), 2, false, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(r, 3);
    assert_true(ct_test_at(r, 0) == (0 + 1 + 2 + 3) + (12 + 13 + 14 + 15));
    r = ct_sum(a, CT_INDEX(1), 1, true, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(r, 2, 1, 4);
    assert_true(ct_test_at(r, 5) == 13 + 17 + 21);
    /* ints and bools sum to int64 */
    r = ct_sum(ct_ones(CT_SHAPE(5), CT_BOOL, CT_CPU), NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_int_equal(ct_tensor_dtype(r), CT_I64);
    assert_true(ct_test_at(r, 0) == 5);
    r = ct_sum(a, NULL, 0, false, CT_F64);
    assert_int_equal(ct_tensor_dtype(r), CT_F64);
    /* transposed input */
    r = ct_sum(restride(a, CT_INDEX(4, 3, 2), CT_INDEX(1, 4, 12), 3), CT_INDEX(2), 1, false, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(r, 4, 3);
    assert_true(ct_test_at(r, 1) == 4 + 16);
    /* empty: 0 */
    r = ct_sum(ct_zeros(CT_SHAPE(0, 3), CT_F32, CT_CPU), CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(r, 3);
    assert_true(ct_test_at(r, 2) == 0);
    /* 0-d */
    r = ct_sum(ct_scalar_tensor(ct_scalar_float(2.5), CT_F32, CT_CPU), CT_INDEX(-1), 1, true, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(r, );
    assert_true(ct_test_at(r, 0) == 2.5);
    /* out= */
    ct_tensor *o = ct_empty(CT_SHAPE(2), CT_F64, CT_CPU);
    CT_ASSERT_OK(ct_sum_out(a, CT_INDEX(1, 2), 2, false, CT_DTYPE_UNDEFINED, o));
    assert_true(ct_test_at(o, 1) == 210);
    /* META */
    ct_tensor *m = ct_sum(ct_empty(CT_SHAPE(2, 3, 4), CT_I32, CT_META), CT_INDEX(1), 1, true, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(m, 2, 1, 4);
    assert_int_equal(ct_tensor_dtype(m), CT_I64);
    assert_true(ct_tensor_device(m).type == CT_DEVICE_META);
    ct_scope_end();
}

static void test_sum_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_sum(NULL, NULL, 0, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_NULL_ARGUMENT, "sum");
    CT_ASSERT_ERR(ct_sum(a, CT_INDEX(2), 1, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_INDEX,
                  "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    CT_ASSERT_ERR(ct_sum(a, CT_INDEX(0, -2), 2, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_VALUE,
                  "dim 0 appears multiple times in the list of dims");
    int64_t many[20] = {0};
    CT_ASSERT_ERR(ct_sum(a, many, 20, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_VALUE, "appears multiple times");
    CT_ASSERT_ERR(ct_sum(a, CT_INDEX(0), -1, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_VALUE, "negative");
    CT_ASSERT_ERR(ct_sum(a, NULL, 0, false, (ct_dtype)99) != NULL, CT_ERROR_TYPE, "invalid dtype");
    CT_ASSERT_ERR(ct_sum_out(a, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED, ct_empty(CT_SHAPE(2), CT_F32, CT_CPU)) != NULL,
                  CT_ERROR_VALUE, "shape");
    CT_ASSERT_ERR(ct_sum_out(a, NULL, 0, false, CT_DTYPE_UNDEFINED, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "sum_out");
    ct_scope_end();
}

/* 1e7 float32 ones sum to exactly 1e7 (a naive float32 loop stops at 2^24), and the
 * result does not depend on the thread count. */
static void test_sum_accuracy_threads(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *ones = ct_ones(CT_SHAPE(10000000), CT_F32, CT_CPU);
    ct_tensor *r = ct_sum(ones, NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_true(ct_test_at(r, 0) == 1e7);
    ct_tensor *x = randu(CT_SHAPE(3, 400000), CT_F32, -1, 1);
    int nth = ct_get_num_threads();
    ct_set_num_threads(1);
    ct_tensor *r1 = ct_sum(x, NULL, 0, false, CT_DTYPE_UNDEFINED);
    ct_tensor *c1 = ct_sum(x, CT_INDEX(1), 1, false, CT_DTYPE_UNDEFINED);
    ct_set_num_threads(2);
    ct_tensor *r2 = ct_sum(x, NULL, 0, false, CT_DTYPE_UNDEFINED);
    ct_tensor *c2 = ct_sum(x, CT_INDEX(1), 1, false, CT_DTYPE_UNDEFINED);
    ct_set_num_threads(nth);
    assert_memory_equal(ct_tensor_data(r1), ct_tensor_data(r2), 4);
    assert_memory_equal(ct_tensor_data(c1), ct_tensor_data(c2), 12);
    /* against a double loop */
    const float *p = ct_tensor_data(x);
    double s = 0;
    for (int64_t i = 0; i < 1200000; i++)
        s += p[i];
    assert_true(fabs(ct_test_at(r1, 0) - s) <= 1e-6 * (1 + fabs(s)) + 1e-3);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_basic),
        cmocka_unit_test(test_sum_errors),
        cmocka_unit_test(test_sum_accuracy_threads),
    };
    return cmocka_run_group_tests_name("reduce", tests, NULL, NULL);
}
