/* The GPT block of nanoGPT (bench/torch_peer.py's Block): pre-norm causal
 * self-attention and a GELU MLP, each added back to the residual stream. */
#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/module_internal.h"

typedef struct block_ctx {
    int64_t n_head;
} block_ctx;

static ct_tensor *child(ct_module *m, const char *name, const ct_tensor *x) {
    return x ? ct_module_forward(ct_module_child(m, name), x) : NULL;
}

static ct_tensor *block_forward(ct_module *m, const ct_tensor *x) {
    if (ct_tensor_dim(x) != 3) {
        ct_error(CT_ERROR_VALUE, "GPTBlock", "expected input of shape (B, T, C), got %d dims", ct_tensor_dim(x));
        return NULL;
    }
    int64_t b = ct_tensor_size(x, 0), t = ct_tensor_size(x, 1), c = ct_tensor_size(x, 2);
    int64_t h = ((block_ctx *)ct_module_ctx(m))->n_head;
    ct_scope_begin();
    ct_tensor *qkv = child(m, "qkv", child(m, "ln1", x)); /* (B, T, 3C) */
    ct_tensor *heads[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3 && qkv; i++) /* (B, T, C) -> (B, H, T, C / H) */
        heads[i] = ct_transpose(ct_reshape(ct_narrow(qkv, 2, i * c, c), CT_SHAPE(b, t, h, c / h)), 1, 2);
    ct_tensor *y = heads[2] ? ct_scaled_dot_product_attention(heads[0], heads[1], heads[2], NULL, 0, true, NULL)
                            : NULL;
    y = y ? ct_reshape(ct_transpose(y, 1, 2), CT_SHAPE(b, t, c)) : NULL;
    ct_tensor *r = y ? ct_add(x, child(m, "proj", y)) : NULL;
    ct_tensor *mlp = child(m, "fc", child(m, "ln2", r));
    mlp = mlp ? ct_gelu(mlp, CT_GELU_APPROXIMATE_TANH) : NULL;
    r = mlp ? ct_add(r, child(m, "fc2", mlp)) : NULL;
    ct_keep(r);
    ct_scope_end();
    return r;
}

ct_module *ct_nn_gpt_block(int64_t d_model, int64_t n_head, ct_dtype dtype) {
    if (d_model <= 0 || n_head <= 0 || d_model % n_head) {
        ct_error(CT_ERROR_VALUE, "GPTBlock", "d_model (%lld) must be a positive multiple of n_head (%lld)",
                 (long long)d_model, (long long)n_head);
        return NULL;
    }
    if (ct_nn_layer_dtype("GPTBlock", &dtype))
        return NULL;
    ct_module *m = ct_nn_module_with_ctx("GPTBlock", block_forward, sizeof(block_ctx));
    if (!m)
        return NULL;
    ((block_ctx *)ct_module_ctx(m))->n_head = n_head;
    int64_t d = d_model;
    /* children in the reference's order, so state_dict keys line up */
    if (ct_module_add_child(m, "ln1", ct_nn_layer_norm(&d, 1, 1e-5, true, dtype)) ||
        ct_module_add_child(m, "ln2", ct_nn_layer_norm(&d, 1, 1e-5, true, dtype)) ||
        ct_module_add_child(m, "qkv", ct_nn_linear(d, 3 * d, true, dtype)) ||
        ct_module_add_child(m, "proj", ct_nn_linear(d, d, true, dtype)) ||
        ct_module_add_child(m, "fc", ct_nn_linear(d, 4 * d, true, dtype)) ||
        ct_module_add_child(m, "fc2", ct_nn_linear(4 * d, d, true, dtype))) {
        ct_module_free(m);
        return NULL;
    }
    return m;
}
