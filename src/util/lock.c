#include "lock.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifdef SYS_membarrier
#include <linux/membarrier.h>
#endif

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

bool vram_heavy_fence(void)
{
#ifdef SYS_membarrier
    static atomic_int unavailable;
    if (atomic_load_explicit(&unavailable, memory_order_relaxed))
        return false;
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return true;
    /* A process must register once before using it (a forked child again). */
    if (errno == EPERM &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return true;
    atomic_store_explicit(&unavailable, 1, memory_order_relaxed);
#endif
    return false;
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
    atomic_fetch_add_explicit(&l->sleepers, 1, memory_order_seq_cst);
    /* From the fence on, an unlocker either has made its store visible
     * (the futex check sees 0 and returns at once) or sees us: once is
     * enough for as long as we stay counted. */
    bool fenced = vram_heavy_fence();
    for (;;) {
        int expected = 0;
        if (atomic_compare_exchange_strong_explicit(&l->state, &expected, 1, memory_order_acquire,
                                                    memory_order_relaxed))
            break;
        struct timespec bound = {0, 1000000};
        syscall(SYS_futex, &l->state, FUTEX_WAIT_PRIVATE, 1, fenced ? NULL : &bound, NULL, 0);
    }
    atomic_fetch_sub_explicit(&l->sleepers, 1, memory_order_relaxed);
}

void vram_unlock_wake(vram_lock *l)
{
    syscall(SYS_futex, &l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
