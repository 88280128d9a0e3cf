/* The structured log's internal entry points (src/observe/trace_log.c): the runtime's
 * decisions, written only while CT_TRACE / ct_trace_log_start has it on. */
#ifndef CT_DISPATCH_TRACE_LOG_H
#define CT_DISPATCH_TRACE_LOG_H

#include <stdatomic.h>
#include <stdint.h>

#include "ctorch/dispatch.h"

extern atomic_bool ct_trace_log_on;
/* Callers test this first so that an event costs one load while the log is off. */
#define CT_TRACE_LOG_ON() atomic_load_explicit(&ct_trace_log_on, memory_order_relaxed)

/* One line with envelope {"<event>": metadata_json} (a JSON object; NULL: {}) and an
 * optional payload. file/line name the deciding site (__FILE__, __LINE__). */
void ct_trace_log_write(const char *file, int line, const char *event, const char *metadata_json,
                        const char *payload);

/* The same with more members of the envelope after the event's: env is JSON members
 * without braces (`"frame_id": 0, "frame_compile_id": 1, "attempt": 0`, as
 * TORCH_TRACE's compile events carry), or NULL. */
void ct_trace_log_write_env(const char *file, int line, const char *event, const char *metadata_json,
                            const char *env, const char *payload);

/* CT_TRACE=dir at the dispatcher's set-up. */
void ct_trace_log_init_from_env(void);

/* The events the runtime emits; each does nothing while the log is off. */
void ct_trace_log_override(ct_op op, ct_dispatch_key key, int64_t handle, uint32_t flags);
void ct_trace_log_override_removed(ct_op op, ct_dispatch_key key, int64_t handle);
void ct_trace_log_op_logging(bool enabled, const char *path, const char *source);
/* A kernel picked one implementation for a problem; logged once per distinct
 * (kernel, choice, dtype, m, n, k) so that a training loop does not flood the log. */
void ct_trace_log_kernel_choice(const char *file, int line, const char *kernel, const char *choice, ct_dtype dtype,
                                int64_t m, int64_t n, int64_t k);
/* An allocator OOM (size: rounded request, free_bytes from the device) or retry. */
void ct_trace_log_alloc_event(ct_device device, int action, uint64_t addr, uint64_t size, int64_t allocated);

#endif /* CT_DISPATCH_TRACE_LOG_H */
