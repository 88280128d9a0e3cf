/* MultiheadAttention and the Transformer layers (src/nn/attention.c,
 * src/nn/transformer_layers.c) against PyTorch (tests/golden/gen_transformer.py:
 * forward values, attention weights and the gradients of the inputs and every
 * parameter, in float64 and float32, with masks of each kind, batch_first and
 * norm_first both ways), loading PyTorch's state dicts, the multi-module forward,
 * gradcheck, dropout, initialisation, error inputs and, where there is a GPU, CUDA. */
#include "nn_golden.h"

static int load(void **state) {
    (void)state;
    return load_golden_file(CT_TEST_DATA_DIR "/transformer_golden.txt");
}

enum { K_MHA = 0, K_ENC_LAYER, K_DEC_LAYER, K_ENCODER, K_DECODER, K_TRANSFORMER };

static const gt *cfg_of(const gcase *c) {
    const gt *t = find(c, "cfg");
    assert_non_null(t);
    return t;
}

static int kind_of(const gcase *c) { return (int)cfg_of(c)->v[0]; }

static ct_module *make_module(const gcase *c, ct_dtype dt) {
    const double *v = cfg_of(c)->v;
    int kind = (int)v[0];
    if (kind == K_MHA)
        return ct_nn_multihead_attention((int64_t)v[1], (int64_t)v[2], 0.0, v[3] != 0, v[4] != 0, v[5] != 0,
                                         (int64_t)v[6], (int64_t)v[7], v[8] != 0, dt);
    int64_t d = (int64_t)v[1], h = (int64_t)v[2], dff = (int64_t)v[3];
    const char *act = v[4] != 0 ? "gelu" : "relu";
    double eps = v[5];
    bool bf = v[6] != 0, nf = v[7] != 0, bias = v[8] != 0;
    switch (kind) {
    case K_ENC_LAYER:
        return ct_nn_transformer_encoder_layer(d, h, dff, 0.0, act, eps, bf, nf, bias, dt);
    case K_DEC_LAYER:
        return ct_nn_transformer_decoder_layer(d, h, dff, 0.0, act, eps, bf, nf, bias, dt);
    case K_ENCODER:
        return ct_nn_transformer_encoder(ct_nn_transformer_encoder_layer(d, h, dff, 0.0, act, eps, bf, nf, bias, dt),
                                         (int64_t)v[10], v[11] != 0 ? ct_nn_layer_norm(&d, 1, eps, true, dt) : NULL);
    case K_DECODER:
        return ct_nn_transformer_decoder(ct_nn_transformer_decoder_layer(d, h, dff, 0.0, act, eps, bf, nf, bias, dt),
                                         (int64_t)v[10], v[11] != 0 ? ct_nn_layer_norm(&d, 1, eps, true, dt) : NULL);
    default:
        return ct_nn_transformer(d, h, (int64_t)v[9], (int64_t)v[10], dff, 0.0, act, eps, bf, nf, bias, dt);
    }
}

/* The device the golden cases run on (run_golden sets it). */
static ct_device run_dev;

/* The case's mask NAME (floating, in dt) or NAME_bool (bool), or NULL, on run_dev. */
static ct_tensor *mask_of(const gcase *c, const char *name, ct_dtype dt) {
    char b[64];
    snprintf(b, sizeof b, "%s_bool", name);
    if (find(c, name))
        return ct_to_device(ct_to_dtype(T(c, name), dt), run_dev);
    if (find(c, b))
        return ct_to_device(ct_to_dtype(T(c, b), CT_BOOL), run_dev);
    return NULL;
}

/* Loads the case's "p." tensors with ct_module_load_state_dict (strict), after checking
 * that the module's state dict has the same keys, in the same order, and shapes. */
static void load_case_state(const gcase *c, ct_module *m, ct_dtype dt) {
    ct_scope_begin();
    ct_value *sd = ct_module_state_dict(m), *load = ct_value_new_dict();
    int np = 0;
    for (int i = 0; i < c->n; i++) {
        const gt *t = &c->t[i];
        if (strncmp(t->name, "p.", 2))
            continue;
        if (np >= ct_value_len(sd))
            fail_msg("%s: PyTorch's state dict has %s, past the end of ours", c->name, t->name);
        const char *key = ct_value_str(ct_value_key_at(sd, np), NULL);
        if (strcmp(key, t->name + 2))
            fail_msg("%s: state dict key %d is %s, PyTorch's %s", c->name, np, key, t->name + 2);
        ct_tensor *mine = ct_value_tensor(ct_value_get(sd, key));
        assert_int_equal(ct_tensor_dim(mine), t->ndim);
        for (int d = 0; d < t->ndim; d++)
            assert_int_equal(ct_tensor_size(mine, d), t->shape[d]);
        ct_value_set(load, t->name + 2, ct_value_new_tensor(ct_to_dtype(T(c, t->name), dt)));
        np++;
    }
    assert_int_equal(ct_value_len(sd), np);
    ct_value_free(sd);
    if (ct_module_load_state_dict(m, load, true, NULL, NULL) != CT_OK)
        fail_msg("%s: load_state_dict: %s", c->name, ct_last_error());
    ct_value_free(load);
    ct_scope_end();
}

/* The case's inputs in order (q[, k, v] / src / tgt, memory / src, tgt), converted to
 * dt on run_dev and requiring grad when grad; returns their count and names. */
static int case_inputs(const gcase *c, ct_dtype dt, bool grad, ct_tensor **in, const char **names) {
    static const char *const all[] = {"q", "k", "v", "src", "tgt", "memory"};
    int n = 0;
    for (int i = 0; i < 6; i++)
        if (find(c, all[i])) {
            names[n] = all[i];
            in[n] = ct_to_device(ct_to_dtype(T(c, all[i]), dt), run_dev);
            if (grad)
                in[n] = ct_tensor_set_requires_grad(ct_detach(in[n]), true);
            n++;
        }
    return n;
}

/* The case's forward through the typed functions: *out, and *w for need_weights. */
static void run_case(const gcase *c, ct_module *m, ct_tensor *const *in, ct_dtype dt, ct_tensor **out,
                     ct_tensor **w) {
    const double *v = cfg_of(c)->v;
    *w = NULL;
    switch (kind_of(c)) {
    case K_MHA: {
        bool self = v[12] != 0;
        const ct_tensor *k = self ? in[0] : in[1], *val = self ? in[0] : in[2];
        if (ct_nn_multihead_attention_forward_ex(m, in[0], k, val, mask_of(c, "kpm", dt), v[9] != 0,
                                                 mask_of(c, "mask", dt), v[10] != 0, v[11] != 0, out, w) != CT_OK)
            fail_msg("%s: %s", c->name, ct_last_error());
        if (v[9] == 0)
            assert_null(*w);
        return;
    }
    case K_ENC_LAYER:
        *out = ct_nn_transformer_encoder_layer_forward(m, in[0], mask_of(c, "src_mask", dt),
                                                       mask_of(c, "src_kpm", dt), v[9] != 0);
        break;
    case K_ENCODER:
        *out = ct_nn_transformer_encoder_forward(m, in[0], mask_of(c, "src_mask", dt), mask_of(c, "src_kpm", dt),
                                                 v[9] != 0);
        break;
    case K_DEC_LAYER:
    case K_DECODER:
        *out = (kind_of(c) == K_DECODER ? ct_nn_transformer_decoder_forward : ct_nn_transformer_decoder_layer_forward)(
            m, in[0], in[1], mask_of(c, "tgt_mask", dt), mask_of(c, "memory_mask", dt), mask_of(c, "tgt_kpm", dt),
            mask_of(c, "memory_kpm", dt), v[9] != 0, false);
        break;
    default:
        *out = ct_nn_transformer_forward(m, in[0], in[1], mask_of(c, "src_mask", dt), mask_of(c, "tgt_mask", dt),
                                         mask_of(c, "memory_mask", dt), mask_of(c, "src_kpm", dt),
                                         mask_of(c, "tgt_kpm", dt), mask_of(c, "memory_kpm", dt), false, false,
                                         false);
    }
    if (!*out)
        fail_msg("%s: %s", c->name, ct_last_error());
}

/* expect() of a result on any device. */
static void expect_on(const gcase *c, const char *name, const ct_tensor *got, double tol) {
    expect(c, name, got ? ct_to_device(got, CT_CPU) : NULL, tol);
}

/* A case's forward as a function of its inputs, for ct_compile: out, and w after it
 * when the case returns weights. */
typedef struct {
    const gcase *c;
    ct_module *m;
    ct_dtype dt;
} golden_fn_ctx;

static ct_tensor *golden_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    golden_fn_ctx *g = ud;
    ct_tensor *out = NULL, *w = NULL;
    run_case(g->c, g->m, in, g->dt, &out, &w);
    if (!w)
        return out;
    const ct_tensor *parts[2] = {ct_flatten(out, 0, -1), ct_flatten(w, 0, -1)};
    return ct_cat(parts, 2, 0);
}

/* Forward and backward of one case in dtype dt on device dev against PyTorch's
 * float64 values; in float64 on the CPU, the forward through ct_compile too. */
static void run_golden(const gcase *c, ct_dtype dt, ct_device dev, double tol) {
    ct_scope_begin();
    run_dev = dev;
    ct_module *m = make_module(c, dt);
    if (!m || ct_module_to(m, dev, CT_DTYPE_UNDEFINED))
        fail_msg("%s: %s", c->name, ct_last_error());
    load_case_state(c, m, dt);
    ct_tensor *in[6];
    const char *in_names[6];
    int nin = case_inputs(c, dt, true, in, in_names);
    ct_tensor *out = NULL, *w = NULL;
    run_case(c, m, in, dt, &out, &w);
    expect_on(c, "out", out, tol);
    /* docs/compile.md, "Every op's samples"; a capture does not look at a mask's values
     * to find it causal (detect_causal), so the eager call may take the causal kernel
     * where the compiled one applies the mask: rounding apart */
    if (dt == CT_F64 && dev.type == CT_DEVICE_CPU)
        ct_test_through_compile_tol(golden_fn, &(golden_fn_ctx){c, m, dt}, in, nin, c->name, 1e-12);
    if (w)
        expect_on(c, "w", w, tol);

    const ct_tensor *outs[2] = {out, w};
    const ct_tensor *gouts[2] = {ct_to_device(ct_to_dtype(T(c, "gout"), dt), dev),
                                 w ? ct_to_device(ct_to_dtype(T(c, "gw"), dt), dev) : NULL};
    ct_tensor *params[64];
    const char *pnames[64];
    int64_t np = ct_module_parameters(m, params, pnames, 64);
    assert_true(np > 0 && np <= 64);
    const ct_tensor *wrt[70];
    char gnames[70][64];
    int n = 0;
    for (int i = 0; i < nin; i++, n++) {
        wrt[n] = in[i];
        snprintf(gnames[n], sizeof gnames[n], "g%s", in_names[i]);
    }
    for (int64_t i = 0; i < np; i++, n++) {
        wrt[n] = params[i];
        snprintf(gnames[n], sizeof gnames[n], "g.%s", pnames[i]);
    }
    ct_tensor *grads[70] = {NULL};
    if (ct_autograd_grad(outs, w ? 2 : 1, wrt, n, gouts, false, false, true, grads) != CT_OK)
        fail_msg("%s: backward: %s", c->name, ct_last_error());
    for (int i = 0; i < n; i++)
        expect_on(c, gnames[i], grads[i] ? grads[i] : ct_zeros_like(wrt[i], CT_DTYPE_UNDEFINED), tol);
    ct_module_free(m);
    run_dev = CT_CPU;
    ct_scope_end();
}

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

/* ct_module_forward_multi reaches the same forwards with PyTorch's default flags
 * (MultiheadAttention: need_weights and averaged weights), and an empty tensor stands
 * for a mask that is None; ct_module_forward takes the first output. */
static void test_multi_forward(void **state) {
    (void)state;
    int checked = 0;
    for (int ci = 0; ci < ncases; ci++) {
        const gcase *c = &cases[ci];
        const double *v = cfg_of(c)->v;
        int kind = kind_of(c);
        if (kind == K_MHA && (v[9] == 0 || v[10] == 0 || v[11] != 0))
            continue;
        if ((kind == K_ENC_LAYER || kind == K_DEC_LAYER) && v[9] != 0)
            continue; /* an is_causal hint, which the multi forward has no room for */
        ct_scope_begin();
        ct_module *m = make_module(c, CT_F64);
        load_case_state(c, m, CT_F64);
        ct_tensor *in[6];
        const char *names[6];
        int nin = case_inputs(c, CT_F64, false, in, names);
        const ct_tensor *args[8];
        int na = 0;
        ct_tensor *none = ct_empty(CT_SHAPE(0), CT_F64, CT_CPU);
        static const char *const mha_masks[] = {"kpm", "mask"};
        static const char *const enc_masks[] = {"src_mask", "src_kpm"};
        static const char *const dec_masks[] = {"tgt_mask", "memory_mask", "tgt_kpm", "memory_kpm"};
        static const char *const tf_masks[] = {"src_mask", "tgt_mask", "memory_mask", "src_kpm", "tgt_kpm",
                                               "memory_kpm"};
        const char *const *masks = kind == K_MHA ? mha_masks
                                   : kind == K_ENC_LAYER || kind == K_ENCODER ? enc_masks
                                   : kind == K_TRANSFORMER                    ? tf_masks
                                                                              : dec_masks;
        int nmasks = kind == K_MHA ? 2 : kind == K_ENC_LAYER || kind == K_ENCODER ? 2 : kind == K_TRANSFORMER ? 6 : 4;
        for (int i = 0; i < nin; i++)
            args[na++] = in[i];
        if (kind == K_MHA && nin == 1 && nmasks) { /* self-attention: query, key and value given */
            args[na++] = in[0];
            args[na++] = in[0];
        }
        int last = na;
        for (int i = 0; i < nmasks; i++) {
            ct_tensor *mk = mask_of(c, masks[i], CT_F64);
            args[na++] = mk ? mk : none;
            if (mk)
                last = na;
        }
        na = last; /* trailing Nones left off */
        ct_tensor *out[CT_MODULE_IO_CAP];
        int nout = 0;
        if (ct_module_forward_multi(m, args, na, out, CT_MODULE_IO_CAP, &nout) != CT_OK)
            fail_msg("%s: forward_multi: %s", c->name, ct_last_error());
        assert_int_equal(nout, kind == K_MHA ? 2 : 1);
        expect(c, "out", out[0], 1e-6);
        if (kind == K_MHA)
            expect(c, "w", out[1], 1e-6);
        if (na == 1)
            expect(c, "out", ct_module_forward(m, args[0]), 1e-6);
        ct_module_free(m);
        ct_scope_end();
        checked++;
    }
    assert_true(checked >= 15);
}

/* The layers fit in containers: a Sequential of two encoder layers passes (x) along. */
static void test_sequential(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(5);
    ct_module *l[2] = {ct_nn_transformer_encoder_layer(8, 2, 16, 0.0, "gelu", 1e-5, true, false, true, CT_F64),
                       ct_nn_transformer_encoder_layer(8, 2, 16, 0.0, NULL, 1e-5, true, true, true, CT_F64)};
    ct_tensor *x = ct_randn(CT_SHAPE(2, 5, 8), CT_F64, CT_CPU);
    ct_tensor *want = ct_nn_transformer_encoder_layer_forward(
        l[1], ct_nn_transformer_encoder_layer_forward(l[0], x, NULL, NULL, false), NULL, NULL, false);
    ct_module *seq = ct_nn_sequential(l, 2);
    assert_non_null(seq);
    ct_tensor *got = ct_module_forward(seq, x);
    assert_non_null(got);
    bool eq = false;
    assert_int_equal(ct_equal(got, want, &eq), CT_OK);
    assert_true(eq);
    ct_module_free(seq);
    ct_scope_end();
}

/* State dict keys and shapes, written out as PyTorch prints them. */
static void test_state_dict_names(void **state) {
    (void)state;
    ct_scope_begin();
    ct_module *m = ct_nn_transformer_encoder_layer(16, 4, 32, 0.1, NULL, 1e-5, false, false, true, CT_F32);
    assert_non_null(m);
    const char *keys[] = {"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                          "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                          "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"};
    const int64_t shapes[][2] = {{48, 16}, {48, 0}, {16, 16}, {16, 0}, {32, 16}, {32, 0},
                                 {16, 32}, {16, 0}, {16, 0},  {16, 0}, {16, 0},  {16, 0}};
    ct_value *sd = ct_module_state_dict(m);
    assert_int_equal(ct_value_len(sd), 12);
    for (int i = 0; i < 12; i++) {
        assert_string_equal(ct_value_str(ct_value_key_at(sd, i), NULL), keys[i]);
        ct_tensor *t = ct_value_tensor(ct_value_get(sd, keys[i]));
        assert_int_equal(ct_tensor_dim(t), shapes[i][1] ? 2 : 1);
        assert_int_equal(ct_tensor_size(t, 0), shapes[i][0]);
        if (shapes[i][1])
            assert_int_equal(ct_tensor_size(t, 1), shapes[i][1]);
    }
    ct_value_free(sd);
    /* the children, as named_modules lists them */
    const char *kids[] = {"self_attn", "linear1", "dropout", "linear2", "norm1", "norm2", "dropout1", "dropout2"};
    assert_int_equal(ct_module_num_children(m), 8);
    for (int i = 0; i < 8; i++) {
        const char *name = NULL;
        ct_module_child_at(m, i, &name);
        assert_string_equal(name, kids[i]);
    }
    assert_string_equal(ct_module_type(ct_module_child(m, "self_attn")), "MultiheadAttention");
    ct_module_free(m);

    /* kdim / vdim: separate projections; bias=False: no biases anywhere */
    m = ct_nn_multihead_attention(8, 2, 0.0, false, true, false, 5, 3, true, CT_F64);
    sd = ct_module_state_dict(m);
    const char *mk[] = {"q_proj_weight", "k_proj_weight", "v_proj_weight", "bias_k", "bias_v", "out_proj.weight"};
    assert_int_equal(ct_value_len(sd), 6);
    for (int i = 0; i < 6; i++)
        assert_string_equal(ct_value_str(ct_value_key_at(sd, i), NULL), mk[i]);
    assert_int_equal(ct_tensor_size(ct_module_param(m, "k_proj_weight"), 1), 5);
    assert_int_equal(ct_tensor_size(ct_module_param(m, "v_proj_weight"), 1), 3);
    assert_int_equal(ct_tensor_dim(ct_module_param(m, "bias_k")), 3);
    ct_value_free(sd);
    ct_module_free(m);

    /* nn.Transformer(d_model=8, nhead=2, 2, 1, 16): PyTorch's parameter count */
    m = ct_nn_transformer(8, 2, 2, 1, 16, 0.1, NULL, 1e-5, false, false, true, CT_F32);
    assert_non_null(m);
    int64_t enc_layer = 3 * 8 * 8 + 3 * 8 + 8 * 8 + 8 + 16 * 8 + 16 + 8 * 16 + 8 + 4 * 8;
    int64_t dec_layer = enc_layer + 3 * 8 * 8 + 3 * 8 + 8 * 8 + 8 + 2 * 8;
    assert_int_equal(ct_module_num_parameters(m), 2 * enc_layer + dec_layer + 4 * 8);
    assert_non_null(ct_module_param(m, "encoder.layers.1.self_attn.out_proj.weight"));
    assert_non_null(ct_module_param(m, "decoder.layers.0.multihead_attn.in_proj_weight"));
    assert_non_null(ct_module_param(m, "decoder.norm.bias"));
    assert_null(ct_module_param(m, "encoder.layers.2.linear1.weight"));
    ct_module_free(m);

    /* bias=False: LayerNorms keep their weight only */
    m = ct_nn_transformer_decoder_layer(8, 2, 16, 0.1, "gelu", 1e-5, false, false, false, CT_F32);
    assert_non_null(ct_module_param(m, "norm3.weight"));
    assert_null(ct_module_param(m, "norm3.bias"));
    assert_null(ct_module_param(m, "linear1.bias"));
    assert_null(ct_module_param(m, "multihead_attn.in_proj_bias"));
    ct_module_free(m);
    ct_scope_end();
}

/* _reset_parameters: xavier_uniform_ in_proj_weight, zero biases; the encoder's layers
 * are copies of the one given; nn.Transformer re-initialises every matrix. */
static void test_init(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(1);
    ct_module *m = ct_nn_multihead_attention(16, 4, 0.0, true, false, false, 0, 0, false, CT_F64);
    ct_tensor *w = ct_module_param(m, "in_proj_weight");
    double bound = sqrt(6.0 / (16 + 48)), lo = 1, hi = -1;
    for (int64_t j = 0; j < ct_tensor_numel(w); j++) {
        double v = ct_test_at(w, j);
        lo = fmin(lo, v), hi = fmax(hi, v);
    }
    assert_true(lo >= -bound && hi <= bound && hi - lo > bound);
    for (int64_t j = 0; j < 48; j++)
        assert_true(ct_test_at(ct_module_param(m, "in_proj_bias"), j) == 0);
    for (int64_t j = 0; j < 16; j++)
        assert_true(ct_test_at(ct_module_param(m, "out_proj.bias"), j) == 0);
    assert_true(ct_tensor_requires_grad(w));
    ct_module_free(m);

    ct_module *layer = ct_nn_transformer_encoder_layer(8, 2, 16, 0.1, NULL, 1e-5, false, false, true, CT_F64);
    ct_tensor *want = ct_clone(ct_module_param(layer, "linear1.weight"));
    m = ct_nn_transformer_encoder(layer, 3, NULL);
    assert_non_null(m);
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "layers.%d.linear1.weight", i);
        bool eq = false;
        assert_int_equal(ct_equal(ct_module_param(m, name), want, &eq), CT_OK);
        assert_true(eq);
    }
    assert_ptr_not_equal(ct_module_param(m, "layers.0.linear1.weight"), ct_module_param(m, "layers.1.linear1.weight"));
    ct_module_free(m);
    ct_scope_end();
}

/* generate_square_subsequent_mask: -inf above the diagonal, 0 elsewhere. */
static void test_square_subsequent_mask(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *m = ct_nn_transformer_generate_square_subsequent_mask(3, CT_F32, CT_CPU);
    assert_non_null(m);
    assert_int_equal(ct_tensor_dtype(m), CT_F32);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double v = ct_test_at(m, i * 3 + j);
            assert_true(j > i ? isinf(v) && v < 0 : v == 0);
        }
    assert_int_equal(ct_tensor_numel(ct_nn_transformer_generate_square_subsequent_mask(0, CT_DTYPE_UNDEFINED,
                                                                                      CT_CPU)),
                     0);
    assert_null(ct_nn_transformer_generate_square_subsequent_mask(-1, CT_F32, CT_CPU));
    assert_null(ct_nn_transformer_generate_square_subsequent_mask(3, CT_I64, CT_CPU));
    ct_scope_end();
}

static const gcase *case_named(const char *name) {
    for (int i = 0; i < ncases; i++)
        if (!strcmp(cases[i].name, name))
            return &cases[i];
    fail_msg("no case %s", name);
    return NULL;
}

/* A state dict written by torch.save (the module of case enc_post_relu) loads with
 * ct_load and ct_module_load_state_dict, strictly, and gives PyTorch's output. */
static void test_load_pytorch_file(void **state) {
    (void)state;
    const gcase *c = case_named("enc_post_relu");
    ct_scope_begin();
    ct_value *sd = ct_load(CT_TEST_DATA_DIR "/io/transformer_encoder_layer.pt");
    if (!sd)
        fail_msg("ct_load: %s", ct_last_error());
    ct_module *m = make_module(c, CT_F64);
    int64_t missing = -1, unexpected = -1;
    if (ct_module_load_state_dict(m, sd, true, &missing, &unexpected) != CT_OK)
        fail_msg("load_state_dict: %s", ct_last_error());
    assert_int_equal(missing, 0);
    assert_int_equal(unexpected, 0);
    ct_value_free(sd);
    expect(c, "out", ct_nn_transformer_encoder_layer_forward(m, T(c, "src"), NULL, NULL, false), 1e-6);
    ct_module_free(m);
    ct_scope_end();
}

/* repr(nn.TransformerEncoderLayer(8, 2, 16)), as PyTorch prints it. */
static void test_repr(void **state) {
    (void)state;
    ct_module *m = ct_nn_transformer_encoder_layer(8, 2, 16, 0.1, NULL, 1e-5, false, false, true, CT_F32);
    char *s = ct_module_to_string(m);
    assert_non_null(s);
    assert_string_equal(s, "TransformerEncoderLayer(\n"
                           "  (self_attn): MultiheadAttention(\n"
                           "    (out_proj): NonDynamicallyQuantizableLinear(in_features=8, out_features=8, bias=True)\n"
                           "  )\n"
                           "  (linear1): Linear(in_features=8, out_features=16, bias=True)\n"
                           "  (dropout): Dropout(p=0.1, inplace=False)\n"
                           "  (linear2): Linear(in_features=16, out_features=8, bias=True)\n"
                           "  (norm1): LayerNorm((8,), eps=1e-05, elementwise_affine=True, bias=True)\n"
                           "  (norm2): LayerNorm((8,), eps=1e-05, elementwise_affine=True, bias=True)\n"
                           "  (dropout1): Dropout(p=0.1, inplace=False)\n"
                           "  (dropout2): Dropout(p=0.1, inplace=False)\n"
                           ")");
    free(s);
    ct_module_free(m);
}

/* Masks need not be contiguous: a transposed 3-D mask gives what its copy gives. */
static void test_strided_mask(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(4);
    ct_module *m = ct_nn_multihead_attention(8, 2, 0.0, true, false, false, 0, 0, false, CT_F64);
    ct_tensor *q = ct_randn(CT_SHAPE(4, 3, 8), CT_F64, CT_CPU);
    ct_tensor *mask = ct_transpose(ct_randn(CT_SHAPE(6, 4, 4), CT_F64, CT_CPU), 1, 2);
    for (int nw = 0; nw < 2; nw++) {
        ct_tensor *a = NULL, *b = NULL;
        assert_int_equal(ct_nn_multihead_attention_forward(m, q, q, q, NULL, nw, mask, &a, NULL), CT_OK);
        assert_int_equal(ct_nn_multihead_attention_forward(m, q, q, q, NULL, nw, ct_contiguous(mask), &b, NULL),
                         CT_OK);
        bool close = false;
        assert_int_equal(ct_allclose(a, b, 1e-12, 1e-12, false, &close), CT_OK);
        assert_true(close);
    }
    ct_module_free(m);
    ct_scope_end();
}

/* ------------------------------------------------------------------ gradcheck */

typedef struct gc_ctx {
    ct_module *m;
    const ct_tensor *kpm, *mask;
    bool need_weights;
    int kind;
} gc_ctx;

/* inputs: q, k, v (MultiheadAttention) or src (encoder layer), then the parameters,
 * copied into the module's tensors by ct_module_set_param for each call. */
static ct_tensor *gc_fn(ct_tensor *const *in, int n, void *ud) {
    gc_ctx *g = ud;
    const char *names[64];
    ct_tensor *params[64];
    int first = g->kind == K_MHA ? 3 : 1;
    int64_t np = ct_module_parameters(g->m, params, names, 64);
    if (np != n - first)
        return NULL;
    char copy[64][96];
    for (int64_t i = 0; i < np; i++)
        snprintf(copy[i], sizeof copy[i], "%s", names[i]);
    for (int64_t i = 0; i < np; i++)
        if (ct_module_set_param(g->m, copy[i], in[first + i]))
            return NULL;
    if (g->kind == K_MHA) {
        ct_tensor *o = NULL, *w = NULL;
        if (ct_nn_multihead_attention_forward_ex(g->m, in[0], in[1], in[2], g->kpm, g->need_weights, g->mask, false,
                                                 false, &o, g->need_weights ? &w : NULL))
            return NULL;
        if (!w)
            return o;
        const ct_tensor *parts[2] = {ct_flatten(o, 0, -1), ct_flatten(w, 0, -1)};
        return ct_cat(parts, 2, 0);
    }
    return ct_nn_transformer_encoder_layer_forward(g->m, in[0], g->mask, g->kpm, false);
}

static void gradcheck_module(gc_ctx *g, ct_tensor **in, int nin) {
    ct_tensor *params[64];
    int64_t np = ct_module_parameters(g->m, params, NULL, 64);
    for (int64_t i = 0; i < np; i++)
        in[nin + i] = ct_tensor_set_requires_grad(ct_clone(ct_detach(params[i])), true);
    ct_test_through_compile(gc_fn, g, in, nin + (int)np, g->kind == K_MHA ? "multihead_attention" : "encoder layer");
    if (ct_gradcheck(gc_fn, g, in, nin + (int)np, 1e-6, 1e-7, 1e-5) != CT_OK)
        fail_msg("gradcheck: %s", ct_last_error());
}

static void test_gradcheck(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(7);
    const int64_t N = 2, L = 2, S = 3, E = 4, H = 2;
    for (int nw = 0; nw < 2; nw++) {
        ct_module *m = ct_nn_multihead_attention(E, H, 0.0, true, nw == 1, false, 3, 0, nw == 0, CT_F64);
        assert_non_null(m);
        ct_tensor *in[40];
        in[0] = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(N, L, E), CT_F64, CT_CPU), true);
        in[1] = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(N, S, 3), CT_F64, CT_CPU), true);
        in[2] = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(N, S, E), CT_F64, CT_CPU), true);
        if (nw == 1) /* sequence-first */
            for (int i = 0; i < 3; i++)
                in[i] = ct_tensor_set_requires_grad(ct_contiguous(ct_transpose(ct_detach(in[i]), 0, 1)), true);
        bool kpm_v[6] = {false, false, true, false, false, false};
        gc_ctx g = {.m = m,
                    .kpm = ct_from_data(kpm_v, CT_SHAPE(N, S), CT_BOOL),
                    .mask = ct_mul_scalar(ct_randn(CT_SHAPE(L, S), CT_F64, CT_CPU), ct_scalar_float(0.5)),
                    .need_weights = nw == 1,
                    .kind = K_MHA};
        gradcheck_module(&g, in, 3);
        ct_module_free(m);
    }
    for (int nf = 0; nf < 2; nf++) {
        ct_module *m = ct_nn_transformer_encoder_layer(4, 2, 6, 0.0, nf ? "gelu" : "relu", 1e-5, true, nf == 1, true,
                                                       CT_F64);
        ct_tensor *in[40];
        in[0] = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(2, 3, 4), CT_F64, CT_CPU), true);
        bool kpm_v[6] = {false, false, true, false, false, false};
        gc_ctx g = {.m = m,
                    .kpm = ct_from_data(kpm_v, CT_SHAPE(2, 3), CT_BOOL),
                    .mask = ct_nn_transformer_generate_square_subsequent_mask(3, CT_F64, CT_CPU),
                    .kind = K_ENC_LAYER};
        gradcheck_module(&g, in, 1);
        ct_module_free(m);
    }
    ct_scope_end();
}

/* ------------------------------------------------------------------ dropout */

static bool same(const ct_tensor *a, const ct_tensor *b) {
    bool eq = false;
    assert_int_equal(ct_equal(a, b, &eq), CT_OK);
    return eq;
}

/* Dropout acts in training mode only, on the attention weights and the layers. */
static void test_dropout(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(3);
    ct_module *m = ct_nn_transformer_encoder_layer(8, 2, 16, 0.5, NULL, 1e-5, true, false, true, CT_F64);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 5, 8), CT_F64, CT_CPU);
    assert_true(ct_module_is_training(m));
    ct_tensor *a = ct_nn_transformer_encoder_layer_forward(m, x, NULL, NULL, false);
    ct_tensor *b = ct_nn_transformer_encoder_layer_forward(m, x, NULL, NULL, false);
    assert_false(same(a, b));
    ct_module_train(m, false);
    ct_tensor *c = ct_nn_transformer_encoder_layer_forward(m, x, NULL, NULL, false);
    ct_tensor *d = ct_nn_transformer_encoder_layer_forward(m, x, NULL, NULL, false);
    assert_true(same(c, d));
    assert_false(same(a, c));
    ct_module_free(m);

    /* MultiheadAttention's own dropout: both paths (weights and scaled_dot_product) */
    m = ct_nn_multihead_attention(8, 2, 0.5, true, false, false, 0, 0, false, CT_F64);
    x = ct_randn(CT_SHAPE(5, 2, 8), CT_F64, CT_CPU);
    for (int nw = 0; nw < 2; nw++) {
        ct_module_train(m, true);
        ct_tensor *o1, *o2, *o3, *o4;
        assert_int_equal(ct_nn_multihead_attention_forward(m, x, x, x, NULL, nw, NULL, &o1, NULL), CT_OK);
        assert_int_equal(ct_nn_multihead_attention_forward(m, x, x, x, NULL, nw, NULL, &o2, NULL), CT_OK);
        assert_false(same(o1, o2));
        ct_module_train(m, false);
        assert_int_equal(ct_nn_multihead_attention_forward(m, x, x, x, NULL, nw, NULL, &o3, NULL), CT_OK);
        assert_int_equal(ct_nn_multihead_attention_forward(m, x, x, x, NULL, nw, NULL, &o4, NULL), CT_OK);
        assert_true(same(o3, o4));
    }
    ct_module_free(m);
    ct_scope_end();
}

/* need_weights false gives the same output as true (the two paths of
 * Note [Two attention paths]), and a causal hint equals the mask it stands for. */
static void test_paths_agree(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(9);
    ct_module *m = ct_nn_multihead_attention(8, 4, 0.0, true, false, false, 0, 0, true, CT_F64);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 6, 8), CT_F64, CT_CPU);
    ct_tensor *causal = ct_nn_transformer_generate_square_subsequent_mask(6, CT_F64, CT_CPU);
    ct_tensor *a, *b, *c, *w;
    assert_int_equal(ct_nn_multihead_attention_forward_ex(m, x, x, x, NULL, true, causal, true, false, &a, &w), CT_OK);
    assert_int_equal(ct_nn_multihead_attention_forward_ex(m, x, x, x, NULL, false, causal, true, false, &b, NULL),
                     CT_OK);
    assert_int_equal(ct_nn_multihead_attention_forward_ex(m, x, x, x, NULL, false, causal, true, true, &c, NULL),
                     CT_OK);
    bool close = false;
    assert_int_equal(ct_allclose(a, b, 1e-12, 1e-12, false, &close), CT_OK);
    assert_true(close);
    assert_int_equal(ct_allclose(a, c, 1e-12, 1e-12, false, &close), CT_OK);
    assert_true(close);
    /* the weights of a causal mask: zero above the diagonal, rows summing to 1 */
    assert_int_equal(ct_tensor_dim(w), 3);
    assert_true(ct_test_at(w, 1) == 0);
    ct_module_free(m);
    ct_scope_end();
}

/* ------------------------------------------------------------------ errors */

static void expect_error(bool failed, const char *want) {
    assert_true(failed);
    if (!strstr(ct_last_error(), want))
        fail_msg("error \"%s\" does not contain \"%s\"", ct_last_error(), want);
    ct_clear_error();
}

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    /* constructors */
    expect_error(!ct_nn_multihead_attention(10, 3, 0.0, true, false, false, 0, 0, false, CT_F32),
                 "embed_dim must be divisible by num_heads");
    expect_error(!ct_nn_multihead_attention(0, 2, 0.0, true, false, false, 0, 0, false, CT_F32),
                 "embed_dim and num_heads must be greater than 0, got embed_dim=0 and num_heads=2 instead");
    expect_error(!ct_nn_multihead_attention(8, 2, 1.5, true, false, false, 0, 0, false, CT_F32),
                 "dropout probability has to be between 0 and 1");
    expect_error(!ct_nn_multihead_attention(8, 2, 0.0, true, false, false, 0, 0, false, CT_I64),
                 "floating-point dtype");
    expect_error(!ct_nn_transformer_encoder_layer(8, 2, 16, 0.1, "tanh", 1e-5, false, false, true, CT_F32),
                 "activation should be relu/gelu, not tanh");
    expect_error(!ct_nn_transformer_decoder_layer(9, 2, 16, 0.1, NULL, 1e-5, false, false, true, CT_F32),
                 "embed_dim must be divisible by num_heads");
    expect_error(!ct_nn_transformer_encoder(ct_nn_linear(2, 2, true, CT_F32), 2, NULL),
                 "expected a TransformerEncoderLayer module, got Linear");
    expect_error(!ct_nn_transformer_decoder(
                     ct_nn_transformer_encoder_layer(8, 2, 16, 0.1, NULL, 1e-5, false, false, true, CT_F32), 2, NULL),
                 "expected a TransformerDecoderLayer module, got TransformerEncoderLayer");
    expect_error(!ct_nn_transformer_encoder(NULL, 2, NULL), "TransformerEncoder: got a NULL argument");
    expect_error(!ct_nn_transformer(8, 3, 1, 1, 16, 0.1, NULL, 1e-5, false, false, true, CT_F32),
                 "embed_dim must be divisible by num_heads");

    /* MultiheadAttention's inputs */
    ct_module *m = ct_nn_multihead_attention(8, 2, 0.0, true, false, false, 0, 0, false, CT_F32);
    ct_tensor *q = ct_randn(CT_SHAPE(4, 3, 8), CT_F32, CT_CPU), *kv = ct_randn(CT_SHAPE(5, 3, 8), CT_F32, CT_CPU);
    ct_tensor *o = NULL, *w = NULL;
    expect_error(ct_nn_multihead_attention_forward(m, ct_randn(CT_SHAPE(1, 4, 3, 8), CT_F32, CT_CPU), kv, kv, NULL,
                                                   true, NULL, &o, &w) != CT_OK,
                 "query should be unbatched 2D or batched 3D tensor but received 4-D query tensor");
    assert_null(o);
    assert_null(w);
    expect_error(ct_nn_multihead_attention_forward(m, q, ct_randn(CT_SHAPE(5, 8), CT_F32, CT_CPU), kv, NULL, true,
                                                   NULL, &o, &w) != CT_OK,
                 "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found 2-D and 3-D tensors "
                 "respectively");
    expect_error(ct_nn_multihead_attention_forward(m, ct_randn(CT_SHAPE(4, 6), CT_F32, CT_CPU),
                                                   ct_randn(CT_SHAPE(5, 6), CT_F32, CT_CPU),
                                                   ct_randn(CT_SHAPE(5, 6), CT_F32, CT_CPU), NULL, true, NULL, &o,
                                                   &w) != CT_OK,
                 "was expecting embedding dimension of 8, but got 6");
    expect_error(ct_nn_multihead_attention_forward(m, q, kv, ct_randn(CT_SHAPE(6, 3, 8), CT_F32, CT_CPU), NULL, true,
                                                   NULL, &o, &w) != CT_OK,
                 "key shape torch.Size([5, 3, 8]) does not match value shape torch.Size([6, 3, 8])");
    expect_error(ct_nn_multihead_attention_forward(m, q, ct_randn(CT_SHAPE(5, 2, 8), CT_F32, CT_CPU),
                                                   ct_randn(CT_SHAPE(5, 2, 8), CT_F32, CT_CPU), NULL, true, NULL, &o,
                                                   &w) != CT_OK,
                 "key and value have batch size 2, but query has 3");
    expect_error(ct_nn_multihead_attention_forward(m, q, kv, kv, NULL, true, ct_zeros(CT_SHAPE(4, 4), CT_F32, CT_CPU),
                                                   &o, &w) != CT_OK,
                 "The shape of the 2D attn_mask is torch.Size([4, 4]), but should be (4, 5).");
    expect_error(ct_nn_multihead_attention_forward(m, q, kv, kv, NULL, false,
                                                   ct_zeros(CT_SHAPE(3, 4, 5), CT_F32, CT_CPU), &o, &w) != CT_OK,
                 "The shape of the 3D attn_mask is torch.Size([3, 4, 5]), but should be (6, 4, 5).");
    expect_error(ct_nn_multihead_attention_forward(m, q, kv, kv, NULL, true,
                                                   ct_zeros(CT_SHAPE(1, 6, 4, 5), CT_F32, CT_CPU), &o, &w) != CT_OK,
                 "For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found 4-D tensor "
                 "instead");
    expect_error(ct_nn_multihead_attention_forward(m, q, kv, kv, NULL, true, ct_zeros(CT_SHAPE(4, 5), CT_I64, CT_CPU),
                                                   &o, &w) != CT_OK,
                 "only bool and floating types of attn_mask are supported");
    expect_error(ct_nn_multihead_attention_forward(m, q, kv, kv, ct_zeros(CT_SHAPE(3, 5), CT_I32, CT_CPU), true, NULL,
                                                   &o, &w) != CT_OK,
                 "only bool and floating types of key_padding_mask are supported");
    expect_error(ct_nn_multihead_attention_forward(m, q, kv, kv, ct_zeros(CT_SHAPE(3, 4), CT_BOOL, CT_CPU), true,
                                                   NULL, &o, &w) != CT_OK,
                 "expecting key_padding_mask shape of (3, 5), but got torch.Size([3, 4])");
    expect_error(ct_nn_multihead_attention_forward(m, q, kv, kv, ct_zeros(CT_SHAPE(5), CT_BOOL, CT_CPU), true, NULL,
                                                   &o, &w) != CT_OK,
                 "For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but found 1-D tensor "
                 "instead");
    expect_error(ct_nn_multihead_attention_forward_ex(m, q, q, q, NULL, false, NULL, true, true, &o, &w) != CT_OK,
                 "Need attn_mask if specifying the is_causal hint");
    ct_tensor *q2 = ct_randn(CT_SHAPE(4, 8), CT_F32, CT_CPU), *kv2 = ct_randn(CT_SHAPE(5, 8), CT_F32, CT_CPU);
    expect_error(ct_nn_multihead_attention_forward(m, q2, kv2, kv2, NULL, true,
                                                   ct_zeros(CT_SHAPE(3, 4, 5), CT_F32, CT_CPU), &o, &w) != CT_OK,
                 "Expected `attn_mask` shape to be (2, 4, 5) but got torch.Size([3, 4, 5])");
    expect_error(ct_nn_multihead_attention_forward(m, q2, kv2, kv2, ct_zeros(CT_SHAPE(1, 5), CT_BOOL, CT_CPU), true,
                                                   NULL, &o, &w) != CT_OK,
                 "For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D");
    expect_error(ct_nn_multihead_attention_forward(m, ct_zeros(CT_SHAPE(4, 3, 8), CT_I64, CT_CPU), kv, kv, NULL, true,
                                                   NULL, &o, &w) != CT_OK,
                 "expected a floating-point query, got int64");
    expect_error(ct_nn_multihead_attention_forward(m, NULL, kv, kv, NULL, true, NULL, &o, &w) != CT_OK, "");
    expect_error(ct_nn_multihead_attention_forward(ct_module_child(m, "out_proj"), q, kv, kv, NULL, true, NULL, &o,
                                                   &w) != CT_OK,
                 "expected a MultiheadAttention module made by ct_nn_multihead_attention, got "
                 "NonDynamicallyQuantizableLinear");
    ct_tensor *out[CT_MODULE_IO_CAP];
    int nout = 0;
    const ct_tensor *two[2] = {q, kv};
    expect_error(ct_module_forward_multi(m, two, 2, out, CT_MODULE_IO_CAP, &nout) != CT_OK,
                 "takes query, or query, key, value");
    ct_module *sep = ct_nn_multihead_attention(8, 2, 0.0, true, false, false, 4, 0, false, CT_F32);
    expect_error(ct_nn_multihead_attention_forward(sep, q, kv, ct_randn(CT_SHAPE(6, 3, 8), CT_F32, CT_CPU), NULL, true,
                                                   NULL, &o, &w) != CT_OK,
                 "key's sequence and batch dims (5, 3) do not match value's (6, 3)");
    expect_error(ct_nn_multihead_attention_forward(sep, q, kv, kv, NULL, true, NULL, &o, &w) != CT_OK,
                 "expected key and value of feature sizes 4 and 8 (kdim and vdim), got 8 and 8");
    ct_module_free(sep);
    ct_module_free(m);

    /* the layers */
    m = ct_nn_transformer(8, 2, 1, 1, 16, 0.0, NULL, 1e-5, false, false, true, CT_F32);
    ct_tensor *src = ct_randn(CT_SHAPE(5, 3, 8), CT_F32, CT_CPU);
    expect_error(!ct_nn_transformer_forward(m, src, ct_randn(CT_SHAPE(4, 2, 8), CT_F32, CT_CPU), NULL, NULL, NULL,
                                            NULL, NULL, NULL, false, false, false),
                 "the batch number of src and tgt must be equal");
    expect_error(!ct_nn_transformer_forward(m, src, ct_randn(CT_SHAPE(4, 3, 6), CT_F32, CT_CPU), NULL, NULL, NULL,
                                            NULL, NULL, NULL, false, false, false),
                 "the feature number of src and tgt must be equal to d_model");
    expect_error(!ct_nn_transformer_encoder_forward(ct_module_child(m, "encoder"), src,
                                                    ct_zeros(CT_SHAPE(5, 5), CT_I64, CT_CPU), NULL, false),
                 "only bool and floating types of mask are supported");
    ct_module *enc = ct_module_child(ct_module_child(m, "encoder"), "layers.0");
    expect_error(!ct_nn_transformer_encoder_layer_forward(enc, src, NULL, ct_zeros(CT_SHAPE(3, 5), CT_I64, CT_CPU),
                                                          false),
                 "only bool and floating types of src_key_padding_mask are supported");
    expect_error(!ct_nn_transformer_encoder_layer_forward(enc, src, ct_zeros(CT_SHAPE(4, 4), CT_BOOL, CT_CPU), NULL,
                                                          false),
                 "The shape of the 2D attn_mask is torch.Size([4, 4]), but should be (5, 5).");
    expect_error(!ct_nn_transformer_encoder_layer_forward(enc, ct_randn(CT_SHAPE(5, 3, 4), CT_F32, CT_CPU), NULL, NULL,
                                                          false),
                 "was expecting embedding dimension of 8, but got 4");
    expect_error(!ct_nn_transformer_decoder_layer_forward(enc, src, src, NULL, NULL, NULL, NULL, false, false),
                 "expected a TransformerDecoderLayer module, got TransformerEncoderLayer");
    ct_module *dec = ct_module_child(ct_module_child(m, "decoder"), "layers.0");
    expect_error(!ct_nn_transformer_decoder_layer_forward(dec, src, NULL, NULL, NULL, NULL, NULL, false, false), "");
    expect_error(!ct_nn_transformer_decoder_layer_forward(dec, src, src, NULL, NULL,
                                                          ct_zeros(CT_SHAPE(3, 5), CT_F32, CT_CPU),
                                                          ct_zeros(CT_SHAPE(3, 4), CT_F32, CT_CPU), false, false),
                 "expecting key_padding_mask shape of (3, 5), but got torch.Size([3, 4])");
    expect_error(!ct_nn_transformer_forward(NULL, src, src, NULL, NULL, NULL, NULL, NULL, NULL, false, false, false),
                 "module is NULL");
    expect_error(!ct_nn_transformer_decoder_forward(ct_module_child(m, "encoder"), src, src, NULL, NULL, NULL, NULL,
                                                    false, false),
                 "expected a TransformerDecoder module, got TransformerEncoder");
    expect_error(!ct_nn_transformer_decoder_forward(ct_module_child(m, "decoder"), src, src, NULL, NULL, NULL,
                                                    ct_zeros(CT_SHAPE(3, 5), CT_I64, CT_CPU), false, false),
                 "only bool and floating types of memory_key_padding_mask are supported");
    expect_error(!ct_nn_transformer_encoder_forward(ct_module_child(m, "decoder"), src, NULL, NULL, false),
                 "expected a TransformerEncoder module, got TransformerDecoder");
    const ct_tensor *one[1] = {src};
    expect_error(ct_module_forward_multi(dec, one, 1, out, CT_MODULE_IO_CAP, &nout) != CT_OK,
                 "takes tgt, memory[, tgt_mask");
    expect_error(ct_module_forward_multi(m, one, 1, out, CT_MODULE_IO_CAP, &nout) != CT_OK, "takes src, tgt[");
    ct_module_free(m);
    ct_scope_end();
}

/* A BERT layer: one constructor call, one forward with a padding mask; the padded
 * positions do not change the others' outputs. */
static void test_bert_layer(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(2);
    ct_module *layer = ct_nn_transformer_encoder_layer(16, 4, 64, 0.1, "gelu", 1e-12, true, false, true, CT_F32);
    ct_module_train(layer, false);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 6, 16), CT_F32, CT_CPU);
    bool pad_v[12] = {false, false, false, false, true, true, false, false, false, false, false, false};
    ct_tensor *pad = ct_from_data(pad_v, CT_SHAPE(2, 6), CT_BOOL);
    ct_tensor *y = ct_nn_transformer_encoder_layer_forward(layer, x, NULL, pad, false);
    assert_non_null(y);
    /* change the padded tokens of sequence 0: its first 4 outputs stay */
    ct_tensor *x2 = ct_clone(x);
    ct_fill_(ct_narrow(ct_select(x2, 0, 0), 0, 4, 2), ct_scalar_float(3.0));
    ct_tensor *y2 = ct_nn_transformer_encoder_layer_forward(layer, x2, NULL, pad, false);
    bool close = false;
    assert_int_equal(ct_allclose(ct_narrow(ct_select(y, 0, 0), 0, 0, 4), ct_narrow(ct_select(y2, 0, 0), 0, 0, 4), 1e-5,
                                 1e-6, false, &close),
                     CT_OK);
    assert_true(close);
    ct_module_free(layer);
    ct_scope_end();
}

/* ------------------------------------------------------------------ CUDA */

/* The goldens on the GPU (float64 and float32), through the same ops; and a float16
 * causal self-attention without weights, the flash kernels' case, against float32 on
 * the CPU. */
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
    ct_scope_begin();
    ct_manual_seed(6);
    ct_module *m = ct_nn_multihead_attention(64, 4, 0.0, true, false, false, 0, 0, true, CT_F32);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 16, 64), CT_F32, CT_CPU);
    ct_tensor *causal = ct_nn_transformer_generate_square_subsequent_mask(16, CT_F32, CT_CPU);
    ct_tensor *want = NULL, *got = NULL;
    assert_int_equal(ct_nn_multihead_attention_forward_ex(m, x, x, x, NULL, false, causal, true, true, &want, NULL),
                     CT_OK);
    assert_int_equal(ct_module_to(m, CT_CUDA(0), CT_F16), CT_OK);
    ct_tensor *xh = ct_to_device(ct_to_dtype(x, CT_F16), CT_CUDA(0));
    assert_int_equal(ct_nn_multihead_attention_forward_ex(m, xh, xh, xh, NULL, false,
                                                          ct_to_device(ct_to_dtype(causal, CT_F16), CT_CUDA(0)), true,
                                                          true, &got, NULL),
                     CT_OK);
    assert_int_equal(ct_tensor_device(got).type, CT_DEVICE_CUDA);
    bool close = false;
    assert_int_equal(ct_allclose(ct_to_dtype(ct_to_device(got, CT_CPU), CT_F32), want, 2e-2, 2e-2, false, &close),
                     CT_OK);
    assert_true(close);
    ct_module_free(m);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_float64),
        cmocka_unit_test(test_golden_float32),
        cmocka_unit_test(test_multi_forward),
        cmocka_unit_test(test_sequential),
        cmocka_unit_test(test_state_dict_names),
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_load_pytorch_file),
        cmocka_unit_test(test_repr),
        cmocka_unit_test(test_strided_mask),
        cmocka_unit_test(test_square_subsequent_mask),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_paths_agree),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_bert_layer),
        cmocka_unit_test(test_cuda),
    };
    return cmocka_run_group_tests(tests, load, free_golden);
}
