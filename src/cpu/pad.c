/* The CPU stubs of pad and pad_backward (src/meta/pad.c): one loop mapping each output
 * coordinate to an input coordinate per dim, for every mode and dtype (Note [pad] in
 * src/meta/pad.c); the backward adds along the same mapping. */
#include <string.h>

#include "cpu/cpu_backend.h"
#include "meta/indexing.h"
#include "meta/stubs.h"

static ct_status cpu_pad(ct_tensor *out, const ct_tensor *t, const int64_t *lo, const int64_t *hi_crop, int mode,
                         const void *value) {
    int nd = t->ndim;
    const int64_t *shape = out->shape;
    size_t esz = ct_dtype_size(t->dtype);
    const char *src = ct_tensor_ptr(t);
    char *dst = ct_tensor_ptr(out);
    int64_t oc[CT_MAX_DIMS] = {0};
    for (int64_t k = 0; k < out->numel; k++) {
        int64_t off = 0;
        bool inside = true;
        for (int d = 0; d < nd; d++) {
            int64_t i = oc[d] - lo[d], size = t->shape[d];
            if (i < 0 || i >= size) {
                switch (mode) {
                case CT_PAD_REFLECT: i = i < 0 ? -i : 2 * (size - 1) - i; break;
                case CT_PAD_REPLICATE: i = i < 0 ? 0 : size - 1; break;
                case CT_PAD_CIRCULAR: {
                    /* wrap within what is left after cropping, as PyTorch does */
                    int64_t start = lo[d] < 0 ? -lo[d] : 0, hi = hi_crop[d];
                    int64_t w = size - start - hi, j = oc[d] - (lo[d] > 0 ? lo[d] : 0);
                    i = start + ((j % w) + w) % w;
                    break;
                }
                default: inside = false; break;
                }
            }
            off += i * t->strides[d];
        }
        memcpy(dst + (size_t)k * esz, inside ? src + off * (int64_t)esz : (const char *)value, esz);
        ct_ix_next_coord(oc, shape, nd);
    }
    return CT_OK;
}

/* The forward's mapping run backwards: each element of g is added to the input element
 * its coordinate maps to; fill positions of constant padding send nothing (Note
 * [pad_backward] in src/meta/pad.c). Sums go through double, one rounding to the
 * element type per addition. */
static ct_status cpu_pad_backward(ct_tensor *gin, const ct_tensor *g, const int64_t *lo, const int64_t *hi_crop,
                                  int mode) {
    int nd = g->ndim;
    ct_dtype dt = g->dtype;
    size_t esz = ct_dtype_size(dt);
    const char *src = ct_tensor_ptr(g);
    char *dst = ct_tensor_ptr(gin);
    memset(dst, 0, (size_t)gin->numel * esz);
    if (g->numel == 0)
        return CT_OK;
    int64_t oc[CT_MAX_DIMS] = {0};
    for (int64_t k = 0; k < g->numel; k++) {
        int64_t goff = 0, ioff = 0, stride = 1;
        bool inside = true;
        for (int d = nd - 1; d >= 0; d--) {
            int64_t i = oc[d] - lo[d], size = gin->shape[d];
            if (i < 0 || i >= size) {
                switch (mode) {
                case CT_PAD_REFLECT: i = i < 0 ? -i : 2 * (size - 1) - i; break;
                case CT_PAD_REPLICATE: i = i < 0 ? 0 : size - 1; break;
                case CT_PAD_CIRCULAR: {
                    int64_t start = lo[d] < 0 ? -lo[d] : 0, hi = hi_crop[d];
                    int64_t w = size - start - hi, j = oc[d] - (lo[d] > 0 ? lo[d] : 0);
                    i = start + ((j % w) + w) % w;
                    break;
                }
                default: inside = false; break;
                }
            }
            ioff += i * stride;
            stride *= size;
            goff += oc[d] * g->strides[d];
        }
        if (inside) {
            char *p = dst + ioff * (int64_t)esz;
            ct_store_double(p, dt, ct_load_double(p, dt) + ct_load_double(src + goff * (int64_t)esz, dt));
        }
        ct_ix_next_coord(oc, g->shape, nd);
    }
    return CT_OK;
}

void ct_cpu_register_pad(void) {
    ct_stub_pad[CT_DEVICE_CPU] = cpu_pad;
    ct_stub_pad_backward[CT_DEVICE_CPU] = cpu_pad_backward;
}
