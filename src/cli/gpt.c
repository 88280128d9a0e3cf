#include "gpt.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/ext.h"

#define bad(msg, v) ct_error(CT_ERROR_VALUE, "char-gpt", msg, v)

static ct_status check_config(const ct_char_gpt_config *c) {
    if (c->vocab < 1)
        return bad("the vocabulary must have at least 1 character, got %lld", (long long)c->vocab);
    if (c->block < 1)
        return bad("block size must be >= 1, got %lld", (long long)c->block);
    if (c->n_layer < 1)
        return bad("layers must be >= 1, got %lld", (long long)c->n_layer);
    if (c->n_head < 1)
        return bad("heads must be >= 1, got %lld", (long long)c->n_head);
    if (c->n_embd < 1 || c->n_embd % c->n_head)
        return ct_error(CT_ERROR_VALUE, "char-gpt", "the embedding size (%lld) must be a positive multiple of the "
                        "number of heads (%lld)", (long long)c->n_embd, (long long)c->n_head);
    if (!(c->dropout >= 0 && c->dropout < 1))
        return ct_error(CT_ERROR_VALUE, "char-gpt", "dropout must be in [0, 1), got %g", c->dropout);
    /* keeps every count below in int64 with room to spare */
    if (c->vocab > (1 << 24) || c->block > (1 << 24) || c->n_layer > 4096 || c->n_embd > (1 << 16))
        return ct_error(CT_ERROR_VALUE, "char-gpt", "model too large");
    return CT_OK;
}

int64_t ct_char_gpt_count_params(const ct_char_gpt_config *c) {
    int64_t d = c->n_embd;
    int64_t block = 2 * (2 * d)          /* ln1, ln2 */
                    + (d * 3 * d + 3 * d) /* qkv */
                    + (d * d + d)         /* proj */
                    + (d * 4 * d + 4 * d) /* fc */
                    + (4 * d * d + d);    /* fc2 */
    return c->vocab * d + c->block * d + c->n_layer * block + 2 * d; /* head: tied to wte */
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* nanoGPT's _init_weights plus its scaled residual projections (GPT-2 paper). */
static ct_status gpt2_init(ct_char_gpt *m) {
    double proj_std = 0.02 / sqrt(2.0 * (double)m->cfg.n_layer);
    ct_scope_begin();
    bool ok = true;
    for (int i = 0; i < m->nparams && ok; i++) {
        const char *n = m->names[i];
        if (strstr(n, "ln") == n || strstr(n, ".ln") != NULL) /* layer norms keep ones/zeros */
            continue;
        if (ends_with(n, ".bias"))
            ok = ct_init_zeros_(m->params[i]) != NULL;
        else if (ends_with(n, "proj.weight") || ends_with(n, "fc2.weight"))
            ok = ct_init_normal_(m->params[i], 0, proj_std) != NULL;
        else
            ok = ct_init_normal_(m->params[i], 0, 0.02) != NULL;
    }
    ct_scope_end();
    return ok ? CT_OK : ct_last_status();
}

ct_status ct_char_gpt_init(ct_char_gpt *m, const ct_char_gpt_config *cfg) {
    *m = (ct_char_gpt){0};
    if (check_config(cfg))
        return ct_last_status();
    m->cfg = *cfg;
    ct_module *root = ct_module_new("GPT", NULL, NULL, NULL);
    if (!root)
        return ct_last_status();
    ct_module *blocks = NULL;
    int64_t d = cfg->n_embd;
    /* children in the reference's order, so state_dict keys line up */
    bool ok = !ct_module_add_child(root, "wte", ct_nn_embedding(cfg->vocab, d, CT_NO_PADDING_IDX, CT_F32)) &&
              !ct_module_add_child(root, "wpe", ct_nn_embedding(cfg->block, d, CT_NO_PADDING_IDX, CT_F32)) &&
              (blocks = ct_nn_module_list(NULL, 0)) != NULL && !ct_module_add_child(root, "blocks", blocks);
    for (int64_t i = 0; ok && i < cfg->n_layer; i++)
        ok = !ct_module_append(blocks, ct_nn_gpt_block(d, cfg->n_head, CT_F32));
    ok = ok && !ct_module_add_child(root, "lnf", ct_nn_layer_norm(&d, 1, 1e-5, true, CT_F32)) &&
         !ct_module_add_child(root, "head", ct_nn_linear(d, cfg->vocab, false, CT_F32)) &&
         !ct_module_set_param(ct_module_child(root, "head"), "weight",
                              ct_module_param(ct_module_child(root, "wte"), "weight"));
    int64_t n = ok ? ct_module_parameters(root, NULL, NULL, 0) : -1;
    if (ok && n > 0 && n < (1 << 20)) {
        m->params = calloc((size_t)n, sizeof *m->params);
        m->names = calloc((size_t)n, sizeof *m->names);
        const char **names = calloc((size_t)n, sizeof *names);
        m->root = root;
        if (m->params && m->names && names &&
            ct_module_parameters(root, m->params, names, n) == n) {
            m->nparams = (int)n;
            for (int64_t i = 0; i < n && ok; i++)
                ok = (m->names[i] = strdup(names[i])) != NULL;
            free(names);
            if (!ok)
                ct_error(CT_ERROR_OUT_OF_MEMORY, "char-gpt", "out of memory");
            else if (!cfg->gpt2_init || gpt2_init(m) == CT_OK)
                return CT_OK;
        } else {
            free(names);
            ct_error(CT_ERROR_OUT_OF_MEMORY, "char-gpt", "out of memory");
        }
        ct_status st = ct_last_status();
        ct_char_gpt_free(m);
        return st;
    }
    ct_status st = ct_last_status() ? ct_last_status() : CT_ERROR_VALUE;
    ct_module_free(root);
    return st;
}

ct_status ct_char_gpt_to(ct_char_gpt *m, ct_device device, ct_dtype dtype) {
    if (ct_module_to(m->root, device, dtype))
        return ct_last_status();
    /* the module holds new tensors now: the borrowed pointers are refreshed, in the same
     * order (the walk's order does not depend on where the tensors live) */
    const char **names = calloc((size_t)m->nparams, sizeof *names);
    if (!names)
        return ct_error(CT_ERROR_OUT_OF_MEMORY, "char-gpt", "out of memory");
    int64_t n = ct_module_parameters(m->root, m->params, names, m->nparams);
    free(names);
    return n == m->nparams ? CT_OK : ct_error(CT_ERROR_VALUE, "char-gpt", "the model changed while moving it");
}

void ct_char_gpt_free(ct_char_gpt *m) {
    ct_module_free(m->root);
    for (int i = 0; m->names && i < m->nparams; i++)
        free(m->names[i]);
    free(m->params);
    free(m->names);
    *m = (ct_char_gpt){0};
}

void ct_char_gpt_train(ct_char_gpt *m, bool training) {
    ct_module_train(m->root, training);
}

int64_t ct_char_gpt_num_params(const ct_char_gpt *m) {
    return ct_module_num_parameters(m->root);
}

static ct_tensor *fwd(const ct_module *parent, const char *name, const ct_tensor *x) {
    return x ? ct_module_forward(ct_module_child(parent, name), x) : NULL;
}

static ct_tensor *drop(const ct_char_gpt *m, ct_tensor *x) {
    return m->cfg.dropout > 0 && ct_module_is_training(m->root) ? ct_dropout(x, m->cfg.dropout, true) : x;
}

/* torch_peer's Block.forward (ct_nn_gpt_block's), with nanoGPT's dropouts. */
static ct_tensor *block(const ct_char_gpt *m, const ct_module *blk, ct_tensor *x) {
    int64_t b = ct_tensor_size(x, 0), t = ct_tensor_size(x, 1), c = m->cfg.n_embd, h = m->cfg.n_head;
    ct_tensor *qkv = fwd(blk, "qkv", fwd(blk, "ln1", x)); /* (B, T, 3C) */
    ct_tensor *heads[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3 && qkv; i++) /* (B, T, C) -> (B, H, T, C / H) */
        heads[i] = ct_transpose(ct_view(ct_narrow(qkv, 2, i * c, c), CT_SHAPE(b, t, h, c / h)), 1, 2);
    double p = ct_module_is_training(m->root) ? m->cfg.dropout : 0;
    ct_tensor *y = heads[2] ? ct_scaled_dot_product_attention(heads[0], heads[1], heads[2], NULL, p, true, NULL)
                            : NULL;
    y = y ? ct_reshape(ct_transpose(y, 1, 2), CT_SHAPE(b, t, c)) : NULL;
    ct_tensor *r = y ? ct_add(x, drop(m, fwd(blk, "proj", y))) : NULL;
    ct_tensor *x2 = r ? fwd(blk, "ln2", r) : NULL, *mlp;
    if (x2 && ct_tensor_device(x2).type == CT_DEVICE_CUDA) {
        /* fc, GELU and fc2 as one op, which recomputes the GELU's output in the backward
         * instead of keeping it (Note [GELU MLP]): GPT-2 B32's peak 15.2 to 12.9 GiB for
         * 1.4 ms of its 78 ms step on an H200. Host memory is rarely what limits a CPU
         * run, so there the GELU's output is kept. */
        mlp = ct_gelu_mlp(x2, ct_module_param(blk, "fc.weight"), ct_module_param(blk, "fc.bias"),
                          ct_module_param(blk, "fc2.weight"), ct_module_param(blk, "fc2.bias"),
                          CT_GELU_APPROXIMATE_TANH);
    } else {
        mlp = fwd(blk, "fc", x2);
        mlp = mlp ? fwd(blk, "fc2", ct_gelu(mlp, CT_GELU_APPROXIMATE_TANH)) : NULL;
    }
    return mlp ? ct_add(r, drop(m, mlp)) : NULL;
}

ct_tensor *ct_char_gpt_forward(const ct_char_gpt *m, const ct_tensor *idx) {
    if (!idx)
        return NULL;
    if (ct_tensor_dim(idx) != 2 || ct_tensor_size(idx, 1) < 1 || ct_tensor_size(idx, 1) > m->cfg.block) {
        ct_error(CT_ERROR_VALUE, "char-gpt", "expected token ids of shape (B, T) with 1 <= T <= %lld",
                 (long long)m->cfg.block);
        return NULL;
    }
    int64_t t = ct_tensor_size(idx, 1);
    ct_scope_begin();
    /* the position embeddings of 0 .. t-1 are wpe's first t rows: a view, the same
     * values and gradients as looking up arange(t), and nothing to copy from the host
     * (which a CUDA graph could not capture, docs/cuda-graphs.md) */
    ct_tensor *wpe = ct_module_param(m->root, "wpe.weight");
    if (!wpe)
        ct_error(CT_ERROR_RUNTIME, "char-gpt", "the model has no wpe.weight");
    ct_tensor *x = wpe ? ct_add(fwd(m->root, "wte", idx), ct_narrow(wpe, 0, 0, t)) : NULL;
    x = x ? drop(m, x) : NULL;
    ct_module *blocks = ct_module_child(m->root, "blocks");
    for (int64_t i = 0; i < m->cfg.n_layer && x; i++) {
        char name[24];
        snprintf(name, sizeof name, "%lld", (long long)i);
        /* a block's temporaries that its backward does not need (layer_norm's float32
         * output before autocast's cast, the projections' outputs) go at its end, not
         * at the forward's, so they are not all alive at the step's peak */
        ct_scope_begin();
        x = ct_keep(block(m, ct_module_child(blocks, name), x));
        ct_scope_end();
    }
    ct_tensor *logits = ct_keep(fwd(m->root, "head", fwd(m->root, "lnf", x)));
    ct_scope_end();
    return logits;
}

ct_tensor *ct_char_gpt_loss(const ct_char_gpt *m, const ct_tensor *idx, const ct_tensor *targets) {
    ct_scope_begin();
    ct_tensor *logits = ct_char_gpt_forward(m, idx);
    ct_tensor *loss = NULL;
    if (logits && targets) {
        int64_t n = ct_tensor_numel(idx);
        loss = ct_cross_entropy(ct_view(logits, CT_SHAPE(n, m->cfg.vocab)), ct_reshape(targets, CT_SHAPE(n)), NULL,
                                CT_REDUCTION_MEAN, CT_DEFAULT_IGNORE_INDEX, 0.0);
    }
    ct_keep(loss);
    ct_scope_end();
    return loss;
}
