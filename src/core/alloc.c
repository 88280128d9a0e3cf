/* The allocator. See DESIGN.md "Allocator": one core shared by every device. */
#include <stdatomic.h>
#include <stdlib.h>

#include "alloc.h"
#include "ctorch/memory.h"
#include "error.h"

#define CT_ALIGN 64

/* Each block carries a small header so a free knows its size. */
typedef struct {
    size_t nbytes;
    size_t pad[7]; /* keeps the payload 64-byte aligned */
} block_header;

static atomic_llong cpu_allocated, cpu_peak;

void *ct_alloc(ct_device device, size_t nbytes) {
    if (device.type != CT_DEVICE_CPU) {
        ct_error(CT_ERROR_DEVICE, "alloc", "no allocator for device type %d", (int)device.type);
        return NULL;
    }
    size_t total = ((nbytes + sizeof(block_header) + CT_ALIGN - 1) / CT_ALIGN) * CT_ALIGN;
    if (total < nbytes) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, "alloc", "could not allocate %zu bytes", nbytes);
        return NULL;
    }
    block_header *h = aligned_alloc(CT_ALIGN, total);
    if (!h) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, "alloc", "could not allocate %zu bytes (CPU)", nbytes);
        return NULL;
    }
    h->nbytes = nbytes;
    long long now = atomic_fetch_add(&cpu_allocated, (long long)nbytes) + (long long)nbytes;
    long long peak = atomic_load(&cpu_peak);
    while (now > peak && !atomic_compare_exchange_weak(&cpu_peak, &peak, now)) {
    }
    return h + 1;
}

void ct_free(ct_device device, void *ptr) {
    (void)device;
    if (!ptr)
        return;
    block_header *h = (block_header *)ptr - 1;
    atomic_fetch_sub(&cpu_allocated, (long long)h->nbytes);
    free(h);
}

int64_t ct_memory_allocated(ct_device device) {
    return device.type == CT_DEVICE_CPU ? (int64_t)atomic_load(&cpu_allocated) : 0;
}
int64_t ct_memory_reserved(ct_device device) { return ct_memory_allocated(device); }
int64_t ct_max_memory_allocated(ct_device device) {
    return device.type == CT_DEVICE_CPU ? (int64_t)atomic_load(&cpu_peak) : 0;
}
void ct_reset_peak_memory_stats(ct_device device) {
    if (device.type == CT_DEVICE_CPU)
        atomic_store(&cpu_peak, atomic_load(&cpu_allocated));
}
void ct_empty_cache(ct_device device) { (void)device; }
