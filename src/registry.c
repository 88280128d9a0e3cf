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

#include "build_config.h"

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
#else
    ct_device_set_unavailable_reason(CT_DEVICE_CUDA, "ctorch was built without CUDA support");
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

bool ct_runtime_init(void) {
    if (atomic_load_explicit(&registered, memory_order_acquire))
        return true;
    pthread_mutex_lock(&lock);
    bool ok = atomic_load(&registered) || register_modules();
    if (ok)
        atomic_store_explicit(&registered, true, memory_order_release);
    pthread_mutex_unlock(&lock);
    return ok;
}

const char *ct_build_info(void) {
    static char info[1024];
    static _Atomic int done = 0;
    if (!done) {
        snprintf(info, sizeof info,
                 "ctorch %s\n"
                 "  build type: %s (%s)\n"
                 "  compiler:   %s\n"
                 "  system:     %s\n"
                 "  OpenMP:     %s\n"
                 "  BLAS:       %s\n"
                 "  SLEEF:      %s\n"
                 "  CUDA:       %s\n",
                 CT_VERSION_STRING, CT_BUILD_TYPE, CT_BUILD_DATE, CT_BUILD_COMPILER, CT_BUILD_SYSTEM,
#ifdef CT_HAVE_OPENMP
                 "yes",
#else
                 "no",
#endif
                 ct_blas_info(),
#ifdef CT_HAVE_SLEEF
                 "yes",
#else
                 "no",
#endif
                 CT_BUILD_CUDA);
        done = 1;
    }
    return info;
}

