/* The CPU kernels of fused_adam and fused_adamw: one loop per tensor of the lists. */
#include <math.h>
#include <string.h>

#include "core/parallel.h"
#include "cpu/cpu_backend.h"
#include "meta/fused_optim.h"

/* Note [Fused Adam on the CPU]
 * The loop is the one of src/optim/optimizer.c's foreach path (Note [Foreach path]):
 * the same constants converted to the tensor's dtype, the same operations in the same
 * order, so the op and the optimizer's CPU path give the same bits (tests/test_optim.c
 * compares them). Before that sequence a gradient is divided by grad_scale and
 * multiplied by clip_coef when those are given; a found_inf that is not zero skips
 * the update. float32 and float64 parameters only: the CPU has no reason to keep
 * bfloat16 parameters, and the CUDA kernel is the one with master copies. */

#define FA_BLOCK 32768
#define FA_PARALLEL_MIN 131072

#define CT_DEFINE_FUSED_ADAM(T, SUF)                                                                              \
    static void adam_##SUF(T *restrict p, T *restrict gr, T *restrict m, T *restrict v, T *restrict vmax,         \
                           int64_t n, const ct_adam_consts *c, bool decoupled, bool amsgrad, bool maximize,       \
                           bool has_gs, T gs, bool has_cc, T cc) {                                                \
        const T wd = (T)c->wd, b1 = (T)c->beta1, omb1 = (T)c->one_minus_beta1, b2 = (T)c->beta2;                  \
        const T omb2 = (T)c->one_minus_beta2, bc2s = (T)c->bc2_sqrt, eps = (T)c->eps;                             \
        const T nss = (T)c->neg_step_size, decay = (T)c->decay;                                                   \
        const bool has_wd = c->has_wd && !decoupled;                                                              \
        for (int64_t j = 0; j < n; j++) {                                                                         \
            const T pj = p[j];                                                                                    \
            T gj = gr[j];                                                                                         \
            if (has_gs) {                                                                                         \
                gj = gj / gs;                                                                                     \
                gr[j] = gj;                                                                                       \
            }                                                                                                     \
            if (has_cc)                                                                                           \
                gj = gj * cc;                                                                                     \
            T d = maximize ? -gj : gj;                                                                            \
            d = has_wd ? d + wd * pj : d;                                                                         \
            const T pd = decoupled ? pj * decay : pj;                                                             \
            const T mi = m[j] * b1 + omb1 * d;                                                                    \
            const T vi = v[j] * b2 + omb2 * d * d;                                                                \
            m[j] = mi;                                                                                            \
            v[j] = vi;                                                                                            \
            T r = vi;                                                                                             \
            if (amsgrad) {                                                                                        \
                const T mx = vmax[j];                                                                             \
                r = ((vi > mx) | (vi != vi)) ? vi : mx; /* torch.maximum keeps NaN */                             \
                vmax[j] = r;                                                                                      \
            }                                                                                                     \
            const T denom = SQRT_##SUF(r) / bc2s + eps;                                                           \
            p[j] = pd + nss * (mi / denom);                                                                       \
        }                                                                                                         \
    }

#define SQRT_f32 sqrtf
#define SQRT_f64 sqrt
CT_DEFINE_FUSED_ADAM(float, f32)
CT_DEFINE_FUSED_ADAM(double, f64)

/* The one-element float32 inputs (grad_scale, found_inf, clip_coef). */
static float read_f32(const ct_tensor *t) {
    float x;
    memcpy(&x, ct_tensor_ptr(t), sizeof x);
    return x;
}

static void run_range(const ct_adam_args *a, const ct_adam_consts *c, int i, int64_t lo, int64_t hi, float gs,
                      float cc) {
    const ct_tensor *p = a->params[i];
    const bool f64 = p->dtype == CT_DTYPE_FLOAT64;
    const size_t es = f64 ? sizeof(double) : sizeof(float);
#define AT(t) ((t) ? (void *)(ct_tensor_ptr(t) + (size_t)lo * es) : NULL)
    void *pp = AT(p), *gp = AT(a->grads[i]), *mp = AT(a->exp_avgs[i]), *vp = AT(a->exp_avg_sqs[i]);
    void *xp = a->max_exp_avg_sqs ? AT(a->max_exp_avg_sqs[i]) : NULL;
#undef AT
    const bool has_gs = a->grad_scale != NULL, has_cc = a->clip_coef != NULL;
    if (f64)
        adam_f64(pp, gp, mp, vp, xp, hi - lo, c, a->decoupled, a->amsgrad, a->maximize, has_gs, (double)gs, has_cc,
                 (double)cc);
    else
        adam_f32(pp, gp, mp, vp, xp, hi - lo, c, a->decoupled, a->amsgrad, a->maximize, has_gs, gs, has_cc, cc);
}

typedef struct {
    const ct_adam_args *a;
    const ct_adam_consts *c;
    int i;
    int64_t n;
    float gs, cc;
} adam_job;

static void adam_blocks(void *ctx, int64_t b0, int64_t b1) {
    const adam_job *j = ctx;
    const int64_t lo = b0 * FA_BLOCK, hi = b1 * FA_BLOCK < j->n ? b1 * FA_BLOCK : j->n;
    run_range(j->a, j->c, j->i, lo, hi, j->gs, j->cc);
}

static ct_status cpu_kernel(ct_call *call) {
    ct_adam_args a;
    ct_status st = ct_fused_adam_args(call, &a);
    if (st)
        return st;
    const char *op = ct_op_name(call->op);
    for (int i = 0; i < a.n; i++) {
        const ct_dtype dt = a.params[i]->dtype;
        if (dt != CT_DTYPE_FLOAT32 && dt != CT_DTYPE_FLOAT64)
            return ct_error(CT_ERROR_NOT_IMPLEMENTED, op,
                            "the CPU kernel takes float32 and float64 params, got %s (params[%d])", ct_dtype_name(dt),
                            i);
    }
    if (a.found_inf && read_f32(a.found_inf) != 0)
        return CT_OK;
    const float gs = a.grad_scale ? read_f32(a.grad_scale) : 1.0f, cc = a.clip_coef ? read_f32(a.clip_coef) : 1.0f;
    ct_adam_consts c;
    ct_adam_consts_of(&a, &c);
    for (int i = 0; i < a.n; i++) {
        const int64_t n = a.params[i]->numel;
        if (n == 0)
            continue;
        if (n < FA_PARALLEL_MIN) {
            run_range(&a, &c, i, 0, n, gs, cc);
        } else {
            const int64_t nblocks = (n + FA_BLOCK - 1) / FA_BLOCK;
            /* elementwise: the result does not depend on how blocks are shared out */
            adam_job j = {&a, &c, i, n, gs, cc};
            ct_parallel_range(nblocks, n, 0, adam_blocks, &j);
        }
    }
    /* Note [No-grad step] of src/optim/optimizer.c: every tensor written gets a new version */
    for (int i = 0; i < call->nlist; i++)
        if (i < a.n || i >= 2 * a.n || a.grad_scale)
            ct_tensor_bump_version((ct_tensor *)call->list[i]);
    return CT_OK;
}

ct_status ct_cpu_fused_adam(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return cpu_kernel(call);
}

ct_status ct_cpu_fused_adamw(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return cpu_kernel(call);
}
