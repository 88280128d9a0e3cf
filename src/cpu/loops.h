/* Inner-loop building blocks for the CPU elementwise kernels. */
#ifndef CT_CPU_LOOPS_H
#define CT_CPU_LOOPS_H

#include <math.h>
#include <string.h>

#include "cpu/iter.h"
#include "cpu/stream.h"
#include "cpu/cpu_isa.h"
#include "meta/elementwise.h"
#include "meta/op_info.h"


/* Per-op loop tables of the elementwise families, indexed by compute dtype (NULL:
 * dtype not supported). */
#define CT_LOOPS_DECL(name) extern const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT];
#define CT_KERNEL_DECL_UNARY_FLOAT(name) CT_LOOPS_DECL(name)
#define CT_KERNEL_DECL_UNARY_SAME(name) CT_LOOPS_DECL(name)
#define CT_KERNEL_DECL_BINARY_ARITH(name) CT_LOOPS_DECL(name)
#define CT_KERNEL_DECL_BINARY_FLOAT(name) CT_LOOPS_DECL(name)
#define CT_KERNEL_DECL_COMPARE(name) CT_LOOPS_DECL(name)
#define CT_KERNEL_DECL_CUSTOM(name)
#define CT_KERNEL_DECL_STRUCTURED(name)
#define CT_KERNEL_DECL_COMPOSITE(name)
#define CT_KERNEL_DECL_BACKEND(name)
#define CT_KERNEL_DECL_REDUCE(name)
#define CT_KERNEL_DECL_SCAN(name)
#define CT_KERNEL_DECL_VIEW(name)
#define CT_KERNEL_DECL_COPY(name)
#define CT_KERNEL_DECL_FACTORY(name)
#define CT_KERNEL_DECL_RANDOM(name)
#define CT_KERNEL_DECL_UNARY_BOOL(name) CT_LOOPS_DECL(name)
#define CT_KERNEL_DECL_UNARY_SQUARE(name) CT_LOOPS_DECL(name)
#define CT_KERNEL_DECL_BINARY_DIV(name) CT_LOOPS_DECL(name)
#define CT_KERNEL_DECL_TERNARY_ARITH(name) CT_LOOPS_DECL(name)
#define CT_KERNEL_DECL_WHERE(name) CT_LOOPS_DECL(name)
#define CT_OP(name, sig, family, flags) CT_KERNEL_DECL_##family(name)
#include "ctorch/ops.def"
#undef CT_OP

static inline float ct_h2f(uint16_t h) { return ct_half_to_float(h); }
static inline uint16_t ct_f2h(float f) { return ct_float_to_half(f); }
static inline float ct_b2f(uint16_t b) { return ct_bfloat16_to_float(b); }
static inline uint16_t ct_f2b(float f) { return ct_float_to_bfloat16(f); }

/* Every elementwise loop has this signature and is compiled once per vector ISA
 * (Note [Loops per ISA] in src/cpu/cpu_isa.h). */
#define CT_EW_PARAMS (char **d, const int64_t *s, int64_t n, const void *params)
#define CT_EW_ARGS (d, s, n, params)

/* Unary loop over storage type T computing in C type CT (x is the loaded value).
 * The contiguous case is a plain indexed loop the compiler can vectorize. */
#define CT_UNARY_LOOP(fname, T, CT, LOAD, STORE, EXPR)                                    \
    static inline __attribute__((always_inline)) T fname##_at(CT x, const ct_loop_params *P) { \
        (void)P;                                                                          \
        return STORE(EXPR);                                                               \
    }                                                                                     \
    CT_LOOP_BODY(fname, CT_EW_PARAMS) {                                                   \
        const ct_loop_params *P = params;                                                 \
        (void)P;                                                                          \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {                   \
            T *restrict o = (T *)d[0];                                                    \
            const T *restrict a = (const T *)d[1];                                        \
            CT_CONTIG_RUN(T, o, n, 2 * sizeof(T), i, fname##_at(LOAD(a[i]), P));         \
        } else {                                                                          \
            for (int64_t i = 0; i < n; i++) {                                             \
                CT x = LOAD(*(const T *)(d[1] + i * s[1]));                               \
                *(T *)(d[0] + i * s[0]) = STORE(EXPR);                                    \
            }                                                                             \
        }                                                                                 \
    }                                                                                     \
    CT_LOOP_ISA(fname, CT_EW_PARAMS, CT_EW_ARGS)

/* Binary loop: inputs of storage type T (compute type CT), output of type OT. */
#define CT_BINARY_LOOP(fname, T, CT, OT, LOAD, STORE, EXPR)                               \
    static inline __attribute__((always_inline)) OT fname##_at(CT a, CT b, const ct_loop_params *P) { \
        (void)P;                                                                          \
        return STORE(EXPR);                                                               \
    }                                                                                     \
    CT_LOOP_BODY(fname, CT_EW_PARAMS) {                                                   \
        const ct_loop_params *P = params;                                                 \
        (void)P;                                                                          \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T) &&                  \
            s[2] == (int64_t)sizeof(T)) {                                                 \
            OT *restrict o = (OT *)d[0];                                                  \
            const T *restrict pa = (const T *)d[1];                                       \
            const T *restrict pb = (const T *)d[2];                                       \
            CT_CONTIG_RUN(OT, o, n, sizeof(OT) + 2 * sizeof(T), i,                        \
                          fname##_at(LOAD(pa[i]), LOAD(pb[i]), P));                       \
        } else if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T) && s[2] == 0) { \
            OT *restrict o = (OT *)d[0];                                                  \
            const T *restrict pa = (const T *)d[1];                                       \
            const CT b = LOAD(*(const T *)d[2]);                                          \
            CT_CONTIG_RUN(OT, o, n, sizeof(OT) + sizeof(T), i, fname##_at(LOAD(pa[i]), b, P)); \
        } else {                                                                          \
            for (int64_t i = 0; i < n; i++) {                                             \
                CT a = LOAD(*(const T *)(d[1] + i * s[1]));                               \
                CT b = LOAD(*(const T *)(d[2] + i * s[2]));                               \
                *(OT *)(d[0] + i * s[0]) = STORE(EXPR);                                   \
            }                                                                             \
        }                                                                                 \
    }                                                                                     \
    CT_LOOP_ISA(fname, CT_EW_PARAMS, CT_EW_ARGS)

#define CT_ID(x) (x)

#endif /* CT_CPU_LOOPS_H */
