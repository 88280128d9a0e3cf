/* clip_grad_norm_ and clip_grad_value_. */
#include <math.h>
#include <string.h>

#include "error.h"
#include "optim/grad_access.h"
#include "tensor_impl.h"

/* Note [Total norm in one pass]
 * torch.nn.utils.clip_grad_norm_ takes one norm per gradient and then the norm of
 * those norms. Here every gradient is read once and its |g|^p terms go straight into
 * one double accumulator (the max for p = inf), which is the same quantity without a
 * tensor per parameter. When the foreach_powsum reduction is on main this loop should
 * become one call to it. The sum runs in double whatever the gradients' dtype, so a
 * float32 result can differ from torch's float32 one in the last bits. */

static double pow_term(double a, double p) {
    if (p == 2)
        return a * a;
    if (p == 1)
        return a;
    return pow(a, p);
}

/* Accumulates sum |x|^p (or max |x|, or the count of nonzeros for p = 0) over a
 * contiguous float buffer. */
#define CT_DEFINE_POWSUM(T, SUF)                                                     \
    static double powsum_##SUF(const T *x, int64_t n, double p) {                    \
        double acc = 0;                                                              \
        if (isinf(p)) {                                                              \
            for (int64_t i = 0; i < n; i++) {                                        \
                double a = fabs((double)x[i]);                                       \
                if (a > acc || a != a)                                               \
                    acc = a;                                                         \
            }                                                                        \
        } else if (p == 0) {                                                         \
            for (int64_t i = 0; i < n; i++)                                          \
                acc += x[i] != 0;                                                    \
        } else {                                                                     \
            for (int64_t i = 0; i < n; i++)                                          \
                acc += pow_term(fabs((double)x[i]), p);                              \
        }                                                                            \
        return acc;                                                                  \
    }
CT_DEFINE_POWSUM(float, f32)
CT_DEFINE_POWSUM(double, f64)

static ct_status grad_powsum(const ct_tensor *g, double p, double *out) {
    if (!ct_dtype_is_floating(g->dtype))
        return ct_error(CT_ERROR_TYPE, "clip_grad_norm_", "gradients must be floating point, got %s",
                        ct_dtype_name(g->dtype));
    ct_scope_begin();
    /* Other dtypes, strides and devices are read through a contiguous float64 copy. */
    const ct_tensor *c = g;
    if (!(g->device.type == CT_DEVICE_CPU && ct_tensor_is_contiguous(g) && (g->dtype == CT_F32 || g->dtype == CT_F64)))
        c = ct_contiguous(ct_to_dtype(ct_to_device(g, CT_CPU), CT_F64));
    ct_status st = CT_OK;
    if (!c)
        st = ct_last_status();
    else if (c->numel == 0)
        *out = 0;
    else if (c->dtype == CT_F32)
        *out = powsum_f32((const float *)ct_tensor_ptr(c), c->numel, p);
    else
        *out = powsum_f64((const double *)ct_tensor_ptr(c), c->numel, p);
    ct_scope_end();
    return st;
}

ct_status ct_clip_grad_norm_(ct_tensor *const *params, int n, double max_norm, double norm_type,
                             bool error_if_nonfinite, double *total_norm) {
    static const char *op = "clip_grad_norm_";
    if (!params && n > 0)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "params is NULL");
    if (n < 0)
        return ct_error(CT_ERROR_VALUE, op, "number of parameters must be >= 0, got %d", n);
    if (isnan(max_norm) || isnan(norm_type) || norm_type < 0)
        return ct_error(CT_ERROR_VALUE, op, "norm_type must be >= 0 and max_norm a number, got norm_type %g, max_norm %g",
                        norm_type, max_norm);
    for (int i = 0; i < n; i++)
        if (!params[i])
            return ct_error(CT_ERROR_NULL_ARGUMENT, op, "parameter %d is NULL", i);
    double acc = 0;
    for (int i = 0; i < n; i++) {
        const ct_tensor *g = ct_optim_grad(params[i]);
        if (!g)
            continue;
        double part = 0;
        ct_status st = grad_powsum(g, norm_type, &part);
        if (st)
            return st;
        if (isinf(norm_type))
            acc = (part > acc || part != part) ? part : acc;
        else
            acc += part;
    }
    double total = isinf(norm_type) || norm_type == 0 ? acc : norm_type == 1 ? acc
                   : norm_type == 2                    ? sqrt(acc)
                                                       : pow(acc, 1.0 / norm_type);
    if (total_norm)
        *total_norm = total;
    if (error_if_nonfinite && !isfinite(total))
        return ct_error(CT_ERROR_RUNTIME, op,
                        "The total norm of order %g for gradients from `parameters` is non-finite, so it cannot be "
                        "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
                        "`error_if_nonfinite=False`",
                        norm_type);
    double coef = max_norm / (total + 1e-6);
    if (!(coef < 1.0) && !isnan(coef))
        return CT_OK; /* torch multiplies by the clamped 1.0, which changes nothing */
    for (int i = 0; i < n; i++) {
        ct_tensor *g = ct_optim_grad(params[i]);
        if (!g)
            continue;
        ct_scope_begin();
        ct_tensor *r = ct_mul_scalar_(g, ct_scalar_float(coef));
        ct_scope_end();
        if (!r)
            return ct_last_status();
    }
    return CT_OK;
}

ct_status ct_clip_grad_value_(ct_tensor *const *params, int n, double clip_value) {
    static const char *op = "clip_grad_value_";
    if (!params && n > 0)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "params is NULL");
    if (n < 0)
        return ct_error(CT_ERROR_VALUE, op, "number of parameters must be >= 0, got %d", n);
    if (isnan(clip_value))
        return ct_error(CT_ERROR_VALUE, op, "clip_value must be a number, got nan");
    for (int i = 0; i < n; i++)
        if (!params[i])
            return ct_error(CT_ERROR_NULL_ARGUMENT, op, "parameter %d is NULL", i);
    for (int i = 0; i < n; i++) {
        ct_tensor *g = ct_optim_grad(params[i]);
        if (!g)
            continue;
        ct_status st = CT_OK;
        if (g->device.type == CT_DEVICE_CPU && ct_tensor_is_contiguous(g) && (g->dtype == CT_F32 || g->dtype == CT_F64)) {
            /* torch.clamp_(min=-c, max=c): max with the lower bound, then min with the upper
             * one (so a negative c gives c everywhere); NaN stays NaN. */
            if (g->dtype == CT_F32) {
                float *x = (float *)ct_tensor_ptr(g);
                const float lo = (float)-clip_value, hi = (float)clip_value;
                for (int64_t k = 0; k < g->numel; k++) {
                    float y = x[k] < lo ? lo : x[k];
                    x[k] = y > hi ? hi : y;
                }
            } else {
                double *x = (double *)ct_tensor_ptr(g);
                for (int64_t k = 0; k < g->numel; k++) {
                    double y = x[k] < -clip_value ? -clip_value : x[k];
                    x[k] = y > clip_value ? clip_value : y;
                }
            }
            ct_tensor_bump_version(g);
        } else {
            ct_scope_begin();
            ct_tensor *a = ct_maximum_scalar_(g, ct_scalar_float(-clip_value));
            ct_tensor *b = a ? ct_minimum_scalar_(g, ct_scalar_float(clip_value)) : NULL;
            st = b ? CT_OK : ct_last_status();
            ct_scope_end();
        }
        if (st)
            return st;
    }
    return CT_OK;
}
