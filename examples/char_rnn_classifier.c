/* An LSTM that reads a word one character at a time and tells which language it
 * looks like: character embeddings, an LSTM over the padded batch with each word's
 * length (PyTorch's pack_padded_sequence), and a linear layer on the final hidden
 * state. A few Adam steps on a dozen words; the check: the loss falls. */
#include <ctorch.h>
#include <stdio.h>
#include <string.h>

enum { CHARS = 27, EMBED = 16, HIDDEN = 32, CLASSES = 2, MAX_LEN = 8, STEPS = 30 };

static const char *const words[] = {"the",  "house", "water", "friend", "night", "bright", "world", "through",
                                    "casa", "acqua", "amico", "notte",  "luce",  "bella",  "mondo", "tutto"};
static const int64_t labels[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}; /* English, Italian */
#define N_WORDS ((int64_t)(sizeof words / sizeof *words))

typedef struct classifier {
    ct_module *all, *embed, *lstm, *head;
} classifier;

static classifier classifier_new(void) {
    classifier c = {ct_module_new("CharClassifier", NULL, NULL, NULL),
                    ct_nn_embedding(CHARS, EMBED, 0 /* padding_idx */, CT_F32),
                    ct_nn_lstm(EMBED, HIDDEN, 1, true, true /* batch_first */, 0.0, false, 0, CT_F32),
                    ct_nn_linear(HIDDEN, CLASSES, true, CT_F32)};
    ct_module_add_child(c.all, "embed", c.embed);
    ct_module_add_child(c.all, "lstm", c.lstm);
    ct_module_add_child(c.all, "head", c.head);
    return c;
}

/* chars (B, MAX_LEN) of 1..26 ('a'..'z') padded with 0, lengths (B) -> logits (B, CLASSES) */
static ct_tensor *classify(const classifier *c, const ct_tensor *chars, const ct_tensor *lengths) {
    ct_tensor *hn = NULL;
    if (ct_nn_lstm_forward(c->lstm, ct_module_forward(c->embed, chars), NULL, NULL, lengths, NULL, &hn, NULL))
        return NULL;
    return ct_module_forward(c->head, ct_select(hn, 0, 0)); /* hn (1, B, HIDDEN): layer 0 */
}

int main(void) {
    int64_t chars_v[N_WORDS][MAX_LEN], lengths_v[N_WORDS];
    memset(chars_v, 0, sizeof chars_v);
    for (int64_t i = 0; i < N_WORDS; i++) {
        lengths_v[i] = (int64_t)strlen(words[i]);
        for (int64_t j = 0; j < lengths_v[i]; j++)
            chars_v[i][j] = words[i][j] - 'a' + 1;
    }
    ct_manual_seed(0);
    classifier c = classifier_new();
    ct_tensor *params[16];
    int n = (int)ct_module_parameters(c.all, params, NULL, 16);
    ct_optim_options o = ct_adam_options(1e-2);
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_ADAM, params, n, &o);
    ct_scope_begin();
    ct_tensor *chars = ct_from_data(chars_v, CT_SHAPE(N_WORDS, MAX_LEN), CT_I64);
    ct_tensor *lengths = ct_from_data(lengths_v, CT_SHAPE(N_WORDS), CT_I64);
    ct_tensor *target = ct_from_data(labels, CT_SHAPE(N_WORDS), CT_I64);
    double first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        ct_scope_begin();
        ct_tensor *loss = ct_cross_entropy(classify(&c, chars, lengths), target, NULL, CT_REDUCTION_MEAN,
                                           CT_DEFAULT_IGNORE_INDEX, 0.0);
        double v = 0;
        if (!loss || ct_optimizer_zero_grad(opt, true) || ct_backward(loss, NULL, false, false) ||
            ct_optimizer_step(opt) || ct_item_double(loss, &v)) {
            fprintf(stderr, "char_rnn_classifier: %s\n", ct_last_error());
            return 1;
        }
        if (step % 10 == 0 || step == STEPS - 1)
            printf("step %2d  loss %.4f\n", step, v);
        first = step == 0 ? v : first;
        last = v;
        ct_scope_end();
    }
    ct_scope_end();
    ct_optimizer_free(opt);
    ct_module_free(c.all);
    printf("loss %.4f -> %.4f: %s\n", first, last, last < 0.5 * first ? "falls" : "does NOT fall");
    return last < 0.5 * first ? 0 : 1;
}
