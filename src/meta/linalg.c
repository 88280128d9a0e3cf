/* Matrix products: shape rules, hand-written wrappers and the composite ops
 * (matmul, linear) built from mm/bmm/dot and views. */
#include "core/factory.h"
#include "meta/kernels.h"
#include "ctorch.h"
#include "meta/elementwise.h"
#include "meta/linalg.h"

#include <string.h>

#include "dispatch/dispatch_internal.h"
#include "meta/op_info.h"

static ct_status same_dtype(const char *op, const ct_tensor *a, const ct_tensor *b) {
    if (a->dtype != b->dtype)
        return ct_error(CT_ERROR_TYPE, op, "expected m1 and m2 to have the same dtype, but got: %s != %s",
                        ct_dtype_name(a->dtype), ct_dtype_name(b->dtype));
    return CT_OK;
}

static ct_status need_dim(const char *op, const char *what, const ct_tensor *t, int nd) {
    if (t->ndim != nd)
        return ct_error(CT_ERROR_VALUE, op, "%s must be a %dD tensor, got %dD", what, nd, t->ndim);
    return CT_OK;
}

ct_status ct_linalg_out_shape(const ct_call *call, int64_t *shape, int *ndim, ct_dtype *dtype) {
    const char *op = ct_op_name(call->op);
    bool has_c = call->op == CT_OP_addmm || call->op == CT_OP_baddbmm || call->op == CT_OP_addmm_activation;
    const ct_tensor *a = call->in[has_c ? 1 : 0], *b = call->in[has_c ? 2 : 1];
    ct_status st;
    switch (call->op) {
    case CT_OP_dot:
        if ((st = need_dim(op, "1st argument", a, 1)) || (st = need_dim(op, "2nd argument", b, 1)))
            return st;
        if (a->dtype != b->dtype)
            return ct_error(CT_ERROR_TYPE, op, "expected both vectors to have same dtype, but found %s and %s",
                            ct_dtype_name(a->dtype), ct_dtype_name(b->dtype));
        if (a->shape[0] != b->shape[0])
            return ct_error(CT_ERROR_VALUE, op,
                            "inconsistent tensor size, expected tensor [%lld] and src [%lld] to have the same number "
                            "of elements, but got %lld and %lld elements respectively",
                            (long long)a->shape[0], (long long)b->shape[0], (long long)a->shape[0],
                            (long long)b->shape[0]);
        *ndim = 0;
        break;
    case CT_OP_mm:
    case CT_OP_addmm:
    case CT_OP_addmm_activation:
        if ((st = need_dim(op, "self", a, 2)) || (st = need_dim(op, "mat2", b, 2)))
            return st;
        if (a->shape[1] != b->shape[0])
            return ct_error(CT_ERROR_VALUE, op, "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                            (long long)a->shape[0], (long long)a->shape[1], (long long)b->shape[0],
                            (long long)b->shape[1]);
        if ((st = same_dtype(op, a, b)))
            return st;
        *ndim = 2;
        shape[0] = a->shape[0];
        shape[1] = b->shape[1];
        break;
    case CT_OP_bmm:
    case CT_OP_baddbmm:
        if ((st = need_dim(op, "batch1", a, 3)) || (st = need_dim(op, "batch2", b, 3)))
            return st;
        if (a->shape[0] != b->shape[0])
            return ct_error(CT_ERROR_VALUE, op, "batch1 and batch2 must have same number of batches, got %lld and %lld",
                            (long long)a->shape[0], (long long)b->shape[0]);
        if (a->shape[2] != b->shape[1])
            return ct_error(CT_ERROR_VALUE, op,
                            "Expected size for first two dimensions of batch2 tensor to be: [%lld, %lld] but got: "
                            "[%lld, %lld].",
                            (long long)a->shape[0], (long long)a->shape[2], (long long)b->shape[0],
                            (long long)b->shape[1]);
        if ((st = same_dtype(op, a, b)))
            return st;
        *ndim = 3;
        shape[0] = a->shape[0];
        shape[1] = a->shape[1];
        shape[2] = b->shape[2];
        break;
    default: return ct_error(CT_ERROR_RUNTIME, op, "not a matrix product");
    }
    if (a->dtype == CT_DTYPE_BOOL)
        return ct_error(CT_ERROR_TYPE, op, "not implemented for 'bool'");
    if (call->op == CT_OP_addmm_activation && call->ints[0] && !ct_dtype_is_floating(a->dtype))
        return ct_error(CT_ERROR_TYPE, op, "gelu: not implemented for '%s'", ct_dtype_name(a->dtype));
    /* beta and alpha must fit an integer result's dtype, as PyTorch's conversion checks */
    for (int i = 0; has_c && i < 2; i++)
        if ((st = ct_ew_check_fits(op, ct_scalar_to_double(call->s[i]), a->dtype)))
            return st;
    if (has_c) {
        const ct_tensor *c = call->in[0];
        if (c->dtype != a->dtype)
            return ct_error(CT_ERROR_TYPE, op, "expected self and mat1 to have the same dtype, but got: %s != %s",
                            ct_dtype_name(c->dtype), ct_dtype_name(a->dtype));
        int64_t tmp[CT_MAX_DIMS];
        if (!ct_broadcast_strides(c, shape, *ndim, tmp)) {
            char x[64], y[64];
            return ct_error(CT_ERROR_VALUE, op, "the input of shape %s cannot be broadcast to the product's shape %s",
                            ct_shape_str(c->shape, c->ndim, x, sizeof x), ct_shape_str(shape, *ndim, y, sizeof y));
        }
    }
    for (int i = 0; i < call->nin; i++)
        if (!ct_device_equal(call->in[i]->device, a->device)) {
            char x[32], y[32];
            return ct_error(CT_ERROR_DEVICE, op,
                            "Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                            ct_device_str(a->device, x, sizeof x), ct_device_str(call->in[i]->device, y, sizeof y));
        }
    *dtype = a->dtype;
    return CT_OK;
}

ct_status ct_linalg_prepare_out(ct_call *call, ct_device device) {
    int64_t shape[CT_MAX_DIMS];
    int nd;
    ct_dtype dt;
    ct_status st = ct_linalg_out_shape(call, shape, &nd, &dt);
    if (st)
        return st;
    if (call->mode == CT_CALL_OUT) {
        ct_tensor *o = call->out[0];
        bool ok = o->ndim == nd && o->dtype == dt && ct_device_equal(o->device, device);
        for (int i = 0; ok && i < nd; i++)
            ok = o->shape[i] == shape[i];
        if (!ok) {
            char x[64], y[64];
            return ct_error(CT_ERROR_VALUE, ct_op_name(call->op),
                            "the out= tensor must have shape %s and dtype %s, got %s and %s",
                            ct_shape_str(shape, nd, x, sizeof x), ct_dtype_name(dt),
                            ct_shape_str(o->shape, o->ndim, y, sizeof y), ct_dtype_name(o->dtype));
        }
        return CT_OK;
    }
    ct_tensor *o = ct_empty_impl(shape, nd, dt, device);
    if (!o)
        return ct_last_status();
    return ct_call_set_output(call, 0, o);
}

ct_status ct_meta_mm(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return ct_linalg_prepare_out(call, CT_META);
}
ct_status ct_meta_bmm(ct_keyset ks, ct_call *call, void *ud) { return ct_meta_mm(ks, call, ud); }
ct_status ct_meta_dot(ct_keyset ks, ct_call *call, void *ud) { return ct_meta_mm(ks, call, ud); }
ct_status ct_meta_addmm(ct_keyset ks, ct_call *call, void *ud) { return ct_meta_mm(ks, call, ud); }
ct_status ct_meta_baddbmm(ct_keyset ks, ct_call *call, void *ud) { return ct_meta_mm(ks, call, ud); }
ct_status ct_meta_addmm_activation(ct_keyset ks, ct_call *call, void *ud) { return ct_meta_mm(ks, call, ud); }

ct_status ct_linalg_activation_(ct_tensor *t, bool use_gelu) {
    /* relu_ or gelu_(approximate='tanh') through the elementwise kernel itself: a kernel
     * never goes back through the dispatcher (which would log, trace or record it). */
    ct_call c = {.op = use_gelu ? CT_OP_gelu : CT_OP_relu, .mode = CT_CALL_INPLACE, .nin = 1, .in = {t},
                 .nout = 1, .out = {t}, .dtype = CT_DTYPE_UNDEFINED};
    if (use_gelu) {
        c.nints = 1;
        c.ints[0] = CT_GELU_APPROXIMATE_TANH;
    }
    ct_scope_begin();
    ct_status st = ct_kernel_elementwise(0, &c, NULL);
    ct_scope_end();
    return st;
}

