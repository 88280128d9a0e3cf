/* Internal allocator interface: every storage's bytes come from here. */
#ifndef CT_ALLOC_H
#define CT_ALLOC_H

#include <stddef.h>

#include "ctorch/core.h"

/* 64-byte aligned memory for a storage; NULL with an out-of-memory error set. */
void *ct_alloc(ct_device device, size_t nbytes);
void ct_free(ct_device device, void *ptr);

#endif /* CT_ALLOC_H */
