/* A text file as a character (byte) dataset, nanoGPT's shakespeare_char style. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "data/data_internal.h"

struct ct_char_dataset {
    int vocab;
    unsigned char bytes[256]; /* id -> byte */
    int16_t ids[256];         /* byte -> id, -1 when absent */
    int64_t n, ntrain;
    int64_t *tokens; /* all n tokens; train = [0, ntrain), val = [ntrain, n) */
};

ct_char_dataset *ct_char_dataset_from_text(const char *text, size_t len, double val_fraction) {
    static const char *op = "char_dataset";
    if (!text && len > 0) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "text is NULL");
        return NULL;
    }
    if (!(val_fraction >= 0 && val_fraction < 1)) {
        ct_error(CT_ERROR_VALUE, op, "val_fraction must be in [0, 1), got %g", val_fraction);
        return NULL;
    }
    if (len == 0) {
        ct_error(CT_ERROR_VALUE, op, "the text is empty");
        return NULL;
    }
    if (len > (size_t)INT64_MAX / sizeof(int64_t)) {
        ct_error(CT_ERROR_VALUE, op, "text too long");
        return NULL;
    }
    ct_char_dataset *ds = ct_xcalloc(op, 1, sizeof *ds);
    if (!ds)
        return NULL;
    ds->tokens = ct_xmalloc(op, len * sizeof(int64_t));
    if (!ds->tokens) {
        free(ds);
        return NULL;
    }
    bool seen[256] = {false};
    for (size_t i = 0; i < len; i++)
        seen[(unsigned char)text[i]] = true;
    for (int b = 0; b < 256; b++) {
        ds->ids[b] = -1;
        if (seen[b]) {
            ds->ids[b] = (int16_t)ds->vocab;
            ds->bytes[ds->vocab++] = (unsigned char)b;
        }
    }
    for (size_t i = 0; i < len; i++)
        ds->tokens[i] = ds->ids[(unsigned char)text[i]];
    ds->n = (int64_t)len;
    /* nanoGPT: n = len(data); train = data[:int(n * 0.9)] */
    ds->ntrain = (int64_t)((double)ds->n * (1.0 - val_fraction));
    return ds;
}

ct_char_dataset *ct_char_dataset_from_file(const char *path, double val_fraction) {
    static const char *op = "char_dataset";
    if (!path) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "path is NULL");
        return NULL;
    }
    size_t len = 0;
    char *buf = ct_data_read_file(op, path, &len);
    if (!buf)
        return NULL;
    ct_char_dataset *ds = ct_char_dataset_from_text(buf, len, val_fraction);
    free(buf);
    return ds;
}

void ct_char_dataset_free(ct_char_dataset *ds) {
    if (!ds)
        return;
    free(ds->tokens);
    free(ds);
}

int ct_char_dataset_vocab_size(const ct_char_dataset *ds) {
    return ds ? ds->vocab : -1;
}

int ct_char_dataset_byte(const ct_char_dataset *ds, int id) {
    return ds && id >= 0 && id < ds->vocab ? ds->bytes[id] : -1;
}

static bool split_range(const ct_char_dataset *ds, ct_text_split split, int64_t *start, int64_t *n, const char *op) {
    return ct_data_split_range(op, split, ds->n, ds->ntrain, start, n);
}

int64_t ct_char_dataset_len(const ct_char_dataset *ds, ct_text_split split) {
    int64_t s, n;
    if (!ds) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "char_dataset.len", "dataset is NULL");
        return -1;
    }
    return split_range(ds, split, &s, &n, "char_dataset.len") ? n : -1;
}

ct_tensor *ct_char_dataset_tokens(const ct_char_dataset *ds, ct_text_split split) {
    int64_t s, n;
    if (!ds) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "char_dataset.tokens", "dataset is NULL");
        return NULL;
    }
    if (!split_range(ds, split, &s, &n, "char_dataset.tokens"))
        return NULL;
    return ct_from_data(ds->tokens + s, CT_SHAPE(n), CT_I64);
}

ct_tensor *ct_char_dataset_encode(const ct_char_dataset *ds, const char *str, size_t len) {
    static const char *op = "char_dataset.encode";
    if (!ds || (!str && len > 0)) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", !ds ? "dataset" : "string");
        return NULL;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)str[i];
        if (ds->ids[c] < 0) {
            ct_error(CT_ERROR_VALUE, op, "byte 0x%02x ('%c') at position %zu is not in the vocabulary", c,
                     c >= 32 && c < 127 ? c : '?', i);
            return NULL;
        }
    }
    ct_tensor *t = ct_empty(CT_SHAPE((int64_t)len), CT_I64, CT_CPU);
    if (!t)
        return NULL;
    int64_t *out = ct_tensor_data(t);
    for (size_t i = 0; i < len; i++)
        out[i] = ds->ids[(unsigned char)str[i]];
    return t;
}

int64_t ct_char_dataset_decode(const ct_char_dataset *ds, const ct_tensor *ids, char *buf, size_t cap) {
    static const char *op = "char_dataset.decode";
    if (!ds || !ids || (!buf && cap > 0)) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", !ds ? "dataset" : !ids ? "ids" : "buf");
        return -1;
    }
    if (!ct_dtype_is_integral(ct_tensor_dtype(ids), false)) {
        ct_error(CT_ERROR_TYPE, op, "token ids must be integers, got %s", ct_dtype_name(ct_tensor_dtype(ids)));
        return -1;
    }
    int64_t n = ct_tensor_numel(ids);
    ct_scope_begin();
    ct_tensor *c = ct_contiguous(ct_to_dtype(ct_to_device(ids, CT_CPU), CT_I64));
    int64_t r = -1;
    if (c) {
        const int64_t *v = ct_tensor_data(c);
        r = n;
        for (int64_t i = 0; i < n; i++) {
            if (v[i] < 0 || v[i] >= ds->vocab) {
                ct_error(CT_ERROR_INDEX, op, "token id %lld at position %lld is outside the vocabulary of %d",
                         (long long)v[i], (long long)i, ds->vocab);
                r = -1;
                break;
            }
            if (cap > 0 && (size_t)i < cap - 1)
                buf[i] = (char)ds->bytes[v[i]];
        }
        if (cap > 0)
            buf[(size_t)n < cap - 1 ? (size_t)n : cap - 1] = 0;
    }
    ct_scope_end();
    return r;
}

ct_status ct_char_dataset_batch(const ct_char_dataset *ds, ct_text_split split, int64_t batch, int64_t block,
                                uint64_t seed, uint64_t index, ct_tensor **x, ct_tensor **y) {
    static const char *op = "char_dataset.batch";
    if (!ds || !x || !y)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", !ds ? "dataset" : !x ? "x" : "y");
    *x = *y = NULL;
    int64_t start, n;
    if (!split_range(ds, split, &start, &n, op))
        return ct_last_status();
    if (ct_data_check_batch(op, split == CT_SPLIT_TRAIN ? "train" : "val", n, batch, block, index))
        return ct_last_status();
    ct_scope_begin();
    ct_tensor *xt = ct_empty(CT_SHAPE(batch, block), CT_I64, CT_CPU);
    ct_tensor *yt = xt ? ct_empty(CT_SHAPE(batch, block), CT_I64, CT_CPU) : NULL;
    ct_status st = yt ? CT_OK : ct_last_status();
    if (!st) {
        int64_t *xp = ct_tensor_data(xt), *yp = ct_tensor_data(yt);
        const uint64_t range = (uint64_t)(n - block); /* offsets in [0, n - block) */
        for (int64_t b = 0; b < batch; b++) {
            int64_t off = start + ct_data_window_offset(seed, index, b, range);
            memcpy(xp + b * block, ds->tokens + off, sizeof(int64_t) * (size_t)block);
            memcpy(yp + b * block, ds->tokens + off + 1, sizeof(int64_t) * (size_t)block);
        }
        *x = ct_keep(xt);
        *y = ct_keep(yt);
    }
    ct_scope_end();
    return st;
}
