#ifndef CT_WRAPPED_H
#define CT_WRAPPED_H

#include "tensor_impl.h"

/* A 0-d CPU tensor holding a C scalar argument, marked as a wrapped number for type
 * promotion (float64 for floats, int64 for ints, bool for bools, as PyTorch). */
ct_tensor *ct_wrapped_scalar(ct_scalar s);

#endif
