/* ctorch optim: optimizers, gradient clipping and learning-rate schedulers.
 *
 *   ct_optim_options o = ct_adamw_options(1e-3);
 *   ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_ADAMW, params, nparams, &o);
 *   for (...) {
 *       ct_optimizer_zero_grad(opt, true);
 *       ... backward fills each parameter's .grad ...
 *       ct_clip_grad_norm_(params, nparams, 1.0, 2.0, false, NULL);
 *       ct_optimizer_step(opt);
 *   }
 *   ct_optimizer_free(opt);
 *
 * Semantics, defaults, state-dict layout and error wording follow torch.optim
 * (PyTorch 1.13); the departures are listed in docs/optim.md. */
#ifndef CTORCH_OPTIM_H
#define CTORCH_OPTIM_H

#include "core.h"
#include "io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ optimizers */

typedef enum ct_optim_kind {
    CT_OPTIM_SGD = 0,
    CT_OPTIM_ADAM,
    CT_OPTIM_ADAMW,
    CT_OPTIM_RMSPROP,
    CT_OPTIM_ADAGRAD,
} ct_optim_kind;

/* Hyperparameters of one parameter group. Every optimizer reads the fields it knows
 * and ignores the others; start from ct_<name>_options(lr), which fills PyTorch's
 * defaults, and change what you need. */
typedef struct ct_optim_options {
    double lr;
    double weight_decay;
    double momentum;  /* SGD, RMSprop */
    double dampening; /* SGD */
    bool nesterov;    /* SGD */
    double beta1, beta2; /* Adam, AdamW ("betas") */
    double eps;          /* Adam, AdamW, RMSprop, Adagrad */
    bool amsgrad;        /* Adam, AdamW */
    double alpha;        /* RMSprop smoothing constant */
    bool centered;       /* RMSprop */
    double lr_decay;     /* Adagrad */
    double initial_accumulator_value; /* Adagrad */
    bool maximize;
    /* Multi-tensor path: -1 default (on), 0 the one-op-per-step path, 1 on. See
     * Note [Foreach path] in src/optim/optimizer.c. */
    int foreach;
    /* Adam and AdamW: the fused kernel (one launch for every parameter of a device and
     * dtype: the op fused_adam/fused_adamw). -1 default: on for CUDA parameters of
     * dtype float32, bfloat16 or float16; 0 off; 1 on for every parameter it can take
     * (CPU float32/float64 too). fused and foreach can't both be 1. docs/optim.md. */
    int fused;
    /* Fused Adam/AdamW with bfloat16/float16 parameters: keep a float32 copy of each
     * parameter (and float32 exp_avg/exp_avg_sq); the kernel updates the copy and
     * writes its rounded value to the parameter. Not in the state dict. */
    bool master_weights;
    /* Fused Adam/AdamW: keep the step number in a float64 tensor on the parameters'
     * device, which each step increments with a kernel, so that a CUDA graph capturing
     * the step replays with the right bias corrections (docs/cuda-graphs.md). The
     * learning rate of a group with CUDA parameters lives in such a tensor too, which
     * ct_optimizer_set_lr, ct_optimizer_set_options and the schedulers write on the
     * current stream, so a replay uses the lr set before it. The other options stay
     * constants of a captured graph. */
    int32_t capturable;
    int32_t reserved[5]; /* zero; room for options without an ABI break */
} ct_optim_options;

CT_API ct_optim_options ct_sgd_options(double lr);     /* momentum 0, dampening 0, ... */
CT_API ct_optim_options ct_adam_options(double lr);    /* betas (0.9, 0.999), eps 1e-8 */
CT_API ct_optim_options ct_adamw_options(double lr);   /* as Adam, weight_decay 1e-2 */
CT_API ct_optim_options ct_rmsprop_options(double lr); /* alpha 0.99, eps 1e-8 */
CT_API ct_optim_options ct_adagrad_options(double lr); /* eps 1e-10 */

typedef struct ct_optimizer ct_optimizer;

/* An optimizer over params[0..n) (one group with options o; o NULL means the kind's
 * defaults with lr 1e-3, SGD needs an explicit lr). The optimizer holds a reference
 * to every parameter (ct_retain) until ct_optimizer_free. Parameters must be
 * floating-point tensors; a tensor may appear in one group only. */
CT_API ct_optimizer *ct_optimizer_new(ct_optim_kind kind, ct_tensor *const *params, int n,
                                      const ct_optim_options *o);
CT_API void ct_optimizer_free(ct_optimizer *opt);
/* add_param_group: o NULL uses the options the optimizer was made with. */
CT_API ct_status ct_optimizer_add_param_group(ct_optimizer *opt, ct_tensor *const *params, int n,
                                              const ct_optim_options *o);

/* One update of every parameter that has a .grad, in place under no-grad semantics
 * (each parameter's version counter is bumped; autograd does not record it). */
CT_API ct_status ct_optimizer_step(ct_optimizer *opt);
/* clip_grad_norm_ and step in one: the total norm (norm_type p > 0, or INFINITY) of
 * every .grad of the optimizer, and one update that follows each gradient times
 * min(1, max_norm / (total + 1e-6)). On the fused path the factor is an input of the
 * kernel (a device tensor: no number is read back, and the gradients are left as
 * they are); elsewhere the gradients are scaled first. *total_norm, when not NULL,
 * gets the total norm as a float64 0-d tensor on the gradients' device (owned by the
 * innermost scope; NULL when no parameter has a gradient). */
CT_API ct_status ct_optimizer_step_clipped(ct_optimizer *opt, double max_norm, double norm_type,
                                           ct_tensor **total_norm);
/* Clears every parameter's .grad: set_to_none drops it, otherwise it is zeroed. */
CT_API ct_status ct_optimizer_zero_grad(ct_optimizer *opt, bool set_to_none);

/* Properties; a NULL optimizer gives -1 (kind, groups) or "" (name), no error. */
CT_API ct_optim_kind ct_optimizer_kind(const ct_optimizer *opt);
CT_API const char *ct_optimizer_name(const ct_optimizer *opt); /* "SGD", "AdamW", ... */
CT_API int ct_optimizer_num_groups(const ct_optimizer *opt);
/* Number of parameters of a group, and the i-th (borrowed). */
CT_API int ct_optimizer_group_size(const ct_optimizer *opt, int group);
CT_API ct_tensor *ct_optimizer_group_param(const ct_optimizer *opt, int group, int i);
/* A group's hyperparameters; set validates them as the constructor does. */
CT_API ct_status ct_optimizer_get_options(const ct_optimizer *opt, int group, ct_optim_options *out);
CT_API ct_status ct_optimizer_set_options(ct_optimizer *opt, int group, const ct_optim_options *o);
/* The learning rate of a group (NaN and an error for a bad group), and setting it.
 * With the capturable option the new rate is also written, on the current stream,
 * into the group's device copy, which a captured step reads at each replay: set it
 * between replays, not while a capture is under way (the write would be captured). */
CT_API double ct_optimizer_get_lr(const ct_optimizer *opt, int group);
CT_API ct_status ct_optimizer_set_lr(ct_optimizer *opt, int group, double lr);

/* state_dict as torch.optim.Optimizer.state_dict lays it out:
 *   {"state": {0: {"step": tensor, "exp_avg": tensor, ...}, ...},
 *    "param_groups": [{"lr": ..., "betas": (b1, b2), ..., "params": [0, 1]}, ...]}
 * Parameters are numbered across groups in order. State tensors are copies. */
CT_API ct_value *ct_optimizer_state_dict(const ct_optimizer *opt);
/* Restores the state and the group hyperparameters. The dict must describe the same
 * group sizes; state tensors must match the parameters' shapes. The optimizer keeps
 * copies (converted to each parameter's dtype), never the dict's tensors. */
CT_API ct_status ct_optimizer_load_state_dict(ct_optimizer *opt, const ct_value *state_dict);

/* ------------------------------------------------------------ gradient clipping */

/* Scales every .grad so that their joint norm is at most max_norm. norm_type is p
 * (any positive value) or INFINITY. error_if_nonfinite makes a NaN/inf total an error.
 * The total norm (before clipping) goes to *total_norm when it is not NULL. Parameters
 * without a .grad are skipped. */
CT_API ct_status ct_clip_grad_norm_(ct_tensor *const *params, int n, double max_norm, double norm_type,
                                    bool error_if_nonfinite, double *total_norm);
/* clip_grad_norm_ without reading the norm back: the total norm stays a tensor
 * (float64, 0-d, on the gradients' device, owned by the innermost scope) and the
 * gradients are multiplied by the clamped factor as a tensor, as PyTorch does. Needs
 * every .grad on one device; *total_norm is NULL when no parameter has a gradient.
 * ct_clip_grad_norm_ runs this path on CUDA gradients when it needs no number back
 * (total_norm NULL, error_if_nonfinite false). */
CT_API ct_status ct_clip_grad_norm_tensor_(ct_tensor *const *params, int n, double max_norm, double norm_type,
                                           ct_tensor **total_norm);
/* Clamps every .grad into [-clip_value, clip_value]. */
CT_API ct_status ct_clip_grad_value_(ct_tensor *const *params, int n, double clip_value);

/* ------------------------------------------------------------ fused optimizer ops */

/* torch._fused_adam_ / torch._fused_adamw_: one Adam (AdamW: decoupled weight decay)
 * update of every tensor of the lists, in place, as torch.optim's single-tensor code
 * computes it for one step number `step` (>= 1, the count after this step). The lists
 * have nparams entries each; max_exp_avg_sqs only with amsgrad (else NULL, 0) and
 * master_params (float32 copies of bfloat16/float16 params; else NULL, 0) optional.
 * Every tensor on one device, contiguous; params float32, float64 (CPU), bfloat16 or
 * float16; grads the params' dtype; the states the params' dtype, or float32 with
 * master copies. grad_scale (the gradients are divided by it, and the unscaled
 * gradients written back), found_inf (nonzero: nothing is updated) and clip_coef (the
 * gradients are multiplied by it for the update only) are optional one-element float32
 * tensors on the same device. CUDA: one launch for all tensors, float32 arithmetic. */
CT_API ct_status ct_fused_adam_(ct_tensor *const *params, int nparams, ct_tensor *const *grads, int ngrads,
                                ct_tensor *const *exp_avgs, int nexp_avgs, ct_tensor *const *exp_avg_sqs,
                                int nexp_avg_sqs, ct_tensor *const *max_exp_avg_sqs, int nmax_exp_avg_sqs,
                                ct_tensor *const *master_params, int nmaster_params, int64_t step, double lr,
                                double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                                bool maximize, const ct_tensor *grad_scale, const ct_tensor *found_inf,
                                const ct_tensor *clip_coef);
CT_API ct_status ct_fused_adamw_(ct_tensor *const *params, int nparams, ct_tensor *const *grads, int ngrads,
                                 ct_tensor *const *exp_avgs, int nexp_avgs, ct_tensor *const *exp_avg_sqs,
                                 int nexp_avg_sqs, ct_tensor *const *max_exp_avg_sqs, int nmax_exp_avg_sqs,
                                 ct_tensor *const *master_params, int nmaster_params, int64_t step, double lr,
                                 double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                                 bool maximize, const ct_tensor *grad_scale, const ct_tensor *found_inf,
                                 const ct_tensor *clip_coef);
/* The same (AdamW when adamw) with the step number read from step_t, a one-element
 * float64 tensor on the params' device, instead of passed by value: a CUDA graph that
 * captured the update (docs/cuda-graphs.md) reads the number the tensor holds at each
 * replay. lr_t, when not NULL, does the same for the learning rate: a one-element
 * float64 tensor on the params' device holding a finite lr >= 0, read in place of lr
 * (which is then not used), with the bits of that lr passed by value. The optimizers'
 * capturable option uses both. */
CT_API ct_status ct_fused_adam_capturable_(bool adamw, ct_tensor *const *params, int nparams,
                                           ct_tensor *const *grads, int ngrads, ct_tensor *const *exp_avgs,
                                           int nexp_avgs, ct_tensor *const *exp_avg_sqs, int nexp_avg_sqs,
                                           ct_tensor *const *max_exp_avg_sqs, int nmax_exp_avg_sqs,
                                           ct_tensor *const *master_params, int nmaster_params,
                                           const ct_tensor *step_t, const ct_tensor *lr_t, double lr,
                                           double beta1, double beta2, double weight_decay, double eps,
                                           bool amsgrad, bool maximize, const ct_tensor *grad_scale,
                                           const ct_tensor *found_inf, const ct_tensor *clip_coef);

/* ------------------------------------------------------------ LR schedulers */

/* A scheduler changes the learning rate of every group of one optimizer. Call
 * ct_lr_scheduler_step once after each ct_optimizer_step (or each epoch), as in
 * PyTorch. The optimizer must outlive the scheduler. Making a scheduler performs
 * PyTorch's initial step (the group lr becomes the schedule's value at step 0). */
typedef struct ct_lr_scheduler ct_lr_scheduler;

/* lr = initial_lr * gamma ** (epoch // step_size) */
CT_API ct_lr_scheduler *ct_steplr_new(ct_optimizer *opt, int64_t step_size, double gamma);
/* lr = initial_lr * gamma ** (number of milestones <= epoch); milestones may repeat. */
CT_API ct_lr_scheduler *ct_multisteplr_new(ct_optimizer *opt, const int64_t *milestones, int nmilestones,
                                           double gamma);
CT_API ct_lr_scheduler *ct_exponentiallr_new(ct_optimizer *opt, double gamma);
CT_API ct_lr_scheduler *ct_cosineannealinglr_new(ct_optimizer *opt, int64_t t_max, double eta_min);
/* Factors in [0, 1] (start_factor > 0); PyTorch's defaults are 1/3, 1.0, 5. */
CT_API ct_lr_scheduler *ct_linearlr_new(ct_optimizer *opt, double start_factor, double end_factor,
                                        int64_t total_iters);
/* lr = initial_lr * fn(epoch, user_data) */
typedef double (*ct_lr_lambda_fn)(int64_t epoch, void *user_data);
CT_API ct_lr_scheduler *ct_lambdalr_new(ct_optimizer *opt, ct_lr_lambda_fn fn, void *user_data);
/* Runs schedulers[i] from milestones[i-1] on. The schedulers must be built on opt,
 * in order, right before this call; the SequentialLR takes ownership of them (also on
 * error). */
CT_API ct_lr_scheduler *ct_sequentiallr_new(ct_optimizer *opt, ct_lr_scheduler *const *schedulers, int n,
                                            const int64_t *milestones, int nmilestones);

typedef enum ct_anneal_strategy { CT_ANNEAL_COS = 0, CT_ANNEAL_LINEAR = 1 } ct_anneal_strategy;
typedef struct ct_onecycle_options {
    double max_lr;
    int64_t total_steps;
    double pct_start;        /* 0.3 */
    int anneal_strategy;     /* ct_anneal_strategy, CT_ANNEAL_COS */
    bool cycle_momentum;     /* true: momentum (SGD, RMSprop) or beta1 (Adam, AdamW) */
    double base_momentum;    /* 0.85 */
    double max_momentum;     /* 0.95 */
    double div_factor;       /* 25 */
    double final_div_factor; /* 1e4 */
    bool three_phase;
    int32_t reserved[8];
} ct_onecycle_options;
CT_API ct_onecycle_options ct_onecycle_defaults(double max_lr, int64_t total_steps);
CT_API ct_lr_scheduler *ct_onecyclelr_new(ct_optimizer *opt, const ct_onecycle_options *o);

typedef struct ct_plateau_options {
    bool mode_max;       /* false: 'min' (a lower metric is better) */
    double factor;       /* 0.1, must be < 1 */
    int64_t patience;    /* 10 */
    double threshold;    /* 1e-4 */
    bool threshold_abs;  /* false: 'rel' */
    int64_t cooldown;    /* 0 */
    double min_lr;       /* 0, for every group */
    double eps;          /* 1e-8 */
    int32_t reserved[8];
} ct_plateau_options;
CT_API ct_plateau_options ct_plateau_defaults(void);
/* Use ct_lr_scheduler_step_metric with it. */
CT_API ct_lr_scheduler *ct_reducelronplateau_new(ct_optimizer *opt, const ct_plateau_options *o);

CT_API void ct_lr_scheduler_free(ct_lr_scheduler *s);
/* "StepLR", "OneCycleLR", ... */
CT_API const char *ct_lr_scheduler_name(const ct_lr_scheduler *s);
CT_API ct_status ct_lr_scheduler_step(ct_lr_scheduler *s);
/* ReduceLROnPlateau's step(metrics); other schedulers refuse it. */
CT_API ct_status ct_lr_scheduler_step_metric(ct_lr_scheduler *s, double metric);
/* The lr the last step set for a group (get_last_lr()[group]); NaN on error. */
CT_API double ct_lr_scheduler_get_last_lr(const ct_lr_scheduler *s, int group);
CT_API int64_t ct_lr_scheduler_last_epoch(const ct_lr_scheduler *s);
/* The counters and values a schedule depends on (its configuration included), as a
 * dict; loading it into a scheduler of the same kind resumes the schedule. */
CT_API ct_value *ct_lr_scheduler_state_dict(const ct_lr_scheduler *s);
CT_API ct_status ct_lr_scheduler_load_state_dict(ct_lr_scheduler *s, const ct_value *state_dict);

/* ------------------------------------------------------------ gradient scaling */

/* torch.amp.GradScaler: multiplies the loss by a scale so that small float16
 * gradients do not flush to zero, divides the gradients by it before the step, skips
 * the step when a gradient is inf or NaN, and adapts the scale (docs/amp.md):
 *
 *   ct_grad_scaler *sc = ct_grad_scaler_new(NULL);
 *   for (...) {
 *       ct_optimizer_zero_grad(opt, true);
 *       ct_autocast_begin(CT_DEVICE_CUDA, CT_F16);
 *       ct_tensor *loss = ...;
 *       ct_autocast_end();
 *       ct_backward(ct_grad_scaler_scale(sc, loss), NULL, false, false);
 *       ct_grad_scaler_unscale_(sc, opt);            (optional: to clip real gradients)
 *       ct_grad_scaler_step(sc, opt);
 *       ct_grad_scaler_update(sc);
 *   }
 *   ct_grad_scaler_free(sc); */
typedef struct ct_grad_scaler_options {
    double init_scale;       /* 65536 (2**16) */
    double growth_factor;    /* 2, must be > 1 */
    double backoff_factor;   /* 0.5, must be < 1 */
    int64_t growth_interval; /* 2000 steps without inf/NaN before the scale grows */
    bool enabled;            /* true; false makes every call a pass-through */
    int32_t reserved[8];     /* zero; room for options without an ABI break */
} ct_grad_scaler_options;
CT_API ct_grad_scaler_options ct_grad_scaler_defaults(void);

typedef struct ct_grad_scaler ct_grad_scaler;

/* o NULL: the defaults. */
CT_API ct_grad_scaler *ct_grad_scaler_new(const ct_grad_scaler_options *o);
CT_API void ct_grad_scaler_free(ct_grad_scaler *s);
CT_API bool ct_grad_scaler_is_enabled(const ct_grad_scaler *s);
/* loss * scale, in loss's dtype (a new tensor owned by the innermost scope); a
 * disabled scaler gives loss itself (a new reference). */
CT_API ct_tensor *ct_grad_scaler_scale(ct_grad_scaler *s, const ct_tensor *loss);
/* Divides the .grad of every parameter of opt by the scale, in place, and records
 * whether any was inf or NaN. Once per optimizer between two updates, before step. */
CT_API ct_status ct_grad_scaler_unscale_(ct_grad_scaler *s, ct_optimizer *opt);
/* Unscales (unless done) and runs ct_optimizer_step unless a gradient was inf or NaN.
 * Reads the inf check back from the device: the one synchronisation of an iteration.
 * Between it and ct_grad_scaler_update, ct_grad_scaler_stepped says whether the
 * optimizer stepped (false when the step was skipped). */
CT_API ct_status ct_grad_scaler_step(ct_grad_scaler *s, ct_optimizer *opt);
CT_API bool ct_grad_scaler_stepped(const ct_grad_scaler *s, const ct_optimizer *opt);
/* The end of an iteration: the scale times backoff_factor if any step of it found inf
 * or NaN (the growth count restarts), else one more good step, and after
 * growth_interval of them the scale times growth_factor (kept when that is finite). */
CT_API ct_status ct_grad_scaler_update(ct_grad_scaler *s);
/* update(new_scale): sets the scale instead. */
CT_API ct_status ct_grad_scaler_update_to(ct_grad_scaler *s, double new_scale);
/* The current scale (init_scale before the first scale call; 1 when disabled). */
CT_API double ct_grad_scaler_get_scale(const ct_grad_scaler *s);
CT_API int64_t ct_grad_scaler_growth_tracker(const ct_grad_scaler *s);
/* {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}
 * as GradScaler.state_dict(); an empty dict when disabled. */
CT_API ct_value *ct_grad_scaler_state_dict(const ct_grad_scaler *s);
CT_API ct_status ct_grad_scaler_load_state_dict(ct_grad_scaler *s, const ct_value *state_dict);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_OPTIM_H */
