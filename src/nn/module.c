/* nn.Module in C: named parameters, buffers and children, train/eval mode, forward
 * functions (one tensor or several in and out) with hooks around them, iteration,
 * printing as PyTorch's repr, state_dict out and in. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/module_internal.h"

typedef struct named_tensor {
    char *name;
    ct_tensor *t; /* ct_retain'ed, or NULL for a registered None */
} named_tensor;

typedef struct named_child {
    char *name;
    ct_module *m; /* one of m's references */
} named_child;

typedef struct module_hook {
    int64_t id;
    ct_module_forward_pre_hook_fn pre; /* one of pre and post is set */
    ct_module_forward_hook_fn post;
    void *ud;
} module_hook;

struct ct_module {
    char *type;
    int refs, parents; /* references, and how many of them parents hold: Note [Shared modules] */
    ct_module_forward_fn forward;
    ct_module_forward_multi_fn forward_multi;
    ct_module_extra_repr_fn extra_repr;
    bool list_repr; /* ModuleList: runs of equal children print once */
    void *ctx;
    void (*free_ctx)(void *);
    bool training;
    named_tensor *params, *buffers;
    int nparams, nbuffers, cparams, cbuffers;
    named_child *children;
    int nchildren, cchildren;
    module_hook *hooks;
    int nhooks, chooks;
    /* dotted names handed out by ct_module_parameters (borrowed by the caller) */
    char **names;
    int64_t nnames;
};

/* Note [Shared modules]
 * nn.Module lets one submodule sit in two places (weight-shared layers); named_modules
 * and named_parameters then list it once, state_dict under both names. Here a module
 * counts its owners: the creator holds the first reference, ct_module_add_child hands
 * one to the parent, and ct_module_retain makes another for a second place. So
 * ct_module_free of a parent frees a shared child only with its last owner. The count
 * of parents catches the likely mistake, adding a submodule a second time without
 * ct_module_retain (its one reference would be freed twice). And a module tree is a
 * DAG: ct_module_add_child refuses a module that holds its new parent (a cycle would
 * make every walk, and the free, endless). Not atomic: a module is not shared between
 * threads while it changes. */

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *r = malloc(n);
    if (r)
        memcpy(r, s, n);
    return r;
}

static void free_names(ct_module *m) {
    for (int64_t i = 0; i < m->nnames; i++)
        free(m->names[i]);
    free(m->names);
    m->names = NULL;
    m->nnames = 0;
}

static ct_module *module_alloc(const char *type, void *ctx, void (*free_ctx)(void *)) {
    ct_module *m = calloc(1, sizeof *m);
    char *ty = m ? dup_str(type ? type : "Module") : NULL;
    if (!ty) {
        free(m);
        if (free_ctx)
            free_ctx(ctx);
        ct_error(CT_ERROR_OUT_OF_MEMORY, "Module", "out of memory");
        return NULL;
    }
    m->type = ty;
    m->refs = 1;
    m->ctx = ctx;
    m->free_ctx = free_ctx;
    m->training = true;
    return m;
}

ct_module *ct_module_new(const char *type, ct_module_forward_fn forward, void *ctx, void (*free_ctx)(void *)) {
    ct_module *m = module_alloc(type, ctx, free_ctx);
    if (m)
        m->forward = forward;
    return m;
}

ct_module *ct_module_new_multi(const char *type, ct_module_forward_multi_fn forward, void *ctx,
                               void (*free_ctx)(void *)) {
    ct_module *m = module_alloc(type, ctx, free_ctx);
    if (m)
        m->forward_multi = forward;
    return m;
}

ct_module *ct_module_retain(ct_module *m) {
    if (m)
        m->refs++;
    return m;
}

void ct_module_free(ct_module *m) {
    if (!m || --m->refs > 0)
        return;
    for (int i = 0; i < m->nparams; i++) {
        free(m->params[i].name);
        ct_release(m->params[i].t);
    }
    for (int i = 0; i < m->nbuffers; i++) {
        free(m->buffers[i].name);
        ct_release(m->buffers[i].t);
    }
    for (int i = 0; i < m->nchildren; i++) {
        free(m->children[i].name);
        m->children[i].m->parents--;
        ct_module_free(m->children[i].m);
    }
    free(m->params);
    free(m->buffers);
    free(m->children);
    free(m->hooks);
    free_names(m);
    if (m->free_ctx)
        m->free_ctx(m->ctx);
    free(m->type);
    free(m);
}

void *ct_module_ctx(const ct_module *m) { return m ? m->ctx : NULL; }
const char *ct_module_type(const ct_module *m) { return m ? m->type : NULL; }
bool ct_module_is_training(const ct_module *m) { return m && m->training; }

ct_module *ct_module_train(ct_module *m, bool training) {
    if (!m)
        return NULL;
    m->training = training;
    for (int i = 0; i < m->nchildren; i++)
        ct_module_train(m->children[i].m, training);
    return m;
}

/* ------------------------------------------------------------------ forward */

/* Note [Forward kinds and hooks]
 * A module has a one-tensor forward or a multi one, and either call reaches either
 * kind. ct_module_forward of a one-tensor module without hooks calls its function
 * directly, so the common case costs nothing. Every other call goes through
 * run_forward: with pre-hooks the inputs are copied into room for at least
 * CT_MODULE_IO_CAP tensors, which the hooks may rewrite; outputs are written into room
 * for at least CT_MODULE_IO_CAP too, so that a forward and its hooks never depend on
 * the caller's cap, and only then checked against that cap and copied out. Hooks run
 * from a copy of the list, so a hook may remove hooks (itself included) as it runs. */

static const char *forward_op(const ct_module *m, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.forward", m->type);
    return buf;
}

/* What a forward or hook handed back: a count within its room and no NULL entry. */
static ct_status check_tensors(const char *op, const char *who, const ct_tensor *const *t, int n, int cap,
                               const char *what) {
    if (n < 0 || n > cap)
        return ct_error(CT_ERROR_RUNTIME, op, "%s reported %d %ss, with room for %d", who, n, what, cap);
    for (int i = 0; i < n; i++)
        if (!t[i])
            return ct_error(CT_ERROR_RUNTIME, op, "%s left %s %d NULL", who, what, i);
    return CT_OK;
}

static ct_status status_or(const char *op, const char *who) {
    ct_status st = ct_last_status();
    return st != CT_OK ? st : ct_error(CT_ERROR_RUNTIME, op, "%s failed without setting an error", who);
}

/* The call itself, after the arguments were checked. first_only: ct_module_forward,
 * which wants the first output and drops the others. */
static ct_status run_forward(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int cap, int *nout,
                             bool first_only) {
    char op[96], who[64];
    forward_op(m, op, sizeof op);
    *nout = 0;
    if (!m->forward && !m->forward_multi)
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, m->type, "Module [%s] is missing the required \"forward\" function",
                        m->type);
    module_hook local_hooks[4], *hooks = local_hooks;
    int nh = m->nhooks;
    if (nh > 4 && !(hooks = ct_xmalloc(op, sizeof *hooks * (size_t)nh)))
        return CT_ERROR_OUT_OF_MEMORY;
    if (nh)
        memcpy(hooks, m->hooks, sizeof *hooks * (size_t)nh);
    const ct_tensor *ilocal[CT_MODULE_IO_CAP], **ibuf = NULL;
    ct_tensor *olocal[CT_MODULE_IO_CAP];
    int icap = nin > CT_MODULE_IO_CAP ? nin : CT_MODULE_IO_CAP, ocap = cap > CT_MODULE_IO_CAP ? cap : CT_MODULE_IO_CAP;
    ct_tensor **obuf = cap >= CT_MODULE_IO_CAP ? out : olocal;
    int ni = nin, no = 0;
    ct_status st = CT_OK;
    bool any_pre = false;
    for (int h = 0; h < nh; h++)
        any_pre |= hooks[h].pre != NULL;
    if (any_pre) {
        ibuf = icap > CT_MODULE_IO_CAP ? ct_xmalloc(op, sizeof *ibuf * (size_t)icap) : ilocal;
        if (!ibuf)
            st = CT_ERROR_OUT_OF_MEMORY;
        else if (nin)
            memcpy(ibuf, in, sizeof *ibuf * (size_t)nin);
        for (int h = 0; h < nh && !st; h++) {
            if (!hooks[h].pre)
                continue;
            snprintf(who, sizeof who, "forward pre-hook %lld", (long long)hooks[h].id);
            st = hooks[h].pre(m, ibuf, &ni, icap, hooks[h].ud);
            if (!st)
                st = check_tensors(op, who, ibuf, ni, icap, "input");
        }
        in = ibuf;
    }
    if (!st && m->forward) {
        if (ni != 1)
            st = ct_error(CT_ERROR_VALUE, op, "takes 1 input (a one-tensor forward), but %d were given", ni);
        else if (!(obuf[0] = m->forward(m, in[0])))
            st = status_or(op, "forward");
        no = 1;
    } else if (!st) {
        st = m->forward_multi(m, in, ni, obuf, ocap, &no);
        if (!st)
            st = check_tensors(op, "forward", (const ct_tensor *const *)obuf, no, ocap, "output");
    }
    for (int h = 0; h < nh && !st; h++) {
        if (!hooks[h].post)
            continue;
        snprintf(who, sizeof who, "forward hook %lld", (long long)hooks[h].id);
        st = hooks[h].post(m, in, ni, obuf, &no, ocap, hooks[h].ud);
        if (!st)
            st = check_tensors(op, who, (const ct_tensor *const *)obuf, no, ocap, "output");
    }
    if (!st && first_only && no == 0)
        st = ct_error(CT_ERROR_VALUE, op, "returned no outputs");
    if (!st && !first_only && no > cap)
        st = ct_error(CT_ERROR_VALUE, op, "returned %d output%s, but out has room for %d", no, no == 1 ? "" : "s", cap);
    if (!st) {
        if (first_only)
            no = 1;
        if (obuf != out)
            memcpy(out, obuf, sizeof *out * (size_t)no);
        *nout = no;
    }
    if (ibuf != ilocal)
        free(ibuf);
    if (hooks != local_hooks)
        free(hooks);
    return st;
}

/* Note [Module paths in errors]
 * A failure deep in a model should say where it happened: PyTorch's traceback shows
 * the forward of each module on the way, ctorch's error is one message. So each
 * forward that runs pushes a frame (on the C stack, linked from one thread-local
 * pointer), and when a forward fails with its inputs present, the innermost module
 * that failed puts its dotted path in the model and its type in front of the message:
 * "blocks.3.mlp.fc (Linear): linear: mat1 and mat2 shapes cannot be multiplied ...".
 * The path is the children's names from the outermost forward running on the thread
 * down to the failing module (a module run by a parent that does not hold it as a
 * child is named by its type in brackets). The modules around it leave the message as
 * it is; the mark that it was named clears when a forward succeeds or a new outermost
 * one starts. A NULL input is an earlier failure, reported as it was. */
typedef struct forward_frame {
    const ct_module *m;
    struct forward_frame *up;
} forward_frame;

static _Thread_local forward_frame *tl_forward;
static _Thread_local bool tl_forward_named;

static void forward_enter(forward_frame *f, const ct_module *m) {
    f->m = m;
    f->up = tl_forward;
    if (!f->up)
        tl_forward_named = false;
    tl_forward = f;
}

static const char *child_name(const ct_module *parent, const ct_module *m) {
    for (int i = 0; i < parent->nchildren; i++)
        if (parent->children[i].m == m)
            return parent->children[i].name;
    return NULL;
}

static void forward_leave(forward_frame *f, bool ok) {
    tl_forward = f->up;
    if (ok) {
        tl_forward_named = false;
        return;
    }
    if (tl_forward_named || ct_last_status() == CT_OK)
        return;
    tl_forward_named = true;
    const forward_frame *chain[64];
    int n = 0;
    for (const forward_frame *p = f; p && n < 64; p = p->up)
        chain[n++] = p;
    char path[512], msg[1024];
    size_t len = 0;
    path[0] = '\0';
    for (int i = n - 2; i >= 0 && len < sizeof path; i--) { /* the outermost module has no name */
        const char *name = child_name(chain[i + 1]->m, chain[i]->m);
        len += (size_t)snprintf(path + len, sizeof path - len, name ? "%s%s" : "%s[%s]", len ? "." : "",
                                name ? name : chain[i]->m->type);
    }
    char where[600];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    if (path[0])
        snprintf(where, sizeof where, "%s (%s)", path, f->m->type);
    else
        snprintf(where, sizeof where, "%s", f->m->type);
    ct_error(ct_last_status(), where, "%s", msg);
}

ct_tensor *ct_module_forward(ct_module *m, const ct_tensor *input) {
    if (!m) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "Module.forward", "module is NULL");
        return NULL;
    }
    CT_CHECK_ARG(m->type, input);
    forward_frame f;
    forward_enter(&f, m);
    ct_tensor *out;
    if (m->forward && !m->nhooks) {
        out = m->forward(m, input);
    } else {
        int n;
        if (run_forward(m, &input, 1, &out, 1, &n, true))
            out = NULL;
    }
    forward_leave(&f, out != NULL);
    return out;
}

ct_status ct_module_forward_multi(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int cap,
                                  int *nout) {
    if (nout)
        *nout = 0;
    if (!m || !nout || (nin > 0 && !in) || (cap > 0 && !out))
        return ct_error(CT_ERROR_NULL_ARGUMENT, "Module.forward",
                        "module, nout, in (when nin > 0) and out (when cap > 0) must not be NULL");
    char op[96];
    forward_op(m, op, sizeof op);
    if (nin < 0 || cap < 0)
        return ct_error(CT_ERROR_VALUE, op, "nin and cap must be non-negative, got %d and %d", nin, cap);
    for (int i = 0; i < nin; i++)
        if (!in[i]) /* a failed op's NULL: its error is the one to report */
            return ct_last_status() != CT_OK ? ct_last_status()
                                             : ct_error(CT_ERROR_NULL_ARGUMENT, op, "input %d is NULL", i);
    forward_frame f;
    forward_enter(&f, m);
    ct_status st = run_forward(m, in, nin, out, cap, nout, false);
    forward_leave(&f, st == CT_OK);
    return st;
}

/* ------------------------------------------------------------------ hooks */

static int64_t add_hook(const char *op, ct_module *m, ct_module_forward_pre_hook_fn pre, ct_module_forward_hook_fn post,
                        void *ud) {
    static atomic_llong last_id;
    if (!m || (!pre && !post)) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "module and hook must not be NULL");
        return -1;
    }
    if (m->nhooks == m->chooks) {
        int nc = m->chooks ? 2 * m->chooks : 4;
        module_hook *a = ct_xrealloc(op, m->hooks, sizeof *a * (size_t)nc);
        if (!a)
            return -1;
        m->hooks = a;
        m->chooks = nc;
    }
    int64_t id = (int64_t)atomic_fetch_add_explicit(&last_id, 1, memory_order_relaxed) + 1;
    m->hooks[m->nhooks++] = (module_hook){.id = id, .pre = pre, .post = post, .ud = ud};
    return id;
}

int64_t ct_module_register_forward_pre_hook(ct_module *m, ct_module_forward_pre_hook_fn fn, void *ud) {
    return add_hook("register_forward_pre_hook", m, fn, NULL, ud);
}

int64_t ct_module_register_forward_hook(ct_module *m, ct_module_forward_hook_fn fn, void *ud) {
    return add_hook("register_forward_hook", m, NULL, fn, ud);
}

ct_status ct_module_remove_hook(ct_module *m, int64_t id) {
    if (!m)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "remove_hook", "module is NULL");
    for (int i = 0; i < m->nhooks; i++)
        if (m->hooks[i].id == id) {
            memmove(&m->hooks[i], &m->hooks[i + 1], sizeof *m->hooks * (size_t)(m->nhooks - i - 1));
            m->nhooks--;
            return CT_OK;
        }
    return ct_error(CT_ERROR_VALUE, "remove_hook", "%s has no hook with id %lld", m->type, (long long)id);
}

/* ------------------------------------------------------------------ registration */

/* Whether s[0..len) is the whole of name. */
static bool part_is(const char *name, const char *s, size_t len) { return strncmp(name, s, len) == 0 && !name[len]; }

static named_tensor *find_tensor(named_tensor *arr, int n, const char *s, size_t len) {
    for (int i = 0; i < n; i++)
        if (part_is(arr[i].name, s, len))
            return &arr[i];
    return NULL;
}

static named_child *find_child(const ct_module *m, const char *s, size_t len) {
    for (int i = 0; i < m->nchildren; i++)
        if (part_is(m->children[i].name, s, len))
            return &m->children[i];
    return NULL;
}

static bool name_taken(const ct_module *m, const char *name) {
    size_t n = strlen(name);
    return find_tensor(m->params, m->nparams, name, n) || find_tensor(m->buffers, m->nbuffers, name, n) ||
           find_child(m, name, n);
}

/* A name is one or more non-empty parts joined by dots. */
static ct_status check_name(const char *op, const ct_module *m, const char *name) {
    if (!m || !name)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "module and name must not be NULL");
    if (!*name)
        return ct_error(CT_ERROR_VALUE, op, "name can't be empty string \"\"");
    for (const char *p = name;; p++) {
        const char *dot = strchr(p, '.');
        if (dot == p || !*p)
            return ct_error(CT_ERROR_VALUE, op, "name \"%s\" has an empty part: dotted names are \"a.b.c\"", name);
        if (!dot)
            return CT_OK;
        p = dot;
    }
}

/* Appends child under name (copied); takes over the caller's reference to child, which
 * is dropped on failure. */
static ct_status push_child(const char *op, ct_module *m, const char *name, size_t len, ct_module *child) {
    if (m->nchildren == m->cchildren) {
        int nc = m->cchildren ? 2 * m->cchildren : 4;
        named_child *a = realloc(m->children, sizeof *a * (size_t)nc);
        if (!a) {
            ct_module_free(child);
            return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
        }
        m->children = a;
        m->cchildren = nc;
    }
    char *nm = malloc(len + 1);
    if (!nm) {
        ct_module_free(child);
        return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
    }
    memcpy(nm, name, len);
    nm[len] = 0;
    m->children[m->nchildren++] = (named_child){nm, child};
    child->parents++;
    return CT_OK;
}

/* Follows a dotted name through the submodules that exist: returns the deepest one
 * reached, and in *rest what is left of the name from there (its last part alone when
 * every module on the way exists). */
static ct_module *deepest(const ct_module *m, const char *name, const char **rest) {
    const char *p = name;
    for (const char *dot; (dot = strchr(p, '.')) != NULL; p = dot + 1) {
        named_child *c = find_child(m, p, (size_t)(dot - p));
        if (!c)
            break;
        m = c->m;
    }
    *rest = p;
    return (ct_module *)m;
}

static ct_status push_tensor(const char *op, named_tensor **arr, int *n, int *cap, const char *name, ct_tensor *t) {
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 4;
        named_tensor *a = realloc(*arr, sizeof **arr * (size_t)nc);
        if (!a)
            return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
        *arr = a;
        *cap = nc;
    }
    char *nm = dup_str(name);
    if (!nm)
        return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
    (*arr)[*n].name = nm;
    (*arr)[*n].t = t ? ct_retain(t) : NULL;
    (*n)++;
    return CT_OK;
}

/* Whether m is part of the tree under root (root included). */
static bool holds(const ct_module *root, const ct_module *m) {
    if (root == m)
        return true;
    for (int i = 0; i < root->nchildren; i++)
        if (holds(root->children[i].m, m))
            return true;
    return false;
}

/* The submodule that gets a new entry called name (a child, when adding is not NULL),
 * with its last part in *leaf. The submodules the name passes through that do not
 * exist yet are made, as empty "Module" containers, but only once every check has
 * passed: the name is free, no part of it is a parameter or buffer, and adding does
 * not hold the module it goes into (or any above it, which would make a cycle). */
static ct_module *entry_owner(const char *op, ct_module *m, const char *name, const ct_module *adding,
                              const char **leaf) {
    if (check_name(op, m, name))
        return NULL;
    const char *rest;
    ct_module *at = deepest(m, name, &rest);
    const char *dot = strchr(rest, '.');
    size_t len = dot ? (size_t)(dot - rest) : strlen(rest);
    if (!dot && name_taken(at, rest)) {
        ct_error(CT_ERROR_VALUE, op, "attribute '%s' already exists", name);
        return NULL;
    }
    if (dot && (find_tensor(at->params, at->nparams, rest, len) || find_tensor(at->buffers, at->nbuffers, rest, len))) {
        ct_error(CT_ERROR_VALUE, op, "cannot register '%s': '%.*s' of %s is a parameter or buffer, not a module", name,
                 (int)len, rest, at->type);
        return NULL;
    }
    if (adding && holds(adding, at)) {
        ct_error(CT_ERROR_VALUE, op, "adding '%s' would make %s a submodule of itself", name, at->type);
        return NULL;
    }
    for (; dot; rest = dot + 1, dot = strchr(rest, '.')) {
        ct_module *sub = ct_module_new("Module", NULL, NULL, NULL);
        if (!sub || push_child(op, at, rest, (size_t)(dot - rest), sub))
            return NULL;
        at = sub;
    }
    *leaf = rest;
    return at;
}

ct_status ct_module_register_parameter(ct_module *m, const char *name, ct_tensor *t) {
    const char *op = "register_parameter", *leaf;
    if (t && !ct_dtype_is_floating(ct_tensor_dtype(t)))
        return ct_error(CT_ERROR_TYPE, op, "Only Tensors of floating point dtype can require gradients, got %s",
                        ct_dtype_name(ct_tensor_dtype(t)));
    ct_module *owner = entry_owner(op, m, name, NULL, &leaf);
    if (!owner)
        return ct_last_status();
    if (t)
        ct_tensor_set_requires_grad(t, true);
    return push_tensor(op, &owner->params, &owner->nparams, &owner->cparams, leaf, t);
}

ct_status ct_module_register_buffer(ct_module *m, const char *name, ct_tensor *t) {
    const char *op = "register_buffer", *leaf;
    ct_module *owner = entry_owner(op, m, name, NULL, &leaf);
    return owner ? push_tensor(op, &owner->buffers, &owner->nbuffers, &owner->cbuffers, leaf, t) : ct_last_status();
}

ct_status ct_module_add_child(ct_module *m, const char *name, ct_module *child) {
    const char *op = "add_module", *leaf;
    if (!child) {
        /* a failed constructor already set the error */
        return ct_last_status() != CT_OK ? ct_last_status() : ct_error(CT_ERROR_NULL_ARGUMENT, op, "child is NULL");
    }
    if (child->parents >= child->refs) /* not the caller's reference to give: leave it be */
        return ct_error(CT_ERROR_VALUE, op,
                        "the %s is already a submodule; ct_module_retain it first to add it in a second place",
                        child->type);
    ct_module *owner = entry_owner(op, m, name, child, &leaf);
    if (!owner) {
        ct_module_free(child);
        return ct_last_status();
    }
    return push_child(op, owner, leaf, strlen(leaf), child);
}

ct_status ct_module_append(ct_module *m, ct_module *child) {
    char name[16];
    snprintf(name, sizeof name, "%d", m ? m->nchildren : 0);
    if (!m && child) {
        ct_module_free(child);
        return ct_error(CT_ERROR_NULL_ARGUMENT, "append", "module is NULL");
    }
    return ct_module_add_child(m, name, child);
}

/* A dotted name's entry: the module holding its last part (NULL when a module on the
 * way is missing) and that part. */
static ct_module *lookup(const ct_module *m, const char *name, const char **leaf) {
    ct_module *at = m && name ? deepest(m, name, leaf) : NULL;
    return at && !strchr(*leaf, '.') ? at : NULL;
}

ct_tensor *ct_module_param(const ct_module *m, const char *name) {
    const char *leaf;
    ct_module *o = lookup(m, name, &leaf);
    named_tensor *e = o ? find_tensor(o->params, o->nparams, leaf, strlen(leaf)) : NULL;
    return e ? e->t : NULL;
}

ct_tensor *ct_module_buffer(const ct_module *m, const char *name) {
    const char *leaf;
    ct_module *o = lookup(m, name, &leaf);
    named_tensor *e = o ? find_tensor(o->buffers, o->nbuffers, leaf, strlen(leaf)) : NULL;
    return e ? e->t : NULL;
}

ct_module *ct_module_child(const ct_module *m, const char *name) {
    const char *leaf;
    ct_module *o = lookup(m, name, &leaf);
    named_child *c = o ? find_child(o, leaf, strlen(leaf)) : NULL;
    return c ? c->m : NULL;
}

ct_status ct_module_set_param(ct_module *m, const char *name, ct_tensor *t) {
    if (!m || !name || !t)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "set_param", "module, name and tensor must not be NULL");
    const char *leaf;
    ct_module *o = lookup(m, name, &leaf);
    named_tensor *e = o ? find_tensor(o->params, o->nparams, leaf, strlen(leaf)) : NULL;
    if (!e)
        return ct_error(CT_ERROR_VALUE, "set_param", "%s has no parameter '%s'", m->type, name);
    ct_retain(t);
    ct_release(e->t);
    e->t = t;
    ct_tensor_set_requires_grad(t, true);
    return CT_OK;
}

ct_status ct_module_set_extra_repr(ct_module *m, ct_module_extra_repr_fn fn) {
    if (!m)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "set_extra_repr", "module is NULL");
    m->extra_repr = fn;
    return CT_OK;
}

void ct_nn_module_set_list_repr(ct_module *m) { m->list_repr = true; }

/* ------------------------------------------------------------------ iteration */

int ct_module_num_children(const ct_module *m) {
    if (!m) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "num_children", "module is NULL");
        return -1;
    }
    return m->nchildren;
}

ct_module *ct_module_child_at(const ct_module *m, int i, const char **name) {
    if (!m) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "child_at", "module is NULL");
        return NULL;
    }
    int k = i < 0 ? i + m->nchildren : i; /* -1 is the last, as ModuleList's [-1] */
    if (k < 0 || k >= m->nchildren) {
        ct_error(CT_ERROR_INDEX, "child_at", "index %d is out of range for %s with %d child%s", i, m->type,
                 m->nchildren, m->nchildren == 1 ? "" : "ren");
        return NULL;
    }
    if (name)
        *name = m->children[k].name;
    return m->children[k].m;
}

/* The dotted name of the entry being visited: prefix[0..len) grows and shrinks with the
 * walk, so names of any length work. */
typedef struct namebuf {
    char *s;
    size_t cap;
} namebuf;

static bool nb_init(namebuf *b) {
    b->cap = 128;
    b->s = malloc(b->cap);
    if (!b->s) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, "Module", "out of memory");
        return false;
    }
    b->s[0] = 0;
    return true;
}

/* Writes "<prefix>.<part>" (just part when plen is 0) after the first plen bytes and
 * its length to *len; false when memory runs out. */
static bool nb_join(namebuf *b, size_t plen, const char *part, size_t *len) {
    size_t n = strlen(part), need = plen + 1 + n + 1;
    if (need > b->cap) {
        size_t nc = 2 * b->cap;
        while (nc < need)
            nc *= 2;
        char *s = realloc(b->s, nc);
        if (!s) {
            ct_error(CT_ERROR_OUT_OF_MEMORY, "Module", "out of memory");
            return false;
        }
        b->s = s;
        b->cap = nc;
    }
    if (plen)
        b->s[plen++] = '.';
    memcpy(b->s + plen, part, n + 1);
    *len = plen + n;
    return true;
}

/* The objects a walk has met, to list each once (PyTorch's memo sets). */
typedef struct memo {
    const void **p;
    int64_t n, cap;
} memo;

/* 1 when p is new (now recorded), 0 when met before, -1 when memory runs out. */
static int memo_add(memo *s, const void *p) {
    for (int64_t i = 0; i < s->n; i++)
        if (s->p[i] == p)
            return 0;
    if (s->n == s->cap) {
        int64_t nc = s->cap ? 2 * s->cap : 32;
        const void **a = realloc(s->p, sizeof *a * (size_t)nc);
        if (!a) {
            ct_error(CT_ERROR_OUT_OF_MEMORY, "Module", "out of memory");
            return -1;
        }
        s->p = a;
        s->cap = nc;
    }
    s->p[s->n++] = p;
    return 1;
}

/* Visits every (dotted name, tensor) pair in state_dict order: parameters then buffers
 * of a module, then its children, shared ones under each name. 0 to go on. */
typedef int (*visit_fn)(const char *name, ct_tensor *t, bool is_param, void *ud);

static int walk_rec(const ct_module *m, namebuf *nb, size_t plen, bool params, bool buffers, visit_fn fn, void *ud) {
    size_t len = 0;
    for (int pass = 0; pass < 2; pass++) {
        if ((pass == 0 && !params) || (pass == 1 && !buffers))
            continue;
        named_tensor *arr = pass == 0 ? m->params : m->buffers;
        int n = pass == 0 ? m->nparams : m->nbuffers;
        for (int i = 0; i < n; i++) {
            if (!arr[i].t)
                continue;
            if (!nb_join(nb, plen, arr[i].name, &len))
                return CT_ERROR_OUT_OF_MEMORY;
            int rc = fn(nb->s, arr[i].t, pass == 0, ud);
            if (rc)
                return rc;
        }
    }
    for (int i = 0; i < m->nchildren; i++) {
        if (!nb_join(nb, plen, m->children[i].name, &len))
            return CT_ERROR_OUT_OF_MEMORY;
        int rc = walk_rec(m->children[i].m, nb, len, params, buffers, fn, ud);
        if (rc)
            return rc;
    }
    return 0;
}

static int walk(const ct_module *m, bool params, bool buffers, visit_fn fn, void *ud) {
    namebuf nb;
    if (!nb_init(&nb))
        return CT_ERROR_OUT_OF_MEMORY;
    int rc = walk_rec(m, &nb, 0, params, buffers, fn, ud);
    free(nb.s);
    return rc;
}

static int modules_rec(ct_module *m, namebuf *nb, size_t plen, memo *seen, ct_module_visit_fn fn, void *ud) {
    int r = memo_add(seen, m);
    if (r <= 0)
        return r < 0 ? CT_ERROR_OUT_OF_MEMORY : 0;
    nb->s[plen] = 0;
    int rc = fn(nb->s, m, ud);
    for (int i = 0; i < m->nchildren && !rc; i++) {
        size_t len = 0;
        rc = nb_join(nb, plen, m->children[i].name, &len) ? modules_rec(m->children[i].m, nb, len, seen, fn, ud)
                                                          : CT_ERROR_OUT_OF_MEMORY;
    }
    return rc;
}

int ct_module_named_modules(ct_module *m, ct_module_visit_fn fn, void *ud) {
    if (!m || !fn)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "named_modules", "module and function must not be NULL");
    namebuf nb;
    if (!nb_init(&nb))
        return CT_ERROR_OUT_OF_MEMORY;
    memo seen = {0};
    int rc = modules_rec(m, &nb, 0, &seen, fn, ud);
    free(seen.p);
    free(nb.s);
    return rc;
}

/* named_parameters / named_buffers: _named_members over named_modules. */
typedef struct members {
    bool params;
    memo seen; /* tensors */
    namebuf nb;
    ct_module_tensor_visit_fn fn;
    void *ud;
} members;

static int visit_members(const char *name, ct_module *m, void *ud) {
    members *c = ud;
    named_tensor *arr = c->params ? m->params : m->buffers;
    int n = c->params ? m->nparams : m->nbuffers;
    size_t plen = 0, len = 0;
    if (*name && !nb_join(&c->nb, 0, name, &plen))
        return CT_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < n; i++) {
        int r = arr[i].t ? memo_add(&c->seen, arr[i].t) : 0;
        if (r < 0 || (r && !nb_join(&c->nb, plen, arr[i].name, &len)))
            return CT_ERROR_OUT_OF_MEMORY;
        int rc = r ? c->fn(c->nb.s, arr[i].t, c->ud) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

static int named_members(const char *op, const ct_module *m, bool params, ct_module_tensor_visit_fn fn, void *ud) {
    if (!m || !fn)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "module and function must not be NULL");
    members c = {.params = params, .fn = fn, .ud = ud};
    if (!nb_init(&c.nb))
        return CT_ERROR_OUT_OF_MEMORY;
    int rc = ct_module_named_modules((ct_module *)m, visit_members, &c);
    free(c.seen.p);
    free(c.nb.s);
    return rc;
}

int ct_module_named_parameters(const ct_module *m, ct_module_tensor_visit_fn fn, void *ud) {
    return named_members("named_parameters", m, true, fn, ud);
}

int ct_module_named_buffers(const ct_module *m, ct_module_tensor_visit_fn fn, void *ud) {
    return named_members("named_buffers", m, false, fn, ud);
}

static int apply_rec(ct_module *m, ct_module_apply_fn fn, void *ud) {
    for (int i = 0; i < m->nchildren; i++) {
        bool again = false; /* children() lists a module added twice under m once */
        for (int j = 0; j < i && !again; j++)
            again = m->children[j].m == m->children[i].m;
        int rc = again ? 0 : apply_rec(m->children[i].m, fn, ud);
        if (rc)
            return rc;
    }
    return fn(m, ud);
}

int ct_module_apply(ct_module *m, ct_module_apply_fn fn, void *ud) {
    if (!m || !fn)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "apply", "module and function must not be NULL");
    return apply_rec(m, fn, ud);
}

typedef struct collect {
    ct_tensor **params;
    const char **names;
    int64_t cap, count;
    char **owned; /* the names handed out, which m keeps */
} collect;

static int collect_param(const char *name, ct_tensor *t, void *ud) {
    collect *c = ud;
    if (c->count < c->cap) {
        if (c->params)
            c->params[c->count] = t;
        if (c->names && !(c->names[c->count] = c->owned[c->count] = dup_str(name)))
            return ct_error(CT_ERROR_OUT_OF_MEMORY, "parameters", "out of memory");
    }
    c->count++;
    return 0;
}

int64_t ct_module_parameters(const ct_module *m, ct_tensor **params, const char **names, int64_t cap) {
    if (!m) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "parameters", "module is NULL");
        return -1;
    }
    collect c = {params, cap > 0 ? names : NULL, cap > 0 ? cap : 0, 0, NULL};
    int64_t room = 0; /* names handed out: at most cap, and at most all of them */
    if (c.names) {
        collect count = {0};
        if (ct_module_named_parameters(m, collect_param, &count))
            return -1;
        room = count.count < cap ? count.count : cap;
        if (!(c.owned = ct_xcalloc("parameters", (size_t)(room ? room : 1), sizeof *c.owned)))
            return -1;
    }
    int rc = ct_module_named_parameters(m, collect_param, &c);
    if (c.names && !rc) {
        /* only a call that hands out names replaces them: counting calls leave the
         * caller's borrowed names valid */
        ct_module *mm = (ct_module *)m; /* the name cache is not part of the module's state */
        free_names(mm);
        mm->names = c.owned;
        mm->nnames = room;
    } else if (c.owned) {
        for (int64_t i = 0; i < room; i++)
            free(c.owned[i]);
        free(c.owned);
    }
    return rc ? -1 : c.count;
}

static int add_numel(const char *name, ct_tensor *t, void *ud) {
    (void)name;
    *(int64_t *)ud += ct_tensor_numel(t);
    return 0;
}

int64_t ct_module_num_parameters(const ct_module *m) {
    int64_t total = 0;
    if (!m) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "parameters", "module is NULL");
        return -1;
    }
    return ct_module_named_parameters(m, add_numel, &total) ? -1 : total;
}

/* ------------------------------------------------------------------ printing */

int ct_nn_float_repr(double f, char *buf, size_t cap) {
    if (f != f)
        return snprintf(buf, cap, "nan");
    if (f == 1.0 / 0.0 || f == -1.0 / 0.0)
        return snprintf(buf, cap, f > 0 ? "inf" : "-inf");
    if (f == 0)
        return snprintf(buf, cap, "%s", 1 / f < 0 ? "-0.0" : "0.0");
    /* the shortest digits that read back as f */
    char e[40];
    for (int prec = 0; prec <= 16; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, f);
        if (strtod(e, NULL) == f)
            break;
    }
    char digits[24];
    int nd = 0;
    const char *p = e + (f < 0);
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    int exp = atoi(p + 1), decpt = exp + 1; /* |f| = 0.<digits> x 10^decpt */
    /* Python's repr: positional for 1e-4 <= |f| < 1e16, else an exponent of at least
     * two digits ("1e-05", "1.5e+16") */
    char out[64];
    size_t o = 0;
    if (f < 0)
        out[o++] = '-';
    if (decpt <= -4 || decpt > 16) {
        out[o++] = digits[0];
        if (nd > 1)
            out[o++] = '.';
        memcpy(out + o, digits + 1, (size_t)(nd - 1));
        o += (size_t)(nd - 1);
        o += (size_t)snprintf(out + o, sizeof out - o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (decpt <= 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -decpt; i++)
            out[o++] = '0';
        memcpy(out + o, digits, (size_t)nd);
        o += (size_t)nd;
    } else {
        for (int i = 0; i < decpt || i < nd; i++) {
            if (i == decpt)
                out[o++] = '.';
            out[o++] = i < nd ? digits[i] : '0';
        }
        if (decpt >= nd) {
            out[o++] = '.';
            out[o++] = '0';
        }
    }
    out[o] = 0;
    return snprintf(buf, cap, "%s", out);
}

/* A growing string; oom once an append failed (the error is set) or a part failed. */
typedef struct strbuf {
    char *s;
    size_t len, cap;
    bool oom;
} strbuf;

static void sb_putn(strbuf *b, const char *s, size_t n) {
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? 2 * b->cap : 256;
        while (nc < b->len + n + 1)
            nc *= 2;
        char *a = ct_xrealloc("to_string", b->s, nc);
        if (!a) {
            b->oom = true;
            return;
        }
        b->s = a;
        b->cap = nc;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

static void sb_puts(strbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

/* s with two spaces after every newline: PyTorch's _addindent(s, 2). */
static void sb_put_indented(strbuf *b, const char *s) {
    for (const char *nl; (nl = strchr(s, '\n')) != NULL; s = nl + 1) {
        sb_putn(b, s, (size_t)(nl - s));
        sb_puts(b, "\n  ");
    }
    sb_puts(b, s);
}

/* m's extra_repr text (malloc'd; "" without one), or NULL with an error. */
static char *extra_repr_text(const ct_module *m) {
    char small[256];
    int n = m->extra_repr ? m->extra_repr(m, small, sizeof small) : 0;
    if (n < 0) {
        status_or("extra_repr", "extra_repr");
        return NULL;
    }
    if (!m->extra_repr)
        small[0] = 0;
    char *s = ct_xmalloc("extra_repr", (size_t)n + 1);
    if (s && (size_t)n < sizeof small)
        memcpy(s, small, (size_t)n + 1);
    else if (s && m->extra_repr(m, s, (size_t)n + 1) != n) {
        free(s);
        ct_error(CT_ERROR_RUNTIME, "extra_repr", "the extra_repr of %s changed its length between calls", m->type);
        return NULL;
    }
    return s;
}

static char *module_repr(const ct_module *m);

/* ModuleList's __repr__: runs of children with the same text print once, as
 * "(0-11): 12 x Block(...)". */
static void list_repr(strbuf *b, const ct_module *m) {
    char **reprs = ct_xcalloc("to_string", (size_t)(m->nchildren ? m->nchildren : 1), sizeof *reprs);
    b->oom |= !reprs;
    for (int i = 0; i < m->nchildren && !b->oom; i++)
        b->oom |= !(reprs[i] = module_repr(m->children[i].m));
    for (int i = 0; i < m->nchildren && !b->oom;) {
        int j = i;
        while (j + 1 < m->nchildren && !strcmp(reprs[j + 1], reprs[i]))
            j++;
        char head[64];
        if (j == i)
            snprintf(head, sizeof head, "\n  (%d): ", i);
        else
            snprintf(head, sizeof head, "\n  (%d-%d): %d x ", i, j, j - i + 1);
        sb_puts(b, head);
        sb_put_indented(b, reprs[i]);
        i = j + 1;
    }
    if (m->nchildren)
        sb_puts(b, "\n");
    for (int i = 0; reprs && i < m->nchildren; i++)
        free(reprs[i]);
    free(reprs);
}

/* nn.Module.__repr__: a malloc'd string, or NULL with the error set. */
static char *module_repr(const ct_module *m) {
    strbuf b = {0};
    sb_puts(&b, m->type);
    sb_puts(&b, "(");
    if (m->list_repr) {
        list_repr(&b, m);
    } else {
        char *extra = extra_repr_text(m);
        b.oom |= !extra;
        if (extra && *extra && !strchr(extra, '\n') && !m->nchildren) {
            sb_puts(&b, extra); /* the one-liner of most built-in modules */
        } else if (extra && (*extra || m->nchildren)) {
            if (*extra) {
                sb_puts(&b, "\n  ");
                sb_put_indented(&b, extra);
            }
            for (int i = 0; i < m->nchildren && !b.oom; i++) {
                char *c = module_repr(m->children[i].m);
                b.oom |= !c;
                sb_puts(&b, "\n  (");
                sb_puts(&b, m->children[i].name);
                sb_puts(&b, "): ");
                if (c)
                    sb_put_indented(&b, c);
                free(c);
            }
            sb_puts(&b, "\n");
        }
        free(extra);
    }
    sb_puts(&b, ")");
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

char *ct_module_to_string(const ct_module *m) {
    if (!m) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "to_string", "module is NULL");
        return NULL;
    }
    return module_repr(m);
}

/* ------------------------------------------------------------------ state_dict */

static int put_state(const char *name, ct_tensor *t, bool is_param, void *ud) {
    (void)is_param;
    ct_value *dict = ud;
    ct_scope_begin();
    ct_tensor *d = ct_alias(t); /* detached: a state dict holds data, not graph history */
    bool ok = d && ct_tensor_set_requires_grad(d, false) && ct_value_set(dict, name, ct_value_new_tensor(d)) == CT_OK;
    ct_scope_end();
    return ok ? 0 : ct_last_status();
}

ct_value *ct_module_state_dict(const ct_module *m) {
    if (!m) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "state_dict", "module is NULL");
        return NULL;
    }
    ct_value *dict = ct_value_new_dict();
    if (dict && walk(m, true, true, put_state, dict)) {
        ct_value_free(dict);
        return NULL;
    }
    return dict;
}

/* Note [load_state_dict errors]
 * As PyTorch, every problem is found before any is reported: missing keys, then
 * unexpected keys (both only when strict), then size mismatches, in one message. Unlike
 * PyTorch, nothing is copied when there is an error, so a failed load leaves the
 * module as it was. A safetensors file's metadata, which ct_load returns as a
 * "__metadata__" dict of strings beside the tensors, is not a key (it cannot name a
 * tensor: the format reserves it), so it is neither loaded nor unexpected. */
typedef struct load_ctx {
    const ct_value *sd;
    char msg[1024];
    size_t len;
    int64_t missing, mismatched;
    bool *seen; /* per state-dict entry: matched a module key */
    ct_value *missing_keys; /* NULL unless asked for */
} load_ctx;

static void appendf(load_ctx *c, const char *fmt, const char *a, const char *b, const char *d) {
    if (c->len >= sizeof c->msg - 1)
        return;
    int k = snprintf(c->msg + c->len, sizeof c->msg - c->len, fmt, a, b, d);
    if (k > 0)
        c->len += (size_t)k < sizeof c->msg - c->len ? (size_t)k : sizeof c->msg - c->len - 1;
}

static int64_t sd_index(const ct_value *sd, const char *name) {
    int64_t n = ct_value_len(sd);
    for (int64_t i = 0; i < n; i++) {
        const char *k = ct_value_str(ct_value_key_at(sd, i), NULL);
        if (k && !strcmp(k, name))
            return i;
    }
    return -1;
}

/* The i-th key of a state dict as text (an int key printed into buf). */
static const char *key_text(const ct_value *sd, int64_t i, char *buf, size_t cap) {
    const ct_value *k = ct_value_key_at(sd, i);
    if (ct_value_kind(k) == CT_VALUE_STRING)
        return ct_value_str(k, NULL);
    snprintf(buf, cap, "%lld", (long long)ct_value_int(k));
    return buf;
}

/* A "__metadata__" entry that maps strings to strings: safetensors metadata. */
static bool is_file_metadata(const ct_value *sd, int64_t i) {
    const char *k = ct_value_str(ct_value_key_at(sd, i), NULL);
    const ct_value *v = ct_value_at(sd, i);
    if (!k || strcmp(k, "__metadata__") || ct_value_kind(v) != CT_VALUE_DICT)
        return false;
    for (int64_t j = 0; j < ct_value_len(v); j++)
        if (ct_value_kind(ct_value_key_at(v, j)) != CT_VALUE_STRING ||
            ct_value_kind(ct_value_at(v, j)) != CT_VALUE_STRING)
            return false;
    return true;
}

static const char *size_str(const ct_tensor *t, char *buf, size_t cap) {
    char s[96];
    ct_shape_str(ct_tensor_shape(t), ct_tensor_dim(t), s, sizeof s);
    snprintf(buf, cap, "torch.Size(%s)", s);
    return buf;
}

static bool same_shape(const ct_tensor *a, const ct_tensor *b) {
    bool same = ct_tensor_dim(a) == ct_tensor_dim(b);
    for (int d = 0; same && d < ct_tensor_dim(a); d++)
        same = ct_tensor_size(a, d) == ct_tensor_size(b, d);
    return same;
}

static int check_key(const char *name, ct_tensor *t, bool is_param, void *ud) {
    (void)is_param;
    load_ctx *c = ud;
    int64_t i = sd_index(c->sd, name);
    if (i < 0) {
        c->missing++;
        if (c->missing_keys && ct_value_append(c->missing_keys, ct_value_new_str(name)))
            return ct_last_status();
        return 0;
    }
    c->seen[i] = true;
    ct_tensor *src = ct_value_tensor(ct_value_at(c->sd, i));
    if (!src || !same_shape(src, t))
        c->mismatched++;
    return 0;
}

static int list_missing(const char *name, ct_tensor *t, bool is_param, void *ud) {
    (void)t, (void)is_param;
    load_ctx *c = ud;
    if (sd_index(c->sd, name) < 0)
        appendf(c, "%s\"%s\"", c->missing++ ? ", " : "", name, "");
    return 0;
}

static int list_mismatch(const char *name, ct_tensor *t, bool is_param, void *ud) {
    (void)is_param;
    load_ctx *c = ud;
    int64_t i = sd_index(c->sd, name);
    if (i < 0)
        return 0;
    ct_tensor *src = ct_value_tensor(ct_value_at(c->sd, i));
    if (!src) {
        appendf(c, "\n\tWhile copying the parameter named \"%s\", expected a tensor in the state dict%s%s", name, "",
                "");
    } else if (!same_shape(src, t)) {
        char a[128], b[128];
        appendf(c,
                "\n\tsize mismatch for %s: copying a param with shape %s from checkpoint, the shape in current model "
                "is %s.",
                name, size_str(src, a, sizeof a), size_str(t, b, sizeof b));
    }
    return 0;
}

static int copy_key(const char *name, ct_tensor *t, bool is_param, void *ud) {
    (void)is_param;
    load_ctx *c = ud;
    int64_t i = sd_index(c->sd, name);
    if (i < 0)
        return 0;
    ct_tensor *src = ct_value_tensor(ct_value_at(c->sd, i));
    return src && ct_copy_(t, src) ? 0 : ct_last_status();
}

/* Both load_state_dict calls: counts and/or lists of the missing and unexpected keys. */
static ct_status load_state(ct_module *m, const ct_value *state_dict, bool strict, int64_t *n_missing,
                            int64_t *n_unexpected, ct_value **missing_keys, ct_value **unexpected_keys) {
    const char *op = "load_state_dict";
    if (missing_keys)
        *missing_keys = NULL;
    if (unexpected_keys)
        *unexpected_keys = NULL;
    if (!m || !state_dict)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "module and state_dict must not be NULL");
    if (ct_value_kind(state_dict) != CT_VALUE_DICT)
        return ct_error(CT_ERROR_TYPE, op, "Expected state_dict to be dict-like, got %s",
                        ct_value_type_name(ct_value_kind(state_dict)));
    int64_t n = ct_value_len(state_dict);
    load_ctx c = {.sd = state_dict};
    ct_value *unexpected = unexpected_keys ? ct_value_new_list() : NULL;
    c.missing_keys = missing_keys ? ct_value_new_list() : NULL;
    c.seen = ct_xcalloc(op, (size_t)(n ? n : 1), sizeof(bool));
    ct_status st =
        c.seen && (!missing_keys || c.missing_keys) && (!unexpected_keys || unexpected) ? CT_OK : ct_last_status();
    ct_scope_begin();
    if (!st)
        st = walk(m, true, true, check_key, &c);
    int64_t nunexpected = 0;
    for (int64_t i = 0; i < n && !st; i++) {
        c.seen[i] |= is_file_metadata(state_dict, i);
        if (!c.seen[i]) {
            nunexpected++;
            char buf[32];
            if (unexpected)
                st = ct_value_append(unexpected, ct_value_new_str(key_text(state_dict, i, buf, sizeof buf)));
        }
    }
    if (n_missing)
        *n_missing = c.missing;
    if (n_unexpected)
        *n_unexpected = nunexpected;
    if (st) {
        /* no memory to compare the keys: nothing was loaded */
    } else if ((strict && (c.missing || nunexpected)) || c.mismatched) {
        c.len = 0;
        appendf(&c, "Error(s) in loading state_dict for %s:", m->type, "", "");
        if (strict && c.missing) {
            appendf(&c, "\n\tMissing key(s) in state_dict: %s%s%s", "", "", "");
            c.missing = 0;
            walk(m, true, true, list_missing, &c);
            appendf(&c, ". %s%s%s", "", "", "");
        }
        if (strict && nunexpected) {
            appendf(&c, "\n\tUnexpected key(s) in state_dict: %s%s%s", "", "", "");
            int64_t k = 0;
            char buf[32];
            for (int64_t i = 0; i < n; i++)
                if (!c.seen[i])
                    appendf(&c, "%s\"%s\"%s", k++ ? ", " : "", key_text(state_dict, i, buf, sizeof buf), "");
            appendf(&c, ". %s%s%s", "", "", "");
        }
        walk(m, true, true, list_mismatch, &c);
        st = ct_error(CT_ERROR_VALUE, op, "%s", c.msg);
    } else {
        bool grad_was = ct_set_grad_enabled(false); /* Note [Statistics without a graph] */
        st = walk(m, true, true, copy_key, &c);
        ct_set_grad_enabled(grad_was);
    }
    ct_scope_end();
    free(c.seen);
    if (missing_keys)
        *missing_keys = c.missing_keys;
    if (unexpected_keys)
        *unexpected_keys = unexpected;
    return st;
}

ct_status ct_module_load_state_dict(ct_module *m, const ct_value *state_dict, bool strict, int64_t *n_missing,
                                    int64_t *n_unexpected) {
    return load_state(m, state_dict, strict, n_missing, n_unexpected, NULL, NULL);
}

ct_status ct_module_load_state_dict_keys(ct_module *m, const ct_value *state_dict, bool strict, ct_value **missing_keys,
                                         ct_value **unexpected_keys) {
    return load_state(m, state_dict, strict, NULL, NULL, missing_keys, unexpected_keys);
}

/* ------------------------------------------------------------------ to(device, dtype) */

/* Note [Module.to]
 * PyTorch's module.to(device, dtype) replaces every parameter and buffer of the tree by
 * its converted copy (a tensor already of that device and dtype is kept). Here:
 * - Two passes. The first makes every new tensor and records old -> new in a table;
 *   the second swaps them into the module. Only the first can fail (no memory, a device
 *   with no backend, a meta tensor that has no data to move), and then the table is
 *   dropped and the module is as it was. The swap cannot fail.
 * - The table is also what keeps ties: a tensor that two places hold (a tied embedding
 *   and head) is converted once, and both places get the one new tensor.
 * - A converted parameter is a new leaf (made with grad mode off, then detached) with
 *   the old one's requires_grad; its .grad, when there is one, is converted the same
 *   way and set on it. Buffers keep requires_grad off as they had it.
 * - dtype converts floating-point tensors only: integer and bool buffers
 *   (num_batches_tracked) keep their dtype and only move, as in PyTorch.
 * - Pointers to the old tensors (from ct_module_param, ct_module_parameters, an
 *   optimizer built before) keep the old tensors, which the module no longer holds:
 *   build the optimizer after moving the model, as in PyTorch. */
typedef struct to_entry {
    ct_tensor *old, *cur; /* cur: a reference of the table's */
} to_entry;

typedef struct to_table {
    const ct_device *device; /* NULL: keep each tensor's device */
    ct_dtype dtype;          /* CT_DTYPE_UNDEFINED: keep each tensor's dtype */
    to_entry *e;
    int64_t n, cap;
} to_table;

static ct_tensor *to_lookup(const to_table *tb, const ct_tensor *t) {
    for (int64_t i = 0; i < tb->n; i++)
        if (tb->e[i].old == t)
            return tb->e[i].cur;
    return NULL;
}

/* t converted (a new reference of the open scope), or t itself (not a new reference)
 * when nothing changes; NULL on error. */
static ct_tensor *to_convert(const to_table *tb, ct_tensor *t, bool *changed) {
    ct_dtype dt = tb->dtype != CT_DTYPE_UNDEFINED && ct_dtype_is_floating(ct_tensor_dtype(t)) ? tb->dtype
                                                                                             : ct_tensor_dtype(t);
    ct_device dev = tb->device ? *tb->device : ct_tensor_device(t);
    *changed = dt != ct_tensor_dtype(t) || !ct_device_equal(dev, ct_tensor_device(t));
    if (!*changed)
        return t;
    /* to a CPU, convert after the copy; elsewhere before it, so that a narrower
     * dtype crosses the bus */
    ct_tensor *x = dev.type == CT_DEVICE_CPU ? ct_to_dtype(ct_to_device(t, dev), dt)
                                             : ct_to_device(ct_to_dtype(t, dt), dev);
    return x ? ct_detach(x) : NULL;
}

static ct_status to_add(to_table *tb, ct_tensor *t) {
    const char *op = "Module.to";
    if (to_lookup(tb, t))
        return CT_OK;
    if (tb->n == tb->cap) {
        int64_t nc = tb->cap ? 2 * tb->cap : 16;
        to_entry *a = realloc(tb->e, sizeof *a * (size_t)nc);
        if (!a)
            return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
        tb->e = a;
        tb->cap = nc;
    }
    ct_scope_begin();
    bool changed = false;
    ct_tensor *nt = to_convert(tb, t, &changed);
    ct_tensor *g = nt ? ct_tensor_grad(t) : NULL;
    ct_status st = nt ? CT_OK : ct_last_status();
    if (!st && changed && ct_tensor_requires_grad(t) && !ct_tensor_set_requires_grad(nt, true))
        st = ct_last_status();
    if (!st && changed && g) {
        bool gchanged;
        ct_tensor *ng = to_convert(tb, g, &gchanged);
        st = ng ? ct_tensor_set_grad(nt, ng) : ct_last_status();
    }
    if (!st) {
        tb->e[tb->n].old = t;
        tb->e[tb->n].cur = ct_retain(nt);
        tb->n++;
    }
    ct_scope_end();
    return st;
}

static ct_status to_collect(const ct_module *m, to_table *tb) {
    for (int pass = 0; pass < 2; pass++) {
        named_tensor *arr = pass == 0 ? m->params : m->buffers;
        int n = pass == 0 ? m->nparams : m->nbuffers;
        for (int i = 0; i < n; i++) {
            ct_status st = arr[i].t ? to_add(tb, arr[i].t) : CT_OK;
            if (st)
                return st;
        }
    }
    for (int i = 0; i < m->nchildren; i++) {
        ct_status st = to_collect(m->children[i].m, tb);
        if (st)
            return st;
    }
    return CT_OK;
}

static void to_swap(ct_module *m, const to_table *tb) {
    for (int pass = 0; pass < 2; pass++) {
        named_tensor *arr = pass == 0 ? m->params : m->buffers;
        int n = pass == 0 ? m->nparams : m->nbuffers;
        for (int i = 0; i < n; i++) {
            ct_tensor *nt = arr[i].t ? to_lookup(tb, arr[i].t) : NULL;
            if (nt && nt != arr[i].t) {
                ct_retain(nt);
                ct_release(arr[i].t);
                arr[i].t = nt;
            }
        }
    }
    for (int i = 0; i < m->nchildren; i++)
        to_swap(m->children[i].m, tb);
}

static ct_status module_apply_to(ct_module *m, const ct_device *device, ct_dtype dtype, const char *op) {
    if (!m)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "module is NULL");
    if (dtype != CT_DTYPE_UNDEFINED && !ct_dtype_is_floating(dtype)) {
        char name[32];
        snprintf(name, sizeof name, "%s", ct_dtype_name(dtype));
        return ct_error(CT_ERROR_TYPE, op,
                        "nn.Module.to only accepts floating point or complex dtypes, but got desired dtype=torch.%s",
                        name);
    }
    if (device && (device->type != CT_DEVICE_CPU && device->type != CT_DEVICE_CUDA && device->type != CT_DEVICE_META))
        return ct_error(CT_ERROR_DEVICE, op, "unknown device type %d", (int)device->type);
    if (device && (device->index < 0 || (device->type != CT_DEVICE_CUDA && device->index != 0))) {
        char d[32];
        return ct_error(CT_ERROR_DEVICE, op, "invalid device index %d for device %s", (int)device->index,
                        ct_device_str(*device, d, sizeof d));
    }
    to_table tb = {.device = device, .dtype = dtype};
    bool grad_was = ct_set_grad_enabled(false);
    ct_status st = to_collect(m, &tb);
    ct_set_grad_enabled(grad_was);
    if (!st)
        to_swap(m, &tb);
    for (int64_t i = 0; i < tb.n; i++)
        ct_release(tb.e[i].cur);
    free(tb.e);
    return st;
}

ct_status ct_module_to(ct_module *m, ct_device device, ct_dtype dtype) {
    return module_apply_to(m, &device, dtype, "Module.to");
}

ct_status ct_module_half(ct_module *m) { return module_apply_to(m, NULL, CT_F16, "Module.half"); }
ct_status ct_module_bfloat16(ct_module *m) { return module_apply_to(m, NULL, CT_BF16, "Module.bfloat16"); }
ct_status ct_module_float(ct_module *m) { return module_apply_to(m, NULL, CT_F32, "Module.float"); }
ct_status ct_module_double(ct_module *m) { return module_apply_to(m, NULL, CT_F64, "Module.double"); }

static bool first_tensor(const ct_module *m, ct_device *out) {
    for (int pass = 0; pass < 2; pass++) {
        named_tensor *arr = pass == 0 ? m->params : m->buffers;
        int n = pass == 0 ? m->nparams : m->nbuffers;
        for (int i = 0; i < n; i++)
            if (arr[i].t) {
                *out = ct_tensor_device(arr[i].t);
                return true;
            }
    }
    for (int i = 0; i < m->nchildren; i++)
        if (first_tensor(m->children[i].m, out))
            return true;
    return false;
}

ct_device ct_module_device(const ct_module *m) {
    ct_device d = CT_CPU;
    if (!m)
        ct_error(CT_ERROR_NULL_ARGUMENT, "Module.device", "module is NULL");
    else
        first_tensor(m, &d);
    return d;
}
