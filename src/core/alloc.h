/* Internal allocator interface: every storage's bytes come from here.
 * See DESIGN.md "Allocator" and docs/memory.md. */
#ifndef CT_ALLOC_H
#define CT_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "ctorch/core.h"
#include "ctorch/memory.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* 64-byte aligned memory for a storage on the device's current stream; NULL with an
 * error set (CT_ERROR_OUT_OF_MEMORY after the cache was released and the device
 * retried once, CT_ERROR_DEVICE for a device without an allocator). */
void *ct_alloc(ct_device device, size_t nbytes);
/* Returns ptr (from ct_alloc on this device) to the allocator. NULL is ignored. */
void ct_free(ct_device device, void *ptr);

/* The same on an explicit stream: a cached block is only reused on the stream it was
 * allocated on, as in PyTorch. Stream 0 is the default stream. */
void *ct_alloc_stream(ct_device device, size_t nbytes, int64_t stream);

/* Note [Stream uses]
 * PyTorch's Tensor.record_stream: the block at ptr is also used by `stream`. When it is
 * freed, the allocator asks the device for one event per recorded stream and keeps the
 * block out of the cache (state "active_pending_free") until every event has completed.
 * Recording the block's own stream does nothing. A device without events (CPU) has only
 * stream 0, so any other stream is an error there. */
ct_status ct_alloc_record_stream(ct_device device, void *ptr, int64_t stream);

/* The op that is asking for memory on this thread, shown in traces and snapshots as the
 * allocation's frame. The dispatcher sets it around each kernel; NULL clears it. The
 * pointer is kept, not the text (every op sets it), so the string must stay valid while
 * it is set: op names are static. Blocks and trace entries copy its first 31 bytes. */
void ct_alloc_set_context(const char *op_name);
const char *ct_alloc_get_context(void);

/* Note [Sanitizer mode] (alloc.c): exact-size CPU blocks, no CPU caching by default and
 * no recycled tensor or storage structs. On by default in AddressSanitizer builds;
 * CT_ALLOC_CONF key sanitize. */
bool ct_alloc_sanitizing_slow(void);
#ifndef __cplusplus /* CUDA sources include this header too */
#include <stdatomic.h>
extern atomic_int ct_alloc_sanitize_state; /* -1 until the settings are read, then 0 or 1 */
static inline bool ct_alloc_sanitizing(void) {
    int s = atomic_load_explicit(&ct_alloc_sanitize_state, memory_order_relaxed);
    return s >= 0 ? s == 1 : ct_alloc_sanitizing_slow();
}
#endif

/* ------------------------------------------------------------------ devices */

/* What a device supplies. Everything else (pools, splitting, stats, traces) is shared.
 * raw_alloc may fail (NULL) without setting an error; the allocator then frees cached
 * memory, retries once and reports the out-of-memory error itself. Optional members
 * may be NULL. */
typedef struct ct_alloc_device_iface {
    const char *name; /* "cpu", "cuda", ... (error messages, snapshots) */
    void *ctx;        /* passed back to every callback */
    void *(*raw_alloc)(void *ctx, int index, size_t nbytes);
    void (*raw_free)(void *ctx, int index, void *ptr, size_t nbytes);
    void (*synchronize)(void *ctx, int index);                      /* optional */
    int64_t (*current_stream)(void *ctx, int index);                /* optional: stream 0 */
    /* Events for Note [Stream uses]; all three or none. */
    void *(*event_record)(void *ctx, int index, int64_t stream);    /* NULL on failure */
    bool (*event_query)(void *ctx, void *event);                    /* true once complete */
    void (*event_destroy)(void *ctx, void *event);                  /* waits if needed */
    /* Free bytes on the device for the OOM trace entry; optional (0 when absent). */
    int64_t (*free_bytes)(void *ctx, int index);
    size_t min_block;          /* rounding unit and smallest block; 0: PyTorch's 512 */
    bool caching_default;      /* Note [CPU caching] */
    size_t bypass_threshold;   /* with caching on, requests above this skip the cache; 0: none */
    /* Optional: whether the calling thread is capturing a graph on the device, so that
     * an allocation outside the capture's pool is refused (Note [Private pools]). */
    bool (*capturing)(void *ctx, int index);
} ct_alloc_device_iface;

#define CT_ALLOC_MAX_DEVICES 64

/* Replaces the interface for a device type; iface NULL restores the built-in one
 * (CPU: aligned_alloc; other types: none). Fails with CT_ERROR_RUNTIME while any block of
 * that type is in use; cached segments are released through the old interface first.
 * Also resets that type's caching setting to the new interface's default. The struct
 * is not copied and must outlive its use. Tests use this to inject failing devices. */
ct_status ct_alloc_set_device_interface(ct_device_type type, const ct_alloc_device_iface *iface);
const ct_alloc_device_iface *ct_alloc_get_device_interface(ct_device_type type);

/* ------------------------------------------------------------------ constants */

/* PyTorch's CUDACachingAllocator constants (formats.md §3). */
#define CT_ALLOC_MIN_BLOCK ((size_t)512)
#define CT_ALLOC_SMALL_SIZE ((size_t)1 << 20)      /* largest request in the small pool */
#define CT_ALLOC_SMALL_BUFFER ((size_t)2 << 20)    /* small-pool segment */
#define CT_ALLOC_MIN_LARGE_ALLOC ((size_t)10 << 20)
#define CT_ALLOC_LARGE_BUFFER ((size_t)20 << 20)   /* large-pool segment for < 10 MiB */
#define CT_ALLOC_ROUND_LARGE ((size_t)2 << 20)
#define CT_ALLOC_POW2_INTERVALS 16                 /* 1 MiB .. 64 GiB */

/* Sizing rules, exposed for tests. round_size uses the current configuration and
 * PyTorch's 512-byte unit; round_size_unit takes a device's unit (a power of two). */
size_t ct_alloc_round_size(size_t nbytes);
size_t ct_alloc_round_size_unit(size_t nbytes, size_t unit);
size_t ct_alloc_segment_size(size_t rounded);

/* ------------------------------------------------------------------ stats */

typedef struct ct_alloc_stat {
    int64_t current, peak, allocated, freed;
} ct_alloc_stat;

enum { CT_STAT_ALL = 0, CT_STAT_SMALL = 1, CT_STAT_LARGE = 2, CT_STAT_TYPES = 3 };

/* PyTorch's DeviceStats, field for field. */
typedef struct ct_alloc_stats {
    ct_alloc_stat allocation[CT_STAT_TYPES];
    ct_alloc_stat segment[CT_STAT_TYPES];
    ct_alloc_stat active[CT_STAT_TYPES];
    ct_alloc_stat inactive_split[CT_STAT_TYPES];
    ct_alloc_stat allocated_bytes[CT_STAT_TYPES];
    ct_alloc_stat reserved_bytes[CT_STAT_TYPES];
    ct_alloc_stat active_bytes[CT_STAT_TYPES];
    ct_alloc_stat inactive_split_bytes[CT_STAT_TYPES];
    ct_alloc_stat requested_bytes[CT_STAT_TYPES];
    int64_t num_alloc_retries;
    int64_t num_ooms;
    ct_alloc_stat oversize_allocations;
    ct_alloc_stat oversize_segments;
    int64_t num_sync_all_streams;
    int64_t num_device_alloc;
    int64_t num_device_free;
    int64_t max_split_size; /* -1: unlimited */
} ct_alloc_stats;

/* A consistent copy of a device's stats (taken under its lock). */
ct_status ct_alloc_get_stats(ct_device device, ct_alloc_stats *out);

/* ------------------------------------------------------------------ snapshots */

/* Walking the allocator state for snapshots (alloc_snapshot.c). */
typedef struct ct_alloc_block_info {
    uint64_t address;
    uint64_t size;
    uint64_t requested_size;
    int state; /* 0 inactive, 1 active_allocated, 2 active_pending_free */
    char context[32];
} ct_alloc_block_info;

typedef struct ct_alloc_segment_info {
    uint64_t address;
    uint64_t total_size;
    uint64_t allocated_size;
    uint64_t active_size;
    uint64_t requested_size;
    int64_t stream;
    bool is_small;
    bool cached; /* false: a pass-through allocation (caching off or above the bypass) */
    uint64_t pool; /* Note [Private pools]: 0 for the device's own pools */
    char context[32];
    ct_alloc_block_info *blocks;
    size_t nblocks;
} ct_alloc_segment_info;

enum {
    CT_TRACE_ALLOC = 0,
    CT_TRACE_FREE_REQUESTED,
    CT_TRACE_FREE_COMPLETED,
    CT_TRACE_SEGMENT_ALLOC,
    CT_TRACE_SEGMENT_FREE,
    CT_TRACE_SNAPSHOT,
    CT_TRACE_OOM,
    CT_TRACE_ACTIONS
};
/* Not a trace action: passed to the observer when the allocator released its cache
 * to retry a failed device allocation. */
#define CT_ALLOC_EVENT_RETRY CT_TRACE_ACTIONS

/* Note [Allocator observer]
 * One function the profiler and the structured log install to see every trace event
 * (the same arguments a trace entry gets, whether or not history is on), plus
 * CT_ALLOC_EVENT_RETRY; allocated is the device's allocated_bytes.all.current after the
 * event. It runs under the device's lock: it must not call the allocator. NULL (the
 * default) turns it off; then the cost is one relaxed load per event. */
typedef void (*ct_alloc_observer_fn)(ct_device device, int action, uint64_t addr, uint64_t size, int64_t allocated);
void ct_alloc_set_observer(ct_alloc_observer_fn fn);

/* "alloc", "free_requested", ... as PyTorch spells them. */
const char *ct_alloc_trace_action_name(int action);

typedef struct ct_alloc_trace_entry {
    int action;
    uint64_t addr; /* OOM: free device bytes; SNAPSHOT: 0 */
    uint64_t size;
    int64_t stream;
    int64_t time_us; /* CLOCK_REALTIME, microseconds */
    char context[32];
} ct_alloc_trace_entry;

typedef struct ct_alloc_state {
    ct_device device;
    ct_alloc_segment_info *segments; /* sorted by address */
    size_t nsegments;
    ct_alloc_trace_entry *trace; /* oldest first */
    size_t ntrace;
    bool caching;
    int64_t max_split_size; /* -1: unlimited */
} ct_alloc_state;

/* A copy of the device's segments, blocks and trace (records a "snapshot" trace entry
 * first when history is on). Free with ct_alloc_state_free. */
ct_status ct_alloc_state_get(ct_device device, ct_alloc_state *out);
void ct_alloc_state_free(ct_alloc_state *st);

/* ------------------------------------------------------------------ private pools */

/* Note [Private pools] (alloc.c): PyTorch's private memory pools, which CUDA graphs
 * allocate from. A pool is a nonzero id, unique in the process, with a use count: create
 * makes it with one use, retain adds one, release drops one, and the last release
 * gives its free segments back (segments with live blocks join the device's own pools).
 * begin_use routes every allocation on stream to the pool until end_use; while any
 * route is in place the allocator queries no events, frees and synchronises nothing. */
ct_status ct_alloc_pool_create(ct_device device, uint64_t *out);
ct_status ct_alloc_pool_retain(ct_device device, uint64_t pool);
ct_status ct_alloc_pool_release(ct_device device, uint64_t pool);
ct_status ct_alloc_pool_begin_use(ct_device device, uint64_t pool, int64_t stream);
ct_status ct_alloc_pool_end_use(ct_device device, uint64_t pool, int64_t stream);
/* Routes in place on device (0 outside captures), and the pool stream allocates from. */
int ct_alloc_pool_routes(ct_device device);
uint64_t ct_alloc_pool_of_stream(ct_device device, int64_t stream);

typedef struct ct_alloc_pool_stats {
    int uses;
    int64_t segments, reserved_bytes, allocated_bytes, active_blocks;
} ct_alloc_pool_stats;
ct_status ct_alloc_pool_get_stats(ct_device device, uint64_t pool, ct_alloc_pool_stats *out);

/* Test hook: the configured max_split_size in bytes (SIZE_MAX when unlimited) and the
 * number of divisions roundup_power2_divisions gives a size. */
size_t ct_alloc_conf_max_split_size(void);
size_t ct_alloc_conf_roundup_divisions(size_t size);

CT_BACKEND_END

#endif /* CT_ALLOC_H */
