/* The torch.nn layers of src/nn/conv_pool_layers.c, activations.c and norm_layers.c
 * against PyTorch 2.15 (tests/golden/gen_layers.py): each case loads PyTorch's
 * parameters and buffers into the module, then checks the output, the gradients of the
 * input and of every parameter, and the running statistics, in float64 (1e-6) and
 * float32 (1e-5); the repr strings; gradcheck in float64; the initialisation bounds;
 * and the errors, with PyTorch's messages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/ext.h"
#include "nn_golden.h"
#include "data/nn_layers_repr.h"

static int load_golden(void **state) {
    (void)state;
    return load_golden_file(CT_TEST_DATA_DIR "/nn_layers_golden.txt");
}

/* ------------------------------------------------------------------ the modules */

/* The module of each case and repr entry, built as tests/golden/gen_layers.py builds it. */
static ct_module *make(const char *n, ct_dtype dt) {
#define IS(s) (!strcmp(n, s))
    if (IS("conv1d"))
        return ct_nn_conv1d(4, 6, 3, 2, 1, 1, 2, true, NULL, dt);
    if (IS("conv1d_nobias"))
        return ct_nn_conv1d(3, 2, 2, 1, 0, 2, 1, false, "zeros", dt);
    if (IS("conv1d_reflect"))
        return ct_nn_conv1d(3, 2, 3, 1, 2, 1, 1, true, "reflect", dt);
    if (IS("conv1d_replicate"))
        return ct_nn_conv1d(3, 2, 3, 2, 1, 1, 1, true, "replicate", dt);
    if (IS("conv1d_circular"))
        return ct_nn_conv1d(2, 2, 3, 1, 2, 1, 1, false, "circular", dt);
    if (IS("conv3d"))
        return ct_nn_conv3d(2, 4, (int64_t[]){3, 3, 3}, (int64_t[]){1, 2, 1}, (int64_t[]){1, 0, 1}, NULL, 1, true,
                            NULL, dt);
    if (IS("conv3d_groups"))
        return ct_nn_conv3d(4, 2, (int64_t[]){2, 2, 3}, NULL, NULL, (int64_t[]){2, 1, 1}, 2, false, NULL, dt);
    if (IS("conv3d_unbatched"))
        return ct_nn_conv3d(2, 3, (int64_t[]){2, 2, 2}, (int64_t[]){2, 2, 2}, NULL, NULL, 1, true, NULL, dt);
    if (IS("conv3d_reflect"))
        return ct_nn_conv3d(2, 2, (int64_t[]){3, 3, 3}, NULL, (int64_t[]){1, 1, 1}, NULL, 1, true, "reflect", dt);
    if (IS("conv3d_circular"))
        return ct_nn_conv3d(2, 2, (int64_t[]){2, 3, 3}, NULL, (int64_t[]){1, 1, 2}, NULL, 1, true, "circular", dt);
    if (IS("r_conv3d_default"))
        return ct_nn_conv3d(2, 4, (int64_t[]){3, 3, 3}, NULL, NULL, NULL, 1, true, NULL, dt);
    if (IS("conv_t1d"))
        return ct_nn_conv_transpose1d(4, 6, 3, 2, 1, 1, 2, true, 1, dt);
    if (IS("conv_t1d_unbatched"))
        return ct_nn_conv_transpose1d(3, 2, 3, 1, 0, 0, 1, false, 2, dt);
    if (IS("conv_t2d"))
        return ct_nn_conv_transpose2d(3, 4, CT_INDEX(3, 2), CT_INDEX(2, 1), CT_INDEX(1, 0), CT_INDEX(1, 0), 1, true,
                                      CT_INDEX(1, 2), dt);
    if (IS("conv_t2d_groups"))
        return ct_nn_conv_transpose2d(4, 2, CT_INDEX(2, 2), CT_INDEX(2, 2), NULL, NULL, 2, true, NULL, dt);
    if (IS("bn1d_2d") || IS("bn1d_eval") || IS("r_bn1d_default"))
        return ct_nn_batch_norm1d(3, 1e-5, 0.1, true, true, dt);
    if (IS("bn1d_3d"))
        return ct_nn_batch_norm1d(3, 1e-5, 0.3, true, true, dt);
    if (IS("bn2d_cumulative"))
        return ct_nn_batch_norm2d(2, 1e-5, -1, true, true, dt);
    if (IS("r_in1d_momentum_none"))
        return ct_nn_instance_norm1d(3, 1e-5, -1, false, false, dt);
    if (IS("bn3d"))
        return ct_nn_batch_norm3d(2, 1e-3, 0.1, true, true, dt);
    if (IS("bn3d_noaffine"))
        return ct_nn_batch_norm3d(2, 1e-5, 0.1, false, false, dt);
    if (IS("r_bn3d_plain"))
        return ct_nn_batch_norm3d(3, 1e-5, 0.1, false, false, dt);
    if (IS("gn"))
        return ct_nn_group_norm(2, 4, 1e-5, true, dt);
    if (IS("gn_noaffine"))
        return ct_nn_group_norm(3, 6, 1e-4, false, dt);
    if (IS("in1d"))
        return ct_nn_instance_norm1d(3, 1e-5, 0.1, false, false, dt);
    if (IS("in1d_unbatched"))
        return ct_nn_instance_norm1d(3, 1e-5, 0.1, true, false, dt);
    if (IS("in2d_track") || IS("in2d_eval"))
        return ct_nn_instance_norm2d(3, 1e-5, 0.1, true, true, dt);
    if (IS("r_in2d_default"))
        return ct_nn_instance_norm2d(5, 1e-5, 0.1, false, false, dt);
    if (IS("maxpool1d"))
        return ct_nn_max_pool1d(3, 2, 1, 1, true);
    if (IS("maxpool1d_unbatched"))
        return ct_nn_max_pool1d(2, 0, 0, 2, false);
    if (IS("r_maxpool1d_default"))
        return ct_nn_max_pool1d(3, 0, 0, 1, false);
    if (IS("maxpool2d_ex"))
        return ct_nn_max_pool2d_ex(CT_INDEX(2, 3), CT_INDEX(1, 1), CT_INDEX(1, 1), CT_INDEX(2, 2), true);
    if (IS("maxpool3d"))
        return ct_nn_max_pool3d((int64_t[]){2, 2, 2}, NULL, NULL, NULL, false);
    if (IS("maxpool3d_ex"))
        return ct_nn_max_pool3d((int64_t[]){3, 2, 3}, (int64_t[]){2, 1, 2}, (int64_t[]){1, 1, 1},
                                (int64_t[]){1, 2, 1}, true);
    if (IS("maxpool3d_unbatched"))
        return ct_nn_max_pool3d((int64_t[]){2, 2, 2}, (int64_t[]){1, 1, 1}, (int64_t[]){1, 0, 1}, NULL, false);
    if (IS("avgpool3d"))
        return ct_nn_avg_pool3d((int64_t[]){2, 2, 2}, NULL, NULL, false, true, 0);
    if (IS("avgpool3d_ex"))
        return ct_nn_avg_pool3d((int64_t[]){3, 2, 3}, (int64_t[]){2, 1, 2}, (int64_t[]){1, 1, 1}, true, false, 0);
    if (IS("avgpool3d_ceil_pad"))
        return ct_nn_avg_pool3d((int64_t[]){3, 3, 3}, (int64_t[]){2, 2, 2}, (int64_t[]){1, 1, 1}, true, true, 0);
    if (IS("avgpool3d_div_unbatched"))
        return ct_nn_avg_pool3d((int64_t[]){2, 2, 2}, (int64_t[]){1, 1, 1}, (int64_t[]){1, 0, 1}, false, true, 5);
    if (IS("f_unpool2d") || IS("f_unpool2d_unbatched"))
        return ct_nn_max_unpool2d(CT_INDEX(2, 2), IS("f_unpool2d") ? NULL : CT_INDEX(1, 1), NULL);
    if (IS("f_unpool2d_ex"))
        return ct_nn_max_unpool2d(CT_INDEX(3, 2), CT_INDEX(2, 1), CT_INDEX(1, 0));
    if (IS("r_maxpool2d_indices"))
        return ct_nn_max_pool2d_with_indices(CT_INDEX(2, 3), CT_INDEX(1, 1), CT_INDEX(1, 1), CT_INDEX(1, 2), true);
    if (IS("up_trilinear"))
        return ct_nn_upsample(NULL, (double[]){2.0}, 1, "trilinear", false);
    if (IS("up_trilinear_ac"))
        return ct_nn_upsample(CT_INDEX(3, 4, 5), NULL, 3, "trilinear", true);
    if (IS("up_trilinear_mixed"))
        return ct_nn_upsample(NULL, (double[]){1.5, 0.7, 2.0}, 3, "trilinear", false);
    if (IS("up_nearest_3d"))
        return ct_nn_upsample(NULL, (double[]){2.0, 1.5, 0.5}, 3, "nearest", false);
    if (IS("up_nearest_exact_3d"))
        return ct_nn_upsample(CT_INDEX(3, 2, 5), NULL, 3, "nearest-exact", false);
    if (IS("conv_t3d"))
        return ct_nn_conv_transpose3d(2, 4, (int64_t[]){3, 2, 3}, (int64_t[]){2, 1, 2}, (int64_t[]){1, 0, 1},
                                      (int64_t[]){1, 0, 1}, 1, true, NULL, dt);
    if (IS("conv_t3d_groups"))
        return ct_nn_conv_transpose3d(4, 2, (int64_t[]){2, 2, 2}, (int64_t[]){2, 2, 2}, NULL, NULL, 2, false,
                                      (int64_t[]){2, 1, 1}, dt);
    if (IS("conv_t3d_unbatched"))
        return ct_nn_conv_transpose3d(2, 3, (int64_t[]){2, 2, 2}, NULL, (int64_t[]){1, 1, 1}, NULL, 1, true,
                                      (int64_t[]){2, 2, 2}, dt);
    if (IS("r_conv_t3d_default"))
        return ct_nn_conv_transpose3d(2, 4, (int64_t[]){3, 3, 3}, NULL, NULL, NULL, 1, true, NULL, dt);
    if (IS("avgpool1d"))
        return ct_nn_avg_pool1d(3, 2, 1, true, false);
    if (IS("r_avgpool1d_default"))
        return ct_nn_avg_pool1d(3, 0, 0, false, true);
    if (IS("avgpool2d"))
        return ct_nn_avg_pool2d(CT_INDEX(2, 3), CT_INDEX(1, 2), CT_INDEX(1, 1), false, true, 0);
    if (IS("avgpool2d_div"))
        return ct_nn_avg_pool2d(CT_INDEX(2, 2), NULL, NULL, false, true, 3);
    if (IS("r_avgpool2d_default"))
        return ct_nn_avg_pool2d(CT_INDEX(2, 2), NULL, NULL, false, true, 0);
    if (IS("adaptive_avg1d"))
        return ct_nn_adaptive_avg_pool1d(4);
    if (IS("adaptive_avg2d"))
        return ct_nn_adaptive_avg_pool2d(CT_INDEX(3, -1));
    if (IS("adaptive_max1d"))
        return ct_nn_adaptive_max_pool1d(4);
    if (IS("adaptive_max2d"))
        return ct_nn_adaptive_max_pool2d(CT_INDEX(3, 4));
    if (IS("adaptive_max2d_none"))
        return ct_nn_adaptive_max_pool2d(CT_INDEX(-1, 2));
    if (IS("adaptive_max2d_unbatched"))
        return ct_nn_adaptive_max_pool2d(CT_INDEX(3, 3));
    if (IS("r_adaptive_avg2d_square"))
        return ct_nn_adaptive_avg_pool2d(CT_INDEX(3, 3));
    if (IS("r_adaptive_avg2d_pair"))
        return ct_nn_adaptive_avg_pool2d(CT_INDEX(3, 4));
    if (IS("pixel_shuffle") || IS("pixel_shuffle_5d"))
        return ct_nn_pixel_shuffle(2);
    if (IS("pixel_unshuffle"))
        return ct_nn_pixel_unshuffle(2);
    if (IS("unflatten"))
        return ct_nn_unflatten(1, CT_SHAPE(2, -1));
    if (IS("identity"))
        return ct_nn_identity();
    if (IS("up_nearest_2x"))
        return ct_nn_upsample(NULL, (double[]){2.0}, 1, NULL, false);
    if (IS("up_nearest_size"))
        return ct_nn_upsample(CT_INDEX(7, 3), NULL, 2, "nearest", false);
    if (IS("up_nearest_1d"))
        return ct_nn_upsample(NULL, (double[]){1.7}, 1, "nearest", false);
    if (IS("up_nearest_exact"))
        return ct_nn_upsample(NULL, (double[]){1.5, 0.6}, 2, "nearest-exact", false);
    if (IS("up_linear"))
        return ct_nn_upsample(NULL, (double[]){2.5}, 1, "linear", false);
    if (IS("up_linear_ac"))
        return ct_nn_upsample(CT_INDEX(7), NULL, 1, "linear", true);
    if (IS("up_bilinear"))
        return ct_nn_upsample(CT_INDEX(5, 7), NULL, 2, "bilinear", false);
    if (IS("up_bilinear_ac"))
        return ct_nn_upsample(NULL, (double[]){2.0, 1.5}, 2, "bilinear", true);
    if (IS("up_bilinear_down"))
        return ct_nn_upsample(CT_INDEX(2, 3), NULL, 2, "bilinear", false);
    if (IS("up_bilinear_same"))
        return ct_nn_upsample(CT_INDEX(3, 4), NULL, 2, "bilinear", false);
    if (IS("up_bicubic"))
        return ct_nn_upsample(NULL, (double[]){2.0}, 1, "bicubic", false);
    if (IS("up_bicubic_ac"))
        return ct_nn_upsample(CT_INDEX(6, 5), NULL, 2, "bicubic", true);
    if (IS("up_bicubic_down"))
        return ct_nn_upsample(CT_INDEX(3, 2), NULL, 2, "bicubic", false);
    if (IS("up_nearest2d"))
        return ct_nn_upsampling_nearest2d(NULL, (double[]){2.0}, 1);
    if (IS("up_bilinear2d"))
        return ct_nn_upsampling_bilinear2d(CT_INDEX(5, 4), NULL, 2);
    if (IS("bag_sum_2d"))
        return ct_nn_embedding_bag(10, 3, "sum", false, CT_NO_PADDING_IDX, dt);
    if (IS("bag_mean_offsets") || IS("r_bag_default"))
        return ct_nn_embedding_bag(10, 3, NULL, false, CT_NO_PADDING_IDX, dt);
    if (IS("bag_max"))
        return ct_nn_embedding_bag(8, 4, "max", false, CT_NO_PADDING_IDX, dt);
    if (IS("bag_sum_psw"))
        return ct_nn_embedding_bag(10, 3, "sum", true, CT_NO_PADDING_IDX, dt);
    if (IS("bag_mean_pad"))
        return ct_nn_embedding_bag(6, 2, "mean", false, 2, dt);
    if (IS("bag_max_pad"))
        return ct_nn_embedding_bag(6, 3, "max", true, 0, dt);
    if (IS("bag_sum_psw_2d"))
        return ct_nn_embedding_bag(7, 2, "sum", false, -1, dt);
    if (IS("r_conv1d_default"))
        return ct_nn_conv1d(4, 6, 3, 1, 0, 1, 1, true, NULL, dt);
    if (IS("r_conv_t2d_default"))
        return ct_nn_conv_transpose2d(4, 6, CT_INDEX(3, 2), NULL, NULL, NULL, 1, true, NULL, dt);
    /* activations */
    static const char *const plain[][2] = {
        {"act_relu", "ReLU"},           {"act_tanh", "Tanh"},         {"act_sigmoid", "Sigmoid"},
        {"act_silu", "SiLU"},           {"act_mish", "Mish"},         {"act_selu", "SELU"},
        {"act_relu6", "ReLU6"},         {"act_hardswish", "Hardswish"}, {"act_hardsigmoid", "Hardsigmoid"},
        {"act_logsigmoid", "LogSigmoid"}, {"act_softsign", "Softsign"}, {"act_tanhshrink", "Tanhshrink"},
    };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (IS(plain[i][0]))
            return ct_nn_activation(plain[i][1]);
    if (IS("act_leaky_relu"))
        return ct_nn_leaky_relu(0.2);
    if (IS("r_leaky_relu_default"))
        return ct_nn_leaky_relu(0.01);
    if (IS("act_elu"))
        return ct_nn_elu(1.5);
    if (IS("act_celu"))
        return ct_nn_celu(0.7);
    if (IS("act_softplus"))
        return ct_nn_softplus(2.0, 5.0);
    if (IS("r_softplus_default"))
        return ct_nn_softplus(1.0, 20.0);
    if (IS("act_hardtanh"))
        return ct_nn_hardtanh(-0.5, 2.0);
    if (IS("r_hardtanh_default"))
        return ct_nn_hardtanh(-1.0, 1.0);
    if (IS("act_hardshrink"))
        return ct_nn_hardshrink(0.6);
    if (IS("act_softshrink"))
        return ct_nn_softshrink(0.4);
    if (IS("act_softmax"))
        return ct_nn_softmax(1);
    if (IS("act_log_softmax"))
        return ct_nn_log_softmax(0);
    if (IS("act_glu"))
        return ct_nn_glu(-1);
    if (IS("act_prelu") || IS("r_prelu_default"))
        return ct_nn_prelu(1, 0.25, dt);
    if (IS("act_prelu3"))
        return ct_nn_prelu(3, 0.1, dt);
#undef IS
    return NULL;
}

/* The "f_" cases: functions of x, with the arguments of tests/golden/gen_layers.py. */
static const struct {
    const char *suffix;
    int64_t pad[6];
    int npad;
} pads[] = {
    {"_1d", {2, 3}, 2},          {"_2d", {1, 2, 2, 0}, 4},       {"_3d", {1, 1, 0, 2, 2, 1}, 6},
    {"_unbatched", {3, 1}, 2},   {"circular_crop", {-1, 2, 1, -2}, 4}, {"replicate_crop", {-1, 3, 2, -1}, 4},
};

/* The f_unpool2d cases: MaxPool2d(return_indices=True), then MaxUnpool2d, as modules
 * (*idx: the pool's indices, when not NULL). */
static ct_tensor *unpool_func(const char *n, const ct_tensor *x, ct_tensor **idx) {
    bool ex = !strcmp(n, "f_unpool2d_ex"), unb = !strcmp(n, "f_unpool2d_unbatched");
    const int64_t *k = ex ? CT_INDEX(3, 2) : CT_INDEX(2, 2), *s = ex ? CT_INDEX(2, 1) : unb ? CT_INDEX(1, 1) : NULL;
    const int64_t *p = ex ? CT_INDEX(1, 0) : NULL;
    ct_module *pool = ct_nn_max_pool2d_with_indices(k, s, p, NULL, false), *un = ct_nn_max_unpool2d(k, s, p);
    ct_tensor *out[CT_MODULE_IO_CAP], *y = NULL;
    int nout = 0;
    if (pool && un && ct_module_forward_multi(pool, &x, 1, out, CT_MODULE_IO_CAP, &nout) == CT_OK) {
        y = ct_nn_max_unpool2d_forward(un, out[0], out[1], ex ? CT_INDEX(8, 5) : NULL, ex ? 2 : 0);
        if (idx)
            *idx = out[1];
    }
    ct_module_free(pool);
    ct_module_free(un);
    return y;
}

static ct_tensor *func(const char *n, const ct_tensor *x) {
    static const char *const modes[] = {"reflect", "replicate", "circular"};
    if (!strncmp(n, "f_unpool2d", 10))
        return unpool_func(n, x, NULL);
    if (strncmp(n, "f_pad_", 6))
        return NULL;
    const char *mode = NULL;
    for (int i = 0; i < 3; i++)
        if (!strncmp(n + 6, modes[i], strlen(modes[i])))
            mode = modes[i];
    for (size_t i = 0; mode && i < sizeof pads / sizeof pads[0]; i++) {
        size_t ln = strlen(n), ls = strlen(pads[i].suffix);
        if (ln >= ls && !strcmp(n + ln - ls, pads[i].suffix))
            return ct_pad(x, pads[i].pad, pads[i].npad, mode, 0);
    }
    return NULL;
}

/* ------------------------------------------------------------------ goldens */

static ct_tensor *module_fn(ct_tensor *const *in, int n, void *ud);
static ct_tensor *func_fn(ct_tensor *const *in, int n, void *ud);

/* Where the golden cases run: the CPU, or the GPU for test_cuda (modules, inputs and
 * output gradients moved there; expect() reads results back on the host). */
static ct_device run_dev = {CT_DEVICE_CPU, 0};
static ct_tensor *on_dev(ct_tensor *t) { return t ? ct_to_device(t, run_dev) : NULL; }
static ct_module *make_on_dev(const char *n, ct_dtype dt) {
    ct_module *m = make(n, dt);
    if (m && run_dev.type != CT_DEVICE_CPU && ct_module_to(m, run_dev, CT_DTYPE_UNDEFINED) != CT_OK)
        fail_msg("%s: moving the module to the GPU: %s", n, ct_last_error());
    return m;
}

static void load_state(ct_module *m, const gcase *c, ct_dtype dt) {
    bool was = ct_set_grad_enabled(false);
    for (int i = 0; i < c->n; i++) {
        const char *n = c->t[i].name;
        bool param = !strncmp(n, "p.", 2), buffer = !strncmp(n, "b.", 2);
        if (!param && !buffer)
            continue;
        ct_tensor *dst = param ? ct_module_param(m, n + 2) : ct_module_buffer(m, n + 2);
        if (!dst)
            fail_msg("%s: the module has no %s", c->name, n);
        assert_non_null(ct_copy_(dst, ct_to_dtype(T(c, n), dt)));
    }
    ct_set_grad_enabled(was);
}

static void run_func_case(const gcase *c, ct_dtype dt, double tol) {
    ct_scope_begin();
    ct_tensor *x = ct_tensor_set_requires_grad(on_dev(ct_to_dtype(T(c, "x"), dt)), true);
    ct_tensor *y = func(c->name, x);
    if (!y)
        fail_msg("%s: %s", c->name, ct_last_error());
    expect(c, "y", y, tol);
    if (ct_backward(y, on_dev(ct_to_dtype(T(c, "gy"), dt)), false, false) != CT_OK)
        fail_msg("%s: backward: %s", c->name, ct_last_error());
    expect(c, "gx", ct_tensor_grad(x), tol);
    if (dt == CT_F64 && run_dev.type == CT_DEVICE_CPU) /* docs/compile.md, "Every op's samples" */
        ct_test_through_compile(func_fn, (void *)c->name, &x, 1, c->name);
    ct_scope_end();
}

/* An EmbeddingBag case: integer input, offsets and per_sample_weights when the case
 * has them, through the module's multi forward. */
static void run_bag_case(const gcase *c, ct_dtype dt, double tol) {
    ct_scope_begin();
    ct_module *m = make_on_dev(c->name, dt);
    if (!m)
        fail_msg("%s: %s", c->name, ct_last_error());
    load_state(m, c, dt);
    ct_tensor *psw = find(c, "psw") ? ct_tensor_set_requires_grad(on_dev(ct_to_dtype(T(c, "psw"), dt)), true) : NULL;
    ct_tensor *y = NULL;
    if (find(c, "off")) {
        const ct_tensor *in[3] = {on_dev(I(c, "x")), on_dev(I(c, "off")), psw};
        int nout = 0;
        if (ct_module_forward_multi(m, in, psw ? 3 : 2, &y, 1, &nout) != CT_OK)
            fail_msg("%s: %s", c->name, ct_last_error());
    } else {
        y = ct_nn_embedding_bag_forward(m, on_dev(I(c, "x")), NULL, psw);
    }
    expect(c, "y", y, tol);
    if (ct_backward(y, on_dev(ct_to_dtype(T(c, "gy"), dt)), false, false) != CT_OK)
        fail_msg("%s: backward: %s", c->name, ct_last_error());
    expect(c, "g.weight", ct_tensor_grad(ct_module_param(m, "weight")), tol);
    if (psw)
        expect(c, "gpsw", ct_tensor_grad(psw), tol);
    ct_module_free(m);
    ct_scope_end();
}

static void run_case(const gcase *c, ct_dtype dt, double tol) {
    if (!strncmp(c->name, "f_", 2)) {
        run_func_case(c, dt, tol);
        return;
    }
    if (!strncmp(c->name, "bag_", 4)) {
        run_bag_case(c, dt, tol);
        return;
    }
    ct_scope_begin();
    ct_module *m = make_on_dev(c->name, dt);
    if (!m)
        fail_msg("%s: %s", c->name, ct_last_error());
    load_state(m, c, dt);
    if (strstr(c->name, "_eval"))
        ct_module_train(m, false);
    ct_tensor *x = ct_tensor_set_requires_grad(on_dev(ct_to_dtype(T(c, "x"), dt)), true);
    ct_tensor *y = ct_module_forward(m, x);
    expect(c, "y", y, tol);
    assert_int_equal(ct_tensor_dtype(y), dt);
    if (ct_backward(y, on_dev(ct_to_dtype(T(c, "gy"), dt)), false, false) != CT_OK)
        fail_msg("%s: backward: %s", c->name, ct_last_error());
    expect(c, "gx", ct_tensor_grad(x), tol);
    for (int i = 0; i < c->n; i++) {
        const char *n = c->t[i].name;
        if (!strncmp(n, "g.", 2))
            expect(c, n, ct_tensor_grad(ct_module_param(m, n + 2)), tol);
        else if (!strncmp(n, "a.", 2))
            expect(c, n, ct_module_buffer(m, n + 2), tol);
    }
    /* docs/compile.md, "Every op's samples": BatchNorm with momentum=None reads
     * num_batches_tracked on the host for its factor, as PyTorch's float() of it does */
    if (dt == CT_F64 && run_dev.type == CT_DEVICE_CPU && strstr(c->name, "_cumulative"))
        ct_test_compile_refused(module_fn, m, &x, 1, c->name, "item");
    else if (dt == CT_F64 && run_dev.type == CT_DEVICE_CPU)
        ct_test_through_compile(module_fn, m, &x, 1, c->name);
    ct_module_free(m);
    ct_scope_end();
}

static void test_goldens_f64(void **state) {
    (void)state;
    for (int i = 0; i < ncases; i++)
        run_case(&cases[i], CT_F64, 1e-6);
}

static void test_goldens_f32(void **state) {
    (void)state;
    for (int i = 0; i < ncases; i++)
        run_case(&cases[i], CT_F32, 1e-5);
}

/* Every golden case on the GPU, against the same PyTorch values and tolerances. */
static void test_cuda(void **state) {
    (void)state;
    if (!ct_cuda_is_available()) {
        skip();
        return;
    }
    run_dev = CT_CUDA(0);
    for (int i = 0; i < ncases; i++) {
        run_case(&cases[i], CT_F64, 1e-6);
        run_case(&cases[i], CT_F32, 1e-5);
    }
    run_dev = CT_CPU;
}

/* Every golden case and repr entry has its module (a case the table misses fails). */
static void test_reprs(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof layer_reprs / sizeof layer_reprs[0]; i++) {
        ct_module *m = make(layer_reprs[i].name, CT_F32);
        if (!m)
            fail_msg("%s: %s", layer_reprs[i].name, ct_last_error());
        char *s = ct_module_to_string(m);
        if (!s || strcmp(s, layer_reprs[i].repr))
            fail_msg("%s: repr %s, want %s", layer_reprs[i].name, s ? s : ct_last_error(), layer_reprs[i].repr);
        free(s);
        ct_module_free(m);
    }
}

/* ------------------------------------------------------------------ gradcheck */

static ct_tensor *module_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    return ct_module_forward(ud, in[0]);
}

/* The float64 modules of a few cases, their input and parameters perturbed by
 * gradcheck's finite differences (parameters through the module's own tensors). */
static void test_gradcheck(void **state) {
    (void)state;
    static const char *const names[] = {"conv1d",       "conv1d_reflect", "conv_t1d",  "conv_t2d_groups", "gn",
                                        "in1d",         "in2d_track",     "bn1d_3d",   "maxpool1d",       "avgpool1d",
                                        "adaptive_avg2d", "pixel_unshuffle", "act_mish", "act_prelu3",      "act_glu",
                                        "conv3d",       "conv3d_groups",  "conv3d_circular", "adaptive_max2d",
                                        "adaptive_max1d", "maxpool3d_ex",
                                        "up_nearest_size", "up_linear", "up_bilinear_ac", "up_bicubic",
                                        "up_bicubic_down"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const gcase *c = NULL;
        for (int j = 0; j < ncases; j++)
            if (!strcmp(cases[j].name, names[i]))
                c = &cases[j];
        assert_non_null(c);
        ct_scope_begin();
        ct_module *m = make(c->name, CT_F64);
        assert_non_null(m);
        load_state(m, c, CT_F64);
        ct_tensor *x = ct_tensor_set_requires_grad(T(c, "x"), true);
        if (ct_gradcheck(module_fn, m, &x, 1, 1e-6, 1e-7, 1e-5) != CT_OK)
            fail_msg("%s: %s", c->name, ct_last_error());
        /* upsample_backward is differentiable: double backward */
        if (!strncmp(c->name, "up_", 3) && ct_gradgradcheck(module_fn, m, &x, 1, 1e-6, 1e-7, 1e-5) != CT_OK)
            fail_msg("%s (double backward): %s", c->name, ct_last_error());
        ct_module_free(m);
        ct_scope_end();
    }
}

static ct_tensor *func_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    return func(ud, in[0]);
}

/* MaxPool2d(return_indices=True) and MaxUnpool2d: the pool's indices against
 * PyTorch's, the gradient against finite differences (non-overlapping windows), the
 * modules' outputs and the errors (PyTorch's messages). */
static void test_max_unpool2d(void **state) {
    (void)state;
    for (int i = 0; i < ncases; i++) {
        const gcase *c = &cases[i];
        if (strncmp(c->name, "f_unpool2d", 10))
            continue;
        ct_scope_begin();
        ct_tensor *idx = NULL, *x = ct_tensor_set_requires_grad(T(c, "x"), true);
        ct_tensor *y = unpool_func(c->name, x, &idx);
        if (!y)
            fail_msg("%s: %s", c->name, ct_last_error());
        assert_int_equal(ct_tensor_dtype(idx), CT_I64);
        expect(c, "idx", idx, 0);
        /* Overlapping windows can pick one element twice: the unpool writes it once, but
         * its gradient (a gather, as PyTorch's, which the goldens check) reaches it
         * through both windows, so finite differences only agree without overlap. */
        if (!strcmp(c->name, "f_unpool2d") && ct_gradcheck(func_fn, (void *)c->name, &x, 1, 1e-6, 1e-7, 1e-5) != CT_OK)
            fail_msg("%s: %s", c->name, ct_last_error());
        ct_scope_end();
    }
    ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(1, 2, 4, 6), CT_F32, CT_CPU), *idx = NULL;
    ct_tensor *v = ct_max_pool2d(x, CT_INDEX(2, 2), NULL, NULL, NULL, false, &idx);
    assert_non_null(v);
    /* ct_module_forward of the pool with indices is the values alone */
    ct_module *pool = ct_nn_max_pool2d_with_indices(CT_INDEX(2, 2), NULL, NULL, NULL, false);
    bool eq = false;
    assert_int_equal(ct_equal(ct_module_forward(pool, x), v, &eq), CT_OK);
    assert_true(eq);
    ct_module_free(pool);
    const int64_t *k = CT_INDEX(2, 2);
    CT_ASSERT_ERR(ct_max_unpool2d(v, idx, k, NULL, NULL, CT_INDEX(9, 12), 2) != NULL, CT_ERROR_VALUE,
                  "invalid output_size \"(9, 12)\" (dim 0 must be between 2 and 6)");
    CT_ASSERT_ERR(ct_max_unpool2d(v, idx, k, NULL, NULL, CT_INDEX(1, 2, 3), 3) != NULL, CT_ERROR_VALUE,
                  "output_size should be a sequence containing 2 or 4 elements, but it has a length of '3'");
    CT_ASSERT_ERR(ct_max_unpool2d(v, idx, k, NULL, NULL, CT_INDEX(1, 2, 5, 13), 4) != NULL, CT_ERROR_VALUE,
                  "invalid output_size \"(5, 13)\" (dim 1 must be between 4 and 8)");
    CT_ASSERT_ERR(ct_max_unpool2d(v, ct_to_dtype(idx, CT_F32), k, NULL, NULL, NULL, 0) != NULL, CT_ERROR_TYPE,
                  "elements in indices should be type int64 but got: float32");
    ct_tensor *bad = ct_clone(idx);
    assert_int_equal(ct_tensor_set(bad, CT_INDEX(0, 1, 1, 2), 2300), CT_OK);
    CT_ASSERT_ERR(ct_max_unpool2d(v, bad, k, NULL, NULL, NULL, 0) != NULL, CT_ERROR_VALUE,
                  "Found an invalid max index: 2300 (output volumes are of size 4x6)");
    assert_int_equal(ct_tensor_set(bad, CT_INDEX(0, 1, 1, 2), -1), CT_OK);
    CT_ASSERT_ERR(ct_max_unpool2d(v, bad, k, NULL, NULL, NULL, 0) != NULL, CT_ERROR_VALUE,
                  "Found an invalid max index: -1");
    CT_ASSERT_ERR(ct_max_unpool2d(v, ct_narrow(idx, 2, 0, 1), k, NULL, NULL, NULL, 0) != NULL, CT_ERROR_VALUE,
                  "Expected shape of indices to be same as that of the input tensor ([1, 2, 2, 3]) but got indices "
                  "tensor with shape: [1, 2, 1, 3]");
    CT_ASSERT_ERR(ct_max_unpool2d(ct_select(ct_select(v, 0, 0), 0, 0), ct_select(ct_select(idx, 0, 0), 0, 0), k,
                                  NULL, NULL, NULL, 0) != NULL,
                  CT_ERROR_VALUE,
                  "Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with 2 dimensions.");
    CT_ASSERT_ERR(ct_max_unpool2d(NULL, idx, k, NULL, NULL, NULL, 0) != NULL, CT_ERROR_NULL_ARGUMENT,
                  "max_unpool2d");
    CT_ASSERT_ERR(ct_max_unpool2d(v, idx, NULL, NULL, NULL, NULL, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "kernel_size");
    CT_ASSERT_ERR(ct_nn_max_unpool2d(NULL, NULL, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "kernel_size");
    CT_ASSERT_ERR(ct_nn_max_unpool2d(CT_INDEX(0, 2), NULL, NULL) != NULL, CT_ERROR_VALUE, "kernel_size");
    CT_ASSERT_ERR(ct_nn_max_pool2d_with_indices(NULL, NULL, NULL, NULL, false) != NULL, CT_ERROR_NULL_ARGUMENT,
                  "kernel_size");
    ct_module *un = ct_nn_max_unpool2d(k, NULL, NULL), *other = ct_nn_identity();
    ct_tensor *out[CT_MODULE_IO_CAP];
    int nout = 0;
    const ct_tensor *one[1] = {v};
    CT_ASSERT_ERR(ct_module_forward_multi(un, one, 1, out, CT_MODULE_IO_CAP, &nout) == CT_OK, CT_ERROR_VALUE,
                  "forward takes 2 inputs (input, indices), got 1");
    CT_ASSERT_ERR(ct_nn_max_unpool2d_forward(other, v, idx, NULL, 0) != NULL, CT_ERROR_VALUE,
                  "expected a MaxUnpool2d module");
    CT_ASSERT_ERR(ct_nn_max_unpool2d_forward(un, v, NULL, NULL, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "indices");
    ct_module_free(un);
    ct_module_free(other);
    ct_scope_end();
}

/* pad's gradient in every mode, and pad_backward's own (double backward), against
 * finite differences; pad_backward's errors. */
static void test_pad_backward(void **state) {
    (void)state;
    for (int i = 0; i < ncases; i++) {
        const gcase *c = &cases[i];
        if (strncmp(c->name, "f_pad_", 6))
            continue;
        ct_scope_begin();
        ct_tensor *x = ct_tensor_set_requires_grad(T(c, "x"), true);
        if (ct_gradcheck(func_fn, (void *)c->name, &x, 1, 1e-6, 1e-7, 1e-5) != CT_OK)
            fail_msg("%s: %s", c->name, ct_last_error());
        if (ct_gradgradcheck(func_fn, (void *)c->name, &x, 1, 1e-6, 1e-7, 1e-5) != CT_OK)
            fail_msg("%s (double backward): %s", c->name, ct_last_error());
        ct_scope_end();
    }
    ct_scope_begin();
    /* reflect: the edges are not repeated, so interior elements near them take two
     * gradients; replicate: the edge takes all the padding's */
    ct_tensor *g = ct_ones(CT_SHAPE(1, 1, 7), CT_F64, CT_CPU);
    ct_tensor *r = ct_pad_backward(g, CT_SHAPE(1, 1, 4), CT_INDEX(2, 1), 2, "reflect");
    CT_ASSERT_SHAPE(r, 1, 1, 4);
    double want_r[4] = {1, 2, 3, 1}, want_p[4] = {3, 1, 1, 2};
    for (int i = 0; i < 4; i++)
        assert_true(ct_test_at(r, i) == want_r[i]);
    ct_tensor *p = ct_pad_backward(g, CT_SHAPE(1, 1, 4), CT_INDEX(2, 1), 2, "replicate");
    for (int i = 0; i < 4; i++)
        assert_true(ct_test_at(p, i) == want_p[i]);
    /* constant: the fill positions send nothing back */
    ct_tensor *k = ct_pad_backward(g, CT_SHAPE(1, 1, 4), CT_INDEX(2, 1), 2, "constant");
    assert_true(ct_test_at(k, 0) == 1 && ct_test_at(k, 3) == 1);
    CT_ASSERT_ERR(ct_pad_backward(g, CT_SHAPE(1, 1, 5), CT_INDEX(2, 1), 2, "reflect") != NULL, CT_ERROR_VALUE,
                  "grad_output has shape [1, 1, 7], but padding an input of shape [1, 1, 5] gives [1, 1, 8]");
    CT_ASSERT_ERR(ct_pad_backward(g, CT_SHAPE(1, 1, 2), CT_INDEX(2, 3), 2, "reflect") != NULL, CT_ERROR_VALUE,
                  "Padding size should be less than the corresponding input dimension");
    CT_ASSERT_ERR(ct_pad_backward(ct_ones(CT_SHAPE(1, 1, 7), CT_I64, CT_CPU), CT_SHAPE(1, 1, 4), CT_INDEX(2, 1), 2,
                                  "reflect") != NULL,
                  CT_ERROR_TYPE, "not implemented for");
    CT_ASSERT_ERR(ct_pad_backward(g, CT_SHAPE(1, 1, 4), CT_INDEX(2, 1), 2, "wrap") != NULL, CT_ERROR_NOT_IMPLEMENTED,
                  "Unrecognised padding mode wrap");
    CT_ASSERT_ERR(ct_pad_backward(g, NULL, 3, CT_INDEX(2, 1), 2, "reflect") != NULL, CT_ERROR_VALUE,
                  "invalid input_size");
    CT_ASSERT_ERR(ct_pad_backward(NULL, CT_SHAPE(1, 1, 4), CT_INDEX(2, 1), 2, "reflect") != NULL,
                  CT_ERROR_NULL_ARGUMENT, "pad_backward");
    ct_scope_end();
}

/* embedding_bag as a function of weight (and per_sample_weights) for gradcheck. */
typedef struct bag_args {
    const ct_tensor *x, *off;
    const char *mode;
    bool last;
    int64_t pad;
} bag_args;

static ct_tensor *bag_fn(ct_tensor *const *in, int n, void *ud) {
    const bag_args *a = ud;
    return ct_embedding_bag(a->x, in[0], a->off, a->mode, n > 1 ? in[1] : NULL, a->last, a->pad);
}

static void test_embedding_bag(void **state) {
    (void)state;
    ct_scope_begin();
    static const struct {
        const char *name, *mode;
        bool last;
        int64_t pad;
    } bags[] = {{"bag_mean_offsets", "mean", false, CT_NO_PADDING_IDX}, {"bag_max", "max", false, CT_NO_PADDING_IDX},
                {"bag_sum_psw", "sum", true, CT_NO_PADDING_IDX},         {"bag_mean_pad", "mean", false, 2},
                {"bag_sum_psw_2d", "sum", false, 6}};
    for (size_t i = 0; i < sizeof bags / sizeof bags[0]; i++) {
        const gcase *c = NULL;
        for (int j = 0; j < ncases; j++)
            if (!strcmp(cases[j].name, bags[i].name))
                c = &cases[j];
        assert_non_null(c);
        bag_args a = {I(c, "x"), find(c, "off") ? I(c, "off") : NULL, bags[i].mode, bags[i].last, bags[i].pad};
        ct_tensor *in[2] = {ct_tensor_set_requires_grad(T(c, "p.weight"), true),
                            find(c, "psw") ? ct_tensor_set_requires_grad(T(c, "psw"), true) : NULL};
        if (ct_gradcheck(bag_fn, &a, in, in[1] ? 2 : 1, 1e-6, 1e-7, 1e-5) != CT_OK)
            fail_msg("%s: %s", c->name, ct_last_error());
    }
    /* errors, with PyTorch's messages */
    ct_tensor *w = ct_randn(CT_SHAPE(10, 3), CT_F32, CT_CPU);
    ct_tensor *x1 = ct_arange(ct_scalar_int(1), ct_scalar_int(4), ct_scalar_int(1), CT_I64, CT_CPU);
    ct_tensor *x2 = ct_reshape(ct_arange(ct_scalar_int(1), ct_scalar_int(5), ct_scalar_int(1), CT_I64, CT_CPU),
                               CT_SHAPE(2, 2));
    ct_tensor *off = ct_zeros(CT_SHAPE(2), CT_I64, CT_CPU);
    CT_ASSERT_ERR(ct_embedding_bag(x2, w, off, NULL, NULL, false, CT_NO_PADDING_IDX) != NULL, CT_ERROR_VALUE,
                  "if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed length "
                  "sequences.");
    CT_ASSERT_ERR(ct_embedding_bag(x1, w, NULL, NULL, NULL, false, CT_NO_PADDING_IDX) != NULL, CT_ERROR_VALUE,
                  "offsets has to be a 1D Tensor but got None");
    CT_ASSERT_ERR(ct_embedding_bag(x1, w, x2, NULL, NULL, false, CT_NO_PADDING_IDX) != NULL, CT_ERROR_VALUE,
                  "offsets has to be a 1D Tensor");
    CT_ASSERT_ERR(ct_embedding_bag(ct_unsqueeze(x2, 0), w, NULL, NULL, NULL, false, CT_NO_PADDING_IDX) != NULL,
                  CT_ERROR_VALUE, "input has to be 1D or 2D Tensor, but got Tensor of dimension 3");
    CT_ASSERT_ERR(ct_embedding_bag(x1, w, ct_ones(CT_SHAPE(2), CT_I64, CT_CPU), NULL, NULL, false,
                                   CT_NO_PADDING_IDX) != NULL,
                  CT_ERROR_VALUE,
                  "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. "
                  "However, got 1");
    ct_tensor *off4 = ct_mul_scalar(ct_arange(ct_scalar_int(0), ct_scalar_int(2), ct_scalar_int(1), CT_I64, CT_CPU),
                                    ct_scalar_int(4));
    CT_ASSERT_ERR(ct_embedding_bag(x1, w, off4, NULL, NULL, false, CT_NO_PADDING_IDX) != NULL, CT_ERROR_VALUE,
                  "offsets[-1] can not be greater than input's length 3 but got offsets[-1] of 4");
    ct_tensor *off_dec = ct_from_data((int64_t[]){0, 2, 1}, CT_SHAPE(3), CT_I64);
    CT_ASSERT_ERR(ct_embedding_bag(x1, w, off_dec, NULL, NULL, false, CT_NO_PADDING_IDX) != NULL, CT_ERROR_VALUE,
                  "offsets must be non-decreasing");
    /* no offsets with include_last_offset: the last one was read before the array (fuzz_nn) */
    CT_ASSERT_ERR(ct_embedding_bag(x1, w, ct_empty(CT_SHAPE(0), CT_I64, CT_CPU), NULL, NULL, true,
                                   CT_NO_PADDING_IDX) != NULL,
                  CT_ERROR_VALUE, "include_last_offset: number of offset should be at least 1");
    CT_ASSERT_ERR(ct_embedding_bag(x1, w, off, "sum", ct_ones(CT_SHAPE(2), CT_F32, CT_CPU), false,
                                   CT_NO_PADDING_IDX) != NULL,
                  CT_ERROR_VALUE,
                  "embedding_bag: If per_sample_weights (torch.Size([2])) is not None, then it must have the same "
                  "shape as the input (torch.Size([3]))");
    CT_ASSERT_ERR(ct_embedding_bag(x1, w, off, "mean", ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), false,
                                   CT_NO_PADDING_IDX) != NULL,
                  CT_ERROR_NOT_IMPLEMENTED,
                  "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for "
                  "mode='sum' (got mode='mean'). Please open a feature request on GitHub.");
    CT_ASSERT_ERR(ct_embedding_bag(ct_mul_scalar(x1, ct_scalar_int(10)), w, off, NULL, NULL, false,
                                   CT_NO_PADDING_IDX) != NULL,
                  CT_ERROR_INDEX, "index out of range in self");
    CT_ASSERT_ERR(ct_embedding_bag(x1, w, off, "foo", NULL, false, CT_NO_PADDING_IDX) != NULL, CT_ERROR_VALUE,
                  "mode has to be one of sum, mean or max");
    CT_ASSERT_ERR(ct_embedding_bag(ct_to_dtype(x1, CT_F32), w, off, NULL, NULL, false, CT_NO_PADDING_IDX) != NULL,
                  CT_ERROR_TYPE,
                  "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int");
    CT_ASSERT_ERR(ct_embedding_bag(x1, NULL, off, NULL, NULL, false, CT_NO_PADDING_IDX) != NULL,
                  CT_ERROR_NULL_ARGUMENT, "embedding_bag");
    CT_ASSERT_ERR(ct_nn_embedding_bag(10, 3, NULL, false, 10, CT_F32) != NULL, CT_ERROR_VALUE,
                  "padding_idx must be within num_embeddings");
    CT_ASSERT_ERR(ct_nn_embedding_bag(10, 3, "median", false, CT_NO_PADDING_IDX, CT_F32) != NULL, CT_ERROR_VALUE,
                  "mode has to be one of sum, mean or max");
    /* the module: N(0, 1) weight with the padding row zeroed, int32 input, 1 to 3 inputs */
    ct_module *m = ct_nn_embedding_bag(50, 4, "sum", false, 3, CT_F64);
    assert_true(ct_test_at(ct_module_param(m, "weight"), 3 * 4 + 2) == 0);
    assert_true(ct_test_at(ct_module_param(m, "weight"), 0) != 0);
    ct_tensor *y = ct_module_forward(m, ct_to_dtype(x2, CT_I32));
    CT_ASSERT_SHAPE(y, 2, 4);
    const ct_tensor *four[4] = {x1, off, x1, x1};
    ct_tensor *outs[1];
    int nout = 0;
    CT_ASSERT_ERR(ct_module_forward_multi(m, four, 4, outs, 1, &nout) == CT_OK, CT_ERROR_VALUE, "1 to 3 tensors");
    ct_module_free(m);
    ct_scope_end();
}

/* ------------------------------------------------------------------ initialisation */

static double max_abs(const ct_tensor *t) {
    double m = 0;
    for (int64_t i = 0; i < ct_tensor_numel(t); i++)
        m = fmax(m, fabs(ct_test_at(t, i)));
    return m;
}

static void test_init(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(4);
    /* kaiming_uniform_(a = sqrt(5)) bounds 1 / sqrt(fan_in), fan_in = size(1) * k */
    ct_module *c1 = ct_nn_conv1d(16, 32, 5, 1, 0, 1, 2, true, NULL, CT_F32);
    ct_tensor *w = ct_module_param(c1, "weight");
    CT_ASSERT_SHAPE(w, 32, 8, 5);
    double bound = 1 / sqrt(40.0);
    assert_true(max_abs(w) <= bound && max_abs(w) > 0.95 * bound);
    assert_true(max_abs(ct_module_param(c1, "bias")) <= bound);
    ct_module *c3 = ct_nn_conv3d(4, 8, (int64_t[]){3, 2, 2}, NULL, NULL, NULL, 1, true, NULL, CT_F32);
    CT_ASSERT_SHAPE(ct_module_param(c3, "weight"), 8, 4, 3, 2, 2);
    bound = 1 / sqrt(48.0);
    assert_true(max_abs(ct_module_param(c3, "weight")) <= bound && max_abs(ct_module_param(c3, "weight")) > 0.9 * bound);
    ct_module_free(c3);
    ct_module *t2 = ct_nn_conv_transpose2d(6, 8, CT_INDEX(3, 3), NULL, NULL, NULL, 2, true, NULL, CT_F64);
    w = ct_module_param(t2, "weight");
    CT_ASSERT_SHAPE(w, 6, 4, 3, 3);
    bound = 1 / sqrt(36.0);
    assert_true(max_abs(w) <= bound && max_abs(w) > 0.9 * bound);
    CT_ASSERT_SHAPE(ct_module_param(t2, "bias"), 8);
    ct_module *in = ct_nn_instance_norm2d(4, 1e-5, 0.1, true, true, CT_F32);
    assert_true(ct_test_at(ct_module_param(in, "weight"), 3) == 1 && ct_test_at(ct_module_param(in, "bias"), 0) == 0);
    assert_true(ct_test_at(ct_module_buffer(in, "running_var"), 2) == 1);
    assert_non_null(ct_module_buffer(in, "num_batches_tracked"));
    ct_module *gn = ct_nn_group_norm(2, 4, 1e-5, false, CT_F32);
    assert_null(ct_module_param(gn, "weight"));
    ct_module *pr = ct_nn_prelu(3, 0.25, CT_DTYPE_UNDEFINED);
    assert_true(ct_test_at(ct_module_param(pr, "weight"), 2) == 0.25);
    /* InstanceNorm never counts batches; BatchNorm1d does */
    ct_tensor *x = ct_randn(CT_SHAPE(2, 4, 3, 3), CT_F32, CT_CPU);
    assert_non_null(ct_module_forward(in, x));
    assert_true(ct_test_at(ct_module_buffer(in, "num_batches_tracked"), 0) == 0);
    ct_module *bn = ct_nn_batch_norm1d(4, 1e-5, 0.1, true, true, CT_F32);
    assert_non_null(ct_module_forward(bn, ct_randn(CT_SHAPE(5, 4), CT_F32, CT_CPU)));
    assert_true(ct_test_at(ct_module_buffer(bn, "num_batches_tracked"), 0) == 1);
    /* momentum=None: the running mean is the plain average of the batch means */
    ct_module *cum = ct_nn_batch_norm1d(2, 1e-5, -1, false, true, CT_F64);
    double want[2] = {0, 0};
    for (int step = 0; step < 3; step++) {
        ct_tensor *b = ct_randn(CT_SHAPE(4, 2), CT_F64, CT_CPU);
        for (int ch = 0; ch < 2; ch++)
            for (int i = 0; i < 4; i++)
                want[ch] += ct_test_at(b, 2 * i + ch) / 12;
        assert_non_null(ct_module_forward(cum, b));
    }
    for (int ch = 0; ch < 2; ch++)
        assert_true(fabs(ct_test_at(ct_module_buffer(cum, "running_mean"), ch) - want[ch]) < 1e-12);
    assert_true(ct_test_at(ct_module_buffer(cum, "num_batches_tracked"), 0) == 3);
    ct_module_free(cum);
    /* Identity passes its input through */
    ct_module *id = ct_nn_identity();
    ct_tensor *same = ct_module_forward(id, x);
    assert_true(ct_tensor_shares_storage(same, x));
    ct_module *mods[] = {c1, t2, in, gn, pr, bn, id};
    for (size_t i = 0; i < sizeof mods / sizeof mods[0]; i++)
        ct_module_free(mods[i]);
    ct_scope_end();
}

/* ------------------------------------------------------------------ errors */

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x4 = ct_randn(CT_SHAPE(2, 5, 3, 3), CT_F32, CT_CPU);
    ct_tensor *x2 = ct_randn(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_pixel_shuffle(x2, 2) != NULL, CT_ERROR_VALUE,
                  "pixel_shuffle expects input to have at least 3 dimensions, but got input with 2 dimension(s)");
    CT_ASSERT_ERR(ct_pixel_shuffle(x4, 2) != NULL, CT_ERROR_VALUE,
                  "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                  "upscale_factor, but input.size(-3)=5 is not divisible by 4");
    CT_ASSERT_ERR(ct_pixel_shuffle(x4, 0) != NULL, CT_ERROR_VALUE,
                  "pixel_shuffle expects a positive upscale_factor, but got 0");
    CT_ASSERT_ERR(ct_pixel_unshuffle(x4, 2) != NULL, CT_ERROR_VALUE,
                  "pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)=3 is not "
                  "divisible by 2");
    CT_ASSERT_ERR(ct_pixel_unshuffle(ct_randn(CT_SHAPE(2, 4, 4, 3), CT_F32, CT_CPU), 2) != NULL, CT_ERROR_VALUE,
                  "pixel_unshuffle expects width to be divisible by downscale_factor, but input.size(-1)=3 is not "
                  "divisible by 2");
    CT_ASSERT_ERR(ct_pixel_unshuffle(x4, 0) != NULL, CT_ERROR_VALUE,
                  "pixel_unshuffle expects a positive downscale_factor, but got 0");
    CT_ASSERT_ERR(ct_pixel_shuffle(NULL, 2) != NULL, CT_ERROR_NULL_ARGUMENT, "pixel_shuffle");

    ct_module *bn1 = ct_nn_batch_norm1d(5, 1e-5, 0.1, true, true, CT_F32);
    CT_ASSERT_ERR(ct_module_forward(bn1, x4) != NULL, CT_ERROR_VALUE, "expected 2D or 3D input (got 4D input)");
    ct_module *bn3 = ct_nn_batch_norm3d(5, 1e-5, 0.1, true, true, CT_F32);
    CT_ASSERT_ERR(ct_module_forward(bn3, x4) != NULL, CT_ERROR_VALUE, "expected 5D input (got 4D input)");
    ct_module *in1 = ct_nn_instance_norm1d(5, 1e-5, 0.1, false, false, CT_F32);
    CT_ASSERT_ERR(ct_module_forward(in1, x4) != NULL, CT_ERROR_VALUE, "expected 2D or 3D input (got 4D input)");
    ct_module *in2 = ct_nn_instance_norm2d(5, 1e-5, 0.1, false, false, CT_F32);
    CT_ASSERT_ERR(ct_module_forward(in2, x2) != NULL, CT_ERROR_VALUE, "expected 3D or 4D input (got 2D input)");
    ct_module *in2a = ct_nn_instance_norm2d(4, 1e-5, 0.1, true, false, CT_F32);
    CT_ASSERT_ERR(ct_module_forward(in2a, x4) != NULL, CT_ERROR_VALUE,
                  "expected input's size at dim=1 to match num_features (4), but got: 5.");
    CT_ASSERT_ERR(ct_nn_group_norm(3, 4, 1e-5, true, CT_F32) != NULL, CT_ERROR_VALUE,
                  "num_channels (4) must be divisible by num_groups (3)");
    CT_ASSERT_ERR(ct_nn_batch_norm3d(0, 1e-5, 0.1, true, true, CT_F32) != NULL, CT_ERROR_VALUE, "num_features");
    CT_ASSERT_ERR(ct_nn_instance_norm1d(3, 1e-5, 0.1, true, true, CT_I64) != NULL, CT_ERROR_TYPE, "floating");
    CT_ASSERT_ERR(ct_instance_norm(ct_randn(CT_SHAPE(2, 3, 1), CT_F32, CT_CPU), NULL, NULL, NULL, NULL, true, 0.1,
                                   1e-5) != NULL,
                  CT_ERROR_VALUE, "Expected more than 1 spatial element when training, got input size [2, 3, 1]");

    ct_module *unf = ct_nn_unflatten(1, CT_SHAPE(2, 4));
    CT_ASSERT_ERR(ct_module_forward(unf, ct_randn(CT_SHAPE(2, 6), CT_F32, CT_CPU)) != NULL, CT_ERROR_VALUE,
                  "unflatten: Provided sizes [2, 4] don't multiply up to the size of dim 1 (6) in the input tensor");
    CT_ASSERT_ERR(ct_nn_unflatten(1, NULL, 0) != NULL, CT_ERROR_VALUE, "unflattened_size");

    CT_ASSERT_ERR(ct_nn_conv1d(4, 6, 3, 1, 0, 1, 1, true, "foo", CT_F32) != NULL, CT_ERROR_VALUE,
                  "padding_mode must be one of {'reflect', 'zeros', 'replicate', 'circular'}, but got "
                  "padding_mode='foo'");
    CT_ASSERT_ERR(ct_nn_conv1d(4, 6, 3, 1, 0, 1, 4, true, NULL, CT_F32) != NULL, CT_ERROR_VALUE,
                  "out_channels must be divisible by groups");
    CT_ASSERT_ERR(ct_nn_conv1d(4, 6, 0, 1, 0, 1, 1, true, NULL, CT_F32) != NULL, CT_ERROR_VALUE, "positive");
    CT_ASSERT_ERR(ct_nn_conv_transpose2d(4, 6, NULL, NULL, NULL, NULL, 1, true, NULL, CT_F32) != NULL,
                  CT_ERROR_NULL_ARGUMENT, "kernel_size is NULL");
    ct_module *c1 = ct_nn_conv1d(3, 2, 3, 1, 0, 1, 1, true, NULL, CT_F32);
    CT_ASSERT_ERR(ct_module_forward(c1, x4) != NULL, CT_ERROR_VALUE,
                  "Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: [2, 5, 3, 3]");
    CT_ASSERT_ERR(ct_conv_transpose1d(x4, ct_randn(CT_SHAPE(5, 2, 3), CT_F32, CT_CPU), NULL, 1, 0, 0, 1, 1) != NULL,
                  CT_ERROR_VALUE,
                  "Expected 2D (unbatched) or 3D (batched) input to conv_transpose1d, but got input of size: "
                  "[2, 5, 3, 3]");
    CT_ASSERT_ERR(ct_max_pool1d(x4, 3, 0, 0, 1, false) != NULL, CT_ERROR_VALUE,
                  "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, but "
                  "got:[2, 5, 3, 3]");
    CT_ASSERT_ERR(ct_avg_pool1d(x4, 3, 0, 0, false, true) != NULL, CT_ERROR_VALUE,
                  "Expected 2 to 3 dimensions, but got 4-dimensional tensor for argument #1 'self' (while checking "
                  "arguments for avg_pool1d)");
    CT_ASSERT_ERR(ct_adaptive_avg_pool1d(x4, 3) != NULL, CT_ERROR_VALUE,
                  "Expected 2 to 3 dimensions, but got 4-dimensional tensor for argument #1 'self' (while checking "
                  "arguments for adaptive_avg_pool1d)");
    CT_ASSERT_ERR(ct_nn_max_pool1d(0, 0, 0, 1, false) != NULL, CT_ERROR_VALUE, "kernel_size");
    CT_ASSERT_ERR(ct_nn_avg_pool2d(NULL, NULL, NULL, false, true, 0) != NULL, CT_ERROR_NULL_ARGUMENT,
                  "kernel_size is NULL");
    CT_ASSERT_ERR(ct_nn_adaptive_avg_pool2d(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "output_size is NULL");

    ct_module *pr = ct_nn_prelu(3, 0.25, CT_F32);
    CT_ASSERT_ERR(ct_module_forward(pr, ct_randn(CT_SHAPE(2, 4), CT_F32, CT_CPU)) != NULL, CT_ERROR_VALUE,
                  "Mismatch of parameter numbers and input channel size. Found parameter numbers = 3 and channel "
                  "size = 4.");
    CT_ASSERT_ERR(ct_nn_prelu(0, 0.25, CT_F32) != NULL, CT_ERROR_VALUE, "num_parameters");
    ct_module *glu = ct_nn_glu(-1);
    CT_ASSERT_ERR(ct_module_forward(glu, x2) != NULL, CT_ERROR_VALUE, "Halving dimension must be even");
    ct_module *sm = ct_nn_softmax(5);
    CT_ASSERT_ERR(ct_module_forward(sm, x2) != NULL, CT_ERROR_INDEX, "Dimension out of range");
    CT_ASSERT_ERR(ct_nn_activation("Swish") != NULL, CT_ERROR_VALUE, "Swish");
    CT_ASSERT_ERR(ct_nn_activation(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "NULL");
    CT_ASSERT_ERR(ct_nn_hardtanh(1.0, 1.0) != NULL, CT_ERROR_VALUE, "max_val must be greater than min_val");

    /* interpolate and Upsample: PyTorch's messages */
    ct_tensor *x3 = ct_randn(CT_SHAPE(2, 3, 5), CT_F32, CT_CPU);
    x4 = ct_randn(CT_SHAPE(2, 3, 4, 5), CT_F32, CT_CPU);
    const double two[1] = {2.0};
    CT_ASSERT_ERR(ct_interpolate(x4, CT_INDEX(3, 4), two, 2, NULL, false) != NULL, CT_ERROR_VALUE,
                  "only one of size or scale_factor should be defined");
    CT_ASSERT_ERR(ct_interpolate(x4, NULL, NULL, 2, NULL, false) != NULL, CT_ERROR_VALUE,
                  "either size or scale_factor should be defined");
    CT_ASSERT_ERR(ct_interpolate(x3, NULL, two, 1, "bilinear", false) != NULL, CT_ERROR_NOT_IMPLEMENTED,
                  "Got 3D input, but bilinear mode needs 4D input");
    CT_ASSERT_ERR(ct_interpolate(x4, NULL, two, 1, "linear", false) != NULL, CT_ERROR_NOT_IMPLEMENTED,
                  "Got 4D input, but linear mode needs 3D input");
    /* a scale whose output size is past int64, or NaN (fuzz_nn: a cast of 4.6e19) */
    CT_ASSERT_ERR(ct_interpolate(x4, NULL, (double[]){1e300, 2}, 2, NULL, false) != NULL, CT_ERROR_VALUE,
                  "out of range");
    CT_ASSERT_ERR(ct_interpolate(x4, NULL, (double[]){NAN}, 1, NULL, false) != NULL, CT_ERROR_VALUE, "out of range");
    CT_ASSERT_ERR(ct_interpolate(x3, NULL, two, 1, "bicubic", false) != NULL, CT_ERROR_NOT_IMPLEMENTED,
                  "Input Error: Only 3D, 4D and 5D input Tensors supported (got 3D) for the modes: nearest | linear | "
                  "bilinear | bicubic | trilinear | lanczos | area | nearest-exact (got bicubic)");
    CT_ASSERT_ERR(ct_interpolate(x2, NULL, two, 1, "nearest", false) != NULL, CT_ERROR_NOT_IMPLEMENTED,
                  "(got 2D)");
    CT_ASSERT_ERR(ct_interpolate(x4, NULL, two, 1, "foo", false) != NULL, CT_ERROR_NOT_IMPLEMENTED, "(got foo)");
    CT_ASSERT_ERR(ct_interpolate(x4, NULL, two, 1, "nearest", true) != NULL, CT_ERROR_VALUE,
                  "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | "
                  "trilinear");
    CT_ASSERT_ERR(ct_interpolate(x4, CT_INDEX(3, 4, 5), NULL, 3, NULL, false) != NULL, CT_ERROR_VALUE,
                  "Input and output must have the same number of spatial dimensions, but got input with spatial "
                  "dimensions of [4, 5] and output size of (3, 4, 5). Please provide input tensor in (N, C, d1, d2, "
                  "...,dK) format and output size in (o1, o2, ...,oK) format.");
    CT_ASSERT_ERR(ct_interpolate(x4, NULL, (double[]){2.0, 3.0, 4.0}, 3, NULL, false) != NULL, CT_ERROR_VALUE,
                  "Input and scale_factor must have the same number of spatial dimensions, but got input with "
                  "spatial dimensions of [4, 5] and scale_factor of shape (2.0, 3.0, 4.0). Please provide input "
                  "tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.");
    CT_ASSERT_ERR(ct_interpolate(x4, NULL, (double[]){0.1}, 1, NULL, false) != NULL, CT_ERROR_VALUE,
                  "Input and output sizes should be greater than 0, but got input (H: 4, W: 5) output (H: 0, W: 0)");
    CT_ASSERT_ERR(ct_interpolate(ct_randn(CT_SHAPE(2, 3, 0, 4), CT_F32, CT_CPU), CT_INDEX(2, 4), NULL, 2, NULL,
                                 false) != NULL,
                  CT_ERROR_VALUE,
                  "Input and output sizes should be greater than 0, but got input (H: 0, W: 4) output (H: 2, W: 4)");
    CT_ASSERT_ERR(ct_interpolate(x3, CT_INDEX(0), NULL, 1, NULL, false) != NULL, CT_ERROR_VALUE,
                  "Input and output sizes should be greater than 0, but got input (W: 5) output (W: 0)");
    CT_ASSERT_ERR(ct_interpolate(ct_ones(CT_SHAPE(2, 3, 4, 5), CT_I64, CT_CPU), CT_INDEX(2, 4), NULL, 2, "bilinear",
                                 false) != NULL,
                  CT_ERROR_TYPE, "not implemented for");
    CT_ASSERT_ERR(ct_interpolate(NULL, CT_INDEX(2, 4), NULL, 2, NULL, false) != NULL, CT_ERROR_NULL_ARGUMENT,
                  "interpolate");
    CT_ASSERT_ERR(ct_nn_upsample(NULL, NULL, 1, NULL, false) != NULL, CT_ERROR_VALUE,
                  "either size or scale_factor should be defined");
    CT_ASSERT_ERR(ct_nn_upsample(CT_INDEX(2), two, 1, NULL, false) != NULL, CT_ERROR_VALUE,
                  "only one of size or scale_factor should be defined");
    CT_ASSERT_ERR(ct_nn_upsample(NULL, two, 1, "area", false) != NULL, CT_ERROR_NOT_IMPLEMENTED, "area");
    CT_ASSERT_ERR(ct_nn_upsample(NULL, (double[]){2, 2, 2, 2}, 4, NULL, false) != NULL, CT_ERROR_VALUE,
                  "1 to 3 values");
    /* 5-D input: trilinear and the nearest modes only (PyTorch's messages) */
    ct_tensor *x5i = ct_randn(CT_SHAPE(1, 1, 2, 3, 4), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_interpolate(x4, NULL, two, 1, "trilinear", false) != NULL, CT_ERROR_NOT_IMPLEMENTED,
                  "Got 4D input, but trilinear mode needs 5D input");
    CT_ASSERT_ERR(ct_interpolate(x5i, NULL, two, 1, "bilinear", false) != NULL, CT_ERROR_NOT_IMPLEMENTED,
                  "Got 5D input, but bilinear mode needs 4D input");
    CT_ASSERT_ERR(ct_interpolate(x5i, NULL, two, 1, "linear", false) != NULL, CT_ERROR_NOT_IMPLEMENTED,
                  "Got 5D input, but linear mode needs 3D input");
    CT_ASSERT_ERR(ct_interpolate(x5i, NULL, two, 1, "bicubic", false) != NULL, CT_ERROR_NOT_IMPLEMENTED,
                  "Input Error: Only 3D, 4D and 5D input Tensors supported (got 5D) for the modes: nearest | linear | "
                  "bilinear | bicubic | trilinear | lanczos | area | nearest-exact (got bicubic)");
    CT_ASSERT_ERR(ct_interpolate(x5i, NULL, (double[]){0.4}, 1, "trilinear", false) != NULL, CT_ERROR_VALUE,
                  "Input and output sizes should be greater than 0, but got input (D: 2, H: 3, W: 4) output (D: 0, H: "
                  "1, W: 1)");
    CT_ASSERT_ERR(ct_interpolate(x5i, CT_INDEX(3, 4), NULL, 2, "trilinear", false) != NULL, CT_ERROR_VALUE,
                  "Input and output must have the same number of spatial dimensions");
    CT_ASSERT_ERR(ct_upsample(x4, CT_INDEX(8), 1, "nearest", false, NULL) != NULL, CT_ERROR_VALUE,
                  "output_size must have 2 sizes for a 4D input, got 1");
    CT_ASSERT_ERR(ct_upsample(x4, CT_INDEX(8, 8), 2, "trilinear", false, NULL) != NULL, CT_ERROR_NOT_IMPLEMENTED,
                  "unknown upsample mode trilinear");
    CT_ASSERT_ERR(ct_upsample_backward(x4, CT_SHAPE(2, 4, 2, 2), "nearest", false, NULL) != NULL, CT_ERROR_VALUE,
                  "grad_output of shape [2, 3, 4, 5] does not fit an input of shape [2, 4, 2, 2]");
    CT_ASSERT_ERR(ct_upsample_backward(x4, CT_SHAPE(2, 3), "nearest", false, NULL) != NULL, CT_ERROR_VALUE,
                  "input_size must have 3 or 4 sizes");
    /* conv3d */
    ct_tensor *w3 = ct_randn(CT_SHAPE(4, 3, 2, 2, 2), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_conv3d(ct_randn(CT_SHAPE(2, 3, 4, 5), CT_F32, CT_CPU), w3, NULL, NULL, NULL, NULL, 1) != NULL,
                  CT_ERROR_VALUE,
                  "Given groups=1, weight of size [4, 3, 2, 2, 2], expected input[1, 2, 3, 4, 5] to have 3 channels, "
                  "but got 2 channels instead");
    CT_ASSERT_ERR(ct_conv3d(ct_randn(CT_SHAPE(2, 3, 1, 5, 5), CT_F32, CT_CPU), w3, NULL, NULL, NULL, NULL, 1) != NULL,
                  CT_ERROR_VALUE,
                  "Calculated padded input size per channel: (1 x 5 x 5). Kernel size: (2 x 2 x 2). Kernel size can't "
                  "be greater than actual input size");
    CT_ASSERT_ERR(ct_conv3d(ct_randn(CT_SHAPE(3, 4, 5), CT_F32, CT_CPU), w3, NULL, NULL, NULL, NULL, 1) != NULL,
                  CT_ERROR_VALUE,
                  "Expected 4D (unbatched) or 5D (batched) input to conv3d, but got input of size: [3, 4, 5]");
    CT_ASSERT_ERR(ct_conv3d(x4, ct_randn(CT_SHAPE(4, 3, 2, 2), CT_F32, CT_CPU), NULL, NULL, NULL, NULL, 1) != NULL,
                  CT_ERROR_VALUE, "weight should have 5 dimensions, got 4");
    CT_ASSERT_ERR(ct_conv3d(ct_randn(CT_SHAPE(1, 3, 4, 4, 4), CT_F32, CT_CPU), w3, NULL, (int64_t[]){0, 1, 1}, NULL,
                            NULL, 1) != NULL,
                  CT_ERROR_VALUE, "stride and dilation must be positive");
    CT_ASSERT_ERR(ct_nn_conv3d(4, 6, NULL, NULL, NULL, NULL, 1, true, NULL, CT_F32) != NULL, CT_ERROR_NULL_ARGUMENT,
                  "kernel_size is NULL");
    /* conv_transpose3d */
    ct_tensor *wt3 = ct_randn(CT_SHAPE(3, 2, 2, 2, 2), CT_F32, CT_CPU), *xt3 = ct_randn(CT_SHAPE(1, 3, 2, 2, 2), CT_F32,
                                                                                      CT_CPU);
    CT_ASSERT_ERR(ct_conv_transpose3d(ct_randn(CT_SHAPE(3, 4, 5), CT_F32, CT_CPU), wt3, NULL, NULL, NULL, NULL, 1,
                                      NULL) != NULL,
                  CT_ERROR_VALUE,
                  "Expected 4D (unbatched) or 5D (batched) input to conv_transpose3d, but got input of size: [3, 4, 5]");
    CT_ASSERT_ERR(ct_conv_transpose3d(xt3, ct_randn(CT_SHAPE(3, 2, 2, 2), CT_F32, CT_CPU), NULL, NULL, NULL, NULL, 1,
                                      NULL) != NULL,
                  CT_ERROR_VALUE, "weight should have 5 dimensions, got 4");
    CT_ASSERT_ERR(ct_conv_transpose3d(ct_randn(CT_SHAPE(1, 2, 2, 2, 2), CT_F32, CT_CPU), wt3, NULL, NULL, NULL, NULL,
                                      1, NULL) != NULL,
                  CT_ERROR_VALUE,
                  "Given transposed=1, weight of size [3, 2, 2, 2, 2], expected input[1, 2, 2, 2, 2] to have 3 "
                  "channels, but got 2 channels instead");
    CT_ASSERT_ERR(ct_conv_transpose3d(xt3, wt3, NULL, NULL, NULL, (int64_t[]){1, 0, 0}, 1, NULL) != NULL,
                  CT_ERROR_VALUE, "output padding must be smaller than either stride or dilation");
    CT_ASSERT_ERR(ct_conv_transpose3d(xt3, wt3, NULL, (int64_t[]){0, 1, 1}, NULL, NULL, 1, NULL) != NULL,
                  CT_ERROR_VALUE, "stride and dilation must be positive");
    CT_ASSERT_ERR(ct_conv_transpose3d(xt3, wt3, NULL, NULL, (int64_t[]){2, 0, 0}, NULL, 1, NULL) != NULL,
                  CT_ERROR_VALUE, "is not positive");
    CT_ASSERT_ERR(ct_conv_transpose3d(NULL, wt3, NULL, NULL, NULL, NULL, 1, NULL) != NULL, CT_ERROR_NULL_ARGUMENT,
                  "conv_transpose3d");
    CT_ASSERT_ERR(ct_nn_conv_transpose3d(2, 4, NULL, NULL, NULL, NULL, 1, true, NULL, CT_F32) != NULL,
                  CT_ERROR_NULL_ARGUMENT, "kernel_size");
    /* max_pool3d */
    CT_ASSERT_ERR(ct_max_pool3d(x2, (int64_t[]){2, 2, 2}, NULL, NULL, NULL, false) != NULL, CT_ERROR_VALUE,
                  "non-empty 4D or 5D (batch mode) tensor expected for input");
    CT_ASSERT_ERR(ct_max_pool3d(ct_randn(CT_SHAPE(1, 2, 3, 4, 4), CT_F32, CT_CPU), (int64_t[]){2, 2, 2}, NULL,
                                (int64_t[]){2, 2, 2}, NULL, false) != NULL,
                  CT_ERROR_VALUE, "pad should be at most half of effective kernel size, but got pad=2, kernel_size=2 "
                                  "and dilation=1");
    CT_ASSERT_ERR(ct_max_pool3d(ct_randn(CT_SHAPE(1, 2, 1, 4, 4), CT_F32, CT_CPU), (int64_t[]){2, 2, 2}, NULL, NULL,
                                NULL, false) != NULL,
                  CT_ERROR_VALUE,
                  "Given input size: (2x1x4x4). Calculated output size: (2x0x2x2). Output size is too small");
    CT_ASSERT_ERR(ct_max_pool3d(x4, NULL, NULL, NULL, NULL, false) != NULL, CT_ERROR_NULL_ARGUMENT, "kernel_size");
    CT_ASSERT_ERR(ct_nn_max_pool3d(NULL, NULL, NULL, NULL, false) != NULL, CT_ERROR_NULL_ARGUMENT, "kernel_size");
    /* avg_pool3d (PyTorch's messages) */
    ct_tensor *x5 = ct_randn(CT_SHAPE(1, 2, 4, 5, 6), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_avg_pool3d(x2, (int64_t[]){2, 2, 2}, NULL, NULL, false, true, 0) != NULL, CT_ERROR_VALUE,
                  "non-empty 4D or 5D (batch mode) tensor expected for input");
    CT_ASSERT_ERR(ct_avg_pool3d(ct_randn(CT_SHAPE(2, 0, 3, 4, 4), CT_F32, CT_CPU), (int64_t[]){2, 2, 2}, NULL, NULL,
                                false, true, 0) != NULL,
                  CT_ERROR_VALUE,
                  "avg_pool3d(): Expected input to have non-zero size for non-batch dimensions, but input has sizes "
                  "[2, 0, 3, 4, 4] with dimension 1 being empty");
    CT_ASSERT_ERR(ct_avg_pool3d(x5, (int64_t[]){2, 2, 2}, NULL, (int64_t[]){2, 2, 2}, false, true, 0) != NULL,
                  CT_ERROR_VALUE, "pad should be at most half of effective kernel size, but got pad=2, kernel_size=2 "
                                  "and dilation=1");
    CT_ASSERT_ERR(ct_avg_pool3d(x5, (int64_t[]){5, 1, 1}, NULL, NULL, false, true, 0) != NULL, CT_ERROR_VALUE,
                  "input image (T: 4 H: 5 W: 6) smaller than kernel size (kT: 5 kH: 1 kW: 1)");
    CT_ASSERT_ERR(ct_avg_pool3d(x5, (int64_t[]){0, 2, 2}, NULL, NULL, false, true, 0) != NULL, CT_ERROR_VALUE,
                  "stride should not be zero");
    CT_ASSERT_ERR(ct_avg_pool3d(x5, NULL, NULL, NULL, false, true, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "kernel_size");
    CT_ASSERT_ERR(ct_avg_pool3d(NULL, (int64_t[]){2, 2, 2}, NULL, NULL, false, true, 0) != NULL,
                  CT_ERROR_NULL_ARGUMENT, "avg_pool3d");
    CT_ASSERT_ERR(ct_nn_avg_pool3d(NULL, NULL, NULL, false, true, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "kernel_size");
    CT_ASSERT_ERR(ct_nn_avg_pool3d((int64_t[]){2, 0, 2}, NULL, NULL, false, true, 0) != NULL, CT_ERROR_VALUE,
                  "kernel_size must be greater than zero");
    /* adaptive max pooling */
    CT_ASSERT_ERR(ct_adaptive_max_pool2d(x2, CT_INDEX(2, 2)) != NULL, CT_ERROR_VALUE,
                  "adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: [2, 3]");
    CT_ASSERT_ERR(ct_adaptive_max_pool1d(x4, 2) != NULL, CT_ERROR_VALUE,
                  "Expected 2 to 3 dimensions, but got 4-dimensional tensor for argument #1 'self' (while checking "
                  "arguments for adaptive_max_pool1d)");
    CT_ASSERT_ERR(ct_adaptive_max_pool2d(ct_randn(CT_SHAPE(2, 3, 0, 4), CT_F32, CT_CPU), CT_INDEX(2, 2)) != NULL,
                  CT_ERROR_VALUE,
                  "adaptive_max_pool2d(): Expected input to have non-zero size for non-batch dimensions, but input has "
                  "sizes [2, 3, 0, 4] with dimension 2 being empty");
    CT_ASSERT_ERR(ct_adaptive_max_pool2d(ct_ones(CT_SHAPE(2, 3, 4, 4), CT_I64, CT_CPU), CT_INDEX(2, 2)) != NULL,
                  CT_ERROR_TYPE, "\"adaptive_max_pool2d\" not implemented for");
    CT_ASSERT_ERR(ct_adaptive_max_pool2d(x4, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "output_size is NULL");
    CT_ASSERT_SHAPE(ct_adaptive_max_pool2d(x4, CT_INDEX(0, 2)), 2, 3, 0, 2);
    CT_ASSERT_ERR(ct_nn_adaptive_max_pool2d(CT_INDEX(-2, 2)) != NULL, CT_ERROR_VALUE, "output_size");
    ct_module *mods[] = {bn1, bn3, in1, in2, in2a, unf, c1, pr, glu, sm};
    for (size_t i = 0; i < sizeof mods / sizeof mods[0]; i++)
        ct_module_free(mods[i]);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_goldens_f64), cmocka_unit_test(test_goldens_f32), cmocka_unit_test(test_reprs),
        cmocka_unit_test(test_gradcheck),   cmocka_unit_test(test_pad_backward),
        cmocka_unit_test(test_max_unpool2d), cmocka_unit_test(test_embedding_bag),
        cmocka_unit_test(test_init),        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_cuda),
    };
    return cmocka_run_group_tests(tests, load_golden, free_golden);
}
