/* CUDA kernels of cross_entropy_fused and its backward (Note [Fused cross_entropy] in
 * src/meta/nn_fused.c). One block per row: the forward reads the row once, keeping a
 * running maximum and a sum of exponentials rescaled to it (the online softmax), in
 * float32 (float64 for float64 logits); the backward reads the row once more and writes
 * each gradient element once, in the logits' dtype. Rows whose length is a multiple of
 * 16 bytes move as 16-byte vectors. Block reductions combine in a fixed tree, and the
 * reduction over rows runs in one block in a fixed order, so results are deterministic. */
#include "kernels.cuh"
#include "xent_rt.h"

#define XENT_THREADS 512
#define XENT_WARPS (XENT_THREADS / 32)

enum { XENT_NONE = 0, XENT_MEAN = 1, XENT_SUM = 2 }; /* ct_reduction's values */

template <typename S> struct xent_acc { typedef float type; };
template <> struct xent_acc<double> { typedef double type; };

static __device__ __forceinline__ float xexp(float v) { return exp2f(v * 1.4426950408889634f); }
static __device__ __forceinline__ double xexp(double v) { return exp(v); }
static __device__ __forceinline__ float xlog(float v) { return logf(v); }
static __device__ __forceinline__ double xlog(double v) { return log(v); }

/* (m, s) += (m2, s2): s's are sums of exp(v - m). A -inf maximum has nothing summed. */
template <typename A> static __device__ __forceinline__ void lse_merge(A &m, A &s, A m2, A s2) {
    if (m2 == -INFINITY)
        return;
    if (m == -INFINITY) {
        m = m2;
        s = s2;
        return;
    }
    if (m2 > m) {
        s = s * xexp(m - m2) + s2;
        m = m2;
    } else {
        s = s + s2 * xexp(m2 - m);
    }
}

/* Adds k values v[0..k) to the running (m, s). NaNs propagate through s. */
template <typename A, int K> static __device__ __forceinline__ void lse_add(A &m, A &s, const A *v) {
    A mv = v[0];
    for (int q = 1; q < K; q++)
        mv = v[q] > mv ? v[q] : mv;
    if (mv != mv) { /* a NaN: the row's result is NaN */
        s = mv;
        return;
    }
    if (mv == -INFINITY)
        return;
    if (mv > m) {
        s = m == -INFINITY ? (A)0 : s * xexp(m - mv);
        m = mv;
    }
    A acc = 0;
    for (int q = 0; q < K; q++)
        acc += xexp(v[q] - m);
    s += acc;
}

/* 16 bytes of storage type S, as K = 16 / sizeof(S) compute values. */
template <typename S> struct xvec {
    static const int K = 16 / sizeof(S);
    union {
        uint4 raw;
        S e[K];
    };
};

template <typename S, typename A> static __device__ __forceinline__ A xload(const S *p) { return (A)ct_load<S>(*p); }

/* The block's (m, s) from every thread's; every thread gets the result. */
template <typename A> static __device__ void block_lse(A &m, A &s) {
    __shared__ A sm_m[XENT_WARPS], sm_s[XENT_WARPS];
    for (int off = 16; off > 0; off >>= 1) {
        A m2 = __shfl_xor_sync(0xffffffffu, m, off), s2 = __shfl_xor_sync(0xffffffffu, s, off);
        lse_merge(m, s, m2, s2);
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) {
        sm_m[warp] = m;
        sm_s[warp] = s;
    }
    __syncthreads();
    m = -INFINITY;
    s = 0;
    for (int w = 0; w < XENT_WARPS; w++)
        lse_merge(m, s, sm_m[w], sm_s[w]);
}

template <typename S, typename A>
static __global__ void __launch_bounds__(XENT_THREADS)
    xent_fwd_kernel(const S *__restrict__ x, const int64_t *__restrict__ t, A *__restrict__ rows,
                    A *__restrict__ lse_out, int64_t c, int64_t ignore, bool vec) {
    const int64_t i = blockIdx.x;
    const S *xr = x + i * c;
    A m = -INFINITY, s = 0;
    if (vec) {
        typedef xvec<S> V;
        const int64_t nv = c / V::K;
        const uint4 *p = (const uint4 *)xr;
        for (int64_t k = threadIdx.x; k < nv; k += XENT_THREADS) {
            V v;
            v.raw = __ldg(p + k);
            A a[V::K];
            for (int q = 0; q < V::K; q++)
                a[q] = (A)ct_load<S>(v.e[q]);
            lse_add<A, V::K>(m, s, a);
        }
    } else {
        for (int64_t j = threadIdx.x; j < c; j += XENT_THREADS) {
            A a = xload<S, A>(xr + j);
            lse_add<A, 1>(m, s, &a);
        }
    }
    block_lse(m, s);
    if (threadIdx.x == 0) {
        A l = m + xlog(s);
        int64_t ti = t[i];
        A loss;
        if (ti == ignore) {
            loss = 0;
        } else if (ti < 0 || ti >= c) { /* Note [Fused cross_entropy]: the row is marked */
            l = (A)NAN;
            loss = (A)NAN;
        } else {
            loss = l - xload<S, A>(xr + ti);
        }
        lse_out[i] = l;
        rows[i] = loss;
    }
}

/* out[0] = the sum of rows in row order (each thread a strided share, then a fixed
 * tree), divided by the count of counted rows for the mean. */
#define XENT_SUM_THREADS 1024
template <typename S, typename A>
static __global__ void __launch_bounds__(XENT_SUM_THREADS)
    xent_sum_kernel(const A *__restrict__ rows, const int64_t *__restrict__ t, S *out, int64_t n, int64_t ignore,
                    int mode) {
    __shared__ double sm[2 * XENT_SUM_THREADS];
    double acc = 0, cnt = 0;
    for (int64_t k = threadIdx.x; k < n; k += XENT_SUM_THREADS) {
        acc += (double)rows[k];
        cnt += t[k] != ignore;
    }
    sm[threadIdx.x] = acc;
    sm[XENT_SUM_THREADS + threadIdx.x] = cnt;
    for (int w = XENT_SUM_THREADS / 2; w > 0; w >>= 1) {
        __syncthreads();
        if ((int)threadIdx.x < w) {
            sm[threadIdx.x] += sm[threadIdx.x + w];
            sm[XENT_SUM_THREADS + threadIdx.x] += sm[XENT_SUM_THREADS + threadIdx.x + w];
        }
    }
    if (threadIdx.x == 0) {
        double v = mode == XENT_MEAN ? sm[0] / sm[XENT_SUM_THREADS] : sm[0];
        out[0] = ct_store<S>((A)v);
    }
}

/* *scale = 1 / the count of counted rows (the mean's divisor). */
static __global__ void __launch_bounds__(XENT_SUM_THREADS)
    xent_count_kernel(const int64_t *__restrict__ t, int64_t n, int64_t ignore, double *scale) {
    __shared__ double sm[XENT_SUM_THREADS];
    double cnt = 0;
    for (int64_t k = threadIdx.x; k < n; k += XENT_SUM_THREADS)
        cnt += t[k] != ignore;
    sm[threadIdx.x] = cnt;
    for (int w = XENT_SUM_THREADS / 2; w > 0; w >>= 1) {
        __syncthreads();
        if ((int)threadIdx.x < w)
            sm[threadIdx.x] += sm[threadIdx.x + w];
    }
    if (threadIdx.x == 0)
        *scale = 1.0 / sm[0];
}

/* gx may be x (the logits' memory reused, Note [Reusing a saved input's memory] in
 * src/autograd/node.c): each element is read before the same thread writes it, so x
 * and gx are neither restrict nor read through the read-only cache. */
template <typename S, typename A>
static __global__ void __launch_bounds__(XENT_THREADS)
    xent_bwd_kernel(const A *__restrict__ gy, const S *x, const int64_t *__restrict__ t,
                    const A *__restrict__ lse, S *gx, int64_t c, int64_t ignore, int mode,
                    const double *__restrict__ scale, bool vec) {
    const int64_t i = blockIdx.x;
    const S *xr = x + i * c;
    S *gr = gx + i * c;
    const int64_t ti = t[i];
    const bool skip = ti == ignore;
    A g = 0;
    if (!skip)
        g = mode == XENT_NONE ? gy[i] : mode == XENT_MEAN ? (A)((double)gy[0] * *scale) : gy[0];
    const A l = lse[i];
    if (vec) {
        typedef xvec<S> V;
        const int64_t nv = c / V::K;
        const uint4 *p = (const uint4 *)xr;
        uint4 *o = (uint4 *)gr;
        for (int64_t k = threadIdx.x; k < nv; k += XENT_THREADS) {
            V v, r;
            v.raw = p[k];
            for (int q = 0; q < V::K; q++) {
                int64_t j = k * V::K + q;
                A d = skip ? (A)0 : g * (xexp((A)ct_load<S>(v.e[q]) - l) - (j == ti ? (A)1 : (A)0));
                r.e[q] = ct_store<S>(d);
            }
            o[k] = r.raw;
        }
    } else {
        for (int64_t j = threadIdx.x; j < c; j += XENT_THREADS) {
            A d = skip ? (A)0 : g * (xexp(xload<S, A>(xr + j) - l) - (j == ti ? (A)1 : (A)0));
            gr[j] = ct_store<S>(d);
        }
    }
}

template <typename S>
static ct_status fwd(const S *x, const int64_t *t, void *rows, void *lse, void *out, bool out_work, int64_t n,
                     int64_t c, int mode, int64_t ignore, int device) {
    typedef typename xent_acc<S>::type A;
    cudaStream_t st = ct_stream_of(device);
    bool vec = c % xvec<S>::K == 0 && ((uintptr_t)x & 15) == 0;
    if (n > 0x7fffffff)
        return ct_error(CT_ERROR_VALUE, "cross_entropy_fused", "too many rows (%lld)", (long long)n);
    if (n > 0)
        xent_fwd_kernel<S, A><<<(unsigned)n, XENT_THREADS, 0, st>>>(x, t, (A *)rows, (A *)lse, c, ignore, vec);
    ct_status e = ct_cuda_check_launch("cross_entropy_fused");
    if (e == CT_OK && mode != XENT_NONE) {
        if (out_work)
            xent_sum_kernel<A, A><<<1, XENT_SUM_THREADS, 0, st>>>((const A *)rows, t, (A *)out, n, ignore, mode);
        else
            xent_sum_kernel<S, A><<<1, XENT_SUM_THREADS, 0, st>>>((const A *)rows, t, (S *)out, n, ignore, mode);
        e = ct_cuda_check_launch("cross_entropy_fused");
    }
    return e;
}

template <typename S>
static ct_status bwd(const void *gy, const S *x, const int64_t *t, const void *lse, S *gx, int64_t n, int64_t c,
                     int mode, int64_t ignore, double *scratch, int device) {
    typedef typename xent_acc<S>::type A;
    const char *op = "cross_entropy_fused_backward";
    cudaStream_t st = ct_stream_of(device);
    if (n == 0 || c == 0)
        return CT_OK;
    if (n > 0x7fffffff)
        return ct_error(CT_ERROR_VALUE, op, "too many rows (%lld)", (long long)n);
    if (mode == XENT_MEAN) {
        xent_count_kernel<<<1, XENT_SUM_THREADS, 0, st>>>(t, n, ignore, scratch);
        ct_status e = ct_cuda_check_launch(op);
        if (e != CT_OK)
            return e;
    }
    bool vec = c % xvec<S>::K == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)gx & 15) == 0;
    xent_bwd_kernel<S, A><<<(unsigned)n, XENT_THREADS, 0, st>>>((const A *)gy, x, t, (const A *)lse, gx, c, ignore,
                                                                 mode, scratch, vec);
    return ct_cuda_check_launch(op);
}

extern "C" ct_status ct_cuda_xent_fwd(ct_dtype dt, const void *x, const int64_t *t, void *rows, void *lse, void *out,
                                      bool out_work, int64_t n, int64_t c, int reduction, int64_t ignore, int device) {
    const bool w = out_work;
    switch (dt) {
    case CT_DTYPE_FLOAT64: return fwd<double>((const double *)x, t, rows, lse, out, w, n, c, reduction, ignore, device);
    case CT_DTYPE_FLOAT32: return fwd<float>((const float *)x, t, rows, lse, out, w, n, c, reduction, ignore, device);
    case CT_DTYPE_FLOAT16:
        return fwd<ct_half_s>((const ct_half_s *)x, t, rows, lse, out, w, n, c, reduction, ignore, device);
    case CT_DTYPE_BFLOAT16:
        return fwd<ct_bf16_s>((const ct_bf16_s *)x, t, rows, lse, out, w, n, c, reduction, ignore, device);
    default:
        return ct_error(CT_ERROR_TYPE, "cross_entropy_fused", "\"cross_entropy_fused\" not implemented for '%s'",
                        ct_dtype_name(dt));
    }
}

extern "C" ct_status ct_cuda_xent_bwd(ct_dtype dt, const void *gy, const void *x, const int64_t *t, const void *lse,
                                      void *gx, int64_t n, int64_t c, int reduction, int64_t ignore, double *scratch,
                                      int device) {
    switch (dt) {
    case CT_DTYPE_FLOAT64:
        return bwd<double>(gy, (const double *)x, t, lse, (double *)gx, n, c, reduction, ignore, scratch, device);
    case CT_DTYPE_FLOAT32:
        return bwd<float>(gy, (const float *)x, t, lse, (float *)gx, n, c, reduction, ignore, scratch, device);
    case CT_DTYPE_FLOAT16:
        return bwd<ct_half_s>(gy, (const ct_half_s *)x, t, lse, (ct_half_s *)gx, n, c, reduction, ignore, scratch,
                              device);
    case CT_DTYPE_BFLOAT16:
        return bwd<ct_bf16_s>(gy, (const ct_bf16_s *)x, t, lse, (ct_bf16_s *)gx, n, c, reduction, ignore, scratch,
                              device);
    default:
        return ct_error(CT_ERROR_TYPE, "cross_entropy_fused_backward",
                        "\"cross_entropy_fused_backward\" not implemented for '%s'", ct_dtype_name(dt));
    }
}
