/* ct_use_deterministic_algorithms on the GPU: the kernels that add with atomics in no
 * fixed order fail with an error naming them (PyTorch's names) while it is on, integer
 * forms (exact in any order) keep running, and the ops that stay available give
 * bit-identical results in two runs: embedding's backward (sorted), attention with a
 * gradient (routed off flash attention, whose dq adds with atomics), layer_norm and
 * cross_entropy backward, products, reductions, gather and index_select. Skipped (exit
 * code 77) without a GPU. */
#include <string.h>

#include "cuda_testutil.h"

#define CUDA0 CT_CUDA(0)

static int restore(void **state) {
    (void)state;
    ct_use_deterministic_algorithms(false);
    return 0;
}

static ct_tensor *gpu_values(const int64_t *shape, int nd, ct_dtype dt, uint64_t seed) {
    return ct_to_device(ct_test_values(shape, nd, dt, -1, 1, seed), CUDA0);
}

static void expect_refused(const ct_tensor *r, const char *name) {
    assert_null(r);
    const char *msg = ct_last_error();
    if (!strstr(msg, name) || !strstr(msg, "does not have a deterministic implementation"))
        fail_msg("expected %s to be refused, got: %s", name, msg);
}

static void test_refused(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *base = gpu_values(CT_SHAPE(8, 16), CT_F32, 1), *src = gpu_values(CT_SHAPE(12, 16), CT_F32, 2);
    int64_t ids[12] = {0, 3, 3, 3, 7, 1, 0, 0, 5, 5, 2, 3};
    ct_tensor *idx = ct_to_device(ct_from_data(ids, CT_SHAPE(12), CT_I64), CUDA0);
    ct_tensor *idx2 = ct_contiguous(ct_expand(ct_reshape(idx, CT_SHAPE(12, 1)), CT_SHAPE(12, 16)));
    /* off: they run */
    assert_non_null(ct_index_add(base, 0, idx, src, ct_scalar_float(1.0)));
    ct_use_deterministic_algorithms(true);
    expect_refused(ct_index_add(base, 0, idx, src, ct_scalar_float(1.0)), "index_add_cuda_");
    expect_refused(ct_scatter_add(base, 0, idx2, src), "scatter_add_cuda_kernel");
    expect_refused(ct_scatter_reduce(base, 0, idx2, src, "sum", true), "scatter_reduce_cuda_kernel");
    expect_refused(ct_scatter_reduce(base, 0, idx2, src, "mean", true), "scatter_reduce_cuda_kernel");
    const ct_tensor *ind[1] = {idx};
    expect_refused(ct_index_put(base, ind, 1, src, true), "index_put_ with accumulate=True");
    ct_tensor *x = ct_reshape(base, CT_SHAPE(1, 1, 8, 16)), *ix = NULL;
    ct_tensor *y = ct_max_pool2d(x, CT_INDEX(3, 3), CT_INDEX(1, 1), CT_INDEX(1, 1), CT_INDEX(1, 1), false, &ix);
    assert_non_null(y); /* the forward is deterministic */
    expect_refused(ct_max_pool2d_backward(ct_ones_like(y, CT_DTYPE_UNDEFINED), x, ix),
                   "max_pool2d_with_indices_backward_cuda");
    /* exact in any order: integers, amax/amin, index_put without accumulate */
    ct_tensor *ib = ct_to_dtype(ct_mul_scalar(base, ct_scalar_float(100)), CT_I64);
    ct_tensor *is = ct_to_dtype(ct_mul_scalar(src, ct_scalar_float(100)), CT_I64);
    assert_non_null(ct_index_add(ib, 0, idx, is, ct_scalar_int(1)));
    assert_non_null(ct_scatter_add(ib, 0, idx2, is));
    assert_non_null(ct_scatter_reduce(base, 0, idx2, src, "amax", true));
    assert_non_null(ct_index_put(base, ind, 1, src, false));
    ct_scope_end();
}

/* f(inputs) twice: the results must be the same bits. */
static void assert_bitwise_repeatable(ct_tensor *(*f)(void *), void *ctx, const char *what) {
    ct_scope_begin();
    ct_tensor *a = f(ctx), *b = f(ctx);
    if (!a || !b)
        fail_msg("%s failed in deterministic mode: %s", what, ct_last_error());
    bool eq = false;
    assert_int_equal(ct_equal(ct_to_device(a, CT_CPU), ct_to_device(b, CT_CPU), &eq), CT_OK);
    if (!eq)
        fail_msg("%s: two runs differ", what);
    ct_scope_end();
}

typedef struct {
    ct_tensor *w, *idx, *gy;
} emb_ctx;

static ct_tensor *embedding_grad(void *p) {
    emb_ctx *c = p;
    ct_tensor *w = ct_tensor_set_requires_grad(ct_detach(c->w), true);
    ct_tensor *y = ct_embedding(c->idx, w, CT_NO_PADDING_IDX);
    if (!y || ct_backward(y, c->gy, false, false))
        return NULL;
    return ct_tensor_grad(w);
}

typedef struct {
    ct_tensor *q, *k, *v;
} attn_ctx;

static ct_tensor *attention_dq(void *p) {
    attn_ctx *c = p;
    ct_tensor *q = ct_tensor_set_requires_grad(ct_detach(c->q), true);
    ct_tensor *y = ct_scaled_dot_product_attention(q, c->k, c->v, NULL, 0.0, true, NULL);
    if (!y || ct_backward(ct_sum(ct_to_dtype(y, CT_F32), NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false))
        return NULL;
    return ct_tensor_grad(q);
}

typedef struct {
    ct_tensor *x, *w, *b, *target;
} mix_ctx;

/* layer_norm, a product, cross_entropy and their backward, reductions, gather. */
static ct_tensor *mixed_grad(void *p) {
    mix_ctx *c = p;
    ct_tensor *x = ct_tensor_set_requires_grad(ct_detach(c->x), true);
    ct_tensor *h = ct_layer_norm(x, CT_INDEX(64), 1, c->w, c->b, 1e-5);
    ct_tensor *logits = ct_matmul(h, ct_transpose(c->x, 0, 1));
    ct_tensor *loss = ct_cross_entropy(logits, c->target, NULL, CT_REDUCTION_MEAN, -100, 0.0);
    if (!loss || ct_backward(loss, NULL, false, false))
        return NULL;
    ct_tensor *g = ct_tensor_grad(x);
    int64_t gi[2] = {1, 0};
    ct_tensor *gidx = ct_to_device(ct_from_data(gi, CT_SHAPE(2, 1), CT_I64), CUDA0);
    ct_tensor *colsum = ct_sum(g, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED);
    ct_tensor *rows = ct_gather(g, 0, ct_expand(gidx, CT_SHAPE(2, 64)));
    ct_tensor *parts[3] = {ct_reshape(g, CT_SHAPE(-1)), colsum, ct_reshape(rows, CT_SHAPE(-1))};
    return ct_cat((const ct_tensor *const *)parts, 3, 0);
}

static void test_repeatable(void **state) {
    (void)state;
    ct_scope_begin();
    ct_use_deterministic_algorithms(true);
    int64_t n = 4096;
    emb_ctx e = {gpu_values(CT_SHAPE(50, 32), CT_F32, 3), NULL, gpu_values(CT_SHAPE(4096, 32), CT_F32, 4)};
    ct_tensor *ids = ct_test_values(&n, 1, CT_I64, 0, 49.99, 5);
    e.idx = ct_to_device(ids, CUDA0);
    assert_bitwise_repeatable(embedding_grad, &e, "embedding backward");

    attn_ctx a = {gpu_values(CT_SHAPE(2, 4, 128, 64), CT_BF16, 6), gpu_values(CT_SHAPE(2, 4, 128, 64), CT_BF16, 7),
                  gpu_values(CT_SHAPE(2, 4, 128, 64), CT_BF16, 8)};
    assert_bitwise_repeatable(attention_dq, &a, "attention backward");

    int64_t nt = 256;
    mix_ctx m = {gpu_values(CT_SHAPE(256, 64), CT_F32, 9), gpu_values(CT_SHAPE(64), CT_F32, 10),
                 gpu_values(CT_SHAPE(64), CT_F32, 11), NULL};
    m.target = ct_to_device(ct_test_values(&nt, 1, CT_I64, 0, 255.99, 12), CUDA0);
    assert_bitwise_repeatable(mixed_grad, &m, "layer_norm/matmul/cross_entropy backward");
    ct_scope_end();
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_determinism");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_refused, restore),
        cmocka_unit_test_teardown(test_repeatable, restore),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
