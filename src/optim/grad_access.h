/* Reading and replacing a tensor's .grad from optim code.
 *
 * Note [Gradient access]
 * optim reads gradients through autograd's public accessors. ct_tensor_grad hands out
 * a new reference owned by the innermost scope; the optimizer loops want a borrowed
 * pointer that lives as long as the parameter's .grad, without an open scope per
 * parameter in the caller. ct_optim_grad takes the reference inside a scope of its
 * own and lets it go: what remains is the .grad slot's reference, so the pointer stays
 * valid until the gradient is replaced or cleared. That costs a scope push and two
 * reference counts per parameter and step, nothing per element. */
#ifndef CT_OPTIM_GRAD_ACCESS_H
#define CT_OPTIM_GRAD_ACCESS_H

#include "ctorch.h"

/* Borrowed; NULL when t has no gradient. */
static inline ct_tensor *ct_optim_grad(const ct_tensor *t) {
    ct_scope_begin();
    ct_tensor *g = ct_tensor_grad(t);
    ct_scope_end();
    return g;
}

/* Replaces t's .grad with g, or clears it when g is NULL (ct_tensor_set_grad: g must
 * match t's dtype, device and shape). */
static inline ct_status ct_optim_set_grad(ct_tensor *t, const ct_tensor *g) { return ct_tensor_set_grad(t, g); }

#endif /* CT_OPTIM_GRAD_ACCESS_H */
