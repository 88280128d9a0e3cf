/* The fused optimizer ops (fused_adam, fused_adamw): their arguments read from a call
 * and checked once, for every backend (src/meta/fused_optim.c). */
#ifndef CT_META_FUSED_OPTIM_H
#define CT_META_FUSED_OPTIM_H

#include "dispatch/call.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* The lists of the call, n entries each (vmax and master NULL when absent), and the
 * hyperparameters as the wrapper packed them (include/ctorch/ops.def). */
typedef struct ct_adam_args {
    int n;
    bool decoupled; /* AdamW */
    bool amsgrad, maximize;
    int64_t step;
    double lr, beta1, beta2, weight_decay, eps;
    const ct_tensor *const *params, *const *grads, *const *exp_avgs, *const *exp_avg_sqs;
    const ct_tensor *const *max_exp_avg_sqs, *const *master;
    const ct_tensor *grad_scale, *found_inf, *clip_coef;
    const ct_tensor *step_t; /* Note [Device step]: on a GPU, read by the kernel; else read into step */
    const ct_tensor *lr_t;   /* the same for the learning rate: on the CPU read into lr */
    ct_device device;
} ct_adam_args;

/* Reads and checks the call: one device, contiguous tensors, matching shapes and
 * dtypes (Note [Fused Adam checks] in fused_optim.c). Errors name the op. */
ct_status ct_fused_adam_args(const ct_call *call, ct_adam_args *a);

/* The per-step constants, in double, as torch.optim computes them in Python (and as
 * src/optim/optimizer.c's foreach path does): the kernels convert them to their
 * arithmetic type. */
typedef struct ct_adam_consts {
    double beta1, one_minus_beta1, beta2, one_minus_beta2, eps, wd;
    double bc1;           /* 1 - beta1^step */
    double neg_step_size; /* -(lr / bc1) */
    double bc2_sqrt;      /* sqrt(1 - beta2^step) */
    double decay;         /* AdamW: 1 - lr * weight_decay */
    bool has_wd;
} ct_adam_consts;
void ct_adam_consts_of(const ct_adam_args *a, ct_adam_consts *c);

CT_BACKEND_END

#endif /* CT_META_FUSED_OPTIM_H */
