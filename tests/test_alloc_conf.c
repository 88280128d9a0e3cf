/* Allocator configuration: CT_ALLOC_CONF from the environment, max_split_size_mb (oversize
 * blocks, release of cached oversize segments), roundup_power2_divisions, and errors.
 * Its own program, because the configuration is process-wide. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "alloc_fake.h"
#include "testutil.h"

#define MiB ((size_t)1024 * 1024)

static fake_device g_dev;
static ct_alloc_device_iface g_iface;

static int fake_setup(void **state) {
    (void)state;
    memset(&g_dev, 0, sizeof g_dev);
    g_iface = fake_iface(&g_dev);
    if (ct_alloc_set_device_interface(CT_DEVICE_CPU, &g_iface) != CT_OK)
        return -1;
    ct_reset_accumulated_memory_stats(CT_CPU);
    return 0;
}

static int fake_teardown(void **state) {
    (void)state;
    ct_empty_cache(CT_CPU);
    return ct_alloc_set_device_interface(CT_DEVICE_CPU, NULL) == CT_OK && g_dev.allocs == g_dev.frees ? 0 : -1;
}

static int64_t st(const char *key) { return ct_memory_stat(CT_CPU, key); }

static void test_env_conf_read(void **state) {
    (void)state;
    /* main() set CT_ALLOC_CONF before the first allocation */
    assert_int_equal(ct_alloc_conf_max_split_size(), 40 * MiB);
    assert_int_equal(st("max_split_size"), 40 * MiB);
    assert_int_equal(ct_alloc_conf_roundup_divisions(MiB), 1);
    assert_int_equal(ct_alloc_conf_roundup_divisions(300 * MiB), 1);
    assert_int_equal(ct_alloc_conf_roundup_divisions(600 * MiB), 2);
    assert_int_equal(ct_alloc_conf_roundup_divisions(2048 * MiB), 4);
    assert_int_equal(ct_alloc_conf_roundup_divisions((size_t)1 << 40), 4);
    /* 2 divisions between 512 MiB and 1 GiB: 600 MiB rounds to 768 MiB */
    assert_int_equal(ct_alloc_round_size(600 * MiB + 1), 768 * MiB);
    assert_int_equal(ct_alloc_round_size(300 * MiB + 1), 300 * MiB + 512);
}

static void test_max_split_size(void **state) {
    (void)state;
    char *a = ct_alloc(CT_CPU, 45 * MiB);
    /* oversize: its own 46 MiB segment, never split */
    assert_int_equal(st("reserved_bytes.all.current"), 46 * MiB);
    assert_int_equal(st("allocated_bytes.all.current"), 46 * MiB);
    assert_int_equal(st("oversize_allocations.current"), 1);
    assert_int_equal(st("oversize_segments.current"), 1);
    assert_int_equal(st("inactive_split.all.current"), 0);
    ct_free(CT_CPU, a);
    assert_int_equal(st("oversize_allocations.current"), 0);

    /* a request below max_split_size never takes the cached oversize block */
    char *b = ct_alloc(CT_CPU, 12 * MiB);
    assert_true(b < a || b >= a + 46 * MiB);
    assert_int_equal(g_dev.allocs, 2);
    /* an oversize request takes it when it wastes less than 20 MiB */
    char *d = ct_alloc(CT_CPU, 44 * MiB);
    assert_ptr_equal(d, a);
    assert_int_equal(g_dev.allocs, 2);
    ct_free(CT_CPU, d);
    /* ... but not when it would waste 20 MiB or more */
    char *e = ct_alloc(CT_CPU, 26 * MiB);
    assert_true(e != a);
    assert_int_equal(g_dev.allocs, 3);

    /* device full: the cached oversize segment is released first, without the full
     * release-everything retry */
    g_dev.limit = g_dev.used + 10 * MiB;
    char *f = ct_alloc(CT_CPU, 8 * MiB); /* needs a 20 MiB segment */
    assert_non_null(f);
    assert_int_equal(st("num_alloc_retries"), 0);
    assert_int_equal(st("oversize_segments.current"), 0);
    assert_int_equal(g_dev.frees, 1);
    ct_free(CT_CPU, b);
    ct_free(CT_CPU, e);
    ct_free(CT_CPU, f);
}

static void test_set_conf(void **state) {
    (void)state;
    assert_int_equal(ct_memory_set_alloc_conf("roundup_power2_divisions:4"), CT_OK);
    assert_int_equal(ct_alloc_round_size(1200), 1536);          /* not above 512 * 4 */
    assert_int_equal(ct_alloc_round_size(9000), 10240);         /* 8 KiB + 2 KiB steps */
    assert_int_equal(ct_alloc_round_size(4096), 4096);          /* powers of two stay */
    assert_int_equal(ct_alloc_round_size(1258291), 1310720);    /* 1.2 MiB -> 1.25 MiB */
    assert_int_equal(ct_memory_set_alloc_conf("roundup_power2_divisions:1"), CT_OK);
    assert_int_equal(ct_alloc_round_size(9000), 9216);
    assert_int_equal(ct_memory_set_alloc_conf(" max_non_split_rounding_mb:64, garbage_collection_threshold:0.5,"
                                              "expandable_segments:False,backend:native"),
                     CT_OK);

    assert_int_equal(ct_memory_set_alloc_conf("cpu_caching:False"), CT_OK);
    assert_false(ct_memory_caching(CT_CPU));
    assert_int_equal(ct_memory_set_alloc_conf("cpu_caching:True"), CT_OK);
    assert_true(ct_memory_caching(CT_CPU));
}

static void test_conf_errors(void **state) {
    (void)state;
    struct {
        const char *conf;
        const char *needle;
    } bad[] = {
        {"foo:1", "Unrecognized CachingAllocator option: foo"},
        {"max_split_size_mb:10", "max_split_size_mb too small, must be >= 20"},
        {"max_split_size_mb:abc", "whole number of MiB"},
        {"max_split_size_mb", "expected key:value"},
        {"roundup_power2_divisions:3", "power of 2"},
        {"roundup_power2_divisions:[300:2]", "intervals have to be power of 2"},
        {"roundup_power2_divisions:[256:3]", "divisions has to be power of 2"},
        {"roundup_power2_divisions:[256:2", "expected a number or a list"},
        {"garbage_collection_threshold:1.5", "too big"},
        {"garbage_collection_threshold:0", "too small"},
        {"garbage_collection_threshold:x", "expected a number in (0, 1)"},
        {"expandable_segments:maybe", "Expected True or False"},
        {"backend:cudaMallocAsync", "Unknown allocator backend"},
        {"max_split_size_mb:20,bogus:1", "bogus"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ct_clear_error();
        CT_ASSERT_ERR(ct_memory_set_alloc_conf(bad[i].conf) == CT_OK, CT_ERROR_VALUE, bad[i].needle);
    }
    /* a failed setting changes nothing, even its valid first half */
    assert_int_equal(ct_alloc_conf_max_split_size(), 40 * MiB);
    ct_clear_error();
    CT_ASSERT_ERR(ct_memory_set_alloc_conf(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "conf");
}

int main(void) {
    setenv("CT_ALLOC_CONF", "max_split_size_mb:40,roundup_power2_divisions:[256:1,512:2,>:4]", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_conf_read),
        cmocka_unit_test_setup_teardown(test_max_split_size, fake_setup, fake_teardown),
        cmocka_unit_test(test_set_conf),
        cmocka_unit_test(test_conf_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
