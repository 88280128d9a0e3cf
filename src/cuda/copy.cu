/* Copy family: strided copies with dtype conversion, and fills. The conversions are
 * those of Note [Casts] in src/core/copy.c, so a tensor converted on the GPU holds the
 * same bits as one converted on the CPU. */
#include "casts.cuh"
#include "elementwise.cuh"

static __global__ void cast_kernel(ct_cuda_iter_desc d, int dst_dt, int src_dt) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < d.numel; i += stride) {
        int64_t off[2];
        ct_offsets<2>(d, i, off);
        cast_store(d.data[0] + off[0], dst_dt, cast_load(d.data[1] + off[1], src_dt));
    }
}

/* Note [Copy paths]
 * Copies and the casts between the floating dtypes take the elementwise engine's paths
 * (Note [GPU elementwise paths]): 16-byte vectors where both sides are dense, 32-bit
 * offsets where a strided walk fits them. The conversions are ct_load/ct_store's, the
 * same rounding as cast_load/cast_store. The generic cast_kernel (a switch on both
 * dtypes per element, 64-bit offsets) keeps the other pairs. On an H200 profile of a
 * GPT-2 bf16 training step, autocast's casts took 45% of the GPU time through
 * cast_kernel: about 0.36 ms for a 25M-element float32 -> bfloat16 cast, a tenth of
 * the bandwidth the elementwise kernels reach. */
struct op_same {
    template <typename C> __device__ __forceinline__ C operator()(C x) const { return x; }
};

template <typename Out>
static bool float_cast_to(const ct_cuda_iter_desc *d, ct_dtype src, int device, ct_status *st) {
    switch (src) {
    case CT_DTYPE_FLOAT32: *st = ew_launch<1, Out, float>(d, op_same(), device, "copy_"); return true;
    case CT_DTYPE_BFLOAT16: *st = ew_launch<1, Out, ct_bf16_s>(d, op_same(), device, "copy_"); return true;
    case CT_DTYPE_FLOAT16: *st = ew_launch<1, Out, ct_half_s>(d, op_same(), device, "copy_"); return true;
    case CT_DTYPE_FLOAT64: *st = ew_launch<1, Out, double>(d, op_same(), device, "copy_"); return true;
    default: return false;
    }
}

static bool float_cast(const ct_cuda_iter_desc *d, ct_dtype dst, ct_dtype src, int device, ct_status *st) {
    switch (dst) {
    case CT_DTYPE_FLOAT32: return float_cast_to<float>(d, src, device, st);
    case CT_DTYPE_BFLOAT16: return float_cast_to<ct_bf16_s>(d, src, device, st);
    case CT_DTYPE_FLOAT16: return float_cast_to<ct_half_s>(d, src, device, st);
    case CT_DTYPE_FLOAT64: return float_cast_to<double>(d, src, device, st);
    default: return false;
    }
}

/* A strided copy whose innermost dim is dense on both sides (a transpose of (B, T, H, D)
 * into (B, H, T, D) moves rows of D elements) moves words of up to 16 bytes along it:
 * d is rewritten to count words, and the word size is returned (esize when no wider
 * word divides the rows, the other strides and both pointers). Dense copies keep
 * esize: the contiguous path already moves 16-byte vectors. */
static int widen_rows(ct_cuda_iter_desc *d, int64_t esize) {
    if (d->ndim < 2 || d->strides[0][0] != esize || d->strides[0][1] != esize)
        return (int)esize;
    for (int64_t wsz = 16; wsz > esize; wsz /= 2) {
        bool ok = (d->shape[0] * esize) % wsz == 0 && (uintptr_t)d->data[0] % (uintptr_t)wsz == 0 &&
                  (uintptr_t)d->data[1] % (uintptr_t)wsz == 0;
        for (int i = 1; i < d->ndim && ok; i++)
            ok = d->strides[i][0] % wsz == 0 && d->strides[i][1] % wsz == 0;
        if (ok) {
            int64_t k = wsz / esize;
            d->shape[0] /= k;
            d->numel /= k;
            d->strides[0][0] = d->strides[0][1] = wsz;
            return (int)wsz;
        }
    }
    return (int)esize;
}

extern "C" ct_status ct_cuda_copy_kernel(const ct_cuda_iter_desc *d, ct_dtype dst_dtype, ct_dtype src_dtype,
                                         int device) {
    if (d->numel == 0)
        return CT_OK;
    /* Note [Casts] for float16 to float32 etc.: converting through the loaded value
     * gives the same bits, so only identical dtypes take the word-moving path. */
    if (dst_dtype == src_dtype) {
        ct_cuda_iter_desc w = *d;
        switch (widen_rows(&w, (int64_t)ct_dtype_size(dst_dtype))) {
        case 1: return ew_launch<1, uint8_t, uint8_t>(&w, op_same(), device, "copy_");
        case 2: return ew_launch<1, uint16_t, uint16_t>(&w, op_same(), device, "copy_");
        case 4: return ew_launch<1, uint32_t, uint32_t>(&w, op_same(), device, "copy_");
        case 8: return ew_launch<1, uint64_t, uint64_t>(&w, op_same(), device, "copy_");
        default: return ew_launch<1, uint4, uint4>(&w, op_same(), device, "copy_");
        }
    }
    ct_status st;
    if (float_cast(d, dst_dtype, src_dtype, device, &st))
        return st;
    cast_kernel<<<ct_grid_for(d->numel, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(*d, (int)dst_dtype,
                                                                                          (int)src_dtype);
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
