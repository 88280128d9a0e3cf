/* CPU loops of the unary elementwise ops. */
#include "cpu/ew_loops.h"

/* The generic expressions compare unsigned values with 0; that is intended. */
#pragma GCC diagnostic ignored "-Wtype-limits"

/* Float ops: float32/float64 natively, float16/bfloat16 computed in float32. */
#define CT_FLOAT_UNARY(name, EXPR_F, EXPR_D)                                                  \
    CT_UNARY_LOOP(name##_f32, float, float, CT_ID, CT_ID, EXPR_F)                             \
    CT_UNARY_LOOP(name##_f64, double, double, CT_ID, CT_ID, EXPR_D)                           \
    CT_UNARY_LOOP(name##_f16, uint16_t, float, ct_h2f, ct_f2h, EXPR_F)                        \
    CT_UNARY_LOOP(name##_bf16, uint16_t, float, ct_b2f, ct_f2b, EXPR_F)                       \
    const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {                                 \
        [CT_DTYPE_FLOAT32] = name##_f32, [CT_DTYPE_FLOAT64] = name##_f64,                     \
        [CT_DTYPE_FLOAT16] = name##_f16, [CT_DTYPE_BFLOAT16] = name##_bf16};

/* Ops defined for every numeric dtype, written once with a generic expression. */
#define CT_ALL_UNARY(name, EXPR) CT_ALL_UNARY_B(name, EXPR, NULL)
/* ... with BOOL_LOOP (a loop or NULL) as the bool entry. */
#define CT_ALL_UNARY_B(name, EXPR, BOOL_LOOP)                                                 \
    CT_UNARY_LOOP(name##_u8, uint8_t, uint8_t, CT_ID, CT_ID, EXPR)                            \
    CT_UNARY_LOOP(name##_i8, int8_t, int8_t, CT_ID, CT_ID, EXPR)                              \
    CT_UNARY_LOOP(name##_i16, int16_t, int16_t, CT_ID, CT_ID, EXPR)                           \
    CT_UNARY_LOOP(name##_i32, int32_t, int32_t, CT_ID, CT_ID, EXPR)                           \
    CT_UNARY_LOOP(name##_i64, int64_t, int64_t, CT_ID, CT_ID, EXPR)                           \
    CT_UNARY_LOOP(name##_u16, uint16_t, uint16_t, CT_ID, CT_ID, EXPR)                         \
    CT_UNARY_LOOP(name##_u32, uint32_t, uint32_t, CT_ID, CT_ID, EXPR)                         \
    CT_UNARY_LOOP(name##_u64, uint64_t, uint64_t, CT_ID, CT_ID, EXPR)                         \
    CT_UNARY_LOOP(name##_f32, float, float, CT_ID, CT_ID, EXPR)                               \
    CT_UNARY_LOOP(name##_f64, double, double, CT_ID, CT_ID, EXPR)                             \
    CT_UNARY_LOOP(name##_f16, uint16_t, float, ct_h2f, ct_f2h, EXPR)                          \
    CT_UNARY_LOOP(name##_bf16, uint16_t, float, ct_b2f, ct_f2b, EXPR)                         \
    const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {                                 \
        [CT_DTYPE_BOOL] = BOOL_LOOP,                                                          \
        [CT_DTYPE_UINT8] = name##_u8,   [CT_DTYPE_INT8] = name##_i8,                          \
        [CT_DTYPE_INT16] = name##_i16,  [CT_DTYPE_INT32] = name##_i32,                        \
        [CT_DTYPE_INT64] = name##_i64,  [CT_DTYPE_UINT16] = name##_u16,                       \
        [CT_DTYPE_UINT32] = name##_u32, [CT_DTYPE_UINT64] = name##_u64,                       \
        [CT_DTYPE_FLOAT32] = name##_f32, [CT_DTYPE_FLOAT64] = name##_f64,                     \
        [CT_DTYPE_FLOAT16] = name##_f16, [CT_DTYPE_BFLOAT16] = name##_bf16};

/* Negation wraps, as in PyTorch: unsigned values by C's rule, int32/int64 through
 * their unsigned type (-INT64_MIN is INT64_MIN, where C's signed negation is undefined;
 * the narrower types negate in int and are narrowed back). */
#define WRAP_NEG(x)                                                  \
    _Generic((x), int32_t: (int32_t)(0u - (uint32_t)(x)),            \
                  int64_t: (int64_t)(UINT64_C(0) - (uint64_t)(x)),   \
                  default: -(x))
CT_ALL_UNARY(neg, WRAP_NEG(x))
/* abs of an unsigned value (and of a bool, as PyTorch's CUDA abs) is itself; the
 * generic expression covers them (x < 0 is false). */
CT_UNARY_LOOP(abs_bool, bool, bool, CT_ID, CT_ID, x)
CT_ALL_UNARY_B(abs, x < 0 ? WRAP_NEG(x) : x, abs_bool)
/* relu keeps NaN (NaN > 0 is false, so the comparison form would drop it). */
CT_ALL_UNARY(relu, x > 0 ? x : (x != x ? x : 0))

/* Transcendental float32 loops use vector math where the CPU has it (cpu/vecmath.h). */
#define CT_FLOAT_UNARY_VM(name, VM, EXPR_F, EXPR_D)                                          \
    CT_EW_UNARY_F_VM(name, VM, EXPR_F, EXPR_D)                                               \
    const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {CT_EW_F(name)};

CT_FLOAT_UNARY_VM(exp, CT_VM_EXP, expf(x), exp(x))
CT_FLOAT_UNARY_VM(log, CT_VM_LOG, logf(x), log(x))
CT_FLOAT_UNARY(sqrt, sqrtf(x), sqrt(x))
CT_FLOAT_UNARY_VM(sin, CT_VM_SIN, sinf(x), sin(x))
CT_FLOAT_UNARY_VM(cos, CT_VM_COS, cosf(x), cos(x))
CT_FLOAT_UNARY_VM(tanh, CT_VM_TANH, tanhf(x), tanh(x))
CT_EW_UNARY_F_VMCHAIN(sigmoid, -x, 1.0f / (1.0f + v), 1.0f / (1.0f + expf(-x)), 1.0 / (1.0 + exp(-x)), CT_VM_EXP)
const ct_cpu_loop ct_cpu_loops_sigmoid[CT_DTYPE_COUNT] = {CT_EW_F(sigmoid)};
