/* Pickle protocol 2 writer producing what torch.save writes for the same objects.
 *
 * Note [Pickle writer choices]
 * - Dicts: ct_value has one dict kind. A non-empty dict whose keys are all strings and
 *   whose values are all tensors is written as collections.OrderedDict (that is what a
 *   state_dict is); every other dict is a plain dict (an optimizer state_dict, a
 *   checkpoint). Either loads as a dict-like object in PyTorch.
 * - Tensors: _rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
 *   OrderedDict()). Storages are persistent ids ('storage', torch.<T>Storage, key,
 *   'cpu', numel). uint16/uint32/uint64, which have no typed storage class, use
 *   torch.storage.UntypedStorage (the class's own module, which is the name
 *   PyTorch's weights-only loader allows) and _rebuild_tensor_v3(..., dtype), as
 *   PyTorch 2.3+ does.
 * - No memo (BINPUT): it only saves space for repeated strings; sharing of tensor data
 *   goes through storage keys.
 * - Storages: found through public accessors (Note [Storages as tensors] in pickle.h):
 *   a tensor's storage begins storage_offset elements before its data, and two
 *   tensors whose storages begin at the same byte are checked with
 *   ct_tensor_shares_storage, so the lookup is a hash of that address, not a scan. */
#include <stdlib.h>
#include <string.h>

#include "ctorch/ext.h"
#include "pickle.h"

static void put(ct_pickler *p, const void *data, size_t n) {
    if (p->oom)
        return;
    if (p->len + n > p->cap) {
        size_t cap = p->cap ? p->cap : 256;
        while (cap < p->len + n)
            cap *= 2;
        uint8_t *b = realloc(p->buf, cap);
        if (!b) {
            p->oom = true;
            return;
        }
        p->buf = b;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, data, n);
    p->len += n;
}
static void put1(ct_pickler *p, uint8_t c) { put(p, &c, 1); }
static void puts_(ct_pickler *p, const char *s) { put(p, s, strlen(s)); }

static void put_global(ct_pickler *p, const char *module, const char *name) {
    put1(p, 'c');
    puts_(p, module);
    put1(p, '\n');
    puts_(p, name);
    put1(p, '\n');
}

static void put_int(ct_pickler *p, int64_t v) {
    if (v >= 0 && v < 256) {
        uint8_t b[2] = {'K', (uint8_t)v};
        put(p, b, 2);
    } else if (v >= 0 && v < 65536) {
        uint8_t b[3] = {'M', (uint8_t)v, (uint8_t)(v >> 8)};
        put(p, b, 3);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        uint32_t u = (uint32_t)(int32_t)v;
        uint8_t b[5] = {'J', (uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
        put(p, b, 5);
    } else {
        /* LONG1: shortest little-endian two's complement. */
        uint8_t b[10];
        uint64_t u = (uint64_t)v;
        int n = 8;
        while (n > 1) {
            uint8_t hi = (uint8_t)(u >> (8 * (n - 1))), next = (uint8_t)(u >> (8 * (n - 2)));
            if ((hi == 0x00 && !(next & 0x80)) || (hi == 0xFF && (next & 0x80)))
                n--;
            else
                break;
        }
        b[0] = 0x8a;
        b[1] = (uint8_t)n;
        for (int i = 0; i < n; i++)
            b[2 + i] = (uint8_t)(u >> (8 * i));
        put(p, b, (size_t)n + 2);
    }
}

static void put_str(ct_pickler *p, const char *s, size_t n) {
    uint8_t b[5] = {'X', (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    put(p, b, 5);
    put(p, s, n);
}

static void put_bool(ct_pickler *p, bool b) { put1(p, b ? 0x88 : 0x89); }

static void put_ordered_dict_call(ct_pickler *p) {
    put_global(p, "collections", "OrderedDict");
    put1(p, ')');
    put1(p, 'R');
}

static const char *storage_class(ct_dtype d) {
    switch (d) {
    case CT_F64: return "DoubleStorage";
    case CT_F32: return "FloatStorage";
    case CT_F16: return "HalfStorage";
    case CT_BF16: return "BFloat16Storage";
    case CT_I64: return "LongStorage";
    case CT_I32: return "IntStorage";
    case CT_I16: return "ShortStorage";
    case CT_I8: return "CharStorage";
    case CT_U8: return "ByteStorage";
    case CT_BOOL: return "BoolStorage";
    default: return NULL; /* uint16/32/64: untyped */
    }
}

static uint64_t addr_hash(const void *p) {
    uint64_t h = (uint64_t)(uintptr_t)p;
    h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

/* The storage record of t: an earlier one t shares, or a new one; -1 on error. */
static int64_t storage_key(ct_pickler *p, ct_tensor *t) {
    ct_dtype dtype = ct_tensor_dtype(t);
    size_t esz = ct_tensor_element_size(t);
    const char *data = ct_tensor_data(t);
    const void *base = data ? data - ct_tensor_storage_offset(t) * (int64_t)esz : NULL;
    uint64_t h = addr_hash(base);
    if (p->nbuckets) {
        for (int64_t i = p->buckets[h & (uint64_t)(p->nbuckets - 1)]; i >= 0; i = p->storages[i].next) {
            if (p->storages[i].data != base || !ct_tensor_shares_storage(p->storages[i].first, t))
                continue;
            if (p->storages[i].dtype != dtype) {
                ct_error(CT_ERROR_NOT_IMPLEMENTED, p->op,
                         "tensors of dtypes %s and %s share one storage; save a copy of one of them",
                         ct_dtype_name(p->storages[i].dtype), ct_dtype_name(dtype));
                return -1;
            }
            return i;
        }
    }
    if (p->nstorages == p->capstorages) {
        int64_t cap = p->capstorages ? p->capstorages * 2 : 16;
        ct_pickle_storage *n = ct_xrealloc(p->op, p->storages, (size_t)cap * sizeof *n);
        int64_t *b = n ? ct_xmalloc(p->op, (size_t)cap * 2 * sizeof *b) : NULL;
        if (!b) {
            if (n)
                p->storages = n;
            return -1;
        }
        p->storages = n;
        p->capstorages = cap;
        free(p->buckets);
        p->buckets = b;
        p->nbuckets = cap * 2; /* at most half full */
        for (int64_t i = 0; i < p->nbuckets; i++)
            b[i] = -1;
        for (int64_t i = 0; i < p->nstorages; i++) {
            uint64_t g = addr_hash(p->storages[i].data);
            p->storages[i].next = b[g & (uint64_t)(p->nbuckets - 1)];
            b[g & (uint64_t)(p->nbuckets - 1)] = i;
        }
    }
    int64_t key = p->nstorages++;
    p->storages[key] = (ct_pickle_storage){.first = ct_retain(t), .data = base, .nbytes = ct_tensor_storage_nbytes(t),
                                           .dtype = dtype, .untyped = storage_class(dtype) == NULL,
                                           .next = p->buckets[h & (uint64_t)(p->nbuckets - 1)]};
    p->buckets[h & (uint64_t)(p->nbuckets - 1)] = key;
    return key;
}

static ct_status put_tensor(ct_pickler *p, ct_tensor *t) {
    if (ct_tensor_device(t).type != CT_DEVICE_CPU)
        return ct_error(CT_ERROR_DEVICE, p->op, "only CPU tensors can be saved; move the tensor to the CPU first");
    int64_t key = storage_key(p, t);
    if (key < 0)
        return ct_last_status();
    const ct_pickle_storage *st = &p->storages[key];
    ct_dtype dtype = st->dtype;
    bool untyped = st->untyped;
    size_t esz = ct_dtype_size(dtype);
    put_global(p, "torch._utils", untyped ? "_rebuild_tensor_v3" : "_rebuild_tensor_v2");
    put1(p, '(');
    /* persistent id */
    put1(p, '(');
    put_str(p, "storage", 7);
    if (untyped)
        put_global(p, "torch.storage", "UntypedStorage");
    else
        put_global(p, "torch", storage_class(dtype));
    char kbuf[24];
    int kn = snprintf(kbuf, sizeof kbuf, "%lld", (long long)key);
    put_str(p, kbuf, (size_t)kn);
    put_str(p, "cpu", 3);
    put_int(p, (int64_t)(untyped ? st->nbytes : st->nbytes / esz));
    put1(p, 't');
    put1(p, 'Q');
    /* offset, size, stride, requires_grad, hooks */
    put_int(p, ct_tensor_storage_offset(t));
    int ndim = ct_tensor_dim(t);
    const int64_t *shape = ct_tensor_shape(t), *strides = ct_tensor_strides(t);
    put1(p, '(');
    for (int i = 0; i < ndim; i++)
        put_int(p, shape[i]);
    put1(p, 't');
    put1(p, '(');
    for (int i = 0; i < ndim; i++)
        put_int(p, strides[i]);
    put1(p, 't');
    put_bool(p, ct_tensor_requires_grad(t));
    put_ordered_dict_call(p);
    if (untyped) {
        char dname[48];
        snprintf(dname, sizeof dname, "%s", ct_dtype_name(dtype));
        put_global(p, "torch", dname);
    }
    put1(p, 't');
    put1(p, 'R');
    return CT_OK;
}

static bool is_state_dict(const ct_value *v) {
    int64_t n = ct_value_len(v);
    if (n == 0)
        return false;
    for (int64_t i = 0; i < n; i++)
        if (ct_value_kind(ct_value_key_at(v, i)) != CT_VALUE_STRING ||
            ct_value_kind(ct_value_at(v, i)) != CT_VALUE_TENSOR)
            return false;
    return true;
}

static ct_status dump(ct_pickler *p, const ct_value *v, int depth) {
    if (!v)
        return ct_error(CT_ERROR_NULL_ARGUMENT, p->op, "the value tree holds a NULL value");
    if (depth > CT_VALUE_MAX_DEPTH)
        return ct_error(CT_ERROR_VALUE, p->op, "the value nests deeper than %d levels", CT_VALUE_MAX_DEPTH);
    size_t n;
    const char *s;
    switch (ct_value_kind(v)) {
    case CT_VALUE_NONE: put1(p, 'N'); return CT_OK;
    case CT_VALUE_BOOL: put_bool(p, ct_value_bool(v)); return CT_OK;
    case CT_VALUE_INT: put_int(p, ct_value_int(v)); return CT_OK;
    case CT_VALUE_FLOAT: {
        double f = ct_value_float(v);
        uint64_t bits;
        memcpy(&bits, &f, 8);
        uint8_t b[9] = {'G'};
        for (int i = 0; i < 8; i++)
            b[1 + i] = (uint8_t)(bits >> (56 - 8 * i));
        put(p, b, 9);
        return CT_OK;
    }
    case CT_VALUE_STRING:
        s = ct_value_str(v, &n);
        put_str(p, s, n);
        return CT_OK;
    case CT_VALUE_BYTES: {
        /* Protocol 2 has no bytes opcode: _codecs.encode(latin-1 text, 'latin1'). */
        s = ct_value_str(v, &n);
        put_global(p, "_codecs", "encode");
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            m += (uint8_t)s[i] < 0x80 ? 1 : 2;
        uint8_t hdr[5] = {'X', (uint8_t)m, (uint8_t)(m >> 8), (uint8_t)(m >> 16), (uint8_t)(m >> 24)};
        put(p, hdr, 5);
        for (size_t i = 0; i < n; i++) {
            uint8_t c = (uint8_t)s[i];
            if (c < 0x80) {
                put1(p, c);
            } else {
                put1(p, (uint8_t)(0xC0 | (c >> 6)));
                put1(p, (uint8_t)(0x80 | (c & 0x3F)));
            }
        }
        put_str(p, "latin1", 6);
        put1(p, 0x86);
        put1(p, 'R');
        return CT_OK;
    }
    case CT_VALUE_TENSOR: {
        ct_scope_begin();
        ct_tensor *t = ct_value_tensor(v);
        ct_status st = t ? put_tensor(p, t) : ct_error_null(p->op);
        ct_scope_end();
        return st;
    }
    case CT_VALUE_TUPLE:
    case CT_VALUE_LIST: {
        bool tuple = ct_value_kind(v) == CT_VALUE_TUPLE;
        int64_t len = ct_value_len(v);
        if (tuple && len == 0) {
            put1(p, ')');
            return CT_OK;
        }
        if (tuple && len <= 3) {
            for (int64_t i = 0; i < len; i++)
                if (dump(p, ct_value_at(v, i), depth + 1))
                    return ct_last_status();
            put1(p, (uint8_t)(0x84 + len));
            return CT_OK;
        }
        if (tuple) {
            put1(p, '(');
            for (int64_t i = 0; i < len; i++)
                if (dump(p, ct_value_at(v, i), depth + 1))
                    return ct_last_status();
            put1(p, 't');
            return CT_OK;
        }
        put1(p, ']');
        for (int64_t i = 0; i < len; i += 1000) { /* pickle's batch size */
            put1(p, '(');
            for (int64_t j = i; j < len && j < i + 1000; j++)
                if (dump(p, ct_value_at(v, j), depth + 1))
                    return ct_last_status();
            put1(p, 'e');
        }
        return CT_OK;
    }
    case CT_VALUE_DICT: {
        int64_t len = ct_value_len(v);
        if (is_state_dict(v))
            put_ordered_dict_call(p);
        else
            put1(p, '}');
        for (int64_t i = 0; i < len; i += 1000) {
            put1(p, '(');
            for (int64_t j = i; j < len && j < i + 1000; j++)
                if (dump(p, ct_value_key_at(v, j), depth + 1) || dump(p, ct_value_at(v, j), depth + 1))
                    return ct_last_status();
            put1(p, 'u');
        }
        return CT_OK;
    }
    }
    return ct_error(CT_ERROR_VALUE, p->op, "unknown value kind %d", (int)ct_value_kind(v));
}

ct_status ct_pickle_dump(ct_pickler *p, const ct_value *v, const char *op) {
    memset(p, 0, sizeof *p);
    p->op = op;
    uint8_t proto[2] = {0x80, 2};
    put(p, proto, 2);
    ct_status st = dump(p, v, 0);
    if (st)
        return st;
    put1(p, '.');
    if (p->oom)
        return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory while pickling");
    return CT_OK;
}

void ct_pickler_free(ct_pickler *p) {
    for (int64_t i = 0; i < p->nstorages; i++)
        ct_release(p->storages[i].first);
    free(p->buf);
    free(p->storages);
    free(p->buckets);
    memset(p, 0, sizeof *p);
}
