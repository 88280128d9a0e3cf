/* The slow path of ct_spin_lock (Note [Allocator lock] in spin.h). */
#include "spin.h"

#include <sched.h>
#include <time.h>

static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

void ct_spin_wait(ct_spin *l) {
    unsigned waited = 0;
    do {
        /* read-only while it is held, so the line is not bounced between cores */
        for (; atomic_load_explicit(&l->held, memory_order_relaxed); waited += waited < 2048) {
            if (waited < 256) {
                cpu_pause();
            } else if (waited < 2048) {
                sched_yield();
            } else {
                struct timespec ts = {0, 50000};
                nanosleep(&ts, NULL);
            }
        }
    } while (atomic_exchange_explicit(&l->held, 1, memory_order_acquire));
}
