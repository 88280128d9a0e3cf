/* The model of `ctorch train char-gpt` and bench/train_char_gpt (src/cli/gpt.c): its
 * parameters are those of shared/bench/torch_peer.py's GPT, so that the benchmark
 * compares like with like.
 *
 * The reference counts and names come from PyTorch 1.13, once:
 *   exec(open("torch_peer.py").read().split("if __name__")[0])
 *   sum(p.numel() for p in GPT(65, 64, 4, 4, 128).parameters())    -> 809856
 *   sum(p.numel() for p in GPT(65, 256, 6, 6, 384).parameters())   -> 10770816
 *   [n for n, _ in GPT(65, 64, 4, 4, 128).named_parameters()]       -> 52 names,
 *     wte.weight, wpe.weight, blocks.0.ln1.weight, ... blocks.3.fc2.bias, lnf.weight,
 *     lnf.bias (the head is tied to wte and not listed again) */
#include <math.h>
#include <string.h>

#include "cli/gpt.h"
#include "testutil.h"

static const ct_char_gpt_config char_cpu = {.vocab = 65, .block = 64, .n_layer = 4, .n_head = 4, .n_embd = 128};

static void test_param_count_matches_pytorch(void **state) {
    (void)state;
    ct_char_gpt m;
    assert_int_equal(ct_char_gpt_init(&m, &char_cpu), CT_OK);
    assert_int_equal(ct_char_gpt_num_params(&m), 809856);
    assert_int_equal(ct_char_gpt_count_params(&char_cpu), 809856);
    assert_int_equal(m.nparams, 52);
    assert_string_equal(m.names[0], "wte.weight");
    assert_string_equal(m.names[1], "wpe.weight");
    assert_string_equal(m.names[2], "blocks.0.ln1.weight");
    assert_string_equal(m.names[49], "blocks.3.fc2.bias");
    assert_string_equal(m.names[50], "lnf.weight");
    assert_string_equal(m.names[51], "lnf.bias");
    ct_char_gpt_free(&m);
    /* the shakespeare preset, without building it */
    ct_char_gpt_config sh = {.vocab = 65, .block = 256, .n_layer = 6, .n_head = 6, .n_embd = 384, .dropout = 0.2};
    assert_int_equal(ct_char_gpt_count_params(&sh), 10770816);
}

/* Weight tying: the head's weight is wte's tensor, so its gradient collects both uses. */
static void test_forward_loss_and_tying(void **state) {
    (void)state;
    ct_manual_seed(3);
    ct_char_gpt_config c = {.vocab = 11, .block = 8, .n_layer = 2, .n_head = 2, .n_embd = 16, .gpt2_init = true};
    ct_char_gpt m;
    assert_int_equal(ct_char_gpt_init(&m, &c), CT_OK);
    ct_scope_begin();
    ct_tensor *x = ct_randint(0, 11, CT_SHAPE(3, 8), CT_I64, CT_CPU);
    ct_tensor *y = ct_randint(0, 11, CT_SHAPE(3, 8), CT_I64, CT_CPU);
    ct_tensor *logits = ct_char_gpt_forward(&m, x);
    CT_ASSERT_OK(logits);
    CT_ASSERT_SHAPE(logits, 3, 8, 11);
    ct_tensor *loss = ct_char_gpt_loss(&m, x, y);
    CT_ASSERT_OK(loss);
    double l = 0;
    assert_int_equal(ct_item_double(loss, &l), CT_OK);
    /* nanoGPT's initialisation starts near the uniform guess, ln(11) = 2.398 */
    assert_true(fabs(l - log(11.0)) < 0.3);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    ct_module *head = ct_module_child(m.root, "head"), *wte = ct_module_child(m.root, "wte");
    assert_ptr_equal(ct_module_param(head, "weight"), ct_module_param(wte, "weight"));
    for (int i = 0; i < m.nparams; i++)
        assert_non_null(ct_tensor_grad(m.params[i]));
    /* a shorter context than the block works; a longer one is refused */
    CT_ASSERT_SHAPE(ct_char_gpt_forward(&m, ct_narrow(x, 1, 0, 3)), 3, 3, 11);
    ct_tensor *too_long = ct_zeros(CT_SHAPE(1, 9), CT_I64, CT_CPU);
    CT_ASSERT_ERR(ct_char_gpt_forward(&m, too_long) != NULL, CT_ERROR_VALUE, "1 <= T <= 8");
    CT_ASSERT_ERR(ct_char_gpt_forward(&m, ct_zeros(CT_SHAPE(9), CT_I64, CT_CPU)) != NULL, CT_ERROR_VALUE, "(B, T)");
    ct_scope_end();
    ct_char_gpt_free(&m);
}

static void test_bad_config(void **state) {
    (void)state;
    ct_char_gpt m;
    ct_char_gpt_config c = char_cpu;
    c.n_head = 3;
    CT_ASSERT_ERR(ct_char_gpt_init(&m, &c) == CT_OK, CT_ERROR_VALUE, "multiple of the number of heads");
    assert_null(m.root);
    c = char_cpu;
    c.vocab = 0;
    CT_ASSERT_ERR(ct_char_gpt_init(&m, &c) == CT_OK, CT_ERROR_VALUE, "vocabulary");
    c = char_cpu;
    c.block = 0;
    CT_ASSERT_ERR(ct_char_gpt_init(&m, &c) == CT_OK, CT_ERROR_VALUE, "block size");
    c = char_cpu;
    c.n_layer = -1;
    CT_ASSERT_ERR(ct_char_gpt_init(&m, &c) == CT_OK, CT_ERROR_VALUE, "layers");
    c = char_cpu;
    c.dropout = 1.0;
    CT_ASSERT_ERR(ct_char_gpt_init(&m, &c) == CT_OK, CT_ERROR_VALUE, "dropout");
    c = char_cpu;
    c.n_embd = 1 << 20;
    CT_ASSERT_ERR(ct_char_gpt_init(&m, &c) == CT_OK, CT_ERROR_VALUE, "too large");
}

static double max_diff(const ct_tensor *a, const ct_tensor *b) {
    double d = -1;
    ct_item_double(ct_amax(ct_abs(ct_sub(a, b)), NULL, 0, false), &d);
    return d;
}

/* Dropout is active in training only: eval gives the same logits twice. */
static void test_dropout_train_eval(void **state) {
    (void)state;
    ct_manual_seed(5);
    ct_char_gpt_config c = {.vocab = 7, .block = 6, .n_layer = 1, .n_head = 2, .n_embd = 8, .dropout = 0.5};
    ct_char_gpt m;
    assert_int_equal(ct_char_gpt_init(&m, &c), CT_OK);
    ct_scope_begin();
    ct_tensor *x = ct_randint(0, 7, CT_SHAPE(2, 6), CT_I64, CT_CPU);
    ct_tensor *a = ct_char_gpt_forward(&m, x), *b = ct_char_gpt_forward(&m, x);
    CT_ASSERT_OK(a);
    CT_ASSERT_OK(b);
    assert_true(max_diff(a, b) > 1e-3);
    ct_char_gpt_train(&m, false);
    a = ct_char_gpt_forward(&m, x);
    b = ct_char_gpt_forward(&m, x);
    assert_true(max_diff(a, b) == 0);
    ct_scope_end();
    ct_char_gpt_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_param_count_matches_pytorch),
        cmocka_unit_test(test_forward_loss_and_tying),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_dropout_train_eval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
