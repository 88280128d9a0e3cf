/* The torch.save reader, as load.c calls it. */
#ifndef CT_IO_PT_H
#define CT_IO_PT_H

#include <stddef.h>
#include <stdint.h>

#include "ctorch/io.h"

/* Reads a torch.save file held in memory (zip, or the legacy pickle stream; load.c
 * has already looked at the magic bytes). name is the file name for messages, or NULL
 * for a caller's buffer. The result must not point into buf: the caller may unmap or
 * free it as soon as this returns. NULL with ct_last_error set on failure. */
ct_value *ct_pt_load_buffer(const uint8_t *buf, size_t len, const char *name);

#endif /* CT_IO_PT_H */
