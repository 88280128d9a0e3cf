/* The public op functions, generated from the op table (ctorch/ops.def): each packs
 * its arguments into a ct_call and dispatches it. */
#include "ctorch/ops.h"
#include "dispatch/call.h"
#include "ops/op_info.h"
#include "ops/reduce.h"
#include "wrapped.h"

static ct_tensor *call_unary(ct_op op, const ct_tensor *a, ct_tensor *out, ct_call_mode mode) {
    ct_call c = {.op = op, .mode = mode, .nin = 1, .in = {a}, .dtype = CT_DTYPE_UNDEFINED};
    if (mode != CT_CALL_FUNCTIONAL) {
        c.out[0] = ct_retain(out);
        c.nout = 1;
    }
    return ct_dispatch_1(&c);
}

static ct_tensor *call_binary(ct_op op, const ct_tensor *a, const ct_tensor *b, const ct_scalar *alpha,
                              ct_tensor *out, ct_call_mode mode) {
    ct_call c = {.op = op, .mode = mode, .nin = 2, .in = {a, b}, .dtype = CT_DTYPE_UNDEFINED};
    if (alpha) {
        c.s[0] = *alpha;
        c.nscalars = 1;
    }
    if (mode != CT_CALL_FUNCTIONAL) {
        c.out[0] = ct_retain(out);
        c.nout = 1;
    }
    return ct_dispatch_1(&c);
}

static ct_tensor *call_binary_scalar(ct_op op, const ct_tensor *a, ct_scalar b, ct_tensor *out, ct_call_mode mode) {
    ct_scope_begin();
    ct_tensor *w = ct_wrapped_scalar(b);
    ct_tensor *r = w ? call_binary(op, a, w, NULL, out, mode) : NULL;
    ct_keep(r);
    ct_scope_end();
    return r;
}

#define CT_DEF_UNARY(name)                                                        \
    ct_tensor *ct_##name(const ct_tensor *a) {                                    \
        CT_CHECK_ARG(#name, a);                                                   \
        return call_unary(CT_OP_##name, a, NULL, CT_CALL_FUNCTIONAL);             \
    }                                                                             \
    ct_tensor *ct_##name##_(ct_tensor *a) {                                       \
        CT_CHECK_ARG(#name "_", a);                                               \
        return call_unary(CT_OP_##name, a, a, CT_CALL_INPLACE);                   \
    }                                                                             \
    ct_tensor *ct_##name##_out(const ct_tensor *a, ct_tensor *out) {              \
        CT_CHECK_ARG(#name "_out", a);                                            \
        CT_CHECK_ARG(#name "_out", out);                                          \
        return call_unary(CT_OP_##name, a, out, CT_CALL_OUT);                     \
    }

#define CT_DEF_BINARY(name)                                                                   \
    ct_tensor *ct_##name(const ct_tensor *a, const ct_tensor *b) {                            \
        CT_CHECK_ARG(#name, a);                                                               \
        CT_CHECK_ARG(#name, b);                                                               \
        return call_binary(CT_OP_##name, a, b, NULL, NULL, CT_CALL_FUNCTIONAL);               \
    }                                                                                         \
    ct_tensor *ct_##name##_(ct_tensor *a, const ct_tensor *b) {                               \
        CT_CHECK_ARG(#name "_", a);                                                           \
        CT_CHECK_ARG(#name "_", b);                                                           \
        return call_binary(CT_OP_##name, a, b, NULL, a, CT_CALL_INPLACE);                     \
    }                                                                                         \
    ct_tensor *ct_##name##_out(const ct_tensor *a, const ct_tensor *b, ct_tensor *out) {      \
        CT_CHECK_ARG(#name "_out", a);                                                        \
        CT_CHECK_ARG(#name "_out", b);                                                        \
        CT_CHECK_ARG(#name "_out", out);                                                      \
        return call_binary(CT_OP_##name, a, b, NULL, out, CT_CALL_OUT);                       \
    }                                                                                         \
    ct_tensor *ct_##name##_scalar(const ct_tensor *a, ct_scalar b) {                          \
        CT_CHECK_ARG(#name, a);                                                               \
        return call_binary_scalar(CT_OP_##name, a, b, NULL, CT_CALL_FUNCTIONAL);              \
    }                                                                                         \
    ct_tensor *ct_##name##_scalar_(ct_tensor *a, ct_scalar b) {                               \
        CT_CHECK_ARG(#name "_", a);                                                           \
        return call_binary_scalar(CT_OP_##name, a, b, a, CT_CALL_INPLACE);                    \
    }

#define CT_DEF_BINARY_ALPHA(name)                                                                     \
    CT_DEF_BINARY(name)                                                                               \
    ct_tensor *ct_##name##_alpha(const ct_tensor *a, const ct_tensor *b, ct_scalar alpha) {           \
        CT_CHECK_ARG(#name, a);                                                                       \
        CT_CHECK_ARG(#name, b);                                                                       \
        return call_binary(CT_OP_##name, a, b, &alpha, NULL, CT_CALL_FUNCTIONAL);                     \
    }                                                                                                 \
    ct_tensor *ct_##name##_alpha_(ct_tensor *a, const ct_tensor *b, ct_scalar alpha) {                \
        CT_CHECK_ARG(#name "_", a);                                                                   \
        CT_CHECK_ARG(#name "_", b);                                                                   \
        return call_binary(CT_OP_##name, a, b, &alpha, a, CT_CALL_INPLACE);                           \
    }                                                                                                 \
    ct_tensor *ct_##name##_alpha_out(const ct_tensor *a, const ct_tensor *b, ct_scalar alpha,         \
                                     ct_tensor *out) {                                                \
        CT_CHECK_ARG(#name "_out", a);                                                                \
        CT_CHECK_ARG(#name "_out", b);                                                                \
        CT_CHECK_ARG(#name "_out", out);                                                              \
        return call_binary(CT_OP_##name, a, b, &alpha, out, CT_CALL_OUT);                             \
    }

#define CT_DEF_BINARY_PLAIN(name)                                                             \
    ct_tensor *ct_##name(const ct_tensor *a, const ct_tensor *b) {                            \
        CT_CHECK_ARG(#name, a);                                                               \
        CT_CHECK_ARG(#name, b);                                                               \
        return call_binary(CT_OP_##name, a, b, NULL, NULL, CT_CALL_FUNCTIONAL);               \
    }                                                                                         \
    ct_tensor *ct_##name##_out(const ct_tensor *a, const ct_tensor *b, ct_tensor *out) {      \
        CT_CHECK_ARG(#name "_out", a);                                                        \
        CT_CHECK_ARG(#name "_out", b);                                                        \
        CT_CHECK_ARG(#name "_out", out);                                                      \
        return call_binary(CT_OP_##name, a, b, NULL, out, CT_CALL_OUT);                       \
    }

/* CUSTOM ops write their wrappers by hand, next to their shape rules. */
#define CT_DEF_CUSTOM(name)

/* ------------------------------------------------------------------ reductions */

/* Packs keepdim and the dim list (Note: layout in ops/reduce.h). A list longer than
 * the call can hold must repeat a dim or name one out of range: report which. */
static bool pack_dims(ct_call *c, const ct_tensor *a, const int64_t *dims, int ndims, bool keepdim) {
    const char *name = ct_op_name(c->op);
    c->ints[CT_RED_INT_KEEPDIM] = keepdim;
    c->ints[CT_RED_INT_NDIMS] = 0;
    c->nints = CT_RED_INT_DIMS;
    if (ndims < 0) {
        ct_error(CT_ERROR_VALUE, name, "the number of dims must not be negative, got %d", ndims);
        return false;
    }
    if (!dims || ndims == 0)
        return true;
    if (ndims > CT_RED_MAX_DIMS) {
        uint32_t mask;
        if (ct_reduce_parse_dims(name, a->ndim, dims, ndims, &mask) == CT_OK)
            ct_error(CT_ERROR_VALUE, name, "too many dims (%d)", ndims);
        return false;
    }
    for (int i = 0; i < ndims; i++)
        c->ints[CT_RED_INT_DIMS + i] = dims[i];
    c->ints[CT_RED_INT_NDIMS] = ndims;
    c->nints = CT_RED_INT_DIMS + ndims;
    return true;
}

/* A reduction call with up to two outputs (given for out=, returned otherwise). */
static ct_status call_reduce(ct_call *c, const ct_tensor *a, const int64_t *dims, int ndims, bool keepdim,
                             ct_tensor *const *outs, int nout) {
    c->nin = 1;
    c->in[0] = a;
    if (!pack_dims(c, a, dims, ndims, keepdim))
        return ct_last_status();
    if (c->mode == CT_CALL_OUT) {
        for (int i = 0; i < nout; i++)
            c->out[i] = ct_retain(outs[i]);
        c->nout = nout;
    }
    return ct_dispatch(c);
}

static ct_tensor *reduce_1(ct_op op, const ct_tensor *a, const int64_t *dims, int ndims, bool keepdim,
                           ct_dtype dtype, const ct_scalar *s, ct_tensor *out) {
    ct_call c = {.op = op, .mode = out ? CT_CALL_OUT : CT_CALL_FUNCTIONAL, .dtype = dtype};
    if (s) {
        c.s[0] = *s;
        c.nscalars = 1;
    }
    if (call_reduce(&c, a, dims, ndims, keepdim, &out, 1) != CT_OK)
        return NULL;
    ct_tensor *r = ct_call_take_output(&c, 0);
    ct_call_clear_outputs(&c);
    return r;
}

#define CT_DEF_REDUCE_DT(name)                                                                       \
    ct_tensor *ct_##name(const ct_tensor *a, const int64_t *dims, int ndims, bool keepdim, ct_dtype dtype) { \
        CT_CHECK_ARG(#name, a);                                                                      \
        return reduce_1(CT_OP_##name, a, dims, ndims, keepdim, dtype, NULL, NULL);                   \
    }                                                                                                \
    ct_tensor *ct_##name##_out(const ct_tensor *a, const int64_t *dims, int ndims, bool keepdim,     \
                               ct_dtype dtype, ct_tensor *out) {                                     \
        CT_CHECK_ARG(#name "_out", a);                                                               \
        CT_CHECK_ARG(#name "_out", out);                                                             \
        return reduce_1(CT_OP_##name, a, dims, ndims, keepdim, dtype, NULL, out);                    \
    }

/* Two results: r0 and r1 get new references for functional calls. */
static ct_status reduce_2(ct_op op, const ct_tensor *a, const int64_t *dims, int ndims, bool keepdim,
                          const ct_scalar *s, ct_tensor **r0, ct_tensor **r1, ct_tensor *o0, ct_tensor *o1) {
    ct_call c = {.op = op, .mode = o0 ? CT_CALL_OUT : CT_CALL_FUNCTIONAL, .dtype = CT_DTYPE_UNDEFINED};
    if (s) {
        c.s[0] = *s;
        c.nscalars = 1;
    }
    ct_tensor *outs[2] = {o0, o1};
    ct_status st = call_reduce(&c, a, dims, ndims, keepdim, outs, 2);
    if (st == CT_OK && r0) {
        *r0 = ct_call_take_output(&c, 0);
        *r1 = *r0 ? ct_call_take_output(&c, 1) : NULL;
        if (!*r1) {
            ct_release(*r0);
            *r0 = NULL;
            st = ct_last_status();
        }
    }
    ct_call_clear_outputs(&c);
    return st;
}

static ct_status check_results(const char *name, const ct_tensor *a, ct_tensor **r0, ct_tensor **r1) {
    if (r0)
        *r0 = NULL;
    if (r1)
        *r1 = NULL;
    if (!r0 || !r1)
        return ct_error(CT_ERROR_NULL_ARGUMENT, name, "result pointers must not be NULL");
    CT_CHECK_ARG_STATUS(name, a);
    return CT_OK;
}

#define CT_DEF_REDUCE(name)                                                                          \
    ct_tensor *ct_##name(const ct_tensor *a, const int64_t *dims, int ndims, bool keepdim) {         \
        CT_CHECK_ARG(#name, a);                                                                      \
        return reduce_1(CT_OP_##name, a, dims, ndims, keepdim, CT_DTYPE_UNDEFINED, NULL, NULL);      \
    }                                                                                                \
    ct_tensor *ct_##name##_out(const ct_tensor *a, const int64_t *dims, int ndims, bool keepdim,     \
                               ct_tensor *out) {                                                     \
        CT_CHECK_ARG(#name "_out", a);                                                               \
        CT_CHECK_ARG(#name "_out", out);                                                             \
        return reduce_1(CT_OP_##name, a, dims, ndims, keepdim, CT_DTYPE_UNDEFINED, NULL, out);       \
    }

#define CT_DEF_COUNT(name)                                                                           \
    ct_tensor *ct_##name(const ct_tensor *a, const int64_t *dims, int ndims) {                       \
        CT_CHECK_ARG(#name, a);                                                                      \
        return reduce_1(CT_OP_##name, a, dims, ndims, false, CT_DTYPE_UNDEFINED, NULL, NULL);        \
    }

#define CT_DEF_VAR(name)                                                                             \
    ct_tensor *ct_##name(const ct_tensor *a, const int64_t *dims, int ndims, double correction, bool keepdim) { \
        CT_CHECK_ARG(#name, a);                                                                      \
        ct_scalar s = ct_scalar_float(correction);                                                   \
        return reduce_1(CT_OP_##name, a, dims, ndims, keepdim, CT_DTYPE_UNDEFINED, &s, NULL);        \
    }                                                                                                \
    ct_tensor *ct_##name##_out(const ct_tensor *a, const int64_t *dims, int ndims, double correction, \
                               bool keepdim, ct_tensor *out) {                                       \
        CT_CHECK_ARG(#name "_out", a);                                                               \
        CT_CHECK_ARG(#name "_out", out);                                                             \
        ct_scalar s = ct_scalar_float(correction);                                                   \
        return reduce_1(CT_OP_##name, a, dims, ndims, keepdim, CT_DTYPE_UNDEFINED, &s, out);         \
    }

#define CT_DEF_VAR_MEAN(name)                                                                        \
    ct_status ct_##name(const ct_tensor *a, const int64_t *dims, int ndims, double correction, bool keepdim, \
                        ct_tensor **r0, ct_tensor **r1) {                                            \
        ct_status st = check_results(#name, a, r0, r1);                                              \
        if (st)                                                                                      \
            return st;                                                                               \
        ct_scalar s = ct_scalar_float(correction);                                                   \
        return reduce_2(CT_OP_##name, a, dims, ndims, keepdim, &s, r0, r1, NULL, NULL);              \
    }

#define CT_DEF_MINMAX(name)                                                                          \
    ct_tensor *ct_##name(const ct_tensor *a) {                                                       \
        CT_CHECK_ARG(#name, a);                                                                      \
        return reduce_1(CT_OP_##name, a, NULL, 0, false, CT_DTYPE_UNDEFINED, NULL, NULL);            \
    }                                                                                                \
    ct_status ct_##name##_dim(const ct_tensor *a, int64_t dim, bool keepdim, ct_tensor **values,     \
                              ct_tensor **indices) {                                                 \
        ct_status st = check_results(#name, a, values, indices);                                     \
        if (st)                                                                                      \
            return st;                                                                               \
        return reduce_2(CT_OP_##name, a, &dim, 1, keepdim, NULL, values, indices, NULL, NULL);       \
    }                                                                                                \
    ct_status ct_##name##_dim_out(const ct_tensor *a, int64_t dim, bool keepdim, ct_tensor *values,  \
                                  ct_tensor *indices) {                                              \
        CT_CHECK_ARG_STATUS(#name "_out", a);                                                        \
        CT_CHECK_ARG_STATUS(#name "_out", values);                                                   \
        CT_CHECK_ARG_STATUS(#name "_out", indices);                                                  \
        return reduce_2(CT_OP_##name, a, &dim, 1, keepdim, NULL, NULL, NULL, values, indices);       \
    }

#define CT_DEF_ARG(name)                                                                             \
    ct_tensor *ct_##name(const ct_tensor *a) {                                                       \
        CT_CHECK_ARG(#name, a);                                                                      \
        return reduce_1(CT_OP_##name, a, NULL, 0, false, CT_DTYPE_UNDEFINED, NULL, NULL);            \
    }                                                                                                \
    ct_tensor *ct_##name##_dim(const ct_tensor *a, int64_t dim, bool keepdim) {                      \
        CT_CHECK_ARG(#name, a);                                                                      \
        return reduce_1(CT_OP_##name, a, &dim, 1, keepdim, CT_DTYPE_UNDEFINED, NULL, NULL);          \
    }                                                                                                \
    ct_tensor *ct_##name##_dim_out(const ct_tensor *a, int64_t dim, bool keepdim, ct_tensor *out) {  \
        CT_CHECK_ARG(#name "_out", a);                                                               \
        CT_CHECK_ARG(#name "_out", out);                                                             \
        return reduce_1(CT_OP_##name, a, &dim, 1, keepdim, CT_DTYPE_UNDEFINED, NULL, out);           \
    }

#define CT_DEF_NORM(name)                                                                            \
    ct_tensor *ct_##name(const ct_tensor *a, double ord, const int64_t *dims, int ndims, bool keepdim, \
                         ct_dtype dtype) {                                                           \
        CT_CHECK_ARG(#name, a);                                                                      \
        ct_scalar s = ct_scalar_float(ord);                                                          \
        return reduce_1(CT_OP_##name, a, dims, ndims, keepdim, dtype, &s, NULL);                     \
    }                                                                                                \
    ct_tensor *ct_##name##_out(const ct_tensor *a, double ord, const int64_t *dims, int ndims, bool keepdim, \
                               ct_dtype dtype, ct_tensor *out) {                                     \
        CT_CHECK_ARG(#name "_out", a);                                                               \
        CT_CHECK_ARG(#name "_out", out);                                                             \
        ct_scalar s = ct_scalar_float(ord);                                                          \
        return reduce_1(CT_OP_##name, a, dims, ndims, keepdim, dtype, &s, out);                      \
    }

#define CT_DEF_SCAN_DT(name)                                                                         \
    ct_tensor *ct_##name(const ct_tensor *a, int64_t dim, ct_dtype dtype) {                          \
        CT_CHECK_ARG(#name, a);                                                                      \
        return reduce_1(CT_OP_##name, a, &dim, 1, false, dtype, NULL, NULL);                         \
    }                                                                                                \
    ct_tensor *ct_##name##_out(const ct_tensor *a, int64_t dim, ct_dtype dtype, ct_tensor *out) {    \
        CT_CHECK_ARG(#name "_out", a);                                                               \
        CT_CHECK_ARG(#name "_out", out);                                                             \
        return reduce_1(CT_OP_##name, a, &dim, 1, false, dtype, NULL, out);                          \
    }

#define CT_DEF_SCAN_IDX(name)                                                                        \
    ct_status ct_##name(const ct_tensor *a, int64_t dim, ct_tensor **values, ct_tensor **indices) {  \
        ct_status st = check_results(#name, a, values, indices);                                     \
        if (st)                                                                                      \
            return st;                                                                               \
        return reduce_2(CT_OP_##name, a, &dim, 1, false, NULL, values, indices, NULL, NULL);         \
    }                                                                                                \
    ct_status ct_##name##_out(const ct_tensor *a, int64_t dim, ct_tensor *values, ct_tensor *indices) { \
        CT_CHECK_ARG_STATUS(#name "_out", a);                                                        \
        CT_CHECK_ARG_STATUS(#name "_out", values);                                                   \
        CT_CHECK_ARG_STATUS(#name "_out", indices);                                                  \
        return reduce_2(CT_OP_##name, a, &dim, 1, false, NULL, NULL, NULL, values, indices);         \
    }

#define CT_OP(name, sig, family, flags) CT_DEF_##sig(name)
#include "ctorch/ops.def"
#undef CT_OP

/* ------------------------------------------------------------------ foreach reductions */

ct_status ct_foreach_powsum(const ct_tensor *const *tensors, int n, double ord, ct_dtype dtype,
                            ct_tensor **results) {
    if (!results)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "_foreach_powsum", "results must not be NULL");
    for (int i = 0; i < n; i++)
        results[i] = NULL;
    if (!tensors)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "_foreach_powsum", "tensors must not be NULL");
    if (n <= 0)
        return ct_error(CT_ERROR_VALUE, "_foreach_powsum", "Tensor list must have at least one tensor.");
    for (int i = 0; i < n; i++)
        CT_CHECK_ARG_STATUS("_foreach_powsum", tensors[i]);
    /* Every result or none: the partial ones are owned by this scope until kept. */
    ct_scope_begin();
    ct_status st = CT_OK;
    for (int i = 0; i < n && st == CT_OK; i++) {
        results[i] = ct_linalg__powsum(tensors[i], ord, NULL, 0, false, dtype);
        if (!results[i])
            st = ct_last_status();
    }
    if (st == CT_OK)
        for (int i = 0; i < n; i++)
            ct_keep(results[i]);
    ct_scope_end();
    if (st != CT_OK)
        for (int i = 0; i < n; i++)
            results[i] = NULL;
    return st;
}
