/* ctorch's CPU thread pool (Note [Threads on a busy machine]). */
#define _GNU_SOURCE
#include "core/parallel.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctorch/core.h"
#include "ctorch/ext.h"
#ifdef __linux__
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#ifdef CT_HAVE_OPENMP
#include <omp.h>
#endif

/* Note [Threads on a busy machine]
 * A region (ct_parallel_for) is a list of chunks with boundaries fixed by the caller.
 * The caller publishes it and starts on the chunks itself; each pool thread that is
 * awake claims the next unclaimed chunk with one compare-and-swap on a word that holds
 * (generation, next chunk, chunk count), so a thread that the scheduler has taken off
 * its core claims nothing, and the others take its share. The caller waits only for
 * chunks that another thread has claimed and not finished, never for a thread that has
 * not started: a late thread finds the generation changed or no chunk left and goes
 * back to waiting. Results depend on the chunk boundaries alone, so they are the same
 * for any thread count and any scheduling (per-chunk partials are combined by the
 * caller in chunk order, as before).
 *
 * Waits spin briefly, then sleep on a futex: a pool thread spins CT_POOL_SPIN_US
 * (default 50 us) for the next region, which keeps the back-to-back small regions of a
 * training step fast on a quiet machine, then sleeps; the caller spins for a claimed
 * chunk about as long as a chunk takes, then sleeps until the last chunk's thread wakes
 * it.
 *
 * A thread that is preempted in the middle of a chunk still holds the region up until
 * it runs again (a scheduler time slice, milliseconds). When the caller has waited for
 * another thread's chunk much longer than its own chunks took (a stall), the pool backs
 * off: regions run on the caller alone for a while (1 ms after the first stall,
 * doubling up to 64 ms while stalls repeat, halving after a shared region without
 * one), then it tries sharing again. On a quiet machine a stall should be rare and
 * every region shared; next to a busy loop the step runs mostly on the free core and
 * still takes the other between stalls. CT_POOL_BACKOFF=0 turns the back-off off (its
 * effect was within the noise of the measurements below).
 *
 * Measured (docs/design.md, "Busy machines", has the table): on 2 cores of a virtual
 * machine that other jobs kept loaded, with a busy loop on one of the two, the CNN step
 * took 62 ms against 223 with OpenMP's default waits and the char-gpt step 120 against
 * 1822; beside the loop the steps stayed within 0.95x (CNN) and 0.75x (char-gpt) of
 * the steps without it. OpenMP with passive waits did as well on that machine (40 and
 * 96 ms), with about 10% less process CPU: the GEMM blocks then cost 4-8% in
 * call overhead (since cut to 1-2%, Note [GEMM chunks]), the spins most likely the
 * rest. Sleeping at once
 * (CT_POOL_SPIN_US=0) showed no gain there, so the 50 us spin stays. Which figures an
 * idle machine gives is still to be measured. */

#define MAX_UNITS 0xFFFFu
#define MAX_WORKERS 255

static struct {
    _Atomic uint64_t state;     /* generation << 32 | next unit << 16 | units */
    atomic_uint wake;           /* futex word: the generation the workers wait for */
    atomic_uint done;           /* units finished in this generation */
    atomic_int sleepers;        /* workers asleep on wake */
    atomic_int caller_sleeping; /* the caller is asleep on done */
    atomic_int limit;           /* worker i joins when i < limit */
    atomic_bool bind;           /* workers bound to their CPUs (Note [Workers on their own cores]) */
    ct_parallel_fn fn;          /* these four are written before the generation is */
    void *ctx;                  /* published and read after a unit of it is claimed */
    int64_t chunks, per;
    pthread_mutex_t lock; /* one region at a time; another caller runs alone */
    int nworkers;
    uint32_t gen;
    int64_t spin_ns;
    bool backoff_on, bind_on;
    /* back-off, owned by the lock holder */
    int64_t serial_until, backoff_ns;
    _Atomic int64_t regions, serial_backoff, stalls;
} P = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int tls_thread, tls_team = 1;
static _Thread_local bool tls_in_region;

int ct_parallel_thread(void) { return tls_in_region ? tls_thread : 0; }
int ct_parallel_team(void) { return tls_in_region ? tls_team : 1; }
bool ct_in_parallel(void) { return tls_in_region; }

void ct_parallel_get_stats(ct_parallel_stats *s) {
    s->regions = atomic_load(&P.regions);
    s->serial_backoff = atomic_load(&P.serial_backoff);
    s->stalls = atomic_load(&P.stalls);
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void futex_wait(atomic_uint *w, unsigned expected) {
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)w, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
#else
    (void)w, (void)expected;
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
#endif
}

static void futex_wake(atomic_uint *w) {
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)w;
#endif
}

static void run_unit(int64_t u) {
    int64_t b = u * P.per, e = b + P.per < P.chunks ? b + P.per : P.chunks;
    for (int64_t c = b; c < e; c++)
        P.fn(P.ctx, c);
}

/* Claims and runs units of generation g until none is left; returns how many it ran. */
static int64_t run_units(uint32_t g) {
    int64_t ran = 0;
    uint64_t s = atomic_load_explicit(&P.state, memory_order_acquire);
    for (;;) {
        uint32_t next = (uint32_t)(s >> 16) & MAX_UNITS, units = (uint32_t)s & MAX_UNITS;
        if ((uint32_t)(s >> 32) != g || next >= units)
            return ran;
        if (!atomic_compare_exchange_weak_explicit(&P.state, &s, s + ((uint64_t)1 << 16), memory_order_acquire,
                                                   memory_order_acquire))
            continue;
        run_unit(next);
        ran++;
        if (atomic_fetch_add(&P.done, 1) + 1 == units && atomic_load(&P.caller_sleeping))
            futex_wake(&P.done);
        s = atomic_load_explicit(&P.state, memory_order_acquire);
    }
}

/* Note [Workers on their own cores]
 * When a region runs on as many threads as the process may use CPUs (the job owns its
 * cores: the default count, or a count matched to a taskset), pool thread i is bound
 * to the i-th of those CPUs and the caller, thread 0, stays free: on two cores beside a
 * busy loop the scheduler otherwise often keeps both of the job's threads on the free
 * core, which gives the job one core where it could have one and a half; bound, one
 * worker shares the busy core, the caller is moved to the free one, and dynamic chunks
 * (Note [Threads on a busy machine]) let the free core do most of the work. With fewer
 * threads than CPUs the workers stay free (each takes its own mask back), so that two
 * jobs of a few threads each on one machine are spread by the scheduler, not bound to
 * the same first CPUs. A worker changes its binding when it joins a region that wants
 * the other one: a system call only then.
 * bench/contended.sh on the 2-core EPYC (busy loop on core 1, 2 threads, busy step over
 * quiet step, CNN / char-gpt): 1.77x / 1.84x and 1.78x / 1.91x unbound, 1.43x / 1.54x
 * and 1.42x / 1.57x bound, the quiet steps unchanged (15.4-15.6 ms, 51-52 ms); on cores
 * 2 and 3 of the GPU machine's Xeon (busy loop on core 3), one run: 1.54x / 1.53x bound
 * and 2.50x / 2.20x unbound with 2 threads, 1.63x / 1.27x bound with 4 (capped at 2).
 * CT_POOL_BIND=0 leaves the workers free always (for processes that share their CPUs
 * with other pools that use all of them). */
static _Thread_local bool tls_bound, tls_can_bind;
#ifdef __linux__
static _Thread_local cpu_set_t tls_mask; /* the worker's mask when it started */
#endif

static void bind_worker(bool bind) {
    if (!tls_can_bind || bind == tls_bound)
        return;
    tls_bound = bind;
#ifdef __linux__
    if (!bind) {
        (void)pthread_setaffinity_np(pthread_self(), sizeof tls_mask, &tls_mask);
        return;
    }
    cpu_set_t one;
    int k = tls_thread % CPU_COUNT(&tls_mask);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &tls_mask) && k-- == 0) {
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            (void)pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
#endif
}

static void *worker_main(void *arg) {
    /* the index, and the generation before the region that started the thread: it joins
     * that region (the generation is published after the thread is created) */
    tls_thread = (int)((uintptr_t)arg & 0xFFFF);
    unsigned seen = (unsigned)((uintptr_t)arg >> 16);
#ifdef __linux__
    tls_can_bind = sched_getaffinity(0, sizeof tls_mask, &tls_mask) == 0 && CPU_COUNT(&tls_mask) > 1;
#endif
    tls_in_region = true; /* everything a worker runs is a chunk */
#ifdef CT_HAVE_OPENMP
    omp_set_num_threads(1); /* BLAS and oneDNN called from a chunk run on this thread */
#endif
    for (;;) {
        unsigned g = atomic_load(&P.wake);
        if (g == seen) {
            int64_t until = now_ns() + P.spin_ns;
            for (int i = 1; (g = atomic_load_explicit(&P.wake, memory_order_acquire)) == seen; i++) {
                cpu_pause();
                if ((i & 63) == 0 && now_ns() > until)
                    break;
            }
            while (g == seen) {
                atomic_fetch_add(&P.sleepers, 1);
                futex_wait(&P.wake, seen);
                atomic_fetch_sub(&P.sleepers, 1);
                g = atomic_load(&P.wake);
            }
        }
        seen = g;
        tls_team = atomic_load(&P.limit);
        if (tls_thread < tls_team) {
            bind_worker(atomic_load_explicit(&P.bind, memory_order_relaxed));
            run_units(g);
        }
    }
    return NULL;
}

/* Note [No more threads than cores]
 * A region runs on at most as many threads as the process may use CPUs
 * (sched_getaffinity, read again every 100 ms): more threads than that only take turns
 * on the same cores, and a thread taken off its core in the middle of a chunk holds up
 * the region (Note [Threads on a busy machine]). The chunks, and so the results, do not
 * change; ct_get_num_threads still reports the count that was set. What it changed is
 * within the noise of the busy-core benchmark (bench/contended.sh, busy loop on the
 * second of two cores, 4 threads, busy step over quiet step, CNN / char-gpt): on the
 * 2-core EPYC 1.59x / 1.41x and 1.63x / 1.66x before, 1.48-1.63x / 1.28-1.55x in four
 * runs after; on the Xeon of a GPU machine 1.95x / 1.67x before, and on another host of
 * that kind after 2.31x / 2.05x and 2.51x / 1.24x, where its 2-thread steps also went
 * from 1.60x / 1.50x to 2.37x / 1.65x: where the scheduler puts the job's threads beside
 * the busy loop decides more than the thread count. */
static int cpus_allowed(int64_t now) {
#ifdef __linux__
    static _Atomic int64_t checked = 0; /* two threads may both read it: harmless */
    static atomic_int count = 0;
    int64_t last = atomic_load_explicit(&checked, memory_order_relaxed);
    if (last == 0 || now - last > 100000000) {
        cpu_set_t set;
        atomic_store_explicit(&count, sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0,
                              memory_order_relaxed);
        atomic_store_explicit(&checked, now, memory_order_relaxed);
    }
    int n = atomic_load_explicit(&count, memory_order_relaxed);
    return n > 0 ? n : INT_MAX;
#else
    (void)now;
    return INT_MAX;
#endif
}

/* threads, or the CPUs the process may use when they are fewer. */
static int cap_threads(int threads) {
    if (threads < 2)
        return threads;
    int cpus = cpus_allowed(now_ns());
    return threads > cpus ? cpus : threads;
}

/* Starts workers up to n (called with the lock held); returns how many there are. */
/* CT_POOL_STATS=1: the counters on stderr at exit, to see whether a job backed off. */
static void print_stats(void) {
    fprintf(stderr, "ctorch: thread pool: %lld regions, %lld run alone while backed off, %lld stalls\n",
            (long long)atomic_load(&P.regions), (long long)atomic_load(&P.serial_backoff),
            (long long)atomic_load(&P.stalls));
}

static int grow(int n) {
    if (P.nworkers == 0) {
        const char *stats = getenv("CT_POOL_STATS");
        if (stats && *stats && strcmp(stats, "0") != 0)
            atexit(print_stats);
        const char *e = getenv("CT_POOL_SPIN_US");
        P.spin_ns = (e && *e ? atoll(e) : 50) * 1000;
        e = getenv("CT_POOL_BACKOFF");
        P.backoff_on = !(e && e[0] == '0');
        e = getenv("CT_POOL_BIND");
        P.bind_on = !(e && e[0] == '0');
    }
    if (n > MAX_WORKERS)
        n = MAX_WORKERS;
    while (P.nworkers < n) {
        pthread_attr_t attr;
        pthread_t t;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        uintptr_t arg = (uintptr_t)atomic_load(&P.wake) << 16 | (uintptr_t)(P.nworkers + 1);
        int rc = pthread_create(&t, &attr, worker_main, (void *)arg);
        pthread_attr_destroy(&attr);
        if (rc != 0)
            break;
        P.nworkers++;
    }
    return P.nworkers;
}

/* The caller's side of a region: chunks see one thread (ct_get_num_threads, and
 * OpenMP's setting, which oneDNN and OpenBLAS read) and the caller's thread index 0. */
typedef struct {
    bool in_region;
    int thread, team, omp_threads;
} caller_state;

static caller_state enter(int team) {
    caller_state st = {tls_in_region, tls_thread, tls_team, 0};
    tls_in_region = true;
    tls_thread = 0;
    tls_team = team;
#ifdef CT_HAVE_OPENMP
    st.omp_threads = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    return st;
}

static void leave(caller_state st) {
#ifdef CT_HAVE_OPENMP
    omp_set_num_threads(st.omp_threads);
#endif
    tls_in_region = st.in_region;
    tls_thread = st.thread;
    tls_team = st.team;
}

static void run_serial(int64_t chunks, ct_parallel_fn fn, void *ctx) {
    caller_state st = enter(1);
    for (int64_t c = 0; c < chunks; c++)
        fn(ctx, c);
    leave(st);
}

void ct_parallel_for(int64_t chunks, int threads, ct_parallel_fn fn, void *ctx) {
    if (chunks <= 0)
        return;
    bool nested = tls_in_region;
#ifdef CT_HAVE_OPENMP
    nested = nested || omp_in_parallel();
#endif
    threads = cap_threads(threads);
    if (threads < 2 || chunks == 1 || nested || pthread_mutex_trylock(&P.lock) != 0) {
        run_serial(chunks, fn, ctx);
        return;
    }
    atomic_fetch_add_explicit(&P.regions, 1, memory_order_relaxed);
    int64_t t0 = now_ns();
    if (P.backoff_on && t0 < P.serial_until) {
        atomic_fetch_add_explicit(&P.serial_backoff, 1, memory_order_relaxed);
        pthread_mutex_unlock(&P.lock);
        run_serial(chunks, fn, ctx);
        return;
    }
    int workers = grow(threads - 1);
    atomic_store_explicit(&P.bind, P.bind_on && threads == cpus_allowed(t0), memory_order_relaxed); /* published with the state */
    int64_t units = chunks, per = 1;
    if (units > (int64_t)MAX_UNITS) {
        per = (chunks + MAX_UNITS - 1) / MAX_UNITS;
        units = (chunks + per - 1) / per;
    }
    P.fn = fn;
    P.ctx = ctx;
    P.chunks = chunks;
    P.per = per;
    uint32_t g = ++P.gen;
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    atomic_store_explicit(&P.limit, workers + 1 < threads ? workers + 1 : threads, memory_order_relaxed);
    atomic_store_explicit(&P.state, (uint64_t)g << 32 | (uint64_t)units, memory_order_release);
    atomic_store(&P.wake, g);
    if (atomic_load(&P.sleepers) > 0)
        futex_wake(&P.wake);
    caller_state st = enter(atomic_load_explicit(&P.limit, memory_order_relaxed));
    int64_t mine = run_units(g);
    leave(st);
    /* wait for the units other threads claimed */
    int64_t t1 = now_ns(), t2 = t1;
    if (atomic_load(&P.done) != (unsigned)units) {
        int64_t per_unit = mine > 0 ? (t1 - t0) / mine : 20000;
        int64_t until = t1 + 2 * per_unit + 5000;
        unsigned d;
        for (int i = 1; (d = atomic_load(&P.done)) != (unsigned)units; i++) {
            cpu_pause();
            if ((i & 63) == 0 && now_ns() > until)
                break;
        }
        while ((d = atomic_load(&P.done)) != (unsigned)units) {
            atomic_store(&P.caller_sleeping, 1);
            if (atomic_load(&P.done) == d)
                futex_wait(&P.done, d);
            atomic_store(&P.caller_sleeping, 0);
        }
        t2 = now_ns();
        /* a stall: waited far longer than a chunk takes */
        if (P.backoff_on && t2 - t1 > 8 * per_unit + 50000) {
            atomic_fetch_add_explicit(&P.stalls, 1, memory_order_relaxed);
            P.backoff_ns = P.backoff_ns ? P.backoff_ns * 2 : 1000000;
            if (P.backoff_ns > 64000000)
                P.backoff_ns = 64000000;
            P.serial_until = t2 + P.backoff_ns;
        } else {
            P.backoff_ns /= 2;
        }
    } else {
        P.backoff_ns /= 2;
    }
    pthread_mutex_unlock(&P.lock);
}

typedef struct {
    ct_parallel_range_fn fn;
    void *ctx;
    int64_t n, chunks;
} range_job;

static void range_chunk(void *ctx, int64_t c) {
    const range_job *j = ctx;
    int64_t b = j->n * c / j->chunks, e = j->n * (c + 1) / j->chunks;
    if (b < e)
        j->fn(j->ctx, b, e);
}

ct_status ct_parallel_range(int64_t n, int64_t work, int64_t min_work, ct_parallel_range_fn fn, void *ctx) {
    if (!fn)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "parallel_range", "fn must not be NULL");
    if (n < 0)
        return ct_error(CT_ERROR_VALUE, "parallel_range", "n must be non-negative, got %lld", (long long)n);
    if (n == 0)
        return CT_OK;
    int nth = cap_threads(ct_get_num_threads());
    if (nth < 2 || work <= min_work || n == 1) {
        fn(ctx, 0, n);
        return CT_OK;
    }
    int64_t chunks = (int64_t)CT_CHUNKS_PER_THREAD * nth;
    if (chunks > n)
        chunks = n;
    range_job j = {fn, ctx, n, chunks};
    ct_parallel_for(chunks, nth, range_chunk, &j);
    return CT_OK;
}
