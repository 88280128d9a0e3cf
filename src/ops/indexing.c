/* Indexing ops beside the ones in shape.c: scatter and scatter_reduce, index_copy,
 * index_fill, take, masked_select, masked_scatter, kthvalue, unique and
 * unique_consecutive. Each kernel serves CPU and META (META stops once the outputs'
 * shapes are known; ops whose output shape depends on the data refuse META, as
 * nonzero does).
 *
 * Note [Update kernels]
 * scatter, scatter_reduce, index_copy, index_fill and masked_scatter write into a copy
 * of self (or self, in place). They all edit a contiguous working tensor
 * (ct_ix_begin_update) addressed by flat row-major offsets, and copy it back when
 * the real output is strided. Inputs they read (index, src) are addressed through
 * their own strides, so no input is copied. Elements move as bytes, so every dtype
 * works without a per-type loop; reductions go through double (floating dtypes) or
 * int64 (integers, wrapping like the element type). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "meta/kernels.h"
#include "ctorch.h"
#include "cpu/loops.h"
#include "ops/indexing.h"
#ifdef CT_HAVE_CUDA
#include "cuda/cuda_ops.h"
#include "ops/indexing_generic.h"
#endif

/* Contiguous strides of shape (elements). */
static void contiguous_strides(const int64_t *shape, int nd, int64_t *st) {
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        st[i] = s;
        s *= shape[i] > 1 ? shape[i] : 1;
    }
}

/* scatter's index check (PyTorch 2.x): int64 or int32, unless it is empty. */
static ct_status need_int_index(const char *msg_prefix, const char *op, const ct_tensor *index) {
    if (index->numel != 0 && index->dtype != CT_DTYPE_INT64 && index->dtype != CT_DTYPE_INT32)
        return ct_error(CT_ERROR_TYPE, op, "%sExpected dtype int32/int64 for index", msg_prefix);
    return CT_OK;
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

typedef enum { RED_SUM = 0, RED_PROD, RED_MEAN, RED_AMAX, RED_AMIN, RED_COUNT } red_kind;
static const char *const red_names[RED_COUNT] = {"sum", "prod", "mean", "amax", "amin"};

/* *dst = *dst (r) *src in dtype d. amax/amin propagate NaN, as PyTorch's do. */
static void combine(char *dst, const char *src, ct_dtype d, red_kind r) {
    if (ct_dtype_is_floating(d)) {
        double a = ct_load_double(dst, d), b = ct_load_double(src, d), v;
        switch (r) {
        case RED_PROD: v = a * b; break;
        case RED_AMAX: v = isnan(a) || isnan(b) ? NAN : a > b ? a : b; break;
        case RED_AMIN: v = isnan(a) || isnan(b) ? NAN : a < b ? a : b; break;
        default: v = a + b; break;
        }
        ct_store_double(dst, d, v);
        return;
    }
    if (d == CT_DTYPE_BOOL) {
        bool a = *(const uint8_t *)dst != 0, b = *(const uint8_t *)src != 0;
        *(uint8_t *)dst = (uint8_t)((r == RED_PROD || r == RED_AMIN) ? (a && b) : (a || b));
        return;
    }
    int64_t a = ct_load_int64(dst, d), b = ct_load_int64(src, d), v;
    bool uns = d == CT_DTYPE_UINT64;
    switch (r) {
    case RED_PROD: v = (int64_t)((uint64_t)a * (uint64_t)b); break;
    case RED_AMAX: v = (uns ? (uint64_t)a > (uint64_t)b : a > b) ? a : b; break;
    case RED_AMIN: v = (uns ? (uint64_t)a < (uint64_t)b : a < b) ? a : b; break;
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

/* Note [scatter shapes]
 * PyTorch's rule: index has self's number of dims (0-d counts as 1-d), and along every
 * dim is no larger than src and, outside dim, no larger than self. An empty index
 * makes the op a copy. */
static ct_status check_scatter_shapes(const char *op, const ct_tensor *t, const ct_tensor *index, int d,
                                      const ct_tensor *src) {
    int tnd = t->ndim ? t->ndim : 1, ind = index->ndim ? index->ndim : 1;
    if (tnd != ind)
        return ct_error(CT_ERROR_VALUE, op, "Index tensor must have the same number of dimensions as self tensor");
    if (src && (src->ndim ? src->ndim : 1) != ind)
        return ct_error(CT_ERROR_VALUE, op, "Index tensor must have the same number of dimensions as src tensor");
    if (index->numel == 0)
        return CT_OK;
    for (int k = 0; k < index->ndim; k++) {
        bool bad_self = k != d && index->shape[k] > t->shape[k];
        bool bad_src = src && index->shape[k] > (src->ndim ? src->shape[k] : 1);
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
    if (index->dtype != CT_DTYPE_INT64) /* the kernels read int64; a temporary of the call's scope */
        if (!(index = ct_to_dtype(index, CT_DTYPE_INT64)))
            return ct_last_status();
    if (src && src->dtype != t->dtype)
        return ct_error(CT_ERROR_TYPE, op, "scatter(): Expected self.dtype to be equal to src.dtype");
    int d;
    if (ct_wrap_dim(op, call->ints[0], t->ndim ? t->ndim : 1, &d))
        return ct_last_status();
    if ((st = check_scatter_shapes(op, t, index, d, src)))
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
#ifdef CT_HAVE_CUDA
    if (w->device.type == CT_DEVICE_CUDA) {
        st = ct_cuda_scatter(w, index, src, value, d, (int)reduce, include_self, op);
        return st ? st : ct_ix_finish_update(out, w);
    }
#endif
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
        const char *pv = src ? ps + ct_ix_offset(coord, sstr, ind) * (int64_t)esz : value;
        if (reduce < 0) {
            memcpy(pd, pv, esz);
        } else {
            if (count[woff] == 0 && !include_self)
                memcpy(pd, pv, esz);
            else
                combine(pd, pv, t->dtype, (red_kind)reduce);
            count[woff]++;
        }
        ct_ix_next_coord(coord, ishape, ind);
    }
    if (st == CT_OK && reduce == RED_MEAN)
        for (int64_t k = 0; k < w->numel; k++) {
            int64_t n = count[k] + (include_self ? 1 : 0);
            if (count[k] > 0 && n > 1)
                divide_by(dst + (size_t)k * esz, t->dtype, n);
        }
    free(count);
    return st ? st : ct_ix_finish_update(out, w);
}

ct_status ct_cpu_scatter(ct_keyset ks, ct_call *call, void *ud) { (void)ks, (void)ud; return scatter_kernel(call, "scatter"); }
ct_status ct_meta_scatter(ct_keyset ks, ct_call *call, void *ud) { (void)ks, (void)ud; return scatter_kernel(call, "scatter"); }
ct_status ct_cpu_scatter_reduce(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return scatter_kernel(call, "scatter_reduce");
}
ct_status ct_meta_scatter_reduce(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return scatter_kernel(call, "scatter_reduce");
}

static ct_tensor *call_scatter(ct_op op, const ct_tensor *t, int64_t dim, const ct_tensor *index,
                               const ct_tensor *src, const ct_scalar *value, int64_t reduce, bool include_self,
                               ct_tensor *self) {
    const char *name = ct_op_name(op);
    CT_CHECK_ARG(name, t);
    CT_CHECK_ARG(name, index);
    if (!value)
        CT_CHECK_ARG(name, src);
    ct_call c = {.op = op, .nin = 3, .in = {t, index, src}, .nints = 3, .ints = {dim, reduce, include_self},
                 .dtype = CT_DTYPE_UNDEFINED};
    if (value) {
        c.s[0] = *value;
        c.nscalars = 1;
    }
    if (self)
        ct_ix_inplace(&c, self);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_scatter(const ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src) {
    return call_scatter(CT_OP_scatter, t, dim, index, src, NULL, -1, true, NULL);
}
ct_tensor *ct_scatter_(ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src) {
    return call_scatter(CT_OP_scatter, t, dim, index, src, NULL, -1, true, t);
}
ct_tensor *ct_scatter_value(const ct_tensor *t, int64_t dim, const ct_tensor *index, ct_scalar value) {
    return call_scatter(CT_OP_scatter, t, dim, index, NULL, &value, -1, true, NULL);
}
ct_tensor *ct_scatter_value_(ct_tensor *t, int64_t dim, const ct_tensor *index, ct_scalar value) {
    return call_scatter(CT_OP_scatter, t, dim, index, NULL, &value, -1, true, t);
}

static int parse_reduce(const char *reduce) {
    for (int r = 0; reduce && r < RED_COUNT; r++)
        if (strcmp(reduce, red_names[r]) == 0)
            return r;
    ct_error(CT_ERROR_VALUE, "scatter_reduce", "reduce argument must be either sum, prod, mean, amax or amin, got %s",
             reduce ? reduce : "NULL");
    return -1;
}

ct_tensor *ct_scatter_reduce(const ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src,
                             const char *reduce, bool include_self) {
    int r = parse_reduce(reduce);
    return r < 0 ? NULL : call_scatter(CT_OP_scatter_reduce, t, dim, index, src, NULL, r, include_self, NULL);
}
ct_tensor *ct_scatter_reduce_(ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src,
                              const char *reduce, bool include_self) {
    int r = parse_reduce(reduce);
    return r < 0 ? NULL : call_scatter(CT_OP_scatter_reduce, t, dim, index, src, NULL, r, include_self, t);
}

/* ------------------------------------------------------------------ index_copy, index_fill */

/* Both move whole slices along dim: self seen as (outer, size, inner) (Note [Outer x
 * dim x inner] in shape.c). */
static void outer_inner(const ct_tensor *t, int d, int64_t *outer, int64_t *size, int64_t *inner) {
    *outer = 1, *inner = 1, *size = t->ndim ? t->shape[d] : 1;
    for (int i = 0; i < t->ndim; i++) {
        if (i < d)
            *outer *= t->shape[i];
        else if (i > d)
            *inner *= t->shape[i];
    }
}

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
                        ct_ix_type_name(index->dtype));
    if (src->dtype != t->dtype)
        return ct_error(CT_ERROR_TYPE, op,
                        "index_copy_(): self and source expected to have the same dtype, but got (self) %s and "
                        "(source) %s",
                        ct_ix_type_name(t->dtype), ct_ix_type_name(src->dtype));
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
#ifdef CT_HAVE_CUDA
    if (w->device.type == CT_DEVICE_CUDA) {
        st = ct_cuda_index_copy(w, index, src, d);
        return st ? st : ct_ix_finish_update(out, w);
    }
#endif
    int64_t outer, size, inner;
    outer_inner(t, d, &outer, &size, &inner);
    size_t esz = ct_dtype_size(t->dtype);
    const ct_tensor *sc = ct_contiguous(src);
    if (!sc)
        return ct_last_status();
    const char *ps = ct_tensor_ptr(sc);
    char *dst = ct_tensor_ptr(w);
    int64_t istride = index->ndim ? index->strides[0] : 0;
    for (int64_t i = 0; i < nidx; i++) {
        int64_t at = 0;
        if ((st = wrap_index(op, "index_copy_(): ", false, ct_ix_load_index(index, i * istride), size, d, &at)))
            return st;
        for (int64_t o = 0; o < outer; o++)
            memcpy(dst + (size_t)((o * size + at) * inner) * esz, ps + (size_t)((o * nidx + i) * inner) * esz,
                   (size_t)inner * esz);
    }
    return ct_ix_finish_update(out, w);
}

ct_status ct_cpu_index_copy(ct_keyset ks, ct_call *call, void *ud) { return index_copy_kernel(ks, call, ud); }
ct_status ct_meta_index_copy(ct_keyset ks, ct_call *call, void *ud) { return index_copy_kernel(ks, call, ud); }

static ct_tensor *call_index_copy(const ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src,
                                  ct_tensor *self) {
    CT_CHECK_ARG("index_copy", t);
    CT_CHECK_ARG("index_copy", index);
    CT_CHECK_ARG("index_copy", src);
    ct_call c = {.op = CT_OP_index_copy, .nin = 3, .in = {t, index, src}, .nints = 1, .ints = {dim},
                 .dtype = CT_DTYPE_UNDEFINED};
    if (self)
        ct_ix_inplace(&c, self);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_index_copy(const ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src) {
    return call_index_copy(t, dim, index, src, NULL);
}
ct_tensor *ct_index_copy_(ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src) {
    return call_index_copy(t, dim, index, src, t);
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
#ifdef CT_HAVE_CUDA
    if (w->device.type == CT_DEVICE_CUDA) {
        st = ct_cuda_index_fill(w, index, value, d);
        return st ? st : ct_ix_finish_update(out, w);
    }
#endif
    int64_t outer, size, inner;
    outer_inner(t, d, &outer, &size, &inner);
    size_t esz = ct_dtype_size(t->dtype);
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
    return ct_ix_finish_update(out, w);
}

ct_status ct_cpu_index_fill(ct_keyset ks, ct_call *call, void *ud) { return index_fill_kernel(ks, call, ud); }
ct_status ct_meta_index_fill(ct_keyset ks, ct_call *call, void *ud) { return index_fill_kernel(ks, call, ud); }

static ct_tensor *call_index_fill(const ct_tensor *t, int64_t dim, const ct_tensor *index, ct_scalar value,
                                  ct_tensor *self) {
    CT_CHECK_ARG("index_fill", t);
    CT_CHECK_ARG("index_fill", index);
    ct_call c = {.op = CT_OP_index_fill, .nin = 2, .in = {t, index}, .nints = 1, .ints = {dim}, .nscalars = 1,
                 .s = {value}, .dtype = CT_DTYPE_UNDEFINED};
    if (self)
        ct_ix_inplace(&c, self);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_index_fill(const ct_tensor *t, int64_t dim, const ct_tensor *index, ct_scalar value) {
    return call_index_fill(t, dim, index, value, NULL);
}
ct_tensor *ct_index_fill_(ct_tensor *t, int64_t dim, const ct_tensor *index, ct_scalar value) {
    return call_index_fill(t, dim, index, value, t);
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
                        ct_ix_type_name(index->dtype));
    ct_tensor *out = ct_empty(index->shape, index->ndim, t->dtype, t->device);
    ct_status st = ct_ix_set_out(call, 0, out);
    if (st || ct_ix_is_meta(out) || index->numel == 0)
        return st;
    if (t->numel == 0)
        return ct_error(CT_ERROR_INDEX, op, "take(): tried to take from an empty tensor");
#ifdef CT_HAVE_CUDA
    if (t->device.type == CT_DEVICE_CUDA)
        return ct_generic_take(call);
#endif
    const ct_tensor *c = ct_contiguous(t);
    if (!c)
        return ct_last_status();
    size_t esz = ct_dtype_size(t->dtype);
    const char *src = ct_tensor_ptr(c);
    char *dst = ct_tensor_ptr(out);
    int64_t coord[CT_MAX_DIMS] = {0};
    for (int64_t k = 0; k < index->numel; k++) {
        int64_t v = ct_ix_load_index(index, ct_ix_offset(coord, index->strides, index->ndim));
        int64_t w = v < 0 ? v + t->numel : v;
        if (w < 0 || w >= t->numel)
            return ct_error(CT_ERROR_INDEX, op, "out of range: tried to access index %lld on a tensor of %lld elements.",
                            (long long)v, (long long)t->numel);
        memcpy(dst + (size_t)k * esz, src + (size_t)w * esz, esz);
        ct_ix_next_coord(coord, index->shape, index->ndim);
    }
    return CT_OK;
}

ct_status ct_cpu_take(ct_keyset ks, ct_call *call, void *ud) { return take_kernel(ks, call, ud); }
ct_status ct_meta_take(ct_keyset ks, ct_call *call, void *ud) { return take_kernel(ks, call, ud); }

ct_tensor *ct_take(const ct_tensor *t, const ct_tensor *index) {
    CT_CHECK_ARG("take", t);
    CT_CHECK_ARG("take", index);
    ct_call c = {.op = CT_OP_take, .nin = 2, .in = {t, index}, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
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
#ifdef CT_HAVE_CUDA
    if (t->device.type == CT_DEVICE_CUDA)
        return ct_cuda_masked_select(call, t, mask, shape, nd, ts, ms);
#endif
    int64_t total = ct_shape_numel(shape, nd), count = 0, coord[CT_MAX_DIMS] = {0};
    const uint8_t *pm = (const uint8_t *)ct_tensor_ptr(mask);
    for (int64_t k = 0; k < total; k++) {
        count += pm[ct_ix_offset(coord, ms, nd)] != 0;
        ct_ix_next_coord(coord, shape, nd);
    }
    ct_tensor *out = ct_empty(CT_SHAPE(count), t->dtype, t->device);
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

ct_status ct_cpu_masked_select(ct_keyset ks, ct_call *call, void *ud) { return masked_select_kernel(ks, call, ud); }
ct_status ct_meta_masked_select(ct_keyset ks, ct_call *call, void *ud) { return masked_select_kernel(ks, call, ud); }

ct_tensor *ct_masked_select(const ct_tensor *t, const ct_tensor *mask) {
    CT_CHECK_ARG("masked_select", t);
    CT_CHECK_ARG("masked_select", mask);
    ct_call c = {.op = CT_OP_masked_select, .nin = 2, .in = {t, mask}, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
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
                                  ct_ix_type_name(mask->dtype));
    if (st)
        return st;
    if (src->dtype != t->dtype)
        return ct_error(CT_ERROR_TYPE, op, "masked_scatter: expected self and source to have same dtypes but got %s and %s",
                        ct_ix_type_name(t->dtype), ct_ix_type_name(src->dtype));
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
#ifdef CT_HAVE_CUDA
    if (t->device.type == CT_DEVICE_CUDA)
        return ct_generic_masked_scatter(call);
#endif
    const ct_tensor *base = t;
    if (call->mode != CT_CALL_INPLACE && (nd != t->ndim || memcmp(shape, t->shape, sizeof(int64_t) * (size_t)nd)))
        if (!(base = ct_expand(t, shape, nd)))
            return ct_last_status();
    ct_tensor *out, *w;
    if ((st = ct_ix_begin_update(call, base, &out, &w)) || !w)
        return st;
    ct_broadcast_strides(mask, shape, nd, ms);
    const ct_tensor *sc = ct_contiguous(src);
    if (!sc)
        return ct_last_status();
    int64_t total = ct_shape_numel(shape, nd), coord[CT_MAX_DIMS] = {0}, j = 0;
    const uint8_t *pm = (const uint8_t *)ct_tensor_ptr(mask);
    size_t esz = ct_dtype_size(t->dtype);
    const char *ps = ct_tensor_ptr(sc);
    char *dst = ct_tensor_ptr(w);
    for (int64_t k = 0; k < total; k++) {
        if (pm[ct_ix_offset(coord, ms, nd)]) {
            if (j >= src->numel)
                return ct_error(CT_ERROR_VALUE, op, "Number of elements of source < number of ones in mask");
            memcpy(dst + (size_t)k * esz, ps + (size_t)(j++) * esz, esz);
        }
        ct_ix_next_coord(coord, shape, nd);
    }
    return ct_ix_finish_update(out, w);
}

ct_status ct_cpu_masked_scatter(ct_keyset ks, ct_call *call, void *ud) { return masked_scatter_kernel(ks, call, ud); }
ct_status ct_meta_masked_scatter(ct_keyset ks, ct_call *call, void *ud) { return masked_scatter_kernel(ks, call, ud); }

static ct_tensor *call_masked_scatter(const ct_tensor *t, const ct_tensor *mask, const ct_tensor *src,
                                      ct_tensor *self) {
    CT_CHECK_ARG("masked_scatter", t);
    CT_CHECK_ARG("masked_scatter", mask);
    CT_CHECK_ARG("masked_scatter", src);
    ct_call c = {.op = CT_OP_masked_scatter, .nin = 3, .in = {t, mask, src}, .dtype = CT_DTYPE_UNDEFINED};
    if (self)
        ct_ix_inplace(&c, self);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_masked_scatter(const ct_tensor *t, const ct_tensor *mask, const ct_tensor *src) {
    return call_masked_scatter(t, mask, src, NULL);
}
ct_tensor *ct_masked_scatter_(ct_tensor *t, const ct_tensor *mask, const ct_tensor *src) {
    return call_masked_scatter(t, mask, src, t);
}

/* ------------------------------------------------------------------ kthvalue, unique */

/* A sort key: floating values as double (NaN above everything), integers as int64
 * (uint64 with its sign bit flipped, so signed comparison orders it), plus the
 * original position for stable ties. */
typedef struct {
    double v;
    int64_t iv;
    int64_t i;
} key;

static int cmp_float(const void *a, const void *b) {
    const key *x = a, *y = b;
    bool nx = isnan(x->v), ny = isnan(y->v);
    if (nx != ny)
        return nx ? 1 : -1;
    if (!nx && x->v != y->v)
        return x->v < y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int cmp_int(const void *a, const void *b) {
    const key *x = a, *y = b;
    if (x->iv != y->iv)
        return x->iv < y->iv ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static void load_key(key *k, const char *p, ct_dtype d, int64_t i) {
    if (ct_dtype_is_floating(d)) {
        k->v = ct_load_double(p, d);
    } else {
        k->iv = ct_load_int64(p, d);
        if (d == CT_DTYPE_UINT64)
            k->iv = (int64_t)((uint64_t)k->iv ^ (UINT64_C(1) << 63));
    }
    k->i = i;
}

/* Equal as values (-0.0 equals 0.0; NaN equals nothing, so each NaN stays apart). */
static bool same_key(const key *a, const key *b, bool fl) { return fl ? a->v == b->v : a->iv == b->iv; }

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
    int64_t outer, size, inner;
    outer_inner(t, d, &outer, &size, &inner);
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
#ifdef CT_HAVE_CUDA
    if (t->device.type == CT_DEVICE_CUDA)
        return ct_generic_kthvalue(call, d, shape, nd);
#endif
    ct_tensor *vals = ct_empty(shape, nd, t->dtype, t->device);
    ct_tensor *idx = ct_empty(shape, nd, CT_DTYPE_INT64, t->device);
    ct_status st = ct_ix_set_out(call, 0, vals);
    if (st == CT_OK)
        st = ct_ix_set_out(call, 1, idx);
    if (st || ct_ix_is_meta(vals) || vals->numel == 0)
        return st;
    const ct_tensor *c = ct_contiguous(t);
    key *row = malloc(sizeof *row * (size_t)size);
    if (!c || !row) {
        free(row);
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
                load_key(&row[i], src + (size_t)((o * size + i) * inner + j) * esz, t->dtype, i);
            qsort(row, (size_t)size, sizeof *row, fl ? cmp_float : cmp_int);
            int64_t at = o * inner + j, pick = row[k - 1].i;
            memcpy(pv + (size_t)at * esz, src + (size_t)((o * size + pick) * inner + j) * esz, esz);
            pi[at] = pick;
        }
    free(row);
    return CT_OK;
}

ct_status ct_cpu_kthvalue(ct_keyset ks, ct_call *call, void *ud) { return kthvalue_kernel(ks, call, ud); }
ct_status ct_meta_kthvalue(ct_keyset ks, ct_call *call, void *ud) { return kthvalue_kernel(ks, call, ud); }

/* Runs a call with two or three outputs: returns the first, stores the others. */
static ct_tensor *take_outputs(ct_call *c, ct_tensor **second, ct_tensor **third) {
    if (ct_dispatch(c) != CT_OK)
        return NULL;
    ct_tensor *first = ct_call_take_output(c, 0);
    if (second)
        *second = ct_call_take_output(c, 1);
    if (third)
        *third = ct_call_take_output(c, 2);
    ct_call_clear_outputs(c);
    return first;
}

ct_tensor *ct_kthvalue(const ct_tensor *t, int64_t k, int64_t dim, bool keepdim, ct_tensor **indices) {
    CT_CHECK_ARG("kthvalue", t);
    ct_call c = {.op = CT_OP_kthvalue, .nin = 1, .in = {t}, .nints = 3, .ints = {k, dim, keepdim},
                 .dtype = CT_DTYPE_UNDEFINED};
    return take_outputs(&c, indices, NULL);
}

/* Note [unique]
 * unique sorts the flattened values (stably, so equal values keep their order) and
 * keeps one of each run; unique_consecutive keeps one of each run in the original
 * order. Both always compute the inverse indices and the counts (one pass each) and
 * the wrapper hands out what the caller asked for. The output size depends on the
 * data, so META is refused. */
static ct_status unique_kernel(ct_call *call, bool consecutive) {
    const char *op = consecutive ? "unique_consecutive" : "unique";
    const ct_tensor *t = call->in[0];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    if (ct_ix_is_meta(t))
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "the output shape of %s depends on the data; META tensors have none",
                        op);
#ifdef CT_HAVE_CUDA
    if (t->device.type == CT_DEVICE_CUDA)
        return ct_generic_unique(call, consecutive);
#endif
    int64_t n = t->numel;
    const ct_tensor *c = ct_contiguous(t);
    key *keys = malloc(sizeof *keys * (size_t)(n > 0 ? n : 1));
    if (!c || !keys) {
        free(keys);
        return c ? ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory") : ct_last_status();
    }
    size_t esz = ct_dtype_size(t->dtype);
    bool fl = ct_dtype_is_floating(t->dtype);
    const char *src = ct_tensor_ptr(c);
    for (int64_t i = 0; i < n; i++)
        load_key(&keys[i], src + (size_t)i * esz, t->dtype, i);
    if (!consecutive)
        qsort(keys, (size_t)n, sizeof *keys, fl ? cmp_float : cmp_int);
    int64_t groups = 0;
    for (int64_t i = 0; i < n; i++)
        groups += i == 0 || !same_key(&keys[i], &keys[i - 1], fl);
    ct_tensor *vals = ct_empty(CT_SHAPE(groups), t->dtype, t->device);
    ct_tensor *inv = ct_empty(t->shape, t->ndim, CT_DTYPE_INT64, t->device);
    ct_tensor *counts = ct_zeros(CT_SHAPE(groups), CT_DTYPE_INT64, t->device);
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
    return st;
}

ct_status ct_cpu_unique(ct_keyset ks, ct_call *call, void *ud) { (void)ks, (void)ud; return unique_kernel(call, false); }
ct_status ct_meta_unique(ct_keyset ks, ct_call *call, void *ud) { (void)ks, (void)ud; return unique_kernel(call, false); }
ct_status ct_cpu_unique_consecutive(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return unique_kernel(call, true);
}
ct_status ct_meta_unique_consecutive(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return unique_kernel(call, true);
}

ct_tensor *ct_unique(const ct_tensor *t, bool sorted, ct_tensor **inverse, ct_tensor **counts) {
    CT_CHECK_ARG("unique", t);
    (void)sorted; /* see docs/ops.md: the result is sorted either way */
    ct_call c = {.op = CT_OP_unique, .nin = 1, .in = {t}, .dtype = CT_DTYPE_UNDEFINED};
    return take_outputs(&c, inverse, counts);
}

ct_tensor *ct_unique_consecutive(const ct_tensor *t, ct_tensor **inverse, ct_tensor **counts) {
    CT_CHECK_ARG("unique_consecutive", t);
    ct_call c = {.op = CT_OP_unique_consecutive, .nin = 1, .in = {t}, .dtype = CT_DTYPE_UNDEFINED};
    return take_outputs(&c, inverse, counts);
}
