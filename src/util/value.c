/* ct_value: the tree a checkpoint loads into. See Note [Value trees] in value.h. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "util/value.h"
#include "core/tensor_impl.h"

static const char *const type_names[] = {
    [CT_VALUE_NONE] = "None",     [CT_VALUE_BOOL] = "bool",   [CT_VALUE_INT] = "int",
    [CT_VALUE_FLOAT] = "float",   [CT_VALUE_STRING] = "str",  [CT_VALUE_BYTES] = "bytes",
    [CT_VALUE_TENSOR] = "Tensor", [CT_VALUE_LIST] = "list",   [CT_VALUE_TUPLE] = "tuple",
    [CT_VALUE_DICT] = "dict",
};

const char *ct_value_type_name(ct_value_type type) {
    if ((int)type < 0 || (size_t)type >= sizeof type_names / sizeof type_names[0])
        return "unknown";
    return type_names[type];
}

static ct_value *value_alloc(const char *op, ct_value_type type) {
    ct_value *v = ct_xcalloc(op, 1, sizeof *v);
    if (v)
        v->type = type;
    return v;
}

static bool is_container(const ct_value *v) {
    return v->type == CT_VALUE_LIST || v->type == CT_VALUE_TUPLE || v->type == CT_VALUE_DICT;
}

void ct_value_free(ct_value *v) {
    if (!v)
        return;
    switch (v->type) {
    case CT_VALUE_STRING:
    case CT_VALUE_BYTES: free(v->u.s.data); break;
    case CT_VALUE_TENSOR: ct_release(v->u.t); break;
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE:
    case CT_VALUE_DICT:
        for (int64_t i = 0; i < v->u.c.len; i++) {
            ct_value_free(v->u.c.items[i]);
            if (v->u.c.keys)
                ct_value_free(v->u.c.keys[i]);
        }
        free(v->u.c.items);
        free(v->u.c.keys);
        free(v->u.c.index);
        break;
    default: break;
    }
    free(v);
}

ct_value_type ct_value_kind(const ct_value *v) {
    if (!v) {
        ct_error_null("value_kind");
        return CT_VALUE_NONE;
    }
    return v->type;
}

/* Sets a TypeError naming the expected kind; NULL propagates the first error. */
static bool expect(const char *op, const ct_value *v, bool ok, const char *what) {
    if (!v) {
        ct_error_null(op);
        return false;
    }
    if (!ok) {
        ct_error(CT_ERROR_TYPE, op, "expected %s, got a %s value", what, ct_value_type_name(v->type));
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------ scalars */

bool ct_value_bool(const ct_value *v) {
    if (!expect("value_bool", v, v && v->type == CT_VALUE_BOOL, "a bool"))
        return false;
    return v->u.b;
}

int64_t ct_value_int(const ct_value *v) {
    /* A Python bool is an int, so True reads as 1. */
    if (!expect("value_int", v, v && (v->type == CT_VALUE_INT || v->type == CT_VALUE_BOOL), "an int"))
        return 0;
    return v->type == CT_VALUE_BOOL ? (int64_t)v->u.b : v->u.i;
}

double ct_value_float(const ct_value *v) {
    if (!expect("value_float", v,
                v && (v->type == CT_VALUE_FLOAT || v->type == CT_VALUE_INT || v->type == CT_VALUE_BOOL),
                "a float or an int"))
        return 0.0;
    if (v->type == CT_VALUE_FLOAT)
        return v->u.f;
    return v->type == CT_VALUE_INT ? (double)v->u.i : (double)v->u.b;
}

const char *ct_value_str(const ct_value *v, size_t *len) {
    if (len)
        *len = 0;
    if (!expect("value_str", v, v && (v->type == CT_VALUE_STRING || v->type == CT_VALUE_BYTES), "a str or bytes"))
        return NULL;
    if (len)
        *len = v->u.s.len;
    return v->u.s.data;
}

ct_tensor *ct_value_tensor(const ct_value *v) {
    if (!expect("value_tensor", v, v && v->type == CT_VALUE_TENSOR, "a Tensor"))
        return NULL;
    return ct_tensor_ref(v->u.t);
}

/* ------------------------------------------------------------------ containers */

int64_t ct_value_len(const ct_value *v) {
    if (!expect("value_len", v, v && is_container(v), "a list, tuple or dict"))
        return -1;
    return v->u.c.len;
}

/* Python-style index: negative counts from the end. */
static bool wrap_index(const char *op, const ct_value *v, int64_t i, int64_t *out) {
    int64_t n = v->u.c.len;
    if (i < -n || i >= n) {
        ct_error(CT_ERROR_INDEX, op, "%s index %lld out of range (length %lld)", ct_value_type_name(v->type),
                 (long long)i, (long long)n);
        return false;
    }
    *out = i < 0 ? i + n : i;
    return true;
}

ct_value *ct_value_at(const ct_value *v, int64_t i) {
    int64_t k;
    if (!expect("value_at", v, v && is_container(v), "a list, tuple or dict") || !wrap_index("value_at", v, i, &k))
        return NULL;
    return v->u.c.items[k];
}

ct_value *ct_value_key_at(const ct_value *v, int64_t i) {
    int64_t k;
    if (!expect("value_key_at", v, v && v->type == CT_VALUE_DICT, "a dict") ||
        !wrap_index("value_key_at", v, i, &k))
        return NULL;
    return v->u.c.keys[k];
}

/* FNV-1a over the key's bytes; int keys hash their 8 bytes with a different seed so
 * that 1 and "1" rarely collide (they never compare equal anyway). */
static uint64_t hash_bytes(const void *p, size_t n, uint64_t h) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}
static uint64_t hash_str(const char *s, size_t len) { return hash_bytes(s, len, 14695981039346656037ull); }
static uint64_t hash_int(int64_t i) { return hash_bytes(&i, sizeof i, 1469598103934665603ull); }
static uint64_t hash_key(const ct_value *k) {
    return k->type == CT_VALUE_INT ? hash_int(k->u.i) : hash_str(k->u.s.data, k->u.s.len);
}

static bool key_is_str(const ct_value *k, const char *s, size_t len) {
    return k->type == CT_VALUE_STRING && k->u.s.len == len && memcmp(k->u.s.data, s, len) == 0;
}
static bool key_equal(const ct_value *a, const ct_value *b) {
    if (a->type != b->type)
        return false;
    return a->type == CT_VALUE_INT ? a->u.i == b->u.i : key_is_str(a, b->u.s.data, b->u.s.len);
}

#define DICT_INDEX_MIN 8 /* below this many entries a linear scan is as fast */

static void index_insert(ct_value *d, int64_t pos) {
    uint64_t mask = (uint64_t)d->u.c.index_cap - 1;
    uint64_t h = hash_key(d->u.c.keys[pos]) & mask;
    while (d->u.c.index[h])
        h = (h + 1) & mask;
    d->u.c.index[h] = pos + 1;
}

/* Keeps the index at most half full; false only when memory runs out. */
static bool index_grow(ct_value *d, int64_t need) {
    if (need < DICT_INDEX_MIN)
        return true;
    if (d->u.c.index && need * 2 <= d->u.c.index_cap)
        return true;
    int64_t cap = 16;
    while (cap < need * 2)
        cap *= 2;
    int64_t *idx = ct_xcalloc("value_set", (size_t)cap, sizeof *idx);
    if (!idx)
        return false;
    free(d->u.c.index);
    d->u.c.index = idx;
    d->u.c.index_cap = cap;
    for (int64_t i = 0; i < d->u.c.len; i++)
        index_insert(d, i);
    return true;
}

static int64_t find_hashed(const ct_value *d, uint64_t h, const ct_value *key, const char *s, size_t len) {
    if (d->u.c.index) {
        uint64_t mask = (uint64_t)d->u.c.index_cap - 1;
        for (uint64_t slot = h & mask; d->u.c.index[slot]; slot = (slot + 1) & mask) {
            int64_t pos = d->u.c.index[slot] - 1;
            if (key ? key_equal(d->u.c.keys[pos], key) : key_is_str(d->u.c.keys[pos], s, len))
                return pos;
        }
        return -1;
    }
    for (int64_t i = 0; i < d->u.c.len; i++)
        if (key ? key_equal(d->u.c.keys[i], key) : key_is_str(d->u.c.keys[i], s, len))
            return i;
    return -1;
}

int64_t ct_value_dict_find(const ct_value *dict, const ct_value *key) {
    if (!dict || dict->type != CT_VALUE_DICT || !key || (key->type != CT_VALUE_STRING && key->type != CT_VALUE_INT))
        return -1;
    return find_hashed(dict, hash_key(key), key, NULL, 0);
}

int64_t ct_value_dict_find_str(const ct_value *dict, const char *key, size_t len) {
    if (!dict || dict->type != CT_VALUE_DICT || !key)
        return -1;
    return find_hashed(dict, hash_str(key, len), NULL, key, len);
}

ct_value *ct_value_get(const ct_value *v, const char *key) {
    if (!expect("value_get", v, v && v->type == CT_VALUE_DICT, "a dict"))
        return NULL;
    if (!key) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "value_get", "key is NULL");
        return NULL;
    }
    int64_t pos = ct_value_dict_find_str(v, key, strlen(key));
    if (pos < 0) {
        ct_error(CT_ERROR_INDEX, "value_get", "no key '%s' in the dict (%lld entries)", key,
                 (long long)v->u.c.len);
        return NULL;
    }
    return v->u.c.items[pos];
}

ct_value *ct_value_get_int(const ct_value *dict, int64_t key) {
    ct_value k = {.type = CT_VALUE_INT, .u.i = key};
    int64_t pos = ct_value_dict_find(dict, &k);
    return pos < 0 ? NULL : dict->u.c.items[pos];
}

/* ------------------------------------------------------------------ builders */

ct_value *ct_value_none(void) { return value_alloc("value_none", CT_VALUE_NONE); }

ct_value *ct_value_new_bool(bool b) {
    ct_value *v = value_alloc("value_new_bool", CT_VALUE_BOOL);
    if (v)
        v->u.b = b;
    return v;
}

ct_value *ct_value_new_int(int64_t i) {
    ct_value *v = value_alloc("value_new_int", CT_VALUE_INT);
    if (v)
        v->u.i = i;
    return v;
}

ct_value *ct_value_new_float(double f) {
    ct_value *v = value_alloc("value_new_float", CT_VALUE_FLOAT);
    if (v)
        v->u.f = f;
    return v;
}

static ct_value *new_blob(const char *op, ct_value_type type, const void *data, size_t len) {
    if (!data && len) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "data is NULL for %zu bytes", len);
        return NULL;
    }
    if (len == SIZE_MAX) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, op, "string too long");
        return NULL;
    }
    ct_value *v = value_alloc(op, type);
    if (!v)
        return NULL;
    v->u.s.data = ct_xmalloc(op, len + 1);
    if (!v->u.s.data) {
        free(v);
        return NULL;
    }
    if (len)
        memcpy(v->u.s.data, data, len);
    v->u.s.data[len] = '\0';
    v->u.s.len = len;
    return v;
}

ct_value *ct_value_new_str(const char *s) {
    if (!s) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "value_new_str", "string is NULL");
        return NULL;
    }
    return new_blob("value_new_str", CT_VALUE_STRING, s, strlen(s));
}

ct_value *ct_value_new_strn(const char *s, size_t len) { return new_blob("value_new_str", CT_VALUE_STRING, s, len); }

ct_value *ct_value_new_bytes(const void *data, size_t len) {
    return new_blob("value_new_bytes", CT_VALUE_BYTES, data, len);
}

ct_value *ct_value_new_tensor(ct_tensor *t) {
    CT_CHECK_ARG("value_new_tensor", t);
    ct_value *v = value_alloc("value_new_tensor", CT_VALUE_TENSOR);
    if (v)
        v->u.t = ct_retain(t);
    return v;
}

ct_value *ct_value_new_list(void) { return value_alloc("value_new_list", CT_VALUE_LIST); }
ct_value *ct_value_new_tuple(void) { return value_alloc("value_new_tuple", CT_VALUE_TUPLE); }
ct_value *ct_value_new_dict(void) { return value_alloc("value_new_dict", CT_VALUE_DICT); }

/* Whether v may not go into container c: it already has a container, or it is c or
 * holds c (Note [Value trees]). Sets the error; such a value is left to its owner. */
static bool refuse_child(const char *op, const ct_value *c, const ct_value *v) {
    if (v->parent) {
        ct_error(CT_ERROR_VALUE, op,
                 "the %s is already inside a %s; a value has one owner (add a ct_value_clone of it instead)",
                 ct_value_type_name(v->type), ct_value_type_name(v->parent->type));
        return true;
    }
    for (const ct_value *a = c; a; a = a->parent)
        if (a == v) {
            ct_error(CT_ERROR_VALUE, op, "cannot put a %s inside itself", ct_value_type_name(v->type));
            return true;
        }
    return false;
}

/* Frees a value handed to a builder that failed, unless it is not the caller's to give
 * (refuse_child's cases). */
static void free_handed(const ct_value *c, ct_value *v) {
    if (!v || v->parent)
        return;
    for (const ct_value *a = c; a; a = a->parent)
        if (a == v)
            return;
    ct_value_free(v);
}

/* Room for one more item (and key, for dicts). */
static bool reserve(const char *op, ct_value *c) {
    if (c->u.c.len < c->u.c.cap)
        return true;
    int64_t cap = c->u.c.cap ? c->u.c.cap * 2 : 4;
    ct_value **items = realloc(c->u.c.items, (size_t)cap * sizeof *items);
    if (!items) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, op, "could not grow a %s to %lld items", ct_value_type_name(c->type),
                 (long long)cap);
        return false;
    }
    c->u.c.items = items;
    if (c->type == CT_VALUE_DICT) {
        ct_value **keys = realloc(c->u.c.keys, (size_t)cap * sizeof *keys);
        if (!keys) {
            ct_error(CT_ERROR_OUT_OF_MEMORY, op, "could not grow a dict to %lld items", (long long)cap);
            return false;
        }
        c->u.c.keys = keys;
    }
    c->u.c.cap = cap;
    return true;
}

ct_status ct_value_append(ct_value *list, ct_value *item) {
    ct_status st = CT_OK;
    if (!item)
        st = ct_error_null("value_append");
    else if (!expect("value_append", list, list && (list->type == CT_VALUE_LIST || list->type == CT_VALUE_TUPLE),
                     "a list or tuple"))
        st = ct_last_status();
    else if (item == list)
        st = ct_error(CT_ERROR_VALUE, "value_append", "cannot append a %s to itself", ct_value_type_name(list->type));
    else if (refuse_child("value_append", list, item))
        st = ct_last_status();
    else if (!reserve("value_append", list))
        st = CT_ERROR_OUT_OF_MEMORY;
    if (st != CT_OK) {
        free_handed(list && is_container(list) ? list : NULL, item);
        return st;
    }
    list->u.c.items[list->u.c.len++] = item;
    item->parent = list;
    return CT_OK;
}

ct_status ct_value_dict_set(ct_value *dict, ct_value *key, ct_value *item) {
    ct_status st = CT_OK;
    if (!key || !item)
        st = ct_error_null("value_set");
    else if (!expect("value_set", dict, dict && dict->type == CT_VALUE_DICT, "a dict"))
        st = ct_last_status();
    else if (key->type != CT_VALUE_STRING && key->type != CT_VALUE_INT)
        st = ct_error(CT_ERROR_TYPE, "value_set", "dict keys must be str or int, got %s",
                      ct_value_type_name(key->type));
    else if (item == dict || key == dict)
        st = ct_error(CT_ERROR_VALUE, "value_set", "cannot put a dict inside itself");
    else if (key == item)
        st = ct_error(CT_ERROR_VALUE, "value_set", "the key and the item are the same value");
    else if (refuse_child("value_set", dict, key) || refuse_child("value_set", dict, item))
        st = ct_last_status();
    if (st != CT_OK) {
        const ct_value *c = dict && is_container(dict) ? dict : NULL;
        free_handed(c, key);
        if (item != key)
            free_handed(c, item);
        return st;
    }
    int64_t pos = ct_value_dict_find(dict, key);
    if (pos >= 0) {
        ct_value_free(dict->u.c.items[pos]);
        dict->u.c.items[pos] = item;
        item->parent = dict;
        ct_value_free(key);
        return CT_OK;
    }
    if (!reserve("value_set", dict) || !index_grow(dict, dict->u.c.len + 1)) {
        ct_value_free(key);
        ct_value_free(item);
        return CT_ERROR_OUT_OF_MEMORY;
    }
    pos = dict->u.c.len++;
    dict->u.c.keys[pos] = key;
    dict->u.c.items[pos] = item;
    key->parent = dict;
    item->parent = dict;
    if (dict->u.c.index)
        index_insert(dict, pos);
    return CT_OK;
}

ct_status ct_value_set(ct_value *dict, const char *key, ct_value *item) {
    if (!key) {
        ct_value_free(item);
        return ct_error(CT_ERROR_NULL_ARGUMENT, "value_set", "key is NULL");
    }
    ct_value *k = NULL;
    if (dict && item) {
        k = ct_value_new_str(key);
        if (!k) {
            ct_value_free(item);
            return ct_last_status();
        }
    }
    return ct_value_dict_set(dict, k ? k : NULL, item);
}

ct_status ct_value_dict_set_int(ct_value *dict, int64_t key, ct_value *item) {
    ct_value *k = NULL;
    if (dict && item) {
        k = ct_value_new_int(key);
        if (!k) {
            ct_value_free(item);
            return ct_last_status();
        }
    }
    return ct_value_dict_set(dict, k, item);
}

ct_status ct_value_set_int(ct_value *dict, int64_t key, ct_value *item) {
    return ct_value_dict_set_int(dict, key, item);
}

static ct_value *dict_take(const char *op, ct_value *dict, const char *key) {
    if (!expect(op, dict, dict && dict->type == CT_VALUE_DICT, "a dict"))
        return NULL;
    if (!key) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "key is NULL");
        return NULL;
    }
    int64_t pos = ct_value_dict_find_str(dict, key, strlen(key));
    if (pos < 0) {
        ct_error(CT_ERROR_INDEX, op, "no key '%s' in the dict (%lld entries)", key, (long long)dict->u.c.len);
        return NULL;
    }
    ct_value *item = dict->u.c.items[pos];
    ct_value_free(dict->u.c.keys[pos]);
    int64_t after = dict->u.c.len - pos - 1;
    memmove(&dict->u.c.items[pos], &dict->u.c.items[pos + 1], (size_t)after * sizeof *dict->u.c.items);
    memmove(&dict->u.c.keys[pos], &dict->u.c.keys[pos + 1], (size_t)after * sizeof *dict->u.c.keys);
    dict->u.c.len--;
    if (dict->u.c.index) { /* positions after pos moved: index them again */
        memset(dict->u.c.index, 0, (size_t)dict->u.c.index_cap * sizeof *dict->u.c.index);
        for (int64_t i = 0; i < dict->u.c.len; i++)
            index_insert(dict, i);
    }
    item->parent = NULL;
    return item;
}

ct_value *ct_value_dict_pop(ct_value *dict, const char *key) { return dict_take("value_dict_pop", dict, key); }

ct_status ct_value_dict_remove(ct_value *dict, const char *key) {
    ct_value *v = dict_take("value_dict_remove", dict, key);
    if (!v)
        return ct_last_status();
    ct_value_free(v);
    return CT_OK;
}

ct_value *ct_value_pop(ct_value *list) {
    if (!list || (list->type != CT_VALUE_LIST && list->type != CT_VALUE_TUPLE) || list->u.c.len == 0)
        return NULL;
    ct_value *v = list->u.c.items[--list->u.c.len];
    v->parent = NULL;
    return v;
}

ct_value *ct_value_clone(const ct_value *v) {
    CT_CHECK_ARG("value_clone", v);
    switch (v->type) {
    case CT_VALUE_NONE: return ct_value_none();
    case CT_VALUE_BOOL: return ct_value_new_bool(v->u.b);
    case CT_VALUE_INT: return ct_value_new_int(v->u.i);
    case CT_VALUE_FLOAT: return ct_value_new_float(v->u.f);
    case CT_VALUE_STRING: return ct_value_new_strn(v->u.s.data, v->u.s.len);
    case CT_VALUE_BYTES: return ct_value_new_bytes(v->u.s.data, v->u.s.len);
    case CT_VALUE_TENSOR: return ct_value_new_tensor(v->u.t);
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE:
    case CT_VALUE_DICT: {
        ct_value *c = value_alloc("value_clone", v->type);
        if (!c)
            return NULL;
        for (int64_t i = 0; i < v->u.c.len; i++) {
            ct_value *item = ct_value_clone(v->u.c.items[i]);
            ct_status st;
            if (v->type == CT_VALUE_DICT)
                st = ct_value_dict_set(c, item ? ct_value_clone(v->u.c.keys[i]) : NULL, item);
            else
                st = ct_value_append(c, item);
            if (st != CT_OK) {
                ct_value_free(c);
                return NULL;
            }
        }
        return c;
    }
    }
    ct_error(CT_ERROR_VALUE, "value_clone", "corrupt value of kind %d", (int)v->type);
    return NULL;
}
