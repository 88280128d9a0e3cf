/* The factory, random, fill and device-move ops as dispatched operators: the public
 * functions pack their arguments into a ct_call, with the device the result is made
 * on, and one kernel (ct_factory_kernel, src/meta/factories.c; to_device's is
 * ct_core_kernel) runs the core implementation (src/core/factory.h) on every backend
 * (Note [Factories as ops]). The *_like functions, zeros, ones and scalar_tensor are
 * made of the ops here.
 *
 * Integer and scalar arguments travel in call->ints and call->s in the order of the
 * op's schema; a shape travels as its elements, so it takes what the other ints leave. */
#include <string.h>

#include "core/factory.h"
#include "dispatch/dispatch_internal.h"

/* Note [Devices without a backend]
 * A device whose backend is not loaded (CUDA in a CPU-only build, or with its backend
 * library missing) has no kernel at its dispatch key, and the dispatcher could only
 * say that. Such a call goes to the core function, which refuses it with the message
 * it always gave ("no backend for device type cuda is loaded: ..."), after the same
 * argument checks. For the CPU and META this is one comparison. */
static bool backend_loaded(ct_op op, ct_device d) {
    return d.type == CT_DEVICE_CPU || d.type == CT_DEVICE_META || ct_op_has_kernel(op, ct_backend_key(d));
}

/* A shape that cannot travel in a call (too many dims, NULL) is refused by the core
 * function itself, with its own message. */
static bool list_ok(const int64_t *list, int n) { return n >= 0 && n <= CT_MAX_DIMS && (n == 0 || list); }

#define FACTORY_CALL(opname, dt, dev) {.op = CT_OP_##opname, .dtype = (dt), .device = (dev), .has_device = true}

static void put_ints(ct_call *c, const int64_t *v, int n) {
    if (n > 0)
        memcpy(c->ints + c->nints, v, (size_t)n * sizeof *v);
    c->nints += n;
}

static void put_int(ct_call *c, int64_t v) { c->ints[c->nints++] = v; }
static void put_scalar(ct_call *c, ct_scalar s) { c->s[c->nscalars++] = s; }

/* ------------------------------------------------------------------ empty */

ct_tensor *ct_empty(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    if (!list_ok(shape, ndim) || !backend_loaded(CT_OP_empty, device))
        return ct_empty_impl(shape, ndim, dtype, device);
    ct_call c = FACTORY_CALL(empty, dtype, device);
    put_ints(&c, shape, ndim);
    return ct_dispatch_1(&c);
}

/* ints: the shape, then the strides. */
ct_tensor *ct_empty_strided(const int64_t *shape, const int64_t *strides, int ndim, ct_dtype dtype,
                            ct_device device) {
    if (!strides || !list_ok(shape, ndim) || !backend_loaded(CT_OP_empty_strided, device))
        return ct_empty_strided_impl(shape, strides, ndim, dtype, device);
    ct_call c = FACTORY_CALL(empty_strided, dtype, device);
    put_ints(&c, shape, ndim);
    put_ints(&c, strides, ndim);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_empty_like(const ct_tensor *t, ct_dtype dtype) {
    CT_CHECK_ARG("empty_like", t);
    return ct_empty(t->shape, t->ndim, dtype == CT_DTYPE_UNDEFINED ? t->dtype : dtype, t->device);
}

/* ------------------------------------------------------------------ full */

ct_tensor *ct_full(const int64_t *shape, int ndim, ct_scalar value, ct_dtype dtype, ct_device device) {
    if (!list_ok(shape, ndim) || !backend_loaded(CT_OP_full, device))
        return ct_full_impl(shape, ndim, value, dtype, device);
    ct_call c = FACTORY_CALL(full, dtype, device);
    put_ints(&c, shape, ndim);
    put_scalar(&c, value);
    return ct_dispatch_1(&c);
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
    if (!backend_loaded(CT_OP_arange, device))
        return ct_arange_impl(start, end, step, dtype, device);
    ct_call c = FACTORY_CALL(arange, dtype, device);
    put_scalar(&c, start);
    put_scalar(&c, end);
    put_scalar(&c, step);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_linspace(double start, double end, int64_t steps, ct_dtype dtype, ct_device device) {
    if (!backend_loaded(CT_OP_linspace, device))
        return ct_linspace_impl(start, end, steps, dtype, device);
    ct_call c = FACTORY_CALL(linspace, dtype, device);
    put_scalar(&c, ct_scalar_float(start));
    put_scalar(&c, ct_scalar_float(end));
    put_int(&c, steps);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_logspace(double start, double end, int64_t steps, double base, ct_dtype dtype, ct_device device) {
    if (!backend_loaded(CT_OP_logspace, device))
        return ct_logspace_impl(start, end, steps, base, dtype, device);
    ct_call c = FACTORY_CALL(logspace, dtype, device);
    put_scalar(&c, ct_scalar_float(start));
    put_scalar(&c, ct_scalar_float(end));
    put_int(&c, steps);
    put_scalar(&c, ct_scalar_float(base));
    return ct_dispatch_1(&c);
}

ct_tensor *ct_eye(int64_t n, int64_t m, ct_dtype dtype, ct_device device) {
    if (!backend_loaded(CT_OP_eye, device))
        return ct_eye_impl(n, m, dtype, device);
    ct_call c = FACTORY_CALL(eye, dtype, device);
    put_int(&c, n);
    put_int(&c, m);
    return ct_dispatch_1(&c);
}

/* ------------------------------------------------------------------ random */

ct_tensor *ct_rand(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    if (!list_ok(shape, ndim) || !backend_loaded(CT_OP_rand, device))
        return ct_rand_impl(shape, ndim, dtype, device);
    ct_call c = FACTORY_CALL(rand, dtype, device);
    put_ints(&c, shape, ndim);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_randn(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    if (!list_ok(shape, ndim) || !backend_loaded(CT_OP_randn, device))
        return ct_randn_impl(shape, ndim, dtype, device);
    ct_call c = FACTORY_CALL(randn, dtype, device);
    put_ints(&c, shape, ndim);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_rand_like(const ct_tensor *t, ct_dtype dtype) {
    CT_CHECK_ARG("rand_like", t);
    return ct_rand(t->shape, t->ndim, dtype == CT_DTYPE_UNDEFINED ? t->dtype : dtype, t->device);
}

ct_tensor *ct_randn_like(const ct_tensor *t, ct_dtype dtype) {
    CT_CHECK_ARG("randn_like", t);
    return ct_randn(t->shape, t->ndim, dtype == CT_DTYPE_UNDEFINED ? t->dtype : dtype, t->device);
}

/* ints: low, high, then the shape. */
ct_tensor *ct_randint(int64_t low, int64_t high, const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    if (!list_ok(shape, ndim) || !backend_loaded(CT_OP_randint, device))
        return ct_randint_impl(low, high, shape, ndim, dtype, device);
    ct_call c = FACTORY_CALL(randint, dtype, device);
    put_int(&c, low);
    put_int(&c, high);
    put_ints(&c, shape, ndim);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_randperm(int64_t n, ct_dtype dtype, ct_device device) {
    if (!backend_loaded(CT_OP_randperm, device))
        return ct_randperm_impl(n, dtype, device);
    ct_call c = FACTORY_CALL(randperm, dtype, device);
    put_int(&c, n);
    return ct_dispatch_1(&c);
}

/* ------------------------------------------------------------------ in place */

/* t's in-place op with scalars s[0..ns): the call writes into t and returns a new
 * reference to it. */
static ct_tensor *run_inplace(ct_op op, ct_tensor *t, const ct_scalar *s, int ns) {
    ct_call c = {.op = op, .mode = CT_CALL_INPLACE, .nin = 1, .in = {t}, .dtype = CT_DTYPE_UNDEFINED, .nout = 1};
    for (int i = 0; i < ns; i++)
        put_scalar(&c, s[i]);
    c.out[0] = ct_retain(t);
    return ct_dispatch_1(&c);
}

ct_tensor *ct_fill_(ct_tensor *t, ct_scalar value) {
    CT_CHECK_ARG("fill_", t);
    return run_inplace(CT_OP_fill, t, &value, 1);
}

ct_tensor *ct_zero_(ct_tensor *t) { return ct_fill_(t, ct_scalar_int(0)); }

ct_tensor *ct_uniform_(ct_tensor *t, double from, double to) {
    CT_CHECK_ARG("uniform_", t);
    ct_scalar s[2] = {ct_scalar_float(from), ct_scalar_float(to)};
    return run_inplace(CT_OP_uniform, t, s, 2);
}

ct_tensor *ct_normal_(ct_tensor *t, double mean, double std) {
    CT_CHECK_ARG("normal_", t);
    ct_scalar s[2] = {ct_scalar_float(mean), ct_scalar_float(std)};
    return run_inplace(CT_OP_normal, t, s, 2);
}

ct_tensor *ct_bernoulli_(ct_tensor *t, double p) {
    CT_CHECK_ARG("bernoulli_", t);
    ct_scalar s = ct_scalar_float(p);
    return run_inplace(CT_OP_bernoulli, t, &s, 1);
}

ct_tensor *ct_bernoulli(const ct_tensor *p) {
    CT_CHECK_ARG("bernoulli", p);
    ct_call c = {.op = CT_OP_bernoulli, .nin = 1, .in = {p}, .dtype = CT_DTYPE_UNDEFINED};
    return ct_dispatch_1(&c);
}

/* ------------------------------------------------------------------ device moves */

ct_tensor *ct_to_device(const ct_tensor *t, ct_device device) {
    CT_CHECK_ARG("to_device", t);
    if (!backend_loaded(CT_OP_to_device, device))
        return ct_to_device_impl(t, device);
    ct_call c = {.op = CT_OP_to_device, .nin = 1, .in = {t}, .dtype = CT_DTYPE_UNDEFINED, .device = device,
                 .has_device = true};
    return ct_dispatch_1(&c);
}
