/* Plain-data unpickler and JSON writer; see pickle_read.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "util/pickle_read.h"

/* Note [Plain unpickler]
 * Only plain data is accepted (the opcodes PyTorch's memory viewer reads, plus the few
 * a protocol-2..4 Python pickler uses for the same data): there is no GLOBAL, REDUCE or
 * anything else that could construct objects. Every length is checked against the
 * input, nesting is capped, and memo references are followed at most to that depth when
 * written out, so a hostile file cannot loop or overrun. */
typedef struct {
    const unsigned char *p;
    size_t n, off;
    ct_pvalue *all;
    char err[160];
} reader;

static ct_pvalue *new_value(reader *r, int type) {
    ct_pvalue *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(r->err, sizeof r->err, "out of memory");
        return NULL;
    }
    v->type = type;
    v->next_alloc = r->all;
    r->all = v;
    return v;
}

static void free_values(ct_pvalue *v) {
    while (v) {
        ct_pvalue *next = v->next_alloc;
        free(v->s);
        free(v->items);
        free(v);
        v = next;
    }
}

static int push_item(reader *r, ct_pvalue *c, ct_pvalue *x) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        ct_pvalue **it = realloc(c->items, cap * sizeof *it);
        if (!it) {
            snprintf(r->err, sizeof r->err, "out of memory");
            return -1;
        }
        c->items = it;
        c->cap = cap;
    }
    c->items[c->n++] = x;
    return 0;
}

typedef struct {
    ct_pvalue **v;
    size_t n, cap;
} vstack;

static int vpush(reader *r, vstack *s, ct_pvalue *x) {
    if (!x)
        return -1;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        ct_pvalue **v = realloc(s->v, cap * sizeof *v);
        if (!v) {
            snprintf(r->err, sizeof r->err, "out of memory");
            return -1;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
    return 0;
}

#define FAIL(...)                                         \
    do {                                                  \
        snprintf(r->err, sizeof r->err, __VA_ARGS__);     \
        goto fail;                                        \
    } while (0)
#define NEED(k)                                                                               \
    do {                                                                                      \
        if (r->n - r->off < (size_t)(k))                                                      \
            FAIL("truncated pickle: opcode 0x%02x at offset %zu needs %zu more bytes", op, at, \
                 (size_t)(k));                                                                \
    } while (0)

static uint64_t le(const unsigned char *p, int k) {
    uint64_t v = 0;
    for (int i = k - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static ct_pvalue *unpickle(reader *r) {
    vstack st = {0};
    size_t *marks = NULL, nmarks = 0, capmarks = 0;
    ct_pvalue **memo = NULL;
    size_t nmemo = 0, next_memo = 0;
    ct_pvalue *result = NULL;
    while (r->off < r->n) {
        size_t at = r->off;
        unsigned char op = r->p[r->off++];
        ct_pvalue *v = NULL, *c;
        uint64_t len, idx;
        size_t mark;
        switch (op) {
        case 0x80: /* PROTO */
            NEED(1);
            if (r->p[r->off] < 2 || r->p[r->off] > 5)
                FAIL("unsupported pickle protocol %d", r->p[r->off]);
            r->off++;
            break;
        case 0x95: /* FRAME */
            NEED(8);
            r->off += 8;
            break;
        case '.': /* STOP */
            if (st.n != 1 || nmarks)
                FAIL("malformed pickle: %zu values and %zu open marks at STOP", st.n, nmarks);
            result = st.v[0];
            goto done;
        case 'X':  /* BINUNICODE */
        case 0x8c: /* SHORT_BINUNICODE */
        case 0x8d: /* BINUNICODE8 */
        {
            int k = op == 'X' ? 4 : op == 0x8c ? 1 : 8;
            NEED(k);
            len = le(r->p + r->off, k);
            r->off += (size_t)k;
            NEED(len);
            if (!(v = new_value(r, CT_PV_STR)) || !(v->s = malloc((size_t)len + 1)))
                FAIL("out of memory");
            memcpy(v->s, r->p + r->off, (size_t)len);
            v->s[len] = '\0';
            v->slen = (size_t)len;
            r->off += (size_t)len;
            break;
        }
        case 'J': /* BININT */
            NEED(4);
            if ((v = new_value(r, CT_PV_INT)))
                v->i = (int32_t)(uint32_t)le(r->p + r->off, 4);
            r->off += 4;
            break;
        case 'K': /* BININT1 */
            NEED(1);
            if ((v = new_value(r, CT_PV_INT)))
                v->i = r->p[r->off];
            r->off += 1;
            break;
        case 'M': /* BININT2 */
            NEED(2);
            if ((v = new_value(r, CT_PV_INT)))
                v->i = (int64_t)le(r->p + r->off, 2);
            r->off += 2;
            break;
        case 0x8a: /* LONG1 */
        {
            NEED(1);
            size_t k = r->p[r->off++];
            NEED(k);
            const unsigned char *b = r->p + r->off;
            if (k <= 8) {
                uint64_t u = k ? le(b, (int)k) : 0;
                if (k > 0 && k < 8 && (b[k - 1] & 0x80))
                    u |= ~(uint64_t)0 << (8 * k); /* sign-extend */
                if ((v = new_value(r, CT_PV_INT)))
                    v->i = (int64_t)u;
            } else if ((v = new_value(r, CT_PV_FLOAT))) {
                /* beyond 64 bits: a JSON number cannot be exact anyway */
                double x = 0;
                bool neg = b[k - 1] & 0x80;
                for (size_t i = k; i-- > 0;)
                    x = x * 256.0 + (neg ? (unsigned char)~b[i] : b[i]);
                v->f = neg ? -(x + 1) : x;
            }
            r->off += k;
            break;
        }
        case 'G': /* BINFLOAT */
        {
            NEED(8);
            uint64_t u = 0;
            for (int i = 0; i < 8; i++)
                u = u << 8 | r->p[r->off + (size_t)i];
            if ((v = new_value(r, CT_PV_FLOAT)))
                memcpy(&v->f, &u, sizeof u);
            r->off += 8;
            break;
        }
        case 'N':
            v = new_value(r, CT_PV_NONE);
            break;
        case 0x88: /* NEWTRUE */
        case 0x89: /* NEWFALSE */
            if ((v = new_value(r, CT_PV_BOOL)))
                v->i = op == 0x88;
            break;
        case '}':
            v = new_value(r, CT_PV_DICT);
            break;
        case ']':
        case ')':
            v = new_value(r, CT_PV_LIST);
            break;
        case '(': /* MARK */
            if (nmarks == capmarks) {
                size_t cap = capmarks ? capmarks * 2 : 16;
                size_t *m = realloc(marks, cap * sizeof *m);
                if (!m)
                    FAIL("out of memory");
                marks = m;
                capmarks = cap;
            }
            marks[nmarks++] = st.n;
            break;
        case 'a': /* APPEND */
            if (st.n < 2 || st.v[st.n - 2]->type != CT_PV_LIST)
                FAIL("malformed pickle: APPEND without a list at offset %zu", at);
            if (push_item(r, st.v[st.n - 2], st.v[st.n - 1]))
                goto fail;
            st.n--;
            break;
        case 's': /* SETITEM */
            if (st.n < 3 || st.v[st.n - 3]->type != CT_PV_DICT)
                FAIL("malformed pickle: SETITEM without a dict at offset %zu", at);
            if (push_item(r, st.v[st.n - 3], st.v[st.n - 2]) || push_item(r, st.v[st.n - 3], st.v[st.n - 1]))
                goto fail;
            st.n -= 2;
            break;
        case 'e': /* APPENDS */
        case 'u': /* SETITEMS */
            if (!nmarks)
                FAIL("malformed pickle: no MARK for opcode '%c' at offset %zu", op, at);
            mark = marks[--nmarks];
            if (mark == 0 || st.v[mark - 1]->type != (op == 'e' ? CT_PV_LIST : CT_PV_DICT) ||
                (op == 'u' && (st.n - mark) % 2))
                FAIL("malformed pickle: opcode '%c' at offset %zu has no matching container", op, at);
            c = st.v[mark - 1];
            for (size_t i = mark; i < st.n; i++)
                if (push_item(r, c, st.v[i]))
                    goto fail;
            st.n = mark;
            break;
        case 'l': /* LIST */
        case 't': /* TUPLE */
        case 'd': /* DICT */
            if (!nmarks)
                FAIL("malformed pickle: no MARK for opcode '%c' at offset %zu", op, at);
            mark = marks[--nmarks];
            if (op == 'd' && (st.n - mark) % 2)
                FAIL("malformed pickle: odd DICT at offset %zu", at);
            if (!(v = new_value(r, op == 'd' ? CT_PV_DICT : CT_PV_LIST)))
                goto fail;
            for (size_t i = mark; i < st.n; i++)
                if (push_item(r, v, st.v[i]))
                    goto fail;
            st.n = mark;
            break;
        case 0x85: /* TUPLE1..3 */
        case 0x86:
        case 0x87:
        {
            size_t k = (size_t)(op - 0x84);
            if (st.n < k || (nmarks && marks[nmarks - 1] > st.n - k))
                FAIL("malformed pickle: TUPLE%zu at offset %zu", k, at);
            if (!(v = new_value(r, CT_PV_LIST)))
                goto fail;
            for (size_t i = st.n - k; i < st.n; i++)
                if (push_item(r, v, st.v[i]))
                    goto fail;
            st.n -= k;
            break;
        }
        case 'q':  /* BINPUT */
        case 'r':  /* LONG_BINPUT */
        case 0x94: /* MEMOIZE */
            if (op == 'q') {
                NEED(1);
                idx = r->p[r->off++];
            } else if (op == 'r') {
                NEED(4);
                idx = le(r->p + r->off, 4);
                r->off += 4;
            } else {
                idx = next_memo;
            }
            if (!st.n)
                FAIL("malformed pickle: memo put on an empty stack at offset %zu", at);
            if (idx > (1u << 24))
                FAIL("memo index %llu too large", (unsigned long long)idx);
            if (idx >= nmemo) {
                size_t cap = nmemo ? nmemo : 64;
                while (cap <= idx)
                    cap *= 2;
                ct_pvalue **m = realloc(memo, cap * sizeof *m);
                if (!m)
                    FAIL("out of memory");
                memset(m + nmemo, 0, (cap - nmemo) * sizeof *m);
                memo = m;
                nmemo = cap;
            }
            memo[idx] = st.v[st.n - 1];
            next_memo = (size_t)idx + 1 > next_memo ? (size_t)idx + 1 : next_memo;
            break;
        case 'h': /* BINGET */
        case 'j': /* LONG_BINGET */
            if (op == 'h') {
                NEED(1);
                idx = r->p[r->off++];
            } else {
                NEED(4);
                idx = le(r->p + r->off, 4);
                r->off += 4;
            }
            if (idx >= nmemo || !memo[idx])
                FAIL("malformed pickle: memo %llu is empty at offset %zu", (unsigned long long)idx, at);
            v = memo[idx];
            break;
        default:
            FAIL("unsupported pickle opcode 0x%02x at offset %zu: only plain data (dicts, lists, strings, "
                 "numbers) can be read",
                 op, at);
        }
        if (v && vpush(r, &st, v))
            goto fail;
        if (!v && r->err[0])
            goto fail;
    }
    snprintf(r->err, sizeof r->err, "truncated pickle: no STOP opcode");
fail:
    result = NULL;
done:
    free(st.v);
    free(marks);
    free(memo);
    return result;
}


typedef struct {
    ct_json_sink sink;
    void *ctx;
    bool stopped;
} json_out;

static void put(json_out *o, const char *s, size_t n) {
    if (!o->stopped && !o->sink(o->ctx, s, n))
        o->stopped = true;
}
static void puts_(json_out *o, const char *s) { put(o, s, strlen(s)); }

/* JSON string; '<', '>' and '&' escaped so the text is safe inside <script>. */
static void json_str(json_out *o, const char *s, size_t n) {
    put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(o, esc, 2);
        } else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(o, esc, 6);
        } else {
            put(o, (const char *)&c, 1);
        }
    }
    put(o, "\"", 1);
}

static int json_value(json_out *o, const ct_pvalue *v, int depth, char *err, size_t errcap) {
    if (o->stopped)
        return 0;
    char buf[64];
    if (depth > 64) {
        snprintf(err, errcap, "the snapshot nests deeper than 64 levels (or refers to itself)");
        return -1;
    }
    switch (v->type) {
    case CT_PV_NONE:
        puts_(o, "null");
        break;
    case CT_PV_BOOL:
        puts_(o, v->i ? "true" : "false");
        break;
    case CT_PV_INT:
        snprintf(buf, sizeof buf, "%lld", (long long)v->i);
        puts_(o, buf);
        break;
    case CT_PV_FLOAT:
        if (v->f != v->f || v->f > 1.7976931348623157e308 || v->f < -1.7976931348623157e308)
            puts_(o, "null");
        else {
            snprintf(buf, sizeof buf, "%.17g", v->f);
            puts_(o, buf);
        }
        break;
    case CT_PV_STR:
        json_str(o, v->s, v->slen);
        break;
    case CT_PV_LIST:
        put(o, "[", 1);
        for (size_t i = 0; i < v->n; i++) {
            if (i)
                put(o, ",", 1);
            if (json_value(o, v->items[i], depth + 1, err, errcap))
                return -1;
        }
        put(o, "]", 1);
        break;
    case CT_PV_DICT:
        put(o, "{", 1);
        for (size_t i = 0; i + 1 < v->n; i += 2) {
            const ct_pvalue *k = v->items[i];
            if (i)
                put(o, ",", 1);
            if (k->type == CT_PV_STR) {
                json_str(o, k->s, k->slen);
            } else if (k->type == CT_PV_INT) {
                snprintf(buf, sizeof buf, "\"%lld\"", (long long)k->i);
                puts_(o, buf);
            } else {
                snprintf(err, errcap, "a dict key is not a string or an integer");
                return -1;
            }
            put(o, ":", 1);
            if (json_value(o, v->items[i + 1], depth + 1, err, errcap))
                return -1;
        }
        put(o, "}", 1);
        break;
    default:
        break;
    }
    return 0;
}


ct_status ct_pickle_read_plain(const void *data, size_t n, ct_pdoc *doc, const char *op) {
    reader r;
    memset(&r, 0, sizeof r);
    doc->root = NULL;
    doc->all = NULL;
    if (!data)
        return ct_error_null(op);
    r.p = data;
    r.n = n;
    ct_pvalue *root = unpickle(&r);
    if (!root) {
        free_values(r.all);
        bool oom = strcmp(r.err, "out of memory") == 0;
        return ct_error(oom ? CT_ERROR_OUT_OF_MEMORY : CT_ERROR_FORMAT, op, "%s", r.err);
    }
    doc->root = root;
    doc->all = r.all;
    return CT_OK;
}

void ct_pdoc_free(ct_pdoc *doc) {
    if (!doc)
        return;
    free_values(doc->all);
    doc->root = NULL;
    doc->all = NULL;
}

ct_pvalue *ct_pdoc_new(ct_pdoc *doc, int type) {
    reader r;
    memset(&r, 0, sizeof r);
    r.all = doc->all;
    ct_pvalue *v = new_value(&r, type);
    doc->all = r.all;
    return v;
}

bool ct_pvalue_push(ct_pvalue *container, ct_pvalue *item) {
    reader r;
    memset(&r, 0, sizeof r);
    return push_item(&r, container, item) == 0;
}

ct_status ct_pvalue_write_json(const ct_pvalue *v, ct_json_sink sink, void *ctx, const char *op) {
    if (!v || !sink)
        return ct_error_null(op);
    json_out o = {sink, ctx, false};
    char err[128] = "";
    if (json_value(&o, v, 0, err, sizeof err))
        return ct_error(CT_ERROR_FORMAT, op, "%s", err);
    return CT_OK;
}

void ct_json_write_string(ct_json_sink sink, void *ctx, const char *s, size_t n) {
    json_out o = {sink, ctx, false};
    json_str(&o, s, n);
}
