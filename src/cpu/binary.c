/* CPU loops of the binary elementwise ops and comparisons. */
#include "cpu/loops.h"

/* One binary op over every dtype (bool included, computed as uint8). EXPR sees a, b
 * and P (the ct_loop_params); ALPHA is P->ialpha for integers and P->alpha for floats. */
#define CT_BINARY_ALL(name, EXPR_I, EXPR_F)                                                        \
    CT_BINARY_LOOP(name##_b, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, (uint8_t)((EXPR_I) != 0))     \
    CT_BINARY_LOOP(name##_u8, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, EXPR_I)                      \
    CT_BINARY_LOOP(name##_i8, int8_t, int8_t, int8_t, CT_ID, CT_ID, EXPR_I)                         \
    CT_BINARY_LOOP(name##_i16, int16_t, int16_t, int16_t, CT_ID, CT_ID, EXPR_I)                     \
    CT_BINARY_LOOP(name##_i32, int32_t, int32_t, int32_t, CT_ID, CT_ID, EXPR_I)                     \
    CT_BINARY_LOOP(name##_i64, int64_t, int64_t, int64_t, CT_ID, CT_ID, EXPR_I)                     \
    CT_BINARY_LOOP(name##_u16, uint16_t, uint16_t, uint16_t, CT_ID, CT_ID, EXPR_I)                  \
    CT_BINARY_LOOP(name##_u32, uint32_t, uint32_t, uint32_t, CT_ID, CT_ID, EXPR_I)                  \
    CT_BINARY_LOOP(name##_u64, uint64_t, uint64_t, uint64_t, CT_ID, CT_ID, EXPR_I)                  \
    CT_BINARY_LOOP(name##_f32, float, float, float, CT_ID, CT_ID, EXPR_F)                           \
    CT_BINARY_LOOP(name##_f64, double, double, double, CT_ID, CT_ID, EXPR_F)                        \
    CT_BINARY_LOOP(name##_f16, uint16_t, float, uint16_t, ct_h2f, ct_f2h, EXPR_F)                   \
    CT_BINARY_LOOP(name##_bf16, uint16_t, float, uint16_t, ct_b2f, ct_f2b, EXPR_F)                  \
    const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {                                      \
        [CT_DTYPE_BOOL] = name##_b,      [CT_DTYPE_UINT8] = name##_u8,   [CT_DTYPE_INT8] = name##_i8, \
        [CT_DTYPE_INT16] = name##_i16,   [CT_DTYPE_INT32] = name##_i32,  [CT_DTYPE_INT64] = name##_i64, \
        [CT_DTYPE_UINT16] = name##_u16,  [CT_DTYPE_UINT32] = name##_u32, [CT_DTYPE_UINT64] = name##_u64, \
        [CT_DTYPE_FLOAT32] = name##_f32, [CT_DTYPE_FLOAT64] = name##_f64,                           \
        [CT_DTYPE_FLOAT16] = name##_f16, [CT_DTYPE_BFLOAT16] = name##_bf16};

/* Float-only ops (the family promotes integers first). */
#define CT_BINARY_FLOAT(name, EXPR_F, EXPR_D)                                                      \
    CT_BINARY_LOOP(name##_f32, float, float, float, CT_ID, CT_ID, EXPR_F)                           \
    CT_BINARY_LOOP(name##_f64, double, double, double, CT_ID, CT_ID, EXPR_D)                        \
    CT_BINARY_LOOP(name##_f16, uint16_t, float, uint16_t, ct_h2f, ct_f2h, EXPR_F)                   \
    CT_BINARY_LOOP(name##_bf16, uint16_t, float, uint16_t, ct_b2f, ct_f2b, EXPR_F)                  \
    const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {                                      \
        [CT_DTYPE_FLOAT32] = name##_f32, [CT_DTYPE_FLOAT64] = name##_f64,                           \
        [CT_DTYPE_FLOAT16] = name##_f16, [CT_DTYPE_BFLOAT16] = name##_bf16};

/* Comparisons: any compute dtype, bool output. */
#define CT_COMPARE(name, OP)                                                                        \
    CT_BINARY_LOOP(name##_b, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, a OP b)                       \
    CT_BINARY_LOOP(name##_u8, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, a OP b)                      \
    CT_BINARY_LOOP(name##_i8, int8_t, int8_t, uint8_t, CT_ID, CT_ID, a OP b)                        \
    CT_BINARY_LOOP(name##_i16, int16_t, int16_t, uint8_t, CT_ID, CT_ID, a OP b)                     \
    CT_BINARY_LOOP(name##_i32, int32_t, int32_t, uint8_t, CT_ID, CT_ID, a OP b)                     \
    CT_BINARY_LOOP(name##_i64, int64_t, int64_t, uint8_t, CT_ID, CT_ID, a OP b)                     \
    CT_BINARY_LOOP(name##_u16, uint16_t, uint16_t, uint8_t, CT_ID, CT_ID, a OP b)                   \
    CT_BINARY_LOOP(name##_u32, uint32_t, uint32_t, uint8_t, CT_ID, CT_ID, a OP b)                   \
    CT_BINARY_LOOP(name##_u64, uint64_t, uint64_t, uint8_t, CT_ID, CT_ID, a OP b)                   \
    CT_BINARY_LOOP(name##_f32, float, float, uint8_t, CT_ID, CT_ID, a OP b)                         \
    CT_BINARY_LOOP(name##_f64, double, double, uint8_t, CT_ID, CT_ID, a OP b)                       \
    CT_BINARY_LOOP(name##_f16, uint16_t, float, uint8_t, ct_h2f, CT_ID, a OP b)                     \
    CT_BINARY_LOOP(name##_bf16, uint16_t, float, uint8_t, ct_b2f, CT_ID, a OP b)                    \
    const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {                                      \
        [CT_DTYPE_BOOL] = name##_b,      [CT_DTYPE_UINT8] = name##_u8,   [CT_DTYPE_INT8] = name##_i8, \
        [CT_DTYPE_INT16] = name##_i16,   [CT_DTYPE_INT32] = name##_i32,  [CT_DTYPE_INT64] = name##_i64, \
        [CT_DTYPE_UINT16] = name##_u16,  [CT_DTYPE_UINT32] = name##_u32, [CT_DTYPE_UINT64] = name##_u64, \
        [CT_DTYPE_FLOAT32] = name##_f32, [CT_DTYPE_FLOAT64] = name##_f64,                           \
        [CT_DTYPE_FLOAT16] = name##_f16, [CT_DTYPE_BFLOAT16] = name##_bf16};

/* Integer arithmetic wraps in two's complement (as PyTorch); the casts through the
 * unsigned type keep C from calling signed overflow undefined. */
#define WRAP_ADD(a, b) ((__typeof__(a))((uint64_t)(a) + (uint64_t)(b)))
#define WRAP_SUB(a, b) ((__typeof__(a))((uint64_t)(a) - (uint64_t)(b)))
#define WRAP_MUL(a, b) ((__typeof__(a))((uint64_t)(a) * (uint64_t)(b)))

CT_BINARY_ALL(add, WRAP_ADD(a, WRAP_MUL(b, P->ialpha)), a + (__typeof__(a))P->alpha * b)
CT_BINARY_ALL(sub, WRAP_SUB(a, WRAP_MUL(b, P->ialpha)), a - (__typeof__(a))P->alpha * b)
CT_BINARY_ALL(mul, WRAP_MUL(a, b), a * b)
/* maximum/minimum propagate NaN from either side. */
CT_BINARY_ALL(maximum, a > b ? a : b, (a != a || b != b) ? (a != a ? a : b) : (a > b ? a : b))
CT_BINARY_ALL(minimum, a < b ? a : b, (a != a || b != b) ? (a != a ? a : b) : (a < b ? a : b))
CT_BINARY_FLOAT(div, a / b, a / b)

CT_COMPARE(eq, ==)
CT_COMPARE(ne, !=)
CT_COMPARE(lt, <)
CT_COMPARE(le, <=)
CT_COMPARE(gt, >)
CT_COMPARE(ge, >=)
