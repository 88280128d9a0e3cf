/* Row-major GEMM on contiguous float32/float64 buffers (OpenBLAS when present). */
#ifndef CT_CPU_BLAS_H
#define CT_CPU_BLAS_H

#include <stdbool.h>
#include <stdint.h>

#include "ctorch/core.h"

/* C (m x n, leading dim ldc) = alpha * op(A) (m x k) @ op(B) (k x n) + beta * C, where
 * op transposes when ta/tb is set; A and B are row-major with leading dims lda/ldb.
 * dtype is float32 or float64. */
void ct_cpu_gemm(ct_dtype dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                 int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);

/* The block size, in rows or columns, of a product (n x k) @ (k x m) cut along dim (n
 * or m) into the chunks of Note [GEMM chunks] in linalg.c: set by the shape alone. */
int64_t ct_cpu_gemm_block(int64_t n, int64_t m, int64_t k, int64_t dim);

/* Whether float32 GEMMs go to oneDNN (Note [oneDNN sgemm] in linalg.c): built with it
 * and CT_SGEMM is not "openblas". */
bool ct_cpu_sgemm_onednn(void);

#endif
