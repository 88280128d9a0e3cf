/* The structured kernels of the indexing ops beside the ones in shape.c: scatter and
 * scatter_reduce, index_copy, index_fill, take, masked_select, masked_scatter,
 * kthvalue, unique and unique_consecutive. Each checks its arguments, allocates its
 * outputs and calls the device's stub (Note [Stubs] in stubs.h); META stops once the
 * outputs' shapes are known, and ops whose output shape depends on the data refuse
 * META, as nonzero does. The CPU loops are src/cpu/indexing.c; CUDA's are
 * src/cuda/indexing_cuda.c or, for take, masked_scatter, kthvalue and unique, the
 * compositions of src/api/indexing_generic.c (Note [Generic indexing] there).
 *
 * Note [Update kernels]
 * scatter, scatter_reduce, index_copy, index_fill and masked_scatter write into a copy
 * of self (or self, in place). They all edit a contiguous working tensor
 * (ct_ix_begin_update) addressed by flat row-major offsets, and copy it back when
 * the real output is strided. Inputs they read (index, src) are addressed through
 * their own strides, so no input is copied. Elements move as bytes, so every dtype
 * works without a per-type loop; reductions go through double (floating dtypes) or
 * int64 (integers, wrapping like the element type). */
#include <string.h>

#include "meta/indexing.h"
#include "meta/kernels.h"
#include "meta/stubs.h"

/* Note [scatter shapes]
 * PyTorch's rule: index has self's number of dims (0-d counts as 1-d, with size 1), and
 * src's, and along every dim is no larger than src and, outside dim, no larger than
 * self. An empty index makes the op a copy. scatter_add (shape.c) shares it. */
ct_status ct_ix_check_scatter_shapes(const char *op, const ct_tensor *t, const ct_tensor *index, int d,
                                     const ct_tensor *src) {
    int tnd = t->ndim ? t->ndim : 1, ind = index->ndim ? index->ndim : 1;
    if (tnd != ind)
        return ct_error(CT_ERROR_VALUE, op, "Index tensor must have the same number of dimensions as self tensor");
    if (src && (src->ndim ? src->ndim : 1) != ind)
        return ct_error(CT_ERROR_VALUE, op, "Index tensor must have the same number of dimensions as src tensor");
    if (index->numel == 0)
        return CT_OK;
    for (int k = 0; k < ind; k++) { /* a 0-d tensor has size 1 along its one dim */
        int64_t isz = index->ndim ? index->shape[k] : 1;
        bool bad_self = k != d && isz > (t->ndim ? t->shape[k] : 1);
        bool bad_src = src && isz > (src->ndim ? src->shape[k] : 1);
        if (bad_self || bad_src) {
            char a[96], b[96], c[96];
            ct_shape_str(index->shape, index->ndim, a, sizeof a);
            ct_shape_str(t->shape, t->ndim, b, sizeof b);
            if (src)
                return ct_error(CT_ERROR_VALUE, op,
                                "Expected index %s to be no larger than self %s apart from dimension %d and to be "
                                "no larger size than src %s",
                                a, b, d, ct_shape_str(src->shape, src->ndim, c, sizeof c));
            return ct_error(CT_ERROR_VALUE, op, "Expected index %s to be no larger than self %s apart from dimension %d",
                            a, b, d);
        }
    }
    return CT_OK;
}

/* scatter's index check (PyTorch 2.x): int64 or int32, unless it is empty. */
static ct_status need_int_index(const char *msg_prefix, const char *op, const ct_tensor *index) {
    if (index->numel != 0 && index->dtype != CT_DTYPE_INT64 && index->dtype != CT_DTYPE_INT32)
        return ct_error(CT_ERROR_TYPE, op, "%sExpected dtype int32/int64 for index", msg_prefix);
    return CT_OK;
}

/* ------------------------------------------------------------------ scatter, scatter_reduce */

/* ints: dim, reduce (-1: plain scatter), include_self. in[2] NULL: scatter s[0]. */
static ct_status scatter_kernel(ct_call *call, const char *op) {
    const ct_tensor *t = call->in[0], *index = call->in[1], *src = call->in[2];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    int64_t reduce = call->ints[1];
    bool include_self = call->ints[2] != 0;
    /* PyTorch's scatter_reduce shares scatter's checks and their "scatter():" prefix */
    ct_status st = need_int_index("scatter(): ", op, index);
    if (st)
        return st;
    if (index->dtype != CT_DTYPE_INT64) /* the stubs read int64; a temporary of the call's scope */
        if (!(index = ct_to_dtype_impl(index, CT_DTYPE_INT64)))
            return ct_last_status();
    if (src && src->dtype != t->dtype)
        return ct_error(CT_ERROR_TYPE, op, "scatter(): Expected self.dtype to be equal to src.dtype");
    int d;
    if (ct_wrap_dim(op, call->ints[0], t->ndim ? t->ndim : 1, &d))
        return ct_last_status();
    if ((st = ct_ix_check_scatter_shapes(op, t, index, d, src)))
        return st;
    char value[16] = {0};
    if (!src) {
        if (ct_check_scalar_fits(op, call->s[0], t->dtype))
            return ct_last_status();
        ct_store_scalar(value, t->dtype, call->s[0]);
    }
    ct_tensor *out, *w;
    if ((st = ct_ix_begin_update(call, t, &out, &w)) || !w || index->numel == 0)
        return st;
    st = CT_CALL_STUB(scatter, op, w->device, w, index, src, value, d, (int)reduce, include_self, op);
    return st ? st : ct_ix_finish_update(out, w);
}

/* ------------------------------------------------------------------ index_copy, index_fill */

static ct_status index_copy_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "index_copy";
    const ct_tensor *t = call->in[0], *index = call->in[1], *src = call->in[2];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    int d;
    if (ct_wrap_dim(op, call->ints[0], t->ndim ? t->ndim : 1, &d))
        return ct_last_status();
    if (index->ndim >= 2)
        return ct_error(CT_ERROR_INDEX, op, "index_copy_(): Index should have dimension 1 or 0 (got %d)", index->ndim);
    int64_t nidx = index->numel;
    if (src->ndim == 0 && nidx != 1)
        return ct_error(CT_ERROR_INDEX, op, "index_copy_(): When source is scalar, index should have one element (got %lld)",
                        (long long)nidx);
    if (src->ndim != t->ndim && src->ndim != 0 && t->ndim != 0)
        return ct_error(CT_ERROR_INDEX, op,
                        "index_copy_(): When source and destination are not scalars, their dimensionality must match. "
                        "Source dimensionality (%d), destination dimensionality (%d)",
                        src->ndim, t->ndim);
    if (index->dtype != CT_DTYPE_INT64)
        return ct_error(CT_ERROR_TYPE, op, "index_copy_(): Expected a long tensor for index, but got %s",
                        ct_dtype_pt_name(index->dtype));
    if (src->dtype != t->dtype)
        return ct_error(CT_ERROR_TYPE, op,
                        "index_copy_(): self and source expected to have the same dtype, but got (self) %s and "
                        "(source) %s",
                        ct_dtype_pt_name(t->dtype), ct_dtype_pt_name(src->dtype));
    if (src->ndim == 0 && t->ndim >= 2) { /* a scalar source fills a slice of one element only */
        int64_t slice[CT_MAX_DIMS];
        int n = 0;
        for (int k = 0; k < t->ndim; k++)
            if (k != d)
                slice[n++] = t->shape[k];
        char sh[96];
        return ct_error(CT_ERROR_VALUE, op,
                        "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice "
                        "shape: %s and source slice shape: []",
                        ct_shape_str(slice, n, sh, sizeof sh));
    }
    if (src->ndim == t->ndim) {
        for (int k = 0; k < t->ndim; k++)
            if (k != d && src->shape[k] != t->shape[k])
                return ct_error(CT_ERROR_VALUE, op,
                                "index_copy_(): Source/destination tensor must have same slice shapes. Destination "
                                "slice shape: %lld at dimension %d and source slice shape: %lld at dimension %d.",
                                (long long)t->shape[k], k - (k > d), (long long)src->shape[k], k - (k > d));
        int64_t ssize = src->ndim ? src->shape[d] : 1;
        if (ssize != nidx)
            return ct_error(CT_ERROR_INDEX, op,
                            "index_copy_(): Number of indices (%lld) should be equal to source.size(dim) (%lld)",
                            (long long)nidx, (long long)ssize);
    }
    ct_tensor *out, *w;
    ct_status st;
    if ((st = ct_ix_begin_update(call, t, &out, &w)) || !w || nidx == 0)
        return st;
    st = CT_CALL_STUB(index_copy, op, w->device, w, index, src, d);
    return st ? st : ct_ix_finish_update(out, w);
}

static ct_status index_fill_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "index_fill";
    const ct_tensor *t = call->in[0], *index = call->in[1];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    if (index->dtype != CT_DTYPE_INT64)
        return ct_error(CT_ERROR_INDEX, op, "index_fill_(): Expected dtype int64 for index.");
    if (index->ndim > 1)
        return ct_error(CT_ERROR_VALUE, op, "Index has to be a vector/scalar");
    int d;
    if (ct_wrap_dim(op, call->ints[0], t->ndim ? t->ndim : 1, &d))
        return ct_last_status();
    if (ct_check_scalar_fits(op, call->s[0], t->dtype))
        return ct_last_status();
    char value[16] = {0};
    ct_store_scalar(value, t->dtype, call->s[0]);
    ct_tensor *out, *w;
    ct_status st;
    if ((st = ct_ix_begin_update(call, t, &out, &w)) || !w)
        return st;
    st = CT_CALL_STUB(index_fill, op, w->device, w, index, value, d);
    return st ? st : ct_ix_finish_update(out, w);
}

/* ------------------------------------------------------------------ take */

static ct_status take_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "take";
    const ct_tensor *t = call->in[0], *index = call->in[1];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    if (index->dtype != CT_DTYPE_INT64)
        return ct_error(CT_ERROR_TYPE, op, "take(): Expected a long tensor for index, but got %s",
                        ct_dtype_pt_name(index->dtype));
    ct_tensor *out = ct_empty_impl(index->shape, index->ndim, t->dtype, t->device);
    ct_status st = ct_ix_set_out(call, 0, out);
    if (st || ct_ix_is_meta(out) || index->numel == 0)
        return st;
    if (t->numel == 0)
        return ct_error(CT_ERROR_INDEX, op, "take(): tried to take from an empty tensor");
    return CT_CALL_STUB(take, op, out->device, out, t, index);
}

/* ------------------------------------------------------------------ masked_select, masked_scatter */

/* Broadcast shape of a and b, with PyTorch's message on failure. */
static ct_status broadcast_pair(const char *op, const ct_tensor *a, const ct_tensor *b, int64_t *shape, int *nd) {
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - a->ndim), ib = i - (n - b->ndim);
        int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            return ct_error(CT_ERROR_VALUE, op,
                            "The size of tensor a (%lld) must match the size of tensor b (%lld) at non-singleton "
                            "dimension %d",
                            (long long)sa, (long long)sb, i);
        shape[i] = sa == 1 ? sb : sa;
    }
    *nd = n;
    return CT_OK;
}

static ct_status masked_select_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "masked_select";
    const ct_tensor *t = call->in[0], *mask = call->in[1];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    /* masks are bool: PyTorch 2.x no longer takes uint8 ones here */
    ct_status st = mask->dtype == CT_DTYPE_BOOL
                       ? CT_OK
                       : ct_error(CT_ERROR_TYPE, op, "masked_select: expected BoolTensor for mask");
    if (st)
        return st;
    int64_t shape[CT_MAX_DIMS], ts[CT_MAX_DIMS], ms[CT_MAX_DIMS];
    int nd;
    if ((st = broadcast_pair(op, mask, t, shape, &nd)))
        return st;
    if (ct_ix_is_meta(t) || ct_ix_is_meta(mask))
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op,
                        "the output shape of masked_select depends on the data; META tensors have none");
    ct_broadcast_strides(t, shape, nd, ts);
    ct_broadcast_strides(mask, shape, nd, ms);
    return CT_CALL_STUB(masked_select, op, t->device, call, t, mask, shape, nd, ts, ms);
}

static ct_status masked_scatter_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "masked_scatter";
    const ct_tensor *t = call->in[0], *mask = call->in[1], *src = call->in[2];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    ct_status st = mask->dtype == CT_DTYPE_BOOL
                       ? CT_OK
                       : ct_error(CT_ERROR_TYPE, op, "masked_scatter_ only supports boolean masks, but got mask with dtype %s",
                                  ct_dtype_pt_name(mask->dtype));
    if (st)
        return st;
    if (src->dtype != t->dtype)
        return ct_error(CT_ERROR_TYPE, op, "masked_scatter: expected self and source to have same dtypes but got %s and %s",
                        ct_dtype_pt_name(t->dtype), ct_dtype_pt_name(src->dtype));
    /* Out of place, self and mask broadcast together; in place, the mask broadcasts to
     * self. */
    int64_t shape[CT_MAX_DIMS], ms[CT_MAX_DIMS];
    int nd;
    if ((st = broadcast_pair(op, t, mask, shape, &nd)))
        return st;
    if (call->mode == CT_CALL_INPLACE) {
        nd = t->ndim;
        memcpy(shape, t->shape, sizeof(int64_t) * (size_t)nd);
        if (!ct_broadcast_strides(mask, shape, nd, ms)) {
            char a[96], b[96];
            return ct_error(CT_ERROR_VALUE, op, "the mask of shape %s cannot be broadcast to self's shape %s",
                            ct_shape_str(mask->shape, mask->ndim, a, sizeof a), ct_shape_str(shape, nd, b, sizeof b));
        }
    }
    const ct_tensor *base = t;
    if (call->mode != CT_CALL_INPLACE && (nd != t->ndim || memcmp(shape, t->shape, sizeof(int64_t) * (size_t)nd)))
        if (!(base = ct_expand_impl(t, shape, nd)))
            return ct_last_status();
    ct_tensor *out, *w;
    if ((st = ct_ix_begin_update(call, base, &out, &w)) || !w)
        return st;
    ct_broadcast_strides(mask, shape, nd, ms);
    st = CT_CALL_STUB(masked_scatter, op, w->device, w, mask, ms, src);
    return st ? st : ct_ix_finish_update(out, w);
}

/* ------------------------------------------------------------------ kthvalue, unique */

static ct_status kthvalue_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "kthvalue";
    const ct_tensor *t = call->in[0];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    int64_t k = call->ints[0];
    bool keepdim = call->ints[2] != 0;
    int d;
    if (ct_wrap_dim(op, call->ints[1], t->ndim ? t->ndim : 1, &d))
        return ct_last_status();
    int64_t size = t->ndim ? t->shape[d] : 1;
    if (k < 1 || k > size)
        return ct_error(CT_ERROR_INDEX, op, "kthvalue(): selected number k out of range for dimension %d", d);
    if (t->dtype == CT_DTYPE_BOOL)
        return ct_error(CT_ERROR_TYPE, op, "\"kthvalue_cpu\" not implemented for 'Bool'");
    int64_t shape[CT_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != d)
            shape[nd++] = t->shape[i];
        else if (keepdim)
            shape[nd++] = 1;
    ct_tensor *vals = ct_empty_impl(shape, nd, t->dtype, t->device);
    ct_tensor *idx = ct_empty_impl(shape, nd, CT_DTYPE_INT64, t->device);
    ct_status st = ct_ix_set_out(call, 0, vals);
    if (st == CT_OK)
        st = ct_ix_set_out(call, 1, idx);
    if (st || ct_ix_is_meta(vals) || vals->numel == 0)
        return st;
    return CT_CALL_STUB(kthvalue, op, vals->device, vals, idx, t, d, k);
}

/* unique and unique_consecutive (Note [unique] in src/cpu/indexing.c): the output
 * size depends on the data, so META is refused. */
static ct_status unique_kernel(ct_call *call, bool consecutive) {
    const char *op = consecutive ? "unique_consecutive" : "unique";
    const ct_tensor *t = call->in[0];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    if (ct_ix_is_meta(t))
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "the output shape of %s depends on the data; META tensors have none",
                        op);
    return CT_CALL_STUB(unique, op, t->device, call, t, consecutive);
}

/* ------------------------------------------------------------------ entry points */

ct_status ct_kernel_scatter(ct_keyset ks, ct_call *call, void *ud) { (void)ks, (void)ud; return scatter_kernel(call, "scatter"); }
ct_status ct_kernel_scatter_reduce(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return scatter_kernel(call, "scatter_reduce");
}
ct_status ct_kernel_index_copy(ct_keyset ks, ct_call *call, void *ud) { return index_copy_kernel(ks, call, ud); }
ct_status ct_kernel_index_fill(ct_keyset ks, ct_call *call, void *ud) { return index_fill_kernel(ks, call, ud); }
ct_status ct_kernel_take(ct_keyset ks, ct_call *call, void *ud) { return take_kernel(ks, call, ud); }
ct_status ct_kernel_masked_select(ct_keyset ks, ct_call *call, void *ud) { return masked_select_kernel(ks, call, ud); }
ct_status ct_kernel_masked_scatter(ct_keyset ks, ct_call *call, void *ud) { return masked_scatter_kernel(ks, call, ud); }
ct_status ct_kernel_kthvalue(ct_keyset ks, ct_call *call, void *ud) { return kthvalue_kernel(ks, call, ud); }
ct_status ct_kernel_unique(ct_keyset ks, ct_call *call, void *ud) { (void)ks, (void)ud; return unique_kernel(call, false); }
ct_status ct_kernel_unique_consecutive(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return unique_kernel(call, true);
}
