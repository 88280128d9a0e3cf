/* The graph's passes, its printed form, and its replay ("extern" lowering: every node
 * runs today's kernel through the dispatcher). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/graph.h"
#include "ctorch/autograd.h"
#include "dispatch/dispatch_internal.h"
#include "meta/op_info.h"
#include "tensor_impl.h"

static const char *const op_family[CT_OP_COUNT] = {
#define CT_OP(name, sig, family, flags) #family,
#include "ctorch/ops.def"
#undef CT_OP
};

const char *ct_graph_op_family(ct_op op) { return op >= 0 && op < CT_OP_COUNT ? op_family[op] : "UNKNOWN"; }

void ct_graph_free(ct_graph *g) {
    if (!g)
        return;
    for (int i = 0; i < g->nnodes; i++) {
        free(g->nodes[i].list);
        free(g->nodes[i].host);
    }
    for (int i = 0; i < g->nvalues; i++)
        if (g->values[i].kind == CT_GV_CONST)
            ct_release(g->values[i].constant);
    ct_codegen_free(g->fused);
    free(g->nodes);
    free(g->values);
    free(g->epi);
    free(g);
}

/* ------------------------------------------------------------ analysis */

static void use(ct_graph *g, int v, int node) {
    if (v < 0)
        return;
    g->values[v].uses++;
    if (node > g->values[v].last_use)
        g->values[v].last_use = node;
}

void ct_graph_analyse(ct_graph *g) {
    for (int v = 0; v < g->nvalues; v++) {
        g->values[v].uses = 0;
        g->values[v].last_use = -1;
    }
    for (int i = 0; i < g->nnodes; i++) {
        const ct_gnode *n = &g->nodes[i];
        if (n->dead)
            continue;
        for (int k = 0; k < n->nin; k++)
            use(g, n->in[k], i);
        for (int k = 0; k < n->nlist; k++)
            use(g, n->list[k], i);
        if (n->mode != CT_CALL_FUNCTIONAL)
            for (int k = 0; k < n->nout; k++)
                use(g, n->target[k], i);
    }
    /* the result and the epilogue's values live to the end */
    if (g->result >= 0) {
        g->values[g->result].uses++;
        g->values[g->result].last_use = g->nnodes;
    }
    for (int e = 0; e < g->nepi; e++)
        for (int k = 0; k < 2; k++) {
            g->values[g->epi[e][k]].uses++;
            g->values[g->epi[e][k]].last_use = g->nnodes;
        }
}

/* Note [Pure nodes]
 * A node may be removed or merged only when running it has no effect but its results:
 * a functional call with results, not a random op (it advances the generator), nor
 * one flagged CT_OPF_DRAWS in ops.def (flash attention, whose dropout draws), not an
 * op over a tensor list that may write its entries (the fused optimizers), not a
 * factory (two empty tensors are two buffers, whatever they hold). */
static bool pure(const ct_gnode *n) {
    if (n->host)
        return false;
    if (n->mode != CT_CALL_FUNCTIONAL || n->nout == 0)
        return false;
    const char *fam = op_family[n->op];
    if (!strcmp(fam, "RANDOM") || !strcmp(fam, "FACTORY"))
        return false;
    if (ct_op_table[n->op].flags & CT_OPF_DRAWS)
        return false;
    if (n->nlist > 0 && n->op != CT_OP_cat && n->op != CT_OP_stack)
        return false;
    return true;
}

void ct_graph_dce(ct_graph *g) {
    bool *live = calloc((size_t)g->nvalues + 1, sizeof *live);
    if (!live)
        return; /* the pass is an optimisation: without memory the graph stays as it is */
    if (g->result >= 0)
        live[g->result] = true;
    for (int e = 0; e < g->nepi; e++)
        live[g->epi[e][0]] = live[g->epi[e][1]] = true;
    for (int i = g->nnodes - 1; i >= 0; i--) {
        ct_gnode *n = &g->nodes[i];
        if (n->dead)
            continue;
        bool needed = !pure(n);
        for (int k = 0; k < n->nout && !needed; k++)
            needed = n->out[k] >= 0 && live[n->out[k]];
        if (!needed) {
            n->dead = true;
            continue;
        }
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] >= 0)
                live[n->in[k]] = true;
        for (int k = 0; k < n->nlist; k++)
            if (n->list[k] >= 0)
                live[n->list[k]] = true;
        if (n->mode != CT_CALL_FUNCTIONAL)
            for (int k = 0; k < n->nout; k++)
                if (n->target[k] >= 0)
                    live[n->target[k]] = true;
    }
    free(live);
}

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t node_hash(const ct_gnode *n) {
    uint64_t h = mix(0, (uint64_t)n->op);
    for (int k = 0; k < n->nin; k++)
        h = mix(h, (uint64_t)(int64_t)n->in[k]);
    for (int k = 0; k < n->nlist; k++)
        h = mix(h, (uint64_t)(int64_t)n->list[k]);
    for (int k = 0; k < n->nints; k++)
        h = mix(h, (uint64_t)n->ints[k]);
    for (int k = 0; k < n->nscalars; k++)
        h = mix(h, (uint64_t)n->s[k].v.i);
    return mix(h, (uint64_t)n->dtype);
}

static bool same_call(const ct_gnode *a, const ct_gnode *b) {
    if (a->op != b->op || a->nin != b->nin || a->nlist != b->nlist || a->nints != b->nints ||
        a->nscalars != b->nscalars || a->dtype != b->dtype || a->nout != b->nout || a->has_device != b->has_device ||
        a->included != b->included || a->excluded != b->excluded)
        return false;
    if (memcmp(a->in, b->in, sizeof(int) * (size_t)a->nin) || memcmp(a->ints, b->ints, sizeof(int64_t) * (size_t)a->nints))
        return false;
    if (a->nlist && memcmp(a->list, b->list, sizeof(int) * (size_t)a->nlist))
        return false;
    for (int k = 0; k < a->nscalars; k++)
        if (a->s[k].type != b->s[k].type || a->s[k].v.i != b->s[k].v.i)
            return false;
    if (a->has_device && !ct_device_equal(a->device, b->device))
        return false;
    return true;
}

/* Whether node w writes (in place or out=) into storage s. */
static bool writes_storage(const ct_graph *g, const ct_gnode *w, uintptr_t s) {
    if (w->host && !w->dead) {
        /* Note [Host calls]: every constant (parameters, gradients) and its gradients */
        for (int k = 0; k < w->nlist; k++)
            if (w->list[k] >= 0 && g->values[w->list[k]].storage == s)
                return true;
        for (int v = 0; v < g->nvalues; v++)
            if (g->values[v].kind == CT_GV_CONST && g->values[v].storage == s)
                return true;
        return false;
    }
    if (w->mode == CT_CALL_FUNCTIONAL || w->dead)
        return false;
    for (int k = 0; k < w->nout; k++)
        if (w->target[k] >= 0 && g->values[w->target[k]].storage == s)
            return true;
    return false;
}

static bool written_in(const ct_graph *g, uintptr_t s, int from, int to) {
    for (int k = from; k < to; k++)
        if (writes_storage(g, &g->nodes[k], s))
            return true;
    return false;
}

static void replace_uses(ct_graph *g, int from_node, int old, int nw) {
    for (int i = from_node; i < g->nnodes; i++) {
        ct_gnode *n = &g->nodes[i];
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] == old)
                n->in[k] = nw;
        for (int k = 0; k < n->nlist; k++)
            if (n->list[k] == old)
                n->list[k] = nw;
        for (int k = 0; k < n->nout; k++)
            if (n->target[k] == old)
                n->target[k] = nw;
    }
    if (g->result == old)
        g->result = nw;
    for (int e = 0; e < g->nepi; e++)
        for (int k = 0; k < 2; k++)
            if (g->epi[e][k] == old)
                g->epi[e][k] = nw;
}

/* Note [Common subexpressions]
 * Node j is replaced by an earlier node i with the same call (op, input values,
 * arguments, functionality keys) when both are pure (Note [Pure nodes]), neither is a
 * view (a view's identity matters to in-place writes through it), nothing writes into
 * the storage of their inputs between them (a value names a tensor, and a view of a
 * tensor written in place reads the new data under the same name), and nothing ever
 * writes into the storage of their results (merged, a write into one would show in the
 * other). */
void ct_graph_cse(ct_graph *g) {
    uint64_t *h = calloc((size_t)g->nnodes + 1, sizeof *h);
    bool *cand = calloc((size_t)g->nnodes + 1, sizeof *cand);
    if (!h || !cand) {
        free(h);
        free(cand);
        return;
    }
    for (int j = 0; j < g->nnodes; j++) {
        ct_gnode *n = &g->nodes[j];
        cand[j] = !n->dead && pure(n) && strcmp(op_family[n->op], "VIEW") != 0;
        if (!cand[j])
            continue;
        for (int k = 0; k < n->nout && cand[j]; k++)
            if (n->out[k] >= 0 && written_in(g, g->values[n->out[k]].storage, j + 1, g->nnodes))
                cand[j] = false;
        if (cand[j])
            h[j] = node_hash(n);
    }
    for (int j = 0; j < g->nnodes; j++) {
        if (!cand[j])
            continue;
        ct_gnode *b = &g->nodes[j];
        for (int i = 0; i < j; i++) {
            if (!cand[i] || h[i] != h[j])
                continue;
            ct_gnode *a = &g->nodes[i];
            if (!same_call(a, b))
                continue;
            bool clobbered = false;
            for (int k = 0; k < a->nin && !clobbered; k++)
                clobbered = a->in[k] >= 0 && written_in(g, g->values[a->in[k]].storage, i + 1, j);
            for (int k = 0; k < a->nlist && !clobbered; k++)
                clobbered = a->list[k] >= 0 && written_in(g, g->values[a->list[k]].storage, i + 1, j);
            if (clobbered)
                continue;
            bool outs_ok = true;
            for (int k = 0; k < a->nout; k++)
                outs_ok &= (a->out[k] < 0) == (b->out[k] < 0);
            if (!outs_ok)
                continue;
            for (int k = 0; k < b->nout; k++)
                if (b->out[k] >= 0)
                    replace_uses(g, j + 1, b->out[k], a->out[k]);
            b->dead = true;
            cand[j] = false;
            break;
        }
    }
    free(h);
    free(cand);
}

/* Note [Copies of dying values]
 * The autograd engine stores a fresh gradient as .grad itself when nothing else holds
 * it, and a copy otherwise (Note [Stealing the gradient] in src/autograd/engine.c). A
 * capture holds every tensor it saw, so it records copies that an eager step would not
 * make. In a training step's graph, clone(v) -> w runs as w = v when v is a value the
 * graph made, nothing reads v afterwards, no other live value or any input or constant
 * shares its storage, and w would have v's layout: no one can tell the copy from the
 * original. */
void ct_graph_drop_copies(ct_graph *g) {
    if (!g->no_autograd)
        return;
    ct_graph_analyse(g);
    for (int i = 0; i < g->nnodes; i++) {
        ct_gnode *n = &g->nodes[i];
        if (n->dead || n->op != CT_OP_clone || n->mode != CT_CALL_FUNCTIONAL || n->nin < 1 || n->in[0] < 0 ||
            n->nout != 1 || n->out[0] < 0)
            continue;
        const int v = n->in[0], w = n->out[0];
        const ct_gvalue *a = &g->values[v], *b = &g->values[w];
        if (a->kind != CT_GV_NODE || a->uses != 1 || a->dtype != b->dtype || a->ndim != b->ndim ||
            a->offset != b->offset || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) ||
            memcmp(a->strides, b->strides, sizeof(int64_t) * (size_t)a->ndim))
            continue;
        bool shared = false;
        for (int u = 0; u < g->nvalues && !shared; u++)
            if (u != v && g->values[u].storage == a->storage)
                shared = g->values[u].kind != CT_GV_NODE || g->values[u].last_use >= i ||
                         (g->values[u].node >= i && g->values[u].node != i);
        if (shared)
            continue;
        replace_uses(g, i + 1, w, v);
        n->dead = true;
        ct_graph_analyse(g);
    }
}

/* ------------------------------------------------------------ printing */

typedef struct pbuf {
    char *buf;
    size_t cap;
    int64_t len;
} pbuf;

static void __attribute__((format(printf, 2, 3))) put(pbuf *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = (size_t)p->len < p->cap ? p->cap - (size_t)p->len : 0;
    int n = vsnprintf(room ? p->buf + p->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        p->len += n;
}

static void put_meta(pbuf *p, const ct_gvalue *v) {
    put(p, "%s[", ct_dtype_name(v->dtype));
    for (int d = 0; d < v->ndim; d++)
        put(p, d ? ", %lld" : "%lld", (long long)v->shape[d]);
    put(p, "]");
    if (v->device.type != CT_DEVICE_CPU)
        put(p, " %s", v->device.type == CT_DEVICE_CUDA ? "cuda" : "meta");
}

int64_t ct_graph_print(const ct_graph *g, char *buf, size_t cap) {
    pbuf p = {buf, cap, 0};
    if (buf && cap)
        buf[0] = '\0';
    for (int v = 0; v < g->nvalues; v++) {
        const ct_gvalue *gv = &g->values[v];
        if (gv->kind == CT_GV_NODE)
            continue;
        if (gv->kind == CT_GV_INPUT)
            put(&p, "%%%d = input %d : ", v, gv->input);
        else
            put(&p, "%%%d = constant%s : ", v, gv->requires_grad ? " (requires_grad)" : "");
        put_meta(&p, gv);
        put(&p, "\n");
    }
    for (int i = 0; i < g->nnodes; i++) {
        const ct_gnode *n = &g->nodes[i];
        if (n->dead)
            continue;
        int first = 1;
        for (int k = 0; k < n->nout; k++)
            if (n->out[k] >= 0) {
                put(&p, first ? "%%%d" : ", %%%d", n->out[k]);
                first = 0;
            }
        if (n->host) {
            put(&p, "%shost %s(", first ? "" : " = ", n->host->name);
            for (int k = 0; k + 1 < n->nlist; k += 2)
                put(&p, "%s%%%d.grad = %%%d", k ? ", " : "", n->list[k], n->list[k + 1]);
            put(&p, ")");
            if (n->nout && n->out[0] >= 0) {
                put(&p, " : ");
                put_meta(&p, &g->values[n->out[0]]);
            }
            put(&p, "\n");
            continue;
        }
        put(&p, "%s%s(", first ? "" : " = ", ct_op_name(n->op));
        int sep = 0;
        for (int k = 0; k < n->nin; k++) {
            if (n->in[k] >= 0)
                put(&p, "%s%%%d", sep ? ", " : "", n->in[k]);
            else
                put(&p, "%sNone", sep ? ", " : "");
            sep = 1;
        }
        if (n->nlist) {
            put(&p, "%s[", sep ? ", " : "");
            for (int k = 0; k < n->nlist; k++)
                put(&p, n->list[k] >= 0 ? "%s%%%d" : "%sNone", k ? ", " : "", n->list[k]);
            put(&p, "]");
            sep = 1;
        }
        for (int k = 0; k < n->nints; k++, sep = 1)
            put(&p, "%s%lld", sep ? ", " : "", (long long)n->ints[k]);
        for (int k = 0; k < n->nscalars; k++, sep = 1) {
            if (n->s[k].type == CT_SCALAR_FLOAT)
                put(&p, "%s%.9g", sep ? ", " : "", n->s[k].v.f);
            else
                put(&p, "%s%lld", sep ? ", " : "", (long long)n->s[k].v.i);
        }
        if (n->dtype != CT_DTYPE_UNDEFINED)
            put(&p, "%sdtype=%s", sep ? ", " : "", ct_dtype_name(n->dtype));
        put(&p, ")");
        if (n->mode == CT_CALL_INPLACE)
            put(&p, " in-place into %%%d", n->target[0]);
        else if (n->mode == CT_CALL_OUT)
            put(&p, " out= %%%d", n->target[0]);
        for (int k = 0; k < n->nout; k++)
            if (n->out[k] >= 0) {
                put(&p, k ? ", " : " : ");
                put_meta(&p, &g->values[n->out[k]]);
            }
        if (n->group >= 0)
            put(&p, "  [fused %d]", n->group);
        put(&p, "\n");
    }
    for (int e = 0; e < g->nepi; e++)
        put(&p, "%%%d.grad = %%%d\n", g->epi[e][0], g->epi[e][1]);
    if (g->result >= 0)
        put(&p, "return %%%d\n", g->result);
    return p.len;
}

/* ------------------------------------------------------------ replay */

/* Runs node i with its kernel (through the dispatcher, with the functionality keys of
 * its capture) and stores its results in rt. */
/* Note [Host calls]: the gradients stored by then go to .grad, then the code runs. */
static ct_status run_host(ct_graph *g, const ct_gnode *n, ct_tensor **rt) {
    for (int k = 0; k + 1 < n->nlist; k += 2) {
        ct_status st = ct_tensor_set_grad(rt[n->list[k]], rt[n->list[k + 1]]);
        if (st != CT_OK)
            return st;
    }
    const ct_keyset inc0 = ct_tls_included(), exc0 = ct_tls_excluded();
    ct_tls_set_included(n->included);
    ct_tls_set_excluded(n->excluded | ct_keyset_of(CT_KEY_TRACE) |
                        (g->no_autograd ? ct_keyset_of(CT_KEY_AUTOGRAD) : 0));
    ct_tensor *r = NULL;
    ct_status st = n->host->fn(n->host->ctx, n->nout ? &r : NULL);
    ct_tls_set_included(inc0);
    ct_tls_set_excluded(exc0);
    if (st == CT_OK && n->nout && n->out[0] >= 0) {
        if (!r)
            return ct_error(CT_ERROR_RUNTIME, n->host->name, "the replayed call made no result");
        rt[n->out[0]] = ct_retain(r);
    }
    return st;
}

ct_status ct_graph_run_node(ct_graph *g, int i, ct_tensor **rt) {
    ct_gnode *n = &g->nodes[i];
    if (n->host)
        return run_host(g, n, rt);
    ct_call call;
    memset(&call, 0, sizeof call);
    call.op = n->op;
    call.mode = n->mode;
    call.nin = n->nin;
    for (int k = 0; k < n->nin; k++)
        call.in[k] = n->in[k] >= 0 ? rt[n->in[k]] : NULL;
    const ct_tensor **list = NULL;
    if (n->nlist) {
        list = malloc(sizeof *list * (size_t)n->nlist);
        if (!list)
            return ct_error(CT_ERROR_OUT_OF_MEMORY, "compiled_call", "out of memory");
        for (int k = 0; k < n->nlist; k++)
            list[k] = n->list[k] >= 0 ? rt[n->list[k]] : NULL;
        call.list = list;
        call.nlist = n->nlist;
    }
    call.nscalars = n->nscalars;
    memcpy(call.s, n->s, sizeof(ct_scalar) * (size_t)n->nscalars);
    call.nints = n->nints;
    memcpy(call.ints, n->ints, sizeof(int64_t) * (size_t)n->nints);
    call.dtype = n->dtype;
    call.device = n->device;
    call.has_device = n->has_device;
    if (n->mode != CT_CALL_FUNCTIONAL) {
        call.nout = n->nout;
        for (int k = 0; k < n->nout; k++)
            call.out[k] = n->target[k] >= 0 ? ct_retain(rt[n->target[k]]) : NULL;
    }
    const ct_keyset inc0 = ct_tls_included(), exc0 = ct_tls_excluded();
    const ct_keyset extra = ct_keyset_of(CT_KEY_TRACE) | (g->no_autograd ? ct_keyset_of(CT_KEY_AUTOGRAD) : 0);
    ct_tls_set_included(n->included);
    ct_tls_set_excluded(n->excluded | extra);
    ct_status st = ct_dispatch(&call);
    ct_tls_set_included(inc0);
    ct_tls_set_excluded(exc0);
    free(list);
    if (st != CT_OK)
        return st;
    for (int k = 0; k < n->nout && st == CT_OK; k++) {
        if (n->out[k] < 0)
            continue;
        if (!call.out[k])
            st = ct_error(CT_ERROR_RUNTIME, ct_op_name(n->op), "the replayed call made no result %d", k);
        else
            rt[n->out[k]] = ct_retain(call.out[k]);
    }
    ct_call_clear_outputs(&call);
    return st;
}

static void release_after(ct_graph *g, int i, ct_tensor **rt) {
    const ct_gnode *n = &g->nodes[i];
    for (int k = 0; k < n->nin; k++) {
        int v = n->in[k];
        if (v >= 0 && g->values[v].last_use == i && rt[v]) {
            ct_release(rt[v]);
            rt[v] = NULL;
        }
    }
    for (int k = 0; k < n->nlist; k++) {
        int v = n->list[k];
        if (v >= 0 && g->values[v].last_use == i && rt[v]) {
            ct_release(rt[v]);
            rt[v] = NULL;
        }
    }
    /* a result nobody reads */
    for (int k = 0; k < n->nout; k++) {
        int v = n->out[k];
        if (v >= 0 && g->values[v].last_use < 0 && rt[v]) {
            ct_release(rt[v]);
            rt[v] = NULL;
        }
    }
}

ct_tensor *ct_graph_run(ct_graph *g, ct_tensor *const *inputs, int ninputs, bool *ok) {
    *ok = false;
    if (ninputs != g->ninputs) {
        ct_error(CT_ERROR_VALUE, "compiled_call", "the graph takes %d inputs, got %d", g->ninputs, ninputs);
        return NULL;
    }
    ct_tensor **rt = calloc((size_t)g->nvalues + 1, sizeof *rt);
    if (!rt) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, "compiled_call", "out of memory");
        return NULL;
    }
    for (int v = 0; v < g->nvalues; v++) {
        const ct_gvalue *gv = &g->values[v];
        if (gv->kind == CT_GV_INPUT)
            rt[v] = ct_retain(inputs[gv->input]);
        else if (gv->kind == CT_GV_CONST)
            rt[v] = ct_retain(gv->constant);
    }
    ct_status st = CT_OK;
    ct_scope_begin();
    for (int i = 0; i < g->nnodes && st == CT_OK; i++) {
        ct_gnode *n = &g->nodes[i];
        if (n->dead)
            continue;
        if (n->group >= 0) {
            /* the group runs at its first node; its members release their inputs there */
            int first = ct_codegen_group_first(g, n->group);
            if (first == i)
                st = ct_codegen_run_group(g, n->group, rt);
        } else {
            st = ct_graph_run_node(g, i, rt);
        }
        if (st == CT_OK)
            release_after(g, i, rt);
    }
    ct_scope_end();
    ct_tensor *result = NULL;
    if (st == CT_OK) {
        for (int e = 0; e < g->nepi && st == CT_OK; e++)
            st = ct_tensor_set_grad(rt[g->epi[e][0]], rt[g->epi[e][1]]);
        if (st == CT_OK && g->result >= 0) {
            result = rt[g->result];
            rt[g->result] = NULL;
        }
        *ok = st == CT_OK;
    }
    for (int v = 0; v < g->nvalues; v++)
        ct_release(rt[v]);
    free(rt);
    if (!*ok) {
        ct_release(result);
        return NULL;
    }
    return result ? ct_scope_adopt(result) : NULL;
}
