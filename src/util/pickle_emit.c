/* Pickle writer; see pickle_emit.h. Opcode values are those of Python's pickle module
 * (Lib/pickletools.py documents each one). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "util/pickle_emit.h"

enum {
    OP_MARK = '(',
    OP_STOP = '.',
    OP_BININT = 'J',
    OP_BININT1 = 'K',
    OP_BININT2 = 'M',
    OP_NONE = 'N',
    OP_BINPERSID = 'Q',
    OP_REDUCE = 'R',
    OP_BINSTRING = 'T',
    OP_SHORT_BINSTRING = 'U',
    OP_BINUNICODE = 'X',
    OP_APPEND = 'a',
    OP_BUILD = 'b',
    OP_GLOBAL = 'c',
    OP_EMPTY_DICT = '}',
    OP_APPENDS = 'e',
    OP_BINGET = 'h',
    OP_LONG_BINGET = 'j',
    OP_EMPTY_LIST = ']',
    OP_BINPUT = 'q',
    OP_LONG_BINPUT = 'r',
    OP_SETITEM = 's',
    OP_TUPLE = 't',
    OP_EMPTY_TUPLE = ')',
    OP_SETITEMS = 'u',
    OP_BINFLOAT = 'G',
    OP_PROTO = 0x80,
    OP_TUPLE1 = 0x85,
    OP_TUPLE2 = 0x86,
    OP_TUPLE3 = 0x87,
    OP_NEWTRUE = 0x88,
    OP_NEWFALSE = 0x89,
    OP_LONG1 = 0x8a,
    OP_LONG4 = 0x8b,
};

void ct_pickle_init(ct_pickle *p) { memset(p, 0, sizeof *p); }

void ct_pickle_destroy(ct_pickle *p) {
    free(p->buf);
    memset(p, 0, sizeof *p);
}

static void fail(ct_pickle *p, ct_status st) {
    if (p->status == CT_OK)
        p->status = st;
}

void ct_pickle_raw(ct_pickle *p, const void *data, size_t n) {
    if (p->status != CT_OK)
        return;
    if (n > SIZE_MAX - p->len) {
        fail(p, CT_ERROR_OUT_OF_MEMORY);
        return;
    }
    if (p->len + n > p->cap) {
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < p->len + n)
            cap = cap > SIZE_MAX / 2 ? p->len + n : cap * 2;
        unsigned char *b = realloc(p->buf, cap);
        if (!b) {
            fail(p, CT_ERROR_OUT_OF_MEMORY);
            return;
        }
        p->buf = b;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, data, n);
    p->len += n;
}

static void op(ct_pickle *p, unsigned char c) { ct_pickle_raw(p, &c, 1); }

static void le32(ct_pickle *p, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    ct_pickle_raw(p, b, 4);
}

void ct_pickle_proto(ct_pickle *p) {
    unsigned char b[2] = {OP_PROTO, 2};
    ct_pickle_raw(p, b, 2);
}

void ct_pickle_stop(ct_pickle *p) {
    if (p->depth != 0)
        fail(p, CT_ERROR_RUNTIME);
    op(p, OP_STOP);
}

void ct_pickle_none(ct_pickle *p) { op(p, OP_NONE); }
void ct_pickle_bool(ct_pickle *p, bool v) { op(p, v ? OP_NEWTRUE : OP_NEWFALSE); }

void ct_pickle_long_le(ct_pickle *p, const unsigned char *bytes, size_t n) {
    /* drop redundant sign bytes; pickle's LONG wants the shortest form, and 0 is empty */
    while (n > 0) {
        unsigned char top = bytes[n - 1];
        bool neg_below = n >= 2 && (bytes[n - 2] & 0x80);
        if ((top == 0x00 && (n == 1 || !neg_below)) || (top == 0xff && n >= 2 && neg_below))
            n--;
        else
            break;
    }
    if (n < 256) {
        unsigned char h[2] = {OP_LONG1, (unsigned char)n};
        ct_pickle_raw(p, h, 2);
    } else {
        if (n > UINT32_MAX) {
            fail(p, CT_ERROR_VALUE);
            return;
        }
        op(p, OP_LONG4);
        le32(p, (uint32_t)n);
    }
    ct_pickle_raw(p, bytes, n);
}

void ct_pickle_int(ct_pickle *p, int64_t v) {
    if (v >= 0 && v < 256) {
        unsigned char b[2] = {OP_BININT1, (unsigned char)v};
        ct_pickle_raw(p, b, 2);
    } else if (v >= 0 && v < 65536) {
        unsigned char b[3] = {OP_BININT2, (unsigned char)v, (unsigned char)(v >> 8)};
        ct_pickle_raw(p, b, 3);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        op(p, OP_BININT);
        le32(p, (uint32_t)(int32_t)v);
    } else {
        unsigned char b[8];
        uint64_t u = (uint64_t)v;
        for (int i = 0; i < 8; i++)
            b[i] = (unsigned char)(u >> (8 * i));
        ct_pickle_long_le(p, b, 8);
    }
}

void ct_pickle_uint(ct_pickle *p, uint64_t v) {
    if (v <= INT64_MAX) {
        ct_pickle_int(p, (int64_t)v);
        return;
    }
    unsigned char b[9];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    b[8] = 0; /* positive: a zero sign byte */
    ct_pickle_long_le(p, b, 9);
}

void ct_pickle_float(ct_pickle *p, double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    unsigned char b[9];
    b[0] = OP_BINFLOAT;
    for (int i = 0; i < 8; i++)
        b[1 + i] = (unsigned char)(u >> (8 * (7 - i))); /* big-endian */
    ct_pickle_raw(p, b, 9);
}

void ct_pickle_unicode(ct_pickle *p, const char *s, size_t len) {
    if (!s) {
        fail(p, CT_ERROR_NULL_ARGUMENT);
        return;
    }
    if (len == (size_t)-1)
        len = strlen(s);
    if (len > UINT32_MAX) {
        fail(p, CT_ERROR_VALUE);
        return;
    }
    op(p, OP_BINUNICODE);
    le32(p, (uint32_t)len);
    ct_pickle_raw(p, s, len);
}

void ct_pickle_binstring(ct_pickle *p, const void *data, size_t len) {
    if (len < 256) {
        unsigned char h[2] = {OP_SHORT_BINSTRING, (unsigned char)len};
        ct_pickle_raw(p, h, 2);
    } else {
        if (len > INT32_MAX) {
            fail(p, CT_ERROR_VALUE);
            return;
        }
        op(p, OP_BINSTRING);
        le32(p, (uint32_t)len);
    }
    ct_pickle_raw(p, data, len);
}

void ct_pickle_mark(ct_pickle *p) {
    p->depth++;
    op(p, OP_MARK);
}

static void close_mark(ct_pickle *p, unsigned char c) {
    if (p->depth <= 0) {
        fail(p, CT_ERROR_RUNTIME);
        return;
    }
    p->depth--;
    op(p, c);
}

void ct_pickle_empty_dict(ct_pickle *p) { op(p, OP_EMPTY_DICT); }
void ct_pickle_empty_list(ct_pickle *p) { op(p, OP_EMPTY_LIST); }
void ct_pickle_empty_tuple(ct_pickle *p) { op(p, OP_EMPTY_TUPLE); }
void ct_pickle_setitem(ct_pickle *p) { op(p, OP_SETITEM); }
void ct_pickle_setitems(ct_pickle *p) { close_mark(p, OP_SETITEMS); }
void ct_pickle_append(ct_pickle *p) { op(p, OP_APPEND); }
void ct_pickle_appends(ct_pickle *p) { close_mark(p, OP_APPENDS); }
void ct_pickle_tuple(ct_pickle *p) { close_mark(p, OP_TUPLE); }

void ct_pickle_tuple_n(ct_pickle *p, int n) {
    static const unsigned char ops[4] = {OP_EMPTY_TUPLE, OP_TUPLE1, OP_TUPLE2, OP_TUPLE3};
    if (n < 0 || n > 3) {
        fail(p, CT_ERROR_VALUE);
        return;
    }
    op(p, ops[n]);
}

uint32_t ct_pickle_memoize(ct_pickle *p) {
    uint32_t i = p->memo_next++;
    if (i < 256) {
        unsigned char b[2] = {OP_BINPUT, (unsigned char)i};
        ct_pickle_raw(p, b, 2);
    } else {
        op(p, OP_LONG_BINPUT);
        le32(p, i);
    }
    return i;
}

void ct_pickle_get(ct_pickle *p, uint32_t index) {
    if (index >= p->memo_next) {
        fail(p, CT_ERROR_VALUE);
        return;
    }
    if (index < 256) {
        unsigned char b[2] = {OP_BINGET, (unsigned char)index};
        ct_pickle_raw(p, b, 2);
    } else {
        op(p, OP_LONG_BINGET);
        le32(p, index);
    }
}

void ct_pickle_global(ct_pickle *p, const char *module, const char *name) {
    if (!module || !name || strchr(module, '\n') || strchr(name, '\n')) {
        fail(p, CT_ERROR_VALUE);
        return;
    }
    op(p, OP_GLOBAL);
    ct_pickle_raw(p, module, strlen(module));
    op(p, '\n');
    ct_pickle_raw(p, name, strlen(name));
    op(p, '\n');
}

void ct_pickle_reduce(ct_pickle *p) { op(p, OP_REDUCE); }
void ct_pickle_build(ct_pickle *p) { op(p, OP_BUILD); }
void ct_pickle_binpersid(ct_pickle *p) { op(p, OP_BINPERSID); }

ct_status ct_pickle_finish(ct_pickle *p, const char *opname) {
    switch (p->status) {
    case CT_OK:
        return CT_OK;
    case CT_ERROR_OUT_OF_MEMORY:
        return ct_error(p->status, opname, "out of memory while writing a pickle");
    case CT_ERROR_NULL_ARGUMENT:
        return ct_error(p->status, opname, "a NULL string was given to the pickle writer");
    case CT_ERROR_RUNTIME:
        return ct_error(p->status, opname, "unbalanced MARK in the pickle writer");
    default:
        return ct_error(p->status, opname, "a value cannot be represented in a protocol-2 pickle");
    }
}
