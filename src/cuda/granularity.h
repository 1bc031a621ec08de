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

/* A stream-ordered pool grows its reservation by what an allocation
 * charged `charge` needs beyond what the pool holds free, in whole chunks
 * (of POOL_CHUNK on the GPUs measured), sized against the card, not
 * against any budget. Measured
 * on the H100 and the H200 (driver 580, docs/gpu-validation.md): the
 * default pool reserved 32 MiB after live allocations of 1 B, 1 MiB and
 * 3 MiB, 64 MiB after 33 MiB more, 160 MiB after 100 MiB more, 1,184 MiB
 * after 1 GiB more: each time the need rounded up to 32 MiB (an allocation
 * spans the free end of the last chunk and the new ones). The simulated
 * driver grows its pools by this rule and the interposer reserves by it. */
#define POOL_CHUNK ((uint64_t)32 << 20)

static inline uint64_t pool_growth(uint64_t reserved, uint64_t used, uint64_t charge,
                                   uint64_t chunk)
{
    if (used + charge <= reserved)
        return 0;
    uint64_t need = used + charge - reserved;
    return (need + chunk - 1) / chunk * chunk;
}

/* The most a program can ask for and be charged no more than `avail`. */
static inline uint64_t device_fit(uint64_t avail)
{
    return avail >= DEVICE_PAGE ? avail & ~(DEVICE_PAGE - 1) : avail & ~(DEVICE_ALIGN - 1);
}

#endif
