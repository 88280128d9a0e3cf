/* The CPU thread pool (Note [Threads on a busy machine] in src/core/parallel.c): every
 * chunk of a region runs exactly once, nested regions run on their thread, two callers
 * at once both finish; and a set of ops that covers every parallel loop (elementwise,
 * reductions over outputs and along long rows, long softmax rows, split GEMMs,
 * convolution forward and backward, pooling, layer_norm, cross_entropy, attention,
 * random fills, copies) gives the same bits with 1, 2 and 3 threads, and with 2 and 3
 * threads while other threads of the process keep the cores busy; a region never runs
 * on more threads than the process may use CPUs, and each pool thread is bound to one
 * of them. Nothing is timed. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/parallel.h"
#include "ctorch/nn.h"
#include "testutil.h"

/* ------------------------------------------------------------------ the pool itself */

typedef struct {
    atomic_int *count;
    int threads;
    atomic_int bad;
} count_job;

static void count_chunk(void *ctx, int64_t c) {
    count_job *j = ctx;
    atomic_fetch_add(&j->count[c], 1);
    if (ct_parallel_thread() < 0 || ct_parallel_thread() >= j->threads || !ct_in_parallel() ||
        ct_get_num_threads() != 1)
        atomic_store(&j->bad, 1);
}

static void check_every_chunk_once(int64_t chunks, int threads) {
    atomic_int *count = calloc((size_t)chunks, sizeof *count);
    assert_non_null(count);
    count_job j = {count, threads, 0};
    ct_parallel_for(chunks, threads, count_chunk, &j);
    for (int64_t c = 0; c < chunks; c++)
        if (atomic_load(&count[c]) != 1)
            fail_msg("chunks %lld threads %d: chunk %lld ran %d times", (long long)chunks, threads, (long long)c,
                     atomic_load(&count[c]));
    assert_int_equal(atomic_load(&j.bad), 0);
    assert_false(ct_in_parallel());
    free(count);
}

static void test_every_chunk_once(void **state) {
    (void)state;
    const int64_t sizes[] = {1, 2, 3, 7, 64, 1000, 65535, 65536, 200001};
    for (int threads = 1; threads <= 4; threads++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            check_every_chunk_once(sizes[i], threads);
}

static void never_called(void *ctx, int64_t c) {
    (void)c;
    atomic_store((atomic_int *)ctx, 1);
}

static void test_empty_regions(void **state) {
    (void)state;
    atomic_int called = 0;
    ct_parallel_for(0, 2, never_called, &called);
    ct_parallel_for(-5, 2, never_called, &called);
    assert_int_equal(atomic_load(&called), 0);
}

typedef struct {
    atomic_int inner_runs, bad;
} nest_job;

static void inner_chunk(void *ctx, int64_t c) {
    (void)c;
    nest_job *j = ctx;
    atomic_fetch_add(&j->inner_runs, 1);
}

/* A region inside a chunk runs every chunk on the thread that met it. */
static void outer_chunk(void *ctx, int64_t c) {
    (void)c;
    nest_job *j = ctx;
    int me = ct_parallel_thread();
    ct_parallel_for(10, 4, inner_chunk, j);
    if (ct_parallel_thread() != me || !ct_in_parallel())
        atomic_store(&j->bad, 1);
}

static void test_nested_regions(void **state) {
    (void)state;
    nest_job j = {0, 0};
    ct_parallel_for(8, 3, outer_chunk, &j);
    assert_int_equal(atomic_load(&j.inner_runs), 80);
    assert_int_equal(atomic_load(&j.bad), 0);
}

static void *second_caller(void *arg) {
    check_every_chunk_once(5000, 3);
    (void)arg;
    return NULL;
}

/* Another thread's region while one runs: it runs alone, and both finish. */
static void test_two_callers(void **state) {
    (void)state;
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&t[i], NULL, second_caller, NULL), 0);
    for (int k = 0; k < 20; k++)
        check_every_chunk_once(3000, 2);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
}

typedef struct {
    atomic_int *count;
    atomic_int bad;
} range_job;

static void count_range(void *ctx, int64_t b, int64_t e) {
    range_job *j = ctx;
    if (b >= e)
        atomic_store(&j->bad, 1);
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add(&j->count[i], 1);
}

/* ct_parallel_range (ctorch/ext.h): every index once, above and below min_work. */
static void test_parallel_range(void **state) {
    (void)state;
    int saved = ct_get_num_threads();
    const int64_t sizes[] = {1, 2, 5, 100, 4097};
    for (int threads = 1; threads <= 3; threads++) {
        ct_set_num_threads(threads);
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            for (int64_t min_work = -1; min_work <= 1000000; min_work += 1000001) {
                int64_t n = sizes[i];
                atomic_int *count = calloc((size_t)n, sizeof *count);
                assert_non_null(count);
                range_job j = {count, 0};
                assert_int_equal(ct_parallel_range(n, n, min_work, count_range, &j), CT_OK);
                for (int64_t k = 0; k < n; k++)
                    assert_int_equal(atomic_load(&count[k]), 1);
                assert_int_equal(atomic_load(&j.bad), 0);
                free(count);
            }
    }
    ct_set_num_threads(saved);
}

static void test_parallel_range_errors(void **state) {
    (void)state;
    range_job j = {NULL, 0};
    CT_ASSERT_ERR(ct_parallel_range(-1, 10, 0, count_range, &j) == CT_OK, CT_ERROR_VALUE,
                  "parallel_range: n must be non-negative, got -1");
    CT_ASSERT_ERR(ct_parallel_range(10, 10, 0, NULL, &j) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "parallel_range: fn must not be NULL");
    /* n == 0 runs nothing and is not an error */
    assert_int_equal(ct_parallel_range(0, 0, 0, count_range, &j), CT_OK);
    assert_int_equal(atomic_load(&j.bad), 0);
}

/* ------------------------------------------------------------------ results of ops */

#define MAX_OUT 40

typedef struct {
    int n;
    ct_tensor *t[MAX_OUT];
} outputs;

static void keep(outputs *o, ct_tensor *t) {
    CT_ASSERT_OK(t);
    assert_true(o->n < MAX_OUT);
    ct_keep(t);
    o->t[o->n++] = t;
}

static ct_tensor *uniform(const int64_t *shape, int nd, uint64_t seed) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    float *v = malloc(sizeof(float) * (size_t)n);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(2 * ct_test_unit(&seed) - 1);
    ct_tensor *t = ct_from_data(v, shape, nd, CT_F32);
    free(v);
    return t;
}

static ct_tensor *leaf(const int64_t *shape, int nd, uint64_t seed) {
    return ct_tensor_set_requires_grad(uniform(shape, nd, seed), true);
}

/* The ops, each above its parallel threshold; every result kept in o. */
static void run_ops(outputs *o) {
    ct_scope_begin();
    o->n = 0;
    /* elementwise and copies */
    ct_tensor *x = uniform(CT_SHAPE(1 << 20), 11), *y = uniform(CT_SHAPE(1 << 20), 12);
    keep(o, ct_add(ct_mul(x, y), x));
    keep(o, ct_gelu(x, 1));
    keep(o, ct_to_dtype(x, CT_F64));
    ct_tensor *m = uniform(CT_SHAPE(700, 900), 13);
    keep(o, ct_contiguous(ct_transpose(m, 0, 1)));
    /* reductions: one long row, rows, columns; a long softmax row */
    keep(o, ct_sum(x, NULL, 0, false, CT_F32));
    const int64_t d0[1] = {0}, d1[1] = {1};
    keep(o, ct_sum(m, d1, 1, false, CT_F32));
    keep(o, ct_sum(m, d0, 1, false, CT_F32));
    keep(o, ct_softmax(uniform(CT_SHAPE(2, 150000), 14), 1, CT_F32));
    /* products of several shapes (Note [GEMM chunks]) */
    keep(o, ct_matmul(uniform(CT_SHAPE(300, 200), 15), uniform(CT_SHAPE(200, 250), 16)));
    keep(o, ct_matmul(uniform(CT_SHAPE(40, 3000), 17), uniform(CT_SHAPE(3000, 60), 18)));
    keep(o, ct_matmul(uniform(CT_SHAPE(64, 257), 19), uniform(CT_SHAPE(257, 1000), 20)));
    keep(o, ct_matmul(uniform(CT_SHAPE(8, 96, 64), 21), uniform(CT_SHAPE(8, 64, 96), 22)));
    /* convolution, forward and backward (weight and bias sums over the batch) */
    ct_tensor *img = uniform(CT_SHAPE(24, 4, 20, 20), 23), *w = uniform(CT_SHAPE(8, 4, 3, 3), 24);
    const int64_t one[2] = {1, 1}, pad[2] = {1, 1};
    ct_tensor *cy = ct_conv2d(img, w, uniform(CT_SHAPE(8), 25), one, pad, one, 1);
    keep(o, cy);
    ct_tensor *gx = NULL, *gw = NULL, *gb = NULL;
    assert_int_equal(ct_conv2d_backward(uniform(CT_SHAPE(24, 8, 20, 20), 26), img, w, one, pad, one, 1, &gx, &gw,
                                        &gb),
                     CT_OK);
    keep(o, gx);
    keep(o, gw);
    keep(o, gb);
    /* max pooling and its gradient */
    const int64_t two[2] = {2, 2};
    ct_tensor *idx = NULL;
    ct_tensor *py = ct_max_pool2d(cy, two, NULL, NULL, NULL, false, &idx);
    keep(o, py);
    keep(o, ct_max_pool2d_backward(uniform(CT_SHAPE(24, 8, 10, 10), 27), cy, idx));
    /* layer_norm forward and backward */
    ct_tensor *lx = leaf(CT_SHAPE(512, 256), 28), *lw = leaf(CT_SHAPE(256), 29), *lb = leaf(CT_SHAPE(256), 30);
    ct_tensor *ly = ct_layer_norm(lx, (const int64_t[]){256}, 1, lw, lb, 1e-5);
    keep(o, ly);
    assert_int_equal(ct_backward(ly, uniform(CT_SHAPE(512, 256), 31), false, false), CT_OK);
    keep(o, ct_tensor_grad(lx));
    keep(o, ct_tensor_grad(lw));
    keep(o, ct_tensor_grad(lb));
    /* cross_entropy forward and backward */
    ct_tensor *logits = leaf(CT_SHAPE(4096, 65), 32);
    ct_tensor *target = ct_randint(0, 65, CT_SHAPE(4096), CT_I64, CT_CPU);
    ct_tensor *loss = ct_cross_entropy(logits, target, NULL, CT_REDUCTION_MEAN, -100, 0.0);
    keep(o, loss);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    keep(o, ct_tensor_grad(logits));
    /* causal attention forward and backward */
    ct_tensor *q = leaf(CT_SHAPE(4, 4, 128, 32), 33), *k = leaf(CT_SHAPE(4, 4, 128, 32), 34);
    ct_tensor *v = leaf(CT_SHAPE(4, 4, 128, 32), 35);
    ct_tensor *att = ct_scaled_dot_product_attention(q, k, v, NULL, 0.0, true, NULL);
    keep(o, att);
    assert_int_equal(ct_backward(att, uniform(CT_SHAPE(4, 4, 128, 32), 36), false, false), CT_OK);
    keep(o, ct_tensor_grad(q));
    keep(o, ct_tensor_grad(k));
    keep(o, ct_tensor_grad(v));
    /* random fills: a pure function of (seed, offset, index) */
    keep(o, ct_randn(CT_SHAPE(1 << 19), CT_F32, CT_CPU));
    ct_scope_end();
}

static void release_all(outputs *o) {
    for (int i = 0; i < o->n; i++)
        ct_release(o->t[i]);
    o->n = 0;
}

static void expect_same_bits(const outputs *want, const outputs *got, const char *what) {
    assert_int_equal(want->n, got->n);
    for (int i = 0; i < want->n; i++) {
        const ct_tensor *a = want->t[i], *b = got->t[i];
        assert_int_equal(ct_tensor_numel(a), ct_tensor_numel(b));
        assert_int_equal(ct_tensor_dtype(a), ct_tensor_dtype(b));
        size_t bytes = (size_t)ct_tensor_numel(a) * ct_dtype_size(ct_tensor_dtype(a));
        if (memcmp(ct_tensor_data(a), ct_tensor_data(b), bytes) != 0)
            fail_msg("%s: output %d differs from the one-thread result", what, i);
    }
}

static void compute(outputs *o, int threads) {
    ct_set_num_threads(threads);
    ct_manual_seed(1234);
    run_ops(o);
}

static atomic_int spin_stop;

static void *spinner(void *arg) {
    (void)arg;
    volatile unsigned x = 0;
    while (!atomic_load_explicit(&spin_stop, memory_order_relaxed))
        x++;
    return NULL;
}

static void test_same_bits_any_threads(void **state) {
    (void)state;
    int saved = ct_get_num_threads();
    outputs base, got;
    compute(&base, 1);
    for (int threads = 2; threads <= 3; threads++) {
        ct_parallel_stats before, after;
        ct_parallel_get_stats(&before);
        compute(&got, threads);
        ct_parallel_get_stats(&after);
        assert_true(after.regions - before.regions > 20); /* the ops did run as regions */
        expect_same_bits(&base, &got, threads == 2 ? "2 threads" : "3 threads");
        release_all(&got);
    }
    /* again while two other threads keep the cores busy: chunks move between threads
     * and the pool may back off to the caller alone; the bits must not change */
    atomic_store(&spin_stop, 0);
    pthread_t spin[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&spin[i], NULL, spinner, NULL), 0);
    for (int round = 0; round < 2; round++)
        for (int threads = 2; threads <= 3; threads++) {
            compute(&got, threads);
            expect_same_bits(&base, &got, threads == 2 ? "2 threads, busy" : "3 threads, busy");
            release_all(&got);
        }
    atomic_store(&spin_stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(spin[i], NULL);
    release_all(&base);
    ct_set_num_threads(saved);
}

/* ------------------------------------------------------------------ threads and CPUs */

typedef struct {
    atomic_int top; /* the highest thread index a chunk ran on */
    atomic_int team_bad;
    int cpus;
} top_job;

static void top_chunk(void *ctx, int64_t c) {
    (void)c;
    top_job *j = ctx;
    int t = ct_parallel_thread(), m = atomic_load(&j->top);
    while (t > m && !atomic_compare_exchange_weak(&j->top, &m, t))
        ;
    if (ct_parallel_team() > j->cpus)
        atomic_store(&j->team_bad, 1);
    for (volatile int i = 0; i < 20000; i++) /* long enough that every awake worker joins */
        ;
}

/* Runs a region with more threads than CPUs; returns the highest thread index used. */
static int top_thread(int cpus) {
    top_job j = {0, 0, cpus};
    ct_parallel_for(256, cpus + 3, top_chunk, &j);
    assert_int_equal(atomic_load(&j.team_bad), 0);
    return atomic_load(&j.top);
}

/* Note [No more threads than cores]: the count is read again every 100 ms, so each
 * change of the affinity is followed by a wait. */
static void test_no_more_threads_than_cpus(void **state) {
    (void)state;
    cpu_set_t all, one;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    int cpus = CPU_COUNT(&all);
    usleep(150000);
    assert_true(top_thread(cpus) < cpus);
    int first = 0;
    while (!CPU_ISSET(first, &all))
        first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    usleep(150000);
    int top = top_thread(1); /* one CPU: every chunk on the caller */
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    assert_int_equal(top, 0);
    usleep(150000);
    assert_true(top_thread(cpus) < cpus);
}

typedef struct {
    atomic_int bad, worker_chunks;
    int want; /* how many CPUs a worker's mask should hold */
} affinity_job;

static void affinity_chunk(void *ctx, int64_t c) {
    (void)c;
    affinity_job *j = ctx;
    cpu_set_t set;
    int t = ct_parallel_thread();
    if (t > 0)
        atomic_fetch_add(&j->worker_chunks, 1);
    if (sched_getaffinity(0, sizeof set, &set) != 0 || (t > 0 && CPU_COUNT(&set) != j->want))
        atomic_store(&j->bad, 1);
    for (volatile int i = 0; i < 20000; i++)
        ;
}

/* Note [Workers on their own cores]: with as many threads as CPUs each pool thread runs
 * on one CPU and the caller on all of its own; with fewer (where there are more than
 * two CPUs), the workers on all of them again. */
static void test_workers_bound(void **state) {
    (void)state;
    cpu_set_t all, after;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    if (CPU_COUNT(&all) < 2)
        skip();
    affinity_job j = {0, 0, 1};
    for (int r = 0; r < 200 && atomic_load(&j.worker_chunks) == 0; r++) /* until a worker joins */
        ct_parallel_for(256, CPU_COUNT(&all), affinity_chunk, &j);
    assert_true(atomic_load(&j.worker_chunks) > 0);
    assert_int_equal(atomic_load(&j.bad), 0);
    if (CPU_COUNT(&all) > 2) { /* fewer threads than CPUs: the workers take their masks back */
        affinity_job k = {0, 0, CPU_COUNT(&all)};
        for (int r = 0; r < 200 && atomic_load(&k.worker_chunks) == 0; r++)
            ct_parallel_for(256, 2, affinity_chunk, &k);
        assert_true(atomic_load(&k.worker_chunks) > 0);
        assert_int_equal(atomic_load(&k.bad), 0);
    }
    assert_int_equal(sched_getaffinity(0, sizeof after, &after), 0);
    assert_true(CPU_EQUAL(&all, &after));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workers_bound),
        cmocka_unit_test(test_no_more_threads_than_cpus),
        cmocka_unit_test(test_every_chunk_once), cmocka_unit_test(test_empty_regions),
        cmocka_unit_test(test_nested_regions),   cmocka_unit_test(test_two_callers),
        cmocka_unit_test(test_parallel_range),   cmocka_unit_test(test_parallel_range_errors),
        cmocka_unit_test(test_same_bits_any_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
