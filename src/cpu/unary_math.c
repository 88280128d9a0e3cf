/* CPU loops of the unary math ops: sign, exponentials and logarithms, trigonometric
 * and hyperbolic functions, erf family, rounding, predicates, nan_to_num. */
#include "cpu/ew_loops.h"
#include "core/special_math.h"

/* Generic expressions compare unsigned values with 0; that is intended. */
#pragma GCC diagnostic ignored "-Wtype-limits"

/* ---------------------------------------------------------------- sign */

CT_EW_UNARY_LOOP(sign_b, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, x)
CT_EW_UNARY_I(sign, (__typeof__(x))((x > 0) - (x < 0)))
/* NaN has no sign: (0 < NaN) - (NaN < 0) is 0, as in PyTorch. */
CT_EW_UNARY_F(sign, (float)((0.0f < x) - (x < 0.0f)), (double)((0.0 < x) - (x < 0.0)))
const ct_cpu_loop ct_cpu_loops_sign[CT_DTYPE_COUNT] = {CT_EW_B(sign), CT_EW_I(sign), CT_EW_F(sign)};
/* For real dtypes sgn is sign. */
const ct_cpu_loop ct_cpu_loops_sgn[CT_DTYPE_COUNT] = {CT_EW_B(sign), CT_EW_I(sign), CT_EW_F(sign)};

/* ---------------------------------------------------------------- float functions */

#define CT_EW_FLOAT_OP(name, EXPR_F, EXPR_D)                                           \
    CT_EW_UNARY_F(name, EXPR_F, EXPR_D)                                                \
    const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {CT_EW_F(name)};
#define CT_EW_FLOAT_OP_VM(name, VM, EXPR_F, EXPR_D)                                    \
    CT_EW_UNARY_F_VM(name, VM, EXPR_F, EXPR_D)                                         \
    const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {CT_EW_F(name)};

CT_EW_FLOAT_OP_VM(exp2, CT_VM_EXP2, exp2f(x), exp2(x))
CT_EW_FLOAT_OP_VM(expm1, CT_VM_EXPM1, expm1f(x), expm1(x))
CT_EW_FLOAT_OP_VM(log2, CT_VM_LOG2, log2f(x), log2(x))
CT_EW_FLOAT_OP_VM(log10, CT_VM_LOG10, log10f(x), log10(x))
CT_EW_FLOAT_OP_VM(log1p, CT_VM_LOG1P, log1pf(x), log1p(x))
CT_EW_FLOAT_OP(rsqrt, 1.0f / sqrtf(x), 1.0 / sqrt(x))
CT_EW_FLOAT_OP_VM(tan, CT_VM_TAN, tanf(x), tan(x))
CT_EW_FLOAT_OP_VM(asin, CT_VM_ASIN, asinf(x), asin(x))
CT_EW_FLOAT_OP_VM(acos, CT_VM_ACOS, acosf(x), acos(x))
CT_EW_FLOAT_OP_VM(atan, CT_VM_ATAN, atanf(x), atan(x))
CT_EW_FLOAT_OP_VM(sinh, CT_VM_SINH, sinhf(x), sinh(x))
CT_EW_FLOAT_OP_VM(cosh, CT_VM_COSH, coshf(x), cosh(x))
CT_EW_FLOAT_OP_VM(asinh, CT_VM_ASINH, asinhf(x), asinh(x))
CT_EW_FLOAT_OP_VM(acosh, CT_VM_ACOSH, acoshf(x), acosh(x))
CT_EW_FLOAT_OP_VM(atanh, CT_VM_ATANH, atanhf(x), atanh(x))
CT_EW_FLOAT_OP_VM(erf, CT_VM_ERF, erff(x), erf(x))
CT_EW_FLOAT_OP_VM(erfc, CT_VM_ERFC, erfcf(x), erfc(x))
CT_EW_FLOAT_OP(reciprocal, 1.0f / x, 1.0 / x)

/* logit: P->p[0] is eps; eps < 0 means no clamping (PyTorch's eps=None). The clamp
 * keeps NaN (both comparisons are false). */
static inline float logit_f(float x, float eps) {
    if (eps >= 0.0f) {
        float lo = eps, hi = 1.0f - eps;
        x = x < lo ? lo : (x > hi ? hi : x);
    }
    return logf(x / (1.0f - x));
}
static inline double logit_d(double x, double eps) {
    if (eps >= 0.0) {
        double lo = eps, hi = 1.0 - eps;
        x = x < lo ? lo : (x > hi ? hi : x);
    }
    return log(x / (1.0 - x));
}
CT_EW_FLOAT_OP(logit, logit_f(x, (float)P->p[0]), logit_d(x, P->p[0]))

/* Note [erfinv]
 * A first guess from Giles' single-precision approximation ("Approximating the erfinv
 * function", GPU Computing Gems, 2011) is refined by Halley steps on erf, or on erfc
 * for |y| > 0.5, where 1 - |y| is exact and erf(x) - y would cancel. Each step
 * roughly triples the number of correct digits, so two steps from the ~1e-7 guess
 * reach double precision. Past the range the guess was fitted for (|y| closer to 1
 * than float32 can express) it is poorer, and a few more steps are taken. */
static double erfinv_guess(double x) {
    double w = -log((1.0 - x) * (1.0 + x)), p;
    if (w < 5.0) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3.0;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
    }
    return p * x;
}

double ct_erfinv_d(double y) {
    if (isnan(y) || y < -1.0 || y > 1.0)
        return NAN;
    if (y == 1.0 || y == -1.0)
        return copysign(INFINITY, y);
    if (y == 0.0)
        return y; /* keeps -0 */
    double a = fabs(y), x = erfinv_guess(a);
    const double two_over_sqrt_pi = 1.1283791670955126;
    for (int k = 0; k < 8; k++) {
        /* f(x) = erf(x) - a, written through erfc above 0.5 (the same value). */
        double f = a > 0.5 ? (1.0 - a) - erfc(x) : erf(x) - a;
        if (f == 0.0)
            break;
        double u = f / (two_over_sqrt_pi * exp(-x * x));
        double step = u / (1.0 + x * u);
        x -= step;
        if (fabs(step) <= 1e-17 * x)
            break;
    }
    return copysign(x, y);
}
CT_EW_FLOAT_OP(erfinv, (float)ct_erfinv_d((double)x), ct_erfinv_d(x))

/* The gamma family. lgamma_r, not lgamma, which writes the global signgam from every
 * thread. digamma and polygamma (P->p[0] is n) compute in double for every float dtype
 * (Note [Digamma and polygamma] in src/core/special_math.h). */
static inline float lgamma_f(float x) {
    int sign;
    return lgammaf_r(x, &sign);
}
static inline double lgamma_d(double x) {
    int sign;
    return lgamma_r(x, &sign);
}
CT_EW_FLOAT_OP(lgamma, lgamma_f(x), lgamma_d(x))
CT_EW_FLOAT_OP(digamma, (float)ct_digamma_d((double)x), ct_digamma_d(x))
CT_EW_FLOAT_OP(polygamma, (float)ct_polygamma_d((int64_t)P->p[0], (double)x), ct_polygamma_d((int64_t)P->p[0], x))

/* ---------------------------------------------------------------- rounding */

/* Integers round to themselves. */
CT_EW_UNARY_I(ident, x)
CT_EW_UNARY_LOOP(ident_b, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, x)

#define CT_EW_ROUNDING(name, EXPR_F, EXPR_D)                                           \
    CT_EW_UNARY_F(name, EXPR_F, EXPR_D)                                                \
    const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {CT_EW_I(ident), CT_EW_F(name)};
CT_EW_ROUNDING(floor, floorf(x), floor(x))
CT_EW_ROUNDING(ceil, ceilf(x), ceil(x))
CT_EW_ROUNDING(trunc, truncf(x), trunc(x))
/* Halves to even: rint in the default rounding mode. */
CT_EW_ROUNDING(round, rintf(x), rint(x))

/* round(decimals=d): P->p[0] = 10^|d| (rounded to the compute type, as PyTorch),
 * P->p[1] != 0 for negative d. 10^|d| overflowing to inf gives NaN, as in PyTorch.
 * float16/bfloat16 compute in float32 and round to the dtype once, as PyTorch 2.x
 * (1.13 rounded 10^|d| and the scaled value to the dtype too). */
#define ROUND_DEC_FLOAT(x)                                                                \
    (P->p[1] != 0 ? rintf(x / (float)P->p[0]) * (float)P->p[0] : rintf(x * (float)P->p[0]) / (float)P->p[0])
CT_EW_UNARY_LOOP(round_dec_f32, float, float, float, CT_ID, CT_ID, ROUND_DEC_FLOAT(x))
CT_EW_UNARY_LOOP(round_dec_f64, double, double, double, CT_ID, CT_ID,
                 P->p[1] != 0 ? rint(x / P->p[0]) * P->p[0] : rint(x * P->p[0]) / P->p[0])
CT_EW_UNARY_LOOP(round_dec_f16, uint16_t, float, uint16_t, ct_h2f, ct_f2h, ROUND_DEC_FLOAT(x))
CT_EW_UNARY_LOOP(round_dec_bf16, uint16_t, float, uint16_t, ct_b2f, ct_f2b, ROUND_DEC_FLOAT(x))
const ct_cpu_loop ct_cpu_loops_round_decimals[CT_DTYPE_COUNT] = {CT_EW_F(round_dec)};

CT_EW_UNARY_F(frac, x - truncf(x), x - trunc(x))
const ct_cpu_loop ct_cpu_loops_frac[CT_DTYPE_COUNT] = {CT_EW_F(frac)};

/* ---------------------------------------------------------------- square */

/* Integer squares wrap around (bool squares as int64: see the UNARY_SQUARE family). */
CT_EW_UNARY_I(square, CT_WRAP_MUL(x, x))
CT_EW_UNARY_F(square, x * x, x * x)
const ct_cpu_loop ct_cpu_loops_square[CT_DTYPE_COUNT] = {CT_EW_I(square), CT_EW_F(square)};

/* ---------------------------------------------------------------- nan_to_num */

/* P->p[0..2]: the replacements for NaN, +inf and -inf, already resolved to the
 * dtype's defaults. Integers and bool have nothing to replace. */
CT_EW_UNARY_F(nan_to_num,
              x != x ? (float)P->p[0] : (x == INFINITY ? (float)P->p[1] : (x == -INFINITY ? (float)P->p[2] : x)),
              x != x ? P->p[0] : (x == INFINITY ? P->p[1] : (x == -INFINITY ? P->p[2] : x)))
const ct_cpu_loop ct_cpu_loops_nan_to_num[CT_DTYPE_COUNT] = {CT_EW_B(ident), CT_EW_I(ident), CT_EW_F(nan_to_num)};

/* ---------------------------------------------------------------- logical, bitwise, predicates */

CT_EW_UNARY_TO_BOOL(logical_not, x == 0, x == 0)
CT_EW_UNARY_TO_BOOL(isnan, 0, x != x)
CT_EW_UNARY_TO_BOOL(isinf, 0, isinf(x))
CT_EW_UNARY_TO_BOOL(isfinite, 1, isfinite(x))

CT_EW_UNARY_LOOP(bitwise_not_b, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, (uint8_t)!x)
CT_EW_UNARY_I(bitwise_not, (__typeof__(x))~x)
const ct_cpu_loop ct_cpu_loops_bitwise_not[CT_DTYPE_COUNT] = {CT_EW_B(bitwise_not), CT_EW_I(bitwise_not)};
