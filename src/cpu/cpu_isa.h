/* The x86 vector ISA the CPU kernels use, chosen once at run time, and the macro that
 * compiles one loop for each ISA (Note [Loops per ISA]). */
#ifndef CT_CORE_CPU_ISA_H
#define CT_CORE_CPU_ISA_H

#include <stdbool.h>

/* The levels (CT_ISA_BASE, CT_ISA_AVX2, CT_ISA_AVX512), CT_ISA_VARIANTS (whether this
 * build compiles the AVX2 and AVX-512 variants) and the target regions
 * (CT_TARGET_AVX2_BEGIN ... CT_TARGET_END) are in the extension header, for kernels
 * over the op API too. */
#include "ctorch/ext.h"

/* This CPU's level. CT_CPU_ISA=scalar|avx2|avx512 in the environment caps it, for
 * benchmarks and for checking the narrower paths. */
static inline int ct_cpu_isa_level(void);
/* The level, detected on first use (ct_cpu_isa_level's slow path). */
int ct_cpu_isa_detect(void);
/* The detected level, -1 before the first use; read on every loop call. */
extern int ct_cpu_isa_state;
static inline int ct_cpu_isa_level(void) {
    /* Every thread detects the same answer, so a race only repeats the work. */
    int v = __atomic_load_n(&ct_cpu_isa_state, __ATOMIC_RELAXED);
    return v >= 0 ? v : ct_cpu_isa_detect();
}
/* For tests: use level from now on (never above what the CPU has and CT_CPU_ISA
 * allows), to compare the ISAs in one process. */
void ct_cpu_isa_set_level(int level);
/* Whether the CPU has AVX-512 F/DQ/BW/VL, whatever the cap says. */
bool ct_cpu_has_avx512(void);
/* Whether it has AVX2, FMA and F16C, whatever the cap says. */
bool ct_cpu_has_avx2(void);
/* Whether the CPU is Intel's: software prefetches that help its sequential reads slow
 * AMD's Zen 4 down (Note [Sum streams] in cpu/reduce_loops.c). */
bool ct_cpu_is_intel(void);

/* Note [Loops per ISA]
 * The library is built for the baseline x86-64 (SSE2), so a plain C loop vectorizes
 * four floats wide, and most integer and bit operations (unsigned compares, 64-bit
 * conversions, narrowing) not at all. So each elementwise and cast loop is compiled
 * three times from one body: for the baseline, for AVX2 and for AVX-512 (GCC's target
 * attribute, with the body inlined into each), and the function the tables hold
 * picks one per call by ct_cpu_isa_level(). The ISO C build never contracts a * b + c
 * into an FMA, and the compiler keeps the C semantics of every operation when it
 * vectorizes, so all variants compute the same bits; test_loops_isa checks this for
 * every elementwise op and cast at each level.
 *
 * CT_LOOP_BODY(name, params) opens the body; CT_LOOP_ISA(name, params, args)
 * then defines name itself, with the variants (args: params' names, in order). */
#define CT_LOOP_BODY(name, params) static inline __attribute__((always_inline)) void name##_body params

#ifdef CT_ISA_VARIANTS
#define CT_LOOP_ISA(name, params, args)                                                          \
    static __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) void name##_avx512 params { \
        name##_body args;                                                                        \
    }                                                                                            \
    static __attribute__((target("avx2,fma"))) void name##_avx2 params { name##_body args; }      \
    static void name params {                                                                    \
        switch (ct_cpu_isa_level()) {                                                            \
        case CT_ISA_AVX512: name##_avx512 args; break;                                           \
        case CT_ISA_AVX2: name##_avx2 args; break;                                               \
        default: name##_body args; break;                                                        \
        }                                                                                        \
    }
#else
#define CT_LOOP_ISA(name, params, args) \
    static void name params { name##_body args; }
#endif

/* The variant of function f (f, f_avx2, f_avx512: made in target regions, below) for
 * this CPU's level. */
#ifdef CT_ISA_VARIANTS
#define CT_ISA_PICK(f)                                                                          \
    (ct_cpu_isa_level() == CT_ISA_AVX512 ? f##_avx512 : ct_cpu_isa_level() == CT_ISA_AVX2 ? f##_avx2 : f)
#else
#define CT_ISA_PICK(f) f
#endif

#endif /* CT_CORE_CPU_ISA_H */
