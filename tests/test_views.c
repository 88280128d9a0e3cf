/* View operations: each result is checked element by element against index math on
 * its input (contiguous, strided, offset, zero-size and 0-d inputs), plus storage and
 * version-counter sharing, META tensors and error inputs. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "tensor_impl.h"

/* ------------------------------------------------------------------ helpers */

/* A float64 tensor with the given strides (NULL: contiguous) whose logical element k
 * (row-major) holds 1000 + k, so every element is distinct and no value is 0. */
static ct_tensor *make_t(const int64_t *shape, int ndim, const int64_t *strides) {
    ct_tensor *t = strides ? ct_empty_strided(shape, strides, ndim, CT_F64, CT_CPU)
                           : ct_empty(shape, ndim, CT_F64, CT_CPU);
    CT_ASSERT_OK(t);
    int64_t n = ct_tensor_numel(t), idx[CT_MAX_DIMS];
    for (int64_t k = 0; k < n; k++) {
        int64_t r = k;
        for (int i = ndim - 1; i >= 0; i--) {
            idx[i] = r % shape[i];
            r /= shape[i];
        }
        assert_int_equal(ct_tensor_set(t, idx, (double)(1000 + k)), CT_OK);
    }
    return t;
}
#define SEQ(...) make_t(CT_SHAPE(__VA_ARGS__), NULL)

static ct_tensor *scalar_t(double v) {
    ct_tensor *t = ct_empty(NULL, 0, CT_F64, CT_CPU);
    CT_ASSERT_OK(t);
    assert_int_equal(ct_tensor_set(t, NULL, v), CT_OK);
    return t;
}

static double get(const ct_tensor *t, const int64_t *idx) {
    double v = -1;
    assert_int_equal(ct_tensor_get(t, idx, &v), CT_OK);
    return v;
}

/* Maps an index of the view to the index of its input that must hold the same value. */
typedef void (*map_fn)(const int64_t *out_idx, int64_t *in_idx, const void *ctx);

static void check_map_at(const ct_tensor *out, const ct_tensor *in, map_fn map, const void *ctx, const char *file,
                         int line) {
    if (!out) {
        print_error("%s:%d: view is NULL: %s\n", file, line, ct_last_error());
        _fail(file, line);
    }
    assert_true(ct_tensor_shares_storage(out, in));
    int nd = ct_tensor_dim(out);
    const int64_t *shape = ct_tensor_shape(out);
    int64_t n = ct_tensor_numel(out), o[CT_MAX_DIMS], i[CT_MAX_DIMS];
    for (int64_t k = 0; k < n; k++) {
        int64_t r = k;
        for (int d = nd - 1; d >= 0; d--) {
            o[d] = r % shape[d];
            r /= shape[d];
        }
        map(o, i, ctx);
        double a = get(out, o), b = get(in, i);
        if (a != b) {
            print_error("%s:%d: element %lld: view has %g, input has %g\n", file, line, (long long)k, a, b);
            _fail(file, line);
        }
    }
}
#define CHECK_MAP(out, in, map, ctx) check_map_at((out), (in), (map), (ctx), __FILE__, __LINE__)

/* Same elements in the same row-major order (view, reshape, flatten, unflatten). */
static void check_same_order_at(const ct_tensor *out, const ct_tensor *in, const char *file, int line) {
    if (!out) {
        print_error("%s:%d: result is NULL: %s\n", file, line, ct_last_error());
        _fail(file, line);
    }
    assert_int_equal(ct_tensor_numel(out), ct_tensor_numel(in));
    for (int64_t k = 0; k < ct_tensor_numel(in); k++) {
        if (ct_test_at(out, k) != ct_test_at(in, k)) {
            print_error("%s:%d: element %lld differs\n", file, line, (long long)k);
            _fail(file, line);
        }
    }
}
#define CHECK_ORDER(out, in) check_same_order_at((out), (in), __FILE__, __LINE__)

static void assert_strides_at(const ct_tensor *t, const int64_t *s, int n, const char *file, int line) {
    int ok = t && ct_tensor_dim(t) == n;
    for (int i = 0; ok && i < n; i++)
        ok = ct_tensor_strides(t)[i] == s[i];
    if (!ok) {
        print_error("%s:%d: strides differ\n", file, line);
        _fail(file, line);
    }
}
#define CT_ASSERT_STRIDES(t, ...) assert_strides_at((t), CT_SHAPE(__VA_ARGS__), __FILE__, __LINE__)

/* Inputs every element-wise check runs on: contiguous, transposed storage order,
 * sliced with an offset and a step. All (2, 3, 4). */
static void inputs_234(ct_tensor **out) {
    out[0] = SEQ(2, 3, 4);
    out[1] = make_t(CT_SHAPE(2, 3, 4), CT_INDEX(1, 2, 6));
    ct_tensor *big = SEQ(3, 4, 8);
    out[2] = ct_slice(ct_slice(ct_narrow(big, 0, 1, 2), 1, 1, 4, 1), 2, 1, 8, 2);
    CT_ASSERT_SHAPE(out[2], 2, 3, 4);
    assert_int_equal(ct_tensor_storage_offset(out[2]), 32 + 8 + 1);
}
#define NIN 3

/* ------------------------------------------------------------------ view / reshape */

static void test_view_contiguous(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = SEQ(2, 3, 4);
    ct_tensor *v = ct_view(x, CT_SHAPE(4, -1));
    CT_ASSERT_SHAPE(v, 4, 6);
    CT_ASSERT_STRIDES(v, 6, 1);
    CHECK_ORDER(v, x);
    CHECK_ORDER(ct_view(x, CT_SHAPE(24)), x);
    CHECK_ORDER(ct_view(x, CT_SHAPE(1, 2, 1, 12, 1)), x);
    CHECK_ORDER(ct_view(x, CT_SHAPE(-1, 1, 3, 2)), x);
    /* 0-d <-> one element */
    ct_tensor *s = scalar_t(7.5);
    ct_tensor *s1 = ct_view(s, CT_SHAPE(1, 1));
    CT_ASSERT_SHAPE(s1, 1, 1);
    CT_ASSERT_STRIDES(s1, 1, 1);
    assert_true(get(s1, CT_INDEX(0, 0)) == 7.5);
    ct_tensor *s0 = ct_view(s1, NULL, 0);
    assert_int_equal(ct_tensor_dim(s0), 0);
    assert_true(get(s0, NULL) == 7.5);
    CT_ASSERT_SHAPE(ct_view(s, CT_SHAPE(-1)), 1);
    /* zero-size: same shape keeps strides, another shape gets contiguous ones */
    ct_tensor *z = ct_empty(CT_SHAPE(0, 3), CT_F32, CT_CPU);
    CT_ASSERT_STRIDES(ct_view(z, CT_SHAPE(3, 0)), 1, 1);
    CT_ASSERT_SHAPE(ct_view(z, CT_SHAPE(-1, 5)), 0, 5);
    CT_ASSERT_STRIDES(ct_view(ct_slice(z, 1, 0, 2, 1), CT_SHAPE(0, 2)), 3, 1);
    /* sizes whose product overflows are fine next to a zero */
    CT_ASSERT_SHAPE(ct_view(z, CT_SHAPE(INT64_C(1) << 40, 0, INT64_C(1) << 40, INT64_C(1) << 40)),
                    INT64_C(1) << 40, 0, INT64_C(1) << 40, INT64_C(1) << 40);
    /* ... but, as in PyTorch, the running product must not overflow before it */
    CT_ASSERT_ERR(ct_view(z, CT_SHAPE(INT64_C(1) << 40, INT64_C(1) << 40, 0)) != NULL, CT_ERROR_VALUE, "overflows");
    CT_ASSERT_ERR(ct_reshape(z, CT_SHAPE(INT64_C(1) << 40, INT64_C(1) << 40, 0)) != NULL, CT_ERROR_VALUE,
                  "overflows");
    ct_scope_end();
}

static void test_view_noncontiguous(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *in[NIN];
    inputs_234(in);
    /* Strides (1, 2, 6): each dim is its own run, so only size-1 insertions work. */
    ct_tensor *v = ct_view(in[1], CT_SHAPE(2, 1, 3, 4));
    CT_ASSERT_STRIDES(v, 1, 6, 2, 6); /* torch gives these */
    CHECK_ORDER(v, in[1]);
    assert_null(ct_view(in[1], CT_SHAPE(6, 4)));
    ct_clear_error();
    /* Sliced, strides (32, 8, 2): dims 1 and 2 step over each other exactly (8 = 4 * 2)
     * and may be regrouped; dim 0 may not merge with them. */
    ct_tensor *w = ct_view(in[2], CT_SHAPE(2, 6, 2));
    CT_ASSERT_STRIDES(w, 32, 4, 2);
    CT_ASSERT_ERR(ct_view(in[2], CT_SHAPE(6, 4)) != NULL, CT_ERROR_VALUE, "Use .reshape(...) instead.");
    CHECK_ORDER(w, in[2]);
    assert_int_equal(ct_tensor_storage_offset(w), ct_tensor_storage_offset(in[2]));
    /* Expanded dims have stride 0: splitting them is fine, merging with others is not. */
    ct_tensor *e = ct_expand(SEQ(3), CT_SHAPE(4, 3));
    ct_tensor *ev = ct_view(e, CT_SHAPE(2, 2, 3));
    CT_ASSERT_STRIDES(ev, 0, 0, 1);
    CHECK_ORDER(ev, e);
    CT_ASSERT_ERR(ct_view(e, CT_SHAPE(12)) != NULL, CT_ERROR_VALUE, "spans across two contiguous subspaces");
    ct_scope_end();
}

static void test_reshape_view_or_copy(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *in[NIN];
    inputs_234(in);
    for (int k = 0; k < NIN; k++) {
        ct_tensor *r = ct_reshape(in[k], CT_SHAPE(-1));
        CT_ASSERT_SHAPE(r, 24);
        CHECK_ORDER(r, in[k]);
        ct_tensor *r2 = ct_reshape(in[k], CT_SHAPE(3, 2, 2, 2));
        CHECK_ORDER(r2, in[k]);
        /* A view exactly when view succeeds. */
        ct_tensor *v = ct_view(in[k], CT_SHAPE(-1));
        bool viewable = v != NULL;
        ct_clear_error();
        assert_int_equal(ct_tensor_shares_storage(r, in[k]), viewable);
        assert_true(k == 0 ? viewable : !viewable);
    }
    /* The copy is independent of its input and is not a view of anything. */
    ct_tensor *c = ct_reshape(in[1], CT_SHAPE(24));
    assert_false(c->is_view);
    assert_true(ct_tensor_is_contiguous(c));
    assert_int_equal(ct_tensor_set(c, CT_INDEX(0), -5.0), CT_OK);
    assert_true(get(in[1], CT_INDEX(0, 0, 0)) == 1000);
    ct_tensor *other = ct_empty(CT_SHAPE(4, 6), CT_F32, CT_CPU);
    CHECK_ORDER(ct_reshape_as(in[2], other), in[2]);
    CT_ASSERT_SHAPE(ct_view_as(in[0], other), 4, 6);
    ct_scope_end();
}

/* Every factorisation of 24 as a target, on every input layout: whenever view
 * succeeds its strides must reproduce the input's element order, and reshape always
 * does, sharing storage exactly when view succeeds. */
static void test_view_reshape_sweep(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *in[NIN + 3];
    inputs_234(in);
    in[NIN] = ct_expand(SEQ(1, 3, 1), CT_SHAPE(2, 3, 4));
    in[NIN + 1] = ct_unsqueeze(ct_permute(SEQ(4, 3, 2), CT_SHAPE(2, 1, 0)), 1);
    in[NIN + 2] = ct_select(ct_unfold(SEQ(2, 3, 10), 2, 4, 2), 3, 1);
    static const int64_t targets[][5] = {{24}, {2, 12}, {12, 2}, {4, 6}, {6, 4}, {3, 8}, {8, 3}, {2, 3, 4}, {4, 3, 2},
                                         {2, 2, 6}, {6, 2, 2}, {2, 6, 2}, {1, 24}, {24, 1}, {2, 1, 12}, {3, 2, 2, 2},
                                         {2, 3, 2, 2}, {2, 2, 3, 2}, {2, 2, 2, 3}, {1, 2, 1, 3, 4}};
    int viewed = 0, copied = 0;
    for (int k = 0; k < NIN + 3; k++) {
        CT_ASSERT_OK(in[k]);
        assert_int_equal(ct_tensor_numel(in[k]), 24);
        for (size_t c = 0; c < sizeof targets / sizeof targets[0]; c++) {
            int n = 0;
            while (n < 5 && targets[c][n])
                n++;
            ct_tensor *v = ct_view(in[k], targets[c], n);
            if (v) {
                CHECK_ORDER(v, in[k]);
                assert_true(ct_tensor_shares_storage(v, in[k]));
                viewed++;
            } else {
                assert_non_null(strstr(ct_last_error(), "Use .reshape(...) instead."));
                ct_clear_error();
                copied++;
            }
            ct_tensor *r = ct_reshape(in[k], targets[c], n);
            CHECK_ORDER(r, in[k]);
            assert_int_equal(ct_tensor_shares_storage(r, in[k]), v != NULL);
        }
    }
    assert_true(viewed > 20 && copied > 20); /* both paths were exercised */
    ct_scope_end();
}

/* Offsets and strides count elements, whatever their size. */
static void test_views_other_dtypes(void **state) {
    (void)state;
    ct_scope_begin();
    static const ct_dtype dtypes[] = {CT_BOOL, CT_U8, CT_I16, CT_F16, CT_BF16, CT_I32, CT_I64, CT_F32};
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        ct_tensor *x = ct_zeros(CT_SHAPE(3, 4), dtypes[i], CT_CPU);
        CT_ASSERT_OK(x);
        ct_tensor *col = ct_select(ct_t(x), 0, 2); /* x[:, 2] */
        assert_int_equal(ct_tensor_set(col, CT_INDEX(2), 1.0), CT_OK);
        ct_tensor *flat = ct_view(x, CT_SHAPE(12));
        for (int64_t k = 0; k < 12; k++)
            assert_true(ct_test_at(flat, k) == (k == 10 ? 1.0 : 0.0));
        ct_tensor *d = ct_diagonal(x, -1, 0, 1);
        assert_int_equal(ct_tensor_set(d, CT_INDEX(1), 1.0), CT_OK); /* x[2, 1] */
        assert_true(get(x, CT_INDEX(2, 1)) == 1.0);
        assert_int_equal(ct_tensor_storage_offset(ct_narrow(flat, 0, 5, 2)), 5);
        assert_true(ct_test_at(ct_narrow(flat, 0, 9, 2), 0) == 1.0);
    }
    ct_scope_end();
}

/* ------------------------------------------------------------------ reordering */

static void map_permute(const int64_t *o, int64_t *i, const void *ctx) {
    const int64_t *dims = ctx;
    for (int k = 0; k < 3; k++)
        i[dims[k] < 0 ? dims[k] + 3 : dims[k]] = o[k];
}

static void test_permute(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *in[NIN];
    inputs_234(in);
    static const int64_t perms[][3] = {{2, 0, 1}, {1, 2, 0}, {0, 2, 1}, {-1, -3, -2}, {0, 1, 2}};
    for (int k = 0; k < NIN; k++)
        for (size_t p = 0; p < sizeof perms / sizeof perms[0]; p++) {
            ct_tensor *v = ct_permute(in[k], perms[p], 3);
            CHECK_MAP(v, in[k], map_permute, perms[p]);
        }
    CT_ASSERT_SHAPE(ct_permute(in[0], CT_SHAPE(2, 0, 1)), 4, 2, 3);
    CT_ASSERT_STRIDES(ct_permute(in[0], CT_SHAPE(2, 0, 1)), 1, 12, 4);
    ct_tensor *s = scalar_t(3);
    ct_tensor *sp = ct_permute(s, NULL, 0);
    assert_int_equal(ct_tensor_dim(sp), 0);
    assert_true(get(sp, NULL) == 3);
    ct_scope_end();
}

static void map_swap01(const int64_t *o, int64_t *i, const void *ctx) {
    (void)ctx;
    i[0] = o[1];
    i[1] = o[0];
    i[2] = o[2];
}
static void map_swap02(const int64_t *o, int64_t *i, const void *ctx) {
    (void)ctx;
    i[0] = o[2];
    i[1] = o[1];
    i[2] = o[0];
}
static void map_swap2d(const int64_t *o, int64_t *i, const void *ctx) {
    (void)ctx;
    i[0] = o[1];
    i[1] = o[0];
}
static void map_same(const int64_t *o, int64_t *i, const void *ctx) {
    int n = *(const int *)ctx;
    for (int k = 0; k < n; k++)
        i[k] = o[k];
}

static void test_transpose_t(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *in[NIN];
    inputs_234(in);
    int three = 3;
    for (int k = 0; k < NIN; k++) {
        CHECK_MAP(ct_transpose(in[k], 0, 1), in[k], map_swap01, NULL);
        CHECK_MAP(ct_transpose(in[k], -1, 0), in[k], map_swap02, NULL);
        CHECK_MAP(ct_transpose(in[k], 2, -3), in[k], map_swap02, NULL);
        CHECK_MAP(ct_transpose(in[k], 1, 1), in[k], map_same, &three);
    }
    CT_ASSERT_SHAPE(ct_transpose(in[0], 0, 2), 4, 3, 2);
    ct_tensor *m = SEQ(2, 3);
    ct_tensor *mt = ct_t(m);
    CT_ASSERT_SHAPE(mt, 3, 2);
    CT_ASSERT_STRIDES(mt, 1, 3);
    CHECK_MAP(mt, m, map_swap2d, NULL);
    /* 0-d and 1-d come back as they are (new views). */
    ct_tensor *v1 = SEQ(5);
    ct_tensor *v1t = ct_t(v1);
    CT_ASSERT_SHAPE(v1t, 5);
    assert_true(v1t != v1 && v1t->is_view);
    int one = 1, zero = 0;
    CHECK_MAP(v1t, v1, map_same, &one);
    ct_tensor *s = scalar_t(2);
    CHECK_MAP(ct_t(s), s, map_same, &zero);
    CHECK_MAP(ct_transpose(s, 0, -1), s, map_same, &zero);
    ct_scope_end();
}

static void map_movedim_0_to_2(const int64_t *o, int64_t *i, const void *ctx) {
    (void)ctx; /* out (3, 4, 2) from in (2, 3, 4) */
    i[0] = o[2];
    i[1] = o[0];
    i[2] = o[1];
}
static void map_movedim_2_to_0(const int64_t *o, int64_t *i, const void *ctx) {
    (void)ctx; /* out (4, 2, 3) */
    i[0] = o[1];
    i[1] = o[2];
    i[2] = o[0];
}

static void test_movedim(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *in[NIN];
    inputs_234(in);
    int three = 3, zero = 0;
    for (int k = 0; k < NIN; k++) {
        ct_tensor *a = ct_movedim(in[k], 0, 2);
        CT_ASSERT_SHAPE(a, 3, 4, 2);
        CHECK_MAP(a, in[k], map_movedim_0_to_2, NULL);
        ct_tensor *b = ct_movedim(in[k], -1, -3);
        CT_ASSERT_SHAPE(b, 4, 2, 3);
        CHECK_MAP(b, in[k], map_movedim_2_to_0, NULL);
        CHECK_MAP(ct_movedim(in[k], 1, 0), in[k], map_swap01, NULL);
        CHECK_MAP(ct_movedim(in[k], 1, 1), in[k], map_same, &three);
    }
    ct_tensor *s = scalar_t(4);
    CHECK_MAP(ct_movedim(s, 0, -1), s, map_same, &zero);
    ct_scope_end();
}

/* ------------------------------------------------------------------ expand / squeeze */

typedef struct {
    int lead;             /* new leading dims */
    const int64_t *shape; /* input shape */
    int ndim;             /* input ndim */
} expand_ctx;

static void map_expand(const int64_t *o, int64_t *i, const void *ctx) {
    const expand_ctx *e = ctx;
    for (int d = 0; d < e->ndim; d++)
        i[d] = e->shape[d] == 1 ? 0 : o[d + e->lead];
}

static void test_expand(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = make_t(CT_SHAPE(3, 1, 4), CT_INDEX(1, 7, 3));
    ct_tensor *e = ct_expand(x, CT_SHAPE(2, -1, 5, 4));
    CT_ASSERT_SHAPE(e, 2, 3, 5, 4);
    CT_ASSERT_STRIDES(e, 0, 1, 0, 3);
    expand_ctx c = {1, ct_tensor_shape(x), 3};
    CHECK_MAP(e, x, map_expand, &c);
    /* A new size-1 leading dim steps over what is inside it. */
    ct_tensor *m = SEQ(2, 3);
    CT_ASSERT_STRIDES(ct_expand(m, CT_SHAPE(1, 2, 3)), 6, 3, 1);
    CT_ASSERT_STRIDES(ct_expand(m, CT_SHAPE(3, -1, -1)), 0, 3, 1);
    expand_ctx cm = {1, ct_tensor_shape(m), 2};
    CHECK_MAP(ct_expand(m, CT_SHAPE(3, -1, -1)), m, map_expand, &cm);
    /* 0-d input */
    ct_tensor *s = scalar_t(9);
    ct_tensor *se = ct_expand(s, CT_SHAPE(2, 3));
    CT_ASSERT_STRIDES(se, 0, 0);
    expand_ctx cs = {2, NULL, 0};
    CHECK_MAP(se, s, map_expand, &cs);
    CT_ASSERT_STRIDES(ct_expand(s, CT_SHAPE(1)), 0);
    CT_ASSERT_STRIDES(ct_expand(s, CT_SHAPE(3, 1)), 0, 0);
    assert_int_equal(ct_tensor_dim(ct_expand(s, NULL, 0)), 0);
    /* to size 0 */
    ct_tensor *z = ct_expand(ct_empty(CT_SHAPE(2, 1), CT_F32, CT_CPU), CT_SHAPE(2, 0));
    CT_ASSERT_SHAPE(z, 2, 0);
    CT_ASSERT_STRIDES(z, 1, 0);
    ct_tensor *other = ct_empty(CT_SHAPE(2, 3, 3, 4), CT_F32, CT_CPU);
    CT_ASSERT_SHAPE(ct_expand_as(x, other), 2, 3, 3, 4);
    ct_scope_end();
}

typedef struct {
    int n;          /* input ndim */
    int removed[8]; /* 1 where the input dim is gone from the output */
} squeeze_ctx;

static void map_squeeze(const int64_t *o, int64_t *i, const void *ctx) {
    const squeeze_ctx *s = ctx;
    for (int d = 0, k = 0; d < s->n; d++)
        i[d] = s->removed[d] ? 0 : o[k++];
}

static void test_squeeze_unsqueeze(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = make_t(CT_SHAPE(1, 3, 1, 2, 1), CT_INDEX(50, 1, 9, 3, 4));
    ct_tensor *a = ct_squeeze(x);
    CT_ASSERT_SHAPE(a, 3, 2);
    CT_ASSERT_STRIDES(a, 1, 3);
    squeeze_ctx all = {5, {1, 0, 1, 0, 1}};
    CHECK_MAP(a, x, map_squeeze, &all);
    ct_tensor *b = ct_squeeze_dim(x, -3);
    CT_ASSERT_SHAPE(b, 1, 3, 2, 1);
    squeeze_ctx one = {5, {0, 0, 1, 0, 0}};
    CHECK_MAP(b, x, map_squeeze, &one);
    /* A dim of size other than 1 stays: an unchanged view. */
    ct_tensor *c = ct_squeeze_dim(x, 1);
    CT_ASSERT_SHAPE(c, 1, 3, 1, 2, 1);
    assert_true(c != x && c->is_view);
    squeeze_ctx none = {5, {0}};
    CHECK_MAP(c, x, map_squeeze, &none);
    /* 0-d: dims -1 and 0 accepted, result 0-d */
    ct_tensor *s = scalar_t(1.5);
    assert_int_equal(ct_tensor_dim(ct_squeeze_dim(s, 0)), 0);
    assert_int_equal(ct_tensor_dim(ct_squeeze_dim(s, -1)), 0);
    assert_int_equal(ct_tensor_dim(ct_squeeze(s)), 0);
    assert_true(get(ct_squeeze(s), NULL) == 1.5);
    /* all-ones squeezes to 0-d */
    ct_tensor *ones = make_t(CT_SHAPE(1, 1), NULL);
    ct_tensor *so = ct_squeeze(ones);
    assert_int_equal(ct_tensor_dim(so), 0);
    assert_true(get(so, NULL) == 1000);

    ct_tensor *m = make_t(CT_SHAPE(2, 3), CT_INDEX(1, 2)); /* transposed layout */
    ct_tensor *u1 = ct_unsqueeze(m, 1);
    CT_ASSERT_SHAPE(u1, 2, 1, 3);
    CT_ASSERT_STRIDES(u1, 1, 6, 2);
    squeeze_ctx mid = {3, {0, 1, 0}};
    /* index math the other way round: the output's size-1 dim is the removed one */
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 3; j++)
            assert_true(get(u1, CT_INDEX(i, 0, j)) == get(m, CT_INDEX(i, j)));
    CHECK_MAP(ct_squeeze(u1), u1, map_squeeze, &mid);
    CT_ASSERT_STRIDES(ct_unsqueeze(m, -1), 1, 2, 1);
    CT_ASSERT_STRIDES(ct_unsqueeze(m, 0), 2, 1, 2);
    ct_tensor *su = ct_unsqueeze(s, 0);
    CT_ASSERT_SHAPE(su, 1);
    CT_ASSERT_STRIDES(su, 1);
    assert_true(get(su, CT_INDEX(0)) == 1.5);
    CT_ASSERT_SHAPE(ct_unsqueeze(s, -1), 1);
    CT_ASSERT_SHAPE(ct_unsqueeze(ct_empty(CT_SHAPE(0), CT_F32, CT_CPU), 0), 1, 0);
    ct_scope_end();
}

/* ------------------------------------------------------------------ flatten / unflatten */

static void test_flatten_unflatten(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *in[NIN];
    inputs_234(in);
    for (int k = 0; k < NIN; k++) {
        ct_tensor *f = ct_flatten(in[k], 0, -1);
        CT_ASSERT_SHAPE(f, 24);
        CHECK_ORDER(f, in[k]);
        ct_tensor *g = ct_flatten(in[k], 1, 2);
        CT_ASSERT_SHAPE(g, 2, 12);
        CHECK_ORDER(g, in[k]);
        ct_tensor *h = ct_flatten(in[k], -3, -2);
        CT_ASSERT_SHAPE(h, 6, 4);
        CHECK_ORDER(h, in[k]);
    }
    /* A view when possible (contiguous, or the sliced input's outer dims), a copy else. */
    assert_true(ct_tensor_shares_storage(ct_flatten(in[0], 0, 2), in[0]));
    assert_true(ct_tensor_shares_storage(ct_flatten(in[2], 1, 2), in[2]));
    assert_false(ct_tensor_shares_storage(ct_flatten(in[2], 0, 1), in[2]));
    assert_false(ct_tensor_shares_storage(ct_flatten(in[1], 0, 1), in[1]));
    /* start == end: the input itself, as torch */
    assert_ptr_equal(ct_flatten(in[1], 1, 1), in[1]);
    ct_tensor *s = scalar_t(6);
    ct_tensor *fs = ct_flatten(s, 0, -1);
    CT_ASSERT_SHAPE(fs, 1);
    assert_true(get(fs, CT_INDEX(0)) == 6);
    CT_ASSERT_SHAPE(ct_flatten(ct_empty(CT_SHAPE(2, 0, 3), CT_F32, CT_CPU), 0, 1), 0, 3);

    for (int k = 0; k < NIN; k += 2) {
        ct_tensor *u = ct_unflatten(in[k], 2, CT_SHAPE(2, -1));
        CT_ASSERT_SHAPE(u, 2, 3, 2, 2);
        CHECK_ORDER(u, in[k]);
        ct_tensor *u0 = ct_unflatten(in[k], -3, CT_SHAPE(1, 2, 1));
        CT_ASSERT_SHAPE(u0, 1, 2, 1, 3, 4);
        CHECK_ORDER(u0, in[k]);
    }
    /* unflatten is a view, so it follows view's stride rule (torch gives these) */
    CT_ASSERT_STRIDES(ct_unflatten(in[1], 1, CT_SHAPE(3, 1)), 1, 2, 24, 6);
    CT_ASSERT_ERR(ct_unflatten(in[1], 1, CT_SHAPE(2, 2)) != NULL, CT_ERROR_VALUE,
                  "Provided sizes [2, 2] don't multiply up to the size of dim 1 (3) in the input tensor");
    ct_scope_end();
}

/* ------------------------------------------------------------------ slicing */

typedef struct {
    int dim;
    int64_t start, step;
} slice_ctx;

static void map_slice(const int64_t *o, int64_t *i, const void *ctx) {
    const slice_ctx *s = ctx;
    for (int d = 0; d < 3; d++)
        i[d] = d == s->dim ? s->start + o[d] * s->step : o[d];
}

static int64_t py_slice_len(int64_t n, int64_t *start, int64_t end, int64_t step) {
    /* Python's slice.indices, written out independently of the library. */
    int64_t s = *start, e = end;
    if (s < 0) {
        s += n;
        if (s < 0)
            s = 0;
    }
    if (s > n)
        s = n;
    if (e < 0) {
        e += n;
        if (e < 0)
            e = 0;
    }
    if (e > n)
        e = n;
    *start = s;
    return e > s ? (e - s - 1) / step + 1 : 0;
}

static void test_slice_narrow(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *in[NIN];
    inputs_234(in);
    static const int64_t cases[][3] = {{0, INT64_MAX, 1}, {1, 3, 1},   {-2, INT64_MAX, 1}, {0, INT64_MAX, 2},
                                       {1, -1, 2},        {-100, 100, 3}, {3, 1, 1},       {5, 9, 1},
                                       {INT64_MIN, -3, 1}, {0, 0, 1},  {2, INT64_MAX, INT64_MAX}};
    for (int k = 0; k < NIN; k++)
        for (int dim = -3; dim < 3; dim++)
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
                int d = dim < 0 ? dim + 3 : dim;
                int64_t n = ct_tensor_shape(in[k])[d], start = cases[c][0];
                int64_t len = py_slice_len(n, &start, cases[c][1], cases[c][2]);
                ct_tensor *v = ct_slice(in[k], dim, cases[c][0], cases[c][1], cases[c][2]);
                CT_ASSERT_OK(v);
                assert_int_equal(ct_tensor_shape(v)[d], len);
                slice_ctx sc = {d, start, cases[c][2]};
                CHECK_MAP(v, in[k], map_slice, &sc);
            }
    CT_ASSERT_STRIDES(ct_slice(in[0], 1, -1, 100, 2), 12, 8, 1);
    assert_int_equal(ct_tensor_storage_offset(ct_slice(in[0], 2, 5, 1, 1)), 4);

    for (int k = 0; k < NIN; k++) {
        ct_tensor *a = ct_narrow(in[k], 2, 1, 2);
        CT_ASSERT_SHAPE(a, 2, 3, 2);
        slice_ctx sa = {2, 1, 1};
        CHECK_MAP(a, in[k], map_slice, &sa);
        ct_tensor *b = ct_narrow(in[k], -2, -2, 2);
        CT_ASSERT_SHAPE(b, 2, 2, 4);
        slice_ctx sb = {1, 1, 1};
        CHECK_MAP(b, in[k], map_slice, &sb);
        CT_ASSERT_SHAPE(ct_narrow(in[k], 0, 2, 0), 0, 3, 4); /* start == size is allowed */
    }
    /* an empty dim takes start 0 only (PyTorch 2.x: [-0, 0]) */
    CT_ASSERT_SHAPE(ct_narrow(ct_empty(CT_SHAPE(3, 0), CT_F32, CT_CPU), 1, 0, 0), 3, 0);
    CT_ASSERT_ERR(ct_narrow(ct_empty(CT_SHAPE(3, 0), CT_F32, CT_CPU), 1, -1, 0) != NULL, CT_ERROR_INDEX,
                  "expected to be in range of [0, 0], but got -1");
    ct_scope_end();
}

typedef struct {
    int dim;
    int64_t index;
} select_ctx;

static void map_select(const int64_t *o, int64_t *i, const void *ctx) {
    const select_ctx *s = ctx;
    for (int d = 0, k = 0; d < 3; d++)
        i[d] = d == s->dim ? s->index : o[k++];
}

static void test_select(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *in[NIN];
    inputs_234(in);
    for (int k = 0; k < NIN; k++)
        for (int d = 0; d < 3; d++) {
            int64_t n = ct_tensor_shape(in[k])[d];
            for (int64_t idx = -n; idx < n; idx++) {
                ct_tensor *v = ct_select(in[k], d - (d == 1 ? 3 : 0), idx);
                assert_int_equal(ct_tensor_dim(v), 2);
                select_ctx sc = {d, idx < 0 ? idx + n : idx};
                CHECK_MAP(v, in[k], map_select, &sc);
            }
        }
    ct_tensor *v1 = SEQ(4);
    ct_tensor *e = ct_select(v1, 0, -1);
    assert_int_equal(ct_tensor_dim(e), 0);
    assert_true(get(e, NULL) == 1003);
    assert_int_equal(ct_tensor_storage_offset(e), 3);
    ct_scope_end();
}

typedef struct {
    int dim;
    int64_t step;
} unfold_ctx;

static void map_unfold(const int64_t *o, int64_t *i, const void *ctx) {
    const unfold_ctx *u = ctx;
    for (int d = 0; d < 3; d++)
        i[d] = d == u->dim ? o[d] * u->step + o[3] : o[d];
}

static void test_unfold(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *in[NIN];
    inputs_234(in);
    static const int64_t cases[][2] = {{1, 1}, {2, 1}, {2, 2}, {3, 1}, {1, 5}, {2, 3}, {0, 1}};
    for (int k = 0; k < NIN; k++)
        for (int d = 0; d < 3; d++)
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
                int64_t n = ct_tensor_shape(in[k])[d], size = cases[c][0], step = cases[c][1];
                if (size > n)
                    continue;
                ct_tensor *v = ct_unfold(in[k], d, size, step);
                CT_ASSERT_OK(v);
                assert_int_equal(ct_tensor_dim(v), 4);
                assert_int_equal(ct_tensor_shape(v)[d], (n - size) / step + 1);
                assert_int_equal(ct_tensor_shape(v)[3], size);
                unfold_ctx uc = {d, step};
                CHECK_MAP(v, in[k], map_unfold, &uc);
            }
    ct_tensor *m = SEQ(2, 3);
    CT_ASSERT_STRIDES(ct_unfold(m, 0, 2, 1), 3, 1, 3);
    CT_ASSERT_SHAPE(ct_unfold(m, -1, 3, 5), 2, 1, 3);
    CT_ASSERT_STRIDES(ct_unfold(m, -1, 3, 5), 3, 5, 1);
    ct_tensor *s = scalar_t(8);
    ct_tensor *su = ct_unfold(s, 0, 1, 1);
    CT_ASSERT_SHAPE(su, 1);
    CT_ASSERT_STRIDES(su, 1);
    assert_true(get(su, CT_INDEX(0)) == 8);
    CT_ASSERT_SHAPE(ct_unfold(s, -1, 0, 1), 0);
    ct_scope_end();
}

typedef struct {
    int a, b;       /* the two diagonal dims of a 3-d input */
    int64_t offset;
} diag_ctx;

static void map_diag(const int64_t *o, int64_t *i, const void *ctx) {
    const diag_ctx *g = ctx;
    int rest = 3 - g->a - g->b; /* the remaining dim */
    int64_t k = o[1];
    i[rest] = o[0];
    i[g->a] = g->offset >= 0 ? k : k - g->offset;
    i[g->b] = g->offset >= 0 ? k + g->offset : k;
}

static void test_diagonal(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *in[NIN];
    inputs_234(in);
    static const int pairs[][2] = {{0, 1}, {1, 2}, {2, 0}, {1, 0}, {0, 2}};
    for (int k = 0; k < NIN; k++)
        for (size_t p = 0; p < 5; p++)
            for (int64_t off = -5; off <= 5; off++) {
                int a = pairs[p][0], b = pairs[p][1];
                const int64_t *sh = ct_tensor_shape(in[k]);
                int64_t rows = sh[a], cols = sh[b];
                int64_t n = off >= 0 ? (cols - off < rows ? cols - off : rows)
                                     : (rows + off < cols ? rows + off : cols);
                if (n < 0)
                    n = 0;
                ct_tensor *v = ct_diagonal(in[k], off, a - (p == 3 ? 3 : 0), b);
                CT_ASSERT_OK(v);
                assert_int_equal(ct_tensor_dim(v), 2);
                assert_int_equal(ct_tensor_shape(v)[0], sh[3 - a - b]);
                assert_int_equal(ct_tensor_shape(v)[1], n);
                diag_ctx g = {a, b, off};
                CHECK_MAP(v, in[k], map_diag, &g);
            }
    /* torch's numbers for zeros(2, 3, 4).diagonal(1, 2, 0) and diagonal(-1, 2, 0) */
    ct_tensor *z = ct_zeros(CT_SHAPE(2, 3, 4), CT_F32, CT_CPU);
    ct_tensor *d1 = ct_diagonal(z, 1, 2, 0);
    CT_ASSERT_SHAPE(d1, 3, 1);
    CT_ASSERT_STRIDES(d1, 4, 13);
    assert_int_equal(ct_tensor_storage_offset(d1), 12);
    assert_int_equal(ct_tensor_storage_offset(ct_diagonal(z, -1, 2, 0)), 1);
    /* Past the edge: empty, offset left alone */
    ct_tensor *m = SEQ(2, 3);
    ct_tensor *far = ct_diagonal(m, 5, 0, 1);
    CT_ASSERT_SHAPE(far, 0);
    assert_int_equal(ct_tensor_storage_offset(far), 0);
    CT_ASSERT_SHAPE(ct_diagonal(m, INT64_MIN, 0, 1), 0);
    CT_ASSERT_SHAPE(ct_diagonal(m, INT64_MAX, 0, 1), 0);
    ct_tensor *dm = ct_diagonal(m, -1, 0, 1);
    CT_ASSERT_STRIDES(dm, 4);
    assert_int_equal(ct_tensor_storage_offset(dm), 3);
    assert_true(get(dm, CT_INDEX(0)) == 1003);
    ct_scope_end();
}

/* ------------------------------------------------------------------ as_strided / alias */

static void test_as_strided_alias(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = SEQ(2, 3); /* storage holds 1000..1005 at positions 0..5 */
    ct_tensor *v = ct_as_strided(x, CT_INDEX(3, 3), CT_INDEX(1, 1), 2, 1);
    CT_ASSERT_SHAPE(v, 3, 3);
    for (int64_t i = 0; i < 3; i++)
        for (int64_t j = 0; j < 3; j++)
            assert_true(get(v, CT_INDEX(i, j)) == 1001 + i + j);
    ct_tensor *w = ct_as_strided(x, CT_INDEX(2, 2), CT_INDEX(1, 2), 2, 1);
    CT_ASSERT_STRIDES(w, 1, 2);
    assert_int_equal(ct_tensor_storage_offset(w), 1);
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 2; j++)
            assert_true(get(w, CT_INDEX(i, j)) == 1001 + i + 2 * j);
    /* Negative offset keeps the input's: a view of a slice starts where the slice does. */
    ct_tensor *sl = ct_slice(x, 1, 1, INT64_MAX, 1);
    ct_tensor *k = ct_as_strided(sl, CT_INDEX(2), CT_INDEX(3), 1, -1);
    assert_int_equal(ct_tensor_storage_offset(k), 1);
    assert_true(get(k, CT_INDEX(1)) == 1004);
    /* The last element exactly: allowed; empty views may point anywhere. */
    CT_ASSERT_OK(ct_as_strided(x, CT_INDEX(1), CT_INDEX(1), 1, 5));
    CT_ASSERT_OK(ct_as_strided(x, CT_INDEX(0), CT_INDEX(1), 1, 100));
    ct_tensor *s0 = ct_as_strided(x, NULL, NULL, 0, 4);
    assert_true(get(s0, NULL) == 1004);

    ct_tensor *a = ct_alias(sl);
    CT_ASSERT_SHAPE(a, 2, 2);
    CT_ASSERT_STRIDES(a, 3, 1);
    assert_int_equal(ct_tensor_storage_offset(a), 1);
    int two = 2;
    CHECK_MAP(a, sl, map_same, &two);
    assert_ptr_equal(a->base, x); /* view chains collapse to the root */
    ct_scope_end();
}

/* ------------------------------------------------------------------ sharing */

static void test_storage_and_version_sharing(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = SEQ(4, 6);
    int64_t v0 = ct_tensor_version(x);
    ct_tensor *views[] = {
        ct_view(x, CT_SHAPE(2, 12)),      ct_reshape(x, CT_SHAPE(24)),    ct_permute(x, CT_SHAPE(1, 0)),
        ct_transpose(x, 0, 1),            ct_t(x),                        ct_movedim(x, 0, 1),
        ct_expand(x, CT_SHAPE(2, 4, 6)),  ct_squeeze(x),                  ct_squeeze_dim(x, 0),
        ct_unsqueeze(x, 1),               ct_flatten(x, 0, 1),            ct_unflatten(x, 1, CT_SHAPE(2, 3)),
        ct_narrow(x, 1, 2, 3),            ct_slice(x, 0, 1, 4, 2),        ct_select(x, 1, 3),
        ct_unfold(x, 1, 2, 2),            ct_diagonal(x, 1, 0, 1),
        ct_as_strided(x, CT_INDEX(5), CT_INDEX(5), 1, 0),
        ct_alias(x),                      ct_view_as(x, x),               ct_reshape_as(x, x),
        ct_expand_as(x, x),
    };
    size_t nviews = sizeof views / sizeof views[0];
    for (size_t i = 0; i < nviews; i++) {
        CT_ASSERT_OK(views[i]);
        assert_true(ct_tensor_shares_storage(views[i], x));
        assert_true(views[i]->is_view);
        assert_ptr_equal(views[i]->base, x);
    }
    /* Write through a view (the diagonal (1, 0, 1) starts at x[0, 1]); the base sees
     * it and every view sees the version bump. */
    ct_tensor *d = views[16];
    assert_int_equal(ct_tensor_set(d, CT_INDEX(2), -1.0), CT_OK);
    assert_true(get(x, CT_INDEX(2, 3)) == -1.0);
    assert_true(get(views[3], CT_INDEX(3, 2)) == -1.0); /* the transpose */
    assert_int_equal(ct_tensor_version(x), v0 + 1);
    for (size_t i = 0; i < nviews; i++)
        assert_int_equal(ct_tensor_version(views[i]), v0 + 1);
    /* Writing to the base shows through a view of a view. */
    ct_tensor *vv = ct_select(ct_transpose(ct_view(x, CT_SHAPE(4, 2, 3)), 0, 2), 1, 1);
    assert_int_equal(ct_tensor_set(x, CT_INDEX(3, 5), 42.0), CT_OK);
    assert_true(get(vv, CT_INDEX(2, 3)) == 42.0);
    assert_int_equal(ct_tensor_version(vv), v0 + 2);
    ct_scope_end();
}

static void test_views_keep_storage_alive(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_tensor *x = SEQ(3, 4); /* no scope open: the caller owns it */
    ct_scope_begin();
    ct_tensor *v = ct_retain(ct_select(ct_t(x), 0, 2));
    ct_scope_end();
    ct_release(x);
    assert_true(get(v, CT_INDEX(1)) == 1006);
    ct_release(v);
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
}

/* ------------------------------------------------------------------ META */

static void test_meta(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *m = ct_empty(CT_SHAPE(2, 3, 4), CT_F32, CT_META);
    CT_ASSERT_OK(m);
    ct_tensor *t = ct_transpose(m, 0, 2);
    CT_ASSERT_SHAPE(t, 4, 3, 2);
    assert_int_equal(ct_tensor_device(t).type, CT_DEVICE_META);
    CT_ASSERT_STRIDES(ct_view(m, CT_SHAPE(6, 4)), 4, 1);
    /* the copy path of reshape stays on META */
    ct_tensor *r = ct_reshape(t, CT_SHAPE(-1));
    CT_ASSERT_SHAPE(r, 24);
    assert_int_equal(ct_tensor_device(r).type, CT_DEVICE_META);
    assert_false(ct_tensor_shares_storage(r, m));
    CT_ASSERT_SHAPE(ct_permute(m, CT_SHAPE(1, 2, 0)), 3, 4, 2);
    CT_ASSERT_SHAPE(ct_movedim(m, 2, 0), 4, 2, 3);
    CT_ASSERT_SHAPE(ct_expand(m, CT_SHAPE(5, 2, 3, 4)), 5, 2, 3, 4);
    CT_ASSERT_SHAPE(ct_squeeze(ct_unsqueeze(m, 1)), 2, 3, 4);
    CT_ASSERT_SHAPE(ct_squeeze_dim(ct_unsqueeze(m, 0), 0), 2, 3, 4);
    CT_ASSERT_SHAPE(ct_flatten(t, 0, 1), 12, 2);
    CT_ASSERT_SHAPE(ct_unflatten(m, 2, CT_SHAPE(2, 2)), 2, 3, 2, 2);
    CT_ASSERT_SHAPE(ct_narrow(m, 1, 1, 2), 2, 2, 4);
    ct_tensor *s = ct_slice(m, 2, 1, INT64_MAX, 2);
    CT_ASSERT_SHAPE(s, 2, 3, 2);
    assert_int_equal(ct_tensor_storage_offset(s), 1);
    CT_ASSERT_SHAPE(ct_select(m, 0, 1), 3, 4);
    CT_ASSERT_SHAPE(ct_unfold(m, 2, 2, 2), 2, 3, 2, 2);
    CT_ASSERT_SHAPE(ct_diagonal(m, 0, 1, 2), 2, 3);
    CT_ASSERT_SHAPE(ct_t(ct_select(m, 0, 0)), 4, 3);
    CT_ASSERT_SHAPE(ct_alias(m), 2, 3, 4);
    CT_ASSERT_SHAPE(ct_as_strided(m, CT_INDEX(4, 6), CT_INDEX(6, 1), 2, 0), 4, 6);
    CT_ASSERT_ERR(ct_as_strided(m, CT_INDEX(5, 6), CT_INDEX(6, 1), 2, 0) != NULL, CT_ERROR_VALUE, "out of bounds");
    CT_ASSERT_ERR(ct_view(t, CT_SHAPE(24)) != NULL, CT_ERROR_VALUE, "Use .reshape(...) instead.");
    ct_scope_end();
}

/* ------------------------------------------------------------------ errors */

static void test_errors_view_reshape(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = SEQ(2, 3);
    CT_ASSERT_ERR(ct_view(x, CT_SHAPE(5)) != NULL, CT_ERROR_VALUE, "shape '[5]' is invalid for input of size 6");
    CT_ASSERT_ERR(ct_view(SEQ(5), CT_SHAPE(2, -1)) != NULL, CT_ERROR_VALUE,
                  "view: shape '[2, -1]' is invalid for input of size 5");
    CT_ASSERT_ERR(ct_view(x, CT_SHAPE(-1, -1)) != NULL, CT_ERROR_VALUE, "only one dimension can be inferred");
    CT_ASSERT_ERR(ct_view(x, CT_SHAPE(-2, 3)) != NULL, CT_ERROR_VALUE, "invalid shape dimension -2");
    CT_ASSERT_ERR(ct_view(ct_t(x), CT_SHAPE(6)) != NULL, CT_ERROR_VALUE,
                  "view size is not compatible with input tensor's size and stride (at least one dimension spans "
                  "across two contiguous subspaces). Use .reshape(...) instead.");
    CT_ASSERT_ERR(ct_view(ct_empty(CT_SHAPE(0, 3), CT_F32, CT_CPU), CT_SHAPE(0, -1)) != NULL, CT_ERROR_VALUE,
                  "cannot reshape tensor of 0 elements into shape [0, -1] because the unspecified dimension size -1 "
                  "can be any value and is ambiguous");
    CT_ASSERT_ERR(ct_view(x, CT_SHAPE(INT64_C(1) << 40, INT64_C(1) << 40)) != NULL, CT_ERROR_VALUE, "is invalid");
    CT_ASSERT_ERR(ct_view(x, CT_SHAPE(INT64_C(1) << 40, INT64_C(1) << 40, -1)) != NULL, CT_ERROR_VALUE,
                  "is invalid");
    CT_ASSERT_ERR(ct_view(x, CT_SHAPE(2, 3, 1, 1, 1, 1, 1, 1, 1)) != NULL, CT_ERROR_VALUE,
                  "at most 8 dimensions, got 9");
    CT_ASSERT_ERR(ct_view(x, NULL, 2) != NULL, CT_ERROR_NULL_ARGUMENT, "shape is NULL");
    CT_ASSERT_ERR(ct_view(x, CT_INDEX(6), -1) != NULL, CT_ERROR_VALUE, "non-negative");
    CT_ASSERT_ERR(ct_view(NULL, CT_SHAPE(6)) != NULL, CT_ERROR_NULL_ARGUMENT, "view");
    CT_ASSERT_ERR(ct_reshape(x, CT_SHAPE(7)) != NULL, CT_ERROR_VALUE,
                  "reshape: shape '[7]' is invalid for input of size 6");
    CT_ASSERT_ERR(ct_reshape(x, CT_SHAPE(-1, -1)) != NULL, CT_ERROR_VALUE, "only one dimension can be inferred");
    CT_ASSERT_ERR(ct_reshape(x, NULL, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "shape is NULL");
    CT_ASSERT_ERR(ct_reshape(x, CT_SHAPE(1, 1, 1, 1, 1, 1, 1, 2, 3)) != NULL, CT_ERROR_VALUE, "at most 8");
    CT_ASSERT_ERR(ct_reshape(NULL, CT_SHAPE(6)) != NULL, CT_ERROR_NULL_ARGUMENT, "reshape");
    CT_ASSERT_ERR(ct_view_as(x, SEQ(4)) != NULL, CT_ERROR_VALUE, "shape '[4]' is invalid for input of size 6");
    CT_ASSERT_ERR(ct_view_as(x, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "view_as");
    CT_ASSERT_ERR(ct_view_as(NULL, x) != NULL, CT_ERROR_NULL_ARGUMENT, "view_as");
    CT_ASSERT_ERR(ct_reshape_as(x, SEQ(5)) != NULL, CT_ERROR_VALUE, "shape '[5]' is invalid for input of size 6");
    CT_ASSERT_ERR(ct_reshape_as(NULL, x) != NULL, CT_ERROR_NULL_ARGUMENT, "reshape_as");
    CT_ASSERT_ERR(ct_reshape_as(x, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "reshape_as");
    ct_scope_end();
}

static void test_errors_reorder(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = SEQ(2, 3);
    ct_tensor *s = scalar_t(1);
    CT_ASSERT_ERR(ct_permute(x, CT_SHAPE(0)) != NULL, CT_ERROR_VALUE,
                  "input.dim() = 2 is not equal to len(dims) = 1");
    CT_ASSERT_ERR(ct_permute(x, CT_SHAPE(0, 0)) != NULL, CT_ERROR_VALUE, "duplicate dims are not allowed.");
    CT_ASSERT_ERR(ct_permute(x, CT_SHAPE(1, -1)) != NULL, CT_ERROR_VALUE, "duplicate dims");
    CT_ASSERT_ERR(ct_permute(x, CT_SHAPE(0, 2)) != NULL, CT_ERROR_INDEX,
                  "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    CT_ASSERT_ERR(ct_permute(x, CT_SHAPE(0, -3)) != NULL, CT_ERROR_INDEX, "but got -3");
    CT_ASSERT_ERR(ct_permute(x, NULL, 2) != NULL, CT_ERROR_NULL_ARGUMENT, "dims is NULL");
    CT_ASSERT_ERR(ct_permute(NULL, CT_SHAPE(0)) != NULL, CT_ERROR_NULL_ARGUMENT, "permute");
    CT_ASSERT_ERR(ct_transpose(x, 0, 2) != NULL, CT_ERROR_INDEX, "[-2, 1], but got 2");
    CT_ASSERT_ERR(ct_transpose(x, -3, 0) != NULL, CT_ERROR_INDEX, "but got -3");
    CT_ASSERT_ERR(ct_transpose(s, 0, 1) != NULL, CT_ERROR_INDEX, "[-1, 0], but got 1");
    CT_ASSERT_ERR(ct_transpose(NULL, 0, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "transpose");
    CT_ASSERT_ERR(ct_t(SEQ(2, 3, 4)) != NULL, CT_ERROR_VALUE,
                  "t() expects a tensor with <= 2 dimensions, but self is 3D");
    CT_ASSERT_ERR(ct_t(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "t");
    CT_ASSERT_ERR(ct_movedim(x, 0, 2) != NULL, CT_ERROR_INDEX, "[-2, 1], but got 2");
    CT_ASSERT_ERR(ct_movedim(x, 3, 0) != NULL, CT_ERROR_INDEX, "but got 3");
    CT_ASSERT_ERR(ct_movedim(s, 1, 0) != NULL, CT_ERROR_INDEX, "[-1, 0], but got 1");
    CT_ASSERT_ERR(ct_movedim(NULL, 0, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "movedim");
    /* Reordering an empty tensor can put an overflowing product before its zero;
     * torch refuses these too. */
    ct_tensor *e = ct_empty(CT_SHAPE(0, INT64_C(1) << 40, INT64_C(1) << 40), CT_F32, CT_META);
    CT_ASSERT_OK(e);
    CT_ASSERT_ERR(ct_permute(e, CT_SHAPE(1, 2, 0)) != NULL, CT_ERROR_VALUE, "permute: the number of elements");
    CT_ASSERT_ERR(ct_transpose(e, 0, 2) != NULL, CT_ERROR_VALUE, "transpose: the number of elements");
    CT_ASSERT_ERR(ct_movedim(e, 0, 2) != NULL, CT_ERROR_VALUE, "movedim: the number of elements");
    CT_ASSERT_SHAPE(ct_movedim(e, 2, 1), 0, INT64_C(1) << 40, INT64_C(1) << 40);
    ct_scope_end();
}

static void test_errors_expand_squeeze(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = SEQ(2, 3);
    CT_ASSERT_ERR(ct_expand(x, CT_SHAPE(4)) != NULL, CT_ERROR_VALUE,
                  "the number of sizes provided (1) must be greater or equal to the number of dimensions in the "
                  "tensor (2)");
    CT_ASSERT_ERR(ct_expand(x, CT_SHAPE(2, 4)) != NULL, CT_ERROR_VALUE,
                  "The expanded size of the tensor (4) must match the existing size (3) at non-singleton dimension "
                  "1.  Target sizes: [2, 4].  Tensor sizes: [2, 3]");
    CT_ASSERT_ERR(ct_expand(x, CT_SHAPE(-1, -1, 3)) != NULL, CT_ERROR_VALUE,
                  "The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension 0");
    CT_ASSERT_ERR(ct_expand(x, CT_SHAPE(2, -2)) != NULL, CT_ERROR_VALUE,
                  "The expanded size of the tensor (-2) must match the existing size (3)");
    CT_ASSERT_ERR(ct_expand(ct_empty(CT_SHAPE(1, 3), CT_F32, CT_CPU), CT_SHAPE(-2, 3)) != NULL, CT_ERROR_VALUE,
                  "must be non-negative");
    CT_ASSERT_ERR(ct_expand(x, CT_SHAPE(-3, 2, 3)) != NULL, CT_ERROR_VALUE, "must be non-negative");
    CT_ASSERT_ERR(ct_expand(SEQ(1, 1), CT_SHAPE(INT64_C(1) << 40, INT64_C(1) << 40)) != NULL, CT_ERROR_VALUE,
                  "overflows");
    CT_ASSERT_ERR(ct_expand(x, CT_SHAPE(1, 1, 1, 1, 1, 1, 1, 2, 3)) != NULL, CT_ERROR_VALUE, "at most 8");
    CT_ASSERT_ERR(ct_expand(x, NULL, 2) != NULL, CT_ERROR_NULL_ARGUMENT, "shape is NULL");
    CT_ASSERT_ERR(ct_expand(NULL, CT_SHAPE(2, 3)) != NULL, CT_ERROR_NULL_ARGUMENT, "expand");
    CT_ASSERT_ERR(ct_expand_as(x, SEQ(3, 2)) != NULL, CT_ERROR_VALUE, "(2) must match the existing size (3)");
    CT_ASSERT_ERR(ct_expand_as(x, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "expand_as");
    CT_ASSERT_ERR(ct_expand_as(NULL, x) != NULL, CT_ERROR_NULL_ARGUMENT, "expand_as");
    CT_ASSERT_ERR(ct_squeeze(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "squeeze");
    CT_ASSERT_ERR(ct_squeeze_dim(x, 2) != NULL, CT_ERROR_INDEX, "[-2, 1], but got 2");
    CT_ASSERT_ERR(ct_squeeze_dim(scalar_t(0), 1) != NULL, CT_ERROR_INDEX, "[-1, 0], but got 1");
    CT_ASSERT_ERR(ct_squeeze_dim(NULL, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "squeeze");
    CT_ASSERT_ERR(ct_unsqueeze(x, 3) != NULL, CT_ERROR_INDEX, "[-3, 2], but got 3");
    CT_ASSERT_ERR(ct_unsqueeze(x, -4) != NULL, CT_ERROR_INDEX, "but got -4");
    CT_ASSERT_ERR(ct_unsqueeze(scalar_t(0), -2) != NULL, CT_ERROR_INDEX, "[-1, 0], but got -2");
    CT_ASSERT_ERR(ct_unsqueeze(ct_empty(CT_SHAPE(1, 1, 1, 1, 1, 1, 1, 1), CT_F32, CT_CPU), 0) != NULL, CT_ERROR_VALUE,
                  "at most 8 dimensions, got 9");
    CT_ASSERT_ERR(ct_unsqueeze(NULL, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "unsqueeze");
    ct_scope_end();
}

static void test_errors_flatten(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = SEQ(2, 3);
    ct_tensor *s = scalar_t(0);
    CT_ASSERT_ERR(ct_flatten(x, 1, 0) != NULL, CT_ERROR_VALUE,
                  "flatten() has invalid args: start_dim cannot come after end_dim");
    CT_ASSERT_ERR(ct_flatten(x, 0, 2) != NULL, CT_ERROR_INDEX, "[-2, 1], but got 2");
    CT_ASSERT_ERR(ct_flatten(s, 0, 1) != NULL, CT_ERROR_INDEX, "[-1, 0], but got 1");
    CT_ASSERT_ERR(ct_flatten(NULL, 0, -1) != NULL, CT_ERROR_NULL_ARGUMENT, "flatten");
    CT_ASSERT_ERR(ct_unflatten(x, 0, CT_SHAPE(3, 1)) != NULL, CT_ERROR_VALUE,
                  "unflatten: Provided sizes [3, 1] don't multiply up to the size of dim 0 (2) in the input tensor");
    CT_ASSERT_ERR(ct_unflatten(x, -1, CT_SHAPE(2, 2)) != NULL, CT_ERROR_VALUE, "size of dim 1 (3)");
    CT_ASSERT_ERR(ct_unflatten(x, 0, NULL, 0) != NULL, CT_ERROR_VALUE, "unflatten: sizes must be non-empty");
    CT_ASSERT_ERR(ct_unflatten(x, 1, CT_SHAPE(-1, -1)) != NULL, CT_ERROR_VALUE,
                  "unflatten got an unexpected error: only one dimension can be inferred");
    CT_ASSERT_ERR(ct_unflatten(x, 1, CT_SHAPE(-2, 3)) != NULL, CT_ERROR_VALUE, "invalid shape dimension -2");
    CT_ASSERT_ERR(ct_unflatten(ct_empty(CT_SHAPE(2, 0), CT_F32, CT_CPU), 1, CT_SHAPE(0, -1)) != NULL, CT_ERROR_VALUE,
                  "cannot reshape tensor of 0 elements into shape [0, -1]");
    CT_ASSERT_ERR(ct_unflatten(x, 2, CT_SHAPE(1, 3)) != NULL, CT_ERROR_INDEX, "[-2, 1], but got 2");
    CT_ASSERT_ERR(ct_unflatten(s, -1, CT_SHAPE(1)) != NULL, CT_ERROR_INDEX,
                  "Dimension specified as 0 but tensor has no dimensions");
    CT_ASSERT_ERR(ct_unflatten(x, 1, CT_SHAPE(3, 1, 1, 1, 1, 1, 1, 1)) != NULL, CT_ERROR_VALUE,
                  "at most 8 dimensions, got 9");
    CT_ASSERT_ERR(ct_unflatten(x, 1, NULL, 2) != NULL, CT_ERROR_NULL_ARGUMENT, "sizes is NULL");
    CT_ASSERT_ERR(ct_unflatten(NULL, 0, CT_SHAPE(1)) != NULL, CT_ERROR_NULL_ARGUMENT, "unflatten");
    ct_scope_end();
}

static void test_errors_slicing(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = SEQ(2, 3);
    ct_tensor *s = scalar_t(0);
    CT_ASSERT_ERR(ct_slice(x, 1, 0, 3, 0) != NULL, CT_ERROR_VALUE, "slice step must be positive");
    CT_ASSERT_ERR(ct_slice(x, 1, 0, 3, -1) != NULL, CT_ERROR_VALUE, "slice step must be positive");
    CT_ASSERT_ERR(ct_slice(x, 2, 0, 3, 1) != NULL, CT_ERROR_INDEX, "[-2, 1], but got 2");
    CT_ASSERT_ERR(ct_slice(s, 0, 0, 1, 1) != NULL, CT_ERROR_INDEX, "slice() cannot be applied to a 0-dim tensor.");
    CT_ASSERT_ERR(ct_slice(NULL, 0, 0, 1, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "slice");
    CT_ASSERT_ERR(ct_narrow(x, 0, 1, 2) != NULL, CT_ERROR_VALUE, "start (1) + length (2) exceeds dimension size (2).");
    CT_ASSERT_ERR(ct_narrow(x, 0, 0, -1) != NULL, CT_ERROR_VALUE, "start (0) + length (-1) exceeds");
    CT_ASSERT_ERR(ct_narrow(x, -1, -1, 2) != NULL, CT_ERROR_VALUE,
                  "start (2) + length (2) exceeds dimension size (3).");
    CT_ASSERT_ERR(ct_narrow(x, 0, INT64_MAX, 1) != NULL, CT_ERROR_INDEX, "start out of range");
    CT_ASSERT_ERR(ct_narrow(x, 0, 3, 0) != NULL, CT_ERROR_INDEX, "[-2, 2], but got 3");
    CT_ASSERT_ERR(ct_narrow(x, 0, -3, 1) != NULL, CT_ERROR_INDEX, "but got -3");
    CT_ASSERT_ERR(ct_narrow(x, 1, 0, INT64_MAX) != NULL, CT_ERROR_VALUE, "exceeds dimension size (3)");
    CT_ASSERT_ERR(ct_narrow(x, 2, 0, 1) != NULL, CT_ERROR_INDEX, "Dimension out of range");
    CT_ASSERT_ERR(ct_narrow(s, 0, 0, 1) != NULL, CT_ERROR_VALUE, "narrow() cannot be applied to a 0-dim tensor.");
    CT_ASSERT_ERR(ct_narrow(NULL, 0, 0, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "narrow");
    CT_ASSERT_ERR(ct_select(x, 0, 2) != NULL, CT_ERROR_INDEX,
                  "select(): index 2 out of range for tensor of size [2, 3] at dimension 0");
    CT_ASSERT_ERR(ct_select(x, -1, -4) != NULL, CT_ERROR_INDEX,
                  "index -4 out of range for tensor of size [2, 3] at dimension 1");
    CT_ASSERT_ERR(ct_select(ct_empty(CT_SHAPE(0, 3), CT_F32, CT_CPU), 0, 0) != NULL, CT_ERROR_INDEX,
                  "index 0 out of range for tensor of size [0, 3]");
    CT_ASSERT_ERR(ct_select(x, 2, 0) != NULL, CT_ERROR_INDEX, "Dimension out of range");
    CT_ASSERT_ERR(ct_select(s, 0, 0) != NULL, CT_ERROR_INDEX, "select() cannot be applied to a 0-dim tensor.");
    CT_ASSERT_ERR(ct_select(NULL, 0, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "select");
    CT_ASSERT_ERR(ct_unfold(x, 1, 4, 1) != NULL, CT_ERROR_VALUE,
                  "maximum size for tensor at dimension 1 is 3 but size is 4");
    CT_ASSERT_ERR(ct_unfold(x, 1, 2, 0) != NULL, CT_ERROR_VALUE, "step is 0 but must be > 0");
    CT_ASSERT_ERR(ct_unfold(x, 1, 2, -2) != NULL, CT_ERROR_VALUE, "step is -2 but must be > 0");
    CT_ASSERT_ERR(ct_unfold(x, 1, -1, 1) != NULL, CT_ERROR_VALUE, "size is -1 but must be >= 0");
    CT_ASSERT_ERR(ct_unfold(x, 2, 1, 1) != NULL, CT_ERROR_INDEX, "[-2, 1], but got 2");
    CT_ASSERT_ERR(ct_unfold(s, 0, 2, 1) != NULL, CT_ERROR_VALUE, "maximum size for tensor at dimension 0 is 1");
    CT_ASSERT_ERR(ct_unfold(ct_empty(CT_SHAPE(1, 1, 1, 1, 1, 1, 1, 1), CT_F32, CT_CPU), 0, 1, 1) != NULL,
                  CT_ERROR_VALUE, "at most 8 dimensions");
    CT_ASSERT_ERR(ct_unfold(NULL, 0, 1, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "unfold");
    /* (2^40, 2^22) elements all at one address: its windows would be too many, as torch */
    ct_tensor *huge = ct_as_strided(x, CT_INDEX(INT64_C(1) << 40, INT64_C(1) << 22), CT_INDEX(0, 0), 2, 0);
    CT_ASSERT_OK(huge);
    CT_ASSERT_ERR(ct_unfold(huge, 1, INT64_C(1) << 21, 1) != NULL, CT_ERROR_VALUE,
                  "unfold: the number of elements of shape [1099511627776, 2097153, 2097152] overflows");
    /* empty ones are fine whatever their sizes */
    ct_tensor *empty = ct_as_strided(x, CT_INDEX(INT64_C(1) << 40, 0), CT_INDEX(1, 1), 2, 0);
    CT_ASSERT_SHAPE(ct_unfold(empty, 0, INT64_C(1) << 39, 1), (INT64_C(1) << 39) + 1, 0, INT64_C(1) << 39);
    CT_ASSERT_ERR(ct_diagonal(x, 0, 0, 0) != NULL, CT_ERROR_VALUE, "diagonal dimensions cannot be identical 0, 0");
    CT_ASSERT_ERR(ct_diagonal(x, 0, -1, 1) != NULL, CT_ERROR_VALUE, "diagonal dimensions cannot be identical -1, 1");
    CT_ASSERT_ERR(ct_diagonal(x, 0, 0, 2) != NULL, CT_ERROR_INDEX, "[-2, 1], but got 2");
    CT_ASSERT_ERR(ct_diagonal(SEQ(3), 0, 0, 1) != NULL, CT_ERROR_INDEX, "[-1, 0], but got 1");
    CT_ASSERT_ERR(ct_diagonal(s, 0, 0, 1) != NULL, CT_ERROR_INDEX, "but got 1");
    CT_ASSERT_ERR(ct_diagonal(NULL, 0, 0, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "diagonal");
    ct_scope_end();
}

static void test_errors_as_strided_alias(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_as_strided(x, CT_INDEX(2), CT_INDEX(1), 1, 5) != NULL, CT_ERROR_VALUE,
                  "setStorage: sizes [2], strides [1], storage offset 5, and itemsize 4 requiring a storage size of "
                  "28 are out of bounds for storage of size 24");
    CT_ASSERT_ERR(ct_as_strided(x, CT_INDEX(3, 3), CT_INDEX(3, 1), 2, 0) != NULL, CT_ERROR_VALUE, "out of bounds");
    /* from a sliced input the storage, not the slice, is the limit */
    ct_tensor *sl = ct_narrow(x, 1, 1, 1);
    CT_ASSERT_OK(ct_as_strided(sl, CT_INDEX(6), CT_INDEX(1), 1, 0));
    CT_ASSERT_ERR(ct_as_strided(sl, CT_INDEX(6), CT_INDEX(1), 1, -1) != NULL, CT_ERROR_VALUE,
                  "storage offset 1");
    CT_ASSERT_ERR(ct_as_strided(x, CT_INDEX(2), CT_INDEX(-1), 1, 0) != NULL, CT_ERROR_VALUE,
                  "Negative strides are not supported at the moment, got strides: [-1]");
    CT_ASSERT_ERR(ct_as_strided(x, CT_INDEX(-1), CT_INDEX(1), 1, 0) != NULL, CT_ERROR_VALUE, "negative dimension -1");
    CT_ASSERT_ERR(ct_as_strided(x, CT_INDEX(3), CT_INDEX(INT64_MAX / 2), 1, 0) != NULL, CT_ERROR_VALUE,
                  "overflowed");
    CT_ASSERT_ERR(ct_as_strided(x, CT_INDEX(1), CT_INDEX(1), 1, INT64_MAX) != NULL, CT_ERROR_VALUE, "overflowed");
    CT_ASSERT_ERR(ct_as_strided(x, CT_INDEX(INT64_C(1) << 40, INT64_C(1) << 40, 0), CT_INDEX(0, 0, 1), 3, 0) != NULL,
                  CT_ERROR_VALUE, "overflowed");
    CT_ASSERT_ERR(ct_as_strided(x, CT_INDEX(1, 1, 1, 1, 1, 1, 1, 1, 1), CT_INDEX(1, 1, 1, 1, 1, 1, 1, 1, 1), 9, 0) !=
                      NULL,
                  CT_ERROR_VALUE, "at most 8");
    CT_ASSERT_ERR(ct_as_strided(x, CT_INDEX(2), NULL, 1, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "strides is NULL");
    CT_ASSERT_ERR(ct_as_strided(x, NULL, CT_INDEX(1), 1, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "shape is NULL");
    CT_ASSERT_ERR(ct_as_strided(NULL, CT_INDEX(2), CT_INDEX(1), 1, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "as_strided");
    CT_ASSERT_ERR(ct_alias(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "alias");
    ct_scope_end();
}

/* The first error of a chain survives: a failed view feeding others. */
static void test_error_chain(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = SEQ(2, 3);
    ct_clear_error();
    ct_tensor *r = ct_flatten(ct_transpose(ct_unsqueeze(ct_view(x, CT_SHAPE(4)), 0), 0, 1), 0, -1);
    assert_null(r);
    assert_non_null(strstr(ct_last_error(), "view: shape '[4]' is invalid for input of size 6"));
    ct_clear_error();
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view_contiguous),
        cmocka_unit_test(test_view_noncontiguous),
        cmocka_unit_test(test_reshape_view_or_copy),
        cmocka_unit_test(test_view_reshape_sweep),
        cmocka_unit_test(test_views_other_dtypes),
        cmocka_unit_test(test_permute),
        cmocka_unit_test(test_transpose_t),
        cmocka_unit_test(test_movedim),
        cmocka_unit_test(test_expand),
        cmocka_unit_test(test_squeeze_unsqueeze),
        cmocka_unit_test(test_flatten_unflatten),
        cmocka_unit_test(test_slice_narrow),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_unfold),
        cmocka_unit_test(test_diagonal),
        cmocka_unit_test(test_as_strided_alias),
        cmocka_unit_test(test_storage_and_version_sharing),
        cmocka_unit_test(test_views_keep_storage_alive),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_errors_view_reshape),
        cmocka_unit_test(test_errors_reorder),
        cmocka_unit_test(test_errors_expand_squeeze),
        cmocka_unit_test(test_errors_flatten),
        cmocka_unit_test(test_errors_slicing),
        cmocka_unit_test(test_errors_as_strided_alias),
        cmocka_unit_test(test_error_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
