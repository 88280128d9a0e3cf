/* The public entry points of cuDNN's recurrence (ctorch/nn.h): the calls of the
 * _cudnn_rnn and _cudnn_rnn_backward ops, whose kernels the CUDA backend registers when
 * it finds libcudnn (Note [cuDNN at run time] in src/cuda/rnn_cudnn.c). The switch
 * ct_backends_cudnn_set_enabled lives beside flash attention's in nn_fused.c. */
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "dispatch/dispatch_internal.h"

static void pack_ints(ct_call *c, ct_cudnn_rnn_mode mode, int64_t hidden, int64_t layers, bool bidirectional,
                      bool batch_first, bool has_biases) {
    int64_t v[6] = {mode, hidden, layers, bidirectional, batch_first, has_biases};
    memcpy(c->ints + c->nints, v, sizeof v);
    c->nints += 6;
}

ct_status ct_cudnn_rnn(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *hx, const ct_tensor *cx,
                       const ct_tensor *lengths, ct_cudnn_rnn_mode mode, int64_t hidden_size, int64_t num_layers,
                       bool bidirectional, bool batch_first, bool has_biases, bool train, ct_tensor **output,
                       ct_tensor **hy, ct_tensor **cy, ct_tensor **reserve) {
    const char *op = "_cudnn_rnn";
    CT_CHECK_ARG_STATUS(op, input);
    CT_CHECK_ARG_STATUS(op, weight);
    CT_CHECK_ARG_STATUS(op, hx);
    if (!output || !hy)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "output and hy must not be NULL");
    *output = *hy = NULL;
    if (cy)
        *cy = NULL;
    if (reserve)
        *reserve = NULL;
    const ct_tensor *list[1] = {lengths};
    ct_call c = {.op = CT_OP__cudnn_rnn, .nin = 4, .in = {input, weight, hx, cx}, .dtype = CT_DTYPE_UNDEFINED,
                 .list = list, .nlist = lengths ? 1 : 0};
    pack_ints(&c, mode, hidden_size, num_layers, bidirectional, batch_first, has_biases);
    c.ints[c.nints++] = train;
    ct_status st = ct_dispatch(&c);
    if (st == CT_OK) {
        *output = ct_call_take_output(&c, 0);
        *hy = ct_call_take_output(&c, 1);
        ct_tensor *t = ct_call_take_output(&c, 2);
        if (cy)
            *cy = t;
        t = ct_call_take_output(&c, 3);
        if (reserve)
            *reserve = t;
    }
    ct_call_clear_outputs(&c);
    return st;
}

ct_status ct_cudnn_rnn_backward(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *hx,
                                const ct_tensor *cx, const ct_tensor *lengths, const ct_tensor *output,
                                const ct_tensor *grad_output, const ct_tensor *grad_hy, const ct_tensor *grad_cy,
                                const ct_tensor *reserve, ct_cudnn_rnn_mode mode, int64_t hidden_size,
                                int64_t num_layers, bool bidirectional, bool batch_first, bool has_biases,
                                ct_tensor **grad_input, ct_tensor **grad_hx, ct_tensor **grad_cx,
                                ct_tensor **grad_weight) {
    const char *op = "_cudnn_rnn_backward";
    CT_CHECK_ARG_STATUS(op, input);
    CT_CHECK_ARG_STATUS(op, weight);
    CT_CHECK_ARG_STATUS(op, hx);
    CT_CHECK_ARG_STATUS(op, output);
    CT_CHECK_ARG_STATUS(op, grad_output);
    CT_CHECK_ARG_STATUS(op, grad_hy);
    CT_CHECK_ARG_STATUS(op, reserve);
    if (!grad_input || !grad_hx || !grad_weight)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "grad_input, grad_hx and grad_weight must not be NULL");
    *grad_input = *grad_hx = *grad_weight = NULL;
    if (grad_cx)
        *grad_cx = NULL;
    const ct_tensor *list[6] = {output, grad_output, grad_hy, grad_cy, reserve, lengths};
    ct_call c = {.op = CT_OP__cudnn_rnn_backward, .nin = 4, .in = {input, weight, hx, cx},
                 .dtype = CT_DTYPE_UNDEFINED, .list = list, .nlist = lengths ? 6 : 5};
    pack_ints(&c, mode, hidden_size, num_layers, bidirectional, batch_first, has_biases);
    ct_status st = ct_dispatch(&c);
    if (st == CT_OK) {
        *grad_input = ct_call_take_output(&c, 0);
        *grad_hx = ct_call_take_output(&c, 1);
        ct_tensor *t = ct_call_take_output(&c, 2);
        if (grad_cx)
            *grad_cx = t;
        *grad_weight = ct_call_take_output(&c, 3);
    }
    ct_call_clear_outputs(&c);
    return st;
}
