/* The device interface: what the core asks of the backend that owns a device type.
 *
 * Note [Device interface]
 * The core (tensors, copies, fills, random fills, item) knows no backend. For the few
 * things that touch a tensor's data it looks up the interface of the tensor's device
 * type and calls it; each backend registers its interface when it is registered
 * (src/registry.c). The allocator's part (raw allocation, synchronisation, events)
 * is the ct_alloc_device_iface of alloc.h, registered through the same call. A device
 * type nobody registered gives an error naming the op ("no backend for device type
 * cuda is loaded"), never a crash.
 *
 * The META device has no interface: the core handles it itself (no data). The CPU's
 * data is host memory, so the core also reads and writes single CPU elements directly
 * (ct_tensor_get, item); everything that loops over a tensor goes through the CPU
 * backend's interface, so its loops (casts, fills, Philox) live in src/cpu. */
#ifndef CT_DEVICE_H
#define CT_DEVICE_H

#include "alloc.h"
#include "tensor_impl.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* ------------------------------------------------------------------ random jobs */

/* One random fill, in the layout of Note [Random streams] (random.c): element i of out
 * is a pure function of (seed, offset, i), the same on every backend. */
typedef enum ct_random_kind {
    CT_RANDOM_UNIFORM,
    CT_RANDOM_NORMAL,
    CT_RANDOM_RANDINT,
    CT_RANDOM_BERNOULLI,        /* one probability a */
    CT_RANDOM_BERNOULLI_TENSOR, /* a probability per element (probs) */
} ct_random_kind;

typedef struct ct_random_job {
    ct_random_kind kind;
    ct_dtype dtype;
    char *out;     /* contiguous, n elements of dtype, on the job's device */
    int64_t n;
    int epc;       /* elements per counter */
    int digits;    /* uniform: random bits per element */
    double a, b;   /* uniform: from, to; normal: mean, std; bernoulli: p */
    int64_t low;   /* randint: [low, low + range) */
    uint64_t range;
    const double *probs; /* bernoulli with a tensor of probabilities: n float64 on the device */
    uint64_t seed, offset; /* reserved by the core: counters [offset, offset + ceil(n / epc)) */
} ct_random_job;

/* ------------------------------------------------------------------ the interface */

typedef struct ct_device_iface {
    const char *name; /* "cpu", "cuda" */
    /* The allocator's interface for this device type (NULL: leave the allocator's). */
    const ct_alloc_device_iface *alloc;
    /* Checks that device index exists and makes it current; false with an error naming
     * op otherwise. */
    bool (*use_device)(const char *op, int index);
    /* dst = src converted to dst's dtype; both on this device type and on one device;
     * src_strides: src's element strides broadcast to dst's shape; they do not overlap. */
    ct_status (*copy)(ct_tensor *dst, const ct_tensor *src, const int64_t *src_strides);
    /* copy_ between a tensor of this device type and one elsewhere (the CPU, or another
     * device of this type); shapes are checked, src broadcasts to dst. Optional. */
    ct_status (*copy_cross)(ct_tensor *dst, const ct_tensor *src);
    /* t copied to device (one of the two is this device type); optional: without it
     * the core allocates on device and copies with copy_cross. */
    ct_tensor *(*to_device)(const ct_tensor *t, ct_device device);
    /* Every element of t set to the esize bytes at value (host memory). */
    ct_status (*fill)(ct_tensor *t, const void *value, size_t esize);
    /* The element elem_offset elements past t's first one, into host memory out. */
    ct_status (*read_element)(const ct_tensor *t, int64_t elem_offset, void *out);
    /* Runs a random job whose counters the core has reserved; device_index: the job's
     * device. */
    ct_status (*random_fill)(const ct_random_job *job, int device_index);
    /* *first: the first of n float64 probabilities at p (device memory) outside [0, 1]
     * (NaN included), or -1. */
    ct_status (*first_outside_unit)(const double *p, int64_t n, int64_t *first, int device_index);
    /* One line for ct_backend_info ("cuda: 1 device, ..."); may initialise the device's
     * driver. Optional. */
    const char *(*describe)(void);
    /* The backend's table behind the public functions of its device type (CUDA:
     * src/api/cuda_runtime.h); NULL for the CPU. */
    const void *runtime;
} ct_device_iface;

/* Registers (or, with NULL, removes) the interface of a device type, and its allocator
 * interface. The struct is not copied and must outlive its use. */
ct_status ct_device_register(ct_device_type type, const ct_device_iface *iface);
/* The interface of a device type, or NULL (no error set). */
const ct_device_iface *ct_device_iface_get(ct_device_type type);
/* The same, with an error naming op when there is none. */
const ct_device_iface *ct_device_need(const char *op, ct_device_type type);
/* Why a device type has no interface, for messages ("ctorch was built without CUDA",
 * "libctorch_cuda.so could not be loaded: ..."); set by the registry. */
void ct_device_set_unavailable_reason(ct_device_type type, const char *reason);

CT_BACKEND_END

#endif /* CT_DEVICE_H */
