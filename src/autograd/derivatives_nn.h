/* Derivative formulas of the fused nn kernels (ops.def, "nn kernels"), in the form of
 * the derivative table: src/autograd/derivatives.c includes this file just before the
 * table, so DEF, NONDIFF, G, WANT, TRY and saved() are its own.
 *
 * Note [Fused nn backward kernels]
 * Each formula calls the op's backward kernel (ct_*_backward, public in ctorch/nn.h),
 * which is not differentiable itself. A backward pass with create_graph through them
 * would silently give gradients without history, so under create_graph each formula
 * either is written with differentiable ops (conv_transpose2d: Note [Conv double
 * backward]; layer_norm, rms_norm, embedding, cross_entropy_fused) or records a node
 * of its own over the kernel's result (Note [Linear backward kernels]: avg_pool2d,
 * adaptive_avg_pool2d, nll_loss). scaled_dot_product_attention's gradient is written
 * with ops too; flash attention refuses, as PyTorch's does.
 *
 * Note [Linear backward kernels]
 * When an op f is linear in its input (the average pools, nll_loss), its backward
 * kernel B(g) = J^T g is linear in g and does not depend on the input, so the only
 * second derivative is the one through g, and B's adjoint is f itself: <B(g), v> =
 * <g, f(v)>. Under create_graph the kernel's result gets an internal node with one
 * edge (to g) whose backward applies f, with the forward's arguments, to the
 * incoming gradient. f is differentiable, so any order works. */
#ifndef CT_AUTOGRAD_DERIVATIVES_NN_H
#define CT_AUTOGRAD_DERIVATIVES_NN_H

#include "ctorch/nn.h"

static ct_status nn_no_double_backward(ct_node_ctx *ctx) {
    return ct_error(CT_ERROR_NOT_IMPLEMENTED, ctx->node->name,
                    "the derivative of this op's backward (double backward) is not implemented");
}

/* Note [Linear backward kernels]: r = B(g) from the kernel of node ctx->node takes a
 * node named name whose backward is adjoint, with the forward node's arguments and
 * the tensors s1, s2 (saved in slots 1 and 2). */
static ct_status linear_backward_node(ct_node_ctx *ctx, const ct_tensor *g, ct_tensor *r, const char *name,
                                      ct_backward_fn adjoint, const ct_tensor *s1, const ct_tensor *s2) {
    if (!ctx->create_graph || !g->requires_grad)
        return CT_OK;
    ct_node *f = ctx->node;
    ct_node *n = ct_node_new(CT_NODE_INTERNAL, name, 1);
    if (!n)
        return ct_last_status();
    n->backward = adjoint;
    n->nout = 1;
    n->op = f->op;
    n->nscalars = f->nscalars;
    n->nints = f->nints;
    memcpy(n->s, f->s, sizeof n->s);
    memcpy(n->ints, f->ints, sizeof n->ints);
    n->dtype = f->dtype;
    ct_input_meta_set(&n->in_meta[0], g);
    ct_input_meta_set(&n->out_meta, r);
    ct_status st = ct_edge_for(g, &n->edges[0]);
    if (st == CT_OK)
        st = ct_node_save(n, 1, s1, false, s1 ? ct_tensor_version(s1) : 0);
    if (st == CT_OK)
        st = ct_node_save(n, 2, s2, false, s2 ? ct_tensor_version(s2) : 0);
    if (st == CT_OK)
        st = ct_set_history(r, n, 0);
    ct_node_unref(n);
    return st;
}

/* ints: stride[2], padding[2], output_padding[2], dilation[2], groups. The input's
 * gradient is conv2d of the incoming gradient; the weight's is conv2d's weight
 * gradient with input and grad_output swapped. */
DEF(conv_transpose2d, CT_SAVE_IN0 | CT_SAVE_IN1) {
    ct_node *n = ctx->node;
    ct_tensor *x, *w;
    TRY(x = saved(ctx, 0));
    TRY(w = saved(ctx, 1));
    if (WANT(0))
        TRY(gin[0] = ct_conv2d(G, w, NULL, n->ints, n->ints + 2, n->ints + 6, n->ints[8]));
    if (WANT(1) && ctx->create_graph) {
        TRY(gin[1] = conv2d_weight_grad(G, x, w->shape[2], w->shape[3], n->ints, n->ints + 2, n->ints + 6,
                                        n->ints[8]));
    } else if (WANT(1)) {
        ct_status st = ct_conv2d_backward(x, G, w, n->ints, n->ints + 2, n->ints + 6, n->ints[8], NULL, &gin[1], NULL);
        if (st)
            return st;
    }
    if (WANT(2))
        TRY(gin[2] = conv2d_bias_grad(G));
    return CT_OK;
}

/* ints: kernel[2], stride[2], padding[2], ceil_mode, count_include_pad, divisor.
 * The adjoint of the backward kernel is the pool itself. */
static ct_status avg_pool2d_adjoint(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    const int64_t *i = ctx->node->ints;
    TRY(gin[0] = ct_avg_pool2d(G, i, i + 2, i + 4, i[6] != 0, i[7] != 0, i[8]));
    return CT_OK;
}

DEF(avg_pool2d, CT_SAVE_IN0) {
    ct_node *n = ctx->node;
    ct_tensor *x;
    TRY(x = saved(ctx, 0));
    TRY(gin[0] = ct_avg_pool2d_backward(G, x, n->ints, n->ints + 2, n->ints + 4, n->ints[6] != 0, n->ints[7] != 0,
                                        n->ints[8]));
    return linear_backward_node(ctx, G, gin[0], "AvgPool2DBackwardBackward0", avg_pool2d_adjoint, NULL, NULL);
}

static ct_status adaptive_avg_pool2d_adjoint(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    const ct_input_meta *m = &ctx->node->in_meta[0]; /* the incoming gradient's: the pool's output */
    TRY(gin[0] = ct_adaptive_avg_pool2d(G, m->shape + m->ndim - 2));
    return CT_OK;
}

DEF(adaptive_avg_pool2d, CT_SAVE_IN0) {
    ct_tensor *x;
    TRY(x = saved(ctx, 0));
    TRY(gin[0] = ct_adaptive_avg_pool2d_backward(G, x));
    return linear_backward_node(ctx, G, gin[0], "AdaptiveAvgPool2DBackwardBackward0", adaptive_avg_pool2d_adjoint,
                                NULL, NULL);
}

/* rms_norm's gradient built from differentiable ops, for create_graph: with
 * r = rsqrt(mean(x^2) + eps), xhat = x r and gh = g w,
 *   dx = r (gh - xhat mean(gh xhat)), dw = sum g xhat. */
static ct_status rms_norm_grad_composite(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin,
                                         const ct_tensor *x, const ct_tensor *w) {
    ct_node *n = ctx->node;
    int k = (int)n->ints[0], nb = ct_tensor_dim(x) - k;
    int64_t nd[CT_MAX_DIMS], bd[CT_MAX_DIMS];
    for (int i = 0; i < k; i++)
        nd[i] = nb + i;
    for (int i = 0; i < nb; i++)
        bd[i] = i;
    ct_tensor *r, *xh, *gh;
    TRY(r = ct_rsqrt(cadd(ct_mean(ct_mul(x, x), nd, k, true, CT_DTYPE_UNDEFINED), ct_scalar_to_double(n->s[0]))));
    TRY(xh = ct_mul(x, r));
    TRY(gh = w ? ct_mul(G, w) : ct_tensor_ref(G));
    if (WANT(0))
        TRY(gin[0] = ct_mul(r, ct_sub(gh, ct_mul(xh, ct_mean(ct_mul(gh, xh), nd, k, true, CT_DTYPE_UNDEFINED)))));
    if (w && WANT(1))
        TRY(gin[1] = nb ? ct_sum(ct_mul(G, xh), bd, nb, false, CT_DTYPE_UNDEFINED) : ct_mul(G, xh));
    return CT_OK;
}

/* upsample and upsample_backward are linear and each other's adjoint, so each is the
 * other's derivative (double backward works). upsample's ints: mode, align_corners,
 * n, output_size[n]; upsample_backward's: mode, align_corners, ndim, input_size[ndim];
 * s: the scales. */
static const char *upsample_mode_name(int64_t m) {
    static const char *const names[] = {"nearest", "nearest-exact", "linear", "bicubic"};
    return m >= 0 && m < 4 ? names[m] : "?";
}

DEF(upsample, 0) {
    ct_node *n = ctx->node;
    double scales[2] = {ct_scalar_to_double(n->s[0]), ct_scalar_to_double(n->s[1])};
    TRY(gin[0] = ct_upsample_backward(G, n->in_meta[0].shape, n->in_meta[0].ndim, upsample_mode_name(n->ints[0]),
                                      n->ints[1] != 0, scales));
    return CT_OK;
}

DEF(upsample_backward, 0) {
    ct_node *n = ctx->node;
    double scales[2] = {ct_scalar_to_double(n->s[0]), ct_scalar_to_double(n->s[1])};
    const ct_input_meta *g = &n->in_meta[0];
    TRY(gin[0] = ct_upsample(G, g->shape + 2, g->ndim - 2, upsample_mode_name(n->ints[0]), n->ints[1] != 0,
                             scales));
    return CT_OK;
}

/* ints: k, normalized_shape[k]; s[0]: eps. */
DEF(rms_norm, CT_SAVE_IN0 | CT_SAVE_IN1) {
    ct_node *n = ctx->node;
    ct_tensor *x, *w, *gx = NULL, *gw = NULL;
    TRY(x = saved(ctx, 0));
    w = saved(ctx, 1); /* NULL without a weight */
    if (!w && n->in_meta[1].dtype != CT_DTYPE_UNDEFINED)
        return ct_last_status() != CT_OK ? ct_last_status() : CT_ERROR_RUNTIME;
    if (ctx->create_graph)
        return rms_norm_grad_composite(ctx, gout, gin, x, w);
    ct_status st = ct_rms_norm_backward(G, x, n->ints + 1, (int)n->ints[0], w, ct_scalar_to_double(n->s[0]), &gx,
                                        w && WANT(1) ? &gw : NULL);
    if (st)
        return st;
    gin[0] = WANT(0) ? gx : NULL;
    gin[1] = gw;
    return CT_OK;
}

/* layer_norm's gradient built from differentiable ops, for create_graph (the fused
 * backward kernel is not differentiable): with xhat = (x - mean) r and gh = g w,
 *   dx = r (gh - mean(gh) - xhat mean(gh xhat)), dw = sum g xhat, db = sum g
 * (means over the normalized dims, sums over the others). */
static ct_status layer_norm_grad_composite(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin,
                                           const ct_tensor *x, const ct_tensor *w, const ct_tensor *b) {
    ct_node *n = ctx->node;
    int k = (int)n->ints[0], nb = ct_tensor_dim(x) - k;
    int64_t nd[CT_MAX_DIMS], bd[CT_MAX_DIMS];
    for (int i = 0; i < k; i++)
        nd[i] = nb + i;
    for (int i = 0; i < nb; i++)
        bd[i] = i;
    ct_tensor *mean, *var, *r, *xh, *gh;
    TRY(mean = ct_mean(x, nd, k, true, CT_DTYPE_UNDEFINED));
    TRY(var = ct_var(x, nd, k, 0.0, true));
    TRY(r = ct_rsqrt(cadd(var, ct_scalar_to_double(n->s[0]))));
    TRY(xh = ct_mul(ct_sub(x, mean), r));
    TRY(gh = w ? ct_mul(G, w) : ct_tensor_ref(G));
    if (WANT(0)) {
        ct_tensor *m1, *m2;
        TRY(m1 = ct_mean(gh, nd, k, true, CT_DTYPE_UNDEFINED));
        TRY(m2 = ct_mean(ct_mul(gh, xh), nd, k, true, CT_DTYPE_UNDEFINED));
        TRY(gin[0] = ct_mul(r, ct_sub(ct_sub(gh, m1), ct_mul(xh, m2))));
    }
    if (w && WANT(1))
        TRY(gin[1] = nb ? ct_sum(ct_mul(G, xh), bd, nb, false, CT_DTYPE_UNDEFINED) : ct_mul(G, xh));
    if (b && WANT(2))
        TRY(gin[2] = nb ? ct_sum(G, bd, nb, false, CT_DTYPE_UNDEFINED) : ct_tensor_ref(G));
    return CT_OK;
}

/* in: input, weight, bias; ints: k, normalized_shape[k]; s[0]: eps. */
DEF(layer_norm, CT_SAVE_IN0 | CT_SAVE_IN1 | CT_SAVE_IN2) {
    ct_node *n = ctx->node;
    ct_tensor *x, *w, *b, *gx = NULL, *gw = NULL, *gb = NULL;
    TRY(x = saved(ctx, 0));
    w = saved(ctx, 1); /* NULL without a weight */
    if (!w && n->in_meta[1].dtype != CT_DTYPE_UNDEFINED)
        return ct_last_status() != CT_OK ? ct_last_status() : CT_ERROR_RUNTIME;
    b = saved(ctx, 2);
    if (!b && n->in_meta[2].dtype != CT_DTYPE_UNDEFINED)
        return ct_last_status() != CT_OK ? ct_last_status() : CT_ERROR_RUNTIME;
    if (ctx->create_graph)
        return layer_norm_grad_composite(ctx, gout, gin, x, w, b);
    ct_status st = ct_layer_norm_backward(G, x, n->ints + 1, (int)n->ints[0], w, b, ct_scalar_to_double(n->s[0]),
                                          &gx, w && WANT(1) ? &gw : NULL, b && WANT(2) ? &gb : NULL);
    if (st)
        return st;
    gin[0] = WANT(0) ? gx : NULL;
    gin[1] = gw;
    gin[2] = gb;
    return CT_OK;
}

/* in: query, key, value, mask; ints: is_causal; s[0]: scale. The mask gets no
 * gradient (docs/nn.md). */
/* Attention's gradients written with ops, for create_graph: with S = q k^T scale
 * (masked as the forward) and P = softmax(S),
 *   dv = P^T g, dP = g v^T, dS = P (dP - rowsum(dP P)), dq = dS k scale, dk = dS^T q scale
 * (the batch dims broadcast as matmul's; the engine sums them down). */
static ct_status sdpa_grad_composite(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin, const ct_tensor *q,
                                     const ct_tensor *k, const ct_tensor *v, const ct_tensor *mask, double scale) {
    ct_tensor *sc, *p, *dp, *ds;
    TRY(sc = ct_mul_scalar(ct_matmul(q, ct_transpose(k, -2, -1)), ct_scalar_float(scale)));
    if (ctx->node->ints[0]) {
        int64_t l = ct_tensor_size(q, -2), s = ct_tensor_size(k, -2);
        ct_device d = ct_tensor_device(q);
        ct_tensor *i = ct_unsqueeze(ct_arange(ct_scalar_int(0), ct_scalar_int(l), ct_scalar_int(1), CT_I64, d), 1);
        ct_tensor *j = ct_arange(ct_scalar_int(0), ct_scalar_int(s), ct_scalar_int(1), CT_I64, d);
        TRY(sc = ct_where_scalar_other(ct_ge(i, j), sc, ct_scalar_float(-INFINITY)));
    } else if (mask) {
        TRY(sc = ct_tensor_dtype(mask) == CT_DTYPE_BOOL ? ct_where_scalar_other(mask, sc, ct_scalar_float(-INFINITY))
                                                         : ct_add(sc, mask));
    }
    TRY(p = ct_softmax(sc, -1, CT_DTYPE_UNDEFINED));
    if (WANT(2))
        TRY(gin[2] = ct_matmul(ct_transpose(p, -2, -1), G));
    if (!WANT(0) && !WANT(1))
        return CT_OK;
    int64_t last = -1;
    TRY(dp = ct_matmul(G, ct_transpose(v, -2, -1)));
    TRY(ds = ct_mul(p, ct_sub(dp, ct_sum(ct_mul(dp, p), &last, 1, true, CT_DTYPE_UNDEFINED))));
    if (WANT(0))
        TRY(gin[0] = ct_mul_scalar(ct_matmul(ds, k), ct_scalar_float(scale)));
    if (WANT(1))
        TRY(gin[1] = ct_mul_scalar(ct_matmul(ct_transpose(ds, -2, -1), q), ct_scalar_float(scale)));
    return CT_OK;
}

DEF(scaled_dot_product_attention, CT_SAVE_IN0 | CT_SAVE_IN1 | CT_SAVE_IN2 | CT_SAVE_IN3) {
    ct_node *n = ctx->node;
    ct_tensor *q, *k, *v, *mask, *gq, *gk, *gv;
    TRY(q = saved(ctx, 0));
    TRY(k = saved(ctx, 1));
    TRY(v = saved(ctx, 2));
    mask = saved(ctx, 3);
    if (!mask && n->in_meta[3].dtype != CT_DTYPE_UNDEFINED)
        return ct_last_status() != CT_OK ? ct_last_status() : CT_ERROR_RUNTIME;
    double scale = ct_scalar_to_double(n->s[0]);
    if (ctx->create_graph)
        return sdpa_grad_composite(ctx, gout, gin, q, k, v, mask, scale);
    ct_status st = ct_scaled_dot_product_attention_backward(G, q, k, v, mask, n->ints[0] != 0, &scale, &gq, &gk, &gv);
    if (st)
        return st;
    gin[0] = WANT(0) ? gq : NULL;
    gin[1] = WANT(1) ? gk : NULL;
    gin[2] = WANT(2) ? gv : NULL;
    return CT_OK;
}

/* in: q, k, v; ints: is_causal; s[0]: scale, s[1]: dropout_p; outputs out, logsumexp
 * and, with dropout, dropout_mask. The backward op recomputes the probabilities from q,
 * k and the saved log-sum-exp and reads the saved mask. The log-sum-exp gets no
 * gradient of its own (as PyTorch's flash attention). */
DEF(_flash_attention_forward, CT_SAVE_IN0 | CT_SAVE_IN1 | CT_SAVE_IN2 | CT_SAVE_OUT | CT_SAVE_OUT1 | CT_SAVE_OUT2) {
    ct_node *n = ctx->node;
    if (ctx->create_graph)
        return nn_no_double_backward(ctx);
    if (n->nout > 1 && gout[1])
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, n->name,
                        "the derivative of flash attention's logsumexp output is not implemented");
    if (!G)
        return CT_OK;
    const double p = ct_scalar_to_double(n->s[1]);
    ct_tensor *q, *k, *v, *o, *lse, *mask = NULL, *gq, *gk, *gv;
    TRY(q = saved(ctx, 0));
    TRY(k = saved(ctx, 1));
    TRY(v = saved(ctx, 2));
    TRY(o = saved(ctx, CT_SAVED_OUT0));
    TRY(lse = saved(ctx, CT_SAVED_OUT1));
    if (p != 0)
        TRY(mask = saved(ctx, CT_SAVED_OUT2));
    double scale = ct_scalar_to_double(n->s[0]);
    ct_status st = ct_flash_attention_backward_dropout(G, q, k, v, o, lse, mask, n->ints[0] != 0, &scale, p, &gq, &gk,
                                                       &gv);
    if (st)
        return st;
    gin[0] = WANT(0) ? gq : NULL;
    gin[1] = WANT(1) ? gk : NULL;
    gin[2] = WANT(2) ? gv : NULL;
    return CT_OK;
}

/* in: weight, indices; ints: padding_idx. */
DEF(embedding, CT_SAVE_IN1) {
    ct_node *n = ctx->node;
    ct_tensor *idx;
    TRY(idx = saved(ctx, 1));
    if (!ctx->create_graph) {
        TRY(gin[0] = ct_embedding_backward(G, idx, n->in_meta[0].shape[0], n->ints[0]));
        return CT_OK;
    }
    /* With ops: the rows of G added at their indices (index_add), the padding row's
     * contributions zeroed first. */
    const ct_input_meta *m = &n->in_meta[0];
    int64_t d = m->shape[m->ndim - 1], rows[2] = {-1, d}, flat[1] = {-1};
    ct_tensor *g2, *i1;
    TRY(g2 = ct_reshape(G, rows, 2));
    TRY(i1 = ct_reshape(idx, flat, 1));
    if (n->ints[0] != CT_NO_PADDING_IDX) {
        int64_t pad = n->ints[0] < 0 ? n->ints[0] + m->shape[0] : n->ints[0];
        TRY(g2 = ct_masked_fill(g2, ct_unsqueeze(ct_eq_scalar(i1, ct_scalar_int(pad)), 1), ct_scalar_int(0)));
    }
    TRY(gin[0] = ct_index_add(ct_zeros(m->shape, m->ndim, G->dtype, G->device), 0, i1, g2, ct_scalar_int(1)));
    return CT_OK;
}

/* in: input, target, weight; ints: reduction, ignore_index. */
/* nll_loss is linear in its input: the adjoint of its backward kernel is nll_loss
 * (Note [Linear backward kernels]), with the target and weight saved in slots 1, 2. */
static ct_status nll_loss_adjoint(ct_node_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    ct_node *n = ctx->node;
    ct_tensor *t, *w;
    TRY(t = saved(ctx, 1));
    w = saved(ctx, 2); /* NULL without a weight; with an error when freed */
    if (!w && (n->saved_freed || n->saved[2].t))
        return ct_last_status() != CT_OK ? ct_last_status() : CT_ERROR_RUNTIME;
    TRY(gin[0] = ct_nll_loss(G, t, w, (ct_reduction)n->ints[0], n->ints[1]));
    return CT_OK;
}

DEF(nll_loss, CT_SAVE_IN0 | CT_SAVE_IN1 | CT_SAVE_IN2) {
    ct_node *n = ctx->node;
    ct_tensor *x, *t, *w;
    TRY(x = saved(ctx, 0));
    TRY(t = saved(ctx, 1));
    w = saved(ctx, 2);
    if (!w && n->in_meta[2].dtype != CT_DTYPE_UNDEFINED)
        return ct_last_status() != CT_OK ? ct_last_status() : CT_ERROR_RUNTIME;
    TRY(gin[0] = ct_nll_loss_backward(G, x, t, w, (ct_reduction)n->ints[0], n->ints[1]));
    return linear_backward_node(ctx, G, gin[0], "NllLossBackwardBackward0", nll_loss_adjoint, t, w);
}

/* in: logits, target; out: loss, lse; ints: reduction, ignore_index. The loss's
 * gradient is the fused backward kernel; a gradient reaching lse (lse_i is logsumexp
 * of row i) adds softmax(x) * g_lse. */
DEF(cross_entropy_fused, CT_SAVE_IN0 | CT_SAVE_IN1 | CT_SAVE_OUT1) {
    ct_node *n = ctx->node;
    ct_tensor *x, *t, *lse;
    TRY(x = saved(ctx, 0));
    TRY(t = saved(ctx, 1));
    TRY(lse = saved(ctx, CT_SAVED_OUT1));
    ct_tensor *gx = NULL;
    if (gout[0] && ctx->create_graph) {
        /* With ops: nll_loss's gradient at log_softmax(x) (a linear backward node,
         * ints are reduction and ignore_index as nll_loss's), then log_softmax's. */
        ct_tensor *gl;
        int64_t one = 1;
        TRY(gl = ct_nll_loss_backward(gout[0], x, t, NULL, (ct_reduction)n->ints[0], n->ints[1]));
        ct_status st = linear_backward_node(ctx, gout[0], gl, "NllLossBackwardBackward0", nll_loss_adjoint, t, NULL);
        if (st)
            return st;
        TRY(gx = ct_sub(gl, ct_mul(ct_softmax(x, 1, CT_DTYPE_UNDEFINED), ct_sum(gl, &one, 1, true, CT_DTYPE_UNDEFINED))));
    } else if (gout[0] && !(n->nout > 1 && gout[1]) && ct_node_saved_reusable(ctx, 0, 1)) {
        /* the logits' last holder: their gradient takes their memory (Note [Reusing a
         * saved input's memory] in node.c), returned without the logits' history */
        TRY(gx = ct_cross_entropy_fused_backward_out(gout[0], x, t, lse, (ct_reduction)n->ints[0], n->ints[1], x));
        TRY(gx = ct_detach(gx));
    } else if (gout[0]) {
        TRY(gx = ct_cross_entropy_fused_backward(gout[0], x, t, lse, (ct_reduction)n->ints[0], n->ints[1]));
    }
    if (n->nout > 1 && gout[1]) {
        ct_tensor *gl;
        TRY(gl = ct_mul(ct_softmax(x, 1, CT_DTYPE_UNDEFINED), ct_unsqueeze(gout[1], 1)));
        TRY(gx = gx ? ct_add(gx, gl) : gl);
    }
    gin[0] = gx;
    return CT_OK;
}

/* in: input, fc_weight, fc_bias, proj_weight, proj_bias; out: output, hidden (fc's
 * output); ints: approximate. Note [GELU MLP]: the GELU's output is recomputed from
 * hidden; the rest is linear's backward twice and the GELU's between them. A gradient
 * reaching hidden itself joins the one through the GELU. */
DEF(gelu_mlp, CT_SAVE_IN0 | CT_SAVE_IN1 | CT_SAVE_IN3 | CT_SAVE_OUT1) {
    ct_node *n = ctx->node;
    const ct_gelu_approximate ap = (ct_gelu_approximate)n->ints[0];
    ct_tensor *x, *w1, *w2, *pre;
    TRY(x = saved(ctx, 0));
    TRY(w1 = saved(ctx, 1));
    TRY(w2 = saved(ctx, 3));
    TRY(pre = saved(ctx, CT_SAVED_OUT1));
    const int64_t f = w1->shape[0], c = w1->shape[1], c2 = w2->shape[0];
    const int64_t rows = c > 0 ? x->numel / c : 0, zero = 0;
    const bool want_pre = WANT(0) || WANT(1) || WANT(2); /* fc's gradients need hidden's */
    ct_tensor *x2, *p2, *dpre = NULL;
    TRY(x2 = ct_reshape(x, CT_SHAPE(rows, c)));
    TRY(p2 = ct_reshape(pre, CT_SHAPE(rows, f)));
    if (gout[0]) {
        ct_tensor *g2;
        TRY(g2 = ct_reshape(gout[0], CT_SHAPE(rows, c2)));
        if (WANT(3))
            TRY(gin[3] = ct_mm(ct_t(g2), ct_gelu(p2, ap)));
        if (WANT(4))
            TRY(gin[4] = ct_sum(g2, &zero, 1, false, CT_DTYPE_UNDEFINED));
        if (want_pre && !ctx->create_graph) {
            /* one op, one product on CUDA (Note [GELU epilogues]), fc's bias gradient
             * with it unless a gradient reaches hidden too */
            bool bias_here = WANT(2) && !gout[1];
            ct_status st = ct_gelu_mlp_hidden_backward(g2, w2, p2, ap, &dpre, bias_here ? &gin[2] : NULL);
            if (st)
                return st;
        } else if (want_pre) {
            ct_tensor *gh;
            TRY(gh = ct_mm(g2, w2));
            ct_status st = gelu_grad(ctx, gh, p2, ap == CT_GELU_APPROXIMATE_TANH, &dpre);
            if (st)
                return st;
        }
    }
    if (gout[1] && want_pre) {
        ct_tensor *gp;
        TRY(gp = ct_reshape(gout[1], CT_SHAPE(rows, f)));
        TRY(dpre = dpre ? ct_add(dpre, gp) : gp);
    }
    if (dpre) {
        if (WANT(1))
            TRY(gin[1] = ct_mm(ct_t(dpre), x2));
        if (WANT(2) && !gin[2])
            TRY(gin[2] = ct_sum(dpre, &zero, 1, false, CT_DTYPE_UNDEFINED));
        if (WANT(0))
            TRY(gin[0] = ct_reshape(ct_mm(dpre, w1), x->shape, x->ndim));
    }
    return CT_OK;
}

NONDIFF(avg_pool2d_backward)
NONDIFF(adaptive_avg_pool2d_backward)
NONDIFF(rms_norm_backward)
NONDIFF(layer_norm_backward)
NONDIFF(gelu_backward)
NONDIFF(scaled_dot_product_attention_backward)
NONDIFF(_flash_attention_backward)
NONDIFF(_cudnn_rnn)
NONDIFF(_cudnn_rnn_backward)
NONDIFF(embedding_backward)
NONDIFF(nll_loss_backward)
NONDIFF(cross_entropy_fused_backward)
NONDIFF(gelu_mlp_hidden_backward)
NONDIFF(one_hot)

#endif
