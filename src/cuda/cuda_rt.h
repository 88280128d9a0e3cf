/* Internal interface of the CUDA backend, shared by its C files (which see tensors)
 * and its .cu files (which see only pointers, shapes and strides). Plain C types only:
 * nothing here needs tensor_impl.h, so nvcc never compiles C11 atomics. */
#ifndef CT_CUDA_RT_H
#define CT_CUDA_RT_H

#include <stddef.h>
#include <stdint.h>

#include "ctorch/core.h"
#include "ctorch/cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The backend's side of the public CUDA functions of ctorch/cuda.h: libctorch.so
 * defines those and forwards them here through the runtime table the backend
 * registers (Note [Loadable backends] in src/registry.c, src/api/cuda_runtime.h). */
bool ct_cudart_is_available(void);
int ct_cudart_device_count(void);
ct_status ct_cudart_get_device_properties(int device, ct_cuda_device_properties *out);
int ct_cudart_current_device(void);
ct_status ct_cudart_set_device(int device);
ct_status ct_cudart_synchronize(int device);
ct_status ct_cudart_mem_get_info(int device, int64_t *free_bytes, int64_t *total_bytes);
ct_status ct_cudart_stream_create(int device, int priority, ct_cuda_stream **out);
ct_status ct_cudart_stream_destroy(ct_cuda_stream *stream);
ct_status ct_cudart_stream_synchronize(ct_cuda_stream *stream);
bool ct_cudart_stream_query(ct_cuda_stream *stream);
ct_status ct_cudart_stream_wait_event(ct_cuda_stream *stream, ct_cuda_event *event);
ct_status ct_cudart_set_stream(int device, ct_cuda_stream *stream);
ct_cuda_stream *ct_cudart_current_stream(int device);
int64_t ct_cudart_stream_id(const ct_cuda_stream *stream);
ct_status ct_cudart_record_stream(const ct_tensor *t, ct_cuda_stream *stream);
ct_status ct_cudart_event_create(bool timing, ct_cuda_event **out);
void ct_cudart_event_destroy(ct_cuda_event *event);
ct_status ct_cudart_event_record(ct_cuda_event *event, ct_cuda_stream *stream);
ct_status ct_cudart_event_synchronize(ct_cuda_event *event);
bool ct_cudart_event_query(ct_cuda_event *event);
ct_status ct_cudart_event_elapsed_ms(ct_cuda_event *start, ct_cuda_event *end, float *ms);
ct_status ct_cudart_host_alloc(size_t nbytes, void **out);
void ct_cudart_host_free(void *ptr);
ct_tensor *ct_cudart_pin_memory(const ct_tensor *t);
ct_status ct_cudart_graph_begin(ct_cuda_stream *stream, ct_cuda_mempool *pool, ct_cuda_capture_mode mode);
ct_status ct_cudart_graph_end(ct_cuda_stream *stream, ct_cuda_graph **out);
ct_status ct_cudart_graph_replay(ct_cuda_graph *graph);
void ct_cudart_graph_free(ct_cuda_graph *graph);
ct_cuda_mempool *ct_cudart_graph_pool(ct_cuda_graph *graph);
bool ct_cudart_is_capturing(void);
/* The loaded libcudnn's version, 0 when none (Note [cuDNN at run time], rnn_cudnn.c). */
int64_t ct_cudnn_version(void);
/* Why none was loaded ("no libcudnn was found (...)"), for ctorch info. */
const char *ct_cudnn_why(void);


#define CT_CUDA_MAX_DEVICES 64
/* Must equal CT_MAX_DIMS and CT_ITER_MAX (checked in elementwise.c). */
#define CT_CUDA_MAX_DIMS 8
#define CT_CUDA_MAX_OPERANDS 6

/* ------------------------------------------------------------------ runtime */

/* Checks that device index exists (lazy runtime start-up on first use) and makes it
 * the thread's current device; sets a CT_ERROR_DEVICE naming op otherwise. */
bool ct_cuda_use_device(const char *op, int index);
/* The raw cudaStream_t of this thread's current stream on device (NULL: default). */
void *ct_cuda_raw_stream(int device);
/* Records op as the last one launched on this thread (named by later async errors). */
void ct_cuda_note_op(const char *op);
/* After a launch: turns cudaGetLastError() into a ct_status error naming op. */
ct_status ct_cuda_check_launch(const char *op);
/* Note [Capture guard] (runtime.cu): whether this thread is capturing a CUDA graph,
 * and the check before anything that waits for the device or goes through host
 * memory: CT_OK outside a capture, else an error naming the running op (or op). */
bool ct_cuda_capturing(void);
ct_status ct_cuda_capture_refuse(const char *op, const char *what);
/* Note [Random numbers in a graph] (random.cu): a request of ncounters counters at
 * (seed, offset) of the generator, made inside this thread's capture: *state becomes
 * the graph's two device words and *offset_arg the request's offset from the
 * capture's first one. Refused (an error naming op) when the seed changed since that
 * first request. */
ct_status ct_cuda_capture_random(const char *op, uint64_t seed, uint64_t offset, uint64_t ncounters,
                                 const uint64_t **state, uint64_t *offset_arg);
/* Note [Checks under capture]: a kernel that traps unless the flag (8 bytes when wide,
 * else 4) holds ok_value. */
ct_status ct_cuda_trap_unless(const void *flag, int wide, uint64_t ok_value, int device, const char *op);
/* Streams of the thread's current device, waited for (D2H results readable). */
ct_status ct_cuda_sync_current_stream(int device, const char *op);

/* Copies nbytes on the current stream of device. kind: 0 host->device, 1 device->host,
 * 2 device->device (any devices). A device->host copy waits for the stream, so the
 * host bytes are ready on return. */
ct_status ct_cuda_memcpy(void *dst, const void *src, size_t nbytes, int kind, int device, const char *op);
ct_status ct_cuda_memset_zero(void *dst, size_t nbytes, int device, const char *op);

/* Device memory for the allocator core. NULL on failure without an error set. */
void *ct_cuda_raw_alloc(int device, size_t nbytes);
void ct_cuda_raw_free(int device, void *ptr);
/* Number of SMs of device (launch sizing); 1 when unknown. */
int ct_cuda_sm_count(int device);
/* Registers the CUDA device interface with the allocator (once). */
void ct_cuda_register_allocator(void);

/* ------------------------------------------------------------------ kernels */

/* An N-d iteration space: dim 0 innermost, byte strides per dim and operand
 * (operand 0 is the output), as ct_iter lays it out. */
typedef struct ct_cuda_iter_desc {
    int ntensors;
    int ndim;
    int64_t numel;
    int64_t shape[CT_CUDA_MAX_DIMS];
    int64_t strides[CT_CUDA_MAX_DIMS][CT_CUDA_MAX_OPERANDS];
    char *data[CT_CUDA_MAX_OPERANDS];
} ct_cuda_iter_desc;

/* The form of an op the family kernel chose from the call's arguments (the CPU's
 * alternative loop tables: a rounding mode, gelu's tanh form, a scalar exponent, ...). */
typedef enum ct_cuda_variant {
    CT_CUDA_V_DEFAULT = 0,
    CT_CUDA_V_DIV_TRUNC,      /* div(rounding_mode='trunc') */
    CT_CUDA_V_DIV_FLOOR,      /* div(rounding_mode='floor') */
    CT_CUDA_V_ROUND_DECIMALS, /* round(decimals=d): p[0] = 10^|d|, p[1] != 0 for d < 0 */
    CT_CUDA_V_GELU_TANH,      /* gelu(approximate='tanh') */
    CT_CUDA_V_POW_SCALAR,     /* pow(float tensor, scalar): p[0] the exponent */
    CT_CUDA_V_LERP_SCALAR,    /* lerp with a scalar weight p[0] (two operands) */
    CT_CUDA_V_CLAMP_MIN,      /* clamp with only a lower bound (two operands) */
    CT_CUDA_V_CLAMP_MAX,      /* clamp with only an upper bound */
    CT_CUDA_V_COUNT
} ct_cuda_variant;

/* Scalar arguments of an elementwise op: alpha/value (ialpha for integer compute
 * dtypes) and p[] as the CPU loops get them (ct_loop_params). */
typedef struct ct_cuda_params {
    double alpha;
    int64_t ialpha;
    double p[3];
    int variant; /* ct_cuda_variant */
} ct_cuda_params;

/* Elementwise launchers, one per family file (unary.cu, binary.cu, compare.cu).
 * dtype: the compute (= input) dtype; the output dtype is dtype for unary and
 * arithmetic ops, bool for comparisons. Return CT_ERROR_TYPE when the op has no kernel
 * for dtype (ct_cuda_*_supported answers without launching). */
bool ct_cuda_unary_supported(int op, ct_dtype dtype);
ct_status ct_cuda_unary(int op, ct_dtype dtype, const ct_cuda_iter_desc *d, int device);
bool ct_cuda_binary_supported(int op, ct_dtype dtype);
ct_status ct_cuda_binary(int op, ct_dtype dtype, const ct_cuda_iter_desc *d, const ct_cuda_params *p, int device);
bool ct_cuda_compare_supported(int op, ct_dtype dtype);
ct_status ct_cuda_compare(int op, ct_dtype dtype, const ct_cuda_iter_desc *d, int device);

/* The ops added after the first families, one launcher pair per file, same contract;
 * the variant selects an alternative form (ct_cuda_variant). Compute dtype dtype; the
 * output is bool for predicates and logical ops, dtype otherwise; ternary ops have
 * three inputs (where: a uint8/bool condition, then the two values).
 *   unary_math.cu: exp2 expm1 log2 log10 log1p rsqrt tan asin acos atan sinh cosh
 *                  asinh acosh atanh erf erfc erfinv lgamma digamma polygamma logit
 *                  reciprocal
 *   unary_misc.cu: sign sgn floor ceil round trunc frac square nan_to_num logical_not
 *                  bitwise_not isnan isinf isfinite
 *   activation.cu: relu6 leaky_relu elu selu celu gelu silu mish softplus hardtanh
 *                  hardsigmoid hardswish
 *   binary_math.cu: floor_divide remainder fmod pow atan2 hypot copysign fmax fmin
 *                  bitwise_and/or/xor shifts clamp_min clamp_max, div's rounding modes
 *   compare.cu:    logical_and logical_or logical_xor (with ct_cuda_compare)
 *   ternary.cu:    clamp lerp addcmul addcdiv where */
bool ct_cuda_unary_math_supported(int op, int variant, ct_dtype dtype);
ct_status ct_cuda_unary_math(int op, ct_dtype dtype, const ct_cuda_iter_desc *d, const ct_cuda_params *p, int device);
bool ct_cuda_unary_misc_supported(int op, int variant, ct_dtype dtype);
ct_status ct_cuda_unary_misc(int op, ct_dtype dtype, const ct_cuda_iter_desc *d, const ct_cuda_params *p, int device);
bool ct_cuda_activation_supported(int op, int variant, ct_dtype dtype);
ct_status ct_cuda_activation(int op, ct_dtype dtype, const ct_cuda_iter_desc *d, const ct_cuda_params *p, int device);
bool ct_cuda_binary_math_supported(int op, int variant, ct_dtype dtype);
ct_status ct_cuda_binary_math(int op, ct_dtype dtype, const ct_cuda_iter_desc *d, const ct_cuda_params *p,
                              int device);
bool ct_cuda_ternary_supported(int op, int variant, ct_dtype dtype);
ct_status ct_cuda_ternary(int op, ct_dtype dtype, const ct_cuda_iter_desc *d, const ct_cuda_params *p, int device);
/* Sets *flag (device memory, zeroed by the caller) to 1 when operand k of d, of integer
 * dtype dtype, holds a zero (integer divisors). */
ct_status ct_cuda_any_zero(ct_dtype dtype, const ct_cuda_iter_desc *d, int k, int *flag, int device);

/* ------------------------------------------------------------------ reductions */

/* What a reduction or scan computes (the order of ct_reduce_kind, src/cpu/reduce.h). */
typedef enum ct_cuda_red_kind {
    CT_CUDA_RED_SUM,
    CT_CUDA_RED_NANSUM,
    CT_CUDA_RED_PROD,
    CT_CUDA_RED_MAX,
    CT_CUDA_RED_MIN,
    CT_CUDA_RED_ARGMAX,
    CT_CUDA_RED_ARGMIN,
    CT_CUDA_RED_COUNT,
    CT_CUDA_RED_ANY,
    CT_CUDA_RED_ALL,
    CT_CUDA_RED_VAR,
    CT_CUDA_RED_LOGSUMEXP,
    CT_CUDA_RED_NORM,
    CT_CUDA_RED_POWSUM,
    CT_CUDA_RED_CUMSUM,
    CT_CUDA_RED_CUMPROD,
    CT_CUDA_RED_CUMMAX,
    CT_CUDA_RED_CUMMIN,
    CT_CUDA_RED_SOFTMAX,
    CT_CUDA_RED_LOG_SOFTMAX,
} ct_cuda_red_kind;

/* The layout of ct_reduce_iter (src/cpu/reduce.h) and the op's parameters: kept dims
 * (one output element each) and reduced dims, outermost first, byte strides. The
 * input is in a work dtype (float32, float64 or int64); outputs take any dtype and
 * are written with the casts of Note [Casts]. Scans: nr == 1, rout[] the outputs'
 * strides along the scanned dim. */
typedef struct ct_cuda_reduce_desc {
    int kind; /* ct_cuda_red_kind */
    double p; /* norm order, var correction */
    bool take_sqrt, mean, index_only;
    const char *in;
    char *out[2];
    ct_dtype in_dtype;
    ct_dtype out_dtype[2];
    int nout;
    int nk;
    int64_t kshape[CT_CUDA_MAX_DIMS], kin[CT_CUDA_MAX_DIMS], kout[2][CT_CUDA_MAX_DIMS];
    int nr;
    int64_t rshape[CT_CUDA_MAX_DIMS], rstride[CT_CUDA_MAX_DIMS], rout[2];
    int64_t out_numel, red_numel;
} ct_cuda_reduce_desc;

/* reduce.cu: bytes of device scratch memory a reduction needs (0: none). */
size_t ct_cuda_reduce_scratch(const ct_cuda_reduce_desc *d, int device);
/* Runs a reduction (kinds SUM..POWSUM); scratch: ct_cuda_reduce_scratch bytes. */
ct_status ct_cuda_reduce_run(const ct_cuda_reduce_desc *d, void *scratch, int device, const char *op);
/* scan.cu: cumsum, cumprod, cummax, cummin, softmax and log_softmax along the scanned
 * dim; scratch: ct_cuda_scan_scratch bytes. */
size_t ct_cuda_scan_scratch(const ct_cuda_reduce_desc *d);
ct_status ct_cuda_scan_run(const ct_cuda_reduce_desc *d, void *scratch, int device, const char *op);

/* ------------------------------------------------------------------ indexing */

/* gather / scatter_add: element k of a contiguous index (row-major over ishape) reads
 * or writes the indexed tensor at the same coordinates, the coordinate along dim
 * replaced by the index value (negatives wrapped by size). Element strides. */
typedef struct ct_cuda_index_desc {
    int64_t n; /* index elements */
    int ind;   /* index dims */
    int64_t ishape[CT_CUDA_MAX_DIMS];
    int tnd; /* the indexed tensor (gather's source, scatter's target) */
    int64_t tstr[CT_CUDA_MAX_DIMS];
    int snd; /* scatter's source, read at the index's coordinates */
    int64_t sstr[CT_CUDA_MAX_DIMS];
    int dim;
    int64_t size; /* the indexed tensor's size along dim */
} ct_cuda_index_desc;

/* indexing.cu. Indices are int64 (is64) or int32, contiguous, on the device.
 * *first_bad (device memory, all ones beforehand) gets the smallest k whose index is
 * outside [-size, size) (negatives == 0: outside [0, size)). */
ct_status ct_cuda_check_indices(const void *idx, int is64, int64_t n, int64_t size, int negatives,
                                uint64_t *first_bad, int device, const char *op);
/* dst (outer, nidx, inner) = src (outer, size, inner) at the indices; contiguous. */
ct_status ct_cuda_index_select_run(void *dst, const void *src, size_t esz, const void *idx, int is64, int64_t outer,
                                   int64_t nidx, int64_t inner, int64_t size, int device, const char *op);
/* dst (contiguous, the index's shape) = src at the index (g.tstr: src's strides). */
ct_status ct_cuda_gather_run(void *dst, const void *src, size_t esz, const void *idx, int is64,
                             const ct_cuda_index_desc *g, int device, const char *op);
/* out (g.tstr) at the index += src (g.sstr) of dtype dt, atomically. */
ct_status ct_cuda_scatter_add_run(void *out, const void *src, ct_dtype dt, const void *idx, int is64,
                                  const ct_cuda_index_desc *g, int device, const char *op);
/* dst (outer, size, inner) at the indices += alpha * src (outer, nidx, inner), both
 * contiguous, atomically; rows whose index equals skip are left out (INT64_MIN:
 * none). */
ct_status ct_cuda_index_add_run(void *dst, const void *src, ct_dtype dt, const void *idx, int is64, int64_t outer,
                                int64_t nidx, int64_t inner, int64_t size, double alpha, int64_t skip, int device,
                                const char *op);
/* embedding's deterministic backward (Note [Deterministic embedding backward] in
 * indexing.cu): keys[i] = idx[i] * n + i for the n validated indices; once the keys are
 * sorted, gw (num, dim; zeroed, work dtype float32/float64) gets each index's rows of
 * gy (n, dim) added in position order, the rows of index skip left out. */
ct_status ct_cuda_embedding_keys(const void *idx, int is64, int64_t n, int64_t *keys, int device);
ct_status ct_cuda_embedding_bwd_sorted(ct_dtype wd, const int64_t *keys, const void *gy, void *gw, int64_t n,
                                       int64_t dim, int64_t skip, int device);
/* Operand 0 of d at every element where operand 1 (a bool mask) is set = value. */
ct_status ct_cuda_masked_fill_run(const ct_cuda_iter_desc *d, const void *value, size_t esz, int device,
                                  const char *op);

/* The element reductions of scatter_reduce (the order of CT_SCATTER_* in
 * src/meta/indexing.h); index_put's accumulate is SUM. */
enum { CT_CUDA_SCATTER_SUM = 0, CT_CUDA_SCATTER_PROD, CT_CUDA_SCATTER_MEAN, CT_CUDA_SCATTER_AMAX, CT_CUDA_SCATTER_AMIN };

/* scatter / scatter_reduce into a contiguous target out (g.tstr) of dtype dt; the index
 * is int64, contiguous, validated (no negatives). src (g.sstr) or, when NULL, the
 * value's bytes. claim: winner[off] = the largest k + 1 writing at off (zeroed by the
 * caller), so that a plain scatter's last write wins as on the CPU. run: reduce < 0
 * copies (only where winner[off] == k + 1 when winner is given), else combines
 * atomically and counts the values per target in count (when given). init: the
 * reduction's identity at every target (include_self = false). mean_finish: each of
 * the n targets with count c > 0 divided by c + include_self when that exceeds 1. */
ct_status ct_cuda_scatter_claim(const int64_t *idx, const ct_cuda_index_desc *g, uint64_t *winner, int device,
                                const char *op);
ct_status ct_cuda_scatter_init(void *out, ct_dtype dt, const int64_t *idx, const ct_cuda_index_desc *g, int reduce,
                               int device, const char *op);
ct_status ct_cuda_scatter_run(void *out, const void *src, uint64_t value, ct_dtype dt, const int64_t *idx,
                              const ct_cuda_index_desc *g, int reduce, const uint64_t *winner, uint64_t *count,
                              int device, const char *op);
ct_status ct_cuda_scatter_mean_finish(void *out, ct_dtype dt, const uint64_t *count, int64_t n, int include_self,
                                      int device, const char *op);
/* index_copy / index_fill over dst (outer, size, inner), contiguous; 1-d index of nidx
 * validated entries (index_fill's negatives wrap). claim: winner[at] = the largest i + 1
 * naming slot at (zeroed by the caller). copy: src (outer, nidx, inner) contiguous, or
 * its single element when src_scalar; slices whose winner is another index are left
 * out. fill: value's bytes. */
ct_status ct_cuda_index_claim(const int64_t *idx, int64_t nidx, int64_t size, uint64_t *winner, int device,
                              const char *op);
ct_status ct_cuda_index_copy_run(void *dst, const void *src, size_t esz, const int64_t *idx, int64_t outer,
                                 int64_t nidx, int64_t inner, int64_t size, const uint64_t *winner, int src_scalar,
                                 int device, const char *op);
ct_status ct_cuda_index_fill_run(void *dst, size_t esz, uint64_t value, const int64_t *idx, int64_t outer,
                                 int64_t nidx, int64_t inner, int64_t size, int device, const char *op);

/* Advanced indexing (index, index_put): the plan of src/meta/advindex.c. The result has
 * shape oshape: the sliced dims before insert, then the broadcast index shape B (bnd
 * dims), then the other sliced dims; indexed dim idim[j] of t takes its position from
 * idata[j] (int64, element strides istr[j] over B). t: tshape, element strides tstr;
 * values: element strides vstr over oshape. */
typedef struct ct_cuda_advindex_desc {
    int ond, insert, bnd, nslice, nidx;
    int64_t total; /* elements of oshape */
    int64_t oshape[CT_CUDA_MAX_DIMS];
    int slice_dim[CT_CUDA_MAX_DIMS];
    int idim[CT_CUDA_MAX_DIMS];
    const int64_t *idata[CT_CUDA_MAX_DIMS];
    int64_t istr[CT_CUDA_MAX_DIMS][CT_CUDA_MAX_DIMS];
    int64_t tshape[CT_CUDA_MAX_DIMS], tstr[CT_CUDA_MAX_DIMS], vstr[CT_CUDA_MAX_DIMS];
} ct_cuda_advindex_desc;
/* *first (all ones beforehand) = the smallest b * nidx + j such that index j at B
 * position b (row-major) is outside [-size, size) of its dim. */
ct_status ct_cuda_advindex_check(const ct_cuda_advindex_desc *a, uint64_t *first, int device, const char *op);
/* index: dst (contiguous, oshape) = t at the indexed positions. */
ct_status ct_cuda_advindex_get(void *dst, const void *t, size_t esz, const ct_cuda_advindex_desc *a, int device,
                               const char *op);
/* index_put into t (dtype dt): claim as scatter's (winner over t's elements, t
 * contiguous); put: accumulate adds atomically, else the last write (winner) wins. */
ct_status ct_cuda_advindex_claim(const ct_cuda_advindex_desc *a, uint64_t *winner, int device, const char *op);
ct_status ct_cuda_advindex_put(void *t, const void *values, ct_dtype dt, const ct_cuda_advindex_desc *a,
                               int accumulate, const uint64_t *winner, int device, const char *op);
/* one_hot: y (n, nc) int64, zeroed, gets 1 at (i, idx[i]); indices validated. */
ct_status ct_cuda_one_hot_run(int64_t *y, const int64_t *idx, int64_t n, int64_t nc, int device, const char *op);

/* select.cu: nonzero and masked_select. The tested tensor (nonzero: t; masked_select:
 * the mask, as uint8) is walked row-major over shape through element strides tstr;
 * masked_select reads the values through vstr. count: flags of the nonzero elements,
 * summed in place (scratch: ct_cuda_select_scratch(n) bytes), and the total copied to
 * the host (waits for the stream). The fills then write the selected coordinates
 * (nonzero: out (count, nd) int64) or values (masked_select: out (count)). Up to
 * 2^31 - 1 elements. */
typedef struct ct_cuda_select_desc {
    int nd;
    int64_t n;
    int64_t shape[CT_CUDA_MAX_DIMS], tstr[CT_CUDA_MAX_DIMS], vstr[CT_CUDA_MAX_DIMS];
} ct_cuda_select_desc;
size_t ct_cuda_select_scratch(int64_t n);
ct_status ct_cuda_select_count(const ct_cuda_select_desc *d, const void *tested, ct_dtype dt, void *scratch,
                               int64_t *count, int device, const char *op);
ct_status ct_cuda_nonzero_fill(const ct_cuda_select_desc *d, const void *scratch, int64_t *out, int device,
                               const char *op);
ct_status ct_cuda_masked_select_fill(const ct_cuda_select_desc *d, const void *scratch, const void *values,
                                     size_t esz, void *out, int device, const char *op);

/* shape.cu: flip and pad, one output element per thread, the output contiguous (shape
 * oshape), the input read through element strides istr. mode: CT_CUDA_REMAP_*; pad's
 * lo (left amounts, negative crops) and hicrop (right crops) as in src/meta/pad.c. */
enum { CT_CUDA_REMAP_CONSTANT = 0, CT_CUDA_REMAP_REFLECT, CT_CUDA_REMAP_REPLICATE, CT_CUDA_REMAP_CIRCULAR,
       CT_CUDA_REMAP_FLIP };
typedef struct ct_cuda_remap_desc {
    int nd, mode;
    int64_t n;
    int64_t oshape[CT_CUDA_MAX_DIMS], ishape[CT_CUDA_MAX_DIMS], istr[CT_CUDA_MAX_DIMS];
    int64_t lo[CT_CUDA_MAX_DIMS], hicrop[CT_CUDA_MAX_DIMS];
    int flip[CT_CUDA_MAX_DIMS];
} ct_cuda_remap_desc;
ct_status ct_cuda_remap_run(const ct_cuda_remap_desc *d, void *dst, const void *src, size_t esz, uint64_t value,
                            int device, const char *op);
/* tril / triu of mats contiguous (rows, cols) matrices: elements off the kept band
 * become zero. */
ct_status ct_cuda_tri_run(void *dst, const void *src, size_t esz, int64_t mats, int64_t rows, int64_t cols, int64_t k,
                          int lower, int device, const char *op);

/* foreach.cu: up to CT_FE_MAX tensors of a list (float dtypes, contiguous data, 0-d
 * outputs) and the index of each one's first chunk of ct_cuda_foreach_chunks elements
 * (first[n] = the chunks of all). The table travels as the kernels' argument, so a
 * launch needs no copy to the device and no wait. partial: first[n] doubles of scratch.
 * Writes sum |x|^p of each tensor to its out. */
#define CT_FE_MAX 64
typedef struct ct_fe_table {
    int n;
    const void *data[CT_FE_MAX];
    void *out[CT_FE_MAX];
    int64_t numel[CT_FE_MAX];
    int64_t first[CT_FE_MAX + 1];
    uint8_t dt[CT_FE_MAX], odt[CT_FE_MAX];
} ct_fe_table;
int64_t ct_cuda_foreach_chunks(int64_t numel);
ct_status ct_cuda_foreach_powsum_run(const ct_fe_table *t, double p, double *partial, int device);

/* sort.cu: sorts the nseg = outer * inner rows of c (contiguous (outer, inner, size),
 * dtype dt) and writes the first k of each into vals (dt) and idx (int64), laid out
 * (outer, k, inner). scratch: ct_cuda_sort_scratch(nseg, size) bytes. */
size_t ct_cuda_sort_scratch(int64_t nseg, int64_t size);
ct_status ct_cuda_sort_run(const void *c, ct_dtype dt, int64_t outer, int64_t inner, int64_t size, int64_t k,
                           bool descending, void *vals, int64_t *idx, void *scratch, int device);

/* nn.cu: nll_loss over x (n, c, inner) contiguous in work dtype wd (float32/float64),
 * int64 targets t, optional class weights w; mode: ct_reduction (none, mean, sum).
 * Forward: out (n * inner, or one element); backward: out = grad of x (zeroed by the
 * caller), gy the output's gradient, scratch one device double. */
ct_status ct_cuda_nll_check(const int64_t *t, int64_t total, int64_t c, int64_t ignore, uint64_t *first_bad,
                            int device);
ct_status ct_cuda_nll_run(ct_dtype wd, bool backward, const void *gy, const void *x, const int64_t *t, const void *w,
                          void *out, int64_t n, int64_t c, int64_t inner, int mode, int64_t ignore, double *scratch,
                          int device);

/* copy.cu: dst (operand 0, dst_dtype) = cast(src (operand 1, src_dtype)) over d, with
 * the casting rules of Note [Casts] in src/core/copy.c. */
ct_status ct_cuda_copy_kernel(const ct_cuda_iter_desc *d, ct_dtype dst_dtype, ct_dtype src_dtype, int device);
/* Writes the esize-byte pattern value at every element of operand 0. */
ct_status ct_cuda_fill_kernel(const ct_cuda_iter_desc *d, const void *value, size_t esize, int device);

/* random.cu: the CPU generator's stream (Note [Random streams] in random.c) for n
 * contiguous elements of dtype at out. kind 0: uniform in [a, b) with `digits` random
 * bits; kind 1: normal with mean a and standard deviation b. state: NULL, or inside a
 * capture the graph's (seed, start) in device memory, which replace seed and add to
 * offset (Note [Random numbers in a graph]); the same for bernoulli. */
ct_status ct_cuda_philox_fill(int kind, ct_dtype dtype, void *out, int64_t n, int digits, double a, double b,
                              uint64_t seed, uint64_t offset, const uint64_t *state, int device);
/* Counters a request of n elements of kind needs (the CPU's elements per counter;
 * kind 2: bernoulli). */
int64_t ct_cuda_philox_counters(int kind, ct_dtype dtype, int64_t n);
/* bernoulli: element i of out (n contiguous elements of dtype) is 1 with probability
 * probs[i] (contiguous float64 on the device) or p when probs is NULL, else 0. */
ct_status ct_cuda_bernoulli_fill(ct_dtype dtype, void *out, int64_t n, double p, const double *probs, uint64_t seed,
                                 uint64_t offset, const uint64_t *state, int device);
/* *first (device memory, all ones beforehand) becomes the smallest i with p[i]
 * outside [0, 1] or NaN. */
ct_status ct_cuda_first_outside_unit(const double *p, int64_t n, uint64_t *first, int device);

/* blas.cu: C (row-major, contiguous in its last dim with row stride ldc, batch stride
 * sc) = alpha * A @ B + beta * C for a batch of nb products of n x k and k x m. A and
 * B are given by element strides (rows, cols, batch); the launcher picks transposes
 * or returns CT_ERROR_NOT_IMPLEMENTED when a layout has no BLAS form.
 * bias (optional; only with nb == 1 and beta == 0): m packed elements of dtype added
 * to every row of alpha * A @ B by cuBLASLt's bias epilogue; CT_ERROR_NOT_IMPLEMENTED
 * (C untouched) when cuBLASLt has no algorithm with it, so the caller can add the
 * bias itself. */
enum { CT_CUDA_ACT_NONE, CT_CUDA_ACT_RELU, CT_CUDA_ACT_GELU, CT_CUDA_ACT_GELU_AUX, CT_CUDA_ACT_DGELU };
typedef struct ct_cuda_gemm {
    ct_dtype dtype;
    int64_t nb, n, m, k;
    const void *a;
    int64_t a_s0, a_s1, a_sb;
    const void *b;
    int64_t b_s0, b_s1, b_sb;
    void *c;
    int64_t ldc, c_sb;
    double alpha, beta;
    const void *bias;
    int act; /* with bias: CT_CUDA_ACT_RELU or _GELU (tanh form) in the same epilogue */
    /* Note [GELU epilogues] (nb == 1, beta == 0, bias optional): CT_CUDA_ACT_GELU_AUX
     * writes C = gelu(A @ B + bias) and the GELU's input into aux; CT_CUDA_ACT_DGELU
     * writes C = (A @ B) * gelu'(aux) and, when bias is given, C's column sums into
     * bias (m elements). aux: row-major like C, row stride ldaux (a multiple of 8). */
    void *aux;
    int64_t ldaux;
} ct_cuda_gemm;
ct_status ct_cuda_gemm_run(const ct_cuda_gemm *g, int device, const char *op);
/* dot of n elements with element strides sa, sb; result written to out (device). */
ct_status ct_cuda_dot_run(ct_dtype dtype, int64_t n, const void *a, int64_t sa, const void *b, int64_t sb, void *out,
                          int device);
/* Whether float32 products may use TF32 (set_float32_matmul_precision). */
bool ct_cuda_allow_tf32(void);
/* tunable.cu: the runtime table's TunableOp entries (src/api/cuda_runtime.h). */
struct ct_tunable_result;
struct ct_tunable_validators;
ct_status ct_lt_export(int device, struct ct_tunable_result **out, int64_t *n);
ct_status ct_lt_import(int device, const struct ct_tunable_result *r, int64_t n);
void ct_lt_clear(int device);
void ct_lt_stats(int device, ct_cuda_tunable_stats *out);
bool ct_lt_dirty(int device);
ct_status ct_lt_validators(int device, struct ct_tunable_validators *out);

#ifdef __cplusplus
}
#endif
#endif /* CT_CUDA_RT_H */
