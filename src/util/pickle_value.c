/* The one writer of value trees as pickles (ct_value_to_pickle in ctorch/io.h), over the
 * opcode emitter of pickle_emit.h: what torch.save writes for the same objects.
 *
 * Note [Pickle writer choices]
 * - Dicts: ct_value has one dict kind. A non-empty dict whose keys are all strings and
 *   whose values are all tensors is written as collections.OrderedDict (that is what a
 *   state_dict is); every other dict is a plain dict (an optimizer state_dict, a
 *   checkpoint). Either loads as a dict-like object in PyTorch.
 * - Tensors: _rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
 *   OrderedDict()). Storages are persistent ids ('storage', torch.<T>Storage, key,
 *   'cpu', numel), key being the caller's number for the tensor's storage (io's
 *   ct_save_pt numbers them in order of first appearance and writes one record each).
 *   uint16/uint32/uint64, which have no typed storage class, use
 *   torch.storage.UntypedStorage (the class's own module, which is the name
 *   PyTorch's weights-only loader allows) and _rebuild_tensor_v3(..., dtype), as
 *   PyTorch 2.3+ does.
 * - No memo (BINPUT): it only saves space for repeated strings; sharing of tensor data
 *   goes through storage keys.
 * - Lists and dicts are written in batches of 1000 items, as Python's pickler does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ctorch.h"
#include "util/pickle_emit.h"

#define OP "value_to_pickle"

typedef struct writer {
    ct_pickle p;
    ct_pickle_storage_fn storage;
    void *ctx;
} writer;

static void ordered_dict_call(ct_pickle *p) {
    ct_pickle_global(p, "collections", "OrderedDict");
    ct_pickle_empty_tuple(p);
    ct_pickle_reduce(p);
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

static ct_status put_tensor(writer *w, ct_tensor *t) {
    ct_pickle *p = &w->p;
    /* Other devices' tensors are the storage function's to copy to the host (the
     * location written is "cpu" either way); a meta tensor has no data to save. */
    if (ct_tensor_device(t).type == CT_DEVICE_META)
        return ct_error(CT_ERROR_DEVICE, OP, "cannot save a meta tensor; it has no data");
    if (!w->storage)
        return ct_error(CT_ERROR_VALUE, OP, "the value tree holds a tensor, and no storage function was given");
    int64_t key = w->storage(w->ctx, t);
    if (key < 0)
        return ct_last_status();
    ct_dtype dtype = ct_tensor_dtype(t);
    const char *cls = storage_class(dtype);
    size_t nbytes = ct_tensor_storage_nbytes(t);
    ct_pickle_global(p, "torch._utils", cls ? "_rebuild_tensor_v2" : "_rebuild_tensor_v3");
    ct_pickle_mark(p);
    /* persistent id */
    ct_pickle_mark(p);
    ct_pickle_unicode(p, "storage", 7);
    if (cls)
        ct_pickle_global(p, "torch", cls);
    else
        ct_pickle_global(p, "torch.storage", "UntypedStorage");
    char kbuf[24];
    int kn = snprintf(kbuf, sizeof kbuf, "%lld", (long long)key);
    ct_pickle_unicode(p, kbuf, (size_t)kn);
    ct_pickle_unicode(p, "cpu", 3);
    ct_pickle_int(p, (int64_t)(cls ? nbytes / ct_dtype_size(dtype) : nbytes));
    ct_pickle_tuple(p);
    ct_pickle_binpersid(p);
    /* offset, size, stride, requires_grad, hooks */
    ct_pickle_int(p, ct_tensor_storage_offset(t));
    int ndim = ct_tensor_dim(t);
    const int64_t *shape = ct_tensor_shape(t), *strides = ct_tensor_strides(t);
    ct_pickle_mark(p);
    for (int i = 0; i < ndim; i++)
        ct_pickle_int(p, shape[i]);
    ct_pickle_tuple(p);
    ct_pickle_mark(p);
    for (int i = 0; i < ndim; i++)
        ct_pickle_int(p, strides[i]);
    ct_pickle_tuple(p);
    ct_pickle_bool(p, ct_tensor_requires_grad(t));
    ordered_dict_call(p);
    if (!cls)
        ct_pickle_global(p, "torch", ct_dtype_name(dtype));
    ct_pickle_tuple(p);
    ct_pickle_reduce(p);
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

static ct_status dump(writer *w, const ct_value *v, int depth) {
    ct_pickle *p = &w->p;
    if (!v)
        return ct_error(CT_ERROR_NULL_ARGUMENT, OP, "the value tree holds a NULL value");
    if (depth > CT_VALUE_MAX_DEPTH)
        return ct_error(CT_ERROR_VALUE, OP, "the value nests deeper than %d levels", CT_VALUE_MAX_DEPTH);
    size_t n;
    const char *s;
    switch (ct_value_kind(v)) {
    case CT_VALUE_NONE: ct_pickle_none(p); return CT_OK;
    case CT_VALUE_BOOL: ct_pickle_bool(p, ct_value_bool(v)); return CT_OK;
    case CT_VALUE_INT: ct_pickle_int(p, ct_value_int(v)); return CT_OK;
    case CT_VALUE_FLOAT: ct_pickle_float(p, ct_value_float(v)); return CT_OK;
    case CT_VALUE_STRING:
        s = ct_value_str(v, &n);
        ct_pickle_unicode(p, s, n);
        return CT_OK;
    case CT_VALUE_BYTES: {
        /* Protocol 2 has no bytes opcode: _codecs.encode(latin-1 text, 'latin1'), the
         * text being each byte as a code point, in UTF-8. */
        s = ct_value_str(v, &n);
        char *text = n > (SIZE_MAX - 1) / 2 ? NULL : ct_xmalloc(OP, 2 * n + 1);
        if (!text)
            return CT_ERROR_OUT_OF_MEMORY;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c < 0x80) {
                text[m++] = (char)c;
            } else {
                text[m++] = (char)(0xC0 | (c >> 6));
                text[m++] = (char)(0x80 | (c & 0x3F));
            }
        }
        ct_pickle_global(p, "_codecs", "encode");
        ct_pickle_unicode(p, text, m);
        free(text);
        ct_pickle_unicode(p, "latin1", 6);
        ct_pickle_tuple_n(p, 2);
        ct_pickle_reduce(p);
        return CT_OK;
    }
    case CT_VALUE_TENSOR: {
        ct_scope_begin();
        ct_tensor *t = ct_value_tensor(v);
        ct_status st = t ? put_tensor(w, t) : ct_error_null(OP);
        ct_scope_end();
        return st;
    }
    case CT_VALUE_TUPLE:
    case CT_VALUE_LIST: {
        bool tuple = ct_value_kind(v) == CT_VALUE_TUPLE;
        int64_t len = ct_value_len(v);
        if (tuple && len <= 3) {
            for (int64_t i = 0; i < len; i++)
                if (dump(w, ct_value_at(v, i), depth + 1))
                    return ct_last_status();
            ct_pickle_tuple_n(p, (int)len);
            return CT_OK;
        }
        if (tuple) {
            ct_pickle_mark(p);
            for (int64_t i = 0; i < len; i++)
                if (dump(w, ct_value_at(v, i), depth + 1))
                    return ct_last_status();
            ct_pickle_tuple(p);
            return CT_OK;
        }
        ct_pickle_empty_list(p);
        for (int64_t i = 0; i < len; i += 1000) {
            ct_pickle_mark(p);
            for (int64_t j = i; j < len && j < i + 1000; j++)
                if (dump(w, ct_value_at(v, j), depth + 1))
                    return ct_last_status();
            ct_pickle_appends(p);
        }
        return CT_OK;
    }
    case CT_VALUE_DICT: {
        int64_t len = ct_value_len(v);
        if (is_state_dict(v))
            ordered_dict_call(p);
        else
            ct_pickle_empty_dict(p);
        for (int64_t i = 0; i < len; i += 1000) {
            ct_pickle_mark(p);
            for (int64_t j = i; j < len && j < i + 1000; j++)
                if (dump(w, ct_value_key_at(v, j), depth + 1) || dump(w, ct_value_at(v, j), depth + 1))
                    return ct_last_status();
            ct_pickle_setitems(p);
        }
        return CT_OK;
    }
    }
    return ct_error(CT_ERROR_VALUE, OP, "unknown value kind %d", (int)ct_value_kind(v));
}

void *ct_value_to_pickle(const ct_value *v, ct_pickle_storage_fn storage, void *ctx, size_t *len) {
    if (len)
        *len = 0;
    if (!v || !len) {
        ct_error(CT_ERROR_NULL_ARGUMENT, OP, "%s is NULL", v ? "len" : "v");
        return NULL;
    }
    writer w = {.storage = storage, .ctx = ctx};
    ct_pickle_init(&w.p);
    ct_pickle_proto(&w.p);
    if (dump(&w, v, 0) != CT_OK) {
        ct_pickle_destroy(&w.p);
        return NULL;
    }
    ct_pickle_stop(&w.p);
    if (ct_pickle_finish(&w.p, OP) != CT_OK) {
        ct_pickle_destroy(&w.p);
        return NULL;
    }
    *len = w.p.len;
    return w.p.buf; /* the caller frees it */
}
