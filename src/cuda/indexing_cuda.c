/* The host half of the CUDA indexing ops (and sort / topk). The shape/dtype rules and output allocation
 * are the shared kernels' (src/ops/shape.c, which call in here once the output lives
 * on a GPU); this file checks devices, validates the indices on the GPU and launches
 * indexing.cu. Also embedding and its backward (their shape rules are in
 * src/ops/nn_fused.c).
 *
 * Note [GPU index checks]
 * An out-of-range index is an error, as on the CPU, with the same message naming the
 * first bad index. The indices are scanned on the GPU before anything is written (one
 * small kernel and a read of the result, which waits for the stream), so a failed call
 * leaves its in-place target untouched. PyTorch instead traps inside the kernel with a
 * device assert, which poisons the CUDA context; ctorch keeps going. */
#include <string.h>

#include "core/view.h"
#include "cuda/cuda_ops.h"
#include "ops/nn_fused.h"

static ct_status same_device(const char *op, const ct_tensor *a, const ct_tensor *b) {
    if (!a || !b || ct_device_equal(a->device, b->device))
        return CT_OK;
    char x[32], y[32];
    return ct_error(CT_ERROR_DEVICE, op, "Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                    ct_device_str(a->device, x, sizeof x), ct_device_str(b->device, y, sizeof y));
}

/* Validates a contiguous index on the GPU (Note [GPU index checks]). embedding: its
 * message and no negative indices. */
static ct_status check_indices(const char *op, const ct_tensor *ic, int64_t size, bool embedding) {
    int64_t n = ic->numel;
    if (n == 0)
        return CT_OK;
    ct_device dev = ic->device;
    ct_scope_begin();
    int64_t one = 1;
    ct_tensor *first = ct_full(&one, 1, ct_scalar_int(-1), CT_DTYPE_INT64, dev);
    ct_status st = first ? ct_cuda_check_indices(ct_tensor_ptr(ic), ic->dtype == CT_DTYPE_INT64, n, size, !embedding,
                                                 (uint64_t *)ct_tensor_ptr(first), dev.index, op)
                         : ct_last_status();
    int64_t k = -1;
    if (st == CT_OK)
        st = ct_cuda_read_element(first, 0, &k);
    if (st == CT_OK && k >= 0 && k < n) {
        int64_t v = 0;
        if (ic->dtype == CT_DTYPE_INT64) {
            st = ct_cuda_read_element(ic, k, &v);
        } else {
            int32_t v32 = 0;
            st = ct_cuda_read_element(ic, k, &v32);
            v = v32;
        }
        if (st == CT_OK)
            st = embedding ? ct_error(CT_ERROR_INDEX, op, "index out of range in self")
                           : ct_error(CT_ERROR_INDEX, op, "index %lld is out of bounds for dimension with size %lld",
                                      (long long)v, (long long)size);
    }
    ct_scope_end();
    return st;
}

static int64_t prod(const int64_t *s, int a, int b) {
    int64_t p = 1;
    for (int i = a; i < b; i++)
        p *= s[i];
    return p;
}

ct_status ct_cuda_index_select(ct_tensor *out, const ct_tensor *t, const ct_tensor *index, int d) {
    const char *op = "index_select";
    ct_status st = same_device(op, t, index);
    if (st || out->numel == 0)
        return st;
    ct_scope_begin();
    const ct_tensor *c = ct_contiguous(t), *ic = ct_contiguous(index);
    int64_t size = t->ndim ? t->shape[d] : 1;
    st = c && ic ? check_indices(op, ic, size, false) : ct_last_status();
    if (st == CT_OK) {
        int64_t outer = t->ndim ? prod(t->shape, 0, d) : 1, inner = t->ndim ? prod(t->shape, d + 1, t->ndim) : 1;
        st = ct_cuda_index_select_run(ct_tensor_ptr(out), ct_tensor_ptr(c), ct_dtype_size(t->dtype), ct_tensor_ptr(ic),
                                      ic->dtype == CT_DTYPE_INT64, outer, index->numel, inner, size, out->device.index,
                                      op);
    }
    ct_scope_end();
    return st;
}

static void index_desc(ct_cuda_index_desc *g, const ct_tensor *index, const ct_tensor *t, const ct_tensor *src, int d) {
    memset(g, 0, sizeof *g);
    g->n = index->numel;
    g->ind = index->ndim;
    for (int i = 0; i < index->ndim; i++)
        g->ishape[i] = index->shape[i];
    g->tnd = t->ndim;
    for (int i = 0; i < t->ndim; i++)
        g->tstr[i] = t->strides[i];
    if (src) {
        g->snd = src->ndim;
        for (int i = 0; i < src->ndim; i++)
            g->sstr[i] = src->strides[i];
    }
    g->dim = d;
    g->size = t->ndim ? t->shape[d] : 1;
}

ct_status ct_cuda_gather(ct_tensor *out, const ct_tensor *t, const ct_tensor *index, int d) {
    const char *op = "gather";
    ct_status st = same_device(op, t, index);
    if (st || out->numel == 0)
        return st;
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous(index);
    ct_cuda_index_desc g;
    if (ic)
        index_desc(&g, ic, t, NULL, d);
    st = ic ? check_indices(op, ic, g.size, false) : ct_last_status();
    if (st == CT_OK)
        st = ct_cuda_gather_run(ct_tensor_ptr(out), ct_tensor_ptr(t), ct_dtype_size(t->dtype), ct_tensor_ptr(ic),
                                ic->dtype == CT_DTYPE_INT64, &g, out->device.index, op);
    ct_scope_end();
    return st;
}

ct_status ct_cuda_scatter_add(ct_tensor *out, const ct_tensor *src, const ct_tensor *index, int d) {
    const char *op = "scatter_add";
    ct_status st = same_device(op, out, index);
    if (st == CT_OK)
        st = same_device(op, out, src);
    if (st || index->numel == 0)
        return st;
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous(index);
    ct_cuda_index_desc g;
    if (ic)
        index_desc(&g, ic, out, src, d);
    st = ic ? check_indices(op, ic, g.size, false) : ct_last_status();
    if (st == CT_OK)
        st = ct_cuda_scatter_add_run(ct_tensor_ptr(out), ct_tensor_ptr(src), out->dtype, ct_tensor_ptr(ic),
                                     ic->dtype == CT_DTYPE_INT64, &g, out->device.index, op);
    ct_scope_end();
    return st;
}

ct_status ct_cuda_index_add(ct_tensor *out, const ct_tensor *src, const ct_tensor *index, int d, double alpha) {
    const char *op = "index_add";
    ct_status st = same_device(op, out, index);
    if (st == CT_OK)
        st = same_device(op, out, src);
    if (st || index->numel == 0 || out->numel == 0)
        return st;
    ct_scope_begin();
    const ct_tensor *ic = ct_contiguous(index), *sc = ct_contiguous(src);
    ct_tensor *oc = ct_tensor_is_contiguous(out) ? out : ct_clone(out);
    int64_t size = out->ndim ? out->shape[d] : 1;
    st = ic && sc && oc ? check_indices(op, ic, size, false) : ct_last_status();
    if (st == CT_OK) {
        int64_t outer = out->ndim ? prod(out->shape, 0, d) : 1;
        int64_t inner = out->ndim ? prod(out->shape, d + 1, out->ndim) : 1;
        st = ct_cuda_index_add_run(ct_tensor_ptr(oc), ct_tensor_ptr(sc), out->dtype, ct_tensor_ptr(ic),
                                   ic->dtype == CT_DTYPE_INT64, outer, index->numel, inner, size, alpha, INT64_MIN,
                                   out->device.index, op);
    }
    if (st == CT_OK && oc != out && !ct_copy_(out, oc))
        st = ct_last_status();
    ct_scope_end();
    return st;
}

ct_status ct_cuda_masked_fill(ct_tensor *out, const ct_tensor *mask, const int64_t *mask_strides, const void *value) {
    const char *op = "masked_fill";
    ct_status st = same_device(op, out, mask);
    if (st || out->numel == 0)
        return st;
    if (!ct_cuda_use_device(op, out->device.index))
        return ct_last_status();
    size_t esz = ct_dtype_size(out->dtype);
    int64_t strides[2][CT_MAX_DIMS];
    for (int i = 0; i < out->ndim; i++) {
        strides[0][i] = out->strides[i] * (int64_t)esz;
        strides[1][i] = mask_strides[i]; /* bool: one byte per element */
    }
    char *data[2] = {ct_tensor_ptr(out), ct_tensor_ptr(mask)};
    ct_cuda_iter_desc d;
    ct_cuda_desc_build(&d, 2, out->ndim, out->shape, data, strides);
    return ct_cuda_masked_fill_run(&d, value, esz, out->device.index, op);
}

ct_status ct_cuda_sort(ct_tensor *vals, ct_tensor *idx, const ct_tensor *t, int d, int64_t k, bool descending) {
    const char *op = "sort";
    if (vals->numel == 0)
        return CT_OK;
    int64_t size = t->ndim ? t->shape[d] : 1, outer = t->ndim ? prod(t->shape, 0, d) : 1;
    int64_t inner = t->ndim ? prod(t->shape, d + 1, t->ndim) : 1;
    if (!ct_cuda_use_device(op, t->device.index))
        return ct_last_status();
    ct_scope_begin();
    /* rows contiguous: the sorted dim last, the others in order */
    const ct_tensor *c = ct_contiguous(t->ndim ? ct_movedim(t, d, t->ndim - 1) : t);
    int64_t bytes = (int64_t)ct_cuda_sort_scratch(outer * inner, size);
    ct_tensor *scratch = ct_empty(&bytes, 1, CT_DTYPE_UINT8, t->device);
    ct_status st = c && scratch ? ct_cuda_sort_run(ct_tensor_ptr(c), t->dtype, outer, inner, size, k, descending,
                                                   ct_tensor_ptr(vals), (int64_t *)ct_tensor_ptr(idx),
                                                   ct_tensor_ptr(scratch), t->device.index)
                                : ct_last_status();
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ embedding */

static ct_status embedding_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "embedding";
    const ct_tensor *w0 = call->in[0], *idx0 = call->in[1];
    ct_status st = ct_embedding_check(w0, idx0);
    if (st == CT_OK)
        st = same_device(op, w0, idx0);
    if (st)
        return st;
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, idx0->shape, sizeof(int64_t) * (size_t)idx0->ndim);
    int64_t num = w0->shape[0], dim = w0->shape[1];
    shape[idx0->ndim] = dim;
    ct_scope_begin();
    ct_tensor *y = ct_empty(shape, idx0->ndim + 1, w0->dtype, w0->device);
    const ct_tensor *w = ct_contiguous(w0), *idx = ct_contiguous(idx0);
    st = y && w && idx ? check_indices(op, idx, num, true) : ct_last_status();
    if (st == CT_OK && y->numel > 0)
        st = ct_cuda_index_select_run(ct_tensor_ptr(y), ct_tensor_ptr(w), ct_dtype_size(w0->dtype), ct_tensor_ptr(idx),
                                      idx->dtype == CT_DTYPE_INT64, 1, idx0->numel, dim, num, y->device.index, op);
    if (st == CT_OK)
        st = ct_call_set_output(call, 0, y); /* the call takes its own reference */
    ct_scope_end();
    return st;
}

/* The gradient of the weight: rows of grad_output added at their indices (atomically,
 * in float32 for float16/bfloat16/float32, float64 for float64), padding_idx rows
 * left out; the result in grad_output's dtype. */
static ct_status embedding_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "embedding_backward";
    const ct_tensor *gy0 = call->in[0], *idx0 = call->in[1];
    int64_t num = call->ints[0], pad = call->ints[1];
    ct_status bad_args = ct_embedding_backward_check(gy0, idx0, num);
    if (bad_args)
        return bad_args;
    ct_status st = same_device(op, gy0, idx0);
    if (st)
        return st;
    if (pad != CT_NO_PADDING_IDX && pad < 0)
        pad += num;
    int64_t dim = gy0->shape[gy0->ndim - 1];
    ct_dtype wd = gy0->dtype == CT_DTYPE_FLOAT64 ? CT_DTYPE_FLOAT64 : CT_DTYPE_FLOAT32;
    ct_scope_begin();
    ct_tensor *gy = ct_contiguous(ct_to_dtype(gy0, wd)), *idx = ct_contiguous(idx0);
    int64_t gshape[2] = {num, dim};
    ct_tensor *gw = ct_zeros(gshape, 2, wd, gy0->device);
    st = gy && idx && gw ? check_indices(op, idx, num, true) : ct_last_status();
    /* idx's values are rows: padding_idx (when in range) is skipped */
    int64_t skip = pad == CT_NO_PADDING_IDX || pad < 0 || pad >= num ? INT64_MIN : pad;
    if (st == CT_OK && dim > 0)
        st = ct_cuda_index_add_run(ct_tensor_ptr(gw), ct_tensor_ptr(gy), wd, ct_tensor_ptr(idx),
                                   idx->dtype == CT_DTYPE_INT64, 1, idx0->numel, dim, num, 1.0, skip,
                                   gy0->device.index, op);
    ct_tensor *res = st == CT_OK ? ct_to_dtype(gw, gy0->dtype) : NULL;
    if (st == CT_OK && !res)
        st = ct_last_status();
    if (st == CT_OK)
        st = ct_call_set_output(call, 0, res);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ registration */

/* The shared kernels of src/ops/shape.c serve CUDA after this check: every tensor of
 * the call on one CUDA device (a CPU operand would hand its host pointer to a GPU
 * kernel, or a device pointer to the CPU loops). */
typedef struct shared_kernel {
    ct_kernel_fn fn;
} shared_kernel;

static ct_status on_one_device(ct_keyset ks, ct_call *call, void *ud) {
    const shared_kernel *k = ud;
    const char *op = ct_op_name(call->op);
    const ct_tensor *first = NULL;
    ct_status st = CT_OK;
    for (int i = 0; i < call->nin && st == CT_OK; i++)
        if (call->in[i]) {
            st = same_device(op, first ? first : call->in[i], call->in[i]);
            first = first ? first : call->in[i];
        }
    for (int i = 0; i < call->nlist && st == CT_OK; i++)
        if (call->list[i]) {
            st = same_device(op, first ? first : call->list[i], call->list[i]);
            first = first ? first : call->list[i];
        }
    for (int i = 0; i < call->nout && st == CT_OK; i++)
        if (call->out[i] && first)
            st = same_device(op, first, call->out[i]);
    if (st)
        return st;
    return k->fn(ks, call, NULL);
}

static const shared_kernel k_cat = {ct_cpu_cat}, k_index_select = {ct_cpu_index_select}, k_gather = {ct_cpu_gather},
                           k_scatter_add = {ct_cpu_scatter_add}, k_index_add = {ct_cpu_index_add},
                           k_masked_fill = {ct_cpu_masked_fill}, k_embedding = {embedding_kernel},
                           k_embedding_backward = {embedding_backward_kernel}, k_sort = {ct_cpu_sort},
                           k_topk = {ct_cpu_topk};

void ct_cuda_register_indexing(void) {
    ct_dispatch_register_default(CT_OP_cat, CT_KEY_CUDA, on_one_device, (void *)&k_cat);
    ct_dispatch_register_default(CT_OP_index_select, CT_KEY_CUDA, on_one_device, (void *)&k_index_select);
    ct_dispatch_register_default(CT_OP_gather, CT_KEY_CUDA, on_one_device, (void *)&k_gather);
    ct_dispatch_register_default(CT_OP_scatter_add, CT_KEY_CUDA, on_one_device, (void *)&k_scatter_add);
    ct_dispatch_register_default(CT_OP_index_add, CT_KEY_CUDA, on_one_device, (void *)&k_index_add);
    ct_dispatch_register_default(CT_OP_masked_fill, CT_KEY_CUDA, on_one_device, (void *)&k_masked_fill);
    ct_dispatch_register_default(CT_OP_embedding, CT_KEY_CUDA, on_one_device, (void *)&k_embedding);
    ct_dispatch_register_default(CT_OP_embedding_backward, CT_KEY_CUDA, on_one_device, (void *)&k_embedding_backward);
    ct_dispatch_register_default(CT_OP_sort, CT_KEY_CUDA, on_one_device, (void *)&k_sort);
    ct_dispatch_register_default(CT_OP_topk, CT_KEY_CUDA, on_one_device, (void *)&k_topk);
}
