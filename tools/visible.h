/* visible: the GPUs a program started by `vram run` will see, asked of the
 * CUDA driver before the program starts.
 *
 * A budget for a device the program will not have (--limit 5=1GiB on a
 * one-GPU machine), a --devices entry that names no GPU, or a fraction that
 * leaves a GPU nothing would otherwise mean a program running with no
 * budget at all, or none it can use; vram run refuses them first.
 */
#ifndef VRAM_VISIBLE_H
#define VRAM_VISIBLE_H

#include "../src/core/options.h"
#include "../src/cuda/uuid.h"

#include <stddef.h>
#include <stdint.h>

struct visible_gpu {
    int ordinal; /* the driver's, without CUDA_VISIBLE_DEVICES */
    char uuid[UUID_TEXT_SIZE];
    char name[96];
    uint64_t total;
};

struct visible {
    int n; /* numbered 0..n-1 as the program will number them */
    struct visible_gpu gpu[OPT_MAX_DEVICES];
};

/* The GPUs of `devices` (--devices: ordinals or GPU-UUID prefixes, as
 * CUDA_VISIBLE_DEVICES takes them, each naming one GPU of this machine),
 * or, when it is NULL, those the driver shows under the environment's own
 * CUDA_VISIBLE_DEVICES. 0, or -1 with a message that names the entry, or
 * the driver's problem, in err. */
int visible_gpus(const char *devices, struct visible *out, char *err, size_t errlen);

/* "1 GPU (0: GPU-5a1d..., 12.00 GiB)", "2 GPUs (0: ..., 1: ...)", "no GPU":
 * the list for a message. */
void visible_describe(const struct visible *v, char *out, size_t n);

#endif
