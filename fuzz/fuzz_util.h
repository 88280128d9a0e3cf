/* What the API fuzz targets (fuzz_ops.c, fuzz_nn.c) share: a reader over the input's
 * bytes, pickers for sizes and numbers, and the check every call's result gets (a valid
 * tensor, or NULL with a message). Define FUZZ_NAME (the target's name, for messages)
 * and FUZZ_TRACE_ENV (the variable that turns on the call trace) before including. */
#ifndef CT_FUZZ_UTIL_H
#define CT_FUZZ_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"

/* ------------------------------------------------------------------ input */

typedef struct {
    const uint8_t *p;
    size_t n;
} rd;

static unsigned u8(rd *r) {
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}

/* lo..hi inclusive (small ranges). */
static int64_t range(rd *r, int64_t lo, int64_t hi) { return lo + (int64_t)(u8(r) % (unsigned)(hi - lo + 1)); }

/* A small count or size: 0..5 mostly, sometimes negative or a bit larger. */
static int64_t pick_size(rd *r) {
    unsigned k = u8(r);
    if (k < 230)
        return k % 6;
    return k < 245 ? -1 - (int64_t)(k % 3) : 6 + (int64_t)(k % 4);
}

static const double extreme_doubles[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -3.75, 1e-310, 1e38, 3.5e38, -1e308,
                                         1e308, 65504.0, 65520.0, 9.2233720368547758e18, 1.8446744073709552e19};

static double pick_double(rd *r) {
    unsigned k = u8(r);
    if (k < 16)
        return extreme_doubles[k];
    if (k < 20)
        return k == 16 ? NAN : k == 17 ? INFINITY : k == 18 ? -INFINITY : -NAN;
    return (double)((int)(k % 17) - 8) / 4.0;
}

static ct_dtype pick_dtype(rd *r) { return (ct_dtype)(u8(r) % CT_DTYPE_COUNT); }

/* ------------------------------------------------------------------ checks */

static void fail(const char *what, const char *call) {
    fprintf(stderr, FUZZ_NAME ": %s after %s\n", what, call);
    abort();
}

static volatile unsigned sink;

/* Reads every element of a CPU tensor (ASan sees a view past its storage) and checks
 * bools. */
static void touch(const ct_tensor *t, const char *call) {
    int nd = ct_tensor_dim(t);
    const int64_t *sh = ct_tensor_shape(t), *st = ct_tensor_strides(t);
    int64_t numel = ct_tensor_numel(t);
    if (numel <= 0 || numel > (1 << 16))
        return;
    const uint8_t *base = ct_tensor_data(t);
    size_t es = ct_tensor_element_size(t);
    bool is_bool = ct_tensor_dtype(t) == CT_DTYPE_BOOL;
    int64_t idx[8] = {0};
    for (int64_t i = 0; i < numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++)
            off += idx[d] * st[d];
        const uint8_t *p = base + off * (int64_t)es;
        unsigned s = 0;
        for (size_t b = 0; b < es; b++)
            s += p[b];
        if (is_bool && p[0] > 1)
            fail("a bool tensor holds a byte other than 0 and 1", call);
        sink += s;
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < sh[d])
                break;
            idx[d] = 0;
        }
    }
}

static void check_tensor(const ct_tensor *t, const char *call) {
    int nd = ct_tensor_dim(t);
    if (nd < 0 || nd > 8)
        fail("a result with an invalid number of dims", call);
    ct_dtype dt = ct_tensor_dtype(t);
    if ((int)dt < 0 || dt >= CT_DTYPE_COUNT)
        fail("a result with an invalid dtype", call);
    const int64_t *sh = ct_tensor_shape(t), *st = ct_tensor_strides(t);
    __int128 numel = 1, lo = 0, hi = 0;
    for (int d = 0; d < nd; d++) {
        if (sh[d] < 0)
            fail("a result with a negative size", call);
        numel *= sh[d];
        if (numel > INT64_MAX)
            numel = INT64_MAX; /* only a view can be that large; compared below */
    }
    if ((int64_t)numel != ct_tensor_numel(t))
        fail("a result whose numel does not match its shape", call);
    ct_device dev = ct_tensor_device(t);
    if (numel == 0 || dev.type == CT_DEVICE_META)
        return;
    for (int d = 0; d < nd; d++) {
        __int128 ext = (__int128)(sh[d] - 1) * st[d];
        if (ext < 0)
            lo += ext;
        else
            hi += ext;
    }
    __int128 off = ct_tensor_storage_offset(t), es = (__int128)ct_tensor_element_size(t);
    if (off + lo < 0 || (off + hi + 1) * es > (__int128)ct_tensor_storage_nbytes(t))
        fail("a result whose view reaches outside its storage", call);
    touch(t, call);
}

/* FUZZ_TRACE_ENV=1 in the environment prints every call and its result (replaying a
 * crash: build-fuzz/<target> FILE). */
static int trace = -1;

static void trace_call(const char *call, const ct_tensor *t) {
    if (trace < 0)
        trace = getenv(FUZZ_TRACE_ENV) != NULL;
    if (!trace)
        return;
    if (!t) {
        fprintf(stderr, "%s -> NULL (%s)\n", call, ct_last_error());
        return;
    }
    char shape[128], buf[160];
    int n = 0;
    shape[0] = '\0';
    for (int d = 0; d < ct_tensor_dim(t) && n < 100; d++)
        n += snprintf(shape + n, sizeof shape - (size_t)n, d ? ",%lld:%lld" : "%lld:%lld",
                      (long long)ct_tensor_size(t, d), (long long)ct_tensor_stride(t, d));
    buf[0] = '\0';
    if (ct_tensor_device(t).type == CT_DEVICE_CPU && ct_tensor_numel(t) < 64)
        ct_to_string(t, buf, sizeof buf);
    ct_clear_error();
    fprintf(stderr, "%s -> %s [%s] %s\n", call, ct_dtype_name(ct_tensor_dtype(t)), shape, buf);
}

/* After a call that returned t (or a status): a valid tensor, or a failure with a message. */
static ct_tensor *checked(ct_tensor *t, const char *call) {
    trace_call(call, t);
    if (t)
        check_tensor(t, call);
    else if (ct_last_status() == CT_OK || !ct_last_error()[0])
        fail("NULL without an error message", call);
    return t;
}

static void checked_status(ct_status st, const char *call) {
    if (st != CT_OK && (ct_last_status() == CT_OK || !ct_last_error()[0]))
        fail("a failure status without an error message", call);
}

/* Calls made over the run, printed at exit ("<target>: N calls"; scripts/fuzz.sh reports
 * it beside libFuzzer's count of inputs). */
static unsigned long long ncalls;
static void print_calls(void) { fprintf(stderr, FUZZ_NAME ": %llu calls\n", ncalls); }
static void count_calls_at_exit(void) {
    static bool registered;
    if (!registered)
        registered = atexit(print_calls) == 0;
}

#endif
