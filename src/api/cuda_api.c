/* The public CUDA functions (ctorch/cuda.h), in every build: they forward to the CUDA
 * backend's runtime table when the backend is loaded (Note [Loadable backends] in
 * src/registry.c) and otherwise answer "no device" or report why there is no backend.
 * Also the float32 matmul precision setting, which the backend reads. */
#include <stdatomic.h>
#include <string.h>

#include "api/cuda_runtime.h"
#include "ctorch/nn.h"
#include "core/alloc.h"
#include "core/device.h"
#include "core/error.h"

/* 0 "highest", 1 "high", 2 "medium" (torch.get_float32_matmul_precision). */
static atomic_int matmul_precision;

ct_status ct_set_float32_matmul_precision(const char *precision) {
    if (!precision)
        return ct_error_null("set_float32_matmul_precision");
    static const char *const names[] = {"highest", "high", "medium"};
    for (int i = 0; i < 3; i++)
        if (strcmp(precision, names[i]) == 0) {
            atomic_store(&matmul_precision, i);
            return CT_OK;
        }
    return ct_error(CT_ERROR_VALUE, "set_float32_matmul_precision",
                    "Invalid precision '%s': expected one of 'highest', 'high', 'medium'", precision);
}

const char *ct_get_float32_matmul_precision(void) {
    static const char *const names[] = {"highest", "high", "medium"};
    return names[atomic_load(&matmul_precision)];
}

CT_BACKEND_BEGIN
/* Whether float32 products may use TF32 (the backend's cuBLASLt calls ask). */
bool ct_cuda_allow_tf32(void);
CT_BACKEND_END
bool ct_cuda_allow_tf32(void) { return atomic_load(&matmul_precision) != 0; }

const ct_cuda_runtime *ct_cuda_runtime_get(void) {
    const ct_device_iface *d = ct_device_iface_get(CT_DEVICE_CUDA);
    return d ? (const ct_cuda_runtime *)d->runtime : NULL;
}

const ct_cuda_runtime *ct_cuda_runtime_need(const char *op) {
    const ct_device_iface *d = ct_device_need(op, CT_DEVICE_CUDA);
    return d ? (const ct_cuda_runtime *)d->runtime : NULL;
}

int64_t ct_backends_cudnn_version(void) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_get();
    return rt && rt->cudnn_version ? rt->cudnn_version() : 0;
}

bool ct_cuda_is_available(void) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_get();
    return rt && rt->device_count() > 0;
}

int ct_cuda_device_count(void) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_get();
    return rt ? rt->device_count() : 0;
}

ct_status ct_cuda_get_device_properties(int device, ct_cuda_device_properties *out) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_get_device_properties");
    return rt ? rt->get_device_properties(device, out) : ct_last_status();
}

int ct_cuda_current_device(void) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_current_device");
    return rt ? rt->current_device() : -1;
}

ct_status ct_cuda_set_device(int device) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_set_device");
    return rt ? rt->set_device(device) : ct_last_status();
}

ct_status ct_cuda_synchronize(int device) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_synchronize");
    return rt ? rt->synchronize(device) : ct_last_status();
}

ct_status ct_cuda_mem_get_info(int device, int64_t *free_bytes, int64_t *total_bytes) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_mem_get_info");
    return rt ? rt->mem_get_info(device, free_bytes, total_bytes) : ct_last_status();
}

ct_status ct_cuda_stream_create(int device, int priority, ct_cuda_stream **out) {
    if (out)
        *out = NULL;
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_stream_create");
    return rt ? rt->stream_create(device, priority, out) : ct_last_status();
}

ct_status ct_cuda_stream_destroy(ct_cuda_stream *stream) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_get();
    return rt ? rt->stream_destroy(stream) : CT_OK; /* no backend made it: nothing to free */
}

ct_status ct_cuda_stream_synchronize(ct_cuda_stream *stream) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_stream_synchronize");
    return rt ? rt->stream_synchronize(stream) : ct_last_status();
}

bool ct_cuda_stream_query(ct_cuda_stream *stream) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_get();
    return rt ? rt->stream_query(stream) : true;
}

ct_status ct_cuda_stream_wait_event(ct_cuda_stream *stream, ct_cuda_event *event) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_stream_wait_event");
    return rt ? rt->stream_wait_event(stream, event) : ct_last_status();
}

ct_status ct_cuda_set_stream(int device, ct_cuda_stream *stream) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_set_stream");
    return rt ? rt->set_stream(device, stream) : ct_last_status();
}

ct_cuda_stream *ct_cuda_current_stream(int device) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_get();
    return rt ? rt->current_stream(device) : NULL;
}

int64_t ct_cuda_stream_id(const ct_cuda_stream *stream) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_get();
    return rt ? rt->stream_id(stream) : 0;
}

ct_status ct_cuda_record_stream(const ct_tensor *t, ct_cuda_stream *stream) {
    CT_CHECK_ARG_STATUS("record_stream", t);
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("record_stream");
    return rt ? rt->record_stream(t, stream) : ct_last_status();
}

ct_status ct_cuda_event_create(bool timing, ct_cuda_event **out) {
    if (out)
        *out = NULL;
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_event_create");
    return rt ? rt->event_create(timing, out) : ct_last_status();
}

void ct_cuda_event_destroy(ct_cuda_event *event) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_get();
    if (rt)
        rt->event_destroy(event);
}

ct_status ct_cuda_event_record(ct_cuda_event *event, ct_cuda_stream *stream) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_event_record");
    return rt ? rt->event_record(event, stream) : ct_last_status();
}

ct_status ct_cuda_event_synchronize(ct_cuda_event *event) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_event_synchronize");
    return rt ? rt->event_synchronize(event) : ct_last_status();
}

bool ct_cuda_event_query(ct_cuda_event *event) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_get();
    return rt ? rt->event_query(event) : false;
}

ct_status ct_cuda_event_elapsed_ms(ct_cuda_event *start, ct_cuda_event *end, float *ms) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_event_elapsed_ms");
    return rt ? rt->event_elapsed_ms(start, end, ms) : ct_last_status();
}

ct_status ct_cuda_host_alloc(size_t nbytes, void **out) {
    if (out)
        *out = NULL;
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_host_alloc");
    return rt ? rt->host_alloc(nbytes, out) : ct_last_status();
}

void ct_cuda_host_free(void *ptr) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_get();
    if (rt)
        rt->host_free(ptr);
}

ct_tensor *ct_pin_memory(const ct_tensor *t) {
    CT_CHECK_ARG("pin_memory", t);
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("pin_memory");
    return rt ? rt->pin_memory(t) : NULL;
}

/* ------------------------------------------------------------------ graphs */

ct_status ct_cuda_mempool_create(int device, ct_cuda_mempool **out) {
    const char *op = "cuda_mempool_create";
    CT_CHECK_ARG_STATUS(op, out);
    *out = NULL;
    const ct_cuda_runtime *rt = ct_cuda_runtime_need(op);
    if (!rt)
        return ct_last_status();
    int n = rt->device_count();
    if (n == 0)
        return ct_error(CT_ERROR_DEVICE, op, "no CUDA device is available (no GPU or no driver found)");
    if (device < 0 || device >= n)
        return ct_error(CT_ERROR_DEVICE, op, "CUDA error: invalid device ordinal %d (%d device%s available)", device,
                        n, n == 1 ? "" : "s");
    ct_cuda_mempool *p = ct_xcalloc(op, 1, sizeof *p);
    if (!p)
        return ct_last_status();
    p->device = device;
    ct_status st = ct_alloc_pool_create(CT_CUDA(device), &p->id);
    if (st) {
        free(p);
        return st;
    }
    *out = p;
    return CT_OK;
}

void ct_cuda_mempool_release(ct_cuda_mempool *pool) {
    if (!pool)
        return;
    if (ct_alloc_pool_release(CT_CUDA(pool->device), pool->id) != CT_OK)
        return; /* in use by a capture: the handle stays valid, the error says why */
    free(pool);
}

uint64_t ct_cuda_mempool_id(const ct_cuda_mempool *pool) { return pool ? pool->id : 0; }

ct_status ct_cuda_mempool_stats_get(const ct_cuda_mempool *pool, ct_cuda_mempool_stats *out) {
    const char *op = "cuda_mempool_stats";
    CT_CHECK_ARG_STATUS(op, pool);
    CT_CHECK_ARG_STATUS(op, out);
    memset(out, 0, sizeof *out);
    ct_alloc_pool_stats ps;
    ct_status st = ct_alloc_pool_get_stats(CT_CUDA(pool->device), pool->id, &ps);
    if (st)
        return st;
    out->segments = ps.segments;
    out->reserved_bytes = ps.reserved_bytes;
    out->allocated_bytes = ps.allocated_bytes;
    out->active_blocks = ps.active_blocks;
    out->uses = ps.uses;
    return CT_OK;
}

ct_status ct_cuda_graph_begin_mode(ct_cuda_stream *stream, ct_cuda_mempool *pool, ct_cuda_capture_mode mode) {
    const char *op = "cuda_graph_begin";
    if ((int)mode < CT_CUDA_CAPTURE_THREAD_LOCAL || (int)mode > CT_CUDA_CAPTURE_RELAXED)
        return ct_error(CT_ERROR_VALUE, op, "invalid capture mode %d", (int)mode);
    const ct_cuda_runtime *rt = ct_cuda_runtime_need(op);
    return rt ? rt->graph_begin(stream, pool, mode) : ct_last_status();
}

ct_status ct_cuda_graph_begin(ct_cuda_stream *stream, ct_cuda_mempool *pool) {
    return ct_cuda_graph_begin_mode(stream, pool, CT_CUDA_CAPTURE_THREAD_LOCAL);
}

ct_status ct_cuda_graph_end(ct_cuda_stream *stream, ct_cuda_graph **out) {
    const char *op = "cuda_graph_end";
    CT_CHECK_ARG_STATUS(op, out);
    *out = NULL;
    const ct_cuda_runtime *rt = ct_cuda_runtime_need(op);
    return rt ? rt->graph_end(stream, out) : ct_last_status();
}

ct_status ct_cuda_graph_replay(ct_cuda_graph *graph) {
    const char *op = "cuda_graph_replay";
    CT_CHECK_ARG_STATUS(op, graph);
    const ct_cuda_runtime *rt = ct_cuda_runtime_need(op);
    return rt ? rt->graph_replay(graph) : ct_last_status();
}

void ct_cuda_graph_free(ct_cuda_graph *graph) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_get();
    if (rt && graph)
        rt->graph_free(graph);
}

ct_cuda_mempool *ct_cuda_graph_pool(ct_cuda_graph *graph) {
    CT_CHECK_ARG("cuda_graph_pool", graph);
    const ct_cuda_runtime *rt = ct_cuda_runtime_need("cuda_graph_pool");
    return rt ? rt->graph_pool(graph) : NULL;
}

bool ct_cuda_is_current_stream_capturing(void) {
    const ct_cuda_runtime *rt = ct_cuda_runtime_get();
    return rt && rt->is_capturing();
}
