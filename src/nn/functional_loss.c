/* torch.nn.functional losses. nll_loss is a fused kernel (the op ct_nll_loss), and so
 * is cross_entropy's common case (ct_cross_entropy_fused); the others are composites
 * of elementwise ops and reductions, so their gradients come from those ops. */
#include <math.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/functional_internal.h"

/* An error naming op unless r is a reduction the loss takes (BATCHMEAN: kl_div only). */
static ct_status check_reduction(const char *op, ct_reduction r, bool allow_batchmean) {
    if (r == CT_REDUCTION_NONE || r == CT_REDUCTION_MEAN || r == CT_REDUCTION_SUM ||
        (allow_batchmean && r == CT_REDUCTION_BATCHMEAN))
        return CT_OK;
    return ct_error(CT_ERROR_VALUE, op, "%d is not a valid value for reduction", (int)r);
}

static ct_tensor *reduce(const ct_tensor *loss, ct_reduction r) {
    switch (r) {
    case CT_REDUCTION_MEAN: return ct_mean(loss, NULL, 0, false, CT_DTYPE_UNDEFINED);
    case CT_REDUCTION_SUM: return ct_sum(loss, NULL, 0, false, CT_DTYPE_UNDEFINED);
    default: return ct_tensor_ref(loss);
    }
}

/* Pointwise losses need input and target of one shape (PyTorch broadcasts with a
 * warning; ctorch refuses, since the broadcast is nearly always a bug). */
static ct_status same_shape(const char *op, const ct_tensor *a, const ct_tensor *b) {
    const int nd = ct_tensor_dim(a);
    const int64_t *as = ct_tensor_shape(a), *bs = ct_tensor_shape(b);
    bool same = nd == ct_tensor_dim(b);
    for (int i = 0; same && i < nd; i++)
        same = as[i] == bs[i];
    if (!same) {
        char x[96], y[96];
        return ct_error(CT_ERROR_VALUE, op,
                        "Using a target size (%s) that is different to the input size (%s). Please ensure they have "
                        "the same size.",
                        ct_shape_str(bs, ct_tensor_dim(b), x, sizeof x), ct_shape_str(as, nd, y, sizeof y));
    }
    return CT_OK;
}

/* PyTorch's name of a scalar type, as its dtype errors print it ("Long", "Float"). */
static const char *pt_type_name(ct_dtype d) {
    switch (d) {
    case CT_DTYPE_FLOAT32: return "Float";
    case CT_DTYPE_FLOAT64: return "Double";
    case CT_DTYPE_FLOAT16: return "Half";
    case CT_DTYPE_BFLOAT16: return "BFloat16";
    case CT_DTYPE_INT64: return "Long";
    case CT_DTYPE_INT32: return "Int";
    case CT_DTYPE_INT16: return "Short";
    case CT_DTYPE_INT8: return "Char";
    case CT_DTYPE_UINT8: return "Byte";
    case CT_DTYPE_BOOL: return "Bool";
    default: return ct_dtype_name(d);
    }
}

static ct_status float_input(const char *op, const ct_tensor *t) {
    if (!ct_dtype_is_floating(ct_tensor_dtype(t)))
        return ct_error(CT_ERROR_TYPE, op, "\"%s\" not implemented for '%s'", op, ct_dtype_name(ct_tensor_dtype(t)));
    return CT_OK;
}

static ct_status pointwise_args(const char *op, const ct_tensor *input, const ct_tensor *target, ct_reduction r) {
    ct_status st = check_reduction(op, r, false);
    if (!st)
        st = same_shape(op, input, target);
    if (!st)
        st = float_input(op, input);
    return st;
}

static ct_tensor *one_minus(const ct_tensor *t) { return ct_add_scalar(ct_neg(t), ct_scalar_int(1)); }

#define LOSS_BEGIN(op)                   \
    CT_CHECK_ARG(op, input);             \
    CT_CHECK_ARG(op, target);

static ct_tensor *finish(ct_tensor *loss, ct_reduction r) {
    ct_tensor *y = loss ? reduce(loss, r) : NULL;
    ct_keep(y);
    ct_scope_end();
    return y;
}

ct_tensor *ct_mse_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction) {
    LOSS_BEGIN("mse_loss");
    if (pointwise_args("mse_loss", input, target, reduction))
        return NULL;
    ct_scope_begin();
    ct_tensor *d = ct_sub(input, target);
    return finish(ct_mul(d, d), reduction);
}

ct_tensor *ct_l1_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction) {
    LOSS_BEGIN("l1_loss");
    if (pointwise_args("l1_loss", input, target, reduction))
        return NULL;
    ct_scope_begin();
    return finish(ct_abs(ct_sub(input, target)), reduction);
}

ct_tensor *ct_smooth_l1_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction, double beta) {
    LOSS_BEGIN("smooth_l1_loss");
    if (pointwise_args("smooth_l1_loss", input, target, reduction))
        return NULL;
    if (beta < 0) {
        ct_error(CT_ERROR_VALUE, "smooth_l1_loss", "smooth_l1_loss does not support negative values for beta.");
        return NULL;
    }
    if (beta == 0)
        return ct_l1_loss(input, target, reduction);
    ct_scope_begin();
    ct_tensor *d = ct_sub(input, target), *z = ct_abs(d);
    ct_tensor *quad = ct_mul_scalar(ct_mul(d, d), ct_scalar_float(0.5 / beta));
    ct_tensor *lin = ct_sub_scalar(z, ct_scalar_float(0.5 * beta));
    return finish(ct_where(ct_lt_scalar(z, ct_scalar_float(beta)), quad, lin), reduction);
}

ct_tensor *ct_huber_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction, double delta) {
    LOSS_BEGIN("huber_loss");
    if (pointwise_args("huber_loss", input, target, reduction))
        return NULL;
    if (!(delta > 0)) {
        ct_error(CT_ERROR_VALUE, "huber_loss", "huber_loss does not support non-positive values for delta.");
        return NULL;
    }
    ct_scope_begin();
    ct_tensor *d = ct_sub(input, target), *z = ct_abs(d);
    ct_tensor *quad = ct_mul_scalar(ct_mul(d, d), ct_scalar_float(0.5));
    ct_tensor *lin = ct_mul_scalar(ct_sub_scalar(z, ct_scalar_float(0.5 * delta)), ct_scalar_float(delta));
    return finish(ct_where(ct_lt_scalar(z, ct_scalar_float(delta)), quad, lin), reduction);
}

ct_tensor *ct_binary_cross_entropy(const ct_tensor *input, const ct_tensor *target, const ct_tensor *weight,
                                   ct_reduction reduction) {
    const char *op = "binary_cross_entropy";
    LOSS_BEGIN(op);
    if (pointwise_args(op, input, target, reduction))
        return NULL;
    ct_scope_begin();
    /* PyTorch checks the range on the data (META has none). A ct_compile capture
     * records the loss's ops but not this look at the values, so compiled calls run
     * unchecked, as torch.compile's decomposition of the loss does. */
    if (ct_tensor_numel(input) > 0 && ct_tensor_device(input).type != CT_DEVICE_META && !ct_compile_is_capturing()) {
        double lo = 0, hi = 0;
        if (ct_item_double(ct_amin(input, NULL, 0, false), &lo) || ct_item_double(ct_amax(input, NULL, 0, false), &hi)) {
            ct_scope_end();
            return NULL;
        }
        if (!(lo >= 0 && hi <= 1)) {
            ct_scope_end();
            ct_error(CT_ERROR_VALUE, op, "all elements of input should be between 0 and 1");
            return NULL;
        }
    }
    /* log clamped at -100 so that 0 * log(0) stays finite, as PyTorch */
    ct_scalar lo = ct_scalar_float(-100);
    ct_tensor *lx = ct_clamp(ct_log(input), &lo, NULL);
    ct_tensor *l1x = ct_clamp(ct_log(one_minus(input)), &lo, NULL);
    ct_tensor *loss = ct_neg(ct_add(ct_mul(target, lx), ct_mul(one_minus(target), l1x)));
    if (loss && weight)
        loss = ct_mul(loss, weight);
    return finish(loss, reduction);
}

ct_tensor *ct_binary_cross_entropy_with_logits(const ct_tensor *input, const ct_tensor *target,
                                               const ct_tensor *weight, const ct_tensor *pos_weight,
                                               ct_reduction reduction) {
    const char *op = "binary_cross_entropy_with_logits";
    LOSS_BEGIN(op);
    if (pointwise_args(op, input, target, reduction))
        return NULL;
    ct_scope_begin();
    /* log(1 + exp(-x)) computed stably as log1p(exp(-|x|)) + max(-x, 0) */
    ct_tensor *sp = ct_add(ct_log1p(ct_exp(ct_neg(ct_abs(input)))), ct_relu(ct_neg(input)));
    if (sp && pos_weight) /* log_weight = 1 + (pos_weight - 1) * target */
        sp = ct_mul(sp, ct_add_scalar(ct_mul(ct_sub_scalar(pos_weight, ct_scalar_int(1)), target), ct_scalar_int(1)));
    ct_tensor *loss = ct_add(ct_mul(one_minus(target), input), sp);
    if (loss && weight)
        loss = ct_mul(loss, weight);
    return finish(loss, reduction);
}

ct_tensor *ct_kl_div(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction, bool log_target) {
    const char *op = "kl_div";
    LOSS_BEGIN(op);
    if (check_reduction(op, reduction, true) || same_shape(op, input, target) || float_input(op, input))
        return NULL;
    ct_scope_begin();
    ct_tensor *loss;
    if (log_target) {
        loss = ct_mul(ct_exp(target), ct_sub(target, input));
    } else {
        /* xlogy(t, t) - t * input, with 0 log 0 = 0 */
        ct_tensor *tlogt = ct_where_scalar_other(ct_gt_scalar(target, ct_scalar_int(0)), ct_mul(target, ct_log(target)),
                                                 ct_scalar_float(0));
        loss = ct_sub(tlogt, ct_mul(target, input));
    }
    if (loss && reduction == CT_REDUCTION_BATCHMEAN) {
        ct_tensor *s = ct_sum(loss, NULL, 0, false, CT_DTYPE_UNDEFINED);
        loss = s && ct_tensor_dim(input) > 0 ? ct_div_scalar(s, ct_scalar_int(ct_tensor_shape(input)[0])) : s;
        return finish(loss, CT_REDUCTION_NONE);
    }
    return finish(loss, reduction);
}

/* ------------------------------------------------------------------ cross_entropy */

ct_tensor *ct_cross_entropy(const ct_tensor *input, const ct_tensor *target, const ct_tensor *weight,
                            ct_reduction reduction, int64_t ignore_index, double label_smoothing) {
    const char *op = "cross_entropy";
    LOSS_BEGIN(op);
    if (check_reduction(op, reduction, false) || float_input(op, input))
        return NULL;
    if (!(label_smoothing >= 0 && label_smoothing <= 1)) {
        ct_error(CT_ERROR_VALUE, op, "label_smoothing must be between 0.0 and 1.0. Got: %g", label_smoothing);
        return NULL;
    }
    const int ndim = ct_tensor_dim(input);
    if (ndim < 1) {
        ct_error(CT_ERROR_VALUE, op, "input tensor should be 1D or 2D");
        return NULL;
    }
    int cdim = ndim >= 2 ? 1 : 0;
    int64_t nc = ct_tensor_shape(input)[cdim];
    if (weight && (ct_tensor_dim(weight) != 1 || ct_tensor_shape(weight)[0] != nc)) {
        char s[96];
        ct_error(CT_ERROR_VALUE, op,
                 "weight tensor should be defined either for all %lld classes or no classes but got weight tensor of "
                 "shape: %s",
                 (long long)nc, ct_shape_str(ct_tensor_shape(weight), ct_tensor_dim(weight), s, sizeof s));
        return NULL;
    }
    /* As in PyTorch, the target's shape says what it holds: the input's shape means
     * class probabilities (a floating dtype), any other shape class indices (Long), so
     * float class labels are a dtype error, not a shape one. */
    const ct_dtype tdt = ct_tensor_dtype(target);
    bool probs = ct_tensor_dim(target) == ndim;
    for (int i = 0; probs && i < ndim; i++)
        probs = ct_tensor_shape(target)[i] == ct_tensor_shape(input)[i];
    if (probs && !ct_dtype_is_floating(tdt)) {
        ct_error(CT_ERROR_TYPE, op, "Expected floating point type for target with class probabilities, got %s",
                 pt_type_name(tdt));
        return NULL;
    }
    if (!probs && tdt != CT_DTYPE_INT64) {
        ct_error(CT_ERROR_TYPE, op, "expected scalar type Long but found %s", pt_type_name(tdt));
        return NULL;
    }
    /* The common case runs as one fused op (Note [Fused cross_entropy] in
     * src/meta/nn_fused.c): no log-probabilities are materialized or kept. */
    if (ndim == 2 && !probs && !weight && label_smoothing == 0 && ct_dtype_is_floating(ct_tensor_dtype(input)) &&
        ct_tensor_dim(target) == 1 && ct_tensor_shape(target)[0] == ct_tensor_shape(input)[0])
        return ct_cross_entropy_fused(input, target, reduction, ignore_index, NULL);
    int64_t cd = cdim;
    ct_scope_begin();
    ct_tensor *logp = ct_log_softmax(input, cdim, CT_DTYPE_UNDEFINED);
    ct_tensor *wv = weight ? ct_nn_channel_view(weight, cdim, ndim) : NULL;
    ct_tensor *y = NULL;
    if (!logp) {
        /* fall through with y NULL */
    } else if (probs) {
        const ct_tensor *t = target;
        if (label_smoothing > 0)
            t = ct_add_scalar(ct_mul_scalar(target, ct_scalar_float(1 - label_smoothing)),
                              ct_scalar_float(label_smoothing / (double)nc));
        ct_tensor *prod = ct_mul(logp, t);
        if (prod && wv)
            prod = ct_mul(prod, wv);
        ct_tensor *loss = ct_neg(ct_sum(prod, &cd, 1, false, CT_DTYPE_UNDEFINED));
        if (loss && reduction == CT_REDUCTION_MEAN) /* divided by the batch size, not the weights */
            y = ct_div_scalar(ct_sum(loss, NULL, 0, false, CT_DTYPE_UNDEFINED),
                              ct_scalar_int(nc ? ct_tensor_numel(input) / nc : 0));
        else if (loss)
            y = reduce(loss, reduction);
    } else {
        y = ct_nll_loss(logp, target, weight, reduction, ignore_index);
        if (y && label_smoothing > 0) {
            /* the uniform part: -(sum over classes of w_c log p_c), 0 where ignored */
            ct_tensor *prod = wv ? ct_mul(logp, wv) : logp;
            ct_tensor *smooth = ct_neg(ct_sum(prod, &cd, 1, false, CT_DTYPE_UNDEFINED));
            ct_tensor *keep = ct_ne_scalar(target, ct_scalar_int(ignore_index));
            smooth = ct_mul(smooth, keep);
            ct_tensor *s = NULL;
            if (reduction == CT_REDUCTION_NONE) {
                s = smooth;
            } else {
                s = ct_sum(smooth, NULL, 0, false, CT_DTYPE_UNDEFINED);
                if (s && reduction == CT_REDUCTION_MEAN) {
                    ct_tensor *den;
                    if (weight) { /* the weights of the targets that count, as nll_loss divides */
                        ct_tensor *safe = ct_where_scalar_other(keep, target, ct_scalar_int(0));
                        ct_tensor *wt = ct_embedding(safe, ct_reshape(weight, CT_SHAPE(-1, 1)), CT_NO_PADDING_IDX);
                        den = ct_sum(ct_mul(ct_squeeze_dim(wt, -1), keep), NULL, 0, false, CT_DTYPE_UNDEFINED);
                    } else {
                        den = ct_sum(keep, NULL, 0, false, ct_tensor_dtype(input));
                    }
                    s = ct_div(s, den);
                }
            }
            y = s ? ct_add(ct_mul_scalar(y, ct_scalar_float(1 - label_smoothing)),
                           ct_mul_scalar(s, ct_scalar_float(label_smoothing / (double)nc)))
                  : NULL;
        }
    }
    ct_keep(y);
    ct_scope_end();
    return y;
}
