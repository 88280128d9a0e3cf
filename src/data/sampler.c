/* torch.utils.data's samplers (sequential, random, weighted random, batch) and the
 * dataset wrappers Subset, random_split and ConcatDataset. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "data/data_internal.h"

/* ------------------------------------------------------------ random draws */

/* Note [Sampler draws]
 * A sampler keeps no generator state: draw k of epoch e is the 64-bit word (2k mod 4,
 * +1) of Philox block e * 2^40 + k / 2 of its seed, the layout of the loader's shuffle
 * (Note [Loader order and workers]). So an epoch's indices are a function of (seed,
 * epoch) and ct_dataloader_set_epoch replays them; the 2^40 blocks of an epoch bound
 * the draws an epoch may take, and an epoch below 2^23 keeps the counters apart. */
typedef struct draws {
    uint64_t seed, base, cur;
    uint32_t words[4];
} draws;

static void draws_init(draws *d, uint64_t seed, int64_t epoch) {
    d->seed = seed;
    d->base = (uint64_t)epoch << 40;
    d->cur = UINT64_MAX;
}

static uint64_t draw(draws *d, uint64_t k) {
    uint64_t block = d->base + k / 2;
    if (block != d->cur) {
        ct_philox4x32(d->seed, block, d->words);
        d->cur = block;
    }
    int w = (int)(k % 2) * 2;
    return ((uint64_t)d->words[w + 1] << 32) | d->words[w];
}

/* A uniform double in [0, 1) from 53 bits of a draw. */
static double draw_unit(draws *d, uint64_t k) {
    return (double)(draw(d, k) >> 11) * 0x1.0p-53;
}

/* Fisher-Yates over out[0..n) = 0..n-1 with draws k0, k0 + 1, ...; returns the next k. */
static uint64_t permute(draws *d, uint64_t k, int64_t *out, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        out[i] = i;
    for (int64_t i = n - 1; i > 0; i--, k++) {
        int64_t j = (int64_t)(draw(d, k) % (uint64_t)(i + 1));
        int64_t t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
    return k;
}

/* ------------------------------------------------------------ samplers */

typedef enum { SAMPLER_SEQUENTIAL, SAMPLER_RANDOM, SAMPLER_WEIGHTED } sampler_kind;

struct ct_sampler {
    sampler_kind kind;
    int64_t n;           /* indices are in [0, n) */
    int64_t num_samples; /* indices per epoch */
    bool replacement;
    uint64_t seed;
    double *cdf; /* weighted: running sums of the weights */
    double *weights;
};

struct ct_batch_sampler {
    const ct_sampler *sampler;
    int64_t batch_size;
    bool drop_last;
};

#define MAX_SAMPLES ((int64_t)1 << 38)

static ct_sampler *sampler_alloc(const char *op, sampler_kind kind, int64_t n, int64_t num_samples) {
    if (n < 0) {
        ct_error(CT_ERROR_VALUE, op, "a sampler needs a number of samples >= 0, got %lld", (long long)n);
        return NULL;
    }
    if (num_samples > MAX_SAMPLES) {
        ct_error(CT_ERROR_VALUE, op, "num_samples=%lld is more than a sampler draws per epoch (2^38)",
                 (long long)num_samples);
        return NULL;
    }
    ct_sampler *s = ct_xcalloc(op, 1, sizeof *s);
    if (!s)
        return NULL;
    s->kind = kind;
    s->n = n;
    s->num_samples = num_samples;
    return s;
}

ct_sampler *ct_sequential_sampler_new(int64_t n) {
    return sampler_alloc("SequentialSampler", SAMPLER_SEQUENTIAL, n, n);
}

ct_sampler *ct_random_sampler_new(int64_t n, bool replacement, int64_t num_samples, uint64_t seed) {
    static const char *op = "RandomSampler";
    if (num_samples <= 0)
        num_samples = n;
    if (n > 0 && num_samples <= 0) {
        ct_error(CT_ERROR_VALUE, op, "num_samples should be a positive integer value, but got num_samples=%lld",
                 (long long)num_samples);
        return NULL;
    }
    ct_sampler *s = sampler_alloc(op, SAMPLER_RANDOM, n, num_samples);
    if (!s)
        return NULL;
    s->replacement = replacement;
    s->seed = seed;
    if (n == 0 && num_samples > 0) {
        ct_sampler_free(s);
        ct_error(CT_ERROR_VALUE, op, "cannot draw %lld samples from 0 samples",
                 (long long)num_samples);
        return NULL;
    }
    return s;
}

ct_sampler *ct_weighted_random_sampler_new(const double *weights, int64_t n, int64_t num_samples, bool replacement,
                                           uint64_t seed) {
    static const char *op = "WeightedRandomSampler";
    if (!weights) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "weights is NULL");
        return NULL;
    }
    if (num_samples <= 0) {
        ct_error(CT_ERROR_VALUE, op, "num_samples should be a positive integer value, but got num_samples=%lld",
                 (long long)num_samples);
        return NULL;
    }
    if (n < 1) {
        ct_error(CT_ERROR_VALUE, op, "weights must hold at least one category, got %lld", (long long)n);
        return NULL;
    }
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!(weights[i] >= 0) || isinf(weights[i])) {
            ct_error(CT_ERROR_RUNTIME, op, "probability tensor contains either `inf`, `nan` or element < 0");
            return NULL;
        }
        total += weights[i];
    }
    if (!(total > 0)) {
        ct_error(CT_ERROR_RUNTIME, op, "invalid multinomial distribution (sum of probabilities <= 0)");
        return NULL;
    }
    if (!replacement && num_samples > n) {
        ct_error(CT_ERROR_RUNTIME, op, "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
        return NULL;
    }
    ct_sampler *s = sampler_alloc(op, SAMPLER_WEIGHTED, n, num_samples);
    if (!s)
        return NULL;
    s->replacement = replacement;
    s->seed = seed;
    s->cdf = ct_xcalloc(op, (size_t)n, sizeof(double));
    s->weights = ct_xcalloc(op, (size_t)n, sizeof(double));
    if (!s->cdf || !s->weights) {
        ct_sampler_free(s);
        return NULL;
    }
    double acc = 0;
    for (int64_t i = 0; i < n; i++) {
        s->weights[i] = weights[i];
        acc += weights[i];
        s->cdf[i] = acc;
    }
    return s;
}

void ct_sampler_free(ct_sampler *s) {
    if (!s)
        return;
    free(s->cdf);
    free(s->weights);
    free(s);
}

int64_t ct_sampler_len(const ct_sampler *s) {
    return s ? s->num_samples : -1;
}

int64_t ct_data_sampler_range(const ct_sampler *s) {
    return s->n;
}

typedef struct keyed {
    double key;
    int64_t index;
} keyed;

static int keyed_desc(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->key != y->key)
        return x->key > y->key ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

ct_status ct_sampler_indices(const ct_sampler *s, int64_t epoch, int64_t *out) {
    static const char *op = "sampler";
    if (!s || !out)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", !s ? "sampler" : "out");
    if (epoch < 0 || epoch >= ((int64_t)1 << 23))
        return ct_error(CT_ERROR_VALUE, op, "epoch must be in [0, 2^23), got %lld", (long long)epoch);
    draws d;
    draws_init(&d, s->seed, epoch);
    const int64_t n = s->n, m = s->num_samples;
    switch (s->kind) {
    case SAMPLER_SEQUENTIAL:
        for (int64_t i = 0; i < m; i++)
            out[i] = i;
        return CT_OK;
    case SAMPLER_RANDOM:
        if (s->replacement) {
            for (int64_t i = 0; i < m; i++)
                out[i] = (int64_t)(draw(&d, (uint64_t)i) % (uint64_t)n);
            return CT_OK;
        }
        {
            /* whole permutations of n, then the front of one more (torch's order) */
            uint64_t k = 0;
            int64_t done = 0;
            while (m - done >= n && n > 0) {
                k = permute(&d, k, out + done, n);
                done += n;
            }
            if (done < m) {
                int64_t *tmp = ct_xcalloc(op, (size_t)n, sizeof(int64_t));
                if (!tmp)
                    return CT_ERROR_OUT_OF_MEMORY;
                permute(&d, k, tmp, n);
                memcpy(out + done, tmp, sizeof(int64_t) * (size_t)(m - done));
                free(tmp);
            }
            return CT_OK;
        }
    case SAMPLER_WEIGHTED:
        if (s->replacement) {
            /* inverse CDF: the first i with cdf[i] > u * total, u in [0, 1); a zero weight
             * never wins, since its cdf equals the one before it */
            const double total = s->cdf[n - 1];
            for (int64_t i = 0; i < m; i++) {
                double u = draw_unit(&d, (uint64_t)i) * total;
                int64_t lo = 0, hi = n - 1;
                while (lo < hi) {
                    int64_t mid = lo + (hi - lo) / 2;
                    if (s->cdf[mid] > u)
                        hi = mid;
                    else
                        lo = mid + 1;
                }
                while (lo > 0 && s->weights[lo] == 0) /* u rounded up to the total */
                    lo--;
                out[i] = lo;
            }
            return CT_OK;
        }
        {
            /* Efraimidis-Spirakis: key log(u) / w with u in (0, 1], the num_samples
             * largest keys; zero weights get -inf and come last, by index */
            keyed *ks = ct_xcalloc(op, (size_t)n, sizeof(keyed));
            if (!ks)
                return CT_ERROR_OUT_OF_MEMORY;
            for (int64_t i = 0; i < n; i++) {
                double u = (double)((draw(&d, (uint64_t)i) >> 11) + 1) * 0x1.0p-53;
                ks[i].key = s->weights[i] > 0 ? log(u) / s->weights[i] : -INFINITY;
                ks[i].index = i;
            }
            qsort(ks, (size_t)n, sizeof *ks, keyed_desc);
            for (int64_t i = 0; i < m; i++)
                out[i] = ks[i].index;
            free(ks);
            return CT_OK;
        }
    }
    return ct_error(CT_ERROR_RUNTIME, op, "unknown sampler");
}

ct_batch_sampler *ct_batch_sampler_new(const ct_sampler *sampler, int64_t batch_size, bool drop_last) {
    static const char *op = "BatchSampler";
    if (!sampler) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "sampler is NULL");
        return NULL;
    }
    if (batch_size < 1) {
        ct_error(CT_ERROR_VALUE, op, "batch_size should be a positive integer value, but got batch_size=%lld",
                 (long long)batch_size);
        return NULL;
    }
    ct_batch_sampler *bs = ct_xcalloc(op, 1, sizeof *bs);
    if (!bs)
        return NULL;
    bs->sampler = sampler;
    bs->batch_size = batch_size;
    bs->drop_last = drop_last;
    return bs;
}

void ct_batch_sampler_free(ct_batch_sampler *bs) {
    free(bs);
}

int64_t ct_batch_sampler_len(const ct_batch_sampler *bs) {
    if (!bs)
        return -1;
    int64_t m = bs->sampler->num_samples;
    return bs->drop_last ? m / bs->batch_size : (m + bs->batch_size - 1) / bs->batch_size;
}

const ct_sampler *ct_data_batch_sampler_parts(const ct_batch_sampler *bs, int64_t *batch_size, bool *drop_last) {
    *batch_size = bs->batch_size;
    *drop_last = bs->drop_last;
    return bs->sampler;
}

/* ------------------------------------------------------------ Subset */

typedef struct subset {
    ct_dataset *ds;
    int64_t *indices;
} subset;

static ct_status subset_get(void *ctx, int64_t index, ct_tensor **fields) {
    subset *s = ctx;
    return ct_dataset_get(s->ds, s->indices[index], fields);
}

static void subset_free(void *ctx) {
    subset *s = ctx;
    free(s->indices);
    free(s);
}

ct_dataset *ct_subset_new(ct_dataset *ds, const int64_t *indices, int64_t n) {
    static const char *op = "Subset";
    if (!ds || (!indices && n > 0)) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", !ds ? "dataset" : "indices");
        return NULL;
    }
    if (n < 0) {
        ct_error(CT_ERROR_VALUE, op, "a subset needs a number of indices >= 0, got %lld", (long long)n);
        return NULL;
    }
    const int64_t len = ct_dataset_len(ds);
    for (int64_t i = 0; i < n; i++)
        if (indices[i] < 0 || indices[i] >= len) {
            ct_error(CT_ERROR_INDEX, op, "index %lld (entry %lld) is out of range for a dataset of %lld samples",
                     (long long)indices[i], (long long)i, (long long)len);
            return NULL;
        }
    subset *s = ct_xcalloc(op, 1, sizeof *s);
    int64_t *idx = ct_xcalloc(op, (size_t)(n > 0 ? n : 1), sizeof(int64_t));
    if (!s || !idx) {
        free(s);
        free(idx);
        return NULL;
    }
    if (n > 0)
        memcpy(idx, indices, sizeof(int64_t) * (size_t)n);
    s->ds = ds;
    s->indices = idx;
    ct_dataset *out = ct_dataset_new(n, ct_dataset_num_fields(ds), subset_get, s, subset_free);
    if (!out)
        subset_free(s);
    return out;
}

/* ------------------------------------------------------------ random_split */

/* Note [random_split's lengths]
 * As torch: lengths are fractions when every one is in [0, 1] and their sum is within
 * 1e-9 of 1 (math.isclose's default tolerance) and not above it; each subset then gets
 * floor(len * fraction) and the len - sum left over is handed out one sample at a time
 * to subsets 0, 1, 2, ... (round robin). Otherwise the lengths must be whole numbers
 * that sum to len. The permutation is a Philox Fisher-Yates of seed (epoch 0 of a
 * random sampler), not torch's randperm, so the same seed splits differently. */
ct_status ct_random_split(ct_dataset *ds, const double *lengths, int n, uint64_t seed, ct_dataset **out) {
    static const char *op = "random_split";
    if (!ds || !lengths || !out)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", !ds ? "dataset" : !lengths ? "lengths" : "out");
    if (n < 1)
        return ct_error(CT_ERROR_VALUE, op, "random_split needs at least one length, got %d", n);
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    const int64_t len = ct_dataset_len(ds);
    double sum = 0;
    bool all_unit = true;
    for (int i = 0; i < n; i++) {
        if (!isfinite(lengths[i]))
            return ct_error(CT_ERROR_VALUE, op, "length %d is not finite (%g)", i, lengths[i]);
        sum += lengths[i];
        all_unit = all_unit && lengths[i] >= 0 && lengths[i] <= 1;
    }
    int64_t *counts = ct_xcalloc(op, (size_t)n, sizeof(int64_t));
    if (!counts)
        return CT_ERROR_OUT_OF_MEMORY;
    const bool fractions = fabs(sum - 1) <= 1e-9 * fmax(1.0, fabs(sum)) && sum <= 1;
    ct_status st = CT_OK;
    if (fractions) {
        int64_t got = 0;
        for (int i = 0; i < n && !st; i++) {
            if (!(lengths[i] >= 0 && lengths[i] <= 1))
                st = ct_error(CT_ERROR_VALUE, op, "Fraction at index %d is not between 0 and 1", i);
            else
                got += counts[i] = (int64_t)floor((double)len * lengths[i]);
        }
        for (int64_t i = 0; !st && i < len - got; i++)
            counts[i % n]++;
    } else {
        (void)all_unit;
        for (int i = 0; i < n && !st; i++) {
            if (lengths[i] < 0 || lengths[i] != floor(lengths[i]) || lengths[i] > 9e15)
                st = ct_error(CT_ERROR_VALUE, op,
                              "length %d is %g: lengths must be whole numbers >= 0, or fractions that sum to 1", i,
                              lengths[i]);
            else
                counts[i] = (int64_t)lengths[i];
        }
    }
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += counts[i];
    if (!st && total != len)
        st = ct_error(CT_ERROR_VALUE, op, "Sum of input lengths does not equal the length of the input dataset!");
    int64_t *perm = st ? NULL : ct_xcalloc(op, (size_t)(len > 0 ? len : 1), sizeof(int64_t));
    if (!st && !perm)
        st = CT_ERROR_OUT_OF_MEMORY;
    if (!st) {
        draws d;
        draws_init(&d, seed, 0);
        permute(&d, 0, perm, len);
        int64_t at = 0;
        for (int i = 0; i < n && !st; i++) {
            out[i] = ct_subset_new(ds, perm + at, counts[i]);
            if (!out[i])
                st = ct_last_status();
            at += counts[i];
        }
        if (st)
            for (int i = 0; i < n; i++) {
                ct_dataset_free(out[i]);
                out[i] = NULL;
            }
    }
    free(perm);
    free(counts);
    return st;
}

/* ------------------------------------------------------------ ConcatDataset */

typedef struct concat {
    int n;
    ct_dataset **ds;
    int64_t *ends; /* cumulative sizes */
} concat;

static ct_status concat_get(void *ctx, int64_t index, ct_tensor **fields) {
    concat *c = ctx;
    int lo = 0, hi = c->n - 1; /* the first dataset whose end is past index */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (c->ends[mid] > index)
            hi = mid;
        else
            lo = mid + 1;
    }
    return ct_dataset_get(c->ds[lo], index - (lo ? c->ends[lo - 1] : 0), fields);
}

static void concat_free(void *ctx) {
    concat *c = ctx;
    free(c->ds);
    free(c->ends);
    free(c);
}

ct_dataset *ct_concat_dataset_new(ct_dataset *const *ds, int n) {
    static const char *op = "ConcatDataset";
    if (!ds) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "datasets is NULL");
        return NULL;
    }
    if (n < 1) {
        ct_error(CT_ERROR_VALUE, op, "datasets should not be an empty iterable");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!ds[i]) {
            ct_error(CT_ERROR_NULL_ARGUMENT, op, "dataset %d is NULL", i);
            return NULL;
        }
        if (ct_dataset_num_fields(ds[i]) != ct_dataset_num_fields(ds[0])) {
            ct_error(CT_ERROR_VALUE, op, "dataset %d has %d fields, dataset 0 has %d", i,
                     ct_dataset_num_fields(ds[i]), ct_dataset_num_fields(ds[0]));
            return NULL;
        }
    }
    concat *c = ct_xcalloc(op, 1, sizeof *c);
    ct_dataset **dd = ct_xcalloc(op, (size_t)n, sizeof *dd);
    int64_t *ends = ct_xcalloc(op, (size_t)n, sizeof *ends);
    if (!c || !dd || !ends) {
        free(c);
        free(dd);
        free(ends);
        return NULL;
    }
    int64_t acc = 0;
    for (int i = 0; i < n; i++) {
        dd[i] = ds[i];
        acc += ct_dataset_len(ds[i]);
        ends[i] = acc;
    }
    c->n = n;
    c->ds = dd;
    c->ends = ends;
    ct_dataset *out = ct_dataset_new(acc, ct_dataset_num_fields(ds[0]), concat_get, c, concat_free);
    if (!out)
        concat_free(c);
    return out;
}
