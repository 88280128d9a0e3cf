/* Copy family: strided copies with dtype conversion, and fills. The conversions are
 * those of Note [Casts] in src/core/copy.c, so a tensor converted on the GPU holds the
 * same bits as one converted on the CPU. */
#include "kernels.cuh"

/* A loaded element: signed integers (and bool) as int64, uint64 as uint64, floating
 * values as double (exact for every source dtype). */
typedef struct {
    int kind; /* 0 int64, 1 uint64, 2 double */
    int64_t i;
    uint64_t u;
    double f;
} cast_val;

static __device__ __forceinline__ cast_val cast_load(const char *p, int dt) {
    cast_val v;
    v.kind = 0;
    v.i = 0;
    v.u = 0;
    v.f = 0;
    switch (dt) {
    case CT_DTYPE_BOOL: v.i = *(const uint8_t *)p != 0; break;
    case CT_DTYPE_UINT8: v.i = *(const uint8_t *)p; break;
    case CT_DTYPE_INT8: v.i = *(const int8_t *)p; break;
    case CT_DTYPE_INT16: v.i = *(const int16_t *)p; break;
    case CT_DTYPE_INT32: v.i = *(const int32_t *)p; break;
    case CT_DTYPE_INT64: v.i = *(const int64_t *)p; break;
    case CT_DTYPE_UINT16: v.i = *(const uint16_t *)p; break;
    case CT_DTYPE_UINT32: v.i = *(const uint32_t *)p; break;
    case CT_DTYPE_UINT64: v.kind = 1; v.u = *(const uint64_t *)p; break;
    case CT_DTYPE_FLOAT16: v.kind = 2; v.f = ct_dev_h2f(*(const uint16_t *)p); break;
    case CT_DTYPE_BFLOAT16: v.kind = 2; v.f = ct_dev_b2f(*(const uint16_t *)p); break;
    case CT_DTYPE_FLOAT32: v.kind = 2; v.f = *(const float *)p; break;
    default: v.kind = 2; v.f = *(const double *)p; break;
    }
    return v;
}

/* NaN, infinities and out-of-range values: see Note [Casts]. */
static __device__ __forceinline__ int64_t f2i64(double v) {
    if (!(v > -9223372036854775808.0 && v < 9223372036854775808.0))
        return INT64_MIN;
    return (int64_t)v;
}
static __device__ __forceinline__ int32_t f2i32(double v) {
    if (!(v > -2147483649.0 && v < 2147483648.0))
        return INT32_MIN;
    return (int32_t)v;
}
static __device__ __forceinline__ uint64_t f2u64(double v) {
    if (v >= 9223372036854775808.0 && v < 18446744073709551616.0)
        return (uint64_t)v;
    return (uint64_t)f2i64(v);
}

/* The value as an integer through int64 (wrap-around as in C), or the float rule. */
static __device__ __forceinline__ int64_t as_i64(const cast_val &v) {
    return v.kind == 0 ? v.i : v.kind == 1 ? (int64_t)v.u : f2i64(v.f);
}
static __device__ __forceinline__ int64_t as_i32(const cast_val &v) {
    return v.kind == 0 ? v.i : v.kind == 1 ? (int64_t)v.u : (int64_t)f2i32(v.f);
}
static __device__ __forceinline__ double as_f64(const cast_val &v) {
    return v.kind == 0 ? (double)v.i : v.kind == 1 ? (double)v.u : v.f;
}
/* Integers round straight to float32 (not through double), as the CPU does. */
static __device__ __forceinline__ float as_f32(const cast_val &v) {
    return v.kind == 0 ? (float)v.i : v.kind == 1 ? (float)v.u : (float)v.f;
}

static __device__ __forceinline__ void cast_store(char *p, int dt, const cast_val &v) {
    switch (dt) {
    case CT_DTYPE_BOOL:
        *(uint8_t *)p = v.kind == 0 ? v.i != 0 : v.kind == 1 ? v.u != 0 : v.f != 0;
        break;
    case CT_DTYPE_UINT8: *(uint8_t *)p = (uint8_t)as_i64(v); break;
    case CT_DTYPE_INT8: *(int8_t *)p = (int8_t)as_i32(v); break;
    case CT_DTYPE_INT16: *(int16_t *)p = (int16_t)as_i32(v); break;
    case CT_DTYPE_INT32: *(int32_t *)p = (int32_t)as_i32(v); break;
    case CT_DTYPE_INT64: *(int64_t *)p = as_i64(v); break;
    case CT_DTYPE_UINT16: *(uint16_t *)p = (uint16_t)as_i64(v); break;
    case CT_DTYPE_UINT32: *(uint32_t *)p = (uint32_t)as_i64(v); break;
    case CT_DTYPE_UINT64: *(uint64_t *)p = v.kind == 2 ? f2u64(v.f) : v.kind == 1 ? v.u : (uint64_t)v.i; break;
    case CT_DTYPE_FLOAT16: *(uint16_t *)p = ct_dev_f2h(as_f32(v)); break;
    case CT_DTYPE_BFLOAT16: *(uint16_t *)p = ct_dev_f2b(as_f32(v)); break;
    case CT_DTYPE_FLOAT32: *(float *)p = as_f32(v); break;
    default: *(double *)p = as_f64(v); break;
    }
}

static __global__ void cast_kernel(ct_cuda_iter_desc d, int dst_dt, int src_dt) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < d.numel; i += stride) {
        int64_t off[2];
        ct_offsets<2>(d, i, off);
        cast_store(d.data[0] + off[0], dst_dt, cast_load(d.data[1] + off[1], src_dt));
    }
}

/* Same-dtype strided copies move T-sized words. */
template <typename T> static __global__ void move_kernel(ct_cuda_iter_desc d) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < d.numel; i += stride) {
        int64_t off[2];
        ct_offsets<2>(d, i, off);
        *(T *)(d.data[0] + off[0]) = *(const T *)(d.data[1] + off[1]);
    }
}

extern "C" ct_status ct_cuda_copy_kernel(const ct_cuda_iter_desc *d, ct_dtype dst_dtype, ct_dtype src_dtype,
                                         int device) {
    if (d->numel == 0)
        return CT_OK;
    unsigned grid = ct_grid_for(d->numel, device);
    cudaStream_t s = ct_stream_of(device);
    bool same = dst_dtype == src_dtype;
    /* Note [Casts] for float16 to float32 etc.: converting through the loaded value
     * gives the same bits, so only identical dtypes take the word-moving path. */
    if (same) {
        switch (ct_dtype_size(dst_dtype)) {
        case 1: move_kernel<uint8_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d); break;
        case 2: move_kernel<uint16_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d); break;
        case 4: move_kernel<uint32_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d); break;
        default: move_kernel<uint64_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d); break;
        }
    } else {
        cast_kernel<<<grid, CT_CUDA_THREADS, 0, s>>>(*d, (int)dst_dtype, (int)src_dtype);
    }
    return ct_cuda_check_launch("copy_");
}

template <typename T> static __global__ void fill_kernel(ct_cuda_iter_desc d, T value) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < d.numel; i += stride) {
        int64_t off[1];
        ct_offsets<1>(d, i, off);
        *(T *)(d.data[0] + off[0]) = value;
    }
}

extern "C" ct_status ct_cuda_fill_kernel(const ct_cuda_iter_desc *d, const void *value, size_t esize, int device) {
    if (d->numel == 0)
        return CT_OK;
    unsigned grid = ct_grid_for(d->numel, device);
    cudaStream_t s = ct_stream_of(device);
    switch (esize) {
    case 1: fill_kernel<uint8_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, *(const uint8_t *)value); break;
    case 2: fill_kernel<uint16_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, *(const uint16_t *)value); break;
    case 4: fill_kernel<uint32_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, *(const uint32_t *)value); break;
    default: fill_kernel<uint64_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, *(const uint64_t *)value); break;
    }
    return ct_cuda_check_launch("fill_");
}
