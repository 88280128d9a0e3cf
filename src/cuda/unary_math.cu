/* CUDA kernels of the unary float functions: exponentials and logarithms, trigonometric
 * and hyperbolic functions, the erf family, logit and reciprocal. Integer inputs were
 * promoted to the default float dtype by the family; float16/bfloat16 compute in
 * float32, as on the CPU. CUDA's math library and the CPU's (glibc, SLEEF) round
 * differently in the last place, so results agree to a few ulp, not bit for bit. */
#include "ctorch/dispatch.h"
#include "elementwise.cuh"
#include "core/special_math.h"

#define CT_FN2(name, FF, FD)                                                              \
    static __device__ __forceinline__ float d_##name(float x) { return FF(x); }           \
    static __device__ __forceinline__ double d_##name(double x) { return FD(x); }
CT_FN2(exp2, exp2f, exp2)
CT_FN2(expm1, expm1f, expm1)
CT_FN2(log2, log2f, log2)
CT_FN2(log10, log10f, log10)
CT_FN2(log1p, log1pf, log1p)
CT_FN2(tan, tanf, tan)
CT_FN2(asin, asinf, asin)
CT_FN2(acos, acosf, acos)
CT_FN2(atan, atanf, atan)
CT_FN2(sinh, sinhf, sinh)
CT_FN2(cosh, coshf, cosh)
CT_FN2(asinh, asinhf, asinh)
CT_FN2(acosh, acoshf, acosh)
CT_FN2(atanh, atanhf, atanh)
CT_FN2(erf, erff, erf)
CT_FN2(erfc, erfcf, erfc)
CT_FN2(lgamma, lgammaf, lgamma)
CT_FN2(sqrt, sqrtf, sqrt)
CT_FN2(logf, logf, log)

#define CT_UOP(name, EXPR)                                                                \
    struct op_##name {                                                                    \
        template <typename C> __device__ C operator()(C x) const { return EXPR; }         \
    };
CT_UOP(exp2, d_exp2(x))
CT_UOP(expm1, d_expm1(x))
CT_UOP(log2, d_log2(x))
CT_UOP(log10, d_log10(x))
CT_UOP(log1p, d_log1p(x))
/* 1 / sqrt, as the CPU (rsqrtf is an approximation). */
CT_UOP(rsqrt, (C)1 / d_sqrt(x))
CT_UOP(tan, d_tan(x))
CT_UOP(asin, d_asin(x))
CT_UOP(acos, d_acos(x))
CT_UOP(atan, d_atan(x))
CT_UOP(sinh, d_sinh(x))
CT_UOP(cosh, d_cosh(x))
CT_UOP(asinh, d_asinh(x))
CT_UOP(acosh, d_acosh(x))
CT_UOP(atanh, d_atanh(x))
CT_UOP(erf, d_erf(x))
CT_UOP(erfc, d_erfc(x))
CT_UOP(reciprocal, (C)1 / x)
/* erfinv in double for every float dtype, as the CPU (Note [erfinv] in
 * src/cpu/unary_math.c); CUDA's erfinv gives +-inf at +-1, NaN outside [-1, 1] and
 * keeps -0, the CPU's special values. */
CT_UOP(erfinv, (C)erfinv((double)x))
CT_UOP(lgamma, d_lgamma(x))
/* digamma and polygamma: the CPU's code, in double (src/core/special_math.h) */
CT_UOP(digamma, (C)ct_digamma_d((double)x))
struct op_polygamma {
    int64_t n;
    template <typename C> __device__ C operator()(C x) const { return (C)ct_polygamma_d(n, (double)x); }
};

/* logit: eps < 0 means no clamping; the clamp keeps NaN (both comparisons false). */
struct op_logit {
    double eps;
    template <typename C> __device__ C operator()(C x) const {
        C e = (C)eps;
        if (e >= (C)0) {
            C lo = e, hi = (C)1 - e;
            x = x < lo ? lo : (x > hi ? hi : x);
        }
        return d_logf(x / ((C)1 - x));
    }
};

static bool known(int op) {
    switch (op) {
    case CT_OP_exp2:
    case CT_OP_expm1:
    case CT_OP_log2:
    case CT_OP_log10:
    case CT_OP_log1p:
    case CT_OP_rsqrt:
    case CT_OP_tan:
    case CT_OP_asin:
    case CT_OP_acos:
    case CT_OP_atan:
    case CT_OP_sinh:
    case CT_OP_cosh:
    case CT_OP_asinh:
    case CT_OP_acosh:
    case CT_OP_atanh:
    case CT_OP_erf:
    case CT_OP_erfc:
    case CT_OP_erfinv:
    case CT_OP_lgamma:
    case CT_OP_digamma:
    case CT_OP_polygamma:
    case CT_OP_logit:
    case CT_OP_reciprocal: return true;
    default: return false;
    }
}

extern "C" bool ct_cuda_unary_math_supported(int op, int variant, ct_dtype dtype) {
    return variant == CT_CUDA_V_DEFAULT && known(op) && ct_ew_in_groups(CT_EW_FLOAT, dtype);
}

extern "C" ct_status ct_cuda_unary_math(int op, ct_dtype dt, const ct_cuda_iter_desc *d, const ct_cuda_params *p,
                                        int device) {
    const char *name = ct_op_name(op);
#define CASE(o)                                                                           \
    case CT_OP_##o: return ew_dispatch<1, false, CT_EW_FLOAT>(dt, d, op_##o(), device, name);
    switch (op) {
        CASE(exp2)
        CASE(expm1)
        CASE(log2)
        CASE(log10)
        CASE(log1p)
        CASE(rsqrt)
        CASE(tan)
        CASE(asin)
        CASE(acos)
        CASE(atan)
        CASE(sinh)
        CASE(cosh)
        CASE(asinh)
        CASE(acosh)
        CASE(atanh)
        CASE(erf)
        CASE(erfc)
        CASE(erfinv)
        CASE(lgamma)
        CASE(digamma)
        CASE(reciprocal)
    case CT_OP_polygamma:
        return ew_dispatch<1, false, CT_EW_FLOAT>(dt, d, op_polygamma{(int64_t)p->p[0]}, device, name);
    case CT_OP_logit: return ew_dispatch<1, false, CT_EW_FLOAT>(dt, d, op_logit{p->p[0]}, device, name);
    default: return ct_error(CT_ERROR_NOT_IMPLEMENTED, name, "no CUDA kernel for this unary op");
    }
#undef CASE
}
