/* heap_lock: the heap's lock, free of atomic instructions for a thread that
 * uses the heap alone.
 *
 * Most programs allocate from one thread, and an atomic instruction is the
 * largest single cost of an allocation (it waits for every store before it
 * to reach the cache). So the first thread to take the lock becomes its
 * owner: from then on it enters with a store and a load (busy = 1; has the
 * bias been revoked?) and leaves with a store. The first time another
 * thread wants the heap, it revokes the bias for good: it marks the lock
 * revoked, runs vram_heavy_fence() (so that the owner either sees the mark
 * or has made its busy flag visible) and waits for the owner to leave. From
 * then on every thread, the owner too, takes the vram_lock inside: one
 * atomic per operation. Without the kernel's fence the lock is never
 * biased.
 *
 * Acquiring returns whether the caller entered as the owner; releasing
 * needs that answer back.
 */
#ifndef VRAM_HEAP_LOCK_H
#define VRAM_HEAP_LOCK_H

#include "../util/lock.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    _Atomic uintptr_t owner; /* the thread the lock is biased to; 0: none yet */
    atomic_int busy;         /* the owner is inside */
    atomic_int revoked;      /* everyone uses `lock` */
    vram_lock lock;
} heap_lock;

void heap_lock_init(heap_lock *l);
bool heap_lock_slow(heap_lock *l);
uintptr_t heap_lock_thread(void);

/* Something that tells the calling thread from every other live thread. */
static inline uintptr_t heap_lock_self(void)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__))
    return (uintptr_t)__builtin_thread_pointer();
#else
    return heap_lock_thread();
#endif
}

static inline bool heap_lock_acquire(heap_lock *l)
{
    if (__builtin_expect(atomic_load_explicit(&l->owner, memory_order_relaxed) == heap_lock_self(),
                         1)) {
        atomic_store_explicit(&l->busy, 1, memory_order_relaxed);
        /* Only the compiler needs telling: the revoker's heavy fence orders
         * this store before the load below for the processor. */
        atomic_signal_fence(memory_order_seq_cst);
        if (__builtin_expect(!atomic_load_explicit(&l->revoked, memory_order_acquire), 1))
            return true;
        atomic_store_explicit(&l->busy, 0, memory_order_release);
    }
    return heap_lock_slow(l);
}

static inline void heap_lock_release(heap_lock *l, bool owner)
{
    if (owner)
        atomic_store_explicit(&l->busy, 0, memory_order_release);
    else
        vram_lock_release(&l->lock);
}

#endif
