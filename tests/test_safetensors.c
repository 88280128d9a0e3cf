/* safetensors: golden files from PyTorch, round trips, the writer's conventions, and
 * one hostile file per validation rule (Note [safetensors validation order]). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtype.h"
#include "util/json.h"
#include "io/safetensors.h"
#include "util/value.h"
#include "tensor_impl.h"
#include "testutil.h"

#define GOLDEN CT_TEST_DATA_DIR "/io/golden_dtypes.safetensors"
#define GOLDEN_TXT CT_TEST_DATA_DIR "/io/golden_dtypes.txt"

static char tmpdir[64];

static int setup(void **state) {
    (void)state;
    strcpy(tmpdir, "/tmp/ct_safetensors_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void tmp_path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", tmpdir, name); }

static uint8_t *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void write_bytes(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* [u64 LE header length][header][dlen bytes of data] */
static uint8_t *make_st(uint64_t hlen, const char *header, size_t header_bytes, size_t dlen, size_t *len) {
    *len = 8 + header_bytes + dlen;
    uint8_t *b = calloc(1, *len);
    assert_non_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(hlen >> (8 * i));
    memcpy(b + 8, header, header_bytes);
    for (size_t i = 0; i < dlen; i++)
        b[8 + header_bytes + i] = (uint8_t)(i * 7 + 1);
    return b;
}

/* ------------------------------------------------------------------ golden files */

static void check_element(const ct_tensor *t, int64_t i, const char *tok, const char *name) {
    ct_dtype d = ct_tensor_dtype(t);
    const uint8_t *p = (const uint8_t *)ct_tensor_data(t) + i * (int64_t)ct_dtype_size(d);
    if (ct_dtype_is_floating(d)) {
        double want = strtod(tok, NULL), got = ct_load_double(p, d);
        if (isnan(want) ? !isnan(got) : memcmp(&want, &got, sizeof want) != 0)
            fail_msg("%s[%lld]: got %a, want %s", name, (long long)i, got, tok);
    } else if (ct_dtype_is_signed(d)) {
        long long want = strtoll(tok, NULL, 10);
        assert_true(ct_load_int64(p, d) == want);
    } else {
        unsigned long long want = strtoull(tok, NULL, 10), got = 0;
        size_t sz = ct_dtype_size(d);
        if (sz == 1)
            got = p[0];
        else if (sz == 2)
            got = (unsigned long long)((const uint16_t *)(const void *)p)[0];
        else if (sz == 4)
            got = (unsigned long long)((const uint32_t *)(const void *)p)[0];
        else
            got = (unsigned long long)((const uint64_t *)(const void *)p)[0];
        if (got != want)
            fail_msg("%s[%lld]: got %llu, want %llu", name, (long long)i, got, want);
    }
}

/* Checks every tensor of v against the values PyTorch wrote to golden_dtypes.txt. */
static int check_golden(const ct_value *v) {
    FILE *f = fopen(GOLDEN_TXT, "r");
    assert_non_null(f);
    char line[4096];
    int count = 0;
    while (fgets(line, sizeof line, f)) {
        char *save = NULL;
        char *name = strtok_r(line, " \n", &save);
        const char *dtype = strtok_r(NULL, " \n", &save);
        int ndim = atoi(strtok_r(NULL, " \n", &save));
        ct_tensor *t = ct_value_tensor(ct_value_get(v, name));
        CT_ASSERT_OK(t);
        assert_string_equal(ct_dtype_name(ct_tensor_dtype(t)), dtype);
        assert_int_equal(ct_tensor_dim(t), ndim);
        for (int d = 0; d < ndim; d++)
            assert_int_equal(ct_tensor_size(t, d), atoll(strtok_r(NULL, " \n", &save)));
        assert_string_equal(strtok_r(NULL, " \n", &save), ":");
        int64_t i = 0;
        for (const char *tok; (tok = strtok_r(NULL, " \n", &save)) != NULL; i++)
            check_element(t, i, tok, name);
        assert_int_equal(i, ct_tensor_numel(t));
        ct_release(t);
        count++;
    }
    fclose(f);
    return count;
}

static void test_golden_values(void **state) {
    (void)state;
    ct_value *v = ct_load(GOLDEN);
    CT_ASSERT_OK(v);
    int n = check_golden(v);
    assert_int_equal(n, 17);
    assert_int_equal(ct_value_len(v), 18); /* 17 tensors and the metadata */
    /* Metadata first, then tensors by name, as safetensors' load_file orders them. */
    assert_string_equal(ct_value_str(ct_value_key_at(v, 0), NULL), "__metadata__");
    assert_string_equal(ct_value_str(ct_value_key_at(v, 1), NULL), "bfloat16");
    assert_string_equal(ct_value_str(ct_value_key_at(v, 17), NULL), "uint8");
    ct_value *meta = ct_value_get(v, "__metadata__");
    assert_string_equal(ct_value_str(ct_value_get(meta, "format"), NULL), "pt");
    assert_string_equal(ct_value_str(ct_value_get(meta, "note"), NULL), "golden \xc3\xbcn\xc3\xaf" "code \"quoted\"\ttab");
    ct_value_free(v);
}

static void test_golden_zero_copy_and_lifetime(void **state) {
    (void)state;
    ct_value *v = ct_load_safetensors(GOLDEN);
    CT_ASSERT_OK(v);
    ct_tensor *w = ct_value_tensor(ct_value_get(v, "float32"));
    CT_ASSERT_OK(w);
    assert_true(w->storage->external); /* a view of the mapping */
    double before = ct_test_at(w, 0);
    ct_value_free(v);
    /* The tensor keeps the mapping alive after the tree is gone; writes stay private. */
    assert_true(ct_test_at(w, 0) == before);
    assert_int_equal(ct_tensor_set(w, CT_INDEX(0, 0), 42.0), CT_OK);
    assert_true(ct_test_at(w, 0) == 42.0);
    ct_release(w);
    ct_value *again = ct_load(GOLDEN);
    CT_ASSERT_OK(again);
    check_golden(again); /* the file was not changed by the write above */
    ct_value_free(again);

    setenv("CT_SAFETENSORS_COPY", "1", 1);
    v = ct_load(GOLDEN);
    unsetenv("CT_SAFETENSORS_COPY");
    CT_ASSERT_OK(v);
    w = ct_value_tensor(ct_value_get(v, "float64"));
    assert_false(w->storage->external); /* copied */
    ct_release(w);
    check_golden(v);
    ct_value_free(v);
}

static void test_load_buffer_copies(void **state) {
    (void)state;
    size_t n;
    uint8_t *b = read_file(GOLDEN, &n);
    ct_value *v = ct_load_buffer(b, n);
    CT_ASSERT_OK(v);
    memset(b, 0xff, n);
    free(b); /* the loaded values must not depend on the buffer */
    assert_int_equal(check_golden(v), 17);
    ct_value_free(v);
}

static void test_golden_resave_is_byte_identical(void **state) {
    (void)state;
    char path[128];
    tmp_path(path, sizeof path, "resave.safetensors");
    ct_value *v = ct_load(GOLDEN);
    CT_ASSERT_OK(v);
    assert_int_equal(ct_save_safetensors(path, v, NULL), CT_OK);
    ct_value_free(v);
    size_t n1, n2;
    uint8_t *a = read_file(GOLDEN, &n1), *b = read_file(path, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1);
    free(a);
    free(b);
}

/* ------------------------------------------------------------------ round trips */

static void fill_pattern(ct_tensor *t, int seed) {
    uint8_t *p = ct_tensor_data(t);
    size_t n = (size_t)ct_tensor_numel(t) * ct_tensor_element_size(t);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 37 + (size_t)seed * 11 + 3);
    if (ct_tensor_dtype(t) == CT_BOOL)
        for (size_t i = 0; i < n; i++)
            p[i] &= 1;
}

static void assert_same_elements(const ct_tensor *a, const ct_tensor *b) {
    assert_int_equal(ct_tensor_dtype(a), ct_tensor_dtype(b));
    assert_int_equal(ct_tensor_dim(a), ct_tensor_dim(b));
    for (int d = 0; d < ct_tensor_dim(a); d++)
        assert_int_equal(ct_tensor_size(a, d), ct_tensor_size(b, d));
    size_t sz = ct_tensor_element_size(a);
    int64_t numel = ct_tensor_numel(a);
    int nd = ct_tensor_dim(a);
    for (int64_t flat = 0; flat < numel; flat++) {
        int64_t rem = flat, oa = 0, ob = 0;
        for (int d = nd - 1; d >= 0; d--) {
            int64_t i = rem % ct_tensor_size(a, d);
            rem /= ct_tensor_size(a, d);
            oa += i * ct_tensor_stride(a, d);
            ob += i * ct_tensor_stride(b, d);
        }
        assert_memory_equal((const char *)ct_tensor_data(a) + oa * (int64_t)sz,
                            (const char *)ct_tensor_data(b) + ob * (int64_t)sz, sz);
    }
}

static void test_round_trip_every_dtype(void **state) {
    (void)state;
    char path[128];
    tmp_path(path, sizeof path, "all.safetensors");
    ct_scope_begin();
    ct_value *d = ct_value_new_dict();
    ct_tensor *orig[CT_DTYPE_COUNT][2];
    for (int k = 0; k < CT_DTYPE_COUNT; k++) {
        char name[64];
        ct_tensor *t = ct_empty(CT_SHAPE(3, 4), (ct_dtype)k, CT_CPU);
        CT_ASSERT_OK(t);
        fill_pattern(t, k);
        /* A transposed (non-contiguous) view: written contiguously. */
        ct_tensor *tt = ct_tensor_make_view(t, 0, CT_INDEX(4, 3), CT_INDEX(1, 4), 2);
        CT_ASSERT_OK(tt);
        assert_false(ct_tensor_is_contiguous(tt));
        orig[k][0] = t;
        orig[k][1] = tt;
        snprintf(name, sizeof name, "plain.%s", ct_dtype_name((ct_dtype)k));
        assert_int_equal(ct_value_set(d, name, ct_value_new_tensor(t)), CT_OK);
        snprintf(name, sizeof name, "transposed.%s", ct_dtype_name((ct_dtype)k));
        assert_int_equal(ct_value_set(d, name, ct_value_new_tensor(tt)), CT_OK);
    }
    ct_tensor *scalar = ct_full(NULL, 0, ct_scalar_float(-1.5), CT_F64, CT_CPU);
    ct_tensor *empty = ct_zeros(CT_SHAPE(2, 0, 5), CT_I16, CT_CPU);
    assert_int_equal(ct_value_set(d, "scalar", ct_value_new_tensor(scalar)), CT_OK);
    assert_int_equal(ct_value_set(d, "empty", ct_value_new_tensor(empty)), CT_OK);
    assert_int_equal(ct_save_safetensors(path, d, NULL), CT_OK);

    ct_value *back = ct_load(path);
    CT_ASSERT_OK(back);
    assert_int_equal(ct_value_len(back), 2 * CT_DTYPE_COUNT + 2);
    for (int k = 0; k < CT_DTYPE_COUNT; k++) {
        char name[64];
        snprintf(name, sizeof name, "plain.%s", ct_dtype_name((ct_dtype)k));
        ct_tensor *a = ct_value_tensor(ct_value_get(back, name));
        CT_ASSERT_OK(a);
        assert_same_elements(orig[k][0], a);
        snprintf(name, sizeof name, "transposed.%s", ct_dtype_name((ct_dtype)k));
        ct_tensor *b = ct_value_tensor(ct_value_get(back, name));
        CT_ASSERT_OK(b);
        assert_true(ct_tensor_is_contiguous(b));
        assert_same_elements(orig[k][1], b);
    }
    ct_tensor *s2 = ct_value_tensor(ct_value_get(back, "scalar"));
    assert_int_equal(ct_tensor_dim(s2), 0);
    assert_true(ct_test_at(s2, 0) == -1.5);
    CT_ASSERT_SHAPE(ct_value_tensor(ct_value_get(back, "empty")), 2, 0, 5);
    ct_value_free(back);
    ct_value_free(d);
    ct_scope_end();
}

static void test_metadata_round_trip(void **state) {
    (void)state;
    char p1[128], p2[128];
    tmp_path(p1, sizeof p1, "meta1.safetensors");
    tmp_path(p2, sizeof p2, "meta2.safetensors");
    ct_value *d = ct_value_new_dict(), *meta = ct_value_new_dict();
    ct_tensor *t = ct_ones(CT_SHAPE(2), CT_F32, CT_CPU);
    assert_int_equal(ct_value_set(d, "w", ct_value_new_tensor(t)), CT_OK);
    ct_release(t);
    assert_int_equal(ct_value_set(meta, "format", ct_value_new_str("pt")), CT_OK);
    assert_int_equal(ct_value_set(meta, "\xc3\xbcnicode", ct_value_new_str("a\"b\\c\n\x01")), CT_OK);
    assert_int_equal(ct_value_set(meta, "empty", ct_value_new_str("")), CT_OK);
    assert_int_equal(ct_save_safetensors(p1, d, meta), CT_OK);
    size_t n;
    uint8_t *b = read_file(p1, &n);
    assert_memory_equal(b + 8, "{\"__metadata__\":{\"format\":\"pt\",", 31); /* metadata first */
    ct_value *back = ct_load(p1);
    CT_ASSERT_OK(back);
    ct_value *m2 = ct_value_get(back, "__metadata__");
    assert_int_equal(ct_value_len(m2), 3);
    for (int64_t i = 0; i < 3; i++) {
        assert_string_equal(ct_value_str(ct_value_key_at(m2, i), NULL), ct_value_str(ct_value_key_at(meta, i), NULL));
        assert_string_equal(ct_value_str(ct_value_at(m2, i), NULL), ct_value_str(ct_value_at(meta, i), NULL));
    }
    /* What a load returns saves back to the same bytes. */
    assert_int_equal(ct_save_safetensors(p2, back, NULL), CT_OK);
    size_t n2;
    uint8_t *b2 = read_file(p2, &n2);
    assert_int_equal(n, n2);
    assert_memory_equal(b, b2, n);
    free(b);
    free(b2);
    ct_value_free(back);
    ct_value_free(meta);
    ct_value_free(d);
}

static void test_writer_conventions(void **state) {
    (void)state;
    char path[128];
    tmp_path(path, sizeof path, "order.safetensors");
    ct_scope_begin();
    ct_value *d = ct_value_new_dict();
    assert_int_equal(ct_value_set(d, "b", ct_value_new_tensor(ct_ones(CT_SHAPE(3), CT_F32, CT_CPU))), CT_OK);
    assert_int_equal(ct_value_set(d, "a", ct_value_new_tensor(ct_ones(CT_SHAPE(5), CT_U8, CT_CPU))), CT_OK);
    assert_int_equal(ct_value_set(d, "c", ct_value_new_tensor(ct_ones(CT_SHAPE(1), CT_F64, CT_CPU))), CT_OK);
    assert_int_equal(ct_value_set(d, "a2", ct_value_new_tensor(ct_ones(CT_SHAPE(2), CT_F32, CT_CPU))), CT_OK);
    assert_int_equal(ct_value_set(d, "h", ct_value_new_tensor(ct_ones(CT_SHAPE(1), CT_BF16, CT_CPU))), CT_OK);
    assert_int_equal(ct_save_safetensors(path, d, NULL), CT_OK);
    size_t n;
    uint8_t *b = read_file(path, &n);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = (hl << 8) | b[i];
    assert_int_equal(hl % 8, 0);            /* padded to 8 bytes */
    assert_int_equal(b[8 + hl - 1], ' ');   /* with spaces */
    ct_value *h = ct_json_parse((const char *)b + 8, hl, "test", "header");
    CT_ASSERT_OK(h);
    /* Largest alignment first, then by name; offsets packed from 0. */
    const char *order[] = {"c", "a2", "b", "h", "a"};
    const int64_t offs[][2] = {{0, 8}, {8, 16}, {16, 28}, {28, 30}, {30, 35}};
    assert_int_equal(ct_value_len(h), 5);
    for (int i = 0; i < 5; i++) {
        assert_string_equal(ct_value_str(ct_value_key_at(h, i), NULL), order[i]);
        ct_value *o = ct_value_get(ct_value_at(h, i), "data_offsets");
        assert_int_equal(ct_value_int(ct_value_at(o, 0)), offs[i][0]);
        assert_int_equal(ct_value_int(ct_value_at(o, 1)), offs[i][1]);
    }
    assert_int_equal(n, 8 + hl + 35);
    assert_memory_equal(b + 8, "{\"c\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}", 52);
    ct_value_free(h);
    free(b);
    ct_value_free(d);
    ct_scope_end();
}

static void test_unaligned_data_is_copied(void **state) {
    (void)state;
    const char *hdr = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    char padded[128];
    size_t hl = strlen(hdr);
    memcpy(padded, hdr, hl);
    while ((8 + hl) % 4 != 2) /* data starts 2 bytes past a 4-byte boundary */
        padded[hl++] = ' ';
    size_t n;
    uint8_t *b = make_st(hl, padded, hl, 8, &n);
    const float vals[2] = {1.25f, -3.0f};
    memcpy(b + 8 + hl, vals, 8);
    char path[128];
    tmp_path(path, sizeof path, "unaligned.safetensors");
    write_bytes(path, b, n);
    free(b);
    ct_value *v = ct_load(path);
    CT_ASSERT_OK(v);
    ct_tensor *t = ct_value_tensor(ct_value_get(v, "x"));
    assert_false(t->storage->external);
    assert_true(ct_test_at(t, 0) == 1.25 && ct_test_at(t, 1) == -3.0);
    ct_release(t);
    ct_value_free(v);
}

/* ------------------------------------------------------------------ hostile files */

/* Refused by the safetensors reader (from memory and through ct_load_buffer), with
 * status st and a message containing needle. */
static void refused(const uint8_t *b, size_t n, ct_status st, const char *needle, bool via_detect) {
    ct_value *v = ct_safetensors_load_buffer(b, n, NULL, NULL);
    if (v)
        fail_msg("accepted a file that should fail with '%s'", needle);
    CT_ASSERT_ERR(v != NULL, st, needle);
    if (via_detect) {
        v = ct_load_buffer(b, n);
        CT_ASSERT_ERR(v != NULL, st, needle);
    }
}

static void refused_header(const char *header, size_t dlen, ct_status st, const char *needle) {
    size_t n, hl = strlen(header);
    uint8_t *b = make_st(hl, header, hl, dlen, &n);
    /* Detection wants '{' (or whitespace) at byte 8; anything else is not safetensors. */
    refused(b, n, st, needle, header[0] == '{' || header[0] == ' ');
    free(b);
}

#define T(dtype, shape, offs) "{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":" offs "}"

static void test_hostile_lengths(void **state) {
    (void)state;
    size_t n;
    uint8_t small[5] = {1, 0, 0, 0, 0};
    refused(small, 5, CT_ERROR_FORMAT, "file too small: 5 bytes", false);
    refused(small, 0, CT_ERROR_FORMAT, "file too small: 0 bytes", false);
    uint8_t *b = make_st(100000001, "{}", 2, 0, &n);
    refused(b, n, CT_ERROR_FORMAT, "header too large: 100000001 bytes (the limit is 100000000)", true);
    free(b);
    b = make_st(UINT64_MAX, "{}", 2, 0, &n);
    refused(b, n, CT_ERROR_FORMAT, "header too large: 18446744073709551615 bytes", true);
    free(b);
    b = make_st(50, "{}", 2, 0, &n);
    refused(b, n, CT_ERROR_FORMAT, "invalid header length: 50 bytes of header run past the end of the 10-byte file",
            true);
    free(b);
    b = make_st(100000000, "{}", 2, 0, &n); /* at the limit: length check, not size */
    refused(b, n, CT_ERROR_FORMAT, "invalid header length", true);
    free(b);
}

static void test_hostile_text(void **state) {
    (void)state;
    refused_header("{\"a\xff\":1}", 0, CT_ERROR_FORMAT, "header is not valid UTF-8 (byte 3 of the header)");
    refused_header("{\"\xed\xa0\x80\":1}", 0, CT_ERROR_FORMAT, "header is not valid UTF-8 (byte 2");
    refused_header("{\"a\":}", 0, CT_ERROR_FORMAT, "invalid JSON in header: expected a value at byte 5");
    refused_header("{\"a\":1", 0, CT_ERROR_FORMAT, "invalid JSON in header");
    refused_header("{\"a\":" T("F32", "[1]", "[0,4]") ",\"a\":" T("F32", "[1]", "[4,8]") "}", 8, CT_ERROR_FORMAT,
                   "duplicate key \"a\"");
    refused_header("{\"a\":" T("F32", "[1]", "[0,99999999999999999999]") "}", 4, CT_ERROR_FORMAT,
                   "integer out of the int64 range");
    char deep[400] = "{\"__metadata__\":";
    size_t k = strlen(deep);
    for (int i = 0; i < 150; i++)
        deep[k++] = '[';
    for (int i = 0; i < 150; i++)
        deep[k++] = ']';
    deep[k++] = '}';
    deep[k] = '\0';
    refused_header(deep, 0, CT_ERROR_FORMAT, "nesting too deep");
}

static void test_hostile_structure(void **state) {
    (void)state;
    static const struct {
        const char *header;
        size_t dlen;
        const char *needle;
    } cases[] = {
        {"[]", 0, "header must be a JSON object, got list"},
        {"{\"__metadata__\":[]}", 0, "__metadata__ must be an object mapping strings to strings, got list"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ must map strings to strings, but 'k' is int"},
        {"{\"a\":1}", 0, "tensor 'a': entry must be a JSON object, got int"},
        {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': missing key 'dtype'"},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'a': missing key 'shape'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'a': missing key 'data_offsets'"},
        {"{\"a\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': 'dtype' must be a string, got int"},
        {"{\"a\":" T("F33", "[1]", "[0,4]") "}", 4, "tensor 'a': unknown dtype 'F33'"},
        {"{\"a\":" T("f32", "[1]", "[0,4]") "}", 4, "tensor 'a': unknown dtype 'f32'"},
        {"{\"a\":" T("F32", "\"x\"", "[0,4]") "}", 4, "tensor 'a': 'shape' must be a list of integers, got str"},
        {"{\"a\":" T("F32", "[1.5]", "[0,4]") "}", 4, "'shape' must be a list of integers, got float at position 0"},
        {"{\"a\":" T("F32", "[2,-1]", "[0,4]") "}", 4, "tensor 'a': negative size -1 in 'shape' at position 1"},
        {"{\"a\":" T("F32", "[1]", "[0]") "}", 4, "tensor 'a': 'data_offsets' must be a list of two integers"},
        {"{\"a\":" T("F32", "[1]", "[0,4,8]") "}", 4, "'data_offsets' must be a list of two integers"},
        {"{\"a\":" T("F32", "[1]", "[0,\"4\"]") "}", 4, "'data_offsets' must be a list of two integers"},
        {"{\"a\":" T("F32", "[1]", "{}") "}", 4, "'data_offsets' must be a list of two integers"},
        {"{\"a\":" T("F32", "[0]", "[-4,0]") "}", 0, "tensor 'a': negative value in 'data_offsets' [-4, 0]"},
        {"{\"a\\u0000b\":" T("F32", "[1]", "[0,4]") "}", 4, "contains a NUL character"},
        /* 7: tiling, overflow, span */
        {"{\"a\":" T("F32", "[1]", "[4,8]") "}", 8,
         "tensor 'a': invalid data_offsets [4, 8]: sorted by offset, each tensor must begin where the previous one "
         "ends (at 0)"},
        {"{\"a\":" T("F32", "[1]", "[0,4]") ",\"b\":" T("F32", "[1]", "[8,12]") "}", 12,
         "tensor 'b': invalid data_offsets [8, 12]"},
        {"{\"a\":" T("F32", "[2]", "[0,8]") ",\"b\":" T("F32", "[1]", "[4,8]") "}", 8,
         "tensor 'b': invalid data_offsets [4, 8]"},
        {"{\"a\":" T("F32", "[1]", "[0,4]") ",\"b\":" T("F32", "[0]", "[4,2]") "}", 4,
         "tensor 'b': invalid data_offsets [4, 2]"},
        {"{\"a\":" T("F32", "[4294967296,4294967296,4]", "[0,4]") "}", 4, "tensor 'a': the size of its shape overflows"},
        {"{\"a\":" T("F32", "[4294967296,4294967296,4,0]", "[0,0]") "}", 0, "the size of its shape overflows"},
        {"{\"a\":" T("U8", "[9223372036854775807]", "[0,4]") "}", 4, "tensor 'a': the size of its shape overflows"},
        {"{\"a\":" T("F4", "[3]", "[0,2]") "}", 2, "tensor 'a': 3 elements of F4 do not fill whole bytes"},
        {"{\"a\":" T("F6_E2M3", "[1]", "[0,1]") "}", 1, "do not fill whole bytes"},
        {"{\"a\":" T("F32", "[2]", "[0,4]") "}", 4,
         "tensor 'a': data_offsets [0, 4] span 4 bytes, but shape [2] of F32 needs 8"},
        {"{\"a\":" T("BF16", "[2,3]", "[0,6]") "}", 6, "span 6 bytes, but shape [2, 3] of BF16 needs 12"},
        /* 8: coverage */
        {"{\"a\":" T("F32", "[1]", "[0,4]") "}", 5,
         "file not fully covered: the tensors end at byte 66 but the file has 67 bytes (1 trailing bytes)"},
        {"{\"a\":" T("F32", "[2]", "[0,8]") "}", 4, "file truncated: the tensors need 70 bytes but the file has 66"},
        {"{}", 1, "file not fully covered"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        refused_header(cases[i].header, cases[i].dlen, CT_ERROR_FORMAT, cases[i].needle);
}

static void test_ctorch_limits(void **state) {
    (void)state;
    refused_header("{\"a\":" T("F8_E4M3", "[4]", "[0,4]") "}", 4, CT_ERROR_NOT_IMPLEMENTED,
                   "tensor 'a': unsupported dtype F8_E4M3 (torch.float8_e4m3fn)");
    refused_header("{\"z\":" T("F8_E5M2", "[1]", "[0,1]") "}", 1, CT_ERROR_NOT_IMPLEMENTED, "unsupported dtype F8_E5M2");
    refused_header("{\"c\":" T("C64", "[1]", "[0,8]") "}", 8, CT_ERROR_NOT_IMPLEMENTED,
                   "unsupported dtype C64 (torch.complex64)");
    refused_header("{\"a\":" T("F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4, CT_ERROR_NOT_IMPLEMENTED,
                   "tensor 'a' has 9 dimensions; ctorch supports at most 8");
    /* The file's own validity is judged first: a float8 file with trailing bytes is a
     * broken file, not an unsupported one. */
    refused_header("{\"a\":" T("F8_E4M3", "[4]", "[0,4]") "}", 5, CT_ERROR_FORMAT, "file not fully covered");
    /* And the structure before the offsets. */
    refused_header("{\"a\":" T("F32", "[1]", "[4,8]") ",\"b\":" T("X", "[1]", "[0,4]") "}", 8, CT_ERROR_FORMAT,
                   "tensor 'b': unknown dtype 'X'");
}

static void test_valid_edge_files(void **state) {
    (void)state;
    /* An empty header, leading/trailing whitespace, unknown keys, zero-size tensors
     * sharing an offset, and file order that differs from offset order are all valid. */
    static const char *const ok[] = {
        "{}",
        " \n{ }\t\r ",
        "{\"b\":" T("F32", "[1]", "[4,8]") ",\"a\":" T("F32", "[1]", "[0,4]") "}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":[1,{}]}}",
        "{\"e\":" T("F64", "[0,5]", "[0,0]") ",\"a\":" T("F32", "[1]", "[0,4]") "}",
    };
    const size_t dl[] = {0, 0, 8, 4, 4};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t n, hl = strlen(ok[i]);
        uint8_t *b = make_st(hl, ok[i], hl, dl[i], &n);
        ct_value *v = ct_load_buffer(b, n);
        if (!v)
            fail_msg("file %zu refused: %s", i, ct_last_error());
        ct_value_free(v);
        free(b);
    }
}

static void test_hostile_from_file_names_it(void **state) {
    (void)state;
    char path[128];
    tmp_path(path, sizeof path, "bad.safetensors");
    const char *hdr = "{\"a\":" T("F32", "[2]", "[0,4]") "}";
    size_t n, hl = strlen(hdr);
    uint8_t *b = make_st(hl, hdr, hl, 4, &n);
    write_bytes(path, b, n);
    free(b);
    CT_ASSERT_ERR(ct_load(path) != NULL, CT_ERROR_FORMAT, path);
    CT_ASSERT_ERR(ct_load_safetensors(path) != NULL, CT_ERROR_FORMAT, "needs 8");
    b = make_st(3, "{\"a", 3, 0, &n);
    write_bytes(path, b, n);
    free(b);
    CT_ASSERT_ERR(ct_load_safetensors(path) != NULL, CT_ERROR_FORMAT, "invalid JSON in header");
    write_bytes(path, (const uint8_t *)"abc", 3);
    CT_ASSERT_ERR(ct_load_safetensors(path) != NULL, CT_ERROR_FORMAT, "file too small: 3 bytes");
}

/* ------------------------------------------------------------------ detection, errors */

static void test_format_detection(void **state) {
    (void)state;
    CT_ASSERT_ERR(ct_load_buffer("hello world!", 12) != NULL, CT_ERROR_FORMAT,
                  "buffer: not a checkpoint ctorch recognises (12 bytes, starting 68 65 6c 6c 6f 20 77 6f)");
    CT_ASSERT_ERR(ct_load_buffer("", 0) != NULL, CT_ERROR_FORMAT, "starting (empty)");
    CT_ASSERT_ERR(ct_load_buffer(NULL, 5) != NULL, CT_ERROR_NULL_ARGUMENT, "buffer is NULL");
    uint8_t tar[600] = {0};
    memcpy(tar, "checkpoint/", 11);
    memcpy(tar + 257, "ustar", 5);
    CT_ASSERT_ERR(ct_load_buffer(tar, sizeof tar) != NULL, CT_ERROR_NOT_IMPLEMENTED, "a tar archive");
    /* A zip goes to the torch.save reader, which refuses this one: no entries. */
    ct_value *v = ct_load_buffer("PK\x03\x04 not really a zip", 24);
    assert_null(v);
    assert_int_not_equal(ct_last_status(), CT_OK);
    ct_clear_error();
    char path[128];
    tmp_path(path, sizeof path, "none");
    CT_ASSERT_ERR(ct_load(path) != NULL, CT_ERROR_IO, "cannot open");
    CT_ASSERT_ERR(ct_load(tmpdir) != NULL, CT_ERROR_IO, "is a directory");
    CT_ASSERT_ERR(ct_load(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "path is NULL");
    CT_ASSERT_ERR(ct_load_safetensors(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "path is NULL");
    CT_ASSERT_ERR(ct_load_safetensors(path) != NULL, CT_ERROR_IO, "cannot open");
}

static void test_save_errors(void **state) {
    (void)state;
    char path[128];
    tmp_path(path, sizeof path, "err.safetensors");
    ct_scope_begin();
    ct_value *d = ct_value_new_dict(), *l = ct_value_new_list();
    assert_int_equal(ct_value_set(d, "w", ct_value_new_tensor(ct_ones(CT_SHAPE(2), CT_F32, CT_CPU))), CT_OK);
    CT_ASSERT_ERR(ct_save_safetensors(NULL, d, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "path is NULL");
    CT_ASSERT_ERR(ct_save_safetensors(path, NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "save_safetensors");
    CT_ASSERT_ERR(ct_save_safetensors(path, l, NULL) == CT_OK, CT_ERROR_TYPE, "expected a dict of name -> Tensor, got list");
    CT_ASSERT_ERR(ct_save_safetensors(path, d, l) == CT_OK, CT_ERROR_TYPE, "metadata must be a dict");
    ct_value *m = ct_value_new_dict();
    assert_int_equal(ct_value_set(m, "k", ct_value_new_int(1)), CT_OK);
    CT_ASSERT_ERR(ct_save_safetensors(path, d, m) == CT_OK, CT_ERROR_TYPE, "metadata must map str to str");
    ct_value_free(m);
    ct_value *d2 = ct_value_clone(d);
    assert_int_equal(ct_value_set(d2, "__metadata__", ct_value_new_dict()), CT_OK);
    ct_value *m2 = ct_value_new_dict();
    CT_ASSERT_ERR(ct_save_safetensors(path, d2, m2) == CT_OK, CT_ERROR_VALUE, "metadata given twice");
    ct_value_free(m2);
    assert_int_equal(ct_value_set(d2, "__metadata__", ct_value_new_str("x")), CT_OK);
    CT_ASSERT_ERR(ct_save_safetensors(path, d2, NULL) == CT_OK, CT_ERROR_TYPE, "metadata must be a dict");
    ct_value_free(d2);
    d2 = ct_value_new_dict();
    assert_int_equal(ct_value_dict_set_int(d2, 3, ct_value_new_tensor(ct_ones(CT_SHAPE(1), CT_F32, CT_CPU))), CT_OK);
    CT_ASSERT_ERR(ct_save_safetensors(path, d2, NULL) == CT_OK, CT_ERROR_TYPE, "tensor names must be strings");
    ct_value_free(d2);
    d2 = ct_value_new_dict();
    assert_int_equal(ct_value_set(d2, "lr", ct_value_new_float(0.1)), CT_OK);
    CT_ASSERT_ERR(ct_save_safetensors(path, d2, NULL) == CT_OK, CT_ERROR_TYPE,
                  "'lr' is a float, but safetensors holds only tensors");
    ct_value_free(d2);
    d2 = ct_value_new_dict();
    assert_int_equal(ct_value_set(d2, "bad\xff", ct_value_new_tensor(ct_ones(CT_SHAPE(1), CT_F32, CT_CPU))), CT_OK);
    CT_ASSERT_ERR(ct_save_safetensors(path, d2, NULL) == CT_OK, CT_ERROR_VALUE, "is not valid UTF-8");
    ct_value_free(d2);
    d2 = ct_value_new_dict();
    assert_int_equal(ct_value_set(d2, "m", ct_value_new_tensor(ct_zeros(CT_SHAPE(2), CT_F32, CT_META))), CT_OK);
    CT_ASSERT_ERR(ct_save_safetensors(path, d2, NULL) == CT_OK, CT_ERROR_DEVICE, "'m' is on the meta device");
    ct_value_free(d2);
    CT_ASSERT_ERR(ct_save_safetensors("/nonexistent-dir/x.safetensors", d, NULL) == CT_OK, CT_ERROR_IO,
                  "cannot create");
    assert_int_equal(access(path, F_OK), -1); /* nothing written by the failures */
    /* An empty dict is a valid file. */
    ct_value *e = ct_value_new_dict();
    assert_int_equal(ct_save_safetensors(path, e, NULL), CT_OK);
    ct_value *back = ct_load(path);
    CT_ASSERT_OK(back);
    assert_int_equal(ct_value_len(back), 0);
    ct_value_free(back);
    ct_value_free(e);
    ct_value_free(l);
    ct_value_free(d);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_values),
        cmocka_unit_test(test_golden_zero_copy_and_lifetime),
        cmocka_unit_test(test_load_buffer_copies),
        cmocka_unit_test(test_golden_resave_is_byte_identical),
        cmocka_unit_test(test_round_trip_every_dtype),
        cmocka_unit_test(test_metadata_round_trip),
        cmocka_unit_test(test_writer_conventions),
        cmocka_unit_test(test_unaligned_data_is_copied),
        cmocka_unit_test(test_hostile_lengths),
        cmocka_unit_test(test_hostile_text),
        cmocka_unit_test(test_hostile_structure),
        cmocka_unit_test(test_ctorch_limits),
        cmocka_unit_test(test_valid_edge_files),
        cmocka_unit_test(test_hostile_from_file_names_it),
        cmocka_unit_test(test_format_detection),
        cmocka_unit_test(test_save_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
