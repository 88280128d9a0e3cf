/* The float32 fast paths of the reductions: softmax/log_softmax rows (vector exp,
 * long rows split over threads, strided rows), the float32 sum's block kernel, and the
 * special values and thread-count independence they must keep. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "cpu/vecmath.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double unit(void) { return ct_test_unit(&rng); }

static float *rand_floats(int64_t n, double lo, double hi) {
    float *v = malloc((size_t)n * sizeof(float));
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(lo + (hi - lo) * unit());
    return v;
}

/* softmax (log_out false) or log_softmax of one row in double, from the float32
 * differences x - max that any float32 kernel (PyTorch's too) starts from. */
static void ref_row(const float *x, int64_t n, int64_t stride, bool log_out, double *y) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        m = x[i * stride] > m ? x[i * stride] : m;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += exp((double)(x[i * stride] - m));
    for (int64_t i = 0; i < n; i++) {
        double d = (double)(x[i * stride] - m);
        y[i] = log_out ? d - log(s) : exp(d) / s;
    }
}

/* Checks rows of r (rows x n, row stride rs, element stride es in x) against the double
 * reference. */
static void check_rows(const ct_tensor *r, const float *x, int64_t rows, int64_t n, int64_t rs, int64_t es,
                       bool log_out, const char *what) {
    const float *y = ct_tensor_data(r);
    assert_true(ct_tensor_is_contiguous(r));
    double *want = malloc((size_t)n * sizeof(double));
    assert_non_null(want);
    for (int64_t row = 0; row < rows; row++) {
        ref_row(x + row * rs, n, es, log_out, want);
        for (int64_t i = 0; i < n; i++) {
            double got = (double)y[row * n + i], w = want[i];
            /* SLEEF's float32 exp is within 1 ulp; the scaling adds a rounding or two. */
            double tol = log_out ? 1e-6 * (1 + fabs(w)) : 5e-7 * w + 1e-44;
            if (!(fabs(got - w) <= tol)) {
                fprintf(stderr, "%s: n=%lld row %lld elem %lld: got %.9g want %.9g\n", what, (long long)n,
                        (long long)row, (long long)i, got, w);
                fail();
            }
        }
    }
    free(want);
}

/* Row lengths around the vector widths (8, 16), the cascade block (256) and the
 * chunk of Note [Float32 softmax rows] (65536), where the split over threads starts. */
static const int64_t lengths[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 100, 255, 257, 1000, 4099, 65536, 65537, 200003};

static void test_softmax_rows(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        ct_scope_begin();
        int64_t n = lengths[k], rows = n > 5000 ? 1 : 3;
        float *x = rand_floats(rows * n, -20, 20);
        ct_tensor *t = ct_from_data(x, CT_SHAPE(rows, n), CT_F32);
        check_rows(ct_softmax(t, 1, CT_DTYPE_UNDEFINED), x, rows, n, n, 1, false, "softmax");
        check_rows(ct_log_softmax(t, 1, CT_DTYPE_UNDEFINED), x, rows, n, n, 1, true, "log_softmax");
        /* over dim 0 of the transpose: strided rows, gathered */
        ct_tensor *tt = ct_transpose(t, 0, 1);
        check_rows(ct_contiguous(ct_transpose(ct_softmax(tt, 0, CT_DTYPE_UNDEFINED), 0, 1)), x, rows, n, n, 1,
                   false, "softmax strided");
        check_rows(ct_contiguous(ct_transpose(ct_log_softmax(tt, 0, CT_DTYPE_UNDEFINED), 0, 1)), x, rows, n, n, 1,
                   true, "log_softmax strided");
        free(x);
        ct_scope_end();
    }
}

/* Strided rows take the contiguous rows' path: the same bits. */
static void test_softmax_strided_same_bits(void **state) {
    (void)state;
    ct_scope_begin();
    const int64_t rows = 37, n = 301;
    float *x = rand_floats(rows * n, -5, 5);
    ct_tensor *t = ct_from_data(x, CT_SHAPE(rows, n), CT_F32);
    ct_tensor *tt = ct_contiguous(ct_transpose(t, 0, 1)); /* n x rows */
    for (int lg = 0; lg < 2; lg++) {
        ct_tensor *a = lg ? ct_log_softmax(t, 1, CT_DTYPE_UNDEFINED) : ct_softmax(t, 1, CT_DTYPE_UNDEFINED);
        ct_tensor *b = lg ? ct_log_softmax(tt, 0, CT_DTYPE_UNDEFINED) : ct_softmax(tt, 0, CT_DTYPE_UNDEFINED);
        ct_tensor *bc = ct_contiguous(ct_transpose(b, 0, 1));
        assert_memory_equal(ct_tensor_data(a), ct_tensor_data(bc), (size_t)(rows * n) * sizeof(float));
    }
    /* a strided output too (out= a transposed view) */
    ct_tensor *o = ct_transpose(ct_empty(CT_SHAPE(n, rows), CT_F32, CT_CPU), 0, 1);
    CT_ASSERT_OK(ct_softmax_out(t, 1, CT_DTYPE_UNDEFINED, o));
    assert_memory_equal(ct_tensor_data(ct_softmax(t, 1, CT_DTYPE_UNDEFINED)), ct_tensor_data(ct_contiguous(o)),
                        (size_t)(rows * n) * sizeof(float));
    free(x);
    ct_scope_end();
}

/* NaN anywhere makes the row NaN; a row of -inf, or one with +inf, is NaN (inf - inf);
 * one finite value among -inf takes all the mass. Lengths cover the vector body and the
 * padded tail. */
static void test_softmax_special_rows(void **state) {
    (void)state;
    static const int64_t ns[] = {1, 5, 16, 21, 300, 70000};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        ct_scope_begin();
        int64_t n = ns[k];
        float *x = malloc((size_t)(6 * n) * sizeof(float));
        assert_non_null(x);
        for (int64_t i = 0; i < n; i++) {
            x[i] = (float)i;                       /* row 0: a NaN at the end */
            x[n + i] = -INFINITY;                  /* row 1: all -inf */
            x[2 * n + i] = (float)(i % 7);         /* row 2: +inf in the middle */
            x[3 * n + i] = -INFINITY;              /* row 3: one finite value */
            x[4 * n + i] = i % 2 ? 3e38f : -3e38f; /* row 4: huge values */
            x[5 * n + i] = (float)i;               /* row 5: a NaN first */
        }
        x[n - 1] = NAN;
        x[2 * n + n / 2] = INFINITY;
        x[3 * n + n / 3] = 2.5f;
        x[5 * n] = NAN;
        ct_tensor *t = ct_from_data(x, CT_SHAPE(6, n), CT_F32);
        for (int lg = 0; lg < 2; lg++) {
            ct_tensor *r = lg ? ct_log_softmax(t, 1, CT_DTYPE_UNDEFINED) : ct_softmax(t, 1, CT_DTYPE_UNDEFINED);
            const float *y = ct_tensor_data(r);
            int64_t nodd = n / 2;
            for (int64_t i = 0; i < n; i++) {
                assert_true(isnan(y[i]));
                assert_true(isnan(y[n + i]));
                assert_true(isnan(y[2 * n + i]));
                assert_true(isnan(y[5 * n + i]));
                float one = y[3 * n + i];
                if (i == n / 3)
                    assert_true(lg ? one == 0.0f : one == 1.0f);
                else
                    assert_true(lg ? isinf(one) && one < 0 : one == 0.0f);
                float h = y[4 * n + i];
                if (nodd == 0) { /* one -3e38 alone */
                    assert_true(lg ? h == 0.0f : h == 1.0f);
                } else if (i % 2) {
                    double w = lg ? -log((double)nodd) : 1.0 / (double)nodd;
                    assert_true(fabs(h - w) <= 1e-6 * fabs(w) + 1e-7);
                } else {
                    assert_true(lg ? isinf(h) && h < 0 : h == 0.0f);
                }
            }
        }
        free(x);
        ct_scope_end();
    }
}

/* The same values for any thread count: many short rows (split over the threads by
 * rows) and one long row (split by chunks). */
static void test_softmax_threads(void **state) {
    (void)state;
    int saved = ct_get_num_threads();
    ct_scope_begin();
    static const int64_t shapes[][2] = {{512, 129}, {1, 300001}, {3, 140000}};
    for (size_t k = 0; k < 3; k++) {
        int64_t rows = shapes[k][0], n = shapes[k][1];
        float *x = rand_floats(rows * n, -30, 30);
        ct_tensor *t = ct_from_data(x, CT_SHAPE(rows, n), CT_F32);
        size_t bytes = (size_t)(rows * n) * sizeof(float);
        for (int lg = 0; lg < 2; lg++) {
            ct_set_num_threads(1);
            ct_tensor *a = lg ? ct_log_softmax(t, 1, CT_DTYPE_UNDEFINED) : ct_softmax(t, 1, CT_DTYPE_UNDEFINED);
            for (int th = 2; th <= 3; th++) {
                ct_set_num_threads(th);
                ct_tensor *b = lg ? ct_log_softmax(t, 1, CT_DTYPE_UNDEFINED) : ct_softmax(t, 1, CT_DTYPE_UNDEFINED);
                assert_memory_equal(ct_tensor_data(a), ct_tensor_data(b), bytes);
            }
        }
        free(x);
    }
    ct_scope_end();
    ct_set_num_threads(saved);
}

/* ------------------------------------------------------------------ sum */

/* 2^24 + 16 ones: float32 lanes stay exact and the cascade carries on past 2^24, where
 * adding ones one at a time in float32 would stop at 2^24. */
static void test_sum_ones_past_2_24(void **state) {
    (void)state;
    ct_scope_begin();
    int64_t n = ((int64_t)1 << 24) + 16;
    ct_tensor *o = ct_ones(CT_SHAPE(n), CT_F32, CT_CPU);
    assert_true(ct_test_at(ct_sum(o, NULL, 0, false, CT_DTYPE_UNDEFINED), 0) == 16777232.0);
    assert_true(ct_test_at(ct_mean(o, NULL, 0, false, CT_DTYPE_UNDEFINED), 0) == 1.0);
    ct_scope_end();
}

/* Values over a wide dynamic range against a double sum: the error stays a few float32
 * ulp of the sum of magnitudes, which a plain float32 running sum would miss by far. */
static void test_sum_dynamic_range(void **state) {
    (void)state;
    ct_scope_begin();
    static const int64_t ns[] = {1, 255, 256, 257, 1023, 65536 * 3 + 77, 1000003};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int64_t n = ns[k];
        float *x = malloc((size_t)n * sizeof(float));
        assert_non_null(x);
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < n; i++) {
            double e = unit() * 16 - 8; /* magnitudes 1e-8 .. 1e8 */
            x[i] = (float)((unit() < 0.5 ? -1 : 1) * pow(10, e));
            ref += (double)x[i];
            mag += fabs((double)x[i]);
        }
        ct_tensor *t = ct_from_data(x, CT_SHAPE(n), CT_F32);
        double got = ct_test_at(ct_sum(t, NULL, 0, false, CT_DTYPE_UNDEFINED), 0);
        /* the float32 result's rounding, and the bound of sixteen-term float32 sums */
        if (!(fabs(got - ref) <= 6e-8 * fabs(ref) + 16 * 6e-8 * mag)) {
            fprintf(stderr, "n=%lld: got %.17g want %.17g (sum of magnitudes %.3g)\n", (long long)n, got, ref, mag);
            fail();
        }
        free(x);
    }
    /* 0.1 ten million times: plain float32 addition ends near 1.09e6 */
    int64_t n = 10000000;
    ct_tensor *t = ct_full(CT_SHAPE(n), ct_scalar_float(0.1), CT_F32, CT_CPU);
    double want = (double)n * (double)0.1f;
    assert_true(fabs(ct_test_at(ct_sum(t, NULL, 0, false, CT_DTYPE_UNDEFINED), 0) - want) <= 1e-6 * want);
    ct_scope_end();
}

/* Inner sums over rows of several lengths, contiguous or not, against double. */
static void test_sum_rows(void **state) {
    (void)state;
    ct_scope_begin();
    const int64_t rows = 5, n = 70001;
    float *x = rand_floats(rows * n, -1, 3);
    ct_tensor *t = ct_from_data(x, CT_SHAPE(rows, n), CT_F32);
    int64_t d1[] = {1}, d0[] = {0};
    ct_tensor *s = ct_sum(t, d1, 1, false, CT_DTYPE_UNDEFINED);
    ct_tensor *st = ct_sum(ct_transpose(t, 0, 1), d0, 1, false, CT_DTYPE_UNDEFINED);
    ct_tensor *sl = ct_sum(ct_slice(t, 1, 3, n - 5, 2), d1, 1, false, CT_DTYPE_UNDEFINED);
    for (int64_t r = 0; r < rows; r++) {
        double ref = 0, refs = 0, mag = 0;
        for (int64_t i = 0; i < n; i++) {
            ref += (double)x[r * n + i];
            mag += fabs((double)x[r * n + i]);
            if (i >= 3 && i < n - 5 && (i - 3) % 2 == 0)
                refs += (double)x[r * n + i];
        }
        double tol = 6e-8 * mag;
        assert_true(fabs(ct_test_at(s, r) - ref) <= tol);
        assert_true(fabs(ct_test_at(st, r) - ref) <= tol);
        assert_true(fabs(ct_test_at(sl, r) - refs) <= tol);
    }
    free(x);
    ct_scope_end();
}

static void test_sum_threads(void **state) {
    (void)state;
    int saved = ct_get_num_threads();
    ct_scope_begin();
    int64_t n = 3 * 65536 + 1234;
    float *x = rand_floats(n, -1, 1);
    ct_tensor *t = ct_from_data(x, CT_SHAPE(n), CT_F32);
    ct_set_num_threads(1);
    double a = ct_test_at(ct_sum(t, NULL, 0, false, CT_DTYPE_UNDEFINED), 0);
    for (int th = 2; th <= 3; th++) {
        ct_set_num_threads(th);
        assert_true(ct_test_at(ct_sum(t, NULL, 0, false, CT_DTYPE_UNDEFINED), 0) == a);
    }
    free(x);
    ct_scope_end();
    ct_set_num_threads(saved);
}

/* Every ISA's kernels against the reference order of Note [Float32 block sums]: the
 * block sums are bit-identical; max and the exp sum agree with plain loops. */
static void test_kernels_per_isa(void **state) {
    (void)state;
    const int64_t nblk = 23, n = nblk * CT_VM_SUM_BLK;
    float *x = rand_floats(n, -100, 100);
    for (int64_t i = 0; i < n; i += 97)
        x[i] *= 1e6f;
    double *want = malloc((size_t)nblk * sizeof(double)), *got = malloc((size_t)nblk * sizeof(double));
    float *e = malloc((size_t)n * sizeof(float));
    assert_non_null(want);
    assert_non_null(got);
    assert_non_null(e);
    ct_vm_blocksum_ref(want, x, nblk);
    static const char *isas[] = {"avx2", "avx512"};
    int tried = 0;
    for (int k = 0; k < 2; k++) {
        const ct_vm_red *vr = ct_vm_red_for(isas[k]);
        if (!vr)
            continue;
        tried++;
        for (int64_t nb = 0; nb <= nblk; nb += nb < 9 ? 1 : 7) {
            memset(got, 0, (size_t)nblk * sizeof(double));
            vr->blocksum_f32(got, x, nb);
            assert_memory_equal(got, want, (size_t)nb * sizeof(double));
        }
        for (int64_t len = 0; len <= 70; len++) {
            float m = -INFINITY;
            for (int64_t i = 0; i < len; i++)
                m = x[i + 3] > m ? x[i + 3] : m;
            assert_true(vr->max_f32(x + 3, len) == m);
            if (len > 0) {
                float keep = x[3 + len / 2];
                x[3 + len / 2] = NAN;
                assert_true(isnan(vr->max_f32(x + 3, len)));
                x[3 + len / 2] = keep;
            }
            e[len] = 12345.0f; /* the masked tail writes nothing past the row */
            double s = vr->expsum_f32(e, x + 3, len, m, NULL, NULL), ref = 0;
            assert_true(e[len] == 12345.0f);
            for (int64_t i = 0; i < len; i++) {
                double w = exp((double)(x[i + 3] - m));
                ref += w;
                assert_true(fabs((double)e[i] - w) <= 1.2e-7 * w + 1e-45);
            }
            assert_true(fabs(s - ref) <= 2e-7 * ref);
            assert_true(vr->expsum_f32(NULL, x + 3, len, m, NULL, NULL) == s);
            /* prefetching other rows changes nothing */
            assert_true(vr->expsum_f32(NULL, x + 3, len, m, x + 70, NULL) == s);
            assert_true(vr->expsum_f32(e, x + 3, len, m, x + 70, e + 100) == s);
        }
    }
    /* the ISA in use (none with CT_CPU_ISA=scalar) is one of those checked */
    if (ct_vm_red_get())
        assert_true(tried > 0);
    free(x);
    free(want);
    free(got);
    free(e);
}

/* ulp distance between two floats of one sign (both finite or equal infinities). */
static int64_t ulp_dist(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

/* Note [AVX-512 exp]: every ISA's exp gives the same bits (AVX-512's own routine and
 * SLEEF's AVX2 one) and is within 1 ulp of exp in double, over a sample of every
 * float's bit pattern and dense runs where the result overflows, turns subnormal and
 * underflows to zero; lengths with tails and the in-place call give the same bits. */
static void test_exp_per_isa(void **state) {
    (void)state;
    enum { RUN = 20000 };
    static const float centres[] = {88.7228f, -87.3365f, -103.2789f, -103.9721f, 0.0f, 1.0f, -1.0f, 0.34657f};
    const int64_t nsweep = 1 << 16, ncentre = sizeof centres / sizeof centres[0];
    const int64_t n = nsweep + ncentre * RUN + 8;
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float)),
          *z = malloc((size_t)n * sizeof(float));
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(z);
    int64_t k = 0;
    for (int64_t i = 0; i < nsweep; i++) { /* bit patterns 65537 apart */
        uint32_t b = (uint32_t)(i * 65537u);
        memcpy(&x[k++], &b, 4);
    }
    for (int64_t c = 0; c < ncentre; c++) {
        float v = centres[c];
        for (int j = 0; j < RUN / 2; j++)
            v = nextafterf(v, -INFINITY);
        for (int j = 0; j < RUN; j++, v = nextafterf(v, INFINITY))
            x[k++] = v;
    }
    const float special[8] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-45f, -1e-45f};
    memcpy(x + k, special, sizeof special);
    k += 8;
    assert_int_equal(k, n);

    static const char *isas[] = {"avx2", "avx512"};
    const float *first = NULL;
    for (int q = 0; q < 2; q++) {
        ct_vm_f32_fn f = ct_vm_get_for(isas[q], CT_VM_EXP);
        if (!f)
            continue;
        f(y, x, n);
        for (int64_t i = 0; i < n; i++) {
            double w = exp((double)x[i]);
            if (isnan(x[i]))
                assert_true(isnan(y[i]));
            else if (w > FLT_MAX)
                assert_true(y[i] == INFINITY || ulp_dist(y[i], FLT_MAX) <= 1);
            else
                assert_true(ulp_dist(y[i], (float)w) <= 1);
        }
        /* pieces of every length up to two vectors, then in place */
        for (int64_t len = 1; len <= 33; len++) {
            f(z, x + 100, len);
            assert_memory_equal(z, y + 100, (size_t)len * sizeof(float));
        }
        memcpy(z, x, (size_t)n * sizeof(float));
        f(z, z, n);
        assert_memory_equal(z, y, (size_t)n * sizeof(float));
        if (first) /* the ISAs agree bit for bit (NaN payloads aside) */
            for (int64_t i = 0; i < n; i++)
                assert_true(isnan(y[i]) ? isnan(first[i]) : memcmp(&y[i], &first[i], 4) == 0);
        else {
            float *keep = malloc((size_t)n * sizeof(float));
            assert_non_null(keep);
            memcpy(keep, y, (size_t)n * sizeof(float));
            first = keep; /* this ISA's results, for the next one */
        }
    }
    free((void *)first);
    free(x);
    free(y);
    free(z);
}

/* exp over a length that is no multiple of the vector width: the threads' pieces are
 * cut at multiples of 16 elements, and every element's value is the same for any
 * thread count (the vector routine's tail runs the same function). */
static void test_exp_threads(void **state) {
    (void)state;
    int saved = ct_get_num_threads();
    ct_scope_begin();
    int64_t n = 100003;
    float *x = rand_floats(n, -80, 80);
    ct_tensor *t = ct_from_data(x, CT_SHAPE(n), CT_F32);
    ct_set_num_threads(1);
    ct_tensor *a = ct_exp(t);
    const float *ya = ct_tensor_data(a);
    for (int64_t i = 0; i < n; i++) {
        double w = exp((double)x[i]);
        assert_true(fabs((double)ya[i] - w) <= 1.2e-7 * w);
    }
    for (int th = 2; th <= 3; th++) {
        ct_set_num_threads(th);
        ct_tensor *o = ct_empty(CT_SHAPE(n), CT_F32, CT_CPU);
        CT_ASSERT_OK(ct_exp_out(t, o));
        assert_memory_equal(ya, ct_tensor_data(o), (size_t)n * sizeof(float));
    }
    free(x);
    ct_scope_end();
    ct_set_num_threads(saved);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_rows),
        cmocka_unit_test(test_softmax_strided_same_bits),
        cmocka_unit_test(test_softmax_special_rows),
        cmocka_unit_test(test_softmax_threads),
        cmocka_unit_test(test_sum_ones_past_2_24),
        cmocka_unit_test(test_sum_dynamic_range),
        cmocka_unit_test(test_sum_rows),
        cmocka_unit_test(test_sum_threads),
        cmocka_unit_test(test_kernels_per_isa),
        cmocka_unit_test(test_exp_threads),
        cmocka_unit_test(test_exp_per_isa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
