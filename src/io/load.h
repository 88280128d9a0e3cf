/* File mappings shared by the loaders. */
#ifndef CT_IO_LOAD_H
#define CT_IO_LOAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A whole file in memory: mmap'ed (MAP_PRIVATE, so writes to tensors over it are
 * copy-on-write and never reach the file) or, where mmap is impossible (pipes,
 * special files), read into a heap buffer. Reference-counted so that tensors viewing
 * it keep it alive after the loader returns. */
typedef struct ct_mapping {
    atomic_int refs;
    uint8_t *data; /* NULL when len == 0 */
    size_t len;
    bool mmapped;
} ct_mapping;

/* NULL with a CT_ERROR_IO error naming op and path on failure. */
ct_mapping *ct_mapping_open(const char *op, const char *path);
void ct_mapping_retain(ct_mapping *m);
void ct_mapping_release(ct_mapping *m);

#endif /* CT_IO_LOAD_H */
