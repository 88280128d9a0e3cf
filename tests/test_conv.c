/* conv2d and max_pool2d against PyTorch (tests/data/conv_golden.txt), in float64 and
 * float32, forward and backward; shape rules on META; error inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

typedef struct {
    char name[8];
    int64_t n;
    double *v;
} vec;

static char *line_buf;
static size_t line_cap;

static bool read_line(FILE *f) { return getline(&line_buf, &line_cap, f) > 0; }

/* Parses "name v0 v1 ..." into a freshly allocated vector. */
static vec parse_vec(const char *want) {
    vec r = {0};
    char *save = NULL, *tok = strtok_r(line_buf, " \n", &save);
    assert_non_null(tok);
    assert_string_equal(tok, want);
    snprintf(r.name, sizeof r.name, "%s", tok);
    size_t cap = 64;
    r.v = malloc(cap * sizeof(double));
    while ((tok = strtok_r(NULL, " \n", &save))) {
        if ((size_t)r.n == cap)
            r.v = realloc(r.v, (cap *= 2) * sizeof(double));
        r.v[r.n++] = strtod(tok, NULL);
    }
    return r;
}

static vec next_vec(FILE *f, const char *want) {
    assert_true(read_line(f));
    return parse_vec(want);
}

static ct_tensor *tensor_of(const vec *v, const int64_t *shape, int nd, ct_dtype dt) {
    ct_tensor *t = ct_from_data(v->v, shape, nd, CT_F64);
    assert_int_equal(ct_tensor_numel(t), v->n);
    return ct_to_dtype(t, dt);
}

static void expect_close(const ct_tensor *t, const vec *want, double tol, const char *what) {
    assert_non_null(t);
    assert_int_equal(ct_tensor_numel(t), want->n);
    ct_tensor *c = ct_contiguous(ct_to_dtype(t, CT_F64));
    const double *p = ct_tensor_data(c);
    for (int64_t i = 0; i < want->n; i++)
        if (fabs(p[i] - want->v[i]) > tol * (1 + fabs(want->v[i])))
            fail_msg("%s[%lld]: got %.17g want %.17g", what, (long long)i, p[i], want->v[i]);
}

static void run_conv(FILE *f, const long *h, ct_dtype dt, double tol) {
    int64_t n = h[0], c = h[1], H = h[2], W = h[3], o = h[4], kh = h[5], kw = h[6];
    int64_t stride[2] = {h[7], h[8]}, pad[2] = {h[9], h[10]}, dil[2] = {h[11], h[12]}, groups = h[13];
    bool has_bias = h[14], batched = h[15];
    vec x = next_vec(f, "x"), w = next_vec(f, "w"), b = {0};
    if (has_bias)
        b = next_vec(f, "b");
    vec y = next_vec(f, "y"), gy = next_vec(f, "gy"), gx = next_vec(f, "gx"), gw = next_vec(f, "gw"), gb = {0};
    if (has_bias)
        gb = next_vec(f, "gb");
    ct_scope_begin();
    ct_tensor *tx = batched ? tensor_of(&x, CT_SHAPE(n, c, H, W), dt) : tensor_of(&x, CT_SHAPE(c, H, W), dt);
    ct_tensor *tw = tensor_of(&w, CT_SHAPE(o, c / groups, kh, kw), dt);
    ct_tensor *tb = has_bias ? tensor_of(&b, CT_SHAPE(o), dt) : NULL;
    ct_tensor *ty = ct_conv2d(tx, tw, tb, stride, pad, dil, groups);
    CT_ASSERT_OK(ty);
    assert_int_equal(ct_tensor_dtype(ty), dt);
    expect_close(ty, &y, tol, "conv2d output");
    ct_tensor *tgy = tensor_of(&gy, ct_tensor_shape(ty), ct_tensor_dim(ty), dt);
    ct_tensor *rgx, *rgw, *rgb;
    assert_int_equal(ct_conv2d_backward(tgy, tx, tw, stride, pad, dil, groups, &rgx, &rgw, has_bias ? &rgb : NULL),
                     CT_OK);
    expect_close(rgx, &gx, tol, "conv2d grad_input");
    expect_close(rgw, &gw, tol, "conv2d grad_weight");
    if (has_bias)
        expect_close(rgb, &gb, tol, "conv2d grad_bias");
    /* META gives the same shapes without data */
    ct_tensor *mx = ct_empty(ct_tensor_shape(tx), ct_tensor_dim(tx), dt, CT_META);
    ct_tensor *mw = ct_empty(ct_tensor_shape(tw), 4, dt, CT_META);
    ct_tensor *my = ct_conv2d(mx, mw, NULL, stride, pad, dil, groups);
    CT_ASSERT_OK(my);
    assert_int_equal(ct_tensor_dim(my), ct_tensor_dim(ty));
    for (int i = 0; i < ct_tensor_dim(ty); i++)
        assert_int_equal(ct_tensor_shape(my)[i], ct_tensor_shape(ty)[i]);
    ct_scope_end();
    free(x.v), free(w.v), free(b.v), free(y.v), free(gy.v), free(gx.v), free(gw.v), free(gb.v);
}

static void run_pool(FILE *f, const long *h, ct_dtype dt, double tol) {
    int64_t n = h[0], c = h[1], H = h[2], W = h[3];
    int64_t k[2] = {h[4], h[5]}, stride[2] = {h[6], h[7]}, pad[2] = {h[8], h[9]}, dil[2] = {h[10], h[11]};
    bool ceil_mode = h[12], batched = h[13];
    vec x = next_vec(f, "x"), y = next_vec(f, "y"), idx = next_vec(f, "idx"), gy = next_vec(f, "gy"),
        gx = next_vec(f, "gx");
    ct_scope_begin();
    ct_tensor *tx = batched ? tensor_of(&x, CT_SHAPE(n, c, H, W), dt) : tensor_of(&x, CT_SHAPE(c, H, W), dt);
    ct_tensor *ti = NULL;
    ct_tensor *ty = ct_max_pool2d(tx, k, stride, pad, dil, ceil_mode, &ti);
    CT_ASSERT_OK(ty);
    expect_close(ty, &y, tol, "max_pool2d output");
    assert_int_equal(ct_tensor_dtype(ti), CT_I64);
    expect_close(ti, &idx, 0, "max_pool2d indices");
    ct_tensor *tgy = tensor_of(&gy, ct_tensor_shape(ty), ct_tensor_dim(ty), dt);
    expect_close(ct_max_pool2d_backward(tgy, tx, ti), &gx, tol, "max_pool2d grad_input");
    ct_scope_end();
    free(x.v), free(y.v), free(idx.v), free(gy.v), free(gx.v);
}

static void run_golden(ct_dtype dt, double tol) {
    FILE *f = fopen(CT_TEST_DATA_DIR "/conv_golden.txt", "r");
    assert_non_null(f);
    int convs = 0, pools = 0;
    while (read_line(f)) {
        long h[24];
        int k = 0;
        char kind[8];
        char *p = line_buf;
        int used;
        sscanf(p, "%7s%n", kind, &used);
        p += used;
        while (k < 24 && sscanf(p, "%ld%n", &h[k], &used) == 1) {
            p += used;
            k++;
        }
        if (strcmp(kind, "conv") == 0) {
            run_conv(f, h, dt, tol);
            convs++;
        } else if (strcmp(kind, "pool") == 0) {
            run_pool(f, h, dt, tol);
            pools++;
        } else {
            fail_msg("unexpected line: %.40s", line_buf);
        }
    }
    fclose(f);
    assert_true(convs >= 6 && pools >= 5);
}

static void test_golden_f64(void **state) {
    (void)state;
    run_golden(CT_F64, 1e-10);
}

static void test_golden_f32(void **state) {
    (void)state;
    run_golden(CT_F32, 2e-5);
}

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_zeros(CT_SHAPE(2, 3, 8, 8), CT_F32, CT_CPU);
    ct_tensor *w = ct_zeros(CT_SHAPE(4, 1, 3, 3), CT_F32, CT_CPU);
    int64_t one[2] = {1, 1}, zero[2] = {0, 0}, neg[2] = {-1, 0};
    CT_ASSERT_ERR(ct_conv2d(x, w, NULL, one, zero, one, 1) != NULL, CT_ERROR_VALUE,
                  "Given groups=1, weight of size [4, 1, 3, 3], expected input[2, 3, 8, 8] to have 1 channels, but got 3 channels instead");
    ct_tensor *w3 = ct_zeros(CT_SHAPE(4, 3, 3, 3), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_conv2d(x, w3, NULL, zero, zero, one, 1) != NULL, CT_ERROR_VALUE, "non-positive stride");
    CT_ASSERT_ERR(ct_conv2d(x, w3, NULL, one, neg, one, 1) != NULL, CT_ERROR_VALUE, "negative padding");
    CT_ASSERT_ERR(ct_conv2d(x, w3, ct_zeros(CT_SHAPE(5), CT_F32, CT_CPU), one, zero, one, 1) != NULL, CT_ERROR_VALUE,
                  "bias");
    CT_ASSERT_ERR(ct_conv2d(x, ct_zeros(CT_SHAPE(4, 3, 9, 9), CT_F32, CT_CPU), NULL, one, zero, one, 1) != NULL,
                  CT_ERROR_VALUE, "Kernel size can't be greater than actual input size");
    CT_ASSERT_ERR(ct_conv2d(x, ct_zeros(CT_SHAPE(4, 3, 3, 3), CT_F64, CT_CPU), NULL, one, zero, one, 1) != NULL,
                  CT_ERROR_TYPE, "should be the same");
    CT_ASSERT_ERR(ct_conv2d(ct_zeros(CT_SHAPE(8, 8), CT_F32, CT_CPU), w3, NULL, one, zero, one, 1) != NULL,
                  CT_ERROR_VALUE, "Expected 3D (unbatched) or 4D (batched) input");
    CT_ASSERT_ERR(ct_conv2d(x, w3, NULL, one, zero, one, 0) != NULL, CT_ERROR_VALUE, "groups");
    CT_ASSERT_ERR(ct_conv2d(NULL, w3, NULL, one, zero, one, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "conv2d");
    int64_t k2[2] = {2, 2}, k3[2] = {3, 3}, p2[2] = {2, 2};
    CT_ASSERT_ERR(ct_max_pool2d(x, k3, NULL, p2, NULL, false, NULL) != NULL, CT_ERROR_VALUE,
                  "pad should be at most half of effective kernel size, but got pad=2, kernel_size=3 and dilation=1");
    CT_ASSERT_ERR(ct_max_pool2d(ct_zeros(CT_SHAPE(1, 1, 1, 1), CT_F32, CT_CPU), k2, NULL, NULL, NULL, false, NULL) != NULL,
                  CT_ERROR_VALUE, "Output size is too small");
    CT_ASSERT_ERR(ct_max_pool2d(x, NULL, NULL, NULL, NULL, false, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "kernel");
    ct_tensor *idx = NULL;
    ct_tensor *y = ct_max_pool2d(x, k2, NULL, NULL, NULL, false, &idx);
    CT_ASSERT_SHAPE(y, 2, 3, 4, 4);
    ct_tensor *bad = ct_full(ct_tensor_shape(idx), 4, ct_scalar_int(1000), CT_I64, CT_CPU);
    CT_ASSERT_ERR(ct_max_pool2d_backward(y, x, bad) != NULL, CT_ERROR_INDEX, "out of bounds");
    CT_ASSERT_ERR(ct_max_pool2d_backward(y, x, ct_to_dtype(idx, CT_I32)) != NULL, CT_ERROR_TYPE, "int64");
    ct_scope_end();
}

static void test_nan_propagates(void **state) {
    (void)state;
    ct_scope_begin();
    float v[] = {1, NAN, 3, 4};
    ct_tensor *x = ct_from_data(v, CT_SHAPE(1, 1, 2, 2), CT_F32);
    int64_t k[2] = {2, 2};
    ct_tensor *idx;
    ct_tensor *y = ct_max_pool2d(x, k, NULL, NULL, NULL, false, &idx);
    assert_true(isnan(ct_test_at(y, 0)));
    assert_true(ct_test_at(idx, 0) == 1);
    ct_scope_end();
}

/* The 2x2 / stride 2 fast paths (AVX-512 in whole and partial rows of 16, SSE2, and
 * the scalar tail; CT_CPU_ISA=avx2 selects SSE2 in the second run of this program)
 * against a direct scan with PyTorch's rule: the first NaN wins, ties keep the first
 * position. Values come from a small set so ties are common. */
static void test_pool_fast_path(void **state) {
    (void)state;
    const int64_t widths[] = {2, 6, 14, 16, 18, 28, 32, 34, 40, 66};
    for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
        ct_scope_begin();
        int64_t n = 2, c = 3, h = 5, w = widths[wi], oh = h / 2, ow = w / 2;
        float *v = malloc(sizeof(float) * (size_t)(n * c * h * w));
        uint32_t r = 12345u + (uint32_t)wi;
        for (int64_t i = 0; i < n * c * h * w; i++) {
            r = r * 1664525u + 1013904223u;
            v[i] = (r >> 28) == 0 ? NAN : (float)((int)(r >> 24) % 5) - 2.0f;
        }
        ct_tensor *x = ct_from_data(v, CT_SHAPE(n, c, h, w), CT_F32);
        int64_t k[2] = {2, 2};
        ct_tensor *idx;
        ct_tensor *y = ct_max_pool2d(x, k, NULL, NULL, NULL, false, &idx);
        CT_ASSERT_OK(y);
        const float *py = ct_tensor_data(y);
        const int64_t *pi = ct_tensor_data(idx);
        for (int64_t p = 0; p < n * c; p++)
            for (int64_t oy = 0; oy < oh; oy++)
                for (int64_t ox = 0; ox < ow; ox++) {
                    const float *xp = v + p * h * w;
                    int64_t at = 2 * oy * w + 2 * ox;
                    float best = xp[at];
                    const int64_t cand[3] = {at + 1, at + w, at + w + 1};
                    for (int q = 0; q < 3; q++) {
                        float u = xp[cand[q]];
                        if (best == best && (u > best || u != u)) {
                            best = u;
                            at = cand[q];
                        }
                    }
                    int64_t o = (p * oh + oy) * ow + ox;
                    if (pi[o] != at || !(py[o] == best || (py[o] != py[o] && best != best)))
                        fail_msg("w=%lld plane %lld (%lld, %lld): got %g at %lld, want %g at %lld", (long long)w,
                                 (long long)p, (long long)oy, (long long)ox, py[o], (long long)pi[o], best,
                                 (long long)at);
                }
        /* backward: the gradient lands at the index and zero elsewhere; -0 becomes +0
         * (zero plus the gradient, as PyTorch's scatter). h is odd here, so a copy
         * with one row fewer gives windows that tile the plane (the AVX-512 path). */
        for (int tile = 0; tile < 2; tile++) {
            int64_t hh = tile ? h - 1 : h;
            ct_tensor *xt = tile ? ct_contiguous(ct_narrow(x, 2, 0, hh)) : x;
            ct_tensor *it;
            ct_tensor *yt = ct_max_pool2d(xt, k, NULL, NULL, NULL, false, &it);
            CT_ASSERT_OK(yt);
            int64_t no = ct_tensor_numel(yt);
            ct_tensor *gy = ct_randn(ct_tensor_shape(yt), 4, CT_F32, CT_CPU);
            float *pg = ct_tensor_data(gy);
            pg[0] = -0.0f;
            ct_tensor *gx = ct_max_pool2d_backward(gy, xt, it);
            CT_ASSERT_OK(gx);
            const float *px = ct_tensor_data(gx);
            const int64_t *ip = ct_tensor_data(it);
            float *want = calloc((size_t)(n * c * hh * w), sizeof(float));
            for (int64_t o = 0; o < no; o++)
                want[o / (oh * ow) * hh * w + ip[o]] += pg[o];
            for (int64_t i = 0; i < n * c * hh * w; i++)
                if (memcmp(&px[i], &want[i], sizeof(float)) != 0)
                    fail_msg("w=%lld h=%lld grad_input[%lld]: got %g want %g", (long long)w, (long long)hh,
                             (long long)i, px[i], want[i]);
            free(want);
        }
        free(v);
        ct_scope_end();
    }
}

/* Indices that do not name a position of their own 2x2 window (legal for
 * max_pool2d_backward, which scatters anywhere in the plane) leave the tiled fast
 * path for the general scatter, which adds every gradient at its index. */
static void test_pool_backward_any_index(void **state) {
    (void)state;
    ct_scope_begin();
    int64_t k[2] = {2, 2};
    ct_tensor *x = ct_randn(CT_SHAPE(1, 2, 4, 36), CT_F32, CT_CPU);
    ct_tensor *idx;
    ct_tensor *y = ct_max_pool2d(x, k, NULL, NULL, NULL, false, &idx);
    CT_ASSERT_OK(y);
    int64_t no = ct_tensor_numel(y);
    ct_tensor *gy = ct_ones_like(y, CT_F32);
    int64_t *ip = ct_tensor_data(idx);
    const int64_t *orig = ct_tensor_data(ct_clone(idx));
    for (int pos = 0; pos < 3; pos++) {
        /* input 5 lies outside the windows of outputs 3 and no - 1: one foreign index
         * in the first chunk of 16, one in the last, then all of them */
        for (int64_t o = 0; o < no; o++)
            ip[o] = pos == 2 ? 5 : orig[o];
        if (pos < 2)
            ip[pos == 0 ? 3 : no - 1] = 5;
        ct_tensor *gx = ct_max_pool2d_backward(gy, x, idx);
        CT_ASSERT_OK(gx);
        const float *px = ct_tensor_data(gx);
        float want[2 * 4 * 36] = {0};
        for (int64_t o = 0; o < no; o++)
            want[o / (no / 2) * 144 + ip[o]] += 1;
        for (int i = 0; i < 2 * 4 * 36; i++)
            if (px[i] != want[i])
                fail_msg("case %d grad_input[%d]: got %g want %g", pos, i, px[i], want[i]);
    }
    ct_scope_end();
}

static int teardown(void **state) {
    (void)state;
    free(line_buf);
    line_buf = NULL;
    line_cap = 0;
    return 0;
}

/* Every element of got equals want (bit-exact integers). */
static void assert_same_ints(const ct_tensor *got, const ct_tensor *want, const char *what) {
    CT_ASSERT_OK(got);
    assert_int_equal(ct_tensor_dtype(got), ct_tensor_dtype(want));
    assert_int_equal(ct_tensor_numel(got), ct_tensor_numel(want));
    for (int64_t k = 0; k < ct_tensor_numel(want); k++)
        if (ct_test_at(got, k) != ct_test_at(want, k))
            fail_msg("%s: element %lld is %g, want %g", what, (long long)k, ct_test_at(got, k), ct_test_at(want, k));
}

/* Integer conv2d, conv_transpose2d and avg_pool2d (Note [Integer convolution]) against
 * the float64 kernels on the same values: exact there, then wrapped to the dtype by
 * the cast (int8 sums overflow on purpose); avg_pool2d divides with truncation. */
static void test_integer_conv_and_pool(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(7);
    const ct_dtype dts[] = {CT_U8, CT_I8, CT_I16, CT_I32, CT_I64, CT_U16, CT_U32, CT_U64};
    /* stride, padding, dilation, groups */
    const int64_t geoms[][7] = {{1, 1, 0, 0, 1, 1, 1}, {2, 1, 1, 2, 1, 1, 1}, {1, 2, 2, 1, 2, 1, 2},
                                {2, 2, 0, 1, 1, 2, 3}};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++) {
            const int64_t *gm = geoms[gi];
            int64_t groups = gm[6], s[2] = {gm[0], gm[1]}, p[2] = {gm[2], gm[3]}, dl[2] = {gm[4], gm[5]};
            /* negative samples wrap to large values, which float64 holds exactly up to 16 bits */
            int64_t lo = dts[d] == CT_U32 || dts[d] == CT_U64 ? 0 : -128;
            ct_tensor *x = ct_randint(lo, 128, CT_SHAPE(2, 3 * groups, 7, 6), CT_I64, CT_CPU);
            ct_tensor *w = ct_randint(lo, 128, CT_SHAPE(2 * groups, 3, 3, 2), CT_I64, CT_CPU);
            ct_tensor *b = ct_randint(lo, 128, CT_SHAPE(2 * groups), CT_I64, CT_CPU);
            ct_tensor *xd = ct_to_dtype(x, dts[d]), *wd = ct_to_dtype(w, dts[d]), *bd = ct_to_dtype(b, dts[d]);
            /* the reference: float64 on the dtype's values, exact, then wrapped */
            ct_tensor *xf = ct_to_dtype(xd, CT_F64), *wf = ct_to_dtype(wd, CT_F64), *bf = ct_to_dtype(bd, CT_F64);
            ct_tensor *want = ct_to_dtype(ct_to_dtype(ct_conv2d(xf, wf, bf, s, p, dl, groups), CT_I64), dts[d]);
            assert_same_ints(ct_conv2d(xd, wd, bd, s, p, dl, groups), want, "conv2d");
            int64_t zero[2] = {0, 0};
            ct_tensor *wt = ct_transpose(ct_reshape(wd, CT_SHAPE(groups, 2, 3, 3, 2)), 1, 2);
            wt = ct_reshape(ct_contiguous(wt), CT_SHAPE(3 * groups, 2, 3, 2));
            ct_tensor *wtf = ct_to_dtype(wt, CT_F64);
            want = ct_to_dtype(ct_to_dtype(ct_conv_transpose2d(xf, wtf, NULL, s, p, zero, groups, dl), CT_I64),
                               dts[d]);
            assert_same_ints(ct_conv_transpose2d(xd, wt, NULL, s, p, zero, groups, dl), want, "conv_transpose2d");
            int64_t k[2] = {3, 2}, ps[2] = {1, 1};
            for (int mode = 0; mode < 4; mode++) {
                bool ceil = mode & 1, incl = mode & 2;
                ct_tensor *af = ct_avg_pool2d(xf, k, s, ps, ceil, incl, gi == 3 ? 5 : 0);
                ct_tensor *ai = ct_avg_pool2d(xd, k, s, ps, ceil, incl, gi == 3 ? 5 : 0);
                assert_same_ints(ai, ct_to_dtype(ct_trunc(af), dts[d]), "avg_pool2d");
            }
        }
    /* int8 wraps: 100 * 3 + 127 * 5 = 935 = 167 - 3 * 256 ... as the dtype computes it */
    int8_t xv[4] = {100, -100, 127, 3}, wv[4] = {3, 1, 5, -2};
    ct_tensor *y = ct_conv2d(ct_from_data(xv, CT_SHAPE(1, 1, 2, 2), CT_I8), ct_from_data(wv, CT_SHAPE(1, 1, 2, 2), CT_I8),
                             NULL, (int64_t[]){1, 1}, (int64_t[]){0, 0}, (int64_t[]){1, 1}, 1);
    assert_int_equal(ct_tensor_dtype(y), CT_I8);
    assert_true(ct_test_at(y, 0) == (double)(int8_t)(300 - 100 + 635 - 6));
    /* bool is refused; the backward of avg_pool2d stays floating */
    ct_tensor *bx = ct_zeros(CT_SHAPE(1, 1, 3, 3), CT_BOOL, CT_CPU);
    CT_ASSERT_ERR(ct_conv2d(bx, ct_zeros(CT_SHAPE(1, 1, 2, 2), CT_BOOL, CT_CPU), NULL, (int64_t[]){1, 1},
                            (int64_t[]){0, 0}, (int64_t[]){1, 1}, 1) != NULL,
                  CT_ERROR_TYPE, "not implemented for 'bool'");
    CT_ASSERT_ERR(ct_avg_pool2d(bx, (int64_t[]){2, 2}, NULL, (int64_t[]){0, 0}, false, true, 0) != NULL,
                  CT_ERROR_TYPE, "not implemented for 'bool'");
    ct_tensor *ix = ct_zeros(CT_SHAPE(1, 1, 4, 4), CT_I64, CT_CPU);
    ct_tensor *iy = ct_avg_pool2d(ix, (int64_t[]){2, 2}, NULL, (int64_t[]){0, 0}, false, true, 0);
    CT_ASSERT_ERR(ct_avg_pool2d_backward(iy, ix, (int64_t[]){2, 2}, NULL, (int64_t[]){0, 0}, false, true, 0) != NULL,
                  CT_ERROR_TYPE, "int64");
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_f64),
        cmocka_unit_test(test_golden_f32),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_nan_propagates),
        cmocka_unit_test(test_pool_fast_path),
        cmocka_unit_test(test_pool_backward_any_index),
        cmocka_unit_test(test_integer_conv_and_pool),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
