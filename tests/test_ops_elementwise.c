/* OpInfo entries of the elementwise ops. */
#include <math.h>

#include "opinfo.h"

static double r_neg(double a, double b) { (void)b; return -a; }
static double r_abs(double a, double b) { (void)b; return fabs(a); }
static double r_relu(double a, double b) { (void)b; return a > 0 ? a : 0; }
static double r_exp(double a, double b) { (void)b; return exp(a); }
static double r_log(double a, double b) { (void)b; return log(a); }
static double r_sqrt(double a, double b) { (void)b; return sqrt(a); }
static double r_sin(double a, double b) { (void)b; return sin(a); }
static double r_cos(double a, double b) { (void)b; return cos(a); }
static double r_tanh(double a, double b) { (void)b; return tanh(a); }
static double r_sigmoid(double a, double b) { (void)b; return 1 / (1 + exp(-a)); }
static double r_add(double a, double b) { return a + b; }
static double r_sub(double a, double b) { return a - b; }
static double r_mul(double a, double b) { return a * b; }
static double r_div(double a, double b) { return a / b; }
static double r_maximum(double a, double b) { return a > b ? a : b; }
static double r_minimum(double a, double b) { return a < b ? a : b; }
static double r_eq(double a, double b) { return a == b; }
static double r_ne(double a, double b) { return a != b; }
static double r_lt(double a, double b) { return a < b; }
static double r_le(double a, double b) { return a <= b; }
static double r_gt(double a, double b) { return a > b; }
static double r_ge(double a, double b) { return a >= b; }

#define NUMERIC (CT_DTS_FLOAT | CT_DTS_INT)

static const ct_opinfo infos[] = {
    {CT_OPINFO_UNARY(neg), .ref = r_neg, .lo = -9, .hi = 9, .dtypes = CT_DTS_FLOAT | CT_DTS_SINT},
    {CT_OPINFO_UNARY(abs), .ref = r_abs, .lo = -9, .hi = 9, .dtypes = CT_DTS_ALL},
    {CT_OPINFO_UNARY(relu), .ref = r_relu, .lo = -9, .hi = 9, .dtypes = NUMERIC},
    {CT_OPINFO_UNARY(exp), .ref = r_exp, .lo = -4, .hi = 4, .dtypes = CT_DTS_ALL, .out = CT_OPINFO_OUT_FLOAT},
    {CT_OPINFO_UNARY(log), .ref = r_log, .lo = 0.1, .hi = 20, .dtypes = CT_DTS_FLOAT, .out = CT_OPINFO_OUT_FLOAT},
    {CT_OPINFO_UNARY(sqrt), .ref = r_sqrt, .lo = 0, .hi = 20, .dtypes = CT_DTS_ALL, .out = CT_OPINFO_OUT_FLOAT},
    {CT_OPINFO_UNARY(sin), .ref = r_sin, .lo = -6, .hi = 6, .dtypes = CT_DTS_ALL, .out = CT_OPINFO_OUT_FLOAT},
    {CT_OPINFO_UNARY(cos), .ref = r_cos, .lo = -6, .hi = 6, .dtypes = CT_DTS_ALL, .out = CT_OPINFO_OUT_FLOAT},
    {CT_OPINFO_UNARY(tanh), .ref = r_tanh, .lo = -4, .hi = 4, .dtypes = CT_DTS_ALL, .out = CT_OPINFO_OUT_FLOAT},
    {CT_OPINFO_UNARY(sigmoid), .ref = r_sigmoid, .lo = -8, .hi = 8, .dtypes = CT_DTS_ALL, .out = CT_OPINFO_OUT_FLOAT},
    {CT_OPINFO_BINARY(add), .ref = r_add, .lo = -20, .hi = 20, .dtypes = NUMERIC},
    {CT_OPINFO_BINARY(sub), .ref = r_sub, .lo = -20, .hi = 20, .dtypes = CT_DTS_FLOAT | CT_DTS_SINT},
    {CT_OPINFO_BINARY(mul), .ref = r_mul, .lo = -9, .hi = 9, .dtypes = NUMERIC},
    {CT_OPINFO_BINARY(div), .ref = r_div, .lo = 1, .hi = 9, .dtypes = CT_DTS_ALL, .out = CT_OPINFO_OUT_FLOAT},
    {CT_OPINFO_BINARY(maximum), .ref = r_maximum, .lo = -9, .hi = 9, .dtypes = CT_DTS_ALL},
    {CT_OPINFO_BINARY(minimum), .ref = r_minimum, .lo = -9, .hi = 9, .dtypes = CT_DTS_ALL},
    {CT_OPINFO_BINARY(eq), .ref = r_eq, .lo = -3, .hi = 3, .dtypes = CT_DTS_ALL, .out = CT_OPINFO_OUT_BOOL, .integer_inputs = true},
    {CT_OPINFO_BINARY(ne), .ref = r_ne, .lo = -3, .hi = 3, .dtypes = CT_DTS_ALL, .out = CT_OPINFO_OUT_BOOL, .integer_inputs = true},
    {CT_OPINFO_BINARY(lt), .ref = r_lt, .lo = -3, .hi = 3, .dtypes = CT_DTS_ALL, .out = CT_OPINFO_OUT_BOOL, .integer_inputs = true},
    {CT_OPINFO_BINARY(le), .ref = r_le, .lo = -3, .hi = 3, .dtypes = CT_DTS_ALL, .out = CT_OPINFO_OUT_BOOL, .integer_inputs = true},
    {CT_OPINFO_BINARY(gt), .ref = r_gt, .lo = -3, .hi = 3, .dtypes = CT_DTS_ALL, .out = CT_OPINFO_OUT_BOOL, .integer_inputs = true},
    {CT_OPINFO_BINARY(ge), .ref = r_ge, .lo = -3, .hi = 3, .dtypes = CT_DTS_ALL, .out = CT_OPINFO_OUT_BOOL, .integer_inputs = true},
};

static void test_opinfo(void **state) {
    const ct_opinfo *info = *state;
    ct_opinfo_run(info);
}

static void test_bool_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *b = ct_ones(CT_SHAPE(3), CT_BOOL, CT_CPU);
    CT_ASSERT_ERR(ct_neg(b) != NULL, CT_ERROR_TYPE, "Negation, the `-` operator, on a bool tensor is not supported");
    CT_ASSERT_ERR(ct_sub(b, b) != NULL, CT_ERROR_TYPE, "Subtraction, the `-` operator, with two bool tensors");
    ct_tensor *i = ct_ones(CT_SHAPE(3), CT_I32, CT_CPU);
    CT_ASSERT_ERR(ct_add_alpha(i, i, ct_scalar_float(0.5)) != NULL, CT_ERROR_TYPE, "alpha must not be a floating point");
    CT_ASSERT_ERR(ct_add_(i, ct_ones(CT_SHAPE(3), CT_F32, CT_CPU)) != NULL, CT_ERROR_TYPE,
                  "result type float32 can't be cast to the desired output type int32");
    ct_scope_end();
}

static void test_scalars_and_alpha(void **state) {
    (void)state;
    ct_scope_begin();
    int32_t v[] = {1, 2, 3};
    ct_tensor *i = ct_from_data(v, CT_SHAPE(3), CT_I32);
    ct_tensor *r = ct_mul_scalar(i, ct_scalar_float(2.5)); /* int * float scalar -> default float */
    CT_ASSERT_OK(r);
    assert_int_equal(ct_tensor_dtype(r), CT_F32);
    assert_true(ct_test_at(r, 2) == 7.5);
    r = ct_add_scalar(i, ct_scalar_int(1000)); /* an int scalar does not widen int32 */
    assert_int_equal(ct_tensor_dtype(r), CT_I32);
    assert_true(ct_test_at(r, 0) == 1001);
    r = ct_sub_alpha(i, i, ct_scalar_int(3));
    assert_true(ct_test_at(r, 1) == -4);
    ct_tensor *h = ct_ones(CT_SHAPE(2), CT_F16, CT_CPU);
    r = ct_mul_scalar(h, ct_scalar_float(1e10)); /* float16 stays float16: overflows to inf */
    assert_int_equal(ct_tensor_dtype(r), CT_F16);
    assert_true(isinf(ct_test_at(r, 0)));
    /* int overflow wraps */
    int8_t w[] = {127};
    r = ct_add_scalar(ct_from_data(w, CT_SHAPE(1), CT_I8), ct_scalar_int(1));
    assert_true(ct_test_at(r, 0) == -128);
    /* NaN propagation of maximum */
    float nanv[] = {NAN, 1.0f};
    float one[] = {0.0f, NAN};
    r = ct_maximum(ct_from_data(nanv, CT_SHAPE(2), CT_F32), ct_from_data(one, CT_SHAPE(2), CT_F32));
    assert_true(isnan(ct_test_at(r, 0)) && isnan(ct_test_at(r, 1)));
    ct_scope_end();
}

static void test_large_parallel(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_full(CT_SHAPE(300, 1001), ct_scalar_float(1.5), CT_F32, CT_CPU);
    ct_tensor *b = ct_full(CT_SHAPE(1001), ct_scalar_float(2.0), CT_F32, CT_CPU);
    ct_tensor *c = ct_mul(a, b);
    double s = 0;
    const float *p = ct_tensor_data(c);
    for (int64_t k = 0; k < 300 * 1001; k++)
        s += p[k];
    assert_true(s == 3.0 * 300 * 1001);
    ct_scope_end();
}

int main(void) {
    struct CMUnitTest tests[sizeof infos / sizeof infos[0] + 3];
    size_t n = 0;
    for (size_t i = 0; i < sizeof infos / sizeof infos[0]; i++)
        tests[n++] = (struct CMUnitTest){infos[i].name, test_opinfo, NULL, NULL, (void *)&infos[i]};
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_bool_errors);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_scalars_and_alpha);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_large_parallel);
    return _cmocka_run_group_tests("elementwise", tests, n, NULL, NULL);
}
