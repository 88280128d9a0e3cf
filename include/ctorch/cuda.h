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

/* ---------------------------------------------------------------- graphs

   CUDA graphs (torch.cuda.CUDAGraph): the kernels a stream runs between
   ct_cuda_graph_begin and ct_cuda_graph_end are recorded, not run, and
   ct_cuda_graph_replay launches them all again at the cost of one launch. Tensors the
   captured work allocates come from a private memory pool and keep their addresses at
   every replay; inputs are fed by copying into tensors made before the capture
   (static inputs). Random ops draw fresh numbers from the default generator at every
   replay. Usage, limits and errors: docs/cuda-graphs.md. */

/* A private memory pool (torch.cuda.graph_pool_handle): graphs captured into one pool
 * share its memory (graph trees, docs/cuda-graphs.md). A pool lives until it is
 * released and every graph captured into it is freed. */
typedef struct ct_cuda_mempool ct_cuda_mempool;
typedef struct ct_cuda_graph ct_cuda_graph;

CT_API ct_status ct_cuda_mempool_create(int device, ct_cuda_mempool **out);
/* Drops the handle's use of the pool; NULL is ignored. */
CT_API void ct_cuda_mempool_release(ct_cuda_mempool *pool);
/* The pool's id, as memory snapshots show it (segment_pool_id (0, id)); 0 for NULL. */
CT_API uint64_t ct_cuda_mempool_id(const ct_cuda_mempool *pool);

typedef struct ct_cuda_mempool_stats {
    int64_t segments;        /* device allocations the pool holds */
    int64_t reserved_bytes;  /* their bytes */
    int64_t allocated_bytes; /* bytes of the pool's live tensors */
    int64_t active_blocks;   /* live tensors (and blocks waiting on other streams) */
    int32_t uses;            /* the handle and the graphs that hold the pool */
} ct_cuda_mempool_stats;
CT_API ct_status ct_cuda_mempool_stats_get(const ct_cuda_mempool *pool, ct_cuda_mempool_stats *out);

/* cudaStreamCaptureMode: THREAD_LOCAL (the default) forbids unsafe CUDA calls on the
 * capturing thread, GLOBAL on every thread, RELAXED nowhere. */
typedef enum ct_cuda_capture_mode {
    CT_CUDA_CAPTURE_THREAD_LOCAL = 0,
    CT_CUDA_CAPTURE_GLOBAL = 1,
    CT_CUDA_CAPTURE_RELAXED = 2,
} ct_cuda_capture_mode;

/* Starts capturing stream (not the default stream), which becomes the thread's current
 * stream on its device until ct_cuda_graph_end; the device is synchronised first.
 * pool NULL: the graph gets a private pool of its own. One capture per thread. */
CT_API ct_status ct_cuda_graph_begin(ct_cuda_stream *stream, ct_cuda_mempool *pool);
CT_API ct_status ct_cuda_graph_begin_mode(ct_cuda_stream *stream, ct_cuda_mempool *pool, ct_cuda_capture_mode mode);
/* Ends the capture of stream and instantiates the graph. On an error the capture is
 * over too, and *out is NULL. */
CT_API ct_status ct_cuda_graph_end(ct_cuda_stream *stream, ct_cuda_graph **out);
/* Launches the graph on the current stream of its device. */
CT_API ct_status ct_cuda_graph_replay(ct_cuda_graph *graph);
/* Waits for the graph's device, then frees it and its use of its pool; NULL is ignored. */
CT_API void ct_cuda_graph_free(ct_cuda_graph *graph);
/* The pool the graph's tensors came from (owned by the graph). */
CT_API ct_cuda_mempool *ct_cuda_graph_pool(ct_cuda_graph *graph);
/* Whether the calling thread is capturing (torch.cuda.is_current_stream_capturing). */
CT_API bool ct_cuda_is_current_stream_capturing(void);

/* ---------------------------------------------------------------- matmul precision */

/* torch.set_float32_matmul_precision: "highest" (the default: float32 products in
 * full float32), "high" (TF32 tensor cores allowed) or "medium" (treated as "high":
 * ctorch has no bfloat16 path for float32 products). */
CT_API ct_status ct_set_float32_matmul_precision(const char *precision);
CT_API const char *ct_get_float32_matmul_precision(void);

/* ---------------------------------------------------------------- TunableOp

   torch.cuda.tunable for cuBLASLt (docs/cuda.md, "TunableOp"). While enabled, the
   first product of each (shape, dtype, layout, epilogue, alignment) times cuBLASLt's
   candidate algorithms on its own operands, keeps the fastest one whose result
   matches the heuristic's choice, and uses it from then on. The results file holds
   one line per product and the versions it was made with; a process that starts with
   TunableOp enabled reads it (a file from another setup is refused) and, when it
   tuned anything, writes it back at exit. The environment sets the starting values:
   CT_TUNABLEOP=1, CT_TUNABLEOP_TUNING=0|1, CT_TUNABLEOP_FILENAME,
   CT_TUNABLEOP_MAX_TUNING_DURATION_MS, CT_TUNABLEOP_MAX_TUNING_ITERATIONS. */

CT_API void ct_cuda_tunable_enable(bool on);
CT_API bool ct_cuda_tunable_is_enabled(void);
/* With tuning off, an enabled TunableOp only uses results it has (read or tuned). */
CT_API void ct_cuda_tunable_tuning_enable(bool on);
CT_API bool ct_cuda_tunable_tuning_is_enabled(void);
/* The results file; with insert_device_ordinal the device's number goes before the
   extension ("tunableop_results.csv" is device 0's "tunableop_results0.csv"). */
CT_API ct_status ct_cuda_tunable_set_filename(const char *filename, bool insert_device_ordinal);
CT_API const char *ct_cuda_tunable_get_filename(void);
/* Limits on the timing of one candidate (defaults 30 ms and 100 runs). */
CT_API ct_status ct_cuda_tunable_set_max_tuning_duration(int milliseconds);
CT_API ct_status ct_cuda_tunable_set_max_tuning_iterations(int iterations);
/* The current device's results: written to, or read from, filename (NULL: the
   results file of that device). Reading adds to what is there and refuses a file
   made with another ctorch, cuBLASLt, CUDA runtime, device or workspace. */
CT_API ct_status ct_cuda_tunable_write_file(const char *filename);
CT_API ct_status ct_cuda_tunable_read_file(const char *filename);
/* Forgets the current device's results (tuned and read). */
CT_API ct_status ct_cuda_tunable_clear(void);

typedef struct ct_cuda_tunable_stats {
    int64_t results;    /* products with a chosen algorithm (tuned or read) */
    int64_t tuned;      /* of which tuned by this process */
    int64_t read;       /* of which read from a file */
    int64_t improved;   /* tuned products whose choice beat the heuristic's */
    int64_t candidates; /* algorithms timed */
    int64_t rejected;   /* candidates refused by the numerical check or that failed */
    double tuning_ms;   /* wall time spent tuning */
} ct_cuda_tunable_stats;
CT_API ct_status ct_cuda_tunable_get_stats(ct_cuda_tunable_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_CUDA_H */
