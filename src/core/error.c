/* Note [Errors]
 * ctorch never aborts on user input. A failing function sets a thread-local status and
 * message and returns NULL or the status. Messages read "op: what went wrong" so a
 * user can act on them. A NULL tensor argument means an earlier call failed: the
 * callee returns NULL and leaves the earlier message in place, so a chain such as
 * ct_add(ct_mul(a, b), c) reports its first failure. Only CT_ASSERT (broken internal
 * invariants) stops the process. */
#include "error.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define CT_ERROR_CAP 1024

/* The message buffer is allocated on a thread's first error and freed at its exit
 * (Note [Thread-local storage]: 1 KiB inline would take most of the library's static
 * TLS). Without memory for it, the status still says what failed. */
static CT_THREAD_LOCAL ct_status tl_status = CT_OK;
static CT_THREAD_LOCAL char *tl_message;
static const char no_message[] = "ctorch: out of memory while recording an error message";

static pthread_key_t message_key;
static pthread_once_t message_key_once = PTHREAD_ONCE_INIT;
static bool message_key_ok;

static void message_thread_exit(void *p) {
    free(p);
    tl_message = NULL; /* an error raised by a later destructor allocates a new one */
}

static void message_key_init(void) { message_key_ok = pthread_key_create(&message_key, message_thread_exit) == 0; }

static char *message_buffer(void) {
    if (CT_UNLIKELY(!tl_message)) {
        pthread_once(&message_key_once, message_key_init);
        if (!message_key_ok)
            return NULL; /* it could never be freed */
        char *m = malloc(CT_ERROR_CAP);
        if (!m || pthread_setspecific(message_key, m) != 0) {
            free(m);
            return NULL;
        }
        tl_message = m;
    }
    return tl_message;
}

ct_status ct_error(ct_status status, const char *op, const char *fmt, ...) {
    tl_status = status;
    char *msg = message_buffer();
    if (!msg)
        return status;
    int n = snprintf(msg, CT_ERROR_CAP, "%s: ", op ? op : "ctorch");
    if (n < 0 || n >= CT_ERROR_CAP)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, CT_ERROR_CAP - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

ct_status ct_error_null(const char *op) {
    if (tl_status == CT_OK)
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "got a NULL argument");
    return tl_status;
}

const char *ct_last_error(void) {
    if (tl_status == CT_OK)
        return "";
    return tl_message ? tl_message : no_message;
}
ct_status ct_last_status(void) { return tl_status; }
void ct_clear_error(void) {
    tl_status = CT_OK;
    if (tl_message)
        tl_message[0] = '\0';
}

const char *ct_status_name(ct_status status) {
    switch (status) {
    case CT_OK: return "ok";
    case CT_ERROR_VALUE: return "value error";
    case CT_ERROR_INDEX: return "index error";
    case CT_ERROR_TYPE: return "type error";
    case CT_ERROR_DEVICE: return "device error";
    case CT_ERROR_OUT_OF_MEMORY: return "out of memory";
    case CT_ERROR_IO: return "i/o error";
    case CT_ERROR_FORMAT: return "format error";
    case CT_ERROR_NOT_IMPLEMENTED: return "not implemented";
    case CT_ERROR_NULL_ARGUMENT: return "null argument";
    case CT_ERROR_RUNTIME: return "runtime error";
    }
    return "unknown status";
}

void ct_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "ctorch internal error: %s (%s:%d); please report this\n", expr, file, line);
    abort();
}

/* Note [Injected allocation failures]
 * CT_ALLOC_CONF=fail_host_alloc:N (src/core/alloc.c parses it) makes the N-th host
 * allocation from then on fail, once, so that a sweep over N walks a program through
 * every out-of-memory path it has. Counted are the allocations that go through
 * ct_xmalloc / ct_xcalloc / ct_xrealloc and the CPU allocator's requests to the system
 * (storages, its bookkeeping). The chosen failure says so on stderr, so a sweep can
 * tell when N ran past the program's last allocation. Off, each check is one relaxed
 * load. tests/test_alloc_failure.c sweeps every allocation of the library instead (it
 * wraps malloc and friends at link time). */
static atomic_llong g_fail_at;     /* 0: off */
static atomic_llong g_host_allocs; /* counted since g_fail_at was set */

bool ct_host_alloc_should_fail(void) {
    if (!CT_UNLIKELY(atomic_load_explicit(&g_fail_at, memory_order_relaxed) != 0))
        return false;
    long long n = atomic_fetch_add(&g_host_allocs, 1) + 1;
    if (n != atomic_load(&g_fail_at))
        return false;
    fprintf(stderr, "ctorch: host allocation %lld fails on purpose (CT_ALLOC_CONF fail_host_alloc)\n", n);
    return true;
}

void ct_host_alloc_fail_at(int64_t n) {
    atomic_store(&g_fail_at, 0);
    atomic_store(&g_host_allocs, 0);
    atomic_store(&g_fail_at, n > 0 ? (long long)n : 0);
}

int64_t ct_host_alloc_count(void) { return (int64_t)atomic_load(&g_host_allocs); }

void *ct_xmalloc(const char *op, size_t n) {
    void *p = ct_host_alloc_should_fail() ? NULL : malloc(n ? n : 1);
    if (!p)
        ct_error(CT_ERROR_OUT_OF_MEMORY, op, "could not allocate %zu bytes", n);
    return p;
}

void *ct_xcalloc(const char *op, size_t n, size_t size) {
    void *p = ct_host_alloc_should_fail() ? NULL : calloc(n ? n : 1, size ? size : 1);
    if (!p)
        ct_error(CT_ERROR_OUT_OF_MEMORY, op, "could not allocate %zu x %zu bytes", n, size);
    return p;
}

void *ct_xrealloc(const char *op, void *p, size_t n) {
    void *q = ct_host_alloc_should_fail() ? NULL : realloc(p, n ? n : 1);
    if (!q)
        ct_error(CT_ERROR_OUT_OF_MEMORY, op, "could not allocate %zu bytes", n);
    return q;
}
