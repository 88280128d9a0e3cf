/* gradcheck and gradgradcheck for the ops outside the elementwise OpInfo table, and a
 * check that every differentiable op of the table has a derivative. */
#include <math.h>
#include <string.h>

#include "autograd/node.h"
#include "testutil.h"

static uint64_t rng = 0x2545F4914F6CDD1DULL;
static double unit(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* A float64 leaf with values in [-1, 1]; transposed storage when strided. */
static ct_tensor *rand_leaf(const int64_t *shape, int ndim, bool strided) {
    ct_tensor *t;
    if (strided && ndim >= 2) {
        int64_t rs[CT_MAX_DIMS];
        memcpy(rs, shape, (size_t)ndim * sizeof *rs);
        rs[ndim - 1] = shape[ndim - 2];
        rs[ndim - 2] = shape[ndim - 1];
        t = ct_transpose(ct_empty(rs, ndim, CT_F64, CT_CPU), -1, -2);
    } else {
        t = ct_empty(shape, ndim, CT_F64, CT_CPU);
    }
    int64_t n = ct_tensor_numel(t);
    for (int64_t k = 0; k < n; k++) {
        int64_t idx[CT_MAX_DIMS], r = k;
        for (int d = ndim - 1; d >= 0; d--) {
            idx[d] = r % shape[d];
            r /= shape[d];
        }
        ct_tensor_set(t, idx, 2 * unit() - 1);
    }
    ct_tensor_set_requires_grad(t, true);
    return t;
}

static ct_tensor *f_mm(ct_tensor *const *in, int n, void *ud) { (void)n, (void)ud; return ct_mm(in[0], in[1]); }
static ct_tensor *f_bmm(ct_tensor *const *in, int n, void *ud) { (void)n, (void)ud; return ct_bmm(in[0], in[1]); }
static ct_tensor *f_dot(ct_tensor *const *in, int n, void *ud) { (void)n, (void)ud; return ct_dot(in[0], in[1]); }
static ct_tensor *f_addmm(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_addmm(in[0], in[1], in[2], ct_scalar_float(0.5), ct_scalar_float(-2));
}
static ct_tensor *f_addmm1(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_addmm(in[0], in[1], in[2], ct_scalar_int(1), ct_scalar_int(1));
}
static ct_tensor *f_baddbmm(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_baddbmm(in[0], in[1], in[2], ct_scalar_float(1.5), ct_scalar_float(0.25));
}

typedef struct {
    const char *name;
    ct_grad_fn_t fn;
    int n;
    int nd[3];
    int64_t shape[3][3];
} sample;

static const sample samples[] = {
    {"mm", f_mm, 2, {2, 2}, {{3, 4}, {4, 2}}},
    {"mm_1xk", f_mm, 2, {2, 2}, {{1, 3}, {3, 1}}},
    {"bmm", f_bmm, 2, {3, 3}, {{2, 3, 4}, {2, 4, 2}}},
    {"dot", f_dot, 2, {1, 1}, {{5}, {5}}},
    {"addmm", f_addmm, 3, {2, 2, 2}, {{3, 2}, {3, 4}, {4, 2}}},
    {"addmm_bias", f_addmm1, 3, {1, 2, 2}, {{2}, {3, 4}, {4, 2}}},
    {"addmm_scalar", f_addmm, 3, {0, 2, 2}, {{0}, {2, 3}, {3, 2}}},
    {"baddbmm", f_baddbmm, 3, {3, 3, 3}, {{2, 3, 2}, {2, 3, 4}, {2, 4, 2}}},
    {"baddbmm_bcast", f_baddbmm, 3, {2, 3, 3}, {{1, 2}, {2, 3, 4}, {2, 4, 2}}},
};

static void test_matrix_gradcheck(void **state) {
    (void)state;
    for (size_t s = 0; s < sizeof samples / sizeof samples[0]; s++)
        for (int strided = 0; strided < 2; strided++) {
            ct_scope_begin();
            ct_tensor *in[3];
            for (int i = 0; i < samples[s].n; i++)
                in[i] = rand_leaf(samples[s].shape[i], samples[s].nd[i], strided);
            if (ct_gradcheck(samples[s].fn, NULL, in, samples[s].n, 1e-6, 1e-6, 1e-4) != CT_OK)
                fail_msg("%s: %s", samples[s].name, ct_last_error());
            if (ct_gradgradcheck(samples[s].fn, NULL, in, samples[s].n, 1e-6, 1e-6, 1e-4) != CT_OK)
                fail_msg("%s (second order): %s", samples[s].name, ct_last_error());
            ct_scope_end();
        }
}

/* Note [Derivative table]: a differentiable op without a formula fails here (and
 * already at build time, through the table's X-macro). */
static void test_every_op_has_a_derivative(void **state) {
    (void)state;
    int checked = 0;
    for (int op = 0; op < CT_OP_COUNT; op++) {
        if (!ct_op_is_differentiable(op))
            continue;
        if (!ct_derivative_of(op))
            fail_msg("op %s has no derivative", ct_op_name(op));
        checked++;
    }
    assert_true(checked >= 21);
    assert_false(ct_op_is_differentiable(CT_OP_eq));
    assert_null(ct_derivative_of(CT_OP_lt));
}

/* gradcheck itself must catch a wrong derivative: here the first factor is detached,
 * so the analytical gradient of x*x is x instead of 2x. */
static ct_tensor *f_wrong(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_mul(ct_detach(in[0]), in[0]);
}

static ct_tensor *f_f32(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_to_dtype(in[0], CT_F32);
}

static void test_gradcheck_catches_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = rand_leaf(CT_SHAPE(3), false);
    ct_tensor *in[1] = {x};
    CT_ASSERT_ERR(ct_gradcheck(f_wrong, NULL, in, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_VALUE,
                  "Jacobian mismatch for output 0 with respect to input 0");
    CT_ASSERT_ERR(ct_gradcheck(f_f32, NULL, in, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_TYPE, "float64 outputs");
    CT_ASSERT_ERR(ct_gradcheck(NULL, NULL, in, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_NULL_ARGUMENT, "fn");
    CT_ASSERT_ERR(ct_gradgradcheck(NULL, NULL, in, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_NULL_ARGUMENT, "fn");
    CT_ASSERT_ERR(ct_gradcheck(f_mm, NULL, in, 0, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_VALUE, "input tensors");
    CT_ASSERT_ERR(ct_gradcheck(f_wrong, NULL, in, 1, 0, 1e-6, 1e-4) == CT_OK, CT_ERROR_VALUE, "eps");
    ct_tensor *nul[1] = {NULL};
    CT_ASSERT_ERR(ct_gradcheck(f_wrong, NULL, nul, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_NULL_ARGUMENT, "input 0");
    ct_tensor *f = ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU);
    ct_tensor_set_requires_grad(f, true);
    ct_tensor *fin[1] = {f};
    CT_ASSERT_ERR(ct_gradcheck(f_wrong, NULL, fin, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_TYPE, "float64");
    ct_tensor *plain[1] = {ct_zeros(CT_SHAPE(3), CT_F64, CT_CPU)};
    CT_ASSERT_ERR(ct_gradcheck(f_wrong, NULL, plain, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_VALUE,
                  "at least one input tensor to require gradient");
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix_gradcheck),
        cmocka_unit_test(test_every_op_has_a_derivative),
        cmocka_unit_test(test_gradcheck_catches_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
