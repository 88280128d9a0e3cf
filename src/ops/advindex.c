/* Advanced indexing: ct_index (t[i0, i1, ...]) and index_put (t[i0, ...] = v, with
 * accumulate), for CPU and META.
 *
 * Note [Advanced indexing]
 * The index list holds one entry per leading dim of t: NULL is a full slice ':', an
 * int64 tensor picks positions along its dim, and a bool (or uint8) mask of k dims
 * stands for the k int64 tensors of its nonzero() positions, covering k dims. Dims past
 * the list are full slices. The int64 tensors broadcast together to one shape B.
 * Where B goes in the result follows NumPy and PyTorch: when the indexed dims are
 * adjacent, B replaces them in place; when slices separate them, B comes first and
 * every sliced dim follows in order. Example: t of shape (5, 6, 7), t[:, i, j] with i, j
 * of shape (2,) gives (5, 2); t[i, :, j] gives (2, 6).
 *
 * Both ops walk the result in row-major order; each result coordinate splits into the
 * position in B (which picks one entry of every index tensor, read through broadcast
 * strides) and the coordinates of the sliced dims. A mask needs its data to become
 * positions, so a mask on META is refused; int64 indices work on META. */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "meta/kernels.h"
#include "ctorch.h"
#include "cpu/loops.h"
#include "ops/indexing.h"
#ifdef CT_HAVE_CUDA
#include "cuda/cuda_ops.h"
#endif

typedef struct {
    int src_nd;
    const ct_tensor *idx[CT_MAX_DIMS];        /* per dim of t: int64 positions, or NULL (slice) */
    int64_t istr[CT_MAX_DIMS][CT_MAX_DIMS];   /* idx[d]'s strides broadcast to bshape */
    int64_t bshape[CT_MAX_DIMS];
    int bnd;
    int insert; /* result dims before B */
    int64_t oshape[CT_MAX_DIMS];
    int ond;
    int slice_dim[CT_MAX_DIMS]; /* for each sliced dim in order: its dim in t */
    int nslice;
} index_plan;

static ct_status plan_index(const char *op, const ct_tensor *t, const ct_tensor *const *indices, int n,
                            index_plan *p) {
    memset(p, 0, sizeof *p);
    p->src_nd = t->ndim;
    if (n < 0 || (n > 0 && !indices))
        return ct_error(CT_ERROR_VALUE, op, "invalid index list");
    int d = 0;
    for (int e = 0; e < n; e++) {
        const ct_tensor *ix = indices[e];
        if (!ix) {
            if (d >= t->ndim)
                return ct_error(CT_ERROR_INDEX, op, "too many indices for tensor of dimension %d", t->ndim);
            d++;
            continue;
        }
        if (ix->dtype == CT_DTYPE_INT32 && !(ix = ct_to_dtype(ix, CT_DTYPE_INT64))) /* a temporary of the dispatch scope */
            return ct_last_status();
        if (ix->dtype == CT_DTYPE_INT64) {
            if (d >= t->ndim)
                return ct_error(CT_ERROR_INDEX, op, "too many indices for tensor of dimension %d", t->ndim);
            p->idx[d++] = ix;
            continue;
        }
        if (ix->dtype != CT_DTYPE_BOOL && ix->dtype != CT_DTYPE_UINT8)
            return ct_error(CT_ERROR_INDEX, op, "tensors used as indices must be long, int, byte or bool tensors");
        if (ix->ndim == 0)
            return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "0-dimensional masks are not supported as indices");
        if (d + ix->ndim > t->ndim)
            return ct_error(CT_ERROR_INDEX, op, "too many indices for tensor of dimension %d", t->ndim);
        for (int j = 0; j < ix->ndim; j++)
            if (ix->shape[j] != t->shape[d + j]) {
                char a[96], b[96];
                return ct_error(CT_ERROR_INDEX, op,
                                "The shape of the mask %s at index %d does not match the shape of the indexed tensor "
                                "%s at index %d",
                                ct_shape_str(ix->shape, ix->ndim, a, sizeof a), j,
                                ct_shape_str(t->shape, t->ndim, b, sizeof b), d + j);
            }
        if (ct_ix_is_meta(ix) || ct_ix_is_meta(t))
            return ct_error(CT_ERROR_NOT_IMPLEMENTED, op,
                            "a mask index makes the result's shape depend on the data; META tensors have none");
        ct_tensor *nz = ct_nonzero(ix); /* (count, k); a temporary of the dispatch scope */
        if (!nz)
            return ct_last_status();
        for (int j = 0; j < ix->ndim; j++)
            if (!(p->idx[d + j] = ct_select(nz, 1, j)))
                return ct_last_status();
        d += ix->ndim;
    }
    /* Broadcast the index tensors together. */
    int first = -1, last = -1;
    for (int k = 0; k < t->ndim; k++) {
        const ct_tensor *ix = p->idx[k];
        if (!ix)
            continue;
        if (first < 0)
            first = k;
        last = k;
        int nd = ix->ndim > p->bnd ? ix->ndim : p->bnd;
        int64_t shape[CT_MAX_DIMS];
        bool ok = true;
        for (int i = 0; i < nd; i++) {
            int ia = i - (nd - p->bnd), ib = i - (nd - ix->ndim);
            int64_t sa = ia >= 0 ? p->bshape[ia] : 1, sb = ib >= 0 ? ix->shape[ib] : 1;
            ok = ok && (sa == sb || sa == 1 || sb == 1);
            shape[i] = sa == 1 ? sb : sa;
        }
        if (!ok) {
            char msg[512];
            size_t len = 0;
            msg[0] = '\0';
            for (int j = 0; j < t->ndim; j++)
                if (p->idx[j]) {
                    char s[96];
                    len += (size_t)snprintf(msg + len, len < sizeof msg ? sizeof msg - len : 0, "%s%s",
                                            len ? ", " : "", ct_shape_str(p->idx[j]->shape, p->idx[j]->ndim, s, sizeof s));
                    if (len >= sizeof msg)
                        break;
                }
            return ct_error(CT_ERROR_INDEX, op, "shape mismatch: indexing tensors could not be broadcast together with shapes %s",
                            msg);
        }
        p->bnd = nd;
        memcpy(p->bshape, shape, sizeof(int64_t) * (size_t)nd);
    }
    for (int k = 0; k < t->ndim; k++)
        if (p->idx[k])
            ct_broadcast_strides(p->idx[k], p->bshape, p->bnd, p->istr[k]);
    bool adjacent = true;
    for (int k = first; first >= 0 && k <= last; k++)
        adjacent = adjacent && p->idx[k] != NULL;
    for (int k = 0; k < t->ndim; k++)
        if (!p->idx[k])
            p->slice_dim[p->nslice++] = k;
    p->insert = first < 0 || !adjacent ? 0 : first;
    if (p->nslice + p->bnd > CT_MAX_DIMS)
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "the result would have more than %d dimensions", CT_MAX_DIMS);
    for (int i = 0; i < p->insert; i++)
        p->oshape[p->ond++] = t->shape[p->slice_dim[i]];
    for (int i = 0; i < p->bnd; i++)
        p->oshape[p->ond++] = p->bshape[i];
    for (int i = p->insert; i < p->nslice; i++)
        p->oshape[p->ond++] = t->shape[p->slice_dim[i]];
    return CT_OK;
}

/* Offset (in elements, through strides) in t of the result element at coordinate oc. */
static ct_status plan_offset(const char *op, const index_plan *p, const ct_tensor *t, const int64_t *strides,
                             const int64_t *oc, int64_t *off) {
    int64_t o = 0;
    const int64_t *bc = oc + p->insert;
    for (int i = 0; i < p->nslice; i++) {
        int pos = i < p->insert ? i : i + p->bnd;
        o += oc[pos] * strides[p->slice_dim[i]];
    }
    /* PyTorch numbers the dim in its message among the indexed dims only */
    for (int d = 0, nth = 0; d < p->src_nd; d++) {
        if (!p->idx[d])
            continue;
        int64_t v = ct_ix_load_index(p->idx[d], ct_ix_offset(bc, p->istr[d], p->bnd));
        int64_t size = t->shape[d], w = v < 0 ? v + size : v;
        if (w < 0 || w >= size)
            return ct_error(CT_ERROR_INDEX, op, "index %lld is out of bounds for dimension %d with size %lld",
                            (long long)v, nth, (long long)size);
        o += w * strides[d];
        nth++;
    }
    *off = o;
    return CT_OK;
}

static ct_status index_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "index";
    const ct_tensor *t = call->in[0];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    index_plan p;
    ct_status st = plan_index(op, t, call->list, call->nlist, &p);
    if (st)
        return st;
    ct_tensor *out = ct_empty(p.oshape, p.ond, t->dtype, t->device);
    if ((st = ct_ix_set_out(call, 0, out)) || ct_ix_is_meta(out) || out->numel == 0)
        return st;
#ifdef CT_HAVE_CUDA
    if (out->device.type == CT_DEVICE_CUDA)
        return ct_cuda_index_get(out, t, p.idx, (const int64_t(*)[CT_MAX_DIMS])p.istr, p.bnd, p.insert, p.slice_dim,
                                 p.nslice);
#endif
    size_t esz = ct_dtype_size(t->dtype);
    const char *src = ct_tensor_ptr(t);
    char *dst = ct_tensor_ptr(out);
    int64_t oc[CT_MAX_DIMS] = {0};
    for (int64_t k = 0; k < out->numel; k++) {
        int64_t off;
        if ((st = plan_offset(op, &p, t, t->strides, oc, &off)))
            return st;
        memcpy(dst + (size_t)k * esz, src + off * (int64_t)esz, esz);
        ct_ix_next_coord(oc, p.oshape, p.ond);
    }
    return CT_OK;
}

ct_status ct_cpu_index(ct_keyset ks, ct_call *call, void *ud) { return index_kernel(ks, call, ud); }
ct_status ct_meta_index(ct_keyset ks, ct_call *call, void *ud) { return index_kernel(ks, call, ud); }

ct_tensor *ct_index(const ct_tensor *t, const ct_tensor *const *indices, int n) {
    CT_CHECK_ARG("index", t);
    if (n < 0 || n > CT_MAX_DIMS || (n > 0 && !indices)) {
        ct_error(CT_ERROR_VALUE, "index", "expected a list of at most %d indices, got %d", CT_MAX_DIMS, n);
        return NULL;
    }
    ct_call c = {.op = CT_OP_index, .nin = 1, .in = {t}, .list = indices, .nlist = n, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
}

/* ------------------------------------------------------------------ index_put */

/* dst (r)= src for index_put's accumulate: sums in the element type, bool as or. */
static void accumulate(char *dst, const char *src, ct_dtype d) {
    if (ct_dtype_is_floating(d))
        ct_store_double(dst, d, ct_load_double(dst, d) + ct_load_double(src, d));
    else if (d == CT_DTYPE_BOOL)
        *(uint8_t *)dst = (uint8_t)(*(const uint8_t *)dst || *(const uint8_t *)src);
    else
        ct_store_int64(dst, d, (int64_t)((uint64_t)ct_load_int64(dst, d) + (uint64_t)ct_load_int64(src, d)));
}

static ct_status index_put_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "index_put";
    const ct_tensor *t = call->in[0], *values = call->in[1];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    bool acc = call->ints[0] != 0;
    if (values->dtype != t->dtype)
        return ct_error(CT_ERROR_TYPE, op,
                        "Index put requires the source and destination dtypes match, got %s for the destination "
                        "and %s for the source.",
                        ct_ix_type_name(t->dtype), ct_ix_type_name(values->dtype));
    index_plan p;
    ct_status st = plan_index(op, t, call->list, call->nlist, &p);
    if (st)
        return st;
    int64_t vstr[CT_MAX_DIMS];
    if (!ct_broadcast_strides(values, p.oshape, p.ond, vstr)) {
        char a[96], b[96];
        return ct_error(CT_ERROR_VALUE, op,
                        "shape mismatch: value tensor of shape %s cannot be broadcast to indexing result of shape %s",
                        ct_shape_str(values->shape, values->ndim, a, sizeof a), ct_shape_str(p.oshape, p.ond, b, sizeof b));
    }
    ct_tensor *out, *w;
    if ((st = ct_ix_begin_update(call, t, &out, &w)) || !w)
        return st;
#ifdef CT_HAVE_CUDA
    if (w->device.type == CT_DEVICE_CUDA) {
        st = ct_cuda_index_put(w, values, vstr, p.idx, (const int64_t(*)[CT_MAX_DIMS])p.istr, p.oshape, p.ond, p.bnd,
                               p.insert, p.slice_dim, p.nslice, acc);
        return st ? st : ct_ix_finish_update(out, w);
    }
#endif
    int64_t total = ct_shape_numel(p.oshape, p.ond), oc[CT_MAX_DIMS] = {0};
    size_t esz = ct_dtype_size(t->dtype);
    const char *pv = ct_tensor_ptr(values);
    char *dst = ct_tensor_ptr(w);
    for (int64_t k = 0; k < total; k++) {
        int64_t off;
        if ((st = plan_offset(op, &p, t, w->strides, oc, &off)))
            return st;
        const char *v = pv + ct_ix_offset(oc, vstr, p.ond) * (int64_t)esz;
        if (acc)
            accumulate(dst + off * (int64_t)esz, v, t->dtype);
        else
            memcpy(dst + off * (int64_t)esz, v, esz);
        ct_ix_next_coord(oc, p.oshape, p.ond);
    }
    return ct_ix_finish_update(out, w);
}

ct_status ct_cpu_index_put(ct_keyset ks, ct_call *call, void *ud) { return index_put_kernel(ks, call, ud); }
ct_status ct_meta_index_put(ct_keyset ks, ct_call *call, void *ud) { return index_put_kernel(ks, call, ud); }

static ct_tensor *call_index_put(const ct_tensor *t, const ct_tensor *const *indices, int n, const ct_tensor *values,
                                 bool accumulate_, ct_tensor *self) {
    CT_CHECK_ARG("index_put", t);
    CT_CHECK_ARG("index_put", values);
    if (n < 0 || n > CT_MAX_DIMS || (n > 0 && !indices)) {
        ct_error(CT_ERROR_VALUE, "index_put", "expected a list of at most %d indices, got %d", CT_MAX_DIMS, n);
        return NULL;
    }
    ct_call c = {.op = CT_OP_index_put, .nin = 2, .in = {t, values}, .list = indices, .nlist = n, .nints = 1,
                 .ints = {accumulate_}, .dtype = CT_DTYPE_UNDEFINED};
    if (self)
        ct_ix_inplace(&c, self);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_index_put(const ct_tensor *t, const ct_tensor *const *indices, int n, const ct_tensor *values,
                        bool accumulate_) {
    return call_index_put(t, indices, n, values, accumulate_, NULL);
}
ct_tensor *ct_index_put_(ct_tensor *t, const ct_tensor *const *indices, int n, const ct_tensor *values,
                         bool accumulate_) {
    return call_index_put(t, indices, n, values, accumulate_, t);
}
