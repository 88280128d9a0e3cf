/* The host half of the CUDA shape ops flip, tril/triu and pad: the structured kernels
 * (src/meta/shape.c, src/meta/pad.c) check the arguments and allocate the output, then
 * call these stubs once it lives on a GPU; this file describes the layouts for shape.cu. */
#include <string.h>

#include "cuda/cuda_ops.h"
#include "meta/indexing.h"

_Static_assert((int)CT_CUDA_REMAP_CONSTANT == CT_PAD_CONSTANT && (int)CT_CUDA_REMAP_REFLECT == CT_PAD_REFLECT &&
                   (int)CT_CUDA_REMAP_REPLICATE == CT_PAD_REPLICATE && (int)CT_CUDA_REMAP_CIRCULAR == CT_PAD_CIRCULAR,
               "pad's modes (meta/indexing.h) are the remap kernel's");

ct_status ct_cuda_flip(ct_tensor *out, const ct_tensor *t, const bool *flipped) {
    const char *op = "flip";
    if (out->numel == 0)
        return CT_OK;
    if (!ct_cuda_use_device(op, out->device.index))
        return ct_last_status();
    ct_cuda_remap_desc d;
    memset(&d, 0, sizeof d);
    d.nd = t->ndim;
    d.mode = CT_CUDA_REMAP_FLIP;
    d.n = out->numel;
    for (int i = 0; i < t->ndim; i++) {
        d.oshape[i] = d.ishape[i] = t->shape[i];
        d.istr[i] = t->strides[i];
        d.flip[i] = flipped[i];
    }
    return ct_cuda_remap_run(&d, ct_tensor_ptr(out), ct_tensor_ptr(t), ct_dtype_size(t->dtype), 0, out->device.index,
                             op);
}

ct_status ct_cuda_tri(ct_tensor *out, const ct_tensor *c, int64_t k, bool lower) {
    const char *op = lower ? "tril" : "triu";
    if (out->numel == 0)
        return CT_OK;
    if (!ct_cuda_use_device(op, out->device.index))
        return ct_last_status();
    int64_t rows = c->shape[c->ndim - 2], cols = c->shape[c->ndim - 1], mats = c->numel / (rows * cols);
    return ct_cuda_tri_run(ct_tensor_ptr(out), ct_tensor_ptr(c), ct_dtype_size(c->dtype), mats, rows, cols, k, lower,
                           out->device.index, op);
}

ct_status ct_cuda_pad(ct_tensor *out, const ct_tensor *t, const int64_t *lo, const int64_t *hi_crop, int mode,
                      const void *value) {
    const char *op = "pad";
    if (out->numel == 0)
        return CT_OK;
    if (!ct_cuda_use_device(op, out->device.index))
        return ct_last_status();
    ct_cuda_remap_desc d;
    memset(&d, 0, sizeof d);
    d.nd = t->ndim;
    d.mode = mode; /* CT_PAD_* is CT_CUDA_REMAP_CONSTANT..CIRCULAR in order */
    d.n = out->numel;
    for (int i = 0; i < t->ndim; i++) {
        d.oshape[i] = out->shape[i];
        d.ishape[i] = t->shape[i];
        d.istr[i] = t->strides[i];
        d.lo[i] = lo[i];
        d.hicrop[i] = hi_crop[i];
    }
    size_t esz = ct_dtype_size(t->dtype);
    uint64_t val = 0;
    memcpy(&val, value, esz);
    return ct_cuda_remap_run(&d, ct_tensor_ptr(out), ct_tensor_ptr(t), esz, val, out->device.index, op);
}
