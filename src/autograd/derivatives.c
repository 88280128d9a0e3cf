/* Derivative formulas, one per differentiable op of the table.
 *
 * Note [Derivative table]
 * The table is generated from ctorch/ops.def: every op of a differentiable family must
 * define NAME_backward (with DEF below) or the build fails; ops of such a family that
 * have no derivative say so with NONDIFF(name). Formulas are written with public ct
 * ops, so under create_graph they record a graph of their own (double backward).
 * A formula returns gradients in the shape of the op's output where broadcasting
 * happened; the engine sums them down to each input's shape and casts them to its
 * dtype (engine.c, fit_gradient). */
#include <math.h>
#include <string.h>

#include "autograd/node.h"
#include "core/dtype.h"
#include "meta/indexing.h"
#include "meta/op_info.h"
#include "meta/reduce.h"

#define G (gout[0])
#define OUT_SLOT CT_SAVED_OUT0
/* The gradient of input i is wanted (an edge leads somewhere). */
#define WANT(i) (ctx->node->edges[(i)].fn != NULL)
#define TRY(x)                                                                  \
    do {                                                                        \
        if (!(x))                                                               \
            return ct_last_status() != CT_OK ? ct_last_status() : CT_ERROR_RUNTIME; \
    } while (0)

#define DEF(name, saves)                                                             \
    enum { name##_saves = (saves) };                                                 \
    static ct_status name##_backward(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin)

static ct_tensor *saved(ct_node_ctx *ctx, int i) { return ct_node_saved(ctx, i); }

static bool is_one(ct_scalar s) {
    return (s.type == CT_SCALAR_INT && s.v.i == 1) || (s.type == CT_SCALAR_FLOAT && s.v.f == 1.0) ||
           (s.type == CT_SCALAR_BOOL && s.v.b == 1);
}

static ct_tensor *scale(ct_tensor *x, ct_scalar s) { return !x || is_one(s) ? x : ct_mul_scalar(x, s); }

/* ------------------------------------------------------------------ helpers */

/* Sums g over the dims broadcasting added or stretched, down to shape. */
ct_tensor *ct_ag_sum_to(const ct_tensor *g, const int64_t *shape, int ndim) {
    int lead = g->ndim - ndim, n = 0;
    int64_t dims[CT_MAX_DIMS];
    for (int d = 0; d < g->ndim; d++)
        if (d < lead || (shape[d - lead] == 1 && g->shape[d] != 1))
            dims[n++] = d;
    const ct_tensor *r = n ? ct_sum(g, dims, n, true, CT_DTYPE_UNDEFINED) : g;
    return r ? ct_reshape(r, shape, ndim) : NULL;
}

static ct_tensor *ag_transpose(const ct_tensor *x, int d0, int d1) { return ct_transpose(x, d0, d1); }

/* ------------------------------------------------------------------ elementwise */

DEF(neg, 0) {
    (void)ctx;
    TRY(gin[0] = ct_neg(G));
    return CT_OK;
}

/* The subgradient at 0 is 0, as PyTorch's sign(). */
DEF(abs, CT_SAVE_IN0) {
    ct_tensor *a;
    TRY(a = saved(ctx, 0));
    TRY(gin[0] = ct_sub(ct_mul(G, ct_gt_scalar(a, ct_scalar_int(0))), ct_mul(G, ct_lt_scalar(a, ct_scalar_int(0)))));
    return CT_OK;
}

DEF(exp, CT_SAVE_OUT) {
    ct_tensor *y;
    TRY(y = saved(ctx, OUT_SLOT));
    TRY(gin[0] = ct_mul(G, y));
    return CT_OK;
}

DEF(log, CT_SAVE_IN0) {
    ct_tensor *a;
    TRY(a = saved(ctx, 0));
    TRY(gin[0] = ct_div(G, a));
    return CT_OK;
}

DEF(sqrt, CT_SAVE_OUT) {
    ct_tensor *y;
    TRY(y = saved(ctx, OUT_SLOT));
    TRY(gin[0] = ct_div(G, ct_mul_scalar(y, ct_scalar_int(2))));
    return CT_OK;
}

DEF(sin, CT_SAVE_IN0) {
    ct_tensor *a;
    TRY(a = saved(ctx, 0));
    TRY(gin[0] = ct_mul(G, ct_cos(a)));
    return CT_OK;
}

DEF(cos, CT_SAVE_IN0) {
    ct_tensor *a;
    TRY(a = saved(ctx, 0));
    TRY(gin[0] = ct_neg(ct_mul(G, ct_sin(a))));
    return CT_OK;
}

/* 1 - y^2, written as -(y*y - 1) to stay with ops that exist. */
DEF(tanh, CT_SAVE_OUT) {
    ct_tensor *y;
    TRY(y = saved(ctx, OUT_SLOT));
    TRY(gin[0] = ct_mul(G, ct_neg(ct_sub_scalar(ct_mul(y, y), ct_scalar_int(1)))));
    return CT_OK;
}

DEF(sigmoid, CT_SAVE_OUT) {
    ct_tensor *y;
    TRY(y = saved(ctx, OUT_SLOT));
    TRY(gin[0] = ct_mul(G, ct_sub(y, ct_mul(y, y))));
    return CT_OK;
}

/* Devices with the fused single-pass backward kernels (threshold_backward,
 * gelu_backward, max_pool2d_backward); elsewhere, and under create_graph, the
 * gradients are differentiable compositions of other ops. */
static bool fused_device(ct_device d) { return d.type == CT_DEVICE_CPU || d.type == CT_DEVICE_CUDA; }

/* PyTorch's threshold_backward: the gradient passes where the result is positive.
 * Without create_graph one fused kernel does it in a single pass. */
/* g through relu, from its output y. */
static ct_status relu_grad(ct_node_ctx *ctx, ct_tensor *g, ct_tensor *y, ct_tensor **out) {
    if (!ctx->create_graph && fused_device(y->device) && ct_dtype_is_floating(y->dtype) && g->dtype == y->dtype) {
        TRY(*out = ct_threshold_backward(g, y, ct_scalar_int(0)));
        return CT_OK;
    }
    TRY(*out = ct_mul(g, ct_gt_scalar(y, ct_scalar_int(0))));
    return CT_OK;
}

DEF(relu, CT_SAVE_OUT) {
    ct_tensor *y;
    TRY(y = saved(ctx, OUT_SLOT));
    return relu_grad(ctx, G, y, &gin[0]);
}

static ct_scalar alpha_of(const ct_node *n) { return n->nscalars > 0 ? n->s[0] : ct_scalar_int(1); }

DEF(add, 0) {
    if (WANT(0))
        gin[0] = G;
    if (WANT(1))
        TRY(gin[1] = scale(G, alpha_of(ctx->node)));
    return CT_OK;
}

DEF(sub, 0) {
    if (WANT(0))
        gin[0] = G;
    if (WANT(1))
        TRY(gin[1] = ct_neg(scale(G, alpha_of(ctx->node))));
    return CT_OK;
}

DEF(mul, CT_SAVE_IN0 | CT_SAVE_IN1) {
    if (WANT(0)) {
        ct_tensor *b;
        TRY(b = saved(ctx, 1));
        TRY(gin[0] = ct_mul(G, b));
    }
    if (WANT(1)) {
        ct_tensor *a;
        TRY(a = saved(ctx, 0));
        TRY(gin[1] = ct_mul(G, a));
    }
    return CT_OK;
}

DEF(div, CT_SAVE_IN0 | CT_SAVE_IN1) {
    ct_tensor *b;
    if (ctx->node->nints > 0 && ctx->node->ints[0] != CT_ROUNDING_MODE_NONE) {
        /* trunc and floor modes are piecewise constant: zero gradient, as PyTorch. */
        for (int i = 0; i < 2; i++)
            if (WANT(i))
                TRY(gin[i] = ct_zeros(ctx->node->in_meta[i].shape, ctx->node->in_meta[i].ndim, G->dtype, G->device));
        return CT_OK;
    }
    TRY(b = saved(ctx, 1));
    if (WANT(0))
        TRY(gin[0] = ct_div(G, b));
    if (WANT(1)) {
        ct_tensor *a;
        TRY(a = saved(ctx, 0));
        TRY(gin[1] = ct_neg(ct_div(ct_mul(G, a), ct_mul(b, b))));
    }
    return CT_OK;
}

/* Ties split the gradient evenly between the two inputs, as PyTorch. */
static ct_status minmax_backward(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin, bool is_max) {
    ct_tensor *a, *b;
    TRY(a = saved(ctx, 0));
    TRY(b = saved(ctx, 1));
    ct_tensor *half;
    TRY(half = ct_mul(ct_mul_scalar(G, ct_scalar_float(0.5)), ct_eq(a, b)));
    if (WANT(0))
        TRY(gin[0] = ct_add(ct_mul(G, is_max ? ct_gt(a, b) : ct_lt(a, b)), half));
    if (WANT(1))
        TRY(gin[1] = ct_add(ct_mul(G, is_max ? ct_lt(a, b) : ct_gt(a, b)), half));
    return CT_OK;
}

DEF(maximum, CT_SAVE_IN0 | CT_SAVE_IN1) { return minmax_backward(ctx, gout, gin, true); }
DEF(minimum, CT_SAVE_IN0 | CT_SAVE_IN1) { return minmax_backward(ctx, gout, gin, false); }

/* ------------------------------------------------------------------ linear algebra */

/* d(a @ b): grad @ b^T and a^T @ grad, for mm (batched: false) and bmm. */
static ct_status matprod_backward(ct_node_ctx *ctx, ct_tensor *g, int ia, int ib, bool batched, ct_scalar alpha,
                                  ct_tensor **ga, ct_tensor **gb) {
    ct_tensor *(*prod)(const ct_tensor *, const ct_tensor *) = batched ? ct_bmm : ct_mm;
    int d0 = batched ? 1 : 0, d1 = batched ? 2 : 1;
    if (WANT(ia)) {
        ct_tensor *b;
        TRY(b = saved(ctx, ib));
        TRY(*ga = scale(prod(g, ag_transpose(b, d0, d1)), alpha));
    }
    if (WANT(ib)) {
        ct_tensor *a, *b;
        TRY(a = saved(ctx, ia));
        TRY(b = saved(ctx, ib));
        /* b stored transposed (linear's w^T): the gradient in the same layout, as
         * (g^T a)^T, so that the transpose's backward gives w a dense gradient that
         * AccumulateGrad can keep without a copy. */
        if (!batched && b->ndim == 2 && b->shape[0] > 1 && b->shape[1] > 1 && b->strides[0] == 1 &&
            b->strides[1] == b->shape[0])
            TRY(*gb = scale(ag_transpose(prod(ag_transpose(g, 0, 1), a), 0, 1), alpha));
        else
            TRY(*gb = scale(prod(ag_transpose(a, d0, d1), g), alpha));
    }
    return CT_OK;
}

DEF(mm, CT_SAVE_IN0 | CT_SAVE_IN1) { return matprod_backward(ctx, G, 0, 1, false, ct_scalar_int(1), &gin[0], &gin[1]); }
DEF(bmm, CT_SAVE_IN0 | CT_SAVE_IN1) { return matprod_backward(ctx, G, 0, 1, true, ct_scalar_int(1), &gin[0], &gin[1]); }

DEF(dot, CT_SAVE_IN0 | CT_SAVE_IN1) {
    if (WANT(0)) {
        ct_tensor *b;
        TRY(b = saved(ctx, 1));
        TRY(gin[0] = ct_mul(G, b));
    }
    if (WANT(1)) {
        ct_tensor *a;
        TRY(a = saved(ctx, 0));
        TRY(gin[1] = ct_mul(G, a));
    }
    return CT_OK;
}

/* beta * c + alpha * a @ b. */
static ct_status addprod_backward(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin, bool batched) {
    ct_scalar beta = ctx->node->s[0], alpha = ctx->node->s[1];
    if (WANT(0))
        TRY(gin[0] = scale(G, beta));
    return matprod_backward(ctx, G, 1, 2, batched, alpha, &gin[1], &gin[2]);
}

DEF(addmm, CT_SAVE_IN1 | CT_SAVE_IN2) { return addprod_backward(ctx, gout, gin, false); }
DEF(baddbmm, CT_SAVE_IN1 | CT_SAVE_IN2) { return addprod_backward(ctx, gout, gin, true); }

/* ------------------------------------------------------------------ views and copies */

static ct_status regeom_backward(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    TRY(gin[0] = ct_ag_regeom(G, &ctx->node->out_meta, &ctx->node->in_meta[0]));
    return CT_OK;
}

static bool geom_span(const ct_input_meta *m, int64_t *lo, int64_t *hi) {
    int64_t n = ct_shape_numel(m->shape, m->ndim);
    if (n <= 0)
        return false;
    int64_t h = m->offset;
    for (int d = 0; d < m->ndim; d++)
        h += (m->shape[d] - 1) * m->strides[d];
    *lo = m->offset;
    *hi = h;
    return true;
}

/* Calls fn(addr - lo, k) for every element k (row-major) of layout m. */
#define FOR_ADDR(m, lo, body)                                                          \
    do {                                                                               \
        int64_t idx_[CT_MAX_DIMS] = {0}, n_ = ct_shape_numel((m)->shape, (m)->ndim);  \
        for (int64_t k = 0; k < n_; k++) {                                             \
            int64_t addr = (m)->offset - (lo);                                         \
            for (int d_ = 0; d_ < (m)->ndim; d_++)                                     \
                addr += idx_[d_] * (m)->strides[d_];                                   \
            body;                                                                      \
            for (int d_ = (m)->ndim - 1; d_ >= 0; d_--) {                              \
                if (++idx_[d_] < (m)->shape[d_])                                       \
                    break;                                                             \
                idx_[d_] = 0;                                                          \
            }                                                                          \
        }                                                                              \
    } while (0)

/* Note [View gradients]
 * A view op's gradient moves values between two layouts over one storage: the
 * output's gradient is scattered (summed) onto the storage addresses the view covers
 * and gathered back through the input's layout. The same routine serves every view
 * (permute, expand, slice, select, unfold, diagonal, as_strided, ...), overlapping
 * views (expand, unfold) included, and its own derivative is the same move in the
 * other direction, so double backward works. It costs a buffer spanning the addresses
 * both layouts reach. */
/* True when no two elements of layout m share an address (every view but expand,
 * unfold with overlapping windows, and as_strided with such strides). */
static bool meta_non_overlapping(const ct_input_meta *m) {
    int64_t size[CT_MAX_DIMS], stride[CT_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < m->ndim; d++) {
        if (m->shape[d] == 0)
            return true;
        if (m->shape[d] == 1)
            continue;
        if (m->strides[d] <= 0)
            return false;
        /* insertion sort by stride */
        int j = n++;
        for (; j > 0 && stride[j - 1] > m->strides[d]; j--) {
            stride[j] = stride[j - 1];
            size[j] = size[j - 1];
        }
        stride[j] = m->strides[d];
        size[j] = m->shape[d];
    }
    int64_t reach = 0; /* the farthest address the smaller dims reach */
    for (int i = 0; i < n; i++) {
        if (stride[i] <= reach)
            return false;
        reach += (size[i] - 1) * stride[i];
    }
    return true;
}

static bool meta_contiguous(const ct_input_meta *m) {
    int64_t expect = 1;
    for (int d = m->ndim - 1; d >= 0; d--) {
        if (m->shape[d] != 1 && m->strides[d] != expect)
            return false;
        expect *= m->shape[d];
    }
    return true;
}

/* The gradient move of Note [View gradients] when every element of `from` has an
 * address of its own: the values are copied (no sums needed) through strided views
 * with the copy kernels, in x's dtype. When `to` is contiguous and holds `from`'s
 * addresses, the buffer is the result itself. Runs without recording history. */
static ct_tensor *regeom_by_copy(const ct_tensor *x, const ct_input_meta *from, const ct_input_meta *to,
                                 int64_t lo, int64_t hi) {
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *out = NULL;
    ct_scope_begin();
    int64_t tlo = 0, thi = -1;
    if (geom_span(to, &tlo, &thi) && meta_contiguous(to) && tlo == lo && thi == hi) {
        ct_tensor *o = ct_zeros(to->shape, to->ndim, x->dtype, x->device);
        if (o && ct_copy_(ct_as_strided(o, from->shape, from->strides, from->ndim, from->offset - lo), x))
            out = ct_keep(o);
    } else {
        ct_tensor *buf = ct_zeros(CT_SHAPE(hi - lo + 1), x->dtype, x->device);
        if (buf && ct_copy_(ct_as_strided(buf, from->shape, from->strides, from->ndim, from->offset - lo), x))
            out = ct_keep(ct_clone(ct_as_strided(buf, to->shape, to->strides, to->ndim, to->offset - lo)));
    }
    ct_scope_end();
    ct_set_grad_enabled(prev);
    return out;
}

/* The general move: sums in double over a buffer spanning both layouts, on the CPU
 * (overlapping layouts are rare: expand and overlapping unfold windows). */
static ct_tensor *regeom_by_sum(const ct_tensor *x, const ct_input_meta *from, const ct_input_meta *to, int64_t lo,
                                int64_t hi) {
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *out = NULL;
    ct_scope_begin();
    ct_tensor *xc = ct_contiguous(ct_to_device(x, CT_CPU));
    ct_tensor *o = ct_zeros(to->shape, to->ndim, x->dtype, CT_CPU);
    double *buf = xc && o ? ct_xcalloc("backward", (size_t)(hi - lo + 1), sizeof(double)) : NULL;
    if (buf) {
        const char *xp = ct_tensor_ptr(xc);
        char *op = ct_tensor_ptr(o);
        size_t esz = ct_dtype_size(x->dtype);
        FOR_ADDR(from, lo, buf[addr] += ct_load_double(xp + (size_t)k * esz, x->dtype));
        FOR_ADDR(to, lo, ct_store_double(op + (size_t)k * esz, x->dtype, buf[addr]));
        free(buf);
        out = ct_keep(ct_to_device(o, x->device));
    }
    ct_scope_end();
    ct_set_grad_enabled(prev);
    return out;
}

ct_tensor *ct_ag_regeom(const ct_tensor *x, const ct_input_meta *from, const ct_input_meta *to) {
    int64_t lo1, hi1, lo2, hi2;
    ct_tensor *out;
    if (!geom_span(from, &lo1, &hi1) || !geom_span(to, &lo2, &hi2)) /* nothing to move */
        out = ct_zeros(to->shape, to->ndim, x->dtype, x->device);
    else if (meta_non_overlapping(from))
        out = regeom_by_copy(x, from, to, lo1 < lo2 ? lo1 : lo2, hi1 > hi2 ? hi1 : hi2);
    else
        out = regeom_by_sum(x, from, to, lo1 < lo2 ? lo1 : lo2, hi1 > hi2 ? hi1 : hi2);
    if (!out)
        return NULL;
    out->requires_grad = false;
    if (!ct_is_grad_enabled() || !x->requires_grad)
        return out;
    ct_node *n = ct_node_new(CT_NODE_INTERNAL, "AsStridedBackward0", 1);
    if (!n)
        return NULL;
    n->backward = regeom_backward;
    n->nout = 1;
    n->in_meta[0] = *from;
    n->in_meta[0].dtype = x->dtype;
    n->out_meta = *to;
    ct_status st = ct_edge_for(x, &n->edges[0]);
    if (st == CT_OK)
        st = ct_set_history(out, n, 0);
    ct_node_unref(n);
    return st == CT_OK ? out : NULL;
}

/* Note [In-place ops on views]
 * An in-place op on a view changes its base too. As PyTorch does, the base's history
 * is rebased onto a CopySlices node: given the base's gradient G, it takes the view's
 * part of G, runs the in-place op's own backward on it, and returns G with that part
 * replaced by the op's gradient for its self input (other inputs get theirs). The view
 * itself becomes a view of the base's new history. Other views of the same base made
 * before the op keep their old history (PyTorch regenerates theirs). */
static ct_status copy_slices_backward(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    ct_node *cs = ctx->node, *n = cs->wrapped;
    ct_tensor *gv;
    TRY(gv = ct_ag_regeom(G, &cs->in_meta[0], &cs->out_meta));
    ct_tensor **ngin = ct_xcalloc("backward", (size_t)n->nin, sizeof *ngin);
    if (!ngin)
        return ct_last_status();
    ct_node_ctx nctx = {.node = n, .create_graph = ctx->create_graph};
    ct_tensor *const ng[1] = {gv};
    ct_status st = n->backward(&nctx, ng, ngin);
    if (st != CT_OK) {
        free(ngin);
        return st;
    }
    ct_tensor *rest;
    ct_tensor *g0 = ngin[0];
    for (int i = 1; i < n->nin; i++)
        gin[i] = ngin[i];
    free(ngin);
    TRY(rest = ct_sub(G, ct_ag_regeom(gv, &cs->out_meta, &cs->in_meta[0])));
    if (g0) {
        if (g0->ndim != cs->out_meta.ndim ||
            memcmp(g0->shape, cs->out_meta.shape, sizeof(int64_t) * (size_t)g0->ndim) != 0)
            TRY(g0 = ct_ag_sum_to(g0, cs->out_meta.shape, cs->out_meta.ndim));
        TRY(rest = ct_add(rest, ct_ag_regeom(g0, &cs->out_meta, &cs->in_meta[0])));
    }
    gin[0] = rest;
    return CT_OK;
}

ct_status ct_rebase_view(ct_tensor *view, ct_node *n) {
    ct_tensor *base = view->base;
    ct_node *cs = ct_node_new(CT_NODE_INTERNAL, "CopySlices", n->nin);
    ct_node *vn = ct_node_new(CT_NODE_INTERNAL, "AsStridedBackward0", 1);
    ct_status st = cs && vn ? CT_OK : ct_last_status();
    if (st == CT_OK) {
        cs->backward = copy_slices_backward;
        cs->nout = 1;
        ct_node_ref(n);
        cs->wrapped = n;
        ct_input_meta_set(&cs->in_meta[0], base);
        ct_input_meta_set(&cs->out_meta, view);
        for (int i = 1; i < n->nin; i++) {
            cs->edges[i] = n->edges[i];
            ct_node_ref(cs->edges[i].fn);
            cs->in_meta[i] = n->in_meta[i];
        }
        st = ct_edge_for(base, &cs->edges[0]);
    }
    if (st == CT_OK)
        st = ct_set_history(base, cs, 0);
    if (st == CT_OK) {
        vn->backward = regeom_backward;
        vn->nout = 1;
        vn->in_meta[0] = cs->in_meta[0];
        vn->out_meta = cs->out_meta;
        ct_node_ref(cs);
        vn->edges[0] = (ct_edge){cs, 0};
        st = ct_set_history(view, vn, 0);
    }
    ct_node_unref(cs);
    ct_node_unref(vn);
    return st;
}

static ct_status pass_through(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    (void)ctx;
    gin[0] = G;
    return CT_OK;
}

/* Views that only regroup dims: the gradient is reshaped back. */
static ct_status reshape_back(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    TRY(gin[0] = ct_reshape(G, ctx->node->in_meta[0].shape, ctx->node->in_meta[0].ndim));
    return CT_OK;
}

DEF(view, 0) { return reshape_back(ctx, gout, gin); }
DEF(reshape, 0) { return reshape_back(ctx, gout, gin); }
DEF(squeeze, 0) { return reshape_back(ctx, gout, gin); }
DEF(squeeze_dim, 0) { return reshape_back(ctx, gout, gin); }
DEF(unsqueeze, 0) { return reshape_back(ctx, gout, gin); }
DEF(flatten, 0) { return reshape_back(ctx, gout, gin); }
DEF(unflatten, 0) { return reshape_back(ctx, gout, gin); }
/* Reorderings and broadcasts have cheap exact inverses. */
DEF(permute, 0) {
    const ct_node *n = ctx->node;
    int64_t inv[CT_MAX_DIMS];
    for (int i = 0; i < n->nints; i++)
        inv[n->ints[i] < 0 ? n->ints[i] + n->nints : n->ints[i]] = i;
    TRY(gin[0] = ct_permute(G, inv, n->nints));
    return CT_OK;
}

DEF(transpose, 0) {
    TRY(gin[0] = ct_transpose(G, (int)ctx->node->ints[0], (int)ctx->node->ints[1]));
    return CT_OK;
}

DEF(t, 0) {
    TRY(gin[0] = ct_t(G));
    return CT_OK;
}

DEF(movedim, 0) {
    TRY(gin[0] = ct_movedim(G, (int)ctx->node->ints[1], (int)ctx->node->ints[0]));
    return CT_OK;
}

DEF(expand, 0) {
    TRY(gin[0] = ct_ag_sum_to(G, ctx->node->in_meta[0].shape, ctx->node->in_meta[0].ndim));
    return CT_OK;
}
DEF(narrow, 0) { return regeom_backward(ctx, gout, gin); }
DEF(slice, 0) { return regeom_backward(ctx, gout, gin); }
DEF(select, 0) { return regeom_backward(ctx, gout, gin); }
DEF(unfold, 0) { return regeom_backward(ctx, gout, gin); }
DEF(diagonal, 0) { return regeom_backward(ctx, gout, gin); }
DEF(as_strided, 0) { return regeom_backward(ctx, gout, gin); }
DEF(alias, 0) { return pass_through(ctx, gout, gin); }


DEF(clone, 0) { return pass_through(ctx, gout, gin); }
DEF(contiguous, 0) { return pass_through(ctx, gout, gin); }
/* The engine casts the gradient back to the input's dtype. */
DEF(to_dtype, 0) { return pass_through(ctx, gout, gin); }

/* dst is overwritten: its old value gets no gradient; src gets the gradient, summed
 * over the dims it was broadcast along. */
DEF(copy, 0) {
    if (WANT(1))
        gin[1] = G;
    return CT_OK;
}

/* ------------------------------------------------------------------ shape and indexing */

/* Ops without a derivative in a family that has them: the table still needs an entry. */
#define NONDIFF(op)                                                                                 \
    DEF(op, 0) {                                                                                    \
        (void)gout, (void)gin;                                                                      \
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, ctx->node->name, "the derivative for '%s' is not " \
                        "implemented", #op);                                                        \
    }

static int wrap_dim(int64_t d, int ndim) { return (int)(d < 0 ? d + (ndim > 0 ? ndim : 1) : d); }

static ct_tensor *zeros_of(const ct_input_meta *m, const ct_tensor *like) {
    return ct_zeros(m->shape, m->ndim, like->dtype, like->device);
}

/* Each input gets its slice of the gradient; the 1-D empty inputs cat skips get none. */
DEF(cat, 0) {
    ct_node *n = ctx->node;
    int ndim = n->out_meta.ndim;
    int dim = wrap_dim(n->ints[0], ndim);
    int64_t off = 0;
    for (int i = 0; i < n->nin; i++) {
        const ct_input_meta *m = &n->in_meta[i];
        if (m->ndim == 1 && m->shape[0] == 0 && ndim != 1)
            continue;
        if (WANT(i))
            TRY(gin[i] = ct_narrow(G, dim, off, m->shape[dim]));
        off += m->shape[dim];
    }
    return CT_OK;
}

DEF(flip, 0) {
    TRY(gin[0] = ct_flip(G, ctx->node->ints, ctx->node->nints));
    return CT_OK;
}

DEF(tril, 0) {
    TRY(gin[0] = ct_tril(G, ctx->node->ints[0]));
    return CT_OK;
}

DEF(triu, 0) {
    TRY(gin[0] = ct_triu(G, ctx->node->ints[0]));
    return CT_OK;
}

DEF(index_select, CT_SAVE_IN1) {
    ct_tensor *idx;
    TRY(idx = saved(ctx, 1));
    TRY(gin[0] = ct_index_add(zeros_of(&ctx->node->in_meta[0], G), ctx->node->ints[0], idx, G, ct_scalar_int(1)));
    return CT_OK;
}

DEF(gather, CT_SAVE_IN1) {
    ct_tensor *idx;
    TRY(idx = saved(ctx, 1));
    TRY(gin[0] = ct_scatter_add(zeros_of(&ctx->node->in_meta[0], G), ctx->node->ints[0], idx, G));
    return CT_OK;
}

DEF(scatter_add, CT_SAVE_IN1) {
    if (WANT(0))
        gin[0] = G;
    if (WANT(2)) {
        ct_tensor *idx;
        TRY(idx = saved(ctx, 1));
        TRY(gin[2] = ct_gather(G, ctx->node->ints[0], idx));
    }
    return CT_OK;
}

DEF(index_add, CT_SAVE_IN1) {
    if (WANT(0))
        gin[0] = G;
    if (WANT(2)) {
        ct_tensor *idx;
        TRY(idx = saved(ctx, 1));
        TRY(gin[2] = scale(ct_index_select(G, ctx->node->ints[0], idx), alpha_of(ctx->node)));
    }
    return CT_OK;
}

DEF(masked_fill, CT_SAVE_IN1) {
    ct_tensor *mask;
    TRY(mask = saved(ctx, 1));
    TRY(gin[0] = ct_masked_fill(G, mask, ct_scalar_int(0)));
    return CT_OK;
}

/* Values selected by index along dim: the gradient goes back to where each came from. */
static ct_status select_by_index_backward(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin, int64_t dim) {
    ct_tensor *idx;
    TRY(idx = saved(ctx, CT_SAVED_OUT1));
    TRY(gin[0] = ct_scatter_add(zeros_of(&ctx->node->in_meta[0], G), dim, idx, G));
    return CT_OK;
}

DEF(sort, CT_SAVE_OUT1) { return select_by_index_backward(ctx, gout, gin, ctx->node->ints[0]); }
DEF(topk, CT_SAVE_OUT1) { return select_by_index_backward(ctx, gout, gin, ctx->node->ints[1]); }

NONDIFF(nonzero)

/* ------------------------------------------------------------------ neural-network kernels */

/* Note [Conv double backward]
 * The conv2d_backward kernel is not differentiable, so under create_graph conv2d's
 * gradients are written with ops that are: the input's is conv_transpose2d of the
 * gradient with the same weight (output_padding restores the input's size), the
 * weight's is a conv2d of the input by the gradient (batch and channels swapped,
 * stride and dilation exchanged, the groups side by side along the batch) cut to the
 * kernel's size, the bias's a sum. conv_transpose2d's gradients are the same two
 * formulas the other way round, so derivatives of any order work, as with PyTorch's
 * _convolution_double_backward. Without create_graph the fused kernel runs. */

/* The gradient g of conv2d(x, w) brought to x (whose layout is xm). */
static ct_tensor *conv2d_input_grad(const ct_tensor *g, const ct_tensor *w, const ct_input_meta *xm,
                                    const int64_t *stride, const int64_t *pad, const int64_t *dil, int64_t groups) {
    int64_t opad[2];
    for (int i = 0; i < 2; i++) {
        int64_t k = w->shape[2 + i], h = xm->shape[xm->ndim - 2 + i], oh = g->shape[g->ndim - 2 + i];
        opad[i] = h + 2 * pad[i] - dil[i] * (k - 1) - 1 - (oh - 1) * stride[i];
    }
    return ct_conv_transpose2d(g, w, NULL, stride, pad, opad, groups, dil);
}

/* The gradient g of conv2d(x, w) brought to w (kernel kh x kw): for each group,
 * gw[o, c] = sum over n of x[n, c] correlated with g[n, o] at stride dil and
 * dilation stride. */
static ct_tensor *conv2d_weight_grad(const ct_tensor *x, const ct_tensor *g, int64_t kh, int64_t kw,
                                     const int64_t *stride, const int64_t *pad, const int64_t *dil, int64_t groups) {
    if (ct_tensor_dim(x) == 3) {
        x = ct_unsqueeze(x, 0);
        g = x ? ct_unsqueeze(g, 0) : NULL;
        if (!g)
            return NULL;
    }
    int64_t n = x->shape[0], cg = x->shape[1] / groups, h = x->shape[2], w = x->shape[3];
    int64_t s5[5] = {n, groups, cg, h, w}, perm[5] = {2, 1, 0, 3, 4}, s4[4] = {cg, groups * n, h, w};
    ct_tensor *xv = ct_reshape(ct_permute(ct_reshape(x, s5, 5), perm, 5), s4, 4);
    ct_tensor *r = ct_conv2d(xv, ct_transpose(g, 0, 1), NULL, dil, pad, stride, groups);
    return ct_transpose(ct_narrow(ct_narrow(r, 2, 0, kh), 3, 0, kw), 0, 1);
}

/* The bias's gradient: g summed over all but the channel dim ((N, O, H, W) or
 * unbatched (O, H, W)). */
static ct_tensor *conv2d_bias_grad(const ct_tensor *g) {
    static const int64_t batched[3] = {0, 2, 3}, unbatched[2] = {1, 2};
    bool b = ct_tensor_dim(g) == 4;
    return ct_sum(g, b ? batched : unbatched, b ? 3 : 2, false, CT_DTYPE_UNDEFINED);
}

/* ints: stride[2], padding[2], dilation[2], groups. Through the conv2d_backward kernel,
 * or with ops under create_graph (Note [Conv double backward]). */
DEF(conv2d, CT_SAVE_IN0 | CT_SAVE_IN1) {
    ct_node *n = ctx->node;
    ct_tensor *x, *w;
    TRY(x = saved(ctx, 0));
    TRY(w = saved(ctx, 1));
    const int64_t *stride = n->ints, *pad = n->ints + 2, *dil = n->ints + 4;
    int64_t groups = n->ints[6];
    if (ctx->create_graph) {
        if (WANT(0))
            TRY(gin[0] = conv2d_input_grad(G, w, &n->in_meta[0], stride, pad, dil, groups));
        if (WANT(1))
            TRY(gin[1] = conv2d_weight_grad(x, G, w->shape[2], w->shape[3], stride, pad, dil, groups));
        if (WANT(2))
            TRY(gin[2] = conv2d_bias_grad(G));
        return CT_OK;
    }
    return ct_conv2d_backward(G, x, w, stride, pad, dil, groups, WANT(0) ? &gin[0] : NULL, WANT(1) ? &gin[1] : NULL,
                              WANT(2) ? &gin[2] : NULL);
}

/* The indices are flat h * W + w positions in each input plane: a scatter over the
 * flattened planes, differentiable again. On the CPU without create_graph the
 * max_pool2d_backward kernel does the same scatter in one pass; it reads only the
 * input's shape and dtype, which a zero-stride view gives without the input. */
DEF(max_pool2d_with_indices, CT_SAVE_OUT1) {
    const ct_input_meta *m = &ctx->node->in_meta[0];
    ct_tensor *idx;
    TRY(idx = saved(ctx, CT_SAVED_OUT1));
    if (!ctx->create_graph && fused_device(G->device)) {
        ct_tensor *like;
        TRY(like = ct_expand(ct_zeros(NULL, 0, m->dtype, G->device), m->shape, m->ndim));
        TRY(gin[0] = ct_max_pool2d_backward(G, like, idx));
        return CT_OK;
    }
    int64_t flat[CT_MAX_DIMS];
    memcpy(flat, m->shape, (size_t)m->ndim * sizeof *flat);
    flat[m->ndim - 2] = m->shape[m->ndim - 2] * m->shape[m->ndim - 1];
    ct_tensor *z;
    TRY(z = ct_zeros(flat, m->ndim - 1, G->dtype, G->device));
    TRY(z = ct_scatter_add(z, -1, ct_flatten(idx, -2, -1), ct_flatten(G, -2, -1)));
    TRY(gin[0] = ct_view(z, m->shape, m->ndim));
    return CT_OK;
}

NONDIFF(conv2d_backward)
NONDIFF(max_pool2d_backward)
NONDIFF(threshold_backward)

/* ------------------------------------------------------------------ advanced indexing */

/* Writes go to index: t's gradient loses those positions; src gets what was read there. */
DEF(scatter, CT_SAVE_IN1) {
    ct_node *n = ctx->node;
    ct_tensor *idx;
    TRY(idx = saved(ctx, 1));
    if (WANT(0))
        TRY(gin[0] = ct_scatter_value(G, n->ints[0], idx, ct_scalar_int(0)));
    if (n->nin > 2 && WANT(2))
        TRY(gin[2] = ct_gather(G, n->ints[0], idx));
    return CT_OK;
}

/* "sum" only; the other reductions' derivatives are not implemented. */
DEF(scatter_reduce, CT_SAVE_IN1) {
    ct_node *n = ctx->node;
    if (n->ints[1] != 0)
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, n->name,
                        "the derivative of scatter_reduce is implemented for reduce=\"sum\" only");
    ct_tensor *idx;
    TRY(idx = saved(ctx, 1));
    if (WANT(0))
        TRY(gin[0] = n->ints[2] ? G : ct_scatter_value(G, n->ints[0], idx, ct_scalar_int(0)));
    if (WANT(2))
        TRY(gin[2] = ct_gather(G, n->ints[0], idx));
    return CT_OK;
}

DEF(index_copy, CT_SAVE_IN1) {
    ct_node *n = ctx->node;
    ct_tensor *idx;
    TRY(idx = saved(ctx, 1));
    if (WANT(0))
        TRY(gin[0] = ct_index_fill(G, n->ints[0], idx, ct_scalar_int(0)));
    if (WANT(2))
        TRY(gin[2] = ct_index_select(G, n->ints[0], idx));
    return CT_OK;
}

DEF(index_fill, CT_SAVE_IN1) {
    ct_tensor *idx;
    TRY(idx = saved(ctx, 1));
    TRY(gin[0] = ct_index_fill(G, ctx->node->ints[0], idx, ct_scalar_int(0)));
    return CT_OK;
}

/* t viewed as 1-D: the gradient is accumulated back at the (possibly negative or
 * repeated) flat indices. */
DEF(take, CT_SAVE_IN1) {
    const ct_input_meta *m = &ctx->node->in_meta[0];
    ct_tensor *idx, *z;
    TRY(idx = saved(ctx, 1));
    int64_t numel = ct_shape_numel(m->shape, m->ndim);
    TRY(z = ct_zeros(&numel, 1, G->dtype, G->device));
    const ct_tensor *ix[1] = {ct_reshape(idx, CT_SHAPE(-1))};
    TRY(ix[0]);
    TRY(z = ct_index_put(z, ix, 1, ct_reshape(G, CT_SHAPE(-1)), true));
    TRY(gin[0] = ct_reshape(z, m->shape, m->ndim));
    return CT_OK;
}

/* The broadcast shape of two inputs' shapes. */
static void broadcast_meta(const ct_input_meta *a, const ct_input_meta *b, int64_t *shape, int *ndim) {
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - a->ndim), ib = i - (n - b->ndim);
        int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
        shape[i] = sa == 1 ? sb : sa;
    }
    *ndim = n;
}

DEF(masked_select, CT_SAVE_IN1) {
    ct_tensor *mask, *z;
    int64_t shape[CT_MAX_DIMS];
    int nd;
    TRY(mask = saved(ctx, 1));
    broadcast_meta(&ctx->node->in_meta[0], &ctx->node->in_meta[1], shape, &nd);
    TRY(z = ct_zeros(shape, nd, G->dtype, G->device));
    TRY(gin[0] = ct_masked_scatter(z, mask, G));
    return CT_OK;
}

/* src's first count(mask) elements went out; the rest get no gradient. */
DEF(masked_scatter, CT_SAVE_IN1) {
    ct_tensor *mask;
    TRY(mask = saved(ctx, 1));
    if (WANT(0))
        TRY(gin[0] = ct_masked_fill(G, mask, ct_scalar_int(0)));
    if (WANT(2)) {
        const ct_input_meta *m = &ctx->node->in_meta[2];
        ct_tensor *sel;
        TRY(sel = ct_masked_select(G, mask));
        int64_t rest = ct_shape_numel(m->shape, m->ndim) - ct_tensor_numel(sel);
        if (rest > 0) {
            const ct_tensor *parts[2] = {sel, ct_zeros(&rest, 1, G->dtype, G->device)};
            TRY(parts[1]);
            TRY(sel = ct_cat(parts, 2, 0));
        }
        TRY(gin[2] = ct_reshape(sel, m->shape, m->ndim));
    }
    return CT_OK;
}

DEF(kthvalue, CT_SAVE_OUT1) {
    ct_node *n = ctx->node;
    const ct_input_meta *m = &n->in_meta[0];
    ct_tensor *idx, *g = G;
    TRY(idx = saved(ctx, CT_SAVED_OUT1));
    int dim = wrap_dim(n->ints[1], m->ndim);
    if (!n->ints[2] && m->ndim > 0) { /* put the reduced dim back */
        TRY(idx = ct_unsqueeze(idx, dim));
        TRY(g = ct_unsqueeze(G, dim));
    }
    TRY(gin[0] = ct_scatter_add(zeros_of(m, G), dim, idx, g));
    return CT_OK;
}

DEF(index, CT_SAVE_LIST) {
    ct_node *n = ctx->node;
    if (n->saved_freed)
        return ct_node_saved(ctx, 0) ? CT_OK : ct_last_status();
    TRY(gin[0] = ct_index_put(zeros_of(&n->in_meta[0], G), (const ct_tensor *const *)n->saved_list,
                              n->nsaved_list, G, true));
    return CT_OK;
}

/* t[indices] = values: t keeps the gradient outside the written positions (all of it
 * when accumulating), values get what was read at them. */
DEF(index_put, CT_SAVE_LIST) {
    ct_node *n = ctx->node;
    if (n->saved_freed)
        return ct_node_saved(ctx, 0) ? CT_OK : ct_last_status();
    const ct_tensor *const *ix = (const ct_tensor *const *)n->saved_list;
    if (WANT(0)) {
        if (n->ints[0]) {
            gin[0] = G;
        } else {
            ct_tensor *zero;
            TRY(zero = ct_zeros(NULL, 0, G->dtype, G->device));
            TRY(gin[0] = ct_index_put(G, ix, n->nsaved_list, zero, false));
        }
    }
    if (WANT(1))
        TRY(gin[1] = ct_index(G, ix, n->nsaved_list));
    return CT_OK;
}

/* Constant padding: negative padding crops, so the gradient is the opposite padding.
 * The other modes sum the gradient back along pad's mapping: pad_backward (Note
 * [pad_backward] in src/meta/pad.c). */
DEF(pad, 0) {
    ct_node *n = ctx->node;
    int npad = n->nints - 1, mode = (int)n->ints[npad];
    if (mode != CT_PAD_CONSTANT) {
        TRY(gin[0] = ct_pad_backward(G, n->in_meta[0].shape, n->in_meta[0].ndim, n->ints, npad,
                                     ct_pad_mode_name(mode)));
        return CT_OK;
    }
    int64_t neg[2 * CT_MAX_DIMS];
    for (int i = 0; i < npad; i++)
        neg[i] = -n->ints[i];
    TRY(gin[0] = ct_pad(G, neg, npad, "constant", 0));
    return CT_OK;
}

/* pad_backward is linear in grad_output: its derivative is pad with the same list and
 * mode (ints: ndim, the input's sizes, the list's length, the list, the mode). */
DEF(pad_backward, 0) {
    ct_node *n = ctx->node;
    int nd = (int)n->ints[0], npad = (int)n->ints[1 + nd];
    TRY(gin[0] = ct_pad(G, n->ints + 2 + nd, npad, ct_pad_mode_name((int)n->ints[n->nints - 1]), 0));
    return CT_OK;
}

NONDIFF(unique)
NONDIFF(unique_consecutive)

/* ------------------------------------------------------------------ reductions and scans */

/* The reduced dims of a reduction node and the shape its output has with keepdim. */
typedef struct {
    uint32_t mask;
    int64_t kshape[CT_MAX_DIMS];
    int ndim;
    int64_t n; /* elements reduced into each output element */
    bool keepdim;
    int64_t dims[CT_MAX_DIMS];
    int ndims;
} red_info;

static ct_status red_of(const ct_node *nd, red_info *r) {
    const ct_input_meta *m = &nd->in_meta[0];
    int nd_ = (int)nd->ints[CT_RED_INT_NDIMS];
    ct_status st = ct_reduce_parse_dims(ct_op_name(nd->op), m->ndim, nd_ ? &nd->ints[CT_RED_INT_DIMS] : NULL, nd_,
                                        &r->mask);
    if (st != CT_OK)
        return st;
    r->keepdim = nd->ints[CT_RED_INT_KEEPDIM] != 0;
    r->ndim = m->ndim;
    r->n = 1;
    r->ndims = 0;
    for (int d = 0; d < m->ndim; d++) {
        bool red = (r->mask >> d) & 1u;
        r->kshape[d] = red ? 1 : m->shape[d];
        if (red) {
            r->n *= m->shape[d];
            r->dims[r->ndims++] = d;
        }
    }
    return CT_OK;
}

/* A reduction result (or its gradient) with the reduced dims back as size 1. */
static ct_tensor *keep(const ct_tensor *t, const red_info *r) {
    return r->keepdim ? (ct_tensor *)t : ct_reshape(t, r->kshape, r->ndim);
}

/* ... and broadcast over the input's shape. */
static ct_tensor *spread(const ct_tensor *t, const red_info *r, const ct_input_meta *m) {
    ct_tensor *k = keep(t, r);
    return k ? ct_expand(k, m->shape, m->ndim) : NULL;
}

static ct_tensor *not_nan(const ct_tensor *x) { return ct_eq(x, x); }

#define RED_BEGIN                                                                     \
    ct_node *nd = ctx->node;                                                          \
    const ct_input_meta *m = &nd->in_meta[0];                                         \
    red_info r;                                                                       \
    ct_status st_ = red_of(nd, &r);                                                   \
    if (st_ != CT_OK)                                                                 \
        return st_;                                                                   \
    (void)m

DEF(sum, 0) {
    RED_BEGIN;
    TRY(gin[0] = spread(G, &r, m));
    return CT_OK;
}

DEF(nansum, CT_SAVE_IN0) {
    RED_BEGIN;
    ct_tensor *x;
    TRY(x = saved(ctx, 0));
    TRY(gin[0] = ct_mul(spread(G, &r, m), not_nan(x)));
    return CT_OK;
}

DEF(mean, 0) {
    RED_BEGIN;
    TRY(gin[0] = ct_mul_scalar(spread(G, &r, m), ct_scalar_float(1.0 / (double)r.n)));
    return CT_OK;
}

DEF(nanmean, CT_SAVE_IN0) {
    RED_BEGIN;
    ct_tensor *x, *ok, *cnt;
    TRY(x = saved(ctx, 0));
    TRY(ok = not_nan(x));
    TRY(cnt = ct_sum(ok, r.dims, r.ndims, true, G->dtype));
    TRY(gin[0] = ct_div(ct_mul(spread(G, &r, m), ok), cnt));
    return CT_OK;
}

/* Exact with zeros: where x is 0 the gradient is the product of the others, which is
 * nonzero only when that zero is the only one. */
DEF(prod, CT_SAVE_IN0 | CT_SAVE_OUT) {
    RED_BEGIN;
    ct_tensor *x, *y, *zero, *safe, *p1, *nz;
    TRY(x = saved(ctx, 0));
    TRY(y = saved(ctx, OUT_SLOT));
    TRY(zero = ct_eq_scalar(x, ct_scalar_int(0)));
    TRY(safe = ct_masked_fill(x, zero, ct_scalar_int(1)));
    ct_tensor *gy = ct_mul(keep(G, &r), keep(y, &r));
    TRY(gy);
    ct_tensor *part = ct_masked_fill(ct_div(ct_expand(gy, m->shape, m->ndim), safe), zero, ct_scalar_int(0));
    TRY(part);
    TRY(p1 = ct_prod(safe, r.dims, r.ndims, true, CT_DTYPE_UNDEFINED));
    TRY(nz = ct_sum(zero, r.dims, r.ndims, true, CT_DTYPE_UNDEFINED));
    ct_tensor *lone = ct_mul(ct_mul(keep(G, &r), p1), ct_eq_scalar(nz, ct_scalar_int(1)));
    TRY(lone);
    TRY(gin[0] = ct_add(part, ct_mul(ct_expand(lone, m->shape, m->ndim), zero)));
    return CT_OK;
}

/* The gradient is shared evenly among the elements equal to the result. */
static ct_status evenly(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin, const red_info *r) {
    const ct_input_meta *m = &ctx->node->in_meta[0];
    ct_tensor *x, *y, *hit, *cnt;
    TRY(x = saved(ctx, 0));
    TRY(y = saved(ctx, OUT_SLOT));
    TRY(hit = ct_eq(x, spread(y, r, m)));
    TRY(cnt = ct_sum(hit, r->dims, r->ndims, true, G->dtype));
    TRY(gin[0] = ct_div(ct_mul(spread(G, r, m), hit), cnt));
    return CT_OK;
}

DEF(amax, CT_SAVE_IN0 | CT_SAVE_OUT) {
    RED_BEGIN;
    return evenly(ctx, gout, gin, &r);
}

DEF(amin, CT_SAVE_IN0 | CT_SAVE_OUT) {
    RED_BEGIN;
    return evenly(ctx, gout, gin, &r);
}

DEF(logsumexp, CT_SAVE_IN0 | CT_SAVE_OUT) {
    RED_BEGIN;
    ct_tensor *x, *y;
    TRY(x = saved(ctx, 0));
    TRY(y = saved(ctx, OUT_SLOT));
    TRY(gin[0] = ct_mul(spread(G, &r, m), ct_exp(ct_sub(x, spread(y, &r, m)))));
    return CT_OK;
}

/* max(a) shares among ties; max_dim routes to the index it returned. */
static ct_status minmax_red(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    RED_BEGIN;
    if (nd->nout < 2)
        return evenly(ctx, gout, gin, &r);
    ct_tensor *idx;
    TRY(idx = saved(ctx, CT_SAVED_OUT1));
    TRY(gin[0] = ct_scatter_add(zeros_of(m, G), r.dims[0], keep(idx, &r), keep(G, &r)));
    return CT_OK;
}

DEF(max, CT_SAVE_IN0 | CT_SAVE_OUT | CT_SAVE_OUT1) { return minmax_red(ctx, gout, gin); }
DEF(min, CT_SAVE_IN0 | CT_SAVE_OUT | CT_SAVE_OUT1) { return minmax_red(ctx, gout, gin); }

/* d var = 2 (x - mean) / (N - correction); d std = d var / (2 std), 0 where std is 0. */
static ct_status var_std(ct_node_ctx *ctx, ct_tensor *gvar, ct_tensor *gstd, ct_tensor *gmean, ct_tensor **gin) {
    RED_BEGIN;
    double corr = nd->nscalars ? ct_scalar_to_double(nd->s[0]) : 1.0;
    double denom = (double)r.n - corr;
    ct_tensor *acc = NULL;
    if (gvar || gstd) {
        ct_tensor *x, *dev, *g;
        TRY(x = saved(ctx, 0));
        TRY(dev = ct_sub(x, ct_mean(x, r.dims, r.ndims, true, CT_DTYPE_UNDEFINED)));
        if (gstd) {
            ct_tensor *y;
            TRY(y = saved(ctx, OUT_SLOT));
            ct_tensor *yk = keep(y, &r);
            TRY(yk);
            /* 1 / std, with 0 instead of infinity where std is 0 */
            ct_tensor *z = ct_eq_scalar(yk, ct_scalar_int(0));
            TRY(z);
            TRY(g = ct_masked_fill(ct_div(keep(gstd, &r), ct_masked_fill(yk, z, ct_scalar_int(1))), z,
                                   ct_scalar_int(0)));
        } else {
            TRY(g = ct_mul_scalar(keep(gvar, &r), ct_scalar_int(2)));
        }
        TRY(acc = ct_mul_scalar(ct_mul(ct_expand(g, m->shape, m->ndim), dev), ct_scalar_float(1.0 / denom)));
    }
    if (gmean) {
        ct_tensor *gm = ct_mul_scalar(spread(gmean, &r, m), ct_scalar_float(1.0 / (double)r.n));
        TRY(gm);
        TRY(acc = acc ? ct_add(acc, gm) : gm);
    }
    gin[0] = acc;
    return CT_OK;
}

DEF(var, CT_SAVE_IN0) { return var_std(ctx, G, NULL, NULL, gin); }
DEF(std, CT_SAVE_IN0 | CT_SAVE_OUT) { return var_std(ctx, NULL, G, NULL, gin); }
DEF(var_mean, CT_SAVE_IN0) { return var_std(ctx, gout[0], NULL, gout[1], gin); }
DEF(std_mean, CT_SAVE_IN0 | CT_SAVE_OUT) { return var_std(ctx, NULL, gout[0], gout[1], gin); }

/* |x|^e as exp(e log|x|), with 0 where x is 0 (where the formulas need the subgradient
 * 0: norms at zero). */
static ct_tensor *abs_pow_masked(const ct_tensor *x, const ct_tensor *zero, double e) {
    ct_tensor *a = ct_masked_fill(ct_abs(x), zero, ct_scalar_int(1));
    ct_tensor *p = a ? ct_exp(ct_mul_scalar(ct_log(a), ct_scalar_float(e))) : NULL;
    return p ? ct_masked_fill(p, zero, ct_scalar_int(0)) : NULL;
}

static ct_tensor *sign_of(const ct_tensor *x) {
    return ct_sub(ct_to_dtype(ct_gt_scalar(x, ct_scalar_int(0)), x->dtype),
                  ct_to_dtype(ct_lt_scalar(x, ct_scalar_int(0)), x->dtype));
}

/* Vector p-norms: d ||x||_p = sign(x) |x|^(p-1) / ||x||^(p-1); 0 where the norm is 0.
 * inf/-inf share among the elements that reach the maximum/minimum |x|. */
static ct_status pnorm(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    RED_BEGIN;
    double p = ct_scalar_to_double(nd->s[0]);
    ct_tensor *x, *y, *gx;
    TRY(x = saved(ctx, 0));
    TRY(y = saved(ctx, OUT_SLOT));
    ct_tensor *gk = keep(G, &r), *yk = keep(y, &r);
    TRY(gk && yk);
    if (p == 0) {
        gin[0] = NULL; /* the count of nonzeros: zero gradient */
        return CT_OK;
    }
    if (isinf(p)) {
        ct_tensor *ax = ct_abs(x), *hit, *cnt;
        TRY(ax);
        TRY(hit = ct_eq(ax, ct_expand(yk, m->shape, m->ndim)));
        TRY(cnt = ct_sum(hit, r.dims, r.ndims, true, G->dtype));
        TRY(gin[0] = ct_div(ct_mul(ct_mul(ct_expand(gk, m->shape, m->ndim), hit), sign_of(x)), cnt));
        return CT_OK;
    }
    ct_tensor *zx = ct_eq_scalar(x, ct_scalar_int(0)), *zy = ct_eq_scalar(yk, ct_scalar_int(0));
    TRY(zx && zy);
    if (p == 1) {
        TRY(gx = sign_of(x));
    } else if (p == 2) {
        gx = ct_tensor_ref(x);
    } else {
        TRY(gx = ct_mul(sign_of(x), abs_pow_masked(x, zx, p - 1)));
    }
    ct_tensor *den = p == 1 ? NULL : p == 2 ? yk : abs_pow_masked(yk, zy, p - 1);
    ct_tensor *scale_ = gk;
    if (den)
        TRY(scale_ = ct_masked_fill(ct_div(gk, ct_masked_fill(den, zy, ct_scalar_int(1))), zy, ct_scalar_int(0)));
    TRY(gin[0] = ct_mul(ct_expand(scale_, m->shape, m->ndim), gx));
    return CT_OK;
}

DEF(norm, CT_SAVE_IN0 | CT_SAVE_OUT) { return pnorm(ctx, gout, gin); }
DEF(linalg_vector_norm, CT_SAVE_IN0 | CT_SAVE_OUT) { return pnorm(ctx, gout, gin); }

/* d sum |x|^p = p sign(x) |x|^(p-1). */
DEF(linalg__powsum, CT_SAVE_IN0) {
    RED_BEGIN;
    double p = ct_scalar_to_double(nd->s[0]);
    ct_tensor *x, *zx;
    TRY(x = saved(ctx, 0));
    if (p == 0) {
        gin[0] = NULL;
        return CT_OK;
    }
    TRY(zx = ct_eq_scalar(x, ct_scalar_int(0)));
    ct_tensor *d = p == 1 ? sign_of(x) : p == 2 ? ct_tensor_ref(x) : ct_mul(sign_of(x), abs_pow_masked(x, zx, p - 1));
    TRY(d);
    TRY(gin[0] = ct_mul(ct_mul_scalar(spread(G, &r, m), ct_scalar_float(p == 2 ? 2.0 : p)), d));
    return CT_OK;
}

NONDIFF(all)
NONDIFF(any)
NONDIFF(count_nonzero)
NONDIFF(argmax)
NONDIFF(argmin)

/* Scans run along the one dim in ints[CT_RED_INT_DIMS]. */
static int64_t scan_dim(const ct_node *nd) { return nd->ints[CT_RED_INT_DIMS]; }

static ct_tensor *reverse_cumsum(const ct_tensor *g, int64_t dim) {
    int64_t d[1] = {dim};
    return ct_flip(ct_cumsum(ct_flip(g, d, 1), dim, CT_DTYPE_UNDEFINED), d, 1);
}

DEF(cumsum, 0) {
    TRY(gin[0] = reverse_cumsum(G, scan_dim(ctx->node)));
    return CT_OK;
}

/* sum_{j >= i} g_j y_j / x_i; inputs with zeros are refused rather than answered wrong. */
DEF(cumprod, CT_SAVE_IN0 | CT_SAVE_OUT) {
    ct_tensor *x, *y, *anyz;
    TRY(x = saved(ctx, 0));
    TRY(y = saved(ctx, OUT_SLOT));
    TRY(anyz = ct_any(ct_eq_scalar(x, ct_scalar_int(0)), NULL, 0, false));
    double v = 0;
    ct_item_double(anyz, &v);
    if (v != 0)
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, ctx->node->name,
                        "the derivative of cumprod for an input containing zeros is not implemented");
    TRY(gin[0] = ct_div(reverse_cumsum(ct_mul(G, y), scan_dim(ctx->node)), x));
    return CT_OK;
}

static ct_status scan_idx(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    ct_tensor *idx;
    TRY(idx = saved(ctx, CT_SAVED_OUT1));
    TRY(gin[0] = ct_scatter_add(zeros_of(&ctx->node->in_meta[0], G), scan_dim(ctx->node), idx, G));
    return CT_OK;
}

DEF(cummax, CT_SAVE_OUT1) { return scan_idx(ctx, gout, gin); }
DEF(cummin, CT_SAVE_OUT1) { return scan_idx(ctx, gout, gin); }

DEF(softmax, CT_SAVE_OUT) {
    ct_tensor *y, *gy;
    int64_t d[1] = {scan_dim(ctx->node)};
    TRY(y = saved(ctx, OUT_SLOT));
    TRY(gy = ct_mul(G, y));
    TRY(gin[0] = ct_sub(gy, ct_mul(y, ct_sum(gy, d, 1, true, CT_DTYPE_UNDEFINED))));
    return CT_OK;
}

DEF(log_softmax, CT_SAVE_OUT) {
    ct_tensor *y;
    int64_t d[1] = {scan_dim(ctx->node)};
    TRY(y = saved(ctx, OUT_SLOT));
    TRY(gin[0] = ct_sub(G, ct_mul(ct_exp(y), ct_sum(G, d, 1, true, CT_DTYPE_UNDEFINED))));
    return CT_OK;
}

/* ------------------------------------------------------------------ more elementwise ops
 * PyTorch's formulas (derivatives.yaml), written with public ct ops. */

static ct_tensor *cmul(const ct_tensor *x, double c) { return ct_mul_scalar(x, ct_scalar_float(c)); }
static ct_tensor *cadd(const ct_tensor *x, double c) { return ct_add_scalar(x, ct_scalar_float(c)); }
/* c - x */
static ct_tensor *rsubc(const ct_tensor *x, double c) { return cadd(ct_neg(x), c); }
static double param(const ct_node *n, int i) { return ct_scalar_to_double(n->s[i]); }

/* Piecewise-constant ops: a zero gradient (not none), as PyTorch. */
#define ZERO_GRAD(op)                                                                     \
    DEF(op, 0) {                                                                          \
        TRY(gin[0] = zeros_of(&ctx->node->in_meta[0], G));                                \
        return CT_OK;                                                                     \
    }
ZERO_GRAD(sign)
ZERO_GRAD(sgn)
ZERO_GRAD(floor)
ZERO_GRAD(ceil)
ZERO_GRAD(round)
ZERO_GRAD(trunc)

DEF(frac, 0) {
    (void)ctx;
    gin[0] = G;
    return CT_OK;
}

/* Formulas of the input a (IN) or of the result y (OUT). */
#define DEF_IN(op, expr)                                                                  \
    DEF(op, CT_SAVE_IN0) {                                                                \
        ct_tensor *a;                                                                     \
        TRY(a = saved(ctx, 0));                                                           \
        TRY(gin[0] = (expr));                                                             \
        return CT_OK;                                                                     \
    }
#define DEF_OUT(op, expr)                                                                 \
    DEF(op, CT_SAVE_OUT) {                                                                \
        ct_tensor *y;                                                                     \
        TRY(y = saved(ctx, OUT_SLOT));                                                    \
        TRY(gin[0] = (expr));                                                             \
        return CT_OK;                                                                     \
    }

DEF_OUT(exp2, cmul(ct_mul(G, y), M_LN2))
DEF_OUT(expm1, ct_mul(G, cadd(y, 1)))
DEF_IN(log2, ct_div(G, cmul(a, M_LN2)))
DEF_IN(log10, ct_div(G, cmul(a, M_LN10)))
DEF_IN(log1p, ct_div(G, cadd(a, 1)))
DEF_OUT(rsqrt, cmul(ct_mul(G, ct_mul(y, ct_mul(y, y))), -0.5))
DEF_OUT(tan, ct_mul(G, cadd(ct_mul(y, y), 1)))
DEF_IN(asin, ct_mul(G, ct_rsqrt(rsubc(ct_mul(a, a), 1))))
DEF_IN(acos, ct_neg(ct_mul(G, ct_rsqrt(rsubc(ct_mul(a, a), 1)))))
DEF_IN(atan, ct_div(G, cadd(ct_mul(a, a), 1)))
DEF_IN(sinh, ct_mul(G, ct_cosh(a)))
DEF_IN(cosh, ct_mul(G, ct_sinh(a)))
DEF_IN(asinh, ct_mul(G, ct_rsqrt(cadd(ct_mul(a, a), 1))))
DEF_IN(acosh, ct_mul(G, ct_rsqrt(cadd(ct_mul(a, a), -1))))
DEF_IN(atanh, ct_div(G, rsubc(ct_mul(a, a), 1)))
DEF_IN(erf, ct_mul(G, cmul(ct_exp(ct_neg(ct_mul(a, a))), M_2_SQRTPI)))
DEF_IN(erfc, ct_mul(G, cmul(ct_exp(ct_neg(ct_mul(a, a))), -M_2_SQRTPI)))
DEF_OUT(erfinv, ct_mul(G, cmul(ct_exp(ct_mul(y, y)), 0.5 * sqrt(M_PI))))
DEF_OUT(reciprocal, ct_neg(ct_mul(G, ct_mul(y, y))))
DEF_IN(lgamma, ct_mul(G, ct_digamma(a)))
DEF_IN(digamma, ct_mul(G, ct_polygamma(a, 1)))
DEF(polygamma, CT_SAVE_IN0) {
    ct_tensor *a;
    TRY(a = saved(ctx, 0));
    TRY(gin[0] = ct_mul(G, ct_polygamma(a, ctx->node->ints[0] + 1)));
    return CT_OK;
}
DEF_IN(square, ct_mul(G, cmul(a, 2)))
DEF_IN(nan_to_num, ct_mul(G, ct_isfinite(a)))
DEF_IN(relu6, ct_mul(G, ct_logical_and(ct_gt_scalar(a, ct_scalar_int(0)), ct_lt_scalar(a, ct_scalar_int(6)))))
DEF_IN(hardsigmoid,
       ct_mul(cmul(G, 1.0 / 6), ct_logical_and(ct_gt_scalar(a, ct_scalar_int(-3)), ct_lt_scalar(a, ct_scalar_int(3)))))

/* eps >= 0 clamps the input to [eps, 1 - eps]: no gradient outside. */
DEF(logit, CT_SAVE_IN0) {
    ct_tensor *a, *g;
    double eps = param(ctx->node, 0);
    TRY(a = saved(ctx, 0));
    TRY(g = ct_div(G, ct_mul(a, rsubc(a, 1))));
    if (eps >= 0)
        TRY(g = ct_mul(g, ct_logical_and(ct_ge_scalar(a, ct_scalar_float(eps)),
                                         ct_le_scalar(a, ct_scalar_float(1 - eps)))));
    gin[0] = g;
    return CT_OK;
}

DEF(leaky_relu, CT_SAVE_IN0) {
    ct_tensor *a, *pos;
    TRY(a = saved(ctx, 0));
    TRY(pos = ct_gt_scalar(a, ct_scalar_int(0)));
    TRY(gin[0] = ct_where(pos, G, cmul(G, param(ctx->node, 0))));
    return CT_OK;
}

/* elu(a; alpha, scale, input_scale); selu and celu are elu with fixed parameters. */
static ct_status elu_like(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin, double alpha, double sc,
                          double isc) {
    ct_tensor *a, *neg;
    TRY(a = saved(ctx, 0));
    TRY(neg = ct_le_scalar(a, ct_scalar_int(0)));
    TRY(gin[0] = ct_where(neg, ct_mul(cmul(G, isc * sc * alpha), ct_exp(cmul(a, isc))), cmul(G, sc)));
    return CT_OK;
}

DEF(elu, CT_SAVE_IN0) {
    const ct_node *n = ctx->node;
    return elu_like(ctx, gout, gin, param(n, 0), param(n, 1), param(n, 2));
}
DEF(selu, CT_SAVE_IN0) {
    return elu_like(ctx, gout, gin, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0);
}
DEF(celu, CT_SAVE_IN0) {
    double alpha = param(ctx->node, 0);
    return elu_like(ctx, gout, gin, alpha, 1.0, 1.0 / alpha);
}

/* g through gelu at its input a. */
static ct_status gelu_grad(ct_node_ctx *ctx, ct_tensor *g, ct_tensor *a, bool tanh_form, ct_tensor **out) {
    ct_tensor *d;
    /* one fused kernel (ctorch/nn.h) unless the gradient must itself be differentiable */
    if (!ctx->create_graph && fused_device(ct_tensor_device(a)) && ct_tensor_dtype(g) == ct_tensor_dtype(a) &&
        ct_dtype_is_floating(ct_tensor_dtype(a))) {
        TRY(*out = ct_gelu_backward(g, a, tanh_form ? CT_GELU_APPROXIMATE_TANH : CT_GELU_APPROXIMATE_NONE));
        return CT_OK;
    }
    if (tanh_form) {
        const double k = M_SQRT2 * M_2_SQRTPI * 0.5, c = 0.044715;
        ct_tensor *a2, *t;
        TRY(a2 = ct_mul(a, a));
        TRY(t = ct_tanh(cmul(ct_mul(a, cadd(cmul(a2, c), 1)), k)));
        /* 0.5 (1 + t) + 0.5 a (1 - t^2) k (1 + 3 c a^2) */
        TRY(d = ct_add(cmul(cadd(t, 1), 0.5),
                       ct_mul(cmul(ct_mul(a, rsubc(ct_mul(t, t), 1)), 0.5 * k), cadd(cmul(a2, 3 * c), 1))));
    } else {
        /* Phi(a) + a phi(a) */
        ct_tensor *cdf, *pdf;
        TRY(cdf = cmul(cadd(ct_erf(cmul(a, M_SQRT1_2)), 1), 0.5));
        TRY(pdf = cmul(ct_exp(cmul(ct_mul(a, a), -0.5)), M_2_SQRTPI * M_SQRT1_2 * 0.5));
        TRY(d = ct_add(cdf, ct_mul(a, pdf)));
    }
    TRY(*out = ct_mul(g, d));
    return CT_OK;
}

DEF(gelu, CT_SAVE_IN0) {
    ct_tensor *a;
    TRY(a = saved(ctx, 0));
    bool tanh_form = ctx->node->nints > 0 && ctx->node->ints[0] == CT_GELU_APPROXIMATE_TANH;
    return gelu_grad(ctx, G, a, tanh_form, &gin[0]);
}

/* act(beta * c + alpha * a @ b): the activation's gradient, then addmm's. GELU needs
 * the pre-activation, which the fused forward does not keep: it is recomputed. */
DEF(addmm_activation, CT_SAVE_IN0 | CT_SAVE_IN1 | CT_SAVE_IN2 | CT_SAVE_OUT) {
    ct_tensor *gpre[1];
    if (ctx->node->ints[0]) {
        ct_tensor *c, *a, *b, *pre;
        TRY(c = saved(ctx, 0));
        TRY(a = saved(ctx, 1));
        TRY(b = saved(ctx, 2));
        TRY(pre = ct_addmm(c, a, b, ctx->node->s[0], ctx->node->s[1]));
        ct_status st = gelu_grad(ctx, G, pre, true, &gpre[0]);
        if (st)
            return st;
    } else {
        ct_tensor *y;
        TRY(y = saved(ctx, OUT_SLOT));
        ct_status st = relu_grad(ctx, G, y, &gpre[0]);
        if (st)
            return st;
    }
    return addprod_backward(ctx, gpre, gin, false);
}

DEF(silu, CT_SAVE_IN0) {
    ct_tensor *a, *sg;
    TRY(a = saved(ctx, 0));
    TRY(sg = ct_sigmoid(a));
    TRY(gin[0] = ct_mul(G, ct_mul(sg, cadd(ct_mul(a, rsubc(sg, 1)), 1))));
    return CT_OK;
}

DEF(mish, CT_SAVE_IN0) {
    ct_tensor *a, *t;
    TRY(a = saved(ctx, 0));
    TRY(t = ct_tanh(ct_softplus(a, 1.0, 20.0)));
    TRY(gin[0] = ct_mul(G, ct_add(t, ct_mul(ct_mul(a, ct_sigmoid(a)), rsubc(ct_mul(t, t), 1)))));
    return CT_OK;
}

/* Above the threshold softplus is the identity (scaled input > threshold). */
DEF(softplus, CT_SAVE_IN0) {
    ct_tensor *a, *ba;
    double beta = param(ctx->node, 0), threshold = param(ctx->node, 1);
    TRY(a = saved(ctx, 0));
    TRY(ba = cmul(a, beta));
    TRY(gin[0] = ct_where(ct_gt_scalar(ba, ct_scalar_float(threshold)), G, ct_mul(G, ct_sigmoid(ba))));
    return CT_OK;
}

DEF(hardtanh, CT_SAVE_IN0) {
    ct_tensor *a;
    TRY(a = saved(ctx, 0));
    TRY(gin[0] = ct_mul(G, ct_logical_and(ct_gt_scalar(a, ct_scalar_float(param(ctx->node, 0))),
                                          ct_lt_scalar(a, ct_scalar_float(param(ctx->node, 1))))));
    return CT_OK;
}

DEF(hardswish, CT_SAVE_IN0) {
    ct_tensor *a, *mid;
    TRY(a = saved(ctx, 0));
    TRY(mid = ct_where(ct_le_scalar(a, ct_scalar_int(3)), ct_mul(G, cadd(cmul(a, 1.0 / 3), 0.5)), G));
    TRY(gin[0] = ct_mul(mid, ct_ge_scalar(a, ct_scalar_int(-3))));
    return CT_OK;
}

NONDIFF(bitwise_not)
NONDIFF(floor_divide)
NONDIFF(bitwise_and)
NONDIFF(bitwise_or)
NONDIFF(bitwise_xor)
NONDIFF(bitwise_left_shift)
NONDIFF(bitwise_right_shift)
/* the fused optimizer steps update their lists in place under no-grad */
NONDIFF(fused_adam)
NONDIFF(fused_adamw)

/* remainder (floor) and fmod (trunc): a - round(a / b) b. */
static ct_status rem_backward(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin, bool floor_) {
    if (WANT(0))
        gin[0] = G;
    if (WANT(1)) {
        ct_tensor *a, *b, *q;
        TRY(a = saved(ctx, 0));
        TRY(b = saved(ctx, 1));
        TRY(q = floor_ ? ct_floor(ct_div(a, b)) : ct_trunc(ct_div(a, b)));
        TRY(gin[1] = ct_neg(ct_mul(G, q)));
    }
    return CT_OK;
}
DEF(remainder, CT_SAVE_IN0 | CT_SAVE_IN1) { return rem_backward(ctx, gout, gin, true); }
DEF(fmod, CT_SAVE_IN0 | CT_SAVE_IN1) { return rem_backward(ctx, gout, gin, false); }

/* PyTorch's pow_backward: exponent 0 gives 0 (not 0 * inf); the exponent's gradient is
 * 0 where the base is 0 and the exponent non-negative. */
DEF(pow, CT_SAVE_IN0 | CT_SAVE_IN1 | CT_SAVE_OUT) {
    ct_tensor *a, *b;
    TRY(a = saved(ctx, 0));
    TRY(b = saved(ctx, 1));
    if (WANT(0)) {
        ct_tensor *d;
        TRY(d = ct_mul(b, ct_pow(a, cadd(b, -1))));
        TRY(gin[0] = ct_where(ct_eq_scalar(b, ct_scalar_int(0)), zeros_of(&ctx->node->in_meta[0], G), ct_mul(G, d)));
    }
    if (WANT(1)) {
        ct_tensor *y, *z;
        TRY(y = saved(ctx, OUT_SLOT));
        TRY(z = ct_logical_and(ct_eq_scalar(a, ct_scalar_int(0)), ct_ge_scalar(b, ct_scalar_int(0))));
        TRY(gin[1] = ct_where_scalar_other(ct_logical_not(z), ct_mul(G, ct_mul(y, ct_log(a))), ct_scalar_int(0)));
    }
    return CT_OK;
}

DEF(atan2, CT_SAVE_IN0 | CT_SAVE_IN1) {
    ct_tensor *a, *b, *g;
    TRY(a = saved(ctx, 0));
    TRY(b = saved(ctx, 1));
    TRY(g = ct_div(G, ct_add(ct_mul(a, a), ct_mul(b, b))));
    if (WANT(0))
        TRY(gin[0] = ct_mul(g, b));
    if (WANT(1))
        TRY(gin[1] = ct_neg(ct_mul(g, a)));
    return CT_OK;
}

DEF(hypot, CT_SAVE_IN0 | CT_SAVE_IN1 | CT_SAVE_OUT) {
    ct_tensor *y, *g;
    TRY(y = saved(ctx, OUT_SLOT));
    TRY(g = ct_div(G, y));
    for (int i = 0; i < 2; i++)
        if (WANT(i)) {
            ct_tensor *x;
            TRY(x = saved(ctx, i));
            TRY(gin[i] = ct_mul(g, x));
        }
    return CT_OK;
}

/* d/da copysign(a, b) = result / a (0 at a = 0); the sign source gets zeros. */
DEF(copysign, CT_SAVE_IN0 | CT_SAVE_OUT) {
    if (WANT(0)) {
        ct_tensor *a, *y, *z;
        TRY(a = saved(ctx, 0));
        TRY(y = saved(ctx, OUT_SLOT));
        TRY(z = ct_eq_scalar(a, ct_scalar_int(0)));
        TRY(gin[0] = ct_mul(G, ct_masked_fill(ct_div(y, ct_masked_fill(a, z, ct_scalar_int(1))), z, ct_scalar_int(0))));
    }
    if (WANT(1))
        TRY(gin[1] = zeros_of(&ctx->node->in_meta[1], G));
    return CT_OK;
}

/* fmax/fmin: the whole gradient goes to the chosen input (self on ties; other where
 * self is NaN... as PyTorch: self wins unless other is NaN or loses the comparison). */
static ct_status fminmax_backward(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin, bool is_max) {
    ct_tensor *a, *b, *pick_a;
    TRY(a = saved(ctx, 0));
    TRY(b = saved(ctx, 1));
    TRY(pick_a = ct_logical_or(is_max ? ct_ge(a, b) : ct_le(a, b), ct_isnan(b)));
    if (WANT(0))
        TRY(gin[0] = ct_mul(G, pick_a));
    if (WANT(1))
        TRY(gin[1] = ct_mul(G, ct_logical_not(pick_a)));
    return CT_OK;
}
DEF(fmax, CT_SAVE_IN0 | CT_SAVE_IN1) { return fminmax_backward(ctx, gout, gin, true); }
DEF(fmin, CT_SAVE_IN0 | CT_SAVE_IN1) { return fminmax_backward(ctx, gout, gin, false); }

DEF(clamp_min, CT_SAVE_IN0 | CT_SAVE_IN1) {
    ct_tensor *a, *b;
    TRY(a = saved(ctx, 0));
    TRY(b = saved(ctx, 1));
    if (WANT(0))
        TRY(gin[0] = ct_mul(G, ct_ge(a, b)));
    if (WANT(1))
        TRY(gin[1] = ct_mul(G, ct_lt(a, b)));
    return CT_OK;
}

DEF(clamp_max, CT_SAVE_IN0 | CT_SAVE_IN1) {
    ct_tensor *a, *b;
    TRY(a = saved(ctx, 0));
    TRY(b = saved(ctx, 1));
    if (WANT(0))
        TRY(gin[0] = ct_mul(G, ct_le(a, b)));
    if (WANT(1))
        TRY(gin[1] = ct_mul(G, ct_gt(a, b)));
    return CT_OK;
}

/* Bounds may be absent (NULL inputs); with both, PyTorch's clamp_backward_min_max. */
DEF(clamp, CT_SAVE_IN0 | CT_SAVE_IN1 | CT_SAVE_IN2) {
    ct_tensor *a, *lo = NULL, *hi = NULL, *in = NULL;
    TRY(a = saved(ctx, 0));
    lo = saved(ctx, 1); /* NULL without an error: no such bound */
    hi = saved(ctx, 2);
    if (lo)
        TRY(in = ct_ge(a, lo));
    if (hi)
        TRY(in = in ? ct_logical_and(in, ct_le(a, hi)) : ct_le(a, hi));
    TRY(in);
    if (WANT(0))
        TRY(gin[0] = ct_mul(G, in));
    if (lo && WANT(1)) {
        ct_tensor *m;
        TRY(m = ct_lt(a, lo));
        if (hi)
            TRY(m = ct_logical_and(m, ct_lt(lo, hi)));
        TRY(gin[1] = ct_mul(G, m));
    }
    if (hi && WANT(2)) {
        ct_tensor *m;
        TRY(m = ct_gt(a, hi));
        if (lo)
            TRY(m = ct_logical_or(m, ct_lt(hi, lo)));
        TRY(gin[2] = ct_mul(G, m));
    }
    return CT_OK;
}

/* a + w (b - a); a scalar weight is the call's scalar (two inputs). */
DEF(lerp, CT_SAVE_IN0 | CT_SAVE_IN1 | CT_SAVE_IN2) {
    if (ctx->node->nin == 2) {
        double w = ct_scalar_to_double(ctx->node->s[0]);
        if (WANT(0))
            TRY(gin[0] = cmul(G, 1 - w));
        if (WANT(1))
            TRY(gin[1] = cmul(G, w));
        return CT_OK;
    }
    ct_tensor *w;
    TRY(w = saved(ctx, 2));
    if (WANT(0))
        TRY(gin[0] = ct_mul(G, rsubc(w, 1)));
    if (WANT(1))
        TRY(gin[1] = ct_mul(G, w));
    if (WANT(2)) {
        ct_tensor *a, *b;
        TRY(a = saved(ctx, 0));
        TRY(b = saved(ctx, 1));
        TRY(gin[2] = ct_mul(G, ct_sub(b, a)));
    }
    return CT_OK;
}

DEF(addcmul, CT_SAVE_IN1 | CT_SAVE_IN2) {
    ct_scalar v = ctx->node->s[0];
    if (WANT(0))
        gin[0] = G;
    if (WANT(1)) {
        ct_tensor *c;
        TRY(c = saved(ctx, 2));
        TRY(gin[1] = scale(ct_mul(G, c), v));
    }
    if (WANT(2)) {
        ct_tensor *b;
        TRY(b = saved(ctx, 1));
        TRY(gin[2] = scale(ct_mul(G, b), v));
    }
    return CT_OK;
}

DEF(addcdiv, CT_SAVE_IN1 | CT_SAVE_IN2) {
    ct_scalar v = ctx->node->s[0];
    ct_tensor *c;
    TRY(c = saved(ctx, 2));
    if (WANT(0))
        gin[0] = G;
    if (WANT(1))
        TRY(gin[1] = scale(ct_div(G, c), v));
    if (WANT(2)) {
        ct_tensor *b;
        TRY(b = saved(ctx, 1));
        TRY(gin[2] = ct_neg(scale(ct_div(ct_mul(G, b), ct_mul(c, c)), v)));
    }
    return CT_OK;
}

/* The condition gets no gradient. */
DEF(where, CT_SAVE_IN0) {
    ct_tensor *cond;
    TRY(cond = saved(ctx, 0));
    if (WANT(1))
        TRY(gin[1] = ct_where_scalar_other(cond, G, ct_scalar_int(0)));
    if (WANT(2))
        TRY(gin[2] = ct_where_scalar_self(cond, ct_scalar_int(0), G));
    return CT_OK;
}

/* ------------------------------------------------------------------ factories, random ops, fills */

/* The factories have no tensor input: autograd never records them. */
NONDIFF(empty)
NONDIFF(empty_strided)
NONDIFF(full)
NONDIFF(arange)
NONDIFF(linspace)
NONDIFF(logspace)
NONDIFF(eye)
NONDIFF(rand)
NONDIFF(randn)
NONDIFF(randint)
NONDIFF(randperm)

/* The value an in-place fill or draw overwrites gets a zero gradient, as PyTorch's
 * derivatives.yaml says for fill_, uniform_, normal_ and bernoulli_ (and bernoulli's
 * probabilities: the draw does not depend on them smoothly). */
static ct_status zero_grad_of_self(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    if (WANT(0))
        TRY(gin[0] = ct_zeros_like(G, CT_DTYPE_UNDEFINED));
    return CT_OK;
}

DEF(fill, 0) { return zero_grad_of_self(ctx, gout, gin); }
DEF(uniform, 0) { return zero_grad_of_self(ctx, gout, gin); }
DEF(normal, 0) { return zero_grad_of_self(ctx, gout, gin); }
DEF(bernoulli, 0) { return zero_grad_of_self(ctx, gout, gin); }

/* The gradient of a move is the move back (PyTorch's _to_copy_backward). */
DEF(to_device, 0) {
    TRY(gin[0] = ct_to_device(G, ctx->node->in_meta[0].device));
    return CT_OK;
}

#include "autograd/derivatives_nn.h"

/* ------------------------------------------------------------------ the table */

#define CT_DERIV_(name) [CT_OP_##name] = {name##_backward, name##_saves},
#define CT_DERIV_UNARY_FLOAT(name) CT_DERIV_(name)
#define CT_DERIV_UNARY_SAME(name) CT_DERIV_(name)
#define CT_DERIV_BINARY_ARITH(name) CT_DERIV_(name)
#define CT_DERIV_BINARY_FLOAT(name) CT_DERIV_(name)
#define CT_DERIV_CUSTOM(name) CT_DERIV_(name)
#define CT_DERIV_STRUCTURED(name) CT_DERIV_(name)
#define CT_DERIV_COMPARE(name)
#define CT_DERIV_COMPOSITE(name)
#define CT_DERIV_BACKEND(name) CT_DERIV_(name)
#define CT_DERIV_VIEW(name) CT_DERIV_(name)
#define CT_DERIV_COPY(name) CT_DERIV_(name)
#define CT_DERIV_REDUCE(name) CT_DERIV_(name)
#define CT_DERIV_SCAN(name) CT_DERIV_(name)
#define CT_DERIV_UNARY_BOOL(name)
#define CT_DERIV_UNARY_SQUARE(name) CT_DERIV_(name)
#define CT_DERIV_BINARY_DIV(name) CT_DERIV_(name)
#define CT_DERIV_TERNARY_ARITH(name) CT_DERIV_(name)
#define CT_DERIV_WHERE(name) CT_DERIV_(name)
#define CT_DERIV_FACTORY(name) CT_DERIV_(name)
#define CT_DERIV_RANDOM(name) CT_DERIV_(name)

static const ct_derivative table[CT_OP_COUNT] = {
#define CT_OP(name, sig, family, flags) CT_DERIV_##family(name)
#include "ctorch/ops.def"
#undef CT_OP
};

const ct_derivative *ct_derivative_of(ct_op op) {
    if (!ct_op_is_differentiable(op) || !table[op].fn)
        return NULL;
    return &table[op];
}
