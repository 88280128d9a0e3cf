/* The nccl backend: NCCL loaded at first use, collectives on the group's own stream. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/pg_internal.h"

/* Note [The nccl backend]
 * libctorch.so links no CUDA library, so NCCL is dlopened ("libnccl.so.2", or
 * $CT_NCCL_LIBRARY) the first time a group asks for it, and the few types it needs
 * are declared here with nccl.h's values (2.x ABI). Rank 0's ncclGetUniqueId reaches
 * the others through the store (key <group prefix>nccl_id), then every rank calls
 * ncclCommInitRank on its current CUDA device (set it first: ct_cuda_set_device with
 * LOCAL_RANK).
 *
 * Each group has its own stream. A collective records an event on the calling
 * thread's current stream, makes the group's stream wait for it (so the kernels that
 * wrote the tensor come first), launches the NCCL call there, marks the tensors as
 * used by that stream (ct_cuda_record_stream: the allocator will not hand their
 * memory out again before the collective is done, even once they are freed) and
 * records the work's event. ct_work_wait makes the current stream wait for that event
 * (the host does not block, as PyTorch's work.wait() for NCCL); ct_work_is_completed
 * queries it. The raw cudaStream_t passed to NCCL is the stream's id
 * (ct_cuda_stream_id, which the CUDA backend defines as the handle's value).
 *
 * NCCL has no timeout of its own: a dead peer leaves a kernel spinning. ct_barrier
 * waits on the host with the group's timeout, polling ncclCommGetAsyncError, and
 * aborts the communicator when it passes; the stream-ordered collectives cannot be
 * bounded from the host without blocking, which is the same limit as PyTorch's
 * without its watchdog thread. */

typedef int nccl_result;
typedef void *nccl_comm;
typedef struct {
    char internal[128];
} nccl_unique_id;

enum { NCCL_INT8 = 0, NCCL_UINT8 = 1, NCCL_INT32 = 2, NCCL_INT64 = 4, NCCL_FLOAT16 = 6, NCCL_FLOAT32 = 7,
       NCCL_FLOAT64 = 8, NCCL_BFLOAT16 = 9 };
enum { NCCL_SUM = 0, NCCL_MAX = 2, NCCL_MIN = 3, NCCL_AVG = 4 };
enum { NCCL_SUCCESS = 0, NCCL_IN_PROGRESS = 7 };

static struct {
    void *lib;
    char error[256];
    nccl_result (*get_unique_id)(nccl_unique_id *);
    nccl_result (*comm_init_rank)(nccl_comm *, int, nccl_unique_id, int);
    nccl_result (*comm_destroy)(nccl_comm);
    nccl_result (*comm_abort)(nccl_comm);
    nccl_result (*comm_get_async_error)(nccl_comm, nccl_result *);
    const char *(*get_error_string)(nccl_result);
    nccl_result (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm, void *);
    nccl_result (*reduce_scatter)(const void *, void *, size_t, int, int, nccl_comm, void *);
    nccl_result (*all_gather)(const void *, void *, size_t, int, nccl_comm, void *);
    nccl_result (*broadcast)(const void *, void *, size_t, int, int, nccl_comm, void *);
    nccl_result (*send)(const void *, size_t, int, int, nccl_comm, void *);
    nccl_result (*recv)(void *, size_t, int, int, nccl_comm, void *);
} nccl;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    const char *path = getenv("CT_NCCL_LIBRARY");
    nccl.lib = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!nccl.lib) {
        const char *e = dlerror();
        snprintf(nccl.error, sizeof nccl.error, "%s", e ? e : "dlopen failed");
        return;
    }
#define SYM(field, name)                                                                  \
    do {                                                                                  \
        *(void **)&nccl.field = dlsym(nccl.lib, name);                                    \
        if (!nccl.field) {                                                                \
            snprintf(nccl.error, sizeof nccl.error, "libnccl.so.2 has no %s", name);      \
            dlclose(nccl.lib);                                                            \
            nccl.lib = NULL;                                                              \
            return;                                                                       \
        }                                                                                 \
    } while (0)
    SYM(get_unique_id, "ncclGetUniqueId");
    SYM(comm_init_rank, "ncclCommInitRank");
    SYM(comm_destroy, "ncclCommDestroy");
    SYM(comm_abort, "ncclCommAbort");
    SYM(comm_get_async_error, "ncclCommGetAsyncError");
    SYM(get_error_string, "ncclGetErrorString");
    SYM(all_reduce, "ncclAllReduce");
    SYM(reduce_scatter, "ncclReduceScatter");
    SYM(all_gather, "ncclAllGather");
    SYM(broadcast, "ncclBroadcast");
    SYM(send, "ncclSend");
    SYM(recv, "ncclRecv");
#undef SYM
}

static const char *nccl_err(nccl_result r) {
    return nccl.get_error_string ? nccl.get_error_string(r) : "unknown NCCL error";
}

static void *raw_stream(ct_cuda_stream *s) { return (void *)(uintptr_t)ct_cuda_stream_id(s); }

ct_status ct_nccl_group_init(ct_process_group *pg) {
    static const char *op = "ct_process_group_new";
    if (!ct_cuda_is_available()) {
        ct_clear_error();
        return ct_error(CT_ERROR_DEVICE, op,
                        "the nccl backend needs a CUDA device, and none is available (ctorch info says why); the "
                        "tcp backend runs on the CPU");
    }
    pthread_once(&load_once, load);
    if (!nccl.lib)
        return ct_error(CT_ERROR_RUNTIME, op, "cannot load NCCL: %s (the tcp backend needs none)", nccl.error);
    pg->device = ct_cuda_current_device();
    nccl_unique_id id;
    char key[256];
    snprintf(key, sizeof key, "%snccl_id", pg->prefix);
    if (pg->rank == 0) {
        nccl_result r = nccl.get_unique_id(&id);
        if (r != NCCL_SUCCESS)
            return ct_error(CT_ERROR_RUNTIME, op, "ncclGetUniqueId: %s", nccl_err(r));
        if (ct_store_set(pg->store, key, &id, sizeof id) != CT_OK)
            return ct_last_status();
    } else {
        void *v = NULL;
        size_t n = 0;
        if (ct_store_get(pg->store, key, &v, &n) != CT_OK)
            return ct_error(CT_ERROR_RUNTIME, op, "rank 0 did not publish the NCCL id: %s", ct_last_error());
        if (n != sizeof id) {
            free(v);
            return ct_error(CT_ERROR_RUNTIME, op, "the NCCL id in the store has %zu bytes, expected %zu", n,
                            sizeof id);
        }
        memcpy(&id, v, sizeof id);
        free(v);
    }
    nccl_comm comm = NULL;
    nccl_result r = nccl.comm_init_rank(&comm, pg->size, id, pg->rank);
    if (r != NCCL_SUCCESS)
        return ct_error(CT_ERROR_RUNTIME, op, "ncclCommInitRank (rank %d of %d, cuda:%d): %s", pg->rank, pg->size,
                        pg->device, nccl_err(r));
    pg->comm = comm;
    if (ct_cuda_stream_create(pg->device, 0, &pg->stream) != CT_OK)
        return ct_last_status();
    return CT_OK;
}

void ct_nccl_group_free(ct_process_group *pg) {
    if (pg->stream) {
        if (!pg->broken)
            ct_cuda_stream_synchronize(pg->stream);
        ct_cuda_stream_destroy(pg->stream);
        pg->stream = NULL;
    }
    if (pg->comm) {
        if (pg->broken)
            nccl.comm_abort(pg->comm);
        else
            nccl.comm_destroy(pg->comm);
        pg->comm = NULL;
    }
}

static int nccl_dtype(ct_dtype d) {
    switch (d) {
    case CT_DTYPE_INT8: return NCCL_INT8;
    case CT_DTYPE_UINT8:
    case CT_DTYPE_BOOL: return NCCL_UINT8;
    case CT_DTYPE_INT32: return NCCL_INT32;
    case CT_DTYPE_INT64: return NCCL_INT64;
    case CT_DTYPE_FLOAT16: return NCCL_FLOAT16;
    case CT_DTYPE_FLOAT32: return NCCL_FLOAT32;
    case CT_DTYPE_FLOAT64: return NCCL_FLOAT64;
    case CT_DTYPE_BFLOAT16: return NCCL_BFLOAT16;
    default: return -1;
    }
}

static int nccl_op(ct_reduce_op op) {
    switch (op) {
    case CT_REDUCE_SUM: return NCCL_SUM;
    case CT_REDUCE_AVG: return NCCL_AVG;
    case CT_REDUCE_MAX: return NCCL_MAX;
    default: return NCCL_MIN;
    }
}

static void fail_work(ct_process_group *pg, ct_work *w, ct_status st, const char *msg) {
    w->status = st;
    snprintf(w->msg, sizeof w->msg, "%.400s", msg);
    pg->broken = true;
    snprintf(pg->broken_msg, sizeof pg->broken_msg, "%.400s", msg);
}

void ct_nccl_submit(ct_process_group *pg, ct_work *w) {
    w->done = true;
    w->cuda = true;
    if (pg->broken) {
        w->status = CT_ERROR_RUNTIME;
        snprintf(w->msg, sizeof w->msg, "the process group is unusable after an earlier error: %.400s",
                 pg->broken_msg);
        return;
    }
    int dt = nccl_dtype(w->dtype);
    if (dt < 0) {
        w->status = CT_ERROR_TYPE;
        snprintf(w->msg, sizeof w->msg, "NCCL has no %s", ct_dtype_name(w->dtype));
        return;
    }
    ct_cuda_stream *cur = ct_cuda_current_stream(pg->device);
    ct_cuda_event *ready = NULL;
    if (ct_cuda_event_create(false, &ready) != CT_OK || ct_cuda_event_record(ready, cur) != CT_OK ||
        ct_cuda_stream_wait_event(pg->stream, ready) != CT_OK) {
        ct_cuda_event_destroy(ready);
        fail_work(pg, w, ct_last_status(), ct_last_error());
        ct_clear_error();
        return;
    }
    ct_cuda_event_destroy(ready);
    void *s = raw_stream(pg->stream);
    size_t n = (size_t)w->count;
    nccl_result r = NCCL_SUCCESS;
    switch (w->kind) {
    case K_ALL_REDUCE: r = nccl.all_reduce(w->buf, w->buf, n, dt, nccl_op(w->op), pg->comm, s); break;
    case K_REDUCE_SCATTER: r = nccl.reduce_scatter(w->in, w->buf, n, dt, nccl_op(w->op), pg->comm, s); break;
    case K_ALL_GATHER: r = nccl.all_gather(w->in, w->buf, n, dt, pg->comm, s); break;
    case K_BROADCAST: r = nccl.broadcast(w->buf, w->buf, n, dt, w->peer, pg->comm, s); break;
    case K_SEND: r = nccl.send(w->buf, n, dt, w->peer, pg->comm, s); break;
    case K_RECV: r = nccl.recv(w->buf, n, dt, w->peer, pg->comm, s); break;
    default: r = NCCL_SUCCESS;
    }
    if (r != NCCL_SUCCESS && r != NCCL_IN_PROGRESS) {
        char msg[256];
        snprintf(msg, sizeof msg, "NCCL: %s", nccl_err(r));
        fail_work(pg, w, CT_ERROR_RUNTIME, msg);
        return;
    }
    atomic_fetch_add(&pg->bytes_sent, (int64_t)(n * ct_dtype_size(w->dtype)));
    if ((w->t1 && ct_cuda_record_stream(w->t1, pg->stream) != CT_OK) ||
        (w->t2 && ct_cuda_record_stream(w->t2, pg->stream) != CT_OK) ||
        ct_cuda_event_create(false, &w->event) != CT_OK || ct_cuda_event_record(w->event, pg->stream) != CT_OK) {
        fail_work(pg, w, ct_last_status(), ct_last_error());
        ct_clear_error();
    }
}

ct_status ct_nccl_barrier(ct_process_group *pg) {
    static const char *op = "ct_barrier";
    if (pg->broken)
        return ct_error(CT_ERROR_RUNTIME, op, "the process group is unusable after an earlier error: %s",
                        pg->broken_msg);
    ct_scope_begin();
    ct_tensor *t = ct_zeros(CT_SHAPE(1), CT_F32, (ct_device){CT_DEVICE_CUDA, pg->device});
    ct_work *w = t ? ct_all_reduce_async(pg, t, CT_REDUCE_SUM) : NULL;
    ct_status st = w ? w->status : ct_last_status();
    if (st == CT_OK && w->status != CT_OK)
        st = ct_error(w->status, op, "%s", w->msg);
    int64_t end = ct_dist_now_ms() + pg->timeout_ms;
    while (st == CT_OK && !ct_cuda_event_query(w->event)) {
        nccl_result async = NCCL_SUCCESS;
        nccl.comm_get_async_error(pg->comm, &async);
        if (async != NCCL_SUCCESS && async != NCCL_IN_PROGRESS) {
            pg->broken = true;
            snprintf(pg->broken_msg, sizeof pg->broken_msg, "NCCL: %s", nccl_err(async));
            st = ct_error(CT_ERROR_RUNTIME, op, "NCCL: %s", nccl_err(async));
        } else if (ct_dist_now_ms() > end) {
            pg->broken = true;
            snprintf(pg->broken_msg, sizeof pg->broken_msg, "barrier timed out after %lld ms",
                     (long long)pg->timeout_ms);
            st = ct_error(CT_ERROR_RUNTIME, op,
                          "timed out after %lld ms (a rank did not reach the barrier, or died); the communicator "
                          "is aborted",
                          (long long)pg->timeout_ms);
        } else {
            ct_dist_sleep_ms(1);
        }
    }
    if (st != CT_OK && pg->comm && pg->broken) {
        nccl.comm_abort(pg->comm);
        pg->comm = NULL;
    }
    ct_work_free(w);
    ct_scope_end();
    return st;
}
