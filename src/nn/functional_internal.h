/* Helpers shared by the nn sources. */
#ifndef CT_NN_FUNCTIONAL_INTERNAL_H
#define CT_NN_FUNCTIONAL_INTERNAL_H

#include "ctorch.h"

/* Excludes the AUTOGRAD key (Note [Statistics without a graph]); returns what to
 * restore with ct_nn_no_grad_end. */
ct_keyset ct_nn_no_grad_begin(void);
void ct_nn_no_grad_end(ct_keyset saved);
/* t reshaped to ndim dims of size 1 except t->numel at dim `at`. */
ct_tensor *ct_nn_channel_view(const ct_tensor *t, int at, int ndim);

#endif
