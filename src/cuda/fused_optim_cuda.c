/* fused_adam and fused_adamw at CT_KEY_CUDA: the checks (src/meta/fused_optim.c), the
 * table of the tensors, and the launch (fused_optim.cu). */
#include <stdlib.h>

#include "cuda/cuda_ops.h"
#include "cuda/cuda_rt.h"
#include "cuda/fused_optim.h"
#include "dispatch/dispatch_internal.h"
#include "meta/fused_optim.h"

static ct_status cuda_kernel(ct_call *call) {
    ct_adam_args a;
    ct_status st = ct_fused_adam_args(call, &a);
    if (st)
        return st;
    const char *op = ct_op_name(call->op);
    for (int i = 0; i < a.n; i++) {
        const ct_dtype dt = a.params[i]->dtype;
        if (dt != CT_DTYPE_FLOAT32 && dt != CT_DTYPE_BFLOAT16 && dt != CT_DTYPE_FLOAT16)
            return ct_error(CT_ERROR_NOT_IMPLEMENTED, op,
                            "the CUDA kernel takes float32, bfloat16 and float16 params, got %s (params[%d])",
                            ct_dtype_name(dt), i);
    }
    if (!ct_cuda_use_device(op, a.device.index))
        return ct_last_status();
    ct_adam_consts k;
    ct_adam_consts_of(&a, &k);
    const ct_fa_consts c = {
        .beta1 = (float)k.beta1,
        .one_minus_beta1 = (float)k.one_minus_beta1,
        .beta2 = (float)k.beta2,
        .one_minus_beta2 = (float)k.one_minus_beta2,
        .eps = (float)k.eps,
        .wd = (float)k.wd,
        .neg_step_size = (float)k.neg_step_size,
        .bc2_sqrt = (float)k.bc2_sqrt,
        .decay = (float)k.decay,
        .has_wd = k.has_wd,
        .decoupled = a.decoupled,
        .amsgrad = a.amsgrad,
        .maximize = a.maximize,
        .lr = a.lr,
        .beta1_d = a.beta1,
        .beta2_d = a.beta2,
        .weight_decay_d = a.weight_decay,
        .bc1 = k.bc1,
    };
    const double *step_t = a.step_t ? (const double *)ct_tensor_ptr(a.step_t) : NULL;
    const double *lr_t = a.lr_t ? (const double *)ct_tensor_ptr(a.lr_t) : NULL;
    const float *gs = a.grad_scale ? (const float *)ct_tensor_ptr(a.grad_scale) : NULL;
    const float *fi = a.found_inf ? (const float *)ct_tensor_ptr(a.found_inf) : NULL;
    const float *cc = a.clip_coef ? (const float *)ct_tensor_ptr(a.clip_coef) : NULL;
    ct_fa_table *t = malloc(sizeof *t);
    if (!t)
        return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
    for (int i0 = 0; i0 < a.n && !st; i0 += FA_MAX_TENSORS) {
        const int cnt = a.n - i0 < FA_MAX_TENSORS ? a.n - i0 : FA_MAX_TENSORS;
        int64_t blocks = 0;
        t->n = cnt;
        for (int j = 0; j < cnt; j++) {
            const int i = i0 + j;
            t->p[j] = ct_tensor_ptr(a.params[i]);
            t->g[j] = ct_tensor_ptr(a.grads[i]);
            t->m[j] = ct_tensor_ptr(a.exp_avgs[i]);
            t->v[j] = ct_tensor_ptr(a.exp_avg_sqs[i]);
            t->vmax[j] = a.max_exp_avg_sqs ? ct_tensor_ptr(a.max_exp_avg_sqs[i]) : NULL;
            t->master[j] = a.master ? ct_tensor_ptr(a.master[i]) : NULL;
            t->numel[j] = a.params[i]->numel;
            t->pdt[j] = (uint8_t)a.params[i]->dtype;
            t->sdt[j] = (uint8_t)a.exp_avgs[i]->dtype;
            t->first[j] = (int32_t)blocks;
            blocks += (t->numel[j] + FA_CHUNK - 1) / FA_CHUNK;
            if (blocks > 0x7fffffff) {
                st = ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "too many elements for one launch");
                break;
            }
        }
        if (st)
            break;
        t->first[cnt] = (int32_t)blocks;
        st = ct_cuda_fused_adam_run(t, &c, gs, fi, cc, step_t, lr_t, a.device.index, op);
    }
    free(t);
    if (st)
        return st;
    /* Note [No-grad step] of src/optim/optimizer.c: every tensor written gets a new version */
    for (int i = 0; i < call->nlist; i++)
        if (i < a.n || i >= 2 * a.n || a.grad_scale)
            ct_tensor_bump_version((ct_tensor *)call->list[i]);
    return CT_OK;
}

static ct_status fused_adam_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return cuda_kernel(call);
}

void ct_cuda_register_fused_optim(void) {
    ct_dispatch_register_default(CT_OP_fused_adam, CT_KEY_CUDA, fused_adam_kernel, NULL);
    ct_dispatch_register_default(CT_OP_fused_adamw, CT_KEY_CUDA, fused_adam_kernel, NULL);
}
