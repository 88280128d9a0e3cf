/* The fused Adam/AdamW kernel: every tensor of the lists in one launch (Note [Fused
 * Adam launch] in fused_optim.h), float32 arithmetic, parameters float32, bfloat16 or
 * float16, states float32 or the parameters' dtype, optional float32 master copies. */
#include "fused_optim.h"
#include "kernels.cuh"

/* Note [Fused Adam roundings]
 * Each element follows the sequence of src/optim/optimizer.c's float32 foreach loop
 * and of the CPU kernel (src/cpu/fused_optim.c): the same constants, the same
 * operations in the same order. nvcc would contract a * b + c into one fma, which
 * rounds once instead of twice; the explicit _rn intrinsics keep every product and sum
 * rounded as the CPU rounds them, and sqrtf and the division are IEEE (no fast-math),
 * so a float32 parameter gets the CPU's bits. The kernel is bound by memory: the fma
 * would save nothing. The constants a device step or learning rate gives (Note [Device
 * step]) are computed in double with the host's formulas, the division IEEE and AdamW's
 * 1 - lr * weight_decay in two roundings (__dmul_rn, __dsub_rn), so a learning rate in
 * lr_t gives the constants, and the bits, of the same one passed by value. */

static __device__ __forceinline__ float fa_load(const void *base, int64_t i, int dt) {
    switch (dt) {
    case CT_DTYPE_BFLOAT16: return ct_dev_b2f(((const uint16_t *)base)[i]);
    case CT_DTYPE_FLOAT16: return ct_dev_h2f(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
    }
}

static __device__ __forceinline__ void fa_store(void *base, int64_t i, int dt, float x) {
    switch (dt) {
    case CT_DTYPE_BFLOAT16: ((uint16_t *)base)[i] = ct_dev_f2b(x); break;
    case CT_DTYPE_FLOAT16: ((uint16_t *)base)[i] = ct_dev_f2h(x); break;
    default: ((float *)base)[i] = x; break;
    }
}

static __global__ void __launch_bounds__(FA_THREADS)
    fused_adam_kernel(const ct_fa_table t, const ct_fa_consts c, const float *grad_scale, const float *found_inf,
                      const float *clip_coef, const double *step_t, const double *lr_t) {
    if (found_inf && *found_inf != 0.0f)
        return;
    float neg_step_size = c.neg_step_size, bc2_sqrt = c.bc2_sqrt, decay = c.decay;
    if (step_t || lr_t) {
        /* Note [Device step]: ct_adam_consts_of's formulas, in double, with the step and
         * the learning rate each from the device when given, else the host's */
        const double lr = lr_t ? *lr_t : c.lr;
        if (step_t) {
            const double s = *step_t, bc1 = 1 - pow(c.beta1_d, s), bc2 = 1 - pow(c.beta2_d, s);
            neg_step_size = (float)(-(lr / bc1));
            bc2_sqrt = (float)sqrt(bc2);
        } else {
            neg_step_size = (float)(-(lr / c.bc1));
        }
        if (lr_t) /* the product rounded before the difference, as the host's (no fma) */
            decay = (float)__dsub_rn(1.0, __dmul_rn(lr, c.weight_decay_d));
    }
    const int b = blockIdx.x;
    /* the tensor whose blocks include b: the last i with first[i] <= b */
    int lo = 0, hi = t.n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (t.first[mid] <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    const int i = lo;
    const int64_t numel = t.numel[i];
    const int64_t start = (int64_t)(b - t.first[i]) * FA_CHUNK;
    const int64_t end = start + FA_CHUNK < numel ? start + FA_CHUNK : numel;
    const int pdt = t.pdt[i], sdt = t.sdt[i];
    void *p = t.p[i], *g = t.g[i], *m = t.m[i], *v = t.v[i], *vmax = t.vmax[i], *master = t.master[i];
    const float gs = grad_scale ? *grad_scale : 1.0f, cc = clip_coef ? *clip_coef : 1.0f;
    for (int64_t j = start + threadIdx.x; j < end; j += FA_THREADS) {
        const float pj = master ? ((const float *)master)[j] : fa_load(p, j, pdt);
        float gj = fa_load(g, j, pdt);
        if (grad_scale) {
            gj = __fdiv_rn(gj, gs);
            fa_store(g, j, pdt, gj);
        }
        if (clip_coef)
            gj = __fmul_rn(gj, cc);
        float d = c.maximize ? -gj : gj;
        if (c.has_wd && !c.decoupled)
            d = __fadd_rn(d, __fmul_rn(c.wd, pj));
        const float pd = c.decoupled ? __fmul_rn(pj, decay) : pj;
        const float mi = __fadd_rn(__fmul_rn(fa_load(m, j, sdt), c.beta1), __fmul_rn(c.one_minus_beta1, d));
        const float vi =
            __fadd_rn(__fmul_rn(fa_load(v, j, sdt), c.beta2), __fmul_rn(__fmul_rn(c.one_minus_beta2, d), d));
        fa_store(m, j, sdt, mi);
        fa_store(v, j, sdt, vi);
        float r = vi;
        if (c.amsgrad) {
            const float mx = fa_load(vmax, j, sdt);
            r = (vi > mx || vi != vi) ? vi : mx; /* torch.maximum keeps NaN */
            fa_store(vmax, j, sdt, r);
        }
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(r), bc2_sqrt), c.eps);
        const float pn = __fadd_rn(pd, __fmul_rn(neg_step_size, __fdiv_rn(mi, denom)));
        if (master)
            ((float *)master)[j] = pn;
        fa_store(p, j, pdt, pn);
    }
}

extern "C" ct_status ct_cuda_fused_adam_run(const ct_fa_table *t, const ct_fa_consts *c, const float *grad_scale,
                                            const float *found_inf, const float *clip_coef, const double *step_t,
                                            const double *lr_t, int device, const char *op) {
    const int nblocks = t->first[t->n];
    if (nblocks == 0)
        return CT_OK;
    fused_adam_kernel<<<(unsigned)nblocks, FA_THREADS, 0, ct_stream_of(device)>>>(*t, *c, grad_scale, found_inf,
                                                                                  clip_coef, step_t, lr_t);
    return ct_cuda_check_launch(op);
}
