/* Helpers of the CUDA test programs: skipping without a GPU, deterministic inputs,
 * and CPU-vs-GPU comparisons with per-dtype tolerances. */
#ifndef CT_CUDA_TESTUTIL_H
#define CT_CUDA_TESTUTIL_H

#include <math.h>
#include <stdio.h>

#include "testutil.h"

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
#define CT_ASSERT_CLOSE(g, c, rtol, atol, what) ct_test_assert_close((g), (c), (rtol), (atol), (what), __FILE__, __LINE__)

#endif
