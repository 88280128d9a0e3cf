/* The CUDA runtime API on any machine: without a GPU (or in a build without CUDA)
 * every entry point fails cleanly with a device error; with one, bad arguments are
 * refused. Runs everywhere, never skips. */
#include <string.h>

#include "testutil.h"

static void test_availability_consistent(void **state) {
    (void)state;
    int n = ct_cuda_device_count();
    assert_true(n >= 0);
    assert_int_equal(ct_cuda_is_available(), n > 0);
    /* Asking twice gives the same answer (start-up runs once). */
    assert_int_equal(ct_cuda_device_count(), n);
}

static void test_without_gpu_everything_fails_cleanly(void **state) {
    (void)state;
    if (ct_cuda_is_available())
        skip();
    ct_cuda_stream *s = (ct_cuda_stream *)&s;
    CT_ASSERT_ERR(ct_cuda_stream_create(0, 0, &s) == CT_OK, CT_ERROR_DEVICE, NULL);
    assert_null(s);
    ct_cuda_event *e = (ct_cuda_event *)&e;
    CT_ASSERT_ERR(ct_cuda_event_create(true, &e) == CT_OK, CT_ERROR_DEVICE, NULL);
    assert_null(e);
    void *p = &p;
    CT_ASSERT_ERR(ct_cuda_host_alloc(16, &p) == CT_OK, CT_ERROR_DEVICE, NULL);
    assert_null(p);
    ct_cuda_device_properties props;
    CT_ASSERT_ERR(ct_cuda_get_device_properties(0, &props) == CT_OK, CT_ERROR_DEVICE, NULL);
    CT_ASSERT_ERR(ct_cuda_set_device(0) == CT_OK, CT_ERROR_DEVICE, NULL);
    CT_ASSERT_ERR(ct_cuda_synchronize(0) == CT_OK, CT_ERROR_DEVICE, NULL);
    CT_ASSERT_ERR(ct_cuda_current_device() >= 0, CT_ERROR_DEVICE, NULL);
    CT_ASSERT_ERR(ct_cuda_set_stream(0, NULL) == CT_OK, CT_ERROR_DEVICE, NULL);
    int64_t fr, tot;
    CT_ASSERT_ERR(ct_cuda_mem_get_info(0, &fr, &tot) == CT_OK, CT_ERROR_DEVICE, NULL);
    CT_ASSERT_ERR(ct_empty(CT_SHAPE(4), CT_F32, CT_CUDA(0)) != NULL, CT_ERROR_DEVICE, "CUDA");
    CT_ASSERT_ERR(ct_rand(CT_SHAPE(4), CT_F32, CT_CUDA(0)) != NULL, CT_ERROR_DEVICE, "CUDA");
    ct_scope_begin();
    ct_tensor *t = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_to_device(t, CT_CUDA(0)) != NULL, CT_ERROR_DEVICE, "CUDA");
    CT_ASSERT_ERR(ct_pin_memory(t) != NULL, CT_ERROR_DEVICE, NULL);
    CT_ASSERT_ERR(ct_cuda_record_stream(t, NULL) == CT_OK, CT_ERROR_DEVICE, NULL);
    ct_scope_end();
    /* Handles that cannot exist are ignored. */
    assert_int_equal(ct_cuda_stream_destroy(NULL), CT_OK);
    ct_cuda_event_destroy(NULL);
    ct_cuda_host_free(NULL);
    assert_null(ct_cuda_current_stream(0));
    assert_int_equal(ct_cuda_stream_id(NULL), 0);
}

static void test_bad_arguments_with_gpu(void **state) {
    (void)state;
    if (!ct_cuda_is_available())
        skip();
    int n = ct_cuda_device_count();
    CT_ASSERT_ERR(ct_cuda_get_device_properties(0, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    ct_cuda_device_properties props;
    CT_ASSERT_ERR(ct_cuda_get_device_properties(n, &props) == CT_OK, CT_ERROR_DEVICE, "invalid device ordinal");
    CT_ASSERT_ERR(ct_cuda_get_device_properties(-1, &props) == CT_OK, CT_ERROR_DEVICE, "invalid device ordinal");
    CT_ASSERT_ERR(ct_cuda_set_device(n) == CT_OK, CT_ERROR_DEVICE, "invalid device ordinal");
    CT_ASSERT_ERR(ct_cuda_stream_create(0, 0, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    ct_cuda_stream *s = NULL;
    CT_ASSERT_ERR(ct_cuda_stream_create(n, 0, &s) == CT_OK, CT_ERROR_DEVICE, NULL);
    CT_ASSERT_ERR(ct_cuda_event_create(false, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_cuda_event_record(NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_cuda_event_synchronize(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_cuda_stream_wait_event(NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    float ms;
    CT_ASSERT_ERR(ct_cuda_event_elapsed_ms(NULL, NULL, &ms) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    ct_cuda_event *a = NULL, *b = NULL;
    assert_int_equal(ct_cuda_event_create(false, &a), CT_OK);
    assert_int_equal(ct_cuda_event_create(false, &b), CT_OK);
    assert_int_equal(ct_cuda_event_record(a, NULL), CT_OK);
    assert_int_equal(ct_cuda_event_record(b, NULL), CT_OK);
    CT_ASSERT_ERR(ct_cuda_event_elapsed_ms(a, b, &ms) == CT_OK, CT_ERROR_VALUE, "enable_timing");
    ct_cuda_event_destroy(a);
    ct_cuda_event_destroy(b);
    CT_ASSERT_ERR(ct_cuda_host_alloc(8, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_cuda_mem_get_info(0, NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_cuda_set_stream(n, NULL) == CT_OK, CT_ERROR_DEVICE, NULL);
    CT_ASSERT_ERR(ct_cuda_record_stream(NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    ct_scope_begin();
    ct_tensor *cpu = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_cuda_record_stream(cpu, NULL) == CT_OK, CT_ERROR_DEVICE, "CUDA tensor");
    ct_tensor *gpu = ct_to_device(cpu, CT_CUDA(0));
    CT_ASSERT_OK(gpu);
    CT_ASSERT_ERR(ct_pin_memory(gpu) != NULL, CT_ERROR_DEVICE, "only dense CPU tensors can be pinned");
    CT_ASSERT_ERR(ct_pin_memory(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_empty(CT_SHAPE(2), CT_F32, CT_CUDA(n)) != NULL, CT_ERROR_DEVICE, "invalid device ordinal");
    ct_scope_end();
}

static void test_matmul_precision(void **state) {
    (void)state;
    assert_string_equal(ct_get_float32_matmul_precision(), "highest");
    assert_int_equal(ct_set_float32_matmul_precision("high"), CT_OK);
    assert_string_equal(ct_get_float32_matmul_precision(), "high");
    assert_int_equal(ct_set_float32_matmul_precision("medium"), CT_OK);
    assert_string_equal(ct_get_float32_matmul_precision(), "medium");
    CT_ASSERT_ERR(ct_set_float32_matmul_precision("fast") == CT_OK, CT_ERROR_VALUE, "Invalid precision");
    assert_string_equal(ct_get_float32_matmul_precision(), "medium"); /* unchanged on error */
    CT_ASSERT_ERR(ct_set_float32_matmul_precision(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    assert_int_equal(ct_set_float32_matmul_precision("highest"), CT_OK);
    assert_string_equal(ct_get_float32_matmul_precision(), "highest");
}

static void test_cpu_work_unaffected(void **state) {
    (void)state;
    /* Asking about CUDA first must not disturb CPU tensors (lazy start-up). */
    (void)ct_cuda_device_count();
    ct_scope_begin();
    ct_tensor *a = ct_add(ct_ones(CT_SHAPE(2, 2), CT_F32, CT_CPU), ct_ones(CT_SHAPE(2), CT_F32, CT_CPU));
    CT_ASSERT_OK(a);
    assert_true(ct_test_at(a, 3) == 2.0);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_availability_consistent),
        cmocka_unit_test(test_without_gpu_everything_fails_cleanly),
        cmocka_unit_test(test_bad_arguments_with_gpu),
        cmocka_unit_test(test_matmul_precision),
        cmocka_unit_test(test_cpu_work_unaffected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
