/* The unary ops of unary_math.cu, unary_misc.cu and activation.cu on the GPU against
 * the CPU: every dtype the CPU supports, special values (infinities, NaN, signed
 * zeros, halves, integer extremes), contiguous (vector loop and tail), misaligned,
 * transposed, 0-d and empty inputs, in-place and out= forms, the ops' parameters and
 * alternative forms (round(decimals), gelu(tanh), logit(eps)), and dtype refusals.
 * Skipped (exit code 77) without a GPU. */
#include <string.h>

#include "cuda_testutil.h"

#define CUDA0 CT_CUDA(0)

static const ct_dtype all_dtypes[] = {CT_BOOL, CT_U8,  CT_I8,  CT_I16, CT_I32,  CT_I64, CT_U16,
                                      CT_U32,  CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64};
#define NDT ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

/* Adapters giving every op the signature (a) -> result. */
#define ADAPT(tag, EXPR) \
    static ct_tensor *tag(const ct_tensor *a) { return EXPR; }
ADAPT(logit_eps, ct_logit(a, 1e-3))
ADAPT(logit_none, ct_logit(a, -1.0))
ADAPT(round_dec2, ct_round_decimals(a, 2))
ADAPT(round_decm1, ct_round_decimals(a, -1))
ADAPT(gelu_none, ct_gelu(a, CT_GELU_APPROXIMATE_NONE))
ADAPT(gelu_tanh, ct_gelu(a, CT_GELU_APPROXIMATE_TANH))
ADAPT(leaky, ct_leaky_relu(a, 0.2))
ADAPT(elu3, ct_elu(a, 1.5, 2.0, 0.5))
ADAPT(celu07, ct_celu(a, 0.7))
ADAPT(softplus25, ct_softplus(a, 2.0, 5.0))
ADAPT(hardtanh_ab, ct_hardtanh(a, -2.5, 3.5))
ADAPT(nan_to_num_default, ct_nan_to_num(a, NULL, NULL, NULL))
static const double nan_v = 7, pos_v = 1000, neg_v = -1000;
ADAPT(nan_to_num_given, ct_nan_to_num(a, &nan_v, &pos_v, &neg_v))
ADAPT(trigamma, ct_polygamma(a, 1))
ADAPT(pentagamma, ct_polygamma(a, 3))

typedef struct {
    const char *name;
    ct_tensor *(*f)(const ct_tensor *);
    double lo, hi; /* the domain of the random values (special values come on top) */
} ucase;

#define U(op, lo, hi) {#op, ct_##op, lo, hi}
static const ucase cases[] = {
    U(exp2, -20, 20), U(expm1, -5, 5), U(log2, 0, 100), U(log10, 0, 100), U(log1p, -1, 50), U(rsqrt, 0, 50),
    U(tan, -1.5, 1.5), U(asin, -1, 1), U(acos, -1, 1), U(atan, -20, 20), U(sinh, -5, 5), U(cosh, -5, 5),
    U(asinh, -20, 20), U(acosh, 1, 30), U(atanh, -1, 1), U(erf, -3, 3), U(erfc, -3, 3), U(erfinv, -1, 1), U(lgamma, 0.1, 20), U(digamma, -5.3, 20),
    U(reciprocal, -10, 10), {"logit_eps", logit_eps, 0, 1}, {"logit_none", logit_none, 0, 1},
    U(sign, -5, 5), U(sgn, -5, 5), U(floor, -9, 9), U(ceil, -9, 9), U(round, -9, 9), U(trunc, -9, 9),
    U(frac, -9, 9), U(square, -30, 30), {"round_dec2", round_dec2, -9, 9}, {"round_decm1", round_decm1, -90, 90},
    {"nan_to_num", nan_to_num_default, -5, 5}, {"nan_to_num_given", nan_to_num_given, -5, 5},
    {"trigamma", trigamma, -5.3, 20}, {"pentagamma", pentagamma, -5.3, 20},
    U(logical_not, -2, 2), U(bitwise_not, -50, 50), U(isnan, -5, 5), U(isinf, -5, 5), U(isfinite, -5, 5),
    U(relu6, -9, 9), {"leaky_relu", leaky, -5, 5}, {"elu", elu3, -5, 5}, U(selu, -5, 5), {"celu", celu07, -5, 5},
    {"gelu", gelu_none, -5, 5}, {"gelu_tanh", gelu_tanh, -5, 5}, U(silu, -8, 8), U(mish, -8, 8),
    {"softplus", softplus25, -5, 5}, {"hardtanh", hardtanh_ab, -5, 5}, U(hardsigmoid, -5, 5),
    U(hardswish, -5, 5),
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* Float results of transcendental functions agree to a few ulp; the tolerance scale
 * is generous for them (bit-exact ops pass at any scale). */
static void run_layouts(const ucase *c, ct_dtype dt) {
    char what[128];
    ct_scope_begin();
    /* contiguous: long enough for the 16-byte vector loop and a scalar tail */
    ct_tensor *a = ct_test_special(CT_SHAPE(4099), dt, c->lo, c->hi, 1);
    snprintf(what, sizeof what, "%s contiguous %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(a), c->f(ct_to_device(a, CUDA0)));
    /* misaligned: one element in */
    ct_tensor *g = ct_to_device(a, CUDA0);
    snprintf(what, sizeof what, "%s misaligned %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(ct_slice(a, 0, 1, 4099, 1)), c->f(ct_slice(g, 0, 1, 4099, 1)));
    /* transposed and strided (the offset calculator) */
    ct_tensor *m = ct_test_special(CT_SHAPE(37, 29), dt, c->lo, c->hi, 2);
    ct_tensor *gm = ct_to_device(m, CUDA0);
    snprintf(what, sizeof what, "%s transposed %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(ct_t(m)), c->f(ct_t(gm)));
    snprintf(what, sizeof what, "%s strided %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(ct_slice(m, 1, 0, 29, 3)), c->f(ct_slice(gm, 1, 0, 29, 3)));
    /* 0-d and empty */
    ct_tensor *z = ct_test_special(NULL, 0, dt, c->lo, c->hi, 3);
    snprintf(what, sizeof what, "%s 0-d %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(z), c->f(ct_to_device(z, CUDA0)));
    ct_tensor *e = ct_zeros(CT_SHAPE(0, 5), dt, CT_CPU);
    snprintf(what, sizeof what, "%s empty %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(e), c->f(ct_to_device(e, CUDA0)));
    ct_scope_end();
}

static void test_unary_all_dtypes(void **state) {
    (void)state;
    for (int o = 0; o < NCASES; o++)
        for (int d = 0; d < NDT; d++)
            run_layouts(&cases[o], all_dtypes[d]);
}

/* A sample of ops through their in-place and out= forms. */
static void test_inplace_and_out(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_test_special(CT_SHAPE(3, 300), CT_F32, -3, 3, 4);
    ct_tensor *cpu = ct_clone(a);
    ct_tensor *gpu = ct_to_device(a, CUDA0);
    CT_ASSERT_OK(ct_expm1_(cpu));
    CT_ASSERT_OK(ct_expm1_(gpu));
    CT_AGREE("expm1_", cpu, gpu, 4);
    CT_ASSERT_OK(ct_floor_(cpu));
    CT_ASSERT_OK(ct_floor_(gpu));
    CT_AGREE("floor_", cpu, gpu, 1);
    CT_ASSERT_OK(ct_hardtanh_(ct_t(cpu), -1.0, 1.0)); /* in place through a transposed view */
    CT_ASSERT_OK(ct_hardtanh_(ct_t(gpu), -1.0, 1.0));
    CT_AGREE("hardtanh_ transposed", cpu, gpu, 1);
    ct_tensor *out = ct_empty(CT_SHAPE(3, 300), CT_F64, CUDA0);
    CT_ASSERT_OK(ct_gelu_out(gpu, CT_GELU_APPROXIMATE_TANH, out)); /* float32 result cast into float64 */
    CT_AGREE("gelu_out", ct_to_dtype(ct_gelu(cpu, CT_GELU_APPROXIMATE_TANH), CT_F64), out, 4);
    ct_tensor *bout = ct_empty(CT_SHAPE(3, 300), CT_BOOL, CUDA0);
    CT_ASSERT_OK(ct_logical_not_out(gpu, bout));
    CT_AGREE("logical_not_out", ct_logical_not(cpu), bout, 1);
    /* Integer inputs of a float function promote to the default dtype. */
    ct_tensor *i = ct_test_special(CT_SHAPE(100), CT_I32, -50, 50, 5);
    ct_tensor *r = ct_log1p(ct_to_device(i, CUDA0));
    CT_ASSERT_OK(r);
    assert_int_equal(ct_tensor_dtype(r), CT_F32);
    CT_AGREE("log1p(int32)", ct_log1p(i), r, 4);
    /* square of bool squares as int64, as on the CPU */
    ct_tensor *b = ct_test_special(CT_SHAPE(10), CT_BOOL, 0, 1, 6);
    ct_tensor *sq = ct_square(ct_to_device(b, CUDA0));
    CT_ASSERT_OK(sq);
    assert_int_equal(ct_tensor_dtype(sq), CT_I64);
    CT_AGREE("square(bool)", ct_square(b), sq, 1);
    ct_scope_end();
}

/* Values near the integer rounding boundaries: the rounding ops must be exact. */
static void test_rounding_exact(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_test_values(CT_SHAPE(5000), CT_F64, -100, 100, 7);
    double *p = ct_tensor_data(a);
    for (int64_t i = 0; i < 5000; i++)
        p[i] = floor(p[i] * 8) / 8; /* halves and quarters */
    ct_dtype dts[] = {CT_F16, CT_BF16, CT_F32, CT_F64};
    for (int d = 0; d < 4; d++) {
        ct_tensor *x = ct_to_dtype(a, dts[d]);
        ct_tensor *g = ct_to_device(x, CUDA0);
        CT_AGREE("round", ct_round(x), ct_round(g), 0);
        CT_AGREE("round(decimals=1)", ct_round_decimals(x, 1), ct_round_decimals(g, 1), 0);
        CT_AGREE("trunc", ct_trunc(x), ct_trunc(g), 0);
        CT_AGREE("frac", ct_frac(x), ct_frac(g), 0);
        CT_AGREE("hardswish", ct_hardswish(x), ct_hardswish(g), 0);
        CT_AGREE("hardsigmoid", ct_hardsigmoid(x), ct_hardsigmoid(g), 0);
    }
    ct_scope_end();
}

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *i = ct_to_device(ct_ones(CT_SHAPE(4), CT_I32, CT_CPU), CUDA0);
    ct_tensor *f = ct_to_device(ct_ones(CT_SHAPE(4), CT_F32, CT_CPU), CUDA0);
    ct_tensor *b = ct_to_device(ct_ones(CT_SHAPE(4), CT_BOOL, CT_CPU), CUDA0);
    CT_ASSERT_ERR(ct_frac(i) != NULL, CT_ERROR_TYPE, "not implemented for 'int32'");
    CT_ASSERT_ERR(ct_bitwise_not(f) != NULL, CT_ERROR_TYPE, "not implemented for 'float32'");
    CT_ASSERT_ERR(ct_floor(b) != NULL, CT_ERROR_TYPE, "bool");
    CT_ASSERT_ERR(ct_gelu(f, 7) != NULL, CT_ERROR_VALUE, "approximate argument must be either none or tanh");
    CT_ASSERT_ERR(ct_celu(f, 0.0) != NULL, CT_ERROR_VALUE, "alpha cannot be 0");
    CT_ASSERT_ERR(ct_hardtanh(ct_to_device(ct_ones(CT_SHAPE(2), CT_U8, CT_CPU), CUDA0), -1, 1) != NULL,
                  CT_ERROR_VALUE, "unsigned type with negative limits");
    CT_ASSERT_ERR(ct_exp2(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "exp2");
    /* out= on the wrong device */
    CT_ASSERT_ERR(ct_exp2_out(f, ct_empty(CT_SHAPE(4), CT_F32, CT_CPU)) != NULL, CT_ERROR_DEVICE, "");
    ct_scope_end();
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_unary");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary_all_dtypes),
        cmocka_unit_test(test_inplace_and_out),
        cmocka_unit_test(test_rounding_exact),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
