/* Checks shared by the ops: overflow-checked size arithmetic and internal overlap of
 * written tensors. */
#ifndef CT_CORE_CHECKS_H
#define CT_CORE_CHECKS_H

#include "tensor_impl.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* Note [Checked sizes]
 * Sizes, counts and offsets computed from user arguments (output sizes of conv, pool
 * and pad, sums of split sizes, repeat's products, ...) go through these instead of
 * plain int64 arithmetic, whose overflow is undefined and, in practice, wraps into a
 * small wrong size that the op then accepts. Each returns false on overflow and leaves
 * the error to the caller, who knows the op's words. */
static inline bool ct_size_add(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }
static inline bool ct_size_sub(int64_t a, int64_t b, int64_t *r) { return !__builtin_sub_overflow(a, b, r); }
static inline bool ct_size_mul(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
/* The output size of a convolution or pooling window along one dim, PyTorch's
 * (in + pad_l + pad_r - dilation * (kernel - 1) - 1) / stride + 1 (division towards
 * zero), with ceil_mode's rounding up; false when a step overflows int64. */
bool ct_window_out_size(int64_t in, int64_t pad_l, int64_t pad_r, int64_t kernel, int64_t stride, int64_t dilation,
                        bool ceil_mode, int64_t *out);

/* Note [Internal overlap]
 * A tensor written by an op (an out= tensor, an in-place self) must not have two
 * elements at one memory location: the result would depend on the order of the loop,
 * threads would race on it, and an integer division whose divisor is the output
 * divides by the zero it has just written. PyTorch refuses outputs with a stride 0
 * over a size above 1 (expanded tensors); ctorch refuses every output it cannot prove
 * free of overlap: sorted by stride, each stride must exceed the reach of the smaller
 * ones. Every view made by slicing, selecting, permuting or narrowing passes; only
 * as_strided can build a layout that PyTorch would write (its check answers "too hard
 * to tell") and ctorch refuses. */
bool ct_tensor_has_internal_overlap(const ct_tensor *t);
/* The error PyTorch gives for such an output (CT_OK when t is free of overlap). */
ct_status ct_check_no_internal_overlap(const char *op, const ct_tensor *t);

CT_BACKEND_END

#endif /* CT_CORE_CHECKS_H */
