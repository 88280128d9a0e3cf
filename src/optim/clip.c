/* clip_grad_norm_ and clip_grad_value_. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "optim/grad_access.h"
#include "optim/optim_internal.h"

/* Note [Total norm in one pass]
 * torch.nn.utils.clip_grad_norm_ takes one norm per gradient and then the norm of
 * those norms. Here the p-th powers are summed instead: ct_foreach_powsum gives
 * sum |g|^p per gradient (accumulated in double, returned as float64), those add up
 * to the total, and one root at the end gives the norm, with no per-tensor roots and
 * no stacked tensor. powsum has no special cases, so p = inf (the max) and p = 0 (the
 * count of nonzeros, as torch.norm) are read here, in one loop over each gradient. The
 * total is a double whatever the gradients' dtype, so a float32 result can differ from
 * torch's float32 one in the last bits. */

/* max |x| (p = inf) or the count of nonzeros (p = 0) of a contiguous buffer. */
#define CT_DEFINE_SPECIAL(T, SUF)                                                    \
    static double special_##SUF(const T *x, int64_t n, bool inf) {                  \
        double acc = 0;                                                              \
        if (inf) {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                        \
                double a = fabs((double)x[i]);                                       \
                if (a > acc || a != a)                                               \
                    acc = a;                                                         \
            }                                                                        \
        } else {                                                                     \
            for (int64_t i = 0; i < n; i++)                                          \
                acc += x[i] != 0;                                                    \
        }                                                                            \
        return acc;                                                                  \
    }
CT_DEFINE_SPECIAL(float, f32)
CT_DEFINE_SPECIAL(double, f64)

static ct_status grad_special(const ct_tensor *g, bool inf, double *out) {
    ct_scope_begin();
    /* Other dtypes, strides and devices are read through a contiguous float64 copy. */
    const ct_tensor *c = g;
    const ct_dtype gd = ct_tensor_dtype(g);
    if (!(ct_tensor_device(g).type == CT_DEVICE_CPU && ct_tensor_is_contiguous(g) && (gd == CT_F32 || gd == CT_F64)))
        c = ct_contiguous(ct_to_dtype(ct_to_device(g, CT_CPU), CT_F64));
    ct_status st = CT_OK;
    const int64_t n = c ? ct_tensor_numel(c) : 0;
    if (!c)
        st = ct_last_status();
    else if (n == 0)
        *out = 0;
    else if (ct_tensor_dtype(c) == CT_F32)
        *out = special_f32((const float *)ct_tensor_data(c), n, inf);
    else
        *out = special_f64((const double *)ct_tensor_data(c), n, inf);
    ct_scope_end();
    return st;
}

/* Note [Clipping without a sync]
 * torch.nn.utils.clip_grad_norm_ never reads the norm on the host: the total norm is a
 * tensor, and the gradients are multiplied by clamp(max_norm / (total + 1e-6), max=1)
 * as a tensor, so the GPU runs ahead of the host. The device path here does the same:
 * ct_foreach_powsum (one launch per 64 gradients on CUDA, the table as the kernel's
 * argument: no copy to the device, no wait), then a few one-element ops for the norm
 * and the factor. Measured (bench/optim, GPT-2 124M's gradients, one H200), when the
 * table still went through a synchronous copy: the clip folded into the fused AdamW
 * step added 1.06 ms to its 1.26 ms. ct_optimizer_step_clipped hands the factor to the
 * fused kernel instead of scaling the gradients. The factor is computed in float64,
 * then rounded to float32 (the fused kernels' input). */

/* The device path: every gradient on one device, norm_type finite and > 0. */
static bool device_path(const ct_tensor *const *grads, int k, double norm_type) {
    if (k == 0 || !(norm_type > 0) || isinf(norm_type))
        return false;
    for (int i = 0; i < k; i++)
        if (!ct_device_equal(ct_tensor_device(grads[i]), ct_tensor_device(grads[0])) ||
            !ct_dtype_is_floating(ct_tensor_dtype(grads[i])))
            return false;
    return true;
}

/* The gradients of params (borrowed), k of them; NULL with k 0 when none has one. */
static ct_status collect_grads(const char *op, ct_tensor *const *params, int n, ct_tensor ***out, int *k) {
    *out = NULL;
    *k = 0;
    if (!params && n > 0)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "params is NULL");
    if (n < 0)
        return ct_error(CT_ERROR_VALUE, op, "number of parameters must be >= 0, got %d", n);
    for (int i = 0; i < n; i++)
        if (!params[i])
            return ct_error(CT_ERROR_NULL_ARGUMENT, op, "parameter %d is NULL", i);
    ct_tensor **grads = n > 0 ? ct_xcalloc(op, (size_t)n, sizeof *grads) : NULL;
    if (n > 0 && !grads)
        return CT_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < n; i++) {
        ct_tensor *g = ct_optim_grad(params[i]);
        if (g)
            grads[(*k)++] = g;
    }
    *out = grads;
    return CT_OK;
}

/* total norm and clamped factor as tensors on the gradients' device (scope-owned). */
static ct_status norm_and_coef(const char *op, ct_tensor *const *grads, int k, double max_norm, double norm_type,
                               ct_tensor **norm, ct_tensor **coef) {
    ct_tensor **sums = ct_xcalloc(op, (size_t)k, sizeof *sums);
    if (!sums)
        return CT_ERROR_OUT_OF_MEMORY;
    ct_status st = ct_foreach_powsum((const ct_tensor *const *)grads, k, norm_type, CT_F64, sums);
    ct_tensor *total = st ? NULL : ct_sum(ct_stack((const ct_tensor *const *)sums, k, 0), NULL, 0, false,
                                          CT_DTYPE_UNDEFINED);
    free(sums);
    if (!total)
        return ct_last_status();
    *norm = norm_type == 1   ? total
            : norm_type == 2 ? ct_sqrt(total)
                             : ct_pow_scalar(total, ct_scalar_float(1.0 / norm_type));
    ct_tensor *c = *norm ? ct_mul_scalar(ct_reciprocal(ct_add_scalar(*norm, ct_scalar_float(1e-6))),
                                         ct_scalar_float(max_norm))
                         : NULL;
    *coef = c ? ct_to_dtype(ct_clamp_max_scalar(c, ct_scalar_float(1.0)), CT_F32) : NULL;
    return *coef ? CT_OK : ct_last_status();
}

static ct_status clip_norm_impl(ct_tensor *const *params, int n, double max_norm, double norm_type,
                               bool error_if_nonfinite, double *total_norm);

static ct_status clip_norm_tensor_impl(ct_tensor *const *params, int n, double max_norm, double norm_type,
                                      ct_tensor **total_norm) {
    static const char *op = "clip_grad_norm_";
    if (total_norm)
        *total_norm = NULL;
    if (isnan(max_norm) || isnan(norm_type) || norm_type < 0)
        return ct_error(CT_ERROR_VALUE, op, "norm_type must be >= 0 and max_norm a number, got norm_type %g, max_norm %g",
                        norm_type, max_norm);
    ct_tensor **grads;
    int k;
    ct_status st = collect_grads(op, params, n, &grads, &k);
    if (st)
        return st;
    if (k == 0) {
        free(grads);
        return CT_OK;
    }
    if (!device_path((const ct_tensor *const *)grads, k, norm_type)) {
        free(grads);
        if (isinf(norm_type) || norm_type == 0)
            return ct_error(CT_ERROR_NOT_IMPLEMENTED, op,
                            "the tensor form takes a finite norm_type > 0, got %g (use ct_clip_grad_norm_)", norm_type);
        return ct_error(CT_ERROR_DEVICE, op, "the tensor form needs every gradient on one device");
    }
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *norm = NULL, *coef = NULL;
    st = norm_and_coef(op, grads, k, max_norm, norm_type, &norm, &coef);
    for (int i = 0; i < k && !st; i++) {
        ct_scope_begin();
        if (!ct_mul_(grads[i], coef))
            st = ct_last_status();
        ct_scope_end();
    }
    ct_set_grad_enabled(prev);
    free(grads);
    if (!st && total_norm)
        *total_norm = norm;
    return st;
}

ct_status ct_optim_clip_coef(ct_tensor *const *params, int n, double max_norm, double norm_type,
                             ct_tensor **total_norm, ct_tensor **coef) {
    static const char *op = "clip_grad_norm_";
    *total_norm = *coef = NULL;
    if (isnan(max_norm) || isnan(norm_type) || norm_type < 0)
        return ct_error(CT_ERROR_VALUE, op, "norm_type must be >= 0 and max_norm a number, got norm_type %g, max_norm %g",
                        norm_type, max_norm);
    ct_tensor **grads;
    int k;
    ct_status st = collect_grads(op, params, n, &grads, &k);
    if (st || k == 0) {
        free(grads);
        return st;
    }
    if (device_path((const ct_tensor *const *)grads, k, norm_type)) {
        st = norm_and_coef(op, grads, k, max_norm, norm_type, total_norm, coef);
        free(grads);
        return st;
    }
    free(grads);
    double total = 0;
    st = clip_norm_impl(params, n, max_norm, norm_type, false, &total);
    if (!st && !(*total_norm = ct_scalar_tensor(ct_scalar_float(total), CT_F64, CT_CPU)))
        st = ct_last_status();
    return st;
}

static ct_status clip_norm_impl(ct_tensor *const *params, int n, double max_norm, double norm_type,
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
    const ct_tensor **grads = n > 0 ? ct_xcalloc(op, (size_t)n, sizeof *grads) : NULL;
    if (n > 0 && !grads)
        return CT_ERROR_OUT_OF_MEMORY;
    int k = 0;
    for (int i = 0; i < n; i++) {
        const ct_tensor *g = ct_optim_grad(params[i]);
        if (g)
            grads[k++] = g;
    }
    if (!total_norm && !error_if_nonfinite && k > 0 && ct_tensor_device(grads[0]).type == CT_DEVICE_CUDA &&
        device_path(grads, k, norm_type)) {
        free(grads);
        return clip_norm_tensor_impl(params, n, max_norm, norm_type, NULL);
    }
    ct_status st = CT_OK;
    for (int i = 0; i < k && !st; i++)
        if (!ct_dtype_is_floating(ct_tensor_dtype(grads[i])))
            st = ct_error(CT_ERROR_TYPE, op, "gradients must be floating point, got %s",
                          ct_dtype_name(ct_tensor_dtype(grads[i])));
    double acc = 0;
    if (!st && (isinf(norm_type) || norm_type == 0)) {
        for (int i = 0; i < k && !st; i++) {
            double part = 0;
            st = grad_special(grads[i], isinf(norm_type), &part);
            if (isinf(norm_type))
                acc = (part > acc || part != part) ? part : acc;
            else
                acc += part;
        }
    } else if (!st && k > 0) {
        ct_scope_begin();
        ct_tensor **sums = ct_xcalloc(op, (size_t)k, sizeof *sums);
        st = sums ? ct_foreach_powsum(grads, k, norm_type, CT_F64, sums) : CT_ERROR_OUT_OF_MEMORY;
        for (int i = 0; i < k && !st; i++) {
            double part = 0;
            st = ct_item_double(sums[i], &part);
            acc += part;
        }
        free(sums);
        ct_scope_end();
    }
    free(grads);
    if (st)
        return st;
    double total = isinf(norm_type) || norm_type == 0 || norm_type == 1 ? acc
                   : norm_type == 2                                     ? sqrt(acc)
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

static ct_status clip_value_impl(ct_tensor *const *params, int n, double clip_value) {
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
        const ct_dtype gd = ct_tensor_dtype(g);
        const int64_t numel = ct_tensor_numel(g);
        if (ct_tensor_device(g).type == CT_DEVICE_CPU && ct_tensor_is_contiguous(g) && (gd == CT_F32 || gd == CT_F64)) {
            /* torch.clamp_(min=-c, max=c): max with the lower bound, then min with the upper
             * one (so a negative c gives c everywhere); NaN stays NaN. */
            if (gd == CT_F32) {
                float *x = (float *)ct_tensor_data(g);
                const float lo = (float)-clip_value, hi = (float)clip_value;
                for (int64_t k = 0; k < numel; k++) {
                    float y = x[k] < lo ? lo : x[k];
                    x[k] = y > hi ? hi : y;
                }
            } else {
                double *x = (double *)ct_tensor_data(g);
                for (int64_t k = 0; k < numel; k++) {
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

/* Under ct_compile each clipping call is one host-call node (Note [Host calls] in
 * src/compile/graph.h): a replay runs the loops over .grad again. The context holds
 * the parameter list by value. */
typedef enum clip_kind { CLIP_NORM, CLIP_NORM_TENSOR, CLIP_VALUE } clip_kind;

typedef struct clip_call {
    clip_kind kind;
    int n;
    double a, b; /* max_norm and norm_type, or clip_value */
    bool error_if_nonfinite;
    ct_tensor *params[];
} clip_call;

static ct_status clip_host(void *ctx, ct_tensor **result) {
    const clip_call *cc = ctx;
    switch (cc->kind) {
    case CLIP_NORM:
        return clip_norm_impl(cc->params, cc->n, cc->a, cc->b, cc->error_if_nonfinite, NULL);
    case CLIP_NORM_TENSOR:
        return clip_norm_tensor_impl(cc->params, cc->n, cc->a, cc->b, result);
    case CLIP_VALUE:
        return clip_value_impl(cc->params, cc->n, cc->a);
    }
    return ct_error(CT_ERROR_RUNTIME, "clip_grad", "unknown clipping call");
}

static ct_status clip_capture(const char *op, clip_call proto, ct_tensor *const *params, int n, ct_tensor **result) {
    if (!params && n > 0)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "params is NULL");
    if (n < 0)
        return ct_error(CT_ERROR_VALUE, op, "number of parameters must be >= 0, got %d", n);
    const size_t size = sizeof(clip_call) + sizeof(ct_tensor *) * (size_t)n;
    clip_call *cc = ct_xcalloc(op, 1, size);
    if (!cc)
        return CT_ERROR_OUT_OF_MEMORY;
    *cc = proto;
    cc->n = n;
    if (n > 0)
        memcpy(cc->params, params, sizeof(ct_tensor *) * (size_t)n);
    ct_status st = ct_compile_host_call(op, clip_host, cc, size, result);
    free(cc);
    return st;
}

ct_status ct_clip_grad_norm_tensor_(ct_tensor *const *params, int n, double max_norm, double norm_type,
                                    ct_tensor **total_norm) {
    if (total_norm)
        *total_norm = NULL;
    if (!ct_compile_is_capturing())
        return clip_norm_tensor_impl(params, n, max_norm, norm_type, total_norm);
    clip_call proto = {.kind = CLIP_NORM_TENSOR, .a = max_norm, .b = norm_type};
    return clip_capture("clip_grad_norm_", proto, params, n, total_norm);
}

ct_status ct_clip_grad_norm_(ct_tensor *const *params, int n, double max_norm, double norm_type,
                             bool error_if_nonfinite, double *total_norm) {
    static const char *op = "clip_grad_norm_";
    if (!ct_compile_is_capturing())
        return clip_norm_impl(params, n, max_norm, norm_type, error_if_nonfinite, total_norm);
    /* docs/compile.md: a number returned to the host would not be updated by a replay */
    if (total_norm && ct_compile_refuse(op, "it returns the total norm as a host number (pass total_norm NULL, or use "
                                            "ct_clip_grad_norm_tensor_)") != CT_OK)
        return ct_last_status();
    clip_call proto = {.kind = CLIP_NORM, .a = max_norm, .b = norm_type, .error_if_nonfinite = error_if_nonfinite};
    return clip_capture(op, proto, params, n, NULL);
}

ct_status ct_clip_grad_value_(ct_tensor *const *params, int n, double clip_value) {
    if (!ct_compile_is_capturing())
        return clip_value_impl(params, n, clip_value);
    clip_call proto = {.kind = CLIP_VALUE, .a = clip_value};
    return clip_capture("clip_grad_value_", proto, params, n, NULL);
}
