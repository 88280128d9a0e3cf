/* Op schemas (Note [Op schemas] in src/meta/op_schema.c, docs/dispatcher.md "Op schemas"):
 * every op has one and it parses under the notation's rules; for every op that
 * dispatches, the real calls this file makes, observed by an override at the CPU key
 * through the public ct_call accessors, have exactly the inputs, list entries, ints,
 * scalars, dtype and outputs one overload of the op's schema says. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* ------------------------------------------------------------------ the notation */

typedef enum { K_TENSOR, K_INT, K_BOOL, K_FLOAT, K_SCALAR, K_SCALAR_TYPE, K_STR, K_DEVICE } arg_kind;
typedef enum { L_NONE, L_FIXED, L_NAMED, L_REST } list_kind;

typedef struct {
    arg_kind kind;
    bool optional;      /* "T?": NULL (Tensor), CT_DTYPE_UNDEFINED (ScalarType), NULL pointer (composites) */
    list_kind list;     /* "T[N]", "T[name]", "T[]" */
    bool entries_opt;   /* "Tensor?[]": entries may be NULL */
    bool list_optional; /* "int[]?" (composites): the whole list may be NULL */
    int n;              /* L_FIXED: the length; L_NAMED: the index of the argument holding it */
    bool has_default;   /* "= value": may be left out of the call (then so are the later ones of its array) */
    char name[48];
} arg;

#define MAX_ARGS 24
#define MAX_RES 8
#define MAX_OV 4

typedef struct {
    char name[64], overload[32];
    arg args[MAX_ARGS];
    int nargs;
    arg res[MAX_RES];
    int nres;
} overload;

typedef struct {
    overload ov[MAX_OV];
    int nov;
} schema;

typedef struct {
    const char *p;
    char err[160];
} parser;

static void skip_ws(parser *ps) {
    while (*ps->p == ' ')
        ps->p++;
}

static bool ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static bool parse_error(parser *ps, const char *what) {
    if (!ps->err[0])
        snprintf(ps->err, sizeof ps->err, "%s at \"%.20s\"", what, ps->p);
    return false;
}

static bool ident(parser *ps, char *out, size_t cap) {
    skip_ws(ps);
    size_t n = 0;
    while (ident_char(*ps->p) && n + 1 < cap)
        out[n++] = *ps->p++;
    out[n] = '\0';
    return n > 0 && !(out[0] >= '0' && out[0] <= '9') ? true : parse_error(ps, "expected a name");
}

static bool expect(parser *ps, const char *tok) {
    skip_ws(ps);
    size_t n = strlen(tok);
    if (strncmp(ps->p, tok, n) != 0)
        return parse_error(ps, tok);
    ps->p += n;
    return true;
}

static bool accept(parser *ps, char c) {
    skip_ws(ps);
    if (*ps->p != c)
        return false;
    ps->p++;
    return true;
}

/* type: base ['?'] ['[' [N | name] ']' ['?']]; names of lengths are resolved later */
static bool parse_type(parser *ps, arg *a, char *len_name, size_t cap) {
    static const struct {
        const char *name;
        arg_kind kind;
    } bases[] = {{"Tensor", K_TENSOR}, {"int", K_INT},       {"bool", K_BOOL}, {"float", K_FLOAT},
                 {"Scalar", K_SCALAR}, {"ScalarType", K_SCALAR_TYPE}, {"str", K_STR},   {"Device", K_DEVICE}};
    char base[32];
    if (!ident(ps, base, sizeof base))
        return false;
    size_t i = 0;
    while (i < sizeof bases / sizeof bases[0] && strcmp(bases[i].name, base) != 0)
        i++;
    if (i == sizeof bases / sizeof bases[0])
        return parse_error(ps, "unknown type");
    a->kind = bases[i].kind;
    a->optional = accept(ps, '?');
    len_name[0] = '\0';
    if (accept(ps, '[')) {
        a->entries_opt = a->optional;
        a->optional = false;
        skip_ws(ps);
        if (*ps->p >= '0' && *ps->p <= '9') {
            a->list = L_FIXED;
            a->n = (int)strtol(ps->p, (char **)&ps->p, 10);
        } else if (ident_char(*ps->p)) {
            a->list = L_NAMED;
            if (!ident(ps, len_name, cap))
                return false;
        } else {
            a->list = L_REST;
        }
        if (!expect(ps, "]"))
            return false;
        a->list_optional = accept(ps, '?');
    }
    return true;
}

static bool parse_overload(parser *ps, overload *o) {
    memset(o, 0, sizeof *o);
    if (!ident(ps, o->name, sizeof o->name))
        return false;
    if (accept(ps, '.') && !ident(ps, o->overload, sizeof o->overload))
        return false;
    if (!expect(ps, "("))
        return false;
    char len_names[MAX_ARGS][48];
    if (!accept(ps, ')')) {
        do {
            if (o->nargs == MAX_ARGS)
                return parse_error(ps, "too many arguments");
            arg *a = &o->args[o->nargs];
            if (!parse_type(ps, a, len_names[o->nargs], sizeof len_names[0]) || !ident(ps, a->name, sizeof a->name))
                return false;
            if (accept(ps, '=')) { /* a default: a number, a name, None or 'text' */
                skip_ws(ps);
                a->has_default = true;
                const char *start = ps->p;
                if (*ps->p == '\'') {
                    ps->p++;
                    while (*ps->p && *ps->p != '\'')
                        ps->p++;
                    if (!accept(ps, '\''))
                        return parse_error(ps, "unterminated string");
                } else {
                    while (ident_char(*ps->p) || *ps->p == '-' || *ps->p == '.')
                        ps->p++;
                }
                if (ps->p == start)
                    return parse_error(ps, "expected a default value");
            }
            o->nargs++;
        } while (accept(ps, ','));
        if (!expect(ps, ")"))
            return false;
    }
    if (!expect(ps, "->"))
        return false;
    bool many = accept(ps, '(');
    if (!many || !accept(ps, ')')) {
        do {
            if (o->nres == MAX_RES)
                return parse_error(ps, "too many results");
            arg *r = &o->res[o->nres++];
            char dummy[48];
            if (!parse_type(ps, r, dummy, sizeof dummy))
                return false;
            skip_ws(ps);
            if (ident_char(*ps->p) && !ident(ps, r->name, sizeof r->name))
                return false;
        } while (many && accept(ps, ','));
        if (many && !expect(ps, ")"))
            return false;
    }
    /* lengths named by another argument: an earlier plain int */
    for (int i = 0; i < o->nargs; i++) {
        if (o->args[i].list != L_NAMED)
            continue;
        int j = 0;
        while (j < i && strcmp(o->args[j].name, len_names[i]) != 0)
            j++;
        if (j == i || o->args[j].kind != K_INT || o->args[j].list != L_NONE) {
            snprintf(ps->err, sizeof ps->err, "the length of %s names no earlier int argument", o->args[i].name);
            return false;
        }
        o->args[i].n = j;
    }
    return true;
}

static bool parse_schema(const char *text, schema *s, char *err, size_t cap) {
    parser ps = {.p = text};
    memset(s, 0, sizeof *s);
    do {
        if (s->nov == MAX_OV || !parse_overload(&ps, &s->ov[s->nov]))
            break;
        s->nov++;
    } while (accept(&ps, ';'));
    skip_ws(&ps);
    if (!ps.err[0] && *ps.p)
        parse_error(&ps, "unexpected text");
    snprintf(err, cap, "%s", ps.err);
    return !ps.err[0];
}

/* Which array (or field) an argument fills in a ct_call. */
typedef enum { A_IN, A_LIST, A_INTS, A_SCALARS, A_DTYPE, A_DEVICE, A_NONE } call_array;

static call_array array_of(const arg *a) {
    switch (a->kind) {
    case K_TENSOR: return a->list == L_NONE ? A_IN : A_LIST;
    case K_INT:
    case K_BOOL: return A_INTS;
    case K_FLOAT:
    case K_SCALAR: return a->list == L_NONE ? A_SCALARS : A_NONE;
    case K_SCALAR_TYPE: return A_DTYPE;
    case K_DEVICE: return a->list == L_NONE ? A_DEVICE : A_NONE;
    default: return A_NONE;
    }
}

/* The rules a schema follows beyond its grammar (docs/dispatcher.md); dispatched: the
 * op has kernels, so every argument must have a place in the call. */
static const char *check_rules(const char *opname, const overload *o, bool dispatched) {
    static char msg[200];
    if (strcmp(o->name, opname) != 0) {
        snprintf(msg, sizeof msg, "overload named %s, not %s", o->name, opname);
        return msg;
    }
    int nlist = 0, ndtype = 0, ndevice = 0, nrest = 0, nnamed = 0;
    bool defaulted[A_NONE + 1] = {false};
    for (int i = 0; i < o->nargs; i++) {
        const arg *a = &o->args[i];
        for (int j = 0; j < i; j++)
            if (strcmp(o->args[j].name, a->name) == 0)
                return "two arguments of one name";
        call_array arr = array_of(a);
        nlist += arr == A_LIST;
        ndtype += arr == A_DTYPE;
        ndevice += arr == A_DEVICE;
        nrest += a->list == L_REST && arr == A_INTS;
        nnamed += a->list == L_NAMED;
        if (a->has_default)
            defaulted[arr] = true;
        else if (defaulted[arr])
            return "an argument without a default after one with a default in the same array";
        if (a->has_default && a->list != L_NONE)
            return "a list with a default";
        if (!dispatched)
            continue;
        if (arr == A_NONE || a->list_optional)
            return "an argument kind that has no place in a ct_call";
        if (a->optional && arr != A_IN && arr != A_DTYPE)
            return "an optional argument that is neither a Tensor nor a ScalarType";
        if (a->entries_opt && arr != A_LIST)
            return "optional entries in a list that is not Tensor[]";
        if (arr == A_LIST && a->list != L_REST)
            return "a Tensor[] with a length";
    }
    if (nlist > 1 || ndtype > 1 || ndevice > 1)
        return "more than one Tensor[], ScalarType or Device";
    if (nrest && nnamed)
        return "int[] and int[name] in one overload";
    if (o->nres == 0 && dispatched)
        return "no result";
    for (int i = 0; i < o->nres && dispatched; i++)
        if (o->res[i].kind != K_TENSOR || o->res[i].list != L_NONE)
            return "a result that is not a Tensor";
    return NULL;
}

/* ------------------------------------------------------------------ observed calls */

#define MAX_SEEN_INTS 64
#define MAX_SEEN_LIST 64

typedef struct {
    ct_op op;
    int nin, nlist, nints, nscalars, nout;
    bool in_null[8], list_null[MAX_SEEN_LIST], out_null[8];
    int64_t ints[MAX_SEEN_INTS];
    ct_dtype dtype;
    bool has_device;
    bool ok; /* the kernel succeeded: the outputs were checked too */
} observation;

/* Whether obs fits overload o; NULL if it does, else what differs. */
static const char *match(const overload *o, const observation *ob) {
    static char msg[200];
    int ntensor = 0, nscal = 0, first_default_scal = -1;
    bool has_list = false, list_entries_opt = false;
    const arg *dtype_arg = NULL, *device_arg = NULL;
    for (int i = 0; i < o->nargs; i++) {
        const arg *a = &o->args[i];
        switch (array_of(a)) {
        case A_IN:
            if (ntensor < ob->nin && !a->optional && ob->in_null[ntensor]) {
                snprintf(msg, sizeof msg, "input %d (%s) is NULL", ntensor, a->name);
                return msg;
            }
            ntensor++;
            break;
        case A_LIST: has_list = true, list_entries_opt = a->entries_opt; break;
        case A_SCALARS:
            if (a->has_default && first_default_scal < 0)
                first_default_scal = nscal;
            nscal++;
            break;
        case A_DTYPE: dtype_arg = a; break;
        case A_DEVICE: device_arg = a; break;
        default: break;
        }
    }
    if (ob->nin != ntensor) {
        snprintf(msg, sizeof msg, "%d inputs, the schema has %d", ob->nin, ntensor);
        return msg;
    }
    if (!has_list && ob->nlist != 0)
        return "a tensor list the schema does not have";
    for (int i = 0; i < ob->nlist && i < MAX_SEEN_LIST && !list_entries_opt; i++)
        if (ob->list_null[i])
            return "a NULL entry in a Tensor[] (not Tensor?[])";
    if (ob->nscalars != nscal && !(first_default_scal >= 0 && ob->nscalars >= first_default_scal &&
                                   ob->nscalars < nscal)) {
        snprintf(msg, sizeof msg, "%d scalars, the schema has %d", ob->nscalars, nscal);
        return msg;
    }
    if (!dtype_arg && ob->dtype != CT_DTYPE_UNDEFINED)
        return "a dtype the schema does not have";
    if (dtype_arg && !dtype_arg->optional && ob->dtype == CT_DTYPE_UNDEFINED)
        return "no dtype for a ScalarType";
    if (!device_arg && ob->has_device)
        return "a device the schema does not have";
    if (device_arg && !ob->has_device)
        return "no device for a Device";
    /* ints: in order; a length named by an earlier int is that int's value; the int[]
     * lists share what the others leave; a call may stop before a defaulted int */
    int pos = 0, nrest = 0;
    int64_t value[MAX_ARGS];
    bool may_stop = false, stopped = false;
    for (int i = 0; i < o->nargs && !stopped; i++) {
        const arg *a = &o->args[i];
        if (array_of(a) != A_INTS)
            continue;
        if (a->has_default && pos == ob->nints) {
            may_stop = stopped = true;
            break;
        }
        switch (a->list) {
        case L_NONE:
            value[i] = pos < ob->nints && pos < MAX_SEEN_INTS ? ob->ints[pos] : 0;
            pos++;
            break;
        case L_FIXED: pos += a->n; break;
        case L_NAMED:
            if (value[a->n] < 0 || value[a->n] > MAX_SEEN_INTS) {
                snprintf(msg, sizeof msg, "length %s = %lld out of range", o->args[a->n].name, (long long)value[a->n]);
                return msg;
            }
            pos += (int)value[a->n];
            break;
        case L_REST: nrest++; break;
        }
    }
    (void)may_stop;
    if (nrest) {
        int left = ob->nints - pos;
        if (left < 0 || left % nrest != 0) {
            snprintf(msg, sizeof msg, "%d ints do not fit %d fixed and %d int[] of one length", ob->nints, pos, nrest);
            return msg;
        }
    } else if (pos != ob->nints) {
        snprintf(msg, sizeof msg, "%d ints, the schema has %d", ob->nints, pos);
        return msg;
    }
    if (!ob->ok)
        return NULL;
    int required = 0;
    for (int i = 0; i < o->nres; i++)
        if (!o->res[i].optional)
            required = i + 1;
    if (ob->nout < required || ob->nout > o->nres) {
        snprintf(msg, sizeof msg, "%d outputs, the schema has %d (%d required)", ob->nout, o->nres, required);
        return msg;
    }
    for (int i = 0; i < ob->nout && i < 8; i++)
        if (!o->res[i].optional && ob->out_null[i]) {
            snprintf(msg, sizeof msg, "output %d is NULL", i);
            return msg;
        }
    return NULL;
}

static schema schemas[CT_OP_COUNT];
static int seen_ok[CT_OP_COUNT], seen[CT_OP_COUNT];
static int nfailures;

/* A call that fits no overload: printed at once (the test fails at its end). */
static void report(const char *fmt, ...) {
    nfailures++;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

static void check_observation(const observation *ob) {
    const schema *s = &schemas[ob->op];
    const char *why = "no schema";
    for (int i = 0; i < s->nov; i++) {
        const char *w = match(&s->ov[i], ob);
        if (!w) {
            seen[ob->op]++;
            seen_ok[ob->op] += ob->ok;
            return;
        }
        if (i == 0)
            why = w;
    }
    report("%s: nin %d, nlist %d, nints %d, nscalars %d, dtype %d, device %d, nout %d (%s) fits no overload of "
           "\"%s\": %s\n",
           ct_op_name(ob->op), ob->nin, ob->nlist, ob->nints, ob->nscalars, (int)ob->dtype, ob->has_device, ob->nout,
           ob->ok ? "ok" : "failed", ct_op_schema(ob->op), why);
}

/* The override at CPU of every op with kernels: reads the call, runs the kernel it
 * stands in front of, reads the outputs, checks. */
static ct_status observe(ct_keyset ks, ct_call *call, void *ud) {
    (void)ud;
    observation ob = {.op = ct_call_op(call)};
    ob.nin = ct_call_num_inputs(call);
    for (int i = 0; i < ob.nin && i < 8; i++)
        ob.in_null[i] = ct_call_input(call, i) == NULL;
    ob.nlist = ct_call_num_list(call);
    for (int i = 0; i < ob.nlist && i < MAX_SEEN_LIST; i++)
        ob.list_null[i] = ct_call_list_entry(call, i) == NULL;
    ob.nints = ct_call_num_ints(call);
    for (int i = 0; i < ob.nints && i < MAX_SEEN_INTS; i++)
        ob.ints[i] = ct_call_int(call, i);
    ob.nscalars = ct_call_num_scalars(call);
    ob.dtype = ct_call_dtype(call);
    ob.has_device = ct_call_has_device(call);
    ct_status st = ct_call_next(ks, call);
    ob.ok = st == CT_OK;
    ob.nout = ct_call_num_outputs(call);
    for (int i = 0; i < ob.nout && i < 8; i++)
        ob.out_null[i] = ct_call_output(call, i) == NULL;
    check_observation(&ob);
    return st;
}

/* ------------------------------------------------------------------ tests */

static bool dispatched(ct_op op) { return ct_op_has_kernel(op, CT_KEY_CPU); }

static void test_every_op_has_a_schema(void **state) {
    (void)state;
    int ndispatched = 0, noverloads = 0;
    for (ct_op op = 0; op < CT_OP_COUNT; op++) {
        const char *text = ct_op_schema(op);
        if (!text)
            fail_msg("%s has no schema (a CT_SCHEMA line after its row in ops.def?)", ct_op_name(op));
        schema s;
        char err[160];
        if (!parse_schema(text, &s, err, sizeof err))
            fail_msg("%s: schema \"%s\" does not parse: %s", ct_op_name(op), text, err);
        for (int i = 0; i < s.nov; i++) {
            const char *why = check_rules(ct_op_name(op), &s.ov[i], dispatched(op));
            if (why)
                fail_msg("%s: schema \"%s\": %s", ct_op_name(op), text, why);
        }
        ndispatched += dispatched(op);
        noverloads += s.nov;
    }
    assert_true(ndispatched > 150);
    assert_true(noverloads > CT_OP_COUNT);
    assert_null(ct_op_schema(-1));
    assert_null(ct_op_schema(CT_OP_COUNT));
    assert_string_equal(ct_op_schema(CT_OP_add), "add(Tensor self, Tensor other, Scalar alpha=1) -> Tensor");
    assert_string_equal(ct_op_schema(CT_OP_tril), "tril(Tensor self, int diagonal) -> Tensor");
}

/* The parser refuses what the rules forbid. */
static void test_schema_rules(void **state) {
    (void)state;
    schema s;
    char err[160];
    static const char *const bad_syntax[] = {
        "f(Tensor self) Tensor", "f(Tensorx self) -> Tensor", "f(Tensor self,) -> Tensor",
        "f(int[n] x) -> Tensor", "f(Tensor self) -> Tensor;", "f(int x='a) -> Tensor",
    };
    for (size_t i = 0; i < sizeof bad_syntax / sizeof bad_syntax[0]; i++)
        if (parse_schema(bad_syntax[i], &s, err, sizeof err))
            fail_msg("\"%s\" parsed", bad_syntax[i]);
    static const char *const bad_rules[] = {
        "f(Tensor self, str mode) -> Tensor",           "f(Tensor self, int x=1, int y) -> Tensor",
        "f(Tensor self, float? x) -> Tensor",           "f(Tensor[] a, Tensor[] b) -> Tensor",
        "f(Tensor self, int[] a, int n, int[n] b) -> Tensor", "f(Tensor self) -> bool",
        "f(Tensor self, int[]? dims) -> Tensor",        "g(Tensor self) -> Tensor",
        "f(Tensor self, Tensor self) -> Tensor",        "f(int[] size, Device? device) -> Tensor",
        "f(Device a, Device b) -> Tensor",              "f(Device[] devices) -> Tensor",
    };
    for (size_t i = 0; i < sizeof bad_rules / sizeof bad_rules[0]; i++) {
        if (!parse_schema(bad_rules[i], &s, err, sizeof err))
            fail_msg("\"%s\" does not parse: %s", bad_rules[i], err);
        if (!check_rules("f", &s.ov[0], true))
            fail_msg("\"%s\" passed the rules", bad_rules[i]);
    }
    /* the layout rules on a hand-made call */
    assert_true(parse_schema("f(Tensor self, Tensor? w, bool keep, int n, int[n] d, Scalar a=1) -> (Tensor, Tensor? i)",
                             &s, err, sizeof err));
    observation ob = {.nin = 2, .nints = 4, .ints = {1, 2, 0, 1}, .nscalars = 0, .dtype = CT_DTYPE_UNDEFINED,
                      .ok = true, .nout = 1, .in_null = {false, true}};
    assert_null(match(&s.ov[0], &ob));
    ob.nscalars = 1, ob.nout = 2;
    assert_null(match(&s.ov[0], &ob));
    ob.nints = 5; /* one int too many for n = 2 */
    assert_non_null(match(&s.ov[0], &ob));
    ob.nints = 4, ob.in_null[0] = true; /* self is not optional */
    assert_non_null(match(&s.ov[0], &ob));
    ob.in_null[0] = false, ob.nout = 3;
    assert_non_null(match(&s.ov[0], &ob));
    ob.nout = 2, ob.dtype = CT_F32; /* no ScalarType */
    assert_non_null(match(&s.ov[0], &ob));
    assert_true(parse_schema("f(Tensor self, int[] size, int[] stride, int offset) -> Tensor", &s, err, sizeof err));
    observation v = {.nin = 1, .nints = 7, .dtype = CT_DTYPE_UNDEFINED, .ok = true, .nout = 1};
    assert_null(match(&s.ov[0], &v));
    v.nints = 6;
    assert_non_null(match(&s.ov[0], &v));
    /* a Device is the call's device, there or not */
    assert_true(parse_schema("f(int[] size, ScalarType? dtype, Device device) -> Tensor", &s, err, sizeof err));
    assert_null(check_rules("f", &s.ov[0], true));
    observation f = {.nints = 2, .dtype = CT_DTYPE_UNDEFINED, .has_device = true, .ok = true, .nout = 1};
    assert_null(match(&s.ov[0], &f));
    f.has_device = false;
    assert_non_null(match(&s.ov[0], &f));
    assert_true(parse_schema("f(Tensor self) -> Tensor", &s, err, sizeof err));
    observation g = {.nin = 1, .dtype = CT_DTYPE_UNDEFINED, .has_device = true, .ok = true, .nout = 1};
    assert_non_null(match(&s.ov[0], &g));
}

static ct_tensor *f32(const int64_t *shape, int ndim) {
    ct_tensor *t = ct_arange(ct_scalar_float(0.1), ct_scalar_float(0.1 + 0.1 * 64), ct_scalar_float(0.1), CT_F32, CT_CPU);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return ct_reshape(ct_narrow(t, 0, 0, n), shape, ndim);
}

/* the op's calls, with float32, then int64, then bool inputs until one of them
 * succeeds (its kernel refuses some dtypes) */
static ct_tensor *input_of(int attempt, const int64_t *shape, int ndim) {
    ct_tensor *x = f32(shape, ndim);
    if (attempt == 1)
        return ct_add_scalar(ct_to_dtype(ct_mul_scalar(x, ct_scalar_int(10)), CT_I64), ct_scalar_int(1));
    if (attempt == 2)
        return ct_gt_scalar(x, ct_scalar_float(0.3));
    return x;
}

#define S23 CT_SHAPE(2, 3)
#define EMPTY(t) ct_empty(CT_SHAPE(0), ct_tensor_dtype(t), CT_CPU)
#define ATTEMPTS(name)                                                        \
    for (int attempt = 0, before = seen_ok[CT_OP_##name];                    \
         attempt < 3 && (attempt == 0 || seen_ok[CT_OP_##name] == before); attempt++)

#define DRIVE_UNARY(n)                             \
    ATTEMPTS(n) {                                  \
        ct_tensor *x = input_of(attempt, S23);     \
        ct_##n(x);                                 \
        ct_##n##_(ct_clone(x));                    \
        ct_##n##_out(x, EMPTY(x));                 \
    }
#define DRIVE_BINARY(n)                                \
    ATTEMPTS(n) {                                      \
        ct_tensor *x = input_of(attempt, S23);         \
        ct_tensor *y = input_of(attempt, CT_SHAPE(3)); \
        ct_##n(x, y);                                  \
        ct_##n##_(ct_clone(x), y);                     \
        ct_##n##_out(x, y, EMPTY(x));                  \
        ct_##n##_scalar(x, ct_scalar_int(2));          \
        ct_##n##_scalar_(ct_clone(x), ct_scalar_int(2)); \
    }
#define DRIVE_BINARY_ALPHA(n)                                  \
    DRIVE_BINARY(n) {                                          \
        ct_tensor *x = input_of(0, S23);                       \
        ct_##n##_alpha(x, x, ct_scalar_float(0.5));            \
        ct_##n##_alpha_(ct_clone(x), x, ct_scalar_int(2));     \
        ct_##n##_alpha_out(x, x, ct_scalar_int(2), EMPTY(x));  \
    }
#define DRIVE_BINARY_PLAIN(n)                                                  \
    {                                                                          \
        ct_tensor *m = f32(S23), *mt = f32(CT_SHAPE(3, 2)), *v = f32(CT_SHAPE(3)); \
        ct_tensor *b = f32(CT_SHAPE(2, 2, 3)), *bt = f32(CT_SHAPE(2, 3, 2));   \
        ct_##n(m, mt);                                                         \
        ct_##n(b, bt);                                                         \
        ct_##n(v, v);                                                          \
        ct_##n##_out(m, mt, EMPTY(m));                                         \
        ct_##n##_out(b, bt, EMPTY(m));                                         \
        ct_##n##_out(v, v, EMPTY(m));                                          \
    }
#define DRIVE_CUSTOM(n)
#define DIMS CT_INDEX(1), 1
#define DRIVE_REDUCE_DT(n)                                        \
    ATTEMPTS(n) {                                                 \
        ct_tensor *x = input_of(attempt, S23);                    \
        ct_##n(x, DIMS, true, CT_DTYPE_UNDEFINED);                \
        ct_##n(x, NULL, 0, false, CT_F64);                        \
        ct_##n##_out(x, DIMS, false, CT_DTYPE_UNDEFINED, EMPTY(x)); \
    }
#define DRIVE_REDUCE(n)                         \
    ATTEMPTS(n) {                               \
        ct_tensor *x = input_of(attempt, S23);  \
        ct_##n(x, DIMS, true);                  \
        ct_##n(x, NULL, 0, false);              \
        ct_##n##_out(x, DIMS, false, EMPTY(x)); \
    }
#define DRIVE_COUNT(n)                         \
    ATTEMPTS(n) {                              \
        ct_tensor *x = input_of(attempt, S23); \
        ct_##n(x, DIMS);                       \
        ct_##n(x, NULL, 0);                    \
    }
#define DRIVE_VAR(n)                                 \
    ATTEMPTS(n) {                                    \
        ct_tensor *x = input_of(attempt, S23);       \
        ct_##n(x, DIMS, 1.0, true);                  \
        ct_##n##_out(x, NULL, 0, 0.0, false, EMPTY(x)); \
    }
#define DRIVE_VAR_MEAN(n)                      \
    ATTEMPTS(n) {                              \
        ct_tensor *x = input_of(attempt, S23); \
        ct_tensor *r0, *r1;                    \
        ct_##n(x, DIMS, 1.0, false, &r0, &r1); \
    }
#define DRIVE_MINMAX(n)                                                             \
    ATTEMPTS(n) {                                                                   \
        ct_tensor *x = input_of(attempt, S23), *v, *i;                              \
        ct_##n(x);                                                                  \
        ct_##n##_dim(x, 1, false, &v, &i);                                          \
        ct_##n##_dim_out(x, 0, true, EMPTY(x), ct_empty(CT_SHAPE(0), CT_I64, CT_CPU)); \
    }
#define DRIVE_ARG(n)                                                         \
    ATTEMPTS(n) {                                                            \
        ct_tensor *x = input_of(attempt, S23);                               \
        ct_##n(x);                                                           \
        ct_##n##_dim(x, 1, true);                                            \
        ct_##n##_dim_out(x, 0, false, ct_empty(CT_SHAPE(0), CT_I64, CT_CPU)); \
    }
#define DRIVE_NORM(n)                                           \
    ATTEMPTS(n) {                                               \
        ct_tensor *x = input_of(attempt, S23);                  \
        ct_##n(x, 2.0, DIMS, false, CT_DTYPE_UNDEFINED);        \
        ct_##n(x, 1.0, NULL, 0, true, CT_F64);                  \
        ct_##n##_out(x, 3.0, DIMS, false, CT_DTYPE_UNDEFINED, EMPTY(x)); \
    }
#define DRIVE_SCAN_DT(n)                                      \
    ATTEMPTS(n) {                                             \
        ct_tensor *x = input_of(attempt, S23);                \
        ct_##n(x, 1, CT_DTYPE_UNDEFINED);                     \
        ct_##n(x, 0, CT_F64);                                 \
        ct_##n##_out(x, 1, CT_DTYPE_UNDEFINED, EMPTY(x));     \
    }
#define DRIVE_SCAN_IDX(n)                                                          \
    ATTEMPTS(n) {                                                                  \
        ct_tensor *x = input_of(attempt, S23), *v, *i;                             \
        ct_##n(x, 1, &v, &i);                                                      \
        ct_##n##_out(x, 0, EMPTY(x), ct_empty(CT_SHAPE(0), CT_I64, CT_CPU));       \
    }
#define DRIVE_UNARY_FN(n)                      \
    ATTEMPTS(n) {                              \
        ct_tensor *x = input_of(attempt, S23); \
        ct_##n(x);                             \
    }
#define DRIVE_UNARY_D1(n)                         \
    ATTEMPTS(n) {                                 \
        ct_tensor *x = input_of(attempt, S23);    \
        ct_##n(x, 0.25);                          \
        ct_##n##_(ct_clone(x), 0.25);             \
        ct_##n##_out(x, 0.25, EMPTY(x));          \
    }
#define DRIVE_UNARY_D2(n)                         \
    ATTEMPTS(n) {                                 \
        ct_tensor *x = input_of(attempt, S23);    \
        ct_##n(x, 0.5, 2.0);                      \
        ct_##n##_(ct_clone(x), 0.5, 2.0);         \
        ct_##n##_out(x, 0.5, 2.0, EMPTY(x));      \
    }
#define DRIVE_UNARY_D3(n)                          \
    ATTEMPTS(n) {                                  \
        ct_tensor *x = input_of(attempt, S23);     \
        ct_##n(x, 1.0, 1.0, 1.0);                  \
        ct_##n##_(ct_clone(x), 1.0, 1.0, 1.0);     \
        ct_##n##_out(x, 1.0, 1.0, 1.0, EMPTY(x));  \
    }
#define DRIVE_UNARY_OPT_D3(n)                          \
    ATTEMPTS(n) {                                      \
        ct_tensor *x = input_of(attempt, S23);         \
        double v = 5.0;                                \
        ct_##n(x, NULL, NULL, NULL);                   \
        ct_##n##_(ct_clone(x), &v, NULL, &v);          \
        ct_##n##_out(x, NULL, &v, NULL, EMPTY(x));     \
    }
#define DRIVE_UNARY_INT(n)                     \
    ATTEMPTS(n) {                              \
        ct_tensor *x = input_of(attempt, S23); \
        ct_##n(x, 1);                          \
        ct_##n##_(ct_clone(x), 1);             \
        ct_##n##_out(x, 1, EMPTY(x));          \
    }
#define DRIVE_UNARY_DECIMALS(n)                   \
    DRIVE_UNARY(n) {                              \
        ct_tensor *x = input_of(0, S23);          \
        ct_##n##_decimals(x, 1);                  \
        ct_##n##_decimals_(ct_clone(x), 1);       \
        ct_##n##_decimals_out(x, 1, EMPTY(x));    \
    }
#define DRIVE_BINARY_MODE(n)                                                  \
    DRIVE_BINARY(n) {                                                         \
        ct_tensor *x = input_of(0, S23);                                      \
        ct_##n##_mode(x, x, CT_ROUNDING_MODE_FLOOR);                          \
        ct_##n##_mode_(ct_clone(x), x, CT_ROUNDING_MODE_TRUNC);               \
        ct_##n##_mode_out(x, x, CT_ROUNDING_MODE_NONE, EMPTY(x));             \
        ct_##n##_scalar_mode(x, ct_scalar_int(2), CT_ROUNDING_MODE_FLOOR);    \
        ct_##n##_scalar_mode_(ct_clone(x), ct_scalar_int(2), CT_ROUNDING_MODE_FLOOR); \
    }
#define DRIVE_TERNARY(n)                                                   \
    ATTEMPTS(n) {                                                          \
        ct_tensor *x = input_of(attempt, S23);                             \
        ct_##n(x, x, x);                                                   \
        ct_##n##_(ct_clone(x), x, x);                                      \
        ct_##n##_out(x, x, x, EMPTY(x));                                   \
        ct_##n##_scalar(x, x, ct_scalar_float(0.5));                       \
        ct_##n##_scalar_(ct_clone(x), x, ct_scalar_float(0.5));            \
        ct_##n##_scalar_out(x, x, ct_scalar_float(0.5), EMPTY(x));         \
    }
#define DRIVE_TERNARY_VALUE(n)                                    \
    ATTEMPTS(n) {                                                 \
        ct_tensor *x = input_of(attempt, S23);                    \
        ct_##n(x, x, x, ct_scalar_int(2));                        \
        ct_##n##_(ct_clone(x), x, x, ct_scalar_int(2));           \
        ct_##n##_out(x, x, x, ct_scalar_int(2), EMPTY(x));        \
    }
#define DRIVE_CLAMP(n)                                                  \
    ATTEMPTS(n) {                                                       \
        ct_tensor *x = input_of(attempt, S23);                          \
        ct_scalar lo = ct_scalar_float(0.2), hi = ct_scalar_int(1);     \
        ct_##n(x, &lo, &hi);                                            \
        ct_##n##_(ct_clone(x), NULL, &hi);                              \
        ct_##n##_out(x, &lo, NULL, EMPTY(x));                           \
        ct_##n##_tensor(x, x, NULL);                                    \
        ct_##n##_tensor_(ct_clone(x), NULL, x);                         \
        ct_##n##_tensor_out(x, x, x, EMPTY(x));                         \
    }
#define DRIVE_WHERE(n)                                                       \
    ATTEMPTS(n) {                                                            \
        ct_tensor *x = input_of(attempt, S23), *c = input_of(2, S23);        \
        ct_##n(c, x, x);                                                     \
        ct_##n##_out(c, x, x, EMPTY(x));                                     \
        ct_##n##_scalar_self(c, ct_scalar_int(1), x);                        \
        ct_##n##_scalar_other(c, x, ct_scalar_int(1));                       \
        ct_##n##_scalars(c, ct_scalar_int(1), ct_scalar_float(2.5));         \
    }

/* The ops of the generated classes: every function of each. */
static void drive_generated_classes(void) {
#define CT_OP(name, sig, family, flags)      \
    {                                        \
        ct_scope_begin();                    \
        DRIVE_##sig(name) ct_clear_error();  \
        ct_scope_end();                      \
    }
#include "ctorch/ops.def"
#undef CT_OP
}

static ct_tensor *i64(const int64_t *values, int n, const int64_t *shape, int ndim) {
    ct_tensor *t = ct_empty(shape, ndim, CT_I64, CT_CPU);
    int64_t *p = ct_tensor_data(t);
    for (int i = 0; i < n; i++)
        p[i] = values[i];
    return t;
}

/* The CUSTOM ops, views and copies: each public function that packs a call. */
static void drive_custom_ops(void) {
    ct_scope_begin();
    ct_tensor *x = f32(S23), *x32 = f32(CT_SHAPE(3, 2)), *c22 = f32(CT_SHAPE(2, 2)), *r, *r2, *r3;
    ct_tensor *img = f32(CT_SHAPE(1, 1, 4, 4)), *k33 = f32(CT_SHAPE(1, 1, 3, 3)), *bias = f32(CT_SHAPE(1));
    ct_tensor *idx0 = i64(CT_INDEX(0), 1, CT_SHAPE(1)), *idx2 = i64(CT_INDEX(0, 2), 2, CT_SHAPE(2, 1));
    ct_tensor *mask = ct_gt_scalar(x, ct_scalar_float(0.3)), *src = f32(CT_SHAPE(2, 1)), *row = f32(CT_SHAPE(1, 3));
    /* linear algebra */
    ct_addmm(c22, x, x32, ct_scalar_int(1), ct_scalar_float(0.5));
    ct_baddbmm(f32(CT_SHAPE(2, 2, 2)), f32(CT_SHAPE(2, 2, 3)), f32(CT_SHAPE(2, 3, 2)), ct_scalar_int(1), ct_scalar_int(1));
    ct_addmm_activation(c22, x, x32, ct_scalar_int(1), ct_scalar_int(1), false);
    ct_addmm_activation(c22, x, x32, ct_scalar_int(1), ct_scalar_int(1), true);
    /* convolution and pooling */
    ct_conv2d(img, k33, bias, NULL, NULL, NULL, 1);
    ct_conv2d(img, k33, NULL, CT_INDEX(1, 1), CT_INDEX(1, 1), CT_INDEX(1, 1), 1);
    ct_tensor *g22 = f32(CT_SHAPE(1, 1, 2, 2));
    ct_conv2d_backward(g22, img, k33, NULL, NULL, NULL, 1, &r, &r2, &r3);
    ct_conv2d_backward(g22, img, k33, NULL, NULL, NULL, 1, &r, &r2, NULL);
    ct_conv2d_backward(g22, img, k33, NULL, NULL, NULL, 1, &r, NULL, NULL);
    ct_conv2d_backward(g22, img, k33, NULL, NULL, NULL, 1, NULL, NULL, &r3);
    ct_tensor *pooled = ct_max_pool2d(img, CT_INDEX(2, 2), NULL, NULL, NULL, false, &r);
    ct_max_pool2d(img, CT_INDEX(2, 2), CT_INDEX(1, 1), NULL, NULL, true, NULL);
    if (pooled)
        ct_max_pool2d_backward(ct_ones_like(pooled, CT_DTYPE_UNDEFINED), img, r);
    ct_threshold_backward(x, x, ct_scalar_float(0.3));
    ct_conv_transpose2d(f32(CT_SHAPE(1, 1, 3, 3)), f32(CT_SHAPE(1, 1, 2, 2)), bias, NULL, NULL, NULL, 1, NULL);
    ct_conv_transpose2d(f32(CT_SHAPE(1, 1, 3, 3)), f32(CT_SHAPE(1, 1, 2, 2)), NULL, CT_INDEX(2, 2), NULL,
                        CT_INDEX(1, 1), 1, NULL);
    ct_avg_pool2d(img, CT_INDEX(2, 2), NULL, NULL, false, true, 0);
    ct_avg_pool2d(img, CT_INDEX(2, 2), CT_INDEX(1, 1), CT_INDEX(1, 1), true, false, 3);
    ct_avg_pool2d_backward(g22, img, CT_INDEX(2, 2), NULL, NULL, false, true, 0);
    ct_adaptive_avg_pool2d(img, CT_INDEX(2, 2));
    ct_adaptive_avg_pool2d_backward(g22, img);
    /* shape and indexing */
    const ct_tensor *two[2] = {x, x};
    ct_cat(two, 2, 0);
    ct_flip(x, CT_INDEX(0, 1), 2);
    ct_tril(x, 0);
    ct_triu(x, 1);
    ct_index_select(x, 0, idx0);
    ct_gather(x, 1, idx2);
    ct_scatter_add(x, 1, idx2, src);
    ct_scatter_add_(ct_clone(x), 1, idx2, src);
    ct_index_add(x, 0, idx0, row, ct_scalar_int(2));
    ct_masked_fill(x, mask, ct_scalar_float(1.5));
    ct_masked_fill_(ct_clone(x), mask, ct_scalar_int(0));
    ct_nonzero(x);
    ct_sort(x, 1, true, &r);
    ct_sort(x, 0, false, NULL);
    ct_topk(x, 2, 1, true, &r);
    ct_topk(x, 1, 0, false, NULL);
    /* advanced indexing */
    ct_scatter(x, 1, idx2, src);
    ct_scatter_(ct_clone(x), 1, idx2, src);
    ct_scatter_value(x, 1, idx2, ct_scalar_float(2.5));
    ct_scatter_value_(ct_clone(x), 1, idx2, ct_scalar_int(2));
    ct_scatter_reduce(x, 1, idx2, src, "amax", false);
    ct_scatter_reduce_(ct_clone(x), 1, idx2, src, "sum", true);
    ct_index_copy(x, 0, idx0, row);
    ct_index_copy_(ct_clone(x), 0, idx0, row);
    ct_index_fill(x, 1, idx0, ct_scalar_int(3));
    ct_index_fill_(ct_clone(x), 1, idx0, ct_scalar_int(3));
    const ct_tensor *ix[2] = {idx0, NULL};
    ct_index(x, ix, 2);
    ct_index(x, ix, 1);
    ct_index_put(x, ix, 2, ct_ones(CT_SHAPE(1), CT_F32, CT_CPU), true);
    ct_index_put_(ct_clone(x), ix, 1, row, false);
    ct_masked_select(x, mask);
    ct_masked_scatter(x, mask, x);
    ct_masked_scatter_(ct_clone(x), mask, x);
    ct_take(x, idx2);
    ct_kthvalue(x, 1, 1, false, &r);
    ct_kthvalue(x, 2, 0, true, NULL);
    ct_unique(x, true, &r, &r2);
    ct_unique(x, false, NULL, NULL);
    ct_unique_consecutive(x, &r, NULL);
    ct_pad(x, CT_INDEX(1, 1), 2, "constant", 0.5);
    ct_pad(img, CT_INDEX(1, 1, 1, 1), 4, "reflect", 0.0);
    ct_pad_backward(f32(CT_SHAPE(1, 1, 6, 6)), CT_SHAPE(1, 1, 4, 4), CT_INDEX(1, 1, 1, 1), 4, "reflect");
    ct_upsample(img, CT_INDEX(6, 5), 2, "bilinear", true, NULL);
    ct_upsample(f32(CT_SHAPE(1, 2, 3)), CT_INDEX(6), 1, "nearest", false, (double[]){2.0});
    ct_upsample_backward(f32(CT_SHAPE(1, 1, 6, 5)), CT_SHAPE(1, 1, 4, 4), "bicubic", false, NULL);
    /* normalization, activations, attention, embeddings, losses */
    ct_tensor *w3 = f32(CT_SHAPE(3));
    ct_rms_norm(x, CT_INDEX(3), 1, w3, -1.0);
    ct_rms_norm(x, CT_INDEX(2, 3), 2, NULL, 1e-5);
    ct_rms_norm_backward(x, x, CT_INDEX(3), 1, w3, 1e-5, &r, &r2);
    ct_rms_norm_backward(x, x, CT_INDEX(3), 1, NULL, 1e-5, &r, NULL);
    ct_layer_norm(x, CT_INDEX(3), 1, w3, w3, 1e-5);
    ct_layer_norm(x, CT_INDEX(3), 1, NULL, NULL, 1e-5);
    ct_layer_norm_backward(x, x, CT_INDEX(3), 1, w3, w3, 1e-5, &r, &r2, &r3);
    ct_layer_norm_backward(x, x, CT_INDEX(3), 1, w3, w3, 1e-5, &r, &r2, NULL);
    ct_layer_norm_backward(x, x, CT_INDEX(3), 1, NULL, NULL, 1e-5, &r, NULL, NULL);
    ct_gelu_backward(x, x, CT_GELU_APPROXIMATE_TANH);
    ct_tensor *q = f32(CT_SHAPE(1, 2, 4)), *amask = ct_ones(CT_SHAPE(2, 2), CT_BOOL, CT_CPU);
    double scale = 0.5;
    ct_scaled_dot_product_attention(q, q, q, NULL, 0.0, true, NULL);
    ct_scaled_dot_product_attention(q, q, q, amask, 0.0, false, &scale);
    ct_scaled_dot_product_attention_backward(q, q, q, q, NULL, false, NULL, &r, &r2, &r3);
    ct_scaled_dot_product_attention_backward(q, q, q, q, amask, false, &scale, &r, &r2, &r3);
    ct_tensor *fq = f32(CT_SHAPE(1, 1, 2, 4)), *fo = NULL, *fl = NULL;
    ct_flash_attention_forward(fq, fq, fq, true, NULL, &fo, &fl);
    ct_flash_attention_backward(fq, fq, fq, fq, fo, fl, false, &scale, &r, &r2, &r3);
    ct_tensor *ids = i64(CT_INDEX(0, 2), 2, CT_SHAPE(2));
    ct_embedding(ids, x32, CT_NO_PADDING_IDX);
    ct_embedding(ids, x32, 0);
    ct_embedding_backward(f32(CT_SHAPE(2, 2)), ids, 3, CT_NO_PADDING_IDX);
    ct_tensor *logp = ct_log_softmax(x, 1, CT_DTYPE_UNDEFINED);
    ct_nll_loss(logp, ids, NULL, CT_REDUCTION_MEAN, -100);
    ct_nll_loss(logp, ids, w3, CT_REDUCTION_NONE, 1);
    ct_nll_loss_backward(ct_ones(NULL, 0, CT_F32, CT_CPU), logp, ids, w3, CT_REDUCTION_SUM, -100);
    ct_tensor *lse = NULL;
    ct_cross_entropy_fused(x, ids, CT_REDUCTION_MEAN, -100, &lse);
    ct_cross_entropy_fused(x, ids, CT_REDUCTION_NONE, 2, NULL);
    ct_cross_entropy_fused_backward(ct_ones(NULL, 0, CT_F32, CT_CPU), x, ids, lse, CT_REDUCTION_MEAN, -100);
    ct_one_hot(ids, 4);
    ct_tensor *mw1 = f32(CT_SHAPE(4, 3)), *mw2 = f32(CT_SHAPE(3, 4));
    ct_gelu_mlp(x, mw1, f32(CT_SHAPE(4)), mw2, f32(CT_SHAPE(3)), CT_GELU_APPROXIMATE_TANH);
    ct_gelu_mlp(x, mw1, NULL, mw2, NULL, CT_GELU_APPROXIMATE_NONE);
    ct_tensor *mgh = NULL, *mgb = NULL;
    ct_gelu_mlp_hidden_backward(f32(CT_SHAPE(2, 3)), mw2, f32(CT_SHAPE(2, 4)), CT_GELU_APPROXIMATE_TANH, &mgh, &mgb);
    ct_gelu_mlp_hidden_backward(f32(CT_SHAPE(2, 3)), mw2, f32(CT_SHAPE(2, 4)), CT_GELU_APPROXIMATE_NONE, &mgh, NULL);
    /* fused optimizer steps: the lists as one list, all optional inputs */
    ct_tensor *fp[1] = {f32(CT_SHAPE(2))}, *fg[1] = {f32(CT_SHAPE(2))}, *fm[1] = {ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU)};
    ct_tensor *fv[1] = {ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU)}, *fx[1] = {ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU)};
    ct_tensor *fone = ct_ones(NULL, 0, CT_F32, CT_CPU), *fzero = ct_zeros(NULL, 0, CT_F32, CT_CPU);
    ct_fused_adam_(fp, 1, fg, 1, fm, 1, fv, 1, NULL, 0, NULL, 0, 1, 1e-3, 0.9, 0.999, 0, 1e-8, false, false, NULL, NULL,
                   NULL);
    ct_fused_adamw_(fp, 1, fg, 1, fm, 1, fv, 1, fx, 1, NULL, 0, 2, 1e-3, 0.9, 0.999, 0.01, 1e-8, true, true, fone,
                    fzero, fone);
    /* views and copies */
    ct_view(x, CT_SHAPE(3, 2));
    ct_reshape(x, CT_SHAPE(6));
    ct_permute(x, CT_INDEX(1, 0), 2);
    ct_transpose(x, 0, 1);
    ct_t(x);
    ct_movedim(x, 0, 1);
    ct_expand(row, CT_SHAPE(2, 3));
    ct_squeeze(row);
    ct_squeeze_dim(row, 0);
    ct_unsqueeze(x, 0);
    ct_flatten(x, 0, 1);
    ct_unflatten(f32(CT_SHAPE(6)), 0, CT_SHAPE(2, 3));
    ct_narrow(x, 1, 0, 2);
    ct_slice(x, 1, 0, 3, 2);
    ct_select(x, 0, 1);
    ct_unfold(x, 1, 2, 1);
    ct_diagonal(x, 0, 0, 1);
    ct_as_strided(x, CT_INDEX(2, 2), CT_INDEX(3, 1), 2, 1);
    ct_alias(x);
    ct_clone(x);
    ct_contiguous(ct_t(x));
    ct_to_dtype(x, CT_F64);
    ct_copy_(ct_empty(S23, CT_F64, CT_CPU), x);
    /* factories, random ops, fills, device moves */
    ct_empty(S23, CT_F32, CT_CPU);
    ct_empty(NULL, 0, CT_I64, CT_CPU);
    ct_empty_strided(CT_INDEX(2, 3), CT_INDEX(1, 2), 2, CT_F32, CT_CPU);
    ct_empty_like(x, CT_DTYPE_UNDEFINED);
    ct_zeros(S23, CT_F32, CT_CPU);
    ct_ones(CT_SHAPE(4), CT_DTYPE_UNDEFINED, CT_CPU);
    ct_full(S23, ct_scalar_float(2.5), CT_DTYPE_UNDEFINED, CT_CPU);
    ct_full_like(x, ct_scalar_int(3), CT_I64);
    ct_scalar_tensor(ct_scalar_bool(true), CT_DTYPE_UNDEFINED, CT_CPU);
    ct_arange(ct_scalar_int(0), ct_scalar_int(5), ct_scalar_int(1), CT_DTYPE_UNDEFINED, CT_CPU);
    ct_arange(ct_scalar_float(0), ct_scalar_float(1), ct_scalar_float(0.25), CT_F64, CT_CPU);
    ct_linspace(0, 1, 5, CT_DTYPE_UNDEFINED, CT_CPU);
    ct_logspace(0, 2, 3, 10, CT_F64, CT_CPU);
    ct_eye(3, -1, CT_DTYPE_UNDEFINED, CT_CPU);
    ct_eye(2, 3, CT_I32, CT_CPU);
    ct_rand(S23, CT_DTYPE_UNDEFINED, CT_CPU);
    ct_randn(S23, CT_F64, CT_CPU);
    ct_rand_like(x, CT_DTYPE_UNDEFINED);
    ct_randn_like(x, CT_DTYPE_UNDEFINED);
    ct_randint(0, 10, S23, CT_DTYPE_UNDEFINED, CT_CPU);
    ct_randint(-3, 3, NULL, 0, CT_I8, CT_CPU);
    ct_randperm(5, CT_DTYPE_UNDEFINED, CT_CPU);
    ct_tensor *w = ct_clone(x);
    ct_fill_(w, ct_scalar_float(0.5));
    ct_zero_(w);
    ct_uniform_(w, -1, 1);
    ct_normal_(w, 0, 2);
    ct_bernoulli_(w, 0.5);
    ct_bernoulli(ct_full(S23, ct_scalar_float(0.5), CT_F32, CT_CPU));
    ct_to_device(x, CT_CPU);
    ct_clear_error();
    ct_scope_end();
}

static void test_call_layouts(void **state) {
    (void)state;
    schema *s = schemas;
    for (ct_op op = 0; op < CT_OP_COUNT; op++) {
        char err[160];
        assert_true(parse_schema(ct_op_schema(op), &s[op], err, sizeof err));
    }
    int64_t handles[CT_OP_COUNT] = {0};
    for (ct_op op = 0; op < CT_OP_COUNT; op++)
        if (dispatched(op)) {
            handles[op] = ct_op_override(op, CT_KEY_CPU, observe, NULL, 0);
            assert_true(handles[op] > 0);
        }
    drive_generated_classes();
    drive_custom_ops();
    for (ct_op op = 0; op < CT_OP_COUNT; op++)
        if (handles[op])
            assert_int_equal(ct_op_override_remove(handles[op]), CT_OK);
    if (nfailures)
        fail_msg("%d calls fit no overload of their op's schema (printed above)", nfailures);
    char missing[2048] = "";
    int nmissing = 0, nseen = 0;
    for (ct_op op = 0; op < CT_OP_COUNT; op++) {
        if (!dispatched(op))
            continue;
        nseen += seen[op];
        if (seen_ok[op])
            continue;
        nmissing++;
        size_t n = strlen(missing);
        snprintf(missing + n, sizeof missing - n, " %s", ct_op_name(op));
    }
    if (nmissing)
        fail_msg("%d ops that dispatch had no successful call here (add one to this file):%s", nmissing, missing);
    printf("test_call_layouts: %d calls checked\n", nseen);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_has_a_schema),
        cmocka_unit_test(test_schema_rules),
        cmocka_unit_test(test_call_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
