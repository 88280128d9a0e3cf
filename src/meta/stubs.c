/* The stub tables (Note [Stubs] in stubs.h). */
#include "meta/stubs.h"

#define CT_STUB(name, params) ct_stub_##name##_fn ct_stub_##name[CT_STUB_SLOTS];
#include "meta/stubs.def"
#undef CT_STUB

ct_status ct_stub_missing(const char *op, ct_device device) {
    char dev[32];
    return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "no kernel for this op on device %s",
                    ct_device_str(device, dev, sizeof dev));
}
