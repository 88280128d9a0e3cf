/* ctorch trace-report: structured logs (CT_TRACE) as an HTML summary. See
 * docs/profiling.md. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "ctorch.h"

int ct_cmd_trace_report(int argc, char **argv) {
    const char *input = NULL, *out = "tl_out";
    bool strict = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--strict") == 0) {
            strict = true;
        } else if (argv[i][0] != '-' && !input) {
            input = argv[i];
        } else {
            fprintf(stderr, "usage: ctorch trace-report DIR|FILE [-o OUT_DIR] [--strict]\n");
            return 2;
        }
    }
    if (!input) {
        fprintf(stderr, "usage: ctorch trace-report DIR|FILE [-o OUT_DIR] [--strict]\n");
        return 2;
    }
    ct_trace_report_summary s;
    if (ct_trace_report(input, out, &s) != CT_OK) {
        fprintf(stderr, "ctorch trace-report: %s\n", ct_last_error());
        return 1;
    }
    printf("%s/index.html: %lld events from %lld file(s)", out, (long long)(s.ok + s.fail_payload_md5),
           (long long)s.files);
    printf("; fail_glog %lld, fail_json %lld, fail_payload_md5 %lld\n", (long long)s.fail_glog, (long long)s.fail_json,
           (long long)s.fail_payload_md5);
    bool failed = s.fail_glog || s.fail_json || s.fail_payload_md5;
    if (failed)
        fprintf(stderr, "ctorch trace-report: some lines could not be parsed or failed their md5 check (see %s/index.html)\n",
                out);
    return strict && failed ? 1 : 0;
}
