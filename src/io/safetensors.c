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

#include "error.h"
#include "util/json.h"
#include "io/safetensors.h"
#include "tensor_impl.h"

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
    if (e->type != CT_VALUE_DICT) {
        ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': entry must be a JSON object, got %s", name,
                ct_value_type_name(e->type));
        return false;
    }
    static const char *const keys[] = {"dtype", "shape", "data_offsets"};
    const ct_value *f[3];
    for (int k = 0; k < 3; k++) {
        int64_t pos = ct_value_dict_find_str(e, keys[k], strlen(keys[k]));
        if (pos < 0) {
            ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': missing key '%s'", name, keys[k]);
            return false;
        }
        f[k] = e->u.c.items[pos];
    }
    if (f[0]->type != CT_VALUE_STRING) {
        ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': 'dtype' must be a string, got %s", name, ct_value_type_name(f[0]->type));
        return false;
    }
    out->st = st_dtype_find(f[0]->u.s.data, f[0]->u.s.len);
    if (out->st < 0) {
        ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': unknown dtype '%.64s'", name, f[0]->u.s.data);
        return false;
    }
    if (f[1]->type != CT_VALUE_LIST) {
        ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': 'shape' must be a list of integers, got %s", name,
                ct_value_type_name(f[1]->type));
        return false;
    }
    *ndim_full = (int)(f[1]->u.c.len < 1000000 ? f[1]->u.c.len : 1000000);
    out->ndim = *ndim_full < CT_MAX_DIMS ? *ndim_full : CT_MAX_DIMS;
    for (int64_t i = 0; i < f[1]->u.c.len; i++) {
        const ct_value *d = f[1]->u.c.items[i];
        if (d->type != CT_VALUE_INT) {
            ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': 'shape' must be a list of integers, got %s at position %lld",
                    name, ct_value_type_name(d->type), (long long)i);
            return false;
        }
        if (d->u.i < 0) {
            ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': negative size %lld in 'shape' at position %lld", name,
                    (long long)d->u.i, (long long)i);
            return false;
        }
        if (i < CT_MAX_DIMS)
            out->shape[i] = d->u.i;
    }
    if (f[2]->type != CT_VALUE_LIST || f[2]->u.c.len != 2 || f[2]->u.c.items[0]->type != CT_VALUE_INT ||
        f[2]->u.c.items[1]->type != CT_VALUE_INT) {
        ST_FAIL(CT_ERROR_FORMAT, "tensor '%s': 'data_offsets' must be a list of two integers [BEGIN, END]", name);
        return false;
    }
    out->begin = f[2]->u.c.items[0]->u.i;
    out->end = f[2]->u.c.items[1]->u.i;
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
    int64_t n = 1;
    for (int64_t i = 0; i < shape->u.c.len; i++) {
        int64_t s = shape->u.c.items[i]->u.i;
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
        /* Not ct_from_blob: when it fails, whether it has called the deleter (released
         * the mapping) depends on which step failed. */
        ct_storage *s = ct_storage_from_blob((void *)data, nbytes, mapping_deleter, map);
        if (!s)
            return NULL;
        ct_mapping_retain(map);
        ct_tensor *t = ct_tensor_make(s, 0, e->shape, NULL, e->ndim, dt, CT_CPU);
        if (!t)
            s->deleter = NULL; /* the mapping is released below, once */
        ct_storage_release(s);
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
    ct_value *tree = ct_json_parse(hdr, (size_t)n, OP_LOAD, "header");
    if (!tree) {
        if (name) {
            char msg[768];
            snprintf(msg, sizeof msg, "%s", ct_last_error() + strlen(OP_LOAD ": "));
            ST_FAIL(CT_ERROR_FORMAT, "%s", msg);
        }
        return NULL;
    }
    ct_value *result = NULL;
    entry *entries = NULL;
    const ct_value *meta = NULL;
    /* 6: structure. */
    if (tree->type != CT_VALUE_DICT) {
        ST_FAIL(CT_ERROR_FORMAT, "header must be a JSON object, got %s", ct_value_type_name(tree->type));
        goto done;
    }
    int64_t count = tree->u.c.len;
    entries = ct_xcalloc(OP_LOAD, (size_t)(count ? count : 1), sizeof *entries);
    if (!entries)
        goto done;
    int64_t nent = 0;
    bool too_many_dims = false;
    const char *dims_name = NULL;
    int dims_count = 0;
    for (int64_t i = 0; i < count; i++) {
        const ct_value *key = tree->u.c.keys[i], *item = tree->u.c.items[i];
        if (strcmp(key->u.s.data, "__metadata__") == 0 && key->u.s.len == strlen("__metadata__")) {
            if (item->type != CT_VALUE_DICT) {
                ST_FAIL(CT_ERROR_FORMAT, "__metadata__ must be an object mapping strings to strings, got %s",
                        ct_value_type_name(item->type));
                goto done;
            }
            for (int64_t j = 0; j < item->u.c.len; j++)
                if (item->u.c.items[j]->type != CT_VALUE_STRING) {
                    ST_FAIL(CT_ERROR_FORMAT, "__metadata__ must map strings to strings, but '%.200s' is %s",
                            item->u.c.keys[j]->u.s.data, ct_value_type_name(item->u.c.items[j]->type));
                    goto done;
                }
            meta = item;
            continue;
        }
        if (strlen(key->u.s.data) != key->u.s.len) {
            ST_FAIL(CT_ERROR_FORMAT, "tensor name '%s' contains a NUL character (\\u0000)", key->u.s.data);
            goto done;
        }
        int ndim_full = 0;
        if (!parse_entry(ctx, key->u.s.data, item, &entries[nent], &ndim_full))
            goto done;
        if (ndim_full > CT_MAX_DIMS && !too_many_dims) {
            too_many_dims = true;
            dims_name = key->u.s.data;
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
    if (meta && ct_value_set(result, "__metadata__", ct_value_clone(meta)) != CT_OK)
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

ct_value *ct_load_safetensors(const char *path) {
    if (!path) {
        ct_error(CT_ERROR_NULL_ARGUMENT, OP_LOAD, "path is NULL");
        return NULL;
    }
    ct_mapping *m = ct_mapping_open(OP_LOAD, path, ct_sniff_safetensors);
    if (!m)
        return NULL;
    ct_value *v = ct_safetensors_load_buffer(m->data, m->len, ct_safetensors_copy_requested() ? NULL : m, path);
    ct_mapping_release(m);
    return v;
}

/* ------------------------------------------------------------------ saving */

typedef struct {
    const char *name;
    size_t name_len;
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
    if (meta->type != CT_VALUE_DICT) {
        ct_error(CT_ERROR_TYPE, OP_SAVE, "metadata must be a dict of str -> str, got %s", ct_value_type_name(meta->type));
        return false;
    }
    for (int64_t i = 0; i < meta->u.c.len; i++) {
        const ct_value *k = meta->u.c.keys[i], *v = meta->u.c.items[i];
        if (k->type != CT_VALUE_STRING || v->type != CT_VALUE_STRING) {
            ct_error(CT_ERROR_TYPE, OP_SAVE, "metadata must map str to str, got a %s key with a %s value",
                     ct_value_type_name(k->type), ct_value_type_name(v->type));
            return false;
        }
        if (ct_utf8_invalid_at((const uint8_t *)k->u.s.data, k->u.s.len) >= 0 ||
            ct_utf8_invalid_at((const uint8_t *)v->u.s.data, v->u.s.len) >= 0) {
            ct_error(CT_ERROR_VALUE, OP_SAVE, "metadata entry '%.200s' is not valid UTF-8", k->u.s.data);
            return false;
        }
    }
    return true;
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

static ct_status write_file(const char *path, const ct_json_buf *hdr, const out_entry *ents, int64_t n) {
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
    if (dict->type != CT_VALUE_DICT)
        return ct_error(CT_ERROR_TYPE, OP_SAVE, "expected a dict of name -> Tensor, got %s",
                        ct_value_type_name(dict->type));
    if (metadata && !check_metadata(metadata))
        return ct_last_status();
    ct_status st = CT_OK;
    out_entry *ents = ct_xcalloc(OP_SAVE, (size_t)(dict->u.c.len ? dict->u.c.len : 1), sizeof *ents);
    if (!ents)
        return CT_ERROR_OUT_OF_MEMORY;
    ct_json_buf hdr = {0};
    int64_t n = 0;
    ct_scope_begin();
    for (int64_t i = 0; i < dict->u.c.len && st == CT_OK; i++) {
        const ct_value *k = dict->u.c.keys[i], *v = dict->u.c.items[i];
        if (k->type != CT_VALUE_STRING) {
            st = ct_error(CT_ERROR_TYPE, OP_SAVE, "tensor names must be strings, got a %s key",
                          ct_value_type_name(k->type));
            break;
        }
        if (strcmp(k->u.s.data, "__metadata__") == 0) {
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
        if (ct_utf8_invalid_at((const uint8_t *)k->u.s.data, k->u.s.len) >= 0) {
            st = ct_error(CT_ERROR_VALUE, OP_SAVE, "tensor name '%.200s' is not valid UTF-8", k->u.s.data);
            break;
        }
        if (v->type != CT_VALUE_TENSOR) {
            st = ct_error(CT_ERROR_TYPE, OP_SAVE, "'%.200s' is a %s, but safetensors holds only tensors",
                          k->u.s.data, ct_value_type_name(v->type));
            break;
        }
        ct_tensor *t = v->u.t;
        if (t->device.type == CT_DEVICE_META) {
            st = ct_error(CT_ERROR_DEVICE, OP_SAVE, "'%.200s' is on the meta device and has no data to save",
                          k->u.s.data);
            break;
        }
        ct_tensor *c = ct_contiguous(ct_to_device(t, CT_CPU));
        if (!c) {
            st = ct_last_status();
            break;
        }
        ents[n] = (out_entry){.name = k->u.s.data, .name_len = k->u.s.len, .st = st_dtype_of(t->dtype), .t = c,
                              .nbytes = c->numel * (int64_t)ct_dtype_size(c->dtype)};
        CT_ASSERT(ents[n].st >= 0);
        n++;
    }
    if (st == CT_OK) {
        qsort(ents, (size_t)n, sizeof *ents, cmp_out);
        ct_json_put(&hdr, "{", 1);
        bool first = true;
        if (metadata) {
            ct_json_puts(&hdr, "\"__metadata__\":{");
            for (int64_t i = 0; i < metadata->u.c.len; i++) {
                const ct_value *k = metadata->u.c.keys[i], *v = metadata->u.c.items[i];
                if (i)
                    ct_json_put(&hdr, ",", 1);
                ct_json_put_string(&hdr, k->u.s.data, k->u.s.len);
                ct_json_put(&hdr, ":", 1);
                ct_json_put_string(&hdr, v->u.s.data, v->u.s.len);
            }
            ct_json_put(&hdr, "}", 1);
            first = false;
        }
        int64_t off = 0;
        for (int64_t i = 0; i < n; i++) {
            if (!first)
                ct_json_put(&hdr, ",", 1);
            first = false;
            ct_json_put_string(&hdr, ents[i].name, ents[i].name_len);
            ct_json_puts(&hdr, ":{\"dtype\":\"");
            ct_json_puts(&hdr, st_dtypes[ents[i].st].name);
            ct_json_puts(&hdr, "\",\"shape\":[");
            for (int d = 0; d < ents[i].t->ndim; d++) {
                if (d)
                    ct_json_put(&hdr, ",", 1);
                ct_json_put_int(&hdr, ents[i].t->shape[d]);
            }
            ct_json_puts(&hdr, "],\"data_offsets\":[");
            ct_json_put_int(&hdr, off);
            ct_json_put(&hdr, ",", 1);
            off += ents[i].nbytes;
            ct_json_put_int(&hdr, off);
            ct_json_puts(&hdr, "]}");
        }
        ct_json_put(&hdr, "}", 1);
        while (!hdr.failed && hdr.len % 8 != 0)
            ct_json_put(&hdr, " ", 1);
        if (hdr.failed)
            st = CT_ERROR_OUT_OF_MEMORY;
        else if (hdr.len > CT_SAFETENSORS_MAX_HEADER)
            st = ct_error(CT_ERROR_VALUE, OP_SAVE, "the header would be %zu bytes, above the %u-byte limit readers accept",
                          hdr.len, CT_SAFETENSORS_MAX_HEADER);
        else
            st = write_file(path, &hdr, ents, n);
    }
    ct_scope_end();
    ct_json_buf_free(&hdr);
    free(ents);
    return st;
}
