/* Advanced indexing: the public wrappers of the structured kernels of
 * src/meta/advindex.c (Note [Advanced indexing] there). */
#include "ctorch.h"
#include "dispatch/dispatch_internal.h"
#include "meta/indexing.h"

ct_tensor *ct_index(const ct_tensor *t, const ct_tensor *const *indices, int n) {
    CT_CHECK_ARG("index", t);
    if (n < 0 || n > CT_MAX_DIMS || (n > 0 && !indices)) {
        ct_error(CT_ERROR_VALUE, "index", "expected a list of at most %d indices, got %d", CT_MAX_DIMS, n);
        return NULL;
    }
    ct_call c = {.op = CT_OP_index, .nin = 1, .in = {t}, .list = indices, .nlist = n, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
}

static ct_tensor *call_index_put(const ct_tensor *t, const ct_tensor *const *indices, int n, const ct_tensor *values,
                                 bool accumulate_, ct_tensor *self) {
    CT_CHECK_ARG("index_put", t);
    CT_CHECK_ARG("index_put", values);
    if (n < 0 || n > CT_MAX_DIMS || (n > 0 && !indices)) {
        ct_error(CT_ERROR_VALUE, "index_put", "expected a list of at most %d indices, got %d", CT_MAX_DIMS, n);
        return NULL;
    }
    ct_call c = {.op = CT_OP_index_put, .nin = 2, .in = {t, values}, .list = indices, .nlist = n, .nints = 1,
                 .ints = {accumulate_}, .dtype = CT_DTYPE_UNDEFINED};
    if (self)
        ct_ix_inplace(&c, self);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_index_put(const ct_tensor *t, const ct_tensor *const *indices, int n, const ct_tensor *values,
                        bool accumulate_) {
    return call_index_put(t, indices, n, values, accumulate_, NULL);
}
ct_tensor *ct_index_put_(ct_tensor *t, const ct_tensor *const *indices, int n, const ct_tensor *values,
                         bool accumulate_) {
    return call_index_put(t, indices, n, values, accumulate_, t);
}
