/* A small strict JSON reader and writer: the safetensors header, the structured log,
 * the profiler's trace. */
#ifndef CT_IO_JSON_H
#define CT_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "util/value.h"

/* Nesting deeper than this is refused (serde_json's default limit). */
#define CT_JSON_MAX_DEPTH 128

/* ct_utf8_invalid_at, ct_value_from_json and ct_value_to_json are public (ctorch/io.h);
 * ct_json_parse is ct_value_from_json with the caller's op in its messages. */

/* Parses text[0..len) as exactly one JSON value, surrounded by optional whitespace.
 * Objects become dicts (a repeated key is an error), arrays lists, integers ints
 * (outside int64: error), other numbers floats, true/false bools, null None. On
 * failure: NULL and a CT_ERROR_FORMAT error "op: invalid JSON in <what>: <reason> at
 * byte N". */
ct_value *ct_json_parse(const char *text, size_t len, const char *op, const char *what);

/* Growable output buffer; the first failed allocation sets failed (and an error) and
 * later appends do nothing, so a writer checks once at the end. */
typedef struct ct_json_buf {
    char *data;
    size_t len, cap;
    bool failed;
} ct_json_buf;

void ct_json_buf_free(ct_json_buf *b);
void ct_json_put(ct_json_buf *b, const char *s, size_t n);
void ct_json_puts(ct_json_buf *b, const char *s);
void ct_json_put_int(ct_json_buf *b, int64_t v);
/* A JSON string literal with the escapes JSON requires (s must be valid UTF-8). */
void ct_json_put_string(ct_json_buf *b, const char *s, size_t n);

#endif /* CT_IO_JSON_H */
