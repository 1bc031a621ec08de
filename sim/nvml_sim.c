/* The simulated NVML: a libnvidia-ml.so.1 for machines without a GPU, over
 * the same devices and the same shared occupancy as the simulated driver,
 * so that its memory figures and process list agree with cuMemGetInfo. */
#include "../src/cuda/nvml_abi.h"
#include "config.h"
#include "occupancy.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

struct nvmlDevice_st {
    int index;
    uint64_t total;
    char uuid[48];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct nvmlDevice_st devices[SIM_MAX_DEVICES];
static int ndev, inits;

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    pthread_mutex_lock(&mu);
    nvmlReturn_t rc = NVML_SUCCESS;
    if (inits == 0) {
        uint64_t total[SIM_MAX_DEVICES];
        int n = sim_config_devices(total);
        if (n < 0) {
            rc = NVML_ERROR_UNKNOWN;
        } else {
            for (int i = 0; i < n; i++) {
                devices[i].index = i;
                devices[i].total = total[i];
                sim_config_uuid_text(i, devices[i].uuid);
            }
            ndev = n;
        }
    }
    if (rc == NVML_SUCCESS)
        inits++;
    pthread_mutex_unlock(&mu);
    return rc;
}

EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&mu);
    nvmlReturn_t rc = inits ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    if (inits)
        inits--;
    pthread_mutex_unlock(&mu);
    return rc;
}

static bool ready(void) { return inits > 0; }

static nvmlReturn_t check(nvmlDevice_t d)
{
    if (!ready())
        return NVML_ERROR_UNINITIALIZED;
    if (!d || d < devices || d >= devices + ndev)
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!ready())
        return NVML_ERROR_UNINITIALIZED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned)ndev;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!ready())
        return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= (unsigned)ndev)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    if (!ready())
        return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < ndev; i++)
        if (strcmp(devices[i].uuid, uuid) == 0) {
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length)
{
    nvmlReturn_t rc = check(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!uuid)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (length <= strlen(d->uuid))
        return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(uuid, d->uuid);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length)
{
    nvmlReturn_t rc = check(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!name || !length)
        return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(name, length, "vram simulated GPU");
    return NVML_SUCCESS;
}

static uint64_t used_on(int dev)
{
    struct occ_process p[256];
    int n = occ_processes(dev, p, 256);
    uint64_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += p[i].bytes;
    return sum;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    nvmlReturn_t rc = check(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!m)
        return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t used = used_on(d->index);
    m->total = d->total;
    m->used = used < d->total ? used : d->total;
    m->free = d->total - m->used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
    if (!m || m->version != nvmlMemory_v2)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlMemory_t v1;
    nvmlReturn_t rc = nvmlDeviceGetMemoryInfo(d, &v1);
    if (rc == NVML_SUCCESS) {
        m->total = v1.total;
        m->reserved = 0;
        m->free = v1.free;
        m->used = v1.used;
    }
    return rc;
}

/* Fills up to *count entries through put(); NVML's convention: with too
 * small a buffer, *count says how many there are. */
static nvmlReturn_t processes(nvmlDevice_t d, unsigned int *count,
                              void (*put)(void *infos, int i, const struct occ_process *p),
                              void *infos)
{
    nvmlReturn_t rc = check(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct occ_process p[256];
    int n = occ_processes(d->index, p, 256);
    if ((unsigned)n > *count || (!infos && n > 0)) {
        *count = (unsigned)n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (int i = 0; i < n; i++)
        put(infos, i, &p[i]);
    *count = (unsigned)n;
    return NVML_SUCCESS;
}

static void put_v1(void *infos, int i, const struct occ_process *p)
{
    ((nvmlProcessInfo_v1_t *)infos)[i] = (nvmlProcessInfo_v1_t){(unsigned)p->pid, p->bytes};
}

static void put_v3(void *infos, int i, const struct occ_process *p)
{
    ((nvmlProcessInfo_t *)infos)[i] =
        (nvmlProcessInfo_t){(unsigned)p->pid, p->bytes, 0xFFFFFFFFu, 0xFFFFFFFFu};
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *count,
                                                         nvmlProcessInfo_v1_t *infos)
{
    return processes(d, count, put_v1, infos);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                            nvmlProcessInfo_t *infos)
{
    return processes(d, count, put_v3, infos);
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    default: return "Unknown Error";
    }
}

#define SAME_TYPE(fn, pfn) _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), pfn), #fn)
SAME_TYPE(nvmlInit_v2, PFN_nvmlInit_v2);
SAME_TYPE(nvmlShutdown, PFN_nvmlShutdown);
SAME_TYPE(nvmlDeviceGetCount_v2, PFN_nvmlDeviceGetCount_v2);
SAME_TYPE(nvmlDeviceGetHandleByIndex_v2, PFN_nvmlDeviceGetHandleByIndex_v2);
SAME_TYPE(nvmlDeviceGetHandleByUUID, PFN_nvmlDeviceGetHandleByUUID);
SAME_TYPE(nvmlDeviceGetUUID, PFN_nvmlDeviceGetUUID);
SAME_TYPE(nvmlDeviceGetName, PFN_nvmlDeviceGetName);
SAME_TYPE(nvmlDeviceGetMemoryInfo, PFN_nvmlDeviceGetMemoryInfo);
SAME_TYPE(nvmlDeviceGetMemoryInfo_v2, PFN_nvmlDeviceGetMemoryInfo_v2);
SAME_TYPE(nvmlDeviceGetComputeRunningProcesses, PFN_nvmlDeviceGetComputeRunningProcesses);
SAME_TYPE(nvmlDeviceGetComputeRunningProcesses_v3, PFN_nvmlDeviceGetComputeRunningProcesses_v3);
SAME_TYPE(nvmlErrorString, PFN_nvmlErrorString);
