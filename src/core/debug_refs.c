/* Note [Ownership debug mode]
 * Ownership mistakes (a double ct_release, a tensor used after its scope ended, a loop
 * that never releases) are silent in a normal run: a released tensor's struct goes back
 * to the object cache (Note [Object caches]) and its memory to the allocator, so a later
 * use reads whatever the next op put there, and a double release corrupts the heap an
 * epoch later in unrelated code. AddressSanitizer cannot point at the mistake either,
 * since the recycled struct is a live allocation again.
 *
 * CT_DEBUG=refs (or ct_debug_set_refs) turns on a mode that makes each mistake an error
 * at the call that commits it:
 *  - every tensor made is recorded with the op that made it and a short backtrace;
 *  - a tensor whose last reference goes is released as usual (its storage, gradient,
 *    base and autograd node), then poisoned instead of recycled: it points at a dead
 *    storage with no data, on the META device (so the fast lane of tiny elementwise
 *    ops never takes it), and keeps a reference count of 1 so a further ct_release
 *    reaches the release path again. Its record keeps how it was released
 *    (ct_release or ct_scope_end) and where;
 *  - the dispatcher checks every tensor argument of every call (ct_dispatch, the one
 *    place where arguments are taken): a dead one makes the op fail with an error
 *    naming the op, the argument, the mistake and the release site;
 *  - a second release reports "double release" with both sites on stderr (ct_release
 *    returns nothing) and in ct_last_error, and changes nothing else; ct_retain and
 *    ct_keep of a dead tensor return NULL with the same kind of error;
 *  - at exit, every tensor still alive is listed with the op that made it.
 * The poisoned structs are kept in a quarantine of CT_DEBUG_QUARANTINE tensors, oldest
 * freed first, as AddressSanitizer's quarantine does: a use later than that many
 * releases is no longer recognised. The mode is on by default in sanitizer mode
 * (Note [Sanitizer mode]); CT_DEBUG=0 turns it off there.
 *
 * Off, the cost is a relaxed load and a predicted branch where a tensor is made and
 * where a call is dispatched, and a pointer compare where a tensor dies. */
#include "debug_refs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "dtype.h"

#if defined(__has_include)
#if __has_include(<execinfo.h>)
#include <execinfo.h>
#define CT_HAVE_BACKTRACE 1
#endif
#endif

#define CT_DEBUG_FRAMES 16
#define CT_DEBUG_QUARANTINE 65536
#define CT_DEBUG_LIST_MAX 50

atomic_int ct_debug_refs_state = -1;

ct_storage ct_dead_storage = {
    .refcount = 1 << 30, /* never reaches zero, whatever a stray retain or release does */
    .data = NULL,
    .nbytes = 0,
    .device = {CT_DEVICE_META, 0},
};

typedef struct ref_rec {
    const ct_tensor *t;
    struct ref_rec *next;    /* hash chain */
    struct ref_rec *qnext;   /* quarantine, oldest first */
    const char *maker;       /* the op that made it; NULL outside any op */
    const char *how;         /* NULL while alive, else the call that released it */
    const char *release_op;  /* the op running when it was released, if any */
    int nmade, nfreed;
    void *made[CT_DEBUG_FRAMES];
    void *freed[CT_DEBUG_FRAMES];
} ref_rec;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static ref_rec **buckets;
static size_t nbuckets, nrecs;
static ref_rec *qhead, *qtail;
static size_t qlen;

static int capture(void **frames) {
#ifdef CT_HAVE_BACKTRACE
    return backtrace(frames, CT_DEBUG_FRAMES);
#else
    (void)frames;
    return 0;
#endif
}

/* "f < g < h", innermost first: where a call into the library came from. In a program
 * that loads libctorch.so, the library's own frames are left out but for the entry point
 * (ct_release, ct_scope_end, ct_add); in a program linked with the static library, the
 * frames with a name are shown (the loader names exported functions: the public API,
 * and a program's own functions when it is linked with -rdynamic), else object+offset
 * for addr2line. */
static void format_site(void *const *frames, int n, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
#ifdef CT_HAVE_BACKTRACE
    char **syms = n > 0 ? backtrace_symbols(frames, n) : NULL;
    void *self[1] = {(void *)&ct_debug_refs_bury};
    char **me = backtrace_symbols(self, 1);
    size_t melen = me ? strcspn(me[0], "(") : 0;
    int first = 0; /* the first frame to show */
    bool named_only = true;
    bool shared = me && strstr(me[0], "libctorch") && strstr(me[0], "libctorch") < me[0] + melen;
    /* frames before the library's own (a sanitizer's backtrace interceptor) are skipped */
    bool inside = false;
    for (int i = 0; shared && syms && i < n; i++) {
        bool mine = strncmp(syms[i], me[0], melen) == 0 && syms[i][melen] == '(';
        if (mine) {
            inside = true;
        } else if (inside) {
            first = i - 1;
            named_only = false;
            break;
        }
    }
    int shown = 0;
    for (int i = first; syms && i < n && shown < 5 && len + 1 < cap; i++) {
        const char *s = syms[i];
        const char *open = strchr(s, '('), *plus = open ? strchr(open, '+') : NULL;
        const char *close = open ? strchr(open, ')') : NULL;
        char name[128];
        if (open && plus && close && plus > open + 1 && plus < close) {
            snprintf(name, sizeof name, "%.*s", (int)(plus - open - 1), open + 1);
        } else if (named_only) {
            continue;
        } else if (open && close) {
            const char *base = s;
            for (const char *p = s; p < open; p++)
                if (*p == '/')
                    base = p + 1;
            snprintf(name, sizeof name, "%.*s%.*s", (int)(open - base), base, (int)(close - open - 1), open + 1);
        } else {
            snprintf(name, sizeof name, "%p", frames[i]);
        }
        if (strncmp(name, "ct_debug_refs_", 14) == 0)
            continue;
        len += (size_t)snprintf(buf + len, cap - len, shown ? " < %s" : "%s", name);
        shown++;
    }
    free(syms);
    free(me);
#else
    (void)frames;
    (void)n;
#endif
    if (!buf[0])
        snprintf(buf, cap, "(no backtrace)");
}

/* ------------------------------------------------------------------ the table */

static size_t slot_of(const ct_tensor *t, size_t n) {
    return (size_t)(((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull >> 20) & (n - 1);
}

static ref_rec *find(const ct_tensor *t) {
    if (!nbuckets)
        return NULL;
    for (ref_rec *r = buckets[slot_of(t, nbuckets)]; r; r = r->next)
        if (r->t == t)
            return r;
    return NULL;
}

static bool grow(void) {
    size_t n = nbuckets ? nbuckets * 2 : 4096;
    ref_rec **b = calloc(n, sizeof *b);
    if (!b)
        return false;
    for (size_t i = 0; i < nbuckets; i++)
        for (ref_rec *r = buckets[i], *next; r; r = next) {
            next = r->next;
            size_t k = slot_of(r->t, n);
            r->next = b[k];
            b[k] = r;
        }
    free(buckets);
    buckets = b;
    nbuckets = n;
    return true;
}

/* The record of t, made if it has none; NULL without memory (t goes untracked). */
static ref_rec *find_or_add(const ct_tensor *t) {
    ref_rec *r = find(t);
    if (r)
        return r;
    if (nrecs >= nbuckets && !grow() && !nbuckets)
        return NULL;
    r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->t = t;
    size_t k = slot_of(t, nbuckets);
    r->next = buckets[k];
    buckets[k] = r;
    nrecs++;
    return r;
}

static void unlink_rec(ref_rec *r) {
    ref_rec **p = &buckets[slot_of(r->t, nbuckets)];
    while (*p && *p != r)
        p = &(*p)->next;
    if (*p) {
        *p = r->next;
        nrecs--;
    }
}

/* ------------------------------------------------------------------ the mode */

static void report_at_exit(void) {
    if (ct_debug_refs_on())
        ct_debug_report_live(stderr);
}

static bool token_in(const char *list, const char *tok) {
    size_t n = strlen(tok);
    for (const char *p = list; (p = strstr(p, tok)); p += n)
        if ((p == list || p[-1] == ',' || p[-1] == ' ') && (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
            return true;
    return false;
}

static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static void register_exit(void) { atexit(report_at_exit); }

static int resolve(void) {
    const char *env = getenv("CT_DEBUG");
    int on = env ? token_in(env, "refs") : ct_alloc_sanitizing();
    int expected = -1;
    atomic_compare_exchange_strong(&ct_debug_refs_state, &expected, on);
    int s = atomic_load(&ct_debug_refs_state);
    if (s == 1)
        pthread_once(&exit_once, register_exit);
    return s;
}

ct_status ct_debug_set_refs(bool on) {
    if (on) {
        atomic_store(&ct_debug_refs_state, 1);
        pthread_once(&exit_once, register_exit);
        return CT_OK;
    }
    atomic_store(&ct_debug_refs_state, 0);
    /* Live records would go stale once their tensors are recycled again; the dead ones
     * stay in quarantine (their structs are never handed out again while kept). */
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nbuckets; i++)
        for (ref_rec **p = &buckets[i]; *p;) {
            ref_rec *r = *p;
            if (!r->how) {
                *p = r->next;
                nrecs--;
                free(r);
            } else {
                p = &r->next;
            }
        }
    pthread_mutex_unlock(&lock);
    return CT_OK;
}

bool ct_debug_refs_enabled(void) {
    int s = atomic_load_explicit(&ct_debug_refs_state, memory_order_relaxed);
    return (s >= 0 ? s : resolve()) == 1;
}

void ct_debug_refs_made(ct_tensor *t) {
    int s = atomic_load_explicit(&ct_debug_refs_state, memory_order_relaxed);
    if (s < 0)
        s = resolve();
    if (s != 1)
        return;
    void *frames[CT_DEBUG_FRAMES];
    int n = capture(frames);
    pthread_mutex_lock(&lock);
    ref_rec *r = find_or_add(t);
    if (r) {
        r->maker = ct_alloc_get_context();
        r->how = NULL;
        r->release_op = NULL;
        r->nfreed = 0;
        r->nmade = n;
        memcpy(r->made, frames, (size_t)n * sizeof *frames);
    }
    pthread_mutex_unlock(&lock);
}

void ct_debug_refs_bury(ct_tensor *t, const char *how) {
    void *frames[CT_DEBUG_FRAMES];
    int n = capture(frames);
    t->storage = &ct_dead_storage;
    t->device = (ct_device){CT_DEVICE_META, 0};
    t->grad = NULL;
    t->base = NULL;
    t->grad_fn = NULL;
    t->grad_fn_release = NULL;
    t->requires_grad = false;
    atomic_store(&t->refcount, 1); /* Note [Last reference]: a second release reaches us */
    ct_tensor *evict = NULL;
    ref_rec *old = NULL;
    pthread_mutex_lock(&lock);
    ref_rec *r = find_or_add(t);
    if (r) {
        r->how = how;
        r->release_op = ct_alloc_get_context();
        r->nfreed = n;
        memcpy(r->freed, frames, (size_t)n * sizeof *frames);
        r->qnext = NULL;
        if (qtail)
            qtail->qnext = r;
        else
            qhead = r;
        qtail = r;
        if (++qlen > CT_DEBUG_QUARANTINE) {
            old = qhead;
            qhead = old->qnext;
            qlen--;
            unlink_rec(old);
            evict = (ct_tensor *)old->t;
        }
    }
    pthread_mutex_unlock(&lock);
    free(old);
    free(evict);
}

/* What the record says of t: "released by ct_scope_end at f < g", into buf. */
static void describe_release(const ct_tensor *t, char *buf, size_t cap) {
    pthread_mutex_lock(&lock);
    ref_rec *r = find(t);
    if (r && r->how) {
        char site[512];
        format_site(r->freed, r->nfreed, site, sizeof site);
        snprintf(buf, cap, "released by %s%s%s at %s", r->how, r->release_op ? " inside " : "",
                 r->release_op ? r->release_op : "", site);
    } else {
        snprintf(buf, cap, "released (site not recorded)");
    }
    pthread_mutex_unlock(&lock);
}

static const char *mistake_of(const ct_tensor *t) {
    pthread_mutex_lock(&lock);
    ref_rec *r = find(t);
    bool scope = r && r->how && strcmp(r->how, "ct_scope_end") == 0;
    pthread_mutex_unlock(&lock);
    return scope ? "use after its scope ended" : "use after release";
}

static void tensor_desc(const ct_tensor *t, char *buf, size_t cap) {
    char shape[128];
    snprintf(buf, cap, "%s %s tensor", ct_shape_str(t->shape, t->ndim >= 0 && t->ndim <= CT_MAX_DIMS ? t->ndim : 0,
                                                    shape, sizeof shape),
             ct_dtype_valid(t->dtype) ? ct_dtype_name(t->dtype) : "?");
}

void ct_debug_refs_misuse(const ct_tensor *t, const char *how) {
    char first[700], desc[160], here[512];
    void *frames[CT_DEBUG_FRAMES];
    int n = capture(frames);
    format_site(frames, n, here, sizeof here);
    describe_release(t, first, sizeof first);
    tensor_desc(t, desc, sizeof desc);
    bool release = strcmp(how, "ct_release") == 0 || strcmp(how, "ct_scope_end") == 0;
    ct_error(CT_ERROR_RUNTIME, how + 3, "%s of a %s at %s; it was already %s", release ? "double release" :
             strcmp(how, "ct_keep") == 0 ? "keep after release" : "retain after release", desc, here, first);
    if (release)
        fprintf(stderr, "ctorch: CT_DEBUG=refs: %s\n", ct_last_error());
}

void ct_debug_refs_unbalanced_scope_end(void) {
    char here[512];
    void *frames[CT_DEBUG_FRAMES];
    int n = capture(frames);
    format_site(frames, n, here, sizeof here);
    ct_error(CT_ERROR_RUNTIME, "scope_end", "ct_scope_end with no open scope (more ends than ct_scope_begin calls) at %s",
             here);
    fprintf(stderr, "ctorch: warning: %s\n", ct_last_error());
}

ct_status ct_debug_refs_check_arg(const char *op, const ct_tensor *t, const char *what, int index) {
    if (!t || !ct_tensor_is_dead(t))
        return CT_OK;
    char first[700], desc[160];
    describe_release(t, first, sizeof first);
    tensor_desc(t, desc, sizeof desc);
    return ct_error(CT_ERROR_RUNTIME, op, "%s: %s %d is a %s that was %s", mistake_of(t), what, index, desc, first);
}

int64_t ct_debug_report_live(FILE *f) {
    if (!f)
        f = stderr;
    pthread_mutex_lock(&lock);
    int64_t live = 0;
    for (size_t i = 0; i < nbuckets; i++)
        for (ref_rec *r = buckets[i]; r; r = r->next)
            live += !r->how;
    if (live)
        fprintf(f, "ctorch: CT_DEBUG=refs: %lld tensor%s still alive:\n", (long long)live, live == 1 ? "" : "s");
    int64_t shown = 0;
    for (size_t i = 0; i < nbuckets && shown < CT_DEBUG_LIST_MAX; i++)
        for (ref_rec *r = buckets[i]; r && shown < CT_DEBUG_LIST_MAX; r = r->next) {
            if (r->how)
                continue;
            char desc[160], site[512];
            tensor_desc(r->t, desc, sizeof desc);
            format_site(r->made, r->nmade, site, sizeof site);
            fprintf(f, "  %s made %s%s at %s\n", desc, r->maker ? "by " : "outside any op", r->maker ? r->maker : "",
                    site);
            shown++;
        }
    if (live > shown)
        fprintf(f, "  ... and %lld more\n", (long long)(live - shown));
    pthread_mutex_unlock(&lock);
    fflush(f);
    return live;
}
