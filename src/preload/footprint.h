/* footprint: what the device gives this process beyond its allocations,
 * measured around the driver call that takes it.
 *
 * A CUDA context and a loaded module take device memory that no allocation
 * call asks for, in amounts the driver decides (a context: hundreds of MiB
 * on a GPU, more on larger ones). vram measures rather than guesses, in the
 * first of these ways that works:
 *   1. NVML's figure for this process on the device (what nvidia-smi shows
 *      for it), after the call minus before. What other processes do cannot
 *      change it; only this process's other threads, allocating or freeing
 *      during the call, can (the contexts and modules of this process are
 *      measured one at a time: footprint_lock).
 *   2. The device's free memory (cuMemGetInfo in a context of this process
 *      on the device), before the call minus after: for when NVML cannot
 *      say (not installed, or in a PID namespace it does not see into).
 *      Other processes' allocations and frees in between change it.
 *   3. A process's first context on a device, when NVML cannot say: there is
 *      no context to read the free memory in before it, so a scratch context
 *      is made beside it and destroyed (src/cuda/context_cost.h).
 * NVML is read through nvml_reader.h, loaded at the first measure (never
 * for a program that makes no context).
 *
 * What each context and module was charged is kept here too (struct
 * footprint_charges), for contexts.c and modules.c alike.
 */
#ifndef VRAM_FOOTPRINT_H
#define VRAM_FOOTPRINT_H

#include "../cuda/cuda_abi.h"
#include "../record/recording.h"
#include "../command/command.h"

#include <stdbool.h>
#include <stdint.h>

struct footprint {
    int dev;
    int listed;    /* NVML listed this process before the call (1), did not (0), cannot say (-1) */
    bool has_free; /* the device's free memory before the call is known */
    uint64_t used, free;
};

/* One measured event at a time in this process. */
void footprint_lock(void);
void footprint_unlock(void);

/* Before a call that may take memory on `dev`; `ctx` is a live context of
 * this process on `dev` to read the free memory in if NVML cannot say, or
 * NULL when there is none. */
void footprint_begin(struct footprint *f, int dev, CUcontext ctx);

/* After it: what it took, into *bytes (0 if it took nothing). `ctx` is a
 * live context on the device now; `fresh` says the call created it, which
 * allows way 3. 0, or -1 when nothing could measure it. */
int footprint_end(struct footprint *f, CUcontext ctx, bool fresh, uint64_t *bytes);

/* In a child after fork(). */
void footprint_after_fork(void);

/* What each context or module of this process was charged, by its handle
 * (a process has tens, not thousands), kept under footprint_lock. */
struct footprint_charges {
    struct footprint_charge {
        const void *handle;
        int dev;
        uint64_t bytes;
        int users; /* a context's: 1, and one per cuCtxAttach not detached */
    } *v;
    int n, cap;
};

/* Room for one more, made before the driver is called: a charge that
 * could not be remembered could never be given back. false: no memory. */
bool footprint_room(struct footprint_charges *t);
/* Remembers a charge (after footprint_room). */
void footprint_charged(struct footprint_charges *t, const void *handle, int dev, uint64_t bytes);
/* Its end: the charge of `handle` given back to the budget as `part` and
 * recorded as a free of `family`. false if `handle` was not charged. */
bool footprint_ended(struct footprint_charges *t, const void *handle, enum command_part part,
                     enum record_family family);
/* The charge of `handle`, or NULL. */
struct footprint_charge *footprint_find(struct footprint_charges *t, const void *handle);
/* Forgets them all (a forked child holds none). */
void footprint_forget(struct footprint_charges *t);

#endif
