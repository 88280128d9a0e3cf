/* The indexing, sort and loss kernels on the GPU (indexing.cu, select.cu, sort.cu,
 * nn.cu) against the CPU: cat, index_select, gather, scatter_add (atomics over repeated
 * indices), index_add, masked_fill, scatter / scatter_reduce (every reduction, with and
 * without self; the last write winning over repeated targets), index_copy, index_fill,
 * index / index_put (accumulate, masks, broadcast indices), nonzero, masked_select,
 * one_hot, embedding and its backward, sort / argsort / topk, nll_loss / cross_entropy
 * and their gradients, take / masked_scatter / kthvalue / unique / unique_consecutive
 * (composed of the others); every element width, negative and int32 indices, non-contiguous inputs;
 * out-of-range indices and targets refused with the CPU's messages, device mixes
 * refused. Skipped (exit code 77) without a GPU. */
#include <string.h>

#include "cuda_testutil.h"
#include "ctorch/nn.h"

#define CUDA0 CT_CUDA(0)

static const ct_dtype dtypes[] = {CT_BOOL, CT_U8, CT_I8, CT_I16, CT_U16, CT_I32, CT_U32,
                                  CT_I64,  CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64};
#define NDT ((int)(sizeof dtypes / sizeof dtypes[0]))

static ct_tensor *g(const ct_tensor *t) { return ct_test_to_device_as(t, CUDA0); }

/* Indices in [-size, size) (negatives count from the end), int64 or int32. */
static ct_tensor *indices(const int64_t *shape, int nd, int64_t size, ct_dtype dt, uint64_t seed) {
    ct_tensor *t = ct_test_values(shape, nd, CT_I64, (double)-size, (double)size - 0.01, seed);
    return ct_to_dtype(t, dt);
}

/* Indices in [0, size), for the ops that refuse negatives as PyTorch does (index_select,
 * gather, scatter_add, index_add). */
static ct_tensor *nonneg_indices(const int64_t *shape, int nd, int64_t size, ct_dtype dt, uint64_t seed) {
    ct_tensor *t = ct_test_values(shape, nd, CT_I64, 0, (double)size - 0.01, seed);
    return ct_to_dtype(t, dt);
}

static void test_select_gather(void **state) {
    (void)state;
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = dtypes[d];
        ct_scope_begin();
        ct_tensor *a = ct_test_special(CT_SHAPE(6, 7, 8), dt, -50, 50, 1);
        ct_tensor *ga = g(a);
        for (int dim = 0; dim < 3; dim++) {
            int64_t size = ct_tensor_shape(a)[dim];
            ct_tensor *i64 = nonneg_indices(CT_SHAPE(11), size, CT_I64, 2 + dim),
                      *i32 = nonneg_indices(CT_SHAPE(5), size, CT_I32, 5);
            CT_AGREE("index_select", ct_index_select(a, dim, i64), ct_index_select(ga, dim, g(i64)), 0);
            CT_AGREE("index_select int32", ct_index_select(a, dim, i32), ct_index_select(ga, dim, g(i32)), 0);
            CT_AGREE("index_select transposed", ct_index_select(ct_t(ct_select(a, 0, 1)), dim % 2, i32),
                     ct_index_select(ct_t(ct_select(ga, 0, 1)), dim % 2, g(i32)), 0);
            int64_t ishape[3] = {4, 5, 6};
            ishape[dim] = 9;
            ct_tensor *gi = nonneg_indices(ishape, 3, size, CT_I64, 7 + dim);
            CT_AGREE("gather", ct_gather(a, dim, gi), ct_gather(ga, dim, g(gi)), 0);
            /* (indices drawn for a's sizes may be out of range here: both must refuse then) */
            CT_AGREE_ERR("gather transposed", ct_gather(ct_transpose(a, 0, 2), dim, ct_slice(gi, 0, 0, 4, 1)),
                         ct_gather(ct_transpose(ga, 0, 2), dim, g(ct_slice(gi, 0, 0, 4, 1))));
        }
        /* cat of three pieces (one needing a dtype conversion when not bool) */
        ct_tensor *b = ct_test_special(CT_SHAPE(6, 2, 8), dt, -50, 50, 9);
        ct_tensor *c = ct_test_special(CT_SHAPE(6, 3, 8), CT_I16, -50, 50, 10);
        const ct_tensor *parts[3] = {a, b, c}, *gparts[3] = {ga, g(b), g(c)};
        CT_AGREE_ERR("cat", ct_cat(parts, 3, 1), ct_cat(gparts, 3, 1));
        ct_scope_end();
    }
}

static void test_accumulate(void **state) {
    (void)state;
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = dtypes[d];
        ct_scope_begin();
        /* small values so that repeated additions stay exact in every dtype */
        ct_tensor *a = ct_test_values(CT_SHAPE(5, 6, 7), dt, 0, 3, 11);
        for (int dim = 0; dim < 3; dim++) {
            int64_t size = ct_tensor_shape(a)[dim];
            int64_t ishape[3] = {5, 6, 7};
            ishape[dim] = 12; /* more indices than rows: repeats, so atomics matter */
            ct_tensor *idx = nonneg_indices(ishape, 3, size, CT_I64, 13 + dim);
            ct_tensor *s = ct_test_values(ishape, 3, dt, 0, 3, 14 + dim);
            CT_AGREE_ERR("scatter_add", ct_scatter_add(a, dim, idx, s), ct_scatter_add(g(a), dim, g(idx), g(s)));
            ct_tensor *vi = nonneg_indices(CT_SHAPE(12), size, CT_I32, 15 + dim);
            int64_t sshape[3] = {5, 6, 7};
            sshape[dim] = 12;
            ct_tensor *s2 = ct_test_values(sshape, 3, dt, 0, 3, 16);
            ct_scalar alpha = ct_dtype_is_floating(dt) ? ct_scalar_float(0.5) : ct_scalar_int(2);
            CT_AGREE_ERR("index_add", ct_index_add(a, dim, vi, s2, alpha), ct_index_add(g(a), dim, g(vi), g(s2), alpha));
            /* in place on a transposed (non-contiguous) target */
            ct_tensor *ca = ct_clone(a), *gca = g(a);
            ct_tensor *r1 = ct_scatter_add_(ct_transpose(ca, 0, 2), 0, ct_zeros(CT_SHAPE(1, 1, 1), CT_I64, CT_CPU),
                                            ct_ones(CT_SHAPE(1, 1, 1), dt, CT_CPU));
            ct_tensor *r2 = ct_scatter_add_(ct_transpose(gca, 0, 2), 0, g(ct_zeros(CT_SHAPE(1, 1, 1), CT_I64, CT_CPU)),
                                            g(ct_ones(CT_SHAPE(1, 1, 1), dt, CT_CPU)));
            if (r1) {
                CT_ASSERT_OK(r2);
                CT_AGREE("scatter_add_ transposed", ca, gca, 0);
            }
            ct_clear_error();
        }
        /* masked_fill with a broadcast mask, in place through a strided view */
        ct_tensor *mask = ct_gt_scalar(ct_test_values(CT_SHAPE(6, 1), CT_F32, -1, 1, 17), ct_scalar_int(0));
        ct_tensor *m = ct_test_special(CT_SHAPE(6, 9), dt, -9, 9, 18);
        ct_scalar v = dt == CT_BOOL ? ct_scalar_bool(true) : ct_scalar_int(3);
        CT_AGREE_ERR("masked_fill", ct_masked_fill(m, mask, v), ct_masked_fill(g(m), g(mask), v));
        ct_tensor *cm = ct_clone(m), *gm = g(m);
        CT_ASSERT_OK(ct_masked_fill_(ct_slice(cm, 1, 0, 9, 2), mask, v));
        CT_ASSERT_OK(ct_masked_fill_(ct_slice(gm, 1, 0, 9, 2), g(mask), v));
        CT_AGREE("masked_fill_ strided", cm, gm, 0);
        ct_scope_end();
    }
}

/* Float scatter_add over many repeats: atomics add in any order, so close, not equal
 * (float32/float64; the 16-bit float atomics are checked exactly in test_accumulate,
 * where every partial sum is representable). */
static void test_float_atomics(void **state) {
    (void)state;
    ct_scope_begin();
    ct_dtype fd[] = {CT_F32, CT_F64};
    for (int d = 0; d < 2; d++) {
        ct_tensor *t = ct_zeros(CT_SHAPE(10, 32), fd[d], CT_CPU);
        ct_tensor *idx = indices(CT_SHAPE(5000, 32), 10, CT_I64, 19);
        idx = ct_remainder_scalar(idx, ct_scalar_int(10));
        ct_tensor *src = ct_test_values(CT_SHAPE(5000, 32), fd[d], -1, 1, 20);
        ct_tensor *cpu = ct_scatter_add(t, 0, idx, src), *gpu = ct_scatter_add(g(t), 0, g(idx), g(src));
        /* ~500 additions per element: the tolerance grows with the count */
        CT_AGREE("scatter_add float repeats", cpu, gpu, fd[d] == CT_F64 ? 1e3 : 200);
    }
    ct_scope_end();
}

static void test_embedding_and_nll(void **state) {
    (void)state;
    ct_scope_begin();
    ct_dtype fd[] = {CT_F16, CT_BF16, CT_F32, CT_F64};
    for (int d = 0; d < 4; d++) {
        ct_tensor *w = ct_test_values(CT_SHAPE(50, 16), fd[d], -1, 1, 21);
        ct_tensor *idx = ct_test_values(CT_SHAPE(4, 30), CT_I64, 0, 49.99, 22);
        CT_AGREE("embedding", ct_embedding(idx, w, CT_NO_PADDING_IDX), ct_embedding(g(idx), g(w), CT_NO_PADDING_IDX), 0);
        ct_tensor *gy = ct_test_values(CT_SHAPE(4, 30, 16), fd[d], -1, 1, 23);
        CT_AGREE("embedding_backward", ct_embedding_backward(gy, idx, 50, 7), ct_embedding_backward(g(gy), g(idx), 50, 7),
                 8);
        /* nll_loss / cross_entropy over (N, C) and (N, C, d) with weights and an
         * ignored class */
        ct_tensor *x = ct_test_values(CT_SHAPE(8, 5, 3), fd[d], -3, 3, 24);
        ct_tensor *t = ct_test_values(CT_SHAPE(8, 3), CT_I64, 0, 4.99, 25);
        ct_tensor *cw = ct_test_values(CT_SHAPE(5), fd[d], 0.5, 2, 26);
        ct_reduction reds[] = {CT_REDUCTION_NONE, CT_REDUCTION_MEAN, CT_REDUCTION_SUM};
        for (int r = 0; r < 3; r++) {
            CT_AGREE("nll_loss", ct_nll_loss(x, t, cw, reds[r], 2), ct_nll_loss(g(x), g(t), g(cw), reds[r], 2), 8);
            CT_AGREE("nll_loss no weight", ct_nll_loss(ct_select(x, 2, 0), ct_select(t, 1, 0), NULL, reds[r], -100),
                     ct_nll_loss(g(ct_select(x, 2, 0)), g(ct_select(t, 1, 0)), NULL, reds[r], -100), 8);
            ct_tensor *go = reds[r] == CT_REDUCTION_NONE ? ct_test_values(CT_SHAPE(8, 3), fd[d], -1, 1, 27)
                                                         : ct_full(NULL, 0, ct_scalar_float(0.75), fd[d], CT_CPU);
            CT_AGREE("nll_loss_backward", ct_nll_loss_backward(go, x, t, cw, reds[r], 2),
                     ct_nll_loss_backward(g(go), g(x), g(t), g(cw), reds[r], 2), 8);
            CT_AGREE("cross_entropy", ct_cross_entropy(x, t, NULL, reds[r], -100, 0.0),
                     ct_cross_entropy(g(x), g(t), NULL, reds[r], -100, 0.0), 8);
        }
    }
    ct_scope_end();
}

/* Sort is exact: the same order as the CPU, NaN above every number, -0 tied with +0,
 * ties kept in order (indices too); uint64 (negative samples wrap above 2^63) in its
 * unsigned order. */
static void test_sort_topk(void **state) {
    (void)state;
    ct_dtype sdt[] = {CT_BOOL, CT_U8,  CT_I8,   CT_I16,  CT_I32, CT_I64,
                      CT_U16,  CT_U32, CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64};
    for (size_t d = 0; d < sizeof sdt / sizeof sdt[0]; d++) {
        ct_scope_begin();
        /* few distinct values: many ties */
        ct_tensor *a = ct_test_special(CT_SHAPE(7, 40, 9), sdt[d], -3, 3, 29);
        ct_tensor *ga = g(a);
        for (int dim = -1; dim < 3; dim++)
            for (int desc = 0; desc < 2; desc++) {
                char what[96];
                snprintf(what, sizeof what, "sort dim %d desc %d %s", dim, desc, ct_dtype_name(sdt[d]));
                ct_tensor *ci = NULL, *gi = NULL;
                ct_tensor *cv = ct_sort(a, dim, desc != 0, &ci), *gv = ct_sort(ga, dim, desc != 0, &gi);
                CT_AGREE(what, cv, gv, 0);
                CT_AGREE(what, ci, gi, 0);
                CT_AGREE(what, ct_argsort(ct_transpose(a, 0, 2), dim, desc != 0),
                         ct_argsort(ct_transpose(ga, 0, 2), dim, desc != 0), 0);
                snprintf(what, sizeof what, "topk dim %d largest %d %s", dim, desc, ct_dtype_name(sdt[d]));
                ct_clear_error();
                ct_tensor *tv = ct_topk(a, 5, dim, desc != 0, &ci);
                ct_status st = ct_last_status();
                ct_clear_error();
                ct_tensor *gtv = ct_topk(ga, 5, dim, desc != 0, &gi);
                if (!tv) { /* bool: refused on both */
                    assert_null(gtv);
                    assert_int_equal(ct_last_status(), st);
                    ct_clear_error();
                    continue;
                }
                CT_AGREE(what, tv, gtv, 0);
                CT_AGREE(what, ci, gi, 0);
            }
        ct_tensor *z = ct_test_special(NULL, 0, sdt[d], -3, 3, 30), *zi = NULL, *gzi = NULL;
        CT_AGREE("sort 0-d", ct_sort(z, 0, false, &zi), ct_sort(g(z), 0, false, &gzi), 0);
        ct_tensor *e = ct_zeros(CT_SHAPE(0, 4), sdt[d], CT_CPU);
        CT_AGREE("sort empty", ct_sort(e, 1, true, &zi), ct_sort(g(e), 1, true, &gzi), 0);
        ct_scope_end();
    }
    ct_scope_begin();
    ct_tensor *a = g(ct_ones(CT_SHAPE(4), CT_F32, CT_CPU)), *i = NULL;
    CT_ASSERT_ERR(ct_topk(a, 5, 0, true, &i) != NULL, CT_ERROR_INDEX, "selected index k out of range");
    ct_scope_end();
}

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = g(ct_test_values(CT_SHAPE(4, 5), CT_F32, -1, 1, 28));
    int64_t bad[] = {0, 2, 7, -9};
    ct_tensor *bi = g(ct_from_data(bad, CT_SHAPE(4), CT_I64));
    CT_ASSERT_ERR(ct_index_select(a, 0, bi) != NULL, CT_ERROR_INDEX, "index out of range in self (index 7, size 4)");
    ct_tensor *before = ct_to_device(a, CT_CPU);
    int64_t gbad[] = {0, 1, 2, 3, 9};
    ct_tensor *gb = g(ct_from_data(gbad, CT_SHAPE(1, 5), CT_I64));
    CT_ASSERT_ERR(ct_scatter_add_(a, 0, gb, a) != NULL, CT_ERROR_INDEX, "index 9 is out of bounds");
    CT_AGREE("a failed scatter_add_ leaves its target alone", before, a, 0);
    CT_ASSERT_ERR(ct_gather(a, 1, ct_from_data(gbad, CT_SHAPE(1, 5), CT_I64)) != NULL, CT_ERROR_DEVICE, "same device");
    CT_ASSERT_ERR(ct_index_select(a, 0, g(ct_ones(CT_SHAPE(2), CT_F32, CT_CPU))) != NULL, CT_ERROR_TYPE,
                  "index_select(): Expected dtype int32 or int64 for index");
    CT_ASSERT_ERR(ct_masked_fill(a, g(ct_ones(CT_SHAPE(4, 5), CT_U8, CT_CPU)), ct_scalar_int(1)) != NULL, CT_ERROR_TYPE,
                  "boolean masks");
    int64_t ebad[] = {1, 50};
    CT_ASSERT_ERR(ct_embedding(g(ct_from_data(ebad, CT_SHAPE(2), CT_I64)), g(ct_ones(CT_SHAPE(50, 3), CT_F32, CT_CPU)),
                               CT_NO_PADDING_IDX) != NULL,
                  CT_ERROR_INDEX, "index out of range in self");
    int64_t tbad[] = {0, 5, 1, 1};
    CT_ASSERT_ERR(ct_nll_loss(a, g(ct_from_data(tbad, CT_SHAPE(4), CT_I64)), NULL, CT_REDUCTION_MEAN, -100) != NULL,
                  CT_ERROR_INDEX, "Target 5 is out of bounds.");
    CT_ASSERT_ERR(ct_nll_loss(a, ct_from_data(tbad, CT_SHAPE(4), CT_I64), NULL, CT_REDUCTION_MEAN, -100) != NULL,
                  CT_ERROR_DEVICE, "same device");
    const ct_tensor *mixed[2] = {a, ct_ones(CT_SHAPE(4, 5), CT_F32, CT_CPU)};
    CT_ASSERT_ERR(ct_cat(mixed, 2, 0) != NULL, CT_ERROR_DEVICE, "same device");
    ct_scope_end();
}

/* ------------------------------------------------------------------ scatter, index_copy, index_fill, index_put */

/* Both devices refuse with status st and a message holding needle (the CPU's exact
 * wording, which the GPU must repeat). */
#define BOTH_ERR(cpu_expr, gpu_expr, st, needle)             \
    do {                                                     \
        ct_clear_error();                                    \
        CT_ASSERT_ERR((cpu_expr) != NULL, (st), (needle));   \
        CT_ASSERT_ERR((gpu_expr) != NULL, (st), (needle));   \
    } while (0)

/* Small integers 0..hi in dtype dt: sums and means over a few repeats stay exact in
 * every dtype, whatever order the GPU's atomics take; with hi = 2, products are zero or
 * powers of two, exact in any order too. */
static ct_tensor *small_ints(const int64_t *shape, int nd, ct_dtype dt, double hi, uint64_t seed) {
    return ct_to_dtype(ct_test_values(shape, nd, CT_I64, 0, hi + 0.99, seed), dt);
}

/* Indices in [0, size) (repeats when there are more than size). */
static ct_tensor *positions(const int64_t *shape, int nd, int64_t size, uint64_t seed) {
    return ct_test_values(shape, nd, CT_I64, 0, (double)size - 0.01, seed);
}

static const char *const reductions[] = {"sum", "prod", "mean", "amax", "amin"};

static void test_scatter(void **state) {
    (void)state;
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = dtypes[d];
        ct_scope_begin();
        ct_tensor *a = ct_test_special(CT_SHAPE(5, 6, 7), dt, -50, 50, 31);
        ct_tensor *ga = g(a);
        ct_scalar v = dt == CT_BOOL ? ct_scalar_bool(true) : ct_scalar_int(3);
        for (int dim = 0; dim < 3; dim++) {
            int64_t ishape[3] = {4, 5, 6};
            ishape[dim] = 9; /* more positions than rows: repeated targets */
            ct_tensor *idx = positions(ishape, 3, ct_tensor_shape(a)[dim], 32 + dim);
            ct_tensor *src = ct_test_special(CT_SHAPE(9, 9, 9), dt, -50, 50, 33);
            ct_tensor *s = ct_slice(ct_slice(ct_slice(src, 0, 0, ishape[0], 1), 1, 0, ishape[1], 1), 2, 0, ishape[2], 1);
            /* src larger than the index (a strided view), the last write winning */
            CT_AGREE("scatter", ct_scatter(a, dim, idx, src), ct_scatter(ga, dim, g(idx), g(src)), 0);
            CT_AGREE("scatter sliced src", ct_scatter(a, dim, idx, s), ct_scatter(ga, dim, g(idx), g(s)), 0);
            CT_AGREE("scatter value", ct_scatter_value(a, dim, idx, v), ct_scatter_value(ga, dim, g(idx), v), 0);
            /* transposed target, index and source */
            ct_tensor *at = ct_transpose(a, 0, 2), *it = ct_transpose(idx, 0, 2), *st = ct_transpose(src, 0, 2);
            CT_AGREE("scatter transposed", ct_scatter(at, 2 - dim, it, st),
                     ct_scatter(g(at), 2 - dim, g(it), g(st)), 0);
            /* in place through a strided view */
            ct_tensor *ca = ct_clone(a), *gca = g(a);
            CT_ASSERT_OK(ct_scatter_(ct_transpose(ca, 0, 2), 2 - dim, it, st));
            CT_ASSERT_OK(ct_scatter_(ct_transpose(gca, 0, 2), 2 - dim, g(it), g(st)));
            CT_AGREE("scatter_ transposed", ca, gca, 0);
            CT_ASSERT_OK(ct_scatter_value_(ca, dim, idx, v));
            CT_ASSERT_OK(ct_scatter_value_(gca, dim, g(idx), v));
            CT_AGREE("scatter_value_", ca, gca, 0);
        }
        /* scatter_reduce: exact on small integers, every reduction, with and without self */
        ct_tensor *b = small_ints(CT_SHAPE(5, 6, 7), dt, 2, 34);
        for (int dim = 0; dim < 3; dim++) {
            int64_t ishape[3] = {5, 6, 7};
            ishape[dim] = 11;
            ct_tensor *idx = positions(ishape, 3, ct_tensor_shape(b)[dim], 35 + dim);
            ct_tensor *src = small_ints(ishape, 3, dt, 2, 36 + dim);
            for (int r = 0; r < 5; r++)
                for (int self = 0; self < 2; self++) {
                    char what[96];
                    snprintf(what, sizeof what, "scatter_reduce %s self %d dim %d %s", reductions[r], self, dim,
                             ct_dtype_name(dt));
                    CT_AGREE(what, ct_scatter_reduce(b, dim, idx, src, reductions[r], self != 0),
                             ct_scatter_reduce(g(b), dim, g(idx), g(src), reductions[r], self != 0), 0);
                }
            /* amax/amin over the special values (NaN wins, infinities) */
            ct_tensor *sp = ct_test_special(ishape, 3, dt, -9, 9, 37 + dim);
            for (int r = 3; r < 5; r++)
                for (int self = 0; self < 2; self++)
                    CT_AGREE(reductions[r], ct_scatter_reduce(a, dim, idx, sp, reductions[r], self != 0),
                             ct_scatter_reduce(ga, dim, g(idx), g(sp), reductions[r], self != 0), 0);
        }
        /* in place on a transposed target */
        ct_tensor *cb = ct_clone(b), *gcb = g(b);
        ct_tensor *ri = positions(CT_SHAPE(7, 6, 9), 5, 38), *rs = small_ints(CT_SHAPE(7, 6, 9), dt, 3, 39);
        CT_ASSERT_OK(ct_scatter_reduce_(ct_transpose(cb, 0, 2), 2, ri, rs, "mean", false));
        CT_ASSERT_OK(ct_scatter_reduce_(ct_transpose(gcb, 0, 2), 2, g(ri), g(rs), "mean", false));
        CT_AGREE("scatter_reduce_ mean transposed", cb, gcb, 0);
        ct_scope_end();
    }
}

static void test_scatter_edges(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_test_values(CT_SHAPE(4, 6), CT_F32, -1, 1, 40), *ga = g(a);
    /* empty index: a copy; empty target; 0-d target and index */
    ct_tensor *e = ct_zeros(CT_SHAPE(0, 6), CT_I64, CT_CPU), *es = ct_zeros(CT_SHAPE(0, 6), CT_F32, CT_CPU);
    CT_AGREE("scatter empty index", ct_scatter(a, 0, e, es), ct_scatter(ga, 0, g(e), g(es)), 0);
    CT_AGREE("scatter_reduce empty index", ct_scatter_reduce(a, 0, e, es, "prod", false),
             ct_scatter_reduce(ga, 0, g(e), g(es), "prod", false), 0);
    ct_tensor *z = ct_zeros(CT_SHAPE(0, 3), CT_F32, CT_CPU);
    CT_AGREE("scatter empty target", ct_scatter(z, 1, e, es), ct_scatter(g(z), 1, g(e), g(es)), 0);
    ct_tensor *s0 = ct_full(NULL, 0, ct_scalar_float(2.5), CT_F32, CT_CPU), *i0 = ct_zeros(NULL, 0, CT_I64, CT_CPU);
    ct_tensor *t0 = ct_full(NULL, 0, ct_scalar_float(-1), CT_F32, CT_CPU);
    CT_AGREE("scatter 0-d", ct_scatter(t0, 0, i0, s0), ct_scatter(g(t0), 0, g(i0), g(s0)), 0);
    CT_AGREE("scatter_reduce 0-d", ct_scatter_reduce(t0, 0, i0, s0, "sum", true),
             ct_scatter_reduce(g(t0), 0, g(i0), g(s0), "sum", true), 0);
    /* float sums and means over many repeats: close (atomics add in any order) */
    ct_tensor *big = ct_test_values(CT_SHAPE(10, 32), CT_F64, -1, 1, 41);
    ct_tensor *ri = positions(CT_SHAPE(3000, 32), 10, 42), *rs = ct_test_values(CT_SHAPE(3000, 32), CT_F64, -1, 1, 43);
    CT_AGREE("scatter_reduce sum repeats", ct_scatter_reduce(big, 0, ri, rs, "sum", true),
             ct_scatter_reduce(g(big), 0, g(ri), g(rs), "sum", true), 1e3);
    CT_AGREE("scatter_reduce mean repeats", ct_scatter_reduce(big, 0, ri, rs, "mean", false),
             ct_scatter_reduce(g(big), 0, g(ri), g(rs), "mean", false), 1e3);
    CT_AGREE("scatter repeats", ct_scatter(big, 0, ri, rs), ct_scatter(g(big), 0, g(ri), g(rs)), 0);
    /* out-of-range and negative positions: the CPU's message; an in-place target is
     * left as it was */
    int64_t bad[] = {0, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 6};
    ct_tensor *bi = ct_from_data(bad, CT_SHAPE(2, 6), CT_I64);
    BOTH_ERR(ct_scatter(a, 0, bi, a), ct_scatter(ga, 0, g(bi), ga), CT_ERROR_INDEX,
             "index 4 is out of bounds for dimension 0 with size 4");
    BOTH_ERR(ct_scatter_reduce(a, 1, ct_add_scalar(bi, ct_scalar_int(1)), ct_ones(CT_SHAPE(2, 6), CT_F32, CT_CPU), "amax", true),
             ct_scatter_reduce(ga, 1, g(ct_add_scalar(bi, ct_scalar_int(1))), g(ct_ones(CT_SHAPE(2, 6), CT_F32, CT_CPU)), "amax", true),
             CT_ERROR_INDEX, "index 6 is out of bounds for dimension 1 with size 6");
    int64_t neg[] = {0, -1};
    ct_tensor *ni = ct_from_data(neg, CT_SHAPE(1, 2), CT_I64);
    BOTH_ERR(ct_scatter_value(a, 1, ni, ct_scalar_int(1)), ct_scatter_value(ga, 1, g(ni), ct_scalar_int(1)),
             CT_ERROR_INDEX, "index -1 is out of bounds for dimension 1 with size 6");
    ct_tensor *before = ct_to_device(ga, CT_CPU);
    CT_ASSERT_ERR(ct_scatter_(ga, 0, g(bi), ga) != NULL, CT_ERROR_INDEX, "index 4 is out of bounds");
    CT_AGREE("a failed scatter_ leaves its target alone", before, ga, 0);
    CT_ASSERT_ERR(ct_scatter_reduce_(ga, 0, g(bi), ga, "sum", false) != NULL, CT_ERROR_INDEX, "index 4 is out of bounds");
    CT_AGREE("a failed scatter_reduce_ leaves its target alone", before, ga, 0);
    /* argument errors repeat the CPU's */
    /* int32 indices are taken (PyTorch 2.x), other dtypes refused */
    CT_AGREE("scatter int32 index", ct_scatter(a, 0, ct_zeros(CT_SHAPE(1, 2), CT_I32, CT_CPU), a),
             ct_scatter(ga, 0, g(ct_zeros(CT_SHAPE(1, 2), CT_I32, CT_CPU)), ga), 0);
    BOTH_ERR(ct_scatter(a, 0, ct_zeros(CT_SHAPE(1, 2), CT_I16, CT_CPU), a),
             ct_scatter(ga, 0, g(ct_zeros(CT_SHAPE(1, 2), CT_I16, CT_CPU)), ga), CT_ERROR_TYPE,
             "Expected dtype int32/int64 for index");
    BOTH_ERR(ct_scatter(a, 0, ct_zeros(CT_SHAPE(2), CT_I64, CT_CPU), a),
             ct_scatter(ga, 0, g(ct_zeros(CT_SHAPE(2), CT_I64, CT_CPU)), ga), CT_ERROR_VALUE, "same number of dimensions");
    CT_ASSERT_ERR(ct_scatter(ga, 0, ct_zeros(CT_SHAPE(1, 2), CT_I64, CT_CPU), ga) != NULL, CT_ERROR_DEVICE, "same device");
    ct_scope_end();
}

static void test_index_copy_fill(void **state) {
    (void)state;
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = dtypes[d];
        ct_scope_begin();
        ct_tensor *a = ct_test_special(CT_SHAPE(5, 6, 7), dt, -50, 50, 44), *ga = g(a);
        ct_scalar v = dt == CT_BOOL ? ct_scalar_bool(true) : ct_scalar_int(-2);
        if (dt == CT_U8 || dt == CT_U16 || dt == CT_U32 || dt == CT_U64)
            v = ct_scalar_int(7);
        for (int dim = 0; dim < 3; dim++) {
            int64_t size = ct_tensor_shape(a)[dim];
            /* 9 positions: repeats, the last one winning as on the CPU */
            ct_tensor *idx = positions(CT_SHAPE(9), size, 45 + dim);
            int64_t sshape[3] = {5, 6, 7};
            sshape[dim] = 9;
            ct_tensor *src = ct_test_special(sshape, 3, dt, -50, 50, 46 + dim);
            CT_AGREE("index_copy", ct_index_copy(a, dim, idx, src), ct_index_copy(ga, dim, g(idx), g(src)), 0);
            ct_tensor *ts = ct_transpose(src, 0, 2), *ta = ct_transpose(a, 0, 2);
            CT_AGREE("index_copy transposed", ct_index_copy(ta, 2 - dim, idx, ts),
                     ct_index_copy(g(ta), 2 - dim, g(idx), g(ts)), 0);
            /* a strided index, negatives for index_fill (which wraps them) */
            ct_tensor *fi = indices(CT_SHAPE(10), size, CT_I64, 47 + dim), *sfi = ct_slice(fi, 0, 0, 10, 2);
            CT_AGREE("index_fill", ct_index_fill(a, dim, fi, v), ct_index_fill(ga, dim, g(fi), v), 0);
            CT_AGREE("index_fill strided index", ct_index_fill(ta, 2 - dim, sfi, v),
                     ct_index_fill(g(ta), 2 - dim, g(sfi), v), 0);
            ct_tensor *ca = ct_clone(a), *gca = g(a);
            CT_ASSERT_OK(ct_index_copy_(ct_transpose(ca, 0, 2), 2 - dim, idx, ts));
            CT_ASSERT_OK(ct_index_copy_(ct_transpose(gca, 0, 2), 2 - dim, g(idx), g(ts)));
            CT_ASSERT_OK(ct_index_fill_(ct_transpose(ca, 0, 1), dim == 2 ? 2 : 1 - dim, sfi, v));
            CT_ASSERT_OK(ct_index_fill_(ct_transpose(gca, 0, 1), dim == 2 ? 2 : 1 - dim, g(sfi), v));
            CT_AGREE("index_copy_/index_fill_ in place", ca, gca, 0);
        }
        /* 0-d target, index and source; empty index */
        ct_tensor *s0 = ct_test_special(NULL, 0, dt, -3, 3, 48), *i0 = ct_zeros(NULL, 0, CT_I64, CT_CPU);
        CT_AGREE("index_copy 0-d", ct_index_copy(s0, 0, i0, s0), ct_index_copy(g(s0), 0, g(i0), g(s0)), 0);
        CT_AGREE("index_fill 0-d", ct_index_fill(s0, 0, i0, v), ct_index_fill(g(s0), 0, g(i0), v), 0);
        ct_tensor *e = ct_zeros(CT_SHAPE(0), CT_I64, CT_CPU);
        CT_AGREE("index_fill empty index", ct_index_fill(a, 1, e, v), ct_index_fill(ga, 1, g(e), v), 0);
        CT_AGREE("index_copy empty index", ct_index_copy(a, 1, e, ct_zeros(CT_SHAPE(5, 0, 7), dt, CT_CPU)),
                 ct_index_copy(ga, 1, g(e), g(ct_zeros(CT_SHAPE(5, 0, 7), dt, CT_CPU))), 0);
        ct_scope_end();
    }
    ct_scope_begin();
    ct_tensor *a = ct_test_values(CT_SHAPE(5, 4), CT_F32, -1, 1, 49), *ga = g(a);
    int64_t bad[] = {0, 5}, neg[] = {-1, 2}, fbad[] = {1, -6};
    ct_tensor *bi = ct_from_data(bad, CT_SHAPE(2), CT_I64), *ni = ct_from_data(neg, CT_SHAPE(2), CT_I64);
    ct_tensor *fi = ct_from_data(fbad, CT_SHAPE(2), CT_I64), *src = ct_ones(CT_SHAPE(2, 4), CT_F32, CT_CPU);
    BOTH_ERR(ct_index_copy(a, 0, bi, src), ct_index_copy(ga, 0, g(bi), g(src)), CT_ERROR_INDEX,
             "index_copy_(): index 5 is out of bounds for dimension 0 with size 5");
    BOTH_ERR(ct_index_copy(a, 0, ni, src), ct_index_copy(ga, 0, g(ni), g(src)), CT_ERROR_INDEX,
             "index_copy_(): index -1 is out of bounds for dimension 0 with size 5");
    BOTH_ERR(ct_index_fill(a, 0, fi, ct_scalar_int(1)), ct_index_fill(ga, 0, g(fi), ct_scalar_int(1)), CT_ERROR_INDEX,
             "index -6 is out of bounds for dimension 0 with size 5");
    ct_tensor *before = ct_to_device(ga, CT_CPU);
    CT_ASSERT_ERR(ct_index_copy_(ga, 0, g(bi), g(src)) != NULL, CT_ERROR_INDEX, "index 5 is out of bounds");
    CT_ASSERT_ERR(ct_index_fill_(ga, 0, g(fi), ct_scalar_int(1)) != NULL, CT_ERROR_INDEX, "index -6 is out of bounds");
    CT_AGREE("failed index_copy_/index_fill_ leave their target alone", before, ga, 0);
    BOTH_ERR(ct_index_copy(a, 0, ct_zeros(CT_SHAPE(2), CT_I32, CT_CPU), src),
             ct_index_copy(ga, 0, g(ct_zeros(CT_SHAPE(2), CT_I32, CT_CPU)), g(src)), CT_ERROR_TYPE,
             "Expected a long tensor for index");
    BOTH_ERR(ct_index_fill(a, 0, ct_zeros(CT_SHAPE(1, 2), CT_I64, CT_CPU), ct_scalar_int(1)),
             ct_index_fill(ga, 0, g(ct_zeros(CT_SHAPE(1, 2), CT_I64, CT_CPU)), ct_scalar_int(1)), CT_ERROR_VALUE,
             "Index has to be a vector/scalar");
    CT_ASSERT_ERR(ct_index_fill(ga, 0, bi, ct_scalar_int(1)) != NULL, CT_ERROR_DEVICE, "same device");
    ct_scope_end();
}

static void test_index_put(void **state) {
    (void)state;
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = dtypes[d];
        ct_scope_begin();
        ct_tensor *a = small_ints(CT_SHAPE(5, 6, 7), dt, 3, 50), *ga = g(a);
        /* t[i, :, j] (B first), t[:, i, j] with i (3, 1) and j (1, 4) broadcast (in place),
         * t[mask] with a (5, 6) mask, t[i] with negative positions */
        ct_tensor *i0 = indices(CT_SHAPE(8), 5, CT_I64, 51), *i2 = indices(CT_SHAPE(8), 7, CT_I64, 52);
        ct_tensor *i1 = indices(CT_SHAPE(3, 1), 6, CT_I64, 53), *j2 = indices(CT_SHAPE(1, 4), 6, CT_I64, 54);
        ct_tensor *mask = ct_gt_scalar(ct_test_values(CT_SHAPE(5, 6), CT_F32, -1, 1, 55), ct_scalar_int(0));
        const ct_tensor *l1[3] = {i0, NULL, i2}, *gl1[3] = {g(i0), NULL, g(i2)};
        const ct_tensor *l2[3] = {NULL, i1, j2}, *gl2[3] = {NULL, g(i1), g(j2)};
        const ct_tensor *l3[1] = {mask}, *gl3[1] = {g(mask)};
        const ct_tensor *l4[1] = {i0}, *gl4[1] = {g(i0)};
        CT_AGREE("index B first", ct_index(a, l1, 3), ct_index(ga, gl1, 3), 0);
        CT_AGREE("index broadcast", ct_index(a, l2, 3), ct_index(ga, gl2, 3), 0);
        CT_AGREE("index mask", ct_index(a, l3, 1), ct_index(ga, gl3, 1), 0);
        CT_AGREE("index transposed", ct_index(ct_transpose(a, 0, 2), l4, 1), ct_index(ct_transpose(ga, 0, 2), gl4, 1), 0);
        ct_tensor *v1 = small_ints(CT_SHAPE(8, 6), dt, 3, 56), *v2 = small_ints(CT_SHAPE(4), dt, 3, 57);
        ct_tensor *v3 = small_ints(CT_SHAPE(1), dt, 3, 58);
        for (int acc = 0; acc < 2; acc++) {
            char what[96];
            snprintf(what, sizeof what, "index_put acc %d %s", acc, ct_dtype_name(dt));
            CT_AGREE(what, ct_index_put(a, l1, 3, v1, acc), ct_index_put(ga, gl1, 3, g(v1), acc), 0);
            CT_AGREE(what, ct_index_put(a, l2, 3, v2, acc), ct_index_put(ga, gl2, 3, g(v2), acc), 0);
            CT_AGREE(what, ct_index_put(a, l3, 1, v3, acc), ct_index_put(ga, gl3, 1, g(v3), acc), 0);
            ct_tensor *ca = ct_clone(a), *gca = g(a);
            CT_ASSERT_OK(ct_index_put_(ct_transpose(ca, 0, 1), l4, 1, v3, acc));
            CT_ASSERT_OK(ct_index_put_(ct_transpose(gca, 0, 1), gl4, 1, g(v3), acc));
            CT_ASSERT_OK(ct_index_put_(ct_transpose(ca, 1, 2), l2, 3, v2, acc));
            CT_ASSERT_OK(ct_index_put_(ct_transpose(gca, 1, 2), gl2, 3, g(v2), acc));
            CT_AGREE("index_put_ transposed", ca, gca, 0);
            ct_clear_error();
        }
        ct_scope_end();
    }
    ct_scope_begin();
    ct_tensor *a = ct_test_values(CT_SHAPE(4, 5, 7), CT_F32, -1, 1, 59), *ga = g(a);
    /* float accumulation over many repeats: close */
    ct_tensor *ri = positions(CT_SHAPE(4000), 4, 60), *rv = ct_test_values(CT_SHAPE(4000, 5, 7), CT_F32, -1, 1, 61);
    const ct_tensor *rl[1] = {ri}, *grl[1] = {g(ri)};
    CT_AGREE("index_put accumulate repeats", ct_index_put(a, rl, 1, rv, true), ct_index_put(ga, grl, 1, g(rv), true), 200);
    CT_AGREE("index_put repeats", ct_index_put(a, rl, 1, rv, false), ct_index_put(ga, grl, 1, g(rv), false), 0);
    /* the dim in the message counts the indexed dims only; the first bad position wins */
    int64_t ok[] = {0, 1, 2}, bad[] = {1, 9, -8};
    ct_tensor *oi = ct_from_data(ok, CT_SHAPE(3), CT_I64), *bi = ct_from_data(bad, CT_SHAPE(3), CT_I64);
    const ct_tensor *l[3] = {oi, NULL, bi}, *gl[3] = {g(oi), NULL, g(bi)};
    ct_tensor *vals = ct_ones(CT_SHAPE(3, 5), CT_F32, CT_CPU);
    BOTH_ERR(ct_index(a, l, 3), ct_index(ga, gl, 3), CT_ERROR_INDEX, "index 9 is out of bounds for dimension 1 with size 7");
    BOTH_ERR(ct_index_put(a, l, 3, vals, true), ct_index_put(ga, gl, 3, g(vals), true), CT_ERROR_INDEX,
             "index 9 is out of bounds for dimension 1 with size 7");
    ct_tensor *before = ct_to_device(ga, CT_CPU);
    CT_ASSERT_ERR(ct_index_put_(ga, gl, 3, g(vals), false) != NULL, CT_ERROR_INDEX, "index 9 is out of bounds");
    CT_AGREE("a failed index_put_ leaves its target alone", before, ga, 0);
    /* an empty result checks nothing, on both */
    ct_tensor *e = ct_zeros(CT_SHAPE(4, 0, 7), CT_F32, CT_CPU);
    CT_AGREE("index empty result", ct_index(e, l, 3), ct_index(g(e), gl, 3), 0);
    CT_AGREE("index_put empty result", ct_index_put(e, l, 3, ct_ones(CT_SHAPE(1), CT_F32, CT_CPU), false),
             ct_index_put(g(e), gl, 3, g(ct_ones(CT_SHAPE(1), CT_F32, CT_CPU)), false), 0);
    BOTH_ERR(ct_index_put(a, l, 3, ct_ones(CT_SHAPE(3, 5), CT_F64, CT_CPU), false),
             ct_index_put(ga, gl, 3, g(ct_ones(CT_SHAPE(3, 5), CT_F64, CT_CPU)), false), CT_ERROR_TYPE,
             "Index put requires the source and destination dtypes match");
    const ct_tensor *mixed[1] = {oi};
    CT_ASSERT_ERR(ct_index(ga, mixed, 1) != NULL, CT_ERROR_DEVICE, "same device");
    ct_scope_end();
}

/* ------------------------------------------------------------------ nonzero, masked_select, one_hot */

static void test_select(void **state) {
    (void)state;
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = dtypes[d];
        ct_scope_begin();
        /* special values: -0 is zero, NaN is not */
        ct_tensor *a = ct_test_special(CT_SHAPE(6, 7, 8), dt, -2, 2, 62), *ga = g(a);
        CT_AGREE("nonzero", ct_nonzero(a), ct_nonzero(ga), 0);
        CT_AGREE("nonzero transposed", ct_nonzero(ct_transpose(a, 0, 2)), ct_nonzero(ct_transpose(ga, 0, 2)), 0);
        ct_tensor *s0 = ct_test_special(NULL, 0, dt, -2, 2, 63), *z = ct_zeros(CT_SHAPE(3, 4), dt, CT_CPU);
        CT_AGREE("nonzero 0-d", ct_nonzero(s0), ct_nonzero(g(s0)), 0);
        CT_AGREE("nonzero all zero", ct_nonzero(z), ct_nonzero(g(z)), 0);
        CT_AGREE("nonzero empty", ct_nonzero(ct_zeros(CT_SHAPE(0, 4), dt, CT_CPU)),
                 ct_nonzero(g(ct_zeros(CT_SHAPE(0, 4), dt, CT_CPU))), 0);
        ct_tensor *m = ct_gt_scalar(ct_test_values(CT_SHAPE(6, 1, 8), CT_F32, -1, 1, 64), ct_scalar_int(0));
        CT_AGREE("masked_select broadcast mask", ct_masked_select(a, m), ct_masked_select(ga, g(m)), 0);
        ct_tensor *m2 = ct_gt_scalar(ct_test_values(CT_SHAPE(3, 6, 7, 8), CT_F32, -1, 1, 65), ct_scalar_int(0));
        CT_AGREE("masked_select broadcast self", ct_masked_select(a, m2), ct_masked_select(ga, g(m2)), 0);
        ct_tensor *mu = ct_to_dtype(m, CT_U8);
        CT_AGREE("masked_select uint8 mask transposed", ct_masked_select(ct_transpose(a, 0, 2), ct_transpose(mu, 0, 2)),
                 ct_masked_select(ct_transpose(ga, 0, 2), ct_transpose(g(mu), 0, 2)), 0);
        CT_AGREE("masked_select none", ct_masked_select(a, ct_zeros(CT_SHAPE(8), CT_BOOL, CT_CPU)),
                 ct_masked_select(ga, g(ct_zeros(CT_SHAPE(8), CT_BOOL, CT_CPU))), 0);
        ct_scope_end();
    }
    ct_scope_begin();
    /* more elements than one block's share: the prefix sum spans many blocks */
    ct_tensor *big = ct_gt_scalar(ct_test_values(CT_SHAPE(1000, 1100), CT_F32, -1, 1, 66), ct_scalar_float(0.3));
    ct_tensor *gbig = g(big);
    CT_AGREE("nonzero 1.1M", ct_nonzero(big), ct_nonzero(gbig), 0);
    ct_tensor *vals = ct_test_values(CT_SHAPE(1000, 1100), CT_F32, -1, 1, 67);
    CT_AGREE("masked_select 1.1M", ct_masked_select(vals, big), ct_masked_select(g(vals), gbig), 0);
    ct_tensor *a = g(ct_ones(CT_SHAPE(4, 5), CT_F32, CT_CPU));
    CT_ASSERT_ERR(ct_masked_select(a, g(ct_ones(CT_SHAPE(4, 5), CT_F32, CT_CPU))) != NULL, CT_ERROR_TYPE,
                  "expected BoolTensor for mask");
    CT_ASSERT_ERR(ct_masked_select(a, g(ct_ones(CT_SHAPE(3), CT_BOOL, CT_CPU))) != NULL, CT_ERROR_VALUE,
                  "must match the size");
    CT_ASSERT_ERR(ct_masked_select(a, ct_ones(CT_SHAPE(4, 5), CT_BOOL, CT_CPU)) != NULL, CT_ERROR_DEVICE,
                  "same device");
    ct_scope_end();
}

static void test_one_hot(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *i = ct_test_values(CT_SHAPE(4, 9), CT_I64, 0, 6.99, 68);
    CT_AGREE("one_hot inferred", ct_one_hot(i, -1), ct_one_hot(g(i), -1), 0);
    CT_AGREE("one_hot 10", ct_one_hot(i, 10), ct_one_hot(g(i), 10), 0);
    CT_AGREE("one_hot transposed", ct_one_hot(ct_t(i), 7), ct_one_hot(g(ct_t(i)), 7), 0);
    ct_tensor *e = ct_zeros(CT_SHAPE(0, 3), CT_I64, CT_CPU);
    CT_AGREE("one_hot empty", ct_one_hot(e, 4), ct_one_hot(g(e), 4), 0);
    CT_AGREE("one_hot empty, no classes", ct_one_hot(e, 0), ct_one_hot(g(e), 0), 0);
    ct_tensor *s0 = ct_full(NULL, 0, ct_scalar_int(2), CT_I64, CT_CPU);
    CT_AGREE("one_hot 0-d", ct_one_hot(s0, -1), ct_one_hot(g(s0), -1), 0);
    int64_t neg[] = {1, -1, 9};
    ct_tensor *ni = ct_from_data(neg, CT_SHAPE(3), CT_I64);
    BOTH_ERR(ct_one_hot(ni, 20), ct_one_hot(g(ni), 20), CT_ERROR_VALUE, "Class values must be non-negative.");
    BOTH_ERR(ct_one_hot(i, 5), ct_one_hot(g(i), 5), CT_ERROR_VALUE, "Class values must be smaller than num_classes.");
    BOTH_ERR(ct_one_hot(e, -1), ct_one_hot(g(e), -1), CT_ERROR_VALUE, "Can not infer total number of classes");
    BOTH_ERR(ct_one_hot(i, -2), ct_one_hot(g(i), -2), CT_ERROR_VALUE, "num_classes should be positive or -1");
    BOTH_ERR(ct_one_hot(ct_to_dtype(i, CT_I32), 7), ct_one_hot(g(ct_to_dtype(i, CT_I32)), 7), CT_ERROR_TYPE,
             "only applicable to index tensor");
    ct_scope_end();
}

/* ------------------------------------------------------------------ take, masked_scatter, kthvalue, unique */

/* The ops composed of others on CUDA (src/api/indexing_generic.c). */
static void test_generic_ops(void **state) {
    (void)state;
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = dtypes[d];
        char what[96];
        ct_scope_begin();
        /* few distinct values: ties and duplicates; NaN, signed zeros and extremes */
        ct_tensor *a = ct_test_special(CT_SHAPE(6, 7, 8), dt, -3, 3, 70), *ga = g(a);
        ct_tensor *ti = indices(CT_SHAPE(5, 9), 336, CT_I64, 71);
        CT_AGREE("take", ct_take(a, ti), ct_take(ga, g(ti)), 0);
        CT_AGREE("take transposed", ct_take(ct_transpose(a, 0, 2), ct_t(ti)),
                 ct_take(ct_transpose(ga, 0, 2), g(ct_t(ti))), 0);
        ct_tensor *s0 = ct_test_special(NULL, 0, dt, -3, 3, 72), *i0 = ct_full(NULL, 0, ct_scalar_int(-1), CT_I64, CT_CPU);
        CT_AGREE("take 0-d", ct_take(s0, i0), ct_take(g(s0), g(i0)), 0);
        ct_tensor *ie = ct_zeros(CT_SHAPE(0, 2), CT_I64, CT_CPU);
        CT_AGREE("take empty index", ct_take(a, ie), ct_take(ga, g(ie)), 0);

        ct_tensor *m = ct_gt_scalar(ct_test_values(CT_SHAPE(7, 1), CT_F32, -1, 1, 73), ct_scalar_int(0));
        ct_tensor *mbig = ct_gt_scalar(ct_test_values(CT_SHAPE(2, 6, 7, 8), CT_F32, -1, 1, 74), ct_scalar_int(0));
        ct_tensor *src = ct_test_special(CT_SHAPE(700), dt, -3, 3, 75), *gsrc = g(src);
        CT_AGREE("masked_scatter", ct_masked_scatter(a, m, src), ct_masked_scatter(ga, g(m), gsrc), 0);
        CT_AGREE("masked_scatter broadcast self", ct_masked_scatter(a, mbig, src), ct_masked_scatter(ga, g(mbig), gsrc),
                 0);
        ct_tensor *mu = ct_to_dtype(m, CT_U8), *s2 = ct_t(ct_reshape(src, CT_SHAPE(35, 20)));
        CT_AGREE("masked_scatter uint8 mask, transposed", ct_masked_scatter(ct_transpose(a, 0, 2), ct_t(mu), s2),
                 ct_masked_scatter(ct_transpose(ga, 0, 2), g(ct_t(mu)), g(s2)), 0);
        ct_tensor *none = ct_zeros(CT_SHAPE(8), CT_BOOL, CT_CPU), *se = ct_zeros(CT_SHAPE(0), dt, CT_CPU);
        CT_AGREE("masked_scatter none", ct_masked_scatter(a, none, se), ct_masked_scatter(ga, g(none), g(se)), 0);
        ct_tensor *ca = ct_clone(a), *gca = g(a);
        CT_ASSERT_OK(ct_masked_scatter_(ct_slice(ca, 2, 0, 8, 2), m, src));
        CT_ASSERT_OK(ct_masked_scatter_(ct_slice(gca, 2, 0, 8, 2), g(m), gsrc));
        CT_AGREE("masked_scatter_ strided", ca, gca, 0);

        for (int dim = -1; dim < 3; dim++) {
            int64_t size = ct_tensor_shape(a)[dim < 0 ? 2 : dim];
            int64_t ks[3] = {1, (size + 1) / 2, size};
            for (int ki = 0; ki < 3; ki++) {
                snprintf(what, sizeof what, "kthvalue %s dim %d k %lld", ct_dtype_name(dt), dim, (long long)ks[ki]);
                ct_tensor *ci = NULL, *gi = NULL;
                CT_AGREE_ERR(what, ct_kthvalue(a, ks[ki], dim, ki == 1, &ci), ct_kthvalue(ga, ks[ki], dim, ki == 1, &gi));
                if (ci)
                    CT_AGREE(what, ci, gi, 0);
                CT_AGREE_ERR(what, ct_kthvalue(ct_transpose(a, 0, 2), ks[ki], dim, false, NULL),
                             ct_kthvalue(ct_transpose(ga, 0, 2), ks[ki], dim, false, NULL));
            }
        }
        CT_AGREE_ERR("kthvalue 0-d", ct_kthvalue(s0, 1, 0, true, NULL), ct_kthvalue(g(s0), 1, 0, true, NULL));

        const ct_tensor *uin[4] = {a, ct_transpose(a, 0, 2), s0, ct_zeros(CT_SHAPE(0, 3), dt, CT_CPU)};
        for (int u = 0; u < 4; u++)
            for (int consecutive = 0; consecutive < 2; consecutive++) {
                snprintf(what, sizeof what, "%s %s input %d", consecutive ? "unique_consecutive" : "unique",
                         ct_dtype_name(dt), u);
                ct_tensor *ci = NULL, *cc = NULL, *gi = NULL, *gc = NULL;
                ct_tensor *gu = g(uin[u]);
                ct_tensor *cv = consecutive ? ct_unique_consecutive(uin[u], &ci, &cc) : ct_unique(uin[u], true, &ci, &cc);
                ct_tensor *gv = consecutive ? ct_unique_consecutive(gu, &gi, &gc) : ct_unique(gu, true, &gi, &gc);
                CT_AGREE(what, cv, gv, 0);
                CT_AGREE(what, ci, gi, 0);
                CT_AGREE(what, cc, gc, 0);
            }
        ct_scope_end();
    }
    ct_scope_begin();
    /* a mask long enough for the parallel cumsum, and sorting many values */
    const int64_t rows = ct_test_size(1000, 100);
    ct_tensor *big = ct_gt_scalar(ct_test_values(CT_SHAPE(rows, 1100), CT_F32, -1, 1, 76), ct_scalar_float(0.3));
    ct_tensor *vals = ct_test_values(CT_SHAPE(rows, 1100), CT_F32, -1, 1, 77), *gvals = g(vals);
    CT_AGREE("masked_scatter long", ct_masked_scatter(vals, big, ct_neg(vals)), ct_masked_scatter(gvals, g(big), ct_neg(gvals)),
             0);
    ct_tensor *many = ct_test_values(CT_SHAPE(rows * 1100), CT_I32, -500, 500, 78), *ci = NULL, *cc = NULL, *gi = NULL,
              *gc = NULL;
    CT_AGREE("unique long", ct_unique(many, true, &ci, &cc), ct_unique(g(many), true, &gi, &gc), 0);
    CT_AGREE("unique long inverse", ci, gi, 0);
    CT_AGREE("unique long counts", cc, gc, 0);

    /* data-dependent errors, with the CPU's messages */
    ct_tensor *a = ct_test_values(CT_SHAPE(4, 5), CT_F32, -1, 1, 79), *ga = g(a);
    int64_t bad[] = {0, 3, -21, 25, 19, 40};
    ct_tensor *bi = ct_from_data(bad, CT_SHAPE(2, 3), CT_I64);
    BOTH_ERR(ct_take(a, bi), ct_take(ga, g(bi)), CT_ERROR_INDEX,
             "out of range: tried to access index -21 on a tensor of 20 elements.");
    BOTH_ERR(ct_take(a, ct_t(bi)), ct_take(ga, g(ct_t(bi))), CT_ERROR_INDEX,
             "out of range: tried to access index 25 on a tensor of 20 elements.");
    BOTH_ERR(ct_take(ct_zeros(CT_SHAPE(0), CT_F32, CT_CPU), bi), ct_take(g(ct_zeros(CT_SHAPE(0), CT_F32, CT_CPU)), g(bi)),
             CT_ERROR_INDEX, "tried to take from an empty tensor");
    BOTH_ERR(ct_take(a, ct_to_dtype(bi, CT_I32)), ct_take(ga, g(ct_to_dtype(bi, CT_I32))), CT_ERROR_TYPE,
             "Expected a long tensor for index");
    CT_ASSERT_ERR(ct_take(ga, bi) != NULL, CT_ERROR_DEVICE, "same device");
    ct_tensor *ones = ct_ones(CT_SHAPE(5), CT_BOOL, CT_CPU), *short_src = ct_ones(CT_SHAPE(19), CT_F32, CT_CPU);
    BOTH_ERR(ct_masked_scatter(a, ones, short_src), ct_masked_scatter(ga, g(ones), g(short_src)), CT_ERROR_VALUE,
             "Number of elements of source < number of ones in mask");
    ct_tensor *before = ct_to_device(ga, CT_CPU);
    CT_ASSERT_ERR(ct_masked_scatter_(ga, g(ones), g(short_src)) != NULL, CT_ERROR_VALUE,
                  "Number of elements of source < number of ones in mask");
    CT_AGREE("a failed masked_scatter_ leaves its target alone", before, ga, 0);
    ct_tensor *m3 = ct_ones(CT_SHAPE(3, 4, 5), CT_BOOL, CT_CPU), *src60 = ct_ones(CT_SHAPE(60), CT_F32, CT_CPU);
    BOTH_ERR(ct_masked_scatter_(ct_clone(a), m3, src60), ct_masked_scatter_(ct_clone(ga), g(m3), g(src60)),
             CT_ERROR_VALUE, "cannot be broadcast to self's shape");
    BOTH_ERR(ct_masked_scatter(a, ct_ones(CT_SHAPE(5), CT_F32, CT_CPU), src60),
             ct_masked_scatter(ga, g(ct_ones(CT_SHAPE(5), CT_F32, CT_CPU)), g(src60)), CT_ERROR_TYPE,
             "masked_scatter_ only supports boolean masks");
    BOTH_ERR(ct_kthvalue(a, 6, 1, false, NULL), ct_kthvalue(ga, 6, 1, false, NULL), CT_ERROR_INDEX,
             "kthvalue(): selected number k out of range for dimension 1");
    BOTH_ERR(ct_kthvalue(a, 0, -1, false, NULL), ct_kthvalue(ga, 0, -1, false, NULL), CT_ERROR_INDEX,
             "selected number k out of range");
    ct_tensor *ab = ct_gt_scalar(a, ct_scalar_int(0));
    BOTH_ERR(ct_kthvalue(ab, 1, 0, false, NULL), ct_kthvalue(g(ab), 1, 0, false, NULL), CT_ERROR_TYPE,
             "not implemented for 'Bool'");
    BOTH_ERR(ct_kthvalue(a, 1, 2, false, NULL), ct_kthvalue(ga, 1, 2, false, NULL), CT_ERROR_INDEX,
             "Dimension out of range");
    ct_scope_end();
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_indexing");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_select_gather),     cmocka_unit_test(test_accumulate),
        cmocka_unit_test(test_float_atomics),     cmocka_unit_test(test_embedding_and_nll),
        cmocka_unit_test(test_sort_topk),         cmocka_unit_test(test_errors),
        cmocka_unit_test(test_scatter),           cmocka_unit_test(test_scatter_edges),
        cmocka_unit_test(test_index_copy_fill),   cmocka_unit_test(test_index_put),
        cmocka_unit_test(test_select),            cmocka_unit_test(test_one_hot),
        cmocka_unit_test(test_generic_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
