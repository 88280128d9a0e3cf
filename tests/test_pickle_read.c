/* The pickle reader without hooks (ct_value_from_pickle, plain data), as `ctorch
 * memviz` reads snapshots: Python's own pickles, round trips with the pickle writer,
 * and hostile input (every truncation of a real snapshot, random byte flips, cycles,
 * code opcodes, persistent ids) failing cleanly. The checkpoint side of the same
 * reader is tested in test_pt.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/pickle_emit.h"
#include "testutil.h"

static ct_value *read_plain(const void *data, size_t n) { return ct_value_from_pickle(data, n, NULL, "test"); }

static void test_reads_python_protocol4(void **state) {
    (void)state;
    /* pickle.dumps({'a': [1, 2.5, 'x<y', None, True, (1, 2)], 'b': -5, 'big': 2**70,
     *               'neg': -2**40, 't': (), 's': 'sss'}, protocol=4) from Python 3:
     * FRAME, SHORT_BINUNICODE, MEMOIZE, LONG1 */
    static const unsigned char py[] =
        "\x80\x04\x95\x5d\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x5d\x94\x28\x4b\x01\x47\x40\x04"
        "\x00\x00\x00\x00\x00\x00\x8c\x03\x78\x3c\x79\x94\x4e\x88\x4b\x01\x4b\x02\x86\x94\x65\x8c\x01\x62\x94\x4a"
        "\xfb\xff\xff\xff\x8c\x03\x62\x69\x67\x94\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x40\x8c\x03\x6e\x65\x67"
        "\x94\x8a\x06\x00\x00\x00\x00\x00\xff\x8c\x01\x74\x94\x29\x8c\x01\x73\x94\x8c\x03\x73\x73\x73\x94\x75\x2e";
    ct_value *doc = read_plain(py, sizeof py - 1);
    assert_non_null(doc);
    assert_int_equal(ct_value_kind(doc), CT_VALUE_DICT);
    const ct_value *a = ct_value_get(doc, "a");
    assert_non_null(a);
    assert_int_equal(ct_value_kind(a), CT_VALUE_LIST);
    assert_int_equal(ct_value_len(a), 6);
    assert_int_equal(ct_value_int(ct_value_at(a, 0)), 1);
    assert_true(ct_value_float(ct_value_at(a, 1)) == 2.5);
    assert_string_equal(ct_value_str(ct_value_at(a, 2), NULL), "x<y");
    assert_int_equal(ct_value_kind(ct_value_at(a, 3)), CT_VALUE_NONE);
    assert_int_equal(ct_value_kind(ct_value_at(a, 4)), CT_VALUE_BOOL);
    assert_int_equal(ct_value_kind(ct_value_at(a, 5)), CT_VALUE_TUPLE);
    assert_int_equal(ct_value_len(ct_value_at(a, 5)), 2);
    assert_int_equal(ct_value_int(ct_value_get(doc, "b")), -5);
    /* beyond 64 bits: an inexact float */
    assert_int_equal(ct_value_kind(ct_value_get(doc, "big")), CT_VALUE_FLOAT);
    assert_true(ct_value_float(ct_value_get(doc, "big")) == 1180591620717411303424.0);
    assert_int_equal(ct_value_int(ct_value_get(doc, "neg")), -1099511627776LL);
    assert_int_equal(ct_value_kind(ct_value_get(doc, "t")), CT_VALUE_TUPLE);
    assert_int_equal(ct_value_len(ct_value_get(doc, "t")), 0);
    char out[256];
    assert_true(ct_value_to_json(doc, out, sizeof out) > 0);
    assert_string_equal(out, "{\"a\":[1,2.5,\"x<y\",null,true,[1,2]],\"b\":-5,\"big\":1.1805916207174113e+21,"
                             "\"neg\":-1099511627776,\"t\":[],\"s\":\"sss\"}");
    ct_value_free(doc);
}

static void test_round_trip_with_writer(void **state) {
    (void)state;
    ct_pickle p;
    ct_pickle_init(&p);
    ct_pickle_proto(&p);
    ct_pickle_empty_dict(&p);
    ct_pickle_mark(&p);
    ct_pickle_unicode(&p, "ints", (size_t)-1);
    ct_pickle_empty_list(&p);
    ct_pickle_memoize(&p);
    ct_pickle_mark(&p);
    const int64_t ints[] = {0, 255, 256, 65535, 65536, -1, INT32_MIN, INT32_MAX, (int64_t)1 << 40, INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        ct_pickle_int(&p, ints[i]);
    ct_pickle_appends(&p);
    ct_pickle_unicode(&p, "again", (size_t)-1);
    ct_pickle_get(&p, 0);
    ct_pickle_setitems(&p);
    ct_pickle_stop(&p);
    assert_int_equal(ct_pickle_finish(&p, "test"), CT_OK);
    ct_value *doc = read_plain(p.buf, p.len);
    assert_non_null(doc);
    const ct_value *l = ct_value_get(doc, "ints");
    assert_int_equal(ct_value_len(l), sizeof ints / sizeof ints[0]);
    for (int64_t i = 0; i < ct_value_len(l); i++) {
        assert_int_equal(ct_value_kind(ct_value_at(l, i)), CT_VALUE_INT);
        assert_int_equal(ct_value_int(ct_value_at(l, i)), ints[i]);
    }
    /* the memo gives the same list, copied at each use */
    const ct_value *again = ct_value_get(doc, "again");
    assert_ptr_not_equal(again, l);
    assert_int_equal(ct_value_len(again), ct_value_len(l));
    assert_int_equal(ct_value_int(ct_value_at(again, 10)), INT64_MAX);
    ct_value_free(doc);
    ct_pickle_destroy(&p);
}

/* The one writer, without a storage callback, and the one reader read each other. */
static void test_round_trip_value_tree(void **state) {
    (void)state;
    static const char json[] = "{\"a\":[1,-70000,9223372036854775807,2.5,\"x<y\",null,true],\"b\":{\"c\":[]}}";
    ct_value *v = ct_value_from_json(json, sizeof json - 1, NULL);
    assert_non_null(v);
    assert_int_equal(ct_value_set_int(ct_value_get(v, "b"), 7, ct_value_new_bytes("\x00\xff", 2)), CT_OK);
    size_t len = 0;
    void *bytes = ct_value_to_pickle(v, NULL, NULL, &len);
    assert_non_null(bytes);
    assert_true(len > 2);
    ct_value *back = read_plain(bytes, len);
    free(bytes);
    assert_non_null(back);
    char want[256], got[256];
    assert_true(ct_value_to_json(ct_value_get(v, "a"), want, sizeof want) > 0);
    assert_true(ct_value_to_json(ct_value_get(back, "a"), got, sizeof got) > 0);
    assert_string_equal(got, want);
    const ct_value *d = ct_value_get(back, "b");
    assert_int_equal(ct_value_len(d), 2);
    assert_int_equal(ct_value_int(ct_value_key_at(d, 1)), 7);
    size_t n = 0;
    const char *raw = ct_value_str(ct_value_at(d, 1), &n);
    assert_int_equal(ct_value_kind(ct_value_at(d, 1)), CT_VALUE_BYTES);
    assert_int_equal(n, 2);
    assert_memory_equal(raw, "\x00\xff", 2);
    ct_value_free(back);

    /* a tensor needs a storage callback */
    ct_scope_begin();
    assert_int_equal(ct_value_set(v, "t", ct_value_new_tensor(ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU))), CT_OK);
    ct_scope_end();
    ct_clear_error();
    CT_ASSERT_ERR(ct_value_to_pickle(v, NULL, NULL, &len) != NULL, CT_ERROR_VALUE, "no storage function");
    assert_int_equal(len, 0);
    ct_value_free(v);
}

static void expect_format_error(const void *data, size_t n, const char *needle) {
    ct_clear_error();
    CT_ASSERT_ERR(read_plain(data, n) != NULL, CT_ERROR_FORMAT, needle);
}

static void test_hostile_input(void **state) {
    (void)state;
    expect_format_error("\x80\x02" "cos\nsystem\n.", 16, "global 'os.system' is not allowed");
    expect_format_error("\x80\x02K\x01R.", 6, "stack underflow in REDUCE");
    expect_format_error("\x80\x02NK\x01R.", 7, "unrecognized function NoneType");
    expect_format_error("\x80\x09N.", 4, "unsupported pickle protocol 9");
    expect_format_error("\x80\x02X\xff\xff\xff\x7f", 7, "truncated");
    expect_format_error("\x80\x02\x8c\x05" "ab", 7, "truncated");
    expect_format_error("\x80\x02h\x05.", 5, "memo index 5 was never stored");
    expect_format_error("\x80\x02N", 3, "without STOP");
    expect_format_error("\x80\x02" "e.", 4, "APPENDS without a preceding MARK");
    expect_format_error("\x80\x02(K\x01u.", 7, "odd number of items");
    expect_format_error("\x80\x02(K\x01K\x02K\x03" "d.", 11, "DICT with an odd number");
    expect_format_error("\x80\x02K\x01" "a.", 6, "stack underflow in APPEND");
    expect_format_error("\x80\x02K\x01K\x02" "a.", 8, "Can only append to lists, but got int");
    expect_format_error("\x80\x02\x85.", 4, "TUPLE1");
    expect_format_error("\x80\x02\x8f.", 4, "set values are not supported");
    /* a persistent id needs a loader's hooks */
    expect_format_error("\x80\x02(X\x07\0\0\0storagetQ.", 18, "persistent id (BINPERSID) in plain data");
    ct_clear_error();
    CT_ASSERT_ERR(read_plain(NULL, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "value_from_pickle");

    /* a list that holds itself, and one that holds itself twice (2^256 values) */
    static const unsigned char cyc[] = "\x80\x02]q\x00(h\x00" "e.";
    expect_format_error(cyc, sizeof cyc - 1, "deeper than 256 levels (or contains itself)");
    static const unsigned char cyc2[] = "\x80\x02]q\x00(h\x00h\x00" "e.";
    expect_format_error(cyc2, sizeof cyc2 - 1, "contains itself");
    /* t = (t, t) forty times over: shallow, but 2^40 values once the memo is expanded */
    unsigned char wide[2 + 2 + 40 * 5 + 1];
    size_t k = 0;
    wide[k++] = 0x80, wide[k++] = 2, wide[k++] = 'K', wide[k++] = 1;
    for (int i = 0; i < 40; i++)
        wide[k++] = 'q', wide[k++] = 0, wide[k++] = 'h', wide[k++] = 0, wide[k++] = 0x86;
    wide[k++] = '.';
    expect_format_error(wide, k, "shared references expand the object into more than");
    /* keys: ints are kept, others refused */
    static const unsigned char ikey[] = "\x80\x02}(K\x07K\x02u.";
    ct_value *doc = read_plain(ikey, sizeof ikey - 1);
    assert_non_null(doc);
    assert_int_equal(ct_value_int(ct_value_key_at(doc, 0)), 7);
    ct_value_free(doc);
    static const unsigned char tkey[] = "\x80\x02}(K\x01K\x02\x86K\x03u.";
    expect_format_error(tkey, sizeof tkey - 1, "dict keys must be str or int");
}

static unsigned char *snapshot_bytes(size_t *n) {
    ct_memory_record_history(true, 1000);
    ct_tensor *t[6];
    for (int i = 0; i < 6; i++)
        t[i] = ct_zeros(CT_SHAPE(1000 * (i + 1)), CT_F32, CT_CPU);
    for (int i = 0; i < 6; i += 2)
        ct_release(t[i]);
    assert_int_equal(ct_memory_snapshot(CT_CPU, "pickle_read_test.pickle", CT_SNAPSHOT_PICKLE), CT_OK);
    ct_memory_record_history(false, 0);
    for (int i = 1; i < 6; i += 2)
        ct_release(t[i]);
    FILE *f = fopen("pickle_read_test.pickle", "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    remove("pickle_read_test.pickle");
    *n = (size_t)len;
    return b;
}

static void test_snapshot_truncations_and_flips(void **state) {
    (void)state;
    size_t n;
    unsigned char *b = snapshot_bytes(&n);
    ct_value *doc = read_plain(b, n);
    assert_non_null(doc);
    assert_non_null(ct_value_get(doc, "segments"));
    ct_value_free(doc);
    for (size_t k = 0; k < n; k++) {
        ct_clear_error();
        assert_null(read_plain(b, k));
        assert_int_not_equal(ct_last_status(), CT_OK);
    }
    /* random corruptions: any outcome but a crash (ASan builds check the memory) */
    uint64_t x = 0x2545F4914F6CDD1DULL;
    unsigned char *m = malloc(n);
    for (int round = 0; round < 2000; round++) {
        memcpy(m, b, n);
        for (int j = 0; j < 3; j++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            m[(x >> 8) % n] = (unsigned char)x;
        }
        if ((doc = read_plain(m, n)))
            ct_value_free(doc);
    }
    ct_clear_error();
    free(m);
    free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_python_protocol4),
        cmocka_unit_test(test_round_trip_with_writer),
        cmocka_unit_test(test_hostile_input),
        cmocka_unit_test(test_round_trip_value_tree),
        cmocka_unit_test(test_snapshot_truncations_and_flips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
