/* The CUDA backend's op kernels, as the op families and the dispatcher see them. */
#ifndef CT_CUDA_OPS_H
#define CT_CUDA_OPS_H

#include "cpu/loops.h"
#include "cuda/cuda_tensor.h"

/* Whether op has a CUDA kernel for compute dtype dtype. */
bool ct_cuda_elementwise_supported(ct_op op, ct_dtype dtype);
/* Runs op over a built iterator whose operands live on a CUDA device. */
ct_status ct_cuda_iter_run(const ct_iter *it, ct_op op, const ct_loop_params *params);
/* Copies 0-d CPU inputs (scalars) to device, keeping their wrapped-number status, so
 * the iterator sees every operand on one device. in[] is updated in place; the copies
 * belong to the current scope. */
ct_status ct_cuda_move_scalars(const ct_tensor **in, int nin, ct_device device);
/* The device a call's CUDA kernel runs on: the first CUDA input's. */
ct_device ct_cuda_call_device(const ct_call *call);

/* Registers the CUDA kernels of CUSTOM ops at CT_KEY_CUDA (called once by the op
 * table's registration). */
void ct_cuda_register_kernels(void);

/* Matrix products (blas.c). */
ct_status ct_cuda_mm(ct_keyset ks, ct_call *call, void *user_data);
ct_status ct_cuda_bmm(ct_keyset ks, ct_call *call, void *user_data);
ct_status ct_cuda_dot(ct_keyset ks, ct_call *call, void *user_data);
ct_status ct_cuda_addmm(ct_keyset ks, ct_call *call, void *user_data);
ct_status ct_cuda_baddbmm(ct_keyset ks, ct_call *call, void *user_data);

#endif
