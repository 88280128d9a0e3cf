/* Pickle protocol 2, restricted to what torch.save writes and torch.load accepts with
 * weights_only=True. See Note [Restricted unpickler] in src/util/unpickle.c. */
#ifndef CT_IO_PICKLE_H
#define CT_IO_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "ctorch.h"

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

/* The reader is ct_value_from_pickle (ctorch/io.h, src/util/unpickle.c); the loader
 * gives it hooks that resolve storage records and make tensors over them. */

/* Writer: ct_value_to_pickle (ctorch/io.h, src/util/pickle_value.c) writes the pickle;
 * ct_pickle_dump gives it the storage numbers. Storages are numbered in order of first
 * appearance; tensors sharing a storage (ct_tensor_shares_storage) share one record,
 * written by ct_save_pt. */
typedef struct ct_pickle_storage {
    ct_tensor *first;     /* the first tensor seen over it (a reference of the pickler's) */
    ct_tensor *host_copy; /* of a non-CPU storage: its bytes on the host (a reference), else NULL */
    const void *key;      /* the storage's first byte on its device (NULL when empty) */
    const void *data;     /* the bytes to write: key, or host_copy's for other devices */
    size_t nbytes;
    ct_dtype dtype;
    int64_t next;  /* the next storage in the same hash bucket, or -1 */
} ct_pickle_storage;

typedef struct ct_pickler {
    uint8_t *buf; /* the pickle (ct_value_to_pickle's) */
    size_t len;
    ct_pickle_storage *storages;
    int64_t nstorages, capstorages;
    int64_t *buckets; /* by the storage's first byte: the newest storage there, or -1 */
    int64_t nbuckets;
    const char *op;
} ct_pickler;

ct_status ct_pickle_dump(ct_pickler *p, const ct_value *v, const char *op);
void ct_pickler_free(ct_pickler *p);

#endif /* CT_IO_PICKLE_H */
