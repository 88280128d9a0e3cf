/* Matrix products: mm, bmm, dot, addmm, baddbmm, matmul, linear, outer against a
 * double-precision reference, every supported dtype, strided operands, errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "cuda_testutil.h"

static uint64_t seed = 12345;
static double rnd(void) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (double)((seed >> 33) % 19) - 9.0; /* small integers: exact in every dtype */
}

static ct_tensor *randt(const int64_t *shape, int nd, ct_dtype dt) {
    ct_tensor *t = ct_empty(shape, nd, dt, CT_CPU);
    for (int64_t i = 0; i < ct_tensor_numel(t); i++) {
        int64_t idx[8], r = i;
        for (int k = nd - 1; k >= 0; k--) {
            idx[k] = r % shape[k];
            r /= shape[k];
        }
        ct_tensor_set(t, idx, dt == CT_U8 ? fabs(rnd()) : rnd());
    }
    return t;
}

/* Reference C[b] = A[b] @ B[b] on (batch, n, k) x (batch, k, m) reads through ct_tensor_get. */
static double ref_at(const ct_tensor *a, const ct_tensor *b, int64_t bi, int64_t i, int64_t j) {
    int batched = ct_tensor_dim(a) == 3;
    int64_t k = ct_tensor_shape(a)[batched + 1];
    double acc = 0;
    for (int64_t p = 0; p < k; p++) {
        double x, y;
        if (batched) {
            ct_tensor_get(a, CT_INDEX(bi, i, p), &x);
            ct_tensor_get(b, CT_INDEX(bi, p, j), &y);
        } else {
            ct_tensor_get(a, CT_INDEX(i, p), &x);
            ct_tensor_get(b, CT_INDEX(p, j), &y);
        }
        acc += x * y;
    }
    return acc;
}

static void check_product(const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, double alpha, double beta,
                          const ct_tensor *bias) {
    int batched = ct_tensor_dim(c) == 3;
    const int64_t *s = ct_tensor_shape(c);
    int64_t nb = batched ? s[0] : 1;
    for (int64_t bi = 0; bi < nb; bi++)
        for (int64_t i = 0; i < s[batched]; i++)
            for (int64_t j = 0; j < s[batched + 1]; j++) {
                double want = alpha * ref_at(a, b, bi, i, j);
                if (bias && beta != 0) {
                    /* bias broadcasts against c's index, right-aligned */
                    int nd = ct_tensor_dim(bias), cd = ct_tensor_dim(c);
                    int64_t full[3] = {bi, i, j}, idx[3];
                    const int64_t *fi = batched ? full : full + 1;
                    for (int k = 0; k < nd; k++)
                        idx[k] = ct_tensor_shape(bias)[k] == 1 ? 0 : fi[cd - nd + k];
                    double v;
                    ct_tensor_get(bias, idx, &v);
                    want += beta * v;
                }
                /* the reference in the output dtype: integers wrap */
                char buf[16];
                ct_store_double(buf, ct_tensor_dtype(c), want);
                if (!ct_dtype_is_floating(ct_tensor_dtype(c)))
                    want = ct_load_double(buf, ct_tensor_dtype(c));
                double got;
                if (batched)
                    ct_tensor_get(c, CT_INDEX(bi, i, j), &got);
                else
                    ct_tensor_get(c, CT_INDEX(i, j), &got);
                if (fabs(got - want) > 1e-9 * (1 + fabs(want)) + (ct_tensor_dtype(c) == CT_BF16 ? 0.02 * fabs(want) : 0))
                    fail_msg("%s: [%lld,%lld,%lld] got %g want %g", ct_dtype_name(ct_tensor_dtype(c)), (long long)bi,
                             (long long)i, (long long)j, got, want);
            }
}

static ct_tensor *mm_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_mm(in[0], in[1]);
}

static ct_tensor *matmul_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_matmul(in[0], in[1]);
}

static void test_mm_dtypes_and_layouts(void **state) {
    (void)state;
    const ct_dtype dts[] = {CT_F32, CT_F64, CT_F16, CT_BF16, CT_I32, CT_I64, CT_U8, CT_I16};
    const int64_t sizes[][3] = {{3, 4, 5}, {1, 7, 1}, {17, 1, 9}, {0, 3, 4}, {4, 0, 3}, {33, 65, 31}};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            ct_scope_begin();
            int64_t n = sizes[s][0], k = sizes[s][1], m = sizes[s][2];
            ct_tensor *a = randt(CT_SHAPE(n, k), dts[d]);
            ct_tensor *b = randt(CT_SHAPE(k, m), dts[d]);
            ct_tensor *c = ct_mm(a, b);
            CT_ASSERT_OK(c);
            assert_int_equal(ct_tensor_dtype(c), dts[d]);
            CT_ASSERT_SHAPE(c, n, m);
            check_product(c, a, b, 1, 0, NULL);
            /* transposed operands (BLAS's trans flags) and a strided one (copied) */
            ct_tensor *at = ct_t(ct_contiguous(ct_t(a)));
            ct_tensor *bt = ct_t(ct_contiguous(ct_t(b)));
            check_product(ct_mm(at, bt), a, b, 1, 0, NULL);
            ct_tensor *wide = randt(CT_SHAPE(n, 2 * k), dts[d]);
            ct_tensor *as = ct_slice(wide, 1, 0, INT64_MAX, 2);
            check_product(ct_mm(as, b), as, b, 1, 0, NULL);
            /* docs/compile.md, "Every op's samples": each layout through ct_compile */
            ct_test_through_compile(mm_fn, NULL, (ct_tensor *[]){a, b}, 2, "mm");
            ct_test_through_compile(mm_fn, NULL, (ct_tensor *[]){at, bt}, 2, "mm (transposed)");
            ct_test_through_compile(mm_fn, NULL, (ct_tensor *[]){as, b}, 2, "mm (strided)");
            ct_scope_end();
        }
}

static void test_bmm_baddbmm_addmm(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = randt(CT_SHAPE(3, 4, 5), CT_F64);
    ct_tensor *b = randt(CT_SHAPE(3, 5, 2), CT_F64);
    ct_tensor *c = ct_bmm(a, b);
    CT_ASSERT_SHAPE(c, 3, 4, 2);
    check_product(c, a, b, 1, 0, NULL);
    ct_tensor *bias = randt(CT_SHAPE(4, 1), CT_F64);
    ct_tensor *r = ct_baddbmm(bias, a, b, ct_scalar_float(0.5), ct_scalar_int(2));
    CT_ASSERT_OK(r);
    check_product(r, a, b, 2, 0.5, bias);
    ct_tensor *a2 = randt(CT_SHAPE(4, 5), CT_F32), *b2 = randt(CT_SHAPE(5, 3), CT_F32);
    ct_tensor *bias2 = randt(CT_SHAPE(3), CT_F32);
    r = ct_addmm(bias2, a2, b2, ct_scalar_int(3), ct_scalar_float(-1));
    check_product(r, a2, b2, -1, 3, bias2);
    /* beta = 0 ignores NaN in the input, as PyTorch documents */
    ct_tensor *nanb = ct_full(CT_SHAPE(4, 3), ct_scalar_float(NAN), CT_F32, CT_CPU);
    r = ct_addmm(nanb, a2, b2, ct_scalar_int(0), ct_scalar_int(1));
    check_product(r, a2, b2, 1, 0, NULL);
    ct_scope_end();
}

/* addmm_activation equals addmm followed by relu or the tanh-form GELU, in every
 * floating dtype and for integers (relu only); META and its errors. */
static void test_addmm_activation(void **state) {
    (void)state;
    const ct_dtype dts[] = {CT_F32, CT_F64, CT_BF16, CT_F16};
    for (int d = 0; d < 4; d++) {
        ct_scope_begin();
        ct_tensor *a = randt(CT_SHAPE(6, 5), dts[d]), *b = randt(CT_SHAPE(5, 7), dts[d]);
        ct_tensor *bias = randt(CT_SHAPE(7), dts[d]), *full = randt(CT_SHAPE(6, 7), dts[d]);
        for (int g = 0; g < 2; g++) {
            ct_tensor *pre = ct_addmm(bias, a, b, ct_scalar_int(1), ct_scalar_int(1));
            ct_tensor *want = g ? ct_gelu(pre, CT_GELU_APPROXIMATE_TANH) : ct_relu(pre);
            CT_ASSERT_CLOSE(ct_addmm_activation(bias, a, b, ct_scalar_int(1), ct_scalar_int(1), g), want, 0, 0,
                            g ? "gelu bias row" : "relu bias row");
            pre = ct_addmm(full, ct_t(ct_contiguous(ct_t(a))), b, ct_scalar_float(0.5), ct_scalar_float(-2));
            want = g ? ct_gelu(pre, CT_GELU_APPROXIMATE_TANH) : ct_relu(pre);
            CT_ASSERT_CLOSE(ct_addmm_activation(full, ct_t(ct_contiguous(ct_t(a))), b, ct_scalar_float(0.5),
                                                ct_scalar_float(-2), g),
                            want, 0, 0, "full input, strided mat1, beta and alpha");
        }
        ct_scope_end();
    }
    ct_scope_begin();
    ct_tensor *ia = ct_arange(ct_scalar_int(-6), ct_scalar_int(6), ct_scalar_int(1), CT_I64, CT_CPU);
    ct_tensor *im = ct_view(ia, CT_SHAPE(3, 4)), *iw = ct_t(ct_view(ct_arange(ct_scalar_int(0), ct_scalar_int(8), ct_scalar_int(1), CT_I64, CT_CPU), CT_SHAPE(2, 4)));
    ct_tensor *ib = ct_zeros(CT_SHAPE(2), CT_I64, CT_CPU);
    CT_ASSERT_CLOSE(ct_addmm_activation(ib, im, iw, ct_scalar_int(1), ct_scalar_int(1), false),
                    ct_relu(ct_addmm(ib, im, iw, ct_scalar_int(1), ct_scalar_int(1))), 0, 0, "int64 relu");
    CT_ASSERT_ERR(ct_addmm_activation(ib, im, iw, ct_scalar_int(1), ct_scalar_int(1), true) != NULL, CT_ERROR_TYPE,
                  "gelu: not implemented for 'int64'");
    ct_tensor *m = ct_addmm_activation(ct_empty(CT_SHAPE(7), CT_F32, CT_META), ct_empty(CT_SHAPE(6, 5), CT_F32, CT_META),
                                       ct_empty(CT_SHAPE(5, 7), CT_F32, CT_META), ct_scalar_int(1), ct_scalar_int(1), true);
    CT_ASSERT_SHAPE(m, 6, 7);
    assert_int_equal(ct_tensor_device(m).type, CT_DEVICE_META);
    ct_tensor *f = randt(CT_SHAPE(2, 3), CT_F32);
    CT_ASSERT_ERR(ct_addmm_activation(ct_zeros(CT_SHAPE(4), CT_F32, CT_CPU), f, ct_t(f), ct_scalar_int(1),
                                      ct_scalar_int(1), false) != NULL,
                  CT_ERROR_VALUE, "cannot be broadcast");
    CT_ASSERT_ERR(ct_addmm_activation(ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU), f, f, ct_scalar_int(1), ct_scalar_int(1),
                                      false) != NULL,
                  CT_ERROR_VALUE, "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)");
    CT_ASSERT_ERR(ct_addmm_activation(NULL, f, f, ct_scalar_int(1), ct_scalar_int(1), false) != NULL,
                  CT_ERROR_NULL_ARGUMENT, "addmm_activation");
    ct_scope_end();
}

static void test_dot_and_out(void **state) {
    (void)state;
    ct_scope_begin();
    double av[] = {1, 2, 3}, bv[] = {4, -5, 6};
    ct_tensor *a = ct_from_data(av, CT_SHAPE(3), CT_F64), *b = ct_from_data(bv, CT_SHAPE(3), CT_F64);
    ct_tensor *d = ct_dot(a, b);
    assert_int_equal(ct_tensor_dim(d), 0);
    double v;
    ct_item_double(d, &v);
    assert_true(v == 12.0);
    int64_t iv[] = {1, 2, 3};
    ct_tensor *ia = ct_from_data(iv, CT_SHAPE(3), CT_I64);
    ct_item_double(ct_dot(ia, ia), &v);
    assert_true(v == 14.0);
    ct_tensor *out = ct_empty(CT_SHAPE(2, 2), CT_F32, CT_CPU);
    ct_tensor *x = randt(CT_SHAPE(2, 3), CT_F32), *y = randt(CT_SHAPE(3, 2), CT_F32);
    assert_ptr_equal(ct_mm_out(x, y, out), out);
    check_product(out, x, y, 1, 0, NULL);
    /* a non-contiguous out= is written through a temporary */
    ct_tensor *big = ct_zeros(CT_SHAPE(2, 4), CT_F32, CT_CPU);
    ct_tensor *strided = ct_slice(big, 1, 0, INT64_MAX, 2);
    CT_ASSERT_OK(ct_mm_out(x, y, strided));
    check_product(strided, x, y, 1, 0, NULL);
    ct_scope_end();
}

static void test_matmul_shapes(void **state) {
    (void)state;
    static const struct {
        int na, nb, nr;
        int64_t a[4], b[4], r[4];
    } cases[] = {
        {1, 1, 0, {3}, {3}, {0}},
        {2, 1, 1, {2, 3}, {3}, {2}},
        {1, 2, 1, {3}, {3, 4}, {4}},
        {3, 2, 3, {5, 2, 3}, {3, 4}, {5, 2, 4}},
        {3, 1, 2, {5, 2, 3}, {3}, {5, 2}},
        {1, 3, 2, {3}, {5, 3, 4}, {5, 4}},
        {2, 3, 3, {2, 3}, {5, 3, 4}, {5, 2, 4}},
        {4, 3, 4, {2, 1, 2, 3}, {5, 3, 4}, {2, 5, 2, 4}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ct_scope_begin();
        ct_tensor *a = randt(cases[c].a, cases[c].na, CT_F64);
        ct_tensor *b = randt(cases[c].b, cases[c].nb, CT_F64);
        ct_tensor *r = ct_matmul(a, b);
        CT_ASSERT_OK(r);
        ct_test_assert_shape(r, cases[c].r, cases[c].nr, __FILE__, __LINE__);
        ct_test_through_compile(matmul_fn, NULL, (ct_tensor *[]){a, b}, 2, "matmul");
        /* each output element against an explicit sum over the broadcast operands */
        int64_t n = ct_tensor_numel(r);
        int nr = cases[c].nr;
        for (int64_t e = 0; e < n; e++) {
            int64_t idx[4], rem = e;
            for (int k = nr - 1; k >= 0; k--) {
                idx[k] = rem % cases[c].r[k];
                rem /= cases[c].r[k];
            }
            /* rebuild a's and b's indices: a is (..., n, k) or (k); b is (..., k, m) or (k) */
            int na = cases[c].na, nb = cases[c].nb;
            int64_t K = cases[c].a[na - 1];
            double want = 0;
            for (int64_t p = 0; p < K; p++) {
                int64_t ia[4], ib[4];
                int pos = nr;
                int64_t col = nb > 1 ? idx[--pos] : 0;
                int64_t row = na > 1 ? idx[--pos] : 0;
                for (int k = 0; k < na - 2; k++) {
                    int64_t dim = cases[c].a[k];
                    ia[k] = dim == 1 ? 0 : idx[pos - (na - 2) + k];
                }
                for (int k = 0; k < nb - 2; k++) {
                    int64_t dim = cases[c].b[k];
                    ib[k] = dim == 1 ? 0 : idx[pos - (nb - 2) + k];
                }
                if (na > 1)
                    ia[na - 2] = row, ia[na - 1] = p;
                else
                    ia[0] = p;
                if (nb > 1)
                    ib[nb - 2] = p, ib[nb - 1] = col;
                else
                    ib[0] = p;
                double x, y;
                ct_tensor_get(a, ia, &x);
                ct_tensor_get(b, ib, &y);
                want += x * y;
            }
            double got;
            ct_tensor_get(r, idx, &got);
            if (got != want)
                fail_msg("matmul case %zu element %lld: got %g want %g", c, (long long)e, got, want);
        }
        ct_scope_end();
    }
}

static void test_linear(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = randt(CT_SHAPE(2, 5, 3), CT_F32), *w = randt(CT_SHAPE(4, 3), CT_F32), *bias = randt(CT_SHAPE(4), CT_F32);
    ct_tensor *y = ct_linear(x, w, bias);
    CT_ASSERT_SHAPE(y, 2, 5, 4);
    double got, xv, wv, bv;
    ct_tensor_get(y, CT_INDEX(1, 2, 3), &got);
    double want = 0;
    for (int p = 0; p < 3; p++) {
        ct_tensor_get(x, CT_INDEX(1, 2, p), &xv);
        ct_tensor_get(w, CT_INDEX(3, p), &wv);
        want += xv * wv;
    }
    ct_tensor_get(bias, CT_INDEX(3), &bv);
    assert_true(got == want + bv);
    ct_tensor *x2 = randt(CT_SHAPE(5, 3), CT_F32);
    CT_ASSERT_SHAPE(ct_linear(x2, w, bias), 5, 4);
    CT_ASSERT_SHAPE(ct_linear(x2, w, NULL), 5, 4);
    ct_scope_end();
}

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3), CT_F32, CT_CPU), *b = ct_ones(CT_SHAPE(4, 5), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_mm(a, b) != NULL, CT_ERROR_VALUE, "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
    CT_ASSERT_ERR(ct_mm(a, ct_ones(CT_SHAPE(3), CT_F32, CT_CPU)) != NULL, CT_ERROR_VALUE, "must be a 2D tensor");
    CT_ASSERT_ERR(ct_mm(a, ct_ones(CT_SHAPE(3, 2), CT_F64, CT_CPU)) != NULL, CT_ERROR_TYPE,
                  "expected m1 and m2 to have the same dtype, but got: float32 != float64");
    CT_ASSERT_ERR(ct_bmm(ct_ones(CT_SHAPE(2, 2, 3), CT_F32, CT_CPU), ct_ones(CT_SHAPE(3, 3, 2), CT_F32, CT_CPU)) != NULL,
                  CT_ERROR_VALUE, "same number of batches");
    CT_ASSERT_ERR(ct_dot(ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), ct_ones(CT_SHAPE(4), CT_F32, CT_CPU)) != NULL,
                  CT_ERROR_VALUE, "inconsistent tensor size");
    CT_ASSERT_ERR(ct_matmul(ct_ones(NULL, 0, CT_F32, CT_CPU), a) != NULL, CT_ERROR_VALUE, "at least 1D");
    CT_ASSERT_ERR(ct_matmul(ct_ones(CT_SHAPE(2, 2, 3), CT_F32, CT_CPU), ct_ones(CT_SHAPE(3, 3, 2), CT_F32, CT_CPU)) != NULL,
                  CT_ERROR_VALUE, "must match");
    CT_ASSERT_ERR(ct_addmm(ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), a, ct_ones(CT_SHAPE(3, 2), CT_F32, CT_CPU),
                           ct_scalar_int(1), ct_scalar_int(1)) != NULL,
                  CT_ERROR_VALUE, "cannot be broadcast");
    CT_ASSERT_ERR(ct_mm(NULL, a) != NULL, CT_ERROR_NULL_ARGUMENT, "mm");
    CT_ASSERT_ERR(ct_mm_out(a, ct_ones(CT_SHAPE(3, 2), CT_F32, CT_CPU), b) != NULL, CT_ERROR_VALUE, "out=");
    ct_tensor *m = ct_empty(CT_SHAPE(7, 3), CT_F32, CT_META);
    ct_tensor *r = ct_matmul(m, ct_empty(CT_SHAPE(3, 9), CT_F32, CT_META));
    CT_ASSERT_SHAPE(r, 7, 9);
    assert_true(ct_tensor_device(r).type == CT_DEVICE_META);
    ct_scope_end();
}

/* outer against a double loop: promotion of mixed dtypes (int32 x float32 -> float32,
 * bool x bool -> bool), a strided operand, empty operands, META, and the 1-D checks
 * with PyTorch's messages. */
static void test_outer(void **state) {
    (void)state;
    ct_scope_begin();
    int32_t av[] = {0, 1, -3};
    float bv[] = {1.5f, 2.0f, -0.25f, 7.0f};
    ct_tensor *a = ct_from_data(av, CT_SHAPE(3), CT_I32);
    ct_tensor *b4 = ct_from_data(bv, CT_SHAPE(4), CT_F32);
    ct_tensor *b = ct_slice(b4, 0, 0, INT64_MAX, 2); /* {1.5, -0.25}, stride 2 */
    ct_tensor *r = ct_outer(a, b);
    CT_ASSERT_SHAPE(r, 3, 2);
    assert_int_equal(ct_tensor_dtype(r), CT_F32);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            assert_true(ct_test_at(r, i * 2 + j) == (double)av[i] * (double)bv[2 * j]);
    bool pv[] = {true, false}, qv[] = {true, true, false};
    ct_tensor *l = ct_outer(ct_from_data(pv, CT_SHAPE(2), CT_BOOL), ct_from_data(qv, CT_SHAPE(3), CT_BOOL));
    CT_ASSERT_SHAPE(l, 2, 3);
    assert_int_equal(ct_tensor_dtype(l), CT_BOOL);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            assert_true(ct_test_at(l, i * 3 + j) == (double)(pv[i] && qv[j]));
    CT_ASSERT_SHAPE(ct_outer(ct_ones(CT_SHAPE(0), CT_F64, CT_CPU), ct_ones(CT_SHAPE(3), CT_F64, CT_CPU)), 0, 3);
    ct_tensor *m = ct_outer(ct_empty(CT_SHAPE(5), CT_F16, CT_META), ct_empty(CT_SHAPE(6), CT_F32, CT_META));
    CT_ASSERT_SHAPE(m, 5, 6);
    assert_int_equal(ct_tensor_dtype(m), CT_F32);
    assert_true(ct_tensor_device(m).type == CT_DEVICE_META);
    ct_tensor *v = ct_ones(CT_SHAPE(2), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_outer(ct_ones(CT_SHAPE(2, 2), CT_F32, CT_CPU), v) != NULL, CT_ERROR_VALUE,
                  "outer: Expected 1-D argument self, but got 2-D");
    CT_ASSERT_ERR(ct_outer(v, ct_ones(NULL, 0, CT_F32, CT_CPU)) != NULL, CT_ERROR_VALUE,
                  "outer: Expected 1-D argument vec2, but got 0-D");
    CT_ASSERT_ERR(ct_outer(NULL, v) != NULL, CT_ERROR_NULL_ARGUMENT, "outer");
    ct_scope_end();
}

/* Note [oneDNN sgemm] (src/cpu/linalg.c): float32 products go to oneDNN where it is
 * built in, and to OpenBLAS under CT_SGEMM=openblas (ctest runs this file both ways).
 * Every layout BLAS reads in place (plain, transposed, a leading dim past the width)
 * for both operands; small integer values keep every product exact. */
static void test_sgemm_backends(void **state) {
    (void)state;
    const char *e = getenv("CT_SGEMM");
    if (e && strcmp(e, "openblas") == 0)
        assert_null(strstr(ct_blas_info(), "oneDNN"));
    ct_scope_begin();
    const int64_t n = 67, k = 131, m = 45;
    ct_tensor *as[3] = {randt(CT_SHAPE(n, k), CT_F32), ct_transpose(randt(CT_SHAPE(k, n), CT_F32), 0, 1),
                        ct_narrow(randt(CT_SHAPE(n, k + 9), CT_F32), 1, 0, k)};
    ct_tensor *bs[3] = {randt(CT_SHAPE(k, m), CT_F32), ct_transpose(randt(CT_SHAPE(m, k), CT_F32), 0, 1),
                        ct_narrow(randt(CT_SHAPE(k, m + 3), CT_F32), 1, 0, m)};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            ct_tensor *c = ct_mm(as[i], bs[j]);
            CT_ASSERT_OK(c);
            check_product(c, as[i], bs[j], 1.0, 0.0, NULL);
        }
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mm_dtypes_and_layouts), cmocka_unit_test(test_bmm_baddbmm_addmm),
        cmocka_unit_test(test_dot_and_out),          cmocka_unit_test(test_matmul_shapes),
        cmocka_unit_test(test_addmm_activation),
        cmocka_unit_test(test_linear),               cmocka_unit_test(test_errors),
        cmocka_unit_test(test_sgemm_backends),
        cmocka_unit_test(test_outer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
