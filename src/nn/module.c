/* nn.Module in C: named parameters, buffers and children, train/eval mode, a forward
 * function, state_dict out and in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"

typedef struct named_tensor {
    char *name;
    ct_tensor *t; /* ct_retain'ed, or NULL for a registered None */
} named_tensor;

typedef struct named_child {
    char *name;
    ct_module *m;
} named_child;

struct ct_module {
    char type[32];
    ct_module_forward_fn forward;
    void *ctx;
    void (*free_ctx)(void *);
    bool training;
    named_tensor *params, *buffers;
    int nparams, nbuffers, cparams, cbuffers;
    named_child *children;
    int nchildren, cchildren;
    /* dotted names handed out by ct_module_parameters (borrowed by the caller) */
    char **names;
    int64_t nnames;
};

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

ct_module *ct_module_new(const char *type, ct_module_forward_fn forward, void *ctx, void (*free_ctx)(void *)) {
    ct_module *m = calloc(1, sizeof *m);
    if (!m) {
        if (free_ctx)
            free_ctx(ctx);
        ct_error(CT_ERROR_OUT_OF_MEMORY, "Module", "out of memory");
        return NULL;
    }
    snprintf(m->type, sizeof m->type, "%s", type ? type : "Module");
    m->forward = forward;
    m->ctx = ctx;
    m->free_ctx = free_ctx;
    m->training = true;
    return m;
}

void ct_module_free(ct_module *m) {
    if (!m)
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
        ct_module_free(m->children[i].m);
    }
    free(m->params);
    free(m->buffers);
    free(m->children);
    free_names(m);
    if (m->free_ctx)
        m->free_ctx(m->ctx);
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

ct_tensor *ct_module_forward(ct_module *m, const ct_tensor *input) {
    if (!m) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "Module.forward", "module is NULL");
        return NULL;
    }
    CT_CHECK_ARG(m->type, input);
    if (!m->forward) {
        ct_error(CT_ERROR_NOT_IMPLEMENTED, m->type, "Module [%s] is missing the required \"forward\" function",
                 m->type);
        return NULL;
    }
    return m->forward(m, input);
}

/* ------------------------------------------------------------------ registration */

static bool name_taken(const ct_module *m, const char *name) {
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params[i].name, name))
            return true;
    for (int i = 0; i < m->nbuffers; i++)
        if (!strcmp(m->buffers[i].name, name))
            return true;
    for (int i = 0; i < m->nchildren; i++)
        if (!strcmp(m->children[i].name, name))
            return true;
    return false;
}

static ct_status check_name(const char *op, const ct_module *m, const char *name) {
    if (!m || !name)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "module and name must not be NULL");
    if (!*name)
        return ct_error(CT_ERROR_VALUE, op, "name can't be empty string \"\"");
    if (strchr(name, '.'))
        return ct_error(CT_ERROR_VALUE, op, "name can't contain \".\", got: %s", name);
    if (name_taken(m, name))
        return ct_error(CT_ERROR_VALUE, op, "attribute '%s' already exists", name);
    return CT_OK;
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

ct_status ct_module_register_parameter(ct_module *m, const char *name, ct_tensor *t) {
    const char *op = "register_parameter";
    ct_status st = check_name(op, m, name);
    if (st)
        return st;
    if (t && !ct_dtype_is_floating(ct_tensor_dtype(t)))
        return ct_error(CT_ERROR_TYPE, op, "Only Tensors of floating point dtype can require gradients, got %s",
                        ct_dtype_name(ct_tensor_dtype(t)));
    if (t)
        ct_tensor_set_requires_grad(t, true);
    return push_tensor(op, &m->params, &m->nparams, &m->cparams, name, t);
}

ct_status ct_module_register_buffer(ct_module *m, const char *name, ct_tensor *t) {
    const char *op = "register_buffer";
    ct_status st = check_name(op, m, name);
    return st ? st : push_tensor(op, &m->buffers, &m->nbuffers, &m->cbuffers, name, t);
}

ct_status ct_module_add_child(ct_module *m, const char *name, ct_module *child) {
    const char *op = "add_module";
    if (!child) {
        /* a failed constructor already set the error */
        return ct_last_status() != CT_OK ? ct_last_status() : ct_error(CT_ERROR_NULL_ARGUMENT, op, "child is NULL");
    }
    ct_status st = check_name(op, m, name);
    if (!st && m->nchildren == m->cchildren) {
        int nc = m->cchildren ? 2 * m->cchildren : 4;
        named_child *a = realloc(m->children, sizeof *a * (size_t)nc);
        if (!a)
            st = ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
        else {
            m->children = a;
            m->cchildren = nc;
        }
    }
    char *nm = st ? NULL : dup_str(name);
    if (!st && !nm)
        st = ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
    if (st) {
        ct_module_free(child);
        return st;
    }
    m->children[m->nchildren].name = nm;
    m->children[m->nchildren].m = child;
    m->nchildren++;
    return CT_OK;
}

static named_tensor *find_entry(named_tensor *arr, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(arr[i].name, name))
            return &arr[i];
    return NULL;
}

ct_tensor *ct_module_param(const ct_module *m, const char *name) {
    named_tensor *e = m && name ? find_entry(m->params, m->nparams, name) : NULL;
    return e ? e->t : NULL;
}

ct_tensor *ct_module_buffer(const ct_module *m, const char *name) {
    named_tensor *e = m && name ? find_entry(m->buffers, m->nbuffers, name) : NULL;
    return e ? e->t : NULL;
}

ct_module *ct_module_child(const ct_module *m, const char *name) {
    if (!m || !name)
        return NULL;
    for (int i = 0; i < m->nchildren; i++)
        if (!strcmp(m->children[i].name, name))
            return m->children[i].m;
    return NULL;
}

ct_status ct_module_set_param(ct_module *m, const char *name, ct_tensor *t) {
    if (!m || !name || !t)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "set_param", "module, name and tensor must not be NULL");
    named_tensor *e = find_entry(m->params, m->nparams, name);
    if (!e)
        return ct_error(CT_ERROR_VALUE, "set_param", "%s has no parameter '%s'", m->type, name);
    ct_retain(t);
    ct_release(e->t);
    e->t = t;
    ct_tensor_set_requires_grad(t, true);
    return CT_OK;
}

/* ------------------------------------------------------------------ traversal */

/* Visits every (dotted name, tensor) pair: parameters then buffers of a module, then
 * its children, as named_parameters/named_buffers/state_dict order them. */
typedef bool (*visit_fn)(const char *name, ct_tensor *t, bool is_param, void *ud);

static bool walk(const ct_module *m, char *prefix, size_t plen, size_t cap, bool params, bool buffers, visit_fn fn,
                 void *ud) {
    for (int pass = 0; pass < 2; pass++) {
        if ((pass == 0 && !params) || (pass == 1 && !buffers))
            continue;
        named_tensor *arr = pass == 0 ? m->params : m->buffers;
        int n = pass == 0 ? m->nparams : m->nbuffers;
        for (int i = 0; i < n; i++) {
            if (!arr[i].t)
                continue;
            snprintf(prefix + plen, cap - plen, "%s", arr[i].name);
            if (!fn(prefix, arr[i].t, pass == 0, ud))
                return false;
        }
    }
    for (int i = 0; i < m->nchildren; i++) {
        int k = snprintf(prefix + plen, cap - plen, "%s.", m->children[i].name);
        if (k < 0 || plen + (size_t)k >= cap)
            continue;
        if (!walk(m->children[i].m, prefix, plen + (size_t)k, cap, params, buffers, fn, ud))
            return false;
    }
    prefix[plen] = 0;
    return true;
}

#define CT_NAME_CAP 512

typedef struct collect {
    ct_tensor **params;
    const char **names;
    int64_t cap, count;
    ct_module *owner;
    bool oom;
} collect;

static bool collect_param(const char *name, ct_tensor *t, bool is_param, void *ud) {
    (void)is_param;
    collect *c = ud;
    /* tied parameters are listed once, under their first name */
    for (int64_t i = 0; i < c->count && i < c->cap; i++)
        if (c->params && c->params[i] == t)
            return true;
    if (c->count < c->cap) {
        if (c->params)
            c->params[c->count] = t;
        if (c->names) {
            char *nm = dup_str(name);
            if (!nm) {
                c->oom = true;
                return false;
            }
            c->owner->names[c->owner->nnames++] = nm;
            c->names[c->count] = nm;
        }
    }
    c->count++;
    return true;
}

static bool count_tensor(const char *name, ct_tensor *t, bool is_param, void *ud) {
    (void)name, (void)t, (void)is_param;
    ++*(int64_t *)ud;
    return true;
}

int64_t ct_module_parameters(const ct_module *m, ct_tensor **params, const char **names, int64_t cap) {
    if (!m) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "parameters", "module is NULL");
        return -1;
    }
    char prefix[CT_NAME_CAP] = "";
    ct_module *mm = (ct_module *)m; /* the name cache is not part of the module's state */
    if (names && cap > 0) {
        /* only a call that hands out names replaces them: counting calls (as
         * ct_module_num_parameters makes) leave the caller's borrowed names valid */
        free_names(mm);
        int64_t total = 0;
        walk(m, prefix, 0, sizeof prefix, true, false, count_tensor, &total);
        mm->names = calloc((size_t)(total ? total : 1), sizeof(char *));
        if (!mm->names) {
            ct_error(CT_ERROR_OUT_OF_MEMORY, "parameters", "out of memory");
            return -1;
        }
    }
    /* dedup needs the tensors: collect into a scratch array when the caller gave none */
    int64_t total = 0;
    walk(m, prefix, 0, sizeof prefix, true, false, count_tensor, &total);
    ct_tensor **scratch = params ? NULL : calloc((size_t)(total ? total : 1), sizeof(ct_tensor *));
    if (!params && !scratch) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, "parameters", "out of memory");
        return -1;
    }
    collect c = {params ? params : scratch, names, params ? cap : total, 0, mm, false};
    if (!names || cap <= 0)
        c.names = NULL;
    walk(m, prefix, 0, sizeof prefix, true, false, collect_param, &c);
    free(scratch);
    if (c.oom) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, "parameters", "out of memory");
        return -1;
    }
    return c.count;
}

int64_t ct_module_num_parameters(const ct_module *m) {
    int64_t n = ct_module_parameters(m, NULL, NULL, 0);
    if (n <= 0)
        return n;
    ct_tensor **ps = calloc((size_t)n, sizeof *ps);
    if (!ps) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, "parameters", "out of memory");
        return -1;
    }
    ct_module_parameters(m, ps, NULL, n);
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++)
        total += ct_tensor_numel(ps[i]);
    free(ps);
    return total;
}

/* ------------------------------------------------------------------ state_dict */

static bool put_state(const char *name, ct_tensor *t, bool is_param, void *ud) {
    (void)is_param;
    ct_value *dict = ud;
    ct_scope_begin();
    ct_tensor *d = ct_alias(t); /* detached: a state dict holds data, not graph history */
    bool ok = d && ct_tensor_set_requires_grad(d, false) && ct_value_set(dict, name, ct_value_new_tensor(d)) == CT_OK;
    ct_scope_end();
    return ok;
}

ct_value *ct_module_state_dict(const ct_module *m) {
    if (!m) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "state_dict", "module is NULL");
        return NULL;
    }
    ct_value *dict = ct_value_new_dict();
    if (!dict)
        return NULL;
    char prefix[CT_NAME_CAP] = "";
    if (!walk(m, prefix, 0, sizeof prefix, true, true, put_state, dict)) {
        ct_value_free(dict);
        return NULL;
    }
    return dict;
}

/* Note [load_state_dict errors]
 * As PyTorch, every problem is found before any is reported: missing keys, then
 * unexpected keys (both only when strict), then size mismatches, in one message. Unlike
 * PyTorch, nothing is copied when there is an error, so a failed load leaves the
 * module as it was. */
typedef struct load_ctx {
    const ct_value *sd;
    char msg[1024];
    size_t len;
    int64_t missing, mismatched;
    bool copying;
    bool *seen; /* per state-dict entry: matched a module key */
    ct_status st;
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

static const char *size_str(const ct_tensor *t, char *buf, size_t cap) {
    char s[96];
    ct_shape_str(ct_tensor_shape(t), ct_tensor_dim(t), s, sizeof s);
    snprintf(buf, cap, "torch.Size(%s)", s);
    return buf;
}

static bool check_key(const char *name, ct_tensor *t, bool is_param, void *ud) {
    (void)is_param;
    load_ctx *c = ud;
    int64_t i = sd_index(c->sd, name);
    if (i < 0) {
        c->missing++;
        return true;
    }
    c->seen[i] = true;
    ct_tensor *src = ct_value_tensor(ct_value_at(c->sd, i));
    if (!src) {
        c->mismatched++;
        return true;
    }
    bool same = ct_tensor_dim(src) == ct_tensor_dim(t);
    for (int d = 0; same && d < ct_tensor_dim(t); d++)
        same = ct_tensor_size(src, d) == ct_tensor_size(t, d);
    if (!same)
        c->mismatched++;
    return true;
}

static bool list_missing(const char *name, ct_tensor *t, bool is_param, void *ud) {
    (void)t, (void)is_param;
    load_ctx *c = ud;
    if (sd_index(c->sd, name) < 0)
        appendf(c, "%s\"%s\"", c->missing++ ? ", " : "", name, "");
    return true;
}

static bool list_mismatch(const char *name, ct_tensor *t, bool is_param, void *ud) {
    (void)is_param;
    load_ctx *c = ud;
    int64_t i = sd_index(c->sd, name);
    if (i < 0)
        return true;
    ct_tensor *src = ct_value_tensor(ct_value_at(c->sd, i));
    if (!src) {
        appendf(c, "\n\tWhile copying the parameter named \"%s\", expected a tensor in the state dict%s%s", name, "",
                "");
        return true;
    }
    bool same = ct_tensor_dim(src) == ct_tensor_dim(t);
    for (int d = 0; same && d < ct_tensor_dim(t); d++)
        same = ct_tensor_size(src, d) == ct_tensor_size(t, d);
    if (!same) {
        char a[128], b[128];
        appendf(c,
                "\n\tsize mismatch for %s: copying a param with shape %s from checkpoint, the shape in current model "
                "is %s.",
                name, size_str(src, a, sizeof a), size_str(t, b, sizeof b));
    }
    return true;
}

static bool copy_key(const char *name, ct_tensor *t, bool is_param, void *ud) {
    (void)is_param;
    load_ctx *c = ud;
    int64_t i = sd_index(c->sd, name);
    if (i < 0)
        return true;
    ct_tensor *src = ct_value_tensor(ct_value_at(c->sd, i));
    if (!src || !ct_copy_(t, src)) {
        c->st = ct_last_status();
        return false;
    }
    return true;
}

ct_status ct_module_load_state_dict(ct_module *m, const ct_value *state_dict, bool strict, int64_t *n_missing,
                                    int64_t *n_unexpected) {
    const char *op = "load_state_dict";
    if (!m || !state_dict)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "module and state_dict must not be NULL");
    if (ct_value_kind(state_dict) != CT_VALUE_DICT)
        return ct_error(CT_ERROR_TYPE, op, "Expected state_dict to be dict-like, got %s",
                        ct_value_type_name(ct_value_kind(state_dict)));
    int64_t n = ct_value_len(state_dict);
    load_ctx c = {.sd = state_dict, .st = CT_OK};
    c.seen = calloc((size_t)(n ? n : 1), sizeof(bool));
    if (!c.seen)
        return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
    char prefix[CT_NAME_CAP] = "";
    ct_scope_begin();
    walk(m, prefix, 0, sizeof prefix, true, true, check_key, &c);
    int64_t unexpected = 0;
    for (int64_t i = 0; i < n; i++)
        unexpected += !c.seen[i];
    if (n_missing)
        *n_missing = c.missing;
    if (n_unexpected)
        *n_unexpected = unexpected;
    ct_status st = CT_OK;
    if ((strict && (c.missing || unexpected)) || c.mismatched) {
        c.len = 0;
        appendf(&c, "Error(s) in loading state_dict for %s:", m->type, "", "");
        if (strict && c.missing) {
            appendf(&c, "\n\tMissing key(s) in state_dict: %s%s%s", "", "", "");
            c.missing = 0;
            walk(m, prefix, 0, sizeof prefix, true, true, list_missing, &c);
            appendf(&c, ". %s%s%s", "", "", "");
        }
        if (strict && unexpected) {
            appendf(&c, "\n\tUnexpected key(s) in state_dict: %s%s%s", "", "", "");
            int64_t k = 0;
            for (int64_t i = 0; i < n; i++)
                if (!c.seen[i])
                    appendf(&c, "%s\"%s\"%s", k++ ? ", " : "", ct_value_str(ct_value_key_at(state_dict, i), NULL), "");
            appendf(&c, ". %s%s%s", "", "", "");
        }
        walk(m, prefix, 0, sizeof prefix, true, true, list_mismatch, &c);
        st = ct_error(CT_ERROR_VALUE, op, "%s", c.msg);
    } else {
        bool grad_was = ct_set_grad_enabled(false); /* Note [Statistics without a graph] */
        walk(m, prefix, 0, sizeof prefix, true, true, copy_key, &c);
        ct_set_grad_enabled(grad_was);
        st = c.st;
    }
    ct_scope_end();
    free(c.seen);
    return st;
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
