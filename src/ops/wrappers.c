/* The public op functions, generated from the op table (ctorch/ops.def): each packs
 * its arguments into a ct_call and dispatches it. */
#include "dispatch/call.h"
#include "ops/op_info.h"
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

#define CT_OP(name, sig, family, flags) CT_DEF_##sig(name)
#include "ctorch/ops.def"
#undef CT_OP
