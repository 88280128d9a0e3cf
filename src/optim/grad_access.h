/* Reading and replacing a tensor's .grad from optim code.
 *
 * Note [Gradient access]
 * The public accessors ct_tensor_grad / ct_tensor_set_grad belong to autograd. Until
 * they are available everywhere, optim reaches the field through these two helpers
 * only, so that switching to the public API is a change in this file alone. */
#ifndef CT_OPTIM_GRAD_ACCESS_H
#define CT_OPTIM_GRAD_ACCESS_H

#include "tensor_impl.h"

/* Borrowed; NULL when t has no gradient. */
static inline ct_tensor *ct_optim_grad(const ct_tensor *t) {
    return t->grad;
}

/* Replaces t's .grad with g (retained), or clears it when g is NULL. */
static inline void ct_optim_set_grad(ct_tensor *t, ct_tensor *g) {
    ct_tensor *old = t->grad;
    t->grad = g ? ct_retain(g) : NULL;
    ct_release(old);
}

#endif /* CT_OPTIM_GRAD_ACCESS_H */
