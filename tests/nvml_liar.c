/* A libnvidia-ml.so.1 that misbehaves, for test_nvml_liar.sh (issue 26
 * items 9 and 10): one 12 GiB GPU whose name and driver version carry
 * terminal escapes, and whose process list, as NVML_LIAR says
 * (comma-separated):
 *   count  answers SUCCESS with a count 8 more than the room it was given
 *          (filling only the room): a reader that trusts the count reads
 *          and writes past its buffer;
 *   huge   lists two processes (the caller and its parent) each holding
 *          2^63 bytes: a sum that does not saturate wraps to 0.
 * Without either, the two processes hold 1 GiB each. */
#include "nvml_one_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int lies(const char *what)
{
    const char *v = getenv("NVML_LIAR");
    size_t n = strlen(what);
    for (const char *p = v; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ','))
        if (strncmp(p, what, n) == 0 && (p[n] == ',' || p[n] == 0))
            return 1;
    return 0;
}

EXPORT nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

/* Any GPU asked for by UUID is this one: vram devices finds the GPUs
 * through the (simulated) CUDA driver, then asks NVML by UUID. */
EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    (void)uuid;
    *device = &the_gpu;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    (void)device;
    snprintf(uuid, length, "GPU-11a20000-0000-4000-8000-000000000000");
    return NVML_SUCCESS;
}

/* Escapes that clear the screen, retitle the window and ring the bell. */
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    (void)device;
    snprintf(name, length, "\033[2J\033]0;owned\007NVIDIA Liar");
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    snprintf(version, length, "\033[31m999.99\033[0m");
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    (void)device;
    memory->total = 12ull << 30;
    memory->used = 2ull << 30;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                            unsigned int *count,
                                                            nvmlProcessInfo_t *infos)
{
    (void)device;
    unsigned room = *count, n = 2;
    unsigned long long used = lies("huge") ? 1ull << 63 : 1ull << 30;
    const unsigned pids[2] = {(unsigned)getpid(), (unsigned)getppid()};
    if (room < n && !lies("count")) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n && i < room; i++) {
        memset(&infos[i], 0, sizeof infos[i]);
        infos[i].pid = pids[i];
        infos[i].usedGpuMemory = used;
    }
    *count = lies("count") ? room + 8 : n;
    return NVML_SUCCESS;
}
