/* A small zip reader and writer for torch.save archives. See Note [Zip reader] in zip.c. */
#ifndef CT_IO_ZIP_H
#define CT_IO_ZIP_H

#include <stdint.h>
#include <stdio.h>

#include "ctorch/core.h"

typedef struct ct_zip_entry {
    char *name;           /* NUL-terminated; names with a NUL byte are refused */
    uint64_t data_offset; /* first payload byte in the archive */
    uint64_t comp_size;
    uint64_t size;        /* uncompressed */
    uint64_t header_offset;
    uint32_t crc32;
    uint16_t method;      /* 0 stored, 8 deflate */
} ct_zip_entry;

typedef struct ct_zip {
    const uint8_t *buf; /* borrowed: the whole archive */
    uint64_t len;
    ct_zip_entry *entries;   /* central directory order */
    ct_zip_entry **by_name;  /* sorted by name */
    int64_t count;
} ct_zip;

/* Parses and validates the central directory and every local header. On error sets a
 * CT_ERROR_FORMAT naming op and returns non-zero; z is then empty. */
ct_status ct_zip_open(ct_zip *z, const uint8_t *buf, size_t len, const char *op);
void ct_zip_close(ct_zip *z);
/* Entry named name, or NULL. */
const ct_zip_entry *ct_zip_find(const ct_zip *z, const char *name);
/* Copies (or inflates) the entry into out, which holds exactly e->size bytes, and
 * checks its CRC-32. */
ct_status ct_zip_extract(const ct_zip *z, const ct_zip_entry *e, void *out, const char *op);

/* Writer: entries are written one after another, each payload 64-byte aligned,
 * STORED, with a data descriptor; ZIP64 records appear only when a size, an offset or
 * the entry count needs them (or always, with force_zip64, for tests). */
typedef struct ct_zip_writer {
    FILE *f;
    uint64_t offset;
    struct ct_zip_wentry *entries;
    int64_t count, cap;
    bool force_zip64;
    bool failed;
    const char *op;
} ct_zip_writer;

void ct_zip_writer_init(ct_zip_writer *w, FILE *f, const char *op);
/* Appends one record (STORED). */
ct_status ct_zip_write_entry(ct_zip_writer *w, const char *name, const void *data, uint64_t size);
/* Writes the central directory and end records, frees the writer's state. */
ct_status ct_zip_writer_finish(ct_zip_writer *w);
void ct_zip_writer_discard(ct_zip_writer *w);

#define CT_ZIP_ALIGNMENT 64

#endif /* CT_IO_ZIP_H */
