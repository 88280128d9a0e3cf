/* The CUDA runtime layer: lazy start-up, devices, streams, events, pinned memory,
 * copies and the allocator's device interface. C-style code behind a C interface.
 *
 * Note [CUDA start-up]
 * Nothing here runs when the library is loaded: the first function that needs the
 * runtime asks for the device count once (pthread_once). A machine without a driver
 * or a GPU answers with an error, which ctorch reads as "0 devices", so every CUDA
 * entry point then fails with a CT_ERROR_DEVICE instead of crashing, and CPU work is
 * unaffected. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda_rt.h"

extern "C" {
#include "api/cuda_runtime.h"
#include "core/alloc.h"
#include "core/error.h"
#include "core/random.h"
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int device_count;
static int sm_counts[CT_CUDA_MAX_DEVICES];

static void runtime_init(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver or no GPU: 0 devices, not an error */
        n = 0;
    }
    if (n > CT_CUDA_MAX_DEVICES)
        n = CT_CUDA_MAX_DEVICES;
    for (int i = 0; i < n; i++) {
        int sms = 1;
        if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, i) != cudaSuccess) {
            (void)cudaGetLastError();
            sms = 1;
        }
        sm_counts[i] = sms > 0 ? sms : 1;
    }
    device_count = n;
    if (n > 0)
        ct_cuda_register_allocator();
}

static int count_devices(void) {
    pthread_once(&init_once, runtime_init);
    return device_count;
}

/* ------------------------------------------------------------------ errors */

static thread_local const char *last_op;

extern "C" void ct_cuda_note_op(const char *op) { last_op = op; }

/* Turns a CUDA error into a ct_status error naming op and carrying CUDA's message. */
static ct_status cuda_fail(cudaError_t e, const char *op) {
    (void)cudaGetLastError(); /* clears non-sticky errors so the next call starts clean */
    ct_status st = e == cudaErrorMemoryAllocation ? CT_ERROR_OUT_OF_MEMORY : CT_ERROR_RUNTIME;
    return ct_error(st, op, "CUDA error: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
}

/* Errors found at a synchronisation point come from earlier asynchronous work. */
static ct_status cuda_fail_async(cudaError_t e, const char *op) {
    (void)cudaGetLastError();
    return ct_error(CT_ERROR_RUNTIME, op,
                    "CUDA error: %s (%s); reported asynchronously, the last op launched on this thread was '%s'",
                    cudaGetErrorString(e), cudaGetErrorName(e), last_op ? last_op : "none");
}

extern "C" ct_status ct_cuda_check_launch(const char *op) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return cuda_fail(e, op);
    last_op = op;
    return CT_OK;
}

/* ------------------------------------------------------------------ capture state */

/* Note [Capture guard]
 * While a thread captures a CUDA graph (ct_cuda_graph_begin .. _end), whatever waits
 * for the device or copies through host memory cannot be recorded: CUDA would
 * invalidate the capture (thread-local and global modes) or the graph would miss the
 * work (relaxed). Every such place asks ct_cuda_capture_refuse first, which fails with
 * the op's name (the op the dispatcher is running, else the caller's) and remembers
 * the first one, so that ct_cuda_graph_end can say why the capture is unusable. The
 * state is the thread's own: other threads keep working eagerly. */
namespace {
struct capture_state {
    bool active;
    struct ct_cuda_stream *stream;
    struct ct_cuda_stream *prev; /* the thread's current stream before the capture */
    int device;
    ct_cuda_mempool *pool; /* the graph's handle: its own pool, or a use of the caller's */
    char refused[48];      /* the first op refused during the capture */
    /* Note [Random numbers in a graph] (random.cu): the graph's (seed, start) words,
     * whether a random op was captured, its seed and the span of counters reserved */
    uint64_t *rng_state;
    bool rng_used;
    uint64_t rng_seed, rng_first, rng_end;
};
} // namespace
static thread_local capture_state cap;

extern "C" bool ct_cuda_capturing(void) { return cap.active; }

extern "C" ct_status ct_cuda_capture_refuse(const char *op, const char *what) {
    if (!cap.active)
        return CT_OK;
    const char *ctx = ct_alloc_get_context();
    const char *name = ctx ? ctx : op;
    if (!cap.refused[0])
        snprintf(cap.refused, sizeof cap.refused, "%s", name);
    return ct_error(CT_ERROR_RUNTIME, name,
                    "%s, which a CUDA graph cannot capture: run it before ct_cuda_graph_begin or after "
                    "ct_cuda_graph_end",
                    what);
}

extern "C" ct_status ct_cuda_capture_random(const char *op, uint64_t seed, uint64_t offset, uint64_t ncounters,
                                            const uint64_t **state, uint64_t *offset_arg) {
    if (!cap.active || !cap.rng_state)
        return ct_error(CT_ERROR_RUNTIME, op, "no CUDA graph capture holds random state (internal)");
    if (!cap.rng_used) {
        cap.rng_used = true;
        cap.rng_seed = seed;
        cap.rng_first = cap.rng_end = offset;
    } else if (seed != cap.rng_seed) {
        return ct_cuda_capture_refuse(op, "it draws random numbers after the generator was seeded again during the "
                                          "capture (a replay draws from one seed)");
    }
    *state = cap.rng_state;
    *offset_arg = offset - cap.rng_first;
    if (offset + ncounters > cap.rng_end)
        cap.rng_end = offset + ncounters;
    return CT_OK;
}

/* ------------------------------------------------------------------ devices */

extern "C" int ct_cudart_device_count(void) { return count_devices(); }
extern "C" bool ct_cudart_is_available(void) { return count_devices() > 0; }

static bool valid_device(const char *op, int index) {
    int n = count_devices();
    if (n == 0) {
        ct_error(CT_ERROR_DEVICE, op, "no CUDA device is available (no GPU or no driver found)");
        return false;
    }
    if (index < 0 || index >= n) {
        ct_error(CT_ERROR_DEVICE, op, "CUDA error: invalid device ordinal %d (%d device%s available)", index, n,
                 n == 1 ? "" : "s");
        return false;
    }
    return true;
}

extern "C" bool ct_cuda_use_device(const char *op, int index) {
    if (!valid_device(op, index))
        return false;
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != index) {
        cudaError_t e = cudaSetDevice(index);
        if (e != cudaSuccess) {
            cuda_fail(e, op);
            return false;
        }
    }
    return true;
}

extern "C" int ct_cuda_sm_count(int device) {
    if (device < 0 || device >= count_devices())
        return 1;
    return sm_counts[device];
}

extern "C" ct_status ct_cudart_get_device_properties(int device, ct_cuda_device_properties *out) {
    if (!out)
        return ct_error_null("cuda_get_device_properties");
    if (!valid_device("cuda_get_device_properties", device))
        return ct_last_status();
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess)
        return cuda_fail(e, "cuda_get_device_properties");
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->major = p.major;
    out->minor = p.minor;
    out->total_memory = (int64_t)p.totalGlobalMem;
    out->multi_processor_count = p.multiProcessorCount;
    out->warp_size = p.warpSize;
    out->l2_cache_size = p.l2CacheSize;
    out->max_threads_per_block = p.maxThreadsPerBlock;
    return CT_OK;
}

extern "C" int ct_cudart_current_device(void) {
    if (!valid_device("cuda_current_device", 0))
        return -1;
    int d = -1;
    cudaError_t e = cudaGetDevice(&d);
    if (e != cudaSuccess) {
        cuda_fail(e, "cuda_current_device");
        return -1;
    }
    return d;
}

extern "C" ct_status ct_cudart_set_device(int device) {
    return ct_cuda_use_device("cuda_set_device", device) ? CT_OK : ct_last_status();
}

extern "C" ct_status ct_cudart_synchronize(int device) {
    if (ct_cuda_capture_refuse("cuda_synchronize", "it waits for the device"))
        return ct_last_status();
    if (!ct_cuda_use_device("cuda_synchronize", device))
        return ct_last_status();
    cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? CT_OK : cuda_fail_async(e, "cuda_synchronize");
}

extern "C" ct_status ct_cudart_mem_get_info(int device, int64_t *free_bytes, int64_t *total_bytes) {
    if (!free_bytes || !total_bytes)
        return ct_error_null("cuda_mem_get_info");
    if (!ct_cuda_use_device("cuda_mem_get_info", device))
        return ct_last_status();
    size_t f = 0, t = 0;
    cudaError_t e = cudaMemGetInfo(&f, &t);
    if (e != cudaSuccess)
        return cuda_fail(e, "cuda_mem_get_info");
    *free_bytes = (int64_t)f;
    *total_bytes = (int64_t)t;
    return CT_OK;
}

/* ------------------------------------------------------------------ streams */

struct ct_cuda_stream {
    cudaStream_t s;
    int device;
};

struct ct_cuda_event {
    cudaEvent_t e;
    bool timing;
};

/* Note [Current streams]
 * As in PyTorch, each thread has a current stream per device, the default (legacy)
 * stream until ct_cuda_set_stream changes it. Kernels and copies run on the current
 * stream of their tensors' device. */
/* The table is allocated on a thread's first ct_cuda_set_stream and freed at its exit:
 * inline it would take 512 bytes of the library's static TLS (Note [Thread-local
 * storage] in src/core/error.h). */
namespace {
struct current_streams {
    ct_cuda_stream **v;
    ~current_streams() { free(v); }
};
} // namespace
static thread_local current_streams current;

static ct_cuda_stream *current_get(int device) { return current.v ? current.v[device] : NULL; }

extern "C" void *ct_cuda_raw_stream(int device) {
    if (device < 0 || device >= CT_CUDA_MAX_DEVICES || !current_get(device))
        return NULL;
    return (void *)current_get(device)->s;
}

extern "C" ct_status ct_cudart_stream_create(int device, int priority, ct_cuda_stream **out) {
    if (!out)
        return ct_error_null("cuda_stream_create");
    *out = NULL;
    if (!ct_cuda_use_device("cuda_stream_create", device))
        return ct_last_status();
    ct_cuda_stream *s = (ct_cuda_stream *)ct_xcalloc("cuda_stream_create", 1, sizeof *s);
    if (!s)
        return ct_last_status();
    cudaError_t e = cudaStreamCreateWithPriority(&s->s, cudaStreamNonBlocking, priority);
    if (e != cudaSuccess) {
        free(s);
        return cuda_fail(e, "cuda_stream_create");
    }
    s->device = device;
    *out = s;
    return CT_OK;
}

extern "C" ct_status ct_cudart_stream_destroy(ct_cuda_stream *stream) {
    if (!stream)
        return CT_OK;
    if (ct_cuda_capture_refuse("cuda_stream_destroy", "it waits for the stream"))
        return ct_last_status();
    if (stream->device >= 0 && stream->device < CT_CUDA_MAX_DEVICES && current_get(stream->device) == stream)
        current.v[stream->device] = NULL;
    cudaError_t e = cudaStreamSynchronize(stream->s);
    cudaError_t e2 = cudaStreamDestroy(stream->s);
    free(stream);
    if (e != cudaSuccess)
        return cuda_fail_async(e, "cuda_stream_destroy");
    return e2 == cudaSuccess ? CT_OK : cuda_fail(e2, "cuda_stream_destroy");
}

static cudaStream_t raw_or_current(ct_cuda_stream *stream) {
    if (stream)
        return stream->s;
    int d = 0;
    if (cudaGetDevice(&d) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (cudaStream_t)ct_cuda_raw_stream(d);
}

extern "C" ct_status ct_cudart_stream_synchronize(ct_cuda_stream *stream) {
    if (ct_cuda_capture_refuse("cuda_stream_synchronize", "it waits for the stream"))
        return ct_last_status();
    if (!stream && !valid_device("cuda_stream_synchronize", 0))
        return ct_last_status();
    cudaError_t e = cudaStreamSynchronize(raw_or_current(stream));
    return e == cudaSuccess ? CT_OK : cuda_fail_async(e, "cuda_stream_synchronize");
}

extern "C" bool ct_cudart_stream_query(ct_cuda_stream *stream) {
    if (!stream && count_devices() == 0)
        return true;
    cudaError_t e = cudaStreamQuery(raw_or_current(stream));
    if (e != cudaSuccess && e != cudaErrorNotReady)
        (void)cudaGetLastError();
    return e == cudaSuccess;
}

extern "C" ct_status ct_cudart_stream_wait_event(ct_cuda_stream *stream, ct_cuda_event *event) {
    if (!event)
        return ct_error_null("cuda_stream_wait_event");
    cudaError_t e = cudaStreamWaitEvent(raw_or_current(stream), event->e, 0);
    return e == cudaSuccess ? CT_OK : cuda_fail(e, "cuda_stream_wait_event");
}

extern "C" ct_status ct_cudart_set_stream(int device, ct_cuda_stream *stream) {
    if (!valid_device("cuda_set_stream", device))
        return ct_last_status();
    if (stream && stream->device != device)
        return ct_error(CT_ERROR_DEVICE, "cuda_set_stream", "the stream belongs to cuda:%d, not cuda:%d",
                        stream->device, device);
    if (!current.v) {
        if (!stream)
            return CT_OK; /* the default stream is what an empty table says */
        current.v = (ct_cuda_stream **)ct_xcalloc("cuda_set_stream", CT_CUDA_MAX_DEVICES, sizeof *current.v);
        if (!current.v)
            return ct_last_status();
    }
    current.v[device] = stream;
    return CT_OK;
}

extern "C" ct_cuda_stream *ct_cudart_current_stream(int device) {
    if (device < 0 || device >= CT_CUDA_MAX_DEVICES)
        return NULL;
    return current_get(device);
}

extern "C" int64_t ct_cudart_stream_id(const ct_cuda_stream *stream) {
    return stream ? (int64_t)(uintptr_t)stream->s : 0;
}

extern "C" ct_status ct_cuda_sync_current_stream(int device, const char *op) {
    if (ct_cuda_capture_refuse(op, "it waits for the stream"))
        return ct_last_status();
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)ct_cuda_raw_stream(device));
    return e == cudaSuccess ? CT_OK : cuda_fail_async(e, op);
}

/* ------------------------------------------------------------------ events */

extern "C" ct_status ct_cudart_event_create(bool timing, ct_cuda_event **out) {
    if (!out)
        return ct_error_null("cuda_event_create");
    *out = NULL;
    if (!valid_device("cuda_event_create", 0))
        return ct_last_status();
    ct_cuda_event *ev = (ct_cuda_event *)ct_xcalloc("cuda_event_create", 1, sizeof *ev);
    if (!ev)
        return ct_last_status();
    cudaError_t e = cudaEventCreateWithFlags(&ev->e, timing ? cudaEventDefault : cudaEventDisableTiming);
    if (e != cudaSuccess) {
        free(ev);
        return cuda_fail(e, "cuda_event_create");
    }
    ev->timing = timing;
    *out = ev;
    return CT_OK;
}

extern "C" void ct_cudart_event_destroy(ct_cuda_event *event) {
    if (!event)
        return;
    cudaEventDestroy(event->e);
    (void)cudaGetLastError();
    free(event);
}

extern "C" ct_status ct_cudart_event_record(ct_cuda_event *event, ct_cuda_stream *stream) {
    if (!event)
        return ct_error_null("cuda_event_record");
    cudaError_t e = cudaEventRecord(event->e, raw_or_current(stream));
    return e == cudaSuccess ? CT_OK : cuda_fail(e, "cuda_event_record");
}

extern "C" ct_status ct_cudart_event_synchronize(ct_cuda_event *event) {
    if (!event)
        return ct_error_null("cuda_event_synchronize");
    if (ct_cuda_capture_refuse("cuda_event_synchronize", "it waits for an event"))
        return ct_last_status();
    cudaError_t e = cudaEventSynchronize(event->e);
    return e == cudaSuccess ? CT_OK : cuda_fail_async(e, "cuda_event_synchronize");
}

extern "C" bool ct_cudart_event_query(ct_cuda_event *event) {
    if (!event)
        return false;
    cudaError_t e = cudaEventQuery(event->e);
    if (e != cudaSuccess && e != cudaErrorNotReady)
        (void)cudaGetLastError();
    return e == cudaSuccess;
}

extern "C" ct_status ct_cudart_event_elapsed_ms(ct_cuda_event *start, ct_cuda_event *end, float *ms) {
    if (!start || !end || !ms)
        return ct_error_null("cuda_event_elapsed_ms");
    if (!start->timing || !end->timing)
        return ct_error(CT_ERROR_VALUE, "cuda_event_elapsed_ms",
                        "Both events must be created with argument 'enable_timing=True'.");
    cudaError_t e = cudaEventElapsedTime(ms, start->e, end->e);
    return e == cudaSuccess ? CT_OK : cuda_fail(e, "cuda_event_elapsed_ms");
}

/* ------------------------------------------------------------------ host memory */

extern "C" ct_status ct_cudart_host_alloc(size_t nbytes, void **out) {
    if (!out)
        return ct_error_null("cuda_host_alloc");
    *out = NULL;
    if (!valid_device("cuda_host_alloc", 0))
        return ct_last_status();
    cudaError_t e = cudaHostAlloc(out, nbytes ? nbytes : 1, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        *out = NULL;
        return cuda_fail(e, "cuda_host_alloc");
    }
    return CT_OK;
}

extern "C" void ct_cudart_host_free(void *ptr) {
    if (!ptr)
        return;
    cudaFreeHost(ptr);
    (void)cudaGetLastError();
}

/* ------------------------------------------------------------------ copies */

extern "C" ct_status ct_cuda_memcpy(void *dst, const void *src, size_t nbytes, int kind, int device, const char *op) {
    if (nbytes == 0)
        return CT_OK;
    /* Note [Capture guard]: a copy through host memory waits for the stream */
    if (kind != 2 && ct_cuda_capture_refuse(op, kind == 0 ? "it copies from host memory and waits for the stream"
                                                          : "it copies to host memory and waits for the stream "
                                                            "(item, a data-dependent shape, a value check)"))
        return ct_last_status();
    if (!ct_cuda_use_device(op, device))
        return ct_last_status();
    cudaStream_t s = (cudaStream_t)ct_cuda_raw_stream(device);
    cudaMemcpyKind k = kind == 0 ? cudaMemcpyHostToDevice : kind == 1 ? cudaMemcpyDeviceToHost : cudaMemcpyDefault;
    cudaError_t e = cudaMemcpyAsync(dst, src, nbytes, k, s);
    if (e != cudaSuccess)
        return cuda_fail(e, op);
    last_op = op;
    /* Note [Host copies]: host buffers may be released as soon as this returns (a
     * pinned source is not staged by the driver), and a device-to-host result is read
     * at once, so both directions through the host wait for the stream. */
    if (kind != 2) {
        e = cudaStreamSynchronize(s);
        if (e != cudaSuccess)
            return cuda_fail_async(e, op);
    }
    return CT_OK;
}

extern "C" ct_status ct_cuda_memset_zero(void *dst, size_t nbytes, int device, const char *op) {
    if (nbytes == 0)
        return CT_OK;
    if (!ct_cuda_use_device(op, device))
        return ct_last_status();
    cudaError_t e = cudaMemsetAsync(dst, 0, nbytes, (cudaStream_t)ct_cuda_raw_stream(device));
    if (e != cudaSuccess)
        return cuda_fail(e, op);
    last_op = op;
    return CT_OK;
}

/* ------------------------------------------------------------------ allocator */

/* Note [Capture guard]: cudaMalloc is not stream-ordered, so CUDA counts it among the
 * calls that invalidate a capture in global and thread-local modes. A private pool's
 * segments are meant to be allocated once, outside the graph's work, so the allocator
 * relaxes the thread's capture mode around it (as PyTorch's allocator does); so does
 * the free-memory query of the out-of-memory report. */
namespace {
struct relaxed_capture {
    cudaStreamCaptureMode prev = cudaStreamCaptureModeRelaxed;
    bool on;
    relaxed_capture() : on(cap.active) {
        if (on && cudaThreadExchangeStreamCaptureMode(&prev) != cudaSuccess) {
            (void)cudaGetLastError();
            on = false;
        }
    }
    ~relaxed_capture() {
        if (on && cudaThreadExchangeStreamCaptureMode(&prev) != cudaSuccess)
            (void)cudaGetLastError();
    }
};
} // namespace

extern "C" void *ct_cuda_raw_alloc(int device, size_t nbytes) {
    if (device < 0 || device >= count_devices())
        return NULL;
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != device)
        cudaSetDevice(device);
    void *p = NULL;
    relaxed_capture relax;
    if (cudaMalloc(&p, nbytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

extern "C" void ct_cuda_raw_free(int device, void *ptr) {
    (void)device;
    if (ptr)
        cudaFree(ptr);
    (void)cudaGetLastError();
}

#ifdef CT_ALLOC_MAX_DEVICES
/* Note [CUDA device interface]
 * The caching allocator core keeps pools, splitting, stream-aware reuse, stats and the
 * out-of-memory retry; CUDA supplies raw memory, synchronisation, the current stream
 * and the events that guard blocks used on other streams (record_stream). */
static void *iface_alloc(void *ctx, int index, size_t nbytes) {
    (void)ctx;
    return ct_cuda_raw_alloc(index, nbytes);
}
static void iface_free(void *ctx, int index, void *ptr, size_t nbytes) {
    (void)ctx, (void)nbytes;
    ct_cuda_raw_free(index, ptr);
}
static void iface_sync(void *ctx, int index) {
    (void)ctx;
    if (index >= 0 && index < count_devices()) {
        cudaSetDevice(index);
        cudaDeviceSynchronize();
        (void)cudaGetLastError();
    }
}
static int64_t iface_stream(void *ctx, int index) {
    (void)ctx;
    return (int64_t)(uintptr_t)ct_cuda_raw_stream(index);
}
static void *iface_event_record(void *ctx, int index, int64_t stream) {
    (void)ctx;
    cudaEvent_t ev;
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != index)
        cudaSetDevice(index);
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    if (cudaEventRecord(ev, (cudaStream_t)(uintptr_t)stream) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaEventDestroy(ev);
        return NULL;
    }
    return (void *)ev;
}
static bool iface_event_query(void *ctx, void *event) {
    (void)ctx;
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e != cudaSuccess && e != cudaErrorNotReady)
        (void)cudaGetLastError();
    return e != cudaErrorNotReady;
}
static void iface_event_destroy(void *ctx, void *event) {
    (void)ctx;
    cudaEventSynchronize((cudaEvent_t)event);
    cudaEventDestroy((cudaEvent_t)event);
    (void)cudaGetLastError();
}
static bool iface_capturing(void *ctx, int index) {
    (void)ctx;
    return cap.active && cap.device == index;
}
static int64_t iface_free_bytes(void *ctx, int index) {
    (void)ctx;
    size_t f = 0, t = 0;
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != index)
        cudaSetDevice(index);
    relaxed_capture relax;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (int64_t)f;
}

static ct_alloc_device_iface cuda_iface;

extern "C" void ct_cuda_register_allocator(void) {
    memset(&cuda_iface, 0, sizeof cuda_iface);
    cuda_iface.name = "cuda";
    cuda_iface.raw_alloc = iface_alloc;
    cuda_iface.raw_free = iface_free;
    cuda_iface.synchronize = iface_sync;
    cuda_iface.current_stream = iface_stream;
    cuda_iface.event_record = iface_event_record;
    cuda_iface.event_query = iface_event_query;
    cuda_iface.event_destroy = iface_event_destroy;
    cuda_iface.free_bytes = iface_free_bytes;
    cuda_iface.capturing = iface_capturing;
    cuda_iface.min_block = 512;
    cuda_iface.caching_default = true;
    if (ct_alloc_set_device_interface(CT_DEVICE_CUDA, &cuda_iface) != CT_OK)
        ct_clear_error(); /* a test's interface is in place; it stays */
}
#else
extern "C" void ct_cuda_register_allocator(void) {}
#endif

/* ------------------------------------------------------------------ graphs */

/* Note [CUDA graphs]
 * torch.cuda.CUDAGraph over the runtime's stream capture. ct_cuda_graph_begin waits
 * for the device (work queued before must not run into the capture), routes the
 * stream's allocations to the graph's private pool (Note [Private pools] in
 * src/core/alloc.c), makes the stream the thread's current stream, so that every op
 * launches on it, and begins the capture. ct_cuda_graph_end undoes the three in reverse
 * whatever happened, then instantiates the graph. A graph holds one use of its pool:
 * its tensors' memory stays reserved for it until ct_cuda_graph_free, so a replay
 * writes where the capture wrote. Replay launches on the current stream of the graph's
 * device. Capture-unsafe calls are refused by Note [Capture guard]; an error during the
 * capture leaves it running, and ct_cuda_graph_end then ends it and reports the first
 * refused op instead of returning an incomplete graph. */
struct ct_cuda_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    int device;
    ct_cuda_mempool *pool;
    uint64_t *rng_state; /* Note [Random numbers in a graph]: NULL when nothing random was captured */
    uint64_t rng_span;
};

static __global__ void rng_state_kernel(uint64_t *state, uint64_t seed, uint64_t start) {
    state[0] = seed;
    state[1] = start;
}

static void pool_handle_drop(ct_cuda_mempool *h) {
    if (!h)
        return;
    if (ct_alloc_pool_release(CT_CUDA(h->device), h->id) != CT_OK)
        ct_clear_error();
    free(h);
}

extern "C" ct_status ct_cudart_graph_begin(ct_cuda_stream *stream, ct_cuda_mempool *pool, ct_cuda_capture_mode mode) {
    const char *op = "cuda_graph_begin";
    if (!stream)
        return ct_error(CT_ERROR_RUNTIME, op,
                        "a CUDA graph is captured on a stream made with ct_cuda_stream_create, not on the default "
                        "stream (a captured graph may be replayed on any stream)");
    if (cap.active)
        return ct_error(CT_ERROR_RUNTIME, op, "this thread is already capturing a CUDA graph (on stream %p)",
                        (void *)cap.stream->s);
    if (pool && pool->device != stream->device)
        return ct_error(CT_ERROR_DEVICE, op, "the memory pool belongs to cuda:%d and the stream to cuda:%d",
                        pool->device, stream->device);
    const int dev = stream->device;
    if (!ct_cuda_use_device(op, dev))
        return ct_last_status();
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        return cuda_fail_async(e, op);
    ct_cuda_mempool *h = (ct_cuda_mempool *)ct_xcalloc(op, 1, sizeof *h);
    if (!h)
        return ct_last_status();
    h->device = dev;
    ct_status st;
    if (pool) {
        h->id = pool->id;
        st = ct_alloc_pool_retain(CT_CUDA(dev), h->id);
    } else {
        st = ct_alloc_pool_create(CT_CUDA(dev), &h->id);
    }
    if (st) {
        free(h);
        return st;
    }
    const int64_t sid = (int64_t)(uintptr_t)stream->s;
    if ((st = ct_alloc_pool_begin_use(CT_CUDA(dev), h->id, sid)) != CT_OK) {
        pool_handle_drop(h);
        return st;
    }
    ct_cuda_stream *prev = current_get(dev);
    if ((st = ct_cudart_set_stream(dev, stream)) != CT_OK) {
        (void)ct_alloc_pool_end_use(CT_CUDA(dev), h->id, sid);
        pool_handle_drop(h);
        return st;
    }
    cudaStreamCaptureMode m = mode == CT_CUDA_CAPTURE_GLOBAL    ? cudaStreamCaptureModeGlobal
                              : mode == CT_CUDA_CAPTURE_RELAXED ? cudaStreamCaptureModeRelaxed
                                                                : cudaStreamCaptureModeThreadLocal;
    /* the graph's random state is allocated now: no allocation may happen in a capture */
    uint64_t *rng = NULL;
    e = cudaMalloc((void **)&rng, 2 * sizeof(uint64_t));
    if (e == cudaSuccess)
        e = cudaStreamBeginCapture(stream->s, m);
    if (e != cudaSuccess) {
        st = cuda_fail(e, op);
        cudaFree(rng);
        (void)ct_cudart_set_stream(dev, prev);
        (void)ct_alloc_pool_end_use(CT_CUDA(dev), h->id, sid);
        pool_handle_drop(h);
        return st;
    }
    memset(&cap, 0, sizeof cap);
    cap.rng_state = rng;
    cap.active = true;
    cap.stream = stream;
    cap.prev = prev;
    cap.device = dev;
    cap.pool = h;
    cap.refused[0] = '\0';
    return CT_OK;
}

extern "C" ct_status ct_cudart_graph_end(ct_cuda_stream *stream, ct_cuda_graph **out) {
    const char *op = "cuda_graph_end";
    *out = NULL;
    if (!cap.active)
        return ct_error(CT_ERROR_RUNTIME, op, "this thread is not capturing a CUDA graph");
    if (stream != cap.stream)
        return ct_error(CT_ERROR_RUNTIME, op, "the capture of this thread runs on another stream (%p)",
                        (void *)cap.stream->s);
    const int dev = cap.device;
    ct_cuda_mempool *h = cap.pool;
    char refused[sizeof cap.refused];
    memcpy(refused, cap.refused, sizeof refused);
    uint64_t *rng = cap.rng_state;
    bool rng_used = cap.rng_used;
    uint64_t rng_span = cap.rng_end - cap.rng_first;
    /* Note [Random numbers in a graph]: the capture ran nothing, so it gives its span
     * back when nothing else drew since */
    if (rng_used) {
        uint64_t seed, at;
        ct_generator_get_state(ct_default_generator(), &seed, &at);
        if (seed == cap.rng_seed && at == cap.rng_end)
            ct_generator_set_state(ct_default_generator(), seed, cap.rng_first);
    }
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(cap.stream->s, &g);
    cap.active = false;
    ct_status st2 = ct_alloc_pool_end_use(CT_CUDA(dev), h->id, (int64_t)(uintptr_t)cap.stream->s);
    ct_status st3 = ct_cudart_set_stream(dev, cap.prev);
    memset(&cap, 0, sizeof cap);
    ct_status st = CT_OK;
    if (e != cudaSuccess || !g) {
        if (refused[0])
            st = ct_error(CT_ERROR_RUNTIME, op, "the capture failed: '%s' could not be captured (CUDA: %s)", refused,
                          e != cudaSuccess ? cudaGetErrorString(e) : "no graph");
        else
            st = e != cudaSuccess ? cuda_fail(e, op)
                                  : ct_error(CT_ERROR_RUNTIME, op, "the capture produced no graph");
        (void)cudaGetLastError();
    } else if (refused[0]) {
        st = ct_error(CT_ERROR_RUNTIME, op,
                      "the capture is incomplete: '%s' was refused during it (see Note [Capture guard]); capture "
                      "again without it",
                      refused);
    } else if (st2 || st3) {
        st = st2 ? st2 : st3;
    }
    ct_cuda_graph *graph = NULL;
    if (st == CT_OK) {
        graph = (ct_cuda_graph *)ct_xcalloc(op, 1, sizeof *graph);
        st = graph ? CT_OK : ct_last_status();
    }
    if (st == CT_OK) {
        e = cudaGraphInstantiate(&graph->exec, g, 0);
        if (e != cudaSuccess)
            st = cuda_fail(e, op);
    }
    if (st != CT_OK) {
        if (g) {
            cudaGraphDestroy(g);
            (void)cudaGetLastError();
        }
        free(graph);
        cudaFree(rng);
        pool_handle_drop(h);
        return st;
    }
    graph->graph = g;
    graph->device = dev;
    graph->pool = h;
    if (rng_used) {
        graph->rng_state = rng;
        graph->rng_span = rng_span;
    } else {
        cudaFree(rng);
    }
    *out = graph;
    return CT_OK;
}

extern "C" ct_status ct_cudart_graph_replay(ct_cuda_graph *graph) {
    const char *op = "cuda_graph_replay";
    if (!ct_cuda_use_device(op, graph->device))
        return ct_last_status();
    cudaStream_t s = (cudaStream_t)ct_cuda_raw_stream(graph->device);
    if (graph->rng_state) { /* Note [Random numbers in a graph] */
        uint64_t seed, start;
        ct_generator_reserve(ct_default_generator(), graph->rng_span, &seed, &start);
        rng_state_kernel<<<1, 1, 0, s>>>(graph->rng_state, seed, start);
        cudaError_t le = cudaGetLastError();
        if (le != cudaSuccess)
            return cuda_fail(le, op);
    }
    cudaError_t e = cudaGraphLaunch(graph->exec, s);
    if (e != cudaSuccess)
        return cuda_fail(e, op);
    last_op = op;
    return CT_OK;
}

extern "C" void ct_cudart_graph_free(ct_cuda_graph *graph) {
    if (!graph)
        return;
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != graph->device)
        cudaSetDevice(graph->device);
    /* a replay may still be running: its memory goes back to the pool only after it */
    if (!cap.active)
        cudaDeviceSynchronize();
    cudaGraphExecDestroy(graph->exec);
    cudaGraphDestroy(graph->graph);
    if (!cap.active) /* a free inside a capture would end it: the 16 bytes stay */
        cudaFree(graph->rng_state);
    (void)cudaGetLastError();
    pool_handle_drop(graph->pool);
    free(graph);
}

extern "C" ct_cuda_mempool *ct_cudart_graph_pool(ct_cuda_graph *graph) { return graph->pool; }

extern "C" bool ct_cudart_is_capturing(void) { return cap.active; }

/* Note [Checks under capture]
 * Index and value checks (out-of-range indices, bad targets, integer division by zero,
 * bernoulli probabilities) compute a flag on the device and read it back, which a
 * graph cannot do. While capturing, the flag is checked on the device instead: a
 * one-thread kernel traps when it is not ok_value, which ends the replay with an
 * error (cudaErrorLaunchFailure, reported at the next synchronisation; the CUDA context
 * is unusable afterwards, as after PyTorch's device-side asserts) rather than letting
 * the next kernel read out of bounds. */
static __global__ void trap_unless_kernel(const void *flag, int wide, unsigned long long ok) {
    unsigned long long v = wide ? *(const unsigned long long *)flag : (unsigned long long)*(const unsigned int *)flag;
    if (v != ok)
        __trap();
}

extern "C" ct_status ct_cuda_trap_unless(const void *flag, int wide, uint64_t ok_value, int device, const char *op) {
    if (!ct_cuda_use_device(op, device))
        return ct_last_status();
    trap_unless_kernel<<<1, 1, 0, (cudaStream_t)ct_cuda_raw_stream(device)>>>(flag, wide,
                                                                             (unsigned long long)ok_value);
    return ct_cuda_check_launch(op);
}
