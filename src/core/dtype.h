/* Internal dtype helpers: validity, element load/store through double/int64. */
#ifndef CT_DTYPE_H
#define CT_DTYPE_H

#include "ctorch/core.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

static inline bool ct_dtype_valid(ct_dtype d) { return (int)d >= 0 && (int)d < CT_DTYPE_COUNT; }

/* X-macro over every dtype: X(enum, C storage type). */
#define CT_FOR_EACH_DTYPE(X)          \
    X(CT_DTYPE_BOOL, uint8_t)         \
    X(CT_DTYPE_UINT8, uint8_t)        \
    X(CT_DTYPE_INT8, int8_t)          \
    X(CT_DTYPE_INT16, int16_t)        \
    X(CT_DTYPE_INT32, int32_t)        \
    X(CT_DTYPE_INT64, int64_t)        \
    X(CT_DTYPE_UINT16, uint16_t)      \
    X(CT_DTYPE_UINT32, uint32_t)      \
    X(CT_DTYPE_UINT64, uint64_t)      \
    X(CT_DTYPE_FLOAT16, uint16_t)     \
    X(CT_DTYPE_BFLOAT16, uint16_t)    \
    X(CT_DTYPE_FLOAT32, float)        \
    X(CT_DTYPE_FLOAT64, double)

/* Bytes per element, inline for the hot paths (ct_dtype_size is the exported form);
 * 0 for an invalid dtype. The sizes are packed as log2 in two bits per dtype. */
#define CT_DTYPE_LOG2_SIZE_(e, T) | ((uint64_t)(sizeof(T) == 1 ? 0 : sizeof(T) == 2 ? 1 : sizeof(T) == 4 ? 2 : 3) << (2 * (e)))
static inline size_t ct_dtype_itemsize(ct_dtype d) {
    const uint64_t packed = 0 CT_FOR_EACH_DTYPE(CT_DTYPE_LOG2_SIZE_);
    return ct_dtype_valid(d) ? (size_t)1 << ((packed >> (2 * (int)d)) & 3) : 0;
}

/* Reads one element as double (integers above 2^53 lose precision). */
double ct_load_double(const void *p, ct_dtype d);
/* Reads one integral/bool element exactly (uint64 above INT64_MAX wraps). */
int64_t ct_load_int64(const void *p, ct_dtype d);
/* Writes value converted as PyTorch's casts do (see Note [Casts] in copy.c). */
void ct_store_double(void *p, ct_dtype d, double value);
void ct_store_int64(void *p, ct_dtype d, int64_t value);
/* PyTorch's checked conversion of fill values: an error naming op when s does not
 * fit d (an integer out of range, a finite float beyond the type's range). */
ct_status ct_check_scalar_fits(const char *op, ct_scalar s, ct_dtype d);
/* Writes a scalar converted to d. */
void ct_store_scalar(void *p, ct_dtype d, ct_scalar s);
/* PyTorch's ScalarType name of d ("Float", "Long", "Half"), as its messages spell it
 * ("not implemented for 'Long'"); "Undefined" for an invalid dtype. */
const char *ct_dtype_pt_name(ct_dtype d);

CT_BACKEND_END

#endif /* CT_DTYPE_H */
