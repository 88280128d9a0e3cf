/* Allocator history (trace ring) and snapshots: pickle bytes, JSON contents, and the
 * pickle opcode subset PyTorch's memory viewer reads. Also writes alloc_snapshot.pickle
 * and alloc_snapshot.json in the working directory for the memviz tests
 * (tests/memviz.cmake) and tests/golden/check_snapshot.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "factory.h"
#include "alloc_fake.h"
#include "util/pickle_emit.h"
#include "testutil.h"

#define MiB ((size_t)1024 * 1024)

static fake_device g_dev;
static ct_alloc_device_iface g_iface;

static int fake_setup(void **state) {
    (void)state;
    memset(&g_dev, 0, sizeof g_dev);
    g_iface = fake_iface(&g_dev);
    return ct_alloc_set_device_interface(CT_DEVICE_CPU, &g_iface) == CT_OK ? 0 : -1;
}

static int fake_teardown(void **state) {
    (void)state;
    ct_memory_record_history(false, 0);
    ct_alloc_set_context(NULL);
    ct_empty_cache(CT_CPU);
    return ct_alloc_set_device_interface(CT_DEVICE_CPU, NULL) == CT_OK ? 0 : -1;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        *len = (size_t)n;
    }
    return buf;
}

static const void *find_bytes(const void *hay, size_t n, const char *needle, size_t m) {
    const unsigned char *h = hay;
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(h + i, needle, m) == 0)
            return h + i;
    return NULL;
}

/* ------------------------------------------------------------------ trace */

static void test_trace_ring_wraps(void **state) {
    (void)state;
    assert_int_equal(ct_memory_record_history(true, 8), CT_OK);
    ct_alloc_set_context("add");
    for (int i = 0; i < 5; i++) {
        void *p = ct_alloc(CT_CPU, 100); /* the first one also asks for a segment */
        ct_free(CT_CPU, p);
    }
    /* 1 segment_alloc + 5 x (alloc, free_requested, free_completed) + snapshot = 17 */
    ct_alloc_state s;
    assert_int_equal(ct_alloc_state_get(CT_CPU, &s), CT_OK);
    assert_int_equal(s.ntrace, 8);
    const int expect[8] = {CT_TRACE_FREE_COMPLETED, CT_TRACE_ALLOC,          CT_TRACE_FREE_REQUESTED,
                           CT_TRACE_FREE_COMPLETED, CT_TRACE_ALLOC,          CT_TRACE_FREE_REQUESTED,
                           CT_TRACE_FREE_COMPLETED, CT_TRACE_SNAPSHOT};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(s.trace[i].action, expect[i]);
        if (i > 0)
            assert_true(s.trace[i].time_us >= s.trace[i - 1].time_us);
        if (expect[i] == CT_TRACE_ALLOC) {
            assert_int_equal(s.trace[i].size, 100);
            assert_string_equal(s.trace[i].context, "add");
            assert_int_equal(s.trace[i].addr, s.segments[0].address);
        }
    }
    ct_alloc_state_free(&s);

    /* stopping discards the history and records nothing more */
    assert_int_equal(ct_memory_record_history(false, 0), CT_OK);
    ct_free(CT_CPU, ct_alloc(CT_CPU, 100));
    assert_int_equal(ct_alloc_state_get(CT_CPU, &s), CT_OK);
    assert_int_equal(s.ntrace, 0);
    ct_alloc_state_free(&s);

    /* a longer ring grows as needed and keeps everything below its limit */
    assert_int_equal(ct_memory_record_history(true, 3000), CT_OK);
    for (int i = 0; i < 1200; i++)
        ct_free(CT_CPU, ct_alloc(CT_CPU, 100));
    assert_int_equal(ct_alloc_state_get(CT_CPU, &s), CT_OK);
    assert_int_equal(s.ntrace, 3000);
    assert_int_equal(s.trace[s.ntrace - 1].action, CT_TRACE_SNAPSHOT);
    /* 3601 recorded (alloc, free_requested, free_completed per round, then the snapshot);
     * the oldest 601 were dropped, so the ring starts inside round 201 */
    assert_int_equal(s.trace[0].action, CT_TRACE_FREE_REQUESTED);
    ct_alloc_state_free(&s);
}

/* ------------------------------------------------------------------ pickle bytes */

static void expect_bytes(ct_pickle *p, const char *want, size_t n) {
    assert_int_equal(ct_pickle_finish(p, "test"), CT_OK);
    assert_int_equal(p->len, n);
    assert_memory_equal(p->buf, want, n);
    p->len = 0;
}

static void test_pickle_scalars_match_python(void **state) {
    (void)state;
    /* byte strings from Python's pickle.dumps(value, protocol=2) */
    ct_pickle p;
    ct_pickle_init(&p);
    ct_pickle_int(&p, 0);
    expect_bytes(&p, "K\x00", 2);
    ct_pickle_int(&p, 255);
    expect_bytes(&p, "K\xff", 2);
    ct_pickle_int(&p, 256);
    expect_bytes(&p, "M\x00\x01", 3);
    ct_pickle_int(&p, 65536);
    expect_bytes(&p, "J\x00\x00\x01\x00", 5);
    ct_pickle_int(&p, -1);
    expect_bytes(&p, "J\xff\xff\xff\xff", 5);
    ct_pickle_int(&p, 2147483648LL);
    expect_bytes(&p, "\x8a\x05\x00\x00\x00\x80\x00", 7);
    ct_pickle_int(&p, -2147483649LL);
    expect_bytes(&p, "\x8a\x05\xff\xff\xff\x7f\xff", 7);
    ct_pickle_int(&p, INT64_MAX);
    expect_bytes(&p, "\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f", 10);
    ct_pickle_int(&p, INT64_MIN);
    expect_bytes(&p, "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80", 10);
    ct_pickle_uint(&p, UINT64_MAX);
    expect_bytes(&p, "\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00", 11);
    ct_pickle_float(&p, 1.5);
    expect_bytes(&p, "G?\xf8\x00\x00\x00\x00\x00\x00", 9);
    ct_pickle_unicode(&p, "h\xc3\xa9", (size_t)-1);
    expect_bytes(&p, "X\x03\x00\x00\x00h\xc3\xa9", 8);
    ct_pickle_bool(&p, true);
    ct_pickle_bool(&p, false);
    ct_pickle_none(&p);
    expect_bytes(&p, "\x88\x89N", 3);
    ct_pickle_int(&p, 1);
    ct_pickle_int(&p, 2);
    ct_pickle_tuple_n(&p, 2);
    expect_bytes(&p, "K\x01K\x02\x86", 5);
    ct_pickle_mark(&p);
    ct_pickle_int(&p, 1);
    ct_pickle_tuple(&p);
    assert_int_equal(ct_pickle_memoize(&p), 0);
    ct_pickle_get(&p, 0);
    expect_bytes(&p, "(K\x01tq\x00h\x00", 8);
    ct_pickle_global(&p, "torch._utils", "_rebuild_tensor_v2");
    expect_bytes(&p, "ctorch._utils\n_rebuild_tensor_v2\n", 33);

    /* misuse is reported, not crashed on */
    ct_pickle_appends(&p); /* no MARK open */
    ct_clear_error();
    assert_int_equal(ct_pickle_finish(&p, "test"), CT_ERROR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "MARK"));
    ct_pickle_destroy(&p);
    ct_pickle_init(&p);
    ct_pickle_get(&p, 3); /* nothing memoized */
    ct_clear_error();
    assert_int_equal(ct_pickle_finish(&p, "test"), CT_ERROR_VALUE);
    ct_pickle_destroy(&p);
    ct_pickle_init(&p);
    ct_pickle_unicode(&p, NULL, 0);
    ct_clear_error();
    assert_int_equal(ct_pickle_finish(&p, "test"), CT_ERROR_NULL_ARGUMENT);
    ct_pickle_destroy(&p);
}

/* Walks a pickle, accepting only the opcodes MemoryViz.js's unpickler implements
 * (formats.md §3), checking that MARKs balance and the stream ends in STOP. */
static void check_memoryviz_subset(const unsigned char *b, size_t n) {
    size_t i = 0;
    int marks = 0, values = 0;
    assert_true(n >= 3);
    assert_int_equal(b[0], 0x80);
    assert_true(b[1] >= 2 && b[1] <= 4);
    i = 2;
    while (i < n) {
        unsigned char op = b[i++];
        uint32_t len;
        switch (op) {
        case '.': /* STOP */
            assert_int_equal(i, n);
            assert_int_equal(marks, 0);
            return;
        case 'X': /* BINUNICODE */
            len = (uint32_t)b[i] | (uint32_t)b[i + 1] << 8 | (uint32_t)b[i + 2] << 16 | (uint32_t)b[i + 3] << 24;
            i += 4 + len;
            values++;
            break;
        case 'J': /* BININT */
            i += 4;
            values++;
            break;
        case 'K': /* BININT1 */
            i += 1;
            values++;
            break;
        case 'M': /* BININT2 */
            i += 2;
            values++;
            break;
        case 0x8a: /* LONG1, at most 8 bytes for MemoryViz */
            assert_true(b[i] <= 8);
            i += 1 + b[i];
            values++;
            break;
        case 'G': /* BINFLOAT */
            i += 8;
            values++;
            break;
        case 'q': /* BINPUT */
        case 'h': /* BINGET */
            i += 1;
            break;
        case 'r': /* LONG_BINPUT */
        case 'j': /* LONG_BINGET */
            i += 4;
            break;
        case '(':
            marks++;
            break;
        case 'u': /* SETITEMS */
        case 'e': /* APPENDS */
        case 't': /* TUPLE */
        case 'l': /* LIST */
        case 'd': /* DICT */
            assert_true(marks > 0);
            marks--;
            break;
        case '}': case ']': case ')': case 's': case 'a': case 0x85: case 0x86: case 0x87: case 0x88: case 0x89:
        case 'N':
            values++;
            break;
        default:
            fail_msg("opcode 0x%02x at offset %zu is not one MemoryViz reads", op, i - 1);
        }
        assert_true(i <= n);
    }
    fail_msg("no STOP opcode");
}

/* ------------------------------------------------------------------ snapshots */

static void make_state(void **keep, int *nkeep) {
    ct_alloc_set_context("matmul");
    void *a = ct_alloc(CT_CPU, 1000);
    ct_alloc_set_context("conv2d");
    keep[(*nkeep)++] = ct_alloc(CT_CPU, 3 * MiB);
    ct_alloc_set_context("relu");
    keep[(*nkeep)++] = ct_alloc(CT_CPU, 4096);
    ct_alloc_set_context(NULL);
    ct_free(CT_CPU, a);
}

static void test_snapshot_json(void **state) {
    (void)state;
    ct_memory_record_history(true, 1000);
    void *keep[4];
    int nkeep = 0;
    make_state(keep, &nkeep);
    assert_int_equal(ct_memory_snapshot(CT_CPU, "alloc_snapshot_test.json", CT_SNAPSHOT_JSON), CT_OK);
    size_t n;
    char *j = read_file("alloc_snapshot_test.json", &n);
    assert_non_null(j);
    const char *needles[] = {
        "{\"segments\":[{\"device\":0,\"address\":",
        "\"total_size\":2097152,\"allocated_size\":4096,\"active_size\":4096,\"requested_size\":4096,",
        "\"segment_type\":\"small\",\"segment_pool_id\":[0,0],\"is_expandable\":false,",
        "\"total_size\":20971520,\"allocated_size\":3145728,",
        "\"segment_type\":\"large\"",
        "\"size\":1024,\"requested_size\":0,\"state\":\"inactive\",\"frames\":[]}",
        "\"size\":4096,\"requested_size\":4096,\"state\":\"active_allocated\","
        "\"frames\":[{\"filename\":\"ctorch\",\"line\":0,\"name\":\"relu\"}]}",
        "\"name\":\"conv2d\"",
        "\"device_traces\":[[{\"action\":\"segment_alloc\"",
        "{\"action\":\"alloc\",\"addr\":",
        "\"size\":1000,\"stream\":0,\"time_us\":",
        "\"action\":\"free_requested\"",
        "\"action\":\"free_completed\"",
        "\"action\":\"snapshot\",\"addr\":0,\"size\":0",
        "\"allocator_settings\":{",
    };
    for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
        if (!strstr(j, needles[i]))
            fail_msg("snapshot JSON lacks %s:\n%s", needles[i], j);
    free(j);
    remove("alloc_snapshot_test.json");
    for (int i = 0; i < nkeep; i++)
        ct_free(CT_CPU, keep[i]);
}

static void test_snapshot_pickle(void **state) {
    (void)state;
    ct_memory_record_history(true, 1000);
    void *keep[4];
    int nkeep = 0;
    make_state(keep, &nkeep);
    /* an OOM entry, whose address field is named device_free */
    g_dev.fail_all = true;
    assert_null(ct_alloc(CT_CPU, 30 * MiB));
    g_dev.fail_all = false;
    ct_clear_error();
    assert_int_equal(ct_memory_snapshot(CT_CPU, "alloc_snapshot_test.pickle", CT_SNAPSHOT_PICKLE), CT_OK);
    size_t n;
    unsigned char *b = (unsigned char *)read_file("alloc_snapshot_test.pickle", &n);
    assert_non_null(b);
    check_memoryviz_subset(b, n);
    assert_non_null(find_bytes(b, n, "active_allocated", 16));
    assert_non_null(find_bytes(b, n, "device_free", 11));
    assert_non_null(find_bytes(b, n, "conv2d", 6));
    free(b);
    remove("alloc_snapshot_test.pickle");
    for (int i = 0; i < nkeep; i++)
        ct_free(CT_CPU, keep[i]);
}

static void test_snapshot_errors(void **state) {
    (void)state;
    ct_clear_error();
    CT_ASSERT_ERR(ct_memory_snapshot(CT_CPU, NULL, CT_SNAPSHOT_PICKLE) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "memory_snapshot");
    CT_ASSERT_ERR(ct_memory_snapshot(CT_CPU, "x.json", (ct_snapshot_format)7) == CT_OK, CT_ERROR_VALUE,
                  "unknown snapshot format");
    CT_ASSERT_ERR(ct_memory_snapshot(CT_CPU, "/nonexistent-dir/x.pickle", CT_SNAPSHOT_PICKLE) == CT_OK,
                  CT_ERROR_IO, "cannot open");
    CT_ASSERT_ERR(ct_memory_snapshot(CT_META, "x.pickle", CT_SNAPSHOT_PICKLE) == CT_OK, CT_ERROR_DEVICE, "meta");
}

/* A small training-like run on the real CPU allocator, kept for the memviz tests and
 * tests/golden/check_snapshot.py. Its allocations are labelled by hand, so it makes
 * them with the core's functions: the dispatched factories would label them with
 * their own names ("full", "empty"). */
static void test_write_sample(void **state) {
    (void)state;
    bool was = ct_memory_caching(CT_CPU);
    ct_memory_set_caching(CT_CPU, true);
    ct_memory_record_history(true, 100000);
    static const char *names[] = {"linear", "relu", "linear", "softmax", "cross_entropy"};
    static const int64_t widths[] = {256, 256, 512, 64, 1};
    ct_alloc_set_context("parameters");
    ct_tensor *params = ct_zeros_impl(CT_SHAPE(512, 256), CT_F32, CT_CPU);
    for (int step = 0; step < 4; step++) {
        ct_scope_begin();
        ct_tensor *acts[5];
        for (int l = 0; l < 5; l++) {
            ct_alloc_set_context(names[l]);
            acts[l] = ct_empty_impl(CT_SHAPE(384 * (step + 1), widths[l]), CT_F32, CT_CPU);
            CT_ASSERT_OK(acts[l]);
        }
        ct_alloc_set_context("backward");
        for (int l = 4; l >= 0; l--) {
            ct_tensor *g = ct_empty_like_impl(acts[l]);
            CT_ASSERT_OK(g);
        }
        ct_alloc_set_context(NULL);
        ct_scope_end();
    }
    ct_alloc_set_context("optimizer");
    ct_tensor *state1 = ct_zeros_impl(ct_tensor_shape(params), ct_tensor_dim(params), CT_F32, CT_CPU);
    ct_alloc_set_context(NULL);
    assert_int_equal(ct_memory_snapshot(CT_CPU, "alloc_snapshot.pickle", CT_SNAPSHOT_PICKLE), CT_OK);
    assert_int_equal(ct_memory_snapshot(CT_CPU, "alloc_snapshot.json", CT_SNAPSHOT_JSON), CT_OK);
    size_t n;
    unsigned char *b = (unsigned char *)read_file("alloc_snapshot.pickle", &n);
    assert_non_null(b);
    check_memoryviz_subset(b, n);
    free(b);
    ct_release(state1);
    ct_release(params);
    ct_memory_record_history(false, 0);
    ct_memory_set_caching(CT_CPU, was);
}

/* ct_memory_viz, the library side of `ctorch memviz` (tests/memviz/check.sh runs the
 * tool): a page from the sample, and refusals that leave no page behind. */
static void test_memory_viz(void **state) {
    (void)state;
    assert_int_equal(ct_memory_viz("alloc_snapshot.pickle", "alloc_snapshot_viz.html"), CT_OK);
    size_t n;
    char *page = read_file("alloc_snapshot_viz.html", &n);
    assert_non_null(page);
    assert_non_null(find_bytes((const unsigned char *)page, n, "<!DOCTYPE html>", 15));
    assert_non_null(find_bytes((const unsigned char *)page, n, "\"name\":\"linear\"", 15));
    free(page);
    remove("alloc_snapshot_viz.html");
    CT_ASSERT_ERR(ct_memory_viz(NULL, "x.html") == CT_OK, CT_ERROR_NULL_ARGUMENT, "snapshot_path is NULL");
    CT_ASSERT_ERR(ct_memory_viz("does-not-exist.pickle", "x.html") == CT_OK, CT_ERROR_IO,
                  "memviz: cannot read 'does-not-exist.pickle'");
    FILE *f = fopen("viz_bad.bin", "wb");
    assert_non_null(f);
    fputs("hello", f);
    fclose(f);
    CT_ASSERT_ERR(ct_memory_viz("viz_bad.bin", "viz_bad.html") == CT_OK, CT_ERROR_FORMAT, "neither a pickle");
    f = fopen("viz_bad.bin", "wb");
    assert_non_null(f);
    fwrite("\x80\x02" "cos\nsystem\n.", 1, 14, f);
    fclose(f);
    CT_ASSERT_ERR(ct_memory_viz("viz_bad.bin", "viz_bad.html") == CT_OK, CT_ERROR_FORMAT,
                  "memviz: viz_bad.bin offset 2: global 'os.system' is not allowed");
    assert_null(fopen("viz_bad.html", "rb"));
    remove("viz_bad.bin");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_trace_ring_wraps, fake_setup, fake_teardown),
        cmocka_unit_test(test_pickle_scalars_match_python),
        cmocka_unit_test_setup_teardown(test_snapshot_json, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_pickle, fake_setup, fake_teardown),
        cmocka_unit_test(test_snapshot_errors),
        cmocka_unit_test(test_write_sample),
        cmocka_unit_test(test_memory_viz),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
