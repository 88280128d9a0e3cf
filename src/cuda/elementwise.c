/* The host half of the GPU elementwise engine: the op families build a ct_iter
 * (broadcasting, promotion, output allocation, dim reordering and coalescing are the
 * CPU's code), and this file hands its layout to the kernels of unary.cu, binary.cu
 * and compare.cu. */
#include <string.h>

#include "cuda/cuda_ops.h"
#include "ops/op_info.h"

_Static_assert(CT_CUDA_MAX_OPERANDS == CT_ITER_MAX, "kernel descriptions and ct_iter must agree on operands");

bool ct_cuda_elementwise_supported(ct_op op, ct_dtype dtype) {
    switch (ct_op_table[op].family) {
    case CT_FAM_UNARY_FLOAT:
    case CT_FAM_UNARY_SAME: return ct_cuda_unary_supported(op, dtype);
    case CT_FAM_BINARY_ARITH:
    case CT_FAM_BINARY_FLOAT:
    case CT_FAM_BINARY_DIV: return ct_cuda_binary_supported(op, dtype);
    case CT_FAM_COMPARE: return ct_cuda_compare_supported(op, dtype);
    default: return false;
    }
}

ct_status ct_cuda_iter_run(const ct_iter *it, ct_op op, const ct_loop_params *params) {
    if (it->numel == 0 || !it->data[0])
        return CT_OK;
    int device = it->loop_out->device.index;
    if (!ct_cuda_use_device(ct_op_name(op), device))
        return ct_last_status();
    ct_cuda_iter_desc d;
    memset(&d, 0, sizeof d);
    d.ntensors = it->ntensors;
    d.ndim = it->ndim;
    d.numel = it->numel;
    for (int i = 0; i < it->ndim; i++) {
        d.shape[i] = it->shape[i];
        for (int k = 0; k < it->ntensors; k++)
            d.strides[i][k] = it->strides[i][k];
    }
    for (int k = 0; k < it->ntensors; k++)
        d.data[k] = it->data[k];
    switch (ct_op_table[op].family) {
    case CT_FAM_UNARY_FLOAT:
    case CT_FAM_UNARY_SAME: return ct_cuda_unary(op, it->compute_dtype, &d, device);
    case CT_FAM_BINARY_ARITH:
    case CT_FAM_BINARY_FLOAT:
    case CT_FAM_BINARY_DIV: {
        ct_cuda_params p = {params->alpha, params->ialpha};
        return ct_cuda_binary(op, it->compute_dtype, &d, &p, device);
    }
    case CT_FAM_COMPARE: return ct_cuda_compare(op, it->compute_dtype, &d, device);
    default: return ct_error(CT_ERROR_NOT_IMPLEMENTED, ct_op_name(op), "no CUDA elementwise kernel");
    }
}

ct_status ct_cuda_move_scalars(const ct_tensor **in, int nin, ct_device device) {
    for (int i = 0; i < nin; i++) {
        const ct_tensor *t = in[i];
        if (!t || t->device.type != CT_DEVICE_CPU || t->ndim != 0)
            continue;
        ct_tensor *d = ct_to_device(t, device);
        if (!d)
            return ct_last_status();
        d->wrapped_number = t->wrapped_number; /* promotion treats it as the scalar it was */
        in[i] = d;
    }
    return CT_OK;
}

ct_device ct_cuda_call_device(const ct_call *call) {
    for (int i = 0; i < call->nin; i++)
        if (call->in[i] && call->in[i]->device.type == CT_DEVICE_CUDA)
            return call->in[i]->device;
    for (int i = 0; i < call->nout; i++)
        if (call->out[i] && call->out[i]->device.type == CT_DEVICE_CUDA)
            return call->out[i]->device;
    return CT_CUDA(0);
}
