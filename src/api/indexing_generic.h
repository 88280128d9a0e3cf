/* take, masked_scatter, kthvalue, unique, unique_consecutive, pad_backward and
 * upsample (src/api/upsample.c) written as
 * compositions of other ops (sort, cumsum, index_select, where, ...), so they run on
 * any device those ops run on. Each has the signature of its op's stub (src/meta/
 * stubs.def): the CUDA backend installs them as its stubs, so they start where the
 * structured kernels of src/meta/indexing.c end (arguments checked, outputs
 * allocated) and write the same outputs, or the same data-dependent error, as the CPU
 * loops. They work on CPU tensors as well, which is how they are tested without a GPU.
 * See Note [Generic indexing] in indexing_generic.c. */
#ifndef CT_API_INDEXING_GENERIC_H
#define CT_API_INDEXING_GENERIC_H

#include <stdbool.h>

#include "dispatch/call.h"
#include "meta/upsample.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* out (index's shape) = t's elements at index (int64, any shape); t and index have
 * elements. */
ct_status ct_generic_take(ct_tensor *out, const ct_tensor *t, const ct_tensor *index);
/* w (contiguous, holding self's values in the op's shape) takes src's elements in
 * order where mask (bool or uint8, broadcasting to w) is set; mask_strides are not
 * read. */
ct_status ct_generic_masked_scatter(ct_tensor *w, const ct_tensor *mask, const int64_t *mask_strides,
                                    const ct_tensor *src);
/* t (not bool), 1 <= k <= size of dim d: vals and idx (allocated, not empty) = the k-th
 * smallest along d and its position. */
ct_status ct_generic_kthvalue(ct_tensor *vals, ct_tensor *idx, const ct_tensor *t, int d, int64_t k);
/* Sets the call's outputs: values (1-D), inverse (t's shape, int64), counts (int64). */
ct_status ct_generic_unique(ct_call *call, const ct_tensor *t, bool consecutive);
/* pad_backward's stub (Note [Generic pad_backward]): gin (the input's shape) = g summed
 * back along pad's mapping, one index_add per padded dim. */
ct_status ct_generic_pad_backward(ct_tensor *gin, const ct_tensor *g, const int64_t *lo, const int64_t *hi_crop,
                                  int mode);
/* upsample's and upsample_backward's stubs (Note [Generic upsample] in
 * src/api/upsample.c): index_select / index_add and a product per tap. */
ct_status ct_generic_upsample(ct_tensor *out, const ct_tensor *in, const ct_upsample_plan *plan);
ct_status ct_generic_upsample_backward(ct_tensor *gin, const ct_tensor *g, const ct_upsample_plan *plan);

CT_BACKEND_END

#endif /* CT_API_INDEXING_GENERIC_H */
