/* The attention kernels on CUDA (Note [GPU attention] in src/cuda/nn_cuda.c) against
 * the CPU's fused kernel: scaled_dot_product_attention and its backward with causal,
 * boolean and float masks, custom scales and batch dims, float16 to float64; the fused
 * rms_norm and layer_norm with their backward ops (directly and through autograd),
 * gelu_backward and threshold_backward, and their argument errors. Skipped (exit 77)
 * without a GPU. */
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
