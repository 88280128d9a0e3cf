/* ctorch inspect FILE: every tensor of a checkpoint (dotted path, dtype, shape, bytes),
 * the totals, then everything else the file holds (safetensors metadata, epoch
 * counters, hyper-parameters, ...). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "ctorch.h"

typedef struct {
    char *name;
    char *value; /* metadata rows: the printed value */
    ct_dtype dtype;
    char shape[160];
    int64_t numel, nbytes;
} row;

typedef struct {
    row *rows;
    size_t n, cap;
    bool oom;
} rows;

static void push(rows *r, row x) {
    if (!x.name)
        r->oom = true;
    if (r->oom)
        goto drop;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        row *p = realloc(r->rows, cap * sizeof *p);
        if (!p) {
            r->oom = true;
            goto drop;
        }
        r->rows = p;
        r->cap = cap;
    }
    r->rows[r->n++] = x;
    return;
drop:
    free(x.name);
    free(x.value);
}

/* A copy of s with control characters escaped, so that names and values from a
 * hostile file cannot send terminal escape sequences. */
static char *escaped(const char *s) {
    size_t n = strlen(s);
    char *out = malloc(4 * n + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\t' || c == '\n' || c == '\r') {
            out[o++] = '\\';
            out[o++] = c == '\t' ? 't' : c == '\n' ? 'n' : 'r';
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t)snprintf(out + o, 5, "\\x%02x", c);
        } else
            out[o++] = (char)c;
    }
    out[o] = '\0';
    return out;
}

static char *join(const char *prefix, const char *part) {
    size_t a = strlen(prefix), b = strlen(part);
    char *s = malloc(a + b + 2);
    if (!s)
        return NULL;
    if (a) {
        memcpy(s, prefix, a);
        s[a++] = '.';
    }
    memcpy(s + a, part, b + 1);
    return s;
}

/* Python's repr: the shortest text that reads back as the same double, with ".0" on
 * integral values (0.9, not 0.90000000000000002; 0.0, not 0). */
static void float_repr(double f, char *buf, size_t cap) {
    if (f != f) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (f == 1.0 / 0.0 || f == -1.0 / 0.0) {
        snprintf(buf, cap, f > 0 ? "inf" : "-inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, f);
        if (strtod(buf, NULL) == f)
            break;
    }
    if (!strpbrk(buf, ".en"))
        strncat(buf, ".0", cap - strlen(buf) - 1);
}

static char *scalar_text(const ct_value *v) {
    char buf[64];
    size_t len = 0;
    const char *s = buf;
    switch (ct_value_kind(v)) {
    case CT_VALUE_NONE: s = "None"; break;
    case CT_VALUE_BOOL: s = ct_value_bool(v) ? "True" : "False"; break;
    case CT_VALUE_INT: snprintf(buf, sizeof buf, "%" PRId64, ct_value_int(v)); break;
    case CT_VALUE_FLOAT: float_repr(ct_value_float(v), buf, sizeof buf); break;
    case CT_VALUE_STRING: s = ct_value_str(v, &len); break;
    case CT_VALUE_BYTES:
        ct_value_str(v, &len);
        snprintf(buf, sizeof buf, "<%zu bytes>", len);
        break;
    case CT_VALUE_LIST: s = "[]"; break;
    case CT_VALUE_TUPLE: s = "()"; break;
    case CT_VALUE_DICT: s = "{}"; break;
    default: s = "?"; break;
    }
    return escaped(s);
}

static void walk(const ct_value *v, const char *path, rows *tensors, rows *meta, int depth) {
    ct_value_type k = ct_value_kind(v);
    if (k == CT_VALUE_TENSOR) {
        row x = {0};
        ct_tensor *t = ct_value_tensor(v);
        x.name = escaped(path);
        x.dtype = ct_tensor_dtype(t);
        x.numel = ct_tensor_numel(t);
        x.nbytes = x.numel * (int64_t)ct_tensor_element_size(t);
        size_t o = 0;
        int nd = ct_tensor_dim(t);
        o += (size_t)snprintf(x.shape + o, sizeof x.shape - o, "[");
        for (int i = 0; i < nd && o < sizeof x.shape; i++)
            o += (size_t)snprintf(x.shape + o, sizeof x.shape - o, i ? ", %" PRId64 : "%" PRId64,
                                  ct_tensor_size(t, i));
        if (o < sizeof x.shape)
            snprintf(x.shape + o, sizeof x.shape - o, "]");
        ct_release(t);
        push(tensors, x);
        return;
    }
    int64_t n = (k == CT_VALUE_LIST || k == CT_VALUE_TUPLE || k == CT_VALUE_DICT) ? ct_value_len(v) : 0;
    if (n <= 0 && depth == 0)
        return; /* an empty checkpoint has nothing to list */
    if (n <= 0 || depth > 200) {
        row x = {0};
        x.name = escaped(path);
        x.value = scalar_text(v);
        if (!x.value)
            meta->oom = true; /* not a "?" in the listing and exit status 0 */
        push(meta, x);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        char idx[32];
        const char *part = idx;
        snprintf(idx, sizeof idx, "%" PRId64, i);
        if (k == CT_VALUE_DICT) {
            const ct_value *key = ct_value_key_at(v, i);
            if (ct_value_kind(key) == CT_VALUE_STRING)
                part = ct_value_str(key, NULL);
            else
                snprintf(idx, sizeof idx, "%" PRId64, ct_value_int(key));
        }
        /* safetensors' __metadata__ entries print under their own names. */
        bool is_st_meta = depth == 0 && k == CT_VALUE_DICT && strcmp(part, "__metadata__") == 0 &&
                          ct_value_kind(ct_value_at(v, i)) == CT_VALUE_DICT;
        char *sub = is_st_meta ? join("", "") : join(path, part);
        if (!sub) {
            tensors->oom = true;
            return;
        }
        walk(ct_value_at(v, i), sub, tensors, meta, depth + 1);
        free(sub);
    }
}

static void human(int64_t bytes, char *buf, size_t cap) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double b = (double)bytes;
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%" PRId64 " B", bytes);
    else
        snprintf(buf, cap, "%.1f %s", b, units[u]);
}

int ct_cmd_inspect(int argc, char **argv) {
    if (argc != 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fprintf(argc == 2 ? stdout : stderr,
                "usage: ctorch inspect FILE\n"
                "  Lists the tensors of a safetensors or torch.save checkpoint (dotted path, dtype, shape,\n"
                "  bytes), the totals, then the file's other values and metadata.\n");
        return argc == 2 ? 0 : 2;
    }
    ct_value *root = ct_load(argv[1]);
    if (!root) {
        fprintf(stderr, "ctorch inspect: %s\n", ct_last_error());
        return 1;
    }
    rows tensors = {0}, meta = {0};
    walk(root, "", &tensors, &meta, 0);
    int status = 0;
    if (tensors.oom || meta.oom) {
        fprintf(stderr, "ctorch inspect: out of memory\n");
        status = 1;
    } else {
        int wname = 4, wdtype = 5, wshape = 5;
        int64_t params = 0, bytes = 0;
        for (size_t i = 0; i < tensors.n; i++) {
            row *x = &tensors.rows[i];
            int a = (int)strlen(x->name), b = (int)strlen(ct_dtype_name(x->dtype)), c = (int)strlen(x->shape);
            wname = a > wname ? a : wname;
            wdtype = b > wdtype ? b : wdtype;
            wshape = c > wshape ? c : wshape;
            params += x->numel;
            bytes += x->nbytes;
        }
        if (wname > 80)
            wname = 80;
        if (tensors.n)
            printf("%-*s  %-*s  %-*s  %s\n", wname, "name", wdtype, "dtype", wshape, "shape", "bytes");
        for (size_t i = 0; i < tensors.n; i++) {
            row *x = &tensors.rows[i];
            printf("%-*s  %-*s  %-*s  %" PRId64 "\n", wname, x->name, wdtype, ct_dtype_name(x->dtype), wshape,
                   x->shape, x->nbytes);
        }
        char hb[32];
        human(bytes, hb, sizeof hb);
        printf("%zu tensor%s, %" PRId64 " parameters, %" PRId64 " bytes (%s)\n", tensors.n,
               tensors.n == 1 ? "" : "s", params, bytes, hb);
        if (meta.n) {
            printf("metadata:\n");
            for (size_t i = 0; i < meta.n; i++)
                printf("  %s: %s\n", meta.rows[i].name[0] ? meta.rows[i].name : "(root)",
                       meta.rows[i].value ? meta.rows[i].value : "?");
        }
    }
    for (size_t i = 0; i < tensors.n; i++)
        free(tensors.rows[i].name);
    for (size_t i = 0; i < meta.n; i++) {
        free(meta.rows[i].name);
        free(meta.rows[i].value);
    }
    free(tensors.rows);
    free(meta.rows);
    ct_value_free(root);
    return status;
}
