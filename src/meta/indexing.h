/* Helpers shared by the indexing structured kernels (src/meta) and their CPU loops
 * (src/cpu), and the codes their stubs take (scatter_reduce's reductions, pad's
 * modes). */
#ifndef CT_META_INDEXING_H
#define CT_META_INDEXING_H

#include <string.h>

#include "core/dtype.h"
#include "core/checks.h"
#include "core/factory.h"
#include "core/view.h"
#include "dispatch/call.h"
#include "meta/kernels.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* scatter_reduce's reductions, in the order of PyTorch's names (sum, prod, mean, amax,
 * amin): the reduce argument of the scatter stub (-1: a plain scatter). The CUDA
 * kernels number them the same way (CT_CUDA_SCATTER_*). */
enum { CT_SCATTER_SUM = 0, CT_SCATTER_PROD, CT_SCATTER_MEAN, CT_SCATTER_AMAX, CT_SCATTER_AMIN, CT_SCATTER_REDUCE_COUNT };

/* pad's modes (Note [pad] in src/meta/pad.c), in the order of ct_pad_mode_name; the
 * CUDA kernels number them the same way (CT_CUDA_REMAP_*). */
enum { CT_PAD_CONSTANT = 0, CT_PAD_REFLECT, CT_PAD_REPLICATE, CT_PAD_CIRCULAR, CT_PAD_MODE_COUNT };

static inline const char *ct_pad_mode_name(int mode) {
    static const char *const names[CT_PAD_MODE_COUNT] = {"constant", "reflect", "replicate", "circular"};
    return mode >= 0 && mode < CT_PAD_MODE_COUNT ? names[mode] : "?";
}

static inline bool ct_ix_is_meta(const ct_tensor *t) { return t->device.type == CT_DEVICE_META; }

/* Hands a kernel's new tensor to the call (NULL: the error is already set). */
static inline ct_status ct_ix_set_out(ct_call *call, int i, ct_tensor *t) {
    return t ? ct_call_set_output(call, i, t) : ct_last_status();
}

static inline void ct_ix_next_coord(int64_t *coord, const int64_t *shape, int nd) {
    for (int i = nd - 1; i >= 0; i--) {
        if (++coord[i] < shape[i])
            return;
        coord[i] = 0;
    }
}

static inline int64_t ct_ix_offset(const int64_t *coord, const int64_t *strides, int nd) {
    int64_t off = 0;
    for (int i = 0; i < nd; i++)
        off += coord[i] * strides[i];
    return off;
}

/* Reads an int64 index element at an element offset of index's storage view. */
static inline int64_t ct_ix_load_index(const ct_tensor *index, int64_t off) {
    return ((const int64_t *)ct_tensor_ptr(index))[off];
}

/* The output of an update op (scatter, index_copy, ...): the given tensor for in-place
 * calls, a new one holding t's values otherwise; *work is a contiguous tensor holding
 * the same values that the stub edits (NULL on META). ct_ix_finish_update writes
 * work back into out. In place, work is always a copy, so an op that fails half way
 * (an index out of range) leaves self as it was. */
static inline ct_status ct_ix_begin_update(ct_call *call, const ct_tensor *t, ct_tensor **out, ct_tensor **work) {
    ct_tensor *o;
    *work = NULL;
    if (call->mode == CT_CALL_INPLACE) {
        o = call->out[0];
        if (ct_check_no_internal_overlap(ct_op_name(call->op), o)) /* Note [Internal overlap] */
            return ct_last_status();
    } else {
        o = ct_empty_impl(t->shape, t->ndim, t->dtype, t->device);
        ct_status st = ct_ix_set_out(call, 0, o);
        if (st)
            return st;
        if (!ct_ix_is_meta(o) && !ct_copy_impl(o, t))
            return ct_last_status();
    }
    *out = o;
    if (ct_ix_is_meta(o))
        return CT_OK;
    *work = ct_tensor_is_contiguous(o) && call->mode != CT_CALL_INPLACE ? o : ct_clone_impl(o);
    return *work ? CT_OK : ct_last_status();
}

static inline ct_status ct_ix_finish_update(ct_tensor *out, ct_tensor *work) {
    if (work && work != out && !ct_copy_impl(out, work))
        return ct_last_status();
    return CT_OK;
}

/* Note [scatter shapes] (indexing.c): index against self and src. */
ct_status ct_ix_check_scatter_shapes(const char *op, const ct_tensor *t, const ct_tensor *index, int d,
                                     const ct_tensor *src);

/* The shared device check of the structured kernels (kernels.h). */
static inline ct_status ct_ix_check_devices(const char *op, const ct_call *call) { return ct_call_check_devices(op, call); }

/* Marks a call in place on self (the call takes its own reference). */
static inline void ct_ix_inplace(ct_call *c, ct_tensor *self) {
    c->mode = CT_CALL_INPLACE;
    c->out[0] = ct_retain(self);
    c->nout = 1;
}

CT_BACKEND_END

#endif /* CT_META_INDEXING_H */
