/* Double backward through conv2d and conv_transpose2d (Note [Conv double backward]):
 * second derivatives against PyTorch (tests/data/conv_double_backward_golden.txt,
 * tests/golden/gen_conv_double_backward.py) and gradgradcheck over strides, padding,
 * dilation and groups. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *line_buf;
static size_t line_cap;

/* Reads the next line "name v0 v1 ..." into a float64 tensor of the given shape. */
static ct_tensor *next_tensor(FILE *f, const char *want, const int64_t *shape, int nd) {
    assert_true(getline(&line_buf, &line_cap, f) > 0);
    char *save = NULL, *tok = strtok_r(line_buf, " \n", &save);
    assert_non_null(tok);
    assert_string_equal(tok, want);
    int64_t n = 0, cap = 64;
    double *v = malloc((size_t)cap * sizeof *v);
    while ((tok = strtok_r(NULL, " \n", &save))) {
        if (n == cap)
            v = realloc(v, (size_t)(cap *= 2) * sizeof *v);
        v[n++] = strtod(tok, NULL);
    }
    ct_tensor *t = ct_from_data(v, shape, nd, CT_F64);
    free(v);
    CT_ASSERT_OK(t);
    assert_int_equal(ct_tensor_numel(t), n);
    return t;
}

static void expect_close(const ct_tensor *got, const ct_tensor *want, double tol, const char *what, int c) {
    assert_non_null(got);
    assert_int_equal(ct_tensor_numel(got), ct_tensor_numel(want));
    for (int64_t i = 0; i < ct_tensor_numel(want); i++) {
        double a = ct_test_at(got, i), b = ct_test_at(want, i);
        if (fabs(a - b) > tol * (1 + fabs(b)))
            fail_msg("case %d %s[%lld]: got %.17g want %.17g", c, what, (long long)i, a, b);
    }
}

static ct_tensor *rg(ct_tensor *t) {
    ct_tensor_set_requires_grad(t, true);
    return t;
}

static ct_tensor *dot_all(const ct_tensor *a, const ct_tensor *b) {
    return ct_sum(ct_mul(a, b), NULL, 0, false, CT_DTYPE_UNDEFINED);
}

static void test_against_pytorch(void **state) {
    (void)state;
    FILE *f = fopen(CT_TEST_DATA_DIR "/conv_double_backward_golden.txt", "r");
    assert_non_null(f);
    int ncase = 0;
    while (getline(&line_buf, &line_cap, f) > 0) {
        long h[21];
        char *p = line_buf;
        assert_int_equal(strncmp(p, "case ", 5), 0);
        p += 5;
        for (int i = 0; i < 21; i++)
            h[i] = strtol(p, &p, 10);
        bool tr = h[0];
        int64_t n = h[1], c = h[2], H = h[3], W = h[4], o = h[5], kh = h[6], kw = h[7];
        int64_t stride[2] = {h[8], h[9]}, pad[2] = {h[10], h[11]}, opad[2] = {h[12], h[13]}, dil[2] = {h[14], h[15]};
        int64_t groups = h[16], oh = h[19], ow = h[20];
        bool has_bias = h[17], batched = h[18];
        ct_scope_begin();
        int64_t xs[4] = {n, c, H, W}, ws[4] = {tr ? c : o, tr ? o / groups : c / groups, kh, kw}, bs[1] = {o};
        int64_t ys[4] = {n, o, oh, ow};
        ct_tensor *x = rg(next_tensor(f, "x", xs, 4)), *w = rg(next_tensor(f, "w", ws, 4));
        ct_tensor *b = has_bias ? rg(next_tensor(f, "b", bs, 1)) : NULL;
        ct_tensor *gy = rg(next_tensor(f, "gy", batched ? ys : ys + 1, batched ? 4 : 3));
        ct_tensor *vx = next_tensor(f, "vx", xs, 4), *vw = next_tensor(f, "vw", ws, 4);
        ct_tensor *vb = has_bias ? next_tensor(f, "vb", bs, 1) : NULL;
        ct_tensor *want_gx = next_tensor(f, "gx", xs, 4), *want_gw = next_tensor(f, "gw", ws, 4);
        ct_tensor *want_ggx = next_tensor(f, "ggx", xs, 4), *want_ggw = next_tensor(f, "ggw", ws, 4);
        ct_tensor *want_ggy = next_tensor(f, "ggy", batched ? ys : ys + 1, batched ? 4 : 3);
        ct_tensor *xi = batched ? x : ct_select(x, 0, 0);
        ct_tensor *y = tr ? ct_conv_transpose2d(xi, w, b, stride, pad, opad, groups, dil)
                          : ct_conv2d(xi, w, b, stride, pad, dil, groups);
        CT_ASSERT_OK(y);
        const ct_tensor *params[3] = {x, w, b}, *outs[1] = {y}, *gos[1] = {gy};
        ct_tensor *g[3] = {NULL};
        int np = has_bias ? 3 : 2;
        if (ct_autograd_grad(outs, 1, params, np, gos, false, true, false, g) != CT_OK)
            fail_msg("case %d: first backward: %s", ncase, ct_last_error());
        expect_close(g[0], want_gx, 1e-12, "gx", ncase);
        expect_close(g[1], want_gw, 1e-12, "gw", ncase);
        ct_tensor *s = ct_add(dot_all(g[0], vx), dot_all(g[1], vw));
        if (has_bias)
            s = ct_add(s, dot_all(g[2], vb));
        const ct_tensor *in2[3] = {x, w, gy}, *outs2[1] = {s};
        ct_tensor *gg[3] = {NULL};
        if (ct_autograd_grad(outs2, 1, in2, 3, NULL, false, false, false, gg) != CT_OK)
            fail_msg("case %d: double backward: %s", ncase, ct_last_error());
        expect_close(gg[0], want_ggx, 1e-12, "ggx", ncase);
        expect_close(gg[1], want_ggw, 1e-12, "ggw", ncase);
        expect_close(gg[2], want_ggy, 1e-12, "ggy", ncase);
        ct_scope_end();
        ncase++;
    }
    fclose(f);
    assert_int_equal(ncase, 6);
}

typedef struct {
    int64_t stride[2], pad[2], opad[2], dil[2], groups;
    bool transposed, batched;
} conv_args;

static ct_tensor *conv_fn(ct_tensor *const *in, int n, void *ud) {
    const conv_args *a = ud;
    const ct_tensor *x = a->batched ? in[0] : ct_select(in[0], 0, 0);
    const ct_tensor *b = n > 2 ? in[2] : NULL;
    return a->transposed ? ct_conv_transpose2d(x, in[1], b, a->stride, a->pad, a->opad, a->groups, a->dil)
                         : ct_conv2d(x, in[1], b, a->stride, a->pad, a->dil, a->groups);
}

static void check_conv(const conv_args *a, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t kh,
                       int64_t kw, bool bias) {
    ct_scope_begin();
    ct_tensor *in[3];
    in[0] = rg(ct_randn(CT_SHAPE(n, c, h, w), CT_F64, CT_CPU));
    int64_t ws[4] = {a->transposed ? c : o, a->transposed ? o / a->groups : c / a->groups, kh, kw};
    in[1] = rg(ct_randn(ws, 4, CT_F64, CT_CPU));
    in[2] = rg(ct_randn(CT_SHAPE(o), CT_F64, CT_CPU));
    int np = bias ? 3 : 2;
    if (ct_gradcheck(conv_fn, (void *)a, in, np, 1e-6, 1e-6, 1e-4) != CT_OK)
        fail_msg("gradcheck: %s", ct_last_error());
    if (ct_gradgradcheck(conv_fn, (void *)a, in, np, 1e-6, 1e-5, 1e-3) != CT_OK)
        fail_msg("gradgradcheck: %s", ct_last_error());
    ct_scope_end();
}

static void test_conv2d_gradgradcheck(void **state) {
    (void)state;
    ct_manual_seed(21);
    conv_args plain = {{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1, false, true};
    check_conv(&plain, 2, 2, 4, 4, 2, 2, 2, true);
    conv_args strided = {{2, 1}, {1, 0}, {0, 0}, {1, 1}, 1, false, true};
    check_conv(&strided, 1, 2, 5, 4, 3, 3, 2, false);
    conv_args dilated = {{1, 2}, {1, 1}, {0, 0}, {2, 1}, 1, false, true};
    check_conv(&dilated, 1, 1, 5, 5, 2, 2, 2, true);
    conv_args grouped = {{1, 1}, {0, 1}, {0, 0}, {1, 1}, 2, false, true};
    check_conv(&grouped, 2, 4, 3, 3, 4, 2, 2, true);
    conv_args unbatched = {{2, 2}, {1, 1}, {0, 0}, {1, 1}, 1, false, false};
    check_conv(&unbatched, 1, 2, 4, 4, 2, 3, 3, true);
}

static void test_conv_transpose2d_gradgradcheck(void **state) {
    (void)state;
    ct_manual_seed(22);
    conv_args plain = {{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1, true, true};
    check_conv(&plain, 1, 2, 3, 3, 2, 2, 2, true);
    conv_args strided = {{2, 1}, {1, 0}, {1, 0}, {1, 1}, 1, true, true};
    check_conv(&strided, 2, 2, 3, 2, 2, 3, 2, false);
    conv_args grouped = {{1, 2}, {0, 1}, {0, 1}, {2, 1}, 2, true, true};
    check_conv(&grouped, 1, 4, 3, 3, 2, 2, 2, true);
    /* unbatched with a bias (its gradient summed over dims 1 and 2), and its forward
     * equal to the batched one's */
    conv_args unbatched = {{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1, true, false};
    check_conv(&unbatched, 1, 2, 3, 3, 2, 2, 2, true);
    ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(1, 2, 3, 3), CT_F64, CT_CPU), *w = ct_randn(CT_SHAPE(2, 3, 2, 2), CT_F64, CT_CPU);
    ct_tensor *b = ct_randn(CT_SHAPE(3), CT_F64, CT_CPU);
    ct_tensor *yb = ct_conv_transpose2d(x, w, b, NULL, NULL, NULL, 1, NULL);
    ct_tensor *yu = ct_conv_transpose2d(ct_select(x, 0, 0), w, b, NULL, NULL, NULL, 1, NULL);
    CT_ASSERT_OK(yu);
    CT_ASSERT_SHAPE(yu, 3, 4, 4);
    expect_close(yu, ct_select(yb, 0, 0), 1e-14, "unbatched conv_transpose2d", -1);
    ct_scope_end();
}

/* A gradient penalty through a small conv net: d/dw of |d loss / d x|^2, compared
 * with central differences of the penalty itself. */
static ct_tensor *penalty(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    int64_t s[2] = {1, 1}, p[2] = {1, 1}, d[2] = {1, 1};
    ct_tensor *x = in[0], *w = in[1];
    ct_tensor *y = ct_conv2d(ct_tanh(ct_conv2d(x, w, NULL, s, p, d, 1)), w, NULL, s, p, d, 1);
    ct_tensor *l = ct_sum(ct_mul(y, y), NULL, 0, false, CT_DTYPE_UNDEFINED);
    const ct_tensor *outs[1] = {l}, *ins[1] = {x};
    ct_tensor *gx = NULL;
    if (ct_autograd_grad(outs, 1, ins, 1, NULL, false, true, false, &gx) != CT_OK)
        return NULL;
    return ct_sum(ct_mul(gx, gx), NULL, 0, false, CT_DTYPE_UNDEFINED);
}

static void test_gradient_penalty(void **state) {
    (void)state;
    ct_manual_seed(23);
    ct_scope_begin();
    ct_tensor *in[2] = {rg(ct_randn(CT_SHAPE(1, 2, 4, 4), CT_F64, CT_CPU)),
                        rg(ct_mul_scalar(ct_randn(CT_SHAPE(2, 2, 3, 3), CT_F64, CT_CPU), ct_scalar_float(0.3)))};
    if (ct_gradcheck(penalty, NULL, in, 2, 1e-6, 1e-6, 1e-4) != CT_OK)
        fail_msg("gradcheck of the penalty: %s", ct_last_error());
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_pytorch),
        cmocka_unit_test(test_conv2d_gradgradcheck),
        cmocka_unit_test(test_conv_transpose2d_gradgradcheck),
        cmocka_unit_test(test_gradient_penalty),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(line_buf);
    return rc;
}
