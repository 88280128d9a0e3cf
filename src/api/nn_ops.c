/* The convolution and pooling ops' public wrappers (conv2d, conv2d_backward,
 * max_pool2d, max_pool2d_backward, threshold_backward): each packs a ct_call; the
 * geometry and checks are src/meta/nn_ops.c's. */
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "dispatch/dispatch_internal.h"
#include "meta/nn_ops.h"

/* ------------------------------------------------------------------ wrappers */

static void put_pair(ct_call *c, int at, const int64_t *v, int64_t dflt) {
    c->ints[at] = v ? v[0] : dflt;
    c->ints[at + 1] = v ? v[1] : dflt;
}

ct_tensor *ct_conv2d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias, const int64_t stride[2],
                     const int64_t padding[2], const int64_t dilation[2], int64_t groups) {
    CT_CHECK_ARG("conv2d", input);
    CT_CHECK_ARG("conv2d", weight);
    ct_call c = {.op = CT_OP_conv2d, .nin = 3, .in = {input, weight, bias}, .nints = 7, .dtype = CT_DTYPE_UNDEFINED};
    put_pair(&c, 0, stride, 1);
    put_pair(&c, 2, padding, 0);
    put_pair(&c, 4, dilation, 1);
    c.ints[6] = groups;
    return ct_dispatch_1(&c);
}

ct_status ct_conv2d_backward(const ct_tensor *grad_output, const ct_tensor *input, const ct_tensor *weight,
                             const int64_t stride[2], const int64_t padding[2], const int64_t dilation[2],
                             int64_t groups, ct_tensor **grad_input, ct_tensor **grad_weight, ct_tensor **grad_bias) {
    CT_CHECK_ARG_STATUS("conv2d_backward", grad_output);
    CT_CHECK_ARG_STATUS("conv2d_backward", input);
    CT_CHECK_ARG_STATUS("conv2d_backward", weight);
    ct_call c = {.op = CT_OP_conv2d_backward, .nin = 3, .in = {grad_output, input, weight}, .nints = 10,
                 .dtype = CT_DTYPE_UNDEFINED};
    put_pair(&c, 0, stride, 1);
    put_pair(&c, 2, padding, 0);
    put_pair(&c, 4, dilation, 1);
    c.ints[6] = groups;
    c.ints[7] = grad_input != NULL;
    c.ints[8] = grad_weight != NULL;
    c.ints[9] = grad_bias != NULL;
    ct_status st = ct_dispatch(&c);
    if (st == CT_OK) {
        ct_tensor **outs[3] = {grad_input, grad_weight, grad_bias};
        for (int i = 0; i < 3; i++)
            if (outs[i])
                *outs[i] = ct_call_take_output(&c, i);
    }
    ct_call_clear_outputs(&c);
    return st;
}

ct_tensor *ct_max_pool2d(const ct_tensor *input, const int64_t kernel[2], const int64_t stride[2],
                         const int64_t padding[2], const int64_t dilation[2], bool ceil_mode, ct_tensor **indices) {
    CT_CHECK_ARG("max_pool2d", input);
    if (!kernel) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "max_pool2d", "kernel size is NULL");
        return NULL;
    }
    ct_call c = {.op = CT_OP_max_pool2d_with_indices, .nin = 1, .in = {input}, .nints = 9, .dtype = CT_DTYPE_UNDEFINED};
    put_pair(&c, 0, kernel, 1);
    put_pair(&c, 2, stride ? stride : kernel, 1);
    put_pair(&c, 4, padding, 0);
    put_pair(&c, 6, dilation, 1);
    c.ints[8] = ceil_mode;
    if (ct_dispatch(&c) != CT_OK)
        return NULL;
    ct_tensor *out = ct_call_take_output(&c, 0);
    if (indices)
        *indices = ct_call_take_output(&c, 1);
    ct_call_clear_outputs(&c);
    return out;
}

ct_tensor *ct_max_pool2d_backward(const ct_tensor *grad_output, const ct_tensor *input, const ct_tensor *indices) {
    CT_CHECK_ARG("max_pool2d_backward", grad_output);
    CT_CHECK_ARG("max_pool2d_backward", input);
    CT_CHECK_ARG("max_pool2d_backward", indices);
    ct_call c = {.op = CT_OP_max_pool2d_backward, .nin = 3, .in = {grad_output, input, indices},
                 .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
}

ct_tensor *ct_threshold_backward(const ct_tensor *grad_output, const ct_tensor *input, ct_scalar threshold) {
    CT_CHECK_ARG("threshold_backward", grad_output);
    CT_CHECK_ARG("threshold_backward", input);
    ct_call c = {.op = CT_OP_threshold_backward, .nin = 2, .in = {grad_output, input}, .nscalars = 1,
                 .s = {threshold}, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
}
