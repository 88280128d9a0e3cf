/* Per-device entry points of the structured kernels (PyTorch's DispatchStub).
 *
 * Note [Stubs]
 * A structured kernel (family STRUCTURED in ops.def) is one device-neutral kernel in
 * src/meta: it checks the arguments, computes the output's shape and dtype, allocates
 * the outputs, and stops there on META. On a device with data it calls that device's
 * stub, a plain function of the stub's signature (stubs.def) that only computes. The
 * CPU and CUDA backends fill their slots when they register; an empty slot is an
 * error naming the op and the device, as an empty dispatch slot is. So the shape rule
 * exists once, every backend refuses the same arguments with the same message, and
 * adding a backend is filling its slots, not editing the kernels. */
#ifndef CT_META_STUBS_H
#define CT_META_STUBS_H

#include "dispatch/call.h"
#include "meta/reduce_iter.h"
#include "meta/upsample.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* One slot per device type (ct_device_type: CPU, CUDA, META). */
#define CT_STUB_SLOTS 3

#define CT_STUB(name, params)                                    \
    typedef ct_status(*ct_stub_##name##_fn) params;              \
    extern ct_stub_##name##_fn ct_stub_##name[CT_STUB_SLOTS];
#include "meta/stubs.def"
#undef CT_STUB

/* The error of an empty slot: "op: no kernel for this op on device cuda:0". */
ct_status ct_stub_missing(const char *op, ct_device device);

/* Calls the stub name of device dev with the arguments that follow; op names the
 * caller in the error of an empty slot. */
#define CT_CALL_STUB(name, op, dev, ...)                                                           \
    ((unsigned)(dev).type < CT_STUB_SLOTS && ct_stub_##name[(dev).type] ? ct_stub_##name[(dev).type](__VA_ARGS__) \
                                                                         : ct_stub_missing(op, dev))

CT_BACKEND_END

#endif /* CT_META_STUBS_H */
