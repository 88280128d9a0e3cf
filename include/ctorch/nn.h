/* ctorch nn: torch.nn.functional and torch.nn modules in C (docs/nn.md).
 *
 * Functions follow core.h's rules: results are new references owned by the innermost
 * scope, NULL (or a non-zero ct_status) with ct_last_error() set on bad input. Pair
 * arguments ({h, w}) may be NULL where a default is stated. */
#ifndef CTORCH_NN_H
#define CTORCH_NN_H

#include "core.h"
#include "io.h"
#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ functional */

/* Loss reductions, numbered as PyTorch's at::Reduction (BATCHMEAN: kl_div only). */
typedef enum ct_reduction {
    CT_REDUCTION_NONE = 0,
    CT_REDUCTION_MEAN = 1,
    CT_REDUCTION_SUM = 2,
    CT_REDUCTION_BATCHMEAN = 3,
} ct_reduction;

/* "No padding_idx" for ct_embedding (PyTorch's padding_idx=None). */
#define CT_NO_PADDING_IDX INT64_MIN
/* PyTorch's default ignore_index. */
#define CT_DEFAULT_IGNORE_INDEX (-100)

/* ------------------------------------------------------------ convolution */

/* F.conv1d on (N, C, L) or (C, L); weight (O, C / groups, k); bias (O) or NULL. */
CT_API ct_tensor *ct_conv1d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias, int64_t stride,
                            int64_t padding, int64_t dilation, int64_t groups);
/* conv1d/conv2d with padding="same" or "valid" (stride must be 1 for "same"; when the
 * total padding is odd the extra row/column goes at the end, as PyTorch). */
CT_API ct_tensor *ct_conv1d_padding(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias,
                                    int64_t stride, const char *padding, int64_t dilation, int64_t groups);
CT_API ct_tensor *ct_conv2d_padding(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias,
                                    const int64_t stride[2], const char *padding, const int64_t dilation[2],
                                    int64_t groups);
/* F.conv_transpose2d: weight (C_in, C_out / groups, kh, kw); arguments in PyTorch's
 * order. NULL pairs: stride 1, padding 0, output_padding 0, dilation 1. */
CT_API ct_tensor *ct_conv_transpose2d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias,
                                      const int64_t stride[2], const int64_t padding[2],
                                      const int64_t output_padding[2], int64_t groups, const int64_t dilation[2]);

/* ------------------------------------------------------------ pooling */

/* F.avg_pool2d; stride NULL means stride = kernel; divisor_override 0 means none. */
CT_API ct_tensor *ct_avg_pool2d(const ct_tensor *input, const int64_t kernel[2], const int64_t stride[2],
                                const int64_t padding[2], bool ceil_mode, bool count_include_pad,
                                int64_t divisor_override);
CT_API ct_tensor *ct_avg_pool2d_backward(const ct_tensor *grad_output, const ct_tensor *input,
                                         const int64_t kernel[2], const int64_t stride[2], const int64_t padding[2],
                                         bool ceil_mode, bool count_include_pad, int64_t divisor_override);
/* F.adaptive_avg_pool2d to output_size {oh, ow}. */
CT_API ct_tensor *ct_adaptive_avg_pool2d(const ct_tensor *input, const int64_t output_size[2]);
CT_API ct_tensor *ct_adaptive_avg_pool2d_backward(const ct_tensor *grad_output, const ct_tensor *input);

/* ------------------------------------------------------------ normalization */

/* F.batch_norm over dim 1 of (N, C, ...). running_mean/running_var may be NULL (then
 * training must be true). In training the batch statistics normalize and the running
 * ones are updated in place: r = (1 - momentum) * r + momentum * stat, with the
 * unbiased variance, as PyTorch. weight/bias may be NULL. */
CT_API ct_tensor *ct_batch_norm(const ct_tensor *input, ct_tensor *running_mean, ct_tensor *running_var,
                                const ct_tensor *weight, const ct_tensor *bias, bool training, double momentum,
                                double eps);
/* F.layer_norm over the last n dims (normalized_shape); weight/bias may be NULL. */
CT_API ct_tensor *ct_layer_norm(const ct_tensor *input, const int64_t *normalized_shape, int n,
                                const ct_tensor *weight, const ct_tensor *bias, double eps);
/* The layer_norm op itself, one fused kernel (forward and backward, CPU and CUDA):
 * weight and bias, when given, must have input's dtype. ct_layer_norm calls it and
 * falls back to a composite for mixed dtypes. */
CT_API ct_tensor *ct_fused_layer_norm(const ct_tensor *input, const int64_t *normalized_shape, int n,
                                      const ct_tensor *weight, const ct_tensor *bias, double eps);
/* Its fused backward (one pass over the rows, statistics recomputed from input):
 * grad_input, and grad_weight / grad_bias when those pointers and weight / bias are
 * given (each may be NULL when not wanted). */
CT_API ct_status ct_layer_norm_backward(const ct_tensor *grad_output, const ct_tensor *input,
                                        const int64_t *normalized_shape, int n, const ct_tensor *weight,
                                        const ct_tensor *bias, double eps, ct_tensor **grad_input,
                                        ct_tensor **grad_weight, ct_tensor **grad_bias);
/* F.group_norm of (N, C, ...) in num_groups groups; weight/bias (C) may be NULL. */
CT_API ct_tensor *ct_group_norm(const ct_tensor *input, int64_t num_groups, const ct_tensor *weight,
                                const ct_tensor *bias, double eps);
/* F.rms_norm (one fused kernel): x / sqrt(mean(x^2) + eps) * weight over the last n
 * dims; eps < 0 means PyTorch's eps=None (the dtype's machine epsilon). */
CT_API ct_tensor *ct_rms_norm(const ct_tensor *input, const int64_t *normalized_shape, int n,
                              const ct_tensor *weight, double eps);
/* Its fused backward: grad_input, and grad_weight when weight is given (grad_weight
 * may be NULL when not wanted). */
CT_API ct_status ct_rms_norm_backward(const ct_tensor *grad_output, const ct_tensor *input,
                                      const int64_t *normalized_shape, int n, const ct_tensor *weight, double eps,
                                      ct_tensor **grad_input, ct_tensor **grad_weight);

/* ------------------------------------------------------------ dropout, embedding */

/* F.dropout: in training, zeroes elements with probability p (Philox stream of the
 * default generator) and scales the rest by 1 / (1 - p); otherwise returns input. */
CT_API ct_tensor *ct_dropout(const ct_tensor *input, double p, bool training);
/* F.embedding(input, weight, padding_idx): rows of weight (V, D) picked by the int64 or
 * int32 indices in input; the row padding_idx gets no gradient. */
CT_API ct_tensor *ct_embedding(const ct_tensor *input, const ct_tensor *weight, int64_t padding_idx);
CT_API ct_tensor *ct_embedding_backward(const ct_tensor *grad_output, const ct_tensor *indices, int64_t num_weights,
                                        int64_t padding_idx);
/* The gradient of F.gelu(input, approximate) for grad_output, in one fused kernel
 * (PyTorch's aten::gelu_backward). */
CT_API ct_tensor *ct_gelu_backward(const ct_tensor *grad_output, const ct_tensor *input,
                                   ct_gelu_approximate approximate);
/* F.one_hot of an int64 tensor; num_classes -1 infers max + 1. Result int64. */
CT_API ct_tensor *ct_one_hot(const ct_tensor *tensor, int64_t num_classes);
/* Composite activations (src/ops/composite.c), as torch.nn.functional's:
 * logsigmoid = log(sigmoid(x)), softsign = x / (1 + |x|), tanhshrink = x - tanh(x),
 * hardshrink / softshrink with threshold lambd (0.5 in PyTorch), glu = a * sigmoid(b)
 * for the halves of dim, prelu with one weight or one per channel (dim 1). */
CT_API ct_tensor *ct_logsigmoid(const ct_tensor *x);
CT_API ct_tensor *ct_softsign(const ct_tensor *x);
CT_API ct_tensor *ct_tanhshrink(const ct_tensor *x);
CT_API ct_tensor *ct_hardshrink(const ct_tensor *x, double lambd);
CT_API ct_tensor *ct_softshrink(const ct_tensor *x, double lambd);
CT_API ct_tensor *ct_glu(const ct_tensor *x, int64_t dim);
CT_API ct_tensor *ct_prelu(const ct_tensor *x, const ct_tensor *weight);

/* ------------------------------------------------------------ attention */

/* F.scaled_dot_product_attention: softmax(q k^T * scale + mask) v over (..., L, E),
 * (..., S, E), (..., S, Ev). attn_mask: bool (true = take part) or float (added),
 * broadcastable to (..., L, S), or NULL. is_causal masks j > i (not with a mask).
 * scale NULL means 1 / sqrt(E). Without dropout it runs a kernel that works on blocks
 * of queries and never holds a whole (L, S) matrix per head; with dropout, flash
 * attention where it applies (dropout inside its kernels), else the formula
 * softmax, ct_dropout, matmul (the two lay their draws out differently, so their
 * masks differ, as PyTorch's flash and math paths do). */
CT_API ct_tensor *ct_scaled_dot_product_attention(const ct_tensor *query, const ct_tensor *key,
                                                  const ct_tensor *value, const ct_tensor *attn_mask,
                                                  double dropout_p, bool is_causal, const double *scale);
/* The scaled_dot_product_attention op itself (no dropout), the kernel above;
 * ct_scaled_dot_product_attention calls it when dropout_p is 0. */
CT_API ct_tensor *ct_fused_scaled_dot_product_attention(const ct_tensor *query, const ct_tensor *key,
                                                        const ct_tensor *value, const ct_tensor *attn_mask,
                                                        bool is_causal, const double *scale);
/* The same with dropout_p in [0, 1]: with dropout_p > 0 only where flash attention
 * applies (ct_backends_cuda_can_use_flash_attention), which drops the probabilities
 * inside its kernels (ct_flash_attention_forward_dropout); elsewhere
 * CT_ERROR_NOT_IMPLEMENTED. ct_scaled_dot_product_attention calls it when
 * flash applies and takes the unfused formula otherwise. */
CT_API ct_tensor *ct_fused_scaled_dot_product_attention_dropout(const ct_tensor *query, const ct_tensor *key,
                                                                const ct_tensor *value, const ct_tensor *attn_mask,
                                                                bool is_causal, const double *scale,
                                                                double dropout_p);
/* torch.backends.cuda.can_use_flash_attention: whether scaled_dot_product_attention
 * takes the flash kernels for these arguments (Note [Flash attention routing] in
 * src/api/nn_fused.c): CUDA, float16 or bfloat16 (or float32 inside a CUDA autocast
 * region of one of those), 4-D, head dim <= 128 a multiple of 8, no attn_mask, the
 * switch on, and not a differentiable call under deterministic algorithms. */
CT_API bool ct_backends_cuda_can_use_flash_attention(const ct_tensor *query, const ct_tensor *key,
                                                     const ct_tensor *value, const ct_tensor *attn_mask);
/* Its backward: the gradients of query, key and value. */
CT_API ct_status ct_scaled_dot_product_attention_backward(const ct_tensor *grad_output, const ct_tensor *query,
                                                          const ct_tensor *key, const ct_tensor *value,
                                                          const ct_tensor *attn_mask, bool is_causal,
                                                          const double *scale, ct_tensor **grad_query,
                                                          ct_tensor **grad_key, ct_tensor **grad_value);

/* Flash attention (PyTorch's _scaled_dot_product_flash_attention and its backward):
 * query (B, H, L, E), key and value (B, H, S, E), no mask, top-left causal masking
 * (key j <= query i) when is_causal; scale NULL means 1 / sqrt(E). *out gets the
 * attention (B, H, L, E), *logsumexp the log of each row's sum of exp(scores)
 * (B, H, L; float32, float64 for float64 inputs). On CUDA it runs tensor-core kernels
 * for float16 and bfloat16 with E <= 128 a multiple of 8 that never hold the (L, S)
 * scores; on the CPU a plain reference (docs/nn.md). */
CT_API ct_status ct_flash_attention_forward(const ct_tensor *query, const ct_tensor *key, const ct_tensor *value,
                                            bool is_causal, const double *scale, ct_tensor **out,
                                            ct_tensor **logsumexp);
/* Its backward, from the forward's out and logsumexp: the gradients of query, key and
 * value. Not differentiable itself (double backward is refused). */
CT_API ct_status ct_flash_attention_backward(const ct_tensor *grad_out, const ct_tensor *query,
                                             const ct_tensor *key, const ct_tensor *value, const ct_tensor *out,
                                             const ct_tensor *logsumexp, bool is_causal, const double *scale,
                                             ct_tensor **grad_query, ct_tensor **grad_key, ct_tensor **grad_value);
/* The same with dropout (PyTorch's dropout_p): each probability is dropped with
 * probability dropout_p in [0, 1] and the kept ones scaled by 1 / (1 - dropout_p),
 * inside the kernels. The mask is drawn from the default generator in a layout of the
 * kernels' own (Note [Flash attention dropout draws] in src/core/random.h; keep
 * probabilities are multiples of 2^-16), the same on the CPU and on CUDA from the same
 * generator state. *dropout_mask gets it as bits, which the backward reads: uint64
 * (B, H, L, ceil(S / 64)) on the inputs' device, key j of query i kept when bit j % 64
 * of word j / 64 is set (keys a causal row does not see are 0); B H L S / 8 bytes.
 * With dropout_p = 0 it is NULL and may be a NULL pointer. A CUDA graph captures both. */
CT_API ct_status ct_flash_attention_forward_dropout(const ct_tensor *query, const ct_tensor *key,
                                                    const ct_tensor *value, bool is_causal, const double *scale,
                                                    double dropout_p, ct_tensor **out, ct_tensor **logsumexp,
                                                    ct_tensor **dropout_mask);
CT_API ct_status ct_flash_attention_backward_dropout(const ct_tensor *grad_out, const ct_tensor *query,
                                                     const ct_tensor *key, const ct_tensor *value,
                                                     const ct_tensor *out, const ct_tensor *logsumexp,
                                                     const ct_tensor *dropout_mask, bool is_causal,
                                                     const double *scale, double dropout_p, ct_tensor **grad_query,
                                                     ct_tensor **grad_key, ct_tensor **grad_value);
/* torch.backends.cuda.enable_flash_sdp / flash_sdp_enabled: whether
 * ct_scaled_dot_product_attention may take flash attention for CUDA inputs (on by
 * default; CT_FLASH_SDP=0 in the environment turns it off at start-up). */
CT_API void ct_backends_cuda_enable_flash_sdp(bool enabled);
CT_API bool ct_backends_cuda_flash_sdp_enabled(void);

/* ------------------------------------------------------------ recurrent layers */

/* torch.lstm / torch.gru / torch.rnn_tanh / torch.rnn_relu (docs/nn.md, "Recurrent
 * layers"), built from ops (every device, autograd).
 *
 * input: (T, B, input_size), (B, T, input_size) when batch_first, or unbatched
 * (T, input_size). params: PyTorch's flat weight list, for each layer and then each
 * direction (forward, then reverse): weight_ih (G * hidden, in), weight_hh
 * (G * hidden, P), then bias_ih, bias_hh (G * hidden) when has_biases, then (LSTM
 * with projections) weight_hr (P, hidden); G is 4 for LSTM (gates i, f, g, o), 3 for
 * GRU (r, z, n), 1 for the plain RNN; P is the projection size, or hidden. in is
 * input_size for layer 0 and num_directions * P above. LSTM takes projections when
 * there are 5 (3 without biases) parameters per layer and direction.
 * h0: (num_layers * num_directions, B, P) ((L * D, P) unbatched), c0 the same with
 * hidden; NULL means zeros.
 * lengths: NULL, or an integer tensor (B) of sequence lengths in [1, T], sorted or not
 * (batched input only): PyTorch's pack_padded_sequence(enforce_sorted=False), the RNN
 * and pad_packed_sequence(total_length=T). Outputs past a sequence's length are 0 and
 * its final state is the one of its last valid step (the reverse direction starts at
 * the last valid step).
 * Dropout (the default generator) falls on the outputs of every layer but the last
 * when train. Results: *output (T, B, D * P) ((B, T, D * P) when batch_first,
 * (T, D * P) unbatched), *hn (L * D, B, P), *cn (L * D, B, hidden); each pointer may
 * be NULL when not wanted; on error all are set to NULL. */
CT_API ct_status ct_lstm(const ct_tensor *input, const ct_tensor *h0, const ct_tensor *c0, const ct_tensor *lengths,
                         ct_tensor *const *params, int nparams, bool has_biases, int num_layers, double dropout,
                         bool train, bool bidirectional, bool batch_first, ct_tensor **output, ct_tensor **hn,
                         ct_tensor **cn);
/* n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h. */
CT_API ct_status ct_gru(const ct_tensor *input, const ct_tensor *h0, const ct_tensor *lengths,
                        ct_tensor *const *params, int nparams, bool has_biases, int num_layers, double dropout,
                        bool train, bool bidirectional, bool batch_first, ct_tensor **output, ct_tensor **hn);
/* h' = tanh (or relu)(W_ih x + b_ih + W_hh h + b_hh). */
CT_API ct_status ct_rnn_tanh(const ct_tensor *input, const ct_tensor *h0, const ct_tensor *lengths,
                             ct_tensor *const *params, int nparams, bool has_biases, int num_layers, double dropout,
                             bool train, bool bidirectional, bool batch_first, ct_tensor **output, ct_tensor **hn);
CT_API ct_status ct_rnn_relu(const ct_tensor *input, const ct_tensor *h0, const ct_tensor *lengths,
                             ct_tensor *const *params, int nparams, bool has_biases, int num_layers, double dropout,
                             bool train, bool bidirectional, bool batch_first, ct_tensor **output, ct_tensor **hn);

/* cuDNN's recurrence (PyTorch's _cudnn_rnn and _cudnn_rnn_backward), CUDA only, when the
 * CUDA backend found libcudnn at run time (ct_backends_cudnn_version). ct_lstm and the
 * others take it by themselves for CUDA inputs where it applies (docs/nn.md, "Recurrent
 * layers"); these are the ops under them. mode: CT_CUDNN_RNN_*; input (T, B, I) or
 * (B, T, I) when batch_first; weight: the layers' parameters (ct_lstm's params, without
 * projections) flattened and concatenated into one vector; hx, cx (L * D, B, hidden),
 * cx NULL but for LSTM; lengths NULL or an int64 CPU tensor (B) of lengths in [1, T].
 * train asks for *reserve, which the backward reads; without it *reserve is NULL.
 * *output (T, B, D * hidden) (batch-major when batch_first), *hy (L * D, B, hidden),
 * *cy (LSTM; NULL otherwise). Not differentiable themselves. */
typedef enum ct_cudnn_rnn_mode { CT_CUDNN_RNN_RELU = 0, CT_CUDNN_RNN_TANH, CT_CUDNN_RNN_LSTM, CT_CUDNN_RNN_GRU } ct_cudnn_rnn_mode;
CT_API ct_status ct_cudnn_rnn(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *hx,
                              const ct_tensor *cx, const ct_tensor *lengths, ct_cudnn_rnn_mode mode,
                              int64_t hidden_size, int64_t num_layers, bool bidirectional, bool batch_first,
                              bool has_biases, bool train, ct_tensor **output, ct_tensor **hy, ct_tensor **cy,
                              ct_tensor **reserve);
/* The gradients of input, hx, cx (LSTM) and weight from the forward's output and
 * reserve and the gradients of output, hy and cy (LSTM). */
CT_API ct_status ct_cudnn_rnn_backward(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *hx,
                                       const ct_tensor *cx, const ct_tensor *lengths, const ct_tensor *output,
                                       const ct_tensor *grad_output, const ct_tensor *grad_hy,
                                       const ct_tensor *grad_cy, const ct_tensor *reserve, ct_cudnn_rnn_mode mode,
                                       int64_t hidden_size, int64_t num_layers, bool bidirectional,
                                       bool batch_first, bool has_biases, ct_tensor **grad_input,
                                       ct_tensor **grad_hx, ct_tensor **grad_cx, ct_tensor **grad_weight);
/* torch.backends.cudnn: the version of the libcudnn the CUDA backend loaded (e.g.
 * 91002 for 9.10.2), 0 when none was found or there is no CUDA backend;
 * is_available is version > 0. set_enabled(false) keeps the recurrent layers off
 * cuDNN (on by default; CT_CUDNN=0 in the environment turns it off at start-up). */
CT_API int64_t ct_backends_cudnn_version(void);
CT_API bool ct_backends_cudnn_is_available(void);
CT_API void ct_backends_cudnn_set_enabled(bool enabled);
CT_API bool ct_backends_cudnn_enabled(void);

/* ------------------------------------------------------------ losses */

/* F.cross_entropy. target: class indices (int64, shape (N) / (N, d1, ...) / ()) or
 * class probabilities (floating, same shape as input). weight (C) or NULL. */
CT_API ct_tensor *ct_cross_entropy(const ct_tensor *input, const ct_tensor *target, const ct_tensor *weight,
                                   ct_reduction reduction, int64_t ignore_index, double label_smoothing);
/* F.nll_loss (one fused kernel, and its backward). */
CT_API ct_tensor *ct_nll_loss(const ct_tensor *input, const ct_tensor *target, const ct_tensor *weight,
                              ct_reduction reduction, int64_t ignore_index);
CT_API ct_tensor *ct_nll_loss_backward(const ct_tensor *grad_output, const ct_tensor *input, const ct_tensor *target,
                                       const ct_tensor *weight, ct_reduction reduction, int64_t ignore_index);
/* cross_entropy of logits (N, C) and int64 class indices (N) as one op: the loss (of
 * the reduction's shape, in input's dtype) and, when lse is not NULL, each row's
 * logsumexp (N) in float32 (float64 for float64 logits), which the backward needs.
 * ct_cross_entropy takes this path for class-index targets without weights or label
 * smoothing (docs/nn.md). Targets out of range: see Note [Fused cross_entropy]. */
CT_API ct_tensor *ct_cross_entropy_fused(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction,
                                         int64_t ignore_index, ct_tensor **lse);
/* Its backward: grad_loss * (softmax(input) - onehot(target)) per row, 0 in ignored
 * rows, divided by the count of counted rows for the mean; in input's dtype. */
CT_API ct_tensor *ct_cross_entropy_fused_backward(const ct_tensor *grad_loss, const ct_tensor *input,
                                                  const ct_tensor *target, const ct_tensor *lse,
                                                  ct_reduction reduction, int64_t ignore_index);
/* The same into out (input's shape and dtype, contiguous); out may be input itself,
 * whose logits are then overwritten by their gradient. Returns out. */
CT_API ct_tensor *ct_cross_entropy_fused_backward_out(const ct_tensor *grad_loss, const ct_tensor *input,
                                                      const ct_tensor *target, const ct_tensor *lse,
                                                      ct_reduction reduction, int64_t ignore_index, ct_tensor *out);
/* proj(gelu(fc(input))) as one op: linear(gelu(linear(input, fc_weight, fc_bias),
 * approximate), proj_weight, proj_bias), biases optional. Its backward recomputes the
 * GELU's output instead of keeping it (docs/nn.md, "GELU MLP"), as llm.c does. */
CT_API ct_tensor *ct_gelu_mlp(const ct_tensor *input, const ct_tensor *fc_weight, const ct_tensor *fc_bias,
                              const ct_tensor *proj_weight, const ct_tensor *proj_bias,
                              ct_gelu_approximate approximate);
/* Its backward's middle, 2-d: grad_hidden = (grad_output @ proj_weight) * gelu'(hidden)
 * and, when grad_fc_bias is not NULL, its column sums (fc's bias gradient). */
CT_API ct_status ct_gelu_mlp_hidden_backward(const ct_tensor *grad_output, const ct_tensor *proj_weight,
                                             const ct_tensor *hidden, ct_gelu_approximate approximate,
                                             ct_tensor **grad_hidden, ct_tensor **grad_fc_bias);
CT_API ct_tensor *ct_mse_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction);
CT_API ct_tensor *ct_l1_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction);
CT_API ct_tensor *ct_smooth_l1_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction,
                                    double beta);
CT_API ct_tensor *ct_huber_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction,
                                double delta);
/* F.binary_cross_entropy on probabilities (log clamped at -100, as PyTorch). */
CT_API ct_tensor *ct_binary_cross_entropy(const ct_tensor *input, const ct_tensor *target, const ct_tensor *weight,
                                          ct_reduction reduction);
CT_API ct_tensor *ct_binary_cross_entropy_with_logits(const ct_tensor *input, const ct_tensor *target,
                                                      const ct_tensor *weight, const ct_tensor *pos_weight,
                                                      ct_reduction reduction);
/* F.kl_div(input = log q, target = p or log p when log_target). */
CT_API ct_tensor *ct_kl_div(const ct_tensor *input, const ct_tensor *target, ct_reduction reduction,
                            bool log_target);

/* ================================================================ nn.init */

/* In place on t, with the default generator; each returns a new reference to t.
 * fan_in/fan_out as torch.nn.init._calculate_fan_in_and_fan_out. */
typedef enum ct_fan_mode { CT_FAN_IN = 0, CT_FAN_OUT = 1 } ct_fan_mode;
typedef enum ct_nonlinearity {
    CT_NONLINEARITY_LINEAR = 0, /* also conv*, sigmoid: gain 1 */
    CT_NONLINEARITY_RELU,
    CT_NONLINEARITY_LEAKY_RELU,
    CT_NONLINEARITY_TANH,
    CT_NONLINEARITY_SELU,
} ct_nonlinearity;
CT_API double ct_init_calculate_gain(ct_nonlinearity nonlinearity, double param);
CT_API ct_status ct_init_fans(const ct_tensor *t, int64_t *fan_in, int64_t *fan_out);
CT_API ct_tensor *ct_init_uniform_(ct_tensor *t, double a, double b);
CT_API ct_tensor *ct_init_normal_(ct_tensor *t, double mean, double std);
CT_API ct_tensor *ct_init_constant_(ct_tensor *t, double value);
CT_API ct_tensor *ct_init_zeros_(ct_tensor *t);
CT_API ct_tensor *ct_init_ones_(ct_tensor *t);
CT_API ct_tensor *ct_init_xavier_uniform_(ct_tensor *t, double gain);
CT_API ct_tensor *ct_init_xavier_normal_(ct_tensor *t, double gain);
/* a: the negative slope of leaky_relu (sqrt(5) gives nn.Linear's default). */
CT_API ct_tensor *ct_init_kaiming_uniform_(ct_tensor *t, double a, ct_fan_mode mode, ct_nonlinearity nonlinearity);
CT_API ct_tensor *ct_init_kaiming_normal_(ct_tensor *t, double a, ct_fan_mode mode, ct_nonlinearity nonlinearity);
/* Normal(mean, std) redrawn inside [a, b] (inverse-CDF method, as PyTorch). */
CT_API ct_tensor *ct_init_trunc_normal_(ct_tensor *t, double mean, double std, double a, double b);

/* ================================================================ modules */

typedef struct ct_module ct_module;
/* A module's forward: one tensor in, one out (new reference owned by the scope). */
typedef ct_tensor *(*ct_module_forward_fn)(ct_module *m, const ct_tensor *input);
/* A forward of several tensors in and several out, PyTorch's forward(x, mask) ->
 * (output, hidden): it reads in[0..nin), writes its results to out[0..*nout) as new
 * references owned by the innermost scope (an input handed back as it is:
 * ct_tensor_ref(in[i])), and returns CT_OK; or it returns an error status with
 * ct_last_error set. out has room for cap tensors, never fewer than CT_MODULE_IO_CAP:
 * a forward with more results than cap returns an error instead of writing them. No
 * entry of in or out is NULL: an optional argument (mask=None) is left off the end,
 * nin tells which were given. */
typedef ct_status (*ct_module_forward_multi_fn)(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out,
                                                int cap, int *nout);
/* The room a multi forward and a hook always get for tensors (inputs and outputs);
 * Sequential passes at most this many tensors from one layer to the next. */
#define CT_MODULE_IO_CAP 16

/* Drops a reference to the module (docs/nn.md, "Shared modules"); the last one frees
 * it, its children and its references to parameters and buffers. NULL is a no-op. */
CT_API void ct_module_free(ct_module *m);
/* Another owner for m (it returns m): add one module under two names with
 * ct_module_retain(shared) before the second ct_module_add_child (nn.Module allows
 * shared submodules; named_modules lists each once). Not thread-safe. */
CT_API ct_module *ct_module_retain(ct_module *m);
/* forward(input): the one-in, one-out call, for either kind of module. A multi module
 * gets one input and this returns its first output (the others are dropped with the
 * scope). Forward pre-hooks and hooks run around it. */
CT_API ct_tensor *ct_module_forward(ct_module *m, const ct_tensor *input);
/* forward(*in): nin inputs (none may be NULL), at most cap outputs written to out (new
 * references owned by the innermost scope), their count in *nout. A one-tensor module
 * takes exactly one input and gives one output. Errors (*nout is then 0): a NULL
 * input (the first error of a chain is kept), a wrong number of inputs, more outputs
 * than cap, the forward's or a hook's own error. */
CT_API ct_status ct_module_forward_multi(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int cap,
                                         int *nout);
/* "Linear", "Sequential", ... */
CT_API const char *ct_module_type(const ct_module *m);
/* train(mode) for m and all its children; returns m. */
CT_API ct_module *ct_module_train(ct_module *m, bool training);
CT_API bool ct_module_is_training(const ct_module *m);

/* A module with no parameters of its own, for building custom ones: forward may be
 * NULL for a pure container. ctx is handed back by ct_module_ctx. */
CT_API ct_module *ct_module_new(const char *type, ct_module_forward_fn forward, void *ctx, void (*free_ctx)(void *));
/* The same with a forward of several tensors in and out. */
CT_API ct_module *ct_module_new_multi(const char *type, ct_module_forward_multi_fn forward, void *ctx,
                                      void (*free_ctx)(void *));
CT_API void *ct_module_ctx(const ct_module *m);
/* Registers a parameter (requires_grad is set on it) or a buffer under name; the
 * module takes its own reference (ct_retain). A NULL tensor registers "None"
 * (skipped by state_dict, as PyTorch). A dotted name ("encoder.layer.0.query.weight")
 * registers on the submodule it names, creating the missing ones as empty containers
 * of type "Module", so a Hugging Face state dict can be mirrored in a loop. Names may
 * not be empty or have an empty part ("a..b", ".x", "x."), nor be taken already (by a
 * parameter, buffer or child), nor pass through a parameter or buffer. */
CT_API ct_status ct_module_register_parameter(ct_module *m, const char *name, ct_tensor *t);
CT_API ct_status ct_module_register_buffer(ct_module *m, const char *name, ct_tensor *t);
/* Adds child under name (dotted names as above); m takes ownership of one reference
 * to child, also on error, except one: a child that is already a submodule and was not
 * ct_module_retain'ed is refused and left as it is (that reference was its parent's).
 * A module may not become its own descendant. */
CT_API ct_status ct_module_add_child(ct_module *m, const char *name, ct_module *child);
/* ModuleList.append / Sequential.append: adds child under the name "<number of
 * children>". */
CT_API ct_status ct_module_append(ct_module *m, ct_module *child);
/* Borrowed look-ups, also of dotted names ("blocks.0.qkv.weight"); NULL when absent. */
CT_API ct_tensor *ct_module_param(const ct_module *m, const char *name);
CT_API ct_tensor *ct_module_buffer(const ct_module *m, const char *name);
CT_API ct_module *ct_module_child(const ct_module *m, const char *name);
/* Replaces a parameter's tensor (weight tying: head.weight = wte.weight); name may be
 * dotted. */
CT_API ct_status ct_module_set_param(ct_module *m, const char *name, ct_tensor *t);

/* ------------------------------------------------------------ iteration */

/* m's direct children in the order they were added, as m._modules: shared modules
 * appear under each name. ct_module_child_at returns the i-th (borrowed) and its name
 * in *name when name is not NULL (borrowed from m); NULL with an error when i is out
 * of range. */
CT_API int ct_module_num_children(const ct_module *m);
CT_API ct_module *ct_module_child_at(const ct_module *m, int i, const char **name);

/* Visitors get borrowed names and objects, the name valid during the call. They
 * return 0 to go on; any other value stops the walk and is what the walk returns
 * (ct_error's status passes through; a visitor that stops without an error should
 * return a value no ct_status has, such as -1). A walk returns 0 when it visited
 * everything, or a ct_status of its own (a NULL module or function, no memory). */
typedef int (*ct_module_visit_fn)(const char *name, ct_module *m, void *ud);
typedef int (*ct_module_tensor_visit_fn)(const char *name, ct_tensor *t, void *ud);
typedef int (*ct_module_apply_fn)(ct_module *m, void *ud);
/* named_modules(): m itself (name ""), then its descendants in pre-order with dotted
 * names ("blocks.0.qkv"), each module once (under its first name). */
CT_API int ct_module_named_modules(ct_module *m, ct_module_visit_fn fn, void *ud);
/* named_parameters() / named_buffers(): recursive, in named_modules order, each
 * module's own in registration order; None entries skipped and each tensor once,
 * under its first name (tied weights count once). */
CT_API int ct_module_named_parameters(const ct_module *m, ct_module_tensor_visit_fn fn, void *ud);
CT_API int ct_module_named_buffers(const ct_module *m, ct_module_tensor_visit_fn fn, void *ud);
/* apply(fn): fn on every child's subtree, then on m (children first, as
 * nn.Module.apply; a child added twice under one parent is visited once). */
CT_API int ct_module_apply(ct_module *m, ct_module_apply_fn fn, void *ud);

/* All parameters, recursively, in registration order with dotted names ("0.weight"),
 * each shared tensor once (as parameters()). Returns the count; fills at most cap
 * entries of params/names (either may be NULL). Names are borrowed from m, valid until
 * m is freed or the next call of this function that asks for names. The visitor
 * ct_module_named_parameters needs no array. */
CT_API int64_t ct_module_parameters(const ct_module *m, ct_tensor **params, const char **names, int64_t cap);
CT_API int64_t ct_module_num_parameters(const ct_module *m); /* total elements */

/* ------------------------------------------------------------ printing */

/* extra_repr: writes the text between a module's parentheses ("in_features=4,
 * out_features=3, bias=True") into buf as snprintf does (NUL-terminated, at most cap
 * bytes) and returns its full length (called again with a larger buffer when it did
 * not fit), or a negative value with an error set. */
typedef int (*ct_module_extra_repr_fn)(const ct_module *m, char *buf, size_t cap);
/* Sets m's extra_repr (NULL: none). The ct_nn_* layers set PyTorch's. */
CT_API ct_status ct_module_set_extra_repr(ct_module *m, ct_module_extra_repr_fn fn);
/* repr(m) as PyTorch prints a module: "Type(extra_repr)" for a leaf, and children as
 * "(name): ..." lines indented by two spaces; a ModuleList prints runs of equal
 * children once ("(0-11): 12 x GPTBlock(...)"). A malloc'd string (free it with
 * free()), or NULL with an error. */
CT_API char *ct_module_to_string(const ct_module *m);

/* ------------------------------------------------------------ hooks */

/* register_forward_pre_hook: runs before forward with the inputs, which it may replace
 * (in[i] = a new tensor owned by the innermost scope) or add and remove (*nin, at most
 * cap). register_forward_hook: runs after forward with the inputs forward got and its
 * outputs, which it may replace the same way. Hooks run in registration order for
 * both kinds of forward; a non-zero status stops the call with that error. ud is the
 * caller's (it must outlive the hook). Each returns the hook's id (> 0, unique in the
 * process) for ct_module_remove_hook, or -1 with an error. */
typedef ct_status (*ct_module_forward_pre_hook_fn)(ct_module *m, const ct_tensor **in, int *nin, int cap, void *ud);
typedef ct_status (*ct_module_forward_hook_fn)(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out,
                                               int *nout, int cap, void *ud);
CT_API int64_t ct_module_register_forward_pre_hook(ct_module *m, ct_module_forward_pre_hook_fn fn, void *ud);
CT_API int64_t ct_module_register_forward_hook(ct_module *m, ct_module_forward_hook_fn fn, void *ud);
/* handle.remove(): an error when m has no hook of that id. A hook may remove itself
 * or others while it runs; the hooks of the call in progress all still run. */
CT_API ct_status ct_module_remove_hook(ct_module *m, int64_t id);

/* ------------------------------------------------------------ state dicts */

/* state_dict(): a dict of "name" -> tensor (parameters and buffers, dotted names,
 * detached references). Free with ct_value_free. */
CT_API ct_value *ct_module_state_dict(const ct_module *m);
/* load_state_dict: copies every matching entry into the module's tensors (no_grad).
 * strict: missing or unexpected keys are an error. Shape mismatches are always errors.
 * All problems are reported together in one message, as PyTorch's
 * "Error(s) in loading state_dict for Linear: Missing key(s) ...". Nothing is copied
 * when an error is reported. Counts (if not NULL) get the number of missing and
 * unexpected keys. A "__metadata__" entry holding a dict of strings (a safetensors
 * file's metadata, which ct_load returns) is not a key: it is ignored. */
CT_API ct_status ct_module_load_state_dict(ct_module *m, const ct_value *state_dict, bool strict,
                                           int64_t *n_missing, int64_t *n_unexpected);
/* The same, returning PyTorch's _IncompatibleKeys: *missing_keys and *unexpected_keys
 * (either may be NULL) get new lists of the names (free them with ct_value_free), also
 * when the load fails for them. */
CT_API ct_status ct_module_load_state_dict_keys(ct_module *m, const ct_value *state_dict, bool strict,
                                                ct_value **missing_keys, ct_value **unexpected_keys);

/* module.to(device, dtype): every parameter and buffer of the tree is replaced by its
 * copy on device, floating-point ones converted to dtype (CT_DTYPE_UNDEFINED keeps
 * each dtype; integer and bool buffers always keep theirs). A tensor already there in
 * that dtype is kept. Parameters stay leaves with their requires_grad, and a .grad
 * moves with its parameter. Tied tensors stay tied (one new tensor for both places).
 * On error (no memory, a device with no backend, a meta tensor that has no data to
 * copy out) the module is left unchanged. Pointers taken before (ct_module_param,
 * ct_module_parameters, an optimizer's parameters) still point at the old tensors,
 * which the module no longer holds: build the optimizer after moving the model. */
CT_API ct_status ct_module_to(ct_module *m, ct_device device, ct_dtype dtype);
/* module.half() / .bfloat16() / .float() / .double(): dtype only, each tensor stays on
 * its device. */
CT_API ct_status ct_module_half(ct_module *m);
CT_API ct_status ct_module_bfloat16(ct_module *m);
CT_API ct_status ct_module_float(ct_module *m);
CT_API ct_status ct_module_double(ct_module *m);
/* The device of the first tensor in state_dict order (parameters and buffers); CPU
 * for a module with none. */
CT_API ct_device ct_module_device(const ct_module *m);

/* ------------------------------------------------------------ layers */

/* The layers below initialise their parameters as PyTorch's (kaiming_uniform_ with
 * a = sqrt(5) for weights, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for biases, ones/zeros
 * for norms, N(0, 1) for embeddings) from the default generator, in dtype (must be
 * floating; CT_DTYPE_UNDEFINED means the default dtype), on the default device
 * (ct_set_default_device, CPU unless set). */
CT_API ct_module *ct_nn_linear(int64_t in_features, int64_t out_features, bool bias, ct_dtype dtype);
CT_API ct_module *ct_nn_conv2d(int64_t in_channels, int64_t out_channels, const int64_t kernel[2],
                               const int64_t stride[2], const int64_t padding[2], const int64_t dilation[2],
                               int64_t groups, bool bias, ct_dtype dtype);
CT_API ct_module *ct_nn_batch_norm2d(int64_t num_features, double eps, double momentum, bool affine,
                                     bool track_running_stats, ct_dtype dtype);
CT_API ct_module *ct_nn_layer_norm(const int64_t *normalized_shape, int n, double eps, bool elementwise_affine,
                                   ct_dtype dtype);
/* eps < 0: None (the dtype's machine epsilon). */
CT_API ct_module *ct_nn_rms_norm(const int64_t *normalized_shape, int n, double eps, bool elementwise_affine,
                                 ct_dtype dtype);
CT_API ct_module *ct_nn_embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx,
                                  ct_dtype dtype);
CT_API ct_module *ct_nn_dropout(double p);
CT_API ct_module *ct_nn_relu(void);
CT_API ct_module *ct_nn_tanh(void);
/* approximate: "none" or "tanh". */
CT_API ct_module *ct_nn_gelu(const char *approximate);
CT_API ct_module *ct_nn_flatten(int start_dim, int end_dim);
CT_API ct_module *ct_nn_max_pool2d(const int64_t kernel[2], const int64_t stride[2], const int64_t padding[2]);
/* Sequential of n modules (takes ownership of each, also on error); children are
 * named "0", "1", ... Each layer's outputs are the next layer's inputs (at most
 * CT_MODULE_IO_CAP of them), so multi modules chain: (x, mask) -> attention -> ... */
CT_API ct_module *ct_nn_sequential(ct_module *const *modules, int n);
/* ModuleList of n modules (children "0", "1", ...) and ModuleDict of n named modules
 * (names copied): containers with no forward. Both take ownership of each module, also
 * on error. */
CT_API ct_module *ct_nn_module_list(ct_module *const *modules, int n);
CT_API ct_module *ct_nn_module_dict(const char *const *names, ct_module *const *modules, int n);
/* The GPT block of nanoGPT: x + proj(attn(ln1(x))), then x + fc2(gelu_tanh(fc(ln2(x)))),
 * causal self-attention with n_head heads over (B, T, d_model). Children: ln1, ln2,
 * qkv, proj, fc, fc2. */
CT_API ct_module *ct_nn_gpt_block(int64_t d_model, int64_t n_head, ct_dtype dtype);

/* ------------------------------------------------------------ more layers
 * torch.nn's convolution, pooling, normalization, shape and activation modules beyond
 * the ones above, and the functions they run (docs/nn.md, "Layers"). Parameters are
 * named, shaped and initialised as PyTorch's; sizes of 1-D layers are one number. */

/* F.conv_transpose1d on (N, C, L) or (C, L); weight (C, O / groups, k). */
CT_API ct_tensor *ct_conv_transpose1d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias,
                                      int64_t stride, int64_t padding, int64_t output_padding, int64_t groups,
                                      int64_t dilation);
/* F.conv3d on (N, C, D, H, W) or (C, D, H, W); weight (O, C / groups, kd, kh, kw); NULL
 * triples: stride 1, padding 0, dilation 1. One conv2d per kernel depth (Note [conv3d
 * as conv2d]), so it runs wherever conv2d does, with conv2d's gradients. */
CT_API ct_tensor *ct_conv3d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias,
                            const int64_t stride[3], const int64_t padding[3], const int64_t dilation[3],
                            int64_t groups);
/* F.conv_transpose3d on (N, C, D, H, W) or (C, D, H, W); weight (C, O / groups, kd, kh,
 * kw); NULL triples: stride 1, padding 0, output_padding 0, dilation 1. One
 * conv_transpose2d per kernel depth (Note [conv_transpose3d as conv_transpose2d]). */
CT_API ct_tensor *ct_conv_transpose3d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias,
                                      const int64_t stride[3], const int64_t padding[3],
                                      const int64_t output_padding[3], int64_t groups, const int64_t dilation[3]);
/* F.max_pool1d / F.avg_pool1d / F.adaptive_avg_pool1d on (N, C, L) or (C, L); stride 0
 * means stride = kernel. */
CT_API ct_tensor *ct_max_pool1d(const ct_tensor *input, int64_t kernel_size, int64_t stride, int64_t padding,
                                int64_t dilation, bool ceil_mode);
CT_API ct_tensor *ct_avg_pool1d(const ct_tensor *input, int64_t kernel_size, int64_t stride, int64_t padding,
                                bool ceil_mode, bool count_include_pad);
CT_API ct_tensor *ct_adaptive_avg_pool1d(const ct_tensor *input, int64_t output_size);
/* F.max_pool3d (no return_indices): max_pool2d over the depth slices, then the
 * maximum over each depth window (Note [max_pool3d as max_pool2d]). NULL stride: the
 * kernel; NULL padding 0, dilation 1. */
CT_API ct_tensor *ct_max_pool3d(const ct_tensor *input, const int64_t kernel_size[3], const int64_t stride[3],
                                const int64_t padding[3], const int64_t dilation[3], bool ceil_mode);
/* F.max_unpool2d on (N, C, H, W) or (C, H, W) and max_pool2d's int64 indices (the same
 * shape): zeros of the output size with each value at its index of its plane. NULL
 * stride: the kernel; NULL padding 0; output_size NULL for (H - 1) * stride -
 * 2 * padding + kernel, or n_output_size values (2, or 4 of which the last two count)
 * within a stride of it, as PyTorch. Differentiable in input. */
CT_API ct_tensor *ct_max_unpool2d(const ct_tensor *input, const ct_tensor *indices, const int64_t kernel_size[2],
                                  const int64_t stride[2], const int64_t padding[2], const int64_t *output_size,
                                  int n_output_size);
/* F.avg_pool3d on (N, C, D, H, W) or (C, D, H, W): avg_pool2d over (H, W), then over
 * the depth windows (Note [avg_pool3d as avg_pool2d]). NULL stride: the kernel; NULL
 * padding 0; divisor_override 0: none. */
CT_API ct_tensor *ct_avg_pool3d(const ct_tensor *input, const int64_t kernel_size[3], const int64_t stride[3],
                                const int64_t padding[3], bool ceil_mode, bool count_include_pad,
                                int64_t divisor_override);
/* F.adaptive_max_pool1d / 2d (no return_indices; -1 in output_size is None): one amax
 * per bin of each dim (Note [Adaptive max pooling by dims]). */
CT_API ct_tensor *ct_adaptive_max_pool1d(const ct_tensor *input, int64_t output_size);
CT_API ct_tensor *ct_adaptive_max_pool2d(const ct_tensor *input, const int64_t output_size[2]);
/* F.pixel_shuffle: (*, C r^2, H, W) -> (*, C, H r, W r); F.pixel_unshuffle the inverse. */
CT_API ct_tensor *ct_pixel_shuffle(const ct_tensor *input, int64_t upscale_factor);
CT_API ct_tensor *ct_pixel_unshuffle(const ct_tensor *input, int64_t downscale_factor);
/* F.instance_norm over (N, C, ...): each (sample, channel) normalized by its own
 * statistics when use_input_stats, else by the running ones. Given running statistics
 * are updated as batch_norm's, averaged over the samples. Any of the four vectors
 * (C) may be NULL. */
CT_API ct_tensor *ct_instance_norm(const ct_tensor *input, ct_tensor *running_mean, ct_tensor *running_var,
                                   const ct_tensor *weight, const ct_tensor *bias, bool use_input_stats,
                                   double momentum, double eps);

/* F.interpolate for (N, C, W), (N, C, H, W) and (N, C, D, H, W) input: size or
 * scale_factor (exactly one, the other NULL) holds n values, 1 for every spatial dim or
 * one per dim; the output size from a scale factor is floor(size * scale_factor), and
 * the factor sets the sampling ratio as in PyTorch (recompute_scale_factor=None). mode
 * "nearest" (NULL), "nearest-exact", "linear" (3-D), "bilinear" or "bicubic" (4-D),
 * "trilinear" (5-D); align_corners only with the interpolating ones. Runs the op
 * ct_upsample (ops.h); 5-D input as a 2-D then a 1-D pass (Note [5-D interpolate by
 * dims]). */
CT_API ct_tensor *ct_interpolate(const ct_tensor *input, const int64_t *size, const double *scale_factor, int n,
                                 const char *mode, bool align_corners);
/* nn.Upsample(size, scale_factor, mode, align_corners): ct_interpolate's arguments. */
CT_API ct_module *ct_nn_upsample(const int64_t *size, const double *scale_factor, int n, const char *mode,
                                 bool align_corners);
/* nn.UpsamplingNearest2d (mode nearest) and nn.UpsamplingBilinear2d (bilinear,
 * align_corners=True). */
CT_API ct_module *ct_nn_upsampling_nearest2d(const int64_t *size, const double *scale_factor, int n);
CT_API ct_module *ct_nn_upsampling_bilinear2d(const int64_t *size, const double *scale_factor, int n);

/* F.embedding_bag: the rows of weight (V, D) picked by input (int64 or int32) and
 * reduced per bag with mode "sum", "mean" (NULL) or "max". input 2-D (B, N): each row
 * is a bag, offsets NULL; input 1-D: offsets (1-D) start the bags, the last running to
 * the end of input, or to offsets[-1] when include_last_offset. per_sample_weights
 * (input's shape, "sum" only) scales each row. Entries equal to padding_idx
 * (CT_NO_PADDING_IDX: none) are left out, also from mean's count; an empty bag is
 * zeros. The result is (B, D). Made of ops (the bags are read on the host). */
CT_API ct_tensor *ct_embedding_bag(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *offsets,
                                   const char *mode, const ct_tensor *per_sample_weights, bool include_last_offset,
                                   int64_t padding_idx);
/* nn.EmbeddingBag (max_norm, scale_grad_by_freq and sparse are not offered): weight
 * N(0, 1), its padding_idx row zeroed. ct_module_forward_multi takes input, offsets and
 * per_sample_weights (the last ones may be left off); ct_nn_embedding_bag_forward takes
 * the three with NULL for none. */
CT_API ct_module *ct_nn_embedding_bag(int64_t num_embeddings, int64_t embedding_dim, const char *mode,
                                      bool include_last_offset, int64_t padding_idx, ct_dtype dtype);
CT_API ct_tensor *ct_nn_embedding_bag_forward(ct_module *m, const ct_tensor *input, const ct_tensor *offsets,
                                              const ct_tensor *per_sample_weights);

/* nn.Conv1d: padding_mode "zeros" (NULL), "reflect", "replicate" or "circular". */
CT_API ct_module *ct_nn_conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
                               int64_t padding, int64_t dilation, int64_t groups, bool bias, const char *padding_mode,
                               ct_dtype dtype);
/* nn.Conv3d on (N, C, D, H, W) or (C, D, H, W): kernel_size {d, h, w}; NULL triples:
 * stride 1, padding 0, dilation 1; padding_mode as Conv1d's. */
CT_API ct_module *ct_nn_conv3d(int64_t in_channels, int64_t out_channels, const int64_t kernel_size[3],
                               const int64_t stride[3], const int64_t padding[3], const int64_t dilation[3],
                               int64_t groups, bool bias, const char *padding_mode, ct_dtype dtype);
/* nn.ConvTranspose1d / nn.ConvTranspose2d, arguments in PyTorch's order; NULL pairs:
 * stride 1, padding 0, output_padding 0, dilation 1. */
CT_API ct_module *ct_nn_conv_transpose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                         int64_t stride, int64_t padding, int64_t output_padding, int64_t groups,
                                         bool bias, int64_t dilation, ct_dtype dtype);
CT_API ct_module *ct_nn_conv_transpose2d(int64_t in_channels, int64_t out_channels, const int64_t kernel_size[2],
                                         const int64_t stride[2], const int64_t padding[2],
                                         const int64_t output_padding[2], int64_t groups, bool bias,
                                         const int64_t dilation[2], ct_dtype dtype);
/* nn.ConvTranspose3d: weight (in, out / groups, kd, kh, kw); NULL triples for the
 * defaults (stride 1, padding 0, output_padding 0, dilation 1). */
CT_API ct_module *ct_nn_conv_transpose3d(int64_t in_channels, int64_t out_channels, const int64_t kernel_size[3],
                                         const int64_t stride[3], const int64_t padding[3],
                                         const int64_t output_padding[3], int64_t groups, bool bias,
                                         const int64_t dilation[3], ct_dtype dtype);
/* nn.BatchNorm1d ((N, C) or (N, C, L)) and nn.BatchNorm3d ((N, C, D, H, W)), as
 * ct_nn_batch_norm2d. For these, BatchNorm2d and InstanceNorm, momentum < 0 is
 * PyTorch's momentum=None: the cumulative average (factor 1 / num_batches_tracked)
 * for BatchNorm, 0 for InstanceNorm. */
CT_API ct_module *ct_nn_batch_norm1d(int64_t num_features, double eps, double momentum, bool affine,
                                     bool track_running_stats, ct_dtype dtype);
CT_API ct_module *ct_nn_batch_norm3d(int64_t num_features, double eps, double momentum, bool affine,
                                     bool track_running_stats, ct_dtype dtype);
/* nn.InstanceNorm1d ((N, C, L) or (C, L)) and nn.InstanceNorm2d ((N, C, H, W) or
 * (C, H, W)); PyTorch's defaults are eps 1e-5, momentum 0.1, affine and
 * track_running_stats false. */
CT_API ct_module *ct_nn_instance_norm1d(int64_t num_features, double eps, double momentum, bool affine,
                                        bool track_running_stats, ct_dtype dtype);
CT_API ct_module *ct_nn_instance_norm2d(int64_t num_features, double eps, double momentum, bool affine,
                                        bool track_running_stats, ct_dtype dtype);
/* nn.GroupNorm: weight and bias (num_channels) when affine. */
CT_API ct_module *ct_nn_group_norm(int64_t num_groups, int64_t num_channels, double eps, bool affine, ct_dtype dtype);
/* nn.MaxPool1d, nn.MaxPool2d with dilation and ceil_mode, nn.AvgPool1d, nn.AvgPool2d
 * (divisor_override 0: none): stride 0 (or NULL) means the kernel size. */
CT_API ct_module *ct_nn_max_pool1d(int64_t kernel_size, int64_t stride, int64_t padding, int64_t dilation,
                                   bool ceil_mode);
CT_API ct_module *ct_nn_max_pool2d_ex(const int64_t kernel_size[2], const int64_t stride[2], const int64_t padding[2],
                                      const int64_t dilation[2], bool ceil_mode);
/* nn.MaxPool3d on (N, C, D, H, W) or (C, D, H, W): {d, h, w} sizes; NULL stride: the
 * kernel; NULL padding 0, dilation 1. */
CT_API ct_module *ct_nn_max_pool3d(const int64_t kernel_size[3], const int64_t stride[3], const int64_t padding[3],
                                   const int64_t dilation[3], bool ceil_mode);
/* nn.MaxPool2d(..., return_indices=True): ct_module_forward_multi gives (values,
 * indices) (ct_module_forward the values alone); it prints as MaxPool2d, as PyTorch's.
 * nn.MaxUnpool2d(kernel_size, stride, padding): ct_module_forward_multi takes (input,
 * indices), ct_nn_max_unpool2d_forward also an output_size (NULL: the default). */
CT_API ct_module *ct_nn_max_pool2d_with_indices(const int64_t kernel_size[2], const int64_t stride[2],
                                                const int64_t padding[2], const int64_t dilation[2], bool ceil_mode);
CT_API ct_module *ct_nn_max_unpool2d(const int64_t kernel_size[2], const int64_t stride[2], const int64_t padding[2]);
CT_API ct_tensor *ct_nn_max_unpool2d_forward(ct_module *m, const ct_tensor *input, const ct_tensor *indices,
                                             const int64_t *output_size, int n_output_size);
/* nn.AvgPool3d: ct_avg_pool3d's arguments. */
CT_API ct_module *ct_nn_avg_pool3d(const int64_t kernel_size[3], const int64_t stride[3], const int64_t padding[3],
                                   bool ceil_mode, bool count_include_pad, int64_t divisor_override);
CT_API ct_module *ct_nn_avg_pool1d(int64_t kernel_size, int64_t stride, int64_t padding, bool ceil_mode,
                                   bool count_include_pad);
CT_API ct_module *ct_nn_avg_pool2d(const int64_t kernel_size[2], const int64_t stride[2], const int64_t padding[2],
                                   bool ceil_mode, bool count_include_pad, int64_t divisor_override);
/* nn.AdaptiveAvgPool1d / 2d; in output_size -1 is PyTorch's None (the input's size). */
CT_API ct_module *ct_nn_adaptive_avg_pool1d(int64_t output_size);
CT_API ct_module *ct_nn_adaptive_avg_pool2d(const int64_t output_size[2]);
/* nn.AdaptiveMaxPool1d / 2d (no return_indices); -1 is None. */
CT_API ct_module *ct_nn_adaptive_max_pool1d(int64_t output_size);
CT_API ct_module *ct_nn_adaptive_max_pool2d(const int64_t output_size[2]);
CT_API ct_module *ct_nn_pixel_shuffle(int64_t upscale_factor);
CT_API ct_module *ct_nn_pixel_unshuffle(int64_t downscale_factor);
/* nn.Identity: its inputs, unchanged (new references). */
CT_API ct_module *ct_nn_identity(void);
/* nn.Unflatten(dim, unflattened_size): n sizes (one may be -1). */
CT_API ct_module *ct_nn_unflatten(int dim, const int64_t *unflattened_size, int n);
/* The activation modules without arguments, by PyTorch's class name: "ReLU", "Tanh",
 * "Sigmoid", "SiLU", "Mish", "SELU", "ReLU6", "Hardswish", "Hardsigmoid", "LogSigmoid",
 * "Softsign", "Tanhshrink". */
CT_API ct_module *ct_nn_activation(const char *name);
/* The ones with arguments (PyTorch's defaults: negative_slope 0.01, alpha 1, beta 1
 * and threshold 20, min_val -1 and max_val 1, lambd 0.5, GLU's dim -1). Softmax and
 * LogSoftmax need their dim (PyTorch's dim=None picks one by a legacy rule). */
CT_API ct_module *ct_nn_leaky_relu(double negative_slope);
CT_API ct_module *ct_nn_elu(double alpha);
CT_API ct_module *ct_nn_celu(double alpha);
CT_API ct_module *ct_nn_softplus(double beta, double threshold);
CT_API ct_module *ct_nn_hardtanh(double min_val, double max_val);
CT_API ct_module *ct_nn_hardshrink(double lambd);
CT_API ct_module *ct_nn_softshrink(double lambd);
CT_API ct_module *ct_nn_softmax(int64_t dim);
CT_API ct_module *ct_nn_log_softmax(int64_t dim);
CT_API ct_module *ct_nn_glu(int64_t dim);
/* nn.PReLU: weight (num_parameters) filled with init (PyTorch: 1 and 0.25). */
CT_API ct_module *ct_nn_prelu(int64_t num_parameters, double init, ct_dtype dtype);

/* ------------------------------------------------------------ distances
 * torch.nn.functional.normalize, cosine_similarity and pairwise_distance, made of ops
 * (autograd and devices come with them). */

/* x / max(||x||_p along dim, eps) (F.normalize; PyTorch's defaults are p = 2, dim = 1,
 * eps = 1e-12). */
CT_API ct_tensor *ct_normalize(const ct_tensor *x, double p, int64_t dim, double eps);
/* sum over dim of (x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps)), x1 and x2
 * broadcast together first, dim counted in the broadcast shape (defaults dim = 1,
 * eps = 1e-8). Integer inputs are converted to their floating common dtype. */
CT_API ct_tensor *ct_cosine_similarity(const ct_tensor *x1, const ct_tensor *x2, int64_t dim, double eps);
/* ||x1 - x2 + eps||_p over the last dimension (defaults p = 2, eps = 1e-6, keepdim
 * false); inputs broadcast. */
CT_API ct_tensor *ct_pairwise_distance(const ct_tensor *x1, const ct_tensor *x2, double p, double eps, bool keepdim);

/* nn.RNN, nn.LSTM and nn.GRU: parameters named as PyTorch's (weight_ih_l0,
 * weight_hh_l0, bias_ih_l0, bias_hh_l0, ..._reverse, LSTM's weight_hr_l0), so state
 * dicts load from PyTorch; all initialised U(-1/sqrt(hidden), 1/sqrt(hidden)).
 * nonlinearity: "tanh" (NULL) or "relu". proj_size 0: no projections. ct_module_forward
 * returns the output sequence with zero initial states; the functions below take the
 * initial states and lengths (NULL: zeros, full length) and give the final states
 * too (each result pointer may be NULL). Dropout follows the module's training flag. */
CT_API ct_module *ct_nn_rnn(int64_t input_size, int64_t hidden_size, int64_t num_layers, const char *nonlinearity,
                            bool bias, bool batch_first, double dropout, bool bidirectional, ct_dtype dtype);
CT_API ct_module *ct_nn_lstm(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias,
                             bool batch_first, double dropout, bool bidirectional, int64_t proj_size, ct_dtype dtype);
CT_API ct_module *ct_nn_gru(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first,
                            double dropout, bool bidirectional, ct_dtype dtype);
CT_API ct_status ct_nn_rnn_forward(ct_module *m, const ct_tensor *input, const ct_tensor *h0,
                                   const ct_tensor *lengths, ct_tensor **output, ct_tensor **hn);
CT_API ct_status ct_nn_lstm_forward(ct_module *m, const ct_tensor *input, const ct_tensor *h0, const ct_tensor *c0,
                                    const ct_tensor *lengths, ct_tensor **output, ct_tensor **hn, ct_tensor **cn);
CT_API ct_status ct_nn_gru_forward(ct_module *m, const ct_tensor *input, const ct_tensor *h0,
                                   const ct_tensor *lengths, ct_tensor **output, ct_tensor **hn);

/* ------------------------------------------------------------ attention and Transformer layers
 * nn.MultiheadAttention, nn.TransformerEncoderLayer / DecoderLayer, nn.TransformerEncoder /
 * Decoder and nn.Transformer (docs/nn.md, "Transformer layers"), made of ops (every
 * device, autograd), with PyTorch's parameter names so that state dicts load from
 * PyTorch (self_attn.in_proj_weight, linear1.weight, norm1.bias, ...).
 *
 * Masks, as PyTorch's: an attn_mask is bool (true = NOT allowed to attend) or floating
 * (added to the scores), (L, S) or (N * num_heads, L, S); a key_padding_mask is bool
 * (true = ignore that key) or floating, (N, S) ((S) unbatched). NULL means None.
 * Sequences are (L, N, E), or (N, L, E) when batch_first, or unbatched (L, E).
 * Every forward also runs through ct_module_forward_multi, with its tensors in
 * PyTorch's order: optional ones may be left off the end, and a tensor with no elements
 * in between stands for None; flags take PyTorch's defaults. */

/* embed_dim divisible by num_heads; kdim / vdim 0 mean embed_dim (when either differs,
 * the projections are q_proj_weight, k_proj_weight and v_proj_weight, else one
 * in_proj_weight (3 * embed_dim, embed_dim)); in_proj_bias and out_proj (a Linear, typed
 * NonDynamicallyQuantizableLinear as in PyTorch).
 * add_bias_kv adds bias_k and bias_v (1, 1, embed_dim); add_zero_attn a key and value of
 * zeros. Initialised as PyTorch's: xavier_uniform_ projections, zero biases,
 * xavier_normal_ bias_k / bias_v. Dropout (on the attention weights) follows the
 * module's training flag. */
CT_API ct_module *ct_nn_multihead_attention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias,
                                            bool add_bias_kv, bool add_zero_attn, int64_t kdim, int64_t vdim,
                                            bool batch_first, ct_dtype dtype);
/* forward(query, key, value, key_padding_mask, need_weights, attn_mask): *attn_output
 * (L, N, E), and when need_weights *attn_weights, averaged over the heads (N, L, S);
 * NULL when !need_weights. Without weights it runs ct_scaled_dot_product_attention (the
 * CUDA flash kernels where they apply). Either result pointer may be NULL. */
CT_API ct_status ct_nn_multihead_attention_forward(ct_module *m, const ct_tensor *query, const ct_tensor *key,
                                                   const ct_tensor *value, const ct_tensor *key_padding_mask,
                                                   bool need_weights, const ct_tensor *attn_mask,
                                                   ct_tensor **attn_output, ct_tensor **attn_weights);
/* The same with average_attn_weights (false: weights per head, (N, num_heads, L, S)) and
 * is_causal (a hint that attn_mask, which must be given, is the causal mask). */
CT_API ct_status ct_nn_multihead_attention_forward_ex(ct_module *m, const ct_tensor *query, const ct_tensor *key,
                                                      const ct_tensor *value, const ct_tensor *key_padding_mask,
                                                      bool need_weights, const ct_tensor *attn_mask,
                                                      bool average_attn_weights, bool is_causal,
                                                      ct_tensor **attn_output, ct_tensor **attn_weights);

/* The (sz, sz) mask with -inf above the diagonal and 0 elsewhere
 * (nn.Transformer.generate_square_subsequent_mask); dtype CT_DTYPE_UNDEFINED means the
 * default dtype. */
CT_API ct_tensor *ct_nn_transformer_generate_square_subsequent_mask(int64_t sz, ct_dtype dtype, ct_device device);

/* activation: "relu" (NULL) or "gelu". PyTorch's defaults: dim_feedforward 2048,
 * dropout 0.1, layer_norm_eps 1e-5, batch_first false, norm_first false, bias true.
 * Children: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2
 * (the decoder layer adds multihead_attn, norm3, dropout3). */
CT_API ct_module *ct_nn_transformer_encoder_layer(int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                                  double dropout, const char *activation, double layer_norm_eps,
                                                  bool batch_first, bool norm_first, bool bias, ct_dtype dtype);
CT_API ct_module *ct_nn_transformer_decoder_layer(int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                                  double dropout, const char *activation, double layer_norm_eps,
                                                  bool batch_first, bool norm_first, bool bias, ct_dtype dtype);
/* num_layers copies of layer (an encoder / decoder layer, which is freed: the copies
 * have its parameters' values) under layers.0, layers.1, ..., then norm (a module or
 * NULL). Both take ownership of layer and norm, also on error. */
CT_API ct_module *ct_nn_transformer_encoder(ct_module *encoder_layer, int64_t num_layers, ct_module *norm);
CT_API ct_module *ct_nn_transformer_decoder(ct_module *decoder_layer, int64_t num_layers, ct_module *norm);
/* encoder (num_encoder_layers layers and a LayerNorm) and decoder (likewise); every
 * parameter of more than one dimension xavier_uniform_, as PyTorch's. */
CT_API ct_module *ct_nn_transformer(int64_t d_model, int64_t nhead, int64_t num_encoder_layers,
                                    int64_t num_decoder_layers, int64_t dim_feedforward, double dropout,
                                    const char *activation, double layer_norm_eps, bool batch_first, bool norm_first,
                                    bool bias, ct_dtype dtype);
/* The forwards; NULL masks are None. A false is_causal of an encoder or decoder is
 * PyTorch's None: the hint is taken when the mask is the causal one. */
CT_API ct_tensor *ct_nn_transformer_encoder_layer_forward(ct_module *m, const ct_tensor *src, const ct_tensor *src_mask,
                                                          const ct_tensor *src_key_padding_mask, bool is_causal);
CT_API ct_tensor *ct_nn_transformer_decoder_layer_forward(ct_module *m, const ct_tensor *tgt, const ct_tensor *memory,
                                                          const ct_tensor *tgt_mask, const ct_tensor *memory_mask,
                                                          const ct_tensor *tgt_key_padding_mask,
                                                          const ct_tensor *memory_key_padding_mask,
                                                          bool tgt_is_causal, bool memory_is_causal);
CT_API ct_tensor *ct_nn_transformer_encoder_forward(ct_module *m, const ct_tensor *src, const ct_tensor *mask,
                                                    const ct_tensor *src_key_padding_mask, bool is_causal);
CT_API ct_tensor *ct_nn_transformer_decoder_forward(ct_module *m, const ct_tensor *tgt, const ct_tensor *memory,
                                                    const ct_tensor *tgt_mask, const ct_tensor *memory_mask,
                                                    const ct_tensor *tgt_key_padding_mask,
                                                    const ct_tensor *memory_key_padding_mask, bool tgt_is_causal,
                                                    bool memory_is_causal);
CT_API ct_tensor *ct_nn_transformer_forward(ct_module *m, const ct_tensor *src, const ct_tensor *tgt,
                                            const ct_tensor *src_mask, const ct_tensor *tgt_mask,
                                            const ct_tensor *memory_mask, const ct_tensor *src_key_padding_mask,
                                            const ct_tensor *tgt_key_padding_mask,
                                            const ct_tensor *memory_key_padding_mask, bool src_is_causal,
                                            bool tgt_is_causal, bool memory_is_causal);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_NN_H */
