/* The ownership debug mode, CT_DEBUG=refs: Note [Ownership debug mode] in debug_refs.c. */
#ifndef CT_DEBUG_REFS_H
#define CT_DEBUG_REFS_H

#include <stdatomic.h>

#include "tensor_impl.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* -1 until CT_DEBUG and the sanitizer setting are read (at the first tensor), then 0 or 1. */
extern atomic_int ct_debug_refs_state;
/* The storage every released tensor points at while the mode is on: no data, META. */
extern ct_storage ct_dead_storage;

/* One relaxed load: the checks that need no tensor to have been made first. */
static inline bool ct_debug_refs_on(void) {
    return atomic_load_explicit(&ct_debug_refs_state, memory_order_relaxed) == 1;
}
static inline bool ct_tensor_is_dead(const ct_tensor *t) { return t->storage == &ct_dead_storage; }

/* A tensor was made (called while the state is not 0: resolves it, then records t). */
void ct_debug_refs_made(ct_tensor *t);
/* t's last reference went, its contents are released: poison it and keep it (how:
 * "ct_release", "ct_scope_end"). */
void ct_debug_refs_bury(ct_tensor *t, const char *how);
/* A reference to a dead tensor was dropped, taken or kept again (how names the call). */
void ct_debug_refs_misuse(const ct_tensor *t, const char *how);
/* ct_scope_end with no open scope. */
void ct_debug_refs_unbalanced_scope_end(void);
/* The dispatcher's check of an argument: CT_OK when t is alive; otherwise an error
 * naming op, the argument and where t was released. */
ct_status ct_debug_refs_check_arg(const char *op, const ct_tensor *t, const char *what, int index);

CT_BACKEND_END

#endif /* CT_DEBUG_REFS_H */
