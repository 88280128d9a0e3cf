/* The device-generic take, masked_scatter, kthvalue, unique and unique_consecutive
 * (src/api/indexing_generic.c, the stubs CUDA tensors run) against the CPU loops, on
 * CPU tensors: each runs through its op's structured kernel with the generic version
 * in the CPU's stub slot, and gives the same outputs bit for bit (shape, dtype, every
 * byte; plain contiguous tensors, as the CPU's) for all 13 dtypes, with NaN, signed
 * zeros, ties and duplicates, extreme integers (uint64 above INT64_MAX), empty and 0-d
 * tensors, non-contiguous inputs, broadcast masks and negative indices, and the same
 * data-dependent errors (status and message). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "api/indexing_generic.h"
#include "meta/stubs.h"

static const ct_dtype all_dtypes[] = {CT_BOOL, CT_U8, CT_I8, CT_I16, CT_U16, CT_I32, CT_U32,
                                      CT_I64,  CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64};
#define NDT ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

/* ------------------------------------------------------------------ inputs */

/* Values of dtype dt drawn (deterministically from seed) from a small set, so that
 * there are many ties: for floats NaN, both zeros and infinities among them; for
 * integers the int64 extremes (which wrap to each narrower type's bits, and make
 * uint64 values above INT64_MAX). */
static ct_tensor *sample(ct_dtype dt, const int64_t *shape, int nd, uint64_t seed) {
    static const double fset[] = {NAN, -0.0, 0.0, 1.0, -1.0, 2.5, INFINITY, -INFINITY, 3.0, 1e-3};
    static const int64_t iset[] = {0, 1, -1, 7, INT64_MAX, INT64_MIN, 100, -100, 7};
    ct_tensor *t = ct_empty(shape, nd, ct_dtype_is_floating(dt) ? CT_F64 : CT_I64, CT_CPU);
    CT_ASSERT_OK(t);
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (int64_t i = 0; i < ct_tensor_numel(t); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t r = s >> 33;
        if (ct_dtype_is_floating(dt))
            ((double *)ct_tensor_data(t))[i] = fset[r % (sizeof fset / sizeof fset[0])];
        else
            ((int64_t *)ct_tensor_data(t))[i] = dt == CT_BOOL ? (int64_t)(r & 1) : iset[r % (sizeof iset / sizeof iset[0])];
    }
    ct_tensor *c = ct_to_dtype(t, dt);
    CT_ASSERT_OK(c);
    return c;
}

static ct_tensor *longs(const int64_t *v, const int64_t *shape, int nd) {
    ct_tensor *t = ct_from_data(v, shape, nd, CT_I64);
    CT_ASSERT_OK(t);
    return t;
}

static ct_tensor *bools(const int64_t *shape, int nd, uint64_t seed) {
    ct_tensor *t = sample(CT_BOOL, shape, nd, seed);
    return t;
}

/* ------------------------------------------------------------------ comparing */

/* got equals want bit for bit and, as the CPU kernels' outputs, is a contiguous tensor
 * that views nothing. */
static void expect_same(const ct_tensor *got, const ct_tensor *want, const char *what) {
    if (!want)
        fail_msg("%s: the CPU failed: %s", what, ct_last_error());
    if (!got)
        fail_msg("%s: the generic version failed: %s", what, ct_last_error());
    if (ct_tensor_dtype(got) != ct_tensor_dtype(want) || ct_tensor_dim(got) != ct_tensor_dim(want))
        fail_msg("%s: dtype/ndim %s/%d, CPU %s/%d", what, ct_dtype_name(ct_tensor_dtype(got)), ct_tensor_dim(got),
                 ct_dtype_name(ct_tensor_dtype(want)), ct_tensor_dim(want));
    for (int i = 0; i < ct_tensor_dim(want); i++)
        if (ct_tensor_shape(got)[i] != ct_tensor_shape(want)[i])
            fail_msg("%s: size %lld at dim %d, CPU %lld", what, (long long)ct_tensor_shape(got)[i], i,
                     (long long)ct_tensor_shape(want)[i]);
    if (!ct_tensor_is_contiguous(got) || got->is_view)
        fail_msg("%s: the result is not a plain contiguous tensor", what);
    ct_scope_begin();
    const ct_tensor *w = ct_contiguous(want);
    size_t nbytes = (size_t)ct_tensor_numel(want) * ct_dtype_size(ct_tensor_dtype(want));
    if (nbytes && memcmp(ct_tensor_data(got), ct_tensor_data(w), nbytes) != 0) {
        size_t esz = ct_dtype_size(ct_tensor_dtype(want));
        for (int64_t i = 0; i < ct_tensor_numel(want); i++)
            if (memcmp((const char *)ct_tensor_data(got) + (size_t)i * esz,
                       (const char *)ct_tensor_data(w) + (size_t)i * esz, esz) != 0)
                fail_msg("%s: element %lld differs: %g, CPU %g", what, (long long)i, ct_test_at(got, i),
                         ct_test_at(want, i));
    }
    ct_scope_end();
}

/* Both failed with the same status and message. cpu_msg is the CPU's message. */
static void expect_same_error(ct_status got, ct_status want, const char *cpu_msg, const char *what) {
    if (want == CT_OK)
        fail_msg("%s: the CPU did not fail", what);
    if (got != want)
        fail_msg("%s: status %s, CPU %s (%s)", what, ct_status_name(got), ct_status_name(want), ct_last_error());
    if (strcmp(ct_last_error(), cpu_msg) != 0)
        fail_msg("%s: message \"%s\", CPU \"%s\"", what, ct_last_error(), cpu_msg);
}

/* ------------------------------------------------------------------ running the generic versions */

/* Evaluates expr with the generic function fn in the CPU slot of stub name: the
 * structured kernel checks and allocates as for every device, then fn runs where the
 * CPU loop would, as on a GPU. */
#define WITH_GENERIC(name, fn, expr)                                 \
    do {                                                              \
        ct_stub_##name##_fn saved_ = ct_stub_##name[CT_DEVICE_CPU];   \
        ct_stub_##name[CT_DEVICE_CPU] = fn;                           \
        expr;                                                         \
        ct_stub_##name[CT_DEVICE_CPU] = saved_;                       \
    } while (0)

static ct_status gen_take(const ct_tensor *t, const ct_tensor *index, ct_tensor **out) {
    WITH_GENERIC(take, ct_generic_take, *out = ct_take(t, index));
    return *out ? CT_OK : ct_last_status();
}

static ct_status gen_masked_scatter(const ct_tensor *t, const ct_tensor *mask, const ct_tensor *src, ct_tensor *self,
                                    ct_tensor **out) {
    WITH_GENERIC(masked_scatter, ct_generic_masked_scatter,
                 *out = self ? ct_masked_scatter_(self, mask, src) : ct_masked_scatter(t, mask, src));
    return *out ? CT_OK : ct_last_status();
}

static ct_status gen_kthvalue(const ct_tensor *t, int64_t k, int64_t dim, bool keepdim, ct_tensor **vals,
                              ct_tensor **idx) {
    *idx = NULL;
    WITH_GENERIC(kthvalue, ct_generic_kthvalue, *vals = ct_kthvalue(t, k, dim, keepdim, idx));
    return *vals ? CT_OK : ct_last_status();
}

static ct_status gen_unique(const ct_tensor *t, bool consecutive, ct_tensor **vals, ct_tensor **inv,
                            ct_tensor **counts) {
    *inv = *counts = NULL;
    WITH_GENERIC(unique, ct_generic_unique,
                 *vals = consecutive ? ct_unique_consecutive(t, inv, counts) : ct_unique(t, true, inv, counts));
    return *vals ? CT_OK : ct_last_status();
}

/* ------------------------------------------------------------------ take */

static void check_take(const ct_tensor *t, const ct_tensor *index, const char *what) {
    ct_tensor *got = NULL;
    ct_clear_error();
    assert_int_equal(gen_take(t, index, &got), CT_OK);
    expect_same(got, ct_take(t, index), what);
}

static void test_take(void **state) {
    (void)state;
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = all_dtypes[d];
        char what[96];
        ct_scope_begin();
        ct_tensor *t = sample(dt, CT_SHAPE(3, 4), 1 + (uint64_t)d);
        int64_t iv[] = {0, -1, 5, 11, -12, 3, 7, 7, -5, 2, 0, -1};
        ct_tensor *idx = longs(iv, CT_SHAPE(2, 6));
        snprintf(what, sizeof what, "take %s", ct_dtype_name(dt));
        check_take(t, idx, what);
        snprintf(what, sizeof what, "take %s, both transposed", ct_dtype_name(dt));
        check_take(ct_t(t), ct_t(idx), what);
        snprintf(what, sizeof what, "take %s, strided index", ct_dtype_name(dt));
        check_take(t, ct_slice(idx, 1, 0, 6, 2), what);
        snprintf(what, sizeof what, "take %s, 0-d self", ct_dtype_name(dt));
        int64_t zv[] = {0, -1, 0};
        check_take(ct_select(ct_select(t, 0, 2), 0, 1), longs(zv, CT_SHAPE(3)), what);
        snprintf(what, sizeof what, "take %s, 0-d index", ct_dtype_name(dt));
        check_take(t, ct_select(idx, 1, 4), what);
        snprintf(what, sizeof what, "take %s, empty index", ct_dtype_name(dt));
        check_take(t, ct_zeros(CT_SHAPE(0, 3), CT_I64, CT_CPU), what);
        check_take(ct_zeros(CT_SHAPE(2, 0), dt, CT_CPU), ct_zeros(CT_SHAPE(0), CT_I64, CT_CPU), what);
        ct_scope_end();
    }
}

/* The first bad index in row-major order is named, whatever the storage order. */
static void test_take_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *t = sample(CT_F32, CT_SHAPE(3, 4), 9), *got = NULL;
    int64_t cases[][6] = {{1, 12, -13, 20, 0, 0},      {-13, 12, 0, 0, 0, 0}, {0, 1, 2, 3, 4, INT64_MAX},
                          {INT64_MIN, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, -12 - 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int tr = 0; tr < 2; tr++) {
            ct_tensor *idx = longs(cases[c], CT_SHAPE(2, 3));
            if (tr) /* stored order differs from row-major order */
                idx = ct_t(longs(cases[c], CT_SHAPE(3, 2)));
            ct_clear_error();
            assert_null(ct_take(t, idx));
            ct_status want = ct_last_status();
            char msg[256];
            snprintf(msg, sizeof msg, "%s", ct_last_error());
            assert_non_null(strstr(msg, "out of range: tried to access index"));
            ct_clear_error();
            char what[64];
            snprintf(what, sizeof what, "take error case %zu transposed %d", c, tr);
            expect_same_error(gen_take(t, idx, &got), want, msg, what);
            assert_null(got);
        }
    ct_clear_error();
    ct_scope_end();
}

/* ------------------------------------------------------------------ masked_scatter */

static void check_masked_scatter(const ct_tensor *t, const ct_tensor *mask, const ct_tensor *src, const char *what) {
    ct_tensor *got = NULL;
    ct_clear_error();
    assert_int_equal(gen_masked_scatter(t, mask, src, NULL, &got), CT_OK);
    expect_same(got, ct_masked_scatter(t, mask, src), what);
}

/* In place on a clone of self (given strided by a view of a wider tensor when
 * strided is set): the target ends with the CPU's values. */
static void check_masked_scatter_(const ct_tensor *t, const ct_tensor *mask, const ct_tensor *src, bool strided,
                                  const char *what) {
    ct_tensor *a = ct_clone(t), *b = ct_clone(t);
    if (strided) {
        a = ct_t(ct_contiguous(ct_t(a)));
        b = ct_t(ct_contiguous(ct_t(b)));
    }
    ct_tensor *got = NULL;
    ct_clear_error();
    assert_int_equal(gen_masked_scatter(b, mask, src, b, &got), CT_OK);
    assert_ptr_equal(got, b);
    CT_ASSERT_OK(ct_masked_scatter_(a, mask, src));
    expect_same(ct_clone(b), a, what);
}

static void test_masked_scatter(void **state) {
    (void)state;
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = all_dtypes[d];
        char what[96];
        ct_scope_begin();
        ct_tensor *t = sample(dt, CT_SHAPE(3, 4), 20 + (uint64_t)d), *src = sample(dt, CT_SHAPE(30), 40 + (uint64_t)d);
        ct_tensor *m = bools(CT_SHAPE(3, 4), 2), *mrow = bools(CT_SHAPE(4), 3), *mcol = bools(CT_SHAPE(3, 1), 4);
        ct_tensor *mbig = bools(CT_SHAPE(2, 3, 4), 5);
        snprintf(what, sizeof what, "masked_scatter %s", ct_dtype_name(dt));
        check_masked_scatter(t, m, src, what);
        snprintf(what, sizeof what, "masked_scatter %s, row mask", ct_dtype_name(dt));
        check_masked_scatter(t, mrow, src, what);
        snprintf(what, sizeof what, "masked_scatter %s, column mask", ct_dtype_name(dt));
        check_masked_scatter(t, mcol, src, what);
        /* uint8 masks are refused, as in PyTorch 2.x */
        CT_ASSERT_ERR(ct_masked_scatter(t, ct_to_dtype(mcol, CT_U8), src) != NULL, CT_ERROR_TYPE,
                      "masked_scatter_ only supports boolean masks, but got mask with dtype Byte");
        snprintf(what, sizeof what, "masked_scatter %s, mask broadcasting self", ct_dtype_name(dt));
        check_masked_scatter(t, mbig, src, what);
        snprintf(what, sizeof what, "masked_scatter %s, self broadcasting", ct_dtype_name(dt));
        check_masked_scatter(ct_select(t, 0, 1), mbig, src, what);
        snprintf(what, sizeof what, "masked_scatter %s, transposed inputs", ct_dtype_name(dt));
        check_masked_scatter(ct_t(t), ct_t(m), ct_t(ct_reshape(src, CT_SHAPE(5, 6))), what);
        snprintf(what, sizeof what, "masked_scatter %s, no true in the mask, empty source", ct_dtype_name(dt));
        check_masked_scatter(t, ct_zeros(CT_SHAPE(4), CT_BOOL, CT_CPU), ct_zeros(CT_SHAPE(0), dt, CT_CPU), what);
        snprintf(what, sizeof what, "masked_scatter %s, every element", ct_dtype_name(dt));
        check_masked_scatter(t, ct_ones(CT_SHAPE(1), CT_BOOL, CT_CPU), ct_narrow(src, 0, 0, 12), what);
        snprintf(what, sizeof what, "masked_scatter %s, empty self", ct_dtype_name(dt));
        check_masked_scatter(ct_zeros(CT_SHAPE(0, 4), dt, CT_CPU), mrow, src, what);
        snprintf(what, sizeof what, "masked_scatter %s, 0-d", ct_dtype_name(dt));
        ct_tensor *t0 = ct_select(ct_select(t, 0, 0), 0, 0);
        check_masked_scatter(t0, ct_ones(NULL, 0, CT_BOOL, CT_CPU), src, what);
        check_masked_scatter(t0, ct_zeros(NULL, 0, CT_BOOL, CT_CPU), src, what);
        snprintf(what, sizeof what, "masked_scatter_ %s", ct_dtype_name(dt));
        check_masked_scatter_(t, m, src, false, what);
        snprintf(what, sizeof what, "masked_scatter_ %s, row mask, strided self", ct_dtype_name(dt));
        check_masked_scatter_(t, mrow, src, true, what);
        snprintf(what, sizeof what, "masked_scatter_ %s, column mask", ct_dtype_name(dt));
        check_masked_scatter_(t, mcol, src, false, what);
        ct_scope_end();
    }
}

/* A source shorter than the mask's count: the CPU's error, and an in-place target left
 * as it was. */
static void test_masked_scatter_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *t = sample(CT_F64, CT_SHAPE(3, 4), 7), *m = ct_ones(CT_SHAPE(4), CT_BOOL, CT_CPU), *got = NULL;
    ct_tensor *srcs[] = {ct_ones(CT_SHAPE(11), CT_F64, CT_CPU), ct_zeros(CT_SHAPE(0), CT_F64, CT_CPU),
                         ct_ones(CT_SHAPE(2, 5), CT_F64, CT_CPU)};
    for (int i = 0; i < 3; i++) {
        ct_clear_error();
        assert_null(ct_masked_scatter(t, m, srcs[i]));
        ct_status want = ct_last_status();
        char msg[256];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        assert_string_equal(msg, "masked_scatter: Number of elements of source < number of ones in mask");
        ct_clear_error();
        expect_same_error(gen_masked_scatter(t, m, srcs[i], NULL, &got), want, msg, "masked_scatter short source");
        assert_null(got);
        ct_tensor *self = ct_clone(t);
        ct_clear_error();
        expect_same_error(gen_masked_scatter(self, m, srcs[i], self, &got), want, msg, "masked_scatter_ short source");
        assert_null(got);
        expect_same(ct_clone(self), t, "a failed masked_scatter_ leaves self alone");
    }
    /* one true too many, through a broadcast mask */
    ct_tensor *mc = ct_ones(CT_SHAPE(3, 1), CT_BOOL, CT_CPU);
    ct_clear_error();
    assert_null(ct_masked_scatter(t, mc, srcs[0]));
    ct_status want = ct_last_status();
    char msg[256];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    ct_clear_error();
    expect_same_error(gen_masked_scatter(t, mc, srcs[0], NULL, &got), want, msg, "masked_scatter broadcast short");
    ct_clear_error();
    ct_scope_end();
}

/* ------------------------------------------------------------------ kthvalue */

static void test_kthvalue(void **state) {
    (void)state;
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = all_dtypes[d];
        if (dt == CT_BOOL) /* refused by the structured kernel, before the generic version */
            continue;
        ct_scope_begin();
        ct_tensor *a = sample(dt, CT_SHAPE(4, 5, 6), 60 + (uint64_t)d);
        const ct_tensor *inputs[2] = {a, ct_transpose(sample(dt, CT_SHAPE(6, 5, 4), 70 + (uint64_t)d), 0, 2)};
        for (int in = 0; in < 2; in++)
            for (int dim = -1; dim < 3; dim++) {
                int64_t size = ct_tensor_shape(inputs[in])[dim < 0 ? 2 : dim];
                int64_t ks[3] = {1, (size + 1) / 2, size};
                for (int ki = 0; ki < 3; ki++)
                    for (int keep = 0; keep < 2; keep++) {
                        char what[128];
                        snprintf(what, sizeof what, "kthvalue %s input %d dim %d k %lld keepdim %d",
                                 ct_dtype_name(dt), in, dim, (long long)ks[ki], keep);
                        ct_tensor *gv = NULL, *gi = NULL, *ci = NULL;
                        ct_clear_error();
                        assert_int_equal(gen_kthvalue(inputs[in], ks[ki], dim, keep != 0, &gv, &gi), CT_OK);
                        ct_tensor *cv = ct_kthvalue(inputs[in], ks[ki], dim, keep != 0, &ci);
                        expect_same(gv, cv, what);
                        expect_same(gi, ci, what);
                    }
            }
        ct_tensor *z = ct_select(ct_select(a, 0, 1), 0, 2), *gv = NULL, *gi = NULL, *ci = NULL;
        z = ct_select(z, 0, 3);
        for (int keep = 0; keep < 2; keep++) {
            assert_int_equal(gen_kthvalue(z, 1, -1, keep != 0, &gv, &gi), CT_OK);
            ct_tensor *cv = ct_kthvalue(z, 1, -1, keep != 0, &ci);
            expect_same(gv, cv, "kthvalue 0-d");
            expect_same(gi, ci, "kthvalue 0-d indices");
        }
        ct_tensor *e = ct_zeros(CT_SHAPE(0, 5), dt, CT_CPU);
        assert_int_equal(gen_kthvalue(e, 2, 1, true, &gv, &gi), CT_OK);
        ct_tensor *cv = ct_kthvalue(e, 2, 1, true, &ci);
        expect_same(gv, cv, "kthvalue empty");
        expect_same(gi, ci, "kthvalue empty indices");
        ct_scope_end();
    }
}

/* ------------------------------------------------------------------ unique */

static void check_unique(const ct_tensor *t, bool consecutive, const char *what) {
    ct_tensor *gv = NULL, *gi = NULL, *gc = NULL, *ci = NULL, *cc = NULL;
    ct_clear_error();
    assert_int_equal(gen_unique(t, consecutive, &gv, &gi, &gc), CT_OK);
    ct_tensor *cv = consecutive ? ct_unique_consecutive(t, &ci, &cc) : ct_unique(t, true, &ci, &cc);
    char w[160];
    snprintf(w, sizeof w, "%s: values", what);
    expect_same(gv, cv, w);
    snprintf(w, sizeof w, "%s: inverse", what);
    expect_same(gi, ci, w);
    snprintf(w, sizeof w, "%s: counts", what);
    expect_same(gc, cc, w);
}

static void test_unique(void **state) {
    (void)state;
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = all_dtypes[d];
        ct_scope_begin();
        ct_tensor *a = sample(dt, CT_SHAPE(6, 7), 80 + (uint64_t)d);
        for (int consecutive = 0; consecutive < 2; consecutive++) {
            char what[128];
            const char *name = consecutive ? "unique_consecutive" : "unique";
            snprintf(what, sizeof what, "%s %s", name, ct_dtype_name(dt));
            check_unique(a, consecutive, what);
            snprintf(what, sizeof what, "%s %s transposed", name, ct_dtype_name(dt));
            check_unique(ct_t(a), consecutive, what);
            /* runs long enough for unique_consecutive to merge */
            snprintf(what, sizeof what, "%s %s runs", name, ct_dtype_name(dt));
            check_unique(ct_reshape(ct_expand(ct_unsqueeze(a, 2), CT_SHAPE(6, 7, 3)), CT_SHAPE(2, 63)), consecutive,
                         what);
            snprintf(what, sizeof what, "%s %s 0-d", name, ct_dtype_name(dt));
            check_unique(ct_select(ct_select(a, 0, 3), 0, 4), consecutive, what);
            snprintf(what, sizeof what, "%s %s one element", name, ct_dtype_name(dt));
            check_unique(ct_narrow(ct_select(a, 0, 2), 0, 1, 1), consecutive, what);
            snprintf(what, sizeof what, "%s %s empty", name, ct_dtype_name(dt));
            check_unique(ct_zeros(CT_SHAPE(0, 3), dt, CT_CPU), consecutive, what);
        }
        ct_scope_end();
    }
}

/* Signed zeros share one group whose value is the first met in stable order; NaNs
 * stay apart. */
static void test_unique_zeros_nan(void **state) {
    (void)state;
    ct_scope_begin();
    double orders[][6] = {{0.0, -0.0, NAN, 1.0, NAN, -0.0}, {-0.0, 0.0, 0.0, NAN, NAN, NAN}, {NAN, 2.0, 2.0, -0.0, 0.0, -0.0}};
    ct_dtype fdt[] = {CT_F16, CT_BF16, CT_F32, CT_F64};
    for (int o = 0; o < 3; o++)
        for (int f = 0; f < 4; f++) {
            ct_tensor *t = ct_to_dtype(ct_from_data(orders[o], CT_SHAPE(6), CT_F64), fdt[f]);
            check_unique(t, false, "unique signed zeros and NaN");
            check_unique(t, true, "unique_consecutive signed zeros and NaN");
            /* the group's value really is the first zero met: the CPU's sign bit */
            ct_tensor *inv = NULL, *counts = NULL;
            ct_tensor *u = ct_unique(t, true, &inv, &counts);
            CT_ASSERT_OK(u);
            double first0 = 1;
            for (int i = 5; i >= 0; i--)
                if (orders[o][i] == 0)
                    first0 = orders[o][i];
            assert_true(ct_test_at(u, 0) == 0);
            assert_int_equal(signbit(ct_test_at(u, 0)) != 0, signbit(first0) != 0);
        }
    ct_scope_end();
}

/* Inputs of ten thousand elements and more (long scans, sorts and masks). */
/* ------------------------------------------------------------------ pad_backward */

/* The generic pad_backward (one index_add per padded dim) against the CPU loop, every
 * mode, with crops; integer-valued gradients, so the sums are exact in any order. */
static void test_pad_backward(void **state) {
    (void)state;
    static const struct {
        const char *mode;
        int64_t in[5];
        int nd;
        int64_t pad[6];
        int npad;
    } cases[] = {
        {"reflect", {2, 3, 5}, 3, {2, 3}, 2},
        {"replicate", {2, 2, 4, 5}, 4, {1, 2, 2, 0}, 4},
        {"circular", {1, 2, 3, 4, 3}, 5, {1, 1, 0, 2, 2, 1}, 6},
        {"circular", {1, 2, 5, 6}, 4, {-1, 2, 1, -2}, 4},
        {"replicate", {2, 1, 4, 5}, 4, {-1, 3, 2, -1}, 4},
        {"reflect", {3, 6}, 2, {3, 1}, 2},
        {"constant", {2, 3, 4}, 3, {1, -1, 0, 2}, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ct_scope_begin();
        ct_tensor *x = ct_zeros(cases[i].in, cases[i].nd, CT_F64, CT_CPU);
        ct_tensor *y = ct_pad(x, cases[i].pad, cases[i].npad, cases[i].mode, 0);
        assert_non_null(y);
        ct_tensor *g = ct_to_dtype(ct_randint(-8, 9, ct_tensor_shape(y), ct_tensor_dim(y), CT_I64, CT_CPU), CT_F64);
        ct_tensor *got = NULL, *want = ct_pad_backward(g, cases[i].in, cases[i].nd, cases[i].pad, cases[i].npad,
                                                       cases[i].mode);
        WITH_GENERIC(pad_backward, ct_generic_pad_backward,
                     got = ct_pad_backward(ct_transpose(ct_contiguous(ct_transpose(g, 0, 1)), 0, 1), cases[i].in, cases[i].nd, cases[i].pad, cases[i].npad,
                                           cases[i].mode));
        char what[64];
        snprintf(what, sizeof what, "pad_backward %s case %d", cases[i].mode, (int)i);
        expect_same(got, want, what);
        ct_scope_end();
    }
}

/* The generic upsample (index_select / index_add per tap) against the CPU loops, every
 * mode, 1-D and 2-D, forward and backward (sums in another order: a tolerance). */
static void test_upsample(void **state) {
    (void)state;
    static const struct {
        const char *mode;
        int64_t in[4];
        int nd;
        int64_t out[2];
        bool align;
        double scale;
    } cases[] = {
        {"nearest", {2, 3, 4, 5}, 4, {7, 3}, false, 0},    {"nearest", {2, 3, 5}, 3, {8}, false, 1.7},
        {"nearest-exact", {1, 2, 4, 5}, 4, {6, 3}, false, 0}, {"linear", {2, 3, 4}, 3, {10}, false, 2.5},
        {"bilinear", {2, 2, 3, 4}, 4, {5, 7}, true, 0},    {"bilinear", {1, 2, 5, 7}, 4, {2, 3}, false, 0},
        {"bicubic", {1, 2, 3, 4}, 4, {6, 8}, false, 2.0},  {"bicubic", {2, 1, 4, 3}, 4, {6, 5}, true, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ct_scope_begin();
        int nsp = cases[i].nd - 2;
        double scales[2] = {cases[i].scale, cases[i].scale};
        ct_tensor *x = ct_randn(cases[i].in, cases[i].nd, CT_F64, CT_CPU);
        ct_tensor *want = ct_upsample(x, cases[i].out, nsp, cases[i].mode, cases[i].align, scales), *got = NULL;
        assert_non_null(want);
        WITH_GENERIC(upsample, ct_generic_upsample,
                     got = ct_upsample(x, cases[i].out, nsp, cases[i].mode, cases[i].align, scales));
        bool close = false;
        if (!got || ct_allclose(got, want, 1e-12, 1e-12, false, &close) || !close)
            fail_msg("upsample %s case %d: %s", cases[i].mode, (int)i, got ? "values differ" : ct_last_error());
        ct_tensor *g = ct_randn_like(want, CT_DTYPE_UNDEFINED);
        want = ct_upsample_backward(g, cases[i].in, cases[i].nd, cases[i].mode, cases[i].align, scales);
        assert_non_null(want);
        got = NULL;
        WITH_GENERIC(upsample_backward, ct_generic_upsample_backward,
                     got = ct_upsample_backward(g, cases[i].in, cases[i].nd, cases[i].mode, cases[i].align, scales));
        if (!got || ct_allclose(got, want, 1e-12, 1e-12, false, &close) || !close)
            fail_msg("upsample_backward %s case %d: %s", cases[i].mode, (int)i,
                     got ? "values differ" : ct_last_error());
        ct_scope_end();
    }
}

static void test_long(void **state) {
    (void)state;
    ct_dtype dts[] = {CT_BOOL, CT_I8, CT_U64, CT_BF16, CT_F32};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        ct_scope_begin();
        ct_tensor *a = sample(dts[d], CT_SHAPE(77, 131), 90 + (uint64_t)d);
        check_unique(a, false, "unique 10087 elements");
        check_unique(a, true, "unique_consecutive 10087 elements");
        check_unique(ct_reshape(ct_expand(ct_unsqueeze(a, 2), CT_SHAPE(77, 131, 2)), CT_SHAPE(-1)), true,
                     "unique_consecutive 20174 elements in runs");
        ct_tensor *m = bools(CT_SHAPE(77, 131), 91), *src = sample(dts[d], CT_SHAPE(10087), 92);
        check_masked_scatter(a, m, src, "masked_scatter 10087 elements");
        check_masked_scatter(a, ct_ones(CT_SHAPE(131), CT_BOOL, CT_CPU), src, "masked_scatter 10087 ones");
        ct_scope_end();
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take),           cmocka_unit_test(test_take_errors),
        cmocka_unit_test(test_masked_scatter), cmocka_unit_test(test_masked_scatter_errors),
        cmocka_unit_test(test_kthvalue),       cmocka_unit_test(test_unique),
        cmocka_unit_test(test_unique_zeros_nan), cmocka_unit_test(test_long),
        cmocka_unit_test(test_pad_backward),   cmocka_unit_test(test_upsample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
