/* The fused Adam/AdamW step with the step number in a tensor (ct_fused_adam_capturable_,
 * Note [Device step]): on the CPU it reads the tensor and gives the bits of the
 * by-value call; bad step tensors are refused; the optimizers' capturable option leaves
 * CPU parameters on the by-value path. (On the GPU: tests/test_cuda_graph.c.) */
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
        assert_int_equal(ct_fused_adam_capturable_(true, p2, N, g2, N, m2, N, v2, N, NULL, 0, NULL, 0, step_t, 1e-2,
                                                   0.9, 0.95, 0.1, 1e-8, false, false, NULL, NULL, NULL),
                         CT_OK);
    }
    for (int i = 0; i < N; i++) {
        bool eq = false;
        assert_int_equal(ct_equal(p1[i], p2[i], &eq), CT_OK);
        assert_true(eq);
        assert_int_equal(ct_equal(v1[i], v2[i], &eq), CT_OK);
        assert_true(eq);
    }
    ct_scope_end();
    release(p1), release(g1), release(m1), release(v1);
    release(p2), release(g2), release(m2), release(v2);
}

static void test_errors(void **state) {
    (void)state;
    ct_tensor *p[N], *g[N], *m[N], *v[N];
    make(p, g, m, v);
    ct_scope_begin();
    ct_clear_error();
    assert_int_equal(ct_fused_adam_capturable_(false, p, N, g, N, m, N, v, N, NULL, 0, NULL, 0, NULL, 1e-3, 0.9,
                                               0.999, 0, 1e-8, false, false, NULL, NULL, NULL),
                     CT_ERROR_NULL_ARGUMENT);
    assert_non_null(strstr(ct_last_error(), "step_t is NULL"));
    ct_tensor *f32 = ct_scalar_tensor(ct_scalar_float(1), CT_F32, CT_CPU);
    assert_int_equal(ct_fused_adam_capturable_(false, p, N, g, N, m, N, v, N, NULL, 0, NULL, 0, f32, 1e-3, 0.9,
                                               0.999, 0, 1e-8, false, false, NULL, NULL, NULL),
                     CT_ERROR_TYPE);
    assert_non_null(strstr(ct_last_error(), "step_t must be a one-element float64 tensor"));
    ct_tensor *two = ct_zeros(CT_SHAPE(2), CT_F64, CT_CPU);
    assert_int_equal(ct_fused_adam_capturable_(false, p, N, g, N, m, N, v, N, NULL, 0, NULL, 0, two, 1e-3, 0.9,
                                               0.999, 0, 1e-8, false, false, NULL, NULL, NULL),
                     CT_ERROR_TYPE);
    ct_tensor *zero = ct_scalar_tensor(ct_scalar_float(0), CT_F64, CT_CPU);
    assert_int_equal(ct_fused_adam_capturable_(false, p, N, g, N, m, N, v, N, NULL, 0, NULL, 0, zero, 1e-3, 0.9,
                                               0.999, 0, 1e-8, false, false, NULL, NULL, NULL),
                     CT_ERROR_VALUE);
    assert_non_null(strstr(ct_last_error(), "step_t must hold a step of at least 1"));
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
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_option_on_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
