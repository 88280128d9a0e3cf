/* Graph nodes, per-tensor autograd data, saved tensors, and the public accessors of a
 * tensor's autograd state (grad, grad_fn, detach, retain_grad). */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "autograd/node.h"

pthread_mutex_t ct_autograd_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------ nodes */

ct_node *ct_node_new(ct_node_kind kind, const char *name, int nin) {
    size_t extra = (size_t)nin * (sizeof(ct_edge) + sizeof(ct_input_meta));
    ct_node *n = ct_xcalloc("autograd", 1, sizeof *n + extra);
    if (!n)
        return NULL;
    n->nin = nin;
    n->in_meta = (ct_input_meta *)(n + 1);
    n->edges = (ct_edge *)(n->in_meta + nin);
    atomic_init(&n->refcount, 1);
    n->kind = kind;
    n->op = -1;
    n->dtype = CT_DTYPE_UNDEFINED;
    n->tag = ct_checkpoint_tag();
    snprintf(n->name, sizeof n->name, "%s", name);
    return n;
}

void ct_node_ref(ct_node *n) {
    if (n)
        atomic_fetch_add_explicit(&n->refcount, 1, memory_order_relaxed);
}

/* Takes a reference unless the count already reached zero (a dying accumulator). */
static bool node_ref_if_alive(ct_node *n) {
    int c = atomic_load(&n->refcount);
    while (c > 0)
        if (atomic_compare_exchange_weak(&n->refcount, &c, c + 1))
            return true;
    return false;
}

static void hooks_free(ct_hook *h);

/* Note [Freeing graphs]
 * Dropping the last reference to a long chain of nodes would recurse once per node
 * (node -> edge -> node ...). Dying nodes go on a per-thread list instead, and the
 * outermost unref drains it in a loop. */
static CT_THREAD_LOCAL ct_node *free_list;
static CT_THREAD_LOCAL bool freeing;

static void node_destroy(ct_node *n) {
    if (n->kind == CT_NODE_ACCUMULATE && n->leaf) {
        pthread_mutex_lock(&ct_autograd_lock);
        ct_ag_meta *m = ct_ag_meta_peek(n->leaf);
        if (m && m->accumulator == n)
            m->accumulator = NULL;
        pthread_mutex_unlock(&ct_autograd_lock);
        ct_release(n->leaf);
    }
    pthread_mutex_lock(&ct_autograd_lock);
    for (int i = 0; i < CT_NODE_MAX_OUT; i++)
        n->retain[i] = NULL;
    ct_hook *hooks = n->hooks;
    n->hooks = NULL;
    pthread_mutex_unlock(&ct_autograd_lock);
    hooks_free(hooks);
    for (int i = 0; i < CT_NODE_MAX_SAVED; i++)
        ct_release(n->saved[i].t);
    for (int i = 0; i < n->nsaved_list; i++)
        ct_release(n->saved_list[i]);
    free(n->saved_list);
    ct_custom_free(n->custom);
    for (int i = 0; i < n->nin; i++)
        ct_node_unref(n->edges[i].fn);
    ct_node_unref(n->wrapped);
    free(n);
}

void ct_node_unref(ct_node *n) {
    if (!n || atomic_fetch_sub_explicit(&n->refcount, 1, memory_order_acq_rel) != 1)
        return;
    n->next_free = free_list;
    free_list = n;
    if (freeing)
        return;
    freeing = true;
    while (free_list) {
        ct_node *x = free_list;
        free_list = x->next_free;
        node_destroy(x);
    }
    freeing = false;
}

/* ------------------------------------------------------------------ hooks lists */

/* Hooks are owned by the node or tensor they hang on; the handle registry (hooks.c)
 * only finds them. */
static void hooks_free(ct_hook *h) {
    while (h) {
        ct_hook *next = h->next;
        ct_hook_unregister(h);
        free(h);
        h = next;
    }
}

/* ------------------------------------------------------------------ tensor data */

static void meta_release(void *p) {
    ct_ag_meta *m = p;
    pthread_mutex_lock(&ct_autograd_lock);
    if (m->grad_fn && m->retains_grad && m->owner)
        for (int i = 0; i < CT_NODE_MAX_OUT; i++)
            if (m->grad_fn->retain[i] == m->owner)
                m->grad_fn->retain[i] = NULL;
    ct_hook *hooks = m->hooks;
    m->hooks = NULL;
    pthread_mutex_unlock(&ct_autograd_lock);
    hooks_free(hooks);
    ct_node_unref(m->grad_fn);
    free(m);
}

ct_ag_meta *ct_ag_meta_peek(const ct_tensor *t) {
    return t && t->grad_fn_release == meta_release ? (ct_ag_meta *)t->grad_fn : NULL;
}

ct_ag_meta *ct_ag_meta_get(ct_tensor *t) {
    ct_ag_meta *m = ct_ag_meta_peek(t);
    if (m)
        return m;
    CT_ASSERT(t->grad_fn == NULL); /* nothing else may use the slot */
    m = ct_xcalloc("autograd", 1, sizeof *m);
    if (!m)
        return NULL;
    m->owner = t;
    pthread_mutex_lock(&ct_autograd_lock);
    if (t->grad_fn_release == meta_release) { /* another thread was first */
        free(m);
        m = t->grad_fn;
    } else {
        t->grad_fn = m;
        t->grad_fn_release = meta_release;
    }
    pthread_mutex_unlock(&ct_autograd_lock);
    return m;
}

ct_node *ct_tensor_node(const ct_tensor *t) {
    ct_ag_meta *m = ct_ag_meta_peek(t);
    return m ? m->grad_fn : NULL;
}

ct_status ct_edge_for(const ct_tensor *t, ct_edge *e) {
    e->fn = NULL;
    e->input_nr = 0;
    if (!t || !t->requires_grad)
        return CT_OK;
    ct_node *fn = ct_tensor_node(t);
    if (fn) {
        ct_node_ref(fn);
        e->fn = fn;
        e->input_nr = t->output_nr;
        return CT_OK;
    }
    ct_ag_meta *m = ct_ag_meta_get((ct_tensor *)t);
    if (!m)
        return ct_last_status();
    pthread_mutex_lock(&ct_autograd_lock);
    ct_node *acc = m->accumulator;
    if (!acc || !node_ref_if_alive(acc)) {
        acc = ct_node_new(CT_NODE_ACCUMULATE, "AccumulateGrad", 0);
        if (!acc) {
            pthread_mutex_unlock(&ct_autograd_lock);
            return ct_last_status();
        }
        acc->nout = 1;
        acc->leaf = ct_retain((ct_tensor *)t);
        m->accumulator = acc;
    }
    pthread_mutex_unlock(&ct_autograd_lock);
    e->fn = acc;
    return CT_OK;
}

ct_status ct_set_history(ct_tensor *t, ct_node *n, int output_nr) {
    ct_ag_meta *m = ct_ag_meta_get(t);
    if (!m)
        return ct_last_status();
    ct_node_ref(n);
    pthread_mutex_lock(&ct_autograd_lock);
    ct_node *old = m->grad_fn;
    if (m->retains_grad) { /* the retained gradient follows the tensor to its new node */
        if (old && t->output_nr >= 0 && t->output_nr < CT_NODE_MAX_OUT && old->retain[t->output_nr] == t)
            old->retain[t->output_nr] = NULL;
        if (output_nr < CT_NODE_MAX_OUT)
            n->retain[output_nr] = t;
    }
    m->grad_fn = n;
    pthread_mutex_unlock(&ct_autograd_lock);
    ct_node_unref(old);
    t->output_nr = output_nr;
    t->requires_grad = true;
    return CT_OK;
}

void ct_input_meta_set(ct_input_meta *m, const ct_tensor *t) {
    m->ndim = t->ndim;
    m->dtype = t->dtype;
    m->device = t->device;
    memcpy(m->shape, t->shape, sizeof m->shape);
    memcpy(m->strides, t->strides, sizeof m->strides);
    m->offset = t->offset;
}

/* ------------------------------------------------------------------ saved tensors */

/* A tensor over t's storage and layout with no autograd history, as an owned
 * reference (not registered with any scope). */
static ct_tensor *bare_alias(const ct_tensor *t) {
    ct_tensor *a = ct_tensor_make(t->storage, t->offset, t->shape, t->strides, t->ndim, t->dtype, t->device);
    if (a && ct_scope_depth() > 0)
        ct_retain(a); /* the scope keeps one reference, the caller gets another */
    if (a)
        a->inference = t->inference;
    return a;
}

ct_status ct_saved_set(ct_node *n, ct_saved *s, const ct_tensor *t, int output_nr, int64_t version) {
    if (!t)
        return CT_OK;
    if (t->inference)
        return ct_error(CT_ERROR_RUNTIME, n->name,
                        "Inference tensors cannot be saved for backward. To work around you can make a clone to "
                        "get a normal tensor and use it in autograd.");
    bool is_output = output_nr >= 0;
    s->version = version;
    s->is_output = is_output;
    s->output_nr = is_output ? output_nr : 0;
    s->requires_grad = t->requires_grad || is_output;
    if (is_output) {
        s->t = bare_alias(t);
        if (!s->t)
            return ct_last_status();
        s->producer = n->name;
        s->producer_nr = output_nr;
    } else {
        s->t = ct_retain((ct_tensor *)t);
        ct_node *p = ct_tensor_node(t);
        s->producer = p ? p->name : NULL;
        s->producer_nr = t->output_nr;
    }
    return CT_OK;
}

ct_status ct_node_save(ct_node *n, int i, const ct_tensor *t, bool is_output, int64_t version) {
    if (t && ct_checkpoint_discards_saves()) { /* Note [Checkpoint] */
        n->saved_freed = true;
        return CT_OK;
    }
    /* a saved output unpacked under create_graph leads back to its own output of n */
    int nr = i == CT_SAVED_OUT1 ? 1 : i == CT_SAVED_OUT2 ? 2 : 0;
    return ct_saved_set(n, &n->saved[i], t, is_output ? nr : -1, version);
}

ct_tensor *ct_saved_unpack(ct_node *n, ct_saved *s, bool create_graph) {
    if (n->saved_freed) {
        ct_error(CT_ERROR_RUNTIME, n->name,
                 "Trying to backward through the graph a second time (or directly access saved tensors after they "
                 "have already been freed). Saved intermediate values of the graph are freed when you call "
                 ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
                 "graph a second time or if you need to access saved tensors after calling backward.");
        return NULL;
    }
    if (!s->t)
        return NULL;
    int64_t v = ct_tensor_version(s->t);
    if (v != s->version) {
        char shape[128], which[96] = "";
        ct_shape_str(s->t->shape, s->t->ndim, shape, sizeof shape);
        if (s->producer)
            snprintf(which, sizeof which, ", which is output %d of %s,", s->producer_nr, s->producer);
        ct_error(CT_ERROR_RUNTIME, n->name,
                 "one of the variables needed for gradient computation has been modified by an inplace operation: "
                 "[%s %s]%s is at version %lld; expected version %lld instead. Hint: enable anomaly detection "
                 "(ct_set_anomaly_enabled) to find the operation that failed to compute its gradient.",
                 ct_dtype_name(s->t->dtype), shape, which, (long long)v, (long long)s->version);
        return NULL;
    }
    if (!s->is_output)
        return ct_tensor_ref(s->t);
    ct_tensor *a = bare_alias(s->t);
    if (!a)
        return NULL;
    a = ct_scope_adopt(a);
    /* With create_graph the formula's result must lead back through this node. */
    if (a && create_graph && s->requires_grad && ct_set_history(a, n, s->output_nr) != CT_OK)
        return NULL;
    return a;
}

ct_tensor *ct_node_saved(ct_node_ctx *ctx, int i) { return ct_saved_unpack(ctx->node, &ctx->node->saved[i], ctx->create_graph); }

/* Note [Reusing a saved input's memory]
 * A language model's logits are the largest tensor of its step ((B*T, 50304) in bf16 is
 * 3.1 GiB for GPT-2 at B32 T1024), and cross_entropy's gradient has their size. Once
 * the loss is computed nothing else reads the logits, so the caller has usually
 * dropped them; the saved slot of cross_entropy's node is their last holder, and the
 * graph frees it right after the node's formula. Writing the gradient into the logits'
 * memory then saves a second tensor of that size at the step's peak. That is allowed
 * only when nothing can tell: the graph is freed after this node (no retain_graph, no
 * create_graph), the saved tensor is held by the slot and the formula alone, each
 * tensor it views (its base, the base's base) is held by its view alone, and the
 * storage by those tensors alone (a caller who kept the logits, a view of them or their
 * storage, makes the formula allocate as before). PyTorch has no such path; its
 * compiled graphs reuse the buffer through their memory planning. */
bool ct_node_saved_reusable(const ct_node_ctx *ctx, int i, int held) {
    if (ctx->keep_graph || i < 0 || i >= CT_NODE_MAX_SAVED) /* keep_graph: create_graph too */
        return false;
    const ct_saved *s = &ctx->node->saved[i];
    const ct_tensor *t = s->t;
    if (!t || s->is_output || !t->storage || t->storage->external || t->storage->data == NULL)
        return false;
    int tensors = 0;
    for (const ct_tensor *v = t; v; v = v->base) {
        int want = v == t ? 1 + held : 1;
        if (atomic_load(&v->refcount) != want || v->storage != t->storage)
            return false;
        tensors++;
    }
    return atomic_load(&t->storage->refcount) == tensors;
}

void ct_node_free_saved(ct_node *n) {
    for (int i = 0; i < CT_NODE_MAX_SAVED; i++) {
        ct_release(n->saved[i].t);
        n->saved[i].t = NULL;
    }
    for (int i = 0; i < n->nsaved_list; i++) {
        ct_release(n->saved_list[i]);
        n->saved_list[i] = NULL;
    }
    n->saved_freed = true;
    ct_custom_free_saved(n->custom);
    if (n->wrapped)
        ct_node_free_saved(n->wrapped);
}

/* Note [Gradients that hold their tensor]
 * A tensor owns its .grad. A gradient that leads back to its tensor through strong
 * references (its graph saves the tensor or ends in the tensor's accumulator, its base
 * is the tensor, or its own .grad does, ...) would make the tensor own itself: with
 * reference counting and no collector, neither would ever be freed. That happens with
 * ct_tensor_set_grad(t, f(t)) and with ct_backward(..., create_graph=true), whose
 * gradients record the backward pass, which saves the leaves and ends in their
 * accumulators. PyTorch keeps the cycle and leaves it to its garbage collector (and
 * warns about backward with create_graph); a C library has none. The choices were to
 * hold one link of the cycle weakly or to store such a gradient without its history.
 * A weak link is not enough: the cycle runs through saved tensors, accumulators, view
 * bases and other tensors' .grad alike, and a gradient outliving its tensor would
 * still need the saved values. So a gradient that would hold its tensor is stored
 * detached (ct_detach: the same values and storage, no history); every other gradient
 * is stored as given, history included. Higher-order gradients go through
 * ct_autograd_grad with create_graph, which stores nothing (PyTorch recommends it over
 * backward with create_graph for this reason). The test below walks what the gradient
 * holds (tensors: base, .grad, grad_fn; nodes: edges, saved tensors, the accumulator's
 * leaf, CopySlices' wrapped node); a gradient without history, base or .grad costs one
 * look.
 *
 * The other way to close such a cycle is an in-place op: it gives an existing tensor x
 * a new node, and that node may hold x through another tensor's .grad (y.grad = f(x)
 * saves x, then x.mul_(y) saves y). Every other link of that cycle is structure the
 * graph needs (edges, saved inputs, accumulators); the .grad link is the one that may
 * go, so ct_ag_break_grad_cycles stores such a .grad detached, by the same rule. Until
 * a .grad with history (or a base, or a .grad) has been stored in the process, no graph
 * can hold one and the walk is skipped; after that, each in-place op recorded for
 * autograd walks its node's graph. */

typedef struct {
    uintptr_t *set; /* open addressing; 0 = empty */
    size_t cap, n;
    uintptr_t *stack;
    size_t top, stack_cap;
} holds_walk;

static int walk_push(holds_walk *w, uintptr_t x) {
    if (!(x & ~(uintptr_t)1))
        return 0;
    if (2 * (w->n + 1) > w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        uintptr_t *set = ct_xcalloc("autograd", cap, sizeof *set);
        if (!set)
            return -1;
        for (size_t i = 0; i < w->cap; i++)
            if (w->set[i]) {
                size_t h = (size_t)((w->set[i] >> 3) * 0x9E3779B97F4A7C15ull) & (cap - 1);
                while (set[h])
                    h = (h + 1) & (cap - 1);
                set[h] = w->set[i];
            }
        free(w->set);
        w->set = set;
        w->cap = cap;
    }
    size_t h = (size_t)((x >> 3) * 0x9E3779B97F4A7C15ull) & (w->cap - 1);
    while (w->set[h]) {
        if (w->set[h] == x)
            return 0; /* seen */
        h = (h + 1) & (w->cap - 1);
    }
    w->set[h] = x;
    w->n++;
    if (w->top == w->stack_cap) {
        size_t cap = w->stack_cap ? 2 * w->stack_cap : 64;
        uintptr_t *st = ct_xrealloc("autograd", w->stack, cap * sizeof *st);
        if (!st)
            return -1;
        w->stack = st;
        w->stack_cap = cap;
    }
    w->stack[w->top++] = x;
    return 0;
}

#define WALK_TENSOR(t) ((uintptr_t)(t))
#define WALK_NODE(n) ((uintptr_t)(n) | 1u)

/* A .grad that can hold something: with history, a base or a .grad of its own. */
static bool grad_can_hold(const ct_tensor *g) { return g && (g->base || g->grad || ct_tensor_node(g)); }

/* Walks what start holds: 1 when it reaches target (NULL: never), 0 when not, -1 when
 * out of memory (error set). With grads, collects the tensors met whose .grad can hold
 * something. */
static int walk(uintptr_t start, const ct_tensor *target, ct_tensor ***grads, size_t *ngrads) {
    holds_walk w = {0};
    size_t cap = 0;
    int found = walk_push(&w, start) < 0 ? -1 : 0;
    while (found == 0 && w.top > 0) {
        uintptr_t x = w.stack[--w.top];
        int rc = 0;
        if (x & 1u) {
            const ct_node *n = (const ct_node *)(x & ~(uintptr_t)1);
            for (int i = 0; rc == 0 && i < n->nin; i++)
                rc = walk_push(&w, WALK_NODE(n->edges[i].fn));
            for (int i = 0; rc == 0 && i < CT_NODE_MAX_SAVED; i++)
                rc = walk_push(&w, WALK_TENSOR(n->saved[i].t));
            for (int i = 0; rc == 0 && i < n->nsaved_list; i++)
                rc = walk_push(&w, WALK_TENSOR(n->saved_list[i]));
            if (rc == 0)
                rc = walk_push(&w, WALK_TENSOR(n->leaf));
            if (rc == 0)
                rc = walk_push(&w, WALK_NODE(n->wrapped));
        } else {
            ct_tensor *t = (ct_tensor *)x;
            if (t == target) {
                found = 1;
                break;
            }
            if (grads && grad_can_hold(t->grad)) {
                if (*ngrads == cap) {
                    size_t c = cap ? 2 * cap : 8;
                    ct_tensor **g = ct_xrealloc("autograd", *grads, c * sizeof *g);
                    if (!g) {
                        found = -1;
                        break;
                    }
                    *grads = g;
                    cap = c;
                }
                (*grads)[(*ngrads)++] = t;
            }
            rc = walk_push(&w, WALK_TENSOR(t->base));
            if (rc == 0)
                rc = walk_push(&w, WALK_TENSOR(t->grad));
            if (rc == 0)
                rc = walk_push(&w, WALK_NODE(ct_tensor_node(t)));
        }
        if (rc < 0)
            found = -1;
    }
    free(w.set);
    free(w.stack);
    return found;
}

/* Set once a .grad that can hold something was stored: until then no graph has a
 * .grad in it, and an in-place op has no cycle to look for. */
static atomic_bool g_grads_can_hold;

void ct_ag_note_grad(const ct_tensor *g) {
    if (grad_can_hold(g) && !atomic_load_explicit(&g_grads_can_hold, memory_order_relaxed))
        atomic_store(&g_grads_can_hold, true);
}

int ct_ag_holds(const ct_tensor *from, const ct_tensor *target) {
    if (!from || !target)
        return 0;
    if (from == target)
        return 1;
    if (!from->base && !from->grad && !ct_tensor_node(from))
        return 0;
    return walk(WALK_TENSOR(from), target, NULL, NULL);
}

/* Replaces t's .grad by a detached alias. */
static ct_status detach_grad(ct_tensor *t) {
    ct_scope_begin();
    ct_tensor *d = ct_detach(t->grad);
    if (d) {
        ct_tensor *old = t->grad;
        t->grad = ct_retain(d);
        ct_release(old);
    }
    ct_scope_end();
    return d ? CT_OK : ct_last_status();
}

ct_status ct_ag_break_grad_cycles(ct_node *n, const ct_tensor *x) {
    if (!n || !x || !atomic_load_explicit(&g_grads_can_hold, memory_order_relaxed))
        return CT_OK;
    ct_tensor **grads = NULL;
    size_t ngrads = 0;
    int rc = walk(WALK_NODE(n), NULL, &grads, &ngrads);
    ct_status st = rc < 0 ? ct_last_status() : CT_OK;
    for (size_t i = 0; st == CT_OK && i < ngrads; i++) {
        int h = ct_ag_holds(grads[i]->grad, x);
        st = h < 0 ? ct_last_status() : h ? detach_grad(grads[i]) : CT_OK;
    }
    free(grads);
    return st;
}

/* ------------------------------------------------------------------ public accessors */

ct_tensor *ct_tensor_grad(const ct_tensor *t) {
    if (!t) {
        ct_error_null("grad");
        return NULL;
    }
    return t->grad ? ct_tensor_ref(t->grad) : NULL;
}

ct_status ct_tensor_set_grad(ct_tensor *t, const ct_tensor *grad) {
    CT_CHECK_ARG_STATUS("set_grad", t);
    /* t would own itself (a view owns its base) and never be freed. PyTorch refuses
     * the first; ctorch also refuses a view of t. */
    if (grad == t)
        return ct_error(CT_ERROR_RUNTIME, "set_grad", "can't assign Variable as its own grad");
    if (grad && grad->base == t)
        return ct_error(CT_ERROR_RUNTIME, "set_grad",
                        "can't assign a view of a tensor as its own grad (the tensor would keep itself alive); "
                        "assign a clone of it");
    if (grad) {
        if (grad->dtype != t->dtype)
            return ct_error(CT_ERROR_TYPE, "set_grad", "assigned grad has data of a different type (%s vs %s)",
                            ct_dtype_name(grad->dtype), ct_dtype_name(t->dtype));
        if (!ct_device_equal(grad->device, t->device))
            return ct_error(CT_ERROR_DEVICE, "set_grad", "assigned grad has data located on a different device");
        bool same = grad->ndim == t->ndim;
        for (int i = 0; same && i < t->ndim; i++)
            same = grad->shape[i] == t->shape[i];
        if (!same) {
            char a[128], b[128];
            return ct_error(CT_ERROR_VALUE, "set_grad", "assigned grad has data of a different size (%s vs %s)",
                            ct_shape_str(grad->shape, grad->ndim, a, sizeof a),
                            ct_shape_str(t->shape, t->ndim, b, sizeof b));
        }
    }
    /* Note [Gradients that hold their tensor] */
    int holds = ct_ag_holds(grad, t);
    if (holds < 0)
        return ct_last_status();
    ct_scope_begin(); /* the detached alias's reference (merged when out of memory) */
    ct_tensor *keep = holds ? ct_detach(grad) : (ct_tensor *)grad;
    if (holds && !keep) {
        ct_scope_end();
        return ct_last_status();
    }
    ct_ag_note_grad(keep);
    ct_tensor *old = t->grad;
    t->grad = ct_retain(keep);
    ct_release(old);
    ct_scope_end();
    return CT_OK;
}

bool ct_tensor_is_leaf(const ct_tensor *t) { return t && ct_tensor_node(t) == NULL; }

const char *ct_tensor_grad_fn_name(const ct_tensor *t) {
    ct_node *n = ct_tensor_node(t);
    return n ? n->name : NULL;
}

ct_status ct_tensor_retain_grad(ct_tensor *t) {
    CT_CHECK_ARG_STATUS("retain_grad", t);
    if (!t->requires_grad)
        return ct_error(CT_ERROR_RUNTIME, "retain_grad", "can't retain_grad on Tensor that has requires_grad=False");
    ct_node *n = ct_tensor_node(t);
    if (!n)
        return CT_OK; /* leaves keep their .grad anyway */
    ct_ag_meta *m = ct_ag_meta_get(t);
    pthread_mutex_lock(&ct_autograd_lock);
    m->retains_grad = true;
    if (t->output_nr >= 0 && t->output_nr < CT_NODE_MAX_OUT)
        n->retain[t->output_nr] = t;
    pthread_mutex_unlock(&ct_autograd_lock);
    return CT_OK;
}

ct_tensor *ct_detach(const ct_tensor *t) {
    CT_CHECK_ARG("detach", t);
    ct_tensor *a = ct_tensor_make(t->storage, t->offset, t->shape, t->strides, t->ndim, t->dtype, t->device);
    if (a)
        a->inference = t->inference;
    return a;
}

ct_tensor *ct_detach_(ct_tensor *t) {
    CT_CHECK_ARG("detach_", t);
    ct_ag_meta *m = ct_ag_meta_peek(t);
    if (t->is_view && m && m->grad_fn) {
        ct_error(CT_ERROR_RUNTIME, "detach_", "Can't detach views in-place. Use detach() instead.");
        return NULL;
    }
    if (m && m->grad_fn) {
        pthread_mutex_lock(&ct_autograd_lock);
        ct_node *old = m->grad_fn;
        if (m->retains_grad && t->output_nr >= 0 && t->output_nr < CT_NODE_MAX_OUT && old->retain[t->output_nr] == t)
            old->retain[t->output_nr] = NULL;
        m->grad_fn = NULL;
        m->retains_grad = false;
        pthread_mutex_unlock(&ct_autograd_lock);
        ct_node_unref(old);
    }
    t->requires_grad = false;
    t->output_nr = 0;
    return ct_tensor_ref(t);
}
