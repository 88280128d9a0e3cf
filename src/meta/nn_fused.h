/* Shape rules of the fused nn kernels (ops.def, "nn kernels"), shared by the CPU and
 * META backends. Each *_check validates a call and fills its geometry. */
#ifndef CT_OPS_NN_FUSED_H
#define CT_OPS_NN_FUSED_H

#include "dispatch/call.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* avg_pool2d / avg_pool2d_backward (in[0] input; for the backward in[1] is the input).
 * ints: kernel[2], stride[2], padding[2], ceil_mode, count_include_pad, divisor. */
typedef struct ct_avgpool_geom {
    bool batched, ceil_mode, count_include_pad;
    int64_t n, c, h, w, oh, ow;
    int64_t kernel[2], stride[2], padding[2], divisor;
} ct_avgpool_geom;
ct_status ct_avgpool_check(const ct_tensor *x, const int64_t *ints, ct_avgpool_geom *g);

/* The input rows [h0, h1) and columns [w0, w1) that output (oy, ox) averages, and its
 * divisor. */
typedef struct ct_avgpool_window {
    int64_t h0, h1, w0, w1, divisor;
} ct_avgpool_window;

/* Fills win for output (oy, ox); false when the window lies in padding only (possible
 * with ceil_mode), where the output is 0 and no gradient flows. */
static inline bool ct_avgpool_window_of(const ct_avgpool_geom *g, int64_t oy, int64_t ox, ct_avgpool_window *win) {
    int64_t h0 = oy * g->stride[0] - g->padding[0], w0 = ox * g->stride[1] - g->padding[1];
    int64_t h1 = h0 + g->kernel[0], w1 = w0 + g->kernel[1];
    if (h1 > g->h + g->padding[0])
        h1 = g->h + g->padding[0];
    if (w1 > g->w + g->padding[1])
        w1 = g->w + g->padding[1];
    int64_t pool = (h1 - h0) * (w1 - w0);
    h0 = h0 < 0 ? 0 : h0;
    w0 = w0 < 0 ? 0 : w0;
    h1 = h1 > g->h ? g->h : h1;
    w1 = w1 > g->w ? g->w : w1;
    *win = (ct_avgpool_window){h0, h1, w0, w1, 0};
    if (h0 >= h1 || w0 >= w1)
        return false;
    win->divisor = g->divisor ? g->divisor : g->count_include_pad ? pool : (h1 - h0) * (w1 - w0);
    return true;
}

/* adaptive_avg_pool2d: ints output_size[2]. */
typedef struct ct_adapool_geom {
    bool batched;
    int64_t n, c, h, w, oh, ow;
} ct_adapool_geom;
ct_status ct_adapool_check(const ct_tensor *x, const int64_t *ints, ct_adapool_geom *g);
/* avg_pool2d_backward / adaptive_avg_pool2d_backward: in (grad_output, input), ints
 * as the forward: the forward's check, grad_output of the pooled shape, one device. */
ct_status ct_avgpool_backward_check(const ct_call *call, ct_avgpool_geom *g);
ct_status ct_adapool_backward_check(const ct_call *call, ct_adapool_geom *g);

/* rms_norm: in (x, weight or NULL); ints: k, normalized_shape[k]; s[0] eps. */
typedef struct ct_rmsnorm_geom {
    int64_t rows, cols;
    double eps;
} ct_rmsnorm_geom;
ct_status ct_rmsnorm_check(const ct_call *call, const ct_tensor *x, const ct_tensor *w, ct_rmsnorm_geom *g);
/* layer_norm: in (x, weight or NULL, bias or NULL), ints and s as rms_norm;
 * layer_norm_backward: in (grad_output, x, weight, bias): the outputs are grad_input,
 * grad_weight when weight is given, grad_bias when bias is given. */
ct_status ct_layernorm_check(const ct_call *call, const ct_tensor *x, const ct_tensor *w, const ct_tensor *b,
                             ct_rmsnorm_geom *g);
/* rms_norm_backward: in (grad_output, x, weight or NULL); layer_norm_backward: in
 * (grad_output, x, weight, bias): the forward's check, grad_output of x's shape, every
 * tensor on one device. */
ct_status ct_rmsnorm_backward_check(const ct_call *call, ct_rmsnorm_geom *g);
ct_status ct_layernorm_backward_check(const ct_call *call, ct_rmsnorm_geom *g);
/* gelu_backward: in (grad_output, input); ints: approximate. */
ct_status ct_gelu_backward_check(const ct_tensor *gy, const ct_tensor *x, int64_t approximate);

/* scaled_dot_product_attention: q (..., L, E), k (..., S, E), v (..., S, Ev) with the
 * same batch dims, mask broadcastable to (..., L, S) or NULL; ints: is_causal;
 * s[0]: scale. */
typedef struct ct_sdpa_geom {
    int nbatch;
    int64_t batch[CT_MAX_DIMS];
    int64_t b, l, s, e, ev;
} ct_sdpa_geom;
ct_status ct_sdpa_check(const char *op, const ct_tensor *q, const ct_tensor *k, const ct_tensor *v,
                        const ct_tensor *mask, bool is_causal, ct_sdpa_geom *g);
/* _flash_attention_forward: ct_sdpa_check without a mask, and q (B, H, L, E), k and v
 * (B, H, S, E) on one device. _flash_attention_backward: the same, grad_out and out of
 * q's shape and dtype, logsumexp (B, H, L) of ct_flash_lse_dtype, and with dropout the
 * forward's dropout_mask third in the list. */
ct_status ct_flash_check(const char *op, const ct_tensor *q, const ct_tensor *k, const ct_tensor *v,
                         ct_sdpa_geom *g);
ct_status ct_flash_backward_check(const ct_call *call, ct_sdpa_geom *g, double *dropout_p);
/* _flash_attention_forward's call: ct_flash_check of its inputs, and its dropout_p
 * (s[1]) in [0, 1], into *dropout_p. The backward's check hands it back the same way. */
ct_status ct_flash_forward_check(const ct_call *call, ct_sdpa_geom *g, double *dropout_p);
/* The dtype of flash attention's logsumexp: float64 for float64 inputs, else float32. */
ct_dtype ct_flash_lse_dtype(ct_dtype d);
/* An uninitialized output of flash attention of this (b, h, l, d) shape on device, in
 * like's dtype and in the layout of like (Note [Flash attention output layout]). */
ct_tensor *ct_flash_output_like(const ct_tensor *like, const int64_t *shape, ct_device device);
/* Sets output i of call to work (a result computed in a work dtype) in like's dtype
 * and layout. */
ct_status ct_flash_set_out(ct_call *call, int i, const ct_tensor *like, const ct_tensor *work);
/* The shape of flash attention's dropout_mask for q (B, H, L, E) and S keys: (B, H, L,
 * ceil(S / 64)) uint64 words, key j of row i at bit j % 64 of word j / 64. */
void ct_flash_mask_shape(const ct_tensor *q, int64_t lk, int64_t shape[4]);
/* What a flash kernel with dropout needs: the 16-bit keep threshold (Note [Flash
 * attention dropout draws] in src/core/random.h) and the factor 1 / (1 - p) for the
 * kept (0 when p = 1, where nothing is kept). */
typedef struct ct_flash_dropout_consts {
    uint32_t threshold;
    double scale;
} ct_flash_dropout_consts;
ct_flash_dropout_consts ct_flash_dropout_consts_of(double p);

/* nll_loss: in (input, target, weight or NULL); ints reduction, ignore_index. */
typedef struct ct_nll_geom {
    int64_t n, c, inner; /* input viewed as (n, c, inner) */
    bool has_batch;
} ct_nll_geom;
ct_status ct_nll_check(const ct_tensor *x, const ct_tensor *t, const ct_tensor *w, ct_nll_geom *g);

/* cross_entropy_fused: in (logits (n, c) floating, int64 target (n)); ints reduction,
 * ignore_index. The backward: in (grad_loss, logits, target, lse): the forward's check,
 * lse (n) in the work dtype, grad_loss of the loss's shape, one device. */
typedef struct ct_xent_geom {
    int64_t n, c;
} ct_xent_geom;
ct_status ct_xent_check(const char *op, const ct_tensor *x, const ct_tensor *t, ct_xent_geom *g);
ct_status ct_xent_backward_check(const ct_call *call, ct_xent_geom *g);
/* The loss's dtype of a cross_entropy_fused call (Note [cross_entropy's loss dtype]). */
ct_status ct_xent_loss_dtype(const ct_call *call, ct_dtype *dt);
/* Whether CT_CHECK_TARGETS asks a GPU to check cross_entropy's targets on the host (a
 * device sync per call; Note [Fused cross_entropy]). */
bool ct_xent_check_targets_env(void);

/* conv_transpose2d: in (input, weight, bias or NULL); ints stride[2], padding[2],
 * output_padding[2], dilation[2], groups. The output shape goes in shape/nd. */
ct_status ct_convt_check(const ct_call *call, int64_t *shape, int *nd);
/* conv_transpose2d's kernel for every device (src/api/nn_fused.c, a composite): conv2d's
 * input gradient, through ct_conv2d_backward on the input's device. */
ct_status ct_conv_transpose2d_kernel(ct_keyset ks, ct_call *call, void *ud);

/* gelu_mlp: in (input, fc_weight, fc_bias or NULL, proj_weight, proj_bias or NULL); ints:
 * approximate (Note [GELU MLP]). */
ct_status ct_gelu_mlp_check(const ct_call *call);
/* gelu_mlp's kernel for every device (src/api/nn_fused.c, a composite): the check,
 * then the ops (which a backend's kernel that checked already may call alone). */
ct_status ct_gelu_mlp_kernel(ct_keyset ks, ct_call *call, void *ud);
ct_status ct_gelu_mlp_ops(ct_call *call);
/* gelu_mlp_hidden_backward: in (grad_output, proj_weight, hidden); ints: approximate,
 * fc_bias; its composite kernel for every device (src/api/nn_fused.c). */
ct_status ct_gelu_mlp_hidden_backward_check(const ct_call *call);
ct_status ct_gelu_mlp_hidden_backward_kernel(ct_keyset ks, ct_call *call, void *ud);
ct_status ct_gelu_mlp_hidden_backward_ops(ct_call *call);
/* one_hot: in (int64 class indices t); ints: num_classes (-1: max + 1). */
ct_status ct_one_hot_check(const ct_tensor *t, int64_t num_classes);
/* one_hot's zero-filled result on t's device, once the smallest and largest class (mn,
 * mx; any values when t is empty) pass the checks; *nc gets the class count. */
ct_tensor *ct_one_hot_zeros(const ct_tensor *t, int64_t mn, int64_t mx, int64_t *nc);

ct_status ct_embedding_check(const ct_tensor *w, const ct_tensor *idx);
/* embedding_backward's arguments, for every backend: index and gradient dtypes,
 * num_weights, grad_output's shape against the indices'. */
ct_status ct_embedding_backward_check(const ct_tensor *gy, const ct_tensor *idx, int64_t num);

/* The fused attention op (no dropout; src/api/nn_fused.c); ct_scaled_dot_product_attention picks it. */
ct_tensor *ct_sdpa_fused(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v, const ct_tensor *attn_mask,
                         bool is_causal, double scale);
/* The fused layer_norm op (src/api/nn_fused.c; arguments already checked by ct_layer_norm). */
ct_tensor *ct_layer_norm_fused(const ct_tensor *input, const int64_t *normalized_shape, int n,
                               const ct_tensor *weight, const ct_tensor *bias, double eps);

/* Helpers the fused kernels of every backend share. The work dtype a kernel computes
 * in: float64 for float64, float32 for the other floating dtypes. */
ct_dtype ct_nn_work_dtype(ct_dtype d);
/* A "not implemented" error naming op and t's dtype unless t is floating (the _dtype
 * form: unless d is). */
ct_status ct_nn_need_float(const char *op, const ct_tensor *t);
ct_status ct_nn_need_float_dtype(const char *op, ct_dtype d);
/* The same for bool only (ops that the CPU also runs on integers). */
ct_status ct_nn_need_number(const char *op, const ct_tensor *t);
/* t converted to wd and contiguous; NULL stays NULL. */
ct_tensor *ct_nn_as_work(const ct_tensor *t, ct_dtype wd);
/* Hands a work-dtype result to the call as output i, converted back to dtype. */
ct_status ct_nn_set_out(ct_call *call, int i, ct_tensor *t, ct_dtype dtype);
/* A value error unless grad_output t has the given shape. */
ct_status ct_nn_same_shape(const char *op, const ct_tensor *t, const int64_t *shape, int nd);
/* A device error unless the non-NULL tensors of ts[0..n) share one device. */
ct_status ct_nn_same_device(const char *op, const ct_tensor *const *ts, int n);

CT_BACKEND_END

#endif
