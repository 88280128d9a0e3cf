/* What converting one element from one dtype to another means: the rules every cast
 * follows (Note [Casts]), as inline functions and per-dtype load/store macros. The
 * core's scalar helpers (ct_load_double, ct_store_scalar, ...) and the CPU backend's
 * cast loops (src/cpu/copy.c) are built from these, so a single element and a whole
 * tensor convert to the same bits. */
#ifndef CT_CAST_H
#define CT_CAST_H

#include <stdint.h>
#include <string.h>

/* Note [Casts]
 * Conversions follow PyTorch's CPU casts (checked bit for bit against PyTorch 1.13 by
 * tests/test_dtype.c; docs/dtypes.md lists the rules and the departures):
 * - to bool: x != 0 (NaN is true, -0.0 is false);
 * - between integers: two's-complement wrap-around (modulo 2^N);
 * - float to integer: truncation toward zero. C leaves NaN, inf and out-of-range values
 *   undefined; ctorch defines them as x86-64 PyTorch consistently behaves:
 *     int8, int16, int32: through int32 (the 32-bit truncating instruction): NaN, inf
 *       and values outside int32 become INT32_MIN, then wrap (so 0 for int8/int16);
 *     uint8, int64: through int64 (c10 converts to uint8 via int64 on purpose): NaN,
 *       inf and values outside int64 become INT64_MIN, then wrap;
 *     uint16, uint32 (no such dtypes in PyTorch 1.13): through int64, as uint8;
 *     uint64: values in [2^63, 2^64) convert directly, others as int64.
 * - integer to float: rounded to nearest even; to float16/bfloat16 through float32
 *   (a double rounding, as PyTorch does), and float64 to float16/bfloat16 too.
 * - NaN to bfloat16 is always 0x7fc0 (c10::BFloat16's; PyTorch's vectorised contiguous
 *   float32 path writes 0xffff instead, its strided path 0x7fc0).
 * - same dtype: bytes are moved, never converted, so NaN payloads survive. */
/* Written without branches (both sides of each choice computed, the conversion done on
 * an in-range stand-in) so contiguous loops vectorise. */
static inline int64_t f2i64(double v) {
    int ok = (v > -9223372036854775808.0) & (v < 9223372036854775808.0);
    int64_t r = (int64_t)(ok ? v : 0.0);
    return ok ? r : INT64_MIN;
}
static inline int32_t f2i32(double v) {
    int ok = (v > -2147483649.0) & (v < 2147483648.0);
    int32_t r = (int32_t)(ok ? v : 0.0);
    return ok ? r : INT32_MIN;
}
/* The same for a float value: no float lies between -2^31 - 1 and -2^31, and staying in
 * float lets the loop convert four lanes per instruction instead of two. */
static inline int32_t f2i32f(float v) {
    int ok = (v >= -2147483648.0f) & (v < 2147483648.0f);
    int32_t r = (int32_t)(ok ? v : 0.0f);
    return ok ? r : INT32_MIN;
}
static inline uint64_t f2u64(double v) {
    if (v >= 9223372036854775808.0 && v < 18446744073709551616.0)
        return (uint64_t)v;
    return (uint64_t)f2i64(v);
}

/* Note [Branch-free half conversions]
 * The cast loops inline their own float16/bfloat16 conversions instead of calling
 * ct_half_to_float and friends (src/core/dtype.c) per element: every case is computed and
 * the right one selected, so a contiguous loop vectorises. They give the same bits as
 * dtype.c's for every input (tests/test_copy_fast.c checks all 65536 halves and a sweep
 * of floats): round to nearest even, overflow to inf, subnormals, the canonical NaNs
 * float -> half 0x7e00 | sign and float -> bfloat16 0x7fc0, half NaN payloads kept and
 * made quiet. */
static inline uint32_t f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* c (0 or 1) ? a : b, as masks */
static inline uint32_t pick(uint32_t c, uint32_t a, uint32_t b) { return (a & (0u - c)) | (b & (c - 1u)); }
static inline float half_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = (uint32_t)(h & 0x7fffu) << 13; /* exponent and mantissa in float's place */
    uint32_t e = em & 0x0f800000u;
    uint32_t normal = em + 0x38000000u; /* rebias 15 -> 127 */
    /* inf/NaN: exponent all ones; a NaN keeps its payload and gets the quiet bit */
    uint32_t special = em | 0x7f800000u | ((uint32_t)((em & 0x007fe000u) != 0) << 22);
    /* subnormal or zero: mant * 2^-24, exactly, by subtracting 2^-14 from 2^-14 + mant * 2^-24 */
    uint32_t sub = f32_to_bits(bits_to_f32(em + 0x38800000u) - bits_to_f32(0x38800000u));
    uint32_t r = pick(e == 0x0f800000u, special, pick(e == 0, sub, normal));
    return bits_to_f32(sign | r);
}
static inline uint16_t f32_to_half(float f) {
    uint32_t x = f32_to_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    /* subnormal half: adding 0.5 makes the FPU round at half's subnormal step (2^-24);
     * the input's sign is dropped so -0.0 + 0.5 cannot differ */
    uint32_t sub = f32_to_bits(bits_to_f32(ax) + 0.5f) - 0x3f000000u;
    /* normal: rebias the exponent (-112 << 23) and round to even */
    uint32_t normal = (ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13;
    uint32_t r = pick(ax > 0x7f800000u, 0x7e00u, pick(ax >= 0x477ff000u, 0x7c00u, pick(ax < 0x38800000u, sub, normal)));
    return (uint16_t)(sign | r);
}
static inline float bf16_to_f32(uint16_t b) { return bits_to_f32((uint32_t)b << 16); }
static inline uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_to_bits(f);
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return (uint16_t)pick((x & 0x7fffffffu) > 0x7f800000u, 0x7fc0u, rounded);
}

/* Load to a "compute" value: floats widen to float/double, half types to float. */
#define LOAD_CT_DTYPE_BOOL(p) (*(const uint8_t *)(p) != 0)
#define LOAD_CT_DTYPE_UINT8(p) (*(const uint8_t *)(p))
#define LOAD_CT_DTYPE_INT8(p) (*(const int8_t *)(p))
#define LOAD_CT_DTYPE_INT16(p) (*(const int16_t *)(p))
#define LOAD_CT_DTYPE_INT32(p) (*(const int32_t *)(p))
#define LOAD_CT_DTYPE_INT64(p) (*(const int64_t *)(p))
#define LOAD_CT_DTYPE_UINT16(p) (*(const uint16_t *)(p))
#define LOAD_CT_DTYPE_UINT32(p) (*(const uint32_t *)(p))
#define LOAD_CT_DTYPE_UINT64(p) (*(const uint64_t *)(p))
#define LOAD_CT_DTYPE_FLOAT16(p) half_to_f32(*(const uint16_t *)(p))
#define LOAD_CT_DTYPE_BFLOAT16(p) bf16_to_f32(*(const uint16_t *)(p))
#define LOAD_CT_DTYPE_FLOAT32(p) (*(const float *)(p))
#define LOAD_CT_DTYPE_FLOAT64(p) (*(const double *)(p))

/* Is the source a floating type (needs the float-to-integer rules)? 2: its compute
 * value is a float (float32, float16, bfloat16), 1: a double. */
#define ISF_CT_DTYPE_BOOL 0
#define ISF_CT_DTYPE_UINT8 0
#define ISF_CT_DTYPE_INT8 0
#define ISF_CT_DTYPE_INT16 0
#define ISF_CT_DTYPE_INT32 0
#define ISF_CT_DTYPE_INT64 0
#define ISF_CT_DTYPE_UINT16 0
#define ISF_CT_DTYPE_UINT32 0
#define ISF_CT_DTYPE_UINT64 0
#define ISF_CT_DTYPE_FLOAT16 2
#define ISF_CT_DTYPE_BFLOAT16 2
#define ISF_CT_DTYPE_FLOAT32 2
#define ISF_CT_DTYPE_FLOAT64 1

/* Store a compute value v (of a source that is floating when F is non-zero). */
#define STORE_INT(T, v, F) ((F) ? (T)f2i64((double)(v)) : (T)(v))
#define STORE_INT32(T, v, F) ((F) == 2 ? (T)f2i32f((float)(v)) : (F) ? (T)f2i32((double)(v)) : (T)(v))
#define STORE_CT_DTYPE_BOOL(p, v, F) (*(uint8_t *)(p) = (uint8_t)((v) != 0))
#define STORE_CT_DTYPE_UINT8(p, v, F) (*(uint8_t *)(p) = STORE_INT(uint8_t, v, F))
#define STORE_CT_DTYPE_INT8(p, v, F) (*(int8_t *)(p) = STORE_INT32(int8_t, v, F))
#define STORE_CT_DTYPE_INT16(p, v, F) (*(int16_t *)(p) = STORE_INT32(int16_t, v, F))
#define STORE_CT_DTYPE_INT32(p, v, F) (*(int32_t *)(p) = STORE_INT32(int32_t, v, F))
#define STORE_CT_DTYPE_INT64(p, v, F) (*(int64_t *)(p) = STORE_INT(int64_t, v, F))
#define STORE_CT_DTYPE_UINT16(p, v, F) (*(uint16_t *)(p) = STORE_INT(uint16_t, v, F))
#define STORE_CT_DTYPE_UINT32(p, v, F) (*(uint32_t *)(p) = STORE_INT(uint32_t, v, F))
#define STORE_CT_DTYPE_UINT64(p, v, F) (*(uint64_t *)(p) = (F) ? f2u64((double)(v)) : (uint64_t)(v))
#define STORE_CT_DTYPE_FLOAT16(p, v, F) (*(uint16_t *)(p) = f32_to_half((float)(v)))
#define STORE_CT_DTYPE_BFLOAT16(p, v, F) (*(uint16_t *)(p) = f32_to_bf16((float)(v)))
#define STORE_CT_DTYPE_FLOAT32(p, v, F) (*(float *)(p) = (float)(v))
#define STORE_CT_DTYPE_FLOAT64(p, v, F) (*(double *)(p) = (double)(v))

/* Element sizes, for the contiguous branch's constant strides. */
#define SZ_CT_DTYPE_BOOL 1
#define SZ_CT_DTYPE_UINT8 1
#define SZ_CT_DTYPE_INT8 1
#define SZ_CT_DTYPE_INT16 2
#define SZ_CT_DTYPE_INT32 4
#define SZ_CT_DTYPE_INT64 8
#define SZ_CT_DTYPE_UINT16 2
#define SZ_CT_DTYPE_UINT32 4
#define SZ_CT_DTYPE_UINT64 8
#define SZ_CT_DTYPE_FLOAT16 2
#define SZ_CT_DTYPE_BFLOAT16 2
#define SZ_CT_DTYPE_FLOAT32 4
#define SZ_CT_DTYPE_FLOAT64 8

#endif /* CT_CAST_H */
