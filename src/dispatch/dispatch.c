/* The dispatcher: key sets, per-(op, key) kernel tables, run-time overrides. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "core/alloc.h"
#include "core/debug_refs.h"
#include "dispatch_internal.h"
#include "registry.h"

/* Note [Key numbers and priorities]
 * A key's number (ct_dispatch_key) is part of the public ABI: programs hold it in
 * their binaries (ct_op_override(op, CT_KEY_CPU, ...)), so it never changes, and a new
 * key takes the next free number. Its priority is a separate fact, written once, in
 * CT_KEY_PRIORITY below. A key set has one bit per key at the key's rank (its place
 * in that list), so the highest key of a set is still one count of leading zeros.
 * The public inline helpers (ct_keyset_of, ct_keyset_has, ct_keyset_below) read the
 * ranks from the exported table ct_dispatch_key_rank at run time: a program built
 * against an older header stays correct when a key is inserted between two others.
 * The table has CT_KEY_CAPACITY entries whatever the number of keys, so its size,
 * which a program's copy relocation records, never changes either. Inside this file
 * the kernel tables are indexed by rank and the ranks are compile-time constants
 * (RANK_*), so dispatch itself never translates a key: translating happens where a
 * key comes in (registration, overrides) or goes out (ct_keyset_highest, names).
 *
 * Adding a key: append it to ct_dispatch_key (include/ctorch/dispatch.h), put it at
 * its place in CT_KEY_PRIORITY, give it a name in key_names. test_dispatch checks the
 * numbers of the existing keys and that the order is the one docs/dispatcher.md
 * states. */

/* The priority order, lowest first. */
#define CT_KEY_PRIORITY(X) X(CPU) X(META) X(CUDA) X(AUTOGRAD) X(AUTOCAST) X(TRACE) X(LOGGING)

enum {
#define X(k) RANK_##k,
    CT_KEY_PRIORITY(X)
#undef X
    RANK_COUNT
};
_Static_assert((int)RANK_COUNT == (int)CT_KEY_COUNT, "every key has one place in CT_KEY_PRIORITY");
_Static_assert(CT_KEY_COUNT <= CT_KEY_CAPACITY, "a ct_keyset holds at most CT_KEY_CAPACITY keys");

#define RANK_BIT(k) ((ct_keyset)1u << RANK_##k)

const uint8_t ct_dispatch_key_rank[CT_KEY_CAPACITY] = {
#define X(k) [CT_KEY_##k] = RANK_##k,
    CT_KEY_PRIORITY(X)
#undef X
};

static const uint8_t key_of_rank[CT_KEY_CAPACITY] = {
#define X(k) [RANK_##k] = CT_KEY_##k,
    CT_KEY_PRIORITY(X)
#undef X
};

static bool key_valid(ct_dispatch_key key) { return (int)key >= 0 && key < CT_KEY_COUNT; }
static int rank_of(ct_dispatch_key key) { return ct_dispatch_key_rank[key]; }
static ct_keyset below_rank(ct_keyset ks, int rank) { return ks & (((ct_keyset)1u << rank) - 1u); }

/* Note [Kernel tables]
 * Each (op, key) slot holds an immutable array of kernels: the default first, then the
 * overrides in the order they were added. A call runs the last entry; ct_call_next
 * steps one entry down. Registering or removing an override builds a new array and
 * swaps the slot's pointer atomically, so dispatch reads one pointer and takes no lock.
 * Replaced arrays are kept on a retired list until exit: a call on another thread may
 * still be reading one, and overrides change rarely. */
typedef struct kernel_entry {
    ct_kernel_fn fn;
    void *user_data;
    int64_t handle; /* 0 for the default */
} kernel_entry;

typedef struct kernel_stack {
    int n;
    struct kernel_stack *retired_next;
    kernel_entry e[];
} kernel_stack;

static _Atomic(kernel_stack *) slots[CT_OP_COUNT][CT_KEY_COUNT]; /* [op][rank] */
static kernel_stack *retired;
/* Bumped by every override added or removed: a compiled graph guards on it
 * (src/compile), since its replay calls the kernels the capture saw. */
static atomic_uint_fast64_t generation;
static pthread_mutex_t override_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t next_handle = 1;

/* Per-key fallbacks, used when an op has no kernel at a key (by rank). */
static ct_kernel_fn key_fallback[CT_KEY_COUNT];

static const char *const key_names[CT_KEY_COUNT] = {
    [CT_KEY_CPU] = "CPU",           [CT_KEY_META] = "Meta",   [CT_KEY_CUDA] = "CUDA",
    [CT_KEY_AUTOGRAD] = "Autograd", [CT_KEY_AUTOCAST] = "Autocast", [CT_KEY_TRACE] = "Trace",
    [CT_KEY_LOGGING] = "Logging",
};

const char *ct_dispatch_key_name(ct_dispatch_key key) {
    return key_valid(key) ? key_names[key] : "Undefined";
}

ct_dispatch_key ct_keyset_highest(ct_keyset ks) {
    if (!ks)
        return CT_KEY_COUNT;
    return (ct_dispatch_key)key_of_rank[31 - __builtin_clz(ks)];
}

/* ------------------------------------------------------------------ TLS */

static CT_THREAD_LOCAL ct_keyset tls_included;
static CT_THREAD_LOCAL ct_keyset tls_excluded;
static CT_THREAD_LOCAL const char *tls_op_name; /* the op running on this thread (static name) */
static ct_keyset global_included; /* logging switched on for every thread */

ct_keyset ct_tls_included(void) { return tls_included; }
ct_keyset ct_tls_excluded(void) { return tls_excluded; }
void ct_tls_set_included(ct_keyset ks) { tls_included = ks; }
void ct_tls_set_excluded(ct_keyset ks) { tls_excluded = ks; }
void ct_dispatch_set_global_key(ct_dispatch_key key, bool on) {
    ct_keyset bit = (ct_keyset)1u << rank_of(key);
    if (on)
        global_included |= bit;
    else
        global_included &= ~bit;
}

static _Atomic(ct_composite_cast_fn) composite_cast;

void ct_dispatch_set_composite_cast(ct_composite_cast_fn fn) { atomic_store(&composite_cast, fn); }

bool ct_dispatch_composite_cast(ct_op op, const ct_tensor **args, int n) {
    if (__builtin_expect(!(tls_included & RANK_BIT(AUTOCAST)) || (tls_excluded & RANK_BIT(AUTOCAST)), 1))
        return true;
    ct_composite_cast_fn fn = atomic_load_explicit(&composite_cast, memory_order_acquire);
    return fn ? fn(op, args, n) : true;
}

/* ------------------------------------------------------------------ tables */

static kernel_stack *stack_new(int n) {
    kernel_stack *s = ct_xcalloc("dispatch", 1, sizeof *s + (size_t)n * sizeof(kernel_entry));
    if (s)
        s->n = n;
    return s;
}

/* Note [Start-up without memory]
 * The first op registers every kernel (src/registry.c), several hundred small
 * allocations. When one fails, the start-up stops, that op fails with
 * CT_ERROR_OUT_OF_MEMORY and the next op tries again, keeping the slots the failed
 * attempt filled. */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool init_done; /* set once dispatch_init has run: every op checks it */
static int registration_attempts; /* under the registry's lock */
static bool init_failed;      /* a registration of this attempt ran out of memory */

void ct_dispatch_registration_begin(void) {
    registration_attempts++;
    init_failed = false;
}

bool ct_dispatch_registration_ok(void) { return !init_failed; }

void ct_dispatch_register_default(ct_op op, ct_dispatch_key key, ct_kernel_fn fn, void *user_data) {
    if (atomic_load(&slots[op][rank_of(key)])) {
        CT_ASSERT(registration_attempts > 1); /* defaults are registered once, at start-up */
        return;
    }
    kernel_stack *s = init_failed ? NULL : stack_new(1);
    if (!s) {
        init_failed = true;
        return;
    }
    s->e[0] = (kernel_entry){fn, user_data, 0};
    atomic_store(&slots[op][rank_of(key)], s);
}

void ct_dispatch_register_fallback(ct_dispatch_key key, ct_kernel_fn fn) { key_fallback[rank_of(key)] = fn; }

/* Keys an op may have no kernel at simply pass the call on. */
static ct_status fallthrough(ct_keyset ks, ct_call *call, void *user_data) {
    (void)user_data;
    return ct_redispatch(below_rank(ks, call->cur_rank), call);
}

/* False (an error set) when the start-up ran out of memory: Note [Start-up without memory]. */
static __attribute__((noinline)) bool dispatch_init(void) {
    pthread_mutex_lock(&init_lock);
    if (!atomic_load(&init_done)) {
        key_fallback[RANK_AUTOGRAD] = fallthrough;
        key_fallback[RANK_AUTOCAST] = fallthrough;
        key_fallback[RANK_TRACE] = fallthrough;
        /* Note [Registry]: the built-in modules register themselves */
        if (!ct_runtime_init()) {
            pthread_mutex_unlock(&init_lock);
            return false;
        }
        atomic_store_explicit(&init_done, true, memory_order_release);
    }
    pthread_mutex_unlock(&init_lock);
    return true;
}

static inline bool dispatch_ready(void) {
    return __builtin_expect(atomic_load_explicit(&init_done, memory_order_acquire), 1) || dispatch_init();
}

/* ------------------------------------------------------------------ observer */

/* Note [Observer hook]
 * The dispatcher knows no observer. One observer (src/observe registers it) may be
 * told of every call while call observation is on (the profiler records spans; off,
 * this costs one load and a branch predicted not taken per call), and of overrides as
 * they are added and removed (the structured log). */
static _Atomic(const ct_dispatch_observer *) observer;
static atomic_bool observing;

void ct_dispatch_set_observer(const ct_dispatch_observer *obs) { atomic_store(&observer, obs); }

void ct_dispatch_observe_calls(bool on) { atomic_store(&observing, on); }

void ct_dispatch_ensure_init(void) { (void)dispatch_ready(); }

static bool op_valid(ct_op op) { return op >= 0 && op < CT_OP_COUNT; }

bool ct_op_has_kernel(ct_op op, ct_dispatch_key key) {
    if (!dispatch_ready() || !op_valid(op) || !key_valid(key))
        return false;
    kernel_stack *s = atomic_load_explicit(&slots[op][rank_of(key)], memory_order_acquire);
    return s && s->n > 0 && s->e[0].handle == 0 && s->e[0].fn != NULL;
}

int64_t ct_op_override(ct_op op, ct_dispatch_key key, ct_kernel_fn kernel, void *user_data, uint32_t flags) {
    if (!dispatch_ready())
        return -1;
    if (!op_valid(op)) {
        ct_error(CT_ERROR_VALUE, "op_override", "unknown op id %d", (int)op);
        return -1;
    }
    if (!key_valid(key)) {
        ct_error(CT_ERROR_VALUE, "op_override", "unknown dispatch key %d", (int)key);
        return -1;
    }
    if (!kernel) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "op_override", "kernel is NULL");
        return -1;
    }
    pthread_mutex_lock(&override_lock);
    _Atomic(kernel_stack *) *slot = &slots[op][rank_of(key)];
    kernel_stack *old = atomic_load(slot);
    int n_old = old ? old->n : 0;
    bool has_override = old && (old->n > 1 || old->e[0].handle != 0);
    if (has_override && !(flags & CT_OVERRIDE_ALLOW_MULTIPLE)) {
        pthread_mutex_unlock(&override_lock);
        ct_error(CT_ERROR_RUNTIME, "op_override",
                 "%s already has an override at key %s; pass CT_OVERRIDE_ALLOW_MULTIPLE to stack another",
                 ct_op_name(op), ct_dispatch_key_name(key));
        return -1;
    }
    /* Slot 0 is always the default (possibly NULL) so ct_call_next can reach it. */
    int base = old ? 0 : 1;
    kernel_stack *s = stack_new(n_old + base + 1);
    if (!s) {
        pthread_mutex_unlock(&override_lock);
        ct_error(CT_ERROR_OUT_OF_MEMORY, "op_override", "could not allocate the kernel table");
        return -1;
    }
    if (old)
        memcpy(s->e, old->e, (size_t)n_old * sizeof(kernel_entry));
    int64_t handle = next_handle++;
    s->e[n_old + base] = (kernel_entry){kernel, user_data, handle};
    atomic_store(slot, s);
    atomic_fetch_add(&generation, 1);
    if (old) {
        old->retired_next = retired;
        retired = old;
    }
    pthread_mutex_unlock(&override_lock);
    const ct_dispatch_observer *obs = atomic_load(&observer);
    if (obs && obs->override_added)
        obs->override_added(op, key, handle, flags);
    return handle;
}

ct_status ct_op_override_remove(int64_t handle) {
    if (handle <= 0)
        return ct_error(CT_ERROR_VALUE, "op_override_remove", "invalid override handle %lld", (long long)handle);
    pthread_mutex_lock(&override_lock);
    for (int op = 0; op < CT_OP_COUNT; op++)
        for (int rank = 0; rank < CT_KEY_COUNT; rank++) {
            kernel_stack *old = atomic_load(&slots[op][rank]);
            if (!old)
                continue;
            for (int i = 0; i < old->n; i++) {
                if (old->e[i].handle != handle)
                    continue;
                kernel_stack *s = stack_new(old->n - 1);
                if (!s) {
                    pthread_mutex_unlock(&override_lock);
                    return ct_error(CT_ERROR_OUT_OF_MEMORY, "op_override_remove", "out of memory");
                }
                memcpy(s->e, old->e, (size_t)i * sizeof(kernel_entry));
                memcpy(s->e + i, old->e + i + 1, (size_t)(old->n - i - 1) * sizeof(kernel_entry));
                atomic_store(&slots[op][rank], s);
                atomic_fetch_add(&generation, 1);
                old->retired_next = retired;
                retired = old;
                pthread_mutex_unlock(&override_lock);
                const ct_dispatch_observer *obs = atomic_load(&observer);
                if (obs && obs->override_removed)
                    obs->override_removed(op, (ct_dispatch_key)key_of_rank[rank], handle);
                return CT_OK;
            }
        }
    pthread_mutex_unlock(&override_lock);
    return ct_error(CT_ERROR_VALUE, "op_override_remove", "no override with handle %lld", (long long)handle);
}

uint64_t ct_dispatch_generation(void) { return atomic_load(&generation); }

/* ------------------------------------------------------------------ fast lane */

/* Note [Fast lane]
 * Most op calls in a program end up in the default CPU kernel with nothing around it:
 * no logging, tracing or autocast key on, no input that requires grad, no override,
 * the profiler off. For such calls the boxed route (a ct_call, its key set, a scope
 * for the kernel's temporaries, the kernel table) costs more than a small op itself.
 * An op whose kernel can run such a call directly (the plain elementwise ops on small
 * contiguous inputs, src/cpu/elementwise.c) asks ct_dispatch_fast_lane first; the answer is
 * a few loads and predictable branches. The inputs' part of the condition (CPU, no
 * requires_grad) is the caller's to check. Anything the lane cannot vouch for goes the
 * boxed route, which stays the reference: the lane must give bit-identical results. */
static atomic_bool fast_lane_off; /* tests switch the lane off to compare with the boxed route */
static CT_THREAD_LOCAL uint64_t fast_lane_hits;

bool ct_dispatch_fast_lane(ct_op op) {
    if (!dispatch_ready() || __builtin_expect(atomic_load_explicit(&observing, memory_order_relaxed), 0) ||
        (tls_included | global_included) != 0 || atomic_load_explicit(&fast_lane_off, memory_order_relaxed))
        return false;
    kernel_stack *s = atomic_load_explicit(&slots[op][RANK_CPU], memory_order_acquire);
    /* only the default kernel: no override stacked on it */
    return s && s->n == 1 && s->e[0].handle == 0;
}

static _Atomic(ct_fast_lane_fn) fast_lane_fn;

void ct_dispatch_set_fast_lane_fn(ct_fast_lane_fn fn) { atomic_store(&fast_lane_fn, fn); }

ct_tensor *ct_dispatch_fast(ct_op op, const ct_tensor *a, const ct_tensor *b) {
    if (!dispatch_ready()) /* the CPU backend installs the lane */
        return NULL;
    ct_fast_lane_fn fn = atomic_load_explicit(&fast_lane_fn, memory_order_relaxed);
    return fn ? fn(op, a, b) : NULL;
}

void ct_dispatch_fast_lane_taken(void) { fast_lane_hits++; }
uint64_t ct_dispatch_fast_lane_hits(void) { return fast_lane_hits; }
void ct_dispatch_set_fast_lane(bool on) { atomic_store(&fast_lane_off, !on); }

/* ------------------------------------------------------------------ dispatch */

static ct_status run_entry(ct_keyset ks, ct_call *call, int rank, int pos) {
    kernel_stack *s = atomic_load_explicit(&slots[call->op][rank], memory_order_acquire);
    int saved_rank = call->cur_rank, saved_pos = call->cur_pos;
    ct_status st;
    /* Skip empty default slots (an override stacked over "no kernel"). */
    while (s && pos >= 0 && !s->e[pos].fn)
        pos--;
    call->cur_rank = rank;
    call->cur_pos = pos;
    if (s && pos >= 0) {
        st = s->e[pos].fn(ks, call, s->e[pos].user_data);
    } else if (key_fallback[rank]) {
        st = key_fallback[rank](ks, call, NULL);
    } else {
        st = ct_error(CT_ERROR_NOT_IMPLEMENTED, ct_op_name(call->op), "no kernel for this op at dispatch key %s",
                      ct_dispatch_key_name((ct_dispatch_key)key_of_rank[rank]));
    }
    call->cur_rank = saved_rank;
    call->cur_pos = saved_pos;
    return st;
}

ct_status ct_redispatch(ct_keyset ks, ct_call *call) {
    if (!call)
        return ct_error_null("redispatch");
    if (!ks)
        return ct_error(CT_ERROR_RUNTIME, ct_op_name(call->op), "no dispatch key left to run this op");
    int rank = 31 - __builtin_clz(ks);
    kernel_stack *s = atomic_load_explicit(&slots[call->op][rank], memory_order_acquire);
    return run_entry(ks, call, rank, s ? s->n - 1 : -1);
}

ct_status ct_call_next(ct_keyset ks, ct_call *call) {
    if (!call)
        return ct_error_null("call_next");
    int rank = call->cur_rank;
    if (call->cur_pos <= 0) /* below the default: continue with the next key down */
        return ct_redispatch(below_rank(ks, rank), call);
    return run_entry(ks, call, rank, call->cur_pos - 1);
}

static inline ct_keyset backend_bit(ct_device d) {
    return d.type == CT_DEVICE_CUDA ? RANK_BIT(CUDA) : d.type == CT_DEVICE_META ? RANK_BIT(META) : RANK_BIT(CPU);
}

/* Backend key from the inputs' devices (the highest wins: CUDA over CPU), plus the
 * functionality keys the inputs and this thread ask for. */
ct_keyset ct_call_keyset(const ct_call *call) {
    ct_keyset ks = 0;
    bool requires_grad = false;
    for (int i = 0; i < call->nin; i++) {
        const ct_tensor *t = call->in[i];
        if (!t)
            continue;
        ks |= backend_bit(t->device);
        requires_grad |= t->requires_grad;
    }
    for (int i = 0; i < call->nlist; i++) {
        const ct_tensor *t = call->list[i];
        if (!t)
            continue;
        ks |= backend_bit(t->device);
        requires_grad |= t->requires_grad;
    }
    if (call->mode != CT_CALL_FUNCTIONAL)
        for (int i = 0; i < call->nout; i++)
            if (call->out[i]) {
                ks |= backend_bit(call->out[i]->device);
                requires_grad |= call->out[i]->requires_grad;
            }
    /* A factory has no input to take its backend from: its call carries the device.
     * For every other call this is one branch that is not taken. */
    if (__builtin_expect(call->has_device, 0))
        ks |= backend_bit(call->device);
    if (!ks)
        ks = RANK_BIT(CPU);
    if (requires_grad)
        ks |= RANK_BIT(AUTOGRAD);
    ks |= tls_included | global_included;
    return ks & ~tls_excluded;
}

/* Note [Ownership debug mode] (src/core/debug_refs.c): every tensor argument of a call
 * is checked here, the one place all of them pass, before any key runs. */
static __attribute__((noinline)) ct_status check_live_args(const ct_call *call) {
    const char *op = ct_op_name(call->op);
    for (int i = 0; i < call->nin; i++)
        if (ct_debug_refs_check_arg(op, call->in[i], "argument", i) != CT_OK)
            return ct_last_status();
    for (int i = 0; i < call->nlist; i++)
        if (call->list && ct_debug_refs_check_arg(op, call->list[i], "list entry", i) != CT_OK)
            return ct_last_status();
    if (call->mode != CT_CALL_FUNCTIONAL)
        for (int i = 0; i < call->nout; i++) {
            if (!call->out[i]) /* ct_retain refused a dead output: its error names the call */
                return ct_error_null(op);
            if (ct_debug_refs_check_arg(op, call->out[i], "output", i) != CT_OK)
                return ct_last_status();
        }
    return CT_OK;
}

ct_status ct_dispatch(ct_call *call) {
    if (!dispatch_ready()) {
        ct_call_clear_outputs(call);
        return ct_last_status();
    }
    if (CT_UNLIKELY(ct_debug_refs_on()) && check_live_args(call) != CT_OK) {
        ct_call_clear_outputs(call);
        return ct_last_status();
    }
    /* Note [Observer hook]: off, observing costs this one load and a branch that is
     * predicted not taken. */
    if (__builtin_expect(atomic_load_explicit(&observing, memory_order_relaxed), 0)) {
        const ct_dispatch_observer *obs = atomic_load_explicit(&observer, memory_order_acquire);
        if (obs && obs->run_call)
            return obs->run_call(call);
    }
    return ct_dispatch_run(call);
}

ct_status ct_dispatch_run(ct_call *call) {
    ct_keyset ks = ct_call_keyset(call);
    /* Memory the kernels ask for is attributed to this op in allocator traces; an op
     * running inside another restores the outer name when it returns. */
    const char *outer = tls_op_name;
    tls_op_name = ct_op_name(call->op);
    ct_alloc_set_context(tls_op_name);
    ct_scope_begin(); /* the kernels' temporaries; outputs are held by the call */
    ct_status st = ct_redispatch(ks, call);
    ct_scope_end();
    tls_op_name = outer;
    ct_alloc_set_context(outer);
    if (st != CT_OK)
        ct_call_clear_outputs(call);
    else if (call->mode != CT_CALL_FUNCTIONAL)
        for (int i = 0; i < call->nout; i++)
            if (call->out[i])
                ct_tensor_bump_version(call->out[i]);
    return st;
}

ct_tensor *ct_dispatch_1(ct_call *call) {
    if (ct_dispatch(call) != CT_OK)
        return NULL;
    ct_tensor *r = ct_call_take_output(call, 0);
    ct_call_clear_outputs(call);
    return r;
}

ct_tensor *ct_call_take_output(ct_call *call, int i) {
    ct_tensor *t = call->out[i];
    call->out[i] = NULL;
    if (!t) {
        ct_error(CT_ERROR_RUNTIME, ct_op_name(call->op), "the kernel produced no output %d", i);
        return NULL;
    }
    return ct_scope_adopt(t);
}

void ct_call_clear_outputs(ct_call *call) {
    for (int i = 0; i < CT_CALL_MAX_OUT; i++) {
        ct_release(call->out[i]);
        call->out[i] = NULL;
    }
}

void ct_call_take_outputs_of(ct_call *call, ct_call *copy) {
    for (int i = 0; i < CT_CALL_MAX_OUT; i++) {
        if (copy->out[i] == call->out[i])
            continue;
        ct_release(call->out[i]);
        call->out[i] = copy->out[i];
    }
    call->nout = copy->nout;
}

/* ------------------------------------------------------------------ accessors */

ct_op ct_call_op(const ct_call *c) { return c ? c->op : -1; }
int ct_call_num_inputs(const ct_call *c) { return c ? c->nin : 0; }
const ct_tensor *ct_call_input(const ct_call *c, int i) { return c && i >= 0 && i < c->nin ? c->in[i] : NULL; }
int ct_call_num_scalars(const ct_call *c) { return c ? c->nscalars : 0; }
ct_scalar ct_call_scalar(const ct_call *c, int i) {
    return c && i >= 0 && i < c->nscalars ? c->s[i] : ct_scalar_int(0);
}
int ct_call_num_ints(const ct_call *c) { return c ? c->nints : 0; }
int64_t ct_call_int(const ct_call *c, int i) { return c && i >= 0 && i < c->nints ? c->ints[i] : 0; }
int ct_call_num_list(const ct_call *c) { return c ? c->nlist : 0; }
const ct_tensor *ct_call_list_entry(const ct_call *c, int i) {
    return c && c->list && i >= 0 && i < c->nlist ? c->list[i] : NULL;
}
ct_dtype ct_call_dtype(const ct_call *c) { return c ? c->dtype : CT_DTYPE_UNDEFINED; }
bool ct_call_has_device(const ct_call *c) { return c && c->has_device; }
ct_device ct_call_device(const ct_call *c) { return c && c->has_device ? c->device : (ct_device){-1, -1}; }
bool ct_call_is_inplace(const ct_call *c) { return c && c->mode == CT_CALL_INPLACE; }
bool ct_call_has_out(const ct_call *c) { return c && c->mode == CT_CALL_OUT; }
int ct_call_num_outputs(const ct_call *c) { return c ? c->nout : 0; }
ct_tensor *ct_call_output(const ct_call *c, int i) {
    return c && i >= 0 && i < CT_CALL_MAX_OUT ? c->out[i] : NULL;
}

ct_status ct_call_set_output(ct_call *c, int i, ct_tensor *t) {
    if (!c || !t)
        return ct_error_null("call_set_output");
    if (i < 0 || i >= CT_CALL_MAX_OUT)
        return ct_error(CT_ERROR_INDEX, "call_set_output", "output index %d out of range", i);
    if (c->mode != CT_CALL_FUNCTIONAL)
        return ct_error(CT_ERROR_RUNTIME, ct_op_name(c->op),
                        "this call writes into given outputs; a kernel must not replace them");
    ct_retain(t);
    ct_release(c->out[i]);
    c->out[i] = t;
    if (i >= c->nout)
        c->nout = i + 1;
    return CT_OK;
}

/* ------------------------------------------------------------------ names */

static const char *const op_names[CT_OP_COUNT] = {
#define CT_OP(name, sig, family, flags) #name,
#include "ctorch/ops.def"
#undef CT_OP
};

ct_op ct_op_find(const char *name) {
    if (!name)
        return -1;
    for (int i = 0; i < CT_OP_COUNT; i++)
        if (strcmp(op_names[i], name) == 0)
            return i;
    return -1;
}

const char *ct_op_name(ct_op op) { return op_valid(op) ? op_names[op] : "unknown_op"; }
