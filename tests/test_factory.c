/* arange, linspace, logspace, eye: semantics, errors, and golden values from PyTorch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static ct_scalar parse_param(const char *tok) {
    if (tok[0] == 'i')
        return ct_scalar_int(strtoll(tok + 2, NULL, 10));
    return ct_scalar_float(strtod(tok + 2, NULL));
}

/* Compares one golden line; returns the number of mismatching elements. */
static int check_golden_line(char *line, int lineno) {
    char *save = NULL;
    char *op = strtok_r(line, " \n", &save);
    char *dt = strtok_r(NULL, " \n", &save);
    ct_scalar p1 = parse_param(strtok_r(NULL, " \n", &save));
    ct_scalar p2 = parse_param(strtok_r(NULL, " \n", &save));
    ct_scalar p3 = parse_param(strtok_r(NULL, " \n", &save));
    char *p4 = strtok_r(NULL, " \n", &save);
    int64_t n = strtoll(strtok_r(NULL, " \n", &save), NULL, 10);
    ct_dtype dtype = ct_dtype_from_name(dt);
    ct_tensor *t = NULL;
    if (strcmp(op, "arange") == 0)
        t = ct_arange(p1, p2, p3, dtype, CT_CPU);
    else if (strcmp(op, "linspace") == 0)
        t = ct_linspace(p1.v.f, p2.v.f, p3.v.i, dtype, CT_CPU);
    else
        t = ct_logspace(p1.v.f, p2.v.f, p3.v.i, parse_param(p4).v.f, dtype, CT_CPU);
    CT_ASSERT_OK(t);
    assert_int_equal(ct_tensor_numel(t), n);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        char *tok = strtok_r(NULL, " \n", &save);
        assert_non_null(tok);
        const char *p = (const char *)ct_tensor_data(t);
        int ok;
        if (dtype == CT_F64) {
            uint64_t want = strtoull(tok, NULL, 16), got;
            memcpy(&got, p + i * 8, 8);
            ok = want == got;
        } else if (dtype == CT_F32) {
            uint32_t want = (uint32_t)strtoul(tok, NULL, 16), got;
            memcpy(&got, p + i * 4, 4);
            ok = want == got;
        } else if (dtype == CT_F16 || dtype == CT_BF16) {
            uint16_t want = (uint16_t)strtoul(tok, NULL, 16), got;
            memcpy(&got, p + i * 2, 2);
            ok = want == got;
        } else {
            int64_t want = strtoll(tok, NULL, 10), got;
            memcpy(&got, p + i * 8, 8);
            ok = want == got;
        }
        if (!ok) {
            if (bad < 5)
                print_message("line %d (%s %s) element %lld: want %s got %.17g\n", lineno, op, dt, (long long)i, tok,
                              ct_test_at(t, i));
            bad++;
        }
    }
    return bad;
}

static void test_golden(void **state) {
    (void)state;
    FILE *f = fopen(CT_TEST_DATA_DIR "/factories.txt", "r");
    assert_non_null(f);
    size_t cap = 1 << 16;
    char *line = malloc(cap);
    assert_non_null(line);
    int lineno = 0, cases = 0, bad = 0;
    ct_scope_begin();
    while (fgets(line, (int)cap, f)) {
        lineno++;
        assert_true(strchr(line, '\n') != NULL); /* line fits */
        if (line[0] == '#')
            continue;
        bad += check_golden_line(line, lineno);
        cases++;
    }
    ct_scope_end();
    free(line);
    fclose(f);
    assert_true(cases > 100);
    assert_int_equal(bad, 0);
}

static void test_arange_dtype_inference(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_arange(ct_scalar_int(0), ct_scalar_int(5), ct_scalar_int(1), CT_DTYPE_UNDEFINED, CT_CPU);
    CT_ASSERT_OK(a);
    assert_int_equal(ct_tensor_dtype(a), CT_I64);
    CT_ASSERT_SHAPE(a, 5);
    assert_true(ct_test_at(a, 4) == 4.0);
    ct_tensor *b = ct_arange(ct_scalar_int(0), ct_scalar_float(2.5), ct_scalar_int(1), CT_DTYPE_UNDEFINED, CT_CPU);
    assert_int_equal(ct_tensor_dtype(b), CT_F32);
    CT_ASSERT_SHAPE(b, 3);
    assert_int_equal(ct_set_default_dtype(CT_F64), CT_OK);
    ct_tensor *c = ct_arange(ct_scalar_float(0), ct_scalar_int(1), ct_scalar_float(0.25), CT_DTYPE_UNDEFINED, CT_CPU);
    assert_int_equal(ct_tensor_dtype(c), CT_F64);
    CT_ASSERT_SHAPE(c, 4);
    assert_true(ct_test_at(c, 3) == 0.75);
    assert_int_equal(ct_set_default_dtype(CT_F32), CT_OK);
    /* ceil((end - start) / step) */
    ct_tensor *d = ct_arange(ct_scalar_int(10), ct_scalar_int(-7), ct_scalar_int(-4), CT_DTYPE_UNDEFINED, CT_CPU);
    CT_ASSERT_SHAPE(d, 5);
    assert_true(ct_test_at(d, 4) == -6.0);
    /* Empty range and other dtypes. */
    ct_tensor *e = ct_arange(ct_scalar_int(3), ct_scalar_int(3), ct_scalar_int(1), CT_I32, CT_CPU);
    CT_ASSERT_SHAPE(e, 0);
    ct_tensor *h = ct_arange(ct_scalar_int(0), ct_scalar_int(40), ct_scalar_int(1), CT_F16, CT_CPU);
    ct_tensor *bf = ct_arange(ct_scalar_int(0), ct_scalar_int(40), ct_scalar_int(1), CT_BF16, CT_CPU);
    ct_tensor *u8 = ct_arange(ct_scalar_int(250), ct_scalar_int(260), ct_scalar_int(1), CT_U8, CT_CPU);
    for (int i = 0; i < 40; i++) {
        assert_true(ct_test_at(h, i) == (double)i);
        assert_true(ct_test_at(bf, i) == (double)i);
    }
    assert_true(ct_test_at(u8, 9) == 3.0); /* wraps like a cast */
    /* Meta: shape only. */
    ct_tensor *m = ct_arange(ct_scalar_int(0), ct_scalar_int(7), ct_scalar_int(2), CT_DTYPE_UNDEFINED, CT_META);
    CT_ASSERT_SHAPE(m, 4);
    assert_null(ct_tensor_data(m));
    ct_scope_end();
}

static void test_arange_errors(void **state) {
    (void)state;
    ct_scalar z = ct_scalar_int(0), five = ct_scalar_int(5), one = ct_scalar_int(1);
    CT_ASSERT_ERR(ct_arange(z, five, z, CT_DTYPE_UNDEFINED, CT_CPU) != NULL, CT_ERROR_VALUE, "step must be nonzero");
    CT_ASSERT_ERR(ct_arange(z, five, ct_scalar_float(0.5), CT_I64, CT_CPU) != NULL, CT_ERROR_VALUE,
                  "step must be nonzero");
    CT_ASSERT_ERR(ct_arange(five, z, one, CT_DTYPE_UNDEFINED, CT_CPU) != NULL, CT_ERROR_VALUE,
                  "upper bound and larger bound inconsistent with step sign");
    CT_ASSERT_ERR(ct_arange(z, five, ct_scalar_int(-1), CT_DTYPE_UNDEFINED, CT_CPU) != NULL, CT_ERROR_VALUE,
                  "inconsistent with step sign");
    CT_ASSERT_ERR(ct_arange(z, ct_scalar_float(INFINITY), one, CT_DTYPE_UNDEFINED, CT_CPU) != NULL, CT_ERROR_VALUE,
                  "unsupported range");
    CT_ASSERT_ERR(ct_arange(ct_scalar_float(NAN), five, one, CT_F64, CT_CPU) != NULL, CT_ERROR_VALUE,
                  "unsupported range");
    CT_ASSERT_ERR(ct_arange(z, ct_scalar_float(1e30), ct_scalar_float(1e-30), CT_DTYPE_UNDEFINED, CT_CPU) != NULL,
                  CT_ERROR_VALUE, "invalid size, possible overflow?");
    /* a range of exactly 2^63 steps (../shared/repro/ct_arange.c): refused before the cast */
    CT_ASSERT_ERR(ct_arange(z, ct_scalar_float(0x1p63), one, CT_F32, CT_META) != NULL, CT_ERROR_VALUE,
                  "invalid size, possible overflow?");
    CT_ASSERT_ERR(ct_arange(z, ct_scalar_float(1e30), one, CT_I64, CT_CPU) != NULL, CT_ERROR_VALUE,
                  "cannot be converted to type int64_t without overflow");
    CT_ASSERT_ERR(ct_arange(z, five, one, CT_BOOL, CT_CPU) != NULL, CT_ERROR_TYPE,
                  "\"arange_cpu\" not implemented for 'Bool'");
    CT_ASSERT_ERR(ct_arange(z, five, one, (ct_dtype)77, CT_CPU) != NULL, CT_ERROR_TYPE, "dtype");
    CT_ASSERT_ERR(ct_arange(z, five, one, CT_F32, CT_CUDA(ct_cuda_device_count())) != NULL, CT_ERROR_DEVICE, "CUDA");
}

static void test_linspace_logspace(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_linspace(-1, 1, 5, CT_DTYPE_UNDEFINED, CT_CPU);
    assert_int_equal(ct_tensor_dtype(a), CT_F32);
    for (int i = 0; i < 5; i++)
        assert_true(ct_test_at(a, i) == -1.0 + 0.5 * i);
    ct_tensor *one = ct_linspace(3.5, 100, 1, CT_F64, CT_CPU);
    CT_ASSERT_SHAPE(one, 1);
    assert_true(ct_test_at(one, 0) == 3.5);
    ct_tensor *none = ct_linspace(0, 1, 0, CT_F64, CT_CPU);
    CT_ASSERT_SHAPE(none, 0);
    /* Both ends are exact even where start + i * step would miss. */
    ct_tensor *b = ct_linspace(0.1, 0.7, 601, CT_F64, CT_CPU);
    assert_true(ct_test_at(b, 0) == 0.1 && ct_test_at(b, 600) == 0.7);
    ct_tensor *h = ct_linspace(-2, 2, 41, CT_BF16, CT_CPU);
    CT_ASSERT_OK(h);
    assert_true(ct_test_at(h, 0) == -2.0 && ct_test_at(h, 40) == 2.0);
    for (int i = 1; i < 41; i++)
        assert_true(ct_test_at(h, i) > ct_test_at(h, i - 1) && fabs(ct_test_at(h, i) - (-2.0 + 0.1 * i)) < 0.02);
    ct_tensor *h16 = ct_linspace(0, 1, 3, CT_F16, CT_CPU);
    assert_true(ct_test_at(h16, 1) == 0.5);
    ct_tensor *l = ct_logspace(0, 3, 4, 10.0, CT_F64, CT_CPU);
    assert_true(ct_test_at(l, 0) == 1.0 && ct_test_at(l, 3) == 1000.0);
    ct_tensor *l1 = ct_logspace(2, 9, 1, 2.0, CT_I32, CT_CPU);
    assert_true(ct_test_at(l1, 0) == 4.0);
    ct_tensor *m = ct_logspace(0, 1, 9, 10.0, CT_F32, CT_META);
    CT_ASSERT_SHAPE(m, 9);
    ct_scope_end();
    CT_ASSERT_ERR(ct_linspace(0, 1, -1, CT_F32, CT_CPU) != NULL, CT_ERROR_VALUE, "number of steps must be non-negative");
    CT_ASSERT_ERR(ct_logspace(0, 1, -3, 10.0, CT_F32, CT_CPU) != NULL, CT_ERROR_VALUE,
                  "number of steps must be non-negative");
    CT_ASSERT_ERR(ct_linspace(0, 1, 3, CT_BOOL, CT_CPU) != NULL, CT_ERROR_TYPE, "\"linspace_cpu\" not implemented for 'Bool'");
    CT_ASSERT_ERR(ct_logspace(0, 1, 3, 2.0, CT_BOOL, CT_CPU) != NULL, CT_ERROR_TYPE,
                  "\"logspace_cpu\" not implemented for 'Bool'");
    CT_ASSERT_ERR(ct_logspace(0, 1, 3, 2.0, CT_F16, CT_CPU) != NULL, CT_ERROR_TYPE,
                  "\"logspace_cpu\" not implemented for 'Half'");
    CT_ASSERT_ERR(ct_linspace(0, 1, 3, (ct_dtype)-5, CT_CPU) != NULL, CT_ERROR_TYPE, "dtype");
    CT_ASSERT_ERR(ct_logspace(0, 1, 3, 2.0, CT_F32, CT_CUDA(ct_cuda_device_count() + 1)) != NULL, CT_ERROR_DEVICE, "CUDA");
}

static void test_eye(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_eye(3, -1, CT_DTYPE_UNDEFINED, CT_CPU);
    CT_ASSERT_SHAPE(a, 3, 3);
    assert_int_equal(ct_tensor_dtype(a), CT_F32);
    for (int i = 0; i < 9; i++)
        assert_true(ct_test_at(a, i) == (i % 4 == 0 ? 1.0 : 0.0));
    ct_tensor *b = ct_eye(2, 4, CT_BOOL, CT_CPU);
    CT_ASSERT_SHAPE(b, 2, 4);
    for (int i = 0; i < 8; i++)
        assert_true(ct_test_at(b, i) == (i == 0 || i == 5 ? 1.0 : 0.0));
    ct_tensor *c = ct_eye(4, 2, CT_I64, CT_CPU);
    CT_ASSERT_SHAPE(c, 4, 2);
    assert_true(ct_test_at(c, 3) == 1.0 && ct_test_at(c, 6) == 0.0);
    ct_tensor *e = ct_eye(0, -1, CT_F16, CT_CPU);
    CT_ASSERT_SHAPE(e, 0, 0);
    ct_tensor *m = ct_eye(5, 6, CT_F64, CT_META);
    CT_ASSERT_SHAPE(m, 5, 6);
    ct_scope_end();
    CT_ASSERT_ERR(ct_eye(-1, -1, CT_F32, CT_CPU) != NULL, CT_ERROR_VALUE, "n must be greater or equal to 0, got -1");
    CT_ASSERT_ERR(ct_eye(2, 2, (ct_dtype)99, CT_CPU) != NULL, CT_ERROR_TYPE, "dtype");
    CT_ASSERT_ERR(ct_eye(2, 2, CT_F32, CT_CUDA(ct_cuda_device_count())) != NULL, CT_ERROR_DEVICE, "CUDA");
}

/* Note [Empty storage]: an empty CPU tensor's data is a real, aligned address (never
 * NULL), one tensor's as another's; ops on empty tensors work, and releasing them frees
 * nothing (ASan would see a bad free). Meta tensors keep NULL. */
static void test_empty_storage(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_empty(CT_SHAPE(0, 3), CT_F32, CT_CPU), *b = ct_zeros(CT_SHAPE(5, 0), CT_I64, CT_CPU);
    assert_non_null(ct_tensor_data(a));
    assert_non_null(ct_tensor_data(b));
    assert_int_equal((uintptr_t)ct_tensor_data(a) % 64, 0);
    ct_tensor *s = ct_sum(a, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED); /* (3) zeros from an empty input */
    CT_ASSERT_SHAPE(s, 3);
    for (int i = 0; i < 3; i++)
        assert_true(ct_test_at(s, i) == 0.0);
    ct_tensor *c = ct_cat((const ct_tensor *[]){a, ct_ones(CT_SHAPE(2, 3), CT_F32, CT_CPU)}, 2, 0);
    CT_ASSERT_SHAPE(c, 2, 3);
    assert_null(ct_tensor_data(ct_empty(CT_SHAPE(0), CT_F32, CT_META)));
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_arange_dtype_inference),
        cmocka_unit_test(test_arange_errors),
        cmocka_unit_test(test_linspace_logspace),
        cmocka_unit_test(test_eye),
        cmocka_unit_test(test_empty_storage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
