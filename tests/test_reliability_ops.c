/* Regression tests for the reliability findings of the op API (second round): each
 * test is one reproducer of ../shared/repro/ (named in its comment), asserting the
 * error or the answer PyTorch gives. The shared checks they exercise: one device for
 * every tensor of a structured kernel's call (Note in src/meta/kernels.h), outputs and
 * in-place selfs free of internal overlap (Note [Internal overlap]), output sizes
 * through overflow-checked arithmetic (Note [Checked sizes]), bool results 0 or 1. */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char overlap_msg[] = "unsupported operation: more than one element of the written-to tensor refers to a "
                                  "single memory location. Please clone() the tensor before performing the operation.";

/* ------------------------------------------------------------------ devices (findings 1, 2, 20) */

/* ct_index_select.c, ct_quantile.c: a META index with a CPU self was read. */
static void test_meta_index_cpu_self(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *t = ct_zeros(CT_SHAPE(4, 3), CT_F32, CT_CPU);
    ct_tensor *index = ct_zeros(CT_SHAPE(2), CT_I64, CT_META);
    CT_ASSERT_ERR(ct_index_select(t, 0, index) != NULL, CT_ERROR_DEVICE,
                  "Expected all tensors to be on the same device, but found at least two devices, cpu and meta!");
    ct_tensor *i2 = ct_zeros(CT_SHAPE(4, 3), CT_I64, CT_META);
    CT_ASSERT_ERR(ct_gather(t, 0, i2) != NULL, CT_ERROR_DEVICE, "same device");
    CT_ASSERT_ERR(ct_scatter_add(t, 0, i2, t) != NULL, CT_ERROR_DEVICE, "same device");
    CT_ASSERT_ERR(ct_index_add(t, 0, index, t, ct_scalar_int(1)) != NULL, CT_ERROR_DEVICE, "same device");
    CT_ASSERT_ERR(ct_take_along_dim(t, i2, (int64_t[]){0}) != NULL, CT_ERROR_DEVICE, "same device");
    /* a CPU index with a META self: the same check, the other way round */
    ct_tensor *m = ct_zeros(CT_SHAPE(4, 3), CT_F32, CT_META), *ci = ct_zeros(CT_SHAPE(2), CT_I64, CT_CPU);
    CT_ASSERT_ERR(ct_index_select(m, 0, ci) != NULL, CT_ERROR_DEVICE, "meta and cpu");
    /* quantile reaches gather through ordinary arguments */
    ct_tensor *x = ct_rand(CT_SHAPE(1, 2, 2), CT_F32, CT_CPU);
    ct_tensor *q = ct_full(NULL, 0, ct_scalar_float(0.5), CT_F32, CT_META);
    int64_t dim = -2;
    assert_null(ct_quantile(x, q, &dim, false, "linear"));
    assert_int_equal(ct_last_status(), CT_ERROR_DEVICE);
    ct_scope_end();
}

/* ct_masked_fill.c: a META mask with a CPU self. */
static void test_meta_mask_cpu_self(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *t = ct_zeros(CT_SHAPE(4, 3), CT_I32, CT_CPU);
    ct_tensor *mask = ct_ones(NULL, 0, CT_BOOL, CT_META);
    CT_ASSERT_ERR(ct_masked_fill(t, mask, ct_scalar_int(1)) != NULL, CT_ERROR_DEVICE, "cpu and meta");
    CT_ASSERT_ERR(ct_masked_fill_(t, mask, ct_scalar_int(1)) != NULL, CT_ERROR_DEVICE, "cpu and meta");
    ct_scope_end();
}

/* ct_conv2d_backward.c: a META input with CPU grad_output and weight was accepted. */
static void test_conv2d_backward_devices(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *go = ct_full(CT_SHAPE(1), ct_scalar_int(7), CT_U32, CT_CPU);
    ct_tensor *in = ct_zeros(CT_SHAPE(3, 4), CT_U8, CT_META);
    ct_tensor *w = ct_ones(CT_SHAPE(1), CT_BOOL, CT_CPU);
    int64_t stride[2] = {1, 3}, padding[2] = {0, 1}, dilation[2] = {1, 2};
    ct_tensor *gi = NULL, *gw = NULL, *gb = NULL;
    CT_ASSERT_ERR(ct_conv2d_backward(go, in, w, stride, padding, dilation, 1, &gi, &gw, &gb) == CT_OK,
                  CT_ERROR_DEVICE, "same device");
    assert_null(gi);
    assert_null(gw);
    assert_null(gb);
    /* all on META: the shapes are checked as on the CPU */
    ct_tensor *go_m = ct_zeros(CT_SHAPE(1), CT_U32, CT_META), *w_m = ct_ones(CT_SHAPE(1), CT_BOOL, CT_META);
    assert_int_not_equal(ct_conv2d_backward(go_m, in, w_m, stride, padding, dilation, 1, &gi, &gw, &gb), CT_OK);
    assert_null(gi);
    /* and a valid META call still gives META gradients of the right shapes */
    ct_tensor *x = ct_zeros(CT_SHAPE(1, 2, 5, 5), CT_F32, CT_META), *k = ct_zeros(CT_SHAPE(3, 2, 3, 3), CT_F32, CT_META);
    ct_tensor *g = ct_zeros(CT_SHAPE(1, 3, 3, 3), CT_F32, CT_META);
    int64_t one[2] = {1, 1}, zero[2] = {0, 0};
    assert_int_equal(ct_conv2d_backward(g, x, k, one, zero, one, 1, &gi, &gw, &gb), CT_OK);
    assert_int_equal(ct_tensor_dim(gi), 4);
    assert_int_equal(ct_tensor_size(gw, 0), 3);
    ct_scope_end();
}

/* ------------------------------------------------------------------ indexing (6, 7, new) */

/* ct_scatter_add.c, ct_scatter.c: src's dims and emptiness against index. */
static void test_scatter_src_checked(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *self = ct_zeros(CT_SHAPE(1), CT_F32, CT_CPU);
    ct_tensor *index = ct_zeros(CT_SHAPE(1), CT_I64, CT_CPU);
    ct_tensor *base = ct_ones(CT_SHAPE(16), CT_F32, CT_CPU);
    ct_tensor *src = ct_as_strided(base, CT_INDEX(2, 0), CT_INDEX(1, 1), 2, 16); /* 2 x 0, past base's end */
    CT_ASSERT_ERR(ct_scatter_add(self, 0, index, src) != NULL, CT_ERROR_VALUE,
                  "Index tensor must have the same number of dimensions as src tensor");
    ct_tensor *s0 = ct_zeros(NULL, 0, CT_F32, CT_CPU), *i0 = ct_zeros(NULL, 0, CT_I64, CT_CPU);
    ct_tensor *empty = ct_as_strided(base, CT_INDEX(0), CT_INDEX(1), 1, 16);
    CT_ASSERT_ERR(ct_scatter(s0, -1, i0, empty) != NULL, CT_ERROR_VALUE, "to be no larger size than src");
    CT_ASSERT_ERR(ct_scatter_add(s0, -1, i0, empty) != NULL, CT_ERROR_VALUE, "to be no larger size than src");
    /* the valid forms still work: a 0-d index into a 1-element src */
    ct_tensor *one = ct_full(CT_SHAPE(1), ct_scalar_float(2.5), CT_F32, CT_CPU);
    ct_tensor *r = ct_scatter_add(s0, 0, i0, one);
    assert_non_null(r);
    assert_true(ct_test_at(r, 0) == 2.5);
    ct_scope_end();
}

/* ct_index_add.c: a 0-d src with four indices was read past its end. */
static void test_index_add_counts(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *self = ct_zeros(NULL, 0, CT_F32, CT_CPU);
    ct_tensor *index = ct_zeros(CT_SHAPE(4), CT_I64, CT_CPU);
    ct_tensor *src = ct_ones(NULL, 0, CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_index_add(self, 0, index, src, ct_scalar_int(1)) != NULL, CT_ERROR_INDEX,
                  "Number of indices (4) should be equal to source.size(dim) (1)");
    ct_tensor *src4 = ct_ones(CT_SHAPE(4), CT_F32, CT_CPU);
    ct_tensor *r = ct_index_add(self, 0, index, src4, ct_scalar_int(1));
    assert_non_null(r);
    assert_true(ct_test_at(r, 0) == 4.0);
    /* integer alpha: wraps like the element type, a NaN alpha is refused */
    ct_tensor *it = ct_full(CT_SHAPE(1), ct_scalar_int(INT64_MAX), CT_I64, CT_CPU);
    ct_tensor *i1 = ct_zeros(CT_SHAPE(1), CT_I64, CT_CPU);
    r = ct_index_add(it, 0, i1, it, ct_scalar_int(3));
    assert_non_null(r);
    assert_true(((const int64_t *)ct_tensor_data(r))[0] == (int64_t)((uint64_t)INT64_MAX * 4u));
    CT_ASSERT_ERR(ct_index_add(it, 0, i1, it, ct_scalar_float(NAN)) != NULL, CT_ERROR_VALUE, "without overflow");
    ct_scope_end();
}

/* index_select on a 0-d self: one index, one element. */
static void test_index_select_scalar(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *t = ct_full(NULL, 0, ct_scalar_float(3), CT_F32, CT_CPU);
    ct_tensor *two = ct_zeros(CT_SHAPE(2), CT_I64, CT_CPU), *none = ct_zeros(CT_SHAPE(0), CT_I64, CT_CPU);
    CT_ASSERT_ERR(ct_index_select(t, 0, two) != NULL, CT_ERROR_INDEX,
                  "index_select(): Index to scalar can have only 1 value, got 2 value(s)");
    CT_ASSERT_ERR(ct_index_select(t, 0, none) != NULL, CT_ERROR_INDEX, "got 0 value(s)");
    ct_tensor *r = ct_index_select(t, 0, ct_zeros(CT_SHAPE(1), CT_I64, CT_CPU));
    assert_non_null(r);
    assert_int_equal(ct_tensor_dim(r), 0);
    assert_true(ct_test_at(r, 0) == 3.0);
    ct_scope_end();
}

/* ct_index_select_empty.c: memcpy(NULL, NULL, 0) for an empty inner dim. */
static void test_index_select_empty(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *t = ct_zeros(CT_SHAPE(2, 0), CT_F32, CT_CPU);
    ct_tensor *r = ct_index_select(t, 0, ct_zeros(CT_SHAPE(1), CT_I64, CT_CPU));
    assert_non_null(r);
    assert_int_equal(ct_tensor_size(r, 0), 1);
    assert_int_equal(ct_tensor_size(r, 1), 0);
    /* the indices are still checked */
    CT_ASSERT_ERR(ct_index_select(t, 0, ct_full(CT_SHAPE(1), ct_scalar_int(5), CT_I64, CT_CPU)) != NULL,
                  CT_ERROR_INDEX, "index out of range");
    ct_scope_end();
}

/* ------------------------------------------------------------------ overlap (5, 10) */

/* ct_add_.c, ct_remainder_out.c: outputs and in-place selfs with internal overlap. */
static void test_internal_overlap(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_zeros(CT_SHAPE(1), CT_F32, CT_CPU);
    ct_tensor *e = ct_expand(a, CT_SHAPE(4));
    CT_ASSERT_ERR(ct_add_scalar_(e, ct_scalar_float(1)) != NULL, CT_ERROR_VALUE, overlap_msg);
    assert_true(ct_test_at(a, 0) == 0.0);
    alarm(30);
    double t0 = now_s();
    ct_tensor *huge = ct_expand(a, CT_SHAPE((int64_t)1 << 40));
    CT_ASSERT_ERR(ct_add_scalar_(huge, ct_scalar_float(1)) != NULL, CT_ERROR_VALUE, "more than one element");
    CT_ASSERT_ERR(ct_fill_(huge, ct_scalar_float(1)) != NULL, CT_ERROR_VALUE, "more than one element");
    CT_ASSERT_ERR(ct_copy_(huge, a) != NULL, CT_ERROR_VALUE, "more than one element");
    assert_true(now_s() - t0 < 5.0);
    alarm(0);
    /* out= aliasing the divisor through stride 0 divided by the zero it wrote */
    ct_tensor *x = ct_full(CT_SHAPE(2, 3), ct_scalar_int(6), CT_U8, CT_CPU);
    ct_tensor *base = ct_full(CT_SHAPE(2, 3), ct_scalar_int(3), CT_U8, CT_CPU);
    ct_tensor *b = ct_expand(base, CT_SHAPE(3, 2, 3));
    CT_ASSERT_ERR(ct_remainder_out(x, b, b) != NULL, CT_ERROR_VALUE, overlap_msg);
    ct_tensor *f5 = ct_expand(ct_full(CT_SHAPE(1), ct_scalar_int(5), CT_I32, CT_CPU), CT_SHAPE(2));
    CT_ASSERT_ERR(ct_remainder_(f5, f5) != NULL, CT_ERROR_VALUE, overlap_msg);
    /* an overlapping layout made by as_strided (rows of 3 starting 1 apart) */
    ct_tensor *flat = ct_zeros(CT_SHAPE(8), CT_F32, CT_CPU);
    ct_tensor *win = ct_as_strided(flat, CT_INDEX(3, 3), CT_INDEX(1, 1), 2, 0);
    CT_ASSERT_ERR(ct_mul_scalar_(win, ct_scalar_float(2)) != NULL, CT_ERROR_VALUE, "more than one element");
    CT_ASSERT_ERR(ct_scatter_add_(win, 0, ct_zeros(CT_SHAPE(1, 1), CT_I64, CT_CPU), win) != NULL, CT_ERROR_VALUE,
                  "more than one element");
    CT_ASSERT_ERR(ct_masked_fill_(win, ct_ones(NULL, 0, CT_BOOL, CT_CPU), ct_scalar_int(1)) != NULL, CT_ERROR_VALUE,
                  "more than one element");
    ct_tensor *s = ct_sum_out(ct_ones(CT_SHAPE(4, 2), CT_F32, CT_CPU), CT_INDEX(1), 1, false, CT_DTYPE_UNDEFINED,
                              ct_expand(ct_zeros(CT_SHAPE(1), CT_F32, CT_CPU), CT_SHAPE(4)));
    assert_null(s);
    assert_int_equal(ct_last_status(), CT_ERROR_VALUE);
    /* views without overlap are written as before: a transpose, a stepped slice, a
     * size-1 dim with any stride, a reading input that is expanded */
    ct_tensor *m = ct_zeros(CT_SHAPE(3, 4), CT_F32, CT_CPU);
    assert_non_null(ct_add_scalar_(ct_transpose(m, 0, 1), ct_scalar_float(1)));
    assert_non_null(ct_add_scalar_(ct_slice(m, 1, 0, 4, 2), ct_scalar_float(1)));
    assert_non_null(ct_add_(m, ct_expand(ct_ones(CT_SHAPE(1, 4), CT_F32, CT_CPU), CT_SHAPE(3, 4))));
    ct_tensor *one_row = ct_as_strided(flat, CT_INDEX(1, 4), CT_INDEX((int64_t)1 << 50, 1), 2, 0);
    assert_non_null(ct_add_scalar_(one_row, ct_scalar_float(1)));
    assert_true(ct_test_at(m, 0) == 3.0 && ct_test_at(m, 1) == 2.0);
    ct_scope_end();
}

/* ------------------------------------------------------------------ sizes (8, 9, 9b, 17, 19, 25) */

/* ct_tril_indices.c: counted cell by cell before any check. */
static void test_tril_indices_sizes(void **state) {
    (void)state;
    ct_scope_begin();
    alarm(30);
    double t0 = now_s();
    int64_t big = (int64_t)1 << 40;
    CT_ASSERT_ERR(ct_tril_indices(big, big, 0, CT_DTYPE_UNDEFINED, CT_META) != NULL, CT_ERROR_VALUE, "overflows int64");
    ct_tensor *r = ct_tril_indices(big, 0, 0, CT_DTYPE_UNDEFINED, CT_CPU); /* no columns: no indices */
    assert_non_null(r);
    assert_int_equal(ct_tensor_size(r, 1), 0);
    r = ct_tril_indices(big, 2, -big + 1, CT_DTYPE_UNDEFINED, CT_CPU); /* the last row holds (big - 1, 0) */
    assert_non_null(r);
    assert_int_equal(ct_tensor_size(r, 1), 1);
    assert_true(ct_test_at(r, 0) == (double)(big - 1) && ct_test_at(r, 1) == 0.0);
    r = ct_triu_indices(big, 3, 1, CT_DTYPE_UNDEFINED, CT_META); /* 2 + 1 */
    assert_non_null(r);
    assert_int_equal(ct_tensor_size(r, 1), 3);
    assert_true(now_s() - t0 < 5.0);
    alarm(0);
    /* small triangles against the cell-by-cell count */
    for (int64_t rows = 0; rows < 6; rows++)
        for (int64_t cols = 0; cols < 6; cols++)
            for (int64_t off = -7; off <= 7; off++)
                for (int lower = 0; lower < 2; lower++) {
                    ct_tensor *t = lower ? ct_tril_indices(rows, cols, off, CT_DTYPE_UNDEFINED, CT_CPU)
                                         : ct_triu_indices(rows, cols, off, CT_DTYPE_UNDEFINED, CT_CPU);
                    assert_non_null(t);
                    int64_t k = 0, n = ct_tensor_size(t, 1);
                    for (int64_t i = 0; i < rows; i++)
                        for (int64_t j = 0; j < cols; j++)
                            if (lower ? j - i <= off : j - i >= off) {
                                assert_true(k < n);
                                assert_true(ct_test_at(t, k) == (double)i && ct_test_at(t, n + k) == (double)j);
                                k++;
                            }
                    assert_int_equal(k, n);
                }
    ct_scope_end();
}

/* ct_max_pool2d.c: a kernel of 2^31 rows was walked row by row. */
static void test_max_pool_huge_kernel(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_ones(CT_SHAPE(1, 64, 3, 64), CT_F32, CT_CPU);
    int64_t kernel[2] = {(int64_t)1 << 31, 3}, padding[2] = {2, 1}, dilation[2] = {1, 1};
    alarm(30);
    double t0 = now_s();
    ct_tensor *r = ct_max_pool2d(x, kernel, NULL, padding, dilation, true, NULL);
    if (r) /* the padding is at most half the kernel, so some windows may fit */
        assert_true(ct_test_at(r, 0) == 1.0);
    assert_true(now_s() - t0 < 5.0);
    /* a window clipped at both ends gives the same answer as the full walk */
    ct_tensor *y = ct_arange(ct_scalar_int(0), ct_scalar_int(25), ct_scalar_int(1), CT_F32, CT_CPU);
    y = ct_reshape(y, CT_SHAPE(1, 1, 5, 5));
    int64_t k5[2] = {5, 5}, p2[2] = {2, 2}, s1[2] = {1, 1}, d1[2] = {1, 1};
    ct_tensor *ind = NULL;
    ct_tensor *m = ct_max_pool2d(y, k5, s1, p2, d1, false, &ind);
    assert_non_null(m);
    assert_true(ct_test_at(m, 0) == 12.0 && ct_test_at(m, 24) == 24.0 && ct_test_at(ind, 0) == 12.0);
    alarm(0);
    ct_scope_end();
}

/* ct_bmm.c: a product over 2^40 empty batches looped over every batch. */
static void test_bmm_empty_batches(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_zeros(CT_SHAPE((int64_t)1 << 40, 0, 0), CT_F32, CT_CPU);
    assert_non_null(a);
    alarm(30);
    double t0 = now_s();
    ct_tensor *r = ct_bmm(a, a);
    assert_non_null(r);
    assert_int_equal(ct_tensor_numel(r), 0);
    assert_true(now_s() - t0 < 5.0);
    alarm(0);
    ct_scope_end();
}

/* ct_pad.c, ct_conv2d.c, ct_conv_transpose2d.c: output sizes wrapped around. */
static void test_window_sizes_overflow(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    int64_t pad[2] = {INT64_MAX, INT64_MAX};
    CT_ASSERT_ERR(ct_pad(a, pad, 2, "constant", 7.0) != NULL, CT_ERROR_VALUE, "overflows int64");
    int64_t pad_min[2] = {INT64_MIN, 0};
    CT_ASSERT_ERR(ct_pad(ct_ones(CT_SHAPE(1, 3), CT_F32, CT_CPU), pad_min, 2, "circular", 0.0) != NULL, CT_ERROR_VALUE,
                  "overflows int64");
    ct_tensor *x = ct_ones(CT_SHAPE(1, 1, 5, 5), CT_F32, CT_CPU);
    ct_tensor *w = ct_ones(CT_SHAPE(1, 1, 3, 3), CT_F32, CT_CPU);
    int64_t big = (int64_t)1 << 62;
    int64_t stride[2] = {big, 1}, padding[2] = {big, 0}, dilation[2] = {big, 1};
    CT_ASSERT_ERR(ct_conv2d(x, w, NULL, stride, padding, dilation, 1) != NULL, CT_ERROR_VALUE, "overflow int64");
    ct_tensor *w2 = ct_ones(CT_SHAPE(1, 1, 2, 2), CT_F32, CT_CPU);
    int64_t ts[2] = {big, 1}, tp[2] = {0, 0}, td[2] = {1, 1};
    CT_ASSERT_ERR(ct_conv_transpose2d(x, w2, NULL, ts, tp, NULL, 1, td) != NULL, CT_ERROR_VALUE, "overflow int64");
    int64_t pk[2] = {INT64_MAX, 2}, ps[2] = {INT64_MAX, 1}, pp[2] = {0, 0}, pd[2] = {2, 1};
    CT_ASSERT_ERR(ct_max_pool2d(x, pk, ps, pp, pd, true, NULL) != NULL, CT_ERROR_VALUE, "overflow int64");
    int64_t ak[2] = {2, 2}, as[2] = {INT64_MAX, 1}, ap[2] = {1, 0};
    ct_tensor *avg = ct_avg_pool2d(x, ak, as, ap, true, true, 0); /* one window per row */
    assert_non_null(avg);
    assert_int_equal(ct_tensor_size(avg, 2), 1);
    /* a stride beyond the input is still one window, as before */
    int64_t s9[2] = {9, 9}, zero[2] = {0, 0}, one[2] = {1, 1};
    ct_tensor *c = ct_conv2d(x, w, NULL, s9, zero, one, 1);
    assert_non_null(c);
    assert_true(ct_tensor_size(c, 2) == 1 && ct_test_at(c, 0) == 9.0);
    ct_scope_end();
}

/* ct_split.c, ct_chunk.c, ct_split_with_sizes.c, ct_unbind.c, ct_repeat.c, ct_roll.c,
 * ct_cat.c, ct_kron.c: counts and size sums near INT64_MAX. */
static void test_split_family_sizes(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    ct_tensor *out[8] = {0};
    assert_int_equal(ct_split(a, INT64_MAX, 0, out, 8), 1);
    assert_int_equal(ct_tensor_size(out[0], 0), 3);
    assert_int_equal(ct_chunk(a, INT64_MAX, 0, out, 8), 3);
    assert_int_equal(ct_tensor_size(out[2], 0), 1);
    ct_tensor *t = ct_zeros(CT_SHAPE(2, 0, 4), CT_F32, CT_CPU);
    int64_t sizes[2] = {INT64_MAX, INT64_MAX};
    CT_ASSERT_ERR(ct_split_with_sizes(t, sizes, -98, 1, out, 8) >= 0, CT_ERROR_VALUE, "non-negative");
    CT_ASSERT_ERR(ct_split_with_sizes(t, NULL, 5, 1, out, 8) >= 0, CT_ERROR_NULL_ARGUMENT, "split_sizes is NULL");
    CT_ASSERT_ERR(ct_split_with_sizes(t, sizes, 2, 1, out, 8) >= 0, CT_ERROR_VALUE, "to sum exactly to 0");
    ct_tensor *e = ct_expand(ct_ones(CT_SHAPE(1, 3), CT_F32, CT_CPU), CT_SHAPE((int64_t)1 << 31, 3));
    memset(out, 0, sizeof out);
    CT_ASSERT_ERR(ct_unbind(e, 0, out, 8) >= 0, CT_ERROR_VALUE, "too many pieces");
    assert_null(out[0]);
    int64_t reps[1] = {((int64_t)1 << 62) + 1};
    CT_ASSERT_ERR(ct_repeat(ct_ones(CT_SHAPE(4), CT_F32, CT_CPU), reps, 1) != NULL, CT_ERROR_VALUE, "overflows int64");
    ct_tensor *one = ct_ones(CT_SHAPE(1), CT_F32, CT_CPU);
    ct_tensor *e62 = ct_expand(one, CT_SHAPE((int64_t)1 << 62));
    const ct_tensor *ts[4] = {e62, e62, e62, e62};
    CT_ASSERT_ERR(ct_cat(ts, 4, 0) != NULL, CT_ERROR_VALUE, "overflows int64");
    ct_tensor *e32 = ct_expand(one, CT_SHAPE((int64_t)1 << 32));
    CT_ASSERT_ERR(ct_kron(e32, e32) != NULL, CT_ERROR_VALUE, "overflows int64");
    /* roll of a 2^62 + 1 view by 2^62: the right shift, then no memory for the copy */
    ct_tensor *r62 = ct_expand(one, CT_SHAPE(((int64_t)1 << 62) + 1));
    int64_t shift = (int64_t)1 << 62, dim = 0;
    assert_null(ct_roll(r62, &shift, &dim, 1));
    assert_int_not_equal(ct_last_status(), CT_OK);
    /* small rolls by negative and huge shifts */
    ct_tensor *v = ct_arange(ct_scalar_int(0), ct_scalar_int(5), ct_scalar_int(1), CT_F32, CT_CPU);
    int64_t s2 = INT64_MIN; /* INT64_MIN % 5 == -3: a roll by 2 */
    ct_tensor *rv = ct_roll(v, &s2, &dim, 1);
    assert_true(ct_test_at(rv, 0) == 3.0 && ct_test_at(rv, 2) == 0.0);
    ct_scope_end();
}

/* ct_diag.c, ct_round_decimals.c, ct_cov.c, ct_neg.c: INT64_MIN negated in int64. */
static void test_int64_min_arguments(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_diag(a, INT64_MIN) != NULL, CT_ERROR_VALUE, "overflows int64");
    CT_ASSERT_ERR(ct_diag_embed(a, INT64_MIN, 0, 1) != NULL, CT_ERROR_VALUE, "overflows int64");
    ct_tensor *r = ct_round_decimals(a, INT64_MIN); /* 10^|d| in double, as PyTorch: infinite */
    assert_non_null(r);
    ct_tensor *c = ct_cov(a, INT64_MIN + 1); /* a positive denominator */
    assert_non_null(c);
    assert_true(ct_test_at(c, 0) == 0.0);
    ct_tensor *m = ct_full(CT_SHAPE(2), ct_scalar_int(INT64_MIN), CT_I64, CT_CPU);
    ct_tensor *n = ct_neg(m), *ab = ct_abs(m);
    assert_non_null(n);
    assert_true(((const int64_t *)ct_tensor_data(n))[0] == INT64_MIN); /* wraps, as PyTorch */
    assert_true(((const int64_t *)ct_tensor_data(ab))[1] == INT64_MIN);
    ct_tensor *m32 = ct_full(CT_SHAPE(2), ct_scalar_int(INT32_MIN), CT_I32, CT_CPU);
    assert_true(((const int32_t *)ct_tensor_data(ct_neg(m32)))[0] == INT32_MIN);
    ct_tensor *m8 = ct_full(CT_SHAPE(2), ct_scalar_int(-128), CT_I8, CT_CPU);
    assert_true(((const int8_t *)ct_tensor_data(ct_abs(m8)))[0] == -128);
    ct_scope_end();
}

/* ct_sum.c, ct_iter_build.c: huge strides on empty dims became byte strides. */
static void test_huge_strides_on_empty(void **state) {
    (void)state;
    ct_scope_begin();
    int64_t shape[2] = {4, 0}, strides[2] = {1, (int64_t)1 << 62};
    ct_tensor *a = ct_empty_strided(shape, strides, 2, CT_F64, CT_CPU);
    assert_non_null(a);
    int64_t dim = 1;
    ct_tensor *s = ct_sum(a, &dim, 1, false, CT_DTYPE_UNDEFINED);
    assert_non_null(s);
    assert_true(ct_test_at(s, 3) == 0.0);
    assert_non_null(ct_cumsum(a, 0, CT_DTYPE_UNDEFINED));
    int64_t shape2[2] = {0, 4}, strides2[2] = {(int64_t)1 << 62, 1};
    ct_tensor *b = ct_empty_strided(shape2, strides2, 2, CT_F64, CT_CPU);
    ct_tensor *r = ct_add(b, b);
    assert_non_null(r);
    assert_int_equal(ct_tensor_numel(r), 0);
    /* a size-1 dim with a huge stride is read as usual */
    int64_t shape3[2] = {1, 2}, strides3[2] = {(int64_t)1 << 62, 1};
    ct_tensor *c = ct_empty_strided(shape3, strides3, 2, CT_F64, CT_CPU);
    assert_non_null(ct_fill_(c, ct_scalar_float(2)));
    ct_tensor *sc = ct_sum(c, NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_true(ct_test_at(sc, 0) == 4.0);
    assert_true(ct_test_at(ct_mul(c, c), 1) == 4.0);
    ct_scope_end();
}

/* ------------------------------------------------------------------ values (3, 16, 18) */

/* ct_einsum.c: a letter three times in one operand with unequal sizes. */
static void test_einsum_triple_letter(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_zeros(CT_SHAPE(2, 3, 3), CT_F32, CT_CPU);
    const ct_tensor *ops[1] = {x};
    CT_ASSERT_ERR(ct_einsum("aaa->a", ops, 1) != NULL, CT_ERROR_VALUE, "subscript a is repeated for operand 0");
    ct_tensor *y = ct_ones(CT_SHAPE(3, 3, 3), CT_F32, CT_CPU);
    const ct_tensor *ops2[1] = {y};
    ct_tensor *d = ct_einsum("aaa->a", ops2, 1);
    assert_non_null(d);
    assert_int_equal(ct_tensor_size(d, 0), 3);
    ct_scope_end();
}

/* ct_isinf.c: isinf(-inf) stored the byte 255. */
static void test_isinf_bool_bytes(void **state) {
    (void)state;
    ct_scope_begin();
    float v[3] = {INFINITY, -INFINITY, 1.0f};
    ct_tensor *x = ct_from_data(v, CT_SHAPE(3), CT_F32);
    ct_tensor *m = ct_isinf(x);
    const uint8_t *p = ct_tensor_data(m);
    assert_true(p[0] == 1 && p[1] == 1 && p[2] == 0);
    ct_tensor *e = ct_eq_scalar(m, ct_scalar_bool(true));
    assert_true(ct_test_at(e, 1) == 1.0);
    double dv[2] = {-INFINITY, NAN};
    ct_tensor *xd = ct_from_data(dv, CT_SHAPE(2), CT_F64);
    assert_true(((const uint8_t *)ct_tensor_data(ct_isinf(xd)))[0] == 1);
    assert_true(((const uint8_t *)ct_tensor_data(ct_isnan(xd)))[1] == 1);
    assert_true(((const uint8_t *)ct_tensor_data(ct_isfinite(xd)))[0] == 0);
    ct_scope_end();
}

/* ct_addcmul.c: a float value on integer tensors was cast unchecked. */
static void test_addcmul_value_on_integers(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(3), CT_I64, CT_CPU);
    CT_ASSERT_ERR(ct_addcmul(a, a, a, ct_scalar_float(NAN)) != NULL, CT_ERROR_VALUE,
                  "value cannot be converted to type int64_t without overflow");
    CT_ASSERT_ERR(ct_addcmul(a, a, a, ct_scalar_float(1e300)) != NULL, CT_ERROR_VALUE, "without overflow");
    CT_ASSERT_ERR(ct_addcmul(a, a, a, ct_scalar_float(INFINITY)) != NULL, CT_ERROR_VALUE, "without overflow");
    ct_tensor *r = ct_addcmul(a, a, a, ct_scalar_float(2.0)); /* 1 + 2 * 1 * 1 */
    assert_non_null(r);
    assert_true(ct_test_at(r, 0) == 3.0);
    /* floats keep their NaN */
    ct_tensor *f = ct_ones(CT_SHAPE(2), CT_F32, CT_CPU);
    ct_tensor *fr = ct_addcmul(f, f, f, ct_scalar_float(NAN));
    assert_non_null(fr);
    assert_true(isnan(ct_test_at(fr, 0)));
    /* a NaN alpha on floats is computed, not cast to an integer */
    assert_non_null(ct_add_alpha(f, f, ct_scalar_float(NAN)));
    ct_scope_end();
}

/* An empty view may sit at any offset; its data pointer is the storage's, and ops over
 * it compute nothing (finding 25: offset * itemsize overflowed in ct_tensor_ptr). */
static void test_empty_view_huge_offset(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(4), CT_F32, CT_CPU);
    ct_tensor *v = ct_as_strided(a, (const int64_t[]){0, 3}, (const int64_t[]){1, 1}, 2, INT64_MAX - 3);
    assert_non_null(v);
    assert_ptr_equal(ct_tensor_data(v), ct_tensor_data(a));
    ct_tensor *s = ct_add(v, v);
    assert_non_null(s);
    assert_int_equal(ct_tensor_numel(s), 0);
    double x = -1;
    assert_int_equal(ct_item_double(ct_sum(v, NULL, 0, false, CT_DTYPE_UNDEFINED), &x), CT_OK);
    assert_true(x == 0);
    assert_non_null(ct_copy_(v, ct_zeros(CT_SHAPE(0, 3), CT_F32, CT_CPU)));
    ct_scope_end();
}

/* Found by the op fuzzer (finding 25's class): an elementwise op over empty tensors of
 * shape (0, 3, 1, 2^62) merged every dim of the empty iteration (their strides are 0)
 * and multiplied the sizes 3 x 2^62 past int64. */
static void test_empty_huge_dims_elementwise(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *e = ct_empty(CT_SHAPE(0, 3, 1, INT64_C(1) << 62), CT_BOOL, CT_CPU);
    CT_ASSERT_OK(e);
    ct_tensor *f = ct_empty(CT_SHAPE(0, 3, 1, INT64_C(1) << 62), CT_F32, CT_CPU);
    CT_ASSERT_OK(f);
    ct_tensor *r = ct_hypot(f, f);
    CT_ASSERT_OK(r);
    assert_int_equal(ct_tensor_dim(r), 4);
    assert_true(ct_tensor_size(r, 3) == INT64_C(1) << 62 && ct_tensor_numel(r) == 0);
    CT_ASSERT_OK(ct_logical_and(e, e));
    ct_scope_end();
}

/* The same shapes through the dim-wise CPU loops (index_select, index_add, sort): the
 * elements after dim 0 of a (0, 3, 2^62) tensor overflowed int64 (a fuzz_ops input
 * with seed 2: signed overflow in index_select), and sort would have looped over them
 * for an empty row. */
static void test_empty_huge_dims_dimwise(void **state) {
    (void)state;
    ct_scope_begin();
    const int64_t huge = INT64_C(1) << 62;
    ct_tensor *t = ct_empty(CT_SHAPE(0, 3, huge), CT_F32, CT_CPU);
    CT_ASSERT_OK(t);
    ct_tensor *none = ct_empty(CT_SHAPE(0), CT_I64, CT_CPU);
    ct_tensor *r = ct_index_select(t, 0, none);
    CT_ASSERT_OK(r);
    assert_true(ct_tensor_size(r, 2) == huge && ct_tensor_numel(r) == 0);
    CT_ASSERT_ERR(ct_index_select(t, 0, ct_zeros(CT_SHAPE(1), CT_I64, CT_CPU)) != NULL, CT_ERROR_VALUE, "overflows");
    ct_tensor *idx = NULL;
    ct_tensor *s = ct_sort(t, 0, false, &idx);
    CT_ASSERT_OK(s);
    assert_true(ct_tensor_numel(s) == 0 && ct_tensor_numel(idx) == 0 && ct_tensor_size(s, 2) == huge);
    CT_ASSERT_OK(ct_index_add(ct_empty(CT_SHAPE(0, 3, huge), CT_F32, CT_CPU), 0, none, t, ct_scalar_int(1)));
    CT_ASSERT_OK(ct_index_fill(t, 0, none, ct_scalar_int(1)));
    /* einsum's sum over j and k, and nll_loss's positions after the class dim */
    ct_tensor *e = ct_einsum("ijk->i", (const ct_tensor *[]){t}, 1);
    CT_ASSERT_OK(e);
    assert_true(ct_tensor_dim(e) == 1 && ct_tensor_size(e, 0) == 0);
    ct_tensor *l = ct_nll_loss(ct_empty(CT_SHAPE(0, 2, 3, huge), CT_F32, CT_CPU),
                               ct_empty(CT_SHAPE(0, 3, huge), CT_I64, CT_CPU), NULL, CT_REDUCTION_SUM, -100);
    CT_ASSERT_OK(l);
    ct_scope_end();
}

/* addmm/baddbmm on integers: beta and alpha convert as PyTorch's checked conversion
 * does (a float truncated; one the dtype cannot hold refused), where a float beta of
 * 3.5e38 reached a cast to int64 (UB; fuzz_ops, seed 2). Values from PyTorch 2.15. */
static void test_addmm_integer_scalars(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(2, 2), CT_I16, CT_CPU);
    CT_ASSERT_ERR(ct_addmm(a, a, a, ct_scalar_float(3.5e38), ct_scalar_int(1)) != NULL, CT_ERROR_VALUE,
                  "value cannot be converted to type int16_t without overflow");
    CT_ASSERT_ERR(ct_addmm(a, a, a, ct_scalar_int(70000), ct_scalar_int(1)) != NULL, CT_ERROR_VALUE,
                  "int16_t without overflow");
    CT_ASSERT_ERR(ct_baddbmm(ct_unsqueeze(a, 0), ct_unsqueeze(a, 0), ct_unsqueeze(a, 0), ct_scalar_int(1),
                             ct_scalar_float(NAN)) != NULL,
                  CT_ERROR_VALUE, "without overflow");
    ct_tensor *l = ct_ones(CT_SHAPE(2, 2), CT_I64, CT_CPU);
    CT_ASSERT_ERR(ct_addmm(l, l, l, ct_scalar_float(9223372036854775808.0), ct_scalar_int(1)) != NULL,
                  CT_ERROR_VALUE, "int64_t without overflow");
    double v;
    ct_tensor *r = ct_addmm(a, a, a, ct_scalar_float(0.5), ct_scalar_int(1)); /* beta 0: 2 */
    CT_ASSERT_OK(r);
    assert_int_equal(ct_tensor_get(r, CT_INDEX(1, 0), &v), CT_OK);
    assert_true(v == 2);
    r = ct_addmm(a, a, a, ct_scalar_int(1), ct_scalar_float(2.5)); /* alpha 2: 5 */
    CT_ASSERT_OK(r);
    assert_int_equal(ct_tensor_get(r, CT_INDEX(0, 1), &v), CT_OK);
    assert_true(v == 5);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_view_huge_offset),
        cmocka_unit_test(test_meta_index_cpu_self),
        cmocka_unit_test(test_meta_mask_cpu_self),
        cmocka_unit_test(test_conv2d_backward_devices),
        cmocka_unit_test(test_scatter_src_checked),
        cmocka_unit_test(test_index_add_counts),
        cmocka_unit_test(test_index_select_scalar),
        cmocka_unit_test(test_index_select_empty),
        cmocka_unit_test(test_internal_overlap),
        cmocka_unit_test(test_tril_indices_sizes),
        cmocka_unit_test(test_max_pool_huge_kernel),
        cmocka_unit_test(test_bmm_empty_batches),
        cmocka_unit_test(test_window_sizes_overflow),
        cmocka_unit_test(test_split_family_sizes),
        cmocka_unit_test(test_int64_min_arguments),
        cmocka_unit_test(test_huge_strides_on_empty),
        cmocka_unit_test(test_einsum_triple_letter),
        cmocka_unit_test(test_isinf_bool_bytes),
        cmocka_unit_test(test_addcmul_value_on_integers),
        cmocka_unit_test(test_empty_huge_dims_elementwise),
        cmocka_unit_test(test_empty_huge_dims_dimwise),
        cmocka_unit_test(test_addmm_integer_scalars),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
