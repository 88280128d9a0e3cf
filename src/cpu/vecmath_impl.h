/* Body of vecmath_avx2.c / vecmath_avx512.c: one routine per ct_vm_op from SLEEF's
 * functions for one ISA. Before including, define VEC (the vector type), W (floats per
 * vector), LOAD/STORE, SL(name) (SLEEF's name for that ISA), VEXP(v) (exp of a vector:
 * SLEEF's, or the same results computed faster, Note [AVX-512 exp]) and TABLE.
 *
 * The tail goes through a padded buffer and the same vector function, so an element's
 * result does not depend on where a row or a thread's chunk happens to end. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/stream.h"

/* Note [Prefetch ahead]
 * At 16M float32 elements on two cores of the GPU machine's Xeon, exp ran at 0.64-0.88
 * of the memcpy ceiling: its time was about the sum of its arithmetic and its memory
 * traffic, the two not overlapping. Prefetching the input 1 KiB ahead of the loop gave
 * 0.91-0.99 against 0.80-0.88 without (three rounds alternating in one run) and
 * 0.87-0.95 against 0.70-0.91 in a second run. Long runs only; the address is
 * computed as an integer, since it may lie past the end of the input (a prefetch
 * never faults). The same prefetch in the plain binary loops (add, mul) was measured
 * too and did not help them, so they have none. */
#define CT_VM_PF_BYTES 1024u
#define CT_VM_PF_MIN 4096
/* cnt (< W) elements through the padded buffer. */
#define CT_VM_PART(SLEEF_FN, o, a, cnt)                                   \
    do {                                                                  \
        float buf[W] = {0};                                               \
        memcpy(buf, (a), (size_t)(cnt) * sizeof(float));                  \
        STORE(buf, SLEEF_FN(LOAD(buf)));                                  \
        memcpy((o), buf, (size_t)(cnt) * sizeof(float));                  \
    } while (0)
/* Long runs prefetch (Note [Prefetch ahead]); those that touch more than the cache
 * holds stream their output (Note [Streaming stores]) from the first 64-byte
 * boundary on. */
#define CT_VM_DEF(fname, SLEEF_FN)                                        \
    static void fname(float *out, const float *in, int64_t n) {          \
        int64_t i = 0;                                                    \
        if (n >= CT_VM_PF_MIN && ct_stream_wanted(n * 8, out, sizeof(float))) { \
            while ((uintptr_t)(out + i) % 64u != 0) {                     \
                int64_t c = (int64_t)((64u - (uintptr_t)(out + i) % 64u) / sizeof(float)); \
                c = c < W ? c : W;                                        \
                CT_VM_PART(SLEEF_FN, out + i, in + i, c);                 \
                i += c;                                                   \
            }                                                             \
            for (; i + W <= n; i += W) {                                  \
                _mm_prefetch((const char *)((uintptr_t)(in + i) + CT_VM_PF_BYTES), _MM_HINT_T0); \
                STREAM(out + i, SLEEF_FN(LOAD(in + i)));                  \
            }                                                             \
            ct_stream_fence();                                            \
        } else if (n >= CT_VM_PF_MIN)                                     \
            for (; i + W <= n; i += W) {                                  \
                _mm_prefetch((const char *)((uintptr_t)(in + i) + CT_VM_PF_BYTES), _MM_HINT_T0); \
                STORE(out + i, SLEEF_FN(LOAD(in + i)));                   \
            }                                                             \
        for (; i + W <= n; i += W)                                        \
            STORE(out + i, SLEEF_FN(LOAD(in + i)));                       \
        if (i < n)                                                        \
            CT_VM_PART(SLEEF_FN, out + i, in + i, n - i);                 \
    }

/* SLEEF's single-precision asinh and acosh square their argument, so above about
 * 1.8e19 (uint64 values, say) they return inf; those lanes take libm's result. NaN
 * fails the comparison and goes to libm too, which keeps it NaN. */
#define CT_VM_DEF_BOUNDED(fname, SLEEF_FN, LIBM_FN)                                  \
    static void fname(float *out, const float *in, int64_t n) {                     \
        for (int64_t i = 0; i < n; i += W) {                                         \
            const int64_t len = n - i < W ? n - i : W;                               \
            float buf[W] = {0};                                                      \
            memcpy(buf, in + i, (size_t)len * sizeof(float));                        \
            STORE(buf, SLEEF_FN(LOAD(buf)));                                         \
            for (int64_t j = 0; j < len; j++)                                        \
                if (!(fabsf(in[i + j]) <= 1e18f))                                    \
                    buf[j] = LIBM_FN(in[i + j]);                                     \
            memcpy(out + i, buf, (size_t)len * sizeof(float));                       \
        }                                                                            \
    }

CT_VM_DEF(vm_exp, VEXP)
CT_VM_DEF(vm_exp2, SL(exp2, u10))
CT_VM_DEF(vm_expm1, SL(expm1, u10))
CT_VM_DEF(vm_log, SL(log, u10))
CT_VM_DEF(vm_log2, SL(log2, u10))
CT_VM_DEF(vm_log10, SL(log10, u10))
CT_VM_DEF(vm_log1p, SL(log1p, u10))
CT_VM_DEF(vm_sin, SL(sin, u10))
CT_VM_DEF(vm_cos, SL(cos, u10))
CT_VM_DEF(vm_tan, SL(tan, u10))
CT_VM_DEF(vm_asin, SL(asin, u10))
CT_VM_DEF(vm_acos, SL(acos, u10))
CT_VM_DEF(vm_atan, SL(atan, u10))
CT_VM_DEF(vm_sinh, SL(sinh, u10))
CT_VM_DEF(vm_cosh, SL(cosh, u10))
CT_VM_DEF(vm_tanh, SL(tanh, u10))
CT_VM_DEF_BOUNDED(vm_asinh, SL(asinh, u10), asinhf)
CT_VM_DEF_BOUNDED(vm_acosh, SL(acosh, u10), acoshf)
CT_VM_DEF(vm_atanh, SL(atanh, u10))
CT_VM_DEF(vm_erf, SL(erf, u10))
CT_VM_DEF(vm_erfc, SL(erfc, u15))

const ct_vm_f32_fn TABLE[CT_VM_COUNT] = {
    [CT_VM_EXP] = vm_exp,     [CT_VM_EXP2] = vm_exp2,   [CT_VM_EXPM1] = vm_expm1, [CT_VM_LOG] = vm_log,
    [CT_VM_LOG2] = vm_log2,   [CT_VM_LOG10] = vm_log10, [CT_VM_LOG1P] = vm_log1p, [CT_VM_SIN] = vm_sin,
    [CT_VM_COS] = vm_cos,     [CT_VM_TAN] = vm_tan,     [CT_VM_ASIN] = vm_asin,   [CT_VM_ACOS] = vm_acos,
    [CT_VM_ATAN] = vm_atan,   [CT_VM_SINH] = vm_sinh,   [CT_VM_COSH] = vm_cosh,   [CT_VM_TANH] = vm_tanh,
    [CT_VM_ASINH] = vm_asinh, [CT_VM_ACOSH] = vm_acosh, [CT_VM_ATANH] = vm_atanh, [CT_VM_ERF] = vm_erf,
    [CT_VM_ERFC] = vm_erfc,
};

/* ------------------------------------------------------------------ reductions
 * The kernels of ct_vm_red (vecmath.h). Besides the names above they need
 * TAIL_LOAD_SUB(p, cnt, vm) (lanes below cnt: p[k] - vm, the others -inf; nothing past
 * cnt is read) and TAIL_STORE(p, cnt, v) (stores lanes below cnt only), VZERO,
 * VSET1, VADD, VSUB, VMAX (which returns its second operand when one is NaN), VHASNAN
 * (nonzero when a lane is NaN), and the double vectors DVEC of DW lanes with DZERO,
 * DADD, DSTORE and CVT_LO/CVT_HI (the low/high half of a float vector in double). */

static float vm_max_f32(const float *in, int64_t n) {
    float m = -INFINITY;
    int nan = 0;
    int64_t i = 0;
    if (n >= 2 * W) { /* short rows go straight to the scalar loop */
        VEC m0 = VSET1(-INFINITY), m1 = m0;
        for (; i + 2 * W <= n; i += 2 * W) {
            VEC a = LOAD(in + i), b = LOAD(in + i + W);
            nan |= VHASNAN(a) | VHASNAN(b);
            m0 = VMAX(a, m0);
            m1 = VMAX(b, m1);
        }
        float buf[W];
        STORE(buf, VMAX(m0, m1));
        for (int k = 0; k < W; k++)
            m = buf[k] > m ? buf[k] : m;
    }
    for (; i < n; i++) {
        nan |= in[i] != in[i];
        m = in[i] > m ? in[i] : m;
    }
    return nan ? NAN : m;
}

/* The tail runs through one masked vector whose extra lanes hold -inf, so they add
 * exp(-inf) = 0 and a row's sum does not depend on how it ends. */
static double vm_expsum_f32(float *out, const float *in, int64_t n, float m, const float *pf_in,
                            const float *pf_out) {
    const VEC vm = VSET1(m);
    DVEC s0 = DZERO(), s1 = DZERO();
    int64_t i = 0;
    /* pf_in/pf_out may lie past the end of their allocations: their addresses are only
     * computed as integers and prefetched, never dereferenced. */
    const uintptr_t pfa = (uintptr_t)pf_in, pfo = (uintptr_t)pf_out;
#define EXPSUM_LOOP(STORE_E, PREFETCH)                         \
    for (; i + W <= n; i += W) {                               \
        PREFETCH;                                              \
        VEC e = VEXP(VSUB(LOAD(in + i), vm));                  \
        STORE_E;                                               \
        s0 = DADD(s0, CVT_LO(e));                              \
        s1 = DADD(s1, CVT_HI(e));                              \
    }
    if (out && pf_in && pf_out)
        EXPSUM_LOOP(STORE(out + i, e), _mm_prefetch((const char *)(pfa + (uintptr_t)i * 4u), _MM_HINT_T0);
                    __builtin_prefetch((const void *)(pfo + (uintptr_t)i * 4u), 1, 3))
    else if (out)
        EXPSUM_LOOP(STORE(out + i, e), (void)0)
    else if (pf_in)
        EXPSUM_LOOP((void)0, _mm_prefetch((const char *)(pfa + (uintptr_t)i * 4u), _MM_HINT_T0))
    else
        EXPSUM_LOOP((void)0, (void)0)
#undef EXPSUM_LOOP
    if (i < n) {
        const int cnt = (int)(n - i);
        VEC e = VEXP(TAIL_LOAD_SUB(in + i, cnt, vm));
        if (out)
            TAIL_STORE(out + i, cnt, e);
        s0 = DADD(s0, CVT_LO(e));
        s1 = DADD(s1, CVT_HI(e));
    }
    double d[2 * DW];
    DSTORE(d, s0);
    DSTORE(d + DW, s1);
    for (int w = DW; w >= 1; w /= 2)
        for (int k = 0; k < w; k++)
            d[k] = d[k] + d[k + w];
    return d[0];
}

/* One block after another, in memory order. Each block's sixteen lanes are a chain of
 * additions of its own, so the CPU overlaps the chains of successive blocks without
 * help, and the loads form one sequential stream that the hardware prefetchers follow.
 * On Intel's cores a software prefetch 4 KiB ahead adds to that; on AMD's Zen 4 it
 * costs (Note [Sum streams] in src/cpu/reduce_loops.c). */
#define NV (16 / W)
#define PF 1024
/* ct_vm_blk_tree of a block's sixteen lanes (acc[0..NV)) kept in registers: the pairs
 * l[k] + l[k + 8] are formed in double lanes, then the same tree follows, so the result
 * is the same bit for bit. */
static inline double blk_tree_vec(const VEC *acc) {
    double s[8];
#if W == 16
    DSTORE(s, DADD(CVT_LO(acc[0]), CVT_HI(acc[0])));
#else
    DSTORE(s, DADD(CVT_LO(acc[0]), CVT_LO(acc[1])));
    DSTORE(s + 4, DADD(CVT_HI(acc[0]), CVT_HI(acc[1])));
#endif
    return ct_vm_blk_tree_pairs(s);
}

static void vm_blocksum_f32(double *out, const float *in, int64_t nblk) {
#define BLOCKSUM_LOOP(PREFETCH)                                        \
    for (int64_t b = 0; b < nblk; b++) {                               \
        const float *a = in + b * CT_VM_SUM_BLK;                       \
        VEC acc[NV];                                                   \
        for (int v = 0; v < NV; v++)                                   \
            acc[v] = VZERO();                                          \
        for (int j = 0; j < CT_VM_SUM_BLK; j += 16) {                  \
            PREFETCH;                                                  \
            for (int v = 0; v < NV; v++)                               \
                acc[v] = VADD(acc[v], LOAD(a + j + v * W));            \
        }                                                              \
        out[b] = blk_tree_vec(acc);                                    \
    }
    /* prefetches never fault, past the end included */
    if (ct_cpu_is_intel())
        BLOCKSUM_LOOP(_mm_prefetch((const char *)(a + PF + j), _MM_HINT_T0))
    else
        BLOCKSUM_LOOP((void)0)
#undef BLOCKSUM_LOOP
}
#undef NV
#undef PF

const ct_vm_red RED_TABLE = {vm_max_f32, vm_expsum_f32, vm_blocksum_f32};
