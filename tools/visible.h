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
    int ordinal;    /* the driver's, in this process (under the inherited CUDA_VISIBLE_DEVICES) */
    char entry[96]; /* how a child's CUDA_VISIBLE_DEVICES names it: the inherited entry */
    char uuid[UUID_TEXT_SIZE];
    char name[96];
    uint64_t total;
    uint64_t context; /* what a CUDA context takes on it; 0 until measured, or unknown */
};

struct visible {
    int n; /* numbered 0..n-1 as the program will number them */
    struct visible_gpu gpu[OPT_MAX_DEVICES];
};

/* The GPUs of `devices` (--devices or VRAM_VISIBLE_DEVICES, named by
 * `origin` in messages: ordinals or GPU-UUID prefixes, as
 * CUDA_VISIBLE_DEVICES takes them; "" for none), or, when it is NULL, all
 * of them. Either way only among those the driver shows under the
 * inherited CUDA_VISIBLE_DEVICES, numbered as it numbers them: a setting
 * never reaches a GPU the scheduler or the user excluded. 0, or -1 with a
 * message that names the setting, the entry and what is accepted, or the
 * driver's problem, in err. */
int visible_gpus(const char *devices, const char *origin, struct visible *out, char *err,
                 size_t errlen);

/* The CUDA_VISIBLE_DEVICES that shows a child exactly the GPUs of v, in
 * v's order, whatever this process inherited: the inherited entries
 * chosen, written as they were. */
void visible_environment(const struct visible *v, char *out, size_t n);

/* Measures what a CUDA context takes on each GPU of v (gpu[].context), the
 * way the interposer measures it (src/preload/footprint.h): the primary
 * context is made and released again, and its memory is NVML's figure for
 * this process, or, where NVML cannot say, what a scratch context beside it
 * takes (src/cuda/context_cost.h). A GPU where neither works keeps 0. Call
 * it after visible_gpus, in the same process. */
void visible_measure_contexts(struct visible *v);

/* "1 GPU (0: GPU-5a1d..., 12.00 GiB)", "2 GPUs (0: ..., 1: ...)", "no GPU":
 * the list for a message. */
void visible_describe(const struct visible *v, char *out, size_t n);

#endif
