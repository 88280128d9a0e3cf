/* The one pickle reader: torch.save's data.pkl (io's loaders, through the hooks of
 * ct_value_from_pickle in ctorch/io.h) and plain data such as memory snapshots
 * (ct_memory_viz, without hooks).
 *
 * Note [Restricted unpickler]
 * A pickle is a program for a stack machine whose GLOBAL and REDUCE opcodes import and
 * call arbitrary Python functions. torch.load(weights_only=True) limits both to an
 * allowlist; this unpickler goes further: it accepts exactly the opcodes PyTorch's
 * weights-only unpickler accepts, and an allowed global is only a tag (enum pglobal)
 * that selects a built-in handler written here. Nothing the file names is ever looked
 * up or called. Every other global, opcode or misuse (BUILD on a list, APPEND to a
 * dict, a memo index never stored, a MARK never closed) is an error naming the byte
 * offset in data.pkl.
 *
 * Objects live in an arena freed at the end: the memo (BINPUT/BINGET) lets a pickle
 * share an object between containers, or even put a list inside itself, and an arena
 * needs neither reference counts nor cycle detection. The result is converted into
 * a ct_value tree at STOP; that walk bounds the nesting depth (cycles end there too)
 * and the total number of values, so a few shared references cannot expand into an
 * exponentially large tree.
 *
 * Without hooks (Note [Plain pickles]) the same machine reads plain data: persistent
 * ids are refused, since only a loader can resolve them, and the opcodes of protocols
 * 3 to 5 that Python's pickle.dump writes for plain data (FRAME, SHORT_BINUNICODE,
 * BINUNICODE8, MEMOIZE, LIST, DICT) are accepted, as are integers beyond 64 bits, read
 * as (inexact) floats. With hooks the opcodes are exactly those of torch.load's
 * weights-only unpickler, and such an integer is an error. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"

/* Limits on hostile pickles (documented in docs/serialization.md); the nesting limit
 * is CT_VALUE_MAX_DEPTH. */
#define CT_PICKLE_MAX_STACK (1 << 20) /* stack entries and marks */

typedef enum okind {
    O_NONE,
    O_BOOL,
    O_INT,
    O_FLOAT,
    O_STR,
    O_BYTES,
    O_TUPLE,
    O_LIST,
    O_DICT, /* items hold key, value, key, value, ... */
    O_SET,
    O_GLOBAL,
    O_STORAGE,
    O_TENSOR,
} okind;

typedef enum pglobal {
    G_ORDERED_DICT,
    G_REBUILD_TENSOR,
    G_REBUILD_TENSOR_V2,
    G_REBUILD_TENSOR_V3,
    G_REBUILD_PARAMETER,
    G_REBUILD_FROM_TYPE_V2,
    G_PARAMETER,
    G_TENSOR,
    G_SIZE,
    G_DEVICE,
    G_CODECS_ENCODE,
    G_STORAGE_TYPE, /* dtype: element type, CT_DTYPE_UNDEFINED for UntypedStorage */
    G_DTYPE,
} pglobal;

static const char *const global_names[] = {
    "collections.OrderedDict",
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_parameter",
    "torch._tensor._rebuild_from_type_v2",
    "torch.nn.parameter.Parameter",
    "torch.Tensor",
    "torch.Size",
    "torch.device",
    "_codecs.encode",
    "a torch storage type",
    "a torch dtype",
};

typedef struct obj {
    okind kind;
    bool ordered; /* a dict made by OrderedDict() */
    bool b;
    int64_t i;
    double f;
    char *s;
    size_t n;
    struct obj **items;
    int64_t len, cap;
    pglobal g;
    ct_dtype dtype;
    ct_tensor *t;     /* owned reference, released with the arena */
    int64_t handle;   /* storage: the hooks' handle */
    int64_t numel;    /* storage: elements of dtype, or bytes when untyped */
    struct obj *next; /* arena chain */
} obj;

typedef struct up {
    const uint8_t *buf;
    size_t len, pos, op_pos;
    const ct_pickle_hooks *io; /* NULL: plain data */
    const char *op, *what;
    uint64_t memo_next;        /* MEMOIZE's next index */
    obj *arena;
    obj **stack;
    int64_t sp, stack_cap;
    int64_t *marks;
    int64_t nmarks, marks_cap;
    obj **memo;
    int64_t memo_cap;
    int64_t values, max_values; /* conversion budget */
    bool failed;
} up;

static ct_status fail(up *u, const char *fmt, ...) CT_PRINTF(2, 3);
static ct_status fail(up *u, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    u->failed = true;
    return ct_error(CT_ERROR_FORMAT, u->op, "%s offset %zu: %s", u->what, u->op_pos, msg);
}

static obj *onew(up *u, okind kind) {
    obj *o = calloc(1, sizeof *o);
    if (!o) {
        u->failed = true;
        ct_error(CT_ERROR_OUT_OF_MEMORY, u->op, "out of memory while unpickling");
        return NULL;
    }
    o->kind = kind;
    o->next = u->arena;
    u->arena = o;
    return o;
}

static void arena_free(up *u) {
    for (obj *o = u->arena, *n; o; o = n) {
        n = o->next;
        free(o->items);
        free(o->s);
        if (o->t)
            ct_release(o->t);
        free(o);
    }
    u->arena = NULL;
}

static ct_status oappend(up *u, obj *c, obj *item) {
    if (c->len == c->cap) {
        int64_t cap = c->cap ? c->cap * 2 : 4;
        obj **n = realloc(c->items, (size_t)cap * sizeof *n);
        if (!n)
            return fail(u, "out of memory");
        c->items = n;
        c->cap = cap;
    }
    c->items[c->len++] = item;
    return CT_OK;
}

static const char *kind_name(const obj *o) {
    switch (o->kind) {
    case O_NONE: return "NoneType";
    case O_BOOL: return "bool";
    case O_INT: return "int";
    case O_FLOAT: return "float";
    case O_STR: return "str";
    case O_BYTES: return "bytes";
    case O_TUPLE: return "tuple";
    case O_LIST: return "list";
    case O_DICT: return o->ordered ? "OrderedDict" : "dict";
    case O_SET: return "set";
    case O_GLOBAL: return global_names[o->g];
    case O_STORAGE: return "storage";
    case O_TENSOR: return "Tensor";
    }
    return "object";
}

/* ------------------------------------------------------------------ stack */

static ct_status push(up *u, obj *o) {
    if (!o)
        return CT_ERROR_OUT_OF_MEMORY;
    if (u->sp == u->stack_cap) {
        if (u->stack_cap >= CT_PICKLE_MAX_STACK)
            return fail(u, "stack overflow (more than %d entries)", CT_PICKLE_MAX_STACK);
        int64_t cap = u->stack_cap ? u->stack_cap * 2 : 64;
        obj **n = realloc(u->stack, (size_t)cap * sizeof *n);
        if (!n)
            return fail(u, "out of memory");
        u->stack = n;
        u->stack_cap = cap;
    }
    u->stack[u->sp++] = o;
    return CT_OK;
}

/* The bottom of the current frame: objects below the innermost MARK are not poppable. */
static int64_t frame_base(const up *u) { return u->nmarks ? u->marks[u->nmarks - 1] : 0; }

static obj *pop(up *u, const char *opname) {
    if (u->sp <= frame_base(u)) {
        fail(u, "stack underflow in %s", opname);
        return NULL;
    }
    return u->stack[--u->sp];
}

static obj *top(up *u, const char *opname) {
    if (u->sp <= frame_base(u)) {
        fail(u, "stack underflow in %s", opname);
        return NULL;
    }
    return u->stack[u->sp - 1];
}

/* Pops the frame above the innermost MARK; its items are stack[*first .. sp). */
static ct_status pop_mark(up *u, const char *opname, int64_t *first) {
    if (u->nmarks == 0)
        return fail(u, "%s without a preceding MARK", opname);
    *first = u->marks[--u->nmarks];
    return CT_OK;
}

/* ------------------------------------------------------------------ reading */

static ct_status need(up *u, size_t n) {
    if (n > u->len - u->pos)
        return fail(u, "%s is truncated (needs %zu more bytes)", u->what, n - (u->len - u->pos));
    return CT_OK;
}

static uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Reads a GLOBAL argument: bytes up to '\n'. */
static ct_status read_line(up *u, const char **s, size_t *n) {
    *s = NULL;
    *n = 0;
    const uint8_t *start = u->buf + u->pos;
    const uint8_t *nl = memchr(start, '\n', u->len - u->pos);
    if (!nl)
        return fail(u, "GLOBAL name is not terminated (%s is truncated)", u->what);
    *s = (const char *)start;
    *n = (size_t)(nl - start);
    u->pos += *n + 1;
    return CT_OK;
}

static bool eq(const char *s, size_t n, const char *lit) { return strlen(lit) == n && memcmp(s, lit, n) == 0; }

static const struct {
    const char *name;
    ct_dtype dtype;
} storage_types[] = {
    {"DoubleStorage", CT_F64}, {"FloatStorage", CT_F32}, {"HalfStorage", CT_F16}, {"BFloat16Storage", CT_BF16},
    {"LongStorage", CT_I64},   {"IntStorage", CT_I32},   {"ShortStorage", CT_I16}, {"CharStorage", CT_I8},
    {"ByteStorage", CT_U8},    {"BoolStorage", CT_BOOL}, {"UntypedStorage", CT_DTYPE_UNDEFINED},
};

static ct_status op_global(up *u) {
    const char *m = NULL, *n = NULL;
    size_t mn = 0, nn = 0;
    if (read_line(u, &m, &mn) || read_line(u, &n, &nn))
        return CT_ERROR_FORMAT;
    obj *o = onew(u, O_GLOBAL);
    if (!o)
        return CT_ERROR_OUT_OF_MEMORY;
    o->dtype = CT_DTYPE_UNDEFINED;
    bool ok = true;
    if (eq(m, mn, "collections") && eq(n, nn, "OrderedDict"))
        o->g = G_ORDERED_DICT;
    else if (eq(m, mn, "torch._utils") && eq(n, nn, "_rebuild_tensor"))
        o->g = G_REBUILD_TENSOR;
    else if (eq(m, mn, "torch._utils") && eq(n, nn, "_rebuild_tensor_v2"))
        o->g = G_REBUILD_TENSOR_V2;
    else if (eq(m, mn, "torch._utils") && eq(n, nn, "_rebuild_tensor_v3"))
        o->g = G_REBUILD_TENSOR_V3;
    else if (eq(m, mn, "torch._utils") && eq(n, nn, "_rebuild_parameter"))
        o->g = G_REBUILD_PARAMETER;
    else if (eq(m, mn, "torch._tensor") && eq(n, nn, "_rebuild_from_type_v2"))
        o->g = G_REBUILD_FROM_TYPE_V2;
    else if (eq(m, mn, "torch.nn.parameter") && eq(n, nn, "Parameter"))
        o->g = G_PARAMETER;
    else if (eq(m, mn, "torch") && eq(n, nn, "Tensor"))
        o->g = G_TENSOR;
    else if (eq(m, mn, "torch") && eq(n, nn, "Size"))
        o->g = G_SIZE;
    else if (eq(m, mn, "torch") && eq(n, nn, "device"))
        o->g = G_DEVICE;
    else if (eq(m, mn, "_codecs") && eq(n, nn, "encode"))
        o->g = G_CODECS_ENCODE;
    else if (eq(m, mn, "torch.storage") && eq(n, nn, "UntypedStorage"))
        o->g = G_STORAGE_TYPE; /* the class's own module: what pickle writes for it */
    else if (eq(m, mn, "torch")) {
        ok = false;
        for (size_t i = 0; i < sizeof storage_types / sizeof *storage_types; i++)
            if (eq(n, nn, storage_types[i].name)) {
                o->g = G_STORAGE_TYPE;
                o->dtype = storage_types[i].dtype;
                ok = true;
            }
        char name[32];
        if (!ok && nn < sizeof name) {
            memcpy(name, n, nn);
            name[nn] = '\0';
            ct_dtype d = ct_dtype_from_name(name);
            if (d != CT_DTYPE_UNDEFINED) {
                o->g = G_DTYPE;
                o->dtype = d;
                ok = true;
            }
        }
    } else {
        ok = false;
    }
    if (!ok) {
        /* Printable prefix only: the name comes from the file. */
        int pm = (int)(mn > 100 ? 100 : mn), pn = (int)(nn > 100 ? 100 : nn);
        for (int i = 0; i < pm; i++)
            if (m[i] < 0x20 || m[i] > 0x7e)
                pm = i;
        for (int i = 0; i < pn; i++)
            if (n[i] < 0x20 || n[i] > 0x7e)
                pn = i;
        return fail(u, "global '%.*s.%.*s' is not allowed (weights-only loading)", pm, m, pn, n);
    }
    return push(u, o);
}

/* ------------------------------------------------------------------ handlers */

static bool is_int(const obj *o) { return o->kind == O_INT || o->kind == O_BOOL; }

static ct_status int_tuple(up *u, const obj *o, const char *what, int64_t *out, int *ndim) {
    if (o->kind != O_TUPLE)
        return fail(u, "tensor %s must be a tuple, got %s", what, kind_name(o));
    if (o->len > CT_MAX_DIMS)
        return fail(u, "tensor has %lld dimensions; ctorch supports at most %d", (long long)o->len, CT_MAX_DIMS);
    for (int64_t i = 0; i < o->len; i++) {
        if (o->items[i]->kind != O_INT)
            return fail(u, "tensor %s must hold ints, got %s", what, kind_name(o->items[i]));
        out[i] = o->items[i]->i;
    }
    *ndim = (int)o->len;
    return CT_OK;
}

/* A tensor over a storage, after checking that every reachable element lies in it. */
static obj *make_tensor(up *u, obj *storage, obj *offset, obj *size, obj *stride, obj *requires_grad,
                        ct_dtype dtype) {
    if (storage->kind != O_STORAGE) {
        fail(u, "a tensor's first argument must be a storage, got %s", kind_name(storage));
        return NULL;
    }
    if (offset->kind != O_INT || !is_int(requires_grad)) {
        fail(u, "a tensor's storage offset must be an int and requires_grad a bool");
        return NULL;
    }
    int64_t shape[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    int nd, nd2;
    if (int_tuple(u, size, "size", shape, &nd) || int_tuple(u, stride, "stride", strides, &nd2))
        return NULL;
    if (nd != nd2) {
        fail(u, "tensor size has %d dimensions but stride has %d", nd, nd2);
        return NULL;
    }
    if (dtype == CT_DTYPE_UNDEFINED) {
        fail(u, "a tensor over an untyped storage needs a dtype (_rebuild_tensor_v3)");
        return NULL;
    }
    size_t esz = ct_dtype_size(dtype);
    uint64_t store_bytes = storage->dtype == CT_DTYPE_UNDEFINED
                               ? (uint64_t)storage->numel
                               : (uint64_t)storage->numel * ct_dtype_size(storage->dtype);
    int64_t avail = (int64_t)(store_bytes / esz); /* elements of dtype in the storage */
    if (storage->dtype != CT_DTYPE_UNDEFINED && storage->dtype != dtype) {
        fail(u, "tensor dtype %s does not match its %s storage", ct_dtype_name(dtype), ct_dtype_name(storage->dtype));
        return NULL;
    }
    int64_t off = offset->i;
    if (off < 0) {
        fail(u, "negative storage offset %lld", (long long)off);
        return NULL;
    }
    int64_t numel = 1, last = off;
    for (int i = 0; i < nd; i++) {
        if (shape[i] < 0) {
            fail(u, "negative tensor size %lld in dimension %d", (long long)shape[i], i);
            return NULL;
        }
        if (strides[i] < 0) {
            fail(u, "negative stride %lld in dimension %d is not supported", (long long)strides[i], i);
            return NULL;
        }
        if (shape[i] != 0 && numel > INT64_MAX / shape[i]) {
            fail(u, "tensor size overflows");
            return NULL;
        }
        numel *= shape[i];
    }
    if (numel > 0)
        for (int i = 0; i < nd; i++) {
            int64_t ext = shape[i] - 1;
            if (strides[i] != 0 && ext > (INT64_MAX - last) / strides[i]) {
                fail(u, "tensor extent overflows");
                return NULL;
            }
            last += ext * strides[i];
        }
    if (numel > 0 ? last >= avail : off > avail) {
        char sb[128];
        fail(u, "tensor of size %s, offset %lld needs storage element %lld but the storage holds %lld elements",
             ct_shape_str(shape, nd, sb, sizeof sb), (long long)off, (long long)last, (long long)avail);
        return NULL;
    }
    obj *o = onew(u, O_TENSOR);
    if (!o)
        return NULL;
    /* Storages only come from the hooks (op_persid), so u->io is set here. */
    ct_scope_begin();
    ct_tensor *t = u->io->tensor(u->io->ctx, storage->handle, dtype, shape, strides, nd, off);
    bool hook_failed = !t;
    if (t && requires_grad->i && !ct_tensor_set_requires_grad(t, true))
        t = NULL;
    o->t = t ? ct_retain(t) : NULL;
    ct_scope_end();
    if (!t) {
        if (hook_failed)
            u->failed = true; /* the hook's own error stands */
        else
            fail(u, "could not create the tensor: %s", ct_last_error());
        return NULL;
    }
    return o;
}

static bool empty_state(const obj *o) { return o->kind == O_NONE || (o->kind == O_DICT && o->len == 0); }

/* Calls an allowed global with an argument tuple. */
static obj *call(up *u, obj *f, obj *args, bool newobj) {
    if (f->kind != O_GLOBAL) {
        fail(u, "Trying to call reduce for unrecognized function %s", kind_name(f));
        return NULL;
    }
    if (args->kind != O_TUPLE) {
        fail(u, "the arguments of %s must be a tuple, got %s", global_names[f->g], kind_name(args));
        return NULL;
    }
    obj **a = args->items;
    int64_t n = args->len;
    switch (f->g) {
    case G_ORDERED_DICT: {
        if (n != 0)
            break;
        obj *d = onew(u, O_DICT);
        if (d)
            d->ordered = true;
        return d;
    }
    case G_REBUILD_TENSOR:
        if (newobj || n != 4)
            break;
        return make_tensor(u, a[0], a[1], a[2], a[3], &(obj){.kind = O_BOOL}, a[0]->dtype);
    case G_REBUILD_TENSOR_V2:
        if (newobj || (n != 6 && n != 7))
            break;
        return make_tensor(u, a[0], a[1], a[2], a[3], a[4], a[0]->dtype);
    case G_REBUILD_TENSOR_V3:
        if (newobj || (n != 7 && n != 8))
            break;
        if (a[6]->kind != O_GLOBAL || a[6]->g != G_DTYPE) {
            fail(u, "_rebuild_tensor_v3 needs a dtype, got %s", kind_name(a[6]));
            return NULL;
        }
        return make_tensor(u, a[0], a[1], a[2], a[3], a[4], a[6]->dtype);
    case G_REBUILD_PARAMETER:
    case G_PARAMETER: {
        if (f->g == G_REBUILD_PARAMETER ? (newobj || n != 3) : (!newobj || n < 1 || n > 2))
            break;
        if (a[0]->kind != O_TENSOR || (n > 1 && !is_int(a[1]))) {
            fail(u, "a Parameter needs a tensor and a bool");
            return NULL;
        }
        bool rg = n > 1 ? a[1]->i != 0 : true;
        if (rg && !ct_tensor_set_requires_grad(a[0]->t, true)) {
            fail(u, "%s", ct_last_error());
            return NULL;
        }
        if (!rg)
            ct_tensor_set_requires_grad(a[0]->t, false);
        return a[0];
    }
    case G_REBUILD_FROM_TYPE_V2: {
        if (newobj || n != 4)
            break;
        if (a[1]->kind != O_GLOBAL || (a[1]->g != G_TENSOR && a[1]->g != G_PARAMETER)) {
            fail(u, "_rebuild_from_type_v2 is only supported for torch.Tensor and Parameter, got %s",
                 kind_name(a[1]));
            return NULL;
        }
        if (!empty_state(a[3])) {
            fail(u, "tensors with Python attributes are not supported");
            return NULL;
        }
        /* Only a tensor rebuild function may be wrapped: no recursion through nested
         * _rebuild_from_type_v2 calls. */
        if (a[0]->kind != O_GLOBAL ||
            (a[0]->g != G_REBUILD_TENSOR && a[0]->g != G_REBUILD_TENSOR_V2 && a[0]->g != G_REBUILD_TENSOR_V3 &&
             a[0]->g != G_REBUILD_PARAMETER)) {
            fail(u, "_rebuild_from_type_v2 must wrap a tensor rebuild function, got %s", kind_name(a[0]));
            return NULL;
        }
        obj *r = call(u, a[0], a[2], false);
        if (r && r->kind != O_TENSOR) {
            fail(u, "_rebuild_from_type_v2 did not produce a tensor");
            return NULL;
        }
        return r;
    }
    case G_SIZE: {
        if (n != 1 || a[0]->kind != O_TUPLE)
            break;
        return a[0];
    }
    case G_DEVICE: {
        if (newobj || n < 1 || n > 2 || a[0]->kind != O_STR || (n == 2 && a[1]->kind != O_INT))
            break;
        obj *s = onew(u, O_STR);
        if (!s)
            return NULL;
        char buf[64];
        int len = n == 2 ? snprintf(buf, sizeof buf, "%.40s:%lld", a[0]->s, (long long)a[1]->i)
                         : snprintf(buf, sizeof buf, "%.40s", a[0]->s);
        s->s = malloc((size_t)len + 1);
        if (!s->s) {
            fail(u, "out of memory");
            return NULL;
        }
        memcpy(s->s, buf, (size_t)len + 1);
        s->n = (size_t)len;
        return s;
    }
    case G_CODECS_ENCODE: {
        /* Protocol 2 writes bytes as _codecs.encode(latin-1 text, 'latin1'). */
        if (newobj || n != 2 || a[0]->kind != O_STR || a[1]->kind != O_STR ||
            !(eq(a[1]->s, a[1]->n, "latin1") || eq(a[1]->s, a[1]->n, "latin-1")))
            break;
        obj *b = onew(u, O_BYTES);
        if (!b)
            return NULL;
        b->s = malloc(a[0]->n + 1);
        if (!b->s) {
            fail(u, "out of memory");
            return NULL;
        }
        const uint8_t *p = (const uint8_t *)a[0]->s;
        size_t k = 0;
        for (size_t i = 0; i < a[0]->n; i++) {
            if (p[i] < 0x80) {
                b->s[k++] = (char)p[i];
            } else if ((p[i] == 0xC2 || p[i] == 0xC3) && i + 1 < a[0]->n && (p[i + 1] & 0xC0) == 0x80) {
                b->s[k++] = (char)(((p[i] & 0x03) << 6) | (p[i + 1] & 0x3F));
                i++;
            } else {
                fail(u, "_codecs.encode: text is not latin-1");
                return NULL;
            }
        }
        b->s[k] = '\0';
        b->n = k;
        return b;
    }
    case G_TENSOR:
    case G_STORAGE_TYPE:
    case G_DTYPE:
        break;
    }
    fail(u, "Trying to call %s for unsupported function %s with %lld arguments", newobj ? "NEWOBJ" : "reduce",
         global_names[f->g], (long long)n);
    return NULL;
}

static ct_status op_persid(up *u) {
    obj *pid = pop(u, "BINPERSID");
    if (!pid)
        return CT_ERROR_FORMAT;
    if (!u->io)
        return fail(u, "a persistent id (BINPERSID) in plain data: only a checkpoint loader can resolve it");
    if (pid->kind != O_TUPLE || pid->len < 5 || pid->items[0]->kind != O_STR ||
        !eq(pid->items[0]->s, pid->items[0]->n, "storage"))
        return fail(u, "Only persistent_load of storage is allowed, but got %s", kind_name(pid));
    obj *type = pid->items[1], *key = pid->items[2], *loc = pid->items[3], *numel = pid->items[4];
    if (type->kind != O_GLOBAL || type->g != G_STORAGE_TYPE)
        return fail(u, "persistent id names %s, not a storage type", kind_name(type));
    if (key->kind != O_STR || loc->kind != O_STR || numel->kind != O_INT || numel->i < 0)
        return fail(u, "malformed storage persistent id (key, location, numel)");
    if (strlen(key->s) != key->n || strlen(loc->s) != loc->n)
        return fail(u, "storage key or location contains a NUL byte");
    int64_t handle = u->io->storage(u->io->ctx, u->op_pos, key->s, type->dtype, numel->i, loc->s);
    if (handle < 0) {
        u->failed = true;
        return CT_ERROR_FORMAT;
    }
    obj *o = onew(u, O_STORAGE);
    if (!o)
        return CT_ERROR_OUT_OF_MEMORY;
    o->handle = handle;
    o->dtype = type->dtype;
    o->numel = numel->i;
    return push(u, o);
}

static ct_status memo_put(up *u, uint64_t idx) {
    obj *o = top(u, "BINPUT");
    if (!o)
        return CT_ERROR_FORMAT;
    /* A pickler numbers memo entries 0, 1, 2, ...; each BINPUT costs at least two bytes,
     * so an index past the file's length is hostile, and bounding it bounds the table. */
    if (idx >= u->len)
        return fail(u, "memo index %llu is out of range", (unsigned long long)idx);
    if ((int64_t)idx >= u->memo_cap) {
        int64_t cap = u->memo_cap ? u->memo_cap : 64;
        while (cap <= (int64_t)idx)
            cap *= 2;
        obj **n = realloc(u->memo, (size_t)cap * sizeof *n);
        if (!n)
            return fail(u, "out of memory");
        memset(n + u->memo_cap, 0, (size_t)(cap - u->memo_cap) * sizeof *n);
        u->memo = n;
        u->memo_cap = cap;
    }
    u->memo[idx] = o;
    if (idx + 1 > u->memo_next)
        u->memo_next = idx + 1;
    return CT_OK;
}

static ct_status memo_get(up *u, uint64_t idx) {
    if (idx >= (uint64_t)u->memo_cap || !u->memo[idx])
        return fail(u, "memo index %llu was never stored (BINGET)", (unsigned long long)idx);
    return push(u, u->memo[idx]);
}

static ct_status make_tuple(up *u, int64_t first) {
    obj *t = onew(u, O_TUPLE);
    if (!t)
        return CT_ERROR_OUT_OF_MEMORY;
    for (int64_t i = first; i < u->sp; i++)
        if (oappend(u, t, u->stack[i]))
            return CT_ERROR_OUT_OF_MEMORY;
    u->sp = first;
    return push(u, t);
}

static ct_status set_items(up *u, obj *d, obj **kv, int64_t n, const char *opname) {
    if (d->kind != O_DICT)
        return fail(u, "%s on %s (only dicts take items)", opname, kind_name(d));
    for (int64_t i = 0; i < n; i++)
        if (oappend(u, d, kv[i]))
            return CT_ERROR_OUT_OF_MEMORY;
    return CT_OK;
}

static ct_status unsupported(up *u, uint8_t op);
static ct_status step_plain(up *u, uint8_t op);

static ct_status step(up *u, uint8_t op, bool *stop) {
    obj *o;
    int64_t first = 0;
    switch (op) {
    case 0x80: /* PROTO */
        if (need(u, 1))
            return CT_ERROR_FORMAT;
        if (!u->io && (u->buf[u->pos] < 2 || u->buf[u->pos] > 5))
            return fail(u, "unsupported pickle protocol %u (this reader supports 2 to 5)", u->buf[u->pos]);
        u->pos++;
        return CT_OK;
    case '.': /* STOP */
        *stop = true;
        return CT_OK;
    case 'c': /* GLOBAL */
        return op_global(u);
    case 0x81: /* NEWOBJ */
    case 'R': { /* REDUCE */
        obj *args = pop(u, op == 'R' ? "REDUCE" : "NEWOBJ");
        obj *f = args ? pop(u, op == 'R' ? "REDUCE" : "NEWOBJ") : NULL;
        if (!f)
            return CT_ERROR_FORMAT;
        obj *r = call(u, f, args, op == 0x81);
        return r ? push(u, r) : CT_ERROR_FORMAT;
    }
    case 'b': { /* BUILD */
        obj *state = pop(u, "BUILD");
        obj *inst = state ? top(u, "BUILD") : NULL;
        if (!inst)
            return CT_ERROR_FORMAT;
        if (inst->kind == O_DICT && inst->ordered) {
            /* An OrderedDict's attributes (a state_dict's _metadata): dropped. */
            if (state->kind != O_DICT && state->kind != O_NONE)
                return fail(u, "BUILD state of an OrderedDict must be a dict, got %s", kind_name(state));
            return CT_OK;
        }
        if (inst->kind == O_TENSOR) {
            if (!empty_state(state))
                return fail(u, "tensors with Python attributes (BUILD state %s) are not supported",
                            kind_name(state));
            return CT_OK;
        }
        return fail(u, "Can only build Tensor, Parameter or OrderedDict objects, but got %s", kind_name(inst));
    }
    case 'a': { /* APPEND */
        obj *item = pop(u, "APPEND");
        obj *l = item ? top(u, "APPEND") : NULL;
        if (!l)
            return CT_ERROR_FORMAT;
        if (l->kind != O_LIST)
            return fail(u, "Can only append to lists, but got %s", kind_name(l));
        return oappend(u, l, item);
    }
    case 'e': /* APPENDS */
        if (pop_mark(u, "APPENDS", &first))
            return CT_ERROR_FORMAT;
        if (first <= frame_base(u))
            return fail(u, "stack underflow in APPENDS");
        o = u->stack[first - 1];
        if (o->kind != O_LIST)
            return fail(u, "Can only extend lists, but got %s", kind_name(o));
        for (int64_t i = first; i < u->sp; i++)
            if (oappend(u, o, u->stack[i]))
                return CT_ERROR_OUT_OF_MEMORY;
        u->sp = first;
        return CT_OK;
    case 's': { /* SETITEM */
        obj *v = pop(u, "SETITEM");
        obj *k = v ? pop(u, "SETITEM") : NULL;
        obj *d = k ? top(u, "SETITEM") : NULL;
        if (!d)
            return CT_ERROR_FORMAT;
        obj *kv[2] = {k, v};
        return set_items(u, d, kv, 2, "SETITEM");
    }
    case 'u': /* SETITEMS */
        if (pop_mark(u, "SETITEMS", &first))
            return CT_ERROR_FORMAT;
        if ((u->sp - first) % 2)
            return fail(u, "SETITEMS with an odd number of items");
        if (first <= frame_base(u))
            return fail(u, "stack underflow in SETITEMS");
        o = u->stack[first - 1];
        if (set_items(u, o, u->stack + first, u->sp - first, "SETITEMS"))
            return CT_ERROR_FORMAT;
        u->sp = first;
        return CT_OK;
    case '(': /* MARK */
        if (u->nmarks == u->marks_cap) {
            if (u->marks_cap >= CT_PICKLE_MAX_STACK)
                return fail(u, "too many open MARKs");
            int64_t cap = u->marks_cap ? u->marks_cap * 2 : 16;
            int64_t *n = realloc(u->marks, (size_t)cap * sizeof *n);
            if (!n)
                return fail(u, "out of memory");
            u->marks = n;
            u->marks_cap = cap;
        }
        u->marks[u->nmarks++] = u->sp;
        return CT_OK;
    case 't': /* TUPLE */
        if (pop_mark(u, "TUPLE", &first))
            return CT_ERROR_FORMAT;
        return make_tuple(u, first);
    case 0x85: /* TUPLE1 */
    case 0x86: /* TUPLE2 */
    case 0x87: /* TUPLE3 */
        first = u->sp - (op - 0x84);
        if (first < frame_base(u))
            return fail(u, "stack underflow in TUPLE%d", op - 0x84);
        return make_tuple(u, first);
    case 'N':
        return push(u, onew(u, O_NONE));
    case 0x88: /* NEWTRUE */
    case 0x89: /* NEWFALSE */
        if (!(o = onew(u, O_BOOL)))
            return CT_ERROR_OUT_OF_MEMORY;
        o->b = op == 0x88;
        o->i = o->b;
        return push(u, o);
    case ')':
        return push(u, onew(u, O_TUPLE));
    case ']':
        return push(u, onew(u, O_LIST));
    case '}':
        return push(u, onew(u, O_DICT));
    case 0x8f: /* EMPTY_SET */
        return push(u, onew(u, O_SET));
    case 'J': /* BININT */
    case 'K': /* BININT1 */
    case 'M': { /* BININT2 */
        size_t n = op == 'J' ? 4 : op == 'K' ? 1 : 2;
        if (need(u, n) || !(o = onew(u, O_INT)))
            return CT_ERROR_FORMAT;
        const uint8_t *p = u->buf + u->pos;
        o->i = op == 'J' ? (int64_t)(int32_t)rd_u32(p) : op == 'K' ? p[0] : (int64_t)(p[0] | (p[1] << 8));
        u->pos += n;
        return push(u, o);
    }
    case 0x8a: { /* LONG1 */
        if (need(u, 1))
            return CT_ERROR_FORMAT;
        size_t n = u->buf[u->pos++];
        if (need(u, n))
            return CT_ERROR_FORMAT;
        if (n > 8 && !u->io) {
            /* plain data: beyond 64 bits as an (inexact) float, which JSON shows anyway */
            const uint8_t *b = u->buf + u->pos;
            bool neg = b[n - 1] & 0x80;
            double x = 0;
            for (size_t i = n; i-- > 0;)
                x = x * 256.0 + (neg ? (uint8_t)~b[i] : b[i]);
            u->pos += n;
            if (!(o = onew(u, O_FLOAT)))
                return CT_ERROR_OUT_OF_MEMORY;
            o->f = neg ? -(x + 1) : x;
            return push(u, o);
        }
        if (n > 8)
            return fail(u, "integer of %zu bytes does not fit in int64", n);
        uint64_t v = 0;
        for (size_t i = 0; i < n; i++)
            v |= (uint64_t)u->buf[u->pos + i] << (8 * i);
        if (n > 0 && n < 8 && (u->buf[u->pos + n - 1] & 0x80))
            v |= ~(uint64_t)0 << (8 * n); /* sign-extend */
        u->pos += n;
        if (!(o = onew(u, O_INT)))
            return CT_ERROR_OUT_OF_MEMORY;
        o->i = (int64_t)v;
        return push(u, o);
    }
    case 'G': { /* BINFLOAT, big-endian */
        if (need(u, 8) || !(o = onew(u, O_FLOAT)))
            return CT_ERROR_FORMAT;
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++)
            bits = (bits << 8) | u->buf[u->pos + (size_t)i];
        memcpy(&o->f, &bits, sizeof bits);
        u->pos += 8;
        return push(u, o);
    }
    case 'X': /* BINUNICODE */
    case 'U': { /* SHORT_BINSTRING */
        size_t n;
        if (op == 'X') {
            if (need(u, 4))
                return CT_ERROR_FORMAT;
            n = rd_u32(u->buf + u->pos);
            u->pos += 4;
        } else {
            if (need(u, 1))
                return CT_ERROR_FORMAT;
            n = u->buf[u->pos++];
        }
        if (need(u, n) || !(o = onew(u, O_STR)))
            return CT_ERROR_FORMAT;
        o->s = malloc(n + 1);
        if (!o->s)
            return fail(u, "out of memory");
        memcpy(o->s, u->buf + u->pos, n);
        o->s[n] = '\0';
        o->n = n;
        u->pos += n;
        return push(u, o);
    }
    case 'Q': /* BINPERSID */
        return op_persid(u);
    case 'h': /* BINGET */
    case 'q': /* BINPUT */
        if (need(u, 1))
            return CT_ERROR_FORMAT;
        u->pos++;
        return op == 'h' ? memo_get(u, u->buf[u->pos - 1]) : memo_put(u, u->buf[u->pos - 1]);
    case 'j': /* LONG_BINGET */
    case 'r': /* LONG_BINPUT */
        if (need(u, 4))
            return CT_ERROR_FORMAT;
        u->pos += 4;
        return op == 'j' ? memo_get(u, rd_u32(u->buf + u->pos - 4)) : memo_put(u, rd_u32(u->buf + u->pos - 4));
    default:
        if (!u->io)
            return step_plain(u, op);
        return unsupported(u, op);
    }
}

static ct_status unsupported(up *u, uint8_t op) {
    if (op >= 0x20 && op < 0x7f)
        return fail(u, "Unsupported operand %u ('%c'), not allowed in weights-only loading", op, op);
    return fail(u, "Unsupported operand %u (0x%02x), not allowed in weights-only loading", op, op);
}

/* Note [Plain pickles]
 * The opcodes of protocols 3 to 5 that Python writes for plain data, read only without
 * hooks: PyTorch's weights-only unpickler refuses them in a torch.save file, and so
 * does this reader there. */
static ct_status step_plain(up *u, uint8_t op) {
    obj *o;
    int64_t first = 0;
    switch (op) {
    case 0x95: /* FRAME: a length prefix, nothing to check against */
        if (need(u, 8))
            return CT_ERROR_FORMAT;
        u->pos += 8;
        return CT_OK;
    case 0x8c: /* SHORT_BINUNICODE */
    case 0x8d: { /* BINUNICODE8 */
        size_t k = op == 0x8c ? 1 : 8;
        if (need(u, k))
            return CT_ERROR_FORMAT;
        uint64_t n = 0;
        for (size_t i = k; i-- > 0;)
            n = n << 8 | u->buf[u->pos + i];
        u->pos += k;
        if (n > u->len - u->pos)
            return fail(u, "%s is truncated (a string of %llu bytes)", u->what, (unsigned long long)n);
        if (!(o = onew(u, O_STR)))
            return CT_ERROR_OUT_OF_MEMORY;
        o->s = malloc((size_t)n + 1);
        if (!o->s)
            return fail(u, "out of memory");
        memcpy(o->s, u->buf + u->pos, (size_t)n);
        o->s[n] = '\0';
        o->n = (size_t)n;
        u->pos += (size_t)n;
        return push(u, o);
    }
    case 0x94: /* MEMOIZE */
        return memo_put(u, u->memo_next);
    case 'l': /* LIST */
    case 'd': /* DICT */
        if (pop_mark(u, op == 'l' ? "LIST" : "DICT", &first))
            return CT_ERROR_FORMAT;
        if (op == 'd' && (u->sp - first) % 2)
            return fail(u, "DICT with an odd number of items");
        if (!(o = onew(u, op == 'l' ? O_LIST : O_DICT)))
            return CT_ERROR_OUT_OF_MEMORY;
        for (int64_t i = first; i < u->sp; i++)
            if (oappend(u, o, u->stack[i]))
                return CT_ERROR_OUT_OF_MEMORY;
        u->sp = first;
        return push(u, o);
    default:
        return unsupported(u, op);
    }
}

/* ------------------------------------------------------------------ result */

static ct_value *convert(up *u, const obj *o, int depth) {
    if (depth > CT_VALUE_MAX_DEPTH) {
        fail(u, "the object nests deeper than %d levels (or contains itself)", CT_VALUE_MAX_DEPTH);
        return NULL;
    }
    if (++u->values > u->max_values) {
        fail(u, "shared references expand the object into more than %lld values", (long long)u->max_values);
        return NULL;
    }
    ct_value *v = NULL;
    switch (o->kind) {
    case O_NONE: v = ct_value_none(); break;
    case O_BOOL: v = ct_value_new_bool(o->b); break;
    case O_INT: v = ct_value_new_int(o->i); break;
    case O_FLOAT: v = ct_value_new_float(o->f); break;
    case O_STR: v = ct_value_new_strn(o->s, o->n); break;
    case O_BYTES: v = ct_value_new_bytes(o->s, o->n); break;
    case O_TENSOR: v = ct_value_new_tensor(o->t); break;
    case O_GLOBAL:
        if (o->g == G_DTYPE) {
            char buf[48];
            snprintf(buf, sizeof buf, "torch.%s", ct_dtype_name(o->dtype));
            v = ct_value_new_str(buf);
            break;
        }
        fail(u, "the object holds %s, which is not a value", global_names[o->g]);
        return NULL;
    case O_STORAGE:
        fail(u, "a bare storage (not inside a tensor) is not supported");
        return NULL;
    case O_SET:
        fail(u, "set values are not supported");
        return NULL;
    case O_TUPLE:
    case O_LIST:
        v = o->kind == O_TUPLE ? ct_value_new_tuple() : ct_value_new_list();
        for (int64_t i = 0; v && i < o->len; i++) {
            ct_value *c = convert(u, o->items[i], depth + 1);
            if (!c || ct_value_append(v, c)) {
                ct_value_free(v);
                return NULL;
            }
        }
        break;
    case O_DICT:
        v = ct_value_new_dict();
        for (int64_t i = 0; v && i + 1 < o->len; i += 2) {
            const obj *k = o->items[i];
            if (k->kind != O_STR && k->kind != O_INT) {
                fail(u, "dict keys must be str or int, got %s", kind_name(k));
                ct_value_free(v);
                return NULL;
            }
            /* As the safetensors reader: a key with a NUL would print and look up as
             * its prefix (ct_value_get takes a C string). */
            if (k->kind == O_STR && memchr(k->s, '\0', k->n)) {
                fail(u, "dict key '%s' contains a NUL character (\\x00)", k->s);
                ct_value_free(v);
                return NULL;
            }
            ct_value *c = convert(u, o->items[i + 1], depth + 1);
            if (!c || (k->kind == O_STR ? ct_value_set(v, k->s, c) : ct_value_set_int(v, k->i, c))) {
                ct_value_free(v);
                return NULL;
            }
        }
        break;
    }
    if (!v && !u->failed)
        fail(u, "out of memory");
    return v;
}

ct_value *ct_value_from_pickle(const void *data, size_t len, const ct_pickle_hooks *hooks, const char *what) {
    const char *op = "value_from_pickle";
    if (!data) {
        ct_error_null(op);
        return NULL;
    }
    if (hooks && (!hooks->storage || !hooks->tensor)) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "the hooks need both a storage and a tensor function");
        return NULL;
    }
    up u;
    memset(&u, 0, sizeof u);
    u.buf = data;
    u.len = len;
    u.io = hooks;
    u.op = op;
    u.what = what ? what : "pickle";
    bool stop = false;
    ct_value *result = NULL;
    while (!stop) {
        u.op_pos = u.pos;
        if (u.pos >= u.len) {
            fail(&u, "%s ends without STOP (truncated)", u.what);
            break;
        }
        uint8_t opcode = u.buf[u.pos++];
        if (step(&u, opcode, &stop)) {
            u.failed = true;
            break;
        }
    }
    if (stop && !u.failed) {
        obj *r = pop(&u, "STOP");
        if (r) {
            if (u.nmarks)
                fail(&u, "STOP with %lld MARKs still open", (long long)u.nmarks);
            else {
                /* Plain data (a memory snapshot) shares more: Python memoizes each
                 * frame, and a block's trace refers to many of them. */
                u.max_values = hooks ? (int64_t)len * 2 + 1024 : (int64_t)len * 16 + ((int64_t)1 << 20);
                result = convert(&u, r, 0);
            }
        }
    }
    if (u.failed && result) {
        ct_value_free(result);
        result = NULL;
    }
    arena_free(&u);
    free(u.stack);
    free(u.marks);
    free(u.memo);
    return result;
}
