/* A lock for short critical sections (Note [Allocator lock]). */
#ifndef CT_CORE_SPIN_H
#define CT_CORE_SPIN_H

#include <stdatomic.h>

/* Note [Allocator lock]
 * Every allocation and free takes its device's allocator lock once. With a
 * pthread mutex, locking and unlocking were about 30% of a 1-element add (two lock
 * round trips per op, each an atomic read-modify-write plus a call into libc). The
 * allocator's critical sections are short, and most programs allocate from one thread,
 * so the lock is one atomic exchange to take and one plain release store to drop. A
 * thread that finds it taken spins with the CPU's pause hint for a while, then yields
 * its core, and after many yields sleeps 50 us at a time (a CUDA allocation inside the
 * lock can take milliseconds); it never needs the holder to wake it. */
typedef struct ct_spin {
    atomic_int held;
} ct_spin;

void ct_spin_wait(ct_spin *l);

static inline void ct_spin_lock(ct_spin *l) {
    if (atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
        ct_spin_wait(l);
}

static inline void ct_spin_unlock(ct_spin *l) { atomic_store_explicit(&l->held, 0, memory_order_release); }

#endif /* CT_CORE_SPIN_H */
