/* Indexing ops beside the ones in shape.c: the public wrappers of the structured
 * kernels of src/meta/indexing.c (scatter and scatter_reduce, index_copy, index_fill,
 * take, masked_select, masked_scatter, kthvalue, unique and unique_consecutive). */
#include <string.h>

#include "ctorch.h"
#include "dispatch/dispatch_internal.h"
#include "meta/indexing.h"

/* ------------------------------------------------------------------ scatter, scatter_reduce */

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

/* The CT_SCATTER_* code of a reduction's name. */
static int parse_reduce(const char *reduce) {
    static const char *const red_names[CT_SCATTER_REDUCE_COUNT] = {"sum", "prod", "mean", "amax", "amin"};
    for (int r = 0; reduce && r < CT_SCATTER_REDUCE_COUNT; r++)
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

ct_tensor *ct_take(const ct_tensor *t, const ct_tensor *index) {
    CT_CHECK_ARG("take", t);
    CT_CHECK_ARG("take", index);
    ct_call c = {.op = CT_OP_take, .nin = 2, .in = {t, index}, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
}

/* ------------------------------------------------------------------ masked_select, masked_scatter */

ct_tensor *ct_masked_select(const ct_tensor *t, const ct_tensor *mask) {
    CT_CHECK_ARG("masked_select", t);
    CT_CHECK_ARG("masked_select", mask);
    ct_call c = {.op = CT_OP_masked_select, .nin = 2, .in = {t, mask}, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
}

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
