/* Learning-rate schedulers (torch.optim.lr_scheduler). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "optim/optim_internal.h"

/* Note [Chainable schedules]
 * torch's schedulers compute most new learning rates from the group's current lr
 * (StepLR multiplies it by gamma at each boundary, CosineAnnealingLR uses a ratio of
 * consecutive cosines) rather than from a closed form, so that several schedulers can
 * act on one optimizer and a user's change to the lr is carried forward. The
 * roundings differ from the closed form in the last bits, and the closed form is used
 * only where torch uses it (a SequentialLR switching to its next scheduler calls
 * step(0)). Each get_lr below follows torch's expression term by term, so the
 * sequences match torch's to the last bits or nearly. */

typedef enum sched_kind {
    S_STEP = 0,
    S_MULTISTEP,
    S_EXPONENTIAL,
    S_COSINE,
    S_LINEAR,
    S_LAMBDA,
    S_SEQUENTIAL,
    S_ONECYCLE,
    S_PLATEAU,
} sched_kind;

static const char *const sched_names[] = {"StepLR",     "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
                                          "LinearLR",   "LambdaLR",    "SequentialLR",  "OneCycleLR",
                                          "ReduceLROnPlateau"};

typedef struct phase {
    double end_step;
    int start_lr, end_lr, start_mom, end_mom; /* indices into the per-group values */
} phase;
enum { V_INITIAL = 0, V_MAX, V_MIN, V_MAXMOM, V_BASEMOM, V_COUNT };

struct ct_lr_scheduler {
    sched_kind kind;
    ct_optimizer *opt;
    int ngroups;
    int64_t last_epoch, step_count;
    double *base_lrs, *last_lr;
    bool owned; /* by a SequentialLR */
    /* configuration */
    int64_t step_size;
    double gamma;
    int64_t *milestones; /* MultiStepLR: sorted; SequentialLR: as given */
    int nmilestones;
    int64_t t_max;
    double eta_min;
    double start_factor, end_factor;
    int64_t total_iters;
    ct_lr_lambda_fn fn;
    void *user_data;
    ct_lr_scheduler **children;
    int nchildren;
    ct_onecycle_options oc;
    phase phases[3];
    int nphases;
    double *values[V_COUNT]; /* OneCycleLR, per group */
    ct_plateau_options pl;
    double best;
    int64_t num_bad_epochs, cooldown_counter;
};

void ct_lr_scheduler_free(ct_lr_scheduler *s) {
    if (!s)
        return;
    for (int i = 0; i < s->nchildren; i++)
        ct_lr_scheduler_free(s->children[i]);
    free(s->children);
    free(s->milestones);
    free(s->base_lrs);
    free(s->last_lr);
    for (int v = 0; v < V_COUNT; v++)
        free(s->values[v]);
    free(s);
}

static ct_lr_scheduler *sched_alloc(ct_optimizer *opt, sched_kind kind, const char *op) {
    if (!opt) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "optimizer is NULL");
        return NULL;
    }
    ct_lr_scheduler *s = ct_xcalloc(op, 1, sizeof *s);
    if (!s)
        return NULL;
    s->kind = kind;
    s->opt = opt;
    s->ngroups = ct_optimizer_num_groups(opt);
    s->base_lrs = ct_xcalloc(op, (size_t)s->ngroups, sizeof(double));
    s->last_lr = ct_xcalloc(op, (size_t)s->ngroups, sizeof(double));
    if (!s->base_lrs || !s->last_lr) {
        ct_lr_scheduler_free(s);
        return NULL;
    }
    return s;
}

static ct_status check_groups(const ct_lr_scheduler *s, const char *op) {
    if (ct_optimizer_num_groups(s->opt) != s->ngroups)
        return ct_error(CT_ERROR_VALUE, op,
                        "the optimizer has %d param groups but the scheduler was made for %d; make the scheduler "
                        "after adding every group",
                        ct_optimizer_num_groups(s->opt), s->ngroups);
    return CT_OK;
}

/* ------------------------------------------------------------ get_lr */

static double group_lr(const ct_lr_scheduler *s, int g) {
    return ct_optimizer_get_lr(s->opt, g);
}

static int64_t milestone_count(const ct_lr_scheduler *s, int64_t epoch) {
    int64_t c = 0;
    for (int i = 0; i < s->nmilestones; i++)
        c += s->milestones[i] == epoch;
    return c;
}

static double anneal(const ct_lr_scheduler *s, double start, double end, double pct) {
    if (s->oc.anneal_strategy == CT_ANNEAL_LINEAR)
        return (end - start) * pct + start;
    double cos_out = cos(M_PI * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
}

/* The chainable rule (torch's get_lr) for group g. */
static ct_status get_lr(ct_lr_scheduler *s, int g, double *out) {
    const int64_t e = s->last_epoch;
    const double lr = group_lr(s, g);
    switch (s->kind) {
    case S_STEP:
        *out = (e == 0 || e % s->step_size != 0) ? lr : lr * s->gamma;
        break;
    case S_MULTISTEP: {
        int64_t c = milestone_count(s, e);
        *out = c == 0 ? lr : lr * pow(s->gamma, (double)c);
        break;
    }
    case S_EXPONENTIAL:
        *out = e == 0 ? lr : lr * s->gamma;
        break;
    case S_COSINE: {
        const double T = (double)s->t_max, base = s->base_lrs[g], mn = s->eta_min;
        if (e == 0)
            *out = lr;
        else if (s->step_count == 1 && e > 0)
            *out = mn + (base - mn) * (1 + cos((double)e * M_PI / T)) / 2;
        else if ((e - 1 - s->t_max) % (2 * s->t_max) == 0)
            *out = lr + (base - mn) * (1 - cos(M_PI / T)) / 2;
        else
            *out = (1 + cos(M_PI * (double)e / T)) / (1 + cos(M_PI * (double)(e - 1) / T)) * (lr - mn) + mn;
        break;
    }
    case S_LINEAR: {
        const double sf = s->start_factor, ef = s->end_factor;
        if (e == 0)
            *out = lr * sf;
        else if (e > s->total_iters)
            *out = lr;
        else
            *out = lr * (1. + (ef - sf) / ((double)s->total_iters * sf + (double)(e - 1) * (ef - sf)));
        break;
    }
    case S_LAMBDA:
        *out = s->base_lrs[g] * s->fn(e, s->user_data);
        break;
    case S_ONECYCLE: {
        if (e > s->oc.total_steps)
            return ct_error(CT_ERROR_VALUE, "OneCycleLR.step",
                            "Tried to step %lld times. The specified number of total steps is %lld",
                            (long long)(e + 1), (long long)s->oc.total_steps);
        double start_step = 0, pct = 0;
        const phase *ph = &s->phases[s->nphases - 1];
        for (int i = 0; i < s->nphases; i++) {
            if ((double)e <= s->phases[i].end_step || i == s->nphases - 1) {
                ph = &s->phases[i];
                break;
            }
            start_step = s->phases[i].end_step;
        }
        pct = ((double)e - start_step) / (ph->end_step - start_step);
        *out = anneal(s, s->values[ph->start_lr][g], s->values[ph->end_lr][g], pct);
        if (s->oc.cycle_momentum)
            ct_optimizer_put_momentum(s->opt, g,
                                      anneal(s, s->values[ph->start_mom][g], s->values[ph->end_mom][g], pct));
        break;
    }
    default:
        *out = lr;
        break;
    }
    return CT_OK;
}

/* torch's _get_closed_form_lr, for the schedulers that have one. */
static bool closed_form(const ct_lr_scheduler *s, int g, double *out) {
    const int64_t e = s->last_epoch;
    const double base = s->base_lrs[g];
    switch (s->kind) {
    case S_STEP:
        *out = base * pow(s->gamma, (double)(e / s->step_size - ((e % s->step_size < 0) ? 1 : 0)));
        return true;
    case S_MULTISTEP: {
        int64_t c = 0;
        for (int i = 0; i < s->nmilestones; i++)
            c += s->milestones[i] <= e;
        *out = base * pow(s->gamma, (double)c);
        return true;
    }
    case S_EXPONENTIAL:
        *out = base * pow(s->gamma, (double)e);
        return true;
    case S_COSINE:
        *out = s->eta_min + (base - s->eta_min) * (1 + cos(M_PI * (double)e / (double)s->t_max)) / 2;
        return true;
    case S_LINEAR: {
        int64_t m = s->total_iters < e ? s->total_iters : e;
        *out = base * (s->start_factor + (s->end_factor - s->start_factor) * (double)m / (double)s->total_iters);
        return true;
    }
    default:
        return false;
    }
}

/* _LRScheduler.step(epoch): with_epoch selects the closed form at `epoch`. */
static ct_status base_step(ct_lr_scheduler *s, bool with_epoch, int64_t epoch) {
    ct_status st = check_groups(s, "lr_scheduler.step");
    if (st)
        return st;
    s->step_count++;
    s->last_epoch = with_epoch ? epoch : s->last_epoch + 1;
    double *vals = ct_xcalloc("lr_scheduler.step", (size_t)s->ngroups, sizeof(double));
    if (!vals)
        return CT_ERROR_OUT_OF_MEMORY;
    for (int g = 0; g < s->ngroups && !st; g++)
        if (!(with_epoch && closed_form(s, g, &vals[g])))
            st = get_lr(s, g, &vals[g]);
    for (int g = 0; g < s->ngroups && !st; g++) {
        st = ct_optimizer_put_lr(s->opt, g, vals[g]);
        if (!st)
            s->last_lr[g] = vals[g];
    }
    free(vals);
    return st;
}

static ct_status sequential_step(ct_lr_scheduler *s) {
    s->last_epoch++;
    int idx = 0;
    while (idx < s->nmilestones && s->milestones[idx] <= s->last_epoch)
        idx++;
    ct_lr_scheduler *c = s->children[idx];
    ct_status st;
    if (idx > 0 && s->milestones[idx - 1] == s->last_epoch)
        st = base_step(c, true, 0);
    else
        st = base_step(c, false, 0);
    if (!st)
        memcpy(s->last_lr, c->last_lr, sizeof(double) * (size_t)s->ngroups);
    return st;
}

ct_status ct_lr_scheduler_step(ct_lr_scheduler *s) {
    if (!s)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "lr_scheduler.step", "scheduler is NULL");
    if (s->kind == S_PLATEAU)
        return ct_error(CT_ERROR_VALUE, "lr_scheduler.step",
                        "ReduceLROnPlateau steps on a metric: use ct_lr_scheduler_step_metric");
    if (s->kind == S_SEQUENTIAL)
        return sequential_step(s);
    return base_step(s, false, 0);
}

static bool plateau_better(const ct_lr_scheduler *s, double a, double best) {
    const ct_plateau_options *o = &s->pl;
    if (!o->mode_max && !o->threshold_abs)
        return a < best * (1. - o->threshold);
    if (!o->mode_max)
        return a < best - o->threshold;
    if (!o->threshold_abs)
        return a > best * (o->threshold + 1.);
    return a > best + o->threshold;
}

ct_status ct_lr_scheduler_step_metric(ct_lr_scheduler *s, double metric) {
    static const char *op = "ReduceLROnPlateau.step";
    if (!s)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "scheduler is NULL");
    if (s->kind != S_PLATEAU)
        return ct_error(CT_ERROR_VALUE, op, "%s does not take a metric: use ct_lr_scheduler_step",
                        sched_names[s->kind]);
    ct_status st = check_groups(s, op);
    if (st)
        return st;
    s->last_epoch++;
    if (plateau_better(s, metric, s->best)) {
        s->best = metric;
        s->num_bad_epochs = 0;
    } else {
        s->num_bad_epochs++;
    }
    if (s->cooldown_counter > 0) {
        s->cooldown_counter--;
        s->num_bad_epochs = 0; /* bad epochs in cooldown do not count */
    }
    if (s->num_bad_epochs > s->pl.patience) {
        for (int g = 0; g < s->ngroups; g++) {
            double old_lr = group_lr(s, g);
            double new_lr = fmax(old_lr * s->pl.factor, s->pl.min_lr);
            if (old_lr - new_lr > s->pl.eps && (st = ct_optimizer_put_lr(s->opt, g, new_lr)))
                return st;
        }
        s->cooldown_counter = s->pl.cooldown;
        s->num_bad_epochs = 0;
    }
    for (int g = 0; g < s->ngroups; g++)
        s->last_lr[g] = group_lr(s, g);
    return CT_OK;
}

/* ------------------------------------------------------------ construction */

/* _LRScheduler.__init__ with last_epoch = -1: initial_lr defaults to lr, then the
 * initial step. */
static ct_lr_scheduler *finish_init(ct_lr_scheduler *s) {
    for (int g = 0; g < s->ngroups; g++) {
        if (!ct_optimizer_has_initial_lr(s->opt, g))
            ct_optimizer_set_initial_lr(s->opt, g, group_lr(s, g));
        s->base_lrs[g] = ct_optimizer_initial_lr(s->opt, g);
    }
    s->last_epoch = -1;
    s->step_count = 0;
    if (base_step(s, false, 0)) {
        ct_lr_scheduler_free(s);
        return NULL;
    }
    return s;
}

ct_lr_scheduler *ct_steplr_new(ct_optimizer *opt, int64_t step_size, double gamma) {
    if (opt && step_size < 1) {
        ct_error(CT_ERROR_VALUE, "StepLR", "step_size must be a positive integer, got %lld", (long long)step_size);
        return NULL;
    }
    ct_lr_scheduler *s = sched_alloc(opt, S_STEP, "StepLR");
    if (!s)
        return NULL;
    s->step_size = step_size;
    s->gamma = gamma;
    return finish_init(s);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

ct_lr_scheduler *ct_multisteplr_new(ct_optimizer *opt, const int64_t *milestones, int n, double gamma) {
    if (opt && (n < 0 || (n > 0 && !milestones))) {
        ct_error(n < 0 ? CT_ERROR_VALUE : CT_ERROR_NULL_ARGUMENT, "MultiStepLR",
                 "milestones must be a list of n >= 0 epochs");
        return NULL;
    }
    ct_lr_scheduler *s = sched_alloc(opt, S_MULTISTEP, "MultiStepLR");
    if (!s)
        return NULL;
    s->milestones = ct_xcalloc("MultiStepLR", (size_t)(n > 0 ? n : 1), sizeof(int64_t));
    if (!s->milestones) {
        ct_lr_scheduler_free(s);
        return NULL;
    }
    if (n > 0)
        memcpy(s->milestones, milestones, sizeof(int64_t) * (size_t)n);
    qsort(s->milestones, (size_t)n, sizeof(int64_t), cmp_i64);
    s->nmilestones = n;
    s->gamma = gamma;
    return finish_init(s);
}

ct_lr_scheduler *ct_exponentiallr_new(ct_optimizer *opt, double gamma) {
    ct_lr_scheduler *s = sched_alloc(opt, S_EXPONENTIAL, "ExponentialLR");
    if (!s)
        return NULL;
    s->gamma = gamma;
    return finish_init(s);
}

ct_lr_scheduler *ct_cosineannealinglr_new(ct_optimizer *opt, int64_t t_max, double eta_min) {
    if (opt && t_max < 1) {
        ct_error(CT_ERROR_VALUE, "CosineAnnealingLR", "T_max must be a positive integer, got %lld", (long long)t_max);
        return NULL;
    }
    ct_lr_scheduler *s = sched_alloc(opt, S_COSINE, "CosineAnnealingLR");
    if (!s)
        return NULL;
    s->t_max = t_max;
    s->eta_min = eta_min;
    return finish_init(s);
}

ct_lr_scheduler *ct_linearlr_new(ct_optimizer *opt, double start_factor, double end_factor, int64_t total_iters) {
    static const char *op = "LinearLR";
    if (opt) {
        if (!(start_factor > 0 && start_factor <= 1.0)) {
            ct_error(CT_ERROR_VALUE, op,
                     "Starting multiplicative factor expected to be greater than 0 and less or equal to 1.");
            return NULL;
        }
        if (!(end_factor >= 0 && end_factor <= 1.0)) {
            ct_error(CT_ERROR_VALUE, op, "Ending multiplicative factor expected to be between 0 and 1.");
            return NULL;
        }
        if (total_iters < 1) {
            ct_error(CT_ERROR_VALUE, op, "total_iters must be a positive integer, got %lld", (long long)total_iters);
            return NULL;
        }
    }
    ct_lr_scheduler *s = sched_alloc(opt, S_LINEAR, op);
    if (!s)
        return NULL;
    s->start_factor = start_factor;
    s->end_factor = end_factor;
    s->total_iters = total_iters;
    return finish_init(s);
}

ct_lr_scheduler *ct_lambdalr_new(ct_optimizer *opt, ct_lr_lambda_fn fn, void *user_data) {
    if (opt && !fn) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "LambdaLR", "lr_lambda is NULL");
        return NULL;
    }
    ct_lr_scheduler *s = sched_alloc(opt, S_LAMBDA, "LambdaLR");
    if (!s)
        return NULL;
    s->fn = fn;
    s->user_data = user_data;
    return finish_init(s);
}

ct_lr_scheduler *ct_sequentiallr_new(ct_optimizer *opt, ct_lr_scheduler *const *schedulers, int n,
                                     const int64_t *milestones, int nmilestones) {
    static const char *op = "SequentialLR";
    ct_status st = CT_OK;
    ct_lr_scheduler *s = NULL;
    if (!opt)
        st = ct_error(CT_ERROR_NULL_ARGUMENT, op, "optimizer is NULL");
    else if (!schedulers || n < 1)
        st = ct_error(schedulers ? CT_ERROR_VALUE : CT_ERROR_NULL_ARGUMENT, op, "needs at least one scheduler");
    else if (nmilestones != n - 1)
        st = ct_error(CT_ERROR_VALUE, op,
                      "Sequential Schedulers expects number of schedulers provided to be one more than the number "
                      "of milestone points, but got number of schedulers %d and the number of milestones to be "
                      "equal to %d",
                      n, nmilestones);
    else if (nmilestones > 0 && !milestones)
        st = ct_error(CT_ERROR_NULL_ARGUMENT, op, "milestones is NULL");
    for (int i = 0; !st && i < n; i++) {
        const ct_lr_scheduler *c = schedulers[i];
        if (!c)
            st = ct_error(CT_ERROR_NULL_ARGUMENT, op, "scheduler %d is NULL", i);
        else if (c->opt != opt)
            st = ct_error(CT_ERROR_VALUE, op,
                          "Sequential Schedulers expects all schedulers to belong to the same optimizer, but got "
                          "schedulers at index %d to be different than the optimizer passed in.",
                          i);
        else if (c->kind == S_SEQUENTIAL || c->kind == S_PLATEAU)
            st = ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "%s cannot be part of a SequentialLR", sched_names[c->kind]);
        else if (c->owned)
            st = ct_error(CT_ERROR_VALUE, op, "scheduler %d already belongs to another SequentialLR", i);
        for (int j = 0; !st && j < i; j++)
            if (schedulers[j] == c)
                st = ct_error(CT_ERROR_VALUE, op, "scheduler %d appears twice", i);
    }
    if (!st) {
        s = sched_alloc(opt, S_SEQUENTIAL, op);
        if (s) {
            s->children = ct_xcalloc(op, (size_t)n, sizeof(ct_lr_scheduler *));
            s->milestones = ct_xcalloc(op, (size_t)n, sizeof(int64_t));
        }
        if (!s || !s->children || !s->milestones)
            st = CT_ERROR_OUT_OF_MEMORY;
    }
    if (st) {
        /* ownership passes even on error, so the caller never frees them twice */
        for (int i = 0; schedulers && i < n; i++) {
            bool dup = false;
            for (int j = 0; j < i; j++)
                dup = dup || schedulers[j] == schedulers[i];
            if (schedulers[i] && !schedulers[i]->owned && !dup)
                ct_lr_scheduler_free(schedulers[i]);
        }
        ct_lr_scheduler_free(s);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        s->children[i] = schedulers[i];
        schedulers[i]->owned = true;
    }
    s->nchildren = n;
    if (nmilestones > 0)
        memcpy(s->milestones, milestones, sizeof(int64_t) * (size_t)nmilestones);
    s->nmilestones = nmilestones;
    s->last_epoch = 0;
    for (int g = 0; g < s->ngroups; g++) {
        s->base_lrs[g] = ct_optimizer_initial_lr(opt, g);
        if (ct_optimizer_put_lr(opt, g, s->base_lrs[g])) {
            ct_lr_scheduler_free(s);
            return NULL;
        }
    }
    for (int i = 0; i < n; i++)
        s->children[i]->last_epoch -= 1;
    ct_lr_scheduler *first = s->children[0];
    first->step_count = 0;
    if (base_step(first, false, 0)) {
        ct_lr_scheduler_free(s);
        return NULL;
    }
    memcpy(s->last_lr, first->last_lr, sizeof(double) * (size_t)s->ngroups);
    return s;
}

ct_onecycle_options ct_onecycle_defaults(double max_lr, int64_t total_steps) {
    ct_onecycle_options o;
    memset(&o, 0, sizeof o);
    o.max_lr = max_lr;
    o.total_steps = total_steps;
    o.pct_start = 0.3;
    o.anneal_strategy = CT_ANNEAL_COS;
    o.cycle_momentum = true;
    o.base_momentum = 0.85;
    o.max_momentum = 0.95;
    o.div_factor = 25.;
    o.final_div_factor = 1e4;
    return o;
}

ct_lr_scheduler *ct_onecyclelr_new(ct_optimizer *opt, const ct_onecycle_options *o) {
    static const char *op = "OneCycleLR";
    if (opt && !o) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "options are NULL");
        return NULL;
    }
    if (opt) {
        if (o->total_steps <= 0) {
            ct_error(CT_ERROR_VALUE, op, "Expected positive integer total_steps, but got %lld",
                     (long long)o->total_steps);
            return NULL;
        }
        if (!(o->pct_start >= 0 && o->pct_start <= 1)) {
            ct_error(CT_ERROR_VALUE, op, "Expected float between 0 and 1 pct_start, but got %g", o->pct_start);
            return NULL;
        }
        if (o->anneal_strategy != CT_ANNEAL_COS && o->anneal_strategy != CT_ANNEAL_LINEAR) {
            ct_error(CT_ERROR_VALUE, op, "anneal_strategy must by one of 'cos' or 'linear', instead got %d",
                     o->anneal_strategy);
            return NULL;
        }
        if (o->cycle_momentum && !ct_optimizer_has_momentum(opt)) {
            ct_error(CT_ERROR_VALUE, op, "optimizer must support momentum with `cycle_momentum` option enabled");
            return NULL;
        }
        if (!(o->div_factor != 0) || !(o->final_div_factor != 0)) {
            ct_error(CT_ERROR_VALUE, op, "div_factor and final_div_factor must be nonzero");
            return NULL;
        }
    }
    ct_lr_scheduler *s = sched_alloc(opt, S_ONECYCLE, op);
    if (!s)
        return NULL;
    s->oc = *o;
    for (int v = 0; v < V_COUNT; v++) {
        s->values[v] = ct_xcalloc(op, (size_t)s->ngroups, sizeof(double));
        if (!s->values[v]) {
            ct_lr_scheduler_free(s);
            return NULL;
        }
    }
    const double T = (double)o->total_steps;
    if (o->three_phase) {
        s->nphases = 3;
        s->phases[0] = (phase){o->pct_start * T - 1, V_INITIAL, V_MAX, V_MAXMOM, V_BASEMOM};
        s->phases[1] = (phase){2 * o->pct_start * T - 2, V_MAX, V_INITIAL, V_BASEMOM, V_MAXMOM};
        s->phases[2] = (phase){T - 1, V_INITIAL, V_MIN, V_MAXMOM, V_MAXMOM};
    } else {
        s->nphases = 2;
        s->phases[0] = (phase){o->pct_start * T - 1, V_INITIAL, V_MAX, V_MAXMOM, V_BASEMOM};
        s->phases[1] = (phase){T - 1, V_MAX, V_MIN, V_BASEMOM, V_MAXMOM};
    }
    for (int g = 0; g < s->ngroups; g++) {
        double initial = o->max_lr / o->div_factor;
        ct_optimizer_set_initial_lr(opt, g, initial);
        s->values[V_INITIAL][g] = initial;
        s->values[V_MAX][g] = o->max_lr;
        s->values[V_MIN][g] = initial / o->final_div_factor;
        s->values[V_MAXMOM][g] = o->max_momentum;
        s->values[V_BASEMOM][g] = o->base_momentum;
        if (o->cycle_momentum)
            ct_optimizer_put_momentum(opt, g, o->max_momentum);
    }
    return finish_init(s);
}

ct_plateau_options ct_plateau_defaults(void) {
    ct_plateau_options o;
    memset(&o, 0, sizeof o);
    o.factor = 0.1;
    o.patience = 10;
    o.threshold = 1e-4;
    o.eps = 1e-8;
    return o;
}

ct_lr_scheduler *ct_reducelronplateau_new(ct_optimizer *opt, const ct_plateau_options *o) {
    static const char *op = "ReduceLROnPlateau";
    if (opt && !o) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "options are NULL");
        return NULL;
    }
    if (opt && !(o->factor < 1.0)) {
        ct_error(CT_ERROR_VALUE, op, "Factor should be < 1.0.");
        return NULL;
    }
    ct_lr_scheduler *s = sched_alloc(opt, S_PLATEAU, op);
    if (!s)
        return NULL;
    s->pl = *o;
    s->last_epoch = 0;
    s->best = o->mode_max ? -INFINITY : INFINITY;
    for (int g = 0; g < s->ngroups; g++)
        s->last_lr[g] = group_lr(s, g);
    return s;
}

/* ------------------------------------------------------------ accessors */

const char *ct_lr_scheduler_name(const ct_lr_scheduler *s) {
    return s ? sched_names[s->kind] : "";
}

double ct_lr_scheduler_get_last_lr(const ct_lr_scheduler *s, int group) {
    if (!s) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "get_last_lr", "scheduler is NULL");
        return NAN;
    }
    if (group < 0 || group >= s->ngroups) {
        ct_error(CT_ERROR_INDEX, "get_last_lr", "param group %d out of range (scheduler has %d)", group, s->ngroups);
        return NAN;
    }
    return s->last_lr[group];
}

int64_t ct_lr_scheduler_last_epoch(const ct_lr_scheduler *s) {
    return s ? s->last_epoch : -1;
}

/* ------------------------------------------------------------ state dict */

static bool put(ct_value *d, const char *key, ct_value *v) {
    return v && ct_value_set(d, key, v) == CT_OK;
}

static ct_value *double_list(const double *x, int n) {
    ct_value *l = ct_value_new_list();
    for (int i = 0; l && i < n; i++)
        if (ct_value_append(l, ct_value_new_float(x[i])) != CT_OK) {
            ct_value_free(l);
            return NULL;
        }
    return l;
}

ct_value *ct_lr_scheduler_state_dict(const ct_lr_scheduler *s) {
    if (!s) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "lr_scheduler.state_dict", "scheduler is NULL");
        return NULL;
    }
    ct_value *d = ct_value_new_dict();
    bool ok = d && put(d, "last_epoch", ct_value_new_int(s->last_epoch)) &&
              put(d, "_last_lr", double_list(s->last_lr, s->ngroups));
    if (ok && s->kind != S_PLATEAU)
        ok = put(d, "_step_count", ct_value_new_int(s->step_count)) &&
             put(d, "base_lrs", double_list(s->base_lrs, s->ngroups));
    switch (s->kind) {
    case S_STEP:
        ok = ok && put(d, "step_size", ct_value_new_int(s->step_size)) && put(d, "gamma", ct_value_new_float(s->gamma));
        break;
    case S_MULTISTEP: {
        /* torch keeps a Counter {milestone: count} */
        ct_value *m = ok ? ct_value_new_dict() : NULL;
        for (int i = 0; m && i < s->nmilestones; i++)
            if ((i == 0 || s->milestones[i] != s->milestones[i - 1]) &&
                ct_value_set_int(m, s->milestones[i], ct_value_new_int(milestone_count(s, s->milestones[i]))))
                ok = false;
        ok = ok && put(d, "milestones", m) && put(d, "gamma", ct_value_new_float(s->gamma));
        break;
    }
    case S_EXPONENTIAL:
        ok = ok && put(d, "gamma", ct_value_new_float(s->gamma));
        break;
    case S_COSINE:
        ok = ok && put(d, "T_max", ct_value_new_int(s->t_max)) && put(d, "eta_min", ct_value_new_float(s->eta_min));
        break;
    case S_LINEAR:
        ok = ok && put(d, "start_factor", ct_value_new_float(s->start_factor)) &&
             put(d, "end_factor", ct_value_new_float(s->end_factor)) &&
             put(d, "total_iters", ct_value_new_int(s->total_iters));
        break;
    case S_LAMBDA:
        break;
    case S_SEQUENTIAL: {
        ct_value *m = ok ? ct_value_new_list() : NULL, *c = ok ? ct_value_new_list() : NULL;
        for (int i = 0; m && i < s->nmilestones; i++)
            ok = ok && ct_value_append(m, ct_value_new_int(s->milestones[i])) == CT_OK;
        for (int i = 0; c && i < s->nchildren; i++)
            ok = ok && ct_value_append(c, ct_lr_scheduler_state_dict(s->children[i])) == CT_OK;
        ok = ok && put(d, "_milestones", m);
        if (!ok && m && ct_value_get(d, "_milestones") != m)
            ct_value_free(m);
        ok = ok && put(d, "_schedulers", c);
        if (!ok && c && ct_value_get(d, "_schedulers") != c)
            ct_value_free(c);
        break;
    }
    case S_ONECYCLE:
        ok = ok && put(d, "total_steps", ct_value_new_int(s->oc.total_steps)) &&
             put(d, "initial_lrs", double_list(s->values[V_INITIAL], s->ngroups)) &&
             put(d, "max_lrs", double_list(s->values[V_MAX], s->ngroups)) &&
             put(d, "min_lrs", double_list(s->values[V_MIN], s->ngroups)) &&
             put(d, "max_momentums", double_list(s->values[V_MAXMOM], s->ngroups)) &&
             put(d, "base_momentums", double_list(s->values[V_BASEMOM], s->ngroups));
        break;
    case S_PLATEAU:
        ok = ok && put(d, "best", ct_value_new_float(s->best)) &&
             put(d, "num_bad_epochs", ct_value_new_int(s->num_bad_epochs)) &&
             put(d, "cooldown_counter", ct_value_new_int(s->cooldown_counter)) &&
             put(d, "factor", ct_value_new_float(s->pl.factor)) &&
             put(d, "patience", ct_value_new_int(s->pl.patience)) &&
             put(d, "cooldown", ct_value_new_int(s->pl.cooldown)) &&
             put(d, "threshold", ct_value_new_float(s->pl.threshold)) &&
             put(d, "mode", ct_value_new_str(s->pl.mode_max ? "max" : "min")) &&
             put(d, "threshold_mode", ct_value_new_str(s->pl.threshold_abs ? "abs" : "rel")) &&
             put(d, "eps", ct_value_new_float(s->pl.eps));
        break;
    }
    if (!ok) {
        ct_value_free(d);
        if (!ct_last_status())
            ct_error(CT_ERROR_OUT_OF_MEMORY, "lr_scheduler.state_dict", "out of memory");
        return NULL;
    }
    return d;
}

static ct_status get_num(const ct_value *d, const char *key, double *out, bool required, const char *op) {
    const ct_value *v = ct_value_get(d, key);
    if (!v) {
        if (required)
            return ct_error(CT_ERROR_VALUE, op, "state_dict has no '%s'", key);
        return CT_OK;
    }
    if (ct_value_kind(v) != CT_VALUE_INT && ct_value_kind(v) != CT_VALUE_FLOAT)
        return ct_error(CT_ERROR_VALUE, op, "state_dict entry '%s' should be a number, got %s", key,
                        ct_value_type_name(ct_value_kind(v)));
    *out = ct_value_float(v);
    return CT_OK;
}

static ct_status get_int(const ct_value *d, const char *key, int64_t *out, bool required, const char *op) {
    const ct_value *v = ct_value_get(d, key);
    if (!v) {
        if (required)
            return ct_error(CT_ERROR_VALUE, op, "state_dict has no '%s'", key);
        return CT_OK;
    }
    if (ct_value_kind(v) != CT_VALUE_INT)
        return ct_error(CT_ERROR_VALUE, op, "state_dict entry '%s' should be an integer, got %s", key,
                        ct_value_type_name(ct_value_kind(v)));
    *out = ct_value_int(v);
    return CT_OK;
}

static ct_status get_list(const ct_value *d, const char *key, double *out, int n, bool required, const char *op) {
    const ct_value *v = ct_value_get(d, key);
    if (!v)
        return required ? ct_error(CT_ERROR_VALUE, op, "state_dict has no '%s'", key) : CT_OK;
    if ((ct_value_kind(v) != CT_VALUE_LIST && ct_value_kind(v) != CT_VALUE_TUPLE) || ct_value_len(v) != n)
        return ct_error(CT_ERROR_VALUE, op, "state_dict entry '%s' should be a list of %d numbers (one per group)",
                        key, n);
    for (int i = 0; i < n; i++) {
        const ct_value *x = ct_value_at(v, i);
        if (ct_value_kind(x) != CT_VALUE_INT && ct_value_kind(x) != CT_VALUE_FLOAT)
            return ct_error(CT_ERROR_VALUE, op, "state_dict entry '%s' should hold numbers", key);
    }
    for (int i = 0; i < n; i++)
        out[i] = ct_value_float(ct_value_at(v, i));
    return CT_OK;
}

/* Checks that d can be loaded into s (recursively), without changing anything. */
static ct_status check_state(const ct_lr_scheduler *s, const ct_value *d, const char *op);

/* Loads d into s; check_state has passed. */
static void apply_state(ct_lr_scheduler *s, const ct_value *d) {
    get_int(d, "last_epoch", &s->last_epoch, false, "");
    get_list(d, "_last_lr", s->last_lr, s->ngroups, false, "");
    get_int(d, "_step_count", &s->step_count, false, "");
    get_list(d, "base_lrs", s->base_lrs, s->ngroups, false, "");
    switch (s->kind) {
    case S_STEP:
        get_int(d, "step_size", &s->step_size, false, "");
        get_num(d, "gamma", &s->gamma, false, "");
        break;
    case S_MULTISTEP:
    case S_EXPONENTIAL:
        get_num(d, "gamma", &s->gamma, false, "");
        break;
    case S_COSINE:
        get_int(d, "T_max", &s->t_max, false, "");
        get_num(d, "eta_min", &s->eta_min, false, "");
        break;
    case S_LINEAR:
        get_num(d, "start_factor", &s->start_factor, false, "");
        get_num(d, "end_factor", &s->end_factor, false, "");
        get_int(d, "total_iters", &s->total_iters, false, "");
        break;
    case S_SEQUENTIAL: {
        const ct_value *c = ct_value_get(d, "_schedulers");
        for (int i = 0; c && i < s->nchildren; i++)
            apply_state(s->children[i], ct_value_at(c, i));
        break;
    }
    case S_ONECYCLE:
        get_int(d, "total_steps", &s->oc.total_steps, false, "");
        get_list(d, "initial_lrs", s->values[V_INITIAL], s->ngroups, false, "");
        get_list(d, "max_lrs", s->values[V_MAX], s->ngroups, false, "");
        get_list(d, "min_lrs", s->values[V_MIN], s->ngroups, false, "");
        get_list(d, "max_momentums", s->values[V_MAXMOM], s->ngroups, false, "");
        get_list(d, "base_momentums", s->values[V_BASEMOM], s->ngroups, false, "");
        break;
    case S_PLATEAU:
        get_num(d, "best", &s->best, false, "");
        get_int(d, "num_bad_epochs", &s->num_bad_epochs, false, "");
        get_int(d, "cooldown_counter", &s->cooldown_counter, false, "");
        get_num(d, "factor", &s->pl.factor, false, "");
        get_int(d, "patience", &s->pl.patience, false, "");
        get_int(d, "cooldown", &s->pl.cooldown, false, "");
        get_num(d, "threshold", &s->pl.threshold, false, "");
        get_num(d, "eps", &s->pl.eps, false, "");
        break;
    default:
        break;
    }
}

static ct_status check_state(const ct_lr_scheduler *s, const ct_value *d, const char *op) {
    if (ct_value_kind(d) != CT_VALUE_DICT)
        return ct_error(CT_ERROR_VALUE, op, "state_dict should be a dict, got %s", ct_value_type_name(ct_value_kind(d)));
    double x, lst[1];
    int64_t i;
    double *tmp = ct_xcalloc(op, (size_t)s->ngroups, sizeof(double));
    if (!tmp)
        return CT_ERROR_OUT_OF_MEMORY;
    bool nonplateau = s->kind != S_PLATEAU;
    ct_status st = get_int(d, "last_epoch", &i, true, op);
    st = st ? st : get_list(d, "_last_lr", tmp, s->ngroups, true, op);
    st = st || !nonplateau ? st : get_int(d, "_step_count", &i, true, op);
    st = st || !nonplateau ? st : get_list(d, "base_lrs", tmp, s->ngroups, true, op);
    (void)lst;
    static const char *const nums[] = {"gamma", "eta_min", "start_factor", "end_factor", "best",
                                       "factor", "threshold", "eps"};
    static const char *const ints[] = {"step_size", "T_max", "total_iters", "total_steps", "num_bad_epochs",
                                       "cooldown_counter", "patience", "cooldown"};
    for (size_t k = 0; !st && k < sizeof nums / sizeof *nums; k++)
        st = get_num(d, nums[k], &x, false, op);
    for (size_t k = 0; !st && k < sizeof ints / sizeof *ints; k++)
        st = get_int(d, ints[k], &i, false, op);
    if (!st && s->kind == S_STEP && ct_value_get(d, "step_size") && ct_value_int(ct_value_get(d, "step_size")) < 1)
        st = ct_error(CT_ERROR_VALUE, op, "step_size must be a positive integer");
    if (!st && s->kind == S_COSINE && ct_value_get(d, "T_max") && ct_value_int(ct_value_get(d, "T_max")) < 1)
        st = ct_error(CT_ERROR_VALUE, op, "T_max must be a positive integer");
    if (!st && s->kind == S_LINEAR && ct_value_get(d, "total_iters") && ct_value_int(ct_value_get(d, "total_iters")) < 1)
        st = ct_error(CT_ERROR_VALUE, op, "total_iters must be a positive integer");
    if (!st && s->kind == S_ONECYCLE) {
        static const char *const lists[] = {"initial_lrs", "max_lrs", "min_lrs", "max_momentums", "base_momentums"};
        for (size_t k = 0; !st && k < sizeof lists / sizeof *lists; k++)
            st = get_list(d, lists[k], tmp, s->ngroups, false, op);
    }
    if (!st && s->kind == S_SEQUENTIAL) {
        const ct_value *c = ct_value_get(d, "_schedulers");
        if (!c || ct_value_kind(c) != CT_VALUE_LIST || ct_value_len(c) != s->nchildren)
            st = ct_error(CT_ERROR_VALUE, op, "state_dict entry '_schedulers' should be a list of %d dicts",
                          s->nchildren);
        for (int k = 0; !st && k < s->nchildren; k++)
            st = check_state(s->children[k], ct_value_at(c, k), op);
    }
    free(tmp);
    return st;
}

ct_status ct_lr_scheduler_load_state_dict(ct_lr_scheduler *s, const ct_value *d) {
    static const char *op = "lr_scheduler.load_state_dict";
    if (!s || !d)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", !s ? "scheduler" : "state_dict");
    ct_status st = check_groups(s, op);
    st = st ? st : check_state(s, d, op);
    if (st)
        return st;
    apply_state(s, d);
    return CT_OK;
}
