/* Pooling kernels on CUDA: max_pool2d (values and flat indices) and its gradient,
 * avg_pool2d and adaptive_avg_pool2d forward and backward. The rules are the CPU
 * loops' (src/cpu/conv.c, src/cpu/nn_fused_impl.h): the same window bounds, NaN rule,
 * divisors and accumulation types. Forward kernels take one thread per output; the
 * average pools' gradients one thread per input pixel, which sums the outputs whose
 * window covers it in the order the CPU adds them (row-major over the outputs), so no
 * atomics are needed and the result is the CPU's bit for bit. max_pool2d's gradient
 * follows arbitrary indices and adds with atomics. */
#include "kernels.cuh"
#include "nn_rt.h"

#define GRID_STRIDE(k, total)                                                                  \
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, k##_step_ =                \
                         (int64_t)gridDim.x * blockDim.x;                                      \
         k < (total); k += k##_step_)

/* ------------------------------------------------------------------ max_pool2d */

template <typename T>
static __global__ void max_pool_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t *__restrict__ idx,
                                       ct_cuda_pool_geom g, int64_t total) {
    GRID_STRIDE(k, total) {
        int64_t ox = k % g.ow, t = k / g.ow;
        int64_t oy = t % g.oh, p = t / g.oh;
        const T *xp = x + p * g.h * g.w;
        T best = (T)-INFINITY;
        int64_t at = -1;
        for (int64_t i = 0; i < g.kernel[0]; i++) {
            int64_t yy = oy * g.stride[0] - g.padding[0] + i * g.dilation[0];
            if (yy < 0 || yy >= g.h)
                continue;
            for (int64_t j = 0; j < g.kernel[1]; j++) {
                int64_t xx = ox * g.stride[1] - g.padding[1] + j * g.dilation[1];
                if (xx < 0 || xx >= g.w)
                    continue;
                T v = xp[yy * g.w + xx];
                /* NaN wins and stays; ties keep the first */
                if (at < 0 || v > best || (v != v && best == best)) {
                    best = v;
                    at = yy * g.w + xx;
                }
            }
        }
        y[k] = best;
        idx[k] = at;
    }
}

template <typename T>
static __global__ void max_unpool_kernel(const T *__restrict__ gy, const int64_t *__restrict__ idx, T *gx,
                                         int64_t in_plane, int64_t out_plane, int64_t total) {
    GRID_STRIDE(k, total) {
        int64_t p = k / out_plane;
        atomicAdd(gx + p * in_plane + idx[k], gy[k]);
    }
}

extern "C" ct_status ct_cuda_max_pool(ct_dtype wd, const void *x, void *y, int64_t *idx, const ct_cuda_pool_geom *g,
                                      int device) {
    int64_t total = g->planes * g->oh * g->ow;
    if (total <= 0)
        return CT_OK;
    unsigned grid = ct_grid_for(total, device);
    cudaStream_t s = ct_stream_of(device);
    if (wd == CT_DTYPE_FLOAT64)
        max_pool_kernel<double><<<grid, CT_CUDA_THREADS, 0, s>>>((const double *)x, (double *)y, idx, *g, total);
    else
        max_pool_kernel<float><<<grid, CT_CUDA_THREADS, 0, s>>>((const float *)x, (float *)y, idx, *g, total);
    return ct_cuda_check_launch("max_pool2d");
}

extern "C" ct_status ct_cuda_max_unpool(ct_dtype wd, const void *gy, const int64_t *idx, void *gx, int64_t planes,
                                        int64_t in_plane, int64_t out_plane, int device) {
    int64_t total = planes * out_plane;
    if (total <= 0 || in_plane <= 0)
        return CT_OK;
    unsigned grid = ct_grid_for(total, device);
    cudaStream_t s = ct_stream_of(device);
    if (wd == CT_DTYPE_FLOAT64)
        max_unpool_kernel<double><<<grid, CT_CUDA_THREADS, 0, s>>>((const double *)gy, idx, (double *)gx, in_plane,
                                                                   out_plane, total);
    else
        max_unpool_kernel<float><<<grid, CT_CUDA_THREADS, 0, s>>>((const float *)gy, idx, (float *)gx, in_plane,
                                                                  out_plane, total);
    return ct_cuda_check_launch("max_pool2d_backward");
}

/* ------------------------------------------------------------------ avg_pool2d */

/* The window of output (oy, ox), clipped to the input, and its divisor; false when it
 * lies in the padding only (the output is 0 and no gradient flows). */
static __device__ bool avg_window(const ct_cuda_pool_geom &g, int64_t oy, int64_t ox, int64_t *hs, int64_t *he,
                                  int64_t *ws, int64_t *we, double *div) {
    int64_t h0 = oy * g.stride[0] - g.padding[0], w0 = ox * g.stride[1] - g.padding[1];
    int64_t h1 = h0 + g.kernel[0], w1 = w0 + g.kernel[1];
    if (h1 > g.h + g.padding[0])
        h1 = g.h + g.padding[0];
    if (w1 > g.w + g.padding[1])
        w1 = g.w + g.padding[1];
    int64_t pool = (h1 - h0) * (w1 - w0);
    h0 = h0 < 0 ? 0 : h0;
    w0 = w0 < 0 ? 0 : w0;
    h1 = h1 > g.h ? g.h : h1;
    w1 = w1 > g.w ? g.w : w1;
    *hs = h0, *he = h1, *ws = w0, *we = w1;
    if (h0 >= h1 || w0 >= w1)
        return false;
    *div = g.divisor ? (double)g.divisor : g.count_include_pad ? (double)pool : (double)((h1 - h0) * (w1 - w0));
    return true;
}

template <typename T>
static __global__ void avg_pool_kernel(const T *__restrict__ x, T *__restrict__ y, ct_cuda_pool_geom g,
                                       int64_t total) {
    GRID_STRIDE(k, total) {
        int64_t ox = k % g.ow, t = k / g.ow;
        int64_t oy = t % g.oh, p = t / g.oh;
        const T *xp = x + p * g.h * g.w;
        int64_t hs, he, ws, we;
        double div, acc = 0;
        if (!avg_window(g, oy, ox, &hs, &he, &ws, &we, &div)) {
            y[k] = (T)0;
            continue;
        }
        for (int64_t i = hs; i < he; i++)
            for (int64_t j = ws; j < we; j++)
                acc += (double)xp[i * g.w + j];
        y[k] = (T)(acc / div);
    }
}

/* The outputs o whose window [o * s - p, o * s - p + k) holds input position v:
 * [*lo, *hi), clamped to [0, n). */
static __device__ void covering(int64_t v, int64_t s, int64_t p, int64_t k, int64_t n, int64_t *lo, int64_t *hi) {
    int64_t a = v + p - k + 1; /* o * s >= a */
    int64_t first = a <= 0 ? 0 : (a + s - 1) / s;
    int64_t last = (v + p) / s; /* o * s <= v + p, v + p >= 0 */
    *lo = first;
    *hi = last + 1 < n ? last + 1 : n;
}

template <typename T>
static __global__ void avg_pool_bwd_kernel(const T *__restrict__ gy, T *__restrict__ gx, ct_cuda_pool_geom g,
                                           int64_t total) {
    GRID_STRIDE(k, total) {
        int64_t xx = k % g.w, t = k / g.w;
        int64_t yy = t % g.h, p = t / g.h;
        const T *gp = gy + p * g.oh * g.ow;
        int64_t oy0, oy1, ox0, ox1;
        covering(yy, g.stride[0], g.padding[0], g.kernel[0], g.oh, &oy0, &oy1);
        covering(xx, g.stride[1], g.padding[1], g.kernel[1], g.ow, &ox0, &ox1);
        T acc = (T)0;
        for (int64_t oy = oy0; oy < oy1; oy++)
            for (int64_t ox = ox0; ox < ox1; ox++) {
                int64_t hs, he, ws, we;
                double div;
                if (!avg_window(g, oy, ox, &hs, &he, &ws, &we, &div) || yy < hs || yy >= he || xx < ws || xx >= we)
                    continue;
                acc += (T)((double)gp[oy * g.ow + ox] / div);
            }
        gx[k] = acc;
    }
}

/* ------------------------------------------------------------------ adaptive_avg_pool2d */

/* Output cell o of n over an input of size len: [floor(o*len/n), ceil((o+1)*len/n)). */
static __device__ __forceinline__ int64_t ada_start(int64_t o, int64_t n, int64_t len) { return (o * len) / n; }
static __device__ __forceinline__ int64_t ada_end(int64_t o, int64_t n, int64_t len) {
    return ((o + 1) * len + n - 1) / n;
}

template <typename T>
static __global__ void adaptive_kernel(const T *__restrict__ x, T *__restrict__ y, ct_cuda_pool_geom g,
                                       int64_t total) {
    GRID_STRIDE(k, total) {
        int64_t ox = k % g.ow, t = k / g.ow;
        int64_t oy = t % g.oh, p = t / g.oh;
        int64_t hs = ada_start(oy, g.oh, g.h), he = ada_end(oy, g.oh, g.h);
        int64_t ws = ada_start(ox, g.ow, g.w), we = ada_end(ox, g.ow, g.w);
        const T *xp = x + p * g.h * g.w;
        double acc = 0;
        for (int64_t i = hs; i < he; i++)
            for (int64_t j = ws; j < we; j++)
                acc += (double)xp[i * g.w + j];
        y[k] = (T)(acc / (double)((he - hs) * (we - ws)));
    }
}

/* The cells o of n over len whose range holds v: [*lo, *hi). Cell o ends past v when
 * o >= floor(v * n / len) and starts at or before v when o < ceil((v + 1) * n / len);
 * the caller checks each cell's bounds again. */
static __device__ void ada_covering(int64_t v, int64_t n, int64_t len, int64_t *lo, int64_t *hi) {
    int64_t a = (v * n) / len;
    int64_t b = ((v + 1) * n + len - 1) / len;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

template <typename T>
static __global__ void adaptive_bwd_kernel(const T *__restrict__ gy, T *__restrict__ gx, ct_cuda_pool_geom g,
                                           int64_t total) {
    GRID_STRIDE(k, total) {
        int64_t xx = k % g.w, t = k / g.w;
        int64_t yy = t % g.h, p = t / g.h;
        const T *gp = gy + p * g.oh * g.ow;
        int64_t oy0, oy1, ox0, ox1;
        ada_covering(yy, g.oh, g.h, &oy0, &oy1);
        ada_covering(xx, g.ow, g.w, &ox0, &ox1);
        T acc = (T)0;
        for (int64_t oy = oy0; oy < oy1; oy++) {
            int64_t hs = ada_start(oy, g.oh, g.h), he = ada_end(oy, g.oh, g.h);
            if (yy < hs || yy >= he)
                continue;
            for (int64_t ox = ox0; ox < ox1; ox++) {
                int64_t ws = ada_start(ox, g.ow, g.w), we = ada_end(ox, g.ow, g.w);
                if (xx < ws || xx >= we)
                    continue;
                acc += (T)((double)gp[oy * g.ow + ox] / (double)((he - hs) * (we - ws)));
            }
        }
        gx[k] = acc;
    }
}

/* ------------------------------------------------------------------ launchers */

typedef void (*pool_launch_f)(const void *in, void *out, const ct_cuda_pool_geom *g, int64_t total, unsigned grid,
                              cudaStream_t s);

#define POOL_LAUNCHER(name, kernel)                                                                      \
    template <typename T>                                                                                \
    static void name(const void *in, void *out, const ct_cuda_pool_geom *g, int64_t total, unsigned grid, \
                     cudaStream_t s) {                                                                   \
        kernel<T><<<grid, CT_CUDA_THREADS, 0, s>>>((const T *)in, (T *)out, *g, total);                 \
    }
POOL_LAUNCHER(launch_avg, avg_pool_kernel)
POOL_LAUNCHER(launch_avg_bwd, avg_pool_bwd_kernel)
POOL_LAUNCHER(launch_ada, adaptive_kernel)
POOL_LAUNCHER(launch_ada_bwd, adaptive_bwd_kernel)

static ct_status run_pool(pool_launch_f f32, pool_launch_f f64, ct_dtype wd, const void *in, void *out,
                          const ct_cuda_pool_geom *g, int64_t total, int device, const char *op) {
    if (total <= 0)
        return CT_OK;
    (wd == CT_DTYPE_FLOAT64 ? f64 : f32)(in, out, g, total, ct_grid_for(total, device), ct_stream_of(device));
    return ct_cuda_check_launch(op);
}

extern "C" ct_status ct_cuda_avg_pool(ct_dtype wd, const void *x, void *y, const ct_cuda_pool_geom *g, int device) {
    return run_pool(launch_avg<float>, launch_avg<double>, wd, x, y, g, g->planes * g->oh * g->ow, device,
                    "avg_pool2d");
}

extern "C" ct_status ct_cuda_avg_pool_bwd(ct_dtype wd, const void *gy, void *gx, const ct_cuda_pool_geom *g,
                                          int device) {
    return run_pool(launch_avg_bwd<float>, launch_avg_bwd<double>, wd, gy, gx, g, g->planes * g->h * g->w, device,
                    "avg_pool2d_backward");
}

extern "C" ct_status ct_cuda_adaptive_pool(ct_dtype wd, const void *x, void *y, const ct_cuda_pool_geom *g,
                                           int device) {
    return run_pool(launch_ada<float>, launch_ada<double>, wd, x, y, g, g->planes * g->oh * g->ow, device,
                    "adaptive_avg_pool2d");
}

extern "C" ct_status ct_cuda_adaptive_pool_bwd(ct_dtype wd, const void *gy, void *gx, const ct_cuda_pool_geom *g,
                                               int device) {
    if (g->oh <= 0 || g->ow <= 0) /* no outputs: the gradient is zero (the caller zeroes gx) */
        return CT_OK;
    return run_pool(launch_ada_bwd<float>, launch_ada_bwd<double>, wd, gy, gx, g, g->planes * g->h * g->w, device,
                    "adaptive_avg_pool2d_backward");
}
