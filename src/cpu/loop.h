/* Strided N-d loops over one or two operands with dimension coalescing.
 *
 * The CPU backend's minimal iterator (copies, fills, conversions; src/cpu/copy.c). The
 * TensorIterator builds on the same idea with broadcasting, promotion and threads. */
#ifndef CT_CPU_LOOP_H
#define CT_CPU_LOOP_H

#include "tensor_impl.h"

/* Inner loop over n elements: byte pointers and byte strides. */
typedef void (*ct_loop2_fn)(char *dst, const char *src, int64_t n, int64_t dst_stride, int64_t src_stride,
                            void *ctx);

/* Runs fn over shape with the given element strides (dst_strides/src_strides in
 * elements of dst_esize/src_esize bytes). Dimensions that are contiguous in both
 * operands are merged so the inner loop is as long as possible. */
void ct_loop2(int ndim, const int64_t *shape, char *dst, const int64_t *dst_strides, size_t dst_esize,
              const char *src, const int64_t *src_strides, size_t src_esize, ct_loop2_fn fn, void *ctx);

/* Returns the inner loop that converts src_dtype elements to dst_dtype. */
ct_loop2_fn ct_cast_loop(ct_dtype dst_dtype, ct_dtype src_dtype);

#endif /* CT_CPU_LOOP_H */
