/* Internal error reporting. See Note [Errors] in error.c. */
#ifndef CT_ERROR_H
#define CT_ERROR_H

#include <stdlib.h>

#include "ctorch/core.h"
#include "ctorch/ext.h" /* ct_error, ct_error_null, CT_CHECK_ARG, ct_xmalloc, ct_xcalloc */
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* Note [Thread-local storage]
 * Every op reads a handful of thread-locals (the error state, the object caches, the
 * scope stack, the dispatch and grad modes). In a shared library the default TLS model
 * reaches each one through a call to __tls_get_addr; the initial-exec model is one load
 * off the thread pointer. Initial-exec asks the dynamic loader to place the library's
 * whole TLS block in static TLS, which a dlopen'ed library must take from glibc's small
 * surplus (about 1.6 KiB, shared with every other such library). So ctorch keeps its
 * TLS block small, about 200 bytes: anything big (the error message, the profiler's
 * range stack) sits behind a pointer to a lazily allocated per-thread buffer that a
 * pthread key destructor frees at thread exit. Declare thread-locals with
 * CT_THREAD_LOCAL, and keep them small. tests/dlopen_check.c loads the shared
 * library with dlopen and checks the block's size. */
#if defined(__GNUC__)
#define CT_THREAD_LOCAL _Thread_local __attribute__((tls_model("initial-exec")))
#else
#define CT_THREAD_LOCAL _Thread_local
#endif


/* Broken internal invariant: a bug in ctorch, never reachable from user input. */
void ct_assert_fail(const char *expr, const char *file, int line);
#define CT_ASSERT(x)                                  \
    do {                                              \
        if (CT_UNLIKELY(!(x)))                        \
            ct_assert_fail(#x, __FILE__, __LINE__);   \
    } while (0)

/* ct_xmalloc, ct_xcalloc and ct_xrealloc are in ctorch/ext.h. All three count for
 * Note [Injected allocation failures]. */

/* Note [Injected allocation failures] (error.c): true when this host allocation is the
 * one CT_ALLOC_CONF's fail_host_alloc asks to fail; one relaxed load while it is off. */
bool ct_host_alloc_should_fail(void);
/* Fails the n-th host allocation from now on (once); 0 turns injection off. */
void ct_host_alloc_fail_at(int64_t n);
/* Host allocations counted since the last ct_host_alloc_fail_at. */
int64_t ct_host_alloc_count(void);

/* Note [Host reads under capture]
 * Reading a tensor's values on the host (ct_item_*, printing) cannot be part of a
 * captured graph: the graph replays ops, not the C code that looked at a value. The
 * compiler (src/compile) installs one hook that the core asks first; it refuses the
 * read while its thread captures, with an error naming op. Without a hook, or outside a
 * capture, a read costs one load and a branch. */
typedef ct_status (*ct_host_read_fn)(const char *op);
void ct_core_set_host_read_hook(ct_host_read_fn fn);
ct_status ct_core_host_read(const char *op);

CT_BACKEND_END

#endif /* CT_ERROR_H */
