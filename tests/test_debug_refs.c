/* The ownership debug mode (Note [Ownership debug mode], src/core/debug_refs.c): each
 * mistake is an error naming the mistake and where the tensor was released. The
 * functions that commit a mistake are not static, so that the program (linked with
 * -rdynamic, tests/debug_refs.cmake) shows their names in the sites. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static int setup(void **state) {
    (void)state;
    ct_debug_set_refs(true);
    ct_clear_error();
    return 0;
}

/* The first line a report writes, read back from a temporary file. */
static int64_t report_live(char *text, size_t cap) {
    FILE *f = tmpfile();
    assert_non_null(f);
    int64_t n = ct_debug_report_live(f);
    rewind(f);
    size_t len = fread(text, 1, cap - 1, f);
    text[len] = '\0';
    fclose(f);
    return n;
}

/* the empty asm keeps the call out of tail position, so the function has a frame */
__attribute__((noinline)) void release_twice_site(ct_tensor *t) {
    ct_release(t);
    __asm__ volatile("");
}
__attribute__((noinline)) void release_first_site(ct_tensor *t) {
    ct_release(t);
    __asm__ volatile("");
}

static void test_double_release(void **state) {
    (void)state;
    ct_tensor *t = ct_ones(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    CT_ASSERT_OK(t);
    release_first_site(t);
    assert_int_equal(ct_last_status(), CT_OK);
    release_twice_site(t); /* reported, and nothing else happens */
    assert_null(strchr(ct_last_error(), '\n')); /* one line */
    assert_non_null(strstr(ct_last_error(), "already released by ct_release at ct_release < release_first_site"));
    CT_ASSERT_ERR(0, CT_ERROR_RUNTIME, "double release of a [2, 3] float32 tensor at ct_release < release_twice_site");
}

static void test_use_after_release(void **state) {
    (void)state;
    ct_tensor *a = ct_ones(CT_SHAPE(4), CT_F32, CT_CPU);
    ct_tensor *b = ct_ones(CT_SHAPE(4), CT_F32, CT_CPU);
    CT_ASSERT_OK(a);
    release_first_site(b);
    /* a 4-element add would take the fast lane: the poisoned tensor must not */
    CT_ASSERT_ERR(ct_add(a, b) != NULL, CT_ERROR_RUNTIME,
                  "add: use after release: argument 1 is a [4] float32 tensor that was released by ct_release at "
                  "ct_release < release_first_site");
    CT_ASSERT_ERR(ct_sum(b, NULL, 0, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_RUNTIME, "sum: use after release: argument 0");
    CT_ASSERT_ERR(ct_add_(b, a) != NULL, CT_ERROR_RUNTIME, "add: use after release: argument 0");
    /* an out= argument is retained first: that retain fails, naming the release site */
    CT_ASSERT_ERR(ct_mul_out(a, a, b) != NULL, CT_ERROR_RUNTIME, "retain after release of a [4] float32 tensor");
    const ct_tensor *list[2] = {a, b};
    CT_ASSERT_ERR(ct_cat(list, 2, 0) != NULL, CT_ERROR_RUNTIME, "cat: use after release: list entry 1");
    CT_ASSERT_ERR(ct_retain(b) != NULL, CT_ERROR_RUNTIME, "retain after release");
    CT_ASSERT_ERR(ct_keep(b) != NULL, CT_ERROR_RUNTIME, "keep after release");
    ct_release(a);
}

__attribute__((noinline)) ct_tensor *make_in_scope(void) {
    ct_scope_begin();
    ct_tensor *t = ct_full(CT_SHAPE(3), ct_scalar_float(1000.0), CT_F32, CT_CPU);
    ct_scope_end(); /* t was not kept: it dies here */
    return t;
}

void test_use_after_scope_end(void **state) {
    (void)state;
    ct_tensor *t = make_in_scope();
    assert_non_null(t);
    CT_ASSERT_ERR(ct_mul(t, t) != NULL, CT_ERROR_RUNTIME,
                  "mul: use after its scope ended: argument 0 is a [3] float32 tensor that was released by "
                  "ct_scope_end at ct_scope_end < make_in_scope");
    /* releasing it now is the double release of the crash in the issue */
    ct_release(t);
    assert_non_null(strstr(ct_last_error(), "already released by ct_scope_end at ct_scope_end < make_in_scope"));
    CT_ASSERT_ERR(0, CT_ERROR_RUNTIME, "double release of a [3] float32 tensor at ct_release < test_use_after_scope_end");
}

static void test_views_and_autograd_die_cleanly(void **state) {
    (void)state;
    ct_tensor *w = ct_tensor_set_requires_grad(ct_ones(CT_SHAPE(2, 2), CT_F64, CT_CPU), true);
    CT_ASSERT_OK(w);
    ct_scope_begin();
    ct_tensor *v = ct_transpose(w, 0, 1);
    ct_tensor *loss = ct_sum(ct_mul(v, v), NULL, 0, false, CT_DTYPE_UNDEFINED);
    CT_ASSERT_OK(loss);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    double g;
    assert_int_equal(ct_tensor_get(ct_tensor_grad(w), CT_INDEX(0, 1), &g), CT_OK);
    assert_true(g == 2.0);
    ct_scope_end();
    ct_release(w); /* the view died first; its base and gradient go now */
    assert_int_equal(ct_last_status(), CT_OK);
    CT_ASSERT_ERR(ct_neg(v) != NULL, CT_ERROR_RUNTIME, "use after its scope ended");
}

static void test_live_listing(void **state) {
    (void)state;
    char text[8192];
    int64_t before = report_live(text, sizeof text);
    ct_tensor *a = ct_ones(CT_SHAPE(5), CT_F32, CT_CPU);
    ct_tensor *leaked = ct_add(a, a);
    CT_ASSERT_OK(leaked);
    assert_int_equal(report_live(text, sizeof text), before + 2);
    assert_non_null(strstr(text, "tensors still alive:"));
    assert_non_null(strstr(text, "[5] float32 tensor made by add at"));
    ct_release(leaked);
    ct_release(a);
    assert_int_equal(report_live(text, sizeof text), before);
    assert_int_equal(ct_debug_report_live(NULL), before); /* NULL: stderr */
}

void test_scope_end_without_scope(void **state) {
    (void)state;
    int depth = ct_scope_depth();
    for (int i = 0; i < 2; i++) { /* an error with the mode on or off: it is API misuse */
        ct_debug_set_refs(i == 0);
        while (ct_scope_depth() > 0)
            ct_scope_end();
        ct_clear_error();
        ct_scope_end();
        CT_ASSERT_ERR(0, CT_ERROR_RUNTIME, "scope_end: ct_scope_end with no open scope (more ends than "
                                           "ct_scope_begin calls) at ct_scope_end < test_scope_end_without_scope");
        ct_clear_error();
    }
    assert_int_equal(depth, 0);
    ct_debug_set_refs(true);
}

static void test_off_recycles(void **state) {
    (void)state;
    ct_debug_set_refs(false);
    assert_false(ct_debug_refs_enabled());
    for (int i = 0; i < 100; i++) {
        ct_tensor *t = ct_ones(CT_SHAPE(2), CT_F32, CT_CPU);
        CT_ASSERT_OK(t);
        ct_release(t);
    }
    assert_int_equal(ct_last_status(), CT_OK);
    ct_debug_set_refs(true);
    assert_true(ct_debug_refs_enabled());
}

/* With an argument, the program leaks one tensor and exits: tests/debug_refs.cmake runs
 * it under CT_DEBUG=refs and checks the listing at exit. */
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "leak") == 0) {
        ct_tensor *a = ct_ones(CT_SHAPE(2), CT_F32, CT_CPU);
        ct_tensor *b = ct_mul(a, a);
        ct_release(a);
        return b ? 0 : 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_double_release, setup),
        cmocka_unit_test_setup(test_use_after_release, setup),
        cmocka_unit_test_setup(test_use_after_scope_end, setup),
        cmocka_unit_test_setup(test_views_and_autograd_die_cleanly, setup),
        cmocka_unit_test_setup(test_live_listing, setup),
        cmocka_unit_test_setup(test_scope_end_without_scope, setup),
        cmocka_unit_test_setup(test_off_recycles, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
