/* Geometry of convolutions and pooling, shared by the backends' kernels. */
#ifndef CT_OPS_NN_OPS_H
#define CT_OPS_NN_OPS_H

#include "dispatch/call.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

typedef struct ct_conv2d_geom {
    bool batched;
    int64_t n, c, h, w;    /* input */
    int64_t oc, kh, kw;    /* weight */
    int64_t oh, ow;        /* output */
    int64_t stride[2], padding[2], dilation[2], groups;
} ct_conv2d_geom;

typedef struct ct_pool2d_geom {
    bool batched, ceil_mode;
    int64_t n, c, h, w, oh, ow;
    int64_t kernel[2], stride[2], padding[2], dilation[2];
} ct_pool2d_geom;

/* Checks a conv2d / conv2d_backward call (in[0] input, in[1] weight, in[2] bias or
 * NULL; ints: stride[2], padding[2], dilation[2], groups) and fills g. For
 * conv2d_backward pass a call whose in[] is shifted to (input, weight, NULL). */
ct_status ct_conv2d_geometry(const ct_call *call, ct_conv2d_geom *g);
void ct_conv2d_out_shape(const ct_conv2d_geom *g, int64_t *shape, int *ndim);
/* Checks a conv2d_backward call (in: grad_output, input, weight; ints as conv2d's),
 * grad_output's shape included, and fills g. */
ct_status ct_conv2d_backward_geometry(const ct_call *call, ct_conv2d_geom *g);
/* Checks max_pool2d_backward's grad_output, input and int64 indices against each other. */
ct_status ct_max_pool2d_backward_check(const ct_tensor *go, const ct_tensor *x, const ct_tensor *ix);
/* Checks a max_pool2d call (ints: kernel[2], stride[2], padding[2], dilation[2],
 * ceil_mode) and fills g. */
ct_status ct_pool2d_geometry(const ct_call *call, ct_pool2d_geom *g);
void ct_pool2d_out_shape(const ct_pool2d_geom *g, int64_t *shape, int *ndim);
/* The output length of a pooling window along one dim (max and avg pooling), with
 * PyTorch's ceil_mode rule (the last window starts inside the input or its left
 * padding); false when the sizes overflow int64. */
bool ct_pool_out_len(int64_t in, int64_t pad, int64_t kernel, int64_t stride, int64_t dilation, bool ceil_mode,
                     int64_t *out);
/* PyTorch's "Output size is too small" error when a pooled output would be empty. */
ct_status ct_pool_check_out(const char *op, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow);
/* Checks a threshold_backward call (in: grad_output, input; s[0]: threshold). */
ct_status ct_threshold_backward_check(const ct_call *call);

CT_BACKEND_END

#endif
