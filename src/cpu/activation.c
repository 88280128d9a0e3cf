/* CPU loops of the activation functions. Parameters arrive in P->p[] (see the op's
 * signature in ctorch/ops.def); float16/bfloat16 compute in float32. */
#include "cpu/ew_loops.h"

#pragma GCC diagnostic ignored "-Wtype-limits"

#define CT_EW_ACT(name, EXPR_F, EXPR_D)                                                \
    CT_EW_UNARY_F(name, EXPR_F, EXPR_D)                                                \
    const ct_cpu_loop ct_cpu_loops_##name[CT_DTYPE_COUNT] = {CT_EW_F(name)};
/* The same with vector math in the float32 contiguous case (CT_EW_UNARY_F_VMCHAIN). */
#define CT_EW_ACT_VM(name, PRE, POST, EXPR_F, EXPR_D, ...)                             \
    CT_EW_UNARY_F_VMCHAIN(name, PRE, POST, EXPR_F, EXPR_D, __VA_ARGS__)                \
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
#define CT_ELU_POST (x > 0 ? x * (float)P->p[1] : v * (float)(P->p[0] * P->p[1]))
CT_EW_ACT_VM(elu, x * (float)P->p[2], CT_ELU_POST, CT_ELU_F(x), CT_ELU_D(x), CT_VM_EXPM1)
CT_EW_ACT_VM(celu, x * (float)P->p[2], CT_ELU_POST, CT_ELU_F(x), CT_ELU_D(x), CT_VM_EXPM1)
CT_EW_ACT_VM(selu, x * (float)P->p[2], CT_ELU_POST, CT_ELU_F(x), CT_ELU_D(x), CT_VM_EXPM1)

/* gelu: x * Phi(x); the tanh form is PyTorch's approximate='tanh'. */
#define CT_SQRT1_2 0.70710678118654752440
#define CT_SQRT_2_OVER_PI 0.79788456080286535588
CT_EW_ACT_VM(gelu, x * (float)CT_SQRT1_2, x * 0.5f * (1.0f + v), x * 0.5f * (1.0f + erff(x * (float)CT_SQRT1_2)),
             x * 0.5 * (1.0 + erf(x * CT_SQRT1_2)), CT_VM_ERF)
/* Note [GELU through exp]
 * The tanh form 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), equals
 * x sigmoid(2u) = x / (1 + exp(-2u)), which float32 computes as silu does: one vector
 * exp costs a fraction of SLEEF's tanh, no branch or select is needed, and the result
 * keeps its relative accuracy where 1 + tanh(u) cancels. Below x of about -9.9 the exp
 * overflows and the result is -0, as PyTorch's formula gives there. float64 keeps the
 * tanh formula. */
#define CT_GELU_TANH_IN(x) ((float)CT_SQRT_2_OVER_PI * ((x) + 0.044715f * (x) * (x) * (x)))
CT_EW_UNARY_F_VMCHAIN(gelu_tanh, -2.0f * CT_GELU_TANH_IN(x), x / (1.0f + v),
                      x / (1.0f + expf(-2.0f * CT_GELU_TANH_IN(x))),
                      0.5 * x * (1.0 + tanh(CT_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))), CT_VM_EXP)
const ct_cpu_loop ct_cpu_loops_gelu_tanh[CT_DTYPE_COUNT] = {CT_EW_F(gelu_tanh)};

CT_EW_ACT_VM(silu, -x, x / (1.0f + v), x / (1.0f + expf(-x)), x / (1.0 + exp(-x)), CT_VM_EXP)
CT_EW_ACT_VM(mish, x, x * v, x * tanhf(log1pf(expf(x))), x * tanh(log1p(exp(x))), CT_VM_EXP, CT_VM_LOG1P,
             CT_VM_TANH)
/* softplus(x, beta, threshold): linear once beta * x passes the threshold. */
CT_EW_ACT_VM(softplus, x * (float)P->p[0], x * (float)P->p[0] > (float)P->p[1] ? x : v / (float)P->p[0],
             x * (float)P->p[0] > (float)P->p[1] ? x : log1pf(expf(x * (float)P->p[0])) / (float)P->p[0],
             x * P->p[0] > P->p[1] ? x : log1p(exp(x * P->p[0])) / P->p[0], CT_VM_EXP, CT_VM_LOG1P)

#define CT_RELU6_OF(t) ((t) < 0 ? 0 : ((t) > 6 ? 6 : (t)))
CT_EW_ACT(hardsigmoid, CT_RELU6_OF(x + 3.0f) / 6.0f, CT_RELU6_OF(x + 3.0) / 6.0)
CT_EW_ACT(hardswish, x * CT_RELU6_OF(x + 3.0f) / 6.0f, x * CT_RELU6_OF(x + 3.0) / 6.0)
