/* Copies and dtype conversions: copy_, contiguous, clone, to, to_device, fill_, full,
 * item (the implementations behind the dispatched ops: view.h, factory.h). The data
 * moves through the device interface of the tensors' backend (src/core/device.h); the
 * core checks arguments, broadcasts, allocates and converts single elements. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "cast.h"
#include "checks.h"
#include "device.h"
#include "dtype.h"
#include "factory.h"
#include "view.h"

bool ct_broadcast_strides(const ct_tensor *src, const int64_t *shape, int ndim, int64_t *out) {
    if (src->ndim > ndim)
        return false;
    int lead = ndim - src->ndim;
    for (int i = 0; i < ndim; i++) {
        if (i < lead) {
            out[i] = 0;
            continue;
        }
        int64_t s = src->shape[i - lead];
        if (s == shape[i])
            out[i] = s == 1 ? 0 : src->strides[i - lead];
        else if (s == 1)
            out[i] = 0;
        else
            return false;
    }
    return true;
}

/* ------------------------------------------------------------------ scalars */

/* One element through the same rules as the cast loops (cast.h). */
#define LOAD_AS_DOUBLE(D, T) \
    case D: return (double)LOAD_##D(p);
double ct_load_double(const void *p, ct_dtype d) {
    switch (d) {
        CT_FOR_EACH_DTYPE(LOAD_AS_DOUBLE)
    default: return 0;
    }
}

#define LOAD_AS_INT64(D, T)            \
    case D: {                          \
        int64_t out;                   \
        STORE_CT_DTYPE_INT64(&out, LOAD_##D(p), ISF_##D); \
        return out;                    \
    }
int64_t ct_load_int64(const void *p, ct_dtype d) {
    switch (d) {
        CT_FOR_EACH_DTYPE(LOAD_AS_INT64)
    default: return 0;
    }
}

#define STORE_FROM_DOUBLE(D, T) \
    case D: STORE_##D(p, v, 1); break;
void ct_store_double(void *p, ct_dtype d, double v) {
    switch (d) {
        CT_FOR_EACH_DTYPE(STORE_FROM_DOUBLE)
    default: break;
    }
}

#define STORE_FROM_INT64(D, T) \
    case D: STORE_##D(p, v, 0); break;
void ct_store_int64(void *p, ct_dtype d, int64_t v) {
    switch (d) {
        CT_FOR_EACH_DTYPE(STORE_FROM_INT64)
    default: break;
    }
}

void ct_store_scalar(void *p, ct_dtype d, ct_scalar s) {
    if (s.type == CT_SCALAR_FLOAT)
        ct_store_double(p, d, s.v.f);
    else if (s.type == CT_SCALAR_INT)
        ct_store_int64(p, d, s.v.i);
    else
        ct_store_int64(p, d, s.v.b ? 1 : 0);
}

/* ------------------------------------------------------------------ copy_ */

static bool ranges_overlap(const ct_tensor *a, const ct_tensor *b) {
    if (a->storage != b->storage || a->numel == 0 || b->numel == 0)
        return false;
    return true; /* conservative: any two views of one storage may overlap */
}

/* dst = src converted, on dst's device (src on the same device type). */
static bool copy_into(ct_tensor *dst, const ct_tensor *src, const int64_t *src_strides) {
    const ct_device_iface *dev = ct_device_need("copy_", dst->device.type);
    return dev && dev->copy(dst, src, src_strides) == CT_OK;
}

ct_tensor *ct_copy_impl(ct_tensor *dst, const ct_tensor *src) {
    CT_CHECK_ARG("copy_", dst);
    CT_CHECK_ARG("copy_", src);
    int64_t sstr[CT_MAX_DIMS];
    if (!ct_broadcast_strides(src, dst->shape, dst->ndim, sstr)) {
        char a[256], b[256];
        ct_error(CT_ERROR_VALUE, "copy_", "the source of shape %s cannot be broadcast to the destination's shape %s",
                 ct_shape_str(src->shape, src->ndim, a, sizeof a), ct_shape_str(dst->shape, dst->ndim, b, sizeof b));
        return NULL;
    }
    if (!ct_device_equal(dst->device, src->device) && dst->device.type != CT_DEVICE_META &&
        src->device.type != CT_DEVICE_META) {
        /* Between devices: the backend of the side that is not the CPU moves the data
         * (CPU <-> CUDA, or two CUDA devices). */
        const ct_device_iface *dev = ct_device_iface_get(dst->device.type != CT_DEVICE_CPU ? dst->device.type
                                                                                          : src->device.type);
        if (dev && dev->copy_cross)
            return dev->copy_cross(dst, src) == CT_OK ? ct_tensor_ref(dst) : NULL;
    }
    if (dst->device.type != src->device.type) {
        char a[32], b[32];
        ct_error(CT_ERROR_DEVICE, "copy_", "cannot copy from a %s tensor into a %s tensor",
                 ct_device_str(src->device, a, sizeof a), ct_device_str(dst->device, b, sizeof b));
        return NULL;
    }
    /* The dispatcher bumps dst's version (ct_copy_ is an in-place op). */
    if (dst->device.type == CT_DEVICE_META || dst->numel == 0)
        return ct_tensor_ref(dst);
    if (ranges_overlap(dst, src) && !(dst == src)) {
        /* Read everything before writing anything. */
        ct_scope_begin();
        ct_tensor *tmp = ct_clone_impl(src);
        if (!tmp) {
            ct_scope_end();
            return NULL;
        }
        ct_broadcast_strides(tmp, dst->shape, dst->ndim, sstr);
        bool ok = copy_into(dst, tmp, sstr);
        ct_scope_end();
        if (!ok)
            return NULL;
    } else if (dst != src && !copy_into(dst, src, sstr)) {
        return NULL;
    }
    return ct_tensor_ref(dst);
}

ct_tensor *ct_clone_impl(const ct_tensor *t) {
    CT_CHECK_ARG("clone", t);
    ct_tensor *out = ct_tensor_new("clone", t->shape, NULL, t->ndim, t->dtype, t->device);
    if (!out)
        return NULL;
    if (t->device.type != CT_DEVICE_META && t->numel > 0 && !copy_into(out, t, t->strides))
        return NULL; /* out stays with the scope */
    return out;
}

ct_tensor *ct_contiguous_impl(const ct_tensor *t) {
    CT_CHECK_ARG("contiguous", t);
    if (ct_tensor_is_contiguous(t))
        return ct_tensor_ref(t);
    return ct_clone_impl(t);
}

ct_tensor *ct_to_dtype_impl(const ct_tensor *t, ct_dtype dtype) {
    CT_CHECK_ARG("to", t);
    if (!ct_dtype_valid(dtype)) {
        ct_error(CT_ERROR_TYPE, "to", "invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (dtype == t->dtype)
        return ct_tensor_ref(t);
    ct_tensor *out = ct_tensor_new("to", t->shape, NULL, t->ndim, dtype, t->device);
    if (!out)
        return NULL;
    if (t->device.type != CT_DEVICE_META && t->numel > 0 && !copy_into(out, t, t->strides))
        return NULL; /* out stays with the scope */
    return out;
}

ct_tensor *ct_to_device_impl(const ct_tensor *t, ct_device device) {
    CT_CHECK_ARG("to_device", t);
    if (ct_device_equal(t->device, device))
        return ct_tensor_ref(t);
    if (t->device.type == CT_DEVICE_META && device.type != CT_DEVICE_META) {
        ct_error(CT_ERROR_DEVICE, "to_device", "cannot copy out of meta tensor; it has no data");
        return NULL;
    }
    if (!ct_check_device("to_device", device))
        return NULL;
    if (device.type == CT_DEVICE_META) /* only the metadata goes */
        return ct_tensor_new("to_device", t->shape, NULL, t->ndim, t->dtype, device);
    /* Data moves through the backend of the side that is not the CPU. */
    const ct_device_iface *dev = ct_device_need("to_device", t->device.type != CT_DEVICE_CPU ? t->device.type
                                                                                             : device.type);
    if (!dev)
        return NULL;
    if (dev->to_device)
        return dev->to_device(t, device);
    ct_tensor *out = ct_tensor_new("to_device", t->shape, NULL, t->ndim, t->dtype, device);
    if (!out || !dev->copy_cross || dev->copy_cross(out, t) != CT_OK) {
        if (out && !dev->copy_cross)
            ct_error(CT_ERROR_NOT_IMPLEMENTED, "to_device", "the %s backend cannot copy between devices", dev->name);
        return NULL; /* out stays with the scope */
    }
    return out;
}

/* ------------------------------------------------------------------ fills */

/* bump: t was just made here (full), and its version counts this write; the version
 * of fill_'s tensor is bumped by the dispatcher, once, as for every in-place op. */
static bool fill_with(ct_tensor *t, ct_scalar value, bool bump) {
    if (bump)
        ct_tensor_bump_version(t);
    if (t->device.type == CT_DEVICE_META || t->numel == 0)
        return true;
    char one[16];
    ct_store_scalar(one, t->dtype, value);
    size_t esz = ct_dtype_size(t->dtype);
    const ct_device_iface *dev = ct_device_need("fill_", t->device.type);
    return dev && dev->fill(t, one, esz) == CT_OK;
}

ct_status ct_check_scalar_fits(const char *op, ct_scalar s, ct_dtype d) {
    /* PyTorch refuses fill values the dtype cannot hold (checked_convert): integers
     * outside the range (for unsigned types, negatives down to -max wrap and are
     * accepted), finite floats beyond the float type's range. NaN and infinities are
     * fine for floating types; bool takes anything. */
    if (d == CT_DTYPE_BOOL)
        return CT_OK;
    double lo, hi;
    switch (d) {
    case CT_DTYPE_UINT8: lo = 0, hi = 255; break;
    case CT_DTYPE_INT8: lo = -128, hi = 127; break;
    case CT_DTYPE_INT16: lo = -32768, hi = 32767; break;
    case CT_DTYPE_INT32: lo = -2147483648.0, hi = 2147483647.0; break;
    case CT_DTYPE_UINT16: lo = 0, hi = 65535; break;
    case CT_DTYPE_UINT32: lo = 0, hi = 4294967295.0; break;
    case CT_DTYPE_INT64: lo = -9223372036854775808.0, hi = 9223372036854775807.0; break;
    case CT_DTYPE_UINT64: lo = 0, hi = 18446744073709551615.0; break;
    case CT_DTYPE_FLOAT16: lo = -65504, hi = 65504; break;
    case CT_DTYPE_BFLOAT16: lo = -3.3895313892515355e38, hi = 3.3895313892515355e38; break;
    case CT_DTYPE_FLOAT32: lo = -3.4028234663852886e38, hi = 3.4028234663852886e38; break;
    default: return CT_OK;
    }
    bool ok;
    if (s.type == CT_SCALAR_INT && ct_dtype_is_integral(d, false)) {
        /* exact integer comparison: doubles cannot hold every int64 */
        int64_t v = s.v.i;
        if (d == CT_DTYPE_INT64 || d == CT_DTYPE_UINT64)
            ok = true;
        else if (!ct_dtype_is_signed(d)) /* unsigned: negatives that wrap are accepted */
            ok = (double)v <= hi && -(double)v <= hi;
        else
            ok = (double)v >= lo && (double)v <= hi;
    } else {
        double v = ct_scalar_to_double(s);
        if (isnan(v) || isinf(v))
            ok = ct_dtype_is_floating(d);
        else if (ct_dtype_is_integral(d, false) && !ct_dtype_is_signed(d))
            ok = v <= hi && -v <= hi;
        else
            ok = v >= lo && v <= hi;
    }
    if (!ok)
        return ct_error(CT_ERROR_VALUE, op, "value cannot be converted to type %s without overflow", ct_dtype_name(d));
    return CT_OK;
}

ct_tensor *ct_fill_impl(ct_tensor *t, ct_scalar value) {
    CT_CHECK_ARG("fill_", t);
    if (ct_check_no_internal_overlap("fill_", t)) /* Note [Internal overlap] */
        return NULL;
    if (ct_check_scalar_fits("fill_", value, t->dtype))
        return NULL;
    return fill_with(t, value, false) ? ct_tensor_ref(t) : NULL;
}

static ct_dtype infer_scalar_dtype(ct_scalar v) {
    return v.type == CT_SCALAR_BOOL ? CT_DTYPE_BOOL : v.type == CT_SCALAR_INT ? CT_DTYPE_INT64 : ct_get_default_dtype();
}

ct_tensor *ct_full_impl(const int64_t *shape, int ndim, ct_scalar value, ct_dtype dtype, ct_device device) {
    if (dtype == CT_DTYPE_UNDEFINED)
        dtype = infer_scalar_dtype(value);
    if (ct_dtype_valid(dtype) && ct_check_scalar_fits("full", value, dtype))
        return NULL;
    ct_tensor *t = ct_tensor_new("full", shape, NULL, ndim, dtype, device);
    if (!t || !fill_with(t, value, true))
        return NULL; /* t stays with the scope */
    return t;
}

/* ------------------------------------------------------------------ elements */

static ct_status element_ptr(const char *op, const ct_tensor *t, const int64_t *index, char **out) {
    CT_CHECK_ARG_STATUS(op, t);
    if (t->device.type != CT_DEVICE_CPU)
        return ct_error(CT_ERROR_DEVICE, op, "element access needs a CPU tensor");
    if (t->ndim > 0 && !index)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "index is NULL for a %d-d tensor", t->ndim);
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++) {
        int64_t k = index[i] < 0 ? index[i] + t->shape[i] : index[i];
        if (k < 0 || k >= t->shape[i])
            return ct_error(CT_ERROR_INDEX, op, "index %lld is out of bounds for dimension %d with size %lld",
                            (long long)index[i], i, (long long)t->shape[i]);
        off += k * t->strides[i];
    }
    *out = ct_tensor_ptr(t) + off * (int64_t)ct_dtype_size(t->dtype);
    return CT_OK;
}

ct_status ct_tensor_get(const ct_tensor *t, const int64_t *index, double *out) {
    char *p = NULL;
    ct_status st = element_ptr("get", t, index, &p);
    if (st == CT_OK)
        *out = ct_load_double(p, t->dtype);
    return st;
}

ct_status ct_tensor_set(ct_tensor *t, const int64_t *index, double value) {
    char *p = NULL;
    ct_status st = element_ptr("set", t, index, &p);
    if (st == CT_OK) {
        ct_store_double(p, t->dtype, value);
        ct_tensor_bump_version(t);
    }
    return st;
}

/* Note [Host reads under capture] (error.h) */
static _Atomic(ct_host_read_fn) host_read_hook;

void ct_core_set_host_read_hook(ct_host_read_fn fn) { atomic_store(&host_read_hook, fn); }

ct_status ct_core_host_read(const char *op) {
    ct_host_read_fn fn = atomic_load_explicit(&host_read_hook, memory_order_acquire);
    return fn ? fn(op) : CT_OK;
}

/* buf (16 bytes) receives the element of a CUDA tensor. */
static ct_status item_ptr(const char *op, const ct_tensor *t, char **p, char *buf) {
    CT_CHECK_ARG_STATUS(op, t);
    if (ct_core_host_read(op) != CT_OK)
        return ct_last_status();
    if (t->numel != 1)
        return ct_error(CT_ERROR_VALUE, op, "a Tensor with %lld elements cannot be converted to Scalar",
                        (long long)t->numel);
    if (t->device.type == CT_DEVICE_CPU) {
        *p = ct_tensor_ptr(t);
        return CT_OK;
    }
    if (t->device.type == CT_DEVICE_META)
        return ct_error(CT_ERROR_DEVICE, op, "item needs a CPU tensor");
    const ct_device_iface *dev = ct_device_need(op, t->device.type);
    if (!dev)
        return ct_last_status();
    *p = buf;
    return dev->read_element(t, 0, buf);
}

ct_status ct_item_double(const ct_tensor *t, double *out) {
    char *p = NULL, buf[16];
    ct_status st = item_ptr("item", t, &p, buf);
    if (st == CT_OK)
        *out = ct_load_double(p, t->dtype);
    return st;
}

ct_status ct_item_int64(const ct_tensor *t, int64_t *out) {
    char *p = NULL, buf[16];
    ct_status st = item_ptr("item", t, &p, buf);
    if (st == CT_OK)
        *out = ct_load_int64(p, t->dtype);
    return st;
}
