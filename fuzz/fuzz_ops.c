/* libFuzzer target: the public op API. Each input is a program for a small machine
 * with eight tensor slots: every few bytes pick a call (elementwise ops in their
 * functional, in-place, out= and scalar forms, reductions, scans, views including
 * as_strided, copies and casts, indexing and scatter, shape ops, matrix products,
 * convolution and pooling, sorting, padding, einsum, factories, autograd, printing),
 * its tensor arguments (a slot, which may be empty: a NULL argument), and its other
 * arguments: dims in and out of range, keepdim, dtypes, extreme scalars. Tensors are
 * made on the CPU or META from the input's bytes, in every dtype, with shapes of 0 to 4
 * dims of 0 to 5 elements, then viewed, expanded and strided.
 *
 * After every call: a result is a valid tensor (its shape and numel agree, its view lies
 * inside its storage, a bool holds only 0 and 1, every element can be read) and a
 * failure is NULL or a status with a message; the scope depth is what it was. LSan
 * checks for leaks; ASan and UBSan for the rest (Note [Sanitizer mode] is on in this
 * build, so storages are exact-size and tensors are never recycled).
 *
 * Sizes stay small (a result of at most a few thousand elements), so a run finds bugs
 * of logic, not of memory exhaustion; huge sizes come only from expand and as_strided,
 * which allocate nothing.
 *
 * Every finding of the reliability review (../shared/specs/reliability-findings.md) is
 * fixed and no call is stepped around; the library is built with clang's whole
 * -fsanitize=undefined, pointer-overflow included (empty tensors' data is not NULL:
 * Note [Empty storage] in src/core/tensor.c). The reader, pickers and result checks
 * are fuzz/fuzz_util.h's, shared with fuzz_nn. */
#define FUZZ_NAME "fuzz_ops"
#define FUZZ_TRACE_ENV "FUZZ_OPS_TRACE"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__asan_default_options(void);

/* Huge requests must fail as out of memory (the API's answer), not stop the run. */
const char *__asan_default_options(void) { return "allocator_may_return_null=1:detect_leaks=1"; }

/* ------------------------------------------------------------------ input */

/* A dim for a tensor of ndim dims: mostly valid, sometimes just out of range, rarely
 * extreme. */
static int64_t pick_dim(rd *r, int ndim) {
    unsigned k = u8(r);
    if (k < 200)
        return (int64_t)(k % (unsigned)(ndim > 0 ? ndim : 1)) - (k & 1 ? (ndim > 0 ? ndim : 1) : 0);
    if (k < 250)
        return (k & 1) ? ndim : -ndim - 1;
    return (k & 1) ? INT64_MIN : INT64_MAX;
}

static const int64_t extreme_ints[] = {0, 1, -1, 2, 3, 127, -128, 255, 65535, INT32_MAX, INT32_MIN,
                                       (int64_t)1 << 32, (int64_t)1 << 53, INT64_MAX, INT64_MIN, INT64_MIN + 1};
/* A scalar for a tensor of dtype d: floats (NaN and infinities too) mostly for
 * floating tensors, sometimes for integral ones, which must refuse what they cannot
 * hold. */
static ct_scalar pick_scalar(rd *r, ct_dtype d) {
    unsigned k = u8(r);
    bool floating = ct_dtype_is_floating(d);
    if (k < (floating ? 128u : 24u))
        return ct_scalar_float(pick_double(r));
    if (k < 200)
        return ct_scalar_int((int64_t)(k % 9) - 4);
    if (k < 216)
        return ct_scalar_bool(k & 1);
    return ct_scalar_int(extreme_ints[k % 16]);
}

/* alpha of the BINARY_ALPHA ops and value of addcmul/addcdiv: small mostly, sometimes
 * NaN, infinite or huge. */
static ct_scalar pick_alpha(rd *r, ct_dtype d) {
    unsigned k = u8(r);
    if (k >= 240)
        return ct_scalar_float(pick_double(r));
    if (ct_dtype_is_floating(d) && (k & 1))
        return ct_scalar_float((double)((int)(k % 9) - 4) / 2.0);
    return ct_scalar_int((int64_t)(k % 7) - 3);
}


/* ------------------------------------------------------------------ the machine */

#define NSLOT 8
static ct_tensor *slot[NSLOT];

static ct_tensor *arg(rd *r) { return slot[u8(r) % NSLOT]; }
static void put(rd *r, ct_tensor *t) {
    if (t)
        slot[u8(r) % NSLOT] = t;
}

static ct_tensor *make_tensor(rd *r) {
    ct_dtype d = pick_dtype(r);
    unsigned k = u8(r);
    ct_device dev = (k & 7) == 7 ? CT_META : CT_CPU;
    int nd = (int)(k >> 3) % 5;
    int64_t shape[4];
    for (int i = 0; i < nd; i++)
        shape[i] = u8(r) % 6;
    ct_tensor *t = ct_empty(shape, nd, d, dev);
    if (!t || dev.type == CT_DEVICE_META)
        return t;
    uint8_t *p = ct_tensor_data(t);
    size_t n = (size_t)ct_tensor_numel(t) * ct_tensor_element_size(t);
    unsigned mode = u8(r) % 4;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = mode == 0 ? (uint8_t)u8(r) : mode == 1 ? (uint8_t)(i % 7) : mode == 2 ? 0 : 0x3f;
        p[i] = d == CT_DTYPE_BOOL ? b & 1 : b;
    }
    return t;
}

typedef ct_tensor *(*un_fn)(const ct_tensor *);
typedef ct_tensor *(*un_ip)(ct_tensor *);
typedef ct_tensor *(*un_out)(const ct_tensor *, ct_tensor *);
typedef ct_tensor *(*bin_fn)(const ct_tensor *, const ct_tensor *);
typedef ct_tensor *(*bin_ip)(ct_tensor *, const ct_tensor *);
typedef ct_tensor *(*bin_out)(const ct_tensor *, const ct_tensor *, ct_tensor *);
typedef ct_tensor *(*bin_s)(const ct_tensor *, ct_scalar);
typedef ct_tensor *(*bin_s_ip)(ct_tensor *, ct_scalar);

#define UN(n) {#n, ct_##n, ct_##n##_, ct_##n##_out}
static const struct {
    const char *name;
    un_fn f;
    un_ip ip;
    un_out out;
} unary[] = {
    UN(neg),   UN(abs),   UN(exp),    UN(log),        UN(sqrt),       UN(sin),   UN(tanh),  UN(sigmoid),
    UN(relu),  UN(sign),  UN(sgn),    UN(floor),      UN(ceil),       UN(round), UN(trunc), UN(frac),
    UN(reciprocal), UN(square), UN(logical_not), UN(bitwise_not), UN(erf), UN(erfinv), UN(lgamma),
    UN(digamma), UN(expm1), UN(log1p), UN(rsqrt), UN(relu6), UN(selu), UN(silu), UN(mish), UN(hardsigmoid),
    UN(hardswish), UN(exp2), UN(log2), UN(atan), UN(acosh), UN(cos),
};
#define NUNARY (sizeof unary / sizeof unary[0])

#define BIN(n) {#n, ct_##n, ct_##n##_, ct_##n##_out, ct_##n##_scalar, ct_##n##_scalar_}
static const struct {
    const char *name;
    bin_fn f;
    bin_ip ip;
    bin_out out;
    bin_s s;
    bin_s_ip s_ip;
} binary[] = {
    BIN(add),         BIN(sub),         BIN(mul),         BIN(div),           BIN(maximum),
    BIN(minimum),     BIN(eq),          BIN(ne),          BIN(lt),            BIN(le),
    BIN(gt),          BIN(ge),          BIN(floor_divide), BIN(remainder),    BIN(fmod),
    BIN(pow),         BIN(atan2),       BIN(hypot),       BIN(copysign),      BIN(fmax),
    BIN(fmin),        BIN(logical_and), BIN(logical_or),  BIN(logical_xor),   BIN(bitwise_and),
    BIN(bitwise_or),  BIN(bitwise_xor), BIN(bitwise_left_shift), BIN(bitwise_right_shift), BIN(clamp_min),
    BIN(clamp_max),
};
#define NBINARY (sizeof binary / sizeof binary[0])

typedef ct_tensor *(*red_dt)(const ct_tensor *, const int64_t *, int, bool, ct_dtype);
typedef ct_tensor *(*red)(const ct_tensor *, const int64_t *, int, bool);
static const struct {
    const char *name;
    red_dt f;
} reductions_dt[] = {{"sum", ct_sum}, {"nansum", ct_nansum}, {"mean", ct_mean}, {"nanmean", ct_nanmean},
                     {"prod", ct_prod}};
static const struct {
    const char *name;
    red f;
} reductions[] = {{"amax", ct_amax}, {"amin", ct_amin}, {"logsumexp", ct_logsumexp}, {"all", ct_all}, {"any", ct_any}};

typedef ct_tensor *(*scan_fn)(const ct_tensor *, int64_t, ct_dtype);
static const struct {
    const char *name;
    scan_fn f;
} scans[] = {{"cumsum", ct_cumsum}, {"cumprod", ct_cumprod}, {"softmax", ct_softmax}, {"log_softmax", ct_log_softmax}};

static ct_tensor *index_tensor(rd *r, const ct_tensor *like) {
    /* int64 indices, mostly in range of a dim of like */
    int64_t n = pick_size(r);
    if (n < 0)
        n = 0;
    int64_t lim = 1;
    if (like && ct_tensor_dim(like) > 0)
        lim = ct_tensor_size(like, (int)(u8(r) % (unsigned)ct_tensor_dim(like)));
    int64_t v[9];
    for (int64_t i = 0; i < n; i++) {
        unsigned k = u8(r);
        v[i] = k < 240 ? (int64_t)(k % (uint64_t)(lim > 0 ? lim : 1)) - (k & 1 ? lim : 0) : extreme_ints[k % 16];
    }
    return ct_from_data(v, &n, 1, CT_I64);
}

/* ------------------------------------------------------------------ one call */

#define CALL(name, ...) put(r, checked((ct_clear_error(), (__VA_ARGS__)), name))
#define CALL_ST(name, ...) checked_status((ct_clear_error(), (__VA_ARGS__)), name)

static void step(rd *r) {
    unsigned op = u8(r);
    ct_tensor *a = arg(r), *b = arg(r), *c = arg(r);
    ct_dtype da = a ? ct_tensor_dtype(a) : CT_F32;
    switch (op % 40) {
    case 0:
    case 1:
        CALL("make", make_tensor(r));
        break;
    case 2: { /* factories */
        unsigned k = u8(r) % 6;
        ct_dtype d = pick_dtype(r);
        ct_device dev = u8(r) & 1 ? CT_META : CT_CPU;
        if (k == 0)
            CALL("zeros", ct_zeros((int64_t[]){pick_size(r), pick_size(r)}, (int)(u8(r) % 3), d, dev));
        else if (k == 1)
            CALL("full", ct_full((int64_t[]){pick_size(r)}, 1, pick_scalar(r, d), d, dev));
        else if (k == 2 && dev.type == CT_DEVICE_META) /* any bounds: nothing is allocated on META */
            CALL("arange", ct_arange(ct_scalar_float(pick_double(r)), ct_scalar_float(pick_double(r)),
                                     ct_scalar_float(pick_double(r)), u8(r) & 1 ? CT_DTYPE_UNDEFINED : d, dev));
        else if (k == 2) /* small bounds on the CPU, where the result is filled */
            CALL("arange", ct_arange(ct_scalar_int(range(r, -8, 8)), ct_scalar_int(range(r, -8, 8)),
                                     ct_scalar_int(range(r, -3, 3)), CT_DTYPE_UNDEFINED, dev));
        else if (k == 3)
            CALL("eye", ct_eye(pick_size(r), pick_size(r), d, dev));
        else if (k == 4) { /* small triangles, and huge ones with few indices (or none) */
            int64_t rows = range(r, -2, 12), cols = range(r, -2, 12), off = range(r, -20, 20);
            unsigned big = u8(r) % 8;
            if (big == 0)
                rows = (int64_t)1 << 40, cols = range(r, 0, 2), off = u8(r) & 1 ? INT64_MIN : -((int64_t)1 << 40) + 3;
            else if (big == 1)
                rows = (int64_t)1 << 40, cols = (int64_t)1 << 40, off = INT64_MAX; /* refused: too many */
            CALL("tril_indices", u8(r) & 1 ? ct_tril_indices(rows, cols, off, CT_DTYPE_UNDEFINED, dev)
                                           : ct_triu_indices(cols, rows, off == INT64_MIN ? INT64_MAX : -off, CT_DTYPE_UNDEFINED, dev));
        }
        else
            CALL("linspace", ct_linspace(pick_double(r), pick_double(r), pick_size(r), ct_dtype_is_floating(d) ? d : CT_F32, dev));
        break;
    }
    case 3:
    case 4: { /* unary: functional, in place, out= */
        unsigned k = u8(r) % NUNARY, form = u8(r) % 3;
        if (form == 0)
            CALL(unary[k].name, unary[k].f(a));
        else if (form == 1)
            CALL(unary[k].name, unary[k].ip(a));
        else
            CALL(unary[k].name, unary[k].out(a, b));
        break;
    }
    case 5:
    case 6:
    case 7: { /* binary */
        unsigned k = u8(r) % NBINARY, form = u8(r) % 6;
        if (form == 0)
            CALL(binary[k].name, binary[k].f(a, b));
        else if (form == 1)
            CALL(binary[k].name, binary[k].ip(a, b));
        else if (form == 2)
            CALL(binary[k].name, binary[k].out(a, b, c));
        else if (form == 3)
            CALL(binary[k].name, binary[k].s(a, pick_scalar(r, da)));
        else if (form == 4)
            CALL(binary[k].name, binary[k].s_ip(a, pick_scalar(r, da)));
        else if (form == 5)
            CALL("add_alpha", ct_add_alpha(a, b, pick_alpha(r, da)));
        break;
    }
    case 8: { /* ternary */
        unsigned k = u8(r) % 6;
        if (k == 0) {
            ct_scalar lo = pick_scalar(r, da), hi = pick_scalar(r, da);
            unsigned w = u8(r) % 3;
            CALL("clamp", ct_clamp(a, w == 1 ? NULL : &lo, w == 2 ? NULL : &hi));
        } else if (k == 1) {
            CALL("clamp_tensor", ct_clamp_tensor(a, b, u8(r) & 1 ? c : NULL));
        } else if (k == 2) {
            CALL("lerp", ct_lerp(a, b, c));
        } else if (k == 3 || k == 4) {
            ct_scalar v = pick_alpha(r, CT_F64); /* a float value on integers too */
            if (k == 3)
                CALL("addcmul", ct_addcmul(a, b, c, v));
            else
                CALL("addcdiv", ct_addcdiv(a, b, c, v));
        } else if (k == 5) {
            CALL("where", ct_where(a, b, c));
        }
        break;
    }
    case 9:
    case 10: { /* reductions */
        int nd = a ? ct_tensor_dim(a) : 0;
        int64_t dims[3] = {pick_dim(r, nd), pick_dim(r, nd), pick_dim(r, nd)};
        int ndims = (int)(u8(r) % 4);
        bool keep = u8(r) & 1;
        unsigned k = u8(r) % 13;
        ct_dtype dt = u8(r) < 200 ? CT_DTYPE_UNDEFINED : pick_dtype(r);
        if (k < 5)
            CALL(reductions_dt[k].name, reductions_dt[k].f(a, ndims ? dims : NULL, ndims, keep, dt));
        else if (k < 10)
            CALL(reductions[k - 5].name, reductions[k - 5].f(a, ndims ? dims : NULL, ndims, keep));
        else if (k == 10)
            CALL("var", ct_var(a, ndims ? dims : NULL, ndims, (double)range(r, -1, 3), keep));
        else if (k == 11)
            CALL("norm", ct_norm(a, pick_double(r), ndims ? dims : NULL, ndims, keep, dt));
        else
            CALL("count_nonzero", ct_count_nonzero(a, ndims ? dims : NULL, ndims));
        break;
    }
    case 11: { /* scans, arg and min/max along a dim */
        int nd = a ? ct_tensor_dim(a) : 0;
        int64_t dim = pick_dim(r, nd);
        unsigned k = u8(r) % 7;
        if (k < 4) {
            CALL(scans[k].name, scans[k].f(a, dim, u8(r) < 200 ? CT_DTYPE_UNDEFINED : pick_dtype(r)));
        } else if (k == 4) {
            CALL("argmax_dim", ct_argmax_dim(a, dim, u8(r) & 1));
        } else if (k == 5) {
            ct_tensor *v = NULL, *i = NULL;
            CALL_ST("max_dim", ct_max_dim(a, dim, u8(r) & 1, &v, &i));
            put(r, v ? checked(v, "max_dim values") : NULL);
            put(r, i ? checked(i, "max_dim indices") : NULL);
        } else {
            ct_tensor *v = NULL, *i = NULL;
            CALL_ST("cummax", ct_cummax(a, dim, &v, &i));
            put(r, v ? checked(v, "cummax values") : NULL);
            put(r, i ? checked(i, "cummax indices") : NULL);
        }
        break;
    }
    case 12:
    case 13:
    case 14: { /* views */
        int nd = a ? ct_tensor_dim(a) : 0;
        unsigned k = u8(r) % 14;
        int64_t sh[4] = {pick_size(r), pick_size(r), pick_size(r), pick_size(r)};
        int n = (int)(u8(r) % 5);
        switch (k) {
        case 0: CALL("view", ct_view(a, sh, n)); break;
        case 1: CALL("reshape", ct_reshape(a, sh, n)); break;
        case 2: CALL("transpose", ct_transpose(a, (int)pick_dim(r, nd), (int)pick_dim(r, nd))); break;
        case 3: {
            int64_t perm[4] = {pick_dim(r, nd), pick_dim(r, nd), pick_dim(r, nd), pick_dim(r, nd)};
            CALL("permute", ct_permute(a, perm, nd < 4 ? nd : 4));
            break;
        }
        case 4: /* to sizes up to 5; -1 keeps a dim */
            for (int i = 0; i < 4; i++)
                sh[i] = sh[i] < 0 ? -1 : sh[i];
            CALL("expand", ct_expand(a, sh, n));
            break;
        case 5: CALL("unsqueeze", ct_unsqueeze(a, (int)pick_dim(r, nd + 1))); break;
        case 6: CALL("squeeze", u8(r) & 1 ? ct_squeeze(a) : ct_squeeze_dim(a, (int)pick_dim(r, nd))); break;
        case 7: CALL("narrow", ct_narrow(a, (int)pick_dim(r, nd), range(r, -6, 6), pick_size(r))); break;
        case 8: CALL("select", ct_select(a, (int)pick_dim(r, nd), range(r, -6, 6))); break;
        case 9: CALL("slice", ct_slice(a, (int)pick_dim(r, nd), range(r, -8, 8), range(r, -8, 8), range(r, -1, 3))); break;
        case 10: CALL("unfold", ct_unfold(a, (int)pick_dim(r, nd), pick_size(r), range(r, -1, 3))); break;
        case 11: CALL("diagonal", ct_diagonal(a, range(r, -4, 4), (int)pick_dim(r, nd), (int)pick_dim(r, nd))); break;
        case 12: { /* small strides, any stride on a dim of size 0 or 1; any offset for an empty view */
            int64_t st[4] = {range(r, 0, 7), range(r, 0, 7), range(r, 0, 7), range(r, 0, 7)};
            for (int i = 0; i < 4; i++) {
                sh[i] = sh[i] < 0 ? 0 : sh[i];
                if (sh[i] <= 1 && u8(r) < 32)
                    st[i] = (int64_t)1 << (40 + u8(r) % 22);
            }
            bool empty = false;
            for (int i = 0; i < n; i++)
                empty |= sh[i] == 0;
            /* an empty view may sit at any offset */
            int64_t off = empty && u8(r) < 64 ? INT64_MAX - range(r, 0, 9) : range(r, 0, 9);
            CALL("as_strided", ct_as_strided(a, sh, st, n, off));
            break;
        }
        default: CALL("flatten", ct_flatten(a, (int)pick_dim(r, nd), (int)pick_dim(r, nd))); break;
        }
        break;
    }
    case 15: { /* copies and casts */
        unsigned k = u8(r) % 6;
        if (k == 0)
            CALL("clone", ct_clone(a));
        else if (k == 1)
            CALL("contiguous", ct_contiguous(a));
        else if (k == 2)
            CALL("to_dtype", ct_to_dtype(a, pick_dtype(r)));
        else if (k == 3)
            CALL("copy_", ct_copy_(a, b));
        else if (k == 4)
            CALL("to_device", ct_to_device(a, u8(r) & 1 ? CT_META : CT_CPU));
        else if (k == 5)
            CALL("fill_", ct_fill_(a, pick_scalar(r, da)));
        break;
    }
    case 16:
    case 17: { /* indexing */
        int nd = a ? ct_tensor_dim(a) : 0;
        int64_t dim = pick_dim(r, nd);
        ct_tensor *idx = u8(r) < 200 ? index_tensor(r, a) : b;
        unsigned k = u8(r) % 9;
        if (k == 0) {
            CALL("index_select", ct_index_select(a, dim, idx));
        } else if (k == 1) {
            CALL("gather", ct_gather(a, dim, idx));
        } else if (k == 2 || k == 3) {
            if (k == 2)
                CALL("scatter_add", ct_scatter_add(a, dim, idx, c));
            else
                CALL("scatter", ct_scatter(a, dim, idx, c));
        } else if (k == 4) {
            CALL("index_add", ct_index_add(a, dim, idx, c, pick_alpha(r, da)));
        } else if (k == 5) {
            CALL("masked_fill", ct_masked_fill(a, b, pick_scalar(r, da)));
        } else if (k == 6) {
            CALL("take", ct_take(a, idx));
        } else if (k == 7) {
            const ct_tensor *ix[2] = {idx, u8(r) & 1 ? NULL : idx};
            CALL("index", ct_index(a, ix, (int)(u8(r) % 3)));
        } else {
            CALL("nonzero", ct_nonzero(a));
        }
        break;
    }
    case 18:
    case 19: { /* shape ops */
        int nd = a ? ct_tensor_dim(a) : 0;
        int64_t dim = pick_dim(r, nd);
        unsigned k = u8(r) % 10;
        if (k == 0) {
            const ct_tensor *ts[3] = {a, b, c};
            CALL("cat", ct_cat(ts, (int)(u8(r) % 4), dim));
        } else if (k == 1) {
            const ct_tensor *ts[3] = {a, b, c};
            CALL("stack", ct_stack(ts, (int)(u8(r) % 4), dim));
        } else if (k == 2 || k == 3) {
            ct_tensor *out[6] = {NULL};
            int64_t n = u8(r) < 16 ? extreme_ints[u8(r) % 16] : range(r, -1, 7);
            unsigned w = u8(r) % 3;
            int64_t sizes[3] = {range(r, -1, 3), range(r, 0, 5), u8(r) < 16 ? INT64_MAX : range(r, 0, 5)};
            int got = (ct_clear_error(), w == 0 ? ct_split(a, n, dim, out, 6)
                                         : w == 1 ? ct_chunk(a, n, dim, out, 6)
                                                  : ct_split_with_sizes(a, u8(r) < 16 ? NULL : sizes, (int)range(r, -1, 3),
                                                                        dim, out, 6));
            if (got < 0 && !ct_last_error()[0])
                fail("a negative count without an error message", "split/chunk");
            for (int i = 0; i < 6 && i < got; i++)
                put(r, checked(out[i], "split/chunk piece"));
        } else if (k == 4) {
            ct_tensor *out[6] = {NULL};
            int got = (ct_clear_error(), ct_unbind(a, dim, out, 6));
            if (got < 0 && !ct_last_error()[0])
                fail("a negative count without an error message", "unbind");
            for (int i = 0; i < 6 && i < got; i++)
                put(r, checked(out[i], "unbind piece"));
        } else if (k == 5) {
            int64_t dims[2] = {pick_dim(r, nd), pick_dim(r, nd)};
            CALL("flip", ct_flip(a, dims, (int)(u8(r) % 3)));
        } else if (k == 6) {
            int64_t shifts[2] = {range(r, -7, 7), range(r, -7, 7)}, dims[2] = {dim, pick_dim(r, nd)};
            CALL("roll", ct_roll(a, shifts, dims, (int)(u8(r) % 3)));
        } else if (k == 7) { /* counts small, or huge (refused or out of memory) */
            int64_t reps[4] = {range(r, 0, 3), range(r, 0, 3), range(r, 0, 3), range(r, 0, 3)};
            if (u8(r) < 16)
                reps[u8(r) % 4] = (int64_t)1 << 62;
            CALL("repeat", ct_repeat(a, reps, (int)(u8(r) % 5)));
        } else if (k == 8) {
            CALL("tril", u8(r) & 1 ? ct_tril(a, range(r, -4, 4)) : ct_triu(a, range(r, -4, 4)));
        } else {
            int64_t pad[4] = {range(r, -3, 3), range(r, -3, 3), range(r, -3, 3), range(r, -3, 3)};
            static const char *modes[] = {"constant", "reflect", "replicate", "circular", "bogus"};
            CALL("pad", ct_pad(a, pad, 2 * (int)(u8(r) % 3), modes[u8(r) % 5], pick_double(r)));
        }
        break;
    }
    case 20:
    case 21: { /* matrix products */
        unsigned k = u8(r) % 7;
        if (k == 0)
            CALL("mm", ct_mm(a, b));
        else if (k == 1)
            CALL("bmm", ct_bmm(a, b));
        else if (k == 2)
            CALL("matmul", ct_matmul(a, b));
        else if (k == 3)
            CALL("dot", ct_dot(a, b));
        else if (k == 4)
            CALL("addmm", ct_addmm(c, a, b, pick_alpha(r, da), pick_alpha(r, da)));
        else if (k == 5)
            CALL("linear", ct_linear(a, b, u8(r) & 1 ? c : NULL));
        else
            CALL("outer", ct_outer(a, b));
        break;
    }
    case 22: { /* convolution and pooling: small strides, pads, dilations, kernels, or huge ones */
        int64_t st[2] = {range(r, 0, 3), range(r, 0, 3)}, pd[2] = {range(r, -1, 2), range(r, -1, 2)},
                dl[2] = {range(r, 0, 2), range(r, 0, 2)}, ks[2] = {range(r, 0, 4), range(r, 0, 4)};
        if (u8(r) < 24) { /* one of them at 2^31 .. 2^63 - 1; paddings only where the size overflows
                           * (a padding of 2^31 makes a result of 2^62 elements, out of memory at best) */
            int64_t *pick[4] = {st, pd, dl, ks};
            unsigned w = u8(r) % 4;
            pick[w][u8(r) % 2] = u8(r) & 1 || w == 1 ? INT64_MAX : (int64_t)1 << (31 + u8(r) % 32);
        }
        unsigned k = u8(r) % 4;
        if (k == 0) {
            CALL("conv2d", ct_conv2d(a, b, u8(r) & 1 ? c : NULL, st, pd, dl, range(r, 0, 3)));
        } else if (k == 1) {
            ct_tensor *ind = NULL;
            CALL("max_pool2d", ct_max_pool2d(a, ks, u8(r) & 1 ? st : NULL, pd, dl, u8(r) & 1, &ind));
            put(r, ind ? checked(ind, "max_pool2d indices") : NULL);
        } else if (k == 2) {
            CALL("avg_pool2d", ct_avg_pool2d(a, ks, u8(r) & 1 ? st : NULL, pd, u8(r) & 1, u8(r) & 1, range(r, -1, 2)));
        } else {
            int64_t ns[2] = {pick_size(r), pick_size(r)};
            CALL("layer_norm", ct_layer_norm(a, ns, (int)(u8(r) % 3), u8(r) & 1 ? b : NULL, NULL, 1e-5));
        }
        break;
    }
    case 23: { /* sorting and selection */
        int nd = a ? ct_tensor_dim(a) : 0;
        int64_t dim = pick_dim(r, nd);
        unsigned k = u8(r) % 5;
        ct_tensor *ind = NULL;
        if (k == 0) {
            CALL("sort", ct_sort(a, dim, u8(r) & 1, &ind));
        } else if (k == 1) {
            CALL("topk", ct_topk(a, range(r, -1, 5), dim, u8(r) & 1, &ind));
        } else if (k == 2) {
            CALL("kthvalue", ct_kthvalue(a, range(r, -1, 5), dim, u8(r) & 1, &ind));
        } else if (k == 3) {
            ct_tensor *inv = NULL, *cnt = NULL;
            CALL("unique", ct_unique(a, true, u8(r) & 1 ? &inv : NULL, u8(r) & 1 ? &cnt : NULL));
            put(r, inv ? checked(inv, "unique inverse") : NULL);
            put(r, cnt ? checked(cnt, "unique counts") : NULL);
        } else {
            CALL("argsort", ct_argsort(a, dim, u8(r) & 1));
        }
        put(r, ind ? checked(ind, "indices") : NULL);
        break;
    }
    case 24: { /* einsum over a random equation of up to two operands */
        static const char letters[] = "ijk";
        char eq[32];
        size_t n = 0;
        int nops = 1 + (int)(u8(r) % 2);
        for (int o = 0; o < nops; o++) {
            if (o)
                eq[n++] = ',';
            int len = (int)(u8(r) % 4);
            for (int i = 0; i < len; i++)
                eq[n++] = letters[u8(r) % 3];
        }
        if (u8(r) & 1) {
            eq[n++] = '-';
            eq[n++] = '>';
            int len = (int)(u8(r) % 3);
            for (int i = 0; i < len; i++)
                eq[n++] = letters[u8(r) % 3];
        }
        eq[n] = '\0';
        const ct_tensor *ops[2] = {a, b};
        CALL("einsum", ct_einsum(eq, ops, nops));
        break;
    }
    case 25: { /* autograd */
        unsigned k = u8(r) % 6;
        if (k == 0) {
            CALL("requires_grad_", ct_tensor_set_requires_grad(a, u8(r) & 1));
        } else if (k == 1) {
            ct_scope_begin();
            ct_tensor *s = ct_sum(a, NULL, 0, false, CT_DTYPE_UNDEFINED);
            if (s && ct_tensor_requires_grad(s))
                CALL_ST("backward", ct_backward(s, NULL, u8(r) & 1, false));
            ct_scope_end();
        } else if (k == 2) {
            ct_tensor *g = (ct_clear_error(), ct_tensor_grad(a));
            if (g)
                put(r, checked(g, "grad"));
        } else if (k == 3) {
            CALL_ST("retain_grad", ct_tensor_retain_grad(a));
        } else if (k == 4) {
            CALL_ST("set_grad", ct_tensor_set_grad(a, u8(r) & 1 ? b : NULL));
        } else {
            CALL("detach", u8(r) & 1 ? ct_detach(a) : ct_detach_(a));
        }
        break;
    }
    case 26: { /* printing */
        char buf[200];
        if (u8(r) == 0)
            ct_set_printoptions(range(r, -1, 12), range(r, -1, 20), (int)range(r, -1, 4), (int)range(r, -1, 100),
                                (int)range(r, -2, 1));
        int64_t n = (ct_clear_error(), ct_to_string(a, buf, sizeof buf));
        if (n < 0 && !ct_last_error()[0])
            fail("a negative length without an error message", "to_string");
        if (n >= 0 && strlen(buf) != (size_t)(n < (int64_t)sizeof buf ? n : (int64_t)sizeof buf - 1))
            fail("a length that does not match the text", "to_string");
        break;
    }
    case 27: { /* nn functional */
        unsigned k = u8(r) % 7;
        const ct_gelu_approximate ap = (ct_gelu_approximate)(u8(r) % 3); /* 2: no such form */
        if (k == 0)
            CALL("cross_entropy", ct_cross_entropy(a, b, NULL, (ct_reduction)(u8(r) % 3), -100, pick_double(r) > 0 ? 0.1 : 0.0));
        else if (k == 1)
            CALL("dropout", ct_dropout(a, 0.5, false));
        else if (k == 2)
            CALL("embedding", ct_embedding(a, b, -1));
        else if (k == 3)
            CALL("one_hot", ct_one_hot(a, range(r, 0, 6))); /* -1 would size the result by the data */
        else if (k == 4) /* b's transpose as proj's weight fits whenever b fits fc */
            CALL("gelu_mlp", ct_gelu_mlp(a, b, u8(r) & 1 ? c : NULL, u8(r) & 1 ? ct_t(b) : c, NULL, ap));
        else if (k == 5) {
            ct_tensor *gh = NULL, *gb = NULL;
            CALL_ST("gelu_mlp_hidden_backward", ct_gelu_mlp_hidden_backward(a, b, c, ap, &gh, u8(r) & 1 ? &gb : NULL));
            put(r, gh ? checked(gh, "gelu_mlp_hidden_backward") : NULL);
            put(r, gb ? checked(gb, "gelu_mlp_hidden_backward bias") : NULL);
        } else { /* the backward into the logits themselves or another tensor */
            ct_tensor *lse = NULL;
            ct_reduction red = (ct_reduction)(u8(r) % 3);
            /* class 0 for every row of a 2-d a, mostly: random slots are rarely targets */
            ct_tensor *t = a && ct_tensor_dim(a) == 2 && u8(r) < 200
                               ? ct_zeros((int64_t[]){ct_tensor_size(a, 0)}, 1, CT_I64, ct_tensor_device(a))
                               : b;
            ct_tensor *loss = (ct_clear_error(), ct_cross_entropy_fused(a, t, red, -100, &lse));
            if (loss && lse)
                CALL("cross_entropy_fused_backward_out",
                     ct_cross_entropy_fused_backward_out(ct_ones_like(loss, CT_DTYPE_UNDEFINED), a, t, lse, red, -100,
                                                         u8(r) & 1 ? a : c));
        }
        break;
    }
    default: /* more of the common ones: make, unary, binary */
        if (op % 3 == 0)
            CALL("make", make_tensor(r));
        else
            CALL(binary[op % NBINARY].name, binary[op % NBINARY].f(a, b));
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    count_calls_at_exit();
    rd r = {data, size};
    memset(slot, 0, sizeof slot);
    ct_manual_seed(0);
    ct_scope_begin();
    int depth = ct_scope_depth();
    bool grad = ct_is_grad_enabled();
    for (int i = 0; i < 96 && r.n > 0; i++) {
        step(&r);
        ncalls++;
        if (ct_scope_depth() != depth)
            fail("the scope depth changed", "a call");
    }
    ct_scope_end();
    memset(slot, 0, sizeof slot); /* so that a leak check after the input sees every cycle */
    ct_set_grad_enabled(grad);
    ct_reset_printoptions();
    ct_clear_error();
    return 0;
}
