/* Autograd on CUDA tensors: the engine is device-agnostic, so gradcheck in float64
 * runs on the GPU, and a small network's gradients and optimizer steps on the GPU
 * equal the CPU's. Skipped (exit code 77) without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "cuda_testutil.h"

#define CUDA0 CT_CUDA(0)

/* float64 inputs in [lo, hi] on the GPU that require grad. */
static ct_tensor *gpu_input(const int64_t *shape, int ndim, double lo, double hi, uint64_t seed) {
    ct_tensor *t = ct_to_device(ct_test_values(shape, ndim, CT_F64, lo, hi, seed), CUDA0);
    if (t)
        ct_tensor_set_requires_grad(t, true);
    return t;
}

/* tanh(a) * sigmoid(b) + exp(a) / (b * b + 1) - sqrt(b * b + 1) + relu(a - b) */
static ct_tensor *f_elementwise(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    ct_tensor *bb1 = ct_add_scalar(ct_mul(in[1], in[1]), ct_scalar_float(1));
    ct_tensor *s = ct_add(ct_mul(ct_tanh(in[0]), ct_sigmoid(in[1])), ct_div(ct_exp(in[0]), bb1));
    return ct_add(ct_sub(s, ct_sqrt(bb1)), ct_relu(ct_sub(in[0], in[1])));
}

/* a @ b with a broadcast second operand (a row added to every row). */
static ct_tensor *f_matmul(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_add(ct_mm(in[0], in[1]), in[2]);
}

static ct_tensor *f_sum_dim(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_sum(ct_mul(in[0], in[0]), (int64_t[]){1}, 1, false, CT_DTYPE_UNDEFINED);
}

static ct_tensor *f_log_softmax(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_log_softmax(in[0], 1, CT_DTYPE_UNDEFINED);
}

/* Views: a narrow of a transpose, a select, and an expand (overlapping: its gradient
 * sums), each weighted so every element's gradient differs. */
static ct_tensor *f_views(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    ct_tensor *a = ct_narrow(ct_transpose(in[0], 0, 1), 1, 1, 2);
    ct_tensor *b = ct_select(in[0], 0, 2);
    ct_tensor *c = ct_expand(ct_narrow(in[0], 0, 0, 1), CT_SHAPE(3, 4));
    ct_tensor *wa = ct_to_device(ct_arange(ct_scalar_int(0), ct_scalar_int(8), ct_scalar_int(1), CT_F64, CT_CPU),
                                 ct_tensor_device(in[0]));
    ct_tensor *s = ct_add(ct_sum(ct_mul(ct_reshape(a, CT_SHAPE(8)), wa), NULL, 0, false, CT_DTYPE_UNDEFINED),
                          ct_sum(ct_mul(b, b), NULL, 0, false, CT_DTYPE_UNDEFINED));
    return ct_add(s, ct_sum(ct_mul(c, c), NULL, 0, false, CT_DTYPE_UNDEFINED));
}

typedef struct {
    const char *name;
    ct_grad_fn_t fn;
    int n;
    int64_t shapes[3][2];
} grad_case;

static void run_gradcheck(const grad_case *c, bool second_order) {
    ct_scope_begin();
    ct_tensor *in[3];
    for (int i = 0; i < c->n; i++) {
        in[i] = gpu_input(c->shapes[i], 2, -1.5, 1.5, 11 + (uint64_t)i);
        CT_ASSERT_OK(in[i]);
    }
    ct_status st = ct_gradcheck(c->fn, NULL, in, c->n, 1e-6, 1e-6, 1e-4);
    if (st != CT_OK) {
        print_error("gradcheck on CUDA, %s: %s\n", c->name, ct_last_error());
        fail();
    }
    if (second_order) {
        st = ct_gradgradcheck(c->fn, NULL, in, c->n, 1e-6, 1e-6, 1e-4);
        if (st != CT_OK) {
            print_error("gradgradcheck on CUDA, %s: %s\n", c->name, ct_last_error());
            fail();
        }
    }
    ct_scope_end();
}

static void test_gradcheck_elementwise(void **state) {
    (void)state;
    grad_case c = {"elementwise", f_elementwise, 2, {{3, 4}, {3, 4}}};
    run_gradcheck(&c, true);
}

static void test_gradcheck_matmul(void **state) {
    (void)state;
    grad_case c = {"mm + broadcast add", f_matmul, 3, {{3, 4}, {4, 2}, {1, 2}}};
    run_gradcheck(&c, true);
}

static void test_gradcheck_reductions(void **state) {
    (void)state;
    grad_case s = {"sum over dim 1", f_sum_dim, 1, {{3, 5}}};
    run_gradcheck(&s, true);
    grad_case l = {"log_softmax", f_log_softmax, 1, {{2, 5}}};
    run_gradcheck(&l, false);
}

static void test_gradcheck_views(void **state) {
    (void)state;
    grad_case c = {"narrow/select/expand views", f_views, 1, {{3, 4}}};
    run_gradcheck(&c, true);
}

/* The gradient lands on the parameter's device, and a CPU gradient for a GPU tensor
 * is refused where PyTorch refuses it. */
static void test_grad_device(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = gpu_input(CT_SHAPE(4, 3), -1, 1, 3);
    ct_tensor *y = ct_sum(ct_mul(x, x), NULL, 0, false, CT_DTYPE_UNDEFINED);
    CT_ASSERT_OK(y);
    assert_int_equal(ct_backward(y, NULL, false, false), CT_OK);
    ct_tensor *g = ct_tensor_grad(x);
    CT_ASSERT_OK(g);
    assert_int_equal(ct_tensor_device(g).type, CT_DEVICE_CUDA);
    CT_ASSERT_CLOSE(g, ct_mul_scalar(ct_to_device(x, CT_CPU), ct_scalar_float(2)), 1e-13, 1e-13, "d/dx sum(x*x)");
    ct_tensor *y2 = ct_mul(x, x);
    ct_tensor *cpu_go = ct_ones(CT_SHAPE(4, 3), CT_F64, CT_CPU);
    assert_int_not_equal(ct_backward(y2, cpu_go, false, false), CT_OK);
    ct_clear_error();
    ct_scope_end();
}

/* to_device's gradient is the move back: gradcheck through CPU -> CUDA -> CPU, and a
 * CPU parameter used on the GPU gets its gradient on the CPU. */
static ct_tensor *f_moves(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    ct_tensor *g = ct_to_device(in[0], CT_CUDA(0));
    return ct_to_device(ct_mul(g, g), CT_CPU);
}

static void test_gradcheck_to_device(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_test_values(CT_SHAPE(3, 4), CT_F64, -1.5, 1.5, 5);
    ct_tensor_set_requires_grad(x, true);
    ct_tensor *in[1] = {x};
    if (ct_gradcheck(f_moves, NULL, in, 1, 1e-6, 1e-6, 1e-4) != CT_OK) {
        print_error("gradcheck through to_device: %s\n", ct_last_error());
        fail();
    }
    ct_tensor *g = ct_to_device(x, CT_CUDA(0));
    assert_string_equal(ct_tensor_grad_fn_name(g), "ToDeviceBackward0");
    assert_int_equal(ct_backward(ct_sum(ct_mul(g, g), NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false),
                     CT_OK);
    ct_tensor *gx = ct_tensor_grad(x);
    CT_ASSERT_OK(gx);
    assert_int_equal(ct_tensor_device(gx).type, CT_DEVICE_CPU);
    CT_ASSERT_CLOSE(gx, ct_mul_scalar(x, ct_scalar_float(2)), 1e-13, 1e-13, "d/dx sum(to_device(x)^2)");
    ct_scope_end();
}

/* A two-layer network trained two SGD steps (momentum) on the GPU and on the CPU from
 * the same start: gradients and parameters agree within float32 tolerances. */
static void test_mlp_steps_match_cpu(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(5);
    ct_tensor *cpu_p[4] = {
        ct_mul_scalar(ct_randn(CT_SHAPE(16, 8), CT_F32, CT_CPU), ct_scalar_float(0.3)),
        ct_mul_scalar(ct_randn(CT_SHAPE(16), CT_F32, CT_CPU), ct_scalar_float(0.1)),
        ct_mul_scalar(ct_randn(CT_SHAPE(3, 16), CT_F32, CT_CPU), ct_scalar_float(0.3)),
        ct_mul_scalar(ct_randn(CT_SHAPE(3), CT_F32, CT_CPU), ct_scalar_float(0.1)),
    };
    ct_tensor *gpu_p[4];
    for (int i = 0; i < 4; i++) {
        CT_ASSERT_OK(cpu_p[i]);
        gpu_p[i] = ct_to_device(cpu_p[i], CUDA0);
        CT_ASSERT_OK(gpu_p[i]);
        ct_tensor_set_requires_grad(cpu_p[i], true);
        ct_tensor_set_requires_grad(gpu_p[i], true);
    }
    ct_tensor *x = ct_randn(CT_SHAPE(32, 8), CT_F32, CT_CPU), *t = ct_randn(CT_SHAPE(32, 3), CT_F32, CT_CPU);
    ct_tensor *xs[2] = {x, ct_to_device(x, CUDA0)}, *ts[2] = {t, ct_to_device(t, CUDA0)};
    ct_tensor **ps[2] = {cpu_p, gpu_p};
    ct_optim_options o = ct_sgd_options(0.05);
    o.momentum = 0.9;
    ct_optimizer *opt[2] = {ct_optimizer_new(CT_OPTIM_SGD, cpu_p, 4, &o), ct_optimizer_new(CT_OPTIM_SGD, gpu_p, 4, &o)};
    assert_non_null(opt[0]);
    assert_non_null(opt[1]);
    for (int step = 0; step < 2; step++) {
        double loss[2];
        for (int d = 0; d < 2; d++) {
            ct_scope_begin();
            ct_tensor **p = ps[d];
            ct_tensor *h = ct_relu(ct_linear(xs[d], p[0], p[1]));
            ct_tensor *diff = ct_sub(ct_linear(h, p[2], p[3]), ts[d]);
            ct_tensor *l = ct_mean(ct_mul(diff, diff), NULL, 0, false, CT_DTYPE_UNDEFINED);
            CT_ASSERT_OK(l);
            assert_int_equal(ct_optimizer_zero_grad(opt[d], true), CT_OK);
            assert_int_equal(ct_backward(l, NULL, false, false), CT_OK);
            assert_int_equal(ct_item_double(l, &loss[d]), CT_OK);
            ct_scope_end();
        }
        assert_true(fabs(loss[0] - loss[1]) <= 1e-5 * fabs(loss[0]));
        for (int i = 0; i < 4; i++)
            CT_ASSERT_CLOSE(ct_tensor_grad(gpu_p[i]), ct_tensor_grad(cpu_p[i]), 1e-4, 1e-5, "gradient");
        assert_int_equal(ct_optimizer_step(opt[0]), CT_OK);
        assert_int_equal(ct_optimizer_step(opt[1]), CT_OK);
        for (int i = 0; i < 4; i++)
            CT_ASSERT_CLOSE(gpu_p[i], cpu_p[i], 1e-4, 1e-5, "parameter after a step");
    }
    ct_optimizer_free(opt[0]);
    ct_optimizer_free(opt[1]);
    ct_scope_end();
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_autograd");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradcheck_elementwise), cmocka_unit_test(test_gradcheck_matmul),
        cmocka_unit_test(test_gradcheck_reductions),  cmocka_unit_test(test_gradcheck_views),
        cmocka_unit_test(test_grad_device),          cmocka_unit_test(test_gradcheck_to_device),
        cmocka_unit_test(test_mlp_steps_match_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
