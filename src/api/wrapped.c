#include "api/wrapped.h"
#include "core/factory.h"

ct_tensor *ct_wrapped_scalar(ct_scalar s) {
    ct_dtype d = s.type == CT_SCALAR_FLOAT ? CT_DTYPE_FLOAT64 : s.type == CT_SCALAR_INT ? CT_DTYPE_INT64 : CT_DTYPE_BOOL;
    ct_tensor *t = ct_full_impl(NULL, 0, s, d, CT_CPU);
    if (t)
        t->wrapped_number = true;
    return t;
}
