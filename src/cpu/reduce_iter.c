/* The CPU's side of the reduction mode of the TensorIterator (the plan is
 * src/meta/reduce_iter.c): the walk over reduced elements and the parallel loop over
 * output elements. */
#include <string.h>

#include "core/parallel.h"
#include "cpu/reduce.h"

/* Elements of work below which a reduction runs on one thread. */
#define CT_REDUCE_GRAIN 32768

/* Merges dim i+1 into dim i where, for every stride array, stepping the outer dim
 * equals running through the whole inner one. */
void ct_reduce_walk(const ct_reduce_iter *it, const char *base, int64_t begin, int64_t end, ct_seg_fn fn,
                    void *ctx) {
    if (begin >= end)
        return;
    int nr = it->nr;
    if (nr == 0) {
        fn(ctx, base, 1, 0);
        return;
    }
    int64_t idx[CT_MAX_DIMS];
    int64_t rem = begin;
    const char *p = base;
    for (int d = nr - 1; d >= 0; d--) {
        idx[d] = rem % it->rshape[d];
        rem /= it->rshape[d];
        p += idx[d] * it->rstride[d];
    }
    int64_t inner = it->rshape[nr - 1], is = it->rstride[nr - 1];
    int64_t pos = begin;
    while (pos < end) {
        int64_t n = inner - idx[nr - 1];
        if (n > end - pos)
            n = end - pos;
        fn(ctx, p, n, is);
        pos += n;
        if (pos >= end)
            break;
        p -= idx[nr - 1] * is;
        idx[nr - 1] = 0;
        for (int d = nr - 2; d >= 0; d--) {
            p += it->rstride[d];
            if (++idx[d] < it->rshape[d])
                break;
            p -= it->rshape[d] * it->rstride[d];
            idx[d] = 0;
        }
    }
}

/* Output elements [begin, end) in row-major order of the kept dims. */
static void run_outputs(const ct_reduce_iter *it, ct_reduce_fn fn, const void *params, int64_t begin, int64_t end) {
    int nk = it->nk, nout = it->nout;
    int64_t idx[CT_MAX_DIMS];
    int64_t rem = begin;
    const char *pin = it->in;
    char *pout[2] = {it->out[0], nout > 1 ? it->out[1] : NULL};
    for (int d = nk - 1; d >= 0; d--) {
        idx[d] = rem % it->kshape[d];
        rem /= it->kshape[d];
        pin += idx[d] * it->kin[d];
        for (int k = 0; k < nout; k++)
            if (pout[k])
                pout[k] += idx[d] * it->kout[k][d];
    }
    for (int64_t i = begin; i < end; i++) {
        fn(it, pin, pout, params);
        for (int d = nk - 1; d >= 0; d--) {
            pin += it->kin[d];
            for (int k = 0; k < nout; k++)
                if (pout[k])
                    pout[k] += it->kout[k][d];
            if (++idx[d] < it->kshape[d])
                break;
            pin -= it->kshape[d] * it->kin[d];
            for (int k = 0; k < nout; k++)
                if (pout[k])
                    pout[k] -= it->kshape[d] * it->kout[k][d];
            idx[d] = 0;
        }
    }
}

typedef struct {
    const ct_reduce_iter *it;
    ct_reduce_fn fn;
    const void *params;
    int64_t chunks;
} reduce_job;

static void reduce_chunk(void *ctx, int64_t c) {
    const reduce_job *j = ctx;
    int64_t n = j->it->out_numel;
    run_outputs(j->it, j->fn, j->params, n * c / j->chunks, n * (c + 1) / j->chunks);
}

void ct_reduce_run(const ct_reduce_iter *it, ct_reduce_fn fn, const void *params) {
    if (it->out_numel == 0)
        return;
    int nth = ct_get_num_threads();
    int64_t work = it->out_numel * (it->red_numel > 0 ? it->red_numel : 1);
    /* Few outputs: leave the threads to the row function, which splits long rows.
     * Each output is reduced by one chunk, so the split does not change results. */
    if (nth > 1 && it->out_numel >= nth && work >= CT_REDUCE_GRAIN) {
        int64_t chunks = CT_CHUNKS_PER_THREAD * nth;
        if (chunks > it->out_numel)
            chunks = it->out_numel;
        reduce_job j = {it, fn, params, chunks};
        ct_parallel_for(chunks, nth, reduce_chunk, &j);
        return;
    }
    run_outputs(it, fn, params, 0, it->out_numel);
}
