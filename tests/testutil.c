#include "testutil.h"

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
