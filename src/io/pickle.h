/* Pickle protocol 2, restricted to what torch.save writes and torch.load accepts with
 * weights_only=True. See Note [Restricted unpickler] in unpickle.c. */
#ifndef CT_IO_PICKLE_H
#define CT_IO_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "ctorch/io.h"
#include "tensor_impl.h"

/* Limits on hostile pickles (documented in docs/serialization.md); the nesting limit
 * is CT_VALUE_MAX_DEPTH. */
#define CT_PICKLE_MAX_STACK (1 << 20) /* stack entries and marks */

/* Resolves a persistent id ('storage', type, key, location, numel). dtype is the
 * storage's element type, or CT_DTYPE_UNDEFINED for torch.UntypedStorage (numel then
 * counts bytes). Returns a borrowed storage (the callee keeps it alive until the
 * unpickler is done), or NULL with an error set; pos is the opcode's offset in
 * data.pkl, for messages. */
typedef struct ct_unpickle_io {
    void *ctx;
    ct_storage *(*storage)(void *ctx, size_t pos, const char *key, ct_dtype dtype, int64_t numel,
                           const char *location);
} ct_unpickle_io;

/* Returns the unpickled object as a value tree, or NULL with a CT_ERROR_FORMAT error
 * "op: data.pkl offset N: ...". Tensors are CPU tensors over the storages io returns. */
ct_value *ct_unpickle(const uint8_t *buf, size_t len, const ct_unpickle_io *io, const char *op);

/* Writer: protocol 2, as torch.save writes it. Storages are numbered in order of first
 * appearance; tensors over one ct storage share one record. */
typedef struct ct_pickle_storage {
    const ct_storage *storage;
    ct_dtype dtype;
    bool untyped; /* written as torch.UntypedStorage (dtypes PyTorch 1.x lacks) */
} ct_pickle_storage;

typedef struct ct_pickler {
    uint8_t *buf;
    size_t len, cap;
    bool oom;
    ct_pickle_storage *storages;
    int64_t nstorages, capstorages;
    const char *op;
} ct_pickler;

ct_status ct_pickle_dump(ct_pickler *p, const ct_value *v, const char *op);
void ct_pickler_free(ct_pickler *p);

#endif /* CT_IO_PICKLE_H */
