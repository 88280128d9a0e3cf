/* CUDA kernels of the indexing ops: index checks, index_select (and embedding's row
 * gather), gather, scatter_add, index_add (and embedding's backward) and masked_fill.
 * The host side (src/ops/shape.c through indexing_cuda.c) has checked shapes and
 * dtypes, allocated the outputs and validated the indices, so the kernels only move
 * bytes. Values move as raw words of their width; accumulations use atomics, so
 * repeated indices add up in an unspecified order (float sums may differ from the
 * CPU's in the last place; integer ones are exact). */
#include "casts.cuh"

/* ------------------------------------------------------------------ index checks */

static __device__ __forceinline__ int64_t load_index(const char *idx, int is64, int64_t k) {
    return is64 ? ((const int64_t *)idx)[k] : (int64_t)((const int32_t *)idx)[k];
}

/* *first = the smallest k whose index lies outside [-size, size) ([0, size) without
 * negatives). */
static __global__ void check_index_kernel(const char *idx, int is64, int64_t n, int64_t size, int negatives,
                                          unsigned long long *first) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride) {
        int64_t v = load_index(idx, is64, k);
        bool bad = negatives ? (v < -size || v >= size) : (v < 0 || v >= size);
        if (bad)
            atomicMin(first, (unsigned long long)k);
    }
}

extern "C" ct_status ct_cuda_check_indices(const void *idx, int is64, int64_t n, int64_t size, int negatives,
                                           uint64_t *first_bad, int device, const char *op) {
    if (n == 0)
        return CT_OK;
    check_index_kernel<<<ct_grid_for(n, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        (const char *)idx, is64, n, size, negatives, (unsigned long long *)first_bad);
    return ct_cuda_check_launch(op);
}

static __device__ __forceinline__ int64_t wrap(int64_t v, int64_t size) { return v < 0 ? v + size : v; }

/* ------------------------------------------------------------------ index_select */

/* dst (outer, nidx, inner) = src (outer, size, inner) at the indices along the middle. */
template <typename T>
static __global__ void index_select_kernel(T *dst, const T *src, const char *idx, int is64, int64_t outer,
                                           int64_t nidx, int64_t inner, int64_t size) {
    const int64_t n = outer * nidx * inner;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        int64_t j = e % inner, r = e / inner;
        int64_t i = r % nidx, o = r / nidx;
        int64_t at = wrap(load_index(idx, is64, i), size);
        dst[e] = src[(o * size + at) * inner + j];
    }
}

extern "C" ct_status ct_cuda_index_select_run(void *dst, const void *src, size_t esz, const void *idx, int is64,
                                              int64_t outer, int64_t nidx, int64_t inner, int64_t size, int device,
                                              const char *op) {
    int64_t n = outer * nidx * inner;
    if (n == 0)
        return CT_OK;
    unsigned grid = ct_grid_for(n, device);
    cudaStream_t s = ct_stream_of(device);
    const char *ix = (const char *)idx;
    switch (esz) {
    case 1: index_select_kernel<uint8_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint8_t *)dst, (const uint8_t *)src, ix, is64, outer, nidx, inner, size); break;
    case 2: index_select_kernel<uint16_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint16_t *)dst, (const uint16_t *)src, ix, is64, outer, nidx, inner, size); break;
    case 4: index_select_kernel<uint32_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint32_t *)dst, (const uint32_t *)src, ix, is64, outer, nidx, inner, size); break;
    case 8: index_select_kernel<uint64_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint64_t *)dst, (const uint64_t *)src, ix, is64, outer, nidx, inner, size); break;
    default: return ct_error(CT_ERROR_TYPE, op, "no CUDA kernel for elements of %zu bytes", esz);
    }
    return ct_cuda_check_launch(op);
}

/* ------------------------------------------------------------------ gather, scatter_add */

/* Element k of the index (row-major over its shape) addresses t at the same
 * coordinates, the dim coordinate replaced by the index value. */
static __device__ __forceinline__ void coords_of(int64_t k, const ct_cuda_index_desc &g, int64_t *c) {
#pragma unroll
    for (int i = 0; i < CT_CUDA_MAX_DIMS; i++)
        c[i] = 0; /* a 0-d index addresses a 1-d source at 0 */
    for (int i = g.ind - 1; i >= 0; i--) {
        int64_t q = k / g.ishape[i];
        c[i] = k - q * g.ishape[i];
        k = q;
    }
}
static __device__ __forceinline__ int64_t offset_of(const int64_t *c, int nd, const int64_t *st, int d, int64_t at) {
    int64_t off = 0;
    for (int i = 0; i < nd; i++)
        off += (i == d ? at : c[i]) * st[i];
    return off;
}

template <typename T>
static __global__ void gather_kernel(T *dst, const T *src, const char *idx, int is64, ct_cuda_index_desc g) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < g.n; k += stride) {
        int64_t c[CT_CUDA_MAX_DIMS];
        coords_of(k, g, c);
        int64_t at = wrap(load_index(idx, is64, k), g.size);
        dst[k] = src[offset_of(c, g.tnd, g.tstr, g.dim, at)];
    }
}

extern "C" ct_status ct_cuda_gather_run(void *dst, const void *src, size_t esz, const void *idx, int is64,
                                        const ct_cuda_index_desc *g, int device, const char *op) {
    if (g->n == 0)
        return CT_OK;
    unsigned grid = ct_grid_for(g->n, device);
    cudaStream_t s = ct_stream_of(device);
    const char *ix = (const char *)idx;
    switch (esz) {
    case 1: gather_kernel<uint8_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint8_t *)dst, (const uint8_t *)src, ix, is64, *g); break;
    case 2: gather_kernel<uint16_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint16_t *)dst, (const uint16_t *)src, ix, is64, *g); break;
    case 4: gather_kernel<uint32_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint32_t *)dst, (const uint32_t *)src, ix, is64, *g); break;
    case 8: gather_kernel<uint64_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint64_t *)dst, (const uint64_t *)src, ix, is64, *g); break;
    default: return ct_error(CT_ERROR_TYPE, op, "no CUDA kernel for elements of %zu bytes", esz);
    }
    return ct_cuda_check_launch(op);
}

/* ------------------------------------------------------------------ atomic accumulation */

/* Read-modify-write of a 1- or 2-byte element through a compare-and-swap of the
 * aligned 32-bit word holding it. F maps the element's old bits to its new bits. */
template <typename B, typename F> static __device__ void atomic_small(B *addr, F f) {
    uintptr_t a = (uintptr_t)addr;
    unsigned int *w = (unsigned int *)(a & ~(uintptr_t)3);
    unsigned int shift = (unsigned int)(a & 3) * 8u;
    unsigned int mask = (sizeof(B) == 1 ? 0xffu : 0xffffu) << shift;
    unsigned int old = *w, assumed;
    do {
        assumed = old;
        B cur = (B)((assumed & mask) >> shift);
        B nv = f(cur);
        unsigned int nw = (assumed & ~mask) | (((unsigned int)nv << shift) & mask);
        old = atomicCAS(w, assumed, nw);
    } while (assumed != old);
}

/* *p += alpha * v in dtype dt (v: the source element, loaded as double or int64). */
static __device__ void atomic_add_elem(char *p, int dt, const char *src, double alpha, int64_t ialpha) {
    (void)ialpha;
    switch (dt) {
    case CT_DTYPE_FLOAT32: atomicAdd((float *)p, (float)(alpha * (double)*(const float *)src)); break;
    case CT_DTYPE_FLOAT64: atomicAdd((double *)p, alpha * *(const double *)src); break;
    case CT_DTYPE_FLOAT16: {
        float v = (float)(alpha * (double)ct_dev_h2f(*(const uint16_t *)src));
        atomic_small((uint16_t *)p, [v](uint16_t b) { return ct_dev_f2h(ct_dev_h2f(b) + v); });
        break;
    }
    case CT_DTYPE_BFLOAT16: {
        float v = (float)(alpha * (double)ct_dev_b2f(*(const uint16_t *)src));
        atomic_small((uint16_t *)p, [v](uint16_t b) { return ct_dev_f2b(ct_dev_b2f(b) + v); });
        break;
    }
    case CT_DTYPE_INT32:
    case CT_DTYPE_UINT32:
        atomicAdd((unsigned int *)p, (unsigned int)((uint64_t)ialpha * (uint64_t)*(const uint32_t *)src));
        break;
    case CT_DTYPE_INT64:
    case CT_DTYPE_UINT64:
        atomicAdd((unsigned long long *)p, (unsigned long long)((uint64_t)ialpha * *(const uint64_t *)src));
        break;
    case CT_DTYPE_INT8:
    case CT_DTYPE_UINT8: {
        uint8_t v = (uint8_t)((uint64_t)ialpha * (uint64_t)*(const uint8_t *)src);
        atomic_small((uint8_t *)p, [v](uint8_t b) { return (uint8_t)(b + v); });
        break;
    }
    case CT_DTYPE_INT16:
    case CT_DTYPE_UINT16: {
        uint16_t v = (uint16_t)((uint64_t)ialpha * (uint64_t)*(const uint16_t *)src);
        atomic_small((uint16_t *)p, [v](uint16_t b) { return (uint16_t)(b + v); });
        break;
    }
    case CT_DTYPE_BOOL: {
        uint8_t v = (uint8_t)(alpha != 0 && *(const uint8_t *)src != 0);
        if (v)
            atomic_small((uint8_t *)p, [](uint8_t) { return (uint8_t)1; });
        break;
    }
    default: break;
    }
}

/* out at (coords of k, dim -> index) += src at the coords of k. */
static __global__ void scatter_add_kernel(char *out, const char *src, const char *idx, int is64, ct_cuda_index_desc g,
                                          int dt, int64_t esz) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < g.n; k += stride) {
        int64_t c[CT_CUDA_MAX_DIMS];
        coords_of(k, g, c);
        int64_t at = wrap(load_index(idx, is64, k), g.size);
        char *p = out + offset_of(c, g.tnd, g.tstr, g.dim, at) * esz;
        const char *q = src + offset_of(c, g.snd, g.sstr, -1, 0) * esz;
        atomic_add_elem(p, dt, q, 1.0, 1);
    }
}

extern "C" ct_status ct_cuda_scatter_add_run(void *out, const void *src, ct_dtype dt, const void *idx, int is64,
                                             const ct_cuda_index_desc *g, int device, const char *op) {
    if (g->n == 0)
        return CT_OK;
    scatter_add_kernel<<<ct_grid_for(g->n, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        (char *)out, (const char *)src, (const char *)idx, is64, *g, (int)dt, (int64_t)ct_dtype_size(dt));
    return ct_cuda_check_launch(op);
}

/* dst (outer, size, inner) at the indices along the middle += alpha * src (outer, nidx,
 * inner); contiguous operands. skip: an index value whose rows are left out
 * (embedding's padding_idx), or INT64_MIN for none. */
static __global__ void index_add_kernel(char *dst, const char *src, const char *idx, int is64, int64_t outer,
                                        int64_t nidx, int64_t inner, int64_t size, int dt, int64_t esz, double alpha,
                                        int64_t ialpha, int64_t skip) {
    const int64_t n = outer * nidx * inner;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        int64_t j = e % inner, r = e / inner;
        int64_t i = r % nidx, o = r / nidx;
        int64_t v = load_index(idx, is64, i);
        if (v == skip)
            continue;
        int64_t at = wrap(v, size);
        atomic_add_elem(dst + ((o * size + at) * inner + j) * esz, dt, src + e * esz, alpha, ialpha);
    }
}

extern "C" ct_status ct_cuda_index_add_run(void *dst, const void *src, ct_dtype dt, const void *idx, int is64,
                                           int64_t outer, int64_t nidx, int64_t inner, int64_t size, double alpha,
                                           int64_t skip, int device, const char *op) {
    int64_t n = outer * nidx * inner;
    if (n == 0)
        return CT_OK;
    index_add_kernel<<<ct_grid_for(n, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        (char *)dst, (const char *)src, (const char *)idx, is64, outer, nidx, inner, size, (int)dt,
        (int64_t)ct_dtype_size(dt), alpha, (int64_t)alpha, skip);
    return ct_cuda_check_launch(op);
}

/* ------------------------------------------------------------------ masked_fill */

/* Operand 0: the tensor, operand 1: the (broadcast) bool mask. */
template <typename T> static __global__ void masked_fill_kernel(ct_cuda_iter_desc d, T value) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < d.numel; i += stride) {
        int64_t off[2];
        ct_offsets<2>(d, i, off);
        if (*(const uint8_t *)(d.data[1] + off[1]))
            *(T *)(d.data[0] + off[0]) = value;
    }
}

extern "C" ct_status ct_cuda_masked_fill_run(const ct_cuda_iter_desc *d, const void *value, size_t esz, int device,
                                             const char *op) {
    if (d->numel == 0)
        return CT_OK;
    unsigned grid = ct_grid_for(d->numel, device);
    cudaStream_t s = ct_stream_of(device);
    switch (esz) {
    case 1: masked_fill_kernel<uint8_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, *(const uint8_t *)value); break;
    case 2: masked_fill_kernel<uint16_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, *(const uint16_t *)value); break;
    case 4: masked_fill_kernel<uint32_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, *(const uint32_t *)value); break;
    case 8: masked_fill_kernel<uint64_t><<<grid, CT_CUDA_THREADS, 0, s>>>(*d, *(const uint64_t *)value); break;
    default: return ct_error(CT_ERROR_TYPE, op, "no CUDA kernel for elements of %zu bytes", esz);
    }
    return ct_cuda_check_launch(op);
}
