/* ctorch CUDA runtime: devices, streams, events, pinned host memory, matmul precision.
 *
 * Every function here exists in every build. In a build without CUDA, or on a machine
 * without a GPU or driver, ct_cuda_device_count() is 0, ct_cuda_is_available() is
 * false and the rest return CT_ERROR_DEVICE. Nothing touches the CUDA driver before
 * the first call that needs it. See docs/cuda.md. */
#ifndef CTORCH_CUDA_H
#define CTORCH_CUDA_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- devices */

/* True when ctorch was built with CUDA and at least one device can be used. */
CT_API bool ct_cuda_is_available(void);
/* Number of visible devices; 0 without a build with CUDA, a driver or a GPU. */
CT_API int ct_cuda_device_count(void);

typedef struct ct_cuda_device_properties {
    char name[256];
    int32_t major, minor;        /* compute capability */
    int64_t total_memory;        /* bytes */
    int32_t multi_processor_count;
    int32_t warp_size;
    int64_t l2_cache_size;       /* bytes */
    int32_t max_threads_per_block;
} ct_cuda_device_properties;

CT_API ct_status ct_cuda_get_device_properties(int device, ct_cuda_device_properties *out);
/* The calling thread's current device (torch.cuda.current_device); -1 with an error
 * when there is none. */
CT_API int ct_cuda_current_device(void);
CT_API ct_status ct_cuda_set_device(int device);
/* Waits for all work on the device; reports an asynchronous error of an earlier
 * kernel (naming the last op launched on this thread) as a CT_ERROR_RUNTIME. */
CT_API ct_status ct_cuda_synchronize(int device);
/* Free and total bytes of the device (cudaMemGetInfo). */
CT_API ct_status ct_cuda_mem_get_info(int device, int64_t *free_bytes, int64_t *total_bytes);

/* ---------------------------------------------------------------- streams */

/* A stream handle. NULL stands for the device's default stream wherever a stream is
 * taken. */
typedef struct ct_cuda_stream ct_cuda_stream;
typedef struct ct_cuda_event ct_cuda_event;

/* A new non-blocking stream on device; priority 0 is the default (lower is higher). */
CT_API ct_status ct_cuda_stream_create(int device, int priority, ct_cuda_stream **out);
/* Waits for the stream's work, then destroys it. NULL is ignored. If it is the calling
 * thread's current stream, the thread falls back to the default stream; destroying a
 * stream another thread still uses is an error, as in CUDA. */
CT_API ct_status ct_cuda_stream_destroy(ct_cuda_stream *stream);
CT_API ct_status ct_cuda_stream_synchronize(ct_cuda_stream *stream);
/* True when all work queued on the stream has finished. */
CT_API bool ct_cuda_stream_query(ct_cuda_stream *stream);
/* Work queued on stream after this call waits for event (cudaStreamWaitEvent). */
CT_API ct_status ct_cuda_stream_wait_event(ct_cuda_stream *stream, ct_cuda_event *event);
/* Makes stream (NULL: the default stream) the calling thread's current stream on the
 * stream's device: every op on that device launched by this thread runs on it. */
CT_API ct_status ct_cuda_set_stream(int device, ct_cuda_stream *stream);
/* This thread's current stream on device (NULL: the default stream). */
CT_API ct_cuda_stream *ct_cuda_current_stream(int device);
/* The stream's id as the allocator sees it (0 for the default stream). */
CT_API int64_t ct_cuda_stream_id(const ct_cuda_stream *stream);

/* Tells the allocator that t's memory is used by stream, so that it is not reused by
 * another stream before that work finishes (Tensor.record_stream). */
CT_API ct_status ct_cuda_record_stream(const ct_tensor *t, ct_cuda_stream *stream);

/* ---------------------------------------------------------------- events */

/* timing: the event can measure elapsed time (costs a little more to record). */
CT_API ct_status ct_cuda_event_create(bool timing, ct_cuda_event **out);
CT_API void ct_cuda_event_destroy(ct_cuda_event *event);
/* Records the event on stream (NULL: the current stream of the current device). */
CT_API ct_status ct_cuda_event_record(ct_cuda_event *event, ct_cuda_stream *stream);
CT_API ct_status ct_cuda_event_synchronize(ct_cuda_event *event);
CT_API bool ct_cuda_event_query(ct_cuda_event *event);
/* Milliseconds between two recorded timing events (end must have completed). */
CT_API ct_status ct_cuda_event_elapsed_ms(ct_cuda_event *start, ct_cuda_event *end, float *ms);

/* ---------------------------------------------------------------- host memory */

/* Page-locked host memory (cudaHostAlloc): copies from and to it run asynchronously. */
CT_API ct_status ct_cuda_host_alloc(size_t nbytes, void **out);
CT_API void ct_cuda_host_free(void *ptr);
/* A CPU tensor in page-locked memory holding a copy of t (torch.Tensor.pin_memory). */
CT_API ct_tensor *ct_pin_memory(const ct_tensor *t);

/* ---------------------------------------------------------------- matmul precision */

/* torch.set_float32_matmul_precision: "highest" (the default: float32 products in
 * full float32), "high" (TF32 tensor cores allowed) or "medium" (treated as "high":
 * ctorch has no bfloat16 path for float32 products). */
CT_API ct_status ct_set_float32_matmul_precision(const char *precision);
CT_API const char *ct_get_float32_matmul_precision(void);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_CUDA_H */
