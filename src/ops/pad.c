/* torch.nn.functional.pad: constant, reflect, replicate and circular modes, for CPU
 * and META.
 *
 * Note [pad]
 * The pad list runs from the last dim backwards: (left, right) of the last dim, then
 * of the one before, ... Negative amounts crop. Every mode is one mapping from an
 * output coordinate to an input coordinate per padded dim (constant: out of range
 * means the fill value; reflect: mirror without repeating the edge; replicate: clamp;
 * circular: wrap around what is left of the dim after negative amounts crop it), so
 * one loop copies bytes for every dtype. PyTorch's reflect and
 * replicate kernels take floating dtypes only; ctorch's copy any dtype (docs/ops.md).
 * The non-constant modes keep PyTorch's shape rule: 2 pads need a 2-D or 3-D input, 4
 * pads 3-D or 4-D, 6 pads 4-D or 5-D (one or two leading batch/channel dims). */
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

enum { PAD_CONSTANT = 0, PAD_REFLECT, PAD_REPLICATE, PAD_CIRCULAR };
static const char *const pad_modes[] = {"constant", "reflect", "replicate", "circular"};

static ct_status pad_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "pad";
    const ct_tensor *t = call->in[0];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    int npad = call->nints - 1, mode = (int)call->ints[npad];
    const int64_t *pad = call->ints;
    int nd = t->ndim;
    if (npad % 2 != 0)
        return ct_error(CT_ERROR_VALUE, op, "Padding length must be divisible by 2");
    if (npad > 2 * nd)
        return ct_error(CT_ERROR_VALUE, op,
                        "Padding length should be less than or equal to two times the input dimension but got padding "
                        "length %d and input of dimension %d",
                        npad, nd);
    int npd = npad / 2;
    if (mode != PAD_CONSTANT && !((npad == 2 && (nd == 2 || nd == 3)) || (npad == 4 && (nd == 3 || nd == 4)) ||
                                  (npad == 6 && (nd == 4 || nd == 5))))
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "Padding size %d is not supported for %dD input tensor.", npad,
                        nd);
    int64_t lo[CT_MAX_DIMS] = {0}, hi_crop[CT_MAX_DIMS] = {0}, shape[CT_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)nd);
    for (int i = 0; i < npd; i++) {
        int d = nd - 1 - i;
        int64_t l = pad[2 * i], r = pad[2 * i + 1], size = t->shape[d];
        char s[96];
        if (mode == PAD_REFLECT && (l >= size || r >= size))
            return ct_error(CT_ERROR_VALUE, op,
                            "Argument #%d: Padding size should be less than the corresponding input dimension, but "
                            "got: padding (%lld, %lld) at dimension %d of input %s",
                            4 + 2 * i, (long long)l, (long long)r, d, ct_shape_str(t->shape, nd, s, sizeof s));
        if (mode == PAD_CIRCULAR && (l > size || r > size))
            return ct_error(CT_ERROR_VALUE, op, "Padding value causes wrapping around more than once.");
        /* circular padding wraps within what the negative amounts leave: nothing
         * left and something to fill is refused (PyTorch reads uninitialized memory) */
        if (mode == PAD_CIRCULAR &&
            (-l > size || -r > size || (size + (l < 0 ? l : 0) + (r < 0 ? r : 0) <= 0 && size + l + r > 0)))
            return ct_error(CT_ERROR_VALUE, op, "Negative padding value is resulting in an empty dimension.");
        if (mode != PAD_CONSTANT && size == 0)
            return ct_error(CT_ERROR_VALUE, op, "%s padding needs dimension %d of input %s to be non-empty",
                            pad_modes[mode], d, ct_shape_str(t->shape, nd, s, sizeof s));
        int64_t n = size + l + r;
        if (n < 0 || (mode != PAD_CONSTANT && n == 0))
            return ct_error(CT_ERROR_VALUE, op,
                            "The input size %lld, plus negative padding %lld and %lld resulted in a negative output "
                            "size, which is invalid. Check dimension %d of your input.",
                            (long long)size, (long long)l, (long long)r, d);
        shape[d] = n;
        lo[d] = l;
        hi_crop[d] = r < 0 ? -r : 0;
    }
    if (mode == PAD_CONSTANT && ct_check_scalar_fits(op, call->s[0], t->dtype))
        return ct_last_status();
    ct_tensor *out = ct_empty(shape, nd, t->dtype, t->device);
    ct_status st = ct_ix_set_out(call, 0, out);
    if (st || ct_ix_is_meta(out) || out->numel == 0)
        return st;
    size_t esz = ct_dtype_size(t->dtype);
    char value[16] = {0};
    if (mode == PAD_CONSTANT)
        ct_store_scalar(value, t->dtype, call->s[0]);
#ifdef CT_HAVE_CUDA
    if (out->device.type == CT_DEVICE_CUDA)
        return ct_cuda_pad(out, t, lo, hi_crop, mode, value);
#endif
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
                case PAD_REFLECT: i = i < 0 ? -i : 2 * (size - 1) - i; break;
                case PAD_REPLICATE: i = i < 0 ? 0 : size - 1; break;
                case PAD_CIRCULAR: {
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
        memcpy(dst + (size_t)k * esz, inside ? src + off * (int64_t)esz : value, esz);
        ct_ix_next_coord(oc, shape, nd);
    }
    return CT_OK;
}

ct_status ct_cpu_pad(ct_keyset ks, ct_call *call, void *ud) { return pad_kernel(ks, call, ud); }
ct_status ct_meta_pad(ct_keyset ks, ct_call *call, void *ud) { return pad_kernel(ks, call, ud); }

ct_tensor *ct_pad(const ct_tensor *t, const int64_t *pad, int npad, const char *mode, double value) {
    CT_CHECK_ARG("pad", t);
    if (npad < 0 || (npad > 0 && !pad)) {
        ct_error(CT_ERROR_VALUE, "pad", "invalid pad list");
        return NULL;
    }
    int m = -1;
    for (int i = 0; i < 4; i++)
        if (mode && strcmp(mode, pad_modes[i]) == 0)
            m = i;
    if (m < 0) {
        ct_error(CT_ERROR_NOT_IMPLEMENTED, "pad", "Unrecognised padding mode %s", mode ? mode : "NULL");
        return NULL;
    }
    if (npad > 2 * CT_MAX_DIMS) {
        ct_error(CT_ERROR_VALUE, "pad", "Padding length too large");
        return NULL;
    }
    if (m != 0 && value != 0) {
        ct_error(CT_ERROR_VALUE, "pad", "Padding mode \"%s\" doesn't take in value argument", mode);
        return NULL;
    }
    ct_call c = {.op = CT_OP_pad, .nin = 1, .in = {t}, .nints = npad + 1, .nscalars = 1,
                 .s = {ct_scalar_float(value)}, .dtype = CT_DTYPE_UNDEFINED};
    if (npad)
        memcpy(c.ints, pad, sizeof(int64_t) * (size_t)npad);
    c.ints[npad] = m;
    return ct_dispatch_1(&c);
}
