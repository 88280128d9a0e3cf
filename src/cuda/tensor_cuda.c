/* CUDA tensors: copies between devices and dtypes, fills, element reads, pinned
 * tensors and record_stream. Kernels are in copy.cu; this side owns the tensors. */
#include <stdio.h>
#include <string.h>

#include "core/factory.h"
#include "core/alloc.h"
#include "api/cuda_runtime.h"
#include "core/device.h"
#include "cuda/probe.h"
#include "core/view.h"
#include "cuda/cuda_tensor.h"

_Static_assert(CT_CUDA_MAX_DIMS == CT_MAX_DIMS, "kernel descriptions and tensors must agree on the dimension limit");

void ct_cuda_desc_build(ct_cuda_iter_desc *d, int nt, int ndim, const int64_t *shape, char *const *data,
                        const int64_t strides[][CT_MAX_DIMS]) {
    memset(d, 0, sizeof *d);
    d->ntensors = nt;
    d->numel = 1;
    for (int k = 0; k < nt; k++)
        d->data[k] = data[k];
    int n = 0;
    for (int i = ndim - 1; i >= 0; i--) { /* innermost first */
        d->numel *= shape[i];
        if (shape[i] == 1)
            continue;
        if (n > 0) {
            bool merge = true;
            for (int k = 0; k < nt && merge; k++)
                merge = strides[k][i] == d->strides[n - 1][k] * d->shape[n - 1];
            if (merge) {
                d->shape[n - 1] *= shape[i];
                continue;
            }
        }
        d->shape[n] = shape[i];
        for (int k = 0; k < nt; k++)
            d->strides[n][k] = strides[k][i];
        n++;
    }
    d->ndim = n;
}

ct_status ct_cuda_copy_into(ct_tensor *dst, const ct_tensor *src, const int64_t *src_strides) {
    if (dst->numel == 0)
        return CT_OK;
    if (src->device.index != dst->device.index) {
        /* Another GPU: bring src over first (a contiguous copy), then convert here. */
        ct_scope_begin();
        ct_tensor *tmp = ct_cuda_to_device(src, dst->device);
        int64_t st[CT_MAX_DIMS];
        ct_status s = tmp && ct_broadcast_strides(tmp, dst->shape, dst->ndim, st) ? ct_cuda_copy_into(dst, tmp, st)
                                                                                   : ct_last_status();
        ct_scope_end();
        return s;
    }
    size_t desz = ct_dtype_size(dst->dtype), sesz = ct_dtype_size(src->dtype);
    bool dense = dst->dtype == src->dtype && ct_tensor_is_contiguous(dst);
    int64_t expected = 1;
    for (int i = dst->ndim - 1; i >= 0 && dense; i--) {
        if (dst->shape[i] != 1 && src_strides[i] != expected)
            dense = false;
        expected *= dst->shape[i];
    }
    if (dense)
        return ct_cuda_memcpy(ct_tensor_ptr(dst), ct_tensor_ptr(src), (size_t)dst->numel * desz, 2, dst->device.index,
                              "copy_");
    if (!ct_cuda_use_device("copy_", dst->device.index))
        return ct_last_status();
    int64_t st[2][CT_MAX_DIMS];
    for (int i = 0; i < dst->ndim; i++) {
        st[0][i] = dst->strides[i] * (int64_t)desz;
        st[1][i] = src_strides[i] * (int64_t)sesz;
    }
    char *data[2] = {ct_tensor_ptr(dst), ct_tensor_ptr(src)};
    ct_cuda_iter_desc d;
    ct_cuda_desc_build(&d, 2, dst->ndim, dst->shape, data, st);
    return ct_cuda_copy_kernel(&d, dst->dtype, src->dtype, dst->device.index);
}

ct_status ct_cuda_copy_cross(ct_tensor *dst, const ct_tensor *src) {
    if (dst->device.type == CT_DEVICE_META || src->device.type == CT_DEVICE_META)
        return ct_error(CT_ERROR_DEVICE, "copy_", "cannot copy between meta and CUDA tensors: meta tensors have no data");
    ct_scope_begin();
    ct_tensor *tmp = ct_to_device_impl(src, dst->device);
    ct_status st = tmp && ct_copy_impl(dst, tmp) ? CT_OK : ct_last_status();
    ct_scope_end();
    return st;
}

ct_tensor *ct_cuda_to_device(const ct_tensor *t, ct_device device) {
    const char *op = "to_device";
    if (t->device.type == CT_DEVICE_META) {
        ct_error(CT_ERROR_DEVICE, op, "cannot copy out of meta tensor; it has no data");
        return NULL;
    }
    if (device.type == CT_DEVICE_META)
        return ct_tensor_new(op, t->shape, NULL, t->ndim, t->dtype, device);
    if (!ct_check_device(op, device) || !ct_check_device(op, t->device))
        return NULL;
    ct_scope_begin();
    ct_tensor *src = ct_contiguous(t);
    ct_tensor *out = src ? ct_tensor_new(op, t->shape, NULL, t->ndim, t->dtype, device) : NULL;
    size_t nbytes = out ? (size_t)t->numel * ct_dtype_size(t->dtype) : 0;
    ct_status st = out ? CT_OK : ct_last_status();
    if (st == CT_OK && nbytes > 0) {
        if (device.type == CT_DEVICE_CUDA && t->device.type == CT_DEVICE_CPU) {
            st = ct_cuda_memcpy(ct_tensor_ptr(out), ct_tensor_ptr(src), nbytes, 0, device.index, op);
        } else if (device.type == CT_DEVICE_CPU) {
            st = ct_cuda_memcpy(ct_tensor_ptr(out), ct_tensor_ptr(src), nbytes, 1, t->device.index, op);
        } else {
            /* GPU to GPU: the source's stream must be done before the destination's
             * stream reads it. */
            st = ct_cuda_use_device(op, t->device.index) ? ct_cuda_sync_current_stream(t->device.index, op)
                                                         : ct_last_status();
            if (st == CT_OK)
                st = ct_cuda_memcpy(ct_tensor_ptr(out), ct_tensor_ptr(src), nbytes, 2, device.index, op);
        }
    }
    if (st != CT_OK) {
        ct_scope_end();
        return NULL;
    }
    ct_keep(out);
    ct_scope_end();
    return out;
}

ct_status ct_cuda_fill(ct_tensor *t, const void *value, size_t esize) {
    if (t->numel == 0)
        return CT_OK;
    if (!ct_cuda_use_device("fill_", t->device.index))
        return ct_last_status();
    bool zero = true;
    for (size_t i = 0; i < esize; i++)
        zero = zero && ((const unsigned char *)value)[i] == 0;
    if (zero && ct_tensor_is_contiguous(t))
        return ct_cuda_memset_zero(ct_tensor_ptr(t), (size_t)t->numel * esize, t->device.index, "fill_");
    int64_t st[1][CT_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++)
        st[0][i] = t->strides[i] * (int64_t)esize;
    char *data[1] = {ct_tensor_ptr(t)};
    ct_cuda_iter_desc d;
    ct_cuda_desc_build(&d, 1, t->ndim, t->shape, data, st);
    return ct_cuda_fill_kernel(&d, value, esize, t->device.index);
}

ct_status ct_cuda_read_element(const ct_tensor *t, int64_t elem_offset, void *out) {
    size_t esz = ct_dtype_size(t->dtype);
    return ct_cuda_memcpy(out, ct_tensor_ptr(t) + elem_offset * (int64_t)esz, esz, 1, t->device.index, "item");
}

ct_status ct_cuda_read_flag(const ct_tensor *flag, void *out, const char *op) {
    size_t esz = ct_dtype_size(flag->dtype);
    if (ct_cuda_capturing()) {
        /* Note [Checks under capture]: int64 flags hold -1, int32 ones 0, when all is well */
        uint64_t ok = esz == 8 ? UINT64_MAX : 0;
        memcpy(out, &ok, esz);
        return ct_cuda_trap_unless(ct_tensor_ptr(flag), esz == 8, ok, flag->device.index, op);
    }
    return ct_cuda_read_element(flag, 0, out);
}

/* ------------------------------------------------------------------ pinned memory */

static void host_deleter(void *ctx, void *data) {
    (void)ctx;
    ct_cudart_host_free(data);
}

ct_tensor *ct_cudart_pin_memory(const ct_tensor *t) {
    CT_CHECK_ARG("pin_memory", t);
    if (t->device.type != CT_DEVICE_CPU) {
        char b[32];
        ct_error(CT_ERROR_DEVICE, "pin_memory", "cannot pin '%s' memory: only dense CPU tensors can be pinned",
                 ct_device_str(t->device, b, sizeof b));
        return NULL;
    }
    size_t nbytes = (size_t)t->numel * ct_dtype_size(t->dtype);
    void *p = NULL;
    if (ct_cudart_host_alloc(nbytes, &p) != CT_OK)
        return NULL;
    ct_tensor *out = ct_from_blob(p, t->shape, NULL, t->ndim, t->dtype, host_deleter, NULL);
    if (!out) {
        ct_cudart_host_free(p);
        return NULL;
    }
    if (!ct_copy_(out, t))
        return NULL; /* out stays with the scope, or is the caller's to release */
    ct_release(ct_scope_depth() ? NULL : out); /* ct_copy_'s reference, without a scope */
    return out;
}

ct_status ct_cudart_record_stream(const ct_tensor *t, ct_cuda_stream *stream) {
    CT_CHECK_ARG_STATUS("record_stream", t);
    if (t->device.type != CT_DEVICE_CUDA)
        return ct_error(CT_ERROR_DEVICE, "record_stream", "expected a CUDA tensor");
    if (!t->storage->data)
        return CT_OK;
#ifdef CT_ALLOC_MAX_DEVICES
    return ct_alloc_record_stream(t->device, t->storage->data, ct_cudart_stream_id(stream));
#else
    /* Without a cache every free goes to cudaFree, which waits for the device. */
    (void)stream;
    return CT_OK;
#endif
}

/* ------------------------------------------------------------------ random fills */

/* Note [Same numbers on CPU and GPU] (random.cu): the kernels use the CPU's counter
 * layout, so the core's reservation of ceil(n / epc) counters fits both. randint draws
 * on the CPU (src/core/random.c), so it never reaches a GPU. */
static ct_status cuda_random_fill(const ct_random_job *J, int device_index) {
    if (J->kind == CT_RANDOM_RANDINT)
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, "randint", "random integers are drawn on the CPU");
    int kind = J->kind == CT_RANDOM_UNIFORM ? 0 : J->kind == CT_RANDOM_NORMAL ? 1 : 2;
    CT_ASSERT(ct_cuda_philox_counters(kind, J->dtype, J->n) == (J->n + J->epc - 1) / J->epc);
    /* Note [Random numbers in a graph] (random.cu): inside a capture the kernel reads the
     * seed and the start from the graph's device words */
    const uint64_t *state = NULL;
    uint64_t offset = J->offset;
    if (ct_cuda_capturing() &&
        ct_cuda_capture_random(kind == 2 ? "bernoulli_" : kind == 1 ? "normal_" : "uniform_", J->seed, J->offset,
                               (uint64_t)((J->n + J->epc - 1) / J->epc), &state, &offset) != CT_OK)
        return ct_last_status();
    if (kind == 2)
        return ct_cuda_bernoulli_fill(J->dtype, J->out, J->n, J->a, J->probs, J->seed, offset, state, device_index);
    return ct_cuda_philox_fill(kind, J->dtype, J->out, J->n, J->digits, J->a, J->b, J->seed, offset, state,
                               device_index);
}

static ct_status cuda_first_outside_unit(const double *p, int64_t n, int64_t *first, int device_index) {
    ct_scope_begin();
    int64_t one = 1;
    ct_tensor *at = ct_full_impl(&one, 1, ct_scalar_int(-1), CT_DTYPE_INT64, CT_CUDA(device_index));
    ct_status st = at ? ct_cuda_first_outside_unit(p, n, (uint64_t *)ct_tensor_ptr(at), device_index)
                      : ct_last_status();
    if (st == CT_OK)
        st = ct_cuda_read_flag(at, first, "bernoulli");
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ the interface */

/* The public CUDA functions' answers (src/api/cuda_runtime.h). */
static const ct_cuda_runtime runtime_table = {
    .device_count = ct_cudart_device_count,
    .get_device_properties = ct_cudart_get_device_properties,
    .current_device = ct_cudart_current_device,
    .set_device = ct_cudart_set_device,
    .synchronize = ct_cudart_synchronize,
    .mem_get_info = ct_cudart_mem_get_info,
    .stream_create = ct_cudart_stream_create,
    .stream_destroy = ct_cudart_stream_destroy,
    .stream_synchronize = ct_cudart_stream_synchronize,
    .stream_query = ct_cudart_stream_query,
    .stream_wait_event = ct_cudart_stream_wait_event,
    .set_stream = ct_cudart_set_stream,
    .current_stream = ct_cudart_current_stream,
    .stream_id = ct_cudart_stream_id,
    .record_stream = ct_cudart_record_stream,
    .event_create = ct_cudart_event_create,
    .event_destroy = ct_cudart_event_destroy,
    .event_record = ct_cudart_event_record,
    .event_synchronize = ct_cudart_event_synchronize,
    .event_query = ct_cudart_event_query,
    .event_elapsed_ms = ct_cudart_event_elapsed_ms,
    .host_alloc = ct_cudart_host_alloc,
    .host_free = ct_cudart_host_free,
    .pin_memory = ct_cudart_pin_memory,
    .graph_begin = ct_cudart_graph_begin,
    .graph_end = ct_cudart_graph_end,
    .graph_replay = ct_cudart_graph_replay,
    .graph_free = ct_cudart_graph_free,
    .graph_pool = ct_cudart_graph_pool,
    .is_capturing = ct_cudart_is_capturing,
    .cudnn_version = ct_cudnn_version,
    .tunable_export = ct_lt_export,
    .tunable_import = ct_lt_import,
    .tunable_clear = ct_lt_clear,
    .tunable_stats = ct_lt_stats,
    .tunable_dirty = ct_lt_dirty,
    .tunable_validators = ct_lt_validators,
};

/* ct_backend_info's line: the devices, the runtime, the compiled architectures and
 * whether device 0 runs one of them (launches one tiny kernel). */
static const char *describe(void) {
    static char line[512];
    int n = ct_cuda_probe_device_count();
    int rt = ct_cuda_probe_runtime_version();
    int len = snprintf(line, sizeof line, "cuda: %d device%s (runtime %d.%d, built for sm_%s", n, n == 1 ? "" : "s",
                       rt / 1000, rt % 1000 / 10, ct_cuda_probe_archs());
    if (n > 0 && len > 0 && (size_t)len < sizeof line) {
        int arch = ct_cuda_probe_device_arch();
        if (arch > 0)
            len += snprintf(line + len, sizeof line - (size_t)len, "; device 0 runs the sm_%d image", arch / 10);
        else
            len += snprintf(line + len, sizeof line - (size_t)len, "; no compiled image runs on device 0");
    }
    if (len > 0 && (size_t)len < sizeof line) {
        int64_t v = ct_cudnn_version();
        if (v > 0)
            snprintf(line + len, sizeof line - (size_t)len, "; cuDNN %lld.%lld.%lld)", (long long)(v / 10000),
                     (long long)(v % 10000 / 100), (long long)(v % 100));
        else
            snprintf(line + len, sizeof line - (size_t)len, "; %s)", ct_cudnn_why());
    }
    return line;
}

static const ct_device_iface cuda_iface = {
    .name = "cuda",
    .use_device = ct_cuda_use_device,
    .copy = ct_cuda_copy_into,
    .copy_cross = ct_cuda_copy_cross,
    .to_device = ct_cuda_to_device,
    .fill = ct_cuda_fill,
    .read_element = ct_cuda_read_element,
    .random_fill = cuda_random_fill,
    .first_outside_unit = cuda_first_outside_unit,
    .describe = describe,
    .runtime = &runtime_table,
};

void ct_cuda_register_device(void) { ct_device_register(CT_DEVICE_CUDA, &cuda_iface); }
