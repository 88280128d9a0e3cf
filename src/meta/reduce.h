/* The reduction family's kernel and helpers (src/meta/reduce.c). */
#ifndef CT_OPS_REDUCE_H
#define CT_OPS_REDUCE_H

#include "dispatch/call.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* The CPU and META kernel of every REDUCE and SCAN family op. */
ct_status ct_reduce_kernel(ct_keyset ks, ct_call *call, void *user_data);

/* Turns a dim list into a bit mask over ndim dims (NULL or ndims == 0: every dim),
 * with PyTorch's errors for out-of-range and repeated dims. */
ct_status ct_reduce_parse_dims(const char *op, int ndim, const int64_t *dims, int ndims, uint32_t *mask);

/* Boxed-call layout of the reduction signatures: ints[0] keepdim, ints[1] the number
 * of dims (0: every dim), ints[2...] the dims; s[0] the order/correction. */
#define CT_RED_INT_KEEPDIM 0
#define CT_RED_INT_NDIMS 1
#define CT_RED_INT_DIMS 2
#define CT_RED_MAX_DIMS (CT_CALL_MAX_INTS - CT_RED_INT_DIMS)

CT_BACKEND_END

#endif /* CT_OPS_REDUCE_H */
