/* Custom autograd functions from C callbacks (torch.autograd.Function) and
 * activation checkpointing (torch.utils.checkpoint, use_reentrant=False).
 *
 * Note [Custom functions]
 * ct_autograd_function_apply runs the forward callback with grad mode off and, when an
 * input requires grad, records one CT_NODE_INTERNAL node whose edges are the inputs'
 * and whose backward calls the backward callback. The node owns the context
 * (node->custom): the saved tensors, the outputs' metadata and the user's state.
 * Saved tensors follow Note [Saved tensors]: an output of the function is kept as an
 * alias without history (no cycle output -> node -> output) and gets the node back as
 * its grad_fn when unpacked under create_graph; anything else is kept as it is with
 * its version, so an in-place change or a use after backward freed it is an error.
 *
 * Note [Checkpoint]
 * ct_checkpoint runs fn with grad mode on, so ops record nodes as usual, but every node
 * made meanwhile carries the checkpoint's tag and saves no tensor (node->saved_freed),
 * so the activations die as the forward goes. The recorded graph is only a map: the
 * edges leaving it (to nodes not tagged: the inputs' history, leaves' accumulators,
 * anything fn reached through user_data) become the edges of one
 * CheckpointBackward node, the outputs become aliases with that node as grad_fn, and
 * the map is dropped. In backward the node restores the generator's state of the
 * forward, runs fn again on the saved inputs with grad mode on (a normal graph this
 * time), runs the engine from the recomputed outputs down to its own edges and stops
 * there (ct_engine_grad_at_edges), and hands the gradients it found to its edges. The
 * gradients of the recomputed graph are recorded under create_graph, so double
 * backward through a checkpoint works. As with PyTorch's non-reentrant checkpoint,
 * tensors used inside fn get their gradients whether or not an input requires grad. */
#include <stdio.h>
#include <string.h>

#include "autograd/node.h"
#include "core/random.h"

struct ct_autograd_ctx {
    ct_node *node; /* weak; NULL until the node is recorded */
    char name[40];
    ct_autograd_backward_fn backward;
    void *user_data;
    int nin, nout;
    bool *needs_input_grad; /* nin */
    bool materialize;
    bool in_forward;
    bool create_graph; /* of the backward running now */
    /* Forward: what save_for_backward and mark_non_differentiable were given. */
    const ct_tensor **to_save;
    int nto_save;
    const ct_tensor **nondiff;
    int nnondiff;
    /* After forward. */
    ct_saved *saved;
    int nsaved;
    ct_input_meta out_meta[CT_NODE_MAX_OUT];
    void *state;
    void (*state_free)(void *);
    /* Checkpoints: fn, and the generator's state when the forward began. */
    ct_checkpoint_fn ckpt;
    uint64_t rng_seed, rng_offset;
};

static ct_autograd_ctx *ctx_new(const char *name, int nin, int nout, void *user_data) {
    ct_autograd_ctx *c = ct_xcalloc("autograd_function", 1, sizeof *c);
    if (!c)
        return NULL;
    c->needs_input_grad = ct_xcalloc("autograd_function", (size_t)(nin > 0 ? nin : 1), sizeof *c->needs_input_grad);
    if (!c->needs_input_grad) {
        free(c);
        return NULL;
    }
    snprintf(c->name, sizeof c->name, "%s", name);
    c->nin = nin;
    c->nout = nout;
    c->user_data = user_data;
    c->materialize = true;
    return c;
}

void ct_custom_free_saved(ct_autograd_ctx *c) {
    if (!c)
        return;
    for (int i = 0; i < c->nsaved; i++) {
        ct_release(c->saved[i].t);
        c->saved[i].t = NULL;
    }
}

void ct_custom_free(ct_autograd_ctx *c) {
    if (!c)
        return;
    ct_custom_free_saved(c);
    if (c->state_free)
        c->state_free(c->state);
    free(c->saved);
    free(c->to_save);
    free(c->nondiff);
    free(c->needs_input_grad);
    free(c);
}

/* ------------------------------------------------------------------ context */

ct_status ct_autograd_ctx_save_for_backward(ct_autograd_ctx *ctx, ct_tensor *const *tensors, int n) {
    const char *op = "save_for_backward";
    CT_CHECK_ARG_STATUS(op, ctx);
    if (!ctx->in_forward)
        return ct_error(CT_ERROR_RUNTIME, op, "save_for_backward can only be called from forward");
    if (n < 0 || (n > 0 && !tensors))
        return ct_error(CT_ERROR_VALUE, op, "expected an array of %d tensors", n);
    const ct_tensor **list = NULL;
    if (n > 0) {
        list = ct_xcalloc(op, (size_t)n, sizeof *list);
        if (!list)
            return ct_last_status();
        for (int i = 0; i < n; i++)
            list[i] = tensors[i];
    }
    free(ctx->to_save);
    ctx->to_save = list;
    ctx->nto_save = n;
    return CT_OK;
}

int ct_autograd_ctx_saved_count(const ct_autograd_ctx *ctx) { return ctx ? ctx->nsaved : 0; }

ct_tensor *ct_autograd_ctx_saved(ct_autograd_ctx *ctx, int i) {
    const char *op = "saved_tensors";
    CT_CHECK_ARG(op, ctx);
    if (!ctx->node || ctx->in_forward) {
        ct_error(CT_ERROR_RUNTIME, op, "saved tensors can only be read in backward");
        return NULL;
    }
    if (i < 0 || i >= ctx->nsaved) {
        ct_error(CT_ERROR_INDEX, op, "saved tensor index %d is out of range for %d saved tensors", i, ctx->nsaved);
        return NULL;
    }
    return ct_saved_unpack(ctx->node, &ctx->saved[i], ctx->create_graph);
}

bool ct_autograd_ctx_needs_input_grad(const ct_autograd_ctx *ctx, int i) {
    return ctx && i >= 0 && i < ctx->nin && ctx->needs_input_grad[i];
}

ct_status ct_autograd_ctx_mark_non_differentiable(ct_autograd_ctx *ctx, const ct_tensor *output) {
    const char *op = "mark_non_differentiable";
    CT_CHECK_ARG_STATUS(op, ctx);
    CT_CHECK_ARG_STATUS(op, output);
    if (!ctx->in_forward)
        return ct_error(CT_ERROR_RUNTIME, op, "mark_non_differentiable can only be called from forward");
    const ct_tensor **l = realloc(ctx->nondiff, (size_t)(ctx->nnondiff + 1) * sizeof *l);
    if (!l)
        return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
    l[ctx->nnondiff++] = output;
    ctx->nondiff = l;
    return CT_OK;
}

void ct_autograd_ctx_set_materialize_grads(ct_autograd_ctx *ctx, bool value) {
    if (ctx)
        ctx->materialize = value;
}

void ct_autograd_ctx_set_state(ct_autograd_ctx *ctx, void *state, void (*free_fn)(void *)) {
    if (!ctx)
        return;
    if (ctx->state_free && ctx->state != state)
        ctx->state_free(ctx->state);
    ctx->state = state;
    ctx->state_free = free_fn;
}

void *ct_autograd_ctx_state(const ct_autograd_ctx *ctx) { return ctx ? ctx->state : NULL; }

/* ------------------------------------------------------------------ custom functions */

static ct_status custom_backward(ct_node_ctx *nctx, ct_tensor *const *gout, ct_tensor **gin) {
    ct_node *n = nctx->node;
    ct_autograd_ctx *c = n->custom;
    c->create_graph = nctx->create_graph;
    ct_tensor *g[CT_NODE_MAX_OUT] = {NULL};
    for (int k = 0; k < c->nout; k++) {
        g[k] = gout[k];
        if (!g[k] && c->materialize) {
            const ct_input_meta *m = &c->out_meta[k];
            g[k] = ct_zeros(m->shape, m->ndim, m->dtype, m->device);
            if (!g[k])
                return ct_last_status();
        }
    }
    ct_tensor **r = ct_xcalloc(n->name, (size_t)(c->nin > 0 ? c->nin : 1), sizeof *r);
    if (!r)
        return ct_last_status();
    ct_clear_error();
    int got = c->backward(c, g, c->nout, r, c->nin, c->user_data);
    ct_status st = CT_OK;
    if (got < 0)
        st = ct_last_status() != CT_OK ? ct_last_status()
                                       : ct_error(CT_ERROR_RUNTIME, n->name, "the backward of %s failed", c->name);
    else if (got != c->nin)
        st = ct_error(CT_ERROR_RUNTIME, n->name,
                      "function %s returned an incorrect number of gradients (expected %d, got %d)", n->name, c->nin,
                      got);
    for (int i = 0; st == CT_OK && i < c->nin; i++) {
        if (!r[i])
            continue;
        if (n->in_meta[i].dtype == CT_DTYPE_UNDEFINED)
            st = ct_error(CT_ERROR_RUNTIME, n->name,
                          "function %s returned a gradient different than None at position %d, but the "
                          "corresponding forward input was not a Variable",
                          n->name, i + 1);
        else if (!ct_dtype_is_floating(r[i]->dtype))
            st = ct_error(CT_ERROR_RUNTIME, n->name,
                          "Function %s returned an invalid gradient at index %d - expected a floating point "
                          "gradient but got %s",
                          n->name, i, ct_dtype_name(r[i]->dtype));
        else if (c->needs_input_grad[i])
            gin[i] = r[i]; /* the engine checks its shape (fit_gradient) */
    }
    free(r);
    return st;
}

static bool in_list(const ct_tensor *const *l, int n, const ct_tensor *t) {
    for (int i = 0; i < n; i++)
        if (l[i] == t)
            return true;
    return false;
}

ct_status ct_autograd_function_apply(const ct_autograd_function_def *def, ct_tensor *const *inputs, int ninputs,
                                     ct_tensor **outputs, int noutputs, void *user_data) {
    const char *op = "autograd_function_apply";
    if (!def || !outputs)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "def and outputs must not be NULL");
    const char *name = def->name && def->name[0] ? def->name : "CustomFunction";
    if (!def->forward)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s: You must implement the forward function for custom "
                                                    "autograd.Function.", name);
    if (!def->backward)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s: You must implement the backward function for custom "
                                                    "autograd.Function.", name);
    if (ninputs < 0 || (ninputs > 0 && !inputs))
        return ct_error(CT_ERROR_VALUE, op, "%s: expected an array of %d inputs", name, ninputs);
    if (noutputs < 1 || noutputs > CT_NODE_MAX_OUT)
        return ct_error(CT_ERROR_VALUE, op, "%s: a custom function has 1 to %d outputs, got %d", name,
                        CT_NODE_MAX_OUT, noutputs);
    for (int k = 0; k < noutputs; k++)
        outputs[k] = NULL;
    ct_autograd_ctx *c = ctx_new(name, ninputs, noutputs, user_data);
    if (!c)
        return ct_last_status();
    c->backward = def->backward;
    bool record = false;
    if (ct_is_grad_enabled())
        for (int i = 0; i < ninputs; i++) {
            c->needs_input_grad[i] = inputs[i] && inputs[i]->requires_grad;
            record = record || c->needs_input_grad[i];
        }

    c->in_forward = true;
    bool prev = ct_set_grad_enabled(false);
    ct_clear_error();
    ct_status st = def->forward(c, inputs, ninputs, outputs, noutputs, user_data);
    ct_set_grad_enabled(prev);
    c->in_forward = false;
    if (st != CT_OK && ct_last_status() == CT_OK)
        st = ct_error(st, op, "the forward of %s failed", name);
    for (int k = 0; st == CT_OK && k < noutputs; k++)
        if (!outputs[k])
            st = ct_error(CT_ERROR_RUNTIME, op, "the forward of %s wrote no tensor for output %d of %d", name, k,
                          noutputs);
    /* The outputs as forward wrote them, for matching saved tensors. An input
     * returned as it is, or a tensor returned twice, becomes an alias: each output is
     * a tensor of its own, owned as an op's result is. */
    ct_tensor *orig[CT_NODE_MAX_OUT] = {NULL};
    for (int k = 0; st == CT_OK && k < noutputs; k++) {
        orig[k] = outputs[k];
        if (in_list((const ct_tensor *const *)inputs, ninputs, orig[k]) ||
            in_list((const ct_tensor *const *)orig, k, orig[k])) {
            outputs[k] = ct_detach(orig[k]);
            if (!outputs[k])
                st = ct_last_status();
        }
    }
    if (st != CT_OK || !record) {
        ct_custom_free(c);
        return st;
    }

    char nodename[48];
    snprintf(nodename, sizeof nodename, "%sBackward", name);
    ct_node *n = ct_node_new(CT_NODE_INTERNAL, nodename, ninputs);
    if (!n) {
        ct_custom_free(c);
        return ct_last_status();
    }
    n->backward = custom_backward;
    n->nout = noutputs;
    n->custom = c;
    c->node = n;
    for (int i = 0; i < ninputs && st == CT_OK; i++) {
        if (!inputs[i]) {
            n->in_meta[i].dtype = CT_DTYPE_UNDEFINED;
            continue;
        }
        ct_input_meta_set(&n->in_meta[i], inputs[i]);
        st = ct_edge_for(inputs[i], &n->edges[i]);
    }
    for (int k = 0; k < noutputs && st == CT_OK; k++) {
        ct_tensor *o = outputs[k];
        ct_input_meta_set(&c->out_meta[k], o);
        if (!ct_dtype_is_floating(o->dtype) || in_list(c->nondiff, c->nnondiff, orig[k]))
            continue;
        /* A tensor with history of its own (reached through user_data) keeps it: the
         * output is an alias that takes the node's history. */
        if (o->requires_grad) {
            o = ct_detach(o);
            if (!o) {
                st = ct_last_status();
                break;
            }
            outputs[k] = o;
        }
        st = ct_set_history(o, n, k);
    }
    if (st == CT_OK && c->nto_save > 0) {
        c->saved = ct_xcalloc(op, (size_t)c->nto_save, sizeof *c->saved);
        if (!c->saved)
            st = ct_last_status();
        else
            c->nsaved = c->nto_save;
    }
    for (int j = 0; st == CT_OK && j < c->nto_save; j++) {
        const ct_tensor *t = c->to_save[j];
        int k = -1;
        for (int q = 0; q < noutputs && k < 0 && t; q++)
            if (orig[q] == t && outputs[q]->requires_grad && ct_tensor_node(outputs[q]) == n)
                k = q;
        const ct_tensor *s = k >= 0 ? outputs[k] : t;
        if (s)
            st = ct_saved_set(n, &c->saved[j], s, k, ct_tensor_version(s));
    }
    free(c->to_save);
    c->to_save = NULL;
    c->nto_save = 0;
    free(c->nondiff);
    c->nondiff = NULL;
    c->nnondiff = 0;
    ct_node_unref(n); /* the outputs hold it */
    return st;
}

/* ------------------------------------------------------------------ checkpoint */

static CT_THREAD_LOCAL uint64_t tls_tag;
static CT_THREAD_LOCAL bool tls_discard;
static atomic_uint_fast64_t next_tag = 1;

/* Marks a node already walked (the top bit of its tag). */
#define TAG_SEEN (UINT64_C(1) << 63)

uint64_t ct_checkpoint_tag(void) { return tls_tag; }
bool ct_checkpoint_discards_saves(void) { return tls_discard; }

typedef struct boundary {
    ct_edge *edges;
    ct_input_meta *meta;
    int n, cap;
} boundary;

static ct_status boundary_add(boundary *b, ct_node *fn, int input_nr, const ct_input_meta *m) {
    for (int i = 0; i < b->n; i++)
        if (b->edges[i].fn == fn && b->edges[i].input_nr == input_nr)
            return CT_OK;
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 16;
        ct_edge *e = realloc(b->edges, (size_t)cap * sizeof *e);
        if (e)
            b->edges = e;
        ct_input_meta *mm = e ? realloc(b->meta, (size_t)cap * sizeof *mm) : NULL;
        if (!e || !mm)
            return ct_error(CT_ERROR_OUT_OF_MEMORY, "checkpoint", "out of memory");
        b->meta = mm;
        b->cap = cap;
    }
    ct_node_ref(fn);
    b->edges[b->n] = (ct_edge){fn, input_nr};
    b->meta[b->n] = *m;
    b->n++;
    return CT_OK;
}

static bool tagged(const ct_node *n, uint64_t tag) {
    return n && n->kind != CT_NODE_ACCUMULATE && (n->tag & ~TAG_SEEN) == tag;
}

/* The edges leaving the part of the graph that the forward tagged tag recorded
 * (Note [Checkpoint]), reached from outs. */
static ct_status find_boundary(ct_tensor *const *outs, int nout, uint64_t tag, boundary *b) {
    ct_node **stack = NULL;
    int sn = 0, scap = 0;
    ct_status st = CT_OK;
    for (int k = 0; k < nout && st == CT_OK; k++) {
        const ct_tensor *o = outs[k];
        if (!o->requires_grad || !ct_dtype_is_floating(o->dtype))
            continue;
        ct_node *fn = ct_tensor_node(o);
        if (!tagged(fn, tag)) {
            ct_edge e;
            ct_input_meta m;
            if ((st = ct_edge_for(o, &e)) != CT_OK)
                break;
            ct_input_meta_set(&m, o);
            if (e.fn)
                st = boundary_add(b, e.fn, e.input_nr, &m);
            ct_node_unref(e.fn);
            continue;
        }
        if (fn->tag & TAG_SEEN)
            continue;
        fn->tag |= TAG_SEEN;
        if (sn == scap) {
            scap = scap ? 2 * scap : 64;
            ct_node **s = realloc(stack, (size_t)scap * sizeof *s);
            if (!s) {
                st = ct_error(CT_ERROR_OUT_OF_MEMORY, "checkpoint", "out of memory");
                break;
            }
            stack = s;
        }
        stack[sn++] = fn;
        while (sn > 0 && st == CT_OK) {
            ct_node *n = stack[--sn];
            for (int i = 0; i < n->nin && st == CT_OK; i++) {
                ct_node *c = n->edges[i].fn;
                if (!c)
                    continue;
                if (!tagged(c, tag)) {
                    st = boundary_add(b, c, n->edges[i].input_nr, &n->in_meta[i]);
                    continue;
                }
                if (c->tag & TAG_SEEN)
                    continue;
                c->tag |= TAG_SEEN;
                if (sn == scap) {
                    scap *= 2;
                    ct_node **s = realloc(stack, (size_t)scap * sizeof *s);
                    if (!s) {
                        st = ct_error(CT_ERROR_OUT_OF_MEMORY, "checkpoint", "out of memory");
                        break;
                    }
                    stack = s;
                }
                stack[sn++] = c;
            }
        }
    }
    free(stack);
    return st;
}

static bool same_meta(const ct_tensor *t, const ct_input_meta *m) {
    return t->ndim == m->ndim && t->dtype == m->dtype && memcmp(t->shape, m->shape, (size_t)m->ndim * 8) == 0;
}

static ct_status checkpoint_backward(ct_node_ctx *nctx, ct_tensor *const *gout, ct_tensor **gin) {
    ct_node *n = nctx->node;
    ct_autograd_ctx *c = n->custom;
    const char *op = n->name;
    ct_status st = CT_OK;
    ct_tensor **in = ct_xcalloc(op, (size_t)(c->nin > 0 ? c->nin : 1), sizeof *in);
    ct_tensor **grads = ct_xcalloc(op, (size_t)(n->nin > 0 ? n->nin : 1), sizeof *grads);
    if (!in || !grads) {
        free(in);
        free(grads);
        return ct_last_status();
    }
    for (int j = 0; j < c->nin && st == CT_OK; j++) {
        in[j] = ct_saved_unpack(n, &c->saved[j], false);
        if (!in[j] && (n->saved_freed || c->saved[j].t))
            st = ct_last_status() != CT_OK ? ct_last_status() : CT_ERROR_RUNTIME;
    }
    ct_tensor *outs[CT_NODE_MAX_OUT] = {NULL};
    ct_generator *gen = ct_default_generator();
    uint64_t seed, offset;
    ct_generator_get_state(gen, &seed, &offset);
    uint64_t prev_tag = tls_tag;
    bool prev_discard = tls_discard;
    ct_scope_begin();
    if (st == CT_OK) {
        ct_generator_set_state(gen, c->rng_seed, c->rng_offset);
        tls_tag = 0;
        tls_discard = false;
        bool prev = ct_set_grad_enabled(true);
        ct_clear_error();
        st = c->ckpt(in, c->nin, outs, c->nout, c->user_data);
        ct_set_grad_enabled(prev);
        tls_tag = prev_tag;
        tls_discard = prev_discard;
        ct_generator_set_state(gen, seed, offset);
        if (st != CT_OK && ct_last_status() == CT_OK)
            st = ct_error(st, op, "the checkpointed function failed in the recomputation");
    }
    const ct_tensor *roots[CT_NODE_MAX_OUT], *rgrads[CT_NODE_MAX_OUT];
    int nroots = 0;
    for (int k = 0; k < c->nout && st == CT_OK; k++) {
        if (!outs[k]) {
            st = ct_error(CT_ERROR_RUNTIME, op, "the checkpointed function wrote no tensor for output %d", k);
            break;
        }
        if (!same_meta(outs[k], &c->out_meta[k])) {
            char a[128], b[128];
            st = ct_error(CT_ERROR_RUNTIME, op,
                          "torch.utils.checkpoint: Recomputed values for the following tensors have different "
                          "metadata than during the forward pass: output %d is %s %s, was %s %s",
                          k, ct_dtype_name(outs[k]->dtype), ct_shape_str(outs[k]->shape, outs[k]->ndim, a, sizeof a),
                          ct_dtype_name(c->out_meta[k].dtype),
                          ct_shape_str(c->out_meta[k].shape, c->out_meta[k].ndim, b, sizeof b));
            break;
        }
        if (gout[k] && outs[k]->requires_grad) {
            roots[nroots] = outs[k];
            rgrads[nroots++] = gout[k];
        }
    }
    if (st == CT_OK && nroots > 0 && n->nin > 0) {
        st = ct_engine_grad_at_edges(roots, nroots, rgrads, n->edges, n->nin, nctx->create_graph, grads);
        for (int i = 0; st == CT_OK && i < n->nin; i++)
            if (grads[i])
                gin[i] = ct_keep(grads[i]); /* to the engine's scope for this node */
    }
    ct_scope_end();
    free(in);
    free(grads);
    return st;
}

ct_status ct_checkpoint(ct_checkpoint_fn fn, ct_tensor *const *inputs, int ninputs, ct_tensor **outputs,
                        int noutputs, void *user_data) {
    const char *op = "checkpoint";
    if (!fn || !outputs)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "fn and outputs must not be NULL");
    if (ninputs < 0 || (ninputs > 0 && !inputs))
        return ct_error(CT_ERROR_VALUE, op, "expected an array of %d inputs", ninputs);
    if (noutputs < 1 || noutputs > CT_NODE_MAX_OUT)
        return ct_error(CT_ERROR_VALUE, op, "a checkpointed function has 1 to %d outputs, got %d", CT_NODE_MAX_OUT,
                        noutputs);
    for (int k = 0; k < noutputs; k++)
        outputs[k] = NULL;
    if (!ct_is_grad_enabled()) { /* nothing to recompute */
        ct_status st = fn(inputs, ninputs, outputs, noutputs, user_data);
        for (int k = 0; st == CT_OK && k < noutputs; k++)
            if (!outputs[k])
                st = ct_error(CT_ERROR_RUNTIME, op, "the checkpointed function wrote no tensor for output %d", k);
            else if (in_list((const ct_tensor *const *)inputs, ninputs, outputs[k]) && !(outputs[k] = ct_detach(outputs[k])))
                st = ct_last_status(); /* an input returned as it is: an alias, owned as the others */
        return st;
    }

    ct_generator *gen = ct_default_generator();
    uint64_t seed, offset;
    ct_generator_get_state(gen, &seed, &offset);
    uint64_t tag = atomic_fetch_add(&next_tag, 1);
    uint64_t prev_tag = tls_tag;
    bool prev_discard = tls_discard;
    ct_tensor *held[CT_NODE_MAX_OUT] = {NULL};
    ct_scope_begin();
    tls_tag = tag;
    tls_discard = true;
    ct_clear_error();
    ct_status st = fn(inputs, ninputs, outputs, noutputs, user_data);
    tls_tag = prev_tag;
    tls_discard = prev_discard;
    if (st != CT_OK && ct_last_status() == CT_OK)
        st = ct_error(st, op, "the checkpointed function failed");
    for (int k = 0; k < noutputs && st == CT_OK; k++) {
        if (!outputs[k])
            st = ct_error(CT_ERROR_RUNTIME, op, "the checkpointed function wrote no tensor for output %d", k);
        else
            held[k] = ct_retain(outputs[k]);
    }
    ct_scope_end();
    for (int k = 0; k < noutputs; k++)
        outputs[k] = NULL;

    boundary b = {0};
    if (st == CT_OK)
        st = find_boundary(held, noutputs, tag, &b);
    ct_node *n = NULL;
    ct_autograd_ctx *c = NULL;
    if (st == CT_OK && b.n > 0) {
        c = ctx_new("Checkpoint", ninputs, noutputs, user_data);
        n = c ? ct_node_new(CT_NODE_INTERNAL, "CheckpointBackward", b.n) : NULL;
        if (!n) {
            ct_custom_free(c);
            c = NULL;
            st = ct_last_status();
        }
    }
    if (n) {
        n->backward = checkpoint_backward;
        n->nout = noutputs;
        n->custom = c;
        c->node = n;
        c->ckpt = fn;
        c->rng_seed = seed;
        c->rng_offset = offset;
        for (int i = 0; i < b.n; i++) {
            n->edges[i] = b.edges[i];
            n->in_meta[i] = b.meta[i];
        }
        b.n = 0; /* the node owns the references */
        c->saved = ct_xcalloc(op, (size_t)(ninputs > 0 ? ninputs : 1), sizeof *c->saved);
        if (!c->saved)
            st = ct_last_status();
        else
            c->nsaved = ninputs;
        for (int j = 0; j < ninputs && st == CT_OK; j++)
            if (inputs[j])
                st = ct_saved_set(n, &c->saved[j], inputs[j], -1, ct_tensor_version(inputs[j]));
        for (int k = 0; k < noutputs && st == CT_OK; k++)
            ct_input_meta_set(&c->out_meta[k], held[k]);
    }
    for (int k = 0; k < noutputs && st == CT_OK; k++) {
        outputs[k] = ct_detach(held[k]);
        if (!outputs[k])
            st = ct_last_status();
        else if (n && held[k]->requires_grad && ct_dtype_is_floating(held[k]->dtype))
            st = ct_set_history(outputs[k], n, k);
    }
    for (int i = 0; i < b.n; i++)
        ct_node_unref(b.edges[i].fn);
    free(b.edges);
    free(b.meta);
    ct_node_unref(n); /* the outputs hold it */
    for (int k = 0; k < noutputs; k++)
        ct_release(held[k]); /* and with them the recorded map */
    return st;
}
