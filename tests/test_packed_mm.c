/* ct_packed_mm (ctorch/ext.h): products with prepacked right operands match ct_mm for
 * every layout the recurrent layers use, fall back to ct_mm_out where the packed
 * kernel does not apply, and refuse bad arguments. CT_PACKED_MM=1 packs even where
 * oneDNN has no brgemm kernel, so the packed path runs on any CPU of a oneDNN build. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "ctorch/ext.h"

static bool have_onednn(void) { return strstr(ct_build_info(), "float32 GEMM: oneDNN") != NULL; }

static ct_tensor *randn(int64_t r, int64_t c, ct_dtype dt) {
    return ct_randn(CT_SHAPE(r, c), dt, CT_CPU);
}

static double max_rel_diff(const ct_tensor *a, const ct_tensor *b) {
    double m = 0, scale = 1e-30;
    for (int64_t i = 0; i < ct_tensor_numel(b); i++) {
        double x = ct_test_at(a, i), y = ct_test_at(b, i);
        m = fmax(m, fabs(x - y));
        scale = fmax(scale, fabs(y));
    }
    return m / scale;
}

/* rows x k @ (k x n): w as a matrix of its own or as the transpose of an (n, k) one (the
 * forward's W_hh^T), a and out as rows of wider buffers (the padded gate gradients),
 * three products in a row with new left operands. */
static void check_shapes(int64_t rows, int64_t k, int64_t n, bool transposed, int64_t pad, bool expect_packed) {
    ct_scope_begin();
    ct_tensor *w = transposed ? ct_t(randn(n, k, CT_F32)) : randn(k, n, CT_F32);
    ct_packed_mm *p = ct_packed_mm_new(w, rows);
    assert_non_null(p);
    assert_false(ct_packed_mm_is_packed(p));
    ct_tensor *abuf = randn(rows, k + pad, CT_F32), *obuf = ct_full(CT_SHAPE(rows, n + pad), ct_scalar_float(7), CT_F32, CT_CPU);
    ct_tensor *a = ct_narrow(abuf, 1, 0, k), *out = ct_narrow(obuf, 1, 0, n);
    for (int r = 0; r < 3; r++) {
        CT_ASSERT_OK(ct_copy_(a, randn(rows, k, CT_F32)));
        CT_ASSERT_OK(ct_packed_mm_out(p, a, out));
        ct_tensor *ref = ct_mm(a, w);
        CT_ASSERT_OK(ref);
        assert_true(max_rel_diff(out, ref) < 1e-5);
    }
    assert_int_equal(ct_packed_mm_is_packed(p), expect_packed);
    if (pad) /* the columns past n are not written */
        assert_true(ct_test_at(ct_narrow(obuf, 1, n, pad), 0) == 7);
    ct_packed_mm_free(p);
    ct_scope_end();
}

static void test_packed_matches_mm(void **state) {
    (void)state;
    setenv("CT_PACKED_MM", "1", 1);
    bool packed = have_onednn();
    check_shapes(32, 512, 2048, true, 0, packed); /* the LSTM's forward, four blocks */
    check_shapes(32, 2048, 512, false, 16, packed); /* its backward, padded gradient rows */
    check_shapes(7, 33, 100, true, 3, packed);
    check_shapes(1, 5, 3, false, 0, packed);
    int threads = ct_get_num_threads();
    ct_set_num_threads(1); /* and on one thread */
    check_shapes(32, 512, 2048, true, 0, packed);
    ct_set_num_threads(threads);
    setenv("CT_PACKED_MM", "0", 1);
    check_shapes(32, 512, 2048, true, 0, false);
    unsetenv("CT_PACKED_MM");
}

/* The bits of a packed product do not depend on the thread count (blocks by shape). */
static void test_packed_thread_independent(void **state) {
    (void)state;
    setenv("CT_PACKED_MM", "1", 1);
    ct_scope_begin();
    ct_tensor *w = ct_t(randn(2048, 512, CT_F32)), *a = randn(32, 512, CT_F32);
    ct_tensor *o1 = ct_empty(CT_SHAPE(32, 2048), CT_F32, CT_CPU), *o2 = ct_empty(CT_SHAPE(32, 2048), CT_F32, CT_CPU);
    int threads = ct_get_num_threads();
    ct_packed_mm *p = ct_packed_mm_new(w, 32);
    ct_set_num_threads(1);
    CT_ASSERT_OK(ct_packed_mm_out(p, a, o1));
    ct_set_num_threads(threads > 1 ? threads : 2);
    CT_ASSERT_OK(ct_packed_mm_out(p, a, o2));
    ct_set_num_threads(threads);
    assert_true(ct_test_same_bits(o1, o2));
    ct_packed_mm_free(p);
    ct_scope_end();
    unsetenv("CT_PACKED_MM");
}

/* Where the packed kernel does not apply the product is ct_mm_out's: float64, other row
 * strides than the first product's, a transposed left operand, and autograd. */
static void test_fallbacks(void **state) {
    (void)state;
    setenv("CT_PACKED_MM", "1", 1);
    ct_scope_begin();
    ct_tensor *wd = randn(6, 4, CT_F64), *ad = randn(3, 6, CT_F64), *od = ct_empty(CT_SHAPE(3, 4), CT_F64, CT_CPU);
    ct_packed_mm *p = ct_packed_mm_new(wd, 3);
    CT_ASSERT_OK(ct_packed_mm_out(p, ad, od));
    assert_false(ct_packed_mm_is_packed(p));
    assert_true(max_rel_diff(od, ct_mm(ad, wd)) < 1e-14);
    ct_packed_mm_free(p);

    ct_tensor *w = randn(64, 48, CT_F32), *out = ct_empty(CT_SHAPE(16, 48), CT_F32, CT_CPU);
    p = ct_packed_mm_new(w, 16);
    ct_tensor *a = randn(16, 64, CT_F32);
    CT_ASSERT_OK(ct_packed_mm_out(p, a, out));
    ct_tensor *wide = ct_narrow(randn(16, 80, CT_F32), 1, 0, 64); /* rows 80 apart */
    CT_ASSERT_OK(ct_packed_mm_out(p, wide, out));
    assert_true(max_rel_diff(out, ct_mm(wide, w)) < 1e-5);
    ct_tensor *at = ct_t(randn(64, 16, CT_F32)); /* columns not contiguous */
    CT_ASSERT_OK(ct_packed_mm_out(p, at, out));
    assert_true(max_rel_diff(out, ct_mm(at, w)) < 1e-5);
    /* a product autograd must record is ct_mm_out's, refused the same way */
    ct_tensor *ag = randn(16, 64, CT_F32);
    ct_tensor_set_requires_grad(ag, true);
    ct_tensor *want = ct_mm_out(ag, w, ct_empty(CT_SHAPE(16, 48), CT_F32, CT_CPU));
    ct_status want_st = ct_last_status();
    ct_clear_error();
    ct_tensor *got = ct_packed_mm_out(p, ag, ct_empty(CT_SHAPE(16, 48), CT_F32, CT_CPU));
    assert_int_equal(got != NULL, want != NULL);
    assert_int_equal(ct_last_status(), want_st);
    ct_clear_error();
    ct_packed_mm_free(p);

    /* rows of one buffer: disjoint ones take the packed kernel (a vanilla RNN reads step
     * t - 1's rows of its output and writes step t's), overlapping ones are ct_mm_out's */
    ct_tensor *w2 = randn(64, 64, CT_F32), *buf = randn(32, 64, CT_F32);
    p = ct_packed_mm_new(w2, 16);
    ct_tensor *a2 = ct_narrow(buf, 0, 0, 16), *want2 = ct_mm(a2, w2);
    CT_ASSERT_OK(ct_packed_mm_out(p, a2, ct_narrow(buf, 0, 16, 16)));
    assert_int_equal(ct_packed_mm_is_packed(p), have_onednn());
    assert_true(max_rel_diff(ct_narrow(buf, 0, 16, 16), want2) < 1e-5);
    ct_tensor *buf2 = ct_clone(buf);
    want = ct_mm_out(ct_narrow(buf2, 0, 0, 16), w2, ct_narrow(buf2, 0, 8, 16));
    want_st = ct_last_status();
    ct_clear_error();
    got = ct_packed_mm_out(p, ct_narrow(buf, 0, 0, 16), ct_narrow(buf, 0, 8, 16));
    assert_int_equal(got != NULL, want != NULL);
    assert_int_equal(ct_last_status(), want_st);
    if (got)
        assert_true(ct_test_same_bits(buf, buf2));
    ct_clear_error();
    ct_packed_mm_free(p);
    ct_scope_end();
    unsetenv("CT_PACKED_MM");
}

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    CT_ASSERT_ERR(ct_packed_mm_new(NULL, 2) != NULL, CT_ERROR_NULL_ARGUMENT, "packed_mm");
    CT_ASSERT_ERR(ct_packed_mm_new(ct_zeros(CT_SHAPE(2, 3, 4), CT_F32, CT_CPU), 2) != NULL, CT_ERROR_VALUE,
                  "expected a matrix");
    CT_ASSERT_ERR(ct_packed_mm_new(ct_zeros(CT_SHAPE(3, 4), CT_F32, CT_CPU), -1) != NULL, CT_ERROR_VALUE,
                  "rows must be at least 0");
    ct_tensor *w = ct_zeros(CT_SHAPE(3, 4), CT_F32, CT_CPU), *a = ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    ct_packed_mm *p = ct_packed_mm_new(w, 2);
    CT_ASSERT_ERR(ct_packed_mm_out(NULL, a, a) != NULL, CT_ERROR_NULL_ARGUMENT, "packed_mm");
    CT_ASSERT_ERR(ct_packed_mm_out(p, NULL, a) != NULL, CT_ERROR_NULL_ARGUMENT, "packed_mm");
    CT_ASSERT_ERR(ct_packed_mm_out(p, a, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "packed_mm");
    /* a shape mismatch is ct_mm_out's error */
    assert_null(ct_packed_mm_out(p, ct_zeros(CT_SHAPE(2, 5), CT_F32, CT_CPU), ct_empty(CT_SHAPE(2, 4), CT_F32, CT_CPU)));
    assert_int_not_equal(ct_last_status(), CT_OK);
    ct_clear_error();
    ct_packed_mm_free(p);
    ct_packed_mm_free(NULL);
    assert_false(ct_packed_mm_is_packed(NULL));
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_matches_mm),
        cmocka_unit_test(test_packed_thread_independent),
        cmocka_unit_test(test_fallbacks),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
