/* The fused nn ops' public wrappers (layer norms, pools, attention, embedding,
 * nll_loss, one_hot, conv_transpose2d): each packs a ct_call; the checks and shape
 * rules are src/meta/nn_fused.c's. Also the public entries nn builds its layers on
 * (ct_fused_layer_norm, ct_fused_scaled_dot_product_attention, the attention check),
 * and conv_transpose2d's composite kernel. */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "core/view.h"
#include "dispatch/dispatch_internal.h"
#include "meta/nn_fused.h"

/* ------------------------------------------------------------------ wrappers */

static void put2(ct_call *c, int at, const int64_t *v, int64_t dflt) {
    c->ints[at] = v ? v[0] : dflt;
    c->ints[at + 1] = v ? v[1] : dflt;
}

ct_tensor *ct_conv_transpose2d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias,
                               const int64_t stride[2], const int64_t padding[2], const int64_t output_padding[2],
                               int64_t groups, const int64_t dilation[2]) {
    CT_CHECK_ARG("conv_transpose2d", input);
    CT_CHECK_ARG("conv_transpose2d", weight);
    ct_call c = {.op = CT_OP_conv_transpose2d, .nin = 3, .in = {input, weight, bias}, .nints = 9,
                 .dtype = CT_DTYPE_UNDEFINED};
    put2(&c, 0, stride, 1);
    put2(&c, 2, padding, 0);
    put2(&c, 4, output_padding, 0);
    put2(&c, 6, dilation, 1);
    c.ints[8] = groups;
    return ct_dispatch_1(&c);
}

static void avg_ints(ct_call *c, const int64_t kernel[2], const int64_t stride[2], const int64_t padding[2],
                     bool ceil_mode, bool count_include_pad, int64_t divisor_override) {
    put2(c, 0, kernel, 1);
    put2(c, 2, stride ? stride : kernel, 1);
    put2(c, 4, padding, 0);
    c->ints[6] = ceil_mode;
    c->ints[7] = count_include_pad;
    c->ints[8] = divisor_override;
    c->ints[9] = divisor_override != 0;
    c->nints = 10;
}

ct_tensor *ct_avg_pool2d(const ct_tensor *input, const int64_t kernel[2], const int64_t stride[2],
                         const int64_t padding[2], bool ceil_mode, bool count_include_pad, int64_t divisor_override) {
    CT_CHECK_ARG("avg_pool2d", input);
    if (!kernel) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "avg_pool2d", "kernel size is NULL");
        return NULL;
    }
    ct_call c = {.op = CT_OP_avg_pool2d, .nin = 1, .in = {input}, .dtype = CT_DTYPE_UNDEFINED};
    avg_ints(&c, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_avg_pool2d_backward(const ct_tensor *grad_output, const ct_tensor *input, const int64_t kernel[2],
                                  const int64_t stride[2], const int64_t padding[2], bool ceil_mode,
                                  bool count_include_pad, int64_t divisor_override) {
    CT_CHECK_ARG("avg_pool2d_backward", grad_output);
    CT_CHECK_ARG("avg_pool2d_backward", input);
    if (!kernel) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "avg_pool2d_backward", "kernel size is NULL");
        return NULL;
    }
    ct_call c = {.op = CT_OP_avg_pool2d_backward, .nin = 2, .in = {grad_output, input}, .dtype = CT_DTYPE_UNDEFINED};
    avg_ints(&c, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_adaptive_avg_pool2d(const ct_tensor *input, const int64_t output_size[2]) {
    CT_CHECK_ARG("adaptive_avg_pool2d", input);
    if (!output_size) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "adaptive_avg_pool2d", "output_size is NULL");
        return NULL;
    }
    ct_call c = {.op = CT_OP_adaptive_avg_pool2d, .nin = 1, .in = {input}, .nints = 2, .dtype = CT_DTYPE_UNDEFINED};
    put2(&c, 0, output_size, 1);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_adaptive_avg_pool2d_backward(const ct_tensor *grad_output, const ct_tensor *input) {
    CT_CHECK_ARG("adaptive_avg_pool2d_backward", grad_output);
    CT_CHECK_ARG("adaptive_avg_pool2d_backward", input);
    ct_call c = {.op = CT_OP_adaptive_avg_pool2d_backward, .nin = 2, .in = {grad_output, input}, .nints = 2,
                 .dtype = CT_DTYPE_UNDEFINED};
    int o = grad_output->ndim - 2;
    c.ints[0] = o >= 0 ? grad_output->shape[o] : 0;
    c.ints[1] = o >= 0 ? grad_output->shape[o + 1] : 0;
    return ct_dispatch_1(&c);
}

static ct_status rms_args(ct_call *c, const ct_tensor *x, const int64_t *normalized_shape, int n, double eps) {
    if (!normalized_shape && n > 0)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "rms_norm", "normalized_shape is NULL");
    if (n < 1 || n > CT_MAX_DIMS)
        return ct_error(CT_ERROR_VALUE, "rms_norm", "normalized_shape must have between 1 and %d sizes, got %d",
                        CT_MAX_DIMS, n);
    c->ints[0] = n;
    memcpy(&c->ints[1], normalized_shape, sizeof(int64_t) * (size_t)n);
    c->nints = n + 1;
    /* eps=None: the machine epsilon of the input's dtype, as torch.rms_norm */
    if (eps < 0) {
        switch (x->dtype) {
        case CT_DTYPE_FLOAT64: eps = DBL_EPSILON; break;
        case CT_DTYPE_FLOAT16: eps = 0.0009765625; break;
        case CT_DTYPE_BFLOAT16: eps = 0.0078125; break;
        default: eps = FLT_EPSILON; break;
        }
    }
    c->s[0] = ct_scalar_float(eps);
    c->nscalars = 1;
    return CT_OK;
}

ct_tensor *ct_rms_norm(const ct_tensor *input, const int64_t *normalized_shape, int n, const ct_tensor *weight,
                       double eps) {
    CT_CHECK_ARG("rms_norm", input);
    /* cast before eps=None picks the dtype's epsilon: under autocast, float32's
     * (Note [Autocast of composites] in src/amp/autocast.c) */
    CT_AUTOCAST_COMPOSITE2(rms_norm, input, weight);
    ct_call c = {.op = CT_OP_rms_norm, .nin = 2, .in = {input, weight}, .dtype = CT_DTYPE_UNDEFINED};
    if (rms_args(&c, input, normalized_shape, n, eps))
        return NULL;
    return ct_dispatch_1(&c);
}

ct_status ct_rms_norm_backward(const ct_tensor *grad_output, const ct_tensor *input, const int64_t *normalized_shape,
                               int n, const ct_tensor *weight, double eps, ct_tensor **grad_input,
                               ct_tensor **grad_weight) {
    CT_CHECK_ARG_STATUS("rms_norm_backward", grad_output);
    CT_CHECK_ARG_STATUS("rms_norm_backward", input);
    if (grad_weight)
        *grad_weight = NULL;
    if (grad_input)
        *grad_input = NULL;
    if (!grad_input)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "rms_norm_backward", "grad_input is NULL");
    ct_call c = {.op = CT_OP_rms_norm_backward, .nin = 3, .in = {grad_output, input, weight},
                 .dtype = CT_DTYPE_UNDEFINED};
    ct_status st = rms_args(&c, input, normalized_shape, n, eps);
    if (st)
        return st;
    if ((st = ct_dispatch(&c)) == CT_OK) {
        *grad_input = ct_call_take_output(&c, 0);
        if (grad_weight && weight)
            *grad_weight = ct_call_take_output(&c, 1);
    }
    ct_call_clear_outputs(&c);
    return st;
}

/* normalized_shape and eps into a call (ints: k, normalized_shape[k]; s[0]: eps). */
static ct_status layer_args(const char *op, ct_call *c, const int64_t *normalized_shape, int n, double eps) {
    if (!normalized_shape && n > 0)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "normalized_shape is NULL");
    if (n < 1 || n > CT_MAX_DIMS)
        return ct_error(CT_ERROR_VALUE, op, "normalized_shape must have between 1 and %d sizes, got %d", CT_MAX_DIMS,
                        n);
    c->ints[0] = n;
    memcpy(&c->ints[1], normalized_shape, sizeof(int64_t) * (size_t)n);
    c->nints = n + 1;
    c->s[0] = ct_scalar_float(eps);
    c->nscalars = 1;
    return CT_OK;
}

ct_tensor *ct_layer_norm_fused(const ct_tensor *input, const int64_t *normalized_shape, int n,
                               const ct_tensor *weight, const ct_tensor *bias, double eps) {
    ct_call c = {.op = CT_OP_layer_norm, .nin = 3, .in = {input, weight, bias}, .dtype = CT_DTYPE_UNDEFINED};
    if (layer_args("layer_norm", &c, normalized_shape, n, eps))
        return NULL;
    return ct_dispatch_1(&c);
}

ct_status ct_layer_norm_backward(const ct_tensor *grad_output, const ct_tensor *input, const int64_t *normalized_shape,
                                 int n, const ct_tensor *weight, const ct_tensor *bias, double eps,
                                 ct_tensor **grad_input, ct_tensor **grad_weight, ct_tensor **grad_bias) {
    const char *op = "layer_norm_backward";
    CT_CHECK_ARG_STATUS(op, grad_output);
    CT_CHECK_ARG_STATUS(op, input);
    if (grad_weight)
        *grad_weight = NULL;
    if (grad_bias)
        *grad_bias = NULL;
    if (grad_input)
        *grad_input = NULL;
    if (!grad_input)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "grad_input is NULL");
    /* a gradient nobody asked for is not computed */
    const ct_tensor *w = grad_weight ? weight : NULL, *b = grad_bias ? bias : NULL;
    ct_call c = {.op = CT_OP_layer_norm_backward, .nin = 4, .in = {grad_output, input, weight, b},
                 .dtype = CT_DTYPE_UNDEFINED};
    ct_status st = layer_args(op, &c, normalized_shape, n, eps);
    if (st)
        return st;
    if ((st = ct_dispatch(&c)) == CT_OK) {
        *grad_input = ct_call_take_output(&c, 0);
        if (w)
            *grad_weight = ct_call_take_output(&c, 1);
        if (b)
            *grad_bias = ct_call_take_output(&c, 2);
    }
    ct_call_clear_outputs(&c);
    return st;
}

ct_tensor *ct_gelu_backward(const ct_tensor *grad_output, const ct_tensor *input, ct_gelu_approximate approximate) {
    CT_CHECK_ARG("gelu_backward", grad_output);
    CT_CHECK_ARG("gelu_backward", input);
    ct_call c = {.op = CT_OP_gelu_backward, .nin = 2, .in = {grad_output, input}, .nints = 1,
                 .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = approximate;
    return ct_dispatch_1(&c);
}

static double sdpa_scale(const ct_tensor *q, const double *scale) {
    int64_t e = q->ndim ? q->shape[q->ndim - 1] : 1;
    return scale ? *scale : 1.0 / sqrt((double)(e > 0 ? e : 1));
}

ct_tensor *ct_sdpa_fused(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v, const ct_tensor *attn_mask,
                         bool is_causal, double scale) {
    ct_call c = {.op = CT_OP_scaled_dot_product_attention, .nin = 4, .in = {q, k, v, attn_mask}, .nints = 1,
                 .nscalars = 1, .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = is_causal;
    c.s[0] = ct_scalar_float(scale);
    return ct_dispatch_1(&c);
}

ct_status ct_scaled_dot_product_attention_backward(const ct_tensor *grad_output, const ct_tensor *query,
                                                   const ct_tensor *key, const ct_tensor *value,
                                                   const ct_tensor *attn_mask, bool is_causal, const double *scale,
                                                   ct_tensor **grad_query, ct_tensor **grad_key,
                                                   ct_tensor **grad_value) {
    const char *op = "scaled_dot_product_attention_backward";
    CT_CHECK_ARG_STATUS(op, grad_output);
    CT_CHECK_ARG_STATUS(op, query);
    CT_CHECK_ARG_STATUS(op, key);
    CT_CHECK_ARG_STATUS(op, value);
    if (!grad_query || !grad_key || !grad_value)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "the gradient outputs must not be NULL");
    *grad_query = *grad_key = *grad_value = NULL;
    const ct_tensor *list[1] = {attn_mask};
    ct_call c = {.op = CT_OP_scaled_dot_product_attention_backward, .nin = 4, .in = {grad_output, query, key, value},
                 .nints = 1, .nscalars = 1, .dtype = CT_DTYPE_UNDEFINED, .list = list, .nlist = attn_mask ? 1 : 0};
    c.ints[0] = is_causal;
    c.s[0] = ct_scalar_float(sdpa_scale(query, scale));
    ct_status st = ct_dispatch(&c);
    if (st == CT_OK) {
        *grad_query = ct_call_take_output(&c, 0);
        *grad_key = ct_call_take_output(&c, 1);
        *grad_value = ct_call_take_output(&c, 2);
    }
    ct_call_clear_outputs(&c);
    return st;
}

ct_status ct_flash_attention_forward_dropout(const ct_tensor *query, const ct_tensor *key, const ct_tensor *value,
                                             bool is_causal, const double *scale, double dropout_p, ct_tensor **out,
                                             ct_tensor **logsumexp, ct_tensor **dropout_mask) {
    const char *op = "_flash_attention_forward";
    if (out)
        *out = NULL;
    if (logsumexp)
        *logsumexp = NULL;
    if (dropout_mask)
        *dropout_mask = NULL;
    CT_CHECK_ARG_STATUS(op, query);
    CT_CHECK_ARG_STATUS(op, key);
    CT_CHECK_ARG_STATUS(op, value);
    if (!out || !logsumexp || (dropout_p != 0 && !dropout_mask))
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "the outputs must not be NULL");
    ct_call c = {.op = CT_OP__flash_attention_forward, .nin = 3, .in = {query, key, value}, .nints = 1,
                 .nscalars = 2, .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = is_causal;
    c.s[0] = ct_scalar_float(sdpa_scale(query, scale));
    c.s[1] = ct_scalar_float(dropout_p);
    ct_status st = ct_dispatch(&c);
    if (st == CT_OK) {
        *out = ct_call_take_output(&c, 0);
        *logsumexp = ct_call_take_output(&c, 1);
        if (dropout_mask)
            *dropout_mask = ct_call_take_output(&c, 2);
    }
    ct_call_clear_outputs(&c);
    return st;
}

ct_status ct_flash_attention_forward(const ct_tensor *query, const ct_tensor *key, const ct_tensor *value,
                                     bool is_causal, const double *scale, ct_tensor **out, ct_tensor **logsumexp) {
    return ct_flash_attention_forward_dropout(query, key, value, is_causal, scale, 0.0, out, logsumexp, NULL);
}

ct_status ct_flash_attention_backward_dropout(const ct_tensor *grad_out, const ct_tensor *query, const ct_tensor *key,
                                              const ct_tensor *value, const ct_tensor *out,
                                              const ct_tensor *logsumexp, const ct_tensor *dropout_mask, bool is_causal,
                                              const double *scale, double dropout_p, ct_tensor **grad_query,
                                              ct_tensor **grad_key, ct_tensor **grad_value) {
    const char *op = "_flash_attention_backward";
    CT_CHECK_ARG_STATUS(op, grad_out);
    CT_CHECK_ARG_STATUS(op, query);
    CT_CHECK_ARG_STATUS(op, key);
    CT_CHECK_ARG_STATUS(op, value);
    CT_CHECK_ARG_STATUS(op, out);
    CT_CHECK_ARG_STATUS(op, logsumexp);
    if (dropout_p != 0)
        CT_CHECK_ARG_STATUS(op, dropout_mask);
    if (!grad_query || !grad_key || !grad_value)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "the gradient outputs must not be NULL");
    *grad_query = *grad_key = *grad_value = NULL;
    const ct_tensor *list[3] = {out, logsumexp, dropout_mask};
    ct_call c = {.op = CT_OP__flash_attention_backward, .nin = 4, .in = {grad_out, query, key, value}, .nints = 1,
                 .nscalars = 2, .dtype = CT_DTYPE_UNDEFINED, .list = list, .nlist = dropout_p != 0 ? 3 : 2};
    c.ints[0] = is_causal;
    c.s[0] = ct_scalar_float(sdpa_scale(query, scale));
    c.s[1] = ct_scalar_float(dropout_p);
    ct_status st = ct_dispatch(&c);
    if (st == CT_OK) {
        *grad_query = ct_call_take_output(&c, 0);
        *grad_key = ct_call_take_output(&c, 1);
        *grad_value = ct_call_take_output(&c, 2);
    }
    ct_call_clear_outputs(&c);
    return st;
}

ct_status ct_flash_attention_backward(const ct_tensor *grad_out, const ct_tensor *query, const ct_tensor *key,
                                      const ct_tensor *value, const ct_tensor *out, const ct_tensor *logsumexp,
                                      bool is_causal, const double *scale, ct_tensor **grad_query,
                                      ct_tensor **grad_key, ct_tensor **grad_value) {
    return ct_flash_attention_backward_dropout(grad_out, query, key, value, out, logsumexp, NULL, is_causal, scale,
                                               0.0, grad_query, grad_key, grad_value);
}

/* -1: not read yet (CT_FLASH_SDP decides), 0 off, 1 on. */
/* A torch.backends switch: on unless set off, or unless env says 0 or false at the
 * first read. */
static bool backend_switch(atomic_int *sw, const char *env) {
    int v = atomic_load(sw);
    if (v < 0) {
        const char *e = getenv(env);
        int want = e && (strcmp(e, "0") == 0 || strcmp(e, "false") == 0 || strcmp(e, "False") == 0) ? 0 : 1;
        atomic_compare_exchange_strong(sw, &v, want);
        v = atomic_load(sw);
    }
    return v != 0;
}

static atomic_int flash_sdp = -1, cudnn_on = -1;

void ct_backends_cuda_enable_flash_sdp(bool enabled) { atomic_store(&flash_sdp, enabled ? 1 : 0); }

bool ct_backends_cuda_flash_sdp_enabled(void) { return backend_switch(&flash_sdp, "CT_FLASH_SDP"); }

void ct_backends_cudnn_set_enabled(bool enabled) { atomic_store(&cudnn_on, enabled ? 1 : 0); }

bool ct_backends_cudnn_enabled(void) { return backend_switch(&cudnn_on, "CT_CUDNN"); }

bool ct_backends_cudnn_is_available(void) { return ct_backends_cudnn_version() > 0; }

/* Note [Flash attention routing]
 * scaled_dot_product_attention takes the flash op (src/cuda/flash_attn.cu) where its
 * CUDA kernels apply, as PyTorch's dispatcher picks its flash backend: query, key and
 * value on one CUDA device, float16 or bfloat16, 4-D (B, H, L, E) / (B, H, S, E) with one
 * head dim E <= 128 a multiple of 8, S >= 1, no attn_mask (is_causal is fine), and the
 * switch on. Everything else, float32 included, keeps the attention op and its math
 * kernel. The flash op's autograd node saves q, k, v, the output and the log-sum-exp:
 * O(B H L E) where the math path keeps the (B, H, L, S) probabilities. */
/* flash_as: the dtype the kernels would run in (the inputs', or autocast's for float32
 * inputs that autocast_for_flash casts). */
static bool flash_applies_as(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v, const ct_tensor *mask,
                             ct_dtype flash_as) {
    if (mask || q->device.type != CT_DEVICE_CUDA || k->device.type != CT_DEVICE_CUDA ||
        v->device.type != CT_DEVICE_CUDA || k->device.index != q->device.index || v->device.index != q->device.index)
        return false;
    if ((flash_as != CT_DTYPE_BFLOAT16 && flash_as != CT_DTYPE_FLOAT16) || k->dtype != q->dtype ||
        v->dtype != q->dtype)
        return false;
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return false;
    int64_t e = q->shape[3];
    for (int d = 0; d < 2; d++)
        if (k->shape[d] != q->shape[d] || v->shape[d] != q->shape[d])
            return false;
    /* Note [Deterministic algorithms]: flash's backward sums dq with atomics, so a
     * differentiable call takes the math path while the switch is on */
    if (ct_are_deterministic_algorithms_enabled() && ct_is_grad_enabled() &&
        (ct_tensor_requires_grad(q) || ct_tensor_requires_grad(k) || ct_tensor_requires_grad(v)))
        return false;
    return k->shape[2] == v->shape[2] && k->shape[2] >= 1 && k->shape[3] == e && v->shape[3] == e && e % 8 == 0 &&
           e >= 8 && e <= 128 && ct_backends_cuda_flash_sdp_enabled();
}

static bool flash_applies(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v, const ct_tensor *mask) {
    return flash_applies_as(q, k, v, mask, q->dtype);
}

ct_tensor *ct_embedding(const ct_tensor *input, const ct_tensor *weight, int64_t padding_idx) {
    CT_CHECK_ARG("embedding", input);
    CT_CHECK_ARG("embedding", weight);
    if (padding_idx != CT_NO_PADDING_IDX && weight->ndim == 2) {
        int64_t n = weight->shape[0];
        if (padding_idx >= n || padding_idx < -n) {
            ct_error(CT_ERROR_VALUE, "embedding", padding_idx >= n ? "Padding_idx must be within num_embeddings"
                                                                    : "Padding_idx must be within num_embeddings");
            return NULL;
        }
    }
    ct_call c = {.op = CT_OP_embedding, .nin = 2, .in = {weight, input}, .nints = 1, .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = padding_idx;
    return ct_dispatch_1(&c);
}

ct_tensor *ct_embedding_backward(const ct_tensor *grad_output, const ct_tensor *indices, int64_t num_weights,
                                 int64_t padding_idx) {
    CT_CHECK_ARG("embedding_backward", grad_output);
    CT_CHECK_ARG("embedding_backward", indices);
    ct_call c = {.op = CT_OP_embedding_backward, .nin = 2, .in = {grad_output, indices}, .nints = 2,
                 .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = num_weights;
    c.ints[1] = padding_idx;
    return ct_dispatch_1(&c);
}

static ct_status check_reduction(const char *op, int r, bool allow_batchmean) {
    if (r == CT_REDUCTION_NONE || r == CT_REDUCTION_MEAN || r == CT_REDUCTION_SUM ||
        (allow_batchmean && r == CT_REDUCTION_BATCHMEAN))
        return CT_OK;
    return ct_error(CT_ERROR_VALUE, op, "%d is not a valid value for reduction", r);
}


ct_tensor *ct_nll_loss(const ct_tensor *input, const ct_tensor *target, const ct_tensor *weight,
                       ct_reduction reduction, int64_t ignore_index) {
    CT_CHECK_ARG("nll_loss", input);
    CT_CHECK_ARG("nll_loss", target);
    if (check_reduction("nll_loss", reduction, false))
        return NULL;
    ct_call c = {.op = CT_OP_nll_loss, .nin = 3, .in = {input, target, weight}, .nints = 2,
                 .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = reduction;
    c.ints[1] = ignore_index;
    return ct_dispatch_1(&c);
}

ct_tensor *ct_nll_loss_backward(const ct_tensor *grad_output, const ct_tensor *input, const ct_tensor *target,
                                const ct_tensor *weight, ct_reduction reduction, int64_t ignore_index) {
    CT_CHECK_ARG("nll_loss_backward", grad_output);
    CT_CHECK_ARG("nll_loss_backward", input);
    CT_CHECK_ARG("nll_loss_backward", target);
    if (check_reduction("nll_loss_backward", reduction, false))
        return NULL;
    ct_call c = {.op = CT_OP_nll_loss_backward, .nin = 4, .in = {grad_output, input, target, weight}, .nints = 2,
                 .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = reduction;
    c.ints[1] = ignore_index;
    return ct_dispatch_1(&c);
}

ct_tensor *ct_cross_entropy_fused(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction,
                                  int64_t ignore_index, ct_tensor **lse) {
    if (lse)
        *lse = NULL;
    CT_CHECK_ARG("cross_entropy_fused", input);
    CT_CHECK_ARG("cross_entropy_fused", target);
    if (check_reduction("cross_entropy_fused", reduction, false))
        return NULL;
    ct_call c = {.op = CT_OP_cross_entropy_fused, .nin = 2, .in = {input, target}, .nints = 2,
                 .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = reduction;
    c.ints[1] = ignore_index;
    if (ct_dispatch(&c) != CT_OK)
        return NULL;
    ct_tensor *loss = ct_call_take_output(&c, 0);
    if (lse)
        *lse = ct_call_take_output(&c, 1);
    ct_call_clear_outputs(&c);
    return loss;
}

ct_tensor *ct_cross_entropy_fused_backward(const ct_tensor *grad_loss, const ct_tensor *input,
                                           const ct_tensor *target, const ct_tensor *lse, ct_reduction reduction,
                                           int64_t ignore_index) {
    CT_CHECK_ARG("cross_entropy_fused_backward", grad_loss);
    CT_CHECK_ARG("cross_entropy_fused_backward", input);
    CT_CHECK_ARG("cross_entropy_fused_backward", target);
    CT_CHECK_ARG("cross_entropy_fused_backward", lse);
    if (check_reduction("cross_entropy_fused_backward", reduction, false))
        return NULL;
    ct_call c = {.op = CT_OP_cross_entropy_fused_backward, .nin = 4, .in = {grad_loss, input, target, lse},
                 .nints = 2, .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = reduction;
    c.ints[1] = ignore_index;
    return ct_dispatch_1(&c);
}

ct_tensor *ct_cross_entropy_fused_backward_out(const ct_tensor *grad_loss, const ct_tensor *input,
                                               const ct_tensor *target, const ct_tensor *lse, ct_reduction reduction,
                                               int64_t ignore_index, ct_tensor *out) {
    const char *op = "cross_entropy_fused_backward_out";
    CT_CHECK_ARG(op, grad_loss);
    CT_CHECK_ARG(op, input);
    CT_CHECK_ARG(op, target);
    CT_CHECK_ARG(op, lse);
    CT_CHECK_ARG(op, out);
    if (check_reduction(op, reduction, false))
        return NULL;
    ct_call c = {.op = CT_OP_cross_entropy_fused_backward, .mode = CT_CALL_OUT, .nin = 4,
                 .in = {grad_loss, input, target, lse}, .nints = 2, .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = reduction;
    c.ints[1] = ignore_index;
    c.out[0] = ct_retain(out);
    c.nout = 1;
    return ct_dispatch_1(&c);
}

ct_tensor *ct_gelu_mlp(const ct_tensor *input, const ct_tensor *fc_weight, const ct_tensor *fc_bias,
                       const ct_tensor *proj_weight, const ct_tensor *proj_bias, ct_gelu_approximate approximate) {
    CT_CHECK_ARG("gelu_mlp", input);
    CT_CHECK_ARG("gelu_mlp", fc_weight);
    CT_CHECK_ARG("gelu_mlp", proj_weight);
    ct_call c = {.op = CT_OP_gelu_mlp, .nin = 5, .in = {input, fc_weight, fc_bias, proj_weight, proj_bias},
                 .nints = 1, .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = approximate;
    return ct_dispatch_1(&c);
}

/* Note [GELU MLP] (src/meta/nn_fused.c): below autograd, so the GELU's output is a
 * temporary that nothing keeps. */
ct_status ct_gelu_mlp_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_status st = ct_gelu_mlp_check(call);
    return st ? st : ct_gelu_mlp_ops(call);
}

ct_status ct_gelu_mlp_ops(ct_call *call) {
    ct_status st;
    ct_scope_begin();
    ct_tensor *hidden = ct_linear(call->in[0], call->in[1], call->in[2]);
    ct_tensor *h = hidden ? ct_gelu(hidden, (ct_gelu_approximate)call->ints[0]) : NULL;
    ct_tensor *y = h ? ct_linear(h, call->in[3], call->in[4]) : NULL;
    st = y ? ct_call_set_output(call, 0, y) : ct_last_status();
    if (st == CT_OK)
        st = ct_call_set_output(call, 1, hidden);
    ct_scope_end();
    return st;
}

ct_status ct_gelu_mlp_hidden_backward(const ct_tensor *grad_output, const ct_tensor *proj_weight,
                                      const ct_tensor *hidden, ct_gelu_approximate approximate,
                                      ct_tensor **grad_hidden, ct_tensor **grad_fc_bias) {
    const char *op = "gelu_mlp_hidden_backward";
    CT_CHECK_ARG_STATUS(op, grad_output);
    CT_CHECK_ARG_STATUS(op, proj_weight);
    CT_CHECK_ARG_STATUS(op, hidden);
    if (!grad_hidden)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "grad_hidden must not be NULL");
    ct_call c = {.op = CT_OP_gelu_mlp_hidden_backward, .nin = 3, .in = {grad_output, proj_weight, hidden},
                 .nints = 2, .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = approximate;
    c.ints[1] = grad_fc_bias != NULL;
    ct_status st = ct_dispatch(&c);
    if (st == CT_OK) {
        *grad_hidden = ct_call_take_output(&c, 0);
        if (grad_fc_bias)
            *grad_fc_bias = ct_call_take_output(&c, 1);
    }
    ct_call_clear_outputs(&c);
    return st;
}

/* Note [GELU MLP]: mm, gelu_backward, sum, on any device. */
ct_status ct_gelu_mlp_hidden_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_status st = ct_gelu_mlp_hidden_backward_check(call);
    return st ? st : ct_gelu_mlp_hidden_backward_ops(call);
}

ct_status ct_gelu_mlp_hidden_backward_ops(ct_call *call) {
    ct_status st;
    const int64_t zero = 0;
    ct_scope_begin();
    ct_tensor *d = ct_gelu_backward(ct_mm(call->in[0], call->in[1]), call->in[2], (ct_gelu_approximate)call->ints[0]);
    st = d ? ct_call_set_output(call, 0, d) : ct_last_status();
    if (st == CT_OK && call->ints[1]) {
        ct_tensor *db = ct_sum(d, &zero, 1, false, CT_DTYPE_UNDEFINED);
        st = db ? ct_call_set_output(call, 1, db) : ct_last_status();
    }
    ct_scope_end();
    return st;
}

ct_tensor *ct_one_hot(const ct_tensor *tensor, int64_t num_classes) {
    CT_CHECK_ARG("one_hot", tensor);
    ct_call c = {.op = CT_OP_one_hot, .nin = 1, .in = {tensor}, .nints = 1, .dtype = CT_DTYPE_UNDEFINED};
    c.ints[0] = num_classes;
    return ct_dispatch_1(&c);
}

/* conv_transpose2d is the input gradient of conv2d: the transposed op's input plays
 * conv2d's grad_output (a broadcast placeholder of the output's shape stands for
 * conv2d's input), on whatever device the input is. A composite kernel, registered at
 * the backends' keys: it runs below AUTOGRAD (the op's own derivative is recorded),
 * so the ops it calls are not recorded again. */
ct_status ct_conv_transpose2d_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    int64_t shape[4];
    int nd;
    ct_status st = ct_convt_check(call, shape, &nd);
    if (st)
        return st;
    const ct_tensor *x = call->in[0], *w = call->in[1], *b = call->in[2];
    ct_scope_begin();
    ct_tensor *placeholder = ct_expand(ct_zeros(NULL, 0, x->dtype, x->device), shape, nd);
    ct_tensor *gi = NULL;
    st = placeholder ? ct_conv2d_backward(x, placeholder, w, &call->ints[0], &call->ints[2], &call->ints[6],
                                          call->ints[8], &gi, NULL, NULL)
                     : ct_last_status();
    if (st == CT_OK && b) {
        int64_t bs[4] = {1, 1, 1, 1};
        bs[1] = b->shape[0]; /* (1, O, 1, 1), or (O, 1, 1) unbatched */
        gi = ct_add(gi, ct_view(b, bs + (4 - nd), nd));
    }
    if (st == CT_OK)
        st = gi ? ct_call_set_output(call, 0, gi) : ct_last_status();
    ct_scope_end();
    return st;
}


/* ------------------------------------------------------------------ entries for nn */

ct_tensor *ct_fused_layer_norm(const ct_tensor *input, const int64_t *normalized_shape, int n,
                               const ct_tensor *weight, const ct_tensor *bias, double eps) {
    CT_CHECK_ARG("layer_norm", input);
    return ct_layer_norm_fused(input, normalized_shape, n, weight, bias, eps);
}

/* attention is on autocast's lower-precision list: under a CUDA autocast region,
 * float32 inputs take the flash kernels in the region's dtype, cast here (the casts are
 * recorded by autograd) rather than by the attention op's autocast kernel. */
static bool autocast_casts(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v, const ct_tensor *mask) {
    return q->device.type == CT_DEVICE_CUDA && q->dtype == CT_DTYPE_FLOAT32 && !mask &&
           ct_autocast_is_enabled(CT_DEVICE_CUDA) && k->dtype == CT_DTYPE_FLOAT32 && v->dtype == CT_DTYPE_FLOAT32 &&
           flash_applies_as(q, k, v, mask, ct_autocast_get_dtype(CT_DEVICE_CUDA));
}

/* Replaces the inputs with autocast's casts when autocast_casts, in the caller's scope;
 * whether flash applies to what they are then. */
static bool autocast_for_flash(const ct_tensor **query, const ct_tensor **key, const ct_tensor **value,
                               const ct_tensor *attn_mask) {
    if (autocast_casts(*query, *key, *value, attn_mask)) {
        ct_dtype low = ct_autocast_get_dtype(CT_DEVICE_CUDA);
        const ct_tensor *q = ct_to_dtype(*query, low), *k = ct_to_dtype(*key, low), *v = ct_to_dtype(*value, low);
        if (!q || !k || !v)
            return false;
        *query = q, *key = k, *value = v;
    }
    return flash_applies(*query, *key, *value, attn_mask);
}

bool ct_backends_cuda_can_use_flash_attention(const ct_tensor *query, const ct_tensor *key, const ct_tensor *value,
                                              const ct_tensor *attn_mask) {
    if (!query || !key || !value)
        return false;
    return flash_applies(query, key, value, attn_mask) || autocast_casts(query, key, value, attn_mask);
}

ct_tensor *ct_fused_scaled_dot_product_attention_dropout(const ct_tensor *query, const ct_tensor *key,
                                                         const ct_tensor *value, const ct_tensor *attn_mask,
                                                         bool is_causal, const double *scale, double dropout_p) {
    const char *op = "scaled_dot_product_attention";
    CT_CHECK_ARG(op, query);
    CT_CHECK_ARG(op, key);
    CT_CHECK_ARG(op, value);
    if (!(dropout_p >= 0 && dropout_p <= 1)) {
        ct_error(CT_ERROR_VALUE, op, "dropout probability has to be between 0 and 1, but got %g", dropout_p);
        return NULL;
    }
    double sc = sdpa_scale(query, scale);
    ct_scope_begin();
    ct_tensor *out = NULL, *lse = NULL, *mask = NULL; /* the autograd node keeps its own references */
    if (autocast_for_flash(&query, &key, &value, attn_mask)) {
        if (ct_flash_attention_forward_dropout(query, key, value, is_causal, &sc, dropout_p, &out, &lse, &mask))
            out = NULL;
    } else if (dropout_p == 0) {
        out = ct_sdpa_fused(query, key, value, attn_mask, is_causal, sc);
    } else {
        ct_error(CT_ERROR_NOT_IMPLEMENTED, op,
                 "no fused kernel drops out for these inputs (flash attention takes float16 or bfloat16 on CUDA, "
                 "head dim <= 128 a multiple of 8, no attn_mask); ct_scaled_dot_product_attention takes the formula");
    }
    ct_keep(out);
    ct_scope_end();
    return out;
}

ct_tensor *ct_fused_scaled_dot_product_attention(const ct_tensor *query, const ct_tensor *key,
                                                 const ct_tensor *value, const ct_tensor *attn_mask, bool is_causal,
                                                 const double *scale) {
    return ct_fused_scaled_dot_product_attention_dropout(query, key, value, attn_mask, is_causal, scale, 0.0);
}

ct_status ct_scaled_dot_product_attention_check(const ct_tensor *query, const ct_tensor *key, const ct_tensor *value,
                                                const ct_tensor *attn_mask, bool is_causal) {
    const char *op = "scaled_dot_product_attention";
    CT_CHECK_ARG_STATUS(op, query);
    CT_CHECK_ARG_STATUS(op, key);
    CT_CHECK_ARG_STATUS(op, value);
    ct_sdpa_geom g;
    return ct_sdpa_check(op, query, key, value, attn_mask, is_causal, &g);
}
