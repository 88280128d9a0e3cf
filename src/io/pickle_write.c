/* The storage table of ct_save_pt: the pickle itself is written by ct_value_to_pickle
 * (ctorch/io.h, src/util/pickle_value.c, Note [Pickle writer choices]), which asks
 * storage_key for each tensor's storage number.
 *
 * Storages are found through public accessors (Note [Storages as tensors] in pickle.h):
 * a tensor's storage begins storage_offset elements before its data, and two tensors
 * whose storages begin at the same byte are checked with ct_tensor_shares_storage, so
 * the lookup is a hash of that address, not a scan. */
#include <stdlib.h>
#include <string.h>

#include "ctorch/ext.h"
#include "pickle.h"

static uint64_t addr_hash(const void *p) {
    uint64_t h = (uint64_t)(uintptr_t)p;
    h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

/* Note [Saving tensors of other devices]
 * A CUDA tensor's storage is copied to the host whole when it is first met (one
 * record per storage, as for CPU tensors: views of one CUDA storage share the copy),
 * and the record is written from that copy with location "cpu". The lookup key stays
 * the device address, so that later tensors over the same device storage find it;
 * host_copy holds the bytes until the archive is written. */
static ct_tensor *host_copy_of_storage(const ct_tensor *t, size_t nbytes) {
    ct_scope_begin();
    size_t esz = ct_tensor_element_size(t);
    int64_t n = (int64_t)(nbytes / esz);
    ct_tensor *whole = ct_as_strided(t, (int64_t[]){n}, (int64_t[]){1}, 1, 0);
    ct_tensor *h = whole ? ct_to_device(whole, CT_CPU) : NULL;
    if (h)
        ct_retain(h);
    ct_scope_end();
    return h;
}

/* The storage record of t: an earlier one t shares, or a new one; -1 on error. */
static int64_t storage_key(void *ctx, ct_tensor *t) {
    ct_pickler *p = ctx;
    ct_dtype dtype = ct_tensor_dtype(t);
    size_t esz = ct_tensor_element_size(t);
    const char *data = ct_tensor_data(t);
    const void *base = data ? data - ct_tensor_storage_offset(t) * (int64_t)esz : NULL;
    uint64_t h = addr_hash(base);
    if (p->nbuckets) {
        for (int64_t i = p->buckets[h & (uint64_t)(p->nbuckets - 1)]; i >= 0; i = p->storages[i].next) {
            if (p->storages[i].key != base || !ct_tensor_shares_storage(p->storages[i].first, t))
                continue;
            if (p->storages[i].dtype != dtype) {
                ct_error(CT_ERROR_NOT_IMPLEMENTED, p->op,
                         "tensors of dtypes %s and %s share one storage; save a copy of one of them",
                         ct_dtype_name(p->storages[i].dtype), ct_dtype_name(dtype));
                return -1;
            }
            return i;
        }
    }
    if (p->nstorages == p->capstorages) {
        int64_t cap = p->capstorages ? p->capstorages * 2 : 16;
        ct_pickle_storage *n = ct_xrealloc(p->op, p->storages, (size_t)cap * sizeof *n);
        int64_t *b = n ? ct_xmalloc(p->op, (size_t)cap * 2 * sizeof *b) : NULL;
        if (!b) {
            if (n)
                p->storages = n;
            return -1;
        }
        p->storages = n;
        p->capstorages = cap;
        free(p->buckets);
        p->buckets = b;
        p->nbuckets = cap * 2; /* at most half full */
        for (int64_t i = 0; i < p->nbuckets; i++)
            b[i] = -1;
        for (int64_t i = 0; i < p->nstorages; i++) {
            uint64_t g = addr_hash(p->storages[i].key);
            p->storages[i].next = b[g & (uint64_t)(p->nbuckets - 1)];
            b[g & (uint64_t)(p->nbuckets - 1)] = i;
        }
    }
    size_t nbytes = ct_tensor_storage_nbytes(t);
    ct_tensor *host = NULL;
    if (ct_tensor_device(t).type != CT_DEVICE_CPU && nbytes > 0) { /* Note [Saving tensors of other devices] */
        host = host_copy_of_storage(t, nbytes);
        if (!host)
            return -1;
    }
    int64_t key = p->nstorages++;
    p->storages[key] = (ct_pickle_storage){.first = ct_retain(t), .host_copy = host, .key = base,
                                           .data = host ? ct_tensor_data(host) : base, .nbytes = nbytes,
                                           .dtype = dtype,
                                           .next = p->buckets[h & (uint64_t)(p->nbuckets - 1)]};
    p->buckets[h & (uint64_t)(p->nbuckets - 1)] = key;
    return key;
}

ct_status ct_pickle_dump(ct_pickler *p, const ct_value *v, const char *op) {
    memset(p, 0, sizeof *p);
    p->op = op;
    p->buf = ct_value_to_pickle(v, storage_key, p, &p->len);
    return p->buf ? CT_OK : ct_last_status();
}

void ct_pickler_free(ct_pickler *p) {
    for (int64_t i = 0; i < p->nstorages; i++) {
        ct_release(p->storages[i].first);
        ct_release(p->storages[i].host_copy);
    }
    free(p->buf);
    free(p->storages);
    free(p->buckets);
    memset(p, 0, sizeof *p);
}
