/* Run-time choice of the vector math ISA (see vecmath.h). */
#include "cpu/vecmath.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* CPU detection needs no SLEEF (pooling's AVX-512 kernels use it too); the vector
 * math tables do. */
#if defined(__x86_64__) && defined(__GNUC__)
#define CT_CPU_X86 1
#if defined(CT_HAVE_SLEEF)
#define CT_VM_X86 1
#endif
#endif

enum { ISA_UNSET = -1, ISA_SCALAR = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 };

static int isa_state = ISA_UNSET;

static int detect(void) {
    int best = ISA_SCALAR;
#ifdef CT_CPU_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        best = ISA_AVX2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
        best = ISA_AVX512;
#endif
    const char *cap = getenv("CT_CPU_ISA");
    if (cap) {
        int want = strcmp(cap, "scalar") == 0 ? ISA_SCALAR
                   : strcmp(cap, "avx2") == 0 ? ISA_AVX2
                                              : ISA_AVX512;
        if (want < best)
            best = want;
    }
    return best;
}

static int isa(void) {
    /* Every thread computes the same answer, so a race only repeats the work. */
    int v = __atomic_load_n(&isa_state, __ATOMIC_RELAXED);
    if (v == ISA_UNSET) {
        v = detect();
        __atomic_store_n(&isa_state, v, __ATOMIC_RELAXED);
    }
    return v;
}

ct_vm_f32_fn ct_vm_get(ct_vm_op op) {
#ifdef CT_VM_X86
    switch (isa()) {
    case ISA_AVX512: return ct_vm_avx512[op];
    case ISA_AVX2: return ct_vm_avx2[op];
    default: return NULL;
    }
#else
    (void)op;
    (void)isa;
    return NULL;
#endif
}

const ct_vm_red *ct_vm_red_get(void) {
#ifdef CT_VM_X86
    switch (isa()) {
    case ISA_AVX512: return &ct_vm_red_avx512;
    case ISA_AVX2: return &ct_vm_red_avx2;
    default: return NULL;
    }
#else
    return NULL;
#endif
}

/* The ISA called name ("avx2", "avx512") when this build and CPU have it, else -1. */
static int isa_named(const char *name) {
#ifdef CT_VM_X86
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    if (strcmp(name, "avx512") == 0 && avx512)
        return ISA_AVX512;
    if (strcmp(name, "avx2") == 0 && avx2)
        return ISA_AVX2;
#else
    (void)name;
#endif
    return -1;
}

const ct_vm_red *ct_vm_red_for(const char *name) {
#ifdef CT_VM_X86
    switch (isa_named(name)) {
    case ISA_AVX512: return &ct_vm_red_avx512;
    case ISA_AVX2: return &ct_vm_red_avx2;
    }
#else
    (void)isa_named;
#endif
    return NULL;
}

ct_vm_f32_fn ct_vm_get_for(const char *name, ct_vm_op op) {
#ifdef CT_VM_X86
    switch (isa_named(name)) {
    case ISA_AVX512: return ct_vm_avx512[op];
    case ISA_AVX2: return ct_vm_avx2[op];
    }
#else
    (void)name;
    (void)op;
#endif
    return NULL;
}

const char *ct_vm_isa(void) {
#ifdef CT_VM_X86
    int v = isa();
    return v == ISA_AVX512 ? "avx512" : v == ISA_AVX2 ? "avx2" : "scalar";
#else
    (void)isa;
    return "scalar";
#endif
}

int ct_cpu_isa_level(void) {
    return isa();
}

void ct_cpu_isa_set_level(int level) {
    int best = detect();
    __atomic_store_n(&isa_state, level < best ? level : best, __ATOMIC_RELAXED);
}

bool ct_cpu_avx512(void) {
    return isa() == ISA_AVX512;
}
