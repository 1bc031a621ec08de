/* granularity: how much device memory an allocation of n bytes occupies.
 *
 * A CUDA driver hands out large allocations in whole 2 MiB pages and packs
 * small ones (512-byte alignment) into shared pages. The simulated driver
 * charges by this rule, and the interposer charges budgets by it, so that
 * what vram counts is what the device loses.
 */
#ifndef VRAM_GRANULARITY_H
#define VRAM_GRANULARITY_H

#include <stdint.h>

#define DEVICE_PAGE ((uint64_t)2 << 20)
#define DEVICE_ALIGN ((uint64_t)512)

static inline uint64_t device_charge(uint64_t bytes)
{
    uint64_t unit = bytes >= DEVICE_PAGE ? DEVICE_PAGE : DEVICE_ALIGN;
    if (bytes > UINT64_MAX - unit)
        return UINT64_MAX;
    return (bytes + unit - 1) & ~(unit - 1);
}

/* The most a program can ask for and be charged no more than `avail`. */
static inline uint64_t device_fit(uint64_t avail)
{
    return avail >= DEVICE_PAGE ? avail & ~(DEVICE_PAGE - 1) : avail & ~(DEVICE_ALIGN - 1);
}

#endif
