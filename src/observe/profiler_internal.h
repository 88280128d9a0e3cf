/* The profiler's side of the dispatcher's observer hook (src/observe/profiler.c,
 * docs/profiling.md). */
#ifndef CT_DISPATCH_PROFILER_INTERNAL_H
#define CT_DISPATCH_PROFILER_INTERNAL_H

#include <stdatomic.h>

#include "dispatch/dispatch_internal.h"

/* True while a profile is being recorded; read by ct_dispatch on every call. */
extern atomic_bool ct_profiler_active;

/* Runs call through ct_dispatch_run and records its span. */
ct_status ct_profiler_dispatch(ct_call *call);
/* CT_PROFILE=path: starts the profiler and writes the trace at exit. */
void ct_profiler_init_from_env(void);
/* Installs the allocator observer shared by the profiler and the structured log
 * (Note [Allocator observer]); idempotent. */
void ct_profiler_install_alloc_observer(void);

#endif /* CT_DISPATCH_PROFILER_INTERNAL_H */
