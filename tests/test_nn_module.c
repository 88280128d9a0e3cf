/* nn modules: parameter names and shapes as PyTorch's state_dict keys, default
 * initialisation bounds, train/eval behaviour, state_dict round trips, strict and
 * non-strict loading, nn.init, and the GPT block / a small CNN against PyTorch. */
#include <ctype.h>
#include <pthread.h>
#include <unistd.h>

#include "nn_golden.h"
#include "ctorch/ext.h"

static int load(void **state) {
    (void)state;
    return load_golden_file(CT_TEST_DATA_DIR "/nn_modules_golden.txt");
}

static void expect_keys(const ct_value *sd, const char *const *keys, int n) {
    assert_non_null(sd);
    assert_int_equal(ct_value_len(sd), n);
    for (int i = 0; i < n; i++)
        assert_string_equal(ct_value_str(ct_value_key_at(sd, i), NULL), keys[i]);
}

static void expect_shape(const ct_value *sd, const char *key, const int64_t *shape, int nd) {
    ct_tensor *t = ct_value_tensor(ct_value_get(sd, key));
    assert_non_null(t);
    assert_int_equal(ct_tensor_dim(t), nd);
    for (int i = 0; i < nd; i++)
        assert_int_equal(ct_tensor_size(t, i), shape[i]);
}

static double max_abs(const ct_tensor *t) {
    double m = 0;
    for (int64_t i = 0; i < ct_tensor_numel(t); i++)
        m = fmax(m, fabs(ct_test_at(t, i)));
    return m;
}

/* A dict of the golden case's tensors except x and y: PyTorch's state_dict. */
static ct_value *golden_state(const gcase *c) {
    ct_value *d = ct_value_new_dict();
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->t[i].name, "x") && strcmp(c->t[i].name, "y")) {
            ct_tensor *t = T(c, c->t[i].name);
            if (strstr(c->t[i].name, "num_batches"))
                t = ct_to_dtype(t, CT_I64);
            ct_value_set(d, c->t[i].name, ct_value_new_tensor(t));
        }
    return d;
}

static const gcase *golden(const char *name) {
    for (int i = 0; i < ncases; i++)
        if (!strcmp(cases[i].name, name))
            return &cases[i];
    fail_msg("no golden case %s", name);
    return NULL;
}

/* ------------------------------------------------------------------ layers */

/* The error of a call on an absent CUDA device: CT_ERROR_DEVICE naming CUDA, in the
 * registry's words in a build without CUDA ("no backend for device type cuda") or the
 * backend's in a CUDA build on a machine without a GPU ("... CUDA ..."). */
static void assert_no_cuda_error(bool failed) {
    assert_true(failed);
    assert_int_equal(ct_last_status(), CT_ERROR_DEVICE);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    for (char *c = msg; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    assert_non_null(strstr(msg, "cuda"));
    ct_clear_error();
}

static void test_linear(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(1);
    ct_module *m = ct_nn_linear(400, 300, true, CT_F32);
    assert_non_null(m);
    assert_string_equal(ct_module_type(m), "Linear");
    ct_value *sd = ct_module_state_dict(m);
    expect_keys(sd, (const char *[]){"weight", "bias"}, 2);
    expect_shape(sd, "weight", CT_SHAPE(300, 400));
    expect_shape(sd, "bias", CT_SHAPE(300));
    /* kaiming_uniform_(a=sqrt(5)): U(-1/sqrt(400), 1/sqrt(400)); the bias the same */
    ct_tensor *w = ct_module_param(m, "weight"), *b = ct_module_param(m, "bias");
    assert_true(ct_tensor_requires_grad(w));
    double bound = 1 / sqrt(400.0), mw = max_abs(w);
    assert_true(mw <= bound && mw > 0.99 * bound);
    assert_true(max_abs(b) <= bound && max_abs(b) > 0.9 * bound);
    double s2 = 0, s1 = 0;
    for (int64_t i = 0; i < 120000; i++) {
        double v = ct_test_at(w, i);
        s1 += v;
        s2 += v * v;
    }
    assert_true(fabs(s1 / 120000) < 0.01 * bound);
    assert_true(fabs(s2 / 120000 - bound * bound / 3) < 0.02 * bound * bound);
    assert_int_equal(ct_module_num_parameters(m), 300 * 400 + 300);
    ct_tensor *y = ct_module_forward(m, ct_ones(CT_SHAPE(2, 400), CT_F32, CT_CPU));
    CT_ASSERT_SHAPE(y, 2, 300);
    ct_value_free(sd);
    /* without bias */
    ct_module *nb = ct_nn_linear(3, 2, false, CT_DTYPE_UNDEFINED);
    ct_value *sd2 = ct_module_state_dict(nb);
    expect_keys(sd2, (const char *[]){"weight"}, 1);
    assert_int_equal(ct_tensor_dtype(ct_module_param(nb, "weight")), ct_get_default_dtype());
    ct_value_free(sd2);
    ct_module_free(nb);
    ct_module_free(m);
    ct_scope_end();
}

static void test_conv2d_module(void **state) {
    (void)state;
    ct_scope_begin();
    ct_module *m = ct_nn_conv2d(6, 8, CT_INDEX(3, 2), NULL, CT_INDEX(1, 0), NULL, 2, true, CT_F64);
    assert_non_null(m);
    ct_value *sd = ct_module_state_dict(m);
    expect_keys(sd, (const char *[]){"weight", "bias"}, 2);
    expect_shape(sd, "weight", CT_SHAPE(8, 3, 3, 2));
    double bound = 1 / sqrt(3.0 * 3 * 2);
    assert_true(max_abs(ct_module_param(m, "weight")) <= bound);
    assert_true(max_abs(ct_module_param(m, "bias")) <= bound);
    CT_ASSERT_SHAPE(ct_module_forward(m, ct_zeros(CT_SHAPE(1, 6, 5, 5), CT_F64, CT_CPU)), 1, 8, 5, 4);
    ct_value_free(sd);
    ct_module_free(m);
    ct_scope_end();
}

static void test_batchnorm(void **state) {
    (void)state;
    ct_scope_begin();
    ct_module *m = ct_nn_batch_norm2d(3, 1e-5, 0.1, true, true, CT_F64);
    ct_value *sd = ct_module_state_dict(m);
    expect_keys(sd, (const char *[]){"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}, 5);
    assert_int_equal(ct_tensor_dtype(ct_module_buffer(m, "num_batches_tracked")), CT_I64);
    ct_value_free(sd);
    assert_true(ct_test_at(ct_module_param(m, "weight"), 1) == 1);
    assert_true(ct_test_at(ct_module_param(m, "bias"), 1) == 0);
    /* eval with fresh statistics: y = x / sqrt(1 + eps) */
    ct_manual_seed(3);
    ct_tensor *x = ct_add_scalar(ct_randn(CT_SHAPE(4, 3, 2, 2), CT_F64, CT_CPU), ct_scalar_int(2));
    ct_module_train(m, false);
    assert_false(ct_module_is_training(m));
    ct_tensor *ye = ct_module_forward(m, x);
    assert_true(fabs(ct_test_at(ye, 5) - ct_test_at(x, 5) / sqrt(1 + 1e-5)) < 1e-12);
    assert_true(ct_test_at(ct_module_buffer(m, "running_mean"), 0) == 0);
    /* train: batch statistics normalise (mean 0 per channel), running ones move */
    ct_module_train(m, true);
    ct_tensor *yt = ct_module_forward(m, x);
    ct_tensor *mean = ct_mean(yt, CT_INDEX(0, 2, 3), 3, false, CT_DTYPE_UNDEFINED);
    for (int c = 0; c < 3; c++)
        assert_true(fabs(ct_test_at(mean, c)) < 1e-12);
    ct_tensor *bm = ct_mean(x, CT_INDEX(0, 2, 3), 3, false, CT_DTYPE_UNDEFINED);
    assert_true(fabs(ct_test_at(ct_module_buffer(m, "running_mean"), 1) - 0.1 * ct_test_at(bm, 1)) < 1e-12);
    ct_tensor *bv = ct_var(x, CT_INDEX(0, 2, 3), 3, 1.0, false); /* unbiased */
    assert_true(fabs(ct_test_at(ct_module_buffer(m, "running_var"), 2) - (0.9 + 0.1 * ct_test_at(bv, 2))) < 1e-12);
    double nbt;
    assert_int_equal(ct_item_double(ct_module_buffer(m, "num_batches_tracked"), &nbt), CT_OK);
    assert_true(nbt == 1);
    CT_ASSERT_ERR(ct_module_forward(m, ct_zeros(CT_SHAPE(3, 2), CT_F64, CT_CPU)) != NULL, CT_ERROR_VALUE,
                  "expected 4D input (got 2D input)");
    ct_module_free(m);
    /* no affine, no running stats: just the keys that exist */
    ct_module *plain = ct_nn_batch_norm2d(3, 1e-5, 0.1, false, false, CT_F32);
    ct_value *sd2 = ct_module_state_dict(plain);
    assert_int_equal(ct_value_len(sd2), 0);
    ct_module_train(plain, false); /* eval without running stats uses the batch's */
    CT_ASSERT_OK(ct_module_forward(plain, ct_ones(CT_SHAPE(2, 3, 2, 2), CT_F32, CT_CPU)));
    ct_value_free(sd2);
    ct_module_free(plain);
    ct_scope_end();
}

static void test_norms_embedding_dropout(void **state) {
    (void)state;
    ct_scope_begin();
    ct_module *ln = ct_nn_layer_norm(CT_INDEX(4, 5), 2, 1e-5, true, CT_F32);
    ct_value *sd = ct_module_state_dict(ln);
    expect_keys(sd, (const char *[]){"weight", "bias"}, 2);
    expect_shape(sd, "weight", CT_SHAPE(4, 5));
    ct_value_free(sd);
    CT_ASSERT_SHAPE(ct_module_forward(ln, ct_ones(CT_SHAPE(3, 4, 5), CT_F32, CT_CPU)), 3, 4, 5);
    ct_module_free(ln);
    ct_module *rms = ct_nn_rms_norm(CT_INDEX(6), 1, -1, true, CT_F32);
    sd = ct_module_state_dict(rms);
    expect_keys(sd, (const char *[]){"weight"}, 1);
    ct_value_free(sd);
    ct_tensor *r = ct_module_forward(rms, ct_full(CT_SHAPE(2, 6), ct_scalar_float(3), CT_F32, CT_CPU));
    assert_true(fabs(ct_test_at(r, 3) - 1) < 1e-6);
    ct_module_free(rms);

    ct_manual_seed(5);
    ct_module *emb = ct_nn_embedding(50, 40, -1, CT_F64);
    ct_tensor *w = ct_module_param(emb, "weight");
    for (int j = 0; j < 40; j++) /* padding_idx -1 is row 49, zeroed */
        assert_true(ct_test_at(w, 49 * 40 + j) == 0);
    double s2 = 0;
    for (int64_t i = 0; i < 49 * 40; i++)
        s2 += ct_test_at(w, i) * ct_test_at(w, i);
    assert_true(fabs(s2 / (49 * 40) - 1) < 0.1); /* N(0, 1) */
    int64_t idx[3] = {0, 49, 3};
    ct_tensor *e = ct_module_forward(emb, ct_from_data(idx, CT_SHAPE(3), CT_I64));
    CT_ASSERT_SHAPE(e, 3, 40);
    assert_true(ct_test_at(e, 40) == 0);
    assert_true(ct_test_at(e, 80) == ct_test_at(w, 120));
    ct_module_free(emb);

    ct_module *d = ct_nn_dropout(0.5);
    ct_tensor *x = ct_ones(CT_SHAPE(1000), CT_F32, CT_CPU);
    ct_tensor *yt = ct_module_forward(d, x);
    int zeros = 0;
    for (int i = 0; i < 1000; i++)
        zeros += ct_test_at(yt, i) == 0;
    assert_true(zeros > 400 && zeros < 600);
    ct_module_train(d, false);
    ct_tensor *ye = ct_module_forward(d, x);
    for (int i = 0; i < 1000; i++)
        assert_true(ct_test_at(ye, i) == 1);
    ct_module_free(d);
    ct_scope_end();
}

static void test_sequential_cnn_golden(void **state) {
    (void)state;
    ct_scope_begin();
    ct_module *mods[5] = {ct_nn_conv2d(1, 4, CT_INDEX(3, 3), NULL, CT_INDEX(1, 1), NULL, 1, true, CT_F64), ct_nn_relu(),
                          ct_nn_max_pool2d(CT_INDEX(2, 2), NULL, NULL), ct_nn_flatten(1, -1),
                          ct_nn_linear(36, 5, true, CT_F64)};
    ct_module *net = ct_nn_sequential(mods, 5);
    assert_non_null(net);
    ct_value *sd = ct_module_state_dict(net);
    /* the keys PyTorch's nn.Sequential gives the same layers */
    expect_keys(sd, (const char *[]){"0.weight", "0.bias", "4.weight", "4.bias"}, 4);
    ct_value_free(sd);
    const gcase *c = golden("cnn");
    ct_value *g = golden_state(c);
    assert_int_equal(ct_module_load_state_dict(net, g, true, NULL, NULL), CT_OK);
    expect(c, "y", ct_module_forward(net, T(c, "x")), 1e-12);
    ct_value_free(g);
    const char *names[8];
    ct_tensor *ps[8];
    assert_int_equal(ct_module_parameters(net, ps, names, 8), 4);
    assert_string_equal(names[2], "4.weight");
    assert_true(ps[2] == ct_module_param(ct_module_child(net, "4"), "weight"));
    ct_module_free(net);
    ct_scope_end();
}

static void test_gpt_block_golden(void **state) {
    (void)state;
    ct_scope_begin();
    ct_module *blk = ct_nn_gpt_block(8, 2, CT_F64);
    assert_non_null(blk);
    const gcase *c = golden("gpt_block");
    ct_value *g = golden_state(c);
    ct_value *sd = ct_module_state_dict(blk);
    /* the same keys, in the same order, as PyTorch's Block */
    assert_int_equal(ct_value_len(sd), ct_value_len(g));
    for (int64_t i = 0; i < ct_value_len(g); i++)
        assert_string_equal(ct_value_str(ct_value_key_at(sd, i), NULL), ct_value_str(ct_value_key_at(g, i), NULL));
    assert_int_equal(ct_module_load_state_dict(blk, g, true, NULL, NULL), CT_OK);
    expect(c, "y", ct_module_forward(blk, T(c, "x")), 1e-12);
    ct_value_free(sd);
    ct_value_free(g);
    ct_module_free(blk);
    ct_scope_end();
}

/* ------------------------------------------------------------------ state_dict */

static void test_state_dict_round_trip(void **state) {
    (void)state;
    ct_scope_begin();
    ct_module *a = ct_nn_linear(4, 3, true, CT_F32), *b = ct_nn_linear(4, 3, true, CT_F32);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 4), CT_F32, CT_CPU);
    ct_value *sd = ct_module_state_dict(a);
    /* detached copies of the data, sharing storage */
    ct_tensor *w = ct_value_tensor(ct_value_get(sd, "weight"));
    assert_false(ct_tensor_requires_grad(w));
    assert_true(ct_tensor_shares_storage(w, ct_module_param(a, "weight")));
    assert_int_equal(ct_module_load_state_dict(b, sd, true, NULL, NULL), CT_OK);
    ct_tensor *ya = ct_module_forward(a, x), *yb = ct_module_forward(b, x);
    for (int i = 0; i < 6; i++)
        assert_true(ct_test_at(ya, i) == ct_test_at(yb, i));
    /* loading copies: b's tensors stay its own */
    assert_false(ct_tensor_shares_storage(ct_module_param(b, "weight"), ct_module_param(a, "weight")));
    /* through a safetensors file and back */
    char path[] = "/tmp/ct_nn_sd_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(ct_save_safetensors(path, sd, NULL), CT_OK);
    ct_value *back = ct_load(path);
    assert_non_null(back);
    ct_module *c = ct_nn_linear(4, 3, true, CT_F32);
    assert_int_equal(ct_module_load_state_dict(c, back, true, NULL, NULL), CT_OK);
    ct_tensor *yc = ct_module_forward(c, x);
    for (int i = 0; i < 6; i++)
        assert_true(ct_test_at(ya, i) == ct_test_at(yc, i));
    remove(path);
    ct_value_free(back);
    ct_value_free(sd);
    ct_module_free(a);
    ct_module_free(b);
    ct_module_free(c);
    ct_scope_end();
}

static void test_load_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_module *m = ct_nn_linear(4, 3, true, CT_F32);
    double before = ct_test_at(ct_module_param(m, "weight"), 0);
    ct_value *sd = ct_value_new_dict();
    ct_value_set(sd, "weight", ct_value_new_tensor(ct_zeros(CT_SHAPE(3, 5), CT_F32, CT_CPU)));
    ct_value_set(sd, "foo", ct_value_new_tensor(ct_zeros(CT_SHAPE(1), CT_F32, CT_CPU)));
    ct_value_set(sd, "bar", ct_value_new_tensor(ct_zeros(CT_SHAPE(1), CT_F32, CT_CPU)));
    int64_t nm = -1, nu = -1;
    CT_ASSERT_ERR(ct_module_load_state_dict(m, sd, true, &nm, &nu) == CT_OK, CT_ERROR_VALUE,
                  "Error(s) in loading state_dict for Linear:\n\tMissing key(s) in state_dict: \"bias\". \n\t"
                  "Unexpected key(s) in state_dict: \"foo\", \"bar\". \n\tsize mismatch for weight: copying a param "
                  "with shape torch.Size([3, 5]) from checkpoint, the shape in current model is torch.Size([3, 4]).");
    assert_int_equal(nm, 1);
    assert_int_equal(nu, 2);
    assert_true(ct_test_at(ct_module_param(m, "weight"), 0) == before); /* nothing copied */
    /* non-strict: size mismatches are still errors */
    CT_ASSERT_ERR(ct_module_load_state_dict(m, sd, false, NULL, NULL) == CT_OK, CT_ERROR_VALUE, "size mismatch");
    ct_value_free(sd);
    /* non-strict with only missing and unexpected keys loads what matches */
    sd = ct_value_new_dict();
    ct_value_set(sd, "weight", ct_value_new_tensor(ct_ones(CT_SHAPE(3, 4), CT_F64, CT_CPU)));
    ct_value_set(sd, "extra", ct_value_new_tensor(ct_zeros(CT_SHAPE(1), CT_F32, CT_CPU)));
    assert_int_equal(ct_module_load_state_dict(m, sd, false, &nm, &nu), CT_OK);
    assert_int_equal(nm, 1);
    assert_int_equal(nu, 1);
    assert_true(ct_test_at(ct_module_param(m, "weight"), 7) == 1);
    CT_ASSERT_ERR(ct_module_load_state_dict(m, sd, true, NULL, NULL) == CT_OK, CT_ERROR_VALUE,
                  "Missing key(s) in state_dict: \"bias\"");
    ct_value_free(sd);
    ct_value *notdict = ct_value_new_list();
    CT_ASSERT_ERR(ct_module_load_state_dict(m, notdict, true, NULL, NULL) == CT_OK, CT_ERROR_TYPE, "dict");
    ct_value_free(notdict);
    CT_ASSERT_ERR(ct_module_load_state_dict(m, NULL, true, NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "");
    ct_module_free(m);
    ct_scope_end();
}

/* ------------------------------------------------------------------ custom modules, errors */

static void test_registration(void **state) {
    (void)state;
    ct_scope_begin();
    ct_module *m = ct_module_new("Custom", NULL, NULL, NULL);
    ct_tensor *p = ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU);
    assert_int_equal(ct_module_register_parameter(m, "p", p), CT_OK);
    assert_true(ct_tensor_requires_grad(p));
    CT_ASSERT_ERR(ct_module_register_parameter(m, "p", p) == CT_OK, CT_ERROR_VALUE, "already exists");
    CT_ASSERT_ERR(ct_module_register_buffer(m, "a..b", p) == CT_OK, CT_ERROR_VALUE, "has an empty part");
    CT_ASSERT_ERR(ct_module_register_buffer(m, "", p) == CT_OK, CT_ERROR_VALUE, "empty string");
    CT_ASSERT_ERR(ct_module_register_parameter(m, "i", ct_zeros(CT_SHAPE(2), CT_I64, CT_CPU)) == CT_OK, CT_ERROR_TYPE,
                  "floating point");
    assert_int_equal(ct_module_register_parameter(m, "none", NULL), CT_OK); /* skipped by state_dict */
    assert_int_equal(ct_module_add_child(m, "fc", ct_nn_linear(2, 2, false, CT_F32)), CT_OK);
    /* weight tying: one tensor under two names is one parameter */
    assert_int_equal(ct_module_set_param(ct_module_child(m, "fc"), "weight", p), CT_OK);
    assert_int_equal(ct_module_parameters(m, NULL, NULL, 0), 1);
    ct_value *sd = ct_module_state_dict(m);
    expect_keys(sd, (const char *[]){"p", "fc.weight"}, 2);
    ct_value_free(sd);
    CT_ASSERT_ERR(ct_module_forward(m, p) != NULL, CT_ERROR_NOT_IMPLEMENTED, "forward");
    CT_ASSERT_ERR(ct_module_forward(NULL, p) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_module_set_param(m, "nope", p) == CT_OK, CT_ERROR_VALUE, "no parameter");
    CT_ASSERT_ERR(ct_module_add_child(m, "fc", ct_nn_relu()) == CT_OK, CT_ERROR_VALUE, "already exists");
    ct_module_free(m);
    ct_scope_end();
}

static void test_constructor_errors(void **state) {
    (void)state;
    CT_ASSERT_ERR(ct_nn_linear(-1, 2, true, CT_F32) != NULL, CT_ERROR_VALUE, "non-negative");
    CT_ASSERT_ERR(ct_nn_linear(2, 2, true, CT_I64) != NULL, CT_ERROR_TYPE, "floating-point");
    CT_ASSERT_ERR(ct_nn_conv2d(3, 4, CT_INDEX(3, 3), NULL, NULL, NULL, 2, true, CT_F32) != NULL, CT_ERROR_VALUE,
                  "in_channels must be divisible by groups");
    CT_ASSERT_ERR(ct_nn_conv2d(3, 4, NULL, NULL, NULL, NULL, 1, true, CT_F32) != NULL, CT_ERROR_NULL_ARGUMENT,
                  "kernel_size");
    CT_ASSERT_ERR(ct_nn_batch_norm2d(0, 1e-5, 0.1, true, true, CT_F32) != NULL, CT_ERROR_VALUE, "num_features");
    CT_ASSERT_ERR(ct_nn_layer_norm(NULL, 1, 1e-5, true, CT_F32) != NULL, CT_ERROR_VALUE, "normalized_shape");
    CT_ASSERT_ERR(ct_nn_embedding(5, 3, 5, CT_F32) != NULL, CT_ERROR_VALUE, "Padding_idx");
    CT_ASSERT_ERR(ct_nn_dropout(-0.1) != NULL, CT_ERROR_VALUE, "between 0 and 1");
    CT_ASSERT_ERR(ct_nn_gelu("fast") != NULL, CT_ERROR_VALUE, "none or tanh");
    CT_ASSERT_ERR(ct_nn_max_pool2d(NULL, NULL, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "kernel_size");
    CT_ASSERT_ERR(ct_nn_gpt_block(10, 3, CT_F32) != NULL, CT_ERROR_VALUE, "multiple of n_head");
    ct_module *mods[2] = {ct_nn_relu(), NULL};
    CT_ASSERT_ERR(ct_nn_sequential(mods, 2) != NULL, CT_ERROR_NULL_ARGUMENT, "module 1 is NULL");
    CT_ASSERT_ERR(ct_nn_sequential(NULL, 2) != NULL, CT_ERROR_NULL_ARGUMENT, "modules");
    CT_ASSERT_ERR(ct_module_state_dict(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_module_parameters(NULL, NULL, NULL, 0) >= 0, CT_ERROR_NULL_ARGUMENT, "");
    ct_module_free(NULL);
}

/* ------------------------------------------------------------------ nn.init */

static void test_init(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(11);
    ct_tensor *t = ct_empty(CT_SHAPE(200, 100), CT_F64, CT_CPU);
    int64_t fi, fo;
    assert_int_equal(ct_init_fans(ct_empty(CT_SHAPE(8, 3, 5, 5), CT_F32, CT_CPU), &fi, &fo), CT_OK);
    assert_int_equal(fi, 75);
    assert_int_equal(fo, 200);
    CT_ASSERT_ERR(ct_init_fans(ct_empty(CT_SHAPE(4), CT_F32, CT_CPU), &fi, &fo) == CT_OK, CT_ERROR_VALUE,
                  "fewer than 2 dimensions");
    assert_true(fabs(ct_init_calculate_gain(CT_NONLINEARITY_RELU, 0) - sqrt(2.0)) < 1e-15);
    assert_true(fabs(ct_init_calculate_gain(CT_NONLINEARITY_TANH, 0) - 5.0 / 3) < 1e-15);
    assert_true(fabs(ct_init_calculate_gain(CT_NONLINEARITY_LEAKY_RELU, sqrt(5.0)) - sqrt(1.0 / 3)) < 1e-15);

    CT_ASSERT_OK(ct_init_xavier_uniform_(t, 1.0));
    double a = sqrt(6.0 / 300);
    assert_true(max_abs(t) <= a && max_abs(t) > 0.99 * a);
    CT_ASSERT_OK(ct_init_kaiming_normal_(t, 0, CT_FAN_OUT, CT_NONLINEARITY_RELU));
    double s2 = 0;
    for (int64_t i = 0; i < 20000; i++)
        s2 += ct_test_at(t, i) * ct_test_at(t, i);
    assert_true(fabs(sqrt(s2 / 20000) - sqrt(2.0 / 200)) < 0.03 * sqrt(2.0 / 200));
    CT_ASSERT_OK(ct_init_xavier_normal_(t, 2.0));
    CT_ASSERT_OK(ct_init_trunc_normal_(t, 1.0, 2.0, -0.5, 1.5));
    double lo = 1e9, hi = -1e9;
    for (int64_t i = 0; i < 20000; i++) {
        lo = fmin(lo, ct_test_at(t, i));
        hi = fmax(hi, ct_test_at(t, i));
    }
    assert_true(lo >= -0.5 && hi <= 1.5 && lo < -0.45 && hi > 1.45);
    CT_ASSERT_OK(ct_init_constant_(t, 0.25));
    assert_true(ct_test_at(t, 999) == 0.25);
    CT_ASSERT_OK(ct_init_ones_(t));
    CT_ASSERT_OK(ct_init_zeros_(t));
    assert_true(ct_test_at(t, 5) == 0);
    CT_ASSERT_OK(ct_init_uniform_(t, 2, 3));
    assert_true(ct_test_at(t, 5) >= 2 && ct_test_at(t, 5) < 3);
    CT_ASSERT_OK(ct_init_normal_(t, 0, 1));

    CT_ASSERT_ERR(ct_init_uniform_(ct_zeros(CT_SHAPE(2), CT_I64, CT_CPU), 0, 1) != NULL, CT_ERROR_TYPE,
                  "floating-point");
    CT_ASSERT_ERR(ct_init_kaiming_uniform_(ct_empty(CT_SHAPE(3), CT_F32, CT_CPU), 0, CT_FAN_IN,
                                           CT_NONLINEARITY_RELU) != NULL,
                  CT_ERROR_VALUE, "fewer than 2");
    CT_ASSERT_ERR(ct_init_kaiming_uniform_(t, 0, (ct_fan_mode)5, CT_NONLINEARITY_RELU) != NULL, CT_ERROR_VALUE,
                  "not supported");
    CT_ASSERT_ERR(ct_init_trunc_normal_(t, 0, 1, 2, 1) != NULL, CT_ERROR_VALUE, "a < b");
    CT_ASSERT_ERR(ct_init_normal_(NULL, 0, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    ct_scope_end();
}

/* ------------------------------------------------------------------ Module.to */

#define PARAM(m, child, name) ct_module_param(ct_module_child((m), (child)), (name))

/* a: Linear(3, 3) with bias; b: Linear(3, 3) whose weight is a's (tied); bn:
 * BatchNorm2d(3) with its float and int64 buffers. b's bias is frozen and a's weight
 * has a .grad. */
static ct_module *tied_model(void) {
    ct_module *m = ct_module_new("Tied", NULL, NULL, NULL);
    assert_int_equal(ct_module_add_child(m, "a", ct_nn_linear(3, 3, true, CT_F32)), CT_OK);
    assert_int_equal(ct_module_add_child(m, "b", ct_nn_linear(3, 3, true, CT_F32)), CT_OK);
    assert_int_equal(ct_module_add_child(m, "bn", ct_nn_batch_norm2d(3, 1e-5, 0.1, true, true, CT_F32)), CT_OK);
    assert_int_equal(ct_module_set_param(ct_module_child(m, "b"), "weight", PARAM(m, "a", "weight")), CT_OK);
    ct_tensor_set_requires_grad(PARAM(m, "b", "bias"), false);
    ct_scope_begin();
    assert_int_equal(ct_tensor_set_grad(PARAM(m, "a", "weight"), ct_full(CT_SHAPE(3, 3), ct_scalar_float(0.5), CT_F32,
                                                                         CT_CPU)),
                     CT_OK);
    ct_scope_end();
    return m;
}

static void test_module_to_meta(void **state) {
    (void)state;
    ct_module *m = tied_model();
    ct_tensor *w0 = PARAM(m, "a", "weight");
    assert_int_equal(ct_module_to(m, CT_META, CT_DTYPE_UNDEFINED), CT_OK);
    ct_tensor *w = PARAM(m, "a", "weight");
    assert_ptr_not_equal(w, w0);
    assert_ptr_equal(PARAM(m, "b", "weight"), w); /* still tied: one new tensor */
    assert_int_equal(ct_module_parameters(m, NULL, NULL, 0), 5);
    assert_true(ct_device_equal(ct_module_device(m), CT_META));
    ct_scope_begin();
    ct_value *sd = ct_module_state_dict(m);
    for (int64_t i = 0; i < ct_value_len(sd); i++) {
        ct_tensor *t = ct_value_tensor(ct_value_at(sd, i));
        assert_true(ct_device_equal(ct_tensor_device(t), CT_META));
    }
    ct_value_free(sd);
    ct_scope_end();
    /* leaves with their requires_grad; the grad moved along */
    assert_true(ct_tensor_is_leaf(w) && ct_tensor_requires_grad(w));
    assert_false(ct_tensor_requires_grad(PARAM(m, "b", "bias")));
    assert_true(ct_tensor_requires_grad(PARAM(m, "a", "bias")));
    assert_false(ct_tensor_requires_grad(ct_module_buffer(ct_module_child(m, "bn"), "running_mean")));
    ct_scope_begin();
    ct_tensor *g = ct_tensor_grad(w);
    assert_non_null(g);
    assert_true(ct_device_equal(ct_tensor_device(g), CT_META));
    CT_ASSERT_SHAPE(g, 3, 3);
    assert_null(ct_tensor_grad(PARAM(m, "a", "bias")));
    ct_scope_end();
    /* integer buffers move, and keep their dtype under a dtype change */
    assert_int_equal(ct_module_to(m, CT_META, CT_F16), CT_OK);
    ct_tensor *nbt = ct_module_buffer(ct_module_child(m, "bn"), "num_batches_tracked");
    assert_int_equal(ct_tensor_dtype(nbt), CT_I64);
    assert_true(ct_device_equal(ct_tensor_device(nbt), CT_META));
    assert_int_equal(ct_tensor_dtype(PARAM(m, "a", "weight")), CT_F16);
    assert_ptr_equal(PARAM(m, "b", "weight"), PARAM(m, "a", "weight"));
    assert_false(ct_tensor_requires_grad(PARAM(m, "b", "bias")));
    ct_scope_begin();
    ct_tensor *g16 = ct_tensor_grad(PARAM(m, "a", "weight"));
    assert_non_null(g16);
    assert_int_equal(ct_tensor_dtype(g16), CT_F16);
    ct_scope_end();
    /* a meta tensor has no data to bring back: an error, and the module stays as it was */
    ct_tensor *before = PARAM(m, "a", "weight");
    CT_ASSERT_ERR(ct_module_to(m, CT_CPU, CT_DTYPE_UNDEFINED) == CT_OK, CT_ERROR_DEVICE,
                  "cannot copy out of meta tensor");
    assert_ptr_equal(PARAM(m, "a", "weight"), before);
    assert_true(ct_device_equal(ct_module_device(m), CT_META));
    ct_module_free(m);
}

static void test_module_to_dtype(void **state) {
    (void)state;
    ct_module *m = tied_model();
    ct_scope_begin();
    ct_tensor *w32 = ct_clone(PARAM(m, "a", "weight"));
    ct_tensor *w0 = PARAM(m, "a", "weight");
    /* nothing to do: every tensor stays itself */
    assert_int_equal(ct_module_to(m, CT_CPU, CT_DTYPE_UNDEFINED), CT_OK);
    assert_int_equal(ct_module_to(m, CT_CPU, CT_F32), CT_OK);
    assert_int_equal(ct_module_float(m), CT_OK);
    assert_ptr_equal(PARAM(m, "a", "weight"), w0);
    assert_int_equal(ct_module_double(m), CT_OK);
    ct_tensor *w = PARAM(m, "a", "weight");
    assert_int_equal(ct_tensor_dtype(w), CT_F64);
    assert_ptr_equal(PARAM(m, "b", "weight"), w);
    for (int64_t i = 0; i < 9; i++)
        assert_true(ct_test_at(w, i) == ct_test_at(w32, i));
    assert_true(ct_test_at(ct_tensor_grad(w), 4) == 0.5);
    assert_int_equal(ct_tensor_dtype(ct_module_buffer(ct_module_child(m, "bn"), "num_batches_tracked")), CT_I64);
    assert_int_equal(ct_tensor_dtype(ct_module_buffer(ct_module_child(m, "bn"), "running_var")), CT_F64);
    /* the old tensor is the caller's pointer no more: the module holds the new one only */
    assert_int_equal(ct_module_half(m), CT_OK);
    assert_int_equal(ct_tensor_dtype(PARAM(m, "a", "bias")), CT_F16);
    assert_int_equal(ct_module_bfloat16(m), CT_OK);
    assert_int_equal(ct_tensor_dtype(PARAM(m, "bn", "weight")), CT_BF16);
    assert_true(ct_tensor_is_leaf(PARAM(m, "a", "weight")) && ct_tensor_requires_grad(PARAM(m, "a", "weight")));
    assert_false(ct_tensor_requires_grad(PARAM(m, "b", "bias")));
    /* a module that works after the conversion: forward in bfloat16 */
    ct_tensor *y = ct_module_forward(ct_module_child(m, "a"), ct_ones(CT_SHAPE(2, 3), CT_BF16, CT_CPU));
    CT_ASSERT_OK(y);
    assert_int_equal(ct_tensor_dtype(y), CT_BF16);
    ct_scope_end();

    /* errors leave the module unchanged */
    ct_tensor *before = PARAM(m, "a", "weight");
    CT_ASSERT_ERR(ct_module_to(m, CT_CPU, CT_I64) == CT_OK, CT_ERROR_TYPE,
                  "only accepts floating point or complex dtypes, but got desired dtype=torch.int64");
    CT_ASSERT_ERR(ct_module_to(m, ct_device_make((ct_device_type)7, 0), CT_F32) == CT_OK, CT_ERROR_DEVICE,
                  "unknown device type 7");
    CT_ASSERT_ERR(ct_module_to(m, ct_device_make(CT_DEVICE_CPU, 2), CT_F32) == CT_OK, CT_ERROR_DEVICE,
                  "invalid device index 2");
    CT_ASSERT_ERR(ct_module_to(m, CT_CUDA(-1), CT_F32) == CT_OK, CT_ERROR_DEVICE, "invalid device index -1");
    if (!ct_cuda_is_available())
        assert_no_cuda_error(ct_module_to(m, CT_CUDA(0), CT_F32) != CT_OK);
    assert_ptr_equal(PARAM(m, "a", "weight"), before);
    assert_int_equal(ct_tensor_dtype(before), CT_BF16);
    CT_ASSERT_ERR(ct_module_to(NULL, CT_CPU, CT_F32) == CT_OK, CT_ERROR_NULL_ARGUMENT, "module is NULL");
    CT_ASSERT_ERR(ct_module_half(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "module is NULL");
    CT_ASSERT_ERR(ct_module_bfloat16(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "module is NULL");
    CT_ASSERT_ERR(ct_module_float(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "module is NULL");
    CT_ASSERT_ERR(ct_module_double(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "module is NULL");
    ct_clear_error();
    assert_true(ct_device_equal(ct_module_device(NULL), CT_CPU));
    assert_int_equal(ct_last_status(), CT_ERROR_NULL_ARGUMENT);
    ct_module_free(m);

    /* a failure half way (one child on meta, one on the CPU) undoes nothing because
     * nothing was swapped in: the CPU child keeps its float32 tensors */
    ct_module *mixed = ct_module_new("Mixed", NULL, NULL, NULL);
    assert_int_equal(ct_module_add_child(mixed, "cpu", ct_nn_linear(2, 2, true, CT_F32)), CT_OK);
    assert_int_equal(ct_module_add_child(mixed, "meta", ct_nn_linear(2, 2, true, CT_F32)), CT_OK);
    assert_int_equal(ct_module_to(ct_module_child(mixed, "meta"), CT_META, CT_DTYPE_UNDEFINED), CT_OK);
    ct_tensor *cw = PARAM(mixed, "cpu", "weight");
    CT_ASSERT_ERR(ct_module_to(mixed, CT_CPU, CT_F64) == CT_OK, CT_ERROR_DEVICE, "meta");
    assert_ptr_equal(PARAM(mixed, "cpu", "weight"), cw);
    assert_int_equal(ct_tensor_dtype(cw), CT_F32);
    /* an empty module has nothing to move; its device is the CPU */
    ct_module *empty = ct_nn_relu();
    assert_int_equal(ct_module_to(empty, CT_META, CT_F16), CT_OK);
    assert_true(ct_device_equal(ct_module_device(empty), CT_CPU));
    assert_true(ct_device_equal(ct_module_device(mixed), CT_CPU));
    ct_module_free(empty);
    ct_module_free(mixed);
}

static void *default_device_of_thread(void *arg) {
    *(ct_device *)arg = ct_get_default_device();
    return NULL;
}

static void test_default_device(void **state) {
    (void)state;
    assert_true(ct_device_equal(ct_get_default_device(), CT_CPU));
    assert_int_equal(ct_set_default_device(CT_META), CT_OK);
    /* per thread: another thread still sees the CPU */
    ct_device other = CT_META;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, default_device_of_thread, &other), 0);
    pthread_join(th, NULL);
    assert_true(ct_device_equal(other, CT_CPU));
    ct_module *lin = ct_nn_linear(4, 3, true, CT_DTYPE_UNDEFINED);
    ct_module *bn = ct_nn_batch_norm2d(3, 1e-5, 0.1, true, true, CT_F32);
    ct_module *gpt = ct_nn_gpt_block(8, 2, CT_F32);
    ct_module *emb = ct_nn_embedding(5, 3, 1, CT_F32);
    ct_module *conv = ct_nn_conv2d(2, 4, CT_INDEX(3, 3), NULL, NULL, NULL, 1, true, CT_F32);
    ct_module *rms = ct_nn_rms_norm(CT_INDEX(3), 1, -1, true, CT_F32);
    /* a factory given its device keeps it */
    ct_scope_begin();
    ct_tensor *z = ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU);
    assert_true(ct_device_equal(ct_tensor_device(z), CT_CPU));
    ct_scope_end();
    assert_int_equal(ct_set_default_device(CT_CPU), CT_OK);
    ct_module *ms[] = {lin, bn, gpt, emb, conv, rms};
    for (int k = 0; k < 6; k++) {
        assert_non_null(ms[k]);
        ct_scope_begin();
        ct_value *sd = ct_module_state_dict(ms[k]);
        assert_true(ct_value_len(sd) > 0);
        for (int64_t i = 0; i < ct_value_len(sd); i++)
            assert_true(ct_device_equal(ct_tensor_device(ct_value_tensor(ct_value_at(sd, i))), CT_META));
        ct_value_free(sd);
        ct_scope_end();
        assert_true(ct_device_equal(ct_module_device(ms[k]), CT_META));
        if (ms[k] == bn)
            assert_int_equal(ct_tensor_dtype(ct_module_buffer(bn, "num_batches_tracked")), CT_I64);
        ct_module_free(ms[k]);
    }
    /* back on the CPU, a layer is on the CPU again */
    ct_module *cpu = ct_nn_linear(2, 2, false, CT_F32);
    assert_true(ct_device_equal(ct_module_device(cpu), CT_CPU));
    ct_module_free(cpu);

    CT_ASSERT_ERR(ct_set_default_device(ct_device_make((ct_device_type)9, 0)) == CT_OK, CT_ERROR_DEVICE,
                  "unknown device type 9");
    CT_ASSERT_ERR(ct_set_default_device(ct_device_make(CT_DEVICE_META, 1)) == CT_OK, CT_ERROR_DEVICE,
                  "invalid device index 1 for device type meta");
    CT_ASSERT_ERR(ct_set_default_device(CT_CUDA(-2)) == CT_OK, CT_ERROR_DEVICE, "invalid device index -2");
    assert_true(ct_device_equal(ct_get_default_device(), CT_CPU));
    if (!ct_cuda_is_available()) {
        /* an absent device can be the default; the layer made there fails with the backend's error */
        assert_int_equal(ct_set_default_device(CT_CUDA(0)), CT_OK);
        assert_no_cuda_error(ct_nn_linear(2, 2, true, CT_F32) == NULL);
        assert_no_cuda_error(ct_nn_batch_norm2d(2, 1e-5, 0.1, false, true, CT_F32) == NULL);
        assert_int_equal(ct_set_default_device(CT_CPU), CT_OK);
    }
}

/* Note [Module paths in errors]: a failure names the module's dotted path and type
 * once, the innermost failing module; the layer op's own message follows. */
static ct_tensor *block_forward(ct_module *m, const ct_tensor *x) {
    return ct_module_forward(ct_module_child(m, "mlp"), x);
}

static void test_error_names_module_path(void **state) {
    (void)state;
    /* blocks.1.mlp is a Sequential whose second layer (fc, index 1) takes 5 features */
    ct_module *blocks = ct_module_new("ModuleList", NULL, NULL, NULL);
    ct_module *model = ct_module_new("Model", NULL, NULL, NULL);
    assert_non_null(blocks);
    for (int i = 0; i < 2; i++) {
        ct_module *layers[2] = {ct_nn_linear(3, 3, true, CT_F32), ct_nn_linear(i == 1 ? 5 : 3, 2, true, CT_F32)};
        ct_module *block = ct_module_new("Block", block_forward, NULL, NULL);
        assert_int_equal(ct_module_add_child(block, "mlp", ct_nn_sequential(layers, 2)), CT_OK);
        char name[8];
        snprintf(name, sizeof name, "%d", i);
        assert_int_equal(ct_module_add_child(blocks, name, block), CT_OK);
    }
    assert_int_equal(ct_module_add_child(model, "blocks", blocks), CT_OK);
    ct_scope_begin();
    ct_tensor *x = ct_ones(CT_SHAPE(4, 3), CT_F32, CT_CPU);
    ct_module *b0 = ct_module_child(blocks, "0"), *b1 = ct_module_child(blocks, "1");
    /* a model's forward runs its blocks as children: emulate it with an outer frame */
    CT_ASSERT_OK(ct_module_forward(b0, x));
    CT_ASSERT_ERR(ct_module_forward(b1, x) != NULL, CT_ERROR_VALUE,
                  "mlp.1 (Linear): linear: mat1 and mat2 shapes cannot be multiplied (4x3 and 5x2)");
    /* the path starts at the outermost module running, and a success clears the mark */
    ct_module *layers[1] = {b1};
    ct_module_retain(b1);
    ct_module *seq = ct_nn_sequential(layers, 1);
    CT_ASSERT_ERR(ct_module_forward(seq, x) != NULL, CT_ERROR_VALUE,
                  "0.mlp.1 (Linear): linear: mat1 and mat2 shapes cannot be multiplied");
    CT_ASSERT_OK(ct_module_forward(b0, x));
    /* an error of the outermost module names its type only */
    CT_ASSERT_ERR(ct_module_forward(ct_module_child(ct_module_child(b1, "mlp"), "1"), x) != NULL, CT_ERROR_VALUE,
                  "Linear: linear: mat1 and mat2 shapes cannot be multiplied");
    /* a NULL input is an earlier failure, reported unchanged */
    ct_error(CT_ERROR_VALUE, "mul", "an earlier failure");
    assert_null(ct_module_forward(seq, NULL));
    assert_string_equal(ct_last_error(), "mul: an earlier failure");
    ct_clear_error();
    ct_scope_end();
    ct_module_free(seq);
    ct_module_free(model);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_error_names_module_path),
        cmocka_unit_test(test_conv2d_module),
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_norms_embedding_dropout),
        cmocka_unit_test(test_sequential_cnn_golden),
        cmocka_unit_test(test_gpt_block_golden),
        cmocka_unit_test(test_state_dict_round_trip),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_registration),
        cmocka_unit_test(test_constructor_errors),
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_module_to_meta),
        cmocka_unit_test(test_module_to_dtype),
        cmocka_unit_test(test_default_device),
    };
    return cmocka_run_group_tests(tests, load, free_golden);
}
