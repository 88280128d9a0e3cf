/* File mappings shared by the loaders. */
#ifndef CT_IO_LOAD_H
#define CT_IO_LOAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A whole file in memory: mmap'ed read-only (Note [Mapping files] in load.c; a reader
 * makes the parts tensors view writable, copy-on-write, with ct_mapping_writable) or,
 * where mmap is impossible (pipes, special files), read into a heap buffer once its
 * first bytes passed a sniff. Reference-counted so that tensors viewing it keep it
 * alive after the loader returns. */
typedef struct ct_mapping {
    atomic_int refs;
    uint8_t *data; /* NULL when len == 0 */
    size_t len;
    bool mmapped;
} ct_mapping;

/* Decides from the first bytes of a stream (up to 4 KiB, fewer only at its end)
 * whether to read the rest; false with the error set. */
typedef bool (*ct_sniff_fn)(const uint8_t *b, size_t n, const char *name);
/* Any format ct_load reads; a plausible safetensors header length. */
bool ct_sniff_checkpoint(const uint8_t *b, size_t n, const char *name);
bool ct_sniff_safetensors(const uint8_t *b, size_t n, const char *name);

/* NULL with a CT_ERROR_IO error naming op and path on failure (or sniff's error). */
ct_mapping *ct_mapping_open(const char *op, const char *path, ct_sniff_fn sniff);
/* Makes [p, p + n) of a mapping writable (copy-on-write: the file never changes); false
 * when the system refuses (then view nothing there: copy). */
bool ct_mapping_writable(ct_mapping *m, const uint8_t *p, size_t n);
void ct_mapping_retain(ct_mapping *m);
void ct_mapping_release(ct_mapping *m);

#endif /* CT_IO_LOAD_H */
