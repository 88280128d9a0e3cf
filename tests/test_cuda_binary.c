/* The binary ops of binary_math.cu and the logical ops of compare.cu on the GPU
 * against the CPU: every dtype the CPU supports, special values (NaN, infinities,
 * signed zeros, integer extremes with -1 divisors), shift counts past the width,
 * div's rounding modes, pow's scalar shortcuts, broadcast / strided / 0-d / empty
 * layouts, CPU scalars joining GPU tensors, mixed dtypes, in-place forms, and the
 * integer ZeroDivisionError. Skipped (exit code 77) without a GPU. */
#include <string.h>

#include "cuda_testutil.h"

#define CUDA0 CT_CUDA(0)

static const ct_dtype all_dtypes[] = {CT_BOOL, CT_U8,  CT_I8,  CT_I16, CT_I32,  CT_I64, CT_U16,
                                      CT_U32,  CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64};
#define NDT ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

typedef ct_tensor *(*bin_fn)(const ct_tensor *, const ct_tensor *);

static ct_tensor *div_trunc(const ct_tensor *a, const ct_tensor *b) { return ct_div_mode(a, b, CT_ROUNDING_MODE_TRUNC); }
static ct_tensor *div_floor(const ct_tensor *a, const ct_tensor *b) { return ct_div_mode(a, b, CT_ROUNDING_MODE_FLOOR); }
static ct_tensor *clamp_lo(const ct_tensor *a, const ct_tensor *b) { return ct_clamp_tensor(a, b, NULL); }
static ct_tensor *clamp_hi(const ct_tensor *a, const ct_tensor *b) { return ct_clamp_tensor(a, NULL, b); }

typedef struct {
    const char *name;
    bin_fn f;
    bool divides;  /* integer divisors must be nonzero */
    bool shift;    /* second operand: shift counts */
    double lo, hi;
} bcase;

#define B(op, lo, hi) {#op, ct_##op, false, false, lo, hi}
static const bcase cases[] = {
    {"floor_divide", ct_floor_divide, true, false, -50, 50},
    {"remainder", ct_remainder, true, false, -50, 50},
    {"fmod", ct_fmod, true, false, -50, 50},
    {"div_trunc", div_trunc, true, false, -50, 50},
    {"div_floor", div_floor, true, false, -50, 50},
    B(pow, -4, 4), B(atan2, -5, 5), B(hypot, -5, 5), B(copysign, -5, 5), B(fmax, -5, 5), B(fmin, -5, 5),
    B(logical_and, -2, 2), B(logical_or, -2, 2), B(logical_xor, -2, 2), B(bitwise_and, -100, 100),
    B(bitwise_or, -100, 100), B(bitwise_xor, -100, 100), B(clamp_min, -5, 5), B(clamp_max, -5, 5),
    {"bitwise_left_shift", ct_bitwise_left_shift, false, true, -100, 100},
    {"bitwise_right_shift", ct_bitwise_right_shift, false, true, -100, 100},
    {"clamp(min tensor)", clamp_lo, false, false, -5, 5},
    {"clamp(max tensor)", clamp_hi, false, false, -5, 5},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* The second operand: divisors without zeros for integer dtypes, shift counts in
 * [-3, 70] (past every width), else values like the first. */
static ct_tensor *second(const bcase *c, const int64_t *shape, int nd, ct_dtype dt, uint64_t seed) {
    if (c->shift) {
        ct_tensor *t = ct_test_values(shape, nd, CT_I64, -3, 71, seed);
        return ct_to_dtype(t, dt);
    }
    ct_tensor *t = ct_test_special(shape, nd, dt, c->lo, c->hi, seed);
    if (c->divides && !ct_dtype_is_floating(dt) && dt != CT_BOOL) {
        /* zeros become -1 (the overflow case of MIN / -1), or 7 for unsigned types */
        ct_tensor *z = ct_eq_scalar(t, ct_scalar_int(0));
        int64_t v = ct_dtype_is_signed(dt) ? -1 : 7;
        t = ct_where(z, ct_full(NULL, 0, ct_scalar_int(v), dt, CT_CPU), t);
    }
    return t;
}

static void run_case(const bcase *c, ct_dtype dt) {
    char what[160];
    ct_scope_begin();
    /* contiguous, long enough for the vector loop and its tail */
    ct_tensor *a = ct_test_special(CT_SHAPE(2053), dt, c->lo, c->hi, 11);
    ct_tensor *b = second(c, CT_SHAPE(2053), dt, 12);
    snprintf(what, sizeof what, "%s contiguous %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(a, b), c->f(ct_to_device(a, CUDA0), ct_to_device(b, CUDA0)));
    /* broadcast (37, 1) x (1, 41), then transposed and strided operands */
    ct_tensor *x = ct_test_special(CT_SHAPE(37, 1), dt, c->lo, c->hi, 13);
    ct_tensor *y = second(c, CT_SHAPE(1, 41), dt, 14);
    snprintf(what, sizeof what, "%s broadcast %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(x, y), c->f(ct_to_device(x, CUDA0), ct_to_device(y, CUDA0)));
    ct_tensor *m = ct_test_special(CT_SHAPE(20, 33), dt, c->lo, c->hi, 15);
    ct_tensor *n = second(c, CT_SHAPE(33, 40), dt, 16);
    ct_tensor *gm = ct_to_device(m, CUDA0), *gn = ct_to_device(n, CUDA0);
    snprintf(what, sizeof what, "%s strided %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(ct_t(m), ct_slice(n, 1, 0, 40, 2)), c->f(ct_t(gm), ct_slice(gn, 1, 0, 40, 2)));
    /* a row over a matrix, 0-d with 0-d, empty */
    ct_tensor *r = second(c, CT_SHAPE(33), dt, 17);
    snprintf(what, sizeof what, "%s row %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(m, r), c->f(gm, ct_to_device(r, CUDA0)));
    ct_tensor *s0 = ct_test_special(NULL, 0, dt, c->lo, c->hi, 18), *s1 = second(c, NULL, 0, dt, 19);
    snprintf(what, sizeof what, "%s 0-d %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(s0, s1), c->f(ct_to_device(s0, CUDA0), ct_to_device(s1, CUDA0)));
    /* a CPU 0-d tensor joins the GPU operand, as in PyTorch */
    snprintf(what, sizeof what, "%s cpu scalar %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(m, s1), c->f(gm, s1));
    ct_tensor *e = ct_zeros(CT_SHAPE(0, 33), dt, CT_CPU);
    snprintf(what, sizeof what, "%s empty %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(e, r), c->f(ct_to_device(e, CUDA0), ct_to_device(r, CUDA0)));
    ct_scope_end();
}

static void test_binary_all_dtypes(void **state) {
    (void)state;
    for (int o = 0; o < NCASES; o++)
        for (int d = 0; d < NDT; d++)
            run_case(&cases[o], all_dtypes[d]);
}

/* Mixed dtypes promote as on the CPU. */
static void test_mixed_dtypes(void **state) {
    (void)state;
    ct_scope_begin();
    const ct_dtype pairs[][2] = {{CT_I32, CT_F32}, {CT_U8, CT_I8}, {CT_F16, CT_BF16}, {CT_I64, CT_F64},
                                 {CT_BOOL, CT_I16}, {CT_U8, CT_F16}};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        ct_tensor *a = ct_test_special(CT_SHAPE(300), pairs[p][0], -20, 20, 21);
        ct_tensor *b = ct_test_special(CT_SHAPE(300), pairs[p][1], 1, 20, 22);
        ct_tensor *ga = ct_to_device(a, CUDA0), *gb = ct_to_device(b, CUDA0);
        CT_AGREE_ERR("remainder mixed", ct_remainder(a, b), ct_remainder(ga, gb));
        CT_AGREE_ERR("pow mixed", ct_pow(a, b), ct_pow(ga, gb));
        CT_AGREE_ERR("fmax mixed", ct_fmax(a, b), ct_fmax(ga, gb));
        CT_AGREE_ERR("logical_or mixed", ct_logical_or(a, b), ct_logical_or(ga, gb));
        CT_AGREE_ERR("atan2 mixed", ct_atan2(a, b), ct_atan2(ga, gb));
    }
    ct_scope_end();
}

/* pow(tensor, scalar) takes the CPU's shortcuts for the common exponents. */
static void test_pow_scalar(void **state) {
    (void)state;
    ct_scope_begin();
    const double exps[] = {2, 3, 0.5, -0.5, -1, -2, 1.7, 0, -3.25};
    ct_dtype dts[] = {CT_F16, CT_BF16, CT_F32, CT_F64, CT_I32, CT_U8};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        ct_tensor *a = ct_test_special(CT_SHAPE(1000), dts[d], 0, 9, 23);
        ct_tensor *g = ct_to_device(a, CUDA0);
        for (size_t e = 0; e < sizeof exps / sizeof exps[0]; e++) {
            char what[64];
            snprintf(what, sizeof what, "pow_scalar %g %s", exps[e], ct_dtype_name(dts[d]));
            ct_scalar s = exps[e] == floor(exps[e]) && exps[e] >= 0 ? ct_scalar_int((int64_t)exps[e])
                                                                    : ct_scalar_float(exps[e]);
            CT_AGREE_ERR(what, ct_pow_scalar(a, s), ct_pow_scalar(g, s));
        }
    }
    ct_scope_end();
}

/* The rounding divisions and remainders are exact: bit-equal results. */
static void test_exact(void **state) {
    (void)state;
    ct_scope_begin();
    ct_dtype dts[] = {CT_F16, CT_BF16, CT_F32, CT_F64, CT_I8, CT_I32, CT_I64, CT_U16};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        ct_tensor *a = ct_test_special(CT_SHAPE(4000), dts[d], -1000, 1000, 24);
        ct_tensor *b = ct_test_values(CT_SHAPE(4000), dts[d], 1, 37, 25); /* no zero divisors */
        ct_tensor *ga = ct_to_device(a, CUDA0), *gb = ct_to_device(b, CUDA0);
        CT_AGREE("floor_divide exact", ct_floor_divide(a, b), ct_floor_divide(ga, gb), 0);
        CT_AGREE("remainder exact", ct_remainder(a, b), ct_remainder(ga, gb), 0);
        CT_AGREE("fmod exact", ct_fmod(a, b), ct_fmod(ga, gb), 0);
        CT_AGREE("div trunc exact", div_trunc(a, b), div_trunc(ga, gb), 0);
        CT_AGREE("copysign exact", ct_copysign(a, b), ct_copysign(ga, gb), 0);
    }
    ct_scope_end();
}

static void test_inplace(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_test_special(CT_SHAPE(64, 48), CT_I32, -1000, 1000, 26);
    ct_tensor *b = ct_test_values(CT_SHAPE(48), CT_I32, 1, 9, 27); /* no zero divisors */
    ct_tensor *ca = ct_clone(a), *ga = ct_to_device(a, CUDA0), *gb = ct_to_device(b, CUDA0);
    CT_ASSERT_OK(ct_remainder_(ca, b));
    CT_ASSERT_OK(ct_remainder_(ga, gb));
    CT_AGREE("remainder_", ca, ga, 0);
    CT_ASSERT_OK(ct_bitwise_left_shift_(ca, b));
    CT_ASSERT_OK(ct_bitwise_left_shift_(ga, gb));
    CT_AGREE("bitwise_left_shift_", ca, ga, 0);
    CT_ASSERT_OK(ct_div_mode_(ca, b, CT_ROUNDING_MODE_FLOOR));
    CT_ASSERT_OK(ct_div_mode_(ga, gb, CT_ROUNDING_MODE_FLOOR));
    CT_AGREE("div_mode_ floor", ca, ga, 0);
    ct_scope_end();
}

/* Operands along dense rows of wider matrices move in 16-byte vectors (Note [Strided
 * rows] in src/cuda/elementwise.cuh): an add into each third of a (rows, 3n) matrix,
 * as the gradients of q, k and v slices are, a compare with a bool output, mixed
 * with a broadcast row; and the element path where a slice starts off a vector. The
 * results are the CPU's exactly. */
static void test_strided_rows(void **state) {
    (void)state;
    ct_scope_begin();
    const ct_dtype dts[3] = {CT_BF16, CT_F32, CT_F64};
    for (int k = 0; k < 3; k++) {
        ct_tensor *p = ct_test_values(CT_SHAPE(300, 3 * 96), dts[k], -3, 3, 40 + k);
        ct_tensor *g = ct_test_values(CT_SHAPE(300, 96), dts[k], -3, 3, 43 + k);
        ct_tensor *gp = ct_to_device(p, CUDA0), *gg = ct_to_device(g, CUDA0);
        for (int i = 0; i < 3; i++) {
            CT_ASSERT_OK(ct_add_(ct_narrow(p, 1, i * 96, 96), g));
            CT_ASSERT_OK(ct_add_(ct_narrow(gp, 1, i * 96, 96), gg));
        }
        CT_AGREE("add into thirds", p, gp, 0);
        ct_tensor *row = ct_narrow(g, 0, 7, 1), *grow = ct_narrow(gg, 0, 7, 1);
        CT_AGREE("mul of slice rows by a broadcast row", ct_mul(ct_narrow(p, 1, 96, 96), row),
                 ct_mul(ct_narrow(gp, 1, 96, 96), grow), 0);
        CT_AGREE("lt of slice rows", ct_lt(ct_narrow(p, 1, 0, 96), ct_narrow(p, 1, 192, 96)),
                 ct_lt(ct_narrow(gp, 1, 0, 96), ct_narrow(gp, 1, 192, 96)), 0);
        CT_AGREE("add of slices off a vector", ct_add(ct_narrow(p, 1, 1, 95), ct_narrow(p, 1, 97, 95)),
                 ct_add(ct_narrow(gp, 1, 1, 95), ct_narrow(gp, 1, 97, 95)), 0);
        CT_AGREE("sub of transposed slices", ct_sub(ct_t(ct_narrow(p, 1, 0, 96)), ct_t(g)),
                 ct_sub(ct_t(ct_narrow(gp, 1, 0, 96)), ct_t(gg)), 0);
    }
    ct_scope_end();
}

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *i = ct_to_device(ct_test_special(CT_SHAPE(100), CT_I32, -5, 5, 28), CUDA0);
    ct_tensor *z = ct_to_device(ct_zeros(CT_SHAPE(100), CT_I32, CT_CPU), CUDA0);
    ct_tensor *f = ct_to_device(ct_ones(CT_SHAPE(100), CT_F32, CT_CPU), CUDA0);
    /* integer division by zero is an error on the GPU too (a scan before the launch) */
    CT_ASSERT_ERR(ct_floor_divide(i, z) != NULL, CT_ERROR_VALUE, "ZeroDivisionError");
    CT_ASSERT_ERR(ct_remainder(i, z) != NULL, CT_ERROR_VALUE, "ZeroDivisionError");
    CT_ASSERT_ERR(ct_fmod(i, z) != NULL, CT_ERROR_VALUE, "ZeroDivisionError");
    CT_ASSERT_ERR(ct_div_mode(i, z, CT_ROUNDING_MODE_TRUNC) != NULL, CT_ERROR_VALUE, "ZeroDivisionError");
    CT_ASSERT_ERR(ct_floor_divide_scalar(i, ct_scalar_int(0)) != NULL, CT_ERROR_VALUE, "ZeroDivisionError");
    /* one zero in a strided divisor */
    ct_tensor *one0 = ct_to_device(ct_ones(CT_SHAPE(10, 10), CT_I64, CT_CPU), CUDA0);
    CT_ASSERT_OK(ct_fill_(ct_select(ct_select(one0, 0, 7), 0, 3), ct_scalar_int(0)));
    CT_ASSERT_ERR(ct_remainder(ct_t(one0), ct_t(one0)) != NULL, CT_ERROR_VALUE, "ZeroDivisionError");
    /* float division by zero is inf/NaN, no error */
    CT_ASSERT_OK(ct_floor_divide(f, ct_to_dtype(z, CT_F32)));
    CT_ASSERT_ERR(ct_bitwise_and(f, f) != NULL, CT_ERROR_TYPE, "not implemented for 'float32'");
    CT_ASSERT_ERR(ct_bitwise_left_shift(f, f) != NULL, CT_ERROR_TYPE, "float32");
    CT_ASSERT_ERR(ct_div_mode(i, i, (ct_rounding_mode)7) != NULL, CT_ERROR_VALUE, "rounding_mode");
    CT_ASSERT_ERR(ct_pow_scalar(i, ct_scalar_int(-1)) != NULL, CT_ERROR_VALUE, "negative integer powers");
    CT_ASSERT_ERR(ct_atan2(f, ct_ones(CT_SHAPE(100), CT_F32, CT_CPU)) != NULL, CT_ERROR_DEVICE, "same device");
    CT_ASSERT_ERR(ct_hypot(f, ct_to_device(ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), CUDA0)) != NULL, CT_ERROR_VALUE,
                  "must match the size");
    ct_scope_end();
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_binary");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary_all_dtypes), cmocka_unit_test(test_mixed_dtypes),
        cmocka_unit_test(test_pow_scalar),        cmocka_unit_test(test_exact),
        cmocka_unit_test(test_inplace),           cmocka_unit_test(test_errors),
        cmocka_unit_test(test_strided_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
