/* CUDA kernels of the shape ops that move elements: flip and pad (one remapping of
 * output coordinates to input coordinates, as src/meta/pad.c and the CPU kernels do it
 * on the CPU) and tril/triu. Elements move as raw words of their width, so every
 * dtype takes the same kernels. */
#include "kernels.cuh"

/* Output element k (row-major over oshape) reads the input at the mapped coordinates,
 * or takes value where constant padding leaves the input. */
template <typename T> static __global__ void remap_kernel(T *dst, const T *src, ct_cuda_remap_desc d, T value) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < d.n; k += stride) {
        int64_t r = k, off = 0;
        bool inside = true;
        for (int dim = d.nd - 1; dim >= 0; dim--) {
            int64_t q = r / d.oshape[dim], c = r - q * d.oshape[dim];
            r = q;
            int64_t size = d.ishape[dim], i;
            if (d.mode == CT_CUDA_REMAP_FLIP) {
                i = d.flip[dim] ? size - 1 - c : c;
            } else {
                i = c - d.lo[dim];
                if (i < 0 || i >= size) {
                    switch (d.mode) {
                    case CT_CUDA_REMAP_REFLECT: i = i < 0 ? -i : 2 * (size - 1) - i; break;
                    case CT_CUDA_REMAP_REPLICATE: i = i < 0 ? 0 : size - 1; break;
                    case CT_CUDA_REMAP_CIRCULAR: {
                        /* wrap within what is left after cropping */
                        int64_t start = d.lo[dim] < 0 ? -d.lo[dim] : 0;
                        int64_t w = size - start - d.hicrop[dim], j = c - (d.lo[dim] > 0 ? d.lo[dim] : 0);
                        if (w > 0)
                            i = start + ((j % w) + w) % w;
                        else
                            inside = false; /* nothing left to wrap into */
                        break;
                    }
                    default: inside = false; break;
                    }
                }
            }
            off += i * d.istr[dim];
        }
        dst[k] = inside ? src[off] : value;
    }
}

extern "C" ct_status ct_cuda_remap_run(const ct_cuda_remap_desc *d, void *dst, const void *src, size_t esz,
                                       uint64_t value, int device, const char *op) {
    if (d->n == 0)
        return CT_OK;
    unsigned grid = ct_grid_for(d->n, device);
    cudaStream_t s = ct_stream_of(device);
    /* value holds the element's bytes at its start (little-endian) */
    switch (esz) {
    case 1: remap_kernel<uint8_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint8_t *)dst, (const uint8_t *)src, *d, (uint8_t)value); break;
    case 2: remap_kernel<uint16_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint16_t *)dst, (const uint16_t *)src, *d, (uint16_t)value); break;
    case 4: remap_kernel<uint32_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint32_t *)dst, (const uint32_t *)src, *d, (uint32_t)value); break;
    case 8: remap_kernel<uint64_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint64_t *)dst, (const uint64_t *)src, *d, value); break;
    default: return ct_error(CT_ERROR_TYPE, op, "no CUDA kernel for elements of %zu bytes", esz);
    }
    return ct_cuda_check_launch(op);
}

template <typename T>
static __global__ void tri_kernel(T *dst, const T *src, int64_t n, int64_t rows, int64_t cols, int64_t k, bool lower) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        int64_t r = e / cols, j = e - r * cols, i = r % rows;
        bool keep = lower ? j - i <= k : j - i >= k;
        dst[e] = keep ? src[e] : (T)0;
    }
}

extern "C" ct_status ct_cuda_tri_run(void *dst, const void *src, size_t esz, int64_t mats, int64_t rows, int64_t cols,
                                     int64_t k, int lower, int device, const char *op) {
    int64_t n = mats * rows * cols;
    if (n == 0)
        return CT_OK;
    unsigned grid = ct_grid_for(n, device);
    cudaStream_t s = ct_stream_of(device);
    bool lo = lower != 0;
    switch (esz) {
    case 1: tri_kernel<uint8_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint8_t *)dst, (const uint8_t *)src, n, rows, cols, k, lo); break;
    case 2: tri_kernel<uint16_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint16_t *)dst, (const uint16_t *)src, n, rows, cols, k, lo); break;
    case 4: tri_kernel<uint32_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint32_t *)dst, (const uint32_t *)src, n, rows, cols, k, lo); break;
    case 8: tri_kernel<uint64_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint64_t *)dst, (const uint64_t *)src, n, rows, cols, k, lo); break;
    default: return ct_error(CT_ERROR_TYPE, op, "no CUDA kernel for elements of %zu bytes", esz);
    }
    return ct_cuda_check_launch(op);
}
