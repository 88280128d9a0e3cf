/* The CPU loops of the reductions and scans over a plan of src/meta/reduce_iter.h. */
#ifndef CT_CPU_REDUCE_H
#define CT_CPU_REDUCE_H

#include "meta/reduce_iter.h"

/* Produces the output element(s) at out[] from the reduced elements starting at in. */
typedef void (*ct_reduce_fn)(const ct_reduce_iter *it, const char *in, char *const *out, const void *params);
/* Calls fn once per output element, in parallel over output elements when large. */
void ct_reduce_run(const ct_reduce_iter *it, ct_reduce_fn fn, const void *params);

/* Visits the reduced elements [begin, end) (flat, in walk order) under one output
 * element as 1-D segments (p, n, byte stride). */
typedef void (*ct_seg_fn)(void *ctx, const char *p, int64_t n, int64_t stride);
void ct_reduce_walk(const ct_reduce_iter *it, const char *base, int64_t begin, int64_t end, ct_seg_fn fn, void *ctx);

/* Runs one reduction or scan over an initialised iterator. */
void ct_cpu_reduce(const ct_reduce_iter *it, const ct_reduce_params *params);

#endif /* CT_CPU_REDUCE_H */
