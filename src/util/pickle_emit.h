/* A small pickle writer (protocol 2) into a growing memory buffer.
 *
 * Each function appends one value or opcode; building a container follows pickle's own
 * stack discipline:
 *   dict:  ct_pickle_empty_dict, ct_pickle_mark, (key, value)*, ct_pickle_setitems
 *   list:  ct_pickle_empty_list, ct_pickle_mark, value*, ct_pickle_appends
 *   tuple: ct_pickle_mark, value*, ct_pickle_tuple   (or ct_pickle_tupleN for 0..3)
 * Finish with ct_pickle_stop. Errors (out of memory, misuse) are sticky: later calls do
 * nothing and ct_pickle_finish reports the first one.
 *
 * Only protocol-2 opcodes are emitted, so Python's pickle.load reads the output. The
 * plain-value subset (dicts, lists, tuples, str, int up to 64 bits, float, bool, None,
 * memo put/get) is also what PyTorch's MemoryViz.js unpickler understands; GLOBAL,
 * REDUCE, BUILD and BINPERSID are there for writers of torch.save files and are not. */
#ifndef CT_PICKLE_EMIT_H
#define CT_PICKLE_EMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctorch/core.h"

typedef struct ct_pickle {
    unsigned char *buf;
    size_t len, cap;
    uint32_t memo_next; /* next memo index handed out by ct_pickle_memoize */
    int depth;          /* open MARKs, for misuse checks */
    ct_status status;   /* first error, CT_OK otherwise */
} ct_pickle;

void ct_pickle_init(ct_pickle *p);
void ct_pickle_destroy(ct_pickle *p);

void ct_pickle_proto(ct_pickle *p); /* PROTO 2; call first */
void ct_pickle_stop(ct_pickle *p);

void ct_pickle_none(ct_pickle *p);
void ct_pickle_bool(ct_pickle *p, bool v);
void ct_pickle_int(ct_pickle *p, int64_t v);
void ct_pickle_uint(ct_pickle *p, uint64_t v);
/* An integer of any size: n bytes, little-endian two's complement (LONG1/LONG4). */
void ct_pickle_long_le(ct_pickle *p, const unsigned char *bytes, size_t n);
void ct_pickle_float(ct_pickle *p, double v);
/* UTF-8 text (BINUNICODE); len (size_t)-1 means NUL-terminated. */
void ct_pickle_unicode(ct_pickle *p, const char *s, size_t len);
/* Raw bytes as BINSTRING (decoded by Python 3 as str with encoding='latin1' or bytes
 * with encoding='bytes', which is how torch.load reads protocol-2 keys). */
void ct_pickle_binstring(ct_pickle *p, const void *data, size_t len);

void ct_pickle_mark(ct_pickle *p);
void ct_pickle_empty_dict(ct_pickle *p);
void ct_pickle_empty_list(ct_pickle *p);
void ct_pickle_empty_tuple(ct_pickle *p);
void ct_pickle_setitem(ct_pickle *p);  /* dict key value -> dict */
void ct_pickle_setitems(ct_pickle *p); /* dict MARK k v ... -> dict */
void ct_pickle_append(ct_pickle *p);   /* list v -> list */
void ct_pickle_appends(ct_pickle *p);  /* list MARK v ... -> list */
void ct_pickle_tuple(ct_pickle *p);    /* MARK v ... -> tuple */
void ct_pickle_tuple_n(ct_pickle *p, int n); /* the top n (1..3) values -> tuple */

/* Memo: stores the top of the stack, returning its index; get pushes it again. */
uint32_t ct_pickle_memoize(ct_pickle *p);
void ct_pickle_get(ct_pickle *p, uint32_t index);

/* For torch.save-style pickles (not plain data). */
void ct_pickle_global(ct_pickle *p, const char *module, const char *name);
void ct_pickle_reduce(ct_pickle *p);
void ct_pickle_build(ct_pickle *p);
void ct_pickle_binpersid(ct_pickle *p);

/* Appends raw bytes (an opcode the API does not cover). */
void ct_pickle_raw(ct_pickle *p, const void *data, size_t n);

/* CT_OK, or the first error with its message already set (op names the caller). */
ct_status ct_pickle_finish(ct_pickle *p, const char *op);

#endif /* CT_PICKLE_EMIT_H */
