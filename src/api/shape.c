/* Shape and indexing ops: the public wrappers of the structured kernels of
 * src/meta/shape.c (cat, flip, tril/triu, index_select, gather, scatter_add,
 * index_add, masked_fill, nonzero, sort, topk) and the composites built from views
 * and those ops (stack, split, chunk, unbind, roll, repeat, tile, argsort). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "core/checks.h"
#include "core/dtype.h"
#include "dispatch/dispatch_internal.h"

/* ------------------------------------------------------------------ cat */

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
    if (nsizes < 0) {
        ct_error(CT_ERROR_VALUE, "split_with_sizes", "the number of sizes must be non-negative, got %d", nsizes);
        return -1;
    }
    if (nsizes > 0 && !sizes) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "split_with_sizes", "split_sizes is NULL");
        return -1;
    }
    int64_t total = 0;
    for (int i = 0; i < nsizes; i++) {
        if (sizes[i] < 0) {
            ct_error(CT_ERROR_VALUE, "split_with_sizes", "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=%lld at %d",
                     (long long)sizes[i], i);
            return -1;
        }
        if (!ct_size_add(total, sizes[i], &total)) /* Note [Checked sizes] */
            total = -1; /* matches no size: the error below */
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
    /* ceil(size / split_size) without size + split_size - 1, which overflows */
    int64_t n = split_size == 0 ? 1 : size / split_size + (size % split_size != 0);
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
    int64_t size = t->shape[d], each = size / chunks + (size % chunks != 0); /* ceil, without overflow */
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
    if (t->shape[d] > INT_MAX) { /* the count is an int */
        ct_error(CT_ERROR_VALUE, "unbind", "too many pieces (%lld)", (long long)t->shape[d]);
        return -1;
    }
    for (int64_t i = 0; i < t->shape[d] && i < max_out && out; i++)
        if (!(out[i] = ct_select(t, d, i))) {
            for (int64_t j = 0; j < i; j++) /* as split does: nothing half made is left behind */
                ct_release(ct_scope_depth() == 0 ? out[j] : NULL);
            return -1;
        }
    return (int)t->shape[d];
}

/* ------------------------------------------------------------------ flip, tril/triu */

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

static ct_tensor *call_one_int(ct_op op, const ct_tensor *t, int64_t v) {
    CT_CHECK_ARG(ct_op_name(op), t);
    ct_call c = {.op = op, .nin = 1, .in = {t}, .nints = 1, .ints = {v}, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
}

ct_tensor *ct_tril(const ct_tensor *t, int64_t k) { return call_one_int(CT_OP_tril, t, k); }
ct_tensor *ct_triu(const ct_tensor *t, int64_t k) { return call_one_int(CT_OP_triu, t, k); }

/* ------------------------------------------------------------------ index_select, gather */

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

ct_tensor *ct_gather(const ct_tensor *t, int64_t dim, const ct_tensor *index) {
    return call_dim_index(CT_OP_gather, t, dim, index);
}

/* ------------------------------------------------------------------ scatter_add, index_add */

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

ct_tensor *ct_index_add(const ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src,
                        ct_scalar alpha) {
    return call_scatter(CT_OP_index_add, t, dim, index, src, NULL, &alpha);
}

/* ------------------------------------------------------------------ masked_fill, nonzero */

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

ct_tensor *ct_nonzero(const ct_tensor *t) {
    CT_CHECK_ARG("nonzero", t);
    ct_call c = {.op = CT_OP_nonzero, .nin = 1, .in = {t}, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
}

/* ------------------------------------------------------------------ sort, topk */

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
            int64_t s = shifts[i] % size; /* in (-size, size): adding size cannot overflow */
            if (s < 0)
                s += size;
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
        if (!ct_size_mul(repeats[i], s, &result[i])) { /* Note [Checked sizes] */
            ct_error(CT_ERROR_VALUE, "repeat", "the size of the result overflows int64 at dim %d (%lld * %lld)", i,
                     (long long)repeats[i], (long long)s);
            return NULL;
        }
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
