/* CUDA kernels of nll_loss and its backward (the loss half of cross_entropy). Inputs
 * arrive contiguous in a work dtype (float32 or float64), targets as int64, viewed as
 * (n, c, inner); the host has validated the targets. Reductions run in one block
 * with double accumulators in a fixed order, so results are deterministic. */
#include "kernels.cuh"

#define NLL_THREADS 256

enum { NLL_NONE = 0, NLL_MEAN = 1, NLL_SUM = 2 }; /* ct_reduction's values */

/* *first = the smallest k whose target is neither ignore nor a class in [0, c). */
static __global__ void nll_check_kernel(const int64_t *t, int64_t total, int64_t c, int64_t ignore,
                                        unsigned long long *first) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < total; k += stride) {
        int64_t v = t[k];
        if (v != ignore && (v < 0 || v >= c))
            atomicMin(first, (unsigned long long)k);
    }
}

extern "C" ct_status ct_cuda_nll_check(const int64_t *t, int64_t total, int64_t c, int64_t ignore, uint64_t *first_bad,
                                       int device) {
    if (total == 0)
        return CT_OK;
    nll_check_kernel<<<ct_grid_for(total, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        t, total, c, ignore, (unsigned long long *)first_bad);
    return ct_cuda_check_launch("nll_loss");
}

/* Sums v and w over the block into sm; thread 0 gets the totals. */
static __device__ void block_sum2(double &v, double &w, double *sm) {
    sm[threadIdx.x] = v;
    sm[NLL_THREADS + threadIdx.x] = w;
    for (int s = NLL_THREADS / 2; s > 0; s >>= 1) {
        __syncthreads();
        if ((int)threadIdx.x < s) {
            sm[threadIdx.x] += sm[threadIdx.x + s];
            sm[NLL_THREADS + threadIdx.x] += sm[NLL_THREADS + threadIdx.x + s];
        }
    }
    __syncthreads();
    v = sm[0];
    w = sm[NLL_THREADS];
}

template <typename T>
static __global__ void __launch_bounds__(NLL_THREADS)
    nll_fwd_kernel(const T *x, const int64_t *t, const T *w, T *out, int64_t n, int64_t c, int64_t inner, int mode,
                   int64_t ignore) {
    __shared__ double sm[2 * NLL_THREADS];
    const int64_t total = n * inner;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    double acc = 0, tw = 0;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < total; k += stride) {
        int64_t i = k / inner, j = k - i * inner;
        int64_t cl = t[k];
        double v = 0;
        if (cl != ignore) {
            double wc = w ? (double)w[cl] : 1.0;
            v = -wc * (double)x[(i * c + cl) * inner + j];
            tw += wc;
        }
        if (mode == NLL_NONE)
            out[k] = (T)v;
        else
            acc += v;
    }
    if (mode == NLL_NONE)
        return; /* uniform across the grid: no thread reaches the barrier below */
    block_sum2(acc, tw, sm);
    if (threadIdx.x == 0)
        out[0] = (T)(mode == NLL_SUM ? acc : acc / tw);
}

/* Total weight of the non-ignored targets (the mean's divisor), into *tw. */
template <typename T>
static __global__ void __launch_bounds__(NLL_THREADS)
    nll_weight_kernel(const int64_t *t, const T *w, int64_t total, int64_t ignore, double *tw_out) {
    __shared__ double sm[2 * NLL_THREADS];
    double tw = 0, unused = 0;
    for (int64_t k = threadIdx.x; k < total; k += NLL_THREADS) {
        int64_t cl = t[k];
        if (cl != ignore)
            tw += w ? (double)w[cl] : 1.0;
    }
    block_sum2(tw, unused, sm);
    if (threadIdx.x == 0)
        *tw_out = tw;
}

template <typename T>
static __global__ void nll_bwd_kernel(const T *gy, const int64_t *t, const T *w, T *gx, int64_t n, int64_t c,
                                      int64_t inner, int mode, int64_t ignore, const double *tw) {
    const int64_t total = n * inner;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < total; k += stride) {
        int64_t cl = t[k];
        if (cl == ignore)
            continue;
        int64_t i = k / inner, j = k - i * inner;
        double wc = w ? (double)w[cl] : 1.0;
        double go = mode == NLL_NONE ? (double)gy[k] : (double)gy[0];
        if (mode == NLL_MEAN)
            go /= *tw;
        gx[(i * c + cl) * inner + j] = (T)(-wc * go);
    }
}

extern "C" ct_status ct_cuda_nll_run(ct_dtype wd, bool backward, const void *gy, const void *x, const int64_t *t,
                                     const void *w, void *out, int64_t n, int64_t c, int64_t inner, int mode,
                                     int64_t ignore, double *scratch, int device) {
    cudaStream_t s = ct_stream_of(device);
    const int64_t total = n * inner;
    const char *op = backward ? "nll_loss_backward" : "nll_loss";
    if (!backward) {
        unsigned grid = mode == NLL_NONE ? ct_grid_for(total, device) : 1;
        if (mode == NLL_NONE && total == 0)
            return CT_OK;
        if (wd == CT_DTYPE_FLOAT64)
            nll_fwd_kernel<double><<<grid, NLL_THREADS, 0, s>>>((const double *)x, t, (const double *)w, (double *)out,
                                                                n, c, inner, mode, ignore);
        else
            nll_fwd_kernel<float><<<grid, NLL_THREADS, 0, s>>>((const float *)x, t, (const float *)w, (float *)out, n, c,
                                                               inner, mode, ignore);
        return ct_cuda_check_launch(op);
    }
    if (total == 0)
        return CT_OK;
    if (mode == NLL_MEAN) {
        if (wd == CT_DTYPE_FLOAT64)
            nll_weight_kernel<double><<<1, NLL_THREADS, 0, s>>>(t, (const double *)w, total, ignore, scratch);
        else
            nll_weight_kernel<float><<<1, NLL_THREADS, 0, s>>>(t, (const float *)w, total, ignore, scratch);
        ct_status st = ct_cuda_check_launch(op);
        if (st != CT_OK)
            return st;
    }
    unsigned grid = ct_grid_for(total, device);
    if (wd == CT_DTYPE_FLOAT64)
        nll_bwd_kernel<double><<<grid, CT_CUDA_THREADS, 0, s>>>((const double *)gy, t, (const double *)w, (double *)out,
                                                                 n, c, inner, mode, ignore, scratch);
    else
        nll_bwd_kernel<float><<<grid, CT_CUDA_THREADS, 0, s>>>((const float *)gy, t, (const float *)w, (float *)out, n,
                                                                c, inner, mode, ignore, scratch);
    return ct_cuda_check_launch(op);
}
