/* The public op functions, generated from the op table (ctorch/ops.def): each packs
 * its arguments into a ct_call and dispatches it. */
#include "dispatch/dispatch_internal.h"
#include "ctorch/ops.h"
#include "dispatch/call.h"
#include "meta/elementwise.h"
#include "meta/op_info.h"
#include "meta/reduce.h"
#include "api/wrapped.h"
#include "meta/stubs.h"

static ct_tensor *call_unary(ct_op op, const ct_tensor *a, ct_tensor *out, ct_call_mode mode) {
    if (mode == CT_CALL_FUNCTIONAL) {
        ct_tensor *r = ct_dispatch_fast(op, a, NULL);
        if (r)
            return r;
    }
    ct_call c = {.op = op, .mode = mode, .nin = 1, .in = {a}, .dtype = CT_DTYPE_UNDEFINED};
    if (mode != CT_CALL_FUNCTIONAL) {
        c.out[0] = ct_retain(out);
        c.nout = 1;
    }
    return ct_dispatch_1(&c);
}

static ct_tensor *call_binary(ct_op op, const ct_tensor *a, const ct_tensor *b, const ct_scalar *alpha,
                              ct_tensor *out, ct_call_mode mode) {
    if (mode == CT_CALL_FUNCTIONAL && !alpha) {
        ct_tensor *r = ct_dispatch_fast(op, a, b);
        if (r)
            return r;
    }
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

/* Packs keepdim and the dim list (Note: layout in meta/reduce.h). A list longer than
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

/* ------------------------------------------------------------ more elementwise classes */

/* Packs a general elementwise call: inputs (NULL allowed for optional ones), scalar
 * and integer arguments, and the output of in-place/out= calls. */
static ct_tensor *call_ew(ct_op op, ct_call_mode mode, const ct_tensor *const *in, int nin, const ct_scalar *s,
                          int ns, const int64_t *ints, int ni, ct_tensor *out) {
    ct_call c = {.op = op, .mode = mode, .nin = nin, .nscalars = ns, .nints = ni, .dtype = CT_DTYPE_UNDEFINED};
    for (int i = 0; i < nin; i++)
        c.in[i] = in[i];
    for (int i = 0; i < ns; i++)
        c.s[i] = s[i];
    for (int i = 0; i < ni; i++)
        c.ints[i] = ints[i];
    if (mode != CT_CALL_FUNCTIONAL) {
        c.out[0] = ct_retain(out);
        c.nout = 1;
    }
    return ct_dispatch_1(&c);
}

#define CT_OUT_MODE(out, self) ((out) ? CT_CALL_OUT : (self) ? CT_CALL_INPLACE : CT_CALL_FUNCTIONAL)

static ct_tensor *call_unary_d(ct_op op, const ct_tensor *a, const double *p, int np, ct_tensor *out, bool self) {
    ct_scalar s[3];
    for (int i = 0; i < np; i++)
        s[i] = ct_scalar_float(p[i]);
    return call_ew(op, CT_OUT_MODE(out, self), &a, 1, s, np, NULL, 0, self ? (ct_tensor *)a : out);
}

/* Optional parameters: ints[i] says whether s[i] was given. */
static ct_tensor *call_unary_opt(ct_op op, const ct_tensor *a, const double *p0, const double *p1,
                                 const double *p2, ct_tensor *out, bool self) {
    const double *p[3] = {p0, p1, p2};
    ct_scalar s[3];
    int64_t given[3];
    for (int i = 0; i < 3; i++) {
        s[i] = ct_scalar_float(p[i] ? *p[i] : 0.0);
        given[i] = p[i] != NULL;
    }
    return call_ew(op, CT_OUT_MODE(out, self), &a, 1, s, 3, given, 3, self ? (ct_tensor *)a : out);
}

static ct_tensor *call_unary_int(ct_op op, const ct_tensor *a, int64_t v, ct_tensor *out, bool self) {
    return call_ew(op, CT_OUT_MODE(out, self), &a, 1, NULL, 0, &v, 1, self ? (ct_tensor *)a : out);
}

/* Tensors and scalars mixed: scalar operands become wrapped numbers (as in PyTorch)
 * so they take part in type promotion with their weaker role. */
static ct_tensor *call_mixed(ct_op op, const ct_tensor *const *in, const ct_scalar *const *sc, int nin,
                             const ct_scalar *s, int ns, const int64_t *ints, int ni, ct_tensor *out, bool self) {
    ct_scope_begin();
    const ct_tensor *ins[CT_CALL_MAX_IN];
    ct_tensor *r = NULL;
    bool ok = true;
    for (int i = 0; i < nin; i++) {
        ins[i] = in[i];
        if (sc && sc[i]) {
            ins[i] = ct_wrapped_scalar(*sc[i]);
            ok = ok && ins[i];
        }
    }
    if (ok)
        r = call_ew(op, CT_OUT_MODE(out, self), ins, nin, s, ns, ints, ni, self ? (ct_tensor *)in[0] : out);
    ct_keep(r);
    ct_scope_end();
    return r;
}

#define CT_DEF_UNARY_FN(name)                                                                       \
    ct_tensor *ct_##name(const ct_tensor *a) {                                                      \
        CT_CHECK_ARG(#name, a);                                                                     \
        return call_unary(CT_OP_##name, a, NULL, CT_CALL_FUNCTIONAL);                               \
    }

#define CT_DEF_UNARY_DN(name, PARAMS, N, ...)                                                       \
    ct_tensor *ct_##name(const ct_tensor *a CT_EXPAND PARAMS) {                                     \
        CT_CHECK_ARG(#name, a);                                                                     \
        const double p[] = {__VA_ARGS__};                                                           \
        return call_unary_d(CT_OP_##name, a, p, N, NULL, false);                                    \
    }                                                                                               \
    ct_tensor *ct_##name##_(ct_tensor *a CT_EXPAND PARAMS) {                                        \
        CT_CHECK_ARG(#name "_", a);                                                                 \
        const double p[] = {__VA_ARGS__};                                                           \
        return call_unary_d(CT_OP_##name, a, p, N, NULL, true);                                     \
    }                                                                                               \
    ct_tensor *ct_##name##_out(const ct_tensor *a CT_EXPAND PARAMS, ct_tensor *out) {               \
        CT_CHECK_ARG(#name "_out", a);                                                              \
        CT_CHECK_ARG(#name "_out", out);                                                            \
        const double p[] = {__VA_ARGS__};                                                           \
        return call_unary_d(CT_OP_##name, a, p, N, out, false);                                     \
    }
#define CT_EXPAND(...) , __VA_ARGS__
#define CT_DEF_UNARY_D1(name) CT_DEF_UNARY_DN(name, (double p0), 1, p0)
#define CT_DEF_UNARY_D2(name) CT_DEF_UNARY_DN(name, (double p0, double p1), 2, p0, p1)
#define CT_DEF_UNARY_D3(name) CT_DEF_UNARY_DN(name, (double p0, double p1, double p2), 3, p0, p1, p2)

#define CT_DEF_UNARY_OPT_D3(name)                                                                   \
    ct_tensor *ct_##name(const ct_tensor *a, const double *p0, const double *p1, const double *p2) { \
        CT_CHECK_ARG(#name, a);                                                                     \
        return call_unary_opt(CT_OP_##name, a, p0, p1, p2, NULL, false);                            \
    }                                                                                               \
    ct_tensor *ct_##name##_(ct_tensor *a, const double *p0, const double *p1, const double *p2) {   \
        CT_CHECK_ARG(#name "_", a);                                                                 \
        return call_unary_opt(CT_OP_##name, a, p0, p1, p2, NULL, true);                             \
    }                                                                                               \
    ct_tensor *ct_##name##_out(const ct_tensor *a, const double *p0, const double *p1, const double *p2, \
                               ct_tensor *out) {                                                    \
        CT_CHECK_ARG(#name "_out", a);                                                              \
        CT_CHECK_ARG(#name "_out", out);                                                            \
        return call_unary_opt(CT_OP_##name, a, p0, p1, p2, out, false);                             \
    }

#define CT_DEF_UNARY_INT_AS(name, fname)                                                            \
    ct_tensor *ct_##fname(const ct_tensor *a, int64_t p0) {                                         \
        CT_CHECK_ARG(#fname, a);                                                                    \
        return call_unary_int(CT_OP_##name, a, p0, NULL, false);                                    \
    }                                                                                               \
    ct_tensor *ct_##fname##_(ct_tensor *a, int64_t p0) {                                            \
        CT_CHECK_ARG(#fname "_", a);                                                                \
        return call_unary_int(CT_OP_##name, a, p0, NULL, true);                                     \
    }                                                                                               \
    ct_tensor *ct_##fname##_out(const ct_tensor *a, int64_t p0, ct_tensor *out) {                   \
        CT_CHECK_ARG(#fname "_out", a);                                                             \
        CT_CHECK_ARG(#fname "_out", out);                                                           \
        return call_unary_int(CT_OP_##name, a, p0, out, false);                                     \
    }
#define CT_DEF_UNARY_INT(name) CT_DEF_UNARY_INT_AS(name, name)
#define CT_DEF_UNARY_DECIMALS(name) CT_DEF_UNARY(name) CT_DEF_UNARY_INT_AS(name, name##_decimals)

#define CT_DEF_BINARY_MODE(name)                                                                    \
    CT_DEF_BINARY(name)                                                                             \
    ct_tensor *ct_##name##_mode(const ct_tensor *a, const ct_tensor *b, ct_rounding_mode mode) {    \
        CT_CHECK_ARG(#name, a);                                                                     \
        CT_CHECK_ARG(#name, b);                                                                     \
        const ct_tensor *in[2] = {a, b};                                                            \
        int64_t m = mode;                                                                           \
        return call_ew(CT_OP_##name, CT_CALL_FUNCTIONAL, in, 2, NULL, 0, &m, 1, NULL);              \
    }                                                                                               \
    ct_tensor *ct_##name##_mode_(ct_tensor *a, const ct_tensor *b, ct_rounding_mode mode) {         \
        CT_CHECK_ARG(#name "_", a);                                                                 \
        CT_CHECK_ARG(#name "_", b);                                                                 \
        const ct_tensor *in[2] = {a, b};                                                            \
        int64_t m = mode;                                                                           \
        return call_ew(CT_OP_##name, CT_CALL_INPLACE, in, 2, NULL, 0, &m, 1, a);                    \
    }                                                                                               \
    ct_tensor *ct_##name##_mode_out(const ct_tensor *a, const ct_tensor *b, ct_rounding_mode mode,  \
                                    ct_tensor *out) {                                               \
        CT_CHECK_ARG(#name "_out", a);                                                              \
        CT_CHECK_ARG(#name "_out", b);                                                              \
        CT_CHECK_ARG(#name "_out", out);                                                            \
        const ct_tensor *in[2] = {a, b};                                                            \
        int64_t m = mode;                                                                           \
        return call_ew(CT_OP_##name, CT_CALL_OUT, in, 2, NULL, 0, &m, 1, out);                      \
    }                                                                                               \
    ct_tensor *ct_##name##_scalar_mode(const ct_tensor *a, ct_scalar b, ct_rounding_mode mode) {    \
        CT_CHECK_ARG(#name, a);                                                                     \
        const ct_tensor *in[2] = {a, NULL};                                                         \
        const ct_scalar *sc[2] = {NULL, &b};                                                        \
        int64_t m = mode;                                                                           \
        return call_mixed(CT_OP_##name, in, sc, 2, NULL, 0, &m, 1, NULL, false);                    \
    }                                                                                               \
    ct_tensor *ct_##name##_scalar_mode_(ct_tensor *a, ct_scalar b, ct_rounding_mode mode) {         \
        CT_CHECK_ARG(#name "_", a);                                                                 \
        const ct_tensor *in[2] = {a, NULL};                                                         \
        const ct_scalar *sc[2] = {NULL, &b};                                                        \
        int64_t m = mode;                                                                           \
        return call_mixed(CT_OP_##name, in, sc, 2, NULL, 0, &m, 1, NULL, true);                     \
    }

/* The scalar form of TERNARY passes c as a scalar argument, not an operand: the op's
 * kernel reads it from the call (lerp's weight takes no part in type promotion). */
#define CT_DEF_TERNARY(name)                                                                        \
    ct_tensor *ct_##name(const ct_tensor *a, const ct_tensor *b, const ct_tensor *c) {              \
        CT_CHECK_ARG(#name, a);                                                                     \
        CT_CHECK_ARG(#name, b);                                                                     \
        CT_CHECK_ARG(#name, c);                                                                     \
        const ct_tensor *in[3] = {a, b, c};                                                         \
        return call_ew(CT_OP_##name, CT_CALL_FUNCTIONAL, in, 3, NULL, 0, NULL, 0, NULL);            \
    }                                                                                               \
    ct_tensor *ct_##name##_(ct_tensor *a, const ct_tensor *b, const ct_tensor *c) {                 \
        CT_CHECK_ARG(#name "_", a);                                                                 \
        CT_CHECK_ARG(#name "_", b);                                                                 \
        CT_CHECK_ARG(#name "_", c);                                                                 \
        const ct_tensor *in[3] = {a, b, c};                                                         \
        return call_ew(CT_OP_##name, CT_CALL_INPLACE, in, 3, NULL, 0, NULL, 0, a);                  \
    }                                                                                               \
    ct_tensor *ct_##name##_out(const ct_tensor *a, const ct_tensor *b, const ct_tensor *c, ct_tensor *out) { \
        CT_CHECK_ARG(#name "_out", a);                                                              \
        CT_CHECK_ARG(#name "_out", b);                                                              \
        CT_CHECK_ARG(#name "_out", c);                                                              \
        CT_CHECK_ARG(#name "_out", out);                                                            \
        const ct_tensor *in[3] = {a, b, c};                                                         \
        return call_ew(CT_OP_##name, CT_CALL_OUT, in, 3, NULL, 0, NULL, 0, out);                    \
    }                                                                                               \
    ct_tensor *ct_##name##_scalar(const ct_tensor *a, const ct_tensor *b, ct_scalar c) {            \
        CT_CHECK_ARG(#name, a);                                                                     \
        CT_CHECK_ARG(#name, b);                                                                     \
        const ct_tensor *in[2] = {a, b};                                                            \
        return call_ew(CT_OP_##name, CT_CALL_FUNCTIONAL, in, 2, &c, 1, NULL, 0, NULL);              \
    }                                                                                               \
    ct_tensor *ct_##name##_scalar_(ct_tensor *a, const ct_tensor *b, ct_scalar c) {                 \
        CT_CHECK_ARG(#name "_", a);                                                                 \
        CT_CHECK_ARG(#name "_", b);                                                                 \
        const ct_tensor *in[2] = {a, b};                                                            \
        return call_ew(CT_OP_##name, CT_CALL_INPLACE, in, 2, &c, 1, NULL, 0, a);                    \
    }                                                                                               \
    ct_tensor *ct_##name##_scalar_out(const ct_tensor *a, const ct_tensor *b, ct_scalar c, ct_tensor *out) { \
        CT_CHECK_ARG(#name "_out", a);                                                              \
        CT_CHECK_ARG(#name "_out", b);                                                              \
        CT_CHECK_ARG(#name "_out", out);                                                            \
        const ct_tensor *in[2] = {a, b};                                                            \
        return call_ew(CT_OP_##name, CT_CALL_OUT, in, 2, &c, 1, NULL, 0, out);                      \
    }

#define CT_DEF_TERNARY_VALUE(name)                                                                  \
    ct_tensor *ct_##name(const ct_tensor *a, const ct_tensor *b, const ct_tensor *c, ct_scalar value) { \
        CT_CHECK_ARG(#name, a);                                                                     \
        CT_CHECK_ARG(#name, b);                                                                     \
        CT_CHECK_ARG(#name, c);                                                                     \
        const ct_tensor *in[3] = {a, b, c};                                                         \
        return call_ew(CT_OP_##name, CT_CALL_FUNCTIONAL, in, 3, &value, 1, NULL, 0, NULL);          \
    }                                                                                               \
    ct_tensor *ct_##name##_(ct_tensor *a, const ct_tensor *b, const ct_tensor *c, ct_scalar value) { \
        CT_CHECK_ARG(#name "_", a);                                                                 \
        CT_CHECK_ARG(#name "_", b);                                                                 \
        CT_CHECK_ARG(#name "_", c);                                                                 \
        const ct_tensor *in[3] = {a, b, c};                                                         \
        return call_ew(CT_OP_##name, CT_CALL_INPLACE, in, 3, &value, 1, NULL, 0, a);                \
    }                                                                                               \
    ct_tensor *ct_##name##_out(const ct_tensor *a, const ct_tensor *b, const ct_tensor *c, ct_scalar value, \
                               ct_tensor *out) {                                                    \
        CT_CHECK_ARG(#name "_out", a);                                                              \
        CT_CHECK_ARG(#name "_out", b);                                                              \
        CT_CHECK_ARG(#name "_out", c);                                                              \
        CT_CHECK_ARG(#name "_out", out);                                                            \
        const ct_tensor *in[3] = {a, b, c};                                                         \
        return call_ew(CT_OP_##name, CT_CALL_OUT, in, 3, &value, 1, NULL, 0, out);                  \
    }

#define CT_DEF_CLAMP(name)                                                                          \
    ct_tensor *ct_##name(const ct_tensor *a, const ct_scalar *min, const ct_scalar *max) {          \
        CT_CHECK_ARG(#name, a);                                                                     \
        const ct_tensor *in[3] = {a, NULL, NULL};                                                   \
        const ct_scalar *sc[3] = {NULL, min, max};                                                  \
        return call_mixed(CT_OP_##name, in, sc, 3, NULL, 0, NULL, 0, NULL, false);                  \
    }                                                                                               \
    ct_tensor *ct_##name##_(ct_tensor *a, const ct_scalar *min, const ct_scalar *max) {             \
        CT_CHECK_ARG(#name "_", a);                                                                 \
        const ct_tensor *in[3] = {a, NULL, NULL};                                                   \
        const ct_scalar *sc[3] = {NULL, min, max};                                                  \
        return call_mixed(CT_OP_##name, in, sc, 3, NULL, 0, NULL, 0, NULL, true);                   \
    }                                                                                               \
    ct_tensor *ct_##name##_out(const ct_tensor *a, const ct_scalar *min, const ct_scalar *max, ct_tensor *out) { \
        CT_CHECK_ARG(#name "_out", a);                                                              \
        CT_CHECK_ARG(#name "_out", out);                                                            \
        const ct_tensor *in[3] = {a, NULL, NULL};                                                   \
        const ct_scalar *sc[3] = {NULL, min, max};                                                  \
        return call_mixed(CT_OP_##name, in, sc, 3, NULL, 0, NULL, 0, out, false);                   \
    }                                                                                               \
    ct_tensor *ct_##name##_tensor(const ct_tensor *a, const ct_tensor *min, const ct_tensor *max) { \
        CT_CHECK_ARG(#name, a);                                                                     \
        const ct_tensor *in[3] = {a, min, max};                                                     \
        return call_ew(CT_OP_##name, CT_CALL_FUNCTIONAL, in, 3, NULL, 0, NULL, 0, NULL);            \
    }                                                                                               \
    ct_tensor *ct_##name##_tensor_(ct_tensor *a, const ct_tensor *min, const ct_tensor *max) {      \
        CT_CHECK_ARG(#name "_", a);                                                                 \
        const ct_tensor *in[3] = {a, min, max};                                                     \
        return call_ew(CT_OP_##name, CT_CALL_INPLACE, in, 3, NULL, 0, NULL, 0, a);                  \
    }                                                                                               \
    ct_tensor *ct_##name##_tensor_out(const ct_tensor *a, const ct_tensor *min, const ct_tensor *max, \
                                      ct_tensor *out) {                                             \
        CT_CHECK_ARG(#name "_out", a);                                                              \
        CT_CHECK_ARG(#name "_out", out);                                                            \
        const ct_tensor *in[3] = {a, min, max};                                                     \
        return call_ew(CT_OP_##name, CT_CALL_OUT, in, 3, NULL, 0, NULL, 0, out);                    \
    }

#define CT_DEF_WHERE(name)                                                                          \
    ct_tensor *ct_##name(const ct_tensor *cond, const ct_tensor *a, const ct_tensor *b) {           \
        CT_CHECK_ARG(#name, cond);                                                                  \
        CT_CHECK_ARG(#name, a);                                                                     \
        CT_CHECK_ARG(#name, b);                                                                     \
        const ct_tensor *in[3] = {cond, a, b};                                                      \
        return call_ew(CT_OP_##name, CT_CALL_FUNCTIONAL, in, 3, NULL, 0, NULL, 0, NULL);            \
    }                                                                                               \
    ct_tensor *ct_##name##_out(const ct_tensor *cond, const ct_tensor *a, const ct_tensor *b, ct_tensor *out) { \
        CT_CHECK_ARG(#name "_out", cond);                                                           \
        CT_CHECK_ARG(#name "_out", a);                                                              \
        CT_CHECK_ARG(#name "_out", b);                                                              \
        CT_CHECK_ARG(#name "_out", out);                                                            \
        const ct_tensor *in[3] = {cond, a, b};                                                      \
        return call_ew(CT_OP_##name, CT_CALL_OUT, in, 3, NULL, 0, NULL, 0, out);                    \
    }                                                                                               \
    ct_tensor *ct_##name##_scalar_self(const ct_tensor *cond, ct_scalar a, const ct_tensor *b) {    \
        CT_CHECK_ARG(#name, cond);                                                                  \
        CT_CHECK_ARG(#name, b);                                                                     \
        const ct_tensor *in[3] = {cond, NULL, b};                                                   \
        const ct_scalar *sc[3] = {NULL, &a, NULL};                                                  \
        return call_mixed(CT_OP_##name, in, sc, 3, NULL, 0, NULL, 0, NULL, false);                  \
    }                                                                                               \
    ct_tensor *ct_##name##_scalar_other(const ct_tensor *cond, const ct_tensor *a, ct_scalar b) {   \
        CT_CHECK_ARG(#name, cond);                                                                  \
        CT_CHECK_ARG(#name, a);                                                                     \
        const ct_tensor *in[3] = {cond, a, NULL};                                                   \
        const ct_scalar *sc[3] = {NULL, NULL, &b};                                                  \
        return call_mixed(CT_OP_##name, in, sc, 3, NULL, 0, NULL, 0, NULL, false);                  \
    }                                                                                               \
    ct_tensor *ct_##name##_scalars(const ct_tensor *cond, ct_scalar a, ct_scalar b) {               \
        CT_CHECK_ARG(#name, cond);                                                                  \
        const ct_tensor *in[3] = {cond, NULL, NULL};                                                \
        const ct_scalar *sc[3] = {NULL, &a, &b};                                                    \
        return call_mixed(CT_OP_##name, in, sc, 3, NULL, 0, NULL, 0, NULL, false);                  \
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
    /* A device may do the whole list at once (CUDA: one launch); else one op a tensor. */
    unsigned dev = (unsigned)tensors[0]->device.type;
    if (dev < CT_STUB_SLOTS && ct_stub_foreach_powsum[dev]) {
        bool done = false;
        ct_status st = ct_stub_foreach_powsum[dev](tensors, n, ord, dtype, results, &done);
        if (st != CT_OK || done)
            return st;
    }
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
