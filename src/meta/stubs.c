/* The stub tables (Note [Stubs] in stubs.h). */
#include "meta/kernels.h"
#include "meta/stubs.h"

#define CT_STUB(name, params) ct_stub_##name##_fn ct_stub_##name[CT_STUB_SLOTS];
#include "meta/stubs.def"
#undef CT_STUB

ct_status ct_stub_missing(const char *op, ct_device device) {
    char dev[32];
    return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "no kernel for this op on device %s",
                    ct_device_str(device, dev, sizeof dev));
}

ct_status ct_call_check_devices(const char *op, const ct_call *call) {
    const ct_tensor *first = call->nin > 0 ? call->in[0] : NULL;
    const ct_tensor *all[CT_CALL_MAX_IN + CT_CALL_MAX_OUT];
    int n = 0;
    for (int i = 0; i < call->nin; i++)
        all[n++] = call->in[i];
    if (call->mode != CT_CALL_FUNCTIONAL)
        for (int i = 0; i < call->nout; i++)
            all[n++] = call->out[i];
    for (int i = 0; i < n + call->nlist; i++) {
        const ct_tensor *t = i < n ? all[i] : call->list[i - n];
        if (!t)
            continue;
        if (!first) {
            first = t;
            continue;
        }
        if (!ct_device_equal(t->device, first->device)) {
            char a[32], b[32];
            return ct_error(CT_ERROR_DEVICE, op,
                            "Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                            ct_device_str(first->device, a, sizeof a), ct_device_str(t->device, b, sizeof b));
        }
    }
    return CT_OK;
}
