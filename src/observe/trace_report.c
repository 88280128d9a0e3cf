/* `ctorch trace-report`: structured logs (trace_log.c) as an HTML summary, the way
 * tlparse renders TORCH_TRACE logs (formats.md §4): every envelope in raw.jsonl, every
 * payload in payloads/<md5>.txt, payload md5s checked, malformed lines counted. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/json.h"
#include "util/value.h"
#include "core/error.h"
#include "util/md5.h"
#include "ctorch/profiler.h"

/* Envelope keys that give context rather than name the event (PyTorch's list). */
static const char *const context_keys[] = {"has_payload", "rank", "frame_id", "frame_compile_id",
                                           "attempt", "compiled_autograd_id", "stack"};

typedef struct report_event {
    int file;
    int64_t lineno;
    char stamp[24];
    char *kind;
    char *where; /* source file:line */
    char *meta;  /* the envelope text */
    char md5[33];
    char expected[33];
    bool has_payload, md5_bad;
} report_event;

typedef struct kind_count {
    char *name;
    int64_t n;
} kind_count;

typedef struct report {
    report_event *ev;
    size_t n, cap;
    kind_count *kinds;
    size_t nkinds;
    char **bad_lines; /* "file:line: reason" */
    size_t nbad;
    bool oom;
} report;

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void note_bad(report *r, const char *file, int64_t lineno, const char *why) {
    char line[1200];
    snprintf(line, sizeof line, "%s:%" PRId64 ": %s", file, lineno, why);
    char **nb = realloc(r->bad_lines, (r->nbad + 1) * sizeof *nb);
    char *s = dup_n(line, strlen(line));
    if (!nb || !s) {
        free(s);
        if (nb)
            r->bad_lines = nb;
        r->oom = true;
        return;
    }
    r->bad_lines = nb;
    r->bad_lines[r->nbad++] = s;
}

static void count_kind(report *r, const char *kind) {
    for (size_t i = 0; i < r->nkinds; i++)
        if (strcmp(r->kinds[i].name, kind) == 0) {
            r->kinds[i].n++;
            return;
        }
    kind_count *nk = realloc(r->kinds, (r->nkinds + 1) * sizeof *nk);
    char *name = dup_n(kind, strlen(kind));
    if (!nk || !name) {
        free(name);
        if (nk)
            r->kinds = nk;
        r->oom = true;
        return;
    }
    r->kinds = nk;
    r->kinds[r->nkinds++] = (kind_count){name, 1};
}

/* The compiler's events and what their payloads are; NULL for other kinds. */
static const char *compile_event(const char *kind) {
    static const char *const names[][2] = {
        {"dynamo_start", "text"},         {"dynamo_output_graph", "graph"}, {"aot_joint_graph", "joint graph"},
        {"inductor_output_code", "generated C"}, {"dynamo_guards", "guards"}, {"compilation_metrics", "text"},
    };
    if (!kind)
        return NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(kind, names[i][0]) == 0)
            return names[i][1];
    return NULL;
}

static bool is_context_key(const char *k) {
    for (size_t i = 0; i < sizeof context_keys / sizeof context_keys[0]; i++)
        if (strcmp(k, context_keys[i]) == 0)
            return true;
    return false;
}

static void put_json(FILE *f, const char *s) {
    ct_json_buf jb = {0};
    ct_json_put_string(&jb, s, strlen(s));
    if (jb.failed)
        fputs("\"\"", f);
    else
        fwrite(jb.data, 1, jb.len, f);
    ct_json_buf_free(&jb);
}

static bool write_file(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, len, f) == len;
    ok &= fclose(f) == 0;
    return ok;
}

/* One log file: every event into r, raw.jsonl and payloads/. */
static ct_status read_log(report *r, int file_index, const char *path, const char *outdir, FILE *raw_jsonl,
                          FILE *raw_log, const regex_t *re, ct_trace_report_summary *sum) {
    size_t len;
    char *text = read_all(path, &len);
    if (!text)
        return ct_error(CT_ERROR_IO, "trace_report", "cannot read '%s'", path);
    fwrite(text, 1, len, raw_log);
    char *p = text, *end = text + len;
    int64_t lineno = 0;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *line_end = nl ? nl : end;
        lineno++;
        *line_end = '\0';
        char *line = p;
        p = nl ? nl + 1 : end;
        if (!*line)
            continue;
        regmatch_t m[8];
        if (line[0] == '\t' || regexec(re, line, 8, m, 0) != 0) {
            sum->fail_glog++;
            note_bad(r, path, lineno, line[0] == '\t' ? "payload line without an event" : "not a glog line");
            continue;
        }
        const char *env = line + m[7].rm_so;
        size_t env_len = (size_t)(m[7].rm_eo - m[7].rm_so);
        ct_value *v = ct_json_parse(env, env_len, "trace_report", "envelope");
        ct_clear_error();
        /* the payload, if any, follows as tab-prefixed lines; rejoin with '\n' */
        char *pay_start = p, *q = p;
        size_t npay = 0;
        while (q < end && *q == '\t') {
            char *qnl = memchr(q, '\n', (size_t)(end - q));
            q = qnl ? qnl + 1 : end;
            npay++;
            lineno++;
        }
        char *payload = NULL;
        size_t pay_len = 0;
        if (npay) {
            payload = malloc((size_t)(q - pay_start) + 1);
            if (!payload) {
                ct_value_free(v);
                free(text);
                return ct_error(CT_ERROR_OUT_OF_MEMORY, "trace_report", "out of memory");
            }
            for (char *s = pay_start; s < q;) {
                char *snl = memchr(s, '\n', (size_t)(q - s));
                char *se = snl ? snl : q;
                if (pay_len)
                    payload[pay_len++] = '\n';
                memcpy(payload + pay_len, s + 1, (size_t)(se - s - 1));
                pay_len += (size_t)(se - s - 1);
                s = snl ? snl + 1 : q;
            }
            payload[pay_len] = '\0';
        }
        p = q;
        if (!v || v->type != CT_VALUE_DICT) {
            sum->fail_json++;
            note_bad(r, path, lineno - (int64_t)npay, "envelope is not a JSON object");
            ct_value_free(v);
            free(payload);
            continue;
        }
        const char *kind = "unknown";
        for (int64_t i = 0; i < ct_value_len(v); i++) {
            const char *k = ct_value_str(ct_value_key_at(v, i), NULL);
            if (k && !is_context_key(k)) {
                kind = k;
                break;
            }
        }
        report_event e = {0};
        e.file = file_index;
        e.lineno = lineno - (int64_t)npay;
        snprintf(e.stamp, sizeof e.stamp, "%.*s %.*s", (int)(m[2].rm_eo - m[2].rm_so), line + m[2].rm_so,
                 (int)(m[3].rm_eo - m[3].rm_so), line + m[3].rm_so);
        e.kind = dup_n(kind, strlen(kind));
        e.where = dup_n(line + m[5].rm_so, (size_t)(m[6].rm_eo - m[5].rm_so));
        e.meta = dup_n(env, env_len);
        ct_value *hp = ct_value_get(v, "has_payload");
        ct_clear_error();
        const char *expected = hp ? ct_value_str(hp, NULL) : NULL;
        if (payload) {
            ct_md5_hex(payload, pay_len, e.md5);
            e.has_payload = true;
            if (expected) {
                snprintf(e.expected, sizeof e.expected, "%s", expected);
                e.md5_bad = strcmp(expected, e.md5) != 0;
            }
            char ppath[PATH_MAX];
            snprintf(ppath, sizeof ppath, "%s/payloads/%s.txt", outdir, e.md5);
            if (!write_file(ppath, payload, pay_len)) {
                free(payload);
                ct_value_free(v);
                free(e.kind);
                free(e.where);
                free(e.meta);
                free(text);
                return ct_error(CT_ERROR_IO, "trace_report", "cannot write '%s'", ppath);
            }
        } else if (expected) {
            /* has_payload with no payload lines: the empty payload's md5 must match */
            ct_md5_hex("", 0, e.md5);
            snprintf(e.expected, sizeof e.expected, "%s", expected);
            e.has_payload = true;
            e.md5_bad = strcmp(expected, e.md5) != 0;
        }
        if (e.md5_bad) {
            sum->fail_payload_md5++;
            char why[160];
            snprintf(why, sizeof why, "payload md5 mismatch: has_payload %.32s, payload hashes to %s", e.expected,
                     e.md5);
            note_bad(r, path, e.lineno, why);
        } else {
            sum->ok++;
        }
        count_kind(r, kind);
        /* raw.jsonl: the envelope plus where and when it was written */
        fprintf(raw_jsonl, "{\"timestamp\": ");
        put_json(raw_jsonl, e.stamp);
        fprintf(raw_jsonl, ", \"thread\": %.*s, \"pathname\": ", (int)(m[4].rm_eo - m[4].rm_so), line + m[4].rm_so);
        char pathname[1024];
        snprintf(pathname, sizeof pathname, "%.*s", (int)(m[5].rm_eo - m[5].rm_so), line + m[5].rm_so);
        put_json(raw_jsonl, pathname);
        fprintf(raw_jsonl, ", \"lineno\": %.*s", (int)(m[6].rm_eo - m[6].rm_so), line + m[6].rm_so);
        if (e.has_payload && payload)
            fprintf(raw_jsonl, ", \"payload_filename\": \"payloads/%s.txt\"", e.md5);
        /* the envelope's own members follow (it is a JSON object: drop its braces) */
        const char *ob = memchr(env, '{', env_len), *cb = env + env_len;
        while (cb > ob && *--cb != '}')
            ;
        const char *inner = ob + 1;
        while (inner < cb && (*inner == ' ' || *inner == '\t'))
            inner++;
        if (inner < cb)
            fprintf(raw_jsonl, ", %.*s", (int)(cb - inner), inner);
        fputs("}\n", raw_jsonl);
        free(payload);
        ct_value_free(v);
        if (r->n == r->cap) {
            size_t cap = r->cap ? r->cap * 2 : 256;
            report_event *ne = realloc(r->ev, cap * sizeof *ne);
            if (!ne) {
                free(e.kind);
                free(e.where);
                free(e.meta);
                free(text);
                return ct_error(CT_ERROR_OUT_OF_MEMORY, "trace_report", "out of memory");
            }
            r->ev = ne;
            r->cap = cap;
        }
        r->ev[r->n++] = e;
        if (!e.kind || !e.where || !e.meta)
            r->oom = true;
    }
    free(text);
    return CT_OK;
}

static void html_text(FILE *f, const char *s, size_t max) {
    size_t n = 0;
    for (; *s && n < max; s++, n++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
    if (*s)
        fputs("&hellip;", f);
}

static int kind_cmp(const void *a, const void *b) {
    const kind_count *x = a, *y = b;
    if (x->n != y->n)
        return x->n > y->n ? -1 : 1;
    return strcmp(x->name, y->name);
}

#define MAX_ROWS 20000

static void write_index(FILE *f, const report *r, char **files, size_t nfiles, const ct_trace_report_summary *s) {
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ctorch trace report</title>\n"
          "<style>body{font:14px/1.4 -apple-system,\"Segoe UI\",Helvetica,Arial,sans-serif;margin:20px 28px;color:#222}"
          "h1{font-size:20px}h2{font-size:16px;margin-top:22px}table{border-collapse:collapse;font-size:13px}"
          "th,td{text-align:left;padding:2px 12px 2px 0;vertical-align:top}td.m{font-family:monospace;font-size:12px}"
          ".bad{color:#b00;font-weight:bold}.note{color:#666;font-size:12px}</style></head><body>\n"
          "<h1>ctorch trace report</h1>\n<div class=\"note\">",
          f);
    for (size_t i = 0; i < nfiles; i++) {
        html_text(f, files[i], 1000);
        fputs("<br>", f);
    }
    fputs("</div>\n<h2>Summary</h2><table>\n", f);
    fprintf(f, "<tr><th>events</th><td>%" PRId64 "</td></tr>\n", s->ok + s->fail_payload_md5);
    fprintf(f, "<tr><th>ok</th><td>%" PRId64 "</td></tr>\n", s->ok);
    fprintf(f, "<tr><th>fail_glog</th><td%s>%" PRId64 "</td></tr>\n", s->fail_glog ? " class=\"bad\"" : "",
            s->fail_glog);
    fprintf(f, "<tr><th>fail_json</th><td%s>%" PRId64 "</td></tr>\n", s->fail_json ? " class=\"bad\"" : "",
            s->fail_json);
    fprintf(f, "<tr><th>fail_payload_md5</th><td%s>%" PRId64 "</td></tr>\n",
            s->fail_payload_md5 ? " class=\"bad\"" : "", s->fail_payload_md5);
    fputs("</table>\n", f);
    if (r->nbad) {
        fputs("<h2 class=\"bad\">Failures</h2><ul>\n", f);
        for (size_t i = 0; i < r->nbad; i++) {
            fputs("<li class=\"m\">", f);
            html_text(f, r->bad_lines[i], 1200);
            fputs("</li>\n", f);
        }
        fputs("</ul>\n", f);
    }
    fputs("<h2>Events by kind</h2><table><tr><th>kind</th><th>count</th></tr>\n", f);
    for (size_t i = 0; i < r->nkinds; i++) {
        fputs("<tr><td class=\"m\">", f);
        html_text(f, r->kinds[i].name, 200);
        fprintf(f, "</td><td>%" PRId64 "</td></tr>\n", r->kinds[i].n);
    }
    fputs("</table>\n", f);
    /* the compiler's events (docs/compile.md, Note [Compile events] in
     * src/compile/capture.c; TORCH_TRACE's names): per capture, in order, its graph,
     * joint graph, generated code, guards and metrics, with their payloads */
    size_t ncompile = 0;
    for (size_t i = 0; i < r->n; i++)
        ncompile += compile_event(r->ev[i].kind) != NULL;
    if (ncompile) {
        fputs("<h2>Compiles</h2><table><tr><th>#</th><th>frame/compile</th><th>kind</th><th>envelope</th>"
              "<th>payload</th></tr>\n",
              f);
        for (size_t i = 0; i < r->n; i++) {
            const report_event *e = &r->ev[i];
            const char *label = compile_event(e->kind);
            if (!label)
                continue;
            long long frame = -1, cid = -1;
            const char *p = e->meta ? strstr(e->meta, "\"frame_id\": ") : NULL;
            if (p)
                frame = strtoll(p + 12, NULL, 10);
            p = e->meta ? strstr(e->meta, "\"frame_compile_id\": ") : NULL;
            if (p)
                cid = strtoll(p + 20, NULL, 10);
            fprintf(f, "<tr><td>%zu</td><td class=\"m\">", i);
            if (frame >= 0 && cid >= 0)
                fprintf(f, "%lld/%lld", frame, cid);
            fputs("</td><td class=\"m\">", f);
            html_text(f, e->kind, 200);
            fputs("</td><td class=\"m\">", f);
            html_text(f, e->meta ? e->meta : "", 400);
            fputs("</td><td class=\"m\">", f);
            if (e->has_payload)
                fprintf(f, "<a href=\"payloads/%s.txt\">%s</a>", e->md5, label);
            fputs("</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    fputs("<h2>Events</h2>\n", f);
    if (r->n > MAX_ROWS)
        fprintf(f, "<div class=\"note\">The first %d of %zu events; raw.jsonl has them all.</div>\n", MAX_ROWS, r->n);
    fputs("<table><tr><th>#</th><th>time</th><th>source</th><th>kind</th><th>envelope</th><th>payload</th></tr>\n", f);
    for (size_t i = 0; i < r->n && i < MAX_ROWS; i++) {
        const report_event *e = &r->ev[i];
        fprintf(f, "<tr><td>%zu</td><td class=\"m\">%s</td><td class=\"m\">", i, e->stamp);
        html_text(f, e->where ? e->where : "", 200);
        fputs("</td><td class=\"m\">", f);
        html_text(f, e->kind ? e->kind : "", 200);
        fputs("</td><td class=\"m\">", f);
        html_text(f, e->meta ? e->meta : "", 400);
        fputs("</td><td class=\"m\">", f);
        if (e->has_payload)
            fprintf(f, "<a href=\"payloads/%s.txt\">%s</a>%s", e->md5, e->md5,
                    e->md5_bad ? " <span class=\"bad\">md5 mismatch</span>" : "");
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n<p class=\"note\">raw.jsonl: every envelope with its timestamp, thread, pathname and lineno; "
          "raw.log: the input as read.</p>\n</body></html>\n",
          f);
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool make_dir(const char *path) { return mkdir(path, 0777) == 0 || errno == EEXIST; }

ct_status ct_trace_report(const char *input, const char *outdir, ct_trace_report_summary *summary) {
    if (!input || !outdir || !summary)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "trace_report", "input, outdir and summary must not be NULL");
    memset(summary, 0, sizeof *summary);
    struct stat st;
    if (stat(input, &st) != 0)
        return ct_error(CT_ERROR_IO, "trace_report", "cannot read '%s': %s", input, strerror(errno));
    char **files = NULL;
    size_t nfiles = 0;
    ct_status rc = CT_OK;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(input);
        if (!d)
            return ct_error(CT_ERROR_IO, "trace_report", "cannot list '%s'", input);
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (!ends_with(de->d_name, ".log"))
                continue;
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", input, de->d_name);
            char **nf = realloc(files, (nfiles + 1) * sizeof *nf);
            char *s = dup_n(path, strlen(path));
            if (!nf || !s) {
                free(s);
                if (nf)
                    files = nf;
                rc = ct_error(CT_ERROR_OUT_OF_MEMORY, "trace_report", "out of memory");
                break;
            }
            files = nf;
            files[nfiles++] = s;
        }
        closedir(d);
        if (rc == CT_OK && nfiles == 0)
            rc = ct_error(CT_ERROR_VALUE, "trace_report", "no .log files in '%s'", input);
        if (nfiles)
            qsort(files, nfiles, sizeof *files, str_cmp);
    } else {
        files = malloc(sizeof *files);
        if (files && (files[0] = dup_n(input, strlen(input))) != NULL)
            nfiles = 1;
        else
            rc = ct_error(CT_ERROR_OUT_OF_MEMORY, "trace_report", "out of memory");
    }
    char path[PATH_MAX];
    FILE *raw_jsonl = NULL, *raw_log = NULL;
    if (rc == CT_OK) {
        snprintf(path, sizeof path, "%s/payloads", outdir);
        if (!make_dir(outdir) || !make_dir(path))
            rc = ct_error(CT_ERROR_IO, "trace_report", "cannot create '%s': %s", path, strerror(errno));
    }
    if (rc == CT_OK) {
        snprintf(path, sizeof path, "%s/raw.jsonl", outdir);
        raw_jsonl = fopen(path, "w");
        snprintf(path, sizeof path, "%s/raw.log", outdir);
        raw_log = fopen(path, "w");
        if (!raw_jsonl || !raw_log)
            rc = ct_error(CT_ERROR_IO, "trace_report", "cannot write into '%s'", outdir);
    }
    report r = {0};
    regex_t re;
    bool have_re = false;
    if (rc == CT_OK) {
        have_re = regcomp(&re,
                          "^([VIWEC])([0-9]{4}) ([0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}) ([0-9]+) ([^ ]+):([0-9]+)\\] "
                          "(.*)$",
                          REG_EXTENDED) == 0;
        if (!have_re)
            rc = ct_error(CT_ERROR_RUNTIME, "trace_report", "could not compile the line pattern");
    }
    for (size_t i = 0; rc == CT_OK && i < nfiles; i++) {
        rc = read_log(&r, (int)i, files[i], outdir, raw_jsonl, raw_log, &re, summary);
        summary->files++;
    }
    if (rc == CT_OK && r.oom)
        rc = ct_error(CT_ERROR_OUT_OF_MEMORY, "trace_report", "out of memory");
    if (rc == CT_OK) {
        qsort(r.kinds, r.nkinds, sizeof *r.kinds, kind_cmp);
        snprintf(path, sizeof path, "%s/index.html", outdir);
        FILE *f = fopen(path, "w");
        if (!f) {
            rc = ct_error(CT_ERROR_IO, "trace_report", "cannot write '%s'", path);
        } else {
            write_index(f, &r, files, nfiles, summary);
            if (ferror(f) | fclose(f))
                rc = ct_error(CT_ERROR_IO, "trace_report", "error writing '%s'", path);
        }
    }
    if (raw_jsonl && (ferror(raw_jsonl) | fclose(raw_jsonl)) && rc == CT_OK)
        rc = ct_error(CT_ERROR_IO, "trace_report", "error writing raw.jsonl in '%s'", outdir);
    if (raw_log && (ferror(raw_log) | fclose(raw_log)) && rc == CT_OK)
        rc = ct_error(CT_ERROR_IO, "trace_report", "error writing raw.log in '%s'", outdir);
    if (have_re)
        regfree(&re);
    for (size_t i = 0; i < r.n; i++) {
        free(r.ev[i].kind);
        free(r.ev[i].where);
        free(r.ev[i].meta);
    }
    free(r.ev);
    for (size_t i = 0; i < r.nkinds; i++)
        free(r.kinds[i].name);
    free(r.kinds);
    for (size_t i = 0; i < r.nbad; i++)
        free(r.bad_lines[i]);
    free(r.bad_lines);
    for (size_t i = 0; i < nfiles; i++)
        free(files[i]);
    free(files);
    return rc;
}
