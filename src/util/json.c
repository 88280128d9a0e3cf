/* Strict JSON (RFC 8259) into ct_value trees, and the escapes the writer needs. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "util/json.h"

/* ------------------------------------------------------------------ UTF-8 */

/* Length of the well-formed UTF-8 sequence at s[0..n), or 0 (Unicode table 3-7). */
static size_t utf8_seq(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90; /* overlong */
        else if (c == 0xf4)
            hi = 0x8f; /* above U+10FFFF */
    } else
        return 0;
    if (n < len)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

int64_t ct_utf8_invalid_at(const void *text, size_t len) {
    const uint8_t *s = text;
    size_t i = 0;
    while (i < len) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_seq(s + i, len - i);
        if (!k)
            return (int64_t)i;
        i += k;
    }
    return -1;
}

/* ------------------------------------------------------------------ parser */

typedef struct {
    const char *s;
    size_t n, pos;
    const char *op, *what;
    int depth;
} parser;

static ct_value *fail(parser *p, const char *reason) {
    ct_error(CT_ERROR_FORMAT, p->op, "invalid JSON in %s: %s at byte %zu", p->what, reason, p->pos);
    return NULL;
}

static void skip_ws(parser *p) {
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static bool literal(parser *p, const char *word) {
    size_t k = strlen(word);
    if (p->n - p->pos < k || memcmp(p->s + p->pos, word, k) != 0)
        return false;
    p->pos += k;
    return true;
}

static int hex4(parser *p) {
    if (p->n - p->pos < 4)
        return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->pos + (size_t)i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    p->pos += 4;
    return v;
}

static void put_utf8(char *out, size_t *o, uint32_t cp) {
    if (cp < 0x80)
        out[(*o)++] = (char)cp;
    else if (cp < 0x800) {
        out[(*o)++] = (char)(0xc0 | (cp >> 6));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out[(*o)++] = (char)(0xe0 | (cp >> 12));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        out[(*o)++] = (char)(0xf0 | (cp >> 18));
        out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    }
}

/* At the opening quote. The decoded text is never longer than the literal, so a
 * buffer of the literal's length suffices; the literal's end is found first so that a
 * header of many strings does not allocate the rest of the text for each. */
static ct_value *parse_string(parser *p) {
    p->pos++;
    size_t end = p->pos;
    while (end < p->n && p->s[end] != '"')
        end += p->s[end] == '\\' ? 2 : 1;
    if (end > p->n)
        end = p->n;
    char *out = ct_xmalloc(p->op, end - p->pos + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (;;) {
        if (p->pos >= p->n) {
            free(out);
            return fail(p, "unterminated string");
        }
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20) {
            free(out);
            return fail(p, "control character in string");
        }
        if (c != '\\') {
            size_t k = utf8_seq((const uint8_t *)p->s + p->pos, p->n - p->pos);
            if (!k) {
                free(out);
                return fail(p, "invalid UTF-8 in string");
            }
            memcpy(out + o, p->s + p->pos, k);
            o += k;
            p->pos += k;
            continue;
        }
        p->pos++;
        if (p->pos >= p->n) {
            free(out);
            return fail(p, "unterminated string");
        }
        char e = p->s[p->pos++];
        switch (e) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case '/': out[o++] = '/'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            int hi = hex4(p);
            if (hi < 0) {
                free(out);
                return fail(p, "invalid \\u escape");
            }
            uint32_t cp = (uint32_t)hi;
            if (hi >= 0xdc00 && hi <= 0xdfff) {
                free(out);
                return fail(p, "lone low surrogate in \\u escape");
            }
            if (hi >= 0xd800 && hi <= 0xdbff) {
                int lo = -1;
                if (p->n - p->pos >= 2 && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u') {
                    p->pos += 2;
                    lo = hex4(p);
                }
                if (lo < 0xdc00 || lo > 0xdfff) {
                    free(out);
                    return fail(p, "lone high surrogate in \\u escape");
                }
                cp = 0x10000u + (((uint32_t)hi - 0xd800u) << 10) + ((uint32_t)lo - 0xdc00u);
            }
            put_utf8(out, &o, cp);
            break;
        }
        default: free(out); p->pos--; return fail(p, "invalid escape in string");
        }
    }
    ct_value *v = ct_value_new_strn(out, o);
    free(out);
    return v;
}

static ct_value *parse_number(parser *p) {
    size_t start = p->pos;
    bool integral = true;
    if (p->s[p->pos] == '-')
        p->pos++;
    if (p->pos >= p->n || p->s[p->pos] < '0' || p->s[p->pos] > '9')
        return fail(p, "invalid number");
    if (p->s[p->pos] == '0') {
        p->pos++;
        if (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            return fail(p, "leading zero in number");
    } else
        while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            p->pos++;
    if (p->pos < p->n && p->s[p->pos] == '.') {
        integral = false;
        p->pos++;
        if (p->pos >= p->n || p->s[p->pos] < '0' || p->s[p->pos] > '9')
            return fail(p, "invalid number");
        while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            p->pos++;
    }
    if (p->pos < p->n && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        integral = false;
        p->pos++;
        if (p->pos < p->n && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
            p->pos++;
        if (p->pos >= p->n || p->s[p->pos] < '0' || p->s[p->pos] > '9')
            return fail(p, "invalid number");
        while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            p->pos++;
    }
    if (integral) {
        bool neg = p->s[start] == '-';
        uint64_t mag = 0, limit = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
        for (size_t i = start + (neg ? 1 : 0); i < p->pos; i++) {
            uint64_t d = (uint64_t)(p->s[i] - '0');
            if (mag > (limit - d) / 10) {
                p->pos = start;
                return fail(p, "integer out of the int64 range");
            }
            mag = mag * 10 + d;
        }
        int64_t v = neg ? (mag == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
        return ct_value_new_int(v);
    }
    char buf[64];
    size_t k = p->pos - start;
    if (k >= sizeof buf) {
        p->pos = start;
        return fail(p, "number too long");
    }
    memcpy(buf, p->s + start, k);
    buf[k] = '\0';
    return ct_value_new_float(strtod(buf, NULL));
}

static ct_value *parse_value(parser *p);

static ct_value *parse_array(parser *p) {
    p->pos++;
    ct_value *list = ct_value_new_list();
    if (!list)
        return NULL;
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == ']') {
        p->pos++;
        return list;
    }
    for (;;) {
        ct_value *item = parse_value(p);
        if (!item || ct_value_append(list, item) != CT_OK) {
            ct_value_free(list);
            return NULL;
        }
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->n && p->s[p->pos] == ']') {
            p->pos++;
            return list;
        }
        ct_value_free(list);
        return fail(p, "expected ',' or ']' in array");
    }
}

static ct_value *parse_object(parser *p) {
    p->pos++;
    ct_value *dict = ct_value_new_dict();
    if (!dict)
        return NULL;
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == '}') {
        p->pos++;
        return dict;
    }
    for (;;) {
        skip_ws(p);
        if (p->pos >= p->n || p->s[p->pos] != '"') {
            ct_value_free(dict);
            return fail(p, "expected a string key in object");
        }
        size_t key_pos = p->pos;
        ct_value *key = parse_string(p);
        if (!key) {
            ct_value_free(dict);
            return NULL;
        }
        if (ct_value_dict_find(dict, key) >= 0) {
            char msg[160];
            snprintf(msg, sizeof msg, "duplicate key \"%.100s\"", key->u.s.data);
            ct_value_free(key);
            ct_value_free(dict);
            p->pos = key_pos;
            return fail(p, msg);
        }
        skip_ws(p);
        if (p->pos >= p->n || p->s[p->pos] != ':') {
            ct_value_free(key);
            ct_value_free(dict);
            return fail(p, "expected ':' after object key");
        }
        p->pos++;
        ct_value *item = parse_value(p);
        if (!item) {
            ct_value_free(key);
            ct_value_free(dict);
            return NULL;
        }
        if (ct_value_dict_set(dict, key, item) != CT_OK) {
            ct_value_free(dict);
            return NULL;
        }
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->n && p->s[p->pos] == '}') {
            p->pos++;
            return dict;
        }
        ct_value_free(dict);
        return fail(p, "expected ',' or '}' in object");
    }
}

static ct_value *parse_value(parser *p) {
    skip_ws(p);
    if (p->pos >= p->n)
        return fail(p, "unexpected end of input");
    char c = p->s[p->pos];
    if (c == '{' || c == '[') {
        if (p->depth >= CT_JSON_MAX_DEPTH)
            return fail(p, "nesting too deep");
        p->depth++;
        ct_value *v = c == '{' ? parse_object(p) : parse_array(p);
        p->depth--;
        return v;
    }
    if (c == '"')
        return parse_string(p);
    if (c == '-' || (c >= '0' && c <= '9'))
        return parse_number(p);
    if (literal(p, "true"))
        return ct_value_new_bool(true);
    if (literal(p, "false"))
        return ct_value_new_bool(false);
    if (literal(p, "null"))
        return ct_value_none();
    return fail(p, "expected a value");
}

ct_value *ct_json_parse(const char *text, size_t len, const char *op, const char *what) {
    parser p = {.s = text, .n = len, .pos = 0, .op = op, .what = what, .depth = 0};
    if (!text && len)
        return fail(&p, "no text");
    ct_value *v = parse_value(&p);
    if (!v)
        return NULL;
    skip_ws(&p);
    if (p.pos != p.n) {
        ct_value_free(v);
        return fail(&p, "trailing characters after the value");
    }
    return v;
}

ct_value *ct_value_from_json(const char *text, size_t len, const char *what) {
    return ct_json_parse(text, len, "value_from_json", what ? what : "text");
}

/* ------------------------------------------------------------------ writer */

void ct_json_buf_free(ct_json_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

void ct_json_put(ct_json_buf *b, const char *s, size_t n) {
    if (b->failed)
        return;
    if (b->cap - b->len < n + 1) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n + 1) {
            if (cap > SIZE_MAX / 2) {
                b->failed = true;
                ct_error(CT_ERROR_OUT_OF_MEMORY, "json", "output too large");
                return;
            }
            cap *= 2;
        }
        char *d = realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            ct_error(CT_ERROR_OUT_OF_MEMORY, "json", "could not allocate %zu bytes", cap);
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void ct_json_puts(ct_json_buf *b, const char *s) { ct_json_put(b, s, strlen(s)); }

void ct_json_put_int(ct_json_buf *b, int64_t v) {
    char buf[32];
    int k = snprintf(buf, sizeof buf, "%lld", (long long)v);
    ct_json_put(b, buf, (size_t)k);
}

void ct_json_put_string(ct_json_buf *b, const char *s, size_t n) {
    static const char hexd[] = "0123456789abcdef";
    ct_json_put(b, "\"", 1);
    size_t run = 0; /* start of the pending run of bytes that need no escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        ct_json_put(b, s + run, i - run);
        run = i + 1;
        char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
        size_t k = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hexd[c >> 4];
            esc[5] = hexd[c & 15];
            k = 6;
        }
        ct_json_put(b, esc, k);
    }
    ct_json_put(b, s + run, n - run);
    ct_json_put(b, "\"", 1);
}

/* ------------------------------------------------------------------ values as JSON */

/* Note [Values as JSON]
 * ct_value_to_json writes what ct_value_from_json reads back: ints stay ints; a float
 * gets the fewest of 15 to 17 significant digits that read back exactly, and ".0"
 * when that looks like an integer, so that it reads back as a float. The text is
 * compact, its strings spelled by ct_json_put_string. Nothing JSON cannot hold is written approximately:
 * a tensor, bytes, NaN, an infinity or a string that is not UTF-8 is an error, not a
 * null or a replacement character. The text goes into a ct_json_buf and is copied out
 * snprintf-style, so a caller sizes its buffer with a first call of capacity 0. */
static bool json_value(ct_json_buf *b, const ct_value *v, int depth) {
    static const char op[] = "value_to_json";
    if (!v) {
        ct_error_null(op);
        return false;
    }
    if (depth > CT_VALUE_MAX_DEPTH) {
        ct_error(CT_ERROR_VALUE, op, "the value nests deeper than %d levels", CT_VALUE_MAX_DEPTH);
        return false;
    }
    switch (v->type) {
    case CT_VALUE_NONE: ct_json_puts(b, "null"); return true;
    case CT_VALUE_BOOL: ct_json_puts(b, v->u.b ? "true" : "false"); return true;
    case CT_VALUE_INT: ct_json_put_int(b, v->u.i); return true;
    case CT_VALUE_FLOAT: {
        if (!isfinite(v->u.f)) {
            ct_error(CT_ERROR_VALUE, op, "%s has no JSON form", isnan(v->u.f) ? "NaN" : "an infinity");
            return false;
        }
        char num[40];
        int k = 0;
        for (int digits = 15; digits <= 17; digits++) { /* the shortest that reads back */
            k = snprintf(num, sizeof num, "%.*g", digits, v->u.f);
            if (strtod(num, NULL) == v->u.f)
                break;
        }
        if (!strpbrk(num, ".eE"))
            num[k++] = '.', num[k++] = '0', num[k] = '\0';
        ct_json_put(b, num, (size_t)k);
        return true;
    }
    case CT_VALUE_STRING:
        if (ct_utf8_invalid_at(v->u.s.data, v->u.s.len) >= 0) {
            ct_error(CT_ERROR_VALUE, op, "the string '%.200s' is not valid UTF-8", v->u.s.data);
            return false;
        }
        ct_json_put_string(b, v->u.s.data, v->u.s.len);
        return true;
    case CT_VALUE_BYTES:
    case CT_VALUE_TENSOR:
        ct_error(CT_ERROR_TYPE, op, "a %s has no JSON form", ct_value_type_name(v->type));
        return false;
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE:
    case CT_VALUE_DICT: {
        bool dict = v->type == CT_VALUE_DICT;
        ct_json_put(b, dict ? "{" : "[", 1);
        for (int64_t i = 0; i < v->u.c.len; i++) {
            if (i)
                ct_json_put(b, ",", 1);
            if (dict) {
                const ct_value *k = v->u.c.keys[i];
                if (k->type == CT_VALUE_INT) {
                    ct_json_put(b, "\"", 1);
                    ct_json_put_int(b, k->u.i);
                    ct_json_put(b, "\"", 1);
                } else if (!json_value(b, k, depth + 1)) {
                    return false;
                }
                ct_json_put(b, ":", 1);
            }
            if (!json_value(b, v->u.c.items[i], depth + 1))
                return false;
        }
        ct_json_put(b, dict ? "}" : "]", 1);
        return true;
    }
    }
    ct_error(CT_ERROR_VALUE, op, "corrupt value of kind %d", (int)v->type);
    return false;
}

int64_t ct_value_to_json(const ct_value *v, char *buf, size_t cap) {
    if (!buf && cap) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "value_to_json", "buf is NULL for %zu bytes", cap);
        return -1;
    }
    ct_json_buf b = {0};
    bool ok = json_value(&b, v, 0) && !b.failed;
    if (ok && cap) {
        size_t n = b.len < cap - 1 ? b.len : cap - 1;
        if (n)
            memcpy(buf, b.data, n);
        buf[n] = '\0';
    }
    int64_t len = ok ? (int64_t)b.len : -1;
    ct_json_buf_free(&b);
    return len;
}
