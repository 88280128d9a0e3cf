/* ctorch amp: autocast (torch.autocast) and, in ctorch/optim.h, the gradient scaler.
 *
 *   ct_autocast_begin(CT_DEVICE_CPU, CT_BF16);
 *   ct_tensor *y = ct_linear(x, w, b);        -> bfloat16 (w stays float32)
 *   ct_tensor *p = ct_softmax(y, -1, CT_DTYPE_UNDEFINED);   -> float32
 *   ct_autocast_end();
 *
 * Inside an autocast region every call on tensors of the region's device type goes
 * through the AUTOCAST dispatch key, whose kernel casts the floating inputs of the ops
 * of a policy table (lower precision, float32, widest input type) and runs the op
 * below the key. The casts are ops, recorded by autograd, so gradients reach float32
 * parameters in float32. Regions nest and are per thread. docs/amp.md has the op
 * lists and what differs from PyTorch. */
#ifndef CTORCH_AMP_H
#define CTORCH_AMP_H

#include "core.h"
#include "dispatch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens an autocast region for device_type (CT_DEVICE_CPU or CT_DEVICE_CUDA) on this
 * thread: torch.autocast(device_type, dtype). dtype is float16 or bfloat16;
 * CT_DTYPE_UNDEFINED picks the device's default (float16 on CUDA, bfloat16 on CPU).
 * Close it with ct_autocast_end. */
CT_API ct_status ct_autocast_begin(ct_device_type device_type, ct_dtype dtype);
/* The full form: torch.autocast(device_type, dtype, enabled, cache_enabled).
 * enabled false opens a region in which autocast is off for device_type (inside an
 * enabled one: a float32 island). cache_enabled keeps one cast per float32 leaf that
 * requires grad for the whole outermost region (the weight-cast cache). */
CT_API ct_status ct_autocast_begin_ex(ct_device_type device_type, ct_dtype dtype, bool enabled, bool cache_enabled);
/* Closes the innermost region and restores the state before it; closing the
 * outermost one empties the weight-cast cache. An error when no region is open. */
CT_API ct_status ct_autocast_end(void);

/* Whether autocast is on for device_type on this thread, and its dtype there (the
 * device's default when no region set one). */
CT_API bool ct_autocast_is_enabled(ct_device_type device_type);
CT_API ct_dtype ct_autocast_get_dtype(ct_device_type device_type);
/* Regions open on this thread (enabled or not). */
CT_API int ct_autocast_nesting(void);
/* Casts held by the weight-cast cache of this thread (tests, diagnostics). */
CT_API int ct_autocast_cache_size(void);

/* An op's autocast policy (the table in src/amp/autocast.def):
 *   LOWER    floating inputs are cast to the autocast dtype (mm, conv2d, ...);
 *   FP32     float16/bfloat16 inputs are cast to float32 (softmax, sum, exp, ...);
 *   PROMOTE  floating inputs are cast to the widest floating input type (cat, ...);
 *   FP32_OUT float16/bfloat16 inputs run as they are and the op is asked for a
 *            float32 result, where that is the same as FP32 (cross_entropy's kernel);
 *   NONE     the op runs as called. */
typedef enum ct_autocast_policy {
    CT_AUTOCAST_NONE = 0,
    CT_AUTOCAST_LOWER = 1,
    CT_AUTOCAST_FP32 = 2,
    CT_AUTOCAST_PROMOTE = 3,
    CT_AUTOCAST_FP32_OUT = 4,
} ct_autocast_policy;

CT_API ct_autocast_policy ct_autocast_op_policy(ct_op op);
/* "lower_precision_fp", "fp32", "promote", "fp32_out", "none". */
CT_API const char *ct_autocast_policy_name(ct_autocast_policy policy);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_AMP_H */
