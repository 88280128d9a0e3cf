/* CUDA kernels of the indexing ops: index checks, index_select (and embedding's row
 * gather), gather, scatter_add, index_add, embedding's backward and masked_fill.
 * The host side (src/meta/indexing.c through indexing_cuda.c) has checked shapes and
 * dtypes, allocated the outputs and validated the indices, so the kernels only move
 * bytes. Values move as raw words of their width; accumulations use atomics, so
 * repeated indices add up in an unspecified order (float sums may differ from the
 * CPU's in the last place; integer ones are exact), except embedding's backward (Note
 * [Deterministic embedding backward]). */
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

/* ------------------------------------------------------------------ embedding backward
 *
 * Note [Deterministic embedding backward]
 * The weight's gradient adds the rows of grad_output that share an index. Atomic adds
 * (index_add's way) finish in whatever order the threads arrive, so float sums differ
 * from run to run. Here each position i gets the key index * n + i; sorting the keys
 * groups the positions of one index, in position order, and the first key of each
 * group owns its weight row: its threads (one per column) add the group's rows in
 * that order. That is the CPU loop's order, so the float32 sums are the CPU's, bit
 * for bit, on every run. A frequent index makes one long group, summed by one block.
 * The price: on an H200, (32768, 768) float32 gradients into 50304 rows take 0.648 ms,
 * against 0.285 ms for index_add's atomics (docs/cuda.md, "Fused kernels"). */

static __global__ void embedding_keys_kernel(const char *idx, int is64, int64_t n, int64_t *keys) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        keys[i] = load_index(idx, is64, i) * n + i;
}

/* Note [Embedding backward loads]
 * A group is summed in position order, one add after the other, but its loads need
 * not wait for each other: the sum takes EMB_UNROLL keys at a time, issues their
 * grad_output loads together, then adds the loaded values in order, so the bits are
 * those of the plain loop. A key belongs to the group while it is below (row + 1) n
 * (the keys are sorted), which spares a 64-bit division per position. Measured on an
 * H200 in the char model's step (65 rows, 16384 positions, 384 columns): the plain
 * loop, each iteration waiting for its key and then its row, took 2.0 ms a step, the
 * largest kernel of the step. */
#define EMB_UNROLL 16

/* The sum at column j of grad_output's rows whose keys, from s on, lie in [base, lim):
 * position order, one add at a time. */
template <typename T>
static __host__ __device__ T embedding_group_sum(const int64_t *keys, const T *gy, int64_t n, int64_t dim, int64_t s,
                                                 int64_t base, int64_t lim, int64_t j) {
    T acc = 0;
    for (int64_t k = s;; k += EMB_UNROLL) {
        int64_t pos[EMB_UNROLL];
        T v[EMB_UNROLL];
        int m = 0; /* the keys of this round in the group: a prefix, the keys being sorted */
#pragma unroll
        for (int u = 0; u < EMB_UNROLL; u++) {
            const int64_t key = k + u < n ? keys[k + u] : lim;
            pos[u] = key - base;
            m += key < lim;
        }
#pragma unroll
        for (int u = 0; u < EMB_UNROLL; u++)
            v[u] = u < m ? gy[pos[u] * dim + j] : T(0);
#pragma unroll
        for (int u = 0; u < EMB_UNROLL; u++)
            if (u < m)
                acc += v[u];
        if (m < EMB_UNROLL)
            return acc;
    }
}

/* Block (s, chunk): when sorted key s starts a group, gw[row, j] = the sum of the
 * group's grad_output rows at column j (one thread per column of the chunk). */
template <typename T>
static __global__ void embedding_bwd_sorted_kernel(const int64_t *__restrict__ keys, const T *__restrict__ gy,
                                                   T *__restrict__ gw, int64_t n, int64_t dim, int64_t skip) {
    const int64_t s = blockIdx.x;
    const int64_t j = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    const int64_t row = keys[s] / n, base = row * n;
    if (j >= dim || (s > 0 && keys[s - 1] >= base) || row == skip)
        return;
    gw[row * dim + j] = embedding_group_sum(keys, gy, n, dim, s, base, base + n, j); /* Note [Embedding backward loads] */
}

extern "C" ct_status ct_cuda_embedding_keys(const void *idx, int is64, int64_t n, int64_t *keys, int device) {
    if (n == 0)
        return CT_OK;
    embedding_keys_kernel<<<ct_grid_for(n, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>((const char *)idx,
                                                                                               is64, n, keys);
    return ct_cuda_check_launch("embedding_backward");
}

extern "C" ct_status ct_cuda_embedding_bwd_sorted(ct_dtype wd, const int64_t *keys, const void *gy, void *gw,
                                                  int64_t n, int64_t dim, int64_t skip, int device) {
    if (n == 0 || dim == 0)
        return CT_OK;
    int64_t chunks = (dim + CT_CUDA_THREADS - 1) / CT_CUDA_THREADS;
    if (n > 0x7fffffff || chunks > 65535)
        return ct_error(CT_ERROR_VALUE, "embedding_backward", "too many indices (%lld) or columns (%lld)",
                        (long long)n, (long long)dim);
    dim3 grid((unsigned)n, (unsigned)chunks);
    cudaStream_t st = ct_stream_of(device);
    if (wd == CT_DTYPE_FLOAT64)
        embedding_bwd_sorted_kernel<double><<<grid, CT_CUDA_THREADS, 0, st>>>(keys, (const double *)gy, (double *)gw,
                                                                              n, dim, skip);
    else
        embedding_bwd_sorted_kernel<float><<<grid, CT_CUDA_THREADS, 0, st>>>(keys, (const float *)gy, (float *)gw, n,
                                                                             dim, skip);
    return ct_cuda_check_launch("embedding_backward");
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

/* ------------------------------------------------------------------ scatter, scatter_reduce */

/* Note [GPU scatter order]
 * The CPU applies the writes of scatter, index_copy and index_put in index order, so
 * when two land on one element the later one stays. The GPU keeps that: a first pass
 * records, per target, the largest position writing there (atomicMax), and the second
 * pass lets only that position write. Reductions combine atomically instead, in no
 * set order: integer and bool results are exact, float sums and products over
 * repeated targets may differ from the CPU's in the last place, and amax/amin may
 * pick the other zero when -0 and +0 tie. */

/* Copies one element of esz bytes. */
static __device__ __forceinline__ void copy_elem(char *d, const char *s, int64_t esz) {
    switch (esz) {
    case 1: *(uint8_t *)d = *(const uint8_t *)s; break;
    case 2: *(uint16_t *)d = *(const uint16_t *)s; break;
    case 4: *(uint32_t *)d = *(const uint32_t *)s; break;
    default: *(uint64_t *)d = *(const uint64_t *)s; break;
    }
}

static __device__ __forceinline__ bool is_float_dtype(int dt) {
    return dt == CT_DTYPE_FLOAT16 || dt == CT_DTYPE_BFLOAT16 || dt == CT_DTYPE_FLOAT32 || dt == CT_DTYPE_FLOAT64;
}

/* *d = *d (r) *s in dtype dt, as the CPU's combine (src/cpu/indexing.c): floating values
 * in double (rounded back on every step), integers through int64 with wrap-around
 * (uint64 compared unsigned), bool as and (prod, amin) or or (the others). amax/amin
 * propagate NaN. */
static __device__ void combine_elem(char *d, const char *s, int dt, int r) {
    if (is_float_dtype(dt)) {
        double a = cast_load(d, dt).f, b = cast_load(s, dt).f, v;
        const double nan = __longlong_as_double(0x7ff8000000000000ll);
        switch (r) {
        case CT_CUDA_SCATTER_PROD: v = a * b; break;
        case CT_CUDA_SCATTER_AMAX: v = a != a || b != b ? nan : a > b ? a : b; break;
        case CT_CUDA_SCATTER_AMIN: v = a != a || b != b ? nan : a < b ? a : b; break;
        default: v = a + b; break;
        }
        cast_store_f64(d, dt, v);
        return;
    }
    if (dt == CT_DTYPE_BOOL) {
        bool a = *(const uint8_t *)d != 0, b = *(const uint8_t *)s != 0;
        *(uint8_t *)d = (uint8_t)((r == CT_CUDA_SCATTER_PROD || r == CT_CUDA_SCATTER_AMIN) ? (a && b) : (a || b));
        return;
    }
    int64_t a = as_i64(cast_load(d, dt)), b = as_i64(cast_load(s, dt)), v;
    bool uns = dt == CT_DTYPE_UINT64;
    switch (r) {
    case CT_CUDA_SCATTER_PROD: v = (int64_t)((uint64_t)a * (uint64_t)b); break;
    case CT_CUDA_SCATTER_AMAX: v = (uns ? (uint64_t)a > (uint64_t)b : a > b) ? a : b; break;
    case CT_CUDA_SCATTER_AMIN: v = (uns ? (uint64_t)a < (uint64_t)b : a < b) ? a : b; break;
    default: v = (int64_t)((uint64_t)a + (uint64_t)b); break;
    }
    cast_store_i64(d, dt, v);
}

/* combine_elem on global memory, atomically: a compare-and-swap loop on the element
 * (the aligned 32-bit word holding it for 1- and 2-byte elements). Every dtype takes
 * this one path, so the arithmetic is exactly combine_elem's (the hardware float
 * atomics would flush subnormals). */
static __device__ void atomic_combine(char *p, int dt, int64_t esz, const char *s, int r) {
    switch (esz) {
    case 8: {
        unsigned long long *w = (unsigned long long *)p;
        unsigned long long old = *w, assumed;
        do {
            assumed = old;
            unsigned long long nv = assumed;
            combine_elem((char *)&nv, s, dt, r);
            old = atomicCAS(w, assumed, nv);
        } while (assumed != old);
        break;
    }
    case 4: {
        unsigned int *w = (unsigned int *)p;
        unsigned int old = *w, assumed;
        do {
            assumed = old;
            unsigned int nv = assumed;
            combine_elem((char *)&nv, s, dt, r);
            old = atomicCAS(w, assumed, nv);
        } while (assumed != old);
        break;
    }
    case 2:
        atomic_small((uint16_t *)p, [=](uint16_t b) {
            uint16_t nv = b;
            combine_elem((char *)&nv, s, dt, r);
            return nv;
        });
        break;
    default:
        atomic_small((uint8_t *)p, [=](uint8_t b) {
            uint8_t nv = b;
            combine_elem((char *)&nv, s, dt, r);
            return nv;
        });
        break;
    }
}

/* The reduction's identity: what a target not including self starts from, so that
 * combining the first value gives that value (-0 for sums: -0 + x is x, -0 included). */
static __device__ void identity_elem(char *d, int dt, int r) {
    if (is_float_dtype(dt)) {
        double v = r == CT_CUDA_SCATTER_PROD   ? 1.0
                   : r == CT_CUDA_SCATTER_AMAX ? -__longlong_as_double(0x7ff0000000000000ll)
                   : r == CT_CUDA_SCATTER_AMIN ? __longlong_as_double(0x7ff0000000000000ll)
                                               : -0.0;
        cast_store_f64(d, dt, v);
        return;
    }
    if (dt == CT_DTYPE_BOOL) {
        *(uint8_t *)d = (uint8_t)(r == CT_CUDA_SCATTER_PROD || r == CT_CUDA_SCATTER_AMIN);
        return;
    }
    int64_t lo = 0, hi = 0;
    switch (dt) {
    case CT_DTYPE_UINT8: hi = 255; break;
    case CT_DTYPE_INT8: lo = -128, hi = 127; break;
    case CT_DTYPE_INT16: lo = -32768, hi = 32767; break;
    case CT_DTYPE_UINT16: hi = 65535; break;
    case CT_DTYPE_INT32: lo = INT32_MIN, hi = INT32_MAX; break;
    case CT_DTYPE_UINT32: hi = (int64_t)UINT32_MAX; break;
    case CT_DTYPE_INT64: lo = INT64_MIN, hi = INT64_MAX; break;
    default: hi = -1; break; /* uint64: all ones */
    }
    int64_t v = r == CT_CUDA_SCATTER_PROD ? 1 : r == CT_CUDA_SCATTER_AMAX ? lo : r == CT_CUDA_SCATTER_AMIN ? hi : 0;
    cast_store_i64(d, dt, v);
}

/* Target offset (elements) of index element k; the index holds validated positions. */
static __device__ __forceinline__ int64_t scatter_target(const int64_t *idx, const ct_cuda_index_desc &g, int64_t k,
                                                         int64_t *c) {
    coords_of(k, g, c);
    return offset_of(c, g.tnd, g.tstr, g.dim, wrap(idx[k], g.size));
}

static __global__ void scatter_claim_kernel(const int64_t *idx, ct_cuda_index_desc g, unsigned long long *winner) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < g.n; k += stride) {
        int64_t c[CT_CUDA_MAX_DIMS];
        atomicMax(winner + scatter_target(idx, g, k, c), (unsigned long long)(k + 1));
    }
}

static __global__ void scatter_init_kernel(char *out, int dt, int64_t esz, const int64_t *idx, ct_cuda_index_desc g,
                                           int r) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < g.n; k += stride) {
        int64_t c[CT_CUDA_MAX_DIMS];
        /* every writer of a target stores the same bytes */
        identity_elem(out + scatter_target(idx, g, k, c) * esz, dt, r);
    }
}

static __global__ void scatter_kernel(char *out, const char *src, uint64_t value, int dt, int64_t esz,
                                      const int64_t *idx, ct_cuda_index_desc g, int r,
                                      const unsigned long long *winner, unsigned long long *count) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < g.n; k += stride) {
        int64_t c[CT_CUDA_MAX_DIMS];
        int64_t off = scatter_target(idx, g, k, c);
        uint64_t v = value;
        const char *s = src ? src + offset_of(c, g.snd, g.sstr, -1, 0) * esz : (const char *)&v;
        char *p = out + off * esz;
        if (r < 0) {
            if (!winner || winner[off] == (unsigned long long)(k + 1))
                copy_elem(p, s, esz);
        } else {
            atomic_combine(p, dt, esz, s, r);
            if (count)
                atomicAdd(count + off, 1ull);
        }
    }
}

/* *p /= n: true division for floating dtypes, floor division for integers, bool kept
 * (the CPU's divide_by). */
static __device__ void divide_elem(char *p, int dt, int64_t n) {
    if (is_float_dtype(dt)) {
        cast_store_f64(p, dt, cast_load(p, dt).f / (double)n);
    } else if (dt == CT_DTYPE_BOOL) {
    } else if (dt == CT_DTYPE_UINT64) {
        *(uint64_t *)p = *(const uint64_t *)p / (uint64_t)n;
    } else {
        int64_t a = as_i64(cast_load(p, dt)), q = a / n;
        if (a % n != 0 && a < 0)
            q--;
        cast_store_i64(p, dt, q);
    }
}

static __global__ void scatter_mean_kernel(char *out, int dt, int64_t esz, const unsigned long long *count, int64_t n,
                                           int include_self) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride) {
        int64_t c = (int64_t)count[k], m = c + (include_self ? 1 : 0);
        if (c > 0 && m > 1)
            divide_elem(out + k * esz, dt, m);
    }
}

extern "C" ct_status ct_cuda_scatter_claim(const int64_t *idx, const ct_cuda_index_desc *g, uint64_t *winner,
                                           int device, const char *op) {
    if (g->n == 0)
        return CT_OK;
    scatter_claim_kernel<<<ct_grid_for(g->n, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        idx, *g, (unsigned long long *)winner);
    return ct_cuda_check_launch(op);
}

extern "C" ct_status ct_cuda_scatter_init(void *out, ct_dtype dt, const int64_t *idx, const ct_cuda_index_desc *g,
                                          int reduce, int device, const char *op) {
    if (g->n == 0)
        return CT_OK;
    scatter_init_kernel<<<ct_grid_for(g->n, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        (char *)out, (int)dt, (int64_t)ct_dtype_size(dt), idx, *g, reduce);
    return ct_cuda_check_launch(op);
}

extern "C" ct_status ct_cuda_scatter_run(void *out, const void *src, uint64_t value, ct_dtype dt, const int64_t *idx,
                                         const ct_cuda_index_desc *g, int reduce, const uint64_t *winner,
                                         uint64_t *count, int device, const char *op) {
    if (g->n == 0)
        return CT_OK;
    scatter_kernel<<<ct_grid_for(g->n, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        (char *)out, (const char *)src, value, (int)dt, (int64_t)ct_dtype_size(dt), idx, *g, reduce,
        (const unsigned long long *)winner, (unsigned long long *)count);
    return ct_cuda_check_launch(op);
}

extern "C" ct_status ct_cuda_scatter_mean_finish(void *out, ct_dtype dt, const uint64_t *count, int64_t n,
                                                 int include_self, int device, const char *op) {
    if (n == 0)
        return CT_OK;
    scatter_mean_kernel<<<ct_grid_for(n, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        (char *)out, (int)dt, (int64_t)ct_dtype_size(dt), (const unsigned long long *)count, n, include_self);
    return ct_cuda_check_launch(op);
}

/* ------------------------------------------------------------------ index_copy, index_fill */

static __global__ void index_claim_kernel(const int64_t *idx, int64_t nidx, int64_t size, unsigned long long *winner) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nidx; i += stride)
        atomicMax(winner + wrap(idx[i], size), (unsigned long long)(i + 1));
}

/* dst (outer, size, inner) at the indices = src (outer, nidx, inner), or src[0]. */
template <typename T>
static __global__ void index_copy_kernel(T *dst, const T *src, const int64_t *idx, int64_t outer, int64_t nidx,
                                         int64_t inner, int64_t size, const unsigned long long *winner,
                                         int src_scalar) {
    const int64_t n = outer * nidx * inner;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        int64_t j = e % inner, r = e / inner;
        int64_t i = r % nidx, o = r / nidx;
        int64_t at = wrap(idx[i], size);
        if (winner[at] == (unsigned long long)(i + 1))
            dst[(o * size + at) * inner + j] = src[src_scalar ? 0 : e];
    }
}

template <typename T>
static __global__ void index_fill_kernel(T *dst, T value, const int64_t *idx, int64_t outer, int64_t nidx,
                                         int64_t inner, int64_t size) {
    const int64_t n = outer * nidx * inner;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        int64_t j = e % inner, r = e / inner;
        int64_t i = r % nidx, o = r / nidx;
        dst[(o * size + wrap(idx[i], size)) * inner + j] = value;
    }
}

extern "C" ct_status ct_cuda_index_claim(const int64_t *idx, int64_t nidx, int64_t size, uint64_t *winner,
                                         int device, const char *op) {
    if (nidx == 0)
        return CT_OK;
    index_claim_kernel<<<ct_grid_for(nidx, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        idx, nidx, size, (unsigned long long *)winner);
    return ct_cuda_check_launch(op);
}

extern "C" ct_status ct_cuda_index_copy_run(void *dst, const void *src, size_t esz, const int64_t *idx, int64_t outer,
                                            int64_t nidx, int64_t inner, int64_t size, const uint64_t *winner,
                                            int src_scalar, int device, const char *op) {
    int64_t n = outer * nidx * inner;
    if (n == 0)
        return CT_OK;
    unsigned grid = ct_grid_for(n, device);
    cudaStream_t s = ct_stream_of(device);
    const unsigned long long *w = (const unsigned long long *)winner;
    switch (esz) {
    case 1: index_copy_kernel<uint8_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint8_t *)dst, (const uint8_t *)src, idx, outer, nidx, inner, size, w, src_scalar); break;
    case 2: index_copy_kernel<uint16_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint16_t *)dst, (const uint16_t *)src, idx, outer, nidx, inner, size, w, src_scalar); break;
    case 4: index_copy_kernel<uint32_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint32_t *)dst, (const uint32_t *)src, idx, outer, nidx, inner, size, w, src_scalar); break;
    case 8: index_copy_kernel<uint64_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint64_t *)dst, (const uint64_t *)src, idx, outer, nidx, inner, size, w, src_scalar); break;
    default: return ct_error(CT_ERROR_TYPE, op, "no CUDA kernel for elements of %zu bytes", esz);
    }
    return ct_cuda_check_launch(op);
}

extern "C" ct_status ct_cuda_index_fill_run(void *dst, size_t esz, uint64_t value, const int64_t *idx, int64_t outer,
                                            int64_t nidx, int64_t inner, int64_t size, int device, const char *op) {
    int64_t n = outer * nidx * inner;
    if (n == 0)
        return CT_OK;
    unsigned grid = ct_grid_for(n, device);
    cudaStream_t s = ct_stream_of(device);
    /* value holds the element's bytes at its start (little-endian) */
    switch (esz) {
    case 1: index_fill_kernel<uint8_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint8_t *)dst, (uint8_t)value, idx, outer, nidx, inner, size); break;
    case 2: index_fill_kernel<uint16_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint16_t *)dst, (uint16_t)value, idx, outer, nidx, inner, size); break;
    case 4: index_fill_kernel<uint32_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint32_t *)dst, (uint32_t)value, idx, outer, nidx, inner, size); break;
    case 8: index_fill_kernel<uint64_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint64_t *)dst, value, idx, outer, nidx, inner, size); break;
    default: return ct_error(CT_ERROR_TYPE, op, "no CUDA kernel for elements of %zu bytes", esz);
    }
    return ct_cuda_check_launch(op);
}

/* ------------------------------------------------------------------ index, index_put */

/* Element offsets in t (and in the values, through vstr) of result element k. */
static __device__ int64_t adv_offset(const ct_cuda_advindex_desc &a, int64_t k, int64_t *voff) {
    int64_t oc[CT_CUDA_MAX_DIMS];
    for (int i = a.ond - 1; i >= 0; i--) {
        int64_t q = k / a.oshape[i];
        oc[i] = k - q * a.oshape[i];
        k = q;
    }
    int64_t o = 0, vo = 0;
    for (int i = 0; i < a.ond; i++)
        vo += oc[i] * a.vstr[i];
    for (int i = 0; i < a.nslice; i++)
        o += oc[i < a.insert ? i : i + a.bnd] * a.tstr[a.slice_dim[i]];
    for (int j = 0; j < a.nidx; j++) {
        int64_t bo = 0;
        for (int q = 0; q < a.bnd; q++)
            bo += oc[a.insert + q] * a.istr[j][q];
        int d = a.idim[j];
        o += wrap(a.idata[j][bo], a.tshape[d]) * a.tstr[d];
    }
    *voff = vo;
    return o;
}

static __global__ void advindex_check_kernel(ct_cuda_advindex_desc a, int64_t nb, unsigned long long *first) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; b < nb; b += stride) {
        int64_t bc[CT_CUDA_MAX_DIMS], r = b;
        for (int q = a.bnd - 1; q >= 0; q--) {
            int64_t sz = a.oshape[a.insert + q], t = r / sz;
            bc[q] = r - t * sz;
            r = t;
        }
        for (int j = 0; j < a.nidx; j++) {
            int64_t bo = 0;
            for (int q = 0; q < a.bnd; q++)
                bo += bc[q] * a.istr[j][q];
            int64_t v = a.idata[j][bo], size = a.tshape[a.idim[j]];
            if (v < -size || v >= size) {
                atomicMin(first, (unsigned long long)(b * a.nidx + j));
                break;
            }
        }
    }
}

template <typename T> static __global__ void advindex_get_kernel(T *dst, const T *src, ct_cuda_advindex_desc a) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < a.total; k += stride) {
        int64_t vo;
        dst[k] = src[adv_offset(a, k, &vo)];
    }
}

static __global__ void advindex_claim_kernel(ct_cuda_advindex_desc a, unsigned long long *winner) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < a.total; k += stride) {
        int64_t vo;
        atomicMax(winner + adv_offset(a, k, &vo), (unsigned long long)(k + 1));
    }
}

static __global__ void advindex_put_kernel(char *t, const char *values, int dt, int64_t esz, ct_cuda_advindex_desc a,
                                           int accumulate, const unsigned long long *winner) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < a.total; k += stride) {
        int64_t vo, off = adv_offset(a, k, &vo);
        if (accumulate)
            atomic_combine(t + off * esz, dt, esz, values + vo * esz, CT_CUDA_SCATTER_SUM);
        else if (winner[off] == (unsigned long long)(k + 1))
            copy_elem(t + off * esz, values + vo * esz, esz);
    }
}

static int64_t advindex_bcount(const ct_cuda_advindex_desc *a) {
    int64_t nb = 1;
    for (int q = 0; q < a->bnd; q++)
        nb *= a->oshape[a->insert + q];
    return nb;
}

extern "C" ct_status ct_cuda_advindex_check(const ct_cuda_advindex_desc *a, uint64_t *first, int device,
                                            const char *op) {
    int64_t nb = advindex_bcount(a);
    if (nb == 0 || a->nidx == 0)
        return CT_OK;
    advindex_check_kernel<<<ct_grid_for(nb, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        *a, nb, (unsigned long long *)first);
    return ct_cuda_check_launch(op);
}

extern "C" ct_status ct_cuda_advindex_get(void *dst, const void *t, size_t esz, const ct_cuda_advindex_desc *a,
                                          int device, const char *op) {
    if (a->total == 0)
        return CT_OK;
    unsigned grid = ct_grid_for(a->total, device);
    cudaStream_t s = ct_stream_of(device);
    switch (esz) {
    case 1: advindex_get_kernel<uint8_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint8_t *)dst, (const uint8_t *)t, *a); break;
    case 2: advindex_get_kernel<uint16_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint16_t *)dst, (const uint16_t *)t, *a); break;
    case 4: advindex_get_kernel<uint32_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint32_t *)dst, (const uint32_t *)t, *a); break;
    case 8: advindex_get_kernel<uint64_t><<<grid, CT_CUDA_THREADS, 0, s>>>((uint64_t *)dst, (const uint64_t *)t, *a); break;
    default: return ct_error(CT_ERROR_TYPE, op, "no CUDA kernel for elements of %zu bytes", esz);
    }
    return ct_cuda_check_launch(op);
}

extern "C" ct_status ct_cuda_advindex_claim(const ct_cuda_advindex_desc *a, uint64_t *winner, int device,
                                            const char *op) {
    if (a->total == 0)
        return CT_OK;
    advindex_claim_kernel<<<ct_grid_for(a->total, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        *a, (unsigned long long *)winner);
    return ct_cuda_check_launch(op);
}

extern "C" ct_status ct_cuda_advindex_put(void *t, const void *values, ct_dtype dt, const ct_cuda_advindex_desc *a,
                                          int accumulate, const uint64_t *winner, int device, const char *op) {
    if (a->total == 0)
        return CT_OK;
    advindex_put_kernel<<<ct_grid_for(a->total, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        (char *)t, (const char *)values, (int)dt, (int64_t)ct_dtype_size(dt), *a, accumulate,
        (const unsigned long long *)winner);
    return ct_cuda_check_launch(op);
}

/* ------------------------------------------------------------------ one_hot */

static __global__ void one_hot_kernel(int64_t *y, const int64_t *idx, int64_t n, int64_t nc) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i * nc + idx[i]] = 1;
}

extern "C" ct_status ct_cuda_one_hot_run(int64_t *y, const int64_t *idx, int64_t n, int64_t nc, int device,
                                         const char *op) {
    if (n == 0 || nc == 0)
        return CT_OK;
    one_hot_kernel<<<ct_grid_for(n, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(y, idx, n, nc);
    return ct_cuda_check_launch(op);
}
