/* The CPU stubs of the shape and indexing structured kernels (src/meta/shape.c):
 * plain loops over (outer, dim, inner) blocks.
 *
 * Note [Outer x dim x inner]
 * These loops work on contiguous operands seen as (outer, size along dim, inner)
 * blocks: element (o, i, j) sits at (o * size + i) * inner + j. Moving elements along
 * one dimension (flip, gather, index_select, scatter, sort) is then three nested loops
 * and a byte copy, for every dtype at once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/factory.h"
#include "core/view.h"
#include "cpu/cpu_backend.h"
#include "cpu/sort_key.h"
#include "meta/stubs.h"

static ct_status set_out(ct_call *call, int i, ct_tensor *t) { return t ? ct_call_set_output(call, i, t) : ct_last_status(); }

/* The elements before and after dim d of t, as loops over (outer, t->shape[d], inner)
 * see them; both 0 for an empty t. An empty tensor may have dims whose product is past
 * int64 (an expand of a (0, 1, 1) to (0, 2^62, 3) allocates nothing), and a loop over
 * such an outer count with an empty inner one would not end. */
static void outer_inner(const ct_tensor *t, int d, int64_t *outer, int64_t *inner) {
    *outer = *inner = t->numel > 0 ? 1 : 0;
    if (t->numel == 0)
        return;
    for (int i = 0; i < d && i < t->ndim; i++)
        *outer *= t->shape[i];
    for (int i = d + 1; i < t->ndim; i++)
        *inner *= t->shape[i];
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

/* ------------------------------------------------------------------ flip, tril/triu */

static ct_status cpu_flip(ct_tensor *out, const ct_tensor *t, const bool *flipped) {
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

static ct_status cpu_tri(ct_tensor *out, const ct_tensor *c, int64_t k, bool lower) {
    const ct_tensor *t = c;
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
    return CT_OK;
}

/* ------------------------------------------------------------------ index_select, gather */

static ct_status cpu_index_select(ct_tensor *out, const ct_tensor *t, const ct_tensor *index, int d) {
    const char *op = "index_select";
    ct_status st = CT_OK;
    int64_t nidx = index->numel;
    ct_scope_begin();
    const ct_tensor *c = ct_contiguous_impl(t), *ic = ct_contiguous_impl(index);
    if (!c || !ic) {
        ct_scope_end();
        return ct_last_status();
    }
    size_t esz = ct_dtype_size(t->dtype);
    int64_t size = t->ndim ? t->shape[d] : 1, outer, inner;
    outer_inner(t, d, &outer, &inner);
    const char *src = ct_tensor_ptr(c);
    char *dst = ct_tensor_ptr(out);
    for (int64_t i = 0; i < nidx && st == CT_OK; i++) {
        int64_t at = 0;
        if ((st = index_at(op, ic, i, size, -1, &at)))
            break;
        for (int64_t o = 0; o < outer && inner > 0; o++) /* an empty t has no data to point into */
            memcpy(dst + (size_t)((o * nidx + i) * inner) * esz, src + (size_t)((o * size + at) * inner) * esz,
                   (size_t)inner * esz);
    }
    ct_scope_end();
    return st;
}

static ct_status cpu_gather(ct_tensor *out, const ct_tensor *t, const ct_tensor *index, int d) {
    const char *op = "gather";
    ct_status st = CT_OK;
    size_t esz = ct_dtype_size(t->dtype);
    int64_t coord[CT_MAX_DIMS] = {0};
    int64_t size = t->ndim ? t->shape[d] : 1;
    const char *src = ct_tensor_ptr(t);
    char *dst = ct_tensor_ptr(out);
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous_impl(index);
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

/* ------------------------------------------------------------------ scatter_add, index_add */

/* alpha as the integer the meta kernel checked it to be (a uint64 alpha may exceed
 * INT64_MAX and wraps like uint64). */
static uint64_t int_alpha(double alpha) { return (uint64_t)ct_cpu_wrap_int(alpha); }

/* dst[k] += alpha * src[k] in dtype d (through double for floats, int64 for integers,
 * wrapping like the element type). */
static void add_element(char *dst, const char *src, ct_dtype d, double alpha) {
    if (ct_dtype_is_floating(d))
        ct_store_double(dst, d, ct_load_double(dst, d) + alpha * ct_load_double(src, d));
    else if (d == CT_DTYPE_BOOL)
        ct_store_int64(dst, d, ct_load_int64(dst, d) | (alpha != 0 && ct_load_int64(src, d)));
    else
        ct_store_int64(dst, d, (int64_t)((uint64_t)ct_load_int64(dst, d) + int_alpha(alpha) * (uint64_t)ct_load_int64(src, d)));
}

static ct_status cpu_scatter_add(ct_tensor *out, const ct_tensor *src, const ct_tensor *index, int d) {
    const char *op = "scatter_add";
    const ct_tensor *t = out;
    ct_status st = CT_OK;
    size_t esz = ct_dtype_size(t->dtype);
    int64_t coord[CT_MAX_DIMS] = {0};
    int64_t size = t->ndim ? t->shape[d] : 1;
    char *dst = ct_tensor_ptr(out);
    const char *ps = ct_tensor_ptr(src);
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous_impl(index);
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

static ct_status cpu_index_add(ct_tensor *out, const ct_tensor *src, const ct_tensor *index, int d, double alpha) {
    const char *op = "index_add";
    const ct_tensor *t = out;
    ct_status st = CT_OK;
    size_t esz = ct_dtype_size(t->dtype);
    int64_t size = t->ndim ? t->shape[d] : 1, outer, inner, nidx = index->numel;
    outer_inner(t, d, &outer, &inner);
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous_impl(index), *sc = ct_contiguous_impl(src);
    ct_tensor *oc = ct_tensor_is_contiguous(out) ? out : ct_clone_impl(out);
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
    if (st == CT_OK && oc != out && !ct_copy_impl(out, oc))
        st = ct_last_status();
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ masked_fill, nonzero */

static ct_status cpu_masked_fill(ct_tensor *out, const ct_tensor *mask, const int64_t *ms, const void *value) {
    const ct_tensor *t = out;
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

static ct_status cpu_nonzero(ct_call *call, const ct_tensor *t) {
    ct_scope_begin();
    const ct_tensor *c = ct_contiguous_impl(t);
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
    ct_tensor *out = ct_empty_impl(CT_SHAPE(count, nd), CT_DTYPE_INT64, CT_CPU);
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

/* ------------------------------------------------------------------ sort, topk */

int ct_sort_key_cmp_int(const void *a, const void *b) {
    const ct_sort_key *x = a, *y = b;
    if (x->iv != y->iv)
        return x->iv < y->iv ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}
int ct_sort_key_cmp_int_desc(const void *a, const void *b) {
    const ct_sort_key *x = a, *y = b;
    if (x->iv != y->iv)
        return x->iv > y->iv ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* NaN sorts above every number (as PyTorch); ties keep their order (stable). */
int ct_sort_key_cmp_float(const void *a, const void *b) {
    const ct_sort_key *x = a, *y = b;
    bool nx = isnan(x->v), ny = isnan(y->v);
    if (nx != ny)
        return nx ? 1 : -1;
    if (!nx && x->v != y->v)
        return x->v < y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}
int ct_sort_key_cmp_float_desc(const void *a, const void *b) {
    const ct_sort_key *x = a, *y = b;
    bool nx = isnan(x->v), ny = isnan(y->v);
    if (nx != ny)
        return nx ? -1 : 1;
    if (!nx && x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static ct_status cpu_sort(ct_tensor *vals, ct_tensor *idx, const ct_tensor *t, int d, int64_t k, bool descending) {
    const char *op = "sort";
    int64_t size = t->ndim ? t->shape[d] : 1, outer, inner;
    outer_inner(t, d, &outer, &inner);
    ct_scope_begin();
    const ct_tensor *c = ct_contiguous_impl(t);
    ct_sort_key *row = malloc(sizeof *row * (size_t)(size > 0 ? size : 1));
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
    int (*cmp)(const void *, const void *) = fl ? (descending ? ct_sort_key_cmp_float_desc : ct_sort_key_cmp_float)
                                                : (descending ? ct_sort_key_cmp_int_desc : ct_sort_key_cmp_int);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            for (int64_t i = 0; i < size; i++)
                ct_sort_key_load(&row[i], src + (size_t)((o * size + i) * inner + j) * esz, t->dtype, i);
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

void ct_cpu_register_shape(void) {
    ct_stub_flip[CT_DEVICE_CPU] = cpu_flip;
    ct_stub_tri[CT_DEVICE_CPU] = cpu_tri;
    ct_stub_index_select[CT_DEVICE_CPU] = cpu_index_select;
    ct_stub_gather[CT_DEVICE_CPU] = cpu_gather;
    ct_stub_scatter_add[CT_DEVICE_CPU] = cpu_scatter_add;
    ct_stub_index_add[CT_DEVICE_CPU] = cpu_index_add;
    ct_stub_masked_fill[CT_DEVICE_CPU] = cpu_masked_fill;
    ct_stub_nonzero[CT_DEVICE_CPU] = cpu_nonzero;
    ct_stub_sort[CT_DEVICE_CPU] = cpu_sort;
}
