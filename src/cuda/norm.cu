/* Fused rms_norm and layer_norm (forward and backward), gelu_backward and
 * threshold_backward on CUDA. The formulas are the CPU loops' (src/cpu/nn_fused_impl.h,
 * src/cpu/nn_fused.c, src/cpu/threshold.c), evaluated in the same types and order of
 * operations: row statistics accumulate in double, element formulas run in the work
 * type with products kept unfused (the __*_rn intrinsics stop nvcc from contracting
 * them into FMAs, which the CPU does not do).
 *
 * A block of NORM_THREADS threads takes one row at a time; its sums are reduced in
 * shared memory in a fixed tree, so results are deterministic (they differ from the
 * CPU's sequential sums by rounding in double only). The weight and bias gradients are
 * column sums over the rows: blocks of columns sum chunks of rows into double partials,
 * and a second pass adds the partials of each column in chunk order. layer_norm on
 * float16/bfloat16/float32 rows up to LN_MAX_COLS takes the one-pass kernels instead
 * (Note [layer_norm on CUDA]), which compute in float32. */
#include <stdlib.h>
#include <string.h>

#include "kernels.cuh"
#include "nn_rt.h"

#define NORM_THREADS 256
/* Rows per chunk of the column sums' first pass. */
#define COLSUM_ROWS 256

static __device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
static __device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
static __device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
static __device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
static __device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
static __device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }

/* Sums a and b over the block (every thread gets the totals). sm: 2 * NORM_THREADS
 * doubles. Callers reach it uniformly (the row loop is the same for the whole block). */
static __device__ void block_sum2(double &a, double &b, double *sm) {
    __syncthreads(); /* sm may still be read from the previous row */
    sm[threadIdx.x] = a;
    sm[NORM_THREADS + threadIdx.x] = b;
    for (int s = NORM_THREADS / 2; s > 0; s >>= 1) {
        __syncthreads();
        if ((int)threadIdx.x < s) {
            sm[threadIdx.x] += sm[threadIdx.x + s];
            sm[NORM_THREADS + threadIdx.x] += sm[NORM_THREADS + threadIdx.x + s];
        }
    }
    __syncthreads();
    a = sm[0];
    b = sm[NORM_THREADS];
}

static unsigned row_grid(int64_t rows, int device) {
    int64_t cap = (int64_t)ct_cuda_sm_count(device) * 8;
    int64_t g = rows < cap ? rows : cap;
    return (unsigned)(g > 0 ? g : 1);
}

/* ------------------------------------------------------------------ rms_norm */

template <typename T>
static __global__ void __launch_bounds__(NORM_THREADS)
    rms_fwd_kernel(const T *__restrict__ x, const T *__restrict__ w, T *__restrict__ y, int64_t rows, int64_t cols,
                   double eps) {
    __shared__ double sm[2 * NORM_THREADS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * cols;
        T *yr = y + r * cols;
        double ss = 0, unused = 0;
        for (int64_t j = threadIdx.x; j < cols; j += NORM_THREADS)
            ss += __dmul_rn((double)xr[j], (double)xr[j]);
        block_sum2(ss, unused, sm);
        const T rstd = (T)(1.0 / sqrt(ss / (double)cols + eps));
        for (int64_t j = threadIdx.x; j < cols; j += NORM_THREADS)
            yr[j] = w ? mul_rn(mul_rn(xr[j], rstd), w[j]) : mul_rn(xr[j], rstd);
    }
}

/* gx = r (g w - xhat mean(g w xhat)) with r = 1/sqrt(mean(x^2) + eps), xhat = x r;
 * rstd[r] keeps r for the weight gradient. */
template <typename T>
static __global__ void __launch_bounds__(NORM_THREADS)
    rms_bwd_kernel(const T *__restrict__ gy, const T *__restrict__ x, const T *__restrict__ w, T *__restrict__ gx,
                   double *__restrict__ rstd_out, int64_t rows, int64_t cols, double eps) {
    __shared__ double sm[2 * NORM_THREADS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * cols, *gr = gy + r * cols;
        T *dr = gx + r * cols;
        double ss = 0, unused = 0;
        for (int64_t j = threadIdx.x; j < cols; j += NORM_THREADS)
            ss += __dmul_rn((double)xr[j], (double)xr[j]);
        block_sum2(ss, unused, sm);
        const double rstd = 1.0 / sqrt(ss / (double)cols + eps);
        double dot = 0;
        for (int64_t j = threadIdx.x; j < cols; j += NORM_THREADS)
            dot += __dmul_rn(__dmul_rn(__dmul_rn((double)gr[j], w ? (double)w[j] : 1.0), (double)xr[j]), rstd);
        block_sum2(dot, unused, sm);
        const double m = dot / (double)cols;
        for (int64_t j = threadIdx.x; j < cols; j += NORM_THREADS) {
            double xh = __dmul_rn((double)xr[j], rstd);
            double gh = __dmul_rn((double)gr[j], w ? (double)w[j] : 1.0);
            dr[j] = (T)__dmul_rn(rstd, __dsub_rn(gh, __dmul_rn(xh, m)));
        }
        if (threadIdx.x == 0 && rstd_out)
            rstd_out[r] = rstd;
    }
}

/* ------------------------------------------------------------------ layer_norm */

/* Mean and 1 / sqrt(biased variance + eps) of a row, two passes in double. */
template <typename T>
static __device__ void row_stats(const T *xr, int64_t cols, double eps, double *sm, double *mean, double *rstd) {
    double s = 0, unused = 0;
    for (int64_t j = threadIdx.x; j < cols; j += NORM_THREADS)
        s += (double)xr[j];
    block_sum2(s, unused, sm);
    const double m = s / (double)cols;
    double ss = 0;
    for (int64_t j = threadIdx.x; j < cols; j += NORM_THREADS) {
        double d = (double)xr[j] - m;
        ss += __dmul_rn(d, d);
    }
    block_sum2(ss, unused, sm);
    *mean = m;
    *rstd = 1.0 / sqrt(ss / (double)cols + eps);
}

template <typename T>
static __global__ void __launch_bounds__(NORM_THREADS)
    ln_fwd_kernel(const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ b, T *__restrict__ y,
                  int64_t rows, int64_t cols, double eps) {
    __shared__ double sm[2 * NORM_THREADS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * cols;
        T *yr = y + r * cols;
        double mean, rstd;
        row_stats(xr, cols, eps, sm, &mean, &rstd);
        const T m = (T)mean, rs = (T)rstd;
        for (int64_t j = threadIdx.x; j < cols; j += NORM_THREADS) {
            T v = mul_rn(sub_rn(xr[j], m), rs);
            if (w)
                v = mul_rn(v, w[j]);
            if (b)
                v = add_rn(v, b[j]);
            yr[j] = v;
        }
    }
}

/* With xhat = (x - mean) r and gh = g w:
 *   gx = r (gh - mean(gh) - xhat mean(gh xhat)); stats[2r], stats[2r+1] = mean, r. */
template <typename T>
static __global__ void __launch_bounds__(NORM_THREADS)
    ln_bwd_kernel(const T *__restrict__ gy, const T *__restrict__ x, const T *__restrict__ w, T *__restrict__ gx,
                  double *__restrict__ stats, int64_t rows, int64_t cols, double eps) {
    __shared__ double sm[2 * NORM_THREADS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * cols, *gr = gy + r * cols;
        T *dr = gx + r * cols;
        double mean, rstd;
        row_stats(xr, cols, eps, sm, &mean, &rstd);
        const T m = (T)mean, rs = (T)rstd;
        double sg = 0, sgx = 0;
        for (int64_t j = threadIdx.x; j < cols; j += NORM_THREADS) {
            T gh = w ? mul_rn(gr[j], w[j]) : gr[j];
            sg += (double)gh;
            sgx += __dmul_rn((double)gh, (double)mul_rn(sub_rn(xr[j], m), rs));
        }
        block_sum2(sg, sgx, sm);
        const T a = (T)(sg / (double)cols), c = (T)(sgx / (double)cols);
        for (int64_t j = threadIdx.x; j < cols; j += NORM_THREADS) {
            T gh = w ? mul_rn(gr[j], w[j]) : gr[j];
            T xc = mul_rn(mul_rn(sub_rn(xr[j], m), rs), c);
            dr[j] = mul_rn(rs, sub_rn(sub_rn(gh, a), xc));
        }
        if (threadIdx.x == 0 && stats) {
            stats[2 * r] = mean;
            stats[2 * r + 1] = rstd;
        }
    }
}

/* ------------------------------------------------------------------ column sums */

enum { COL_RMS_W = 0, COL_LN_W = 1, COL_LN_B = 2 };

/* The term row r adds to column j's sum. stats: rms: rstd per row; layer_norm: (mean,
 * rstd) pairs. */
template <typename T>
static __device__ __forceinline__ double col_term(int mode, const T *gy, const T *x, const double *stats, int64_t r,
                                                  int64_t j, int64_t cols) {
    T g = gy[r * cols + j];
    if (mode == COL_LN_B)
        return (double)g;
    T xv = x[r * cols + j];
    if (mode == COL_RMS_W)
        return __dmul_rn(__dmul_rn((double)g, (double)xv), stats[r]);
    const T m = (T)stats[2 * r], rs = (T)stats[2 * r + 1];
    return (double)mul_rn(g, mul_rn(sub_rn(xv, m), rs));
}

/* partial[chunk * cols + j] = the sum over the chunk's rows, in row order. */
template <typename T>
static __global__ void colsum_partial_kernel(int mode, const T *__restrict__ gy, const T *__restrict__ x,
                                             const double *__restrict__ stats, double *__restrict__ partial,
                                             int64_t rows, int64_t cols) {
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t chunk = blockIdx.y;
    if (j >= cols)
        return;
    int64_t r0 = chunk * COLSUM_ROWS, r1 = r0 + COLSUM_ROWS < rows ? r0 + COLSUM_ROWS : rows;
    double acc = 0;
    for (int64_t r = r0; r < r1; r++)
        acc += col_term<T>(mode, gy, x, stats, r, j, cols);
    partial[chunk * cols + j] = acc;
}

static __global__ void colsum_final_kernel(const double *__restrict__ partial, double *__restrict__ out,
                                           int64_t nchunks, int64_t cols) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += stride) {
        double acc = 0;
        for (int64_t c = 0; c < nchunks; c++)
            acc += partial[c * cols + j];
        out[j] = acc;
    }
}

static int64_t colsum_chunks(int64_t rows) { return (rows + COLSUM_ROWS - 1) / COLSUM_ROWS; }

/* Chunks per launch of the first pass: gridDim.y is at most 65535. */
#define COLSUM_MAX_Y 65535

template <typename T>
static ct_status colsum(int mode, const T *gy, const T *x, const double *stats, double *partial, double *out,
                        int64_t rows, int64_t cols, int device, const char *op) {
    cudaStream_t s = ct_stream_of(device);
    int64_t nchunks = colsum_chunks(rows);
    int64_t xblocks = (cols + CT_CUDA_THREADS - 1) / CT_CUDA_THREADS;
    if (xblocks > 0x7fffffff)
        return ct_error(CT_ERROR_VALUE, op, "too many columns (%lld)", (long long)cols);
    for (int64_t c0 = 0; c0 < nchunks; c0 += COLSUM_MAX_Y) {
        int64_t nc = nchunks - c0 < COLSUM_MAX_Y ? nchunks - c0 : COLSUM_MAX_Y;
        dim3 grid((unsigned)xblocks, (unsigned)nc);
        /* the launch sees rows from chunk c0 on: shift the row arrays and the partials */
        const double *st = stats ? stats + (mode == COL_RMS_W ? 1 : 2) * c0 * COLSUM_ROWS : NULL;
        colsum_partial_kernel<T><<<grid, CT_CUDA_THREADS, 0, s>>>(mode, gy + c0 * COLSUM_ROWS * cols,
                                                                   x ? x + c0 * COLSUM_ROWS * cols : NULL, st,
                                                                   partial + c0 * cols, rows - c0 * COLSUM_ROWS, cols);
        ct_status e = ct_cuda_check_launch(op);
        if (e != CT_OK)
            return e;
    }
    colsum_final_kernel<<<ct_grid_for(cols, device), CT_CUDA_THREADS, 0, s>>>(partial, out, nchunks, cols);
    return ct_cuda_check_launch(op);
}

/* ------------------------------------------------------------------ layer_norm, one pass
 *
 * Note [layer_norm on CUDA]
 * The kernels above read a row three times (mean, variance, output) in the work dtype,
 * which for float16/bfloat16 inputs is a float32 copy made first and converted back
 * after; the backward reads x and grad_output four times and the weight and bias sums
 * read them twice more. For float16, bfloat16 and float32 rows that fit in shared memory
 * (cols <= LN_MAX_COLS) the kernels below replace them: one warp per row, which it
 * loads once from global memory (16-byte vectors when the row allows) into its slice
 * of shared memory as float32; statistics are float32 warp reductions (mean first, then
 * the variance of the cached values, so no cancellation); the output is written once
 * in the input's dtype. The backward also caches grad_output's row, and each warp adds
 * its rows' g * xhat and g into its own shared partial sums of the weight and bias
 * gradients; a block adds its warps' partials in warp order into one row of a global
 * scratch array, and a last kernel adds those rows in block order (in double). No
 * atomics: results are bit-identical from run to run on one GPU (the number of blocks,
 * hence the grouping, follows the SM count). float64 and longer rows keep the kernels
 * above (and every dtype with CT_CUDA_LAYER_NORM_TWO_PASS=1, for comparisons).
 * On an H200 at 32768 x 768 (docs/cuda.md, "Fused kernels"): forward f32 0.064 ms
 * (was 0.194), bf16 0.044 ms (was 0.546 with the float32 copies); backward f32
 * 0.250 ms (was 0.456), bf16 0.226 ms (was 0.980). */

#define LN_MAX_WARPS 8
#define LN_SMEM_DEFAULT (48 * 1024)
#define LN_SMEM_OPTIN (96 * 1024)
/* Longest row of the one-pass kernels: the backward's four float arrays in one warp's
 * opted-in shared memory. */
#define LN_MAX_COLS (LN_SMEM_OPTIN / 16)
#define LN_MAX_BLOCKS 1024

static __device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* 16 bytes of storage type S. */
template <typename S> struct ln_vec {
    static const int K = 16 / sizeof(S);
    union {
        uint4 raw;
        S e[K];
    };
};

/* The lane's elements of a row: in vector mode element j = k * K + q (k the vector,
 * taken by lane k % 32) sits in the cache at q * nv + k, so that a warp's accesses to
 * the cache are to consecutive words; in scalar mode j sits at j. at(p) maps a cache
 * position back to its column. */
struct ln_layout {
    bool vec;
    int K;
    int64_t nv, cols;
    __device__ __forceinline__ int64_t at(int64_t p) const { return vec ? (p % nv) * K + p / nv : p; }
};

/* Note [Layer norm row loads]
 * A lane issues the loads of up to LN_BATCH of its vectors before it stores any of them
 * to the cache (the loop that loaded, converted and stored one vector at a time waited
 * out a memory latency per vector), and the backward loads x's and g's rows together.
 * On an H200 the GPT-2 backward ((32768, 768) float32) takes 0.196 ms, 1.5 TB/s
 * (PyTorch's 0.224 ms in the same run); bfloat16 0.167 ms against 0.205. That is a
 * warp's 15 rows at about 12 us each: the per-row arithmetic over the shared-memory
 * cache and the four warp sums bound it, not the loads. Rows held in registers are the
 * next step. */
#define LN_BATCH 8

/* Loads row xr into cache c (float32) and, when gr is given, row gr into gc; returns
 * the sum of xr (every lane), added in column order of the lane's elements. */
template <typename S>
static __device__ float ln_load2(const S *__restrict__ xr, float *c, const S *__restrict__ gr, float *gc,
                                 const ln_layout &L) {
    const int lane = threadIdx.x & 31;
    float s = 0;
    if (L.vec) {
        const uint4 *p = (const uint4 *)xr, *pg = (const uint4 *)gr;
        for (int64_t k0 = lane; k0 < L.nv; k0 += 32 * LN_BATCH) {
            ln_vec<S> v[LN_BATCH], g[LN_BATCH];
#pragma unroll
            for (int u = 0; u < LN_BATCH; u++) {
                const int64_t k = k0 + 32 * u;
                if (k < L.nv) {
                    v[u].raw = p[k];
                    if (gr)
                        g[u].raw = pg[k];
                }
            }
#pragma unroll
            for (int u = 0; u < LN_BATCH; u++) {
                const int64_t k = k0 + 32 * u;
                if (k < L.nv)
                    for (int q = 0; q < ln_vec<S>::K; q++) {
                        float f = (float)ct_load<S>(v[u].e[q]);
                        c[q * L.nv + k] = f;
                        s += f;
                        if (gr)
                            gc[q * L.nv + k] = (float)ct_load<S>(g[u].e[q]);
                    }
            }
        }
    } else {
        for (int64_t j0 = lane; j0 < L.cols; j0 += 32 * LN_BATCH) {
            S v[LN_BATCH], g[LN_BATCH];
#pragma unroll
            for (int u = 0; u < LN_BATCH; u++) {
                const int64_t j = j0 + 32 * u;
                if (j < L.cols) {
                    v[u] = xr[j];
                    if (gr)
                        g[u] = gr[j];
                }
            }
#pragma unroll
            for (int u = 0; u < LN_BATCH; u++) {
                const int64_t j = j0 + 32 * u;
                if (j < L.cols) {
                    float f = (float)ct_load<S>(v[u]);
                    c[j] = f;
                    s += f;
                    if (gr)
                        gc[j] = (float)ct_load<S>(g[u]);
                }
            }
        }
    }
    return warp_sum(s);
}

template <typename S> static __device__ float ln_load(const S *__restrict__ xr, float *c, const ln_layout &L) {
    return ln_load2<S>(xr, c, (const S *)NULL, NULL, L);
}

/* Runs the statement after it for each cache position p of the lane (its vectors'
 * elements q * nv + k, or its columns), which only this lane reads or writes. */
#define LN_FOR_MINE(L, lane, p)                                                      \
    for (int64_t k_ = (lane); k_ < ((L).vec ? (L).nv : (L).cols); k_ += 32)         \
        for (int q_ = 0; q_ < ((L).vec ? (L).K : 1); q_++)                           \
            for (int64_t p = (L).vec ? q_ * (L).nv + k_ : k_, once_ = 0; once_ < 1; once_++)

/* LN_FOR_MINE with j, the column of cache position p (L.at(p) without its 64-bit
 * division and remainder, which cost as much as the loads in the backward's loop). */
#define LN_FOR_MINE_COL(L, lane, p, j)                                                                \
    for (int64_t k_ = (lane); k_ < ((L).vec ? (L).nv : (L).cols); k_ += 32)                          \
        for (int q_ = 0; q_ < ((L).vec ? (L).K : 1); q_++)                                            \
            for (int64_t p = (L).vec ? q_ * (L).nv + k_ : k_, j = (L).vec ? k_ * (L).K + q_ : k_, once_ = 0; \
                 once_ < 1; once_++)

/* The sum of (c - mean)^2 over the lane's cached elements, over the warp. */
static __device__ float ln_sqdev(const float *c, float mean, const ln_layout &L) {
    const int lane = threadIdx.x & 31;
    float s = 0;
    LN_FOR_MINE(L, lane, p) {
        float d = c[p] - mean;
        s += d * d;
    }
    return warp_sum(s);
}

template <typename S>
static __global__ void ln_fwd_fast_kernel(const S *__restrict__ x, const S *__restrict__ w, const S *__restrict__ b,
                                          S *__restrict__ y, int64_t rows, int64_t cols, float eps, bool vec) {
    extern __shared__ float ln_sm[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, nw = blockDim.x / 32;
    float *c = ln_sm + warp * cols;
    ln_layout L = {vec, ln_vec<S>::K, cols / ln_vec<S>::K, cols};
    for (int64_t r = (int64_t)blockIdx.x * nw + warp; r < rows; r += (int64_t)gridDim.x * nw) {
        const S *xr = x + r * cols;
        S *yr = y + r * cols;
        const float mean = ln_load(xr, c, L) / (float)cols;
        const float rstd = rsqrtf(ln_sqdev(c, mean, L) / (float)cols + eps);
        if (vec) {
            const int K = ln_vec<S>::K;
            for (int64_t k = lane; k < L.nv; k += 32) {
                ln_vec<S> o, wv, bv;
                if (w)
                    wv.raw = ((const uint4 *)w)[k];
                if (b)
                    bv.raw = ((const uint4 *)b)[k];
                for (int q = 0; q < K; q++) {
                    float v = (c[q * L.nv + k] - mean) * rstd;
                    if (w)
                        v = v * (float)ct_load<S>(wv.e[q]);
                    if (b)
                        v = v + (float)ct_load<S>(bv.e[q]);
                    o.e[q] = ct_store<S>(v);
                }
                ((uint4 *)yr)[k] = o.raw;
            }
        } else {
            for (int64_t j = lane; j < cols; j += 32) {
                float v = (c[j] - mean) * rstd;
                if (w)
                    v = v * (float)ct_load<S>(w[j]);
                if (b)
                    v = v + (float)ct_load<S>(b[j]);
                yr[j] = ct_store<S>(v);
            }
        }
    }
}

/* gx = rstd (gh - mean(gh) - xhat mean(gh xhat)) with xhat = (x - mean) rstd, gh = g w.
 * Shared memory per warp: x's row, g's row, the weight and bias partials (cols floats
 * each). partial: 2 * cols floats per block (weight's, then bias's), in cache order. */
template <typename S>
static __global__ void ln_bwd_fast_kernel(const S *__restrict__ gy, const S *__restrict__ x, const S *__restrict__ w,
                                          S *__restrict__ gx, float *__restrict__ partial, int64_t rows, int64_t cols,
                                          float eps, bool vec) {
    extern __shared__ float ln_sm[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, nw = blockDim.x / 32;
    float *xc = ln_sm + (int64_t)warp * 4 * cols, *gc = xc + cols, *dw = gc + cols, *db = dw + cols;
    ln_layout L = {vec, ln_vec<S>::K, cols / ln_vec<S>::K, cols};
    const int64_t n = vec ? L.nv * L.K : cols;
    LN_FOR_MINE(L, lane, p) {
        dw[p] = 0;
        db[p] = 0;
    }
    for (int64_t r = (int64_t)blockIdx.x * nw + warp; r < rows; r += (int64_t)gridDim.x * nw) {
        const float mean = ln_load2(x + r * cols, xc, gy + r * cols, gc, L) / (float)cols;
        const float rstd = rsqrtf(ln_sqdev(xc, mean, L) / (float)cols + eps);
        float sg = 0, sgx = 0;
        LN_FOR_MINE_COL(L, lane, p, j) {
            float xh = (xc[p] - mean) * rstd, gv = gc[p];
            float gh = w ? gv * (float)ct_load<S>(w[j]) : gv;
            sg += gh;
            sgx += gh * xh;
            dw[p] += gv * xh;
            db[p] += gv;
            xc[p] = xh;
            gc[p] = gh;
        }
        sg = warp_sum(sg) / (float)cols;
        sgx = warp_sum(sgx) / (float)cols;
        S *gr = gx + r * cols;
        if (vec) {
            const int K = ln_vec<S>::K;
            for (int64_t k = lane; k < L.nv; k += 32) {
                ln_vec<S> o;
                for (int q = 0; q < K; q++) {
                    int64_t p = q * L.nv + k;
                    o.e[q] = ct_store<S>(rstd * (gc[p] - sg - xc[p] * sgx));
                }
                ((uint4 *)gr)[k] = o.raw;
            }
        } else {
            for (int64_t j = lane; j < cols; j += 32)
                gr[j] = ct_store<S>(rstd * (gc[j] - sg - xc[j] * sgx));
        }
    }
    __syncthreads();
    float *pw = partial + (int64_t)blockIdx.x * 2 * cols, *pb = pw + cols;
    for (int64_t p = threadIdx.x; p < n; p += blockDim.x) {
        float sw = 0, sb = 0;
        for (int v = 0; v < nw; v++) {
            sw += ln_sm[(int64_t)v * 4 * cols + 2 * cols + p];
            sb += ln_sm[(int64_t)v * 4 * cols + 3 * cols + p];
        }
        pw[p] = sw;
        pb[p] = sb;
    }
}

/* Note [Layer norm rows in registers]
 * The backward above keeps a warp's row in shared memory and walks it four times (the
 * variance, the two sums, the output); each walk costs a shared load and a 64-bit
 * index per element, and that arithmetic, not the loads, bounded it (Note [Layer norm
 * row loads]). For rows of up to 32 elements per lane in 16-byte vectors (1024 columns
 * of float32 or bfloat16, GPT-2's 768 among them) the kernel below holds the lane's
 * vectors of x and g in registers, its columns' weights and its weight and bias partial
 * sums too (loaded and zeroed once per warp, not per row), and issues a row's loads all
 * together. V, the vectors per lane, is a template argument, so every index is a
 * constant and nothing spills. The partials meet in shared memory at the end and leave
 * as one row per block, in column order, for ln_bwd_final_kernel; the order of every
 * sum is fixed, so results repeat from run to run. */
#define LNR_MAX_ELEMS 32
/* Warps per block: at about 150 registers a thread (GPT-2's rows), blocks of 8 warps
 * fit one to an SM, blocks of 4 three. */
#define LNR_WARPS 4

static __device__ __forceinline__ void warp_sum2(float &a, float &b) {
    for (int off = 16; off > 0; off >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, off);
        b += __shfl_xor_sync(0xffffffffu, b, off);
    }
}

template <typename S, int V>
static __global__ void __launch_bounds__(32 * LN_MAX_WARPS)
    ln_bwd_reg_kernel(const S *__restrict__ gy, const S *__restrict__ x, const S *__restrict__ w,
                      S *__restrict__ gx, float *__restrict__ partial, int64_t rows, int cols, float eps) {
    constexpr int K = ln_vec<S>::K;
    extern __shared__ float ln_sm[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, nw = blockDim.x / 32;
    const int nv = cols / K;
    float wf[V][K], dw[V][K], db[V][K];
#pragma unroll
    for (int u = 0; u < V; u++) {
        const int k = lane + 32 * u;
        ln_vec<S> wv;
        wv.raw = w && k < nv ? ((const uint4 *)w)[k] : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int q = 0; q < K; q++) {
            wf[u][q] = w ? (float)ct_load<S>(wv.e[q]) : 1.0f;
            dw[u][q] = 0;
            db[u][q] = 0;
        }
    }
    for (int64_t r = (int64_t)blockIdx.x * nw + warp; r < rows; r += (int64_t)gridDim.x * nw) {
        const uint4 *xp = (const uint4 *)(x + r * cols), *gp = (const uint4 *)(gy + r * cols);
        ln_vec<S> xv[V], gv[V];
#pragma unroll
        for (int u = 0; u < V; u++) {
            const int k = lane + 32 * u;
            xv[u].raw = k < nv ? xp[k] : make_uint4(0, 0, 0, 0);
            gv[u].raw = k < nv ? gp[k] : make_uint4(0, 0, 0, 0);
        }
        /* lanes past the row's end hold zeros: they add nothing to the sums below, and
         * the variance and the partials skip them */
        float xf[V][K], gf[V][K], s = 0;
#pragma unroll
        for (int u = 0; u < V; u++)
#pragma unroll
            for (int q = 0; q < K; q++) {
                xf[u][q] = (float)ct_load<S>(xv[u].e[q]);
                gf[u][q] = (float)ct_load<S>(gv[u].e[q]);
                s += xf[u][q];
            }
        const float mean = warp_sum(s) / (float)cols;
        float ss = 0;
#pragma unroll
        for (int u = 0; u < V; u++)
            if (lane + 32 * u < nv)
#pragma unroll
                for (int q = 0; q < K; q++) {
                    const float d = xf[u][q] - mean;
                    ss += d * d;
                }
        const float rstd = rsqrtf(warp_sum(ss) / (float)cols + eps);
        float sg = 0, sgx = 0;
#pragma unroll
        for (int u = 0; u < V; u++)
            if (lane + 32 * u < nv)
#pragma unroll
                for (int q = 0; q < K; q++) {
                    const float xh = (xf[u][q] - mean) * rstd, g = gf[u][q], gh = g * wf[u][q];
                    sg += gh;
                    sgx += gh * xh;
                    dw[u][q] += g * xh;
                    db[u][q] += g;
                    xf[u][q] = xh;
                    gf[u][q] = gh;
                }
        warp_sum2(sg, sgx);
        sg /= (float)cols;
        sgx /= (float)cols;
        uint4 *op = (uint4 *)(gx + r * cols);
#pragma unroll
        for (int u = 0; u < V; u++) {
            const int k = lane + 32 * u;
            if (k < nv) {
                ln_vec<S> o;
#pragma unroll
                for (int q = 0; q < K; q++)
                    o.e[q] = ct_store<S>(rstd * (gf[u][q] - sg - xf[u][q] * sgx));
                op[k] = o.raw;
            }
        }
    }
    float *mine = ln_sm + (int64_t)warp * 2 * cols;
#pragma unroll
    for (int u = 0; u < V; u++) {
        const int k = lane + 32 * u;
        if (k < nv)
#pragma unroll
            for (int q = 0; q < K; q++) {
                mine[k * K + q] = dw[u][q];
                mine[cols + k * K + q] = db[u][q];
            }
    }
    __syncthreads();
    float *pw = partial + (int64_t)blockIdx.x * 2 * cols, *pb = pw + cols;
    for (int p = threadIdx.x; p < cols; p += blockDim.x) {
        float sw = 0, sb = 0;
        for (int v = 0; v < nw; v++) {
            sw += ln_sm[(int64_t)v * 2 * cols + p];
            sb += ln_sm[(int64_t)v * 2 * cols + cols + p];
        }
        pw[p] = sw;
        pb[p] = sb;
    }
}

/* gw[j], gb[j] = the blocks' partials of column j added in block order (either may be
 * NULL). */
/* The weight and bias gradients: column p sums the nblocks partials of the one-pass
 * backward. A block takes 32 columns, its 8 warps every 8th partial each (loads of 32
 * neighbouring columns coalesce), and the 8 sums combine in warp order: a fixed order,
 * so results repeat run to run. One thread a column walking all 528 partials of an
 * H200 took 0.13 ms for 768 columns, a chain of dependent loads. */
#define LN_FINAL_WARPS 8
static __global__ void __launch_bounds__(32 * LN_FINAL_WARPS)
    ln_bwd_final_kernel(const float *__restrict__ partial, double *__restrict__ gw, double *__restrict__ gb,
                        int nblocks, int64_t cols, ln_layout L) {
    __shared__ double sm[2][LN_FINAL_WARPS][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int64_t n = L.vec ? L.nv * L.K : cols;
    const int64_t p = (int64_t)blockIdx.x * 32 + lane;
    double sw = 0, sb = 0;
    if (p < n)
        for (int k = warp; k < nblocks; k += LN_FINAL_WARPS) {
            sw += (double)partial[(int64_t)k * 2 * cols + p];
            sb += (double)partial[(int64_t)k * 2 * cols + cols + p];
        }
    sm[0][warp][lane] = sw;
    sm[1][warp][lane] = sb;
    __syncthreads();
    if (warp == 0 && p < n) {
        sw = sm[0][0][lane], sb = sm[1][0][lane];
        for (int w = 1; w < LN_FINAL_WARPS; w++)
            sw += sm[0][w][lane], sb += sm[1][w][lane];
        int64_t j = L.at(p);
        if (gw)
            gw[j] = sw;
        if (gb)
            gb[j] = sb;
    }
}

/* Warps per block for per-warp shared arrays of `floats` floats each, within the
 * default 48 KiB where possible; 0 when one warp does not fit the opted-in size. */
static int ln_warps(int64_t floats, size_t *smem) {
    for (int nw = LN_MAX_WARPS; nw >= 1; nw /= 2) {
        size_t bytes = (size_t)nw * (size_t)floats * sizeof(float);
        if (bytes <= LN_SMEM_DEFAULT || (nw == 1 && bytes <= LN_SMEM_OPTIN)) {
            *smem = bytes;
            return nw;
        }
    }
    return 0;
}

template <typename S> static bool ln_vec_ok(const void *a, const void *b, const void *c, const void *d, int64_t cols) {
    const int K = ln_vec<S>::K;
    return cols % K == 0 && (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) & 15) == 0;
}

template <typename S>
static ct_status ln_fwd_fast(const S *x, const S *w, const S *b, S *y, int64_t rows, int64_t cols, double eps,
                             int device) {
    size_t smem;
    int nw = ln_warps(cols, &smem);
    if (smem > LN_SMEM_DEFAULT)
        cudaFuncSetAttribute(ln_fwd_fast_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    int64_t want = (rows + nw - 1) / nw, cap = (int64_t)ct_cuda_sm_count(device) * 16;
    unsigned grid = (unsigned)(want < cap ? want : cap);
    bool vec = ln_vec_ok<S>(x, w, b, y, cols);
    ln_fwd_fast_kernel<S><<<grid, nw * 32, smem, ct_stream_of(device)>>>(x, w, b, y, rows, cols, (float)eps, vec);
    return ct_cuda_check_launch("layer_norm");
}

/* Blocks of the one-pass backward: enough to fill the GPU, at most LN_MAX_BLOCKS (the
 * scratch holds 2 * cols floats per block). */
static int ln_bwd_blocks(int64_t rows, int nw, int device) {
    int64_t want = (rows + nw - 1) / nw, cap = (int64_t)ct_cuda_sm_count(device) * 4;
    cap = cap < LN_MAX_BLOCKS ? cap : LN_MAX_BLOCKS;
    return (int)(want < cap ? want : cap);
}

/* The rows-in-registers backward with V vectors per lane; its blocks, as many as fit
 * on the GPU at once (at most LN_MAX_BLOCKS), go to *nb. */
template <typename S, int V>
static ct_status ln_bwd_reg(const S *gy, const S *x, const S *w, S *gx, float *partial, int64_t rows, int64_t cols,
                            double eps, int device, int *nb) {
    size_t smem;
    int nw = ln_warps(2 * cols, &smem);
    if (nw > LNR_WARPS) {
        nw = LNR_WARPS;
        smem = (size_t)nw * 2 * (size_t)cols * sizeof(float);
    }
    if (smem > LN_SMEM_DEFAULT)
        cudaFuncSetAttribute(ln_bwd_reg_kernel<S, V>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ln_bwd_reg_kernel<S, V>, nw * 32, smem) !=
            cudaSuccess ||
        per_sm < 1)
        per_sm = 1;
    int64_t want = (rows + nw - 1) / nw, cap = (int64_t)ct_cuda_sm_count(device) * per_sm;
    cap = cap < LN_MAX_BLOCKS ? cap : LN_MAX_BLOCKS;
    *nb = (int)(want < cap ? want : cap);
    ln_bwd_reg_kernel<S, V><<<*nb, nw * 32, smem, ct_stream_of(device)>>>(gy, x, w, gx, partial, rows, (int)cols,
                                                                          (float)eps);
    return ct_cuda_check_launch("layer_norm_backward");
}

/* Runs the rows-in-registers kernel when the row takes 16-byte vectors and at most
 * LNR_MAX_ELEMS elements a lane; false when it does not apply. */
template <typename S>
static bool ln_bwd_try_reg(const S *gy, const S *x, const S *w, S *gx, float *partial, int64_t rows, int64_t cols,
                           double eps, int device, int *nb, ct_status *st) {
    const int K = ln_vec<S>::K;
    if (!ln_vec_ok<S>(gy, x, w, gx, cols) || cols > 32 * LNR_MAX_ELEMS)
        return false;
    const int64_t v = (cols / K + 31) / 32; /* vectors a lane */
    if (v <= 1)
        *st = ln_bwd_reg<S, 1>(gy, x, w, gx, partial, rows, cols, eps, device, nb);
    else if (v == 2)
        *st = ln_bwd_reg<S, 2>(gy, x, w, gx, partial, rows, cols, eps, device, nb);
    else if (v == 3)
        *st = ln_bwd_reg<S, 3>(gy, x, w, gx, partial, rows, cols, eps, device, nb);
    else if (v == 4)
        *st = ln_bwd_reg<S, 4>(gy, x, w, gx, partial, rows, cols, eps, device, nb);
    else if (v <= 6 && K == 4)
        *st = ln_bwd_reg<S, (K == 4 ? 6 : 1)>(gy, x, w, gx, partial, rows, cols, eps, device, nb);
    else if (K == 4)
        *st = ln_bwd_reg<S, (K == 4 ? 8 : 1)>(gy, x, w, gx, partial, rows, cols, eps, device, nb);
    else
        return false;
    return true;
}

template <typename S>
static ct_status ln_bwd_fast(const S *gy, const S *x, const S *w, S *gx, double *gw, double *gb, int64_t rows,
                             int64_t cols, double eps, float *partial, int device) {
    const char *op = "layer_norm_backward";
    cudaStream_t s = ct_stream_of(device);
    int nb;
    ct_status st = CT_OK;
    bool vec = ln_vec_ok<S>(gy, x, w, gx, cols);
    ln_layout L = {vec, ln_vec<S>::K, cols / ln_vec<S>::K, cols};
    if (ln_bwd_try_reg<S>(gy, x, w, gx, partial, rows, cols, eps, device, &nb, &st)) {
        L.vec = false; /* its partials are in column order */
    } else {
        size_t smem;
        int nw = ln_warps(4 * cols, &smem);
        if (smem > LN_SMEM_DEFAULT)
            cudaFuncSetAttribute(ln_bwd_fast_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        nb = ln_bwd_blocks(rows, nw, device);
        ln_bwd_fast_kernel<S><<<nb, nw * 32, smem, s>>>(gy, x, w, gx, partial, rows, cols, (float)eps, vec);
        st = ct_cuda_check_launch(op);
    }
    if (st != CT_OK || (!gw && !gb))
        return st;
    ln_bwd_final_kernel<<<(unsigned)((cols + 31) / 32), 32 * LN_FINAL_WARPS, 0, s>>>(partial, gw, gb, nb, cols, L);
    return ct_cuda_check_launch(op);
}

/* CT_CUDA_LAYER_NORM_TWO_PASS=1 keeps the kernels above for every dtype: the before of
 * the benchmark's comparison (bench/cuda_ops.c). */
extern "C" bool ct_cuda_layer_norm_native(ct_dtype dt, int64_t cols) {
    const char *e = getenv("CT_CUDA_LAYER_NORM_TWO_PASS");
    if (e && *e && strcmp(e, "0") != 0)
        return false;
    return (dt == CT_DTYPE_FLOAT32 || dt == CT_DTYPE_FLOAT16 || dt == CT_DTYPE_BFLOAT16) && cols > 0 &&
           cols <= LN_MAX_COLS;
}

/* ------------------------------------------------------------------ launchers */

/* [stats: 2 doubles per row] [partials: one double per column and chunk of rows] */
extern "C" size_t ct_cuda_norm_scratch(int64_t rows, int64_t cols) {
    size_t two_pass = (size_t)(2 * rows + colsum_chunks(rows) * cols) * sizeof(double);
    size_t one_pass = (size_t)LN_MAX_BLOCKS * 2 * (size_t)cols * sizeof(float);
    return (two_pass > one_pass ? two_pass : one_pass) + 16;
}

extern "C" ct_status ct_cuda_rms_norm_fwd(ct_dtype wd, const void *x, const void *w, void *y, int64_t rows,
                                          int64_t cols, double eps, int device) {
    if (rows <= 0 || cols <= 0)
        return CT_OK;
    unsigned grid = row_grid(rows, device);
    cudaStream_t s = ct_stream_of(device);
    if (wd == CT_DTYPE_FLOAT64)
        rms_fwd_kernel<double><<<grid, NORM_THREADS, 0, s>>>((const double *)x, (const double *)w, (double *)y, rows,
                                                             cols, eps);
    else
        rms_fwd_kernel<float><<<grid, NORM_THREADS, 0, s>>>((const float *)x, (const float *)w, (float *)y, rows, cols,
                                                            eps);
    return ct_cuda_check_launch("rms_norm");
}

template <typename T>
static ct_status rms_bwd(const T *gy, const T *x, const T *w, T *gx, double *gw, int64_t rows, int64_t cols,
                         double eps, double *scratch, int device) {
    const char *op = "rms_norm_backward";
    double *rstd = scratch, *partial = scratch + 2 * rows;
    rms_bwd_kernel<T><<<row_grid(rows, device), NORM_THREADS, 0, ct_stream_of(device)>>>(gy, x, w, gx, rstd, rows,
                                                                                          cols, eps);
    ct_status st = ct_cuda_check_launch(op);
    if (st == CT_OK && gw)
        st = colsum<T>(COL_RMS_W, gy, x, rstd, partial, gw, rows, cols, device, op);
    return st;
}

extern "C" ct_status ct_cuda_rms_norm_bwd(ct_dtype wd, const void *gy, const void *x, const void *w, void *gx,
                                          double *gw, int64_t rows, int64_t cols, double eps, void *scratch,
                                          int device) {
    if (rows <= 0 || cols <= 0)
        return CT_OK; /* nothing to normalise: gx is empty, gw stays zero */
    if (wd == CT_DTYPE_FLOAT64)
        return rms_bwd<double>((const double *)gy, (const double *)x, (const double *)w, (double *)gx, gw, rows, cols,
                               eps, (double *)scratch, device);
    return rms_bwd<float>((const float *)gy, (const float *)x, (const float *)w, (float *)gx, gw, rows, cols, eps,
                          (double *)scratch, device);
}

extern "C" ct_status ct_cuda_layer_norm_fwd(ct_dtype wd, const void *x, const void *w, const void *b, void *y,
                                            int64_t rows, int64_t cols, double eps, int device) {
    if (rows <= 0 || cols <= 0)
        return CT_OK;
    if (ct_cuda_layer_norm_native(wd, cols)) {
        switch (wd) {
        case CT_DTYPE_FLOAT16:
            return ln_fwd_fast<ct_half_s>((const ct_half_s *)x, (const ct_half_s *)w, (const ct_half_s *)b,
                                          (ct_half_s *)y, rows, cols, eps, device);
        case CT_DTYPE_BFLOAT16:
            return ln_fwd_fast<ct_bf16_s>((const ct_bf16_s *)x, (const ct_bf16_s *)w, (const ct_bf16_s *)b,
                                          (ct_bf16_s *)y, rows, cols, eps, device);
        default:
            return ln_fwd_fast<float>((const float *)x, (const float *)w, (const float *)b, (float *)y, rows, cols,
                                      eps, device);
        }
    }
    unsigned grid = row_grid(rows, device);
    cudaStream_t s = ct_stream_of(device);
    if (wd == CT_DTYPE_FLOAT64)
        ln_fwd_kernel<double><<<grid, NORM_THREADS, 0, s>>>((const double *)x, (const double *)w, (const double *)b,
                                                            (double *)y, rows, cols, eps);
    else
        ln_fwd_kernel<float><<<grid, NORM_THREADS, 0, s>>>((const float *)x, (const float *)w, (const float *)b,
                                                           (float *)y, rows, cols, eps);
    return ct_cuda_check_launch("layer_norm");
}

template <typename T>
static ct_status ln_bwd(const T *gy, const T *x, const T *w, T *gx, double *gw, double *gb, int64_t rows,
                        int64_t cols, double eps, double *scratch, int device) {
    const char *op = "layer_norm_backward";
    double *stats = scratch, *partial = scratch + 2 * rows;
    ln_bwd_kernel<T><<<row_grid(rows, device), NORM_THREADS, 0, ct_stream_of(device)>>>(gy, x, w, gx, stats, rows,
                                                                                         cols, eps);
    ct_status st = ct_cuda_check_launch(op);
    if (st == CT_OK && gw)
        st = colsum<T>(COL_LN_W, gy, x, stats, partial, gw, rows, cols, device, op);
    if (st == CT_OK && gb)
        st = colsum<T>(COL_LN_B, gy, (const T *)NULL, (const double *)NULL, partial, gb, rows, cols, device, op);
    return st;
}

extern "C" ct_status ct_cuda_layer_norm_bwd(ct_dtype wd, const void *gy, const void *x, const void *w, void *gx,
                                            double *gw, double *gb, int64_t rows, int64_t cols, double eps,
                                            void *scratch, int device) {
    if (rows <= 0 || cols <= 0)
        return CT_OK;
    if (ct_cuda_layer_norm_native(wd, cols)) {
        float *partial = (float *)scratch;
        switch (wd) {
        case CT_DTYPE_FLOAT16:
            return ln_bwd_fast<ct_half_s>((const ct_half_s *)gy, (const ct_half_s *)x, (const ct_half_s *)w,
                                          (ct_half_s *)gx, gw, gb, rows, cols, eps, partial, device);
        case CT_DTYPE_BFLOAT16:
            return ln_bwd_fast<ct_bf16_s>((const ct_bf16_s *)gy, (const ct_bf16_s *)x, (const ct_bf16_s *)w,
                                          (ct_bf16_s *)gx, gw, gb, rows, cols, eps, partial, device);
        default:
            return ln_bwd_fast<float>((const float *)gy, (const float *)x, (const float *)w, (float *)gx, gw, gb,
                                      rows, cols, eps, partial, device);
        }
    }
    if (wd == CT_DTYPE_FLOAT64)
        return ln_bwd<double>((const double *)gy, (const double *)x, (const double *)w, (double *)gx, gw, gb, rows,
                              cols, eps, (double *)scratch, device);
    return ln_bwd<float>((const float *)gy, (const float *)x, (const float *)w, (float *)gx, gw, gb, rows, cols, eps,
                         (double *)scratch, device);
}

/* ------------------------------------------------------------------ gelu_backward */

#define GELU_K 0.79788456080286535588 /* sqrt(2 / pi) */
#define GELU_C 0.044715
#define GELU_SQRT1_2 0.70710678118654752440
/* 1 / sqrt(2 pi), as the CPU computes it (M_2_SQRTPI * M_SQRT1_2 * 0.5) */
#define GELU_INV_SQRT_2PI (1.12837916709551257390 * GELU_SQRT1_2 * 0.5)

/* Note [GELU backward arithmetic]
 * The tanh form is the CPU's float32 formula through e = exp(-2u), u = k (x + c x^3):
 * s = 1 / (1 + e) = (1 + t) / 2 and 1 - s = e / (1 + e) = (1 - t) / 2, neither of which
 * cancels, and d = s + 2 x s (1 - s) k (1 + 3 c x^2). The CPU's order of operations
 * (no fused multiply-adds, two IEEE divisions) made the kernel compute-bound: 252 us for
 * GPT-2's (32768, 3072) bfloat16 gradient on an H200, where PyTorch's takes 149 us.
 * Here the products may fuse, 1 / (1 + e) is one correctly rounded reciprocal and
 * 1 - s is e s (clamped to 1, which also turns e = inf's 0 * inf into 1), so the float32
 * result is a few ulps from the CPU's instead of bit-equal (the tests allow 8). */
static __device__ __forceinline__ float gelu_d(float x, bool tanh_form) {
    if (tanh_form) {
        const float k = (float)GELU_K, cc = (float)GELU_C, x2 = x * x;
        const float e = expf(-2.0f * k * (x + cc * x2 * x));
        const float sg = __frcp_rn(1.0f + e), sc = fminf(e * sg, 1.0f);
        return 2.0f * x * sg * sc * k * (1.0f + 3.0f * cc * x2) + sg;
    }
    float u = erff(mul_rn(x, (float)GELU_SQRT1_2));
    float e = expf(mul_rn(mul_rn(-0.5f, x), x));
    return add_rn(mul_rn(0.5f, add_rn(1.0f, u)), mul_rn(mul_rn(x, e), (float)GELU_INV_SQRT_2PI));
}

static __device__ __forceinline__ double gelu_d(double x, bool tanh_form) {
    if (tanh_form) {
        double t = tanh(GELU_K * add_rn(x, mul_rn(mul_rn(GELU_C * x, x), x)));
        double a = mul_rn(0.5, add_rn(1.0, t));
        double b = mul_rn(mul_rn(mul_rn(mul_rn(0.5, x), sub_rn(1.0, mul_rn(t, t))), GELU_K),
                          add_rn(1.0, mul_rn(mul_rn(3 * GELU_C, x), x)));
        return add_rn(a, b);
    }
    return add_rn(mul_rn(0.5, add_rn(1.0, erf(mul_rn(x, GELU_SQRT1_2)))),
                  mul_rn(mul_rn(x, exp(mul_rn(mul_rn(-0.5, x), x))), GELU_INV_SQRT_2PI));
}

/* S: the storage dtype; the math runs in its work dtype A (float for float16 and
 * bfloat16, read widened and rounded once on the store: the bits of converting the
 * operands to float32 first and the result back, without those three copies). */
/* Note [GELU backward loads]
 * Each thread moves 16 bytes of gy, x and gx per step (8 bfloat16), as the elementwise
 * engine does; the scalar loop is the tail and the path for misaligned views. The
 * 2-byte loads of the scalar loop took 343 us for a GPT-2 (32768, 3072) bfloat16
 * gradient on an H200 (600 MB moved: 1.75 TB/s); these take 252 us, PyTorch's kernel
 * 149 us in the same run. Loading two vectors before computing either changed nothing
 * (254 us): the arithmetic bounded it (Note [GELU backward arithmetic]). */
template <typename S, typename A>
static __global__ void __launch_bounds__(CT_CUDA_THREADS)
    gelu_bwd_kernel(const S *__restrict__ gy, const S *__restrict__ x, S *__restrict__ gx, int64_t n,
                    bool tanh_form, bool vec) {
    constexpr int V = 16 / sizeof(S);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x, tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t nvec = vec ? n / V : 0;
    for (int64_t v = tid; v < nvec; v += stride) {
        ct_vec<S, V> g = ((const ct_vec<S, V> *)gy)[v], xv = ((const ct_vec<S, V> *)x)[v], o;
#pragma unroll
        for (int j = 0; j < V; j++)
            o.v[j] = ct_store<S>(mul_rn((A)ct_load<S>(g.v[j]), gelu_d((A)ct_load<S>(xv.v[j]), tanh_form)));
        ((ct_vec<S, V> *)gx)[v] = o;
    }
    for (int64_t i = nvec * V + tid; i < n; i += stride)
        gx[i] = ct_store<S>(mul_rn((A)ct_load<S>(gy[i]), gelu_d((A)ct_load<S>(x[i]), tanh_form)));
}

extern "C" ct_status ct_cuda_gelu_bwd(ct_dtype dt, const void *gy, const void *x, void *gx, int64_t n, bool tanh_form,
                                      int device) {
    if (n <= 0)
        return CT_OK;
    const size_t esz = ct_dtype_size(dt);
    const bool vec = (((uintptr_t)gy | (uintptr_t)x | (uintptr_t)gx) & 15) == 0;
    unsigned grid = ct_grid_for(vec ? (n * (int64_t)esz + 15) / 16 : n, device);
    cudaStream_t s = ct_stream_of(device);
    switch (dt) {
    case CT_DTYPE_FLOAT64:
        gelu_bwd_kernel<double, double><<<grid, CT_CUDA_THREADS, 0, s>>>((const double *)gy, (const double *)x,
                                                                         (double *)gx, n, tanh_form, vec);
        break;
    case CT_DTYPE_BFLOAT16:
        gelu_bwd_kernel<ct_bf16_s, float><<<grid, CT_CUDA_THREADS, 0, s>>>((const ct_bf16_s *)gy, (const ct_bf16_s *)x,
                                                                           (ct_bf16_s *)gx, n, tanh_form, vec);
        break;
    case CT_DTYPE_FLOAT16:
        gelu_bwd_kernel<ct_half_s, float><<<grid, CT_CUDA_THREADS, 0, s>>>((const ct_half_s *)gy, (const ct_half_s *)x,
                                                                           (ct_half_s *)gx, n, tanh_form, vec);
        break;
    default:
        gelu_bwd_kernel<float, float><<<grid, CT_CUDA_THREADS, 0, s>>>((const float *)gy, (const float *)x,
                                                                       (float *)gx, n, tanh_form, vec);
        break;
    }
    return ct_cuda_check_launch("gelu_backward");
}

/* ------------------------------------------------------------------ threshold_backward */

template <typename T>
static __global__ void threshold_bwd_kernel(const T *__restrict__ gy, const T *__restrict__ x, T th,
                                            T *__restrict__ out, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = x[i] <= th ? (T)0 : gy[i];
}

extern "C" ct_status ct_cuda_threshold_bwd(ct_dtype wd, const void *gy, const void *x, double threshold, void *out,
                                           int64_t n, int device) {
    if (n <= 0)
        return CT_OK;
    unsigned grid = ct_grid_for(n, device);
    cudaStream_t s = ct_stream_of(device);
    if (wd == CT_DTYPE_FLOAT64)
        threshold_bwd_kernel<double><<<grid, CT_CUDA_THREADS, 0, s>>>((const double *)gy, (const double *)x, threshold,
                                                                      (double *)out, n);
    else
        threshold_bwd_kernel<float><<<grid, CT_CUDA_THREADS, 0, s>>>((const float *)gy, (const float *)x,
                                                                     (float)threshold, (float *)out, n);
    return ct_cuda_check_launch("threshold_backward");
}
