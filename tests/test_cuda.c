/* The CUDA backend's runtime on a GPU: devices, copies between devices and dtypes,
 * fills and factories, item, streams and events, pinned memory, allocator statistics
 * and the out-of-memory path. Skipped (exit code 77) without a GPU. */
#include <string.h>

#include "cuda_testutil.h"

#define CUDA0 CT_CUDA(0)

static const ct_dtype all_dtypes[] = {CT_BOOL, CT_U8,  CT_I8,  CT_I16, CT_I32, CT_I64, CT_U16,
                                      CT_U32,  CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64};
#define NDT ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

/* Byte-for-byte equality of a GPU tensor with a CPU one (same dtype and shape). */
static void assert_same_bytes(const ct_tensor *gpu, const ct_tensor *cpu, const char *what) {
    ct_scope_begin();
    ct_tensor *g = ct_contiguous(ct_to_device(gpu, CT_CPU));
    ct_tensor *c = ct_contiguous(cpu);
    CT_ASSERT_OK(g);
    CT_ASSERT_OK(c);
    assert_int_equal(ct_tensor_dtype(g), ct_tensor_dtype(c));
    assert_int_equal(ct_tensor_numel(g), ct_tensor_numel(c));
    size_t n = (size_t)ct_tensor_numel(c) * ct_tensor_element_size(c);
    if (n && memcmp(ct_tensor_data(g), ct_tensor_data(c), n) != 0) {
        size_t esz = ct_tensor_element_size(c);
        for (int64_t i = 0; i < ct_tensor_numel(c); i++)
            if (memcmp((char *)ct_tensor_data(g) + i * esz, (char *)ct_tensor_data(c) + i * esz, esz) != 0) {
                print_error("%s: bytes differ (%s) at element %lld: gpu %.17g, cpu %.17g\n", what,
                            ct_dtype_name(ct_tensor_dtype(c)), (long long)i, ct_test_at(g, i), ct_test_at(c, i));
                break;
            }
        fail();
    }
    ct_scope_end();
}

static void test_device_properties(void **state) {
    (void)state;
    ct_cuda_device_properties p;
    assert_int_equal(ct_cuda_get_device_properties(0, &p), CT_OK);
    assert_true(strlen(p.name) > 0);
    assert_true(p.major >= 1);
    assert_true(p.total_memory > 0);
    assert_true(p.multi_processor_count > 0);
    assert_int_equal(p.warp_size, 32);
    assert_int_equal(ct_cuda_set_device(0), CT_OK);
    assert_int_equal(ct_cuda_current_device(), 0);
    int64_t fr = 0, tot = 0;
    assert_int_equal(ct_cuda_mem_get_info(0, &fr, &tot), CT_OK);
    assert_true(fr > 0 && fr <= tot && tot == p.total_memory);
    assert_int_equal(ct_cuda_synchronize(0), CT_OK);
}

static void test_roundtrip_every_dtype(void **state) {
    (void)state;
    for (int i = 0; i < NDT; i++) {
        ct_scope_begin();
        ct_tensor *cpu = ct_test_values(CT_SHAPE(5, 7), all_dtypes[i], -20, 20, (uint64_t)i);
        ct_tensor *gpu = ct_to_device(cpu, CUDA0);
        CT_ASSERT_OK(gpu);
        assert_int_equal(ct_tensor_device(gpu).type, CT_DEVICE_CUDA);
        assert_true(ct_tensor_is_contiguous(gpu));
        assert_same_bytes(gpu, cpu, "roundtrip");
        /* A non-contiguous source (transposed, sliced) arrives in logical order. */
        ct_tensor *tr = ct_slice(ct_t(cpu), 0, 1, 7, 2);
        assert_same_bytes(ct_to_device(tr, CUDA0), ct_contiguous(tr), "strided source");
        /* Already there: the same tensor. */
        ct_tensor *same = ct_to_device(gpu, CUDA0);
        assert_true(ct_tensor_shares_storage(same, gpu));
        ct_scope_end();
    }
    ct_scope_begin();
    ct_tensor *z = ct_to_device(ct_scalar_tensor(ct_scalar_float(2.5), CT_F64, CT_CPU), CUDA0);
    assert_int_equal(ct_tensor_dim(z), 0);
    double v = 0;
    assert_int_equal(ct_item_double(z, &v), CT_OK);
    assert_true(v == 2.5);
    ct_tensor *e = ct_to_device(ct_empty(CT_SHAPE(0, 3), CT_F32, CT_CPU), CUDA0);
    CT_ASSERT_SHAPE(e, 0, 3);
    ct_tensor *m = ct_to_device(ct_ones(CT_SHAPE(2), CT_F32, CUDA0), CT_META);
    CT_ASSERT_SHAPE(m, 2);
    CT_ASSERT_ERR(ct_to_device(ct_empty(CT_SHAPE(2), CT_F32, CT_META), CUDA0) != NULL, CT_ERROR_DEVICE, "meta");
    ct_scope_end();
}

/* Casts on the GPU give the CPU's bits, special values included (Note [Casts]). */
static void test_casts_match_cpu(void **state) {
    (void)state;
    double specials[] = {0.0, -0.0, 1.5, -2.5, 300.0, -129.0, 65504.0, 70000.0, 1e10, -1e19, 3e38, 1e300,
                         NAN, INFINITY, -INFINITY, 255.9, 4294967296.5, 1.0 / 3.0, 9.3e18, 1.8e19};
    int ns = (int)(sizeof specials / sizeof specials[0]);
    for (int s = 0; s < NDT; s++) {
        for (int d = 0; d < NDT; d++) {
            ct_scope_begin();
            ct_tensor *src = ct_to_dtype(ct_from_data(specials, &(int64_t){ns}, 1, CT_F64), all_dtypes[s]);
            char what[64];
            snprintf(what, sizeof what, "cast %s -> %s", ct_dtype_name(all_dtypes[s]), ct_dtype_name(all_dtypes[d]));
            ct_tensor *want = ct_to_dtype(src, all_dtypes[d]);
            ct_tensor *got = ct_to_dtype(ct_to_device(src, CUDA0), all_dtypes[d]);
            CT_ASSERT_OK(got);
            assert_same_bytes(got, want, what);
            /* The same through copy_ into a strided destination. */
            ct_tensor *dst = ct_select(ct_empty(CT_SHAPE(ns, 2), all_dtypes[d], CUDA0), 1, 1);
            CT_ASSERT_OK(ct_copy_(dst, ct_to_device(src, CUDA0)));
            assert_same_bytes(dst, want, "copy_ cast");
            ct_scope_end();
        }
    }
}

static void test_copy_across_devices(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *cpu = ct_test_values(CT_SHAPE(4), CT_F32, -5, 5, 7);
    /* CPU -> CUDA with broadcasting and a dtype change. */
    ct_tensor *dst = ct_zeros(CT_SHAPE(3, 4), CT_F64, CUDA0);
    CT_ASSERT_OK(ct_copy_(dst, cpu));
    ct_tensor *want = ct_to_dtype(ct_expand(cpu, CT_SHAPE(3, 4)), CT_F64);
    assert_same_bytes(dst, ct_contiguous(want), "CPU to CUDA copy_");
    /* CUDA -> CPU into a transposed destination. */
    ct_tensor *host = ct_zeros(CT_SHAPE(4, 3), CT_F32, CT_CPU);
    CT_ASSERT_OK(ct_copy_(ct_t(host), dst));
    CT_ASSERT_CLOSE(ct_t(host), ct_to_dtype(want, CT_F32), 0, 0, "CUDA to CPU copy_");
    /* Overlapping source and destination on the GPU. */
    ct_tensor *g = ct_to_device(ct_test_values(CT_SHAPE(6), CT_I32, 0, 100, 3), CUDA0);
    ct_tensor *ref = ct_clone(ct_to_device(g, CT_CPU));
    CT_ASSERT_OK(ct_copy_(ct_slice(g, 0, 1, 6, 1), ct_slice(g, 0, 0, 5, 1)));
    ct_tensor *ref2 = ct_clone(ref);
    CT_ASSERT_OK(ct_copy_(ct_slice(ref2, 0, 1, 6, 1), ct_slice(ref, 0, 0, 5, 1)));
    assert_same_bytes(g, ref2, "overlapping copy_");
    CT_ASSERT_ERR(ct_copy_(dst, ct_ones(CT_SHAPE(5), CT_F32, CT_CPU)) != NULL, CT_ERROR_VALUE, "broadcast");
    CT_ASSERT_ERR(ct_copy_(dst, ct_empty(CT_SHAPE(4), CT_F32, CT_META)) != NULL, CT_ERROR_DEVICE, "meta");
    ct_scope_end();
}

static void test_clone_contiguous_fill(void **state) {
    (void)state;
    for (int i = 0; i < NDT; i++) {
        ct_dtype dt = all_dtypes[i];
        ct_scope_begin();
        ct_tensor *cpu = ct_test_values(CT_SHAPE(6, 5), dt, 0, 9, 11u + (uint64_t)i);
        ct_tensor *gpu = ct_to_device(cpu, CUDA0);
        ct_tensor *tg = ct_t(gpu), *tc = ct_t(cpu);
        ct_tensor *cg = ct_contiguous(tg);
        assert_true(ct_tensor_is_contiguous(cg));
        assert_same_bytes(cg, ct_contiguous(tc), "contiguous");
        assert_same_bytes(ct_clone(tg), ct_clone(tc), "clone");
        /* fill_ on a strided view, zero_ on the whole. */
        CT_ASSERT_OK(ct_fill_(ct_slice(tg, 1, 0, 6, 2), ct_scalar_float(3.0)));
        CT_ASSERT_OK(ct_fill_(ct_slice(tc, 1, 0, 6, 2), ct_scalar_float(3.0)));
        assert_same_bytes(gpu, cpu, "fill_ strided");
        CT_ASSERT_OK(ct_zero_(gpu));
        assert_same_bytes(gpu, ct_zeros(CT_SHAPE(6, 5), dt, CT_CPU), "zero_");
        assert_same_bytes(ct_ones(CT_SHAPE(3), dt, CUDA0), ct_ones(CT_SHAPE(3), dt, CT_CPU), "ones");
        assert_same_bytes(ct_full(CT_SHAPE(2, 2), ct_scalar_int(7), dt, CUDA0),
                          ct_full(CT_SHAPE(2, 2), ct_scalar_int(7), dt, CT_CPU), "full");
        ct_tensor *em = ct_empty(CT_SHAPE(3, 3), dt, CUDA0);
        CT_ASSERT_SHAPE(em, 3, 3);
        ct_scope_end();
    }
}

/* Strided copies whose rows are dense move words of up to 16 bytes (Note [Copy paths]
 * in src/cuda/copy.cu): a (B, T, H, D) -> (B, H, T, D) transpose made contiguous, for
 * row lengths that allow 16-, 8-, 4-byte words or none, and from a view at an odd
 * element offset (misaligned: element-wise). */
static void test_transpose_copies(void **state) {
    (void)state;
    const int64_t ds[] = {64, 8, 4, 6, 3, 1};
    for (int i = 0; i < NDT; i++)
        for (int j = 0; j < (int)(sizeof ds / sizeof ds[0]); j++)
            for (int off = 0; off < 2; off++) {
                ct_scope_begin();
                ct_dtype dt = all_dtypes[i];
                ct_tensor *cpu = ct_test_values(CT_SHAPE(2 * 5 * 3 * ds[j] + off), dt, 0, 100, 5u + (uint64_t)j);
                ct_tensor *gpu = ct_to_device(cpu, CUDA0);
                int64_t n = 2 * 5 * 3 * ds[j];
                ct_tensor *vc = ct_transpose(ct_view(ct_narrow(cpu, 0, off, n), CT_SHAPE(2, 5, 3, ds[j])), 1, 2);
                ct_tensor *vg = ct_transpose(ct_view(ct_narrow(gpu, 0, off, n), CT_SHAPE(2, 5, 3, ds[j])), 1, 2);
                char what[80];
                snprintf(what, sizeof what, "transpose copy %s d=%lld offset %d", ct_dtype_name(dt), (long long)ds[j],
                         off);
                assert_same_bytes(ct_contiguous(vg), ct_contiguous(vc), what);
                /* and into a strided destination: the transpose written back */
                ct_tensor *dg = ct_zeros(CT_SHAPE(2, 5, 3, ds[j]), dt, CUDA0);
                ct_tensor *dc = ct_zeros(CT_SHAPE(2, 5, 3, ds[j]), dt, CT_CPU);
                CT_ASSERT_OK(ct_copy_(ct_transpose(dg, 1, 2), ct_contiguous(vg)));
                CT_ASSERT_OK(ct_copy_(ct_transpose(dc, 1, 2), ct_contiguous(vc)));
                assert_same_bytes(dg, dc, what);
                ct_scope_end();
            }
}

static void test_item_and_print(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *g = ct_full(CT_SHAPE(1), ct_scalar_int(-42), CT_I64, CUDA0);
    int64_t iv = 0;
    assert_int_equal(ct_item_int64(g, &iv), CT_OK);
    assert_int_equal(iv, -42);
    double dv = 0;
    assert_int_equal(ct_item_double(ct_full(NULL, 0, ct_scalar_float(0.25), CT_BF16, CUDA0), &dv), CT_OK);
    assert_true(dv == 0.25);
    CT_ASSERT_ERR(ct_item_double(ct_ones(CT_SHAPE(2), CT_F32, CUDA0), &dv) == CT_OK, CT_ERROR_VALUE, "2 elements");
    char buf[256];
    assert_true(ct_to_string(ct_ones(CT_SHAPE(2), CT_F32, CUDA0), buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, "device='cuda:0'"));
    assert_non_null(strstr(buf, "1."));
    ct_scope_end();
}

static void test_factories_on_cuda(void **state) {
    (void)state;
    ct_scope_begin();
    assert_same_bytes(ct_arange(ct_scalar_int(0), ct_scalar_int(10), ct_scalar_int(3), CT_I64, CUDA0),
                      ct_arange(ct_scalar_int(0), ct_scalar_int(10), ct_scalar_int(3), CT_I64, CT_CPU), "arange");
    assert_same_bytes(ct_linspace(-1, 1, 17, CT_F32, CUDA0), ct_linspace(-1, 1, 17, CT_F32, CT_CPU), "linspace");
    assert_same_bytes(ct_eye(3, 4, CT_F64, CUDA0), ct_eye(3, 4, CT_F64, CT_CPU), "eye");
    CT_ASSERT_ERR(ct_eye(-1, 2, CT_F32, CUDA0) != NULL, CT_ERROR_VALUE, "n must be");
    ct_scope_end();
}

static void test_streams_and_events(void **state) {
    (void)state;
    ct_cuda_stream *s = NULL;
    assert_int_equal(ct_cuda_stream_create(0, 0, &s), CT_OK);
    assert_non_null(s);
    assert_true(ct_cuda_stream_id(s) != 0);
    ct_cuda_event *start = NULL, *end = NULL, *done = NULL;
    assert_int_equal(ct_cuda_event_create(true, &start), CT_OK);
    assert_int_equal(ct_cuda_event_create(true, &end), CT_OK);
    assert_int_equal(ct_cuda_event_create(false, &done), CT_OK);

    ct_scope_begin();
    ct_tensor *a = ct_to_device(ct_test_values(CT_SHAPE(1 << 20), CT_F32, -1, 1, 5), CUDA0);
    assert_int_equal(ct_cuda_synchronize(0), CT_OK);
    /* Work on the side stream, ordered after the default stream by an event. */
    assert_int_equal(ct_cuda_event_record(done, NULL), CT_OK);
    assert_int_equal(ct_cuda_stream_wait_event(s, done), CT_OK);
    assert_int_equal(ct_cuda_set_stream(0, s), CT_OK);
    assert_ptr_equal(ct_cuda_current_stream(0), s);
    assert_int_equal(ct_cuda_event_record(start, s), CT_OK);
    ct_tensor *b = a;
    for (int i = 0; i < 20; i++)
        b = ct_add(b, a);
    assert_int_equal(ct_cuda_record_stream(a, s), CT_OK);
    assert_int_equal(ct_cuda_event_record(end, s), CT_OK);
    assert_int_equal(ct_cuda_event_synchronize(end), CT_OK);
    assert_true(ct_cuda_event_query(end));
    assert_true(ct_cuda_stream_query(s));
    float ms = -1;
    assert_int_equal(ct_cuda_event_elapsed_ms(start, end, &ms), CT_OK);
    assert_true(ms >= 0);
    CT_ASSERT_CLOSE(b, ct_mul_scalar(ct_to_device(a, CT_CPU), ct_scalar_int(21)), 1e-5, 1e-5, "work on a stream");
    assert_int_equal(ct_cuda_stream_synchronize(s), CT_OK);
    assert_int_equal(ct_cuda_set_stream(0, NULL), CT_OK);
    assert_null(ct_cuda_current_stream(0));
    ct_scope_end();

    /* A stream of another device is refused. */
    if (ct_cuda_device_count() > 1) {
        CT_ASSERT_ERR(ct_cuda_set_stream(1, s) == CT_OK, CT_ERROR_DEVICE, "belongs to cuda:0");
    }
    ct_cuda_event_destroy(start);
    ct_cuda_event_destroy(end);
    ct_cuda_event_destroy(done);
    /* Destroying the current stream falls back to the default one. */
    assert_int_equal(ct_cuda_set_stream(0, s), CT_OK);
    assert_int_equal(ct_cuda_stream_destroy(s), CT_OK);
    assert_null(ct_cuda_current_stream(0));
}

static void test_pinned_memory(void **state) {
    (void)state;
    void *p = NULL;
    assert_int_equal(ct_cuda_host_alloc(1 << 16, &p), CT_OK);
    assert_non_null(p);
    memset(p, 0x5a, 1 << 16);
    ct_cuda_host_free(p);
    ct_scope_begin();
    ct_tensor *cpu = ct_test_values(CT_SHAPE(300), CT_F32, -3, 3, 9);
    ct_tensor *pinned = ct_pin_memory(ct_t(ct_view(cpu, CT_SHAPE(20, 15))));
    CT_ASSERT_OK(pinned);
    assert_int_equal(ct_tensor_device(pinned).type, CT_DEVICE_CPU);
    assert_same_bytes(ct_to_device(pinned, CUDA0), ct_contiguous(ct_t(ct_view(cpu, CT_SHAPE(20, 15)))), "pinned");
    ct_scope_end();
}

static void test_allocator_stats(void **state) {
    (void)state;
    assert_int_equal(ct_cuda_synchronize(0), CT_OK);
    /* One allocation first: the allocator retires blocks whose stream uses (earlier
     * tests' record_stream) have completed when it next allocates. */
    ct_scope_begin();
    CT_ASSERT_OK(ct_empty(CT_SHAPE(16), CT_F32, CUDA0));
    ct_scope_end();
    int64_t before = ct_memory_allocated(CUDA0);
    ct_reset_peak_memory_stats(CUDA0);
    ct_scope_begin();
    ct_tensor *t = ct_empty(CT_SHAPE(1 << 20), CT_F32, CUDA0);
    CT_ASSERT_OK(t);
    assert_true(ct_memory_allocated(CUDA0) >= before + (4 << 20));
    assert_true(ct_memory_reserved(CUDA0) >= ct_memory_allocated(CUDA0));
    assert_true(ct_max_memory_allocated(CUDA0) >= before + (4 << 20));
    ct_scope_end();
    assert_int_equal(ct_memory_allocated(CUDA0), before);
    assert_true(ct_max_memory_allocated(CUDA0) >= before + (4 << 20));
    ct_empty_cache(CUDA0);
    assert_true(ct_memory_reserved(CUDA0) >= ct_memory_allocated(CUDA0));
    /* Memory is reused after a free: many same-sized tensors in a loop stay flat. */
    for (int i = 0; i < 50; i++) {
        ct_scope_begin();
        CT_ASSERT_OK(ct_ones(CT_SHAPE(1 << 18), CT_F32, CUDA0));
        ct_scope_end();
    }
    assert_int_equal(ct_memory_allocated(CUDA0), before);
}

static void test_out_of_memory(void **state) {
    (void)state;
    ct_cuda_device_properties p;
    assert_int_equal(ct_cuda_get_device_properties(0, &p), CT_OK);
    int64_t n = p.total_memory / 2; /* float32: twice the device's memory */
    ct_scope_begin();
    CT_ASSERT_ERR(ct_empty(&n, 1, CT_F32, CUDA0) != NULL, CT_ERROR_OUT_OF_MEMORY, "Tried to allocate");
    /* The device still works afterwards. */
    ct_tensor *ok = ct_ones(CT_SHAPE(4), CT_F32, CUDA0);
    CT_ASSERT_OK(ok);
    double v = 0;
    assert_int_equal(ct_item_double(ct_dot(ok, ok), &v), CT_OK);
    assert_true(v == 4.0);
    ct_scope_end();
    assert_int_equal(ct_cuda_synchronize(0), CT_OK);
}

static void test_device_mismatch_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *g = ct_ones(CT_SHAPE(3), CT_F32, CUDA0);
    ct_tensor *c = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_add(g, c) != NULL, CT_ERROR_DEVICE, "Expected all tensors to be on the same device");
    CT_ASSERT_ERR(ct_mul_out(c, c, g) != NULL, CT_ERROR_DEVICE, NULL);
    CT_ASSERT_ERR(ct_mm(ct_view(g, CT_SHAPE(1, 3)), ct_view(c, CT_SHAPE(3, 1))) != NULL, CT_ERROR_DEVICE,
                  "same device");
    /* A CPU scalar (0-d) joins a CUDA operation, as in PyTorch. */
    ct_tensor *s = ct_scalar_tensor(ct_scalar_float(2.0), CT_F32, CT_CPU);
    ct_tensor *r = ct_mul(g, s);
    CT_ASSERT_OK(r);
    assert_int_equal(ct_tensor_device(r).type, CT_DEVICE_CUDA);
    CT_ASSERT_CLOSE(r, ct_full(CT_SHAPE(3), ct_scalar_float(2.0), CT_F32, CT_CPU), 0, 0, "CPU scalar");
    ct_scope_end();
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_properties),
        cmocka_unit_test(test_roundtrip_every_dtype),
        cmocka_unit_test(test_casts_match_cpu),
        cmocka_unit_test(test_copy_across_devices),
        cmocka_unit_test(test_clone_contiguous_fill),
        cmocka_unit_test(test_transpose_copies),
        cmocka_unit_test(test_item_and_print),
        cmocka_unit_test(test_factories_on_cuda),
        cmocka_unit_test(test_streams_and_events),
        cmocka_unit_test(test_pinned_memory),
        cmocka_unit_test(test_allocator_stats),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_device_mismatch_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
