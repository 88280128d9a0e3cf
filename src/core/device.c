/* Device types: names, and the table of backend interfaces (Note [Device interface]
 * in device.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "registry.h"

#define CT_DEVICE_TYPES 3 /* CPU, CUDA, META */

static _Atomic(const ct_device_iface *) ifaces[CT_DEVICE_TYPES];
static _Atomic(const char *) unavailable[CT_DEVICE_TYPES];

static const char *type_name(ct_device_type type) {
    switch (type) {
    case CT_DEVICE_CPU: return "cpu";
    case CT_DEVICE_CUDA: return "cuda";
    case CT_DEVICE_META: return "meta";
    default: return "unknown";
    }
}

ct_status ct_device_register(ct_device_type type, const ct_device_iface *iface) {
    if ((int)type < 0 || (int)type >= CT_DEVICE_TYPES || type == CT_DEVICE_META)
        return ct_error(CT_ERROR_DEVICE, "device_register", "cannot register an interface for device type %d",
                        (int)type);
    if (iface && iface->alloc && ct_alloc_set_device_interface(type, iface->alloc) != CT_OK)
        return ct_last_status();
    atomic_store_explicit(&ifaces[type], iface, memory_order_release);
    return CT_OK;
}

const ct_device_iface *ct_device_iface_get(ct_device_type type) {
    if ((int)type < 0 || (int)type >= CT_DEVICE_TYPES)
        return NULL;
    const ct_device_iface *dev = atomic_load_explicit(&ifaces[type], memory_order_acquire);
    /* Note [Registry]: the backends register on first use; CUDA's when first asked for
     * (Note [Lazy CUDA backend]) */
    if (CT_UNLIKELY(!dev) && ct_runtime_load_backend(type))
        dev = atomic_load_explicit(&ifaces[type], memory_order_acquire);
    return dev;
}

void ct_device_set_unavailable_reason(ct_device_type type, const char *reason) {
    if ((int)type >= 0 && (int)type < CT_DEVICE_TYPES)
        atomic_store(&unavailable[type], reason);
}

const ct_device_iface *ct_device_need(const char *op, ct_device_type type) {
    const ct_device_iface *dev = ct_device_iface_get(type);
    if (dev)
        return dev;
    if (!ct_runtime_init())
        return NULL; /* out of memory while registering (its error is set) */
    if ((int)type < 0 || (int)type >= CT_DEVICE_TYPES || type == CT_DEVICE_META) {
        ct_error(CT_ERROR_DEVICE, op, "unknown device type %d", (int)type);
        return NULL;
    }
    const char *why = atomic_load(&unavailable[type]);
    ct_error(CT_ERROR_DEVICE, op, "no backend for device type %s is loaded%s%s", type_name(type), why ? ": " : "",
             why ? why : "");
    return NULL;
}

const char *ct_device_str(ct_device device, char *buf, size_t cap) {
    if (!buf || cap == 0)
        return "";
    switch (device.type) {
    case CT_DEVICE_CPU: snprintf(buf, cap, "cpu"); break;
    case CT_DEVICE_META: snprintf(buf, cap, "meta"); break;
    case CT_DEVICE_CUDA: snprintf(buf, cap, "cuda:%d", (int)device.index); break;
    default: snprintf(buf, cap, "unknown"); break;
    }
    return buf;
}

ct_status ct_device_parse(const char *s, ct_device *out) {
    if (!s || !out)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "device", "%s is NULL", !s ? "device string" : "out");
    static const ct_device_type types[] = {CT_DEVICE_CPU, CT_DEVICE_CUDA, CT_DEVICE_META};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const char *name = type_name(types[i]);
        size_t n = strlen(name);
        if (strncmp(s, name, n) != 0 || (s[n] != '\0' && s[n] != ':'))
            continue;
        long index = 0;
        if (s[n] == ':') { /* torch.device("cuda:1"); "cpu:0" and "meta:0" are accepted as PyTorch does */
            const char *p = s + n + 1;
            char *end = NULL;
            index = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
            if (index < 0 || !end || *end || index > 1023 || (types[i] != CT_DEVICE_CUDA && index != 0))
                break;
        }
        *out = ct_device_make(types[i], (int32_t)index);
        return CT_OK;
    }
    return ct_error(CT_ERROR_VALUE, "device", "Expected one of cpu, cuda, meta device type at start of device string: "
                    "%s", s);
}

/* Note [Default device]
 * Thread-local, as torch.set_default_device is (it works through a per-thread
 * function mode): a data loader thread making tensors is not moved by the training
 * thread's choice. Only the nn layer constructors read it. */
static _Thread_local ct_device default_device = {CT_DEVICE_CPU, 0};

ct_device ct_get_default_device(void) { return default_device; }

ct_status ct_set_default_device(ct_device device) {
    if ((int)device.type < 0 || (int)device.type >= CT_DEVICE_TYPES)
        return ct_error(CT_ERROR_DEVICE, "set_default_device", "unknown device type %d", (int)device.type);
    if (device.index < 0 || (device.type != CT_DEVICE_CUDA && device.index != 0))
        return ct_error(CT_ERROR_DEVICE, "set_default_device", "invalid device index %d for device type %s",
                        (int)device.index, type_name((ct_device_type)device.type));
    default_device = device;
    return CT_OK;
}

const char *ct_backend_info(void) {
    static char info[2048];
    static pthread_mutex_t info_lock = PTHREAD_MUTEX_INITIALIZER;
    ct_runtime_load_backend(CT_DEVICE_CUDA); /* Note [Lazy CUDA backend]: it reports whether CUDA loads */
    pthread_mutex_lock(&info_lock);
    size_t n = 0;
    info[0] = '\0';
    static const ct_device_type types[] = {CT_DEVICE_CPU, CT_DEVICE_CUDA};
    for (size_t i = 0; i < sizeof types / sizeof types[0] && n < sizeof info; i++) {
        const ct_device_iface *dev = atomic_load_explicit(&ifaces[types[i]], memory_order_acquire);
        const char *why = atomic_load(&unavailable[types[i]]);
        int w;
        if (dev)
            w = snprintf(info + n, sizeof info - n, "%s\n", dev->describe ? dev->describe() : dev->name);
        else
            w = snprintf(info + n, sizeof info - n, "%s: not loaded%s%s\n", type_name(types[i]), why ? ": " : "",
                         why ? why : "");
        if (w > 0)
            n += (size_t)w;
    }
    pthread_mutex_unlock(&info_lock);
    return info;
}
