/* The AUTOCAST key: torch.autocast for ctorch.
 *
 * Note [Autocast key]
 * A region (ct_autocast_begin/end) is thread-local state, as grad mode is: which
 * device types autocast is on for, their dtypes, whether weight casts are cached. While
 * it is on for any device type, the AUTOCAST key is in this thread's include set, so
 * every call passes the key; outside every region the key is absent and a call pays
 * nothing (the fast lane and ct_call_keyset are as before). The ops of the policy
 * table (autocast.def) have this file's kernel at the key; the others fall through.
 * The kernel looks at the call's backend key (CUDA, else CPU; META calls are not
 * autocast), and when autocast is on for that device type it casts the call's
 * eligible inputs (floating, on that device type, not float64, not a wrapped C
 * scalar) by the op's policy, then runs the call below AUTOCAST with the key excluded,
 * so ops that the kernels below make are not autocast again. The casts are ct_to_dtype
 * calls: ops like any other, recorded by autograd, so a gradient flows back through
 * the cast to a float32 weight in float32. The kernel uses ops only, so it serves every
 * backend. In-place and out= calls, and calls of the FP32 ops with an explicit dtype=,
 * run as called (PyTorch's eligibility rules).
 *
 * Note [Weight-cast cache]
 * A float32 leaf that requires grad and is not a view (a parameter) cast to the
 * region's lower-precision dtype is cast once per outermost region: the cast is kept,
 * with a reference to its source, in a per-thread list that the outermost
 * ct_autocast_end empties. A weight used by several ops (tied embeddings, a layer run
 * twice) then costs one cast and its gradient flows back through one cast node. Casts
 * made while grad mode is off are not kept: a cast without history must not serve a
 * later call that records one.
 *
 * Note [Autocast of composites]
 * A COMPOSITE op (linear, matmul, mv, ...) never becomes a ct_call, so no kernel can
 * catch it at AUTOCAST. Those of the policy table call ct_dispatch_composite_cast on
 * entry with their tensor arguments; inside a region it reaches composite_cast here,
 * which replaces them by their casts, as the kernel does for a call. Outside a region it
 * costs one thread-local load. rms_norm's wrapper calls it too, before it packs the
 * call: eps=None is packed as the input dtype's epsilon, which must be that of the
 * float32 cast, as for a float32 input (the kernel then finds nothing to cast). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/amp.h"
#include "ctorch/autograd.h"
#include "dispatch/dispatch_internal.h"
#include "meta/op_info.h"
#include "amp/amp_internal.h"

/* ------------------------------------------------------------------ policy table */

static const uint8_t policy_of[CT_OP_COUNT] = {
#define CT_AUTOCAST(name, policy) [CT_OP_##name] = CT_AUTOCAST_##policy,
#include "autocast.def"
#undef CT_AUTOCAST
};

ct_autocast_policy ct_autocast_op_policy(ct_op op) {
    return op >= 0 && op < CT_OP_COUNT ? (ct_autocast_policy)policy_of[op] : CT_AUTOCAST_NONE;
}

const char *ct_autocast_policy_name(ct_autocast_policy policy) {
    switch (policy) {
    case CT_AUTOCAST_LOWER:
        return "lower_precision_fp";
    case CT_AUTOCAST_FP32:
        return "fp32";
    case CT_AUTOCAST_PROMOTE:
        return "promote";
    case CT_AUTOCAST_FP32_OUT:
        return "fp32_out";
    default:
        return "none";
    }
}

/* ------------------------------------------------------------------ state */

/* Per device type (CPU 0, CUDA 1): on or off and the dtype, 0 meaning the default. */
typedef struct amp_state {
    bool enabled[2];
    int8_t dtype_plus1[2]; /* ct_dtype + 1; 0: the device's default */
    bool cache_disabled;
} amp_state;

typedef struct cache_entry {
    ct_tensor *src;  /* strong reference: its address cannot be reused meanwhile */
    ct_tensor *cast; /* strong reference */
} cache_entry;

/* Note [Thread-local storage]: the small state inline, the stacks behind pointers. */
static CT_THREAD_LOCAL amp_state tls_state;
static CT_THREAD_LOCAL int tls_depth;
static CT_THREAD_LOCAL amp_state *tls_saved; /* tls_depth entries */
static CT_THREAD_LOCAL int tls_saved_cap;
static CT_THREAD_LOCAL cache_entry *tls_cache;
static CT_THREAD_LOCAL int tls_cache_n, tls_cache_cap;

static ct_dtype default_dtype(int dev) { return dev == CT_DEVICE_CUDA ? CT_F16 : CT_BF16; }

static ct_dtype state_dtype(int dev) {
    return tls_state.dtype_plus1[dev] ? (ct_dtype)(tls_state.dtype_plus1[dev] - 1) : default_dtype(dev);
}

static const char *device_type_name(ct_device_type t) {
    return t == CT_DEVICE_CPU ? "cpu" : t == CT_DEVICE_CUDA ? "cuda" : t == CT_DEVICE_META ? "meta" : "unknown";
}

static void apply_key(void) {
    ct_keyset inc = ct_tls_included();
    if (tls_state.enabled[CT_DEVICE_CPU] || tls_state.enabled[CT_DEVICE_CUDA])
        inc |= CT_KEYSET(CT_KEY_AUTOCAST);
    else
        inc &= ~CT_KEYSET(CT_KEY_AUTOCAST);
    ct_tls_set_included(inc);
}

static void cache_clear(void) {
    for (int i = 0; i < tls_cache_n; i++) {
        ct_release(tls_cache[i].cast);
        ct_release(tls_cache[i].src);
    }
    free(tls_cache);
    tls_cache = NULL;
    tls_cache_n = tls_cache_cap = 0;
}

ct_status ct_autocast_begin_ex(ct_device_type device_type, ct_dtype dtype, bool enabled, bool cache_enabled) {
    if (device_type != CT_DEVICE_CPU && device_type != CT_DEVICE_CUDA)
        return ct_error(CT_ERROR_VALUE, "autocast",
                        "unsupported autocast device_type '%s': autocast runs on 'cpu' and 'cuda'",
                        device_type_name(device_type));
    if (dtype == CT_DTYPE_UNDEFINED)
        dtype = default_dtype(device_type);
    if (dtype != CT_F16 && dtype != CT_BF16)
        return ct_error(CT_ERROR_VALUE, "autocast",
                        "%s autocast casts to float16 or bfloat16, but the target dtype is %s",
                        device_type == CT_DEVICE_CPU ? "CPU" : "CUDA", ct_dtype_name(dtype));
    if (tls_depth == tls_saved_cap) {
        int cap = tls_saved_cap ? 2 * tls_saved_cap : 8;
        amp_state *p = ct_xrealloc("autocast", tls_saved, (size_t)cap * sizeof *p);
        if (!p)
            return ct_last_status();
        tls_saved = p;
        tls_saved_cap = cap;
    }
    tls_saved[tls_depth++] = tls_state;
    tls_state.enabled[device_type] = enabled;
    tls_state.dtype_plus1[device_type] = (int8_t)(dtype + 1);
    tls_state.cache_disabled = !cache_enabled;
    apply_key();
    return CT_OK;
}

ct_status ct_autocast_begin(ct_device_type device_type, ct_dtype dtype) {
    return ct_autocast_begin_ex(device_type, dtype, true, true);
}

ct_status ct_autocast_end(void) {
    if (tls_depth == 0)
        return ct_error(CT_ERROR_RUNTIME, "autocast_end", "no autocast region is open on this thread");
    tls_state = tls_saved[--tls_depth];
    apply_key();
    if (tls_depth == 0) {
        cache_clear();
        free(tls_saved);
        tls_saved = NULL;
        tls_saved_cap = 0;
    }
    return CT_OK;
}

bool ct_autocast_is_enabled(ct_device_type device_type) {
    return (device_type == CT_DEVICE_CPU || device_type == CT_DEVICE_CUDA) && tls_state.enabled[device_type];
}

ct_dtype ct_autocast_get_dtype(ct_device_type device_type) {
    if (device_type != CT_DEVICE_CPU && device_type != CT_DEVICE_CUDA) {
        ct_error(CT_ERROR_VALUE, "autocast", "unsupported autocast device_type '%s': autocast runs on 'cpu' and 'cuda'",
                 device_type_name(device_type));
        return CT_DTYPE_UNDEFINED;
    }
    return state_dtype(device_type);
}

int ct_autocast_nesting(void) { return tls_depth; }
int ct_autocast_cache_size(void) { return tls_cache_n; }

/* ------------------------------------------------------------------ casts */

static bool eligible(const ct_tensor *t, int dev) {
    return t && !t->wrapped_number && t->device.type == dev && ct_dtype_is_floating(t->dtype) &&
           t->dtype != CT_F64;
}

/* The dtype the eligible inputs run in under policy, from the autocast dtype lower;
 * CT_DTYPE_UNDEFINED when nothing is to be cast. */
static ct_dtype widen(ct_dtype cur, ct_dtype next) {
    if (cur == CT_F32 || next == CT_F32)
        return CT_F32;
    return cur == next ? cur : CT_F32; /* float16 with bfloat16: float32 */
}

static ct_tensor *cast_to(const ct_tensor *t, ct_dtype to, int dev) {
    /* Note [Weight-cast cache] */
    bool cacheable = !tls_state.cache_disabled && to == state_dtype(dev) && t->dtype == CT_F32 && t->requires_grad &&
                     !t->is_view && ct_tensor_is_leaf(t) && ct_is_grad_enabled();
    if (cacheable)
        for (int i = 0; i < tls_cache_n; i++)
            if (tls_cache[i].src == t && tls_cache[i].cast->dtype == to)
                return tls_cache[i].cast;
    ct_tensor *c = ct_to_dtype(t, to);
    if (!c || !cacheable)
        return c;
    if (tls_cache_n == tls_cache_cap) {
        int cap = tls_cache_cap ? 2 * tls_cache_cap : 16;
        cache_entry *p = ct_xrealloc("autocast", tls_cache, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        tls_cache = p;
        tls_cache_cap = cap;
    }
    ct_retain(c);
    ct_retain((ct_tensor *)t);
    tls_cache[tls_cache_n++] = (cache_entry){(ct_tensor *)t, c};
    return c;
}

/* The dtype an op of this policy runs its eligible inputs in. */
static ct_dtype target_dtype(ct_autocast_policy policy, int dev, const ct_tensor *const *ts, int n,
                             const ct_tensor *const *list, int nlist) {
    if (policy == CT_AUTOCAST_LOWER)
        return state_dtype(dev);
    if (policy == CT_AUTOCAST_FP32)
        return CT_F32;
    ct_dtype to = state_dtype(dev);
    for (int i = 0; i < n; i++)
        if (eligible(ts[i], dev))
            to = widen(to, ts[i]->dtype);
    for (int i = 0; i < nlist; i++)
        if (eligible(list[i], dev))
            to = widen(to, list[i]->dtype);
    return to;
}

/* Replaces the eligible entries of ts[0..n) by their casts to `to`; false on error. */
static bool cast_all(const ct_tensor **ts, int n, ct_dtype to, int dev) {
    for (int i = 0; i < n; i++)
        if (eligible(ts[i], dev) && ts[i]->dtype != to) {
            const ct_tensor *c = cast_to(ts[i], to, dev);
            if (!c)
                return false;
            ts[i] = c;
        }
    return true;
}

static bool list_needs_cast(const ct_tensor *const *list, int n, ct_dtype to, int dev) {
    for (int i = 0; i < n; i++)
        if (eligible(list[i], dev) && list[i]->dtype != to)
            return true;
    return false;
}

/* The device type a call on these keys is autocast for, or -1. */
static int call_device(ct_keyset ks) {
    if (ct_keyset_has(ks, CT_KEY_CUDA))
        return CT_DEVICE_CUDA;
    if (ct_keyset_has(ks, CT_KEY_META))
        return -1;
    return CT_DEVICE_CPU;
}

/* ------------------------------------------------------------------ the kernel */

static ct_status run_below(ct_keyset below, ct_call *call) {
    ct_keyset ex = ct_tls_excluded();
    ct_tls_set_excluded(ex | CT_KEYSET(CT_KEY_AUTOCAST));
    ct_status st = ct_redispatch(below, call);
    ct_tls_set_excluded(ex);
    return st;
}

int ct_autocast_prepare(ct_keyset ks, ct_call *c2, const ct_tensor ***list_out) {
    ct_autocast_policy policy = ct_autocast_op_policy(c2->op);
    int dev = call_device(ks);
    *list_out = NULL;
    if (policy == CT_AUTOCAST_NONE || dev < 0 || !tls_state.enabled[dev] || c2->mode != CT_CALL_FUNCTIONAL ||
        ((policy == CT_AUTOCAST_FP32 || policy == CT_AUTOCAST_FP32_OUT) && c2->dtype != CT_DTYPE_UNDEFINED))
        return 0;
    ct_dtype to = target_dtype(policy, dev, c2->in, c2->nin, c2->list, c2->nlist);
    if (policy == CT_AUTOCAST_FP32_OUT) { /* Note [cross_entropy's loss dtype] in src/meta/nn_fused.c */
        if (eligible(c2->in[0], dev) && c2->in[0]->dtype != CT_F32)
            c2->dtype = CT_F32;
    } else if (!cast_all(c2->in, c2->nin, to, dev))
        return -1;
    if (c2->nlist > 0 && list_needs_cast(c2->list, c2->nlist, to, dev)) {
        const ct_tensor **list = ct_xmalloc("autocast", (size_t)c2->nlist * sizeof *list);
        if (!list)
            return -1;
        memcpy(list, c2->list, (size_t)c2->nlist * sizeof *list);
        c2->list = list;
        *list_out = list;
        if (!cast_all(list, c2->nlist, to, dev))
            return -1;
    }
    return 1;
}

static ct_status autocast_kernel(ct_keyset ks, ct_call *call, void *user_data) {
    (void)user_data;
    ct_keyset below = ct_keyset_below(ks, CT_KEY_AUTOCAST);
    ct_call c2 = *call;
    const ct_tensor **list = NULL;
    int r = ct_autocast_prepare(ks, &c2, &list);
    if (r <= 0) {
        free(list);
        return r < 0 ? ct_last_status() : ct_redispatch(below, call);
    }
    ct_status st = run_below(below, &c2);
    free(list);
    ct_call_take_outputs_of(call, &c2); /* the outputs belong to the caller's call */
    return st;
}

/* Note [Autocast of composites] */
static bool composite_cast(ct_op op, const ct_tensor **args, int n) {
    ct_autocast_policy policy = ct_autocast_op_policy(op);
    if (policy == CT_AUTOCAST_NONE)
        return true;
    int dev = -1;
    for (int i = 0; i < n; i++)
        if (args[i]) {
            int t = args[i]->device.type;
            if (t == CT_DEVICE_META)
                return true;
            if (t == CT_DEVICE_CUDA || dev < 0)
                dev = t;
        }
    if (dev < 0 || !tls_state.enabled[dev])
        return true;
    ct_dtype to = target_dtype(policy, dev, args, n, NULL, 0);
    return cast_all(args, n, to, dev);
}

void ct_amp_register(void) {
    for (int op = 0; op < CT_OP_COUNT; op++)
        if (policy_of[op] != CT_AUTOCAST_NONE && ct_op_table[op].family != CT_FAM_COMPOSITE)
            ct_dispatch_register_default(op, CT_KEY_AUTOCAST, autocast_kernel, (void *)(intptr_t)policy_of[op]);
    ct_dispatch_set_composite_cast(composite_cast);
}
