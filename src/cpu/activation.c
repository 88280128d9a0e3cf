/* CPU loops of the activation functions. Parameters arrive in P->p[] (see the op's
 * signature in ctorch/ops.def); float16/bfloat16 compute in float32. */
#include "cpu/ew_loops.h"

#pragma GCC diagnostic ignored "-Wtype-limits"

#define CT_EW_ACT(name, EXPR_F, EXPR_D)                                                \
    CT_EW_UNARY_F(name, EXPR_F, EXPR_D)                                                \
    const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {CT_EW_F(name)};

/* hardtanh = clamp(x, min_val, max_val), min applied first (so min > max gives max),
 * NaN kept. Integers compute in double, then truncate, as PyTorch's float limits do. */
#define CT_HARDTANH(x, lo, hi) ((x) != (x) ? (x) : ((x) < (lo) ? (lo) : (x)) > (hi) ? (hi) : ((x) < (lo) ? (lo) : (x)))
CT_EW_UNARY_I(hardtanh, (__typeof__(x))CT_HARDTANH((double)x, P->p[0], P->p[1]))
CT_EW_UNARY_F(hardtanh, CT_HARDTANH(x, (float)P->p[0], (float)P->p[1]), CT_HARDTANH(x, P->p[0], P->p[1]))
const ct_cpu_loop ct_cpu_loops_hardtanh[CT_DTYPE_COUNT] = {CT_EW_I(hardtanh), CT_EW_F(hardtanh)};

CT_EW_UNARY_I(relu6, (__typeof__(x))(x < 0 ? 0 : (x > 6 ? 6 : x)))
CT_EW_UNARY_F(relu6, CT_HARDTANH(x, 0.0f, 6.0f), CT_HARDTANH(x, 0.0, 6.0))
const ct_cpu_loop ct_cpu_loops_relu6[CT_DTYPE_COUNT] = {CT_EW_I(relu6), CT_EW_F(relu6)};

CT_EW_ACT(leaky_relu, x > 0 ? x : x * (float)P->p[0], x > 0 ? x : x * P->p[0])

/* elu(x, alpha, scale, input_scale); celu(x, alpha) = elu(x, alpha, 1, 1/alpha) and
 * selu is elu with fixed constants: the kernel fills P->p[] for all three. */
#define CT_ELU_F(x) ((x) > 0 ? (x) * (float)P->p[1] : expm1f((x) * (float)P->p[2]) * (float)(P->p[0] * P->p[1]))
#define CT_ELU_D(x) ((x) > 0 ? (x) * P->p[1] : expm1((x) * P->p[2]) * (P->p[0] * P->p[1]))
CT_EW_ACT(elu, CT_ELU_F(x), CT_ELU_D(x))
CT_EW_ACT(celu, CT_ELU_F(x), CT_ELU_D(x))
CT_EW_ACT(selu, CT_ELU_F(x), CT_ELU_D(x))

/* gelu: x * Phi(x); the tanh form is PyTorch's approximate='tanh'. */
#define CT_SQRT1_2 0.70710678118654752440
#define CT_SQRT_2_OVER_PI 0.79788456080286535588
CT_EW_ACT(gelu, x * 0.5f * (1.0f + erff(x * (float)CT_SQRT1_2)), x * 0.5 * (1.0 + erf(x * CT_SQRT1_2)))
CT_EW_UNARY_F(gelu_tanh,
              0.5f * x * (1.0f + tanhf((float)CT_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x))),
              0.5 * x * (1.0 + tanh(CT_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))))
const ct_cpu_loop ct_cpu_loops_gelu_tanh[CT_DTYPE_COUNT] = {CT_EW_F(gelu_tanh)};

CT_EW_ACT(silu, x / (1.0f + expf(-x)), x / (1.0 + exp(-x)))
CT_EW_ACT(mish, x * tanhf(log1pf(expf(x))), x * tanh(log1p(exp(x))))
/* softplus(x, beta, threshold): linear once beta * x passes the threshold. */
CT_EW_ACT(softplus, x * (float)P->p[0] > (float)P->p[1] ? x : log1pf(expf(x * (float)P->p[0])) / (float)P->p[0],
          x * P->p[0] > P->p[1] ? x : log1p(exp(x * P->p[0])) / P->p[0])

#define CT_RELU6_OF(t) ((t) < 0 ? 0 : ((t) > 6 ? 6 : (t)))
CT_EW_ACT(hardsigmoid, CT_RELU6_OF(x + 3.0f) / 6.0f, CT_RELU6_OF(x + 3.0) / 6.0)
CT_EW_ACT(hardswish, x * CT_RELU6_OF(x + 3.0f) / 6.0f, x * CT_RELU6_OF(x + 3.0) / 6.0)
