/* ctorch's CPU thread pool: regions of fixed chunks that the caller and the pool's
 * threads claim one at a time (Note [Threads on a busy machine] in parallel.c). */
#ifndef CT_CORE_PARALLEL_H
#define CT_CORE_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>

#include "ctorch/ext.h" /* ct_parallel_range: loops whose iterations are independent */

/* How many chunks per thread a split whose boundaries may depend on the thread count
 * (elementwise loops, independent outputs) makes: with several, the chunks of a thread
 * that the scheduler has taken off its core are few and the others take them. */
#define CT_CHUNKS_PER_THREAD 4

/* One chunk of a region: fn(ctx, c) for c in [0, chunks). */
typedef void (*ct_parallel_fn)(void *ctx, int64_t chunk);

/* Runs fn(ctx, c) once for every c in [0, chunks) on the calling thread and on up to
 * threads - 1 of the pool's threads, and returns when every chunk has run. Which
 * thread runs which chunk is decided while the region runs (a thread that is not
 * running takes none), so a chunk's work must depend on c alone: with chunk
 * boundaries that depend only on the data, results do not depend on the thread count
 * or on the scheduling. Inside fn, ct_get_num_threads() is 1 and a nested region runs
 * on its thread alone. Runs everything on the caller when threads < 2, inside another
 * region, when another thread's region holds the pool, or while the pool has found
 * the machine too busy to share (Note [Threads on a busy machine]). */
void ct_parallel_for(int64_t chunks, int threads, ct_parallel_fn fn, void *ctx);

/* The running thread's index in the current region: 0 on the caller, 1 .. threads - 1
 * on the pool's threads (an index into per-thread scratch sized for `threads`); 0
 * outside regions. */
int ct_parallel_thread(void);

/* The thread count of the region the calling thread runs a chunk of (its share of a
 * region's memory traffic); 1 outside regions. */
int ct_parallel_team(void);

/* Whether the calling thread is running a chunk of a region. */
bool ct_in_parallel(void);

/* Counters for tests and benchmarks: regions run, of them the ones run on the caller
 * alone because the pool backed off, and the waits the back-off was decided on. */
typedef struct ct_parallel_stats {
    int64_t regions, serial_backoff, stalls;
} ct_parallel_stats;
void ct_parallel_get_stats(ct_parallel_stats *s);

#endif /* CT_CORE_PARALLEL_H */
