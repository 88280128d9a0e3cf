/* CUDA kernels of the unary ops that are exact on every dtype: sign, rounding, frac,
 * square, nan_to_num, logical_not, bitwise_not and the predicates. They match the CPU
 * bit for bit (rounding is correctly rounded on both sides). */
#include "ctorch/dispatch.h"
#include "elementwise.cuh"

/* NaN has no sign: (0 < NaN) - (NaN < 0) is 0. For bool (0/1) this is the value. */
struct op_sign {
    template <typename C> __device__ C operator()(C x) const { return (C)((int)((C)0 < x) - (int)ct_is_neg(x)); }
};
#define CT_ROUND_OP(name, FF, FD)                                                                 \
    struct op_##name {                                                                            \
        template <typename C> __device__ C operator()(C x) const {                                \
            if constexpr (std::is_same<C, float>::value)                                          \
                return FF(x);                                                                     \
            else if constexpr (std::is_same<C, double>::value)                                    \
                return FD(x);                                                                     \
            else                                                                                  \
                return x; /* integers round to themselves */                                      \
        }                                                                                         \
    };
CT_ROUND_OP(floor, floorf, floor)
CT_ROUND_OP(ceil, ceilf, ceil)
CT_ROUND_OP(trunc, truncf, trunc)
/* Halves to even. */
CT_ROUND_OP(round, rintf, rint)

/* round(decimals): p0 = 10^|d|, neg for d < 0. float16/bfloat16 compute in float and
 * round to the dtype once, as the CPU (PyTorch 2.x). */
struct op_round_dec {
    double p0;
    bool neg;
    template <typename C> __device__ C operator()(C x) const {
        if constexpr (std::is_same<C, double>::value) {
            return neg ? rint(x / p0) * p0 : rint(x * p0) / p0;
        } else {
            float s = (float)p0;
            return neg ? rintf(x / s) * s : rintf(x * s) / s;
        }
    }
};

struct op_frac {
    template <typename C> __device__ C operator()(C x) const {
        if constexpr (std::is_same<C, float>::value)
            return x - truncf(x);
        else
            return x - trunc(x);
    }
};

/* Integer squares wrap around. */
struct op_square {
    template <typename C> __device__ C operator()(C x) const {
        if constexpr (std::is_floating_point<C>::value)
            return x * x;
        else
            return (C)((uint64_t)x * (uint64_t)x);
    }
};

/* p[0..2]: the replacements of NaN, +inf and -inf, resolved to the dtype's defaults. */
struct op_nan_to_num {
    double nan_v, pos_v, neg_v;
    template <typename C> __device__ C operator()(C x) const {
        if constexpr (std::is_floating_point<C>::value) {
            if (x != x)
                return (C)nan_v;
            if (isinf(x))
                return x > 0 ? (C)pos_v : (C)neg_v;
        }
        return x;
    }
};

struct op_logical_not {
    template <typename C> __device__ bool operator()(C x) const { return x == (C)0; }
};
struct op_isnan {
    template <typename C> __device__ bool operator()(C x) const { return x != x; }
};
struct op_isinf {
    template <typename C> __device__ bool operator()(C x) const {
        if constexpr (std::is_floating_point<C>::value)
            return isinf(x);
        else
            return false;
    }
};
struct op_isfinite {
    template <typename C> __device__ bool operator()(C x) const {
        if constexpr (std::is_floating_point<C>::value)
            return isfinite(x);
        else
            return true;
    }
};
struct op_bitwise_not {
    template <typename C> __device__ C operator()(C x) const { return (C)~x; }
};
struct op_bool_not {
    template <typename C> __device__ C operator()(C x) const { return (C)!x; }
};

/* The dtype groups of each op: the CPU's loop tables (src/cpu/unary_math.c). */
static int groups_of(int op, int variant) {
    if (variant == CT_CUDA_V_ROUND_DECIMALS)
        return op == CT_OP_round ? CT_EW_FLOAT : 0;
    if (variant != CT_CUDA_V_DEFAULT)
        return 0;
    switch (op) {
    case CT_OP_sign:
    case CT_OP_sgn:
    case CT_OP_nan_to_num:
    case CT_OP_logical_not:
    case CT_OP_isnan:
    case CT_OP_isinf:
    case CT_OP_isfinite:
    case CT_OP_bitwise_not: return op == CT_OP_bitwise_not ? CT_EW_INT | CT_EW_BOOL : CT_EW_ALL;
    case CT_OP_floor:
    case CT_OP_ceil:
    case CT_OP_round:
    case CT_OP_trunc:
    case CT_OP_square: return CT_EW_FLOAT | CT_EW_INT;
    case CT_OP_frac: return CT_EW_FLOAT;
    default: return 0;
    }
}

extern "C" bool ct_cuda_unary_misc_supported(int op, int variant, ct_dtype dtype) {
    return ct_ew_in_groups(groups_of(op, variant), dtype);
}

extern "C" ct_status ct_cuda_unary_misc(int op, ct_dtype dt, const ct_cuda_iter_desc *d, const ct_cuda_params *p,
                                        int device) {
    const char *name = ct_op_name(op);
    if (p->variant == CT_CUDA_V_ROUND_DECIMALS) {
        op_round_dec f{p->p[0], p->p[1] != 0};
        return ew_dispatch<1, false, CT_EW_FLOAT>(dt, d, f, device, name);
    }
    const int FI = CT_EW_FLOAT | CT_EW_INT;
    switch (op) {
    case CT_OP_sign:
    case CT_OP_sgn: return ew_dispatch<1, false, CT_EW_ALL>(dt, d, op_sign(), device, name);
    case CT_OP_floor: return ew_dispatch<1, false, FI>(dt, d, op_floor(), device, name);
    case CT_OP_ceil: return ew_dispatch<1, false, FI>(dt, d, op_ceil(), device, name);
    case CT_OP_round: return ew_dispatch<1, false, FI>(dt, d, op_round(), device, name);
    case CT_OP_trunc: return ew_dispatch<1, false, FI>(dt, d, op_trunc(), device, name);
    case CT_OP_frac: return ew_dispatch<1, false, CT_EW_FLOAT>(dt, d, op_frac(), device, name);
    case CT_OP_square: return ew_dispatch<1, false, FI>(dt, d, op_square(), device, name);
    case CT_OP_nan_to_num:
        return ew_dispatch<1, false, CT_EW_ALL>(dt, d, op_nan_to_num{p->p[0], p->p[1], p->p[2]}, device, name);
    case CT_OP_logical_not: return ew_dispatch<1, true, CT_EW_ALL>(dt, d, op_logical_not(), device, name);
    case CT_OP_isnan: return ew_dispatch<1, true, CT_EW_ALL>(dt, d, op_isnan(), device, name);
    case CT_OP_isinf: return ew_dispatch<1, true, CT_EW_ALL>(dt, d, op_isinf(), device, name);
    case CT_OP_isfinite: return ew_dispatch<1, true, CT_EW_ALL>(dt, d, op_isfinite(), device, name);
    case CT_OP_bitwise_not:
        /* bool is stored as uint8, where ~1 would read as true: not, not complement. */
        if (dt == CT_DTYPE_BOOL)
            return ew_dispatch<1, false, CT_EW_BOOL>(dt, d, op_bool_not(), device, name);
        return ew_dispatch<1, false, CT_EW_INT>(dt, d, op_bitwise_not(), device, name);
    default: return ct_error(CT_ERROR_NOT_IMPLEMENTED, name, "no CUDA kernel for this unary op");
    }
}
