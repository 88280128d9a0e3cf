/* Run-time choice of the vector math ISA (see vecmath.h). */
#include "cpu/vecmath.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The ISA choice itself lives in src/core/cpu_isa.c (the cast loops use it too); the
 * vector math tables need SLEEF. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(CT_HAVE_SLEEF)
#define CT_VM_X86 1
#endif

enum { ISA_SCALAR = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 }; /* ct_cpu_isa_level's values */

static int isa(void) { return ct_cpu_isa_level(); }

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
    if (strcmp(name, "avx512") == 0 && ct_cpu_has_avx512())
        return ISA_AVX512;
    if (strcmp(name, "avx2") == 0 && ct_cpu_has_avx2())
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
    (void)name;
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

bool ct_cpu_avx512(void) {
    return isa() == ISA_AVX512;
}
