/* The fast paths of CPU copies and casts (Note [Branch-free half conversions] and
 * Note [Parallel copies] in src/core/copy.c) against the general ones: the contiguous
 * cast loops against the same loops run strided, the inline half conversions against
 * dtype.c's, and threaded copy_ / clone / to / contiguous around the threading grain
 * against element-by-element conversion. Everything is compared bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "cpu/loop.h"
#include "testutil.h"

#define NDT CT_DTYPE_COUNT

/* A small xorshift generator: the tests do not depend on ctorch's RNG. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Fills n elements of dtype d with values that reach every case of the casts: random
 * bit patterns (NaNs with payloads, infinities, subnormals, huge values), small
 * integers, halves, values near the int32/int64 limits and the half rounding edges. */
static void fill_interesting(char *p, int64_t n, ct_dtype d) {
    static const double specials[] = {0.0,       -0.0,         0.5,           -0.5,         1.5,
                                      2.5,       -2.5,         255.5,         256.0,        -129.0,
                                      65504.0,   65520.0,      65519.99,      6.0e-8,       2.9e-8,
                                      1e-45,     3.0e38,       -3.0e38,       2147483647.0, 2147483648.0,
                                      -2147483648.0, -2147483649.0, 9.3e18,    -9.3e18,      1.8e19,
                                      1e300,     INFINITY,     -INFINITY,     NAN,          -NAN};
    const int nspec = (int)(sizeof specials / sizeof specials[0]);
    size_t esz = ct_dtype_size(d);
    for (int64_t i = 0; i < n; i++) {
        char *e = p + (size_t)i * esz;
        uint64_t r = next_u64();
        switch (r % 4) {
        case 0: /* raw bits */
            memcpy(e, &r, esz);
            break;
        case 1: /* a special value */
            ct_store_double(e, d, specials[(r >> 8) % (uint64_t)nspec]);
            break;
        case 2: /* a small integer */
            ct_store_int64(e, d, (int64_t)((r >> 8) % 601) - 300);
            break;
        default: /* a random float32 from all bit patterns, rounded into d */
            ct_store_double(e, d, (double)bits_f32((uint32_t)(r >> 16)));
            break;
        }
        if (d == CT_DTYPE_BOOL)
            *(uint8_t *)e = *(uint8_t *)e != 0;
    }
}

/* Every dtype pair: the contiguous loop (the fast branch) gives the same bytes as the
 * loop run with strides (the general branch), for odd lengths. */
static void test_contiguous_matches_strided_all_pairs(void **state) {
    (void)state;
    static const int64_t lens[] = {1, 3, 7, 17, 63, 1001};
    const int64_t maxn = 1001;
    char *src = malloc((size_t)maxn * 8), *spread = malloc((size_t)maxn * 8 * 3);
    char *fast = malloc((size_t)maxn * 8 + 16), *slow = malloc((size_t)maxn * 8 * 2);
    assert_non_null(src);
    assert_non_null(spread);
    assert_non_null(fast);
    assert_non_null(slow);
    for (int s = 0; s < NDT; s++) {
        size_t ssz = ct_dtype_size((ct_dtype)s);
        fill_interesting(src, maxn, (ct_dtype)s);
        /* the same values, every third element */
        for (int64_t i = 0; i < maxn; i++)
            memcpy(spread + (size_t)i * 3 * ssz, src + (size_t)i * ssz, ssz);
        for (int d = 0; d < NDT; d++) {
            size_t dsz = ct_dtype_size((ct_dtype)d);
            ct_loop2_fn fn = ct_cast_loop((ct_dtype)d, (ct_dtype)s);
            for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
                int64_t n = lens[k];
                memset(fast, 0xa5, (size_t)maxn * 8 + 16);
                fn(fast, src, n, (int64_t)dsz, (int64_t)ssz, NULL);
                fn(slow, spread, n, (int64_t)(2 * dsz), (int64_t)(3 * ssz), NULL);
                for (int64_t i = 0; i < n; i++) {
                    if (memcmp(fast + (size_t)i * dsz, slow + (size_t)i * 2 * dsz, dsz) != 0) {
                        print_error("%s -> %s, n=%lld: element %lld differs between the contiguous and the "
                                    "strided loop\n",
                                    ct_dtype_name((ct_dtype)s), ct_dtype_name((ct_dtype)d), (long long)n,
                                    (long long)i);
                        fail();
                    }
                }
                /* nothing past the end was written */
                for (size_t b = (size_t)n * dsz; b < (size_t)n * dsz + 16; b++)
                    assert_int_equal((unsigned char)fast[b], 0xa5);
            }
        }
    }
    free(src);
    free(spread);
    free(fast);
    free(slow);
}

/* float16 and bfloat16 to float32 for every one of the 65536 bit patterns, against
 * dtype.c's conversions. */
static void test_half_to_float_exhaustive(void **state) {
    (void)state;
    enum { N = 65536 };
    uint16_t *h = malloc(N * sizeof *h);
    float *out = malloc(N * sizeof *out);
    assert_non_null(h);
    assert_non_null(out);
    for (int i = 0; i < N; i++)
        h[i] = (uint16_t)i;
    ct_cast_loop(CT_DTYPE_FLOAT32, CT_DTYPE_FLOAT16)((char *)out, (const char *)h, N, 4, 2, NULL);
    for (int i = 0; i < N; i++)
        if (f32_bits(out[i]) != f32_bits(ct_half_to_float(h[i]))) {
            print_error("half 0x%04x: 0x%08x, dtype.c gives 0x%08x\n", i, f32_bits(out[i]),
                        f32_bits(ct_half_to_float(h[i])));
            fail();
        }
    ct_cast_loop(CT_DTYPE_FLOAT32, CT_DTYPE_BFLOAT16)((char *)out, (const char *)h, N, 4, 2, NULL);
    for (int i = 0; i < N; i++)
        assert_int_equal(f32_bits(out[i]), f32_bits(ct_bfloat16_to_float(h[i])));
    free(h);
    free(out);
}

/* float32 to float16/bfloat16 over a sweep of bit patterns, every pattern near the
 * rounding and range edges, against dtype.c's conversions. */
static void test_float_to_half_sweep(void **state) {
    (void)state;
    enum { N = 1 << 20 };
    static const uint32_t edges[] = {0x00000000u, 0x00000001u, 0x007fffffu, 0x00800000u, 0x33000000u,
                                     0x33000001u, 0x337fffffu, 0x38800000u, 0x387fffffu, 0x38801000u,
                                     0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477ff001u, 0x7f7fffffu,
                                     0x7f800000u, 0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0x7fffffffu,
                                     0x3f800fffu, 0x3f801000u, 0x3f801001u, 0x3f803000u, 0x3f808000u,
                                     0x3f818000u, 0x3f7fffffu};
    const int nedge = (int)(sizeof edges / sizeof edges[0]);
    uint32_t *bits = malloc(N * sizeof *bits);
    uint16_t *out = malloc(N * sizeof *out);
    assert_non_null(bits);
    assert_non_null(out);
    int k = 0;
    for (int e = 0; e < nedge; e++)
        for (int delta = -8; delta <= 8; delta++)
            for (uint32_t sign = 0; sign < 2; sign++)
                bits[k++] = (sign << 31) | (uint32_t)((int64_t)edges[e] + delta);
    /* the rest: a stride through all 2^32 patterns (odd, so every residue is reached) */
    for (uint32_t x = 0x12345u; k < N; k++, x += 4093u * 1031u)
        bits[k] = x;
    ct_cast_loop(CT_DTYPE_FLOAT16, CT_DTYPE_FLOAT32)((char *)out, (const char *)bits, N, 2, 4, NULL);
    for (int i = 0; i < N; i++)
        if (out[i] != ct_float_to_half(bits_f32(bits[i]))) {
            print_error("float 0x%08x: half 0x%04x, dtype.c gives 0x%04x\n", bits[i], out[i],
                        ct_float_to_half(bits_f32(bits[i])));
            fail();
        }
    ct_cast_loop(CT_DTYPE_BFLOAT16, CT_DTYPE_FLOAT32)((char *)out, (const char *)bits, N, 2, 4, NULL);
    for (int i = 0; i < N; i++)
        if (out[i] != ct_float_to_bfloat16(bits_f32(bits[i]))) {
            print_error("float 0x%08x: bfloat16 0x%04x, dtype.c gives 0x%04x\n", bits[i], out[i],
                        ct_float_to_bfloat16(bits_f32(bits[i])));
            fail();
        }
    free(bits);
    free(out);
}

/* Asserts that the n elements of got (dtype d, contiguous) are the element-by-element
 * conversions of the source elements at src + off[i] (dtype s). */
static void check_elementwise(const ct_tensor *got, const char *src, const int64_t *off, ct_dtype s,
                              const char *what) {
    ct_dtype d = got->dtype;
    ct_loop2_fn fn = ct_cast_loop(d, s);
    size_t dsz = ct_dtype_size(d), ssz = ct_dtype_size(s);
    const char *g = ct_tensor_data(got);
    for (int64_t i = 0; i < got->numel; i++) {
        char want[8];
        fn(want, src + off[i] * (int64_t)ssz, 1, 0, 0, NULL);
        if (memcmp(want, g + (size_t)i * dsz, dsz) != 0) {
            print_error("%s %s -> %s, numel %lld: element %lld differs\n", what, ct_dtype_name(s), ct_dtype_name(d),
                        (long long)got->numel, (long long)i);
            fail();
        }
    }
}

/* copy_, clone and to around the threading grain (32768 elements), with 1, 2 and 3
 * threads, for same-dtype and cast copies: the pieces the threads write join up
 * exactly. */
static void test_threaded_flat_copies(void **state) {
    (void)state;
    static const int64_t sizes[] = {32767, 32768, 32769, 65536 + 13, 100003};
    static const ct_dtype pairs[][2] = {
        {CT_DTYPE_FLOAT32, CT_DTYPE_FLOAT32}, {CT_DTYPE_BOOL, CT_DTYPE_FLOAT32},  {CT_DTYPE_FLOAT32, CT_DTYPE_BFLOAT16},
        {CT_DTYPE_FLOAT16, CT_DTYPE_FLOAT32}, {CT_DTYPE_FLOAT32, CT_DTYPE_INT32},  {CT_DTYPE_INT64, CT_DTYPE_FLOAT64},
        {CT_DTYPE_UINT8, CT_DTYPE_FLOAT32},   {CT_DTYPE_FLOAT64, CT_DTYPE_UINT8}, {CT_DTYPE_INT8, CT_DTYPE_INT8},
    };
    int saved = ct_get_num_threads();
    int64_t *off = malloc(sizeof(int64_t) * 100003);
    assert_non_null(off);
    for (int64_t i = 0; i < 100003; i++)
        off[i] = i;
    for (int nth = 1; nth <= 3; nth++) {
        ct_set_num_threads(nth);
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
            ct_dtype s = pairs[p][0], d = pairs[p][1];
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
                ct_scope_begin();
                int64_t n = sizes[k];
                ct_tensor *src = ct_empty(CT_SHAPE(n), s, CT_CPU);
                CT_ASSERT_OK(src);
                fill_interesting(ct_tensor_data(src), n, s);
                ct_tensor *dst = ct_empty(CT_SHAPE(n), d, CT_CPU);
                CT_ASSERT_OK(ct_copy_(dst, src));
                check_elementwise(dst, ct_tensor_data(src), off, s, "copy_");
                ct_tensor *cast = s == d ? ct_clone(src) : ct_to_dtype(src, d);
                CT_ASSERT_OK(cast);
                check_elementwise(cast, ct_tensor_data(src), off, s, s == d ? "clone" : "to");
                /* a 2-d view of the same memory goes the flat way too */
                ct_tensor *src2 = ct_view(src, CT_SHAPE(1, n));
                ct_tensor *dst2 = ct_empty(CT_SHAPE(1, n), d, CT_CPU);
                CT_ASSERT_OK(ct_copy_(dst2, src2));
                check_elementwise(dst2, ct_tensor_data(src), off, s, "copy_ (1, n)");
                ct_scope_end();
            }
        }
    }
    ct_set_num_threads(saved);
    free(off);
}

/* Copies that cannot go the flat way above the grain: a transposed source
 * (contiguous()), a strided slice, a broadcast source, and a non-contiguous
 * destination, with 1, 2 and 3 threads. */
static void test_threaded_strided_copies(void **state) {
    (void)state;
    int saved = ct_get_num_threads();
    const int64_t rows = 301, cols = 257; /* 77357 elements: above the grain, odd sizes */
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(rows * cols * 2));
    assert_non_null(off);
    for (int nth = 1; nth <= 3; nth++) {
        ct_set_num_threads(nth);
        for (int pass = 0; pass < 2; pass++) {
            ct_dtype s = pass ? CT_DTYPE_FLOAT32 : CT_DTYPE_FLOAT16, d = pass ? CT_DTYPE_FLOAT32 : CT_DTYPE_INT64;
            ct_scope_begin();
            ct_tensor *base = ct_empty(CT_SHAPE(rows, cols), s, CT_CPU);
            CT_ASSERT_OK(base);
            fill_interesting(ct_tensor_data(base), rows * cols, s);
            const char *bp = ct_tensor_data(base);

            /* transpose -> contiguous: element (i, j) of the (cols, rows) result is base[j][i] */
            ct_tensor *t = ct_transpose(base, 0, 1);
            ct_tensor *c = ct_contiguous(t);
            CT_ASSERT_OK(c);
            for (int64_t i = 0; i < cols; i++)
                for (int64_t j = 0; j < rows; j++)
                    off[i * rows + j] = j * cols + i;
            check_elementwise(c, bp, off, s, "contiguous");
            ct_tensor *tc = ct_empty(CT_SHAPE(cols, rows), d, CT_CPU);
            CT_ASSERT_OK(ct_copy_(tc, t));
            check_elementwise(tc, bp, off, s, "copy_ of a transpose");

            /* every other column: a strided slice */
            ct_tensor *sl = ct_slice(base, 1, 0, cols, 2);
            CT_ASSERT_OK(sl);
            ct_tensor *slc = ct_to_dtype(ct_contiguous(sl), d);
            CT_ASSERT_OK(slc);
            int64_t sc = (cols + 1) / 2;
            for (int64_t i = 0; i < rows; i++)
                for (int64_t j = 0; j < sc; j++)
                    off[i * sc + j] = i * cols + 2 * j;
            check_elementwise(slc, bp, off, s, "strided slice");

            /* one row broadcast over 301 rows */
            ct_tensor *row = ct_select(base, 0, 7);
            ct_tensor *bc = ct_empty(CT_SHAPE(rows, cols), d, CT_CPU);
            CT_ASSERT_OK(ct_copy_(bc, row));
            for (int64_t i = 0; i < rows; i++)
                for (int64_t j = 0; j < cols; j++)
                    off[i * cols + j] = 7 * cols + j;
            check_elementwise(bc, bp, off, s, "broadcast row");

            /* a transposed destination: copy_ into it, then read it back contiguous */
            ct_tensor *dbase = ct_empty(CT_SHAPE(cols, rows), d, CT_CPU);
            ct_tensor *dt = ct_transpose(dbase, 0, 1); /* (rows, cols), strides (1, rows) */
            CT_ASSERT_OK(ct_copy_(dt, base));
            for (int64_t i = 0; i < cols; i++)
                for (int64_t j = 0; j < rows; j++)
                    off[i * rows + j] = j * cols + i;
            check_elementwise(dbase, bp, off, s, "copy_ into a transpose");
            ct_scope_end();
        }
    }
    ct_set_num_threads(saved);
    free(off);
}

/* copy_ between overlapping views of one storage above the grain still reads every
 * source element before writing (through a temporary), threads or not. */
static void test_threaded_overlapping_copy(void **state) {
    (void)state;
    int saved = ct_get_num_threads();
    ct_set_num_threads(2);
    const int64_t n = 70001;
    ct_scope_begin();
    ct_tensor *a = ct_arange(ct_scalar_int(0), ct_scalar_int(n), ct_scalar_int(1), CT_DTYPE_FLOAT32, CT_CPU);
    CT_ASSERT_OK(a);
    ct_tensor *lo = ct_slice(a, 0, 0, n - 1, 1), *hi = ct_slice(a, 0, 1, n, 1);
    CT_ASSERT_OK(ct_copy_(hi, lo)); /* shift right by one */
    const float *p = ct_tensor_data(a);
    assert_true(p[0] == 0.0f);
    for (int64_t i = 1; i < n; i++)
        if (p[i] != (float)(i - 1)) {
            print_error("element %lld is %g, expected %lld\n", (long long)i, (double)p[i], (long long)(i - 1));
            fail();
        }
    ct_scope_end();
    ct_set_num_threads(saved);
}

/* fill_ of every dtype around the grain, contiguous (the flat, threaded way) and
 * transposed: every element holds the scalar's bytes. */
static void test_threaded_fill(void **state) {
    (void)state;
    static const int64_t sizes[] = {5, 32767, 32769, 100003};
    int saved = ct_get_num_threads();
    for (int nth = 1; nth <= 3; nth += 2) {
        ct_set_num_threads(nth);
        for (int d = 0; d < NDT; d++) {
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
                ct_scope_begin();
                int64_t n = sizes[k];
                size_t esz = ct_dtype_size((ct_dtype)d);
                ct_scalar v = d == CT_DTYPE_BOOL ? ct_scalar_bool(true) : ct_scalar_int(3 + (int64_t)k);
                char want[8];
                ct_store_scalar(want, (ct_dtype)d, v);
                ct_tensor *t = ct_empty(CT_SHAPE(n), (ct_dtype)d, CT_CPU);
                CT_ASSERT_OK(t);
                memset(ct_tensor_data(t), 0x5a, (size_t)n * esz);
                CT_ASSERT_OK(ct_fill_(t, v));
                const char *p = ct_tensor_data(t);
                for (int64_t i = 0; i < n; i++)
                    if (memcmp(p + (size_t)i * esz, want, esz) != 0) {
                        print_error("fill_ %s, numel %lld: element %lld differs\n", ct_dtype_name((ct_dtype)d),
                                    (long long)n, (long long)i);
                        fail();
                    }
                /* zero, then a strided (non-contiguous) view filled with the value */
                CT_ASSERT_OK(ct_zero_(t));
                for (size_t b = 0; b < (size_t)n * esz; b++)
                    assert_int_equal(p[b], 0);
                ct_tensor *m = ct_slice(t, 0, 0, n, 2); /* every other element */
                CT_ASSERT_OK(ct_fill_(m, v));
                static const char zeros[8] = {0};
                for (int64_t i = 0; i < n; i++)
                    assert_memory_equal(p + (size_t)i * esz, i % 2 ? zeros : want, esz);
                ct_scope_end();
            }
        }
    }
    ct_set_num_threads(saved);
}

/* Errors still come first: a shape that does not broadcast, NULL arguments. */
static void test_copy_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_zeros(CT_SHAPE(40000), CT_DTYPE_FLOAT32, CT_CPU);
    ct_tensor *b = ct_zeros(CT_SHAPE(40001), CT_DTYPE_BFLOAT16, CT_CPU);
    CT_ASSERT_ERR(ct_copy_(a, b) != NULL, CT_ERROR_VALUE, "cannot be broadcast");
    CT_ASSERT_ERR(ct_copy_(a, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "copy_");
    CT_ASSERT_ERR(ct_copy_(NULL, a) != NULL, CT_ERROR_NULL_ARGUMENT, "copy_");
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contiguous_matches_strided_all_pairs),
        cmocka_unit_test(test_half_to_float_exhaustive),
        cmocka_unit_test(test_float_to_half_sweep),
        cmocka_unit_test(test_threaded_flat_copies),
        cmocka_unit_test(test_threaded_strided_copies),
        cmocka_unit_test(test_threaded_overlapping_copy),
        cmocka_unit_test(test_threaded_fill),
        cmocka_unit_test(test_copy_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
