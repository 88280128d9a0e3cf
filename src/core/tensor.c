/* Tensors, storages, reference counts and scopes. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "dtype.h"
#include "tensor_impl.h"
#include "tensor_make.h"
#include "checks.h"
#include "device.h"
#include "factory.h"
#include "debug_refs.h"

/* ------------------------------------------------------------------ object caches */

/* Note [Object caches]
 * Every op result needs a tensor and a storage object. A small per-thread cache of
 * freed ones saves two malloc/free pairs per op (most of a tiny op's cost); objects
 * freed on another thread simply join that thread's cache. Thread exit frees them
 * (scope_thread_exit). A cache is a list threaded through the dead objects themselves,
 * so the thread-local part is two words (Note [Thread-local storage]). A reused object
 * is not cleared: its maker assigns every field (Note [Tensor initialisation]). In
 * Note [Sanitizer mode] (alloc.c) nothing is cached, so AddressSanitizer sees every use
 * of a dead tensor or storage. */
#define CT_OBJ_CACHE 64
typedef struct {
    void *head; /* first word of each cached object: the next one */
    int n;
} obj_cache;
static CT_THREAD_LOCAL obj_cache tensor_cache, storage_cache;
static void ensure_thread_exit_hook(void);

static inline void *cache_get(obj_cache *c, size_t size, const char *op) {
    void *p = c->head;
    if (p && !ct_alloc_sanitizing()) {
        memcpy(&c->head, p, sizeof c->head);
        c->n--;
        return p;
    }
    return ct_xcalloc(op, 1, size);
}

static CT_THREAD_LOCAL bool exit_hook_set; /* this thread's caches are freed at its exit */

static inline void cache_put(obj_cache *c, void *p) {
    if (c->n < CT_OBJ_CACHE && !ct_alloc_sanitizing()) {
        if (__builtin_expect(!exit_hook_set, 0))
            ensure_thread_exit_hook();
        memcpy(p, &c->head, sizeof c->head);
        c->head = p;
        c->n++;
    } else {
        free(p);
    }
}

static void cache_drain(obj_cache *c) {
    while (c->head) {
        void *p = c->head;
        memcpy(&c->head, p, sizeof c->head);
        free(p);
    }
    c->n = 0;
}

static inline bool drop_ref(atomic_int *refcount);
static inline void release_as(ct_tensor *t, const char *how);

/* ------------------------------------------------------------------ storage */

/* Note [Empty storage]
 * A CPU storage of no bytes points at this static range rather than at NULL: in C,
 * arithmetic on a null pointer is undefined even when it adds zero (finding 25 of the
 * reliability review), and nearly every loop over an empty tensor computes base plus
 * offset before it finds there is nothing to do. No element lies in the range, so it
 * is never read or written, and it is never freed. Meta storages keep NULL: they have
 * no data, whatever their size. */
static _Alignas(64) char empty_storage[64];

ct_storage *ct_storage_new(size_t nbytes, ct_device device) {
    ct_storage *s = cache_get(&storage_cache, sizeof *s, "storage");
    if (!s)
        return NULL;
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->data = NULL;
    s->nbytes = nbytes;
    s->device = device;
    s->deleter = NULL;
    s->deleter_ctx = NULL;
    s->external = false;
    if (device.type == CT_DEVICE_CPU && nbytes == 0)
        s->data = empty_storage;
    if (device.type != CT_DEVICE_META && nbytes > 0) {
        s->data = ct_alloc(device, nbytes);
        if (!s->data) {
            cache_put(&storage_cache, s);
            return NULL;
        }
    }
    return s;
}

ct_storage *ct_storage_from_blob(void *data, size_t nbytes, void (*deleter)(void *, void *), void *ctx) {
    ct_storage *s = cache_get(&storage_cache, sizeof *s, "from_blob");
    if (!s)
        return NULL;
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->data = data;
    s->nbytes = nbytes;
    s->device = CT_CPU;
    s->deleter = deleter;
    s->deleter_ctx = ctx;
    s->external = true;
    return s;
}

void ct_storage_retain(ct_storage *s) { atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed); }

void ct_storage_release(ct_storage *s) {
    if (!s || !drop_ref(&s->refcount)) /* Note [Last reference] */
        return;
    if (s->external) {
        if (s->deleter)
            s->deleter(s->deleter_ctx, s->data);
    } else if (s->data && s->data != empty_storage) {
        ct_free(s->device, s->data);
    }
    cache_put(&storage_cache, s);
}

/* ------------------------------------------------------------------ shapes */

int64_t ct_shape_numel(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return -1;
        if (shape[i] != 0 && n > INT64_MAX / shape[i])
            return -1;
        n *= shape[i];
    }
    return n;
}

int64_t ct_contiguous_strides(const int64_t *shape, int ndim, int64_t *strides) {
    int64_t n = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = n;
        int64_t s = shape[i] > 1 ? shape[i] : 1;
        if (n > INT64_MAX / s)
            return -1;
        n *= s;
    }
    return ct_shape_numel(shape, ndim);
}

bool ct_strides_contiguous(const int64_t *shape, const int64_t *strides, int ndim) {
    int64_t expected = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        if (shape[i] == 0)
            return true;
        if (shape[i] != 1 && strides[i] != expected)
            return false;
        /* past an overflow, the dims left can only be of size 0 or 1 (a tensor whose numel
         * overflows is refused when made), and those are contiguous with any stride */
        if (!ct_size_mul(expected, shape[i], &expected))
            return true;
    }
    return true;
}

int ct_wrap_dim(const char *op, int64_t dim, int ndim, int *out) {
    int64_t n = ndim > 0 ? ndim : 1; /* a 0-d tensor accepts dims -1 and 0, as PyTorch */
    if (dim < -n || dim >= n) {
        ct_error(CT_ERROR_INDEX, op, "Dimension out of range (expected to be in range of [%lld, %lld], but got %lld)",
                 (long long)-n, (long long)(n - 1), (long long)dim);
        return -1;
    }
    *out = (int)(dim < 0 ? dim + n : dim);
    return 0;
}

const char *ct_shape_str(const int64_t *shape, int ndim, char *buf, size_t cap) {
    size_t len = 0;
    if (cap == 0)
        return buf;
    buf[0] = '\0';
    len += (size_t)snprintf(buf + len, cap - len, "[");
    for (int i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

/* ------------------------------------------------------------------ scopes */

/* Note [Scopes]
 * Each thread keeps one stack of owned references and a stack of scope marks. A new
 * tensor is pushed on the reference stack when a scope is open; ct_scope_end releases
 * everything pushed since its mark. ct_keep retains the tensor and pushes it again
 * below the mark, so the scope's own release leaves the enclosing scope one
 * reference. Pushing is O(1), so a loop body in a scope stays flat in memory.
 *
 * Note [Scopes without memory]
 * ct_scope_begin must work when memory runs out (every op opens a scope). The
 * outermost scope's mark is always 0 (no scope, nothing pushed), so it is not stored:
 * marks[k] is the mark of scope k + 2, and opening the first scope allocates nothing.
 * When a deeper mark cannot be stored, the scope is opened "merged" into the one below
 * it (nmerged counts them, innermost first): its tensors are released when that scope
 * ends, later than asked but never lost, and ct_keep inside it has nothing to do.
 * ct_scope_begin reports CT_ERROR_OUT_OF_MEMORY for it; the depth counts it as usual,
 * so begin/end pairs stay balanced. */
typedef struct {
    ct_tensor **refs;
    size_t nrefs, cap;
    size_t *marks; /* marks of scopes 2, 3, ... */
    int nmarks, markcap;
    int nmerged; /* innermost scopes merged into the one below (no memory for a mark) */
} scope_stack;

/* The mark of the innermost stored scope (nmarks > 0). */
static inline size_t scope_top_mark(const scope_stack *s) { return s->nmarks > 1 ? s->marks[s->nmarks - 2] : 0; }

static CT_THREAD_LOCAL scope_stack tl_scopes;


static pthread_key_t scope_key;
static pthread_once_t scope_key_once = PTHREAD_ONCE_INIT;

static void scope_thread_exit(void *p) {
    scope_stack *s = p;
    while (s->nmarks > 0 || s->nmerged > 0)
        ct_scope_end();
    free(s->refs);
    free(s->marks);
    memset(s, 0, sizeof *s);
    cache_drain(&tensor_cache);
    cache_drain(&storage_cache);
    exit_hook_set = false; /* objects freed by later destructors register the hook again */
}

static void scope_key_init(void) { pthread_key_create(&scope_key, scope_thread_exit); }

/* Runs scope_thread_exit when this thread ends (its argument only has to be non-NULL). */
static void ensure_thread_exit_hook(void) {
    pthread_once(&scope_key_once, scope_key_init);
    if (!pthread_getspecific(scope_key))
        pthread_setspecific(scope_key, &tl_scopes);
    exit_hook_set = true;
}

static bool scope_push(ct_tensor *t) {
    scope_stack *s = &tl_scopes;
    if (s->nrefs == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        ct_tensor **r = ct_host_alloc_should_fail() ? NULL : realloc(s->refs, cap * sizeof *r);
        if (!r)
            return false;
        s->refs = r;
        s->cap = cap;
    }
    s->refs[s->nrefs++] = t;
    return true;
}

ct_status ct_scope_begin(void) {
    scope_stack *s = &tl_scopes;
    if (CT_UNLIKELY(!exit_hook_set)) /* free the buffers at this thread's exit */
        ensure_thread_exit_hook();
    if (s->nmarks == 0) {
        s->nmarks = 1; /* Note [Scopes without memory]: the mark is 0 */
        return CT_OK;
    }
    if (s->nmerged == 0 && s->nmarks - 1 == s->markcap) {
        int cap = s->markcap ? s->markcap * 2 : 16;
        size_t *m = cap > s->markcap && !ct_host_alloc_should_fail() ? realloc(s->marks, (size_t)cap * sizeof *m)
                                                                      : NULL;
        if (m) {
            s->marks = m;
            s->markcap = cap;
        }
    }
    if (s->nmerged > 0 || s->nmarks - 1 == s->markcap) {
        s->nmerged++;
        return ct_error(CT_ERROR_OUT_OF_MEMORY, "scope_begin",
                        "no memory to open scope %d; its tensors are released when the enclosing scope ends",
                        ct_scope_depth());
    }
    s->marks[s->nmarks++ - 1] = s->nrefs;
    return CT_OK;
}

void ct_scope_end(void) {
    scope_stack *s = &tl_scopes;
    if (s->nmerged > 0) {
        s->nmerged--; /* its tensors belong to the enclosing scope */
        return;
    }
    if (s->nmarks == 0) {
        /* An unbalanced end frees nothing (the caller's tensors stay theirs) and is an
         * error, as PyTorch raises for a context exited twice. */
        ct_debug_refs_unbalanced_scope_end();
        __asm__ volatile(""); /* not a tail call: ct_scope_end shows in the site */
        return;
    }
    size_t mark = scope_top_mark(s);
    s->nmarks--;
    while (s->nrefs > mark) {
        ct_tensor *t = s->refs[--s->nrefs];
        s->refs[s->nrefs] = NULL; /* no stale pointer for LeakSanitizer to mistake for a reference */
        release_as(t, "ct_scope_end");
    }
    /* Keep small buffers for the next scope (every op opens one); give back ones a
     * big scope grew. The thread-exit destructor frees the rest. */
    if (s->nmarks == 0 && s->cap > 4096) {
        free(s->refs);
        s->refs = NULL;
        s->cap = 0;
    }
}



int ct_scope_depth(void) { return tl_scopes.nmarks + tl_scopes.nmerged; }

ct_tensor *ct_scope_adopt(ct_tensor *t) {
    if (!t || tl_scopes.nmarks == 0)
        return t;
    if (!scope_push(t)) {
        ct_release(t);
        ct_error(CT_ERROR_OUT_OF_MEMORY, "scope", "could not record a tensor in the current scope");
        return NULL;
    }
    return t;
}

ct_tensor *ct_keep(ct_tensor *t) {
    scope_stack *s = &tl_scopes;
    if (CT_UNLIKELY(ct_debug_refs_on()) && t && ct_tensor_is_dead(t)) {
        ct_debug_refs_misuse(t, "ct_keep");
        return NULL;
    }
    if (!t || s->nmarks == 0 || s->nmerged > 0) /* merged: t already lives in the enclosing scope */
        return t;
    atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
    if (s->nmarks == 1)
        return t; /* the caller owns the extra reference */
    /* Insert below the innermost mark: shift that scope's entries up by one. */
    if (!scope_push(t)) {
        ct_release(t);
        ct_error(CT_ERROR_OUT_OF_MEMORY, "keep", "could not record a tensor in the enclosing scope");
        return NULL;
    }
    size_t mark = scope_top_mark(s);
    memmove(&s->refs[mark + 1], &s->refs[mark], (s->nrefs - 1 - mark) * sizeof *s->refs);
    s->refs[mark] = t;
    s->marks[s->nmarks - 2] = mark + 1;
    return t;
}

ct_tensor *ct_retain(ct_tensor *t) {
    if (CT_UNLIKELY(ct_debug_refs_on()) && t && ct_tensor_is_dead(t)) {
        ct_debug_refs_misuse(t, "ct_retain");
        return NULL;
    }
    if (t)
        atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
    return t;
}

/* Note [Last reference]
 * Dropping a reference is an atomic decrement, a locked instruction, and a tiny op drops
 * two (its result and the result's storage). A holder that sees the count at 1 holds
 * the only reference: no other thread can take a new one without holding one already.
 * So the object dies without the decrement; the acquire load orders this thread after
 * every earlier release on other threads, as the decrement's acquire half did. */
static inline bool drop_ref(atomic_int *refcount) {
    return atomic_load_explicit(refcount, memory_order_acquire) == 1 ||
           atomic_fetch_sub_explicit(refcount, 1, memory_order_acq_rel) == 1;
}

/* how names the call for Note [Ownership debug mode]: "ct_release" or "ct_scope_end". */
static inline void release_as(ct_tensor *t, const char *how) {
    if (!t || !drop_ref(&t->refcount))
        return;
    /* Note [Ownership debug mode]; the empty asm statements keep these calls out of
     * tail position, so that the caller (ct_release, ct_scope_end) shows in the site */
    if (CT_UNLIKELY(ct_tensor_is_dead(t))) {
        ct_debug_refs_misuse(t, how);
        __asm__ volatile("");
        return;
    }
    if (t->grad_fn && t->grad_fn_release)
        t->grad_fn_release(t->grad_fn);
    ct_release(t->grad);
    ct_release(t->base);
    ct_storage_release(t->storage);
    if (CT_UNLIKELY(ct_debug_refs_on())) {
        ct_debug_refs_bury(t, how);
        __asm__ volatile("");
        return;
    }
    cache_put(&tensor_cache, t);
}

void ct_release(ct_tensor *t) { release_as(t, "ct_release"); }

/* ------------------------------------------------------------------ tensors */

CT_THREAD_LOCAL bool ct_tls_inference_mode;

/* ct_tensor_make without the storage reference: owned says the tensor takes over the
 * caller's (released on failure) instead of taking its own. */
static inline ct_tensor *tensor_make(ct_storage *storage, bool owned, int64_t offset, const int64_t *shape,
                                     const int64_t *strides, int ndim, ct_dtype dtype, ct_device device) {
    if (ndim < 0 || ndim > CT_MAX_DIMS) {
        if (owned)
            ct_storage_release(storage);
        ct_error(CT_ERROR_VALUE, "tensor", "ctorch supports at most %d dimensions, got %d", CT_MAX_DIMS, ndim);
        return NULL;
    }
    ct_tensor *t = cache_get(&tensor_cache, sizeof *t, "tensor");
    if (!t) {
        if (owned)
            ct_storage_release(storage);
        return NULL;
    }
    /* Note [Tensor initialisation]
     * A tensor taken from the cache still holds its last life's fields; every field is
     * assigned here rather than clearing the whole struct first (that memset was a
     * third of a tiny op's host time). shape and strides past ndim are not part of a
     * tensor's value and are left as they are. A field added to ct_tensor must be set
     * here too. */
    atomic_init(&t->refcount, 1);
    t->ndim = ndim;
    t->dtype = dtype;
    t->device = device;
    t->offset = offset;
    /* One pass for shape, strides and numel, with the same results as
     * ct_contiguous_strides and ct_shape_numel but no division per dim (and no memcpy
     * of an unknown length, which compilers expand to a slow rep movs). */
    int64_t span = 1;
    bool overflow = false;
    for (int i = ndim - 1; i >= 0; i--) {
        int64_t d = shape[i];
        t->shape[i] = d;
        if (strides) {
            t->strides[i] = strides[i];
        } else {
            t->strides[i] = overflow ? 0 : span; /* past an overflow: as a cleared struct had */
            overflow = overflow || __builtin_mul_overflow(span, d > 1 ? d : 1, &span);
        }
    }
    int64_t numel = 1; /* in ct_shape_numel's order: an overflow before a 0 dim counts */
    for (int i = 0; i < ndim && numel >= 0; i++)
        if (shape[i] < 0 || __builtin_mul_overflow(numel, shape[i], &numel))
            numel = -1;
    t->numel = numel;
    t->requires_grad = false;
    t->is_view = false;
    t->inference = ct_tls_inference_mode;
    t->wrapped_number = false;
    t->grad = NULL;
    t->grad_fn = NULL;
    t->grad_fn_release = NULL;
    t->output_nr = 0;
    t->base = NULL;
    if (!owned)
        ct_storage_retain(storage);
    t->storage = storage;
    if (CT_UNLIKELY(atomic_load_explicit(&ct_debug_refs_state, memory_order_relaxed) != 0))
        ct_debug_refs_made(t); /* Note [Ownership debug mode]; resolves the setting on the first tensor */
    return ct_scope_adopt(t);
}

ct_tensor *ct_tensor_make(ct_storage *storage, int64_t offset, const int64_t *shape, const int64_t *strides,
                          int ndim, ct_dtype dtype, ct_device device) {
    return tensor_make(storage, false, offset, shape, strides, ndim, dtype, device);
}

/* A fresh storage's one reference goes to its tensor: retaining it and dropping the
 * maker's reference would be two atomic read-modify-writes per op. */
ct_tensor *ct_tensor_make_owned(ct_storage *storage, int64_t offset, const int64_t *shape, const int64_t *strides,
                                int ndim, ct_dtype dtype, ct_device device) {
    return tensor_make(storage, true, offset, shape, strides, ndim, dtype, device);
}

ct_tensor *ct_tensor_make_view(const ct_tensor *t, int64_t offset, const int64_t *shape, const int64_t *strides,
                               int ndim) {
    ct_tensor *v = ct_tensor_make(t->storage, offset, shape, strides, ndim, t->dtype, t->device);
    if (!v)
        return NULL;
    v->is_view = true;
    /* A view keeps the tensor it views alive; chains collapse to the root base. */
    v->base = ct_retain((ct_tensor *)(t->base ? t->base : t));
    v->requires_grad = t->requires_grad;
    v->inference = t->inference;
    return v;
}

ct_tensor *ct_tensor_ref(const ct_tensor *t) {
    ct_tensor *r = ct_retain((ct_tensor *)t);
    return ct_scope_adopt(r);
}

static bool check_shape(const char *op, const int64_t *shape, int ndim, int64_t elem_size, int64_t *numel) {
    if (ndim < 0 || ndim > CT_MAX_DIMS) {
        ct_error(CT_ERROR_VALUE, op, "ctorch supports 0 to %d dimensions, got %d", CT_MAX_DIMS, ndim);
        return false;
    }
    if (ndim > 0 && !shape) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "shape is NULL but ndim is %d", ndim);
        return false;
    }
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) {
            char buf[256];
            ct_error(CT_ERROR_VALUE, op, "Trying to create tensor with negative dimension %lld: %s",
                     (long long)shape[i], ct_shape_str(shape, ndim, buf, sizeof buf));
            return false;
        }
    int64_t n = ct_shape_numel(shape, ndim);
    if (n < 0 || (elem_size > 0 && n > INT64_MAX / elem_size)) {
        char buf[256];
        ct_error(CT_ERROR_VALUE, op, "the number of elements of shape %s overflows",
                 ct_shape_str(shape, ndim, buf, sizeof buf));
        return false;
    }
    *numel = n;
    return true;
}

static bool check_dtype(const char *op, ct_dtype dtype) {
    if (!ct_dtype_valid(dtype)) {
        ct_error(CT_ERROR_TYPE, op, "invalid dtype %d", (int)dtype);
        return false;
    }
    return true;
}

bool ct_window_out_size(int64_t in, int64_t pad_l, int64_t pad_r, int64_t kernel, int64_t stride, int64_t dilation,
                        bool ceil_mode, int64_t *out) {
    /* every step in 128 bits: the inputs are int64, so no step overflows there */
    __int128 num = (__int128)in + pad_l + pad_r - (__int128)dilation * (kernel - 1) - 1;
    if (ceil_mode)
        num += stride - 1;
    __int128 r = num / stride + 1;
    if (r > INT64_MAX || r < INT64_MIN)
        return false;
    *out = (int64_t)r;
    return true;
}

bool ct_tensor_has_internal_overlap(const ct_tensor *t) {
    int64_t size[CT_MAX_DIMS], stride[CT_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0)
            return false; /* nothing is written */
        if (t->shape[d] == 1)
            continue;
        int64_t s = t->strides[d];
        if (s == 0)
            return true;
        /* insertion by |stride|, ascending */
        uint64_t a = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
        int k = n++;
        for (; k > 0 && (uint64_t)stride[k - 1] > a; k--) {
            stride[k] = stride[k - 1];
            size[k] = size[k - 1];
        }
        stride[k] = a > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)a;
        size[k] = t->shape[d];
    }
    __int128 reach = 0; /* the largest distance the smaller strides span */
    for (int k = 0; k < n; k++) {
        if (stride[k] <= reach)
            return true;
        reach += (__int128)(size[k] - 1) * stride[k];
    }
    return false;
}

ct_status ct_check_no_internal_overlap(const char *op, const ct_tensor *t) {
    if (t && ct_tensor_has_internal_overlap(t))
        return ct_error(CT_ERROR_VALUE, op,
                        "unsupported operation: more than one element of the written-to tensor refers to a single "
                        "memory location. Please clone() the tensor before performing the operation.");
    return CT_OK;
}

bool ct_check_device(const char *op, ct_device device) {
    if (device.type == CT_DEVICE_CPU || device.type == CT_DEVICE_META)
        return true;
    const ct_device_iface *dev = ct_device_need(op, (ct_device_type)device.type);
    return dev && dev->use_device(op, device.index);
}

ct_tensor *ct_tensor_new(const char *op, const int64_t *shape, const int64_t *strides, int ndim, ct_dtype dtype,
                         ct_device device) {
    int64_t numel;
    if (!check_dtype(op, dtype) || !check_shape(op, shape, ndim, (int64_t)ct_dtype_size(dtype), &numel) ||
        !ct_check_device(op, device))
        return NULL;
    int64_t span = numel; /* elements the storage must hold */
    if (strides && numel > 0) {
        span = 1;
        for (int i = 0; i < ndim; i++) {
            if (strides[i] < 0) {
                ct_error(CT_ERROR_VALUE, op, "strides must be non-negative, got %lld at dim %d",
                         (long long)strides[i], i);
                return NULL;
            }
            int64_t ext = (shape[i] - 1);
            if (strides[i] != 0 && ext > (INT64_MAX - span) / strides[i]) {
                ct_error(CT_ERROR_VALUE, op, "the storage size of these strides overflows");
                return NULL;
            }
            span += ext * strides[i];
        }
    }
    size_t esz = ct_dtype_size(dtype);
    if ((uint64_t)span > SIZE_MAX / esz || span > INT64_MAX / (int64_t)esz) {
        ct_error(CT_ERROR_VALUE, op, "the storage size overflows");
        return NULL;
    }
    ct_storage *s = ct_storage_new((size_t)span * esz, device);
    if (!s) {
        if (ct_last_status() == CT_OK)
            ct_error(CT_ERROR_OUT_OF_MEMORY, op, "could not allocate %lld bytes", (long long)(span * (int64_t)esz));
        return NULL;
    }
    return ct_tensor_make_owned(s, 0, shape, strides, ndim, dtype, device);
}

ct_tensor *ct_empty_impl(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    return ct_tensor_new("empty", shape, NULL, ndim, dtype, device);
}

ct_tensor *ct_empty_strided_impl(const int64_t *shape, const int64_t *strides, int ndim, ct_dtype dtype,
                                 ct_device device) {
    if (!strides) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "empty_strided", "strides is NULL");
        return NULL;
    }
    return ct_tensor_new("empty_strided", shape, strides, ndim, dtype, device);
}

ct_tensor *ct_from_blob(void *data, const int64_t *shape, const int64_t *strides, int ndim, ct_dtype dtype,
                        void (*deleter)(void *ctx, void *data), void *ctx) {
    int64_t numel;
    if (!check_dtype("from_blob", dtype) ||
        !check_shape("from_blob", shape, ndim, (int64_t)ct_dtype_size(dtype), &numel))
        return NULL;
    if (!data && numel > 0) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "from_blob", "data is NULL for %lld elements", (long long)numel);
        return NULL;
    }
    int64_t span = numel;
    if (strides && numel > 0) {
        span = 1;
        for (int i = 0; i < ndim; i++) {
            if (strides[i] < 0) {
                ct_error(CT_ERROR_VALUE, "from_blob", "strides must be non-negative");
                return NULL;
            }
            int64_t ext;
            if (!ct_size_mul(shape[i] - 1, strides[i], &ext) || !ct_size_add(span, ext, &span)) {
                ct_error(CT_ERROR_VALUE, "from_blob", "the view's extent overflows int64 (dim %d)", i);
                return NULL;
            }
        }
    }
    int64_t nbytes;
    if (!ct_size_mul(span, (int64_t)ct_dtype_size(dtype), &nbytes)) {
        ct_error(CT_ERROR_VALUE, "from_blob", "the view's extent of %lld elements overflows int64 in bytes",
                 (long long)span);
        return NULL;
    }
    ct_storage *s = ct_storage_from_blob(data, (size_t)nbytes, deleter, ctx);
    if (!s)
        return NULL;
    ct_tensor *t = ct_tensor_make(s, 0, shape, strides, ndim, dtype, CT_CPU);
    if (!t)
        s->deleter = NULL; /* a failed call leaves data to the caller (core.h) */
    ct_storage_release(s);
    return t;
}

ct_tensor *ct_from_data(const void *data, const int64_t *shape, int ndim, ct_dtype dtype) {
    ct_tensor *t = ct_tensor_new("from_data", shape, NULL, ndim, dtype, CT_CPU);
    if (!t)
        return NULL;
    size_t nbytes = (size_t)t->numel * ct_dtype_size(dtype);
    if (nbytes) {
        if (!data) {
            ct_error(CT_ERROR_NULL_ARGUMENT, "from_data", "data is NULL for %lld elements", (long long)t->numel);
            return NULL; /* t stays owned by the scope, or leaks a few bytes without one */
        }
        memcpy(t->storage->data, data, nbytes);
    }
    return t;
}

/* ------------------------------------------------------------------ properties */

int ct_tensor_dim(const ct_tensor *t) { return t ? t->ndim : -1; }

/* Wraps dim for size()/stride(); -1 (error set) when t is NULL, 0-d or dim is out of range. */
static int dim_of(const char *op, const ct_tensor *t, int dim) {
    int d;
    if (!t) {
        ct_error_null(op);
        return -1;
    }
    if (t->ndim == 0) {
        ct_error(CT_ERROR_INDEX, op, "dimension specified as %d but tensor has no dimensions", dim);
        return -1;
    }
    return ct_wrap_dim(op, dim, t->ndim, &d) ? -1 : d;
}

int64_t ct_tensor_size(const ct_tensor *t, int dim) {
    int d = dim_of("size", t, dim);
    return d < 0 ? -1 : t->shape[d];
}

int64_t ct_tensor_stride(const ct_tensor *t, int dim) {
    int d = dim_of("stride", t, dim);
    return d < 0 ? -1 : t->strides[d];
}

const int64_t *ct_tensor_shape(const ct_tensor *t) { return t ? t->shape : NULL; }
const int64_t *ct_tensor_strides(const ct_tensor *t) { return t ? t->strides : NULL; }
int64_t ct_tensor_numel(const ct_tensor *t) { return t ? t->numel : -1; }
ct_dtype ct_tensor_dtype(const ct_tensor *t) { return t ? t->dtype : CT_DTYPE_UNDEFINED; }
ct_device ct_tensor_device(const ct_tensor *t) { return t ? t->device : CT_CPU; }
size_t ct_tensor_element_size(const ct_tensor *t) { return t ? ct_dtype_size(t->dtype) : 0; }
int64_t ct_tensor_storage_offset(const ct_tensor *t) { return t ? t->offset : -1; }
size_t ct_tensor_storage_nbytes(const ct_tensor *t) { return t ? t->storage->nbytes : 0; }
void *ct_tensor_data(const ct_tensor *t) { return t ? ct_tensor_ptr(t) : NULL; }
bool ct_tensor_is_contiguous(const ct_tensor *t) {
    return t && ct_strides_contiguous(t->shape, t->strides, t->ndim);
}
bool ct_tensor_shares_storage(const ct_tensor *a, const ct_tensor *b) {
    return a && b && a->storage == b->storage;
}
int64_t ct_tensor_version(const ct_tensor *t) { return t ? (int64_t)atomic_load(&t->storage->version) : -1; }
ct_tensor *ct_tensor_set_(ct_tensor *t, const ct_tensor *src) {
    CT_CHECK_ARG("set_", t);
    CT_CHECK_ARG("set_", src);
    if (t->dtype != src->dtype) {
        ct_error(CT_ERROR_TYPE, "set_", "Could not set tensor of type %s to a tensor of type %s",
                 ct_dtype_name(src->dtype), ct_dtype_name(t->dtype));
        return NULL;
    }
    if (!ct_device_equal(t->device, src->device)) {
        ct_error(CT_ERROR_DEVICE, "set_", "the source is on another device");
        return NULL;
    }
    if (t->is_view) {
        ct_error(CT_ERROR_RUNTIME, "set_", "set_ on a view is not supported (it would detach it from its base)");
        return NULL;
    }
    if (t == src)
        return ct_tensor_ref(t);
    ct_storage_retain(src->storage);
    ct_storage_release(t->storage);
    t->storage = src->storage;
    t->offset = src->offset;
    t->ndim = src->ndim;
    memcpy(t->shape, src->shape, sizeof t->shape);
    memcpy(t->strides, src->strides, sizeof t->strides);
    t->numel = src->numel;
    atomic_fetch_add(&t->storage->version, 1);
    return ct_tensor_ref(t);
}

void ct_tensor_bump_version(ct_tensor *t) {
    if (t)
        atomic_fetch_add(&t->storage->version, 1);
}
bool ct_tensor_requires_grad(const ct_tensor *t) { return t && t->requires_grad; }

ct_tensor *ct_tensor_set_requires_grad(ct_tensor *t, bool requires_grad) {
    CT_CHECK_ARG("requires_grad_", t);
    if (requires_grad && !ct_dtype_is_floating(t->dtype)) {
        ct_error(CT_ERROR_TYPE, "requires_grad_", "only Tensors of floating point dtype can require gradients, got %s",
                 ct_dtype_name(t->dtype));
        return NULL;
    }
    if (requires_grad && t->inference) {
        ct_error(CT_ERROR_RUNTIME, "requires_grad_",
                 "setting requires_grad=True on an inference tensor created outside InferenceMode is not allowed");
        return NULL;
    }
    t->requires_grad = requires_grad;
    return t;
}

const char *ct_version(void) { return CT_VERSION_STRING; }
