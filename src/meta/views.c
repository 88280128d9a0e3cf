/* The kernel of the view and copy ops on every backend: it unpacks a call of
 * src/api/views.c's wrappers (and of ct_to_device, src/api/factories.c) and runs the
 * core implementation (src/core/view.c, copy.c), which moves data through the device
 * interface where it has to. */
#include <string.h>

#include "core/checks.h"
#include "core/factory.h"
#include "core/view.h"
#include "dispatch/call.h"
#include "meta/kernels.h"

/* ------------------------------------------------------------------ the kernel */

static ct_tensor *apply(const ct_call *c) {
    const ct_tensor *t = c->in[0];
    const int64_t *k = c->ints;
    switch (c->op) {
    case CT_OP_view: return ct_view_impl(t, k, c->nints);
    case CT_OP_reshape: return ct_reshape_impl(t, k, c->nints);
    case CT_OP_permute: return ct_permute_impl(t, k, c->nints);
    case CT_OP_expand: return ct_expand_impl(t, k, c->nints);
    case CT_OP_transpose: return ct_transpose_impl(t, (int)k[0], (int)k[1]);
    case CT_OP_t: return ct_t_impl(t);
    case CT_OP_movedim: return ct_movedim_impl(t, (int)k[0], (int)k[1]);
    case CT_OP_squeeze: return ct_squeeze_impl(t);
    case CT_OP_squeeze_dim: return ct_squeeze_dim_impl(t, (int)k[0]);
    case CT_OP_unsqueeze: return ct_unsqueeze_impl(t, (int)k[0]);
    case CT_OP_flatten: return ct_flatten_impl(t, (int)k[0], (int)k[1]);
    case CT_OP_unflatten: return ct_unflatten_impl(t, (int)k[0], k + 1, c->nints - 1);
    case CT_OP_narrow: return ct_narrow_impl(t, (int)k[0], k[1], k[2]);
    case CT_OP_slice: return ct_slice_impl(t, (int)k[0], k[1], k[2], k[3]);
    case CT_OP_select: return ct_select_impl(t, (int)k[0], k[1]);
    case CT_OP_unfold: return ct_unfold_impl(t, (int)k[0], k[1], k[2]);
    case CT_OP_diagonal: return ct_diagonal_impl(t, k[0], (int)k[1], (int)k[2]);
    case CT_OP_as_strided: {
        int nd = (c->nints - 1) / 2;
        return ct_as_strided_impl(t, k, k + nd, nd, k[2 * nd]);
    }
    case CT_OP_alias: return ct_alias_impl(t);
    case CT_OP_clone: return ct_clone_impl(t);
    case CT_OP_contiguous: return ct_contiguous_impl(t);
    case CT_OP_to_dtype: return ct_to_dtype_impl(t, c->dtype);
    case CT_OP_to_device: return ct_to_device_impl(t, c->device);
    default:
        ct_error(CT_ERROR_RUNTIME, ct_op_name(c->op), "not a view or copy op");
        return NULL;
    }
}

ct_status ct_core_kernel(ct_keyset ks, ct_call *call, void *user_data) {
    (void)ks, (void)user_data;
    if (call->op == CT_OP_copy) {
        if (ct_check_no_internal_overlap("copy_", call->out[0])) /* Note [Internal overlap] */
            return ct_last_status();
        return ct_copy_impl(call->out[0], call->in[1]) ? CT_OK : ct_last_status();
    }
    ct_tensor *r = apply(call);
    if (!r)
        return ct_last_status();
    /* The core copies requires_grad onto views; whether the result requires grad is
     * autograd's decision (off under no_grad). A result that is the input itself
     * (contiguous of a contiguous tensor) keeps its own state. */
    if (r != call->in[0])
        r->requires_grad = false;
    return ct_call_set_output(call, 0, r);
}
