/* pick: which GPUs `vram run --gpus N` gives its command.
 *
 * The N GPUs with the most free memory among those whose free memory holds
 * the command's budget, chosen among the GPUs the command may see: an
 * inherited CUDA_VISIBLE_DEVICES (a scheduler's, the user's) is the set
 * picked from, never escaped. The answer is the CUDA_VISIBLE_DEVICES value
 * for the command, in the inherited form where there is one (its own
 * entries, so Slurm's indices or UUIDs stay what they were), and the line
 * vram run says on stderr. Pure: the caller reads the GPUs (visible.h for
 * the ordinals, UUIDs and totals; NVML for what is free).
 */
#ifndef VRAM_PICK_H
#define VRAM_PICK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pick_gpu {
    int ordinal;     /* as programs number it here (within the inherited set) */
    char uuid[48];
    uint64_t total;
    bool free_known; /* false: NVML could not say */
    uint64_t free;
    uint64_t budget; /* the command's budget here when it differs by GPU (a
                        share of each GPU's total); 0: pick_gpus' budget */
};

/* Picks n of the count GPUs for a budget of `budget` bytes on each (0:
 * any GPU will do, unless a GPU has a budget of its own). `inherited` is
 * CUDA_VISIBLE_DEVICES as vram run found it (NULL: unset). 0 with the
 * value in `value`, the stderr line in `say` and, when `chosen` is not
 * NULL, the n indices into gpus[] of those picked, in the order the
 * command will number them; -1 with the reason in `say` (n out of range,
 * not enough GPUs with the room, an inherited list shorter than the
 * GPUs). */
int pick_gpus(const struct pick_gpu *gpus, int count, int n, uint64_t budget,
              const char *inherited, char *value, size_t valuelen, char *say, size_t saylen,
              int *chosen);

#endif
