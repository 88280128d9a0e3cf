/* The elementwise ops against PyTorch's own results on semantically subtle inputs
 * (tests/data/elementwise.txt, written by tests/golden/gen_elementwise.py): signs of
 * remainders and rounding divisions, pow edge cases, shifts, rounding half to even,
 * activations, erfinv, nan_to_num, clamp with NaN, where's promotion, and the errors
 * PyTorch raises. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "testutil.h"

typedef ct_tensor *(*case_fn)(ct_tensor **in);

#define F1(name, EXPR) \
    static ct_tensor *c_##name(ct_tensor **in) { const ct_tensor *a = in[0]; return EXPR; }
#define F2(name, EXPR) \
    static ct_tensor *c_##name(ct_tensor **in) { const ct_tensor *a = in[0], *b = in[1]; return EXPR; }
#define F3(name, EXPR)                                                              \
    static ct_tensor *c_##name(ct_tensor **in) {                                    \
        const ct_tensor *a = in[0], *b = in[1], *c = in[2];                         \
        return EXPR;                                                                \
    }

static ct_scalar S(double v) { return ct_scalar_float(v); }
static ct_scalar I(int64_t v) { return ct_scalar_int(v); }
static const double d_15 = 1.5, d_2 = 2.0, d_m3 = -3.0, d_1e6 = 1e6, d_m1e6 = -1e6, d_7 = 7.0;

F2(remainder, ct_remainder(a, b))
F2(fmod, ct_fmod(a, b))
F2(floor_divide, ct_floor_divide(a, b))
F2(div_trunc, ct_div_mode(a, b, CT_ROUNDING_MODE_TRUNC))
F2(div_floor, ct_div_mode(a, b, CT_ROUNDING_MODE_FLOOR))
F2(div_true, ct_div(a, b))
F1(zero_scalar, ct_floor_divide_scalar(a, I(0)))
F2(pow, ct_pow(a, b))
F1(pow_s2, ct_pow_scalar(a, I(2)))
F1(pow_s3, ct_pow_scalar(a, I(3)))
F1(pow_s0p5, ct_pow_scalar(a, S(0.5)))
F1(pow_sm0p5, ct_pow_scalar(a, S(-0.5)))
F1(pow_sm1, ct_pow_scalar(a, I(-1)))
F1(pow_sm2, ct_pow_scalar(a, I(-2)))
F1(pow_s2p5, ct_pow_scalar(a, S(2.5)))
F1(pow_s0, ct_pow_scalar(a, I(0)))
F1(pow_scalar_int_neg, ct_pow_scalar(a, I(-1)))
F1(pow_scalar_int_float, ct_pow_scalar(a, S(-1.0)))
F1(pow_scalar_int_2, ct_pow_scalar(a, I(2)))
F2(lshift, ct_bitwise_left_shift(a, b))
F2(rshift, ct_bitwise_right_shift(a, b))
F1(round, ct_round(a))
F1(round_dec2, ct_round_decimals(a, 2))
F1(round_decm2, ct_round_decimals(a, -2))
F1(round_dec400, ct_round_decimals(a, 400))
F1(round_decm400, ct_round_decimals(a, -400))
F1(round_dec30, ct_round_decimals(a, 30))
F1(round_dec_int, ct_round_decimals(a, 1))
F1(floor, ct_floor(a))
F1(frac, ct_frac(a))
F1(trunc, ct_trunc(a))
F1(ceil, ct_ceil(a))
F1(gelu, ct_gelu(a, CT_GELU_APPROXIMATE_NONE))
F1(gelu_tanh, ct_gelu(a, CT_GELU_APPROXIMATE_TANH))
F1(silu, ct_silu(a))
F1(softplus, ct_softplus(a, 1.0, 20.0))
F1(softplus_b2, ct_softplus(a, 2.0, 20.0))
F1(softplus_bm2, ct_softplus(a, -2.0, 20.0))
F1(elu, ct_elu(a, 1.5, 2.0, 3.0))
F1(selu, ct_selu(a))
F1(celu, ct_celu(a, 0.5))
F1(celu_zero, ct_celu(a, 0.0))
F1(leaky_relu, ct_leaky_relu(a, 0.2))
F1(hardtanh, ct_hardtanh(a, -2.0, 3.0))
F1(hardtanh_i8_limits, ct_hardtanh(a, -1.5, 1.5))
F1(hardtanh_default, ct_hardtanh(a, -1.0, 1.0))
F1(hardtanh_swapped, ct_hardtanh(a, 2.0, 1.0))
F1(relu6, ct_relu6(a))
F1(hardsigmoid, ct_hardsigmoid(a))
F1(hardswish, ct_hardswish(a))
F1(mish, ct_mish(a))
F1(logit, ct_logit(a, -1.0))
F1(logit_eps, ct_logit(a, 0.1))
F1(logit_eps6, ct_logit(a, 0.6))
F1(erfinv, ct_erfinv(a))
F1(erf, ct_erf(a))
F1(erfc, ct_erfc(a))
F1(expm1, ct_expm1(a))
F1(log1p, ct_log1p(a))
F1(lgamma, ct_lgamma(a))
F1(digamma, ct_digamma(a))
F1(polygamma0, ct_polygamma(a, 0))
F1(polygamma1, ct_polygamma(a, 1))
F1(polygamma2, ct_polygamma(a, 2))
F1(polygamma3, ct_polygamma(a, 3))
F1(polygamma6, ct_polygamma(a, 6))
F1(polygammam1, ct_polygamma(a, -1))
F1(nan_to_num, ct_nan_to_num(a, NULL, NULL, NULL))
F1(nan_to_num_args_f64, ct_nan_to_num(a, &d_15, &d_2, &d_m3))
F1(nan_to_num_args_f16, ct_nan_to_num(a, &d_1e6, &d_1e6, &d_m1e6))
F1(nan_to_num_posinf_only, ct_nan_to_num(a, NULL, &d_7, NULL))
F1(nan_to_num_int, ct_nan_to_num(a, &d_15, &d_2, &d_m3))
static ct_tensor *clamp2(const ct_tensor *a, const ct_scalar *lo, const ct_scalar *hi) { return ct_clamp(a, lo, hi); }
static const ct_scalar s0 = {.type = CT_SCALAR_FLOAT, .v.f = 0.0}, s2 = {.type = CT_SCALAR_FLOAT, .v.f = 2.0};
static const ct_scalar snan = {.type = CT_SCALAR_FLOAT, .v.f = NAN}, s075 = {.type = CT_SCALAR_FLOAT, .v.f = 0.75};
static const ct_scalar si2 = {.type = CT_SCALAR_INT, .v.i = 2}, si1 = {.type = CT_SCALAR_INT, .v.i = 1};
static const ct_scalar si0 = {.type = CT_SCALAR_INT, .v.i = 0}, si300 = {.type = CT_SCALAR_INT, .v.i = 300};
static const ct_scalar si400 = {.type = CT_SCALAR_INT, .v.i = 400}, sim1 = {.type = CT_SCALAR_INT, .v.i = -1};
static const ct_scalar s05 = {.type = CT_SCALAR_FLOAT, .v.f = 0.5}, s25 = {.type = CT_SCALAR_FLOAT, .v.f = 2.5};
F1(clamp_scalar_f32, clamp2(a, &s0, &s2))
F1(clamp_nan_min, clamp2(a, &snan, &s2))
F1(clamp_nan_max, clamp2(a, &s0, &snan))
F1(clamp_min_only, clamp2(a, &s075, NULL))
F1(clamp_max_only, clamp2(a, NULL, &s075))
F1(clamp_swapped, clamp2(a, &si2, &si1))
F1(clamp_int_float, clamp2(a, &s05, &s25))
F1(clamp_bool_int, clamp2(a, &si0, &si0))
F1(clamp_int8_overflow, clamp2(a, &si300, &si400))
F1(clamp_uint8_minus1, ct_clamp_min_scalar(a, sim1))
F1(clamp_none, clamp2(a, NULL, NULL))
F3(clamp_tensor, ct_clamp_tensor(a, b, c))
F3(clamp_tensor_int, ct_clamp_tensor(a, b, c))
F2(clamp_min_tensor_nan, ct_clamp_min(a, b))
F2(clamp_max_tensor, ct_clamp_max(a, b))
F1(clamp_min_scalar_nan, ct_clamp_min_scalar(a, S(NAN)))
F1(clamp_min_scalar_float_on_int, ct_clamp_min_scalar(a, S(1.5)))
F2(where_int_float_scalar, ct_where_scalar_other(a, b, S(2.5)))
F1(where_scalars_int_float, ct_where_scalars(a, I(1), S(2.5)))
F1(where_scalars_int, ct_where_scalars(a, I(1), I(2)))
F3(where, ct_where(a, b, c))
static ct_tensor *where_0d(const ct_tensor *c, const ct_tensor *x, ct_scalar v, ct_dtype d) {
    ct_tensor *z = ct_scalar_tensor(v, d, CT_CPU);
    return ct_where(c, x, z);
}
F2(where_int32_0d, where_0d(a, b, I(7), CT_I64))
F2(where_int32_0d_f64, where_0d(a, b, S(7.5), CT_F64))
F1(sign, ct_sign(a))
F1(sgn, ct_sgn(a))
F1(bitwise_not, ct_bitwise_not(a))
F1(isnan, ct_isnan(a))
F1(isinf, ct_isinf(a))
F1(isfinite, ct_isfinite(a))
F1(logical_not, ct_logical_not(a))
F2(logical_xor, ct_logical_xor(a, b))
F2(logical_and, ct_logical_and(a, b))
F1(square, ct_square(a))
F2(copysign, ct_copysign(a, b))
F1(copysign_scalar, ct_copysign_scalar(a, I(-1)))
F2(atan2, ct_atan2(a, b))
F2(hypot, ct_hypot(a, b))
F2(fmax, ct_fmax(a, b))
F2(fmin, ct_fmin(a, b))
F1(bitwise_and_scalar_wrap, ct_bitwise_and_scalar(a, I(300)))
F2(bitwise_and, ct_bitwise_and(a, b))
F2(bitwise_or, ct_bitwise_or(a, b))
F2(lerp_scalar, ct_lerp_scalar(a, b, S(0.3)))
F2(lerp_scalar_w07, ct_lerp_scalar(a, b, S(0.7)))
F3(lerp_tensor, ct_lerp(a, b, c))
F2(lerp_dtype_mismatch, ct_lerp_scalar(a, b, S(0.5)))
F3(lerp_weight_mismatch, ct_lerp(a, b, c))
F3(addcmul_int_value, ct_addcmul(a, b, c, I(3)))
F3(addcmul, ct_addcmul(a, b, c, S(0.1)))
F3(addcdiv, ct_addcdiv(a, b, c, S(0.1)))
F3(addcdiv_int, ct_addcdiv(a, b, c, I(1)))
F3(addcdiv_mixed, ct_addcdiv(a, b, c, I(2)))

/* tol: tolerance in units of the result dtype's epsilon, relative to |want| (negative:
 * relative to max(|want|, 1), for functions whose PyTorch kernel loses relative
 * accuracy near zero) (0: bit-exact, NaN == NaN and the sign of zero included). needle: the error to expect where
 * ctorch words a dtype differently from PyTorch (its own dtype names). */
typedef struct golden_case {
    const char *name;
    case_fn fn;
    double tol;
    const char *needle;
} golden_case;

/* Elements where PyTorch 2.11 is wrong and ctorch keeps the right value (docs/ops.md,
 * "where ctorch differs"). */
typedef struct departure {
    const char *name;
    int64_t index;
    double ours;
} departure;

static const departure departures[] = {
    {"gelu_float32", 16, INFINITY}, /* gelu(inf): PyTorch's vectorized float32 kernel gives NaN */
    {"polygamma1_float64", 1, INFINITY}, /* trigamma(-3), a pole: PyTorch's reflection gives 7.3e31 */
};

static const departure *departure_of(const char *name, int64_t i) {
    for (size_t k = 0; k < sizeof departures / sizeof departures[0]; k++)
        if (!strcmp(departures[k].name, name) && departures[k].index == i)
            return &departures[k];
    return NULL;
}

#define C(n) {#n, c_##n, 0, NULL}
#define CT(n, t) {#n, c_##n, t, NULL}
#define CE(n, needle) {#n, c_##n, 0, needle}

static const golden_case cases[] = {
    C(remainder), C(fmod), C(floor_divide), C(div_trunc), C(div_floor), CT(div_true, 1),
    {"int8_min_floor_divide", c_floor_divide, 0, NULL}, {"int8_min_remainder", c_remainder, 0, NULL},
    {"int8_min_fmod", c_fmod, 0, NULL}, {"int8_min_div_trunc", c_div_trunc, 0, NULL},
    {"zero_floor_divide", c_floor_divide, 0, NULL}, {"zero_remainder", c_remainder, 0, NULL},
    {"zero_fmod", c_fmod, 0, NULL}, {"zero_div_trunc", c_div_trunc, 0, NULL}, {"zero_div_floor", c_div_floor, 0, NULL},
    {"zero_float_ok", c_floor_divide, 0, NULL}, {"zero_scalar_u8", c_zero_scalar, 0, NULL},
    CT(pow, 2), {"pow_uint8_wrap", c_pow, 0, NULL}, {"pow_int32_wrap", c_pow, 0, NULL},
    {"pow_tensor_int_neg", c_pow, 0, NULL}, C(pow_s2), C(pow_s3), C(pow_s0p5), CT(pow_sm0p5, 1), C(pow_sm1), C(pow_sm2),
    CT(pow_s2p5, 2), C(pow_s0), C(pow_scalar_int_neg), C(pow_scalar_int_float), C(pow_scalar_int_2),
    {"pow_scalar_bool_2", c_pow_s2, 0, NULL},
    C(lshift), C(rshift), {"lshift_mixed", c_lshift, 0, NULL},
    C(round), C(round_dec2), C(round_decm2), C(round_dec400), C(round_decm400), {"round_dec30_f32", c_round_dec30, 0, NULL},
    CE(round_dec_int, "not implemented for 'int64'"), {"round_int", c_round, 0, NULL}, {"floor_int", c_floor, 0, NULL},
    {"frac_f32", c_frac, 0, NULL}, {"trunc_f32", c_trunc, 0, NULL}, {"ceil_f32", c_ceil, 0, NULL},
    {"floor_f32", c_floor, 0, NULL},
    CT(gelu, -8), CT(gelu_tanh, -4), CT(silu, -4), CT(softplus, -4), CT(softplus_b2, -4), CT(softplus_bm2, -4),
    CT(elu, -4), CT(selu, -4), CT(celu, -4), C(celu_zero), C(leaky_relu), C(hardtanh), C(hardtanh_i8_limits),
    {"hardtanh_u8_neg", c_hardtanh_default, 0, NULL}, {"hardtanh_bool", c_hardtanh_default, 0, NULL},
    C(hardtanh_swapped), C(relu6), CT(hardsigmoid, 1), CT(hardswish, 1), CT(mish, -4),
    {"gelu_int", c_gelu, 0, "not implemented for 'int64'"},
    CT(logit, 2), CT(logit_eps, 2), CT(logit_eps6, 2), CT(erfinv, 2), {"erfinv_mp", c_erfinv, 2, NULL}, {"erfinv_int", c_erfinv, 2, NULL},
    CT(erf, 2), CT(erfc, 2), CT(expm1, 2), CT(log1p, 2),
    CT(lgamma, -8), CT(digamma, -16), C(polygamma1), C(polygamma2), C(polygamma3),
    {"polygamma1_int", c_polygamma1, 0, NULL}, {"lgamma_int", c_lgamma, -8, NULL}, {"digamma_bool", c_digamma, -16, NULL},
    {"polygamma0_mp", c_polygamma0, -64, NULL}, {"polygamma1_mp", c_polygamma1, -64, NULL},
    {"polygamma2_mp", c_polygamma2, -64, NULL}, {"polygamma3_mp", c_polygamma3, -64, NULL},
    {"polygamma6_mp", c_polygamma6, -64, NULL}, C(polygammam1),
    C(nan_to_num), C(nan_to_num_args_f64), C(nan_to_num_args_f16), C(nan_to_num_posinf_only), C(nan_to_num_int),
    C(clamp_scalar_f32), C(clamp_nan_min), C(clamp_nan_max), C(clamp_min_only), C(clamp_max_only), C(clamp_swapped),
    C(clamp_int_float), C(clamp_bool_int), C(clamp_int8_overflow), C(clamp_uint8_minus1), C(clamp_none),
    C(clamp_tensor), C(clamp_tensor_int), C(clamp_min_tensor_nan), C(clamp_max_tensor), C(clamp_min_scalar_nan),
    C(clamp_min_scalar_float_on_int),
    C(where_int_float_scalar), C(where_scalars_int_float), C(where_scalars_int), {"where_u8_i8", c_where, 0, NULL},
    C(where_int32_0d), C(where_int32_0d_f64), {"where_uint8_cond", c_where, 0, NULL},
    {"where_int_cond", c_where, 0, "where expected condition to be a boolean tensor, but got a tensor with dtype int64"},
    {"where_bool_values", c_where, 0, NULL},
    C(sign), C(sgn), C(bitwise_not), {"bitwise_not_float", c_bitwise_not, 0, "not implemented for 'float32'"},
    {"isnan_int", c_isnan, 0, NULL}, {"isnan_f16", c_isnan, 0, NULL}, {"isinf_bf16", c_isinf, 0, NULL},
    {"isfinite_f64", c_isfinite, 0, NULL}, {"isfinite_int", c_isfinite, 0, NULL},
    {"logical_not_float", c_logical_not, 0, NULL}, {"logical_xor_nan", c_logical_xor, 0, NULL},
    {"logical_and_mixed", c_logical_and, 0, NULL}, C(square),
    {"copysign_int", c_copysign, 0, NULL}, C(copysign_scalar), {"atan2_mixed", c_atan2, 1, NULL},
    {"hypot_f32", c_hypot, 1, NULL}, {"hypot_int", c_hypot, 0, "not implemented for 'int64'"},
    {"fmax_nan", c_fmax, 0, NULL}, {"fmin_nan", c_fmin, 0, NULL}, C(bitwise_and_scalar_wrap),
    {"bitwise_and_bool", c_bitwise_and, 0, NULL}, {"bitwise_or_float", c_bitwise_or, 0, "not implemented for 'float32'"},
    {"lerp_scalar_f32", c_lerp_scalar, 0, NULL}, {"lerp_scalar_w07_f32", c_lerp_scalar_w07, 0, NULL},
    {"lerp_tensor_f64", c_lerp_tensor, 0, NULL},
    CE(lerp_dtype_mismatch, "expected dtype float32 for `end` but got dtype float64"),
    CE(lerp_weight_mismatch, "expected dtype float32 for `weight` but got dtype float64"),
    C(addcmul_int_value), {"addcmul_f32", c_addcmul, 0, NULL}, {"addcdiv_f32", c_addcdiv, 0, NULL}, C(addcdiv_int),
    C(addcdiv_mixed),
};

static const golden_case *find_case(const char *name) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(cases[i].name, name) == 0)
            return &cases[i];
    /* Cases generated per dtype end in the dtype's name. */
    const char *us = strrchr(name, '_');
    if (us && ct_dtype_from_name(us + 1) != CT_DTYPE_UNDEFINED) {
        char base[128];
        size_t n = (size_t)(us - name);
        if (n < sizeof base) {
            memcpy(base, name, n);
            base[n] = '\0';
            return find_case(base);
        }
    }
    return NULL;
}

/* "dtype:v,v,..." -> a 1-D tensor. */
static ct_tensor *parse_tensor(char *spec, ct_dtype *dt) {
    char *colon = strchr(spec, ':');
    if (!colon)
        return NULL;
    *colon = '\0';
    ct_dtype d = ct_dtype_from_name(spec);
    if (dt)
        *dt = d;
    double vals[64];
    int64_t n = 0;
    for (char *tok = strtok(colon + 1, ","); tok && n < 64; tok = strtok(NULL, ","))
        vals[n++] = strtod(tok, NULL);
    ct_tensor *t = ct_empty(CT_SHAPE(n), d, CT_CPU);
    for (int64_t i = 0; i < n; i++)
        ct_tensor_set(t, CT_INDEX(i), vals[i]);
    return t;
}

static double eps_of(ct_dtype d) {
    switch (d) {
    case CT_F16: return 9.77e-4;
    case CT_BF16: return 7.82e-3;
    case CT_F32: return 1.2e-7;
    case CT_F64: return 2.3e-16;
    default: return 0;
    }
}

static int check_line(char *line, int lineno) {
    char *arrow = strstr(line, "=>");
    assert_non_null(arrow);
    *arrow = '\0';
    char *want = arrow + 2;
    char *save = NULL;
    char *name = strtok_r(line, ";", &save);
    const golden_case *gc = find_case(name);
    if (!gc) {
        print_error("line %d: no C case for %s\n", lineno, name);
        return 1;
    }
    char *specs[3];
    int nin = 0;
    for (char *tok = strtok_r(NULL, ";", &save); tok && nin < 3; tok = strtok_r(NULL, ";", &save))
        specs[nin++] = tok;
    int failures = 0;
    ct_scope_begin();
    ct_tensor *in[3] = {NULL, NULL, NULL};
    for (int i = 0; i < nin; i++)
        in[i] = parse_tensor(specs[i], NULL);
    ct_clear_error();
    ct_tensor *got = gc->fn(in);
    if (strncmp(want, "ERROR:", 6) == 0) {
        const char *needle = gc->needle ? gc->needle : want + 6;
        if (got || !strstr(ct_last_error(), needle)) {
            print_error("%s: expected error '%s', got %s\n", name, needle, got ? "a result" : ct_last_error());
            failures++;
        }
    } else if (!got) {
        print_error("%s: failed: %s\n", name, ct_last_error());
        failures++;
    } else {
        ct_dtype wd;
        ct_tensor *w = parse_tensor(want, &wd);
        if (ct_tensor_dtype(got) != wd) {
            print_error("%s: dtype %s, PyTorch %s\n", name, ct_dtype_name(ct_tensor_dtype(got)), ct_dtype_name(wd));
            failures++;
        } else if (ct_tensor_numel(got) != ct_tensor_numel(w)) {
            print_error("%s: %lld elements, PyTorch %lld\n", name, (long long)ct_tensor_numel(got),
                        (long long)ct_tensor_numel(w));
            failures++;
        } else {
            for (int64_t i = 0; i < ct_tensor_numel(w); i++) {
                double g = ct_test_at(got, i), e = ct_test_at(w, i);
                bool ok;
                const departure *dep = departure_of(name, i);
                if (dep)
                    ok = g == dep->ours;
                else if (isnan(e) || isnan(g))
                    ok = isnan(e) && isnan(g);
                else if (gc->tol == 0 || isinf(e))
                    ok = g == e && signbit(g) == signbit(e);
                else
                    ok = fabs(g - e) <= fabs(gc->tol) * eps_of(wd) * (gc->tol < 0 ? fmax(fabs(e), 1.0) : fabs(e));
                if (!ok) {
                    print_error("%s[%lld]: got %.17g, PyTorch %.17g\n", name, (long long)i, g, e);
                    failures++;
                }
            }
        }
    }
    ct_scope_end();
    return failures;
}

static void test_golden(void **state) {
    (void)state;
    FILE *f = fopen(CT_TEST_DATA_DIR "/elementwise.txt", "r");
    assert_non_null(f);
    static char line[8192];
    int lineno = 0, failures = 0, ncases = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (!n || line[0] == '#')
            continue;
        failures += check_line(line, lineno);
        ncases++;
    }
    fclose(f);
    assert_true(ncases > 200);
    if (failures)
        fail_msg("%d mismatches with PyTorch", failures);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
