/* The module API beyond one tensor in and out: forwards of several tensors (inside
 * Sequential too), iteration (named_modules / named_parameters / named_buffers / apply,
 * with shared modules and tied weights, against PyTorch's walks of the same tree),
 * printing (against PyTorch's repr), forward hooks, dotted registration mirroring a
 * state dict, loading a safetensors file with metadata strictly, dict key removal, and
 * the error inputs of all of it. Goldens: tests/golden/gen_module_api.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctorch/ext.h"
#include "nn/module_internal.h"
#include "testutil.h"

static ct_value *golden;

static int load_golden(void **state) {
    (void)state;
    FILE *f = fopen(CT_TEST_DATA_DIR "/module_api_golden.json", "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n);
    size_t got = text ? fread(text, 1, (size_t)n, f) : 0;
    fclose(f);
    golden = got == (size_t)n ? ct_value_from_json(text, (size_t)n, "module_api_golden.json") : NULL;
    free(text);
    return golden ? 0 : -1;
}

static int free_golden(void **state) {
    (void)state;
    ct_value_free(golden);
    return 0;
}

static ct_value *g(const char *section) {
    ct_value *v = ct_value_get(golden, section);
    assert_non_null(v);
    return v;
}

/* Frees m after checking that it prints as PyTorch printed the same module. */
static void expect_repr(ct_module *m, const char *key) {
    assert_non_null(m);
    char *s = ct_module_to_string(m);
    CT_ASSERT_OK(s);
    const char *want = ct_value_str(ct_value_get(g("reprs"), key), NULL);
    assert_non_null(want);
    if (strcmp(s, want))
        fail_msg("%s:\n%s\n!=\n%s", key, s, want);
    free(s);
    ct_module_free(m);
}

static ct_value *str_list(const char *const *names, int n) {
    ct_value *l = ct_value_new_list();
    for (int i = 0; i < n; i++)
        assert_int_equal(ct_value_append(l, ct_value_new_str(names[i])), CT_OK);
    return l;
}

/* ------------------------------------------------------------------ printing */

static void test_layer_reprs_match_pytorch(void **state) {
    (void)state;
    expect_repr(ct_nn_linear(4, 3, true, CT_F32), "linear");
    expect_repr(ct_nn_linear(4, 3, false, CT_F32), "linear_nobias");
    expect_repr(ct_nn_conv2d(1, 32, CT_INDEX(3, 3), NULL, NULL, NULL, 1, true, CT_F32), "conv2d");
    expect_repr(ct_nn_conv2d(6, 8, CT_INDEX(3, 2), CT_INDEX(2, 1), CT_INDEX(1, 0), CT_INDEX(2, 2), 2, false, CT_F32),
                "conv2d_full");
    expect_repr(ct_nn_batch_norm2d(3, 1e-5, 0.1, true, true, CT_F32), "batchnorm2d");
    expect_repr(ct_nn_batch_norm2d(3, 1e-3, 0.01, false, false, CT_F32), "batchnorm2d_plain");
    expect_repr(ct_nn_layer_norm(CT_INDEX(128), 1, 1e-5, true, CT_F32), "layernorm");
    expect_repr(ct_nn_layer_norm(CT_INDEX(4, 5), 2, 1e-6, false, CT_F32), "layernorm_2d");
    expect_repr(ct_nn_rms_norm(CT_INDEX(4), 1, -1, true, CT_F32), "rmsnorm");
    expect_repr(ct_nn_rms_norm(CT_INDEX(4, 5), 2, 1e-6, true, CT_F32), "rmsnorm_2d");
    expect_repr(ct_nn_embedding(65, 128, CT_NO_PADDING_IDX, CT_F32), "embedding");
    expect_repr(ct_nn_embedding(65, 128, -1, CT_F32), "embedding_pad");
    expect_repr(ct_nn_dropout(0.1), "dropout");
    expect_repr(ct_nn_relu(), "relu");
    expect_repr(ct_nn_tanh(), "tanh");
    expect_repr(ct_nn_gelu("none"), "gelu");
    expect_repr(ct_nn_gelu("tanh"), "gelu_tanh");
    expect_repr(ct_nn_flatten(1, -1), "flatten");
    expect_repr(ct_nn_flatten(0, 2), "flatten_02");
    expect_repr(ct_nn_max_pool2d(CT_INDEX(2, 2), NULL, NULL), "maxpool");
    expect_repr(ct_nn_max_pool2d(CT_INDEX(2, 3), NULL, CT_INDEX(1, 0)), "maxpool_rect");
    expect_repr(ct_nn_sequential(NULL, 0), "sequential_empty");
    expect_repr(ct_nn_module_list(NULL, 0), "module_list_empty");
    expect_repr(ct_nn_module_dict(NULL, NULL, 0), "module_dict_empty");
    ct_module *cnn[5] = {ct_nn_conv2d(1, 4, CT_INDEX(3, 3), NULL, CT_INDEX(1, 1), NULL, 1, true, CT_F32), ct_nn_relu(),
                         ct_nn_max_pool2d(CT_INDEX(2, 2), NULL, NULL), ct_nn_flatten(1, -1),
                         ct_nn_linear(36, 5, true, CT_F32)};
    expect_repr(ct_nn_sequential(cnn, 5), "sequential");
    ct_module *list[5] = {ct_nn_linear(2, 2, true, CT_F32), ct_nn_linear(2, 2, true, CT_F32),
                          ct_nn_linear(2, 2, true, CT_F32), ct_nn_relu(), ct_nn_linear(2, 2, true, CT_F32)};
    expect_repr(ct_nn_module_list(list, 5), "module_list");
    ct_module *dict[2] = {ct_nn_gelu("tanh"), ct_nn_linear(8, 8, true, CT_F32)};
    expect_repr(ct_nn_module_dict((const char *[]){"act", "proj"}, dict, 2), "module_dict");
}

static void test_float_repr_matches_python(void **state) {
    (void)state;
    ct_value *floats = g("floats");
    assert_true(ct_value_len(floats) > 10);
    for (int64_t i = 0; i < ct_value_len(floats); i++) {
        ct_value *pair = ct_value_at(floats, i);
        char buf[64];
        int n = ct_nn_float_repr(ct_value_float(ct_value_at(pair, 0)), buf, sizeof buf);
        assert_string_equal(buf, ct_value_str(ct_value_at(pair, 1), NULL));
        assert_int_equal(n, (int)strlen(buf));
    }
    char tiny[4];
    assert_int_equal(ct_nn_float_repr(0.3333, tiny, sizeof tiny), 6); /* snprintf's count, truncated text */
    assert_string_equal(tiny, "0.3");
}

/* extra_repr of a custom module: a long text, written over two calls, and several
 * lines, which put even a leaf's text on lines of its own. */
static int long_repr(const ct_module *m, char *buf, size_t cap) {
    (void)m;
    char text[400];
    memset(text, 'x', 399);
    text[399] = 0;
    return snprintf(buf, cap, "%s", text);
}
static int two_line_repr(const ct_module *m, char *buf, size_t cap) {
    (void)m;
    return snprintf(buf, cap, "first=1\nsecond=2");
}
static int failing_repr(const ct_module *m, char *buf, size_t cap) {
    (void)buf, (void)cap;
    return ct_error(CT_ERROR_VALUE, "Custom", "no repr for %s", ct_module_type(m)) ? -1 : 0;
}

static void test_custom_extra_repr(void **state) {
    (void)state;
    ct_module *m = ct_module_new("Custom", NULL, NULL, NULL);
    assert_int_equal(ct_module_set_extra_repr(m, long_repr), CT_OK);
    char *s = ct_module_to_string(m);
    assert_int_equal(strlen(s), strlen("Custom()") + 399);
    free(s);
    assert_int_equal(ct_module_set_extra_repr(m, two_line_repr), CT_OK);
    assert_int_equal(ct_module_add_child(m, "act", ct_nn_relu()), CT_OK);
    s = ct_module_to_string(m);
    assert_string_equal(s, "Custom(\n  first=1\n  second=2\n  (act): ReLU()\n)");
    free(s);
    /* a child's failure is the whole call's */
    ct_module *outer = ct_module_new("Outer", NULL, NULL, NULL);
    assert_int_equal(ct_module_add_child(outer, "inner", m), CT_OK);
    assert_int_equal(ct_module_set_extra_repr(m, failing_repr), CT_OK);
    CT_ASSERT_ERR(ct_module_to_string(outer) != NULL, CT_ERROR_VALUE, "no repr for Custom");
    assert_int_equal(ct_module_set_extra_repr(m, NULL), CT_OK);
    s = ct_module_to_string(outer);
    assert_string_equal(s, "Outer(\n  (inner): Custom(\n    (act): ReLU()\n  )\n)");
    free(s);
    CT_ASSERT_ERR(ct_module_to_string(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "module is NULL");
    CT_ASSERT_ERR(ct_module_set_extra_repr(NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "module is NULL");
    ct_module_free(outer);
}

/* ------------------------------------------------------------------ the tree of gen_module_api.py */

static ct_module *make_attn(void);

static ct_module *make_block(void) {
    ct_module *b = ct_module_new("Block", NULL, NULL, NULL);
    assert_int_equal(ct_module_add_child(b, "attn", make_attn()), CT_OK);
    assert_int_equal(ct_module_add_child(b, "norm", ct_nn_layer_norm(CT_INDEX(4), 1, 1e-5, true, CT_F32)), CT_OK);
    return b;
}

static ct_module *make_tree(void) {
    ct_module *t = ct_module_new("Tree", NULL, NULL, NULL);
    assert_int_equal(ct_module_add_child(t, "emb", ct_nn_embedding(10, 4, CT_NO_PADDING_IDX, CT_F32)), CT_OK);
    ct_scope_begin();
    assert_int_equal(ct_module_register_parameter(t, "scale", ct_ones(CT_SHAPE(4), CT_F32, CT_CPU)), CT_OK);
    ct_module *blocks[2] = {make_block(), make_block()};
    assert_int_equal(ct_module_add_child(t, "blocks", ct_nn_module_list(blocks, 2)), CT_OK);
    ct_module *shared = ct_nn_linear(4, 4, true, CT_F32);
    assert_int_equal(ct_module_add_child(t, "a", shared), CT_OK);
    assert_int_equal(ct_module_add_child(t, "b", ct_module_retain(shared)), CT_OK);
    assert_int_equal(ct_module_add_child(t, "bn", ct_nn_batch_norm2d(4, 1e-5, 0.1, true, true, CT_F32)), CT_OK);
    assert_int_equal(ct_module_add_child(t, "head", ct_nn_linear(4, 10, false, CT_F32)), CT_OK);
    assert_int_equal(ct_module_set_param(t, "head.weight", ct_module_param(t, "emb.weight")), CT_OK);
    ct_tensor *step = ct_zeros(NULL, 0, CT_I64, CT_CPU);
    assert_int_equal(ct_module_register_buffer(t, "step", step), CT_OK);
    assert_int_equal(ct_module_register_buffer(t, "step2", step), CT_OK);
    ct_scope_end();
    return t;
}

typedef struct recorded {
    ct_value *list; /* of [name, type] or [name, shape] pairs */
} recorded;

static int record_module(const char *name, ct_module *m, void *ud) {
    recorded *n = ud;
    ct_value *pair = ct_value_new_list();
    ct_value_append(pair, ct_value_new_str(name));
    ct_value_append(pair, ct_value_new_str(ct_module_type(m)));
    return ct_value_append(n->list, pair);
}

static int record_tensor(const char *name, ct_tensor *t, void *ud) {
    recorded *n = ud;
    ct_value *pair = ct_value_new_list(), *shape = ct_value_new_list();
    for (int d = 0; d < ct_tensor_dim(t); d++)
        ct_value_append(shape, ct_value_new_int(ct_tensor_size(t, d)));
    ct_value_append(pair, ct_value_new_str(name));
    ct_value_append(pair, shape);
    return ct_value_append(n->list, pair);
}

/* Compares two value trees of lists, strings and ints through their JSON. */
static void expect_same(const ct_value *got, const ct_value *want, const char *what) {
    char a[8192], b[8192];
    assert_true(ct_value_to_json(got, a, sizeof a) < (int64_t)sizeof a);
    assert_true(ct_value_to_json(want, b, sizeof b) < (int64_t)sizeof b);
    if (strcmp(a, b))
        fail_msg("%s:\n%s\n!=\n%s", what, a, b);
}

typedef struct applied {
    ct_module *root;
    ct_value *order;
    int calls, stop_at;
} applied;

typedef struct find_name {
    const ct_module *want;
    char name[128];
} find_name;

static int find_first_name(const char *name, ct_module *m, void *ud) {
    find_name *f = ud;
    if (m != f->want)
        return 0;
    snprintf(f->name, sizeof f->name, "%s", name);
    return -1; /* found: stop */
}

static int record_apply(ct_module *m, void *ud) {
    applied *a = ud;
    find_name f = {.want = m};
    assert_int_equal(ct_module_named_modules(a->root, find_first_name, &f), -1);
    a->calls++;
    if (a->stop_at && a->calls == a->stop_at)
        return 42;
    return ct_value_append(a->order, ct_value_new_str(f.name));
}

static void test_tree_walks_match_pytorch(void **state) {
    (void)state;
    ct_module *t = make_tree();
    ct_value *want = g("tree");

    recorded n = {ct_value_new_list()};
    assert_int_equal(ct_module_named_modules(t, record_module, &n), 0);
    expect_same(n.list, ct_value_get(want, "named_modules"), "named_modules");
    ct_value_free(n.list);

    ct_value *children = ct_value_new_list();
    assert_int_equal(ct_module_num_children(t), 6);
    for (int i = 0; i < ct_module_num_children(t); i++) {
        const char *name = NULL;
        assert_non_null(ct_module_child_at(t, i, &name));
        ct_value_append(children, ct_value_new_str(name));
    }
    expect_same(children, ct_value_get(want, "children"), "children");
    ct_value_free(children);
    const char *last;
    assert_ptr_equal(ct_module_child_at(t, -1, &last), ct_module_child(t, "head"));
    assert_string_equal(last, "head");
    assert_ptr_equal(ct_module_child_at(t, 2, NULL), ct_module_child_at(t, 3, NULL)); /* a and b: one module */

    n.list = ct_value_new_list();
    assert_int_equal(ct_module_named_parameters(t, record_tensor, &n), 0);
    expect_same(n.list, ct_value_get(want, "named_parameters"), "named_parameters");
    ct_value_free(n.list);
    n.list = ct_value_new_list();
    assert_int_equal(ct_module_named_buffers(t, record_tensor, &n), 0);
    expect_same(n.list, ct_value_get(want, "named_buffers"), "named_buffers");
    ct_value_free(n.list);

    /* state_dict lists shared modules and tied weights under every name */
    ct_value *sd = ct_module_state_dict(t), *keys = ct_value_new_list();
    for (int64_t i = 0; i < ct_value_len(sd); i++)
        ct_value_append(keys, ct_value_new_str(ct_value_str(ct_value_key_at(sd, i), NULL)));
    expect_same(keys, ct_value_get(want, "state_dict"), "state_dict");
    ct_value_free(keys);

    applied a = {t, ct_value_new_list(), 0, 0};
    assert_int_equal(ct_module_apply(t, record_apply, &a), 0);
    expect_same(a.order, ct_value_get(want, "apply"), "apply");
    ct_value_free(a.order);

    assert_int_equal(ct_module_num_parameters(t), ct_value_int(ct_value_get(want, "num_parameters")));
    assert_int_equal(ct_module_parameters(t, NULL, NULL, 0), 18);
    char *s = ct_module_to_string(t);
    assert_string_equal(s, ct_value_str(ct_value_get(want, "repr"), NULL));
    free(s);

    /* the state dict loads back strictly, shared and tied entries included */
    assert_int_equal(ct_module_load_state_dict(t, sd, true, NULL, NULL), CT_OK);
    ct_value_free(sd);
    ct_module_free(t);
}

static int stop_at_third(const char *name, ct_tensor *t, void *ud) {
    (void)name, (void)t;
    return ++*(int *)ud == 3 ? -7 : 0;
}

static int fail_on_norm(const char *name, ct_module *m, void *ud) {
    (void)ud;
    return strstr(name, "norm") ? ct_error(CT_ERROR_VALUE, "visit", "stopped at %s (%s)", name, ct_module_type(m)) : 0;
}

static void test_walks_stop_and_apply(void **state) {
    (void)state;
    ct_module *t = make_tree();
    int count = 0;
    assert_int_equal(ct_module_named_parameters(t, stop_at_third, &count), -7);
    assert_int_equal(count, 3);
    count = 0;
    assert_int_equal(ct_module_named_buffers(t, stop_at_third, &count), -7);
    CT_ASSERT_ERR(ct_module_named_modules(t, fail_on_norm, NULL) == 0, CT_ERROR_VALUE,
                  "stopped at blocks.0.norm (LayerNorm)");
    applied a = {t, ct_value_new_list(), 0, 3};
    assert_int_equal(ct_module_apply(t, record_apply, &a), 42); /* children first: stopped at blocks.0.attn */
    assert_int_equal(ct_value_len(a.order), 2);
    ct_value_free(a.order);
    CT_ASSERT_ERR(ct_module_named_modules(NULL, fail_on_norm, NULL) == 0, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_module_named_modules(t, NULL, NULL) == 0, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_module_named_parameters(NULL, stop_at_third, NULL) == 0, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_module_named_buffers(t, NULL, NULL) == 0, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_module_apply(NULL, record_apply, NULL) == 0, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_module_apply(t, NULL, NULL) == 0, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_module_num_children(NULL) >= 0, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_module_child_at(t, 6, NULL) != NULL, CT_ERROR_INDEX, "index 6 is out of range for Tree with 6");
    CT_ASSERT_ERR(ct_module_child_at(t, -7, NULL) != NULL, CT_ERROR_INDEX, "out of range");
    CT_ASSERT_ERR(ct_module_child_at(NULL, 0, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    /* names of any length */
    ct_module *deep = ct_module_new("Deep", NULL, NULL, NULL);
    char name[1400] = ""; /* 60 parts of 21 bytes, past every fixed buffer of the walks */
    for (int i = 0; i < 60; i++)
        strcat(name, i ? ".level_of_a_deep_tree" : "level_of_a_deep_tree");
    strcat(name, ".w");
    ct_scope_begin();
    assert_int_equal(ct_module_register_parameter(deep, name, ct_ones(CT_SHAPE(1), CT_F32, CT_CPU)), CT_OK);
    ct_scope_end();
    ct_value *sd = ct_module_state_dict(deep);
    assert_string_equal(ct_value_str(ct_value_key_at(sd, 0), NULL), name);
    ct_value_free(sd);
    assert_non_null(ct_module_param(deep, name));
    ct_module_free(deep);
    ct_module_free(t);
}

/* init through apply: what models do with module.apply(_init_weights) */
static int zero_linear_bias(ct_module *m, void *ud) {
    if (strcmp(ct_module_type(m), "Linear") || !ct_module_param(m, "bias"))
        return 0;
    ++*(int *)ud;
    ct_scope_begin();
    bool ok = ct_init_zeros_(ct_module_param(m, "bias")) != NULL;
    ct_scope_end();
    return ok ? 0 : ct_last_status();
}

static int sum_abs_bias(const char *name, ct_tensor *t, void *ud) {
    if (strstr(name, "bias") && !strstr(name, "norm") && !strstr(name, "bn"))
        for (int64_t i = 0; i < ct_tensor_numel(t); i++)
            *(double *)ud += fabs(ct_test_at(t, i));
    return 0;
}

static void test_apply_initialises(void **state) {
    (void)state;
    ct_module *t = make_tree();
    int linears = 0;
    assert_int_equal(ct_module_apply(t, zero_linear_bias, &linears), 0);
    assert_int_equal(linears, 5); /* q and kv twice, a (shared with b) once; head has no bias */
    double s = 0;
    assert_int_equal(ct_module_named_parameters(t, sum_abs_bias, &s), 0);
    assert_true(s == 0);
    ct_module_free(t);
}

/* The GPT of `ctorch train char-gpt`: its ModuleList of equal blocks folds. */
static void test_gpt_repr(void **state) {
    (void)state;
    ct_module *gpt = ct_module_new("GPT", NULL, NULL, NULL);
    int64_t d = 128;
    assert_int_equal(ct_module_add_child(gpt, "wte", ct_nn_embedding(65, d, CT_NO_PADDING_IDX, CT_F32)), CT_OK);
    assert_int_equal(ct_module_add_child(gpt, "wpe", ct_nn_embedding(64, d, CT_NO_PADDING_IDX, CT_F32)), CT_OK);
    ct_module *blocks = ct_nn_module_list(NULL, 0);
    assert_int_equal(ct_module_add_child(gpt, "blocks", blocks), CT_OK);
    for (int i = 0; i < 2; i++)
        assert_int_equal(ct_module_append(blocks, ct_nn_gpt_block(d, 4, CT_F32)), CT_OK);
    assert_int_equal(ct_module_add_child(gpt, "lnf", ct_nn_layer_norm(&d, 1, 1e-5, true, CT_F32)), CT_OK);
    assert_int_equal(ct_module_add_child(gpt, "head", ct_nn_linear(d, 65, false, CT_F32)), CT_OK);
    char *s = ct_module_to_string(gpt);
    assert_string_equal(s, ct_value_str(g("gpt"), NULL));
    free(s);
    /* a block that differs breaks the run */
    assert_int_equal(ct_module_append(blocks, ct_nn_relu()), CT_OK);
    s = ct_module_to_string(blocks);
    assert_non_null(strstr(s, "(0-1): 2 x GPTBlock(\n    (ln1)"));
    assert_non_null(strstr(s, "\n  (2): ReLU()\n)"));
    free(s);
    ct_module_free(gpt);
}

/* ------------------------------------------------------------------ forwards of several tensors */

/* Attn: forward(x, mask=None) -> softmax(q k^T / 2 + mask) v over x (T, 4), with k
 * and v the halves of kv(x). */
static ct_status attn_forward(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int cap, int *nout) {
    (void)cap;
    if (nin < 1 || nin > 2)
        return ct_error(CT_ERROR_VALUE, "Attn", "takes x and an optional mask, got %d inputs", nin);
    ct_tensor *q = ct_module_forward(ct_module_child(m, "q"), in[0]);
    ct_tensor *kv = ct_module_forward(ct_module_child(m, "kv"), in[0]);
    ct_tensor *y = kv ? ct_scaled_dot_product_attention(q, ct_narrow(kv, -1, 0, 4), ct_narrow(kv, -1, 4, 4),
                                                        nin > 1 ? in[1] : NULL, 0, false, NULL)
                      : NULL;
    if (!y)
        return ct_last_status();
    out[0] = y;
    *nout = 1;
    return CT_OK;
}

static ct_module *make_attn(void) {
    ct_module *m = ct_module_new_multi("Attn", attn_forward, NULL, NULL);
    assert_int_equal(ct_module_add_child(m, "q", ct_nn_linear(4, 4, true, CT_F32)), CT_OK);
    assert_int_equal(ct_module_add_child(m, "kv", ct_nn_linear(4, 8, true, CT_F32)), CT_OK);
    ct_scope_begin();
    assert_int_equal(ct_module_register_buffer(m, "mask", ct_ones(CT_SHAPE(3, 3), CT_F32, CT_CPU)), CT_OK);
    ct_scope_end();
    return m;
}

static void expect_close(const ct_tensor *a, const ct_tensor *b) {
    CT_ASSERT_OK(a);
    CT_ASSERT_OK(b);
    bool close = false;
    assert_int_equal(ct_allclose(a, b, 1e-6, 1e-7, false, &close), CT_OK);
    assert_true(close);
}

static void test_two_input_module_in_sequential(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(7);
    ct_module *attn = make_attn(), *proj = ct_nn_linear(4, 2, true, CT_F32);
    ct_module *seq = ct_nn_sequential((ct_module *[]){attn, proj}, 2);
    assert_non_null(seq);
    ct_tensor *x = ct_randn(CT_SHAPE(3, 4), CT_F32, CT_CPU);
    ct_tensor *mask = ct_mul_scalar(ct_triu(ct_ones(CT_SHAPE(3, 3), CT_F32, CT_CPU), 1), ct_scalar_float(-1e9));
    const ct_tensor *in[2] = {x, mask};
    ct_tensor *out[4] = {NULL};
    int nout = -1;
    assert_int_equal(ct_module_forward_multi(seq, in, 2, out, 4, &nout), CT_OK);
    assert_int_equal(nout, 1);
    /* by hand */
    ct_tensor *kv = ct_module_forward(ct_module_child(attn, "kv"), x);
    ct_tensor *y =
        ct_scaled_dot_product_attention(ct_module_forward(ct_module_child(attn, "q"), x), ct_narrow(kv, -1, 0, 4),
                                        ct_narrow(kv, -1, 4, 4), mask, 0, false, NULL);
    expect_close(out[0], ct_module_forward(proj, y));
    /* one input: the mask is left off, and ct_module_forward reaches the multi module */
    ct_tensor *y1 = ct_module_forward(seq, x);
    ct_tensor *ref =
        ct_scaled_dot_product_attention(ct_module_forward(ct_module_child(attn, "q"), x), ct_narrow(kv, -1, 0, 4),
                                        ct_narrow(kv, -1, 4, 4), NULL, 0, false, NULL);
    expect_close(y1, ct_module_forward(proj, ref));
    /* the module's own error, through Sequential */
    const ct_tensor *three[3] = {x, mask, mask};
    CT_ASSERT_ERR(ct_module_forward_multi(seq, three, 3, out, 4, &nout) == CT_OK, CT_ERROR_VALUE,
                  "takes x and an optional mask, got 3 inputs");
    assert_int_equal(nout, 0);
    ct_module_free(seq);
    ct_scope_end();
}

/* Cell: forward(x, h=0) -> (output, hidden) with hidden = tanh(lin(x) + h) and
 * output = 2 * hidden, an RNN cell's shape of results. */
static ct_status cell_forward(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int cap, int *nout) {
    if (nin < 1 || nin > 2)
        return ct_error(CT_ERROR_VALUE, "Cell", "takes x and an optional h, got %d inputs", nin);
    if (cap < 2)
        return ct_error(CT_ERROR_VALUE, "Cell", "room for %d outputs", cap); /* never: cap >= CT_MODULE_IO_CAP */
    ct_tensor *z = ct_module_forward(ct_module_child(m, "lin"), in[0]);
    ct_tensor *h = nin > 1 ? ct_tanh(ct_add(z, in[1])) : ct_tanh(z);
    ct_tensor *o = ct_mul_scalar(h, ct_scalar_float(2));
    if (!o)
        return ct_last_status();
    out[0] = o;
    out[1] = h;
    *nout = 2;
    return CT_OK;
}

static ct_module *make_cell(void) {
    ct_module *m = ct_module_new_multi("Cell", cell_forward, NULL, NULL);
    assert_int_equal(ct_module_add_child(m, "lin", ct_nn_linear(3, 3, true, CT_F32)), CT_OK);
    return m;
}

static void test_output_and_hidden(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(8);
    ct_module *c1 = make_cell(), *c2 = make_cell();
    ct_module *seq = ct_nn_sequential((ct_module *[]){c1, c2}, 2);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 3), CT_F32, CT_CPU), *h0 = ct_randn(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    ct_tensor *out[2];
    int nout;
    assert_int_equal(ct_module_forward_multi(seq, (const ct_tensor *[]){x, h0}, 2, out, 2, &nout), CT_OK);
    assert_int_equal(nout, 2);
    /* by hand: the second cell gets (output, hidden) of the first */
    ct_tensor *h1 = ct_tanh(ct_add(ct_module_forward(ct_module_child(c1, "lin"), x), h0));
    ct_tensor *h2 =
        ct_tanh(ct_add(ct_module_forward(ct_module_child(c2, "lin"), ct_mul_scalar(h1, ct_scalar_float(2))), h1));
    expect_close(out[1], h2);
    expect_close(out[0], ct_mul_scalar(h2, ct_scalar_float(2)));
    /* the one-tensor call gives the first output */
    ct_tensor *o = ct_module_forward(c1, x);
    expect_close(o, ct_mul_scalar(ct_tanh(ct_module_forward(ct_module_child(c1, "lin"), x)), ct_scalar_float(2)));
    /* more outputs than out has room for */
    CT_ASSERT_ERR(ct_module_forward_multi(c1, (const ct_tensor *[]){x}, 1, out, 1, &nout) == CT_OK, CT_ERROR_VALUE,
                  "Cell.forward: returned 2 outputs, but out has room for 1");
    assert_int_equal(nout, 0);
    CT_ASSERT_ERR(ct_module_forward_multi(c1, (const ct_tensor *[]){x}, 1, NULL, 0, &nout) == CT_OK, CT_ERROR_VALUE,
                  "room for 0");
    /* a one-tensor module through the multi call */
    ct_module *lin = ct_module_child(c1, "lin");
    assert_int_equal(ct_module_forward_multi(lin, (const ct_tensor *[]){x}, 1, out, 2, &nout), CT_OK);
    assert_int_equal(nout, 1);
    expect_close(out[0], ct_module_forward(lin, x));
    CT_ASSERT_ERR(ct_module_forward_multi(lin, (const ct_tensor *[]){x, h0}, 2, out, 2, &nout) == CT_OK, CT_ERROR_VALUE,
                  "Linear.forward: takes 1 input (a one-tensor forward), but 2 were given");
    CT_ASSERT_ERR(ct_module_forward_multi(lin, NULL, 0, out, 2, &nout) == CT_OK, CT_ERROR_VALUE, "but 0 were given");
    /* an empty Sequential hands its inputs back */
    ct_module *empty = ct_nn_sequential(NULL, 0);
    assert_int_equal(ct_module_forward_multi(empty, (const ct_tensor *[]){x, h0}, 2, out, 2, &nout), CT_OK);
    assert_int_equal(nout, 2);
    assert_ptr_equal(out[0], x);
    assert_ptr_equal(out[1], h0);
    assert_ptr_equal(ct_module_forward(empty, x), x);
    CT_ASSERT_ERR(ct_module_forward_multi(empty, (const ct_tensor *[]){x, h0}, 2, out, 1, &nout) == CT_OK,
                  CT_ERROR_VALUE, "room for 1");
    ct_module_free(empty);
    ct_module_free(seq);
    ct_scope_end();
}

/* A forward that returns no output, one that hands back too many, one that fails. */
static ct_status nothing_forward(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int cap,
                                 int *nout) {
    (void)m, (void)in, (void)nin, (void)out, (void)cap;
    *nout = 0;
    return CT_OK;
}
static ct_status many_forward(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int cap, int *nout) {
    (void)m, (void)nin;
    if (cap < 20)
        return ct_error(CT_ERROR_VALUE, "Many", "needs room for 20 outputs, has %d", cap);
    for (int i = 0; i < 20; i++)
        out[i] = ct_tensor_ref(in[0]);
    *nout = 20;
    return CT_OK;
}
static ct_tensor *null_forward(ct_module *m, const ct_tensor *x) {
    (void)m, (void)x;
    return NULL; /* without an error: a bug the call reports */
}

static void test_forward_error_inputs(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_ones(CT_SHAPE(2), CT_F32, CT_CPU), *out[32];
    int nout = 5;
    ct_module *none = ct_module_new_multi("Nothing", nothing_forward, NULL, NULL);
    assert_int_equal(ct_module_forward_multi(none, (const ct_tensor *[]){x}, 1, out, 4, &nout), CT_OK);
    assert_int_equal(nout, 0);
    CT_ASSERT_ERR(ct_module_forward(none, x) != NULL, CT_ERROR_VALUE, "Nothing.forward: returned no outputs");
    ct_module *many = ct_module_new_multi("Many", many_forward, NULL, NULL);
    assert_int_equal(ct_module_forward_multi(many, (const ct_tensor *[]){x}, 1, out, 32, &nout), CT_OK);
    assert_int_equal(nout, 20);
    CT_ASSERT_ERR(ct_module_forward_multi(many, (const ct_tensor *[]){x}, 1, out, 8, &nout) == CT_OK, CT_ERROR_VALUE,
                  "needs room for 20 outputs, has 16");
    /* between layers of a Sequential there is room for CT_MODULE_IO_CAP */
    ct_module *seq = ct_nn_sequential((ct_module *[]){many, ct_nn_sequential(NULL, 0)}, 2);
    CT_ASSERT_ERR(ct_module_forward_multi(seq, (const ct_tensor *[]){x}, 1, out, 32, &nout) == CT_OK, CT_ERROR_VALUE,
                  "needs room for 20 outputs, has 16");
    ct_module *bad = ct_module_new("Bad", null_forward, NULL, NULL);
    ct_clear_error();
    CT_ASSERT_ERR(ct_module_forward_multi(bad, (const ct_tensor *[]){x}, 1, out, 1, &nout) == CT_OK, CT_ERROR_RUNTIME,
                  "Bad.forward: forward failed without setting an error");
    /* NULL inputs: a failed op's NULL keeps its error */
    CT_ASSERT_ERR(ct_module_forward_multi(none, (const ct_tensor *[]){x, NULL}, 2, out, 4, &nout) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "Nothing.forward: input 1 is NULL");
    const ct_tensor *failed = ct_view(x, CT_SHAPE(3));
    CT_ASSERT_ERR(ct_module_forward_multi(none, &failed, 1, out, 4, &nout) == CT_OK, CT_ERROR_VALUE, "view");
    CT_ASSERT_ERR(ct_module_forward(none, ct_view(x, CT_SHAPE(3))) != NULL, CT_ERROR_VALUE, "view");
    CT_ASSERT_ERR(ct_module_forward_multi(NULL, &failed, 1, out, 4, &nout) == CT_OK, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_module_forward_multi(none, NULL, 1, out, 4, &nout) == CT_OK, CT_ERROR_NULL_ARGUMENT, "in");
    CT_ASSERT_ERR(ct_module_forward_multi(none, (const ct_tensor *[]){x}, 1, NULL, 4, &nout) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "out");
    CT_ASSERT_ERR(ct_module_forward_multi(none, (const ct_tensor *[]){x}, 1, out, 4, NULL) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "nout");
    CT_ASSERT_ERR(ct_module_forward_multi(none, (const ct_tensor *[]){x}, -1, out, 4, &nout) == CT_OK, CT_ERROR_VALUE,
                  "non-negative");
    CT_ASSERT_ERR(ct_module_forward_multi(none, (const ct_tensor *[]){x}, 1, out, -4, &nout) == CT_OK, CT_ERROR_VALUE,
                  "non-negative");
    ct_module *container = ct_nn_module_list(NULL, 0);
    CT_ASSERT_ERR(ct_module_forward_multi(container, (const ct_tensor *[]){x}, 1, out, 4, &nout) == CT_OK,
                  CT_ERROR_NOT_IMPLEMENTED, "Module [ModuleList] is missing the required \"forward\" function");
    ct_module_free(container);
    ct_module_free(bad);
    ct_module_free(seq);
    ct_module_free(none);
    ct_scope_end();
}

/* ------------------------------------------------------------------ hooks */

typedef struct hook_log {
    char order[64];
    ct_module *m;
    int64_t self_id; /* the id of a hook that removes itself */
} hook_log;

static void log_step(hook_log *l, char c) {
    size_t n = strlen(l->order);
    l->order[n] = c;
    l->order[n + 1] = 0;
}

static ct_status pre_a(ct_module *m, const ct_tensor **in, int *nin, int cap, void *ud) {
    (void)m, (void)in, (void)nin, (void)cap;
    log_step(ud, 'a');
    return CT_OK;
}
static ct_status pre_double(ct_module *m, const ct_tensor **in, int *nin, int cap, void *ud) {
    (void)m, (void)cap;
    log_step(ud, 'd');
    for (int i = 0; i < *nin; i++)
        in[i] = ct_mul_scalar(in[i], ct_scalar_float(2));
    return CT_OK;
}
static ct_status post_plus_one(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int *nout, int cap,
                               void *ud) {
    (void)m, (void)in, (void)nin, (void)cap;
    log_step(ud, 'p');
    out[0] = ct_add_scalar(out[0], ct_scalar_float(1));
    (void)nout;
    return out[0] ? CT_OK : ct_last_status();
}
/* appends the (possibly replaced) first input to the outputs */
static ct_status post_append_input(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int *nout,
                                   int cap, void *ud) {
    (void)m, (void)nin;
    log_step(ud, 'i');
    if (*nout >= cap)
        return ct_error(CT_ERROR_VALUE, "hook", "no room");
    out[(*nout)++] = ct_tensor_ref(in[0]);
    return CT_OK;
}
static ct_status post_once(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int *nout, int cap,
                           void *ud) {
    (void)in, (void)nin, (void)out, (void)nout, (void)cap;
    hook_log *l = ud;
    log_step(l, 'o');
    return ct_module_remove_hook(m, l->self_id);
}
static ct_status post_fail(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int *nout, int cap,
                           void *ud) {
    (void)in, (void)nin, (void)out, (void)nout, (void)cap, (void)ud;
    return ct_error(CT_ERROR_VALUE, "hook", "refused by a hook of %s", ct_module_type(m));
}
static ct_status pre_null(ct_module *m, const ct_tensor **in, int *nin, int cap, void *ud) {
    (void)m, (void)cap, (void)ud;
    in[*nin - 1] = NULL;
    return CT_OK;
}
static ct_status pre_overflow(ct_module *m, const ct_tensor **in, int *nin, int cap, void *ud) {
    (void)m, (void)in, (void)ud;
    *nin = cap + 1;
    return CT_OK;
}
/* adds a mask input to a call that came without one */
static ct_status pre_add_mask(ct_module *m, const ct_tensor **in, int *nin, int cap, void *ud) {
    (void)m, (void)cap;
    log_step(ud, 'm');
    if (*nin == 1)
        in[(*nin)++] = ct_zeros(CT_SHAPE(3, 3), CT_F32, CT_CPU);
    return CT_OK;
}

static void test_hooks(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(9);
    ct_module *lin = ct_nn_linear(3, 2, true, CT_F32);
    ct_tensor *x = ct_randn(CT_SHAPE(4, 3), CT_F32, CT_CPU), *out[4];
    ct_tensor *plain = ct_module_forward(lin, x);
    hook_log log = {.m = lin};
    /* order: pre-hooks in registration order, forward, hooks in registration order */
    int64_t p = ct_module_register_forward_hook(lin, post_plus_one, &log);
    int64_t a = ct_module_register_forward_pre_hook(lin, pre_a, &log);
    int64_t d = ct_module_register_forward_pre_hook(lin, pre_double, &log);
    assert_true(p > 0 && a > 0 && d > 0 && p != a && a != d);
    ct_tensor *y = ct_module_forward(lin, x);
    assert_string_equal(log.order, "adp");
    /* the doubled input reached forward, the hook's output replaced forward's */
    ct_tensor *w = ct_module_param(lin, "weight"), *b = ct_module_param(lin, "bias");
    expect_close(y, ct_add_scalar(ct_linear(ct_mul_scalar(x, ct_scalar_float(2)), w, b), ct_scalar_float(1)));
    /* a hook that adds an output: the multi call sees it, the one-tensor call drops it */
    log.order[0] = 0;
    int64_t i = ct_module_register_forward_hook(lin, post_append_input, &log);
    int nout;
    assert_int_equal(ct_module_forward_multi(lin, (const ct_tensor *[]){x}, 1, out, 4, &nout), CT_OK);
    assert_int_equal(nout, 2);
    expect_close(out[1], ct_mul_scalar(x, ct_scalar_float(2))); /* the input as the pre-hooks left it */
    assert_string_equal(log.order, "adpi");
    CT_ASSERT_ERR(ct_module_forward_multi(lin, (const ct_tensor *[]){x}, 1, out, 1, &nout) == CT_OK, CT_ERROR_VALUE,
                  "returned 2 outputs, but out has room for 1");
    CT_ASSERT_OK(ct_module_forward(lin, x));
    /* removal */
    assert_int_equal(ct_module_remove_hook(lin, d), CT_OK);
    assert_int_equal(ct_module_remove_hook(lin, p), CT_OK);
    assert_int_equal(ct_module_remove_hook(lin, i), CT_OK);
    log.order[0] = 0;
    expect_close(ct_module_forward(lin, x), plain);
    assert_string_equal(log.order, "a");
    CT_ASSERT_ERR(ct_module_remove_hook(lin, d) == CT_OK, CT_ERROR_VALUE, "Linear has no hook with id");
    CT_ASSERT_ERR(ct_module_remove_hook(lin, 0) == CT_OK, CT_ERROR_VALUE, "no hook with id 0");
    CT_ASSERT_ERR(ct_module_remove_hook(NULL, a) == CT_OK, CT_ERROR_NULL_ARGUMENT, "");
    assert_int_equal(ct_module_remove_hook(lin, a), CT_OK);
    /* a hook that removes itself runs once; the hooks after it in that call still run */
    log.order[0] = 0;
    log.self_id = ct_module_register_forward_hook(lin, post_once, &log);
    ct_module_register_forward_pre_hook(lin, pre_a, &log);
    int64_t last = ct_module_register_forward_hook(lin, post_plus_one, &log);
    CT_ASSERT_OK(ct_module_forward(lin, x));
    CT_ASSERT_OK(ct_module_forward(lin, x));
    assert_string_equal(log.order, "aopap");
    /* a failing hook fails the call */
    int64_t f = ct_module_register_forward_hook(lin, post_fail, &log);
    CT_ASSERT_ERR(ct_module_forward(lin, x) != NULL, CT_ERROR_VALUE, "refused by a hook of Linear");
    assert_int_equal(ct_module_remove_hook(lin, f), CT_OK);
    assert_int_equal(ct_module_remove_hook(lin, last), CT_OK);
    /* hooks that break the rules */
    int64_t bad = ct_module_register_forward_pre_hook(lin, pre_null, NULL);
    CT_ASSERT_ERR(ct_module_forward(lin, x) != NULL, CT_ERROR_RUNTIME, "left input 0 NULL");
    assert_int_equal(ct_module_remove_hook(lin, bad), CT_OK);
    bad = ct_module_register_forward_pre_hook(lin, pre_overflow, NULL);
    CT_ASSERT_ERR(ct_module_forward(lin, x) != NULL, CT_ERROR_RUNTIME, "reported 17 inputs, with room for 16");
    assert_int_equal(ct_module_remove_hook(lin, bad), CT_OK);
    CT_ASSERT_ERR(ct_module_register_forward_hook(lin, NULL, NULL) > 0, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_module_register_forward_pre_hook(NULL, pre_a, NULL) > 0, CT_ERROR_NULL_ARGUMENT, "");
    ct_module_free(lin);
    ct_scope_end();
}

static void test_hooks_on_multi_modules_and_children(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(10);
    ct_module *attn = make_attn(), *proj = ct_nn_linear(4, 2, true, CT_F32);
    ct_module *seq = ct_nn_sequential((ct_module *[]){attn, proj}, 2);
    ct_tensor *x = ct_randn(CT_SHAPE(3, 4), CT_F32, CT_CPU);
    ct_tensor *no_mask = ct_module_forward(seq, x);
    hook_log log = {0};
    /* a child's hooks run when the Sequential runs it: a zero mask added by a
     * pre-hook changes nothing, and the child's forward hook sees the result */
    assert_true(ct_module_register_forward_pre_hook(attn, pre_add_mask, &log) > 0);
    assert_true(ct_module_register_forward_hook(proj, post_plus_one, &log) > 0);
    ct_tensor *y = ct_module_forward(seq, x);
    assert_string_equal(log.order, "mp");
    expect_close(y, ct_add_scalar(no_mask, ct_scalar_float(1)));
    /* hooks on the Sequential itself wrap the whole chain */
    assert_true(ct_module_register_forward_pre_hook(seq, pre_a, &log) > 0);
    assert_true(ct_module_register_forward_hook(seq, post_append_input, &log) > 0);
    ct_tensor *out[4];
    int nout;
    log.order[0] = 0;
    assert_int_equal(ct_module_forward_multi(seq, (const ct_tensor *[]){x}, 1, out, 4, &nout), CT_OK);
    assert_int_equal(nout, 2);
    assert_string_equal(log.order, "ampi");
    assert_ptr_equal(out[1], x);
    ct_module_free(seq);
    ct_scope_end();
}

/* ------------------------------------------------------------------ dotted names, state dict files */

static char tmpdir[64];

static int make_tmpdir(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ct_modapi_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static void tmp_path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", tmpdir, name); }

/* A few keys of a Hugging Face BERT checkpoint, with their shapes. */
static const struct {
    const char *name;
    int64_t shape[2];
    int nd;
} hf_keys[] = {
    {"embeddings.word_embeddings.weight", {30, 8}, 2},
    {"embeddings.LayerNorm.weight", {8}, 1},
    {"embeddings.LayerNorm.bias", {8}, 1},
    {"encoder.layer.0.attention.self.query.weight", {8, 8}, 2},
    {"encoder.layer.0.attention.self.query.bias", {8}, 1},
    {"encoder.layer.0.attention.output.dense.weight", {8, 8}, 2},
    {"encoder.layer.1.attention.self.query.weight", {8, 8}, 2},
    {"pooler.dense.weight", {8, 8}, 2},
};
#define N_HF ((int)(sizeof hf_keys / sizeof hf_keys[0]))

static void test_dotted_registration_mirrors_a_state_dict(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(11);
    /* the checkpoint: a safetensors file with metadata, as Hugging Face writes them */
    ct_value *sd = ct_value_new_dict(), *meta = ct_value_new_dict();
    for (int i = 0; i < N_HF; i++)
        ct_value_set(sd, hf_keys[i].name,
                     ct_value_new_tensor(ct_randn(hf_keys[i].shape, hf_keys[i].nd, CT_F32, CT_CPU)));
    ct_value_set(sd, "embeddings.position_ids",
                 ct_value_new_tensor(ct_arange(ct_scalar_int(0), ct_scalar_int(5), ct_scalar_int(1), CT_I64, CT_CPU)));
    ct_value_set(meta, "format", ct_value_new_str("pt"));
    char path[128];
    tmp_path(path, sizeof path, "bert.safetensors");
    assert_int_equal(ct_save_safetensors(path, sd, meta), CT_OK);

    /* the model: every key registered in a loop, containers made on the way */
    ct_module *bert = ct_module_new("BertModel", NULL, NULL, NULL);
    for (int i = 0; i < N_HF; i++)
        assert_int_equal(ct_module_register_parameter(bert, hf_keys[i].name,
                                                      ct_empty(hf_keys[i].shape, hf_keys[i].nd, CT_F32, CT_CPU)),
                         CT_OK);
    assert_int_equal(ct_module_register_buffer(bert, "embeddings.position_ids", ct_zeros(CT_SHAPE(5), CT_I64, CT_CPU)),
                     CT_OK);
    assert_string_equal(ct_module_type(ct_module_child(bert, "encoder.layer.0.attention")), "Module");
    assert_int_equal(ct_module_num_children(bert), 3); /* embeddings, encoder, pooler */
    assert_int_equal(ct_module_num_children(ct_module_child(bert, "encoder.layer")), 2);
    assert_non_null(ct_module_param(bert, "encoder.layer.1.attention.self.query.weight"));
    assert_null(ct_module_param(bert, "encoder.layer.2.attention.self.query.weight"));
    assert_null(ct_module_param(bert, "encoder.layer.0.attention.self.query.weight.x"));
    assert_non_null(ct_module_buffer(bert, "embeddings.position_ids"));
    char *s = ct_module_to_string(bert);
    assert_non_null(strstr(s, "BertModel(\n  (embeddings): Module(\n    (word_embeddings): Module()\n"));
    free(s);

    /* ct_load keeps the file's metadata beside the tensors; a strict load ignores it */
    ct_value *loaded = ct_load(path);
    CT_ASSERT_OK(loaded);
    assert_string_equal(ct_value_str(ct_value_key_at(loaded, 0), NULL), "__metadata__");
    int64_t nm = -1, nu = -1;
    assert_int_equal(ct_module_load_state_dict(bert, loaded, true, &nm, &nu), CT_OK);
    assert_int_equal(nm, 0);
    assert_int_equal(nu, 0);
    for (int i = 0; i < N_HF; i++) {
        bool eq = false;
        ct_tensor *want = ct_value_tensor(ct_value_get(sd, hf_keys[i].name));
        assert_int_equal(ct_equal(ct_module_param(bert, hf_keys[i].name), want, &eq), CT_OK);
        assert_true(eq);
    }
    /* ...but metadata that is not a dict of strings is a key like any other */
    ct_value *odd = ct_value_clone(loaded);
    ct_value_set(odd, "__metadata__", ct_value_new_int(3));
    CT_ASSERT_ERR(ct_module_load_state_dict(bert, odd, true, NULL, NULL) == CT_OK, CT_ERROR_VALUE,
                  "Unexpected key(s) in state_dict: \"__metadata__\"");
    ct_value_free(odd);

    /* the state dict alone, and the metadata alone */
    ct_value *tensors = ct_load_state_dict_file(path);
    CT_ASSERT_OK(tensors);
    assert_int_equal(ct_value_len(tensors), N_HF + 1);
    assert_string_equal(ct_value_str(ct_value_key_at(tensors, 0), NULL), "embeddings.LayerNorm.bias");
    assert_int_equal(ct_module_load_state_dict(bert, tensors, true, NULL, NULL), CT_OK);
    ct_value *md = ct_load_safetensors_metadata(path);
    CT_ASSERT_OK(md);
    assert_int_equal(ct_value_len(md), 1);
    assert_string_equal(ct_value_str(ct_value_get(md, "format"), NULL), "pt");
    ct_value_free(md);
    char bare[128];
    tmp_path(bare, sizeof bare, "bare.safetensors");
    assert_int_equal(ct_save_safetensors(bare, tensors, NULL), CT_OK);
    md = ct_load_safetensors_metadata(bare);
    assert_int_equal(ct_value_len(md), 0);
    ct_value_free(md);

    /* deleting keys: non-strict loads report what they skipped */
    assert_int_equal(ct_value_dict_remove(loaded, "__metadata__"), CT_OK);
    assert_int_equal(ct_value_dict_remove(loaded, "pooler.dense.weight"), CT_OK);
    assert_int_equal(
        ct_value_set(loaded, "cls.predictions.bias", ct_value_new_tensor(ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU))),
        CT_OK);
    ct_value *missing = NULL, *unexpected = NULL;
    CT_ASSERT_ERR(ct_module_load_state_dict_keys(bert, loaded, true, &missing, &unexpected) == CT_OK, CT_ERROR_VALUE,
                  "Missing key(s) in state_dict: \"pooler.dense.weight\". \n\tUnexpected key(s) in state_dict: "
                  "\"cls.predictions.bias\".");
    ct_value *want_missing = str_list((const char *[]){"pooler.dense.weight"}, 1);
    ct_value *want_unexpected = str_list((const char *[]){"cls.predictions.bias"}, 1);
    expect_same(missing, want_missing, "missing");
    expect_same(unexpected, want_unexpected, "unexpected");
    ct_value_free(missing);
    ct_value_free(unexpected);
    assert_int_equal(ct_module_load_state_dict_keys(bert, loaded, false, &missing, NULL), CT_OK);
    expect_same(missing, want_missing, "missing");
    ct_value_free(missing);
    assert_int_equal(ct_module_load_state_dict_keys(bert, loaded, false, NULL, &unexpected), CT_OK);
    expect_same(unexpected, want_unexpected, "unexpected");
    ct_value_free(unexpected);
    assert_int_equal(ct_module_load_state_dict(bert, loaded, false, &nm, &nu), CT_OK);
    assert_int_equal(nm, 1);
    assert_int_equal(nu, 1);
    CT_ASSERT_ERR(ct_module_load_state_dict_keys(NULL, loaded, false, &missing, &unexpected) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "");
    assert_null(missing);
    assert_null(unexpected);
    ct_value_free(want_missing);
    ct_value_free(want_unexpected);

    /* a torch.save state dict reads as one; a checkpoint of other things does not */
    char pt[128];
    tmp_path(pt, sizeof pt, "bert.pt");
    assert_int_equal(ct_save_pt(pt, tensors), CT_OK);
    ct_value *back = ct_load_state_dict_file(pt);
    CT_ASSERT_OK(back);
    assert_int_equal(ct_value_len(back), N_HF + 1);
    ct_value_free(back);
    ct_value *ckpt = ct_value_new_dict();
    ct_value_set(ckpt, "w", ct_value_new_tensor(ct_ones(CT_SHAPE(1), CT_F32, CT_CPU)));
    ct_value_set(ckpt, "epoch", ct_value_new_int(3));
    assert_int_equal(ct_save_pt(pt, ckpt), CT_OK);
    CT_ASSERT_ERR(ct_load_state_dict_file(pt) != NULL, CT_ERROR_TYPE,
                  "'epoch' is of type int, not a tensor: a checkpoint rather than a state dict?");
    ct_value_free(ckpt);
    ckpt = ct_value_new_list();
    assert_int_equal(ct_save_pt(pt, ckpt), CT_OK);
    CT_ASSERT_ERR(ct_load_state_dict_file(pt) != NULL, CT_ERROR_TYPE, "holds a value of type list, not a state dict");
    ct_value_free(ckpt);
    CT_ASSERT_ERR(ct_load_state_dict_file(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "load_state_dict_file: path is NULL");
    CT_ASSERT_ERR(ct_load_safetensors_metadata(pt) != NULL, CT_ERROR_FORMAT, "");
    CT_ASSERT_ERR(ct_load_safetensors_metadata(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "path is NULL");
    tmp_path(pt, sizeof pt, "missing.safetensors");
    CT_ASSERT_ERR(ct_load_state_dict_file(pt) != NULL, CT_ERROR_IO, "cannot open");
    remove(path);
    remove(bare);
    tmp_path(pt, sizeof pt, "bert.pt");
    remove(pt);

    ct_value_free(tensors);
    ct_value_free(loaded);
    ct_value_free(meta);
    ct_value_free(sd);
    ct_module_free(bert);
    ct_scope_end();
}

static void test_registration_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_module *m = ct_module_new("Custom", NULL, NULL, NULL);
    ct_tensor *p = ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU);
    const char *bad[] = {"a..b", ".x", "x.", ".", "a.b."};
    for (int i = 0; i < 5; i++) {
        CT_ASSERT_ERR(ct_module_register_parameter(m, bad[i], p) == CT_OK, CT_ERROR_VALUE, "has an empty part");
        CT_ASSERT_ERR(ct_module_register_buffer(m, bad[i], p) == CT_OK, CT_ERROR_VALUE, "has an empty part");
        CT_ASSERT_ERR(ct_module_add_child(m, bad[i], ct_nn_relu()) == CT_OK, CT_ERROR_VALUE, "has an empty part");
    }
    assert_int_equal(ct_module_num_children(m), 0); /* nothing made on the way */
    assert_int_equal(ct_module_register_parameter(m, "enc.w", p), CT_OK);
    CT_ASSERT_ERR(ct_module_register_parameter(m, "enc.w", p) == CT_OK, CT_ERROR_VALUE,
                  "attribute 'enc.w' already exists");
    CT_ASSERT_ERR(ct_module_register_buffer(m, "enc.w", p) == CT_OK, CT_ERROR_VALUE, "already exists");
    CT_ASSERT_ERR(ct_module_add_child(m, "enc.w", ct_nn_relu()) == CT_OK, CT_ERROR_VALUE, "already exists");
    CT_ASSERT_ERR(ct_module_register_parameter(m, "enc", p) == CT_OK, CT_ERROR_VALUE, "attribute 'enc' already");
    /* through a parameter */
    CT_ASSERT_ERR(ct_module_register_parameter(m, "enc.w.x.y", p) == CT_OK, CT_ERROR_VALUE,
                  "cannot register 'enc.w.x.y': 'w' of Module is a parameter or buffer, not a module");
    assert_null(ct_module_child(m, "enc.w"));
    CT_ASSERT_ERR(ct_module_register_parameter(m, "i.j", ct_zeros(CT_SHAPE(2), CT_I64, CT_CPU)) == CT_OK, CT_ERROR_TYPE,
                  "floating point");
    assert_null(ct_module_child(m, "i")); /* refused before anything was made */
    CT_ASSERT_ERR(ct_module_register_parameter(NULL, "w", p) == CT_OK, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_module_register_buffer(m, NULL, p) == CT_OK, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_module_set_param(m, "enc.nope", p) == CT_OK, CT_ERROR_VALUE, "Custom has no parameter 'enc.nope'");
    assert_int_equal(ct_module_set_param(m, "enc.w", ct_ones(CT_SHAPE(2), CT_F32, CT_CPU)), CT_OK);
    assert_true(ct_test_at(ct_module_param(m, "enc.w"), 0) == 1);
    assert_null(ct_module_param(m, NULL));
    assert_null(ct_module_child(NULL, "enc"));

    /* children: a dotted name, a cycle, a module added twice */
    ct_module *inner = ct_nn_sequential((ct_module *[]){ct_nn_relu()}, 1);
    assert_int_equal(ct_module_add_child(m, "enc.seq", inner), CT_OK);
    assert_ptr_equal(ct_module_child(m, "enc.seq.0"), ct_module_child_at(inner, 0, NULL));
    CT_ASSERT_ERR(ct_module_add_child(inner, "up", ct_module_retain(m)) == CT_OK, CT_ERROR_VALUE,
                  "would make Sequential a submodule of itself");
    CT_ASSERT_ERR(ct_module_add_child(m, "self", ct_module_retain(m)) == CT_OK, CT_ERROR_VALUE,
                  "would make Custom a submodule of itself");
    /* below a module that is yet to be made: still a cycle, and nothing is made */
    CT_ASSERT_ERR(ct_module_add_child(m, "enc.seq.deeper.c", ct_module_retain(ct_module_child(m, "enc"))) == CT_OK,
                  CT_ERROR_VALUE, "adding 'enc.seq.deeper.c' would make Sequential a submodule of itself");
    assert_null(ct_module_child(m, "enc.seq.deeper"));
    CT_ASSERT_ERR(ct_module_add_child(m, "again", inner) == CT_OK, CT_ERROR_VALUE,
                  "the Sequential is already a submodule; ct_module_retain it first");
    assert_null(ct_module_child(m, "again"));
    assert_int_equal(ct_module_add_child(m, "again", ct_module_retain(inner)), CT_OK); /* shared now */
    assert_int_equal(ct_module_append(inner, ct_nn_tanh()), CT_OK);
    assert_string_equal(ct_module_type(ct_module_child(m, "again.1")), "Tanh");
    CT_ASSERT_ERR(ct_module_append(NULL, ct_nn_relu()) == CT_OK, CT_ERROR_NULL_ARGUMENT, "module is NULL");
    CT_ASSERT_ERR(ct_module_add_child(m, "x", NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "child is NULL");

    /* a module kept by its creator outlives the tree */
    ct_module *kept = ct_module_retain(ct_module_child(m, "enc.seq"));
    ct_module_free(m);
    ct_tensor *x = ct_ones(CT_SHAPE(2), CT_F32, CT_CPU);
    expect_close(ct_module_forward(kept, ct_neg(x)), ct_tanh(ct_relu(ct_neg(x))));
    ct_module_free(kept);

    /* containers' constructor errors free what they were given */
    CT_ASSERT_ERR(ct_nn_module_list((ct_module *[]){ct_nn_relu(), NULL}, 2) != NULL, CT_ERROR_NULL_ARGUMENT,
                  "ModuleList: module 1 is NULL");
    CT_ASSERT_ERR(ct_nn_module_dict((const char *[]){"a", NULL}, (ct_module *[]){ct_nn_relu(), ct_nn_tanh()}, 2) !=
                      NULL,
                  CT_ERROR_NULL_ARGUMENT, "ModuleDict: name 1 is NULL");
    CT_ASSERT_ERR(ct_nn_module_dict(NULL, (ct_module *[]){ct_nn_relu()}, 1) != NULL, CT_ERROR_NULL_ARGUMENT,
                  "names is NULL");
    CT_ASSERT_ERR(ct_nn_module_dict((const char *[]){"a", "a"}, (ct_module *[]){ct_nn_relu(), ct_nn_tanh()}, 2) != NULL,
                  CT_ERROR_VALUE, "attribute 'a' already exists");
    CT_ASSERT_ERR(ct_nn_module_list(NULL, -1) != NULL, CT_ERROR_NULL_ARGUMENT, "n is negative");
    ct_scope_end();
}

static void test_dict_remove(void **state) {
    (void)state;
    ct_value *d = ct_value_new_dict();
    char key[32];
    for (int i = 0; i < 20; i++) { /* past the size where the dict keeps a hash index */
        snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(ct_value_set(d, key, ct_value_new_int(i)), CT_OK);
    }
    assert_int_equal(ct_value_dict_remove(d, "k0"), CT_OK);
    assert_int_equal(ct_value_dict_remove(d, "k19"), CT_OK);
    assert_int_equal(ct_value_dict_remove(d, "k7"), CT_OK);
    ct_value *v = ct_value_dict_pop(d, "k8");
    assert_int_equal(ct_value_int(v), 8);
    /* the popped value is the caller's: it can go into another container */
    ct_value *other = ct_value_new_list();
    assert_int_equal(ct_value_append(other, v), CT_OK);
    ct_value_free(other);
    assert_int_equal(ct_value_len(d), 16);
    int64_t expect = 1;
    for (int64_t i = 0; i < ct_value_len(d); i++, expect++) {
        if (expect == 7)
            expect = 9;
        snprintf(key, sizeof key, "k%lld", (long long)expect);
        assert_string_equal(ct_value_str(ct_value_key_at(d, i), NULL), key);
        assert_int_equal(ct_value_int(ct_value_get(d, key)), expect); /* the index still finds each */
    }
    assert_null(ct_value_get(d, "k7"));
    ct_clear_error();
    /* a key set again goes to the end */
    assert_int_equal(ct_value_set(d, "k7", ct_value_new_int(77)), CT_OK);
    assert_string_equal(ct_value_str(ct_value_key_at(d, 16), NULL), "k7");
    assert_int_equal(ct_value_int(ct_value_get(d, "k7")), 77);
    CT_ASSERT_ERR(ct_value_dict_remove(d, "k0") == CT_OK, CT_ERROR_INDEX, "value_dict_remove: no key 'k0'");
    CT_ASSERT_ERR(ct_value_dict_pop(d, "nope") != NULL, CT_ERROR_INDEX, "value_dict_pop: no key 'nope'");
    CT_ASSERT_ERR(ct_value_dict_remove(d, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "key is NULL");
    CT_ASSERT_ERR(ct_value_dict_remove(NULL, "k1") == CT_OK, CT_ERROR_NULL_ARGUMENT, "");
    ct_value *l = ct_value_new_list();
    CT_ASSERT_ERR(ct_value_dict_remove(l, "k1") == CT_OK, CT_ERROR_TYPE, "expected a dict, got a list");
    ct_value_free(l);
    /* down to empty, in a small dict */
    ct_value *s = ct_value_new_dict();
    ct_value_set(s, "a", ct_value_new_str("x"));
    ct_value_set(s, "b", ct_value_new_str("y"));
    assert_int_equal(ct_value_dict_remove(s, "a"), CT_OK);
    assert_int_equal(ct_value_dict_remove(s, "b"), CT_OK);
    assert_int_equal(ct_value_len(s), 0);
    ct_value_free(s);
    ct_value_free(d);
}

/* The names ct_module_parameters hands out stay valid until the next call that asks
 * for names; counting calls and failed calls leave them alone. */
static void test_parameters_array(void **state) {
    (void)state;
    ct_module *t = make_tree();
    ct_tensor *ps[4];
    const char *names[4];
    assert_int_equal(ct_module_parameters(t, ps, names, 4), 18);
    assert_string_equal(names[0], "scale");
    assert_string_equal(names[3], "blocks.0.attn.q.bias");
    assert_ptr_equal(ps[1], ct_module_param(t, "emb.weight"));
    assert_int_equal(ct_module_parameters(t, NULL, NULL, 0), 18);
    assert_string_equal(names[3], "blocks.0.attn.q.bias");
    const char *all[32];
    assert_int_equal(ct_module_parameters(t, NULL, all, 32), 18);
    assert_string_equal(all[17], "bn.bias");
    ct_module_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_reprs_match_pytorch),
        cmocka_unit_test(test_float_repr_matches_python),
        cmocka_unit_test(test_custom_extra_repr),
        cmocka_unit_test(test_tree_walks_match_pytorch),
        cmocka_unit_test(test_walks_stop_and_apply),
        cmocka_unit_test(test_apply_initialises),
        cmocka_unit_test(test_gpt_repr),
        cmocka_unit_test(test_two_input_module_in_sequential),
        cmocka_unit_test(test_output_and_hidden),
        cmocka_unit_test(test_forward_error_inputs),
        cmocka_unit_test(test_hooks),
        cmocka_unit_test(test_hooks_on_multi_modules_and_children),
        cmocka_unit_test_setup(test_dotted_registration_mirrors_a_state_dict, make_tmpdir),
        cmocka_unit_test(test_registration_errors),
        cmocka_unit_test(test_dict_remove),
        cmocka_unit_test(test_parameters_array),
    };
    return cmocka_run_group_tests(tests, load_golden, free_golden);
}
