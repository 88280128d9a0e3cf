/* Scalar, rounding-mode, in-place and out= forms of the elementwise ops that the
 * OpInfo tables do not reach; defined results PyTorch 1.13 leaves to the hardware
 * (shifts past the width, MIN / -1); large inputs (vector math, parallel loops). */
#include <math.h>
#include <string.h>

#include "testutil.h"

static ct_tensor *t_i64(const int64_t *v, int64_t n) { return ct_from_data(v, CT_SHAPE(n), CT_I64); }
static ct_tensor *t_f32(const float *v, int64_t n) { return ct_from_data(v, CT_SHAPE(n), CT_F32); }

static void assert_same(const ct_tensor *a, const ct_tensor *b) {
    CT_ASSERT_OK(a);
    CT_ASSERT_OK(b);
    assert_int_equal(ct_tensor_dtype(a), ct_tensor_dtype(b));
    assert_int_equal(ct_tensor_numel(a), ct_tensor_numel(b));
    for (int64_t i = 0; i < ct_tensor_numel(a); i++) {
        double x = ct_test_at(a, i), y = ct_test_at(b, i);
        if (!(x == y || (isnan(x) && isnan(y))))
            fail_msg("element %lld: %.17g != %.17g", (long long)i, x, y);
    }
}

typedef struct bin_forms {
    const char *name;
    ct_tensor *(*f)(const ct_tensor *, const ct_tensor *);
    ct_tensor *(*fs)(const ct_tensor *, ct_scalar);
    ct_tensor *(*fs_)(ct_tensor *, ct_scalar);
} bin_forms;

#define FORMS(op) {#op, ct_##op, ct_##op##_scalar, ct_##op##_scalar_}

/* A scalar argument acts as a 0-d int64 tensor would for an integer scalar. */
static void test_scalar_forms(void **state) {
    (void)state;
    static const bin_forms forms[] = {
        FORMS(floor_divide), FORMS(remainder), FORMS(fmod), FORMS(pow), FORMS(atan2), FORMS(copysign),
        FORMS(fmax), FORMS(fmin), FORMS(logical_and), FORMS(logical_or), FORMS(logical_xor), FORMS(bitwise_and),
        FORMS(bitwise_or), FORMS(bitwise_xor), FORMS(bitwise_left_shift), FORMS(bitwise_right_shift),
        FORMS(clamp_min), FORMS(clamp_max), FORMS(hypot),
    };
    ct_scope_begin();
    const int64_t iv[] = {7, -7, 3, 0, 12};
    const float fv[] = {7.5f, -7.25f, 3.0f, -0.0f, 12.0f};
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
        const bin_forms *f = &forms[k];
        for (int useint = 0; useint < 2; useint++) {
            if (useint && strcmp(f->name, "hypot") == 0)
                continue;
            if (!useint && strncmp(f->name, "bitwise", 7) == 0)
                continue;
            ct_tensor *a = useint ? t_i64(iv, 5) : t_f32(fv, 5);
            ct_scalar s = ct_scalar_int(3);
            ct_tensor *want = f->f(a, ct_scalar_tensor(s, CT_I64, CT_CPU));
            ct_tensor *got = f->fs(a, s);
            if (!got || !want)
                fail_msg("%s: %s", f->name, ct_last_error());
            assert_same(got, want);
            /* In place when the result type fits. */
            ct_tensor *self = ct_clone(a);
            ct_tensor *r = f->fs_(self, s);
            if (ct_tensor_dtype(want) == ct_tensor_dtype(a)) {
                CT_ASSERT_OK(r);
                assert_same(self, want);
            } else if (ct_can_cast(ct_tensor_dtype(want), ct_tensor_dtype(a))) {
                CT_ASSERT_OK(r); /* logical ops into a numeric self: 0 or 1 */
                assert_same(self, ct_to_dtype(want, ct_tensor_dtype(a)));
            } else {
                assert_null(r);
                ct_clear_error();
            }
            CT_ASSERT_ERR(f->fs(NULL, s) != NULL, CT_ERROR_NULL_ARGUMENT, f->name);
            CT_ASSERT_ERR(f->fs_(NULL, s) != NULL, CT_ERROR_NULL_ARGUMENT, f->name);
        }
    }
    ct_scope_end();
}

static void test_div_modes(void **state) {
    (void)state;
    ct_scope_begin();
    const int64_t av[] = {7, -7, 7, -7}, bv[] = {2, 2, -2, -2};
    ct_tensor *a = t_i64(av, 4), *b = t_i64(bv, 4);
    ct_tensor *tr = ct_div_mode(a, b, CT_ROUNDING_MODE_TRUNC);
    ct_tensor *fl = ct_div_mode(a, b, CT_ROUNDING_MODE_FLOOR);
    ct_tensor *no = ct_div_mode(a, b, CT_ROUNDING_MODE_NONE);
    assert_int_equal(ct_tensor_dtype(tr), CT_I64);
    assert_int_equal(ct_tensor_dtype(no), CT_F32);
    const double wt[] = {3, -3, -3, 3}, wf[] = {3, -4, -4, 3}, wn[] = {3.5, -3.5, -3.5, 3.5};
    for (int i = 0; i < 4; i++) {
        assert_true(ct_test_at(tr, i) == wt[i]);
        assert_true(ct_test_at(fl, i) == wf[i]);
        assert_true(ct_test_at(no, i) == wn[i]);
    }
    assert_same(ct_div_scalar_mode(a, ct_scalar_int(-2), CT_ROUNDING_MODE_FLOOR),
                ct_div_mode(a, ct_full(CT_SHAPE(4), ct_scalar_int(-2), CT_I64, CT_CPU), CT_ROUNDING_MODE_FLOOR));
    ct_tensor *self = ct_clone(a);
    CT_ASSERT_OK(ct_div_mode_(self, b, CT_ROUNDING_MODE_FLOOR));
    assert_same(self, fl);
    self = ct_clone(a);
    CT_ASSERT_OK(ct_div_scalar_mode_(self, ct_scalar_int(2), CT_ROUNDING_MODE_TRUNC));
    for (int i = 0; i < 4; i++)
        assert_true(ct_test_at(self, i) == (i % 2 ? -3 : 3));
    ct_tensor *out = ct_empty(CT_SHAPE(4), CT_F64, CT_CPU);
    CT_ASSERT_OK(ct_div_mode_out(a, b, CT_ROUNDING_MODE_FLOOR, out));
    for (int i = 0; i < 4; i++)
        assert_true(ct_test_at(out, i) == wf[i]);
    /* True division of integers in place cannot store a float. */
    CT_ASSERT_ERR(ct_div_mode_(ct_clone(a), b, CT_ROUNDING_MODE_NONE) != NULL, CT_ERROR_TYPE, "can't be cast");
    CT_ASSERT_ERR(ct_div_mode(a, b, (ct_rounding_mode)7) != NULL, CT_ERROR_VALUE,
                  "div expected rounding_mode to be one of None, 'trunc', or 'floor'");
    CT_ASSERT_ERR(ct_div_mode(NULL, b, CT_ROUNDING_MODE_FLOOR) != NULL, CT_ERROR_NULL_ARGUMENT, "div");
    CT_ASSERT_ERR(ct_div_mode(a, NULL, CT_ROUNDING_MODE_FLOOR) != NULL, CT_ERROR_NULL_ARGUMENT, "div");
    CT_ASSERT_ERR(ct_div_mode_(NULL, b, CT_ROUNDING_MODE_FLOOR) != NULL, CT_ERROR_NULL_ARGUMENT, "div");
    CT_ASSERT_ERR(ct_div_mode_out(a, b, CT_ROUNDING_MODE_FLOOR, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "div");
    CT_ASSERT_ERR(ct_div_scalar_mode(NULL, ct_scalar_int(1), CT_ROUNDING_MODE_FLOOR) != NULL, CT_ERROR_NULL_ARGUMENT,
                  "div");
    CT_ASSERT_ERR(ct_div_scalar_mode_(NULL, ct_scalar_int(1), CT_ROUNDING_MODE_FLOOR) != NULL,
                  CT_ERROR_NULL_ARGUMENT, "div");
    /* META: dtype follows the mode. */
    ct_tensor *m = ct_empty(CT_SHAPE(4), CT_I32, CT_META);
    ct_tensor *r = ct_div_mode(m, m, CT_ROUNDING_MODE_TRUNC);
    CT_ASSERT_OK(r);
    assert_int_equal(ct_tensor_dtype(r), CT_I32);
    assert_int_equal(ct_tensor_dtype(ct_div_mode(m, m, CT_ROUNDING_MODE_NONE)), CT_F32);
    /* Zero divisors are not scanned on META (there is no data). */
    CT_ASSERT_OK(ct_floor_divide(m, m));
    ct_scope_end();
}

static void test_ternary_forms(void **state) {
    (void)state;
    ct_scope_begin();
    const float av[] = {1, 2, -5}, bv[] = {3, 4, 5};
    ct_tensor *a = t_f32(av, 3), *b = t_f32(bv, 3);
    ct_tensor *w = ct_full(CT_SHAPE(3), ct_scalar_float(0.25), CT_F32, CT_CPU);
    ct_tensor *l = ct_lerp_scalar(a, b, ct_scalar_float(0.25));
    assert_same(l, ct_lerp(a, b, w));
    ct_tensor *self = ct_clone(a);
    CT_ASSERT_OK(ct_lerp_scalar_(self, b, ct_scalar_float(0.25)));
    assert_same(self, l);
    self = ct_clone(a);
    CT_ASSERT_OK(ct_lerp_(self, b, w));
    assert_same(self, l);
    ct_tensor *out = ct_empty(CT_SHAPE(3), CT_F32, CT_CPU);
    CT_ASSERT_OK(ct_lerp_scalar_out(a, b, ct_scalar_float(0.25), out));
    assert_same(out, l);
    assert_true(ct_test_at(l, 0) == 1.5);
    CT_ASSERT_ERR(ct_lerp_scalar(NULL, b, ct_scalar_float(0.5)) != NULL, CT_ERROR_NULL_ARGUMENT, "lerp");
    CT_ASSERT_ERR(ct_lerp_scalar(a, NULL, ct_scalar_float(0.5)) != NULL, CT_ERROR_NULL_ARGUMENT, "lerp");
    CT_ASSERT_ERR(ct_lerp_scalar_(NULL, b, ct_scalar_float(0.5)) != NULL, CT_ERROR_NULL_ARGUMENT, "lerp");
    CT_ASSERT_ERR(ct_lerp_scalar_out(a, b, ct_scalar_float(0.5), NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "lerp");
    CT_ASSERT_ERR(ct_lerp_scalar(a, ct_ones(CT_SHAPE(2), CT_F32, CT_CPU), ct_scalar_float(0.5)) != NULL,
                  CT_ERROR_VALUE, "must match the size");

    /* where with scalars */
    const bool cv[] = {true, false, true};
    ct_tensor *c = ct_from_data(cv, CT_SHAPE(3), CT_BOOL);
    ct_tensor *ws = ct_where_scalar_self(c, ct_scalar_int(9), a);
    assert_int_equal(ct_tensor_dtype(ws), CT_F32);
    assert_true(ct_test_at(ws, 0) == 9 && ct_test_at(ws, 1) == 2);
    ct_tensor *wsc = ct_where_scalars(c, ct_scalar_bool(true), ct_scalar_bool(false));
    assert_int_equal(ct_tensor_dtype(wsc), CT_BOOL);
    CT_ASSERT_ERR(ct_where_scalar_self(NULL, ct_scalar_int(1), a) != NULL, CT_ERROR_NULL_ARGUMENT, "where");
    CT_ASSERT_ERR(ct_where_scalar_self(c, ct_scalar_int(1), NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "where");
    CT_ASSERT_ERR(ct_where_scalar_other(c, NULL, ct_scalar_int(1)) != NULL, CT_ERROR_NULL_ARGUMENT, "where");
    CT_ASSERT_ERR(ct_where_scalars(NULL, ct_scalar_int(1), ct_scalar_int(1)) != NULL, CT_ERROR_NULL_ARGUMENT, "where");
    CT_ASSERT_ERR(ct_where(a, a, a) != NULL, CT_ERROR_TYPE, "where expected condition to be a boolean tensor");
    ct_tensor *mc = ct_empty(CT_SHAPE(4, 1), CT_BOOL, CT_META);
    ct_tensor *mr = ct_where_scalar_other(mc, ct_empty(CT_SHAPE(3), CT_I16, CT_META), ct_scalar_float(1.5));
    CT_ASSERT_OK(mr);
    CT_ASSERT_SHAPE(mr, 4, 3);
    assert_int_equal(ct_tensor_dtype(mr), CT_F32);

    /* clamp: NULL bounds, errors */
    ct_scalar lo = ct_scalar_int(0);
    CT_ASSERT_ERR(ct_clamp(a, NULL, NULL) != NULL, CT_ERROR_VALUE, "At least one of 'min' or 'max' must not be None");
    CT_ASSERT_ERR(ct_clamp_tensor(a, NULL, NULL) != NULL, CT_ERROR_VALUE, "At least one of 'min' or 'max'");
    CT_ASSERT_ERR(ct_clamp(NULL, &lo, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "clamp");
    CT_ASSERT_ERR(ct_clamp_(NULL, &lo, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "clamp");
    CT_ASSERT_ERR(ct_clamp_out(a, &lo, NULL, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "clamp");
    CT_ASSERT_ERR(ct_clamp_tensor(NULL, a, a) != NULL, CT_ERROR_NULL_ARGUMENT, "clamp");
    CT_ASSERT_ERR(ct_clamp_(ct_clone(t_i64((const int64_t[]){1, 2}, 2)), &(ct_scalar){.type = CT_SCALAR_FLOAT, .v.f = 0.5}, NULL) != NULL,
                  CT_ERROR_TYPE, "can't be cast");
    ct_tensor *cm = ct_clamp_tensor(a, NULL, ct_scalar_tensor(ct_scalar_float(1.5), CT_F32, CT_CPU));
    assert_true(ct_test_at(cm, 0) == 1 && ct_test_at(cm, 1) == 1.5);

    /* addcmul / addcdiv */
    CT_ASSERT_ERR(ct_addcmul(NULL, a, a, ct_scalar_int(1)) != NULL, CT_ERROR_NULL_ARGUMENT, "addcmul");
    CT_ASSERT_ERR(ct_addcdiv_(NULL, a, a, ct_scalar_int(1)) != NULL, CT_ERROR_NULL_ARGUMENT, "addcdiv");
    CT_ASSERT_ERR(ct_addcmul_out(a, a, a, ct_scalar_int(1), NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "addcmul");
    ct_tensor *acm = ct_addcmul(t_i64((const int64_t[]){1, 2}, 2), t_i64((const int64_t[]){3, 4}, 2),
                                t_i64((const int64_t[]){5, 6}, 2), ct_scalar_float(2.7));
    /* A float value with integer tensors is truncated, as PyTorch converts it. */
    assert_true(ct_test_at(acm, 0) == 31 && ct_test_at(acm, 1) == 50);
    ct_scope_end();
}

static void test_unary_params(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *f = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_gelu(f, 5) != NULL, CT_ERROR_VALUE, "approximate argument must be either none or tanh.");
    CT_ASSERT_ERR(ct_celu_(f, 0.0) != NULL, CT_ERROR_VALUE, "ZeroDivisionError: alpha cannot be 0 for CELU");
    CT_ASSERT_ERR(ct_hardtanh(ct_ones(CT_SHAPE(2), CT_U8, CT_CPU), -1, 1) != NULL, CT_ERROR_VALUE,
                  "cannot do hardtanh on an unsigned type with negative limits");
    CT_ASSERT_ERR(ct_hardtanh(ct_ones(CT_SHAPE(2), CT_U8, CT_CPU), 0, 300) != NULL, CT_ERROR_VALUE,
                  "value cannot be converted to type uint8_t without overflow");
    CT_ASSERT_ERR(ct_relu6(ct_ones(CT_SHAPE(2), CT_BOOL, CT_CPU)) != NULL, CT_ERROR_TYPE,
                  "Bool inputs not supported for hardtanh");
    CT_ASSERT_ERR(ct_leaky_relu(NULL, 0.1) != NULL, CT_ERROR_NULL_ARGUMENT, "leaky_relu");
    CT_ASSERT_ERR(ct_softplus_(NULL, 1, 20) != NULL, CT_ERROR_NULL_ARGUMENT, "softplus");
    CT_ASSERT_ERR(ct_elu_out(f, 1, 1, 1, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "elu");
    CT_ASSERT_ERR(ct_nan_to_num_out(f, NULL, NULL, NULL, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "nan_to_num");
    CT_ASSERT_ERR(ct_gelu_(NULL, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "gelu");
    CT_ASSERT_ERR(ct_round_decimals_out(f, 1, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "round_decimals");
    CT_ASSERT_ERR(ct_isnan(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "isnan");
    /* square of bool is int64 (pow(bool, 2) promotes with the integer 2). */
    ct_tensor *sq = ct_square(ct_ones(CT_SHAPE(2), CT_BOOL, CT_CPU));
    assert_int_equal(ct_tensor_dtype(sq), CT_I64);
    CT_ASSERT_ERR(ct_square_(ct_ones(CT_SHAPE(2), CT_BOOL, CT_CPU)) != NULL, CT_ERROR_TYPE, "can't be cast");
    /* bitwise_not of bool is logical; of unsigned, the complement. */
    const bool bv[] = {true, false};
    ct_tensor *bn = ct_bitwise_not(ct_from_data(bv, CT_SHAPE(2), CT_BOOL));
    assert_true(ct_test_at(bn, 0) == 0 && ct_test_at(bn, 1) == 1);
    const uint16_t uv[] = {0, 65535};
    ct_tensor *un = ct_bitwise_not(ct_from_data(uv, CT_SHAPE(2), CT_U16));
    assert_true(ct_test_at(un, 0) == 65535 && ct_test_at(un, 1) == 0);
    /* nan_to_num defaults follow the dtype's largest finite value. */
    const double dv[] = {INFINITY, -INFINITY};
    ct_tensor *nn = ct_nan_to_num(ct_from_data(dv, CT_SHAPE(2), CT_F64), NULL, NULL, NULL);
    assert_true(ct_test_at(nn, 0) == 1.7976931348623157e308 && ct_test_at(nn, 1) == -1.7976931348623157e308);
    ct_scope_end();
}

/* Note [Shifts past the width] in src/cpu/binary_math.c. */
static void test_shift_width(void **state) {
    (void)state;
    ct_scope_begin();
    const int32_t av[] = {1, -8, 8, -1, 5};
    const int32_t bv[] = {32, 40, 32, -1, 31};
    ct_tensor *a = ct_from_data(av, CT_SHAPE(5), CT_I32), *b = ct_from_data(bv, CT_SHAPE(5), CT_I32);
    ct_tensor *l = ct_bitwise_left_shift(a, b), *r = ct_bitwise_right_shift(a, b);
    const double wl[] = {0, 0, 0, 0, -2147483648.0}, wr[] = {0, -1, 0, -1, 0};
    for (int i = 0; i < 5; i++) {
        assert_true(ct_test_at(l, i) == wl[i]);
        assert_true(ct_test_at(r, i) == wr[i]);
    }
    const uint8_t uv[] = {200, 200}, ub[] = {8, 200};
    ct_tensor *ua = ct_from_data(uv, CT_SHAPE(2), CT_U8), *ubt = ct_from_data(ub, CT_SHAPE(2), CT_U8);
    ct_tensor *ul = ct_bitwise_left_shift(ua, ubt), *ur = ct_bitwise_right_shift(ua, ubt);
    assert_true(ct_test_at(ul, 0) == 0 && ct_test_at(ul, 1) == 0 && ct_test_at(ur, 0) == 0 && ct_test_at(ur, 1) == 0);
    const uint64_t qv[] = {1ull << 63, 3};
    ct_tensor *q = ct_from_data(qv, CT_SHAPE(2), CT_U64);
    ct_tensor *qr = ct_bitwise_right_shift_scalar(q, ct_scalar_int(64));
    assert_true(ct_test_at(qr, 0) == 0 && ct_test_at(qr, 1) == 0);
    ct_tensor *ql = ct_bitwise_left_shift_scalar(q, ct_scalar_int(63));
    assert_true(ct_test_at(ql, 1) == 9223372036854775808.0);
    ct_scope_end();
}

/* INT64_MIN / -1 overflows in C (PyTorch 1.13 crashes with SIGFPE); ctorch wraps. */
static void test_int_min_division(void **state) {
    (void)state;
    ct_scope_begin();
    const int64_t av[] = {INT64_MIN, INT64_MIN, 9}, bv[] = {-1, -1, -1};
    ct_tensor *a = t_i64(av, 3), *b = t_i64(bv, 3);
    ct_tensor *q = ct_floor_divide(a, b), *r = ct_remainder(a, b), *m = ct_fmod(a, b);
    ct_tensor *t = ct_div_mode(a, b, CT_ROUNDING_MODE_TRUNC);
    const int64_t *qd = ct_tensor_data(q), *td = ct_tensor_data(t);
    assert_true(qd[0] == INT64_MIN && td[0] == INT64_MIN && qd[2] == -9);
    assert_true(ct_test_at(r, 0) == 0 && ct_test_at(m, 0) == 0);
    ct_scope_end();
}

/* Zero divisors anywhere in a large input, with the loop running in parallel, and
 * broadcast divisors. The output is untouched by the failed call. */
static void test_zero_division_large(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_full(CT_SHAPE(200001), ct_scalar_int(7), CT_I32, CT_CPU);
    ct_tensor *b = ct_full(CT_SHAPE(200001), ct_scalar_int(3), CT_I32, CT_CPU);
    ((int32_t *)ct_tensor_data(b))[150000] = 0;
    ct_tensor *self = ct_clone(a);
    CT_ASSERT_ERR(ct_remainder_(self, b) != NULL, CT_ERROR_VALUE, "ZeroDivisionError");
    assert_true(ct_test_at(self, 0) == 7);
    ((int32_t *)ct_tensor_data(b))[150000] = 5;
    ct_tensor *q = ct_floor_divide(a, b);
    assert_true(ct_test_at(q, 150000) == 1 && ct_test_at(q, 0) == 2);
    CT_ASSERT_ERR(ct_fmod(a, ct_zeros(CT_SHAPE(1), CT_I32, CT_CPU)) != NULL, CT_ERROR_VALUE, "ZeroDivisionError");
    /* A scalar divisor that wraps to 0 in the compute dtype (256 as uint8). */
    CT_ASSERT_ERR(ct_floor_divide_scalar(ct_ones(CT_SHAPE(2), CT_U8, CT_CPU), ct_scalar_int(256)) != NULL,
                  CT_ERROR_VALUE, "ZeroDivisionError");
    ct_scope_end();
}

/* float32 transcendental loops over large contiguous inputs (vector math where the
 * CPU has it): every element within a few ulps of the double result, tails included,
 * and the same answer for a strided view. */
static void test_vector_math(void **state) {
    (void)state;
    typedef struct {
        const char *name;
        ct_tensor *(*f)(const ct_tensor *);
        double (*ref)(double);
        double lo, hi;
    } vm_case;
    static const vm_case cases[] = {
        {"exp", ct_exp, exp, -80, 80},       {"exp2", ct_exp2, exp2, -100, 100}, {"expm1", ct_expm1, expm1, -5, 5},
        {"log", ct_log, log, 1e-3, 1e6},     {"log2", ct_log2, log2, 1e-3, 1e6}, {"log10", ct_log10, log10, 1e-3, 1e6},
        {"log1p", ct_log1p, log1p, -0.9, 50}, {"sin", ct_sin, sin, -20, 20},     {"cos", ct_cos, cos, -20, 20},
        {"tan", ct_tan, tan, -1.5, 1.5},     {"asin", ct_asin, asin, -1, 1},     {"acos", ct_acos, acos, -1, 1},
        {"atan", ct_atan, atan, -50, 50},    {"sinh", ct_sinh, sinh, -20, 20},   {"cosh", ct_cosh, cosh, -20, 20},
        {"tanh", ct_tanh, tanh, -10, 10},    {"asinh", ct_asinh, asinh, -50, 50}, {"acosh", ct_acosh, acosh, 1, 50},
        {"atanh", ct_atanh, atanh, -0.99, 0.99}, {"erf", ct_erf, erf, -4, 4},     {"erfc", ct_erfc, erfc, -4, 9},
    };
    ct_scope_begin();
    const int64_t n = 4099; /* not a multiple of any vector width */
    ct_tensor *x = ct_empty(CT_SHAPE(n), CT_F32, CT_CPU);
    float *xp = ct_tensor_data(x);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const vm_case *c = &cases[k];
        for (int64_t i = 0; i < n; i++)
            xp[i] = (float)(c->lo + (c->hi - c->lo) * (double)i / (double)(n - 1));
        ct_tensor *y = c->f(x);
        CT_ASSERT_OK(y);
        const float *yp = ct_tensor_data(y);
        for (int64_t i = 0; i < n; i++) {
            double want = c->ref((double)xp[i]);
            double tol = 4 * 1.2e-7 * fabs(want) + 1e-37;
            if (!(fabs((double)yp[i] - want) <= tol || (isinf(want) && (double)yp[i] == want)))
                fail_msg("%s(%.9g): got %.9g, want %.17g", c->name, (double)xp[i], (double)yp[i], want);
        }
        /* In place gives the same bits. */
        ct_tensor *z = ct_clone(x);
        CT_ASSERT_OK(c->f == ct_exp ? ct_exp_(z) : c->f(z));
        if (c->f == ct_exp)
            assert_memory_equal(ct_tensor_data(z), yp, (size_t)n * sizeof(float));
    }
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalar_forms),      cmocka_unit_test(test_div_modes),
        cmocka_unit_test(test_ternary_forms),     cmocka_unit_test(test_unary_params),
        cmocka_unit_test(test_shift_width),       cmocka_unit_test(test_int_min_division),
        cmocka_unit_test(test_zero_division_large), cmocka_unit_test(test_vector_math),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
