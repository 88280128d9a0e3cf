/* The character GPT of `ctorch train char-gpt` and bench/train_char_gpt: the model of
 * PyTorch's side in shared/bench/torch_peer.py (GPT, Block), with nanoGPT's dropout
 * placed where nanoGPT puts it when dropout > 0:
 *
 *   x = drop(wte(idx) + wpe(0..T-1))
 *   each block: x = x + drop(proj(attn(ln1(x))))           causal, attention dropout
 *               x = x + drop(fc2(gelu_tanh(fc(ln2(x)))))
 *   logits = head(lnf(x)), head.weight tied to wte.weight (no bias)
 *
 * Parameters (names as torch_peer's named_parameters()): wte.weight, wpe.weight,
 * blocks.<i>.{ln1,ln2,qkv,proj,fc,fc2}.{weight,bias}, lnf.weight, lnf.bias. */
#ifndef CT_CLI_GPT_H
#define CT_CLI_GPT_H

#include "ctorch.h"

typedef struct ct_char_gpt_config {
    int64_t vocab, block, n_layer, n_head, n_embd;
    double dropout;
    /* false: PyTorch's default initialisation (torch_peer's model as it is built);
     * true: nanoGPT's (weights N(0, 0.02), the residual projections proj and fc2
     * N(0, 0.02 / sqrt(2 * n_layer)), biases 0), which starts near loss ln(vocab) */
    bool gpt2_init;
} ct_char_gpt_config;

typedef struct ct_char_gpt {
    ct_char_gpt_config cfg;
    ct_module *root; /* children wte, wpe, blocks, lnf, head */
    ct_tensor **params; /* borrowed from root, each shared tensor once */
    char **names;       /* owned copies */
    int nparams;
} ct_char_gpt;

/* Checks the configuration and builds the model with PyTorch's default initialisation
 * (from ctorch's generator). On error nothing is left allocated. */
ct_status ct_char_gpt_init(ct_char_gpt *m, const ct_char_gpt_config *cfg);
void ct_char_gpt_free(ct_char_gpt *m);
/* Moves the parameters to device and, unless dtype is CT_DTYPE_UNDEFINED, converts
 * them to dtype (ct_module_to); m->params points at the moved tensors afterwards. */
ct_status ct_char_gpt_to(ct_char_gpt *m, ct_device device, ct_dtype dtype);
/* train(mode): dropout is active only in training. */
void ct_char_gpt_train(ct_char_gpt *m, bool training);
/* Number of parameter elements (tied weights counted once). */
int64_t ct_char_gpt_num_params(const ct_char_gpt *m);
/* The same number from the configuration alone. */
int64_t ct_char_gpt_count_params(const ct_char_gpt_config *cfg);
/* idx int64 (B, T) with T <= block -> logits (B, T, vocab). */
ct_tensor *ct_char_gpt_forward(const ct_char_gpt *m, const ct_tensor *idx);
/* Mean cross-entropy of the logits for idx against the int64 targets (B, T). */
ct_tensor *ct_char_gpt_loss(const ct_char_gpt *m, const ct_tensor *idx, const ct_tensor *targets);

#endif
