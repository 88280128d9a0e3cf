/* ZeRO stage 1: optimizer state sharded across ranks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/dist_internal.h"

/* Note [ZeRO-1]
 * As llm.c's -z 1 and DeepSpeed's stage 1: every parameter becomes a view of one flat
 * buffer (ct_tensor_set_, so the module and any other holder see the same tensors),
 * padded to a multiple of the world size, and every .grad a view of a flat gradient
 * buffer of the same layout. A step
 *   1. reduce-scatters the gradients (AVG): rank r gets the averaged shard r;
 *   2. clips (max_norm > 0): the shards' sums of squares are all-reduced (one
 *      float64) into the global 2-norm, and the shard scaled by
 *      max_norm / (norm + 1e-6) when that is below 1, as clip_grad_norm_;
 *   3. runs ctorch's AdamW on the shard (a view of the flat buffer, so the
 *      optimizer's m and v exist for 1/world_size of the parameters only);
 *   4. all-gathers the shards in place into the flat buffer.
 * AdamW is elementwise, so the parameters are those DDP with AdamW gives (the
 * gradient is the same average); tests/test_dist_zero.c checks that bit for bit.
 * Parameters must share one dtype; stages 2 and 3 (sharded gradients, parameters) are
 * not offered. */

struct ct_zero1 {
    ct_process_group *pg;
    ct_tensor **params;
    int n;
    ct_tensor *flat, *gflat, *shard, *shard_grad;
    ct_optimizer *opt;
};

void ct_zero1_free(ct_zero1 *z) {
    if (!z)
        return;
    for (int i = 0; i < z->n; i++)
        ct_release(z->params[i]);
    free(z->params);
    ct_optimizer_free(z->opt);
    ct_release(z->flat);
    ct_release(z->gflat);
    ct_release(z->shard);
    ct_release(z->shard_grad);
    free(z);
}

ct_zero1 *ct_zero1_new(ct_process_group *pg, ct_tensor *const *params, int n, double lr, double beta1, double beta2,
                       double eps, double weight_decay) {
    static const char *op = "ct_zero1_new";
    CT_CHECK_ARG(op, pg);
    if (n <= 0 || !params) {
        ct_error(CT_ERROR_VALUE, op, "expected at least one parameter, got %d", n);
        return NULL;
    }
    ct_dtype dt = CT_DTYPE_UNDEFINED;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        CT_CHECK_ARG(op, params[i]);
        if (i == 0)
            dt = ct_tensor_dtype(params[i]);
        if (ct_tensor_dtype(params[i]) != dt || !ct_dtype_is_floating(dt)) {
            ct_error(CT_ERROR_TYPE, op, "parameters must share one floating-point dtype: parameter %d is %s, not %s",
                     i, ct_dtype_name(ct_tensor_dtype(params[i])), ct_dtype_name(dt));
            return NULL;
        }
        if (ct_tensor_device(params[i]).type != CT_DEVICE_CPU && strcmp(ct_process_group_backend(pg), "tcp") == 0) {
            ct_error(CT_ERROR_DEVICE, op, "the tcp backend takes CPU tensors; parameter %d is not on the CPU", i);
            return NULL;
        }
        if (!ct_tensor_is_leaf(params[i])) {
            ct_error(CT_ERROR_VALUE, op, "parameter %d is not a leaf tensor", i);
            return NULL;
        }
        for (int j = 0; j < i; j++)
            if (params[j] == params[i]) {
                ct_error(CT_ERROR_VALUE, op, "parameter %d appears twice", i);
                return NULL;
            }
        total += ct_tensor_numel(params[i]);
    }
    int ws = ct_process_group_size(pg), rank = ct_process_group_rank(pg);
    int64_t shard = (total + ws - 1) / ws;
    ct_zero1 *z = ct_xcalloc(op, 1, sizeof *z);
    if (!z)
        return NULL;
    z->pg = pg;
    z->params = ct_xcalloc(op, (size_t)n, sizeof *z->params);
    if (!z->params) {
        free(z);
        return NULL;
    }
    bool prev = ct_set_grad_enabled(false);
    ct_status st = CT_OK;
    ct_scope_begin();
    ct_device dev = ct_tensor_device(params[0]);
    z->flat = ct_retain(ct_zeros(CT_SHAPE(shard * ws), dt, dev));
    z->gflat = ct_retain(ct_zeros(CT_SHAPE(shard * ws), dt, dev));
    z->shard_grad = ct_retain(ct_zeros(CT_SHAPE(shard), dt, dev));
    if (!z->flat || !z->gflat || !z->shard_grad)
        st = ct_last_status();
    int64_t off = 0;
    for (int i = 0; i < n && st == CT_OK; i++) {
        ct_tensor *p = params[i];
        int64_t m = ct_tensor_numel(p);
        ct_tensor *pv = ct_view(ct_narrow(z->flat, 0, off, m), ct_tensor_shape(p), ct_tensor_dim(p));
        ct_tensor *gv = ct_view(ct_narrow(z->gflat, 0, off, m), ct_tensor_shape(p), ct_tensor_dim(p));
        ct_tensor *old = ct_tensor_grad(p);
        if (!pv || !gv || !ct_copy_(pv, p) || (old && !ct_copy_(gv, old)) || !ct_tensor_set_(p, pv) ||
            ct_tensor_set_grad(p, gv) != CT_OK)
            st = ct_last_status();
        z->params[z->n++] = ct_retain(p);
        off += m;
    }
    /* Every rank starts from rank 0's parameters. */
    if (st == CT_OK && ct_broadcast(pg, z->flat, 0) != CT_OK)
        st = ct_last_status();
    if (st == CT_OK) {
        z->shard = ct_retain(ct_narrow(z->flat, 0, shard * rank, shard));
        if (!z->shard || !ct_tensor_set_requires_grad(z->shard, true) ||
            ct_tensor_set_grad(z->shard, z->shard_grad) != CT_OK)
            st = ct_last_status();
    }
    ct_scope_end();
    ct_set_grad_enabled(prev);
    if (st == CT_OK) {
        ct_optim_options o = ct_adamw_options(lr);
        o.beta1 = beta1;
        o.beta2 = beta2;
        o.eps = eps;
        o.weight_decay = weight_decay;
        z->opt = ct_optimizer_new(CT_OPTIM_ADAMW, &z->shard, 1, &o);
        if (!z->opt)
            st = ct_last_status();
    }
    if (st != CT_OK) {
        ct_zero1_free(z);
        return NULL;
    }
    return z;
}

ct_status ct_zero1_step(ct_zero1 *z, double max_norm, double *total_norm) {
    static const char *op = "ct_zero1_step";
    CT_CHECK_ARG_STATUS(op, z);
    if (isnan(max_norm))
        return ct_error(CT_ERROR_VALUE, op, "max_norm is NaN");
    if (ct_reduce_scatter(z->pg, z->shard_grad, z->gflat, CT_REDUCE_AVG) != CT_OK)
        return ct_last_status();
    ct_status st = CT_OK;
    bool prev = ct_set_grad_enabled(false);
    ct_scope_begin();
    if (max_norm > 0 || total_norm) {
        ct_tensor *sq = ct_to_dtype(ct_sum(ct_mul(z->shard_grad, z->shard_grad), NULL, 0, false, CT_F64), CT_F64);
        double norm = 0;
        if (!sq || ct_all_reduce(z->pg, sq, CT_REDUCE_SUM) != CT_OK || ct_item_double(sq, &norm) != CT_OK) {
            st = ct_last_status();
        } else {
            norm = sqrt(norm);
            if (total_norm)
                *total_norm = norm;
            double coef = max_norm / (norm + 1e-6);
            if (max_norm > 0 && coef < 1 && !ct_mul_scalar_(z->shard_grad, ct_scalar_float(coef)))
                st = ct_last_status();
        }
    }
    ct_scope_end();
    ct_set_grad_enabled(prev);
    if (st != CT_OK)
        return st;
    if (ct_optimizer_step(z->opt) != CT_OK)
        return ct_last_status();
    return ct_all_gather(z->pg, z->flat, z->shard);
}

ct_status ct_zero1_zero_grad(ct_zero1 *z) {
    CT_CHECK_ARG_STATUS("ct_zero1_zero_grad", z);
    return ct_zero_(z->gflat) ? CT_OK : ct_last_status();
}

ct_status ct_zero1_set_lr(ct_zero1 *z, double lr) {
    CT_CHECK_ARG_STATUS("ct_zero1_set_lr", z);
    return ct_optimizer_set_lr(z->opt, 0, lr);
}
