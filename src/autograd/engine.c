/* The backward engine: ct_backward and ct_autograd_grad.
 *
 * Note [Engine]
 * A backward pass is a local task on the calling thread: it discovers the nodes
 * reachable from the outputs, marks the ones that must run (all of them for
 * ct_backward; for ct_autograd_grad only those on a path to a requested input),
 * counts for each node how many running nodes feed it, and then runs nodes from a
 * ready queue as their counts reach zero. Gradients for a node's outputs are summed in
 * its input buffer before it runs. Nothing is shared between tasks except the nodes
 * themselves (reference counted) and leaves' .grad (updated under a lock), so two
 * threads can run backward on two graphs at once, and a hook may call backward again. */
#include <math.h>
#include <string.h>

#include "autograd/node.h"

static pthread_mutex_t accumulate_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct entry {
    ct_node *node; /* NULL: empty slot */
    int deps;
    bool needed;  /* runs (or, for captures, leads to a requested input) */
    bool visited; /* post-order marking */
    bool ready;
    ct_tensor *buf[CT_NODE_MAX_OUT]; /* owned references */
} entry;

typedef struct task {
    entry *map;
    size_t cap, count;
    bool accumulate; /* ct_backward: run AccumulateGrad nodes */
    bool keep_graph, create_graph;
    bool stop_at_caps; /* capture nodes do not run, nor anything behind them */
    /* ct_autograd_grad: where each requested input's gradient arrives. */
    int ncap;
    ct_edge *caps;
    ct_tensor **captured;
} task;

static size_t hash_ptr(const void *p) {
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static entry *lookup(task *t, ct_node *n) {
    size_t mask = t->cap - 1;
    for (size_t i = hash_ptr(n) & mask;; i = (i + 1) & mask)
        if (t->map[i].node == n || t->map[i].node == NULL)
            return t->map[i].node ? &t->map[i] : NULL;
}

static entry *insert(task *t, ct_node *n, bool *is_new) {
    if ((t->count + 1) * 2 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 64;
        entry *nm = ct_xcalloc("backward", ncap, sizeof *nm);
        if (!nm)
            return NULL;
        entry *old = t->map;
        size_t ocap = t->cap;
        t->map = nm;
        t->cap = ncap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].node) {
                size_t mask = ncap - 1, j = hash_ptr(old[i].node) & mask;
                while (nm[j].node)
                    j = (j + 1) & mask;
                nm[j] = old[i];
            }
        free(old);
    }
    size_t mask = t->cap - 1;
    size_t i = hash_ptr(n) & mask;
    while (t->map[i].node && t->map[i].node != n)
        i = (i + 1) & mask;
    *is_new = t->map[i].node == NULL;
    if (*is_new) {
        t->map[i].node = n;
        t->count++;
    }
    return &t->map[i];
}

/* A growable stack of node pointers. */
typedef struct {
    ct_node **v;
    int *k;
    size_t n, cap;
} nstack;

static bool push(nstack *s, ct_node *n, int k) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        ct_node **v = realloc(s->v, cap * sizeof *v);
        int *kk = v ? realloc(s->k, cap * sizeof *kk) : NULL;
        if (!v || !kk) {
            if (v)
                s->v = v;
            ct_error(CT_ERROR_OUT_OF_MEMORY, "backward", "out of memory");
            return false;
        }
        s->v = v;
        s->k = kk;
        s->cap = cap;
    }
    s->v[s->n] = n;
    s->k[s->n] = k;
    s->n++;
    return true;
}

static bool is_capture(const task *t, const ct_node *n) {
    for (int i = 0; i < t->ncap; i++)
        if (t->caps[i].fn == n)
            return true;
    return false;
}

/* Finds every node reachable from the roots, decides which run, counts dependencies. */
static ct_status discover(task *t, const ct_edge *roots, int nroots) {
    nstack st = {0};
    ct_status status = CT_OK;
    bool is_new;
    /* Post-order walk: a node's children are finished before the node itself, so
     * "needed" can be computed on the way back up. Each root's walk ends before the
     * next root goes on the stack: a root that is also reached from another root
     * (outputs y and y[-1] of one node) would otherwise sit on the stack unfinished
     * while the nodes above it read its "needed", and its dependencies would go
     * uncounted, so it ran with only its own root's gradient. */
    for (int r = 0; r < nroots && status == CT_OK; r++) {
        if (!roots[r].fn)
            continue;
        entry *re = insert(t, roots[r].fn, &is_new);
        if (!re || (is_new && !push(&st, roots[r].fn, 0)))
            status = CT_ERROR_OUT_OF_MEMORY;
        while (status == CT_OK && st.n > 0) {
            ct_node *n = st.v[st.n - 1];
            int k = st.k[st.n - 1];
            bool stop = t->stop_at_caps && is_capture(t, n);
            if (k < n->nin && !stop) {
                st.k[st.n - 1] = k + 1;
                ct_node *c = n->edges[k].fn;
                if (!c)
                    continue;
                entry *e = insert(t, c, &is_new);
                if (!e || (is_new && !push(&st, c, 0)))
                    status = CT_ERROR_OUT_OF_MEMORY;
                continue;
            }
            st.n--;
            entry *e = lookup(t, n);
            e->visited = true;
            if (t->accumulate) {
                e->needed = true;
            } else if (n->kind != CT_NODE_ACCUMULATE && !stop) {
                for (int i = 0; i < n->nin && !e->needed; i++) {
                    ct_node *c = n->edges[i].fn;
                    if (c && (is_capture(t, c) || lookup(t, c)->needed))
                        e->needed = true;
                }
            }
        }
    }
    free(st.v);
    free(st.k);
    if (status != CT_OK)
        return status;
    for (size_t i = 0; i < t->cap; i++) {
        entry *e = &t->map[i];
        if (!e->node || !e->needed)
            continue;
        for (int j = 0; j < e->node->nin; j++)
            if (e->node->edges[j].fn)
                lookup(t, e->node->edges[j].fn)->deps++;
    }
    return CT_OK;
}

static void task_free(task *t) {
    for (size_t i = 0; i < t->cap; i++)
        for (int j = 0; j < CT_NODE_MAX_OUT; j++)
            ct_release(t->map[i].buf[j]);
    free(t->map);
}

static bool same_shape(const ct_tensor *g, const ct_input_meta *m) {
    if (g->ndim != m->ndim)
        return false;
    for (int i = 0; i < m->ndim; i++)
        if (g->shape[i] != m->shape[i])
            return false;
    return true;
}

/* Brings a gradient to its input's shape (summing broadcast dims) and dtype. */
static ct_tensor *fit_gradient(const ct_node *n, int i, ct_tensor *g) {
    const ct_input_meta *m = &n->in_meta[i];
    if (!same_shape(g, m)) {
        bool ok = g->ndim >= m->ndim;
        for (int d = 0; ok && d < m->ndim; d++) {
            int64_t gs = g->shape[g->ndim - m->ndim + d];
            ok = m->shape[d] == gs || m->shape[d] == 1;
        }
        if (!ok) {
            char a[128], b[128];
            ct_error(CT_ERROR_RUNTIME, n->name,
                     "Function %s returned an invalid gradient at index %d - got %s but expected shape compatible "
                     "with %s",
                     n->name, i, ct_shape_str(g->shape, g->ndim, a, sizeof a),
                     ct_shape_str(m->shape, m->ndim, b, sizeof b));
            return NULL;
        }
        g = ct_ag_sum_to(g, m->shape, m->ndim);
        if (!g)
            return NULL;
    }
    if (g->dtype != m->dtype)
        g = ct_to_dtype(g, m->dtype);
    return g;
}

/* "nan" or "inf" when g holds such a value, NULL otherwise. */
static const char *nonfinite(const ct_tensor *g) {
    if (!ct_dtype_is_floating(g->dtype) || g->device.type != CT_DEVICE_CPU)
        return NULL;
    int64_t n = g->numel;
    int64_t idx[CT_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        double v;
        ct_tensor_get(g, idx, &v);
        if (!isfinite(v))
            return isnan(v) ? "nan" : "inf";
        for (int d = g->ndim - 1; d >= 0; d--) {
            if (++idx[d] < g->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return NULL;
}

/* A gradient stored in .grad: a tensor of its own, with history only under
 * create_graph. */
static ct_tensor *grad_copy(ct_tensor *g, bool create_graph) {
    (void)create_graph; /* grad mode is create_graph here: clone records only then */
    return ct_clone(g);
}

/* Note [Stealing the gradient]
 * A leaf's first gradient is stored as a copy, so that later in-place accumulation
 * cannot reach a tensor someone else holds. When nothing else can hold it (the
 * engine's buffer has the only reference to the tensor and the tensor the only one to
 * its storage, or it is a view whose base nothing else holds; no history) and it is
 * dense in the leaf's dtype, shape and device, the tensor itself becomes .grad: no
 * allocation, no copy. PyTorch's AccumulateGrad does the same; mm's backward gives a
 * transposed operand (linear's w^T) its gradient in the same layout so that w's
 * gradient arrives dense. Under create_graph the copy records history and is always
 * made. */
/* Whether g is private (as above) and dense in leaf's dtype, shape and device; also
 * the test of Note [Accumulating in place], with the incoming gradient as leaf. */
static bool stealable(const ct_tensor *leaf, const ct_tensor *g, bool create_graph) {
    if (create_graph || atomic_load(&g->refcount) != 1 || g->grad_fn || g->requires_grad || g->wrapped_number ||
        !g->storage || g->storage->external)
        return false;
    /* A view counts as private when its base is held by it alone and nothing else
     * holds the storage (base and view: two references), and it spans the whole
     * storage (keeping it pins no extra memory). */
    int holders = g->is_view ? 2 : 1;
    if (atomic_load(&g->storage->refcount) != holders)
        return false;
    if (g->is_view && (!g->base || atomic_load(&g->base->refcount) != 1 || g->offset != 0 ||
                       (size_t)g->numel * ct_dtype_size(g->dtype) != g->storage->nbytes))
        return false;
    if (g->dtype != leaf->dtype || !ct_device_equal(g->device, leaf->device) || g->ndim != leaf->ndim ||
        memcmp(g->shape, leaf->shape, sizeof(int64_t) * (size_t)g->ndim) != 0)
        return false;
    return ct_tensor_is_contiguous(g);
}

/* Stores g into t->grad (accumulating). steal: g may become .grad itself (Note
 * [Stealing the gradient]). */
static ct_status store_grad(ct_tensor *t, ct_tensor *g, bool create_graph, bool steal) {
    pthread_mutex_lock(&accumulate_lock);
    ct_status st = CT_OK;
    ct_tensor *nw;
    if (!t->grad) {
        nw = steal && stealable(t, g, create_graph) ? g : grad_copy(g, create_graph);
    } else if (create_graph) {
        nw = ct_add(t->grad, g);
    } else {
        bool prev = ct_set_grad_enabled(false);
        nw = ct_add_(t->grad, g);
        ct_set_grad_enabled(prev);
    }
    /* Note [Gradients that hold their tensor]: only a gradient with history, a base
     * or a .grad of its own can hold t */
    if (nw && nw != t->grad && (nw->base || nw->grad || ct_tensor_node(nw))) {
        int holds = ct_ag_holds(nw, t);
        nw = holds < 0 ? NULL : holds ? ct_detach(nw) : nw;
    }
    if (!nw) {
        st = ct_last_status();
    } else if (nw != t->grad) {
        ct_ag_note_grad(nw);
        ct_tensor *old = t->grad;
        t->grad = ct_retain(nw);
        ct_release(old);
    }
    pthread_mutex_unlock(&accumulate_lock);
    return st;
}

/* Note [Accumulating in place]
 * When a second gradient reaches a node input, the sum usually goes into the first
 * one's memory: if the buffered tensor passes the test of Note [Stealing the
 * gradient] against the incoming one (only the buffer holds it and its storage, no
 * history, dense, same dtype, shape and device), nothing else can observe it change,
 * so buf += g replaces buf = buf + g and saves an allocation and a pass over memory
 * (a residual stream's gradient in a transformer meets several of these per block).
 * PyTorch's InputBuffer does the same. Otherwise, and always under create_graph, the
 * sum is a new tensor. */

/* Adds g (scope-owned) into entry slot. */
static ct_status add_to_buffer(entry *e, int slot, ct_tensor *g, bool create_graph) {
    if (!e->buf[slot]) {
        e->buf[slot] = ct_retain(g);
        return CT_OK;
    }
    if (stealable(g, e->buf[slot], create_graph)) {
        bool prev = ct_set_grad_enabled(false);
        ct_tensor *r = ct_add_(e->buf[slot], g);
        ct_set_grad_enabled(prev);
        return r ? CT_OK : ct_last_status();
    }
    ct_tensor *s = ct_add(e->buf[slot], g);
    if (!s)
        return ct_last_status();
    ct_release(e->buf[slot]);
    e->buf[slot] = ct_retain(s);
    return CT_OK;
}

/* Sends gradient g (scope-owned, may be NULL) for input i of n down its edge. */
static ct_status deliver(task *t, ct_node *n, int i, ct_tensor *g) {
    ct_node *next = n->edges[i].fn;
    if (!next || !g)
        return CT_OK;
    g = fit_gradient(n, i, g);
    if (!g)
        return ct_last_status();
    const char *bad = ct_anomaly_enabled() ? nonfinite(g) : NULL;
    if (bad)
        return ct_error(CT_ERROR_RUNTIME, n->name,
                        "Function '%s' returned %s values in its %dth output. The node was made by the forward op "
                        "'%s'.",
                        n->name, bad, i, n->kind == CT_NODE_OP ? ct_op_name(n->op) : n->name);
    return add_to_buffer(lookup(t, next), n->edges[i].input_nr, g, t->create_graph);
}

/* Note [Slice gradients in place]
 * The gradient of a slice (select, narrow, slice) is its input's shape of zeros with
 * the slice's part filled in. Code that takes many slices of one tensor (an RNN reads
 * one time step of its input projection per step) would then build and sum one
 * input-sized tensor per slice: O(T^2) work for T slices. When the input's gradient
 * buffer already holds a private dense tensor (the first slice's gradient put it
 * there) and the input's layout is contiguous, the slice's gradient is added into its
 * part of that buffer instead, in place: O(slice) per slice. Under create_graph (the
 * sum must record history) or anomaly mode (which checks each delivered gradient) the
 * plain path runs. PyTorch reaches the same cost through unbind, whose one node
 * stacks every step's gradient. */
static bool meta_is_contiguous(const ct_input_meta *m) {
    int64_t expect = 1;
    for (int d = m->ndim - 1; d >= 0; d--) {
        if (m->shape[d] != 1 && m->strides[d] != expect)
            return false;
        expect *= m->shape[d];
    }
    return true;
}

/* Adds the gradient of slice node n into its input's buffer when Note [Slice
 * gradients in place] applies; false when the plain backward must run. */
static bool slice_grad_in_place(task *t, entry *e, ct_status *st) {
    ct_node *n = e->node;
    if (t->create_graph || n->kind != CT_NODE_OP || n->nin != 1 || n->nout != 1 || !n->edges[0].fn ||
        (n->op != CT_OP_select && n->op != CT_OP_narrow && n->op != CT_OP_slice) || !e->buf[0] ||
        ct_anomaly_enabled())
        return false;
    const ct_input_meta *in = &n->in_meta[0], *out = &n->out_meta;
    ct_tensor *g = e->buf[0];
    ct_tensor *dst = lookup(t, n->edges[0].fn)->buf[n->edges[0].input_nr];
    if (!dst || !stealable(dst, dst, false) || dst->dtype != in->dtype || g->dtype != in->dtype ||
        !ct_device_equal(dst->device, in->device) || !ct_device_equal(g->device, in->device) ||
        dst->ndim != in->ndim || memcmp(dst->shape, in->shape, sizeof(int64_t) * (size_t)in->ndim) != 0 ||
        !meta_is_contiguous(in) || out->offset < in->offset)
        return false;
    bool prev = ct_set_grad_enabled(false);
    ct_scope_begin();
    ct_tensor *part = ct_as_strided(dst, out->shape, out->strides, out->ndim, dst->offset + out->offset - in->offset);
    *st = part && ct_add_(part, g) ? CT_OK : ct_last_status();
    ct_scope_end();
    ct_set_grad_enabled(prev);
    return true;
}

static ct_status run_node(task *t, entry *e, nstack *ready) {
    ct_node *n = e->node;
    ct_status st = CT_OK;
    if (t->stop_at_caps && is_capture(t, n)) { /* a boundary: no hooks, nothing runs */
        for (int c = 0; c < t->ncap; c++)
            if (t->caps[c].fn == n && e->buf[t->caps[c].input_nr] && !t->captured[c])
                t->captured[c] = ct_retain(e->buf[t->caps[c].input_nr]);
        return CT_OK;
    }
    /* Tensor hooks and retained gradients see what flows into the tensor. */
    pthread_mutex_lock(&ct_autograd_lock);
    ct_hook *hooks = n->kind == CT_NODE_ACCUMULATE ? (ct_ag_meta_peek(n->leaf) ? ct_ag_meta_peek(n->leaf)->hooks : NULL)
                                                   : n->hooks;
    pthread_mutex_unlock(&ct_autograd_lock);
    for (int i = 0; i < n->nout && st == CT_OK; i++) {
        if (!e->buf[i])
            continue;
        if (hooks) {
            ct_tensor *r = ct_hooks_run_grad(hooks, n->kind == CT_NODE_ACCUMULATE ? 0 : i, e->buf[i]);
            if (!r && ct_last_status() != CT_OK)
                return ct_last_status();
            if (r) {
                ct_release(e->buf[i]);
                e->buf[i] = ct_retain(r);
            }
        }
        pthread_mutex_lock(&ct_autograd_lock);
        ct_tensor *keep = n->kind == CT_NODE_OP || n->kind == CT_NODE_INTERNAL ? ct_retain(n->retain[i]) : NULL;
        pthread_mutex_unlock(&ct_autograd_lock);
        if (keep) {
            st = store_grad(keep, e->buf[i], t->create_graph, false);
            ct_release(keep);
        }
    }
    if (st != CT_OK)
        return st;
    for (int c = 0; c < t->ncap; c++)
        if (t->caps[c].fn == n && e->buf[t->caps[c].input_nr] && !t->captured[c])
            t->captured[c] = ct_retain(e->buf[t->caps[c].input_nr]);
    if (!e->needed)
        return CT_OK;

    if (n->kind == CT_NODE_ACCUMULATE) {
        if (!e->buf[0])
            return CT_OK;
        st = store_grad(n->leaf, e->buf[0], t->create_graph, true);
        if (st == CT_OK && hooks)
            ct_hooks_run_post(hooks, n->leaf);
        return st;
    }

    bool any = false;
    for (int i = 0; i < n->nout; i++)
        any = any || e->buf[i];
    if (any && slice_grad_in_place(t, e, &st)) {
        if (st != CT_OK)
            return st;
        if (!t->keep_graph)
            ct_node_free_saved(n);
    } else if (any) {
        ct_tensor **gin = ct_xcalloc("backward", (size_t)(n->nin > 0 ? n->nin : 1), sizeof *gin);
        if (!gin)
            return ct_last_status();
        ct_node_ctx ctx = {.node = n, .create_graph = t->create_graph, .keep_graph = t->keep_graph};
        st = n->backward(&ctx, e->buf, gin);
        if (st == CT_OK && !t->keep_graph)
            ct_node_free_saved(n);
        for (int i = 0; i < n->nin && st == CT_OK; i++)
            st = deliver(t, n, i, gin[i]);
        free(gin);
        if (st != CT_OK)
            return st;
    }
    /* Dependencies drop for every edge of a node that ran, gradient or not. */
    for (int i = 0; i < n->nin; i++) {
        ct_node *next = n->edges[i].fn;
        if (!next)
            continue;
        entry *ne = lookup(t, next);
        if (--ne->deps == 0 && !ne->ready) {
            ne->ready = true;
            if (!push(ready, next, 0))
                return ct_last_status();
        }
    }
    return CT_OK;
}

static ct_status execute(task *t, const ct_edge *roots, ct_tensor *const *root_grads, int nroots) {
    ct_status st = discover(t, roots, nroots);
    if (st != CT_OK)
        return st;
    for (int r = 0; r < nroots; r++) {
        if (!roots[r].fn)
            continue;
        entry *e = lookup(t, roots[r].fn);
        if ((st = add_to_buffer(e, roots[r].input_nr, root_grads[r], t->create_graph)) != CT_OK)
            return st;
    }
    nstack ready = {0};
    for (int r = 0; r < nroots; r++) {
        if (!roots[r].fn)
            continue;
        entry *e = lookup(t, roots[r].fn);
        if (e->deps == 0 && !e->ready) {
            e->ready = true;
            if (!push(&ready, roots[r].fn, 0)) {
                free(ready.v);
                free(ready.k);
                return ct_last_status();
            }
        }
    }
    while (st == CT_OK && ready.n > 0) {
        ct_node *n = ready.v[--ready.n];
        entry *e = lookup(t, n);
        ct_scope_begin();
        st = run_node(t, e, &ready);
        ct_scope_end();
        for (int j = 0; j < CT_NODE_MAX_OUT; j++) {
            ct_release(e->buf[j]);
            e->buf[j] = NULL;
        }
    }
    free(ready.v);
    free(ready.k);
    return st;
}

/* Validates outputs and their gradients; fills root edges and root gradients
 * (scope-owned). */
static ct_status prepare_roots(const char *op, const ct_tensor *const *outputs, int n,
                               const ct_tensor *const *grad_outputs, ct_edge *roots, ct_tensor **root_grads) {
    for (int i = 0; i < n; i++) {
        const ct_tensor *o = outputs[i];
        if (!o)
            return ct_error_null(op);
        if (!o->requires_grad)
            return ct_error(CT_ERROR_RUNTIME, op,
                            "element %d of tensors does not require grad and does not have a grad_fn", i);
        const ct_tensor *g = grad_outputs ? grad_outputs[i] : NULL;
        if (!g) {
            if (o->numel != 1)
                return ct_error(CT_ERROR_RUNTIME, op, "grad can be implicitly created only for scalar outputs");
            root_grads[i] = ct_ones_like(o, CT_DTYPE_UNDEFINED);
        } else {
            bool same = g->ndim == o->ndim;
            for (int d = 0; same && d < o->ndim; d++)
                same = g->shape[d] == o->shape[d];
            if (!same) {
                char a[128], b[128];
                return ct_error(CT_ERROR_RUNTIME, op,
                                "Mismatch in shape: grad_output[%d] has a shape of %s and output[%d] has a shape of "
                                "%s.",
                                i, ct_shape_str(g->shape, g->ndim, a, sizeof a), i,
                                ct_shape_str(o->shape, o->ndim, b, sizeof b));
            }
            if (ct_dtype_is_floating(g->dtype) != ct_dtype_is_floating(o->dtype))
                return ct_error(CT_ERROR_TYPE, op,
                                "Mismatch in dtype: grad_output[%d] has a dtype of %s and output[%d] has a dtype "
                                "of %s; a gradient must be floating point like its output.",
                                i, ct_dtype_name(g->dtype), i, ct_dtype_name(o->dtype));
            root_grads[i] = ct_tensor_ref(g);
        }
        if (!root_grads[i])
            return ct_last_status();
        ct_status st = ct_edge_for(o, &roots[i]);
        if (st != CT_OK)
            return st;
    }
    return CT_OK;
}

/* inputs == NULL and cap_edges == NULL: ct_backward. cap_edges: capture at these
 * edges (ninputs of them) and stop there. */
static ct_status run_backward(const char *op, const ct_tensor *const *outputs, int noutputs,
                              const ct_tensor *const *grad_outputs, const ct_tensor *const *inputs, int ninputs,
                              const ct_edge *cap_edges, bool keep_graph, bool create_graph, bool allow_unused,
                              ct_tensor **grads) {
    if (noutputs <= 0)
        return ct_error(CT_ERROR_VALUE, op, "no outputs to differentiate");
    if (noutputs > 1024 || (!cap_edges && ninputs > 1024)) /* a checkpoint's edges are not limited */
        return ct_error(CT_ERROR_VALUE, op, "at most 1024 outputs and inputs");
    ct_edge *roots = calloc((size_t)noutputs, sizeof *roots);
    ct_tensor **root_grads = calloc((size_t)noutputs, sizeof *root_grads);
    ct_edge *caps = calloc((size_t)(ninputs > 0 ? ninputs : 1), sizeof *caps);
    ct_tensor **captured = calloc((size_t)(ninputs > 0 ? ninputs : 1), sizeof *captured);
    bool capturing = inputs || cap_edges;
    task t = {.accumulate = !capturing, .keep_graph = keep_graph, .create_graph = create_graph,
              .stop_at_caps = cap_edges != NULL, .ncap = capturing ? ninputs : 0, .caps = caps,
              .captured = captured};
    ct_status st = CT_OK;
    if (!roots || !root_grads || !caps || !captured)
        st = ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
    bool prev = ct_set_grad_enabled(create_graph);
    ct_scope_begin();
    if (st == CT_OK)
        st = prepare_roots(op, outputs, noutputs, grad_outputs, roots, root_grads);
    for (int i = 0; st == CT_OK && inputs && i < ninputs; i++) {
        if (!inputs[i])
            st = ct_error_null(op);
        else if (!inputs[i]->requires_grad)
            st = ct_error(CT_ERROR_RUNTIME, op, "One of the differentiated Tensors does not require grad");
        else
            st = ct_edge_for(inputs[i], &caps[i]);
    }
    for (int i = 0; st == CT_OK && cap_edges && caps && i < ninputs; i++) {
        caps[i] = cap_edges[i];
        ct_node_ref(caps[i].fn);
    }
    if (st == CT_OK)
        st = execute(&t, roots, root_grads, noutputs);
    ct_scope_end();
    ct_set_grad_enabled(prev);
    task_free(&t);
    if (st == CT_OK && capturing) {
        for (int i = 0; i < ninputs && st == CT_OK; i++)
            if (!captured[i] && !allow_unused)
                st = ct_error(CT_ERROR_RUNTIME, op,
                              "One of the differentiated Tensors appears to not have been used in the graph. Set "
                              "allow_unused=True if this is the desired behavior.");
        for (int i = 0; i < ninputs; i++) {
            grads[i] = st == CT_OK ? ct_scope_adopt(captured[i]) : NULL;
            if (st != CT_OK)
                ct_release(captured[i]);
        }
    } else if (capturing) {
        for (int i = 0; i < ninputs; i++) {
            ct_release(captured[i]);
            grads[i] = NULL;
        }
    }
    for (int i = 0; i < noutputs && roots; i++)
        ct_node_unref(roots[i].fn);
    for (int i = 0; i < ninputs && caps; i++)
        ct_node_unref(caps[i].fn);
    free(roots);
    free(root_grads);
    free(caps);
    free(captured);
    return st;
}

ct_status ct_backward(const ct_tensor *output, const ct_tensor *grad_output, bool retain_graph, bool create_graph) {
    CT_CHECK_ARG_STATUS("backward", output);
    const ct_tensor *gos[1] = {grad_output};
    return run_backward("backward", &output, 1, gos, NULL, 0, NULL, retain_graph || create_graph, create_graph,
                        false, NULL);
}

ct_status ct_autograd_grad(const ct_tensor *const *outputs, int noutputs, const ct_tensor *const *inputs,
                           int ninputs, const ct_tensor *const *grad_outputs, bool retain_graph, bool create_graph,
                           bool allow_unused, ct_tensor **grads) {
    if (!outputs || !inputs || !grads)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "autograd_grad", "outputs, inputs and grads must not be NULL");
    if (ninputs <= 0)
        return ct_error(CT_ERROR_VALUE, "autograd_grad", "grad requires at least one input, got %d", ninputs);
    for (int i = 0; i < ninputs; i++)
        grads[i] = NULL;
    return run_backward("autograd_grad", outputs, noutputs, grad_outputs, inputs, ninputs, NULL,
                        retain_graph || create_graph, create_graph, allow_unused, grads);
}

ct_status ct_engine_grad_at_edges(const ct_tensor *const *outputs, int noutputs, const ct_tensor *const *grad_outputs,
                                  const ct_edge *caps, int ncaps, bool create_graph, ct_tensor **grads) {
    for (int i = 0; i < ncaps; i++)
        grads[i] = NULL;
    return run_backward("backward", outputs, noutputs, grad_outputs, NULL, ncaps, caps, create_graph, create_graph,
                        true, grads);
}
