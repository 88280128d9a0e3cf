/* The structured kernel of torch.nn.functional.pad (constant, reflect, replicate and
 * circular modes): the mode's checks, the output shape and allocation, then the
 * device's stub (Note [Stubs] in stubs.h). META stops once the output exists; the
 * loops are src/cpu/pad.c and src/cuda/shape_cuda.c.
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
#include <string.h>

#include "core/checks.h"
#include "meta/indexing.h"
#include "meta/kernels.h"
#include "meta/stubs.h"

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
    if (mode != CT_PAD_CONSTANT && !((npad == 2 && (nd == 2 || nd == 3)) || (npad == 4 && (nd == 3 || nd == 4)) ||
                                     (npad == 6 && (nd == 4 || nd == 5))))
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "Padding size %d is not supported for %dD input tensor.", npad,
                        nd);
    int64_t lo[CT_MAX_DIMS] = {0}, hi_crop[CT_MAX_DIMS] = {0}, shape[CT_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)nd);
    for (int i = 0; i < npd; i++) {
        int d = nd - 1 - i;
        int64_t l = pad[2 * i], r = pad[2 * i + 1], size = t->shape[d], n;
        char s[96];
        /* size + l + r, and -l, -r below, through Note [Checked sizes] */
        if (l == INT64_MIN || r == INT64_MIN || !ct_size_add(size, l, &n) || !ct_size_add(n, r, &n))
            return ct_error(CT_ERROR_VALUE, op,
                            "The input size %lld, plus padding %lld and %lld overflows int64. Check dimension %d of "
                            "your input.",
                            (long long)size, (long long)l, (long long)r, d);
        if (mode == CT_PAD_REFLECT && (l >= size || r >= size))
            return ct_error(CT_ERROR_VALUE, op,
                            "Argument #%d: Padding size should be less than the corresponding input dimension, but "
                            "got: padding (%lld, %lld) at dimension %d of input %s",
                            4 + 2 * i, (long long)l, (long long)r, d, ct_shape_str(t->shape, nd, s, sizeof s));
        if (mode == CT_PAD_CIRCULAR && (l > size || r > size))
            return ct_error(CT_ERROR_VALUE, op, "Padding value causes wrapping around more than once.");
        /* circular padding wraps within what the negative amounts leave: nothing
         * left and something to fill is refused (PyTorch reads uninitialized memory) */
        if (mode == CT_PAD_CIRCULAR &&
            (-l > size || -r > size || (size + (l < 0 ? l : 0) + (r < 0 ? r : 0) <= 0 && n > 0)))
            return ct_error(CT_ERROR_VALUE, op, "Negative padding value is resulting in an empty dimension.");
        if (mode != CT_PAD_CONSTANT && size == 0)
            return ct_error(CT_ERROR_VALUE, op, "%s padding needs dimension %d of input %s to be non-empty",
                            ct_pad_mode_name(mode), d, ct_shape_str(t->shape, nd, s, sizeof s));
        if (n < 0 || (mode != CT_PAD_CONSTANT && n == 0))
            return ct_error(CT_ERROR_VALUE, op,
                            "The input size %lld, plus negative padding %lld and %lld resulted in a negative output "
                            "size, which is invalid. Check dimension %d of your input.",
                            (long long)size, (long long)l, (long long)r, d);
        shape[d] = n;
        lo[d] = l;
        hi_crop[d] = r < 0 ? -r : 0;
    }
    if (mode == CT_PAD_CONSTANT && ct_check_scalar_fits(op, call->s[0], t->dtype))
        return ct_last_status();
    ct_tensor *out = ct_empty_impl(shape, nd, t->dtype, t->device);
    ct_status st = ct_ix_set_out(call, 0, out);
    if (st || ct_ix_is_meta(out) || out->numel == 0)
        return st;
    char value[16] = {0};
    if (mode == CT_PAD_CONSTANT)
        ct_store_scalar(value, t->dtype, call->s[0]);
    return CT_CALL_STUB(pad, op, out->device, out, t, lo, hi_crop, mode, value);
}

ct_status ct_kernel_pad(ct_keyset ks, ct_call *call, void *ud) { return pad_kernel(ks, call, ud); }
