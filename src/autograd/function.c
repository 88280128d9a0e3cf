/* The AUTOGRAD kernel: one generic kernel, registered from the op table for every op,
 * that runs the op below AUTOGRAD and records a node when a gradient will be needed.
 *
 * Note [In-place ops and history]
 * An in-place op rebases its tensor's history: the new node's edge for self points at
 * the node that made self before, and self's grad_fn becomes the new node. When the
 * formula needs self's old value, the kernel saves a copy taken before the op runs.
 * A saved output of an in-place op is recorded with the version the op leaves behind
 * (the dispatcher bumps the version after the kernels return).
 *
 * Note [In-place inputs that alias self]
 * An input of an in-place op may be self again, or a view sharing self's storage
 * (x.clamp_(x, hi)). Saving it as it is would make a cycle (self -> node -> self, or
 * through a view's base) and, worse, save the value the op overwrites. Such an input
 * is saved as a copy taken before the op (self's own copy when the input is self),
 * which breaks the cycle and gives the formula the value the forward used. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "autograd/node.h"
#include "dispatch/dispatch_internal.h"
#include "meta/op_info.h"

bool ct_op_is_differentiable(ct_op op) {
    if (op < 0 || op >= CT_OP_COUNT)
        return false;
    const ct_op_info *info = &ct_op_table[op];
    return !(info->flags & CT_OPF_NONDIFF) && info->family != CT_FAM_COMPARE && info->family != CT_FAM_COMPOSITE;
}

/* "addmm" -> "AddmmBackward0", "index_select" -> "IndexSelectBackward0". */
static void node_name(ct_op op, char *buf, size_t cap) {
    const char *s = ct_op_name(op);
    size_t n = 0;
    bool up = true;
    for (; *s && n + 1 < cap; s++) {
        if (*s == '_') {
            up = true;
            continue;
        }
        buf[n++] = up ? (char)toupper((unsigned char)*s) : *s;
        up = false;
    }
    buf[n] = '\0';
    snprintf(buf + n, cap - n, "Backward0");
}

static bool any_requires_grad(const ct_call *call) {
    for (int i = 0; i < call->nin; i++)
        if (call->in[i] && call->in[i]->requires_grad)
            return true;
    for (int i = 0; i < call->nlist; i++)
        if (call->list[i] && call->list[i]->requires_grad)
            return true;
    return false;
}

/* Input i of a call: the tensor arguments, then the tensor list's elements. */
static const ct_tensor *input_at(const ct_call *call, int i) {
    return i < call->nin ? call->in[i] : call->list[i - call->nin];
}

static ct_status run_below(ct_keyset ks, ct_call *call) {
    ct_keyset ex = ct_tls_excluded();
    ct_tls_set_excluded(ex | CT_KEYSET(CT_KEY_AUTOGRAD));
    ct_status st = ct_redispatch(ct_keyset_below(ks, CT_KEY_AUTOGRAD), call);
    ct_tls_set_excluded(ex);
    return st;
}

/* pre[i]: a copy of input i taken before an in-place op (Note [In-place ops and history],
 * Note [In-place inputs that alias self]), or NULL. */
static ct_status record(ct_call *call, const ct_derivative *d, ct_tensor *const *pre, ct_edge *edges) {
    bool inplace = call->mode == CT_CALL_INPLACE;
    int nin = call->nin + call->nlist;
    ct_node *n = ct_node_new(CT_NODE_OP, "", nin);
    if (!n)
        return ct_last_status();
    node_name(call->op, n->name, sizeof n->name);
    n->op = call->op;
    n->backward = d->fn;
    for (int i = 0; i < nin; i++) {
        const ct_tensor *t = input_at(call, i);
        n->edges[i] = edges[i];
        edges[i].fn = NULL; /* the node owns the reference now */
        if (t)
            ct_input_meta_set(&n->in_meta[i], t);
        else
            n->in_meta[i].dtype = CT_DTYPE_UNDEFINED;
    }
    n->nout = call->nout;
    n->nscalars = call->nscalars;
    n->nints = call->nints;
    memcpy(n->s, call->s, sizeof n->s);
    memcpy(n->ints, call->ints, sizeof n->ints);
    n->dtype = call->dtype;
    n->inplace = inplace;
    ct_status st = CT_OK;
    for (int i = 0; i < call->nin && st == CT_OK; i++) {
        if (!(d->saves & (1u << i)))
            continue;
        const ct_tensor *t = inplace && pre[i] ? pre[i] : call->in[i];
        if (t)
            st = ct_node_save(n, i, t, false, ct_tensor_version(t));
    }
    if (st == CT_OK && (d->saves & CT_SAVE_LIST) && call->nlist > 0 && ct_checkpoint_discards_saves()) {
        n->saved_freed = true; /* Note [Checkpoint] */
    } else if (st == CT_OK && (d->saves & CT_SAVE_LIST) && call->nlist > 0) {
        n->saved_list = ct_xcalloc(ct_op_name(call->op), (size_t)call->nlist, sizeof *n->saved_list);
        if (!n->saved_list)
            st = ct_last_status();
        for (int i = 0; st == CT_OK && i < call->nlist; i++)
            n->saved_list[i] = ct_retain((ct_tensor *)call->list[i]);
        n->nsaved_list = call->nlist;
    }
    if (st == CT_OK && (d->saves & CT_SAVE_OUT) && call->out[0])
        st = ct_node_save(n, CT_SAVED_OUT0, call->out[0], true, ct_tensor_version(call->out[0]) + (inplace ? 1 : 0));
    /* A floating output 1 (cross_entropy_fused's lse) gets this node as its history
     * below: saved as an output, without history, so that the node does not own it. */
    if (st == CT_OK && (d->saves & CT_SAVE_OUT1) && call->nout > 1 && call->out[1])
        st = ct_node_save(n, CT_SAVED_OUT1, call->out[1], ct_dtype_is_floating(call->out[1]->dtype),
                          ct_tensor_version(call->out[1]));
    if (st == CT_OK && (d->saves & CT_SAVE_OUT2) && call->nout > 2 && call->out[2])
        st = ct_node_save(n, CT_SAVED_OUT2, call->out[2], ct_dtype_is_floating(call->out[2]->dtype),
                          ct_tensor_version(call->out[2]));
    if (call->out[0])
        ct_input_meta_set(&n->out_meta, call->out[0]);
    for (int i = 0; i < call->nout && st == CT_OK; i++) {
        ct_tensor *o = call->out[i];
        bool is_input = false; /* contiguous() of a contiguous tensor returns it: no node */
        for (int j = 0; j < call->nin && call->mode == CT_CALL_FUNCTIONAL; j++)
            is_input = is_input || o == call->in[j];
        if (o && !is_input && ct_dtype_is_floating(o->dtype))
            st = ct_set_history(o, n, i);
    }
    if (st == CT_OK && inplace && call->out[0]->is_view && call->out[0]->base)
        st = ct_rebase_view(call->out[0], n);
    /* Note [Gradients that hold their tensor]: self (or its base) now holds n */
    if (st == CT_OK && inplace)
        st = ct_ag_break_grad_cycles(n, call->out[0]);
    if (st == CT_OK && inplace && call->out[0]->is_view && call->out[0]->base)
        st = ct_ag_break_grad_cycles(n, call->out[0]->base);
    ct_node_unref(n);
    return st;
}

static ct_status autograd_kernel(ct_keyset ks, ct_call *call, void *user_data) {
    (void)user_data;
    const char *opname = ct_op_name(call->op);
    bool grad_mode = ct_is_grad_enabled();
    bool rg = any_requires_grad(call);
    if (call->mode == CT_CALL_INPLACE && grad_mode) {
        ct_tensor *self = call->out[0];
        if (self->requires_grad && ct_tensor_is_leaf(self) && !self->is_view)
            return ct_error(CT_ERROR_RUNTIME, opname,
                            "a leaf Variable that requires grad is being used in an in-place operation.");
        /* As PyTorch's check_inplace: whether the base itself requires grad does not
         * matter (a view made to require grad with requires_grad_ is refused too;
         * rebasing it gave its base a CopySlices node that was never freed). */
        if (self->is_view && self->base && self->requires_grad && ct_tensor_is_leaf(self->base))
            return ct_error(CT_ERROR_RUNTIME, opname,
                            "a view of a leaf Variable that requires grad is being used in an in-place operation.");
        rg = rg || self->requires_grad;
    }
    if (call->mode == CT_CALL_OUT && grad_mode && (rg || (call->out[0] && call->out[0]->requires_grad)))
        return ct_error(CT_ERROR_RUNTIME, opname,
                        "%s(): functions with out=... arguments don't support automatic differentiation, but one "
                        "of the arguments requires grad.",
                        opname);
    bool need = grad_mode && rg && call->mode != CT_CALL_OUT;
    if (need && !ct_op_is_differentiable(call->op)) {
        if (call->mode == CT_CALL_INPLACE && call->out[0]->requires_grad)
            return ct_error(CT_ERROR_RUNTIME, opname,
                            "%s_ is not differentiable and cannot modify a tensor that requires grad in place",
                            opname);
        need = false; /* its outputs simply do not require grad */
    }
    if (!need)
        return run_below(ks, call);

    const ct_derivative *d = ct_derivative_of(call->op);
    CT_ASSERT(d && d->fn); /* every differentiable op has a formula (derivatives.c) */
    int nin = call->nin + call->nlist;
    ct_edge *edges = ct_xcalloc(opname, (size_t)(nin > 0 ? nin : 1), sizeof *edges);
    if (!edges)
        return ct_last_status();
    ct_tensor *pre[CT_CALL_MAX_IN] = {NULL};
    ct_status st = CT_OK;
    for (int i = 0; i < nin && st == CT_OK; i++)
        st = ct_edge_for(input_at(call, i), &edges[i]);
    if (st == CT_OK && call->mode == CT_CALL_INPLACE) {
        /* Recorded, so that double backward reaches the old history through them;
         * owned by the dispatcher's scope. */
        const ct_tensor *self = call->out[0];
        for (int i = 0; i < call->nin && st == CT_OK; i++) {
            const ct_tensor *t = call->in[i];
            if (!(d->saves & (1u << i)) || !t || (i > 0 && t->storage != self->storage))
                continue;
            pre[i] = t == self && pre[0] ? pre[0] : ct_clone(t);
            if (!pre[i])
                st = ct_last_status();
        }
    }
    if (st == CT_OK)
        st = run_below(ks, call);
    if (st == CT_OK)
        st = record(call, d, pre, edges);
    for (int i = 0; i < nin; i++)
        ct_node_unref(edges[i].fn);
    free(edges);
    return st;
}

void ct_autograd_register_kernels(void) {
    for (int op = 0; op < CT_OP_COUNT; op++)
        if (ct_op_table[op].family != CT_FAM_COMPOSITE)
            ct_dispatch_register_default(op, CT_KEY_AUTOGRAD, autograd_kernel, NULL);
}
