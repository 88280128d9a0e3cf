/* Run-time choice of the x86 vector ISA (cpu_isa.h). */
#include "cpu_isa.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define CT_CPU_X86 1
#include <cpuid.h>
#endif

int ct_cpu_isa_state = -1; /* not detected yet */

int ct_cpu_vector_level(void) { return ct_cpu_isa_level(); }

bool ct_cpu_has_avx2(void) {
#ifdef CT_CPU_X86
    __builtin_cpu_init();
    /* F16C through cpuid (leaf 1, ECX bit 29): clang's __builtin_cpu_supports does not
     * know the name */
    unsigned a, b, c, d;
    bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
#else
    return false;
#endif
}

bool ct_cpu_has_avx512(void) {
#ifdef CT_CPU_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

bool ct_cpu_is_intel(void) {
#ifdef CT_CPU_X86
    static int known = -1; /* every thread finds the same answer, so a race only repeats it */
    int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_is("intel") ? 1 : 0;
        __atomic_store_n(&known, v, __ATOMIC_RELAXED);
    }
    return v == 1;
#else
    return false;
#endif
}

static int detect(void) {
    int best = ct_cpu_has_avx512() ? CT_ISA_AVX512 : ct_cpu_has_avx2() ? CT_ISA_AVX2 : CT_ISA_BASE;
    const char *cap = getenv("CT_CPU_ISA");
    if (cap) {
        int want = strcmp(cap, "scalar") == 0  ? CT_ISA_BASE
                   : strcmp(cap, "avx2") == 0 ? CT_ISA_AVX2
                                              : CT_ISA_AVX512;
        if (want < best)
            best = want;
    }
    return best;
}

int ct_cpu_isa_detect(void) {
    int v = detect();
    __atomic_store_n(&ct_cpu_isa_state, v, __ATOMIC_RELAXED);
    return v;
}

void ct_cpu_isa_set_level(int level) {
    int best = detect();
    __atomic_store_n(&ct_cpu_isa_state, level < best ? level : best, __ATOMIC_RELAXED);
}
