/* ct_compile: the capture protocol, guards, what cannot be captured, the passes, a
 * training step captured whole (forward, backward and update), gradcheck through a
 * compiled function, and the generated code's cache. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static ct_tensor *randn(const int64_t *shape, int ndim, ct_dtype dt) {
    return ct_randn(shape, ndim, dt, CT_CPU);
}

static void assert_same(const ct_tensor *a, const ct_tensor *b) {
    CT_ASSERT_OK(a);
    CT_ASSERT_OK(b);
    assert_int_equal(ct_tensor_dtype(a), ct_tensor_dtype(b));
    assert_int_equal(ct_tensor_numel(a), ct_tensor_numel(b));
    for (int64_t i = 0; i < ct_tensor_numel(a); i++) {
        double x = ct_test_at(a, i), y = ct_test_at(b, i);
        if (!(x == y || (x != x && y != y)))
            fail_msg("element %lld: %.17g != %.17g", (long long)i, x, y);
    }
}

/* relu(x * y + x) - exp(y) / 3 */
static ct_tensor *pointwise(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *t = ct_relu(ct_add(ct_mul(in[0], in[1]), in[0]));
    return ct_sub(t, ct_div_scalar(ct_exp(in[1]), ct_scalar_float(3)));
}

static void test_protocol(void **state) {
    (void)state;
    ct_compiled *c = ct_compile(pointwise, NULL, 0);
    CT_ASSERT_OK(c);
    for (int k = 0; k < 4; k++) {
        ct_scope_begin();
        ct_tensor *x = randn(CT_SHAPE(5, 7), CT_F32), *y = randn(CT_SHAPE(5, 7), CT_F32);
        ct_tensor *in[2] = {x, y};
        ct_tensor *want = pointwise(in, 2, NULL);
        ct_tensor *got = ct_compiled_call(c, in, 2);
        assert_same(got, want);
        ct_scope_end();
    }
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_CALLS), 4);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_EAGER), 1);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_CAPTURES), 1);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 2);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_ENTRIES), 1);
    char buf[4096];
    int64_t len = ct_compiled_print(c, buf, sizeof buf);
    assert_true(len > 0 && len < (int64_t)sizeof buf);
    assert_non_null(strstr(buf, "= input 0 : float32[5, 7]"));
    assert_non_null(strstr(buf, " = mul(%0, %1)"));
    assert_non_null(strstr(buf, "relu("));
    assert_non_null(strstr(buf, "return %"));
    /* measuring: cap 0 gives the length */
    assert_int_equal(ct_compiled_print(c, NULL, 0), len);
    ct_compiled_free(c);
}

static void test_guards(void **state) {
    (void)state;
    ct_compiled *c = ct_compile(pointwise, NULL, 0);
    CT_ASSERT_OK(c);
    /* call 1 eager; then 8 shapes captured; a 9th runs eagerly */
    for (int s = 0; s < 10; s++) {
        ct_scope_begin();
        ct_tensor *x = randn(CT_SHAPE(2, s + 1), CT_F32), *y = randn(CT_SHAPE(2, s + 1), CT_F32);
        ct_tensor *in[2] = {x, y};
        assert_same(ct_compiled_call(c, in, 2), pointwise(in, 2, NULL));
        ct_scope_end();
    }
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_ENTRIES), 8);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_CAPTURES), 8);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_EAGER), 2);
    /* a known shape replays; float64, a transposed input and requires_grad are misses */
    int64_t caps = ct_compiled_stat(c, CT_COMPILE_STAT_CAPTURES);
    ct_scope_begin();
    ct_tensor *x = randn(CT_SHAPE(2, 3), CT_F32), *y = randn(CT_SHAPE(2, 3), CT_F32);
    ct_tensor *in[2] = {x, y};
    assert_same(ct_compiled_call(c, in, 2), pointwise(in, 2, NULL));
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 1);
    ct_tensor *xt = ct_transpose(randn(CT_SHAPE(3, 2), CT_F32), 0, 1);
    ct_tensor *in2[2] = {xt, y};
    int64_t eager = ct_compiled_stat(c, CT_COMPILE_STAT_EAGER);
    assert_same(ct_compiled_call(c, in2, 2), pointwise(in2, 2, NULL));
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_EAGER), eager + 1); /* full: eager */
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_CAPTURES), caps);
    ct_scope_end();
    ct_compiled_free(c);

    /* the same misses on a fresh function each make an entry */
    c = ct_compile(pointwise, NULL, 0);
    ct_scope_begin();
    x = randn(CT_SHAPE(2, 3), CT_F32);
    y = randn(CT_SHAPE(2, 3), CT_F32);
    ct_tensor *a[2] = {x, y};
    ct_tensor *b[2] = {ct_transpose(randn(CT_SHAPE(3, 2), CT_F32), 0, 1), y};
    ct_tensor *d[2] = {ct_to_dtype(x, CT_F64), ct_to_dtype(y, CT_F64)};
    ct_tensor *xr = ct_clone(x);
    ct_tensor_set_requires_grad(xr, true);
    ct_tensor *r[2] = {xr, y};
    ct_tensor **calls[] = {a, a, b, d, r, a, b, d, r};
    for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++)
        assert_same(ct_compiled_call(c, calls[k], 2), pointwise(calls[k], 2, NULL));
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_ENTRIES), 4);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 4);
    /* grad mode is part of the key */
    bool prev = ct_set_grad_enabled(false);
    assert_same(ct_compiled_call(c, a, 2), pointwise(a, 2, NULL));
    ct_set_grad_enabled(prev);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_ENTRIES), 5);
    ct_scope_end();
    ct_compiled_free(c);
}

/* An override bumps the dispatcher's generation: the graph is captured again. */
static ct_status neg_override(ct_keyset ks, ct_call *call, void *ud) {
    (void)ud;
    return ct_call_next(ks, call);
}

static void test_override_generation(void **state) {
    (void)state;
    ct_compiled *c = ct_compile(pointwise, NULL, 0);
    ct_scope_begin();
    ct_tensor *in[2] = {randn(CT_SHAPE(4), CT_F32), randn(CT_SHAPE(4), CT_F32)};
    for (int k = 0; k < 3; k++)
        CT_ASSERT_OK(ct_compiled_call(c, in, 2));
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_CAPTURES), 1);
    int64_t h = ct_op_override(CT_OP_neg, CT_KEY_CPU, neg_override, NULL, 0);
    assert_true(h > 0);
    CT_ASSERT_OK(ct_compiled_call(c, in, 2));
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_CAPTURES), 2);
    assert_int_equal(ct_op_override_remove(h), CT_OK);
    CT_ASSERT_OK(ct_compiled_call(c, in, 2));
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_CAPTURES), 3);
    ct_scope_end();
    ct_compiled_free(c);
}

/* ------------------------------------------------------------ refusals */

static ct_tensor *reads_item(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    double v;
    if (ct_item_double(ct_sum(in[0], NULL, 0, false, CT_DTYPE_UNDEFINED), &v) != CT_OK)
        return NULL;
    return v > 0 ? ct_exp(in[0]) : ct_neg(in[0]);
}

static ct_tensor *prints(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *t = ct_exp(in[0]);
    char buf[256];
    if (ct_to_string(t, buf, sizeof buf) < 0)
        return NULL;
    return t;
}

static ct_tensor *data_dependent(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    return ct_nonzero(ct_gt_scalar(in[0], ct_scalar_float(0)));
}

static void test_refused(void **state) {
    (void)state;
    struct {
        ct_compile_fn fn;
        const char *op;
    } cases[] = {{reads_item, "item"}, {prints, "to_string"}, {data_dependent, "nonzero"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ct_scope_begin();
        ct_tensor *in[1] = {randn(CT_SHAPE(6), CT_F32)};
        ct_compiled *c = ct_compile(cases[k].fn, NULL, 0);
        CT_ASSERT_OK(ct_compiled_call(c, in, 1)); /* eager */
        assert_null(ct_compiled_call(c, in, 1));
        if (!strstr(ct_last_error(), cases[k].op) || !strstr(ct_last_error(), "cannot be captured"))
            fail_msg("%s: %s", cases[k].op, ct_last_error());
        ct_clear_error();
        ct_compiled_free(c);
        /* with the fallback the function runs eagerly, with a result equal to eager's */
        c = ct_compile(cases[k].fn, NULL, CT_COMPILE_EAGER_FALLBACK);
        for (int i = 0; i < 3; i++)
            assert_same(ct_compiled_call(c, in, 1), cases[k].fn(in, 1, NULL));
        assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 0);
        assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_ENTRIES), 1);
        assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_EAGER), 2);
        ct_compiled_free(c);
        ct_scope_end();
    }
}

static void test_errors(void **state) {
    (void)state;
    CT_ASSERT_ERR(ct_compile(NULL, NULL, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "fn is NULL");
    CT_ASSERT_ERR(ct_compile(pointwise, NULL, 1u << 20) != NULL, CT_ERROR_VALUE, "unknown flags");
    CT_ASSERT_ERR(ct_compiled_call(NULL, NULL, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "compiled function is NULL");
    ct_compiled *c = ct_compile(pointwise, NULL, 0);
    CT_ASSERT_ERR(ct_compiled_call(c, NULL, 2) != NULL, CT_ERROR_VALUE, "inputs is NULL");
    CT_ASSERT_ERR(ct_compiled_call(c, NULL, -1) != NULL, CT_ERROR_VALUE, "negative");
    CT_ASSERT_ERR(ct_compiled_print(c, NULL, 0) >= 0, CT_ERROR_RUNTIME, "no graph was captured");
    CT_ASSERT_ERR(ct_compiled_print(NULL, NULL, 0) >= 0, CT_ERROR_NULL_ARGUMENT, "NULL");
    char b[4];
    CT_ASSERT_ERR(ct_compiled_print(c, NULL, sizeof b) >= 0, CT_ERROR_NULL_ARGUMENT, "buf is NULL");
    CT_ASSERT_ERR(ct_compiled_stat(NULL, CT_COMPILE_STAT_CALLS) >= 0, CT_ERROR_NULL_ARGUMENT, "NULL");
    CT_ASSERT_ERR(ct_compiled_stat(c, (ct_compile_stat)999) >= 0, CT_ERROR_VALUE, "unknown stat");
    /* an error inside the function is the call's error, and nothing is captured */
    ct_scope_begin();
    ct_tensor *in[2] = {randn(CT_SHAPE(2, 3), CT_F32), randn(CT_SHAPE(4), CT_F32)};
    for (int k = 0; k < 3; k++)
        CT_ASSERT_ERR(ct_compiled_call(c, in, 2) != NULL, CT_ERROR_VALUE, "must match the size");
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_ENTRIES), 0);
    ct_scope_end();
    ct_compiled_free(c);
    ct_compiled_free(NULL);
    /* outside a capture the refusal is a no-op */
    assert_false(ct_compile_is_capturing());
    assert_int_equal(ct_compile_refuse("x", "y"), CT_OK);
}

/* ------------------------------------------------------------ passes */

static ct_tensor *with_waste(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *unused = ct_exp(ct_mul(in[0], in[0])); /* dead */
    (void)unused;
    ct_tensor *a = ct_add(in[0], in[1]);
    ct_tensor *b = ct_add(in[0], in[1]); /* common */
    return ct_mul(ct_tanh(a), b);
}

static void test_passes(void **state) {
    (void)state;
    ct_compiled *c = ct_compile(with_waste, NULL, CT_COMPILE_NO_CODEGEN);
    ct_compiled *raw = ct_compile(with_waste, NULL, CT_COMPILE_NO_CODEGEN | CT_COMPILE_NO_PASSES);
    ct_scope_begin();
    for (int k = 0; k < 3; k++) {
        ct_tensor *in[2] = {randn(CT_SHAPE(3, 3), CT_F32), randn(CT_SHAPE(3, 3), CT_F32)};
        ct_tensor *want = with_waste(in, 2, NULL);
        assert_same(ct_compiled_call(c, in, 2), want);
        assert_same(ct_compiled_call(raw, in, 2), want);
    }
    ct_scope_end();
    assert_int_equal(ct_compiled_stat(raw, CT_COMPILE_STAT_NODES), 6);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_CAPTURED_NODES), 6);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_NODES), 3); /* add, tanh, mul */
    ct_compiled_free(c);
    ct_compiled_free(raw);
}

/* A write through a view between two equal calls keeps them apart. */
static ct_tensor *view_write(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *base = ct_clone(in[0]);
    ct_tensor *v = ct_narrow(base, 0, 0, 2);
    ct_tensor *a = ct_exp(base);
    ct_add_scalar_(v, ct_scalar_float(1));
    ct_tensor *b = ct_exp(base);
    return ct_add(a, b);
}

static void test_cse_respects_writes(void **state) {
    (void)state;
    ct_compiled *c = ct_compile(view_write, NULL, 0);
    ct_scope_begin();
    for (int k = 0; k < 3; k++) {
        ct_tensor *in[1] = {randn(CT_SHAPE(4, 3), CT_F32)};
        assert_same(ct_compiled_call(c, in, 1), view_write(in, 1, NULL));
    }
    ct_scope_end();
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 1);
    ct_compiled_free(c);
}

/* ------------------------------------------------------------ a training step */

typedef struct model {
    ct_tensor *w1, *b1, *w2;
    bool use_optimizer;
    ct_optimizer *opt;
} model;

static ct_tensor *train_step(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    model *m = ud;
    ct_tensor *h = ct_tanh(ct_add(ct_matmul(in[0], m->w1), m->b1));
    ct_tensor *out = ct_matmul(h, m->w2);
    ct_tensor *d = ct_sub(out, in[1]);
    ct_tensor *loss = ct_mean(ct_mul(d, d), NULL, 0, false, CT_DTYPE_UNDEFINED);
    if (!loss || ct_backward(loss, NULL, false, false) != CT_OK)
        return NULL;
    if (m->use_optimizer)
        return ct_optimizer_step(m->opt) == CT_OK ? loss : NULL;
    /* SGD by hand, in place under no_grad */
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *ps[3] = {m->w1, m->b1, m->w2};
    for (int i = 0; i < 3; i++)
        ct_sub_alpha_(ps[i], ct_tensor_grad(ps[i]), ct_scalar_float(0.1));
    ct_set_grad_enabled(prev);
    return loss;
}

static void model_init(model *m, uint64_t seed) {
    ct_manual_seed(seed);
    /* owned by the caller's scope */
    m->w1 = ct_mul_scalar(randn(CT_SHAPE(4, 8), CT_F32), ct_scalar_float(0.5));
    m->b1 = ct_zeros(CT_SHAPE(8), CT_F32, CT_CPU);
    m->w2 = ct_mul_scalar(randn(CT_SHAPE(8, 2), CT_F32), ct_scalar_float(0.5));
    ct_tensor_set_requires_grad(m->w1, true);
    ct_tensor_set_requires_grad(m->b1, true);
    ct_tensor_set_requires_grad(m->w2, true);
    m->use_optimizer = false;
    m->opt = NULL;
}

static void zero_grads(model *m) {
    ct_tensor *ps[3] = {m->w1, m->b1, m->w2};
    for (int i = 0; i < 3; i++)
        ct_tensor_set_grad(ps[i], NULL);
}

/* zero: which steps set the gradients to None first (1 every step, 0 never, 2 every
 * other step: the graph depends on it, Note [Gradient guards]) */
static void run_training(int zero, int64_t want_captures) {
    ct_scope_begin();
    model eager, comp;
    model_init(&eager, 7);
    model_init(&comp, 7);
    ct_compiled *c = ct_compile(train_step, &comp, 0);
    CT_ASSERT_OK(c);
    ct_manual_seed(11);
    for (int step = 0; step < 6; step++) {
        ct_scope_begin();
        ct_tensor *x = randn(CT_SHAPE(16, 4), CT_F32), *y = randn(CT_SHAPE(16, 2), CT_F32);
        ct_tensor *in[2] = {x, y};
        if (zero == 1 || (zero == 2 && step % 2 == 0)) {
            zero_grads(&eager);
            zero_grads(&comp);
        }
        ct_tensor *le = train_step(in, 2, &eager);
        ct_tensor *lc = ct_compiled_call(c, in, 2);
        assert_same(lc, le);
        assert_same(comp.w1, eager.w1);
        assert_same(comp.b1, eager.b1);
        assert_same(comp.w2, eager.w2);
        assert_same(ct_tensor_grad(comp.w1), ct_tensor_grad(eager.w1));
        assert_same(ct_tensor_grad(comp.w2), ct_tensor_grad(eager.w2));
        ct_scope_end();
    }
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_CAPTURES), want_captures);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 5 - want_captures);
    if (zero == 1) {
        char buf[1 << 14];
        ct_compiled_print(c, buf, sizeof buf);
        assert_non_null(strstr(buf, "mm")); /* the forward's and the backward's products */
        assert_non_null(strstr(buf, "in-place into")); /* the update */
        assert_non_null(strstr(buf, ".grad = %")); /* the gradients, written back */
    }
    ct_compiled_free(c);
    ct_scope_end();
}

static void test_training_step(void **state) {
    (void)state;
    run_training(1, 1);
    run_training(0, 1); /* gradients accumulate into the same tensors */
    run_training(2, 5); /* alternating: every call after the first captures again */
}

/* Note [Host calls]: the optimizer step, zero_grad and gradient clipping are nodes that
 * call the real code on every replay, so the step count and a learning rate changed
 * between calls are seen. mode: 0 step only (gradients dropped outside), 1 zero_grad,
 * clip_grad_norm_ and step inside, 2 zero_grad and step_clipped (returning the norm),
 * 3 clip_grad_value_, clip_grad_norm_tensor_ and step. */
typedef struct opt_model {
    model m;
    int mode;
} opt_model;

static ct_tensor *opt_step(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    opt_model *om = ud;
    model *m = &om->m;
    ct_tensor *ps[3] = {m->w1, m->b1, m->w2};
    if ((om->mode == 1 || om->mode == 2) && ct_optimizer_zero_grad(m->opt, true) != CT_OK)
        return NULL;
    ct_tensor *h = ct_tanh(ct_add(ct_matmul(in[0], m->w1), m->b1));
    ct_tensor *d = ct_sub(ct_matmul(h, m->w2), in[1]);
    ct_tensor *loss = ct_mean(ct_mul(d, d), NULL, 0, false, CT_DTYPE_UNDEFINED);
    if (!loss || ct_backward(loss, NULL, false, false) != CT_OK)
        return NULL;
    ct_tensor *norm = NULL;
    ct_status st = CT_OK;
    switch (om->mode) {
    case 1:
        st = ct_clip_grad_norm_(ps, 3, 0.5, 2.0, false, NULL);
        break;
    case 2:
        st = ct_optimizer_step_clipped(m->opt, 0.5, 2.0, &norm);
        return st == CT_OK ? ct_add(loss, norm) : NULL;
    case 3:
        st = ct_clip_grad_value_(ps, 3, 0.05);
        if (st == CT_OK)
            st = ct_clip_grad_norm_tensor_(ps, 3, 0.5, 2.0, &norm);
        if (st == CT_OK && !(loss = ct_add(loss, norm)))
            return NULL;
        break;
    default:
        break;
    }
    return st == CT_OK && ct_optimizer_step(m->opt) == CT_OK ? loss : NULL;
}

static void run_optimizer(ct_optim_kind kind, ct_optim_options o, int mode) {
    ct_scope_begin();
    opt_model eager, comp;
    model_init(&eager.m, 3);
    model_init(&comp.m, 3);
    eager.mode = comp.mode = mode;
    ct_tensor *pe[3] = {eager.m.w1, eager.m.b1, eager.m.w2}, *pc[3] = {comp.m.w1, comp.m.b1, comp.m.w2};
    eager.m.opt = ct_optimizer_new(kind, pe, 3, &o);
    comp.m.opt = ct_optimizer_new(kind, pc, 3, &o);
    CT_ASSERT_OK(eager.m.opt);
    CT_ASSERT_OK(comp.m.opt);
    ct_compiled *c = ct_compile(opt_step, &comp, 0);
    CT_ASSERT_OK(c);
    ct_manual_seed(11);
    for (int step = 0; step < 7; step++) {
        ct_scope_begin();
        ct_tensor *x = randn(CT_SHAPE(16, 4), CT_F32), *y = randn(CT_SHAPE(16, 2), CT_F32);
        ct_tensor *in[2] = {x, y};
        if (step == 4) { /* a schedule: the replay reads the new rate */
            assert_int_equal(ct_optimizer_set_lr(eager.m.opt, 0, o.lr / 4), CT_OK);
            assert_int_equal(ct_optimizer_set_lr(comp.m.opt, 0, o.lr / 4), CT_OK);
        }
        if (mode == 0 || mode == 3) {
            zero_grads(&eager.m);
            zero_grads(&comp.m);
        }
        ct_tensor *le = opt_step(in, 2, &eager);
        ct_tensor *lc = ct_compiled_call(c, in, 2);
        assert_same(lc, le);
        assert_same(comp.m.w1, eager.m.w1);
        assert_same(comp.m.b1, eager.m.b1);
        assert_same(comp.m.w2, eager.m.w2);
        assert_same(ct_tensor_grad(comp.m.w1), ct_tensor_grad(eager.m.w1));
        assert_same(ct_tensor_grad(comp.m.b1), ct_tensor_grad(eager.m.b1));
        ct_scope_end();
    }
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_CAPTURES), 1);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 5);
    char buf[1 << 15];
    assert_true(ct_compiled_print(c, buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, mode == 2 ? "host optimizer.step_clipped(%" : "host optimizer.step(%"));
    if (mode == 1 || mode == 2)
        assert_non_null(strstr(buf, "host optimizer.zero_grad()"));
    if (mode == 1 || mode == 3)
        assert_non_null(strstr(buf, "host clip_grad_norm_("));
    if (mode == 3)
        assert_non_null(strstr(buf, "host clip_grad_value_("));
    ct_compiled_free(c);
    ct_optimizer_free(eager.m.opt);
    ct_optimizer_free(comp.m.opt);
    ct_scope_end();
}

static void test_optimizer_in_graph(void **state) {
    (void)state;
    ct_optim_options sgd = ct_sgd_options(0.1), adamw = ct_adamw_options(0.01);
    sgd.momentum = 0.9;
    for (int mode = 0; mode < 4; mode++) {
        run_optimizer(CT_OPTIM_ADAMW, adamw, mode);
        run_optimizer(CT_OPTIM_SGD, sgd, mode);
    }
}

/* Every optimizer and its variants as a host call of a compiled step (Note [Host
 * calls]): the replays update the parameters and the state bit for bit as eager steps,
 * on the multi-tensor, the one-op-per-step and the fused paths. */
static void test_every_optimizer_in_graph(void **state) {
    (void)state;
    struct {
        ct_optim_kind kind;
        ct_optim_options o;
    } cases[16];
    int n = 0;
    ct_optim_options o = ct_sgd_options(0.05);
    cases[n].kind = CT_OPTIM_SGD, cases[n++].o = o; /* plain */
    o.momentum = 0.9, o.nesterov = true, o.weight_decay = 0.01;
    cases[n].kind = CT_OPTIM_SGD, cases[n++].o = o;
    o = ct_sgd_options(0.05);
    o.momentum = 0.5, o.dampening = 0.3, o.maximize = true, o.foreach = 0;
    cases[n].kind = CT_OPTIM_SGD, cases[n++].o = o;
    o = ct_adam_options(0.01);
    cases[n].kind = CT_OPTIM_ADAM, cases[n++].o = o;
    o.amsgrad = true, o.weight_decay = 0.1;
    cases[n].kind = CT_OPTIM_ADAM, cases[n++].o = o;
    o = ct_adam_options(0.01);
    o.fused = 1;
    cases[n].kind = CT_OPTIM_ADAM, cases[n++].o = o;
    o = ct_adamw_options(0.01);
    o.amsgrad = true, o.foreach = 0, o.maximize = true;
    cases[n].kind = CT_OPTIM_ADAMW, cases[n++].o = o;
    o = ct_adamw_options(0.01);
    o.fused = 1;
    cases[n].kind = CT_OPTIM_ADAMW, cases[n++].o = o;
    o = ct_rmsprop_options(0.01);
    cases[n].kind = CT_OPTIM_RMSPROP, cases[n++].o = o;
    o.momentum = 0.9, o.centered = true, o.weight_decay = 0.01;
    cases[n].kind = CT_OPTIM_RMSPROP, cases[n++].o = o;
    o.foreach = 0;
    cases[n].kind = CT_OPTIM_RMSPROP, cases[n++].o = o;
    o = ct_adagrad_options(0.1);
    cases[n].kind = CT_OPTIM_ADAGRAD, cases[n++].o = o;
    o.lr_decay = 0.01, o.initial_accumulator_value = 0.1, o.weight_decay = 0.01, o.foreach = 0;
    cases[n].kind = CT_OPTIM_ADAGRAD, cases[n++].o = o;
    for (int i = 0; i < n; i++)
        for (int mode = 0; mode < 4; mode++)
            run_optimizer(cases[i].kind, cases[i].o, mode);
}

/* A number returned to the host (clip_grad_norm_'s total_norm) is refused, with its
 * name; CT_COMPILE_EAGER_FALLBACK runs the function eagerly instead. */
static ct_tensor *step_clips(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    model *m = ud;
    ct_tensor *loss = ct_sum(ct_tanh(ct_matmul(in[0], m->w1)), NULL, 0, false, CT_DTYPE_UNDEFINED);
    if (!loss || ct_backward(loss, NULL, false, false) != CT_OK)
        return NULL;
    ct_tensor *ps[1] = {m->w1};
    double total = 0;
    return ct_clip_grad_norm_(ps, 1, 1.0, 2.0, false, &total) == CT_OK ? loss : NULL;
}

static void test_clip_refused(void **state) {
    (void)state;
    ct_scope_begin();
    model m;
    model_init(&m, 5);
    ct_tensor *in[1] = {randn(CT_SHAPE(3, 4), CT_F32)};
    ct_compiled *c = ct_compile(step_clips, &m, 0);
    CT_ASSERT_OK(ct_compiled_call(c, in, 1));
    zero_grads(&m);
    assert_null(ct_compiled_call(c, in, 1));
    assert_non_null(strstr(ct_last_error(), "clip_grad_norm_"));
    assert_non_null(strstr(ct_last_error(), "host number"));
    ct_clear_error();
    ct_compiled_free(c);
    c = ct_compile(step_clips, &m, CT_COMPILE_EAGER_FALLBACK);
    for (int k = 0; k < 3; k++) {
        zero_grads(&m);
        CT_ASSERT_OK(ct_compiled_call(c, in, 1));
    }
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_EAGER), 2); /* and the refused capture */
    ct_compiled_free(c);
    ct_scope_end();
}

/* Bad arguments to the optimizer and clipping calls fail under capture as they do
 * eagerly, and fail the capture. */
static ct_tensor *bad_clip(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *r = ct_mul(in[0], in[0]);
    return ct_clip_grad_value_(NULL, 2, 1.0) == CT_OK ? r : NULL;
}

static ct_tensor *bad_step(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *r = ct_mul(in[0], in[0]);
    return ct_optimizer_step(NULL) == CT_OK ? r : NULL;
}

static void test_host_call_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *in[1] = {randn(CT_SHAPE(3), CT_F32)};
    ct_compiled *c = ct_compile(bad_clip, NULL, 0);
    CT_ASSERT_ERR(ct_compiled_call(c, in, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "params is NULL"); /* eager */
    CT_ASSERT_ERR(ct_compiled_call(c, in, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "params is NULL"); /* capture */
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_ENTRIES), 0);
    ct_compiled_free(c);
    c = ct_compile(bad_step, NULL, 0);
    CT_ASSERT_ERR(ct_compiled_call(c, in, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "optimizer is NULL");
    CT_ASSERT_ERR(ct_compiled_call(c, in, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "optimizer is NULL");
    ct_compiled_free(c);
    ct_scope_end();
}

/* ct_compile_host_call from user code: the node calls the function on every replay
 * (a counter it bumps is seen), its result is the node's; bad arguments are errors. */
typedef struct counter_ctx {
    int *count;
} counter_ctx;

static ct_status bump(void *ctx, ct_tensor **result) {
    counter_ctx *cc = ctx;
    ++*cc->count;
    if (result && !(*result = ct_scalar_tensor(ct_scalar_float((double)*cc->count), CT_F32, CT_CPU)))
        return ct_last_status();
    return CT_OK;
}

static ct_tensor *with_counter(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    counter_ctx cc = {ud};
    ct_tensor *r = NULL;
    if (ct_compile_host_call("counter", bump, &cc, sizeof cc, &r) != CT_OK)
        return NULL;
    return ct_add(in[0], r);
}

static void test_host_call_api(void **state) {
    (void)state;
    ct_scope_begin();
    int count = 0;
    counter_ctx cc = {&count};
    CT_ASSERT_ERR(ct_compile_host_call("counter", NULL, &cc, sizeof cc, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "fn is NULL");
    CT_ASSERT_ERR(ct_compile_host_call("counter", bump, NULL, 8, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "ctx is NULL");
    ct_compile_note_grads_reset(NULL, 3); /* outside a capture, and NULL: nothing */
    ct_tensor *r = NULL;
    assert_int_equal(ct_compile_host_call("counter", bump, &cc, sizeof cc, &r), CT_OK); /* just calls it */
    assert_int_equal(count, 1);
    assert_true(ct_test_at(r, 0) == 1.0);
    count = 0;
    ct_compiled *c = ct_compile(with_counter, &count, 0);
    ct_tensor *in[1] = {ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU)};
    for (int k = 1; k <= 4; k++) {
        ct_tensor *y = ct_compiled_call(c, in, 1);
        CT_ASSERT_OK(y);
        assert_true(ct_test_at(y, 2) == (double)k); /* read at each replay, not baked in */
    }
    assert_int_equal(count, 4);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 2);
    char buf[1024];
    assert_true(ct_compiled_print(c, buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, "= host counter() : float32[]"));
    ct_compiled_free(c);
    ct_scope_end();
}

/* Note [Autocast under capture]: a step under autocast (mm cast by the AUTOCAST kernel,
 * tanh in bfloat16, a float32 loss, SGD on the float32 weights) replays as eager runs
 * it, step after step: the weights' casts are nodes of the graph, made again at every
 * replay from the weights the updates changed. */
static ct_tensor *amp_step(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    model *m = ud;
    if (ct_autocast_begin(CT_DEVICE_CPU, CT_BF16) != CT_OK)
        return NULL;
    ct_tensor *h = ct_mm(in[0], m->w1); /* ops, cast by the autocast kernel (matmul casts before) */
    ct_tensor *o = ct_mm(ct_tanh(h), m->w2);
    ct_autocast_end();
    if (!o || ct_tensor_dtype(o) != CT_BF16)
        return NULL;
    ct_tensor *loss = ct_mean(ct_square(ct_to_dtype(o, CT_F32)), NULL, 0, false, CT_DTYPE_UNDEFINED);
    if (!loss || ct_backward(loss, NULL, false, false) != CT_OK)
        return NULL;
    bool prev = ct_set_grad_enabled(false);
    ct_sub_alpha_(m->w1, ct_tensor_grad(m->w1), ct_scalar_float(0.5));
    ct_sub_alpha_(m->w2, ct_tensor_grad(m->w2), ct_scalar_float(0.5));
    ct_set_grad_enabled(prev);
    return ct_stack((const ct_tensor *[]){loss, ct_to_dtype(ct_select(ct_select(h, 0, 0), 0, 0), CT_F32)}, 2, 0);
}

static void test_autocast_captured(void **state) {
    (void)state;
    ct_scope_begin();
    model eager, comp;
    model_init(&eager, 21);
    model_init(&comp, 21);
    ct_compiled *c = ct_compile(amp_step, &comp, 0);
    ct_manual_seed(5);
    for (int step = 0; step < 5; step++) {
        ct_scope_begin();
        ct_tensor *x[1] = {randn(CT_SHAPE(16, 4), CT_F32)};
        zero_grads(&eager);
        zero_grads(&comp);
        ct_tensor *le = amp_step(x, 1, &eager);
        ct_tensor *lc = ct_compiled_call(c, x, 1);
        CT_ASSERT_OK(lc);
        assert_same(lc, le);
        assert_same(comp.w1, eager.w1);
        assert_same(comp.w2, eager.w2);
        assert_int_equal(ct_autocast_nesting(), 0);
        ct_scope_end();
    }
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_EAGER), 1);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 3);
    /* the weights' casts are nodes of the graph */
    char buf[16384];
    assert_true(ct_compiled_print(c, buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, "to_dtype(%"));
    assert_non_null(strstr(buf, "dtype=bfloat16) : bfloat16"));
    ct_compiled_free(c);
    ct_scope_end();
}

/* ------------------------------------------------------------ gradcheck */

typedef struct gc_state {
    ct_compiled *c;
} gc_state;

static ct_tensor *gc_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *t = ct_tanh(ct_mul(in[0], in[1]));
    return ct_add(ct_sum(ct_mul(t, in[0]), CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED), ct_sigmoid(in[1]));
}

static ct_tensor *gc_compiled(ct_tensor *const *in, int n, void *ud) {
    gc_state *s = ud;
    return ct_compiled_call(s->c, in, n);
}

static void test_gradcheck(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = randn(CT_SHAPE(3, 4), CT_F64), *b = randn(CT_SHAPE(4), CT_F64);
    ct_tensor_set_requires_grad(a, true);
    ct_tensor_set_requires_grad(b, true);
    gc_state s = {ct_compile(gc_fn, NULL, 0)};
    ct_tensor *in[2] = {a, b};
    if (ct_gradcheck(gc_compiled, &s, in, 2, 1e-6, 1e-5, 1e-3) != CT_OK)
        fail_msg("gradcheck: %s", ct_last_error());
    assert_true(ct_compiled_stat(s.c, CT_COMPILE_STAT_REPLAYS) > 2);
    ct_compiled_free(s.c);
    ct_scope_end();
}


/* ------------------------------------------------------------ generated code */

/* A chain of every op the code generator takes. */
static ct_tensor *chain(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *a = ct_sub_alpha(ct_mul(in[0], in[1]), in[1], ct_scalar_float(0.3));
    ct_tensor *b = ct_add(ct_tanh(a), ct_sigmoid(ct_neg(in[0])));
    ct_tensor *c = ct_div(ct_exp(ct_abs(b)), ct_add_scalar(ct_relu(in[1]), ct_scalar_float(1.5)));
    return ct_mul_scalar(c, ct_scalar_int(3));
}

static void test_codegen_bitwise(void **state) {
    (void)state;
    const int64_t sizes[] = {1, 255, 257, 16384 * 2 + 77};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        ct_compiled *c = ct_compile(chain, NULL, 0);
        ct_scope_begin();
        for (int k = 0; k < 4; k++) {
            ct_tensor *in[2] = {ct_mul_scalar(randn(CT_SHAPE(sizes[s]), CT_F32), ct_scalar_float(3)),
                                randn(CT_SHAPE(sizes[s]), CT_F32)};
            /* specials: NaN, infinities, signed zeros */
            if (sizes[s] > 4) {
                float *p = ct_tensor_data(in[0]);
                p[0] = NAN;
                p[1] = INFINITY;
                p[2] = -INFINITY;
                p[3] = -0.0f;
            }
            assert_same(ct_compiled_call(c, in, 2), chain(in, 2, NULL));
        }
        ct_scope_end();
        assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 2);
        /* one element runs the kernels (their scalar path) */
        assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_GROUPS), sizes[s] > 1);
        assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_NODES), sizes[s] > 1 ? 12 : 0);
        ct_compiled_free(c);
    }
}

/* softmax and log_softmax over the last dim, with pointwise producers and consumers */
static ct_tensor *attn_like(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *s = ct_add(ct_mul_scalar(in[0], ct_scalar_float(0.125)), in[1]);
    ct_tensor *p = ct_softmax(s, -1, CT_DTYPE_UNDEFINED);
    ct_tensor *l = ct_log_softmax(ct_tanh(s), ct_tensor_dim(s) - 1, CT_DTYPE_UNDEFINED);
    return ct_add(ct_mul(p, in[1]), l);
}

static void test_codegen_rows(void **state) {
    (void)state;
    const int64_t rows[] = {1, 37, 1024, 1025};
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        ct_compiled *c = ct_compile(attn_like, NULL, 0);
        ct_scope_begin();
        for (int call = 0; call < 4; call++) {
            ct_tensor *in[2] = {ct_mul_scalar(randn(CT_SHAPE(5, rows[k]), CT_F32), ct_scalar_float(4)),
                                randn(CT_SHAPE(5, rows[k]), CT_F32)};
            float *p = ct_tensor_data(in[0]);
            p[0] = NAN;                       /* a NaN row */
            p[2 * rows[k]] = -INFINITY;       /* rows with infinities */
            p[3 * rows[k]] = INFINITY;
            assert_same(ct_compiled_call(c, in, 2), attn_like(in, 2, NULL));
        }
        ct_scope_end();
        assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 2);
        /* one row group; rows longer than 1024 leave the softmaxes to their kernels, and the
         * pointwise nodes around them make two groups */
        assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_GROUPS), rows[k] <= 1024 ? 1 : 2);
        if (rows[k] <= 1024)
            assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_NODES), 7);
        ct_compiled_free(c);
    }
}

/* The activations' vector chains and the other unary ops of the generator. */
static ct_tensor *activations(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *a = ct_gelu(in[0], CT_GELU_APPROXIMATE_TANH);
    ct_tensor *b = ct_gelu(ct_mul(a, in[1]), CT_GELU_APPROXIMATE_NONE);
    ct_tensor *c = ct_silu(ct_add(b, in[0]));
    return ct_add(ct_sqrt(ct_abs(c)), ct_square(ct_sub(c, in[1])));
}

/* Note [Generated layer_norm rows]: gelu(layer_norm(x + y)) over the last dim, with
 * weight and bias, with a weight only and with neither, GELU in both forms: one row
 * group, the eager kernels' bits (rows of every length mod 8, NaN and infinite rows). */
typedef struct ln_case {
    int affine; /* 2 weight and bias, 1 weight only, 0 none */
    int64_t approximate;
} ln_case;

static ct_tensor *ln_gelu(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    const ln_case *lc = ud;
    const int64_t cols = ct_tensor_size(in[0], 1);
    ct_tensor *h = ct_add(in[0], in[1]);
    ct_tensor *y = ct_layer_norm(h, &cols, 1, lc->affine >= 1 ? in[2] : NULL, lc->affine == 2 ? in[3] : NULL, 1e-5);
    return ct_gelu(y, lc->approximate);
}

static void test_codegen_layer_norm(void **state) {
    (void)state;
    const int64_t cols[] = {2, 7, 8, 37, 128, 1024, 1025};
    for (int affine = 0; affine <= 2; affine++)
        for (int form = 0; form < 2; form++)
            for (size_t k = 0; k < sizeof cols / sizeof cols[0]; k++) {
                ln_case lc = {affine, form ? CT_GELU_APPROXIMATE_TANH : CT_GELU_APPROXIMATE_NONE};
                ct_compiled *c = ct_compile(ln_gelu, &lc, 0);
                ct_scope_begin();
                for (int call = 0; call < 3; call++) {
                    const int64_t m = cols[k];
                    ct_tensor *in[4] = {ct_mul_scalar(randn(CT_SHAPE(6, m), CT_F32), ct_scalar_float(3)),
                                        randn(CT_SHAPE(6, m), CT_F32), randn(CT_SHAPE(m), CT_F32),
                                        randn(CT_SHAPE(m), CT_F32)};
                    float *p = ct_tensor_data(in[0]);
                    p[0] = NAN;          /* a NaN row */
                    p[2 * m] = INFINITY; /* rows with infinities */
                    p[3 * m + m - 1] = -INFINITY;
                    p[4 * m] = 1e30f;    /* a row whose variance is large */
                    assert_same(ct_compiled_call(c, in, 4), ln_gelu(in, 4, &lc));
                }
                ct_scope_end();
                assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 1);
                /* add, layer_norm and gelu in one row group; longer rows than 1024 are
                 * left to the kernels */
                assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_GROUPS), cols[k] <= 1024);
                assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_NODES), cols[k] <= 1024 ? 3 : 0);
                ct_compiled_free(c);
            }
}

/* Note [Reusing dying inputs]: relu(mm(x, w) * 2 + 1) writes its result into the
 * product's buffer, which dies in the group: a replay's peak is one buffer above its
 * inputs, where eager's (and a group that allocated) is two. */
static ct_tensor *mm_chain(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    return ct_relu(ct_add_scalar(ct_mul_scalar(ct_mm(in[0], in[1]), ct_scalar_float(2)), ct_scalar_float(1)));
}

static void test_codegen_reuse(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *in[2] = {randn(CT_SHAPE(256, 64), CT_F32), randn(CT_SHAPE(64, 512), CT_F32)};
    const int64_t buf = 256 * 512 * 4;
    ct_compiled *c = ct_compile(mm_chain, NULL, 0);
    for (int k = 0; k < 2; k++) {
        ct_scope_begin();
        CT_ASSERT_OK(ct_compiled_call(c, in, 2));
        ct_scope_end();
    }
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_NODES), 3);
    int64_t peak[2];
    ct_tensor *r[2];
    for (int k = 0; k < 2; k++) {
        const int64_t base = ct_memory_allocated(CT_CPU);
        ct_reset_peak_memory_stats(CT_CPU);
        r[k] = k ? ct_compiled_call(c, in, 2) : mm_chain(in, 2, NULL);
        CT_ASSERT_OK(r[k]);
        peak[k] = ct_max_memory_allocated(CT_CPU) - base;
    }
    assert_same(r[1], r[0]);
    assert_true(peak[0] >= 2 * buf); /* eager: the product and the next result */
    assert_true(peak[1] < 2 * buf);  /* compiled: the product's buffer holds the result */
    assert_true(peak[1] >= buf);
    ct_compiled_free(c);
    ct_scope_end();
}

static void test_codegen_activations(void **state) {
    (void)state;
    ct_compiled *c = ct_compile(activations, NULL, 0);
    ct_scope_begin();
    for (int k = 0; k < 4; k++) {
        ct_tensor *in[2] = {ct_mul_scalar(randn(CT_SHAPE(3, 1000), CT_F32), ct_scalar_float(6)),
                            randn(CT_SHAPE(3, 1000), CT_F32)};
        float *p = ct_tensor_data(in[0]);
        p[0] = NAN;
        p[1] = INFINITY;
        p[2] = -INFINITY;
        p[3] = -0.0f;
        p[4] = -20.0f; /* gelu's exp overflows: -0 */
        assert_same(ct_compiled_call(c, in, 2), activations(in, 2, NULL));
    }
    ct_scope_end();
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 2);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_GROUPS), 1);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_NODES), 10);
    ct_compiled_free(c);
}

/* Inputs broadcast over the leading dims (a bias, a per-column scale) join the group. */
static ct_tensor *biased(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *h = ct_gelu(ct_add(in[0], in[1]), CT_GELU_APPROXIMATE_TANH);
    ct_tensor *s = ct_softmax(ct_mul(h, in[2]), -1, CT_DTYPE_UNDEFINED);
    return ct_sub(ct_mul(s, in[2]), in[3]);
}

static void test_codegen_broadcast(void **state) {
    (void)state;
    ct_compiled *c = ct_compile(biased, NULL, 0);
    ct_scope_begin();
    for (int k = 0; k < 4; k++) {
        ct_tensor *in[4] = {randn(CT_SHAPE(2, 5, 33), CT_F32), randn(CT_SHAPE(33), CT_F32),
                            randn(CT_SHAPE(1, 5, 33), CT_F32), randn(CT_SHAPE(1), CT_F32)};
        assert_same(ct_compiled_call(c, in, 4), biased(in, 4, NULL));
    }
    ct_scope_end();
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 2);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_GROUPS), 1);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_NODES), 6);
    ct_compiled_free(c);
}

static char cache_dir[256];
static char main_cache[256]; /* the other tests' cache, removed at the end */

static int64_t count_misses_of_fresh(void) {
    ct_compiled *c = ct_compile(chain, NULL, 0);
    ct_scope_begin();
    for (int k = 0; k < 3; k++) {
        ct_tensor *in[2] = {randn(CT_SHAPE(40), CT_F32), randn(CT_SHAPE(40), CT_F32)};
        assert_same(ct_compiled_call(c, in, 2), chain(in, 2, NULL));
    }
    ct_scope_end();
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_GROUPS), 1);
    int64_t misses = ct_compiled_stat(c, CT_COMPILE_STAT_CACHE_MISSES);
    assert_int_equal(misses + ct_compiled_stat(c, CT_COMPILE_STAT_CACHE_HITS), 1);
    ct_compiled_free(c);
    return misses;
}

/* The one object of the cache directory (its path without the extension). */
static void only_entry(char *stem, size_t cap) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s/*.so", cache_dir);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    assert_non_null(fgets(stem, (int)cap, f));
    pclose(f);
    char *dot = strstr(stem, ".so");
    assert_non_null(dot);
    *dot = '\0';
}

static void test_cache(void **state) {
    (void)state;
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ct_compile_cache_XXXXXX");
    assert_non_null(mkdtemp(cache_dir));
    setenv("CT_COMPILE_CACHE", cache_dir, 1);
    assert_int_equal(count_misses_of_fresh(), 1); /* cold: built */
    assert_int_equal(count_misses_of_fresh(), 0); /* warm: loaded */
    char stem[400], path[420];
    only_entry(stem, sizeof stem);
    /* a corrupted object is detected by its sum and built again, never loaded */
    snprintf(path, sizeof path, "%s.so", stem);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 100, SEEK_SET);
    fputs("garbage", f);
    fclose(f);
    assert_int_equal(count_misses_of_fresh(), 1);
    assert_int_equal(count_misses_of_fresh(), 0);
    /* so is a truncated one, and one whose sum is missing */
    assert_int_equal(truncate(path, 64), 0);
    assert_int_equal(count_misses_of_fresh(), 1);
    snprintf(path, sizeof path, "%s.md5", stem);
    assert_int_equal(remove(path), 0);
    assert_int_equal(count_misses_of_fresh(), 1);
    assert_int_equal(count_misses_of_fresh(), 0);
    /* a compiler that fails leaves the graph to the kernels, with the same results */
    setenv("CT_COMPILE_CACHE", "/proc/ctorch-no-such-dir", 1);
    ct_compiled *c = ct_compile(chain, NULL, 0);
    ct_scope_begin();
    for (int k = 0; k < 3; k++) {
        ct_tensor *in[2] = {randn(CT_SHAPE(40), CT_F32), randn(CT_SHAPE(40), CT_F32)};
        assert_same(ct_compiled_call(c, in, 2), chain(in, 2, NULL));
    }
    ct_scope_end();
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_GROUPS), 0);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 1);
    ct_compiled_free(c);
    setenv("CT_COMPILE_CACHE", cache_dir, 1);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
    assert_int_equal(system(cmd), 0);
    setenv("CT_COMPILE_CACHE", main_cache, 1);
}

/* Three runs of pointwise nodes cut by products: three groups. */
static ct_tensor *three_groups(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *a = ct_relu(ct_add(ct_mul(in[0], in[0]), in[0]));
    ct_tensor *b = ct_tanh(ct_sub(ct_mm(a, in[1]), in[0]));
    return ct_sigmoid(ct_mul(ct_exp(ct_neg(ct_mm(b, in[1]))), b));
}

/* Note [Parallel units] in codegen.c: with CT_COMPILE_JOBS=j a graph of three groups is
 * min(j, 3) objects, built at once, each a cache entry of its own, with the same bits
 * as one object and as eager; warm, every unit is found again. */
static void test_parallel_units(void **state) {
    (void)state;
    char dir[64] = "/tmp/ct_compile_units_XXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("CT_COMPILE_CACHE", dir, 1);
    ct_tensor *got[2] = {NULL, NULL};
    const char *jobs[] = {"1", "2", "8", "2"};
    const int64_t units[] = {1, 2, 8, 2};
    ct_scope_begin();
    ct_tensor *in[2] = {randn(CT_SHAPE(16, 16), CT_F32), randn(CT_SHAPE(16, 16), CT_F32)};
    ct_tensor *want = three_groups(in, 2, NULL);
    for (int r = 0; r < 4; r++) {
        setenv("CT_COMPILE_JOBS", jobs[r], 1);
        ct_compiled *c = ct_compile(three_groups, NULL, 0);
        for (int k = 0; k < 3; k++)
            got[k > 1] = ct_compiled_call(c, in, 2);
        assert_same(got[0], want);
        assert_same(got[1], want); /* the replay */
        int64_t groups = ct_compiled_stat(c, CT_COMPILE_STAT_FUSED_GROUPS);
        assert_int_equal(groups, 3);
        int64_t nu = units[r] < groups ? units[r] : groups;
        int64_t misses = ct_compiled_stat(c, CT_COMPILE_STAT_CACHE_MISSES);
        assert_int_equal(misses + ct_compiled_stat(c, CT_COMPILE_STAT_CACHE_HITS), nu);
        /* the first two runs build every unit (new sources); with one unit per group the
         * first group's unit is the two-job run's first one again; the last run finds
         * all of them */
        assert_int_equal(misses, r < 2 ? nu : r == 2 ? nu - 1 : 0);
        ct_compiled_free(c);
    }
    ct_scope_end();
    unsetenv("CT_COMPILE_JOBS");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    setenv("CT_COMPILE_CACHE", main_cache, 1);
}

/* ------------------------------------------------------------ random ops, input writes, the log */

static ct_tensor *with_dropout(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    return ct_add(ct_dropout(ct_tanh(in[0]), 0.5, true), in[0]);
}

/* Random ops replay in the eager order: the same seed gives the same masks. */
static void test_random(void **state) {
    (void)state;
    ct_compiled *c = ct_compile(with_dropout, NULL, 0);
    ct_scope_begin();
    ct_tensor *in[1] = {randn(CT_SHAPE(64, 33), CT_F32)};
    for (int k = 0; k < 4; k++) {
        ct_manual_seed(100 + (uint64_t)k);
        ct_tensor *want = with_dropout(in, 1, NULL);
        ct_manual_seed(100 + (uint64_t)k);
        assert_same(ct_compiled_call(c, in, 1), want);
    }
    ct_scope_end();
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 2);
    ct_compiled_free(c);
}

/* Two flash attention calls with dropout on the same inputs draw two masks: a graph
 * must keep both (ops.def flags the op CT_OPF_DRAWS, Note [Pure nodes]). */
static ct_tensor *two_flash_dropouts(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *o[2], *l, *m;
    for (int i = 0; i < 2; i++)
        if (ct_flash_attention_forward_dropout(in[0], in[0], in[0], false, NULL, 0.5, &o[i], &l, &m) != CT_OK)
            return NULL;
    return ct_sub(o[0], o[1]);
}

static void test_flash_dropout_kept(void **state) {
    (void)state;
    ct_compiled *c = ct_compile(two_flash_dropouts, NULL, 0);
    ct_scope_begin();
    ct_tensor *in[1] = {randn(CT_SHAPE(1, 2, 9, 8), CT_F32)};
    for (int k = 0; k < 4; k++) {
        ct_manual_seed(200 + (uint64_t)k);
        ct_tensor *want = two_flash_dropouts(in, 1, NULL);
        ct_manual_seed(200 + (uint64_t)k);
        ct_tensor *got = ct_compiled_call(c, in, 1);
        assert_same(got, want);
        /* the two masks differ: the difference is not all zeros */
        double diff = 0;
        assert_int_equal(ct_item_double(ct_sum(ct_abs(got), NULL, 0, false, CT_DTYPE_UNDEFINED), &diff), CT_OK);
        assert_true(diff > 0);
    }
    ct_scope_end();
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 2);
    ct_compiled_free(c);
}

/* Every random op of the public API, flattened into one float64 result. */
static ct_tensor *every_random(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_tensor *x = in[0], *probs = ct_softmax(in[0], 1, CT_DTYPE_UNDEFINED);
    ct_tensor *t1 = ct_uniform_(ct_empty_like(x, CT_DTYPE_UNDEFINED), -2.0, 3.0), *t2 = ct_normal_(ct_empty_like(x, CT_DTYPE_UNDEFINED), 1.0, 0.5);
    ct_tensor *t3 = ct_bernoulli_(ct_empty_like(x, CT_DTYPE_UNDEFINED), 0.3);
    ct_tensor *parts[] = {ct_rand(CT_SHAPE(3, 5), CT_F32, CT_CPU),
                          ct_randn(CT_SHAPE(7), CT_F64, CT_CPU),
                          ct_randint(-4, 9, CT_SHAPE(2, 6), CT_I64, CT_CPU),
                          ct_randperm(11, CT_I64, CT_CPU),
                          ct_rand_like(x, CT_DTYPE_UNDEFINED),
                          ct_randn_like(x, CT_F64),
                          t1,
                          t2,
                          t3,
                          ct_bernoulli(ct_sigmoid(x)),
                          ct_multinomial(probs, 3, false),
                          ct_multinomial(probs, 9, true),
                          ct_dropout(x, 0.4, true)};
    enum { NP = sizeof parts / sizeof parts[0] };
    const ct_tensor *flat[NP];
    for (int i = 0; i < NP; i++)
        flat[i] = parts[i] ? ct_reshape(ct_to_dtype(parts[i], CT_F64), CT_SHAPE(-1)) : NULL;
    for (int i = 0; i < NP; i++)
        if (!flat[i])
            return NULL;
    return ct_cat(flat, NP, 0);
}

/* Every random op captured and replayed: the same seed gives the same numbers as an
 * eager call, for several seeds, and a replay without a new seed goes on where the
 * generator is, as eager does. */
static void test_every_random_op(void **state) {
    (void)state;
    ct_compiled *c = ct_compile(every_random, NULL, 0);
    CT_ASSERT_OK(c);
    ct_scope_begin();
    ct_tensor *in[1] = {randn(CT_SHAPE(4, 6), CT_F32)};
    for (int k = 0; k < 5; k++) {
        ct_manual_seed(300 + (uint64_t)k);
        ct_tensor *want = every_random(in, 1, NULL), *want2 = every_random(in, 1, NULL);
        CT_ASSERT_OK(want);
        ct_manual_seed(300 + (uint64_t)k);
        ct_tensor *got = ct_compiled_call(c, in, 1);
        CT_ASSERT_OK(got);
        assert_same(got, want);
        ct_tensor *got2 = ct_compiled_call(c, in, 1); /* no new seed: the generator's next numbers */
        CT_ASSERT_OK(got2);
        assert_same(got2, want2);
    }
    ct_scope_end();
    assert_true(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS) >= 7);
    ct_compiled_free(c);
}

static ct_tensor *writes_input(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_mul_scalar_(in[0], ct_scalar_float(2));
    ct_tensor *v = ct_narrow(in[0], 0, 1, 1);
    ct_add_(v, in[1]);
    return ct_exp(in[0]);
}

/* In-place writes into the inputs (through a view too) reach the replayed call's inputs. */
static void test_input_writes(void **state) {
    (void)state;
    ct_compiled *c = ct_compile(writes_input, NULL, 0);
    ct_scope_begin();
    for (int k = 0; k < 4; k++) {
        ct_tensor *a = randn(CT_SHAPE(3, 5), CT_F32), *b = randn(CT_SHAPE(1, 5), CT_F32);
        ct_tensor *a2 = ct_clone(a);
        ct_tensor *in[2] = {a, b}, *in2[2] = {a2, b};
        ct_tensor *want = writes_input(in2, 2, NULL);
        assert_same(ct_compiled_call(c, in, 2), want);
        assert_same(a, a2);
    }
    ct_scope_end();
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 2);
    ct_compiled_free(c);
}

/* Inputs that alias at capture are a different key from inputs that do not. */
static ct_tensor *add_into_first(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    (void)ud;
    ct_add_(in[0], in[1]);
    return ct_mul(in[0], in[1]);
}

static void test_aliased_inputs(void **state) {
    (void)state;
    ct_compiled *c = ct_compile(add_into_first, NULL, 0);
    ct_scope_begin();
    for (int k = 0; k < 6; k++) {
        ct_tensor *a = randn(CT_SHAPE(4), CT_F32), *b = randn(CT_SHAPE(4), CT_F32);
        bool same_tensor = k % 2 == 1;
        ct_tensor *a2 = ct_clone(a), *b2 = same_tensor ? a2 : ct_clone(b);
        ct_tensor *in[2] = {a, same_tensor ? a : b}, *in2[2] = {a2, b2};
        ct_tensor *want = add_into_first(in2, 2, NULL);
        assert_same(ct_compiled_call(c, in, 2), want);
        assert_same(a, a2);
    }
    ct_scope_end();
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_ENTRIES), 2);
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 3);
    ct_compiled_free(c);
}

/* The structured log gets the graph and the generated code. */
static void test_trace_events(void **state) {
    (void)state;
    char dir[] = "/tmp/ct_compile_trace_XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(ct_trace_log_start(dir), CT_OK);
    char path[512];
    snprintf(path, sizeof path, "%s", ct_trace_log_path());
    ct_compiled *c = ct_compile(chain, NULL, 0);
    ct_scope_begin();
    ct_tensor *in[2] = {randn(CT_SHAPE(33), CT_F32), randn(CT_SHAPE(33), CT_F32)};
    for (int k = 0; k < 3; k++)
        CT_ASSERT_OK(ct_compiled_call(c, in, 2));
    ct_scope_end();
    ct_compiled_free(c);
    assert_int_equal(ct_trace_log_stop(), CT_OK);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    /* TORCH_TRACE's compile events, in its order, with frame and compile ids */
    const char *order[] = {"{\"dynamo_start\": {\"stack\": []}, \"frame_id\": ",
                           "{\"dynamo_output_graph\": {\"captured_nodes\": 12",
                           "{\"inductor_output_code\": {\"filename\": \"",
                           "{\"dynamo_guards\": {}, \"frame_id\": ",
                           "{\"compilation_metrics\": {\"co_name\": \"ct_compile\""};
    const char *at = text;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const char *p = strstr(at, order[i]);
        if (!p)
            fail_msg("event %zu (%s) missing or out of order", i, order[i]);
        at = p;
    }
    assert_non_null(strstr(text, "\"frame_compile_id\": 0, \"attempt\": 0"));
    assert_null(strstr(text, "aot_joint_graph")); /* no backward in this function */
    assert_non_null(strstr(text, "\"fused_groups\": 1"));
    assert_non_null(strstr(text, "\"fail_type\": null"));
    assert_non_null(strstr(text, "{\"code\": \"check_tensor(inputs[0], float32, cpu, requires_grad=False, size=[33], "
                                 "stride=[1], storage_offset=0)\"}"));
    assert_non_null(strstr(text, "void ct_fused_0("));
    assert_non_null(strstr(text, "= tanh(%"));
    /* ctorch trace-report lists them on a compile section of its page */
    char out[128];
    snprintf(out, sizeof out, "%s/report", dir);
    ct_trace_report_summary sum;
    assert_int_equal(ct_trace_report(dir, out, &sum), CT_OK);
    assert_int_equal(sum.fail_payload_md5, 0);
    snprintf(path, sizeof path, "%s/index.html", out);
    f = fopen(path, "r");
    assert_non_null(f);
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "<h2>Compiles</h2>"));
    assert_non_null(strstr(text, ">generated C</a>"));
    assert_non_null(strstr(text, ">guards</a>"));
    assert_non_null(strstr(text, ">graph</a>"));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A training step logs its joint graph; a refused capture logs compilation_metrics
 * with its fail_type and reason (Note [Compile events]). */
static void test_trace_events_training(void **state) {
    (void)state;
    char dir[] = "/tmp/ct_compile_trace_XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(ct_trace_log_start(dir), CT_OK);
    char path[512];
    snprintf(path, sizeof path, "%s", ct_trace_log_path());
    ct_scope_begin();
    model m;
    model_init(&m, 9);
    ct_tensor *in[2] = {randn(CT_SHAPE(16, 4), CT_F32), randn(CT_SHAPE(16, 2), CT_F32)};
    ct_compiled *c = ct_compile(train_step, &m, 0);
    for (int k = 0; k < 2; k++) {
        zero_grads(&m);
        CT_ASSERT_OK(ct_compiled_call(c, in, 2));
    }
    ct_compiled_free(c);
    c = ct_compile(step_clips, &m, CT_COMPILE_EAGER_FALLBACK);
    for (int k = 0; k < 2; k++) {
        zero_grads(&m);
        CT_ASSERT_OK(ct_compiled_call(c, in, 1));
    }
    ct_compiled_free(c);
    ct_scope_end();
    assert_int_equal(ct_trace_log_stop(), CT_OK);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 17];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "{\"aot_joint_graph\": {}, \"frame_id\": "));
    assert_non_null(strstr(text, "\"training_step\": true"));
    assert_non_null(strstr(text, "\"fail_type\": \"capture refused (eager fallback)\", \"fail_reason\": "
                                 "\"clip_grad_norm_: it returns the total norm as a host number"));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol),
        cmocka_unit_test(test_guards),
        cmocka_unit_test(test_override_generation),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_passes),
        cmocka_unit_test(test_cse_respects_writes),
        cmocka_unit_test(test_training_step),
        cmocka_unit_test(test_optimizer_in_graph),
        cmocka_unit_test(test_every_optimizer_in_graph),
        cmocka_unit_test(test_clip_refused),
        cmocka_unit_test(test_host_call_errors),
        cmocka_unit_test(test_host_call_api),
        cmocka_unit_test(test_autocast_captured),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_codegen_bitwise),
        cmocka_unit_test(test_codegen_rows),
        cmocka_unit_test(test_codegen_layer_norm),
        cmocka_unit_test(test_codegen_reuse),
        cmocka_unit_test(test_codegen_activations),
        cmocka_unit_test(test_codegen_broadcast),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_flash_dropout_kept),
        cmocka_unit_test(test_every_random_op),
        cmocka_unit_test(test_input_writes),
        cmocka_unit_test(test_aliased_inputs),
        cmocka_unit_test(test_trace_events),
        cmocka_unit_test(test_parallel_units),
        cmocka_unit_test(test_trace_events_training),
    };
    snprintf(main_cache, sizeof main_cache, "/tmp/ct_compile_test_XXXXXX");
    if (!mkdtemp(main_cache))
        return 1;
    setenv("CT_COMPILE_CACHE", main_cache, 1);
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", main_cache);
    if (system(cmd) != 0)
        rc = 1;
    return rc;
}
