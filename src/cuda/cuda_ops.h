/* The CUDA backend's op kernels, as the op families and the dispatcher see them. */
#ifndef CT_CUDA_OPS_H
#define CT_CUDA_OPS_H

#include "meta/reduce_iter.h"
#include "cuda/cuda_tensor.h"
#include "meta/elementwise.h"

/* Whether op (in the given variant) has a CUDA kernel for compute dtype dtype; whether
 * it has one for any dtype. */
bool ct_cuda_elementwise_supported(ct_op op, int variant, ct_dtype dtype);
bool ct_cuda_elementwise_has(ct_op op, int variant);
/* Runs op over a built iterator whose operands live on a CUDA device. */
ct_status ct_cuda_iter_run(const ct_iter *it, ct_op op, int variant, const ct_loop_params *params);
/* *found: whether operand k of a built CUDA iterator holds a zero (integer divisors;
 * waits for the stream). */
ct_status ct_cuda_iter_any_zero(const ct_iter *it, int k, bool *found);
/* Installs the elementwise backend (elementwise.c); the reduction and foreach stubs
 * (reduce_cuda.c). */
void ct_cuda_register_elementwise(void);
void ct_cuda_register_reduce(void);
/* Registers the whole CUDA backend: device interface, kernels, stubs (register.c). */
void ct_cuda_register(void);

/* Runs a planned reduction or scan (src/meta/reduce_iter.c) whose input and outputs live on
 * device. */
ct_status ct_cuda_reduce(const ct_reduce_iter *it, const ct_reduce_params *params, ct_device device, const char *op);

/* ct_foreach_powsum in one launch (reduce_cuda.c): applies when every tensor is a
 * float tensor on one CUDA device that dtype (if given) widens or keeps, and none
 * requires grad; results as ct_foreach_powsum's. */
bool ct_cuda_foreach_powsum_applies(const ct_tensor *const *ts, int n, ct_dtype dtype);
ct_status ct_cuda_foreach_powsum(const ct_tensor *const *ts, int n, double ord, ct_dtype dtype, ct_tensor **results);

/* Indexing (indexing_cuda.c): the shared kernels of src/meta/indexing.c call these once
 * their output lives on a CUDA device; shapes, dtypes and dims are checked by then. */
ct_status ct_cuda_index_select(ct_tensor *out, const ct_tensor *t, const ct_tensor *index, int dim);
ct_status ct_cuda_gather(ct_tensor *out, const ct_tensor *t, const ct_tensor *index, int dim);
ct_status ct_cuda_scatter_add(ct_tensor *out, const ct_tensor *src, const ct_tensor *index, int dim);
ct_status ct_cuda_index_add(ct_tensor *out, const ct_tensor *src, const ct_tensor *index, int dim, double alpha);
/* mask_strides: the bool mask's element strides broadcast to out's shape; value: the
 * fill value's bytes in out's dtype. */
ct_status ct_cuda_masked_fill(ct_tensor *out, const ct_tensor *mask, const int64_t *mask_strides, const void *value);
/* Writes the first k of t's rows along d, sorted, into vals and idx (allocated with
 * size k along d, contiguous). */
ct_status ct_cuda_sort(ct_tensor *vals, ct_tensor *idx, const ct_tensor *t, int d, int64_t k, bool descending);
/* The stubs of the update kernels of src/meta/indexing.c, on their contiguous work
 * tensor w once it lives on a GPU (Note [Update kernels]); arguments checked by then.
 * scatter: reduce -1 for a plain scatter of src, or of value's bytes when src is NULL;
 * else a CT_SCATTER_* code (src/meta/indexing.h, the CT_CUDA_SCATTER_* order).
 * index_fill: value's bytes. Index messages as the CPU's. */
ct_status ct_cuda_scatter(ct_tensor *w, const ct_tensor *index, const ct_tensor *src, const void *value, int dim,
                          int reduce, bool include_self, const char *op);
ct_status ct_cuda_index_copy(ct_tensor *w, const ct_tensor *index, const ct_tensor *src, int dim);
ct_status ct_cuda_index_fill(ct_tensor *w, const ct_tensor *index, const void *value, int dim);
/* Advanced indexing (src/meta/advindex.c's plan: per dim of t its int64 index or NULL,
 * their strides broadcast to the index shape, which has bnd dims and sits at result
 * dim insert; the sliced dims). index: out (contiguous) = t indexed; index_put: into the
 * contiguous work tensor w, values read through vstr over the result shape. */
ct_status ct_cuda_index_get(ct_tensor *out, const ct_tensor *t, const ct_tensor *const *idx,
                            const int64_t (*istr)[CT_MAX_DIMS], int bnd, int insert, const int *slice_dim,
                            int nslice);
ct_status ct_cuda_index_put(ct_tensor *w, const ct_tensor *values, const int64_t *vstr, const ct_tensor *const *idx,
                            const int64_t (*istr)[CT_MAX_DIMS], const int64_t *oshape, int ond, int bnd, int insert,
                            const int *slice_dim, int nslice, bool accumulate);
/* nonzero and masked_select: allocate the data-dependent output on t's device and set
 * it as the call's output 0. masked_select: the broadcast shape and both operands'
 * element strides over it. */
ct_status ct_cuda_nonzero(ct_call *call, const ct_tensor *t);
ct_status ct_cuda_masked_select(ct_call *call, const ct_tensor *t, const ct_tensor *mask, const int64_t *shape, int nd,
                                const int64_t *tstr, const int64_t *mstr);
/* shape_cuda.c: flip (flipped: per dim), tril/triu of a contiguous c, pad (src/meta/pad.c's
 * lo and hi_crop, its mode order, value's bytes); outputs allocated, contiguous. */
ct_status ct_cuda_flip(ct_tensor *out, const ct_tensor *t, const bool *flipped);
ct_status ct_cuda_tri(ct_tensor *out, const ct_tensor *c, int64_t k, bool lower);
ct_status ct_cuda_pad(ct_tensor *out, const ct_tensor *t, const int64_t *lo, const int64_t *hi_crop, int mode,
                      const void *value);
/* Registers cat, index_select, gather, scatter_add, index_add, masked_fill, embedding,
 * embedding_backward, sort, topk, flip, tril, triu, pad, nonzero, masked_select,
 * scatter, scatter_reduce, index_copy, index_fill, index, index_put and one_hot at
 * CT_KEY_CUDA. */
void ct_cuda_register_indexing(void);
/* Registers nll_loss, nll_loss_backward, attention, and (through nn_rt.h) convolution,
 * pooling and the fused normalisation ops at CT_KEY_CUDA (nn_cuda.c). */
void ct_cuda_register_nn(void);

/* Registers fused_adam and fused_adamw at CT_KEY_CUDA (fused_optim_cuda.c). */
void ct_cuda_register_fused_optim(void);
/* _cudnn_rnn and _cudnn_rnn_backward (rnn_cudnn.c). */
void ct_cuda_register_cudnn_rnn(void);

/* Registers the CUDA kernels of CUSTOM ops at CT_KEY_CUDA (called once by the op
 * table's registration). */
void ct_cuda_register_kernels(void);

/* Matrix products (blas.c). */
ct_status ct_cuda_mm(ct_keyset ks, ct_call *call, void *user_data);
ct_status ct_cuda_bmm(ct_keyset ks, ct_call *call, void *user_data);
ct_status ct_cuda_dot(ct_keyset ks, ct_call *call, void *user_data);
ct_status ct_cuda_addmm(ct_keyset ks, ct_call *call, void *user_data);
ct_status ct_cuda_baddbmm(ct_keyset ks, ct_call *call, void *user_data);
/* How many addmm products have run with cuBLASLt's bias epilogue in this process
 * (Note [Bias epilogue] in blas.cu); for tests. */
uint64_t ct_cuda_bias_epilogue_count(void);
/* Products that ran a GELU epilogue of gelu_mlp (Note [GELU epilogues] in blas.c). */
uint64_t ct_cuda_gelu_epilogue_count(void);

#endif
