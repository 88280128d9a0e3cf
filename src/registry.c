/* The one list of ctorch's built-in modules (Lua's linit.c): the backends and the keys
 * that register themselves, in order.
 *
 * Note [Registry]
 * Nothing below this file knows which modules exist. Each module has one registration
 * function that fills its own table entries: a backend registers its device interface
 * (src/core/device.h) and its kernels at its dispatch key, autograd its kernel at
 * AUTOGRAD. ct_runtime_init runs them once, the first time the dispatcher or the core's
 * device table is used; it is the one call that goes up the layers (from src/dispatch
 * and src/core/device.c), and the layering test allows it by name. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "core/build_info.h"
#include "core/error.h"

#include "registry.h"
#include "autograd/node.h"
#include "core/device.h"
#include "cpu/cpu_backend.h"
#include "meta/kernels.h"
#include "dispatch/dispatch_internal.h"
#include "observe/observe.h"
#ifdef CT_HAVE_CUDA
#include "cuda/cuda_ops.h"
#endif

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool registered;

/* Every module registers; an attempt that ran out of memory (Note [Start-up without
 * memory] in src/dispatch/dispatch.c) is repeated by the next call, keeping what the
 * failed one filled in. */
static bool register_modules(void) {
    ct_dispatch_registration_begin();
    ct_meta_register();
    ct_cpu_register();
    ct_autograd_register_kernels();
#ifdef CT_HAVE_CUDA
    ct_cuda_register();
    ct_build_info_set("CUDA", "yes");
#else
    ct_device_set_unavailable_reason(CT_DEVICE_CUDA, "ctorch was built without CUDA support");
    ct_build_info_set("CUDA", "no (built without CUDA support)");
#endif
    if (!ct_dispatch_registration_ok()) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, "dispatch", "out of memory while registering the kernels");
        return false;
    }
    /* last: the structured log sees the settings the observers apply from the
     * environment, and they find every kernel in place */
    ct_observe_register();
    return true;
}

/* Set on the thread that runs the registration: a module that asks for the runtime
 * while registering (the structured log writes ct_build_info) gets what is there. */
static CT_THREAD_LOCAL bool registering;

bool ct_runtime_init(void) {
    if (atomic_load_explicit(&registered, memory_order_acquire) || registering)
        return true;
    pthread_mutex_lock(&lock);
    registering = true;
    bool ok = atomic_load(&registered) || register_modules();
    registering = false;
    if (ok)
        atomic_store_explicit(&registered, true, memory_order_release);
    pthread_mutex_unlock(&lock);
    return ok;
}
