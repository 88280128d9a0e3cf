/* Recurrent layers (src/nn/rnn.c): ct_lstm / ct_gru / ct_rnn_tanh / ct_rnn_relu and the
 * RNN, LSTM and GRU modules against PyTorch (tests/golden/gen_rnn.py: forward values,
 * final states and the gradients of inputs, initial states and every parameter, in
 * float64 and float32), state dict keys and shapes, gradcheck, lengths (packed
 * sequence) semantics, dropout, error inputs, META and, where there is a GPU, CUDA. */
#include "nn_golden.h"
#include "ctorch/ext.h"

/* torch.allclose as a bool (false on error). */
static bool allclose(const ct_tensor *a, const ct_tensor *b, double rtol, double atol) {
    bool r = false;
    return ct_allclose(a, b, rtol, atol, false, &r) == CT_OK && r;
}

static int load(void **state) {
    (void)state;
    return load_golden_file(CT_TEST_DATA_DIR "/rnn_golden.txt");
}

enum { K_TANH = 0, K_RELU = 1, K_LSTM = 2, K_GRU = 3 };

typedef struct cfg {
    int kind, num_layers;
    int64_t input_size, hidden_size, proj_size;
    bool bias, batch_first, bidirectional;
} cfg;

static cfg case_cfg(const gcase *c) {
    const gt *t = find(c, "cfg");
    assert_non_null(t);
    return (cfg){.kind = (int)t->v[0],
                 .input_size = (int64_t)t->v[1],
                 .hidden_size = (int64_t)t->v[2],
                 .num_layers = (int)t->v[3],
                 .bias = t->v[4] != 0,
                 .batch_first = t->v[5] != 0,
                 .bidirectional = t->v[6] != 0,
                 .proj_size = (int64_t)t->v[7]};
}

static bool is_param_name(const char *n) { return !strncmp(n, "weight_", 7) || !strncmp(n, "bias_", 5); }

/* The case's parameters in state dict order (= PyTorch's flat weight order). */
static int case_params(const gcase *c, const char **names, int cap) {
    int n = 0;
    for (int i = 0; i < c->n; i++)
        if (is_param_name(c->t[i].name)) {
            assert_true(n < cap);
            names[n++] = c->t[i].name;
        }
    return n;
}

static ct_tensor *on(ct_tensor *t, ct_dtype dt, ct_device dev) { return t ? ct_to_device(ct_to_dtype(t, dt), dev) : NULL; }

/* Runs the functional form of the case's kind. */
static ct_status call_fn(const cfg *k, const ct_tensor *x, const ct_tensor *h0, const ct_tensor *c0,
                         const ct_tensor *lengths, ct_tensor *const *params, int np, double dropout, bool train,
                         ct_tensor **y, ct_tensor **hn, ct_tensor **cn) {
    switch (k->kind) {
    case K_LSTM:
        return ct_lstm(x, h0, c0, lengths, params, np, k->bias, k->num_layers, dropout, train, k->bidirectional,
                       k->batch_first, y, hn, cn);
    case K_GRU:
        return ct_gru(x, h0, lengths, params, np, k->bias, k->num_layers, dropout, train, k->bidirectional,
                      k->batch_first, y, hn);
    case K_TANH:
        return ct_rnn_tanh(x, h0, lengths, params, np, k->bias, k->num_layers, dropout, train, k->bidirectional,
                           k->batch_first, y, hn);
    default:
        return ct_rnn_relu(x, h0, lengths, params, np, k->bias, k->num_layers, dropout, train, k->bidirectional,
                           k->batch_first, y, hn);
    }
}

static ct_module *make_module(const cfg *k, ct_dtype dt) {
    switch (k->kind) {
    case K_LSTM:
        return ct_nn_lstm(k->input_size, k->hidden_size, k->num_layers, k->bias, k->batch_first, 0.0,
                          k->bidirectional, k->proj_size, dt);
    case K_GRU:
        return ct_nn_gru(k->input_size, k->hidden_size, k->num_layers, k->bias, k->batch_first, 0.0,
                         k->bidirectional, dt);
    default:
        return ct_nn_rnn(k->input_size, k->hidden_size, k->num_layers, k->kind == K_TANH ? "tanh" : "relu", k->bias,
                         k->batch_first, 0.0, k->bidirectional, dt);
    }
}

static ct_status call_module(const cfg *k, ct_module *m, const ct_tensor *x, const ct_tensor *h0, const ct_tensor *c0,
                             const ct_tensor *lengths, ct_tensor **y, ct_tensor **hn, ct_tensor **cn) {
    if (k->kind == K_LSTM)
        return ct_nn_lstm_forward(m, x, h0, c0, lengths, y, hn, cn);
    if (k->kind == K_GRU)
        return ct_nn_gru_forward(m, x, h0, lengths, y, hn);
    return ct_nn_rnn_forward(m, x, h0, lengths, y, hn);
}

/* One golden case through the functional API, in dtype dt on device dev, against
 * PyTorch's float64 values with tolerance tol: the forward and, with backward, the
 * gradients; without, the forward alone in inference mode, nothing requiring grad. */
static void run_golden_mode(const gcase *c, ct_dtype dt, ct_device dev, double tol, bool backward) {
    cfg k = case_cfg(c);
    ct_scope_begin();
    const char *names[64];
    int np = case_params(c, names, 64);
    ct_tensor *params[64];
    for (int i = 0; i < np; i++)
        params[i] = ct_tensor_set_requires_grad(on(T(c, names[i]), dt, dev), backward);
    ct_tensor *x = ct_tensor_set_requires_grad(on(T(c, "x"), dt, dev), backward);
    ct_tensor *h0 = find(c, "h0") ? ct_tensor_set_requires_grad(on(T(c, "h0"), dt, dev), backward) : NULL;
    ct_tensor *c0 = find(c, "c0") ? ct_tensor_set_requires_grad(on(T(c, "c0"), dt, dev), backward) : NULL;
    ct_tensor *lengths = find(c, "lengths") ? I(c, "lengths") : NULL;
    ct_tensor *y = NULL, *hn = NULL, *cn = NULL;
    if (!backward)
        ct_inference_mode_begin();
    ct_status st = call_fn(&k, x, h0, c0, lengths, params, np, 0.0, backward, &y, &hn, k.kind == K_LSTM ? &cn : NULL);
    if (!backward)
        ct_inference_mode_end();
    if (st != CT_OK)
        fail_msg("%s: %s", c->name, ct_last_error());
    expect(c, "y", y, tol);
    expect(c, "hn", hn, tol);
    if (k.kind == K_LSTM)
        expect(c, "cn", cn, tol);
    if (!backward) {
        ct_scope_end();
        return;
    }

    const ct_tensor *outs[3] = {y, hn, cn};
    const ct_tensor *gouts[3] = {on(T(c, "gy"), dt, dev), on(T(c, "ghn"), dt, dev),
                                 k.kind == K_LSTM ? on(T(c, "gcn"), dt, dev) : NULL};
    const ct_tensor *ins[64 + 3];
    const char *gnames[64 + 3];
    int ni = 0;
    ins[ni] = x, gnames[ni++] = "gx";
    if (h0)
        ins[ni] = h0, gnames[ni++] = "gh0";
    if (c0)
        ins[ni] = c0, gnames[ni++] = "gc0";
    char gbuf[64][72];
    for (int i = 0; i < np; i++) {
        snprintf(gbuf[i], sizeof gbuf[i], "g%s", names[i]);
        ins[ni] = params[i], gnames[ni++] = gbuf[i];
    }
    ct_tensor *grads[64 + 3] = {NULL};
    if (ct_autograd_grad(outs, k.kind == K_LSTM ? 3 : 2, ins, ni, gouts, false, false, true, grads) != CT_OK)
        fail_msg("%s: backward: %s", c->name, ct_last_error());
    for (int i = 0; i < ni; i++) {
        if (!grads[i]) /* unused: PyTorch's zeros */
            grads[i] = ct_zeros_like(ins[i], CT_DTYPE_UNDEFINED);
        expect(c, gnames[i], grads[i], tol);
    }
    ct_scope_end();
}

static void run_golden(const gcase *c, ct_dtype dt, ct_device dev, double tol) { run_golden_mode(c, dt, dev, tol, true); }

static void test_golden_float64(void **state) {
    (void)state;
    for (int i = 0; i < ncases; i++)
        run_golden(&cases[i], CT_F64, CT_CPU, 1e-6);
}

static void test_golden_float32(void **state) {
    (void)state;
    for (int i = 0; i < ncases; i++)
        run_golden(&cases[i], CT_F32, CT_CPU, 1e-5);
}

/* The same with the recurrent weights prepacked for oneDNN's matmul whatever the CPU
 * (Note [Prepacked recurrent weights] in src/cpu/packed_mm.c; by default only where
 * its kernel is brgemm), forward and backward. */
static void test_golden_float32_packed(void **state) {
    (void)state;
    setenv("CT_PACKED_MM", "1", 1);
    for (int i = 0; i < ncases; i++)
        run_golden(&cases[i], CT_F32, CT_CPU, 1e-5);
    unsetenv("CT_PACKED_MM");
}

/* The forward alone in inference mode: on float32 CPU tensors an LSTM layer without
 * lengths runs oneDNN's LSTM primitive where the build has oneDNN (Note [LSTM inference
 * on oneDNN] in src/cpu/rnn_onednn.c), the others the fused recurrence; both against
 * PyTorch's values. */
static void test_golden_inference(void **state) {
    (void)state;
    for (int off = 0; off < 2; off++) {
        setenv("CT_ONEDNN_RNN", off ? "0" : "1", 1); /* "1": at any thread count */
        for (int i = 0; i < ncases; i++)
            run_golden_mode(&cases[i], CT_F32, CT_CPU, 1e-5, false);
    }
    unsetenv("CT_ONEDNN_RNN");
}

/* ct_lstm_layer_onednn (ctorch/ext.h) alone: the same values as the fused recurrence
 * in both directions and layouts, and CT_ERROR_NOT_IMPLEMENTED, with nothing
 * computed, where it does not apply. */
static void test_lstm_layer_onednn(void **state) {
    (void)state;
    ct_scope_begin();
    const int64_t Tn = 5, B = 3, In = 4, H = 6;
    ct_tensor *wih = ct_randn(CT_SHAPE(4 * H, In), CT_F32, CT_CPU), *whh = ct_randn(CT_SHAPE(4 * H, H), CT_F32, CT_CPU);
    ct_tensor *b = ct_randn(CT_SHAPE(4 * H), CT_F32, CT_CPU), *x = ct_randn(CT_SHAPE(Tn * B, In), CT_F32, CT_CPU);
    ct_tensor *h0 = ct_randn(CT_SHAPE(B, H), CT_F32, CT_CPU), *c0 = ct_randn(CT_SHAPE(B, H), CT_F32, CT_CPU);
    ct_tensor *hall = NULL, *cn = NULL;
    bool have = strstr(ct_build_info(), "float32 GEMM: oneDNN") != NULL;
    int threads = ct_get_num_threads();
    ct_set_num_threads(1);
    setenv("CT_ONEDNN_RNN", "1", 1); /* on any CPU */
    for (int tdim = 0; tdim < 2; tdim++)
        for (int rev = 0; rev < 2; rev++) {
            ct_status st = ct_lstm_layer_onednn(x, tdim, Tn, B, wih, b, whh, h0, c0, rev, &hall, &cn);
            if (!have) {
                assert_int_equal(st, CT_ERROR_NOT_IMPLEMENTED);
                ct_clear_error();
                continue;
            }
            assert_int_equal(st, CT_OK);
            /* the reference: the same layer through ct_lstm on ops, time-major input */
            ct_tensor *xs = tdim ? ct_reshape(x, CT_SHAPE(B, Tn, In)) : ct_reshape(x, CT_SHAPE(Tn, B, In));
            ct_tensor *xt = tdim ? ct_transpose(xs, 0, 1) : xs;
            ct_tensor *params[4] = {wih, whh, b, ct_zeros(CT_SHAPE(4 * H), CT_F32, CT_CPU)};
            ct_tensor *y = NULL, *hn = NULL, *cref = NULL;
            ct_tensor *xg = ct_tensor_set_requires_grad(ct_clone(xt), true); /* recorded: not oneDNN */
            assert_int_equal(ct_lstm(xg, ct_unsqueeze(h0, 0), ct_unsqueeze(c0, 0), NULL, params, 4, true, 1, 0.0,
                                     false, false, false, &y, &hn, &cref),
                             CT_OK);
            if (rev) { /* a reversed layer is the forward one over the reversed sequence */
                ct_tensor *yr = NULL;
                assert_int_equal(ct_lstm(ct_flip(xg, (int64_t[]){0}, 1), ct_unsqueeze(h0, 0), ct_unsqueeze(c0, 0),
                                         NULL, params, 4, true, 1, 0.0, false, false, false, &yr, &hn, &cref),
                                 CT_OK);
                y = ct_flip(yr, (int64_t[]){0}, 1);
            }
            ct_tensor *dy = ct_abs(ct_sub(hall, ct_detach(y)));
            ct_tensor *dc = ct_abs(ct_sub(cn, ct_detach(ct_select(cref, 0, 0))));
            assert_true(ct_test_at(ct_amax(dy, NULL, 0, false), 0) < 1e-5);
            assert_true(ct_test_at(ct_amax(dc, NULL, 0, false), 0) < 1e-5);
        }
    unsetenv("CT_ONEDNN_RNN");
    /* where it does not apply */
    ct_tensor *x64 = ct_to_dtype(x, CT_F64);
    CT_ASSERT_ERR(ct_lstm_layer_onednn(x64, 0, Tn, B, wih, b, whh, h0, c0, false, &hall, &cn) == CT_OK,
                  CT_ERROR_NOT_IMPLEMENTED, "does not apply");
    ct_tensor *wg = ct_tensor_set_requires_grad(ct_clone(wih), true);
    CT_ASSERT_ERR(ct_lstm_layer_onednn(x, 0, Tn, B, wg, b, whh, h0, c0, false, &hall, &cn) == CT_OK,
                  CT_ERROR_NOT_IMPLEMENTED, "does not apply");
    CT_ASSERT_ERR(ct_lstm_layer_onednn(x, 0, Tn + 1, B, wih, b, whh, h0, c0, false, &hall, &cn) == CT_OK,
                  CT_ERROR_NOT_IMPLEMENTED, "does not apply");
    CT_ASSERT_ERR(ct_lstm_layer_onednn(x, 0, Tn, B, wih, b, whh, ct_t(c0), c0, false, &hall, &cn) == CT_OK,
                  CT_ERROR_NOT_IMPLEMENTED, "does not apply"); /* (H, B) state */
    CT_ASSERT_ERR(ct_lstm_layer_onednn(x, 0, Tn, B, wih, ct_narrow(b, 0, 0, H), whh, h0, c0, false, &hall, &cn) ==
                      CT_OK,
                  CT_ERROR_NOT_IMPLEMENTED, "does not apply"); /* a bias too short */
    setenv("CT_ONEDNN_RNN", "0", 1);
    CT_ASSERT_ERR(ct_lstm_layer_onednn(x, 0, Tn, B, wih, b, whh, h0, c0, false, &hall, &cn) == CT_OK,
                  CT_ERROR_NOT_IMPLEMENTED, "does not apply");
    unsetenv("CT_ONEDNN_RNN");
    ct_set_num_threads(2); /* more threads (or no AVX-512): the fused recurrence instead */
    CT_ASSERT_ERR(ct_lstm_layer_onednn(x, 0, Tn, B, wih, b, whh, h0, c0, false, &hall, &cn) == CT_OK,
                  CT_ERROR_NOT_IMPLEMENTED, "does not apply");
    setenv("CT_ONEDNN_RNN", "1", 1);
    assert_int_equal(ct_lstm_layer_onednn(x, 0, Tn, B, wih, b, whh, h0, c0, false, &hall, &cn) == CT_OK, have);
    ct_clear_error();
    unsetenv("CT_ONEDNN_RNN");
    ct_set_num_threads(threads);
    CT_ASSERT_ERR(ct_lstm_layer_onednn(NULL, 0, Tn, B, wih, b, whh, h0, c0, false, &hall, &cn) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "lstm_layer_onednn");
    CT_ASSERT_ERR(ct_lstm_layer_onednn(x, 0, Tn, B, wih, b, whh, h0, c0, false, NULL, &cn) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "lstm_layer_onednn");
    ct_scope_end();
}

/* The modules: PyTorch's state dict keys, order and shapes, loading PyTorch's state
 * dict, and the forward functions against the goldens. */
static void test_golden_modules(void **state) {
    (void)state;
    for (int ci = 0; ci < ncases; ci++) {
        const gcase *c = &cases[ci];
        cfg k = case_cfg(c);
        ct_scope_begin(); /* ct_value_tensor's references */
        ct_module *m = make_module(&k, CT_F64);
        if (!m)
            fail_msg("%s: %s", c->name, ct_last_error());
        const char *names[64];
        int np = case_params(c, names, 64);
        ct_value *sd = ct_module_state_dict(m);
        assert_int_equal(ct_value_len(sd), np);
        ct_value *load = ct_value_new_dict();
        for (int i = 0; i < np; i++) {
            const char *key = ct_value_str(ct_value_key_at(sd, i), NULL);
            if (strcmp(key, names[i]))
                fail_msg("%s: state dict key %d is %s, PyTorch's %s", c->name, i, key, names[i]);
            ct_tensor *mine = ct_value_tensor(ct_value_get(sd, key));
            const gt *want = find(c, names[i]);
            assert_int_equal(ct_tensor_dim(mine), want->ndim);
            for (int d = 0; d < want->ndim; d++)
                assert_int_equal(ct_tensor_size(mine, d), want->shape[d]);
            ct_value_set(load, names[i], ct_value_new_tensor(T(c, names[i])));
        }
        ct_value_free(sd);
        if (ct_module_load_state_dict(m, load, true, NULL, NULL) != CT_OK)
            fail_msg("%s: load_state_dict: %s", c->name, ct_last_error());
        ct_value_free(load);

        ct_scope_begin();
        ct_tensor *y = NULL, *hn = NULL, *cn = NULL;
        ct_tensor *h0 = find(c, "h0") ? T(c, "h0") : NULL, *c0 = find(c, "c0") ? T(c, "c0") : NULL;
        ct_tensor *lengths = find(c, "lengths") ? I(c, "lengths") : NULL;
        if (call_module(&k, m, T(c, "x"), h0, c0, lengths, &y, &hn, &cn) != CT_OK)
            fail_msg("%s: %s", c->name, ct_last_error());
        expect(c, "y", y, 1e-6);
        expect(c, "hn", hn, 1e-6);
        if (k.kind == K_LSTM)
            expect(c, "cn", cn, 1e-6);
        if (!h0 && !lengths) /* the one-in, one-out forward: zero states */
            expect(c, "y", ct_module_forward(m, T(c, "x")), 1e-6);
        ct_scope_end();
        ct_module_free(m);
        ct_scope_end();
    }
}

/* Hand-written key lists, as PyTorch prints them. */
static void test_state_dict_names(void **state) {
    (void)state;
    ct_scope_begin(); /* ct_value_tensor's references */
    ct_module *m = ct_nn_lstm(10, 20, 2, true, false, 0.0, true, 5, CT_F32);
    assert_non_null(m);
    const char *keys[] = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0",
                          "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse",
                          "bias_hh_l0_reverse", "weight_hr_l0_reverse", "weight_ih_l1", "weight_hh_l1",
                          "bias_ih_l1", "bias_hh_l1", "weight_hr_l1", "weight_ih_l1_reverse",
                          "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse",
                          "weight_hr_l1_reverse"};
    const int64_t shapes[][2] = {{80, 10}, {80, 5}, {80, 0}, {80, 0}, {5, 20}, {80, 10}, {80, 5}, {80, 0},
                                 {80, 0},  {5, 20}, {80, 10}, {80, 5}, {80, 0}, {80, 0}, {5, 20}, {80, 10},
                                 {80, 5},  {80, 0}, {80, 0},  {5, 20}};
    ct_value *sd = ct_module_state_dict(m);
    assert_int_equal(ct_value_len(sd), 20);
    for (int i = 0; i < 20; i++) {
        assert_string_equal(ct_value_str(ct_value_key_at(sd, i), NULL), keys[i]);
        ct_tensor *t = ct_value_tensor(ct_value_get(sd, keys[i]));
        int64_t want0 = shapes[i][0], want1 = shapes[i][1];
        if (i % 5 == 0 && i >= 10) /* layer 1's input is both directions' projections */
            want1 = 10;
        assert_int_equal(ct_tensor_dim(t), want1 ? 2 : 1);
        assert_int_equal(ct_tensor_size(t, 0), want0);
        if (want1)
            assert_int_equal(ct_tensor_size(t, 1), want1);
        assert_int_equal(ct_tensor_dtype(t), CT_F32);
    }
    ct_value_free(sd);
    ct_module_free(m);

    m = ct_nn_gru(4, 3, 1, false, true, 0.0, false, CT_DTYPE_UNDEFINED);
    sd = ct_module_state_dict(m);
    assert_int_equal(ct_value_len(sd), 2);
    assert_string_equal(ct_value_str(ct_value_key_at(sd, 0), NULL), "weight_ih_l0");
    assert_string_equal(ct_value_str(ct_value_key_at(sd, 1), NULL), "weight_hh_l0");
    assert_int_equal(ct_tensor_size(ct_value_tensor(ct_value_get(sd, "weight_ih_l0")), 0), 9);
    assert_string_equal(ct_module_type(m), "GRU");
    ct_value_free(sd);
    ct_module_free(m);

    m = ct_nn_rnn(4, 3, 1, NULL, true, false, 0.0, false, CT_F64);
    assert_string_equal(ct_module_type(m), "RNN");
    assert_int_equal(ct_module_num_parameters(m), 3 * 4 + 3 * 3 + 3 + 3);
    ct_module_free(m);
    ct_scope_end();
}

/* reset_parameters: U(-1/sqrt(hidden), 1/sqrt(hidden)) for every parameter. */
static void test_init(void **state) {
    (void)state;
    ct_manual_seed(3);
    ct_module *m = ct_nn_lstm(7, 16, 2, true, false, 0.0, true, 0, CT_F64);
    ct_tensor *p[32];
    int64_t n = ct_module_parameters(m, p, NULL, 32);
    assert_int_equal(n, 16);
    for (int64_t i = 0; i < n; i++) {
        double lo = 1, hi = -1;
        for (int64_t j = 0; j < ct_tensor_numel(p[i]); j++) {
            double v = ct_test_at(p[i], j);
            lo = fmin(lo, v), hi = fmax(hi, v);
        }
        assert_true(lo >= -0.25 && hi <= 0.25);
        assert_true(hi - lo > 0.3); /* spread over the interval */
        assert_true(ct_tensor_requires_grad(p[i]));
    }
    ct_module_free(m);
}

/* ------------------------------------------------------------------ gradcheck */

typedef struct gc_ctx {
    cfg k;
    int np;
    bool has_h0, has_c0;
    const ct_tensor *lengths;
} gc_ctx;

/* inputs: x, [h0], [c0], params...; the result: y, hn and cn flattened into one. */
static ct_tensor *gc_fn(ct_tensor *const *in, int n, void *ud) {
    gc_ctx *g = ud;
    int i = 1;
    ct_tensor *h0 = g->has_h0 ? in[i++] : NULL, *c0 = g->has_c0 ? in[i++] : NULL;
    ct_tensor *y, *hn, *cn = NULL;
    if (call_fn(&g->k, in[0], h0, c0, g->lengths, in + i, n - i, 0.0, true, &y, &hn,
                g->k.kind == K_LSTM ? &cn : NULL) != CT_OK)
        return NULL;
    const ct_tensor *parts[3] = {ct_flatten(y, 0, -1), ct_flatten(hn, 0, -1), cn ? ct_flatten(cn, 0, -1) : NULL};
    return ct_cat(parts, cn ? 3 : 2, 0);
}

/* gradcheck, and with twice gradgradcheck too (second derivatives, through the fused
 * node's backward under create_graph on the CPU in float64). */
static void gradcheck_twice(cfg k, const int64_t *xshape, int xnd, bool h0, const int64_t *lens, bool twice) {
    ct_scope_begin();
    ct_manual_seed(11);
    ct_module *m = make_module(&k, CT_F64);
    assert_non_null(m);
    ct_tensor *in[40];
    int n = 0;
    in[n++] = ct_tensor_set_requires_grad(ct_randn(xshape, xnd, CT_F64, CT_CPU), true);
    int D = k.bidirectional ? 2 : 1;
    bool batched = xnd == 3;
    int64_t B = batched ? xshape[k.batch_first ? 0 : 1] : 0;
    int64_t P = k.proj_size ? k.proj_size : k.hidden_size;
    gc_ctx g = {.k = k, .has_h0 = h0, .has_c0 = h0 && k.kind == K_LSTM};
    if (h0) {
        int64_t s[3] = {k.num_layers * D, B, P};
        if (!batched)
            s[1] = P;
        in[n++] = ct_tensor_set_requires_grad(ct_randn(s, batched ? 3 : 2, CT_F64, CT_CPU), true);
        if (k.kind == K_LSTM) {
            s[batched ? 2 : 1] = k.hidden_size;
            in[n++] = ct_tensor_set_requires_grad(ct_randn(s, batched ? 3 : 2, CT_F64, CT_CPU), true);
        }
    }
    ct_tensor *p[32];
    int64_t np = ct_module_parameters(m, p, NULL, 32);
    for (int64_t i = 0; i < np; i++)
        in[n++] = ct_tensor_set_requires_grad(ct_clone(ct_detach(p[i])), true);
    g.np = (int)np;
    g.lengths = lens ? ct_from_data(lens, CT_SHAPE(B), CT_I64) : NULL;
    /* fused eagerly, ops under capture (ct_rnn_fused_applies): rounding apart */
    ct_test_through_compile_tol(gc_fn, &g, in, n, "rnn sample", 1e-12);
    if (ct_gradcheck(gc_fn, &g, in, n, 1e-6, 1e-7, 1e-5) != CT_OK)
        fail_msg("gradcheck kind %d: %s", k.kind, ct_last_error());
    if (twice && ct_gradgradcheck(gc_fn, &g, in, n, 1e-6, 1e-6, 1e-4) != CT_OK)
        fail_msg("gradgradcheck kind %d: %s", k.kind, ct_last_error());
    ct_module_free(m);
    ct_scope_end();
}

static void gradcheck_one(cfg k, const int64_t *xshape, int xnd, bool h0, const int64_t *lens) {
    gradcheck_twice(k, xshape, xnd, h0, lens, false);
}

static void test_gradcheck(void **state) {
    (void)state;
    int64_t lens[2] = {3, 1};
    /* (gradcheck takes at most 16 inputs) LSTM: bidirectional, projections, h0/c0,
     * lengths; 2 layers, batch_first */
    gradcheck_one((cfg){.kind = K_LSTM, .num_layers = 1, .input_size = 2, .hidden_size = 3, .proj_size = 2,
                        .bias = true, .bidirectional = true},
                  CT_SHAPE(3, 2, 2), true, lens);
    gradcheck_one((cfg){.kind = K_LSTM, .num_layers = 2, .input_size = 2, .hidden_size = 2, .bias = true,
                        .batch_first = true},
                  CT_SHAPE(2, 3, 2), false, lens);
    /* GRU: batch_first, bidirectional, h0 */
    gradcheck_one((cfg){.kind = K_GRU, .num_layers = 1, .input_size = 2, .hidden_size = 3, .bias = true,
                        .batch_first = true, .bidirectional = true},
                  CT_SHAPE(2, 3, 2), true, NULL);
    /* GRU without biases, lengths */
    gradcheck_one((cfg){.kind = K_GRU, .num_layers = 2, .input_size = 2, .hidden_size = 2}, CT_SHAPE(3, 2, 2), false,
                  lens);
    /* RNN tanh, 2 layers; RNN relu unbatched */
    gradcheck_one((cfg){.kind = K_TANH, .num_layers = 2, .input_size = 2, .hidden_size = 3, .bias = true},
                  CT_SHAPE(3, 2, 2), true, NULL);
    gradcheck_one((cfg){.kind = K_RELU, .num_layers = 1, .input_size = 3, .hidden_size = 2, .bias = true,
                        .bidirectional = true},
                  CT_SHAPE(4, 3), true, NULL);
}

/* ------------------------------------------------------------------ lengths */

/* Each sequence run alone on its first lengths[b] steps gives the same final state,
 * and the same outputs up to its length; the outputs past it are zero. Full lengths
 * are the same as none. */
static void test_lengths_semantics(void **state) {
    (void)state;
    for (int kind = K_TANH; kind <= K_GRU; kind++) {
        ct_scope_begin();
        ct_manual_seed(5 + (uint64_t)kind);
        cfg k = {.kind = kind, .num_layers = 2, .input_size = 3, .hidden_size = 4, .bias = true,
                 .bidirectional = true, .batch_first = kind == K_GRU};
        ct_module *m = make_module(&k, CT_F64);
        const int64_t T = 6, B = 3;
        int64_t lens[3] = {4, 6, 1}, full[3] = {6, 6, 6};
        ct_tensor *x = k.batch_first ? ct_randn(CT_SHAPE(B, T, 3), CT_F64, CT_CPU)
                                     : ct_randn(CT_SHAPE(T, B, 3), CT_F64, CT_CPU);
        ct_tensor *h0 = ct_randn(CT_SHAPE(4, B, 4), CT_F64, CT_CPU);
        ct_tensor *c0 = kind == K_LSTM ? ct_randn(CT_SHAPE(4, B, 4), CT_F64, CT_CPU) : NULL;
        ct_tensor *y, *hn, *cn = NULL, *y2, *hn2, *cn2 = NULL;
        assert_int_equal(call_module(&k, m, x, h0, c0, ct_from_data(lens, CT_SHAPE(3), CT_I64), &y, &hn, &cn), CT_OK);
        ct_tensor *yt = k.batch_first ? ct_transpose(y, 0, 1) : y; /* (T, B, 8) */
        for (int64_t b = 0; b < B; b++) {
            ct_tensor *xb = ct_narrow(ct_select(x, k.batch_first ? 0 : 1, b), 0, 0, lens[b]); /* (len, 3) */
            ct_tensor *yb, *hb, *cb = NULL;
            assert_int_equal(call_module(&k, m, xb, ct_select(h0, 1, b), c0 ? ct_select(c0, 1, b) : NULL, NULL, &yb,
                                         &hb, &cb),
                             CT_OK);
            ct_tensor *got = ct_narrow(ct_select(yt, 1, b), 0, 0, lens[b]);
            assert_true(allclose(got, yb, 1e-12, 1e-12));
            assert_true(allclose(ct_select(hn, 1, b), hb, 1e-12, 1e-12));
            if (cb)
                assert_true(allclose(ct_select(cn, 1, b), cb, 1e-12, 1e-12));
            if (lens[b] < T) {
                double s;
                ct_item_double(ct_sum(ct_abs(ct_narrow(ct_select(yt, 1, b), 0, lens[b], T - lens[b])), NULL, 0,
                                      false, CT_DTYPE_UNDEFINED),
                               &s);
                assert_true(s == 0);
            }
        }
        assert_int_equal(call_module(&k, m, x, h0, c0, ct_from_data(full, CT_SHAPE(3), CT_I64), &y, &hn, &cn), CT_OK);
        assert_int_equal(call_module(&k, m, x, h0, c0, NULL, &y2, &hn2, &cn2), CT_OK);
        assert_true(allclose(y, y2, 0, 0));
        assert_true(allclose(hn, hn2, 0, 0));
        /* int32 lengths are read the same way */
        int32_t l32[3] = {4, 6, 1};
        assert_int_equal(call_module(&k, m, x, h0, c0, ct_from_data(l32, CT_SHAPE(3), CT_I32), &y2, &hn2, &cn2),
                         CT_OK);
        ct_module_free(m);
        ct_scope_end();
    }
}

/* ------------------------------------------------------------------ dropout, outputs */

static void test_dropout_and_results(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(2);
    ct_module *m = ct_nn_lstm(3, 8, 3, true, false, 0.5, false, 0, CT_F64);
    ct_tensor *x = ct_randn(CT_SHAPE(5, 2, 3), CT_F64, CT_CPU);
    ct_tensor *a = ct_module_forward(m, x), *b = ct_module_forward(m, x);
    CT_ASSERT_OK(a);
    assert_false(allclose(a, b, 0, 0)); /* training: a new mask each call */
    ct_module_train(m, false);
    a = ct_module_forward(m, x), b = ct_module_forward(m, x);
    assert_true(allclose(a, b, 0, 0));
    /* eval equals the functional form without dropout */
    ct_tensor *p[16];
    int np = (int)ct_module_parameters(m, p, NULL, 16);
    ct_tensor *y;
    assert_int_equal(ct_lstm(x, NULL, NULL, NULL, p, np, true, 3, 0.0, true, false, false, &y, NULL, NULL), CT_OK);
    assert_true(allclose(a, y, 0, 0));
    /* training with dropout still differentiates */
    ct_module_train(m, true);
    ct_tensor *loss = ct_sum(ct_module_forward(m, x), NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    assert_non_null(ct_tensor_grad(p[0]));
    /* dropout on a one-layer module does nothing (no layer above it) */
    ct_module *one = ct_nn_gru(3, 4, 1, true, false, 1.0, false, CT_F64);
    a = ct_module_forward(one, x);
    ct_module_train(one, false);
    b = ct_module_forward(one, x);
    assert_true(allclose(a, b, 0, 0));
    /* results not asked for may be NULL pointers */
    ct_tensor *hn;
    assert_int_equal(ct_nn_gru_forward(one, x, NULL, NULL, NULL, &hn), CT_OK);
    CT_ASSERT_SHAPE(hn, 1, 2, 4);
    /* an empty batch: empty results, as PyTorch */
    ct_tensor *cn;
    assert_int_equal(ct_nn_lstm_forward(m, ct_zeros(CT_SHAPE(5, 0, 3), CT_F64, CT_CPU), NULL, NULL, NULL, &y, &hn,
                                        &cn),
                     CT_OK);
    CT_ASSERT_SHAPE(y, 5, 0, 8);
    CT_ASSERT_SHAPE(hn, 3, 0, 8);
    CT_ASSERT_SHAPE(cn, 3, 0, 8);
    /* batch_first output is (B, T, D * P) */
    ct_module *bf = ct_nn_rnn(3, 4, 1, "relu", true, true, 0.0, true, CT_F64);
    CT_ASSERT_SHAPE(ct_module_forward(bf, ct_randn(CT_SHAPE(2, 7, 3), CT_F64, CT_CPU)), 2, 7, 8);
    ct_module_free(bf);
    ct_module_free(one);
    ct_module_free(m);
    ct_scope_end();
}

/* ------------------------------------------------------------------ fused path */

/* The fused CPU recurrence (Note [Fused recurrence] in src/nn/rnn_fused.c) at a size
 * where its pointwise passes run on several threads: float32 against float64 with the
 * same weights, forward and every gradient, for each kind (lengths, bidirectional and
 * batch_first on some). The second size pads the float64 gates' gradient rows and not
 * the float32 ones (Note [Padded gate gradients]: 4 * 64 and 3 * 256 float64 are
 * multiples of 2 KiB), so each padded run is checked against an unpadded one. */
static void test_fused_float32_vs_float64(void **state) {
    (void)state;
    for (int size = 0; size < 2; size++)
    for (int kind = K_TANH; kind <= K_GRU; kind++) {
        ct_scope_begin();
        ct_manual_seed(40 + (uint64_t)kind);
        cfg k = {.kind = kind, .num_layers = 2, .input_size = 5, .bias = kind != K_RELU,
                 .hidden_size = size == 0 ? 160 : kind == K_LSTM ? 64 : 256,
                 .bidirectional = kind != K_TANH, .batch_first = kind == K_GRU};
        ct_module *m = make_module(&k, CT_F64);
        assert_non_null(m);
        const int64_t T = 6, B = 32;
        ct_tensor *x64 = k.batch_first ? ct_randn(CT_SHAPE(B, T, 5), CT_F64, CT_CPU)
                                       : ct_randn(CT_SHAPE(T, B, 5), CT_F64, CT_CPU);
        int64_t lens[32];
        for (int b = 0; b < B; b++)
            lens[b] = 1 + (b * 5) % T;
        const ct_tensor *lengths = kind == K_TANH || kind == K_LSTM ? ct_from_data(lens, CT_SHAPE(B), CT_I64) : NULL;
        ct_tensor *p64[16], *p32[16], *ins64[17], *ins32[17];
        int np = (int)ct_module_parameters(m, p64, NULL, 16);
        for (int i = 0; i < np; i++) {
            ins64[i + 1] = ct_tensor_set_requires_grad(ct_clone(ct_detach(p64[i])), true);
            ins32[i + 1] = ct_tensor_set_requires_grad(ct_to_dtype(ct_detach(p64[i]), CT_F32), true);
            p64[i] = ins64[i + 1];
            p32[i] = ins32[i + 1];
        }
        ins64[0] = ct_tensor_set_requires_grad(x64, true);
        ins32[0] = ct_tensor_set_requires_grad(ct_to_dtype(ct_detach(x64), CT_F32), true);
        ct_tensor *w = NULL, *g64[17], *g32[17];
        for (int pass = 0; pass < 2; pass++) {
            ct_tensor **in = pass ? ins32 : ins64, **p = pass ? p32 : p64, *y, *hn, *cn = NULL;
            assert_int_equal(call_fn(&k, in[0], NULL, NULL, lengths, p, np, 0.0, true, &y, &hn,
                                     kind == K_LSTM ? &cn : NULL),
                             CT_OK);
            if (!w)
                w = ct_randn(ct_tensor_shape(y), 3, CT_F64, CT_CPU);
            ct_tensor *loss = ct_add(ct_sum(ct_mul(ct_to_dtype(y, CT_F64), w), NULL, 0, false, CT_DTYPE_UNDEFINED),
                                     ct_sum(ct_to_dtype(hn, CT_F64), NULL, 0, false, CT_DTYPE_UNDEFINED));
            if (cn)
                loss = ct_add(loss, ct_sum(ct_to_dtype(cn, CT_F64), NULL, 0, false, CT_DTYPE_UNDEFINED));
            const ct_tensor *outs[1] = {loss};
            assert_int_equal(ct_autograd_grad(outs, 1, (const ct_tensor *const *)in, np + 1, NULL, false, false,
                                              false, pass ? g32 : g64),
                             CT_OK);
        }
        for (int i = 0; i < np + 1; i++)
            if (!allclose(ct_to_dtype(g32[i], CT_F64), g64[i], 1e-3, 1e-4))
                fail_msg("kind %d, hidden %lld: gradient %d differs between float32 and float64", kind,
                         (long long)k.hidden_size, i);
        ct_module_free(m);
        ct_scope_end();
    }
}

/* Non-finite inputs through the fused float32 gates: a NaN spreads through its own
 * sequence only, infinities saturate the gates (finite outputs) as in float64. */
static void test_fused_nonfinite(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(9);
    ct_module *m = ct_nn_lstm(3, 4, 1, true, false, 0.0, false, 0, CT_F32);
    ct_tensor *x = ct_randn(CT_SHAPE(3, 2, 3), CT_F32, CT_CPU);
    assert_int_equal(ct_tensor_set(x, CT_INDEX(1, 0, 2), NAN), CT_OK);
    assert_int_equal(ct_tensor_set(x, CT_INDEX(0, 1, 0), INFINITY), CT_OK);
    assert_int_equal(ct_tensor_set(x, CT_INDEX(2, 1, 1), -INFINITY), CT_OK);
    ct_tensor *y = ct_module_forward(m, x);
    CT_ASSERT_OK(y);
    for (int64_t t = 0; t < 3; t++)
        for (int64_t j = 0; j < 4; j++) {
            double v0, v1;
            assert_int_equal(ct_tensor_get(y, CT_INDEX(t, 0, j), &v0), CT_OK);
            assert_int_equal(ct_tensor_get(y, CT_INDEX(t, 1, j), &v1), CT_OK);
            assert_true(t == 0 ? isfinite(v0) : isnan(v0));
            assert_true(isfinite(v1));
        }
    ct_module_double(m);
    assert_true(allclose(ct_narrow(ct_module_forward(m, ct_to_dtype(x, CT_F64)), 1, 1, 1),
                         ct_to_dtype(ct_narrow(y, 1, 1, 1), CT_F64), 1e-5, 1e-6));
    ct_module_free(m);
    ct_scope_end();
}

/* Note [Double backward through the fused recurrence]: under create_graph the fused
 * node's backward is the layer again as ops, so second derivatives hold (gradgradcheck
 * against finite differences of the first derivatives) for every kind, with lengths,
 * batch_first, h0/c0 and two directions; and a first derivative taken with
 * create_graph equals the plain one. */
static void test_fused_double_backward(void **state) {
    (void)state;
    int64_t lens[2] = {3, 1};
    gradcheck_twice((cfg){.kind = K_LSTM, .num_layers = 1, .input_size = 2, .hidden_size = 2, .bias = true,
                          .bidirectional = true, .batch_first = true},
                    CT_SHAPE(2, 3, 2), true, lens, true);
    gradcheck_twice((cfg){.kind = K_GRU, .num_layers = 2, .input_size = 2, .hidden_size = 2, .bias = true},
                    CT_SHAPE(3, 2, 2), true, NULL, true);
    gradcheck_twice((cfg){.kind = K_GRU, .num_layers = 1, .input_size = 2, .hidden_size = 2}, CT_SHAPE(3, 2, 2),
                    false, lens, true);
    gradcheck_twice((cfg){.kind = K_TANH, .num_layers = 1, .input_size = 2, .hidden_size = 3, .bias = true},
                    CT_SHAPE(3, 2, 2), true, NULL, true);
    gradcheck_twice((cfg){.kind = K_RELU, .num_layers = 1, .input_size = 3, .hidden_size = 2, .bias = true},
                    CT_SHAPE(4, 3), false, NULL, true);

    for (int kind = K_TANH; kind <= K_GRU; kind++) {
        ct_scope_begin();
        ct_manual_seed(3);
        cfg k = {.kind = kind, .num_layers = 2, .input_size = 3, .hidden_size = 4, .bias = true,
                 .bidirectional = kind == K_LSTM, .batch_first = kind == K_GRU};
        ct_module *m = make_module(&k, CT_F64);
        assert_non_null(m);
        ct_tensor *x = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(5, 2, 3), CT_F64, CT_CPU), true);
        ct_tensor *y = ct_module_forward(m, x);
        CT_ASSERT_OK(y);
        const ct_tensor *outs[1] = {ct_sum(ct_mul(y, y), NULL, 0, false, CT_DTYPE_UNDEFINED)};
        const ct_tensor *ins[17] = {x};
        int64_t np = ct_module_parameters(m, (ct_tensor **)ins + 1, NULL, 16);
        assert_true(np >= 4);
        int n = (int)np + 1;
        ct_tensor *g1[17], *g2[17];
        assert_int_equal(ct_autograd_grad(outs, 1, ins, n, NULL, true, true, false, g1), CT_OK);
        assert_int_equal(ct_autograd_grad(outs, 1, ins, n, NULL, true, false, false, g2), CT_OK);
        ct_tensor *pen = NULL;
        for (int i = 0; i < n; i++) {
            assert_true(ct_tensor_requires_grad(g1[i])); /* functions of x and the weights */
            assert_true(allclose(g1[i], g2[i], 1e-12, 1e-12));
            ct_tensor *sq = ct_sum(ct_mul(g1[i], g1[i]), NULL, 0, false, CT_DTYPE_UNDEFINED);
            pen = pen ? ct_add(pen, sq) : sq;
        }
        /* a gradient penalty reaches every weight */
        assert_int_equal(ct_backward(pen, NULL, false, false), CT_OK);
        for (int i = 1; i < n; i++) {
            ct_tensor *gp = ct_tensor_grad(ins[i]);
            assert_non_null(gp);
            double n1;
            assert_int_equal(ct_item_double(ct_sum(ct_abs(gp), NULL, 0, false, CT_DTYPE_UNDEFINED), &n1), CT_OK);
            assert_true(n1 > 0);
        }
        ct_module_free(m);
        ct_scope_end();
    }
}

/* Shapes only, on META (the ops' META kernels). */
static void test_meta(void **state) {
    (void)state;
    ct_scope_begin();
    ct_module *m = ct_nn_lstm(3, 6, 2, true, true, 0.0, true, 4, CT_F32);
    assert_int_equal(ct_module_to(m, CT_META, CT_DTYPE_UNDEFINED), CT_OK);
    ct_tensor *y, *hn, *cn;
    ct_tensor *x = ct_empty(CT_SHAPE(5, 9, 3), CT_F32, CT_META);
    if (ct_nn_lstm_forward(m, x, NULL, NULL, NULL, &y, &hn, &cn) != CT_OK)
        fail_msg("%s", ct_last_error());
    CT_ASSERT_SHAPE(y, 5, 9, 8);
    CT_ASSERT_SHAPE(hn, 4, 5, 4);
    CT_ASSERT_SHAPE(cn, 4, 5, 6);
    assert_int_equal(ct_tensor_device(y).type, CT_DEVICE_META);
    ct_module_free(m);
    ct_scope_end();
}

/* ------------------------------------------------------------------ errors */

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_module *m = ct_nn_lstm(3, 4, 2, true, false, 0.0, false, 0, CT_F64);
    ct_tensor *x = ct_randn(CT_SHAPE(5, 2, 3), CT_F64, CT_CPU);
    ct_tensor *y = NULL, *hn = NULL, *cn = NULL;
#define LSTM_F(in, h, c, l) ct_nn_lstm_forward(m, (in), (h), (c), (l), &y, &hn, &cn)
    /* wrong input size, dims, dtype */
    CT_ASSERT_ERR(LSTM_F(ct_randn(CT_SHAPE(5, 2, 4), CT_F64, CT_CPU), NULL, NULL, NULL) == CT_OK, CT_ERROR_VALUE,
                  "input.size(-1) must be equal to input_size. Expected 3, got 4");
    assert_null(y);
    CT_ASSERT_ERR(LSTM_F(ct_randn(CT_SHAPE(1, 5, 2, 3), CT_F64, CT_CPU), NULL, NULL, NULL) == CT_OK, CT_ERROR_VALUE,
                  "Expected input to be 2D or 3D, got 4D instead");
    CT_ASSERT_ERR(LSTM_F(ct_zeros(CT_SHAPE(5, 2, 3), CT_I64, CT_CPU), NULL, NULL, NULL) == CT_OK, CT_ERROR_TYPE,
                  "RNN input dtype (int64) does not match weight dtype (float64)");
    CT_ASSERT_ERR(LSTM_F(ct_randn(CT_SHAPE(5, 2, 3), CT_F32, CT_CPU), NULL, NULL, NULL) == CT_OK, CT_ERROR_TYPE,
                  "RNN input dtype (float32) does not match weight dtype (float64)");
    CT_ASSERT_ERR(LSTM_F(ct_empty(CT_SHAPE(0, 2, 3), CT_F64, CT_CPU), NULL, NULL, NULL) == CT_OK, CT_ERROR_VALUE,
                  "Expected sequence length to be larger than 0");
    CT_ASSERT_ERR(LSTM_F(NULL, NULL, NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "");
    /* wrong h0 / c0 */
    CT_ASSERT_ERR(LSTM_F(x, ct_zeros(CT_SHAPE(1, 2, 4), CT_F64, CT_CPU), NULL, NULL) == CT_OK, CT_ERROR_VALUE,
                  "Expected hidden[0] size (2, 2, 4), got [1, 2, 4]");
    CT_ASSERT_ERR(LSTM_F(x, NULL, ct_zeros(CT_SHAPE(2, 3, 4), CT_F64, CT_CPU), NULL) == CT_OK, CT_ERROR_VALUE,
                  "Expected hidden[1] size (2, 2, 4), got [2, 3, 4]");
    CT_ASSERT_ERR(LSTM_F(x, ct_zeros(CT_SHAPE(2, 4), CT_F64, CT_CPU), NULL, NULL) == CT_OK, CT_ERROR_VALUE,
                  "For batched 3-D input, hx should also be 3-D but got 2-D tensor");
    CT_ASSERT_ERR(LSTM_F(ct_randn(CT_SHAPE(5, 3), CT_F64, CT_CPU), ct_zeros(CT_SHAPE(2, 1, 4), CT_F64, CT_CPU), NULL,
                         NULL) == CT_OK,
                  CT_ERROR_VALUE, "For unbatched 2-D input, hx should also be 2-D but got 3-D tensor");
    CT_ASSERT_ERR(LSTM_F(x, ct_zeros(CT_SHAPE(2, 2, 4), CT_F32, CT_CPU), NULL, NULL) == CT_OK, CT_ERROR_TYPE,
                  "does not match the dtype of hidden[0]");
    /* lengths */
    int64_t l0[2] = {0, 5}, l6[2] = {6, 2}, l3[3] = {1, 2, 3};
    double lf[2] = {1, 2};
    CT_ASSERT_ERR(LSTM_F(x, NULL, NULL, ct_from_data(l0, CT_SHAPE(2), CT_I64)) == CT_OK, CT_ERROR_VALUE,
                  "Length of all samples has to be greater than 0");
    CT_ASSERT_ERR(LSTM_F(x, NULL, NULL, ct_from_data(l6, CT_SHAPE(2), CT_I64)) == CT_OK, CT_ERROR_VALUE,
                  "lengths[0] is 6, more than the input's 5 time steps");
    CT_ASSERT_ERR(LSTM_F(x, NULL, NULL, ct_from_data(l3, CT_SHAPE(3), CT_I64)) == CT_OK, CT_ERROR_VALUE,
                  "Expected `len(lengths)` to be equal to batch_size");
    CT_ASSERT_ERR(LSTM_F(x, NULL, NULL, ct_from_data(lf, CT_SHAPE(2), CT_F64)) == CT_OK, CT_ERROR_TYPE,
                  "lengths must be an integer tensor, got float64");
    CT_ASSERT_ERR(LSTM_F(ct_randn(CT_SHAPE(5, 3), CT_F64, CT_CPU), NULL, NULL,
                         ct_from_data(l3, CT_SHAPE(1), CT_I64)) == CT_OK,
                  CT_ERROR_VALUE, "lengths need batched (3-D) input");
    /* the forward functions take their own kind of module */
    ct_tensor *h;
    CT_ASSERT_ERR(ct_nn_gru_forward(m, x, NULL, NULL, &y, &h) == CT_OK, CT_ERROR_VALUE,
                  "expected a GRU module made by ct_nn_gru, got LSTM");
    ct_module *lin = ct_nn_linear(3, 3, true, CT_F64);
    CT_ASSERT_ERR(ct_nn_lstm_forward(lin, x, NULL, NULL, NULL, &y, &hn, &cn) == CT_OK, CT_ERROR_VALUE,
                  "expected a LSTM module made by ct_nn_lstm, got Linear");
    ct_module_free(lin);
    CT_ASSERT_ERR(ct_nn_rnn_forward(NULL, x, NULL, NULL, &y, &h) == CT_OK, CT_ERROR_NULL_ARGUMENT, "module is NULL");
#undef LSTM_F

    /* functional: parameter lists, num_layers, dropout */
    ct_tensor *p[8];
    int np = (int)ct_module_parameters(m, p, NULL, 8);
    assert_int_equal(np, 8);
    CT_ASSERT_ERR(ct_lstm(x, NULL, NULL, NULL, p, 6, true, 2, 0.0, false, false, false, &y, &hn, &cn) == CT_OK,
                  CT_ERROR_VALUE, "expected 8 parameters (4 per layer and direction, one more with projections)");
    CT_ASSERT_ERR(ct_lstm(x, NULL, NULL, NULL, p, 8, true, 0, 0.0, false, false, false, &y, &hn, &cn) == CT_OK,
                  CT_ERROR_VALUE, "num_layers must be greater than zero");
    CT_ASSERT_ERR(ct_lstm(x, NULL, NULL, NULL, p, 8, true, 2, 1.5, false, false, false, &y, &hn, &cn) == CT_OK,
                  CT_ERROR_VALUE, "dropout should be a number in range [0, 1]");
    CT_ASSERT_ERR(ct_lstm(x, NULL, NULL, NULL, p, 8, true, 2, NAN, false, false, false, &y, &hn, &cn) == CT_OK,
                  CT_ERROR_VALUE, "dropout should be a number in range [0, 1]");
    CT_ASSERT_ERR(ct_gru(x, NULL, NULL, p, 8, true, 2, 0.0, false, false, false, &y, &hn) == CT_OK, CT_ERROR_VALUE,
                  "weight_hh_l0 has shape [16, 4], expected (3 * hidden_size, hidden_size)");
    ct_tensor *swapped[8] = {p[0], p[1], p[2], p[3], p[0], p[5], p[6], p[7]}; /* layer 1's weight_ih is (16, 3) */
    CT_ASSERT_ERR(ct_lstm(x, NULL, NULL, NULL, swapped, 8, true, 2, 0.0, false, false, false, &y, &hn, &cn) == CT_OK,
                  CT_ERROR_VALUE, "weight_ih_l1 has shape [16, 3], expected [16, 4]");
    ct_tensor *holes[8] = {p[0], p[1], NULL, p[3], p[4], p[5], p[6], p[7]};
    CT_ASSERT_ERR(ct_lstm(x, NULL, NULL, NULL, holes, 8, true, 2, 0.0, false, false, false, &y, &hn, &cn) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "parameter 2 is NULL");
    CT_ASSERT_ERR(ct_rnn_tanh(ct_zeros(CT_SHAPE(5, 2, 3), CT_I32, CT_CPU), NULL, NULL, p, 2, false, 1, 0.0, false, false,
                              false, &y, &hn) == CT_OK,
                  CT_ERROR_TYPE, "expected a floating-point input, got int32");
    ct_module_free(m);

    /* constructors */
    CT_ASSERT_ERR(ct_nn_lstm(3, 0, 1, true, false, 0.0, false, 0, CT_F32) != NULL, CT_ERROR_VALUE,
                  "hidden_size must be greater than zero");
    CT_ASSERT_ERR(ct_nn_gru(0, 4, 1, true, false, 0.0, false, CT_F32) != NULL, CT_ERROR_VALUE,
                  "input_size must be greater than zero");
    CT_ASSERT_ERR(ct_nn_rnn(3, 4, 0, "tanh", true, false, 0.0, false, CT_F32) != NULL, CT_ERROR_VALUE,
                  "num_layers must be greater than zero");
    CT_ASSERT_ERR(ct_nn_rnn(3, 4, -2, "tanh", true, false, 0.0, false, CT_F32) != NULL, CT_ERROR_VALUE,
                  "num_layers must be greater than zero");
    CT_ASSERT_ERR(ct_nn_gru(3, 4, 2, true, false, -0.1, false, CT_F32) != NULL, CT_ERROR_VALUE,
                  "dropout should be a number in range [0, 1] representing the probability of an element being zeroed");
    CT_ASSERT_ERR(ct_nn_lstm(3, 4, 2, true, false, 1.01, false, 0, CT_F32) != NULL, CT_ERROR_VALUE,
                  "dropout should be a number in range [0, 1]");
    CT_ASSERT_ERR(ct_nn_rnn(3, 4, 1, "sigmoid", true, false, 0.0, false, CT_F32) != NULL, CT_ERROR_VALUE,
                  "Unknown nonlinearity 'sigmoid'. Select from 'tanh' or 'relu'.");
    CT_ASSERT_ERR(ct_nn_lstm(3, 4, 1, true, false, 0.0, false, 4, CT_F32) != NULL, CT_ERROR_VALUE,
                  "proj_size has to be smaller than hidden_size");
    CT_ASSERT_ERR(ct_nn_lstm(3, 4, 1, true, false, 0.0, false, -1, CT_F32) != NULL, CT_ERROR_VALUE,
                  "proj_size should be a positive integer or zero to disable projections");
    CT_ASSERT_ERR(ct_nn_lstm(3, 4, 1, true, false, 0.0, false, 0, CT_I64) != NULL, CT_ERROR_TYPE,
                  "parameters must have a floating-point dtype, got int64");
    CT_ASSERT_ERR(ct_nn_gru(3, 4, 1, true, false, 0.0, false, CT_BOOL) != NULL, CT_ERROR_TYPE,
                  "parameters must have a floating-point dtype, got bool");
    ct_clear_error();
    ct_scope_end();
}

/* cuDNN's ops exist in every build but have kernels only where the CUDA backend found
 * libcudnn: elsewhere a call is an error that names the op, never a crash, and the
 * switches read as PyTorch's. */
static void test_cudnn_ops_off_gpu(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_zeros(CT_SHAPE(5, 2, 3), CT_F32, CT_CPU), *h = ct_zeros(CT_SHAPE(1, 2, 4), CT_F32, CT_CPU);
    ct_tensor *w = ct_zeros(CT_SHAPE(16 * 3 + 16 * 4 + 32), CT_F32, CT_CPU);
    ct_tensor *o = x, *hy = x, *cy = x, *r = x;
    CT_ASSERT_ERR(ct_cudnn_rnn(x, w, h, h, NULL, CT_CUDNN_RNN_LSTM, 4, 1, false, false, true, true, &o, &hy, &cy,
                               &r) == CT_OK,
                  CT_ERROR_NOT_IMPLEMENTED, "_cudnn_rnn");
    assert_null(o), assert_null(hy), assert_null(cy), assert_null(r);
    CT_ASSERT_ERR(ct_cudnn_rnn(NULL, w, h, h, NULL, CT_CUDNN_RNN_LSTM, 4, 1, false, false, true, true, &o, &hy, &cy,
                               &r) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_cudnn_rnn(x, w, h, h, NULL, CT_CUDNN_RNN_LSTM, 4, 1, false, false, true, true, NULL, &hy, &cy,
                               &r) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "output and hy");
    ct_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    CT_ASSERT_ERR(ct_cudnn_rnn_backward(x, w, h, h, NULL, x, x, h, h, w, CT_CUDNN_RNN_LSTM, 4, 1, false, false, true,
                                        &a, &b, &c, &d) == CT_OK,
                  CT_ERROR_NOT_IMPLEMENTED, "_cudnn_rnn_backward");
    CT_ASSERT_ERR(ct_cudnn_rnn_backward(x, w, h, h, NULL, x, x, h, h, NULL, CT_CUDNN_RNN_LSTM, 4, 1, false, false,
                                        true, &a, &b, &c, &d) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, "");
    ct_clear_error();
    /* the library loaded, if any (a CUDA build may find one on a machine without a GPU) */
    assert_true(ct_backends_cudnn_version() >= 0);
    assert_true(ct_backends_cudnn_is_available() == (ct_backends_cudnn_version() > 0));
    bool was = ct_backends_cudnn_enabled();
    ct_backends_cudnn_set_enabled(false);
    assert_false(ct_backends_cudnn_enabled());
    ct_backends_cudnn_set_enabled(true);
    assert_true(ct_backends_cudnn_enabled());
    ct_backends_cudnn_set_enabled(was);
    ct_scope_end();
}

/* ------------------------------------------------------------------ CUDA */

/* The goldens on the GPU (float64 and float32), through the same ops. */
static void test_cuda(void **state) {
    (void)state;
    if (!ct_cuda_is_available()) {
        skip();
        return;
    }
    for (int i = 0; i < ncases; i++) {
        run_golden(&cases[i], CT_F64, CT_CUDA(0), 1e-6);
        run_golden(&cases[i], CT_F32, CT_CUDA(0), 1e-5);
    }
    /* a module moved to the GPU */
    ct_scope_begin();
    const gcase *c = &cases[0];
    cfg k = case_cfg(c);
    ct_module *m = make_module(&k, CT_F32);
    assert_int_equal(ct_module_to(m, CT_CUDA(0), CT_DTYPE_UNDEFINED), CT_OK);
    ct_tensor *y = ct_module_forward(m, ct_to_device(ct_randn(CT_SHAPE(2, 5, 3), CT_F32, CT_CPU), CT_CUDA(0)));
    CT_ASSERT_OK(y);
    assert_int_equal(ct_tensor_device(y).type, CT_DEVICE_CUDA);
    ct_module_free(m);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_float64),
        cmocka_unit_test(test_golden_float32), cmocka_unit_test(test_golden_float32_packed),
        cmocka_unit_test(test_golden_inference), cmocka_unit_test(test_lstm_layer_onednn),
        cmocka_unit_test(test_golden_modules),
        cmocka_unit_test(test_state_dict_names),
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_lengths_semantics),
        cmocka_unit_test(test_dropout_and_results),
        cmocka_unit_test(test_fused_float32_vs_float64),
        cmocka_unit_test(test_fused_double_backward),
        cmocka_unit_test(test_fused_nonfinite),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_cudnn_ops_off_gpu),
        cmocka_unit_test(test_cuda),
    };
    return cmocka_run_group_tests(tests, load, free_golden);
}
