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
