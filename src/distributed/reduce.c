/* The elementwise reductions of the collectives, on raw buffers. */
#include <string.h>

#include "distributed/dist_internal.h"

/* Note [Reducing in rank order]
 * The tcp backend reduces rank 0's values with rank 1's, that with rank 2's, and so
 * on, each step rounded to the dtype as one ct_add (or max, min) of two tensors
 * would: float16 and bfloat16 go through float and are rounded back at every step.
 * A sum over ranks is then the same bits as one process adding the same tensors in
 * rank order, which is what makes a DDP run bit-identical to one process
 * accumulating the ranks' micro-batches in order. Max and min propagate NaN, as
 * torch.maximum does. */

#define REDUCE_LOOP(T)                                                              \
    do {                                                                            \
        T *a = acc;                                                                 \
        const T *b = x;                                                             \
        switch (op) {                                                               \
        case CT_REDUCE_SUM:                                                         \
        case CT_REDUCE_AVG:                                                         \
            for (int64_t i = 0; i < n; i++)                                         \
                a[i] = (T)(a[i] + b[i]);                                            \
            break;                                                                  \
        case CT_REDUCE_MAX:                                                         \
            for (int64_t i = 0; i < n; i++)                                         \
                if (b[i] > a[i] || b[i] != b[i])                                    \
                    a[i] = b[i];                                                    \
            break;                                                                  \
        case CT_REDUCE_MIN:                                                         \
            for (int64_t i = 0; i < n; i++)                                         \
                if (b[i] < a[i] || b[i] != b[i])                                    \
                    a[i] = b[i];                                                    \
            break;                                                                  \
        }                                                                           \
    } while (0)

#define REDUCE_LOOP_16(TO_F, FROM_F)                                                \
    do {                                                                            \
        uint16_t *a = acc;                                                          \
        const uint16_t *b = x;                                                      \
        for (int64_t i = 0; i < n; i++) {                                           \
            float fa = TO_F(a[i]), fb = TO_F(b[i]);                                 \
            if (fa != fa)                                                           \
                continue;                                                           \
            switch (op) {                                                           \
            case CT_REDUCE_SUM:                                                     \
            case CT_REDUCE_AVG:                                                     \
                a[i] = FROM_F(fa + fb);                                             \
                break;                                                              \
            case CT_REDUCE_MAX:                                                     \
                if (fb > fa || fb != fb)                                            \
                    a[i] = b[i];                                                    \
                break;                                                              \
            case CT_REDUCE_MIN:                                                     \
                if (fb < fa || fb != fb)                                            \
                    a[i] = b[i];                                                    \
                break;                                                              \
            }                                                                       \
        }                                                                           \
    } while (0)

void ct_dist_reduce_into(void *acc, const void *x, int64_t n, ct_dtype dtype, ct_reduce_op op) {
    switch (dtype) {
    case CT_DTYPE_BOOL: {
        uint8_t *a = acc;
        const uint8_t *b = x;
        for (int64_t i = 0; i < n; i++)
            a[i] = op == CT_REDUCE_MIN ? (a[i] && b[i]) : (a[i] || b[i]);
        break;
    }
    case CT_DTYPE_UINT8: REDUCE_LOOP(uint8_t); break;
    case CT_DTYPE_INT8: REDUCE_LOOP(int8_t); break;
    case CT_DTYPE_INT16: REDUCE_LOOP(int16_t); break;
    case CT_DTYPE_INT32: REDUCE_LOOP(int32_t); break;
    case CT_DTYPE_INT64: REDUCE_LOOP(int64_t); break;
    case CT_DTYPE_UINT16: REDUCE_LOOP(uint16_t); break;
    case CT_DTYPE_UINT32: REDUCE_LOOP(uint32_t); break;
    case CT_DTYPE_UINT64: REDUCE_LOOP(uint64_t); break;
    case CT_DTYPE_FLOAT32: REDUCE_LOOP(float); break;
    case CT_DTYPE_FLOAT64: REDUCE_LOOP(double); break;
    case CT_DTYPE_FLOAT16: REDUCE_LOOP_16(ct_half_to_float, ct_float_to_half); break;
    case CT_DTYPE_BFLOAT16: REDUCE_LOOP_16(ct_bfloat16_to_float, ct_float_to_bfloat16); break;
    default: break;
    }
}

void ct_dist_divide(void *x, int64_t n, ct_dtype dtype, int64_t d) {
    switch (dtype) {
    case CT_DTYPE_FLOAT32: {
        float *p = x, fd = (float)d;
        for (int64_t i = 0; i < n; i++)
            p[i] = p[i] / fd;
        break;
    }
    case CT_DTYPE_FLOAT64: {
        double *p = x, dd = (double)d;
        for (int64_t i = 0; i < n; i++)
            p[i] = p[i] / dd;
        break;
    }
    case CT_DTYPE_FLOAT16: {
        uint16_t *p = x;
        for (int64_t i = 0; i < n; i++)
            p[i] = ct_float_to_half(ct_half_to_float(p[i]) / (float)d);
        break;
    }
    case CT_DTYPE_BFLOAT16: {
        uint16_t *p = x;
        for (int64_t i = 0; i < n; i++)
            p[i] = ct_float_to_bfloat16(ct_bfloat16_to_float(p[i]) / (float)d);
        break;
    }
    default: break;
    }
}
