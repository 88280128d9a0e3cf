/* Plain-data unpickler: dicts, lists, tuples, strings, numbers, bools and None, nothing
 * that constructs objects. Used by `ctorch memviz` to read memory snapshots (ctorch's own
 * and those of torch.cuda.memory._dump_snapshot); see Note [Plain unpickler]. */
#ifndef CT_PICKLE_READ_H
#define CT_PICKLE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctorch/core.h"

enum { CT_PV_NONE, CT_PV_BOOL, CT_PV_INT, CT_PV_FLOAT, CT_PV_STR, CT_PV_LIST, CT_PV_DICT };

/* Tuples read as lists. Integers beyond 64 bits read as (inexact) floats. */
typedef struct ct_pvalue {
    int type;
    int64_t i; /* CT_PV_INT, CT_PV_BOOL */
    double f;  /* CT_PV_FLOAT */
    char *s;   /* CT_PV_STR: NUL-terminated, slen bytes (may hold NULs) */
    size_t slen;
    struct ct_pvalue **items; /* CT_PV_LIST: items; CT_PV_DICT: key, value, key, value, ... */
    size_t n, cap;
    struct ct_pvalue *next_alloc; /* owned by the document */
} ct_pvalue;

/* Owns every value it parsed or created; the same value may appear twice (memo). */
typedef struct ct_pdoc {
    ct_pvalue *root;
    ct_pvalue *all;
} ct_pdoc;

/* Parses a protocol 2..5 pickle of plain data. On failure: CT_ERROR_FORMAT (or
 * CT_ERROR_OUT_OF_MEMORY) with an error naming op and the offending offset; doc is empty. */
ct_status ct_pickle_read_plain(const void *data, size_t n, ct_pdoc *doc, const char *op);
void ct_pdoc_free(ct_pdoc *doc);
/* A new value owned by doc (NULL when out of memory); for callers reshaping the tree. */
ct_pvalue *ct_pdoc_new(ct_pdoc *doc, int type);
/* Appends item to a list, or a key or value to a dict; false when out of memory. */
bool ct_pvalue_push(ct_pvalue *container, ct_pvalue *item);

/* JSON output through a sink (return false to stop writing). Strings escape '<', '>' and
 * '&', so the text may be embedded in an HTML <script>. Nesting deeper than 64 levels
 * (which also catches a container holding itself) is an error; so is a dict key that is
 * not a string or an integer. */
typedef bool (*ct_json_sink)(void *ctx, const char *s, size_t n);
ct_status ct_pvalue_write_json(const ct_pvalue *v, ct_json_sink sink, void *ctx, const char *op);
void ct_json_write_string(ct_json_sink sink, void *ctx, const char *s, size_t n);

#endif /* CT_PICKLE_READ_H */
