/* The parts of ctorch/cuda.h every build has: the float32 matmul precision setting,
 * and, in a build without CUDA, the runtime functions answering "no device". */
#include <stdatomic.h>
#include <string.h>

#include "ctorch/cuda.h"
#include "error.h"

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

/* Declared in cuda/cuda_rt.h for the CUDA build; a prototype here keeps the C build's
 * -Wmissing-prototypes quiet without including CUDA headers. */
bool ct_cuda_allow_tf32(void);
bool ct_cuda_allow_tf32(void) { return atomic_load(&matmul_precision) != 0; }

#ifndef CT_HAVE_CUDA
static ct_status no_cuda(const char *op) {
    return ct_error(CT_ERROR_DEVICE, op, "ctorch was built without CUDA support");
}

bool ct_cuda_is_available(void) { return false; }
int ct_cuda_device_count(void) { return 0; }
ct_status ct_cuda_get_device_properties(int device, ct_cuda_device_properties *out) {
    (void)device, (void)out;
    return no_cuda("cuda_get_device_properties");
}
int ct_cuda_current_device(void) {
    no_cuda("cuda_current_device");
    return -1;
}
ct_status ct_cuda_set_device(int device) {
    (void)device;
    return no_cuda("cuda_set_device");
}
ct_status ct_cuda_synchronize(int device) {
    (void)device;
    return no_cuda("cuda_synchronize");
}
ct_status ct_cuda_mem_get_info(int device, int64_t *free_bytes, int64_t *total_bytes) {
    (void)device, (void)free_bytes, (void)total_bytes;
    return no_cuda("cuda_mem_get_info");
}
ct_status ct_cuda_stream_create(int device, int priority, ct_cuda_stream **out) {
    (void)device, (void)priority;
    if (out)
        *out = NULL;
    return no_cuda("cuda_stream_create");
}
ct_status ct_cuda_stream_destroy(ct_cuda_stream *stream) {
    (void)stream;
    return CT_OK;
}
ct_status ct_cuda_stream_synchronize(ct_cuda_stream *stream) {
    (void)stream;
    return no_cuda("cuda_stream_synchronize");
}
bool ct_cuda_stream_query(ct_cuda_stream *stream) {
    (void)stream;
    return true;
}
ct_status ct_cuda_stream_wait_event(ct_cuda_stream *stream, ct_cuda_event *event) {
    (void)stream, (void)event;
    return no_cuda("cuda_stream_wait_event");
}
ct_status ct_cuda_set_stream(int device, ct_cuda_stream *stream) {
    (void)device, (void)stream;
    return no_cuda("cuda_set_stream");
}
ct_cuda_stream *ct_cuda_current_stream(int device) {
    (void)device;
    return NULL;
}
int64_t ct_cuda_stream_id(const ct_cuda_stream *stream) {
    (void)stream;
    return 0;
}
ct_status ct_cuda_record_stream(const ct_tensor *t, ct_cuda_stream *stream) {
    (void)t, (void)stream;
    return no_cuda("record_stream");
}
ct_status ct_cuda_event_create(bool timing, ct_cuda_event **out) {
    (void)timing;
    if (out)
        *out = NULL;
    return no_cuda("cuda_event_create");
}
void ct_cuda_event_destroy(ct_cuda_event *event) { (void)event; }
ct_status ct_cuda_event_record(ct_cuda_event *event, ct_cuda_stream *stream) {
    (void)event, (void)stream;
    return no_cuda("cuda_event_record");
}
ct_status ct_cuda_event_synchronize(ct_cuda_event *event) {
    (void)event;
    return no_cuda("cuda_event_synchronize");
}
bool ct_cuda_event_query(ct_cuda_event *event) {
    (void)event;
    return false;
}
ct_status ct_cuda_event_elapsed_ms(ct_cuda_event *start, ct_cuda_event *end, float *ms) {
    (void)start, (void)end, (void)ms;
    return no_cuda("cuda_event_elapsed_ms");
}
ct_status ct_cuda_host_alloc(size_t nbytes, void **out) {
    (void)nbytes;
    if (out)
        *out = NULL;
    return no_cuda("cuda_host_alloc");
}
void ct_cuda_host_free(void *ptr) { (void)ptr; }
ct_tensor *ct_pin_memory(const ct_tensor *t) {
    CT_CHECK_ARG("pin_memory", t);
    no_cuda("pin_memory");
    return NULL;
}
#endif
