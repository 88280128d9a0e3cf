/* TensorIterator planning (iter.h): broadcasting, type promotion, the output, and the
 * iteration space reordered and coalesced for the backend that runs it. */
#include "meta/iter.h"

#include <string.h>

#include "core/checks.h"
#include "core/factory.h"
#include "core/view.h"
#include "ctorch/ops.h" /* ct_result_type, ct_can_cast (promote.c) */

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
        if (ct_check_no_internal_overlap(op, cfg->out)) /* Note [Internal overlap] */
            return ct_last_status();
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
        it->out = ct_retain(ct_empty_impl(shape, nd, loop_out, dev));
        if (!it->out)
            return ct_last_status();
    }
    if (it->out->dtype == loop_out) {
        it->loop_out = it->out;
    } else {
        it->loop_out = ct_retain(ct_empty_impl(shape, nd, loop_out, dev));
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
            it->hold[i] = ct_retain(ct_to_dtype_impl(t, common));
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
        /* A dim of size 1 is never stepped over, and an empty iteration steps over
         * none: their strides, which may be anything (as_strided), stay out of the
         * arithmetic. Others lie inside a storage, so their byte strides fit. */
        for (int d = 0; d < nd; d++)
            st[k][d] = shape[d] == 1 || it->numel == 0 ? 0 : st[k][d] * esz;
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
            /* an empty iteration merges every dim (its strides are 0), and its other
             * sizes may multiply past int64 (0 x 3 x 2^62): keep those apart */
            int64_t merged;
            if (merge && ct_size_mul(it->shape[n - 1], shape[d], &merged)) {
                it->shape[n - 1] = merged;
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

ct_tensor *ct_iter_finish(ct_iter *it) {
    if (it->loop_out != it->out) {
        ct_scope_begin();
        ct_tensor *r = ct_copy_impl(it->out, it->loop_out);
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

