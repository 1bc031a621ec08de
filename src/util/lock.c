#include "lock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void vram_lock_slow(vram_lock *l)
{
    /* Spin briefly: allocator critical sections are a few dozen ns, so the
     * holder usually leaves before a sleep would even start. */
    for (int i = 0; i < 100; i++) {
        int expected = 0;
        if (atomic_load_explicit(&l->state, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&l->state, &expected, 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return;
        cpu_relax();
    }
    /* Mark the lock contended and sleep until it is free; whoever takes it
     * from here on leaves it marked, so the releaser knows to wake. */
    while (atomic_exchange_explicit(&l->state, 2, memory_order_acquire) != 0)
        syscall(SYS_futex, &l->state, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void vram_unlock_wake(vram_lock *l)
{
    syscall(SYS_futex, &l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
