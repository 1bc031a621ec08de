/* lock: a small mutex for the allocator's hot path.
 *
 * An uncontended lock and unlock cost one atomic instruction: a
 * compare-and-swap to take it; giving it back is a plain store. (glibc's
 * pthread_mutex spends about thirty instructions and two atomics on the
 * pair, which is a third of an allocation here; an atomic also waits for
 * every store before it to reach the cache.) Contended waiters sleep in the
 * kernel (futex), so a holder preempted for a long time costs no CPU.
 * Process-private: it never lives in shared memory, so a process that dies
 * holding it takes it with it.
 *
 * How a plain store can wake a sleeper: the unlocker stores 0 and then
 * reads `sleepers`; a waiter adds itself to `sleepers` and then, before it
 * first sleeps, runs vram_heavy_fence(), which makes every other running
 * thread of the process execute a full barrier. Either the unlocker's store
 * is visible to the waiter's futex check (it does not sleep), or the
 * unlocker sees the waiter (it wakes it): the pair is a Dekker handshake
 * whose cost lies entirely on the waiter's side. Where the kernel offers no
 * such fence, a waiter sleeps at most a millisecond at a time.
 */
#ifndef VRAM_LOCK_H
#define VRAM_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>

typedef struct {
    atomic_int state;    /* 0 free, 1 held */
    atomic_int sleepers; /* waiters asleep or about to sleep */
} vram_lock;

#define VRAM_LOCK_INIT {0, 0}

void vram_lock_slow(vram_lock *l);
void vram_unlock_wake(vram_lock *l);

/* Makes every running thread of this process execute a full memory barrier
 * (membarrier(2), private expedited), so that a thread that only orders
 * its own accesses with compiler barriers can pair with the caller as if
 * it had used a fence. Slow (an interrupt to each CPU running one of our
 * threads): for rare events only. False where the kernel does not offer it. */
bool vram_heavy_fence(void);

static inline void vram_lock_init(vram_lock *l)
{
    atomic_init(&l->state, 0);
    atomic_init(&l->sleepers, 0);
}

static inline void vram_lock_acquire(vram_lock *l)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong_explicit(&l->state, &expected, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        vram_lock_slow(l);
}

static inline void vram_lock_release(vram_lock *l)
{
    atomic_store_explicit(&l->state, 0, memory_order_release);
    /* The compiler must not read sleepers before the store; the processor
     * may, which vram_heavy_fence() on the waiter's side accounts for. */
    atomic_signal_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&l->sleepers, memory_order_relaxed))
        vram_unlock_wake(l);
}

#endif
