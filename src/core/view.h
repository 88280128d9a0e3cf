/* The core implementations behind the dispatched view and copy ops (src/meta/views.c
 * wraps them as ct_view, ct_clone, ...): they build the result and nothing else, so
 * kernels may call them directly. Arguments and errors as the public functions. */
#ifndef CT_CORE_VIEW_H
#define CT_CORE_VIEW_H

#include "tensor_impl.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

ct_tensor *ct_view_impl(const ct_tensor *t, const int64_t *shape, int ndim);
ct_tensor *ct_reshape_impl(const ct_tensor *t, const int64_t *shape, int ndim);
ct_tensor *ct_permute_impl(const ct_tensor *t, const int64_t *dims, int ndim);
ct_tensor *ct_transpose_impl(const ct_tensor *t, int dim0, int dim1);
ct_tensor *ct_t_impl(const ct_tensor *t);
ct_tensor *ct_movedim_impl(const ct_tensor *t, int source, int destination);
ct_tensor *ct_expand_impl(const ct_tensor *t, const int64_t *shape, int ndim);
ct_tensor *ct_squeeze_impl(const ct_tensor *t);
ct_tensor *ct_squeeze_dim_impl(const ct_tensor *t, int dim);
ct_tensor *ct_unsqueeze_impl(const ct_tensor *t, int dim);
ct_tensor *ct_flatten_impl(const ct_tensor *t, int start_dim, int end_dim);
ct_tensor *ct_unflatten_impl(const ct_tensor *t, int dim, const int64_t *sizes, int nsizes);
ct_tensor *ct_narrow_impl(const ct_tensor *t, int dim, int64_t start, int64_t length);
ct_tensor *ct_slice_impl(const ct_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
ct_tensor *ct_select_impl(const ct_tensor *t, int dim, int64_t index);
ct_tensor *ct_unfold_impl(const ct_tensor *t, int dim, int64_t size, int64_t step);
ct_tensor *ct_diagonal_impl(const ct_tensor *t, int64_t offset, int dim1, int dim2);
ct_tensor *ct_as_strided_impl(const ct_tensor *t, const int64_t *shape, const int64_t *strides, int ndim,
                              int64_t storage_offset);
ct_tensor *ct_alias_impl(const ct_tensor *t);

/* src/core/copy.c. ct_copy_impl does not bump dst's version (the dispatcher does). */
ct_tensor *ct_copy_impl(ct_tensor *dst, const ct_tensor *src);
ct_tensor *ct_clone_impl(const ct_tensor *t);
ct_tensor *ct_contiguous_impl(const ct_tensor *t);
ct_tensor *ct_to_dtype_impl(const ct_tensor *t, ct_dtype dtype);

CT_BACKEND_END

#endif /* CT_CORE_VIEW_H */
