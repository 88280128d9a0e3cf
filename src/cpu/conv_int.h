/* Integer conv2d (forward and backward, which conv_transpose2d uses) and avg_pool2d on
 * the CPU: Note [Integer convolution] in src/cpu/conv_int.c. Every buffer is a
 * contiguous int64 array laid out as the float kernels' (NCHW, OIHW). */
#ifndef CT_CPU_CONV_INT_H
#define CT_CPU_CONV_INT_H

#include "meta/nn_fused.h"
#include "meta/nn_ops.h"

/* y = conv2d(x, w) + b (b may be NULL). */
void ct_conv2d_int_forward(const ct_conv2d_geom *g, const int64_t *x, const int64_t *w, const int64_t *b,
                           int64_t *y);
/* The gradients of conv2d for grad_output gy; each of gx, gw, gb may be NULL (not
 * computed), and x is read only for gw. */
void ct_conv2d_int_backward(const ct_conv2d_geom *g, const int64_t *x, const int64_t *w, const int64_t *gy,
                            int64_t *gx, int64_t *gw, int64_t *gb);
void ct_avgpool_int_forward(const ct_avgpool_geom *g, const int64_t *x, int64_t *y);

#endif
