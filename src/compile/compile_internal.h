/* The compiler's entry points for the registry. */
#ifndef CT_COMPILE_INTERNAL_H
#define CT_COMPILE_INTERNAL_H

/* Registers the TRACE kernel (Note [Capture protocol] in capture.c) and the host-read
 * hook (Note [Host reads under capture] in src/core/error.h). */
void ct_compile_register(void);

#include <stddef.h>

#include "ctorch/core.h"

/* Note [Host calls] in graph.h. fn(ctx, result) runs code that keeps host state (an
 * optimizer step, gradient clipping); *result, when result is not NULL, gets its
 * tensor result (owned by the innermost scope) or NULL. Outside a capture,
 * ct_compile_host_call just calls it. Under a capture it calls it with TRACE off (its
 * op calls are not recorded) and records one node that calls fn again, with a copy of
 * the ctx_size bytes at ctx, on every replay: ctx must hold everything the call needs
 * by value (a tensor list as a flexible array member, not a pointer into the caller's
 * stack), and what it points to (the optimizer, the parameters) must outlive the
 * compiled function. */
typedef ct_status (*ct_compile_host_fn)(void *ctx, ct_tensor **result);
ct_status ct_compile_host_call(const char *name, ct_compile_host_fn fn, const void *ctx, size_t ctx_size,
                               ct_tensor **result);
/* Called by a host call that sets the .grad of ts to None (zero_grad): a leaf first
 * seen after it needs no gradient guard (Note [Gradient guards]), since the function
 * drops whatever .grad it had on entry. Does nothing outside a capture. */
void ct_compile_note_grads_reset(ct_tensor *const *ts, int n);

#endif /* CT_COMPILE_INTERNAL_H */
