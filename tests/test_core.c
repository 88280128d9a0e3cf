/* Ownership (refcounts, scopes) and the error model. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "tensor_impl.h"

static void test_scope_releases_temporaries(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_scope_begin();
    ct_tensor *a = ct_zeros(CT_SHAPE(4, 4), CT_F32, CT_CPU);
    CT_ASSERT_OK(a);
    assert_true(ct_memory_allocated(CT_CPU) >= before + 64);
    ct_scope_end();
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
}

static void test_keep_moves_to_parent(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_scope_begin();
    ct_tensor *kept;
    ct_scope_begin();
    ct_tensor *tmp = ct_ones(CT_SHAPE(3), CT_F64, CT_CPU);
    kept = ct_keep(ct_full(CT_SHAPE(2), ct_scalar_float(2.5), CT_F32, CT_CPU));
    (void)tmp;
    ct_scope_end();
    double v;
    assert_int_equal(ct_tensor_get(kept, CT_INDEX(1), &v), CT_OK);
    assert_true(v == 2.5);
    ct_scope_end();
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
}

static void test_keep_outermost_gives_caller(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_scope_begin();
    ct_tensor *t = ct_keep(ct_zeros(CT_SHAPE(10), CT_F32, CT_CPU));
    ct_scope_end();
    assert_int_equal(atomic_load(&t->refcount), 1);
    ct_release(t);
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
}

static void test_no_scope_caller_owns(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_tensor *t = ct_zeros(CT_SHAPE(5), CT_I64, CT_CPU);
    ct_tensor *r = ct_retain(t);
    ct_release(t);
    assert_true(ct_memory_allocated(CT_CPU) > before);
    ct_release(r);
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
}

static void test_loop_memory_flat(void **state) {
    (void)state;
    ct_tensor *acc = ct_zeros(CT_SHAPE(8), CT_F32, CT_CPU);
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_reset_peak_memory_stats(CT_CPU);
    for (int i = 0; i < 100000; i++) {
        ct_scope_begin();
        ct_tensor *x = ct_full(CT_SHAPE(8), ct_scalar_float(i), CT_F32, CT_CPU);
        ct_copy_(acc, ct_to_dtype(ct_contiguous(x), CT_F64));
        ct_scope_end();
    }
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
    /* Only one iteration's temporaries were ever alive at once. */
    assert_true(ct_max_memory_allocated(CT_CPU) - before < 1024);
    assert_true(ct_test_at(acc, 7) == 99999.0);
    ct_release(acc);
}

static void test_errors_first_wins(void **state) {
    (void)state;
    ct_clear_error();
    ct_scope_begin();
    ct_tensor *bad = ct_zeros(CT_SHAPE(-1, 2), CT_F32, CT_CPU);
    assert_null(bad);
    assert_int_equal(ct_last_status(), CT_ERROR_VALUE);
    char first[256];
    snprintf(first, sizeof first, "%s", ct_last_error());
    assert_non_null(strstr(first, "negative dimension -1"));
    /* NULL propagates without replacing the first message. */
    assert_null(ct_clone(bad));
    assert_null(ct_contiguous(ct_clone(bad)));
    assert_string_equal(ct_last_error(), first);
    ct_scope_end();
    ct_clear_error();
    assert_string_equal(ct_last_error(), "");
    /* A NULL with no pending error says so. */
    CT_ASSERT_ERR(ct_clone(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "clone: got a NULL argument");
}

static void test_numel_overflow(void **state) {
    (void)state;
    CT_ASSERT_ERR(ct_empty(CT_SHAPE(INT64_MAX / 2, 4), CT_F32, CT_CPU) != NULL, CT_ERROR_VALUE, "overflows");
    CT_ASSERT_ERR(ct_empty(CT_SHAPE(1 << 30, 1 << 30, 1 << 30), CT_F32, CT_CPU) != NULL, CT_ERROR_VALUE,
                  "overflows");
    CT_ASSERT_ERR(ct_empty(CT_SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1), CT_F32, CT_CPU) != NULL, CT_ERROR_VALUE,
                  "dimensions");
    CT_ASSERT_ERR(ct_empty(CT_SHAPE(2), (ct_dtype)99, CT_CPU) != NULL, CT_ERROR_TYPE, "dtype");
    CT_ASSERT_ERR(ct_empty(CT_SHAPE(2), CT_F32, CT_CUDA(ct_cuda_device_count())) != NULL, CT_ERROR_DEVICE, "CUDA");
    CT_ASSERT_ERR(ct_empty(NULL, 2, CT_F32, CT_CPU) != NULL, CT_ERROR_NULL_ARGUMENT, "shape");
}

static void test_huge_alloc_fails_cleanly(void **state) {
    (void)state;
    CT_ASSERT_ERR(ct_empty(CT_SHAPE(INT64_C(1) << 60), CT_U8, CT_CPU) != NULL, CT_ERROR_OUT_OF_MEMORY, "allocate");
}

static void test_copy_conversions(void **state) {
    (void)state;
    ct_scope_begin();
    float src[] = {1.5f, -2.5f, 300.0f, -1.0f};
    ct_tensor *f = ct_from_data(src, CT_SHAPE(4), CT_F32);
    ct_tensor *u8 = ct_to_dtype(f, CT_U8);
    CT_ASSERT_OK(u8);
    const uint8_t *p = ct_tensor_data(u8);
    assert_int_equal(p[0], 1);
    assert_int_equal(p[1], 254); /* -2 wraps through int64 */
    assert_int_equal(p[2], 44);  /* 300 mod 256 */
    assert_int_equal(p[3], 255);
    ct_tensor *b = ct_to_dtype(f, CT_BOOL);
    assert_int_equal(((uint8_t *)ct_tensor_data(b))[0], 1);
    ct_tensor *h = ct_to_dtype(f, CT_F16);
    assert_int_equal(((uint16_t *)ct_tensor_data(h))[0], 0x3e00);
    ct_scope_end();
}

/* Fill values the dtype cannot hold are refused, as torch.full does (PyTorch 1.13's
 * answers for these cases were recorded by hand in the comments). */
static void test_fill_overflow(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *t = ct_full(CT_SHAPE(2), ct_scalar_int(-1), CT_U8, CT_CPU); /* ok: 255 */
    CT_ASSERT_OK(t);
    assert_true(ct_test_at(t, 0) == 255);
    CT_ASSERT_ERR(ct_full(CT_SHAPE(2), ct_scalar_int(256), CT_U8, CT_CPU) != NULL, CT_ERROR_VALUE,
                  "value cannot be converted to type uint8 without overflow");
    assert_true(ct_test_at(ct_full(CT_SHAPE(2), ct_scalar_float(2.5), CT_I32, CT_CPU), 0) == 2); /* ok */
    CT_ASSERT_ERR(ct_full(CT_SHAPE(2), ct_scalar_float(1e300), CT_F32, CT_CPU) != NULL, CT_ERROR_VALUE, "float32");
    CT_ASSERT_ERR(ct_full(CT_SHAPE(2), ct_scalar_float(65510.0), CT_F16, CT_CPU) != NULL, CT_ERROR_VALUE, "float16");
    CT_ASSERT_OK(ct_full(CT_SHAPE(2), ct_scalar_float(INFINITY), CT_F16, CT_CPU));
    CT_ASSERT_ERR(ct_full(CT_SHAPE(2), ct_scalar_float(NAN), CT_I32, CT_CPU) != NULL, CT_ERROR_VALUE, "int32");
    CT_ASSERT_ERR(ct_full(CT_SHAPE(2), ct_scalar_float(3e9), CT_I32, CT_CPU) != NULL, CT_ERROR_VALUE, "int32");
    CT_ASSERT_OK(ct_full(CT_SHAPE(2), ct_scalar_int(127), CT_I8, CT_CPU));
    CT_ASSERT_ERR(ct_full(CT_SHAPE(2), ct_scalar_float(-128.5), CT_I8, CT_CPU) != NULL, CT_ERROR_VALUE, "int8");
    CT_ASSERT_ERR(ct_fill_(ct_zeros(CT_SHAPE(2), CT_I16, CT_CPU), ct_scalar_int(40000)) != NULL, CT_ERROR_VALUE,
                  "fill_: value cannot be converted to type int16");
    ct_scope_end();
}

/* torch.device's strings, and ct_device_str back */
static void test_device_parse(void **state) {
    (void)state;
    static const struct {
        const char *s;
        ct_device d;
    } ok[] = {{"cpu", {CT_DEVICE_CPU, 0}}, {"cuda", {CT_DEVICE_CUDA, 0}}, {"cuda:3", {CT_DEVICE_CUDA, 3}},
              {"meta", {CT_DEVICE_META, 0}}, {"cpu:0", {CT_DEVICE_CPU, 0}}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ct_device d = {-1, -1};
        assert_int_equal(ct_device_parse(ok[i].s, &d), CT_OK);
        assert_true(ct_device_equal(d, ok[i].d));
    }
    char buf[32];
    ct_device d;
    assert_int_equal(ct_device_parse("cuda:12", &d), CT_OK);
    assert_string_equal(ct_device_str(d, buf, sizeof buf), "cuda:12");
    static const char *const bad[] = {"", "gpu", "cuda:", "cuda:-1", "cuda:1x", "cuda:99999", "cpu:1",
                                      "cpux", "CUDA", "cuda: 1", "meta:2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_not_equal(ct_device_parse(bad[i], &d), CT_OK);
        assert_int_equal(ct_last_status(), CT_ERROR_VALUE);
        assert_non_null(strstr(ct_last_error(), "Expected one of cpu, cuda, meta device type"));
        ct_clear_error();
    }
    assert_int_equal(ct_device_parse(NULL, &d), CT_ERROR_NULL_ARGUMENT);
    assert_int_equal(ct_device_parse("cpu", NULL), CT_ERROR_NULL_ARGUMENT);
    ct_clear_error();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scope_releases_temporaries),
        cmocka_unit_test(test_device_parse),
        cmocka_unit_test(test_keep_moves_to_parent),
        cmocka_unit_test(test_keep_outermost_gives_caller),
        cmocka_unit_test(test_no_scope_caller_owns),
        cmocka_unit_test(test_loop_memory_flat),
        cmocka_unit_test(test_errors_first_wins),
        cmocka_unit_test(test_numel_overflow),
        cmocka_unit_test(test_huge_alloc_fails_cleanly),
        cmocka_unit_test(test_copy_conversions),
        cmocka_unit_test(test_fill_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
