/* The reduction mode of the TensorIterator, planned for any backend: the kept/reduced
 * dim split and coalescing (reduce_iter.h). */
#include <string.h>

#include "meta/reduce_iter.h"

/* Merges dim i+1 into dim i where, for every stride array, stepping the outer dim
 * equals running through the whole inner one. */
static int coalesce(int n, int64_t *shape, int64_t (*strides)[CT_MAX_DIMS], int nstr) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0) {
            bool merge = true;
            for (int k = 0; k < nstr && merge; k++)
                merge = strides[k][m - 1] == strides[k][i] * shape[i];
            if (merge) {
                shape[m - 1] *= shape[i];
                for (int k = 0; k < nstr; k++)
                    strides[k][m - 1] = strides[k][i];
                continue;
            }
        }
        shape[m] = shape[i];
        for (int k = 0; k < nstr; k++)
            strides[k][m] = strides[k][i];
        m++;
    }
    return m;
}

/* The byte stride of dim d of t; 0 where no step is ever taken (an empty t, a dim of
 * size 1), whose element stride may be anything (as_strided, ct_empty_strided) and
 * would overflow once multiplied by the element size. */
static int64_t byte_stride(const ct_tensor *t, int d) {
    return t->numel == 0 || t->shape[d] == 1 ? 0 : t->strides[d] * (int64_t)ct_dtype_size(t->dtype);
}

static void iter_common(ct_reduce_iter *it, const ct_tensor *in, ct_tensor *const *outs, int nout) {
    memset(it, 0, sizeof *it);
    it->nout = nout;
    it->in = ct_tensor_ptr(in);
    it->in_dtype = in->dtype;
    for (int k = 0; k < nout; k++) {
        it->out[k] = outs[k] ? ct_tensor_ptr(outs[k]) : NULL;
        it->out_dtype[k] = outs[k] ? outs[k]->dtype : CT_DTYPE_UNDEFINED;
    }
}

void ct_reduce_iter_init(ct_reduce_iter *it, const ct_tensor *in, uint32_t mask, ct_tensor *const *outs, int nout,
                         bool keepdim, bool reorder) {
    iter_common(it, in, outs, nout);
    int64_t kstr[3][CT_MAX_DIMS];
    int64_t rstr[1][CT_MAX_DIMS];
    int nk = 0, nr = 0, j = 0;
    it->red_numel = 1;
    it->out_numel = 1;
    for (int d = 0; d < in->ndim; d++) {
        bool red = (mask >> d) & 1u;
        if (red) {
            it->red_numel *= in->shape[d];
            if (in->shape[d] != 1) {
                it->rshape[nr] = in->shape[d];
                rstr[0][nr++] = byte_stride(in, d);
            }
            if (keepdim)
                j++;
            continue;
        }
        it->out_numel *= in->shape[d];
        if (in->shape[d] != 1) {
            it->kshape[nk] = in->shape[d];
            kstr[0][nk] = byte_stride(in, d);
            for (int k = 0; k < nout; k++)
                kstr[1 + k][nk] = outs[k] ? byte_stride(outs[k], j) : 0;
            nk++;
        }
        j++;
    }
    if (reorder) {
        /* Innermost (smallest |stride|) last, so segments run forward through memory. */
        for (int a = 1; a < nr; a++)
            for (int b = a; b > 0; b--) {
                int64_t s0 = rstr[0][b - 1] < 0 ? -rstr[0][b - 1] : rstr[0][b - 1];
                int64_t s1 = rstr[0][b] < 0 ? -rstr[0][b] : rstr[0][b];
                if (s1 <= s0)
                    break;
                int64_t t = rstr[0][b], sh = it->rshape[b];
                rstr[0][b] = rstr[0][b - 1], it->rshape[b] = it->rshape[b - 1];
                rstr[0][b - 1] = t, it->rshape[b - 1] = sh;
            }
    }
    it->nr = coalesce(nr, it->rshape, rstr, 1);
    for (int d = 0; d < it->nr; d++)
        it->rstride[d] = rstr[0][d];
    it->nk = coalesce(nk, it->kshape, kstr, 1 + nout);
    for (int d = 0; d < it->nk; d++) {
        it->kin[d] = kstr[0][d];
        for (int k = 0; k < nout; k++)
            it->kout[k][d] = kstr[1 + k][d];
    }
}

void ct_scan_iter_init(ct_reduce_iter *it, const ct_tensor *in, int dim, ct_tensor *const *outs, int nout) {
    iter_common(it, in, outs, nout);
    int64_t kstr[3][CT_MAX_DIMS];
    int nk = 0;
    it->out_numel = 1;
    it->nr = 1;
    it->rshape[0] = in->ndim ? in->shape[dim] : 1;
    it->rstride[0] = in->ndim ? byte_stride(in, dim) : 0;
    it->red_numel = it->rshape[0];
    for (int k = 0; k < nout; k++)
        it->rout[k] = in->ndim ? byte_stride(outs[k], dim) : 0;
    for (int d = 0; d < in->ndim; d++) {
        if (d == dim)
            continue;
        it->out_numel *= in->shape[d];
        if (in->shape[d] == 1)
            continue;
        it->kshape[nk] = in->shape[d];
        kstr[0][nk] = byte_stride(in, d);
        for (int k = 0; k < nout; k++)
            kstr[1 + k][nk] = byte_stride(outs[k], d);
        nk++;
    }
    it->nk = coalesce(nk, it->kshape, kstr, 1 + nout);
    for (int d = 0; d < it->nk; d++) {
        it->kin[d] = kstr[0][d];
        for (int k = 0; k < nout; k++)
            it->kout[k][d] = kstr[1 + k][d];
    }
}

