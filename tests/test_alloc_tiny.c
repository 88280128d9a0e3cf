/* Note [Tiny blocks] (src/core/alloc.c): freed small CPU blocks wait unmerged for the
 * next allocation of their size. Everything a caller can read (statistics, snapshots)
 * must be what the general path gives, which runs whenever the trace history is on. */
#include <string.h>

#include "core/alloc.h"
#include "testutil.h"

#define NSLOTS 48
#define NLIVE (NSLOTS + 2)

/* A fixed mix of tiny and larger allocations and frees, leaving some live. */
static void run_sequence(void **live) {
    static const size_t sizes[] = {4, 64, 100, 256, 4096, 40, 8192, 1000, 3000, 20000};
    void *p[NSLOTS] = {0};
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < NSLOTS; i++) {
            int k = (i * 7 + round * 3) % NSLOTS;
            if (p[k]) {
                ct_free(CT_CPU, p[k]);
                p[k] = NULL;
            } else {
                p[k] = ct_alloc(CT_CPU, sizes[(size_t)(i + round) % (sizeof sizes / sizeof *sizes)]);
                assert_non_null(p[k]);
            }
        }
    /* end with freed tiny blocks: they are what waits unmerged */
    void *t[6];
    for (int i = 0; i < 6; i++)
        assert_non_null(t[i] = ct_alloc(CT_CPU, 100 + 50 * (size_t)(i % 3)));
    for (int i = 0; i < 6; i++)
        ct_free(CT_CPU, t[(i * 5) % 6]);
    /* take waiting blocks back with other requests of the same classes (Note [Tiny
     * fast lane]), free some of them again and keep two */
    for (int i = 0; i < 6; i++)
        assert_non_null(t[i] = ct_alloc(CT_CPU, 97 + 50 * (size_t)(i % 3)));
    for (int i = 0; i < 4; i++)
        ct_free(CT_CPU, t[i]);
    memcpy(live, p, sizeof p);
    live[NSLOTS] = t[4];
    live[NSLOTS + 1] = t[5];
}

static void free_all(void **live) {
    for (int i = 0; i < NLIVE; i++)
        ct_free(CT_CPU, live[i]);
}

typedef struct {
    int64_t v[10];
} figures;

static figures read_figures(void) {
    ct_alloc_stats s;
    assert_int_equal(ct_alloc_get_stats(CT_CPU, &s), CT_OK);
    figures f = {{s.allocated_bytes[CT_STAT_ALL].current, s.active_bytes[CT_STAT_ALL].current,
                  s.active[CT_STAT_ALL].current, s.requested_bytes[CT_STAT_ALL].current,
                  s.inactive_split[CT_STAT_ALL].current, s.inactive_split_bytes[CT_STAT_ALL].current,
                  s.reserved_bytes[CT_STAT_ALL].current, s.allocation[CT_STAT_ALL].current,
                  s.segment[CT_STAT_ALL].current, s.allocation[CT_STAT_ALL].allocated}};
    return f;
}

static void test_tiny_blocks_read_like_the_general_path(void **state) {
    (void)state;
    ct_empty_cache(CT_CPU);
    ct_reset_accumulated_memory_stats(CT_CPU);
    void *live[NLIVE];
    figures base = read_figures();
    run_sequence(live); /* history off: tiny blocks wait on their lists */
    figures fast = read_figures();
    free_all(live);
    /* everything freed: the live figures are back where they started */
    figures after = read_figures();
    for (int i = 0; i < 4; i++)
        assert_int_equal(after.v[i], base.v[i]);
    ct_empty_cache(CT_CPU);
    assert_int_equal(ct_memory_reserved(CT_CPU), read_figures().v[6]);

    ct_reset_accumulated_memory_stats(CT_CPU);
    assert_int_equal(ct_memory_record_history(true, 100000), CT_OK); /* general path only */
    run_sequence(live);
    figures general = read_figures();
    assert_int_equal(ct_memory_record_history(false, 0), CT_OK);
    free_all(live);
    for (int i = 0; i < 10; i++)
        assert_int_equal(fast.v[i], general.v[i]);
    ct_empty_cache(CT_CPU);
}

static void test_tiny_block_is_reused_and_freed(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    void *p = ct_alloc(CT_CPU, 40);
    assert_non_null(p);
    assert_int_equal(ct_memory_allocated(CT_CPU), before + 64);
    ct_free(CT_CPU, p);
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
    void *q = ct_alloc(CT_CPU, 33); /* the same class takes the waiting block */
    assert_ptr_equal(p, q);
    ct_free(CT_CPU, q);
    /* a snapshot shows no waiting block: they are merged back first */
    ct_alloc_state st;
    assert_int_equal(ct_alloc_state_get(CT_CPU, &st), CT_OK);
    for (size_t i = 0; i < st.nsegments; i++)
        for (size_t j = 0; j < st.segments[i].nblocks; j++) {
            const ct_alloc_block_info *b = &st.segments[i].blocks[j];
            assert_true(b->state == 0 || b->state == 1); /* free or active */
            if (j + 1 < st.segments[i].nblocks)  /* free neighbours are merged */
                assert_false(b->state == 0 && st.segments[i].blocks[j + 1].state == 0);
        }
    ct_alloc_state_free(&st);
    /* empty_cache gives every whole segment back, waiting blocks included */
    ct_empty_cache(CT_CPU);
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
}

int main(void) {
    /* these look at the built-in CPU cache, which sanitizer mode (the default of an ASan
     * build) turns off */
    ct_memory_set_alloc_conf("sanitize:False");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_blocks_read_like_the_general_path),
        cmocka_unit_test(test_tiny_block_is_reused_and_freed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
