/* CUDA kernels of the activation functions (relu6 leaky_relu elu selu celu gelu silu
 * mish softplus hardtanh hardsigmoid hardswish). Parameters arrive in p[] as the CPU
 * loops get them (src/cpu/activation.c); the expressions are the CPU's, evaluated in
 * the same order and precision (float32 for float16/bfloat16), so the piecewise-linear
 * ones match bit for bit and the transcendental ones to a few ulp. */
#include "ctorch/dispatch.h"
#include "elementwise.cuh"

static __device__ __forceinline__ float d_expm1(float x) { return expm1f(x); }
static __device__ __forceinline__ double d_expm1(double x) { return expm1(x); }
static __device__ __forceinline__ float d_exp(float x) { return expf(x); }
static __device__ __forceinline__ double d_exp(double x) { return exp(x); }
static __device__ __forceinline__ float d_erf(float x) { return erff(x); }
static __device__ __forceinline__ double d_erf(double x) { return erf(x); }
static __device__ __forceinline__ float d_tanh(float x) { return tanhf(x); }
static __device__ __forceinline__ double d_tanh(double x) { return tanh(x); }
static __device__ __forceinline__ float d_log1p(float x) { return log1pf(x); }
static __device__ __forceinline__ double d_log1p(double x) { return log1p(x); }
/* Products that must not be fused into a following addition (the CPU rounds them). */
static __device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
static __device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

/* clamp to [lo, hi], lower bound first (so lo > hi gives hi), NaN kept. */
template <typename C> static __device__ __forceinline__ C hardtanh_of(C x, C lo, C hi) {
    if (x != x)
        return x;
    C y = x < lo ? lo : x;
    return y > hi ? hi : y;
}

/* Integers compute in double and truncate, as PyTorch's float limits do. */
struct op_hardtanh {
    double lo, hi;
    template <typename C> __device__ C operator()(C x) const {
        if constexpr (std::is_floating_point<C>::value)
            return hardtanh_of(x, (C)lo, (C)hi);
        else
            return (C)hardtanh_of((double)x, lo, hi);
    }
};
struct op_relu6 {
    template <typename C> __device__ C operator()(C x) const {
        if constexpr (std::is_floating_point<C>::value)
            return hardtanh_of(x, (C)0, (C)6);
        else
            return ct_is_neg(x) ? (C)0 : (x > (C)6 ? (C)6 : x);
    }
};
struct op_leaky_relu {
    double slope;
    template <typename C> __device__ C operator()(C x) const { return x > (C)0 ? x : x * (C)slope; }
};
/* elu(x, alpha, scale, input_scale) in p[0..2]; celu and selu arrive in this form. */
struct op_elu {
    double alpha, scale, input_scale;
    template <typename C> __device__ C operator()(C x) const {
        return x > (C)0 ? x * (C)scale : d_expm1(x * (C)input_scale) * (C)(alpha * scale);
    }
};
#define CT_SQRT1_2 0.70710678118654752440
#define CT_SQRT_2_OVER_PI 0.79788456080286535588
struct op_gelu {
    template <typename C> __device__ C operator()(C x) const {
        return x * (C)0.5 * ((C)1 + d_erf(x * (C)CT_SQRT1_2));
    }
};
struct op_gelu_tanh {
    template <typename C> __device__ C operator()(C x) const {
        /* (x + 0.044715 x^3) with the CPU's evaluation order: ((0.044715 * x) * x) * x. */
        C inner = (C)CT_SQRT_2_OVER_PI * (x + mul_rn(mul_rn(mul_rn((C)0.044715, x), x), x));
        return (C)0.5 * x * ((C)1 + d_tanh(inner));
    }
};
struct op_silu {
    template <typename C> __device__ C operator()(C x) const { return x / ((C)1 + d_exp(-x)); }
};
struct op_mish {
    template <typename C> __device__ C operator()(C x) const { return x * d_tanh(d_log1p(d_exp(x))); }
};
/* softplus(x, beta, threshold): linear once beta * x passes the threshold. */
struct op_softplus {
    double beta, threshold;
    template <typename C> __device__ C operator()(C x) const {
        C bx = x * (C)beta;
        return bx > (C)threshold ? x : d_log1p(d_exp(bx)) / (C)beta;
    }
};
template <typename C> static __device__ __forceinline__ C relu6_of(C t) {
    return t < (C)0 ? (C)0 : (t > (C)6 ? (C)6 : t);
}
struct op_hardsigmoid {
    template <typename C> __device__ C operator()(C x) const { return relu6_of(x + (C)3) / (C)6; }
};
struct op_hardswish {
    template <typename C> __device__ C operator()(C x) const { return x * relu6_of(x + (C)3) / (C)6; }
};

static int groups_of(int op, int variant) {
    if (variant == CT_CUDA_V_GELU_TANH)
        return op == CT_OP_gelu ? CT_EW_FLOAT : 0;
    if (variant != CT_CUDA_V_DEFAULT)
        return 0;
    switch (op) {
    case CT_OP_hardtanh:
    case CT_OP_relu6: return CT_EW_FLOAT | CT_EW_INT;
    case CT_OP_leaky_relu:
    case CT_OP_elu:
    case CT_OP_selu:
    case CT_OP_celu:
    case CT_OP_gelu:
    case CT_OP_silu:
    case CT_OP_mish:
    case CT_OP_softplus:
    case CT_OP_hardsigmoid:
    case CT_OP_hardswish: return CT_EW_FLOAT;
    default: return 0;
    }
}

extern "C" bool ct_cuda_activation_supported(int op, int variant, ct_dtype dtype) {
    return ct_ew_in_groups(groups_of(op, variant), dtype);
}

extern "C" ct_status ct_cuda_activation(int op, ct_dtype dt, const ct_cuda_iter_desc *d, const ct_cuda_params *p,
                                        int device) {
    const char *name = ct_op_name(op);
    const int F = CT_EW_FLOAT, FI = CT_EW_FLOAT | CT_EW_INT;
    if (p->variant == CT_CUDA_V_GELU_TANH)
        return ew_dispatch<1, false, F>(dt, d, op_gelu_tanh(), device, name);
    switch (op) {
    case CT_OP_hardtanh: return ew_dispatch<1, false, FI>(dt, d, op_hardtanh{p->p[0], p->p[1]}, device, name);
    case CT_OP_relu6: return ew_dispatch<1, false, FI>(dt, d, op_relu6(), device, name);
    case CT_OP_leaky_relu: return ew_dispatch<1, false, F>(dt, d, op_leaky_relu{p->p[0]}, device, name);
    case CT_OP_elu:
    case CT_OP_selu:
    case CT_OP_celu: return ew_dispatch<1, false, F>(dt, d, op_elu{p->p[0], p->p[1], p->p[2]}, device, name);
    case CT_OP_gelu: return ew_dispatch<1, false, F>(dt, d, op_gelu(), device, name);
    case CT_OP_silu: return ew_dispatch<1, false, F>(dt, d, op_silu(), device, name);
    case CT_OP_mish: return ew_dispatch<1, false, F>(dt, d, op_mish(), device, name);
    case CT_OP_softplus: return ew_dispatch<1, false, F>(dt, d, op_softplus{p->p[0], p->p[1]}, device, name);
    case CT_OP_hardsigmoid: return ew_dispatch<1, false, F>(dt, d, op_hardsigmoid(), device, name);
    case CT_OP_hardswish: return ew_dispatch<1, false, F>(dt, d, op_hardswish(), device, name);
    default: return ct_error(CT_ERROR_NOT_IMPLEMENTED, name, "no CUDA kernel for this activation");
    }
}
