/* The observers plug into the dispatcher through its one observer hook (Note
 * [Observer hook] in src/dispatch/dispatch.c) and the LOGGING key. */
#include "observe/observe.h"
#include "dispatch/dispatch_internal.h"
#include "observe/profiler_internal.h"
#include "observe/trace_log.h"

void ct_op_logging_init_from_env(void); /* logging.c */

static const ct_dispatch_observer observer = {
    .run_call = ct_profiler_dispatch,
    .override_added = ct_trace_log_override,
    .override_removed = ct_trace_log_override_removed,
};

void ct_observe_register(void) {
    ct_trace_log_init_from_env(); /* first, so that it logs what the others set up */
    ct_dispatch_set_observer(&observer);
    ct_op_logging_init_from_env();
    ct_profiler_init_from_env();
}
