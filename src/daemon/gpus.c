#include "gpus.h"

#include "../cuda/nvml_abi.h"

#include <dlfcn.h>
#include <stdio.h>

static struct {
    PFN_nvmlInit_v2 init;
    PFN_nvmlDeviceGetCount_v2 count;
    PFN_nvmlDeviceGetHandleByIndex_v2 handle;
    PFN_nvmlDeviceGetUUID uuid;
    PFN_nvmlDeviceGetMemoryInfo memory;
    PFN_nvmlDeviceGetComputeRunningProcesses_v3 processes;
} nv;

int gpus_open(const char *library, int *count, char *err, size_t errlen)
{
    void *h = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, errlen, "cannot load %s: %s", library, dlerror());
        return -1;
    }
    nv.init = (PFN_nvmlInit_v2)dlsym(h, "nvmlInit_v2");
    nv.count = (PFN_nvmlDeviceGetCount_v2)dlsym(h, "nvmlDeviceGetCount_v2");
    nv.handle = (PFN_nvmlDeviceGetHandleByIndex_v2)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    nv.uuid = (PFN_nvmlDeviceGetUUID)dlsym(h, "nvmlDeviceGetUUID");
    nv.memory = (PFN_nvmlDeviceGetMemoryInfo)dlsym(h, "nvmlDeviceGetMemoryInfo");
    nv.processes = (PFN_nvmlDeviceGetComputeRunningProcesses_v3)dlsym(
        h, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!nv.init || !nv.count || !nv.handle || !nv.uuid || !nv.memory || !nv.processes) {
        snprintf(err, errlen, "%s lacks the NVML functions vramd needs", library);
        return -1;
    }
    unsigned n = 0;
    nvmlReturn_t rc = nv.init();
    if (rc == NVML_SUCCESS)
        rc = nv.count(&n);
    if (rc != NVML_SUCCESS) {
        snprintf(err, errlen, "NVML (%s) failed to start: error %d", library, rc);
        nv.init = NULL;
        return -1;
    }
    *count = (int)n;
    return 0;
}

int gpus_device(int index, char *uuid, size_t uuid_len, uint64_t *total)
{
    nvmlDevice_t d;
    nvmlMemory_t m;
    if (!nv.init || nv.handle((unsigned)index, &d) != NVML_SUCCESS ||
        nv.uuid(d, uuid, (unsigned)uuid_len) != NVML_SUCCESS || nv.memory(d, &m) != NVML_SUCCESS)
        return -1;
    *total = m.total;
    return 0;
}

int gpus_processes(int index, unsigned *pids, uint64_t *used, int max)
{
    static nvmlProcessInfo_t info[GPUS_MAX_PROCESSES];
    nvmlDevice_t d;
    unsigned n = GPUS_MAX_PROCESSES;
    if (!nv.init || nv.handle((unsigned)index, &d) != NVML_SUCCESS ||
        nv.processes(d, &n, info) != NVML_SUCCESS)
        return -1;
    int k = 0;
    for (unsigned i = 0; i < n && k < max; i++, k++) {
        pids[k] = info[i].pid;
        used[k] = info[i].usedGpuMemory;
    }
    return k;
}
