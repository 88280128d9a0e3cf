#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void ct_test_assert_ok(int ok, const char *expr, const char *file, int line) {
    if (!ok) {
        print_error("%s:%d: %s failed: %s\n", file, line, expr, ct_last_error());
        _fail(file, line);
    }
}

void ct_test_assert_err(int ok, ct_status st, const char *needle, const char *expr, const char *file, int line) {
    if (ok) {
        print_error("%s:%d: %s succeeded but should have failed\n", file, line, expr);
        _fail(file, line);
    }
    if (ct_last_status() != st) {
        print_error("%s:%d: %s: expected status '%s', got '%s' (%s)\n", file, line, expr, ct_status_name(st),
                    ct_status_name(ct_last_status()), ct_last_error());
        _fail(file, line);
    }
    if (needle && !strstr(ct_last_error(), needle)) {
        print_error("%s:%d: %s: error '%s' does not mention '%s'\n", file, line, expr, ct_last_error(), needle);
        _fail(file, line);
    }
    ct_clear_error();
}

double ct_test_unit(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return (double)(x >> 11) / 9007199254740992.0;
}

double ct_test_at(const ct_tensor *t, int64_t flat) {
    int nd = ct_tensor_dim(t);
    int64_t idx[16];
    const int64_t *shape = ct_tensor_shape(t);
    for (int i = nd - 1; i >= 0; i--) {
        idx[i] = flat % shape[i];
        flat /= shape[i];
    }
    double v = 0;
    ct_tensor_get(t, idx, &v);
    return v;
}

void ct_test_assert_shape(const ct_tensor *t, const int64_t *shape, int ndim, const char *file, int line) {
    if (!t) {
        print_error("%s:%d: tensor is NULL: %s\n", file, line, ct_last_error());
        _fail(file, line);
    }
    int ok = ct_tensor_dim(t) == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = ct_tensor_shape(t)[i] == shape[i];
    if (!ok) {
        print_error("%s:%d: shape mismatch (ndim %d vs %d)\n", file, line, ct_tensor_dim(t), ndim);
        _fail(file, line);
    }
}

bool ct_test_same_bits(const ct_tensor *a, const ct_tensor *b) {
    if (!a || !b || ct_tensor_dtype(a) != ct_tensor_dtype(b) || ct_tensor_dim(a) != ct_tensor_dim(b) ||
        memcmp(ct_tensor_shape(a), ct_tensor_shape(b), sizeof(int64_t) * (size_t)ct_tensor_dim(a)))
        return false;
    for (int64_t i = 0; i < ct_tensor_numel(a); i++) {
        double x = ct_test_at(a, i), y = ct_test_at(b, i);
        if (!(x == y || (x != x && y != y)))
            return false;
    }
    return true;
}

void ct_test_through_compile_tol(ct_tensor *(*fn)(ct_tensor *const *, int, void *), void *ud, ct_tensor *const *in,
                                 int n, const char *what, double tol) {
    ct_scope_begin();
    ct_tensor *eager = fn(in, n, ud);
    if (!eager)
        fail_msg("%s: %s", what, ct_last_error());
    ct_compiled *c = ct_compile(fn, ud, 0);
    if (!c)
        fail_msg("%s: ct_compile: %s", what, ct_last_error());
    ct_tensor *captured = NULL;
    for (int k = 0; k < 3; k++) {
        ct_tensor *r = ct_compiled_call(c, in, n);
        if (!r)
            fail_msg("%s through ct_compile (call %d): %s", what, k + 1, ct_last_error());
        if (k == 1)
            captured = r;
        bool same = ct_test_same_bits(r, k == 2 && tol > 0 ? captured : eager);
        if (!same && k == 1 && tol > 0)
            same = ct_test_same_bits(ct_isclose(r, eager, tol, tol, true), ct_ones_like(eager, CT_BOOL));
        if (!same)
            fail_msg("%s through ct_compile (call %d): the result differs from the %s", what, k + 1,
                     k == 2 && tol > 0 ? "captured call's" : "eager call");
    }
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 1);
    ct_compiled_free(c);
    ct_scope_end();
}

void ct_test_through_compile(ct_tensor *(*fn)(ct_tensor *const *, int, void *), void *ud, ct_tensor *const *in,
                             int n, const char *what) {
    ct_test_through_compile_tol(fn, ud, in, n, what, 0);
}

void ct_test_compile_refused(ct_tensor *(*fn)(ct_tensor *const *, int, void *), void *ud, ct_tensor *const *in,
                             int n, const char *what, const char *op) {
    ct_scope_begin();
    ct_compiled *c = ct_compile(fn, ud, 0);
    if (!c)
        fail_msg("%s: ct_compile: %s", what, ct_last_error());
    if (!ct_compiled_call(c, in, n))
        fail_msg("%s through ct_compile (call 1): %s", what, ct_last_error());
    if (ct_compiled_call(c, in, n) || !strstr(ct_last_error(), op) || !strstr(ct_last_error(), "cannot be captured"))
        fail_msg("%s through ct_compile: expected its capture refused naming %s, got %s", what, op,
                 ct_last_error()[0] ? ct_last_error() : "a result");
    ct_clear_error();
    ct_compiled_free(c);
    ct_scope_end();
}

ct_tensor *ct_test_masked_attention(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v,
                                    const ct_tensor *mask, bool causal, double sc, double p) {
    int64_t b = ct_tensor_shape(q)[0], h = ct_tensor_shape(q)[1], lq = ct_tensor_shape(q)[2];
    int64_t lk = ct_tensor_shape(k)[2], words = ct_tensor_shape(mask)[3];
    ct_tensor *z = ct_zeros(CT_SHAPE(b, h, lq, lk), CT_F64, CT_CPU);
    double *zp = ct_tensor_data(z);
    const uint64_t *w = ct_tensor_data(ct_contiguous(ct_to_device(mask, CT_CPU)));
    for (int64_t r = 0; r < b * h * lq; r++)
        for (int64_t j = 0; j < lk; j++)
            zp[r * lk + j] = (w[r * words + j / 64] >> (j % 64)) & 1 ? 1.0 / (1.0 - p) : 0.0;
    ct_tensor *s = ct_mul_scalar(ct_matmul(q, ct_transpose(k, -2, -1)), ct_scalar_float(sc));
    if (causal)
        s = ct_where_scalar_other(ct_tril(ct_ones(CT_SHAPE(lq, lk), CT_BOOL, CT_CPU), 0), s,
                                  ct_scalar_float(-INFINITY));
    return ct_matmul(ct_mul(ct_softmax(s, -1, CT_DTYPE_UNDEFINED), z), v);
}
