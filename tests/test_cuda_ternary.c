/* The ternary ops of ternary.cu on the GPU against the CPU: clamp with scalar, tensor
 * and one-sided bounds (NaN bounds included), lerp with tensor and scalar weights,
 * addcmul and addcdiv with values, where with tensor and scalar operands and uint8
 * conditions; broadcast, strided, 0-d and empty layouts; every dtype the CPU
 * supports; in-place and out= forms; errors. Skipped (exit code 77) without a GPU. */
#include <string.h>

#include "cuda_testutil.h"

#define CUDA0 CT_CUDA(0)

static const ct_dtype all_dtypes[] = {CT_BOOL, CT_U8,  CT_I8,  CT_I16, CT_I32,  CT_I64, CT_U16,
                                      CT_U32,  CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64};
#define NDT ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

typedef ct_tensor *(*tern_fn)(const ct_tensor *, const ct_tensor *, const ct_tensor *);

static ct_tensor *clamp_t(const ct_tensor *a, const ct_tensor *b, const ct_tensor *c) { return ct_clamp_tensor(a, b, c); }
static ct_tensor *addcmul_v(const ct_tensor *a, const ct_tensor *b, const ct_tensor *c) {
    return ct_addcmul(a, b, c, ct_scalar_int(3));
}
static ct_tensor *addcmul_f(const ct_tensor *a, const ct_tensor *b, const ct_tensor *c) {
    return ct_addcmul(a, b, c, ct_scalar_float(0.375));
}
static ct_tensor *addcdiv_v(const ct_tensor *a, const ct_tensor *b, const ct_tensor *c) {
    return ct_addcdiv(a, b, c, ct_scalar_float(-1.5));
}
/* where's first operand is the condition: the sample's first input compared to 0 */
static ct_tensor *where_t(const ct_tensor *a, const ct_tensor *b, const ct_tensor *c) {
    return ct_where(ct_gt_scalar(a, ct_scalar_int(0)), b, c);
}
static ct_tensor *where_u8(const ct_tensor *a, const ct_tensor *b, const ct_tensor *c) {
    return ct_where(ct_to_dtype(ct_gt_scalar(a, ct_scalar_int(0)), CT_U8), b, c);
}

typedef struct {
    const char *name;
    tern_fn f;
    double lo, hi;
} tcase;

static const tcase cases[] = {
    {"clamp", clamp_t, -5, 5},         {"lerp", ct_lerp, -5, 5},         {"addcmul", addcmul_v, -20, 20},
    {"addcmul float value", addcmul_f, -20, 20}, {"addcdiv", addcdiv_v, -20, 20}, {"where", where_t, -5, 5},
    {"where uint8", where_u8, -5, 5},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static void run_case(const tcase *c, ct_dtype dt) {
    char what[160];
    ct_scope_begin();
    ct_tensor *a = ct_test_special(CT_SHAPE(1031), dt, c->lo, c->hi, 31);
    ct_tensor *b = ct_test_special(CT_SHAPE(1031), dt, c->lo, c->hi, 32);
    ct_tensor *w = ct_test_special(CT_SHAPE(1031), dt, c->lo, c->hi, 33);
    ct_tensor *ga = ct_to_device(a, CUDA0), *gb = ct_to_device(b, CUDA0), *gw = ct_to_device(w, CUDA0);
    snprintf(what, sizeof what, "%s contiguous %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(a, b, w), c->f(ga, gb, gw));
    /* broadcast: (7, 1, 5) x (1, 9, 1) x (9, 5) */
    ct_tensor *x = ct_test_special(CT_SHAPE(7, 1, 5), dt, c->lo, c->hi, 34);
    ct_tensor *y = ct_test_special(CT_SHAPE(1, 9, 1), dt, c->lo, c->hi, 35);
    ct_tensor *z = ct_test_special(CT_SHAPE(9, 5), dt, c->lo, c->hi, 36);
    snprintf(what, sizeof what, "%s broadcast %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(x, y, z), c->f(ct_to_device(x, CUDA0), ct_to_device(y, CUDA0), ct_to_device(z, CUDA0)));
    /* strided and transposed */
    ct_tensor *m = ct_test_special(CT_SHAPE(30, 20), dt, c->lo, c->hi, 37);
    ct_tensor *gm = ct_to_device(m, CUDA0);
    snprintf(what, sizeof what, "%s strided %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(ct_t(m), ct_slice(ct_t(m), 0, 0, 20, 1), ct_t(m)),
                 c->f(ct_t(gm), ct_slice(ct_t(gm), 0, 0, 20, 1), ct_t(gm)));
    CT_AGREE_ERR(what, c->f(ct_slice(m, 0, 0, 30, 3), ct_slice(m, 0, 1, 30, 3), ct_slice(m, 0, 2, 30, 3)),
                 c->f(ct_slice(gm, 0, 0, 30, 3), ct_slice(gm, 0, 1, 30, 3), ct_slice(gm, 0, 2, 30, 3)));
    /* 0-d with CPU scalars joining, and empty */
    ct_tensor *s = ct_test_special(NULL, 0, dt, c->lo, c->hi, 38);
    snprintf(what, sizeof what, "%s cpu scalars %s", c->name, ct_dtype_name(dt));
    CT_AGREE_ERR(what, c->f(m, s, m), c->f(gm, s, gm));
    ct_tensor *e = ct_zeros(CT_SHAPE(0, 20), dt, CT_CPU);
    snprintf(what, sizeof what, "%s empty %s", c->name, ct_dtype_name(dt));
    ct_tensor *ge = ct_to_device(e, CUDA0);
    CT_AGREE_ERR(what, c->f(e, e, e), c->f(ge, ge, ge));
    ct_scope_end();
}

static void test_ternary_all_dtypes(void **state) {
    (void)state;
    for (int o = 0; o < NCASES; o++)
        for (int d = 0; d < NDT; d++)
            run_case(&cases[o], all_dtypes[d]);
}

/* Scalar forms: clamp(a, min, max) with scalars and one-sided bounds, lerp with a
 * scalar weight, where with scalar operands. */
static void test_scalar_forms(void **state) {
    (void)state;
    ct_scope_begin();
    ct_dtype dts[] = {CT_I32, CT_U8, CT_F16, CT_BF16, CT_F32, CT_F64};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        ct_tensor *a = ct_test_special(CT_SHAPE(40, 50), dts[d], -9, 9, 41);
        ct_tensor *b = ct_test_special(CT_SHAPE(40, 50), dts[d], -9, 9, 42);
        ct_tensor *ga = ct_to_device(a, CUDA0), *gb = ct_to_device(b, CUDA0);
        ct_scalar lo = ct_scalar_int(-2), hi = ct_scalar_float(3.5), nanb = ct_scalar_float(NAN);
        CT_AGREE_ERR("clamp scalars", ct_clamp(a, &lo, &hi), ct_clamp(ga, &lo, &hi));
        CT_AGREE_ERR("clamp min only", ct_clamp(a, &lo, NULL), ct_clamp(ga, &lo, NULL));
        CT_AGREE_ERR("clamp max only", ct_clamp(a, NULL, &hi), ct_clamp(ga, NULL, &hi));
        CT_AGREE_ERR("clamp min > max", ct_clamp(a, &hi, &lo), ct_clamp(ga, &hi, &lo));
        CT_AGREE_ERR("clamp NaN bound", ct_clamp(a, &nanb, &hi), ct_clamp(ga, &nanb, &hi));
        CT_AGREE_ERR("lerp scalar weight", ct_lerp_scalar(a, b, ct_scalar_float(0.3)),
                     ct_lerp_scalar(ga, gb, ct_scalar_float(0.3)));
        CT_AGREE_ERR("lerp scalar weight high", ct_lerp_scalar(a, b, ct_scalar_float(0.8)),
                     ct_lerp_scalar(ga, gb, ct_scalar_float(0.8)));
        ct_tensor *cond = ct_lt(a, b), *gcond = ct_lt(ga, gb);
        CT_AGREE_ERR("where scalar_self", ct_where_scalar_self(cond, ct_scalar_float(1.25), b),
                     ct_where_scalar_self(gcond, ct_scalar_float(1.25), gb));
        CT_AGREE_ERR("where scalar_other", ct_where_scalar_other(cond, a, ct_scalar_int(-7)),
                     ct_where_scalar_other(gcond, ga, ct_scalar_int(-7)));
        CT_AGREE_ERR("where scalars", ct_where_scalars(cond, ct_scalar_int(2), ct_scalar_float(-0.5)),
                     ct_where_scalars(gcond, ct_scalar_int(2), ct_scalar_float(-0.5)));
    }
    /* where over values of different dtypes promotes them */
    ct_tensor *c = ct_test_special(CT_SHAPE(100), CT_BOOL, 0, 1, 43);
    ct_tensor *i = ct_test_special(CT_SHAPE(100), CT_I16, -9, 9, 44), *f = ct_test_special(CT_SHAPE(100), CT_BF16, -9, 9, 45);
    CT_AGREE_ERR("where promotes", ct_where(c, i, f),
                 ct_where(ct_to_device(c, CUDA0), ct_to_device(i, CUDA0), ct_to_device(f, CUDA0)));
    ct_scope_end();
}

/* lerp, clamp and where are exact (one fused multiply-add on both sides for lerp). */
static void test_exact(void **state) {
    (void)state;
    ct_scope_begin();
    ct_dtype dts[] = {CT_F16, CT_BF16, CT_F32, CT_F64};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        ct_tensor *a = ct_test_values(CT_SHAPE(3000), dts[d], -100, 100, 46);
        ct_tensor *b = ct_test_values(CT_SHAPE(3000), dts[d], -100, 100, 47);
        ct_tensor *w = ct_test_values(CT_SHAPE(3000), dts[d], -1, 2, 48);
        ct_tensor *ga = ct_to_device(a, CUDA0), *gb = ct_to_device(b, CUDA0), *gw = ct_to_device(w, CUDA0);
        CT_AGREE("lerp exact", ct_lerp(a, b, w), ct_lerp(ga, gb, gw), 0);
        CT_AGREE("clamp exact", ct_clamp_tensor(a, w, b), ct_clamp_tensor(ga, gw, gb), 0);
        CT_AGREE("addcmul exact", addcmul_f(a, b, w), addcmul_f(ga, gb, gw), 0);
        CT_AGREE("addcdiv exact", addcdiv_v(a, b, w), addcdiv_v(ga, gb, gw), 0);
    }
    ct_scope_end();
}

static void test_inplace_and_out(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_test_special(CT_SHAPE(64, 48), CT_F32, -9, 9, 49);
    ct_tensor *b = ct_test_special(CT_SHAPE(48), CT_F32, -9, 9, 50);
    ct_tensor *ca = ct_clone(a), *ga = ct_to_device(a, CUDA0), *gb = ct_to_device(b, CUDA0);
    CT_ASSERT_OK(ct_addcmul_(ca, b, b, ct_scalar_float(0.5)));
    CT_ASSERT_OK(ct_addcmul_(ga, gb, gb, ct_scalar_float(0.5)));
    CT_AGREE("addcmul_", ca, ga, 0);
    CT_ASSERT_OK(ct_lerp_(ca, b, b));
    CT_ASSERT_OK(ct_lerp_(ga, gb, gb));
    CT_AGREE("lerp_", ca, ga, 0);
    ct_tensor *out = ct_empty(CT_SHAPE(64, 48), CT_F64, CUDA0);
    CT_ASSERT_OK(ct_where_out(ct_gt(ga, gb), ga, gb, out));
    CT_AGREE("where_out", ct_to_dtype(ct_where(ct_gt(ca, b), ca, b), CT_F64), out, 0);
    ct_scope_end();
}

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *f = ct_to_device(ct_ones(CT_SHAPE(4), CT_F32, CT_CPU), CUDA0);
    ct_tensor *i = ct_to_device(ct_ones(CT_SHAPE(4), CT_I32, CT_CPU), CUDA0);
    ct_tensor *d = ct_to_device(ct_ones(CT_SHAPE(4), CT_F64, CT_CPU), CUDA0);
    CT_ASSERT_ERR(ct_where(f, f, f) != NULL, CT_ERROR_TYPE, "where expected condition to be a boolean tensor");
    CT_ASSERT_ERR(ct_lerp(f, d, f) != NULL, CT_ERROR_TYPE, "expected dtype float32 for `end`");
    CT_ASSERT_ERR(ct_addcdiv(f, i, i, ct_scalar_int(1)) != NULL, CT_ERROR_TYPE, "Integer division with addcdiv");
    CT_ASSERT_ERR(ct_clamp(f, NULL, NULL) != NULL, CT_ERROR_VALUE, "At least one of 'min' or 'max'");
    CT_ASSERT_ERR(ct_lerp(i, i, i) != NULL, CT_ERROR_TYPE, "int32");
    CT_ASSERT_ERR(ct_clamp_tensor(f, ct_ones(CT_SHAPE(4), CT_F32, CT_CPU), NULL) != NULL, CT_ERROR_DEVICE,
                  "same device");
    CT_ASSERT_ERR(ct_addcmul(f, f, ct_to_device(ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), CUDA0), ct_scalar_int(1)) != NULL,
                  CT_ERROR_VALUE, "must match the size");
    ct_scope_end();
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_ternary");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ternary_all_dtypes), cmocka_unit_test(test_scalar_forms),
        cmocka_unit_test(test_exact),              cmocka_unit_test(test_inplace_and_out),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
