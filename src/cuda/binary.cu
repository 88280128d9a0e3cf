/* CUDA kernels of the binary arithmetic ops (add sub mul div maximum minimum).
 * Integers wrap in two's complement, floats propagate NaN through maximum/minimum,
 * as the CPU loops do. */
#include "ctorch/dispatch.h"
#include "elementwise.cuh"

template <typename C> static __device__ __forceinline__ C wrap_add(C a, C b) { return (C)((uint64_t)a + (uint64_t)b); }
template <typename C> static __device__ __forceinline__ C wrap_mul(C a, C b) { return (C)((uint64_t)a * (uint64_t)b); }

struct op_add {
    double alpha;
    int64_t ialpha;
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_floating_point<C>::value)
            return a + (C)alpha * b;
        else
            return wrap_add(a, wrap_mul(b, (C)ialpha));
    }
};
struct op_sub {
    double alpha;
    int64_t ialpha;
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_floating_point<C>::value)
            return a - (C)alpha * b;
        else
            return (C)((uint64_t)a - (uint64_t)wrap_mul(b, (C)ialpha));
    }
};
struct op_mul {
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_floating_point<C>::value)
            return a * b;
        else
            return wrap_mul(a, b);
    }
};
struct op_div {
    template <typename C> __device__ C operator()(C a, C b) const { return a / b; }
};
struct op_maximum {
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_floating_point<C>::value)
            if (a != a || b != b)
                return a != a ? a : b;
        return a > b ? a : b;
    }
};
struct op_minimum {
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_floating_point<C>::value)
            if (a != a || b != b)
                return a != a ? a : b;
        return a < b ? a : b;
    }
};

static int groups_of(int op) {
    switch (op) {
    case CT_OP_add:
    case CT_OP_sub:
    case CT_OP_mul:
    case CT_OP_maximum:
    case CT_OP_minimum: return CT_EW_ALL;
    case CT_OP_div: return CT_EW_FLOAT;
    default: return 0;
    }
}

extern "C" bool ct_cuda_binary_supported(int op, ct_dtype dtype) { return ct_ew_in_groups(groups_of(op), dtype); }

extern "C" ct_status ct_cuda_binary(int op, ct_dtype dt, const ct_cuda_iter_desc *d, const ct_cuda_params *p,
                                    int device) {
    const char *name = ct_op_name(op);
    switch (op) {
    case CT_OP_add: return ew_dispatch<2, false, CT_EW_ALL>(dt, d, op_add{p->alpha, p->ialpha}, device, name);
    case CT_OP_sub: return ew_dispatch<2, false, CT_EW_ALL>(dt, d, op_sub{p->alpha, p->ialpha}, device, name);
    case CT_OP_mul: return ew_dispatch<2, false, CT_EW_ALL>(dt, d, op_mul(), device, name);
    case CT_OP_div: return ew_dispatch<2, false, CT_EW_FLOAT>(dt, d, op_div(), device, name);
    case CT_OP_maximum: return ew_dispatch<2, false, CT_EW_ALL>(dt, d, op_maximum(), device, name);
    case CT_OP_minimum: return ew_dispatch<2, false, CT_EW_ALL>(dt, d, op_minimum(), device, name);
    default: return ct_error(CT_ERROR_NOT_IMPLEMENTED, name, "no CUDA kernel for this binary op");
    }
}
