/* The fast CPU paths of conv2d, max_pool2d and relu's gradient against plain
 * float64 references written here: conv2d forward and backward over strides,
 * padding, dilation, groups, the 1x1 direct path, batches run image after image
 * (batch smaller than the thread count) and over threads; the 2x2 max pooling path
 * (NaN, ties, odd sizes, vector tails) and the general path it falls back to;
 * threshold_backward and the derivatives that now use these kernels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* A deterministic pseudo-random value in [-1, 1) (a fixed LCG: no global RNG state). */
static double lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / (double)(1ull << 52) - 1.0;
}

static ct_tensor *rand_tensor(const int64_t *shape, int nd, ct_dtype dt, uint64_t seed) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = lcg(&seed);
    ct_tensor *t = ct_to_dtype(ct_from_data(v, shape, nd, CT_F64), dt);
    free(v);
    return t;
}

/* Copies t (any dtype) into a fresh array of doubles. */
static double *doubles(const ct_tensor *t) {
    ct_tensor *c = ct_contiguous(ct_to_dtype(t, CT_F64));
    assert_non_null(c);
    int64_t n = ct_tensor_numel(c);
    double *r = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    memcpy(r, ct_tensor_data(c), sizeof(double) * (size_t)n);
    return r;
}

static void expect_near(const ct_tensor *t, const double *want, int64_t n, double tol, const char *what) {
    assert_non_null(t);
    assert_int_equal(ct_tensor_numel(t), n);
    double *got = doubles(t);
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("%s[%lld]: got %.10g want %.10g", what, (long long)i, got[i], want[i]);
    free(got);
}

/* ------------------------------------------------------------------ conv2d */

typedef struct {
    int64_t n, c, h, w, oc, kh, kw, s[2], p[2], d[2], groups;
    bool bias;
} conv_case;

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* y, and the gradients for grad_output gy, by the definition in float64. */
static void conv_reference(const conv_case *k, const double *x, const double *w, const double *b, const double *gy,
                           double *y, double *gx, double *gw, double *gb) {
    int64_t oh = out_size(k->h, k->kh, k->s[0], k->p[0], k->d[0]), ow = out_size(k->w, k->kw, k->s[1], k->p[1], k->d[1]);
    int64_t cg = k->c / k->groups, og = k->oc / k->groups;
    memset(gx, 0, sizeof(double) * (size_t)(k->n * k->c * k->h * k->w));
    memset(gw, 0, sizeof(double) * (size_t)(k->oc * cg * k->kh * k->kw));
    memset(gb, 0, sizeof(double) * (size_t)k->oc);
    for (int64_t n = 0; n < k->n; n++)
        for (int64_t o = 0; o < k->oc; o++)
            for (int64_t oy = 0; oy < oh; oy++)
                for (int64_t ox = 0; ox < ow; ox++) {
                    int64_t at = ((n * k->oc + o) * oh + oy) * ow + ox;
                    double acc = b ? b[o] : 0, g = gy[at];
                    gb[o] += g;
                    for (int64_t ci = 0; ci < cg; ci++)
                        for (int64_t i = 0; i < k->kh; i++)
                            for (int64_t j = 0; j < k->kw; j++) {
                                int64_t yy = oy * k->s[0] - k->p[0] + i * k->d[0];
                                int64_t xx = ox * k->s[1] - k->p[1] + j * k->d[1];
                                if (yy < 0 || yy >= k->h || xx < 0 || xx >= k->w)
                                    continue;
                                int64_t c = (o / og) * cg + ci;
                                int64_t xi = ((n * k->c + c) * k->h + yy) * k->w + xx;
                                int64_t wi = ((o * cg + ci) * k->kh + i) * k->kw + j;
                                acc += x[xi] * w[wi];
                                gx[xi] += g * w[wi];
                                gw[wi] += g * x[xi];
                            }
                    y[at] = acc;
                }
}

static void run_conv_case(const conv_case *k, ct_dtype dt, double tol, bool unbatched) {
    ct_scope_begin();
    int64_t cg = k->c / k->groups;
    int64_t oh = out_size(k->h, k->kh, k->s[0], k->p[0], k->d[0]), ow = out_size(k->w, k->kw, k->s[1], k->p[1], k->d[1]);
    ct_tensor *x = unbatched ? rand_tensor(CT_SHAPE(k->c, k->h, k->w), dt, 1)
                             : rand_tensor(CT_SHAPE(k->n, k->c, k->h, k->w), dt, 1);
    ct_tensor *w = rand_tensor(CT_SHAPE(k->oc, cg, k->kh, k->kw), dt, 2);
    ct_tensor *b = k->bias ? rand_tensor(CT_SHAPE(k->oc), dt, 3) : NULL;
    ct_tensor *gy = unbatched ? rand_tensor(CT_SHAPE(k->oc, oh, ow), dt, 4)
                              : rand_tensor(CT_SHAPE(k->n, k->oc, oh, ow), dt, 4);
    double *dx = doubles(x), *dw = doubles(w), *db = b ? doubles(b) : NULL, *dgy = doubles(gy);
    int64_t ny = k->n * k->oc * oh * ow, nx = k->n * k->c * k->h * k->w, nw = k->oc * cg * k->kh * k->kw;
    double *ry = malloc(sizeof(double) * (size_t)ny), *rgx = malloc(sizeof(double) * (size_t)nx);
    double *rgw = malloc(sizeof(double) * (size_t)nw), *rgb = malloc(sizeof(double) * (size_t)k->oc);
    conv_reference(k, dx, dw, db, dgy, ry, rgx, rgw, rgb);

    ct_tensor *y = ct_conv2d(x, w, b, k->s, k->p, k->d, k->groups);
    CT_ASSERT_OK(y);
    assert_int_equal(ct_tensor_dtype(y), dt);
    expect_near(y, ry, ny, tol, "conv2d");
    ct_tensor *gx = NULL, *gw = NULL, *gb = NULL;
    assert_int_equal(ct_conv2d_backward(gy, x, w, k->s, k->p, k->d, k->groups, &gx, &gw, k->bias ? &gb : NULL), CT_OK);
    expect_near(gx, rgx, nx, tol, "grad_input");
    expect_near(gw, rgw, nw, tol, "grad_weight");
    if (k->bias)
        expect_near(gb, rgb, k->oc, tol, "grad_bias");
    /* each gradient alone gives the same values (the weight gradient without the
     * input's, as for a first layer) */
    ct_tensor *gw_only = NULL, *gx_only = NULL;
    assert_int_equal(ct_conv2d_backward(gy, x, w, k->s, k->p, k->d, k->groups, NULL, &gw_only, NULL), CT_OK);
    expect_near(gw_only, rgw, nw, tol, "grad_weight alone");
    assert_int_equal(ct_conv2d_backward(gy, x, w, k->s, k->p, k->d, k->groups, &gx_only, NULL, NULL), CT_OK);
    expect_near(gx_only, rgx, nx, tol, "grad_input alone");
    free(dx), free(dw), free(db), free(dgy), free(ry), free(rgx), free(rgw), free(rgb);
    ct_scope_end();
}

static const conv_case conv_cases[] = {
    /* n  c   h   w  oc kh kw  stride  padding dilation groups bias */
    {5, 3, 9, 8, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},   /* the model's layers' shape */
    {4, 1, 28, 28, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true}, /* conv1: one input channel */
    {3, 4, 10, 11, 6, 3, 2, {2, 3}, {2, 1}, {1, 1}, 2, true}, /* strides, groups */
    {2, 2, 9, 9, 3, 3, 3, {1, 2}, {2, 2}, {2, 3}, 1, false},  /* dilation, padding beyond a kernel */
    {3, 6, 5, 7, 6, 1, 1, {1, 1}, {0, 0}, {1, 1}, 3, true},   /* 1x1 direct path, groups */
    {2, 4, 6, 6, 2, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, true},   /* 1x1 with stride: im2col */
    {1, 3, 7, 6, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},   /* one image: BLAS's threads */
    {3, 2, 4, 4, 3, 4, 4, {1, 1}, {0, 0}, {1, 1}, 1, true},   /* kernel as large as the input */
    {2, 2, 3, 3, 2, 3, 3, {1, 1}, {3, 3}, {1, 1}, 1, true},   /* output rows all padding at the edges */
};

static void test_conv_matches_reference(void **state) {
    (void)state;
    int saved = ct_get_num_threads();
    for (int threads = 1; threads <= 2; threads++) {
        ct_set_num_threads(threads);
        for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
            run_conv_case(&conv_cases[i], CT_F64, 1e-12, false);
            run_conv_case(&conv_cases[i], CT_F32, 2e-5, false);
        }
        conv_case one = conv_cases[0];
        one.n = 1;
        run_conv_case(&one, CT_F32, 2e-5, true); /* unbatched (C, H, W) input */
    }
    ct_set_num_threads(saved);
}

static void test_conv_empty_batch(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_zeros(CT_SHAPE(0, 2, 5, 5), CT_F32, CT_CPU);
    ct_tensor *w = rand_tensor(CT_SHAPE(3, 2, 3, 3), CT_F32, 7);
    ct_tensor *y = ct_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
    CT_ASSERT_SHAPE(y, 0, 3, 3, 3);
    ct_tensor *gx, *gw, *gb;
    assert_int_equal(ct_conv2d_backward(y, x, w, NULL, NULL, NULL, 1, &gx, &gw, &gb), CT_OK);
    CT_ASSERT_SHAPE(gx, 0, 2, 5, 5);
    for (int64_t i = 0; i < ct_tensor_numel(gw); i++)
        assert_true(ct_test_at(gw, i) == 0);
    for (int64_t i = 0; i < 3; i++)
        assert_true(ct_test_at(gb, i) == 0);
    ct_scope_end();
}

/* The conv layer's gradients through autograd equal conv2d_backward's. */
static void test_conv_autograd(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_tensor_set_requires_grad(rand_tensor(CT_SHAPE(3, 2, 6, 6), CT_F64, 11), true);
    ct_tensor *w = ct_tensor_set_requires_grad(rand_tensor(CT_SHAPE(4, 2, 3, 3), CT_F64, 12), true);
    ct_tensor *b = ct_tensor_set_requires_grad(rand_tensor(CT_SHAPE(4), CT_F64, 13), true);
    int64_t one[2] = {1, 1};
    ct_tensor *y = ct_conv2d(x, w, b, one, one, one, 1);
    ct_tensor *gy = rand_tensor(CT_SHAPE(3, 4, 6, 6), CT_F64, 14);
    const ct_tensor *outs[1] = {y}, *ins[3] = {x, w, b}, *gos[1] = {gy};
    ct_tensor *g[3];
    assert_int_equal(ct_autograd_grad(outs, 1, ins, 3, gos, false, false, false, g), CT_OK);
    ct_tensor *gx, *gw, *gb;
    assert_int_equal(ct_conv2d_backward(gy, x, w, one, one, one, 1, &gx, &gw, &gb), CT_OK);
    ct_tensor *want[3] = {gx, gw, gb};
    for (int i = 0; i < 3; i++) {
        double *d = doubles(want[i]);
        expect_near(g[i], d, ct_tensor_numel(want[i]), 0, "autograd gradient");
        free(d);
    }
    ct_scope_end();
}

/* ------------------------------------------------------------------ max_pool2d */

/* The general rule: windows scanned row by row, greater or first NaN wins. */
static void pool_reference(const double *x, int64_t planes, int64_t h, int64_t w, const int64_t *k, const int64_t *s,
                           const int64_t *p, int64_t oh, int64_t ow, double *y, int64_t *idx) {
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                double best = 0;
                int64_t at = -1;
                for (int64_t i = 0; i < k[0]; i++)
                    for (int64_t j = 0; j < k[1]; j++) {
                        int64_t yy = oy * s[0] - p[0] + i, xx = ox * s[1] - p[1] + j;
                        if (yy < 0 || yy >= h || xx < 0 || xx >= w)
                            continue;
                        double v = x[(pl * h + yy) * w + xx];
                        if (at < 0 || v > best || (isnan(v) && !isnan(best))) {
                            best = v;
                            at = yy * w + xx;
                        }
                    }
                y[(pl * oh + oy) * ow + ox] = best;
                idx[(pl * oh + oy) * ow + ox] = at;
            }
}

/* Values drawn from a few levels (many ties) with some NaN. */
static ct_tensor *pool_input(int64_t n, int64_t c, int64_t h, int64_t w, ct_dtype dt, uint64_t seed) {
    int64_t num = n * c * h * w;
    double *v = malloc(sizeof(double) * (size_t)num);
    for (int64_t i = 0; i < num; i++) {
        double r = lcg(&seed);
        v[i] = r > 0.93 ? NAN : floor(r * 4) / 4;
    }
    ct_tensor *t = ct_to_dtype(ct_from_data(v, CT_SHAPE(n, c, h, w), CT_F64), dt);
    free(v);
    return t;
}

static void run_pool_case(int64_t n, int64_t c, int64_t h, int64_t w, const int64_t *k, const int64_t *s,
                          const int64_t *p, bool ceil_mode, ct_dtype dt) {
    ct_scope_begin();
    ct_tensor *x = pool_input(n, c, h, w, dt, (uint64_t)(h * 131 + w));
    ct_tensor *idx = NULL;
    ct_tensor *y = ct_max_pool2d(x, k, s, p, NULL, ceil_mode, &idx);
    CT_ASSERT_OK(y);
    int64_t oh = ct_tensor_shape(y)[2], ow = ct_tensor_shape(y)[3];
    double *dx = doubles(x);
    double *ry = malloc(sizeof(double) * (size_t)(n * c * oh * ow));
    int64_t *ri = malloc(sizeof(int64_t) * (size_t)(n * c * oh * ow));
    pool_reference(dx, n * c, h, w, k, s, p, oh, ow, ry, ri);
    double *gy = doubles(y), *gi = doubles(idx);
    for (int64_t i = 0; i < n * c * oh * ow; i++) {
        if (isnan(ry[i]) != isnan(gy[i]) || (!isnan(ry[i]) && ry[i] != gy[i]) || gi[i] != (double)ri[i])
            fail_msg("max_pool2d %lldx%lld k%lld s%lld [%lld]: got %g at %g, want %g at %lld", (long long)h,
                     (long long)w, (long long)k[0], (long long)s[0], (long long)i, gy[i], gi[i], ry[i],
                     (long long)ri[i]);
    }
    /* backward: each output's gradient lands on its index */
    ct_tensor *g = rand_tensor(ct_tensor_shape(y), 4, dt, 5);
    double *dg = doubles(g), *want = calloc((size_t)(n * c * h * w), sizeof(double));
    for (int64_t i = 0; i < n * c * oh * ow; i++)
        want[(i / (oh * ow)) * h * w + ri[i]] += dg[i];
    expect_near(ct_max_pool2d_backward(g, x, idx), want, n * c * h * w, dt == CT_F64 ? 0 : 1e-6, "max_pool2d_backward");
    free(dx), free(ry), free(ri), free(gy), free(gi), free(dg), free(want);
    ct_scope_end();
}

static void test_pool_matches_reference(void **state) {
    (void)state;
    int64_t two[2] = {2, 2}, three[2] = {3, 3}, zero[2] = {0, 0}, one[2] = {1, 1}, k21[2] = {2, 1};
    ct_dtype dts[2] = {CT_F32, CT_F64};
    for (int d = 0; d < 2; d++) {
        /* the 2x2 path: widths that fill whole vectors, leave tails, odd input sizes */
        run_pool_case(3, 5, 28, 28, two, two, zero, false, dts[d]);
        run_pool_case(2, 3, 14, 14, two, two, zero, false, dts[d]);
        run_pool_case(2, 3, 7, 19, two, two, zero, false, dts[d]);
        run_pool_case(1, 2, 2, 2, two, two, zero, false, dts[d]);
        run_pool_case(1, 2, 5, 9, two, two, zero, true, dts[d]); /* ceil_mode: partial windows, general path */
        /* the general path */
        run_pool_case(2, 3, 9, 10, two, one, zero, false, dts[d]);
        run_pool_case(2, 3, 9, 10, three, two, one, false, dts[d]);
        run_pool_case(2, 3, 9, 10, k21, two, zero, false, dts[d]);
    }
    int saved = ct_get_num_threads();
    ct_set_num_threads(1);
    run_pool_case(3, 7, 12, 12, two, two, zero, false, CT_F32);
    ct_set_num_threads(saved);
}

/* NaN first, NaN after a larger value, and ties, in every position of a window. */
static void test_pool_2x2_rules(void **state) {
    (void)state;
    ct_scope_begin();
    /* one 2x8 plane: four windows */
    float v[16] = {1, 2, 5, 5, NAN, 9, 3, 4, /* row 0 */
                   2, 2, 5, 1, 9, NAN, 4, NAN /* row 1 */};
    ct_tensor *x = ct_from_data(v, CT_SHAPE(1, 1, 2, 8), CT_F32);
    int64_t k[2] = {2, 2};
    ct_tensor *idx;
    ct_tensor *y = ct_max_pool2d(x, k, NULL, NULL, NULL, false, &idx);
    CT_ASSERT_SHAPE(y, 1, 1, 1, 4);
    assert_true(ct_test_at(y, 0) == 2 && ct_test_at(idx, 0) == 1); /* tie 2, 2, 2: the first */
    assert_true(ct_test_at(y, 1) == 5 && ct_test_at(idx, 1) == 2); /* tie across rows: row 0 */
    assert_true(isnan(ct_test_at(y, 2)) && ct_test_at(idx, 2) == 4); /* first NaN stays */
    assert_true(isnan(ct_test_at(y, 3)) && ct_test_at(idx, 3) == 15); /* NaN after the max */
    ct_scope_end();
}

/* The max_pool2d derivative runs the backward kernel without create_graph and a
 * differentiable scatter with it: both give the same gradient. */
static void test_pool_autograd_paths_agree(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_tensor_set_requires_grad(rand_tensor(CT_SHAPE(2, 3, 6, 7), CT_F64, 21), true);
    int64_t k[2] = {2, 2};
    /* grad_output requires grad, so the create_graph gradient has history */
    ct_tensor *gy = ct_tensor_set_requires_grad(rand_tensor(CT_SHAPE(2, 3, 3, 3), CT_F64, 22), true);
    ct_tensor *g[2];
    for (int cg = 0; cg < 2; cg++) {
        ct_tensor *y = ct_max_pool2d(x, k, NULL, NULL, NULL, false, NULL);
        const ct_tensor *outs[1] = {y}, *ins[1] = {x}, *gos[1] = {gy};
        assert_int_equal(ct_autograd_grad(outs, 1, ins, 1, gos, false, cg == 1, false, &g[cg]), CT_OK);
    }
    assert_false(ct_tensor_requires_grad(g[0]));
    assert_true(ct_tensor_requires_grad(g[1]));
    double *want = doubles(g[1]);
    expect_near(g[0], want, 2 * 3 * 6 * 7, 0, "max_pool2d gradient");
    free(want);
    ct_scope_end();
}

/* ------------------------------------------------------------------ threshold_backward */

static void test_threshold_backward(void **state) {
    (void)state;
    ct_scope_begin();
    double xv[6] = {-1, 0, 0.5, NAN, 2, -0.0}, gv[6] = {10, 20, 30, 40, 50, 60};
    ct_dtype dts[4] = {CT_F32, CT_F64, CT_F16, CT_BF16};
    for (int d = 0; d < 4; d++) {
        ct_tensor *x = ct_to_dtype(ct_from_data(xv, CT_SHAPE(2, 3), CT_F64), dts[d]);
        ct_tensor *g = ct_to_dtype(ct_from_data(gv, CT_SHAPE(2, 3), CT_F64), dts[d]);
        ct_tensor *r = ct_threshold_backward(g, x, ct_scalar_int(0));
        CT_ASSERT_OK(r);
        assert_int_equal(ct_tensor_dtype(r), dts[d]);
        double want[6] = {0, 0, 30, 40, 50, 0}; /* NaN input passes the gradient, as in PyTorch */
        expect_near(r, want, 6, 0, "threshold_backward");
        ct_tensor *r1 = ct_threshold_backward(g, x, ct_scalar_float(0.75));
        double want1[6] = {0, 0, 0, 40, 50, 0};
        expect_near(r1, want1, 6, 0, "threshold_backward at 0.75");
    }
    /* non-contiguous operands */
    ct_tensor *x = rand_tensor(CT_SHAPE(40, 30), CT_F32, 31), *g = rand_tensor(CT_SHAPE(30, 40), CT_F32, 32);
    ct_tensor *r = ct_threshold_backward(ct_transpose(g, 0, 1), x, ct_scalar_int(0));
    double *dx = doubles(x), *dg = doubles(ct_contiguous(ct_transpose(g, 0, 1)));
    for (int i = 0; i < 1200; i++)
        dg[i] = dx[i] <= 0 ? 0 : dg[i];
    expect_near(r, dg, 1200, 0, "threshold_backward strided");
    free(dx), free(dg);
    /* a large tensor runs over the threads */
    ct_tensor *bx = rand_tensor(CT_SHAPE(300000), CT_F32, 33), *bg = rand_tensor(CT_SHAPE(300000), CT_F32, 34);
    ct_tensor *br = ct_threshold_backward(bg, bx, ct_scalar_int(0));
    double *dbx = doubles(bx), *dbg = doubles(bg);
    for (int i = 0; i < 300000; i++)
        dbg[i] = dbx[i] <= 0 ? 0 : dbg[i];
    expect_near(br, dbg, 300000, 0, "threshold_backward large");
    free(dbx), free(dbg);
    /* META: shape and dtype only */
    ct_tensor *m = ct_threshold_backward(ct_empty(CT_SHAPE(4, 5), CT_F32, CT_META),
                                         ct_empty(CT_SHAPE(4, 5), CT_F32, CT_META), ct_scalar_int(0));
    CT_ASSERT_SHAPE(m, 4, 5);
    ct_scope_end();
}

static void test_threshold_backward_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_threshold_backward(NULL, a, ct_scalar_int(0)) != NULL, CT_ERROR_NULL_ARGUMENT, "NULL");
    CT_ASSERT_ERR(ct_threshold_backward(a, NULL, ct_scalar_int(0)) != NULL, CT_ERROR_NULL_ARGUMENT, "NULL");
    CT_ASSERT_ERR(ct_threshold_backward(a, ct_zeros(CT_SHAPE(3, 2), CT_F32, CT_CPU), ct_scalar_int(0)) != NULL,
                  CT_ERROR_VALUE, "shape");
    CT_ASSERT_ERR(ct_threshold_backward(a, ct_zeros(CT_SHAPE(2, 3), CT_F64, CT_CPU), ct_scalar_int(0)) != NULL,
                  CT_ERROR_TYPE, "same dtype");
    ct_tensor *i = ct_zeros(CT_SHAPE(2, 3), CT_I64, CT_CPU);
    CT_ASSERT_ERR(ct_threshold_backward(i, i, ct_scalar_int(0)) != NULL, CT_ERROR_TYPE, "not implemented");
    ct_scope_end();
}

/* relu's gradient through the fused kernel and through the differentiable formula
 * (create_graph) agree, and the second can be differentiated again. */
static void test_relu_gradient(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_tensor_set_requires_grad(rand_tensor(CT_SHAPE(5, 7), CT_F64, 41), true);
    ct_tensor *gy = rand_tensor(CT_SHAPE(5, 7), CT_F64, 42);
    ct_tensor *g[2];
    for (int cg = 0; cg < 2; cg++) {
        ct_tensor *y = ct_relu(x);
        const ct_tensor *outs[1] = {y}, *ins[1] = {x}, *gos[1] = {gy};
        assert_int_equal(ct_autograd_grad(outs, 1, ins, 1, gos, false, cg == 1, false, &g[cg]), CT_OK);
    }
    double *dx = doubles(x), *dg = doubles(gy);
    for (int i = 0; i < 35; i++)
        dg[i] = dx[i] > 0 ? dg[i] : 0;
    expect_near(g[0], dg, 35, 0, "relu gradient");
    expect_near(g[1], dg, 35, 0, "relu gradient with create_graph");
    free(dx), free(dg);
    /* float32 through the fused kernel too */
    ct_tensor *xf = ct_tensor_set_requires_grad(rand_tensor(CT_SHAPE(64), CT_F32, 43), true);
    ct_tensor *loss = ct_sum(ct_relu(xf), NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    ct_tensor *gf = ct_tensor_grad(xf);
    for (int i = 0; i < 64; i++)
        assert_true(ct_test_at(gf, i) == (ct_test_at(xf, i) > 0 ? 1.0 : 0.0));
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_matches_reference),
        cmocka_unit_test(test_conv_empty_batch),
        cmocka_unit_test(test_conv_autograd),
        cmocka_unit_test(test_pool_matches_reference),
        cmocka_unit_test(test_pool_2x2_rules),
        cmocka_unit_test(test_pool_autograd_paths_agree),
        cmocka_unit_test(test_threshold_backward),
        cmocka_unit_test(test_threshold_backward_errors),
        cmocka_unit_test(test_relu_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
