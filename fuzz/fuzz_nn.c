/* libFuzzer target: the torch.nn layers. Each input is a program of up to 16 steps; a
 * step builds one layer from the input's bytes (sizes of 0 to 5, sometimes negative or
 * larger; flags; mode strings, unknown ones too; float32, float64 and other dtypes),
 * then calls its forward on tensors whose shapes mostly fit the layer and sometimes do
 * not (a dim too many or too few, a wrong size, another dtype, META), with optional
 * arguments (initial states, lengths, masks of bool and float types, offsets) present,
 * absent or malformed, in training or eval mode; a forward that succeeds is followed,
 * sometimes, by a backward, and for the recurrent layers by a double backward (Note
 * [Double backward through the fused recurrence]); a recurrent forward runs now and
 * then in inference mode, with the prepacked weights and oneDNN's LSTM primitive forced
 * on or off. The layers: RNN, LSTM (projections), GRU, MultiheadAttention,
 * TransformerEncoderLayer, Conv1d/2d/3d with padding modes, ConvTranspose2d, max/avg
 * pools, interpolate, pad, EmbeddingBag, GroupNorm, InstanceNorm and BatchNorm.
 *
 * After every call, as in fuzz_ops: every result is a valid tensor (shape and numel
 * agree, its view lies in its storage, bools are 0 or 1, every element reads) and a
 * failure is an error with a message; the scope depth does not change. LSan, ASan and
 * UBSan check the rest. FUZZ_NN_TRACE=1 prints every call. */
#define FUZZ_NAME "fuzz_nn"
#define FUZZ_TRACE_ENV "FUZZ_NN_TRACE"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__asan_default_options(void);

/* Huge requests must fail as out of memory (the API's answer), not stop the run. */
const char *__asan_default_options(void) { return "allocator_may_return_null=1:detect_leaks=1"; }

/* ------------------------------------------------------------------ arguments */

/* The layer's dtype: float32 or float64 mostly. */
static ct_dtype layer_dtype(rd *r) {
    unsigned k = u8(r);
    return k < 120 ? CT_F32 : k < 240 ? CT_F64 : pick_dtype(r);
}

/* A size meant to be want, sometimes another. */
static int64_t fit(rd *r, int64_t want) { return u8(r) < 215 ? want : pick_size(r); }

/* A tensor of the given shape (the shape sometimes changed: a dim more or less, one
 * size off), in dtype dt (sometimes another), on the CPU (META now and then), with
 * values from the generator (integers in [-1, 6)). */
static ct_tensor *tensor_like(rd *r, const int64_t *shape, int nd, ct_dtype dt) {
    int64_t s[6];
    for (int i = 0; i < nd && i < 5; i++)
        s[i] = shape[i];
    unsigned k = u8(r);
    if (k >= 236 && nd < 5)
        s[nd++] = pick_size(r);
    else if (k >= 220 && nd > 0)
        nd--;
    else if (k >= 200 && nd > 0)
        s[u8(r) % (unsigned)nd] = pick_size(r);
    if (u8(r) >= 240)
        dt = pick_dtype(r);
    ct_device dev = u8(r) >= 248 ? CT_META : CT_CPU;
    if (dev.type == CT_DEVICE_META)
        return ct_empty(s, nd, dt, dev);
    if (ct_dtype_is_floating(dt)) {
        ct_tensor *t = ct_randn(s, nd, CT_F64, CT_CPU);
        return t ? ct_to_dtype(t, dt) : NULL;
    }
    return ct_randint(dt == CT_BOOL ? 0 : -1, dt == CT_BOOL ? 2 : 6, s, nd, dt, CT_CPU);
}

/* Sometimes NULL, else tensor_like. */
static ct_tensor *maybe(rd *r, const int64_t *shape, int nd, ct_dtype dt) {
    return u8(r) < 100 ? NULL : tensor_like(r, shape, nd, dt);
}

/* A mask of a bool or floating dtype. */
static ct_tensor *mask_like(rd *r, const int64_t *shape, int nd, ct_dtype fdt) {
    if (u8(r) < 110)
        return NULL;
    return tensor_like(r, shape, nd, u8(r) & 1 ? CT_BOOL : fdt);
}

static const char *pick_mode(rd *r, const char *const *modes, int n) {
    unsigned k = u8(r);
    return k < 8 ? (k & 1 ? "nonsense" : NULL) : modes[k % (unsigned)n];
}

static double pick_prob(rd *r) {
    unsigned k = u8(r);
    return k < 150 ? 0.0 : k < 230 ? 0.5 : k < 240 ? 1.0 : pick_double(r);
}

/* ------------------------------------------------------------------ backward */

/* The sum of y, differentiated: once, or (recurrent layers) twice, through a gradient
 * taken with create_graph. */
static void backward(rd *r, ct_tensor *y, const ct_tensor *x, bool twice) {
    if (!y || !ct_tensor_requires_grad(y) || u8(r) < 96 || ct_tensor_device(y).type == CT_DEVICE_META)
        return;
    ct_tensor *s = checked(ct_sum(y, NULL, 0, false, CT_DTYPE_UNDEFINED), "sum");
    if (!s)
        return;
    if (twice && x && ct_tensor_requires_grad(x) && (u8(r) & 1)) {
        ct_tensor *g = NULL;
        ct_status st = ct_autograd_grad((const ct_tensor *[]){s}, 1, &x, 1, NULL, true, true, true, &g);
        checked_status(st, "autograd_grad(create_graph)");
        if (st == CT_OK && g && ct_tensor_requires_grad(g)) {
            ct_tensor *p = checked(ct_sum(ct_mul(g, g), NULL, 0, false, CT_DTYPE_UNDEFINED), "penalty");
            if (p)
                checked_status(ct_backward(p, NULL, false, false), "backward(penalty)");
        }
        return;
    }
    checked_status(ct_backward(s, NULL, false, false), "backward");
}

/* ------------------------------------------------------------------ the layers */

static void recurrent(rd *r) {
    int kind = (int)(u8(r) % 4); /* tanh, relu, LSTM, GRU */
    int64_t in = pick_size(r), hid = pick_size(r), layers = range(r, 0, 3);
    bool bias = u8(r) & 1, bf = u8(r) & 1, bidir = u8(r) & 1;
    int64_t proj = kind == 2 && (u8(r) & 3) == 0 ? pick_size(r) : 0;
    double drop = pick_prob(r);
    ct_dtype dt = layer_dtype(r);
    ct_module *m = kind == 2   ? ct_nn_lstm(in, hid, layers, bias, bf, drop, bidir, proj, dt)
                   : kind == 3 ? ct_nn_gru(in, hid, layers, bias, bf, drop, bidir, dt)
                               : ct_nn_rnn(in, hid, layers, pick_mode(r, (const char *const[]){"tanh", "relu"}, 2),
                                           bias, bf, drop, bidir, dt);
    if (!m) {
        checked(NULL, "rnn constructor");
        return;
    }
    ct_module_train(m, u8(r) & 1);
    int64_t T = pick_size(r), B = pick_size(r), D = bidir ? 2 : 1, P = proj > 0 ? proj : hid;
    bool batched = u8(r) >= 40;
    int64_t xs[3] = {bf && batched ? B : T, bf && batched ? T : B, in};
    if (!batched)
        xs[1] = in;
    ct_tensor *x = tensor_like(r, xs, batched ? 3 : 2, dt);
    if (x && ct_dtype_is_floating(ct_tensor_dtype(x)) && (u8(r) & 1))
        ct_tensor_set_requires_grad(x, true);
    int64_t hs[3] = {fit(r, layers * D), fit(r, B), fit(r, P)}, cs[3] = {hs[0], hs[1], fit(r, hid)};
    if (!batched)
        hs[1] = hs[2], cs[1] = cs[2];
    ct_tensor *h0 = maybe(r, hs, batched ? 3 : 2, dt), *c0 = kind == 2 ? maybe(r, cs, batched ? 3 : 2, dt) : NULL;
    ct_tensor *lengths = NULL;
    if (u8(r) < 60) {
        int64_t n = fit(r, B);
        lengths = n >= 0 && n < 8 ? ct_empty(CT_SHAPE(n), CT_I64, CT_CPU) : NULL;
        for (int64_t i = 0; lengths && i < n; i++)
            ct_tensor_set(lengths, CT_INDEX(i), (double)range(r, -1, 6));
    }
    if (x && ct_tensor_device(x).type == CT_DEVICE_META)
        checked_status(ct_module_to(m, CT_META, CT_DTYPE_UNDEFINED), "module_to(meta)");
    /* the CPU paths that apply only on AVX-512 or one thread by default, on any CPU:
     * prepacked recurrent weights and, in inference mode, oneDNN's LSTM primitive */
    unsigned paths = u8(r);
    setenv("CT_PACKED_MM", paths & 1 ? "1" : "0", 1);
    setenv("CT_ONEDNN_RNN", paths & 2 ? "1" : "0", 1);
    const bool infer = (paths & 12) == 0;
    if (infer)
        ct_inference_mode_begin();
    ct_tensor *y = NULL, *hn = NULL, *cn = NULL;
    ct_status st = kind == 2 ? ct_nn_lstm_forward(m, x, h0, c0, lengths, &y, &hn, &cn)
                   : kind == 3 ? ct_nn_gru_forward(m, x, h0, lengths, &y, &hn)
                               : ct_nn_rnn_forward(m, x, h0, lengths, &y, &hn);
    if (infer)
        ct_inference_mode_end();
    checked_status(st, "rnn forward");
    if (st == CT_OK) {
        checked(y, "rnn output");
        checked(hn, "rnn h_n");
        if (kind == 2)
            checked(cn, "lstm c_n");
        if (!infer)
            backward(r, y, x, true);
    }
    unsetenv("CT_PACKED_MM");
    unsetenv("CT_ONEDNN_RNN");
    ct_module_free(m);
}

static void attention(rd *r) {
    int64_t E = pick_size(r), H = range(r, 0, 3), kd = u8(r) & 1 ? pick_size(r) : 0, vd = u8(r) & 1 ? pick_size(r) : 0;
    bool bf = u8(r) & 1;
    ct_dtype dt = layer_dtype(r);
    ct_module *m = ct_nn_multihead_attention(E, H, pick_prob(r), u8(r) & 1, (u8(r) & 3) == 0, (u8(r) & 3) == 0, kd,
                                             vd, bf, dt);
    if (!m) {
        checked(NULL, "multihead_attention constructor");
        return;
    }
    ct_module_train(m, u8(r) & 1);
    int64_t L = pick_size(r), S = pick_size(r), N = pick_size(r);
    int64_t qs[3] = {bf ? N : L, bf ? L : N, E}, ks[3] = {bf ? N : S, bf ? S : N, kd ? kd : E};
    int64_t vs[3] = {ks[0], ks[1], vd ? vd : E};
    ct_tensor *q = tensor_like(r, qs, 3, dt), *k = tensor_like(r, ks, 3, dt), *v = tensor_like(r, vs, 3, dt);
    if (q && ct_dtype_is_floating(ct_tensor_dtype(q)) && (u8(r) & 1))
        ct_tensor_set_requires_grad(q, true);
    int64_t kpm_s[2] = {N, S}, am_s[3] = {N * H, L, S};
    ct_tensor *kpm = mask_like(r, kpm_s, 2, dt);
    ct_tensor *am = u8(r) & 1 ? mask_like(r, am_s + 1, 2, dt) : mask_like(r, am_s, 3, dt);
    bool need = u8(r) & 1, avg = u8(r) & 1, causal = (u8(r) & 7) == 0;
    ct_tensor *o = NULL, *w = NULL;
    ct_status st = ct_nn_multihead_attention_forward_ex(m, q, k, v, kpm, need, am, avg, causal, &o, &w);
    checked_status(st, "multihead_attention forward");
    if (st == CT_OK) {
        checked(o, "attention output");
        if (need)
            checked(w, "attention weights");
        backward(r, o, q, false);
    }
    ct_module_free(m);
}

static void encoder_layer(rd *r) {
    int64_t E = pick_size(r), H = range(r, 0, 3), F = pick_size(r);
    bool bf = u8(r) & 1;
    ct_dtype dt = layer_dtype(r);
    ct_module *m = ct_nn_transformer_encoder_layer(E, H, F, pick_prob(r),
                                                   pick_mode(r, (const char *const[]){"relu", "gelu"}, 2),
                                                   u8(r) & 1 ? 1e-5 : pick_double(r), bf, u8(r) & 1, u8(r) & 1, dt);
    if (!m) {
        checked(NULL, "transformer_encoder_layer constructor");
        return;
    }
    ct_module_train(m, u8(r) & 1);
    int64_t L = pick_size(r), N = pick_size(r);
    int64_t xs[3] = {bf ? N : L, bf ? L : N, E}, ms[2] = {L, L}, ks[2] = {N, L};
    ct_tensor *x = tensor_like(r, xs, 3, dt);
    if (x && ct_dtype_is_floating(ct_tensor_dtype(x)) && (u8(r) & 1))
        ct_tensor_set_requires_grad(x, true);
    ct_tensor *y = checked(ct_nn_transformer_encoder_layer_forward(m, x, mask_like(r, ms, 2, dt),
                                                                   mask_like(r, ks, 2, dt), (u8(r) & 7) == 0),
                           "transformer_encoder_layer forward");
    backward(r, y, x, false);
    ct_module_free(m);
}

static const char *const pad_modes[] = {"zeros", "reflect", "replicate", "circular"};

static void convolution(rd *r) {
    int nd = (int)range(r, 1, 3);
    bool transposed = nd == 2 && (u8(r) & 3) == 0;
    int64_t cin = pick_size(r), cout = pick_size(r), groups = u8(r) < 200 ? 1 : pick_size(r);
    int64_t k[3], s[3], p[3], d[3], op[2];
    for (int i = 0; i < 3; i++) {
        k[i] = pick_size(r), s[i] = u8(r) < 200 ? 1 : pick_size(r), p[i] = u8(r) < 180 ? 0 : pick_size(r);
        d[i] = u8(r) < 220 ? 1 : pick_size(r);
    }
    op[0] = u8(r) < 230 ? 0 : pick_size(r), op[1] = u8(r) < 230 ? 0 : pick_size(r);
    const char *mode = pick_mode(r, pad_modes, 4);
    ct_dtype dt = layer_dtype(r);
    bool bias = u8(r) & 1;
    ct_module *m = transposed ? ct_nn_conv_transpose2d(cin, cout, k, s, p, op, groups, bias, d, dt)
                   : nd == 1  ? ct_nn_conv1d(cin, cout, k[0], s[0], p[0], d[0], groups, bias, mode, dt)
                   : nd == 2  ? ct_nn_conv2d(cin, cout, k, s, p, d, groups, bias, dt)
                              : ct_nn_conv3d(cin, cout, k, s, p, d, groups, bias, mode, dt);
    if (!m) {
        checked(NULL, "conv constructor");
        return;
    }
    int64_t xs[5] = {pick_size(r), transposed ? cin : cin, range(r, 0, 7), range(r, 0, 7), range(r, 0, 7)};
    ct_tensor *x = tensor_like(r, xs, nd + 2, dt);
    if (x && ct_dtype_is_floating(ct_tensor_dtype(x)) && (u8(r) & 1))
        ct_tensor_set_requires_grad(x, true);
    ct_tensor *y = checked(ct_module_forward(m, x), "conv forward");
    backward(r, y, x, false);
    ct_module_free(m);
}

static void pooling_and_resizing(rd *r) {
    ct_dtype dt = layer_dtype(r);
    unsigned which = u8(r) % 5;
    int nd = which == 2 ? 3 : which == 0 ? 1 : 2;
    int64_t xs[5] = {pick_size(r), pick_size(r), range(r, 0, 7), range(r, 0, 7), range(r, 0, 7)};
    ct_tensor *x = tensor_like(r, xs, nd + 2, dt);
    if (x && ct_dtype_is_floating(ct_tensor_dtype(x)) && (u8(r) & 1))
        ct_tensor_set_requires_grad(x, true);
    int64_t k[3] = {pick_size(r), pick_size(r), pick_size(r)}, s[3] = {pick_size(r), pick_size(r), pick_size(r)};
    int64_t p[3] = {u8(r) < 200 ? 0 : pick_size(r), u8(r) < 200 ? 0 : pick_size(r), u8(r) < 200 ? 0 : pick_size(r)};
    ct_module *m = NULL;
    ct_tensor *y = NULL;
    switch (which) {
    case 0:
        m = ct_nn_max_pool1d(k[0], s[0], p[0], u8(r) < 220 ? 1 : pick_size(r), u8(r) & 1);
        break;
    case 1:
        m = ct_nn_max_pool2d(k, s, p);
        break;
    case 2:
        m = ct_nn_avg_pool3d(k, s, p, u8(r) & 1, u8(r) & 1, u8(r) < 220 ? 0 : pick_size(r));
        break;
    case 3: {
        static const char *const modes[] = {"nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear"};
        double scale[3] = {pick_double(r), pick_double(r), pick_double(r)};
        bool by_size = u8(r) & 1;
        y = checked(ct_interpolate(x, by_size ? k : NULL, by_size ? NULL : scale, (int)range(r, 0, 3),
                                   pick_mode(r, modes, 6), u8(r) & 1),
                    "interpolate");
        break;
    }
    default: {
        int64_t pad[6] = {pick_size(r) - 2, pick_size(r) - 2, pick_size(r) - 2, pick_size(r) - 2,
                          pick_size(r) - 2, pick_size(r) - 2};
        static const char *const modes[] = {"constant", "reflect", "replicate", "circular"};
        y = checked(ct_pad(x, pad, (int)range(r, 0, 6), pick_mode(r, modes, 4), pick_double(r)), "pad");
        break;
    }
    }
    if (which <= 2) {
        if (!m) {
            checked(NULL, "pool constructor");
            return;
        }
        y = checked(ct_module_forward(m, x), "pool forward");
        ct_module_free(m);
    }
    backward(r, y, x, false);
}

static void embedding_bag(rd *r) {
    int64_t num = pick_size(r), dim = pick_size(r);
    static const char *const modes[] = {"sum", "mean", "max"};
    bool last = u8(r) & 1;
    ct_module *m = ct_nn_embedding_bag(num, dim, pick_mode(r, modes, 3), last, u8(r) < 200 ? -1 : pick_size(r) - 2,
                                       layer_dtype(r));
    if (!m) {
        checked(NULL, "embedding_bag constructor");
        return;
    }
    int64_t xs[2] = {pick_size(r), pick_size(r)};
    int xnd = u8(r) & 1 ? 1 : 2;
    ct_tensor *x = tensor_like(r, xs, xnd, CT_I64);
    int64_t os[1] = {pick_size(r)};
    ct_tensor *off = u8(r) & 1 ? tensor_like(r, os, 1, CT_I64) : NULL;
    ct_tensor *psw = u8(r) < 60 ? tensor_like(r, xs, xnd, CT_F32) : NULL;
    ct_tensor *y = checked(ct_nn_embedding_bag_forward(m, x, off, psw), "embedding_bag forward");
    backward(r, y, NULL, false);
    ct_module_free(m);
}

static void normalization(rd *r) {
    unsigned which = u8(r) % 3;
    int64_t c = pick_size(r), g = pick_size(r);
    ct_dtype dt = layer_dtype(r);
    double eps = u8(r) < 230 ? 1e-5 : pick_double(r), mom = u8(r) < 200 ? 0.1 : u8(r) & 1 ? -1.0 : pick_double(r);
    bool affine = u8(r) & 1, track = u8(r) & 1;
    ct_module *m = which == 0   ? ct_nn_group_norm(g, c, eps, affine, dt)
                   : which == 1 ? ct_nn_instance_norm1d(c, eps, mom, affine, track, dt)
                                : ct_nn_batch_norm2d(c, eps, mom, affine, track, dt);
    if (!m) {
        checked(NULL, "norm constructor");
        return;
    }
    ct_module_train(m, u8(r) & 1);
    int64_t xs[4] = {pick_size(r), fit(r, c), range(r, 0, 5), range(r, 0, 5)};
    ct_tensor *x = tensor_like(r, xs, which == 1 ? 3 : 4, dt);
    if (x && ct_dtype_is_floating(ct_tensor_dtype(x)) && (u8(r) & 1))
        ct_tensor_set_requires_grad(x, true);
    ct_tensor *y = checked(ct_module_forward(m, x), "norm forward");
    backward(r, y, x, false);
    ct_module_free(m);
}

static void step(rd *r) {
    ct_scope_begin();
    switch (u8(r) % 7) {
    case 0: recurrent(r); break;
    case 1: attention(r); break;
    case 2: encoder_layer(r); break;
    case 3: convolution(r); break;
    case 4: pooling_and_resizing(r); break;
    case 5: embedding_bag(r); break;
    default: normalization(r); break;
    }
    ct_scope_end();
    ct_clear_error();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    count_calls_at_exit();
    rd r = {data, size};
    ct_manual_seed(0);
    ct_scope_begin();
    int depth = ct_scope_depth();
    bool grad = ct_is_grad_enabled();
    for (int i = 0; i < 16 && r.n > 0; i++) {
        step(&r);
        ncalls++;
        if (ct_scope_depth() != depth)
            fail("the scope depth changed", "a step");
    }
    ct_scope_end();
    ct_set_grad_enabled(grad);
    ct_clear_error();
    return 0;
}
