/* The column-matrix kernels of convolution on CUDA (the products run in cuBLASLt,
 * through bmm: Note [GPU convolution] in conv_cuda.c). One thread per element of the
 * written array, grid-stride loops, 64-bit index math. */
#include "kernels.cuh"
#include "nn_rt.h"

/* cols[(c, i, j), (b, oy, ox)] = x[b, c, oy * sh - ph + i * dh, ox * sw - pw + j * dw],
 * 0 outside the input. */
template <typename T>
static __global__ void im2col_kernel(const T *__restrict__ x, T *__restrict__ cols, ct_cuda_conv_geom g,
                                     int64_t total) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < total; k += stride) {
        int64_t t = k;
        int64_t ox = t % g.ow;
        t /= g.ow;
        int64_t oy = t % g.oh;
        t /= g.oh;
        int64_t b = t % g.nb;
        t /= g.nb;
        int64_t j = t % g.kw;
        t /= g.kw;
        int64_t i = t % g.kh;
        int64_t c = t / g.kh;
        int64_t yy = oy * g.stride[0] - g.padding[0] + i * g.dilation[0];
        int64_t xx = ox * g.stride[1] - g.padding[1] + j * g.dilation[1];
        T v = (T)0;
        if (yy >= 0 && yy < g.h && xx >= 0 && xx < g.w)
            v = x[((b * g.c + c) * g.h + yy) * g.w + xx];
        cols[k] = v;
    }
}

/* gx[b, c, y, x] = the sum of the column entries im2col read from (y, x), in the
 * order (i, j) of the kernel taps. */
template <typename T>
static __global__ void col2im_kernel(const T *__restrict__ cols, T *__restrict__ gx, ct_cuda_conv_geom g,
                                     int64_t total) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t ncols = g.nb * g.oh * g.ow;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < total; k += stride) {
        int64_t t = k;
        int64_t xx = t % g.w;
        t /= g.w;
        int64_t yy = t % g.h;
        t /= g.h;
        int64_t c = t % g.c;
        int64_t b = t / g.c;
        T acc = (T)0;
        for (int64_t i = 0; i < g.kh; i++) {
            int64_t ny = yy + g.padding[0] - i * g.dilation[0];
            if (ny < 0 || ny % g.stride[0] != 0)
                continue;
            int64_t oy = ny / g.stride[0];
            if (oy >= g.oh)
                continue;
            for (int64_t j = 0; j < g.kw; j++) {
                int64_t nx = xx + g.padding[1] - j * g.dilation[1];
                if (nx < 0 || nx % g.stride[1] != 0)
                    continue;
                int64_t ox = nx / g.stride[1];
                if (ox >= g.ow)
                    continue;
                acc += cols[((c * g.kh + i) * g.kw + j) * ncols + (b * g.oh + oy) * g.ow + ox];
            }
        }
        gx[k] = acc;
    }
}

extern "C" ct_status ct_cuda_im2col(ct_dtype wd, const void *x, void *cols, const ct_cuda_conv_geom *g, int device) {
    int64_t total = g->c * g->kh * g->kw * g->nb * g->oh * g->ow;
    if (total <= 0)
        return CT_OK;
    unsigned grid = ct_grid_for(total, device);
    cudaStream_t s = ct_stream_of(device);
    if (wd == CT_DTYPE_FLOAT64)
        im2col_kernel<double><<<grid, CT_CUDA_THREADS, 0, s>>>((const double *)x, (double *)cols, *g, total);
    else
        im2col_kernel<float><<<grid, CT_CUDA_THREADS, 0, s>>>((const float *)x, (float *)cols, *g, total);
    return ct_cuda_check_launch("conv2d");
}

extern "C" ct_status ct_cuda_col2im(ct_dtype wd, const void *cols, void *gx, const ct_cuda_conv_geom *g, int device) {
    int64_t total = g->nb * g->c * g->h * g->w;
    if (total <= 0)
        return CT_OK;
    unsigned grid = ct_grid_for(total, device);
    cudaStream_t s = ct_stream_of(device);
    if (wd == CT_DTYPE_FLOAT64)
        col2im_kernel<double><<<grid, CT_CUDA_THREADS, 0, s>>>((const double *)cols, (double *)gx, *g, total);
    else
        col2im_kernel<float><<<grid, CT_CUDA_THREADS, 0, s>>>((const float *)cols, (float *)gx, *g, total);
    return ct_cuda_check_launch("conv2d_backward");
}
