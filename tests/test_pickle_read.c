/* The plain-data unpickler behind `ctorch memviz`: Python's own pickles, round trips
 * with the pickle writer, JSON output, and hostile input (every truncation of a real
 * snapshot, random byte flips, cycles, code opcodes) failing cleanly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/pickle_emit.h"
#include "util/pickle_read.h"
#include "testutil.h"

typedef struct {
    char buf[4096];
    size_t len;
} strbuf;

static bool to_buf(void *ctx, const char *s, size_t n) {
    strbuf *b = ctx;
    if (b->len + n >= sizeof b->buf)
        return false;
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = '\0';
    return true;
}

static const ct_pvalue *dict_get(const ct_pvalue *d, const char *key) {
    for (size_t i = 0; i + 1 < d->n; i += 2)
        if (d->items[i]->type == CT_PV_STR && strcmp(d->items[i]->s, key) == 0)
            return d->items[i + 1];
    return NULL;
}

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
    ct_pdoc doc;
    assert_int_equal(ct_pickle_read_plain(py, sizeof py - 1, &doc, "test"), CT_OK);
    assert_int_equal(doc.root->type, CT_PV_DICT);
    const ct_pvalue *a = dict_get(doc.root, "a");
    assert_non_null(a);
    assert_int_equal(a->type, CT_PV_LIST);
    assert_int_equal(a->n, 6);
    assert_int_equal(a->items[0]->i, 1);
    assert_true(a->items[1]->f == 2.5);
    assert_string_equal(a->items[2]->s, "x<y");
    assert_int_equal(a->items[3]->type, CT_PV_NONE);
    assert_int_equal(a->items[4]->type, CT_PV_BOOL);
    assert_int_equal(a->items[5]->n, 2);
    assert_int_equal(dict_get(doc.root, "b")->i, -5);
    assert_true(dict_get(doc.root, "big")->f == 1180591620717411303424.0);
    assert_int_equal(dict_get(doc.root, "neg")->i, -1099511627776LL);
    strbuf out = {.len = 0};
    assert_int_equal(ct_pvalue_write_json(doc.root, to_buf, &out, "test"), CT_OK);
    assert_string_equal(out.buf, "{\"a\":[1,2.5,\"x\\u003cy\",null,true,[1,2]],\"b\":-5,\"big\":1.1805916207174113e+21,"
                                 "\"neg\":-1099511627776,\"t\":[],\"s\":\"sss\"}");
    ct_pdoc_free(&doc);
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
    ct_pdoc doc;
    assert_int_equal(ct_pickle_read_plain(p.buf, p.len, &doc, "test"), CT_OK);
    const ct_pvalue *l = dict_get(doc.root, "ints");
    assert_int_equal(l->n, sizeof ints / sizeof ints[0]);
    for (size_t i = 0; i < l->n; i++) {
        assert_int_equal(l->items[i]->type, CT_PV_INT);
        assert_int_equal(l->items[i]->i, ints[i]);
    }
    assert_ptr_equal(dict_get(doc.root, "again"), l); /* the memo gives the same list */
    ct_pdoc_free(&doc);
    ct_pickle_destroy(&p);
}

static void expect_format_error(const void *data, size_t n, const char *needle) {
    ct_pdoc doc;
    ct_clear_error();
    CT_ASSERT_ERR(ct_pickle_read_plain(data, n, &doc, "test") == CT_OK, CT_ERROR_FORMAT, needle);
    assert_null(doc.root);
}

static void test_hostile_input(void **state) {
    (void)state;
    expect_format_error("\x80\x02" "cos\nsystem\n.", 16, "unsupported pickle opcode 0x63");
    expect_format_error("\x80\x02K\x01R.", 6, "unsupported pickle opcode 0x52");
    expect_format_error("\x80\x09N.", 4, "unsupported pickle protocol 9");
    expect_format_error("\x80\x02X\xff\xff\xff\x7f", 7, "truncated");
    expect_format_error("\x80\x02h\x05.", 5, "memo 5 is empty");
    expect_format_error("\x80\x02N", 3, "no STOP");
    expect_format_error("\x80\x02NN.", 5, "2 values");
    expect_format_error("\x80\x02" "e.", 4, "no MARK");
    expect_format_error("\x80\x02(K\x01u.", 7, "no matching container");
    expect_format_error("\x80\x02K\x01" "a.", 6, "APPEND without a list");
    expect_format_error("\x80\x02\x85.", 4, "TUPLE1");
    ct_pdoc doc;
    ct_clear_error();
    CT_ASSERT_ERR(ct_pickle_read_plain(NULL, 0, &doc, "test") == CT_OK, CT_ERROR_NULL_ARGUMENT, "test");

    /* a list that holds itself parses, but cannot be written out */
    static const unsigned char cyc[] = "\x80\x02]q\x00(h\x00" "e.";
    assert_int_equal(ct_pickle_read_plain(cyc, sizeof cyc - 1, &doc, "test"), CT_OK);
    strbuf out = {.len = 0};
    ct_clear_error();
    CT_ASSERT_ERR(ct_pvalue_write_json(doc.root, to_buf, &out, "test") == CT_OK, CT_ERROR_FORMAT, "deeper than 64");
    ct_pdoc_free(&doc);
    /* non-string keys */
    static const unsigned char tkey[] = "\x80\x02}(K\x01K\x02\x86K\x03u.";
    assert_int_equal(ct_pickle_read_plain(tkey, sizeof tkey - 1, &doc, "test"), CT_OK);
    ct_clear_error();
    CT_ASSERT_ERR(ct_pvalue_write_json(doc.root, to_buf, &out, "test") == CT_OK, CT_ERROR_FORMAT, "dict key");
    ct_pdoc_free(&doc);
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

static bool discard(void *ctx, const char *s, size_t n) {
    (void)s;
    *(size_t *)ctx += n;
    return *(size_t *)ctx < ((size_t)1 << 24);
}

static void test_snapshot_truncations_and_flips(void **state) {
    (void)state;
    size_t n;
    unsigned char *b = snapshot_bytes(&n);
    ct_pdoc doc;
    assert_int_equal(ct_pickle_read_plain(b, n, &doc, "test"), CT_OK);
    assert_non_null(dict_get(doc.root, "segments"));
    ct_pdoc_free(&doc);
    for (size_t k = 0; k < n; k++) {
        ct_clear_error();
        assert_int_not_equal(ct_pickle_read_plain(b, k, &doc, "test"), CT_OK);
        assert_null(doc.root);
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
        if (ct_pickle_read_plain(m, n, &doc, "test") == CT_OK) {
            size_t written = 0;
            ct_pvalue_write_json(doc.root, discard, &written, "test");
            ct_pdoc_free(&doc);
        }
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
        cmocka_unit_test(test_snapshot_truncations_and_flips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
