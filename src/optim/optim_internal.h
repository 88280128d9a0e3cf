/* What the LR schedulers need from an optimizer beyond the public API. */
#ifndef CT_OPTIM_INTERNAL_H
#define CT_OPTIM_INTERNAL_H

#include "ctorch/optim.h"

/* PyTorch keeps "initial_lr" in each param group once a scheduler is attached. */
bool ct_optimizer_has_initial_lr(const ct_optimizer *opt, int group);
double ct_optimizer_initial_lr(const ct_optimizer *opt, int group);
void ct_optimizer_set_initial_lr(ct_optimizer *opt, int group, double lr);
/* Schedulers set lr and momentum without the constructor's checks, as torch's do.
 * put_lr also writes the group's device lr, when it has one (Note [Device learning
 * rate] in optimizer.c): that fill may fail. */
ct_status ct_optimizer_put_lr(ct_optimizer *opt, int group, double lr);
/* OneCycleLR's momentum: beta1 for Adam/AdamW, momentum for SGD/RMSprop. */
bool ct_optimizer_has_momentum(const ct_optimizer *opt);
void ct_optimizer_put_momentum(ct_optimizer *opt, int group, double m);
/* Counts ct_optimizer_step calls (PyTorch's optimizer._step_count). */
int64_t ct_optimizer_step_count(const ct_optimizer *opt);

/* clip_grad_norm_ for ct_optimizer_step_clipped (clip.c). When every .grad of params is
 * on one device and norm_type is finite and > 0: *total_norm (float64, 0-d) and
 * *coef = min(1, max_norm / (total + 1e-6)) (float32, 0-d) on that device, the
 * gradients untouched and no number read back from the device. Otherwise the gradients are
 * clipped as ct_clip_grad_norm_ does, *total_norm is a CPU tensor and *coef NULL.
 * Both owned by the innermost scope; NULL when no parameter has a gradient. */
ct_status ct_optim_clip_coef(ct_tensor *const *params, int n, double max_norm, double norm_type,
                             ct_tensor **total_norm, ct_tensor **coef);

#endif /* CT_OPTIM_INTERNAL_H */
