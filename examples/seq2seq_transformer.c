/* nn.Transformer on a toy task: copy a sequence of random tokens. The source goes
 * through the encoder; the decoder sees the target shifted right behind a BOS token,
 * under the causal mask, and learns to predict the next token (teacher forcing). A few
 * Adam steps on tiny shapes; the check: the loss falls. */
#include <ctorch.h>
#include <stdio.h>

enum { VOCAB = 10, BOS = 0, D_MODEL = 32, HEADS = 4, FFN = 64, LEN = 6, BATCH = 16, STEPS = 40 };

typedef struct seq2seq {
    ct_module *all; /* the parent of the modules below, for parameters() and free */
    ct_module *embed, *pos, *transformer, *generator;
} seq2seq;

static seq2seq seq2seq_new(void) {
    seq2seq s = {ct_module_new("Seq2Seq", NULL, NULL, NULL), ct_nn_embedding(VOCAB, D_MODEL, CT_NO_PADDING_IDX, CT_F32),
                 ct_nn_embedding(LEN, D_MODEL, CT_NO_PADDING_IDX, CT_F32),
                 ct_nn_transformer(D_MODEL, HEADS, 1, 1, FFN, 0.0, "relu", 1e-5, true /* batch_first */, false, true,
                                   CT_F32),
                 ct_nn_linear(D_MODEL, VOCAB, true, CT_F32)};
    ct_module_add_child(s.all, "embed", s.embed);
    ct_module_add_child(s.all, "pos", s.pos);
    ct_module_add_child(s.all, "transformer", s.transformer);
    ct_module_add_child(s.all, "generator", s.generator);
    return s;
}

/* tokens (B, T) -> embeddings plus learned positions (B, T, D_MODEL) */
static ct_tensor *embed(const seq2seq *s, const ct_tensor *tokens) {
    int64_t T = ct_tensor_size(tokens, 1);
    ct_tensor *pos = ct_arange(ct_scalar_int(0), ct_scalar_int(T), ct_scalar_int(1), CT_I64, CT_CPU);
    return ct_add(ct_module_forward(s->embed, tokens), ct_module_forward(s->pos, pos));
}

/* The cross-entropy of predicting tgt (B, T) from src, teacher-forced. */
static ct_tensor *loss_of(const seq2seq *s, const ct_tensor *src, const ct_tensor *tgt) {
    int64_t B = ct_tensor_size(tgt, 0), T = ct_tensor_size(tgt, 1);
    const ct_tensor *parts[2] = {ct_full(CT_SHAPE(B, 1), ct_scalar_int(BOS), CT_I64, CT_CPU),
                                 ct_narrow(tgt, 1, 0, T - 1)};
    ct_tensor *tgt_in = ct_cat(parts, 2, 1); /* BOS, y0, ..., y(T-2) */
    ct_tensor *causal = ct_nn_transformer_generate_square_subsequent_mask(T, CT_F32, CT_CPU);
    ct_tensor *h = ct_nn_transformer_forward(s->transformer, embed(s, src), embed(s, tgt_in), NULL, causal, NULL,
                                             NULL, NULL, NULL, false, true /* tgt_is_causal */, false);
    ct_tensor *logits = ct_module_forward(s->generator, h); /* (B, T, VOCAB) */
    return ct_cross_entropy(ct_reshape(logits, CT_SHAPE(B * T, VOCAB)), ct_reshape(tgt, CT_SHAPE(B * T)), NULL,
                            CT_REDUCTION_MEAN, CT_DEFAULT_IGNORE_INDEX, 0.0);
}

int main(void) {
    ct_manual_seed(0);
    seq2seq s = seq2seq_new();
    ct_tensor *params[128];
    int n = (int)ct_module_parameters(s.all, params, NULL, 128);
    ct_optim_options o = ct_adam_options(3e-3);
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_ADAM, params, n, &o);
    double first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        ct_scope_begin();
        ct_tensor *src = ct_randint(1, VOCAB, CT_SHAPE(BATCH, LEN), CT_I64, CT_CPU); /* never BOS */
        ct_tensor *loss = loss_of(&s, src, src); /* the target is the source: copy it */
        double v = 0;
        if (!loss || ct_optimizer_zero_grad(opt, true) || ct_backward(loss, NULL, false, false) ||
            ct_optimizer_step(opt) || ct_item_double(loss, &v)) {
            fprintf(stderr, "seq2seq_transformer: %s\n", ct_last_error());
            return 1;
        }
        if (step % 10 == 0 || step == STEPS - 1)
            printf("step %2d  loss %.4f\n", step, v);
        first = step == 0 ? v : first;
        last = v;
        ct_scope_end();
    }
    ct_optimizer_free(opt);
    ct_module_free(s.all);
    printf("loss %.4f -> %.4f: %s\n", first, last, last < 0.5 * first ? "falls" : "does NOT fall");
    return last < 0.5 * first ? 0 : 1;
}
