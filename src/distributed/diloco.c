/* DiLoCo: local inner steps, an outer Nesterov step on the averaged pseudo-gradient
 * every h steps. */
#include <stdlib.h>
#include <string.h>

#include "ctorch/optim.h"
#include "distributed/dist_internal.h"

/* Note [DiLoCo]
 * As the paper (arXiv 2311.08105) and OpenDiLoCo: each rank runs its inner optimizer
 * on its own data; every h inner steps, for every parameter,
 *     delta = global - local           (the pseudo-gradient)
 *     delta = all_reduce(delta, AVG)   (in bfloat16 when asked: half the bytes)
 *     local = global, .grad = delta, outer SGD step (lr 0.7, Nesterov momentum 0.9)
 *     global = local
 * so all ranks leave a sync with the same parameters. The global copy lives on the
 * parameter's device in its dtype (OpenDiLoCo keeps it on the CPU; ctorch's tcp
 * backend is CPU-only, so it is there anyway). The outer step writes .grad, so the
 * parameter's own gradient is put aside during it and restored after: a .grad that is
 * a DDP bucket view stays one, which is what lets DDP inside a machine and DiLoCo
 * across machines compose (two groups, two wrappers). The all-reduces of one sync
 * are issued together and waited for at the end. */

struct ct_diloco {
    ct_process_group *pg;
    ct_tensor **params;
    ct_tensor **global;
    int n;
    ct_optimizer *inner, *outer;
    int h;
    bool bf16;
    int64_t steps, outer_steps;
};

void ct_diloco_free(ct_diloco *d) {
    if (!d)
        return;
    for (int i = 0; i < d->n; i++) {
        ct_release(d->params ? d->params[i] : NULL);
        ct_release(d->global ? d->global[i] : NULL);
    }
    free(d->params);
    free(d->global);
    ct_optimizer_free(d->outer);
    free(d);
}

ct_diloco *ct_diloco_new(ct_process_group *pg, ct_tensor *const *params, int n, ct_optimizer *inner, int h,
                         double outer_lr, double outer_momentum, bool bf16) {
    static const char *op = "ct_diloco_new";
    CT_CHECK_ARG(op, pg);
    CT_CHECK_ARG(op, inner);
    if (n <= 0 || !params) {
        ct_error(CT_ERROR_VALUE, op, "expected at least one parameter, got %d", n);
        return NULL;
    }
    if (h < 1) {
        ct_error(CT_ERROR_VALUE, op, "h (inner steps per outer step) must be at least 1, got %d", h);
        return NULL;
    }
    if (!(outer_lr > 0) || !(outer_momentum >= 0) || outer_momentum >= 1) {
        ct_error(CT_ERROR_VALUE, op, "outer lr must be positive and momentum in [0, 1), got %g and %g", outer_lr,
                 outer_momentum);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        CT_CHECK_ARG(op, params[i]);
        if (!ct_dtype_is_floating(ct_tensor_dtype(params[i])) || !ct_tensor_is_contiguous(params[i])) {
            ct_error(CT_ERROR_VALUE, op, "parameter %d must be a contiguous floating-point tensor", i);
            return NULL;
        }
    }
    ct_diloco *d = ct_xcalloc(op, 1, sizeof *d);
    if (!d)
        return NULL;
    d->pg = pg;
    d->inner = inner;
    d->h = h;
    d->bf16 = bf16;
    d->params = ct_xcalloc(op, (size_t)n, sizeof *d->params);
    d->global = ct_xcalloc(op, (size_t)n, sizeof *d->global);
    if (!d->params || !d->global) {
        ct_diloco_free(d);
        return NULL;
    }
    d->n = n;
    bool prev = ct_set_grad_enabled(false);
    ct_status st = CT_OK;
    ct_scope_begin();
    for (int i = 0; i < n && st == CT_OK; i++) {
        d->params[i] = ct_retain(params[i]);
        /* Every rank starts from rank 0's parameters. */
        if (ct_broadcast(pg, d->params[i], 0) != CT_OK || !(d->global[i] = ct_retain(ct_clone(params[i]))))
            st = ct_last_status();
    }
    ct_scope_end();
    ct_set_grad_enabled(prev);
    if (st != CT_OK) {
        ct_diloco_free(d);
        return NULL;
    }
    ct_optim_options o = ct_sgd_options(outer_lr);
    o.momentum = outer_momentum;
    o.nesterov = outer_momentum > 0;
    d->outer = ct_optimizer_new(CT_OPTIM_SGD, d->params, n, &o);
    if (!d->outer) {
        ct_diloco_free(d);
        return NULL;
    }
    return d;
}

static ct_status outer_step(ct_diloco *d) {
    ct_status st = CT_OK;
    ct_work **work = ct_xcalloc("ct_diloco_step", (size_t)d->n, sizeof *work);
    ct_tensor **delta = ct_xcalloc("ct_diloco_step", (size_t)d->n, sizeof *delta);
    ct_tensor **wire = ct_xcalloc("ct_diloco_step", (size_t)d->n, sizeof *wire);
    ct_tensor **saved = ct_xcalloc("ct_diloco_step", (size_t)d->n, sizeof *saved);
    if (!work || !delta || !wire || !saved) {
        free(work);
        free(delta);
        free(wire);
        free(saved);
        return ct_last_status();
    }
    bool prev = ct_set_grad_enabled(false);
    ct_scope_begin();
    for (int i = 0; i < d->n && st == CT_OK; i++) {
        delta[i] = ct_sub(d->global[i], d->params[i]);
        wire[i] = d->bf16 && ct_tensor_dtype(delta[i]) != CT_BF16 ? ct_to_dtype(delta[i], CT_BF16) : delta[i];
        if (!wire[i] || !(work[i] = ct_all_reduce_async(d->pg, wire[i], CT_REDUCE_AVG)))
            st = ct_last_status();
    }
    for (int i = 0; i < d->n; i++) {
        if (!work[i])
            continue;
        if (ct_work_wait(work[i]) != CT_OK && st == CT_OK)
            st = ct_last_status();
        ct_work_free(work[i]);
    }
    for (int i = 0; i < d->n && st == CT_OK; i++) {
        ct_tensor *g = wire[i] == delta[i] ? delta[i] : ct_to_dtype(wire[i], ct_tensor_dtype(d->params[i]));
        saved[i] = ct_tensor_grad(d->params[i]); /* the scope's reference */
        if (!g || !ct_copy_(d->params[i], d->global[i]) || ct_tensor_set_grad(d->params[i], g) != CT_OK)
            st = ct_last_status();
    }
    if (st == CT_OK)
        st = ct_optimizer_step(d->outer);
    for (int i = 0; i < d->n; i++) {
        if (d->params[i] && (saved[i] || st == CT_OK))
            ct_tensor_set_grad(d->params[i], saved[i]);
        if (st == CT_OK && !ct_copy_(d->global[i], d->params[i]))
            st = ct_last_status();
    }
    ct_scope_end();
    ct_set_grad_enabled(prev);
    free(work);
    free(delta);
    free(wire);
    free(saved);
    if (st == CT_OK)
        d->outer_steps++;
    return st;
}

ct_status ct_diloco_step(ct_diloco *d) {
    CT_CHECK_ARG_STATUS("ct_diloco_step", d);
    if (ct_optimizer_step(d->inner) != CT_OK)
        return ct_last_status();
    d->steps++;
    if (d->steps % d->h != 0)
        return CT_OK;
    return outer_step(d);
}

int64_t ct_diloco_outer_steps(const ct_diloco *d) { return d ? d->outer_steps : -1; }
