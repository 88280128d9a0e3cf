/* The indexing, sort and loss kernels on the GPU (indexing.cu, sort.cu, nn.cu) against
 * the CPU: cat, index_select, gather, scatter_add (atomics over repeated indices), index_add,
 * masked_fill, embedding and its backward, sort / argsort / topk, nll_loss / cross_entropy and their
 * gradients; every element width, negative and int32 indices, non-contiguous inputs;
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

static void test_select_gather(void **state) {
    (void)state;
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = dtypes[d];
        ct_scope_begin();
        ct_tensor *a = ct_test_special(CT_SHAPE(6, 7, 8), dt, -50, 50, 1);
        ct_tensor *ga = g(a);
        for (int dim = 0; dim < 3; dim++) {
            int64_t size = ct_tensor_shape(a)[dim];
            ct_tensor *i64 = indices(CT_SHAPE(11), size, CT_I64, 2 + dim), *i32 = indices(CT_SHAPE(5), size, CT_I32, 5);
            CT_AGREE("index_select", ct_index_select(a, dim, i64), ct_index_select(ga, dim, g(i64)), 0);
            CT_AGREE("index_select int32", ct_index_select(a, dim, i32), ct_index_select(ga, dim, g(i32)), 0);
            CT_AGREE("index_select transposed", ct_index_select(ct_t(ct_select(a, 0, 1)), dim % 2, i32),
                     ct_index_select(ct_t(ct_select(ga, 0, 1)), dim % 2, g(i32)), 0);
            int64_t ishape[3] = {4, 5, 6};
            ishape[dim] = 9;
            ct_tensor *gi = indices(ishape, 3, size, CT_I64, 7 + dim);
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
            ct_tensor *idx = indices(ishape, 3, size, CT_I64, 13 + dim);
            ct_tensor *s = ct_test_values(ishape, 3, dt, 0, 3, 14 + dim);
            CT_AGREE_ERR("scatter_add", ct_scatter_add(a, dim, idx, s), ct_scatter_add(g(a), dim, g(idx), g(s)));
            ct_tensor *vi = indices(CT_SHAPE(12), size, CT_I32, 15 + dim);
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
 * ties kept in order (indices too). */
static void test_sort_topk(void **state) {
    (void)state;
    ct_dtype sdt[] = {CT_BOOL, CT_U8, CT_I8, CT_I16, CT_I32, CT_I64, CT_U16, CT_U32, CT_F16, CT_BF16, CT_F32, CT_F64};
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
    CT_ASSERT_ERR(ct_sort(g(ct_ones(CT_SHAPE(4), CT_U64, CT_CPU)), 0, false, &i) != NULL, CT_ERROR_TYPE, "uint64");
    ct_scope_end();
}

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = g(ct_test_values(CT_SHAPE(4, 5), CT_F32, -1, 1, 28));
    int64_t bad[] = {0, 2, 7, -9};
    ct_tensor *bi = g(ct_from_data(bad, CT_SHAPE(4), CT_I64));
    CT_ASSERT_ERR(ct_index_select(a, 0, bi) != NULL, CT_ERROR_INDEX, "index 7 is out of bounds for dimension with size 4");
    ct_tensor *before = ct_to_device(a, CT_CPU);
    int64_t gbad[] = {0, 1, 2, 3, 9};
    ct_tensor *gb = g(ct_from_data(gbad, CT_SHAPE(1, 5), CT_I64));
    CT_ASSERT_ERR(ct_scatter_add_(a, 0, gb, a) != NULL, CT_ERROR_INDEX, "index 9 is out of bounds");
    CT_AGREE("a failed scatter_add_ leaves its target alone", before, a, 0);
    CT_ASSERT_ERR(ct_gather(a, 1, ct_from_data(gbad, CT_SHAPE(1, 5), CT_I64)) != NULL, CT_ERROR_DEVICE, "same device");
    CT_ASSERT_ERR(ct_index_select(a, 0, g(ct_ones(CT_SHAPE(2), CT_F32, CT_CPU))) != NULL, CT_ERROR_TYPE,
                  "index must be int64");
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

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_indexing");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_select_gather),     cmocka_unit_test(test_accumulate),
        cmocka_unit_test(test_float_atomics),     cmocka_unit_test(test_embedding_and_nll),
        cmocka_unit_test(test_sort_topk),         cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
