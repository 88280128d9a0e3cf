/* The CUDA backend's answers to the public CUDA functions (ctorch/cuda.h). libctorch.so
 * defines those functions (src/api/cuda_api.c) and forwards them through this table,
 * which the backend hands over with its device interface (ct_device_iface.runtime),
 * so that they exist in every build and report a missing backend as an error. */
#ifndef CT_API_CUDA_RUNTIME_H
#define CT_API_CUDA_RUNTIME_H

#include "core/backend_api.h"
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

/* TunableOp (Note [TunableOp] in src/cuda/tunable.cu). The settings and the results
 * file live here (src/api/tunable_api.c); the results and the tuning in the backend. */
typedef struct ct_tunable_settings {
    bool enabled, tuning;
    int max_duration_ms, max_iterations;
} ct_tunable_settings;

/* One product's result: the key "signature,params", cuBLASLt's algorithm (a
 * cublasLtMatmulAlgo_t, which cuBLASLt lets a program store and reuse with the same
 * library), the mean time of one run with it and with the heuristic's choice. */
#define CT_TUNABLE_KEY_MAX 320
typedef struct ct_tunable_result {
    char key[CT_TUNABLE_KEY_MAX];
    uint64_t algo[8];
    double ms, default_ms;
} ct_tunable_result;

/* What a results file must have been made with, besides CTORCH_VERSION. */
typedef struct ct_tunable_validators {
    char cublaslt[32], runtime[32], device[160];
} ct_tunable_validators;

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
    /* TunableOp: the device's results (a malloc'd array the caller frees), adding
     * results, forgetting them, the statistics, whether anything was tuned since the
     * last export, and the validators of the device. */
    ct_status (*tunable_export)(int device, ct_tunable_result **out, int64_t *n);
    ct_status (*tunable_import)(int device, const ct_tunable_result *r, int64_t n);
    void (*tunable_clear)(int device);
    void (*tunable_stats)(int device, ct_cuda_tunable_stats *out);
    bool (*tunable_dirty)(int device);
    ct_status (*tunable_validators)(int device, ct_tunable_validators *out);
} ct_cuda_runtime;

/* The loaded backend's table, or NULL (no error set); ct_cuda_runtime_need sets the
 * error that says why there is no CUDA backend, naming op (src/api/cuda_api.c). */
const ct_cuda_runtime *ct_cuda_runtime_get(void);
const ct_cuda_runtime *ct_cuda_runtime_need(const char *op);

CT_BACKEND_BEGIN
/* TunableOp's settings as they are now (the environment read at the first call). */
void ct_tunable_settings_get(ct_tunable_settings *out);
/* Reads the device's results file into the backend once per process and device, if
 * TunableOp is enabled and the file exists; a refused file is reported on stderr. */
void ct_tunable_load_device_file(int device);
CT_BACKEND_END

#ifdef __cplusplus
}
#endif
#endif /* CT_API_CUDA_RUNTIME_H */
