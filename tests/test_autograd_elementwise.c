/* Derivatives of the elementwise ops' forms the OpInfo entries do not reach: rounding
 * modes, scalar exponents and bounds, optional clamp bounds, scalar weights and
 * values, parameterised activations. gradcheck and gradgradcheck in float64. */
#include <math.h>

#include "testutil.h"

static const double XV[6] = {-1.7, -0.4, 0.37, 0.8, 1.3, 2.6};
static const double YV[6] = {0.6, 1.9, -2.3, 0.45, 1.1, -0.7};
static const double PV[6] = {0.1, 0.3, 0.45, 0.6, 0.85, 0.95}; /* in (0, 1) */
static const double LO[6] = {-1.0, -0.5, 0.5, 0.0, 0.0, 3.0};
static const double HI[6] = {1.0, 0.5, 1.0, 0.5, 2.0, 2.0};   /* last: min > max */

typedef ct_tensor *(*case_fn)(ct_tensor *const *in);
typedef struct grad_case {
    const char *name;
    case_fn fn;
    int n;
    const double *v[3];
} grad_case;

static ct_tensor *call_case(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    return ((const grad_case *)ud)->fn(in);
}

static ct_scalar f(double v) { return ct_scalar_float(v); }

static ct_tensor *c_div_trunc(ct_tensor *const *in) { return ct_div_mode(in[0], in[1], CT_ROUNDING_MODE_TRUNC); }
static ct_tensor *c_div_floor(ct_tensor *const *in) { return ct_div_mode(in[0], in[1], CT_ROUNDING_MODE_FLOOR); }
static ct_tensor *c_round_dec(ct_tensor *const *in) { return ct_round_decimals(in[0], 1); }
static ct_tensor *c_pow_scalar(ct_tensor *const *in) { return ct_pow_scalar(in[0], f(2.5)); }
static ct_tensor *c_pow_tensor(ct_tensor *const *in) { return ct_pow(in[0], in[1]); }
static ct_tensor *c_clamp_min_only(ct_tensor *const *in) {
    ct_scalar lo = f(0);
    return ct_clamp(in[0], &lo, NULL);
}
static ct_tensor *c_clamp_min_nonleaf(ct_tensor *const *in) {
    ct_scalar lo = f(-100);
    return ct_add(ct_clamp(ct_log(ct_sigmoid(in[0])), &lo, NULL), in[0]);
}
static ct_tensor *c_clamp_both(ct_tensor *const *in) {
    ct_scalar lo = f(-1), hi = ct_scalar_int(1);
    return ct_clamp(in[0], &lo, &hi);
}
static ct_tensor *c_clamp_tensor(ct_tensor *const *in) { return ct_clamp_tensor(in[0], in[1], in[2]); }
static ct_tensor *c_clamp_tensor_max(ct_tensor *const *in) { return ct_clamp_tensor(in[0], NULL, in[1]); }
static ct_tensor *c_lerp_scalar(ct_tensor *const *in) { return ct_lerp_scalar(in[0], in[1], f(0.3)); }
static ct_tensor *c_lerp(ct_tensor *const *in) { return ct_lerp(in[0], in[1], in[2]); }
static ct_tensor *c_where(ct_tensor *const *in) {
    return ct_where(ct_gt_scalar(in[1], ct_scalar_int(0)), in[0], in[1]);
}
static ct_tensor *c_where_scalar(ct_tensor *const *in) {
    return ct_where_scalar_other(ct_lt_scalar(in[0], ct_scalar_int(0)), in[0], f(0.5));
}
static ct_tensor *c_nan_to_num(ct_tensor *const *in) { return ct_nan_to_num(in[0], NULL, NULL, NULL); }
static ct_tensor *c_elu(ct_tensor *const *in) { return ct_elu(in[0], 1.3, 0.9, 1.1); }
static ct_tensor *c_celu(ct_tensor *const *in) { return ct_celu(in[0], 0.7); }
static ct_tensor *c_selu(ct_tensor *const *in) { return ct_selu(in[0]); }
static ct_tensor *c_softplus(ct_tensor *const *in) { return ct_softplus(in[0], 2.0, 1.5); }
static ct_tensor *c_hardtanh(ct_tensor *const *in) { return ct_hardtanh(in[0], -1.0, 1.0); }
static ct_tensor *c_leaky(ct_tensor *const *in) { return ct_leaky_relu(in[0], 0.1); }
static ct_tensor *c_logit_eps(ct_tensor *const *in) { return ct_logit(in[0], 0.2); }
static ct_tensor *c_gelu_tanh(ct_tensor *const *in) { return ct_gelu(in[0], CT_GELU_APPROXIMATE_TANH); }
static ct_tensor *c_addcmul(ct_tensor *const *in) { return ct_addcmul(in[0], in[1], in[2], f(0.5)); }
static ct_tensor *c_addcdiv(ct_tensor *const *in) { return ct_addcdiv(in[0], in[1], in[2], ct_scalar_int(-2)); }
static ct_tensor *c_remainder_scalar(ct_tensor *const *in) { return ct_remainder_scalar(in[0], f(0.75)); }

static const grad_case cases[] = {
    {"div trunc", c_div_trunc, 2, {XV, YV}},
    {"div floor", c_div_floor, 2, {XV, YV}},
    {"round decimals", c_round_dec, 1, {XV}},
    {"pow scalar", c_pow_scalar, 1, {PV}},
    {"pow", c_pow_tensor, 2, {PV, YV}},
    {"clamp min", c_clamp_min_only, 1, {XV}},
    {"clamp min (non-leaf)", c_clamp_min_nonleaf, 1, {XV}},
    {"clamp", c_clamp_both, 1, {XV}},
    {"clamp tensor", c_clamp_tensor, 3, {XV, LO, HI}},
    {"clamp tensor max", c_clamp_tensor_max, 2, {XV, HI}},
    {"lerp scalar", c_lerp_scalar, 2, {XV, YV}},
    {"lerp", c_lerp, 3, {XV, YV, PV}},
    {"where", c_where, 2, {XV, YV}},
    {"where scalar", c_where_scalar, 1, {XV}},
    {"nan_to_num", c_nan_to_num, 1, {XV}},
    {"elu", c_elu, 1, {XV}},
    {"celu", c_celu, 1, {XV}},
    {"selu", c_selu, 1, {XV}},
    {"softplus", c_softplus, 1, {XV}},
    {"hardtanh", c_hardtanh, 1, {XV}},
    {"leaky_relu", c_leaky, 1, {XV}},
    {"logit eps", c_logit_eps, 1, {PV}},
    {"gelu tanh", c_gelu_tanh, 1, {XV}},
    {"addcmul", c_addcmul, 3, {XV, YV, PV}},
    {"addcdiv", c_addcdiv, 3, {XV, YV, PV}},
    {"remainder scalar", c_remainder_scalar, 1, {XV}},
};

static void test_gradcheck_forms(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ct_scope_begin();
        ct_tensor *in[3];
        for (int i = 0; i < cases[c].n; i++) {
            in[i] = ct_from_data(cases[c].v[i], CT_SHAPE(2, 3), CT_F64);
            ct_tensor_set_requires_grad(in[i], true);
        }
        void *ud = (void *)&cases[c];
        if (ct_gradcheck(call_case, ud, in, cases[c].n, 1e-6, 1e-5, 1e-3) != CT_OK)
            fail_msg("%s: %s", cases[c].name, ct_last_error());
        if (ct_gradgradcheck(call_case, ud, in, cases[c].n, 1e-6, 1e-5, 1e-3) != CT_OK)
            fail_msg("%s (second order): %s", cases[c].name, ct_last_error());
        ct_scope_end();
    }
}

/* Piecewise-constant ops give a zero gradient, not none (as PyTorch). */
static void test_zero_gradients(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_from_data(XV, CT_SHAPE(6), CT_F64);
    ct_tensor_set_requires_grad(x, true);
    ct_tensor *y = ct_add(ct_add(ct_floor(x), ct_sign(x)), ct_div_scalar_mode(x, f(2), CT_ROUNDING_MODE_FLOOR));
    assert_int_equal(ct_backward(ct_sum(y, NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false), CT_OK);
    ct_tensor *g = ct_tensor_grad(x);
    assert_non_null(g);
    for (int64_t i = 0; i < 6; i++)
        assert_true(ct_test_at(g, i) == 0.0);
    ct_scope_end();
}

/* Bitwise and integer-only ops record no graph. */
static void test_nondiff(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_from_data(XV, CT_SHAPE(6), CT_F64);
    ct_tensor_set_requires_grad(x, true);
    assert_false(ct_tensor_requires_grad(ct_isnan(x)));
    assert_false(ct_tensor_requires_grad(ct_floor_divide(x, x)));
    assert_false(ct_tensor_requires_grad(ct_logical_and(x, x)));
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradcheck_forms),
        cmocka_unit_test(test_zero_gradients),
        cmocka_unit_test(test_nondiff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
