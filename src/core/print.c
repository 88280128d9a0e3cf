/* Printing tensors as PyTorch's repr() does. See docs/printing.md. */
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "factory.h"
#include "tensor_impl.h"

/* ------------------------------------------------------------------ options */

/* Note [Print options]
 * As torch.set_printoptions, the options are process-wide. Each one is atomic and
 * ct_to_string reads them once at its start, so a concurrent change never tears a
 * value; a repr made while another thread changes several options may see some of
 * the old and some of the new ones, as in PyTorch. */
#define DEFAULT_PRECISION 4
#define DEFAULT_THRESHOLD 1000
#define DEFAULT_EDGEITEMS 3
#define DEFAULT_LINEWIDTH 80

static atomic_int opt_precision = DEFAULT_PRECISION;
static atomic_llong opt_threshold = DEFAULT_THRESHOLD;
static atomic_int opt_edgeitems = DEFAULT_EDGEITEMS;
static atomic_int opt_linewidth = DEFAULT_LINEWIDTH;
static atomic_int opt_sci_mode = -1;

typedef struct {
    int precision;
    int64_t threshold;
    int64_t edgeitems;
    int64_t linewidth;
    int sci_mode; /* -1 automatic, 0 off, 1 on */
} print_opts;

/* Note [Print precision]
 * Python formats with any precision up to INT_MAX, so PyTorch takes any; but a double's
 * exact decimal value has at most 1074 digits after the point (767 significant ones),
 * and every digit past those is a 0. A larger precision only pads with zeros, while
 * each element becomes that many bytes, formatted several times: precision 2^30 made a
 * 4-element repr run for minutes and allocate gigabytes. So it is refused. */
#define CT_PRINT_MAX_PRECISION 1074

ct_status ct_set_printoptions(int precision, int64_t threshold, int edgeitems, int linewidth, int sci_mode) {
    if (precision > CT_PRINT_MAX_PRECISION)
        return ct_error(CT_ERROR_VALUE, "set_printoptions",
                        "precision must be at most %d (a double has no more decimal digits after the point), got %d",
                        CT_PRINT_MAX_PRECISION, precision);
    if (precision >= 0)
        atomic_store(&opt_precision, precision);
    if (threshold >= 0)
        atomic_store(&opt_threshold, (long long)threshold);
    if (edgeitems >= 0)
        atomic_store(&opt_edgeitems, edgeitems);
    if (linewidth >= 0)
        atomic_store(&opt_linewidth, linewidth);
    if (sci_mode >= -1)
        atomic_store(&opt_sci_mode, sci_mode > 0 ? 1 : sci_mode);
    return CT_OK;
}

void ct_reset_printoptions(void) {
    atomic_store(&opt_precision, DEFAULT_PRECISION);
    atomic_store(&opt_threshold, DEFAULT_THRESHOLD);
    atomic_store(&opt_edgeitems, DEFAULT_EDGEITEMS);
    atomic_store(&opt_linewidth, DEFAULT_LINEWIDTH);
    atomic_store(&opt_sci_mode, -1);
}

static print_opts load_opts(void) {
    print_opts o;
    o.precision = atomic_load(&opt_precision);
    o.threshold = (int64_t)atomic_load(&opt_threshold);
    o.edgeitems = atomic_load(&opt_edgeitems);
    o.linewidth = atomic_load(&opt_linewidth);
    o.sci_mode = atomic_load(&opt_sci_mode);
    return o;
}

/* ------------------------------------------------------------------ string builder */

typedef struct {
    char *p;
    size_t len, cap;
    bool failed; /* an allocation failed; everything after it is dropped */
} strbuf;

static bool sb_reserve(strbuf *sb, size_t extra) {
    if (sb->failed)
        return false;
    if (extra > SIZE_MAX - sb->len - 1) {
        sb->failed = true;
        return false;
    }
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap)
        return true;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = realloc(sb->p, cap);
    if (!p) {
        sb->failed = true;
        return false;
    }
    sb->p = p;
    sb->cap = cap;
    return true;
}

static void sb_putn(strbuf *sb, const char *s, size_t n) {
    if (!sb_reserve(sb, n))
        return;
    memcpy(sb->p + sb->len, s, n);
    sb->len += n;
    sb->p[sb->len] = '\0';
}

static void sb_puts(strbuf *sb, const char *s) { sb_putn(sb, s, strlen(s)); }

static void sb_spaces(strbuf *sb, int64_t n) {
    if (n <= 0 || !sb_reserve(sb, (size_t)n))
        return;
    memset(sb->p + sb->len, ' ', (size_t)n);
    sb->len += (size_t)n;
    sb->p[sb->len] = '\0';
}

static void sb_printf(strbuf *sb, const char *fmt, ...) CT_PRINTF(2, 3);
static void sb_printf(strbuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        sb->failed = true;
        return;
    }
    if (!sb_reserve(sb, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(sb->p + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

/* ------------------------------------------------------------------ walking elements */

/* Calls fn on every element that the repr shows, in logical (row-major) order: all of
 * them, or with summarize, the first and last edgeitems along every dim. */
typedef void (*elem_fn)(void *ctx, const char *p);

/* Note [Summarized rows]
 * A summarized dim shows its first and last edgeitems. With edgeitems 0, PyTorch 2.x
 * prints a summarized tensor of any rank as "[...]", and adds a size= suffix to every
 * repr made with edgeitems 0 (summarized or not), so the shape is still visible. */
static bool summarized_dim(int64_t n, bool summarize, int64_t edge) { return summarize && n > 2 * edge; }

/* Bytes between neighbours along dim. A dim of one element (or none) may carry any
 * stride, even one whose byte count overflows; it is never stepped along. */
static int64_t dim_step(const ct_tensor *t, int dim) {
    return t->shape[dim] > 1 ? t->strides[dim] * (int64_t)ct_dtype_size(t->dtype) : 0;
}

static void walk(const ct_tensor *t, const char *p, int dim, bool summarize, int64_t edge, elem_fn fn, void *ctx) {
    if (dim == t->ndim) {
        fn(ctx, p);
        return;
    }
    int64_t n = t->shape[dim];
    int64_t step = dim_step(t, dim);
    if (summarized_dim(n, summarize, edge)) {
        for (int64_t i = 0; i < edge; i++)
            walk(t, p + i * step, dim + 1, summarize, edge, fn, ctx);
        for (int64_t i = n - edge; i < n; i++)
            walk(t, p + i * step, dim + 1, summarize, edge, fn, ctx);
    } else {
        for (int64_t i = 0; i < n; i++)
            walk(t, p + i * step, dim + 1, summarize, edge, fn, ctx);
    }
}

/* ------------------------------------------------------------------ formatter */

/* Note [Float formatting]
 * PyTorch's _Formatter looks at the nonzero finite values it will show (float16 and
 * bfloat16 widened to float32 first, statistics in float64):
 * - integer mode when every one of them is an integer: "{:.0f}" plus a "." ("3.");
 * - scientific when max/min > 1000 or max > 1e8, or (not integer mode) min < 1e-4:
 *   "{:.{precision}e}";
 * - fixed otherwise: "{:.{precision}f}".
 * The column width is the widest of those strings (plus one for the "." of integer
 * mode), measured in the mode set_printoptions(sci_mode=...) forces, if any; zeros,
 * -0., nan and inf are not measured, so they may print wider than the column. When no
 * value is nonzero and finite, the override does not apply at all (all zeros print
 * "0." even with sci_mode on). C's printf and Python's format agree digit for digit
 * here: both round the exact binary value to nearest, ties to even. Only nan differs
 * (C may print "-nan"), so non-finite values are spelled out by hand. */
typedef struct {
    ct_dtype dtype;
    bool floating;
    bool int_mode;
    bool sci_mode;
    int precision;
    int64_t max_width;
    /* statistics pass */
    bool any;
    double amin, amax;
} formatter;

static double load_value(const char *p, ct_dtype d) { return ct_load_double(p, d); }

static void stats_fn(void *ctx, const char *p) {
    formatter *f = ctx;
    double v = load_value(p, f->dtype);
    if (!isfinite(v) || v == 0)
        return;
    double a = fabs(v);
    if (!f->any) {
        f->any = true;
        f->amin = f->amax = a;
    } else {
        if (a < f->amin)
            f->amin = a;
        if (a > f->amax)
            f->amax = a;
    }
    if (v != ceil(v))
        f->int_mode = false;
}

/* Length of one nonzero finite value in the mode chosen before any override. */
static void float_width_fn(void *ctx, const char *p) {
    formatter *f = ctx;
    double v = load_value(p, f->dtype);
    if (!isfinite(v) || v == 0)
        return;
    int n;
    if (f->sci_mode)
        n = snprintf(NULL, 0, "%.*e", f->precision, v);
    else if (f->int_mode)
        n = snprintf(NULL, 0, "%.0f", v) + 1;
    else
        n = snprintf(NULL, 0, "%.*f", f->precision, v);
    if (n > f->max_width)
        f->max_width = n;
}

/* Writes the decimal text of an integral or bool element into buf (at least 32 bytes)
 * and returns its length. */
static int int_text(const char *p, ct_dtype d, char *buf, size_t cap) {
    if (d == CT_DTYPE_BOOL)
        return snprintf(buf, cap, "%s", *(const uint8_t *)p ? "True" : "False");
    if (d == CT_DTYPE_UINT64)
        return snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)p);
    return snprintf(buf, cap, "%lld", (long long)ct_load_int64(p, d));
}

static void int_width_fn(void *ctx, const char *p) {
    formatter *f = ctx;
    char buf[32];
    int n = int_text(p, f->dtype, buf, sizeof buf);
    if (n > f->max_width)
        f->max_width = n;
}

static void formatter_init(formatter *f, const ct_tensor *t, bool summarize, const print_opts *o) {
    memset(f, 0, sizeof *f);
    f->dtype = t->dtype;
    f->floating = ct_dtype_is_floating(t->dtype);
    f->int_mode = true;
    f->sci_mode = false;
    f->precision = o->precision;
    f->max_width = 1;
    const char *p = ct_tensor_ptr(t);
    if (!f->floating) {
        walk(t, p, 0, summarize, o->edgeitems, int_width_fn, f);
        return;
    }
    walk(t, p, 0, summarize, o->edgeitems, stats_fn, f);
    if (!f->any)
        return; /* nothing to measure, and the sci_mode option is ignored */
    double ratio = f->amax / f->amin;
    if (f->int_mode)
        f->sci_mode = ratio > 1000.0 || f->amax > 1.0e8;
    else
        f->sci_mode = ratio > 1000.0 || f->amax > 1.0e8 || f->amin < 1.0e-4;
    /* PyTorch 2.x measures the column in the mode that prints (1.13 measured it before
     * the override) */
    if (o->sci_mode >= 0)
        f->sci_mode = o->sci_mode == 1;
    walk(t, p, 0, summarize, o->edgeitems, float_width_fn, f);
}

/* Appends one element, right-aligned to the formatter's width. */
static void format_elem(strbuf *sb, const formatter *f, const char *p) {
    char small[64];
    if (!f->floating) {
        int n = int_text(p, f->dtype, small, sizeof small);
        sb_spaces(sb, f->max_width - n);
        sb_putn(sb, small, (size_t)n);
        return;
    }
    double v = load_value(p, f->dtype);
    if (!isfinite(v)) {
        const char *s = isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
        sb_spaces(sb, f->max_width - (int64_t)strlen(s));
        sb_puts(sb, s);
        return;
    }
    int n;
    if (f->sci_mode) {
        n = snprintf(NULL, 0, "%.*e", f->precision, v);
        sb_spaces(sb, f->max_width - n);
        sb_printf(sb, "%.*e", f->precision, v);
    } else if (f->int_mode) {
        n = snprintf(NULL, 0, "%.0f", v) + 1;
        sb_spaces(sb, f->max_width - n);
        sb_printf(sb, "%.0f.", v);
    } else {
        n = snprintf(NULL, 0, "%.*f", f->precision, v);
        sb_spaces(sb, f->max_width - n);
        sb_printf(sb, "%.*f", f->precision, v);
    }
}

/* ------------------------------------------------------------------ layout */

typedef struct {
    strbuf *sb;
    const formatter *f;
    const print_opts *o;
    int64_t per_line; /* elements per line of a 1-D row */
    int64_t count;    /* elements written on the current row */
    int64_t indent;   /* of the current row */
} row_state;

static void row_item_sep(row_state *r) {
    if (r->count > 0) {
        if (r->count % r->per_line == 0) {
            sb_puts(r->sb, ",\n");
            sb_spaces(r->sb, r->indent + 1);
        } else {
            sb_puts(r->sb, ", ");
        }
    }
    r->count++;
}

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Note [Row wrapping]
 * A 1-D row holds floor((linewidth - indent) / (width + 2)) items per line, at least
 * one; the " ..." of a summary counts as an item. Rows of higher-dim tensors are
 * joined by "," plus one newline per remaining dim minus one, and indented one column
 * further per level. */
static void write_rows(strbuf *sb, const ct_tensor *t, const char *p, int dim, int64_t indent, bool summarize,
                       const formatter *f, const print_opts *o) {
    int64_t n = t->shape[dim];
    int64_t step = dim_step(t, dim);
    int64_t edge = o->edgeitems;
    bool summarized = summarized_dim(n, summarize, edge);
    bool last = dim == t->ndim - 1;
    sb_puts(sb, "[");
    if (last) {
        row_state r = {sb, f, o, 1, 0, indent};
        int64_t q = floor_div(o->linewidth - indent, f->max_width + 2);
        r.per_line = q > 1 ? q : 1;
        if (summarized) {
            for (int64_t i = 0; i < edge; i++) {
                row_item_sep(&r);
                format_elem(sb, f, p + i * step);
            }
            row_item_sep(&r);
            sb_puts(sb, " ...");
            for (int64_t i = n - edge; i < n; i++) {
                row_item_sep(&r);
                format_elem(sb, f, p + i * step);
            }
        } else {
            for (int64_t i = 0; i < n; i++) {
                row_item_sep(&r);
                format_elem(sb, f, p + i * step);
            }
        }
    } else {
        int newlines = t->ndim - dim - 1;
        bool first = true;
#define SEPARATE()                                \
    do {                                          \
        if (!first) {                             \
            sb_puts(sb, ",");                     \
            for (int k_ = 0; k_ < newlines; k_++) \
                sb_puts(sb, "\n");                \
            sb_spaces(sb, indent + 1);            \
        }                                         \
        first = false;                            \
    } while (0)
        if (summarized) {
            for (int64_t i = 0; i < edge; i++) {
                SEPARATE();
                write_rows(sb, t, p + i * step, dim + 1, indent + 1, summarize, f, o);
            }
            SEPARATE();
            sb_puts(sb, "...");
            for (int64_t i = n - edge; i < n; i++) {
                SEPARATE();
                write_rows(sb, t, p + i * step, dim + 1, indent + 1, summarize, f, o);
            }
        } else {
            for (int64_t i = 0; i < n; i++) {
                SEPARATE();
                write_rows(sb, t, p + i * step, dim + 1, indent + 1, summarize, f, o);
            }
        }
#undef SEPARATE
    }
    sb_puts(sb, "]");
}

/* ------------------------------------------------------------------ suffixes */

#define MAX_SUFFIXES 6
#define SUFFIX_CAP 256

typedef struct {
    char text[MAX_SUFFIXES][SUFFIX_CAP];
    int n;
} suffix_list;

static void size_suffix(suffix_list *s, const ct_tensor *t) {
    char *b = s->text[s->n++];
    size_t len = (size_t)snprintf(b, SUFFIX_CAP, "size=(");
    for (int i = 0; i < t->ndim; i++)
        len += (size_t)snprintf(b + len, SUFFIX_CAP - len, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    /* A one-element tuple keeps its comma, as Python writes it. */
    snprintf(b + len, SUFFIX_CAP - len, t->ndim == 1 ? ",)" : ")");
}

static void dtype_suffix(suffix_list *s, ct_dtype d) {
    snprintf(s->text[s->n++], SUFFIX_CAP, "dtype=torch.%s", ct_dtype_name(d));
}

/* Note [Suffix wrapping]
 * Suffixes follow the data after ", " while the line stays within linewidth, else
 * on a new line indented to the opening parenthesis. PyTorch measures the last line
 * as its length plus two (and the first line, having no newline before it, as its
 * length plus two as well); we keep the same arithmetic so lines break where
 * PyTorch's do. */
static void add_suffixes(strbuf *sb, const suffix_list *s, int64_t indent, const print_opts *o) {
    if (sb->failed)
        return;
    int64_t nl = -1;
    for (size_t i = sb->len; i > 0; i--)
        if (sb->p[i - 1] == '\n') {
            nl = (int64_t)i - 1;
            break;
        }
    int64_t last_line = (int64_t)sb->len - nl + 1;
    for (int i = 0; i < s->n; i++) {
        int64_t slen = (int64_t)strlen(s->text[i]);
        if (last_line + slen + 2 > o->linewidth) {
            sb_puts(sb, ",\n");
            sb_spaces(sb, indent);
            last_line = indent + slen;
        } else {
            sb_puts(sb, ", ");
            last_line += slen + 2;
        }
        sb_puts(sb, s->text[i]);
    }
    sb_puts(sb, ")");
}

/* ------------------------------------------------------------------ repr */

#define PREFIX "tensor("

static void repr_into(strbuf *sb, const ct_tensor *t, ct_device device, const print_opts *o) {
    const int64_t indent = (int64_t)strlen(PREFIX);
    ct_dtype def = ct_get_default_dtype();
    suffix_list s;
    s.n = 0;
    sb_puts(sb, PREFIX);
    if (device.type != CT_DEVICE_CPU) {
        char dev[64];
        snprintf(s.text[s.n++], SUFFIX_CAP, "device='%s'", ct_device_str(device, dev, sizeof dev));
    }
    if (device.type == CT_DEVICE_META) {
        size_suffix(&s, t);
        if (t->dtype != def)
            dtype_suffix(&s, t->dtype);
        sb_puts(sb, "...");
    } else if (t->numel == 0) {
        if (t->ndim != 1)
            size_suffix(&s, t);
        if (t->dtype != def)
            dtype_suffix(&s, t->dtype);
        sb_puts(sb, "[]");
    } else {
        bool summarize = t->numel > o->threshold;
        if (o->edgeitems == 0 && t->ndim > 0) /* Note [Summarized rows] */
            size_suffix(&s, t);
        if (t->dtype != def && t->dtype != CT_DTYPE_INT64 && t->dtype != CT_DTYPE_BOOL)
            dtype_suffix(&s, t->dtype);
        formatter f;
        formatter_init(&f, t, summarize, o);
        if (t->ndim == 0)
            format_elem(sb, &f, ct_tensor_ptr(t));
        else if (summarize && o->edgeitems == 0)
            sb_puts(sb, "[...]");
        else
            write_rows(sb, t, ct_tensor_ptr(t), 0, indent, summarize, &f, o);
    }
    if (t->requires_grad)
        snprintf(s.text[s.n++], SUFFIX_CAP, "requires_grad=True");
    add_suffixes(sb, &s, indent, o);
}

/* Builds the repr into sb; false (error set) on failure. */
static bool build_repr(const char *op, const ct_tensor *t, strbuf *sb) {
    if (ct_core_host_read(op) != CT_OK)
        return false;
    print_opts o = load_opts();
    bool ok = true;
    if (t->device.type == CT_DEVICE_CPU || t->device.type == CT_DEVICE_META || t->numel == 0) {
        repr_into(sb, t, t->device, &o);
    } else {
        /* Device memory is not readable from here: print a host copy, keep the device name. */
        ct_scope_begin();
        ct_tensor *host = ct_to_device_impl(t, CT_CPU);
        if (host) {
            host->requires_grad = t->requires_grad;
            repr_into(sb, host, t->device, &o);
        } else {
            ok = false;
        }
        ct_scope_end();
    }
    if (ok && sb->failed) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, op,
                 "could not build the text of a tensor of %lld elements (out of memory, or precision %d is "
                 "too large to format)",
                 (long long)t->numel, o.precision);
        ok = false;
    }
    if (!ok)
        free(sb->p);
    return ok;
}

int64_t ct_to_string(const ct_tensor *t, char *buf, size_t cap) {
    if (!t) {
        ct_error_null("to_string");
        return -1;
    }
    if (!buf && cap > 0) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "to_string", "buf is NULL but cap is %zu (pass cap 0 to measure)", cap);
        return -1;
    }
    strbuf sb = {0};
    if (!build_repr("to_string", t, &sb))
        return -1;
    if (cap > 0) {
        size_t n = sb.len < cap - 1 ? sb.len : cap - 1;
        if (n)
            memcpy(buf, sb.p, n);
        buf[n] = '\0';
    }
    free(sb.p);
    return (int64_t)sb.len;
}

ct_status ct_fprint(FILE *f, const ct_tensor *t) {
    if (!f)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "print", "file is NULL");
    CT_CHECK_ARG_STATUS("print", t);
    strbuf sb = {0};
    if (!build_repr("print", t, &sb))
        return ct_last_status();
    size_t wrote = fwrite(sb.p, 1, sb.len, f);
    bool ok = wrote == sb.len && fputc('\n', f) != EOF;
    free(sb.p);
    if (!ok)
        return ct_error(CT_ERROR_IO, "print", "could not write the tensor to the stream");
    return CT_OK;
}

ct_status ct_print(const ct_tensor *t) { return ct_fprint(stdout, t); }
