/* The CPU's loops over a TensorIterator plan (src/meta/iter.h). */
#ifndef CT_CPU_ITER_H
#define CT_CPU_ITER_H

#include "meta/iter.h"

/* data[k] and strides[k] for operand k (outputs first), n elements. */
typedef void (*ct_cpu_loop)(char **data, const int64_t *strides, int64_t n, const void *params);

/* Runs loop over every element, in parallel above a grain size. */
void ct_iter_run(const ct_iter *it, ct_cpu_loop loop, const void *params);

/* Note [Tiny elementwise] (iter.c): the iterator's shortcut for the fast lane. True when
 * a (and b, when not NULL) are non-empty contiguous CPU tensors of one shape and one
 * dtype with at most CT_ITER_TINY_MAX elements, none requiring grad or a wrapped number. */
#define CT_ITER_TINY_MAX 4096
bool ct_iter_tiny_ok(const ct_tensor *a, const ct_tensor *b);
/* Runs loop once over such inputs into a new contiguous tensor of out_dtype (owned by
 * the innermost scope), allocating under op's name. NULL with the error set when the
 * memory could not be had. */
ct_tensor *ct_iter_tiny(const char *op, ct_cpu_loop loop, ct_dtype out_dtype, const ct_tensor *a,
                        const ct_tensor *b, const void *params);

#endif /* CT_CPU_ITER_H */
