/* Philox streams, random factories and in-place samplers. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "random.h"

static uint64_t gen_offset(void) {
    uint64_t seed, offset;
    ct_generator_get_state(ct_default_generator(), &seed, &offset);
    return offset;
}

static void test_default_seed(void **state) {
    (void)state;
    /* Runs first: nothing has seeded the generator yet. */
    assert_true(ct_initial_seed() == CT_DEFAULT_SEED);
    ct_manual_seed(12345);
    assert_true(ct_initial_seed() == 12345);
    assert_true(gen_offset() == 0);
    ct_manual_seed(UINT64_C(0xfedcba9876543210));
    assert_true(ct_initial_seed() == UINT64_C(0xfedcba9876543210));
}

/* Known answers from the Random123 distribution (kat_vectors), Philox4x32-10. */
static void test_philox_kat(void **state) {
    (void)state;
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint32_t out[4];
        ct_philox4x32_10(kat[i].ctr, kat[i].key, out);
        for (int w = 0; w < 4; w++)
            assert_int_equal(out[w], kat[i].out[w]);
    }
    /* ct_philox_block is the same function with the documented counter/key layout. */
    uint32_t a[4], b[4];
    ct_philox_block(UINT64_C(0x299f31d0a4093822), UINT64_C(0x85a308d3243f6a88), a);
    const uint32_t ctr[4] = {0x243f6a88, 0x85a308d3, 0, 0}, key[2] = {0xa4093822, 0x299f31d0};
    ct_philox4x32_10(ctr, key, b);
    assert_memory_equal(a, b, sizeof a);
    /* and the public ct_philox4x32 is ct_philox_block (Random123's first vector: key and
     * counter all zero) */
    uint32_t c[4];
    ct_philox4x32(UINT64_C(0x299f31d0a4093822), UINT64_C(0x85a308d3243f6a88), c);
    assert_memory_equal(a, c, sizeof a);
    ct_philox4x32(0, 0, c);
    for (int w = 0; w < 4; w++)
        assert_int_equal(c[w], kat[0].out[w]);
}

/* Element i is a pure function of (seed, first counter, i): see Note [Random streams]. */
static void test_stream_layout(void **state) {
    (void)state;
    ct_scope_begin();
    const uint64_t seed = 987654321;
    ct_manual_seed(seed);
    ct_tensor *f = ct_rand(CT_SHAPE(2, 5), CT_F32, CT_CPU);
    CT_ASSERT_OK(f);
    assert_true(gen_offset() == 3); /* ceil(10 / 4) counters */
    const float *pf = ct_tensor_data(f);
    for (int i = 0; i < 10; i++) {
        uint32_t r[4];
        ct_philox_block(seed, (uint64_t)(i / 4), r);
        assert_true(pf[i] == (float)ct_uniform_from_bits(r[i % 4], 24));
    }
    ct_tensor *d = ct_rand(CT_SHAPE(5), CT_F64, CT_CPU);
    assert_true(gen_offset() == 6); /* ceil(5 / 2) more */
    const double *pd = ct_tensor_data(d);
    for (int i = 0; i < 5; i++) {
        uint32_t r[4];
        ct_philox_block(seed, 3 + (uint64_t)(i / 2), r);
        uint64_t x = (uint64_t)r[2 * (i % 2)] | ((uint64_t)r[2 * (i % 2) + 1] << 32);
        assert_true(pd[i] == ct_uniform_from_bits(x, 53));
    }
    ct_tensor *n = ct_randn(CT_SHAPE(3), CT_F64, CT_CPU);
    CT_ASSERT_OK(n);
    assert_true(gen_offset() == 8);
    ct_tensor *m = ct_rand(CT_SHAPE(1000), CT_F32, CT_META);
    CT_ASSERT_SHAPE(m, 1000);
    assert_true(gen_offset() == 8); /* meta tensors consume nothing */
    ct_scope_end();
}

static bool same_data(const ct_tensor *a, const ct_tensor *b) {
    return ct_tensor_numel(a) == ct_tensor_numel(b) &&
           memcmp(ct_tensor_data(a), ct_tensor_data(b), (size_t)ct_tensor_numel(a) * ct_tensor_element_size(a)) == 0;
}

static void test_reproducible(void **state) {
    (void)state;
    ct_scope_begin();
    ct_dtype dts[] = {CT_F16, CT_BF16, CT_F32, CT_F64};
    for (size_t k = 0; k < 4; k++) {
        ct_manual_seed(7);
        ct_tensor *a = ct_rand(CT_SHAPE(33), dts[k], CT_CPU);
        ct_tensor *b = ct_randn(CT_SHAPE(33), dts[k], CT_CPU);
        ct_manual_seed(7);
        ct_tensor *a2 = ct_rand(CT_SHAPE(33), dts[k], CT_CPU);
        ct_tensor *b2 = ct_randn(CT_SHAPE(33), dts[k], CT_CPU);
        assert_true(same_data(a, a2) && same_data(b, b2));
        ct_tensor *a3 = ct_rand(CT_SHAPE(33), dts[k], CT_CPU); /* the stream moved on */
        assert_false(same_data(a, a3));
        ct_manual_seed(8);
        ct_tensor *a4 = ct_rand(CT_SHAPE(33), dts[k], CT_CPU);
        assert_false(same_data(a, a4));
    }
    ct_manual_seed(99);
    ct_tensor *p = ct_randperm(50, CT_DTYPE_UNDEFINED, CT_CPU);
    ct_tensor *i = ct_randint(0, 1000, CT_SHAPE(20), CT_DTYPE_UNDEFINED, CT_CPU);
    ct_manual_seed(99);
    ct_tensor *p2 = ct_randperm(50, CT_DTYPE_UNDEFINED, CT_CPU);
    ct_tensor *i2 = ct_randint(0, 1000, CT_SHAPE(20), CT_DTYPE_UNDEFINED, CT_CPU);
    assert_true(same_data(p, p2) && same_data(i, i2));
    ct_manual_seed(100);
    assert_false(same_data(p, ct_randperm(50, CT_DTYPE_UNDEFINED, CT_CPU)));
    ct_scope_end();
}

/* Large enough for several OpenMP chunks. */
#define BIG 300001

static void test_thread_count_invariance(void **state) {
    (void)state;
    int saved = ct_get_num_threads();
    ct_tensor *res[2][6];
    for (int run = 0; run < 2; run++) {
        ct_set_num_threads(run == 0 ? 1 : 2);
        ct_manual_seed(2024);
        res[run][0] = ct_rand(CT_SHAPE(BIG), CT_F32, CT_CPU);
        res[run][1] = ct_randn(CT_SHAPE(BIG), CT_F64, CT_CPU);
        res[run][2] = ct_randint(-5, 1000000, CT_SHAPE(BIG), CT_I32, CT_CPU);
        res[run][3] = ct_bernoulli_(ct_empty(CT_SHAPE(BIG), CT_U8, CT_CPU), 0.25);
        res[run][4] = ct_rand(CT_SHAPE(BIG), CT_BF16, CT_CPU);
        res[run][5] = ct_randn(CT_SHAPE(BIG), CT_F16, CT_CPU);
        ct_release(res[run][3]); /* bernoulli_ returned a second reference to the empty tensor */
    }
    ct_set_num_threads(saved);
    for (int k = 0; k < 6; k++) {
        CT_ASSERT_OK(res[0][k]);
        assert_true(same_data(res[0][k], res[1][k]));
        ct_release(res[0][k]);
        ct_release(res[1][k]);
    }
}

static double mean_of(const ct_tensor *t, double *var) {
    int64_t n = ct_tensor_numel(t);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = ct_test_at(t, i);
        s += v;
        s2 += v * v;
    }
    double m = s / (double)n;
    if (var)
        *var = s2 / (double)n - m * m;
    return m;
}

/* Tolerances are 5 standard errors; with fixed seeds the outcome is fixed anyway. */
#define NS 100000

static void test_uniform_statistics(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(31337);
    ct_dtype dts[] = {CT_F32, CT_F64};
    for (int k = 0; k < 2; k++) {
        ct_tensor *u = ct_rand(CT_SHAPE(NS), dts[k], CT_CPU);
        double var, m = mean_of(u, &var);
        assert_true(fabs(m - 0.5) < 5 * sqrt(1.0 / 12 / NS));
        assert_true(fabs(var - 1.0 / 12) < 5 * sqrt((1.0 / 80 - 1.0 / 144) / NS));
        int64_t count[10] = {0};
        for (int64_t i = 0; i < NS; i++) {
            double v = ct_test_at(u, i);
            assert_true(v >= 0.0 && v < 1.0);
            count[(int)(v * 10)]++;
        }
        for (int b = 0; b < 10; b++) /* binomial(NS, 0.1): sd = 94.9 */
            assert_true(llabs(count[b] - NS / 10) < 5 * 95);
    }
    /* uniform_ on a range, and the narrow dtypes stay in [from, to). */
    ct_tensor *t = ct_uniform_(ct_empty(CT_SHAPE(NS), CT_F64, CT_CPU), -3.0, 5.0);
    double m = mean_of(t, NULL);
    assert_true(fabs(m - 1.0) < 5 * 8 / sqrt(12.0 * NS));
    ct_dtype narrow[] = {CT_F16, CT_BF16};
    for (int k = 0; k < 2; k++) {
        ct_tensor *h = ct_rand(CT_SHAPE(NS), narrow[k], CT_CPU);
        double lo = 1, hi = 0;
        for (int64_t i = 0; i < NS; i++) {
            double v = ct_test_at(h, i);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        assert_true(lo >= 0.0 && lo < 0.01 && hi < 1.0 && hi > 0.99);
        assert_true(fabs(mean_of(h, NULL) - 0.5) < 0.01);
    }
    ct_scope_end();
}

static void test_normal_statistics(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(4242);
    ct_dtype dts[] = {CT_F32, CT_F64, CT_BF16};
    for (int k = 0; k < 3; k++) {
        ct_tensor *z = ct_randn(CT_SHAPE(NS), dts[k], CT_CPU);
        double var, m = mean_of(z, &var);
        assert_true(fabs(m) < 5 / sqrt((double)NS));
        assert_true(fabs(var - 1.0) < 5 * sqrt(2.0 / NS) + (dts[k] == CT_BF16 ? 0.01 : 0.0));
        int64_t within1 = 0;
        for (int64_t i = 0; i < NS; i++)
            within1 += fabs(ct_test_at(z, i)) < 1.0;
        double frac = (double)within1 / NS, p = 0.6826894921370859;
        assert_true(fabs(frac - p) < 5 * sqrt(p * (1 - p) / NS) + (dts[k] == CT_BF16 ? 0.01 : 0.0));
    }
    ct_tensor *n = ct_normal_(ct_empty(CT_SHAPE(NS), CT_F32, CT_CPU), 3.0, 2.0);
    double var, m = mean_of(n, &var);
    assert_true(fabs(m - 3.0) < 5 * 2 / sqrt((double)NS));
    assert_true(fabs(var - 4.0) < 5 * 4 * sqrt(2.0 / NS));
    ct_tensor *c = ct_normal_(ct_empty(CT_SHAPE(10), CT_F64, CT_CPU), -1.5, 0.0);
    for (int i = 0; i < 10; i++)
        assert_true(ct_test_at(c, i) == -1.5);
    ct_scope_end();
}

static void test_randint(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(5);
    ct_tensor *t = ct_randint(-3, 7, CT_SHAPE(NS), CT_DTYPE_UNDEFINED, CT_CPU);
    assert_int_equal(ct_tensor_dtype(t), CT_I64);
    int64_t count[10] = {0};
    const int64_t *p = ct_tensor_data(t);
    for (int64_t i = 0; i < NS; i++) {
        assert_true(p[i] >= -3 && p[i] < 7);
        count[p[i] + 3]++;
    }
    for (int b = 0; b < 10; b++)
        assert_true(llabs(count[b] - NS / 10) < 5 * 95);
    /* Other dtypes, the extremes of int64, and a one-value range. */
    ct_tensor *u8 = ct_randint(250, 256, CT_SHAPE(1000), CT_U8, CT_CPU);
    ct_tensor *b = ct_randint(0, 2, CT_SHAPE(1000), CT_BOOL, CT_CPU);
    ct_tensor *f = ct_randint(-10, 10, CT_SHAPE(1000), CT_F32, CT_CPU);
    ct_tensor *one = ct_randint(41, 42, CT_SHAPE(7), CT_I16, CT_CPU);
    ct_tensor *wide = ct_randint(INT64_MIN, INT64_MAX, CT_SHAPE(1000), CT_I64, CT_CPU);
    double bsum = 0;
    int negatives = 0;
    for (int i = 0; i < 1000; i++) {
        double v = ct_test_at(u8, i);
        assert_true(v >= 250 && v <= 255);
        bsum += ct_test_at(b, i);
        double fv = ct_test_at(f, i);
        assert_true(fv >= -10 && fv < 10 && fv == floor(fv));
        negatives += ((const int64_t *)ct_tensor_data(wide))[i] < 0;
    }
    assert_true(bsum > 400 && bsum < 600);
    assert_true(negatives > 400 && negatives < 600);
    for (int i = 0; i < 7; i++)
        assert_true(ct_test_at(one, i) == 41);
    ct_tensor *m = ct_randint(0, 5, CT_SHAPE(3, 4), CT_I32, CT_META);
    CT_ASSERT_SHAPE(m, 3, 4);
    ct_scope_end();
}

static void test_randperm(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(77);
    ct_dtype dts[] = {CT_I64, CT_I32, CT_I16, CT_U8, CT_F16, CT_BF16, CT_F32, CT_F64};
    int64_t sizes[] = {1000, 1000, 1000, 256, 2048, 256, 1000, 1000};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        int64_t n = sizes[k];
        ct_tensor *p = ct_randperm(n, dts[k], CT_CPU);
        CT_ASSERT_OK(p);
        assert_int_equal(ct_tensor_dtype(p), dts[k]);
        char *seen = calloc((size_t)n, 1);
        int64_t fixed = 0;
        for (int64_t i = 0; i < n; i++) {
            double v = ct_test_at(p, i);
            assert_true(v >= 0 && v < (double)n && v == floor(v));
            assert_int_equal(seen[(int64_t)v], 0);
            seen[(int64_t)v] = 1;
            fixed += (int64_t)v == i;
        }
        free(seen);
        assert_true(fixed < 10); /* expected 1 fixed point; shuffled, not identity */
    }
    ct_tensor *e = ct_randperm(0, CT_DTYPE_UNDEFINED, CT_CPU);
    CT_ASSERT_SHAPE(e, 0);
    ct_tensor *one = ct_randperm(1, CT_DTYPE_UNDEFINED, CT_CPU);
    assert_true(ct_test_at(one, 0) == 0);
    /* Each position is close to uniform: position 0 over many shuffles of 4. */
    int64_t count[4] = {0};
    for (int r = 0; r < 4000; r++) {
        ct_scope_begin();
        count[(int)ct_test_at(ct_randperm(4, CT_DTYPE_UNDEFINED, CT_CPU), 0)]++;
        ct_scope_end();
    }
    for (int v = 0; v < 4; v++) /* binomial(4000, 1/4): sd 27.4 */
        assert_true(llabs(count[v] - 1000) < 5 * 28);
    ct_tensor *m = ct_randperm(10, CT_DTYPE_UNDEFINED, CT_META);
    CT_ASSERT_SHAPE(m, 10);
    ct_scope_end();
}

static void test_bernoulli(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(3);
    ct_tensor *t = ct_bernoulli_(ct_empty(CT_SHAPE(NS), CT_F32, CT_CPU), 0.3);
    CT_ASSERT_OK(t);
    double m = mean_of(t, NULL);
    assert_true(fabs(m - 0.3) < 5 * sqrt(0.21 / NS));
    for (int64_t i = 0; i < 100; i++) {
        double v = ct_test_at(t, i);
        assert_true(v == 0.0 || v == 1.0);
    }
    ct_tensor *b0 = ct_bernoulli_(ct_empty(CT_SHAPE(100), CT_BOOL, CT_CPU), 0.0);
    ct_tensor *b1 = ct_bernoulli_(ct_empty(CT_SHAPE(100), CT_I64, CT_CPU), 1.0);
    assert_true(mean_of(b0, NULL) == 0.0 && mean_of(b1, NULL) == 1.0);
    /* Tensor of probabilities: 0, 1 and 0.5 in turn, kept in shape and dtype. */
    ct_tensor *probs = ct_empty(CT_SHAPE(3, 30000), CT_F64, CT_CPU);
    double *pp = ct_tensor_data(probs);
    for (int i = 0; i < 90000; i++)
        pp[i] = i % 3 == 0 ? 0.0 : i % 3 == 1 ? 1.0 : 0.5;
    ct_tensor *s = ct_bernoulli(probs);
    CT_ASSERT_SHAPE(s, 3, 30000);
    assert_int_equal(ct_tensor_dtype(s), CT_F64);
    double half = 0;
    for (int i = 0; i < 90000; i++) {
        double v = ct_test_at(s, i);
        if (i % 3 == 0)
            assert_true(v == 0.0);
        else if (i % 3 == 1)
            assert_true(v == 1.0);
        else
            half += v;
    }
    assert_true(fabs(half / 30000 - 0.5) < 5 * sqrt(0.25 / 30000));
    ct_tensor *hp = ct_bernoulli(ct_full(CT_SHAPE(4), ct_scalar_float(1.0), CT_F16, CT_CPU));
    assert_int_equal(ct_tensor_dtype(hp), CT_F16);
    assert_true(mean_of(hp, NULL) == 1.0);
    ct_scope_end();
}

/* In-place samplers on a non-contiguous tensor fill elements in logical order. */
static void test_strided_in_place(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *s = ct_empty_strided(CT_INDEX(3, 4), CT_INDEX(1, 3), 2, CT_F64, CT_CPU);
    assert_false(ct_tensor_is_contiguous(s));
    ct_manual_seed(11);
    int64_t v0 = ct_tensor_version(s);
    ct_tensor *r = ct_uniform_(s, 0.0, 1.0);
    assert_ptr_equal(r, s);
    assert_true(ct_tensor_version(s) > v0);
    ct_manual_seed(11);
    ct_tensor *c = ct_rand(CT_SHAPE(3, 4), CT_F64, CT_CPU);
    for (int i = 0; i < 12; i++)
        assert_true(ct_test_at(s, i) == ct_test_at(c, i));
    ct_manual_seed(12);
    ct_normal_(s, 0, 1);
    ct_manual_seed(12);
    ct_tensor *n = ct_randn(CT_SHAPE(3, 4), CT_F64, CT_CPU);
    for (int i = 0; i < 12; i++)
        assert_true(ct_test_at(s, i) == ct_test_at(n, i));
    ct_scope_end();
}

static void test_like_and_ownership(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_scope_begin();
    ct_tensor *base = ct_zeros(CT_SHAPE(2, 3), CT_F64, CT_CPU);
    ct_tensor *a = ct_rand_like(base, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(a, 2, 3);
    assert_int_equal(ct_tensor_dtype(a), CT_F64);
    ct_tensor *b = ct_randn_like(base, CT_F16);
    assert_int_equal(ct_tensor_dtype(b), CT_F16);
    ct_tensor *m = ct_rand_like(ct_zeros(CT_SHAPE(5), CT_F32, CT_META), CT_DTYPE_UNDEFINED);
    assert_true(ct_tensor_device(m).type == CT_DEVICE_META);
    ct_scope_end();
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
    /* Without a scope the caller owns exactly one reference of each result. */
    ct_tensor *r = ct_rand(CT_SHAPE(8), CT_F32, CT_CPU);
    ct_tensor *p = ct_randperm(8, CT_DTYPE_UNDEFINED, CT_CPU);
    ct_tensor *i = ct_randint(0, 3, CT_SHAPE(8), CT_DTYPE_UNDEFINED, CT_CPU);
    ct_tensor *bb = ct_bernoulli(r);
    ct_release(r);
    ct_release(p);
    ct_release(i);
    ct_release(bb);
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
}

static void *draw_many(void *arg) {
    (void)arg;
    for (int k = 0; k < 50; k++) {
        ct_scope_begin();
        ct_rand(CT_SHAPE(100), CT_F32, CT_CPU); /* 25 counters each */
        ct_scope_end();
    }
    return NULL;
}

static void test_concurrent_reservations(void **state) {
    (void)state;
    ct_manual_seed(1);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, draw_many, NULL), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_true(gen_offset() == 4 * 50 * 25);
}

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *f = ct_empty(CT_SHAPE(3), CT_F32, CT_CPU);
    ct_tensor *l = ct_empty(CT_SHAPE(3), CT_I64, CT_CPU);
    CT_ASSERT_ERR(ct_rand(CT_SHAPE(3), CT_I64, CT_CPU) != NULL, CT_ERROR_TYPE,
                  "\"check_uniform_bounds\" not implemented for 'Long'");
    CT_ASSERT_ERR(ct_rand(CT_SHAPE(3), CT_BOOL, CT_CPU) != NULL, CT_ERROR_TYPE, "for 'Bool'");
    CT_ASSERT_ERR(ct_rand(CT_SHAPE(-3), CT_F32, CT_CPU) != NULL, CT_ERROR_VALUE, "negative dimension");
    CT_ASSERT_ERR(ct_rand(CT_SHAPE(3), (ct_dtype)50, CT_CPU) != NULL, CT_ERROR_TYPE, "dtype");
    CT_ASSERT_ERR(ct_rand(CT_SHAPE(3), CT_F32, CT_CUDA(ct_cuda_device_count())) != NULL, CT_ERROR_DEVICE, "CUDA");
    CT_ASSERT_ERR(ct_randn(CT_SHAPE(3), CT_I32, CT_CPU) != NULL, CT_ERROR_TYPE,
                  "\"normal_kernel_cpu\" not implemented for 'Int'");
    CT_ASSERT_ERR(ct_randn(NULL, 2, CT_F32, CT_CPU) != NULL, CT_ERROR_NULL_ARGUMENT, "shape");
    CT_ASSERT_ERR(ct_randint(5, 5, CT_SHAPE(3), CT_DTYPE_UNDEFINED, CT_CPU) != NULL, CT_ERROR_VALUE,
                  "random_ expects 'from' to be less than 'to', but got from=5 >= to=5");
    CT_ASSERT_ERR(ct_randint(0, 300, CT_SHAPE(3), CT_U8, CT_CPU) != NULL, CT_ERROR_VALUE,
                  "to - 1 is out of bounds for uint8");
    CT_ASSERT_ERR(ct_randint(-1, 3, CT_SHAPE(3), CT_U8, CT_CPU) != NULL, CT_ERROR_VALUE,
                  "from is out of bounds for uint8");
    CT_ASSERT_ERR(ct_randint(0, 3, CT_SHAPE(3), CT_BOOL, CT_CPU) != NULL, CT_ERROR_VALUE, "out of bounds for bool");
    CT_ASSERT_ERR(ct_randint(0, 1 << 25, CT_SHAPE(3), CT_F32, CT_CPU) != NULL, CT_ERROR_VALUE, "out of bounds");
    CT_ASSERT_ERR(ct_randint(0, 3, CT_SHAPE(3), (ct_dtype)-7, CT_CPU) != NULL, CT_ERROR_TYPE, "dtype");
    CT_ASSERT_ERR(ct_randint(0, 3, CT_SHAPE(-1), CT_I64, CT_CPU) != NULL, CT_ERROR_VALUE, "negative dimension");
    CT_ASSERT_ERR(ct_randperm(-1, CT_DTYPE_UNDEFINED, CT_CPU) != NULL, CT_ERROR_VALUE,
                  "Trying to create tensor with negative dimension -1: [-1]");
    CT_ASSERT_ERR(ct_randperm(3, CT_BOOL, CT_CPU) != NULL, CT_ERROR_TYPE, "\"randperm\" not implemented for 'Bool'");
    CT_ASSERT_ERR(ct_randperm(3000, CT_F16, CT_CPU) != NULL, CT_ERROR_VALUE, "n cannot be greater than 2049 for Half");
    CT_ASSERT_ERR(ct_randperm(300, CT_I8, CT_CPU) != NULL, CT_ERROR_VALUE, "n cannot be greater than 128 for Char");
    CT_ASSERT_ERR(ct_randperm(3, (ct_dtype)99, CT_CPU) != NULL, CT_ERROR_TYPE, "dtype");
    CT_ASSERT_ERR(ct_randperm(3, CT_I64, CT_CUDA(ct_cuda_device_count())) != NULL, CT_ERROR_DEVICE, "CUDA");
    CT_ASSERT_ERR(ct_uniform_(f, 2, 1) != NULL, CT_ERROR_VALUE,
                  "uniform_ expects to return a [from, to) range, but found from=2 > to=1");
    CT_ASSERT_ERR(ct_uniform_(f, -3e38, 3e38) != NULL, CT_ERROR_VALUE, "to-from <= std::numeric_limits<Float>::max()");
    CT_ASSERT_ERR(ct_uniform_(f, 0, INFINITY) != NULL, CT_ERROR_VALUE, "to is out of bounds for float32");
    CT_ASSERT_ERR(ct_uniform_(f, NAN, 1) != NULL, CT_ERROR_VALUE, "from is out of bounds");
    CT_ASSERT_ERR(ct_uniform_(l, 0, 1) != NULL, CT_ERROR_TYPE, "\"check_uniform_bounds\" not implemented for 'Long'");
    CT_ASSERT_ERR(ct_uniform_(NULL, 0, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "uniform_");
    CT_ASSERT_ERR(ct_normal_(f, 0, -1) != NULL, CT_ERROR_VALUE, "normal expects std >= 0.0, but found std -1");
    CT_ASSERT_ERR(ct_normal_(f, 0, NAN) != NULL, CT_ERROR_VALUE, "normal expects std >= 0.0");
    CT_ASSERT_ERR(ct_normal_(l, 0, 1) != NULL, CT_ERROR_TYPE, "\"normal_kernel_cpu\" not implemented for 'Long'");
    CT_ASSERT_ERR(ct_normal_(NULL, 0, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "normal_");
    CT_ASSERT_ERR(ct_bernoulli_(f, 1.5) != NULL, CT_ERROR_VALUE, "bernoulli_ expects p to be in [0, 1], but got p=1.5");
    CT_ASSERT_ERR(ct_bernoulli_(f, -0.1) != NULL, CT_ERROR_VALUE, "but got p=-0.1");
    CT_ASSERT_ERR(ct_bernoulli_(f, NAN) != NULL, CT_ERROR_VALUE, "expects p to be in [0, 1]");
    CT_ASSERT_ERR(ct_bernoulli_(NULL, 0.5) != NULL, CT_ERROR_NULL_ARGUMENT, "bernoulli_");
    CT_ASSERT_ERR(ct_bernoulli(l) != NULL, CT_ERROR_TYPE, "\"bernoulli_tensor_cpu_p_\" not implemented for 'Long'");
    ct_tensor *badp = ct_full(CT_SHAPE(4), ct_scalar_float(1.5), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_bernoulli(badp) != NULL, CT_ERROR_VALUE, "Expected p_in >= 0 && p_in <= 1");
    ct_tensor *nanp = ct_full(CT_SHAPE(4), ct_scalar_float(NAN), CT_F64, CT_CPU);
    CT_ASSERT_ERR(ct_bernoulli(nanp) != NULL, CT_ERROR_VALUE, "p_in");
    CT_ASSERT_ERR(ct_bernoulli(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "bernoulli");
    CT_ASSERT_ERR(ct_rand_like(NULL, CT_F32) != NULL, CT_ERROR_NULL_ARGUMENT, "rand_like");
    CT_ASSERT_ERR(ct_randn_like(NULL, CT_F32) != NULL, CT_ERROR_NULL_ARGUMENT, "randn_like");
    CT_ASSERT_ERR(ct_rand_like(l, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_TYPE, "for 'Long'");
    CT_ASSERT_ERR(ct_randn_like(f, CT_I16) != NULL, CT_ERROR_TYPE, "for 'Short'");
    /* A failed call consumes no random numbers. */
    uint64_t before = gen_offset();
    CT_ASSERT_ERR(ct_randint(3, 1, CT_SHAPE(3), CT_I64, CT_CPU) != NULL, CT_ERROR_VALUE, "random_");
    assert_true(gen_offset() == before);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_seed),
        cmocka_unit_test(test_philox_kat),
        cmocka_unit_test(test_stream_layout),
        cmocka_unit_test(test_reproducible),
        cmocka_unit_test(test_thread_count_invariance),
        cmocka_unit_test(test_uniform_statistics),
        cmocka_unit_test(test_normal_statistics),
        cmocka_unit_test(test_randint),
        cmocka_unit_test(test_randperm),
        cmocka_unit_test(test_bernoulli),
        cmocka_unit_test(test_strided_in_place),
        cmocka_unit_test(test_like_and_ownership),
        cmocka_unit_test(test_concurrent_reservations),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
