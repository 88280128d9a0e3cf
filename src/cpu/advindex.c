/* The CPU stubs of advanced indexing (index, index_put; the plan is src/meta/advindex.c's,
 * Note [Advanced indexing] there): walks over the result in row-major order. */
#include <string.h>

#include "cpu/cpu_backend.h"
#include "meta/indexing.h"
#include "meta/stubs.h"

/* The plan as the stubs receive it. */
typedef struct {
    const ct_tensor *const *idx;
    const int64_t (*istr)[CT_MAX_DIMS];
    int bnd, insert;
    const int *slice_dim;
    int nslice;
} index_plan;

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
    for (int d = 0, nth = 0; d < t->ndim; d++) {
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

static ct_status cpu_index_get(ct_tensor *out, const ct_tensor *t, const ct_tensor *const *idx,
                               const int64_t (*istr)[CT_MAX_DIMS], int bnd, int insert, const int *slice_dim,
                               int nslice) {
    const char *op = "index";
    index_plan p = {idx, istr, bnd, insert, slice_dim, nslice};
    ct_status st;
    size_t esz = ct_dtype_size(t->dtype);
    const char *src = ct_tensor_ptr(t);
    char *dst = ct_tensor_ptr(out);
    int64_t oc[CT_MAX_DIMS] = {0};
    for (int64_t k = 0; k < out->numel; k++) {
        int64_t off;
        if ((st = plan_offset(op, &p, t, t->strides, oc, &off)))
            return st;
        memcpy(dst + (size_t)k * esz, src + off * (int64_t)esz, esz);
        ct_ix_next_coord(oc, out->shape, out->ndim);
    }
    return CT_OK;
}

/* dst (r)= src for index_put's accumulate: sums in the element type, bool as or. */
static void accumulate(char *dst, const char *src, ct_dtype d) {
    if (ct_dtype_is_floating(d))
        ct_store_double(dst, d, ct_load_double(dst, d) + ct_load_double(src, d));
    else if (d == CT_DTYPE_BOOL)
        *(uint8_t *)dst = (uint8_t)(*(const uint8_t *)dst || *(const uint8_t *)src);
    else
        ct_store_int64(dst, d, (int64_t)((uint64_t)ct_load_int64(dst, d) + (uint64_t)ct_load_int64(src, d)));
}

static ct_status cpu_index_put(ct_tensor *w, const ct_tensor *values, const int64_t *vstr, const ct_tensor *const *idx,
                               const int64_t (*istr)[CT_MAX_DIMS], const int64_t *oshape, int ond, int bnd, int insert,
                               const int *slice_dim, int nslice, bool acc) {
    const char *op = "index_put";
    index_plan p = {idx, istr, bnd, insert, slice_dim, nslice};
    ct_status st;
    int64_t total = ct_shape_numel(oshape, ond), oc[CT_MAX_DIMS] = {0};
    size_t esz = ct_dtype_size(w->dtype);
    const char *pv = ct_tensor_ptr(values);
    char *dst = ct_tensor_ptr(w);
    for (int64_t k = 0; k < total; k++) {
        int64_t off;
        if ((st = plan_offset(op, &p, w, w->strides, oc, &off)))
            return st;
        const char *v = pv + ct_ix_offset(oc, vstr, ond) * (int64_t)esz;
        if (acc)
            accumulate(dst + off * (int64_t)esz, v, w->dtype);
        else
            memcpy(dst + off * (int64_t)esz, v, esz);
        ct_ix_next_coord(oc, oshape, ond);
    }
    return CT_OK;
}

void ct_cpu_register_advindex(void) {
    ct_stub_index_get[CT_DEVICE_CPU] = cpu_index_get;
    ct_stub_index_put[CT_DEVICE_CPU] = cpu_index_put;
}
