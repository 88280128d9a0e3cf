/* Samplers (sequential, random, weighted, batch) alone and in the loader, a loader's
 * fresh iteration, and Subset, random_split (lengths against PyTorch) and
 * ConcatDataset. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "ctorch/data.h"
#include "ctorch/memory.h"
#include "data/distance_golden.h"

/* A TensorDataset whose sample i is the int64 scalar i + offset. */
static ct_dataset *index_dataset(int64_t n, int64_t offset) {
    ct_scope_begin();
    ct_tensor *t = ct_arange(ct_scalar_int(offset), ct_scalar_int(offset + n), ct_scalar_int(1), CT_I64, CT_CPU);
    ct_dataset *ds = ct_tensor_dataset_new(&t, 1);
    ct_scope_end();
    assert_non_null(ds);
    return ds;
}

static int64_t sample_value(const ct_dataset *ds, int64_t i) {
    ct_tensor *f[1];
    ct_scope_begin();
    assert_int_equal(ct_dataset_get(ds, i, f), CT_OK);
    int64_t v;
    assert_int_equal(ct_item_int64(f[0], &v), CT_OK);
    ct_scope_end();
    return v;
}

/* The values of one batch. */
static int64_t batch_values(ct_tensor *b, int64_t *out) {
    int64_t n = ct_tensor_numel(b);
    memcpy(out, ct_tensor_data(b), sizeof(int64_t) * (size_t)n);
    return n;
}

/* One epoch of a loader, flattened into out; returns the number of values and writes
 * the batch sizes to sizes (when not NULL). */
static int64_t epoch_values(ct_dataloader *dl, int64_t *out, int64_t *sizes, int64_t *nbatches) {
    ct_tensor *b[1];
    int64_t n = 0, k = 0;
    ct_scope_begin();
    assert_int_equal(ct_dataloader_iter_begin(dl), CT_OK);
    int r;
    while ((r = ct_dataloader_next(dl, b)) == 1) {
        int64_t m = batch_values(b[0], out + n);
        if (sizes)
            sizes[k] = m;
        k++;
        n += m;
    }
    assert_int_equal(r, 0);
    ct_scope_end();
    if (nbatches)
        *nbatches = k;
    return n;
}

/* ------------------------------------------------------------------ fresh iteration */

static void check_fresh_iteration(int workers) {
    ct_dataset *ds = index_dataset(10, 0);
    ct_dataloader_options o = ct_dataloader_defaults(3);
    o.shuffle = true;
    o.seed = 7;
    o.num_workers = workers;
    ct_dataloader *dl = ct_dataloader_new(ds, &o);
    assert_non_null(dl);
    int64_t full[10], again[10];
    assert_int_equal(epoch_values(dl, full, NULL, NULL), 10); /* epoch 0, then epoch 1 is current */
    assert_int_equal(ct_dataloader_set_epoch(dl, 0), CT_OK);
    ct_tensor *b[1];
    int64_t first[3], v[3];
    /* the case: take one batch, break, start a new loop */
    ct_scope_begin();
    assert_int_equal(ct_dataloader_iter_begin(dl), CT_OK);
    assert_int_equal(ct_dataloader_next(dl, b), 1);
    batch_values(b[0], first);
    assert_memory_equal(first, full, sizeof first);
    assert_int_equal(ct_dataloader_next(dl, b), 1); /* a second batch, then break */
    ct_scope_end();
    ct_scope_begin();
    assert_int_equal(ct_dataloader_iter_begin(dl), CT_OK);
    assert_int_equal(ct_dataloader_next(dl, b), 1);
    batch_values(b[0], v);
    assert_memory_equal(v, first, sizeof v); /* the first batch again */
    ct_scope_end();
    assert_int_equal(ct_dataloader_epoch(dl), 0);
    /* the whole epoch, from its start, is the same as before */
    assert_int_equal(epoch_values(dl, again, NULL, NULL), 10);
    assert_memory_equal(again, full, sizeof full);
    /* after a completed epoch iter_begin moves on: epoch 1, a different order */
    assert_int_equal(ct_dataloader_epoch(dl), 1);
    assert_int_equal(epoch_values(dl, again, NULL, NULL), 10);
    assert_int_equal(ct_dataloader_epoch(dl), 2);
    assert_true(memcmp(again, full, sizeof full) != 0);
    /* iter_begin twice in a row does nothing more */
    assert_int_equal(ct_dataloader_iter_begin(dl), CT_OK);
    assert_int_equal(ct_dataloader_iter_begin(dl), CT_OK);
    assert_int_equal(ct_dataloader_epoch(dl), 2);
    ct_dataloader_free(dl);
    ct_dataset_free(ds);
}

static void test_fresh_iteration(void **state) {
    (void)state;
    check_fresh_iteration(0);
    check_fresh_iteration(2);
    assert_int_equal(ct_dataloader_iter_begin(NULL), CT_ERROR_NULL_ARGUMENT);
}

/* ------------------------------------------------------------------ samplers */

static void test_sequential_sampler(void **state) {
    (void)state;
    ct_sampler *s = ct_sequential_sampler_new(5);
    assert_int_equal(ct_sampler_len(s), 5);
    int64_t idx[5];
    assert_int_equal(ct_sampler_indices(s, 3, idx), CT_OK);
    for (int i = 0; i < 5; i++)
        assert_int_equal(idx[i], i);
    /* in the loader with shuffle off: the order is the sampler's */
    ct_dataset *ds = index_dataset(5, 100);
    ct_dataloader_options o = ct_dataloader_defaults(2);
    o.sampler = s;
    ct_dataloader *dl = ct_dataloader_new(ds, &o);
    assert_non_null(dl);
    assert_int_equal(ct_dataloader_len(dl), 3);
    int64_t v[5];
    assert_int_equal(epoch_values(dl, v, NULL, NULL), 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(v[i], 100 + i);
    ct_dataloader_free(dl);
    ct_dataset_free(ds);
    ct_sampler_free(s);
}

static bool is_permutation(const int64_t *v, int64_t n) {
    char seen[1024] = {0};
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= n || seen[v[i]])
            return false;
        seen[v[i]] = 1;
    }
    return true;
}

static void test_random_sampler(void **state) {
    (void)state;
    enum { N = 50 };
    int64_t a[N], b[N], c[N];
    ct_sampler *s = ct_random_sampler_new(N, false, 0, 11);
    assert_int_equal(ct_sampler_len(s), N);
    assert_int_equal(ct_sampler_indices(s, 0, a), CT_OK);
    assert_true(is_permutation(a, N));
    assert_int_equal(ct_sampler_indices(s, 0, b), CT_OK);
    assert_memory_equal(a, b, sizeof a); /* (seed, epoch) fixes it */
    assert_int_equal(ct_sampler_indices(s, 1, c), CT_OK);
    assert_true(is_permutation(c, N));
    assert_true(memcmp(a, c, sizeof a) != 0); /* epochs differ */
    ct_sampler *s2 = ct_random_sampler_new(N, false, 0, 12);
    assert_int_equal(ct_sampler_indices(s2, 0, b), CT_OK);
    assert_true(memcmp(a, b, sizeof a) != 0); /* seeds differ */
    ct_sampler_free(s2);
    ct_sampler_free(s);

    /* num_samples beyond n without replacement: whole permutations, then part of one */
    s = ct_random_sampler_new(10, false, 25, 3);
    assert_int_equal(ct_sampler_len(s), 25);
    int64_t m[25];
    assert_int_equal(ct_sampler_indices(s, 0, m), CT_OK);
    assert_true(is_permutation(m, 10));
    assert_true(is_permutation(m + 10, 10));
    char seen[10] = {0};
    for (int i = 20; i < 25; i++) {
        assert_true(m[i] >= 0 && m[i] < 10 && !seen[m[i]]);
        seen[m[i]] = 1;
    }
    ct_sampler_free(s);

    /* with replacement: uniform frequencies over many draws (5 sigma bounds) */
    enum { K = 8, DRAWS = 80000 };
    s = ct_random_sampler_new(K, true, DRAWS, 5);
    int64_t *d = malloc(sizeof(int64_t) * DRAWS);
    assert_int_equal(ct_sampler_indices(s, 0, d), CT_OK);
    int64_t count[K] = {0};
    bool repeat = false;
    for (int i = 0; i < DRAWS; i++) {
        assert_true(d[i] >= 0 && d[i] < K);
        count[d[i]]++;
    }
    for (int i = 1; i < K && !repeat; i++)
        repeat = d[i] == d[0];
    assert_true(repeat);
    const double p = 1.0 / K, sd = sqrt(DRAWS * p * (1 - p));
    for (int i = 0; i < K; i++)
        assert_true(fabs((double)count[i] - DRAWS * p) < 5 * sd);
    free(d);
    ct_sampler_free(s);

    /* in the loader: each epoch is the sampler's for that epoch */
    ct_dataset *ds = index_dataset(N, 0);
    s = ct_random_sampler_new(N, false, 0, 21);
    ct_dataloader_options o = ct_dataloader_defaults(7);
    o.sampler = s;
    o.num_workers = 2;
    ct_dataloader *dl = ct_dataloader_new(ds, &o);
    for (int e = 0; e < 2; e++) {
        assert_int_equal(epoch_values(dl, a, NULL, NULL), N);
        assert_int_equal(ct_sampler_indices(s, e, b), CT_OK);
        assert_memory_equal(a, b, sizeof a);
    }
    ct_dataloader_free(dl);
    ct_dataset_free(ds);
    ct_sampler_free(s);
}

static void test_weighted_sampler(void **state) {
    (void)state;
    const double w[5] = {1, 2, 3, 4, 0};
    enum { DRAWS = 100000 };
    ct_sampler *s = ct_weighted_random_sampler_new(w, 5, DRAWS, true, 9);
    assert_non_null(s);
    assert_int_equal(ct_sampler_len(s), DRAWS);
    int64_t *d = malloc(sizeof(int64_t) * DRAWS), *d2 = malloc(sizeof(int64_t) * DRAWS);
    assert_int_equal(ct_sampler_indices(s, 0, d), CT_OK);
    assert_int_equal(ct_sampler_indices(s, 0, d2), CT_OK);
    assert_memory_equal(d, d2, sizeof(int64_t) * DRAWS);
    int64_t count[5] = {0};
    for (int i = 0; i < DRAWS; i++) {
        assert_true(d[i] >= 0 && d[i] < 5);
        count[d[i]]++;
    }
    assert_int_equal(count[4], 0); /* a zero weight is never drawn */
    for (int i = 0; i < 4; i++) {
        double p = w[i] / 10, sd = sqrt(DRAWS * p * (1 - p));
        assert_true(fabs((double)count[i] - DRAWS * p) < 5 * sd);
    }
    free(d);
    free(d2);
    ct_sampler_free(s);

    /* without replacement: distinct indices, zero weights last, and the first pick
     * follows the weights over many epochs */
    s = ct_weighted_random_sampler_new(w, 5, 4, false, 9);
    int64_t first[5] = {0};
    enum { EPOCHS = 20000 };
    for (int e = 0; e < EPOCHS; e++) {
        int64_t v[4];
        assert_int_equal(ct_sampler_indices(s, e, v), CT_OK);
        for (int i = 0; i < 4; i++) {
            assert_true(v[i] >= 0 && v[i] < 4);
            for (int j = 0; j < i; j++)
                assert_true(v[i] != v[j]);
        }
        first[v[0]]++;
    }
    for (int i = 0; i < 4; i++) {
        double p = w[i] / 10, sd = sqrt(EPOCHS * p * (1 - p));
        assert_true(fabs((double)first[i] - EPOCHS * p) < 5 * sd);
    }
    ct_sampler_free(s);
    /* all five: the zero weight comes last, as torch.multinomial gives it */
    s = ct_weighted_random_sampler_new(w, 5, 5, false, 1);
    int64_t v[5];
    assert_int_equal(ct_sampler_indices(s, 0, v), CT_OK);
    assert_int_equal(v[4], 4);
    ct_sampler_free(s);
}

static void test_batch_sampler(void **state) {
    (void)state;
    ct_sampler *s = ct_sequential_sampler_new(10);
    ct_batch_sampler *bs = ct_batch_sampler_new(s, 4, false);
    assert_int_equal(ct_batch_sampler_len(bs), 3);
    ct_dataset *ds = index_dataset(10, 0);
    ct_dataloader_options o = ct_dataloader_defaults(1);
    o.batch_sampler = bs;
    ct_dataloader *dl = ct_dataloader_new(ds, &o);
    assert_non_null(dl);
    assert_int_equal(ct_dataloader_len(dl), 3);
    int64_t v[10], sizes[4], nb;
    assert_int_equal(epoch_values(dl, v, sizes, &nb), 10);
    assert_int_equal(nb, 3);
    assert_int_equal(sizes[0], 4);
    assert_int_equal(sizes[2], 2);
    ct_dataloader_free(dl);
    ct_batch_sampler_free(bs);

    bs = ct_batch_sampler_new(s, 4, true); /* drop_last */
    assert_int_equal(ct_batch_sampler_len(bs), 2);
    o = ct_dataloader_defaults(4); /* batch_size equal to the batch sampler's is accepted */
    o.batch_sampler = bs;
    dl = ct_dataloader_new(ds, &o);
    assert_non_null(dl);
    assert_int_equal(epoch_values(dl, v, sizes, &nb), 8);
    assert_int_equal(nb, 2);
    ct_dataloader_free(dl);

    /* torch's exclusions */
    o = ct_dataloader_defaults(1);
    o.batch_sampler = bs;
    o.shuffle = true;
    assert_null(ct_dataloader_new(ds, &o));
    assert_non_null(strstr(ct_last_error(), "batch_sampler option is mutually exclusive with batch_size"));
    o.shuffle = false;
    o.drop_last = true;
    assert_null(ct_dataloader_new(ds, &o));
    o.drop_last = false;
    o.batch_size = 3;
    assert_null(ct_dataloader_new(ds, &o));
    o.batch_size = 1;
    o.sampler = s;
    assert_null(ct_dataloader_new(ds, &o));
    o = ct_dataloader_defaults(2);
    o.sampler = s;
    o.shuffle = true;
    assert_null(ct_dataloader_new(ds, &o));
    assert_non_null(strstr(ct_last_error(), "sampler option is mutually exclusive with shuffle"));
    /* a sampler over more indices than the dataset has */
    ct_sampler *big = ct_sequential_sampler_new(11);
    o.shuffle = false;
    o.sampler = big;
    assert_null(ct_dataloader_new(ds, &o));
    assert_int_equal(ct_last_status(), CT_ERROR_INDEX);
    ct_sampler_free(big);
    ct_batch_sampler_free(bs);
    ct_dataset_free(ds);
    ct_sampler_free(s);
}

static void test_sampler_errors(void **state) {
    (void)state;
    const double w[3] = {1, 2, 3};
    assert_null(ct_sequential_sampler_new(-1));
    assert_null(ct_random_sampler_new(0, true, 5, 0));
    assert_null(ct_random_sampler_new(-2, false, 0, 0));
    assert_null(ct_weighted_random_sampler_new(NULL, 3, 2, true, 0));
    assert_int_equal(ct_last_status(), CT_ERROR_NULL_ARGUMENT);
    assert_null(ct_weighted_random_sampler_new(w, 3, 0, true, 0));
    assert_non_null(strstr(ct_last_error(), "num_samples should be a positive integer value, but got num_samples=0"));
    assert_null(ct_weighted_random_sampler_new(w, 3, 4, false, 0));
    assert_non_null(strstr(ct_last_error(), "cannot sample n_sample > prob_dist.size(-1) samples without replacement"));
    const double neg[3] = {1, -1, 2}, inf[2] = {1, INFINITY}, nan_[2] = {NAN, 1}, zero[2] = {0, 0};
    assert_null(ct_weighted_random_sampler_new(neg, 3, 2, true, 0));
    assert_non_null(strstr(ct_last_error(), "probability tensor contains either `inf`, `nan` or element < 0"));
    assert_null(ct_weighted_random_sampler_new(inf, 2, 2, true, 0));
    assert_null(ct_weighted_random_sampler_new(nan_, 2, 2, true, 0));
    assert_null(ct_weighted_random_sampler_new(zero, 2, 2, true, 0));
    assert_non_null(strstr(ct_last_error(), "invalid multinomial distribution (sum of probabilities <= 0)"));
    assert_null(ct_weighted_random_sampler_new(w, 0, 2, true, 0));
    assert_null(ct_batch_sampler_new(NULL, 2, false));
    ct_sampler *s = ct_sequential_sampler_new(3);
    assert_null(ct_batch_sampler_new(s, 0, false));
    assert_non_null(strstr(ct_last_error(), "batch_size should be a positive integer value, but got batch_size=0"));
    int64_t idx[3];
    assert_int_equal(ct_sampler_indices(NULL, 0, idx), CT_ERROR_NULL_ARGUMENT);
    assert_int_equal(ct_sampler_indices(s, 0, NULL), CT_ERROR_NULL_ARGUMENT);
    assert_int_equal(ct_sampler_indices(s, -1, idx), CT_ERROR_VALUE);
    assert_int_equal(ct_sampler_len(NULL), -1);
    assert_int_equal(ct_batch_sampler_len(NULL), -1);
    ct_sampler_free(s);
    ct_sampler_free(NULL);
    ct_batch_sampler_free(NULL);
}

/* ------------------------------------------------------------------ datasets */

static void test_subset_and_concat(void **state) {
    (void)state;
    ct_dataset *a = index_dataset(5, 0), *b = index_dataset(3, 100), *c = index_dataset(0, 0);
    const int64_t idx[4] = {4, 0, 4, 2};
    ct_dataset *sub = ct_subset_new(a, idx, 4);
    assert_non_null(sub);
    assert_int_equal(ct_dataset_len(sub), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(sample_value(sub, i), idx[i]);
    ct_tensor *f[1];
    assert_int_equal(ct_dataset_get(sub, 4, f), CT_ERROR_INDEX);
    const int64_t bad[2] = {1, 5};
    assert_null(ct_subset_new(a, bad, 2));
    assert_int_equal(ct_last_status(), CT_ERROR_INDEX);
    assert_null(ct_subset_new(NULL, idx, 1));
    assert_null(ct_subset_new(a, NULL, 1));
    assert_null(ct_subset_new(a, idx, -1));
    ct_dataset *empty = ct_subset_new(a, NULL, 0);
    assert_non_null(empty);
    assert_int_equal(ct_dataset_len(empty), 0);
    ct_dataset_free(empty);

    ct_dataset *parts[4] = {a, c, sub, b};
    ct_dataset *cat = ct_concat_dataset_new(parts, 4);
    assert_non_null(cat);
    assert_int_equal(ct_dataset_len(cat), 12);
    const int64_t want[12] = {0, 1, 2, 3, 4, 4, 0, 4, 2, 100, 101, 102};
    for (int i = 0; i < 12; i++)
        assert_int_equal(sample_value(cat, i), want[i]);
    assert_int_equal(ct_dataset_get(cat, 12, f), CT_ERROR_INDEX);
    /* a loader over it */
    ct_dataloader_options o = ct_dataloader_defaults(5);
    ct_dataloader *dl = ct_dataloader_new(cat, &o);
    int64_t v[12];
    assert_int_equal(epoch_values(dl, v, NULL, NULL), 12);
    assert_memory_equal(v, want, sizeof want);
    ct_dataloader_free(dl);
    ct_dataset_free(cat);

    assert_null(ct_concat_dataset_new(parts, 0));
    assert_non_null(strstr(ct_last_error(), "datasets should not be an empty iterable"));
    assert_null(ct_concat_dataset_new(NULL, 1));
    ct_dataset *nulls[2] = {a, NULL};
    assert_null(ct_concat_dataset_new(nulls, 2));
    ct_scope_begin();
    ct_tensor *t2[2] = {ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU), ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU)};
    ct_dataset *two = ct_tensor_dataset_new(t2, 2);
    ct_scope_end();
    ct_dataset *mixed[2] = {a, two};
    assert_null(ct_concat_dataset_new(mixed, 2));
    ct_dataset_free(two);
    ct_dataset_free(sub);
    ct_dataset_free(a);
    ct_dataset_free(b);
    ct_dataset_free(c);
}

static void test_random_split(void **state) {
    (void)state;
    /* subset lengths against PyTorch's */
    for (size_t k = 0; k < sizeof split_cases / sizeof split_cases[0]; k++) {
        const split_case *sc = &split_cases[k];
        ct_dataset *ds = index_dataset(sc->len, 0);
        ct_dataset *out[4];
        assert_int_equal(ct_random_split(ds, sc->lengths, sc->n, 42, out), CT_OK);
        char *seen = calloc((size_t)sc->len + 1, 1);
        for (int i = 0; i < sc->n; i++) {
            if (ct_dataset_len(out[i]) != sc->sizes[i])
                fail_msg("case %zu subset %d: %lld samples, PyTorch %lld", k, i,
                         (long long)ct_dataset_len(out[i]), (long long)sc->sizes[i]);
            for (int64_t j = 0; j < sc->sizes[i]; j++) { /* disjoint, covering */
                int64_t v = sample_value(out[i], j);
                assert_true(v >= 0 && v < sc->len && !seen[v]);
                seen[v] = 1;
            }
        }
        free(seen);
        for (int i = 0; i < sc->n; i++)
            ct_dataset_free(out[i]);
        ct_dataset_free(ds);
    }
    /* the seed fixes the split */
    ct_dataset *ds = index_dataset(20, 0);
    const double half[2] = {0.5, 0.5};
    ct_dataset *x[2], *y[2], *z[2];
    assert_int_equal(ct_random_split(ds, half, 2, 1, x), CT_OK);
    assert_int_equal(ct_random_split(ds, half, 2, 1, y), CT_OK);
    assert_int_equal(ct_random_split(ds, half, 2, 2, z), CT_OK);
    bool same = true, differ = false;
    for (int j = 0; j < 10; j++) {
        same = same && sample_value(x[0], j) == sample_value(y[0], j);
        differ = differ || sample_value(x[0], j) != sample_value(z[0], j);
    }
    assert_true(same);
    assert_true(differ);
    for (int i = 0; i < 2; i++) {
        ct_dataset_free(x[i]);
        ct_dataset_free(y[i]);
        ct_dataset_free(z[i]);
    }
    /* errors, with PyTorch's messages */
    ct_dataset *out[3];
    const double l1[2] = {3, 3}, l2[2] = {0.5, 0.6}, l3[2] = {1.5, -0.5}, l4[2] = {2.5, 17.5}, l5[2] = {NAN, 1};
    assert_int_equal(ct_random_split(ds, l1, 2, 0, out), CT_ERROR_VALUE);
    assert_non_null(strstr(ct_last_error(), "Sum of input lengths does not equal the length of the input dataset!"));
    assert_null(out[0]);
    assert_int_equal(ct_random_split(ds, l2, 2, 0, out), CT_ERROR_VALUE);
    assert_int_equal(ct_random_split(ds, l3, 2, 0, out), CT_ERROR_VALUE);
    assert_non_null(strstr(ct_last_error(), "Fraction at index 0 is not between 0 and 1"));
    assert_int_equal(ct_random_split(ds, l4, 2, 0, out), CT_ERROR_VALUE);
    assert_int_equal(ct_random_split(ds, l5, 2, 0, out), CT_ERROR_VALUE);
    assert_int_equal(ct_random_split(ds, l1, 0, 0, out), CT_ERROR_VALUE);
    assert_int_equal(ct_random_split(NULL, l1, 2, 0, out), CT_ERROR_NULL_ARGUMENT);
    assert_int_equal(ct_random_split(ds, NULL, 2, 0, out), CT_ERROR_NULL_ARGUMENT);
    assert_int_equal(ct_random_split(ds, l1, 2, 0, NULL), CT_ERROR_NULL_ARGUMENT);
    ct_dataset_free(ds);
}

/* The documented per-step scope: the batch is taken inside the step's scope, so what
 * a step makes is freed at its end and memory stays flat; with next() outside it the
 * batches pile up in the enclosing scope until it ends. */
static void test_step_scope_memory(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_zeros(CT_SHAPE(64, 1024), CT_F32, CT_CPU);
    ct_dataset *ds = ct_tensor_dataset_new(&x, 1);
    ct_scope_end();
    ct_dataloader_options o = ct_dataloader_defaults(4);
    ct_dataloader *dl = ct_dataloader_new(ds, &o);
    ct_tensor *batch[1];
    int64_t first = -1, steps = 0;
    for (ct_dataloader_iter_begin(dl);;) {
        ct_scope_begin();
        int r = ct_dataloader_next(dl, batch);
        if (r == 1) {
            ct_tensor *y = ct_mul_scalar(batch[0], ct_scalar_float(2)); /* the step's work */
            assert_non_null(y);
        }
        ct_scope_end();
        if (r != 1) {
            assert_int_equal(r, 0);
            break;
        }
        int64_t now = ct_memory_allocated(CT_CPU);
        if (first < 0)
            first = now;
        assert_int_equal(now, first); /* flat */
        steps++;
    }
    assert_int_equal(steps, 16);
    /* the other way round, batches stay alive until the enclosing scope ends */
    ct_scope_begin();
    const int64_t before = ct_memory_allocated(CT_CPU);
    for (ct_dataloader_iter_begin(dl); ct_dataloader_next(dl, batch) == 1;) {
        ct_scope_begin();
        ct_scope_end();
    }
    assert_true(ct_memory_allocated(CT_CPU) >= before + 15 * 4 * 1024 * 4);
    ct_scope_end();
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
    ct_dataloader_free(dl);
    ct_dataset_free(ds);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fresh_iteration),  cmocka_unit_test(test_sequential_sampler),
        cmocka_unit_test(test_random_sampler),   cmocka_unit_test(test_weighted_sampler),
        cmocka_unit_test(test_batch_sampler),    cmocka_unit_test(test_sampler_errors),
        cmocka_unit_test(test_subset_and_concat), cmocka_unit_test(test_random_split),
        cmocka_unit_test(test_step_scope_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
