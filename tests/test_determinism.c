/* ct_use_deterministic_algorithms on the CPU: the switch and its getter, the error
 * that GPU kernels without a deterministic form raise (through the same function they
 * call), and CPU ops with atomic forms on the GPU (index_add, scatter_add,
 * scatter_reduce, index_put with accumulate, max_pool2d's backward) running unchanged
 * and bit-identical from run to run while it is on. */
#include <string.h>

#include "core/determinism.h"
#include "testutil.h"

static int restore(void **state) {
    (void)state;
    ct_use_deterministic_algorithms(false);
    return 0;
}

static void test_switch(void **state) {
    (void)state;
    assert_false(ct_are_deterministic_algorithms_enabled()); /* off by default */
    assert_int_equal(ct_alert_not_deterministic("index_add_cuda_"), CT_OK);
    ct_use_deterministic_algorithms(true);
    assert_true(ct_are_deterministic_algorithms_enabled());
    assert_int_equal(ct_alert_not_deterministic("index_add_cuda_"), CT_ERROR_RUNTIME);
    const char *msg = ct_last_error();
    assert_non_null(strstr(msg, "index_add_cuda_ does not have a deterministic implementation"));
    assert_non_null(strstr(msg, "ct_use_deterministic_algorithms(true)"));
    assert_int_equal(ct_alert_not_deterministic(NULL), CT_ERROR_RUNTIME); /* no crash without a name */
    ct_use_deterministic_algorithms(false);
    assert_false(ct_are_deterministic_algorithms_enabled());
    assert_int_equal(ct_alert_not_deterministic("index_add_cuda_"), CT_OK);
}

/* Runs the ops with atomic GPU forms twice on the same inputs. */
static void run_ops(ct_tensor **out, const ct_tensor *base, const ct_tensor *src, const ct_tensor *idx,
                    const ct_tensor *idx2) {
    out[0] = ct_index_add(base, 0, idx, src, ct_scalar_float(1.0));
    out[1] = ct_scatter_add(base, 0, idx2, src);
    out[2] = ct_scatter_reduce(base, 0, idx2, src, "mean", true);
    const ct_tensor *ind[1] = {idx};
    out[3] = ct_index_put(base, ind, 1, src, true);
    ct_tensor *x = ct_reshape(base, CT_SHAPE(1, 1, 8, 16)), *ix = NULL;
    ct_tensor *y = ct_max_pool2d(x, CT_INDEX(3, 3), CT_INDEX(1, 1), CT_INDEX(1, 1), CT_INDEX(1, 1), false, &ix);
    out[4] = ct_max_pool2d_backward(ct_ones_like(y, CT_DTYPE_UNDEFINED), x, ix);
}

static void test_cpu_ops_unchanged(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(3);
    ct_tensor *base = ct_rand(CT_SHAPE(8, 16), CT_F32, CT_CPU), *src = ct_rand(CT_SHAPE(12, 16), CT_F32, CT_CPU);
    int64_t ids[12] = {0, 3, 3, 3, 7, 1, 0, 0, 5, 5, 2, 3};
    ct_tensor *idx = ct_from_data(ids, CT_SHAPE(12), CT_I64);
    ct_tensor *idx2 = ct_expand(ct_reshape(idx, CT_SHAPE(12, 1)), CT_SHAPE(12, 16));
    ct_tensor *off[5], *on[5], *again[5];
    run_ops(off, base, src, idx, idx2);
    ct_use_deterministic_algorithms(true);
    run_ops(on, base, src, idx, idx2);
    run_ops(again, base, src, idx, idx2);
    ct_use_deterministic_algorithms(false);
    for (int i = 0; i < 5; i++) {
        bool eq1 = false, eq2 = false;
        if (!on[i])
            fail_msg("op %d failed in deterministic mode on the CPU: %s", i, ct_last_error());
        assert_int_equal(ct_equal(off[i], on[i], &eq1), CT_OK);
        assert_int_equal(ct_equal(on[i], again[i], &eq2), CT_OK);
        assert_true(eq1);
        assert_true(eq2);
    }
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_switch, restore),
        cmocka_unit_test_teardown(test_cpu_ops_unchanged, restore),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
