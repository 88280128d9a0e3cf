/* The fused Adam/AdamW step with the step number and the learning rate in tensors
 * (ct_fused_adam_capturable_, Note [Device step]): on the CPU it reads the tensors and
 * gives the bits of the by-value call; bad step and lr tensors are refused with the op's
 * name; the optimizers' capturable option leaves CPU parameters on the by-value path.
 * (On the GPU: tests/test_cuda_graph.c.) */
#include <math.h>
#include <string.h>

#include "testutil.h"
#include "ctorch/optim.h"

#define N 3

static void make(ct_tensor **p, ct_tensor **g, ct_tensor **m, ct_tensor **v) {
    ct_manual_seed(11);
    for (int i = 0; i < N; i++) {
        p[i] = ct_retain(ct_rand(CT_SHAPE(5 + i, 3), CT_F32, CT_CPU));
        g[i] = ct_retain(ct_rand(CT_SHAPE(5 + i, 3), CT_F32, CT_CPU));
        m[i] = ct_retain(ct_zeros(CT_SHAPE(5 + i, 3), CT_F32, CT_CPU));
        v[i] = ct_retain(ct_zeros(CT_SHAPE(5 + i, 3), CT_F32, CT_CPU));
    }
}

static void release(ct_tensor **t) {
    for (int i = 0; i < N; i++)
        ct_release(t[i]);
}

static void assert_same(ct_tensor **a, ct_tensor **b) {
    for (int i = 0; i < N; i++) {
        bool eq = false;
        assert_int_equal(ct_equal(a[i], b[i], &eq), CT_OK);
        assert_true(eq);
    }
}

static void test_same_bits_as_by_value(void **state) {
    (void)state;
    ct_tensor *p1[N], *g1[N], *m1[N], *v1[N], *p2[N], *g2[N], *m2[N], *v2[N];
    make(p1, g1, m1, v1);
    make(p2, g2, m2, v2);
    ct_scope_begin();
    ct_tensor *step_t = ct_scalar_tensor(ct_scalar_float(0), CT_F64, CT_CPU);
    for (int64_t step = 1; step <= 4; step++) {
        assert_int_equal(ct_fused_adamw_(p1, N, g1, N, m1, N, v1, N, NULL, 0, NULL, 0, step, 1e-2, 0.9, 0.95, 0.1,
                                         1e-8, false, false, NULL, NULL, NULL),
                         CT_OK);
        assert_non_null(ct_add_scalar_(step_t, ct_scalar_float(1)));
        assert_int_equal(ct_fused_adam_capturable_(true, p2, N, g2, N, m2, N, v2, N, NULL, 0, NULL, 0, step_t, NULL,
                                                   1e-2, 0.9, 0.95, 0.1, 1e-8, false, false, NULL, NULL, NULL),
                         CT_OK);
    }
    assert_same(p1, p2);
    assert_same(v1, v2);
    ct_scope_end();
    release(p1), release(g1), release(m1), release(v1);
    release(p2), release(g2), release(m2), release(v2);
}

/* lr_t (Note [Device learning rate] in src/optim/optimizer.c): a learning rate that
 * changes at every step, read from the tensor, gives the bits of the same rates passed
 * by value, for Adam (weight decay added to the gradient) and AdamW (decay = 1 - lr *
 * weight_decay from the tensor's lr). The by-value lr argument is a wrong number, which
 * must not be read. */
static void test_lr_t_same_bits_as_by_value(void **state) {
    (void)state;
    static const double lrs[5] = {1e-2, 3e-3, 0, 7.25e-3, 1e-1 / 3};
    for (int adamw = 0; adamw < 2; adamw++) {
        ct_tensor *p1[N], *g1[N], *m1[N], *v1[N], *p2[N], *g2[N], *m2[N], *v2[N];
        make(p1, g1, m1, v1);
        make(p2, g2, m2, v2);
        ct_scope_begin();
        ct_tensor *step_t = ct_scalar_tensor(ct_scalar_float(0), CT_F64, CT_CPU);
        ct_tensor *lr_t = ct_scalar_tensor(ct_scalar_float(0), CT_F64, CT_CPU);
        for (int64_t step = 1; step <= 5; step++) {
            const double lr = lrs[step - 1];
            assert_int_equal((adamw ? ct_fused_adamw_ : ct_fused_adam_)(p1, N, g1, N, m1, N, v1, N, NULL, 0, NULL, 0,
                                                                        step, lr, 0.9, 0.95, 0.1, 1e-8, false, false,
                                                                        NULL, NULL, NULL),
                             CT_OK);
            assert_non_null(ct_add_scalar_(step_t, ct_scalar_float(1)));
            assert_non_null(ct_fill_(lr_t, ct_scalar_float(lr)));
            assert_int_equal(ct_fused_adam_capturable_(adamw, p2, N, g2, N, m2, N, v2, N, NULL, 0, NULL, 0, step_t,
                                                       lr_t, 5.0, 0.9, 0.95, 0.1, 1e-8, false, false, NULL, NULL,
                                                       NULL),
                             CT_OK);
        }
        assert_same(p1, p2);
        assert_same(m1, m2);
        assert_same(v1, v2);
        ct_scope_end();
        release(p1), release(g1), release(m1), release(v1);
        release(p2), release(g2), release(m2), release(v2);
    }
}

/* One capturable call with step_t 1 and lr_t (either may be NULL); its status. */
static ct_status call_with(ct_tensor *const *p, ct_tensor *const *g, ct_tensor *const *m, ct_tensor *const *v,
                           const ct_tensor *step_t, const ct_tensor *lr_t) {
    return ct_fused_adam_capturable_(false, p, N, g, N, m, N, v, N, NULL, 0, NULL, 0, step_t, lr_t, 1e-3, 0.9, 0.999,
                                     0, 1e-8, false, false, NULL, NULL, NULL);
}

static void assert_error(const char *needle) {
    if (!strstr(ct_last_error(), needle))
        fail_msg("expected \"%s\" in the error, got \"%s\"", needle, ct_last_error());
    if (!strstr(ct_last_error(), "fused_adam"))
        fail_msg("the error does not name the op: \"%s\"", ct_last_error());
}

static void test_errors(void **state) {
    (void)state;
    ct_tensor *p[N], *g[N], *m[N], *v[N];
    make(p, g, m, v);
    ct_scope_begin();
    ct_clear_error();
    assert_int_equal(call_with(p, g, m, v, NULL, NULL), CT_ERROR_NULL_ARGUMENT);
    assert_error("step_t is NULL");
    ct_tensor *f32 = ct_scalar_tensor(ct_scalar_float(1), CT_F32, CT_CPU);
    assert_int_equal(call_with(p, g, m, v, f32, NULL), CT_ERROR_TYPE);
    assert_error("step_t must be a one-element float64 tensor");
    ct_tensor *two = ct_zeros(CT_SHAPE(2), CT_F64, CT_CPU);
    assert_int_equal(call_with(p, g, m, v, two, NULL), CT_ERROR_TYPE);
    ct_tensor *zero = ct_scalar_tensor(ct_scalar_float(0), CT_F64, CT_CPU);
    assert_int_equal(call_with(p, g, m, v, zero, NULL), CT_ERROR_VALUE);
    assert_error("step_t must hold a step of at least 1");

    /* lr_t: float64, one element, on the params' device, a finite lr >= 0 */
    ct_tensor *one = ct_scalar_tensor(ct_scalar_float(1), CT_F64, CT_CPU);
    assert_int_equal(call_with(p, g, m, v, one, f32), CT_ERROR_TYPE);
    assert_error("lr_t must be a one-element float64 tensor, got float32");
    assert_int_equal(call_with(p, g, m, v, one, two), CT_ERROR_TYPE);
    assert_error("lr_t must be a one-element float64 tensor, got float64 with 2 elements");
    ct_tensor *meta = ct_scalar_tensor(ct_scalar_float(1e-3), CT_F64, CT_META);
    assert_non_null(meta);
    assert_int_equal(call_with(p, g, m, v, one, meta), CT_ERROR_DEVICE);
    assert_error("lr_t is on meta, but the params are on cpu");
    const double bad[3] = {-1e-3, NAN, INFINITY};
    for (int k = 0; k < 3; k++) {
        ct_tensor *lr_t = ct_scalar_tensor(ct_scalar_float(bad[k]), CT_F64, CT_CPU);
        assert_int_equal(call_with(p, g, m, v, one, lr_t), CT_ERROR_VALUE);
        assert_error("lr_t must hold a finite learning rate >= 0");
    }
    /* nothing was updated by the refused calls */
    ct_tensor *p0[N], *g0[N], *m0[N], *v0[N];
    make(p0, g0, m0, v0);
    assert_same(p, p0);
    release(p0), release(g0), release(m0), release(v0);
    ct_scope_end();
    release(p), release(g), release(m), release(v);
}

static void test_option_on_cpu(void **state) {
    (void)state;
    /* capturable applies to CUDA parameters; CPU ones step as without it */
    ct_tensor *a[N], *ga[N], *b[N], *gb[N], *unused[2 * N];
    make(a, ga, unused, unused + N);
    release(unused), release(unused + N);
    make(b, gb, unused, unused + N);
    release(unused), release(unused + N);
    ct_optim_options o = ct_adamw_options(1e-2);
    o.fused = 1;
    ct_optimizer *oa = ct_optimizer_new(CT_OPTIM_ADAMW, a, N, &o);
    o.capturable = 1;
    ct_optimizer *ob = ct_optimizer_new(CT_OPTIM_ADAMW, b, N, &o);
    assert_non_null(oa);
    assert_non_null(ob);
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < N; i++) {
            assert_int_equal(ct_tensor_set_grad(a[i], ga[i]), CT_OK);
            assert_int_equal(ct_tensor_set_grad(b[i], gb[i]), CT_OK);
        }
        assert_int_equal(ct_optimizer_step(oa), CT_OK);
        assert_int_equal(ct_optimizer_step(ob), CT_OK);
    }
    for (int i = 0; i < N; i++) {
        bool eq = false;
        assert_int_equal(ct_equal(a[i], b[i], &eq), CT_OK);
        assert_true(eq);
    }
    ct_optimizer_free(oa);
    ct_optimizer_free(ob);
    release(a), release(ga), release(b), release(gb);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bits_as_by_value),
        cmocka_unit_test(test_lr_t_same_bits_as_by_value),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_option_on_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
