/* The structured log: PyTorch's TORCH_TRACE line format (formats.md §4) for what the
 * runtime decided. See docs/profiling.md.
 *
 *   V1122 07:40:01.123456 4242 src/cpu/linalg.c:80] {"kernel_choice": {...}}
 *   <tab>payload line
 */
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef CT_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "core/alloc.h"
#include "util/json.h"
#include "util/value.h"
#include "util/md5.h"
#include "observe/profiler_internal.h"
#include "observe/trace_log.h"

atomic_bool ct_trace_log_on;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *g_file;
static char g_path[PATH_MAX];

/* Note [Kernel choice dedup]
 * A training loop makes the same choice thousands of times; the log keeps the first
 * of each distinct (kernel, choice, dtype, m, n, k), remembered by a 64-bit hash in an
 * open-addressing set. When the set fills up it starts over, so a long run with ever
 * new shapes repeats an old line now and then instead of growing without bound. */
#define SEEN_CAP 4096
static uint64_t g_seen[SEEN_CAP];
static size_t g_nseen;

/* The path of the deciding source below the repository root, as PyTorch's lines show
 * a path below the package. */
static const char *rel_path(const char *file) {
    const char *p = strstr(file, "/src/");
    return p ? p + 1 : file;
}

static void write_locked_env(const char *file, int line, const char *event, const char *meta, const char *env,
                             const char *payload) {
    if (!g_file)
        return;
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    fprintf(g_file, "V%02d%02d %02d:%02d:%02d.%06ld %ld %s:%d] {\"%s\": %s", tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
            tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000, (long)getpid(), rel_path(file), line, event,
            meta ? meta : "{}");
    if (env && *env)
        fprintf(g_file, ", %s", env);
    if (payload) {
        char hex[33];
        ct_md5_hex(payload, strlen(payload), hex);
        fprintf(g_file, ", \"has_payload\": \"%s\"}\n", hex);
        /* one continuation line per payload line; a reader rejoins them with '\n' */
        const char *p = payload;
        for (;;) {
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            fputc('\t', g_file);
            fwrite(p, 1, n, g_file);
            fputc('\n', g_file);
            if (!nl)
                break;
            p = nl + 1;
        }
    } else {
        fputs("}\n", g_file);
    }
    fflush(g_file); /* a crash keeps every decision made before it */
}

static void write_locked(const char *file, int line, const char *event, const char *meta, const char *payload) {
    write_locked_env(file, line, event, meta, NULL, payload);
}

void ct_trace_log_write_env(const char *file, int line, const char *event, const char *meta, const char *env,
                            const char *payload) {
    if (!CT_TRACE_LOG_ON())
        return;
    pthread_mutex_lock(&g_lock);
    write_locked_env(file, line, event, meta, env, payload);
    pthread_mutex_unlock(&g_lock);
}

void ct_trace_log_write(const char *file, int line, const char *event, const char *meta, const char *payload) {
    if (!CT_TRACE_LOG_ON())
        return;
    pthread_mutex_lock(&g_lock);
    write_locked(file, line, event, meta, payload);
    pthread_mutex_unlock(&g_lock);
}

/* A JSON string literal of s into buf (s is a path or name: truncated if long). */
static const char *jstr(const char *s, char *buf, size_t cap) {
    if (!s)
        return "null";
    ct_json_buf jb = {0};
    size_t n = strlen(s);
    if (ct_utf8_invalid_at((const uint8_t *)s, n) >= 0) {
        snprintf(buf, cap, "\"(not UTF-8)\"");
    } else {
        ct_json_put_string(&jb, s, n);
        if (jb.failed || jb.len >= cap)
            snprintf(buf, cap, "\"(too long)\"");
        else
            snprintf(buf, cap, "%.*s", (int)jb.len, jb.data);
    }
    ct_json_buf_free(&jb);
    return buf;
}

static void write_start(void) {
    char meta[1024];
    int omp = 0;
#ifdef CT_HAVE_OPENMP
    omp = 1;
#endif
    int blas_threads = 0;
    const char *blas = "none", *blas_config = "";
#ifdef CT_HAVE_OPENBLAS
    blas = "OpenBLAS";
    blas_threads = openblas_get_num_threads();
    blas_config = openblas_get_config();
#endif
    char cfg[256];
    snprintf(meta, sizeof meta,
             "{\"version\": \"%s\", \"pid\": %ld, \"num_threads\": %d, \"openmp\": %s, \"blas\": \"%s\", "
             "\"blas_threads\": %d, \"blas_config\": %s}",
             ct_version(), (long)getpid(), ct_get_num_threads(), omp ? "true" : "false", blas, blas_threads,
             jstr(blas_config, cfg, sizeof cfg));
    write_locked(__FILE__, __LINE__, "ctorch_start", meta, ct_build_info());
}

ct_status ct_trace_log_start(const char *dir) {
    if (!dir)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "trace_log_start", "dir is NULL");
    if (!*dir)
        return ct_error(CT_ERROR_VALUE, "trace_log_start", "dir is empty");
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/dedicated_log_ctorch_trace_%ld_XXXXXX.log", dir, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof path)
        return ct_error(CT_ERROR_VALUE, "trace_log_start", "directory path is too long");
    pthread_mutex_lock(&g_lock);
    if (g_file) {
        pthread_mutex_unlock(&g_lock);
        return ct_error(CT_ERROR_RUNTIME, "trace_log_start",
                        "the structured log is already open at '%s'; call ct_trace_log_stop first", g_path);
    }
    /* mkstemps makes the random part, as PyTorch's NamedTemporaryFile does */
    int fd = mkstemps(path, 4);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        pthread_mutex_unlock(&g_lock);
        return ct_error(CT_ERROR_IO, "trace_log_start", "cannot create a log file in '%s'", dir);
    }
    g_file = f;
    memcpy(g_path, path, sizeof g_path);
    g_nseen = 0;
    memset(g_seen, 0, sizeof g_seen);
    write_start();
    atomic_store(&ct_trace_log_on, true);
    pthread_mutex_unlock(&g_lock);
    ct_profiler_install_alloc_observer();
    return CT_OK;
}

ct_status ct_trace_log_stop(void) {
    pthread_mutex_lock(&g_lock);
    if (!g_file) {
        pthread_mutex_unlock(&g_lock);
        return ct_error(CT_ERROR_RUNTIME, "trace_log_stop", "the structured log is not open");
    }
    atomic_store(&ct_trace_log_on, false);
    int bad = ferror(g_file);
    bad |= fclose(g_file);
    g_file = NULL;
    char path[PATH_MAX];
    memcpy(path, g_path, sizeof path);
    g_path[0] = '\0';
    pthread_mutex_unlock(&g_lock);
    if (bad)
        return ct_error(CT_ERROR_IO, "trace_log_stop", "error writing the structured log '%s'", path);
    return CT_OK;
}

bool ct_trace_log_enabled(void) { return CT_TRACE_LOG_ON(); }

const char *ct_trace_log_path(void) { return CT_TRACE_LOG_ON() ? g_path : NULL; }

static bool valid_event_name(const char *s) {
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

ct_status ct_trace_log_event(const char *event, const char *metadata_json, const char *payload) {
    if (!event)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "trace_log_event", "event is NULL");
    if (!valid_event_name(event))
        return ct_error(CT_ERROR_VALUE, "trace_log_event", "event name '%s' must be a non-empty [A-Za-z0-9_] identifier",
                        event);
    if (metadata_json) {
        ct_value *v = ct_json_parse(metadata_json, strlen(metadata_json), "trace_log_event", "metadata");
        if (!v)
            return ct_last_status();
        bool is_dict = v->type == CT_VALUE_DICT;
        ct_value_free(v);
        if (!is_dict)
            return ct_error(CT_ERROR_VALUE, "trace_log_event", "metadata must be a JSON object");
        /* one event per line: a newline inside the envelope would start a payload */
        if (strchr(metadata_json, '\n') || strchr(metadata_json, '\r'))
            return ct_error(CT_ERROR_VALUE, "trace_log_event", "metadata must be on one line");
    }
    if (payload && ct_utf8_invalid_at((const uint8_t *)payload, strlen(payload)) >= 0)
        return ct_error(CT_ERROR_VALUE, "trace_log_event", "payload is not valid UTF-8");
    ct_trace_log_write(__FILE__, __LINE__, event, metadata_json, payload);
    return CT_OK;
}

/* ------------------------------------------------------------------ runtime events */

void ct_trace_log_override(ct_op op, ct_dispatch_key key, int64_t handle, uint32_t flags) {
    if (!CT_TRACE_LOG_ON())
        return;
    char meta[256];
    snprintf(meta, sizeof meta, "{\"op\": \"%s\", \"key\": \"%s\", \"handle\": %" PRId64 ", \"allow_multiple\": %s}",
             ct_op_name(op), ct_dispatch_key_name(key), handle,
             flags & CT_OVERRIDE_ALLOW_MULTIPLE ? "true" : "false");
    ct_trace_log_write(__FILE__, __LINE__, "op_override", meta, NULL);
}

void ct_trace_log_override_removed(ct_op op, ct_dispatch_key key, int64_t handle) {
    if (!CT_TRACE_LOG_ON())
        return;
    char meta[256];
    snprintf(meta, sizeof meta, "{\"op\": \"%s\", \"key\": \"%s\", \"handle\": %" PRId64 "}", ct_op_name(op),
             ct_dispatch_key_name(key), handle);
    ct_trace_log_write(__FILE__, __LINE__, "op_override_removed", meta, NULL);
}

void ct_trace_log_op_logging(bool enabled, const char *path, const char *source) {
    if (!CT_TRACE_LOG_ON())
        return;
    char meta[1200], p[1024];
    snprintf(meta, sizeof meta, "{\"enabled\": %s, \"path\": %s, \"source\": \"%s\"}", enabled ? "true" : "false",
             jstr(path, p, sizeof p), source);
    ct_trace_log_write(__FILE__, __LINE__, "op_logging", meta, NULL);
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* True the first time key is seen (Note [Kernel choice dedup]); under g_lock. */
static bool first_sighting(uint64_t key) {
    if (key == 0)
        key = 1; /* 0 marks an empty slot */
    size_t i = (size_t)(key % SEEN_CAP);
    while (g_seen[i]) {
        if (g_seen[i] == key)
            return false;
        i = (i + 1) % SEEN_CAP;
    }
    if (g_nseen >= SEEN_CAP / 2) {
        memset(g_seen, 0, sizeof g_seen);
        g_nseen = 0;
        i = (size_t)(key % SEEN_CAP);
    }
    g_seen[i] = key;
    g_nseen++;
    return true;
}

void ct_trace_log_kernel_choice(const char *file, int line, const char *kernel, const char *choice, ct_dtype dtype,
                                int64_t m, int64_t n, int64_t k) {
    if (!CT_TRACE_LOG_ON())
        return;
    int64_t dims[4] = {(int64_t)dtype, m, n, k};
    uint64_t h = fnv1a(14695981039346656037ull, kernel, strlen(kernel) + 1);
    h = fnv1a(h, choice, strlen(choice) + 1);
    h = fnv1a(h, dims, sizeof dims);
    char meta[256];
    snprintf(meta, sizeof meta,
             "{\"kernel\": \"%s\", \"choice\": \"%s\", \"dtype\": \"%s\", \"m\": %" PRId64 ", \"n\": %" PRId64
             ", \"k\": %" PRId64 "}",
             kernel, choice, ct_dtype_name(dtype), m, n, k);
    pthread_mutex_lock(&g_lock);
    if (first_sighting(h))
        write_locked(file, line, "kernel_choice", meta, NULL);
    pthread_mutex_unlock(&g_lock);
}

void ct_trace_log_alloc_event(ct_device device, int action, uint64_t addr, uint64_t size, int64_t allocated) {
    if (!CT_TRACE_LOG_ON())
        return;
    char meta[256], dev[32];
    ct_device_str(device, dev, sizeof dev);
    if (action == CT_TRACE_OOM)
        snprintf(meta, sizeof meta,
                 "{\"device\": \"%s\", \"size\": %" PRIu64 ", \"device_free\": %" PRIu64 ", \"allocated\": %" PRId64
                 "}",
                 dev, size, addr, allocated);
    else
        snprintf(meta, sizeof meta, "{\"device\": \"%s\", \"size\": %" PRIu64 ", \"allocated\": %" PRId64 "}", dev,
                 size, allocated);
    ct_trace_log_write(__FILE__, __LINE__, action == CT_TRACE_OOM ? "alloc_oom" : "alloc_retry", meta, NULL);
}

/* ------------------------------------------------------------------ CT_TRACE */

void ct_trace_log_init_from_env(void) {
    const char *dir = getenv("CT_TRACE");
    if (!dir || !*dir)
        return;
    if (ct_trace_log_start(dir) != CT_OK) {
        fprintf(stderr, "ctorch: CT_TRACE: %s\n", ct_last_error());
        ct_clear_error();
    }
}
