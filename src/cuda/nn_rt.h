/* C interface of the CUDA kernels of convolution, pooling and the fused normalisation
 * and activation-gradient ops (conv.cu, pool.cu, norm.cu), and the registration of
 * their host halves (conv_cuda.c, pool_cuda.c, norm_cuda.c). Plain C types only, as
 * cuda_rt.h. Every array is contiguous, in the work dtype wd (float32 or float64) unless
 * said otherwise, on the given device; kernels run on its current stream. Launchers
 * return CT_OK without launching when there is nothing to do. */
#ifndef CT_CUDA_NN_RT_H
#define CT_CUDA_NN_RT_H

#include "cuda/cuda_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The geometry of a convolution over nb images of c x h x w (kernel kh x kw, output
 * oh x ow). */
typedef struct ct_cuda_conv_geom {
    int64_t nb, c, h, w, kh, kw, oh, ow;
    int64_t stride[2], padding[2], dilation[2];
} ct_cuda_conv_geom;

/* conv.cu. The column matrix has c * kh * kw rows, (c, i, j) row-major, and
 * nb * oh * ow columns, (image, oy, ox) row-major.
 * im2col: cols = the input patches of x (nb, c, h, w), zeros over the padding.
 * col2im: gx (nb, c, h, w) = the adjoint: each pixel sums the column entries that read
 * it (a gather, so no atomics and a fixed order). */
ct_status ct_cuda_im2col(ct_dtype wd, const void *x, void *cols, const ct_cuda_conv_geom *g, int device);
ct_status ct_cuda_col2im(ct_dtype wd, const void *cols, void *gx, const ct_cuda_conv_geom *g, int device);

/* The geometry of a pooling over planes of h x w into oh x ow. */
typedef struct ct_cuda_pool_geom {
    int64_t planes, h, w, oh, ow;
    int64_t kernel[2], stride[2], padding[2], dilation[2];
    bool count_include_pad;
    int64_t divisor; /* avg_pool2d's divisor_override, 0: none */
} ct_cuda_pool_geom;

/* pool.cu.
 * max_pool: y (planes, oh, ow) and idx (int64, flat h * w positions in the plane).
 * max_unpool: gx (planes, h, w, zeroed by the caller) += gy at idx (atomics; indices
 * validated by the caller), out_plane = gy's elements per plane.
 * avg_pool / avg_pool_bwd: avg_pool2d and its gradient (gx fully written).
 * adaptive / adaptive_bwd: adaptive_avg_pool2d and its gradient (gx fully written). */
ct_status ct_cuda_max_pool(ct_dtype wd, const void *x, void *y, int64_t *idx, const ct_cuda_pool_geom *g,
                           int device);
ct_status ct_cuda_max_unpool(ct_dtype wd, const void *gy, const int64_t *idx, void *gx, int64_t planes,
                             int64_t in_plane, int64_t out_plane, int device);
ct_status ct_cuda_avg_pool(ct_dtype wd, const void *x, void *y, const ct_cuda_pool_geom *g, int device);
ct_status ct_cuda_avg_pool_bwd(ct_dtype wd, const void *gy, void *gx, const ct_cuda_pool_geom *g, int device);
ct_status ct_cuda_adaptive_pool(ct_dtype wd, const void *x, void *y, const ct_cuda_pool_geom *g, int device);
ct_status ct_cuda_adaptive_pool_bwd(ct_dtype wd, const void *gy, void *gx, const ct_cuda_pool_geom *g, int device);

/* norm.cu, over rows x cols matrices (w, b: cols elements or NULL).
 * rms_norm_fwd: y = x * rstd * w.
 * rms_norm_bwd: gx, and with gw (double, cols) the weight gradient summed over rows;
 *   scratch: ct_cuda_norm_scratch(rows, cols) bytes.
 * layer_norm_fwd: y = (x - mean) * rstd * w + b.
 * layer_norm_bwd: gx, gw and gb (double, cols, each may be NULL); same scratch.
 * layer_norm_native: whether the layer_norm kernels take arrays of dtype dt as they are
 *   (float16, bfloat16, float32 rows up to a length: Note [layer_norm on CUDA]); wd is
 *   then that dtype, otherwise the work dtype float32/float64. */
size_t ct_cuda_norm_scratch(int64_t rows, int64_t cols);
bool ct_cuda_layer_norm_native(ct_dtype dt, int64_t cols);
ct_status ct_cuda_rms_norm_fwd(ct_dtype wd, const void *x, const void *w, void *y, int64_t rows, int64_t cols,
                               double eps, int device);
ct_status ct_cuda_rms_norm_bwd(ct_dtype wd, const void *gy, const void *x, const void *w, void *gx, double *gw,
                               int64_t rows, int64_t cols, double eps, void *scratch, int device);
ct_status ct_cuda_layer_norm_fwd(ct_dtype wd, const void *x, const void *w, const void *b, void *y, int64_t rows,
                                 int64_t cols, double eps, int device);
ct_status ct_cuda_layer_norm_bwd(ct_dtype wd, const void *gy, const void *x, const void *w, void *gx, double *gw,
                                 double *gb, int64_t rows, int64_t cols, double eps, void *scratch, int device);
/* gx = gy * gelu'(x) over n elements of dtype dt (tanh_form: the tanh approximation);
 * float16 and bfloat16 computed in float32. */
ct_status ct_cuda_gelu_bwd(ct_dtype dt, const void *gy, const void *x, void *gx, int64_t n, bool tanh_form,
                           int device);
/* out = x <= threshold ? 0 : gy over n elements. */
ct_status ct_cuda_threshold_bwd(ct_dtype wd, const void *gy, const void *x, double threshold, void *out, int64_t n,
                                int device);

/* Host halves: register the CUDA kernels of conv2d, conv2d_backward, conv_transpose2d
 * (conv_cuda.c); max_pool2d_with_indices, max_pool2d_backward, avg_pool2d(_backward),
 * adaptive_avg_pool2d(_backward) (pool_cuda.c); rms_norm(_backward),
 * layer_norm(_backward), gelu_backward, threshold_backward (norm_cuda.c). */
void ct_cuda_register_conv(void);
void ct_cuda_register_pool(void);
void ct_cuda_register_norm(void);

#ifdef __cplusplus
}
#endif
#endif /* CT_CUDA_NN_RT_H */
