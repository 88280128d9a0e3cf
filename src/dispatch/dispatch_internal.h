/* Dispatcher internals shared by the files of src/dispatch. */
#ifndef CT_DISPATCH_INTERNAL_H
#define CT_DISPATCH_INTERNAL_H

#include "call.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

static inline ct_dispatch_key ct_backend_key(ct_device d) {
    return d.type == CT_DEVICE_CUDA ? CT_KEY_CUDA : d.type == CT_DEVICE_META ? CT_KEY_META : CT_KEY_CPU;
}

/* Runs the one-time set-up (default kernels, logging from the environment). */
void ct_dispatch_ensure_init(void);
/* A kernel used for every op that has none of its own at key (logging, fall-through). */
void ct_dispatch_register_fallback(ct_dispatch_key key, ct_kernel_fn fn);
/* A counter that every override added or removed bumps (compiled graphs guard on it). */
uint64_t ct_dispatch_generation(void);
/* Turns a functionality key on or off for every thread. */
void ct_dispatch_set_global_key(ct_dispatch_key key, bool on);

/* Note [Fast lane] (dispatch.c): true when a call of op whose inputs are CPU tensors
 * that do not require grad would run exactly op's default CPU kernel and nothing else
 * (no functionality key on, no override at CPU, profiler off). */
bool ct_dispatch_fast_lane(ct_op op);
/* The fast lane's implementation, installed by the CPU backend: the result of a
 * functional call of op on a (and b for binary ops), or NULL (no error set) when the
 * call must take the boxed route. */
typedef ct_tensor *(*ct_fast_lane_fn)(ct_op op, const ct_tensor *a, const ct_tensor *b);
void ct_dispatch_set_fast_lane_fn(ct_fast_lane_fn fn);
/* What a public wrapper asks first: the lane's result, or NULL for the boxed route. */
ct_tensor *ct_dispatch_fast(ct_op op, const ct_tensor *a, const ct_tensor *b);
/* Counts a call that took the lane (per thread; tests read it). */
void ct_dispatch_fast_lane_taken(void);
uint64_t ct_dispatch_fast_lane_hits(void);
/* Tests: off sends every call the boxed route. */
void ct_dispatch_set_fast_lane(bool on);


/* Note [Autocast of composites] (src/amp/autocast.c): a COMPOSITE op of the autocast
 * policy table passes its tensor arguments (NULL entries allowed) on entry; inside an
 * autocast region the hook replaces them by their casts, owned by the innermost scope.
 * Outside a region, or below the AUTOCAST key, it returns at once. False, with the
 * error set, when a cast failed. */
typedef bool (*ct_composite_cast_fn)(ct_op op, const ct_tensor **args, int n);
void ct_dispatch_set_composite_cast(ct_composite_cast_fn fn);
bool ct_dispatch_composite_cast(ct_op op, const ct_tensor **args, int n);
/* The first lines of such a composite: its arguments become their casts, or the
 * composite returns NULL when a cast failed. */
#define CT_AUTOCAST_COMPOSITE2(op, a, b)                                  \
    do {                                                                  \
        const ct_tensor *args_[2] = {(a), (b)};                           \
        if (!ct_dispatch_composite_cast(CT_OP_##op, args_, 2))            \
            return NULL;                                                  \
        (a) = args_[0];                                                   \
        (b) = args_[1];                                                   \
    } while (0)
#define CT_AUTOCAST_COMPOSITE3(op, a, b, c)                               \
    do {                                                                  \
        const ct_tensor *args_[3] = {(a), (b), (c)};                      \
        if (!ct_dispatch_composite_cast(CT_OP_##op, args_, 3))            \
            return NULL;                                                  \
        (a) = args_[0];                                                   \
        (b) = args_[1];                                                   \
        (c) = args_[2];                                                   \
    } while (0)

/* Note [Start-up without memory] (dispatch.c): the registry brackets one attempt at
 * registering every kernel with these; ok is false when a registration of the attempt
 * ran out of memory. */
void ct_dispatch_registration_begin(void);
bool ct_dispatch_registration_ok(void);

/* Note [Observer hook] (dispatch.c). run_call must run the call through
 * ct_dispatch_run; the override events are told after the change. Any member may be
 * NULL. */
typedef struct ct_dispatch_observer {
    ct_status (*run_call)(ct_call *call);
    void (*override_added)(ct_op op, ct_dispatch_key key, int64_t handle, uint32_t flags);
    void (*override_removed)(ct_op op, ct_dispatch_key key, int64_t handle);
} ct_dispatch_observer;
/* Installs the observer (the struct must outlive its use); NULL removes it. */
void ct_dispatch_set_observer(const ct_dispatch_observer *obs);
/* Turns the per-call hook on or off (the profiler, while it records). */
void ct_dispatch_observe_calls(bool on);
/* ct_dispatch's body without the observer: computes the key set and runs the call. */
ct_status ct_dispatch_run(ct_call *call);

CT_BACKEND_END

#endif /* CT_DISPATCH_INTERNAL_H */
