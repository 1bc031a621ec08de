#include "heap_lock.h"

#include <pthread.h>
#include <time.h>

uintptr_t heap_lock_thread(void) { return (uintptr_t)pthread_self(); }

void heap_lock_init(heap_lock *l)
{
    atomic_init(&l->owner, 0);
    atomic_init(&l->busy, 0);
    atomic_init(&l->revoked, 0);
    vram_lock_init(&l->lock);
}

/* Waits for the owner to leave; it may be inside a driver call. */
static void wait_owner_out(heap_lock *l)
{
    for (int spins = 0; atomic_load_explicit(&l->busy, memory_order_acquire); spins++) {
        if (spins < 1000)
            continue;
        struct timespec nap = {0, 20000};
        nanosleep(&nap, NULL);
    }
}

bool heap_lock_slow(heap_lock *l)
{
    uintptr_t self = heap_lock_self();
    vram_lock_acquire(&l->lock);
    if (atomic_load_explicit(&l->revoked, memory_order_relaxed))
        return false;
    uintptr_t owner = atomic_load_explicit(&l->owner, memory_order_relaxed);
    if (owner == 0 || owner == self) {
        /* The first user: the lock becomes its own, if the kernel offers
         * the fence that a revocation will need. */
        if (owner == self || vram_heavy_fence()) {
            atomic_store_explicit(&l->owner, self, memory_order_relaxed);
            atomic_store_explicit(&l->busy, 1, memory_order_relaxed);
            vram_lock_release(&l->lock);
            return true;
        }
        atomic_store_explicit(&l->revoked, 1, memory_order_release);
        return false;
    }
    /* Another thread owns it: revoke the bias for good. */
    atomic_store_explicit(&l->revoked, 1, memory_order_seq_cst);
    if (!vram_heavy_fence()) {
        /* It worked when the bias was given (something, a seccomp filter,
         * forbids it now). An owner that entered just as we marked the lock
         * may not have its busy flag visible yet; stores leave a
         * processor's store buffer within microseconds, so after a pause it
         * is, or the owner is gone. */
        wait_owner_out(l);
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    wait_owner_out(l);
    return false;
}
