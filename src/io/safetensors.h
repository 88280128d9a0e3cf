/* safetensors reading and writing (format facts: docs/serialization.md). */
#ifndef CT_IO_SAFETENSORS_H
#define CT_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "io/load.h"
#include "ctorch/io.h"

/* Largest header the reference reader accepts (MAX_HEADER_SIZE). */
#define CT_SAFETENSORS_MAX_HEADER 100000000u

/* Validates and loads a safetensors file held in buf[0..len). With map (whose bytes
 * are buf), tensors whose data is aligned for their dtype view the mapping and keep it
 * alive; without, every tensor is copied and buf may go away afterwards. name is the
 * file name used in messages (NULL: none). */
ct_value *ct_safetensors_load_buffer(const uint8_t *buf, size_t len, ct_mapping *map, const char *name);

/* What a load returns: the tensors and the "__metadata__" entry (ct_load), the
 * tensors alone (ct_load_state_dict_file) or the metadata alone, a dict of string ->
 * string, empty when the file has none (ct_load_safetensors_metadata: no tensor is
 * made, and dtypes ctorch lacks are no error). The file is validated the same way. */
typedef enum ct_st_parts { CT_ST_ALL, CT_ST_TENSORS, CT_ST_METADATA } ct_st_parts;
ct_value *ct_safetensors_load_parts(const uint8_t *buf, size_t len, ct_mapping *map, const char *name,
                                    ct_st_parts parts);

/* True when the CT_SAFETENSORS_COPY environment variable asks loads from files to
 * copy tensors instead of viewing the mapping. */
bool ct_safetensors_copy_requested(void);

#endif /* CT_IO_SAFETENSORS_H */
