/* PyTorch .pt checkpoints: golden files from torch.save, round trips, hostile inputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctorch/io.h"
#include "io/pickle.h"
#include "io/pt.h"
#include "util/value.h"
#include "io/zip.h"
#include "tensor_impl.h"
#include "testutil.h"

#define DATA CT_TEST_DATA_DIR "/io/"

static ct_value *load(const char *name) {
    char path[512];
    snprintf(path, sizeof path, DATA "%s", name);
    ct_value *v = ct_load_pt(path);
    if (!v)
        print_error("loading %s: %s\n", path, ct_last_error());
    assert_non_null(v);
    return v;
}

static uint8_t *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Tensor under key in dict (scope-owned). */
static ct_tensor *get_t(const ct_value *d, const char *key) {
    ct_value *v = ct_value_get(d, key);
    if (!v)
        print_error("missing key '%s'\n", key);
    assert_non_null(v);
    assert_int_equal(ct_value_kind(v), CT_VALUE_TENSOR);
    ct_tensor *t = ct_value_tensor(v);
    assert_non_null(t);
    return t;
}

/* ------------------------------------------------------------------ golden */

static void check_dtypes(const ct_value *sd) {
    static const struct {
        const char *name;
        ct_dtype dtype;
    } cases[] = {{"bool", CT_BOOL},   {"uint8", CT_U8},      {"int8", CT_I8},         {"int16", CT_I16},
                 {"int32", CT_I32},   {"int64", CT_I64},     {"float16", CT_F16},     {"bfloat16", CT_BF16},
                 {"float32", CT_F32}, {"float64", CT_F64}};
    assert_int_equal(ct_value_len(sd), 10);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        /* Keys keep the file's order. */
        size_t kn;
        assert_string_equal(ct_value_str(ct_value_key_at(sd, (int64_t)c), &kn), cases[c].name);
        ct_tensor *t = get_t(sd, cases[c].name);
        assert_int_equal(ct_tensor_dtype(t), cases[c].dtype);
        CT_ASSERT_SHAPE(t, 2, 3);
        assert_false(ct_tensor_requires_grad(t));
        for (int64_t i = 0; i < 6; i++) {
            double want;
            switch (cases[c].dtype) {
            case CT_BOOL: want = i % 2 == 0; break;
            case CT_U8: want = (double)(i * 40); break;
            case CT_I8: want = (double)(i - 3); break;
            case CT_I16: want = (double)((i - 3) * 1000); break;
            case CT_I32: want = (double)((i - 3) * 100000); break;
            case CT_I64: want = (double)((i - 3) * 1000000000000LL); break;
            default: want = ((double)i - 2.5) * 0.5; break;
            }
            assert_true(ct_test_at(t, i) == want);
        }
    }
}

static void test_golden_dtypes(void **state) {
    (void)state;
    ct_scope_begin();
    ct_value *sd = load("dtypes.pt");
    assert_int_equal(ct_value_kind(sd), CT_VALUE_DICT);
    check_dtypes(sd);
    ct_value_free(sd);
    ct_scope_end();
}

static void test_golden_big_endian(void **state) {
    (void)state;
    ct_scope_begin();
    ct_value *sd = load("dtypes_big.pt"); /* byteorder "big", written by Python's zipfile */
    check_dtypes(sd);
    ct_value_free(sd);
    ct_scope_end();
}

static void check_shared(const ct_value *sd) {
    ct_tensor *base = get_t(sd, "base"), *view = get_t(sd, "view"), *tr = get_t(sd, "t"),
              *strided = get_t(sd, "strided"), *other = get_t(sd, "other");
    CT_ASSERT_SHAPE(base, 24);
    CT_ASSERT_SHAPE(view, 3, 4);
    CT_ASSERT_SHAPE(tr, 4, 3);
    CT_ASSERT_SHAPE(strided, 8);
    assert_true(ct_tensor_shares_storage(base, view));
    assert_true(ct_tensor_shares_storage(base, tr));
    assert_true(ct_tensor_shares_storage(base, strided));
    assert_false(ct_tensor_shares_storage(base, other));
    assert_int_equal(ct_tensor_storage_offset(view), 4);
    assert_int_equal(ct_tensor_storage_offset(strided), 1);
    assert_int_equal(ct_tensor_stride(strided, 0), 3);
    assert_int_equal(ct_tensor_stride(tr, 0), 1);
    assert_int_equal(ct_tensor_stride(tr, 1), 4);
    assert_false(ct_tensor_is_contiguous(tr));
    for (int64_t i = 0; i < 24; i++)
        assert_true(ct_test_at(base, i) == (double)i);
    for (int64_t r = 0; r < 4; r++)
        for (int64_t c = 0; c < 3; c++)
            assert_true(ct_test_at(tr, r * 3 + c) == (double)(4 + c * 4 + r));
    for (int64_t i = 0; i < 8; i++)
        assert_true(ct_test_at(strided, i) == (double)(1 + 3 * i));
    /* One storage: a write through the base shows in the views. */
    assert_int_equal(ct_tensor_set(base, CT_INDEX(4), 100.0), CT_OK);
    assert_true(ct_test_at(view, 0) == 100.0);
    assert_true(ct_test_at(tr, 0) == 100.0);
    assert_true(ct_test_at(strided, 1) == 100.0);
    assert_int_equal(ct_tensor_dtype(other), CT_I64);
}

static void test_golden_shared_storage(void **state) {
    (void)state;
    ct_scope_begin();
    ct_value *sd = load("shared.pt");
    check_shared(sd);
    ct_value_free(sd);
    ct_value *dd = load("shared_deflate.pt"); /* deflate-compressed entries */
    check_shared(dd);
    ct_value_free(dd);
    ct_scope_end();
}

static void test_golden_checkpoint(void **state) {
    (void)state;
    ct_scope_begin();
    ct_value *ck = load("checkpoint.pt");
    assert_int_equal(ct_value_kind(ck), CT_VALUE_DICT);
    ct_value *model = ct_value_get(ck, "model");
    assert_int_equal(ct_value_len(model), 2); /* _metadata is dropped */
    ct_tensor *w = get_t(model, "fc.weight");
    CT_ASSERT_SHAPE(w, 2, 3);
    for (int64_t i = 0; i < 6; i++)
        assert_true(ct_test_at(w, i) == (double)i / 4);
    ct_tensor *b = get_t(model, "fc.bias");
    assert_true(ct_test_at(b, 0) == 0.5 && ct_test_at(b, 1) == -0.5);

    ct_value *opt = ct_value_get(ck, "optimizer");
    ct_value *st = ct_value_get(opt, "state");
    assert_int_equal(ct_value_len(st), 2);
    /* Integer keys stay integers. */
    assert_int_equal(ct_value_kind(ct_value_key_at(st, 0)), CT_VALUE_INT);
    assert_int_equal(ct_value_int(ct_value_key_at(st, 1)), 1);
    ct_value *s0 = ct_value_at(st, 0);
    ct_tensor *step = get_t(s0, "step");
    assert_int_equal(ct_tensor_dim(step), 0);
    double v;
    assert_int_equal(ct_item_double(step, &v), CT_OK);
    assert_true(v == 3.0);
    assert_true(ct_test_at(get_t(s0, "exp_avg"), 5) == 0.25);
    assert_true(ct_test_at(get_t(ct_value_at(st, 1), "exp_avg"), 1) == -0.125);
    ct_value *pg = ct_value_at(ct_value_get(opt, "param_groups"), 0);
    assert_true(ct_value_float(ct_value_get(pg, "lr")) == 0.001);
    assert_true(ct_value_float(ct_value_get(pg, "eps")) == 1e-08);
    ct_value *betas = ct_value_get(pg, "betas");
    assert_int_equal(ct_value_kind(betas), CT_VALUE_TUPLE);
    assert_true(ct_value_float(ct_value_at(betas, 1)) == 0.999);
    assert_int_equal(ct_value_kind(ct_value_get(pg, "amsgrad")), CT_VALUE_BOOL);
    assert_false(ct_value_bool(ct_value_get(pg, "amsgrad")));
    assert_int_equal(ct_value_int(ct_value_at(ct_value_get(pg, "params"), 1)), 1);

    assert_int_equal(ct_value_int(ct_value_get(ck, "epoch")), 7);
    assert_int_equal(ct_value_int(ct_value_get(ck, "big")), 1LL << 40);
    assert_int_equal(ct_value_int(ct_value_get(ck, "neg")), -100000);
    assert_string_equal(ct_value_str(ct_value_get(ck, "name"), NULL), "run-1");
    assert_int_equal(ct_value_kind(ct_value_get(ck, "none")), CT_VALUE_NONE);
    size_t n;
    const char *blob = ct_value_str(ct_value_get(ck, "blob"), &n);
    assert_int_equal(ct_value_kind(ct_value_get(ck, "blob")), CT_VALUE_BYTES);
    assert_int_equal(n, 4);
    assert_memory_equal(blob, "\x00\xff" "ab", 4);
    ct_value *l = ct_value_get(ck, "list");
    assert_int_equal(ct_value_len(l), 6);
    assert_true(ct_value_float(ct_value_at(l, 1)) == 2.5);
    assert_string_equal(ct_value_str(ct_value_at(l, 2), NULL), "x");
    assert_int_equal(ct_value_int(ct_value_at(ct_value_at(l, 3), 1)), 4);
    assert_int_equal(ct_value_kind(ct_value_at(l, 4)), CT_VALUE_LIST);
    assert_int_equal(ct_value_kind(ct_value_at(l, 5)), CT_VALUE_TUPLE);
    ct_value_free(ck);
    ct_scope_end();
}

static void test_golden_params_scalar_empty(void **state) {
    (void)state;
    ct_scope_begin();
    ct_value *p = load("params.pt");
    assert_true(ct_tensor_requires_grad(get_t(p, "w")));
    assert_false(ct_tensor_requires_grad(get_t(p, "frozen")));
    assert_true(ct_tensor_requires_grad(get_t(p, "leaf")));
    assert_true(ct_test_at(get_t(p, "w"), 1) == -2.0);
    ct_value_free(p);

    ct_value *s = load("scalar_empty.pt");
    ct_tensor *sc = get_t(s, "scalar");
    assert_int_equal(ct_tensor_dim(sc), 0);
    double v;
    assert_int_equal(ct_item_double(sc, &v), CT_OK);
    assert_true(v == 3.25);
    CT_ASSERT_SHAPE(get_t(s, "empty"), 0, 3);
    CT_ASSERT_SHAPE(get_t(s, "empty_long"), 0);
    assert_int_equal(ct_tensor_dtype(get_t(s, "empty_long")), CT_I64);
    int64_t iv;
    assert_int_equal(ct_item_int64(get_t(s, "scalar_int"), &iv), CT_OK);
    assert_int_equal(iv, -7);
    ct_value_free(s);
    ct_scope_end();
}

/* ------------------------------------------------------------------ round trips */

static bool contains(const uint8_t *buf, size_t len, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(buf + i, needle, n) == 0)
            return true;
    return false;
}

static char tmp_path[256];

static const char *tmp_file(const char *name) {
    snprintf(tmp_path, sizeof tmp_path, "%s/ctorch_test_pt_%d_%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid(), name);
    return tmp_path;
}

static void test_roundtrip_golden_files(void **state) {
    (void)state;
    const char *files[] = {"dtypes.pt", "shared.pt", "checkpoint.pt", "params.pt", "scalar_empty.pt"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        ct_scope_begin();
        ct_value *a = load(files[f]);
        const char *path = tmp_file("rt.pt");
        assert_int_equal(ct_save_pt(path, a), CT_OK);
        ct_value *b = ct_load_pt(path);
        CT_ASSERT_OK(b);
        if (f == 0)
            check_dtypes(b);
        if (f == 1)
            check_shared(b);
        if (f == 2) {
            assert_int_equal(ct_value_int(ct_value_get(b, "big")), 1LL << 40);
            size_t n;
            assert_memory_equal(ct_value_str(ct_value_get(b, "blob"), &n), "\x00\xff" "ab", 4);
            assert_int_equal(ct_value_kind(ct_value_key_at(ct_value_get(ct_value_get(b, "optimizer"), "state"), 0)),
                             CT_VALUE_INT);
        }
        if (f == 3)
            assert_true(ct_tensor_requires_grad(get_t(b, "w")));
        assert_int_equal(ct_value_len(a), ct_value_len(b));
        remove(path);
        ct_value_free(a);
        ct_value_free(b);
        ct_scope_end();
    }
}

/* The layout torch.save writes: root folder named after the file, 64-byte aligned
 * payloads, records in order. */
static void test_writer_layout(void **state) {
    (void)state;
    ct_scope_begin();
    ct_value *d = ct_value_new_dict();
    ct_tensor *t = ct_from_data((float[]){0, 1, 2, 3, 4}, CT_SHAPE(5), CT_F32);
    ct_value_set(d, "a", ct_value_new_tensor(t));
    ct_value_set(d, "b", ct_value_new_tensor(ct_from_data((uint16_t[]){1, 65535}, CT_SHAPE(2), CT_U16)));
    const char *path = tmp_file("my.model.pt");
    assert_int_equal(ct_save_pt(path, d), CT_OK);
    size_t len;
    uint8_t *buf = read_all(path, &len);
    ct_zip z;
    assert_int_equal(ct_zip_open(&z, buf, len, "test"), CT_OK);
    const char *want[] = {"data.pkl", ".format_version", ".storage_alignment", "byteorder", "data/0", "data/1",
                          "version", ".data/serialization_id"};
    char root[64];
    snprintf(root, sizeof root, "ctorch_test_pt_%d_my.model/", (int)getpid());
    assert_int_equal(z.count, 8);
    for (int i = 0; i < 8; i++) {
        assert_memory_equal(z.entries[i].name, root, strlen(root));
        assert_string_equal(z.entries[i].name + strlen(root), want[i]);
        assert_int_equal(z.entries[i].data_offset % 64, 0);
        assert_int_equal(z.entries[i].method, 0);
    }
    /* uint16 goes through an untyped storage and _rebuild_tensor_v3 */
    assert_true(contains(buf, len, "torch.storage\nUntypedStorage\n"));
    assert_true(contains(buf, len, "_rebuild_tensor_v3"));
    ct_zip_close(&z);
    ct_value *back = ct_load_pt(path);
    CT_ASSERT_OK(back);
    ct_tensor *u = get_t(back, "b");
    assert_int_equal(ct_tensor_dtype(u), CT_U16);
    assert_true(ct_test_at(u, 1) == 65535.0);
    assert_true(ct_test_at(get_t(back, "a"), 4) == 4.0);
    free(buf);
    remove(path);
    ct_value_free(back);
    ct_value_free(d);
    ct_scope_end();
}

/* Thousands of records: the lookups stay correct (and fast) past small archives. */
static void test_many_tensors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_value *d = ct_value_new_dict();
    ct_tensor *shared = ct_from_data((int32_t[]){7, 8, 9}, CT_SHAPE(3), CT_I32);
    char key[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(key, sizeof key, "layer%d.w", i);
        ct_tensor *t = i % 3 == 0 ? shared : ct_from_data((int32_t[]){i, -i}, CT_SHAPE(2), CT_I32);
        ct_value_set(d, key, ct_value_new_tensor(t));
    }
    const char *path = tmp_file("many.pt");
    assert_int_equal(ct_save_pt(path, d), CT_OK);
    ct_value *b = ct_load_pt(path);
    CT_ASSERT_OK(b);
    assert_int_equal(ct_value_len(b), 3000);
    ct_tensor *first = get_t(b, "layer0.w");
    for (int i = 0; i < 3000; i++) {
        snprintf(key, sizeof key, "layer%d.w", i);
        ct_tensor *t = get_t(b, key);
        if (i % 3 == 0) {
            assert_true(ct_tensor_shares_storage(t, first));
            assert_true(ct_test_at(t, 2) == 9.0);
        } else {
            assert_false(ct_tensor_shares_storage(t, first));
            assert_true(ct_test_at(t, 1) == (double)-i);
        }
    }
    remove(path);
    ct_value_free(b);
    ct_value_free(d);
    ct_scope_end();
}

static void test_zip64_reader(void **state) {
    (void)state;
    ct_scope_begin();
    ct_value *a = load("shared.pt");
    const char *path = tmp_file("z64.pt");
    assert_int_equal(ct_pt_save_impl(path, a, true), CT_OK);
    ct_value *b = ct_load_pt(path);
    CT_ASSERT_OK(b);
    check_shared(b);
    remove(path);
    ct_value_free(a);
    ct_value_free(b);
    ct_scope_end();
}

/* ------------------------------------------------------------------ hostile inputs */

/* An in-memory archive "archive/..." holding data.pkl = pkl, a version record and
 * the given storage records. */
typedef struct rec {
    const char *name;
    const void *data;
    size_t size;
} rec;

static uint8_t *make_archive(const void *pkl, size_t pkl_len, const rec *extra, int nextra, size_t *len) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_non_null(f);
    ct_zip_writer w;
    ct_zip_writer_init(&w, f, "test");
    assert_int_equal(ct_zip_write_entry(&w, "archive/data.pkl", pkl, pkl_len), CT_OK);
    for (int i = 0; i < nextra; i++)
        assert_int_equal(ct_zip_write_entry(&w, extra[i].name, extra[i].data, extra[i].size), CT_OK);
    assert_int_equal(ct_zip_write_entry(&w, "archive/version", "3\n", 2), CT_OK);
    assert_int_equal(ct_zip_writer_finish(&w), CT_OK);
    fclose(f);
    *len = n;
    return (uint8_t *)buf;
}

/* Loads a pickle wrapped in an archive with one float storage "0" of 4 elements, and
 * expects an error containing needle. */
static void expect_pickle_status(const char *pkl, size_t pkl_len, ct_status st, const char *needle) {
    float data[4] = {1, 2, 3, 4};
    rec r = {"archive/data/0", data, sizeof data};
    size_t len;
    uint8_t *buf = make_archive(pkl, pkl_len, &r, 1, &len);
    ct_value *v = ct_pt_load_buffer(buf, len, "hostile.pt");
    if (v) {
        print_error("loaded, expected an error mentioning '%s'\n", needle);
        ct_value_free(v);
    }
    CT_ASSERT_ERR(v != NULL, st, needle);
    free(buf);
}
static void expect_pickle_error(const char *pkl, size_t pkl_len, const char *needle) {
    expect_pickle_status(pkl, pkl_len, CT_ERROR_FORMAT, needle);
}
#define PKL(s) s, sizeof(s) - 1

/* A valid tensor pickle prefix: _rebuild_tensor_v2((pid), */
#define STORAGE_PID "(X\x07\0\0\0storagectorch\nFloatStorage\nX\x01\0\0\0" "0X\x03\0\0\0cpuK\x04tQ"
#define REBUILD_FN "ctorch._utils\n_rebuild_tensor_v2\n"
#define REBUILD REBUILD_FN "("

/* Note [Storages as tensors]: tensors over one untyped storage record, of one dtype
 * and of another. Those of one dtype share a storage (and keep their offsets); the
 * other dtype sees the same bytes through a storage of its own. */
static void test_untyped_storage_two_dtypes(void **state) {
    (void)state;
#define PID_U "(X\x07\0\0\0storagectorch.storage\nUntypedStorage\nX\x01\0\0\0" "0X\x03\0\0\0cpuK\x08tQ"
#define V3(off, n, dtype) "ctorch._utils\n_rebuild_tensor_v3\n(" PID_U off "(" n "t(K\x01t\x89" \
                          "ccollections\nOrderedDict\n)R" "ctorch\n" dtype "\ntR"
    const char pkl[] = "\x80\x02](" V3("K\x00", "K\x04", "uint16") V3("K\x00", "K\x02", "int32")
                       V3("K\x02", "K\x02", "uint16") "e.";
#undef V3
#undef PID_U
    uint16_t data[4] = {1, 2, 3, 4};
    rec r = {"archive/data/0", data, sizeof data};
    size_t len;
    uint8_t *buf = make_archive(pkl, sizeof pkl - 1, &r, 1, &len);
    ct_scope_begin();
    ct_value *v = ct_pt_load_buffer(buf, len, NULL);
    CT_ASSERT_OK(v);
    assert_int_equal(ct_value_len(v), 3);
    ct_tensor *a = ct_value_tensor(ct_value_at(v, 0)), *b = ct_value_tensor(ct_value_at(v, 1)),
              *c = ct_value_tensor(ct_value_at(v, 2));
    assert_int_equal(ct_tensor_dtype(a), CT_U16);
    assert_int_equal(ct_tensor_dtype(b), CT_I32);
    assert_true(ct_test_at(a, 3) == 4.0);
    assert_true(ct_test_at(b, 0) == 65536.0 * 2 + 1); /* little-endian bytes 01 00 02 00 */
    assert_true(ct_test_at(c, 0) == 3.0);
    assert_true(ct_tensor_shares_storage(a, c));
    assert_int_equal(ct_tensor_storage_offset(c), 2);
    assert_false(ct_tensor_shares_storage(a, b));
    assert_ptr_equal(ct_tensor_data(a), ct_tensor_data(b)); /* the same bytes */
    assert_int_equal(ct_tensor_set(a, CT_INDEX(0), 7.0), CT_OK);
    assert_true(ct_test_at(b, 0) == 65536.0 * 2 + 7);
    /* and back: two records (one per storage), the same values */
    const char *path = tmp_file("untyped.pt");
    assert_int_equal(ct_save_pt(path, v), CT_OK);
    ct_value *w = ct_load_pt(path);
    CT_ASSERT_OK(w);
    assert_true(ct_test_at(ct_value_tensor(ct_value_at(w, 0)), 0) == 7.0);
    assert_true(ct_test_at(ct_value_tensor(ct_value_at(w, 1)), 0) == 65536.0 * 2 + 7);
    assert_true(ct_tensor_shares_storage(ct_value_tensor(ct_value_at(w, 0)), ct_value_tensor(ct_value_at(w, 2))));
    remove(path);
    ct_value_free(w);
    ct_value_free(v);
    ct_scope_end();
    free(buf);
}

/* torch.Size, torch.device and dtypes as plain values; bytes via _codecs.encode. */
static void test_value_globals(void **state) {
    (void)state;
    const char pkl[] = "\x80\x02}(X\x01\0\0\0sctorch\nSize\n(K\x02K\x03t\x85R"
                       "X\x01\0\0\0dctorch\ndevice\nX\x04\0\0\0cudaK\x01\x86R"
                       "X\x01\0\0\0tctorch\nbfloat16\n"
                       "X\x01\0\0\0bc_codecs\nencode\nX\x03\0\0\0\xc3\xbfzX\x06\0\0\0latin1\x86R"
                       "X\x01\0\0\0occollections\nOrderedDict\n)\x81u.";
    size_t len;
    uint8_t *buf = make_archive(pkl, sizeof pkl - 1, NULL, 0, &len);
    ct_value *v = ct_pt_load_buffer(buf, len, NULL);
    CT_ASSERT_OK(v);
    ct_value *sz = ct_value_get(v, "s");
    assert_int_equal(ct_value_kind(sz), CT_VALUE_TUPLE);
    assert_int_equal(ct_value_int(ct_value_at(sz, 1)), 3);
    assert_string_equal(ct_value_str(ct_value_get(v, "d"), NULL), "cuda:1");
    assert_string_equal(ct_value_str(ct_value_get(v, "t"), NULL), "torch.bfloat16");
    size_t n;
    const char *b = ct_value_str(ct_value_get(v, "b"), &n);
    assert_int_equal(n, 2);
    assert_memory_equal(b, "\xff" "z", 2);
    assert_int_equal(ct_value_kind(ct_value_get(v, "o")), CT_VALUE_DICT);
    ct_value_free(v);
    free(buf);
    expect_pickle_error(PKL("\x80\x02" "c_codecs\nencode\nX\x02\0\0\0\xe2\x82X\x06\0\0\0latin1\x86R."), "not latin-1");
    expect_pickle_error(PKL("\x80\x02" "c_codecs\nencode\nX\x01\0\0\0aX\x05\0\0\0utf-8\x86R."), "_codecs.encode");
    expect_pickle_error(PKL("\x80\x02" "ctorch\nFloatStorage\n."), "not a value");
}

static void test_hostile_globals(void **state) {
    (void)state;
    expect_pickle_error(PKL("\x80\x02" "cos\nsystem\nX\x02\0\0\0lsR."),
                        "load_pt: data.pkl offset 2: global 'os.system' is not allowed (weights-only loading)");
    expect_pickle_error(PKL("\x80\x02" "cbuiltins\neval\nX\x01\0\0\0" "1\x85R."), "global 'builtins.eval'");
    expect_pickle_error(PKL("\x80\x02" "c__builtin__\nexec\n."), "global '__builtin__.exec'");
    expect_pickle_error(PKL("\x80\x02" "cbuiltins\ngetattr\n."), "global 'builtins.getattr'");
    expect_pickle_error(PKL("\x80\x02" "ctorch\nload\n."), "global 'torch.load'");
    expect_pickle_error(PKL("\x80\x02" "cposix\nsystem\n."), "not allowed");
    /* REDUCE on something that is not an allowed function. */
    expect_pickle_error(PKL("\x80\x02" "X\x01\0\0\0a)R."), "Trying to call reduce for unrecognized function str");
    expect_pickle_error(PKL("\x80\x02" "ctorch\nTensor\n)R."), "unsupported function torch.Tensor");
    /* BUILD on objects other than OrderedDict / tensors. */
    expect_pickle_error(PKL("\x80\x02]}b."), "Can only build Tensor, Parameter or OrderedDict objects, but got list");
    expect_pickle_error(PKL("\x80\x02}}b."), "but got dict");
    /* INST/OBJ/STACK_GLOBAL/FRAME and friends */
    expect_pickle_error(PKL("\x80\x02ios\nsystem\n."), "Unsupported operand 105 ('i')");
    expect_pickle_error(PKL("\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00."), "Unsupported operand 149");
    expect_pickle_error(PKL("\x80\x02\x93."), "Unsupported operand 147");
    expect_pickle_error(PKL("\x80\x02" "B\x01\0\0\0x."), "Unsupported operand 66");
    /* persistent ids other than storages */
    expect_pickle_error(PKL("\x80\x02(X\x03\0\0\0" "fooK\x01tQ."), "Only persistent_load of storage");
    expect_pickle_error(PKL("\x80\x02" "(X\x07\0\0\0storagecos\nsystem\nX\x01\0\0\0" "0X\x03\0\0\0cpuK\x04tQ."),
                        "global 'os.system'");
}

static void test_hostile_stack(void **state) {
    (void)state;
    expect_pickle_error(PKL("\x80\x02."), "stack underflow in STOP");
    expect_pickle_error(PKL("\x80\x02" "a."), "stack underflow in APPEND");
    expect_pickle_error(PKL("\x80\x02]" "K\x01" "(a."), "stack underflow in APPEND");
    expect_pickle_error(PKL("\x80\x02" "K\x01t."), "TUPLE without a preceding MARK");
    expect_pickle_error(PKL("\x80\x02(K\x01."), "MARKs still open");
    expect_pickle_error(PKL("\x80\x02K\x01\x87."), "stack underflow in TUPLE3");
    expect_pickle_error(PKL("\x80\x02}(K\x01u."), "odd number");
    expect_pickle_error(PKL("\x80\x02" "K\x01K\x02K\x03s."), "only dicts take items");
    expect_pickle_error(PKL("\x80\x02}K\x01" "a."), "Can only append to lists, but got dict");
    expect_pickle_error(PKL("\x80\x02h\x05."), "memo index 5 was never stored");
    expect_pickle_error(PKL("\x80\x02]r\xff\xff\xff\x7f."), "memo index 2147483647 is out of range");
    expect_pickle_error(PKL("\x80\x02X\xff\xff\xff\x7f" "abc."), "truncated");
    expect_pickle_error(PKL("\x80\x02K"), "truncated");
    expect_pickle_error(PKL("\x80\x02]"), "ends without STOP");
    expect_pickle_error(PKL("\x80\x02\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09."), "does not fit in int64");
    expect_pickle_error(PKL("\x80\x02\x8f."), "set values are not supported");
    expect_pickle_error(PKL("\x80\x02}(]K\x01u."), "dict keys must be str or int, got list");
    /* A list that contains itself, and deep nesting. */
    expect_pickle_error(PKL("\x80\x02]q\x00h\x00" "a."), "deeper than 256 levels");
    char deep[3000];
    size_t n = 0;
    deep[n++] = (char)0x80;
    deep[n++] = 2;
    for (int i = 0; i < 1200; i++)
        deep[n++] = ']';
    for (int i = 0; i < 1199; i++)
        deep[n++] = 'a';
    deep[n++] = '.';
    expect_pickle_error(deep, n, "deeper than 256 levels");
    /* 200 levels are fine */
    n = 2;
    for (int i = 0; i < 200; i++)
        deep[n++] = ']';
    for (int i = 0; i < 199; i++)
        deep[n++] = 'a';
    deep[n++] = '.';
    float data[4] = {0};
    rec r = {"archive/data/0", data, sizeof data};
    size_t alen;
    uint8_t *abuf = make_archive(deep, n, &r, 1, &alen);
    ct_value *v = ct_pt_load_buffer(abuf, alen, NULL);
    CT_ASSERT_OK(v);
    ct_value *inner = v;
    for (int i = 0; i < 199; i++)
        inner = ct_value_at(inner, 0);
    assert_int_equal(ct_value_kind(inner), CT_VALUE_LIST);
    assert_int_equal(ct_value_len(inner), 0);
    ct_value_free(v);
    free(abuf);
    /* Shared references doubling at each level: 2^40 values if expanded. */
    char bomb[400];
    n = 0;
    bomb[n++] = (char)0x80;
    bomb[n++] = 2;
    bomb[n++] = ']';
    for (int i = 0; i < 40; i++) {
        bomb[n++] = 'q';
        bomb[n++] = (char)i;
        bomb[n++] = 'h';
        bomb[n++] = (char)i;
        bomb[n++] = 'h';
        bomb[n++] = (char)i;
        bomb[n++] = (char)0x86;
    }
    bomb[n++] = '.';
    expect_pickle_error(bomb, n, "more than");
}

static void test_hostile_tensors(void **state) {
    (void)state;
    /* A valid tensor first, so the harness itself is known good. */
    const char ok[] = "\x80\x02" REBUILD STORAGE_PID "K\x00(K\x04t(K\x01t\x89" "ccollections\nOrderedDict\n)RtR.";
    float data[4] = {1, 2, 3, 4};
    rec r = {"archive/data/0", data, sizeof data};
    size_t len;
    uint8_t *buf = make_archive(ok, sizeof ok - 1, &r, 1, &len);
    ct_scope_begin();
    ct_value *v = ct_pt_load_buffer(buf, len, NULL);
    CT_ASSERT_OK(v);
    assert_true(ct_test_at(ct_value_tensor(v), 3) == 4.0);
    ct_value_free(v);
    ct_scope_end();
    free(buf);

    /* offset past the end, sizes past the end, negative strides, numel overflow */
    expect_pickle_error(PKL("\x80\x02" REBUILD STORAGE_PID "K\x05(K\x01t(K\x01t\x89NtR."),
                        "needs storage element 5 but the storage holds 4 elements");
    expect_pickle_error(PKL("\x80\x02" REBUILD STORAGE_PID "K\x00(K\x05t(K\x01t\x89NtR."), "needs storage element 4");
    expect_pickle_error(PKL("\x80\x02" REBUILD STORAGE_PID "K\x00(K\x02t(K\x04t\x89NtR."), "needs storage element 4");
    expect_pickle_error(PKL("\x80\x02" REBUILD STORAGE_PID "K\x03(K\x02tJ\xff\xff\xff\xff\x85\x89NtR."),
                        "negative stride -1");
    expect_pickle_error(PKL("\x80\x02" REBUILD STORAGE_PID "J\xff\xff\xff\xff(K\x01t(K\x01t\x89NtR."),
                        "negative storage offset");
    expect_pickle_error(PKL("\x80\x02" REBUILD STORAGE_PID
                            "K\x00(\x8a\x08\0\0\0\0\0\0\0\x40\x8a\x08\0\0\0\0\0\0\0\x40t(K\x01K\x01t\x89NtR."),
                        "tensor size overflows");
    expect_pickle_error(PKL("\x80\x02" REBUILD STORAGE_PID "K\x00(K\x02K\x02t(K\x01t\x89NtR."),
                        "size has 2 dimensions but stride has 1");
    /* storage numel disagreeing with the record, numel * itemsize overflowing */
    expect_pickle_error(PKL("\x80\x02(X\x07\0\0\0storagectorch\nFloatStorage\nX\x01\0\0\0" "0X\x03\0\0\0cpuK\x05tQ."),
                        "needs 20 bytes (5 elements of 4 bytes) but its record holds 16");
    expect_pickle_error(PKL("\x80\x02(X\x07\0\0\0storagectorch\nFloatStorage\nX\x01\0\0\0"
                            "0X\x03\0\0\0cpu\x8a\x08\0\0\0\0\0\0\0\x40tQ."),
                        "overflows");
    expect_pickle_error(PKL("\x80\x02(X\x07\0\0\0storagectorch\nFloatStorage\nX\x01\0\0\0" "7X\x03\0\0\0cpuK\x04tQ."),
                        "storage record 'archive/data/7' is missing");
    expect_pickle_error(PKL("\x80\x02(X\x07\0\0\0storagectorch\nFloatStorage\nX\x05\0\0\0../..X\x03\0\0\0cpuK\x04tQ."),
                        "invalid storage key");
    expect_pickle_status(PKL("\x80\x02(X\x07\0\0\0storagectorch\nFloatStorage\nX\x01\0\0\0" "0X\x03\0\0\0xlaK\x04tQ."),
                         CT_ERROR_NOT_IMPLEMENTED, "location 'xla'");
    expect_pickle_error(PKL("\x80\x02" REBUILD "K\x01K\x00(K\x01t(K\x01t\x89NtR."),
                        "first argument must be a storage");
    /* _rebuild_from_type_v2: plain tensors only, wrapping a tensor rebuild function */
    const char wrapped[] = "\x80\x02" "ctorch._tensor\n_rebuild_from_type_v2\n(" REBUILD_FN "ctorch\nTensor\n("
                           STORAGE_PID "K\x00(K\x04t(K\x01t\x89Nt}" "tR.";
    buf = make_archive(wrapped, sizeof wrapped - 1, &r, 1, &len);
    ct_scope_begin();
    v = ct_pt_load_buffer(buf, len, NULL);
    CT_ASSERT_OK(v);
    assert_true(ct_test_at(ct_value_tensor(v), 2) == 3.0);
    ct_value_free(v);
    ct_scope_end();
    free(buf);
    expect_pickle_error(PKL("\x80\x02" "ctorch._tensor\n_rebuild_from_type_v2\n(ccollections\nOrderedDict\n"
                            "ctorch\nTensor\n)NtR."),
                        "must wrap a tensor rebuild function, got collections.OrderedDict");
    expect_pickle_error(PKL("\x80\x02" "ctorch._tensor\n_rebuild_from_type_v2\n(" REBUILD_FN
                            "ctorch.nn.parameter\nParameter\n(" STORAGE_PID "K\x00(K\x04t(K\x01t\x89Nt}X\x01\0\0\0aK\x01stR."),
                        "tensors with Python attributes are not supported");
    expect_pickle_error(PKL("\x80\x02" "ctorch._tensor\n_rebuild_from_type_v2\n(" REBUILD_FN
                            "ctorch\nSize\n(" STORAGE_PID "K\x00(K\x04t(K\x01t\x89NtNtR."),
                        "only supported for torch.Tensor and Parameter, got torch.Size");
    /* requires_grad on an integer tensor */
    expect_pickle_error(PKL("\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n((X\x07\0\0\0storagectorch\nIntStorage\n"
                            "X\x01\0\0\0" "0X\x03\0\0\0cpuK\x04tQK\x00(K\x01t(K\x01t\x88NtR."),
                        "requires_grad");
}

static void expect_load_error(const uint8_t *buf, size_t len, ct_status st, const char *needle) {
    ct_value *v = ct_pt_load_buffer(buf, len, "x.pt");
    if (v) {
        print_error("loaded, expected an error mentioning '%s'\n", needle);
        ct_value_free(v);
    }
    CT_ASSERT_ERR(v != NULL, st, needle);
}

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static void wr32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* Offset of the end record and of the n-th central entry of a buffer. */
static size_t eocd_of(const uint8_t *b, size_t len) {
    for (size_t p = len - 22;; p--)
        if (rd32(b + p) == 0x06054b50u)
            return p;
}
static size_t central_of(const uint8_t *b, size_t len, int n) {
    size_t p = rd32(b + eocd_of(b, len) + 16);
    for (int i = 0; i < n; i++)
        p += 46u + (size_t)(b[p + 28] | b[p + 29] << 8) + (size_t)(b[p + 30] | b[p + 31] << 8) +
             (size_t)(b[p + 32] | b[p + 33] << 8);
    return p;
}

static void test_hostile_zip(void **state) {
    (void)state;
    size_t len;
    uint8_t *orig = read_all(DATA "shared.pt", &len);
    uint8_t *b = malloc(len);
    /* truncated archives, at several lengths */
    size_t cuts[] = {0, 3, 21, len / 2, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++)
        expect_load_error(orig, cuts[i], CT_ERROR_FORMAT, cuts[i] < 4 ? "not a torch.save zip" : "zip archive");
    /* bogus entry counts and directory offsets, in the ZIP64 end record torch writes */
    size_t z64 = 0;
    for (size_t p = len - 4; p > 0 && !z64; p--)
        if (rd32(orig + p) == 0x06064b50u)
            z64 = p;
    assert_true(z64 > 0);
    memcpy(b, orig, len);
    wr32(b + z64 + 24, 0x7FFFFFF0u);
    wr32(b + z64 + 32, 0x7FFFFFF0u);
    expect_load_error(b, len, CT_ERROR_FORMAT, "more than a");
    memcpy(b, orig, len);
    wr32(b + z64 + 48, (uint32_t)len);
    expect_load_error(b, len, CT_ERROR_FORMAT, "lies outside the file");
    memcpy(b, orig, len);
    wr32(b + len - 22 - 20 + 8, 0x7FFFFFF0u); /* the locator */
    expect_load_error(b, len, CT_ERROR_FORMAT, "ZIP64 end record pointer");
    /* and in a plain end record */
    size_t plen;
    uint8_t *plain = make_archive(PKL("\x80\x02N."), NULL, 0, &plen);
    size_t e = eocd_of(plain, plen);
    plain[e + 8] = plain[e + 10] = 0xF0;
    expect_load_error(plain, plen, CT_ERROR_FORMAT, "more than a");
    plain[e + 8] = plain[e + 10] = 2;
    wr32(plain + e + 16, (uint32_t)plen - 10);
    expect_load_error(plain, plen, CT_ERROR_FORMAT, "lies outside the file");
    free(plain);
    /* an entry pointing outside the file, or at its neighbour's header */
    memcpy(b, orig, len);
    size_t c1 = central_of(b, len, 1);
    wr32(b + c1 + 42, 0x7FFFFFF0u);
    expect_load_error(b, len, CT_ERROR_FORMAT, "where there is no local header");
    memcpy(b, orig, len);
    wr32(b + c1 + 42, rd32(b + central_of(b, len, 0) + 42));
    expect_load_error(b, len, CT_ERROR_FORMAT, "does not match the central entry");
    /* a size that runs past the end / over the next entry */
    memcpy(b, orig, len);
    wr32(b + c1 + 20, 0xFFFFFFF0u);
    wr32(b + c1 + 24, 0xFFFFFFF0u);
    expect_load_error(b, len, CT_ERROR_FORMAT, "runs past the end");
    memcpy(b, orig, len);
    wr32(b + c1 + 20, rd32(b + c1 + 20) + 100);
    wr32(b + c1 + 24, rd32(b + c1 + 24) + 100);
    expect_load_error(b, len, CT_ERROR_FORMAT, "overlaps");
    /* a corrupted payload */
    memcpy(b, orig, len);
    size_t data0 = 0;
    {
        ct_zip z;
        assert_int_equal(ct_zip_open(&z, b, len, "t"), CT_OK);
        data0 = (size_t)ct_zip_find(&z, "shared/data/0")->data_offset;
        ct_zip_close(&z);
    }
    b[data0] ^= 0xFF;
    expect_load_error(b, len, CT_ERROR_FORMAT, "CRC-32 mismatch");
    /* a deflated entry claiming more than deflate can produce (a forged size) */
    uint8_t *dfl = read_all(DATA "shared_deflate.pt", &plen);
    {
        ct_zip z;
        assert_int_equal(ct_zip_open(&z, dfl, plen, "t"), CT_OK);
        assert_int_equal(ct_zip_find(&z, "shared/data/0")->method, 8);
        ct_zip_close(&z);
    }
    for (size_t p = 0; p + 4 <= plen; p++)
        if (rd32(dfl + p) == 0x02014b50u && dfl[p + 10] == 8 && memcmp(dfl + p + 46, "shared/data/0", 13) == 0)
            wr32(dfl + p + 24, 0xF0000000u);
    expect_load_error(dfl, plen, CT_ERROR_FORMAT, "more than deflate can produce");
    free(dfl);
    /* compression method other than stored/deflate */
    memcpy(b, orig, len);
    b[c1 + 10] = 12;
    expect_load_error(b, len, CT_ERROR_FORMAT, "compression method 12");
    /* encrypted */
    memcpy(b, orig, len);
    b[c1 + 8] |= 1;
    expect_load_error(b, len, CT_ERROR_FORMAT, "encrypted");
    free(b);
    free(orig);

    /* duplicate names */
    uint8_t *dup;
    rec r[2] = {{"archive/data/0", "abcd", 4}, {"archive/data/0", "efgh", 4}};
    dup = make_archive(PKL("\x80\x02N."), r, 2, &len);
    expect_load_error(dup, len, CT_ERROR_FORMAT, "the name 'archive/data/0' appears twice");
    free(dup);
    /* no root folder, no version, bad version, bad byteorder */
    char *mb = NULL;
    size_t mn = 0;
    FILE *f = open_memstream(&mb, &mn);
    ct_zip_writer w;
    ct_zip_writer_init(&w, f, "t");
    ct_zip_write_entry(&w, "data.pkl", "\x80\x02N.", 4);
    ct_zip_writer_finish(&w);
    fclose(f);
    expect_load_error((uint8_t *)mb, mn, CT_ERROR_FORMAT, "not in a subdirectory");
    free(mb);
    rec bo = {"archive/byteorder", "middle", 6};
    dup = make_archive(PKL("\x80\x02N."), &bo, 1, &len);
    expect_load_error(dup, len, CT_ERROR_FORMAT, "byteorder record says 'middle'");
    free(dup);
    rec v9 = {"archive/.data/version", "9", 1};
    dup = make_archive(PKL("\x80\x02N."), &v9, 1, &len);
    expect_load_error(dup, len, CT_ERROR_FORMAT, "unsupported file format version '9'");
    free(dup);
}

static void test_legacy_and_tar_refused(void **state) {
    (void)state;
    uint8_t legacy[64] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, '.'};
    expect_load_error(legacy, sizeof legacy, CT_ERROR_NOT_IMPLEMENTED, "legacy torch.save format");
    uint8_t tar[512];
    memset(tar, 0, sizeof tar);
    memcpy(tar, "storages", 8);
    memcpy(tar + 257, "ustar", 5);
    expect_load_error(tar, sizeof tar, CT_ERROR_NOT_IMPLEMENTED, "tar archive");
    expect_load_error((const uint8_t *)"{\"a\": 1}", 8, CT_ERROR_FORMAT, "not a torch.save zip archive");
}

/* ct_load and ct_load_buffer choose this reader by content. */
static void test_format_detection(void **state) {
    (void)state;
    ct_scope_begin();
    ct_value *v = ct_load(DATA "shared.pt");
    CT_ASSERT_OK(v);
    check_shared(v);
    ct_value_free(v);
    size_t len;
    uint8_t *buf = read_all(DATA "dtypes.pt", &len);
    v = ct_load_buffer(buf, len);
    CT_ASSERT_OK(v);
    check_dtypes(v);
    ct_value_free(v);
    free(buf);
    uint8_t legacy[64] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, '.'};
    CT_ASSERT_ERR(ct_load_buffer(legacy, sizeof legacy) != NULL, CT_ERROR_NOT_IMPLEMENTED, "save it again with torch.save");
    ct_scope_end();
}

static void test_error_inputs(void **state) {
    (void)state;
    CT_ASSERT_ERR(ct_load_pt(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "path");
    CT_ASSERT_ERR(ct_load_pt("/nonexistent/x.pt") != NULL, CT_ERROR_IO, "cannot open '/nonexistent/x.pt'");
    CT_ASSERT_ERR(ct_pt_load_buffer(NULL, 4, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_load_pt(CT_TEST_DATA_DIR) != NULL, CT_ERROR_IO, "not a regular file");
    const char *empty = tmp_file("empty.pt");
    FILE *f = fopen(empty, "wb");
    fclose(f);
    CT_ASSERT_ERR(ct_load_pt(empty) != NULL, CT_ERROR_FORMAT, "is not a torch.save zip archive");
    remove(empty);
    ct_value *d = ct_value_new_dict();
    CT_ASSERT_ERR(ct_save_pt(NULL, d) == CT_OK, CT_ERROR_NULL_ARGUMENT, "path");
    CT_ASSERT_ERR(ct_save_pt(tmp_file("x.pt"), NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "obj");
    CT_ASSERT_ERR(ct_save_pt("/nonexistent/dir/x.pt", d) == CT_OK, CT_ERROR_IO, "cannot create '/nonexistent/dir/x.pt'");
    /* Meta tensors have no data to write. */
    ct_scope_begin();
    ct_value_set(d, "m", ct_value_new_tensor(ct_empty(CT_SHAPE(2), CT_F32, CT_META)));
    CT_ASSERT_ERR(ct_save_pt(tmp_file("m.pt"), d) == CT_OK, CT_ERROR_DEVICE, "save_pt: cannot save a meta tensor");
    ct_scope_end();
    ct_value_free(d);
}

/* ------------------------------------------------------------------ files for PyTorch */

/* `test_pt --write-roundtrip DIR` writes the files tests/golden/check_pt_roundtrip.py
 * loads with torch.load(weights_only=True). Values follow the formulas of gen_pt.py. */
static ct_value *tensor_value(const void *data, const int64_t *shape, int ndim, ct_dtype dtype) {
    return ct_value_new_tensor(ct_from_data(data, shape, ndim, dtype));
}

static int write_roundtrip(const char *dir) {
    char path[512];
    ct_scope_begin();
    /* every dtype PyTorch 1.13 has, with gen_pt.py's values */
    ct_value *sd = ct_value_new_dict();
    static const ct_dtype dts[] = {CT_BOOL, CT_U8, CT_I8, CT_I16, CT_I32, CT_I64, CT_F16, CT_BF16, CT_F32, CT_F64};
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        ct_tensor *t = ct_empty(CT_SHAPE(2, 3), dts[d], CT_CPU);
        for (int64_t i = 0; i < 6; i++) {
            double v;
            switch (dts[d]) {
            case CT_BOOL: v = i % 2 == 0; break;
            case CT_U8: v = (double)(i * 40); break;
            case CT_I8: v = (double)(i - 3); break;
            case CT_I16: v = (double)((i - 3) * 1000); break;
            case CT_I32: v = (double)((i - 3) * 100000); break;
            case CT_I64: v = (double)((i - 3) * 1000000000000LL); break;
            default: v = ((double)i - 2.5) * 0.5; break;
            }
            ct_tensor_set(t, CT_INDEX(i / 3, i % 3), v);
        }
        ct_value_set(sd, ct_dtype_name(dts[d]), ct_value_new_tensor(t));
    }
    snprintf(path, sizeof path, "%s/rt_dtypes.pt", dir);
    if (ct_save_pt(path, sd))
        goto fail;
    ct_value_free(sd);

    /* views over one storage */
    float base_data[24];
    for (int i = 0; i < 24; i++)
        base_data[i] = (float)i;
    ct_tensor *base = ct_from_data(base_data, CT_SHAPE(24), CT_F32);
    ct_value *sh = ct_value_new_dict();
    ct_value_set(sh, "base", ct_value_new_tensor(base));
    ct_value_set(sh, "view", ct_value_new_tensor(ct_tensor_make_view(base, 4, CT_INDEX(3, 4), NULL, 2)));
    ct_value_set(sh, "t", ct_value_new_tensor(ct_tensor_make_view(base, 4, CT_INDEX(4, 3), CT_INDEX(1, 4), 2)));
    ct_value_set(sh, "strided", ct_value_new_tensor(ct_tensor_make_view(base, 1, CT_INDEX(8), CT_INDEX(3), 1)));
    snprintf(path, sizeof path, "%s/rt_shared.pt", dir);
    if (ct_save_pt(path, sh))
        goto fail;
    ct_value_free(sh);

    /* a checkpoint without floats or bytes (PyTorch 1.13's weights-only unpickler has
     * no BINFLOAT and no _codecs.encode) */
    ct_value *ck = ct_value_new_dict();
    ct_value *st = ct_value_new_dict();
    ct_value *s0 = ct_value_new_dict();
    ct_value_set(s0, "step", ct_value_new_tensor(ct_scalar_tensor(ct_scalar_float(3.0), CT_F32, CT_CPU)));
    ct_value_set(s0, "exp_avg", tensor_value((float[]){0.25f, -0.5f}, CT_SHAPE(2), CT_F32));
    ct_value_dict_set_int(st, 0, s0);
    ct_value_dict_set_int(st, 7, ct_value_new_list());
    ct_value_set(ck, "state", st);
    ct_value *l = ct_value_new_list();
    ct_value_append(l, ct_value_new_int(1));
    ct_value_append(l, ct_value_new_int(-70000));
    ct_value_append(l, ct_value_new_int(1LL << 40));
    ct_value_append(l, ct_value_new_int(INT64_MIN));
    ct_value_append(l, ct_value_new_str("x\u00e9"));
    ct_value_append(l, ct_value_none());
    ct_value_append(l, ct_value_new_bool(true));
    ct_value *tup = ct_value_new_tuple();
    for (int i = 0; i < 5; i++)
        ct_value_append(tup, ct_value_new_int(i));
    ct_value_append(l, tup);
    ct_value_set(ck, "list", l);
    ct_value_set(ck, "epoch", ct_value_new_int(7));
    ct_tensor *w = ct_from_data((float[]){1.5f, -2.0f}, CT_SHAPE(2), CT_F32);
    ct_tensor_set_requires_grad(w, true);
    ct_value_set(ck, "w", ct_value_new_tensor(w));
    ct_value_set(ck, "empty", ct_value_new_tensor(ct_empty(CT_SHAPE(0, 3), CT_F32, CT_CPU)));
    snprintf(path, sizeof path, "%s/rt_checkpoint.pt", dir);
    if (ct_save_pt(path, ck))
        goto fail;
    ct_value_free(ck);

    /* floats and bytes (weights-only loadable in PyTorch 2.x) */
    ct_value *fb = ct_value_new_dict();
    ct_value_set(fb, "lr", ct_value_new_float(0.001));
    ct_value_set(fb, "neg", ct_value_new_float(-2.5e-300));
    ct_value_set(fb, "blob", ct_value_new_bytes("\x00\xff" "ab\x80", 5));
    snprintf(path, sizeof path, "%s/rt_floats.pt", dir);
    if (ct_save_pt(path, fb))
        goto fail;
    ct_value_free(fb);

    /* uint16/32/64 (PyTorch 2.3+) */
    ct_value *u = ct_value_new_dict();
    ct_value_set(u, "u16", tensor_value((uint16_t[]){1, 65535}, CT_SHAPE(2), CT_U16));
    ct_value_set(u, "u32", tensor_value((uint32_t[]){2, 4294967295u}, CT_SHAPE(2), CT_U32));
    ct_value_set(u, "u64", tensor_value((uint64_t[]){3, 1ull << 63}, CT_SHAPE(2), CT_U64));
    snprintf(path, sizeof path, "%s/rt_uint.pt", dir);
    if (ct_save_pt(path, u))
        goto fail;
    ct_value_free(u);
    ct_scope_end();
    return 0;
fail:
    fprintf(stderr, "%s: %s\n", path, ct_last_error());
    ct_scope_end();
    return 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-roundtrip") == 0)
        return write_roundtrip(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_dtypes),
        cmocka_unit_test(test_golden_big_endian),
        cmocka_unit_test(test_golden_shared_storage),
        cmocka_unit_test(test_golden_checkpoint),
        cmocka_unit_test(test_golden_params_scalar_empty),
        cmocka_unit_test(test_roundtrip_golden_files),
        cmocka_unit_test(test_writer_layout),
        cmocka_unit_test(test_zip64_reader),
        cmocka_unit_test(test_many_tensors),
        cmocka_unit_test(test_untyped_storage_two_dtypes),
        cmocka_unit_test(test_value_globals),
        cmocka_unit_test(test_hostile_globals),
        cmocka_unit_test(test_hostile_stack),
        cmocka_unit_test(test_hostile_tensors),
        cmocka_unit_test(test_hostile_zip),
        cmocka_unit_test(test_legacy_and_tar_refused),
        cmocka_unit_test(test_format_detection),
        cmocka_unit_test(test_error_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
