/* The matrix products' public wrappers (addmm, baddbmm, addmm_activation); the shape
 * rules are src/meta/linalg.c's. */
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "dispatch/dispatch_internal.h"
#include "meta/linalg.h"

/* ------------------------------------------------------------------ wrappers */

static ct_tensor *call_addmm(ct_op op, const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, ct_scalar beta,
                             ct_scalar alpha) {
    const char *name = ct_op_name(op);
    CT_CHECK_ARG(name, c);
    CT_CHECK_ARG(name, a);
    CT_CHECK_ARG(name, b);
    ct_call call = {.op = op, .nin = 3, .in = {c, a, b}, .nscalars = 2, .s = {beta, alpha}, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&call);
}

ct_tensor *ct_addmm(const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, ct_scalar beta, ct_scalar alpha) {
    return call_addmm(CT_OP_addmm, c, a, b, beta, alpha);
}

ct_tensor *ct_baddbmm(const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, ct_scalar beta, ct_scalar alpha) {
    return call_addmm(CT_OP_baddbmm, c, a, b, beta, alpha);
}

ct_tensor *ct_addmm_activation(const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, ct_scalar beta,
                               ct_scalar alpha, bool use_gelu) {
    const char *name = "addmm_activation";
    CT_CHECK_ARG(name, c);
    CT_CHECK_ARG(name, a);
    CT_CHECK_ARG(name, b);
    ct_call call = {.op = CT_OP_addmm_activation, .nin = 3, .in = {c, a, b}, .nscalars = 2, .s = {beta, alpha},
                    .nints = 1, .ints = {use_gelu}, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&call);
}

