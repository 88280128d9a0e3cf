/* CUDA kernels of the binary elementwise ops beyond arithmetic: div's rounding modes,
 * floor_divide, remainder, fmod, pow, atan2, hypot, copysign, fmax/fmin, bitwise ops,
 * shifts, clamp_min/clamp_max; and the zero-divisor scan. The expressions are the
 * CPU's (src/cpu/binary_math.c): integer results, rounding divisions and remainders
 * match bit for bit; pow, atan2 and hypot to a few ulp (CUDA's math library). Integer
 * divisors were checked for zeros before any kernel runs (ZeroDivisionError). */
#include "ctorch/dispatch.h"
#include "elementwise.cuh"

template <typename C> using ct_unsigned_t = typename std::make_unsigned<C>::type;
template <typename C> using ct_signed_t = typename std::make_signed<C>::type;

/* ---------------------------------------------------------------- divisions */

template <typename C> static __device__ __forceinline__ C neg_wrap(C a) {
    return (C)((ct_unsigned_t<C>)0 - (ct_unsigned_t<C>)a);
}
static __device__ __forceinline__ float d_fmod(float a, float b) { return fmodf(a, b); }
static __device__ __forceinline__ double d_fmod(double a, double b) { return fmod(a, b); }
static __device__ __forceinline__ float d_floor(float a) { return floorf(a); }
static __device__ __forceinline__ double d_floor(double a) { return floor(a); }
static __device__ __forceinline__ float d_trunc(float a) { return truncf(a); }
static __device__ __forceinline__ double d_trunc(double a) { return trunc(a); }
static __device__ __forceinline__ float d_copysign(float a, float b) { return copysignf(a, b); }
static __device__ __forceinline__ double d_copysign(double a, double b) { return copysign(a, b); }

/* a / b toward zero; MIN / -1 wraps. */
struct op_div_trunc {
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_floating_point<C>::value) {
            return d_trunc(a / b);
        } else {
            if (b == (C)0)
                return (C)0; /* unreachable: zero divisors are refused before the launch */
            if constexpr (std::is_signed<C>::value)
                if (b == (C)-1)
                    return neg_wrap(a);
            return (C)(a / b);
        }
    }
};

/* Floor division on floats, as the CPU: from fmod, so that a == b * q + r holds as
 * closely as floats allow, then rounded to the nearest integer; b == 0 gives a / b. */
template <typename C> static __device__ __forceinline__ C div_floor_fp(C a, C b) {
    if (b == (C)0)
        return a / b;
    C mod = d_fmod(a, b);
    C div = (a - mod) / b;
    if (mod != (C)0 && (b < (C)0) != (mod < (C)0))
        div -= (C)1;
    if (div == (C)0)
        return d_copysign((C)0, a / b);
    C fl = d_floor(div);
    if (div - fl > (C)0.5)
        fl += (C)1;
    return fl;
}
struct op_div_floor {
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_floating_point<C>::value) {
            return div_floor_fp(a, b);
        } else {
            if (b == (C)0)
                return (C)0;
            if constexpr (std::is_signed<C>::value) {
                if (b == (C)-1)
                    return neg_wrap(a);
                return (C)(a / b - (((a % b) != 0) && ((a < 0) != (b < 0))));
            } else {
                return (C)(a / b);
            }
        }
    }
};

/* remainder: the sign of the divisor (Python's %); fmod: the sign of the dividend. */
struct op_remainder {
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_floating_point<C>::value) {
            C m = d_fmod(a, b);
            if (m != (C)0 && (b < (C)0) != (m < (C)0))
                m += b;
            return m;
        } else {
            if (b == (C)0)
                return (C)0;
            if constexpr (std::is_signed<C>::value) {
                if (b == (C)-1)
                    return (C)0;
                C r = (C)(a % b);
                return (C)(r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0));
            } else {
                return (C)(a % b);
            }
        }
    }
};
struct op_fmod {
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_floating_point<C>::value) {
            return d_fmod(a, b);
        } else {
            if (b == (C)0)
                return (C)0;
            if constexpr (std::is_signed<C>::value)
                if (b == (C)-1)
                    return (C)0;
            return (C)(a % b);
        }
    }
};

/* ---------------------------------------------------------------- pow */

/* Integer powers by squaring with wrap-around; a negative exponent gives 1 for base 1,
 * +-1 for base -1 and 0 otherwise. */
static __device__ __forceinline__ uint64_t powi_u(uint64_t base, uint64_t e) {
    uint64_t r = 1;
    while (e) {
        if (e & 1)
            r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}
static __device__ __forceinline__ int64_t powi_s(int64_t base, int64_t e) {
    if (e < 0) {
        if (base == 1)
            return 1;
        if (base == -1)
            return (e & 1) ? -1 : 1;
        return 0;
    }
    return (int64_t)powi_u((uint64_t)base, (uint64_t)e);
}
static __device__ __forceinline__ float d_pow(float a, float b) { return powf(a, b); }
static __device__ __forceinline__ double d_pow(double a, double b) { return pow(a, b); }
static __device__ __forceinline__ float d_sqrt(float a) { return sqrtf(a); }
static __device__ __forceinline__ double d_sqrt(double a) { return sqrt(a); }

struct op_pow {
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_floating_point<C>::value)
            return d_pow(a, b);
        else if constexpr (std::is_signed<C>::value)
            return (C)powi_s((int64_t)a, (int64_t)b);
        else
            return (C)powi_u((uint64_t)a, (uint64_t)b);
    }
};
/* pow(tensor, scalar) on floats: the CPU's shortcuts for the common exponents; the
 * second operand (the wrapped scalar) is ignored. */
struct op_pow_scalar {
    double e0;
    template <typename C> __device__ C operator()(C x, C unused) const {
        (void)unused;
        const C e = (C)e0, one = (C)1;
        if (e == (C)2)
            return x * x;
        if (e == (C)3)
            return x * x * x;
        if (e == (C)0.5)
            return d_sqrt(x);
        if (e == (C)-0.5)
            return one / d_sqrt(x);
        if (e == (C)-1)
            return one / x;
        if (e == (C)-2)
            return one / (x * x);
        return d_pow(x, e);
    }
};

/* ---------------------------------------------------------------- float-only */

struct op_atan2 {
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_same<C, float>::value)
            return atan2f(a, b);
        else
            return atan2(a, b);
    }
};
struct op_hypot {
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_same<C, float>::value)
            return hypotf(a, b);
        else
            return hypot(a, b);
    }
};
struct op_copysign {
    template <typename C> __device__ C operator()(C a, C b) const { return d_copysign(a, b); }
};

/* ---------------------------------------------------------------- fmax, fmin, clamp_min/max */

/* fmax/fmin ignore a NaN operand; clamp_min/clamp_max propagate it. */
struct op_fmax {
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_same<C, float>::value)
            return fmaxf(a, b);
        else if constexpr (std::is_same<C, double>::value)
            return fmax(a, b);
        else
            return a > b ? a : b;
    }
};
struct op_fmin {
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_same<C, float>::value)
            return fminf(a, b);
        else if constexpr (std::is_same<C, double>::value)
            return fmin(a, b);
        else
            return a < b ? a : b;
    }
};
struct op_clamp_min {
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_floating_point<C>::value)
            return a != a ? a : b != b ? b : (a < b ? b : a);
        else
            return a > b ? a : b;
    }
};
struct op_clamp_max {
    template <typename C> __device__ C operator()(C a, C b) const {
        if constexpr (std::is_floating_point<C>::value)
            return a != a ? a : b != b ? b : (a > b ? b : a);
        else
            return a < b ? a : b;
    }
};

/* ---------------------------------------------------------------- bitwise and shifts */

struct op_bitwise_and {
    template <typename C> __device__ C operator()(C a, C b) const { return (C)(a & b); }
};
struct op_bitwise_or {
    template <typename C> __device__ C operator()(C a, C b) const { return (C)(a | b); }
};
struct op_bitwise_xor {
    template <typename C> __device__ C operator()(C a, C b) const { return (C)(a ^ b); }
};
/* Note [Shifts past the width] (src/cpu/binary_math.c): a left shift by a negative
 * count or by the width or more gives 0; a right shift of a signed value fills with
 * the sign bit, of an unsigned value gives 0. Counts are read as signed. */
struct op_shl {
    template <typename C> __device__ C operator()(C a, C b) const {
        constexpr int BITS = (int)sizeof(C) * 8;
        if constexpr (std::is_signed<C>::value) {
            if (b < 0 || b >= (C)BITS)
                return (C)0;
            return (C)((ct_unsigned_t<C>)a << b);
        } else {
            if ((ct_signed_t<C>)b < 0 || b >= (C)BITS)
                return (C)0;
            return (C)((uint64_t)a << b);
        }
    }
};
struct op_shr {
    template <typename C> __device__ C operator()(C a, C b) const {
        constexpr int BITS = (int)sizeof(C) * 8;
        if constexpr (std::is_signed<C>::value) {
            if (b < 0 || b >= (C)(BITS - 1))
                return (C)(a >> (BITS - 1));
            return (C)(a >> b);
        } else {
            if ((ct_signed_t<C>)b < 0 || b >= (C)BITS)
                return (C)0;
            return (C)(a >> b);
        }
    }
};

/* ---------------------------------------------------------------- dispatch */

/* The dtype groups of each op: the CPU's loop tables. */
static int groups_of(int op, int variant) {
    switch (variant) {
    case CT_CUDA_V_DIV_TRUNC:
    case CT_CUDA_V_DIV_FLOOR: return op == CT_OP_div ? CT_EW_FLOAT | CT_EW_INT : 0;
    case CT_CUDA_V_POW_SCALAR: return op == CT_OP_pow ? CT_EW_FLOAT : 0;
    case CT_CUDA_V_CLAMP_MIN:
    case CT_CUDA_V_CLAMP_MAX: return op == CT_OP_clamp ? CT_EW_ALL : 0;
    case CT_CUDA_V_DEFAULT: break;
    default: return 0;
    }
    switch (op) {
    case CT_OP_floor_divide:
    case CT_OP_remainder:
    case CT_OP_fmod:
    case CT_OP_pow: return CT_EW_FLOAT | CT_EW_INT;
    case CT_OP_atan2:
    case CT_OP_hypot:
    case CT_OP_copysign: return CT_EW_FLOAT;
    case CT_OP_fmax:
    case CT_OP_fmin:
    case CT_OP_clamp_min:
    case CT_OP_clamp_max: return CT_EW_ALL;
    case CT_OP_bitwise_and:
    case CT_OP_bitwise_or:
    case CT_OP_bitwise_xor: return CT_EW_INT | CT_EW_BOOL;
    case CT_OP_bitwise_left_shift:
    case CT_OP_bitwise_right_shift: return CT_EW_INT;
    default: return 0;
    }
}

extern "C" bool ct_cuda_binary_math_supported(int op, int variant, ct_dtype dtype) {
    return ct_ew_in_groups(groups_of(op, variant), dtype);
}

extern "C" ct_status ct_cuda_binary_math(int op, ct_dtype dt, const ct_cuda_iter_desc *d, const ct_cuda_params *p,
                                         int device) {
    const char *name = ct_op_name(op);
    const int FI = CT_EW_FLOAT | CT_EW_INT, IB = CT_EW_INT | CT_EW_BOOL;
    switch (p->variant) {
    case CT_CUDA_V_DIV_TRUNC: return ew_dispatch<2, false, FI>(dt, d, op_div_trunc(), device, name);
    case CT_CUDA_V_DIV_FLOOR: return ew_dispatch<2, false, FI>(dt, d, op_div_floor(), device, name);
    case CT_CUDA_V_POW_SCALAR:
        return ew_dispatch<2, false, CT_EW_FLOAT>(dt, d, op_pow_scalar{p->p[0]}, device, name);
    case CT_CUDA_V_CLAMP_MIN: return ew_dispatch<2, false, CT_EW_ALL>(dt, d, op_clamp_min(), device, name);
    case CT_CUDA_V_CLAMP_MAX: return ew_dispatch<2, false, CT_EW_ALL>(dt, d, op_clamp_max(), device, name);
    default: break;
    }
    switch (op) {
    case CT_OP_floor_divide: return ew_dispatch<2, false, FI>(dt, d, op_div_floor(), device, name);
    case CT_OP_remainder: return ew_dispatch<2, false, FI>(dt, d, op_remainder(), device, name);
    case CT_OP_fmod: return ew_dispatch<2, false, FI>(dt, d, op_fmod(), device, name);
    case CT_OP_pow: return ew_dispatch<2, false, FI>(dt, d, op_pow(), device, name);
    case CT_OP_atan2: return ew_dispatch<2, false, CT_EW_FLOAT>(dt, d, op_atan2(), device, name);
    case CT_OP_hypot: return ew_dispatch<2, false, CT_EW_FLOAT>(dt, d, op_hypot(), device, name);
    case CT_OP_copysign: return ew_dispatch<2, false, CT_EW_FLOAT>(dt, d, op_copysign(), device, name);
    case CT_OP_fmax: return ew_dispatch<2, false, CT_EW_ALL>(dt, d, op_fmax(), device, name);
    case CT_OP_fmin: return ew_dispatch<2, false, CT_EW_ALL>(dt, d, op_fmin(), device, name);
    case CT_OP_clamp_min: return ew_dispatch<2, false, CT_EW_ALL>(dt, d, op_clamp_min(), device, name);
    case CT_OP_clamp_max: return ew_dispatch<2, false, CT_EW_ALL>(dt, d, op_clamp_max(), device, name);
    case CT_OP_bitwise_and: return ew_dispatch<2, false, IB>(dt, d, op_bitwise_and(), device, name);
    case CT_OP_bitwise_or: return ew_dispatch<2, false, IB>(dt, d, op_bitwise_or(), device, name);
    case CT_OP_bitwise_xor: return ew_dispatch<2, false, IB>(dt, d, op_bitwise_xor(), device, name);
    case CT_OP_bitwise_left_shift: return ew_dispatch<2, false, CT_EW_INT>(dt, d, op_shl(), device, name);
    case CT_OP_bitwise_right_shift: return ew_dispatch<2, false, CT_EW_INT>(dt, d, op_shr(), device, name);
    default: return ct_error(CT_ERROR_NOT_IMPLEMENTED, name, "no CUDA kernel for this binary op");
    }
}

/* ---------------------------------------------------------------- zero divisors */

template <typename T>
static __global__ void __launch_bounds__(CT_CUDA_THREADS) any_zero_kernel(ct_cuda_iter_desc d, int k, int *flag) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < d.numel; i += stride) {
        int64_t off = 0, rest = i;
        for (int dim = 0; dim < d.ndim; dim++) {
            int64_t q = rest / d.shape[dim];
            off += (rest - q * d.shape[dim]) * d.strides[dim][k];
            rest = q;
        }
        if (*(const T *)(d.data[k] + off) == (T)0)
            *(volatile int *)flag = 1; /* every writer stores the same value */
    }
}

extern "C" ct_status ct_cuda_any_zero(ct_dtype dt, const ct_cuda_iter_desc *d, int k, int *flag, int device) {
    if (d->numel == 0)
        return CT_OK;
    if (k < 0 || k >= d->ntensors)
        return ct_error(CT_ERROR_VALUE, "div", "operand %d out of range", k);
    unsigned grid = ct_grid_for(d->numel, device);
    cudaStream_t s = ct_stream_of(device);
    switch (dt) {
    case CT_DTYPE_UINT8: any_zero_kernel<uint8_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, k, flag); break;
    case CT_DTYPE_INT8: any_zero_kernel<int8_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, k, flag); break;
    case CT_DTYPE_INT16: any_zero_kernel<int16_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, k, flag); break;
    case CT_DTYPE_INT32: any_zero_kernel<int32_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, k, flag); break;
    case CT_DTYPE_INT64: any_zero_kernel<int64_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, k, flag); break;
    case CT_DTYPE_UINT16: any_zero_kernel<uint16_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, k, flag); break;
    case CT_DTYPE_UINT32: any_zero_kernel<uint32_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, k, flag); break;
    case CT_DTYPE_UINT64: any_zero_kernel<uint64_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, k, flag); break;
    default: return CT_OK; /* floats divide by zero into inf/NaN */
    }
    return ct_cuda_check_launch("div");
}
