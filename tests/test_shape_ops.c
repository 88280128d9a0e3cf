/* Shape and indexing ops: cat, stack, split family, flip, roll, repeat, tile,
 * tril/triu, index_select, gather, scatter_add, index_add, masked_fill, nonzero, sort,
 * topk. Expected values were produced by PyTorch 1.13 (tests/golden/shape_ops.py
 * prints them). */
#include <math.h>
#include <string.h>

#include "testutil.h"

static void expect_values(const ct_tensor *t, const double *want, int64_t n) {
    assert_non_null(t);
    assert_int_equal(ct_tensor_numel(t), n);
    for (int64_t i = 0; i < n; i++) {
        double v = ct_test_at(t, i);
        if (!(v == want[i] || (isnan(v) && isnan(want[i]))))
            fail_msg("element %lld: got %g want %g", (long long)i, v, want[i]);
    }
}
#define EXPECT(t, ...) expect_values((t), (const double[]){__VA_ARGS__}, (int64_t)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)))

static ct_tensor *grid(void) { /* arange(12.).view(3, 4) */
    return ct_view(ct_arange(ct_scalar_int(0), ct_scalar_int(12), ct_scalar_int(1), CT_F32, CT_CPU), CT_SHAPE(3, 4));
}

static void test_cat_stack(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_view(ct_arange(ct_scalar_int(0), ct_scalar_int(6), ct_scalar_int(1), CT_F32, CT_CPU), CT_SHAPE(2, 3));
    ct_tensor *b = ct_view(ct_arange(ct_scalar_int(0), ct_scalar_int(4), ct_scalar_int(1), CT_I32, CT_CPU), CT_SHAPE(2, 2));
    const ct_tensor *ab[2] = {a, b};
    ct_tensor *c = ct_cat(ab, 2, 1);
    assert_int_equal(ct_tensor_dtype(c), CT_F32);
    CT_ASSERT_SHAPE(c, 2, 5);
    EXPECT(c, 0, 1, 2, 0, 1, 3, 4, 5, 2, 3);
    const ct_tensor *ea[2] = {ct_empty(CT_SHAPE(0), CT_F32, CT_CPU), a};
    CT_ASSERT_SHAPE(ct_cat(ea, 2, 0), 2, 3); /* 1-D empty tensors are skipped */
    CT_ASSERT_ERR(ct_cat(ab, 2, 0) != NULL, CT_ERROR_VALUE,
                  "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 2 for tensor number 1 in the list.");
    CT_ASSERT_ERR(ct_cat(ab, 0, 0) != NULL, CT_ERROR_VALUE, "non-empty list");
    const ct_tensor *z[1] = {ct_zeros(NULL, 0, CT_F32, CT_CPU)};
    CT_ASSERT_ERR(ct_cat(z, 1, 0) != NULL, CT_ERROR_VALUE, "zero-dimensional tensor (at position 0)");
    int64_t v1[] = {1, 2}, v2[] = {3, 4};
    const ct_tensor *st[2] = {ct_from_data(v1, CT_SHAPE(2), CT_I64), ct_from_data(v2, CT_SHAPE(2), CT_I64)};
    ct_tensor *s = ct_stack(st, 2, 1);
    CT_ASSERT_SHAPE(s, 2, 2);
    EXPECT(s, 1, 3, 2, 4);
    const ct_tensor *bad[2] = {a, b};
    CT_ASSERT_ERR(ct_stack(bad, 2, 0) != NULL, CT_ERROR_VALUE, "stack expects each tensor to be equal size");
    ct_tensor *ma = ct_empty(CT_SHAPE(2, 3), CT_F32, CT_META);
    const ct_tensor *mm[2] = {ma, ma};
    CT_ASSERT_SHAPE(ct_cat(mm, 2, 0), 4, 3);
    ct_scope_end();
}

static void test_split_family(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_arange(ct_scalar_int(0), ct_scalar_int(5), ct_scalar_int(1), CT_DTYPE_UNDEFINED, CT_CPU);
    ct_tensor *parts[8];
    assert_int_equal(ct_split(x, 2, 0, parts, 8), 3);
    EXPECT(parts[0], 0, 1);
    EXPECT(parts[2], 4);
    assert_true(ct_tensor_shares_storage(parts[1], x)); /* pieces are views */
    assert_int_equal(ct_chunk(x, 3, 0, parts, 8), 3);
    assert_int_equal(ct_tensor_numel(parts[2]), 1);
    ct_tensor *six = ct_arange(ct_scalar_int(0), ct_scalar_int(6), ct_scalar_int(1), CT_DTYPE_UNDEFINED, CT_CPU);
    assert_int_equal(ct_chunk(six, 4, 0, parts, 8), 3); /* fewer chunks than asked, as torch.chunk */
    assert_int_equal(ct_split_with_sizes(six, CT_INDEX(1, 5), 2, 0, parts, 8), 2);
    EXPECT(parts[1], 1, 2, 3, 4, 5);
    CT_ASSERT_ERR(ct_split_with_sizes(six, CT_INDEX(1, 4), 2, 0, parts, 8) >= 0, CT_ERROR_VALUE, "sum exactly to 6");
    ct_tensor *g = grid();
    assert_int_equal(ct_unbind(g, 1, parts, 8), 4);
    EXPECT(parts[3], 3, 7, 11);
    CT_ASSERT_ERR(ct_chunk(x, 0, 0, parts, 8) >= 0, CT_ERROR_VALUE, "greater than 0");
    ct_scope_end();
}

static void test_flip_roll_repeat_tri(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *t = grid();
    EXPECT(ct_flip(t, CT_INDEX(0, 1), 2), 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    CT_ASSERT_ERR(ct_flip(t, CT_INDEX(0, 0), 2) != NULL, CT_ERROR_VALUE, "appears multiple times");
    EXPECT(ct_roll(t, CT_INDEX(1), CT_INDEX(1), 1), 3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10);
    EXPECT(ct_roll(t, CT_INDEX(-1), NULL, 1), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0);
    int64_t v[] = {1, 2};
    ct_tensor *r = ct_repeat(ct_from_data(v, CT_SHAPE(2), CT_I64), CT_INDEX(2, 2), 2);
    CT_ASSERT_SHAPE(r, 2, 4);
    EXPECT(r, 1, 2, 1, 2, 1, 2, 1, 2);
    ct_tensor *tl = ct_tile(ct_from_data(v, CT_SHAPE(1, 2), CT_I64), CT_INDEX(2), 1);
    CT_ASSERT_SHAPE(tl, 1, 4);
    CT_ASSERT_ERR(ct_repeat(t, CT_INDEX(2), 1) != NULL, CT_ERROR_VALUE, "can not be smaller");
    EXPECT(ct_tril(t, -1), 0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0);
    EXPECT(ct_triu(t, 1), 0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11);
    CT_ASSERT_ERR(ct_tril(ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU), 0) != NULL, CT_ERROR_VALUE, "at least 2 dimensions");
    ct_scope_end();
}

static void test_gather_scatter(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *t = grid();
    int64_t gi[] = {0, 0, 1, 3, 2, 1};
    ct_tensor *idx = ct_from_data(gi, CT_SHAPE(3, 2), CT_I64);
    EXPECT(ct_gather(t, 1, idx), 0, 0, 5, 7, 10, 9);
    int64_t si[] = {0, 0, 1, 3, 2, 2};
    ct_tensor *sidx = ct_from_data(si, CT_SHAPE(3, 2), CT_I64);
    ct_tensor *z = ct_zeros(CT_SHAPE(3, 4), CT_F32, CT_CPU);
    EXPECT(ct_scatter_add(z, 1, sidx, ct_ones(CT_SHAPE(3, 2), CT_F32, CT_CPU)), 2, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 0);
    EXPECT(z, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0); /* out of place */
    ct_scatter_add_(z, 1, sidx, ct_ones(CT_SHAPE(3, 2), CT_F32, CT_CPU));
    assert_true(ct_test_at(z, 0) == 2);
    int64_t ai[] = {0, 2, 0};
    ct_tensor *src = ct_view(ct_arange(ct_scalar_int(0), ct_scalar_int(6), ct_scalar_int(1), CT_F32, CT_CPU), CT_SHAPE(3, 2));
    EXPECT(ct_index_add(ct_zeros(CT_SHAPE(3, 2), CT_F32, CT_CPU), 0, ct_from_data(ai, CT_SHAPE(3), CT_I64), src,
                        ct_scalar_int(2)),
           8, 12, 0, 0, 4, 6);
    int64_t xi[] = {2, 0};
    EXPECT(ct_index_select(t, 0, ct_from_data(xi, CT_SHAPE(2), CT_I64)), 8, 9, 10, 11, 0, 1, 2, 3);
    /* no negative indices, as in PyTorch */
    int64_t neg[] = {-1};
    CT_ASSERT_ERR(ct_index_select(t, 1, ct_from_data(neg, CT_SHAPE(1), CT_I64)) != NULL, CT_ERROR_INDEX,
                  "index out of range in self");
    CT_ASSERT_ERR(ct_gather(t, 1, ct_from_data(neg, CT_SHAPE(1, 1), CT_I64)) != NULL, CT_ERROR_INDEX,
                  "index -1 is out of bounds for dimension 1 with size 4");
    int64_t oob[] = {3};
    CT_ASSERT_ERR(ct_index_select(t, 0, ct_from_data(oob, CT_SHAPE(1), CT_I64)) != NULL, CT_ERROR_INDEX,
                  "index out of range in self (index 3, size 3)");
    CT_ASSERT_ERR(ct_gather(t, 1, ct_ones(CT_SHAPE(3, 2), CT_F32, CT_CPU)) != NULL, CT_ERROR_TYPE,
                  "gather(): Expected dtype int32/int64 for index");
    CT_ASSERT_ERR(ct_gather(t, 1, ct_zeros(CT_SHAPE(3), CT_I64, CT_CPU)) != NULL, CT_ERROR_VALUE,
                  "same number of dimensions");
    CT_ASSERT_ERR(ct_scatter_add(z, 1, sidx, ct_ones(CT_SHAPE(3, 2), CT_F64, CT_CPU)) != NULL, CT_ERROR_TYPE, "dtype");
    ct_scope_end();
}

static void test_masked_nonzero(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *t = grid();
    uint8_t m[] = {1, 0, 1, 0};
    ct_tensor *mask = ct_from_data(m, CT_SHAPE(4), CT_BOOL);
    EXPECT(ct_masked_fill(t, mask, ct_scalar_float(-1)), -1, 1, -1, 3, -1, 5, -1, 7, -1, 9, -1, 11);
    CT_ASSERT_ERR(ct_masked_fill(t, ct_ones(CT_SHAPE(4), CT_U8, CT_CPU), ct_scalar_int(0)) != NULL, CT_ERROR_TYPE,
                  "boolean masks");
    ct_masked_fill_(t, mask, ct_scalar_int(7));
    assert_true(ct_test_at(t, 0) == 7);
    float nz[] = {0, 1, -0.0f, 2, 0, 3};
    ct_tensor *idx = ct_nonzero(ct_from_data(nz, CT_SHAPE(2, 3), CT_F32));
    CT_ASSERT_SHAPE(idx, 3, 2);
    EXPECT(idx, 0, 1, 1, 0, 1, 2);
    CT_ASSERT_ERR(ct_nonzero(ct_empty(CT_SHAPE(2), CT_F32, CT_META)) != NULL, CT_ERROR_NOT_IMPLEMENTED, "depends on the data");
    ct_scope_end();
}

static void test_sort_topk(void **state) {
    (void)state;
    ct_scope_begin();
    float xv[] = {3, NAN, 1, 3, -2};
    ct_tensor *x = ct_from_data(xv, CT_SHAPE(5), CT_F32), *idx;
    EXPECT(ct_sort(x, 0, false, &idx), -2, 1, 3, 3, NAN);
    EXPECT(idx, 4, 2, 0, 3, 1);
    EXPECT(ct_sort(x, 0, true, &idx), NAN, 3, 3, 1, -2);
    EXPECT(idx, 1, 0, 3, 2, 4);
    EXPECT(ct_argsort(x, -1, false), 4, 2, 0, 3, 1);
    float tv[] = {1, 5, 3, 5, 2};
    ct_tensor *y = ct_from_data(tv, CT_SHAPE(5), CT_F32);
    EXPECT(ct_topk(y, 3, 0, true, &idx), 5, 5, 3);
    EXPECT(idx, 1, 3, 2);
    EXPECT(ct_topk(y, 2, 0, false, &idx), 1, 2);
    EXPECT(idx, 0, 4);
    int64_t big[] = {INT64_MAX, INT64_MAX - 1, 0};
    EXPECT(ct_argsort(ct_from_data(big, CT_SHAPE(3), CT_I64), 0, false), 2, 1, 0); /* exact int64 order */
    CT_ASSERT_ERR(ct_topk(y, 6, 0, true, NULL) != NULL, CT_ERROR_INDEX, "selected index k out of range");
    ct_tensor *g = grid();
    ct_tensor *cols = ct_sort(g, 0, true, NULL);
    EXPECT(cols, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cat_stack),        cmocka_unit_test(test_split_family),
        cmocka_unit_test(test_flip_roll_repeat_tri), cmocka_unit_test(test_gather_scatter),
        cmocka_unit_test(test_masked_nonzero),   cmocka_unit_test(test_sort_topk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
