/* BatchNorm1d/2d/3d, InstanceNorm1d/2d, GroupNorm, LayerNorm, RMSNorm. */
#include <stdio.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/module_internal.h"

/* ------------------------------------------------------------------ BatchNorm, InstanceNorm */

/* Note [Norm layer kinds]
 * BatchNorm1d/2d/3d and InstanceNorm1d/2d share their state (weight and bias, the
 * running statistics and num_batches_tracked, as _NormBase) and their repr; they differ
 * in the input ranks they take and in what forward calls. InstanceNorm never counts
 * num_batches_tracked, as PyTorch's. */
enum { BN1D, BN2D, BN3D, IN1D, IN2D };

static const struct {
    const char *name;
    int rank_lo, rank_hi; /* the input ranks taken */
} kinds[] = {
    [BN1D] = {"BatchNorm1d", 2, 3}, [BN2D] = {"BatchNorm2d", 4, 4}, [BN3D] = {"BatchNorm3d", 5, 5},
    [IN1D] = {"InstanceNorm1d", 2, 3}, [IN2D] = {"InstanceNorm2d", 3, 4},
};

typedef struct bn_ctx {
    double eps, momentum;
    int64_t num_features;
    bool track, affine;
    int kind;
} bn_ctx;

static ct_status check_rank(const bn_ctx *c, const ct_tensor *x) {
    int nd = ct_tensor_dim(x), lo = kinds[c->kind].rank_lo, hi = kinds[c->kind].rank_hi;
    if (nd >= lo && nd <= hi)
        return CT_OK;
    if (lo == hi)
        return ct_error(CT_ERROR_VALUE, kinds[c->kind].name, "expected %dD input (got %dD input)", lo, nd);
    return ct_error(CT_ERROR_VALUE, kinds[c->kind].name, "expected %dD or %dD input (got %dD input)", lo, hi, nd);
}

static ct_tensor *instancenorm_forward(ct_module *m, const ct_tensor *x, bn_ctx *c) {
    /* unbatched input (C, ...) has one dim less than the batched kinds' highest rank */
    bool unbatched = ct_tensor_dim(x) == kinds[c->kind].rank_lo;
    int fdim = unbatched ? 0 : 1;
    if (c->affine && ct_tensor_size(x, fdim) != c->num_features) {
        ct_error(CT_ERROR_VALUE, kinds[c->kind].name,
                 "expected input's size at dim=%d to match num_features (%lld), but got: %lld.", fdim,
                 (long long)c->num_features, (long long)ct_tensor_size(x, fdim));
        return NULL;
    }
    ct_scope_begin();
    const ct_tensor *in = unbatched ? ct_unsqueeze(x, 0) : x;
    /* momentum=None: 0 for InstanceNorm, as PyTorch's */
    ct_tensor *y = in ? ct_instance_norm(in, ct_module_buffer(m, "running_mean"), ct_module_buffer(m, "running_var"),
                                         ct_module_param(m, "weight"), ct_module_param(m, "bias"),
                                         ct_module_is_training(m) || !c->track, c->momentum < 0 ? 0 : c->momentum,
                                         c->eps)
                      : NULL;
    if (y && unbatched)
        y = ct_squeeze_dim(y, 0);
    ct_keep(y);
    ct_scope_end();
    return y;
}

static ct_tensor *batchnorm_forward(ct_module *m, const ct_tensor *x) {
    bn_ctx *c = ct_module_ctx(m);
    if (x && check_rank(c, x))
        return NULL;
    if (x && c->kind >= IN1D)
        return instancenorm_forward(m, x, c);
    bool training = ct_module_is_training(m);
    ct_tensor *rm = ct_module_buffer(m, "running_mean"), *rv = ct_module_buffer(m, "running_var");
    double momentum = c->momentum;
    if (training && c->track) {
        ct_tensor *nbt = ct_module_buffer(m, "num_batches_tracked");
        ct_scope_begin();
        ct_tensor *r = ct_add_scalar_(nbt, ct_scalar_int(1));
        int64_t count = 0;
        /* momentum=None: the cumulative average, factor 1 / num_batches_tracked */
        if (r && c->momentum < 0 && ct_item_int64(nbt, &count) == CT_OK)
            momentum = 1.0 / (double)count;
        else if (c->momentum < 0)
            r = NULL;
        ct_scope_end();
        if (!r)
            return NULL;
    }
    /* batch statistics in training, or when there are no running ones */
    bool use_batch = training || !rm;
    return ct_batch_norm(x, !training || c->track ? rm : NULL, !training || c->track ? rv : NULL,
                         ct_module_param(m, "weight"), ct_module_param(m, "bias"), use_batch, momentum, c->eps);
}

static int batchnorm_repr(const ct_module *m, char *buf, size_t cap) {
    bn_ctx *c = ct_module_ctx(m);
    char eps[40], mom[40];
    ct_nn_float_repr(c->eps, eps, sizeof eps);
    if (c->momentum < 0)
        snprintf(mom, sizeof mom, "None");
    else
        ct_nn_float_repr(c->momentum, mom, sizeof mom);
    const char *affine = c->affine ? "True" : "False";
    return snprintf(buf, cap, "%lld, eps=%s, momentum=%s, affine=%s, bias=%s, track_running_stats=%s",
                    (long long)c->num_features, eps, mom, affine, affine, c->track ? "True" : "False");
}

static ct_module *norm_base(int kind, int64_t num_features, double eps, double momentum, bool affine,
                            bool track_running_stats, ct_dtype dtype) {
    const char *op = kinds[kind].name;
    if (num_features <= 0) {
        ct_error(CT_ERROR_VALUE, op, "num_features must be positive, got %lld", (long long)num_features);
        return NULL;
    }
    if (ct_nn_layer_dtype(op, &dtype))
        return NULL;
    ct_module *m = ct_nn_module_with_ctx(op, batchnorm_forward, sizeof(bn_ctx));
    if (!m)
        return NULL;
    bn_ctx *c = ct_module_ctx(m);
    c->eps = eps;
    c->momentum = momentum;
    c->track = track_running_stats;
    c->num_features = num_features;
    c->affine = affine;
    c->kind = kind;
    ct_module_set_extra_repr(m, batchnorm_repr);
    ct_scope_begin();
    bool ok = true;
    if (affine) {
        ct_tensor *w = ct_nn_new_param(m, "weight", CT_SHAPE(num_features), dtype);
        ct_tensor *b = w ? ct_nn_new_param(m, "bias", CT_SHAPE(num_features), dtype) : NULL;
        ok = w && b && ct_init_ones_(w) && ct_init_zeros_(b);
    }
    if (ok && track_running_stats) {
        /* on the default device, as the parameters (Note [Default device] in src/core/device.c);
         * a factory's failure must not register a None buffer */
        ct_device dev = ct_get_default_device();
        ct_tensor *mean = ct_zeros(CT_SHAPE(num_features), dtype, dev);
        ct_tensor *var = mean ? ct_ones(CT_SHAPE(num_features), dtype, dev) : NULL;
        ct_tensor *nbt = var ? ct_zeros(NULL, 0, CT_I64, dev) : NULL;
        ok = nbt && !ct_module_register_buffer(m, "running_mean", mean) &&
             !ct_module_register_buffer(m, "running_var", var) &&
             !ct_module_register_buffer(m, "num_batches_tracked", nbt);
    }
    ct_scope_end();
    if (!ok) {
        ct_module_free(m);
        return NULL;
    }
    return m;
}

ct_module *ct_nn_batch_norm1d(int64_t num_features, double eps, double momentum, bool affine,
                              bool track_running_stats, ct_dtype dtype) {
    return norm_base(BN1D, num_features, eps, momentum, affine, track_running_stats, dtype);
}

ct_module *ct_nn_batch_norm2d(int64_t num_features, double eps, double momentum, bool affine,
                              bool track_running_stats, ct_dtype dtype) {
    return norm_base(BN2D, num_features, eps, momentum, affine, track_running_stats, dtype);
}

ct_module *ct_nn_batch_norm3d(int64_t num_features, double eps, double momentum, bool affine,
                              bool track_running_stats, ct_dtype dtype) {
    return norm_base(BN3D, num_features, eps, momentum, affine, track_running_stats, dtype);
}

ct_module *ct_nn_instance_norm1d(int64_t num_features, double eps, double momentum, bool affine,
                                 bool track_running_stats, ct_dtype dtype) {
    return norm_base(IN1D, num_features, eps, momentum, affine, track_running_stats, dtype);
}

ct_module *ct_nn_instance_norm2d(int64_t num_features, double eps, double momentum, bool affine,
                                 bool track_running_stats, ct_dtype dtype) {
    return norm_base(IN2D, num_features, eps, momentum, affine, track_running_stats, dtype);
}

/* ------------------------------------------------------------------ GroupNorm */

typedef struct gn_ctx {
    int64_t num_groups, num_channels;
    double eps;
} gn_ctx;

static ct_tensor *groupnorm_forward(ct_module *m, const ct_tensor *x) {
    const gn_ctx *c = ct_module_ctx(m);
    return ct_group_norm(x, c->num_groups, ct_module_param(m, "weight"), ct_module_param(m, "bias"), c->eps);
}

static int groupnorm_repr(const ct_module *m, char *buf, size_t cap) {
    const gn_ctx *c = ct_module_ctx(m);
    char eps[40];
    ct_nn_float_repr(c->eps, eps, sizeof eps);
    const char *affine = ct_module_param(m, "weight") ? "True" : "False";
    return snprintf(buf, cap, "%lld, %lld, eps=%s, affine=%s, bias=%s", (long long)c->num_groups,
                    (long long)c->num_channels, eps, affine, affine);
}

ct_module *ct_nn_group_norm(int64_t num_groups, int64_t num_channels, double eps, bool affine, ct_dtype dtype) {
    const char *op = "GroupNorm";
    if (num_groups <= 0 || num_channels <= 0) {
        ct_error(CT_ERROR_VALUE, op, "num_groups and num_channels must be positive, got %lld and %lld",
                 (long long)num_groups, (long long)num_channels);
        return NULL;
    }
    if (num_channels % num_groups) {
        ct_error(CT_ERROR_VALUE, op, "num_channels (%lld) must be divisible by num_groups (%lld)",
                 (long long)num_channels, (long long)num_groups);
        return NULL;
    }
    if (ct_nn_layer_dtype(op, &dtype))
        return NULL;
    ct_module *m = ct_nn_module_with_ctx(op, groupnorm_forward, sizeof(gn_ctx));
    if (!m)
        return NULL;
    gn_ctx *c = ct_module_ctx(m);
    c->num_groups = num_groups;
    c->num_channels = num_channels;
    c->eps = eps;
    ct_module_set_extra_repr(m, groupnorm_repr);
    if (affine) {
        ct_scope_begin();
        ct_tensor *w = ct_nn_new_param(m, "weight", CT_SHAPE(num_channels), dtype);
        ct_tensor *b = w ? ct_nn_new_param(m, "bias", CT_SHAPE(num_channels), dtype) : NULL;
        bool ok = w && b && ct_init_ones_(w) && ct_init_zeros_(b);
        ct_scope_end();
        if (!ok) {
            ct_module_free(m);
            return NULL;
        }
    }
    return m;
}

/* ------------------------------------------------------------------ LayerNorm, RMSNorm */

typedef struct ln_ctx {
    int64_t shape[8];
    int n;
    double eps;
} ln_ctx;

static ct_tensor *layernorm_forward(ct_module *m, const ct_tensor *x) {
    ln_ctx *c = ct_module_ctx(m);
    return ct_layer_norm(x, c->shape, c->n, ct_module_param(m, "weight"), ct_module_param(m, "bias"), c->eps);
}

static ct_tensor *rmsnorm_forward(ct_module *m, const ct_tensor *x) {
    ln_ctx *c = ct_module_ctx(m);
    return ct_rms_norm(x, c->shape, c->n, ct_module_param(m, "weight"), c->eps);
}

/* "(128,), eps=1e-05, elementwise_affine=True": normalized_shape as a Python tuple,
 * eps < 0 as RMSNorm's None. */
static int norm_repr_common(const ct_module *m, char *buf, size_t cap, const char *tail) {
    ln_ctx *c = ct_module_ctx(m);
    char shape[200], eps[40];
    int o = snprintf(shape, sizeof shape, "(");
    for (int i = 0; i < c->n && o < (int)sizeof shape; i++)
        o += snprintf(shape + o, sizeof shape - (size_t)o, i ? ", %lld" : "%lld", (long long)c->shape[i]);
    if (o < (int)sizeof shape)
        snprintf(shape + o, sizeof shape - (size_t)o, c->n == 1 ? ",)" : ")");
    if (c->eps < 0)
        snprintf(eps, sizeof eps, "None");
    else
        ct_nn_float_repr(c->eps, eps, sizeof eps);
    return snprintf(buf, cap, "%s, eps=%s, elementwise_affine=%s%s", shape, eps,
                    ct_module_param(m, "weight") ? "True" : "False", tail);
}

static int layernorm_repr(const ct_module *m, char *buf, size_t cap) {
    return norm_repr_common(m, buf, cap, ct_module_param(m, "bias") ? ", bias=True" : ", bias=False");
}

static int rmsnorm_repr(const ct_module *m, char *buf, size_t cap) { return norm_repr_common(m, buf, cap, ""); }

static ct_module *norm_module(const char *op, ct_module_forward_fn fwd, ct_module_extra_repr_fn repr,
                              const int64_t *shape, int n, double eps, bool affine, bool has_bias, ct_dtype dtype) {
    if (!shape || n < 1 || n > 8) {
        ct_error(CT_ERROR_VALUE, op, "normalized_shape must have between 1 and 8 sizes");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (shape[i] < 0) {
            ct_error(CT_ERROR_VALUE, op, "normalized_shape sizes must be non-negative");
            return NULL;
        }
    if (ct_nn_layer_dtype(op, &dtype))
        return NULL;
    ct_module *m = ct_nn_module_with_ctx(op, fwd, sizeof(ln_ctx));
    if (!m)
        return NULL;
    ct_module_set_extra_repr(m, repr);
    ln_ctx *c = ct_module_ctx(m);
    memcpy(c->shape, shape, sizeof(int64_t) * (size_t)n);
    c->n = n;
    c->eps = eps;
    if (affine) {
        ct_scope_begin();
        ct_tensor *w = ct_nn_new_param(m, "weight", shape, n, dtype);
        ct_tensor *b = w && has_bias ? ct_nn_new_param(m, "bias", shape, n, dtype) : NULL;
        bool ok = w && ct_init_ones_(w) && (!has_bias || (b && ct_init_zeros_(b)));
        ct_scope_end();
        if (!ok) {
            ct_module_free(m);
            return NULL;
        }
    }
    return m;
}

ct_module *ct_nn_layer_norm(const int64_t *normalized_shape, int n, double eps, bool elementwise_affine,
                            ct_dtype dtype) {
    return norm_module("LayerNorm", layernorm_forward, layernorm_repr, normalized_shape, n, eps, elementwise_affine,
                       true, dtype);
}

ct_module *ct_nn_layer_norm_bias(const int64_t *normalized_shape, int n, double eps, bool elementwise_affine,
                                 bool bias, ct_dtype dtype) {
    return norm_module("LayerNorm", layernorm_forward, layernorm_repr, normalized_shape, n, eps, elementwise_affine,
                       bias, dtype);
}

ct_module *ct_nn_rms_norm(const int64_t *normalized_shape, int n, double eps, bool elementwise_affine,
                          ct_dtype dtype) {
    return norm_module("RMSNorm", rmsnorm_forward, rmsnorm_repr, normalized_shape, n, eps, elementwise_affine, false,
                       dtype);
}
