/* The elementwise families' structured kernel (elementwise.c): one shape and dtype rule
 * (the TensorIterator, meta/iter.h) and the op-specific argument handling (ew_args.c)
 * for every backend, which then runs its own loop (Note [Elementwise backends]). */
#ifndef CT_META_ELEMENTWISE_H
#define CT_META_ELEMENTWISE_H

#include "meta/iter.h"
#include "meta/op_info.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* Arguments the kernel passes to a backend's loops. */
typedef struct ct_loop_params {
    double alpha;    /* add/sub's alpha and other float parameters */
    int64_t ialpha;  /* the same for integer compute dtypes */
    double p[3];     /* extra scalar parameters (leaky_relu's slope, ...) */
} ct_loop_params;

/* The form of an op the call's arguments chose; each backend has a loop per (op,
 * variant) it supports. */
typedef enum ct_ew_variant {
    CT_EW_DEFAULT = 0,
    CT_EW_DIV_TRUNC,      /* div(rounding_mode='trunc') */
    CT_EW_DIV_FLOOR,      /* div(rounding_mode='floor') */
    CT_EW_ROUND_DECIMALS, /* round(decimals=d): p[0] = 10^|d|, p[1] != 0 for d < 0 */
    CT_EW_GELU_TANH,      /* gelu(approximate='tanh') */
    CT_EW_POW_SCALAR,     /* pow(float tensor, scalar): p[0] the exponent */
    CT_EW_LERP_SCALAR,    /* lerp with a scalar weight p[0] (two operands) */
    CT_EW_CLAMP_MIN,      /* clamp with only a lower bound (two operands) */
    CT_EW_CLAMP_MAX,      /* clamp with only an upper bound */
    CT_EW_VARIANT_COUNT
} ct_ew_variant;

/* Note [Elementwise backends]
 * What a backend gives the elementwise kernel. The CPU's answer to supported() is the
 * reference: META refuses what the CPU refuses, and another device runs a dtype only
 * where both the CPU and it have a loop, so that every device accepts the same calls.
 * has() tells an op the backend has no loop for at all (any dtype), which reads as an
 * empty dispatch slot. */
typedef struct ct_ew_backend {
    bool (*supported)(ct_op op, int variant, ct_dtype compute);
    bool (*has)(ct_op op, int variant);
    /* Runs op over a built iterator whose operands live on the backend's device. */
    ct_status (*run)(const ct_iter *it, ct_op op, int variant, const ct_loop_params *params);
    /* *found: whether operand k of a built iterator holds a zero (integer divisors). */
    ct_status (*any_zero)(const ct_iter *it, int k, bool *found);
} ct_ew_backend;

/* Installs a device type's backend (the struct must outlive its use). */
void ct_ew_register_backend(ct_device_type type, const ct_ew_backend *backend);

/* The kernel of every elementwise family op, for every backend (user_data unused). */
ct_status ct_kernel_elementwise(ct_keyset ks, ct_call *call, void *user_data);

/* Op-specific argument handling (ew_args.c). Before the iterator is built: checks what
 * depends only on the inputs, drops absent optional inputs (clamp), sets family
 * options the call's arguments decide (div's rounding mode, where's condition), and
 * may choose a variant. */
ct_status ct_ew_prepare(const ct_call *call, ct_iter_config *cfg, int *variant);
/* After: fills the parameters of the op's loops for the compute dtype, checks what
 * depends on it, may choose a variant, and asks the backend whether an integer divisor
 * holds a zero. */
ct_status ct_ew_setup(const ct_call *call, const ct_iter *it, ct_loop_params *p, int *variant,
                      const ct_ew_backend *backend);
/* A scalar argument (alpha, beta, a clamp bound) that an integer dtype d must hold:
 * refused with PyTorch's "value cannot be converted to type ... without overflow"
 * when it does not (NaN included); CT_OK for floating and bool d. */
ct_status ct_ew_check_fits(const char *op, double v, ct_dtype d);
/* True for ops the two functions above treat specially (see ew_args.c). */
bool ct_ew_has_args(ct_op op);
/* The integer a scalar stands for on an integer compute dtype: an int or bool as it
 * is, a float truncated; 0 for a float no int64 holds (NaN, infinities, beyond 2^63),
 * which never reaches an integer loop (ew_args.c refuses it first). */
static inline int64_t ct_ew_int_scalar(ct_scalar v) {
    if (v.type == CT_SCALAR_INT)
        return v.v.i;
    if (v.type == CT_SCALAR_BOOL)
        return v.v.b;
    double f = v.v.f;
    return f > -9223372036854775808.0 && f < 9223372036854775808.0 ? (int64_t)f : 0;
}

CT_BACKEND_END

#endif /* CT_META_ELEMENTWISE_H */
