/* The structured kernels of advanced indexing: ct_index (t[i0, i1, ...]) and index_put
 * (t[i0, ...] = v, with accumulate). The plan (which dims the indices cover, where
 * their broadcast shape goes in the result), the checks and the allocation are here;
 * the walks are the stubs' (src/cpu/advindex.c, src/cuda/indexing_cuda.c).
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
#include <stdio.h>
#include <string.h>

#include "meta/indexing.h"
#include "meta/kernels.h"
#include "meta/stubs.h"

typedef struct {
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

/* The positions of a mask's true elements, (count, k), from the device's nonzero stub;
 * a temporary of the dispatch scope. */
static const ct_tensor *mask_positions(const char *op, const ct_tensor *mask) {
    ct_call c = {.op = CT_OP_nonzero, .nin = 1, .in = {mask}, .dtype = CT_DTYPE_UNDEFINED};
    ct_tensor *nz = NULL;
    if (CT_CALL_STUB(nonzero, op, mask->device, &c, mask) == CT_OK)
        nz = ct_call_take_output(&c, 0);
    ct_call_clear_outputs(&c);
    return nz;
}

static ct_status plan_index(const char *op, const ct_tensor *t, const ct_tensor *const *indices, int n,
                            index_plan *p) {
    memset(p, 0, sizeof *p);
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
        if (ix->dtype == CT_DTYPE_INT32 && !(ix = ct_to_dtype_impl(ix, CT_DTYPE_INT64))) /* a temporary of the dispatch scope */
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
        const ct_tensor *nz = mask_positions(op, ix);
        if (!nz)
            return ct_last_status();
        for (int j = 0; j < ix->ndim; j++)
            if (!(p->idx[d + j] = ct_select_impl(nz, 1, j)))
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
    ct_tensor *out = ct_empty_impl(p.oshape, p.ond, t->dtype, t->device);
    if ((st = ct_ix_set_out(call, 0, out)) || ct_ix_is_meta(out) || out->numel == 0)
        return st;
    return CT_CALL_STUB(index_get, op, out->device, out, t, p.idx, (const int64_t(*)[CT_MAX_DIMS])p.istr, p.bnd,
                        p.insert, p.slice_dim, p.nslice);
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
                        ct_dtype_pt_name(t->dtype), ct_dtype_pt_name(values->dtype));
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
    st = CT_CALL_STUB(index_put, op, w->device, w, values, vstr, p.idx, (const int64_t(*)[CT_MAX_DIMS])p.istr,
                      p.oshape, p.ond, p.bnd, p.insert, p.slice_dim, p.nslice, acc);
    return st ? st : ct_ix_finish_update(out, w);
}

ct_status ct_kernel_index(ct_keyset ks, ct_call *call, void *ud) { return index_kernel(ks, call, ud); }
ct_status ct_kernel_index_put(ct_keyset ks, ct_call *call, void *ud) { return index_put_kernel(ks, call, ud); }
