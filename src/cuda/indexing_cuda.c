/* The host half of the CUDA indexing ops (and sort / topk). The shape/dtype rules and output allocation
 * are the structured kernels' (src/meta/shape.c, indexing.c, advindex.c, pad.c, which
 * call the stubs here once the output lives on a GPU); this file checks devices,
 * validates the indices on the GPU and launches indexing.cu. Also embedding and its
 * backward (their shape rules are in src/meta/nn_fused.c).
 *
 * Note [GPU index checks]
 * An out-of-range index is an error, as on the CPU, with the same message naming the
 * first bad index. The indices are scanned on the GPU before anything is written (one
 * small kernel and a read of the result, which waits for the stream), so a failed call
 * leaves its in-place target untouched. PyTorch instead traps inside the kernel with a
 * device assert, which poisons the CUDA context; ctorch keeps going. */
#include <string.h>

#include "core/determinism.h"
#include "core/factory.h"
#include "api/indexing_generic.h"
#include "meta/indexing.h"
#include "meta/kernels.h"
#include "meta/stubs.h"
#include "ctorch.h"
#include "core/view.h"
#include "cuda/cuda_ops.h"
#include "meta/nn_fused.h"

_Static_assert((int)CT_CUDA_SCATTER_SUM == CT_SCATTER_SUM && (int)CT_CUDA_SCATTER_PROD == CT_SCATTER_PROD &&
                   (int)CT_CUDA_SCATTER_MEAN == CT_SCATTER_MEAN && (int)CT_CUDA_SCATTER_AMAX == CT_SCATTER_AMAX &&
                   (int)CT_CUDA_SCATTER_AMIN == CT_SCATTER_AMIN,
               "scatter_reduce's codes (meta/indexing.h) are the CUDA kernels'");

static ct_status same_device(const char *op, const ct_tensor *a, const ct_tensor *b) {
    if (!a || !b || ct_device_equal(a->device, b->device))
        return CT_OK;
    char x[32], y[32];
    return ct_error(CT_ERROR_DEVICE, op, "Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                    ct_device_str(a->device, x, sizeof x), ct_device_str(b->device, y, sizeof y));
}

/* Scans a contiguous int32/int64 index on the GPU (Note [GPU index checks]): *bad_k is
 * the first element outside [-size, size) ([0, size) without negatives), or -1, and
 * *bad_v its value. */
static ct_status find_bad_index(const char *op, const ct_tensor *ic, int64_t size, bool negatives, int64_t *bad_k,
                                int64_t *bad_v) {
    int64_t n = ic->numel;
    *bad_k = -1, *bad_v = 0;
    if (n == 0)
        return CT_OK;
    ct_device dev = ic->device;
    ct_scope_begin();
    int64_t one = 1;
    ct_tensor *first = ct_full_impl(&one, 1, ct_scalar_int(-1), CT_DTYPE_INT64, dev);
    ct_status st = first ? ct_cuda_check_indices(ct_tensor_ptr(ic), ic->dtype == CT_DTYPE_INT64, n, size, negatives,
                                                 (uint64_t *)ct_tensor_ptr(first), dev.index, op)
                         : ct_last_status();
    int64_t k = -1;
    if (st == CT_OK)
        st = ct_cuda_read_flag(first, &k, op);
    if (st == CT_OK && k >= 0 && k < n) {
        int64_t v = 0;
        if (ic->dtype == CT_DTYPE_INT64) {
            st = ct_cuda_read_element(ic, k, &v);
        } else {
            int32_t v32 = 0;
            st = ct_cuda_read_element(ic, k, &v32);
            v = v32;
        }
        *bad_k = k, *bad_v = v;
    }
    ct_scope_end();
    return st;
}

/* Validates a contiguous index against [0, size), with the CPU kernels' messages
 * (the CPU kernels' index_at): dim >= 0 names the dim (gather, scatter_add), -1 gives
 * index_select/index_add's, -2 embedding's. */
static ct_status check_indices(const char *op, const ct_tensor *ic, int64_t size, int dim) {
    int64_t k, v;
    ct_status st = find_bad_index(op, ic, size, false, &k, &v);
    if (st || k < 0)
        return st;
    if (dim == -2)
        return ct_error(CT_ERROR_INDEX, op, "index out of range in self");
    if (dim == -1)
        return ct_error(CT_ERROR_INDEX, op, "index out of range in self (index %lld, size %lld)", (long long)v,
                        (long long)size);
    return ct_error(CT_ERROR_INDEX, op, "index %lld is out of bounds for dimension %d with size %lld", (long long)v,
                    dim, (long long)size);
}

/* The same with the message of src/cpu/indexing.c (prefix, then the dim). */
static ct_status check_indices_dim(const char *op, const char *prefix, const ct_tensor *ic, int64_t size,
                                   bool negatives, int d) {
    int64_t k, v;
    ct_status st = find_bad_index(op, ic, size, negatives, &k, &v);
    if (st || k < 0)
        return st;
    return ct_error(CT_ERROR_INDEX, op, "%sindex %lld is out of bounds for dimension %d with size %lld", prefix,
                    (long long)v, d, (long long)size);
}

static int64_t prod(const int64_t *s, int a, int b) {
    int64_t p = 1;
    for (int i = a; i < b; i++)
        p *= s[i];
    return p;
}

ct_status ct_cuda_index_select(ct_tensor *out, const ct_tensor *t, const ct_tensor *index, int d) {
    const char *op = "index_select";
    ct_status st = same_device(op, t, index);
    if (st || out->numel == 0)
        return st;
    ct_scope_begin();
    const ct_tensor *c = ct_contiguous(t), *ic = ct_contiguous(index);
    int64_t size = t->ndim ? t->shape[d] : 1;
    st = c && ic ? check_indices(op, ic, size, -1) : ct_last_status();
    if (st == CT_OK) {
        int64_t outer = t->ndim ? prod(t->shape, 0, d) : 1, inner = t->ndim ? prod(t->shape, d + 1, t->ndim) : 1;
        st = ct_cuda_index_select_run(ct_tensor_ptr(out), ct_tensor_ptr(c), ct_dtype_size(t->dtype), ct_tensor_ptr(ic),
                                      ic->dtype == CT_DTYPE_INT64, outer, index->numel, inner, size, out->device.index,
                                      op);
    }
    ct_scope_end();
    return st;
}

static void index_desc(ct_cuda_index_desc *g, const ct_tensor *index, const ct_tensor *t, const ct_tensor *src, int d) {
    memset(g, 0, sizeof *g);
    g->n = index->numel;
    g->ind = index->ndim;
    for (int i = 0; i < index->ndim; i++)
        g->ishape[i] = index->shape[i];
    g->tnd = t->ndim;
    for (int i = 0; i < t->ndim; i++)
        g->tstr[i] = t->strides[i];
    if (src) {
        g->snd = src->ndim;
        for (int i = 0; i < src->ndim; i++)
            g->sstr[i] = src->strides[i];
    }
    g->dim = d;
    g->size = t->ndim ? t->shape[d] : 1;
}

ct_status ct_cuda_gather(ct_tensor *out, const ct_tensor *t, const ct_tensor *index, int d) {
    const char *op = "gather";
    ct_status st = same_device(op, t, index);
    if (st || out->numel == 0)
        return st;
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous(index);
    ct_cuda_index_desc g;
    if (ic)
        index_desc(&g, ic, t, NULL, d);
    st = ic ? check_indices(op, ic, g.size, d) : ct_last_status();
    if (st == CT_OK)
        st = ct_cuda_gather_run(ct_tensor_ptr(out), ct_tensor_ptr(t), ct_dtype_size(t->dtype), ct_tensor_ptr(ic),
                                ic->dtype == CT_DTYPE_INT64, &g, out->device.index, op);
    ct_scope_end();
    return st;
}

ct_status ct_cuda_scatter_add(ct_tensor *out, const ct_tensor *src, const ct_tensor *index, int d) {
    const char *op = "scatter_add";
    ct_status st = same_device(op, out, index);
    if (st == CT_OK)
        st = same_device(op, out, src);
    if (st || index->numel == 0)
        return st;
    /* Note [Deterministic algorithms]: floating sums in atomic order (integers are exact) */
    if (ct_dtype_is_floating(out->dtype) && (st = ct_alert_not_deterministic("scatter_add_cuda_kernel")) != CT_OK)
        return st;
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous(index);
    ct_cuda_index_desc g;
    if (ic)
        index_desc(&g, ic, out, src, d);
    st = ic ? check_indices(op, ic, g.size, d) : ct_last_status();
    if (st == CT_OK)
        st = ct_cuda_scatter_add_run(ct_tensor_ptr(out), ct_tensor_ptr(src), out->dtype, ct_tensor_ptr(ic),
                                     ic->dtype == CT_DTYPE_INT64, &g, out->device.index, op);
    ct_scope_end();
    return st;
}

ct_status ct_cuda_index_add(ct_tensor *out, const ct_tensor *src, const ct_tensor *index, int d, double alpha) {
    const char *op = "index_add";
    ct_status st = same_device(op, out, index);
    if (st == CT_OK)
        st = same_device(op, out, src);
    if (st || index->numel == 0 || out->numel == 0)
        return st;
    if (ct_dtype_is_floating(out->dtype) && (st = ct_alert_not_deterministic("index_add_cuda_")) != CT_OK)
        return st;
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous(index), *sc = ct_contiguous(src);
    ct_tensor *oc = ct_tensor_is_contiguous(out) ? out : ct_clone(out);
    int64_t size = out->ndim ? out->shape[d] : 1;
    st = ic && sc && oc ? check_indices(op, ic, size, -1) : ct_last_status();
    if (st == CT_OK) {
        int64_t outer = out->ndim ? prod(out->shape, 0, d) : 1;
        int64_t inner = out->ndim ? prod(out->shape, d + 1, out->ndim) : 1;
        st = ct_cuda_index_add_run(ct_tensor_ptr(oc), ct_tensor_ptr(sc), out->dtype, ct_tensor_ptr(ic),
                                   ic->dtype == CT_DTYPE_INT64, outer, index->numel, inner, size, alpha, INT64_MIN,
                                   out->device.index, op);
    }
    if (st == CT_OK && oc != out && !ct_copy_(out, oc))
        st = ct_last_status();
    ct_scope_end();
    return st;
}

ct_status ct_cuda_masked_fill(ct_tensor *out, const ct_tensor *mask, const int64_t *mask_strides, const void *value) {
    const char *op = "masked_fill";
    ct_status st = same_device(op, out, mask);
    if (st || out->numel == 0)
        return st;
    if (!ct_cuda_use_device(op, out->device.index))
        return ct_last_status();
    size_t esz = ct_dtype_size(out->dtype);
    int64_t strides[2][CT_MAX_DIMS];
    for (int i = 0; i < out->ndim; i++) {
        strides[0][i] = out->strides[i] * (int64_t)esz;
        strides[1][i] = mask_strides[i]; /* bool: one byte per element */
    }
    char *data[2] = {ct_tensor_ptr(out), ct_tensor_ptr(mask)};
    ct_cuda_iter_desc d;
    ct_cuda_desc_build(&d, 2, out->ndim, out->shape, data, strides);
    return ct_cuda_masked_fill_run(&d, value, esz, out->device.index, op);
}

ct_status ct_cuda_sort(ct_tensor *vals, ct_tensor *idx, const ct_tensor *t, int d, int64_t k, bool descending) {
    const char *op = "sort";
    if (vals->numel == 0)
        return CT_OK;
    int64_t size = t->ndim ? t->shape[d] : 1, outer = t->ndim ? prod(t->shape, 0, d) : 1;
    int64_t inner = t->ndim ? prod(t->shape, d + 1, t->ndim) : 1;
    if (!ct_cuda_use_device(op, t->device.index))
        return ct_last_status();
    ct_scope_begin();
    /* rows contiguous: the sorted dim last, the others in order */
    const ct_tensor *c = ct_contiguous(t->ndim ? ct_movedim(t, d, t->ndim - 1) : t);
    int64_t bytes = (int64_t)ct_cuda_sort_scratch(outer * inner, size);
    ct_tensor *scratch = ct_empty_impl(&bytes, 1, CT_DTYPE_UINT8, t->device);
    ct_status st = c && scratch ? ct_cuda_sort_run(ct_tensor_ptr(c), t->dtype, outer, inner, size, k, descending,
                                                   ct_tensor_ptr(vals), (int64_t *)ct_tensor_ptr(idx),
                                                   ct_tensor_ptr(scratch), t->device.index)
                                : ct_last_status();
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ embedding */

static ct_status embedding_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "embedding";
    const ct_tensor *w0 = call->in[0], *idx0 = call->in[1];
    ct_status st = ct_embedding_check(w0, idx0);
    if (st == CT_OK)
        st = same_device(op, w0, idx0);
    if (st)
        return st;
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, idx0->shape, sizeof(int64_t) * (size_t)idx0->ndim);
    int64_t num = w0->shape[0], dim = w0->shape[1];
    shape[idx0->ndim] = dim;
    ct_scope_begin();
    ct_tensor *y = ct_empty_impl(shape, idx0->ndim + 1, w0->dtype, w0->device);
    const ct_tensor *w = ct_contiguous(w0), *idx = ct_contiguous(idx0);
    st = y && w && idx ? check_indices(op, idx, num, -2) : ct_last_status();
    if (st == CT_OK && y->numel > 0)
        st = ct_cuda_index_select_run(ct_tensor_ptr(y), ct_tensor_ptr(w), ct_dtype_size(w0->dtype), ct_tensor_ptr(idx),
                                      idx->dtype == CT_DTYPE_INT64, 1, idx0->numel, dim, num, y->device.index, op);
    if (st == CT_OK)
        st = ct_call_set_output(call, 0, y); /* the call takes its own reference */
    ct_scope_end();
    return st;
}

/* The gradient of the weight: rows of grad_output added at their indices (in float32
 * for float16/bfloat16/float32, float64 for float64), padding_idx rows left out; the
 * result in grad_output's dtype. The indices are sorted with their positions, so each
 * row's sum runs in position order, the CPU's: deterministic and equal to the CPU's
 * (Note [Deterministic embedding backward] in indexing.cu). */
static ct_status embedding_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "embedding_backward";
    const ct_tensor *gy0 = call->in[0], *idx0 = call->in[1];
    int64_t num = call->ints[0], pad = call->ints[1];
    ct_status bad_args = ct_embedding_backward_check(gy0, idx0, num);
    if (bad_args)
        return bad_args;
    ct_status st = same_device(op, gy0, idx0);
    if (st)
        return st;
    if (pad != CT_NO_PADDING_IDX && pad < 0)
        pad += num;
    int64_t dim = gy0->shape[gy0->ndim - 1];
    ct_dtype wd = gy0->dtype == CT_DTYPE_FLOAT64 ? CT_DTYPE_FLOAT64 : CT_DTYPE_FLOAT32;
    ct_scope_begin();
    ct_tensor *gy = ct_contiguous(ct_to_dtype(gy0, wd)), *idx = ct_contiguous(idx0);
    int64_t gshape[2] = {num, dim};
    ct_tensor *gw = ct_zeros_impl(gshape, 2, wd, gy0->device);
    st = gy && idx && gw ? check_indices(op, idx, num, -2) : ct_last_status();
    /* idx's values are rows: padding_idx (when in range) is skipped */
    int64_t skip = pad == CT_NO_PADDING_IDX || pad < 0 || pad >= num ? INT64_MIN : pad;
    int64_t n = idx0->numel;
    if (st == CT_OK && dim > 0 && n > 0 && num > INT64_MAX / n) /* keys would overflow: atomics, in any order */
        st = ct_alert_not_deterministic("embedding_backward_cuda_kernel");
    if (st == CT_OK && dim > 0 && n > 0 && num > INT64_MAX / n)
        st = ct_cuda_index_add_run(ct_tensor_ptr(gw), ct_tensor_ptr(gy), wd, ct_tensor_ptr(idx),
                                   idx->dtype == CT_DTYPE_INT64, 1, n, dim, num, 1.0, skip, gy0->device.index, op);
    else if (st == CT_OK && dim > 0 && n > 0) {
        ct_tensor *keys = ct_empty_impl(&n, 1, CT_DTYPE_INT64, gy0->device);
        ct_tensor *sorted = ct_empty_impl(&n, 1, CT_DTYPE_INT64, gy0->device);
        ct_tensor *perm = ct_empty_impl(&n, 1, CT_DTYPE_INT64, gy0->device);
        st = keys && sorted && perm ? ct_cuda_embedding_keys(ct_tensor_ptr(idx), idx->dtype == CT_DTYPE_INT64, n,
                                                             (int64_t *)ct_tensor_ptr(keys), gy0->device.index)
                                    : ct_last_status();
        if (st == CT_OK)
            st = ct_cuda_sort(sorted, perm, keys, 0, n, false);
        if (st == CT_OK)
            st = ct_cuda_embedding_bwd_sorted(wd, (const int64_t *)ct_tensor_ptr(sorted), ct_tensor_ptr(gy),
                                              ct_tensor_ptr(gw), n, dim, skip, gy0->device.index);
    }
    ct_tensor *res = st == CT_OK ? ct_to_dtype(gw, gy0->dtype) : NULL;
    if (st == CT_OK && !res)
        st = ct_last_status();
    if (st == CT_OK)
        st = ct_call_set_output(call, 0, res);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ scatter, index_copy, index_fill */

/* A zeroed device buffer of n uint64 (the winners and counts of indexing.cu). */
static uint64_t *zeroed_u64(int64_t n, ct_device dev) {
    ct_tensor *z = ct_zeros_impl(&n, 1, CT_DTYPE_INT64, dev);
    return z ? (uint64_t *)ct_tensor_ptr(z) : NULL;
}

ct_status ct_cuda_scatter(ct_tensor *w, const ct_tensor *index, const ct_tensor *src, const void *value, int d,
                          int reduce, bool include_self, const char *op) {
    if (index->numel == 0)
        return CT_OK;
    if (!ct_cuda_use_device(op, w->device.index))
        return ct_last_status();
    ct_device dev = w->device;
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous(index);
    ct_cuda_index_desc g;
    ct_status st = ic ? CT_OK : ct_last_status();
    if (st == CT_OK) {
        index_desc(&g, ic, w, src, d);
        st = check_indices_dim(op, "", ic, g.size, false, d);
    }
    uint64_t val = 0;
    if (!src)
        memcpy(&val, value, ct_dtype_size(w->dtype));
    const int64_t *ix = st == CT_OK ? (const int64_t *)ct_tensor_ptr(ic) : NULL;
    if (st == CT_OK && reduce < 0) {
        /* Note [GPU scatter order]: repeated targets keep the last write (the value form
         * writes one value everywhere, so needs no order) */
        uint64_t *winner = src ? zeroed_u64(w->numel, dev) : NULL;
        if (src && !winner)
            st = ct_last_status();
        if (st == CT_OK && winner)
            st = ct_cuda_scatter_claim(ix, &g, winner, dev.index, op);
        if (st == CT_OK)
            st = ct_cuda_scatter_run(ct_tensor_ptr(w), src ? ct_tensor_ptr(src) : NULL, val, w->dtype, ix, &g, -1,
                                     winner, NULL, dev.index, op);
    } else if (st == CT_OK && ct_dtype_is_floating(w->dtype) && reduce != CT_CUDA_SCATTER_AMAX &&
               reduce != CT_CUDA_SCATTER_AMIN &&
               (st = ct_alert_not_deterministic("scatter_reduce_cuda_kernel")) != CT_OK) {
        /* Note [Deterministic algorithms]: sums, products and means combine atomically */
    } else if (st == CT_OK) {
        uint64_t *count = reduce == CT_CUDA_SCATTER_MEAN ? zeroed_u64(w->numel, dev) : NULL;
        if (reduce == CT_CUDA_SCATTER_MEAN && !count)
            st = ct_last_status();
        if (st == CT_OK && !include_self)
            st = ct_cuda_scatter_init(ct_tensor_ptr(w), w->dtype, ix, &g, reduce, dev.index, op);
        if (st == CT_OK)
            st = ct_cuda_scatter_run(ct_tensor_ptr(w), ct_tensor_ptr(src), 0, w->dtype, ix, &g, reduce, NULL, count,
                                     dev.index, op);
        if (st == CT_OK && count)
            st = ct_cuda_scatter_mean_finish(ct_tensor_ptr(w), w->dtype, count, w->numel, include_self, dev.index, op);
    }
    ct_scope_end();
    return st;
}

ct_status ct_cuda_index_copy(ct_tensor *w, const ct_tensor *index, const ct_tensor *src, int d) {
    const char *op = "index_copy";
    int64_t nidx = index->numel;
    if (nidx == 0) /* (an empty target still has its indices checked, as on the CPU) */
        return CT_OK;
    if (!ct_cuda_use_device(op, w->device.index))
        return ct_last_status();
    ct_device dev = w->device;
    int64_t size = w->ndim ? w->shape[d] : 1;
    int64_t outer = w->ndim ? prod(w->shape, 0, d) : 1, inner = w->ndim ? prod(w->shape, d + 1, w->ndim) : 1;
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous(index), *sc = ct_contiguous(src);
    ct_status st = ic && sc ? check_indices_dim(op, "index_copy_(): ", ic, size, false, d) : ct_last_status();
    uint64_t *winner = st == CT_OK ? zeroed_u64(size, dev) : NULL;
    if (st == CT_OK && !winner)
        st = ct_last_status();
    const int64_t *ix = st == CT_OK ? (const int64_t *)ct_tensor_ptr(ic) : NULL;
    if (st == CT_OK)
        st = ct_cuda_index_claim(ix, nidx, size, winner, dev.index, op);
    if (st == CT_OK)
        st = ct_cuda_index_copy_run(ct_tensor_ptr(w), ct_tensor_ptr(sc), ct_dtype_size(w->dtype), ix, outer, nidx,
                                    inner, size, winner, src->ndim == 0, dev.index, op);
    ct_scope_end();
    return st;
}

ct_status ct_cuda_index_fill(ct_tensor *w, const ct_tensor *index, const void *value, int d) {
    const char *op = "index_fill";
    int64_t nidx = index->numel;
    if (nidx == 0)
        return CT_OK;
    if (!ct_cuda_use_device(op, w->device.index))
        return ct_last_status();
    int64_t size = w->ndim ? w->shape[d] : 1;
    int64_t outer = w->ndim ? prod(w->shape, 0, d) : 1, inner = w->ndim ? prod(w->shape, d + 1, w->ndim) : 1;
    uint64_t val = 0;
    memcpy(&val, value, ct_dtype_size(w->dtype));
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous(index);
    ct_status st = ic ? check_indices_dim(op, "", ic, size, true, d) : ct_last_status();
    if (st == CT_OK)
        st = ct_cuda_index_fill_run(ct_tensor_ptr(w), ct_dtype_size(w->dtype), val, (const int64_t *)ct_tensor_ptr(ic),
                                    outer, nidx, inner, size, w->device.index, op);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ index, index_put */

/* The plan of src/meta/advindex.c as indexing.cu takes it; t's strides as given (the
 * source of index, the contiguous work tensor of index_put). */
static void advindex_desc(ct_cuda_advindex_desc *a, const ct_tensor *t, const int64_t *tstr,
                          const ct_tensor *const *idx, const int64_t (*istr)[CT_MAX_DIMS], const int64_t *oshape,
                          int ond, int bnd, int insert, const int *slice_dim, int nslice, const int64_t *vstr) {
    memset(a, 0, sizeof *a);
    a->ond = ond, a->bnd = bnd, a->insert = insert, a->nslice = nslice;
    a->total = 1;
    for (int i = 0; i < ond; i++) {
        a->oshape[i] = oshape[i];
        a->total *= oshape[i];
        a->vstr[i] = vstr ? vstr[i] : 0;
    }
    for (int i = 0; i < nslice; i++)
        a->slice_dim[i] = slice_dim[i];
    for (int dd = 0; dd < t->ndim; dd++) {
        a->tshape[dd] = t->shape[dd];
        a->tstr[dd] = tstr[dd];
        if (!idx[dd])
            continue;
        int j = a->nidx++;
        a->idim[j] = dd;
        a->idata[j] = (const int64_t *)ct_tensor_ptr(idx[dd]);
        for (int q = 0; q < bnd; q++)
            a->istr[j][q] = istr[dd][q];
    }
}

/* Note [GPU index checks] for advanced indexing: the CPU walks the result in order and
 * stops at the first bad position, numbering the dim among the indexed ones; the first
 * such result element has the smallest broadcast position b, so the GPU looks for the
 * smallest (b, j). Nothing is checked when the result is empty, as on the CPU. */
static ct_status advindex_check(const char *op, const ct_cuda_advindex_desc *a, const ct_tensor *const *idx,
                                ct_device dev) {
    if (a->total == 0 || a->nidx == 0)
        return CT_OK;
    ct_scope_begin();
    int64_t one = 1, k = -1;
    ct_tensor *first = ct_full_impl(&one, 1, ct_scalar_int(-1), CT_DTYPE_INT64, dev);
    ct_status st = first ? ct_cuda_advindex_check(a, (uint64_t *)ct_tensor_ptr(first), dev.index, op) : ct_last_status();
    if (st == CT_OK)
        st = ct_cuda_read_flag(first, &k, op);
    if (st == CT_OK && k >= 0) {
        int64_t b = k / a->nidx, j = k % a->nidx, off = 0, r = b, v = 0;
        for (int q = a->bnd - 1; q >= 0; q--) {
            int64_t sz = a->oshape[a->insert + q];
            off += (r % sz) * a->istr[j][q];
            r /= sz;
        }
        const ct_tensor *ix = idx[a->idim[j]];
        st = ct_cuda_read_element(ix, off, &v);
        if (st == CT_OK)
            st = ct_error(CT_ERROR_INDEX, op, "index %lld is out of bounds for dimension %d with size %lld",
                          (long long)v, (int)j, (long long)a->tshape[a->idim[j]]);
    }
    ct_scope_end();
    return st;
}

ct_status ct_cuda_index_get(ct_tensor *out, const ct_tensor *t, const ct_tensor *const *idx,
                            const int64_t (*istr)[CT_MAX_DIMS], int bnd, int insert, const int *slice_dim,
                            int nslice) {
    const char *op = "index";
    if (out->numel == 0)
        return CT_OK;
    if (!ct_cuda_use_device(op, out->device.index))
        return ct_last_status();
    ct_cuda_advindex_desc a;
    advindex_desc(&a, t, t->strides, idx, istr, out->shape, out->ndim, bnd, insert, slice_dim, nslice, NULL);
    ct_status st = advindex_check(op, &a, idx, out->device);
    if (st == CT_OK)
        st = ct_cuda_advindex_get(ct_tensor_ptr(out), ct_tensor_ptr(t), ct_dtype_size(t->dtype), &a, out->device.index,
                                  op);
    return st;
}

ct_status ct_cuda_index_put(ct_tensor *w, const ct_tensor *values, const int64_t *vstr, const ct_tensor *const *idx,
                            const int64_t (*istr)[CT_MAX_DIMS], const int64_t *oshape, int ond, int bnd, int insert,
                            const int *slice_dim, int nslice, bool accumulate) {
    const char *op = "index_put";
    if (!ct_cuda_use_device(op, w->device.index))
        return ct_last_status();
    ct_cuda_advindex_desc a;
    advindex_desc(&a, w, w->strides, idx, istr, oshape, ond, bnd, insert, slice_dim, nslice, vstr);
    if (a.total == 0)
        return CT_OK;
    ct_status st = advindex_check(op, &a, idx, w->device);
    if (st == CT_OK && accumulate && ct_dtype_is_floating(w->dtype))
        st = ct_alert_not_deterministic("index_put_ with accumulate=True");
    if (st)
        return st;
    ct_scope_begin();
    /* Note [GPU scatter order]: without accumulate the last write wins, as on the CPU */
    uint64_t *winner = accumulate ? NULL : zeroed_u64(w->numel, w->device);
    if (!accumulate && !winner)
        st = ct_last_status();
    if (st == CT_OK && winner)
        st = ct_cuda_advindex_claim(&a, winner, w->device.index, op);
    if (st == CT_OK)
        st = ct_cuda_advindex_put(ct_tensor_ptr(w), ct_tensor_ptr(values), w->dtype, &a, accumulate, winner,
                                  w->device.index, op);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ nonzero, masked_select */

/* Counts the nonzero elements of the tested tensor (d over its shape and strides) into
 * *count, leaving their positions in *scratch (a device buffer of the scope). */
static ct_status select_count(const char *op, const ct_cuda_select_desc *d, const ct_tensor *tested, ct_dtype dt,
                              ct_tensor **scratch, int64_t *count) {
    int64_t bytes = (int64_t)ct_cuda_select_scratch(d->n);
    *scratch = ct_empty_impl(&bytes, 1, CT_DTYPE_UINT8, tested->device);
    if (!*scratch)
        return ct_last_status();
    return ct_cuda_select_count(d, ct_tensor_ptr(tested), dt, ct_tensor_ptr(*scratch), count, tested->device.index, op);
}

ct_status ct_cuda_nonzero(ct_call *call, const ct_tensor *t) {
    const char *op = "nonzero";
    if (!ct_cuda_use_device(op, t->device.index))
        return ct_last_status();
    ct_cuda_select_desc d;
    memset(&d, 0, sizeof d);
    d.nd = t->ndim;
    d.n = t->numel;
    for (int i = 0; i < t->ndim; i++) {
        d.shape[i] = t->shape[i];
        d.tstr[i] = t->strides[i];
    }
    ct_scope_begin();
    ct_tensor *scratch = NULL;
    int64_t count = 0;
    ct_status st = select_count(op, &d, t, t->dtype, &scratch, &count);
    int64_t shape[2] = {count, t->ndim};
    ct_tensor *out = st == CT_OK ? ct_empty_impl(shape, 2, CT_DTYPE_INT64, t->device) : NULL;
    if (st == CT_OK && !out)
        st = ct_last_status();
    if (st == CT_OK && count > 0)
        st = ct_cuda_nonzero_fill(&d, ct_tensor_ptr(scratch), (int64_t *)ct_tensor_ptr(out), t->device.index, op);
    if (st == CT_OK)
        st = ct_call_set_output(call, 0, out);
    ct_scope_end();
    return st;
}

ct_status ct_cuda_masked_select(ct_call *call, const ct_tensor *t, const ct_tensor *mask, const int64_t *shape, int nd,
                                const int64_t *tstr, const int64_t *mstr) {
    const char *op = "masked_select";
    if (!ct_cuda_use_device(op, t->device.index))
        return ct_last_status();
    ct_cuda_select_desc d;
    memset(&d, 0, sizeof d);
    d.nd = nd;
    d.n = 1;
    for (int i = 0; i < nd; i++) {
        d.shape[i] = shape[i];
        d.tstr[i] = mstr[i];
        d.vstr[i] = tstr[i];
        d.n *= shape[i];
    }
    ct_scope_begin();
    ct_tensor *scratch = NULL;
    int64_t count = 0;
    /* bool and uint8 masks: a byte each, selected when nonzero */
    ct_status st = select_count(op, &d, mask, CT_DTYPE_UINT8, &scratch, &count);
    ct_tensor *out = st == CT_OK ? ct_empty_impl(&count, 1, t->dtype, t->device) : NULL;
    if (st == CT_OK && !out)
        st = ct_last_status();
    if (st == CT_OK && count > 0)
        st = ct_cuda_masked_select_fill(&d, ct_tensor_ptr(scratch), ct_tensor_ptr(t), ct_dtype_size(t->dtype),
                                        ct_tensor_ptr(out), t->device.index, op);
    if (st == CT_OK)
        st = ct_call_set_output(call, 0, out);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ one_hot */

/* The CPU kernel (src/cpu/nn_fused.c) reads the indices on the host; here the checks
 * (same order and messages) use the GPU's min and max. */
static ct_status one_hot_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "one_hot";
    const ct_tensor *t0 = call->in[0];
    int64_t nc = call->ints[0];
    ct_status st = ct_one_hot_check(t0, nc);
    if (st)
        return st;
    if (!ct_cuda_use_device(op, t0->device.index))
        return ct_last_status();
    ct_scope_begin();
    const ct_tensor *t = ct_contiguous(t0);
    st = t ? CT_OK : ct_last_status();
    int64_t mn = 0, mx = -1;
    if (st == CT_OK && t0->numel > 0) {
        ct_tensor *lo = ct_amin(t, NULL, 0, false), *hi = ct_amax(t, NULL, 0, false);
        st = lo && hi ? ct_cuda_read_element(lo, 0, &mn) : ct_last_status();
        if (st == CT_OK)
            st = ct_cuda_read_element(hi, 0, &mx);
    }
    ct_tensor *y = st == CT_OK ? ct_one_hot_zeros(t0, mn, mx, &nc) : NULL;
    if (st == CT_OK && !y)
        st = ct_last_status();
    if (st == CT_OK)
        st = ct_cuda_one_hot_run((int64_t *)ct_tensor_ptr(y), (const int64_t *)ct_tensor_ptr(t), t0->numel, nc,
                                 t0->device.index, op);
    if (st == CT_OK)
        st = ct_call_set_output(call, 0, y);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ registration */

/* The structured kernels of src/meta serve CUDA after this check: every tensor of
 * the call on one CUDA device (a CPU operand would hand its host pointer to a GPU
 * kernel, or a device pointer to the CPU loops). */
typedef struct shared_kernel {
    ct_kernel_fn fn;
} shared_kernel;

static ct_status on_one_device(ct_keyset ks, ct_call *call, void *ud) {
    const shared_kernel *k = ud;
    const char *op = ct_op_name(call->op);
    const ct_tensor *first = NULL;
    ct_status st = CT_OK;
    for (int i = 0; i < call->nin && st == CT_OK; i++)
        if (call->in[i]) {
            st = same_device(op, first ? first : call->in[i], call->in[i]);
            first = first ? first : call->in[i];
        }
    for (int i = 0; i < call->nlist && st == CT_OK; i++)
        if (call->list[i]) {
            st = same_device(op, first ? first : call->list[i], call->list[i]);
            first = first ? first : call->list[i];
        }
    for (int i = 0; i < call->nout && st == CT_OK; i++)
        if (call->out[i] && first)
            st = same_device(op, first, call->out[i]);
    if (st)
        return st;
    return k->fn(ks, call, NULL);
}

static const shared_kernel k_cat = {ct_kernel_cat}, k_index_select = {ct_kernel_index_select}, k_gather = {ct_kernel_gather},
                           k_scatter_add = {ct_kernel_scatter_add}, k_index_add = {ct_kernel_index_add},
                           k_masked_fill = {ct_kernel_masked_fill}, k_embedding = {embedding_kernel},
                           k_embedding_backward = {embedding_backward_kernel}, k_sort = {ct_kernel_sort},
                           k_topk = {ct_kernel_topk}, k_flip = {ct_kernel_flip}, k_tril = {ct_kernel_tril},
                           k_triu = {ct_kernel_triu}, k_pad = {ct_kernel_pad},
                           k_pad_backward = {ct_kernel_pad_backward}, k_upsample = {ct_kernel_upsample},
                           k_upsample_backward = {ct_kernel_upsample_backward}, k_nonzero = {ct_kernel_nonzero},
                           k_masked_select = {ct_kernel_masked_select}, k_scatter = {ct_kernel_scatter},
                           k_scatter_reduce = {ct_kernel_scatter_reduce}, k_index_copy = {ct_kernel_index_copy},
                           k_index_fill = {ct_kernel_index_fill}, k_index = {ct_kernel_index},
                           k_index_put = {ct_kernel_index_put}, k_one_hot = {one_hot_kernel}, k_take = {ct_kernel_take},
                           k_masked_scatter = {ct_kernel_masked_scatter}, k_kthvalue = {ct_kernel_kthvalue},
                           k_unique = {ct_kernel_unique}, k_unique_consecutive = {ct_kernel_unique_consecutive};

void ct_cuda_register_indexing(void) {
    /* the stubs of the structured kernels (src/meta/stubs.def) */
    ct_stub_flip[CT_DEVICE_CUDA] = ct_cuda_flip;
    ct_stub_tri[CT_DEVICE_CUDA] = ct_cuda_tri;
    ct_stub_index_select[CT_DEVICE_CUDA] = ct_cuda_index_select;
    ct_stub_gather[CT_DEVICE_CUDA] = ct_cuda_gather;
    ct_stub_scatter_add[CT_DEVICE_CUDA] = ct_cuda_scatter_add;
    ct_stub_index_add[CT_DEVICE_CUDA] = ct_cuda_index_add;
    ct_stub_masked_fill[CT_DEVICE_CUDA] = ct_cuda_masked_fill;
    ct_stub_nonzero[CT_DEVICE_CUDA] = ct_cuda_nonzero;
    ct_stub_sort[CT_DEVICE_CUDA] = ct_cuda_sort;
    ct_stub_pad[CT_DEVICE_CUDA] = ct_cuda_pad;
    ct_stub_index_get[CT_DEVICE_CUDA] = ct_cuda_index_get;
    ct_stub_index_put[CT_DEVICE_CUDA] = ct_cuda_index_put;
    ct_stub_scatter[CT_DEVICE_CUDA] = ct_cuda_scatter;
    ct_stub_index_copy[CT_DEVICE_CUDA] = ct_cuda_index_copy;
    ct_stub_index_fill[CT_DEVICE_CUDA] = ct_cuda_index_fill;
    ct_stub_masked_select[CT_DEVICE_CUDA] = ct_cuda_masked_select;
    /* composed of the ops above (Note [Generic indexing] in src/api/indexing_generic.c) */
    ct_stub_take[CT_DEVICE_CUDA] = ct_generic_take;
    ct_stub_masked_scatter[CT_DEVICE_CUDA] = ct_generic_masked_scatter;
    ct_stub_kthvalue[CT_DEVICE_CUDA] = ct_generic_kthvalue;
    ct_stub_unique[CT_DEVICE_CUDA] = ct_generic_unique;
    ct_stub_pad_backward[CT_DEVICE_CUDA] = ct_generic_pad_backward;
    ct_stub_upsample[CT_DEVICE_CUDA] = ct_generic_upsample;
    ct_stub_upsample_backward[CT_DEVICE_CUDA] = ct_generic_upsample_backward;
    ct_dispatch_register_default(CT_OP_cat, CT_KEY_CUDA, on_one_device, (void *)&k_cat);
    ct_dispatch_register_default(CT_OP_index_select, CT_KEY_CUDA, on_one_device, (void *)&k_index_select);
    ct_dispatch_register_default(CT_OP_gather, CT_KEY_CUDA, on_one_device, (void *)&k_gather);
    ct_dispatch_register_default(CT_OP_scatter_add, CT_KEY_CUDA, on_one_device, (void *)&k_scatter_add);
    ct_dispatch_register_default(CT_OP_index_add, CT_KEY_CUDA, on_one_device, (void *)&k_index_add);
    ct_dispatch_register_default(CT_OP_masked_fill, CT_KEY_CUDA, on_one_device, (void *)&k_masked_fill);
    ct_dispatch_register_default(CT_OP_embedding, CT_KEY_CUDA, on_one_device, (void *)&k_embedding);
    ct_dispatch_register_default(CT_OP_embedding_backward, CT_KEY_CUDA, on_one_device, (void *)&k_embedding_backward);
    ct_dispatch_register_default(CT_OP_sort, CT_KEY_CUDA, on_one_device, (void *)&k_sort);
    ct_dispatch_register_default(CT_OP_topk, CT_KEY_CUDA, on_one_device, (void *)&k_topk);
    ct_dispatch_register_default(CT_OP_flip, CT_KEY_CUDA, on_one_device, (void *)&k_flip);
    ct_dispatch_register_default(CT_OP_tril, CT_KEY_CUDA, on_one_device, (void *)&k_tril);
    ct_dispatch_register_default(CT_OP_triu, CT_KEY_CUDA, on_one_device, (void *)&k_triu);
    ct_dispatch_register_default(CT_OP_pad, CT_KEY_CUDA, on_one_device, (void *)&k_pad);
    ct_dispatch_register_default(CT_OP_pad_backward, CT_KEY_CUDA, on_one_device, (void *)&k_pad_backward);
    ct_dispatch_register_default(CT_OP_upsample, CT_KEY_CUDA, on_one_device, (void *)&k_upsample);
    ct_dispatch_register_default(CT_OP_upsample_backward, CT_KEY_CUDA, on_one_device,
                                 (void *)&k_upsample_backward);
    ct_dispatch_register_default(CT_OP_nonzero, CT_KEY_CUDA, on_one_device, (void *)&k_nonzero);
    ct_dispatch_register_default(CT_OP_masked_select, CT_KEY_CUDA, on_one_device, (void *)&k_masked_select);
    ct_dispatch_register_default(CT_OP_scatter, CT_KEY_CUDA, on_one_device, (void *)&k_scatter);
    ct_dispatch_register_default(CT_OP_scatter_reduce, CT_KEY_CUDA, on_one_device, (void *)&k_scatter_reduce);
    ct_dispatch_register_default(CT_OP_index_copy, CT_KEY_CUDA, on_one_device, (void *)&k_index_copy);
    ct_dispatch_register_default(CT_OP_index_fill, CT_KEY_CUDA, on_one_device, (void *)&k_index_fill);
    ct_dispatch_register_default(CT_OP_index, CT_KEY_CUDA, on_one_device, (void *)&k_index);
    ct_dispatch_register_default(CT_OP_index_put, CT_KEY_CUDA, on_one_device, (void *)&k_index_put);
    ct_dispatch_register_default(CT_OP_one_hot, CT_KEY_CUDA, on_one_device, (void *)&k_one_hot);
    ct_dispatch_register_default(CT_OP_take, CT_KEY_CUDA, on_one_device, (void *)&k_take);
    ct_dispatch_register_default(CT_OP_masked_scatter, CT_KEY_CUDA, on_one_device, (void *)&k_masked_scatter);
    ct_dispatch_register_default(CT_OP_kthvalue, CT_KEY_CUDA, on_one_device, (void *)&k_kthvalue);
    ct_dispatch_register_default(CT_OP_unique, CT_KEY_CUDA, on_one_device, (void *)&k_unique);
    ct_dispatch_register_default(CT_OP_unique_consecutive, CT_KEY_CUDA, on_one_device, (void *)&k_unique_consecutive);
}
