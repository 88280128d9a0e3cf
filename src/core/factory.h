/* The core implementations behind the dispatched factory, random, fill and device-move
 * ops (src/api/factories.c wraps them as ct_empty, ct_zeros, ct_rand, ct_fill_,
 * ct_to_device, ...; Note [Factories as ops] in src/meta/factories.c). Each builds its
 * result and nothing else, so the core and the kernels call them directly and never
 * the public functions, which dispatch. Arguments, errors, dtype rules and random
 * streams are the public functions'. */
#ifndef CT_CORE_FACTORY_H
#define CT_CORE_FACTORY_H

#include "tensor_impl.h"
#include "core/backend_api.h"

/* The CUDA backend calls these too (Note [Backend interface] in backend_api.h). */
CT_BACKEND_BEGIN

/* ------------------------------------------------------------------ tensor.c */

ct_tensor *ct_empty_impl(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device);
ct_tensor *ct_empty_strided_impl(const int64_t *shape, const int64_t *strides, int ndim, ct_dtype dtype,
                                 ct_device device);
/* t's shape, dtype and device (t not NULL). */
static inline ct_tensor *ct_empty_like_impl(const ct_tensor *t) {
    return ct_empty_impl(t->shape, t->ndim, t->dtype, t->device);
}

/* ------------------------------------------------------------------ copy.c */

ct_tensor *ct_full_impl(const int64_t *shape, int ndim, ct_scalar value, ct_dtype dtype, ct_device device);
static inline ct_tensor *ct_zeros_impl(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    return ct_full_impl(shape, ndim, ct_scalar_int(0), dtype, device);
}
/* In place: a new reference to t, or NULL. The in-place impls here do not bump t's
 * version: the dispatcher does, once, for the in-place op (as for ct_copy_impl). */
ct_tensor *ct_fill_impl(ct_tensor *t, ct_scalar value);
/* t itself (a new reference) when it is on device already, else a copy there. */
ct_tensor *ct_to_device_impl(const ct_tensor *t, ct_device device);

/* ------------------------------------------------------------------ factory.c */

ct_tensor *ct_arange_impl(ct_scalar start, ct_scalar end, ct_scalar step, ct_dtype dtype, ct_device device);
ct_tensor *ct_linspace_impl(double start, double end, int64_t steps, ct_dtype dtype, ct_device device);
ct_tensor *ct_logspace_impl(double start, double end, int64_t steps, double base, ct_dtype dtype, ct_device device);
ct_tensor *ct_eye_impl(int64_t n, int64_t m, ct_dtype dtype, ct_device device);

/* ------------------------------------------------------------------ random.c */

ct_tensor *ct_rand_impl(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device);
ct_tensor *ct_randn_impl(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device);
ct_tensor *ct_randint_impl(int64_t low, int64_t high, const int64_t *shape, int ndim, ct_dtype dtype,
                           ct_device device);
ct_tensor *ct_randperm_impl(int64_t n, ct_dtype dtype, ct_device device);
/* In place (no version bump, as ct_fill_impl). */
ct_tensor *ct_uniform_impl(ct_tensor *t, double from, double to);
ct_tensor *ct_normal_impl(ct_tensor *t, double mean, double std);
ct_tensor *ct_bernoulli_scalar_impl(ct_tensor *t, double p); /* ct_bernoulli_ */
/* 0/1 drawn with the probabilities in p: a new tensor of p's shape and dtype. */
ct_tensor *ct_bernoulli_impl(const ct_tensor *p);

CT_BACKEND_END

#endif /* CT_CORE_FACTORY_H */
