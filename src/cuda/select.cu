/* CUDA kernels of nonzero and masked_select, whose output size depends on the data:
 * one pass flags the selected elements (row-major over the shape, through strides), a
 * CUB inclusive sum turns the flags into output positions in place, the host reads the
 * last one (the count) and allocates the output, and a second pass writes each
 * selected element at its position. The order is row-major, as on the CPU. */
#include <cub/device/device_scan.cuh>

#include "casts.cuh"

/* Element offset of row-major element k over d's shape, through strides st. */
static __device__ __forceinline__ int64_t select_offset(const ct_cuda_select_desc &d, int64_t k, const int64_t *st) {
    int64_t off = 0;
    for (int i = d.nd - 1; i >= 0; i--) {
        int64_t q = k / d.shape[i];
        off += (k - q * d.shape[i]) * st[i];
        k = q;
    }
    return off;
}

/* The CPU's test: floating values compare with zero (so -0 is zero and NaN is not),
 * other dtypes are nonzero when any byte is. */
static __device__ __forceinline__ bool elem_nonzero(const char *p, int dt, int64_t esz) {
    switch (dt) {
    case CT_DTYPE_FLOAT16:
    case CT_DTYPE_BFLOAT16:
    case CT_DTYPE_FLOAT32:
    case CT_DTYPE_FLOAT64: return cast_load(p, dt).f != 0;
    default: break;
    }
    switch (esz) {
    case 1: return *(const uint8_t *)p != 0;
    case 2: return *(const uint16_t *)p != 0;
    case 4: return *(const uint32_t *)p != 0;
    default: return *(const uint64_t *)p != 0;
    }
}

static __global__ void flag_kernel(const char *tested, int dt, int64_t esz, ct_cuda_select_desc d, int64_t *flags) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < d.n; k += stride)
        flags[k] = elem_nonzero(tested + select_offset(d, k, d.tstr) * esz, dt, esz) ? 1 : 0;
}

/* pos: the inclusive sums; element k is selected when its sum exceeds the one before,
 * and goes to row pos[k] - 1. */
static __global__ void nonzero_fill_kernel(const int64_t *pos, ct_cuda_select_desc d, int64_t *out) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < d.n; k += stride) {
        int64_t before = k ? pos[k - 1] : 0;
        if (pos[k] == before)
            continue;
        int64_t *row = out + before * d.nd, r = k;
        for (int i = d.nd - 1; i >= 0; i--) {
            int64_t q = r / d.shape[i];
            row[i] = r - q * d.shape[i];
            r = q;
        }
    }
}

template <typename T>
static __global__ void masked_select_fill_kernel(const int64_t *pos, ct_cuda_select_desc d, const T *values, T *out) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < d.n; k += stride) {
        int64_t before = k ? pos[k - 1] : 0;
        if (pos[k] != before)
            out[before] = values[select_offset(d, k, d.vstr)];
    }
}

static size_t align_up(size_t n) { return (n + 255) & ~(size_t)255; }

static size_t scan_bytes(int64_t n) {
    size_t bytes = 0;
    cub::DeviceScan::InclusiveSum((void *)NULL, bytes, (int64_t *)NULL, (int)n);
    return bytes;
}

/* Scratch layout: the n flags (then positions), CUB's temporary storage. */
extern "C" size_t ct_cuda_select_scratch(int64_t n) {
    if (n <= 0 || n > INT32_MAX)
        return 256;
    return align_up((size_t)n * 8) + align_up(scan_bytes(n));
}

extern "C" ct_status ct_cuda_select_count(const ct_cuda_select_desc *d, const void *tested, ct_dtype dt, void *scratch,
                                          int64_t *count, int device, const char *op) {
    *count = 0;
    if (d->n == 0)
        return CT_OK;
    if (d->n > INT32_MAX) /* CUB's item counts are 32-bit in older toolkits */
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "more than 2^31 - 1 elements are not supported on CUDA");
    cudaStream_t s = ct_stream_of(device);
    int64_t *flags = (int64_t *)scratch;
    void *temp = (char *)scratch + align_up((size_t)d->n * 8);
    size_t temp_bytes = scan_bytes(d->n);
    flag_kernel<<<ct_grid_for(d->n, device), CT_CUDA_THREADS, 0, s>>>((const char *)tested, (int)dt,
                                                                      (int64_t)ct_dtype_size(dt), *d, flags);
    ct_status st = ct_cuda_check_launch(op);
    if (st != CT_OK)
        return st;
    cudaError_t e = cub::DeviceScan::InclusiveSum(temp, temp_bytes, flags, (int)d->n, s);
    if (e != cudaSuccess)
        return ct_error(CT_ERROR_DEVICE, op, "CUDA prefix sum failed: %s", cudaGetErrorString(e));
    if ((st = ct_cuda_check_launch(op)) != CT_OK)
        return st;
    return ct_cuda_memcpy(count, flags + (d->n - 1), sizeof *count, 1, device, op);
}

extern "C" ct_status ct_cuda_nonzero_fill(const ct_cuda_select_desc *d, const void *scratch, int64_t *out, int device,
                                          const char *op) {
    if (d->n == 0 || d->nd == 0)
        return CT_OK;
    nonzero_fill_kernel<<<ct_grid_for(d->n, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        (const int64_t *)scratch, *d, out);
    return ct_cuda_check_launch(op);
}

extern "C" ct_status ct_cuda_masked_select_fill(const ct_cuda_select_desc *d, const void *scratch, const void *values,
                                                size_t esz, void *out, int device, const char *op) {
    if (d->n == 0)
        return CT_OK;
    unsigned grid = ct_grid_for(d->n, device);
    cudaStream_t s = ct_stream_of(device);
    const int64_t *pos = (const int64_t *)scratch;
    switch (esz) {
    case 1: masked_select_fill_kernel<uint8_t><<<grid, CT_CUDA_THREADS, 0, s>>>(pos, *d, (const uint8_t *)values, (uint8_t *)out); break;
    case 2: masked_select_fill_kernel<uint16_t><<<grid, CT_CUDA_THREADS, 0, s>>>(pos, *d, (const uint16_t *)values, (uint16_t *)out); break;
    case 4: masked_select_fill_kernel<uint32_t><<<grid, CT_CUDA_THREADS, 0, s>>>(pos, *d, (const uint32_t *)values, (uint32_t *)out); break;
    case 8: masked_select_fill_kernel<uint64_t><<<grid, CT_CUDA_THREADS, 0, s>>>(pos, *d, (const uint64_t *)values, (uint64_t *)out); break;
    default: return ct_error(CT_ERROR_TYPE, op, "no CUDA kernel for elements of %zu bytes", esz);
    }
    return ct_cuda_check_launch(op);
}
