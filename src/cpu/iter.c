#include "iter.h"

#include <string.h>

#include "core/alloc.h"
#include "cpu/loop.h"
#include "core/tensor_make.h"
#include "ctorch/ops.h"

#ifdef CT_HAVE_OPENMP
#include <omp.h>
#endif

/* Elements below which a loop runs on one thread: spawning costs more than it saves. */
#define CT_GRAIN 32768

ct_iter_config ct_iter_config_default(void) {
    ct_iter_config c;
    memset(&c, 0, sizeof c);
    c.compute_dtype = CT_DTYPE_UNDEFINED;
    c.device = CT_CPU;
    return c;
}

bool ct_broadcast_shapes(const char *op, const ct_tensor *const *ts, int n, int64_t *shape, int *ndim) {
    int nd = 0;
    for (int i = 0; i < n; i++)
        if (ts[i] && ts[i]->ndim > nd)
            nd = ts[i]->ndim;
    for (int d = 0; d < nd; d++)
        shape[d] = 1;
    for (int i = 0; i < n; i++) {
        const ct_tensor *t = ts[i];
        if (!t)
            continue;
        int lead = nd - t->ndim;
        for (int d = 0; d < t->ndim; d++) {
            int64_t s = t->shape[d], *o = &shape[lead + d];
            if (s == *o || s == 1)
                continue;
            if (*o == 1) {
                *o = s;
                continue;
            }
            /* Name the two tensors like PyTorch: "The size of tensor a (3) must match the
             * size of tensor b (4) at non-singleton dimension 1". */
            int other = 0;
            for (int j = 0; j < i; j++) {
                const ct_tensor *u = ts[j];
                int ud = d + lead - (nd - (u ? u->ndim : 0));
                if (u && ud >= 0 && u->shape[ud] == *o) {
                    other = j;
                    break;
                }
            }
            ct_error(CT_ERROR_VALUE, op,
                     "The size of tensor %c (%lld) must match the size of tensor %c (%lld) at non-singleton "
                     "dimension %d",
                     'a' + other, (long long)*o, 'a' + i, (long long)s, lead + d);
            return false;
        }
    }
    *ndim = nd;
    return true;
}

static void hold_release(ct_iter *it) {
    for (int i = 0; i < CT_ITER_MAX; i++) {
        ct_release(it->hold[i]);
        it->hold[i] = NULL;
    }
}

void ct_iter_abort(ct_iter *it) {
    hold_release(it);
    if (it->loop_out != it->out)
        ct_release(it->loop_out);
    ct_release(it->out);
    it->out = it->loop_out = NULL;
}

ct_status ct_iter_build(ct_iter *it, const ct_iter_config *cfg) {
    memset(it, 0, sizeof *it);
    it->op = cfg->op;
    const char *op = cfg->op;
    int nin = cfg->nin;

    /* Shape */
    int64_t shape[CT_MAX_DIMS];
    int nd;
    if (!ct_broadcast_shapes(op, cfg->in, nin, shape, &nd))
        return ct_last_status();
    if (cfg->out && cfg->inplace) {
        bool same = cfg->out->ndim == nd;
        for (int d = 0; same && d < nd; d++)
            same = cfg->out->shape[d] == shape[d];
        if (!same) {
            char a[128], b[128];
            return ct_error(CT_ERROR_VALUE, op, "output with shape %s doesn't match the broadcast shape %s",
                            ct_shape_str(cfg->out->shape, cfg->out->ndim, a, sizeof a),
                            ct_shape_str(shape, nd, b, sizeof b));
        }
    }

    /* Devices: every operand on one device (0-d CPU tensors may join any device). */
    ct_device dev = cfg->device;
    bool have_dev = false;
    for (int i = 0; i < nin; i++) {
        const ct_tensor *t = cfg->in[i];
        if (t->ndim == 0 && t->device.type == CT_DEVICE_CPU && nin > 1)
            continue;
        if (have_dev && !ct_device_equal(dev, t->device)) {
            char a[32], b[32];
            return ct_error(CT_ERROR_DEVICE, op,
                            "Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                            ct_device_str(dev, a, sizeof a), ct_device_str(t->device, b, sizeof b));
        }
        dev = t->device;
        have_dev = true;
    }
    if (!have_dev && nin > 0)
        dev = cfg->in[0]->device;

    /* Dtypes */
    ct_dtype common = cfg->compute_dtype;
    if (common == CT_DTYPE_UNDEFINED) {
        const ct_tensor *promoted[CT_ITER_MAX];
        for (int i = 0; i < nin; i++)
            promoted[i] = cfg->keep_dtype & (1u << i) ? NULL : cfg->in[i];
        common = ct_result_type(promoted, nin);
        if (common == CT_DTYPE_UNDEFINED)
            return ct_last_status();
    }
    if (cfg->promote_int_to_float && !ct_dtype_is_floating(common))
        common = ct_get_default_dtype();
    ct_dtype loop_out = cfg->out_kind == CT_ITER_OUT_BOOL ? CT_DTYPE_BOOL : common;
    it->compute_dtype = common;
    it->loop_out_dtype = loop_out;

    /* Output */
    if (cfg->out) {
        if (!ct_device_equal(cfg->out->device, dev)) {
            char a[32], b[32];
            return ct_error(CT_ERROR_DEVICE, op, "the output is on %s but the inputs are on %s",
                            ct_device_str(cfg->out->device, a, sizeof a), ct_device_str(dev, b, sizeof b));
        }
        if (!ct_can_cast(loop_out, cfg->out->dtype))
            return ct_error(CT_ERROR_TYPE, op, "result type %s can't be cast to the desired output type %s",
                            ct_dtype_name(loop_out), ct_dtype_name(cfg->out->dtype));
        bool same = cfg->out->ndim == nd;
        for (int d = 0; same && d < nd; d++)
            same = cfg->out->shape[d] == shape[d];
        if (!same) {
            char a[128], b[128];
            return ct_error(CT_ERROR_VALUE, op, "the out= tensor has shape %s but the result has shape %s",
                            ct_shape_str(cfg->out->shape, cfg->out->ndim, a, sizeof a),
                            ct_shape_str(shape, nd, b, sizeof b));
        }
        it->out = ct_retain(cfg->out);
    } else {
        it->out = ct_retain(ct_empty(shape, nd, loop_out, dev));
        if (!it->out)
            return ct_last_status();
    }
    if (it->out->dtype == loop_out) {
        it->loop_out = it->out;
    } else {
        it->loop_out = ct_retain(ct_empty(shape, nd, loop_out, dev));
        if (!it->loop_out) {
            ct_release(it->out);
            it->out = NULL;
            return ct_last_status();
        }
    }

    /* Inputs in the compute dtype. */
    const ct_tensor *ops[CT_ITER_MAX];
    ops[0] = it->loop_out;
    for (int i = 0; i < nin; i++) {
        const ct_tensor *t = cfg->in[i];
        if (t->dtype != common && !(cfg->keep_dtype & (1u << i))) {
            it->hold[i] = ct_retain(ct_to_dtype(t, common));
            if (!it->hold[i]) {
                ct_iter_abort(it);
                return ct_last_status();
            }
            t = it->hold[i];
        }
        ops[1 + i] = t;
    }
    it->ntensors = 1 + nin;
    it->numel = ct_shape_numel(shape, nd);
    if (dev.type == CT_DEVICE_META)
        return CT_OK;

    /* Byte strides per operand, broadcast to the full shape. */
    int64_t st[CT_ITER_MAX][CT_MAX_DIMS];
    for (int k = 0; k < it->ntensors; k++) {
        ct_broadcast_strides(ops[k], shape, nd, st[k]);
        int64_t esz = (int64_t)ct_dtype_size(ops[k]->dtype);
        for (int d = 0; d < nd; d++)
            st[k][d] *= esz;
        it->data[k] = ct_tensor_ptr(ops[k]);
    }

    /* Reorder: innermost first, by the output's strides (ties keep the logical order),
     * so the loop walks memory forward; then merge dims contiguous in every operand. */
    int perm[CT_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        perm[d] = nd - 1 - d;
    for (int i = 1; i < nd; i++)
        for (int j = i; j > 0; j--) {
            int a = perm[j - 1], b = perm[j];
            int64_t sa = st[0][a], sb = st[0][b];
            /* Move b inward only when the output strides say so and it is not a
             * broadcast (stride 0) dim of the output. */
            if (sb != 0 && sa != 0 && sb < sa)
                perm[j - 1] = b, perm[j] = a;
            else
                break;
        }
    int n = 0;
    for (int i = 0; i < nd; i++) {
        int d = perm[i];
        if (shape[d] == 1)
            continue;
        if (n > 0) {
            bool merge = true;
            for (int k = 0; k < it->ntensors && merge; k++)
                merge = st[k][d] == it->strides[n - 1][k] * it->shape[n - 1];
            if (merge) {
                it->shape[n - 1] *= shape[d];
                continue;
            }
        }
        it->shape[n] = shape[d];
        for (int k = 0; k < it->ntensors; k++)
            it->strides[n][k] = st[k][d];
        n++;
    }
    it->ndim = n;
    return CT_OK;
}

/* Runs elements [begin, end) of the flattened (reordered) iteration space. */
static void run_range(const ct_iter *it, ct_cpu_loop loop, const void *params, int64_t begin, int64_t end) {
    int nt = it->ntensors;
    if (it->ndim == 0) {
        char *ptrs[CT_ITER_MAX];
        int64_t zero[CT_ITER_MAX] = {0};
        memcpy(ptrs, it->data, sizeof ptrs);
        loop(ptrs, zero, 1, params);
        return;
    }
    int64_t idx[CT_MAX_DIMS];
    int64_t rem = begin;
    for (int d = 0; d < it->ndim; d++) {
        idx[d] = rem % it->shape[d];
        rem /= it->shape[d];
    }
    char *ptrs[CT_ITER_MAX];
    for (int k = 0; k < nt; k++) {
        ptrs[k] = it->data[k];
        for (int d = 0; d < it->ndim; d++)
            ptrs[k] += idx[d] * it->strides[d][k];
    }
    int64_t pos = begin;
    while (pos < end) {
        int64_t n = it->shape[0] - idx[0];
        if (n > end - pos)
            n = end - pos;
        loop(ptrs, it->strides[0], n, params);
        pos += n;
        if (pos >= end)
            break;
        /* The row is done: back to its start, then carry into the outer dims. */
        for (int k = 0; k < nt; k++)
            ptrs[k] -= idx[0] * it->strides[0][k];
        idx[0] = 0;
        for (int d = 1; d < it->ndim; d++) {
            for (int k = 0; k < nt; k++)
                ptrs[k] += it->strides[d][k];
            if (++idx[d] < it->shape[d])
                break;
            for (int k = 0; k < nt; k++)
                ptrs[k] -= it->shape[d] * it->strides[d][k];
            idx[d] = 0;
        }
    }
}

void ct_iter_run(const ct_iter *it, ct_cpu_loop loop, const void *params) {
    if (it->numel == 0 || !it->data[0])
        return;
#ifdef CT_HAVE_OPENMP
    int nth = ct_get_num_threads();
    if (it->numel >= CT_GRAIN && nth > 1 && !omp_in_parallel()) {
        int64_t chunks = it->numel / (CT_GRAIN / 2);
        if (chunks > nth)
            chunks = nth;
#pragma omp parallel for num_threads((int)chunks) schedule(static)
        for (int64_t c = 0; c < chunks; c++) {
            /* Cut points at multiples of 16 elements: for contiguous data each thread's
             * piece starts on a cache line, so threads never write the same line and
             * vector loops run aligned with a single tail at the very end. */
            int64_t b = c == 0 ? 0 : it->numel * c / chunks / 16 * 16;
            int64_t e = c == chunks - 1 ? it->numel : it->numel * (c + 1) / chunks / 16 * 16;
            run_range(it, loop, params, b, e);
        }
        return;
    }
#endif
    run_range(it, loop, params, 0, it->numel);
}

ct_tensor *ct_iter_finish(ct_iter *it) {
    if (it->loop_out != it->out) {
        ct_scope_begin();
        ct_tensor *r = ct_copy_(it->out, it->loop_out);
        ct_scope_end();
        if (!r) {
            ct_iter_abort(it);
            return NULL;
        }
        ct_release(it->loop_out);
    }
    hold_release(it);
    ct_tensor *out = it->out;
    it->out = it->loop_out = NULL;
    return out;
}

/* Note [Tiny elementwise]
 * Same-shape, same-dtype contiguous inputs leave the iterator nothing to decide: no
 * broadcast, no promotion, the output is a fresh contiguous tensor of that shape, its
 * dims coalesce to one, and below the grain size it runs on one thread. The general
 * build would reach exactly this and then call the same loop with the same pointers and
 * strides, so the results are identical; it only costs ten times more instructions than
 * a small op's loop. The size cap keeps big work on the parallel route. */
static bool tiny_contiguous(const ct_tensor *t) {
    int64_t expected = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != expected)
            return false;
        expected *= t->shape[i];
    }
    return true;
}

bool ct_iter_tiny_ok(const ct_tensor *a, const ct_tensor *b) {
    if (a->device.type != CT_DEVICE_CPU || a->requires_grad || a->wrapped_number || a->numel <= 0 ||
        a->numel > CT_ITER_TINY_MAX || !tiny_contiguous(a))
        return false;
    if (!b)
        return true;
    if (b->dtype != a->dtype || b->ndim != a->ndim || b->device.type != CT_DEVICE_CPU || b->requires_grad ||
        b->wrapped_number)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return tiny_contiguous(b);
}

ct_tensor *ct_iter_tiny(const char *op, ct_cpu_loop loop, ct_dtype out_dtype, const ct_tensor *a,
                        const ct_tensor *b, const void *params) {
    size_t osz = ct_dtype_itemsize(out_dtype), isz = ct_dtype_itemsize(a->dtype);
    const char *outer = ct_alloc_get_context();
    ct_alloc_set_context(op);
    ct_storage *s = ct_storage_new((size_t)a->numel * osz, CT_CPU);
    ct_alloc_set_context(outer);
    if (!s)
        return NULL;
    ct_tensor *out = ct_tensor_make_owned(s, 0, a->shape, NULL, a->ndim, out_dtype, CT_CPU);
    if (!out)
        return NULL;
    char *data[3] = {s->data, ct_tensor_ptr(a), b ? ct_tensor_ptr(b) : NULL};
    /* One element coalesces to no dims at all in the general build, which runs the loop
     * with zero strides (its strided branch); do the same so every bit agrees. */
    int64_t one = a->numel > 1;
    int64_t strides[3] = {one * (int64_t)osz, one * (int64_t)isz, one * (int64_t)isz};
    loop(data, strides, a->numel, params);
    return out;
}
