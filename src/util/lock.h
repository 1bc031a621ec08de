/* lock: a small mutex for the allocator's hot path.
 *
 * An uncontended lock and unlock are one compare-and-swap and one exchange;
 * glibc's pthread_mutex spends about thirty instructions on each (type
 * dispatch, owner bookkeeping), which is a third of an allocation here.
 * Contended waiters sleep in the kernel (futex), so a holder preempted for a
 * long time costs no CPU. Process-private: it never lives in shared memory,
 * so a process that dies holding it takes it with it.
 *
 * States: 0 free, 1 held, 2 held with (possible) sleepers.
 */
#ifndef VRAM_LOCK_H
#define VRAM_LOCK_H

#include <stdatomic.h>

typedef struct {
    atomic_int state;
} vram_lock;

#define VRAM_LOCK_INIT {0}

void vram_lock_slow(vram_lock *l);
void vram_unlock_wake(vram_lock *l);

static inline void vram_lock_init(vram_lock *l) { atomic_init(&l->state, 0); }

static inline void vram_lock_acquire(vram_lock *l)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong_explicit(&l->state, &expected, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        vram_lock_slow(l);
}

static inline void vram_lock_release(vram_lock *l)
{
    if (atomic_exchange_explicit(&l->state, 0, memory_order_release) == 2)
        vram_unlock_wake(l);
}

#endif
