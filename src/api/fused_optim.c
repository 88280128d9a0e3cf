/* The fused optimizer ops' public wrappers (ct_fused_adam_, ct_fused_adamw_): each
 * checks the list lengths and packs one ct_call (the layout is the op's schema in
 * include/ctorch/ops.def); the other checks are src/meta/fused_optim.c's. */
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "dispatch/dispatch_internal.h"

static ct_status fused_adam(ct_op opn, ct_tensor *const *params, int nparams, ct_tensor *const *grads, int ngrads,
                            ct_tensor *const *exp_avgs, int nexp_avgs, ct_tensor *const *exp_avg_sqs, int nexp_avg_sqs,
                            ct_tensor *const *max_exp_avg_sqs, int nmax, ct_tensor *const *master, int nmaster,
                            int64_t step, double lr, double beta1, double beta2, double weight_decay, double eps,
                            bool amsgrad, bool maximize, const ct_tensor *grad_scale, const ct_tensor *found_inf,
                            const ct_tensor *clip_coef, const ct_tensor *step_t, const ct_tensor *lr_t) {
    const char *op = ct_op_name(opn);
    ct_tensor *const *lists[6] = {params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, master};
    const int lens[6] = {nparams, ngrads, nexp_avgs, nexp_avg_sqs, nmax, nmaster};
    static const char *const names[6] = {"params", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs",
                                         "master_params"};
    for (int k = 0; k < 6; k++) {
        if (lens[k] < 0)
            return ct_error(CT_ERROR_VALUE, op, "the length of %s must be >= 0, got %d", names[k], lens[k]);
        if (lens[k] > 0 && !lists[k])
            return ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", names[k]);
    }
    if (nparams == 0)
        return ct_error(CT_ERROR_VALUE, op, "Tensor list must have at least one tensor.");
    for (int k = 1; k < 4; k++)
        if (lens[k] != nparams)
            return ct_error(CT_ERROR_VALUE, op, "Tensor lists must have the same number of tensors, got %d and %d",
                            nparams, lens[k]);
    if (amsgrad && nmax != nparams)
        return ct_error(CT_ERROR_VALUE, op, "amsgrad needs one max_exp_avg_sq per param: got %d for %d params", nmax,
                        nparams);
    if (!amsgrad && nmax != 0)
        return ct_error(CT_ERROR_VALUE, op, "max_exp_avg_sqs given without amsgrad");
    if (nmaster != 0 && nmaster != nparams)
        return ct_error(CT_ERROR_VALUE, op, "Tensor lists must have the same number of tensors, got %d and %d",
                        nparams, nmaster);
    const int nlists = 4 + (amsgrad ? 1 : 0) + (nmaster ? 1 : 0);
    if ((int64_t)nparams * nlists > 0x7fffffff)
        return ct_error(CT_ERROR_VALUE, op, "too many tensors (%d params)", nparams);
    const ct_tensor **all = ct_xmalloc(op, sizeof(*all) * (size_t)nparams * (size_t)nlists);
    if (!all)
        return CT_ERROR_OUT_OF_MEMORY;
    int at = 0;
    for (int k = 0; k < 6; k++)
        if (lens[k] > 0)
            for (int i = 0; i < nparams; i++)
                all[at++] = lists[k][i];
    for (int i = 0; i < at; i++)
        if (!all[i]) {
            int k = 0, left = i;
            while (k < 6 && (lens[k] == 0 || left >= lens[k])) {
                left -= lens[k];
                k++;
            }
            free(all);
            return ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s[%d] is NULL", k < 6 ? names[k] : "tensors", left);
        }
    ct_call c = {.op = opn, .nin = 5, .in = {grad_scale, found_inf, clip_coef, step_t, lr_t}, .nints = 5,
                 .nscalars = 5, .dtype = CT_DTYPE_UNDEFINED, .list = all, .nlist = at};
    c.ints[0] = nparams;
    c.ints[1] = amsgrad;
    c.ints[2] = maximize;
    c.ints[3] = nmaster != 0;
    c.ints[4] = step;
    c.s[0] = ct_scalar_float(lr);
    c.s[1] = ct_scalar_float(beta1);
    c.s[2] = ct_scalar_float(beta2);
    c.s[3] = ct_scalar_float(weight_decay);
    c.s[4] = ct_scalar_float(eps);
    ct_status st = ct_dispatch(&c);
    ct_call_clear_outputs(&c);
    free(all);
    return st;
}

ct_status ct_fused_adam_(ct_tensor *const *params, int nparams, ct_tensor *const *grads, int ngrads,
                         ct_tensor *const *exp_avgs, int nexp_avgs, ct_tensor *const *exp_avg_sqs, int nexp_avg_sqs,
                         ct_tensor *const *max_exp_avg_sqs, int nmax_exp_avg_sqs, ct_tensor *const *master_params,
                         int nmaster_params, int64_t step, double lr, double beta1, double beta2, double weight_decay,
                         double eps, bool amsgrad, bool maximize, const ct_tensor *grad_scale,
                         const ct_tensor *found_inf, const ct_tensor *clip_coef) {
    return fused_adam(CT_OP_fused_adam, params, nparams, grads, ngrads, exp_avgs, nexp_avgs, exp_avg_sqs,
                      nexp_avg_sqs, max_exp_avg_sqs, nmax_exp_avg_sqs, master_params, nmaster_params, step, lr, beta1,
                      beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, clip_coef, NULL, NULL);
}

ct_status ct_fused_adamw_(ct_tensor *const *params, int nparams, ct_tensor *const *grads, int ngrads,
                          ct_tensor *const *exp_avgs, int nexp_avgs, ct_tensor *const *exp_avg_sqs, int nexp_avg_sqs,
                          ct_tensor *const *max_exp_avg_sqs, int nmax_exp_avg_sqs, ct_tensor *const *master_params,
                          int nmaster_params, int64_t step, double lr, double beta1, double beta2, double weight_decay,
                          double eps, bool amsgrad, bool maximize, const ct_tensor *grad_scale,
                          const ct_tensor *found_inf, const ct_tensor *clip_coef) {
    return fused_adam(CT_OP_fused_adamw, params, nparams, grads, ngrads, exp_avgs, nexp_avgs, exp_avg_sqs,
                      nexp_avg_sqs, max_exp_avg_sqs, nmax_exp_avg_sqs, master_params, nmaster_params, step, lr, beta1,
                      beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, clip_coef, NULL, NULL);
}

ct_status ct_fused_adam_capturable_(bool adamw, ct_tensor *const *params, int nparams, ct_tensor *const *grads,
                                    int ngrads, ct_tensor *const *exp_avgs, int nexp_avgs,
                                    ct_tensor *const *exp_avg_sqs, int nexp_avg_sqs,
                                    ct_tensor *const *max_exp_avg_sqs, int nmax_exp_avg_sqs,
                                    ct_tensor *const *master_params, int nmaster_params, const ct_tensor *step_t,
                                    const ct_tensor *lr_t, double lr, double beta1, double beta2,
                                    double weight_decay, double eps, bool amsgrad, bool maximize,
                                    const ct_tensor *grad_scale, const ct_tensor *found_inf,
                                    const ct_tensor *clip_coef) {
    ct_op opn = adamw ? CT_OP_fused_adamw : CT_OP_fused_adam;
    if (!step_t)
        return ct_error(CT_ERROR_NULL_ARGUMENT, ct_op_name(opn), "step_t is NULL");
    /* the step argument is not read: step_t holds it (Note [Device step]); nor is lr
     * when lr_t is given */
    return fused_adam(opn, params, nparams, grads, ngrads, exp_avgs, nexp_avgs, exp_avg_sqs, nexp_avg_sqs,
                      max_exp_avg_sqs, nmax_exp_avg_sqs, master_params, nmaster_params, 1, lr, beta1, beta2,
                      weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, clip_coef, step_t, lr_t);
}
