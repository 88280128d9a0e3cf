/* ctorch profiling: a Chrome trace of op calls and allocator events, and a structured
 * log of what the runtime decided. See docs/profiling.md. */
#ifndef CTORCH_PROFILER_H
#define CTORCH_PROFILER_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ profiler */

/* Starts recording every op call (name, input shapes and dtypes, device, start,
 * duration, bytes allocated while it ran, thread) and every allocation and free, on
 * every thread. path is opened now (an error if it cannot be written) and filled by
 * ct_profiler_stop with Chrome trace JSON (chrome://tracing, ui.perfetto.dev). Fails
 * while a profile is already being recorded. CT_PROFILE=path does the same for a whole
 * program: recording starts at the first op call and the file is written at exit. */
CT_API ct_status ct_profiler_start(const char *path);
/* Stops recording and writes the trace. Fails when no profile is being recorded. */
CT_API ct_status ct_profiler_stop(void);
CT_API bool ct_profiler_enabled(void);

/* A named span around user code (PyTorch's record_function): every op called between
 * push and the matching pop on this thread nests under it in the trace. Cheap no-ops
 * while the profiler is off. name is copied. pop without a push is an error. */
CT_API ct_status ct_profiler_range_push(const char *name);
CT_API ct_status ct_profiler_range_pop(void);

/* ------------------------------------------------------------------ structured log */

/* Starts the structured log (PyTorch's TORCH_TRACE format): a new file
 * dir/dedicated_log_ctorch_trace_<pid>_<random>.log, one line per runtime decision.
 * CT_TRACE=dir does the same at the first op call. Fails if the log is already open or
 * the file cannot be created. `ctorch trace-report DIR -o OUT` renders the logs. */
CT_API ct_status ct_trace_log_start(const char *dir);
/* Closes the log file. Fails when no log is open. */
CT_API ct_status ct_trace_log_stop(void);
CT_API bool ct_trace_log_enabled(void);
/* Path of the open log file, or NULL. Valid until the log is stopped. */
CT_API const char *ct_trace_log_path(void);
/* Writes one event of the program's own: {"<event>": <metadata_json>} with an optional
 * payload (any text; its md5 goes in has_payload). metadata_json must be a JSON object
 * (NULL: {}). event must be a non-empty identifier ([A-Za-z0-9_]). Succeeds without
 * writing anything while the log is off. */
CT_API ct_status ct_trace_log_event(const char *event, const char *metadata_json, const char *payload);

/* ------------------------------------------------------------------ report */

/* What ct_trace_report read. */
typedef struct ct_trace_report_summary {
    int64_t files;            /* log files read */
    int64_t ok;               /* events parsed whole (payload md5 included) */
    int64_t fail_glog;        /* lines that are neither a glog line nor a payload line */
    int64_t fail_json;        /* envelopes that are not a JSON object */
    int64_t fail_payload_md5; /* payloads whose md5 differs from has_payload */
} ct_trace_report_summary;

/* Renders structured logs, in the spirit of tlparse (`ctorch trace-report`): reads
 * input (a log file, or a directory: every *.log in it, by name) and writes to outdir
 * (created if missing) index.html, raw.jsonl, raw.log and payloads/<md5>.txt.
 * Malformed lines are counted in *summary, not errors; an unreadable input or an
 * unwritable outdir is. */
CT_API ct_status ct_trace_report(const char *input, const char *outdir, ct_trace_report_summary *summary);

#ifdef __cplusplus
}
#endif

#endif /* CTORCH_PROFILER_H */
