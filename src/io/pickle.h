/* Pickle protocol 2, restricted to what torch.save writes and torch.load accepts with
 * weights_only=True. See Note [Restricted unpickler] in unpickle.c. */
#ifndef CT_IO_PICKLE_H
#define CT_IO_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "ctorch.h"

/* Limits on hostile pickles (documented in docs/serialization.md); the nesting limit
 * is CT_VALUE_MAX_DEPTH. */
#define CT_PICKLE_MAX_STACK (1 << 20) /* stack entries and marks */

/* Note [Storages as tensors]
 * io sits over the public API, where a storage is not a type of its own: the loader
 * holds each storage record as a 1-D CPU tensor over all of its bytes (its base), and
 * a tensor of the file is ct_detach(ct_as_strided(base, size, stride, offset)): a
 * tensor of its own, not a view, over the base's storage at the file's offset, as
 * torch.load makes it. Tensors over one record therefore share one storage
 * (ct_tensor_shares_storage), and the writer finds that sharing again. A typed
 * storage's base has its dtype; an untyped one (torch.UntypedStorage, for dtypes
 * PyTorch 1.x lacks) is read as uint8, and a tensor of another dtype over it views
 * it through a base of that dtype made with ct_from_blob over the same bytes, one
 * per record and dtype (tensors of two dtypes over one untyped record share its
 * memory, but not one storage). */

/* Resolves a persistent id ('storage', type, key, location, numel) when the pickle
 * names it, and hands out bases when a tensor needs one. dtype is the storage's
 * element type, or CT_DTYPE_UNDEFINED for torch.UntypedStorage (numel then counts
 * bytes). storage returns a handle >= 0, or -1 with an error set; pos is the opcode's
 * offset in data.pkl, for messages. base returns the record's base of dtype (borrowed:
 * the callee keeps it alive until the unpickler is done), or NULL with an error set. */
typedef struct ct_unpickle_io {
    void *ctx;
    int64_t (*storage)(void *ctx, size_t pos, const char *key, ct_dtype dtype, int64_t numel, const char *location);
    ct_tensor *(*base)(void *ctx, int64_t handle, ct_dtype dtype);
} ct_unpickle_io;

/* Returns the unpickled object as a value tree, or NULL with a CT_ERROR_FORMAT error
 * "op: data.pkl offset N: ...". Tensors are CPU tensors over the bases io returns. */
ct_value *ct_unpickle(const uint8_t *buf, size_t len, const ct_unpickle_io *io, const char *op);

/* Writer: protocol 2, as torch.save writes it. Storages are numbered in order of first
 * appearance; tensors sharing a storage (ct_tensor_shares_storage) share one record. */
typedef struct ct_pickle_storage {
    ct_tensor *first;   /* the first tensor seen over it (a reference of the pickler's) */
    const void *data;   /* the storage's first byte (NULL when empty) */
    size_t nbytes;
    ct_dtype dtype;
    bool untyped; /* written as torch.UntypedStorage (dtypes PyTorch 1.x lacks) */
    int64_t next;  /* the next storage in the same hash bucket, or -1 */
} ct_pickle_storage;

typedef struct ct_pickler {
    uint8_t *buf;
    size_t len, cap;
    bool oom;
    ct_pickle_storage *storages;
    int64_t nstorages, capstorages;
    int64_t *buckets; /* by the storage's first byte: the newest storage there, or -1 */
    int64_t nbuckets;
    const char *op;
} ct_pickler;

ct_status ct_pickle_dump(ct_pickler *p, const ct_value *v, const char *op);
void ct_pickler_free(ct_pickler *p);

#endif /* CT_IO_PICKLE_H */
