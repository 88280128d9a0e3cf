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
#ifdef CT_REGISTRY_DLOPEN
#define _GNU_SOURCE /* dladdr */
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef CT_REGISTRY_DLOPEN
#include <dlfcn.h>
#endif

#include "core/build_info.h"
#include "core/error.h"

#include "registry.h"
#include "amp/amp_internal.h"
#include "autograd/node.h"
#include "compile/compile_internal.h"
#include "core/device.h"
#include "cpu/cpu_backend.h"
#include "meta/kernels.h"
#include "dispatch/dispatch_internal.h"
#include "observe/observe.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool registered;

/* ------------------------------------------------------------------ loadable backends */

/* Note [Loadable backends]
 * The CUDA backend is a shared object of its own (Note [CUDA as a plug-in] in
 * CMakeLists.txt), as ggml loads its backends: libctorch.so links no CUDA library,
 * so it loads and runs where CUDA is absent, and maps cuBLASLt only into programs
 * that can use it. The registry looks for the backend in $CT_CUDA_BACKEND (a path),
 * then beside libctorch.so itself, then on the loader's search path; when one loads,
 * its entry point registers it like any built-in module. When none loads, the reason
 * (the loader's message: a missing libcudart, no such file) is what ct_backend_info
 * and every CUDA call report. A program linked with the static library has the
 * backend linked in (ctorch_cuda_static) or none. */
typedef ct_status (*backend_entry_fn)(void);
#define CT_CUDA_BACKEND_SONAME "libctorch_cuda.so.0"

static char cuda_reason[512];

#ifdef CT_REGISTRY_DLOPEN
/* The folder this library was loaded from, with its trailing slash, into dir. */
static bool own_folder(char *dir, size_t cap) {
    Dl_info info;
    if (!dladdr((void *)&ct_runtime_init, &info) || !info.dli_fname)
        return false;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash || (size_t)(slash - info.dli_fname) + 2 > cap)
        return false;
    memcpy(dir, info.dli_fname, (size_t)(slash - info.dli_fname) + 1);
    dir[slash - info.dli_fname + 1] = '\0';
    return true;
}

static void *try_open(const char *path, char *err, size_t cap) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(err, cap, "%s", e ? e : "cannot be loaded");
    }
    return h;
}

static backend_entry_fn find_cuda_backend(void) {
    char path[4096], beside[512] = "", searched[512] = "";
    const char *env = getenv("CT_CUDA_BACKEND");
    void *h = NULL;
    if (env && *env) {
        h = try_open(env, cuda_reason, sizeof cuda_reason);
    } else {
        if (own_folder(path, sizeof path) && strlen(path) + sizeof CT_CUDA_BACKEND_SONAME <= sizeof path) {
            strcat(path, CT_CUDA_BACKEND_SONAME);
            h = try_open(path, beside, sizeof beside);
        }
        if (!h)
            h = try_open(CT_CUDA_BACKEND_SONAME, searched, sizeof searched);
        /* a backend beside the library that failed to load says more than "not found" */
        if (!h)
            snprintf(cuda_reason, sizeof cuda_reason, "%s",
                     beside[0] && !strstr(beside, "No such file") ? beside : searched);
    }
    if (!h)
        return NULL;
    backend_entry_fn fn = (backend_entry_fn)(uintptr_t)dlsym(h, "ct_cuda_backend_entry");
    if (!fn)
        snprintf(cuda_reason, sizeof cuda_reason, "%s has no entry point ct_cuda_backend_entry", CT_CUDA_BACKEND_SONAME);
    return fn; /* the handle stays open for the life of the process */
}
#else
/* Defined by the static CUDA backend when a program links it (ctorch_cuda_static). */
extern ct_status ct_cuda_backend_entry(void) __attribute__((weak));

static backend_entry_fn find_cuda_backend(void) {
    if (ct_cuda_backend_entry)
        return ct_cuda_backend_entry;
    snprintf(cuda_reason, sizeof cuda_reason, "%s",
#ifdef CT_HAVE_CUDA
             "the program was linked with the static library without its CUDA backend (ctorch_cuda_static)"
#else
             "ctorch was built without CUDA support"
#endif
    );
    return NULL;
}
#endif

/* Registers the CUDA backend when one can be had; otherwise records why not. */
static void register_cuda(void) {
    static bool tried;
    static backend_entry_fn entry;
    if (!tried) {
        tried = true;
#if defined(CT_REGISTRY_DLOPEN) && !defined(CT_HAVE_CUDA)
        /* no backend was built with this library: do not pick up another build's */
        if (!getenv("CT_CUDA_BACKEND")) {
            snprintf(cuda_reason, sizeof cuda_reason, "ctorch was built without CUDA support");
        } else
#endif
            entry = find_cuda_backend();
    }
    char line[600];
    if (entry && entry() == CT_OK) {
        ct_build_info_set("CUDA", "yes (backend loaded)");
        return;
    }
    if (entry) { /* it loaded but could not register: out of memory, or no device support */
        snprintf(cuda_reason, sizeof cuda_reason, "its registration failed: %s", ct_last_error());
        ct_clear_error();
    }
    ct_device_set_unavailable_reason(CT_DEVICE_CUDA, cuda_reason);
    snprintf(line, sizeof line, "no (%s)", cuda_reason);
    ct_build_info_set("CUDA", line);
}

/* Every module registers; an attempt that ran out of memory (Note [Start-up without
 * memory] in src/dispatch/dispatch.c) is repeated by the next call, keeping what the
 * failed one filled in. */
static bool register_modules(void) {
    ct_dispatch_registration_begin();
    ct_meta_register();
    ct_cpu_register();
    ct_autograd_register_kernels();
    ct_amp_register();
    ct_compile_register();
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

/* Note [Lazy CUDA backend]
 * Loading the CUDA backend maps cuBLASLt and the CUDA runtime, and their relocations and
 * static initialisers make about 150 MB resident (a CPU-only "hello tensor" went from
 * 12 MB to 163 MB). So the start-up registers the built-in modules only, and the backend
 * is looked for when a CUDA device is first asked for: a CUDA tensor, a copy to CUDA,
 * ct_cuda_is_available and the other public CUDA functions, ct_backend_info and
 * ct_build_info (which report whether it loads). Every one of them reaches the device
 * table (ct_device_iface_get), which calls here; nothing reaches the CUDA dispatch key
 * without a CUDA tensor, so its kernels are in place before any call can need them.
 * Registering them later is safe: defaults are published with an atomic store, and
 * this runs under the registry's lock. */
static atomic_bool cuda_looked_for;

bool ct_runtime_load_backend(int type) {
    if (!ct_runtime_init())
        return false;
    if (type != CT_DEVICE_CUDA || atomic_load_explicit(&cuda_looked_for, memory_order_acquire) || registering)
        return true;
    pthread_mutex_lock(&lock);
    bool ok = true;
    if (!atomic_load(&cuda_looked_for)) {
        registering = true;
        ct_dispatch_registration_begin();
        register_cuda();
        ok = ct_dispatch_registration_ok();
        registering = false;
        if (ok)
            atomic_store_explicit(&cuda_looked_for, true, memory_order_release);
        else
            ct_error(CT_ERROR_OUT_OF_MEMORY, "dispatch", "out of memory while registering the CUDA kernels");
    }
    pthread_mutex_unlock(&lock);
    return ok;
}
