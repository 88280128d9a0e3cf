/* The host half of the CUDA reductions and scans: src/meta/reduce_iter.c plans a call
 * (dtypes, outputs, the ct_reduce_iter layout) for every backend; this file hands the
 * layout to reduce.cu / scan.cu. */
#include <stdlib.h>
#include <string.h>

#include "core/factory.h"
#include "ctorch.h"
#include "cuda/cuda_ops.h"
#include "meta/stubs.h"

_Static_assert(CT_CUDA_RED_LOG_SOFTMAX == (int)CT_RED_LOG_SOFTMAX, "reduction kinds must line up");

ct_status ct_cuda_reduce(const ct_reduce_iter *it, const ct_reduce_params *params, ct_device device, const char *op) {
    if (it->out_numel == 0)
        return CT_OK;
    if (!ct_cuda_use_device(op, device.index))
        return ct_last_status();
    ct_cuda_reduce_desc d;
    memset(&d, 0, sizeof d);
    switch (params->kind) { /* spelled out: the two enums must not drift apart silently */
    case CT_RED_SUM: d.kind = CT_CUDA_RED_SUM; break;
    case CT_RED_NANSUM: /* integers hold no NaN: their nansum is the sum */
        d.kind = ct_dtype_is_floating(it->in_dtype) || params->mean ? CT_CUDA_RED_NANSUM : CT_CUDA_RED_SUM;
        break;
    case CT_RED_PROD: d.kind = CT_CUDA_RED_PROD; break;
    case CT_RED_MAX: d.kind = CT_CUDA_RED_MAX; break;
    case CT_RED_MIN: d.kind = CT_CUDA_RED_MIN; break;
    case CT_RED_ARGMAX: d.kind = CT_CUDA_RED_ARGMAX; break;
    case CT_RED_ARGMIN: d.kind = CT_CUDA_RED_ARGMIN; break;
    case CT_RED_COUNT: d.kind = CT_CUDA_RED_COUNT; break;
    case CT_RED_ANY: d.kind = CT_CUDA_RED_ANY; break;
    case CT_RED_ALL: d.kind = CT_CUDA_RED_ALL; break;
    case CT_RED_VAR: d.kind = CT_CUDA_RED_VAR; break;
    case CT_RED_LOGSUMEXP: d.kind = CT_CUDA_RED_LOGSUMEXP; break;
    case CT_RED_NORM: d.kind = CT_CUDA_RED_NORM; break;
    case CT_RED_POWSUM: d.kind = CT_CUDA_RED_POWSUM; break;
    case CT_RED_CUMSUM: d.kind = CT_CUDA_RED_CUMSUM; break;
    case CT_RED_CUMPROD: d.kind = CT_CUDA_RED_CUMPROD; break;
    case CT_RED_CUMMAX: d.kind = CT_CUDA_RED_CUMMAX; break;
    case CT_RED_CUMMIN: d.kind = CT_CUDA_RED_CUMMIN; break;
    case CT_RED_SOFTMAX: d.kind = CT_CUDA_RED_SOFTMAX; break;
    case CT_RED_LOG_SOFTMAX: d.kind = CT_CUDA_RED_LOG_SOFTMAX; break;
    default: return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "no CUDA kernel for this reduction");
    }
    d.p = params->p;
    d.take_sqrt = params->take_sqrt;
    d.mean = params->mean;
    d.index_only = params->index_only;
    d.in = it->in;
    d.nout = it->nout;
    for (int k = 0; k < 2; k++) {
        d.out[k] = k < it->nout ? it->out[k] : NULL;
        d.out_dtype[k] = it->out_dtype[k];
        d.rout[k] = it->rout[k];
    }
    d.in_dtype = it->in_dtype;
    d.nk = it->nk;
    d.nr = it->nr;
    for (int i = 0; i < it->nk; i++) {
        d.kshape[i] = it->kshape[i];
        d.kin[i] = it->kin[i];
        d.kout[0][i] = it->kout[0][i];
        d.kout[1][i] = it->kout[1][i];
    }
    for (int i = 0; i < it->nr; i++) {
        d.rshape[i] = it->rshape[i];
        d.rstride[i] = it->rstride[i];
    }
    d.out_numel = it->out_numel;
    d.red_numel = it->red_numel;
    bool scan = d.kind >= CT_CUDA_RED_CUMSUM;
    size_t bytes = scan ? ct_cuda_scan_scratch(&d) : ct_cuda_reduce_scratch(&d, device.index);
    if (bytes == 0)
        return scan ? ct_cuda_scan_run(&d, NULL, device.index, op) : ct_cuda_reduce_run(&d, NULL, device.index, op);
    ct_scope_begin();
    int64_t n = (int64_t)bytes;
    ct_tensor *scratch = ct_empty_impl(&n, 1, CT_DTYPE_UINT8, device);
    void *p = scratch ? ct_tensor_ptr(scratch) : NULL;
    ct_status st = !scratch ? ct_last_status()
                   : scan   ? ct_cuda_scan_run(&d, p, device.index, op)
                            : ct_cuda_reduce_run(&d, p, device.index, op);
    ct_scope_end(); /* the caching allocator keeps the block for later work on this stream */
    return st;
}

bool ct_cuda_foreach_powsum_applies(const ct_tensor *const *ts, int n, ct_dtype dtype) {
    if (n <= 0 || !ts[0] || ts[0]->device.type != CT_DEVICE_CUDA)
        return false;
    for (int i = 0; i < n; i++) {
        const ct_tensor *t = ts[i];
        /* float inputs that dtype= widens (or keeps): converting is exact, so loading
         * the input as double is what the CPU computes on; no autograd to record */
        if (!t || !ct_device_equal(t->device, ts[0]->device) || !ct_dtype_is_floating(t->dtype) || t->requires_grad)
            return false;
        if (dtype != CT_DTYPE_UNDEFINED &&
            (!ct_dtype_is_floating(dtype) || ct_promote_types(t->dtype, dtype) != dtype))
            return false;
    }
    return true;
}

ct_status ct_cuda_foreach_powsum(const ct_tensor *const *ts, int n, double ord, ct_dtype dtype, ct_tensor **results) {
    const char *op = "_foreach_powsum";
    ct_device dev = ts[0]->device;
    if (!ct_cuda_use_device(op, dev.index))
        return ct_last_status();
    ct_status st = CT_OK;
    ct_scope_begin();
    /* the list in groups of CT_FE_MAX, each one launch with its table as the argument;
     * a tensor's chunks and their order do not depend on the grouping */
    int64_t most = 1, group = 0;
    for (int i = 0; i < n; i++) {
        group += ct_cuda_foreach_chunks(ts[i]->numel);
        if ((i + 1) % CT_FE_MAX == 0 || i + 1 == n) {
            most = group > most ? group : most;
            group = 0;
        }
    }
    int64_t pbytes = most * (int64_t)sizeof(double);
    ct_tensor *scratch = ct_empty_impl(&pbytes, 1, CT_DTYPE_UINT8, dev);
    if (!scratch)
        st = ct_last_status();
    for (int g0 = 0; g0 < n && st == CT_OK; g0 += CT_FE_MAX) {
        ct_fe_table t = {.n = n - g0 < CT_FE_MAX ? n - g0 : CT_FE_MAX};
        for (int j = 0; j < t.n && st == CT_OK; j++) {
            const ct_tensor *c = ct_contiguous(ts[g0 + j]);
            ct_dtype odt = dtype != CT_DTYPE_UNDEFINED ? dtype : ts[g0 + j]->dtype;
            results[g0 + j] = ct_empty_impl(NULL, 0, odt, dev);
            if (!c || !results[g0 + j]) {
                st = ct_last_status();
                break;
            }
            t.data[j] = ct_tensor_ptr(c);
            t.out[j] = ct_tensor_ptr(results[g0 + j]);
            t.numel[j] = c->numel;
            t.dt[j] = (uint8_t)c->dtype;
            t.odt[j] = (uint8_t)odt;
            t.first[j + 1] = t.first[j] + ct_cuda_foreach_chunks(c->numel);
        }
        if (st == CT_OK)
            st = ct_cuda_foreach_powsum_run(&t, ord, (double *)ct_tensor_ptr(scratch), dev.index);
    }
    if (st == CT_OK)
        for (int i = 0; i < n; i++)
            ct_keep(results[i]);
    ct_scope_end();
    if (st != CT_OK)
        for (int i = 0; i < n; i++)
            results[i] = NULL;
    return st;
}

/* The stub of ct_foreach_powsum (src/meta/stubs.def): one launch when it applies. */
static ct_status foreach_powsum_stub(const ct_tensor *const *ts, int n, double ord, ct_dtype dtype,
                                     ct_tensor **results, bool *done) {
    *done = ct_cuda_foreach_powsum_applies(ts, n, dtype);
    return *done ? ct_cuda_foreach_powsum(ts, n, ord, dtype, results) : CT_OK;
}

void ct_cuda_register_reduce(void) {
    ct_stub_reduce[CT_DEVICE_CUDA] = ct_cuda_reduce;
    ct_stub_reduce_narrow[CT_DEVICE_CUDA] = ct_cuda_reduce; /* reduce.cu loads bfloat16 and float16 */
    ct_stub_foreach_powsum[CT_DEVICE_CUDA] = foreach_powsum_stub;
}
