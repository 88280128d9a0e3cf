/* The attention kernels on CUDA (Note [GPU attention] in src/cuda/nn_cuda.c) against
 * the CPU's fused kernel: scaled_dot_product_attention and its backward with causal,
 * boolean and float masks, custom scales and batch dims, float16 to float64; the fused
 * rms_norm and layer_norm with their backward ops (directly and through autograd; the
 * one-pass layer_norm kernels at GPT's width, odd widths and long rows, bit-identical
 * from run to run), gelu_backward and threshold_backward, and their argument errors;
 * the fused cross_entropy against the CPU (GPT-2's vocabulary, every reduction, an
 * ignored class, out-of-range targets); embedding's backward equal to the CPU's and
 * bit-identical from run to run. Skipped (exit 77) without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "cuda_testutil.h"
#include "ctorch/nn.h"

#define CUDA0 CT_CUDA(0)

static ct_tensor *g(const ct_tensor *t) { return t ? ct_test_to_device_as(t, CUDA0) : NULL; }

static void test_attention(void **state) {
    (void)state;
    ct_dtype dts[] = {CT_F16, CT_BF16, CT_F32, CT_F64};
    for (int d = 0; d < 4; d++) {
        ct_scope_begin();
        ct_tensor *q = ct_test_values(CT_SHAPE(2, 3, 17, 8), dts[d], -1, 1, 1);
        ct_tensor *k = ct_test_values(CT_SHAPE(2, 3, 23, 8), dts[d], -1, 1, 2);
        ct_tensor *v = ct_test_values(CT_SHAPE(2, 3, 23, 5), dts[d], -1, 1, 3);
        ct_tensor *kc = ct_test_values(CT_SHAPE(2, 3, 17, 8), dts[d], -1, 1, 4);
        ct_tensor *vc = ct_test_values(CT_SHAPE(2, 3, 17, 5), dts[d], -1, 1, 5);
        ct_tensor *bmask = ct_gt_scalar(ct_test_values(CT_SHAPE(17, 23), CT_F32, -1, 1, 6), ct_scalar_float(-0.8));
        ct_tensor *fmask = ct_test_values(CT_SHAPE(3, 1, 23), dts[d], -2, 0, 7);
        double scale = 0.3;
        struct {
            const char *name;
            const ct_tensor *k, *v, *mask;
            bool causal;
            const double *scale;
        } cases[] = {
            {"plain", k, v, NULL, false, NULL},       {"causal", kc, vc, NULL, true, NULL},
            {"bool mask", k, v, bmask, false, &scale}, {"float mask", k, v, fmask, false, NULL},
        };
        double tol = dts[d] == CT_F64 ? 100 : 8;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            ct_tensor *y = ct_scaled_dot_product_attention(q, cases[c].k, cases[c].v, cases[c].mask, 0, cases[c].causal,
                                                           cases[c].scale);
            ct_tensor *gy = ct_scaled_dot_product_attention(g(q), g(cases[c].k), g(cases[c].v), g(cases[c].mask), 0,
                                                            cases[c].causal, cases[c].scale);
            CT_AGREE(cases[c].name, y, gy, tol);
            ct_tensor *go = ct_test_values(ct_tensor_shape(y), 4, dts[d], -1, 1, 8);
            ct_tensor *dq, *dk, *dv, *gdq, *gdk, *gdv;
            assert_int_equal(ct_scaled_dot_product_attention_backward(go, q, cases[c].k, cases[c].v, cases[c].mask,
                                                                      cases[c].causal, cases[c].scale, &dq, &dk, &dv),
                             CT_OK);
            assert_int_equal(ct_scaled_dot_product_attention_backward(g(go), g(q), g(cases[c].k), g(cases[c].v),
                                                                      g(cases[c].mask), cases[c].causal, cases[c].scale,
                                                                      &gdq, &gdk, &gdv),
                             CT_OK);
            CT_AGREE("attention grad q", dq, gdq, tol);
            CT_AGREE("attention grad k", dk, gdk, tol);
            CT_AGREE("attention grad v", dv, gdv, tol);
        }
        ct_scope_end();
    }
    ct_scope_begin();
    ct_tensor *q = g(ct_ones(CT_SHAPE(2, 4, 8), CT_F32, CT_CPU));
    CT_ASSERT_ERR(ct_scaled_dot_product_attention(q, q, ct_ones(CT_SHAPE(2, 4, 8), CT_F32, CT_CPU), NULL, 0, false,
                                                  NULL) != NULL,
                  CT_ERROR_DEVICE, "same device");
    CT_ASSERT_ERR(ct_scaled_dot_product_attention(q, q, g(ct_ones(CT_SHAPE(2, 5, 8), CT_F32, CT_CPU)), NULL, 0, false,
                                                  NULL) != NULL,
                  CT_ERROR_VALUE, "same sequence length");
    ct_scope_end();
}

/* Autograd through attention on CUDA equals the CPU's gradients. */
static void test_attention_autograd(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *q = ct_test_values(CT_SHAPE(2, 9, 4), CT_F64, -1, 1, 9);
    ct_tensor *gq = g(q);
    ct_tensor_set_requires_grad(q, true);
    ct_tensor_set_requires_grad(gq, true);
    ct_tensor *y = ct_sum(ct_scaled_dot_product_attention(q, q, q, NULL, 0, true, NULL), NULL, 0, false,
                          CT_DTYPE_UNDEFINED);
    ct_tensor *gy = ct_sum(ct_scaled_dot_product_attention(gq, gq, gq, NULL, 0, true, NULL), NULL, 0, false,
                           CT_DTYPE_UNDEFINED);
    CT_ASSERT_OK(y);
    CT_ASSERT_OK(gy);
    assert_int_equal(ct_backward(y, NULL, false, false), CT_OK);
    assert_int_equal(ct_backward(gy, NULL, false, false), CT_OK);
    CT_AGREE("attention autograd", ct_tensor_grad(q), ct_tensor_grad(gq), 100);
    ct_scope_end();
}

static void test_layer_norm(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_test_values(CT_SHAPE(4, 7, 64), CT_F32, -3, 3, 10);
    ct_tensor *w = ct_test_values(CT_SHAPE(64), CT_F32, 0.5, 1.5, 11), *b = ct_test_values(CT_SHAPE(64), CT_F32, -1, 1, 12);
    int64_t ns[1] = {64};
    CT_AGREE("layer_norm", ct_layer_norm(x, ns, 1, w, b, 1e-5), ct_layer_norm(g(x), ns, 1, g(w), g(b), 1e-5), 8);
    ct_scope_end();
}

typedef struct {
    const char *name;
    int64_t shape[3];
    int nd, k; /* the last k dims are normalised */
    bool weight, bias, transposed;
    double eps;
} norm_case;

static const norm_case norm_cases[] = {
    {"rows of 64", {4, 7, 64}, 3, 1, true, true, false, 1e-5},
    {"two dims, no affine", {3, 5, 6}, 3, 2, false, false, false, 1e-6},
    {"long rows, weight only", {2, 1500, 0}, 2, 1, true, false, false, 1e-5},
    {"bias only, transposed input", {5, 9, 0}, 2, 1, false, true, true, 1e-3},
    {"one row", {1, 300, 0}, 2, 1, true, true, false, -1},
    {"no rows", {0, 8, 0}, 2, 1, true, true, false, 1e-5},
    {"many short rows", {600, 3, 0}, 2, 1, true, true, false, 1e-5},
};

/* in: x (stored transposed when asked), weight, bias. */
static ct_tensor *norm_x(ct_tensor *const *in, const norm_case *k) {
    return k->transposed ? ct_transpose(in[0], 0, 1) : in[0];
}

static ct_tensor *f_rms(ct_tensor *const *in, const void *ud) {
    const norm_case *k = ud;
    return ct_rms_norm(norm_x(in, k), k->shape + k->nd - k->k, k->k, in[1], k->eps);
}

static ct_tensor *f_layer(ct_tensor *const *in, const void *ud) {
    const norm_case *k = ud;
    return ct_layer_norm(norm_x(in, k), k->shape + k->nd - k->k, k->k, in[1], in[2], k->eps < 0 ? 1e-5 : k->eps);
}

static void norm_inputs(const norm_case *k, ct_dtype dt, ct_tensor **in, uint64_t seed) {
    int64_t xs[3];
    memcpy(xs, k->shape, sizeof xs);
    if (k->transposed) {
        xs[0] = k->shape[1];
        xs[1] = k->shape[0];
    }
    in[0] = ct_test_values(xs, k->nd, dt, -3, 3, seed);
    const int64_t *ns = k->shape + k->nd - k->k;
    in[1] = k->weight ? ct_test_values(ns, k->k, dt, 0.5, 1.5, seed + 1) : NULL;
    in[2] = k->bias ? ct_test_values(ns, k->k, dt, -1, 1, seed + 2) : NULL;
}

static void test_rms_layer_norm(void **state) {
    (void)state;
    ct_dtype dts[] = {CT_F32, CT_F64, CT_F16, CT_BF16};
    for (int d = 0; d < 4; d++)
        for (size_t i = 0; i < sizeof norm_cases / sizeof norm_cases[0]; i++) {
            const norm_case *k = &norm_cases[i];
            ct_scope_begin();
            ct_tensor *in[3];
            norm_inputs(k, dts[d], in, 200 + i);
            char what[128];
            double tol = dts[d] == CT_F64 ? 100 : 16;
            snprintf(what, sizeof what, "rms_norm %s (%s)", k->name, ct_dtype_name(dts[d]));
            ct_test_agree_with_grads(what, f_rms, k, in, 2, tol, 210 + i);
            snprintf(what, sizeof what, "layer_norm %s (%s)", k->name, ct_dtype_name(dts[d]));
            ct_test_agree_with_grads(what, f_layer, k, in, 3, tol, 220 + i);
            ct_scope_end();
        }
}

/* The backward ops called directly, with each subset of the affine gradients. */
static void test_norm_backward_ops(void **state) {
    (void)state;
    const norm_case *k = &norm_cases[0];
    ct_scope_begin();
    ct_tensor *in[3];
    norm_inputs(k, CT_F32, in, 230);
    const int64_t *ns = k->shape + k->nd - k->k;
    ct_tensor *go = ct_test_values(k->shape, k->nd, CT_F32, -1, 1, 231);
    for (int mask = 0; mask < 4; mask++) {
        const ct_tensor *w = mask & 1 ? in[1] : NULL, *b = mask & 2 ? in[2] : NULL;
        ct_tensor *cx, *cw = NULL, *cb = NULL, *gx, *gw = NULL, *gb = NULL;
        assert_int_equal(ct_layer_norm_backward(go, in[0], ns, k->k, w, b, 1e-5, &cx, w ? &cw : NULL, b ? &cb : NULL),
                         CT_OK);
        assert_int_equal(ct_layer_norm_backward(g(go), g(in[0]), ns, k->k, g(w), g(b), 1e-5, &gx, w ? &gw : NULL,
                                                b ? &gb : NULL),
                         CT_OK);
        CT_AGREE("layer_norm_backward input", cx, gx, 16);
        if (w)
            CT_AGREE("layer_norm_backward weight", cw, gw, 16);
        if (b)
            CT_AGREE("layer_norm_backward bias", cb, gb, 16);
        assert_int_equal(ct_rms_norm_backward(go, in[0], ns, k->k, w, 1e-5, &cx, w ? &cw : NULL), CT_OK);
        assert_int_equal(ct_rms_norm_backward(g(go), g(in[0]), ns, k->k, g(w), 1e-5, &gx, w ? &gw : NULL), CT_OK);
        CT_AGREE("rms_norm_backward input", cx, gx, 16);
        if (w)
            CT_AGREE("rms_norm_backward weight", cw, gw, 16);
    }
    ct_scope_end();
}

static void test_norm_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_test_values(CT_SHAPE(4, 6), CT_F32, -1, 1, 1);
    ct_tensor *w5 = ct_ones(CT_SHAPE(5), CT_F32, CT_CPU), *w6d = ct_ones(CT_SHAPE(6), CT_F64, CT_CPU);
    ct_tensor *xi = ct_ones(CT_SHAPE(4, 6), CT_I32, CT_CPU);
    int64_t n6[1] = {6}, n5[1] = {5};
    CT_AGREE_ERR("rms_norm shape", ct_rms_norm(x, n5, 1, NULL, 1e-5), ct_rms_norm(g(x), n5, 1, NULL, 1e-5));
    CT_AGREE_ERR("rms_norm weight shape", ct_rms_norm(x, n6, 1, w5, 1e-5), ct_rms_norm(g(x), n6, 1, g(w5), 1e-5));
    CT_AGREE_ERR("rms_norm weight dtype", ct_rms_norm(x, n6, 1, w6d, 1e-5), ct_rms_norm(g(x), n6, 1, g(w6d), 1e-5));
    CT_AGREE_ERR("rms_norm integer", ct_rms_norm(xi, n6, 1, NULL, 1e-5), ct_rms_norm(g(xi), n6, 1, NULL, 1e-5));
    CT_AGREE_ERR("layer_norm weight shape", ct_layer_norm(x, n6, 1, w5, NULL, 1e-5),
                 ct_layer_norm(g(x), n6, 1, g(w5), NULL, 1e-5));
    ct_tensor *r;
    CT_ASSERT_ERR(ct_rms_norm_backward(g(ct_view(x, CT_SHAPE(6, 4))), g(x), n6, 1, NULL, 1e-5, &r, NULL) == CT_OK,
                  CT_ERROR_VALUE, "grad_output has shape");
    CT_ASSERT_ERR(ct_layer_norm_backward(g(x), g(x), n5, 1, NULL, NULL, 1e-5, &r, NULL, NULL) == CT_OK, CT_ERROR_VALUE,
                  "normalized_shape");
    CT_ASSERT_ERR(ct_rms_norm(g(x), n6, 1, ct_ones(CT_SHAPE(6), CT_F32, CT_CPU), 1e-5) != NULL, CT_ERROR_DEVICE,
                  "device");
    ct_scope_end();
}

static void test_activation_backward(void **state) {
    (void)state;
    ct_dtype dts[] = {CT_F32, CT_F64, CT_F16, CT_BF16};
    for (int d = 0; d < 4; d++) {
        ct_scope_begin();
        ct_tensor *x = ct_test_special(CT_SHAPE(5, 301), dts[d], -6, 6, 300);
        ct_tensor *go = ct_test_values(CT_SHAPE(5, 301), dts[d], -2, 2, 301);
        ct_tensor *xt = ct_transpose(ct_test_values(CT_SHAPE(301, 5), dts[d], -4, 4, 302), 0, 1);
        /* transcendental functions: a few ulps apart */
        double tol = dts[d] == CT_F64 ? 100 : 8;
        for (int a = 0; a < 2; a++) {
            ct_gelu_approximate ap = a ? CT_GELU_APPROXIMATE_TANH : CT_GELU_APPROXIMATE_NONE;
            CT_AGREE("gelu_backward", ct_gelu_backward(go, x, ap), ct_gelu_backward(g(go), g(x), ap), tol);
            CT_AGREE("gelu_backward transposed", ct_gelu_backward(go, xt, ap), ct_gelu_backward(g(go), g(xt), ap), tol);
        }
        double ths[3] = {0, 0.5, -1.25};
        for (int t = 0; t < 3; t++) {
            CT_AGREE("threshold_backward", ct_threshold_backward(go, x, ct_scalar_float(ths[t])),
                     ct_threshold_backward(g(go), g(x), ct_scalar_float(ths[t])), 0);
            CT_AGREE("threshold_backward transposed", ct_threshold_backward(go, xt, ct_scalar_float(ths[t])),
                     ct_threshold_backward(g(go), g(xt), ct_scalar_float(ths[t])), 0);
        }
        ct_tensor *e = ct_ones(CT_SHAPE(0, 3), dts[d], CT_CPU);
        CT_AGREE("threshold_backward empty", ct_threshold_backward(e, e, ct_scalar_int(0)),
                 ct_threshold_backward(g(e), g(e), ct_scalar_int(0)), 0);
        CT_AGREE("gelu_backward empty", ct_gelu_backward(e, e, CT_GELU_APPROXIMATE_NONE),
                 ct_gelu_backward(g(e), g(e), CT_GELU_APPROXIMATE_NONE), 0);
        ct_scope_end();
    }
    ct_scope_begin();
    ct_tensor *x = ct_test_values(CT_SHAPE(4, 6), CT_F32, -1, 1, 1), *xd = ct_to_dtype(x, CT_F64);
    ct_tensor *xi = ct_ones(CT_SHAPE(4, 6), CT_I32, CT_CPU), *x5 = ct_ones(CT_SHAPE(4, 5), CT_F32, CT_CPU);
    CT_AGREE_ERR("gelu_backward dtype", ct_gelu_backward(xd, x, CT_GELU_APPROXIMATE_NONE),
                 ct_gelu_backward(g(xd), g(x), CT_GELU_APPROXIMATE_NONE));
    CT_AGREE_ERR("gelu_backward integer", ct_gelu_backward(xi, xi, CT_GELU_APPROXIMATE_NONE),
                 ct_gelu_backward(g(xi), g(xi), CT_GELU_APPROXIMATE_NONE));
    CT_AGREE_ERR("gelu_backward approximate", ct_gelu_backward(x, x, (ct_gelu_approximate)7),
                 ct_gelu_backward(g(x), g(x), (ct_gelu_approximate)7));
    CT_AGREE_ERR("threshold_backward shape", ct_threshold_backward(x5, x, ct_scalar_int(0)),
                 ct_threshold_backward(g(x5), g(x), ct_scalar_int(0)));
    CT_AGREE_ERR("threshold_backward dtype", ct_threshold_backward(xd, x, ct_scalar_int(0)),
                 ct_threshold_backward(g(xd), g(x), ct_scalar_int(0)));
    CT_AGREE_ERR("threshold_backward integer", ct_threshold_backward(xi, xi, ct_scalar_int(0)),
                 ct_threshold_backward(g(xi), g(xi), ct_scalar_int(0)));
    CT_ASSERT_ERR(ct_threshold_backward(g(x), x, ct_scalar_int(0)) != NULL, CT_ERROR_DEVICE, "device");
    ct_scope_end();
}

/* ------------------------------------------------------------------ one-pass layer_norm */

static bool same_values(const ct_tensor *a, const ct_tensor *b) {
    bool eq = false;
    assert_int_equal(ct_equal(ct_to_device(a, CT_CPU), ct_to_device(b, CT_CPU), &eq), CT_OK);
    return eq;
}

/* Note [layer_norm on CUDA]: GPT-2's width, widths that are no multiple of the vector
 * (scalar loads), a row that needs the opted-in shared memory and one past it (the
 * two-pass kernels), rows whose vectors do not fill every lane, in float32, bfloat16
 * and float16; forward and backward against the CPU, and the backward twice, bit for
 * bit. */
static void test_layer_norm_one_pass(void **state) {
    (void)state;
    struct {
        int64_t rows, cols;
    } shapes[] = {{ct_test_size(4096, 64), 768}, {257, 771}, {33, 7}, {70, 3}, {5, 5000}, {3, 7000},
                  /* rows in registers with lanes past the row's end (Note [Layer norm rows in
                   * registers]): 200 and 1000 columns, one and several vectors a lane */
                  {300, 200}, {64, 1000}};
    ct_dtype dts[] = {CT_F32, CT_BF16, CT_F16};
    for (int d = 0; d < 3; d++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            ct_scope_begin();
            int64_t r = shapes[i].rows, c = shapes[i].cols;
            ct_tensor *x = ct_test_values(CT_SHAPE(r, c), dts[d], -3, 3, 500 + i);
            ct_tensor *w = ct_test_values(CT_SHAPE(c), dts[d], 0.5, 1.5, 510 + i);
            ct_tensor *b = ct_test_values(CT_SHAPE(c), dts[d], -1, 1, 520 + i);
            ct_tensor *go = ct_test_values(CT_SHAPE(r, c), dts[d], -1, 1, 530 + i);
            char what[96];
            snprintf(what, sizeof what, "layer_norm %lldx%lld (%s)", (long long)r, (long long)c, ct_dtype_name(dts[d]));
            CT_AGREE(what, ct_layer_norm(x, &c, 1, w, b, 1e-5), ct_layer_norm(g(x), &c, 1, g(w), g(b), 1e-5), 16);
            ct_tensor *cx, *cw, *cb, *gx, *gw, *gb, *gx2, *gw2, *gb2;
            assert_int_equal(ct_layer_norm_backward(go, x, &c, 1, w, b, 1e-5, &cx, &cw, &cb), CT_OK);
            assert_int_equal(ct_layer_norm_backward(g(go), g(x), &c, 1, g(w), g(b), 1e-5, &gx, &gw, &gb), CT_OK);
            assert_int_equal(ct_layer_norm_backward(g(go), g(x), &c, 1, g(w), g(b), 1e-5, &gx2, &gw2, &gb2), CT_OK);
            CT_AGREE("layer_norm_backward input", cx, gx, 16);
            CT_AGREE("layer_norm_backward weight", cw, gw, 16);
            CT_AGREE("layer_norm_backward bias", cb, gb, 16);
            assert_true(same_values(gx, gx2));
            assert_true(same_values(gw, gw2));
            assert_true(same_values(gb, gb2));
            ct_scope_end();
        }
}

/* ------------------------------------------------------------------ fused cross_entropy */

/* Targets in [0, c), every seventh ignore. */
static ct_tensor *xent_targets(int64_t n, int64_t c, int64_t ignore, uint64_t seed) {
    ct_tensor *t = ct_to_dtype(ct_test_values(CT_SHAPE(n), CT_F64, 0, (double)c - 0.01, seed), CT_I64);
    int64_t *p = ct_tensor_data(t);
    for (int64_t i = 0; i < n; i += 7)
        p[i] = ignore;
    return t;
}

/* Loss, lse and the logits' gradient of cross_entropy_fused on the CPU and the GPU. */
static void xent_agree(const char *what, const ct_tensor *x, const ct_tensor *t, ct_reduction red, int64_t ignore,
                       double scale) {
    ct_dtype dt = ct_tensor_dtype(x);
    int64_t n = ct_tensor_shape(x)[0];
    ct_tensor *lse = NULL, *glse = NULL;
    ct_tensor *y = ct_cross_entropy_fused(x, t, red, ignore, &lse);
    ct_tensor *gy = ct_cross_entropy_fused(g(x), g(t), red, ignore, &glse);
    CT_AGREE(what, y, gy, scale);
    CT_AGREE(what, lse, glse, scale);
    ct_tensor *go = red == CT_REDUCTION_NONE ? ct_test_values(CT_SHAPE(n), dt, -1, 1, 77)
                                             : ct_full(NULL, 0, ct_scalar_float(0.75), dt, CT_CPU);
    ct_tensor *cgx = ct_cross_entropy_fused_backward(go, x, t, lse, red, ignore);
    ct_tensor *ggx = ct_cross_entropy_fused_backward(g(go), g(x), g(t), glse, red, ignore);
    CT_ASSERT_OK(cgx);
    CT_ASSERT_OK(ggx);
    assert_int_equal(ct_tensor_dtype(ggx), dt);
    /* relative: the gradient's elements are tiny where the probabilities are */
    double rtol = dt == CT_F64 ? 1e-12 : dt == CT_F32 ? 1e-4 : dt == CT_F16 ? 4e-3 : 1.6e-2;
    /* float16's subnormals are 6e-8 apart */
    double atol = dt == CT_F64 ? 1e-15 : dt == CT_F16 ? 1.2e-7 : 1e-9;
    ct_test_assert_close(ggx, cgx, rtol, atol, what, __FILE__, __LINE__);
    /* out= the logits themselves (the memory autograd reuses): the same bits */
    ct_tensor *gin = ct_clone(g(x));
    assert_ptr_equal(ct_cross_entropy_fused_backward_out(g(go), gin, g(t), glse, red, ignore, gin), gin);
    ct_test_assert_close(gin, ct_to_device(ggx, CT_CPU), 0, 0, what, __FILE__, __LINE__);
}

static void test_cross_entropy_fused(void **state) {
    (void)state;
    ct_dtype dts[] = {CT_F32, CT_BF16, CT_F16, CT_F64};
    ct_reduction reds[] = {CT_REDUCTION_NONE, CT_REDUCTION_MEAN, CT_REDUCTION_SUM};
    int64_t ignores[] = {-100, 5};
    /* 1003 classes: element loads; 1024: 16-byte vectors */
    int64_t widths[] = {1003, 1024};
    for (int d = 0; d < 4; d++)
        for (int wi = 0; wi < 2; wi++) {
            ct_scope_begin();
            ct_tensor *x = ct_test_values(CT_SHAPE(300, widths[wi]), dts[d], -6, 6, 600 + d);
            for (int r = 0; r < 3; r++)
                for (int k = 0; k < 2; k++) {
                    char what[96];
                    snprintf(what, sizeof what, "cross_entropy_fused %lld classes %s red %d ignore %lld",
                             (long long)widths[wi], ct_dtype_name(dts[d]), (int)reds[r], (long long)ignores[k]);
                    xent_agree(what, x, xent_targets(300, widths[wi], ignores[k], 610 + r), reds[r], ignores[k],
                               dts[d] == CT_F64 ? 100 : 8);
                }
            ct_scope_end();
        }
    /* GPT-2's logits: (B*T, 50304) in bfloat16 and float32 */
    const int64_t n = ct_test_size(4096, 64), v = 50304;
    ct_dtype big[] = {CT_BF16, CT_F32};
    for (int d = 0; d < 2; d++) {
        ct_scope_begin();
        ct_manual_seed(620);
        ct_tensor *x = ct_to_device(ct_mul_scalar(ct_randn(CT_SHAPE(n, v), big[d], CT_CUDA(0)), ct_scalar_float(2)),
                                    CT_CPU);
        ct_tensor *t = xent_targets(n, v, -100, 621);
        xent_agree("cross_entropy_fused 50304 mean", x, t, CT_REDUCTION_MEAN, -100, 8);
        xent_agree("cross_entropy_fused 50304 none", x, t, CT_REDUCTION_NONE, -100, 8);
        ct_scope_end();
    }
}

/* ct_cross_entropy routes to the fused op on CUDA too; autograd's gradient equals the CPU's. */
static void test_cross_entropy_autograd(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_test_values(CT_SHAPE(33, 517), CT_F32, -4, 4, 700);
    ct_tensor *gx = g(x);
    ct_tensor_set_requires_grad(x, true);
    ct_tensor_set_requires_grad(gx, true);
    ct_tensor *t = xent_targets(33, 517, -100, 701);
    ct_tensor *y = ct_cross_entropy(x, t, NULL, CT_REDUCTION_MEAN, -100, 0.0);
    ct_tensor *gy = ct_cross_entropy(gx, g(t), NULL, CT_REDUCTION_MEAN, -100, 0.0);
    CT_AGREE("cross_entropy", y, gy, 8);
    assert_non_null(strstr(ct_tensor_grad_fn_name(gy), "CrossEntropyFused"));
    assert_int_equal(ct_backward(y, NULL, false, false), CT_OK);
    assert_int_equal(ct_backward(gy, NULL, false, false), CT_OK);
    CT_AGREE("cross_entropy gradient", ct_tensor_grad(x), ct_tensor_grad(gx), 8);
    ct_scope_end();
}

/* Note [Fused cross_entropy]: a target out of range marks its row with nan, without a
 * host sync; CT_CHECK_TARGETS=1 raises the CPU's error instead. */
static void test_cross_entropy_bad_targets(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = g(ct_test_values(CT_SHAPE(4, 5), CT_F32, -1, 1, 710));
    int64_t tv[4] = {0, 7, 1, -100};
    ct_tensor *t = g(ct_from_data(tv, CT_SHAPE(4), CT_I64)), *lse = NULL;
    unsetenv("CT_CHECK_TARGETS");
    double v = 0;
    ct_tensor *y = ct_cross_entropy_fused(x, t, CT_REDUCTION_MEAN, -100, &lse);
    CT_ASSERT_OK(y);
    assert_int_equal(ct_item_double(y, &v), CT_OK);
    assert_true(isnan(v));
    ct_tensor *rows = ct_to_device(ct_cross_entropy_fused(x, t, CT_REDUCTION_NONE, -100, NULL), CT_CPU);
    assert_true(!isnan(ct_test_at(rows, 0)) && isnan(ct_test_at(rows, 1)) && ct_test_at(rows, 3) == 0);
    ct_tensor *gr = ct_to_device(ct_cross_entropy_fused_backward(g(ct_ones(NULL, 0, CT_F32, CT_CPU)), x, t, lse,
                                                                 CT_REDUCTION_SUM, -100),
                                 CT_CPU);
    assert_true(!isnan(ct_test_at(gr, 0)) && isnan(ct_test_at(gr, 5)) && ct_test_at(gr, 15) == 0);
    setenv("CT_CHECK_TARGETS", "1", 1);
    CT_ASSERT_ERR(ct_cross_entropy_fused(x, t, CT_REDUCTION_MEAN, -100, NULL) != NULL, CT_ERROR_INDEX,
                  "Target 7 is out of bounds.");
    CT_ASSERT_ERR(ct_cross_entropy(x, t, NULL, CT_REDUCTION_MEAN, -100, 0.0) != NULL, CT_ERROR_INDEX,
                  "Target 7 is out of bounds.");
    unsetenv("CT_CHECK_TARGETS");
    CT_ASSERT_ERR(ct_cross_entropy_fused(x, ct_from_data(tv, CT_SHAPE(4), CT_I64), CT_REDUCTION_MEAN, -100, NULL) !=
                      NULL,
                  CT_ERROR_DEVICE, "same device");
    ct_scope_end();
}

/* ------------------------------------------------------------------ embedding backward */

/* Note [Deterministic embedding backward]: with many repeated indices the GPU's sums
 * equal the CPU's exactly and are the same on every run; padding_idx's row stays 0. */
static void test_embedding_backward_deterministic(void **state) {
    (void)state;
    const int64_t n = ct_test_size(32768, 512), dim = 768, num = 50;
    ct_dtype dts[] = {CT_F32, CT_BF16, CT_F16, CT_F64};
    int64_t pads[] = {CT_NO_PADDING_IDX, 7};
    for (int d = 0; d < 4; d++)
        for (int p = 0; p < 2; p++) {
            ct_scope_begin();
            ct_tensor *idx = ct_to_dtype(ct_test_values(CT_SHAPE(n), CT_F64, 0, (double)num - 0.01, 800 + d), CT_I64);
            if (p)
                idx = ct_reshape(ct_to_dtype(idx, CT_I32), CT_SHAPE(4, n / 4));
            ct_tensor *gy = ct_test_values(CT_SHAPE(n, dim), dts[d], -1, 1, 810 + d);
            if (p)
                gy = ct_reshape(gy, CT_SHAPE(4, n / 4, dim));
            ct_tensor *cpu = ct_embedding_backward(gy, idx, num, pads[p]);
            ct_tensor *a = ct_embedding_backward(g(gy), g(idx), num, pads[p]);
            ct_tensor *b = ct_embedding_backward(g(gy), g(idx), num, pads[p]);
            CT_ASSERT_OK(cpu);
            CT_ASSERT_OK(a);
            CT_ASSERT_OK(b);
            assert_int_equal(ct_tensor_dtype(a), dts[d]);
            assert_true(same_values(a, b));
            assert_true(same_values(cpu, a));
            if (p) {
                ct_tensor *row = ct_to_device(ct_select(a, 0, 7), CT_CPU);
                for (int64_t j = 0; j < dim; j++)
                    assert_true(ct_test_at(row, j) == 0);
            }
            ct_scope_end();
        }
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_nn");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_autograd),
        cmocka_unit_test(test_layer_norm),
        cmocka_unit_test(test_rms_layer_norm),
        cmocka_unit_test(test_norm_backward_ops),
        cmocka_unit_test(test_norm_errors),
        cmocka_unit_test(test_activation_backward),
        cmocka_unit_test(test_layer_norm_one_pass),
        cmocka_unit_test(test_cross_entropy_fused),
        cmocka_unit_test(test_cross_entropy_autograd),
        cmocka_unit_test(test_cross_entropy_bad_targets),
        cmocka_unit_test(test_embedding_backward_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
