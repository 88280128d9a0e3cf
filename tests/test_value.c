/* ct_value trees: builders, accessors, error inputs; the strict JSON reader. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"
#include "util/value.h"
#include "tensor_impl.h"
#include "testutil.h"

static void test_scalars(void **state) {
    (void)state;
    ct_value *b = ct_value_new_bool(true), *i = ct_value_new_int(-42), *f = ct_value_new_float(2.5);
    ct_value *s = ct_value_new_str("héllo"), *n = ct_value_none();
    ct_value *by = ct_value_new_bytes("a\0b", 3);
    assert_int_equal(ct_value_kind(b), CT_VALUE_BOOL);
    assert_true(ct_value_bool(b));
    assert_int_equal(ct_value_int(i), -42);
    assert_int_equal(ct_value_int(b), 1); /* a bool is an int */
    assert_true(ct_value_float(f) == 2.5);
    assert_true(ct_value_float(i) == -42.0);
    size_t len = 99;
    assert_string_equal(ct_value_str(s, &len), "héllo");
    assert_int_equal(len, strlen("héllo"));
    assert_int_equal(ct_value_kind(n), CT_VALUE_NONE);
    const char *bytes = ct_value_str(by, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(bytes, "a\0b", 3);
    assert_int_equal(ct_value_kind(by), CT_VALUE_BYTES);
    ct_value *free_list[] = {b, i, f, s, n, by};
    for (size_t k = 0; k < 6; k++)
        ct_value_free(free_list[k]);
}

static void test_type_names(void **state) {
    (void)state;
    assert_string_equal(ct_value_type_name(CT_VALUE_NONE), "None");
    assert_string_equal(ct_value_type_name(CT_VALUE_TENSOR), "Tensor");
    assert_string_equal(ct_value_type_name(CT_VALUE_DICT), "dict");
    assert_string_equal(ct_value_type_name((ct_value_type)99), "unknown");
    assert_string_equal(ct_value_type_name((ct_value_type)-1), "unknown");
}

static void test_wrong_kinds(void **state) {
    (void)state;
    ct_value *s = ct_value_new_str("x"), *i = ct_value_new_int(3), *l = ct_value_new_list();
    CT_ASSERT_ERR(ct_value_bool(i), CT_ERROR_TYPE, "expected a bool, got a int value");
    CT_ASSERT_ERR(ct_value_int(s) != 0, CT_ERROR_TYPE, "value_int: expected an int, got a str");
    CT_ASSERT_ERR(ct_value_float(l) != 0.0, CT_ERROR_TYPE, "expected a float or an int");
    size_t len = 7;
    CT_ASSERT_ERR(ct_value_str(i, &len) != NULL, CT_ERROR_TYPE, "expected a str or bytes");
    assert_int_equal(len, 0);
    CT_ASSERT_ERR(ct_value_tensor(s) != NULL, CT_ERROR_TYPE, "expected a Tensor, got a str");
    CT_ASSERT_ERR(ct_value_len(i) >= 0, CT_ERROR_TYPE, "expected a list, tuple or dict");
    CT_ASSERT_ERR(ct_value_at(s, 0) != NULL, CT_ERROR_TYPE, "value_at");
    CT_ASSERT_ERR(ct_value_key_at(l, 0) != NULL, CT_ERROR_TYPE, "expected a dict, got a list");
    CT_ASSERT_ERR(ct_value_get(l, "a") != NULL, CT_ERROR_TYPE, "expected a dict");
    CT_ASSERT_ERR(ct_value_append(s, ct_value_new_int(1)) == CT_OK, CT_ERROR_TYPE, "expected a list or tuple");
    CT_ASSERT_ERR(ct_value_set(l, "k", ct_value_new_int(1)) == CT_OK, CT_ERROR_TYPE, "expected a dict");
    ct_value_free(s);
    ct_value_free(i);
    ct_value_free(l);
}

static void test_null_arguments(void **state) {
    (void)state;
    ct_clear_error();
    ct_value_free(NULL); /* allowed, like free(NULL) */
    CT_ASSERT_ERR(ct_value_kind(NULL) != CT_VALUE_NONE, CT_ERROR_NULL_ARGUMENT, "value_kind");
    CT_ASSERT_ERR(ct_value_bool(NULL), CT_ERROR_NULL_ARGUMENT, "value_bool");
    CT_ASSERT_ERR(ct_value_int(NULL) != 0, CT_ERROR_NULL_ARGUMENT, "value_int");
    CT_ASSERT_ERR(ct_value_float(NULL) != 0, CT_ERROR_NULL_ARGUMENT, "value_float");
    CT_ASSERT_ERR(ct_value_str(NULL, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "value_str");
    CT_ASSERT_ERR(ct_value_tensor(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "value_tensor");
    CT_ASSERT_ERR(ct_value_len(NULL) >= 0, CT_ERROR_NULL_ARGUMENT, "value_len");
    CT_ASSERT_ERR(ct_value_at(NULL, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "value_at");
    CT_ASSERT_ERR(ct_value_key_at(NULL, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "value_key_at");
    CT_ASSERT_ERR(ct_value_get(NULL, "a") != NULL, CT_ERROR_NULL_ARGUMENT, "value_get");
    CT_ASSERT_ERR(ct_value_new_str(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "string is NULL");
    CT_ASSERT_ERR(ct_value_new_tensor(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "value_new_tensor");
    CT_ASSERT_ERR(ct_value_append(NULL, ct_value_new_int(1)) == CT_OK, CT_ERROR_NULL_ARGUMENT, "value_append");
    ct_value *l = ct_value_new_list(), *d = ct_value_new_dict();
    CT_ASSERT_ERR(ct_value_append(l, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "value_append");
    CT_ASSERT_ERR(ct_value_set(d, NULL, ct_value_new_int(1)) == CT_OK, CT_ERROR_NULL_ARGUMENT, "key is NULL");
    CT_ASSERT_ERR(ct_value_set(d, "a", NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "value_set");
    CT_ASSERT_ERR(ct_value_set(NULL, "a", ct_value_new_int(1)) == CT_OK, CT_ERROR_NULL_ARGUMENT, "value_set");
    CT_ASSERT_ERR(ct_value_get(d, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "key is NULL");
    assert_int_equal(ct_value_len(l), 0);
    assert_int_equal(ct_value_len(d), 0);
    ct_value_free(l);
    ct_value_free(d);
}

static void test_list_tuple_index(void **state) {
    (void)state;
    ct_value *l = ct_value_new_list(), *t = ct_value_new_tuple();
    for (int i = 0; i < 10; i++) {
        assert_int_equal(ct_value_append(l, ct_value_new_int(i * 10)), CT_OK);
        assert_int_equal(ct_value_append(t, ct_value_new_int(i)), CT_OK);
    }
    assert_int_equal(ct_value_len(l), 10);
    assert_int_equal(ct_value_int(ct_value_at(l, 3)), 30);
    assert_int_equal(ct_value_int(ct_value_at(l, -1)), 90); /* Python-style negative index */
    assert_int_equal(ct_value_int(ct_value_at(t, -10)), 0);
    CT_ASSERT_ERR(ct_value_at(l, 10) != NULL, CT_ERROR_INDEX, "list index 10 out of range (length 10)");
    CT_ASSERT_ERR(ct_value_at(t, -11) != NULL, CT_ERROR_INDEX, "tuple index -11 out of range");
    CT_ASSERT_ERR(ct_value_append(l, l) == CT_OK, CT_ERROR_VALUE, "itself");
    assert_int_equal(ct_value_len(l), 10);
    ct_value *last = ct_value_pop(l);
    assert_int_equal(ct_value_int(last), 90);
    assert_int_equal(ct_value_len(l), 9);
    ct_value_free(last);
    ct_value *empty = ct_value_new_list();
    assert_null(ct_value_pop(empty));
    ct_value_free(empty);
    ct_value_free(l);
    ct_value_free(t);
}

static void test_dict_order_replace_and_keys(void **state) {
    (void)state;
    ct_value *d = ct_value_new_dict();
    assert_int_equal(ct_value_set(d, "b", ct_value_new_int(1)), CT_OK);
    assert_int_equal(ct_value_set(d, "a", ct_value_new_int(2)), CT_OK);
    assert_int_equal(ct_value_dict_set_int(d, 7, ct_value_new_str("seven")), CT_OK);
    assert_int_equal(ct_value_set(d, "b", ct_value_new_int(3)), CT_OK); /* replace keeps position */
    assert_int_equal(ct_value_len(d), 3);
    assert_string_equal(ct_value_str(ct_value_key_at(d, 0), NULL), "b");
    assert_int_equal(ct_value_int(ct_value_at(d, 0)), 3);
    assert_string_equal(ct_value_str(ct_value_key_at(d, 1), NULL), "a");
    assert_int_equal(ct_value_kind(ct_value_key_at(d, 2)), CT_VALUE_INT);
    assert_int_equal(ct_value_int(ct_value_key_at(d, 2)), 7);
    assert_string_equal(ct_value_str(ct_value_get_int(d, 7), NULL), "seven");
    assert_null(ct_value_get_int(d, 8));
    /* the public ct_value_set_int: replaces in place, takes the item even on failure */
    assert_int_equal(ct_value_set_int(d, 7, ct_value_new_str("SEVEN")), CT_OK);
    assert_int_equal(ct_value_len(d), 3);
    assert_string_equal(ct_value_str(ct_value_at(d, 2), NULL), "SEVEN");
    assert_int_not_equal(ct_value_set_int(NULL, 1, ct_value_new_int(1)), CT_OK);
    ct_value *l = ct_value_new_list();
    assert_int_equal(ct_value_set_int(l, 1, ct_value_new_int(1)), CT_ERROR_TYPE);
    ct_value_free(l);
    ct_clear_error();
    /* "7" and 7 are different keys, as in Python. */
    assert_int_equal(ct_value_set(d, "7", ct_value_none()), CT_OK);
    assert_int_equal(ct_value_len(d), 4);
    assert_int_equal(ct_value_int(ct_value_get(d, "a")), 2);
    CT_ASSERT_ERR(ct_value_get(d, "zz") != NULL, CT_ERROR_INDEX, "no key 'zz'");
    CT_ASSERT_ERR(ct_value_key_at(d, 4) != NULL, CT_ERROR_INDEX, "dict index 4 out of range");
    CT_ASSERT_ERR(ct_value_dict_set(d, ct_value_new_float(1.0), ct_value_none()) == CT_OK, CT_ERROR_TYPE,
                  "dict keys must be str or int, got float");
    CT_ASSERT_ERR(ct_value_set(d, "self", d) == CT_OK, CT_ERROR_VALUE, "inside itself");
    assert_int_equal(ct_value_len(d), 4);
    ct_value_free(d);
}

static void test_dict_many_keys_indexed(void **state) {
    (void)state;
    ct_value *d = ct_value_new_dict();
    char key[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(key, sizeof key, "layer.%d.weight", i);
        assert_int_equal(ct_value_set(d, key, ct_value_new_int(i)), CT_OK);
    }
    for (int i = 0; i < 3000; i += 7) {
        snprintf(key, sizeof key, "layer.%d.weight", i);
        assert_int_equal(ct_value_int(ct_value_get(d, key)), i);
    }
    snprintf(key, sizeof key, "layer.%d.weight", 1234);
    assert_int_equal(ct_value_set(d, key, ct_value_new_int(-1)), CT_OK);
    assert_int_equal(ct_value_len(d), 3000);
    assert_int_equal(ct_value_int(ct_value_at(d, 1234)), -1);
    for (int i = 0; i < 100; i++)
        assert_int_equal(ct_value_dict_set_int(d, i, ct_value_new_int(i)), CT_OK);
    assert_int_equal(ct_value_int(ct_value_get_int(d, 42)), 42);
    assert_int_equal(ct_value_len(d), 3100);
    ct_value_free(d);
}

static void test_tensor_values_and_clone(void **state) {
    (void)state;
    const float data[6] = {0, 1, 2, 3, 4, 5};
    ct_tensor *t = ct_from_data(data, CT_SHAPE(6), CT_F32);
    CT_ASSERT_OK(t);
    ct_value *v = ct_value_new_tensor(t);
    assert_int_equal(atomic_load(&t->refcount), 2); /* the value holds its own reference */
    ct_release(t);
    ct_value *d = ct_value_new_dict();
    assert_int_equal(ct_value_set(d, "w", v), CT_OK);
    ct_value *inner = ct_value_new_list();
    assert_int_equal(ct_value_append(inner, ct_value_new_str("x")), CT_OK);
    assert_int_equal(ct_value_set(d, "l", inner), CT_OK);
    ct_value *c = ct_value_clone(d);
    CT_ASSERT_OK(c);
    ct_scope_begin();
    ct_tensor *a = ct_value_tensor(ct_value_get(d, "w"));
    ct_tensor *b = ct_value_tensor(ct_value_get(c, "w"));
    assert_true(ct_tensor_shares_storage(a, b)); /* clones alias tensors, as a pickle memo does */
    assert_true(ct_test_at(b, 5) == 5.0);
    ct_scope_end();
    assert_string_equal(ct_value_str(ct_value_at(ct_value_get(c, "l"), 0), NULL), "x");
    assert_ptr_not_equal(ct_value_get(c, "l"), inner);
    ct_value_free(d);
    ct_value_free(c);
    CT_ASSERT_ERR(ct_value_clone(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "value_clone");
}

/* ------------------------------------------------------------------ JSON */

static ct_value *parse(const char *s) { return ct_json_parse(s, strlen(s), "json_test", "text"); }

static void test_json_valid(void **state) {
    (void)state;
    ct_value *v = parse(" {\"a\": [1, -2, 3.5, true, false, null, \"s\\u00e9\\n\\ud83d\\ude00\"], \"b\": {}} \n");
    CT_ASSERT_OK(v);
    ct_value *a = ct_value_get(v, "a");
    assert_int_equal(ct_value_len(a), 7);
    assert_int_equal(ct_value_int(ct_value_at(a, 1)), -2);
    assert_true(ct_value_float(ct_value_at(a, 2)) == 3.5);
    assert_int_equal(ct_value_kind(ct_value_at(a, 2)), CT_VALUE_FLOAT);
    assert_true(ct_value_bool(ct_value_at(a, 3)));
    assert_int_equal(ct_value_kind(ct_value_at(a, 5)), CT_VALUE_NONE);
    assert_string_equal(ct_value_str(ct_value_at(a, 6), NULL), "s\xc3\xa9\n\xf0\x9f\x98\x80");
    assert_int_equal(ct_value_len(ct_value_get(v, "b")), 0);
    ct_value_free(v);
    v = parse("-9223372036854775808");
    assert_true(ct_value_int(v) == INT64_MIN);
    ct_value_free(v);
    v = parse("9223372036854775807");
    assert_true(ct_value_int(v) == INT64_MAX);
    ct_value_free(v);
    v = parse("1e3");
    assert_true(ct_value_float(v) == 1000.0);
    ct_value_free(v);
}

static void test_json_invalid(void **state) {
    (void)state;
    static const struct {
        const char *text, *needle;
    } cases[] = {
        {"", "unexpected end of input at byte 0"},
        {"{", "expected a string key"},
        {"{\"a\" 1}", "expected ':'"},
        {"{\"a\":1,}", "expected a string key"},
        {"[1 2]", "expected ',' or ']'"},
        {"{\"a\":1 \"b\":2}", "expected ',' or '}'"},
        {"\"abc", "unterminated string"},
        {"\"a\tb\"", "control character in string"},
        {"\"\\x\"", "invalid escape"},
        {"\"\\u12\"", "invalid \\u escape"},
        {"\"\\ud800\"", "lone high surrogate"},
        {"\"\\udc00\"", "lone low surrogate"},
        {"\"\xc3\x28\"", "invalid UTF-8 in string"},
        {"01", "leading zero"},
        {"-", "invalid number"},
        {"1.", "invalid number"},
        {"1e", "invalid number"},
        {"9223372036854775808", "integer out of the int64 range"},
        {"-9223372036854775809", "integer out of the int64 range"},
        {"tru", "expected a value"},
        {"{} x", "trailing characters"},
        {"{\"k\":1,\"k\":2}", "duplicate key \"k\" at byte 7"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ct_value *v = parse(cases[i].text);
        if (v)
            fail_msg("'%s' parsed", cases[i].text);
        CT_ASSERT_ERR(v != NULL, CT_ERROR_FORMAT, cases[i].needle);
    }
    /* Nesting: 128 levels parse, 129 do not. */
    char deep[300];
    memset(deep, '[', 129);
    memset(deep + 129, ']', 129);
    deep[258] = '\0';
    CT_ASSERT_ERR(parse(deep) != NULL, CT_ERROR_FORMAT, "nesting too deep");
    ct_value *ok = ct_json_parse(deep + 1, 256, "json_test", "text");
    CT_ASSERT_OK(ok);
    ct_value_free(ok);
}

static void test_utf8(void **state) {
    (void)state;
    assert_int_equal(ct_utf8_invalid_at((const uint8_t *)"abc\xc3\xa9", 5), -1);
    assert_int_equal(ct_utf8_invalid_at((const uint8_t *)"ab\xc0\x80", 4), 2);         /* overlong */
    assert_int_equal(ct_utf8_invalid_at((const uint8_t *)"\xed\xa0\x80", 3), 0);       /* surrogate */
    assert_int_equal(ct_utf8_invalid_at((const uint8_t *)"\xf4\x90\x80\x80", 4), 0);   /* > U+10FFFF */
    assert_int_equal(ct_utf8_invalid_at((const uint8_t *)"x\xe2\x82", 3), 1);          /* truncated */
    assert_int_equal(ct_utf8_invalid_at((const uint8_t *)"\xf0\x9f\x98\x80", 4), -1);
}

static void test_json_writer_escapes(void **state) {
    (void)state;
    ct_json_buf b = {0};
    ct_json_put_string(&b, "a\"b\\c\n\x01\xc3\xa9", 9);
    ct_json_put_int(&b, -12);
    assert_false(b.failed);
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\"-12");
    /* What the writer produces, the reader takes back. */
    ct_value *v = ct_json_parse(b.data, b.len - 3, "json_test", "text");
    CT_ASSERT_OK(v);
    assert_memory_equal(ct_value_str(v, NULL), "a\"b\\c\n\x01\xc3\xa9", 9);
    ct_value_free(v);
    ct_json_buf_free(&b);
}

/* The public JSON pair (ctorch/io.h): compact text in insertion order, read back as
 * the same tree; what JSON cannot hold is an error. */
static void test_value_json_public(void **state) {
    (void)state;
    ct_scope_begin();
    const char text[] = "{\"a\":[1,-2.5,true,null,\"x\\u0000y\"],\"n\":{\"3\":0.1,\"e\":1e+300},\"f\":2.0}";
    ct_value *v = ct_value_from_json(text, sizeof text - 1, NULL);
    CT_ASSERT_OK(v);
    size_t n;
    assert_memory_equal(ct_value_str(ct_value_at(ct_value_get(v, "a"), 4), &n), "x\0y", 3);
    assert_int_equal(n, 3);
    assert_int_equal(ct_value_kind(ct_value_get(v, "f")), CT_VALUE_FLOAT);
    int64_t len = ct_value_to_json(v, NULL, 0);
    assert_int_equal(len, (int64_t)sizeof text - 1);
    char out[sizeof text], small[8];
    assert_int_equal(ct_value_to_json(v, out, sizeof out), len);
    assert_string_equal(out, text);
    assert_int_equal(ct_value_to_json(v, small, sizeof small), len); /* truncated, still terminated */
    assert_string_equal(small, "{\"a\":[1");
    /* a clone writes the same text; int keys are written as strings */
    ct_value *c = ct_value_clone(v);
    assert_int_equal(ct_value_set_int(c, 7, ct_value_new_strn("q", 1)), CT_OK);
    char out2[sizeof text + 16];
    assert_int_equal(ct_value_to_json(c, out2, sizeof out2), len + 8);
    assert_memory_equal(out2 + len - 1, ",\"7\":\"q\"}", 9);
    ct_value_free(c);
    ct_value_free(v);
    /* refused: tensors, bytes, NaN, invalid UTF-8; and the parser's message names `what` */
    ct_value *d = ct_value_new_dict();
    ct_value_set(d, "t", ct_value_new_tensor(ct_ones(CT_SHAPE(1), CT_F32, CT_CPU)));
    CT_ASSERT_ERR(ct_value_to_json(d, NULL, 0) >= 0, CT_ERROR_TYPE, "a Tensor has no JSON form");
    ct_value_set(d, "t", ct_value_new_bytes("\xff", 1));
    CT_ASSERT_ERR(ct_value_to_json(d, NULL, 0) >= 0, CT_ERROR_TYPE, "a bytes has no JSON form");
    ct_value_set(d, "t", ct_value_new_float(NAN));
    CT_ASSERT_ERR(ct_value_to_json(d, NULL, 0) >= 0, CT_ERROR_VALUE, "NaN has no JSON form");
    ct_value_set(d, "t", ct_value_new_strn("\xc0\x80", 2));
    CT_ASSERT_ERR(ct_value_to_json(d, NULL, 0) >= 0, CT_ERROR_VALUE, "not valid UTF-8");
    ct_value_free(d);
    CT_ASSERT_ERR(ct_value_from_json("[1,]", 4, "config.json") != NULL, CT_ERROR_FORMAT,
                  "value_from_json: invalid JSON in config.json: expected a value at byte 3");
    assert_int_equal(ct_utf8_invalid_at("ok\xff", 3), 2);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_type_names),
        cmocka_unit_test(test_wrong_kinds),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_list_tuple_index),
        cmocka_unit_test(test_dict_order_replace_and_keys),
        cmocka_unit_test(test_dict_many_keys_indexed),
        cmocka_unit_test(test_tensor_values_and_clone),
        cmocka_unit_test(test_json_valid),
        cmocka_unit_test(test_json_invalid),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_json_writer_escapes),
        cmocka_unit_test(test_value_json_public),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
