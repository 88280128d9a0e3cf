/* The CPU side of the TensorIterator: the parallel 1-D loop over a planned iteration
 * space (src/meta/iter.c plans it), and the fast lane's tiny path. */
#include "cpu/iter.h"

#include <string.h>

#include "core/alloc.h"
#include "core/parallel.h"
#include "core/tensor_make.h"

/* Elements below which a loop runs on one thread: spawning costs more than it saves. */
#define CT_GRAIN 32768

/* Runs elements [begin, end) of the flattened (reordered) iteration space. */
static void run_range(const ct_iter *it, ct_cpu_loop loop, const void *params, int64_t begin, int64_t end) {
    int nt = it->ntensors;
    if (it->ndim == 0) {
        char *ptrs[CT_ITER_MAX];
        int64_t zero[CT_ITER_MAX] = {0};
        memcpy(ptrs, it->data, sizeof ptrs);
        loop(ptrs, zero, 1, params);
        return;
    }
    int64_t idx[CT_MAX_DIMS];
    int64_t rem = begin;
    for (int d = 0; d < it->ndim; d++) {
        idx[d] = rem % it->shape[d];
        rem /= it->shape[d];
    }
    char *ptrs[CT_ITER_MAX];
    for (int k = 0; k < nt; k++) {
        ptrs[k] = it->data[k];
        for (int d = 0; d < it->ndim; d++)
            ptrs[k] += idx[d] * it->strides[d][k];
    }
    int64_t pos = begin;
    while (pos < end) {
        int64_t n = it->shape[0] - idx[0];
        if (n > end - pos)
            n = end - pos;
        loop(ptrs, it->strides[0], n, params);
        pos += n;
        if (pos >= end)
            break;
        /* The row is done: back to its start, then carry into the outer dims. */
        for (int k = 0; k < nt; k++)
            ptrs[k] -= idx[0] * it->strides[0][k];
        idx[0] = 0;
        for (int d = 1; d < it->ndim; d++) {
            for (int k = 0; k < nt; k++)
                ptrs[k] += it->strides[d][k];
            if (++idx[d] < it->shape[d])
                break;
            for (int k = 0; k < nt; k++)
                ptrs[k] -= it->shape[d] * it->strides[d][k];
            idx[d] = 0;
        }
    }
}

typedef struct {
    const ct_iter *it;
    ct_cpu_loop loop;
    const void *params;
    int64_t chunks;
} iter_job;

static void iter_chunk(void *ctx, int64_t c) {
    const iter_job *j = ctx;
    /* Cut points at multiples of 16 elements: for contiguous data each chunk starts on
     * a cache line, so threads never write the same line and vector loops run aligned
     * with a single tail at the very end. */
    int64_t n = j->it->numel;
    int64_t b = c == 0 ? 0 : n * c / j->chunks / 16 * 16;
    int64_t e = c == j->chunks - 1 ? n : n * (c + 1) / j->chunks / 16 * 16;
    run_range(j->it, j->loop, j->params, b, e);
}

void ct_iter_run(const ct_iter *it, ct_cpu_loop loop, const void *params) {
    if (it->numel == 0 || !it->data[0])
        return;
    int nth = ct_get_num_threads();
    if (it->numel >= CT_GRAIN && nth > 1) {
        /* a few chunks per thread, so a thread that is not running leaves little */
        int64_t chunks = it->numel / (CT_GRAIN / 2);
        if (chunks > CT_CHUNKS_PER_THREAD * nth)
            chunks = CT_CHUNKS_PER_THREAD * nth;
        iter_job j = {it, loop, params, chunks};
        ct_parallel_for(chunks, nth, iter_chunk, &j);
        return;
    }
    run_range(it, loop, params, 0, it->numel);
}

/* Note [Tiny elementwise]
 * Same-shape, same-dtype contiguous inputs leave the iterator nothing to decide: no
 * broadcast, no promotion, the output is a fresh contiguous tensor of that shape, its
 * dims coalesce to one, and below the grain size it runs on one thread. The general
 * build would reach exactly this and then call the same loop with the same pointers and
 * strides, so the results are identical; it only costs ten times more instructions than
 * a small op's loop. The size cap keeps big work on the parallel route. */
static bool tiny_contiguous(const ct_tensor *t) {
    int64_t expected = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != expected)
            return false;
        expected *= t->shape[i];
    }
    return true;
}

bool ct_iter_tiny_ok(const ct_tensor *a, const ct_tensor *b) {
    if (a->device.type != CT_DEVICE_CPU || a->requires_grad || a->wrapped_number || a->numel <= 0 ||
        a->numel > CT_ITER_TINY_MAX || !tiny_contiguous(a))
        return false;
    if (!b)
        return true;
    if (b->dtype != a->dtype || b->ndim != a->ndim || b->device.type != CT_DEVICE_CPU || b->requires_grad ||
        b->wrapped_number)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return tiny_contiguous(b);
}

ct_tensor *ct_iter_tiny(const char *op, ct_cpu_loop loop, ct_dtype out_dtype, const ct_tensor *a,
                        const ct_tensor *b, const void *params) {
    size_t osz = ct_dtype_itemsize(out_dtype), isz = ct_dtype_itemsize(a->dtype);
    const char *outer = ct_alloc_get_context();
    ct_alloc_set_context(op);
    ct_storage *s = ct_storage_new((size_t)a->numel * osz, CT_CPU);
    /* the op is the result's maker too (Note [Ownership debug mode]) */
    ct_tensor *out = s ? ct_tensor_make_owned(s, 0, a->shape, NULL, a->ndim, out_dtype, CT_CPU) : NULL;
    ct_alloc_set_context(outer);
    if (!out)
        return NULL;
    char *data[3] = {s->data, ct_tensor_ptr(a), b ? ct_tensor_ptr(b) : NULL};
    /* One element coalesces to no dims at all in the general build, which runs the loop
     * with zero strides (its strided branch); do the same so every bit agrees. */
    int64_t one = a->numel > 1;
    int64_t strides[3] = {one * (int64_t)osz, one * (int64_t)isz, one * (int64_t)isz};
    loop(data, strides, a->numel, params);
    return out;
}
