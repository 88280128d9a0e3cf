/* The caching allocator. See DESIGN.md "Allocator" and docs/memory.md.
 *
 * Note [Allocator core]
 * One core serves every device; a device supplies only raw alloc/free, synchronize and
 * (optionally) streams and events through ct_alloc_device_iface. The block logic follows
 * PyTorch's CUDACachingAllocator (formats.md §3) so that sizes, segment counts and
 * statistics agree with what a PyTorch user sees:
 *   - requests round up to 512-byte multiples (or 1/d power-of-two steps with
 *     roundup_power2_divisions); <= 1 MiB goes to the small pool, the rest to the large;
 *   - a miss asks the device for a segment (2 MiB small; 20 MiB below 10 MiB; else a
 *     2 MiB multiple) and splits it; a free merges with free neighbours;
 *   - a free block is found by best fit on the same stream (pools sorted by stream, size,
 *     address); oversize blocks (>= max_split_size) are never split;
 *   - a failed device allocation frees oversize cached blocks and retries, then frees the
 *     whole cache and retries once more before reporting out of memory.
 * Each device has its own allocator and mutex; nothing is shared between devices except
 * the configuration and the history switch, which are atomics.
 *
 * Note [CPU caching]
 * PyTorch's CPU allocator does not cache: glibc's malloc already keeps small chunks, and
 * cached CPU memory is memory other programs cannot use. Caching does pay for repeated
 * mid-size and large allocations (a training step allocating the same activations every
 * iteration), which glibc serves with fresh mmap'd pages that are zero-filled by the
 * kernel on first touch. bench/alloc.c measures both; the figures and the decision are in
 * docs/memory.md. Caching is a per-device setting (ct_memory_set_caching, CT_ALLOC_CONF
 * key cpu_caching); the CPU default is CT_CPU_CACHING_DEFAULT below. Requests above
 * CT_CPU_BYPASS bypass the CPU cache even when it is on, so a single huge tensor is
 * returned to the system as soon as it dies.
 *
 * Note [Sanitizer mode]
 * Rounding CPU blocks to 64 bytes (or carving them out of 2 MiB segments) and recycling
 * tensor and storage structs (Note [Object caches], tensor.c) both hide small
 * out-of-bounds reads and uses after free from AddressSanitizer: two heap-buffer-overflow
 * reads the op fuzzer found only showed with CPU caching off and buffers of the exact
 * size. In sanitizer mode (CT_ALLOC_CONF key sanitize) the CPU does not cache by
 * default, every CPU block is a system allocation of exactly the requested size, so
 * ASan's redzone starts at the first byte past the tensor's storage, and tensor and
 * storage structs are freed instead of recycled. It is on by default when the library
 * is built with AddressSanitizer (make asan, CT_SANITIZE, the fuzz targets); an explicit
 * cpu_caching setting (or ct_memory_set_caching) still wins, so tests of the cache
 * itself run there too. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "device.h"
#include "error.h"
#include "spin.h"

#define CT_ALIGN 64
#define CT_CPU_CACHING_DEFAULT true
#define CT_CPU_BYPASS ((size_t)1 << 30)
#define CT_DEVICE_TYPES 3
#define CT_DEFAULT_NON_SPLIT_ROUNDING CT_ALLOC_LARGE_BUFFER

#if defined(__SANITIZE_ADDRESS__)
#define CT_SANITIZE_DEFAULT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CT_SANITIZE_DEFAULT 1
#endif
#endif
#ifndef CT_SANITIZE_DEFAULT
#define CT_SANITIZE_DEFAULT 0
#endif

/* ------------------------------------------------------------------ CPU device */

/* No 64-bit system maps more than 2^47 bytes for a process (x86-64 and AArch64 with
 * 4-level tables), so larger requests fail here rather than in malloc, which under the
 * sanitizers aborts instead of returning NULL. */
#define CT_CPU_MAX_ALLOC ((size_t)1 << 47)

/* Exactly nbytes (Note [Sanitizer mode] relies on it: the allocator does the rounding),
 * 64-byte aligned. posix_memalign, unlike aligned_alloc, takes any size. */
static void *cpu_raw_alloc(void *ctx, int index, size_t nbytes) {
    (void)ctx;
    (void)index;
    if (nbytes > CT_CPU_MAX_ALLOC || ct_host_alloc_should_fail())
        return NULL;
    void *p = NULL;
    return posix_memalign(&p, CT_ALIGN, nbytes ? nbytes : 1) == 0 ? p : NULL;
}

static void cpu_raw_free(void *ctx, int index, void *ptr, size_t nbytes) {
    (void)ctx;
    (void)index;
    (void)nbytes;
    free(ptr);
}

static const ct_alloc_device_iface cpu_iface = {
    .name = "cpu",
    .raw_alloc = cpu_raw_alloc,
    .raw_free = cpu_raw_free,
    .min_block = CT_ALIGN,
    .caching_default = CT_CPU_CACHING_DEFAULT,
    .bypass_threshold = CT_CPU_BYPASS,
};

/* The allocator's own bookkeeping, counted for Note [Injected allocation failures]. */
static void *host_calloc(size_t n, size_t size) { return ct_host_alloc_should_fail() ? NULL : calloc(n, size); }
static void *host_realloc(void *p, size_t n) { return ct_host_alloc_should_fail() ? NULL : realloc(p, n); }

/* ------------------------------------------------------------------ structures */

enum { BLOCK_FREE = 0, BLOCK_ACTIVE = 1, BLOCK_PENDING = 2, BLOCK_TINY = 3 /* Note [Tiny blocks] */ };

typedef struct ct_segment ct_segment;
typedef struct ct_block ct_block;

struct ct_segment {
    char *base;
    size_t size;
    int64_t stream;
    bool small;
    bool cached;
    uint64_t pool; /* Note [Private pools]: 0 for the device's own pools */
    char context[32];
    ct_block *first; /* the block at base */
    ct_segment *prev, *next;
};

struct ct_block {
    char *ptr;
    size_t size;
    size_t requested;
    int64_t stream;
    int state;
    ct_segment *seg;
    ct_block *prev, *next; /* address neighbours in the segment */
    ct_block *hnext;       /* hash chain while active */
    ct_block *pnext;       /* pending-free list */
    int64_t *uses;         /* Note [Stream uses] */
    int nuses, capuses;
    void **events;
    int nevents;
    char context[32];
};

/* Free blocks of one pool, sorted by (stream, size, address): best fit is a binary
 * search. A sorted array keeps this short; the memmove on insert is cheap next to a
 * device allocation and the cache rarely holds more than a few thousand blocks. */
typedef struct {
    ct_block **v;
    size_t n, cap;
} block_set;

/* Note [Tiny blocks]
 * A small op's output is a block of a few hundred bytes, and the general path splits it
 * off a segment on allocation and merges it back on free: two binary searches, two
 * sorted-array edits and a dozen statistics, most of an op's cost. Freed CPU blocks of
 * up to 4 KiB instead wait, unmerged, on a list per size; an
 * allocation of that size takes the last one back. They count as free at once (the
 * allocated/active/requested statistics drop on free as before). Anything that looks at
 * or reshapes the pools first merges them back (tiny_drain): an allocation the lists
 * cannot serve, statistics and snapshot readers, empty_cache, changes of settings. So
 * every observer sees the pools exactly as the general path leaves them; only which of
 * several equal free blocks an allocation of a tiny size gets may differ. With the trace
 * history or an observer on, every block takes the general path, whose events they
 * record. */
#define CT_TINY_CLASSES 64 /* 64 B .. 4 KiB */
#define CT_TINY_KEEP 32     /* per class, and in all: bounds what waits unmerged */
#define CT_TINY_KEEP_ALL 256

/* Note [Private pools]
 * PyTorch's private memory pools (MempoolId_t), which CUDA graphs capture into. A pool
 * is an id; its segments carry it, and the free-block sets are sorted by (pool,
 * stream, size, address), so a search for a block of one pool never finds another's.
 * While a route (pool, stream) is in place (ct_alloc_pool_begin_use, for as long as a
 * capture runs on that stream) every allocation on the stream comes from the pool, and
 * a miss asks the device for a new segment of the pool; allocations on other streams
 * keep to pool 0. A block of a pool freed at any time goes back to that pool, so no
 * allocation outside the pool reuses memory a captured graph may still write. A pool
 * lives while it has uses (its creator's handle, each graph captured into it); when
 * the last goes, its whole free segments return to the device and segments that still
 * hold live tensors join pool 0, where they are freed or reused as usual. empty_cache
 * leaves live pools alone.
 * While any route is in place the allocator calls nothing a capture forbids: no event
 * queries (pending frees wait), no device synchronisation or frees (an allocation
 * that misses with the device full reports out of memory at once), and blocks used on
 * other streams that are freed meanwhile wait on a deferred list until the last route
 * ends, when their events are recorded (PyTorch's insert_events_deferred_until_no_capture).
 * A block of pool 0 that the capturing thread frees during its capture (a tensor made
 * before it, such as a gradient the captured backward replaces) may still be written
 * by the graph's kernels at every replay: it is held by the capture's pool, counted as
 * active and pending, and freed only when the pool goes. */
#define CT_ALLOC_MAX_POOLS 64
#define CT_ALLOC_MAX_ROUTES 16

typedef struct {
    uint64_t id;
    int uses;
    ct_block *held; /* blocks of pool 0 freed by its capture: reused only once it is gone */
} pool_entry;

typedef struct {
    uint64_t pool;
    int64_t stream;
} pool_route;

typedef struct dev_alloc {
    ct_spin lock; /* Note [Allocator lock] */
    ct_device device;
    const ct_alloc_device_iface *iface;
    bool caching;
    block_set small, large;
    ct_segment *segments;
    size_t nsegments;
    ct_block **buckets; /* active blocks by address */
    size_t nbuckets, nactive;
    ct_block *pending;
    ct_alloc_stats stats;
    ct_alloc_trace_entry *ring;
    size_t ring_cap, ring_len, ring_next;
    uint64_t ring_gen;
    /* Block records kept for reuse: every split of a cached segment needs one and every
     * merge gives one back, so a steady loop allocates none. */
    ct_block *spare;
    int nspare;
    /* Note [Tiny blocks]: freed small CPU blocks kept whole, by size class */
    ct_block *tiny[CT_TINY_CLASSES];
    int ntiny[CT_TINY_CLASSES];
    int tiny_total;
    /* Note [Private pools] */
    pool_entry pools[CT_ALLOC_MAX_POOLS];
    int npools;
    pool_route routes[CT_ALLOC_MAX_ROUTES];
    int nroutes;
    ct_block *deferred; /* blocks with stream uses freed while a route was in place */
} dev_alloc;

static atomic_uint_fast64_t g_next_pool = 1;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(dev_alloc *) g_devs[CT_DEVICE_TYPES][CT_ALLOC_MAX_DEVICES];
static const ct_alloc_device_iface *g_iface[CT_DEVICE_TYPES] = {&cpu_iface, NULL, NULL};

/* Configuration (CT_ALLOC_CONF). Atomics: read without a lock on every allocation. */
static atomic_size_t g_max_split = SIZE_MAX;
static atomic_size_t g_non_split_rounding = CT_DEFAULT_NON_SPLIT_ROUNDING;
static atomic_size_t g_divisions[CT_ALLOC_POW2_INTERVALS];
static _Atomic double g_gc_threshold;
static atomic_int g_cpu_caching_conf = -1; /* -1 unset, 0 off, 1 on */
atomic_int ct_alloc_sanitize_state = -1;   /* Note [Sanitizer mode]: -1 until the settings are read */
static pthread_once_t g_conf_once = PTHREAD_ONCE_INIT;

/* History (trace) switch, shared by every device. */
static atomic_bool g_history;
static atomic_size_t g_history_max;
static atomic_uint_fast64_t g_history_gen;

/* The op this thread is running (a static name), stamped on blocks and trace entries;
 * a pointer, so that setting it on every op costs a store. */
static CT_THREAD_LOCAL const char *tl_context;
static _Atomic(ct_alloc_observer_fn) g_observer; /* Note [Allocator observer] */

/* ------------------------------------------------------------------ small helpers */

static const char *dev_str(ct_device d, char *buf, size_t cap) { return ct_device_str(d, buf, cap); }

static bool is_pow2(size_t x) { return x && !(x & (x - 1)); }

static int floor_log2(size_t x) { return x ? 63 - __builtin_clzll((unsigned long long)x) : -1; }

/* PyTorch's format_size: "512 bytes", "1.50 KiB", "2.00 MiB", "3.00 GiB". */
static void format_size(uint64_t n, char *buf, size_t cap) {
    if (n <= 1024)
        snprintf(buf, cap, "%" PRIu64 " bytes", n);
    else if (n <= 1048576)
        snprintf(buf, cap, "%.2f KiB", (double)n / 1024.0);
    else if (n <= 1073741824ULL)
        snprintf(buf, cap, "%.2f MiB", (double)n / 1048576.0);
    else
        snprintf(buf, cap, "%.2f GiB", (double)n / 1073741824.0);
}

static void copy_context(char *dst, const char *src) {
    size_t i = 0;
    if (src)
        for (; i < 31 && src[i]; i++)
            dst[i] = src[i];
    dst[i] = '\0';
}

void ct_alloc_set_context(const char *op_name) { tl_context = op_name; }
const char *ct_alloc_get_context(void) { return tl_context; }

static int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

const char *ct_alloc_trace_action_name(int action) {
    static const char *names[CT_TRACE_ACTIONS] = {"alloc",         "free_requested", "free_completed", "segment_alloc",
                                                  "segment_free",  "snapshot",       "oom"};
    return action >= 0 && action < CT_TRACE_ACTIONS ? names[action] : "unknown";
}

/* ------------------------------------------------------------------ configuration */

static void conf_from_env(void);

static atomic_bool g_conf_done; /* every allocation checks it: one load, not pthread_once */

static inline void conf_ensure(void) {
    if (__builtin_expect(!atomic_load_explicit(&g_conf_done, memory_order_acquire), 0)) {
        pthread_once(&g_conf_once, conf_from_env);
        atomic_store_explicit(&g_conf_done, true, memory_order_release);
    }
}

size_t ct_alloc_conf_max_split_size(void) {
    pthread_once(&g_conf_once, conf_from_env);
    return atomic_load(&g_max_split);
}

size_t ct_alloc_conf_roundup_divisions(size_t size) {
    conf_ensure();
    int log_size = floor_log2(size);
    int start = 20; /* 1 MiB */
    int index = log_size > start ? log_size - start : 0;
    if (index > CT_ALLOC_POW2_INTERVALS - 1)
        index = CT_ALLOC_POW2_INTERVALS - 1;
    return atomic_load(&g_divisions[index]);
}

static bool parse_size_t(const char *s, size_t len, size_t *out) {
    if (len == 0 || len > 19)
        return false;
    size_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return false;
        v = v * 10 + (size_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

static bool parse_bool(const char *s, size_t len, bool *out) {
    if (len == 4 && strncmp(s, "True", 4) == 0) {
        *out = true;
        return true;
    }
    if (len == 5 && strncmp(s, "False", 5) == 0) {
        *out = false;
        return true;
    }
    return false;
}

typedef struct {
    size_t max_split, non_split_rounding;
    size_t divisions[CT_ALLOC_POW2_INTERVALS];
    double gc_threshold;
    int cpu_caching;
    int sanitize;     /* Note [Sanitizer mode] */
    bool sanitize_given;
    int64_t fail_at;  /* Note [Injected allocation failures]; -1 when not given */
} alloc_conf;

#define CONF_ERR(...) (ct_error(CT_ERROR_VALUE, "alloc_conf", __VA_ARGS__), false)

/* "[256:1,512:2,>:4]": keys in MiB (powers of two) pick the interval starting there. */
static bool parse_divisions_list(const char *v, size_t len, alloc_conf *c) {
    if (len < 2 || v[len - 1] != ']')
        return CONF_ERR("roundup_power2_divisions: expected a number or a list like [256:1,512:2,>:4]");
    size_t i = 1;
    bool first = true;
    size_t last_index = 0;
    memset(c->divisions, 0, sizeof c->divisions);
    while (i < len - 1) {
        size_t j = i;
        while (j < len - 1 && v[j] != ',')
            j++;
        const char *colon = memchr(v + i, ':', j - i);
        size_t div;
        if (!colon || !parse_size_t(colon + 1, (size_t)(v + j - colon - 1), &div))
            return CONF_ERR("roundup_power2_divisions: bad entry '%.*s'", (int)(j - i), v + i);
        if (div != 0 && !is_pow2(div))
            return CONF_ERR("For roundups, the divisions has to be power of 2 (got %zu)", div);
        size_t klen = (size_t)(colon - (v + i));
        if (klen == 1 && v[i] == '>') {
            for (size_t k = first ? 0 : last_index + 1; k < CT_ALLOC_POW2_INTERVALS; k++)
                c->divisions[k] = div;
        } else {
            size_t mb;
            if (!parse_size_t(v + i, klen, &mb) || !is_pow2(mb))
                return CONF_ERR("For roundups, the intervals have to be power of 2 (got '%.*s')", (int)klen, v + i);
            size_t index = (size_t)floor_log2(mb);
            if (index > CT_ALLOC_POW2_INTERVALS - 1)
                index = CT_ALLOC_POW2_INTERVALS - 1;
            if (first)
                for (size_t k = 0; k < index; k++)
                    c->divisions[k] = div;
            first = false;
            c->divisions[index] = div;
            last_index = index;
        }
        i = j + 1;
    }
    return true;
}

static bool parse_conf(const char *conf, alloc_conf *c) {
    const char *p = conf;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        const char *item = p;
        int depth = 0;
        while (*p && (depth > 0 || *p != ',')) {
            depth += *p == '[' ? 1 : *p == ']' ? -1 : 0;
            p++;
        }
        size_t ilen = (size_t)(p - item);
        const char *colon = memchr(item, ':', ilen);
        if (!colon)
            return CONF_ERR("expected key:value in '%.*s'", (int)ilen, item);
        size_t klen = (size_t)(colon - item);
        const char *v = colon + 1;
        size_t vlen = ilen - klen - 1;
#define KEY(name) (klen == strlen(name) && strncmp(item, name, klen) == 0)
        if (KEY("max_split_size_mb") || KEY("max_non_split_rounding_mb")) {
            size_t mb;
            if (!parse_size_t(v, vlen, &mb))
                return CONF_ERR("%.*s: expected a whole number of MiB, got '%.*s'", (int)klen, item, (int)vlen, v);
            if (mb < CT_ALLOC_LARGE_BUFFER >> 20)
                return CONF_ERR("CachingAllocator option %.*s too small, must be >= %zu", (int)klen, item,
                                CT_ALLOC_LARGE_BUFFER >> 20);
            size_t bytes = mb > (SIZE_MAX >> 20) ? SIZE_MAX : mb << 20;
            if (KEY("max_split_size_mb"))
                c->max_split = bytes;
            else
                c->non_split_rounding = bytes;
        } else if (KEY("roundup_power2_divisions")) {
            if (vlen > 0 && v[0] == '[') {
                if (!parse_divisions_list(v, vlen, c))
                    return false;
            } else {
                size_t d;
                if (!parse_size_t(v, vlen, &d) || !is_pow2(d))
                    return CONF_ERR("For roundups, the divisions has to be power of 2 (got '%.*s')", (int)vlen, v);
                for (int k = 0; k < CT_ALLOC_POW2_INTERVALS; k++)
                    c->divisions[k] = d;
            }
        } else if (KEY("garbage_collection_threshold")) {
            char buf[32];
            if (vlen == 0 || vlen >= sizeof buf)
                return CONF_ERR("garbage_collection_threshold: expected a number in (0, 1)");
            memcpy(buf, v, vlen);
            buf[vlen] = '\0';
            char *end;
            double t = strtod(buf, &end);
            if (*end != '\0')
                return CONF_ERR("garbage_collection_threshold: expected a number in (0, 1), got '%s'", buf);
            if (!(t > 0.0))
                return CONF_ERR("garbage_collect_threshold too small, set it 0.0~1.0");
            if (!(t < 1.0))
                return CONF_ERR("garbage_collect_threshold too big, set it 0.0~1.0");
            c->gc_threshold = t;
        } else if (KEY("expandable_segments") || KEY("release_lock_on_cudamalloc") || KEY("cpu_caching") ||
                   KEY("sanitize")) {
            bool b;
            if (!parse_bool(v, vlen, &b))
                return CONF_ERR("Expected True or False for %.*s, got '%.*s'", (int)klen, item, (int)vlen, v);
            if (KEY("cpu_caching"))
                c->cpu_caching = b ? 1 : 0;
            if (KEY("sanitize")) {
                c->sanitize = b ? 1 : 0;
                c->sanitize_given = true;
            }
        } else if (KEY("fail_host_alloc")) {
            size_t n;
            if (!parse_size_t(v, vlen, &n) || n > INT64_MAX)
                return CONF_ERR("fail_host_alloc: expected a whole number (0 turns it off), got '%.*s'", (int)vlen,
                                v);
            c->fail_at = (int64_t)n;
        } else if (KEY("backend")) {
            if (!(vlen == 6 && strncmp(v, "native", 6) == 0))
                return CONF_ERR("Unknown allocator backend '%.*s', options are native", (int)vlen, v);
        } else if (KEY("pinned_use_cuda_host_register") || KEY("pinned_num_register_threads") ||
                   KEY("pinned_use_background_threads")) {
            /* pinned host memory is not managed by this allocator */
        } else {
            return CONF_ERR("Unrecognized CachingAllocator option: %.*s", (int)klen, item);
        }
#undef KEY
    }
    return true;
}

static void conf_current(alloc_conf *c) {
    c->max_split = atomic_load(&g_max_split);
    c->non_split_rounding = atomic_load(&g_non_split_rounding);
    for (int k = 0; k < CT_ALLOC_POW2_INTERVALS; k++)
        c->divisions[k] = atomic_load(&g_divisions[k]);
    c->gc_threshold = atomic_load(&g_gc_threshold);
    c->cpu_caching = atomic_load(&g_cpu_caching_conf);
    int san = atomic_load(&ct_alloc_sanitize_state);
    c->sanitize = san >= 0 ? san : CT_SANITIZE_DEFAULT;
    c->sanitize_given = false;
    c->fail_at = -1;
}

static void conf_apply(const alloc_conf *c) {
    atomic_store(&g_max_split, c->max_split);
    atomic_store(&g_non_split_rounding, c->non_split_rounding);
    for (int k = 0; k < CT_ALLOC_POW2_INTERVALS; k++)
        atomic_store(&g_divisions[k], c->divisions[k]);
    atomic_store(&g_gc_threshold, c->gc_threshold);
    atomic_store(&g_cpu_caching_conf, c->cpu_caching);
    atomic_store(&ct_alloc_sanitize_state, c->sanitize);
    if (c->fail_at >= 0)
        ct_host_alloc_fail_at(c->fail_at);
}

static void conf_from_env(void) {
    alloc_conf c;
    conf_current(&c);
    const char *env = getenv("CT_ALLOC_CONF");
    if (!env || !*env) {
        atomic_store(&ct_alloc_sanitize_state, c.sanitize);
        return;
    }
    if (parse_conf(env, &c)) {
        conf_apply(&c);
    } else {
        atomic_store(&ct_alloc_sanitize_state, CT_SANITIZE_DEFAULT);
        /* An allocation is no place to fail for a bad environment variable: say so once
         * and keep the defaults. */
        fprintf(stderr, "ctorch: ignoring CT_ALLOC_CONF: %s\n", ct_last_error());
        ct_clear_error();
    }
}

ct_status ct_memory_set_alloc_conf(const char *conf) {
    if (!conf)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "memory_set_alloc_conf", "conf must not be NULL");
    pthread_once(&g_conf_once, conf_from_env);
    alloc_conf c;
    conf_current(&c);
    if (!parse_conf(conf, &c))
        return ct_last_status();
    conf_apply(&c);
    if (c.cpu_caching >= 0 || c.sanitize_given) {
        ct_status st = ct_memory_set_caching(CT_CPU, c.cpu_caching >= 0 ? c.cpu_caching == 1 : !c.sanitize);
        if (st != CT_OK)
            return st;
    }
    return CT_OK;
}

bool ct_alloc_sanitizing_slow(void) {
    pthread_once(&g_conf_once, conf_from_env);
    return atomic_load(&ct_alloc_sanitize_state) == 1;
}

/* A device type's caching when nothing set it: Note [CPU caching], and Note [Sanitizer
 * mode] for the built-in CPU device (a device a test installs keeps its own default). */
static bool caching_default(ct_device_type type, const ct_alloc_device_iface *iface) {
    if (type != CT_DEVICE_CPU)
        return iface->caching_default;
    int conf = atomic_load(&g_cpu_caching_conf);
    if (conf >= 0)
        return conf == 1;
    return iface->caching_default && !(iface == &cpu_iface && atomic_load(&ct_alloc_sanitize_state) == 1);
}

/* ------------------------------------------------------------------ sizing */

static size_t roundup_power2_next_division(size_t size, size_t divisions) {
    if (is_pow2(size))
        return size;
    size_t floor2 = (size_t)1 << floor_log2(size);
    size_t step = floor2 >> floor_log2(divisions);
    if (step == 0)
        return floor2 << 1;
    size_t down = size & ~(step - 1);
    return down == size ? size : down + step;
}

size_t ct_alloc_round_size_unit(size_t size, size_t unit) {
    if (size <= unit)
        return unit;
    size_t d = ct_alloc_conf_roundup_divisions(size);
    if (d > 1 && size > unit * d)
        return roundup_power2_next_division(size, d);
    if (size > SIZE_MAX - unit)
        return SIZE_MAX; /* cannot be satisfied; the device says so */
    return (size + unit - 1) / unit * unit;
}

size_t ct_alloc_round_size(size_t size) { return ct_alloc_round_size_unit(size, CT_ALLOC_MIN_BLOCK); }

static size_t unit_of(const dev_alloc *da) {
    return da->iface->min_block ? da->iface->min_block : CT_ALLOC_MIN_BLOCK;
}

size_t ct_alloc_segment_size(size_t size) {
    if (size <= CT_ALLOC_SMALL_SIZE)
        return CT_ALLOC_SMALL_BUFFER;
    if (size < CT_ALLOC_MIN_LARGE_ALLOC)
        return CT_ALLOC_LARGE_BUFFER;
    if (size > SIZE_MAX - CT_ALLOC_ROUND_LARGE)
        return SIZE_MAX;
    return (size + CT_ALLOC_ROUND_LARGE - 1) / CT_ALLOC_ROUND_LARGE * CT_ALLOC_ROUND_LARGE;
}

/* ------------------------------------------------------------------ block sets */

static int block_key_cmp(const ct_block *b, uint64_t pool, int64_t stream, size_t size, uintptr_t ptr) {
    if (b->seg->pool != pool)
        return b->seg->pool < pool ? -1 : 1;
    if (b->stream != stream)
        return b->stream < stream ? -1 : 1;
    if (b->size != size)
        return b->size < size ? -1 : 1;
    uintptr_t bp = (uintptr_t)b->ptr;
    return bp < ptr ? -1 : bp > ptr ? 1 : 0;
}

static size_t set_lower_bound(const block_set *s, uint64_t pool, int64_t stream, size_t size, uintptr_t ptr) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (block_key_cmp(s->v[mid], pool, stream, size, ptr) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool set_insert(block_set *s, ct_block *b) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        ct_block **v = host_realloc(s->v, cap * sizeof *v);
        if (!v)
            return false;
        s->v = v;
        s->cap = cap;
    }
    size_t i = set_lower_bound(s, b->seg->pool, b->stream, b->size, (uintptr_t)b->ptr);
    memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof *s->v);
    s->v[i] = b;
    s->n++;
    return true;
}

static void set_erase_at(block_set *s, size_t i) {
    memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof *s->v);
    s->n--;
}

static void set_erase(block_set *s, ct_block *b) {
    size_t i = set_lower_bound(s, b->seg->pool, b->stream, b->size, (uintptr_t)b->ptr);
    CT_ASSERT(i < s->n && s->v[i] == b);
    set_erase_at(s, i);
}

/* ------------------------------------------------------------------ active-block table */

static size_t hash_ptr(const void *p, size_t nbuckets) {
    uint64_t x = (uint64_t)(uintptr_t)p >> 6;
    x *= 0x9E3779B97F4A7C15ULL;
    return (size_t)(x >> 20) & (nbuckets - 1);
}

/* Grows the table ahead of an insert, so that inserting never fails half-way through an
 * allocation. */
static bool table_reserve(dev_alloc *da) {
    if (da->nactive + 1 > da->nbuckets) {
        size_t nb = da->nbuckets ? da->nbuckets * 2 : 256;
        ct_block **buckets = host_calloc(nb, sizeof *buckets);
        if (!buckets)
            return false;
        for (size_t i = 0; i < da->nbuckets; i++)
            for (ct_block *x = da->buckets[i], *next; x; x = next) {
                next = x->hnext;
                size_t h = hash_ptr(x->ptr, nb);
                x->hnext = buckets[h];
                buckets[h] = x;
            }
        free(da->buckets);
        da->buckets = buckets;
        da->nbuckets = nb;
    }
    return true;
}

static void table_insert(dev_alloc *da, ct_block *b) {
    CT_ASSERT(da->nactive < da->nbuckets);
    size_t h = hash_ptr(b->ptr, da->nbuckets);
    b->hnext = da->buckets[h];
    da->buckets[h] = b;
    da->nactive++;
}

static ct_block *table_remove(dev_alloc *da, const void *ptr) {
    if (!da->nbuckets)
        return NULL;
    ct_block **pp = &da->buckets[hash_ptr(ptr, da->nbuckets)];
    for (; *pp; pp = &(*pp)->hnext)
        if ((*pp)->ptr == ptr) {
            ct_block *b = *pp;
            *pp = b->hnext;
            b->hnext = NULL;
            da->nactive--;
            return b;
        }
    return NULL;
}

static ct_block *table_find(dev_alloc *da, const void *ptr) {
    if (!da->nbuckets)
        return NULL;
    for (ct_block *b = da->buckets[hash_ptr(ptr, da->nbuckets)]; b; b = b->hnext)
        if (b->ptr == ptr)
            return b;
    return NULL;
}

/* ------------------------------------------------------------------ stats */

static void stat_inc(ct_alloc_stat *s, int64_t n) {
    s->current += n;
    if (s->current > s->peak)
        s->peak = s->current;
    s->allocated += n;
}

static void stat_dec(ct_alloc_stat *s, int64_t n) {
    s->current -= n;
    s->freed += n;
}

static void arr_inc(ct_alloc_stat *a, bool small, int64_t n) {
    stat_inc(&a[CT_STAT_ALL], n);
    stat_inc(&a[small ? CT_STAT_SMALL : CT_STAT_LARGE], n);
}

static void arr_dec(ct_alloc_stat *a, bool small, int64_t n) {
    stat_dec(&a[CT_STAT_ALL], n);
    stat_dec(&a[small ? CT_STAT_SMALL : CT_STAT_LARGE], n);
}

/* ------------------------------------------------------------------ trace */

void ct_alloc_set_observer(ct_alloc_observer_fn fn) { atomic_store(&g_observer, fn); }

static inline void observe(dev_alloc *da, int action, uint64_t addr, uint64_t size) {
    ct_alloc_observer_fn obs = atomic_load_explicit(&g_observer, memory_order_relaxed);
    if (obs)
        obs(da->device, action, addr, size, da->stats.allocated_bytes[CT_STAT_ALL].current);
}

static void trace_record(dev_alloc *da, int action, uint64_t addr, uint64_t size, int64_t stream, const char *ctx);
static void tiny_drain(dev_alloc *da);

/* Inline, so that with history and the observer off an event costs two loads. */
static inline void trace(dev_alloc *da, int action, uint64_t addr, uint64_t size, int64_t stream, const char *ctx) {
    observe(da, action, addr, size);
    if (atomic_load_explicit(&g_history, memory_order_relaxed))
        trace_record(da, action, addr, size, stream, ctx);
}

static __attribute__((noinline)) void trace_record(dev_alloc *da, int action, uint64_t addr, uint64_t size,
                                                   int64_t stream, const char *ctx) {
    uint64_t gen = atomic_load(&g_history_gen);
    size_t max = atomic_load(&g_history_max);
    if (da->ring_gen != gen) {
        /* the history was restarted (possibly with another size): start a fresh ring */
        da->ring_len = da->ring_next = 0;
        da->ring_gen = gen;
    }
    ct_alloc_trace_entry *e;
    if (da->ring_len < max) {
        if (da->ring_len == da->ring_cap) {
            size_t cap = da->ring_cap ? da->ring_cap * 2 : 1024;
            if (cap > max)
                cap = max;
            ct_alloc_trace_entry *r = host_realloc(da->ring, cap * sizeof *r);
            if (!r)
                return; /* history is best effort; the allocation itself must not fail */
            da->ring = r;
            da->ring_cap = cap;
        }
        e = &da->ring[da->ring_len++];
        da->ring_next = da->ring_len % max;
    } else {
        /* full: overwrite the oldest */
        e = &da->ring[da->ring_next];
        da->ring_next = (da->ring_next + 1) % max;
    }
    e->action = action;
    e->addr = addr;
    e->size = size;
    e->stream = stream;
    e->time_us = now_us();
    copy_context(e->context, ctx);
}

ct_status ct_memory_record_history(bool enabled, int64_t max_entries) {
    if (enabled && max_entries < 1)
        return ct_error(CT_ERROR_VALUE, "memory_record_history", "max_entries must be at least 1, got %lld",
                        (long long)max_entries);
    pthread_mutex_lock(&g_lock);
    atomic_store(&g_history, false);
    if (enabled)
        atomic_store(&g_history_max, (size_t)max_entries);
    atomic_fetch_add(&g_history_gen, 1);
    /* Stopping discards the history, as PyTorch does; buffers go back now. */
    for (int t = 0; t < CT_DEVICE_TYPES; t++)
        for (int i = 0; i < CT_ALLOC_MAX_DEVICES; i++) {
            dev_alloc *da = atomic_load(&g_devs[t][i]);
            if (!da)
                continue;
            ct_spin_lock(&da->lock);
            tiny_drain(da); /* with history on, every free takes the general path */
            free(da->ring);
            da->ring = NULL;
            da->ring_cap = da->ring_len = da->ring_next = 0;
            ct_spin_unlock(&da->lock);
        }
    atomic_store(&g_history, enabled);
    pthread_mutex_unlock(&g_lock);
    return CT_OK;
}

/* ------------------------------------------------------------------ devices */

static bool valid_device(ct_device d, const char *op) {
    if (d.type == CT_DEVICE_META) {
        ct_error(CT_ERROR_DEVICE, op, "meta tensors have no data, so they have no allocator");
        return false;
    }
    if (d.type < 0 || d.type >= CT_DEVICE_TYPES || d.index < 0 || d.index >= CT_ALLOC_MAX_DEVICES ||
        (d.type == CT_DEVICE_CPU && d.index != 0)) {
        ct_error(CT_ERROR_DEVICE, op, "invalid device (type %d, index %d)", (int)d.type, (int)d.index);
        return false;
    }
    return true;
}

static inline dev_alloc *find_dev(ct_device d) {
    if ((unsigned)d.type >= CT_DEVICE_TYPES || (unsigned)d.index >= CT_ALLOC_MAX_DEVICES)
        return NULL;
    return atomic_load_explicit(&g_devs[d.type][d.index], memory_order_acquire);
}

/* The device's allocator, created on first use; NULL with an error set. */

static dev_alloc *make_dev(ct_device d, const char *op);

static inline dev_alloc *get_dev(ct_device d, const char *op) {
    /* An allocator exists only for a valid device, made after the settings were read. */
    dev_alloc *da = find_dev(d);
    return da ? da : make_dev(d, op);
}

static __attribute__((noinline)) dev_alloc *make_dev(ct_device d, const char *op) {
    dev_alloc *da;
    conf_ensure();
    if (!valid_device(d, op))
        return NULL;
    if (d.type != CT_DEVICE_CPU) /* Note [Lazy CUDA backend]: its allocator comes with it */
        (void)ct_device_iface_get((ct_device_type)d.type);
    pthread_mutex_lock(&g_lock);
    da = atomic_load(&g_devs[d.type][d.index]);
    if (!da) {
        const ct_alloc_device_iface *iface = g_iface[d.type];
        char buf[32];
        if (!iface) {
            ct_error(CT_ERROR_DEVICE, op, "no allocator for device %s: ctorch was built without support for it",
                     dev_str(d, buf, sizeof buf));
        } else if ((da = host_calloc(1, sizeof *da)) == NULL) {
            ct_error(CT_ERROR_OUT_OF_MEMORY, op, "could not create the allocator for %s", dev_str(d, buf, sizeof buf));
        } else {
            atomic_init(&da->lock.held, 0);
            da->device = d;
            da->iface = iface;
            da->caching = caching_default(d.type, iface);
            atomic_store_explicit(&g_devs[d.type][d.index], da, memory_order_release);
        }
    }
    pthread_mutex_unlock(&g_lock);
    return da;
}

/* ------------------------------------------------------------------ segments */

#define CT_SPARE_BLOCKS 256

static void block_destroy(dev_alloc *da, ct_block *b) {
    free(b->uses);
    free(b->events);
    if (da->nspare < CT_SPARE_BLOCKS) {
        b->next = da->spare;
        da->spare = b;
        da->nspare++;
    } else {
        free(b);
    }
}

static ct_block *block_new(dev_alloc *da) {
    ct_block *b = da->spare;
    if (!b)
        return host_calloc(1, sizeof *b);
    da->spare = b->next;
    da->nspare--;
    memset(b, 0, sizeof *b);
    return b;
}

/* Asks the device for a segment; returns its one block (not in any pool), or NULL when
 * the device refused (no error set: the caller retries or reports). */
static ct_block *segment_alloc(dev_alloc *da, size_t size, int64_t stream, bool small, bool cached, uint64_t pool) {
    ct_segment *seg = host_calloc(1, sizeof *seg);
    ct_block *b = block_new(da);
    void *p = seg && b ? da->iface->raw_alloc(da->iface->ctx, da->device.index, size) : NULL;
    if (!p) {
        free(seg);
        free(b);
        return NULL;
    }
    seg->base = p;
    seg->size = size;
    seg->stream = stream;
    seg->small = small;
    seg->cached = cached;
    seg->pool = pool;
    copy_context(seg->context, tl_context);
    seg->first = b;
    seg->next = da->segments;
    if (da->segments)
        da->segments->prev = seg;
    da->segments = seg;
    da->nsegments++;
    b->ptr = p;
    b->size = size;
    b->stream = stream;
    b->seg = seg;
    da->stats.num_device_alloc++;
    arr_inc(da->stats.segment, small, 1);
    arr_inc(da->stats.reserved_bytes, small, (int64_t)size);
    if (size >= atomic_load(&g_max_split))
        stat_inc(&da->stats.oversize_segments, 1);
    trace(da, CT_TRACE_SEGMENT_ALLOC, (uint64_t)(uintptr_t)p, size, stream, tl_context);
    return b;
}

/* Returns a whole, free segment (its only block b, already out of any pool) to the device. */
static void segment_release(dev_alloc *da, ct_block *b) {
    ct_segment *seg = b->seg;
    CT_ASSERT(!b->prev && !b->next && b->size == seg->size);
    da->iface->raw_free(da->iface->ctx, da->device.index, seg->base, seg->size);
    da->stats.num_device_free++;
    arr_dec(da->stats.segment, seg->small, 1);
    arr_dec(da->stats.reserved_bytes, seg->small, (int64_t)seg->size);
    if (seg->size >= atomic_load(&g_max_split))
        stat_dec(&da->stats.oversize_segments, 1);
    trace(da, CT_TRACE_SEGMENT_FREE, (uint64_t)(uintptr_t)seg->base, seg->size, seg->stream, tl_context);
    if (seg->prev)
        seg->prev->next = seg->next;
    else
        da->segments = seg->next;
    if (seg->next)
        seg->next->prev = seg->prev;
    da->nsegments--;
    free(seg);
    block_destroy(da, b);
}

/* ------------------------------------------------------------------ free path */

/* Merges src into dst when src is a free neighbour; returns the bytes taken over. */
static size_t try_merge(dev_alloc *da, ct_block *dst, ct_block *src) {
    if (!src || src->state != BLOCK_FREE)
        return 0;
    set_erase(src->seg->small ? &da->small : &da->large, src);
    if (dst->prev == src) {
        dst->ptr = src->ptr;
        dst->prev = src->prev;
        if (dst->prev)
            dst->prev->next = dst;
        if (dst->seg->first == src)
            dst->seg->first = dst;
    } else {
        dst->next = src->next;
        if (dst->next)
            dst->next->prev = dst;
    }
    size_t n = src->size;
    dst->size += n;
    block_destroy(da, src);
    return n;
}

/* A block already counted as no longer active: merge it with free neighbours and put it
 * back in its pool. */
static void block_to_pool(dev_alloc *da, ct_block *b) {
    ct_segment *seg = b->seg;
    b->state = BLOCK_FREE;
    int64_t net_blocks = 0, net_bytes = 0;
    size_t m;
    if ((m = try_merge(da, b, b->prev)) > 0) {
        net_blocks--;
        net_bytes -= (int64_t)m;
    }
    if ((m = try_merge(da, b, b->next)) > 0) {
        net_blocks--;
        net_bytes -= (int64_t)m;
    }
    if (b->prev || b->next) {
        net_blocks++;
        net_bytes += (int64_t)b->size;
    }
    ct_alloc_stats *s = &da->stats;
    int t = seg->small ? CT_STAT_SMALL : CT_STAT_LARGE;
    int types[2] = {CT_STAT_ALL, t};
    for (int k = 0; k < 2; k++) {
        if (net_blocks > 0)
            stat_inc(&s->inactive_split[types[k]], net_blocks);
        else if (net_blocks < 0)
            stat_dec(&s->inactive_split[types[k]], -net_blocks);
        if (net_bytes > 0)
            stat_inc(&s->inactive_split_bytes[types[k]], net_bytes);
        else if (net_bytes < 0)
            stat_dec(&s->inactive_split_bytes[types[k]], -net_bytes);
    }
    if (!da->caching && !seg->pool && !b->prev && !b->next) {
        /* caching was switched off while this segment was in use: drain it now */
        segment_release(da, b);
        return;
    }
    if (!set_insert(seg->small ? &da->small : &da->large, b)) {
        /* no memory to index the block: give it back if we can, else leak it cached */
        if (!b->prev && !b->next)
            segment_release(da, b);
    }
}

/* The block is no longer used by any stream: count it inactive, then back to its pool. */
static void free_block(dev_alloc *da, ct_block *b) {
    ct_alloc_stats *s = &da->stats;
    bool small = b->seg->small;
    trace(da, CT_TRACE_FREE_COMPLETED, (uint64_t)(uintptr_t)b->ptr, b->requested, b->stream, tl_context);
    arr_dec(s->active, small, 1);
    arr_dec(s->active_bytes, small, (int64_t)b->size);
    arr_dec(s->requested_bytes, small, (int64_t)b->requested);
    b->nuses = 0;
    b->requested = 0;
    block_to_pool(da, b);
}

/* ------------------------------------------------------------------ tiny blocks */

/* Size class of a rounded CPU size under Note [Tiny blocks] (the CPU rounds to
 * CT_ALIGN), or -1. */
static int tiny_class(size_t size) {
    if (size > CT_TINY_CLASSES * CT_ALIGN || size % CT_ALIGN != 0)
        return -1;
    return (int)(size / CT_ALIGN) - 1;
}

static bool tiny_allowed(const dev_alloc *da) {
    return da->iface == &cpu_iface && da->caching && !atomic_load_explicit(&g_history, memory_order_relaxed) &&
           !atomic_load_explicit(&g_observer, memory_order_relaxed);
}

/* Frees b (a whole, active block of a cached small segment) onto its tiny list; false
 * when it must take the general path. */
static bool tiny_put(dev_alloc *da, ct_block *b) {
    int c = tiny_class(b->size);
    if (c < 0 || !b->seg->small || da->ntiny[c] >= CT_TINY_KEEP || da->tiny_total >= CT_TINY_KEEP_ALL ||
        !tiny_allowed(da))
        return false;
    ct_alloc_stats *s = &da->stats;
    arr_dec(s->active, true, 1);
    arr_dec(s->active_bytes, true, (int64_t)b->size);
    arr_dec(s->requested_bytes, true, (int64_t)b->requested);
    b->requested = 0;
    b->state = BLOCK_TINY;
    b->pnext = da->tiny[c];
    da->tiny[c] = b;
    da->ntiny[c]++;
    da->tiny_total++;
    return true;
}

/* Merges every waiting tiny block back into its pool. */
static void tiny_drain(dev_alloc *da) {
    if (!da->tiny_total)
        return;
    for (int c = 0; c < CT_TINY_CLASSES; c++) {
        while (da->tiny[c]) {
            ct_block *b = da->tiny[c];
            da->tiny[c] = b->pnext;
            b->pnext = NULL;
            block_to_pool(da, b);
        }
        da->ntiny[c] = 0;
    }
    da->tiny_total = 0;
}

/* Frees pending blocks whose events have all completed. */
static void process_events(dev_alloc *da, bool wait) {
    ct_block **pp = &da->pending;
    while (*pp) {
        ct_block *b = *pp;
        int kept = 0;
        for (int i = 0; i < b->nevents; i++) {
            void *ev = b->events[i];
            if (wait || da->iface->event_query(da->iface->ctx, ev))
                da->iface->event_destroy(da->iface->ctx, ev);
            else
                b->events[kept++] = ev;
        }
        b->nevents = kept;
        if (kept == 0) {
            *pp = b->pnext;
            b->pnext = NULL;
            free_block(da, b);
        } else {
            pp = &b->pnext;
        }
    }
}

static void release_segment_free(dev_alloc *da, ct_block *b) {
    ct_segment *seg = b->seg;
    trace(da, CT_TRACE_FREE_COMPLETED, (uint64_t)(uintptr_t)b->ptr, b->requested, b->stream, tl_context);
    arr_dec(da->stats.active, seg->small, 1);
    arr_dec(da->stats.active_bytes, seg->small, (int64_t)b->size);
    arr_dec(da->stats.requested_bytes, seg->small, (int64_t)b->requested);
    segment_release(da, b);
}

/* Whether pool is live on this device (Note [Private pools]). */
static pool_entry *pool_find(dev_alloc *da, uint64_t pool) {
    for (int i = 0; i < da->npools; i++)
        if (da->pools[i].id == pool)
            return &da->pools[i];
    return NULL;
}

/* The pool allocations on stream come from: the route's, else 0. */
static inline uint64_t route_of(const dev_alloc *da, int64_t stream) {
    for (int i = 0; i < da->nroutes; i++)
        if (da->routes[i].stream == stream)
            return da->routes[i].pool;
    return 0;
}

/* Frees every whole cached segment of pool 0 and of pools no longer in use (PyTorch's
 * release_cached_blocks); nothing while a route is in place (Note [Private pools]). */
static void release_cached(dev_alloc *da) {
    if (da->nroutes)
        return;
    tiny_drain(da);
    if (da->pending)
        process_events(da, true);
    if (da->iface->synchronize)
        da->iface->synchronize(da->iface->ctx, da->device.index);
    da->stats.num_sync_all_streams++;
    block_set *sets[2] = {&da->large, &da->small};
    for (int k = 0; k < 2; k++) {
        block_set *s = sets[k];
        size_t i = 0;
        while (i < s->n) {
            ct_block *b = s->v[i];
            if (!b->prev && !b->next && (!b->seg->pool || !pool_find(da, b->seg->pool))) {
                set_erase_at(s, i);
                segment_release(da, b);
            } else {
                i++;
            }
        }
    }
}

/* Frees cached oversize segments on this stream to make room for size bytes. */
static bool release_available(dev_alloc *da, size_t size, int64_t stream) {
    size_t max_split = atomic_load(&g_max_split);
    if (max_split == SIZE_MAX || da->nroutes)
        return false;
    block_set *s = &da->large;
    size_t key = size < max_split ? max_split : size;
    size_t i = set_lower_bound(s, 0, stream, key, 0);
    if (i < s->n && s->v[i]->stream == stream && !s->v[i]->seg->pool) {
        ct_block *b = s->v[i];
        if (b->prev || b->next)
            return false;
        set_erase_at(s, i);
        segment_release(da, b);
        return true;
    }
    size_t released = 0;
    while (i > 0 && released < key) {
        ct_block *b = s->v[i - 1];
        if (b->size < max_split || b->stream != stream || b->seg->pool)
            break;
        i--;
        if (b->prev || b->next)
            continue;
        released += b->size;
        set_erase_at(s, i);
        segment_release(da, b);
    }
    return released >= key;
}

/* ------------------------------------------------------------------ malloc path */

static ct_block *get_free_block(dev_alloc *da, block_set *s, uint64_t pool, size_t size, int64_t stream) {
    size_t i = set_lower_bound(s, pool, stream, size, 0);
    if (i == s->n || s->v[i]->stream != stream || s->v[i]->seg->pool != pool)
        return NULL;
    ct_block *b = s->v[i];
    size_t max_split = atomic_load(&g_max_split);
    if (size < max_split && b->size >= max_split)
        return NULL;
    if (size >= max_split && b->size >= size + atomic_load(&g_non_split_rounding))
        return NULL;
    set_erase_at(s, i);
    (void)da;
    return b;
}

static bool should_split(const dev_alloc *da, const ct_block *b, size_t size) {
    size_t remaining = b->size - size;
    if (b->seg->small)
        return remaining >= unit_of(da);
    return size < atomic_load(&g_max_split) && remaining > CT_ALLOC_SMALL_SIZE;
}

static void report_oom(dev_alloc *da, size_t request, size_t rounded, int64_t stream) {
    da->stats.num_ooms++;
    int64_t free_bytes = da->iface->free_bytes ? da->iface->free_bytes(da->iface->ctx, da->device.index) : 0;
    trace(da, CT_TRACE_OOM, (uint64_t)free_bytes, rounded, stream, tl_context);
    char name[16], req[32], alloc[32], resv[32], unalloc[32], dbuf[32];
    size_t i = 0;
    for (; i < sizeof name - 1 && da->iface->name && da->iface->name[i]; i++)
        name[i] = (char)toupper((unsigned char)da->iface->name[i]);
    name[i] = '\0';
    int64_t allocated = da->stats.allocated_bytes[CT_STAT_ALL].current;
    int64_t reserved = da->stats.reserved_bytes[CT_STAT_ALL].current;
    format_size(request, req, sizeof req);
    format_size((uint64_t)allocated, alloc, sizeof alloc);
    format_size((uint64_t)reserved, resv, sizeof resv);
    format_size((uint64_t)(reserved - allocated), unalloc, sizeof unalloc);
    ct_error(CT_ERROR_OUT_OF_MEMORY, "alloc",
             "%s out of memory. Tried to allocate %s (%zu bytes) on %s. Of the memory reserved by ctorch "
             "(%s, %" PRId64 " bytes), %s (%" PRId64 " bytes) is allocated to tensors and %s is reserved but "
             "unallocated. If reserved but unallocated memory is large try setting "
             "CT_ALLOC_CONF=max_split_size_mb:<MiB> to avoid fragmentation.",
             name, req, request, dev_str(da->device, dbuf, sizeof dbuf), resv, reserved, alloc, allocated, unalloc);
}

static void *malloc_locked(dev_alloc *da, size_t request, int64_t stream) {
    ct_alloc_stats *s = &da->stats;
    /* Note [Private pools]: no event queries while a capture may be running */
    const uint64_t pool = da->nroutes ? route_of(da, stream) : 0;
    if (da->nroutes && !pool && da->iface->capturing && da->iface->capturing(da->iface->ctx, da->device.index)) {
        char buf[32];
        const char *op = tl_context ? tl_context : "alloc";
        ct_error(CT_ERROR_RUNTIME, op,
                 "an allocation of %zu bytes on stream %" PRId64 " of %s, outside the private memory pool of the "
                 "CUDA graph this thread is capturing: only the capturing stream allocates during a capture",
                 request, stream, dev_str(da->device, buf, sizeof buf));
        return NULL;
    }
    if (da->pending && !da->nroutes)
        process_events(da, false);
    if (!table_reserve(da)) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, "alloc", "could not record an allocation of %zu bytes", request);
        return NULL;
    }
    size_t size = ct_alloc_round_size_unit(request, unit_of(da));
    bool cached = pool || (da->caching && !(da->iface->bypass_threshold && size > da->iface->bypass_threshold));
    ct_block *b = NULL;
    bool small;
    bool from_tiny = false;
    if (da->tiny_total) {
        int c = tiny_class(size);
        if (c >= 0 && da->tiny[c] && cached && !pool) {
            b = da->tiny[c];
            da->tiny[c] = b->pnext;
            b->pnext = NULL;
            da->ntiny[c]--;
            da->tiny_total--;
            from_tiny = true;
        } else {
            tiny_drain(da); /* the pools as the general path would have them */
        }
    }
    if (from_tiny) {
        small = true;
    } else if (!cached) {
        /* Pass-through: one segment per allocation, sized to the alignment only (or
         * exactly, in Note [Sanitizer mode]). */
        size_t n = request ? request : 1;
        if (da->iface == &cpu_iface && atomic_load_explicit(&ct_alloc_sanitize_state, memory_order_relaxed) == 1)
            size = n;
        else
            size = n > SIZE_MAX - CT_ALIGN ? SIZE_MAX : (n + CT_ALIGN - 1) / CT_ALIGN * CT_ALIGN;
        small = size <= CT_ALLOC_SMALL_SIZE;
        b = segment_alloc(da, size, stream, small, false, 0);
        if (!b && !da->nroutes) {
            release_cached(da);
            s->num_alloc_retries++;
            observe(da, CT_ALLOC_EVENT_RETRY, 0, size);
            b = segment_alloc(da, size, stream, small, false, 0);
        }
    } else {
        small = size <= CT_ALLOC_SMALL_SIZE;
        block_set *set = small ? &da->small : &da->large;
        size_t seg_size = ct_alloc_segment_size(size);
        b = get_free_block(da, set, pool, size, stream);
        if (!b) {
            b = segment_alloc(da, seg_size, stream, small, true, pool);
            if (!b && release_available(da, size, stream))
                b = segment_alloc(da, seg_size, stream, small, true, pool);
            if (!b && !da->nroutes) {
                release_cached(da);
                s->num_alloc_retries++;
                observe(da, CT_ALLOC_EVENT_RETRY, 0, seg_size);
                b = segment_alloc(da, seg_size, stream, small, true, pool);
            }
        }
    }
    if (!b) {
        report_oom(da, request, size, stream);
        return NULL;
    }
    /* a tiny block is exactly the size asked for and never counted as inactive split */
    bool already_split = !from_tiny && (b->prev || b->next);
    int types[2] = {CT_STAT_ALL, small ? CT_STAT_SMALL : CT_STAT_LARGE};
    if (!from_tiny && cached && should_split(da, b, size)) {
        ct_block *nb = block_new(da);
        if (nb) {
            ct_block *rest = b;
            nb->ptr = rest->ptr;
            nb->size = size;
            nb->stream = stream;
            nb->seg = rest->seg;
            nb->prev = rest->prev;
            if (nb->prev)
                nb->prev->next = nb;
            nb->next = rest;
            rest->prev = nb;
            rest->ptr += size;
            rest->size -= size;
            if (rest->seg->first == rest)
                rest->seg->first = nb;
            if (!set_insert(small ? &da->small : &da->large, rest)) {
                /* cannot index the remainder: undo the split and hand out the whole block */
                rest->ptr -= size;
                rest->size += size;
                rest->prev = nb->prev;
                if (rest->prev)
                    rest->prev->next = rest;
                if (rest->seg->first == nb)
                    rest->seg->first = rest;
                free(nb);
                nb = NULL;
            } else {
                b = nb;
                for (int k = 0; k < 2; k++) {
                    if (already_split) {
                        stat_dec(&s->inactive_split_bytes[types[k]], (int64_t)size);
                    } else {
                        stat_inc(&s->inactive_split_bytes[types[k]], (int64_t)rest->size);
                        stat_inc(&s->inactive_split[types[k]], 1);
                    }
                }
                already_split = false;
            }
        }
    }
    if (already_split)
        for (int k = 0; k < 2; k++) {
            stat_dec(&s->inactive_split_bytes[types[k]], (int64_t)b->size);
            stat_dec(&s->inactive_split[types[k]], 1);
        }
    b->state = BLOCK_ACTIVE;
    b->requested = request;
    b->stream = stream;
    copy_context(b->context, tl_context);
    table_insert(da, b);
    arr_inc(s->allocation, small, 1);
    arr_inc(s->allocated_bytes, small, (int64_t)b->size);
    arr_inc(s->active, small, 1);
    arr_inc(s->active_bytes, small, (int64_t)b->size);
    arr_inc(s->requested_bytes, small, (int64_t)request);
    if (b->size >= atomic_load(&g_max_split))
        stat_inc(&s->oversize_allocations, 1);
    trace(da, CT_TRACE_ALLOC, (uint64_t)(uintptr_t)b->ptr, request, stream, tl_context);
    return b->ptr;
}

/* Note [Tiny fast lane]
 * A tiny op allocates one block of a tiny size and frees one, and in a steady loop the
 * free list of that size holds the block the last op gave back (ct_free's tiny_put).
 * tiny_take is malloc_locked cut down to that case: the same list operations, table
 * entry and statistics, in the same order, so the state it leaves is the one the
 * general path leaves; anything else (pending frees, a table that must grow, a size
 * whose list is empty, other rounding settings) takes the general path. */
static void *tiny_take(dev_alloc *da, size_t request, int64_t stream) {
    if (!da->tiny_total || da->pending || da->nactive + 1 > da->nbuckets || request > CT_TINY_CLASSES * CT_ALIGN)
        return NULL;
    int c = request <= CT_ALIGN ? 0 : (int)((request - 1) / CT_ALIGN);
    ct_block *b = da->tiny[c];
    if (!b || unit_of(da) != CT_ALIGN || ct_alloc_round_size_unit(request, CT_ALIGN) != b->size)
        return NULL;
    da->tiny[c] = b->pnext;
    b->pnext = NULL;
    da->ntiny[c]--;
    da->tiny_total--;
    b->state = BLOCK_ACTIVE;
    b->requested = request;
    b->stream = stream;
    copy_context(b->context, tl_context);
    table_insert(da, b);
    ct_alloc_stats *s = &da->stats;
    arr_inc(s->allocation, true, 1);
    arr_inc(s->allocated_bytes, true, (int64_t)b->size);
    arr_inc(s->active, true, 1);
    arr_inc(s->active_bytes, true, (int64_t)b->size);
    arr_inc(s->requested_bytes, true, (int64_t)request);
    if (b->size >= atomic_load_explicit(&g_max_split, memory_order_relaxed))
        stat_inc(&s->oversize_allocations, 1);
    trace(da, CT_TRACE_ALLOC, (uint64_t)(uintptr_t)b->ptr, request, stream, tl_context);
    return b->ptr;
}

void *ct_alloc_stream(ct_device device, size_t nbytes, int64_t stream) {
    dev_alloc *da = get_dev(device, "alloc");
    if (!da)
        return NULL;
    ct_spin_lock(&da->lock);
    void *p = malloc_locked(da, nbytes, stream);
    ct_spin_unlock(&da->lock);
    return p;
}

void *ct_alloc(ct_device device, size_t nbytes) {
    dev_alloc *da = get_dev(device, "alloc");
    if (!da)
        return NULL;
    ct_spin_lock(&da->lock);
    int64_t stream = da->iface->current_stream ? da->iface->current_stream(da->iface->ctx, device.index) : 0;
    void *p = da->nroutes ? NULL : tiny_take(da, nbytes, stream);
    if (!p)
        p = malloc_locked(da, nbytes, stream);
    ct_spin_unlock(&da->lock);
    return p;
}

/* Note [Stream uses]: wait for every other stream before reusing the block. */
static void free_with_uses(dev_alloc *da, ct_block *b) {
    if (b->nuses == 0) {
        free_block(da, b);
        return;
    }
    void **evs = host_calloc((size_t)b->nuses, sizeof *evs);
    int n = 0;
    bool ok = evs != NULL;
    for (int i = 0; ok && i < b->nuses; i++) {
        evs[n] = da->iface->event_record(da->iface->ctx, da->device.index, b->uses[i]);
        if (!evs[n])
            ok = false;
        else
            n++;
    }
    if (!ok) {
        /* no event to wait on: wait for the whole device instead */
        for (int i = 0; i < n; i++)
            da->iface->event_destroy(da->iface->ctx, evs[i]);
        free(evs);
        if (da->iface->synchronize)
            da->iface->synchronize(da->iface->ctx, da->device.index);
        free_block(da, b);
    } else {
        free(b->events);
        b->events = evs;
        b->nevents = n;
        b->state = BLOCK_PENDING;
        b->pnext = da->pending;
        da->pending = b;
    }
}

void ct_free(ct_device device, void *ptr) {
    if (!ptr)
        return;
    dev_alloc *da = find_dev(device);
    char buf[32];
    if (!da) {
        ct_error(CT_ERROR_RUNTIME, "free", "no allocation was ever made on %s", dev_str(device, buf, sizeof buf));
        return;
    }
    ct_spin_lock(&da->lock);
    ct_block *b = table_remove(da, ptr);
    if (!b) {
        ct_spin_unlock(&da->lock);
        ct_error(CT_ERROR_RUNTIME, "free", "%p was not allocated on %s by ctorch's allocator, or was freed twice", ptr,
                 dev_str(device, buf, sizeof buf));
        return;
    }
    ct_alloc_stats *s = &da->stats;
    bool small = b->seg->small;
    arr_dec(s->allocation, small, 1);
    arr_dec(s->allocated_bytes, small, (int64_t)b->size);
    if (b->size >= atomic_load(&g_max_split))
        stat_dec(&s->oversize_allocations, 1);
    trace(da, CT_TRACE_FREE_REQUESTED, (uint64_t)(uintptr_t)b->ptr, b->requested, b->stream, tl_context);
    pool_entry *holder = NULL;
    if (da->nroutes && !b->seg->pool && da->iface->capturing &&
        da->iface->capturing(da->iface->ctx, da->device.index)) {
        int64_t cur = da->iface->current_stream ? da->iface->current_stream(da->iface->ctx, device.index) : 0;
        holder = pool_find(da, route_of(da, cur));
    }
    if (holder) {
        /* Note [Private pools]: the graph may still write it at every replay */
        b->state = BLOCK_PENDING;
        b->pnext = holder->held;
        holder->held = b;
    } else if (!b->seg->cached) {
        release_segment_free(da, b);
    } else if (b->nuses > 0 && da->nroutes) {
        /* Note [Private pools]: no events while a capture may be running */
        b->state = BLOCK_PENDING;
        b->pnext = da->deferred;
        da->deferred = b;
    } else if (b->nuses > 0) {
        free_with_uses(da, b);
    } else if (b->seg->pool || !tiny_put(da, b)) {
        free_block(da, b);
    }
    ct_spin_unlock(&da->lock);
}

ct_status ct_alloc_record_stream(ct_device device, void *ptr, int64_t stream) {
    const char *op = "record_stream";
    CT_CHECK_ARG_STATUS(op, ptr);
    dev_alloc *da = get_dev(device, op);
    if (!da)
        return ct_last_status();
    char buf[32];
    ct_spin_lock(&da->lock);
    ct_block *b = table_find(da, ptr);
    ct_status st = CT_OK;
    if (!b) {
        st = ct_error(CT_ERROR_VALUE, op, "%p is not a live allocation on %s", ptr, dev_str(device, buf, sizeof buf));
    } else if (stream != b->stream) {
        if (!da->iface->event_record) {
            st = ct_error(CT_ERROR_DEVICE, op, "device %s has only stream 0, got stream %lld",
                          dev_str(device, buf, sizeof buf), (long long)stream);
        } else {
            bool seen = false;
            for (int i = 0; i < b->nuses; i++)
                seen = seen || b->uses[i] == stream;
            if (!seen) {
                if (b->nuses == b->capuses) {
                    int cap = b->capuses ? b->capuses * 2 : 4;
                    int64_t *u = host_realloc(b->uses, (size_t)cap * sizeof *u);
                    if (!u) {
                        ct_spin_unlock(&da->lock);
                        return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "could not record a stream use");
                    }
                    b->uses = u;
                    b->capuses = cap;
                }
                b->uses[b->nuses++] = stream;
            }
        }
    }
    ct_spin_unlock(&da->lock);
    return st;
}

/* ------------------------------------------------------------------ device interfaces */

/* ------------------------------------------------------------------ private pools */

/* Note [Private pools]: the last use of pool is gone (held: its held blocks). */
static void pool_drop(dev_alloc *da, uint64_t pool, ct_block *held) {
    while (held) {
        ct_block *b = held;
        held = b->pnext;
        b->pnext = NULL;
        if (da->nroutes) { /* another capture runs: no events now */
            b->pnext = da->deferred;
            da->deferred = b;
        } else if (!b->seg->cached) {
            release_segment_free(da, b);
        } else {
            free_with_uses(da, b);
        }
    }
    for (ct_segment *seg = da->segments, *next; seg; seg = next) {
        next = seg->next;
        if (seg->pool != pool)
            continue;
        block_set *set = seg->small ? &da->small : &da->large;
        ct_block *f = seg->first;
        if (!da->nroutes && f->state == BLOCK_FREE && !f->next) {
            set_erase(set, f);
            segment_release(da, f);
            continue;
        }
        /* live tensors remain: the segment joins pool 0 (erasing first leaves room to
         * insert again, so the set cannot fail to grow) */
        for (ct_block *b = seg->first; b; b = b->next)
            if (b->state == BLOCK_FREE)
                set_erase(set, b);
        seg->pool = 0;
        for (ct_block *b = seg->first; b; b = b->next)
            if (b->state == BLOCK_FREE)
                (void)set_insert(set, b);
    }
}

static dev_alloc *pool_dev(ct_device device, const char *op) {
    dev_alloc *da = get_dev(device, op);
    if (da) {
        ct_spin_lock(&da->lock);
        tiny_drain(da);
    }
    return da;
}

static ct_status no_pool(dev_alloc *da, const char *op, uint64_t pool) {
    char buf[32];
    ct_spin_unlock(&da->lock);
    return ct_error(CT_ERROR_VALUE, op, "no memory pool %" PRIu64 " on %s (never created, or released)", pool,
                    dev_str(da->device, buf, sizeof buf));
}

/* The allocator of device with its lock held and pool's entry in it; NULL (the lock
 * released, the error set) when there is none. */
static pool_entry *pool_locked(ct_device device, const char *op, uint64_t pool, dev_alloc **da) {
    if (!(*da = pool_dev(device, op)))
        return NULL;
    pool_entry *p = pool_find(*da, pool);
    if (!p)
        no_pool(*da, op, pool);
    return p;
}

ct_status ct_alloc_pool_create(ct_device device, uint64_t *out) {
    const char *op = "mempool_create";
    CT_CHECK_ARG_STATUS(op, out);
    *out = 0;
    dev_alloc *da = pool_dev(device, op);
    if (!da)
        return ct_last_status();
    if (da->npools == CT_ALLOC_MAX_POOLS) {
        ct_spin_unlock(&da->lock);
        return ct_error(CT_ERROR_RUNTIME, op, "too many memory pools (%d) on one device", CT_ALLOC_MAX_POOLS);
    }
    uint64_t id = atomic_fetch_add(&g_next_pool, 1);
    da->pools[da->npools++] = (pool_entry){.id = id, .uses = 1};
    ct_spin_unlock(&da->lock);
    *out = id;
    return CT_OK;
}

ct_status ct_alloc_pool_retain(ct_device device, uint64_t pool) {
    const char *op = "mempool_retain";
    dev_alloc *da;
    pool_entry *p = pool_locked(device, op, pool, &da);
    if (!p)
        return ct_last_status();
    p->uses++;
    ct_spin_unlock(&da->lock);
    return CT_OK;
}

ct_status ct_alloc_pool_release(ct_device device, uint64_t pool) {
    const char *op = "mempool_release";
    dev_alloc *da;
    pool_entry *p = pool_locked(device, op, pool, &da);
    if (!p)
        return ct_last_status();
    if (p->uses == 1)
        for (int i = 0; i < da->nroutes; i++)
            if (da->routes[i].pool == pool) {
                ct_spin_unlock(&da->lock);
                return ct_error(CT_ERROR_RUNTIME, op,
                                "memory pool %" PRIu64 " is in use by a capture on stream %" PRId64
                                ": end the capture first",
                                pool, da->routes[i].stream);
            }
    if (--p->uses == 0) {
        ct_block *held = p->held;
        *p = da->pools[--da->npools];
        pool_drop(da, pool, held);
    }
    ct_spin_unlock(&da->lock);
    return CT_OK;
}

ct_status ct_alloc_pool_begin_use(ct_device device, uint64_t pool, int64_t stream) {
    const char *op = "mempool_begin_use";
    dev_alloc *da;
    if (!pool_locked(device, op, pool, &da))
        return ct_last_status();
    for (int i = 0; i < da->nroutes; i++)
        if (da->routes[i].stream == stream) {
            uint64_t other = da->routes[i].pool;
            ct_spin_unlock(&da->lock);
            return ct_error(CT_ERROR_RUNTIME, op, "stream %" PRId64 " already allocates from memory pool %" PRIu64,
                            stream, other);
        }
    if (da->nroutes == CT_ALLOC_MAX_ROUTES) {
        ct_spin_unlock(&da->lock);
        return ct_error(CT_ERROR_RUNTIME, op, "too many streams (%d) allocate from private pools at once",
                        CT_ALLOC_MAX_ROUTES);
    }
    da->routes[da->nroutes++] = (pool_route){.pool = pool, .stream = stream};
    ct_spin_unlock(&da->lock);
    return CT_OK;
}

ct_status ct_alloc_pool_end_use(ct_device device, uint64_t pool, int64_t stream) {
    const char *op = "mempool_end_use";
    dev_alloc *da = pool_dev(device, op);
    if (!da)
        return ct_last_status();
    int at = -1;
    for (int i = 0; i < da->nroutes; i++)
        if (da->routes[i].stream == stream && da->routes[i].pool == pool)
            at = i;
    if (at < 0) {
        ct_spin_unlock(&da->lock);
        return ct_error(CT_ERROR_RUNTIME, op, "stream %" PRId64 " does not allocate from memory pool %" PRIu64,
                        stream, pool);
    }
    da->routes[at] = da->routes[--da->nroutes];
    if (!da->nroutes)
        while (da->deferred) {
            ct_block *b = da->deferred;
            da->deferred = b->pnext;
            b->pnext = NULL;
            if (!b->seg->cached)
                release_segment_free(da, b);
            else
                free_with_uses(da, b);
        }
    ct_spin_unlock(&da->lock);
    return CT_OK;
}

int ct_alloc_pool_routes(ct_device device) {
    dev_alloc *da = find_dev(device);
    if (!da)
        return 0;
    ct_spin_lock(&da->lock);
    int n = da->nroutes;
    ct_spin_unlock(&da->lock);
    return n;
}

uint64_t ct_alloc_pool_of_stream(ct_device device, int64_t stream) {
    dev_alloc *da = find_dev(device);
    if (!da)
        return 0;
    ct_spin_lock(&da->lock);
    uint64_t p = route_of(da, stream);
    ct_spin_unlock(&da->lock);
    return p;
}

ct_status ct_alloc_pool_get_stats(ct_device device, uint64_t pool, ct_alloc_pool_stats *out) {
    const char *op = "mempool_stats";
    CT_CHECK_ARG_STATUS(op, out);
    memset(out, 0, sizeof *out);
    dev_alloc *da;
    pool_entry *p = pool_locked(device, op, pool, &da);
    if (!p)
        return ct_last_status();
    out->uses = p->uses;
    for (ct_segment *seg = da->segments; seg; seg = seg->next) {
        if (seg->pool != pool)
            continue;
        out->segments++;
        out->reserved_bytes += (int64_t)seg->size;
        for (ct_block *b = seg->first; b; b = b->next)
            if (b->state != BLOCK_FREE) {
                out->active_blocks++;
                if (b->state == BLOCK_ACTIVE)
                    out->allocated_bytes += (int64_t)b->size;
            }
    }
    ct_spin_unlock(&da->lock);
    return CT_OK;
}

ct_status ct_alloc_set_device_interface(ct_device_type type, const ct_alloc_device_iface *iface) {
    const char *op = "alloc_set_device_interface";
    if ((int)type < 0 || (int)type >= CT_DEVICE_TYPES || type == CT_DEVICE_META)
        return ct_error(CT_ERROR_DEVICE, op, "no allocator can serve device type %d", (int)type);
    if (iface && (!iface->raw_alloc || !iface->raw_free))
        return ct_error(CT_ERROR_VALUE, op, "a device interface needs raw_alloc and raw_free");
    if (iface && ((iface->event_record != NULL) != (iface->event_query != NULL) ||
                  (iface->event_record != NULL) != (iface->event_destroy != NULL)))
        return ct_error(CT_ERROR_VALUE, op, "event_record, event_query and event_destroy go together");
    if (!iface && type == CT_DEVICE_CPU)
        iface = &cpu_iface;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < CT_ALLOC_MAX_DEVICES; i++) {
        dev_alloc *da = atomic_load(&g_devs[type][i]);
        if (!da)
            continue;
        ct_spin_lock(&da->lock);
        bool busy = da->nactive > 0 || da->pending != NULL || da->deferred != NULL || da->npools > 0;
        ct_spin_unlock(&da->lock);
        if (busy) {
            pthread_mutex_unlock(&g_lock);
            return ct_error(CT_ERROR_RUNTIME, op, "device type %d still has memory in use", (int)type);
        }
    }
    for (int i = 0; i < CT_ALLOC_MAX_DEVICES; i++) {
        dev_alloc *da = atomic_load(&g_devs[type][i]);
        if (!da)
            continue;
        ct_spin_lock(&da->lock);
        release_cached(da);
        da->iface = iface ? iface : da->iface;
        if (iface)
            da->caching = caching_default(type, iface);
        ct_spin_unlock(&da->lock);
    }
    g_iface[type] = iface;
    pthread_mutex_unlock(&g_lock);
    return CT_OK;
}

const ct_alloc_device_iface *ct_alloc_get_device_interface(ct_device_type type) {
    if ((int)type < 0 || (int)type >= CT_DEVICE_TYPES)
        return NULL;
    pthread_mutex_lock(&g_lock);
    const ct_alloc_device_iface *i = g_iface[type];
    pthread_mutex_unlock(&g_lock);
    return i;
}

/* ------------------------------------------------------------------ public stats */

ct_status ct_alloc_get_stats(ct_device device, ct_alloc_stats *out) {
    CT_CHECK_ARG_STATUS("memory_stats", out);
    if (!valid_device(device, "memory_stats"))
        return ct_last_status();
    memset(out, 0, sizeof *out);
    dev_alloc *da = find_dev(device);
    if (da) {
        ct_spin_lock(&da->lock);
        tiny_drain(da); /* its inactive-split figures count them merged */
        *out = da->stats;
        ct_spin_unlock(&da->lock);
    }
    /* a setting, reported with the stats as PyTorch does */
    size_t ms = ct_alloc_conf_max_split_size();
    out->max_split_size = ms == SIZE_MAX ? -1 : (int64_t)ms;
    return CT_OK;
}

static int64_t stat_all(ct_device device, size_t offset, int field) {
    ct_alloc_stats s;
    if (ct_alloc_get_stats(device, &s) != CT_OK)
        return 0;
    const ct_alloc_stat *a = (const ct_alloc_stat *)((const char *)&s + offset);
    return field == 0 ? a[CT_STAT_ALL].current : a[CT_STAT_ALL].peak;
}

int64_t ct_memory_allocated(ct_device device) {
    return stat_all(device, offsetof(ct_alloc_stats, allocated_bytes), 0);
}
int64_t ct_memory_reserved(ct_device device) { return stat_all(device, offsetof(ct_alloc_stats, reserved_bytes), 0); }
int64_t ct_max_memory_allocated(ct_device device) {
    return stat_all(device, offsetof(ct_alloc_stats, allocated_bytes), 1);
}
int64_t ct_max_memory_reserved(ct_device device) {
    return stat_all(device, offsetof(ct_alloc_stats, reserved_bytes), 1);
}

#define CT_STAT_ARRAYS(X)                                                                                          \
    X(active) X(active_bytes) X(allocated_bytes) X(allocation) X(inactive_split) X(inactive_split_bytes)           \
        X(requested_bytes) X(reserved_bytes) X(segment)

static void reset_peak(ct_alloc_stat *s) { s->peak = s->current; }
static void reset_accumulated(ct_alloc_stat *s) {
    s->allocated = 0;
    s->freed = 0;
}

void ct_reset_peak_memory_stats(ct_device device) {
    dev_alloc *da = find_dev(device);
    if (!da)
        return;
    ct_spin_lock(&da->lock);
    tiny_drain(da);
    for (int t = 0; t < CT_STAT_TYPES; t++) {
#define X(name) reset_peak(&da->stats.name[t]);
        CT_STAT_ARRAYS(X)
#undef X
    }
    reset_peak(&da->stats.oversize_allocations);
    reset_peak(&da->stats.oversize_segments);
    ct_spin_unlock(&da->lock);
}

void ct_reset_accumulated_memory_stats(ct_device device) {
    dev_alloc *da = find_dev(device);
    if (!da)
        return;
    ct_spin_lock(&da->lock);
    for (int t = 0; t < CT_STAT_TYPES; t++) {
#define X(name) reset_accumulated(&da->stats.name[t]);
        CT_STAT_ARRAYS(X)
#undef X
    }
    reset_accumulated(&da->stats.oversize_allocations);
    reset_accumulated(&da->stats.oversize_segments);
    da->stats.num_alloc_retries = 0;
    da->stats.num_ooms = 0;
    da->stats.num_sync_all_streams = 0;
    da->stats.num_device_alloc = 0;
    da->stats.num_device_free = 0;
    ct_spin_unlock(&da->lock);
}

void ct_empty_cache(ct_device device) {
    dev_alloc *da = find_dev(device);
    if (!da)
        return;
    ct_spin_lock(&da->lock);
    release_cached(da);
    ct_spin_unlock(&da->lock);
}

ct_status ct_memory_set_caching(ct_device device, bool enabled) {
    dev_alloc *da = get_dev(device, "memory_set_caching");
    if (!da)
        return ct_last_status();
    ct_spin_lock(&da->lock);
    da->caching = enabled;
    if (!enabled)
        release_cached(da);
    ct_spin_unlock(&da->lock);
    return CT_OK;
}

bool ct_memory_caching(ct_device device) {
    dev_alloc *da = get_dev(device, "memory_caching");
    if (!da)
        return false;
    ct_spin_lock(&da->lock);
    bool c = da->caching;
    ct_spin_unlock(&da->lock);
    return c;
}

/* Every key of memory_stats(), sorted as Python's sorted() orders them. */
typedef struct {
    char key[64];
    int64_t value;
} stat_kv;

static int kv_cmp(const void *a, const void *b) { return strcmp(((const stat_kv *)a)->key, ((const stat_kv *)b)->key); }

static size_t collect_stats(const ct_alloc_stats *s, stat_kv *kv) {
    static const char *types[CT_STAT_TYPES] = {"all", "small_pool", "large_pool"};
    static const char *fields[4] = {"current", "peak", "allocated", "freed"};
    size_t n = 0;
#define PUT_STAT(prefix, st)                                                                   \
    do {                                                                                       \
        const int64_t vals[4] = {(st).current, (st).peak, (st).allocated, (st).freed};         \
        for (int f = 0; f < 4; f++) {                                                          \
            snprintf(kv[n].key, sizeof kv[n].key, "%s.%s", prefix, fields[f]);                 \
            kv[n++].value = vals[f];                                                           \
        }                                                                                      \
    } while (0)
#define X(name)                                                                                \
    for (int t = 0; t < CT_STAT_TYPES; t++) {                                                  \
        char prefix[48];                                                                       \
        snprintf(prefix, sizeof prefix, "%s.%s", #name, types[t]);                             \
        PUT_STAT(prefix, s->name[t]);                                                          \
    }
    CT_STAT_ARRAYS(X)
#undef X
    PUT_STAT("oversize_allocations", s->oversize_allocations);
    PUT_STAT("oversize_segments", s->oversize_segments);
#undef PUT_STAT
#define SCALAR(name)                                                                           \
    do {                                                                                       \
        snprintf(kv[n].key, sizeof kv[n].key, "%s", #name);                                    \
        kv[n++].value = s->name;                                                               \
    } while (0)
    SCALAR(num_alloc_retries);
    SCALAR(num_ooms);
    SCALAR(num_sync_all_streams);
    SCALAR(num_device_alloc);
    SCALAR(num_device_free);
    SCALAR(max_split_size);
#undef SCALAR
    qsort(kv, n, sizeof *kv, kv_cmp);
    return n;
}

#define CT_NUM_STAT_KEYS (9 * 3 * 4 + 2 * 4 + 6)

ct_status ct_memory_stats(ct_device device, ct_memory_stat_fn fn, void *ctx) {
    CT_CHECK_ARG_STATUS("memory_stats", fn);
    ct_alloc_stats s;
    ct_status st = ct_alloc_get_stats(device, &s);
    if (st != CT_OK)
        return st;
    stat_kv kv[CT_NUM_STAT_KEYS];
    size_t n = collect_stats(&s, kv);
    for (size_t i = 0; i < n; i++)
        if (fn(kv[i].key, kv[i].value, ctx) != 0)
            break;
    return CT_OK;
}

int64_t ct_memory_stat(ct_device device, const char *key) {
    if (!key) {
        ct_error_null("memory_stat");
        return -1;
    }
    ct_alloc_stats s;
    if (ct_alloc_get_stats(device, &s) != CT_OK)
        return -1;
    stat_kv kv[CT_NUM_STAT_KEYS];
    size_t n = collect_stats(&s, kv);
    for (size_t i = 0; i < n; i++)
        if (strcmp(kv[i].key, key) == 0)
            return kv[i].value;
    ct_error(CT_ERROR_VALUE, "memory_stat",
             "unknown memory statistic '%s' (keys look like \"allocated_bytes.all.current\")", key);
    return -1;
}

/* ------------------------------------------------------------------ state for snapshots */

static int seg_addr_cmp(const void *a, const void *b) {
    uint64_t x = ((const ct_alloc_segment_info *)a)->address, y = ((const ct_alloc_segment_info *)b)->address;
    return x < y ? -1 : x > y;
}

void ct_alloc_state_free(ct_alloc_state *st) {
    if (!st)
        return;
    for (size_t i = 0; i < st->nsegments; i++)
        free(st->segments[i].blocks);
    free(st->segments);
    free(st->trace);
    memset(st, 0, sizeof *st);
}

ct_status ct_alloc_state_get(ct_device device, ct_alloc_state *out) {
    const char *op = "memory_snapshot";
    CT_CHECK_ARG_STATUS(op, out);
    memset(out, 0, sizeof *out);
    out->device = device;
    dev_alloc *da = get_dev(device, op);
    if (!da)
        return ct_last_status();
    ct_spin_lock(&da->lock);
    tiny_drain(da);
    trace(da, CT_TRACE_SNAPSHOT, 0, 0, 0, tl_context);
    out->caching = da->caching;
    size_t ms = atomic_load(&g_max_split);
    out->max_split_size = ms == SIZE_MAX ? -1 : (int64_t)ms;
    ct_status st = CT_OK;
    out->segments = host_calloc(da->nsegments ? da->nsegments : 1, sizeof *out->segments);
    size_t nring = atomic_load(&g_history) && da->ring_gen == atomic_load(&g_history_gen) ? da->ring_len : 0;
    out->trace = host_calloc(nring ? nring : 1, sizeof *out->trace);
    if (!out->segments || !out->trace) {
        st = ct_error(CT_ERROR_OUT_OF_MEMORY, op, "could not copy the allocator state");
        goto done;
    }
    for (ct_segment *seg = da->segments; seg; seg = seg->next) {
        ct_alloc_segment_info *si = &out->segments[out->nsegments++];
        si->address = (uint64_t)(uintptr_t)seg->base;
        si->total_size = seg->size;
        si->stream = seg->stream;
        si->is_small = seg->small;
        si->cached = seg->cached;
        si->pool = seg->pool;
        memcpy(si->context, seg->context, sizeof si->context);
        size_t nb = 0;
        for (ct_block *b = seg->first; b; b = b->next)
            nb++;
        si->blocks = host_calloc(nb, sizeof *si->blocks);
        if (!si->blocks) {
            st = ct_error(CT_ERROR_OUT_OF_MEMORY, op, "could not copy the allocator state");
            goto done;
        }
        for (ct_block *b = seg->first; b; b = b->next) {
            ct_alloc_block_info *bi = &si->blocks[si->nblocks++];
            bi->address = (uint64_t)(uintptr_t)b->ptr;
            bi->size = b->size;
            bi->requested_size = b->state == BLOCK_FREE ? 0 : b->requested;
            bi->state = b->state;
            if (b->state != BLOCK_FREE)
                memcpy(bi->context, b->context, sizeof bi->context);
            if (b->state == BLOCK_ACTIVE)
                si->allocated_size += b->size;
            if (b->state != BLOCK_FREE) {
                si->active_size += b->size;
                si->requested_size += b->requested;
            }
        }
    }
    qsort(out->segments, out->nsegments, sizeof *out->segments, seg_addr_cmp);
    if (nring) {
        /* oldest first: after a wrap the oldest entry sits at ring_next */
        size_t start = da->ring_len == atomic_load(&g_history_max) ? da->ring_next : 0;
        for (size_t i = 0; i < nring; i++)
            out->trace[i] = da->ring[(start + i) % da->ring_len];
        out->ntrace = nring;
    }
done:
    ct_spin_unlock(&da->lock);
    if (st != CT_OK)
        ct_alloc_state_free(out);
    return st;
}
