/* ctorch operators: the public functions of the op table (ctorch/ops.def).
 *
 * An op whose signature class generates its functions (UNARY, BINARY, ...) has its
 * prototypes in ctorch/ops_generated.h, written from the table by
 * tools/gen_ops_header.c; the CUSTOM ops are declared below by hand. All follow the
 * ownership and error rules of core.h: results are new references owned by the
 * innermost scope, NULL on error. */
#ifndef CTORCH_OPS_H
#define CTORCH_OPS_H

#include "core.h"
#include "dispatch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rounding of ct_div_mode (PyTorch's rounding_mode=None, 'trunc', 'floor'). */
typedef enum ct_rounding_mode {
    CT_ROUNDING_MODE_NONE = 0,  /* true division */
    CT_ROUNDING_MODE_TRUNC = 1, /* round toward zero (C integer division) */
    CT_ROUNDING_MODE_FLOOR = 2, /* round down (Python's //) */
} ct_rounding_mode;

/* ct_gelu's approximate= ('none' or 'tanh'). */
typedef enum ct_gelu_approximate {
    CT_GELU_APPROXIMATE_NONE = 0,
    CT_GELU_APPROXIMATE_TANH = 1,
} ct_gelu_approximate;

/* The functions of the generated signature classes (UNARY, BINARY, the reductions,
 * ...): one committed header, written by tools/gen_ops_header.c from ops.def. */
#include "ops_generated.h"

/* ------------------------------------------------------------ linear algebra */

/* matmul with PyTorch's rules: 1-D x 1-D is a dot product, 2-D x 1-D a matrix-vector
 * product, 1-D operands get a dimension prepended/appended and removed after, and
 * batch dimensions broadcast. */
CT_API ct_tensor *ct_matmul(const ct_tensor *a, const ct_tensor *b);
/* beta * c + alpha * (a @ b), c broadcast to (n, m). */
CT_API ct_tensor *ct_addmm(const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, ct_scalar beta,
                           ct_scalar alpha);
/* beta * c + alpha * (a @ b) for batches (b, n, k) @ (b, k, m). */
CT_API ct_tensor *ct_baddbmm(const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, ct_scalar beta,
                             ct_scalar alpha);
/* relu(beta * c + alpha * (a @ b)), or its tanh-form GELU when use_gelu, as PyTorch's
 * torch._addmm_activation. On CUDA, with c a bias row and beta = 1, the activation
 * and the bias run in cuBLASLt's epilogue; elsewhere addmm is followed by the
 * activation in place. Differentiable: the backward recomputes the product for GELU
 * (the fused forward keeps no pre-activation), so it pays off most without grad. */
CT_API ct_tensor *ct_addmm_activation(const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, ct_scalar beta,
                                      ct_scalar alpha, bool use_gelu);
/* x @ w^T + bias (bias may be NULL), as torch.nn.functional.linear. */
CT_API ct_tensor *ct_linear(const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias);
/* torch.outer (torch.ger): the (n, m) product a[i] * b[j] of two 1-D tensors, in
 * their promoted dtype (booleans give logical and). */
CT_API ct_tensor *ct_outer(const ct_tensor *a, const ct_tensor *b);

/* ------------------------------------------------------------ composites
 * Built from other ops (src/ops/composite.c): every backend, META and autograd come
 * with them (docs/ops.md, "Composites"). */

/* log(exp(a) + exp(b)) and log2(2^a + 2^b), floating results only. */
CT_API ct_tensor *ct_logaddexp(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_logaddexp2(const ct_tensor *a, const ct_tensor *b);
/* x * log(y), 0 where x == 0 (NaN where y is NaN); integers promote to float. */
CT_API ct_tensor *ct_xlogy(const ct_tensor *x, const ct_tensor *y);
/* torch.special.xlog1py: x * log1p(y), 0 where x == 0 (NaN where y is NaN). */
CT_API ct_tensor *ct_xlog1py(const ct_tensor *x, const ct_tensor *y);
/* torch.special.entr: -x log x for x > 0, 0 at 0, -inf for x < 0. */
CT_API ct_tensor *ct_entr(const ct_tensor *x);
/* torch.ldexp: x * 2^e. */
CT_API ct_tensor *ct_ldexp(const ct_tensor *x, const ct_tensor *e);
/* sin(pi x) / (pi x), 1 at 0. */
CT_API ct_tensor *ct_sinc(const ct_tensor *x);
CT_API ct_tensor *ct_deg2rad(const ct_tensor *x);
CT_API ct_tensor *ct_rad2deg(const ct_tensor *x);
/* values where x == 0, else (x > 0); x and values of one dtype. */
CT_API ct_tensor *ct_heaviside(const ct_tensor *x, const ct_tensor *values);
/* true where the sign bit is set (-0.0 and negative NaNs included). */
CT_API ct_tensor *ct_signbit(const ct_tensor *x);
/* pow computed in float64. */
CT_API ct_tensor *ct_float_power(const ct_tensor *a, const ct_tensor *b);
/* m (2-D) @ v (1-D). */
CT_API ct_tensor *ct_mv(const ct_tensor *m, const ct_tensor *v);
/* beta * c + alpha * (m @ v), and beta * c + alpha * outer(a, b). */
CT_API ct_tensor *ct_addmv(const ct_tensor *c, const ct_tensor *m, const ct_tensor *v, ct_scalar beta,
                           ct_scalar alpha);
CT_API ct_tensor *ct_addr(const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, ct_scalar beta,
                          ct_scalar alpha);
/* Sum over the last dims of a and b: shape a[:-1] + b[:-1]. */
CT_API ct_tensor *ct_inner(const ct_tensor *a, const ct_tensor *b);
/* dot of two 1-D tensors (torch.vdot on real inputs). */
CT_API ct_tensor *ct_vdot(const ct_tensor *a, const ct_tensor *b);
/* Contracts dims_a[i] of a with dims_b[i] of b (n pairs): a's free dims, then b's. */
CT_API ct_tensor *ct_tensordot(const ct_tensor *a, const ct_tensor *b, const int64_t *dims_a,
                               const int64_t *dims_b, int n);
CT_API ct_tensor *ct_kron(const ct_tensor *a, const ct_tensor *b);
/* torch.linalg.cross along dim (size 3 in both). */
CT_API ct_tensor *ct_linalg_cross(const ct_tensor *a, const ct_tensor *b, int64_t dim);
/* 1-D x: a matrix with x on diagonal k; 2-D x: a copy of its diagonal k. */
CT_API ct_tensor *ct_diag(const ct_tensor *x, int64_t k);
/* Sum of a matrix's main diagonal. */
CT_API ct_tensor *ct_trace(const ct_tensor *x);
/* amin and amax at once over dim (NULL: all dims). */
CT_API ct_status ct_aminmax(const ct_tensor *x, const int64_t *dim, bool keepdim, ct_tensor **min,
                            ct_tensor **max);
/* The lower median (Note [Median by sorting]): of all elements (0-d result), or along
 * dim with the index it came from (indices may be NULL). median gives NaN for a row
 * with a NaN; nanmedian skips NaNs. */
CT_API ct_tensor *ct_median(const ct_tensor *x);
CT_API ct_tensor *ct_nanmedian(const ct_tensor *x);
CT_API ct_status ct_median_dim(const ct_tensor *x, int64_t dim, bool keepdim, ct_tensor **values,
                               ct_tensor **indices);
CT_API ct_status ct_nanmedian_dim(const ct_tensor *x, int64_t dim, bool keepdim, ct_tensor **values,
                                  ct_tensor **indices);
/* Sorted along dim 0. */
CT_API ct_tensor *ct_msort(const ct_tensor *x);
/* torch.quantile: q (0-d or 1-d, x's dtype, float32/float64) over dim (NULL: all
 * elements); interpolation "linear", "lower", "higher", "midpoint" or "nearest". */
CT_API ct_tensor *ct_quantile(const ct_tensor *x, const ct_tensor *q, const int64_t *dim, bool keepdim,
                              const char *interpolation);
/* The n-th forward difference along dim; prepend/append (or NULL) are joined first. */
CT_API ct_tensor *ct_diff(const ct_tensor *x, int64_t n, int64_t dim, const ct_tensor *prepend,
                          const ct_tensor *append);
/* (2, N) indices of the lower / upper triangle of a rows x cols matrix, row-major;
 * dtype int64 (CT_DTYPE_UNDEFINED) or int32. */
CT_API ct_tensor *ct_tril_indices(int64_t rows, int64_t cols, int64_t offset, ct_dtype dtype, ct_device device);
CT_API ct_tensor *ct_triu_indices(int64_t rows, int64_t cols, int64_t offset, ct_dtype dtype, ct_device device);
/* p-norm distances between the rows of x1 (..., P, M) and x2 (..., R, M). */
CT_API ct_tensor *ct_cdist(const ct_tensor *x1, const ct_tensor *x2, double p);
/* torch.bucketize: for each x the index of its bucket among the sorted 1-D boundaries
 * (right: boundaries[i-1] <= x < boundaries[i], else boundaries[i-1] < x <=
 * boundaries[i]); int64, or int32 with out_int32. */
CT_API ct_tensor *ct_bucketize(const ct_tensor *x, const ct_tensor *boundaries, bool right, bool out_int32);
/* torch.searchsorted: sorted is 1-D, or has values' leading dims (one sorted row per
 * row of values). */
CT_API ct_tensor *ct_searchsorted(const ct_tensor *sorted, const ct_tensor *values, bool right, bool out_int32);
/* torch.bincount of a 1-D non-negative integer tensor; weights (or NULL) of its length. */
CT_API ct_tensor *ct_bincount(const ct_tensor *x, const ct_tensor *weights, int64_t minlength);
/* torch.histc: bins equal bins over [min, max] (both equal: the data's range). */
CT_API ct_tensor *ct_histc(const ct_tensor *x, int64_t bins, double min, double max);
/* log(cumsum(exp(x))) along dim, stable (Note [logcumsumexp as a scan]). */
CT_API ct_tensor *ct_logcumsumexp(const ct_tensor *x, int64_t dim);
/* quantile over the values that are not NaN (NaN only for rows of NaNs). */
CT_API ct_tensor *ct_nanquantile(const ct_tensor *x, const ct_tensor *q, const int64_t *dim, bool keepdim,
                                 const char *interpolation);
/* torch.rot90: k quarter turns from dims[0] towards dims[1] (dims NULL: {0, 1}). */
CT_API ct_tensor *ct_rot90(const ct_tensor *x, int64_t k, const int64_t *dims, int ndims);
/* torch.diag_embed: x's last dim on diagonal offset of the (dim1, dim2) plane. */
CT_API ct_tensor *ct_diag_embed(const ct_tensor *x, int64_t offset, int64_t dim1, int64_t dim2);
/* torch.block_diag of n tensors of at most 2 dims (at most 64 of them). */
CT_API ct_tensor *ct_block_diag(const ct_tensor *const *tensors, int n);
/* torch.cartesian_prod of n 1-D tensors: (product of sizes, n). */
CT_API ct_tensor *ct_cartesian_prod(const ct_tensor *const *tensors, int n);
/* torch.cov of the rows of x (no weights) and torch.corrcoef. */
CT_API ct_tensor *ct_cov(const ct_tensor *x, int64_t correction);
CT_API ct_tensor *ct_corrcoef(const ct_tensor *x);
/* torch.isclose: |a - b| <= atol + |rtol * b| or a == b, elementwise (bool); NaNs are
 * close to each other only with equal_nan. a and b of one dtype; PyTorch's defaults
 * are rtol 1e-5, atol 1e-8. */
CT_API ct_tensor *ct_isclose(const ct_tensor *a, const ct_tensor *b, double rtol, double atol, bool equal_nan);
/* torch.allclose: whether isclose holds everywhere, into *out (reads the result on the
 * host: not on META). */
CT_API ct_status ct_allclose(const ct_tensor *a, const ct_tensor *b, double rtol, double atol, bool equal_nan,
                             bool *out);
/* torch.equal: same shape and equal values (promoted; NaN never equal), into *out. */
CT_API ct_status ct_equal(const ct_tensor *a, const ct_tensor *b, bool *out);
/* torch.argwhere: (count, ndim) int64 indices of the nonzero elements (ct_nonzero). */
CT_API ct_tensor *ct_argwhere(const ct_tensor *x);
/* torch.take_along_dim: gather along *dim after broadcasting x and the int64 indices
 * everywhere else; dim NULL: flattened x at the flattened indices. */
CT_API ct_tensor *ct_take_along_dim(const ct_tensor *x, const ct_tensor *indices, const int64_t *dim);
/* torch.dist: the p-norm of a - b. */
CT_API ct_tensor *ct_dist(const ct_tensor *a, const ct_tensor *b, double p);

/* ------------------------------------------------------------ shape and indexing */

/* torch.cat: tensors promoted to their result type; 1-D empty tensors are skipped as
 * PyTorch does. */
CT_API ct_tensor *ct_cat(const ct_tensor *const *tensors, int n, int64_t dim);
CT_API ct_tensor *ct_stack(const ct_tensor *const *tensors, int n, int64_t dim);
/* Views of t along dim: pieces of split_size (the last may be smaller). Writes up to
 * max_out new references to out and returns how many pieces there are (-1 on error). */
CT_API int ct_split(const ct_tensor *t, int64_t split_size, int64_t dim, ct_tensor **out, int max_out);
CT_API int ct_split_with_sizes(const ct_tensor *t, const int64_t *sizes, int nsizes, int64_t dim, ct_tensor **out,
                               int max_out);
/* chunks pieces of ceil(size / chunks), as torch.chunk (there may be fewer). */
CT_API int ct_chunk(const ct_tensor *t, int64_t chunks, int64_t dim, ct_tensor **out, int max_out);
/* select(t, dim, i) for every i. */
CT_API int ct_unbind(const ct_tensor *t, int64_t dim, ct_tensor **out, int max_out);
CT_API ct_tensor *ct_flip(const ct_tensor *t, const int64_t *dims, int ndims);
CT_API ct_tensor *ct_roll(const ct_tensor *t, const int64_t *shifts, const int64_t *dims, int n);
CT_API ct_tensor *ct_repeat(const ct_tensor *t, const int64_t *repeats, int n);
CT_API ct_tensor *ct_tile(const ct_tensor *t, const int64_t *reps, int n);
/* Lower/upper triangle of the last two dims, diagonal offset k. */
CT_API ct_tensor *ct_tril(const ct_tensor *t, int64_t k);
CT_API ct_tensor *ct_triu(const ct_tensor *t, int64_t k);
CT_API ct_tensor *ct_index_select(const ct_tensor *t, int64_t dim, const ct_tensor *index);
CT_API ct_tensor *ct_gather(const ct_tensor *t, int64_t dim, const ct_tensor *index);
/* out = t with src added at index along dim (torch.Tensor.scatter_add). */
CT_API ct_tensor *ct_scatter_add(const ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src);
CT_API ct_tensor *ct_scatter_add_(ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src);
/* out = t with alpha * src's slices added at index along dim (torch.index_add). */
CT_API ct_tensor *ct_index_add(const ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src,
                               ct_scalar alpha);
CT_API ct_tensor *ct_masked_fill(const ct_tensor *t, const ct_tensor *mask, ct_scalar value);
CT_API ct_tensor *ct_masked_fill_(ct_tensor *t, const ct_tensor *mask, ct_scalar value);
/* (number of nonzero elements, ndim) int64 indices, row-major order. */
CT_API ct_tensor *ct_nonzero(const ct_tensor *t);
/* Stable sort along dim; indices (int64) may be NULL. NaN sorts as the largest value. */
CT_API ct_tensor *ct_sort(const ct_tensor *t, int64_t dim, bool descending, ct_tensor **indices);
CT_API ct_tensor *ct_argsort(const ct_tensor *t, int64_t dim, bool descending);
/* The k largest (or smallest) along dim, sorted; indices (int64) may be NULL. */
CT_API ct_tensor *ct_topk(const ct_tensor *t, int64_t k, int64_t dim, bool largest, ct_tensor **indices);

/* ------------------------------------------------------------ advanced indexing */

/* torch.Tensor.scatter: out = t with out[index[i][j]][j] = src[i][j] (dim 0; likewise
 * for other dims). index is int64 with t's number of dims; src has t's dtype. With
 * duplicate indices the last write wins. */
CT_API ct_tensor *ct_scatter(const ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src);
CT_API ct_tensor *ct_scatter_(ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src);
CT_API ct_tensor *ct_scatter_value(const ct_tensor *t, int64_t dim, const ct_tensor *index, ct_scalar value);
CT_API ct_tensor *ct_scatter_value_(ct_tensor *t, int64_t dim, const ct_tensor *index, ct_scalar value);
/* torch.Tensor.scatter_reduce: reduce is "sum", "prod", "mean", "amax" or "amin";
 * include_self false leaves t's values out of the targets' reductions. "mean" on
 * integers divides with floor rounding. */
CT_API ct_tensor *ct_scatter_reduce(const ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src,
                                    const char *reduce, bool include_self);
CT_API ct_tensor *ct_scatter_reduce_(ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src,
                                     const char *reduce, bool include_self);
/* out = t with src's slices along dim copied to the positions in index (int64, 0-d or
 * 1-d). */
CT_API ct_tensor *ct_index_copy(const ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src);
CT_API ct_tensor *ct_index_copy_(ct_tensor *t, int64_t dim, const ct_tensor *index, const ct_tensor *src);
/* out = t with the slices at index along dim set to value. */
CT_API ct_tensor *ct_index_fill(const ct_tensor *t, int64_t dim, const ct_tensor *index, ct_scalar value);
CT_API ct_tensor *ct_index_fill_(ct_tensor *t, int64_t dim, const ct_tensor *index, ct_scalar value);
/* Advanced indexing, t[indices[0], indices[1], ...]: each entry is an int64 tensor, a
 * bool (or uint8) mask covering as many dims as it has, or NULL for a full slice ':'.
 * Index tensors broadcast together; where their dims go follows PyTorch (see
 * docs/ops.md). Always a copy. */
CT_API ct_tensor *ct_index(const ct_tensor *t, const ct_tensor *const *indices, int n);
/* t[indices] = values (values broadcast to the shape ct_index would return); with
 * accumulate, t[indices] += values, duplicates adding up. */
CT_API ct_tensor *ct_index_put(const ct_tensor *t, const ct_tensor *const *indices, int n, const ct_tensor *values,
                               bool accumulate);
CT_API ct_tensor *ct_index_put_(ct_tensor *t, const ct_tensor *const *indices, int n, const ct_tensor *values,
                                bool accumulate);
/* The elements of t where mask (bool; t and mask broadcast together) is true, as a 1-D
 * tensor in row-major order. Refused on META (the size depends on the data). */
CT_API ct_tensor *ct_masked_select(const ct_tensor *t, const ct_tensor *mask);
/* Copies src's elements, in order, to the positions where mask is true. */
CT_API ct_tensor *ct_masked_scatter(const ct_tensor *t, const ct_tensor *mask, const ct_tensor *src);
CT_API ct_tensor *ct_masked_scatter_(ct_tensor *t, const ct_tensor *mask, const ct_tensor *src);
/* t viewed as 1-D, indexed by index (int64, any shape; negative counts from the end). */
CT_API ct_tensor *ct_take(const ct_tensor *t, const ct_tensor *index);
/* The k-th smallest (k from 1) along dim and, in indices (may be NULL), its position. */
CT_API ct_tensor *ct_kthvalue(const ct_tensor *t, int64_t k, int64_t dim, bool keepdim, ct_tensor **indices);
/* torch.unique over the flattened tensor: the distinct values, sorted. inverse (shape of
 * t) and counts are returned when not NULL. Refused on META. */
CT_API ct_tensor *ct_unique(const ct_tensor *t, bool sorted, ct_tensor **inverse, ct_tensor **counts);
/* One value per run of equal consecutive elements. */
CT_API ct_tensor *ct_unique_consecutive(const ct_tensor *t, ct_tensor **inverse, ct_tensor **counts);
/* torch.nn.functional.pad: pad holds (left, right) pairs from the last dim backwards;
 * mode "constant" (value fills; negative pads crop), "reflect", "replicate" or
 * "circular" (these on the last 1-3 dims of a batched or unbatched input). */
CT_API ct_tensor *ct_pad(const ct_tensor *t, const int64_t *pad, int npad, const char *mode, double value);
/* The gradient of ct_pad (PyTorch's reflection_pad*_backward, replication_pad*_backward
 * and the circular one, in one op): grad_output (the padded shape, floating) summed back
 * onto an input of shape input_size (ndim dims). Differentiable (its derivative is
 * pad). CUDA runs it as a composite of index_add (docs/cuda.md). */
CT_API ct_tensor *ct_pad_backward(const ct_tensor *grad_output, const int64_t *input_size, int ndim,
                                  const int64_t *pad, int npad, const char *mode);
/* The kernels of torch.nn.functional.interpolate (PyTorch's upsample_nearest1d/2d,
 * _nearest_exact1d/2d, _linear1d, _bilinear2d, _bicubic2d): input (N, C, W) or
 * (N, C, H, W), floating; output_size: its n = 1 or 2 spatial sizes; mode "nearest",
 * "nearest-exact", "linear" or "bilinear" (the same: linear along each spatial dim) or
 * "bicubic" (A = -0.75, edges clamped); scales: the scale factors the sizes came from,
 * one per spatial dim (NULL, or <= 0 for one not given), which set the sampling ratio
 * as in PyTorch. ct_interpolate (nn.h) is the user-level function. The backward sums
 * grad_output (N, C, output sizes) back onto an input of input_size (ndim dims); each
 * is the other's derivative. CUDA runs them as a composite of index_select/index_add. */
CT_API ct_tensor *ct_upsample(const ct_tensor *input, const int64_t *output_size, int n, const char *mode,
                              bool align_corners, const double *scales);
CT_API ct_tensor *ct_upsample_backward(const ct_tensor *grad_output, const int64_t *input_size, int ndim,
                                       const char *mode, bool align_corners, const double *scales);
/* torch.meshgrid: n 0-d or 1-d tensors give n tensors (views) of shape (s0, ..., sn-1);
 * indexing "ij" (also when NULL) or "xy" (first two dims swapped). */
CT_API ct_status ct_meshgrid(const ct_tensor *const *tensors, int n, const char *indexing, ct_tensor **out);
/* torch.einsum: "ij,jk->ik", implicit outputs ("ij,jk"), repeated letters (diagonals,
 * traces), sums, broadcasting size-1 dims and '...'. */
CT_API ct_tensor *ct_einsum(const char *equation, const ct_tensor *const *operands, int n);

/* ------------------------------------------------------------ neural-network kernels */

/* torch.nn.functional.conv2d on (N, C, H, W) or unbatched (C, H, W) input; weight
 * (O, C / groups, kh, kw); bias (O) or NULL. stride/padding/dilation are {h, w}. */
CT_API ct_tensor *ct_conv2d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias,
                            const int64_t stride[2], const int64_t padding[2], const int64_t dilation[2],
                            int64_t groups);
/* The gradients of conv2d: any of grad_input/grad_weight/grad_bias may be NULL (not
 * computed). Each computed one is a new reference. */
CT_API ct_status ct_conv2d_backward(const ct_tensor *grad_output, const ct_tensor *input, const ct_tensor *weight,
                                    const int64_t stride[2], const int64_t padding[2], const int64_t dilation[2],
                                    int64_t groups, ct_tensor **grad_input, ct_tensor **grad_weight,
                                    ct_tensor **grad_bias);
/* max_pool2d returning the values and, in indices (if not NULL), the flat h * W + w
 * position of each maximum in its input plane (int64), as PyTorch. stride NULL means
 * stride = kernel. */
CT_API ct_tensor *ct_max_pool2d(const ct_tensor *input, const int64_t kernel[2], const int64_t stride[2],
                                const int64_t padding[2], const int64_t dilation[2], bool ceil_mode,
                                ct_tensor **indices);
CT_API ct_tensor *ct_max_pool2d_backward(const ct_tensor *grad_output, const ct_tensor *input,
                                         const ct_tensor *indices);
/* PyTorch's threshold_backward: grad_output where input > threshold, else 0 (the
 * gradient of relu with input its result and threshold 0). Same shapes and dtypes. */
CT_API ct_tensor *ct_threshold_backward(const ct_tensor *grad_output, const ct_tensor *input, ct_scalar threshold);

/* ------------------------------------------------------------ foreach reductions */

/* torch._foreach_powsum: results[i] = linalg__powsum(tensors[i], ord, all dims, dtype),
 * a 0-d tensor per input (new references). On error every results[i] is NULL. */
CT_API ct_status ct_foreach_powsum(const ct_tensor *const *tensors, int n, double ord, ct_dtype dtype,
                                   ct_tensor **results);

/* ------------------------------------------------------------ type promotion */

/* torch.promote_types: CT_DTYPE_UNDEFINED with an error for pairs PyTorch refuses
 * (uint16/uint32/uint64 with another non-float dtype). */
CT_API ct_dtype ct_promote_types(ct_dtype a, ct_dtype b);
/* torch.result_type over tensors, where 0-d tensors and wrapped scalars
 * (ct_NAME_scalar's argument) take part only when they are of a higher category. */
CT_API ct_dtype ct_result_type(const ct_tensor *const *tensors, int n);
/* torch.can_cast: can a value of dtype from be stored in to without a category change
 * (float -> int, int -> bool, ...)? */
CT_API bool ct_can_cast(ct_dtype from, ct_dtype to);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_OPS_H */
