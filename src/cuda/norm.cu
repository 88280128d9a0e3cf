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
 * and a second pass adds the partials of each column in chunk order. */
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

/* ------------------------------------------------------------------ launchers */

/* [stats: 2 doubles per row] [partials: one double per column and chunk of rows] */
extern "C" size_t ct_cuda_norm_scratch(int64_t rows, int64_t cols) {
    return (size_t)(2 * rows + colsum_chunks(rows) * cols) * sizeof(double) + 16;
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

static __device__ __forceinline__ float gelu_d(float x, bool tanh_form) {
    if (tanh_form) {
        /* the CPU's float32 form through e = exp(-2u): s = 1 / (1 + e) = (1 + t) / 2 and
         * 1 - s = 1 / (1 + 1/e), neither of which cancels; d = s + 2 x s (1 - s) k (...) */
        const float k = (float)GELU_K, cc = (float)GELU_C;
        float e = expf(mul_rn(mul_rn(-2.0f, k), add_rn(x, mul_rn(mul_rn(mul_rn(cc, x), x), x))));
        float sg = 1.0f / add_rn(1.0f, e), sc = 1.0f / add_rn(1.0f, 1.0f / e);
        float b = mul_rn(mul_rn(mul_rn(mul_rn(mul_rn(2.0f, x), sg), sc), k),
                         add_rn(1.0f, mul_rn(mul_rn(mul_rn(3.0f, cc), x), x)));
        return add_rn(sg, b);
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

template <typename T>
static __global__ void gelu_bwd_kernel(const T *__restrict__ gy, const T *__restrict__ x, T *__restrict__ gx,
                                       int64_t n, bool tanh_form) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        gx[i] = mul_rn(gy[i], gelu_d(x[i], tanh_form));
}

extern "C" ct_status ct_cuda_gelu_bwd(ct_dtype wd, const void *gy, const void *x, void *gx, int64_t n, bool tanh_form,
                                      int device) {
    if (n <= 0)
        return CT_OK;
    unsigned grid = ct_grid_for(n, device);
    cudaStream_t s = ct_stream_of(device);
    if (wd == CT_DTYPE_FLOAT64)
        gelu_bwd_kernel<double><<<grid, CT_CUDA_THREADS, 0, s>>>((const double *)gy, (const double *)x, (double *)gx,
                                                                 n, tanh_form);
    else
        gelu_bwd_kernel<float><<<grid, CT_CUDA_THREADS, 0, s>>>((const float *)gy, (const float *)x, (float *)gx, n,
                                                                tanh_form);
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
