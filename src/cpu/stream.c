/* When the CPU loops stream their outputs (Note [Streaming stores] in stream.h). */
#include "cpu/stream.h"

#include <stdlib.h>
#include <unistd.h>
#include "core/parallel.h"

/* The threshold in bytes touched by one op; 0 before it is first needed. */
static int64_t g_threshold;
static int g_forced; /* CT_STREAM_AUTO, _ALWAYS or _NEVER */
int64_t ct_stream_min_call = CT_STREAM_MIN_CALL;

static int64_t detect_threshold(void) {
    const char *env = getenv("CT_STREAM_MIN_BYTES");
    if (env && *env) {
        char *end;
        long long v = strtoll(env, &end, 10);
        if (*end == '\0' && v > 0)
            return (int64_t)v;
    }
    long l3 = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    /* A quarter of the L3: the other cores (on a virtual machine, other guests) share
     * it, so an op's own share is much smaller than its size. Unknown: a quarter of
     * 32 MiB, a size most L3 caches are near. */
    return l3 > 0 ? (int64_t)l3 / 4 : (int64_t)8 << 20;
}

bool ct_stream_decide(int64_t bytes) {
    int forced = __atomic_load_n(&g_forced, __ATOMIC_RELAXED);
    if (forced != CT_STREAM_AUTO)
        return forced == CT_STREAM_ALWAYS;
    int64_t t = __atomic_load_n(&g_threshold, __ATOMIC_RELAXED);
    if (t == 0) { /* every thread finds the same value, so a race only repeats the work */
        t = detect_threshold();
        __atomic_store_n(&g_threshold, t, __ATOMIC_RELAXED);
    }
    return bytes >= t / ct_parallel_team();
}

void ct_stream_force(int mode) {
    __atomic_store_n(&ct_stream_min_call, mode == CT_STREAM_ALWAYS ? 0 : CT_STREAM_MIN_CALL, __ATOMIC_RELAXED);
    __atomic_store_n(&g_forced, mode, __ATOMIC_RELAXED);
}
