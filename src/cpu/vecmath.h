/* Vector math for contiguous float32 loops: SLEEF's routines for the widest x86 vector
 * ISA this CPU has (AVX-512 or AVX2), chosen once at run time. Each ISA lives in its
 * own file built with that ISA's flags (vecmath_avx2.c, vecmath_avx512.c), so the
 * library still runs on any x86-64. */
#ifndef CT_CPU_VECMATH_H
#define CT_CPU_VECMATH_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu/cpu_isa.h" /* the ISA choice: ct_cpu_isa_level, CT_CPU_ISA */

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
/* The routine of one ISA ("avx2", "avx512"), NULL where this build or CPU lacks it;
 * tests compare the ISAs with it. */
ct_vm_f32_fn ct_vm_get_for(const char *isa, ct_vm_op op);
/* "avx512", "avx2" or "scalar": what ct_vm_get uses. */
const char *ct_vm_isa(void);

/* Per-ISA tables (present only in builds with SLEEF on x86-64). */
extern const ct_vm_f32_fn ct_vm_avx2[CT_VM_COUNT];
extern const ct_vm_f32_fn ct_vm_avx512[CT_VM_COUNT];

/* Kernels of the float32 reductions (src/cpu/reduce_loops.c), for the same ISA. */
#define CT_VM_SUM_BLK 256
typedef struct ct_vm_red {
    /* The largest of in[0..n), NaN when one is NaN, -inf when n == 0. */
    float (*max_f32)(const float *in, int64_t n);
    /* Stores exp(in[i] - m) to out[i] for i < n (out may be NULL: not stored, or in)
     * and returns their sum, added in double lanes in an order fixed for the ISA.
     * pf_in and pf_out (for writing), when not NULL, are prefetched over the same
     * length on the way: the next row's input and output, so that their memory
     * transfers overlap this row's arithmetic. */
    double (*expsum_f32)(float *out, const float *in, int64_t n, float m, const float *pf_in, const float *pf_out);
    /* out[b] = the sum of floats in[b * CT_VM_SUM_BLK ..][0, CT_VM_SUM_BLK) for
     * b < nblk, by ct_vm_blocksum_ref's exact sequence of additions on every ISA. */
    void (*blocksum_f32)(double *out, const float *in, int64_t nblk);
} ct_vm_red;

/* The reduction kernels for this CPU (the ISA ct_vm_get uses), or NULL. */
const ct_vm_red *ct_vm_red_get(void);
/* The kernels of one ISA ("avx2", "avx512"), NULL where this build or CPU lacks them;
 * tests compare the ISAs with it. */
const ct_vm_red *ct_vm_red_for(const char *isa);
extern const ct_vm_red ct_vm_red_avx2;
extern const ct_vm_red ct_vm_red_avx512;

/* Note [Float32 block sums]
 * A block of CT_VM_SUM_BLK (256) floats is added in sixteen float32 lanes: lane k takes
 * in[k], in[16 + k], ..., in[240 + k] in that order, starting from +0. The lanes then
 * meet in double by the fixed tree below. Every ISA performs exactly these additions
 * (a vector of W lanes holds W of the sixteen), so block sums are bit-identical
 * whichever ISA runs, in whatever order the blocks are taken. Each lane sums 16
 * values, so a block is exact for integers up to 2^20 in magnitude and otherwise within
 * a few ulp of float32 per lane. */

/* The tree from the pairs s[k] = l[k] + l[k + 8] (k < 8, in double), which the vector
 * loops form in registers (blk_tree_vec in vecmath_impl.h). */
static inline double ct_vm_blk_tree_pairs(const double *s) {
    double v[4];
    for (int k = 0; k < 4; k++)
        v[k] = s[k] + s[k + 4];
    return (v[0] + v[2]) + (v[1] + v[3]);
}

static inline double ct_vm_blk_tree(const float *l) {
    double s[8];
    for (int k = 0; k < 8; k++)
        s[k] = (double)l[k] + (double)l[k + 8];
    return ct_vm_blk_tree_pairs(s);
}

static inline void ct_vm_blocksum_ref(double *out, const float *in, int64_t nblk) {
    for (int64_t b = 0; b < nblk; b++) {
        const float *a = in + b * CT_VM_SUM_BLK;
        float l[16];
        for (int k = 0; k < 16; k++)
            l[k] = 0.0f;
        for (int j = 0; j < CT_VM_SUM_BLK; j += 16)
            for (int k = 0; k < 16; k++)
                l[k] += a[j + k];
        out[b] = ct_vm_blk_tree(l);
    }
}

#endif /* CT_CPU_VECMATH_H */
