/* Device-generic take, masked_scatter, kthvalue, unique and unique_consecutive.
 *
 * Note [Generic indexing]
 * These ops have loops for the CPU only (src/cpu/indexing.c). On other devices they are
 * built from ops that run there, in the way PyTorch builds unique on CUDA from a sort
 * and a pass over neighbours:
 *  - take: negative indices wrapped (index + numel), then index_select on the
 *    flattened tensor;
 *  - masked_scatter: a cumulative sum of the mask numbers the true positions, which
 *    index_select turns into source elements, and where() keeps self elsewhere;
 *  - kthvalue: a stable sort along dim, then the sorted position k - 1;
 *  - unique: a stable sort of the flattened values (unique_consecutive skips it), a
 *    mask of the first element of every run of equal values (first element, or not
 *    equal to its predecessor: every NaN is a run of its own, -0.0 and 0.0 share one,
 *    and the run keeps its first element in stable order, as the CPU does), group ids
 *    from a cumulative sum of that mask, the inverse sent back through the sort's
 *    permutation and the counts from index_add.
 * Data-dependent errors (an index out of range, a source too short) need a value on
 * the host: one scalar is read back (ct_item_int64), a single synchronisation, and only
 * when the inputs can hold such an error. The argument checks and the allocation of
 * the outputs stay in the structured kernels (src/meta/indexing.c), run once for every
 * device; the functions here are stubs (the CUDA backend installs them) and start
 * where the kernels end.
 *
 * sort refuses uint64, so uint64 values are sorted by an int64 key with the same order
 * (the bits with the top one flipped); values are always taken from the original
 * tensor through the sort's indices, never from the key. take, masked_scatter and
 * kthvalue write into the outputs the kernels allocated; unique's results are new
 * contiguous tensors that view nothing, as the CPU loop's are. */
#include "api/indexing_generic.h"

#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "meta/indexing.h"

/* An int64 tensor ordered as t when t is uint64 (sort has no uint64 kernel); t itself
 * otherwise. */
static ct_tensor *sort_key(const ct_tensor *t) {
    if (t->dtype != CT_DTYPE_UINT64)
        return (ct_tensor *)ct_alias(t);
    return ct_bitwise_xor_scalar(ct_to_dtype(t, CT_DTYPE_INT64), ct_scalar_int(INT64_MIN));
}

/* r, a contiguous tensor this file made (never an input), as a tensor of shape that
 * views nothing: same storage, no view bookkeeping (the outputs of the CPU loops are
 * plain tensors). r's numel must equal shape's. */
static ct_tensor *plain(const ct_tensor *r, const int64_t *shape, int nd) {
    if (!r)
        return NULL;
    if (!ct_tensor_is_contiguous(r) && !(r = ct_clone(r)))
        return NULL;
    return ct_tensor_make(r->storage, r->offset, shape, NULL, nd, r->dtype, r->device);
}

static ct_status read_int64(const ct_tensor *t, int64_t *v) { return t ? ct_item_int64(t, v) : ct_last_status(); }

/* Sets output i (NULL: the error already set). */
static ct_status set_out(ct_call *call, int i, ct_tensor *t) { return t ? ct_call_set_output(call, i, t) : ct_last_status(); }

/* dst = r's elements in row-major order (r: numel of dst, any shape; NULL: the error
 * already set). */
static ct_status write_into(ct_tensor *dst, const ct_tensor *r) {
    r = r ? ct_reshape(r, dst->shape, dst->ndim) : NULL;
    return r && ct_copy_(dst, r) ? CT_OK : ct_last_status();
}

/* ------------------------------------------------------------------ take */

/* The first out-of-range index (row-major order) as take's IndexError. */
static ct_status take_range_error(const ct_tensor *idx, const ct_tensor *bad, int64_t n) {
    int64_t pos = 0, v = 0;
    ct_tensor *where_bad = ct_nonzero(bad);
    ct_status st = read_int64(where_bad ? ct_select(where_bad, 0, 0) : NULL, &pos);
    if (st == CT_OK)
        st = read_int64(ct_select(idx, 0, pos), &v);
    if (st)
        return st;
    return ct_error(CT_ERROR_INDEX, "take", "out of range: tried to access index %lld on a tensor of %lld elements.",
                    (long long)v, (long long)n);
}

ct_status ct_generic_take(ct_tensor *out, const ct_tensor *t, const ct_tensor *index) {
    int64_t n = t->numel;
    ct_scope_begin();
    ct_tensor *flat = ct_reshape(t, CT_SHAPE(-1)), *idx = ct_reshape(index, CT_SHAPE(-1));
    /* n is added to the negative indices only: adding it to all could overflow */
    ct_tensor *w = ct_add(idx, ct_mul_scalar(ct_to_dtype(ct_lt_scalar(idx, ct_scalar_int(0)), CT_DTYPE_INT64),
                                             ct_scalar_int(n)));
    ct_tensor *bad = ct_logical_or(ct_lt_scalar(w, ct_scalar_int(0)), ct_ge_scalar(w, ct_scalar_int(n)));
    int64_t any = 0;
    ct_status st = read_int64(ct_any(bad, NULL, 0, false), &any);
    if (st == CT_OK && any)
        st = take_range_error(idx, bad, n);
    if (st == CT_OK)
        st = write_into(out, ct_index_select(flat, 0, w));
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ masked_scatter */

ct_status ct_generic_masked_scatter(ct_tensor *w, const ct_tensor *mask, const int64_t *mask_strides,
                                    const ct_tensor *src) {
    (void)mask_strides; /* the mask is expanded to w's shape instead */
    const int64_t *shape = w->shape;
    int nd = w->ndim;
    int64_t total = w->numel, count = 0;
    ct_scope_begin();
    ct_tensor *m = mask->dtype == CT_DTYPE_BOOL ? ct_alias(mask) : ct_ne_scalar(mask, ct_scalar_int(0));
    ct_tensor *mflat = NULL, *cs = NULL;
    m = ct_expand(m, shape, nd);
    ct_status st = m ? CT_OK : ct_last_status();
    if (st == CT_OK && total > 0) {
        mflat = ct_reshape(m, CT_SHAPE(-1));
        cs = ct_cumsum(mflat, 0, CT_DTYPE_INT64);
        st = read_int64(cs ? ct_select(cs, 0, total - 1) : NULL, &count);
    }
    if (st == CT_OK && count > src->numel)
        st = ct_error(CT_ERROR_VALUE, "masked_scatter", "Number of elements of source < number of ones in mask");
    if (st == CT_OK && count > 0) {
        /* the j-th true position takes source element j; false ones read element 0,
         * which where() then drops */
        ct_tensor *pos = ct_where_scalar_other(mflat, ct_sub_scalar(cs, ct_scalar_int(1)), ct_scalar_int(0));
        ct_tensor *taken = ct_index_select(ct_reshape(src, CT_SHAPE(-1)), 0, pos);
        ct_tensor *res = ct_where(m, taken ? ct_view(taken, shape, nd) : NULL, w);
        st = res && ct_copy_(w, res) ? CT_OK : ct_last_status();
    }
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ kthvalue */

ct_status ct_generic_kthvalue(ct_tensor *vals, ct_tensor *idx, const ct_tensor *t, int d, int64_t k) {
    ct_scope_begin();
    const ct_tensor *x = t->ndim ? t : ct_reshape(t, CT_SHAPE(1));
    ct_tensor *order = NULL, *pick = NULL;
    if (x && ct_sort(sort_key(x), d, false, &order))
        pick = ct_narrow(order, d, k - 1, 1);
    ct_status st = write_into(vals, pick ? ct_gather(x, d, pick) : NULL);
    if (st == CT_OK)
        st = write_into(idx, pick);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ unique */

ct_status ct_generic_unique(ct_call *call, const ct_tensor *t, bool consecutive) {
    int64_t n = t->numel;
    ct_scope_begin();
    ct_tensor *vals, *inv, *counts;
    if (n == 0) {
        vals = ct_empty(CT_SHAPE(0), t->dtype, t->device);
        inv = ct_empty(t->shape, t->ndim, CT_DTYPE_INT64, t->device);
        counts = ct_zeros(CT_SHAPE(0), CT_DTYPE_INT64, t->device);
    } else {
        ct_tensor *flat = ct_reshape(t, CT_SHAPE(-1)), *key = flat ? sort_key(flat) : NULL, *perm = NULL, *sorted = flat;
        if (!consecutive) {
            key = ct_sort(key, 0, false, &perm);
            sorted = perm ? ct_index_select(flat, 0, perm) : NULL;
        }
        /* first of a run: the first element, or one unlike its predecessor */
        const ct_tensor *parts[2] = {ct_ones(CT_SHAPE(1), CT_DTYPE_BOOL, t->device),
                                     key ? ct_ne(ct_narrow(key, 0, 1, n - 1), ct_narrow(key, 0, 0, n - 1)) : NULL};
        ct_tensor *first = parts[1] ? ct_cat(parts, 2, 0) : NULL;
        ct_tensor *group = first ? ct_sub_scalar(ct_cumsum(first, 0, CT_DTYPE_INT64), ct_scalar_int(1)) : NULL;
        vals = sorted && first ? ct_masked_select(sorted, first) : NULL;
        if (consecutive || !group)
            inv = group;
        else
            inv = ct_index_copy(ct_zeros(CT_SHAPE(n), CT_DTYPE_INT64, t->device), 0, perm, group);
        inv = plain(inv, t->shape, t->ndim);
        counts = vals && group ? ct_index_add(ct_zeros(CT_SHAPE(ct_tensor_numel(vals)), CT_DTYPE_INT64, t->device), 0,
                                              group, ct_ones(CT_SHAPE(n), CT_DTYPE_INT64, t->device), ct_scalar_int(1))
                               : NULL;
    }
    ct_status st = set_out(call, 0, vals);
    if (st == CT_OK)
        st = set_out(call, 1, inv);
    if (st == CT_OK)
        st = set_out(call, 2, counts);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ pad_backward */

/* Note [Generic pad_backward]
 * pad's mapping is one map per dim (Note [pad] in src/meta/pad.c), so its adjoint is one
 * index_add per padded dim: the positions of grad_output along d that land inside the
 * input (all of them, except constant padding's fill) are selected and added at the
 * input coordinates they map to. The maps are computed on the host and copied to the
 * device. */
ct_status ct_generic_pad_backward(ct_tensor *gin, const ct_tensor *g, const int64_t *lo, const int64_t *hi_crop,
                                  int mode) {
    int nd = g->ndim;
    ct_status st = CT_OK;
    ct_scope_begin();
    const ct_tensor *cur = g;
    for (int d = 0; d < nd && st == CT_OK; d++) {
        int64_t n = g->shape[d], size = gin->shape[d];
        if (lo[d] == 0 && n == size)
            continue;
        int64_t *keep = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        int64_t *map = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        int64_t nk = 0;
        for (int64_t o = 0; keep && map && o < n; o++) {
            int64_t i = o - lo[d];
            if (i < 0 || i >= size) {
                if (mode == CT_PAD_REFLECT)
                    i = i < 0 ? -i : 2 * (size - 1) - i;
                else if (mode == CT_PAD_REPLICATE)
                    i = i < 0 ? 0 : size - 1;
                else if (mode == CT_PAD_CIRCULAR) {
                    int64_t start = lo[d] < 0 ? -lo[d] : 0, w = size - start - hi_crop[d];
                    int64_t j = o - (lo[d] > 0 ? lo[d] : 0);
                    i = start + ((j % w) + w) % w;
                } else
                    continue;
            }
            keep[nk] = o;
            map[nk++] = i;
        }
        ct_tensor *next = NULL;
        if (keep && map) {
            int64_t shape[CT_MAX_DIMS];
            memcpy(shape, cur->shape, sizeof(int64_t) * (size_t)nd);
            shape[d] = size;
            ct_tensor *k = ct_to_device(ct_from_data(keep, CT_SHAPE(nk), CT_DTYPE_INT64), g->device);
            ct_tensor *m = ct_to_device(ct_from_data(map, CT_SHAPE(nk), CT_DTYPE_INT64), g->device);
            next = ct_index_add(ct_zeros(shape, nd, g->dtype, g->device), d, m, ct_index_select(cur, d, k),
                                ct_scalar_int(1));
        } else {
            ct_error(CT_ERROR_OUT_OF_MEMORY, "pad_backward", "out of memory");
        }
        free(keep);
        free(map);
        if (!next)
            st = ct_last_status();
        cur = next;
    }
    if (st == CT_OK)
        st = write_into(gin, cur);
    ct_scope_end();
    return st;
}
