/* A libnvidia-ml.so.1 that stalls: one 12 GiB GPU whose process list does
 * not answer while the file NVML_STALL_FILE exists, as an NVML in trouble
 * (or a simulated one whose lock someone holds) would. For the test that
 * vramd's loop never waits for NVML. */
#include "nvml_one_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    (void)device;
    snprintf(uuid, length, "GPU-57a11000-0000-4000-8000-000000000000");
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    (void)device;
    memory->total = 12ull << 30;
    memory->used = 0;
    memory->free = memory->total;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                            unsigned int *count,
                                                            nvmlProcessInfo_t *infos)
{
    (void)device, (void)infos;
    const char *stall = getenv("NVML_STALL_FILE");
    /* Says that a reading is under way and stalled, for a test to go on. */
    const char *stalled = getenv("NVML_STALLED_FILE");
    FILE *f = stall && stalled && access(stall, F_OK) == 0 ? fopen(stalled, "w") : NULL;
    if (f)
        fclose(f);
    while (stall && access(stall, F_OK) == 0) {
        struct timespec t = {0, 50000000};
        nanosleep(&t, NULL);
    }
    *count = 0;
    return NVML_SUCCESS;
}
