/* C interface of cross_entropy_fused's CUDA kernels (xent.cu; host half in
 * nn_cuda.c). Logits x (n, c) contiguous in their own dtype dt (float16, bfloat16,
 * float32 or float64); targets int64 (n); lse and the per-row losses in the work dtype
 * (float64 for float64 logits, else float32). Kernels run on the device's current
 * stream. */
#ifndef CT_CUDA_XENT_RT_H
#define CT_CUDA_XENT_RT_H

#include "cuda/cuda_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* rows[i] = lse[i] - x[i, t[i]] (0 where t[i] == ignore, nan with lse[i] = nan where t[i]
 * is out of range), lse[i] = logsumexp of row i. With reduction mean or sum, out (one
 * element of dtype dt, of the work dtype when out_work) gets the sum of rows in row
 * order, divided by the count of counted rows for the mean. */
ct_status ct_cuda_xent_fwd(ct_dtype dt, const void *x, const int64_t *t, void *rows, void *lse, void *out,
                           bool out_work, int64_t n, int64_t c, int reduction, int64_t ignore, int device);
/* gx (n, c) in dt = g_i (exp(x - lse_i) - onehot(t_i)), 0 in ignored rows, with g_i =
 * gy[i] (reduction none) or gy[0] (sum) or gy[0] / count (mean); gy in the work dtype.
 * scratch: one double. */
ct_status ct_cuda_xent_bwd(ct_dtype dt, const void *gy, const void *x, const int64_t *t, const void *lse, void *gx,
                           int64_t n, int64_t c, int reduction, int64_t ignore, double *scratch, int device);

#ifdef __cplusplus
}
#endif

#endif
