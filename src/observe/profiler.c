/* The profiler: op spans and allocator events as a Chrome trace (docs/profiling.md). */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "util/json.h"
#include "observe/profiler_internal.h"
#include "observe/trace_log.h"

/* Note [Profiler buffers]
 * Each thread appends to its own buffer, so recording takes only that buffer's lock,
 * which no other thread wants until ct_profiler_stop. A buffer belongs to one session
 * at a time: a thread whose buffer still holds an older session's leftovers (an op
 * that finished after the stop) clears it on its next append. Buffers live on a global
 * list until their thread exits and a later stop has merged them; a thread that exits
 * mid-session therefore still contributes its events. Events are pushed when a span
 * ends, so children come before parents; the writer sorts by start time (longer span
 * first on ties), which is the order trace viewers nest by. */

enum { EV_SPAN, EV_RANGE, EV_MEM, EV_OOM, EV_RETRY };

typedef struct prof_event {
    int64_t ts, dur;       /* ns since the session started */
    const char *name;      /* static name (ops); ranges keep theirs in the arena */
    uint32_t args, nargs;  /* arena slice: spans' preformatted args, ranges' name */
    int64_t bytes, freed;  /* spans: requested bytes allocated / freed while running;
                              memory events: signed size */
    int64_t total;         /* memory events: allocated bytes on the device after */
    uint64_t addr;
    uint8_t kind;
    int8_t dev_type;
    int16_t dev_index;
} prof_event;

typedef struct thread_buf {
    pthread_mutex_t lock;
    uint64_t session;
    prof_event *ev;
    size_t n, cap;
    char *arena;
    size_t alen, acap;
    bool failed; /* an append ran out of memory: the trace says so */
    bool dead;   /* its thread exited */
    int64_t tid;
    char name[48];
    struct thread_buf *next;
} thread_buf;

atomic_bool ct_profiler_active;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* start/stop, buffer list */
static thread_buf *g_bufs;
static _Atomic uint64_t g_session;
static int64_t g_t0; /* CLOCK_MONOTONIC ns at start */
static FILE *g_out;
static char g_path[1024];
static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static CT_THREAD_LOCAL thread_buf *tl_buf;
/* Requested bytes this thread allocated / freed, for the spans' "bytes" args. */
static CT_THREAD_LOCAL int64_t tl_alloc_bytes, tl_free_bytes;

#define MAX_RANGES 64
typedef struct range_frame {
    uint64_t session; /* 0: pushed while off, nothing to record */
    int64_t t0, a0, f0;
    char name[96];
} range_frame;
/* Allocated on a thread's first push, freed at its exit: 8 KiB inline would not fit the
 * library's static TLS (Note [Thread-local storage]). */
static CT_THREAD_LOCAL range_frame *tl_ranges;
static CT_THREAD_LOCAL int tl_depth;
static pthread_key_t g_range_key;
static pthread_once_t g_range_key_once = PTHREAD_ONCE_INIT;
static bool g_range_key_ok;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void buf_thread_exit(void *p) {
    thread_buf *b = p;
    tl_buf = NULL; /* a later destructor that allocates gets a fresh buffer */
    pthread_mutex_lock(&b->lock);
    b->dead = true;
    pthread_mutex_unlock(&b->lock);
}

static void key_init(void) { pthread_key_create(&g_key, buf_thread_exit); }

static void ranges_thread_exit(void *p) {
    free(p);
    tl_ranges = NULL;
    tl_depth = 0;
}

static void range_key_init(void) { g_range_key_ok = pthread_key_create(&g_range_key, ranges_thread_exit) == 0; }

/* This thread's range stack, allocated on first use; NULL with an error set. */
static range_frame *get_ranges(void) {
    if (tl_ranges)
        return tl_ranges;
    pthread_once(&g_range_key_once, range_key_init);
    range_frame *r = g_range_key_ok ? calloc(MAX_RANGES, sizeof *r) : NULL;
    if (!r || pthread_setspecific(g_range_key, r) != 0) {
        free(r);
        ct_error(CT_ERROR_OUT_OF_MEMORY, "profiler_range_push", "could not allocate this thread's range stack");
        return NULL;
    }
    tl_ranges = r;
    return r;
}

static thread_buf *get_buf(void) {
    if (tl_buf)
        return tl_buf;
    pthread_once(&g_key_once, key_init);
    thread_buf *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    pthread_mutex_init(&b->lock, NULL);
    b->tid = (int64_t)syscall(SYS_gettid);
    if (b->tid == (int64_t)getpid())
        snprintf(b->name, sizeof b->name, "main thread (%" PRId64 ")", b->tid);
    else
        snprintf(b->name, sizeof b->name, "thread %" PRId64, b->tid);
    pthread_mutex_lock(&g_lock);
    b->next = g_bufs;
    g_bufs = b;
    pthread_mutex_unlock(&g_lock);
    pthread_setspecific(g_key, b);
    tl_buf = b;
    return b;
}

/* Locks b for an append in the current session; false (unlocked) when there is none. */
static bool buf_begin(thread_buf *b, uint64_t session) {
    pthread_mutex_lock(&b->lock);
    if (!atomic_load(&ct_profiler_active) || atomic_load(&g_session) != session) {
        pthread_mutex_unlock(&b->lock);
        return false;
    }
    if (b->session != session) {
        b->session = session;
        b->n = b->alen = 0;
        b->failed = false;
    }
    return true;
}

static prof_event *buf_push(thread_buf *b) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        prof_event *e = realloc(b->ev, cap * sizeof *e);
        if (!e) {
            b->failed = true;
            return NULL;
        }
        b->ev = e;
        b->cap = cap;
    }
    prof_event *e = &b->ev[b->n++];
    memset(e, 0, sizeof *e);
    return e;
}

/* Copies s into the arena; false when out of memory. */
static bool arena_put(thread_buf *b, const char *s, size_t len, uint32_t *off) {
    if (b->alen + len > UINT32_MAX) {
        b->failed = true;
        return false;
    }
    if (b->alen + len > b->acap) {
        size_t cap = b->acap ? b->acap : 65536;
        while (cap < b->alen + len)
            cap *= 2;
        char *a = realloc(b->arena, cap);
        if (!a) {
            b->failed = true;
            return false;
        }
        b->arena = a;
        b->acap = cap;
    }
    memcpy(b->arena + b->alen, s, len);
    *off = (uint32_t)b->alen;
    b->alen += len;
    return true;
}

/* ------------------------------------------------------------------ recording */

/* A bounded text buffer. The trace's text is built with these rather than printf,
 * whose general path costs several thousand instructions a line; on overflow `over` is
 * set and the text is cut. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool over;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->len + n > b->cap) {
        b->over = true;
        n = b->cap - b->len;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_int(sbuf *b, int64_t v) {
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[n++] = '-';
    char out[24];
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    sb_put(b, out, (size_t)n);
}

/* ns as microseconds with three decimals, the unit Chrome traces use */
static void sb_us(sbuf *b, int64_t ns) {
    if (ns < 0) {
        sb_put(b, "-", 1);
        ns = -ns;
    }
    sb_int(b, ns / 1000);
    int f = (int)(ns % 1000);
    char frac[4] = {'.', (char)('0' + f / 100), (char)('0' + f / 10 % 10), (char)('0' + f % 10)};
    sb_put(b, frac, 4);
}

static void sb_json_string(sbuf *b, const char *s, size_t n) {
    ct_json_buf jb = {0};
    ct_json_put_string(&jb, s, n);
    if (jb.failed)
        sb_puts(b, "\"\"");
    else
        sb_put(b, jb.data, jb.len);
    ct_json_buf_free(&jb);
}

/* The span's args without the byte counts, as JSON members:
 *   "Input Dims": [[2, 3], [3]], "Input type": ["float32", "float32"], "Device": "cpu" */
static size_t format_args(const ct_call *call, char *buf, size_t cap) {
    sbuf b = {buf, 0, cap, false};
    int n = call->nin + call->nlist;
    const ct_tensor *first = NULL;
    sb_puts(&b, "\"Input Dims\": [");
    for (int i = 0; i < n; i++) {
        const ct_tensor *t = i < call->nin ? call->in[i] : call->list[i - call->nin];
        if (i)
            sb_put(&b, ", ", 2);
        sb_put(&b, "[", 1);
        for (int d = 0; t && d < t->ndim; d++) {
            if (d)
                sb_put(&b, ", ", 2);
            sb_int(&b, t->shape[d]);
        }
        sb_put(&b, "]", 1);
        if (t && !first)
            first = t;
    }
    sb_puts(&b, "], \"Input type\": [");
    for (int i = 0; i < n; i++) {
        const ct_tensor *t = i < call->nin ? call->in[i] : call->list[i - call->nin];
        if (i)
            sb_put(&b, ", ", 2);
        sb_put(&b, "\"", 1);
        sb_puts(&b, t ? ct_dtype_name(t->dtype) : "");
        sb_put(&b, "\"", 1);
    }
    char dev[32] = "cpu";
    if (first && first->device.type != CT_DEVICE_CPU)
        ct_device_str(first->device, dev, sizeof dev);
    sb_puts(&b, "], \"Device\": \"");
    sb_puts(&b, dev);
    sb_put(&b, "\"", 1);
    if (call->mode != CT_CALL_FUNCTIONAL)
        sb_puts(&b, call->mode == CT_CALL_INPLACE ? ", \"Mode\": \"inplace\"" : ", \"Mode\": \"out\"");
    if (b.over) { /* a list of many tensors: say so rather than cut the JSON short */
        b.len = b.over = 0;
        sb_puts(&b, "\"Input Dims\": \"(too long)\"");
    }
    return b.len;
}

ct_status ct_profiler_dispatch(ct_call *call) {
    uint64_t session = atomic_load(&g_session);
    thread_buf *b = get_buf();
    int64_t a0 = tl_alloc_bytes, f0 = tl_free_bytes;
    int64_t t0 = now_ns();
    ct_status st = ct_dispatch_run(call);
    int64_t t1 = now_ns();
    if (!b)
        return st;
    char args[1024];
    size_t nargs = format_args(call, args, sizeof args);
    if (!buf_begin(b, session))
        return st;
    prof_event *e = buf_push(b);
    if (e && arena_put(b, args, nargs, &e->args)) {
        e->kind = EV_SPAN;
        e->name = ct_op_name(call->op);
        e->ts = t0 - g_t0;
        e->dur = t1 - t0;
        e->nargs = (uint32_t)nargs;
        e->bytes = tl_alloc_bytes - a0;
        e->freed = tl_free_bytes - f0;
    } else if (e) {
        b->n--;
    }
    pthread_mutex_unlock(&b->lock);
    return st;
}

static void alloc_observer(ct_device device, int action, uint64_t addr, uint64_t size, int64_t allocated) {
    if (action == CT_TRACE_OOM || action == CT_ALLOC_EVENT_RETRY)
        ct_trace_log_alloc_event(device, action, addr, size, allocated);
    if (!atomic_load_explicit(&ct_profiler_active, memory_order_relaxed))
        return;
    int kind;
    int64_t bytes = (int64_t)size;
    switch (action) {
    case CT_TRACE_ALLOC:
        kind = EV_MEM;
        tl_alloc_bytes += bytes;
        break;
    case CT_TRACE_FREE_REQUESTED:
        kind = EV_MEM;
        bytes = -bytes;
        tl_free_bytes += (int64_t)size;
        break;
    case CT_TRACE_OOM: kind = EV_OOM; break;
    case CT_ALLOC_EVENT_RETRY: kind = EV_RETRY; break;
    default: return; /* segment events: reserved memory, not what tensors hold */
    }
    uint64_t session = atomic_load(&g_session);
    thread_buf *b = get_buf();
    if (!b || !buf_begin(b, session))
        return;
    prof_event *e = buf_push(b);
    if (e) {
        e->kind = (uint8_t)kind;
        e->ts = now_ns() - g_t0;
        e->bytes = bytes;
        e->total = allocated;
        e->addr = addr;
        e->dev_type = (int8_t)device.type;
        e->dev_index = (int16_t)device.index;
    }
    pthread_mutex_unlock(&b->lock);
}

void ct_profiler_install_alloc_observer(void) { ct_alloc_set_observer(alloc_observer); }

/* ------------------------------------------------------------------ ranges */

ct_status ct_profiler_range_push(const char *name) {
    if (!name)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "profiler_range_push", "name is NULL");
    if (ct_utf8_invalid_at((const uint8_t *)name, strlen(name)) >= 0)
        return ct_error(CT_ERROR_VALUE, "profiler_range_push", "name is not valid UTF-8");
    if (tl_depth >= MAX_RANGES)
        return ct_error(CT_ERROR_RUNTIME, "profiler_range_push",
                        "ranges nest at most %d deep on a thread; pop the ones that ended", MAX_RANGES);
    range_frame *ranges = get_ranges();
    if (!ranges)
        return ct_last_status();
    range_frame *f = &ranges[tl_depth++];
    f->session = atomic_load_explicit(&ct_profiler_active, memory_order_relaxed) ? atomic_load(&g_session) : 0;
    if (f->session) {
        /* cut at a character boundary so the stored name stays valid UTF-8 */
        size_t n = strlen(name);
        if (n >= sizeof f->name) {
            n = sizeof f->name - 1;
            while (n > 0 && ((unsigned char)name[n] & 0xC0) == 0x80)
                n--;
        }
        memcpy(f->name, name, n);
        f->name[n] = '\0';
        f->a0 = tl_alloc_bytes;
        f->f0 = tl_free_bytes;
        f->t0 = now_ns();
    }
    return CT_OK;
}

ct_status ct_profiler_range_pop(void) {
    if (tl_depth == 0)
        return ct_error(CT_ERROR_RUNTIME, "profiler_range_pop", "no range is open on this thread");
    range_frame *f = &tl_ranges[--tl_depth];
    if (!f->session)
        return CT_OK;
    int64_t t1 = now_ns();
    thread_buf *b = get_buf();
    if (!b || !buf_begin(b, f->session))
        return CT_OK;
    prof_event *e = buf_push(b);
    if (e && arena_put(b, f->name, strlen(f->name), &e->args)) {
        e->kind = EV_RANGE;
        e->ts = f->t0 - g_t0;
        e->dur = t1 - f->t0;
        e->nargs = (uint32_t)strlen(f->name);
        e->bytes = tl_alloc_bytes - f->a0;
        e->freed = tl_free_bytes - f->f0;
    } else if (e) {
        b->n--;
    }
    pthread_mutex_unlock(&b->lock);
    return CT_OK;
}

/* ------------------------------------------------------------------ start / stop */

bool ct_profiler_enabled(void) { return atomic_load(&ct_profiler_active); }

ct_status ct_profiler_start(const char *path) {
    if (!path)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "profiler_start", "path is NULL");
    if (!*path)
        return ct_error(CT_ERROR_VALUE, "profiler_start", "path is empty");
    if (strlen(path) >= sizeof g_path)
        return ct_error(CT_ERROR_VALUE, "profiler_start", "path is longer than %zu bytes", sizeof g_path - 1);
    pthread_mutex_lock(&g_lock);
    if (atomic_load(&ct_profiler_active)) {
        pthread_mutex_unlock(&g_lock);
        return ct_error(CT_ERROR_RUNTIME, "profiler_start",
                        "the profiler is already recording to '%s'; call ct_profiler_stop first", g_path);
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        pthread_mutex_unlock(&g_lock);
        return ct_error(CT_ERROR_IO, "profiler_start", "cannot open '%s' for writing", path);
    }
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    g_out = f;
    snprintf(g_path, sizeof g_path, "%s", path);
    g_t0 = now_ns();
    atomic_fetch_add(&g_session, 1);
    ct_profiler_install_alloc_observer();
    atomic_store(&ct_profiler_active, true);
    ct_dispatch_observe_calls(true);
    pthread_mutex_unlock(&g_lock);
    if (CT_TRACE_LOG_ON()) {
        char meta[1200];
        ct_json_buf jb = {0};
        ct_json_put_string(&jb, path, strlen(path));
        snprintf(meta, sizeof meta, "{\"action\": \"start\", \"path\": %.*s}", jb.failed ? 2 : (int)jb.len,
                 jb.failed ? "\"\"" : jb.data);
        ct_json_buf_free(&jb);
        ct_trace_log_write(__FILE__, __LINE__, "profiler", meta, NULL);
    }
    return CT_OK;
}

/* One thread's events, taken out of its buffer at stop. */
typedef struct taken {
    prof_event *ev;
    size_t n;
    char *arena;
    int64_t tid;
    char name[48];
    bool failed;
} taken;

typedef struct ev_ref {
    const prof_event *e;
    const taken *t;
} ev_ref;

static int ev_cmp(const void *pa, const void *pb) {
    const prof_event *a = ((const ev_ref *)pa)->e, *b = ((const ev_ref *)pb)->e;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    if (a->dur != b->dur)
        return a->dur > b->dur ? -1 : 1;
    return 0;
}

static void write_event(sbuf *b, long pid, const ev_ref *r) {
    const prof_event *e = r->e;
    const taken *t = r->t;
    char dev[32];
    ct_device d = {(ct_device_type)e->dev_type, e->dev_index};
    if (e->kind != EV_SPAN && e->kind != EV_RANGE) {
        if (d.type == CT_DEVICE_CPU)
            memcpy(dev, "cpu", 4); /* the common case, without snprintf */
        else
            ct_device_str(d, dev, sizeof dev);
    }
    switch (e->kind) {
    case EV_SPAN:
    case EV_RANGE:
        sb_puts(b, "{\"name\":");
        if (e->kind == EV_SPAN) {
            sb_put(b, "\"", 1);
            sb_puts(b, e->name);
            sb_puts(b, "\",\"cat\":\"op\"");
        } else {
            sb_json_string(b, t->arena + e->args, e->nargs);
            sb_puts(b, ",\"cat\":\"user_annotation\"");
        }
        sb_puts(b, ",\"ph\":\"X\",\"ts\":");
        sb_us(b, e->ts);
        sb_puts(b, ",\"dur\":");
        sb_us(b, e->dur);
        break;
    case EV_MEM:
        sb_puts(b, "{\"name\":\"[memory]\",\"cat\":\"memory\",\"ph\":\"i\",\"s\":\"t\",\"ts\":");
        sb_us(b, e->ts);
        break;
    default:
        sb_puts(b, e->kind == EV_OOM ? "{\"name\":\"[OutOfMemory]\"" : "{\"name\":\"[alloc retry]\"");
        sb_puts(b, ",\"cat\":\"memory\",\"ph\":\"i\",\"s\":\"p\",\"ts\":");
        sb_us(b, e->ts);
        break;
    }
    sb_puts(b, ",\"pid\":");
    sb_int(b, pid);
    sb_puts(b, ",\"tid\":");
    sb_int(b, t->tid);
    sb_puts(b, ",\"args\":{");
    switch (e->kind) {
    case EV_SPAN:
    case EV_RANGE:
        if (e->kind == EV_SPAN) {
            sb_put(b, t->arena + e->args, e->nargs);
            sb_put(b, ", ", 2);
        }
        sb_puts(b, "\"Bytes allocated\": ");
        sb_int(b, e->bytes);
        sb_puts(b, ", \"Bytes freed\": ");
        sb_int(b, e->freed);
        sb_puts(b, "}}");
        break;
    case EV_MEM:
        sb_puts(b, "\"Device\": \"");
        sb_puts(b, dev);
        sb_puts(b, "\", \"Addr\": ");
        sb_int(b, (int64_t)e->addr);
        sb_puts(b, ", \"Bytes\": ");
        sb_int(b, e->bytes);
        sb_puts(b, ", \"Total Allocated\": ");
        sb_int(b, e->total);
        sb_puts(b, "}},\n");
        /* the counter track that draws memory over time */
        sb_puts(b, "{\"name\":\"Memory allocated (");
        sb_puts(b, dev);
        sb_puts(b, ")\",\"ph\":\"C\",\"ts\":");
        sb_us(b, e->ts);
        sb_puts(b, ",\"pid\":");
        sb_int(b, pid);
        sb_puts(b, ",\"tid\":");
        sb_int(b, t->tid);
        sb_puts(b, ",\"args\":{\"bytes\": ");
        sb_int(b, e->total);
        sb_puts(b, "}}");
        break;
    default:
        sb_puts(b, "\"Device\": \"");
        sb_puts(b, dev);
        sb_puts(b, "\", \"Bytes\": ");
        sb_int(b, e->bytes);
        sb_puts(b, ", \"Total Allocated\": ");
        sb_int(b, e->total);
        sb_puts(b, "}}");
        break;
    }
}

ct_status ct_profiler_stop(void) {
    pthread_mutex_lock(&g_lock);
    if (!atomic_load(&ct_profiler_active)) {
        pthread_mutex_unlock(&g_lock);
        return ct_error(CT_ERROR_RUNTIME, "profiler_stop", "the profiler is not recording; call ct_profiler_start first");
    }
    atomic_store(&ct_profiler_active, false);
    ct_dispatch_observe_calls(false);
    uint64_t session = atomic_load(&g_session);
    size_t nbufs = 0;
    for (thread_buf *b = g_bufs; b; b = b->next)
        nbufs++;
    taken *tk = calloc(nbufs ? nbufs : 1, sizeof *tk);
    size_t ntk = 0, nev = 0;
    thread_buf **link = &g_bufs;
    while (*link) {
        thread_buf *b = *link;
        pthread_mutex_lock(&b->lock);
        if (tk && b->session == session && b->n) {
            taken *t = &tk[ntk++];
            t->ev = b->ev;
            t->n = b->n;
            t->arena = b->arena;
            t->tid = b->tid;
            t->failed = b->failed;
            memcpy(t->name, b->name, sizeof t->name);
            nev += b->n;
            b->ev = NULL;
            b->arena = NULL;
            b->cap = b->acap = 0;
        }
        b->n = b->alen = 0;
        bool dead = b->dead;
        pthread_mutex_unlock(&b->lock);
        if (dead) { /* its thread is gone: nothing can reach it any more */
            *link = b->next;
            pthread_mutex_destroy(&b->lock);
            free(b->ev);
            free(b->arena);
            free(b);
        } else {
            link = &b->next;
        }
    }
    FILE *f = g_out;
    g_out = NULL;
    char path[sizeof g_path];
    memcpy(path, g_path, sizeof path);
    pthread_mutex_unlock(&g_lock);

    ev_ref *refs = calloc(nev ? nev : 1, sizeof *refs);
    ct_status st = CT_OK;
    if (!tk || !refs) {
        st = ct_error(CT_ERROR_OUT_OF_MEMORY, "profiler_stop", "out of memory while merging the trace");
    } else {
        size_t k = 0;
        for (size_t i = 0; i < ntk; i++)
            for (size_t j = 0; j < tk[i].n; j++)
                refs[k++] = (ev_ref){&tk[i].ev[j], &tk[i]};
        qsort(refs, nev, sizeof *refs, ev_cmp);
        long pid = (long)getpid();
        bool lost = false;
        fprintf(f, "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%ld,\"tid\":0,"
                   "\"args\":{\"name\":\"ctorch\"}}",
                pid);
        char line[4096];
        for (size_t i = 0; i < ntk; i++) {
            sbuf b = {line, 0, sizeof line, false};
            sb_puts(&b, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":");
            sb_int(&b, pid);
            sb_puts(&b, ",\"tid\":");
            sb_int(&b, tk[i].tid);
            sb_puts(&b, ",\"args\":{\"name\":");
            sb_json_string(&b, tk[i].name, strlen(tk[i].name));
            sb_puts(&b, "}}");
            fwrite(line, 1, b.len, f);
            lost |= tk[i].failed;
        }
        for (size_t i = 0; i < nev; i++) {
            sbuf b = {line, 0, sizeof line, false};
            sb_put(&b, ",\n", 2);
            write_event(&b, pid, &refs[i]);
            /* a line longer than the buffer cannot happen: names and args are bounded */
            CT_ASSERT(!b.over);
            fwrite(line, 1, b.len, f);
        }
        fprintf(f, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"producer\":\"ctorch %s\",\"events_lost\":%s}}\n",
                ct_version(), lost ? "true" : "false");
    }
    if (ferror(f) && st == CT_OK)
        st = ct_error(CT_ERROR_IO, "profiler_stop", "error writing the trace to '%s'", path);
    if (fclose(f) != 0 && st == CT_OK)
        st = ct_error(CT_ERROR_IO, "profiler_stop", "error writing the trace to '%s'", path);
    for (size_t i = 0; tk && i < ntk; i++) {
        free(tk[i].ev);
        free(tk[i].arena);
    }
    free(tk);
    free(refs);
    if (CT_TRACE_LOG_ON()) {
        char meta[128];
        snprintf(meta, sizeof meta, "{\"action\": \"stop\", \"events\": %zu}", nev);
        ct_trace_log_write(__FILE__, __LINE__, "profiler", meta, NULL);
    }
    return st;
}

/* ------------------------------------------------------------------ CT_PROFILE */

static void stop_at_exit(void) {
    if (atomic_load(&ct_profiler_active) && ct_profiler_stop() != CT_OK)
        fprintf(stderr, "ctorch: CT_PROFILE: %s\n", ct_last_error());
}

void ct_profiler_init_from_env(void) {
    const char *path = getenv("CT_PROFILE");
    if (!path || !*path)
        return;
    if (ct_profiler_start(path) != CT_OK) {
        /* a setting in the environment, not the program's call: warn and go on */
        fprintf(stderr, "ctorch: CT_PROFILE: %s\n", ct_last_error());
        ct_clear_error();
        return;
    }
    atexit(stop_at_exit);
}
