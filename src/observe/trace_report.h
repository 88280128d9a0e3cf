/* Rendering structured logs (`ctorch trace-report`), in the spirit of tlparse. */
#ifndef CT_DISPATCH_TRACE_REPORT_H
#define CT_DISPATCH_TRACE_REPORT_H

#include <stdint.h>

#include "ctorch/core.h"

typedef struct ct_trace_report_summary {
    int64_t files;            /* log files read */
    int64_t ok;               /* events parsed whole (payload md5 included) */
    int64_t fail_glog;        /* lines that are neither a glog line nor a payload line */
    int64_t fail_json;        /* envelopes that are not a JSON object */
    int64_t fail_payload_md5; /* payloads whose md5 differs from has_payload */
} ct_trace_report_summary;

/* Reads input (a log file, or a directory: every *.log in it, by name) and writes to
 * outdir (created if missing): index.html, raw.jsonl, raw.log and payloads/<md5>.txt.
 * Malformed lines are counted in *summary, not errors; an unreadable input or an
 * unwritable outdir is. */
ct_status ct_trace_report(const char *input, const char *outdir, ct_trace_report_summary *summary);

#endif /* CT_DISPATCH_TRACE_REPORT_H */
