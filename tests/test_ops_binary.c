/* OpInfo entries of the binary and ternary elementwise ops. */
#include <math.h>

#include "opinfo.h"

#define NUMERIC (CT_DTS_FLOAT | CT_DTS_INT)
#define FL CT_DTS_FLOAT
#define ALL CT_DTS_ALL
#define OUTF .out = CT_OPINFO_OUT_FLOAT
#define OUTB .out = CT_OPINFO_OUT_BOOL

/* Adapters fixing an op's extra arguments: tag_f, tag_i, tag_o. */
#define ADAPT_B(tag, fn, ...)                                                                        \
    static ct_tensor *tag##_f(const ct_tensor *a, const ct_tensor *b) { return fn(a, b, __VA_ARGS__); } \
    static ct_tensor *tag##_i(ct_tensor *a, const ct_tensor *b) { return fn##_(a, b, __VA_ARGS__); }    \
    static ct_tensor *tag##_o(const ct_tensor *a, const ct_tensor *b, ct_tensor *o) {                   \
        return fn##_out(a, b, __VA_ARGS__, o);                                                          \
    }
#define ADAPTED_B(tag, opname) .name = #tag, .op = #opname, .b = tag##_f, .b_ = tag##_i, .b_out = tag##_o
#define ADAPT_T(tag, fn, ...)                                                                        \
    static ct_tensor *tag##_f(const ct_tensor *a, const ct_tensor *b, const ct_tensor *c) {          \
        return fn(a, b, c, __VA_ARGS__);                                                             \
    }                                                                                                \
    static ct_tensor *tag##_i(ct_tensor *a, const ct_tensor *b, const ct_tensor *c) {                \
        return fn##_(a, b, c, __VA_ARGS__);                                                          \
    }                                                                                                \
    static ct_tensor *tag##_o(const ct_tensor *a, const ct_tensor *b, const ct_tensor *c, ct_tensor *o) { \
        return fn##_out(a, b, c, __VA_ARGS__, o);                                                    \
    }
#define ADAPTED_T(tag, opname) .name = #tag, .op = #opname, .t = tag##_f, .t_ = tag##_i, .t_out = tag##_o

static double r_floor_div(double a, double b) { return floor(a / b); }
static double r_trunc_div(double a, double b) { return trunc(a / b); }
static double r_remainder(double a, double b) {
    double m = fmod(a, b);
    return m != 0 && (b < 0) != (m < 0) ? m + b : m;
}
static double r_fmod(double a, double b) { return fmod(a, b); }
static double r_pow(double a, double b) { return pow(a, b); }
static double r_atan2(double a, double b) { return atan2(a, b); }
static double r_hypot(double a, double b) { return hypot(a, b); }
static double r_copysign(double a, double b) { return copysign(a, b); }
static double r_fmax(double a, double b) { return fmax(a, b); }
static double r_fmin(double a, double b) { return fmin(a, b); }
static double r_and(double a, double b) { return a != 0 && b != 0; }
static double r_or(double a, double b) { return a != 0 || b != 0; }
static double r_xor(double a, double b) { return (a != 0) != (b != 0); }
static double r_band(double a, double b) { return (double)((int64_t)a & (int64_t)b); }
static double r_bor(double a, double b) { return (double)((int64_t)a | (int64_t)b); }
static double r_bxor(double a, double b) { return (double)((int64_t)a ^ (int64_t)b); }
static double r_shl(double a, double b) { return a * ldexp(1.0, (int)b); }
static double r_shr(double a, double b) { return floor(a / ldexp(1.0, (int)b)); }
static double r_max(double a, double b) { return a > b ? a : b; }
static double r_min(double a, double b) { return a < b ? a : b; }
static double r_clamp(double a, double lo, double hi) { return fmin(fmax(a, lo), hi); }
static double r_lerp(double a, double b, double w) { return a + w * (b - a); }
static double r_addcmul(double a, double b, double c) { return a + 2 * b * c; }
static double r_addcdiv(double a, double b, double c) { return a + 0.5 * b / c; }
static double r_where(double c, double a, double b) { return c != 0 ? a : b; }

ADAPT_B(div_trunc, ct_div_mode, CT_ROUNDING_MODE_TRUNC)
ADAPT_B(div_floor, ct_div_mode, CT_ROUNDING_MODE_FLOOR)
ADAPT_T(addcmul, ct_addcmul, ct_scalar_int(2))
ADAPT_T(addcdiv, ct_addcdiv, ct_scalar_float(0.5))

static const ct_opinfo infos[] = {
    {CT_OPINFO_BINARY(floor_divide), .ref = r_floor_div, .lo = -9, .hi = 9, .dtypes = NUMERIC, .nonzero_b = true,
     .refused = CT_DT(CT_BOOL)},
    {ADAPTED_B(div_floor, div), .ref = r_floor_div, .lo = -9, .hi = 9, .dtypes = NUMERIC, .nonzero_b = true,
     .refused = CT_DT(CT_BOOL)},
    {ADAPTED_B(div_trunc, div), .ref = r_trunc_div, .lo = -9, .hi = 9, .dtypes = NUMERIC, .nonzero_b = true,
     .refused = CT_DT(CT_BOOL)},
    {CT_OPINFO_BINARY(remainder), .ref = r_remainder, .lo = -9, .hi = 9, .dtypes = NUMERIC, .nonzero_b = true,
     .refused = CT_DT(CT_BOOL)},
    {CT_OPINFO_BINARY(fmod), .ref = r_fmod, .lo = -9, .hi = 9, .dtypes = NUMERIC, .nonzero_b = true,
     .refused = CT_DT(CT_BOOL)},
    {CT_OPINFO_BINARY(pow), .ref = r_pow, .lo = -3, .hi = 3, .lo_b = 0, .hi_b = 4.99, .dtypes = NUMERIC,
     .refused = CT_DT(CT_BOOL), .tol = 1e-5},
    {CT_OPINFO_BINARY(atan2), .ref = r_atan2, .lo = -9, .hi = 9, .dtypes = ALL, OUTF},
    {CT_OPINFO_BINARY(hypot), .ref = r_hypot, .lo = -9, .hi = 9, .dtypes = FL, .refused = CT_DTS_INT | CT_DT(CT_BOOL)},
    {CT_OPINFO_BINARY(copysign), .ref = r_copysign, .lo = -9, .hi = 9, .dtypes = ALL, OUTF},
    {CT_OPINFO_BINARY(fmax), .ref = r_fmax, .lo = -9, .hi = 9, .dtypes = ALL},
    {CT_OPINFO_BINARY(fmin), .ref = r_fmin, .lo = -9, .hi = 9, .dtypes = ALL},
    {CT_OPINFO_BINARY(logical_and), .ref = r_and, .lo = -2, .hi = 2, .dtypes = ALL, OUTB, .integer_inputs = true},
    {CT_OPINFO_BINARY(logical_or), .ref = r_or, .lo = -2, .hi = 2, .dtypes = ALL, OUTB, .integer_inputs = true},
    {CT_OPINFO_BINARY(logical_xor), .ref = r_xor, .lo = -2, .hi = 2, .dtypes = ALL, OUTB, .integer_inputs = true},
    {CT_OPINFO_BINARY(bitwise_and), .ref = r_band, .lo = -9, .hi = 9, .dtypes = CT_DTS_INT | CT_DT(CT_BOOL),
     .refused = FL},
    {CT_OPINFO_BINARY(bitwise_or), .ref = r_bor, .lo = -9, .hi = 9, .dtypes = CT_DTS_INT | CT_DT(CT_BOOL),
     .refused = FL},
    {CT_OPINFO_BINARY(bitwise_xor), .ref = r_bxor, .lo = -9, .hi = 9, .dtypes = CT_DTS_INT | CT_DT(CT_BOOL),
     .refused = FL},
    {CT_OPINFO_BINARY(bitwise_left_shift), .ref = r_shl, .lo = -3, .hi = 3, .lo_b = 0, .hi_b = 4.99,
     .dtypes = CT_DTS_INT, .refused = FL | CT_DT(CT_BOOL)},
    {CT_OPINFO_BINARY(bitwise_right_shift), .ref = r_shr, .lo = -99, .hi = 99, .lo_b = 0, .hi_b = 7.99,
     .dtypes = CT_DTS_INT, .refused = FL | CT_DT(CT_BOOL)},
    {CT_OPINFO_BINARY(clamp_min), .ref = r_max, .lo = -9, .hi = 9, .dtypes = ALL},
    {CT_OPINFO_BINARY(clamp_max), .ref = r_min, .lo = -9, .hi = 9, .dtypes = ALL},
    {.name = "clamp_tensor", .op = "clamp", .t = ct_clamp_tensor, .t_ = ct_clamp_tensor_, .t_out = ct_clamp_tensor_out,
     .ref3 = r_clamp, .lo = -9, .hi = 9, .lo_b = -5, .hi_b = 0, .lo_c = 0, .hi_c = 5, .dtypes = NUMERIC,
     .refused = CT_DT(CT_BOOL), .optional = true},
    {CT_OPINFO_TERNARY(lerp), .ref3 = r_lerp, .lo = -9, .hi = 9, .lo_c = 0, .hi_c = 1, .dtypes = FL,
     .refused = CT_DTS_INT | CT_DT(CT_BOOL)},
    {ADAPTED_T(addcmul, addcmul), .ref3 = r_addcmul, .lo = -5, .hi = 5, .dtypes = NUMERIC, .refused = CT_DT(CT_BOOL)},
    {ADAPTED_T(addcdiv, addcdiv), .ref3 = r_addcdiv, .lo = -5, .hi = 5, .lo_c = 0.5, .hi_c = 4, .dtypes = FL,
     .refused = CT_DTS_INT | CT_DT(CT_BOOL)},
    {.name = "where", .t = ct_where, .t_out = ct_where_out, .ref3 = r_where, .lo = -9, .hi = 9, .dtypes = ALL,
     .condition = true},
};

static void test_opinfo(void **state) { ct_opinfo_run(*state); }

int main(void) {
    struct CMUnitTest tests[sizeof infos / sizeof infos[0]];
    size_t n = 0;
    for (size_t i = 0; i < sizeof infos / sizeof infos[0]; i++)
        tests[n++] = (struct CMUnitTest){infos[i].name, test_opinfo, NULL, NULL, (void *)&infos[i]};
    return _cmocka_run_group_tests("binary", tests, n, NULL, NULL);
}
