/* CUDA sort along a dim (sort, argsort, topk): every row becomes a segment of a CUB
 * stable segmented sort of (key, position) pairs, where the 64-bit key orders as the
 * CPU compares (src/cpu/shape.c): NaN above every number, -0 equal to +0, ties in their
 * original order (stable), descending by complementing the keys (which keeps ties in
 * order, as the CPU does). Results match the CPU exactly. */
#include <cub/device/device_segmented_sort.cuh>

#include "casts.cuh"

static __device__ __forceinline__ uint64_t sort_key(const char *p, int dt, bool descending) {
    cast_val v = cast_load(p, dt);
    uint64_t k;
    if (v.kind == 2) {
        double x = v.f;
        if (x != x) {
            k = ~(uint64_t)0; /* NaN: above +inf, every NaN equal */
        } else {
            if (x == 0)
                x = 0.0; /* -0 sorts as +0 */
            uint64_t b = (uint64_t)__double_as_longlong(x);
            k = (b >> 63) ? ~b : (b | ((uint64_t)1 << 63));
        }
    } else if (v.kind == 1) {
        k = v.u; /* uint64: its own order */
    } else {
        k = (uint64_t)as_i64(v) ^ ((uint64_t)1 << 63);
    }
    return descending ? ~k : k;
}

/* keys and positions of c (nseg rows of size elements, contiguous), and the segment
 * offsets. */
static __global__ void make_keys(const char *c, int dt, int64_t esz, int64_t nseg, int64_t size, bool descending,
                                 uint64_t *keys, int64_t *pos, int64_t *offsets) {
    const int64_t n = nseg * size;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        keys[e] = sort_key(c + e * esz, dt, descending);
        pos[e] = e % size;
    }
    for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s <= nseg; s += stride)
        offsets[s] = s * size;
}

/* The first k of each sorted row into vals/idx laid out (outer, k, inner). */
template <typename T>
static __global__ void write_rows(const T *c, const int64_t *pos, int64_t outer, int64_t inner, int64_t size,
                                  int64_t k, T *vals, int64_t *idx) {
    const int64_t n = outer * k * inner;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        int64_t j = e % inner, r = e / inner;
        int64_t i = r % k, o = r / k;
        int64_t s = o * inner + j;
        int64_t at = pos[s * size + i];
        vals[e] = c[s * size + at];
        idx[e] = at;
    }
}

static size_t align_up(size_t n) { return (n + 255) & ~(size_t)255; }

/* Scratch layout: keys in/out, positions in/out, offsets, CUB's temporary storage. */
static size_t cub_bytes(int64_t n, int64_t nseg) {
    size_t bytes = 0;
    cub::DeviceSegmentedSort::StableSortPairs((void *)NULL, bytes, (const uint64_t *)NULL, (uint64_t *)NULL,
                                              (const int64_t *)NULL, (int64_t *)NULL, n, nseg, (const int64_t *)NULL,
                                              (const int64_t *)NULL);
    return bytes;
}

extern "C" size_t ct_cuda_sort_scratch(int64_t nseg, int64_t size) {
    int64_t n = nseg * size;
    return 4 * align_up((size_t)n * 8) + align_up((size_t)(nseg + 1) * 8) + align_up(cub_bytes(n, nseg));
}

extern "C" ct_status ct_cuda_sort_run(const void *c, ct_dtype dt, int64_t outer, int64_t inner, int64_t size, int64_t k,
                                      bool descending, void *vals, int64_t *idx, void *scratch, int device) {
    const char *op = "sort";
    int64_t nseg = outer * inner, n = nseg * size;
    if (n == 0 || k == 0)
        return CT_OK;
    if (n > INT32_MAX) /* CUB's item counts are 32-bit in older toolkits */
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "sorting more than 2^31 - 1 elements is not supported on CUDA");
    cudaStream_t s = ct_stream_of(device);
    char *p = (char *)scratch;
    uint64_t *keys_in = (uint64_t *)p, *keys_out = (uint64_t *)(p + align_up((size_t)n * 8));
    int64_t *pos_in = (int64_t *)(p + 2 * align_up((size_t)n * 8));
    int64_t *pos_out = (int64_t *)(p + 3 * align_up((size_t)n * 8));
    int64_t *offsets = (int64_t *)(p + 4 * align_up((size_t)n * 8));
    void *temp = p + 4 * align_up((size_t)n * 8) + align_up((size_t)(nseg + 1) * 8);
    size_t temp_bytes = cub_bytes(n, nseg);
    size_t esz = ct_dtype_size(dt);
    make_keys<<<ct_grid_for(n > nseg + 1 ? n : nseg + 1, device), CT_CUDA_THREADS, 0, s>>>(
        (const char *)c, (int)dt, (int64_t)esz, nseg, size, descending, keys_in, pos_in, offsets);
    ct_status st = ct_cuda_check_launch(op);
    if (st != CT_OK)
        return st;
    cudaError_t e = cub::DeviceSegmentedSort::StableSortPairs(temp, temp_bytes, keys_in, keys_out, pos_in, pos_out, n,
                                                              nseg, offsets, offsets + 1, s);
    if (e != cudaSuccess)
        return ct_error(CT_ERROR_DEVICE, op, "CUDA segmented sort failed: %s", cudaGetErrorString(e));
    if ((st = ct_cuda_check_launch(op)) != CT_OK)
        return st;
    unsigned grid = ct_grid_for(outer * k * inner, device);
    switch (esz) {
    case 1: write_rows<uint8_t><<<grid, CT_CUDA_THREADS, 0, s>>>((const uint8_t *)c, pos_out, outer, inner, size, k, (uint8_t *)vals, idx); break;
    case 2: write_rows<uint16_t><<<grid, CT_CUDA_THREADS, 0, s>>>((const uint16_t *)c, pos_out, outer, inner, size, k, (uint16_t *)vals, idx); break;
    case 4: write_rows<uint32_t><<<grid, CT_CUDA_THREADS, 0, s>>>((const uint32_t *)c, pos_out, outer, inner, size, k, (uint32_t *)vals, idx); break;
    default: write_rows<uint64_t><<<grid, CT_CUDA_THREADS, 0, s>>>((const uint64_t *)c, pos_out, outer, inner, size, k, (uint64_t *)vals, idx); break;
    }
    return ct_cuda_check_launch(op);
}
