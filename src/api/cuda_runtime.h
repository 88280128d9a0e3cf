/* The CUDA backend's answers to the public CUDA functions (ctorch/cuda.h). libctorch.so
 * defines those functions (src/api/cuda_api.c) and forwards them through this table,
 * which the backend hands over with its device interface (ct_device_iface.runtime),
 * so that they exist in every build and report a missing backend as an error. */
#ifndef CT_API_CUDA_RUNTIME_H
#define CT_API_CUDA_RUNTIME_H

#include "ctorch/cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A private pool handle (ct_cuda_mempool_create, or a graph's own): the allocator's
 * pool id (Note [Private pools] in src/core/alloc.c) on one device. */
struct ct_cuda_mempool {
    int device;
    uint64_t id;
};

typedef struct ct_cuda_runtime {
    int (*device_count)(void);
    ct_status (*get_device_properties)(int device, ct_cuda_device_properties *out);
    int (*current_device)(void);
    ct_status (*set_device)(int device);
    ct_status (*synchronize)(int device);
    ct_status (*mem_get_info)(int device, int64_t *free_bytes, int64_t *total_bytes);
    ct_status (*stream_create)(int device, int priority, ct_cuda_stream **out);
    ct_status (*stream_destroy)(ct_cuda_stream *stream);
    ct_status (*stream_synchronize)(ct_cuda_stream *stream);
    bool (*stream_query)(ct_cuda_stream *stream);
    ct_status (*stream_wait_event)(ct_cuda_stream *stream, ct_cuda_event *event);
    ct_status (*set_stream)(int device, ct_cuda_stream *stream);
    ct_cuda_stream *(*current_stream)(int device);
    int64_t (*stream_id)(const ct_cuda_stream *stream);
    ct_status (*record_stream)(const ct_tensor *t, ct_cuda_stream *stream);
    ct_status (*event_create)(bool timing, ct_cuda_event **out);
    void (*event_destroy)(ct_cuda_event *event);
    ct_status (*event_record)(ct_cuda_event *event, ct_cuda_stream *stream);
    ct_status (*event_synchronize)(ct_cuda_event *event);
    bool (*event_query)(ct_cuda_event *event);
    ct_status (*event_elapsed_ms)(ct_cuda_event *start, ct_cuda_event *end, float *ms);
    ct_status (*host_alloc)(size_t nbytes, void **out);
    void (*host_free)(void *ptr);
    ct_tensor *(*pin_memory)(const ct_tensor *t);
    ct_status (*graph_begin)(ct_cuda_stream *stream, ct_cuda_mempool *pool, ct_cuda_capture_mode mode);
    ct_status (*graph_end)(ct_cuda_stream *stream, ct_cuda_graph **out);
    ct_status (*graph_replay)(ct_cuda_graph *graph);
    void (*graph_free)(ct_cuda_graph *graph);
    ct_cuda_mempool *(*graph_pool)(ct_cuda_graph *graph);
    bool (*is_capturing)(void);
    int64_t (*cudnn_version)(void); /* 0: no libcudnn found */
} ct_cuda_runtime;

#ifdef __cplusplus
}
#endif
#endif /* CT_API_CUDA_RUNTIME_H */
