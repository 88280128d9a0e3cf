/* Vector math for contiguous float32 loops: SLEEF's routines for the widest x86 vector
 * ISA this CPU has (AVX-512 or AVX2), chosen once at run time. Each ISA lives in its
 * own file built with that ISA's flags (vecmath_avx2.c, vecmath_avx512.c), so the
 * library still runs on any x86-64. */
#ifndef CT_CPU_VECMATH_H
#define CT_CPU_VECMATH_H

#include <stdint.h>

typedef enum ct_vm_op {
    CT_VM_EXP,
    CT_VM_EXP2,
    CT_VM_EXPM1,
    CT_VM_LOG,
    CT_VM_LOG2,
    CT_VM_LOG10,
    CT_VM_LOG1P,
    CT_VM_SIN,
    CT_VM_COS,
    CT_VM_TAN,
    CT_VM_ASIN,
    CT_VM_ACOS,
    CT_VM_ATAN,
    CT_VM_SINH,
    CT_VM_COSH,
    CT_VM_TANH,
    CT_VM_ASINH,
    CT_VM_ACOSH,
    CT_VM_ATANH,
    CT_VM_ERF,
    CT_VM_ERFC,
    CT_VM_COUNT
} ct_vm_op;

/* out[i] = f(in[i]) for i < n; out may equal in. */
typedef void (*ct_vm_f32_fn)(float *out, const float *in, int64_t n);

/* The routine for op on this CPU, or NULL (no SLEEF, or no suitable ISA): the caller
 * then runs its scalar loop. CT_CPU_ISA=scalar|avx2|avx512 in the environment caps
 * the ISA (for benchmarks and for checking the scalar path). */
ct_vm_f32_fn ct_vm_get(ct_vm_op op);
/* "avx512", "avx2" or "scalar": what ct_vm_get uses. */
const char *ct_vm_isa(void);

/* Per-ISA tables (present only in builds with SLEEF on x86-64). */
extern const ct_vm_f32_fn ct_vm_avx2[CT_VM_COUNT];
extern const ct_vm_f32_fn ct_vm_avx512[CT_VM_COUNT];

#endif /* CT_CPU_VECMATH_H */
