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

typedef struct ct_cuda_params {
    double alpha;
    int64_t ialpha;
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

/* copy.cu: dst (operand 0, dst_dtype) = cast(src (operand 1, src_dtype)) over d, with
 * the casting rules of Note [Casts] in src/core/copy.c. */
ct_status ct_cuda_copy_kernel(const ct_cuda_iter_desc *d, ct_dtype dst_dtype, ct_dtype src_dtype, int device);
/* Writes the esize-byte pattern value at every element of operand 0. */
ct_status ct_cuda_fill_kernel(const ct_cuda_iter_desc *d, const void *value, size_t esize, int device);

/* random.cu: the CPU generator's stream (Note [Random streams] in random.c) for n
 * contiguous elements of dtype at out. kind 0: uniform in [a, b) with `digits` random
 * bits; kind 1: normal with mean a and standard deviation b. */
ct_status ct_cuda_philox_fill(int kind, ct_dtype dtype, void *out, int64_t n, int digits, double a, double b,
                              uint64_t seed, uint64_t offset, int device);
/* Counters a request of n elements of kind needs (the CPU's elements per counter). */
int64_t ct_cuda_philox_counters(int kind, ct_dtype dtype, int64_t n);

/* blas.cu: C (row-major, contiguous in its last dim with row stride ldc, batch stride
 * sc) = alpha * A @ B + beta * C for a batch of nb products of n x k and k x m. A and
 * B are given by element strides (rows, cols, batch); the launcher picks transposes
 * or returns CT_ERROR_NOT_IMPLEMENTED when a layout has no BLAS form. */
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
} ct_cuda_gemm;
ct_status ct_cuda_gemm_run(const ct_cuda_gemm *g, int device, const char *op);
/* dot of n elements with element strides sa, sb; result written to out (device). */
ct_status ct_cuda_dot_run(ct_dtype dtype, int64_t n, const void *a, int64_t sa, const void *b, int64_t sb, void *out,
                          int device);
/* Whether float32 products may use TF32 (set_float32_matmul_precision). */
bool ct_cuda_allow_tf32(void);

#ifdef __cplusplus
}
#endif
#endif /* CT_CUDA_RT_H */
