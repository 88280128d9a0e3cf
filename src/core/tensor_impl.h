/* Internal layout of tensors and storages. Never included by public headers. */
#ifndef CT_TENSOR_IMPL_H
#define CT_TENSOR_IMPL_H

#include <stdatomic.h>

#include "ctorch/core.h"
#include "ctorch/ext.h"
#include "dtype.h"
#include "error.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* Note [Dimension limit]
 * Shapes live inline in the tensor so that creating a view costs one allocation. The
 * public API never exposes this number: callers pass (pointer, ndim) pairs and get
 * errors past the limit, so raising it later changes no signature. */
#define CT_MAX_DIMS 8

typedef struct ct_storage {
    atomic_int refcount;
    void *data;        /* NULL for META storages and empty ones */
    size_t nbytes;
    ct_device device;
    /* Who frees data: the allocator (deleter == NULL) or the owner of a blob. */
    void (*deleter)(void *ctx, void *data);
    void *deleter_ctx;
    bool external; /* data came from ct_from_blob (or a mapping), not the allocator */
    /* Note [Version counter]
     * PyTorch shares one version counter among a tensor and all its views. Every view
     * in ctorch shares its base's storage, so the counter lives here. */
    atomic_llong version;
} ct_storage;

struct ct_tensor {
    atomic_int refcount;
    int ndim;
    ct_dtype dtype;
    ct_device device;
    ct_storage *storage;
    int64_t offset; /* in elements */
    int64_t shape[CT_MAX_DIMS];
    int64_t strides[CT_MAX_DIMS]; /* in elements */
    int64_t numel;
    bool requires_grad;
    bool is_view;
    bool inference; /* created under inference mode */
    /* A 0-d tensor made from a C scalar argument (ct_add_scalar's b): it takes part in
     * type promotion only when of a higher category, like PyTorch's wrapped numbers. */
    bool wrapped_number;
    ct_tensor *grad;  /* strong reference or NULL */
    void *grad_fn;    /* autograd's data (ct_ag_meta in src/autograd/node.h: the node,
                         hooks); released through grad_fn_release */
    void (*grad_fn_release)(void *grad_fn);
    int32_t output_nr; /* which output of grad_fn this tensor is */
    ct_tensor *base;  /* for views: the tensor they view (strong reference) */
};

/* Set while this thread is in inference mode (src/autograd): tensors made meanwhile
 * are inference tensors. */
extern CT_THREAD_LOCAL bool ct_tls_inference_mode;

/* Storage */
ct_storage *ct_storage_new(size_t nbytes, ct_device device);
ct_storage *ct_storage_from_blob(void *data, size_t nbytes, void (*deleter)(void *, void *), void *ctx);
void ct_storage_retain(ct_storage *s);
void ct_storage_release(ct_storage *s);

/* Creates a tensor object over storage (which it retains) and registers it with the
 * innermost scope. strides NULL means contiguous. Checks the shape, not the bounds. */
ct_tensor *ct_tensor_make(ct_storage *storage, int64_t offset, const int64_t *shape, const int64_t *strides,
                          int ndim, ct_dtype dtype, ct_device device);
/* A view of t: shares storage, marks is_view, keeps base. */
ct_tensor *ct_tensor_make_view(const ct_tensor *t, int64_t offset, const int64_t *shape, const int64_t *strides,
                               int ndim);
/* Allocates an uninitialised tensor after validating dtype, shape, strides (NULL:
 * contiguous) and device; errors name op. */
ct_tensor *ct_tensor_new(const char *op, const int64_t *shape, const int64_t *strides, int ndim, ct_dtype dtype,
                         ct_device device);
/* Sets a device error naming op for devices this build cannot use. */
bool ct_check_device(const char *op, ct_device device);

/* Helpers */
/* An empty view may sit at any offset (as_strided checks the storage's bounds only for
 * elements it has), so its pointer is the storage's own: offset * itemsize could
 * overflow, and nothing reads through it. */
static inline char *ct_tensor_ptr(const ct_tensor *t) {
    char *base = (char *)t->storage->data;
    return base && t->numel ? base + t->offset * (int64_t)ct_dtype_itemsize(t->dtype) : base;
}
/* Contiguous strides for shape; returns the number of elements, or -1 on overflow. */
int64_t ct_contiguous_strides(const int64_t *shape, int ndim, int64_t *strides);
/* Number of elements of shape, -1 on negative size or overflow (no error set). */
int64_t ct_shape_numel(const int64_t *shape, int ndim);
bool ct_strides_contiguous(const int64_t *shape, const int64_t *strides, int ndim);
/* Broadcast src's shape/strides to ndim dims of shape (element strides, 0 where
 * broadcast); false if not broadcastable. */
bool ct_broadcast_strides(const ct_tensor *src, const int64_t *shape, int ndim, int64_t *out_strides);
/* Wraps a possibly negative dim into [0, ndim); sets an IndexError naming op on failure. */
int ct_wrap_dim(const char *op, int64_t dim, int ndim, int *out);

CT_BACKEND_END

#endif /* CT_TENSOR_IMPL_H */
