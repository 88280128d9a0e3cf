/* safetensors: [u64 LE header length N][N bytes of JSON][data buffer to end of file].
 *
 * Note [safetensors validation order]
 * A hostile file must be refused before any of its bytes is used as a size, an offset
 * or a pointer. The checks run in the order of the reference reader, so that a file
 * gets the same verdict as there, each with its own message:
 *   1. at least 8 bytes;                    2. N <= 100,000,000;
 *   3. 8 + N within the file;               4. the header is UTF-8;
 *   5. the header is JSON (strict: a repeated key, a number outside int64 or nesting
 *      past 128 levels are errors too);
 *   6. the structure: an object; "__metadata__" maps strings to strings; every other
 *      entry has a known "dtype" string, a "shape" list of integers >= 0 and a
 *      "data_offsets" pair of integers >= 0 (other keys are ignored, as there);
 *   7. sorted by data_offsets, the entries tile the buffer: the first begins at 0,
 *      each begins where the previous ended, none ends before it begins; numel times
 *      the dtype's bits does not overflow and is whole bytes; END - BEGIN equals it;
 *   8. the last END is exactly the end of the file (no trailing bytes, no truncation).
 * Only then come ctorch's own limits (dtypes it lacks, such as the float8 family, and
 * more than 8 dimensions), which a valid file may still hit. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "io/safetensors.h"

#define OP_LOAD "load_safetensors"
#define OP_SAVE "save_safetensors"

/* The reference's dtype enum, in its order: increasing alignment, which is also the
 * writer's sort key. dtype is UNDEFINED for the ones ctorch lacks. */
static const struct {
    const char *name;
    ct_dtype dtype;
    uint32_t bits;
    const char *torch_name; /* for messages about dtypes ctorch lacks */
} st_dtypes[] = {
    {"BOOL", CT_DTYPE_BOOL, 8, NULL},
    {"F4", CT_DTYPE_UNDEFINED, 4, "float4_e2m1fn_x2"},
    {"F6_E2M3", CT_DTYPE_UNDEFINED, 6, "float6_e2m3"},
    {"F6_E3M2", CT_DTYPE_UNDEFINED, 6, "float6_e3m2"},
    {"U8", CT_DTYPE_UINT8, 8, NULL},
    {"I8", CT_DTYPE_INT8, 8, NULL},
    {"F8_E5M2", CT_DTYPE_UNDEFINED, 8, "float8_e5m2"},
    {"F8_E4M3", CT_DTYPE_UNDEFINED, 8, "float8_e4m3fn"},
    {"F8_E8M0", CT_DTYPE_UNDEFINED, 8, "float8_e8m0fnu"},
    {"F8_E4M3FNUZ", CT_DTYPE_UNDEFINED, 8, "float8_e4m3fnuz"},
    {"F8_E5M2FNUZ", CT_DTYPE_UNDEFINED, 8, "float8_e5m2fnuz"},
    {"I16", CT_DTYPE_INT16, 16, NULL},
    {"U16", CT_DTYPE_UINT16, 16, NULL},
    {"F16", CT_DTYPE_FLOAT16, 16, NULL},
    {"BF16", CT_DTYPE_BFLOAT16, 16, NULL},
    {"I32", CT_DTYPE_INT32, 32, NULL},
    {"U32", CT_DTYPE_UINT32, 32, NULL},
    {"F32", CT_DTYPE_FLOAT32, 32, NULL},
    {"C64", CT_DTYPE_UNDEFINED, 64, "complex64"},
    {"F64", CT_DTYPE_FLOAT64, 64, NULL},
    {"I64", CT_DTYPE_INT64, 64, NULL},
    {"U64", CT_DTYPE_UINT64, 64, NULL},
};
#define ST_NDTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

static int st_dtype_find(const char *name, size_t len) {
    for (int i = 0; i < ST_NDTYPES; i++)
        if (strlen(st_dtypes[i].name) == len && memcmp(st_dtypes[i].name, name, len) == 0)
            return i;
    return -1;
}

static int st_dtype_of(ct_dtype d) {
    for (int i = 0; i < ST_NDTYPES; i++)
        if (st_dtypes[i].dtype == d)
            return i;
    return -1;
}

bool ct_safetensors_copy_requested(void) {
    const char *e = getenv("CT_SAFETENSORS_COPY");
    return e && *e && strcmp(e, "0") != 0;
}

/* ------------------------------------------------------------------ loading */

typedef struct {
    const char *name; /* borrowed from the header tree */
    int st;           /* index into st_dtypes */
    int ndim;
    int64_t shape[CT_MAX_DIMS];
    int64_t begin, end;
    const ct_value *shape_v; /* the header's full shape list */
} entry;

/* Every message starts with the file name when there is one. */
#define ST_FAIL(st, ...) st_fail(ctx, (st), __VA_ARGS__)
typedef struct {
    const char *file;
} load_ctx;

static void st_fail(const load_ctx *ctx, ct_status st, const char *fmt, ...) CT_PRINTF(3, 4);
static void st_fail(const load_ctx *ctx, ct_status st, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ctx->file)
        ct_error(st, OP_LOAD, "%s: %s", ctx->file, msg);
    else
        ct_error(st, OP_LOAD, "%s", msg);
}

static uint64_t read_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Reads one tensor entry (check 6). Shapes longer than CT_MAX_DIMS are counted but
 * only their first dims kept: the limit is ctorch's, checked after the file's own
 * validity. */
static bool parse_entry(const load_ctx *ctx, const char *name, const ct_value *e, entry *out, int *ndim_full) {
    if (ct_value_kind(e) != CT_VALUE_DICT) {
        ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': entry must be a JSON object, got %s", name,
                ct_value_type_name(ct_value_kind(e)));
        return false;
    }
    static const char *const keys[] = {"dtype", "shape", "data_offsets"};
    const ct_value *f[3];
    for (int k = 0; k < 3; k++) {
        f[k] = ct_value_get(e, keys[k]);
        if (!f[k]) {
            ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': missing key '%s'", name, keys[k]);
            return false;
        }
    }
    ct_value_type kinds[3] = {ct_value_kind(f[0]), ct_value_kind(f[1]), ct_value_kind(f[2])};
    if (kinds[0] != CT_VALUE_STRING) {
        ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': 'dtype' must be a string, got %s", name, ct_value_type_name(kinds[0]));
        return false;
    }
    size_t dlen;
    const char *dname = ct_value_str(f[0], &dlen);
    out->st = st_dtype_find(dname, dlen);
    if (out->st < 0) {
        ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': unknown dtype '%.64s'", name, dname);
        return false;
    }
    if (kinds[1] != CT_VALUE_LIST) {
        ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': 'shape' must be a list of integers, got %s", name,
                ct_value_type_name(kinds[1]));
        return false;
    }
    int64_t rank = ct_value_len(f[1]);
    *ndim_full = (int)(rank < 1000000 ? rank : 1000000);
    out->ndim = *ndim_full < CT_MAX_DIMS ? *ndim_full : CT_MAX_DIMS;
    for (int64_t i = 0; i < rank; i++) {
        const ct_value *d = ct_value_at(f[1], i);
        if (ct_value_kind(d) != CT_VALUE_INT) {
            ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': 'shape' must be a list of integers, got %s at position %lld",
                    name, ct_value_type_name(ct_value_kind(d)), (long long)i);
            return false;
        }
        int64_t size = ct_value_int(d);
        if (size < 0) {
            ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': negative size %lld in 'shape' at position %lld", name,
                    (long long)size, (long long)i);
            return false;
        }
        if (i < CT_MAX_DIMS)
            out->shape[i] = size;
    }
    if (kinds[2] != CT_VALUE_LIST || ct_value_len(f[2]) != 2 || ct_value_kind(ct_value_at(f[2], 0)) != CT_VALUE_INT ||
        ct_value_kind(ct_value_at(f[2], 1)) != CT_VALUE_INT) {
        ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': 'data_offsets' must be a list of two integers [BEGIN, END]", name);
        return false;
    }
    out->begin = ct_value_int(ct_value_at(f[2], 0));
    out->end = ct_value_int(ct_value_at(f[2], 1));
    if (out->begin < 0 || out->end < 0) {
        ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': negative value in 'data_offsets' [%lld, %lld]", name,
                (long long)out->begin, (long long)out->end);
        return false;
    }
    out->name = name;
    out->shape_v = f[1];
    return true;
}

static int cmp_offsets(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_names(const void *a, const void *b) { return strcmp(((const entry *)a)->name, ((const entry *)b)->name); }

/* Full shape product over all dims, for the overflow check (the kept dims may be
 * fewer than the file's). Like the reference's checked product, it fails at the first
 * overflowing prefix even when a later dimension is 0. */
static bool full_numel(const ct_value *shape, int64_t *out) {
    int64_t n = 1, rank = ct_value_len(shape);
    for (int64_t i = 0; i < rank; i++) {
        int64_t s = ct_value_int(ct_value_at(shape, i));
        if (s != 0 && n > INT64_MAX / s)
            return false;
        n *= s;
    }
    *out = n;
    return true;
}

static void mapping_deleter(void *ctx, void *data) {
    (void)data;
    ct_mapping_release(ctx);
}

static ct_tensor *make_tensor(const entry *e, const uint8_t *data, size_t nbytes, ct_mapping *map) {
    ct_dtype dt = st_dtypes[e->st].dtype;
    size_t item = ct_dtype_size(dt);
    if (map && nbytes > 0 && (uintptr_t)data % item == 0) {
        /* The tensor holds a reference to the mapping, which its deleter drops; a
         * failed ct_from_blob never calls the deleter, so the reference is dropped here. */
        ct_mapping_retain(map);
        ct_tensor *t = ct_from_blob((void *)data, e->shape, NULL, e->ndim, dt, mapping_deleter, map);
        if (!t)
            ct_mapping_release(map);
        return t;
    }
    ct_tensor *t = ct_empty(e->shape, e->ndim, dt, CT_CPU);
    if (t && nbytes)
        memcpy(ct_tensor_data(t), data, nbytes);
    return t;
}

ct_value *ct_safetensors_load_buffer(const uint8_t *buf, size_t len, ct_mapping *map, const char *name) {
    return ct_safetensors_load_parts(buf, len, map, name, CT_ST_ALL);
}

ct_value *ct_safetensors_load_parts(const uint8_t *buf, size_t len, ct_mapping *map, const char *name,
                                    ct_st_parts parts) {
    load_ctx ctxv = {.file = name}, *ctx = &ctxv;
    if (!buf && len) {
        ct_error(CT_ERROR_NULL_ARGUMENT, OP_LOAD, "buffer is NULL for %zu bytes", len);
        return NULL;
    }
    /* 1-3: the header's length. */
    if (len < 8) {
        ST_FAIL(CT_ERROR_FORMAT, "file too small: %zu bytes, but safetensors starts with an 8-byte header length",
                len);
        return NULL;
    }
    uint64_t n = read_le64(buf);
    if (n > CT_SAFETENSORS_MAX_HEADER) {
        ST_FAIL(CT_ERROR_FORMAT, "header too large: %llu bytes (the limit is %u)", (unsigned long long)n,
                CT_SAFETENSORS_MAX_HEADER);
        return NULL;
    }
    if (n > len - 8) {
        ST_FAIL(CT_ERROR_FORMAT, "invalid header length: %llu bytes of header run past the end of the %zu-byte file",
                (unsigned long long)n, len);
        return NULL;
    }
    const char *hdr = (const char *)buf + 8;
    /* 4-5: text and syntax. */
    int64_t bad = ct_utf8_invalid_at((const uint8_t *)hdr, (size_t)n);
    if (bad >= 0) {
        ST_FAIL(CT_ERROR_FORMAT, "header is not valid UTF-8 (byte %lld of the header)", (long long)bad);
        return NULL;
    }
    ct_value *tree = ct_value_from_json(hdr, (size_t)n, "header");
    if (!tree) {
        if (ct_last_status() == CT_ERROR_FORMAT) { /* the parser's message, under this reader's name */
            char msg[768];
            const char *e = ct_last_error();
            snprintf(msg, sizeof msg, "%s", strncmp(e, "value_from_json: ", 17) == 0 ? e + 17 : e);
            ST_FAIL(CT_ERROR_FORMAT, "%s", msg);
        }
        return NULL;
    }
    ct_value *result = NULL;
    entry *entries = NULL;
    const ct_value *meta = NULL;
    /* 6: structure. */
    if (ct_value_kind(tree) != CT_VALUE_DICT) {
        ST_FAIL(CT_ERROR_FORMAT, "header must be a JSON object, got %s", ct_value_type_name(ct_value_kind(tree)));
        goto done;
    }
    int64_t count = ct_value_len(tree);
    entries = ct_xcalloc(OP_LOAD, (size_t)(count ? count : 1), sizeof *entries);
    if (!entries)
        goto done;
    int64_t nent = 0;
    bool too_many_dims = false;
    const char *dims_name = NULL;
    int dims_count = 0;
    for (int64_t i = 0; i < count; i++) {
        const ct_value *item = ct_value_at(tree, i);
        size_t klen; /* JSON object keys are strings */
        const char *key = ct_value_str(ct_value_key_at(tree, i), &klen);
        if (strcmp(key, "__metadata__") == 0 && klen == strlen("__metadata__")) {
            if (ct_value_kind(item) != CT_VALUE_DICT) {
                ST_FAIL(CT_ERROR_FORMAT, "__metadata__ must be an object mapping strings to strings, got %s",
                        ct_value_type_name(ct_value_kind(item)));
                goto done;
            }
            for (int64_t j = 0; j < ct_value_len(item); j++)
                if (ct_value_kind(ct_value_at(item, j)) != CT_VALUE_STRING) {
                    ST_FAIL(CT_ERROR_FORMAT, "__metadata__ must map strings to strings, but '%.200s' is %s",
                            ct_value_str(ct_value_key_at(item, j), NULL),
                            ct_value_type_name(ct_value_kind(ct_value_at(item, j))));
                    goto done;
                }
            meta = item;
            continue;
        }
        if (strlen(key) != klen) {
            ST_FAIL(CT_ERROR_FORMAT, "tensor name '%s' contains a NUL character (\\u0000)", key);
            goto done;
        }
        int ndim_full = 0;
        if (!parse_entry(ctx, key, item, &entries[nent], &ndim_full))
            goto done;
        if (ndim_full > CT_MAX_DIMS && !too_many_dims) {
            too_many_dims = true;
            dims_name = key;
            dims_count = ndim_full;
        }
        nent++;
    }
    /* 7: the entries tile the data buffer. */
    qsort(entries, (size_t)nent, sizeof *entries, cmp_offsets);
    int64_t pos = 0;
    for (int64_t i = 0; i < nent; i++) {
        entry *e = &entries[i];
        if (e->begin != pos || e->end < e->begin) {
            ST_FAIL(CT_ERROR_FORMAT,
                    "tensor '%s': invalid data_offsets [%lld, %lld]: sorted by offset, each tensor must begin "
                    "where the previous one ends (at %lld), with no gap or overlap",
                    e->name, (long long)e->begin, (long long)e->end, (long long)pos);
            goto done;
        }
        const ct_value *shape = e->shape_v;
        int64_t numel;
        uint32_t bits = st_dtypes[e->st].bits;
        if (!full_numel(shape, &numel) || numel > INT64_MAX / (int64_t)bits) {
            ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': the size of its shape overflows", e->name);
            goto done;
        }
        int64_t nbits = numel * (int64_t)bits;
        if (nbits % 8 != 0) {
            ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': %lld elements of %s do not fill whole bytes", e->name,
                    (long long)numel, st_dtypes[e->st].name);
            goto done;
        }
        if (e->end - e->begin != nbits / 8) {
            char sbuf[256];
            ST_FAIL(CT_ERROR_FORMAT,
                    "tensor '%s': data_offsets [%lld, %lld] span %lld bytes, but shape %s of %s needs %lld",
                    e->name, (long long)e->begin, (long long)e->end, (long long)(e->end - e->begin),
                    ct_shape_str(e->shape, e->ndim, sbuf, sizeof sbuf), st_dtypes[e->st].name,
                    (long long)(nbits / 8));
            goto done;
        }
        pos = e->end;
    }
    /* 8: the buffer is exactly the rest of the file. */
    size_t data_len = len - 8 - (size_t)n;
    if ((uint64_t)pos != (uint64_t)data_len) {
        if ((uint64_t)pos < (uint64_t)data_len)
            ST_FAIL(CT_ERROR_FORMAT,
                    "file not fully covered: the tensors end at byte %llu but the file has %zu bytes (%llu "
                    "trailing bytes)",
                    (unsigned long long)(8 + n + (uint64_t)pos), len, (unsigned long long)(data_len - (size_t)pos));
        else
            ST_FAIL(CT_ERROR_FORMAT, "file truncated: the tensors need %llu bytes but the file has %zu",
                    (unsigned long long)(8 + n) + (unsigned long long)pos, len);
        goto done;
    }
    if (parts == CT_ST_METADATA) {
        result = meta ? ct_value_clone(meta) : ct_value_new_dict();
        goto done;
    }
    /* ctorch's own limits. */
    for (int64_t i = 0; i < nent; i++)
        if (st_dtypes[entries[i].st].dtype == CT_DTYPE_UNDEFINED) {
            ST_FAIL(CT_ERROR_NOT_IMPLEMENTED, "tensor '%s': unsupported dtype %s (torch.%s): ctorch has no such dtype",
                    entries[i].name, st_dtypes[entries[i].st].name, st_dtypes[entries[i].st].torch_name);
            goto done;
        }
    if (too_many_dims) {
        ST_FAIL(CT_ERROR_NOT_IMPLEMENTED, "tensor '%s' has %d dimensions; ctorch supports at most %d", dims_name,
                dims_count, CT_MAX_DIMS);
        goto done;
    }
    /* Build: metadata first, then tensors by name (the order safetensors' load_file
     * returns them in). */
    result = ct_value_new_dict();
    if (!result)
        goto done;
    if (meta && parts == CT_ST_ALL && ct_value_set(result, "__metadata__", ct_value_clone(meta)) != CT_OK)
        goto fail_result;
    qsort(entries, (size_t)nent, sizeof *entries, cmp_names);
    const uint8_t *data = buf + 8 + n;
    /* Tensors viewing a read-only mapping must be writable (Note [Mapping files]); where
     * the system refuses, they are copied instead. */
    if (map && !ct_mapping_writable(map, data, data_len))
        map = NULL;
    for (int64_t i = 0; i < nent; i++) {
        ct_scope_begin();
        ct_tensor *t = make_tensor(&entries[i], data + entries[i].begin, (size_t)(entries[i].end - entries[i].begin),
                                   map);
        ct_value *tv = t ? ct_value_new_tensor(t) : NULL;
        ct_scope_end();
        if (!tv || ct_value_set(result, entries[i].name, tv) != CT_OK)
            goto fail_result;
    }
    goto done;
fail_result:
    ct_value_free(result);
    result = NULL;
done:
    free(entries);
    ct_value_free(tree);
    return result;
}

static ct_value *load_file(const char *path, ct_st_parts parts) {
    if (!path) {
        ct_error(CT_ERROR_NULL_ARGUMENT, OP_LOAD, "path is NULL");
        return NULL;
    }
    ct_mapping *m = ct_mapping_open(OP_LOAD, path, ct_sniff_safetensors);
    if (!m)
        return NULL;
    ct_value *v = ct_safetensors_load_parts(m->data, m->len, ct_safetensors_copy_requested() ? NULL : m, path, parts);
    ct_mapping_release(m);
    return v;
}

ct_value *ct_load_safetensors(const char *path) { return load_file(path, CT_ST_ALL); }
ct_value *ct_load_safetensors_metadata(const char *path) { return load_file(path, CT_ST_METADATA); }

/* ------------------------------------------------------------------ saving */

typedef struct {
    const char *name;
    size_t name_len;
    const ct_value *key; /* the name as the dict holds it */
    int st;
    ct_tensor *t; /* contiguous CPU tensor, owned by the save's scope */
    int64_t nbytes;
} out_entry;

/* Largest alignment first, then name: the reference writer's order, which puts every
 * tensor at an offset aligned for its dtype once the header is padded to 8 bytes. */
static int cmp_out(const void *a, const void *b) {
    const out_entry *x = a, *y = b;
    if (x->st != y->st)
        return x->st > y->st ? -1 : 1;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    if (c)
        return c;
    return x->name_len < y->name_len ? -1 : x->name_len > y->name_len ? 1 : 0;
}

static bool check_metadata(const ct_value *meta) {
    if (ct_value_kind(meta) != CT_VALUE_DICT) {
        ct_error(CT_ERROR_TYPE, OP_SAVE, "metadata must be a dict of str -> str, got %s",
                 ct_value_type_name(ct_value_kind(meta)));
        return false;
    }
    for (int64_t i = 0; i < ct_value_len(meta); i++) {
        const ct_value *k = ct_value_key_at(meta, i), *v = ct_value_at(meta, i);
        if (ct_value_kind(k) != CT_VALUE_STRING || ct_value_kind(v) != CT_VALUE_STRING) {
            ct_error(CT_ERROR_TYPE, OP_SAVE, "metadata must map str to str, got a %s key with a %s value",
                     ct_value_type_name(ct_value_kind(k)), ct_value_type_name(ct_value_kind(v)));
            return false;
        }
        size_t kn, vn;
        const char *ks = ct_value_str(k, &kn), *vs = ct_value_str(v, &vn);
        if (ct_utf8_invalid_at(ks, kn) >= 0 || ct_utf8_invalid_at(vs, vn) >= 0) {
            ct_error(CT_ERROR_VALUE, OP_SAVE, "metadata entry '%.200s' is not valid UTF-8", ks);
            return false;
        }
    }
    return true;
}

/* The header under construction; the first failed allocation sets failed (and the
 * error), later appends do nothing. */
typedef struct {
    char *data;
    size_t len, cap;
    bool failed;
} header_buf;

static bool hdr_reserve(header_buf *b, size_t n) {
    if (b->failed)
        return false;
    if (b->cap - b->len > n)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len <= n) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            ct_error(CT_ERROR_OUT_OF_MEMORY, OP_SAVE, "the header is too large");
            return false;
        }
        cap *= 2;
    }
    char *d = ct_xrealloc(OP_SAVE, b->data, cap);
    if (!d) {
        b->failed = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

static void hdr_put(header_buf *b, const char *s, size_t n) {
    if (hdr_reserve(b, n)) {
        memcpy(b->data + b->len, s, n);
        b->len += n;
    }
}
static void hdr_puts(header_buf *b, const char *s) { hdr_put(b, s, strlen(s)); }
static void hdr_put_int(header_buf *b, int64_t v) {
    char num[24];
    hdr_put(b, num, (size_t)snprintf(num, sizeof num, "%lld", (long long)v));
}
/* A string or the metadata dict, as JSON (ct_value_to_json, sized by a first call). */
static void hdr_put_json(header_buf *b, const ct_value *v) {
    int64_t n = ct_value_to_json(v, NULL, 0);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if (hdr_reserve(b, (size_t)n)) {
        ct_value_to_json(v, b->data + b->len, (size_t)n + 1);
        b->len += (size_t)n;
    }
}

static bool write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        c += w;
        n -= (size_t)w;
    }
    return true;
}

static ct_status write_file(const char *path, const header_buf *hdr, const out_entry *ents, int64_t n) {
    static _Atomic unsigned counter;
    size_t plen = strlen(path);
    char *tmp = ct_xmalloc(OP_SAVE, plen + 48);
    if (!tmp)
        return CT_ERROR_OUT_OF_MEMORY;
    /* Written beside the target and renamed over it, so that a failure never leaves a
     * half-written checkpoint under the real name. */
    snprintf(tmp, plen + 48, "%s.tmp%ld.%u", path, (long)getpid(), counter++);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC, 0666);
    if (fd < 0) {
        ct_status st = ct_error(CT_ERROR_IO, OP_SAVE, "cannot create '%s' (writing '%s' there first): %s", path, tmp,
                                strerror(errno));
        free(tmp);
        return st;
    }
    uint8_t lenb[8];
    uint64_t hl = hdr->len;
    for (int i = 0; i < 8; i++)
        lenb[i] = (uint8_t)(hl >> (8 * i));
    bool ok = write_all(fd, lenb, 8) && write_all(fd, hdr->data, hdr->len);
    for (int64_t i = 0; ok && i < n; i++)
        if (ents[i].nbytes)
            ok = write_all(fd, ct_tensor_data(ents[i].t), (size_t)ents[i].nbytes);
    int err = ok ? 0 : errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        err = errno;
    }
    ct_status st = CT_OK;
    if (!ok) {
        st = ct_error(CT_ERROR_IO, OP_SAVE, "cannot write '%s': %s", path, strerror(err));
        unlink(tmp);
    }
    free(tmp);
    return st;
}

ct_status ct_save_safetensors(const char *path, const ct_value *dict, const ct_value *metadata) {
    if (!path)
        return ct_error(CT_ERROR_NULL_ARGUMENT, OP_SAVE, "path is NULL");
    CT_CHECK_ARG_STATUS(OP_SAVE, dict);
    if (ct_value_kind(dict) != CT_VALUE_DICT)
        return ct_error(CT_ERROR_TYPE, OP_SAVE, "expected a dict of name -> Tensor, got %s",
                        ct_value_type_name(ct_value_kind(dict)));
    if (metadata && !check_metadata(metadata))
        return ct_last_status();
    ct_status st = CT_OK;
    int64_t count = ct_value_len(dict);
    out_entry *ents = ct_xcalloc(OP_SAVE, (size_t)(count ? count : 1), sizeof *ents);
    if (!ents)
        return CT_ERROR_OUT_OF_MEMORY;
    header_buf hdr = {0};
    int64_t n = 0;
    ct_scope_begin();
    for (int64_t i = 0; i < count && st == CT_OK; i++) {
        const ct_value *k = ct_value_key_at(dict, i), *v = ct_value_at(dict, i);
        if (ct_value_kind(k) != CT_VALUE_STRING) {
            st = ct_error(CT_ERROR_TYPE, OP_SAVE, "tensor names must be strings, got a %s key",
                          ct_value_type_name(ct_value_kind(k)));
            break;
        }
        size_t name_len;
        const char *name = ct_value_str(k, &name_len);
        if (strcmp(name, "__metadata__") == 0) {
            /* What a load returned saves back as it was. */
            if (metadata)
                st = ct_error(CT_ERROR_VALUE, OP_SAVE,
                              "metadata given twice: as an argument and as the dict's '__metadata__' entry");
            else if (check_metadata(v))
                metadata = v;
            else
                st = ct_last_status();
            continue;
        }
        if (ct_utf8_invalid_at(name, name_len) >= 0) {
            st = ct_error(CT_ERROR_VALUE, OP_SAVE, "tensor name '%.200s' is not valid UTF-8", name);
            break;
        }
        if (ct_value_kind(v) != CT_VALUE_TENSOR) {
            st = ct_error(CT_ERROR_TYPE, OP_SAVE, "'%.200s' is a %s, but safetensors holds only tensors", name,
                          ct_value_type_name(ct_value_kind(v)));
            break;
        }
        ct_tensor *t = ct_value_tensor(v);
        if (ct_tensor_device(t).type == CT_DEVICE_META) {
            st = ct_error(CT_ERROR_DEVICE, OP_SAVE, "'%.200s' is on the meta device and has no data to save", name);
            break;
        }
        ct_tensor *c = ct_contiguous(ct_to_device(t, CT_CPU));
        if (!c) {
            st = ct_last_status();
            break;
        }
        ents[n] = (out_entry){.name = name, .name_len = name_len, .key = k, .st = st_dtype_of(ct_tensor_dtype(t)),
                              .t = c, .nbytes = ct_tensor_numel(c) * (int64_t)ct_tensor_element_size(c)};
        if (ents[n].st < 0) {
            st = ct_error(CT_ERROR_NOT_IMPLEMENTED, OP_SAVE, "'%.200s': dtype %s has no safetensors name", name,
                          ct_dtype_name(ct_tensor_dtype(t)));
            break;
        }
        n++;
    }
    if (st == CT_OK) {
        qsort(ents, (size_t)n, sizeof *ents, cmp_out);
        hdr_put(&hdr, "{", 1);
        bool first = true;
        if (metadata) {
            hdr_puts(&hdr, "\"__metadata__\":");
            hdr_put_json(&hdr, metadata);
            first = false;
        }
        int64_t off = 0;
        for (int64_t i = 0; i < n; i++) {
            if (!first)
                hdr_put(&hdr, ",", 1);
            first = false;
            hdr_put_json(&hdr, ents[i].key);
            hdr_puts(&hdr, ":{\"dtype\":\"");
            hdr_puts(&hdr, st_dtypes[ents[i].st].name);
            hdr_puts(&hdr, "\",\"shape\":[");
            const int64_t *shape = ct_tensor_shape(ents[i].t);
            for (int d = 0; d < ct_tensor_dim(ents[i].t); d++) {
                if (d)
                    hdr_put(&hdr, ",", 1);
                hdr_put_int(&hdr, shape[d]);
            }
            hdr_puts(&hdr, "],\"data_offsets\":[");
            hdr_put_int(&hdr, off);
            hdr_put(&hdr, ",", 1);
            off += ents[i].nbytes;
            hdr_put_int(&hdr, off);
            hdr_puts(&hdr, "]}");
        }
        hdr_put(&hdr, "}", 1);
        while (!hdr.failed && hdr.len % 8 != 0)
            hdr_put(&hdr, " ", 1);
        if (hdr.failed)
            st = ct_last_status() != CT_OK ? ct_last_status() : CT_ERROR_OUT_OF_MEMORY;
        else if (hdr.len > CT_SAFETENSORS_MAX_HEADER)
            st = ct_error(CT_ERROR_VALUE, OP_SAVE, "the header would be %zu bytes, above the %u-byte limit readers accept",
                          hdr.len, CT_SAFETENSORS_MAX_HEADER);
        else
            st = write_file(path, &hdr, ents, n);
    }
    ct_scope_end();
    free(hdr.data);
    free(ents);
    return st;
}
