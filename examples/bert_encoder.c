/* A MiniLM-style sentence encoder: BERT's embeddings (token + position, LayerNorm), a
 * stack of post-norm GELU Transformer encoder layers, and mean pooling over the real
 * tokens, normalised to unit length as sentence-transformers does. Random weights on
 * tiny shapes; the check: padding never changes a sentence's embedding. */
#include <ctorch.h>
#include <math.h>
#include <stdio.h>

enum { VOCAB = 100, HIDDEN = 32, HEADS = 4, FFN = 64, LAYERS = 2, MAX_LEN = 8 };

static ct_module *bert_new(void) {
    int64_t hidden = HIDDEN;
    ct_module *layer = ct_nn_transformer_encoder_layer(HIDDEN, HEADS, FFN, 0.1, "gelu", 1e-12,
                                                       true /* batch_first */, false, true, CT_F32);
    ct_module *bert = ct_module_new("MiniLM", NULL, NULL, NULL);
    ct_module_add_child(bert, "word_embeddings", ct_nn_embedding(VOCAB, HIDDEN, CT_NO_PADDING_IDX, CT_F32));
    ct_module_add_child(bert, "position_embeddings", ct_nn_embedding(MAX_LEN, HIDDEN, CT_NO_PADDING_IDX, CT_F32));
    ct_module_add_child(bert, "embeddings_norm", ct_nn_layer_norm(&hidden, 1, 1e-12, true, CT_F32));
    ct_module_add_child(bert, "encoder", ct_nn_transformer_encoder(layer, LAYERS, NULL));
    return bert;
}

/* ids (B, T) int64, pad (B, T) bool (true = padding) -> (B, HIDDEN) unit vectors. */
static ct_tensor *bert_encode(ct_module *bert, const ct_tensor *ids, const ct_tensor *pad) {
    int64_t T = ct_tensor_size(ids, 1);
    ct_tensor *pos = ct_arange(ct_scalar_int(0), ct_scalar_int(T), ct_scalar_int(1), CT_I64, CT_CPU);
    ct_tensor *x = ct_add(ct_module_forward(ct_module_child(bert, "word_embeddings"), ids),
                          ct_module_forward(ct_module_child(bert, "position_embeddings"), pos));
    x = ct_module_forward(ct_module_child(bert, "embeddings_norm"), x);
    x = ct_nn_transformer_encoder_forward(ct_module_child(bert, "encoder"), x, NULL, pad, false);
    /* mean pooling over the tokens that are not padding */
    ct_tensor *keep = ct_unsqueeze(ct_to_dtype(ct_logical_not(pad), CT_F32), -1); /* (B, T, 1) */
    ct_tensor *sum = ct_sum(ct_mul(x, keep), CT_SHAPE(1), false, CT_DTYPE_UNDEFINED);
    ct_tensor *mean = ct_div(sum, ct_sum(keep, CT_SHAPE(1), false, CT_DTYPE_UNDEFINED));
    return ct_normalize(mean, 2.0, 1, 1e-12);
}

int main(void) {
    ct_manual_seed(0);
    ct_scope_begin();
    ct_module *bert = bert_new();
    ct_module_train(bert, false); /* inference: no dropout */
    ct_set_grad_enabled(false);   /* and no graph (torch.no_grad()) */

    /* two sentences of 5 and 3 tokens, padded to 5 with token 0 */
    int64_t ids_v[2][5] = {{12, 7, 55, 3, 9}, {31, 8, 42, 0, 0}};
    bool pad_v[2][5] = {{false, false, false, false, false}, {false, false, false, true, true}};
    ct_tensor *ids = ct_from_data(ids_v, CT_SHAPE(2, 5), CT_I64);
    ct_tensor *pad = ct_from_data(pad_v, CT_SHAPE(2, 5), CT_BOOL);
    ct_tensor *emb = bert_encode(bert, ids, pad);

    /* the second sentence alone, unpadded, and padded with other tokens */
    int64_t alone_v[1][3] = {{31, 8, 42}}, other_v[1][5] = {{31, 8, 42, 77, 5}};
    bool none_v[1][3] = {{false, false, false}};
    ct_tensor *alone = bert_encode(bert, ct_from_data(alone_v, CT_SHAPE(1, 3), CT_I64),
                                   ct_from_data(none_v, CT_SHAPE(1, 3), CT_BOOL));
    ct_tensor *other = bert_encode(bert, ct_from_data(other_v, CT_SHAPE(1, 5), CT_I64), ct_narrow(pad, 0, 1, 1));
    if (!emb || !alone || !other) {
        fprintf(stderr, "bert_encoder: %s\n", ct_last_error());
        return 1;
    }
    ct_print(emb);
    bool same_alone = false, same_other = false;
    ct_allclose(ct_narrow(emb, 0, 1, 1), alone, 1e-5, 1e-6, false, &same_alone);
    ct_allclose(ct_narrow(emb, 0, 1, 1), other, 1e-5, 1e-6, false, &same_other);
    double norm = 0;
    ct_item_double(ct_linalg_vector_norm(ct_select(emb, 0, 0), 2.0, NULL, 0, false, CT_DTYPE_UNDEFINED), &norm);
    printf("padding-invariant: %s, unit norm: %.6f, parameters: %lld\n", same_alone && same_other ? "yes" : "NO",
           norm, (long long)ct_module_num_parameters(bert));
    ct_module_free(bert);
    ct_scope_end();
    return same_alone && same_other && fabs(norm - 1) < 1e-5 ? 0 : 1;
}
