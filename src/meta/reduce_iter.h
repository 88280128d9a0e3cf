/* The reduction mode of the TensorIterator: how a reduction or scan (sum, max, var,
 * cumsum, softmax, ...) walks its input, planned for any backend (reduce_iter.c), and
 * what it computes (ct_reduce_params); the loops are the backends' (src/cpu/reduce.h).
 *
 * A reduction splits the input's dims into kept dims (one per output element) and
 * reduced dims (walked for each output element). Outputs are written at stride 0
 * along the reduced dims: each output element is produced by exactly one call of a
 * row function, so no reduced run is ever split between threads except through the
 * fixed-size chunking of Note [Deterministic reductions]. */
#ifndef CT_META_REDUCE_ITER_H
#define CT_META_REDUCE_ITER_H

#include "dispatch/call.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

typedef struct ct_reduce_iter {
    int nout;
    const char *in;
    char *out[2];
    ct_dtype in_dtype;            /* the work dtype: float32, float64 or int64 */
    ct_dtype out_dtype[2];
    int nk;                       /* kept dims, outermost first, coalesced */
    int64_t kshape[CT_MAX_DIMS];
    int64_t kin[CT_MAX_DIMS];     /* input byte strides along the kept dims */
    int64_t kout[2][CT_MAX_DIMS]; /* output byte strides along the kept dims */
    int nr;                       /* reduced dims, outermost first, coalesced */
    int64_t rshape[CT_MAX_DIMS];
    int64_t rstride[CT_MAX_DIMS]; /* input byte strides */
    int64_t rout[2];              /* scans only: output byte stride along the scanned dim */
    int64_t out_numel, red_numel;
} ct_reduce_iter;

/* Sets up a reduction of in over the dims in mask (bit d: dim d) into outs, which have
 * the reduced shape (with size-1 dims where keepdim). reorder lets the walk visit the
 * reduced elements in memory order (for ops where the order does not matter beyond
 * rounding); otherwise they come in row-major logical order, as indices need. */
void ct_reduce_iter_init(ct_reduce_iter *it, const ct_tensor *in, uint32_t mask, ct_tensor *const *outs, int nout,
                         bool keepdim, bool reorder);
/* A scan along dim: outs have in's shape. Rows are (in, rshape[0], rstride[0]). */
void ct_scan_iter_init(ct_reduce_iter *it, const ct_tensor *in, int dim, ct_tensor *const *outs, int nout);

/* What a reduction computes; the row functions of each backend follow it. */
typedef enum ct_reduce_kind {
    CT_RED_SUM,      /* also mean: divided by div */
    CT_RED_NANSUM,   /* also nanmean: divided by the count of non-NaN */
    CT_RED_PROD,
    CT_RED_MAX,      /* amax and full max; NaN propagates */
    CT_RED_MIN,
    CT_RED_ARGMAX,   /* out[0] values (optional: NULL), out[1] int64 indices */
    CT_RED_ARGMIN,
    CT_RED_COUNT,    /* count_nonzero; any/all compare it */
    CT_RED_ANY,
    CT_RED_ALL,
    CT_RED_VAR,      /* out[0] var or std, out[1] (optional) mean */
    CT_RED_LOGSUMEXP,
    CT_RED_NORM,     /* vector norm of order p (0, +-inf, 1, 2, any) */
    CT_RED_POWSUM,   /* sum |x|^p with no special cases and no root */
    CT_RED_CUMSUM,   /* scans */
    CT_RED_CUMPROD,
    CT_RED_CUMMAX,
    CT_RED_CUMMIN,
    CT_RED_SOFTMAX,
    CT_RED_LOG_SOFTMAX,
} ct_reduce_kind;

typedef struct ct_reduce_params {
    ct_reduce_kind kind;
    double p;          /* norm order, var correction */
    bool take_sqrt;    /* std */
    bool mean;         /* sum -> mean, nansum -> nanmean */
    bool index_only;   /* argmax/argmin: out[0] is the index output */
} ct_reduce_params;

CT_BACKEND_END

#endif /* CT_META_REDUCE_ITER_H */
