/* Optimizers: SGD, Adam, AdamW, RMSprop, Adagrad. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "optim/grad_access.h"
#include "optim/optim_internal.h"

/* Note [Foreach path]
 * PyTorch's _foreach/fused optimizers exist because one op dispatch per elementwise
 * step (mul_, add_, addcmul_, sqrt, add_, addcdiv_: six passes over memory for Adam)
 * costs more than the arithmetic. The foreach path here is one C loop per parameter
 * that reads the parameter, its gradient and its state once and writes them once,
 * for contiguous float32/float64 CPU tensors. Each element follows the same sequence
 * of roundings as PyTorch's single-tensor code (scalars are converted to the tensor's
 * dtype as PyTorch's kernels do, and addcmul is value * a * b left to right), so both
 * paths agree with torch.optim to the last bits or nearly. The plain path (foreach=0,
 * and any parameter the loop cannot take: other dtypes, strides, devices) is written
 * with public ops, one per step, and is kept as the reference the tests compare
 * against. */

/* Note [No-grad step]
 * An optimizer step must not be recorded by autograd and must bump the version of
 * every tensor it writes, so that a graph that saved a parameter notices the change.
 * The foreach loop writes through raw pointers (ct_tensor_data) and bumps versions
 * itself (ct_tensor_bump_version); the plain path uses in-place ops, which bump them. */

/* Slot 3 is the float32 master copy of a bfloat16/float16 parameter on the fused path
 * (Note [Fused step]); it has no name, so state dicts leave it out. */
#define CT_OPTIM_MAX_SLOTS 4
#define CT_OPTIM_MASTER 3

typedef struct param_state {
    bool initialized;
    double step; /* PyTorch keeps it as a float tensor; the counts stay exact */
    ct_tensor *slot[CT_OPTIM_MAX_SLOTS];
} param_state;

typedef struct param_group {
    ct_optim_options o;
    int n;
    ct_tensor **params;
    param_state *state;
    bool has_initial_lr;
    double initial_lr;
    /* Note [Capturable step]: the group's step number on the device, and the value it
     * holds (the host's count of the steps it went through) */
    ct_tensor *step_t;
    int64_t step_t_value;
    /* Note [Device learning rate]: o.lr on step_t's device (float64, one element) */
    ct_tensor *lr_t;
} param_group;

struct ct_optimizer {
    ct_optim_kind kind;
    ct_optim_options defaults;
    int ngroups;
    param_group *groups;
    int64_t step_count;
};

static const char *const kind_names[] = {"SGD", "Adam", "AdamW", "RMSprop", "Adagrad"};

/* State slot names, per kind, as torch.optim names them. */
static const char *const slot_names[][CT_OPTIM_MAX_SLOTS] = {
    {"momentum_buffer", NULL, NULL},
    {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    {"square_avg", "momentum_buffer", "grad_avg"},
    {"sum", NULL, NULL},
};

/* Same number of dims and same sizes. */
static bool same_shape(const ct_tensor *a, const ct_tensor *b) {
    const int nd = ct_tensor_dim(a);
    return nd == ct_tensor_dim(b) && memcmp(ct_tensor_shape(a), ct_tensor_shape(b), sizeof(int64_t) * (size_t)nd) == 0;
}

static bool kind_valid(int kind) {
    return kind >= CT_OPTIM_SGD && kind <= CT_OPTIM_ADAGRAD;
}

/* ------------------------------------------------------------ options */

static ct_optim_options base_options(double lr) {
    ct_optim_options o;
    memset(&o, 0, sizeof o);
    o.lr = lr;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.eps = 1e-8;
    o.alpha = 0.99;
    o.foreach = -1;
    o.fused = -1;
    return o;
}

ct_optim_options ct_sgd_options(double lr) {
    return base_options(lr);
}
ct_optim_options ct_adam_options(double lr) {
    return base_options(lr);
}
ct_optim_options ct_adamw_options(double lr) {
    ct_optim_options o = base_options(lr);
    o.weight_decay = 1e-2;
    return o;
}
ct_optim_options ct_rmsprop_options(double lr) {
    return base_options(lr);
}
ct_optim_options ct_adagrad_options(double lr) {
    ct_optim_options o = base_options(lr);
    o.eps = 1e-10;
    return o;
}

static ct_optim_options default_options(ct_optim_kind kind) {
    switch (kind) {
    case CT_OPTIM_ADAMW:
        return ct_adamw_options(1e-3);
    case CT_OPTIM_RMSPROP:
        return ct_rmsprop_options(1e-2);
    case CT_OPTIM_ADAGRAD:
        return ct_adagrad_options(1e-2);
    default:
        return ct_adam_options(1e-3);
    }
}

/* torch.optim's constructor checks, with its messages. `not 0.0 <= x` also refuses
 * NaN, so these are written the same way. */
static ct_status validate(const char *op, ct_optim_kind kind, const ct_optim_options *o) {
    if (!(0.0 <= o->lr))
        return ct_error(CT_ERROR_VALUE, op, "Invalid learning rate: %g", o->lr);
    if (!(0.0 <= o->weight_decay))
        return ct_error(CT_ERROR_VALUE, op, "Invalid weight_decay value: %g", o->weight_decay);
    if (o->foreach < -1 || o->foreach > 1)
        return ct_error(CT_ERROR_VALUE, op, "foreach must be -1 (default), 0 or 1, got %d", o->foreach);
    if (o->fused < -1 || o->fused > 1)
        return ct_error(CT_ERROR_VALUE, op, "fused must be -1 (default), 0 or 1, got %d", o->fused);
    if (o->fused == 1 && o->foreach == 1)
        return ct_error(CT_ERROR_VALUE, op, "`fused` and `foreach` cannot be `True` together.");
    if (o->fused == 1 && kind != CT_OPTIM_ADAM && kind != CT_OPTIM_ADAMW)
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "`fused=True` is only supported by Adam and AdamW");
    switch (kind) {
    case CT_OPTIM_SGD:
        if (!(0.0 <= o->momentum))
            return ct_error(CT_ERROR_VALUE, op, "Invalid momentum value: %g", o->momentum);
        if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
            return ct_error(CT_ERROR_VALUE, op, "Nesterov momentum requires a momentum and zero dampening");
        break;
    case CT_OPTIM_ADAM:
    case CT_OPTIM_ADAMW:
        if (!(0.0 <= o->eps))
            return ct_error(CT_ERROR_VALUE, op, "Invalid epsilon value: %g", o->eps);
        if (!(0.0 <= o->beta1 && o->beta1 < 1.0))
            return ct_error(CT_ERROR_VALUE, op, "Invalid beta parameter at index 0: %g", o->beta1);
        if (!(0.0 <= o->beta2 && o->beta2 < 1.0))
            return ct_error(CT_ERROR_VALUE, op, "Invalid beta parameter at index 1: %g", o->beta2);
        break;
    case CT_OPTIM_RMSPROP:
        if (!(0.0 <= o->eps))
            return ct_error(CT_ERROR_VALUE, op, "Invalid epsilon value: %g", o->eps);
        if (!(0.0 <= o->momentum))
            return ct_error(CT_ERROR_VALUE, op, "Invalid momentum value: %g", o->momentum);
        if (!(0.0 <= o->alpha))
            return ct_error(CT_ERROR_VALUE, op, "Invalid alpha value: %g", o->alpha);
        break;
    case CT_OPTIM_ADAGRAD:
        if (!(0.0 <= o->lr_decay))
            return ct_error(CT_ERROR_VALUE, op, "Invalid lr_decay value: %g", o->lr_decay);
        if (!(0.0 <= o->initial_accumulator_value))
            return ct_error(CT_ERROR_VALUE, op, "Invalid initial_accumulator_value value: %g",
                            o->initial_accumulator_value);
        if (!(0.0 <= o->eps))
            return ct_error(CT_ERROR_VALUE, op, "Invalid epsilon value: %g", o->eps);
        break;
    }
    return CT_OK;
}

/* ------------------------------------------------------------ construction */

static void group_release(param_group *g) {
    for (int i = 0; i < g->n; i++) {
        for (int s = 0; s < CT_OPTIM_MAX_SLOTS; s++)
            ct_release(g->state[i].slot[s]);
        ct_release(g->params[i]);
    }
    free(g->params);
    free(g->state);
    ct_release(g->step_t);
    g->step_t = NULL;
    ct_release(g->lr_t);
    g->lr_t = NULL;
}

void ct_optimizer_free(ct_optimizer *opt) {
    if (!opt)
        return;
    for (int g = 0; g < opt->ngroups; g++)
        group_release(&opt->groups[g]);
    free(opt->groups);
    free(opt);
}

/* A new reference to a contiguous tensor like p filled with v (no scope owns it). */
static ct_tensor *state_full(const ct_tensor *p, double v) {
    ct_scope_begin();
    ct_tensor *t = ct_full(ct_tensor_shape(p), ct_tensor_dim(p), ct_scalar_float(v), ct_tensor_dtype(p),
                           ct_tensor_device(p));
    if (t)
        ct_retain(t);
    ct_scope_end();
    return t;
}

/* Adagrad creates its state when parameters are added (torch does it in __init__). */
static ct_status init_adagrad_state(param_group *g) {
    for (int i = 0; i < g->n; i++) {
        param_state *st = &g->state[i];
        st->initialized = true;
        st->step = 0;
        st->slot[0] = state_full(g->params[i], g->o.initial_accumulator_value);
        if (!st->slot[0])
            return ct_last_status();
    }
    return CT_OK;
}

static bool optimizer_holds(const ct_optimizer *opt, const ct_tensor *p) {
    for (int g = 0; g < opt->ngroups; g++)
        for (int i = 0; i < opt->groups[g].n; i++)
            if (opt->groups[g].params[i] == p)
                return true;
    return false;
}

ct_status ct_optimizer_add_param_group(ct_optimizer *opt, ct_tensor *const *params, int n,
                                       const ct_optim_options *o) {
    static const char *op = "add_param_group";
    if (!opt || !params)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", !opt ? "optimizer" : "params");
    if (n <= 0)
        return ct_error(CT_ERROR_VALUE, op, "optimizer got an empty parameter list");
    ct_optim_options opts = o ? *o : opt->defaults;
    ct_status st = validate(op, opt->kind, &opts);
    if (st)
        return st;
    for (int i = 0; i < n; i++) {
        const ct_tensor *p = params[i];
        if (!p)
            return ct_error(CT_ERROR_NULL_ARGUMENT, op, "parameter %d is NULL", i);
        if (!ct_dtype_is_floating(ct_tensor_dtype(p)))
            return ct_error(CT_ERROR_TYPE, op, "can't optimize a tensor of dtype %s (parameter %d)",
                            ct_dtype_name(ct_tensor_dtype(p)), i);
        if (ct_tensor_device(p).type == CT_DEVICE_META)
            return ct_error(CT_ERROR_DEVICE, op, "can't optimize a meta tensor (parameter %d)", i);
        bool dup = optimizer_holds(opt, p);
        for (int j = 0; j < i && !dup; j++)
            dup = params[j] == p;
        if (dup)
            return ct_error(CT_ERROR_VALUE, op, "some parameters appear in more than one parameter group");
    }
    param_group *grown = realloc(opt->groups, sizeof(param_group) * (size_t)(opt->ngroups + 1));
    if (!grown)
        return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
    opt->groups = grown;
    param_group *g = &opt->groups[opt->ngroups];
    memset(g, 0, sizeof *g);
    g->o = opts;
    g->params = ct_xcalloc(op, (size_t)n, sizeof(ct_tensor *));
    g->state = ct_xcalloc(op, (size_t)n, sizeof(param_state));
    if (!g->params || !g->state) {
        free(g->params);
        free(g->state);
        return CT_ERROR_OUT_OF_MEMORY;
    }
    g->n = n;
    for (int i = 0; i < n; i++)
        g->params[i] = ct_retain(params[i]);
    opt->ngroups++;
    if (opt->kind == CT_OPTIM_ADAGRAD) {
        st = init_adagrad_state(g);
        if (st) {
            group_release(g);
            opt->ngroups--;
            return st;
        }
    }
    return CT_OK;
}

ct_optimizer *ct_optimizer_new(ct_optim_kind kind, ct_tensor *const *params, int n, const ct_optim_options *o) {
    static const char *op = "optimizer";
    if (!kind_valid((int)kind)) {
        ct_error(CT_ERROR_VALUE, op, "unknown optimizer kind %d", (int)kind);
        return NULL;
    }
    if (!params) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "params is NULL");
        return NULL;
    }
    if (!o && kind == CT_OPTIM_SGD) {
        ct_error(CT_ERROR_VALUE, op, "SGD needs options with a learning rate (ct_sgd_options(lr))");
        return NULL;
    }
    ct_optimizer *opt = ct_xcalloc(op, 1, sizeof *opt);
    if (!opt)
        return NULL;
    opt->kind = kind;
    opt->defaults = o ? *o : default_options(kind);
    if (ct_optimizer_add_param_group(opt, params, n, &opt->defaults)) {
        ct_optimizer_free(opt);
        return NULL;
    }
    return opt;
}

/* ------------------------------------------------------------ accessors */

/* Note [Device learning rate]
 * A captured graph keeps its kernels' arguments, so a learning rate passed by value to
 * the fused kernel would stay the one of the capture at every replay, and a scheduler
 * stepped between replays would change nothing. So with the capturable option a group
 * whose fused step runs on a CUDA device keeps lr_t beside step_t (Note [Capturable
 * step]): a float64 tensor on the same device holding o.lr, made, released and made
 * again after load_state_dict at the same moments as step_t, and the fused call reads
 * the rate from it (Note [Device step] in src/meta/fused_optim.c), as torch's
 * capturable Adam takes a Tensor lr that its schedulers fill_. Every change of a
 * group's lr (ct_optimizer_set_lr, ct_optimizer_set_options, a scheduler's
 * ct_optimizer_put_lr) writes the new value into lr_t with a fill on the current
 * stream, ordered before the next replay on that stream. As in PyTorch, a change made
 * while a capture is under way is itself recorded into the graph, and then every
 * replay writes that value again: change the lr between replays, not inside the
 * captured region. o.lr stays the source of truth: state dicts, get_lr and the
 * by-value paths read it. */
static ct_status put_device_lr(param_group *g, double lr) {
    if (!g->lr_t)
        return CT_OK;
    ct_scope_begin();
    ct_status st = ct_fill_(g->lr_t, ct_scalar_float(lr)) ? CT_OK : ct_last_status();
    ct_scope_end();
    return st;
}

static param_group *get_group(const ct_optimizer *opt, int group, const char *op) {
    if (!opt) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "optimizer is NULL");
        return NULL;
    }
    if (group < 0 || group >= opt->ngroups) {
        ct_error(CT_ERROR_INDEX, op, "param group %d out of range (optimizer has %d)", group, opt->ngroups);
        return NULL;
    }
    return &opt->groups[group];
}

ct_optim_kind ct_optimizer_kind(const ct_optimizer *opt) {
    return opt ? opt->kind : (ct_optim_kind)-1;
}
const char *ct_optimizer_name(const ct_optimizer *opt) {
    return opt ? kind_names[opt->kind] : "";
}
int ct_optimizer_num_groups(const ct_optimizer *opt) {
    return opt ? opt->ngroups : -1;
}
int ct_optimizer_group_size(const ct_optimizer *opt, int group) {
    param_group *g = get_group(opt, group, "group_size");
    return g ? g->n : -1;
}
ct_tensor *ct_optimizer_group_param(const ct_optimizer *opt, int group, int i) {
    param_group *g = get_group(opt, group, "group_param");
    if (!g)
        return NULL;
    if (i < 0 || i >= g->n) {
        ct_error(CT_ERROR_INDEX, "group_param", "parameter %d out of range (group has %d)", i, g->n);
        return NULL;
    }
    return g->params[i];
}
ct_status ct_optimizer_get_options(const ct_optimizer *opt, int group, ct_optim_options *out) {
    param_group *g = get_group(opt, group, "get_options");
    if (!g)
        return ct_last_status();
    if (!out)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "get_options", "out is NULL");
    *out = g->o;
    return CT_OK;
}
ct_status ct_optimizer_set_options(ct_optimizer *opt, int group, const ct_optim_options *o) {
    param_group *g = get_group(opt, group, "set_options");
    if (!g)
        return ct_last_status();
    if (!o)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "set_options", "options are NULL");
    ct_status st = validate("set_options", opt->kind, o);
    if (st)
        return st;
    st = put_device_lr(g, o->lr);
    if (st)
        return st;
    g->o = *o;
    return CT_OK;
}
double ct_optimizer_get_lr(const ct_optimizer *opt, int group) {
    param_group *g = get_group(opt, group, "get_lr");
    return g ? g->o.lr : NAN;
}
ct_status ct_optimizer_set_lr(ct_optimizer *opt, int group, double lr) {
    param_group *g = get_group(opt, group, "set_lr");
    if (!g)
        return ct_last_status();
    if (!(0.0 <= lr))
        return ct_error(CT_ERROR_VALUE, "set_lr", "Invalid learning rate: %g", lr);
    ct_status st = put_device_lr(g, lr);
    if (st)
        return st;
    g->o.lr = lr;
    return CT_OK;
}
bool ct_optimizer_has_initial_lr(const ct_optimizer *opt, int group) {
    return opt->groups[group].has_initial_lr;
}
double ct_optimizer_initial_lr(const ct_optimizer *opt, int group) {
    return opt->groups[group].initial_lr;
}
void ct_optimizer_set_initial_lr(ct_optimizer *opt, int group, double lr) {
    opt->groups[group].has_initial_lr = true;
    opt->groups[group].initial_lr = lr;
}
ct_status ct_optimizer_put_lr(ct_optimizer *opt, int group, double lr) {
    param_group *g = &opt->groups[group];
    ct_status st = put_device_lr(g, lr);
    if (st)
        return st;
    g->o.lr = lr;
    return CT_OK;
}
bool ct_optimizer_has_momentum(const ct_optimizer *opt) {
    return opt->kind != CT_OPTIM_ADAGRAD;
}
void ct_optimizer_put_momentum(ct_optimizer *opt, int group, double m) {
    if (opt->kind == CT_OPTIM_ADAM || opt->kind == CT_OPTIM_ADAMW)
        opt->groups[group].o.beta1 = m;
    else
        opt->groups[group].o.momentum = m;
}
int64_t ct_optimizer_step_count(const ct_optimizer *opt) {
    return opt->step_count;
}

/* ------------------------------------------------------------ fused loops */

/* Per-step scalars, computed once in double exactly as torch.optim computes them in
 * Python, then converted to the tensor's dtype inside the loops. */
typedef struct step_consts {
    double lr, wd, momentum, damp_alpha; /* damp_alpha = 1 - dampening */
    double beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
    double step_size, bc2_sqrt; /* Adam */
    double one_minus_alpha, alpha;
    double clr; /* Adagrad */
    double decay; /* AdamW: 1 - lr * weight_decay */
    bool nesterov, maximize, amsgrad, centered, first, has_wd, has_momentum;
} step_consts;

/* Note [Vectorizing the fused loops]
 * Under ISO C, sqrtf may set errno, and that keeps compilers from vectorizing any loop
 * that calls it. So each loop works on chunks that fit in L1: a first pass (vectorized)
 * updates the state and leaves the values to take roots of in a small buffer, the roots
 * are taken with SSE2 (one correctly rounded sqrt per element, as sqrtf), and a last
 * pass (vectorized) updates the parameter. The passes over a chunk re-read memory that
 * is still in L1, so the tensors still go through memory once. The arithmetic is the
 * same, in the same order, as the one-element-at-a-time form. */

#if defined(__SSE2__)
#include <emmintrin.h>
static void sqrt_block_f32(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        _mm_storeu_ps(x + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
    for (; i < n; i++)
        x[i] = sqrtf(x[i]);
}
static void sqrt_block_f64(double *x, int64_t n) {
    int64_t i = 0;
    for (; i + 2 <= n; i += 2)
        _mm_storeu_pd(x + i, _mm_sqrt_pd(_mm_loadu_pd(x + i)));
    for (; i < n; i++)
        x[i] = sqrt(x[i]);
}
#else
static void sqrt_block_f32(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] = sqrtf(x[i]);
}
static void sqrt_block_f64(double *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] = sqrt(x[i]);
}
#endif

#define CT_OPTIM_CHUNK 512
/* Elements per OpenMP work item, and the size below which one thread does it all. */
#define CT_OPTIM_BLOCK 32768
#define CT_OPTIM_PARALLEL_MIN 131072

/* One instantiation per dtype: T the element type. Every line mirrors one tensor op
 * of torch.optim's single-tensor code, in the same order. The kernels take a range
 * [0, n) of contiguous elements. */
#define CT_DEFINE_FUSED(T, SUF)                                                                        \
    /* The gradient the update follows: negated to maximize, plus weight decay. */                     \
    static inline T direction_##SUF(T p, T g, bool maximize, bool has_wd, T wd) {                      \
        const T d = maximize ? -g : g;                                                                 \
        return has_wd ? d + wd * p : d;                                                                \
    }                                                                                                  \
    static void sgd_##SUF(T *restrict p, const T *restrict gr, T *restrict buf, int64_t n,             \
                          const step_consts *c) {                                                      \
        const T wd = (T)c->wd, mom = (T)c->momentum, da = (T)c->damp_alpha, nlr = (T)(-c->lr);         \
        const bool maximize = c->maximize, has_wd = c->has_wd, first = c->first;                       \
        const bool nesterov = c->nesterov;                                                             \
        if (!c->has_momentum) {                                                                        \
            for (int64_t i = 0; i < n; i++) {                                                          \
                const T pi = p[i], gi = gr[i];                                                         \
                T d = maximize ? -gi : gi;                                                             \
                d = has_wd ? d + wd * pi : d;                                                          \
                p[i] = pi + nlr * d;                                                                   \
            }                                                                                          \
            return;                                                                                    \
        }                                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                              \
            const T pi = p[i], gi = gr[i], bi = buf[i];                                                \
            T d = maximize ? -gi : gi;                                                                 \
            d = has_wd ? d + wd * pi : d;                                                              \
            const T b = first ? d : bi * mom + da * d;                                                 \
            buf[i] = b;                                                                                \
            d = nesterov ? d + mom * b : b;                                                            \
            p[i] = pi + nlr * d;                                                                       \
        }                                                                                              \
    }                                                                                                  \
    static void adam_##SUF(T *restrict p, const T *restrict gr, T *restrict m, T *restrict v,          \
                           T *restrict vmax, int64_t n, const step_consts *c, bool decoupled) {        \
        const T wd = (T)c->wd, b1 = (T)c->beta1, omb1 = (T)c->one_minus_beta1, b2 = (T)c->beta2;       \
        const T omb2 = (T)c->one_minus_beta2, bc2s = (T)c->bc2_sqrt, eps = (T)c->eps;                  \
        const T nss = (T)(-c->step_size), decay = (T)c->decay;                                         \
        const bool maximize = c->maximize, has_wd = c->has_wd && !decoupled, ams = c->amsgrad;         \
        T root[CT_OPTIM_CHUNK];                                                                        \
        for (int64_t i0 = 0; i0 < n; i0 += CT_OPTIM_CHUNK) {                                           \
            const int64_t len = n - i0 < CT_OPTIM_CHUNK ? n - i0 : CT_OPTIM_CHUNK;                     \
            T *restrict pp = p + i0, *restrict mm = m + i0, *restrict vv = v + i0;                     \
            const T *restrict gg = gr + i0;                                                            \
            for (int64_t j = 0; j < len; j++) {                                                        \
                const T pj = pp[j], gj = gg[j];                                                        \
                T d = direction_##SUF(pj, gj, maximize, has_wd, wd);                                   \
                pp[j] = decoupled ? pj * decay : pj;                                                   \
                const T mi = mm[j] * b1 + omb1 * d;                                                    \
                const T vi = vv[j] * b2 + omb2 * d * d;                                                \
                mm[j] = mi;                                                                            \
                vv[j] = vi;                                                                            \
                root[j] = vi;                                                                          \
            }                                                                                          \
            if (ams) {                                                                                 \
                T *restrict xx = vmax + i0;                                                            \
                for (int64_t j = 0; j < len; j++) {                                                    \
                    const T mx = xx[j], vi = root[j];                                                  \
                    const T r = ((vi > mx) | (vi != vi)) ? vi : mx; /* torch.maximum keeps NaN */      \
                    xx[j] = r;                                                                         \
                    root[j] = r;                                                                       \
                }                                                                                      \
            }                                                                                          \
            sqrt_block_##SUF(root, len);                                                               \
            for (int64_t j = 0; j < len; j++) {                                                        \
                const T denom = root[j] / bc2s + eps;                                                  \
                pp[j] = pp[j] + nss * (mm[j] / denom);                                                 \
            }                                                                                          \
        }                                                                                              \
    }                                                                                                  \
    static void rmsprop_##SUF(T *restrict p, const T *restrict gr, T *restrict sq, T *restrict buf,    \
                              T *restrict ga, int64_t n, const step_consts *c) {                       \
        const T wd = (T)c->wd, al = (T)c->alpha, oma = (T)c->one_minus_alpha, eps = (T)c->eps;         \
        const T mom = (T)c->momentum, nlr = (T)(-c->lr), one = (T)1, mone = (T)-1;                     \
        const bool maximize = c->maximize, has_wd = c->has_wd;                                         \
        T root[CT_OPTIM_CHUNK];                                                                        \
        for (int64_t i0 = 0; i0 < n; i0 += CT_OPTIM_CHUNK) {                                           \
            const int64_t len = n - i0 < CT_OPTIM_CHUNK ? n - i0 : CT_OPTIM_CHUNK;                     \
            T *restrict pp = p + i0, *restrict ss = sq + i0;                                           \
            const T *restrict gg = gr + i0;                                                            \
            for (int64_t j = 0; j < len; j++) {                                                        \
                const T pj = pp[j], gj = gg[j];                                                        \
                T d = direction_##SUF(pj, gj, maximize, has_wd, wd);                                   \
                const T s = ss[j] * al + oma * d * d;                                                  \
                ss[j] = s;                                                                             \
                root[j] = s;                                                                           \
            }                                                                                          \
            if (c->centered) {                                                                         \
                T *restrict aa = ga + i0;                                                              \
                for (int64_t j = 0; j < len; j++) {                                                    \
                    const T pj = pp[j], gj = gg[j];                                                    \
                    T d = direction_##SUF(pj, gj, maximize, has_wd, wd);                               \
                    const T g = aa[j] * al + oma * d;                                                  \
                    aa[j] = g;                                                                         \
                    root[j] = root[j] + mone * g * g;                                                  \
                }                                                                                      \
            }                                                                                          \
            sqrt_block_##SUF(root, len);                                                               \
            if (c->has_momentum) {                                                                     \
                T *restrict bb = buf + i0;                                                             \
                for (int64_t j = 0; j < len; j++) {                                                    \
                    const T pj = pp[j], gj = gg[j];                                                    \
                    T d = direction_##SUF(pj, gj, maximize, has_wd, wd);                               \
                    const T avg = root[j] + eps;                                                       \
                    const T b = bb[j] * mom + one * (d / avg);                                         \
                    bb[j] = b;                                                                         \
                    pp[j] = pj + nlr * b;                                                              \
                }                                                                                      \
            } else {                                                                                   \
                for (int64_t j = 0; j < len; j++) {                                                    \
                    const T pj = pp[j], gj = gg[j];                                                    \
                    T d = direction_##SUF(pj, gj, maximize, has_wd, wd);                               \
                    const T avg = root[j] + eps;                                                       \
                    pp[j] = pj + nlr * (d / avg);                                                      \
                }                                                                                      \
            }                                                                                          \
        }                                                                                              \
    }                                                                                                  \
    static void adagrad_##SUF(T *restrict p, const T *restrict gr, T *restrict sum, int64_t n,         \
                              const step_consts *c) {                                                  \
        const T wd = (T)c->wd, eps = (T)c->eps, nclr = (T)(-c->clr), one = (T)1;                       \
        const bool maximize = c->maximize, has_wd = c->has_wd;                                         \
        T root[CT_OPTIM_CHUNK];                                                                        \
        for (int64_t i0 = 0; i0 < n; i0 += CT_OPTIM_CHUNK) {                                           \
            const int64_t len = n - i0 < CT_OPTIM_CHUNK ? n - i0 : CT_OPTIM_CHUNK;                     \
            T *restrict pp = p + i0, *restrict su = sum + i0;                                          \
            const T *restrict gg = gr + i0;                                                            \
            for (int64_t j = 0; j < len; j++) {                                                        \
                const T pj = pp[j], gj = gg[j];                                                        \
                T d = direction_##SUF(pj, gj, maximize, has_wd, wd);                                   \
                const T s = su[j] + one * d * d;                                                       \
                su[j] = s;                                                                             \
                root[j] = s;                                                                           \
            }                                                                                          \
            sqrt_block_##SUF(root, len);                                                               \
            for (int64_t j = 0; j < len; j++) {                                                        \
                const T pj = pp[j], gj = gg[j];                                                        \
                T d = direction_##SUF(pj, gj, maximize, has_wd, wd);                                   \
                const T std = root[j] + eps;                                                           \
                pp[j] = pj + nclr * (d / std);                                                         \
            }                                                                                          \
        }                                                                                              \
    }

CT_DEFINE_FUSED(float, f32)
CT_DEFINE_FUSED(double, f64)

/* ------------------------------------------------------------ one parameter */

static ct_tensor *slot_tensor(param_state *st, int s, const ct_tensor *p, double fill) {
    if (!st->slot[s])
        st->slot[s] = state_full(p, fill);
    return st->slot[s];
}

/* The slots this step needs, created lazily as torch.optim does. */
static ct_status ensure_state(ct_optim_kind kind, const ct_optim_options *o, param_state *st, const ct_tensor *p) {
    bool fresh = !st->initialized;
    st->initialized = true;
    switch (kind) {
    case CT_OPTIM_SGD:
        return CT_OK; /* the momentum buffer is the first d_p, made in the update */
    case CT_OPTIM_ADAM:
    case CT_OPTIM_ADAMW:
        if (!slot_tensor(st, 0, p, 0) || !slot_tensor(st, 1, p, 0) || (o->amsgrad && !slot_tensor(st, 2, p, 0)))
            return ct_last_status();
        break;
    case CT_OPTIM_RMSPROP:
        if (!slot_tensor(st, 0, p, 0) || (o->momentum > 0 && !slot_tensor(st, 1, p, 0)) ||
            (o->centered && !slot_tensor(st, 2, p, 0)))
            return ct_last_status();
        break;
    case CT_OPTIM_ADAGRAD:
        if (!slot_tensor(st, 0, p, o->initial_accumulator_value))
            return ct_last_status();
        break;
    }
    if (fresh)
        st->step = 0;
    return CT_OK;
}

static bool fusable(const ct_tensor *t, const ct_tensor *p) {
    return t && ct_tensor_dtype(t) == ct_tensor_dtype(p) && ct_tensor_device(t).type == CT_DEVICE_CPU &&
           ct_tensor_is_contiguous(t) && ct_tensor_data(t) != NULL;
}

static void fill_consts(ct_optim_kind kind, const ct_optim_options *o, const param_state *st, step_consts *c) {
    memset(c, 0, sizeof *c);
    c->lr = o->lr;
    c->wd = o->weight_decay;
    c->has_wd = o->weight_decay != 0;
    c->maximize = o->maximize;
    c->momentum = o->momentum;
    c->eps = o->eps;
    switch (kind) {
    case CT_OPTIM_SGD:
        c->damp_alpha = 1 - o->dampening;
        c->nesterov = o->nesterov;
        c->has_momentum = o->momentum != 0;
        c->first = st->slot[0] == NULL;
        break;
    case CT_OPTIM_ADAM:
    case CT_OPTIM_ADAMW: {
        c->beta1 = o->beta1;
        c->beta2 = o->beta2;
        c->one_minus_beta1 = 1 - o->beta1;
        c->one_minus_beta2 = 1 - o->beta2;
        c->amsgrad = o->amsgrad;
        double bc1 = 1 - pow(o->beta1, st->step);
        double bc2 = 1 - pow(o->beta2, st->step);
        c->step_size = o->lr / bc1;
        c->bc2_sqrt = sqrt(bc2);
        c->decay = 1 - o->lr * o->weight_decay;
        break;
    }
    case CT_OPTIM_RMSPROP:
        c->alpha = o->alpha;
        c->one_minus_alpha = 1 - o->alpha;
        c->centered = o->centered;
        c->has_momentum = o->momentum > 0;
        break;
    case CT_OPTIM_ADAGRAD:
        c->clr = o->lr / (1 + (st->step - 1) * o->lr_decay);
        break;
    }
}

/* Runs the kernel of `kind` on elements [lo, hi) of one parameter. */
static void fused_range(ct_optim_kind kind, bool f64, char *const *ptr, int64_t lo, int64_t hi,
                        const step_consts *c) {
    const size_t es = f64 ? sizeof(double) : sizeof(float);
#define AT(k) (ptr[k] ? (void *)(ptr[k] + (size_t)lo * es) : NULL)
    void *pp = AT(0), *gp = AT(1), *s0 = AT(2), *s1 = AT(3), *s2 = AT(4);
#undef AT
    const int64_t n = hi - lo;
    switch (kind) {
    case CT_OPTIM_SGD:
        if (f64)
            sgd_f64(pp, gp, s0, n, c);
        else
            sgd_f32(pp, gp, s0, n, c);
        break;
    case CT_OPTIM_ADAM:
    case CT_OPTIM_ADAMW:
        if (f64)
            adam_f64(pp, gp, s0, s1, s2, n, c, kind == CT_OPTIM_ADAMW);
        else
            adam_f32(pp, gp, s0, s1, s2, n, c, kind == CT_OPTIM_ADAMW);
        break;
    case CT_OPTIM_RMSPROP:
        if (f64)
            rmsprop_f64(pp, gp, s0, s1, s2, n, c);
        else
            rmsprop_f32(pp, gp, s0, s1, s2, n, c);
        break;
    case CT_OPTIM_ADAGRAD:
        if (f64)
            adagrad_f64(pp, gp, s0, n, c);
        else
            adagrad_f32(pp, gp, s0, n, c);
        break;
    }
}

typedef struct {
    ct_optim_kind kind;
    bool f64;
    char **ptr;
    int64_t n;
    const step_consts *c;
} fused_job;

static void fused_blocks(void *ctx, int64_t b0, int64_t b1) {
    const fused_job *j = ctx;
    const int64_t lo = b0 * CT_OPTIM_BLOCK, hi = b1 * CT_OPTIM_BLOCK < j->n ? b1 * CT_OPTIM_BLOCK : j->n;
    fused_range(j->kind, j->f64, j->ptr, lo, hi, j->c);
}

static ct_status fused_update(ct_optim_kind kind, param_state *st, ct_tensor *p, const ct_tensor *g,
                              const step_consts *c) {
    const int64_t n = ct_tensor_numel(p);
    const bool f64 = ct_tensor_dtype(p) == CT_F64;
    char *ptr[2 + CT_OPTIM_MAX_SLOTS] = {ct_tensor_data(p), ct_tensor_data(g), NULL, NULL, NULL, NULL};
    for (int s = 0; s < CT_OPTIM_MAX_SLOTS; s++)
        ptr[2 + s] = st->slot[s] ? ct_tensor_data(st->slot[s]) : NULL;
    if (n < CT_OPTIM_PARALLEL_MIN) {
        fused_range(kind, f64, ptr, 0, n, c);
    } else {
        const int64_t nblocks = (n + CT_OPTIM_BLOCK - 1) / CT_OPTIM_BLOCK;
        /* Elementwise: the result does not depend on how blocks are shared out. */
        fused_job j = {kind, f64, ptr, n, c};
        ct_parallel_range(nblocks, n, 0, fused_blocks, &j);
    }
    ct_tensor_bump_version(p);
    for (int s = 0; s < CT_OPTIM_MAX_SLOTS; s++)
        if (st->slot[s])
            ct_tensor_bump_version(st->slot[s]);
    return CT_OK;
}

#define OK_OR_FAIL(x)          \
    do {                       \
        if (!(x))              \
            goto fail;         \
    } while (0)

static ct_scalar fs(double x) {
    return ct_scalar_float(x);
}

/* The reference path: torch.optim's single-tensor code, one public op per line. Runs
 * inside the caller's scope. */
static ct_status plain_update(ct_optim_kind kind, param_state *st, ct_tensor *p, const ct_tensor *grad,
                              const step_consts *c) {
    ct_tensor *d = c->maximize ? ct_neg(grad) : ct_alias(grad);
    OK_OR_FAIL(d);
    switch (kind) {
    case CT_OPTIM_SGD:
        if (c->has_wd)
            OK_OR_FAIL(d = ct_add_alpha(d, p, fs(c->wd)));
        if (c->has_momentum) {
            if (c->first) {
                ct_tensor *b = ct_clone(d);
                OK_OR_FAIL(b);
                st->slot[0] = ct_retain(b);
            } else {
                OK_OR_FAIL(ct_mul_scalar_(st->slot[0], fs(c->momentum)));
                OK_OR_FAIL(ct_add_alpha_(st->slot[0], d, fs(c->damp_alpha)));
            }
            if (c->nesterov)
                OK_OR_FAIL(d = ct_add_alpha(d, st->slot[0], fs(c->momentum)));
            else
                d = st->slot[0];
        }
        OK_OR_FAIL(ct_add_alpha_(p, d, fs(-c->lr)));
        break;
    case CT_OPTIM_ADAM:
    case CT_OPTIM_ADAMW: {
        if (kind == CT_OPTIM_ADAMW)
            OK_OR_FAIL(ct_mul_scalar_(p, fs(c->decay)));
        else if (c->has_wd)
            OK_OR_FAIL(d = ct_add_alpha(d, p, fs(c->wd)));
        ct_tensor *m = st->slot[0], *v = st->slot[1];
        OK_OR_FAIL(ct_mul_scalar_(m, fs(c->beta1)));
        OK_OR_FAIL(ct_add_alpha_(m, d, fs(c->one_minus_beta1)));
        OK_OR_FAIL(ct_mul_scalar_(v, fs(c->beta2)));
        OK_OR_FAIL(ct_add_alpha_(v, ct_mul(d, d), fs(c->one_minus_beta2)));
        ct_tensor *src = v;
        if (c->amsgrad) {
            OK_OR_FAIL(ct_maximum_out(st->slot[2], v, st->slot[2]));
            src = st->slot[2];
        }
        ct_tensor *denom = ct_add_scalar_(ct_div_scalar(ct_sqrt(src), fs(c->bc2_sqrt)), fs(c->eps));
        OK_OR_FAIL(denom);
        OK_OR_FAIL(ct_add_alpha_(p, ct_div(m, denom), fs(-c->step_size)));
        break;
    }
    case CT_OPTIM_RMSPROP: {
        if (c->has_wd)
            OK_OR_FAIL(d = ct_add_alpha(d, p, fs(c->wd)));
        ct_tensor *sq = st->slot[0];
        OK_OR_FAIL(ct_mul_scalar_(sq, fs(c->alpha)));
        OK_OR_FAIL(ct_add_alpha_(sq, ct_mul(d, d), fs(c->one_minus_alpha)));
        ct_tensor *avg;
        if (c->centered) {
            ct_tensor *ga = st->slot[2];
            OK_OR_FAIL(ct_mul_scalar_(ga, fs(c->alpha)));
            OK_OR_FAIL(ct_add_alpha_(ga, d, fs(c->one_minus_alpha)));
            avg = ct_sqrt_(ct_sub(sq, ct_mul(ga, ga)));
        } else {
            avg = ct_sqrt(sq);
        }
        OK_OR_FAIL(avg = ct_add_scalar_(avg, fs(c->eps)));
        if (c->has_momentum) {
            ct_tensor *buf = st->slot[1];
            OK_OR_FAIL(ct_mul_scalar_(buf, fs(c->momentum)));
            OK_OR_FAIL(ct_add_(buf, ct_div(d, avg)));
            OK_OR_FAIL(ct_add_alpha_(p, buf, fs(-c->lr)));
        } else {
            OK_OR_FAIL(ct_add_alpha_(p, ct_div(d, avg), fs(-c->lr)));
        }
        break;
    }
    case CT_OPTIM_ADAGRAD: {
        if (c->has_wd)
            OK_OR_FAIL(d = ct_add_alpha(d, p, fs(c->wd)));
        OK_OR_FAIL(ct_add_(st->slot[0], ct_mul(d, d)));
        ct_tensor *std = ct_add_scalar_(ct_sqrt(st->slot[0]), fs(c->eps));
        OK_OR_FAIL(std);
        OK_OR_FAIL(ct_add_alpha_(p, ct_div(d, std), fs(-c->clr)));
        break;
    }
    }
    return CT_OK;
fail:
    return ct_last_status() ? ct_last_status() : CT_ERROR_RUNTIME;
}

static ct_status check_grad(const ct_tensor *p, const ct_tensor *g, int group, int i) {
    char a[64], b[64];
    if (ct_tensor_dtype(g) != ct_tensor_dtype(p))
        return ct_error(CT_ERROR_TYPE, "optimizer.step",
                        "gradient of parameter %d in group %d has dtype %s but the parameter is %s", i, group,
                        ct_dtype_name(ct_tensor_dtype(g)), ct_dtype_name(ct_tensor_dtype(p)));
    if (!same_shape(g, p))
        return ct_error(CT_ERROR_VALUE, "optimizer.step",
                        "gradient of parameter %d in group %d has shape %s but the parameter has shape %s", i,
                        group, ct_shape_str(ct_tensor_shape(g), ct_tensor_dim(g), a, sizeof a),
                        ct_shape_str(ct_tensor_shape(p), ct_tensor_dim(p), b, sizeof b));
    if (!ct_device_equal(ct_tensor_device(g), ct_tensor_device(p)))
        return ct_error(CT_ERROR_DEVICE, "optimizer.step",
                        "gradient of parameter %d in group %d is on another device than the parameter", i, group);
    return CT_OK;
}

/* ------------------------------------------------------------ fused step */

/* Note [Fused step]
 * Adam and AdamW hand their parameters to the op fused_adam / fused_adamw (src/meta,
 * src/cpu and src/cuda fused_optim.*), which updates a whole list in one call: on CUDA
 * one launch for every parameter, where the plain path costs about a dozen elementwise
 * launches per parameter. The default (fused -1) takes CUDA parameters of dtype
 * float32, bfloat16 and float16; fused 1 also takes CPU float32/float64 parameters
 * (the op's CPU loop gives the foreach path's bits). Parameters are grouped by device,
 * dtype, step count and master copy, one call per group. A parameter whose tensors the
 * kernel cannot take (strides, states on another device or of another dtype) takes
 * the other paths. With master_weights, a bfloat16/float16 parameter gets a float32
 * copy (slot 3, made from the parameter at its first fused step) and float32
 * exp_avg/exp_avg_sq; the kernel updates the copy and rounds it into the parameter.
 * The copy is not saved: after load_state_dict, or a step on another path, it is made
 * again from the parameter.
 * Measured (bench/optim, AdamW over GPT-2 124M's 148 float32 tensors, one H200,
 * synchronized steps): 1.26 ms a step fused against 20.5 ms on the plain path. */

static bool low_float(ct_dtype dt) {
    return dt == CT_BF16 || dt == CT_F16;
}

static bool uses_master(const ct_optim_options *o, const ct_tensor *p) {
    return o->master_weights && low_float(ct_tensor_dtype(p)) && ct_tensor_device(p).type == CT_DEVICE_CUDA;
}

/* Whether the fused op takes parameter p with gradient g (state as it is now). */
static bool fused_takes(ct_optim_kind kind, const ct_optim_options *o, const param_state *st, const ct_tensor *p,
                        const ct_tensor *g) {
    if ((kind != CT_OPTIM_ADAM && kind != CT_OPTIM_ADAMW) || o->fused == 0)
        return false;
    const ct_dtype dt = ct_tensor_dtype(p);
    const ct_device dev = ct_tensor_device(p);
    if (dev.type == CT_DEVICE_CUDA) {
        if (dt != CT_F32 && !low_float(dt))
            return false;
    } else if (dev.type != CT_DEVICE_CPU || o->fused != 1 || (dt != CT_F32 && dt != CT_F64)) {
        return false;
    }
    if (!ct_tensor_is_contiguous(p) || !ct_tensor_is_contiguous(g) || ct_tensor_shares_storage(p, g))
        return false;
    for (int s = 0; s < CT_OPTIM_MAX_SLOTS; s++) {
        const ct_tensor *t = st->slot[s];
        if (!t)
            continue;
        const ct_dtype sd = ct_tensor_dtype(t);
        if (!ct_device_equal(ct_tensor_device(t), dev) || !ct_tensor_is_contiguous(t) ||
            !(sd == dt || (low_float(dt) && sd == CT_F32)))
            return false;
    }
    return true;
}

/* A new reference to a float32 copy of p (no scope owns it). */
static ct_tensor *f32_copy(const ct_tensor *p) {
    ct_scope_begin();
    ct_tensor *t = ct_contiguous(ct_to_dtype(p, CT_F32));
    if (t && t == p)
        t = ct_clone(p);
    if (t)
        ct_retain(t);
    ct_scope_end();
    return t;
}

/* The fused path's state: as ensure_state, with float32 moments and the master copy
 * when uses_master; the max_exp_avg_sq of amsgrad takes exp_avg's dtype. */
static ct_status ensure_fused_state(const ct_optim_options *o, param_state *st, const ct_tensor *p) {
    const bool master = uses_master(o, p);
    if (!st->initialized) {
        st->initialized = true;
        st->step = 0;
    }
    if (master && !st->slot[CT_OPTIM_MASTER] && !(st->slot[CT_OPTIM_MASTER] = f32_copy(p)))
        return ct_last_status();
    const ct_tensor *like = master ? st->slot[CT_OPTIM_MASTER] : p;
    for (int s = 0; s < 3; s++) {
        if (st->slot[s] || (s == 2 && !o->amsgrad))
            continue;
        if (!(st->slot[s] = state_full(s == 2 ? st->slot[0] : like, 0)))
            return ct_last_status();
    }
    return CT_OK;
}

/* One fused call per (device, dtype, step, master copy) of the parameters of group g
 * that take the fused path; done[i] marks them. clip_coef, when given, is a float32
 * one-element tensor on the parameters' device. */
static ct_status fused_group_step(ct_optim_kind kind, param_group *g, bool *done, const ct_tensor *clip_coef) {
    static const char *op = "optimizer.step";
    const int n = g->n;
    if ((kind != CT_OPTIM_ADAM && kind != CT_OPTIM_ADAMW) || g->o.fused == 0)
        return CT_OK;
    ct_tensor **lists = ct_xcalloc(op, (size_t)n * 6, sizeof(ct_tensor *));
    int *member = ct_xcalloc(op, (size_t)n, sizeof(int));
    ct_status st = lists && member ? CT_OK : CT_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < n && !st; i++) {
        ct_tensor *p = g->params[i], *grad = ct_optim_grad(p);
        param_state *ps = &g->state[i];
        done[i] = false;
        if (!grad || !fused_takes(kind, &g->o, ps, p, grad))
            continue;
        if (clip_coef && !ct_device_equal(ct_tensor_device(clip_coef), ct_tensor_device(p)))
            continue;
        st = ensure_fused_state(&g->o, ps, p);
        if (!st && !fused_takes(kind, &g->o, ps, p, grad))
            continue;
        done[i] = !st;
    }
    for (int i = 0; i < n && !st; i++) {
        if (!done[i])
            continue;
        g->state[i].step += 1;
    }
    /* Note [Capturable step]
     * With the capturable option the fused call reads the step number from g->step_t,
     * a float64 tensor on the device of the group's first fused parameter, which a
     * kernel increments here, so that a CUDA graph that captured the step increments
     * and reads it at every replay (Note [Device step] in src/meta/fused_optim.c). It is
     * made at the first step from the host's count; the host counts go on as before
     * (eager steps keep them equal; replays advance the tensor alone, so a state dict
     * saved after replays has the count of the capture). Parameters on another device,
     * or whose count differs from the tensor's, pass their count by value. The learning
     * rate goes the same way, in g->lr_t (Note [Device learning rate]). */
    int cap = -1;
    for (int i = 0; i < n && !st && g->o.capturable && cap < 0; i++)
        if (done[i] && ct_tensor_device(g->params[i]).type == CT_DEVICE_CUDA)
            cap = i;
    if (cap >= 0 && !st) {
        ct_device dev = ct_tensor_device(g->params[cap]);
        if (g->step_t && !ct_device_equal(ct_tensor_device(g->step_t), dev)) {
            ct_release(g->step_t);
            g->step_t = NULL;
            ct_release(g->lr_t);
            g->lr_t = NULL;
        }
        if (!g->step_t) {
            const int64_t before = (int64_t)g->state[cap].step - 1;
            ct_scope_begin();
            ct_tensor *t = ct_scalar_tensor(ct_scalar_float((double)before), CT_F64, dev);
            g->step_t = t ? ct_retain(t) : NULL;
            ct_scope_end();
            g->step_t_value = before;
        }
        if (g->step_t && !g->lr_t) { /* Note [Device learning rate]: with step_t, from the host's lr */
            ct_scope_begin();
            ct_tensor *t = ct_scalar_tensor(ct_scalar_float(g->o.lr), CT_F64, dev);
            g->lr_t = t ? ct_retain(t) : NULL;
            ct_scope_end();
        }
        ct_scope_begin();
        if (!g->step_t || !g->lr_t || !ct_add_scalar_(g->step_t, ct_scalar_float(1.0)))
            st = ct_last_status();
        ct_scope_end();
        g->step_t_value++;
    }
    /* group by (device, dtype, step, master): i0 is the first parameter of a group */
    for (int i0 = 0; i0 < n && !st; i0++) {
        if (!done[i0] || member[i0])
            continue;
        const ct_tensor *p0 = g->params[i0];
        const param_state *s0 = &g->state[i0];
        const bool master = s0->slot[CT_OPTIM_MASTER] != NULL;
        int k = 0;
        for (int i = i0; i < n; i++) {
            const ct_tensor *p = g->params[i];
            const param_state *ps = &g->state[i];
            if (!done[i] || member[i] || ct_tensor_dtype(p) != ct_tensor_dtype(p0) ||
                !ct_device_equal(ct_tensor_device(p), ct_tensor_device(p0)) || ps->step != s0->step ||
                (ps->slot[CT_OPTIM_MASTER] != NULL) != master)
                continue;
            member[i] = 1;
            lists[k] = g->params[i];
            lists[n + k] = ct_optim_grad(p);
            lists[2 * n + k] = ps->slot[0];
            lists[3 * n + k] = ps->slot[1];
            lists[4 * n + k] = ps->slot[2];
            lists[5 * n + k] = ps->slot[CT_OPTIM_MASTER];
            k++;
        }
        const ct_optim_options *o = &g->o;
        if (g->step_t && (int64_t)s0->step == g->step_t_value &&
            ct_device_equal(ct_tensor_device(g->step_t), ct_tensor_device(p0)))
            st = ct_fused_adam_capturable_(
                kind == CT_OPTIM_ADAMW, lists, k, lists + n, k, lists + 2 * n, k, lists + 3 * n, k,
                o->amsgrad ? lists + 4 * n : NULL, o->amsgrad ? k : 0, master ? lists + 5 * n : NULL, master ? k : 0,
                g->step_t, g->lr_t, o->lr, o->beta1, o->beta2, o->weight_decay, o->eps, o->amsgrad, o->maximize,
                NULL, NULL, clip_coef);
        else
            st = (kind == CT_OPTIM_ADAMW ? ct_fused_adamw_ : ct_fused_adam_)(
                lists, k, lists + n, k, lists + 2 * n, k, lists + 3 * n, k, o->amsgrad ? lists + 4 * n : NULL,
                o->amsgrad ? k : 0, master ? lists + 5 * n : NULL, master ? k : 0, (int64_t)s0->step, o->lr,
                o->beta1, o->beta2, o->weight_decay, o->eps, o->amsgrad, o->maximize, NULL, NULL, clip_coef);
    }
    free(lists);
    free(member);
    if (st == CT_ERROR_OUT_OF_MEMORY && !ct_last_status())
        ct_error(st, op, "out of memory");
    return st;
}

static ct_status step_impl(ct_optimizer *opt, const ct_tensor *clip_coef);

/* Under ct_compile a step is one host-call node (Note [Host calls] in
 * src/compile/graph.h): a replay calls it again, so the step count, the learning rate
 * (a scheduler's too) and the lazily made state are read and updated as in an eager
 * step. */
typedef struct step_call {
    ct_optimizer *opt;
    double max_norm, norm_type;
    bool clipped;
} step_call;

static ct_status step_host(void *ctx, ct_tensor **result);

/* As torch.optim's step, the update runs under no_grad: autograd neither records it nor
 * refuses the in-place ops on parameters that require grad. */
ct_status ct_optimizer_step(ct_optimizer *opt) {
    if (!opt)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "optimizer.step", "optimizer is NULL");
    step_call sc = {opt, 0, 0, false};
    return ct_compile_host_call("optimizer.step", step_host, &sc, sizeof sc, NULL);
}

ct_status ct_optimizer_step_clipped(ct_optimizer *opt, double max_norm, double norm_type, ct_tensor **total_norm) {
    static const char *op = "optimizer.step_clipped";
    if (total_norm)
        *total_norm = NULL;
    if (!opt)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "optimizer is NULL");
    step_call sc = {opt, max_norm, norm_type, true};
    return ct_compile_host_call(op, step_host, &sc, sizeof sc, total_norm);
}

static ct_status step_host(void *ctx, ct_tensor **total_norm) {
    const step_call *sc = ctx;
    ct_optimizer *opt = sc->opt;
    if (!sc->clipped) {
        bool prev = ct_set_grad_enabled(false);
        ct_status st = step_impl(opt, NULL);
        ct_set_grad_enabled(prev);
        return st;
    }
    static const char *op = "optimizer.step_clipped";
    const double max_norm = sc->max_norm, norm_type = sc->norm_type;
    int total = 0;
    for (int gi = 0; gi < opt->ngroups; gi++)
        total += opt->groups[gi].n;
    ct_tensor **params = ct_xcalloc(op, (size_t)total, sizeof *params);
    if (!params)
        return CT_ERROR_OUT_OF_MEMORY;
    int k = 0;
    for (int gi = 0; gi < opt->ngroups; gi++)
        for (int i = 0; i < opt->groups[gi].n; i++)
            params[k++] = opt->groups[gi].params[i];
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *norm = NULL, *coef = NULL;
    /* the factor as a device tensor when the gradients allow it (clip.c), else scaled
     * gradients and a plain step */
    ct_status st = ct_optim_clip_coef(params, k, max_norm, norm_type, &norm, &coef);
    if (!st)
        st = step_impl(opt, coef);
    ct_set_grad_enabled(prev);
    free(params);
    if (!st && total_norm)
        *total_norm = norm;
    return st;
}

static ct_status step_impl(ct_optimizer *opt, const ct_tensor *clip_coef) {
    /* Check every gradient first so that a bad one leaves all parameters untouched. */
    for (int gi = 0; gi < opt->ngroups; gi++) {
        param_group *g = &opt->groups[gi];
        for (int i = 0; i < g->n; i++) {
            const ct_tensor *grad = ct_optim_grad(g->params[i]);
            ct_status st = grad ? check_grad(g->params[i], grad, gi, i) : CT_OK;
            if (st)
                return st;
        }
    }
    opt->step_count++;
    for (int gi = 0; gi < opt->ngroups; gi++) {
        param_group *g = &opt->groups[gi];
        bool *done = ct_xcalloc("optimizer.step", (size_t)g->n, sizeof(bool));
        if (!done)
            return CT_ERROR_OUT_OF_MEMORY;
        ct_status fs_st = fused_group_step(opt->kind, g, done, clip_coef);
        for (int i = 0; i < g->n && !fs_st; i++) {
            ct_tensor *p = g->params[i];
            ct_tensor *grad = ct_optim_grad(p);
            if (!grad || done[i])
                continue;
            param_state *st = &g->state[i];
            if (st->slot[CT_OPTIM_MASTER]) { /* stale once another path updates p */
                ct_release(st->slot[CT_OPTIM_MASTER]);
                st->slot[CT_OPTIM_MASTER] = NULL;
            }
            if (clip_coef) {
                ct_scope_begin();
                ct_tensor *r = ct_mul_(grad, clip_coef);
                ct_scope_end();
                if (!r) {
                    fs_st = ct_last_status();
                    break;
                }
            }
            ct_status s = ensure_state(opt->kind, &g->o, st, p);
            if (s) {
                fs_st = s;
                break;
            }
            if (opt->kind != CT_OPTIM_SGD)
                st->step += 1;
            step_consts c;
            fill_consts(opt->kind, &g->o, st, &c);
            const ct_dtype dt = ct_tensor_dtype(p);
            bool fuse = g->o.foreach != 0 && (dt == CT_F32 || dt == CT_F64) && fusable(p, p) &&
                        fusable(grad, p) && !ct_tensor_shares_storage(p, grad);
            for (int k = 0; k < CT_OPTIM_MAX_SLOTS && fuse; k++)
                fuse = !st->slot[k] || fusable(st->slot[k], p);
            if (fuse && opt->kind == CT_OPTIM_SGD && c.has_momentum && c.first) {
                st->slot[0] = state_full(p, 0);
                if (!st->slot[0]) {
                    fs_st = ct_last_status();
                    break;
                }
            }
            if (fuse) {
                s = fused_update(opt->kind, st, p, grad, &c);
            } else {
                ct_scope_begin();
                s = plain_update(opt->kind, st, p, grad, &c);
                ct_scope_end();
            }
            if (s) {
                fs_st = s;
                break;
            }
        }
        free(done);
        if (fs_st)
            return fs_st;
    }
    return CT_OK;
}

static ct_status zero_grad_impl(ct_optimizer *opt, bool set_to_none);

typedef struct zero_grad_call {
    ct_optimizer *opt;
    bool set_to_none;
} zero_grad_call;

static ct_status zero_grad_host(void *ctx, ct_tensor **result) {
    (void)result;
    const zero_grad_call *z = ctx;
    if (z->set_to_none)
        for (int gi = 0; gi < z->opt->ngroups; gi++)
            ct_compile_note_grads_reset(z->opt->groups[gi].params, z->opt->groups[gi].n);
    return zero_grad_impl(z->opt, z->set_to_none);
}

/* Under ct_compile, a host-call node too: a replay sets the .grad fields again. */
ct_status ct_optimizer_zero_grad(ct_optimizer *opt, bool set_to_none) {
    if (!opt)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "zero_grad", "optimizer is NULL");
    if (!ct_compile_is_capturing())
        return zero_grad_impl(opt, set_to_none);
    zero_grad_call z = {opt, set_to_none};
    return ct_compile_host_call("optimizer.zero_grad", zero_grad_host, &z, sizeof z, NULL);
}

static ct_status zero_grad_impl(ct_optimizer *opt, bool set_to_none) {
    for (int gi = 0; gi < opt->ngroups; gi++) {
        param_group *g = &opt->groups[gi];
        for (int i = 0; i < g->n; i++) {
            ct_tensor *grad = ct_optim_grad(g->params[i]);
            if (!grad)
                continue;
            if (set_to_none) {
                ct_optim_set_grad(g->params[i], NULL);
            } else {
                ct_scope_begin();
                ct_tensor *r = ct_zero_(grad);
                ct_scope_end();
                if (!r)
                    return ct_last_status();
            }
        }
    }
    return CT_OK;
}

/* ------------------------------------------------------------ state dict */

/* A copy of t no scope owns, for a state dict. */
static ct_value *tensor_value(const ct_tensor *t) {
    ct_scope_begin();
    ct_tensor *c = ct_clone(t);
    ct_value *v = c ? ct_value_new_tensor(c) : NULL;
    ct_scope_end();
    return v;
}

static ct_value *step_value(ct_optim_kind kind, double step) {
    if (kind == CT_OPTIM_RMSPROP)
        return ct_value_new_int((int64_t)step);
    float f = (float)step;
    ct_scope_begin();
    ct_tensor *t = kind == CT_OPTIM_ADAMW ? ct_from_data(&f, CT_SHAPE(1), CT_F32) : ct_from_data(&f, NULL, 0, CT_F32);
    ct_value *v = t ? ct_value_new_tensor(t) : NULL;
    ct_scope_end();
    return v;
}

static ct_value *foreach_value(int f) {
    return f < 0 ? ct_value_none() : ct_value_new_bool(f != 0);
}

/* Adds key -> item to dict; frees item and returns false on failure. */
static bool put(ct_value *dict, const char *key, ct_value *item) {
    if (!item)
        return false;
    return ct_value_set(dict, key, item) == CT_OK;
}

static ct_value *group_value(const ct_optimizer *opt, const param_group *g, int64_t *next_id) {
    const ct_optim_options *o = &g->o;
    ct_value *d = ct_value_new_dict();
    if (!d)
        return NULL;
    bool ok = put(d, "lr", ct_value_new_float(o->lr));
    switch (opt->kind) {
    case CT_OPTIM_SGD:
        ok = ok && put(d, "momentum", ct_value_new_float(o->momentum)) &&
             put(d, "dampening", ct_value_new_float(o->dampening)) &&
             put(d, "weight_decay", ct_value_new_float(o->weight_decay)) &&
             put(d, "nesterov", ct_value_new_bool(o->nesterov));
        break;
    case CT_OPTIM_ADAM:
    case CT_OPTIM_ADAMW: {
        ct_value *betas = ct_value_new_tuple();
        ok = ok && betas && ct_value_append(betas, ct_value_new_float(o->beta1)) == CT_OK &&
             ct_value_append(betas, ct_value_new_float(o->beta2)) == CT_OK;
        ok = ok && put(d, "betas", betas);
        if (!ok && betas && !ct_value_get(d, "betas"))
            ct_value_free(betas);
        ok = ok && put(d, "eps", ct_value_new_float(o->eps)) &&
             put(d, "weight_decay", ct_value_new_float(o->weight_decay)) &&
             put(d, "amsgrad", ct_value_new_bool(o->amsgrad));
        break;
    }
    case CT_OPTIM_RMSPROP:
        ok = ok && put(d, "momentum", ct_value_new_float(o->momentum)) &&
             put(d, "alpha", ct_value_new_float(o->alpha)) && put(d, "eps", ct_value_new_float(o->eps)) &&
             put(d, "centered", ct_value_new_bool(o->centered)) &&
             put(d, "weight_decay", ct_value_new_float(o->weight_decay));
        break;
    case CT_OPTIM_ADAGRAD:
        ok = ok && put(d, "lr_decay", ct_value_new_float(o->lr_decay)) &&
             put(d, "eps", ct_value_new_float(o->eps)) &&
             put(d, "weight_decay", ct_value_new_float(o->weight_decay)) &&
             put(d, "initial_accumulator_value", ct_value_new_float(o->initial_accumulator_value));
        break;
    }
    ok = ok && put(d, "maximize", ct_value_new_bool(o->maximize)) && put(d, "foreach", foreach_value(o->foreach));
    if (ok && g->has_initial_lr)
        ok = put(d, "initial_lr", ct_value_new_float(g->initial_lr));
    ct_value *ids = ok ? ct_value_new_list() : NULL;
    for (int i = 0; ids && i < g->n; i++)
        if (ct_value_append(ids, ct_value_new_int((*next_id)++)) != CT_OK) {
            ct_value_free(ids);
            ids = NULL;
        }
    ok = ids && put(d, "params", ids);
    if (!ok) {
        ct_value_free(d);
        return NULL;
    }
    return d;
}

static ct_value *param_state_value(ct_optim_kind kind, const param_state *st) {
    ct_value *d = ct_value_new_dict();
    if (!d)
        return NULL;
    bool ok = true;
    if (kind != CT_OPTIM_SGD)
        ok = put(d, "step", step_value(kind, st->step));
    for (int s = 0; ok && s < CT_OPTIM_MAX_SLOTS; s++) {
        const char *name = slot_names[kind][s];
        if (!name)
            continue;
        if (st->slot[s])
            ok = put(d, name, tensor_value(st->slot[s]));
        else if (kind == CT_OPTIM_SGD)
            ok = put(d, name, ct_value_none()); /* torch keeps momentum_buffer = None */
    }
    if (!ok) {
        ct_value_free(d);
        return NULL;
    }
    return d;
}

ct_value *ct_optimizer_state_dict(const ct_optimizer *opt) {
    if (!opt) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "state_dict", "optimizer is NULL");
        return NULL;
    }
    ct_value *root = ct_value_new_dict(), *state = ct_value_new_dict(), *groups = ct_value_new_list();
    if (!root || !state || !groups)
        goto fail;
    int64_t id = 0;
    for (int gi = 0; gi < opt->ngroups; gi++) {
        const param_group *g = &opt->groups[gi];
        for (int i = 0; i < g->n; i++, id++) {
            if (!g->state[i].initialized)
                continue;
            ct_value *sv = param_state_value(opt->kind, &g->state[i]);
            if (!sv || ct_value_set_int(state, id, sv) != CT_OK)
                goto fail;
        }
    }
    id = 0;
    for (int gi = 0; gi < opt->ngroups; gi++) {
        ct_value *gv = group_value(opt, &opt->groups[gi], &id);
        if (!gv || ct_value_append(groups, gv) != CT_OK)
            goto fail;
    }
    /* ct_value_set takes each value, also when it fails */
    ct_value *s = state;
    state = NULL;
    if (ct_value_set(root, "state", s) != CT_OK)
        goto fail;
    ct_value *gr = groups;
    groups = NULL;
    if (ct_value_set(root, "param_groups", gr) != CT_OK)
        goto fail;
    return root;
fail:
    ct_value_free(root);
    ct_value_free(state);
    ct_value_free(groups);
    if (!ct_last_status())
        ct_error(CT_ERROR_OUT_OF_MEMORY, "state_dict", "out of memory");
    return NULL;
}

/* Reading values from a dict a user (or a file) gave us: every kind is checked. */
static ct_status read_number(const ct_value *d, const char *key, double *out, const char *op) {
    const ct_value *v = ct_value_get(d, key);
    if (!v)
        return CT_OK; /* absent keys keep the current setting */
    ct_value_type k = ct_value_kind(v);
    if (k == CT_VALUE_FLOAT || k == CT_VALUE_INT) {
        *out = ct_value_float(v);
        return CT_OK;
    }
    if (k == CT_VALUE_BOOL) {
        *out = ct_value_bool(v) ? 1 : 0;
        return CT_OK;
    }
    return ct_error(CT_ERROR_VALUE, op, "param group entry '%s' should be a number, got %s", key,
                    ct_value_type_name(k));
}

static ct_status read_bool(const ct_value *d, const char *key, bool *out, const char *op) {
    double x = *out ? 1 : 0;
    ct_status st = read_number(d, key, &x, op);
    *out = x != 0;
    return st;
}

static ct_status read_group(ct_optim_kind kind, const ct_value *d, ct_optim_options *o, bool *has_init,
                            double *init, const char *op) {
    ct_status st = read_number(d, "lr", &o->lr, op);
    st = st ? st : read_number(d, "weight_decay", &o->weight_decay, op);
    st = st ? st : read_number(d, "momentum", &o->momentum, op);
    st = st ? st : read_number(d, "dampening", &o->dampening, op);
    st = st ? st : read_bool(d, "nesterov", &o->nesterov, op);
    st = st ? st : read_number(d, "eps", &o->eps, op);
    st = st ? st : read_bool(d, "amsgrad", &o->amsgrad, op);
    st = st ? st : read_number(d, "alpha", &o->alpha, op);
    st = st ? st : read_bool(d, "centered", &o->centered, op);
    st = st ? st : read_number(d, "lr_decay", &o->lr_decay, op);
    st = st ? st : read_number(d, "initial_accumulator_value", &o->initial_accumulator_value, op);
    st = st ? st : read_bool(d, "maximize", &o->maximize, op);
    if (st)
        return st;
    const ct_value *betas = ct_value_get(d, "betas");
    if (betas) {
        ct_value_type k = ct_value_kind(betas);
        if ((k != CT_VALUE_TUPLE && k != CT_VALUE_LIST) || ct_value_len(betas) != 2)
            return ct_error(CT_ERROR_VALUE, op, "param group entry 'betas' should be a pair of numbers");
        for (int i = 0; i < 2; i++) {
            const ct_value *b = ct_value_at(betas, i);
            if (ct_value_kind(b) != CT_VALUE_FLOAT && ct_value_kind(b) != CT_VALUE_INT)
                return ct_error(CT_ERROR_VALUE, op, "param group entry 'betas' should be a pair of numbers");
        }
        o->beta1 = ct_value_float(ct_value_at(betas, 0));
        o->beta2 = ct_value_float(ct_value_at(betas, 1));
    }
    const ct_value *fe = ct_value_get(d, "foreach");
    if (fe)
        o->foreach = ct_value_kind(fe) == CT_VALUE_NONE ? -1 : ct_value_bool(fe) ? 1 : 0;
    const ct_value *il = ct_value_get(d, "initial_lr");
    if (il) {
        *has_init = true;
        st = read_number(d, "initial_lr", init, op);
        if (st)
            return st;
    }
    return validate(op, kind, o);
}

/* The parameter id of a "state" key: torch writes ints; a round trip through a
 * format with string keys gives decimal strings. */
static bool key_id(const ct_value *k, int64_t *id) {
    if (ct_value_kind(k) == CT_VALUE_INT) {
        *id = ct_value_int(k);
        return true;
    }
    if (ct_value_kind(k) == CT_VALUE_STRING) {
        const char *s = ct_value_str(k, NULL);
        char *end = NULL;
        long long x = strtoll(s, &end, 10);
        if (*s && end && *end == '\0') {
            *id = x;
            return true;
        }
    }
    return false;
}

static ct_status read_step(const ct_value *v, double *out, const char *op) {
    ct_value_type k = ct_value_kind(v);
    if (k == CT_VALUE_INT || k == CT_VALUE_FLOAT) {
        *out = ct_value_float(v);
        return CT_OK;
    }
    if (k == CT_VALUE_TENSOR) {
        ct_scope_begin();
        ct_tensor *t = ct_value_tensor(v);
        ct_status st = t && ct_tensor_numel(t) == 1 ? ct_item_double(t, out) : CT_ERROR_VALUE;
        ct_scope_end();
        if (st)
            return ct_error(CT_ERROR_VALUE, op, "state entry 'step' should be a one-element tensor or a number");
        return CT_OK;
    }
    return ct_error(CT_ERROR_VALUE, op, "state entry 'step' should be a number, got %s", ct_value_type_name(k));
}

/* A copy of the dict's tensor converted to p's dtype and device (new, scope-free). */
static ct_tensor *state_copy(const ct_value *v, const ct_tensor *p, const char *name, int64_t id, const char *op) {
    if (ct_value_kind(v) != CT_VALUE_TENSOR) {
        ct_error(CT_ERROR_VALUE, op, "state entry '%s' of parameter %lld should be a tensor, got %s", name,
                 (long long)id, ct_value_type_name(ct_value_kind(v)));
        return NULL;
    }
    ct_scope_begin();
    ct_tensor *t = ct_value_tensor(v), *r = NULL;
    char a[64], b[64];
    if (t && !same_shape(t, p)) {
        ct_error(CT_ERROR_VALUE, op, "state entry '%s' of parameter %lld has shape %s, but the parameter has %s",
                 name, (long long)id, ct_shape_str(ct_tensor_shape(t), ct_tensor_dim(t), a, sizeof a),
                 ct_shape_str(ct_tensor_shape(p), ct_tensor_dim(p), b, sizeof b));
    } else if (t) {
        r = ct_empty(ct_tensor_shape(p), ct_tensor_dim(p), ct_tensor_dtype(p), ct_tensor_device(p));
        if (r && ct_copy_(r, t))
            ct_retain(r);
        else
            r = NULL;
    }
    ct_scope_end();
    return r;
}

ct_status ct_optimizer_load_state_dict(ct_optimizer *opt, const ct_value *sd) {
    static const char *op = "load_state_dict";
    if (!opt || !sd)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", !opt ? "optimizer" : "state_dict");
    if (ct_value_kind(sd) != CT_VALUE_DICT)
        return ct_error(CT_ERROR_VALUE, op, "state_dict should be a dict, got %s",
                        ct_value_type_name(ct_value_kind(sd)));
    const ct_value *state = ct_value_get(sd, "state"), *groups = ct_value_get(sd, "param_groups");
    if (!state || !groups || ct_value_kind(state) != CT_VALUE_DICT || ct_value_kind(groups) != CT_VALUE_LIST)
        return ct_error(CT_ERROR_VALUE, op, "state_dict needs a 'state' dict and a 'param_groups' list");
    if (ct_value_len(groups) != opt->ngroups)
        return ct_error(CT_ERROR_VALUE, op, "loaded state dict has a different number of parameter groups");
    /* Validate everything into new group settings and states first, then commit, so a
     * bad dict leaves the optimizer as it was. */
    int64_t total = 0;
    for (int gi = 0; gi < opt->ngroups; gi++)
        total += opt->groups[gi].n;
    ct_optim_options *opts = ct_xcalloc(op, (size_t)opt->ngroups, sizeof *opts);
    bool *has_init = ct_xcalloc(op, (size_t)opt->ngroups, sizeof *has_init);
    double *inits = ct_xcalloc(op, (size_t)opt->ngroups, sizeof *inits);
    param_state *ns = ct_xcalloc(op, (size_t)total, sizeof *ns);
    ct_status st = CT_OK;
    if (!opts || !has_init || !inits || !ns) {
        st = CT_ERROR_OUT_OF_MEMORY;
        goto done;
    }
    int64_t base = 0;
    for (int gi = 0; gi < opt->ngroups && !st; gi++) {
        const param_group *g = &opt->groups[gi];
        const ct_value *gv = ct_value_at(groups, gi);
        const ct_value *ids = ct_value_kind(gv) == CT_VALUE_DICT ? ct_value_get(gv, "params") : NULL;
        if (!ids || ct_value_kind(ids) != CT_VALUE_LIST) {
            st = ct_error(CT_ERROR_VALUE, op, "param group %d has no 'params' list", gi);
            break;
        }
        if (ct_value_len(ids) != g->n) {
            st = ct_error(CT_ERROR_VALUE, op,
                          "loaded state dict contains a parameter group that doesn't match the size of "
                          "optimizer's group");
            break;
        }
        opts[gi] = g->o;
        has_init[gi] = g->has_initial_lr;
        inits[gi] = g->initial_lr;
        st = read_group(opt->kind, gv, &opts[gi], &has_init[gi], &inits[gi], op);
        for (int i = 0; i < g->n && !st; i++) {
            const ct_value *idv = ct_value_at(ids, i);
            int64_t id;
            if (!key_id(idv, &id)) {
                st = ct_error(CT_ERROR_VALUE, op, "param group %d: parameter ids should be integers", gi);
                break;
            }
            const ct_value *pv = NULL;
            for (int64_t k = 0; k < ct_value_len(state); k++) {
                int64_t kid;
                if (key_id(ct_value_key_at(state, k), &kid) && kid == id) {
                    pv = ct_value_at(state, k);
                    break;
                }
            }
            param_state *nst = &ns[base + i];
            if (!pv)
                continue;
            if (ct_value_kind(pv) != CT_VALUE_DICT) {
                st = ct_error(CT_ERROR_VALUE, op, "state of parameter %lld should be a dict", (long long)id);
                break;
            }
            nst->initialized = true;
            const ct_value *sv = ct_value_get(pv, "step");
            if (sv)
                st = read_step(sv, &nst->step, op);
            else if (opt->kind != CT_OPTIM_SGD)
                st = ct_error(CT_ERROR_VALUE, op, "state of parameter %lld has no 'step'", (long long)id);
            for (int s = 0; s < CT_OPTIM_MAX_SLOTS && !st; s++) {
                const char *name = slot_names[opt->kind][s];
                const ct_value *tv = name ? ct_value_get(pv, name) : NULL;
                if (!tv || ct_value_kind(tv) == CT_VALUE_NONE)
                    continue;
                nst->slot[s] = state_copy(tv, g->params[i], name, id, op);
                if (!nst->slot[s])
                    st = ct_last_status();
            }
        }
        base += g->n;
    }
    if (!st) {
        base = 0;
        for (int gi = 0; gi < opt->ngroups; gi++) {
            param_group *g = &opt->groups[gi];
            g->o = opts[gi];
            g->has_initial_lr = has_init[gi];
            g->initial_lr = inits[gi];
            ct_release(g->step_t); /* made again from the loaded steps */
            g->step_t = NULL;
            ct_release(g->lr_t); /* and from the loaded lr (Note [Device learning rate]) */
            g->lr_t = NULL;
            for (int i = 0; i < g->n; i++) {
                param_state old = g->state[i];
                g->state[i] = ns[base + i];
                ns[base + i] = old; /* freed below */
            }
            base += g->n;
        }
    }
done:
    if (ns)
        for (int64_t i = 0; i < total; i++)
            for (int s = 0; s < CT_OPTIM_MAX_SLOTS; s++)
                ct_release(ns[i].slot[s]);
    free(ns);
    free(opts);
    free(has_init);
    free(inits);
    if (st == CT_ERROR_OUT_OF_MEMORY && !ct_last_status())
        ct_error(st, op, "out of memory");
    return st;
}
