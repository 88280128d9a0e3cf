/* The structured kernel of the elementwise families: one shape and dtype rule for every
 * op of a family and every backend (Note [Elementwise backends] in elementwise.h). On
 * META the iterator computes the output's shape and dtype and nothing runs. */
#include <string.h>

#include "dispatch/dispatch_internal.h"
#include "core/factory.h"
#include "core/view.h"
#include "meta/elementwise.h"

static const ct_ew_backend *backends[3]; /* per ct_device_type */

void ct_ew_register_backend(ct_device_type type, const ct_ew_backend *backend) {
    if ((unsigned)type < 3)
        backends[type] = backend;
}

static ct_status check_dtype_flags(const ct_op_info *info, ct_dtype compute, const ct_call *call) {
    if ((info->flags & CT_OPF_NO_BOOL) && compute == CT_DTYPE_BOOL) {
        if (call->op == CT_OP_neg)
            return ct_error(CT_ERROR_TYPE, info->name,
                            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                            "invert a mask, use the `~` or `logical_not()` operator instead.");
        if (call->op == CT_OP_sub)
            return ct_error(CT_ERROR_TYPE, info->name,
                            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                            "`logical_xor()` operator instead.");
        return ct_error(CT_ERROR_TYPE, info->name, "not implemented for 'bool'");
    }
    if ((info->flags & CT_OPF_NO_INT) && ct_dtype_is_integral(compute, false))
        return ct_error(CT_ERROR_TYPE, info->name, "not implemented for '%s'", ct_dtype_name(compute));
    return CT_OK;
}

static void family_config(const ct_op_info *info, ct_iter_config *cfg) {
    switch (info->family) {
    case CT_FAM_UNARY_FLOAT:
    case CT_FAM_BINARY_FLOAT: cfg->promote_int_to_float = true; break;
    case CT_FAM_COMPARE:
    case CT_FAM_UNARY_BOOL: cfg->out_kind = CT_ITER_OUT_BOOL; break;
    case CT_FAM_BINARY_DIV: cfg->promote_int_to_float = true; break; /* unless a rounding mode (ew_args.c) */
    default: break;
    }
}

static ct_status fill_params(const ct_call *call, ct_dtype compute, ct_loop_params *p) {
    memset(p, 0, sizeof *p);
    p->alpha = 1.0;
    p->ialpha = 1;
    if (call->nscalars > 0 && ct_op_table[call->op].sig == CT_SIG_BINARY_ALPHA) {
        ct_scalar a = call->s[0];
        if (!ct_dtype_is_floating(compute) && a.type == CT_SCALAR_FLOAT)
            return ct_error(CT_ERROR_TYPE, ct_op_name(call->op),
                            "For integral input tensors, argument alpha must not be a floating point number.");
        if (compute == CT_DTYPE_BOOL && a.type == CT_SCALAR_INT && a.v.i != 0 && a.v.i != 1)
            return ct_error(CT_ERROR_TYPE, ct_op_name(call->op),
                            "Boolean alpha only supported for Boolean results.");
        p->alpha = ct_scalar_to_double(a);
        p->ialpha = ct_ew_int_scalar(a);
    }
    return CT_OK;
}

/* The device a call runs on: its first input (or output) that is not on the CPU. */
static ct_device call_device(const ct_call *call) {
    for (int i = 0; i < call->nin; i++)
        if (call->in[i] && call->in[i]->device.type != CT_DEVICE_CPU)
            return call->in[i]->device;
    for (int i = 0; i < call->nout; i++)
        if (call->out[i] && call->out[i]->device.type != CT_DEVICE_CPU)
            return call->out[i]->device;
    return CT_CPU;
}

/* 0-d CPU inputs (scalars) join the operands of another device as copies there that
 * keep their wrapped-number status; in[] is updated in place, the copies belong to the
 * current scope.
 * Note [Scalars on the device]: the copy is made by a fill of the value read on the host
 * (a kernel argument), not by a copy from host memory, which waits for the stream and
 * which a CUDA graph cannot capture (docs/cuda-graphs.md): ct_add_scalar on a GPU tensor
 * stays capturable, as in PyTorch, where a CPU scalar is a constant of the graph. */
static ct_status move_scalars(const ct_tensor **in, int nin, ct_device device) {
    static const int64_t no_dims[1] = {0};
    for (int i = 0; i < nin; i++) {
        const ct_tensor *t = in[i];
        if (!t || t->device.type != CT_DEVICE_CPU || t->ndim != 0)
            continue;
        const ct_dtype dt = t->dtype;
        const char *p = ct_tensor_ptr(t);
        ct_tensor *d;
        if (dt == CT_DTYPE_BOOL)
            d = ct_full_impl(no_dims, 0, ct_scalar_bool(*(const bool *)p), dt, device);
        else if (ct_dtype_is_floating(dt))
            d = ct_full_impl(no_dims, 0, ct_scalar_float(ct_load_double(p, dt)), dt, device);
        else if (ct_dtype_is_integral(dt, false))
            d = ct_full_impl(no_dims, 0, ct_scalar_int(ct_load_int64(p, dt)), dt, device);
        else
            d = ct_to_device_impl(t, device); /* complex: the bytes as they are */
        if (!d)
            return ct_last_status();
        d->wrapped_number = t->wrapped_number; /* promotion treats it as the scalar it was */
        in[i] = d;
    }
    return CT_OK;
}

ct_status ct_kernel_elementwise(ct_keyset ks, ct_call *call, void *user_data) {
    (void)ks, (void)user_data;
    const ct_op_info *info = &ct_op_table[call->op];
    ct_iter_config cfg = ct_iter_config_default();
    cfg.op = info->name;
    cfg.nin = call->nin;
    for (int i = 0; i < call->nin; i++)
        cfg.in[i] = call->in[i];
    if (call->mode != CT_CALL_FUNCTIONAL)
        cfg.out = call->out[0];
    cfg.inplace = call->mode == CT_CALL_INPLACE;
    family_config(info, &cfg);
    int variant = CT_EW_DEFAULT;
    ct_status st = ct_ew_prepare(call, &cfg, &variant);
    if (st != CT_OK)
        return st;
    ct_device dev = call_device(call);
    /* After ct_ew_prepare, which may rearrange the operands (clamp with one bound). */
    if (dev.type != CT_DEVICE_CPU && dev.type != CT_DEVICE_META && cfg.nin > 1) {
        st = move_scalars(cfg.in, cfg.nin, dev);
        if (st != CT_OK)
            return st;
    }

    ct_iter it;
    st = ct_iter_build(&it, &cfg);
    if (st != CT_OK)
        return st;
    ct_device_type type = (ct_device_type)it.loop_out->device.type;
    const ct_ew_backend *be = (unsigned)type < 3 ? backends[type] : NULL;
    const ct_ew_backend *ref = backends[CT_DEVICE_CPU];
    ct_loop_params params;
    st = check_dtype_flags(info, it.compute_dtype, call);
    if (st == CT_OK)
        st = fill_params(call, it.compute_dtype, &params);
    if (st == CT_OK)
        st = ct_ew_setup(call, &it, &params, &variant, type == CT_DEVICE_META ? NULL : be);
    /* An op a device's backend has no loop for at all reads like an empty dispatch slot;
     * the dtypes are the CPU's (Note [Elementwise backends]). */
    if (st == CT_OK && type != CT_DEVICE_META && (!be || (be != ref && !be->has(call->op, variant))))
        st = ct_error(CT_ERROR_NOT_IMPLEMENTED, info->name, "no kernel for this op at dispatch key %s",
                      ct_dispatch_key_name(ct_backend_key(it.loop_out->device)));
    bool have_loop = ref && ref->supported(call->op, variant, it.compute_dtype) &&
                     (type == CT_DEVICE_META || be == ref || (be && be->supported(call->op, variant, it.compute_dtype)));
    if (st == CT_OK && !have_loop)
        st = ct_error(CT_ERROR_TYPE, info->name, "not implemented for '%s'", ct_dtype_name(it.compute_dtype));
    if (st == CT_OK && type != CT_DEVICE_META)
        st = be->run(&it, call->op, variant, &params);
    if (st != CT_OK) {
        ct_iter_abort(&it);
        return st;
    }
    ct_tensor *out = ct_iter_finish(&it);
    if (!out)
        return ct_last_status();
    if (call->mode == CT_CALL_FUNCTIONAL) {
        call->out[0] = out; /* the iterator's reference moves to the call */
        call->nout = 1;
    } else {
        ct_release(out); /* the call already holds the given output */
    }
    return CT_OK;
}
