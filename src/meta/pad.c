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
 * pads 3-D or 4-D, 6 pads 4-D or 5-D (one or two leading batch/channel dims).
 * pad_backward (Note [pad_backward]) shares the checks and the mapping. */
#include <string.h>

#include "core/checks.h"
#include "meta/indexing.h"
#include "meta/kernels.h"
#include "meta/stubs.h"

/* The checks of every mode and the output shape of padding an input of shape ishape
 * (nd dims): shape, and per dim the left amount lo (negative: cropped) and the right
 * crop hi_crop. */
static ct_status pad_plan(const char *op, const int64_t *ishape, int nd, const int64_t *pad, int npad, int mode,
                          int64_t *shape, int64_t *lo, int64_t *hi_crop) {
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
    memset(lo, 0, sizeof(int64_t) * CT_MAX_DIMS);
    memset(hi_crop, 0, sizeof(int64_t) * CT_MAX_DIMS);
    memcpy(shape, ishape, sizeof(int64_t) * (size_t)nd);
    for (int i = 0; i < npd; i++) {
        int d = nd - 1 - i;
        int64_t l = pad[2 * i], r = pad[2 * i + 1], size = ishape[d], n;
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
                            4 + 2 * i, (long long)l, (long long)r, d, ct_shape_str(ishape, nd, s, sizeof s));
        if (mode == CT_PAD_CIRCULAR && (l > size || r > size))
            return ct_error(CT_ERROR_VALUE, op, "Padding value causes wrapping around more than once.");
        /* circular padding wraps within what the negative amounts leave: nothing
         * left and something to fill is refused (PyTorch reads uninitialized memory) */
        if (mode == CT_PAD_CIRCULAR &&
            (-l > size || -r > size || (size + (l < 0 ? l : 0) + (r < 0 ? r : 0) <= 0 && n > 0)))
            return ct_error(CT_ERROR_VALUE, op, "Negative padding value is resulting in an empty dimension.");
        if (mode != CT_PAD_CONSTANT && size == 0)
            return ct_error(CT_ERROR_VALUE, op, "%s padding needs dimension %d of input %s to be non-empty",
                            ct_pad_mode_name(mode), d, ct_shape_str(ishape, nd, s, sizeof s));
        if (n < 0 || (mode != CT_PAD_CONSTANT && n == 0))
            return ct_error(CT_ERROR_VALUE, op,
                            "The input size %lld, plus negative padding %lld and %lld resulted in a negative output "
                            "size, which is invalid. Check dimension %d of your input.",
                            (long long)size, (long long)l, (long long)r, d);
        shape[d] = n;
        lo[d] = l;
        hi_crop[d] = r < 0 ? -r : 0;
    }
    return CT_OK;
}

static ct_status pad_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "pad";
    const ct_tensor *t = call->in[0];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    int npad = call->nints - 1, mode = (int)call->ints[npad];
    int64_t lo[CT_MAX_DIMS], hi_crop[CT_MAX_DIMS], shape[CT_MAX_DIMS];
    if (pad_plan(op, t->shape, t->ndim, call->ints, npad, mode, shape, lo, hi_crop))
        return ct_last_status();
    if (mode == CT_PAD_CONSTANT && ct_check_scalar_fits(op, call->s[0], t->dtype))
        return ct_last_status();
    ct_tensor *out = ct_empty_impl(shape, t->ndim, t->dtype, t->device);
    ct_status st = ct_ix_set_out(call, 0, out);
    if (st || ct_ix_is_meta(out) || out->numel == 0)
        return st;
    char value[16] = {0};
    if (mode == CT_PAD_CONSTANT)
        ct_store_scalar(value, t->dtype, call->s[0]);
    return CT_CALL_STUB(pad, op, out->device, out, t, lo, hi_crop, mode, value);
}

ct_status ct_kernel_pad(ct_keyset ks, ct_call *call, void *ud) { return pad_kernel(ks, call, ud); }

/* Note [pad_backward]
 * The gradient of pad: every element of grad_output goes back to the input element
 * its coordinate maps to (the forward's mapping), added up where several map to one
 * (reflect and replicate edges, circular wraps); constant padding's fill positions
 * get nothing. The call carries the input's shape (ints: ndim, its sizes, the pad
 * list's length and the list, the mode), so the forward's input need not be kept. It is linear in
 * grad_output, and its own derivative is pad with the same arguments. */
ct_status ct_kernel_pad_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "pad_backward";
    const ct_tensor *g = call->in[0];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    int nd = call->nints >= 3 ? (int)call->ints[0] : -1;
    int npad = nd >= 0 && nd <= CT_MAX_DIMS ? (int)call->ints[1 + nd] : -1, mode = (int)call->ints[call->nints - 1];
    if (nd < 0 || nd > CT_MAX_DIMS || npad < 0 || nd + npad + 3 != call->nints || mode < 0 ||
        mode >= CT_PAD_MODE_COUNT)
        return ct_error(CT_ERROR_VALUE, op, "malformed call: ndim %d, %d ints", nd, call->nints);
    const int64_t *ishape = call->ints + 1;
    for (int d = 0; d < nd; d++)
        if (ishape[d] < 0)
            return ct_error(CT_ERROR_VALUE, op, "input_size must be non-negative");
    if (!ct_dtype_is_floating(g->dtype))
        return ct_error(CT_ERROR_TYPE, op, "\"%s\" not implemented for '%s'", op, ct_dtype_name(g->dtype));
    int64_t lo[CT_MAX_DIMS], hi_crop[CT_MAX_DIMS], shape[CT_MAX_DIMS];
    if (pad_plan(op, ishape, nd, call->ints + 2 + nd, npad, mode, shape, lo, hi_crop))
        return ct_last_status();
    bool same = g->ndim == nd;
    for (int d = 0; same && d < nd; d++)
        same = g->shape[d] == shape[d];
    if (!same) {
        char a[96], b[96], c[96];
        return ct_error(CT_ERROR_VALUE, op, "grad_output has shape %s, but padding an input of shape %s gives %s",
                        ct_shape_str(g->shape, g->ndim, a, sizeof a), ct_shape_str(ishape, nd, b, sizeof b),
                        ct_shape_str(shape, nd, c, sizeof c));
    }
    ct_tensor *out = ct_empty_impl(ishape, nd, g->dtype, g->device);
    ct_status st = ct_ix_set_out(call, 0, out);
    if (st || ct_ix_is_meta(out) || out->numel == 0)
        return st;
    return CT_CALL_STUB(pad_backward, op, out->device, out, g, lo, hi_crop, mode);
}
