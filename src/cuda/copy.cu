/* Copy family: strided copies with dtype conversion, and fills. The conversions are
 * those of Note [Casts] in src/core/copy.c, so a tensor converted on the GPU holds the
 * same bits as one converted on the CPU. */
#include "casts.cuh"

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
