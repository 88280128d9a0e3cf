/* A 2-layer MLP (linear, tanh, linear, mean squared error) trained with plain SGD for 20 steps in
 * float64 follows PyTorch's loss curve (tests/golden/gen_mlp.py) to 1e-6 relative. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

#define MAXV 64

typedef struct {
    char name[16];
    int n;
    double v[MAXV];
} array;

static int load(array *arrays, int max) {
    FILE *f = fopen(CT_TEST_DATA_DIR "/mlp_golden.txt", "r");
    if (!f)
        return -1;
    char line[64];
    int count = 0;
    while (count < max && fscanf(f, "%15s", arrays[count].name) == 1) {
        if (arrays[count].name[0] == '#') {
            if (!fgets(line, sizeof line, f))
                break;
            while (!strchr(line, '\n') && fgets(line, sizeof line, f))
                ;
            continue;
        }
        array *a = &arrays[count];
        if (fscanf(f, "%d", &a->n) != 1 || a->n > MAXV)
            break;
        for (int i = 0; i < a->n; i++)
            if (fscanf(f, "%lf", &a->v[i]) != 1)
                return -1;
        count++;
    }
    fclose(f);
    return count;
}

static const array *find(const array *arrays, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(arrays[i].name, name) == 0)
            return &arrays[i];
    fail_msg("no array %s in the golden file", name);
    return NULL;
}

static ct_tensor *param(const array *a, const int64_t *shape, int ndim) {
    ct_tensor *t = ct_retain(ct_from_data(a->v, shape, ndim, CT_F64));
    ct_tensor_set_requires_grad(t, true);
    return t;
}

/* foreach < -1: update by hand under no_grad; otherwise ct_optimizer_step (SGD) with
 * that foreach setting (0: one op per step, 1: the fused loops). */
static void train(int foreach) {
    array arrays[8];
    int na = load(arrays, 8);
    assert_int_equal(na, 7);
    const int64_t N = 16, IN = 3, HID = 8, OUT = 2;
    const double lr = 0.1;
    ct_scope_begin();
    ct_tensor *w1 = param(find(arrays, na, "w1"), CT_SHAPE(HID, IN));
    ct_tensor *b1 = param(find(arrays, na, "b1"), CT_SHAPE(HID));
    ct_tensor *w2 = param(find(arrays, na, "w2"), CT_SHAPE(OUT, HID));
    ct_tensor *b2 = param(find(arrays, na, "b2"), CT_SHAPE(OUT));
    ct_tensor *x = ct_from_data(find(arrays, na, "x")->v, CT_SHAPE(N, IN), CT_F64);
    ct_tensor *y = ct_from_data(find(arrays, na, "y")->v, CT_SHAPE(N, OUT), CT_F64);
    ct_tensor *ones = ct_ones(CT_SHAPE(N * OUT), CT_F64, CT_CPU);
    const array *losses = find(arrays, na, "losses");
    assert_int_equal(losses->n, 20);
    ct_tensor *params[4] = {w1, b1, w2, b2};
    ct_optimizer *opt = NULL;
    if (foreach >= -1) {
        ct_optim_options o = ct_sgd_options(lr);
        o.foreach = foreach;
        opt = ct_optimizer_new(CT_OPTIM_SGD, params, 4, &o);
        CT_ASSERT_OK(opt);
    }
    for (int step = 0; step < 20; step++) {
        ct_scope_begin();
        ct_tensor *h = ct_tanh(ct_linear(x, w1, b1));
        ct_tensor *out = ct_linear(h, w2, b2);
        ct_tensor *d = ct_flatten(ct_sub(out, y), 0, 1);
        /* The mean of d^2 over all N x OUT elements, as a dot product with ones. */
        ct_tensor *loss = ct_mul_scalar(ct_dot(ct_mul(d, d), ones), ct_scalar_float(1.0 / (double)(N * OUT)));
        CT_ASSERT_OK(loss);
        double v;
        assert_int_equal(ct_item_double(loss, &v), CT_OK);
        if (fabs(v - losses->v[step]) > 1e-6 * fabs(losses->v[step]))
            fail_msg("step %d: loss %.17g, PyTorch %.17g", step, v, losses->v[step]);
        for (int p = 0; p < 4; p++)
            assert_int_equal(ct_tensor_set_grad(params[p], NULL), CT_OK);
        assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
        if (opt) {
            assert_int_equal(ct_optimizer_step(opt), CT_OK);
            assert_true(ct_is_grad_enabled());
        } else {
            bool prev = ct_set_grad_enabled(false);
            for (int p = 0; p < 4; p++) {
                ct_tensor *g = ct_tensor_grad(params[p]);
                CT_ASSERT_OK(g);
                CT_ASSERT_OK(ct_sub_alpha_(params[p], g, ct_scalar_float(lr)));
            }
            ct_set_grad_enabled(prev);
        }
        ct_scope_end();
    }
    ct_scope_end();
    ct_optimizer_free(opt);
    for (int p = 0; p < 4; p++)
        ct_release(params[p]);
}

static void test_mlp_matches_pytorch(void **state) {
    (void)state;
    train(-2);
}

/* The same with the optimizer, which updates parameters that require grad. */
static void test_mlp_with_optimizer(void **state) {
    (void)state;
    train(0);
    train(1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_matches_pytorch),
        cmocka_unit_test(test_mlp_with_optimizer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
