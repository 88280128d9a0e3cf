/* F.embedding_bag and nn.EmbeddingBag, made of ops: the bags are read on the host, the
 * rows gathered with embedding and reduced with index_add (sum, mean) or amax (max),
 * so the gradients and devices come with those ops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/module_internal.h"

/* Note [embedding_bag as ops]
 * The bag structure (offsets, padding_idx) decides which rows go where, so it is read
 * on the host once: the positions of input that count (those not equal to
 * padding_idx), the bag each belongs to, and each bag's count. The counted rows are
 * gathered with one embedding call (weighted by per_sample_weights for sum), then
 * index_add sums them into their bags; mean divides by the counts (an empty bag gives
 * zeros, as PyTorch's); max takes amax over each bag's rows, which are consecutive.
 * max's gradient goes to the bag's largest row (split evenly between equal rows, which
 * for one repeated index sums to PyTorch's). */

enum { BAG_SUM, BAG_MEAN, BAG_MAX };

/* t as int64 values on the host (a new array, freed by the caller); NULL on error. */
static int64_t *host_ints(const ct_tensor *t) {
    int64_t n = ct_tensor_numel(t);
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!v) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, "embedding_bag", "out of memory");
        return NULL;
    }
    ct_scope_begin();
    ct_tensor *c = ct_contiguous(ct_to_dtype(ct_to_device(t, CT_CPU), CT_DTYPE_INT64));
    if (c && n)
        memcpy(v, ct_tensor_data(c), sizeof(int64_t) * (size_t)n);
    ct_scope_end();
    if (!c) {
        free(v);
        return NULL;
    }
    return v;
}

static ct_tensor *long_tensor(const int64_t *v, int64_t n, ct_device dev) {
    return ct_to_device(ct_from_data(v, CT_SHAPE(n), CT_DTYPE_INT64), dev);
}

static int bag_mode(const char *mode) {
    if (!mode || !strcmp(mode, "mean"))
        return BAG_MEAN;
    if (!strcmp(mode, "sum"))
        return BAG_SUM;
    if (!strcmp(mode, "max"))
        return BAG_MAX;
    return -1;
}

/* The checks of F.embedding_bag, with PyTorch's messages. */
static ct_status check_args(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *offsets, int mode,
                            const char *mode_name, const ct_tensor *psw) {
    const char *op = "embedding_bag";
    int nd = ct_tensor_dim(input);
    ct_dtype it = ct_tensor_dtype(input);
    if (it != CT_DTYPE_INT64 && it != CT_DTYPE_INT32)
        return ct_error(CT_ERROR_TYPE, op,
                        "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, "
                        "Int; but got %s instead (while checking arguments for embedding_bag)",
                        ct_dtype_name(it));
    if (ct_tensor_dim(weight) != 2)
        return ct_error(CT_ERROR_VALUE, op, "weight has to be a 2D Tensor, but got Tensor of dimension %d",
                        ct_tensor_dim(weight));
    if (nd == 2 && offsets)
        return ct_error(CT_ERROR_VALUE, op,
                        "if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed "
                        "length sequences. However, found offsets of type <class 'torch.Tensor'>");
    if (nd == 1 && !offsets)
        return ct_error(CT_ERROR_VALUE, op, "offsets has to be a 1D Tensor but got None");
    if (nd == 1 && ct_tensor_dim(offsets) != 1)
        return ct_error(CT_ERROR_VALUE, op, "offsets has to be a 1D Tensor");
    if (nd != 1 && nd != 2)
        return ct_error(CT_ERROR_VALUE, op, "input has to be 1D or 2D Tensor, but got Tensor of dimension %d", nd);
    if (mode < 0)
        return ct_error(CT_ERROR_VALUE, op, "mode has to be one of sum, mean or max");
    if (psw) {
        bool same = ct_tensor_dim(psw) == nd;
        for (int i = 0; same && i < nd; i++)
            same = ct_tensor_size(psw, i) == ct_tensor_size(input, i);
        if (!same) {
            char a[96], b[96];
            return ct_error(CT_ERROR_VALUE, op,
                            "embedding_bag: If per_sample_weights (torch.Size(%s)) is not None, then it must have the "
                            "same shape as the input (torch.Size(%s))",
                            ct_shape_str(ct_tensor_shape(psw), ct_tensor_dim(psw), a, sizeof a),
                            ct_shape_str(ct_tensor_shape(input), nd, b, sizeof b));
        }
        if (mode != BAG_SUM)
            return ct_error(CT_ERROR_NOT_IMPLEMENTED, op,
                            "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for "
                            "mode='sum' (got mode='%s'). Please open a feature request on GitHub.",
                            mode_name ? mode_name : "mean");
    }
    return CT_OK;
}

ct_tensor *ct_embedding_bag(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *offsets,
                            const char *mode, const ct_tensor *per_sample_weights, bool include_last_offset,
                            int64_t padding_idx) {
    const char *op = "embedding_bag";
    CT_CHECK_ARG(op, input);
    CT_CHECK_ARG(op, weight);
    int m = bag_mode(mode);
    if (check_args(input, weight, offsets, m, mode, per_sample_weights))
        return NULL;
    int64_t V = ct_tensor_size(weight, 0), D = ct_tensor_size(weight, 1), n = ct_tensor_numel(input);
    if (padding_idx != CT_NO_PADDING_IDX && padding_idx < 0)
        padding_idx += V;
    /* the bags: [start[b], start[b + 1]) of the flattened input */
    int64_t nbags, *start = NULL, *idx = host_ints(input);
    if (!idx)
        return NULL;
    if (ct_tensor_dim(input) == 2) {
        nbags = ct_tensor_size(input, 0);
        int64_t len = ct_tensor_size(input, 1);
        start = malloc(sizeof(int64_t) * (size_t)(nbags + 1));
        for (int64_t b = 0; start && b <= nbags; b++)
            start[b] = b * len;
    } else {
        int64_t no = ct_tensor_numel(offsets);
        int64_t *off = host_ints(offsets);
        nbags = include_last_offset ? (no > 0 ? no - 1 : 0) : no;
        start = off ? malloc(sizeof(int64_t) * (size_t)(nbags + 1)) : NULL;
        ct_status st = !off ? ct_last_status()
                       : !start ? ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory")
                                : CT_OK;
        if (!st && include_last_offset && no == 0)
            st = ct_error(CT_ERROR_VALUE, op, "include_last_offset: number of offset should be at least 1");
        if (!st && no > 0 && off[0] != 0)
            st = ct_error(CT_ERROR_VALUE, op,
                          "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                          "position 0. However, got %lld",
                          (long long)off[0]);
        if (!st && no > 0 && off[no - 1] > n)
            st = ct_error(CT_ERROR_VALUE, op,
                          "offsets[-1] can not be greater than input's length %lld but got offsets[-1] of %lld",
                          (long long)n, (long long)off[no - 1]);
        for (int64_t i = 1; !st && i < no; i++)
            if (off[i] < off[i - 1])
                st = ct_error(CT_ERROR_VALUE, op,
                              "offsets must be non-decreasing, but offsets[%lld] = %lld is less than offsets[%lld] = "
                              "%lld",
                              (long long)i, (long long)off[i], (long long)(i - 1), (long long)off[i - 1]);
        if (!st) {
            for (int64_t b = 0; b < nbags; b++)
                start[b] = off[b];
            start[nbags] = include_last_offset ? off[no - 1] : n;
        }
        free(off);
        if (st) {
            free(start);
            free(idx);
            return NULL;
        }
    }
    /* the counted positions, their bags and each bag's count */
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)(n ? n : 1)), *rows = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int64_t *bag = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    double *count = calloc((size_t)(nbags ? nbags : 1), sizeof(double));
    int64_t *first = malloc(sizeof(int64_t) * (size_t)(nbags + 1));
    ct_status st = start && pos && rows && bag && count && first ? CT_OK : CT_ERROR_OUT_OF_MEMORY;
    if (st)
        ct_error(st, op, "out of memory");
    int64_t nk = 0;
    for (int64_t b = 0; !st && b < nbags; b++) {
        first[b] = nk;
        for (int64_t j = start[b]; !st && j < start[b + 1]; j++) {
            if (idx[j] < 0 || idx[j] >= V) {
                st = ct_error(CT_ERROR_INDEX, op, "index out of range in self");
                break;
            }
            if (idx[j] == padding_idx)
                continue;
            pos[nk] = j, rows[nk] = idx[j], bag[nk++] = b;
            count[b] += 1;
        }
    }
    if (!st)
        first[nbags] = nk;
    ct_tensor *out = NULL;
    ct_scope_begin();
    if (!st) {
        ct_device dev = ct_tensor_device(weight);
        ct_dtype dt = ct_tensor_dtype(weight);
        ct_tensor *e = ct_embedding(long_tensor(rows, nk, dev), weight, CT_NO_PADDING_IDX);
        if (e && per_sample_weights)
            e = ct_mul(e, ct_unsqueeze(ct_index_select(ct_reshape(per_sample_weights, CT_SHAPE(-1)), 0,
                                                       long_tensor(pos, nk, ct_tensor_device(per_sample_weights))),
                                       1));
        if (e && m != BAG_MAX) {
            out = ct_index_add(ct_zeros(CT_SHAPE(nbags, D), dt, dev), 0, long_tensor(bag, nk, dev), e,
                               ct_scalar_int(1));
            if (out && m == BAG_MEAN) {
                for (int64_t b = 0; b < nbags; b++)
                    count[b] = count[b] > 0 ? count[b] : 1;
                out = ct_div(out, ct_to_device(ct_to_dtype(ct_from_data(count, CT_SHAPE(nbags, 1), CT_F64), dt),
                                               dev));
            }
        } else if (e) {
            ct_tensor **each = malloc(sizeof(ct_tensor *) * (size_t)(nbags ? nbags : 1));
            bool ok = each != NULL;
            int64_t zero = 0;
            for (int64_t b = 0; ok && b < nbags; b++) {
                int64_t len = first[b + 1] - first[b];
                each[b] = len ? ct_amax(ct_narrow(e, 0, first[b], len), &zero, 1, false)
                              : ct_zeros(CT_SHAPE(D), dt, dev);
                ok = each[b] != NULL;
            }
            out = ok ? nbags ? ct_stack((const ct_tensor *const *)each, (int)nbags, 0)
                             : ct_zeros(CT_SHAPE(0, D), dt, dev)
                     : NULL;
            if (!each)
                ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
            free(each);
        }
    }
    ct_keep(out);
    ct_scope_end();
    free(idx);
    free(start);
    free(pos);
    free(rows);
    free(bag);
    free(count);
    free(first);
    return out;
}

/* ------------------------------------------------------------------ EmbeddingBag */

typedef struct bag_ctx {
    int mode;
    bool include_last_offset;
    int64_t padding_idx;
} bag_ctx;

static const char *const bag_modes[] = {"sum", "mean", "max"};

ct_tensor *ct_nn_embedding_bag_forward(ct_module *m, const ct_tensor *input, const ct_tensor *offsets,
                                       const ct_tensor *per_sample_weights) {
    if (!m || !ct_module_param(m, "weight")) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "EmbeddingBag", "not an EmbeddingBag module");
        return NULL;
    }
    const bag_ctx *c = ct_module_ctx(m);
    return ct_embedding_bag(input, ct_module_param(m, "weight"), offsets, bag_modes[c->mode], per_sample_weights,
                            c->include_last_offset, c->padding_idx);
}

/* forward(input[, offsets[, per_sample_weights]]) */
static ct_status bag_forward(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int cap, int *nout) {
    (void)cap;
    if (nin < 1 || nin > 3)
        return ct_error(CT_ERROR_VALUE, "EmbeddingBag", "forward takes input, offsets and per_sample_weights (1 to 3 "
                        "tensors), got %d",
                        nin);
    out[0] = ct_nn_embedding_bag_forward(m, in[0], nin > 1 ? in[1] : NULL, nin > 2 ? in[2] : NULL);
    *nout = out[0] ? 1 : 0;
    return out[0] ? CT_OK : ct_last_status();
}

static int bag_repr(const ct_module *m, char *buf, size_t cap) {
    const bag_ctx *c = ct_module_ctx(m);
    ct_tensor *w = ct_module_param(m, "weight");
    char pad[48] = "";
    if (c->padding_idx != CT_NO_PADDING_IDX)
        snprintf(pad, sizeof pad, ", padding_idx=%lld", (long long)c->padding_idx);
    return snprintf(buf, cap, "%lld, %lld, mode='%s'%s", (long long)ct_tensor_size(w, 0),
                    (long long)ct_tensor_size(w, 1), bag_modes[c->mode], pad);
}

ct_module *ct_nn_embedding_bag(int64_t num_embeddings, int64_t embedding_dim, const char *mode,
                               bool include_last_offset, int64_t padding_idx, ct_dtype dtype) {
    const char *op = "EmbeddingBag";
    int md = bag_mode(mode);
    if (md < 0) {
        ct_error(CT_ERROR_VALUE, op, "mode has to be one of sum, mean or max");
        return NULL;
    }
    if (num_embeddings < 0 || embedding_dim < 0) {
        ct_error(CT_ERROR_VALUE, op, "num_embeddings and embedding_dim must be non-negative");
        return NULL;
    }
    if (padding_idx != CT_NO_PADDING_IDX) {
        if (padding_idx >= num_embeddings || padding_idx < -num_embeddings) {
            ct_error(CT_ERROR_VALUE, op, "padding_idx must be within num_embeddings");
            return NULL;
        }
        if (padding_idx < 0)
            padding_idx += num_embeddings;
    }
    if (ct_nn_layer_dtype(op, &dtype))
        return NULL;
    bag_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
        return NULL;
    }
    ct_module *m = ct_module_new_multi(op, bag_forward, c, free); /* frees c on failure */
    if (!m)
        return NULL;
    c->mode = md;
    c->include_last_offset = include_last_offset;
    c->padding_idx = padding_idx;
    ct_module_set_extra_repr(m, bag_repr);
    ct_tensor *w = ct_nn_new_param(m, "weight", CT_SHAPE(num_embeddings, embedding_dim), dtype);
    ct_scope_begin();
    bool ok = w && ct_init_normal_(w, 0, 1);
    if (ok && padding_idx != CT_NO_PADDING_IDX)
        ok = ct_init_zeros_(ct_select(w, 0, padding_idx)) != NULL;
    ct_scope_end();
    if (!ok) {
        ct_module_free(m);
        return NULL;
    }
    return m;
}
