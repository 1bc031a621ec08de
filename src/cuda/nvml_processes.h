/* nvml_processes: NVML's list of the compute processes holding memory on a
 * GPU (what nvidia-smi shows per process), from whichever version of the
 * call the library has: nvmlDeviceGetComputeRunningProcesses_v3, else the
 * original. For vram devices, vram run's probe and the interposer's
 * measures. */
#ifndef VRAM_NVML_PROCESSES_H
#define VRAM_NVML_PROCESSES_H

#include "nvml_abi.h"

#include <stdbool.h>
#include <stdint.h>

struct nvml_process_calls {
    PFN_nvmlDeviceGetComputeRunningProcesses_v3 v3; /* either may be NULL */
    PFN_nvmlDeviceGetComputeRunningProcesses v1;
};

struct nvml_process {
    unsigned pid;
    bool used_known; /* NVML may not know (NVML_VALUE_NOT_AVAILABLE) */
    uint64_t used;
};

/* The most processes a GPU's list is read with: a larger count from NVML
 * is refused (nvml_process_read), not allocated. */
#define NVML_PROCESSES_MOST 65536

/* Up to *count entries into out. NVML's convention: with too small a
 * buffer, NVML_ERROR_INSUFFICIENT_SIZE and *count says how many there are;
 * a count larger than the room given is taken as that, whatever NVML
 * answered, and nothing past the room is read.
 * A process whose usage NVML does not know has used_known false, used 0. */
nvmlReturn_t nvml_process_list(const struct nvml_process_calls *c, nvmlDevice_t d, unsigned *count,
                               struct nvml_process *out);

/* The whole list, into a malloc()ed array (the caller frees it): its
 * count, or -1 with NVML's answer in *rc (NVML_ERROR_INSUFFICIENT_SIZE: it
 * kept growing while it was read, or NVML said more than
 * NVML_PROCESSES_MOST). The list can change between asking its
 * size and reading it: it is asked a few times, each with room for what
 * NVML last said plus some. */
int nvml_process_read(const struct nvml_process_calls *c, nvmlDevice_t d,
                      struct nvml_process **out, nvmlReturn_t *rc);

/* What the process `pid` holds on the GPU: 1 with *bytes when NVML lists
 * it, 0 when it does not (nothing held, or a process NVML cannot see, as
 * in another PID namespace), -1 when NVML cannot say. */
int nvml_process_usage(const struct nvml_process_calls *c, nvmlDevice_t d, unsigned pid,
                       uint64_t *bytes);

#endif
