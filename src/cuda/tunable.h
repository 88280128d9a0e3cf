/* The choice of cuBLASLt's algorithm for one product: a cache of the heuristic's
 * answers and TunableOp (tunable.cu). Included by blas.cu. */
#ifndef CT_CUDA_TUNABLE_H
#define CT_CUDA_TUNABLE_H

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "api/cuda_runtime.h"
#include "cuda_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One product as cuBLASLt sees it: the descriptors, the operands in its order, and
 * what a candidate needs to run on its own output: D = alpha L R + beta C, with C the
 * column-major rows x cols matrices (leading dimension ldc, nb of them batch_stride
 * elements apart). key is "signature,params" (Note [TunableOp]). */
typedef struct ct_lt_problem {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t ll, lr, lc;
    cublasLtMatmulPreference_t pref;
    const void *alpha, *beta;
    bool beta_zero;
    const void *l, *r;
    void *c;
    int64_t rows, cols, ldc, nb, batch_stride;
    ct_dtype dtype;
    bool tf32;
    void *workspace;
    size_t ws;
    cudaStream_t stream;
    int device;
    const char *key;
} ct_lt_problem;

/* The algorithm for the product, as cublasLtMatmulAlgoGetHeuristic answers with one
 * result: a status and found (0 or 1). */
cublasStatus_t ct_lt_algo(const ct_lt_problem *p, cublasLtMatmulAlgo_t *algo, int *found);

#ifdef __cplusplus
}
#endif

#endif /* CT_CUDA_TUNABLE_H */
