/* The public factory, random, fill and device-move functions: each calls the core
 * implementation (src/core/factory.h), which kernels and the core call directly. The
 * in-place ones bump the tensor's version when they succeed. The *_like functions,
 * zeros, ones and scalar_tensor are made of the functions here. */
#include "core/factory.h"

/* t after a successful in-place write (r is t or NULL). */
static ct_tensor *written(ct_tensor *t, ct_tensor *r) {
    if (r)
        ct_tensor_bump_version(t);
    return r;
}

/* ------------------------------------------------------------------ empty */

ct_tensor *ct_empty(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    return ct_empty_impl(shape, ndim, dtype, device);
}

ct_tensor *ct_empty_strided(const int64_t *shape, const int64_t *strides, int ndim, ct_dtype dtype,
                            ct_device device) {
    return ct_empty_strided_impl(shape, strides, ndim, dtype, device);
}

ct_tensor *ct_empty_like(const ct_tensor *t, ct_dtype dtype) {
    CT_CHECK_ARG("empty_like", t);
    return ct_empty(t->shape, t->ndim, dtype == CT_DTYPE_UNDEFINED ? t->dtype : dtype, t->device);
}

/* ------------------------------------------------------------------ full */

ct_tensor *ct_full(const int64_t *shape, int ndim, ct_scalar value, ct_dtype dtype, ct_device device) {
    return ct_full_impl(shape, ndim, value, dtype, device);
}

ct_tensor *ct_zeros(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    return ct_full(shape, ndim, ct_scalar_int(0), dtype, device);
}
ct_tensor *ct_ones(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    return ct_full(shape, ndim, ct_scalar_int(1), dtype, device);
}
ct_tensor *ct_scalar_tensor(ct_scalar value, ct_dtype dtype, ct_device device) {
    return ct_full(NULL, 0, value, dtype, device);
}
ct_tensor *ct_zeros_like(const ct_tensor *t, ct_dtype dtype) {
    CT_CHECK_ARG("zeros_like", t);
    return ct_zeros(t->shape, t->ndim, dtype == CT_DTYPE_UNDEFINED ? t->dtype : dtype, t->device);
}
ct_tensor *ct_ones_like(const ct_tensor *t, ct_dtype dtype) {
    CT_CHECK_ARG("ones_like", t);
    return ct_ones(t->shape, t->ndim, dtype == CT_DTYPE_UNDEFINED ? t->dtype : dtype, t->device);
}
ct_tensor *ct_full_like(const ct_tensor *t, ct_scalar value, ct_dtype dtype) {
    CT_CHECK_ARG("full_like", t);
    return ct_full(t->shape, t->ndim, value, dtype == CT_DTYPE_UNDEFINED ? t->dtype : dtype, t->device);
}

/* ------------------------------------------------------------------ sequences */

ct_tensor *ct_arange(ct_scalar start, ct_scalar end, ct_scalar step, ct_dtype dtype, ct_device device) {
    return ct_arange_impl(start, end, step, dtype, device);
}

ct_tensor *ct_linspace(double start, double end, int64_t steps, ct_dtype dtype, ct_device device) {
    return ct_linspace_impl(start, end, steps, dtype, device);
}

ct_tensor *ct_logspace(double start, double end, int64_t steps, double base, ct_dtype dtype, ct_device device) {
    return ct_logspace_impl(start, end, steps, base, dtype, device);
}

ct_tensor *ct_eye(int64_t n, int64_t m, ct_dtype dtype, ct_device device) {
    return ct_eye_impl(n, m, dtype, device);
}

/* ------------------------------------------------------------------ random */

ct_tensor *ct_rand(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    return ct_rand_impl(shape, ndim, dtype, device);
}

ct_tensor *ct_randn(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    return ct_randn_impl(shape, ndim, dtype, device);
}

ct_tensor *ct_rand_like(const ct_tensor *t, ct_dtype dtype) {
    CT_CHECK_ARG("rand_like", t);
    return ct_rand(t->shape, t->ndim, dtype == CT_DTYPE_UNDEFINED ? t->dtype : dtype, t->device);
}

ct_tensor *ct_randn_like(const ct_tensor *t, ct_dtype dtype) {
    CT_CHECK_ARG("randn_like", t);
    return ct_randn(t->shape, t->ndim, dtype == CT_DTYPE_UNDEFINED ? t->dtype : dtype, t->device);
}

ct_tensor *ct_randint(int64_t low, int64_t high, const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    return ct_randint_impl(low, high, shape, ndim, dtype, device);
}

ct_tensor *ct_randperm(int64_t n, ct_dtype dtype, ct_device device) {
    return ct_randperm_impl(n, dtype, device);
}

/* ------------------------------------------------------------------ in place */

ct_tensor *ct_fill_(ct_tensor *t, ct_scalar value) {
    CT_CHECK_ARG("fill_", t);
    return written(t, ct_fill_impl(t, value));
}

ct_tensor *ct_zero_(ct_tensor *t) { return ct_fill_(t, ct_scalar_int(0)); }

ct_tensor *ct_uniform_(ct_tensor *t, double from, double to) {
    CT_CHECK_ARG("uniform_", t);
    return written(t, ct_uniform_impl(t, from, to));
}

ct_tensor *ct_normal_(ct_tensor *t, double mean, double std) {
    CT_CHECK_ARG("normal_", t);
    return written(t, ct_normal_impl(t, mean, std));
}

ct_tensor *ct_bernoulli_(ct_tensor *t, double p) {
    CT_CHECK_ARG("bernoulli_", t);
    return written(t, ct_bernoulli_scalar_impl(t, p));
}

ct_tensor *ct_bernoulli(const ct_tensor *p) { return ct_bernoulli_impl(p); }

/* ------------------------------------------------------------------ device moves */

ct_tensor *ct_to_device(const ct_tensor *t, ct_device device) { return ct_to_device_impl(t, device); }
