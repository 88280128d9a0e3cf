/* The CPU stubs of the indexing structured kernels of src/meta/indexing.c: scatter and
 * scatter_reduce, index_copy, index_fill, take, masked_select, masked_scatter,
 * kthvalue, unique and unique_consecutive. The update ops edit the contiguous working
 * tensor the kernel hands them (Note [Update kernels] in src/meta/indexing.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/sort_key.h"
#include "meta/indexing.h"
#include "meta/stubs.h"

/* Contiguous strides of shape (elements). */
static void contiguous_strides(const int64_t *shape, int nd, int64_t *st) {
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        st[i] = s;
        s *= shape[i] > 1 ? shape[i] : 1;
    }
}

/* Checks index value v against [0, size) (wrapping negatives first when wrap is set:
 * index_fill does, scatter and index_copy do not, as in PyTorch); IndexError naming op
 * otherwise. */
static ct_status wrap_index(const char *op, const char *prefix, bool wrap, int64_t v, int64_t size, int d,
                            int64_t *out) {
    int64_t w = v < 0 && wrap ? v + size : v;
    if (w < 0 || w >= size)
        return ct_error(CT_ERROR_INDEX, op, "%sindex %lld is out of bounds for dimension %d with size %lld", prefix,
                        (long long)v, d, (long long)size);
    *out = w;
    return CT_OK;
}

/* ------------------------------------------------------------------ element reductions */

/* *dst = *dst (r) *src in dtype d (r: CT_SCATTER_*). amax/amin propagate NaN, as
 * PyTorch's do. */
static void combine(char *dst, const char *src, ct_dtype d, int r) {
    if (ct_dtype_is_floating(d)) {
        double a = ct_load_double(dst, d), b = ct_load_double(src, d), v;
        switch (r) {
        case CT_SCATTER_PROD: v = a * b; break;
        case CT_SCATTER_AMAX: v = isnan(a) || isnan(b) ? NAN : a > b ? a : b; break;
        case CT_SCATTER_AMIN: v = isnan(a) || isnan(b) ? NAN : a < b ? a : b; break;
        default: v = a + b; break;
        }
        ct_store_double(dst, d, v);
        return;
    }
    if (d == CT_DTYPE_BOOL) {
        bool a = *(const uint8_t *)dst != 0, b = *(const uint8_t *)src != 0;
        *(uint8_t *)dst = (uint8_t)((r == CT_SCATTER_PROD || r == CT_SCATTER_AMIN) ? (a && b) : (a || b));
        return;
    }
    int64_t a = ct_load_int64(dst, d), b = ct_load_int64(src, d), v;
    bool uns = d == CT_DTYPE_UINT64;
    switch (r) {
    case CT_SCATTER_PROD: v = (int64_t)((uint64_t)a * (uint64_t)b); break;
    case CT_SCATTER_AMAX: v = (uns ? (uint64_t)a > (uint64_t)b : a > b) ? a : b; break;
    case CT_SCATTER_AMIN: v = (uns ? (uint64_t)a < (uint64_t)b : a < b) ? a : b; break;
    default: v = (int64_t)((uint64_t)a + (uint64_t)b); break;
    }
    ct_store_int64(dst, d, v);
}

/* *p /= count: true division for floating dtypes, floor division for integers (as
 * PyTorch's scatter_reduce "mean"). */
static void divide_by(char *p, ct_dtype d, int64_t count) {
    if (ct_dtype_is_floating(d)) {
        ct_store_double(p, d, ct_load_double(p, d) / (double)count);
    } else if (d == CT_DTYPE_BOOL) {
        /* a count above one leaves true / n, truncated to bool: true stays true */
    } else if (d == CT_DTYPE_UINT64) {
        ct_store_int64(p, d, (int64_t)((uint64_t)ct_load_int64(p, d) / (uint64_t)count));
    } else {
        int64_t a = ct_load_int64(p, d), q = a / count;
        if ((a % count != 0) && (a < 0))
            q--;
        ct_store_int64(p, d, q);
    }
}

/* ------------------------------------------------------------------ scatter, scatter_reduce */

static ct_status cpu_scatter(ct_tensor *w, const ct_tensor *index, const ct_tensor *src, const void *value, int d,
                             int reduce, bool include_self, const char *op) {
    const ct_tensor *t = w; /* w has self's shape and dtype */
    ct_status st = CT_OK;
    size_t esz = ct_dtype_size(t->dtype);
    int tnd = t->ndim ? t->ndim : 1;
    int64_t tshape[CT_MAX_DIMS] = {1}, wstr[CT_MAX_DIMS];
    if (t->ndim)
        memcpy(tshape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    contiguous_strides(tshape, tnd, wstr);
    int64_t size = tshape[d];
    char *dst = ct_tensor_ptr(w);
    const char *ps = src ? ct_tensor_ptr(src) : NULL;
    /* For reductions: how many values each target received, and whether it has been
     * written yet (include_self = false replaces self's value with the first one). */
    int64_t *count = NULL;
    if (reduce >= 0) {
        count = calloc((size_t)(w->numel > 0 ? w->numel : 1), sizeof *count);
        if (!count)
            return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
    }
    int64_t coord[CT_MAX_DIMS] = {0}, ishape[CT_MAX_DIMS] = {1}, istr[CT_MAX_DIMS] = {0}, sstr[CT_MAX_DIMS] = {0};
    int ind = index->ndim ? index->ndim : 1;
    if (index->ndim) {
        memcpy(ishape, index->shape, sizeof(int64_t) * (size_t)ind);
        memcpy(istr, index->strides, sizeof(int64_t) * (size_t)ind);
    }
    if (src && src->ndim)
        memcpy(sstr, src->strides, sizeof(int64_t) * (size_t)ind);
    for (int64_t k = 0; k < index->numel && st == CT_OK; k++) {
        int64_t at = 0;
        if ((st = wrap_index(op, "", false, ct_ix_load_index(index, ct_ix_offset(coord, istr, ind)), size, d, &at)))
            break;
        int64_t woff = 0;
        for (int i = 0; i < ind; i++)
            woff += (i == d ? at : coord[i]) * wstr[i];
        char *pd = dst + (size_t)woff * esz;
        const char *pv = src ? ps + ct_ix_offset(coord, sstr, ind) * (int64_t)esz : (const char *)value;
        if (reduce < 0) {
            memcpy(pd, pv, esz);
        } else {
            if (count[woff] == 0 && !include_self)
                memcpy(pd, pv, esz);
            else
                combine(pd, pv, t->dtype, reduce);
            count[woff]++;
        }
        ct_ix_next_coord(coord, ishape, ind);
    }
    if (st == CT_OK && reduce == CT_SCATTER_MEAN)
        for (int64_t k = 0; k < w->numel; k++) {
            int64_t n = count[k] + (include_self ? 1 : 0);
            if (count[k] > 0 && n > 1)
                divide_by(dst + (size_t)k * esz, t->dtype, n);
        }
    free(count);
    return st;
}

/* ------------------------------------------------------------------ index_copy, index_fill */

/* Both move whole slices along dim: self seen as (outer, size, inner) (Note [Outer x
 * dim x inner] in shape.c). */
static void outer_inner(const ct_tensor *t, int d, int64_t *outer, int64_t *size, int64_t *inner) {
    *outer = 1, *inner = 1, *size = t->ndim ? t->shape[d] : 1;
    if (t->numel == 0) { /* the other dims' product may be past int64 (shape.c's outer_inner) */
        *outer = *inner = 0;
        return;
    }
    for (int i = 0; i < t->ndim; i++) {
        if (i < d)
            *outer *= t->shape[i];
        else if (i > d)
            *inner *= t->shape[i];
    }
}

static ct_status cpu_index_copy(ct_tensor *w, const ct_tensor *index, const ct_tensor *src, int d) {
    const char *op = "index_copy";
    ct_status st = CT_OK;
    int64_t nidx = index->numel;
    int64_t outer, size, inner;
    outer_inner(w, d, &outer, &size, &inner);
    size_t esz = ct_dtype_size(w->dtype);
    ct_scope_begin();
    const ct_tensor *sc = ct_contiguous_impl(src);
    if (!sc) {
        ct_scope_end();
        return ct_last_status();
    }
    const char *ps = ct_tensor_ptr(sc);
    char *dst = ct_tensor_ptr(w);
    int64_t istride = index->ndim ? index->strides[0] : 0;
    for (int64_t i = 0; i < nidx; i++) {
        int64_t at = 0;
        if ((st = wrap_index(op, "index_copy_(): ", false, ct_ix_load_index(index, i * istride), size, d, &at)))
            break;
        for (int64_t o = 0; o < outer; o++)
            memcpy(dst + (size_t)((o * size + at) * inner) * esz, ps + (size_t)((o * nidx + i) * inner) * esz,
                   (size_t)inner * esz);
    }
    ct_scope_end();
    return st;
}

static ct_status cpu_index_fill(ct_tensor *w, const ct_tensor *index, const void *value, int d) {
    const char *op = "index_fill";
    ct_status st;
    int64_t outer, size, inner;
    outer_inner(w, d, &outer, &size, &inner);
    size_t esz = ct_dtype_size(w->dtype);
    char *dst = ct_tensor_ptr(w);
    int64_t istride = index->ndim ? index->strides[0] : 0;
    for (int64_t i = 0; i < index->numel; i++) {
        int64_t at = 0;
        if ((st = wrap_index(op, "", true, ct_ix_load_index(index, i * istride), size, d, &at)))
            return st;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < inner; j++)
                memcpy(dst + (size_t)((o * size + at) * inner + j) * esz, value, esz);
    }
    return CT_OK;
}

/* ------------------------------------------------------------------ take */

static ct_status cpu_take(ct_tensor *out, const ct_tensor *t, const ct_tensor *index) {
    const char *op = "take";
    ct_status st = CT_OK;
    ct_scope_begin();
    const ct_tensor *c = ct_contiguous_impl(t);
    if (!c) {
        ct_scope_end();
        return ct_last_status();
    }
    size_t esz = ct_dtype_size(t->dtype);
    const char *src = ct_tensor_ptr(c);
    char *dst = ct_tensor_ptr(out);
    int64_t coord[CT_MAX_DIMS] = {0};
    for (int64_t k = 0; k < index->numel; k++) {
        int64_t v = ct_ix_load_index(index, ct_ix_offset(coord, index->strides, index->ndim));
        int64_t w = v < 0 ? v + t->numel : v;
        if (w < 0 || w >= t->numel) {
            st = ct_error(CT_ERROR_INDEX, op, "out of range: tried to access index %lld on a tensor of %lld elements.",
                          (long long)v, (long long)t->numel);
            break;
        }
        memcpy(dst + (size_t)k * esz, src + (size_t)w * esz, esz);
        ct_ix_next_coord(coord, index->shape, index->ndim);
    }
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ masked_select, masked_scatter */

static ct_status cpu_masked_select(ct_call *call, const ct_tensor *t, const ct_tensor *mask, const int64_t *shape,
                                   int nd, const int64_t *ts, const int64_t *ms) {
    ct_status st;
    int64_t total = ct_shape_numel(shape, nd), count = 0, coord[CT_MAX_DIMS] = {0};
    const uint8_t *pm = (const uint8_t *)ct_tensor_ptr(mask);
    for (int64_t k = 0; k < total; k++) {
        count += pm[ct_ix_offset(coord, ms, nd)] != 0;
        ct_ix_next_coord(coord, shape, nd);
    }
    ct_tensor *out = ct_empty_impl(CT_SHAPE(count), t->dtype, t->device);
    if ((st = ct_ix_set_out(call, 0, out)) || count == 0)
        return st;
    size_t esz = ct_dtype_size(t->dtype);
    const char *pt = ct_tensor_ptr(t);
    char *po = ct_tensor_ptr(out);
    memset(coord, 0, sizeof coord);
    for (int64_t k = 0, j = 0; k < total; k++) {
        if (pm[ct_ix_offset(coord, ms, nd)])
            memcpy(po + (size_t)(j++) * esz, pt + ct_ix_offset(coord, ts, nd) * (int64_t)esz, esz);
        ct_ix_next_coord(coord, shape, nd);
    }
    return CT_OK;
}

static ct_status cpu_masked_scatter(ct_tensor *w, const ct_tensor *mask, const int64_t *ms, const ct_tensor *src) {
    const char *op = "masked_scatter";
    ct_status st = CT_OK;
    const int64_t *shape = w->shape;
    int nd = w->ndim;
    ct_scope_begin();
    const ct_tensor *sc = ct_contiguous_impl(src);
    if (!sc) {
        ct_scope_end();
        return ct_last_status();
    }
    int64_t total = ct_shape_numel(shape, nd), coord[CT_MAX_DIMS] = {0}, j = 0;
    const uint8_t *pm = (const uint8_t *)ct_tensor_ptr(mask);
    size_t esz = ct_dtype_size(w->dtype);
    const char *ps = ct_tensor_ptr(sc);
    char *dst = ct_tensor_ptr(w);
    for (int64_t k = 0; k < total; k++) {
        if (pm[ct_ix_offset(coord, ms, nd)]) {
            if (j >= src->numel) {
                st = ct_error(CT_ERROR_VALUE, op, "Number of elements of source < number of ones in mask");
                break;
            }
            memcpy(dst + (size_t)k * esz, ps + (size_t)(j++) * esz, esz);
        }
        ct_ix_next_coord(coord, shape, nd);
    }
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ kthvalue, unique */

/* Equal as values (-0.0 equals 0.0; NaN equals nothing, so each NaN stays apart). */
static bool same_key(const ct_sort_key *a, const ct_sort_key *b, bool fl) { return fl ? a->v == b->v : a->iv == b->iv; }

static ct_status cpu_kthvalue(ct_tensor *vals, ct_tensor *idx, const ct_tensor *t, int d, int64_t k) {
    const char *op = "kthvalue";
    int64_t outer, size, inner;
    outer_inner(t, d, &outer, &size, &inner);
    ct_scope_begin();
    const ct_tensor *c = ct_contiguous_impl(t);
    ct_sort_key *row = malloc(sizeof *row * (size_t)size);
    if (!c || !row) {
        free(row);
        ct_scope_end();
        return c ? ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory") : ct_last_status();
    }
    size_t esz = ct_dtype_size(t->dtype);
    bool fl = ct_dtype_is_floating(t->dtype);
    const char *src = ct_tensor_ptr(c);
    char *pv = ct_tensor_ptr(vals);
    int64_t *pi = ct_tensor_data(idx);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            for (int64_t i = 0; i < size; i++)
                ct_sort_key_load(&row[i], src + (size_t)((o * size + i) * inner + j) * esz, t->dtype, i);
            qsort(row, (size_t)size, sizeof *row, fl ? ct_sort_key_cmp_float : ct_sort_key_cmp_int);
            int64_t at = o * inner + j, pick = row[k - 1].i;
            memcpy(pv + (size_t)at * esz, src + (size_t)((o * size + pick) * inner + j) * esz, esz);
            pi[at] = pick;
        }
    free(row);
    ct_scope_end();
    return CT_OK;
}

/* Note [unique]
 * unique sorts the flattened values (stably, so equal values keep their order) and
 * keeps one of each run; unique_consecutive keeps one of each run in the original
 * order. Both always compute the inverse indices and the counts (one pass each) and
 * the wrapper hands out what the caller asked for. The output size depends on the
 * data, so META is refused. */
static ct_status cpu_unique(ct_call *call, const ct_tensor *t, bool consecutive) {
    const char *op = consecutive ? "unique_consecutive" : "unique";
    int64_t n = t->numel;
    ct_scope_begin();
    const ct_tensor *c = ct_contiguous_impl(t);
    ct_sort_key *keys = malloc(sizeof *keys * (size_t)(n > 0 ? n : 1));
    if (!c || !keys) {
        free(keys);
        ct_scope_end();
        return c ? ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory") : ct_last_status();
    }
    size_t esz = ct_dtype_size(t->dtype);
    bool fl = ct_dtype_is_floating(t->dtype);
    const char *src = ct_tensor_ptr(c);
    for (int64_t i = 0; i < n; i++)
        ct_sort_key_load(&keys[i], src + (size_t)i * esz, t->dtype, i);
    if (!consecutive)
        qsort(keys, (size_t)n, sizeof *keys, fl ? ct_sort_key_cmp_float : ct_sort_key_cmp_int);
    int64_t groups = 0;
    for (int64_t i = 0; i < n; i++)
        groups += i == 0 || !same_key(&keys[i], &keys[i - 1], fl);
    ct_tensor *vals = ct_empty_impl(CT_SHAPE(groups), t->dtype, t->device);
    ct_tensor *inv = ct_empty_impl(t->shape, t->ndim, CT_DTYPE_INT64, t->device);
    ct_tensor *counts = ct_zeros_impl(CT_SHAPE(groups), CT_DTYPE_INT64, t->device);
    ct_status st = ct_ix_set_out(call, 0, vals);
    if (st == CT_OK)
        st = ct_ix_set_out(call, 1, inv);
    if (st == CT_OK)
        st = ct_ix_set_out(call, 2, counts);
    if (st == CT_OK && n > 0) {
        char *pv = ct_tensor_ptr(vals);
        int64_t *pi = ct_tensor_data(inv), *pc = ct_tensor_data(counts), g = -1;
        for (int64_t i = 0; i < n; i++) {
            if (i == 0 || !same_key(&keys[i], &keys[i - 1], fl)) {
                g++;
                memcpy(pv + (size_t)g * esz, src + (size_t)keys[i].i * esz, esz);
            }
            pi[keys[i].i] = g;
            pc[g]++;
        }
    }
    free(keys);
    ct_scope_end();
    return st;
}

void ct_cpu_register_indexing(void) {
    ct_stub_scatter[CT_DEVICE_CPU] = cpu_scatter;
    ct_stub_index_copy[CT_DEVICE_CPU] = cpu_index_copy;
    ct_stub_index_fill[CT_DEVICE_CPU] = cpu_index_fill;
    ct_stub_take[CT_DEVICE_CPU] = cpu_take;
    ct_stub_masked_select[CT_DEVICE_CPU] = cpu_masked_select;
    ct_stub_masked_scatter[CT_DEVICE_CPU] = cpu_masked_scatter;
    ct_stub_kthvalue[CT_DEVICE_CPU] = cpu_kthvalue;
    ct_stub_unique[CT_DEVICE_CPU] = cpu_unique;
}
