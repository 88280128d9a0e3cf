/* Shape rules of the matrix products, shared by the CPU, META (and CUDA) kernels. */
#ifndef CT_OPS_LINALG_H
#define CT_OPS_LINALG_H

#include "dispatch/call.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* Validates a matrix product call (mm, bmm, dot, addmm, baddbmm, addmm_activation) and gives the
 * output's shape and dtype. */
ct_status ct_linalg_out_shape(const ct_call *call, int64_t *shape, int *ndim, ct_dtype *dtype);
/* Allocates the output on device (or checks the out= tensor) and sets call->out[0]. */
ct_status ct_linalg_prepare_out(ct_call *call, ct_device device);
/* addmm_activation's activation on its result, in place: relu, or the tanh-form GELU
 * when use_gelu. */
ct_status ct_linalg_activation_(ct_tensor *t, bool use_gelu);

CT_BACKEND_END

#endif
