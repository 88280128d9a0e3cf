/* Helpers of the CUDA test programs: skipping without a GPU, deterministic inputs,
 * and CPU-vs-GPU comparisons with per-dtype tolerances. */
#ifndef CT_CUDA_TESTUTIL_H
#define CT_CUDA_TESTUTIL_H

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

/* Asserts call returns CT_OK; a failure says what ctorch said. */
#define assert_st(call)                                                                                               \
    do {                                                                                                              \
        ct_status st_ = (call);                                                                                       \
        if (st_ != CT_OK)                                                                                             \
            fail_msg("%s: status %d: %s", #call, (int)st_, ct_last_error());                                          \
    } while (0)

/* ctest's skip code (SKIP_RETURN_CODE 77 in tests/CMakeLists.txt). */
#define CT_TEST_SKIP 77

static inline int ct_test_require_gpu(const char *program) {
    if (ct_cuda_is_available())
        return 0;
    printf("%s: no CUDA device (or a build without CUDA): skipped\n", program);
    return CT_TEST_SKIP;
}

/* Deterministic values in [lo, hi] (integers when integral), as a CPU tensor. */
static inline ct_tensor *ct_test_values(const int64_t *shape, int ndim, ct_dtype dt, double lo, double hi,
                                        uint64_t seed) {
    ct_tensor *t = ct_empty(shape, ndim, CT_F64, CT_CPU);
    if (!t)
        return NULL;
    double *p = ct_tensor_data(t);
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    bool integral = !ct_dtype_is_floating(dt);
    for (int64_t i = 0; i < ct_tensor_numel(t); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(s >> 11) / 9007199254740992.0;
        double v = lo + u * (hi - lo);
        p[i] = integral ? floor(v) : v;
    }
    return ct_to_dtype(t, dt);
}

static inline void ct_test_tolerance(ct_dtype dt, double *rtol, double *atol) {
    switch (dt) {
    case CT_F16: *rtol = 2e-3, *atol = 2e-3; break;
    case CT_BF16: *rtol = 1.6e-2, *atol = 1.6e-2; break;
    case CT_F32: *rtol = 2e-6, *atol = 2e-6; break;
    case CT_F64: *rtol = 1e-13, *atol = 1e-13; break;
    default: *rtol = 0, *atol = 0; break;
    }
}

/* Asserts gpu (any device) equals cpu in shape and dtype and value by value within
 * the tolerances (NaN matches NaN, infinities match exactly). */
static inline void ct_test_assert_close(const ct_tensor *gpu, const ct_tensor *cpu, double rtol, double atol,
                                        const char *what, const char *file, int line) {
    if (!gpu || !cpu) {
        print_error("%s:%d: %s: missing result: %s\n", file, line, what, ct_last_error());
        _fail(file, line);
    }
    if (ct_tensor_dtype(gpu) != ct_tensor_dtype(cpu) || ct_tensor_dim(gpu) != ct_tensor_dim(cpu)) {
        print_error("%s:%d: %s: dtype/ndim %s/%d vs CPU %s/%d\n", file, line, what, ct_dtype_name(ct_tensor_dtype(gpu)),
                    ct_tensor_dim(gpu), ct_dtype_name(ct_tensor_dtype(cpu)), ct_tensor_dim(cpu));
        _fail(file, line);
    }
    for (int i = 0; i < ct_tensor_dim(cpu); i++)
        if (ct_tensor_shape(gpu)[i] != ct_tensor_shape(cpu)[i]) {
            print_error("%s:%d: %s: shapes differ at dim %d\n", file, line, what, i);
            _fail(file, line);
        }
    ct_scope_begin();
    ct_tensor *g = ct_contiguous(ct_to_dtype(ct_to_device(gpu, CT_CPU), CT_F64));
    ct_tensor *c = ct_contiguous(ct_to_dtype(cpu, CT_F64));
    if (!g || !c) {
        print_error("%s:%d: %s: could not bring the result back: %s\n", file, line, what, ct_last_error());
        _fail(file, line);
    }
    const double *pg = ct_tensor_data(g), *pc = ct_tensor_data(c);
    for (int64_t i = 0; i < ct_tensor_numel(c); i++) {
        double x = pg[i], y = pc[i];
        bool ok = (isnan(x) && isnan(y)) || x == y || (isfinite(y) && fabs(x - y) <= atol + rtol * fabs(y));
        if (!ok) {
            print_error("%s:%d: %s: element %lld: GPU %.17g vs CPU %.17g\n", file, line, what, (long long)i, x, y);
            _fail(file, line);
        }
    }
    ct_scope_end();
}
/* t (a CPU tensor) on device with t's exact layout: the bytes t's view spans are
 * copied over and viewed with t's shape and strides, so transposed, strided and
 * broadcast (stride 0) inputs stay so on the GPU. Contiguous or empty tensors (and
 * any with a negative stride) are plainly copied. */
static inline ct_tensor *ct_test_to_device_as(const ct_tensor *t, ct_device device) {
    if (!t)
        return NULL;
    int nd = ct_tensor_dim(t);
    const int64_t *shape = ct_tensor_shape(t), *st = ct_tensor_strides(t);
    if (ct_tensor_is_contiguous(t) || ct_tensor_numel(t) == 0)
        return ct_to_device(t, device);
    int64_t span = 1;
    for (int i = 0; i < nd; i++) {
        if (st[i] < 0)
            return ct_to_device(t, device);
        span += (shape[i] - 1) * st[i];
    }
    int64_t one = 1;
    ct_tensor *flat = ct_from_blob(ct_tensor_data(t), &span, &one, 1, ct_tensor_dtype(t), NULL, NULL);
    ct_tensor *g = flat ? ct_to_device(flat, device) : NULL;
    return g ? ct_as_strided(g, shape, st, nd, 0) : NULL;
}

/* Deterministic values of dtype dt in a CPU tensor of shape: the special values first
 * (for floats: infinities, NaN, signed zeros, halves, huge and tiny numbers; for
 * integers: the dtype's extremes, -1, 0, 1), then values drawn from [lo, hi]. */
static inline ct_tensor *ct_test_special(const int64_t *shape, int ndim, ct_dtype dt, double lo, double hi,
                                         uint64_t seed) {
    static const double fspecial[] = {INFINITY, -INFINITY, NAN, 0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 2.5,
                                      1.0, -1.0, 1e30, -1e30, 1e-30, 3.0, -3.0, 6.0, 7.25, -0.75};
    ct_tensor *t = ct_test_values(shape, ndim, CT_F64, lo, hi, seed);
    if (!t)
        return NULL;
    double *p = ct_tensor_data(t);
    int64_t n = ct_tensor_numel(t);
    if (ct_dtype_is_floating(dt)) {
        for (int64_t i = 0; i < n && i < (int64_t)(sizeof fspecial / sizeof fspecial[0]); i++)
            p[i] = fspecial[i];
        return ct_to_dtype(t, dt);
    }
    if (dt == CT_BOOL) {
        for (int64_t i = 0; i < n; i++)
            p[i] = p[i] > (lo + hi) / 2;
        return ct_to_dtype(t, dt);
    }
    ct_tensor *r = ct_to_dtype(ct_to_dtype(t, CT_I64), dt); /* integers: round the draws first */
    if (!r)
        return NULL;
    /* Extremes through int64 (uint64's top value wraps to -1 there, which is the same
     * bits). */
    int64_t ext[6] = {0, 1, -1, 0, 0, 2};
    switch (dt) {
    case CT_U8: ext[3] = 255, ext[4] = 128; break;
    case CT_I8: ext[3] = 127, ext[4] = -128; break;
    case CT_I16: ext[3] = 32767, ext[4] = -32768; break;
    case CT_U16: ext[3] = 65535, ext[4] = 32768; break;
    case CT_I32: ext[3] = 2147483647, ext[4] = -2147483647 - 1; break;
    case CT_U32: ext[3] = 4294967295ll, ext[4] = 2147483648ll; break;
    default: ext[3] = INT64_MAX, ext[4] = INT64_MIN; break;
    }
    /* The low bytes of the int64 are the value in any narrower integer type
     * (little-endian, as every platform ctorch runs on). */
    size_t esz = ct_dtype_size(dt);
    char *rp = ct_tensor_data(r);
    for (int64_t i = 0; i < n && i < 6; i++)
        memcpy(rp + (size_t)i * esz, &ext[i], esz);
    return r;
}

/* Under compute-sanitizer (scripts/gpu-check.sh sets CT_CUDA_TEST_SMALL) the large
 * cases shrink to sizes that still take the same kernel paths. */
static inline int64_t ct_test_size(int64_t full, int64_t small) {
    return getenv("CT_CUDA_TEST_SMALL") ? small : full;
}

/* The verdict on one op run on the CPU and the GPU: both refuse (with the same status)
 * or the GPU result (on CUDA) agrees with the CPU's: exactly for integer and bool
 * dtypes, within scale times the dtype's tolerance for floats. */
static inline void ct_test_agree(const char *what, const ct_tensor *cpu, const ct_tensor *gpu, double scale,
                                 const char *file, int line) {
    if (!cpu) {
        ct_clear_error();
        if (gpu) {
            print_error("%s:%d: %s: the CPU refuses but the GPU computes\n", file, line, what);
            _fail(file, line);
        }
        ct_clear_error();
        return;
    }
    if (!gpu) {
        print_error("%s:%d: %s: GPU failed: %s\n", file, line, what, ct_last_error());
        _fail(file, line);
    }
    if (ct_tensor_device(gpu).type != CT_DEVICE_CUDA) {
        print_error("%s:%d: %s: the result is not on the GPU\n", file, line, what);
        _fail(file, line);
    }
    double rtol, atol;
    ct_test_tolerance(ct_tensor_dtype(cpu), &rtol, &atol);
    ct_test_assert_close(gpu, cpu, rtol * scale, atol * scale, what, file, line);
}
#define CT_AGREE(what, cpu, gpu, scale) ct_test_agree((what), (cpu), (gpu), (scale), __FILE__, __LINE__)

/* Runs an op on the CPU: on failure, it must fail on the GPU with the same status. */
#define CT_AGREE_ERR(what, cpu_expr, gpu_expr)                                                   \
    do {                                                                                          \
        ct_clear_error();                                                                         \
        ct_tensor *cpu_r_ = (cpu_expr);                                                           \
        ct_status cpu_st_ = ct_last_status();                                                     \
        ct_clear_error();                                                                         \
        ct_tensor *gpu_r_ = (gpu_expr);                                                           \
        if (!cpu_r_ && (gpu_r_ || ct_last_status() != cpu_st_)) {                                 \
            print_error("%s: CPU status %s, GPU %s (%s)\n", (what), ct_status_name(cpu_st_),     \
                        gpu_r_ ? "succeeded" : ct_status_name(ct_last_status()), ct_last_error()); \
            fail();                                                                               \
        }                                                                                         \
        if (cpu_r_)                                                                               \
            CT_AGREE((what), cpu_r_, gpu_r_, 4);                                                  \
        ct_clear_error();                                                                         \
    } while (0)

#define CT_ASSERT_CLOSE(g, c, rtol, atol, what) ct_test_assert_close((g), (c), (rtol), (atol), (what), __FILE__, __LINE__)

/* A differentiable op over inputs in[0..n) (some may be NULL). */
typedef ct_tensor *(*ct_test_op_fn)(ct_tensor *const *in, const void *ud);

/* f over the CPU inputs and over copies on device 0: the outputs agree, and so do the
 * gradients of every non-NULL input for the same upstream gradient (n <= 4). */
static inline void ct_test_agree_with_grads(const char *what, ct_test_op_fn f, const void *ud, ct_tensor *const *cpu,
                                            int n, double scale, uint64_t seed) {
    ct_scope_begin();
    ct_tensor *c[4] = {NULL, NULL, NULL, NULL}, *gp[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < n; i++) {
        if (!cpu[i])
            continue;
        c[i] = ct_clone(cpu[i]);
        gp[i] = ct_to_device(cpu[i], CT_CUDA(0));
        CT_ASSERT_OK(c[i]);
        CT_ASSERT_OK(gp[i]);
        ct_tensor_set_requires_grad(c[i], true);
        ct_tensor_set_requires_grad(gp[i], true);
    }
    ct_tensor *y = f(c, ud), *gy = f(gp, ud);
    if (!y) {
        print_error("%s: CPU failed: %s\n", what, ct_last_error());
        fail();
    }
    CT_AGREE(what, y, gy, scale);
    ct_tensor *go = ct_test_values(ct_tensor_shape(y), ct_tensor_dim(y), ct_tensor_dtype(y), -1, 1, seed);
    CT_ASSERT_OK(go);
    assert_int_equal(ct_backward(y, go, false, false), CT_OK);
    assert_int_equal(ct_backward(gy, ct_to_device(go, CT_CUDA(0)), false, false), CT_OK);
    for (int i = 0; i < n; i++) {
        if (!c[i])
            continue;
        char name[160];
        snprintf(name, sizeof name, "%s: grad of input %d", what, i);
        CT_AGREE(name, ct_tensor_grad(c[i]), ct_tensor_grad(gp[i]), scale);
    }
    ct_scope_end();
}

#endif
