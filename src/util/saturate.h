/* saturate: sums of figures from outside (NVML's per-process memory) that
 * stop at the largest value rather than wrap: two processes NVML says hold
 * 2^63 bytes each are not 0 bytes together. */
#ifndef VRAM_SATURATE_H
#define VRAM_SATURATE_H

#include <stdint.h>

static inline uint64_t add_saturating(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

#endif
