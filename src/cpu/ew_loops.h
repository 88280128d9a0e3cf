/* Loop generators for the elementwise ops of unary_math.c, activation.c,
 * binary_math.c and ternary.c, and the extra loop tables some ops pick at run time
 * (rounding modes, gelu's tanh form, scalar exponents, ...). */
#ifndef CT_CPU_EW_LOOPS_H
#define CT_CPU_EW_LOOPS_H

#include <stdbool.h>

#include "cpu/loops.h"
#include "cpu/vecmath.h"

/* Tables an op's kernel selects instead of its default one (src/meta/ew_args.c). */
extern const ct_cpu_loop ct_cpu_loops_div_trunc[CT_DTYPE_COUNT];
extern const ct_cpu_loop ct_cpu_loops_round_decimals[CT_DTYPE_COUNT];
extern const ct_cpu_loop ct_cpu_loops_gelu_tanh[CT_DTYPE_COUNT];
extern const ct_cpu_loop ct_cpu_loops_pow_scalar[CT_DTYPE_COUNT];
extern const ct_cpu_loop ct_cpu_loops_lerp_scalar[CT_DTYPE_COUNT];
/* Sets *(int *)params when operand 2 (a divisor) holds a zero; integer dtypes only. */
extern const ct_cpu_loop ct_cpu_loops_any_zero[CT_DTYPE_COUNT];

/* Table entries by dtype group: CT_EW_F(name) for name_f32/_f64/_f16/_bf16, ... */
#define CT_EW_F(name)                                                                   \
    [CT_DTYPE_FLOAT32] = name##_f32, [CT_DTYPE_FLOAT64] = name##_f64,                   \
    [CT_DTYPE_FLOAT16] = name##_f16, [CT_DTYPE_BFLOAT16] = name##_bf16
#define CT_EW_I(name)                                                                   \
    [CT_DTYPE_UINT8] = name##_u8, [CT_DTYPE_INT8] = name##_i8, [CT_DTYPE_INT16] = name##_i16, \
    [CT_DTYPE_INT32] = name##_i32, [CT_DTYPE_INT64] = name##_i64, [CT_DTYPE_UINT16] = name##_u16, \
    [CT_DTYPE_UINT32] = name##_u32, [CT_DTYPE_UINT64] = name##_u64
#define CT_EW_B(name) [CT_DTYPE_BOOL] = name##_b

/* Unary loop with an output type of its own (OT; bool results). */
#define CT_EW_UNARY_LOOP(fname, T, CT, OT, LOAD, STORE, EXPR)                           \
    static inline __attribute__((always_inline)) OT fname##_at(CT x, const ct_loop_params *P) { \
        (void)x;                                                                        \
        (void)P;                                                                        \
        return STORE(EXPR);                                                             \
    }                                                                                   \
    CT_LOOP_BODY(fname, CT_EW_PARAMS) {                                                 \
        const ct_loop_params *P = params;                                               \
        (void)P;                                                                        \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T)) {                \
            OT *restrict o = (OT *)d[0];                                                \
            const T *restrict a = (const T *)d[1];                                      \
            CT_CONTIG_RUN(OT, o, n, sizeof(OT) + sizeof(T), i, fname##_at(LOAD(a[i]), P)); \
        } else {                                                                        \
            for (int64_t i = 0; i < n; i++) {                                           \
                CT x = LOAD(*(const T *)(d[1] + i * s[1]));                             \
                (void)x;                                                                \
                *(OT *)(d[0] + i * s[0]) = STORE(EXPR);                                 \
            }                                                                           \
        }                                                                               \
    }                                                                                   \
    CT_LOOP_ISA(fname, CT_EW_PARAMS, CT_EW_ARGS)

/* Float unary loops; float16/bfloat16 compute in float32. EXPR_F/EXPR_D see x and P.
 * In-place calls pass the same pointer as input and output, so no restrict there. */
#define CT_EW_UNARY_F(name, EXPR_F, EXPR_D)                                             \
    CT_EW_UNARY_LOOP(name##_f32, float, float, float, CT_ID, CT_ID, EXPR_F)             \
    CT_EW_UNARY_LOOP(name##_f64, double, double, double, CT_ID, CT_ID, EXPR_D)          \
    CT_EW_UNARY_LOOP(name##_f16, uint16_t, float, uint16_t, ct_h2f, ct_f2h, EXPR_F)     \
    CT_EW_UNARY_LOOP(name##_bf16, uint16_t, float, uint16_t, ct_b2f, ct_f2b, EXPR_F)

/* The same, with the float32 contiguous case handed to a vector math routine (SLEEF,
 * chosen for this CPU at run time) when one exists. */
#define CT_EW_UNARY_F_VM(name, VM, EXPR_F, EXPR_D)                                      \
    CT_EW_UNARY_LOOP(name##_f32_scalar, float, float, float, CT_ID, CT_ID, EXPR_F)      \
    static void name##_f32(char **d, const int64_t *s, int64_t n, const void *params) { \
        ct_vm_f32_fn vm;                                                                \
        if (s[0] == 4 && s[1] == 4 && (vm = ct_vm_get(VM)) != NULL)                     \
            vm((float *)d[0], (const float *)d[1], n);                                  \
        else                                                                            \
            name##_f32_scalar(d, s, n, params);                                         \
    }                                                                                   \
    CT_EW_UNARY_LOOP(name##_f64, double, double, double, CT_ID, CT_ID, EXPR_D)          \
    CT_EW_UNARY_LOOP(name##_f16, uint16_t, float, uint16_t, ct_h2f, ct_f2h, EXPR_F)     \
    CT_EW_UNARY_LOOP(name##_bf16, uint16_t, float, uint16_t, ct_b2f, ct_f2b, EXPR_F)

/* Float unary loops whose float32 contiguous case runs a chain of vector math
 * routines over chunks: t = PRE (of x), then each routine of the chain on t, then
 * out = POST (of x and v = t). Activations built on exp, erf or tanh use it. */
#define CT_VM_CHUNK 512
#define CT_EW_UNARY_F_VMCHAIN(name, PRE, POST, EXPR_F, EXPR_D, ...)                     \
    CT_EW_UNARY_LOOP(name##_f32_scalar, float, float, float, CT_ID, CT_ID, EXPR_F)      \
    static void name##_f32(char **d, const int64_t *s, int64_t n, const void *params) { \
        static const ct_vm_op chain[] = {__VA_ARGS__};                                  \
        enum { NCHAIN = sizeof chain / sizeof chain[0] };                               \
        const ct_loop_params *P = params;                                               \
        (void)P;                                                                        \
        ct_vm_f32_fn fns[NCHAIN];                                                       \
        bool vec = s[0] == 4 && s[1] == 4;                                              \
        for (int k = 0; vec && k < NCHAIN; k++)                                         \
            vec = (fns[k] = ct_vm_get(chain[k])) != NULL;                               \
        if (!vec) {                                                                     \
            name##_f32_scalar(d, s, n, params);                                         \
            return;                                                                     \
        }                                                                               \
        float *o = (float *)d[0];                                                       \
        const float *a = (const float *)d[1];                                           \
        float t[CT_VM_CHUNK];                                                           \
        for (int64_t i0 = 0; i0 < n; i0 += CT_VM_CHUNK) {                               \
            int64_t m = n - i0 < CT_VM_CHUNK ? n - i0 : CT_VM_CHUNK;                    \
            for (int64_t i = 0; i < m; i++) {                                           \
                float x = a[i0 + i];                                                    \
                t[i] = PRE;                                                             \
            }                                                                           \
            for (int k = 0; k < NCHAIN; k++)                                            \
                fns[k](t, t, m);                                                        \
            for (int64_t i = 0; i < m; i++) {                                           \
                float x = a[i0 + i], v = t[i];                                          \
                (void)x;                                                                \
                o[i0 + i] = POST;                                                       \
            }                                                                           \
        }                                                                               \
    }                                                                                   \
    CT_EW_UNARY_LOOP(name##_f64, double, double, double, CT_ID, CT_ID, EXPR_D)          \
    CT_EW_UNARY_LOOP(name##_f16, uint16_t, float, uint16_t, ct_h2f, ct_f2h, EXPR_F)     \
    CT_EW_UNARY_LOOP(name##_bf16, uint16_t, float, uint16_t, ct_b2f, ct_f2b, EXPR_F)

/* Integer unary loops (not bool); EXPR sees x of the storage type. */
#define CT_EW_UNARY_I(name, EXPR)                                                       \
    CT_EW_UNARY_LOOP(name##_u8, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, EXPR)          \
    CT_EW_UNARY_LOOP(name##_i8, int8_t, int8_t, int8_t, CT_ID, CT_ID, EXPR)             \
    CT_EW_UNARY_LOOP(name##_i16, int16_t, int16_t, int16_t, CT_ID, CT_ID, EXPR)         \
    CT_EW_UNARY_LOOP(name##_i32, int32_t, int32_t, int32_t, CT_ID, CT_ID, EXPR)         \
    CT_EW_UNARY_LOOP(name##_i64, int64_t, int64_t, int64_t, CT_ID, CT_ID, EXPR)         \
    CT_EW_UNARY_LOOP(name##_u16, uint16_t, uint16_t, uint16_t, CT_ID, CT_ID, EXPR)      \
    CT_EW_UNARY_LOOP(name##_u32, uint32_t, uint32_t, uint32_t, CT_ID, CT_ID, EXPR)      \
    CT_EW_UNARY_LOOP(name##_u64, uint64_t, uint64_t, uint64_t, CT_ID, CT_ID, EXPR)

/* Unary loops with a bool (uint8) result over every dtype, normalised to 0 and 1 (a
 * bool tensor holds nothing else; glibc's isinf(-inf) is -1). */
#define CT_EW_UNARY_TO_BOOL(name, EXPR_I, EXPR_F)                                       \
    CT_EW_UNARY_LOOP(name##_b, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, (uint8_t)((EXPR_I) != 0)) \
    CT_EW_UNARY_LOOP(name##_u8, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, (uint8_t)((EXPR_I) != 0)) \
    CT_EW_UNARY_LOOP(name##_i8, int8_t, int8_t, uint8_t, CT_ID, CT_ID, (uint8_t)((EXPR_I) != 0)) \
    CT_EW_UNARY_LOOP(name##_i16, int16_t, int16_t, uint8_t, CT_ID, CT_ID, (uint8_t)((EXPR_I) != 0)) \
    CT_EW_UNARY_LOOP(name##_i32, int32_t, int32_t, uint8_t, CT_ID, CT_ID, (uint8_t)((EXPR_I) != 0)) \
    CT_EW_UNARY_LOOP(name##_i64, int64_t, int64_t, uint8_t, CT_ID, CT_ID, (uint8_t)((EXPR_I) != 0)) \
    CT_EW_UNARY_LOOP(name##_u16, uint16_t, uint16_t, uint8_t, CT_ID, CT_ID, (uint8_t)((EXPR_I) != 0)) \
    CT_EW_UNARY_LOOP(name##_u32, uint32_t, uint32_t, uint8_t, CT_ID, CT_ID, (uint8_t)((EXPR_I) != 0)) \
    CT_EW_UNARY_LOOP(name##_u64, uint64_t, uint64_t, uint8_t, CT_ID, CT_ID, (uint8_t)((EXPR_I) != 0)) \
    CT_EW_UNARY_LOOP(name##_f32, float, float, uint8_t, CT_ID, CT_ID, (uint8_t)((EXPR_F) != 0)) \
    CT_EW_UNARY_LOOP(name##_f64, double, double, uint8_t, CT_ID, CT_ID, (uint8_t)((EXPR_F) != 0)) \
    CT_EW_UNARY_LOOP(name##_f16, uint16_t, float, uint8_t, ct_h2f, CT_ID, (uint8_t)((EXPR_F) != 0)) \
    CT_EW_UNARY_LOOP(name##_bf16, uint16_t, float, uint8_t, ct_b2f, CT_ID, (uint8_t)((EXPR_F) != 0)) \
    const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {CT_EW_B(name), CT_EW_I(name), CT_EW_F(name)};

/* Binary loops (CT_BINARY_LOOP of loops.h) by dtype group. */
#define CT_EW_BINARY_F(name, EXPR_F, EXPR_D)                                            \
    CT_BINARY_LOOP(name##_f32, float, float, float, CT_ID, CT_ID, EXPR_F)               \
    CT_BINARY_LOOP(name##_f64, double, double, double, CT_ID, CT_ID, EXPR_D)            \
    CT_BINARY_LOOP(name##_f16, uint16_t, float, uint16_t, ct_h2f, ct_f2h, EXPR_F)       \
    CT_BINARY_LOOP(name##_bf16, uint16_t, float, uint16_t, ct_b2f, ct_f2b, EXPR_F)
/* Integer loops; EXPR_S/EXPR_U(T, OTHER, BITS) give the expression for signed and
 * unsigned types (OTHER: the type of the other signedness, BITS: the width). */
#define CT_EW_BINARY_I(name, EXPR_S, EXPR_U)                                            \
    CT_BINARY_LOOP(name##_u8, uint8_t, uint8_t, uint8_t, CT_ID, CT_ID, EXPR_U(uint8_t, int8_t, 8))       \
    CT_BINARY_LOOP(name##_i8, int8_t, int8_t, int8_t, CT_ID, CT_ID, EXPR_S(int8_t, uint8_t, 8))          \
    CT_BINARY_LOOP(name##_i16, int16_t, int16_t, int16_t, CT_ID, CT_ID, EXPR_S(int16_t, uint16_t, 16))   \
    CT_BINARY_LOOP(name##_i32, int32_t, int32_t, int32_t, CT_ID, CT_ID, EXPR_S(int32_t, uint32_t, 32))   \
    CT_BINARY_LOOP(name##_i64, int64_t, int64_t, int64_t, CT_ID, CT_ID, EXPR_S(int64_t, uint64_t, 64))   \
    CT_BINARY_LOOP(name##_u16, uint16_t, uint16_t, uint16_t, CT_ID, CT_ID, EXPR_U(uint16_t, int16_t, 16)) \
    CT_BINARY_LOOP(name##_u32, uint32_t, uint32_t, uint32_t, CT_ID, CT_ID, EXPR_U(uint32_t, int32_t, 32)) \
    CT_BINARY_LOOP(name##_u64, uint64_t, uint64_t, uint64_t, CT_ID, CT_ID, EXPR_U(uint64_t, int64_t, 64))

/* Ternary loop over a, b, c of storage type T (compute type CT). The common clamp and
 * lerp cases (b and c broadcast scalars) hoist their loads out of the loop. */
#define CT_EW_TERNARY_LOOP(fname, T, CT, LOAD, STORE, EXPR)                             \
    static inline __attribute__((always_inline)) T fname##_at(CT a, CT b, CT c, const ct_loop_params *P) { \
        (void)P;                                                                        \
        return STORE(EXPR);                                                             \
    }                                                                                   \
    CT_LOOP_BODY(fname, CT_EW_PARAMS) {                                                 \
        const ct_loop_params *P = params;                                               \
        (void)P;                                                                        \
        const int64_t z = (int64_t)sizeof(T);                                           \
        if (s[0] == z && s[1] == z && s[2] == z && s[3] == z) {                         \
            T *o = (T *)d[0];                                                           \
            const T *pa = (const T *)d[1], *pb = (const T *)d[2], *pc = (const T *)d[3]; \
            CT_CONTIG_RUN(T, o, n, 4 * z, i, fname##_at(LOAD(pa[i]), LOAD(pb[i]), LOAD(pc[i]), P)); \
        } else if (s[0] == z && s[1] == z && s[2] == 0 && s[3] == 0) {                  \
            T *o = (T *)d[0];                                                           \
            const T *pa = (const T *)d[1];                                              \
            const CT b = LOAD(*(const T *)d[2]), c = LOAD(*(const T *)d[3]);            \
            CT_CONTIG_RUN(T, o, n, 2 * z, i, fname##_at(LOAD(pa[i]), b, c, P));          \
        } else {                                                                        \
            for (int64_t i = 0; i < n; i++) {                                           \
                CT a = LOAD(*(const T *)(d[1] + i * s[1]));                             \
                CT b = LOAD(*(const T *)(d[2] + i * s[2]));                             \
                CT c = LOAD(*(const T *)(d[3] + i * s[3]));                             \
                *(T *)(d[0] + i * s[0]) = STORE(EXPR);                                  \
            }                                                                           \
        }                                                                               \
    }                                                                                   \
    CT_LOOP_ISA(fname, CT_EW_PARAMS, CT_EW_ARGS)

#define CT_EW_TERNARY_F(name, EXPR)                                                     \
    CT_EW_TERNARY_LOOP(name##_f32, float, float, CT_ID, CT_ID, EXPR)                    \
    CT_EW_TERNARY_LOOP(name##_f64, double, double, CT_ID, CT_ID, EXPR)                  \
    CT_EW_TERNARY_LOOP(name##_f16, uint16_t, float, ct_h2f, ct_f2h, EXPR)               \
    CT_EW_TERNARY_LOOP(name##_bf16, uint16_t, float, ct_b2f, ct_f2b, EXPR)
#define CT_EW_TERNARY_I(name, EXPR)                                                     \
    CT_EW_TERNARY_LOOP(name##_u8, uint8_t, uint8_t, CT_ID, CT_ID, EXPR)                 \
    CT_EW_TERNARY_LOOP(name##_i8, int8_t, int8_t, CT_ID, CT_ID, EXPR)                   \
    CT_EW_TERNARY_LOOP(name##_i16, int16_t, int16_t, CT_ID, CT_ID, EXPR)                \
    CT_EW_TERNARY_LOOP(name##_i32, int32_t, int32_t, CT_ID, CT_ID, EXPR)                \
    CT_EW_TERNARY_LOOP(name##_i64, int64_t, int64_t, CT_ID, CT_ID, EXPR)                \
    CT_EW_TERNARY_LOOP(name##_u16, uint16_t, uint16_t, CT_ID, CT_ID, EXPR)              \
    CT_EW_TERNARY_LOOP(name##_u32, uint32_t, uint32_t, CT_ID, CT_ID, EXPR)              \
    CT_EW_TERNARY_LOOP(name##_u64, uint64_t, uint64_t, CT_ID, CT_ID, EXPR)

/* Two's complement wrap-around without signed-overflow UB. */
#define CT_WRAP_ADD(a, b) ((__typeof__(a))((uint64_t)(a) + (uint64_t)(b)))
#define CT_WRAP_MUL(a, b) ((__typeof__(a))((uint64_t)(a) * (uint64_t)(b)))

/* erfinv in double precision (unary_math.c). */
double ct_erfinv_d(double y);

#endif /* CT_CPU_EW_LOOPS_H */
