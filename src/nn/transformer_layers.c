/* nn.TransformerEncoderLayer, nn.TransformerDecoderLayer, nn.TransformerEncoder,
 * nn.TransformerDecoder and nn.Transformer (docs/nn.md, "Transformer layers"), over
 * the MultiheadAttention of src/nn/attention.c, with PyTorch's children and parameter
 * names so that a PyTorch state dict loads as it is.
 *
 * Note [Transformer layers as modules]
 * Every module here is a multi module (ct_module_forward_multi takes its tensors in
 * PyTorch's order) and has a typed forward that also takes the is_causal flags. The
 * layers call their children (linear1, norm1, dropout1, ...) through
 * ct_module_forward, as PyTorch calls self.linear1(x), so hooks on them run; the
 * attention runs through ct_nn_multihead_attention_forward_ex with need_weights false,
 * as PyTorch's _sa_block does, which takes scaled_dot_product_attention. PyTorch's
 * fast path (torch._transformer_encoder_layer_fwd in eval mode, nested tensors) is
 * not taken: its results are those of the path here, except that it writes 0 to the
 * padded positions of a key_padding_mask where this path writes what attention gives. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/module_internal.h"

#define TL_CTX_MAGIC 0x54464d4374780001ULL

typedef enum tl_kind { TL_ENCODER_LAYER = 0, TL_DECODER_LAYER, TL_ENCODER, TL_DECODER, TL_TRANSFORMER } tl_kind;

static const char *const TYPES[] = {"TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder",
                                    "TransformerDecoder", "Transformer"};

typedef struct tl_ctx {
    uint64_t magic; /* TL_CTX_MAGIC */
    tl_kind kind;
    int64_t d_model, nhead, dim_feedforward;
    double dropout, eps;
    bool gelu, batch_first, norm_first, bias;
} tl_ctx;

/* The ctx of m when it is a module of kind made here; NULL with an error otherwise. */
static tl_ctx *tl_of(ct_module *m, tl_kind kind, const char *fn) {
    if (!m) {
        ct_error(CT_ERROR_NULL_ARGUMENT, fn, "module is NULL");
        return NULL;
    }
    tl_ctx *x = strcmp(ct_module_type(m), TYPES[kind]) == 0 ? ct_module_ctx(m) : NULL;
    if (!x || x->magic != TL_CTX_MAGIC || x->kind != kind) {
        ct_error(CT_ERROR_VALUE, fn, "expected a %s module, got %s", TYPES[kind], ct_module_type(m));
        return NULL;
    }
    return x;
}

/* A mask's dtype check under its own name (F._canonical_mask's message). */
static bool mask_ok(const char *op, const ct_tensor *mask, const char *name) {
    if (!mask)
        return true;
    ct_dtype dt = ct_tensor_dtype(mask);
    if (dt == CT_BOOL || ct_dtype_is_floating(dt))
        return true;
    ct_error(CT_ERROR_TYPE, op, "only bool and floating types of %s are supported", name);
    return false;
}

static ct_tensor *child(ct_module *m, const char *name, const ct_tensor *x) {
    return x ? ct_module_forward(ct_module_child(m, name), x) : NULL;
}

/* dropout(self_attn(x, mem, mem, ...)[0]): _sa_block and _mha_block. */
static ct_tensor *attn_block(ct_module *m, const char *attn, const char *drop, const ct_tensor *x,
                             const ct_tensor *mem, const ct_tensor *mask, const ct_tensor *kpm, bool is_causal) {
    ct_tensor *y = NULL;
    if (!x || !mem)
        return NULL;
    if (ct_nn_multihead_attention_forward_ex(ct_module_child(m, attn), x, mem, mem, kpm, false, mask, true, is_causal,
                                             &y, NULL))
        return NULL;
    return child(m, drop, y);
}

/* dropout2(linear2(dropout(activation(linear1(x))))): _ff_block. */
static ct_tensor *ff_block(ct_module *m, const tl_ctx *c, const char *drop, const ct_tensor *x) {
    ct_tensor *h = child(m, "linear1", x);
    h = h ? (c->gelu ? ct_gelu(h, CT_GELU_APPROXIMATE_NONE) : ct_relu(h)) : NULL;
    return child(m, drop, child(m, "linear2", child(m, "dropout", h)));
}

static ct_tensor *encoder_layer_run(ct_module *m, const tl_ctx *c, const ct_tensor *src, const ct_tensor *mask,
                                    const ct_tensor *kpm, bool is_causal) {
    if (!mask_ok(TYPES[TL_ENCODER_LAYER], kpm, "src_key_padding_mask") ||
        !mask_ok(TYPES[TL_ENCODER_LAYER], mask, "src_mask"))
        return NULL;
    ct_scope_begin();
    ct_tensor *x = (ct_tensor *)src;
    if (c->norm_first) {
        ct_tensor *n1 = child(m, "norm1", x);
        x = ct_add(x, attn_block(m, "self_attn", "dropout1", n1, n1, mask, kpm, is_causal));
        x = ct_add(x, ff_block(m, c, "dropout2", child(m, "norm2", x)));
    } else {
        x = child(m, "norm1", ct_add(x, attn_block(m, "self_attn", "dropout1", x, x, mask, kpm, is_causal)));
        x = child(m, "norm2", ct_add(x, ff_block(m, c, "dropout2", x)));
    }
    ct_keep(x);
    ct_scope_end();
    return x;
}

static ct_tensor *decoder_layer_run(ct_module *m, const tl_ctx *c, const ct_tensor *tgt, const ct_tensor *memory,
                                    const ct_tensor *tgt_mask, const ct_tensor *memory_mask, const ct_tensor *tgt_kpm,
                                    const ct_tensor *memory_kpm, bool tgt_is_causal, bool memory_is_causal) {
    const char *op = TYPES[TL_DECODER_LAYER];
    if (!mask_ok(op, tgt_mask, "tgt_mask") || !mask_ok(op, memory_mask, "memory_mask") ||
        !mask_ok(op, tgt_kpm, "tgt_key_padding_mask") || !mask_ok(op, memory_kpm, "memory_key_padding_mask"))
        return NULL;
    if (!memory) {
        ct_error_null(op);
        return NULL;
    }
    ct_scope_begin();
    ct_tensor *x = (ct_tensor *)tgt;
    if (c->norm_first) {
        ct_tensor *n1 = child(m, "norm1", x);
        x = ct_add(x, attn_block(m, "self_attn", "dropout1", n1, n1, tgt_mask, tgt_kpm, tgt_is_causal));
        x = ct_add(x, attn_block(m, "multihead_attn", "dropout2", child(m, "norm2", x), memory, memory_mask,
                                 memory_kpm, memory_is_causal));
        x = ct_add(x, ff_block(m, c, "dropout3", child(m, "norm3", x)));
    } else {
        x = child(m, "norm1", ct_add(x, attn_block(m, "self_attn", "dropout1", x, x, tgt_mask, tgt_kpm,
                                                   tgt_is_causal)));
        x = child(m, "norm2", ct_add(x, attn_block(m, "multihead_attn", "dropout2", x, memory, memory_mask,
                                                   memory_kpm, memory_is_causal)));
        x = child(m, "norm3", ct_add(x, ff_block(m, c, "dropout3", x)));
    }
    ct_keep(x);
    ct_scope_end();
    return x;
}

ct_tensor *ct_nn_transformer_generate_square_subsequent_mask(int64_t sz, ct_dtype dtype, ct_device device) {
    const char *op = "generate_square_subsequent_mask";
    if (sz < 0) {
        ct_error(CT_ERROR_VALUE, op, "sz must be non-negative, got %lld", (long long)sz);
        return NULL;
    }
    if (dtype == CT_DTYPE_UNDEFINED)
        dtype = ct_get_default_dtype();
    if (!ct_dtype_is_floating(dtype)) {
        ct_error(CT_ERROR_TYPE, op, "the mask holds -inf: it needs a floating-point dtype, got %s",
                 ct_dtype_name(dtype));
        return NULL;
    }
    ct_scope_begin();
    ct_tensor *m = ct_triu(ct_full(CT_SHAPE(sz, sz), ct_scalar_float(-INFINITY), dtype, device), 1);
    ct_keep(m);
    ct_scope_end();
    return m;
}

/* _detect_is_causal_mask: the hint, or whether mask is the (sz, sz) causal mask. The
 * comparison reads the mask's values on the host; under a ct_compile capture, whose
 * program must hold for any mask of the same shape, the hint alone decides (the layers
 * then apply the mask as given: the same result up to rounding). */
static bool detect_causal(const ct_tensor *mask, bool is_causal, int64_t sz) {
    if (is_causal || !mask || ct_compile_is_capturing() || ct_tensor_dim(mask) != 2 ||
        ct_tensor_size(mask, 0) != sz || ct_tensor_size(mask, 1) != sz || !ct_dtype_is_floating(ct_tensor_dtype(mask)))
        return is_causal;
    bool eq = false;
    ct_scope_begin();
    ct_tensor *ref = ct_nn_transformer_generate_square_subsequent_mask(sz, ct_tensor_dtype(mask),
                                                                       ct_tensor_device(mask));
    if (!ref || ct_equal(mask, ref, &eq))
        eq = false;
    ct_scope_end();
    ct_clear_error();
    return eq;
}

/* _get_seq_len: the sequence length of a (L, N, E), (N, L, E) or (L, E) input. */
static int64_t seq_len(const ct_tensor *x, bool batch_first) {
    return ct_tensor_dim(x) == 3 && batch_first ? ct_tensor_size(x, 1) : ct_tensor_size(x, 0);
}

/* The layers of an encoder or decoder, in order, then its norm. */
static ct_tensor *stack_run(ct_module *m, bool decoder, const ct_tensor *x, const ct_tensor *memory,
                            const ct_tensor *mask, const ct_tensor *memory_mask, const ct_tensor *kpm,
                            const ct_tensor *memory_kpm, bool is_causal, bool memory_is_causal) {
    ct_module *layers = ct_module_child(m, "layers");
    int n = ct_module_num_children(layers);
    ct_scope_begin();
    ct_tensor *y = (ct_tensor *)x;
    for (int i = 0; i < n && y; i++) {
        ct_module *l = ct_module_child_at(layers, i, NULL);
        tl_ctx *c = tl_of(l, decoder ? TL_DECODER_LAYER : TL_ENCODER_LAYER, TYPES[decoder ? TL_DECODER : TL_ENCODER]);
        if (!c)
            y = NULL;
        else if (decoder)
            y = decoder_layer_run(l, c, y, memory, mask, memory_mask, kpm, memory_kpm, is_causal, memory_is_causal);
        else
            y = encoder_layer_run(l, c, y, mask, kpm, is_causal);
    }
    ct_module *norm = ct_module_child(m, "norm");
    if (y && norm)
        y = ct_module_forward(norm, y);
    ct_keep(y);
    ct_scope_end();
    return y;
}

/* ------------------------------------------------------------------ typed forwards */

ct_tensor *ct_nn_transformer_encoder_layer_forward(ct_module *m, const ct_tensor *src, const ct_tensor *src_mask,
                                                   const ct_tensor *src_key_padding_mask, bool is_causal) {
    tl_ctx *c = tl_of(m, TL_ENCODER_LAYER, "transformer_encoder_layer_forward");
    if (!c)
        return NULL;
    CT_CHECK_ARG(TYPES[TL_ENCODER_LAYER], src);
    return encoder_layer_run(m, c, src, src_mask, src_key_padding_mask, is_causal);
}

ct_tensor *ct_nn_transformer_decoder_layer_forward(ct_module *m, const ct_tensor *tgt, const ct_tensor *memory,
                                                   const ct_tensor *tgt_mask, const ct_tensor *memory_mask,
                                                   const ct_tensor *tgt_key_padding_mask,
                                                   const ct_tensor *memory_key_padding_mask, bool tgt_is_causal,
                                                   bool memory_is_causal) {
    tl_ctx *c = tl_of(m, TL_DECODER_LAYER, "transformer_decoder_layer_forward");
    if (!c)
        return NULL;
    CT_CHECK_ARG(TYPES[TL_DECODER_LAYER], tgt);
    CT_CHECK_ARG(TYPES[TL_DECODER_LAYER], memory);
    return decoder_layer_run(m, c, tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                             tgt_is_causal, memory_is_causal);
}

ct_tensor *ct_nn_transformer_encoder_forward(ct_module *m, const ct_tensor *src, const ct_tensor *mask,
                                             const ct_tensor *src_key_padding_mask, bool is_causal) {
    tl_ctx *c = tl_of(m, TL_ENCODER, "transformer_encoder_forward");
    if (!c)
        return NULL;
    CT_CHECK_ARG(TYPES[TL_ENCODER], src);
    if (!mask_ok(TYPES[TL_ENCODER], src_key_padding_mask, "src_key_padding_mask") ||
        !mask_ok(TYPES[TL_ENCODER], mask, "mask"))
        return NULL;
    is_causal = detect_causal(mask, is_causal, seq_len(src, c->batch_first));
    return stack_run(m, false, src, NULL, mask, NULL, src_key_padding_mask, NULL, is_causal, false);
}

ct_tensor *ct_nn_transformer_decoder_forward(ct_module *m, const ct_tensor *tgt, const ct_tensor *memory,
                                             const ct_tensor *tgt_mask, const ct_tensor *memory_mask,
                                             const ct_tensor *tgt_key_padding_mask,
                                             const ct_tensor *memory_key_padding_mask, bool tgt_is_causal,
                                             bool memory_is_causal) {
    tl_ctx *c = tl_of(m, TL_DECODER, "transformer_decoder_forward");
    if (!c)
        return NULL;
    CT_CHECK_ARG(TYPES[TL_DECODER], tgt);
    CT_CHECK_ARG(TYPES[TL_DECODER], memory);
    tgt_is_causal = detect_causal(tgt_mask, tgt_is_causal, seq_len(tgt, c->batch_first));
    return stack_run(m, true, tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                     tgt_is_causal, memory_is_causal);
}

ct_tensor *ct_nn_transformer_forward(ct_module *m, const ct_tensor *src, const ct_tensor *tgt,
                                     const ct_tensor *src_mask, const ct_tensor *tgt_mask,
                                     const ct_tensor *memory_mask, const ct_tensor *src_key_padding_mask,
                                     const ct_tensor *tgt_key_padding_mask, const ct_tensor *memory_key_padding_mask,
                                     bool src_is_causal, bool tgt_is_causal, bool memory_is_causal) {
    const char *op = TYPES[TL_TRANSFORMER];
    tl_ctx *c = tl_of(m, TL_TRANSFORMER, "transformer_forward");
    if (!c)
        return NULL;
    CT_CHECK_ARG(op, src);
    CT_CHECK_ARG(op, tgt);
    bool batched = ct_tensor_dim(src) == 3;
    int bd = c->batch_first ? 0 : 1;
    if (batched && (ct_tensor_dim(tgt) != 3 || ct_tensor_size(src, bd) != ct_tensor_size(tgt, bd))) {
        ct_error(CT_ERROR_VALUE, op, "the batch number of src and tgt must be equal");
        return NULL;
    }
    if (ct_tensor_dim(src) < 1 || ct_tensor_dim(tgt) < 1 || ct_tensor_size(src, -1) != c->d_model ||
        ct_tensor_size(tgt, -1) != c->d_model) {
        ct_error(CT_ERROR_VALUE, op, "the feature number of src and tgt must be equal to d_model");
        return NULL;
    }
    ct_scope_begin();
    ct_tensor *memory = ct_nn_transformer_encoder_forward(ct_module_child(m, "encoder"), src, src_mask,
                                                          src_key_padding_mask, src_is_causal);
    ct_tensor *y = memory ? ct_nn_transformer_decoder_forward(ct_module_child(m, "decoder"), tgt, memory, tgt_mask,
                                                              memory_mask, tgt_key_padding_mask,
                                                              memory_key_padding_mask, tgt_is_causal,
                                                              memory_is_causal)
                          : NULL;
    ct_keep(y);
    ct_scope_end();
    return y;
}

/* ------------------------------------------------------------------ multi forwards */

/* Input i, or NULL when it is left off or has no elements (None). */
static const ct_tensor *opt(const ct_tensor *const *in, int nin, int i) {
    return i < nin && ct_tensor_numel(in[i]) ? in[i] : NULL;
}

static ct_status one_out(ct_tensor *y, ct_tensor **out, int *nout) {
    out[0] = y;
    *nout = y ? 1 : 0;
    return y ? CT_OK : ct_last_status();
}

static ct_status count_error(ct_module *m, const char *want, int nin) {
    return ct_error(CT_ERROR_VALUE, ct_module_type(m), "takes %s, but %d input%s given", want, nin,
                    nin == 1 ? " was" : "s were");
}

static ct_status tl_forward_multi(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int cap,
                                  int *nout) {
    (void)cap;
    *nout = 0;
    const tl_ctx *c = ct_module_ctx(m);
    switch (c->kind) {
    case TL_ENCODER_LAYER:
    case TL_ENCODER:
        if (nin < 1 || nin > 3)
            return count_error(m, "src[, src_mask[, src_key_padding_mask]]", nin);
        return one_out(c->kind == TL_ENCODER
                           ? ct_nn_transformer_encoder_forward(m, in[0], opt(in, nin, 1), opt(in, nin, 2), false)
                           : ct_nn_transformer_encoder_layer_forward(m, in[0], opt(in, nin, 1), opt(in, nin, 2),
                                                                     false),
                       out, nout);
    case TL_DECODER_LAYER:
    case TL_DECODER:
        if (nin < 2 || nin > 6)
            return count_error(
                m, "tgt, memory[, tgt_mask[, memory_mask[, tgt_key_padding_mask[, memory_key_padding_mask]]]]", nin);
        return one_out(c->kind == TL_DECODER
                           ? ct_nn_transformer_decoder_forward(m, in[0], in[1], opt(in, nin, 2), opt(in, nin, 3),
                                                               opt(in, nin, 4), opt(in, nin, 5), false, false)
                           : ct_nn_transformer_decoder_layer_forward(m, in[0], in[1], opt(in, nin, 2),
                                                                     opt(in, nin, 3), opt(in, nin, 4),
                                                                     opt(in, nin, 5), false, false),
                       out, nout);
    default:
        if (nin < 2 || nin > 8)
            return count_error(m,
                               "src, tgt[, src_mask, tgt_mask, memory_mask, src_key_padding_mask, "
                               "tgt_key_padding_mask, memory_key_padding_mask]",
                               nin);
        return one_out(ct_nn_transformer_forward(m, in[0], in[1], opt(in, nin, 2), opt(in, nin, 3), opt(in, nin, 4),
                                                 opt(in, nin, 5), opt(in, nin, 6), opt(in, nin, 7), false, false,
                                                 false),
                       out, nout);
    }
}

/* ------------------------------------------------------------------ constructors */

static ct_module *new_tl(tl_kind kind, const tl_ctx *cfg) {
    tl_ctx *x = ct_xcalloc(TYPES[kind], 1, sizeof *x);
    if (!x)
        return NULL;
    ct_module *m = ct_module_new_multi(TYPES[kind], tl_forward_multi, x, free);
    if (!m) {
        free(x);
        return NULL;
    }
    *x = *cfg;
    x->magic = TL_CTX_MAGIC;
    x->kind = kind;
    return m;
}

static ct_module *make_layer(bool decoder, int64_t d_model, int64_t nhead, int64_t dim_feedforward, double dropout,
                             const char *activation, double layer_norm_eps, bool batch_first, bool norm_first,
                             bool bias, ct_dtype dtype) {
    tl_kind kind = decoder ? TL_DECODER_LAYER : TL_ENCODER_LAYER;
    const char *op = TYPES[kind];
    bool gelu = false;
    if (activation && strcmp(activation, "gelu") == 0)
        gelu = true;
    else if (activation && strcmp(activation, "relu") != 0) {
        ct_error(CT_ERROR_VALUE, op, "activation should be relu/gelu, not %s", activation);
        return NULL;
    }
    if (dim_feedforward < 0) {
        ct_error(CT_ERROR_VALUE, op, "dim_feedforward must be non-negative, got %lld", (long long)dim_feedforward);
        return NULL;
    }
    if (ct_nn_layer_dtype(op, &dtype))
        return NULL;
    tl_ctx cfg = {.d_model = d_model,
                  .nhead = nhead,
                  .dim_feedforward = dim_feedforward,
                  .dropout = dropout,
                  .eps = layer_norm_eps,
                  .gelu = gelu,
                  .batch_first = batch_first,
                  .norm_first = norm_first,
                  .bias = bias};
    ct_module *sa = ct_nn_multihead_attention(d_model, nhead, dropout, bias, false, false, 0, 0, batch_first, dtype);
    if (!sa)
        return NULL;
    ct_module *m = new_tl(kind, &cfg);
    if (!m) {
        ct_module_free(sa);
        return NULL;
    }
    int64_t d = d_model;
    /* children in PyTorch's order, so state_dict keys line up */
    bool ok = ct_module_add_child(m, "self_attn", sa) == CT_OK;
    if (ok && decoder)
        ok = !ct_module_add_child(m, "multihead_attn", ct_nn_multihead_attention(d_model, nhead, dropout, bias, false,
                                                                                 false, 0, 0, batch_first, dtype));
    ok = ok && !ct_module_add_child(m, "linear1", ct_nn_linear(d, dim_feedforward, bias, dtype)) &&
         !ct_module_add_child(m, "dropout", ct_nn_dropout(dropout)) &&
         !ct_module_add_child(m, "linear2", ct_nn_linear(dim_feedforward, d, bias, dtype));
    for (int i = 1; ok && i <= (decoder ? 3 : 2); i++) {
        char name[24];
        snprintf(name, sizeof name, "norm%d", i);
        ok = !ct_module_add_child(m, name, ct_nn_layer_norm_bias(&d, 1, layer_norm_eps, true, bias, dtype));
    }
    for (int i = 1; ok && i <= (decoder ? 3 : 2); i++) {
        char name[24];
        snprintf(name, sizeof name, "dropout%d", i);
        ok = !ct_module_add_child(m, name, ct_nn_dropout(dropout));
    }
    if (!ok) {
        ct_module_free(m);
        return NULL;
    }
    return m;
}

ct_module *ct_nn_transformer_encoder_layer(int64_t d_model, int64_t nhead, int64_t dim_feedforward, double dropout,
                                           const char *activation, double layer_norm_eps, bool batch_first,
                                           bool norm_first, bool bias, ct_dtype dtype) {
    return make_layer(false, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                      norm_first, bias, dtype);
}

ct_module *ct_nn_transformer_decoder_layer(int64_t d_model, int64_t nhead, int64_t dim_feedforward, double dropout,
                                           const char *activation, double layer_norm_eps, bool batch_first,
                                           bool norm_first, bool bias, ct_dtype dtype) {
    return make_layer(true, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                      norm_first, bias, dtype);
}

/* copy.deepcopy(layer): a layer of the same configuration, on layer's device, holding
 * the values of layer's parameters, in layer's training mode. */
static ct_module *clone_layer(ct_module *layer, const tl_ctx *c) {
    ct_tensor *w = ct_module_param(layer, "linear1.weight");
    if (!w) {
        ct_error(CT_ERROR_VALUE, TYPES[c->kind], "the layer has no parameter linear1.weight");
        return NULL;
    }
    ct_module *k = make_layer(c->kind == TL_DECODER_LAYER, c->d_model, c->nhead, c->dim_feedforward, c->dropout,
                              c->gelu ? "gelu" : "relu", c->eps, c->batch_first, c->norm_first, c->bias,
                              ct_tensor_dtype(w));
    ct_value *sd = k ? ct_module_state_dict(layer) : NULL;
    bool ok = sd && !ct_module_to(k, ct_module_device(layer), CT_DTYPE_UNDEFINED) &&
              !ct_module_load_state_dict(k, sd, true, NULL, NULL);
    ct_value_free(sd);
    if (!ok) {
        ct_module_free(k);
        return NULL;
    }
    ct_module_train(k, ct_module_is_training(layer));
    return k;
}

static ct_module *make_stack(bool decoder, ct_module *layer, int64_t num_layers, ct_module *norm) {
    tl_kind kind = decoder ? TL_DECODER : TL_ENCODER;
    const char *op = TYPES[kind];
    if (!layer) { /* a failed constructor's NULL: its error is the one to report */
        ct_error_null(op);
        ct_module_free(norm);
        return NULL;
    }
    tl_ctx *c = tl_of(layer, decoder ? TL_DECODER_LAYER : TL_ENCODER_LAYER, op);
    ct_module *m = NULL, *list = NULL;
    if (c && (num_layers < 0 || num_layers > 1 << 20)) {
        ct_error(CT_ERROR_VALUE, op, "num_layers must be between 0 and 2^20, got %lld", (long long)num_layers);
        c = NULL;
    }
    if (c && (m = new_tl(kind, c)) != NULL && (list = ct_nn_module_list(NULL, 0)) != NULL) {
        bool ok = !ct_module_add_child(m, "layers", list);
        for (int64_t i = 0; ok && i < num_layers; i++) {
            ct_module *k = clone_layer(layer, c);
            ok = k && !ct_module_append(list, k);
        }
        if (ok && norm) {
            ok = !ct_module_add_child(m, "norm", norm);
            norm = NULL;
        }
        if (!ok) {
            ct_module_free(m);
            m = NULL;
        }
    } else if (m) {
        ct_module_free(m);
        m = NULL;
    }
    ct_module_free(layer);
    ct_module_free(norm);
    return m;
}

ct_module *ct_nn_transformer_encoder(ct_module *encoder_layer, int64_t num_layers, ct_module *norm) {
    return make_stack(false, encoder_layer, num_layers, norm);
}

ct_module *ct_nn_transformer_decoder(ct_module *decoder_layer, int64_t num_layers, ct_module *norm) {
    return make_stack(true, decoder_layer, num_layers, norm);
}

static int xavier_visit(const char *name, ct_tensor *t, void *ud) {
    (void)name;
    (void)ud;
    if (ct_tensor_dim(t) <= 1)
        return 0;
    ct_scope_begin();
    int r = ct_init_xavier_uniform_(t, 1.0) ? 0 : (int)ct_last_status();
    ct_scope_end();
    return r;
}

ct_module *ct_nn_transformer(int64_t d_model, int64_t nhead, int64_t num_encoder_layers, int64_t num_decoder_layers,
                             int64_t dim_feedforward, double dropout, const char *activation, double layer_norm_eps,
                             bool batch_first, bool norm_first, bool bias, ct_dtype dtype) {
    const char *op = TYPES[TL_TRANSFORMER];
    if (ct_nn_layer_dtype(op, &dtype))
        return NULL;
    int64_t d = d_model;
    ct_module *enc = ct_nn_transformer_encoder(
        ct_nn_transformer_encoder_layer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                        batch_first, norm_first, bias, dtype),
        num_encoder_layers, ct_nn_layer_norm_bias(&d, 1, layer_norm_eps, true, bias, dtype));
    ct_module *dec = enc ? ct_nn_transformer_decoder(ct_nn_transformer_decoder_layer(d_model, nhead, dim_feedforward,
                                                                                     dropout, activation,
                                                                                     layer_norm_eps, batch_first,
                                                                                     norm_first, bias, dtype),
                                                     num_decoder_layers,
                                                     ct_nn_layer_norm_bias(&d, 1, layer_norm_eps, true, bias, dtype))
                         : NULL;
    const tl_ctx *c = enc ? ct_module_ctx(enc) : NULL;
    ct_module *m = dec ? new_tl(TL_TRANSFORMER, c) : NULL;
    if (!m) {
        ct_module_free(enc);
        ct_module_free(dec);
        return NULL;
    }
    ct_status st = ct_module_add_child(m, "encoder", enc);
    if (st)
        ct_module_free(dec);
    else
        st = ct_module_add_child(m, "decoder", dec);
    if (st || ct_module_named_parameters(m, xavier_visit, NULL)) {
        ct_module_free(m);
        return NULL;
    }
    return m;
}
