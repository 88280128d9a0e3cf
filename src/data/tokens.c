/* Token datasets for language models: llm.c's .bin shards (GPT-2 token ids) or any
 * file as bytes, with nanoGPT's random windows; and llm.c's GPT-2 tokenizer file for
 * turning sampled ids back into text. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "data/data_internal.h"

/* Note [llm.c token shards]
 * llm.c's data scripts (write_datafile in dev/data) write a header of 256
 * little-endian int32 (magic 20240520, version 1, number of tokens, the rest zero)
 * followed by the tokens as uint16. Version 1 holds GPT-2 ids (vocabulary 50257);
 * later versions hold other tokenizers' ids in other widths and are refused here with
 * their version named. The size must be exactly 1024 + 2 * ntok bytes, as llm.c's
 * loader requires, and every id must be below 50257: a bad id is reported at load with
 * its position instead of faulting later in an embedding lookup on the GPU. */
#define SHARD_MAGIC 20240520
#define SHARD_HEADER_BYTES 1024
#define GPT2_VOCAB 50257
#define TOKENIZER_MAGIC 20240328

struct ct_token_dataset {
    ct_token_format format;
    int64_t vocab;
    int64_t n, ntrain;
    uint16_t *tokens; /* train = [0, ntrain), val = [ntrain, n) */
};

char *ct_data_read_file(const char *op, const char *path, size_t *len) {
    *len = 0;
    if (!path) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "path is NULL");
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        ct_error(CT_ERROR_IO, op, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = ct_xmalloc(op, cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) {
            if (ferror(f)) {
                ct_error(CT_ERROR_IO, op, "error reading %s", path);
                free(buf);
                buf = NULL;
            }
            break;
        }
        char *nb = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
        if (!nb) {
            ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory reading %s", path);
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    if (buf && n == 0) {
        ct_error(CT_ERROR_VALUE, op, "%s is empty", path);
        free(buf);
        buf = NULL;
    }
    *len = buf ? n : 0;
    return buf;
}

ct_status ct_data_check_batch(const char *op, const char *split_name, int64_t n, int64_t batch, int64_t block,
                              uint64_t index) {
    if (batch < 1 || block < 1)
        return ct_error(CT_ERROR_VALUE, op, "batch and block must be >= 1, got %lld and %lld", (long long)batch,
                        (long long)block);
    if (n <= block)
        return ct_error(CT_ERROR_VALUE, op, "the %s split has %lld tokens; a block of %lld needs at least %lld",
                        split_name, (long long)n, (long long)block, (long long)block + 1);
    if (batch > ((int64_t)1 << 24) || block > INT64_MAX / batch / 8)
        return ct_error(CT_ERROR_VALUE, op, "batch of %lld windows of %lld tokens is too large", (long long)batch,
                        (long long)block);
    if (index >= ((uint64_t)1 << 40))
        return ct_error(CT_ERROR_VALUE, op, "batch index must be < 2^40");
    return CT_OK;
}

static int32_t le32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* Parses an llm.c shard held in buf (len bytes) into ds. */
static ct_status parse_shard(const char *op, const char *path, const unsigned char *buf, size_t len,
                             ct_token_dataset *ds) {
    if (len < SHARD_HEADER_BYTES)
        return ct_error(CT_ERROR_FORMAT, op, "%s: a token shard needs a %d-byte header, the file has %zu bytes", path,
                        SHARD_HEADER_BYTES, len);
    int32_t version = le32(buf + 4), ntok = le32(buf + 8);
    if (version != 1)
        return ct_error(CT_ERROR_FORMAT, op, "%s: token shard version %d is not supported (version 1 holds GPT-2 "
                        "token ids as uint16)", path, (int)version);
    if (ntok < 0 || (uint64_t)len != SHARD_HEADER_BYTES + 2 * (uint64_t)ntok)
        return ct_error(CT_ERROR_FORMAT, op, "%s: the header says %d tokens (%llu bytes with the header), the file "
                        "has %zu bytes", path, (int)ntok, (unsigned long long)(SHARD_HEADER_BYTES + 2 * (int64_t)ntok),
                        len);
    if (ntok == 0)
        return ct_error(CT_ERROR_VALUE, op, "%s holds no tokens", path);
    ds->tokens = ct_xmalloc(op, (size_t)ntok * sizeof *ds->tokens);
    if (!ds->tokens)
        return ct_last_status();
    const unsigned char *p = buf + SHARD_HEADER_BYTES;
    for (int64_t i = 0; i < ntok; i++) {
        uint16_t t = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
        if (t >= GPT2_VOCAB)
            return ct_error(CT_ERROR_FORMAT, op, "%s: token %u at position %lld is outside GPT-2's vocabulary of %d",
                            path, (unsigned)t, (long long)i, GPT2_VOCAB);
        ds->tokens[i] = t;
    }
    ds->n = ntok;
    ds->vocab = GPT2_VOCAB;
    ds->format = CT_TOKENS_SHARD;
    return CT_OK;
}

ct_token_dataset *ct_token_dataset_open(const char *path, double val_fraction) {
    static const char *op = "token_dataset";
    if (!(val_fraction >= 0 && val_fraction < 1)) {
        ct_error(CT_ERROR_VALUE, op, "val_fraction must be in [0, 1), got %g", val_fraction);
        return NULL;
    }
    size_t len = 0;
    unsigned char *buf = (unsigned char *)ct_data_read_file(op, path, &len);
    if (!buf)
        return NULL;
    ct_token_dataset *ds = ct_xcalloc(op, 1, sizeof *ds);
    ct_status st = ds ? CT_OK : ct_last_status();
    if (!st && len >= 4 && le32(buf) == SHARD_MAGIC) {
        st = parse_shard(op, path, buf, len, ds);
    } else if (!st) { /* any other file: its bytes are the tokens */
        ds->tokens = len <= (size_t)INT64_MAX / 2 ? ct_xmalloc(op, len * sizeof *ds->tokens) : NULL;
        if (!ds->tokens) {
            st = ct_last_status() ? ct_last_status() : ct_error(CT_ERROR_VALUE, op, "%s is too large", path);
        } else {
            for (size_t i = 0; i < len; i++)
                ds->tokens[i] = buf[i];
            ds->n = (int64_t)len;
            ds->vocab = 256;
            ds->format = CT_TOKENS_BYTES;
        }
    }
    free(buf);
    if (st) {
        ct_token_dataset_free(ds);
        return NULL;
    }
    ds->ntrain = (int64_t)((double)ds->n * (1.0 - val_fraction));
    return ds;
}

void ct_token_dataset_free(ct_token_dataset *ds) {
    if (!ds)
        return;
    free(ds->tokens);
    free(ds);
}

ct_token_format ct_token_dataset_format(const ct_token_dataset *ds) {
    return ds ? ds->format : CT_TOKENS_BYTES;
}

int64_t ct_token_dataset_vocab_size(const ct_token_dataset *ds) {
    if (!ds) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "token_dataset.vocab_size", "dataset is NULL");
        return -1;
    }
    return ds->vocab;
}

static bool token_split(const ct_token_dataset *ds, ct_text_split split, int64_t *start, int64_t *n, const char *op) {
    if (!ds) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "dataset is NULL");
        return false;
    }
    return ct_data_split_range(op, split, ds->n, ds->ntrain, start, n);
}

int64_t ct_token_dataset_len(const ct_token_dataset *ds, ct_text_split split) {
    int64_t s, n;
    return token_split(ds, split, &s, &n, "token_dataset.len") ? n : -1;
}

ct_status ct_token_dataset_batch(const ct_token_dataset *ds, ct_text_split split, int64_t batch, int64_t block,
                                 uint64_t seed, uint64_t index, ct_tensor **x, ct_tensor **y) {
    static const char *op = "token_dataset.batch";
    if (!x || !y)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", !x ? "x" : "y");
    *x = *y = NULL;
    int64_t start, n;
    if (!token_split(ds, split, &start, &n, op) ||
        ct_data_check_batch(op, split == CT_SPLIT_TRAIN ? "train" : "val", n, batch, block, index))
        return ct_last_status();
    ct_scope_begin();
    ct_tensor *xt = ct_empty(CT_SHAPE(batch, block), CT_I64, CT_CPU);
    ct_tensor *yt = xt ? ct_empty(CT_SHAPE(batch, block), CT_I64, CT_CPU) : NULL;
    ct_status st = yt ? CT_OK : ct_last_status();
    if (!st) {
        int64_t *xp = ct_tensor_data(xt), *yp = ct_tensor_data(yt);
        for (int64_t b = 0; b < batch; b++) {
            const uint16_t *w = ds->tokens + start + ct_data_window_offset(seed, index, b, (uint64_t)(n - block));
            for (int64_t i = 0; i < block; i++) {
                xp[b * block + i] = w[i];
                yp[b * block + i] = w[i + 1];
            }
        }
        *x = ct_keep(xt);
        *y = ct_keep(yt);
    }
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------ tokenizer */

/* Note [llm.c tokenizer file]
 * gpt2_tokenizer.bin, written by llm.c's train_gpt2.py: a header of 256 int32 (magic
 * 20240328, version 1 or 2, vocabulary size, and in version 2 the end-of-text id),
 * then for each token one length byte and that many bytes of its text. */
struct ct_tokenizer {
    int64_t vocab, eot;
    char **text;
    unsigned char *len;
};

void ct_tokenizer_free(ct_tokenizer *tk) {
    if (!tk)
        return;
    for (int64_t i = 0; tk->text && i < tk->vocab; i++)
        free(tk->text[i]);
    free(tk->text);
    free(tk->len);
    free(tk);
}

ct_tokenizer *ct_tokenizer_load(const char *path) {
    static const char *op = "tokenizer";
    size_t len = 0;
    unsigned char *buf = (unsigned char *)ct_data_read_file(op, path, &len);
    if (!buf)
        return NULL;
    ct_tokenizer *tk = NULL;
    int32_t version = len >= 1024 ? le32(buf + 4) : 0, vocab = len >= 1024 ? le32(buf + 8) : 0;
    if (len < 1024 || le32(buf) != TOKENIZER_MAGIC) {
        ct_error(CT_ERROR_FORMAT, op, "%s is not a tokenizer file (magic %d and a 1024-byte header expected)", path,
                 TOKENIZER_MAGIC);
    } else if (version != 1 && version != 2) {
        ct_error(CT_ERROR_FORMAT, op, "%s: tokenizer version %d is not supported (1 or 2)", path, (int)version);
    } else if (vocab < 1 || vocab > (1 << 24)) {
        ct_error(CT_ERROR_FORMAT, op, "%s: vocabulary size %d out of range", path, (int)vocab);
    } else if ((tk = ct_xcalloc(op, 1, sizeof *tk)) != NULL) {
        tk->eot = version == 2 ? le32(buf + 12) : -1;
        tk->text = ct_xcalloc(op, (size_t)vocab, sizeof *tk->text);
        tk->len = tk->text ? ct_xcalloc(op, (size_t)vocab, 1) : NULL;
        size_t pos = 1024;
        bool ok = tk->len != NULL;
        if (ok)
            tk->vocab = vocab;
        for (int64_t i = 0; ok && i < vocab; i++) {
            if (pos >= len || buf[pos] == 0 || len - pos - 1 < buf[pos]) {
                ct_error(CT_ERROR_FORMAT, op, "%s: token %lld runs past the end of the file or is empty", path,
                         (long long)i);
                ok = false;
                break;
            }
            tk->len[i] = buf[pos];
            tk->text[i] = ct_xmalloc(op, (size_t)buf[pos] + 1);
            ok = tk->text[i] != NULL;
            if (ok) {
                memcpy(tk->text[i], buf + pos + 1, buf[pos]);
                tk->text[i][buf[pos]] = 0;
            }
            pos += 1 + (size_t)buf[pos];
        }
        if (!ok) {
            ct_tokenizer_free(tk);
            tk = NULL;
        }
    }
    free(buf);
    return tk;
}

int64_t ct_tokenizer_vocab_size(const ct_tokenizer *tk) {
    return tk ? tk->vocab : -1;
}

int64_t ct_tokenizer_eot(const ct_tokenizer *tk) {
    return tk ? tk->eot : -1;
}

const char *ct_tokenizer_decode(const ct_tokenizer *tk, int64_t id, size_t *len) {
    if (!tk || id < 0 || id >= tk->vocab) {
        ct_error(tk ? CT_ERROR_INDEX : CT_ERROR_NULL_ARGUMENT, "tokenizer.decode",
                 tk ? "token id %lld is outside the vocabulary of %lld" : "tokenizer is NULL", (long long)id,
                 (long long)(tk ? tk->vocab : 0));
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = tk->len[id];
    return tk->text[id];
}
