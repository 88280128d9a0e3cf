/* Helpers shared by the nn sources. */
#ifndef CT_NN_FUNCTIONAL_INTERNAL_H
#define CT_NN_FUNCTIONAL_INTERNAL_H

#include "ctorch.h"

/* t reshaped to ndim dims of size 1 except ct_tensor_numel(t) at dim `at`. */
ct_tensor *ct_nn_channel_view(const ct_tensor *t, int at, int ndim);

#endif
