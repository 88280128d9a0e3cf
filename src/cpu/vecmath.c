/* Run-time choice of the vector math ISA (see vecmath.h). */
#include "cpu/vecmath.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The ISA choice itself lives in src/cpu/cpu_isa.c (the cast loops use it too); the
 * vector math tables need SLEEF. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(CT_HAVE_SLEEF)
#define CT_VM_X86 1
#endif

ct_vm_f32_fn ct_vm_get(ct_vm_op op) {
#ifdef CT_VM_X86
    switch (ct_cpu_isa_level()) {
    case CT_ISA_AVX512: return ct_vm_avx512[op];
    case CT_ISA_AVX2: return ct_vm_avx2[op];
    default: return NULL;
    }
#else
    (void)op;
    return NULL;
#endif
}

const ct_vm_red *ct_vm_red_get(void) {
#ifdef CT_VM_X86
    switch (ct_cpu_isa_level()) {
    case CT_ISA_AVX512: return &ct_vm_red_avx512;
    case CT_ISA_AVX2: return &ct_vm_red_avx2;
    default: return NULL;
    }
#else
    return NULL;
#endif
}

/* The ISA called name ("avx2", "avx512") when this build and CPU have it, else -1. */
static int isa_named(const char *name) {
#ifdef CT_VM_X86
    if (strcmp(name, "avx512") == 0 && ct_cpu_has_avx512())
        return CT_ISA_AVX512;
    if (strcmp(name, "avx2") == 0 && ct_cpu_has_avx2())
        return CT_ISA_AVX2;
#else
    (void)name;
#endif
    return -1;
}

const ct_vm_red *ct_vm_red_for(const char *name) {
#ifdef CT_VM_X86
    switch (isa_named(name)) {
    case CT_ISA_AVX512: return &ct_vm_red_avx512;
    case CT_ISA_AVX2: return &ct_vm_red_avx2;
    }
#else
    (void)isa_named;
    (void)name;
#endif
    return NULL;
}

ct_vm_f32_fn ct_vm_get_for(const char *name, ct_vm_op op) {
#ifdef CT_VM_X86
    switch (isa_named(name)) {
    case CT_ISA_AVX512: return ct_vm_avx512[op];
    case CT_ISA_AVX2: return ct_vm_avx2[op];
    }
#else
    (void)name;
    (void)op;
#endif
    return NULL;
}

const char *ct_vm_isa(void) {
#ifdef CT_VM_X86
    int v = ct_cpu_isa_level();
    return v == CT_ISA_AVX512 ? "avx512" : v == CT_ISA_AVX2 ? "avx2" : "scalar";
#else
    return "scalar";
#endif
}
