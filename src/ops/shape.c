/* Shape and indexing ops: argument checks, wrappers, composites (stack, split, chunk,
 * unbind, roll, repeat, tile, argsort) and the kernels, which serve CPU and META alike
 * (META stops after allocating the outputs).
 *
 * Note [Outer x dim x inner]
 * Every kernel here works on contiguous operands seen as (outer, size along dim,
 * inner) blocks: element (o, i, j) sits at (o * size + i) * inner + j. Moving elements
 * along one dimension (cat, flip, gather, index_select, scatter, sort) is then three
 * nested loops and a byte copy, for every dtype at once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "core/dtype.h"
#include "cpu/loops.h"
#include "dispatch/dispatch_internal.h"
#ifdef CT_HAVE_CUDA
#include "cuda/cuda_ops.h"
#endif

static int64_t prod(const int64_t *s, int a, int b) {
    int64_t p = 1;
    for (int i = a; i < b; i++)
        p *= s[i];
    return p;
}

static bool is_meta(const ct_tensor *t) { return t->device.type == CT_DEVICE_META; }

static ct_status set_out(ct_call *call, int i, ct_tensor *t) { return t ? ct_call_set_output(call, i, t) : ct_last_status(); }

/* int64 or int32 indices, with PyTorch's messages */
static ct_status check_index(const char *op, const ct_tensor *index) {
    if (index->dtype == CT_DTYPE_INT64 || index->dtype == CT_DTYPE_INT32)
        return CT_OK;
    if (!strcmp(op, "index_select"))
        return ct_error(CT_ERROR_TYPE, op, "index_select(): Expected dtype int32 or int64 for index");
    return ct_error(CT_ERROR_TYPE, op, "%s(): Expected dtype int32/int64 for index", op);
}

/* Reads index element k of a contiguous int32/int64 tensor, which must lie in
 * [0, size) as in PyTorch (no negative indices). dim < 0: index_select/index_add's
 * message, else gather/scatter_add's naming the dim. */
static ct_status index_at(const char *op, const ct_tensor *index, int64_t k, int64_t size, int dim, int64_t *out) {
    const char *p = ct_tensor_ptr(index);
    int64_t v = index->dtype == CT_DTYPE_INT64 ? ((const int64_t *)p)[k] : ((const int32_t *)p)[k];
    if (v < 0 || v >= size)
        return dim < 0 ? ct_error(CT_ERROR_INDEX, op, "index out of range in self (index %lld, size %lld)",
                                  (long long)v, (long long)size)
                       : ct_error(CT_ERROR_INDEX, op, "index %lld is out of bounds for dimension %d with size %lld",
                                  (long long)v, dim, (long long)size);
    *out = v;
    return CT_OK;
}

/* ------------------------------------------------------------------ cat */

static ct_status cat_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "cat";
    int n = call->nlist;
    const ct_tensor *const *ts = call->list;
    /* Legacy rule: 1-D tensors of size 0 are skipped. */
    const ct_tensor *ref = NULL;
    for (int i = 0; i < n; i++)
        if (!(ts[i]->ndim == 1 && ts[i]->numel == 0)) {
            ref = ts[i];
            break;
        }
    ct_dtype dt = ct_result_type(ts, n);
    if (dt == CT_DTYPE_UNDEFINED)
        return ct_last_status();
    if (!ref) { /* everything skipped: an empty 1-D result */
        ct_tensor *o = ct_empty(CT_SHAPE(0), dt, ts[0]->device);
        return set_out(call, 0, o);
    }
    for (int i = 0; i < n; i++)
        if (ts[i]->ndim == 0)
            return ct_error(CT_ERROR_VALUE, op, "zero-dimensional tensor (at position %d) cannot be concatenated", i);
    int d;
    if (ct_wrap_dim(op, call->ints[0], ref->ndim, &d))
        return ct_last_status();
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, ref->shape, sizeof(int64_t) * (size_t)ref->ndim);
    shape[d] = 0;
    for (int i = 0; i < n; i++) {
        const ct_tensor *t = ts[i];
        if (t->ndim == 1 && t->numel == 0)
            continue;
        if (t->ndim != ref->ndim)
            return ct_error(CT_ERROR_VALUE, op, "Tensors must have same number of dimensions: got %d and %d",
                            ref->ndim, t->ndim);
        for (int k = 0; k < t->ndim; k++)
            if (k != d && t->shape[k] != ref->shape[k])
                return ct_error(CT_ERROR_VALUE, op,
                                "Sizes of tensors must match except in dimension %d. Expected size %lld but got size "
                                "%lld for tensor number %d in the list.",
                                d, (long long)ref->shape[k], (long long)t->shape[k], i);
        if (!ct_device_equal(t->device, ref->device))
            return ct_error(CT_ERROR_DEVICE, op, "Expected all tensors to be on the same device");
        shape[d] += t->shape[d];
    }
    ct_tensor *out = ct_empty(shape, ref->ndim, dt, ref->device);
    ct_status st = set_out(call, 0, out);
    if (st || is_meta(out))
        return st;
    int64_t off = 0;
    ct_scope_begin();
    for (int i = 0; i < n && st == CT_OK; i++) {
        const ct_tensor *t = ts[i];
        if (t->ndim == 1 && t->numel == 0)
            continue;
        ct_tensor *slot = ct_narrow(out, d, off, t->shape[d]);
        if (!slot || !ct_copy_(slot, t))
            st = ct_last_status();
        off += t->shape[d];
    }
    ct_scope_end();
    return st;
}

ct_status ct_cpu_cat(ct_keyset ks, ct_call *call, void *ud) { return cat_kernel(ks, call, ud); }
ct_status ct_meta_cat(ct_keyset ks, ct_call *call, void *ud) { return cat_kernel(ks, call, ud); }

ct_tensor *ct_cat(const ct_tensor *const *tensors, int n, int64_t dim) {
    if (!tensors || n <= 0) {
        ct_error(CT_ERROR_VALUE, "cat", "expected a non-empty list of Tensors");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        CT_CHECK_ARG("cat", tensors[i]);
    ct_call c = {.op = CT_OP_cat, .list = tensors, .nlist = n, .nints = 1, .ints = {dim}, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
}

ct_tensor *ct_stack(const ct_tensor *const *tensors, int n, int64_t dim) {
    if (!tensors || n <= 0) {
        ct_error(CT_ERROR_VALUE, "stack", "expected a non-empty list of Tensors");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        CT_CHECK_ARG("stack", tensors[i]);
        bool same = tensors[i]->ndim == tensors[0]->ndim;
        for (int k = 0; same && k < tensors[0]->ndim; k++)
            same = tensors[i]->shape[k] == tensors[0]->shape[k];
        if (!same) {
            char a[64], b[64];
            ct_error(CT_ERROR_VALUE, "stack", "stack expects each tensor to be equal size, but got %s at entry 0 and %s at entry %d",
                     ct_shape_str(tensors[0]->shape, tensors[0]->ndim, a, sizeof a),
                     ct_shape_str(tensors[i]->shape, tensors[i]->ndim, b, sizeof b), i);
            return NULL;
        }
    }
    int d;
    if (ct_wrap_dim("stack", dim, tensors[0]->ndim + 1, &d))
        return NULL;
    ct_scope_begin();
    const ct_tensor **u = malloc(sizeof *u * (size_t)n);
    ct_tensor *r = NULL;
    if (u) {
        bool ok = true;
        for (int i = 0; i < n && ok; i++)
            ok = (u[i] = ct_unsqueeze(tensors[i], d)) != NULL;
        r = ok ? ct_cat(u, n, d) : NULL;
        free(u);
    } else {
        ct_error(CT_ERROR_OUT_OF_MEMORY, "stack", "out of memory");
    }
    ct_keep(r);
    ct_scope_end();
    return r;
}

/* ------------------------------------------------------------------ split family */

/* The dim a split-family op works along: t must have dims; error (naming op) otherwise. */
static int split_dim(const char *op, const ct_tensor *t, int64_t dim) {
    int d;
    if (!t) {
        ct_error_null(op);
        return -1;
    }
    if (t->ndim == 0) {
        ct_error(CT_ERROR_VALUE, op, "%s expects at least a 1-dimensional tensor", op);
        return -1;
    }
    return ct_wrap_dim(op, dim, t->ndim, &d) ? -1 : d;
}

int ct_split_with_sizes(const ct_tensor *t, const int64_t *sizes, int nsizes, int64_t dim, ct_tensor **out,
                        int max_out) {
    int d = split_dim("split_with_sizes", t, dim);
    if (d < 0)
        return -1;
    int64_t total = 0;
    for (int i = 0; i < nsizes; i++) {
        if (sizes[i] < 0) {
            ct_error(CT_ERROR_VALUE, "split_with_sizes", "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=%lld at %d",
                     (long long)sizes[i], i);
            return -1;
        }
        total += sizes[i];
    }
    if (total != t->shape[d]) {
        ct_error(CT_ERROR_VALUE, "split_with_sizes",
                 "split_with_sizes expects split_sizes to sum exactly to %lld (input tensor's size at dimension %d), but got sum %lld",
                 (long long)t->shape[d], d, (long long)total);
        return -1;
    }
    int64_t off = 0;
    for (int i = 0; i < nsizes; i++) {
        if (i < max_out && out) {
            out[i] = ct_narrow(t, d, off, sizes[i]);
            if (!out[i]) {
                for (int j = 0; j < i; j++)
                    ct_release(ct_scope_depth() == 0 ? out[j] : NULL);
                return -1;
            }
        }
        off += sizes[i];
    }
    return nsizes;
}

int ct_split(const ct_tensor *t, int64_t split_size, int64_t dim, ct_tensor **out, int max_out) {
    int d = split_dim("split", t, dim);
    if (d < 0)
        return -1;
    int64_t size = t->shape[d];
    if (split_size < 0 || (split_size == 0 && size != 0)) {
        ct_error(CT_ERROR_VALUE, "split", "split_size can only be 0 if dimension size is 0, but got dimension size of %lld",
                 (long long)size);
        return -1;
    }
    int64_t n = split_size == 0 ? 1 : (size + split_size - 1) / split_size;
    if (n == 0)
        n = 1;
    if (n > 1 << 20) {
        ct_error(CT_ERROR_VALUE, "split", "too many pieces (%lld)", (long long)n);
        return -1;
    }
    int64_t *sizes = malloc(sizeof *sizes * (size_t)n);
    if (!sizes) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, "split", "out of memory");
        return -1;
    }
    for (int64_t i = 0; i < n; i++)
        sizes[i] = i == n - 1 ? size - split_size * (n - 1) : split_size;
    int r = ct_split_with_sizes(t, sizes, (int)n, d, out, max_out);
    free(sizes);
    return r;
}

int ct_chunk(const ct_tensor *t, int64_t chunks, int64_t dim, ct_tensor **out, int max_out) {
    int d = split_dim("chunk", t, dim);
    if (d < 0)
        return -1;
    if (chunks <= 0) {
        ct_error(CT_ERROR_VALUE, "chunk", "chunk expects `chunks` to be greater than 0, got: %lld", (long long)chunks);
        return -1;
    }
    int64_t each = (t->shape[d] + chunks - 1) / chunks;
    return ct_split(t, each, d, out, max_out);
}

int ct_unbind(const ct_tensor *t, int64_t dim, ct_tensor **out, int max_out) {
    if (!t) {
        ct_error_null("unbind");
        return -1;
    }
    int d;
    if (t->ndim == 0) {
        ct_error(CT_ERROR_INDEX, "unbind", "Dimension specified as 0 but tensor has no dimensions");
        return -1;
    }
    if (ct_wrap_dim("unbind", dim, t->ndim, &d))
        return -1;
    for (int64_t i = 0; i < t->shape[d] && i < max_out && out; i++)
        if (!(out[i] = ct_select(t, d, i)))
            return -1;
    return (int)t->shape[d];
}

/* ------------------------------------------------------------------ flip, tril/triu */

static ct_status flip_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *t = call->in[0];
    bool flipped[CT_MAX_DIMS] = {false};
    for (int i = 0; i < call->nints; i++) {
        int d;
        if (ct_wrap_dim("flip", call->ints[i], t->ndim, &d))
            return ct_last_status();
        if (flipped[d])
            return ct_error(CT_ERROR_VALUE, "flip", "dim %d appears multiple times in the list of dims", d);
        flipped[d] = true;
    }
    ct_tensor *out = ct_empty(t->shape, t->ndim, t->dtype, t->device);
    ct_status st = set_out(call, 0, out);
    if (st || is_meta(out) || t->numel == 0)
        return st;
#ifdef CT_HAVE_CUDA
    if (out->device.type == CT_DEVICE_CUDA)
        return ct_cuda_flip(out, t, flipped);
#endif
    /* A reversed view: start at the last element of each flipped dim, walk backwards. */
    size_t esz = ct_dtype_size(t->dtype);
    const char *src = ct_tensor_ptr(t);
    char *dst = ct_tensor_ptr(out);
    int64_t idx[CT_MAX_DIMS] = {0};
    for (int64_t k = 0; k < t->numel; k++) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; d++)
            off += (flipped[d] ? t->shape[d] - 1 - idx[d] : idx[d]) * t->strides[d];
        memcpy(dst + (size_t)k * esz, src + off * (int64_t)esz, esz);
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return CT_OK;
}

ct_status ct_cpu_flip(ct_keyset ks, ct_call *call, void *ud) { return flip_kernel(ks, call, ud); }
ct_status ct_meta_flip(ct_keyset ks, ct_call *call, void *ud) { return flip_kernel(ks, call, ud); }

ct_tensor *ct_flip(const ct_tensor *t, const int64_t *dims, int ndims) {
    CT_CHECK_ARG("flip", t);
    if (ndims < 0 || ndims > CT_MAX_DIMS || (ndims > 0 && !dims)) {
        ct_error(CT_ERROR_VALUE, "flip", "invalid dims list");
        return NULL;
    }
    ct_call c = {.op = CT_OP_flip, .nin = 1, .in = {t}, .nints = ndims, .dtype = CT_DTYPE_UNDEFINED};
    if (ndims)
        memcpy(c.ints, dims, sizeof(int64_t) * (size_t)ndims);
    return ct_dispatch_1(&c);
}

static ct_status tri_kernel(ct_call *call, bool lower) {
    const ct_tensor *t = call->in[0];
    const char *op = lower ? "tril" : "triu";
    if (t->ndim < 2)
        return ct_error(CT_ERROR_VALUE, op, "%s: input tensor must have at least 2 dimensions", op);
    int64_t k = call->ints[0];
    ct_tensor *out = ct_empty(t->shape, t->ndim, t->dtype, t->device);
    ct_status st = set_out(call, 0, out);
    if (st || is_meta(out) || t->numel == 0)
        return st;
    ct_scope_begin();
    const ct_tensor *c = ct_contiguous(t);
    if (!c) {
        ct_scope_end();
        return ct_last_status();
    }
#ifdef CT_HAVE_CUDA
    if (out->device.type == CT_DEVICE_CUDA) {
        st = ct_cuda_tri(out, c, k, lower);
        ct_scope_end();
        return st;
    }
#endif
    size_t esz = ct_dtype_size(t->dtype);
    int64_t rows = t->shape[t->ndim - 2], cols = t->shape[t->ndim - 1], mats = t->numel / (rows * cols);
    const char *src = ct_tensor_ptr(c);
    char *dst = ct_tensor_ptr(out);
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) {
                size_t at = (size_t)((m * rows + i) * cols + j) * esz;
                bool keep = lower ? j - i <= k : j - i >= k;
                if (keep)
                    memcpy(dst + at, src + at, esz);
                else
                    memset(dst + at, 0, esz);
            }
    ct_scope_end();
    return CT_OK;
}

ct_status ct_cpu_tril(ct_keyset ks, ct_call *call, void *ud) { (void)ks, (void)ud; return tri_kernel(call, true); }
ct_status ct_meta_tril(ct_keyset ks, ct_call *call, void *ud) { (void)ks, (void)ud; return tri_kernel(call, true); }
ct_status ct_cpu_triu(ct_keyset ks, ct_call *call, void *ud) { (void)ks, (void)ud; return tri_kernel(call, false); }
ct_status ct_meta_triu(ct_keyset ks, ct_call *call, void *ud) { (void)ks, (void)ud; return tri_kernel(call, false); }

static ct_tensor *call_one_int(ct_op op, const ct_tensor *t, int64_t v) {
    CT_CHECK_ARG(ct_op_name(op), t);
    ct_call c = {.op = op, .nin = 1, .in = {t}, .nints = 1, .ints = {v}, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
}

ct_tensor *ct_tril(const ct_tensor *t, int64_t k) { return call_one_int(CT_OP_tril, t, k); }
ct_tensor *ct_triu(const ct_tensor *t, int64_t k) { return call_one_int(CT_OP_triu, t, k); }

/* ------------------------------------------------------------------ index_select, gather */

static ct_status index_select_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "index_select";
    const ct_tensor *t = call->in[0], *index = call->in[1];
    ct_status st = check_index(op, index);
    if (st)
        return st;
    if (index->ndim > 1)
        return ct_error(CT_ERROR_VALUE, op, "index_select(): Index is supposed to be a vector");
    int d;
    if (ct_wrap_dim(op, call->ints[0], t->ndim, &d))
        return ct_last_status();
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    int64_t nidx = index->numel;
    if (t->ndim > 0)
        shape[d] = nidx;
    ct_tensor *out = ct_empty(shape, t->ndim, t->dtype, t->device);
    st = set_out(call, 0, out);
    if (st || is_meta(out))
        return st;
#ifdef CT_HAVE_CUDA
    if (out->device.type == CT_DEVICE_CUDA)
        return ct_cuda_index_select(out, t, index, d);
#endif
    ct_scope_begin();
    const ct_tensor *c = ct_contiguous(t), *ic = ct_contiguous(index);
    if (!c || !ic) {
        ct_scope_end();
        return ct_last_status();
    }
    size_t esz = ct_dtype_size(t->dtype);
    int64_t size = t->ndim ? t->shape[d] : 1, outer = t->ndim ? prod(t->shape, 0, d) : 1;
    int64_t inner = t->ndim ? prod(t->shape, d + 1, t->ndim) : 1;
    const char *src = ct_tensor_ptr(c);
    char *dst = ct_tensor_ptr(out);
    for (int64_t i = 0; i < nidx && st == CT_OK; i++) {
        int64_t at = 0;
        if ((st = index_at(op, ic, i, size, -1, &at)))
            break;
        for (int64_t o = 0; o < outer; o++)
            memcpy(dst + (size_t)((o * nidx + i) * inner) * esz, src + (size_t)((o * size + at) * inner) * esz,
                   (size_t)inner * esz);
    }
    ct_scope_end();
    return st;
}

ct_status ct_cpu_index_select(ct_keyset ks, ct_call *call, void *ud) { return index_select_kernel(ks, call, ud); }
ct_status ct_meta_index_select(ct_keyset ks, ct_call *call, void *ud) { return index_select_kernel(ks, call, ud); }

static ct_tensor *call_dim_index(ct_op op, const ct_tensor *t, int64_t dim, const ct_tensor *index) {
    const char *name = ct_op_name(op);
    CT_CHECK_ARG(name, t);
    CT_CHECK_ARG(name, index);
    ct_call c = {.op = op, .nin = 2, .in = {t, index}, .nints = 1, .ints = {dim}, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
}

ct_tensor *ct_index_select(const ct_tensor *t, int64_t dim, const ct_tensor *index) {
    return call_dim_index(CT_OP_index_select, t, dim, index);
}

/* gather/scatter: index has t's number of dims and is no larger than t outside dim. */
static ct_status check_gather_shapes(const char *op, const ct_tensor *t, const ct_tensor *index, int d,
                                     const ct_tensor *src) {
    int tnd = t->ndim ? t->ndim : 1, ind = index->ndim ? index->ndim : 1;
    if (tnd != ind)
        return ct_error(CT_ERROR_VALUE, op, "Index tensor must have the same number of dimensions as input tensor");
    for (int k = 0; k < index->ndim; k++) {
        if (k != d && index->shape[k] > t->shape[k]) {
            char a[64], b[64];
            return ct_error(CT_ERROR_VALUE, op, "Size does not match at dimension %d expected index %s to be no larger than self %s apart from dimension %d",
                            k, ct_shape_str(index->shape, index->ndim, a, sizeof a),
                            ct_shape_str(t->shape, t->ndim, b, sizeof b), d);
        }
        if (src && index->shape[k] > src->shape[k])
            return ct_error(CT_ERROR_VALUE, op, "Size does not match at dimension %d: index is larger than src", k);
    }
    return CT_OK;
}

/* Offsets of index element k (row-major over index's shape) in t and in a tensor with
 * index's shape, with the dim coordinate replaced by `at` for t. */
static int64_t offset_in(const int64_t *coord, const ct_tensor *t, int d, int64_t at) {
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++)
        off += (i == d ? at : coord[i]) * t->strides[i];
    return off;
}

static void next_coord(int64_t *coord, const int64_t *shape, int nd) {
    for (int i = nd - 1; i >= 0; i--) {
        if (++coord[i] < shape[i])
            return;
        coord[i] = 0;
    }
}

static ct_status gather_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "gather";
    const ct_tensor *t = call->in[0], *index = call->in[1];
    ct_status st = check_index(op, index);
    if (st)
        return st;
    int d;
    if (ct_wrap_dim(op, call->ints[0], t->ndim, &d))
        return ct_last_status();
    if ((st = check_gather_shapes(op, t, index, d, NULL)))
        return st;
    ct_tensor *out = ct_empty(index->shape, index->ndim, t->dtype, t->device);
    st = set_out(call, 0, out);
    if (st || is_meta(out))
        return st;
#ifdef CT_HAVE_CUDA
    if (out->device.type == CT_DEVICE_CUDA)
        return ct_cuda_gather(out, t, index, d);
#endif
    size_t esz = ct_dtype_size(t->dtype);
    int64_t coord[CT_MAX_DIMS] = {0};
    int64_t size = t->ndim ? t->shape[d] : 1;
    const char *src = ct_tensor_ptr(t);
    char *dst = ct_tensor_ptr(out);
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous(index);
    for (int64_t k = 0; ic && k < index->numel; k++) {
        int64_t at = 0;
        if ((st = index_at(op, ic, k, size, d, &at)))
            break;
        memcpy(dst + (size_t)k * esz, src + offset_in(coord, t, d, at) * (int64_t)esz, esz);
        next_coord(coord, index->shape, index->ndim);
    }
    if (!ic)
        st = ct_last_status();
    ct_scope_end();
    return st;
}

ct_status ct_cpu_gather(ct_keyset ks, ct_call *call, void *ud) { return gather_kernel(ks, call, ud); }
ct_status ct_meta_gather(ct_keyset ks, ct_call *call, void *ud) { return gather_kernel(ks, call, ud); }

ct_tensor *ct_gather(const ct_tensor *t, int64_t dim, const ct_tensor *index) {
    return call_dim_index(CT_OP_gather, t, dim, index);
}

/* ------------------------------------------------------------------ scatter_add, index_add */

/* dst[k] += alpha * src[k] in dtype d (through double for floats, int64 for integers). */
static void add_element(char *dst, const char *src, ct_dtype d, double alpha) {
    if (ct_dtype_is_floating(d))
        ct_store_double(dst, d, ct_load_double(dst, d) + alpha * ct_load_double(src, d));
    else if (d == CT_DTYPE_BOOL)
        ct_store_int64(dst, d, ct_load_int64(dst, d) | (alpha != 0 && ct_load_int64(src, d)));
    else
        ct_store_int64(dst, d, (int64_t)((uint64_t)ct_load_int64(dst, d) + (uint64_t)((int64_t)alpha * ct_load_int64(src, d))));
}

/* Allocates (or takes, in place) the output and copies t into it. */
static ct_status accumulate_target(ct_call *call, const ct_tensor *t, ct_tensor **out) {
    if (call->mode == CT_CALL_INPLACE) {
        *out = call->out[0];
        return CT_OK;
    }
    ct_tensor *o = ct_empty(t->shape, t->ndim, t->dtype, t->device);
    ct_status st = set_out(call, 0, o);
    if (st)
        return st;
    if (!is_meta(o)) {
        ct_scope_begin();
        st = ct_copy_(o, t) ? CT_OK : ct_last_status();
        ct_scope_end();
    }
    *out = o;
    return st;
}

static ct_status scatter_add_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "scatter_add";
    const ct_tensor *t = call->in[0], *index = call->in[1], *src = call->in[2];
    ct_status st = check_index(op, index);
    if (st)
        return st;
    if (src->dtype != t->dtype)
        return ct_error(CT_ERROR_TYPE, op, "Expected self.dtype to be equal to src.dtype");
    int d;
    if (ct_wrap_dim(op, call->ints[0], t->ndim, &d))
        return ct_last_status();
    if ((st = check_gather_shapes(op, t, index, d, src)))
        return st;
    ct_tensor *out;
    if ((st = accumulate_target(call, t, &out)) || is_meta(out))
        return st;
#ifdef CT_HAVE_CUDA
    if (out->device.type == CT_DEVICE_CUDA)
        return ct_cuda_scatter_add(out, src, index, d);
#endif
    size_t esz = ct_dtype_size(t->dtype);
    int64_t coord[CT_MAX_DIMS] = {0};
    int64_t size = t->ndim ? t->shape[d] : 1;
    char *dst = ct_tensor_ptr(out);
    const char *ps = ct_tensor_ptr(src);
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous(index);
    for (int64_t k = 0; ic && k < index->numel; k++) {
        int64_t at = 0;
        if ((st = index_at(op, ic, k, size, d, &at)))
            break;
        add_element(dst + offset_in(coord, out, d, at) * (int64_t)esz, ps + offset_in(coord, src, -1, 0) * (int64_t)esz,
                    t->dtype, 1.0);
        next_coord(coord, index->shape, index->ndim);
    }
    if (!ic)
        st = ct_last_status();
    ct_scope_end();
    return st;
}

ct_status ct_cpu_scatter_add(ct_keyset ks, ct_call *call, void *ud) { return scatter_add_kernel(ks, call, ud); }
ct_status ct_meta_scatter_add(ct_keyset ks, ct_call *call, void *ud) { return scatter_add_kernel(ks, call, ud); }

static ct_tensor *call_scatter(ct_op op, const ct_tensor *t, int64_t dim, const ct_tensor *index,
                               const ct_tensor *src, ct_tensor *self, const ct_scalar *alpha) {
    const char *name = ct_op_name(op);
    CT_CHECK_ARG(name, t);
    CT_CHECK_ARG(name, index);
    CT_CHECK_ARG(name, src);
    ct_call c = {.op = op, .nin = 3, .in = {t, index, src}, .nints = 1, .ints = {dim}, .dtype = CT_DTYPE_UNDEFINED};
    if (alpha) {
        c.s[0] = *alpha;
        c.nscalars = 1;
    }
    if (self) {
        c.mode = CT_CALL_INPLACE;
        c.out[0] = ct_retain(self);
        c.nout = 1;
    }
    return ct_dispatch_1(&c);
}

ct_tensor *ct_scatter_add(const ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src) {
    return call_scatter(CT_OP_scatter_add, t, dim, index, src, NULL, NULL);
}

ct_tensor *ct_scatter_add_(ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src) {
    return call_scatter(CT_OP_scatter_add, t, dim, index, src, t, NULL);
}

static ct_status index_add_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "index_add";
    const ct_tensor *t = call->in[0], *index = call->in[1], *src = call->in[2];
    ct_status st = check_index(op, index);
    if (st)
        return st;
    if (index->ndim > 1)
        return ct_error(CT_ERROR_VALUE, op, "index_add_(): Index is supposed to be a vector");
    if (src->dtype != t->dtype)
        return ct_error(CT_ERROR_TYPE, op, "index_add_(): self (%s) and source (%s) must have the same scalar type",
                        ct_dtype_name(t->dtype), ct_dtype_name(src->dtype));
    int d;
    if (ct_wrap_dim(op, call->ints[0], t->ndim, &d))
        return ct_last_status();
    bool ok = src->ndim == t->ndim || (t->ndim == 0 && src->ndim <= 1);
    for (int k = 0; ok && k < t->ndim; k++)
        ok = k == d ? src->shape[k] == index->numel : src->shape[k] == t->shape[k];
    if (!ok)
        return ct_error(CT_ERROR_VALUE, op, "index_add_(): source must have the input's shape except in dimension %d, where its size must equal the number of indices",
                        d);
    ct_tensor *out;
    if ((st = accumulate_target(call, t, &out)) || is_meta(out))
        return st;
    double alpha = call->nscalars ? ct_scalar_to_double(call->s[0]) : 1.0;
#ifdef CT_HAVE_CUDA
    if (out->device.type == CT_DEVICE_CUDA)
        return ct_cuda_index_add(out, src, index, d, alpha);
#endif
    size_t esz = ct_dtype_size(t->dtype);
    int64_t size = t->ndim ? t->shape[d] : 1, outer = t->ndim ? prod(t->shape, 0, d) : 1;
    int64_t inner = t->ndim ? prod(t->shape, d + 1, t->ndim) : 1, nidx = index->numel;
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous(index), *sc = ct_contiguous(src);
    ct_tensor *oc = ct_tensor_is_contiguous(out) ? out : ct_clone(out);
    if (!ic || !sc || !oc) {
        ct_scope_end();
        return ct_last_status();
    }
    char *dst = ct_tensor_ptr(oc);
    const char *ps = ct_tensor_ptr(sc);
    for (int64_t i = 0; i < nidx && st == CT_OK; i++) {
        int64_t at = 0;
        if ((st = index_at(op, ic, i, size, -1, &at)))
            break;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < inner; j++)
                add_element(dst + (size_t)((o * size + at) * inner + j) * esz, ps + (size_t)((o * nidx + i) * inner + j) * esz,
                            t->dtype, alpha);
    }
    if (st == CT_OK && oc != out && !ct_copy_(out, oc))
        st = ct_last_status();
    ct_scope_end();
    return st;
}

ct_status ct_cpu_index_add(ct_keyset ks, ct_call *call, void *ud) { return index_add_kernel(ks, call, ud); }
ct_status ct_meta_index_add(ct_keyset ks, ct_call *call, void *ud) { return index_add_kernel(ks, call, ud); }

ct_tensor *ct_index_add(const ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src,
                        ct_scalar alpha) {
    return call_scatter(CT_OP_index_add, t, dim, index, src, NULL, &alpha);
}

/* ------------------------------------------------------------------ masked_fill, nonzero */

static ct_status masked_fill_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "masked_fill";
    const ct_tensor *t = call->in[0], *mask = call->in[1];
    if (mask->dtype != CT_DTYPE_BOOL)
        return ct_error(CT_ERROR_TYPE, op, "masked_fill_ only supports boolean masks, but got mask with dtype %s",
                        ct_dtype_name(mask->dtype));
    int64_t ms[CT_MAX_DIMS];
    if (!ct_broadcast_strides(mask, t->shape, t->ndim, ms)) {
        char a[64], b[64];
        return ct_error(CT_ERROR_VALUE, op, "the mask of shape %s cannot be broadcast to the shape %s",
                        ct_shape_str(mask->shape, mask->ndim, a, sizeof a), ct_shape_str(t->shape, t->ndim, b, sizeof b));
    }
    if (ct_check_scalar_fits(op, call->s[0], t->dtype))
        return ct_last_status();
    ct_tensor *out;
    ct_status st = accumulate_target(call, t, &out);
    if (st || is_meta(out) || t->numel == 0)
        return st;
    char value[16];
    ct_store_scalar(value, t->dtype, call->s[0]);
#ifdef CT_HAVE_CUDA
    if (out->device.type == CT_DEVICE_CUDA)
        return ct_cuda_masked_fill(out, mask, ms, value);
#endif
    size_t esz = ct_dtype_size(t->dtype);
    const char *pm = ct_tensor_ptr(mask);
    char *po = ct_tensor_ptr(out);
    int64_t coord[CT_MAX_DIMS] = {0};
    for (int64_t k = 0; k < t->numel; k++) {
        int64_t mo = 0, oo = 0;
        for (int i = 0; i < t->ndim; i++) {
            mo += coord[i] * ms[i];
            oo += coord[i] * out->strides[i];
        }
        if (pm[mo])
            memcpy(po + oo * (int64_t)esz, value, esz);
        next_coord(coord, t->shape, t->ndim);
    }
    return CT_OK;
}

ct_status ct_cpu_masked_fill(ct_keyset ks, ct_call *call, void *ud) { return masked_fill_kernel(ks, call, ud); }
ct_status ct_meta_masked_fill(ct_keyset ks, ct_call *call, void *ud) { return masked_fill_kernel(ks, call, ud); }

static ct_tensor *call_masked_fill(const ct_tensor *t, const ct_tensor *mask, ct_scalar value, ct_tensor *self) {
    CT_CHECK_ARG("masked_fill", t);
    CT_CHECK_ARG("masked_fill", mask);
    ct_call c = {.op = CT_OP_masked_fill, .nin = 2, .in = {t, mask}, .nscalars = 1, .s = {value},
                 .dtype = CT_DTYPE_UNDEFINED};
    if (self) {
        c.mode = CT_CALL_INPLACE;
        c.out[0] = ct_retain(self);
        c.nout = 1;
    }
    return ct_dispatch_1(&c);
}

ct_tensor *ct_masked_fill(const ct_tensor *t, const ct_tensor *mask, ct_scalar value) {
    return call_masked_fill(t, mask, value, NULL);
}
ct_tensor *ct_masked_fill_(ct_tensor *t, const ct_tensor *mask, ct_scalar value) {
    return call_masked_fill(t, mask, value, t);
}

static ct_status nonzero_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *t = call->in[0];
    if (is_meta(t))
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, "nonzero",
                        "the output shape of nonzero depends on the data; META tensors have none");
#ifdef CT_HAVE_CUDA
    if (t->device.type == CT_DEVICE_CUDA)
        return ct_cuda_nonzero(call, t);
#endif
    ct_scope_begin();
    const ct_tensor *c = ct_contiguous(t);
    if (!c) {
        ct_scope_end();
        return ct_last_status();
    }
    size_t esz = ct_dtype_size(t->dtype);
    const char *p = ct_tensor_ptr(c);
    int64_t count = 0;
    char zero[16] = {0};
    for (int64_t k = 0; k < t->numel; k++) {
        const char *e = p + (size_t)k * esz;
        /* -0.0 is zero: compare as values for floats, bytes otherwise */
        if (ct_dtype_is_floating(t->dtype) ? ct_load_double(e, t->dtype) != 0 : memcmp(e, zero, esz) != 0)
            count++;
    }
    int nd = t->ndim;
    ct_tensor *out = ct_empty(CT_SHAPE(count, nd), CT_DTYPE_INT64, CT_CPU);
    ct_status st = set_out(call, 0, out);
    if (st == CT_OK) {
        int64_t *o = ct_tensor_data(out), coord[CT_MAX_DIMS] = {0}, row = 0;
        for (int64_t k = 0; k < t->numel; k++) {
            const char *e = p + (size_t)k * esz;
            if (ct_dtype_is_floating(t->dtype) ? ct_load_double(e, t->dtype) != 0 : memcmp(e, zero, esz) != 0) {
                if (nd > 0) /* a 0-d input's rows have no coordinates (and o may be NULL) */
                    memcpy(o + row * nd, coord, sizeof(int64_t) * (size_t)nd);
                row++;
            }
            next_coord(coord, t->shape, nd);
        }
    }
    ct_scope_end();
    return st;
}

ct_status ct_cpu_nonzero(ct_keyset ks, ct_call *call, void *ud) { return nonzero_kernel(ks, call, ud); }
ct_status ct_meta_nonzero(ct_keyset ks, ct_call *call, void *ud) { return nonzero_kernel(ks, call, ud); }

ct_tensor *ct_nonzero(const ct_tensor *t) {
    CT_CHECK_ARG("nonzero", t);
    ct_call c = {.op = CT_OP_nonzero, .nin = 1, .in = {t}, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
}

/* ------------------------------------------------------------------ sort, topk */

typedef struct {
    double v;   /* floating dtypes */
    int64_t iv; /* integer dtypes: compared exactly */
    int64_t i;
} keyed;

static int cmp_int_asc(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->iv != y->iv)
        return x->iv < y->iv ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}
static int cmp_int_desc(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->iv != y->iv)
        return x->iv > y->iv ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* NaN sorts above every number (as PyTorch); ties keep their order (stable). */
static int cmp_asc(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    bool nx = isnan(x->v), ny = isnan(y->v);
    if (nx != ny)
        return nx ? 1 : -1;
    if (!nx && x->v != y->v)
        return x->v < y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}
static int cmp_desc(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    bool nx = isnan(x->v), ny = isnan(y->v);
    if (nx != ny)
        return nx ? -1 : 1;
    if (!nx && x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Sorts t along d and writes the first k of each row (k = size for sort). */
static ct_status sort_rows(ct_call *call, const char *op, int64_t k, int d, bool descending) {
    const ct_tensor *t = call->in[0];
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    if (t->ndim)
        shape[d] = k;
    ct_tensor *vals = ct_empty(shape, t->ndim, t->dtype, t->device);
    ct_tensor *idx = ct_empty(shape, t->ndim, CT_DTYPE_INT64, t->device);
    ct_status st = set_out(call, 0, vals);
    if (st == CT_OK)
        st = set_out(call, 1, idx);
    if (st || is_meta(vals) || t->numel == 0)
        return st;
#ifdef CT_HAVE_CUDA
    if (vals->device.type == CT_DEVICE_CUDA)
        return ct_cuda_sort(vals, idx, t, d, k, descending);
#endif
    int64_t size = t->ndim ? t->shape[d] : 1, outer = t->ndim ? prod(t->shape, 0, d) : 1;
    int64_t inner = t->ndim ? prod(t->shape, d + 1, t->ndim) : 1;
    ct_scope_begin();
    const ct_tensor *c = ct_contiguous(t);
    keyed *row = malloc(sizeof *row * (size_t)(size > 0 ? size : 1));
    if (!c || !row) {
        free(row);
        ct_scope_end();
        return c ? ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory") : ct_last_status();
    }
    size_t esz = ct_dtype_size(t->dtype);
    const char *src = ct_tensor_ptr(c);
    char *pv = ct_tensor_ptr(vals);
    int64_t *pi = ct_tensor_data(idx);
    bool fl = ct_dtype_is_floating(t->dtype);
    /* uint64 compares as int64 once its sign bit is flipped */
    int64_t flip = t->dtype == CT_DTYPE_UINT64 ? INT64_MIN : 0;
    int (*cmp)(const void *, const void *) =
        fl ? (descending ? cmp_desc : cmp_asc) : (descending ? cmp_int_desc : cmp_int_asc);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            for (int64_t i = 0; i < size; i++) {
                const char *e = src + (size_t)((o * size + i) * inner + j) * esz;
                if (fl)
                    row[i].v = ct_load_double(e, t->dtype);
                else
                    row[i].iv = ct_load_int64(e, t->dtype) ^ flip;
                row[i].i = i;
            }
            qsort(row, (size_t)size, sizeof *row, cmp);
            for (int64_t i = 0; i < k; i++) {
                size_t at = (size_t)((o * k + i) * inner + j);
                memcpy(pv + at * esz, src + (size_t)((o * size + row[i].i) * inner + j) * esz, esz);
                pi[at] = row[i].i;
            }
        }
    free(row);
    ct_scope_end();
    return CT_OK;
}

static ct_status sort_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *t = call->in[0];
    int d;
    if (ct_wrap_dim("sort", call->ints[0], t->ndim, &d))
        return ct_last_status();
    return sort_rows(call, "sort", t->ndim ? t->shape[d] : 1, d, call->ints[1] != 0);
}

ct_status ct_cpu_sort(ct_keyset ks, ct_call *call, void *ud) { return sort_kernel(ks, call, ud); }
ct_status ct_meta_sort(ct_keyset ks, ct_call *call, void *ud) { return sort_kernel(ks, call, ud); }

static ct_status topk_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *t = call->in[0];
    int d;
    if (ct_wrap_dim("topk", call->ints[1], t->ndim, &d))
        return ct_last_status();
    int64_t k = call->ints[0], size = t->ndim ? t->shape[d] : 1;
    if (k < 0 || k > size)
        return ct_error(CT_ERROR_INDEX, "topk", "selected index k out of range");
    if (t->dtype == CT_DTYPE_BOOL) /* as PyTorch's CPU topk */
        return ct_error(CT_ERROR_TYPE, "topk", "not implemented for '%s'", ct_dtype_name(t->dtype));
    return sort_rows(call, "topk", k, d, call->ints[2] != 0);
}

ct_status ct_cpu_topk(ct_keyset ks, ct_call *call, void *ud) { return topk_kernel(ks, call, ud); }
ct_status ct_meta_topk(ct_keyset ks, ct_call *call, void *ud) { return topk_kernel(ks, call, ud); }

static ct_tensor *take_two(ct_call *c, ct_tensor **second) {
    if (ct_dispatch(c) != CT_OK)
        return NULL;
    ct_tensor *first = ct_call_take_output(c, 0);
    if (second)
        *second = ct_call_take_output(c, 1);
    ct_call_clear_outputs(c);
    return first;
}

ct_tensor *ct_sort(const ct_tensor *t, int64_t dim, bool descending, ct_tensor **indices) {
    CT_CHECK_ARG("sort", t);
    ct_call c = {.op = CT_OP_sort, .nin = 1, .in = {t}, .nints = 2, .ints = {dim, descending}, .dtype = CT_DTYPE_UNDEFINED};
    return take_two(&c, indices);
}

ct_tensor *ct_argsort(const ct_tensor *t, int64_t dim, bool descending) {
    ct_tensor *idx = NULL;
    ct_scope_begin();
    ct_tensor *v = ct_sort(t, dim, descending, &idx);
    ct_keep(v ? idx : NULL);
    ct_scope_end();
    return v ? idx : NULL;
}

ct_tensor *ct_topk(const ct_tensor *t, int64_t k, int64_t dim, bool largest, ct_tensor **indices) {
    CT_CHECK_ARG("topk", t);
    ct_call c = {.op = CT_OP_topk, .nin = 1, .in = {t}, .nints = 3, .ints = {k, dim, largest}, .dtype = CT_DTYPE_UNDEFINED};
    return take_two(&c, indices);
}

/* ------------------------------------------------------------------ composites */

ct_tensor *ct_roll(const ct_tensor *t, const int64_t *shifts, const int64_t *dims, int n) {
    CT_CHECK_ARG("roll", t);
    if (n <= 0 || !shifts) {
        ct_error(CT_ERROR_VALUE, "roll", "`shifts` required");
        return NULL;
    }
    ct_scope_begin();
    const ct_tensor *cur = t;
    if (!dims) { /* roll the flattened tensor, then restore the shape */
        ct_tensor *flat = ct_flatten(t, 0, -1);
        cur = ct_roll(flat, shifts, CT_INDEX(0), 1);
        cur = cur ? ct_view(cur, t->shape, t->ndim) : NULL;
    } else {
        for (int i = 0; i < n && cur; i++) {
            int d;
            if (ct_wrap_dim("roll", dims[i], cur->ndim, &d)) {
                cur = NULL;
                break;
            }
            int64_t size = cur->shape[d];
            if (size == 0)
                continue;
            int64_t s = ((shifts[i] % size) + size) % size;
            if (s == 0)
                continue;
            const ct_tensor *parts[2] = {ct_narrow(cur, d, size - s, s), ct_narrow(cur, d, 0, size - s)};
            cur = parts[0] && parts[1] ? ct_cat(parts, 2, d) : NULL;
        }
        if (cur == t)
            cur = ct_clone(t);
    }
    ct_tensor *r = (ct_tensor *)cur;
    ct_keep(r);
    ct_scope_end();
    return r;
}

ct_tensor *ct_repeat(const ct_tensor *t, const int64_t *repeats, int n) {
    CT_CHECK_ARG("repeat", t);
    if (!repeats || n < t->ndim) {
        ct_error(CT_ERROR_VALUE, "repeat",
                 "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
        return NULL;
    }
    if (2 * n > CT_MAX_DIMS) {
        ct_error(CT_ERROR_NOT_IMPLEMENTED, "repeat", "ctorch repeats tensors of at most %d dims", CT_MAX_DIMS / 2);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (repeats[i] < 0) {
            ct_error(CT_ERROR_VALUE, "repeat", "Trying to create tensor with negative dimension %lld",
                     (long long)repeats[i]);
            return NULL;
        }
    /* View t as (1, s0, 1, s1, ...), expand to (r0, s0, r1, s1, ...), then fold pairs. */
    int64_t inter[CT_MAX_DIMS], expanded[CT_MAX_DIMS], result[CT_MAX_DIMS];
    int lead = n - t->ndim;
    for (int i = 0; i < n; i++) {
        int64_t s = i < lead ? 1 : t->shape[i - lead];
        inter[2 * i] = 1;
        inter[2 * i + 1] = s;
        expanded[2 * i] = repeats[i];
        expanded[2 * i + 1] = s;
        result[i] = repeats[i] * s;
    }
    ct_scope_begin();
    ct_tensor *r = ct_reshape(ct_expand(ct_reshape(t, inter, 2 * n), expanded, 2 * n), result, n);
    ct_keep(r);
    ct_scope_end();
    return r;
}

ct_tensor *ct_tile(const ct_tensor *t, const int64_t *reps, int n) {
    CT_CHECK_ARG("tile", t);
    if (!reps || n < 0 || n > CT_MAX_DIMS) {
        ct_error(CT_ERROR_VALUE, "tile", "invalid reps");
        return NULL;
    }
    /* tile pads reps with leading ones up to t's number of dims, then repeats */
    int64_t full[CT_MAX_DIMS];
    int m = n > t->ndim ? n : t->ndim;
    for (int i = 0; i < m; i++)
        full[i] = i < m - n ? 1 : reps[i - (m - n)];
    return ct_repeat(t, full, m);
}
