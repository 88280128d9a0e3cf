/* torch.nn.functional.pad: the public wrapper of the structured kernel of
 * src/meta/pad.c (Note [pad] there). */
#include <string.h>

#include "ctorch.h"
#include "dispatch/dispatch_internal.h"
#include "meta/indexing.h"

ct_tensor *ct_pad(const ct_tensor *t, const int64_t *pad, int npad, const char *mode, double value) {
    CT_CHECK_ARG("pad", t);
    if (npad < 0 || (npad > 0 && !pad)) {
        ct_error(CT_ERROR_VALUE, "pad", "invalid pad list");
        return NULL;
    }
    int m = -1;
    for (int i = 0; i < CT_PAD_MODE_COUNT; i++)
        if (mode && strcmp(mode, ct_pad_mode_name(i)) == 0)
            m = i;
    if (m < 0) {
        ct_error(CT_ERROR_NOT_IMPLEMENTED, "pad", "Unrecognised padding mode %s", mode ? mode : "NULL");
        return NULL;
    }
    if (npad > 2 * CT_MAX_DIMS) {
        ct_error(CT_ERROR_VALUE, "pad", "Padding length too large");
        return NULL;
    }
    if (m != CT_PAD_CONSTANT && value != 0) {
        ct_error(CT_ERROR_VALUE, "pad", "Padding mode \"%s\" doesn't take in value argument", mode);
        return NULL;
    }
    ct_call c = {.op = CT_OP_pad, .nin = 1, .in = {t}, .nints = npad + 1, .nscalars = 1,
                 .s = {ct_scalar_float(value)}, .dtype = CT_DTYPE_UNDEFINED};
    if (npad)
        memcpy(c.ints, pad, sizeof(int64_t) * (size_t)npad);
    c.ints[npad] = m;
    return ct_dispatch_1(&c);
}

ct_tensor *ct_pad_backward(const ct_tensor *grad_output, const int64_t *input_size, int ndim, const int64_t *pad,
                           int npad, const char *mode) {
    CT_CHECK_ARG("pad_backward", grad_output);
    if (ndim < 0 || ndim > CT_MAX_DIMS || (ndim > 0 && !input_size) || npad < 0 || (npad > 0 && !pad) ||
        ndim + npad + 3 > CT_CALL_MAX_INTS) {
        ct_error(CT_ERROR_VALUE, "pad_backward", "invalid input_size or pad list");
        return NULL;
    }
    int m = -1;
    for (int i = 0; i < CT_PAD_MODE_COUNT; i++)
        if (mode && strcmp(mode, ct_pad_mode_name(i)) == 0)
            m = i;
    if (m < 0) {
        ct_error(CT_ERROR_NOT_IMPLEMENTED, "pad_backward", "Unrecognised padding mode %s", mode ? mode : "NULL");
        return NULL;
    }
    ct_call c = {.op = CT_OP_pad_backward, .nin = 1, .in = {grad_output}, .nints = ndim + npad + 3,
                 .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = ndim;
    if (ndim)
        memcpy(c.ints + 1, input_size, sizeof(int64_t) * (size_t)ndim);
    c.ints[1 + ndim] = npad;
    if (npad)
        memcpy(c.ints + 2 + ndim, pad, sizeof(int64_t) * (size_t)npad);
    c.ints[ndim + npad + 2] = m;
    return ct_dispatch_1(&c);
}
