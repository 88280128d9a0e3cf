/* CUDA kernels of the unary elementwise ops (neg abs relu exp log sqrt sin cos tanh
 * sigmoid). Float16/bfloat16 compute in float32, as on the CPU. */
#include "ctorch/dispatch.h"
#include "elementwise.cuh"

static __device__ __forceinline__ float d_exp(float x) { return expf(x); }
static __device__ __forceinline__ double d_exp(double x) { return exp(x); }
static __device__ __forceinline__ float d_log(float x) { return logf(x); }
static __device__ __forceinline__ double d_log(double x) { return log(x); }
static __device__ __forceinline__ float d_sqrt(float x) { return sqrtf(x); }
static __device__ __forceinline__ double d_sqrt(double x) { return sqrt(x); }
static __device__ __forceinline__ float d_sin(float x) { return sinf(x); }
static __device__ __forceinline__ double d_sin(double x) { return sin(x); }
static __device__ __forceinline__ float d_cos(float x) { return cosf(x); }
static __device__ __forceinline__ double d_cos(double x) { return cos(x); }
static __device__ __forceinline__ float d_tanh(float x) { return tanhf(x); }
static __device__ __forceinline__ double d_tanh(double x) { return tanh(x); }

/* Unsigned negation wraps and abs of an unsigned value is itself, as on the CPU. */
struct op_neg {
    template <typename C> __device__ C operator()(C x) const { return (C)-x; }
};
struct op_abs {
    template <typename C> __device__ C operator()(C x) const {
        if constexpr (std::is_unsigned<C>::value)
            return x;
        else
            return x < 0 ? (C)-x : x;
    }
};
/* relu keeps NaN. */
struct op_relu {
    template <typename C> __device__ C operator()(C x) const { return x > 0 ? x : (x != x ? x : (C)0); }
};
#define CT_FLOAT_OP(name, EXPR)                                         \
    struct op_##name {                                                  \
        template <typename C> __device__ C operator()(C x) const { return EXPR; } \
    };
CT_FLOAT_OP(exp, d_exp(x))
CT_FLOAT_OP(log, d_log(x))
CT_FLOAT_OP(sqrt, d_sqrt(x))
CT_FLOAT_OP(sin, d_sin(x))
CT_FLOAT_OP(cos, d_cos(x))
CT_FLOAT_OP(tanh, d_tanh(x))
CT_FLOAT_OP(sigmoid, (C)1 / ((C)1 + d_exp(-x)))

static int groups_of(int op) {
    switch (op) {
    case CT_OP_neg:
    case CT_OP_abs: return CT_EW_ALL; /* bool too, as PyTorch's CUDA abs */
    case CT_OP_relu: return CT_EW_FLOAT | CT_EW_INT;
    case CT_OP_exp:
    case CT_OP_log:
    case CT_OP_sqrt:
    case CT_OP_sin:
    case CT_OP_cos:
    case CT_OP_tanh:
    case CT_OP_sigmoid: return CT_EW_FLOAT;
    default: return 0;
    }
}

extern "C" bool ct_cuda_unary_supported(int op, ct_dtype dtype) { return ct_ew_in_groups(groups_of(op), dtype); }

extern "C" ct_status ct_cuda_unary(int op, ct_dtype dt, const ct_cuda_iter_desc *d, int device) {
    const char *name = ct_op_name(op);
    switch (op) {
    case CT_OP_neg: return ew_dispatch<1, false, CT_EW_FLOAT | CT_EW_INT>(dt, d, op_neg(), device, name);
    case CT_OP_abs: return ew_dispatch<1, false, CT_EW_ALL>(dt, d, op_abs(), device, name);
    case CT_OP_relu: return ew_dispatch<1, false, CT_EW_FLOAT | CT_EW_INT>(dt, d, op_relu(), device, name);
    case CT_OP_exp: return ew_dispatch<1, false, CT_EW_FLOAT>(dt, d, op_exp(), device, name);
    case CT_OP_log: return ew_dispatch<1, false, CT_EW_FLOAT>(dt, d, op_log(), device, name);
    case CT_OP_sqrt: return ew_dispatch<1, false, CT_EW_FLOAT>(dt, d, op_sqrt(), device, name);
    case CT_OP_sin: return ew_dispatch<1, false, CT_EW_FLOAT>(dt, d, op_sin(), device, name);
    case CT_OP_cos: return ew_dispatch<1, false, CT_EW_FLOAT>(dt, d, op_cos(), device, name);
    case CT_OP_tanh: return ew_dispatch<1, false, CT_EW_FLOAT>(dt, d, op_tanh(), device, name);
    case CT_OP_sigmoid: return ew_dispatch<1, false, CT_EW_FLOAT>(dt, d, op_sigmoid(), device, name);
    default: return ct_error(CT_ERROR_NOT_IMPLEMENTED, name, "no CUDA kernel for this unary op");
    }
}
