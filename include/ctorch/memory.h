/* ctorch memory: the caching allocator's statistics, traces and snapshots.
 * See docs/memory.md. */
#ifndef CTORCH_MEMORY_H
#define CTORCH_MEMORY_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes held by live tensors' blocks on a device (torch.cuda.memory_allocated). Blocks
 * are counted at their rounded size, as PyTorch does. */
CT_API int64_t ct_memory_allocated(ct_device device);
/* Bytes the allocator holds from the device, cached or in use (memory_reserved). */
CT_API int64_t ct_memory_reserved(ct_device device);
/* Highest ct_memory_allocated since start or the last reset. */
CT_API int64_t ct_max_memory_allocated(ct_device device);
/* Highest ct_memory_reserved since start or the last reset. */
CT_API int64_t ct_max_memory_reserved(ct_device device);
/* Sets every peak to its current value (torch.cuda.reset_peak_memory_stats). */
CT_API void ct_reset_peak_memory_stats(ct_device device);
/* Zeroes every "allocated"/"freed" counter and the retry/OOM/device counts
 * (torch.cuda.reset_accumulated_memory_stats). */
CT_API void ct_reset_accumulated_memory_stats(ct_device device);
/* Returns cached, unused segments to the device. */
CT_API void ct_empty_cache(ct_device device);

/* One statistic by PyTorch's memory_stats() key, for example
 * "allocated_bytes.all.current", "reserved_bytes.large_pool.peak", "allocation.all.allocated",
 * "num_ooms", "num_alloc_retries", "num_device_alloc", "max_split_size". Unknown keys
 * return -1 with a CT_ERROR_VALUE error. */
CT_API int64_t ct_memory_stat(ct_device device, const char *key);
/* Calls fn once per statistic, in PyTorch's sorted key order (as memory_stats()). A
 * non-zero return from fn stops the walk. */
typedef int (*ct_memory_stat_fn)(const char *key, int64_t value, void *ctx);
CT_API ct_status ct_memory_stats(ct_device device, ct_memory_stat_fn fn, void *ctx);

/* Allocator options, in CT_ALLOC_CONF syntax (read from the environment at the first
 * allocation): "max_split_size_mb:256,roundup_power2_divisions:4". Keys and what is
 * honoured are listed in docs/memory.md. On error nothing changes. */
CT_API ct_status ct_memory_set_alloc_conf(const char *conf);

/* Per-device caching (Note [CPU caching] in alloc.c). Turning it off releases the
 * cache; blocks in use keep working and are returned to the device when freed. */
CT_API ct_status ct_memory_set_caching(ct_device device, bool enabled);
CT_API bool ct_memory_caching(ct_device device);

/* Starts (enabled) or stops recording allocator events on every device, keeping the
 * newest max_entries per device in a ring (torch.cuda.memory._record_memory_history).
 * Stopping discards the recorded history. */
CT_API ct_status ct_memory_record_history(bool enabled, int64_t max_entries);

typedef enum ct_snapshot_format {
    CT_SNAPSHOT_PICKLE = 0, /* what torch.cuda.memory._dump_snapshot writes; opens in
                               pytorch.org/memory_viz and `ctorch memviz` */
    CT_SNAPSHOT_JSON = 1,   /* the same structure as JSON */
} ct_snapshot_format;

/* Writes the device's segments, blocks and recorded trace to path. */
CT_API ct_status ct_memory_snapshot(ct_device device, const char *path, ct_snapshot_format format);

/* Reads a snapshot (either format of ct_memory_snapshot, or a pickle from PyTorch's
 * torch.cuda.memory._dump_snapshot, whose plain-data subset it is; nothing in it is
 * executed) and writes html_path: one self-contained page, no network needed, with
 * memory over time by the op that allocated it and the allocator's segment map
 * (`ctorch memviz`). On failure html_path is removed and the error says why. */
CT_API ct_status ct_memory_viz(const char *snapshot_path, const char *html_path);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_MEMORY_H */
