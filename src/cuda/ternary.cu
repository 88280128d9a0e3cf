/* CUDA kernels of the ternary elementwise ops: clamp (tensor bounds), lerp, addcmul,
 * addcdiv and where; lerp with a scalar weight runs the binary engine. The expressions
 * are the CPU's (src/cpu/ternary.c), with the same evaluation order: clamp, where and
 * the integer forms match bit for bit, lerp too (one fused multiply-add on both
 * sides), addcmul/addcdiv as well since their products are kept unfused. */
#include "ctorch/dispatch.h"
#include "elementwise.cuh"

static __device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
static __device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
static __device__ __forceinline__ float d_fma(float a, float b, float c) { return fmaf(a, b, c); }
static __device__ __forceinline__ double d_fma(double a, double b, double c) { return fma(a, b, c); }

/* ------------------------------------------------------------------ the engine */

/* MODE 0: at most one dim (offsets are i * stride); 1: 32-bit offset calculation;
 * 2: 64-bit. S1..S3 are the input storage types, OutS the output's. */
template <typename OutS, typename S1, typename S2, typename S3, int MODE, typename F>
static __global__ void __launch_bounds__(CT_CUDA_THREADS) tern_kernel(ct_cuda_iter_desc d, F f) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < d.numel; i += stride) {
        int64_t off[4];
        if constexpr (MODE == 0) {
#pragma unroll
            for (int k = 0; k < 4; k++)
                off[k] = d.ndim > 0 ? i * d.strides[0][k] : 0;
        } else if constexpr (MODE == 1) {
            ct_offsets32<4>(d, (uint32_t)i, off);
        } else {
            ct_offsets<4>(d, i, off);
        }
        auto a = ct_load(*(const S1 *)(d.data[1] + off[1]));
        auto b = ct_load(*(const S2 *)(d.data[2] + off[2]));
        auto c = ct_load(*(const S3 *)(d.data[3] + off[3]));
        *(OutS *)(d.data[0] + off[0]) = ct_store<OutS>(f(a, b, c));
    }
}

template <typename OutS, typename S1, typename S2, typename S3, typename F>
static ct_status tern_launch(const ct_cuda_iter_desc *d, const F &f, int device, const char *op) {
    if (d->numel == 0)
        return CT_OK;
    if (d->ntensors != 4)
        return ct_error(CT_ERROR_VALUE, op, "expected 3 operands, got %d", d->ntensors - 1);
    cudaStream_t s = ct_stream_of(device);
    unsigned grid = ct_grid_for(d->numel, device);
    if (d->ndim <= 1)
        tern_kernel<OutS, S1, S2, S3, 0><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, f);
    else if (ct_desc_fits32(d))
        tern_kernel<OutS, S1, S2, S3, 1><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, f);
    else
        tern_kernel<OutS, S1, S2, S3, 2><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, f);
    return ct_cuda_check_launch(op);
}

/* Every input and the output in compute dtype dt (groups: CT_EW_*). */
template <int GROUPS, typename F>
static ct_status tern_dispatch(ct_dtype dt, const ct_cuda_iter_desc *d, const F &f, int device, const char *op) {
#define CT_T_CASE(DT, S) \
    case DT: return tern_launch<S, S, S, S>(d, f, device, op);
    if constexpr ((GROUPS & CT_EW_FLOAT) != 0) {
        switch (dt) {
            CT_T_CASE(CT_DTYPE_FLOAT32, float)
            CT_T_CASE(CT_DTYPE_FLOAT64, double)
            CT_T_CASE(CT_DTYPE_FLOAT16, ct_half_s)
            CT_T_CASE(CT_DTYPE_BFLOAT16, ct_bf16_s)
        default: break;
        }
    }
    if constexpr ((GROUPS & CT_EW_INT) != 0) {
        switch (dt) {
            CT_T_CASE(CT_DTYPE_UINT8, uint8_t)
            CT_T_CASE(CT_DTYPE_INT8, int8_t)
            CT_T_CASE(CT_DTYPE_INT16, int16_t)
            CT_T_CASE(CT_DTYPE_INT32, int32_t)
            CT_T_CASE(CT_DTYPE_INT64, int64_t)
            CT_T_CASE(CT_DTYPE_UINT16, uint16_t)
            CT_T_CASE(CT_DTYPE_UINT32, uint32_t)
            CT_T_CASE(CT_DTYPE_UINT64, uint64_t)
        default: break;
        }
    }
#undef CT_T_CASE
    return ct_error(CT_ERROR_TYPE, op, "\"%s_cuda\" not implemented for '%s'", op, ct_dtype_name(dt));
}

/* ------------------------------------------------------------------ the ops */

/* clamp(a, min=b, max=c): a NaN bound gives NaN, a NaN input stays NaN, min is applied
 * first (min > max gives max). */
struct op_clamp {
    template <typename C> __device__ C operator()(C a, C lo, C hi) const {
        if constexpr (std::is_floating_point<C>::value) {
            if (lo != lo)
                return lo;
            if (hi != hi)
                return hi;
            if (a != a)
                return a;
        }
        C y = a < lo ? lo : a;
        return y > hi ? hi : y;
    }
};

/* lerp: exact at both ends, one fused multiply-add (as the CPU). */
template <typename C> static __device__ __forceinline__ C lerp_of(C a, C b, C w) {
    C absw = w < (C)0 ? -w : w;
    return absw < (C)0.5 ? d_fma(w, b - a, a) : d_fma(w - (C)1, b - a, b);
}
struct op_lerp {
    template <typename C> __device__ C operator()(C a, C b, C w) const { return lerp_of(a, b, w); }
};
struct op_lerp_scalar {
    double w;
    template <typename C> __device__ C operator()(C a, C b) const { return lerp_of(a, b, (C)w); }
};

/* a + value * b * c, left to right; integers wrap. */
struct op_addcmul {
    double alpha;
    int64_t ialpha;
    template <typename C> __device__ C operator()(C a, C b, C c) const {
        if constexpr (std::is_floating_point<C>::value)
            return a + mul_rn(mul_rn((C)alpha, b), c);
        else
            return (C)((uint64_t)a + (uint64_t)(C)((uint64_t)(C)((uint64_t)(C)ialpha * (uint64_t)b) * (uint64_t)c));
    }
};
struct op_addcdiv {
    double alpha;
    template <typename C> __device__ C operator()(C a, C b, C c) const { return a + mul_rn((C)alpha, b) / c; }
};

/* where(cond, a, b): values move as raw bytes of their width. */
struct op_where {
    template <typename T> __device__ T operator()(uint8_t c, T a, T b) const { return c ? a : b; }
};

template <typename T>
static ct_status where_launch(const ct_cuda_iter_desc *d, int device, const char *op) {
    return tern_launch<T, uint8_t, T, T>(d, op_where(), device, op);
}

static int groups_of(int op, int variant) {
    if (variant == CT_CUDA_V_LERP_SCALAR)
        return op == CT_OP_lerp ? CT_EW_FLOAT : 0;
    if (variant != CT_CUDA_V_DEFAULT)
        return 0;
    switch (op) {
    case CT_OP_clamp:
    case CT_OP_addcmul: return CT_EW_FLOAT | CT_EW_INT;
    case CT_OP_lerp:
    case CT_OP_addcdiv: return CT_EW_FLOAT;
    case CT_OP_where: return CT_EW_ALL;
    default: return 0;
    }
}

extern "C" bool ct_cuda_ternary_supported(int op, int variant, ct_dtype dtype) {
    return ct_ew_in_groups(groups_of(op, variant), dtype);
}

extern "C" ct_status ct_cuda_ternary(int op, ct_dtype dt, const ct_cuda_iter_desc *d, const ct_cuda_params *p,
                                     int device) {
    const char *name = ct_op_name(op);
    const int FI = CT_EW_FLOAT | CT_EW_INT;
    if (p->variant == CT_CUDA_V_LERP_SCALAR)
        return ew_dispatch<2, false, CT_EW_FLOAT>(dt, d, op_lerp_scalar{p->p[0]}, device, name);
    switch (op) {
    case CT_OP_clamp: return tern_dispatch<FI>(dt, d, op_clamp(), device, name);
    case CT_OP_lerp: return tern_dispatch<CT_EW_FLOAT>(dt, d, op_lerp(), device, name);
    case CT_OP_addcmul: return tern_dispatch<FI>(dt, d, op_addcmul{p->alpha, p->ialpha}, device, name);
    case CT_OP_addcdiv: return tern_dispatch<CT_EW_FLOAT>(dt, d, op_addcdiv{p->alpha}, device, name);
    case CT_OP_where:
        if ((int)dt < 0 || dt >= CT_DTYPE_COUNT)
            break;
        switch (ct_dtype_size(dt)) {
        case 1: return where_launch<uint8_t>(d, device, name);
        case 2: return where_launch<uint16_t>(d, device, name);
        case 4: return where_launch<uint32_t>(d, device, name);
        case 8: return where_launch<uint64_t>(d, device, name);
        default: break;
        }
        break;
    default: break;
    }
    return ct_error(CT_ERROR_NOT_IMPLEMENTED, name, "no CUDA kernel for this ternary op");
}
