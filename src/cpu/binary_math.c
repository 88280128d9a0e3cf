/* CPU loops of the binary elementwise ops: rounding divisions, remainders, pow,
 * atan2/hypot/copysign, fmax/fmin, logical and bitwise ops, shifts, clamp_min/max.
 *
 * Integer divisors were checked for zero before any loop runs (the kernel reports
 * ZeroDivisionError), so the integer loops only guard the MIN / -1 overflow, which
 * wraps as two's complement arithmetic does. */
#include "cpu/ew_loops.h"

#pragma GCC diagnostic ignored "-Wtype-limits"

#define TABLE_IF(name) const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {CT_EW_I(name), CT_EW_F(name)};
#define TABLE_BIF(name) \
    const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {CT_EW_B(name), CT_EW_I(name), CT_EW_F(name)};

/* ---------------------------------------------------------------- divisions */

/* a / b toward zero; b == -1 negates through the unsigned type (MIN / -1 wraps). */
#define S_DIV_TRUNC(T, U, BITS) (b == -1 ? (T)(0u - (U)a) : (T)(a / b))
#define U_DIV_TRUNC(T, S, BITS) (T)(a / b)
/* Floor division on integers: one less than the truncated quotient when the signs
 * differ and the division is inexact. */
#define S_DIV_FLOOR(T, U, BITS)                                                          \
    (b == -1 ? (T)(0u - (U)a) : (T)(a / b - (((a % b) != 0) && ((a < 0) != (b < 0)))))
#define U_DIV_FLOOR(T, S, BITS) (T)(a / b)

/* Floor division on floats, as PyTorch: from fmod, so that a == b * q + r holds as
 * closely as floats allow, then rounded to the nearest integer; b == 0 gives a / b. */
static inline double div_floor_d(double a, double b) {
    if (b == 0)
        return a / b;
    double mod = fmod(a, b);
    double div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0))
        div -= 1;
    if (div == 0)
        return copysign(0.0, a / b);
    double fl = floor(div);
    if (div - fl > 0.5)
        fl += 1.0;
    return fl;
}
static inline float div_floor_f(float a, float b) {
    if (b == 0)
        return a / b;
    float mod = fmodf(a, b);
    float div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0))
        div -= 1;
    if (div == 0)
        return copysignf(0.0f, a / b);
    float fl = floorf(div);
    if (div - fl > 0.5f)
        fl += 1.0f;
    return fl;
}

CT_EW_BINARY_I(div_trunc, S_DIV_TRUNC, U_DIV_TRUNC)
CT_EW_BINARY_F(div_trunc, truncf(a / b), trunc(a / b))
const ct_cpu_loop ct_cpu_loops_div_trunc[CT_DTYPE_COUNT] = {CT_EW_I(div_trunc), CT_EW_F(div_trunc)};

/* floor_divide is div(rounding_mode='floor'). */
CT_EW_BINARY_I(floor_divide, S_DIV_FLOOR, U_DIV_FLOOR)
CT_EW_BINARY_F(floor_divide, div_floor_f(a, b), div_floor_d(a, b))
TABLE_IF(floor_divide)

/* remainder: the sign of the divisor (Python's %); fmod: the sign of the dividend. */
#define S_REM(T, U, BITS) (b == -1 ? (T)0 : (T)(a % b + ((a % b != 0 && ((a % b < 0) != (b < 0))) ? b : 0)))
#define U_REM(T, S, BITS) (T)(a % b)
#define S_FMOD(T, U, BITS) (b == -1 ? (T)0 : (T)(a % b))
static inline double rem_d(double a, double b) {
    double m = fmod(a, b);
    if (m != 0 && (b < 0) != (m < 0))
        m += b;
    return m;
}
static inline float rem_f(float a, float b) {
    float m = fmodf(a, b);
    if (m != 0 && (b < 0) != (m < 0))
        m += b;
    return m;
}
CT_EW_BINARY_I(remainder, S_REM, U_REM)
CT_EW_BINARY_F(remainder, rem_f(a, b), rem_d(a, b))
TABLE_IF(remainder)
CT_EW_BINARY_I(fmod, S_FMOD, U_REM)
CT_EW_BINARY_F(fmod, fmodf(a, b), fmod(a, b))
TABLE_IF(fmod)

/* ---------------------------------------------------------------- pow */

/* Integer powers by squaring with wrap-around. A negative exponent gives 1 for base 1,
 * +-1 for base -1 and 0 otherwise (1 / base truncated), as PyTorch. */
static inline uint64_t powi_u(uint64_t base, uint64_t e) {
    uint64_t r = 1;
    while (e) {
        if (e & 1)
            r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}
static inline int64_t powi_s(int64_t base, int64_t e) {
    if (e < 0) {
        if (base == 1)
            return 1;
        if (base == -1)
            return (e & 1) ? -1 : 1;
        return 0;
    }
    return (int64_t)powi_u((uint64_t)base, (uint64_t)e);
}
#define S_POW(T, U, BITS) (T)powi_s(a, b)
#define U_POW(T, S, BITS) (T)powi_u(a, b)
CT_EW_BINARY_I(pow, S_POW, U_POW)
CT_EW_BINARY_F(pow, powf(a, b), pow(a, b))
TABLE_IF(pow)

/* pow(tensor, scalar) on floats, P->p[0] the exponent: PyTorch's shortcuts for the
 * common exponents (x*x for 2, sqrt for 0.5, ...), which differ from pow() in the last
 * bit or at -0 and -inf. The loop ignores operand 2 (the wrapped scalar). */
#define CT_POW_SCALAR_LOOP(fname, T, CT, LOAD, STORE, SQRT, POW)                          \
    static void fname(char **d, const int64_t *s, int64_t n, const void *params) {        \
        const ct_loop_params *P = params;                                                 \
        const CT e = (CT)P->p[0];                                                         \
        const CT one = 1;                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                 \
            CT x = LOAD(*(const T *)(d[1] + i * s[1])), r;                                \
            if (e == 2)                                                                   \
                r = x * x;                                                                \
            else if (e == 3)                                                              \
                r = x * x * x;                                                            \
            else if (e == 0.5)                                                            \
                r = SQRT(x);                                                              \
            else if (e == -0.5)                                                           \
                r = one / SQRT(x);                                                        \
            else if (e == -1)                                                             \
                r = one / x;                                                              \
            else if (e == -2)                                                             \
                r = one / (x * x);                                                        \
            else                                                                          \
                r = POW(x, e);                                                            \
            *(T *)(d[0] + i * s[0]) = STORE(r);                                           \
        }                                                                                 \
    }
CT_POW_SCALAR_LOOP(pow_scalar_f32, float, float, CT_ID, CT_ID, sqrtf, powf)
CT_POW_SCALAR_LOOP(pow_scalar_f64, double, double, CT_ID, CT_ID, sqrt, pow)
CT_POW_SCALAR_LOOP(pow_scalar_f16, uint16_t, float, ct_h2f, ct_f2h, sqrtf, powf)
CT_POW_SCALAR_LOOP(pow_scalar_bf16, uint16_t, float, ct_b2f, ct_f2b, sqrtf, powf)
const ct_cpu_loop ct_cpu_loops_pow_scalar[CT_DTYPE_COUNT] = {CT_EW_F(pow_scalar)};

/* ---------------------------------------------------------------- float-only */

CT_EW_BINARY_F(atan2, atan2f(a, b), atan2(a, b))
const ct_cpu_loop ct_cpu_loops_atan2[CT_DTYPE_COUNT] = {CT_EW_F(atan2)};
CT_EW_BINARY_F(hypot, hypotf(a, b), hypot(a, b))
const ct_cpu_loop ct_cpu_loops_hypot[CT_DTYPE_COUNT] = {CT_EW_F(hypot)};
CT_EW_BINARY_F(copysign, copysignf(a, b), copysign(a, b))
const ct_cpu_loop ct_cpu_loops_copysign[CT_DTYPE_COUNT] = {CT_EW_F(copysign)};

/* ---------------------------------------------------------------- fmax, fmin, clamp_min/max */

/* fmax/fmin ignore a NaN operand; clamp_min/clamp_max propagate it. */
#define MAX_I(T, O, BITS) (T)(a > b ? a : b)
#define MIN_I(T, O, BITS) (T)(a < b ? a : b)
CT_BINARY_LOOP(fmax_b, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, a > b ? a : b)
CT_EW_BINARY_I(fmax, MAX_I, MAX_I)
CT_EW_BINARY_F(fmax, fmaxf(a, b), fmax(a, b))
TABLE_BIF(fmax)
CT_BINARY_LOOP(fmin_b, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, a < b ? a : b)
CT_EW_BINARY_I(fmin, MIN_I, MIN_I)
CT_EW_BINARY_F(fmin, fminf(a, b), fmin(a, b))
TABLE_BIF(fmin)

#define NAN_MAX(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : ((a) < (b) ? (b) : (a)))
#define NAN_MIN(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : ((a) > (b) ? (b) : (a)))
CT_BINARY_LOOP(clamp_min_b, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, a > b ? a : b)
CT_EW_BINARY_I(clamp_min, MAX_I, MAX_I)
CT_EW_BINARY_F(clamp_min, NAN_MAX(a, b), NAN_MAX(a, b))
TABLE_BIF(clamp_min)
CT_BINARY_LOOP(clamp_max_b, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, a < b ? a : b)
CT_EW_BINARY_I(clamp_max, MIN_I, MIN_I)
CT_EW_BINARY_F(clamp_max, NAN_MIN(a, b), NAN_MIN(a, b))
TABLE_BIF(clamp_max)

/* ---------------------------------------------------------------- logical (COMPARE family: bool out) */

#define CT_EW_LOGICAL(name, EXPR)                                                          \
    CT_BINARY_LOOP(name##_b, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, EXPR)                \
    CT_BINARY_LOOP(name##_u8, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, EXPR)               \
    CT_BINARY_LOOP(name##_i8, int8_t, int8_t, uint8_t, CT_ID, CT_ID, EXPR)                 \
    CT_BINARY_LOOP(name##_i16, int16_t, int16_t, uint8_t, CT_ID, CT_ID, EXPR)              \
    CT_BINARY_LOOP(name##_i32, int32_t, int32_t, uint8_t, CT_ID, CT_ID, EXPR)              \
    CT_BINARY_LOOP(name##_i64, int64_t, int64_t, uint8_t, CT_ID, CT_ID, EXPR)              \
    CT_BINARY_LOOP(name##_u16, uint16_t, uint16_t, uint8_t, CT_ID, CT_ID, EXPR)            \
    CT_BINARY_LOOP(name##_u32, uint32_t, uint32_t, uint8_t, CT_ID, CT_ID, EXPR)            \
    CT_BINARY_LOOP(name##_u64, uint64_t, uint64_t, uint8_t, CT_ID, CT_ID, EXPR)            \
    CT_BINARY_LOOP(name##_f32, float, float, uint8_t, CT_ID, CT_ID, EXPR)                  \
    CT_BINARY_LOOP(name##_f64, double, double, uint8_t, CT_ID, CT_ID, EXPR)                \
    CT_BINARY_LOOP(name##_f16, uint16_t, float, uint8_t, ct_h2f, CT_ID, EXPR)              \
    CT_BINARY_LOOP(name##_bf16, uint16_t, float, uint8_t, ct_b2f, CT_ID, EXPR)             \
    TABLE_BIF(name)
/* NaN is nonzero, so it counts as true. */
CT_EW_LOGICAL(logical_and, (uint8_t)((a != 0) & (b != 0)))
CT_EW_LOGICAL(logical_or, (uint8_t)((a != 0) | (b != 0)))
CT_EW_LOGICAL(logical_xor, (uint8_t)((a != 0) ^ (b != 0)))

/* ---------------------------------------------------------------- bitwise and shifts */

#define BIT_AND(T, O, BITS) (T)(a & b)
#define BIT_OR(T, O, BITS) (T)(a | b)
#define BIT_XOR(T, O, BITS) (T)(a ^ b)
#define CT_EW_BITWISE(name, EXPR, OPB)                                                     \
    CT_BINARY_LOOP(name##_b, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, (uint8_t)(a OPB b))  \
    CT_EW_BINARY_I(name, EXPR, EXPR)                                                       \
    const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {CT_EW_B(name), CT_EW_I(name)};
CT_EW_BITWISE(bitwise_and, BIT_AND, &)
CT_EW_BITWISE(bitwise_or, BIT_OR, |)
CT_EW_BITWISE(bitwise_xor, BIT_XOR, ^)

/* Note [Shifts past the width]
 * C leaves shifts by a negative count or by the width or more undefined. PyTorch
 * (2.1 and later) defines them: a left shift gives 0, a right shift of a signed value
 * fills with the sign bit (0 or -1), of an unsigned value gives 0. A count is read as
 * signed, so 200 as a uint8 count is negative. Left shifts go through the unsigned
 * type so bits shifted into the sign are not overflow. */
#define S_SHL(T, U, BITS) ((b < 0 || b >= BITS) ? (T)0 : (T)((U)a << b))
#define U_SHL(T, S, BITS) (((S)b < 0 || b >= BITS) ? (T)0 : (T)((uint64_t)a << b))
#define S_SHR(T, U, BITS) ((b < 0 || b >= BITS - 1) ? (T)(a >> (BITS - 1)) : (T)(a >> b))
#define U_SHR(T, S, BITS) (((S)b < 0 || b >= BITS) ? (T)0 : (T)(a >> b))
CT_EW_BINARY_I(bitwise_left_shift, S_SHL, U_SHL)
const ct_cpu_loop ct_cpu_loops_bitwise_left_shift[CT_DTYPE_COUNT] = {CT_EW_I(bitwise_left_shift)};
CT_EW_BINARY_I(bitwise_right_shift, S_SHR, U_SHR)
const ct_cpu_loop ct_cpu_loops_bitwise_right_shift[CT_DTYPE_COUNT] = {CT_EW_I(bitwise_right_shift)};

/* ---------------------------------------------------------------- zero divisors */

#define CT_ANY_ZERO(fname, T)                                                              \
    static void fname(char **d, const int64_t *s, int64_t n, const void *params) {         \
        int found = 0;                                                                     \
        for (int64_t i = 0; i < n; i++)                                                    \
            found |= *(const T *)(d[2] + i * s[2]) == 0;                                   \
        if (found)                                                                         \
            __atomic_store_n((int *)params, 1, __ATOMIC_RELAXED);                          \
    }
CT_ANY_ZERO(any_zero_u8, uint8_t)
CT_ANY_ZERO(any_zero_i8, int8_t)
CT_ANY_ZERO(any_zero_i16, int16_t)
CT_ANY_ZERO(any_zero_i32, int32_t)
CT_ANY_ZERO(any_zero_i64, int64_t)
CT_ANY_ZERO(any_zero_u16, uint16_t)
CT_ANY_ZERO(any_zero_u32, uint32_t)
CT_ANY_ZERO(any_zero_u64, uint64_t)
const ct_cpu_loop ct_cpu_loops_any_zero[CT_DTYPE_COUNT] = {CT_EW_I(any_zero)};
