/* Autocast (torch.autocast): the AUTOCAST key's policies on the CPU with bfloat16,
 * regions (nesting, disabling, threads), gradients through the casts, the weight-cast
 * cache, the policy table and the errors. */
#include <pthread.h>
#include <string.h>

#include "testutil.h"
#include "dispatch/call.h"

static ct_tensor *randn(int64_t r, int64_t c, ct_dtype dt) { return ct_randn(CT_SHAPE(r, c), dt, CT_CPU); }

static bool same(const ct_tensor *a, const ct_tensor *b) {
    bool eq = false;
    return ct_equal(a, b, &eq) == CT_OK && eq;
}

static ct_dtype dt(const ct_tensor *t) {
    CT_ASSERT_OK(t);
    return ct_tensor_dtype(t);
}

static void lower_precision_ops(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = randn(2, 3, CT_F32), *w = randn(4, 3, CT_F32), *b = ct_randn(CT_SHAPE(4), CT_F32, CT_CPU);
    ct_tensor *x3 = ct_randn(CT_SHAPE(2, 5, 3), CT_F32, CT_CPU);
    assert_int_equal(ct_autocast_begin(CT_DEVICE_CPU, CT_BF16), CT_OK);
    assert_true(ct_autocast_is_enabled(CT_DEVICE_CPU));
    assert_false(ct_autocast_is_enabled(CT_DEVICE_CUDA));
    assert_int_equal(ct_autocast_get_dtype(CT_DEVICE_CPU), CT_BF16);
    assert_int_equal(dt(ct_mm(x, ct_t(w))), CT_BF16);
    assert_int_equal(dt(ct_addmm(b, x, ct_t(w), ct_scalar_int(1), ct_scalar_int(1))), CT_BF16);
    assert_int_equal(dt(ct_bmm(x3, ct_randn(CT_SHAPE(2, 3, 4), CT_F32, CT_CPU))), CT_BF16);
    /* composites: 2-D linear is addmm; 3-D linear with a bias is matmul + add, which
     * would promote back to float32 without the cast on entry */
    assert_int_equal(dt(ct_linear(x, w, b)), CT_BF16);
    assert_int_equal(dt(ct_linear(x3, w, b)), CT_BF16);
    assert_int_equal(dt(ct_linear(x3, w, NULL)), CT_BF16);
    assert_int_equal(dt(ct_matmul(x3, ct_t(w))), CT_BF16);
    ct_tensor *q = ct_randn(CT_SHAPE(1, 2, 4, 8), CT_F32, CT_CPU);
    assert_int_equal(dt(ct_scaled_dot_product_attention(q, q, q, NULL, 0.0, true, NULL)), CT_BF16);
    assert_int_equal(dt(ct_baddbmm(ct_zeros(CT_SHAPE(2, 5, 4), CT_F32, CT_CPU), x3,
                                   ct_randn(CT_SHAPE(2, 3, 4), CT_F32, CT_CPU), ct_scalar_int(1), ct_scalar_int(1))),
                     CT_BF16);
    ct_tensor *img = ct_randn(CT_SHAPE(1, 2, 5, 5), CT_F32, CT_CPU), *k = ct_randn(CT_SHAPE(3, 2, 3, 3), CT_F32, CT_CPU);
    assert_int_equal(dt(ct_conv2d(img, k, NULL, CT_INDEX(1, 1), CT_INDEX(0, 0), CT_INDEX(1, 1), 1)), CT_BF16);
    /* float16 inputs go to the region's bfloat16; float64 is never cast */
    assert_int_equal(dt(ct_mm(ct_to_dtype(x, CT_F16), ct_t(w))), CT_BF16);
    assert_int_equal(dt(ct_mm(ct_to_dtype(x, CT_F64), ct_to_dtype(ct_t(w), CT_F64))), CT_F64);
    /* the values are those of the product of the bfloat16 casts */
    ct_tensor *got = ct_mm(x, ct_t(w));
    assert_int_equal(ct_autocast_end(), CT_OK);
    ct_tensor *want = ct_mm(ct_to_dtype(x, CT_BF16), ct_to_dtype(ct_t(w), CT_BF16));
    assert_true(same(got, want));
    /* outside the region: as called */
    assert_false(ct_autocast_is_enabled(CT_DEVICE_CPU));
    assert_int_equal(dt(ct_mm(x, ct_t(w))), CT_F32);
    assert_int_equal(dt(ct_linear(x3, w, b)), CT_F32);
    ct_scope_end();
}

static void fp32_ops(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = randn(3, 4, CT_F32);
    ct_tensor *xb = ct_to_dtype(x, CT_BF16);
    assert_int_equal(ct_autocast_begin(CT_DEVICE_CPU, CT_BF16), CT_OK);
    ct_tensor *y = ct_mm(x, ct_t(x)); /* bfloat16 */
    assert_int_equal(dt(y), CT_BF16);
    assert_int_equal(dt(ct_softmax(y, -1, CT_DTYPE_UNDEFINED)), CT_F32);
    assert_int_equal(dt(ct_log_softmax(y, -1, CT_DTYPE_UNDEFINED)), CT_F32);
    assert_int_equal(dt(ct_sum(y, NULL, 0, false, CT_DTYPE_UNDEFINED)), CT_F32);
    assert_int_equal(dt(ct_exp(xb)), CT_F32);
    assert_int_equal(dt(ct_log(xb)), CT_F32);
    assert_int_equal(dt(ct_cumsum(xb, 0, CT_DTYPE_UNDEFINED)), CT_F32);
    assert_int_equal(dt(ct_pow_scalar(xb, ct_scalar_float(2.0))), CT_F32);
    /* layer_norm and rms_norm run in float32; rms_norm's eps=None is then float32's
     * epsilon, as for a float32 input */
    ct_tensor *ln = ct_layer_norm(y, CT_INDEX(3), 1, NULL, NULL, 1e-5);
    assert_int_equal(dt(ln), CT_F32);
    ct_tensor *rn = ct_rms_norm(y, CT_INDEX(3), 1, NULL, -1);
    assert_int_equal(dt(rn), CT_F32);
    ct_tensor *rn_want = ct_rms_norm(ct_to_dtype(y, CT_F32), CT_INDEX(3), 1, NULL, -1);
    /* cross entropy is log_softmax then nll_loss: float32 */
    ct_tensor *target = ct_zeros(CT_SHAPE(3), CT_I64, CT_CPU);
    assert_int_equal(dt(ct_cross_entropy(y, target, NULL, CT_REDUCTION_MEAN, -100, 0.0)), CT_F32);
    /* an explicit dtype= is not eligible: the op runs as called */
    assert_int_equal(dt(ct_sum(y, NULL, 0, false, CT_BF16)), CT_BF16);
    assert_int_equal(dt(ct_softmax(y, -1, CT_BF16)), CT_BF16);
    /* float32 and float64 inputs stay as they are */
    assert_int_equal(dt(ct_exp(x)), CT_F32);
    assert_int_equal(dt(ct_exp(ct_to_dtype(x, CT_F64))), CT_F64);
    /* the values are those of the op on the float32 cast */
    ct_tensor *got = ct_softmax(xb, 1, CT_DTYPE_UNDEFINED);
    assert_int_equal(ct_autocast_end(), CT_OK);
    assert_true(same(got, ct_softmax(ct_to_dtype(xb, CT_F32), 1, CT_DTYPE_UNDEFINED)));
    assert_true(same(rn, rn_want));
    assert_int_equal(dt(ct_softmax(xb, -1, CT_DTYPE_UNDEFINED)), CT_BF16);
    ct_scope_end();
}

static void promote_ops(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *f = randn(2, 3, CT_F32), *b = ct_to_dtype(randn(2, 3, CT_F32), CT_BF16);
    ct_tensor *h = ct_to_dtype(randn(2, 3, CT_F32), CT_F16);
    assert_int_equal(ct_autocast_begin(CT_DEVICE_CPU, CT_BF16), CT_OK);
    const ct_tensor *fb[] = {b, f}, *bb[] = {b, b}, *bh[] = {b, h};
    assert_int_equal(dt(ct_cat(fb, 2, 0)), CT_F32);
    assert_int_equal(dt(ct_cat(bb, 2, 0)), CT_BF16);
    assert_int_equal(dt(ct_cat(bh, 2, 0)), CT_F32); /* float16 with bfloat16 */
    assert_int_equal(dt(ct_stack(fb, 2, 0)), CT_F32);
    assert_int_equal(dt(ct_addcmul(b, b, b, ct_scalar_float(0.5))), CT_BF16);
    assert_int_equal(dt(ct_addcmul(b, f, b, ct_scalar_float(0.5))), CT_F32);
    ct_tensor *v = ct_randn(CT_SHAPE(3), CT_F32, CT_CPU);
    assert_int_equal(dt(ct_dot(v, v)), CT_F32);
    ct_tensor *vb = ct_to_dtype(v, CT_BF16);
    assert_int_equal(dt(ct_dot(vb, vb)), CT_BF16);
    /* a mixed dot runs in float32 (without autocast it would be a dtype error) */
    assert_int_equal(dt(ct_dot(vb, v)), CT_F32);
    assert_int_equal(ct_autocast_end(), CT_OK);
    ct_clear_error();
    assert_null(ct_dot(vb, v));
    ct_clear_error();
    ct_scope_end();
}

static void unlisted_ops_unchanged(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *f = randn(2, 3, CT_F32), *b = ct_to_dtype(randn(2, 3, CT_F32), CT_BF16);
    assert_int_equal(ct_autocast_begin(CT_DEVICE_CPU, CT_BF16), CT_OK);
    assert_int_equal(dt(ct_add(f, f)), CT_F32);
    assert_int_equal(dt(ct_relu(f)), CT_F32);
    assert_int_equal(dt(ct_relu(b)), CT_BF16);
    assert_int_equal(dt(ct_mul(b, f)), CT_F32); /* mul's own promotion */
    assert_int_equal(dt(ct_amax(b, NULL, 0, false)), CT_BF16);
    assert_int_equal(ct_autocast_op_policy(CT_OP_add), CT_AUTOCAST_NONE);
    /* integer inputs of a listed op are left alone */
    ct_tensor *i = ct_ones(CT_SHAPE(2, 2), CT_I64, CT_CPU);
    assert_int_equal(dt(ct_sum(i, NULL, 0, false, CT_DTYPE_UNDEFINED)), CT_I64);
    /* in-place calls are not autocast */
    ct_tensor *c = ct_zeros(CT_SHAPE(2, 2), CT_F32, CT_CPU);
    assert_non_null(ct_exp_(c));
    assert_int_equal(dt(c), CT_F32);
    /* nor are calls on META tensors */
    ct_tensor *m = ct_empty(CT_SHAPE(2, 2), CT_F32, CT_META);
    assert_int_equal(dt(ct_mm(m, m)), CT_F32);
    assert_int_equal(ct_autocast_end(), CT_OK);
    ct_scope_end();
}

static void nesting_and_disable(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = randn(2, 2, CT_F32);
    assert_int_equal(ct_autocast_nesting(), 0);
    assert_int_equal(ct_autocast_get_dtype(CT_DEVICE_CPU), CT_BF16); /* the defaults */
    assert_int_equal(ct_autocast_get_dtype(CT_DEVICE_CUDA), CT_F16);
    assert_int_equal(ct_autocast_begin(CT_DEVICE_CPU, CT_DTYPE_UNDEFINED), CT_OK);
    assert_int_equal(dt(ct_mm(x, x)), CT_BF16);
    /* enabled=false: a float32 island */
    assert_int_equal(ct_autocast_begin_ex(CT_DEVICE_CPU, CT_DTYPE_UNDEFINED, false, true), CT_OK);
    assert_false(ct_autocast_is_enabled(CT_DEVICE_CPU));
    assert_int_equal(dt(ct_mm(x, x)), CT_F32);
    assert_false(ct_keyset_has(ct_tls_included(), CT_KEY_AUTOCAST));
    /* a region inside the island with another dtype */
    assert_int_equal(ct_autocast_begin(CT_DEVICE_CPU, CT_F16), CT_OK);
    assert_int_equal(ct_autocast_nesting(), 3);
    assert_int_equal(ct_autocast_get_dtype(CT_DEVICE_CPU), CT_F16);
    assert_int_equal(dt(ct_mm(x, x)), CT_F16);
    assert_int_equal(ct_autocast_end(), CT_OK);
    assert_int_equal(dt(ct_mm(x, x)), CT_F32);
    assert_int_equal(ct_autocast_end(), CT_OK);
    assert_true(ct_autocast_is_enabled(CT_DEVICE_CPU));
    assert_int_equal(ct_autocast_get_dtype(CT_DEVICE_CPU), CT_BF16);
    assert_int_equal(dt(ct_mm(x, x)), CT_BF16);
    /* a CUDA region leaves the CPU's state alone */
    assert_int_equal(ct_autocast_begin(CT_DEVICE_CUDA, CT_BF16), CT_OK);
    assert_true(ct_autocast_is_enabled(CT_DEVICE_CUDA));
    assert_int_equal(ct_autocast_get_dtype(CT_DEVICE_CPU), CT_BF16);
    assert_int_equal(ct_autocast_get_dtype(CT_DEVICE_CUDA), CT_BF16);
    assert_int_equal(ct_autocast_end(), CT_OK);
    assert_false(ct_autocast_is_enabled(CT_DEVICE_CUDA));
    assert_int_equal(ct_autocast_end(), CT_OK);
    assert_int_equal(ct_autocast_nesting(), 0);
    assert_false(ct_keyset_has(ct_tls_included(), CT_KEY_AUTOCAST));
    assert_int_equal(dt(ct_mm(x, x)), CT_F32);
    /* a CUDA-only region does not cast CPU calls */
    assert_int_equal(ct_autocast_begin(CT_DEVICE_CUDA, CT_F16), CT_OK);
    assert_int_equal(dt(ct_mm(x, x)), CT_F32);
    assert_int_equal(dt(ct_linear(x, x, NULL)), CT_F32);
    assert_int_equal(ct_autocast_end(), CT_OK);
    ct_scope_end();
}

static void *other_thread(void *arg) {
    const ct_tensor *x = arg;
    intptr_t ok = !ct_autocast_is_enabled(CT_DEVICE_CPU) && ct_autocast_nesting() == 0;
    ct_scope_begin();
    ct_tensor *y = ct_mm(x, x);
    ok = ok && y && ct_tensor_dtype(y) == CT_F32;
    /* a region of its own does not reach the first thread */
    ok = ok && ct_autocast_begin(CT_DEVICE_CPU, CT_F16) == CT_OK;
    y = ct_mm(x, x);
    ok = ok && y && ct_tensor_dtype(y) == CT_F16;
    ok = ok && ct_autocast_end() == CT_OK;
    ct_scope_end();
    return (void *)ok;
}

static void thread_local_state(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = randn(2, 2, CT_F32);
    assert_int_equal(ct_autocast_begin(CT_DEVICE_CPU, CT_BF16), CT_OK);
    pthread_t th;
    void *ret = NULL;
    assert_int_equal(pthread_create(&th, NULL, other_thread, x), 0);
    assert_int_equal(pthread_join(th, &ret), 0);
    assert_true((intptr_t)ret);
    assert_int_equal(dt(ct_mm(x, x)), CT_BF16);
    assert_int_equal(ct_autocast_get_dtype(CT_DEVICE_CPU), CT_BF16);
    assert_int_equal(ct_autocast_end(), CT_OK);
    ct_scope_end();
}

/* A linear layer under autocast: float32 gradients on the float32 parameters, equal
 * to those of the same computation written with explicit casts. */
static void linear_gradients(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(2, 5, 3), CT_F32, CT_CPU);
    ct_tensor *w = ct_tensor_set_requires_grad(randn(4, 3, CT_F32), true);
    ct_tensor *b = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(4), CT_F32, CT_CPU), true);
    ct_tensor *w2 = ct_tensor_set_requires_grad(ct_detach(ct_clone(w)), true);
    ct_tensor *b2 = ct_tensor_set_requires_grad(ct_detach(ct_clone(b)), true);
    ct_tensor *t = randn(4, 1, CT_F32);

    assert_int_equal(ct_autocast_begin(CT_DEVICE_CPU, CT_BF16), CT_OK);
    ct_tensor *y = ct_linear(x, w, b);
    assert_int_equal(dt(y), CT_BF16);
    ct_tensor *loss = ct_sum(ct_matmul(ct_exp(y), t), NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_int_equal(dt(loss), CT_F32);
    assert_int_equal(ct_autocast_end(), CT_OK);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);

    /* by hand: the casts autocast makes, in the same order */
    ct_tensor *y2 = ct_linear(ct_to_dtype(x, CT_BF16), ct_to_dtype(w2, CT_BF16), ct_to_dtype(b2, CT_BF16));
    ct_tensor *e2 = ct_exp(ct_to_dtype(y2, CT_F32));
    ct_tensor *m2 = ct_matmul(ct_to_dtype(e2, CT_BF16), ct_to_dtype(t, CT_BF16));
    ct_tensor *loss2 = ct_sum(ct_to_dtype(m2, CT_F32), NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_int_equal(ct_backward(loss2, NULL, false, false), CT_OK);

    ct_tensor *gw = ct_tensor_grad(w), *gb = ct_tensor_grad(b);
    CT_ASSERT_OK(gw);
    CT_ASSERT_OK(gb);
    assert_int_equal(dt(gw), CT_F32);
    assert_int_equal(dt(gb), CT_F32);
    assert_true(same(loss, loss2));
    assert_true(same(gw, ct_tensor_grad(w2)));
    assert_true(same(gb, ct_tensor_grad(b2)));
    ct_scope_end();
}

/* Counts the to_dtype calls that reach the CPU kernel. */
static int casts;
static ct_status count_cast(ct_keyset ks, ct_call *call, void *user_data) {
    (void)user_data;
    casts++;
    return ct_call_next(ks, call);
}

static void weight_cast_cache(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = randn(2, 3, CT_F32);
    ct_tensor *w = ct_tensor_set_requires_grad(randn(4, 3, CT_F32), true);
    int64_t h = ct_op_override(CT_OP_to_dtype, CT_KEY_CPU, count_cast, NULL, 0);
    assert_true(h > 0);

    casts = 0;
    assert_int_equal(ct_autocast_begin(CT_DEVICE_CPU, CT_BF16), CT_OK);
    ct_tensor *y1 = ct_linear(x, w, NULL);
    ct_tensor *y2 = ct_linear(x, w, NULL);
    assert_int_equal(casts, 3); /* x twice (it does not require grad), w once */
    assert_int_equal(ct_autocast_cache_size(), 1);
    /* an inner region shares the outer one's cache */
    assert_int_equal(ct_autocast_begin(CT_DEVICE_CPU, CT_BF16), CT_OK);
    ct_tensor *y3 = ct_mm(x, ct_t(w)); /* ct_t(w) is a view: not cached */
    assert_int_equal(ct_autocast_end(), CT_OK);
    assert_int_equal(casts, 5);
    assert_int_equal(ct_autocast_cache_size(), 1);
    ct_tensor *loss = ct_sum(ct_add(ct_add(y1, y2), y3), NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_int_equal(ct_autocast_end(), CT_OK);
    assert_int_equal(ct_autocast_cache_size(), 0);
    /* the gradient through the shared cast is the sum of the three uses (each a
     * bfloat16 product, so to bfloat16's precision) */
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    ct_tensor *gw = ct_tensor_grad(w);
    CT_ASSERT_OK(gw);
    assert_int_equal(dt(gw), CT_F32);
    ct_tensor *colsum = ct_sum(ct_to_dtype(ct_to_dtype(x, CT_BF16), CT_F32), CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED);
    ct_tensor *want = ct_mul_scalar(ct_expand(ct_unsqueeze(colsum, 0), CT_SHAPE(4, 3)), ct_scalar_int(3));
    bool close = false;
    assert_int_equal(ct_allclose(gw, want, 2e-2, 2e-2, false, &close), CT_OK);
    assert_true(close);

    /* a new region casts again; cache_enabled false casts every time */
    casts = 0;
    assert_int_equal(ct_autocast_begin_ex(CT_DEVICE_CPU, CT_BF16, true, false), CT_OK);
    CT_ASSERT_OK(ct_linear(x, w, NULL));
    CT_ASSERT_OK(ct_linear(x, w, NULL));
    assert_int_equal(ct_autocast_cache_size(), 0);
    assert_int_equal(ct_autocast_end(), CT_OK);
    assert_int_equal(casts, 4);
    /* under no_grad nothing is kept either */
    casts = 0;
    bool prev = ct_set_grad_enabled(false);
    assert_int_equal(ct_autocast_begin(CT_DEVICE_CPU, CT_BF16), CT_OK);
    CT_ASSERT_OK(ct_linear(x, w, NULL));
    assert_int_equal(ct_autocast_cache_size(), 0);
    assert_int_equal(ct_autocast_end(), CT_OK);
    ct_set_grad_enabled(prev);
    assert_int_equal(casts, 2);
    assert_int_equal(ct_op_override_remove(h), CT_OK);
    ct_scope_end();
}

/* Every row of the table names a real op with that policy; a non-composite op has
 * the kernel at AUTOCAST, and ops outside the table have none. */
static void policy_table(void **state) {
    (void)state;
    int rows = 0;
#define CT_AUTOCAST(name, policy)                                                         \
    do {                                                                                  \
        ct_op op = ct_op_find(#name);                                                     \
        if (op < 0)                                                                       \
            fail_msg("autocast.def names %s, which is not an op", #name);                 \
        assert_int_equal(ct_autocast_op_policy(op), CT_AUTOCAST_##policy);                \
        rows++;                                                                           \
    } while (0);
#include "amp/autocast.def"
#undef CT_AUTOCAST
    assert_true(rows > 40);
    int listed = 0, kernels = 0;
    for (ct_op op = 0; op < CT_OP_COUNT; op++) {
        bool has = ct_op_has_kernel(op, CT_KEY_AUTOCAST);
        if (ct_autocast_op_policy(op) == CT_AUTOCAST_NONE)
            assert_false(has);
        else
            listed++;
        kernels += has;
    }
    assert_int_equal(listed, rows); /* no op listed twice */
    assert_true(ct_op_has_kernel(CT_OP_mm, CT_KEY_AUTOCAST));
    assert_false(ct_op_has_kernel(CT_OP_linear, CT_KEY_AUTOCAST)); /* a composite */
    assert_true(kernels > 30 && kernels < rows);
    assert_string_equal(ct_autocast_policy_name(ct_autocast_op_policy(CT_OP_mm)), "lower_precision_fp");
    assert_string_equal(ct_autocast_policy_name(ct_autocast_op_policy(CT_OP_softmax)), "fp32");
    assert_string_equal(ct_autocast_policy_name(ct_autocast_op_policy(CT_OP_cat)), "promote");
    assert_string_equal(ct_autocast_policy_name(ct_autocast_op_policy(CT_OP_cross_entropy_fused)), "fp32_out");
    assert_string_equal(ct_autocast_policy_name(CT_AUTOCAST_NONE), "none");
    assert_int_equal(ct_autocast_op_policy(-1), CT_AUTOCAST_NONE);
    assert_int_equal(ct_autocast_op_policy(CT_OP_COUNT), CT_AUTOCAST_NONE);
}

static void errors(void **state) {
    (void)state;
    CT_ASSERT_ERR(ct_autocast_begin(CT_DEVICE_CPU, CT_I32) == CT_OK, CT_ERROR_VALUE, "int32");
    CT_ASSERT_ERR(ct_autocast_begin(CT_DEVICE_CUDA, CT_F32) == CT_OK, CT_ERROR_VALUE, "float32");
    CT_ASSERT_ERR(ct_autocast_begin_ex(CT_DEVICE_CPU, CT_F64, false, true) == CT_OK, CT_ERROR_VALUE, "float64");
    CT_ASSERT_ERR(ct_autocast_begin(CT_DEVICE_META, CT_BF16) == CT_OK, CT_ERROR_VALUE, "meta");
    CT_ASSERT_ERR(ct_autocast_begin((ct_device_type)42, CT_BF16) == CT_OK, CT_ERROR_VALUE, "device_type");
    assert_int_equal(ct_autocast_nesting(), 0);
    assert_false(ct_autocast_is_enabled(CT_DEVICE_CPU));
    CT_ASSERT_ERR(ct_autocast_end() == CT_OK, CT_ERROR_RUNTIME, "no autocast region");
    CT_ASSERT_ERR(ct_autocast_get_dtype(CT_DEVICE_META) != CT_DTYPE_UNDEFINED, CT_ERROR_VALUE, "meta");
    assert_false(ct_autocast_is_enabled(CT_DEVICE_META));
    assert_false(ct_autocast_is_enabled((ct_device_type)-3));
    /* a failed begin inside a region leaves that region as it was */
    assert_int_equal(ct_autocast_begin(CT_DEVICE_CPU, CT_BF16), CT_OK);
    CT_ASSERT_ERR(ct_autocast_begin(CT_DEVICE_CPU, CT_U8) == CT_OK, CT_ERROR_VALUE, "uint8");
    assert_int_equal(ct_autocast_nesting(), 1);
    assert_int_equal(ct_autocast_get_dtype(CT_DEVICE_CPU), CT_BF16);
    /* an op error inside a region is the op's */
    ct_scope_begin();
    CT_ASSERT_ERR(ct_mm(randn(2, 3, CT_F32), randn(2, 3, CT_F32)) != NULL, CT_ERROR_VALUE, "mm");
    CT_ASSERT_ERR(ct_mm(NULL, randn(2, 3, CT_F32)) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    ct_scope_end();
    assert_int_equal(ct_autocast_end(), CT_OK);
    ct_clear_error();
}

/* cross_entropy under autocast reads bfloat16/float16 logits as they are and returns a
 * float32 loss (policy FP32_OUT, Note [cross_entropy's loss dtype]): the loss and the
 * logits' gradient are the same bits as PyTorch's route (cast the logits to float32,
 * cross_entropy, the cast's backward), for every reduction, with ignored rows. */
static void xent_on(ct_device dev, ct_dtype low) {
    ct_scope_begin();
    ct_device_type dt_dev = (ct_device_type)dev.type;
    int64_t tv[7] = {3, 0, -100, 9, 9, 1, 4};
    ct_tensor *target = ct_to_device(ct_from_data(tv, CT_SHAPE(7), CT_I64), dev);
    for (int r = 0; r < 3; r++) {
        ct_reduction red = r == 0 ? CT_REDUCTION_MEAN : r == 1 ? CT_REDUCTION_SUM : CT_REDUCTION_NONE;
        ct_tensor *x0 = ct_to_device(ct_to_dtype(ct_mul_scalar(randn(7, 10, CT_F32), ct_scalar_float(4)), low), dev);
        ct_tensor *xa = ct_tensor_set_requires_grad(ct_clone(x0), true);
        ct_tensor *xb = ct_tensor_set_requires_grad(ct_clone(x0), true);
        assert_int_equal(ct_autocast_begin(dt_dev, low), CT_OK);
        ct_tensor *la = ct_cross_entropy(xa, target, NULL, red, -100, 0.0);
        assert_int_equal(ct_autocast_end(), CT_OK);
        assert_int_equal(dt(la), CT_F32);
        ct_tensor *lb = ct_cross_entropy(ct_to_dtype(xb, CT_F32), target, NULL, red, -100, 0.0);
        assert_true(same(la, lb));
        ct_tensor *go = ct_ones_like(la, CT_DTYPE_UNDEFINED);
        assert_int_equal(ct_backward(la, go, false, false), CT_OK);
        assert_int_equal(ct_backward(lb, go, false, false), CT_OK);
        assert_int_equal(dt(ct_tensor_grad(xa)), low);
        assert_true(same(ct_tensor_grad(xa), ct_tensor_grad(xb)));
    }
    /* the op's dtype= takes the logits' dtype or their work dtype, nothing else */
    ct_tensor *x16 = ct_to_device(ct_to_dtype(randn(7, 10, CT_F32), low), dev);
    ct_call c = {.op = CT_OP_cross_entropy_fused, .nin = 2, .in = {x16, target}, .nints = 2, .dtype = CT_F64};
    c.ints[0] = CT_REDUCTION_MEAN;
    c.ints[1] = -100;
    CT_ASSERT_ERR(ct_dispatch_1(&c) != NULL, CT_ERROR_TYPE, "dtype must be");
    c.dtype = CT_F32;
    ct_tensor *l32 = ct_dispatch_1(&c);
    assert_int_equal(dt(l32), CT_F32);
    ct_scope_end();
}

static void cross_entropy_reads_low_precision(void **state) {
    (void)state;
    xent_on(CT_CPU, CT_BF16);
    xent_on(CT_CPU, CT_F16);
    if (ct_cuda_is_available()) {
        xent_on(CT_CUDA(0), CT_BF16);
        xent_on(CT_CUDA(0), CT_F16);
    }
}

/* On a GPU (skipped without one): float16 autocast through the same kernels, the
 * CPU's calls untouched by a CUDA region, and float32 gradients on CUDA weights. */
static void cuda_float16(void **state) {
    (void)state;
    if (!ct_cuda_is_available()) {
        skip();
        return;
    }
    ct_scope_begin();
    ct_device g = CT_CUDA(0);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 5, 3), CT_F32, g);
    ct_tensor *w = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(4, 3), CT_F32, g), true);
    ct_tensor *b = ct_tensor_set_requires_grad(ct_randn(CT_SHAPE(4), CT_F32, g), true);
    ct_tensor *xc = randn(2, 3, CT_F32);
    assert_int_equal(ct_autocast_begin(CT_DEVICE_CUDA, CT_DTYPE_UNDEFINED), CT_OK);
    assert_int_equal(ct_autocast_get_dtype(CT_DEVICE_CUDA), CT_F16);
    ct_tensor *y = ct_linear(x, w, b);
    assert_int_equal(dt(y), CT_F16);
    assert_int_equal(dt(ct_mm(ct_select(x, 0, 0), ct_t(w))), CT_F16);
    assert_int_equal(dt(ct_mm(xc, ct_t(xc))), CT_F32); /* a CPU call in a CUDA region */
    ct_tensor *p = ct_softmax(y, -1, CT_DTYPE_UNDEFINED);
    assert_int_equal(dt(p), CT_F32);
    ct_tensor *loss = ct_sum(ct_mul(p, ct_to_dtype(y, CT_F32)), NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_int_equal(dt(loss), CT_F32);
    assert_int_equal(ct_autocast_end(), CT_OK);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    ct_tensor *gw = ct_tensor_grad(w);
    CT_ASSERT_OK(gw);
    assert_int_equal(dt(gw), CT_F32);
    assert_int_equal(ct_tensor_device(gw).type, CT_DEVICE_CUDA);
    /* the same with explicit casts, on the CPU copies: equal up to the GPU's sums */
    ct_tensor *w2 = ct_tensor_set_requires_grad(ct_to_device(ct_detach(w), CT_CPU), true);
    ct_tensor *b2 = ct_tensor_set_requires_grad(ct_to_device(ct_detach(b), CT_CPU), true);
    ct_tensor *y2 = ct_linear(ct_to_dtype(ct_to_device(x, CT_CPU), CT_F16), ct_to_dtype(w2, CT_F16),
                              ct_to_dtype(b2, CT_F16));
    ct_tensor *p2 = ct_softmax(ct_to_dtype(y2, CT_F32), -1, CT_DTYPE_UNDEFINED);
    ct_tensor *loss2 = ct_sum(ct_mul(p2, ct_to_dtype(y2, CT_F32)), NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_int_equal(ct_backward(loss2, NULL, false, false), CT_OK);
    bool close = false;
    assert_int_equal(ct_allclose(ct_to_device(gw, CT_CPU), ct_tensor_grad(w2), 1e-2, 1e-2, false, &close), CT_OK);
    assert_true(close);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lower_precision_ops), cmocka_unit_test(fp32_ops),
        cmocka_unit_test(promote_ops),         cmocka_unit_test(unlisted_ops_unchanged),
        cmocka_unit_test(nesting_and_disable), cmocka_unit_test(thread_local_state),
        cmocka_unit_test(linear_gradients),    cmocka_unit_test(weight_cast_cache),
        cmocka_unit_test(policy_table),        cmocka_unit_test(errors),
        cmocka_unit_test(cross_entropy_reads_low_precision), cmocka_unit_test(cuda_float16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
