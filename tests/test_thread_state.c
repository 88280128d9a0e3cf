/* Per-thread state (Note [Thread-local storage], Note [Object caches]): the tensor and
 * storage caches, the error message and the profiler's range stack live per thread
 * and are freed at thread exit. Threads that make, reuse and drop tensors must leave
 * the allocator's figures where they were, and one thread's state never leaks into
 * another's. (The leak check of the sanitizer build covers what exit frees.) */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "tensor_impl.h"
#include "testutil.h"

static const int64_t shape3[] = {3};

/* Works a thread's caches: tiny ops whose results die at once (the cached path), a scope
 * that holds many results, views, an error, inference mode and a profiler range. */
static void *worker(void *arg) {
    intptr_t id = (intptr_t)arg;
    intptr_t bad = 0;
    ct_tensor *a = ct_full(shape3, 1, ct_scalar_float((double)id), CT_DTYPE_FLOAT32, CT_CPU);
    ct_tensor *b = ct_ones(shape3, 1, CT_DTYPE_FLOAT32, CT_CPU);
    if (!a || !b)
        return (void *)1;
    for (int i = 0; i < 200; i++) {
        ct_tensor *r = ct_add(a, b);
        if (!r || ((float *)ct_tensor_data(r))[2] != (float)id + 1.0f)
            bad = 1;
        ct_release(r);
    }
    ct_scope_begin();
    for (int i = 0; i < 100; i++) {
        ct_tensor *v = ct_view(ct_mul(a, b), (int64_t[]){1, 3}, 2);
        if (!v || ct_tensor_dim(v) != 2)
            bad = 1;
    }
    ct_scope_end();
    /* an error is this thread's own */
    if (ct_add(a, NULL) != NULL || ct_last_status() != CT_ERROR_NULL_ARGUMENT)
        bad = 1;
    char want[64];
    snprintf(want, sizeof want, "reshape thread %d", (int)id);
    if (ct_reshape(a, (int64_t[]){2, 2}, 2) != NULL || !strstr(ct_last_error(), "[2, 2]"))
        bad = 1;
    ct_clear_error();
    if (ct_last_error()[0] != '\0')
        bad = 1;
    ct_inference_mode_begin();
    ct_tensor *inf = ct_neg(a);
    if (!inf || !ct_is_inference_mode_enabled())
        bad = 1;
    ct_release(inf);
    ct_inference_mode_end();
    if (ct_profiler_range_push(want) != CT_OK || ct_profiler_range_pop() != CT_OK)
        bad = 1;
    ct_profiler_range_push("left open at exit"); /* the stack is freed with the thread */
    ct_release(a);
    ct_release(b);
    return (void *)bad;
}

static void test_threads_leave_allocator_clean(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    int64_t active_before = ct_memory_stat(CT_CPU, "active.all.current");
    for (int round = 0; round < 3; round++) {
        pthread_t th[4];
        for (int i = 0; i < 4; i++)
            assert_int_equal(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)(i + 1)), 0);
        for (int i = 0; i < 4; i++) {
            void *r;
            pthread_join(th[i], &r);
            assert_null(r);
        }
        assert_int_equal(ct_memory_allocated(CT_CPU), before);
        assert_int_equal(ct_memory_stat(CT_CPU, "active.all.current"), active_before);
    }
    assert_int_equal(ct_last_status(), CT_OK); /* the workers' errors stayed theirs */
}

/* Tensors made on one thread and released on another join the releasing thread's cache;
 * reused objects must come back as fresh tensors (no stale grad, view or flags). */
typedef struct {
    ct_tensor *t[16];
} handoff;

static void *make_many(void *arg) {
    handoff *h = arg;
    ct_tensor *x = ct_ones(shape3, 1, CT_DTYPE_FLOAT32, CT_CPU);
    for (int i = 0; i < 16; i++) {
        h->t[i] = i % 2 ? ct_view(x, (int64_t[]){3, 1}, 2) : ct_clone(x);
        if (h->t[i] && i % 4 == 0)
            ct_tensor_set_requires_grad(h->t[i], true);
    }
    ct_release(x);
    return NULL;
}

static void test_cross_thread_release_and_reuse(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    handoff h;
    memset(&h, 0, sizeof h);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, make_many, &h), 0);
    pthread_join(th, NULL);
    for (int i = 0; i < 16; i++) {
        CT_ASSERT_OK(h.t[i]);
        ct_release(h.t[i]); /* into this thread's caches */
    }
    /* fresh tensors from the reused objects */
    for (int i = 0; i < 16; i++) {
        ct_tensor *t = ct_empty(shape3, 1, CT_DTYPE_FLOAT64, CT_CPU);
        CT_ASSERT_OK(t);
        assert_false(ct_tensor_requires_grad(t));
        assert_null(ct_tensor_grad(t));
        assert_false(t->is_view);
        assert_null(t->base);
        assert_null(t->grad_fn);
        assert_false(t->wrapped_number);
        assert_false(t->inference);
        assert_int_equal(t->output_nr, 0);
        assert_int_equal(ct_tensor_dim(t), 1);
        assert_int_equal(ct_tensor_size(t, 0), 3);
        assert_int_equal(ct_tensor_stride(t, 0), 1);
        assert_int_equal(ct_tensor_storage_offset(t), 0);
        assert_int_equal(ct_tensor_version(t), 0);
        assert_int_equal(ct_tensor_dtype(t), CT_DTYPE_FLOAT64);
        assert_int_equal(ct_tensor_storage_nbytes(t), 24);
        ct_release(t);
    }
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
}

/* Inference mode saves grad mode per level (a bit per level for the 64 innermost). */
static void test_inference_mode_restores_grad_mode(void **state) {
    (void)state;
    bool pattern[70];
    for (int i = 0; i < 70; i++) {
        pattern[i] = (i * 7) % 3 != 0;
        ct_set_grad_enabled(pattern[i]);
        ct_inference_mode_begin();
        assert_false(ct_is_grad_enabled());
    }
    /* levels past 64 do not save; the innermost 64 restore what they saw */
    for (int i = 69; i >= 0; i--) {
        ct_inference_mode_end();
        if (i < 64) {
            bool restored = ct_set_grad_enabled(true); /* returns the mode it replaces */
            ct_set_grad_enabled(restored);
            assert_int_equal(restored, pattern[i]);
        }
    }
    assert_false(ct_is_inference_mode_enabled());
    ct_set_grad_enabled(true);
    assert_true(ct_is_grad_enabled());
}

/* A thread's first error allocates its message; a long one is cut, not overrun. */
static void *long_error(void *arg) {
    (void)arg;
    char name[3000];
    memset(name, 'x', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    ct_error(CT_ERROR_VALUE, name, "%s", name);
    const char *m = ct_last_error();
    intptr_t bad = ct_last_status() != CT_ERROR_VALUE || strlen(m) != 1023 || m[0] != 'x';
    return (void *)bad;
}

static void test_error_message_per_thread(void **state) {
    (void)state;
    ct_clear_error();
    pthread_t th;
    void *r;
    assert_int_equal(pthread_create(&th, NULL, long_error, NULL), 0);
    pthread_join(th, &r);
    assert_null(r);
    assert_int_equal(ct_last_status(), CT_OK);
    assert_string_equal(ct_last_error(), "");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_leave_allocator_clean),
        cmocka_unit_test(test_cross_thread_release_and_reuse),
        cmocka_unit_test(test_inference_mode_restores_grad_mode),
        cmocka_unit_test(test_error_message_per_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
