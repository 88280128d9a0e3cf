/* The attention kernels on CUDA (Note [GPU attention] in src/cuda/nn_cuda.c) against
 * the CPU's fused kernel: scaled_dot_product_attention and its backward with causal,
 * boolean and float masks, custom scales and batch dims, float16 to float64; and
 * layer_norm (a composite of CUDA reductions) forward. Skipped (exit 77) without a GPU. */
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

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_nn");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_autograd),
        cmocka_unit_test(test_layer_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
