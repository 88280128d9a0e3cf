/* The structured kernels of the shape and indexing ops (cat, flip, tril/triu,
 * index_select, gather, scatter_add, index_add, masked_fill, nonzero, sort, topk):
 * argument checks, output shapes and allocation, then the device's stub (Note [Stubs]
 * in stubs.h). META stops once the outputs exist. The loops are the backends':
 * src/cpu/shape.c, src/cuda/indexing_cuda.c and shape_cuda.c. */
#include <string.h>

#include "core/checks.h"
#include "core/factory.h"
#include "core/view.h"
#include "meta/kernels.h"
#include "ctorch/ops.h" /* ct_result_type (promote.c) */
#include "meta/indexing.h"
#include "meta/stubs.h"

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
        ct_tensor *o = ct_empty_impl(CT_SHAPE(0), dt, ts[0]->device);
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
        if (!ct_size_add(shape[d], t->shape[d], &shape[d])) /* Note [Checked sizes] */
            return ct_error(CT_ERROR_VALUE, op, "the size of the result along dimension %d overflows int64", d);
    }
    ct_tensor *out = ct_empty_impl(shape, ref->ndim, dt, ref->device);
    ct_status st = set_out(call, 0, out);
    if (st || is_meta(out))
        return st;
    int64_t off = 0;
    ct_scope_begin();
    for (int i = 0; i < n && st == CT_OK; i++) {
        const ct_tensor *t = ts[i];
        if (t->ndim == 1 && t->numel == 0)
            continue;
        ct_tensor *slot = ct_narrow_impl(out, d, off, t->shape[d]);
        if (!slot || !ct_copy_impl(slot, t))
            st = ct_last_status();
        off += t->shape[d];
    }
    ct_scope_end();
    return st;
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
    ct_tensor *out = ct_empty_impl(t->shape, t->ndim, t->dtype, t->device);
    ct_status st = set_out(call, 0, out);
    if (st || is_meta(out) || t->numel == 0)
        return st;
    return CT_CALL_STUB(flip, "flip", out->device, out, t, flipped);
}

static ct_status tri_kernel(ct_call *call, bool lower) {
    const ct_tensor *t = call->in[0];
    const char *op = lower ? "tril" : "triu";
    if (t->ndim < 2)
        return ct_error(CT_ERROR_VALUE, op, "%s: input tensor must have at least 2 dimensions", op);
    int64_t k = call->ints[0];
    ct_tensor *out = ct_empty_impl(t->shape, t->ndim, t->dtype, t->device);
    ct_status st = set_out(call, 0, out);
    if (st || is_meta(out) || t->numel == 0)
        return st;
    ct_scope_begin();
    const ct_tensor *c = ct_contiguous_impl(t);
    if (!c) {
        ct_scope_end();
        return ct_last_status();
    }
    st = CT_CALL_STUB(tri, op, out->device, out, c, k, lower);
    ct_scope_end();
    return st;
}

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
    else if (nidx != 1) /* the result is 0-d: one element, from one index */
        return ct_error(CT_ERROR_INDEX, op, "index_select(): Index to scalar can have only 1 value, got %lld value(s)",
                        (long long)nidx);
    ct_tensor *out = ct_empty_impl(shape, t->ndim, t->dtype, t->device);
    st = set_out(call, 0, out);
    if (st || is_meta(out))
        return st;
    return CT_CALL_STUB(index_select, op, out->device, out, t, index, d);
}

/* gather/scatter: index has t's number of dims and is no larger than t outside dim. */
static ct_status check_gather_shapes(const char *op, const ct_tensor *t, const ct_tensor *index, int d) {
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
    }
    return CT_OK;
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
    if ((st = check_gather_shapes(op, t, index, d)))
        return st;
    ct_tensor *out = ct_empty_impl(index->shape, index->ndim, t->dtype, t->device);
    st = set_out(call, 0, out);
    if (st || is_meta(out))
        return st;
    return CT_CALL_STUB(gather, op, out->device, out, t, index, d);
}

/* ------------------------------------------------------------------ scatter_add, index_add */

/* Allocates (or takes, in place) the output and copies t into it. */
static ct_status accumulate_target(ct_call *call, const ct_tensor *t, ct_tensor **out) {
    if (call->mode == CT_CALL_INPLACE) {
        *out = call->out[0];
        return ct_check_no_internal_overlap(ct_op_name(call->op), *out); /* Note [Internal overlap] */
    }
    ct_tensor *o = ct_empty_impl(t->shape, t->ndim, t->dtype, t->device);
    ct_status st = set_out(call, 0, o);
    if (st)
        return st;
    if (!is_meta(o)) {
        ct_scope_begin();
        st = ct_copy_impl(o, t) ? CT_OK : ct_last_status();
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
    if ((st = ct_ix_check_scatter_shapes(op, t, index, d, src))) /* Note [scatter shapes] */
        return st;
    ct_tensor *out;
    if ((st = accumulate_target(call, t, &out)) || is_meta(out))
        return st;
    return CT_CALL_STUB(scatter_add, op, out->device, out, src, index, d);
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
    int64_t src_size = src->ndim == 0 ? 1 : src->shape[d]; /* a 0-d self: dim 0 of a 0-d or 1-d source */
    if (index->numel != src_size)
        return ct_error(CT_ERROR_INDEX, op, "index_add_(): Number of indices (%lld) should be equal to source.size(dim) (%lld)",
                        (long long)index->numel, (long long)src_size);
    if (ct_check_scalar_fits(op, call->nscalars ? call->s[0] : ct_scalar_int(1), t->dtype)) /* alpha in self's dtype */
        return ct_last_status();
    ct_tensor *out;
    if ((st = accumulate_target(call, t, &out)) || is_meta(out))
        return st;
    double alpha = call->nscalars ? ct_scalar_to_double(call->s[0]) : 1.0;
    return CT_CALL_STUB(index_add, op, out->device, out, src, index, d, alpha);
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
    return CT_CALL_STUB(masked_fill, op, out->device, out, mask, ms, value);
}

static ct_status nonzero_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *t = call->in[0];
    if (is_meta(t))
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, "nonzero",
                        "the output shape of nonzero depends on the data; META tensors have none");
    return CT_CALL_STUB(nonzero, "nonzero", t->device, call, t);
}

/* ------------------------------------------------------------------ sort, topk */

/* Sorts t along d and writes the first k of each row (k = size for sort). */
static ct_status sort_rows(ct_call *call, const char *op, int64_t k, int d, bool descending) {
    const ct_tensor *t = call->in[0];
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    if (t->ndim)
        shape[d] = k;
    ct_tensor *vals = ct_empty_impl(shape, t->ndim, t->dtype, t->device);
    ct_tensor *idx = ct_empty_impl(shape, t->ndim, CT_DTYPE_INT64, t->device);
    ct_status st = set_out(call, 0, vals);
    if (st == CT_OK)
        st = set_out(call, 1, idx);
    if (st || is_meta(vals) || t->numel == 0)
        return st;
    return CT_CALL_STUB(sort, op, vals->device, vals, idx, t, d, k, descending);
}

static ct_status sort_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *t = call->in[0];
    int d;
    if (ct_wrap_dim("sort", call->ints[0], t->ndim, &d))
        return ct_last_status();
    return sort_rows(call, "sort", t->ndim ? t->shape[d] : 1, d, call->ints[1] != 0);
}

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

/* ------------------------------------------------------------------ entry points */

/* Each starts with the shared device check (kernels.h). */
#define ENTRY(name, op, body)                                                    \
    ct_status ct_kernel_##name(ct_keyset ks, ct_call *call, void *ud) {          \
        if (ct_call_check_devices(op, call))                                     \
            return ct_last_status();                                             \
        return body;                                                             \
    }
ENTRY(cat, "cat", cat_kernel(ks, call, ud))
ENTRY(flip, "flip", flip_kernel(ks, call, ud))
ENTRY(tril, "tril", ((void)ks, (void)ud, tri_kernel(call, true)))
ENTRY(triu, "triu", ((void)ks, (void)ud, tri_kernel(call, false)))
ENTRY(index_select, "index_select", index_select_kernel(ks, call, ud))
ENTRY(gather, "gather", gather_kernel(ks, call, ud))
ENTRY(scatter_add, "scatter_add", scatter_add_kernel(ks, call, ud))
ENTRY(index_add, "index_add", index_add_kernel(ks, call, ud))
ENTRY(masked_fill, "masked_fill", masked_fill_kernel(ks, call, ud))
ENTRY(nonzero, "nonzero", nonzero_kernel(ks, call, ud))
ENTRY(sort, "sort", sort_kernel(ks, call, ud))
ENTRY(topk, "topk", topk_kernel(ks, call, ud))
