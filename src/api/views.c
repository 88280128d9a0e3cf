/* The view and copy ops as dispatched operators: the public functions pack their
 * arguments into a ct_call, and one kernel (ct_core_kernel, src/meta/views.c) unpacks
 * them and calls the core implementation (src/core/view.c, copy.c) on every backend.
 * Going through the dispatcher is what lets autograd record them (docs/autograd.md).
 *
 * Integer arguments travel in call->ints in the order of the C signature; a shape or
 * dims list travels as its elements followed by nothing else, so nints is its length. */
#include <string.h>

#include "core/view.h"
#include "dispatch/call.h"

static ct_tensor *run(ct_call *c) { return ct_dispatch_1(c); }

#define CALL1(opname, t) {.op = CT_OP_##opname, .nin = 1, .in = {t}, .dtype = CT_DTYPE_UNDEFINED}

/* A list argument that cannot travel in a call (too long, NULL) is refused by the
 * core function itself, with its own message. */
static bool list_ok(const int64_t *list, int n) { return n >= 0 && n <= CT_MAX_DIMS && (n == 0 || list); }

typedef ct_tensor *(*list_impl)(const ct_tensor *, const int64_t *, int);

static ct_tensor *call_list(ct_op op, const char *name, list_impl impl, const ct_tensor *t, const int64_t *list,
                            int n) {
    CT_CHECK_ARG(name, t);
    if (!list_ok(list, n))
        return impl(t, list, n);
    ct_call c = {.op = op, .nin = 1, .in = {t}, .dtype = CT_DTYPE_UNDEFINED, .nints = n};
    if (n > 0)
        memcpy(c.ints, list, (size_t)n * sizeof *list);
    return run(&c);
}

static ct_tensor *call_ints(ct_op op, const char *name, const ct_tensor *t, int n, int64_t a, int64_t b, int64_t c3) {
    CT_CHECK_ARG(name, t);
    ct_call c = {.op = op, .nin = 1, .in = {t}, .dtype = CT_DTYPE_UNDEFINED, .nints = n, .ints = {a, b, c3}};
    return run(&c);
}

ct_tensor *ct_view(const ct_tensor *t, const int64_t *shape, int ndim) {
    return call_list(CT_OP_view, "view", ct_view_impl, t, shape, ndim);
}
ct_tensor *ct_reshape(const ct_tensor *t, const int64_t *shape, int ndim) {
    return call_list(CT_OP_reshape, "reshape", ct_reshape_impl, t, shape, ndim);
}
ct_tensor *ct_permute(const ct_tensor *t, const int64_t *dims, int ndim) {
    return call_list(CT_OP_permute, "permute", ct_permute_impl, t, dims, ndim);
}
ct_tensor *ct_expand(const ct_tensor *t, const int64_t *shape, int ndim) {
    return call_list(CT_OP_expand, "expand", ct_expand_impl, t, shape, ndim);
}
ct_tensor *ct_transpose(const ct_tensor *t, int dim0, int dim1) {
    return call_ints(CT_OP_transpose, "transpose", t, 2, dim0, dim1, 0);
}
ct_tensor *ct_t(const ct_tensor *t) { return call_ints(CT_OP_t, "t", t, 0, 0, 0, 0); }
ct_tensor *ct_movedim(const ct_tensor *t, int source, int destination) {
    return call_ints(CT_OP_movedim, "movedim", t, 2, source, destination, 0);
}
ct_tensor *ct_squeeze(const ct_tensor *t) { return call_ints(CT_OP_squeeze, "squeeze", t, 0, 0, 0, 0); }
ct_tensor *ct_squeeze_dim(const ct_tensor *t, int dim) {
    return call_ints(CT_OP_squeeze_dim, "squeeze", t, 1, dim, 0, 0);
}
ct_tensor *ct_unsqueeze(const ct_tensor *t, int dim) {
    return call_ints(CT_OP_unsqueeze, "unsqueeze", t, 1, dim, 0, 0);
}
ct_tensor *ct_flatten(const ct_tensor *t, int start_dim, int end_dim) {
    return call_ints(CT_OP_flatten, "flatten", t, 2, start_dim, end_dim, 0);
}
ct_tensor *ct_narrow(const ct_tensor *t, int dim, int64_t start, int64_t length) {
    return call_ints(CT_OP_narrow, "narrow", t, 3, dim, start, length);
}
ct_tensor *ct_select(const ct_tensor *t, int dim, int64_t index) {
    return call_ints(CT_OP_select, "select", t, 2, dim, index, 0);
}
ct_tensor *ct_unfold(const ct_tensor *t, int dim, int64_t size, int64_t step) {
    return call_ints(CT_OP_unfold, "unfold", t, 3, dim, size, step);
}
ct_tensor *ct_diagonal(const ct_tensor *t, int64_t offset, int dim1, int dim2) {
    return call_ints(CT_OP_diagonal, "diagonal", t, 3, offset, dim1, dim2);
}
ct_tensor *ct_alias(const ct_tensor *t) { return call_ints(CT_OP_alias, "alias", t, 0, 0, 0, 0); }

ct_tensor *ct_slice(const ct_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    CT_CHECK_ARG("slice", t);
    ct_call c = {.op = CT_OP_slice, .nin = 1, .in = {t}, .dtype = CT_DTYPE_UNDEFINED, .nints = 4,
                 .ints = {dim, start, end, step}};
    return run(&c);
}

/* ints: dim, then the sizes. */
ct_tensor *ct_unflatten(const ct_tensor *t, int dim, const int64_t *sizes, int nsizes) {
    CT_CHECK_ARG("unflatten", t);
    if (!list_ok(sizes, nsizes))
        return ct_unflatten_impl(t, dim, sizes, nsizes);
    ct_call c = {.op = CT_OP_unflatten, .nin = 1, .in = {t}, .dtype = CT_DTYPE_UNDEFINED, .nints = 1 + nsizes};
    c.ints[0] = dim;
    if (nsizes > 0)
        memcpy(c.ints + 1, sizes, (size_t)nsizes * sizeof *sizes);
    return run(&c);
}

/* ints: the shape, the strides, then the storage offset. */
ct_tensor *ct_as_strided(const ct_tensor *t, const int64_t *shape, const int64_t *strides, int ndim,
                         int64_t storage_offset) {
    CT_CHECK_ARG("as_strided", t);
    if (!list_ok(shape, ndim) || !list_ok(strides, ndim))
        return ct_as_strided_impl(t, shape, strides, ndim, storage_offset);
    ct_call c = {.op = CT_OP_as_strided, .nin = 1, .in = {t}, .dtype = CT_DTYPE_UNDEFINED, .nints = 2 * ndim + 1};
    if (ndim > 0) {
        memcpy(c.ints, shape, (size_t)ndim * sizeof *shape);
        memcpy(c.ints + ndim, strides, (size_t)ndim * sizeof *strides);
    }
    c.ints[2 * ndim] = storage_offset;
    return run(&c);
}

ct_tensor *ct_clone(const ct_tensor *t) {
    CT_CHECK_ARG("clone", t);
    ct_call c = CALL1(clone, t);
    return run(&c);
}

ct_tensor *ct_contiguous(const ct_tensor *t) {
    CT_CHECK_ARG("contiguous", t);
    ct_call c = CALL1(contiguous, t);
    return run(&c);
}

ct_tensor *ct_to_dtype(const ct_tensor *t, ct_dtype dtype) {
    CT_CHECK_ARG("to", t);
    ct_call c = CALL1(to_dtype, t);
    c.dtype = dtype;
    return run(&c);
}

ct_tensor *ct_copy_(ct_tensor *dst, const ct_tensor *src) {
    CT_CHECK_ARG("copy_", dst);
    CT_CHECK_ARG("copy_", src);
    ct_call c = {.op = CT_OP_copy, .mode = CT_CALL_INPLACE, .nin = 2, .in = {dst, src}, .dtype = CT_DTYPE_UNDEFINED,
                 .nout = 1};
    c.out[0] = ct_retain(dst);
    return run(&c);
}

/* ------------------------------------------------------------------ *_as */

ct_tensor *ct_view_as(const ct_tensor *t, const ct_tensor *other) {
    CT_CHECK_ARG("view_as", t);
    CT_CHECK_ARG("view_as", other);
    return ct_view(t, other->shape, other->ndim);
}

ct_tensor *ct_reshape_as(const ct_tensor *t, const ct_tensor *other) {
    CT_CHECK_ARG("reshape_as", t);
    CT_CHECK_ARG("reshape_as", other);
    return ct_reshape(t, other->shape, other->ndim);
}

ct_tensor *ct_expand_as(const ct_tensor *t, const ct_tensor *other) {
    CT_CHECK_ARG("expand_as", t);
    CT_CHECK_ARG("expand_as", other);
    return ct_expand(t, other->shape, other->ndim);
}
