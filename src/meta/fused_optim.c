/* The fused optimizer ops: the checks every backend runs, the per-step constants and
 * the META kernels (which check and touch no data). */
#include <math.h>
#include <string.h>

#include "meta/fused_optim.h"
#include "meta/kernels.h"

/* Note [Fused Adam checks]
 * torch._fused_adamw_ wants lists of one length, every tensor of an index on one
 * device with one dtype, and floating-point parameters. Here all tensors of a call are
 * on one device (the kernels take raw pointers, so they are also contiguous), the
 * gradients have the parameters' dtype and every state has the parameter's shape and
 * dtype, except that with float32 master copies (bfloat16/float16 parameters only) the
 * states may be float32 too. Which dtypes a device computes is its kernel's check. */

static const char *const list_names[] = {"params", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs",
                                         "master_params"};

static bool same_shape(const ct_tensor *a, const ct_tensor *b) {
    return a->ndim == b->ndim && memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

static ct_status check_one(const char *op, const ct_tensor *t, const char *list, int i, const ct_adam_args *a) {
    char d0[32], d1[32];
    if (!t)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s[%d] is NULL", list, i);
    if (!ct_device_equal(t->device, a->device))
        return ct_error(CT_ERROR_DEVICE, op,
                        "Expected all tensors to be on the same device, but found at least two devices, %s and %s "
                        "(%s[%d])",
                        ct_device_str(a->device, d0, sizeof d0), ct_device_str(t->device, d1, sizeof d1), list, i);
    if (!ct_strides_contiguous(t->shape, t->strides, t->ndim))
        return ct_error(CT_ERROR_VALUE, op, "%s[%d] is not contiguous; the fused kernel needs contiguous tensors",
                        list, i);
    return CT_OK;
}

ct_status ct_fused_adam_args(const ct_call *call, ct_adam_args *a) {
    const char *op = ct_op_name(call->op);
    memset(a, 0, sizeof *a);
    a->decoupled = call->op == CT_OP_fused_adamw;
    a->n = (int)call->ints[0];
    a->amsgrad = call->ints[1] != 0;
    a->maximize = call->ints[2] != 0;
    bool has_master = call->ints[3] != 0;
    a->step = call->ints[4];
    a->lr = ct_scalar_to_double(call->s[0]);
    a->beta1 = ct_scalar_to_double(call->s[1]);
    a->beta2 = ct_scalar_to_double(call->s[2]);
    a->weight_decay = ct_scalar_to_double(call->s[3]);
    a->eps = ct_scalar_to_double(call->s[4]);
    a->grad_scale = call->in[0];
    a->found_inf = call->in[1];
    a->clip_coef = call->in[2];
    a->step_t = call->nin > 3 ? call->in[3] : NULL;
    a->lr_t = call->nin > 4 ? call->in[4] : NULL;
    const int n = a->n, nlists = 4 + a->amsgrad + has_master;
    if (n < 1 || (int64_t)n * nlists != call->nlist)
        return ct_error(CT_ERROR_VALUE, op, "expected %d lists of %d tensors, got %d tensors", nlists, n, call->nlist);
    if (a->step < 1)
        return ct_error(CT_ERROR_VALUE, op, "step must be at least 1, got %lld", (long long)a->step);
    const ct_tensor *const *l = call->list;
    a->params = l;
    a->grads = l + n;
    a->exp_avgs = l + 2 * n;
    a->exp_avg_sqs = l + 3 * n;
    a->max_exp_avg_sqs = a->amsgrad ? l + 4 * n : NULL;
    a->master = has_master ? l + (4 + a->amsgrad) * n : NULL;
    if (!l[0])
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "params[0] is NULL");
    a->device = l[0]->device;
    const ct_tensor *const *lists[6] = {a->params, a->grads, a->exp_avgs, a->exp_avg_sqs, a->max_exp_avg_sqs,
                                        a->master};
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 6; k++) {
            if (!lists[k])
                continue;
            ct_status st = check_one(op, lists[k][i], list_names[k], i, a);
            if (st)
                return st;
        }
        const ct_tensor *p = a->params[i];
        const ct_dtype pdt = p->dtype;
        if (!ct_dtype_is_floating(pdt))
            return ct_error(CT_ERROR_TYPE, op, "params must be floating point, got %s (params[%d])", ct_dtype_name(pdt),
                            i);
        const bool low = pdt == CT_DTYPE_BFLOAT16 || pdt == CT_DTYPE_FLOAT16;
        if (has_master && !low)
            return ct_error(CT_ERROR_TYPE, op,
                            "master_params are float32 copies of bfloat16 or float16 params, but params[%d] is %s", i,
                            ct_dtype_name(pdt));
        for (int k = 1; k < 6; k++) {
            const ct_tensor *t = lists[k] ? lists[k][i] : NULL;
            if (!t)
                continue;
            if (!same_shape(t, p)) {
                char s0[64], s1[64];
                return ct_error(CT_ERROR_VALUE, op, "%s[%d] has shape %s, but params[%d] has shape %s", list_names[k],
                                i, ct_shape_str(t->shape, t->ndim, s0, sizeof s0), i,
                                ct_shape_str(p->shape, p->ndim, s1, sizeof s1));
            }
            /* grads: the params' dtype; master: float32; states: the params' dtype, or
             * float32 beside master copies */
            bool ok = k == 1   ? t->dtype == pdt
                      : k == 5 ? t->dtype == CT_DTYPE_FLOAT32
                               : t->dtype == pdt || (has_master && t->dtype == CT_DTYPE_FLOAT32);
            if (!ok)
                return ct_error(CT_ERROR_TYPE, op, "%s[%d] has dtype %s, but params[%d] has dtype %s%s", list_names[k],
                                i, ct_dtype_name(t->dtype), i, ct_dtype_name(pdt),
                                k == 5 ? " (master_params must be float32)" : "");
        }
        for (int k = 2; k < 5; k++)
            if (lists[k] && lists[k][i]->dtype != a->exp_avgs[i]->dtype)
                return ct_error(CT_ERROR_TYPE, op, "the states of params[%d] must have one dtype, got %s and %s", i,
                                ct_dtype_name(a->exp_avgs[i]->dtype), ct_dtype_name(lists[k][i]->dtype));
    }
    const ct_tensor *opt[5] = {a->grad_scale, a->found_inf, a->clip_coef, a->step_t, a->lr_t};
    static const char *const opt_names[5] = {"grad_scale", "found_inf", "clip_coef", "step_t", "lr_t"};
    for (int k = 0; k < 5; k++) {
        const ct_tensor *t = opt[k];
        if (!t)
            continue;
        char d0[32], d1[32];
        if (!ct_device_equal(t->device, a->device))
            return ct_error(CT_ERROR_DEVICE, op, "%s is on %s, but the params are on %s", opt_names[k],
                            ct_device_str(t->device, d0, sizeof d0), ct_device_str(a->device, d1, sizeof d1));
        const ct_dtype want = k >= 3 ? CT_DTYPE_FLOAT64 : CT_DTYPE_FLOAT32;
        if (t->dtype != want || t->numel != 1)
            return ct_error(CT_ERROR_TYPE, op, "%s must be a one-element %s tensor, got %s with %lld elements",
                            opt_names[k], ct_dtype_name(want), ct_dtype_name(t->dtype), (long long)t->numel);
    }
    /* Note [Device step]
     * A captured graph keeps the arguments of its kernels, so a step number passed by
     * value would stay the one of the capture at every replay. step_t holds it in
     * memory instead: the optimizer's capturable mode adds one to it with a kernel before
     * each update (captured with it) and the CUDA kernel computes the bias corrections
     * from it, in double as ct_adam_consts_of does. On the CPU it is read here.
     * lr_t does the same for the learning rate (Note [Device learning rate] in
     * src/optim/optimizer.c): the CUDA kernel computes the two constants that depend
     * on it, neg_step_size and AdamW's decay, from the double it holds with
     * ct_adam_consts_of's formulas, so a device lr gives the bits of the same lr passed
     * by value. On the CPU it is read here, and checked as the optimizers check lr. */
    if (a->step_t && a->device.type == CT_DEVICE_CPU) {
        const double s = *(const double *)ct_tensor_ptr(a->step_t);
        if (!(s >= 1 && s <= 9007199254740992.0))
            return ct_error(CT_ERROR_VALUE, op, "step_t must hold a step of at least 1, got %g", s);
        a->step = (int64_t)s;
    }
    if (a->lr_t && a->device.type == CT_DEVICE_CPU) {
        const double lr = *(const double *)ct_tensor_ptr(a->lr_t);
        if (!(lr >= 0 && isfinite(lr)))
            return ct_error(CT_ERROR_VALUE, op, "lr_t must hold a finite learning rate >= 0, got %g", lr);
        a->lr = lr;
    }
    return CT_OK;
}

void ct_adam_consts_of(const ct_adam_args *a, ct_adam_consts *c) {
    memset(c, 0, sizeof *c);
    const double step = (double)a->step;
    c->beta1 = a->beta1;
    c->beta2 = a->beta2;
    c->one_minus_beta1 = 1 - a->beta1;
    c->one_minus_beta2 = 1 - a->beta2;
    c->eps = a->eps;
    c->wd = a->weight_decay;
    c->has_wd = a->weight_decay != 0;
    const double bc1 = 1 - pow(a->beta1, step), bc2 = 1 - pow(a->beta2, step);
    c->bc1 = bc1;
    c->neg_step_size = -(a->lr / bc1);
    c->bc2_sqrt = sqrt(bc2);
    c->decay = 1 - a->lr * a->weight_decay;
}

static ct_status meta_kernel(ct_call *call) {
    ct_adam_args a;
    return ct_fused_adam_args(call, &a);
}

ct_status ct_meta_fused_adam(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return meta_kernel(call);
}

ct_status ct_meta_fused_adamw(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return meta_kernel(call);
}
