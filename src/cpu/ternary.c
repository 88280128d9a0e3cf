/* CPU loops of the ternary elementwise ops: clamp, lerp, addcmul, addcdiv, where.
 * Operands are (out, a, b, c); float16/bfloat16 compute in float32. */
#include "cpu/ew_loops.h"

#pragma GCC diagnostic ignored "-Wtype-limits"

#define TABLE_IF(name) const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {CT_EW_I(name), CT_EW_F(name)};

/* clamp(a, min=b, max=c): a NaN bound gives NaN, a NaN input stays NaN, and min is
 * applied first, so min > max gives max (all as PyTorch). */
#define CLAMP_I(a, lo, hi) (((a) < (lo) ? (lo) : (a)) > (hi) ? (hi) : ((a) < (lo) ? (lo) : (a)))
#define CLAMP_F(a, lo, hi) ((lo) != (lo) ? (lo) : ((hi) != (hi) ? (hi) : ((a) != (a) ? (a) : CLAMP_I(a, lo, hi))))
CT_EW_TERNARY_I(clamp, CLAMP_I(a, b, c))
CT_EW_TERNARY_F(clamp, CLAMP_F(a, b, c))
TABLE_IF(clamp)

/* lerp(a, end=b, weight=w), PyTorch's form: exact at both ends, stable in between,
 * and one fused multiply-add, as PyTorch's vectorized x86 kernel (so results match
 * it to the bit). */
static inline float lerp_f(float a, float b, float w) {
    return fabsf(w) < 0.5f ? fmaf(w, b - a, a) : fmaf(w - 1.0f, b - a, b);
}
static inline double lerp_d(double a, double b, double w) {
    return fabs(w) < 0.5 ? fma(w, b - a, a) : fma(w - 1.0, b - a, b);
}
#define LERP(a, b, w) _Generic((a), double: lerp_d, default: lerp_f)(a, b, w)
CT_EW_TERNARY_F(lerp, LERP(a, b, c))
const ct_cpu_loop ct_cpu_loops_lerp[CT_DTYPE_COUNT] = {CT_EW_F(lerp)};
/* The scalar-weight form: two operands, the weight in P->p[0]. */
CT_BINARY_LOOP(lerp_scalar_f32, float, float, float, CT_ID, CT_ID, LERP(a, b, (float)P->p[0]))
CT_BINARY_LOOP(lerp_scalar_f64, double, double, double, CT_ID, CT_ID, LERP(a, b, P->p[0]))
CT_BINARY_LOOP(lerp_scalar_f16, uint16_t, float, uint16_t, ct_h2f, ct_f2h, LERP(a, b, (float)P->p[0]))
CT_BINARY_LOOP(lerp_scalar_bf16, uint16_t, float, uint16_t, ct_b2f, ct_f2b, LERP(a, b, (float)P->p[0]))
const ct_cpu_loop ct_cpu_loops_lerp_scalar[CT_DTYPE_COUNT] = {CT_EW_F(lerp_scalar)};

/* addcmul: a + value * b * c and addcdiv: a + value * b / c, evaluated left to right
 * as PyTorch does. Integers wrap; value is P->ialpha for them, P->alpha for floats. */
#define ADDCMUL_I(a, b, c) CT_WRAP_ADD(a, CT_WRAP_MUL(CT_WRAP_MUL((__typeof__(a))P->ialpha, b), c))
CT_EW_TERNARY_I(addcmul, ADDCMUL_I(a, b, c))
CT_EW_TERNARY_F(addcmul, a + (__typeof__(a))P->alpha * b * c)
TABLE_IF(addcmul)
CT_EW_TERNARY_F(addcdiv, a + (__typeof__(a))P->alpha * b / c)
const ct_cpu_loop ct_cpu_loops_addcdiv[CT_DTYPE_COUNT] = {CT_EW_F(addcdiv)};

/* where(cond, a, b): cond is bool or uint8 (nonzero selects a); values are moved as
 * bytes of their width, so one loop serves every dtype of that size. */
#define CT_WHERE_LOOP(fname, T)                                                             \
    CT_LOOP_BODY(fname, CT_EW_PARAMS) {                                                     \
        (void)params;                                                                       \
        const int64_t z = (int64_t)sizeof(T);                                               \
        if (s[0] == z && s[1] == 1 && s[2] == z && s[3] == z) {                             \
            T *o = (T *)d[0];                                                               \
            const uint8_t *c = (const uint8_t *)d[1];                                       \
            const T *pa = (const T *)d[2], *pb = (const T *)d[3];                           \
            for (int64_t i = 0; i < n; i++)                                                 \
                o[i] = c[i] ? pa[i] : pb[i];                                                \
        } else {                                                                            \
            for (int64_t i = 0; i < n; i++) {                                               \
                uint8_t c = *(const uint8_t *)(d[1] + i * s[1]);                            \
                *(T *)(d[0] + i * s[0]) = c ? *(const T *)(d[2] + i * s[2]) : *(const T *)(d[3] + i * s[3]); \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
    CT_LOOP_ISA(fname, CT_EW_PARAMS, CT_EW_ARGS)
CT_WHERE_LOOP(where_1, uint8_t)
CT_WHERE_LOOP(where_2, uint16_t)
CT_WHERE_LOOP(where_4, uint32_t)
CT_WHERE_LOOP(where_8, uint64_t)
const ct_cpu_loop ct_cpu_loops_where[CT_DTYPE_COUNT] = {
    [CT_DTYPE_BOOL] = where_1,    [CT_DTYPE_UINT8] = where_1,   [CT_DTYPE_INT8] = where_1,
    [CT_DTYPE_INT16] = where_2,   [CT_DTYPE_UINT16] = where_2,  [CT_DTYPE_FLOAT16] = where_2,
    [CT_DTYPE_BFLOAT16] = where_2, [CT_DTYPE_INT32] = where_4,  [CT_DTYPE_UINT32] = where_4,
    [CT_DTYPE_FLOAT32] = where_4, [CT_DTYPE_INT64] = where_8,   [CT_DTYPE_UINT64] = where_8,
    [CT_DTYPE_FLOAT64] = where_8,
};
