/* Internal tensor construction beside ct_tensor_make (tensor_impl.h). */
#ifndef CT_TENSOR_MAKE_H
#define CT_TENSOR_MAKE_H

#include "tensor_impl.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* ct_tensor_make that takes over the caller's reference to storage instead of taking
 * one of its own: on failure the storage is released. For a storage just made for this
 * tensor. */
ct_tensor *ct_tensor_make_owned(ct_storage *storage, int64_t offset, const int64_t *shape, const int64_t *strides,
                                int ndim, ct_dtype dtype, ct_device device);

CT_BACKEND_END

#endif /* CT_TENSOR_MAKE_H */
