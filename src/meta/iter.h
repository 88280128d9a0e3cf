/* TensorIterator: broadcasting, type promotion, output allocation, dimension
 * reordering and coalescing (planned here, for any device); a backend then runs its
 * loop over the plan (the CPU: ct_iter_run in src/cpu/iter.h).
 *
 *   ct_iter it;
 *   ct_iter_config cfg = ct_iter_config_default();  // then set fields
 *   if (ct_iter_build(&it, "add", &cfg) != CT_OK) return ...;
 *   ct_iter_run(&it, loop, &params);
 *   ct_iter_finish(&it);  // copies a temporary output back, drops references
 *
 * Operands are numbered outputs first. Loops see compute-dtype inputs and an output
 * of the loop's dtype (cfg.loop_out_dtype) and get byte strides. */
#ifndef CT_META_ITER_H
#define CT_META_ITER_H

#include "dispatch/call.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

#define CT_ITER_MAX 6


typedef enum ct_iter_out_dtype {
    CT_ITER_OUT_COMMON = 0, /* output dtype = compute dtype */
    CT_ITER_OUT_BOOL,       /* comparisons, predicates */
} ct_iter_out_dtype;

typedef struct ct_iter_config {
    const char *op;
    int nin;
    const ct_tensor *in[CT_ITER_MAX];
    /* The output: NULL to allocate one; else the out= or in-place tensor. */
    ct_tensor *out;
    bool inplace; /* out is in[0]: the broadcast shape must equal its shape */
    bool promote_int_to_float; /* integer/bool compute dtype becomes the default float */
    ct_iter_out_dtype out_kind;
    /* Forces the compute dtype (CT_DTYPE_UNDEFINED: the inputs' result type). */
    ct_dtype compute_dtype;
    ct_device device;
    /* Bit i: input i keeps its own dtype and takes no part in type promotion (where's
     * condition). */
    uint32_t keep_dtype;
} ct_iter_config;

typedef struct ct_iter {
    const char *op;
    int ntensors; /* 1 output + inputs */
    char *data[CT_ITER_MAX];
    int ndim; /* after coalescing; dim 0 is innermost */
    int64_t shape[CT_MAX_DIMS];
    int64_t strides[CT_MAX_DIMS][CT_ITER_MAX]; /* bytes, per dim then operand */
    int64_t numel;
    ct_dtype compute_dtype;
    ct_dtype loop_out_dtype;
    ct_tensor *out;       /* the result the caller sees (new reference) */
    ct_tensor *loop_out;  /* what the loop writes: out, or a temporary to copy into out */
    ct_tensor *hold[CT_ITER_MAX]; /* converted inputs kept alive */
} ct_iter;

ct_iter_config ct_iter_config_default(void);
/* Builds the iterator; on error nothing is held and the error is set. */
ct_status ct_iter_build(ct_iter *it, const ct_iter_config *cfg);
/* Writes a temporary output back into the real one. Returns the output (a new
 * reference the caller owns) or NULL on error; releases everything else. */
ct_tensor *ct_iter_finish(ct_iter *it);
void ct_iter_abort(ct_iter *it);

/* Broadcast shape of several shapes; false (error set, naming op) if incompatible. */
bool ct_broadcast_shapes(const char *op, const ct_tensor *const *ts, int n, int64_t *shape, int *ndim);

CT_BACKEND_END

#endif /* CT_META_ITER_H */
