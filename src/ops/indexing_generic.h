/* take, masked_scatter, kthvalue, unique and unique_consecutive written as
 * compositions of other ops (sort, cumsum, index_select, where, ...), so they run on
 * any device those ops run on. The kernels of indexing.c call them for CUDA tensors
 * once their argument checks have passed; each takes the call in the state the checks
 * leave it and sets the same outputs, or the same data-dependent error, as the CPU
 * loops. They work on CPU tensors as well, which is how they are tested without a GPU.
 * See Note [Generic indexing] in indexing_generic.c. */
#ifndef CT_OPS_INDEXING_GENERIC_H
#define CT_OPS_INDEXING_GENERIC_H

#include <stdbool.h>

#include "dispatch/call.h"

/* in: t, index (int64, any shape). t has elements and index has elements; output 0
 * (if already set) is replaced. */
ct_status ct_generic_take(ct_call *call);
/* in: t, mask (bool or uint8), src (t's dtype). Functional: output 0 is t and mask
 * broadcast together; in place: written into out[0], mask broadcasting to it. */
ct_status ct_generic_masked_scatter(ct_call *call);
/* in: t (not bool); ints: k (1 <= k <= size of dim), dim, keepdim; d: the wrapped dim,
 * (shape, nd): the outputs' shape. Outputs: values, int64 indices. */
ct_status ct_generic_kthvalue(ct_call *call, int d, const int64_t *shape, int nd);
/* in: t. Outputs: values (1-D), inverse (t's shape, int64), counts (int64). */
ct_status ct_generic_unique(ct_call *call, bool consecutive);

#endif /* CT_OPS_INDEXING_GENERIC_H */
