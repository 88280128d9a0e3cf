/* torch.nn.functional composites: convolutions by padding mode, normalizations,
 * dropout and attention, built from the op library (their gradients come from the
 * ops they call). The fused kernels are ops of their own (ct_fused_layer_norm,
 * ct_fused_scaled_dot_product_attention). Like the rest of src/nn, this file reads
 * tensors through the public accessors only (docs/design.md, "What each folder may
 * include"). */
#include <math.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/functional_internal.h"

/* Note [Statistics without a graph]
 * Running statistics of batch_norm are buffers, and nn.init and load_state_dict write
 * parameters in place: none of these writes may be recorded. They run with grad mode
 * off (ct_set_grad_enabled(false), restored afterwards), which is what torch.no_grad
 * does; autograd's grad-mode code then keeps the AUTOGRAD key out of the dispatch. */

/* t viewed with size n at dim `at` of an ndim-dim shape of ones: (1, C, 1, 1). */
ct_tensor *ct_nn_channel_view(const ct_tensor *t, int at, int ndim) {
    int64_t shape[CT_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
        shape[i] = 1;
    shape[at] = ct_tensor_numel(t);
    return ct_reshape(t, shape, ndim);
}

/* ------------------------------------------------------------------ convolutions */

ct_tensor *ct_conv1d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias, int64_t stride,
                     int64_t padding, int64_t dilation, int64_t groups) {
    CT_CHECK_ARG("conv1d", input);
    CT_CHECK_ARG("conv1d", weight);
    int nd = ct_tensor_dim(input);
    if (nd != 2 && nd != 3) {
        char s[96];
        ct_error(CT_ERROR_VALUE, "conv1d",
                 "Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: %s",
                 ct_shape_str(ct_tensor_shape(input), nd, s, sizeof s));
        return NULL;
    }
    if (ct_tensor_dim(weight) != 3) {
        ct_error(CT_ERROR_VALUE, "conv1d", "weight should have 3 dimensions, got %d", ct_tensor_dim(weight));
        return NULL;
    }
    ct_scope_begin();
    int64_t s[2] = {1, stride}, p[2] = {0, padding}, d[2] = {1, dilation};
    ct_tensor *y = ct_conv2d(ct_unsqueeze(input, -2), ct_unsqueeze(weight, 2), bias, s, p, d, groups);
    y = y ? ct_squeeze_dim(y, -2) : NULL;
    ct_keep(y);
    ct_scope_end();
    return y;
}

/* padding="same": total padding d (k - 1) per dim, split evenly; an odd total puts the
 * extra element at the end. conv2d pads symmetrically, so pad one more on both sides
 * and drop the first output row/column, whose window started one element too early. */
ct_tensor *ct_conv2d_padding(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias,
                             const int64_t stride[2], const char *padding, const int64_t dilation[2],
                             int64_t groups) {
    CT_CHECK_ARG("conv2d", input);
    CT_CHECK_ARG("conv2d", weight);
    if (!padding) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "conv2d", "padding is NULL");
        return NULL;
    }
    if (strcmp(padding, "valid") == 0)
        return ct_conv2d(input, weight, bias, stride, NULL, dilation, groups);
    if (strcmp(padding, "same") != 0) {
        ct_error(CT_ERROR_VALUE, "conv2d", "Invalid padding string '%s', should be one of {'valid', 'same'}", padding);
        return NULL;
    }
    if (stride && (stride[0] != 1 || stride[1] != 1)) {
        ct_error(CT_ERROR_VALUE, "conv2d", "padding='same' is not supported for strided convolutions");
        return NULL;
    }
    if (ct_tensor_dim(weight) != 4) {
        ct_error(CT_ERROR_VALUE, "conv2d", "weight should have 4 dimensions, got %d", ct_tensor_dim(weight));
        return NULL;
    }
    int64_t pad[2], extra[2];
    for (int i = 0; i < 2; i++) {
        int64_t d = dilation ? dilation[i] : 1;
        if (d <= 0) {
            ct_error(CT_ERROR_VALUE, "conv2d", "dilation should be greater than zero");
            return NULL;
        }
        int64_t total = d * (ct_tensor_shape(weight)[2 + i] - 1);
        extra[i] = total % 2;
        pad[i] = total / 2 + extra[i];
    }
    ct_scope_begin();
    ct_tensor *y = ct_conv2d(input, weight, bias, NULL, pad, dilation, groups);
    for (int i = 0; i < 2 && y; i++)
        if (extra[i]) {
            int dim = ct_tensor_dim(y) - 2 + i;
            y = ct_narrow(y, dim, 1, ct_tensor_shape(y)[dim] - 1);
        }
    ct_keep(y);
    ct_scope_end();
    return y;
}

ct_tensor *ct_conv1d_padding(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias, int64_t stride,
                             const char *padding, int64_t dilation, int64_t groups) {
    CT_CHECK_ARG("conv1d", input);
    CT_CHECK_ARG("conv1d", weight);
    int nd = ct_tensor_dim(input);
    if (nd != 2 && nd != 3) {
        char s[96];
        ct_error(CT_ERROR_VALUE, "conv1d",
                 "Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: %s",
                 ct_shape_str(ct_tensor_shape(input), nd, s, sizeof s));
        return NULL;
    }
    if (ct_tensor_dim(weight) != 3) {
        ct_error(CT_ERROR_VALUE, "conv1d", "weight should have 3 dimensions, got %d", ct_tensor_dim(weight));
        return NULL;
    }
    ct_scope_begin();
    int64_t s[2] = {1, stride}, d[2] = {1, dilation};
    ct_tensor *y = ct_conv2d_padding(ct_unsqueeze(input, -2), ct_unsqueeze(weight, 2), bias, s, padding, d, groups);
    y = y ? ct_squeeze_dim(y, -2) : NULL;
    ct_keep(y);
    ct_scope_end();
    return y;
}

/* ------------------------------------------------------------------ normalization */

static ct_status check_channel_vec(const char *op, const char *what, const ct_tensor *t, int64_t c) {
    if (t && ct_tensor_numel(t) != c)
        return ct_error(CT_ERROR_VALUE, op, "%s should contain %lld elements not %lld", what, (long long)c,
                        (long long)ct_tensor_numel(t));
    return CT_OK;
}

ct_tensor *ct_batch_norm(const ct_tensor *input, ct_tensor *running_mean, ct_tensor *running_var,
                         const ct_tensor *weight, const ct_tensor *bias, bool training, double momentum, double eps) {
    const char *op = "batch_norm";
    CT_CHECK_ARG(op, input);
    const int ndim = ct_tensor_dim(input);
    const int64_t *shape = ct_tensor_shape(input);
    if (ndim < 2) {
        ct_error(CT_ERROR_VALUE, op, "Expected 2D or higher input (got %dD input)", ndim);
        return NULL;
    }
    if (!ct_dtype_is_floating(ct_tensor_dtype(input))) {
        ct_error(CT_ERROR_TYPE, op, "\"batch_norm\" not implemented for '%s'",
                 ct_dtype_name(ct_tensor_dtype(input)));
        return NULL;
    }
    int64_t c = shape[1];
    if (check_channel_vec(op, "running_mean", running_mean, c) || check_channel_vec(op, "running_var", running_var, c) ||
        check_channel_vec(op, "weight", weight, c) || check_channel_vec(op, "bias", bias, c))
        return NULL;
    if (!training && (!running_mean || !running_var)) {
        ct_error(CT_ERROR_VALUE, op, "running_mean and running_var must be defined in evaluation mode");
        return NULL;
    }
    int64_t dims[CT_MAX_DIMS];
    int nd = 0;
    int64_t count = 1;
    bool empty = false, huge = false; /* an expanded input's count may pass INT64_MAX */
    for (int d = 0; d < ndim; d++)
        if (d != 1) {
            dims[nd++] = d;
            empty = empty || shape[d] == 0;
            huge = huge || __builtin_mul_overflow(count, shape[d], &count);
        }
    count = empty ? 0 : huge ? INT64_MAX : count;
    if (training && count <= 1) {
        char s[96];
        ct_error(CT_ERROR_VALUE, op, "Expected more than 1 value per channel when training, got input size %s",
                 ct_shape_str(shape, ndim, s, sizeof s));
        return NULL;
    }
    ct_scope_begin();
    ct_tensor *mean, *var, *y = NULL;
    if (training) {
        mean = ct_mean(input, dims, nd, true, CT_DTYPE_UNDEFINED);
        var = ct_var(input, dims, nd, 0.0, true);
        if (mean && var && (running_mean || running_var)) {
            bool grad_was = ct_set_grad_enabled(false); /* Note [Statistics without a graph] */
            bool ok = true;
            if (running_mean)
                ok = ct_mul_scalar_(running_mean, ct_scalar_float(1.0 - momentum)) &&
                     ct_add_(running_mean, ct_reshape(ct_mul_scalar(mean, ct_scalar_float(momentum)), CT_SHAPE(-1)));
            if (ok && running_var) {
                double unbias = (double)count / (double)(count - 1);
                ok = ct_mul_scalar_(running_var, ct_scalar_float(1.0 - momentum)) &&
                     ct_add_(running_var,
                             ct_reshape(ct_mul_scalar(var, ct_scalar_float(momentum * unbias)), CT_SHAPE(-1)));
            }
            ct_set_grad_enabled(grad_was);
            if (!ok)
                mean = NULL;
        }
    } else {
        mean = ct_nn_channel_view(running_mean, 1, ndim);
        var = ct_nn_channel_view(running_var, 1, ndim);
    }
    if (mean && var) {
        y = ct_mul(ct_sub(input, mean), ct_rsqrt(ct_add_scalar(var, ct_scalar_float(eps))));
        if (y && weight)
            y = ct_mul(y, ct_nn_channel_view(weight, 1, ndim));
        if (y && bias)
            y = ct_add(y, ct_nn_channel_view(bias, 1, ndim));
    }
    ct_keep(y);
    ct_scope_end();
    return y;
}

static ct_status check_normalized(const char *op, const ct_tensor *x, const int64_t *ns, int n) {
    if (!ns && n > 0)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "normalized_shape is NULL");
    const int xd = ct_tensor_dim(x);
    const int64_t *xs = ct_tensor_shape(x);
    bool ok = n >= 1 && n <= xd && n <= CT_MAX_DIMS;
    for (int i = 0; ok && i < n; i++)
        ok = xs[xd - n + i] == ns[i];
    if (!ok) {
        char a[96], b[96], inner[96];
        int k = n < 0 ? 0 : n > CT_MAX_DIMS ? CT_MAX_DIMS : n;
        ct_shape_str(ns, k, inner, sizeof inner);
        inner[strlen(inner) - 1] = 0;
        return ct_error(CT_ERROR_VALUE, op,
                        "Given normalized_shape=%s, expected input with shape [*%s%s], but got input of size%s",
                        ct_shape_str(ns, k, a, sizeof a), k ? ", " : "", inner + 1,
                        ct_shape_str(xs, xd, b, sizeof b));
    }
    return CT_OK;
}

static ct_status check_affine(const char *op, const char *what, const ct_tensor *t, const int64_t *ns, int n) {
    if (!t)
        return CT_OK;
    const int64_t *ts = ct_tensor_shape(t);
    bool same = ct_tensor_dim(t) == n;
    for (int i = 0; same && i < n; i++)
        same = ts[i] == ns[i];
    if (!same) {
        char a[96], b[96];
        return ct_error(CT_ERROR_VALUE, op, "Expected %s to be of same shape as normalized_shape, but got %s of shape "
                        "%s and normalized_shape = %s",
                        what, what, ct_shape_str(ts, ct_tensor_dim(t), a, sizeof a), ct_shape_str(ns, n, b, sizeof b));
    }
    return CT_OK;
}

ct_tensor *ct_layer_norm(const ct_tensor *input, const int64_t *normalized_shape, int n, const ct_tensor *weight,
                         const ct_tensor *bias, double eps) {
    const char *op = "layer_norm";
    CT_CHECK_ARG(op, input);
    if (check_normalized(op, input, normalized_shape, n) || check_affine(op, "weight", weight, normalized_shape, n) ||
        check_affine(op, "bias", bias, normalized_shape, n))
        return NULL;
    const ct_dtype dt = ct_tensor_dtype(input);
    if (!ct_dtype_is_floating(dt)) {
        ct_error(CT_ERROR_TYPE, op, "\"LayerNormKernelImpl\" not implemented for '%s'", ct_dtype_name(dt));
        return NULL;
    }
    /* one fused kernel (forward and backward, on the CPU and CUDA); the composite below
     * serves mixed dtypes */
    if ((!weight || ct_tensor_dtype(weight) == dt) && (!bias || ct_tensor_dtype(bias) == dt))
        return ct_fused_layer_norm(input, normalized_shape, n, weight, bias, eps);
    int64_t dims[CT_MAX_DIMS];
    for (int i = 0; i < n; i++)
        dims[i] = ct_tensor_dim(input) - n + i;
    ct_scope_begin();
    ct_tensor *mean = ct_mean(input, dims, n, true, CT_DTYPE_UNDEFINED);
    ct_tensor *var = ct_var(input, dims, n, 0.0, true);
    ct_tensor *y = ct_mul(ct_sub(input, mean), ct_rsqrt(ct_add_scalar(var, ct_scalar_float(eps))));
    if (y && weight)
        y = ct_mul(y, weight);
    if (y && bias)
        y = ct_add(y, bias);
    ct_keep(y);
    ct_scope_end();
    return y;
}

ct_tensor *ct_group_norm(const ct_tensor *input, int64_t num_groups, const ct_tensor *weight, const ct_tensor *bias,
                         double eps) {
    const char *op = "group_norm";
    CT_CHECK_ARG(op, input);
    const int ndim = ct_tensor_dim(input);
    const int64_t *shape = ct_tensor_shape(input);
    if (ndim < 2) {
        ct_error(CT_ERROR_VALUE, op, "Expected at least 2 dimensions for input tensor but received %d", ndim);
        return NULL;
    }
    int64_t c = shape[1];
    if (num_groups <= 0 || c % num_groups != 0) {
        char s[96];
        ct_error(CT_ERROR_VALUE, op,
                 "Expected number of channels in input to be divisible by num_groups, but got input of shape %s and "
                 "num_groups=%lld",
                 ct_shape_str(shape, ndim, s, sizeof s), (long long)num_groups);
        return NULL;
    }
    if (check_channel_vec(op, "weight", weight, c) || check_channel_vec(op, "bias", bias, c))
        return NULL;
    if (!ct_dtype_is_floating(ct_tensor_dtype(input))) {
        ct_error(CT_ERROR_TYPE, op, "\"GroupNormKernelImpl\" not implemented for '%s'",
                 ct_dtype_name(ct_tensor_dtype(input)));
        return NULL;
    }
    ct_scope_begin();
    ct_tensor *g = ct_reshape(input, CT_SHAPE(shape[0], num_groups, -1));
    int64_t last = 2;
    ct_tensor *mean = ct_mean(g, &last, 1, true, CT_DTYPE_UNDEFINED);
    ct_tensor *var = ct_var(g, &last, 1, 0.0, true);
    ct_tensor *y = ct_mul(ct_sub(g, mean), ct_rsqrt(ct_add_scalar(var, ct_scalar_float(eps))));
    y = ct_reshape(y, shape, ndim);
    if (y && weight)
        y = ct_mul(y, ct_nn_channel_view(weight, 1, ndim));
    if (y && bias)
        y = ct_add(y, ct_nn_channel_view(bias, 1, ndim));
    ct_keep(y);
    ct_scope_end();
    return y;
}

/* ------------------------------------------------------------------ dropout */

ct_tensor *ct_dropout(const ct_tensor *input, double p, bool training) {
    CT_CHECK_ARG("dropout", input);
    if (!(p >= 0 && p <= 1)) {
        ct_error(CT_ERROR_VALUE, "dropout", "dropout probability has to be between 0 and 1, but got %g", p);
        return NULL;
    }
    if (!training || p == 0)
        return ct_tensor_ref(input);
    if (!ct_dtype_is_floating(ct_tensor_dtype(input))) {
        ct_error(CT_ERROR_TYPE, "dropout", "dropout is only implemented for floating-point tensors, got %s",
                 ct_dtype_name(ct_tensor_dtype(input)));
        return NULL;
    }
    ct_scope_begin();
    ct_tensor *y;
    if (p == 1) {
        y = ct_mul(input, ct_zeros_like(input, CT_DTYPE_UNDEFINED));
    } else {
        /* Bernoulli(1 - p) keep-mask from the default Philox stream, pre-scaled */
        ct_tensor *mask = ct_bernoulli_(ct_empty_like(input, CT_DTYPE_UNDEFINED), 1.0 - p);
        y = mask ? ct_mul(input, ct_mul_scalar(mask, ct_scalar_float(1.0 / (1.0 - p)))) : NULL;
    }
    ct_keep(y);
    ct_scope_end();
    return y;
}

/* ------------------------------------------------------------------ attention */

/* The reference formula, for dropout where flash attention does not apply:
 * softmax(q k^T scale + mask), dropout, @ v. */
static ct_tensor *sdpa_math(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v, const ct_tensor *mask,
                            double dropout_p, bool is_causal, double scale) {
    int64_t l = ct_tensor_size(q, -2), s = ct_tensor_size(k, -2);
    ct_tensor *sc = ct_mul_scalar(ct_matmul(q, ct_transpose(k, -2, -1)), ct_scalar_float(scale));
    if (sc && is_causal) {
        /* the causal mask (key j <= query i) made where the scores are, by a fill and
         * tril: no arange, whose values a CUDA graph could not capture */
        ct_tensor *keep = ct_tril(ct_ones(CT_SHAPE(l, s), CT_DTYPE_BOOL, ct_tensor_device(q)), 0);
        sc = ct_where_scalar_other(keep, sc, ct_scalar_float(-INFINITY));
    } else if (sc && mask) {
        sc = ct_tensor_dtype(mask) == CT_DTYPE_BOOL ? ct_where_scalar_other(mask, sc, ct_scalar_float(-INFINITY))
                                                    : ct_add(sc, mask);
    }
    ct_tensor *p = sc ? ct_softmax(sc, -1, CT_DTYPE_UNDEFINED) : NULL;
    p = p ? ct_dropout(p, dropout_p, true) : NULL;
    return p ? ct_matmul(p, v) : NULL;
}

ct_tensor *ct_scaled_dot_product_attention(const ct_tensor *query, const ct_tensor *key, const ct_tensor *value,
                                           const ct_tensor *attn_mask, double dropout_p, bool is_causal,
                                           const double *scale) {
    const char *op = "scaled_dot_product_attention";
    CT_CHECK_ARG(op, query);
    CT_CHECK_ARG(op, key);
    CT_CHECK_ARG(op, value);
    if (!(dropout_p >= 0 && dropout_p <= 1)) {
        ct_error(CT_ERROR_VALUE, op, "dropout probability has to be between 0 and 1, but got %g", dropout_p);
        return NULL;
    }
    if (dropout_p == 0) /* the op checks its arguments */
        return ct_fused_scaled_dot_product_attention(query, key, value, attn_mask, is_causal, scale);
    /* flash attention drops out inside its kernels (Note [Flash attention dropout
     * draws]); its mask is drawn in its own layout, not the formula's below */
    if (ct_backends_cuda_can_use_flash_attention(query, key, value, attn_mask))
        return ct_fused_scaled_dot_product_attention_dropout(query, key, value, attn_mask, is_causal, scale,
                                                             dropout_p);
    if (ct_scaled_dot_product_attention_check(query, key, value, attn_mask, is_causal))
        return NULL;
    int64_t e = ct_tensor_size(query, -1);
    double sc = scale ? *scale : 1.0 / sqrt((double)(e > 0 ? e : 1));
    ct_scope_begin();
    ct_tensor *y = sdpa_math(query, key, value, attn_mask, dropout_p, is_causal, sc);
    ct_keep(y);
    ct_scope_end();
    return y;
}
