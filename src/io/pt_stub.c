/* Placeholder for the torch.save reader until src/io/pt.c exists; that change
 * deletes this file. It only lets the library link: every call is refused. */
#include "error.h"
#include "io/pt.h"

ct_value *ct_pt_load_buffer(const uint8_t *buf, size_t len, const char *name) {
    (void)buf;
    (void)len;
    ct_error(CT_ERROR_NOT_IMPLEMENTED, "load", "%s: torch.save files cannot be read by this build yet",
             name ? name : "buffer");
    return NULL;
}
