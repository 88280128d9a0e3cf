/* MD5 (RFC 1321), for the structured log's has_payload field: tlparse checks payloads
 * against it. Not for anything that needs a secure hash. */
#ifndef CT_DISPATCH_MD5_H
#define CT_DISPATCH_MD5_H

#include <stddef.h>
#include <stdint.h>

typedef struct ct_md5_ctx {
    uint32_t h[4];
    uint64_t nbytes;
    uint8_t buf[64];
    size_t nbuf;
} ct_md5_ctx;

void ct_md5_init(ct_md5_ctx *c);
void ct_md5_update(ct_md5_ctx *c, const void *data, size_t len);
void ct_md5_final(ct_md5_ctx *c, uint8_t digest[16]);
/* The 32 lowercase hex digits of data's digest, NUL-terminated. */
void ct_md5_hex(const void *data, size_t len, char hex[33]);

#endif /* CT_DISPATCH_MD5_H */
