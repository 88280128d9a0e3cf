/* PyTorch .pt (torch.save zip) loading, for ct_load's format detection. */
#ifndef CT_IO_PT_H
#define CT_IO_PT_H

#include <stddef.h>
#include <stdint.h>

#include "ctorch/io.h"

/* Loads a torch.save archive from memory (copied as needed; buf may be freed
 * afterwards). name (may be NULL) is the file's name, used in messages. NULL on error. */
ct_value *ct_pt_load_buffer(const uint8_t *buf, size_t len, const char *name);

/* True when buf starts like a torch.save zip archive ("PK\3\4"). */
bool ct_pt_sniff(const uint8_t *buf, size_t len);

/* ct_save_pt, optionally with ZIP64 records on every entry (tests of the ZIP64 reader). */
ct_status ct_pt_save_impl(const char *path, const ct_value *obj, bool force_zip64);

#endif /* CT_IO_PT_H */
