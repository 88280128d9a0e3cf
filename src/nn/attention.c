/* nn.MultiheadAttention (docs/nn.md, "Transformer layers"): PyTorch's
 * F.multi_head_attention_forward made of ops, so autograd, CUDA and META come with
 * them, and the module that holds its parameters under PyTorch's names.
 *
 * Note [Two attention paths]
 * As PyTorch, the forward takes one of two paths once the inputs are projected and
 * split into heads. Without attention weights it calls ct_scaled_dot_product_attention
 * on (N, H, L, head_dim), so the blocked CPU kernel or CUDA's flash attention runs
 * (a causal hint with no other mask reaches it as is_causal, with no mask tensor).
 * With weights it forms softmax(q k^T / sqrt(head_dim) + mask) itself, as (N * H, L, S)
 * batched products, because the weights are one of its results. Masks are brought to
 * one float form first: a bool mask is true where attention is NOT allowed (the
 * opposite of scaled_dot_product_attention's bool masks, as in PyTorch) and becomes
 * -inf there and 0 elsewhere; a key_padding_mask (N, S) is added to attn_mask. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/module_internal.h"

#define MHA_CTX_MAGIC 0x4d48414374780001ULL

typedef struct mha_ctx {
    uint64_t magic; /* MHA_CTX_MAGIC */
    int64_t embed_dim, num_heads, kdim, vdim;
    double dropout;
    bool batch_first, qkv_same, add_zero_attn;
} mha_ctx;

static const char *const OP = "MultiheadAttention";

/* "torch.Size([2, 3])", as Python prints a tensor's shape. */
static const char *size_str(const ct_tensor *t, char *buf, size_t cap) {
    char s[160];
    snprintf(buf, cap, "torch.Size(%s)", ct_shape_str(ct_tensor_shape(t), ct_tensor_dim(t), s, sizeof s));
    return buf;
}

/* mha_ctx of m when m is a module made by ct_nn_multihead_attention. */
static mha_ctx *mha_of(ct_module *m, const char *fn) {
    if (!m) {
        ct_error(CT_ERROR_NULL_ARGUMENT, fn, "module is NULL");
        return NULL;
    }
    mha_ctx *x = strcmp(ct_module_type(m), OP) == 0 ? ct_module_ctx(m) : NULL;
    if (!x || x->magic != MHA_CTX_MAGIC) {
        ct_error(CT_ERROR_VALUE, fn, "expected a MultiheadAttention module made by ct_nn_multihead_attention, got %s",
                 ct_module_type(m));
        return NULL;
    }
    return x;
}

/* F._canonical_mask: NULL stays NULL; a bool mask becomes 0 / -inf (true = masked
 * out) in dtype; a floating mask is converted to dtype. Scope-owned result. */
static ct_status canonical_mask(const ct_tensor *mask, const char *name, ct_dtype dtype, ct_tensor **out) {
    *out = NULL;
    if (!mask)
        return CT_OK;
    ct_dtype dt = ct_tensor_dtype(mask);
    if (dt != CT_BOOL && !ct_dtype_is_floating(dt))
        return ct_error(CT_ERROR_TYPE, OP, "only bool and floating types of %s are supported", name);
    if (dt == CT_BOOL)
        *out = ct_masked_fill(ct_zeros_like(mask, dtype), mask, ct_scalar_float(-INFINITY));
    else
        *out = ct_to_dtype(mask, dtype);
    return *out ? CT_OK : ct_last_status();
}

/* _mha_shape_check: whether the query is batched (3-D), or an error. */
static ct_status shape_check(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v, const ct_tensor *kpm,
                             const ct_tensor *mask, int64_t num_heads, bool *batched) {
    int qd = ct_tensor_dim(q), kd = ct_tensor_dim(k), vd = ct_tensor_dim(v);
    if (qd == 3) {
        *batched = true;
        if (kd != 3 || vd != 3)
            return ct_error(CT_ERROR_VALUE, OP,
                            "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found %d-D and "
                            "%d-D tensors respectively",
                            kd, vd);
        if (kpm && ct_tensor_dim(kpm) != 2)
            return ct_error(CT_ERROR_VALUE, OP,
                            "For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but found "
                            "%d-D tensor instead",
                            ct_tensor_dim(kpm));
        if (mask && ct_tensor_dim(mask) != 2 && ct_tensor_dim(mask) != 3)
            return ct_error(CT_ERROR_VALUE, OP,
                            "For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
                            "%d-D tensor instead",
                            ct_tensor_dim(mask));
        return CT_OK;
    }
    if (qd == 2) {
        *batched = false;
        if (kd != 2 || vd != 2)
            return ct_error(CT_ERROR_VALUE, OP,
                            "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found %d-D and "
                            "%d-D tensors respectively",
                            kd, vd);
        if (kpm && ct_tensor_dim(kpm) != 1)
            return ct_error(CT_ERROR_VALUE, OP,
                            "For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D but found "
                            "%d-D tensor instead",
                            ct_tensor_dim(kpm));
        if (mask) {
            if (ct_tensor_dim(mask) != 2 && ct_tensor_dim(mask) != 3)
                return ct_error(CT_ERROR_VALUE, OP,
                                "For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
                                "%d-D tensor instead",
                                ct_tensor_dim(mask));
            if (ct_tensor_dim(mask) == 3) {
                int64_t want[3] = {num_heads, ct_tensor_size(q, 0), ct_tensor_size(k, 0)};
                bool same = true;
                for (int i = 0; i < 3; i++)
                    same = same && ct_tensor_size(mask, i) == want[i];
                if (!same) {
                    char a[96], b[96];
                    snprintf(a, sizeof a, "(%lld, %lld, %lld)", (long long)want[0], (long long)want[1],
                             (long long)want[2]);
                    return ct_error(CT_ERROR_VALUE, OP, "Expected `attn_mask` shape to be %s but got %s", a,
                                    size_str(mask, b, sizeof b));
                }
            }
        }
        return CT_OK;
    }
    return ct_error(CT_ERROR_VALUE, OP,
                    "query should be unbatched 2D or batched 3D tensor but received %d-D query tensor", qd);
}

/* The forward, on sequence-first batched inputs (L, N, E), (S, N, kdim), (S, N, vdim)
 * with canonical (float) masks; scope-owned results. */
static ct_status mha_core(ct_module *m, const mha_ctx *x, ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *kpm,
                          ct_tensor *mask, bool need_weights, bool average, bool is_causal, ct_tensor **out,
                          ct_tensor **weights) {
    char a[128], b[128];
    const int64_t E = x->embed_dim, H = x->num_heads, hd = E / H;
    const int64_t L = ct_tensor_size(q, 0), N = ct_tensor_size(q, 1);
    int64_t S = ct_tensor_size(k, 0);
    if (ct_tensor_size(q, 2) != E)
        return ct_error(CT_ERROR_VALUE, OP, "was expecting embedding dimension of %lld, but got %lld", (long long)E,
                        (long long)ct_tensor_size(q, 2));
    if (x->qkv_same) {
        bool same = ct_tensor_dim(k) == ct_tensor_dim(v);
        for (int i = 0; same && i < ct_tensor_dim(k); i++)
            same = ct_tensor_size(k, i) == ct_tensor_size(v, i);
        if (!same)
            return ct_error(CT_ERROR_VALUE, OP, "key shape %s does not match value shape %s",
                            size_str(k, a, sizeof a), size_str(v, b, sizeof b));
    } else if (ct_tensor_size(k, 0) != ct_tensor_size(v, 0) || ct_tensor_size(k, 1) != ct_tensor_size(v, 1)) {
        return ct_error(CT_ERROR_VALUE, OP,
                        "key's sequence and batch dims (%lld, %lld) do not match value's (%lld, %lld)",
                        (long long)ct_tensor_size(k, 0), (long long)ct_tensor_size(k, 1),
                        (long long)ct_tensor_size(v, 0), (long long)ct_tensor_size(v, 1));
    }
    if (ct_tensor_size(k, 1) != N)
        return ct_error(CT_ERROR_VALUE, OP, "key and value have batch size %lld, but query has %lld",
                        (long long)ct_tensor_size(k, 1), (long long)N);
    if (ct_tensor_size(k, 2) != x->kdim || ct_tensor_size(v, 2) != x->vdim)
        return ct_error(CT_ERROR_VALUE, OP,
                        "expected key and value of feature sizes %lld and %lld (kdim and vdim), got %lld and %lld",
                        (long long)x->kdim, (long long)x->vdim, (long long)ct_tensor_size(k, 2),
                        (long long)ct_tensor_size(v, 2));
    if (is_causal && !mask)
        return ct_error(CT_ERROR_VALUE, OP,
                        "Need attn_mask if specifying the is_causal hint. You may use the Transformer module method "
                        "`generate_square_subsequent_mask` to create this mask.");
    if (is_causal && !kpm && !need_weights)
        mask = NULL; /* the hint goes to scaled_dot_product_attention as is_causal */
    else if (kpm)
        is_causal = false; /* the merged mask is no longer causal */

    /* in-projection: (L, N, E) @ W_q^T + b_q, and the same for key and value */
    ct_tensor *bias = ct_module_param(m, "in_proj_bias"), *w[3], *bb[3] = {NULL, NULL, NULL};
    if (x->qkv_same) {
        ct_tensor *win = ct_module_param(m, "in_proj_weight");
        if (!win)
            return ct_error(CT_ERROR_VALUE, OP, "the module has no parameter in_proj_weight");
        for (int i = 0; i < 3; i++)
            w[i] = ct_narrow(win, 0, i * E, E);
    } else {
        w[0] = ct_module_param(m, "q_proj_weight");
        w[1] = ct_module_param(m, "k_proj_weight");
        w[2] = ct_module_param(m, "v_proj_weight");
        if (!w[0] || !w[1] || !w[2])
            return ct_error(CT_ERROR_VALUE, OP, "the module has no q_proj_weight, k_proj_weight or v_proj_weight");
    }
    for (int i = 0; i < 3 && bias; i++)
        bb[i] = ct_narrow(bias, 0, i * E, E);
    q = ct_linear(q, w[0], bb[0]);
    k = q ? ct_linear(k, w[1], bb[1]) : NULL;
    v = k ? ct_linear(v, w[2], bb[2]) : NULL;
    if (!v)
        return ct_last_status();

    if (mask) { /* 2-D (L, S) or 3-D (N * H, L, S), checked before any key is added */
        int64_t want[3] = {N * H, L, S};
        int md = ct_tensor_dim(mask);
        if (md == 2) {
            if (ct_tensor_size(mask, 0) != L || ct_tensor_size(mask, 1) != S)
                return ct_error(CT_ERROR_VALUE, OP, "The shape of the 2D attn_mask is %s, but should be (%lld, %lld).",
                                size_str(mask, a, sizeof a), (long long)L, (long long)S);
            mask = ct_unsqueeze(mask, 0);
        } else if (md == 3) {
            for (int i = 0; i < 3; i++)
                if (ct_tensor_size(mask, i) != want[i])
                    return ct_error(CT_ERROR_VALUE, OP,
                                    "The shape of the 3D attn_mask is %s, but should be (%lld, %lld, %lld).",
                                    size_str(mask, a, sizeof a), (long long)want[0], (long long)want[1],
                                    (long long)want[2]);
        } else {
            return ct_error(CT_ERROR_VALUE, OP, "attn_mask's dimension %d is not supported", md);
        }
    }
    const int64_t pad1[2] = {0, 1};
    const bool had_mask = mask != NULL, had_kpm = kpm != NULL;
    ct_tensor *bias_k = ct_module_param(m, "bias_k"), *bias_v = ct_module_param(m, "bias_v");
    if (bias_k && bias_v) { /* one more key and value, the learned biases, for every batch */
        const ct_tensor *kk[2] = {k, ct_repeat(bias_k, CT_SHAPE(1, N, 1))};
        const ct_tensor *vv[2] = {v, ct_repeat(bias_v, CT_SHAPE(1, N, 1))};
        k = kk[1] ? ct_cat(kk, 2, 0) : NULL;
        v = vv[1] ? ct_cat(vv, 2, 0) : NULL;
        if (mask)
            mask = ct_pad(mask, pad1, 2, "constant", 0);
        if (kpm)
            kpm = ct_pad(kpm, pad1, 2, "constant", 0);
    }
    /* heads: (L, N, E) -> (N * H, L, head_dim) */
    q = k && v ? ct_transpose(ct_reshape(q, CT_SHAPE(L, N * H, hd)), 0, 1) : NULL;
    k = q ? ct_transpose(ct_reshape(k, CT_SHAPE(ct_tensor_size(k, 0), N * H, hd)), 0, 1) : NULL;
    v = k ? ct_transpose(ct_reshape(v, CT_SHAPE(ct_tensor_size(v, 0), N * H, hd)), 0, 1) : NULL;
    if (v && x->add_zero_attn) { /* and one more key and value of zeros */
        ct_tensor *z = ct_zeros(CT_SHAPE(N * H, 1, hd), ct_tensor_dtype(k), ct_tensor_device(k));
        const ct_tensor *kk[2] = {k, z}, *vv[2] = {v, z};
        k = z ? ct_cat(kk, 2, 1) : NULL;
        v = z ? ct_cat(vv, 2, 1) : NULL;
        if (mask)
            mask = ct_pad(mask, pad1, 2, "constant", 0);
        if (kpm)
            kpm = ct_pad(kpm, pad1, 2, "constant", 0);
    }
    if (!v || (had_mask && !mask) || (had_kpm && !kpm))
        return ct_last_status();
    S = ct_tensor_size(k, 1);

    if (kpm) { /* (N, S) -> (N * H, 1, S), merged into the mask */
        if (ct_tensor_size(kpm, 0) != N || ct_tensor_size(kpm, 1) != S)
            return ct_error(CT_ERROR_VALUE, OP, "expecting key_padding_mask shape of (%lld, %lld), but got %s",
                            (long long)N, (long long)S, size_str(kpm, a, sizeof a));
        kpm = ct_reshape(ct_expand(ct_view(kpm, CT_SHAPE(N, 1, 1, S)), CT_SHAPE(N, H, 1, S)), CT_SHAPE(N * H, 1, S));
        mask = kpm && mask ? ct_add(mask, kpm) : kpm;
        if (!mask)
            return ct_last_status();
    }
    double p = ct_module_is_training(m) ? x->dropout : 0.0;
    ct_tensor *o_w = ct_module_param(ct_module_child(m, "out_proj"), "weight");
    ct_tensor *o_b = ct_module_param(ct_module_child(m, "out_proj"), "bias");
    ct_tensor *y, *attn = NULL;
    if (need_weights) { /* Note [Two attention paths] */
        ct_tensor *qs = ct_mul_scalar(q, ct_scalar_float(sqrt(1.0 / (double)hd)));
        ct_tensor *sc = qs ? ct_bmm(qs, ct_transpose(k, -2, -1)) : NULL;
        if (sc && mask)
            sc = ct_add(mask, sc);
        attn = sc ? ct_softmax(sc, -1, CT_DTYPE_UNDEFINED) : NULL;
        ct_tensor *pd = attn && p > 0 ? ct_dropout(attn, p, true) : attn;
        y = pd ? ct_bmm(pd, v) : NULL; /* (N * H, L, hd) */
        y = y ? ct_view(ct_contiguous(ct_transpose(y, 0, 1)), CT_SHAPE(L * N, E)) : NULL;
    } else {
        if (mask)
            mask = ct_tensor_size(mask, 0) == 1 ? ct_unsqueeze(mask, 0) : ct_reshape(mask, CT_SHAPE(N, H, -1, S));
        ct_tensor *q4 = ct_view(q, CT_SHAPE(N, H, L, hd)), *k4 = ct_view(k, CT_SHAPE(N, H, S, hd));
        ct_tensor *v4 = ct_view(v, CT_SHAPE(N, H, S, hd));
        y = q4 && k4 && v4 ? ct_scaled_dot_product_attention(q4, k4, v4, mask, p, is_causal, NULL) : NULL;
        y = y ? ct_view(ct_contiguous(ct_permute(y, CT_SHAPE(2, 0, 1, 3))), CT_SHAPE(L * N, E)) : NULL;
    }
    y = y ? ct_linear(y, o_w, o_b) : NULL;
    y = y ? ct_view(y, CT_SHAPE(L, N, E)) : NULL;
    if (!y)
        return ct_last_status();
    if (attn) {
        attn = ct_view(attn, CT_SHAPE(N, H, L, S));
        if (attn && average)
            attn = ct_mean(attn, CT_SHAPE(1), false, CT_DTYPE_UNDEFINED);
        if (!attn)
            return ct_last_status();
    }
    *out = y;
    *weights = attn;
    return CT_OK;
}

ct_status ct_nn_multihead_attention_forward_ex(ct_module *m, const ct_tensor *query, const ct_tensor *key,
                                               const ct_tensor *value, const ct_tensor *key_padding_mask,
                                               bool need_weights, const ct_tensor *attn_mask,
                                               bool average_attn_weights, bool is_causal, ct_tensor **attn_output,
                                               ct_tensor **attn_weights) {
    if (attn_output)
        *attn_output = NULL;
    if (attn_weights)
        *attn_weights = NULL;
    mha_ctx *x = mha_of(m, "multihead_attention_forward");
    if (!x)
        return ct_last_status();
    if (!query || !key || !value)
        return ct_error_null(OP);
    if (!ct_dtype_is_floating(ct_tensor_dtype(query)))
        return ct_error(CT_ERROR_TYPE, OP, "expected a floating-point query, got %s",
                        ct_dtype_name(ct_tensor_dtype(query)));
    bool batched = false;
    ct_status st = shape_check(query, key, value, key_padding_mask, attn_mask, x->num_heads, &batched);
    if (st)
        return st;
    ct_scope_begin();
    ct_tensor *q = (ct_tensor *)query, *k = (ct_tensor *)key, *v = (ct_tensor *)value, *kpm = NULL, *mask = NULL;
    ct_dtype dt = ct_tensor_dtype(query);
    st = canonical_mask(key_padding_mask, "key_padding_mask", dt, &kpm);
    if (!st)
        st = canonical_mask(attn_mask, "attn_mask", dt, &mask);
    if (!st && batched && x->batch_first) { /* (N, L, E) -> (L, N, E) */
        q = ct_transpose(q, 0, 1);
        k = ct_transpose(k, 0, 1);
        v = ct_transpose(v, 0, 1);
    } else if (!st && !batched) { /* (L, E) -> (L, 1, E) */
        q = ct_unsqueeze(q, 1);
        k = ct_unsqueeze(k, 1);
        v = ct_unsqueeze(v, 1);
        kpm = kpm ? ct_unsqueeze(kpm, 0) : NULL;
    }
    if (!st && (!q || !k || !v || (key_padding_mask && !kpm)))
        st = ct_last_status();
    ct_tensor *y = NULL, *w = NULL;
    if (!st)
        st = mha_core(m, x, q, k, v, kpm, mask, need_weights, average_attn_weights, is_causal, &y, &w);
    if (!st && !batched) {
        y = ct_squeeze_dim(y, 1);
        w = w ? ct_squeeze_dim(w, 0) : NULL;
    } else if (!st && x->batch_first) {
        y = ct_transpose(y, 0, 1);
    }
    if (!st && (!y || (need_weights && !w)))
        st = ct_last_status();
    if (!st) {
        ct_keep(y);
        if (attn_weights)
            ct_keep(w);
    }
    ct_scope_end();
    if (st)
        return st;
    if (attn_output)
        *attn_output = y;
    if (attn_weights)
        *attn_weights = w;
    return CT_OK;
}

ct_status ct_nn_multihead_attention_forward(ct_module *m, const ct_tensor *query, const ct_tensor *key,
                                            const ct_tensor *value, const ct_tensor *key_padding_mask,
                                            bool need_weights, const ct_tensor *attn_mask, ct_tensor **attn_output,
                                            ct_tensor **attn_weights) {
    return ct_nn_multihead_attention_forward_ex(m, query, key, value, key_padding_mask, need_weights, attn_mask, true,
                                                false, attn_output, attn_weights);
}

/* ct_module_forward_multi: (query[, key, value[, key_padding_mask[, attn_mask]]]) ->
 * (attn_output, attn_weights), with PyTorch's defaults need_weights=True,
 * average_attn_weights=True. One input is self-attention; a mask with no elements
 * stands for None. */
static ct_status mha_forward_multi(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int cap,
                                   int *nout) {
    (void)cap;
    if (nin != 1 && (nin < 3 || nin > 5))
        return ct_error(CT_ERROR_VALUE, OP,
                        "takes query, or query, key, value[, key_padding_mask[, attn_mask]], but %d inputs were given",
                        nin);
    const ct_tensor *k = nin >= 3 ? in[1] : in[0], *v = nin >= 3 ? in[2] : in[0];
    const ct_tensor *kpm = nin >= 4 && ct_tensor_numel(in[3]) ? in[3] : NULL;
    const ct_tensor *mask = nin >= 5 && ct_tensor_numel(in[4]) ? in[4] : NULL;
    ct_status st = ct_nn_multihead_attention_forward(m, in[0], k, v, kpm, true, mask, &out[0], &out[1]);
    *nout = st ? 0 : 2;
    return st;
}

/* out_proj: an nn.Linear (initialised as one) under the type name PyTorch gives it,
 * NonDynamicallyQuantizableLinear, so the module prints as PyTorch's. */
static ct_tensor *out_proj_forward(ct_module *m, const ct_tensor *x) {
    return ct_linear(x, ct_module_param(m, "weight"), ct_module_param(m, "bias"));
}

static int out_proj_repr(const ct_module *m, char *buf, size_t cap) {
    ct_tensor *w = ct_module_param(m, "weight");
    return snprintf(buf, cap, "in_features=%lld, out_features=%lld, bias=%s", (long long)ct_tensor_size(w, 1),
                    (long long)ct_tensor_size(w, 0), ct_module_param(m, "bias") ? "True" : "False");
}

static ct_module *out_proj_new(int64_t E, bool bias, ct_dtype dtype) {
    ct_module *lin = ct_nn_linear(E, E, bias, dtype);
    ct_module *m = lin ? ct_module_new("NonDynamicallyQuantizableLinear", out_proj_forward, NULL, NULL) : NULL;
    bool ok = m && !ct_module_register_parameter(m, "weight", ct_module_param(lin, "weight")) &&
              (!bias || !ct_module_register_parameter(m, "bias", ct_module_param(lin, "bias")));
    ct_module_free(lin);
    if (!ok) {
        ct_module_free(m);
        return NULL;
    }
    ct_module_set_extra_repr(m, out_proj_repr);
    return m;
}

ct_module *ct_nn_multihead_attention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias,
                                     bool add_bias_kv, bool add_zero_attn, int64_t kdim, int64_t vdim,
                                     bool batch_first, ct_dtype dtype) {
    if (embed_dim <= 0 || num_heads <= 0) {
        ct_error(CT_ERROR_VALUE, OP, "embed_dim and num_heads must be greater than 0, got embed_dim=%lld and "
                 "num_heads=%lld instead", (long long)embed_dim, (long long)num_heads);
        return NULL;
    }
    if (embed_dim % num_heads) {
        ct_error(CT_ERROR_VALUE, OP, "embed_dim must be divisible by num_heads");
        return NULL;
    }
    if (kdim < 0 || vdim < 0) {
        ct_error(CT_ERROR_VALUE, OP, "kdim and vdim must be positive (or 0 for embed_dim), got %lld and %lld",
                 (long long)kdim, (long long)vdim);
        return NULL;
    }
    if (!(dropout >= 0 && dropout <= 1)) {
        ct_error(CT_ERROR_VALUE, OP, "dropout probability has to be between 0 and 1, but got %g", dropout);
        return NULL;
    }
    if (ct_nn_layer_dtype(OP, &dtype))
        return NULL;
    mha_ctx *x = ct_xcalloc(OP, 1, sizeof *x);
    if (!x)
        return NULL;
    ct_module *m = ct_module_new_multi(OP, mha_forward_multi, x, free);
    if (!m) {
        free(x);
        return NULL;
    }
    int64_t E = embed_dim;
    *x = (mha_ctx){.magic = MHA_CTX_MAGIC,
                   .embed_dim = E,
                   .num_heads = num_heads,
                   .kdim = kdim ? kdim : E,
                   .vdim = vdim ? vdim : E,
                   .dropout = dropout,
                   .batch_first = batch_first,
                   .add_zero_attn = add_zero_attn};
    x->qkv_same = x->kdim == E && x->vdim == E;
    /* parameters in PyTorch's order (state_dict keys), then _reset_parameters */
    ct_tensor *w[3] = {NULL, NULL, NULL}, *b = NULL, *bk = NULL, *bv = NULL;
    bool ok;
    if (x->qkv_same) {
        ok = (w[0] = ct_nn_new_param(m, "in_proj_weight", CT_SHAPE(3 * E, E), dtype)) != NULL;
    } else {
        ok = (w[0] = ct_nn_new_param(m, "q_proj_weight", CT_SHAPE(E, E), dtype)) &&
             (w[1] = ct_nn_new_param(m, "k_proj_weight", CT_SHAPE(E, x->kdim), dtype)) &&
             (w[2] = ct_nn_new_param(m, "v_proj_weight", CT_SHAPE(E, x->vdim), dtype));
    }
    if (ok && bias)
        ok = (b = ct_nn_new_param(m, "in_proj_bias", CT_SHAPE(3 * E), dtype)) != NULL;
    if (ok && add_bias_kv)
        ok = (bk = ct_nn_new_param(m, "bias_k", CT_SHAPE(1, 1, E), dtype)) &&
             (bv = ct_nn_new_param(m, "bias_v", CT_SHAPE(1, 1, E), dtype));
    ct_module *proj = ok ? out_proj_new(E, bias, dtype) : NULL;
    ok = proj && ct_module_add_child(m, "out_proj", proj) == CT_OK;
    ct_scope_begin();
    for (int i = 0; i < 3 && ok; i++)
        if (w[i])
            ok = ct_init_xavier_uniform_(w[i], 1.0) != NULL;
    if (ok && b)
        ok = ct_init_zeros_(b) && ct_init_zeros_(ct_module_param(proj, "bias"));
    if (ok && bk)
        ok = ct_init_xavier_normal_(bk, 1.0) && ct_init_xavier_normal_(bv, 1.0);
    ct_scope_end();
    if (!ok) {
        ct_module_free(m);
        return NULL;
    }
    return m;
}
