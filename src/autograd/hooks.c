/* Tensor hooks and post-accumulate-grad hooks.
 *
 * A hook lives on the node that receives the tensor's gradient (non-leaf tensors) or
 * in the tensor's autograd data (leaves), and is freed with it. A registry maps
 * handles to hooks for ct_remove_hook; a removed hook stays in its list, disabled,
 * until its owner goes. */
#include <string.h>

#include "autograd/node.h"

static ct_hook **registry;
static size_t nreg, capreg;
static int64_t next_handle = 1;

/* Called with ct_autograd_lock held. */
static bool registry_add(ct_hook *h) {
    if (nreg == capreg) {
        size_t cap = capreg ? capreg * 2 : 16;
        ct_hook **r = realloc(registry, cap * sizeof *r);
        if (!r)
            return false;
        registry = r;
        capreg = cap;
    }
    registry[nreg++] = h;
    h->handle = next_handle++;
    return true;
}

static void registry_drop(ct_hook *h) {
    for (size_t i = 0; i < nreg; i++)
        if (registry[i] == h) {
            registry[i] = registry[--nreg];
            break;
        }
    if (nreg == 0) {
        free(registry);
        registry = NULL;
        capreg = 0;
    }
}

void ct_hook_unregister(ct_hook *h) {
    pthread_mutex_lock(&ct_autograd_lock);
    registry_drop(h);
    pthread_mutex_unlock(&ct_autograd_lock);
}

static int64_t add_hook(ct_tensor *t, ct_hook_type type, ct_grad_hook_fn fn, ct_post_accumulate_hook_fn post,
                        void *user_data) {
    const char *op = type == CT_HOOK_GRAD ? "register_hook" : "register_post_accumulate_grad_hook";
    if (!t || (!fn && !post)) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "the tensor and the hook must not be NULL");
        return -1;
    }
    if (!t->requires_grad) {
        ct_error(CT_ERROR_RUNTIME, op, "cannot register a hook on a tensor that doesn't require gradient");
        return -1;
    }
    ct_node *n = ct_tensor_node(t);
    if (type == CT_HOOK_POST_ACCUMULATE && n) {
        ct_error(CT_ERROR_RUNTIME, op, "post accumulate grad hooks cannot be registered on non-leaf tensors");
        return -1;
    }
    ct_ag_meta *m = n ? NULL : ct_ag_meta_get(t);
    if (!n && !m)
        return -1;
    ct_hook *h = ct_xcalloc(op, 1, sizeof *h);
    if (!h)
        return -1;
    h->type = type;
    h->fn = fn;
    h->post_fn = post;
    h->user_data = user_data;
    h->output_nr = t->output_nr;
    pthread_mutex_lock(&ct_autograd_lock);
    if (!registry_add(h)) {
        pthread_mutex_unlock(&ct_autograd_lock);
        free(h);
        ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
        return -1;
    }
    /* Appended, so hooks run in registration order. */
    ct_hook **tail = n ? &n->hooks : &m->hooks;
    while (*tail)
        tail = &(*tail)->next;
    *tail = h;
    int64_t handle = h->handle;
    pthread_mutex_unlock(&ct_autograd_lock);
    return handle;
}

int64_t ct_tensor_register_hook(ct_tensor *t, ct_grad_hook_fn fn, void *user_data) {
    return add_hook(t, CT_HOOK_GRAD, fn, NULL, user_data);
}

int64_t ct_tensor_register_post_accumulate_grad_hook(ct_tensor *t, ct_post_accumulate_hook_fn fn, void *user_data) {
    return add_hook(t, CT_HOOK_POST_ACCUMULATE, NULL, fn, user_data);
}

ct_status ct_remove_hook(int64_t handle) {
    pthread_mutex_lock(&ct_autograd_lock);
    for (size_t i = 0; i < nreg; i++)
        if (registry[i]->handle == handle) {
            registry[i]->removed = true;
            registry_drop(registry[i]);
            pthread_mutex_unlock(&ct_autograd_lock);
            return CT_OK;
        }
    pthread_mutex_unlock(&ct_autograd_lock);
    return ct_error(CT_ERROR_VALUE, "remove_hook", "no hook with handle %lld", (long long)handle);
}

ct_tensor *ct_hooks_run_grad(ct_hook *list, int output_nr, ct_tensor *grad) {
    ct_tensor *cur = grad, *replaced = NULL;
    ct_clear_error();
    for (ct_hook *h = list; h; h = h->next) {
        pthread_mutex_lock(&ct_autograd_lock);
        bool run = !h->removed && h->type == CT_HOOK_GRAD && h->output_nr == output_nr;
        pthread_mutex_unlock(&ct_autograd_lock);
        if (!run)
            continue;
        ct_tensor *r = h->fn(cur, h->user_data);
        if (!r && ct_last_status() != CT_OK)
            return NULL;
        if (r) {
            if (r->ndim != grad->ndim || memcmp(r->shape, grad->shape, sizeof(int64_t) * (size_t)r->ndim) != 0) {
                ct_error(CT_ERROR_RUNTIME, "hook", "a hook returned a gradient of a different shape");
                return NULL;
            }
            replaced = cur = r; /* owned by the engine's scope */
        }
    }
    return replaced;
}

void ct_hooks_run_post(ct_hook *list, ct_tensor *leaf) {
    for (ct_hook *h = list; h; h = h->next) {
        pthread_mutex_lock(&ct_autograd_lock);
        bool run = !h->removed && h->type == CT_HOOK_POST_ACCUMULATE;
        pthread_mutex_unlock(&ct_autograd_lock);
        if (run)
            h->post_fn(leaf, h->user_data);
    }
}
