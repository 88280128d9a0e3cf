/* The fused Adam kernel's table, shared by its host part (fused_optim_cuda.c) and the
 * kernel (fused_optim.cu). Plain C types only, as cuda_rt.h. */
#ifndef CT_CUDA_FUSED_OPTIM_H
#define CT_CUDA_FUSED_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "ctorch/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Note [Fused Adam launch]
 * The table travels as the kernel's argument (CUDA 12.1 and later take up to 32 KiB
 * of arguments on Volta and newer), so a step copies nothing to the device and waits
 * for nothing: a table in device memory would need a host-to-device copy, which
 * ct_cuda_memcpy follows with a stream synchronize. FA_MAX_TENSORS tensors (about 17
 * KiB) fit one launch; a longer list takes one launch per FA_MAX_TENSORS. Each block
 * takes FA_CHUNK elements of one tensor: first[i] is tensor i's first block. */
#define FA_MAX_TENSORS 256
#define FA_CHUNK 16384
#define FA_THREADS 256

typedef struct ct_fa_table {
    int n;
    void *p[FA_MAX_TENSORS], *g[FA_MAX_TENSORS], *m[FA_MAX_TENSORS], *v[FA_MAX_TENSORS];
    void *vmax[FA_MAX_TENSORS], *master[FA_MAX_TENSORS];
    int64_t numel[FA_MAX_TENSORS];
    int32_t first[FA_MAX_TENSORS + 1];
    uint8_t pdt[FA_MAX_TENSORS]; /* params' (and grads') dtype */
    uint8_t sdt[FA_MAX_TENSORS]; /* the states' dtype */
} ct_fa_table;

/* Constants in float32, from ct_adam_consts (src/meta/fused_optim.h). */
typedef struct ct_fa_consts {
    float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, wd, neg_step_size, bc2_sqrt, decay;
    bool has_wd, decoupled, amsgrad, maximize;
    /* for the constants of a device step or learning rate: bc1 is the host step's */
    double lr, beta1_d, beta2_d, weight_decay_d, bc1;
} ct_fa_consts;

/* One launch over table (t->first[t->n] blocks) on device's current stream. grad_scale,
 * found_inf and clip_coef: one float32 each on the device, or NULL. step_t: the step
 * number (one double on the device; Note [Device step] in src/meta/fused_optim.c), from
 * which the kernel computes neg_step_size and bc2_sqrt, or NULL (c's are used). lr_t:
 * the learning rate (one double on the device), from which the kernel computes
 * neg_step_size and decay, or NULL (c->lr and c's constants are used). */
ct_status ct_cuda_fused_adam_run(const ct_fa_table *t, const ct_fa_consts *c, const float *grad_scale,
                                 const float *found_inf, const float *clip_coef, const double *step_t,
                                 const double *lr_t, int device, const char *op);

#ifdef __cplusplus
}
#endif

#endif /* CT_CUDA_FUSED_OPTIM_H */
