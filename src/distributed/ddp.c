/* DistributedDataParallel: gradient buckets all-reduced from the post-accumulate hooks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/dist_internal.h"

/* Note [DDP buckets]
 * As c10d's Reducer: the parameters that require grad are laid into buckets in
 * reverse order (the order their gradients are usually ready in backward), the first
 * bucket up to bucket_cap_first bytes (1 MiB), the others up to bucket_cap (25 MiB);
 * a parameter larger than the cap gets a bucket of its own, and a bucket holds one
 * dtype. Each bucket is one flat tensor and every parameter's .grad is a view of its
 * part (gradient_as_bucket_view), so backward accumulates straight into the bucket
 * (the engine adds into an existing .grad in place) and no copy is made either way.
 *
 * A post-accumulate hook on each parameter counts its bucket down; a bucket whose
 * count reaches zero is launched (an asynchronous all_reduce AVG) only after every
 * bucket before it, so the ranks issue the same collectives in the same order
 * whatever order their gradients became ready in. ct_ddp_finish waits for all of
 * them. Parameters that got no gradient in a backward (find_unused_parameters) are
 * marked ready there and their buckets launched then: their part of the bucket holds
 * what .grad held (zeros after ct_ddp_zero_grad), which is what PyTorch reduces for
 * a locally unused parameter too. Departures: the buckets are not rebuilt after the
 * first iteration from the observed order, the end of backward is ct_ddp_finish
 * (called by the user) rather than an engine callback, and a parameter unused on
 * every rank keeps a zero .grad instead of None. */

typedef struct {
    ct_tensor *flat;
    int *params; /* indices, in bucket order */
    int nparams;
    int pending;
    ct_work *work;
} ddp_bucket;

typedef struct {
    struct ct_ddp *d;
    int index;
} hook_ctx;

struct ct_ddp {
    ct_process_group *pg;
    ct_tensor **params;
    int nparams;
    int *bucket_of;
    bool *ready;
    int64_t *hooks;
    hook_ctx *ctx;
    ddp_bucket *buckets;
    int nbuckets;
    int next_launch;
    bool sync;
    bool find_unused;
    bool launch_failed;
    bool double_backward;
    char failure[256];
};

ct_ddp_options ct_ddp_defaults(void) {
    ct_ddp_options o = {1 << 20, 25 << 20, false, true};
    return o;
}

static void launch_ready(ct_ddp *d) {
    while (d->next_launch < d->nbuckets && d->buckets[d->next_launch].pending == 0) {
        ddp_bucket *b = &d->buckets[d->next_launch];
        b->work = ct_all_reduce_async(d->pg, b->flat, CT_REDUCE_AVG);
        if (!b->work && !d->launch_failed) {
            d->launch_failed = true;
            snprintf(d->failure, sizeof d->failure, "%s", ct_last_error());
            ct_clear_error();
        }
        d->next_launch++;
    }
}

static void on_grad(ct_tensor *leaf, void *ud) {
    hook_ctx *c = ud;
    ct_ddp *d = c->d;
    if (!d->sync)
        return;
    if (d->ready[c->index]) {
        d->double_backward = true;
        return;
    }
    d->ready[c->index] = true;
    ddp_bucket *b = &d->buckets[d->bucket_of[c->index]];
    b->pending--;
    launch_ready(d);
}

static void reset_iteration(ct_ddp *d) {
    for (int i = 0; i < d->nparams; i++)
        d->ready[i] = false;
    for (int k = 0; k < d->nbuckets; k++) {
        d->buckets[k].pending = d->buckets[k].nparams;
        d->buckets[k].work = NULL;
    }
    d->next_launch = 0;
    d->double_backward = false;
    d->launch_failed = false;
}

void ct_ddp_free(ct_ddp *d) {
    if (!d)
        return;
    for (int k = 0; k < d->nbuckets; k++) {
        ct_work_free(d->buckets[k].work);
        ct_release(d->buckets[k].flat);
        free(d->buckets[k].params);
    }
    for (int i = 0; i < d->nparams; i++) {
        if (d->hooks && d->hooks[i] > 0)
            ct_remove_hook(d->hooks[i]);
        ct_release(d->params[i]);
    }
    free(d->params);
    free(d->bucket_of);
    free(d->ready);
    free(d->hooks);
    free(d->ctx);
    free(d->buckets);
    free(d);
}

ct_ddp *ct_ddp_new_params(ct_process_group *pg, ct_tensor *const *params, int n, const ct_ddp_options *o) {
    static const char *op = "ct_ddp_new";
    CT_CHECK_ARG(op, pg);
    if (n < 0 || (n > 0 && !params)) {
        ct_error(CT_ERROR_VALUE, op, "expected a list of parameters, got %d", n);
        return NULL;
    }
    ct_ddp_options opts = o ? *o : ct_ddp_defaults();
    if (opts.bucket_cap_first <= 0 || opts.bucket_cap <= 0) {
        ct_error(CT_ERROR_VALUE, op, "bucket caps must be positive, got %lld and %lld",
                 (long long)opts.bucket_cap_first, (long long)opts.bucket_cap);
        return NULL;
    }
    int count = 0;
    for (int i = 0; i < n; i++) {
        CT_CHECK_ARG(op, params[i]);
        if (!ct_tensor_requires_grad(params[i]))
            continue;
        if (!ct_tensor_is_leaf(params[i])) {
            ct_error(CT_ERROR_VALUE, op, "parameter %d is not a leaf tensor", i);
            return NULL;
        }
        ct_device dev = ct_tensor_device(params[i]);
        if (dev.type != CT_DEVICE_CPU && strcmp(ct_process_group_backend(pg), "tcp") == 0) {
            ct_error(CT_ERROR_DEVICE, op, "the tcp backend takes CPU tensors; parameter %d is not on the CPU", i);
            return NULL;
        }
        if (!ct_tensor_is_contiguous(params[i])) {
            ct_error(CT_ERROR_VALUE, op, "parameter %d is not contiguous", i);
            return NULL;
        }
        count++;
    }
    if (count == 0) {
        ct_error(CT_ERROR_VALUE, op,
                 "DistributedDataParallel is not needed when a module doesn't have any parameter that requires a "
                 "gradient");
        return NULL;
    }
    ct_ddp *d = ct_xcalloc(op, 1, sizeof *d);
    if (!d)
        return NULL;
    d->pg = pg;
    d->sync = true;
    d->find_unused = opts.find_unused_parameters;
    d->params = ct_xcalloc(op, (size_t)count, sizeof *d->params);
    d->bucket_of = ct_xcalloc(op, (size_t)count, sizeof *d->bucket_of);
    d->ready = ct_xcalloc(op, (size_t)count, sizeof *d->ready);
    d->hooks = ct_xcalloc(op, (size_t)count, sizeof *d->hooks);
    d->ctx = ct_xcalloc(op, (size_t)count, sizeof *d->ctx);
    d->buckets = ct_xcalloc(op, (size_t)count, sizeof *d->buckets);
    if (!d->params || !d->bucket_of || !d->ready || !d->hooks || !d->ctx || !d->buckets) {
        ct_ddp_free(d);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (ct_tensor_requires_grad(params[i]))
            d->params[d->nparams++] = ct_retain(params[i]);

    /* Same values everywhere: rank 0's parameters. */
    if (opts.broadcast_parameters) {
        for (int i = 0; i < d->nparams; i++)
            if (ct_broadcast(pg, d->params[i], 0) != CT_OK) {
                ct_ddp_free(d);
                return NULL;
            }
    }

    /* Buckets, in reverse parameter order. */
    int64_t cap = opts.bucket_cap_first, used = 0;
    ct_dtype dt = CT_DTYPE_UNDEFINED;
    int nb = -1;
    for (int i = d->nparams - 1; i >= 0; i--) {
        ct_tensor *p = d->params[i];
        int64_t bytes = ct_tensor_numel(p) * (int64_t)ct_tensor_element_size(p);
        if (nb < 0 || ct_tensor_dtype(p) != dt || (used > 0 && used + bytes > cap)) {
            if (nb >= 0)
                cap = opts.bucket_cap;
            nb++;
            used = 0;
            dt = ct_tensor_dtype(p);
            d->buckets[nb].params = ct_xcalloc(op, (size_t)d->nparams, sizeof(int));
            if (!d->buckets[nb].params) {
                d->nbuckets = nb + 1;
                ct_ddp_free(d);
                return NULL;
            }
        }
        ddp_bucket *b = &d->buckets[nb];
        b->params[b->nparams++] = i;
        d->bucket_of[i] = nb;
        used += bytes;
    }
    d->nbuckets = nb + 1;

    /* The flat tensors, and every .grad a view of its part (keeping what it held). */
    ct_scope_begin();
    for (int k = 0; k < d->nbuckets; k++) {
        ddp_bucket *b = &d->buckets[k];
        int64_t numel = 0;
        for (int j = 0; j < b->nparams; j++)
            numel += ct_tensor_numel(d->params[b->params[j]]);
        ct_tensor *first = d->params[b->params[0]];
        b->flat = ct_retain(ct_zeros(CT_SHAPE(numel), ct_tensor_dtype(first), ct_tensor_device(first)));
        if (!b->flat)
            break;
        int64_t off = 0;
        for (int j = 0; j < b->nparams; j++) {
            ct_tensor *p = d->params[b->params[j]];
            int64_t m = ct_tensor_numel(p);
            ct_tensor *view = ct_view(ct_narrow(b->flat, 0, off, m), ct_tensor_shape(p), ct_tensor_dim(p));
            ct_tensor *old = ct_tensor_grad(p);
            /* old is the scope's (ct_tensor_grad's reference) */
            if (!view || (old && !ct_copy_(view, old)) || ct_tensor_set_grad(p, view) != CT_OK) {
                ct_scope_end();
                ct_ddp_free(d);
                return NULL;
            }
            off += m;
        }
    }
    ct_scope_end();
    for (int k = 0; k < d->nbuckets; k++)
        if (!d->buckets[k].flat) {
            ct_ddp_free(d);
            return NULL;
        }
    for (int i = 0; i < d->nparams; i++) {
        d->ctx[i] = (hook_ctx){d, i};
        d->hooks[i] = ct_tensor_register_post_accumulate_grad_hook(d->params[i], on_grad, &d->ctx[i]);
        if (d->hooks[i] <= 0) {
            ct_ddp_free(d);
            return NULL;
        }
    }
    reset_iteration(d);
    return d;
}

ct_ddp *ct_ddp_new(ct_process_group *pg, ct_module *module, const ct_ddp_options *o) {
    static const char *op = "ct_ddp_new";
    CT_CHECK_ARG(op, pg);
    CT_CHECK_ARG(op, module);
    int64_t n = ct_module_parameters(module, NULL, NULL, 0);
    if (n < 0)
        return NULL;
    ct_tensor **ps = ct_xcalloc(op, (size_t)(n ? n : 1), sizeof *ps);
    if (!ps)
        return NULL;
    ct_module_parameters(module, ps, NULL, n);
    ct_ddp *d = ct_ddp_new_params(pg, ps, (int)n, o);
    free(ps);
    return d;
}

ct_status ct_ddp_finish(ct_ddp *d) {
    static const char *op = "ct_ddp_finish";
    CT_CHECK_ARG_STATUS(op, d);
    if (!d->sync)
        return CT_OK;
    ct_status st = CT_OK;
    if (d->next_launch < d->nbuckets) {
        if (!d->find_unused) {
            char idx[160];
            size_t used = 0;
            idx[0] = 0;
            for (int i = 0; i < d->nparams; i++)
                if (!d->ready[i] && used < sizeof idx - 16)
                    used += (size_t)snprintf(idx + used, sizeof idx - used, "%s%d", used ? ", " : "", i);
            st = ct_error(CT_ERROR_RUNTIME, op,
                          "parameters %s received no gradient in this backward pass; construct the DDP with "
                          "find_unused_parameters=true when parts of the model do not take part in the loss "
                          "(every rank must launch the same buckets)",
                          idx);
        }
        /* Launch the rest either way, so the ranks stay in step. */
        for (int k = 0; k < d->nbuckets; k++)
            d->buckets[k].pending = 0;
        launch_ready(d);
    }
    for (int k = 0; k < d->nbuckets; k++) {
        ddp_bucket *b = &d->buckets[k];
        if (b->work) {
            if (ct_work_wait(b->work) != CT_OK && st == CT_OK)
                st = ct_last_status();
            ct_work_free(b->work);
            b->work = NULL;
        }
    }
    if (st == CT_OK && d->launch_failed)
        st = ct_error(CT_ERROR_RUNTIME, op, "%s", d->failure);
    if (st == CT_OK && d->double_backward)
        st = ct_error(CT_ERROR_RUNTIME, op,
                      "a parameter's gradient was accumulated twice before ct_ddp_finish (two backward passes "
                      "need ct_ddp_set_sync(false) for the first)");
    reset_iteration(d);
    return st;
}

ct_status ct_ddp_set_sync(ct_ddp *d, bool sync) {
    CT_CHECK_ARG_STATUS("ct_ddp_set_sync", d);
    d->sync = sync;
    if (sync)
        reset_iteration(d);
    return CT_OK;
}

int ct_ddp_num_buckets(const ct_ddp *d) { return d ? d->nbuckets : -1; }

int ct_ddp_bucket_params(const ct_ddp *d, int bucket, int *idx, int cap) {
    if (!d || bucket < 0 || bucket >= d->nbuckets) {
        ct_error(CT_ERROR_INDEX, "ct_ddp_bucket_params", "bucket %d out of range for %d buckets", bucket,
                 d ? d->nbuckets : 0);
        return -1;
    }
    const ddp_bucket *b = &d->buckets[bucket];
    for (int j = 0; j < b->nparams && j < cap; j++)
        idx[j] = b->params[j];
    return b->nparams;
}

ct_status ct_ddp_zero_grad(ct_ddp *d) {
    CT_CHECK_ARG_STATUS("ct_ddp_zero_grad", d);
    for (int k = 0; k < d->nbuckets; k++)
        if (!ct_zero_(d->buckets[k].flat))
            return ct_last_status();
    return CT_OK;
}
