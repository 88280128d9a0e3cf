/* Datasets and the DataLoader: sampling, batching, collation, worker threads. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "data/data_internal.h"

/* ------------------------------------------------------------ datasets */

struct ct_dataset {
    int64_t length;
    int nfields;
    ct_dataset_get_fn get;
    void *ctx;
    void (*free_ctx)(void *);
    /* TensorDataset */
    ct_tensor **tensors;
};

ct_dataset *ct_dataset_new(int64_t length, int nfields, ct_dataset_get_fn get, void *ctx,
                           void (*free_ctx)(void *ctx)) {
    static const char *op = "dataset";
    if (!get) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "get is NULL");
        return NULL;
    }
    if (length < 0 || nfields < 1) {
        ct_error(CT_ERROR_VALUE, op, "a dataset needs length >= 0 and nfields >= 1, got %lld and %d",
                 (long long)length, nfields);
        return NULL;
    }
    ct_dataset *ds = ct_xcalloc(op, 1, sizeof *ds);
    if (!ds)
        return NULL;
    ds->length = length;
    ds->nfields = nfields;
    ds->get = get;
    ds->ctx = ctx;
    ds->free_ctx = free_ctx;
    return ds;
}

static ct_status tensor_dataset_get(void *ctx, int64_t index, ct_tensor **fields) {
    ct_dataset *ds = ctx;
    for (int f = 0; f < ds->nfields; f++) {
        fields[f] = ct_select(ds->tensors[f], 0, index);
        if (!fields[f])
            return ct_last_status();
    }
    return CT_OK;
}

ct_dataset *ct_tensor_dataset_new(ct_tensor *const *tensors, int n) {
    static const char *op = "TensorDataset";
    if (!tensors) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "tensors is NULL");
        return NULL;
    }
    if (n < 1) {
        ct_error(CT_ERROR_VALUE, op, "at least one tensor required");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!tensors[i]) {
            ct_error(CT_ERROR_NULL_ARGUMENT, op, "tensor %d is NULL", i);
            return NULL;
        }
        if (ct_tensor_dim(tensors[i]) < 1) {
            ct_error(CT_ERROR_VALUE, op, "tensor %d is 0-d; each tensor needs a first dimension to index", i);
            return NULL;
        }
        if (ct_tensor_size(tensors[i], 0) != ct_tensor_size(tensors[0], 0)) {
            ct_error(CT_ERROR_VALUE, op, "Size mismatch between tensors: %lld (tensor 0) and %lld (tensor %d)",
                     (long long)ct_tensor_size(tensors[0], 0), (long long)ct_tensor_size(tensors[i], 0), i);
            return NULL;
        }
    }
    ct_dataset *ds = ct_xcalloc(op, 1, sizeof *ds);
    ct_tensor **ts = ct_xcalloc(op, (size_t)n, sizeof *ts);
    if (!ds || !ts) {
        free(ds);
        free(ts);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        ts[i] = ct_retain(tensors[i]);
    ds->tensors = ts;
    ds->length = ct_tensor_size(tensors[0], 0);
    ds->nfields = n;
    ds->get = tensor_dataset_get;
    ds->ctx = ds;
    return ds;
}

void ct_dataset_free(ct_dataset *ds) {
    if (!ds)
        return;
    if (ds->free_ctx)
        ds->free_ctx(ds->ctx);
    if (ds->tensors) {
        for (int i = 0; i < ds->nfields; i++)
            ct_release(ds->tensors[i]);
        free(ds->tensors);
    }
    free(ds);
}

int64_t ct_dataset_len(const ct_dataset *ds) {
    return ds ? ds->length : -1;
}
int ct_dataset_num_fields(const ct_dataset *ds) {
    return ds ? ds->nfields : -1;
}

ct_status ct_dataset_get(const ct_dataset *ds, int64_t index, ct_tensor **fields) {
    static const char *op = "dataset.get";
    if (!ds || !fields)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", !ds ? "dataset" : "fields");
    if (index < 0 || index >= ds->length)
        return ct_error(CT_ERROR_INDEX, op, "index %lld is out of range for a dataset of %lld samples",
                        (long long)index, (long long)ds->length);
    for (int f = 0; f < ds->nfields; f++)
        fields[f] = NULL;
    ct_status st = ds->get(ds->ctx, index, fields);
    for (int f = 0; !st && f < ds->nfields; f++)
        if (!fields[f])
            st = ct_error(CT_ERROR_RUNTIME, op, "the dataset's get left field %d of sample %lld empty", f,
                          (long long)index);
    if (st && ct_last_status() == CT_OK)
        ct_error(st, op, "the dataset's get failed on sample %lld", (long long)index);
    return st;
}

/* ------------------------------------------------------------ collation */

/* torch.stack of samples[b * nfields + f] over b, for each field f. */
static ct_status default_collate(void *ctx, ct_tensor *const *samples, int64_t batch, int nfields, ct_tensor **out) {
    (void)ctx;
    static const char *op = "collate";
    for (int f = 0; f < nfields; f++) {
        const ct_tensor *s0 = samples[f];
        const int nd = ct_tensor_dim(s0);
        const int64_t *shape0 = ct_tensor_shape(s0);
        const ct_dtype dt = ct_tensor_dtype(s0);
        if (nd + 1 > CT_MAX_DIMS)
            return ct_error(CT_ERROR_VALUE, op, "samples of %d dimensions cannot be stacked", nd);
        for (int64_t b = 1; b < batch; b++) {
            const ct_tensor *s = samples[b * nfields + f];
            if (ct_tensor_dim(s) != nd || memcmp(ct_tensor_shape(s), shape0, sizeof(int64_t) * (size_t)nd) != 0) {
                char x[96], y[96];
                return ct_error(CT_ERROR_VALUE, op,
                                "stack expects each tensor to be equal size, but got %s at entry 0 and %s at entry "
                                "%lld (field %d)",
                                ct_shape_str(shape0, nd, x, sizeof x),
                                ct_shape_str(ct_tensor_shape(s), ct_tensor_dim(s), y, sizeof y), (long long)b, f);
            }
            if (ct_tensor_dtype(s) != dt)
                return ct_error(CT_ERROR_TYPE, op, "samples of field %d have dtypes %s and %s", f, ct_dtype_name(dt),
                                ct_dtype_name(ct_tensor_dtype(s)));
        }
        int64_t shape[CT_MAX_DIMS];
        shape[0] = batch;
        memcpy(shape + 1, shape0, sizeof(int64_t) * (size_t)nd);
        ct_tensor *o = ct_empty(shape, nd + 1, dt, ct_tensor_device(s0));
        if (!o)
            return ct_last_status();
        out[f] = o;
        const size_t bytes = (size_t)ct_tensor_numel(s0) * ct_dtype_size(dt);
        const bool o_cpu = ct_tensor_device(o).type == CT_DEVICE_CPU;
        for (int64_t b = 0; b < batch; b++) {
            const ct_tensor *s = samples[b * nfields + f];
            if (ct_tensor_device(s).type == CT_DEVICE_CPU && o_cpu && ct_tensor_is_contiguous(s)) {
                if (bytes)
                    memcpy((char *)ct_tensor_data(o) + (size_t)b * bytes, ct_tensor_data(s), bytes);
            } else {
                ct_scope_begin();
                ct_tensor *dst = ct_select(o, 0, b);
                ct_tensor *r = dst ? ct_copy_(dst, s) : NULL;
                ct_scope_end();
                if (!r)
                    return ct_last_status();
            }
        }
    }
    return CT_OK;
}

/* ------------------------------------------------------------ loader */

/* Note [Loader order and workers]
 * An epoch's plan is a permutation of the sample indices, fixed by (seed, epoch)
 * through Philox (Fisher-Yates with counter-based draws), cut into batches in order.
 * Workers take batch numbers from a shared counter, at most `capacity` ahead of the
 * batch the consumer waits for, and leave each finished batch in the ring slot of its
 * number; the consumer takes batch k only from slot k % capacity. So the sequence of
 * batches is the plan's whatever the number of workers or their timing. A generation
 * number, bumped at each epoch change, lets a batch of an abandoned epoch that is
 * still being made be discarded when it arrives. */

typedef struct slot {
    int64_t batch; /* which batch it holds; -1 when empty */
    int64_t gen;
    ct_status status;
    char message[512];
    ct_tensor **fields;
} slot;

/* A worker's buffers, allocated by ct_dataloader_new before the thread starts, so that
 * running out of memory there is the constructor's error and never a worker that
 * cannot work (the consumer would wait for it forever). */
typedef struct worker {
    struct ct_dataloader *dl;
    int64_t *idx;
    ct_tensor **fields;
    char message[512];
} worker;

struct ct_dataloader {
    ct_dataset *ds;
    ct_dataloader_options o;
    int64_t nbatches;
    int64_t epoch;
    int64_t *order; /* the current epoch's sample indices, norder of them */
    int64_t norder;
    int64_t batch_size; /* the options' or the batch sampler's */
    const ct_sampler *sampler;
    /* shared with workers, under mu */
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    int64_t gen;
    int64_t next_make;    /* next batch number to hand to a worker */
    int64_t next_consume; /* next batch number next() returns */
    bool stop;
    int capacity;
    slot *slots;
    pthread_t *threads;
    worker *workers;
    int nthreads;
};

static void make_order(ct_dataloader *dl) {
    if (dl->sampler) { /* cannot fail: sampler, epoch and buffer were checked */
        ct_sampler_indices(dl->sampler, dl->epoch, dl->order);
        return;
    }
    const int64_t n = dl->ds->length;
    for (int64_t i = 0; i < n; i++)
        dl->order[i] = i;
    if (!dl->o.shuffle)
        return;
    /* Draw k uses 64 bits: words (2k mod 4, +1) of block k / 2; the epoch picks a
     * disjoint counter range. */
    const uint64_t base = (uint64_t)dl->epoch << 40;
    uint32_t words[4];
    uint64_t cur = UINT64_MAX;
    for (int64_t i = n - 1, k = 0; i > 0; i--, k++) {
        uint64_t block = base + (uint64_t)k / 2;
        if (block != cur) {
            ct_philox4x32(dl->o.seed, block, words);
            cur = block;
        }
        int w = (int)(k % 2) * 2;
        uint64_t r = ((uint64_t)words[w + 1] << 32) | words[w];
        int64_t j = (int64_t)(r % (uint64_t)(i + 1));
        int64_t t = dl->order[i];
        dl->order[i] = dl->order[j];
        dl->order[j] = t;
    }
}

static int64_t batch_count(const ct_dataloader *dl, int64_t b) {
    int64_t start = b * dl->batch_size, left = dl->norder - start;
    return left < dl->batch_size ? left : dl->batch_size;
}

/* Makes batch b from indices idx[0..count): fields are owned references (no scope). */
static ct_status make_batch(ct_dataloader *dl, const int64_t *idx, int64_t count, ct_tensor **fields,
                            char *message, size_t cap) {
    const int nf = dl->ds->nfields;
    ct_status st = CT_OK;
    ct_tensor **samples = ct_xcalloc("dataloader", (size_t)(count * nf), sizeof(ct_tensor *));
    if (!samples)
        st = CT_ERROR_OUT_OF_MEMORY;
    ct_scope_begin();
    for (int64_t b = 0; !st && b < count; b++)
        st = ct_dataset_get(dl->ds, idx[b], samples + b * nf);
    if (!st) {
        for (int f = 0; f < nf; f++)
            fields[f] = NULL;
        ct_collate_fn collate = dl->o.collate ? dl->o.collate : default_collate;
        st = collate(dl->o.collate_ctx, samples, count, nf, fields);
        for (int f = 0; !st && f < nf; f++)
            if (!fields[f])
                st = ct_error(CT_ERROR_RUNTIME, "collate", "collate left batch field %d empty", f);
        if (st && ct_last_status() == CT_OK)
            ct_error(st, "collate", "the collate function failed");
        /* results are scope-owned (made inside this scope): take our own reference */
        for (int f = 0; f < nf; f++) {
            if (!st)
                ct_retain(fields[f]);
            else
                fields[f] = NULL;
        }
    }
    ct_scope_end();
    free(samples);
    if (st && message)
        snprintf(message, cap, "%s", ct_last_error());
    return st;
}

static void slot_clear(slot *s, int nf) {
    if (s->fields)
        for (int f = 0; f < nf; f++) {
            ct_release(s->fields[f]);
            s->fields[f] = NULL;
        }
    s->batch = -1;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    ct_dataloader *dl = w->dl;
    const int nf = dl->ds->nfields;
    int64_t *idx = w->idx;
    ct_tensor **fields = w->fields;
    char *message = w->message;
    pthread_mutex_lock(&dl->mu);
    while (!dl->stop) {
        if (dl->next_make >= dl->nbatches || dl->next_make >= dl->next_consume + dl->capacity) {
            pthread_cond_wait(&dl->work_cv, &dl->mu);
            continue;
        }
        int64_t b = dl->next_make++, gen = dl->gen, count = batch_count(dl, b);
        memcpy(idx, dl->order + b * dl->batch_size, sizeof(int64_t) * (size_t)count);
        pthread_mutex_unlock(&dl->mu);
        message[0] = 0;
        ct_status st = make_batch(dl, idx, count, fields, message, sizeof w->message);
        pthread_mutex_lock(&dl->mu);
        if (gen == dl->gen && !dl->stop) {
            slot *s = &dl->slots[b % dl->capacity];
            s->batch = b;
            s->gen = gen;
            s->status = st;
            snprintf(s->message, sizeof s->message, "%s", message);
            for (int f = 0; f < nf; f++)
                s->fields[f] = fields[f];
            pthread_cond_broadcast(&dl->done_cv);
        } else {
            for (int f = 0; f < nf; f++)
                ct_release(fields[f]);
        }
        for (int f = 0; f < nf; f++)
            fields[f] = NULL;
    }
    pthread_mutex_unlock(&dl->mu);
    return NULL;
}

/* Starts epoch `epoch` (caller holds mu when workers exist). */
static void start_epoch(ct_dataloader *dl, int64_t epoch) {
    dl->epoch = epoch;
    dl->gen++;
    for (int i = 0; i < dl->capacity; i++)
        slot_clear(&dl->slots[i], dl->ds->nfields);
    make_order(dl);
    dl->next_make = 0;
    dl->next_consume = 0;
}

ct_dataloader_options ct_dataloader_defaults(int64_t batch_size) {
    ct_dataloader_options o;
    memset(&o, 0, sizeof o);
    o.batch_size = batch_size;
    o.prefetch_factor = 2;
    return o;
}

void ct_dataloader_free(ct_dataloader *dl) {
    if (!dl)
        return;
    if (dl->nthreads > 0) {
        pthread_mutex_lock(&dl->mu);
        dl->stop = true;
        pthread_cond_broadcast(&dl->work_cv);
        pthread_mutex_unlock(&dl->mu);
        for (int i = 0; i < dl->nthreads; i++)
            pthread_join(dl->threads[i], NULL);
    }
    if (dl->slots) {
        for (int i = 0; i < dl->capacity; i++) {
            slot_clear(&dl->slots[i], dl->ds->nfields);
            free(dl->slots[i].fields);
        }
        free(dl->slots);
    }
    free(dl->threads);
    if (dl->workers)
        for (int i = 0; i < dl->o.num_workers; i++) {
            free(dl->workers[i].idx);
            free(dl->workers[i].fields);
        }
    free(dl->workers);
    free(dl->order);
    pthread_mutex_destroy(&dl->mu);
    pthread_cond_destroy(&dl->work_cv);
    pthread_cond_destroy(&dl->done_cv);
    free(dl);
}

ct_dataloader *ct_dataloader_new(ct_dataset *ds, const ct_dataloader_options *o) {
    static const char *op = "DataLoader";
    if (!ds || !o) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", !ds ? "dataset" : "options");
        return NULL;
    }
    if (o->batch_size < 1) {
        ct_error(CT_ERROR_VALUE, op, "batch_size should be a positive integer value, but got batch_size=%lld",
                 (long long)o->batch_size);
        return NULL;
    }
    /* Note [Samplers in the loader]
     * A sampler replaces the shuffle's permutation as the epoch's list of indices (the
     * loader asks it for epoch e's, so set_epoch and iter_begin replay them); a batch
     * sampler brings its sampler, batch size and drop_last. torch's exclusions apply. */
    const ct_sampler *sampler = o->sampler;
    int64_t batch_size = o->batch_size;
    bool drop_last = o->drop_last;
    if (o->sampler && o->shuffle) {
        ct_error(CT_ERROR_VALUE, op, "sampler option is mutually exclusive with shuffle");
        return NULL;
    }
    if (o->batch_sampler) {
        int64_t bbs;
        bool bdl;
        sampler = ct_data_batch_sampler_parts(o->batch_sampler, &bbs, &bdl);
        if ((o->batch_size != 1 && o->batch_size != bbs) || o->shuffle || o->sampler || o->drop_last) {
            ct_error(CT_ERROR_VALUE, op,
                     "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last");
            return NULL;
        }
        batch_size = bbs;
        drop_last = bdl;
    }
    if (sampler && ct_data_sampler_range(sampler) > ds->length) {
        ct_error(CT_ERROR_INDEX, op, "the sampler draws indices in [0, %lld), beyond the dataset's %lld samples",
                 (long long)ct_data_sampler_range(sampler), (long long)ds->length);
        return NULL;
    }
    if (o->num_workers < 0 || o->num_workers > 256) {
        ct_error(CT_ERROR_VALUE, op, "num_workers option should be between 0 and 256, got %d", o->num_workers);
        return NULL;
    }
    if (o->num_workers > 0 && o->prefetch_factor < 1) {
        ct_error(CT_ERROR_VALUE, op, "prefetch_factor should be >= 1 with workers, got %d", o->prefetch_factor);
        return NULL;
    }
    ct_dataloader *dl = ct_xcalloc(op, 1, sizeof *dl);
    if (!dl)
        return NULL;
    pthread_mutex_init(&dl->mu, NULL);
    pthread_cond_init(&dl->work_cv, NULL);
    pthread_cond_init(&dl->done_cv, NULL);
    dl->ds = ds;
    dl->o = *o;
    dl->sampler = sampler;
    dl->batch_size = batch_size;
    const int64_t n = dl->norder = sampler ? ct_sampler_len(sampler) : ds->length;
    dl->nbatches = drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
    dl->order = ct_xcalloc(op, (size_t)(n > 0 ? n : 1), sizeof(int64_t));
    dl->capacity = o->num_workers > 0 ? o->num_workers * o->prefetch_factor : 1;
    dl->slots = ct_xcalloc(op, (size_t)dl->capacity, sizeof(slot));
    bool ok = dl->order && dl->slots;
    for (int i = 0; ok && i < dl->capacity; i++) {
        dl->slots[i].batch = -1;
        dl->slots[i].fields = ct_xcalloc(op, (size_t)ds->nfields, sizeof(ct_tensor *));
        ok = dl->slots[i].fields != NULL;
    }
    if (!ok) {
        ct_dataloader_free(dl);
        return NULL;
    }
    start_epoch(dl, 0);
    if (o->num_workers > 0) {
        dl->threads = ct_xcalloc(op, (size_t)o->num_workers, sizeof(pthread_t));
        dl->workers = ct_xcalloc(op, (size_t)o->num_workers, sizeof(worker));
        ok = dl->threads && dl->workers;
        for (int i = 0; ok && i < o->num_workers; i++) {
            worker *w = &dl->workers[i];
            w->dl = dl;
            w->idx = ct_xcalloc(op, (size_t)batch_size, sizeof(int64_t));
            w->fields = ct_xcalloc(op, (size_t)ds->nfields, sizeof(ct_tensor *));
            ok = w->idx && w->fields;
        }
        if (!ok) {
            ct_dataloader_free(dl);
            return NULL;
        }
        for (int i = 0; i < o->num_workers; i++) {
            if (pthread_create(&dl->threads[i], NULL, worker_main, &dl->workers[i]) != 0) {
                ct_error(CT_ERROR_RUNTIME, op, "could not start worker thread %d", i);
                ct_dataloader_free(dl);
                return NULL;
            }
            dl->nthreads++;
        }
    }
    return dl;
}

int64_t ct_dataloader_len(const ct_dataloader *dl) {
    return dl ? dl->nbatches : -1;
}
int64_t ct_dataloader_epoch(const ct_dataloader *dl) {
    return dl ? dl->epoch : -1;
}

ct_status ct_dataloader_set_epoch(ct_dataloader *dl, int64_t epoch) {
    if (!dl)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "DataLoader.set_epoch", "loader is NULL");
    if (epoch < 0 || epoch >= ((int64_t)1 << 23))
        return ct_error(CT_ERROR_VALUE, "DataLoader.set_epoch", "epoch must be in [0, 2^23), got %lld",
                        (long long)epoch);
    if (dl->nthreads)
        pthread_mutex_lock(&dl->mu);
    start_epoch(dl, epoch);
    if (dl->nthreads) {
        pthread_cond_broadcast(&dl->work_cv);
        pthread_mutex_unlock(&dl->mu);
    }
    return CT_OK;
}

ct_status ct_dataloader_iter_begin(ct_dataloader *dl) {
    if (!dl)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "DataLoader.iter", "loader is NULL");
    if (dl->nthreads)
        pthread_mutex_lock(&dl->mu);
    if (dl->next_consume > 0) /* a loop broke out of this epoch: replay it from its start */
        start_epoch(dl, dl->epoch);
    if (dl->nthreads) {
        pthread_cond_broadcast(&dl->work_cv);
        pthread_mutex_unlock(&dl->mu);
    }
    return CT_OK;
}

/* Hands owned references to the caller's scope. */
static int deliver(ct_tensor **src, ct_tensor **fields, int nf) {
    bool ok = true;
    for (int f = 0; f < nf; f++) { /* src may be fields */
        ct_tensor *t = src[f];
        src[f] = NULL;
        fields[f] = ct_scope_adopt(t); /* NULL (and t released) when the scope cannot record it */
        ok = ok && fields[f];
    }
    if (ok)
        return 1;
    for (int f = 0; f < nf; f++)
        fields[f] = NULL; /* those adopted belong to the scope */
    return -1;
}

/* End of an epoch: the next one starts now, so workers prefetch it while the caller
 * evaluates. */
static int end_epoch(ct_dataloader *dl, const char *op) {
    if (dl->epoch + 1 >= ((int64_t)1 << 23)) {
        ct_error(CT_ERROR_VALUE, op, "too many epochs (2^23)");
        return -1;
    }
    start_epoch(dl, dl->epoch + 1);
    return 0;
}

int ct_dataloader_next(ct_dataloader *dl, ct_tensor **fields) {
    static const char *op = "DataLoader.next";
    if (!dl || !fields) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", !dl ? "loader" : "fields");
        return -1;
    }
    const int nf = dl->ds->nfields;
    if (dl->nthreads == 0) {
        if (dl->next_consume >= dl->nbatches)
            return end_epoch(dl, op);
        int64_t b = dl->next_consume++;
        ct_tensor **tmp = dl->slots[0].fields;
        if (make_batch(dl, dl->order + b * dl->batch_size, batch_count(dl, b), tmp, NULL, 0))
            return -1;
        return deliver(tmp, fields, nf);
    }
    pthread_mutex_lock(&dl->mu);
    if (dl->next_consume >= dl->nbatches) {
        int r = end_epoch(dl, op);
        pthread_cond_broadcast(&dl->work_cv);
        pthread_mutex_unlock(&dl->mu);
        return r;
    }
    const int64_t b = dl->next_consume;
    slot *s = &dl->slots[b % dl->capacity];
    while (!(s->batch == b && s->gen == dl->gen))
        pthread_cond_wait(&dl->done_cv, &dl->mu);
    dl->next_consume++;
    ct_status st = s->status;
    char message[sizeof s->message];
    memcpy(message, s->message, sizeof message);
    for (int f = 0; f < nf; f++) { /* owned references, handed to the caller below */
        fields[f] = s->fields[f];
        s->fields[f] = NULL;
    }
    s->batch = -1;
    pthread_cond_broadcast(&dl->work_cv); /* a slot is free */
    pthread_mutex_unlock(&dl->mu);
    if (st) {
        for (int f = 0; f < nf; f++) {
            ct_release(fields[f]);
            fields[f] = NULL;
        }
        ct_error(st, op, "batch %lld: %s", (long long)b, message);
        return -1;
    }
    return deliver(fields, fields, nf);
}
