/* array_layout: the device memory an array or mipmapped array occupies.
 *
 * Rows are padded to 512 bytes, each level holds whole rows and slices,
 * levels halve each dimension down to 1, and the whole is charged in the
 * device's granularity (granularity.h). The simulated driver takes exactly
 * this; the interposer uses it as its estimate before a real driver says
 * (cuArrayGetMemoryRequirements). */
#ifndef VRAM_ARRAY_LAYOUT_H
#define VRAM_ARRAY_LAYOUT_H

#include "cuda_abi.h"
#include "granularity.h"

/* Bytes of one channel of a texel; 0 for a format we do not know. */
static inline unsigned array_format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

/* 0 when the description is not a valid array (unknown format, channels
 * other than 1, 2 or 4, no width, no levels). */
static inline uint64_t array_layout_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    uint64_t elem = (uint64_t)array_format_bytes(d->Format) * d->NumChannels;
    if (!elem || (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4) || !d->Width ||
        !levels)
        return 0;
    uint64_t sum = 0, w = d->Width, h = d->Height, z = d->Depth;
    for (unsigned l = 0; l < levels && l < 64; l++) {
        sum += ((w * elem + 511) & ~(uint64_t)511) * (h ? h : 1) * (z ? z : 1);
        w = w > 1 ? w / 2 : 1;
        h = h > 1 ? h / 2 : h;
        z = z > 1 ? z / 2 : z;
    }
    return device_charge(sum);
}

#endif
