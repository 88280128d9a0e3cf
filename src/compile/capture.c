/* ct_compile: guards, capture at the TRACE key, and the compiled function's entries. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "amp/amp_internal.h"
#include "compile/compile_internal.h"
#include "compile/graph.h"
#include "ctorch/amp.h"
#include "ctorch/autograd.h"
#include "ctorch/profiler.h"
#include "dispatch/dispatch_internal.h"
#include "observe/trace_log.h"
#include "util/json.h"
#include "random.h"
#include "tensor_impl.h"

/* Note [Capture protocol]
 * TinyJit's: the first call of a compiled function runs it eagerly (lazy state, such
 * as an optimizer's moments or a module's buffers, is made then), the next call with a
 * guard key not seen before captures, and a call whose key matches a captured entry
 * replays its graph. The capture puts TRACE into the thread's included keys; the one
 * TRACE kernel (a fallback for every op) records the call, takes TRACE out for what
 * runs below it (so only the outermost calls are recorded: the autograd kernel, a
 * kernel's own calls and the backend are inside), and runs the call for real, so the
 * capturing call returns real results. TRACE sits above AUTOGRAD, and the autograd
 * engine calls the derivative formulas as ops from the top, so a function that calls
 * ct_backward is recorded with its backward: one graph of forward and backward, and
 * the gradients the engine stores become epilogue writes (Note [Training steps]). */

#define MAX_ENTRIES 8

static CT_THREAD_LOCAL struct capture *tls_capture;

/* ------------------------------------------------------------ tensor -> value map */

typedef struct capture {
    ct_graph *g;
    ct_tensor **seen; /* per value: the tensor at capture (a reference) */
    /* open addressing, keys tensor pointers; a tensor maps to its latest value */
    const ct_tensor **keys;
    int *vals;
    size_t cap, used;
    /* leaves that require grad: their .grad and its version when first seen */
    int nleaf, capleaf;
    struct leaf {
        int value;
        const ct_tensor *grad;
        int64_t grad_version;
        bool reset; /* its .grad was set to None by a host call before it was seen */
    } *leaves;
    /* tensors whose .grad a host call set to None (ct_compile_note_grads_reset) */
    int nreset, capreset;
    const ct_tensor **reset;
    bool fallback;   /* CT_COMPILE_EAGER_FALLBACK */
    bool refused;    /* something could not be captured */
    bool failed_oom; /* the recording itself ran out of memory */
    char op[64], why[192];
} capture;

static size_t hash_ptr(const void *p) {
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

static bool map_grow(capture *c) {
    size_t ncap = c->cap ? c->cap * 2 : 1024;
    const ct_tensor **keys = calloc(ncap, sizeof *keys);
    int *vals = calloc(ncap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return false;
    }
    for (size_t i = 0; i < c->cap; i++) {
        if (!c->keys[i])
            continue;
        size_t h = hash_ptr(c->keys[i]) & (ncap - 1);
        while (keys[h])
            h = (h + 1) & (ncap - 1);
        keys[h] = c->keys[i];
        vals[h] = c->vals[i];
    }
    free(c->keys);
    free(c->vals);
    c->keys = keys;
    c->vals = vals;
    c->cap = ncap;
    return true;
}

static int map_get(const capture *c, const ct_tensor *t) {
    if (!c->cap)
        return -1;
    size_t h = hash_ptr(t) & (c->cap - 1);
    while (c->keys[h]) {
        if (c->keys[h] == t)
            return c->vals[h];
        h = (h + 1) & (c->cap - 1);
    }
    return -1;
}

static bool map_put(capture *c, const ct_tensor *t, int v) {
    if ((c->used + 1) * 2 > c->cap && !map_grow(c))
        return false;
    size_t h = hash_ptr(t) & (c->cap - 1);
    while (c->keys[h]) {
        if (c->keys[h] == t) {
            c->vals[h] = v;
            return true;
        }
        h = (h + 1) & (c->cap - 1);
    }
    c->keys[h] = t;
    c->vals[h] = v;
    c->used++;
    return true;
}

/* ------------------------------------------------------------ recording */

static ct_status capture_oom(capture *c) {
    c->failed_oom = true;
    return ct_error(CT_ERROR_OUT_OF_MEMORY, "compile", "out of memory while recording the graph");
}

/* A new value describing t (the capture keeps a reference to t, so that no tensor made
 * later reuses its address while the capture runs). -1 when out of memory. */
static int new_value(capture *c, const ct_tensor *t, ct_gvalue_kind kind) {
    ct_graph *g = c->g;
    if (g->nvalues == g->cap_values) {
        int ncap = g->cap_values ? g->cap_values * 2 : 256;
        ct_gvalue *nv = realloc(g->values, (size_t)ncap * sizeof *nv);
        ct_tensor **ns = realloc(c->seen, (size_t)ncap * sizeof *ns);
        if (nv)
            g->values = nv;
        if (ns)
            c->seen = ns;
        if (!nv || !ns)
            return -1;
        g->cap_values = ncap;
    }
    int id = g->nvalues;
    ct_gvalue *v = &g->values[id];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->input = -1;
    v->node = -1;
    v->last_use = -1;
    v->storage = (uintptr_t)t->storage;
    v->dtype = t->dtype;
    v->device = t->device;
    v->ndim = t->ndim;
    v->requires_grad = t->requires_grad;
    v->offset = t->offset;
    memcpy(v->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(v->strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
    c->seen[id] = ct_retain((ct_tensor *)t);
    g->nvalues++;
    if (!map_put(c, t, id))
        return -1;
    return id;
}

static ct_gnode *new_node(capture *c) {
    ct_graph *g = c->g;
    if (g->nnodes == g->cap_nodes) {
        int ncap = g->cap_nodes ? g->cap_nodes * 2 : 256;
        ct_gnode *nn = realloc(g->nodes, (size_t)ncap * sizeof *nn);
        if (!nn)
            return NULL;
        g->nodes = nn;
        g->cap_nodes = ncap;
    }
    ct_gnode *n = &g->nodes[g->nnodes];
    memset(n, 0, sizeof *n);
    n->group = -1;
    for (int i = 0; i < CT_CALL_MAX_OUT; i++)
        n->out[i] = n->target[i] = -1;
    return n;
}

static bool note_leaf(capture *c, int v, const ct_tensor *t) {
    if (!t->requires_grad || !ct_tensor_is_leaf(t))
        return true;
    if (c->nleaf == c->capleaf) {
        int ncap = c->capleaf ? c->capleaf * 2 : 64;
        struct leaf *nl = realloc(c->leaves, (size_t)ncap * sizeof *nl);
        if (!nl)
            return false;
        c->leaves = nl;
        c->capleaf = ncap;
    }
    const ct_tensor *gr = t->grad;
    bool reset = false;
    for (int i = 0; i < c->nreset && !reset; i++)
        reset = c->reset[i] == t;
    c->leaves[c->nleaf++] = (struct leaf){v, gr, gr ? ct_tensor_version(gr) : 0, reset};
    return true;
}

/* The value of a tensor the function reaches. A tensor no recorded op made and that
 * shares no storage with a value the graph computes is a constant (Note [Graph
 * values]). One that shares the storage of an input or of a node's output was made
 * outside the dispatcher from that value (ct_detach, the autograd engine's saved
 * tensors): it becomes an as_strided node over that value, so a replay reads the
 * replayed storage. -1 when out of memory. */
static int value_of(capture *c, const ct_tensor *t) {
    int v = map_get(c, t);
    if (v >= 0)
        return v;
    ct_graph *g = c->g;
    int src = -1;
    for (int i = g->nvalues - 1; i >= 0; i--)
        if (g->values[i].storage == (uintptr_t)t->storage && g->values[i].kind != CT_GV_CONST) {
            src = i;
            break;
        }
    if (src < 0) {
        v = new_value(c, t, CT_GV_CONST);
        if (v < 0)
            return -1;
        g->values[v].constant = ct_retain((ct_tensor *)t);
        return note_leaf(c, v, t) ? v : -1;
    }
    ct_gnode *n = new_node(c);
    if (!n)
        return -1;
    n->op = CT_OP_as_strided;
    n->mode = CT_CALL_FUNCTIONAL;
    n->nin = 1;
    n->in[0] = src;
    n->nints = 2 * t->ndim + 1;
    for (int d = 0; d < t->ndim; d++) {
        n->ints[d] = t->shape[d];
        n->ints[t->ndim + d] = t->strides[d];
    }
    n->ints[2 * t->ndim] = t->offset;
    n->dtype = CT_DTYPE_UNDEFINED;
    n->included = ct_tls_included() & ~ct_keyset_of(CT_KEY_TRACE);
    /* an alias made outside autograd (detach) has no history */
    n->excluded = ct_tls_excluded() | (t->requires_grad ? 0 : ct_keyset_of(CT_KEY_AUTOGRAD));
    n->nout = 1;
    int node_id = c->g->nnodes++;
    v = new_value(c, t, CT_GV_NODE);
    if (v < 0)
        return -1;
    g->values[v].node = node_id;
    g->values[v].out = 0;
    g->nodes[node_id].out[0] = v;
    return v;
}

/* Note [What cannot be captured]
 * A graph replays op calls; C code that looks at a value (ct_item, printing), an op
 * whose result's shape depends on the data (nonzero, unique, masked_select, a boolean
 * index) and host-side results a replay would not update (clip_grad_norm_'s total as a
 * double) cannot be in one;
 * library code with host state that can be replayed whole is a host call instead
 * (Note [Host calls] in graph.h). The capture refuses them with an error naming the
 * op, or, with CT_COMPILE_EAGER_FALLBACK, lets the call finish and marks the guard
 * entry eager. */
static ct_status refusal_error(const char *op, const char *why) {
    return ct_error(CT_ERROR_NOT_IMPLEMENTED, op,
                    "cannot be captured by ct_compile: %s (pass CT_COMPILE_EAGER_FALLBACK to run the function "
                    "eagerly instead)",
                    why);
}

static ct_status refuse(capture *c, const char *op, const char *why) {
    if (!c->refused) {
        c->refused = true;
        snprintf(c->op, sizeof c->op, "%s", op);
        snprintf(c->why, sizeof c->why, "%s", why);
    }
    if (c->fallback)
        return CT_OK;
    return refusal_error(op, why);
}

static bool data_dependent(const ct_call *call) {
    switch (call->op) {
    case CT_OP_nonzero:
    case CT_OP_unique:
    case CT_OP_unique_consecutive:
    case CT_OP_masked_select:
        return true;
    case CT_OP_index:
        for (int i = 0; i < call->nlist; i++)
            if (call->list && call->list[i] && call->list[i]->dtype == CT_BOOL)
                return true;
        return false;
    default:
        return false;
    }
}

static bool capturing_here(void) {
    return tls_capture && !(ct_tls_excluded() & ct_keyset_of(CT_KEY_TRACE));
}

static ct_status trace_record(capture *c, ct_keyset below, ct_call *call);

/* Note [Autocast under capture]
 * Under autocast the AUTOCAST kernel, below TRACE, casts an op's inputs: a capture that
 * recorded the op with its float32 inputs would replay it without those casts, and one
 * that took the casts as they were would keep the weights' lower-precision copies of
 * the capturing call as constants, stale once an update changes the weights. So TRACE
 * makes the casts itself: ct_autocast_prepare runs the kernel's rules from the top,
 * where each cast (a ct_to_dtype) is an op call that TRACE records as a node of its
 * own and autograd as a cast node, exactly as the kernel's casts are for an eager call;
 * the op is then recorded on the cast inputs and runs, now and at every replay, with
 * AUTOCAST excluded, which would find nothing left to cast. The composites of the
 * policy table (linear, matmul, ...) cast on entry, from the top already. */
static ct_status trace_kernel(ct_keyset ks, ct_call *call, void *user_data) {
    (void)user_data;
    capture *c = tls_capture;
    ct_keyset below = ct_keyset_below(ks, CT_KEY_TRACE);
    if (!c || c->failed_oom || (c->refused && c->fallback))
        return ct_redispatch(below, call);
    if (data_dependent(call)) {
        ct_status st = refuse(c, ct_op_name(call->op), "the shape of its result depends on the data");
        if (st != CT_OK)
            return st;
        return ct_redispatch(below, call);
    }
    if (!ct_keyset_has(ks, CT_KEY_AUTOCAST))
        return trace_record(c, below, call);
    ct_call c2 = *call;
    const ct_tensor **list = NULL;
    int r = ct_autocast_prepare(ks, &c2, &list);
    if (r <= 0) {
        free(list);
        return r < 0 ? ct_last_status() : trace_record(c, below, call);
    }
    const ct_keyset exc = ct_tls_excluded();
    ct_tls_set_excluded(exc | ct_keyset_of(CT_KEY_AUTOCAST));
    ct_status st = trace_record(c, below & ~ct_keyset_of(CT_KEY_AUTOCAST), &c2);
    ct_tls_set_excluded(exc);
    free(list);
    ct_call_take_outputs_of(call, &c2); /* the outputs belong to the caller's call */
    return st;
}

/* Records call as a node and runs it below TRACE. */
static ct_status trace_record(capture *c, ct_keyset below, ct_call *call) {
    /* the inputs' values before the call runs (an in-place call makes a new one) */
    int in[CT_CALL_MAX_IN], tgt[CT_CALL_MAX_OUT];
    int *list = NULL;
    for (int i = 0; i < call->nin; i++)
        if ((in[i] = call->in[i] ? value_of(c, call->in[i]) : -1) < 0 && call->in[i])
            return capture_oom(c);
    if (call->nlist > 0) {
        list = malloc(sizeof(int) * (size_t)call->nlist);
        if (!list)
            return capture_oom(c);
        for (int i = 0; i < call->nlist; i++) {
            const ct_tensor *t = call->list ? call->list[i] : NULL;
            if ((list[i] = t ? value_of(c, t) : -1) < 0 && t) {
                free(list);
                return capture_oom(c);
            }
        }
    }
    const bool given = call->mode != CT_CALL_FUNCTIONAL;
    for (int i = 0; i < CT_CALL_MAX_OUT; i++)
        tgt[i] = -1;
    if (given)
        for (int i = 0; i < call->nout; i++)
            if (call->out[i] && (tgt[i] = value_of(c, call->out[i])) < 0) {
                free(list);
                return capture_oom(c);
            }
    const ct_keyset inc = ct_tls_included(), exc = ct_tls_excluded();
    ct_tls_set_excluded(exc | ct_keyset_of(CT_KEY_TRACE));
    ct_status st = ct_redispatch(below, call);
    ct_tls_set_excluded(exc);
    if (st != CT_OK) {
        free(list);
        return st;
    }
    ct_gnode *n = new_node(c);
    if (!n) {
        free(list);
        return capture_oom(c);
    }
    n->op = call->op;
    n->mode = call->mode;
    n->nin = call->nin;
    memcpy(n->in, in, sizeof(int) * (size_t)call->nin);
    n->nlist = call->nlist;
    n->list = list;
    n->nscalars = call->nscalars;
    memcpy(n->s, call->s, sizeof(ct_scalar) * (size_t)call->nscalars);
    n->nints = call->nints;
    memcpy(n->ints, call->ints, sizeof(int64_t) * (size_t)call->nints);
    n->dtype = call->dtype;
    n->device = call->device;
    n->has_device = call->has_device;
    n->included = inc & ~ct_keyset_of(CT_KEY_TRACE);
    n->excluded = exc;
    n->nout = call->nout;
    const int node_id = c->g->nnodes++;
    for (int i = 0; i < call->nout; i++) {
        if (!call->out[i])
            continue;
        int v = new_value(c, call->out[i], CT_GV_NODE);
        if (v < 0)
            return capture_oom(c);
        ct_gnode *nd = &c->g->nodes[node_id];
        c->g->values[v].node = node_id;
        c->g->values[v].out = i;
        nd->out[i] = v;
        nd->target[i] = tgt[i];
    }
    return CT_OK;
}

/* Note [Host calls] (graph.h): the call runs for real with TRACE off, then one node
 * records it, with the {leaf, gradient} pairs of the gradients stored so far. */
ct_status ct_compile_host_call(const char *name, ct_compile_host_fn fn, const void *ctx, size_t ctx_size,
                               ct_tensor **result) {
    if (result)
        *result = NULL;
    if (!fn)
        return ct_error(CT_ERROR_NULL_ARGUMENT, name ? name : "compile_host_call", "fn is NULL");
    if (!ctx && ctx_size)
        return ct_error(CT_ERROR_NULL_ARGUMENT, name ? name : "compile_host_call", "ctx is NULL but ctx_size is %zu",
                        ctx_size);
    if (!capturing_here())
        return fn((void *)ctx, result);
    capture *c = tls_capture;
    ct_tensor *r = NULL;
    const ct_keyset exc = ct_tls_excluded();
    if (c->failed_oom || (c->refused && c->fallback)) {
        ct_tls_set_excluded(exc | ct_keyset_of(CT_KEY_TRACE));
        ct_status st = fn((void *)ctx, result);
        ct_tls_set_excluded(exc);
        return st;
    }
    /* the gradients stored by now, as values, before the call can change them */
    int npairs = 0, *list = c->nleaf ? malloc(sizeof(int) * 2 * (size_t)c->nleaf) : NULL;
    ct_host_node *h = malloc(sizeof *h + ctx_size);
    if ((c->nleaf && !list) || !h) {
        free(list);
        free(h);
        return capture_oom(c);
    }
    for (int i = 0; i < c->nleaf; i++) {
        const struct leaf *l = &c->leaves[i];
        const ct_tensor *gr = c->seen[l->value]->grad;
        if (!gr || gr == l->grad)
            continue;
        int gv = value_of(c, gr);
        if (gv < 0) {
            free(list);
            free(h);
            return capture_oom(c);
        }
        list[2 * npairs] = l->value;
        list[2 * npairs + 1] = gv;
        npairs++;
    }
    h->name = name ? name : "host";
    h->fn = fn;
    h->size = ctx_size;
    if (ctx_size)
        memcpy(h->ctx, ctx, ctx_size);
    const ct_keyset inc = ct_tls_included();
    ct_tls_set_excluded(exc | ct_keyset_of(CT_KEY_TRACE));
    ct_status st = fn((void *)ctx, result ? &r : NULL);
    ct_tls_set_excluded(exc);
    if (st != CT_OK) {
        free(list);
        free(h);
        return st;
    }
    ct_gnode *n = new_node(c);
    if (!n) {
        free(list);
        free(h);
        return capture_oom(c);
    }
    n->op = CT_OP_clone; /* never looked at: host is set */
    n->host = h;
    n->mode = CT_CALL_FUNCTIONAL;
    n->nlist = 2 * npairs;
    n->list = list;
    n->included = inc & ~ct_keyset_of(CT_KEY_TRACE);
    n->excluded = exc;
    n->nout = result ? 1 : 0;
    const int node_id = c->g->nnodes++;
    if (r) {
        int v = new_value(c, r, CT_GV_NODE);
        if (v < 0)
            return capture_oom(c);
        c->g->values[v].node = node_id;
        c->g->values[v].out = 0;
        c->g->nodes[node_id].out[0] = v;
    }
    if (result)
        *result = r;
    return CT_OK;
}

void ct_compile_note_grads_reset(ct_tensor *const *ts, int n) {
    capture *c = tls_capture;
    if (!c || !ts || n <= 0)
        return;
    for (int i = 0; i < n; i++) {
        if (c->nreset == c->capreset) {
            int ncap = c->capreset ? c->capreset * 2 : 64;
            const ct_tensor **nr = realloc(c->reset, sizeof *nr * (size_t)ncap);
            if (!nr) {
                c->failed_oom = true;
                return;
            }
            c->reset = nr;
            c->capreset = ncap;
        }
        c->reset[c->nreset++] = ts[i];
    }
}

static ct_status host_read_hook(const char *op) {
    if (!capturing_here())
        return CT_OK;
    return refuse(tls_capture, op, "it reads a tensor's value on the host");
}

/* Note [Seeding under capture] in src/core/random.h: the seeding becomes a host call,
 * run now with the capture off and again on every replay. */
static ct_status seed_host(void *ctx, ct_tensor **result) {
    (void)result;
    uint64_t seed;
    memcpy(&seed, ctx, sizeof seed);
    ct_manual_seed(seed);
    return CT_OK;
}

static bool seed_hook(uint64_t seed) {
    if (!capturing_here())
        return false;
    /* a failed host call has failed the capture; the seed is then set directly */
    return ct_compile_host_call("manual_seed", seed_host, &seed, sizeof seed, NULL) == CT_OK;
}

bool ct_compile_is_capturing(void) { return capturing_here(); }

ct_status ct_compile_refuse(const char *op, const char *why) {
    if (!capturing_here())
        return CT_OK;
    return refuse(tls_capture, op ? op : "compile", why ? why : "it runs code the graph cannot replay");
}

void ct_compile_register(void) {
    ct_dispatch_register_fallback(CT_KEY_TRACE, trace_kernel);
    ct_core_set_host_read_hook(host_read_hook);
    ct_core_set_seed_hook(seed_hook);
}

/* ------------------------------------------------------------ guards */

/* Note [Guard key]
 * One int64 array per call, compared with memcmp: the global state first (grad mode
 * and autocast as the thread's functionality keys, the autocast dtypes, the default
 * dtype, the dispatcher's generation, which ct_op_override bumps), then per input its
 * presence, dtype, device, requires_grad, sizes, strides, storage offset and which
 * earlier input shares its storage, if one does. ctorch
 * has no deterministic-algorithms flag yet; when it gets one it joins the global part. */
typedef struct guard_key {
    int n;
    int64_t *k;
} guard_key;

static bool guard_build(guard_key *gk, ct_tensor *const *inputs, int ninputs) {
    int n = 8 + ninputs * (7 + 2 * CT_MAX_DIMS + 1);
    int64_t *k = calloc((size_t)n, sizeof *k);
    if (!k)
        return false;
    int at = 0;
    k[at++] = ninputs;
    k[at++] = (int64_t)(ct_tls_included() & ~ct_keyset_of(CT_KEY_TRACE));
    k[at++] = (int64_t)ct_tls_excluded();
    k[at++] = ct_is_grad_enabled();
    k[at++] = ct_autocast_is_enabled(CT_DEVICE_CPU) ? ct_autocast_get_dtype(CT_DEVICE_CPU) : -1;
    k[at++] = ct_autocast_is_enabled(CT_DEVICE_CUDA) ? ct_autocast_get_dtype(CT_DEVICE_CUDA) : -1;
    k[at++] = ct_get_default_dtype();
    k[at++] = (int64_t)ct_dispatch_generation();
    for (int i = 0; i < ninputs; i++) {
        const ct_tensor *t = inputs[i];
        k[at++] = t != NULL;
        if (!t)
            continue;
        k[at++] = t->dtype;
        k[at++] = ((int64_t)t->device.type << 32) | (uint32_t)t->device.index;
        k[at++] = t->requires_grad;
        k[at++] = t->ndim;
        for (int d = 0; d < t->ndim; d++) {
            k[at++] = t->shape[d];
            k[at++] = t->strides[d];
        }
        k[at++] = t->offset;
        /* the first earlier input sharing its storage: a graph captured with two
         * arguments that alias (one tensor passed twice, a view and its base) must not
         * replay on two that do not, nor the other way round */
        int64_t alias = -1;
        for (int j = 0; j < i && alias < 0; j++)
            if (inputs[j] && inputs[j]->storage == t->storage)
                alias = j;
        k[at++] = alias;
    }
    gk->n = at;
    gk->k = k;
    return true;
}

static bool guard_equal(const guard_key *a, const guard_key *b) {
    return a->n == b->n && memcmp(a->k, b->k, sizeof(int64_t) * (size_t)a->n) == 0;
}

/* ------------------------------------------------------------ compiled functions */

/* Note [Gradient guards]
 * What the autograd engine records depends on the .grad of each leaf it reaches: with
 * none it stores the new gradient (an epilogue write), with one it adds into it in
 * place (a node writing into that tensor). A graph is valid only while every leaf it
 * reached has the .grad it had at capture: for a constant (a parameter) that same
 * tensor or none, for an input at least its presence. These are checked after the
 * guard key matches; a mismatch captures the entry again (a loop that sets gradients
 * to None before each step, or one that never does, captures once). */
typedef struct grad_guard {
    int value;               /* the leaf's value */
    bool any;                /* a host call in the function sets it to None before it is read */
    const ct_tensor *leaf;   /* a constant leaf (the graph holds it), NULL for an input */
    const ct_tensor *grad;   /* its .grad at capture (compared by identity, never used) */
} grad_guard;

typedef struct entry {
    guard_key key;
    bool eager; /* the capture was refused (with CT_COMPILE_EAGER_FALLBACK) */
    ct_graph *g;
    int64_t compile_us;
    int ngg;
    grad_guard *gg;
    int recaptures;
} entry;

static bool grads_match(const entry *e, ct_tensor *const *inputs) {
    for (int i = 0; i < e->ngg; i++) {
        const grad_guard *q = &e->gg[i];
        if (q->any)
            continue;
        const ct_tensor *t = q->leaf ? q->leaf : inputs[e->g->values[q->value].input];
        const ct_tensor *gr = t ? t->grad : NULL;
        if (q->leaf ? gr != q->grad : (gr != NULL) != (q->grad != NULL))
            return false;
    }
    return true;
}

struct ct_compiled {
    ct_compile_fn fn;
    void *user_data;
    uint32_t flags;
    bool warmed;
    bool warned_full;
    int nentries;
    entry entries[MAX_ENTRIES];
    int last; /* the entry the last call used, -1 */
    int64_t calls, eager, captures, replays;
    int frame_id; /* Note [Compile events] */
};

/* Note [Compile events]
 * With the structured log on, a capture writes TORCH_TRACE's compile events, whose
 * envelopes carry frame_id (one per ct_compile, in order), frame_compile_id (the
 * function's captures so far) and attempt (0), as tlparse groups them:
 *   dynamo_start          the capture begins
 *   dynamo_output_graph   the graph after the passes (payload: its text)
 *   aot_joint_graph       for a training step, the same graph: forward and backward
 *                         are one graph here (there is no AOTAutograd split)
 *   inductor_output_code  the generated C, when there is any (codegen.c)
 *   dynamo_guards         the guard key and gradient guards (payload: JSON list)
 *   compilation_metrics   times and counts; fail_type and fail_reason for a refused
 *                         capture or a call past the entry limit. */
static atomic_int g_frames;

static void json_str(ct_json_buf *b, const char *s) { ct_json_put_string(b, s, strlen(s)); }

static void __attribute__((format(printf, 2, 3))) json_fmt(ct_json_buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        ct_json_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void log_metrics(const ct_compiled *cc, const char *env, const ct_graph *g, int64_t us, int nguards,
                        const char *fail_type, const char *fail_reason) {
    ct_json_buf b = {0};
    json_fmt(&b, "{\"co_name\": \"ct_compile\", \"frame_key\": \"%d\", \"compile_id\": \"%d/%lld\", ",
             cc->frame_id, cc->frame_id, (long long)(cc->captures - 1));
    json_fmt(&b, "\"entire_frame_compile_time_s\": %.6f, \"guard_count\": %d, ", (double)us / 1e6, nguards);
    if (g) {
        int live = 0;
        for (int i = 0; i < g->nnodes; i++)
            live += !g->nodes[i].dead;
        json_fmt(&b,
                 "\"graph_op_count\": %d, \"captured_op_count\": %d, \"fused_groups\": %d, \"fused_nodes\": %d, "
                 "\"cache_hits\": %d, \"cache_misses\": %d, ",
                 live, g->captured_nodes, g->nfused_groups, g->nfused_nodes, g->cache_hits, g->cache_misses);
    }
    ct_json_puts(&b, "\"fail_type\": ");
    if (fail_type)
        json_str(&b, fail_type);
    else
        ct_json_puts(&b, "null");
    ct_json_puts(&b, ", \"fail_reason\": ");
    if (fail_reason)
        json_str(&b, fail_reason);
    else
        ct_json_puts(&b, "null");
    ct_json_puts(&b, "}");
    ct_json_put(&b, "", 1); /* the terminating NUL */
    if (!b.failed)
        ct_trace_log_write_env(__FILE__, __LINE__, "compilation_metrics", b.data, env, NULL);
    ct_json_buf_free(&b);
}

ct_compiled *ct_compile(ct_compile_fn fn, void *user_data, uint32_t flags) {
    if (!fn) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "compile", "fn is NULL");
        return NULL;
    }
    const uint32_t known = CT_COMPILE_EAGER_FALLBACK | CT_COMPILE_NO_CODEGEN | CT_COMPILE_NO_PASSES;
    if (flags & ~known) {
        ct_error(CT_ERROR_VALUE, "compile", "unknown flags 0x%x", (unsigned)(flags & ~known));
        return NULL;
    }
    ct_dispatch_ensure_init(); /* registers the TRACE kernel */
    ct_compiled *c = ct_xcalloc("compile", 1, sizeof *c);
    if (!c)
        return NULL;
    c->fn = fn;
    c->user_data = user_data;
    c->flags = flags;
    c->last = -1;
    c->frame_id = atomic_fetch_add(&g_frames, 1);
    return c;
}

void ct_compiled_free(ct_compiled *c) {
    if (!c)
        return;
    for (int i = 0; i < c->nentries; i++) {
        free(c->entries[i].key.k);
        free(c->entries[i].gg);
        ct_graph_free(c->entries[i].g);
    }
    free(c);
}

static int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void capture_release(capture *c) {
    for (int i = 0; c->seen && i < c->g->nvalues; i++)
        ct_release(c->seen[i]);
    free(c->seen);
    free(c->keys);
    free(c->vals);
    free(c->leaves);
    free(c->reset);
}

/* Note [Training steps]
 * When the capture ran a backward pass (a leaf's .grad was set or changed), the graph
 * holds the derivative formulas as nodes, so a replay must not make autograd history
 * for the forward again: every node replays with AUTOGRAD excluded, and the gradients
 * the engine stored become epilogue writes of .grad (a gradient accumulated in place
 * into an existing .grad is an in-place node already). A function without a backward
 * replays with the keys its calls had, so its result carries autograd history as an
 * eager call's does (gradcheck through a compiled function relies on it). */
static bool finish_graph(capture *c, ct_tensor *result) {
    ct_graph *g = c->g;
    if (result && (g->result = value_of(c, result)) < 0)
        return false;
    for (int i = 0; i < c->nleaf; i++) {
        const struct leaf *l = &c->leaves[i];
        const ct_tensor *t = c->seen[l->value];
        const ct_tensor *gr = t->grad;
        if (gr != l->grad || (gr && ct_tensor_version(gr) != l->grad_version))
            g->no_autograd = true;
        if (!gr || gr == l->grad)
            continue;
        int gv = value_of(c, gr);
        if (gv < 0)
            return false;
        int(*ne)[2] = realloc(g->epi, sizeof(*ne) * (size_t)(g->nepi + 1));
        if (!ne)
            return false;
        g->epi = ne;
        g->epi[g->nepi][0] = l->value;
        g->epi[g->nepi][1] = gv;
        g->nepi++;
    }
    g->captured_nodes = g->nnodes;
    return true;
}

/* Note [Compile events]: the guards of entry e as TORCH_TRACE's dynamo_guards payload,
 * a JSON list of {"code": ...}; returns their count. */
static int log_guards(const entry *e, const ct_graph *g, ct_tensor *const *inputs, int ninputs) {
    ct_json_buf b = {0};
    int n = 0;
    char code[1024];
#define GUARD(...)                                          \
    do {                                                    \
        snprintf(code, sizeof code, __VA_ARGS__);           \
        ct_json_puts(&b, n++ ? ", {\"code\": " : "[{\"code\": "); \
        json_str(&b, code);                                 \
        ct_json_puts(&b, "}");                              \
    } while (0)
    GUARD("len(inputs) == %d", ninputs);
    GUARD("functionality keys: included 0x%llx, excluded 0x%llx", (unsigned long long)e->key.k[1],
          (unsigned long long)e->key.k[2]);
    GUARD("grad_mode == %s", e->key.k[3] ? "True" : "False");
    GUARD("autocast(cpu) == %s, autocast(cuda) == %s", e->key.k[4] >= 0 ? ct_dtype_name((ct_dtype)e->key.k[4]) : "off",
          e->key.k[5] >= 0 ? ct_dtype_name((ct_dtype)e->key.k[5]) : "off");
    GUARD("default_dtype == %s", ct_dtype_name((ct_dtype)e->key.k[6]));
    GUARD("dispatch_generation == %lld", (long long)e->key.k[7]);
    for (int i = 0; i < ninputs; i++) {
        const ct_tensor *t = inputs[i];
        if (!t) {
            GUARD("inputs[%d] is None", i);
            continue;
        }
        int at = snprintf(code, sizeof code, "check_tensor(inputs[%d], %s, %s, requires_grad=%s, size=[", i,
                          ct_dtype_name(t->dtype), t->device.type == CT_DEVICE_CUDA ? "cuda" : "cpu",
                          t->requires_grad ? "True" : "False");
        for (int d = 0; d < t->ndim && at < (int)sizeof code - 64; d++)
            at += snprintf(code + at, sizeof code - (size_t)at, d ? ", %lld" : "%lld", (long long)t->shape[d]);
        at += snprintf(code + at, sizeof code - (size_t)at, "], stride=[");
        for (int d = 0; d < t->ndim && at < (int)sizeof code - 64; d++)
            at += snprintf(code + at, sizeof code - (size_t)at, d ? ", %lld" : "%lld", (long long)t->strides[d]);
        snprintf(code + at, sizeof code - (size_t)at, "], storage_offset=%lld)", (long long)t->offset);
        ct_json_puts(&b, n++ ? ", {\"code\": " : "[{\"code\": ");
        json_str(&b, code);
        ct_json_puts(&b, "}");
        for (int j = 0; j < i; j++)
            if (inputs[j] && inputs[j]->storage == t->storage) {
                GUARD("inputs[%d] shares its storage with inputs[%d]", i, j);
                break;
            }
    }
    for (int i = 0; i < e->ngg; i++) {
        const grad_guard *q = &e->gg[i];
        const ct_gvalue *v = &g->values[q->value];
        if (q->any)
            GUARD("%%%d.grad: any (set to None inside the function)", q->value);
        else if (v->kind == CT_GV_INPUT)
            GUARD("inputs[%d].grad is %s", v->input, q->grad ? "not None" : "None");
        else
            GUARD("%%%d.grad is %s", q->value, q->grad ? "the tensor it had at capture" : "None");
    }
#undef GUARD
    ct_json_puts(&b, n ? "]" : "[]");
    ct_json_put(&b, "", 1);
    if (!b.failed)
        ct_trace_log_write_env(__FILE__, __LINE__, "dynamo_guards", "{}", g->env, b.data);
    ct_json_buf_free(&b);
    return n;
}

static ct_tensor *run_capture(ct_compiled *cc, entry *e, ct_tensor *const *inputs, int ninputs) {
    ct_graph *g = ct_xcalloc("compile", 1, sizeof *g);
    if (!g)
        return NULL;
    g->result = -1;
    g->ninputs = ninputs;
    snprintf(g->env, sizeof g->env, "\"frame_id\": %d, \"frame_compile_id\": %lld, \"attempt\": 0", cc->frame_id,
             (long long)(cc->captures - 1));
    const bool logging = ct_trace_log_enabled();
    if (logging)
        ct_trace_log_write_env(__FILE__, __LINE__, "dynamo_start", "{\"stack\": []}", g->env, NULL);
    const int64_t t_start = now_us();
    capture c = {.g = g, .fallback = (cc->flags & CT_COMPILE_EAGER_FALLBACK) != 0};
    for (int i = 0; i < ninputs; i++) {
        int v = inputs[i] ? new_value(&c, inputs[i], CT_GV_INPUT) : 0;
        if (v < 0 || (inputs[i] && !note_leaf(&c, v, inputs[i]))) {
            capture_release(&c);
            ct_graph_free(g);
            capture_oom(&c);
            return NULL;
        }
        if (inputs[i])
            g->values[v].input = i;
    }
    capture *outer = tls_capture;
    tls_capture = &c;
    const ct_keyset inc = ct_tls_included();
    ct_tls_set_included(inc | ct_keyset_of(CT_KEY_TRACE));
    ct_scope_begin();
    ct_tensor *r = cc->fn(inputs, ninputs, cc->user_data);
    const int64_t t0 = now_us();
    bool ok = r != NULL && !c.failed_oom && !c.refused && finish_graph(&c, r);
    if (r)
        ct_keep(r);
    ct_scope_end();
    ct_tls_set_included(inc);
    tls_capture = outer;
    if (c.refused) {
        if (c.fallback) {
            e->eager = true;
            fprintf(stderr, "[ct] warning: compile: %s cannot be captured (%s); this function runs eagerly for these inputs\n", c.op, c.why);
        }
        if (logging) {
            char reason[300];
            snprintf(reason, sizeof reason, "%s: %s", c.op, c.why);
            log_metrics(cc, g->env, NULL, now_us() - t_start, 0, c.fallback ? "capture refused (eager fallback)" : "capture refused", reason);
        }
        capture_release(&c);
        ct_graph_free(g);
        if (!c.fallback) {
            /* the error of the refused call, whatever the function did after it */
            refusal_error(c.op, c.why);
            return NULL;
        }
        return r;
    }
    if (!ok) {
        if (r && !ct_last_status())
            capture_oom(&c);
        capture_release(&c);
        ct_graph_free(g);
        return NULL;
    }
    free(e->gg);
    e->gg = calloc((size_t)c.nleaf + 1, sizeof *e->gg);
    if (!e->gg) {
        capture_release(&c);
        ct_graph_free(g);
        capture_oom(&c);
        return NULL;
    }
    e->ngg = c.nleaf;
    for (int i = 0; i < c.nleaf; i++) {
        const ct_gvalue *v = &g->values[c.leaves[i].value];
        e->gg[i] = (grad_guard){c.leaves[i].value, c.leaves[i].reset, v->kind == CT_GV_CONST ? v->constant : NULL,
                                c.leaves[i].grad};
    }
    capture_release(&c);
    if (!(cc->flags & CT_COMPILE_NO_PASSES)) {
        ct_graph_cse(g);
        ct_graph_dce(g);
        ct_graph_drop_copies(g);
    }
    ct_graph_analyse(g);
    if (logging) {
        int64_t len = ct_graph_print(g, NULL, 0);
        char *text = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (text) {
            ct_graph_print(g, text, (size_t)len + 1);
            int live = 0;
            for (int i = 0; i < g->nnodes; i++)
                live += !g->nodes[i].dead;
            char meta[256];
            snprintf(meta, sizeof meta, "{\"captured_nodes\": %d, \"nodes\": %d, \"training_step\": %s}",
                     g->captured_nodes, live, g->no_autograd ? "true" : "false");
            ct_trace_log_write_env(__FILE__, __LINE__, "dynamo_output_graph", meta, g->env, text);
            if (g->no_autograd)
                ct_trace_log_write_env(__FILE__, __LINE__, "aot_joint_graph", "{}", g->env, text);
            free(text);
        }
    }
    if (!(cc->flags & CT_COMPILE_NO_CODEGEN))
        ct_codegen_graph(g);
    e->g = g;
    e->compile_us = now_us() - t0;
    if (logging) {
        int nguards = log_guards(e, g, inputs, ninputs);
        log_metrics(cc, g->env, g, e->compile_us, nguards, NULL, NULL);
    }
    return r;
}

static ct_tensor *run_eager(ct_compiled *c, ct_tensor *const *inputs, int ninputs) {
    c->eager++;
    return c->fn(inputs, ninputs, c->user_data);
}

ct_tensor *ct_compiled_call(ct_compiled *c, ct_tensor *const *inputs, int ninputs) {
    if (!c) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "compiled_call", "compiled function is NULL");
        return NULL;
    }
    if (ninputs < 0 || (ninputs > 0 && !inputs)) {
        ct_error(CT_ERROR_VALUE, "compiled_call", "inputs is NULL or ninputs (%d) is negative", ninputs);
        return NULL;
    }
    if (tls_capture) {
        ct_error(CT_ERROR_RUNTIME, "compiled_call", "a compiled function cannot be called while another is captured");
        return NULL;
    }
    c->calls++;
    if (!c->warmed) {
        c->warmed = true;
        return run_eager(c, inputs, ninputs);
    }
    guard_key gk;
    if (!guard_build(&gk, inputs, ninputs)) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, "compiled_call", "out of memory");
        return NULL;
    }
    for (int i = 0; i < c->nentries; i++) {
        entry *e = &c->entries[i];
        if (!guard_equal(&e->key, &gk))
            continue;
        free(gk.k);
        c->last = i;
        if (e->eager)
            return run_eager(c, inputs, ninputs);
        if (!grads_match(e, inputs)) {
            /* Note [Gradient guards]: capture this entry again */
            if (++e->recaptures > MAX_ENTRIES) {
                if (!c->warned_full) {
                    c->warned_full = true;
                    fprintf(stderr, "[ct] warning: compile: the gradients a compiled function reaches keep changing "
                                    "between calls; it runs eagerly\n");
                }
                ct_graph_free(e->g);
                e->g = NULL;
                e->eager = true;
                return run_eager(c, inputs, ninputs);
            }
            ct_graph_free(e->g);
            e->g = NULL;
            c->captures++;
            ct_tensor *r = run_capture(c, e, inputs, ninputs);
            if (!e->g && !e->eager) {
                /* the capture failed: the entry goes, with its key */
                free(e->key.k);
                free(e->gg);
                *e = c->entries[--c->nentries];
                c->last = -1;
            }
            return r;
        }
        c->replays++;
        bool ok;
        ct_tensor *r = ct_graph_run(e->g, inputs, ninputs, &ok);
        return r;
    }
    if (c->nentries == MAX_ENTRIES) {
        free(gk.k);
        if (!c->warned_full) {
            c->warned_full = true;
            fprintf(stderr,
                    "[ct] warning: compile: %d guard entries (input shapes, dtypes or modes) are compiled already; "
                    "calls with new ones run eagerly\n",
                    MAX_ENTRIES);
            if (ct_trace_log_enabled()) {
                char env[96], reason[160];
                snprintf(env, sizeof env, "\"frame_id\": %d, \"frame_compile_id\": %lld, \"attempt\": 0", c->frame_id,
                         (long long)c->captures);
                snprintf(reason, sizeof reason, "%d guard entries are compiled already; new ones run eagerly",
                         MAX_ENTRIES);
                c->captures++; /* log_metrics numbers the attempt after the last capture */
                log_metrics(c, env, NULL, 0, 0, "cache_size_limit", reason);
                c->captures--;
            }
        }
        return run_eager(c, inputs, ninputs);
    }
    entry *e = &c->entries[c->nentries];
    memset(e, 0, sizeof *e);
    e->key = gk;
    c->captures++;
    ct_tensor *r = run_capture(c, e, inputs, ninputs);
    if (e->g || e->eager) {
        c->last = c->nentries++;
    } else {
        free(gk.k);
        free(e->gg);
        e->key.k = NULL;
        e->gg = NULL;
    }
    return r;
}

int64_t ct_compiled_print(const ct_compiled *c, char *buf, size_t cap) {
    if (!c) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "compiled_print", "compiled function is NULL");
        return -1;
    }
    if (!buf && cap > 0) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "compiled_print", "buf is NULL but cap is %zu (pass cap 0 to measure)", cap);
        return -1;
    }
    if (c->last < 0 || !c->entries[c->last].g) {
        ct_error(CT_ERROR_RUNTIME, "compiled_print", "no graph was captured for the last call");
        return -1;
    }
    return ct_graph_print(c->entries[c->last].g, buf, cap);
}

int64_t ct_compiled_stat(const ct_compiled *c, ct_compile_stat which) {
    if (!c) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "compiled_stat", "compiled function is NULL");
        return -1;
    }
    const ct_graph *g = c->last >= 0 ? c->entries[c->last].g : NULL;
    switch (which) {
    case CT_COMPILE_STAT_CALLS:
        return c->calls;
    case CT_COMPILE_STAT_EAGER:
        return c->eager;
    case CT_COMPILE_STAT_CAPTURES:
        return c->captures;
    case CT_COMPILE_STAT_REPLAYS:
        return c->replays;
    case CT_COMPILE_STAT_ENTRIES:
        return c->nentries;
    case CT_COMPILE_STAT_NODES: {
        if (!g)
            return 0;
        int64_t n = 0;
        for (int i = 0; i < g->nnodes; i++)
            n += !g->nodes[i].dead;
        return n;
    }
    case CT_COMPILE_STAT_CAPTURED_NODES:
        return g ? g->captured_nodes : 0;
    case CT_COMPILE_STAT_FUSED_GROUPS:
        return g ? g->nfused_groups : 0;
    case CT_COMPILE_STAT_FUSED_NODES:
        return g ? g->nfused_nodes : 0;
    case CT_COMPILE_STAT_CACHE_HITS:
        return g ? g->cache_hits : 0;
    case CT_COMPILE_STAT_CACHE_MISSES:
        return g ? g->cache_misses : 0;
    case CT_COMPILE_STAT_COMPILE_US:
        return c->last >= 0 ? c->entries[c->last].compile_us : 0;
    }
    ct_error(CT_ERROR_VALUE, "compiled_stat", "unknown stat %d", (int)which);
    return -1;
}
