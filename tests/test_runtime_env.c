/* ct_runtime_tune_env / ct_runtime_tune_and_reexec / ct_blas_info (Note [Runtime
 * environment] in src/core/build_info.c): a variable the user set is kept, what is set
 * names a kernel set better than the loaded one, CT_NO_REEXEC stops the re-exec. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* The kernel name at the end of "OpenBLAS, kernels NAME", or NULL without OpenBLAS. */
static const char *loaded_kernels(void) {
    const char *info = ct_blas_info();
    const char *prefix = "OpenBLAS, kernels ";
    return strncmp(info, prefix, strlen(prefix)) == 0 ? info + strlen(prefix) : NULL;
}

static void test_blas_info(void **state) {
    (void)state;
    const char *info = ct_blas_info();
    assert_non_null(info);
    assert_true(strcmp(info, "none") == 0 || (loaded_kernels() && loaded_kernels()[0] != '\0'));
    assert_non_null(strstr(ct_build_info(), info)); /* `ctorch info` shows the same */
}

static void test_user_setting_kept(void **state) {
    (void)state;
    assert_int_equal(setenv("OPENBLAS_CORETYPE", "Prescott", 1), 0);
    assert_int_equal(ct_runtime_tune_env(), 0);
    assert_string_equal(getenv("OPENBLAS_CORETYPE"), "Prescott");
}

static void test_choice_is_better_core(void **state) {
    (void)state;
    assert_int_equal(unsetenv("OPENBLAS_CORETYPE"), 0);
    int n = ct_runtime_tune_env();
    assert_true(n == 0 || n == 1);
    const char *set = getenv("OPENBLAS_CORETYPE");
    if (n == 0) {
        assert_null(set);
        return;
    }
    /* only with OpenBLAS, only to a named core, never to the one already loaded */
    assert_non_null(loaded_kernels());
    assert_non_null(set);
    assert_true(strcmp(set, "SkylakeX") == 0 || strcmp(set, "Cooperlake") == 0 || strcmp(set, "Haswell") == 0);
    assert_true(strcmp(set, loaded_kernels()) != 0);
    /* a second call finds it set and changes nothing */
    assert_int_equal(ct_runtime_tune_env(), 0);
}

static void test_no_reexec(void **state) {
    (void)state;
    unsetenv("OPENBLAS_CORETYPE");
    assert_int_equal(setenv("CT_NO_REEXEC", "1", 1), 0);
    char arg0[] = "test_runtime_env", *argv[] = {arg0, NULL};
    ct_runtime_tune_and_reexec(argv); /* returns: no exec with CT_NO_REEXEC=1 */
    ct_runtime_tune_and_reexec(NULL); /* and NULL is no crash */
    assert_null(getenv("OPENBLAS_CORETYPE"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blas_info),
        cmocka_unit_test(test_user_setting_kept),
        cmocka_unit_test(test_choice_is_better_core),
        cmocka_unit_test(test_no_reexec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
