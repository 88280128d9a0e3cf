/* The caching allocator: rounding, splitting, merging, streams, out of memory, stats
 * invariants, and tensors going through it. Hand-computed cases use PyTorch's sizes
 * (formats.md §3) on a fake device (tests/alloc_fake.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "alloc_fake.h"
#include "testutil.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

static fake_device g_dev;
static ct_alloc_device_iface g_iface;

/* Installs a fresh fake device on the CPU type (no CPU memory may be in use). */
static int fake_setup(void **state) {
    (void)state;
    memset(&g_dev, 0, sizeof g_dev);
    g_iface = fake_iface(&g_dev);
    ct_reset_accumulated_memory_stats(CT_CPU);
    if (ct_alloc_set_device_interface(CT_DEVICE_CPU, &g_iface) != CT_OK)
        return -1;
    ct_reset_accumulated_memory_stats(CT_CPU);
    ct_reset_peak_memory_stats(CT_CPU);
    return 0;
}

static int fake_teardown(void **state) {
    (void)state;
    ct_empty_cache(CT_CPU);
    int leaked = g_dev.allocs - g_dev.frees;
    if (ct_alloc_set_device_interface(CT_DEVICE_CPU, NULL) != CT_OK)
        return -1;
    return leaked == 0 ? 0 : -1;
}

static int64_t st(const char *key) {
    int64_t v = ct_memory_stat(CT_CPU, key);
    if (v < 0 && strcmp(key, "max_split_size") != 0)
        fail_msg("stat %s: %s", key, ct_last_error());
    return v;
}

/* ------------------------------------------------------------------ sizing */

static void test_round_size(void **state) {
    (void)state;
    assert_int_equal(ct_alloc_round_size(0), 512);
    assert_int_equal(ct_alloc_round_size(1), 512);
    assert_int_equal(ct_alloc_round_size(512), 512);
    assert_int_equal(ct_alloc_round_size(513), 1024);
    assert_int_equal(ct_alloc_round_size(1200), 1536);
    assert_int_equal(ct_alloc_round_size(MiB + 1), MiB + 512);
    /* the CPU unit is one cache line */
    assert_int_equal(ct_alloc_round_size_unit(1, 64), 64);
    assert_int_equal(ct_alloc_round_size_unit(65, 64), 128);
    assert_int_equal(ct_alloc_round_size_unit(4000, 64), 4032);
}

static void test_segment_size(void **state) {
    (void)state;
    assert_int_equal(ct_alloc_segment_size(512), 2 * MiB);
    assert_int_equal(ct_alloc_segment_size(MiB), 2 * MiB);
    assert_int_equal(ct_alloc_segment_size(MiB + 512), 20 * MiB);
    assert_int_equal(ct_alloc_segment_size(10 * MiB - 512), 20 * MiB);
    assert_int_equal(ct_alloc_segment_size(10 * MiB), 10 * MiB);
    assert_int_equal(ct_alloc_segment_size(11 * MiB + 512), 12 * MiB);
}

/* ------------------------------------------------------------------ small pool */

static void test_small_split_merge(void **state) {
    (void)state;
    char *a = ct_alloc(CT_CPU, 1000);
    assert_non_null(a);
    /* one 2 MiB small segment, split into 1024 + the rest */
    assert_int_equal(g_dev.allocs, 1);
    assert_int_equal(st("segment.small_pool.current"), 1);
    assert_int_equal(st("reserved_bytes.all.current"), 2 * MiB);
    assert_int_equal(st("allocated_bytes.all.current"), 1024);
    assert_int_equal(st("requested_bytes.all.current"), 1000);
    assert_int_equal(st("inactive_split.all.current"), 1);
    assert_int_equal(st("inactive_split_bytes.all.current"), 2 * MiB - 1024);

    char *b = ct_alloc(CT_CPU, 5000);
    assert_ptr_equal(b, a + 1024); /* carved from the remainder, right after a */
    assert_int_equal(g_dev.allocs, 1);
    assert_int_equal(st("inactive_split.all.current"), 1);
    assert_int_equal(st("inactive_split_bytes.all.current"), 2 * MiB - 1024 - 5120);

    ct_free(CT_CPU, a);
    /* a's block cannot merge (its neighbour b is active): two inactive pieces now */
    assert_int_equal(st("inactive_split.all.current"), 2);
    assert_int_equal(st("allocated_bytes.all.current"), 5120);
    assert_int_equal(st("active.all.current"), 1);

    /* best fit: a 1024-byte request takes a's old block, not the big remainder */
    char *c = ct_alloc(CT_CPU, 700);
    assert_ptr_equal(c, a);
    assert_int_equal(st("inactive_split.all.current"), 1);

    ct_free(CT_CPU, b);
    ct_free(CT_CPU, c);
    /* everything merged back into one whole, cached segment */
    assert_int_equal(st("inactive_split.all.current"), 0);
    assert_int_equal(st("inactive_split_bytes.all.current"), 0);
    assert_int_equal(st("allocated_bytes.all.current"), 0);
    assert_int_equal(st("reserved_bytes.all.current"), 2 * MiB);
    assert_int_equal(st("allocation.all.allocated"), 3);
    assert_int_equal(st("allocation.all.freed"), 3);
    assert_int_equal(g_dev.frees, 0);

    /* the cached segment is reused */
    char *d = ct_alloc(CT_CPU, 100);
    assert_ptr_equal(d, a);
    assert_int_equal(g_dev.allocs, 1);
    ct_free(CT_CPU, d);
    ct_empty_cache(CT_CPU);
    assert_int_equal(g_dev.frees, 1);
    assert_int_equal(st("reserved_bytes.all.current"), 0);
    assert_int_equal(st("num_device_alloc"), 1);
    assert_int_equal(st("num_device_free"), 1);
}

/* ------------------------------------------------------------------ large pool */

static void test_large_split_rules(void **state) {
    (void)state;
    char *d = ct_alloc(CT_CPU, 3 * MiB);
    /* < 10 MiB: a 20 MiB segment, split because 17 MiB > 1 MiB remains */
    assert_int_equal(st("reserved_bytes.large_pool.current"), 20 * MiB);
    assert_int_equal(st("allocated_bytes.large_pool.current"), 3 * MiB);
    assert_int_equal(st("inactive_split_bytes.large_pool.current"), 17 * MiB);

    /* 16 MiB from the 17 MiB remainder leaves exactly 1 MiB, which is not > 1 MiB:
     * no split, the whole 17 MiB block is handed out */
    char *e = ct_alloc(CT_CPU, 16 * MiB);
    assert_ptr_equal(e, d + 3 * MiB);
    assert_int_equal(st("segment.large_pool.current"), 1);
    assert_int_equal(st("allocated_bytes.large_pool.current"), 20 * MiB);
    assert_int_equal(st("requested_bytes.large_pool.current"), 19 * MiB);
    assert_int_equal(st("inactive_split.large_pool.current"), 0);

    /* >= 10 MiB: a segment of its own size rounded to 2 MiB */
    char *f = ct_alloc(CT_CPU, 11 * MiB + 1);
    assert_non_null(f);
    assert_int_equal(st("segment.large_pool.current"), 2);
    assert_int_equal(st("reserved_bytes.large_pool.current"), 32 * MiB);
    /* 12 MiB - (11 MiB + 512) is under 1 MiB: no split, f holds the whole segment */
    assert_int_equal(st("allocated_bytes.large_pool.current"), 32 * MiB);
    assert_int_equal(st("requested_bytes.large_pool.current"), 30 * MiB + 1);

    ct_empty_cache(CT_CPU); /* nothing whole and free to release */
    assert_int_equal(g_dev.frees, 0);
    ct_free(CT_CPU, d);
    ct_empty_cache(CT_CPU); /* d's segment still holds e */
    assert_int_equal(g_dev.frees, 0);
    ct_free(CT_CPU, e);
    ct_free(CT_CPU, f);
    assert_int_equal(st("reserved_bytes.all.current"), 32 * MiB);
    assert_int_equal(st("segment.small_pool.current"), 0);
    ct_empty_cache(CT_CPU);
    assert_int_equal(g_dev.frees, 2);
    assert_int_equal(st("reserved_bytes.all.current"), 0);
    assert_int_equal(st("reserved_bytes.all.peak"), 32 * MiB);
}

/* ------------------------------------------------------------------ streams */

static void test_streams_separate_pools(void **state) {
    (void)state;
    void *a = ct_alloc_stream(CT_CPU, 4096, 1);
    ct_free(CT_CPU, a);
    /* a free block on stream 1 is not handed to stream 2 */
    void *b = ct_alloc_stream(CT_CPU, 4096, 2);
    assert_ptr_not_equal(a, b);
    assert_int_equal(g_dev.allocs, 2);
    void *c = ct_alloc_stream(CT_CPU, 4096, 1);
    assert_ptr_equal(a, c);
    ct_free(CT_CPU, b);
    ct_free(CT_CPU, c);
}

static void test_record_stream_defers_reuse(void **state) {
    (void)state;
    char *a = ct_alloc_stream(CT_CPU, 8192, 1);
    assert_int_equal(ct_alloc_record_stream(CT_CPU, a, 1), CT_OK); /* own stream: nothing */
    assert_int_equal(ct_alloc_record_stream(CT_CPU, a, 2), CT_OK);
    assert_int_equal(ct_alloc_record_stream(CT_CPU, a, 2), CT_OK); /* recorded once */
    ct_free(CT_CPU, a);
    assert_int_equal(g_dev.live_events, 1);
    /* allocated drops at once; the block stays active until stream 2 is done */
    assert_int_equal(st("allocated_bytes.all.current"), 0);
    assert_int_equal(st("active_bytes.all.current"), 8192);

    ct_alloc_state s;
    assert_int_equal(ct_alloc_state_get(CT_CPU, &s), CT_OK);
    assert_int_equal(s.nsegments, 1);
    assert_int_equal(s.segments[0].blocks[0].state, 2); /* active_pending_free */
    assert_int_equal(s.segments[0].allocated_size, 0);
    assert_int_equal(s.segments[0].active_size, 8192);
    ct_alloc_state_free(&s);

    char *b = ct_alloc_stream(CT_CPU, 8192, 1);
    assert_ptr_not_equal(a, b); /* not reused while stream 2 may still read it */
    fake_complete_stream(&g_dev, 2);
    char *c = ct_alloc_stream(CT_CPU, 8192, 1); /* events are polled here */
    assert_ptr_equal(a, c);
    assert_int_equal(g_dev.live_events, 0);
    assert_int_equal(st("active_bytes.all.current"), 16384);

    /* empty_cache waits for pending events instead of leaking the block */
    assert_int_equal(ct_alloc_record_stream(CT_CPU, c, 3), CT_OK);
    ct_free(CT_CPU, c);
    ct_free(CT_CPU, b);
    assert_int_equal(g_dev.live_events, 1);
    ct_empty_cache(CT_CPU);
    assert_int_equal(g_dev.live_events, 0);
    assert_int_equal(st("active.all.current"), 0);
    assert_int_equal(st("reserved_bytes.all.current"), 0);
    assert_true(g_dev.syncs >= 1);
    assert_true(st("num_sync_all_streams") >= 1);
}

/* ------------------------------------------------------------------ private pools */

static ct_alloc_pool_stats pool_stats(uint64_t pool) {
    ct_alloc_pool_stats ps;
    if (ct_alloc_pool_get_stats(CT_CPU, pool, &ps) != CT_OK)
        fail_msg("pool stats: %s", ct_last_error());
    return ps;
}

static void test_pool_routes_allocations(void **state) {
    (void)state;
    uint64_t pool = 0;
    assert_int_equal(ct_alloc_pool_create(CT_CPU, &pool), CT_OK);
    assert_true(pool != 0);
    /* a free block of pool 0 on the captured stream is not taken by the pool */
    void *outside = ct_alloc_stream(CT_CPU, 4096, 1);
    ct_free(CT_CPU, outside);
    assert_int_equal(g_dev.allocs, 1);
    assert_int_equal(ct_alloc_pool_begin_use(CT_CPU, pool, 1), CT_OK);
    assert_int_equal(ct_alloc_pool_routes(CT_CPU), 1);
    assert_true(ct_alloc_pool_of_stream(CT_CPU, 1) == pool);
    assert_true(ct_alloc_pool_of_stream(CT_CPU, 2) == 0);
    void *a = ct_alloc_stream(CT_CPU, 4096, 1);
    assert_ptr_not_equal(a, outside);
    assert_int_equal(g_dev.allocs, 2); /* a segment of its own */
    /* another stream keeps to pool 0 and reuses its free block's segment */
    void *o2 = ct_alloc_stream(CT_CPU, 4096, 1 + 1);
    assert_int_equal(g_dev.allocs, 3);
    ct_free(CT_CPU, o2);
    /* freed during the capture: reused by the pool */
    ct_free(CT_CPU, a);
    void *b = ct_alloc_stream(CT_CPU, 4096, 1);
    assert_ptr_equal(a, b);
    ct_alloc_pool_stats ps = pool_stats(pool);
    assert_int_equal(ps.uses, 1);
    assert_int_equal(ps.segments, 1);
    assert_int_equal(ps.reserved_bytes, (int64_t)(2 * MiB));
    assert_int_equal(ps.allocated_bytes, 4096);
    assert_int_equal(ps.active_blocks, 1);
    /* the snapshot names the pool of each segment */
    ct_alloc_state s;
    assert_int_equal(ct_alloc_state_get(CT_CPU, &s), CT_OK);
    int in_pool = 0;
    for (size_t i = 0; i < s.nsegments; i++)
        in_pool += s.segments[i].pool == pool;
    assert_int_equal(s.nsegments, 3);
    assert_int_equal(in_pool, 1);
    ct_alloc_state_free(&s);
    /* empty_cache during a capture frees nothing (no device frees under capture) */
    ct_empty_cache(CT_CPU);
    assert_int_equal(g_dev.frees, 0);
    assert_int_equal(ct_alloc_pool_end_use(CT_CPU, pool, 1), CT_OK);
    assert_int_equal(ct_alloc_pool_routes(CT_CPU), 0);
    /* after the capture: the pool's free memory is not handed out on stream 1 */
    ct_free(CT_CPU, b);
    void *c = ct_alloc_stream(CT_CPU, 4096, 1);
    assert_ptr_not_equal(c, b);
    ct_free(CT_CPU, c);
    /* empty_cache frees pool 0's segments but keeps the live pool's */
    ct_empty_cache(CT_CPU);
    assert_int_equal(g_dev.allocs - g_dev.frees, 1);
    assert_int_equal(pool_stats(pool).reserved_bytes, (int64_t)(2 * MiB));
    /* a capture again: the pool's block comes back */
    assert_int_equal(ct_alloc_pool_begin_use(CT_CPU, pool, 1), CT_OK);
    void *d = ct_alloc_stream(CT_CPU, 4096, 1);
    assert_ptr_equal(d, b);
    assert_int_equal(ct_alloc_pool_end_use(CT_CPU, pool, 1), CT_OK);
    ct_free(CT_CPU, d);
    /* the last release gives the whole free segment back */
    assert_int_equal(ct_alloc_pool_release(CT_CPU, pool), CT_OK);
    assert_int_equal(g_dev.allocs, g_dev.frees);
    assert_int_equal(ct_alloc_pool_get_stats(CT_CPU, pool, &ps), CT_ERROR_VALUE);
}

static void test_pool_release_with_live_blocks(void **state) {
    (void)state;
    uint64_t pool = 0;
    assert_int_equal(ct_alloc_pool_create(CT_CPU, &pool), CT_OK);
    assert_int_equal(ct_alloc_pool_retain(CT_CPU, pool), CT_OK); /* a graph's use */
    assert_int_equal(pool_stats(pool).uses, 2);
    assert_int_equal(ct_alloc_pool_begin_use(CT_CPU, pool, 0), CT_OK);
    void *live = ct_alloc_stream(CT_CPU, 3 * MiB, 0);
    void *tmp = ct_alloc_stream(CT_CPU, 4096, 0);
    /* a pool in use by a capture cannot go away */
    assert_int_equal(ct_alloc_pool_release(CT_CPU, pool), CT_OK); /* 2 -> 1 is fine */
    assert_int_equal(ct_alloc_pool_release(CT_CPU, pool), CT_ERROR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "end the capture first"));
    assert_int_equal(ct_alloc_pool_end_use(CT_CPU, pool, 0), CT_OK);
    ct_free(CT_CPU, tmp);
    assert_int_equal(ct_alloc_pool_release(CT_CPU, pool), CT_OK);
    /* the small segment was whole and free: gone; the large one holds `live` and joins
     * pool 0, where its free rest serves ordinary allocations */
    assert_int_equal(g_dev.allocs - g_dev.frees, 1);
    void *again = ct_alloc_stream(CT_CPU, 4 * MiB, 0);
    assert_int_equal(g_dev.allocs - g_dev.frees, 1); /* the 20 MiB segment's rest */
    ct_alloc_state s;
    assert_int_equal(ct_alloc_state_get(CT_CPU, &s), CT_OK);
    assert_int_equal(s.nsegments, 1);
    assert_true(s.segments[0].pool == 0);
    ct_alloc_state_free(&s);
    ct_free(CT_CPU, again);
    ct_free(CT_CPU, live);
}

static void test_pool_defers_stream_uses(void **state) {
    (void)state;
    uint64_t pool = 0;
    assert_int_equal(ct_alloc_pool_create(CT_CPU, &pool), CT_OK);
    char *a = ct_alloc_stream(CT_CPU, 8192, 1);
    assert_int_equal(ct_alloc_record_stream(CT_CPU, a, 2), CT_OK);
    assert_int_equal(ct_alloc_pool_begin_use(CT_CPU, pool, 1), CT_OK);
    ct_free(CT_CPU, a);
    assert_int_equal(g_dev.live_events, 0); /* no event recorded during the capture */
    assert_int_equal(st("active_bytes.all.current"), 8192);
    assert_int_equal(ct_alloc_pool_end_use(CT_CPU, pool, 1), CT_OK);
    assert_int_equal(g_dev.live_events, 1); /* recorded once the capture ended */
    fake_complete_stream(&g_dev, 2);
    char *b = ct_alloc_stream(CT_CPU, 8192, 1);
    assert_ptr_equal(a, b);
    ct_free(CT_CPU, b);
    assert_int_equal(ct_alloc_pool_release(CT_CPU, pool), CT_OK);
}

static void test_pool_two_captures_share(void **state) {
    (void)state;
    /* Graph trees: two captures into one pool, one after the other; the second reuses
     * what the first freed, so the pool holds the larger of the two. */
    uint64_t pool = 0;
    assert_int_equal(ct_alloc_pool_create(CT_CPU, &pool), CT_OK);
    assert_int_equal(ct_alloc_pool_begin_use(CT_CPU, pool, 1), CT_OK);
    void *out1 = ct_alloc_stream(CT_CPU, 64 * KiB, 1);
    void *t1 = ct_alloc_stream(CT_CPU, 512 * KiB, 1);
    ct_free(CT_CPU, t1);
    assert_int_equal(ct_alloc_pool_end_use(CT_CPU, pool, 1), CT_OK);
    int64_t after_first = pool_stats(pool).reserved_bytes;
    assert_int_equal(ct_alloc_pool_begin_use(CT_CPU, pool, 1), CT_OK);
    void *t2 = ct_alloc_stream(CT_CPU, 256 * KiB, 1);
    assert_ptr_not_equal(t2, out1); /* the first graph's live output is not reused */
    ct_free(CT_CPU, t2);
    assert_int_equal(ct_alloc_pool_end_use(CT_CPU, pool, 1), CT_OK);
    assert_int_equal(pool_stats(pool).reserved_bytes, after_first);
    ct_free(CT_CPU, out1);
    assert_int_equal(ct_alloc_pool_release(CT_CPU, pool), CT_OK);
}

static bool g_capturing;
static bool fake_capturing(void *ctx, int index) {
    (void)ctx, (void)index;
    return g_capturing;
}

static void test_pool_holds_blocks_freed_by_capture(void **state) {
    (void)state;
    /* the capturing thread frees a tensor made before the capture: the graph may write
     * it at every replay, so nothing reuses it until the pool is gone */
    g_iface.capturing = fake_capturing;
    uint64_t pool = 0;
    assert_int_equal(ct_alloc_pool_create(CT_CPU, &pool), CT_OK);
    void *before = ct_alloc_stream(CT_CPU, 4096, 0);
    assert_int_equal(ct_alloc_pool_begin_use(CT_CPU, pool, 0), CT_OK);
    g_capturing = true;
    ct_free(CT_CPU, before);
    /* an allocation outside the pool by the capturing thread is refused */
    assert_null(ct_alloc_stream(CT_CPU, 4096, 1));
    assert_non_null(strstr(ct_last_error(), "outside the private memory pool"));
    g_capturing = false;
    assert_int_equal(ct_alloc_pool_end_use(CT_CPU, pool, 0), CT_OK);
    assert_int_equal(st("allocated_bytes.all.current"), 0);
    assert_int_equal(st("active_bytes.all.current"), 4096); /* held */
    void *other = ct_alloc_stream(CT_CPU, 4096, 0);
    assert_ptr_not_equal(other, before);
    ct_free(CT_CPU, other);
    assert_int_equal(ct_alloc_pool_release(CT_CPU, pool), CT_OK);
    assert_int_equal(st("active_bytes.all.current"), 0);
    void *again = ct_alloc_stream(CT_CPU, 4096, 0);
    assert_ptr_equal(again, before); /* back in pool 0 once the pool is gone */
    ct_free(CT_CPU, again);
    g_iface.capturing = NULL;
}

static void test_pool_errors(void **state) {
    (void)state;
    uint64_t pool = 0;
    ct_clear_error(); /* a NULL argument propagates an earlier error */
    assert_int_equal(ct_alloc_pool_create(CT_CPU, NULL), CT_ERROR_NULL_ARGUMENT);
    assert_int_equal(ct_alloc_pool_retain(CT_CPU, 987654321), CT_ERROR_VALUE);
    assert_non_null(strstr(ct_last_error(), "no memory pool 987654321"));
    assert_int_equal(ct_alloc_pool_release(CT_CPU, 987654321), CT_ERROR_VALUE);
    assert_int_equal(ct_alloc_pool_begin_use(CT_CPU, 987654321, 0), CT_ERROR_VALUE);
    assert_int_equal(ct_alloc_pool_create(CT_CPU, &pool), CT_OK);
    assert_int_equal(ct_alloc_pool_end_use(CT_CPU, pool, 0), CT_ERROR_RUNTIME);
    assert_int_equal(ct_alloc_pool_begin_use(CT_CPU, pool, 0), CT_OK);
    assert_int_equal(ct_alloc_pool_begin_use(CT_CPU, pool, 0), CT_ERROR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "already allocates from memory pool"));
    /* the device type cannot change under a live pool */
    assert_int_equal(ct_alloc_set_device_interface(CT_DEVICE_CPU, NULL), CT_ERROR_RUNTIME);
    /* out of memory under a capture: no cache release, no retry */
    g_dev.limit = 1;
    assert_null(ct_alloc_stream(CT_CPU, 4096, 0));
    assert_int_equal(ct_last_status(), CT_ERROR_OUT_OF_MEMORY);
    assert_int_equal(g_dev.syncs, 0);
    g_dev.limit = 0;
    assert_int_equal(ct_alloc_pool_end_use(CT_CPU, pool, 0), CT_OK);
    assert_int_equal(ct_alloc_pool_release(CT_CPU, pool), CT_OK);
    assert_int_equal(ct_alloc_pool_release(CT_CPU, pool), CT_ERROR_VALUE);
    ct_alloc_pool_stats ps;
    ct_clear_error();
    assert_int_equal(ct_alloc_pool_get_stats(CT_CPU, pool, NULL), CT_ERROR_NULL_ARGUMENT);
    assert_int_equal(ct_alloc_pool_get_stats(CT_CPU, pool, &ps), CT_ERROR_VALUE);
}

/* ------------------------------------------------------------------ out of memory */

static void test_oom_releases_cache_and_retries(void **state) {
    (void)state;
    g_dev.limit = 21 * MiB;
    void *s = ct_alloc(CT_CPU, 100); /* 2 MiB small segment */
    ct_free(CT_CPU, s);              /* ... now cached */
    void *big = ct_alloc(CT_CPU, 3 * MiB); /* needs 20 MiB: 22 > 21 until the cache goes */
    assert_non_null(big);
    assert_int_equal(st("num_alloc_retries"), 1);
    assert_int_equal(st("num_ooms"), 0);
    assert_int_equal(g_dev.refused, 1);
    assert_int_equal(st("segment.small_pool.current"), 0);
    ct_free(CT_CPU, big);
}

static void test_oom_reports(void **state) {
    (void)state;
    g_dev.limit = 25 * MiB;
    ct_memory_record_history(true, 100);
    void *a = ct_alloc(CT_CPU, 3 * MiB); /* 20 MiB segment */
    void *b = ct_alloc(CT_CPU, 100);     /* 2 MiB small segment */
    ct_free(CT_CPU, b);
    ct_clear_error();
    void *c = ct_alloc(CT_CPU, 19 * MiB); /* needs a 20 MiB segment: never fits */
    assert_null(c);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    CT_ASSERT_ERR(c != NULL, CT_ERROR_OUT_OF_MEMORY, "CPU out of memory. Tried to allocate 19.00 MiB");
    assert_non_null(strstr(msg, "(19922944 bytes)"));
    assert_non_null(strstr(msg, "20.00 MiB, 20971520 bytes")); /* reserved, after the cache was freed */
    assert_non_null(strstr(msg, "3.00 MiB (3145728 bytes) is allocated"));
    assert_non_null(strstr(msg, "max_split_size_mb"));
    assert_int_equal(st("num_ooms"), 1);
    assert_int_equal(st("num_alloc_retries"), 1);
    assert_int_equal(st("segment.small_pool.current"), 0); /* released before giving up */

    ct_alloc_state s;
    assert_int_equal(ct_alloc_state_get(CT_CPU, &s), CT_OK);
    assert_true(s.ntrace >= 2);
    assert_int_equal(s.trace[s.ntrace - 2].action, CT_TRACE_OOM);
    assert_int_equal(s.trace[s.ntrace - 2].size, 19 * MiB);
    assert_int_equal(s.trace[s.ntrace - 1].action, CT_TRACE_SNAPSHOT);
    ct_alloc_state_free(&s);
    ct_memory_record_history(false, 0);
    ct_free(CT_CPU, a);

    /* a device that refuses everything */
    g_dev.fail_all = true;
    ct_clear_error();
    assert_null(ct_alloc(CT_CPU, 10));
    assert_int_equal(ct_last_status(), CT_ERROR_OUT_OF_MEMORY);
    assert_int_equal(st("num_ooms"), 2);
    g_dev.fail_all = false;
}

/* ------------------------------------------------------------------ property test */

static uint64_t rng_state;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void check_invariants(void) {
    ct_alloc_stats s;
    assert_int_equal(ct_alloc_get_stats(CT_CPU, &s), CT_OK);
    ct_alloc_state snap;
    assert_int_equal(ct_alloc_state_get(CT_CPU, &snap), CT_OK);
    int64_t reserved = 0, allocated = 0, active = 0, requested = 0, nalloc = 0, nsplit = 0, split_bytes = 0;
    for (size_t i = 0; i < snap.nsegments; i++) {
        const ct_alloc_segment_info *g = &snap.segments[i];
        reserved += (int64_t)g->total_size;
        uint64_t sum = 0, addr = g->address;
        for (size_t j = 0; j < g->nblocks; j++) {
            const ct_alloc_block_info *b = &g->blocks[j];
            assert_int_equal(b->address, addr); /* blocks tile the segment */
            addr += b->size;
            sum += b->size;
            if (b->state == 1) {
                allocated += (int64_t)b->size;
                nalloc++;
            }
            if (b->state != 0) {
                active += (int64_t)b->size;
                requested += (int64_t)b->requested_size;
            } else if (g->nblocks > 1) {
                nsplit++;
                split_bytes += (int64_t)b->size;
            }
            if (j > 0)
                assert_false(b->state == 0 && g->blocks[j - 1].state == 0); /* merged */
        }
        assert_int_equal(sum, g->total_size);
    }
    assert_int_equal(s.reserved_bytes[CT_STAT_ALL].current, reserved);
    assert_int_equal(s.allocated_bytes[CT_STAT_ALL].current, allocated);
    assert_int_equal(s.active_bytes[CT_STAT_ALL].current, active);
    assert_int_equal(s.requested_bytes[CT_STAT_ALL].current, requested);
    assert_int_equal(s.allocation[CT_STAT_ALL].current, nalloc);
    assert_int_equal(s.segment[CT_STAT_ALL].current, (int64_t)snap.nsegments);
    assert_int_equal(s.inactive_split[CT_STAT_ALL].current, nsplit);
    assert_int_equal(s.inactive_split_bytes[CT_STAT_ALL].current, split_bytes);
    assert_true(allocated <= reserved);
    assert_int_equal((int64_t)g_dev.used, reserved);
    const ct_alloc_stat *arrays[] = {s.allocation, s.segment, s.active, s.inactive_split, s.allocated_bytes,
                                     s.reserved_bytes, s.active_bytes, s.inactive_split_bytes, s.requested_bytes};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) {
        const ct_alloc_stat *a = arrays[k];
        assert_int_equal(a[0].current, a[1].current + a[2].current);
        assert_int_equal(a[0].allocated, a[1].allocated + a[2].allocated);
        assert_int_equal(a[0].freed, a[1].freed + a[2].freed);
        for (int t = 0; t < 3; t++) {
            assert_true(a[t].current >= 0);
            assert_true(a[t].peak >= a[t].current);
            assert_int_equal(a[t].current, a[t].allocated - a[t].freed);
        }
    }
    ct_alloc_state_free(&snap);
}

static void test_random_sequence_invariants(void **state) {
    (void)state;
    enum { SLOTS = 64, STEPS = 3000 };
    char *live[SLOTS] = {0};
    size_t sizes[SLOTS] = {0};
    int64_t stream[SLOTS] = {0};
    int64_t last_peak = 0;
    rng_state = 0x9E3779B97F4A7C15ULL;
    for (int step = 0; step < STEPS; step++) {
        int i = (int)(rnd() % SLOTS);
        if (live[i]) {
            /* the block still holds what we wrote: no other block overlapped it */
            assert_int_equal((unsigned char)live[i][0], (unsigned char)i);
            assert_int_equal((unsigned char)live[i][sizes[i] - 1], (unsigned char)i);
            if (rnd() % 8 == 0)
                assert_int_equal(ct_alloc_record_stream(CT_CPU, live[i], stream[i] + 1), CT_OK);
            ct_free(CT_CPU, live[i]);
            live[i] = NULL;
        } else {
            uint64_t r = rnd();
            size_t n = r % 10 < 7 ? 1 + (size_t)(rnd() % (64 * KiB))
                     : r % 10 < 9 ? 1 + (size_t)(rnd() % (3 * MiB))
                                   : 1 + (size_t)(rnd() % (24 * MiB));
            stream[i] = (int64_t)(rnd() % 2);
            live[i] = ct_alloc_stream(CT_CPU, n, stream[i]);
            assert_non_null(live[i]);
            sizes[i] = n;
            live[i][0] = (char)i;
            live[i][n - 1] = (char)i;
        }
        if (rnd() % 16 == 0)
            fake_complete_stream(&g_dev, (int64_t)(rnd() % 3));
        if (rnd() % 200 == 0)
            ct_empty_cache(CT_CPU);
        int64_t peak = st("allocated_bytes.all.peak");
        assert_true(peak >= last_peak);
        last_peak = peak;
        if (step % 10 == 0)
            check_invariants();
    }
    for (int i = 0; i < SLOTS; i++)
        ct_free(CT_CPU, live[i]);
    fake_complete_stream(&g_dev, 1);
    fake_complete_stream(&g_dev, 2);
    ct_empty_cache(CT_CPU);
    check_invariants();
    assert_int_equal(st("allocation.all.current"), 0);
    assert_int_equal(st("allocation.all.allocated"), st("allocation.all.freed"));
    assert_int_equal(st("active_bytes.all.allocated"), st("active_bytes.all.freed"));
    assert_int_equal(st("requested_bytes.all.allocated"), st("requested_bytes.all.freed"));
    assert_int_equal(st("segment.all.allocated"), st("segment.all.freed"));
    assert_int_equal(st("reserved_bytes.all.current"), 0);
    assert_int_equal(st("num_device_alloc"), st("num_device_free"));
    assert_int_equal(st("num_device_alloc"), g_dev.allocs);
    assert_true(st("inactive_split.all.allocated") > 0); /* the sequence did split blocks */
}

/* ------------------------------------------------------------------ resets */

static void test_reset_stats(void **state) {
    (void)state;
    void *a = ct_alloc(CT_CPU, 4 * MiB);
    void *b = ct_alloc(CT_CPU, 4 * MiB);
    ct_free(CT_CPU, b);
    assert_int_equal(ct_max_memory_allocated(CT_CPU), 8 * MiB);
    ct_reset_peak_memory_stats(CT_CPU);
    assert_int_equal(ct_max_memory_allocated(CT_CPU), 4 * MiB);
    assert_int_equal(ct_max_memory_reserved(CT_CPU), ct_memory_reserved(CT_CPU));
    ct_reset_accumulated_memory_stats(CT_CPU);
    assert_int_equal(st("allocation.all.allocated"), 0);
    assert_int_equal(st("allocation.all.freed"), 0);
    assert_int_equal(st("allocation.all.current"), 1); /* current survives */
    assert_int_equal(st("num_device_alloc"), 0);
    ct_free(CT_CPU, a);
    assert_int_equal(st("allocation.all.freed"), 1);
}

/* ------------------------------------------------------------------ the real CPU device */

static void test_tensors_use_allocator(void **state) {
    (void)state;
    int64_t n0 = ct_memory_stat(CT_CPU, "allocation.all.current");
    int64_t b0 = ct_memory_allocated(CT_CPU);
    ct_tensor *t = ct_empty(CT_SHAPE(1000), CT_F32, CT_CPU);
    CT_ASSERT_OK(t);
    assert_int_equal(ct_memory_stat(CT_CPU, "allocation.all.current"), n0 + 1);
    /* 4000 bytes rounded to the CPU's 64-byte unit, cached or not */
    assert_int_equal(ct_memory_allocated(CT_CPU), b0 + 4032);
    assert_int_equal(ct_memory_stat(CT_CPU, "requested_bytes.all.current") >= 4000, 1);
    ct_alloc_state s;
    assert_int_equal(ct_alloc_state_get(CT_CPU, &s), CT_OK);
    bool found = false;
    for (size_t i = 0; i < s.nsegments; i++)
        for (size_t j = 0; j < s.segments[i].nblocks; j++)
            if (s.segments[i].blocks[j].address == (uint64_t)(uintptr_t)ct_tensor_data(t)) {
                found = s.segments[i].blocks[j].state == 1 && s.segments[i].blocks[j].requested_size == 4000;
            }
    ct_alloc_state_free(&s);
    assert_true(found);
    assert_int_equal((uintptr_t)ct_tensor_data(t) % 64, 0);
    ct_release(t);
    assert_int_equal(ct_memory_allocated(CT_CPU), b0);
    assert_int_equal(ct_memory_stat(CT_CPU, "allocation.all.current"), n0);
}

static void test_cpu_caching_switch(void **state) {
    (void)state;
    bool was = ct_memory_caching(CT_CPU);
    assert_int_equal(ct_memory_set_caching(CT_CPU, true), CT_OK);
    void *a = ct_alloc(CT_CPU, 100000);
    ct_free(CT_CPU, a);
    assert_true(ct_memory_reserved(CT_CPU) >= 2 * (int64_t)MiB); /* cached */
    /* a block allocated while caching is on and freed after it is switched off goes back */
    void *b = ct_alloc(CT_CPU, 100000);
    assert_int_equal(ct_memory_set_caching(CT_CPU, false), CT_OK);
    assert_false(ct_memory_caching(CT_CPU));
    assert_true(ct_memory_reserved(CT_CPU) >= 2 * (int64_t)MiB); /* b's segment is in use */
    ct_free(CT_CPU, b);
    assert_int_equal(ct_memory_reserved(CT_CPU), 0);
    /* without caching: one segment per allocation, sized to 64 bytes */
    void *c = ct_alloc(CT_CPU, 100);
    assert_int_equal(ct_memory_reserved(CT_CPU), 128);
    assert_int_equal(ct_memory_allocated(CT_CPU), 128);
    ct_free(CT_CPU, c);
    assert_int_equal(ct_memory_reserved(CT_CPU), 0);
    ct_memory_set_caching(CT_CPU, was);
}

static void test_cpu_large_bypass(void **state) {
    (void)state;
    bool was = ct_memory_caching(CT_CPU);
    ct_memory_set_caching(CT_CPU, true);
    ct_empty_cache(CT_CPU);
    size_t big = ct_alloc_get_device_interface(CT_DEVICE_CPU)->bypass_threshold + 1;
    void *p = ct_alloc(CT_CPU, big); /* untouched, so only address space */
    assert_non_null(p);
    ct_free(CT_CPU, p);
    assert_int_equal(ct_memory_reserved(CT_CPU), 0); /* not cached */
    ct_memory_set_caching(CT_CPU, was);
}

static void *thread_body(void *arg) {
    uint64_t x = (uint64_t)(uintptr_t)arg * 7919 + 1;
    void *keep[16] = {0};
    for (int i = 0; i < 4000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int k = (int)(x % 16);
        if (keep[k]) {
            ct_free(CT_CPU, keep[k]);
            keep[k] = NULL;
        } else {
            keep[k] = ct_alloc(CT_CPU, 1 + (size_t)(x % 300000));
            if (!keep[k])
                return (void *)1;
            memset(keep[k], k, 1);
        }
    }
    for (int k = 0; k < 16; k++)
        ct_free(CT_CPU, keep[k]);
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, thread_body, (void *)(uintptr_t)(i + 1)), 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        assert_null(r);
    }
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
    assert_int_equal(ct_memory_stat(CT_CPU, "allocation.all.current"), 0);
    ct_empty_cache(CT_CPU);
    assert_int_equal(ct_memory_reserved(CT_CPU), 0);
}

/* ------------------------------------------------------------------ errors */

static int count_keys(const char *key, int64_t value, void *ctx) {
    (void)value;
    int *n = ctx;
    if (*n == 0)
        assert_string_equal(key, "active.all.allocated"); /* sorted as Python's sorted() */
    (*n)++;
    return 0;
}

static void test_stats_keys(void **state) {
    (void)state;
    int n = 0;
    assert_int_equal(ct_memory_stats(CT_CPU, count_keys, &n), CT_OK);
    assert_int_equal(n, 9 * 3 * 4 + 2 * 4 + 6);
    assert_int_equal(ct_memory_stat(CT_CPU, "max_split_size"), -1);
    assert_true(ct_memory_stat(CT_CPU, "oversize_allocations.current") >= 0);
}

static void test_error_inputs(void **state) {
    (void)state;
    ct_clear_error();
    CT_ASSERT_ERR(ct_memory_stat(CT_CPU, NULL) >= 0, CT_ERROR_NULL_ARGUMENT, "memory_stat");
    ct_clear_error();
    CT_ASSERT_ERR(ct_memory_stat(CT_CPU, "allocated_bytes.everything.current") >= 0, CT_ERROR_VALUE,
                  "unknown memory statistic");
    ct_clear_error();
    CT_ASSERT_ERR(ct_memory_stat(CT_META, "num_ooms") >= 0, CT_ERROR_DEVICE, "meta");
    ct_clear_error();
    CT_ASSERT_ERR(ct_memory_stat(ct_device_make(CT_DEVICE_CPU, 3), "num_ooms") >= 0, CT_ERROR_DEVICE,
                  "invalid device");
    ct_clear_error();
    CT_ASSERT_ERR(ct_memory_stats(CT_CPU, NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "memory_stats");
    ct_clear_error();
    CT_ASSERT_ERR(ct_max_memory_reserved(CT_META) != 0, CT_ERROR_DEVICE, "meta");
    ct_clear_error();
    CT_ASSERT_ERR(ct_memory_allocated(ct_device_make(CT_DEVICE_CUDA, 99)) != 0, CT_ERROR_DEVICE, "invalid device");
    /* resets and empty_cache on devices never used (or unusable) do nothing */
    ct_reset_peak_memory_stats(CT_META);
    ct_reset_accumulated_memory_stats(CT_CUDA(1));
    ct_empty_cache(ct_device_make(7, 0));
    ct_clear_error();
    CT_ASSERT_ERR(ct_memory_set_caching(CT_META, true) == CT_OK, CT_ERROR_DEVICE, "meta");
    ct_clear_error();
    CT_ASSERT_ERR(ct_memory_caching(CT_META), CT_ERROR_DEVICE, "meta");
    ct_clear_error();
    CT_ASSERT_ERR(ct_alloc(CT_META, 10) != NULL, CT_ERROR_DEVICE, "meta");
    if (!ct_alloc_get_device_interface(CT_DEVICE_CUDA)) {
        ct_clear_error();
        CT_ASSERT_ERR(ct_alloc(CT_CUDA(0), 10) != NULL, CT_ERROR_DEVICE, "no allocator for device cuda:0");
    }
    ct_clear_error();
    CT_ASSERT_ERR(ct_memory_record_history(true, 0) == CT_OK, CT_ERROR_VALUE, "max_entries");
    ct_clear_error();
    CT_ASSERT_ERR(ct_alloc_record_stream(CT_CPU, NULL, 1) == CT_OK, CT_ERROR_NULL_ARGUMENT, "record_stream");

    /* frees the allocator does not know */
    int x;
    ct_clear_error();
    ct_free(CT_CPU, &x);
    assert_int_equal(ct_last_status(), CT_ERROR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "freed twice"));
    void *p = ct_alloc(CT_CPU, 10);
    ct_free(CT_CPU, p);
    ct_clear_error();
    ct_free(CT_CPU, p);
    assert_int_equal(ct_last_status(), CT_ERROR_RUNTIME);

    /* the built-in CPU device has only stream 0 */
    p = ct_alloc(CT_CPU, 10);
    ct_clear_error();
    CT_ASSERT_ERR(ct_alloc_record_stream(CT_CPU, p, 5) == CT_OK, CT_ERROR_DEVICE, "only stream 0");
    ct_clear_error();
    CT_ASSERT_ERR(ct_alloc_record_stream(CT_CPU, &x, 0) == CT_OK, CT_ERROR_VALUE, "not a live allocation");

    /* swapping the device interface while memory is in use */
    fake_device d;
    memset(&d, 0, sizeof d);
    static ct_alloc_device_iface fi;
    fi = fake_iface(&d);
    ct_clear_error();
    CT_ASSERT_ERR(ct_alloc_set_device_interface(CT_DEVICE_CPU, &fi) == CT_OK, CT_ERROR_RUNTIME, "in use");
    ct_free(CT_CPU, p);
    ct_alloc_device_iface bad = fi;
    bad.raw_free = NULL;
    ct_clear_error();
    CT_ASSERT_ERR(ct_alloc_set_device_interface(CT_DEVICE_CPU, &bad) == CT_OK, CT_ERROR_VALUE, "raw_free");
    bad = fi;
    bad.event_query = NULL;
    ct_clear_error();
    CT_ASSERT_ERR(ct_alloc_set_device_interface(CT_DEVICE_CPU, &bad) == CT_OK, CT_ERROR_VALUE, "event");
    ct_clear_error();
    CT_ASSERT_ERR(ct_alloc_set_device_interface(CT_DEVICE_META, &fi) == CT_OK, CT_ERROR_DEVICE, "device type");
}

int main(void) {
    /* the real CPU device's tests look at its 64-byte rounding and its cache, which
     * sanitizer mode (the default of an ASan build) turns off */
    ct_memory_set_alloc_conf("sanitize:False");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_size),
        cmocka_unit_test(test_segment_size),
        cmocka_unit_test_setup_teardown(test_small_split_merge, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_large_split_rules, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_streams_separate_pools, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_record_stream_defers_reuse, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_pool_routes_allocations, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_pool_release_with_live_blocks, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_pool_defers_stream_uses, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_pool_two_captures_share, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_pool_holds_blocks_freed_by_capture, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_pool_errors, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_oom_releases_cache_and_retries, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_oom_reports, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_random_sequence_invariants, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_reset_stats, fake_setup, fake_teardown),
        cmocka_unit_test(test_tensors_use_allocator),
        cmocka_unit_test(test_cpu_caching_switch),
        cmocka_unit_test(test_cpu_large_bypass),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_stats_keys),
        cmocka_unit_test(test_error_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
