/* ctorch memory: the caching allocator's statistics, traces and snapshots. */
#ifndef CTORCH_MEMORY_H
#define CTORCH_MEMORY_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes held by live tensors' blocks on a device (torch.cuda.memory_allocated). */
CT_API int64_t ct_memory_allocated(ct_device device);
/* Bytes the allocator holds from the device, cached or in use (memory_reserved). */
CT_API int64_t ct_memory_reserved(ct_device device);
/* Highest ct_memory_allocated since start or the last reset. */
CT_API int64_t ct_max_memory_allocated(ct_device device);
CT_API void ct_reset_peak_memory_stats(ct_device device);
/* Returns cached, unused segments to the device. */
CT_API void ct_empty_cache(ct_device device);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_MEMORY_H */
