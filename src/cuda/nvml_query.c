/* nvml_query: NVML's loader and the few questions vram asks it. */
#include "nvml_query.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    void *lib;
    PFN_nvmlShutdown shutdown;
    PFN_nvmlDeviceGetCount_v2 count;
    PFN_nvmlDeviceGetHandleByIndex_v2 by_index;
    PFN_nvmlDeviceGetHandleByUUID by_uuid;
    PFN_nvmlDeviceGetUUID uuid;
    PFN_nvmlDeviceGetName name;
    PFN_nvmlDeviceGetPciInfo_v3 pci;
    PFN_nvmlDeviceGetMinorNumber minor;
    PFN_nvmlDeviceGetMemoryInfo memory;
    PFN_nvmlDeviceGetMemoryInfo_v2 memory_v2;
    struct nvml_process_calls processes;
    PFN_nvmlSystemGetDriverVersion driver_version;
    PFN_nvmlSystemGetNVMLVersion nvml_version;
    PFN_nvmlSystemGetCudaDriverVersion_v2 cuda_version;
    PFN_nvmlErrorString error_string;
    PFN_nvmlDeviceGetUtilizationRates utilization;
    PFN_nvmlDeviceGetTemperature temperature;
    PFN_nvmlDeviceGetPowerUsage power;
    PFN_nvmlDeviceGetPowerManagementLimit power_limit;
    PFN_nvmlDeviceGetEnforcedPowerLimit enforced_limit;
} nv;

static const char *nvml_error(nvmlReturn_t rc, char buf[32])
{
    const char *s = nv.error_string ? nv.error_string(rc) : NULL;
    if (s)
        return s;
    snprintf(buf, 32, "NVML error %d", rc);
    return buf;
}

int nvml_open(const char *library, const char *who, char *err, size_t n)
{
    if (!library)
        library = "libnvidia-ml.so.1";
    nv.lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!nv.lib) {
        snprintf(err, n, "cannot load NVML (%s): %s", library, dlerror());
        return -1;
    }
#define FIND(field, type, symbol) nv.field = (type)dlsym(nv.lib, symbol)
    PFN_nvmlInit_v2 init;
    init = (PFN_nvmlInit_v2)dlsym(nv.lib, "nvmlInit_v2");
    FIND(shutdown, PFN_nvmlShutdown, "nvmlShutdown");
    FIND(count, PFN_nvmlDeviceGetCount_v2, "nvmlDeviceGetCount_v2");
    FIND(by_index, PFN_nvmlDeviceGetHandleByIndex_v2, "nvmlDeviceGetHandleByIndex_v2");
    FIND(by_uuid, PFN_nvmlDeviceGetHandleByUUID, "nvmlDeviceGetHandleByUUID");
    FIND(uuid, PFN_nvmlDeviceGetUUID, "nvmlDeviceGetUUID");
    FIND(name, PFN_nvmlDeviceGetName, "nvmlDeviceGetName");
    FIND(pci, PFN_nvmlDeviceGetPciInfo_v3, "nvmlDeviceGetPciInfo_v3");
    FIND(minor, PFN_nvmlDeviceGetMinorNumber, "nvmlDeviceGetMinorNumber");
    FIND(memory, PFN_nvmlDeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo");
    FIND(memory_v2, PFN_nvmlDeviceGetMemoryInfo_v2, "nvmlDeviceGetMemoryInfo_v2");
    FIND(processes.v3, PFN_nvmlDeviceGetComputeRunningProcesses_v3,
         "nvmlDeviceGetComputeRunningProcesses_v3");
    FIND(processes.v1, PFN_nvmlDeviceGetComputeRunningProcesses,
         "nvmlDeviceGetComputeRunningProcesses");
    FIND(driver_version, PFN_nvmlSystemGetDriverVersion, "nvmlSystemGetDriverVersion");
    FIND(nvml_version, PFN_nvmlSystemGetNVMLVersion, "nvmlSystemGetNVMLVersion");
    FIND(cuda_version, PFN_nvmlSystemGetCudaDriverVersion_v2, "nvmlSystemGetCudaDriverVersion_v2");
    FIND(error_string, PFN_nvmlErrorString, "nvmlErrorString");
    FIND(utilization, PFN_nvmlDeviceGetUtilizationRates, "nvmlDeviceGetUtilizationRates");
    FIND(temperature, PFN_nvmlDeviceGetTemperature, "nvmlDeviceGetTemperature");
    FIND(power, PFN_nvmlDeviceGetPowerUsage, "nvmlDeviceGetPowerUsage");
    FIND(power_limit, PFN_nvmlDeviceGetPowerManagementLimit, "nvmlDeviceGetPowerManagementLimit");
    FIND(enforced_limit, PFN_nvmlDeviceGetEnforcedPowerLimit, "nvmlDeviceGetEnforcedPowerLimit");
#undef FIND
    if (!init || !nv.count || !nv.by_index || !nv.uuid || !nv.memory ||
        (!nv.processes.v3 && !nv.processes.v1)) {
        snprintf(err, n, "%s lacks the NVML functions %s needs", library, who);
        nv.shutdown = NULL; /* nothing started */
        nvml_close();
        return -1;
    }
    char buf[32];
    nvmlReturn_t rc = init();
    if (rc != NVML_SUCCESS) {
        snprintf(err, n, "NVML (%s) failed to start: %s", library, nvml_error(rc, buf));
        nv.shutdown = NULL;
        nvml_close();
        return -1;
    }
    return 0;
}

void *nvml_symbol(const char *name) { return nv.lib ? dlsym(nv.lib, name) : NULL; }

const char *nvml_error_text(nvmlReturn_t rc, char buf[32]) { return nvml_error(rc, buf); }

void nvml_close(void)
{
    if (nv.shutdown)
        nv.shutdown();
    if (nv.lib)
        dlclose(nv.lib);
    memset(&nv, 0, sizeof nv);
}

int nvml_count(char *err, size_t n)
{
    unsigned count = 0;
    char buf[32];
    nvmlReturn_t rc = nv.lib ? nv.count(&count) : NVML_ERROR_UNINITIALIZED;
    if (rc != NVML_SUCCESS) {
        snprintf(err, n, "NVML cannot count the GPUs: %s", nvml_error(rc, buf));
        return -1;
    }
    return (int)count;
}

int nvml_by_index(unsigned index, nvmlDevice_t *d, char *err, size_t n)
{
    char buf[32];
    nvmlReturn_t rc = nv.lib ? nv.by_index(index, d) : NVML_ERROR_UNINITIALIZED;
    if (rc != NVML_SUCCESS) {
        snprintf(err, n, "NVML device %u cannot be read: %s", index, nvml_error(rc, buf));
        return -1;
    }
    return 0;
}

int nvml_by_uuid(const char *uuid, nvmlDevice_t *d, char *err, size_t n)
{
    char buf[32];
    nvmlReturn_t rc = !nv.lib      ? NVML_ERROR_UNINITIALIZED
                      : nv.by_uuid ? nv.by_uuid(uuid, d)
                                   : NVML_ERROR_NOT_SUPPORTED;
    if (rc != NVML_SUCCESS) {
        snprintf(err, n, "NVML does not know %s: %s", uuid, nvml_error(rc, buf));
        return -1;
    }
    return 0;
}

int nvml_about(nvmlDevice_t d, struct nvml_about *a, char *err, size_t n)
{
    char buf[32];
    memset(a, 0, sizeof *a);
    a->minor = -1;
    nvmlReturn_t rc = nv.uuid(d, a->uuid, sizeof a->uuid);
    if (rc != NVML_SUCCESS) {
        snprintf(err, n, "NVML cannot say a GPU's UUID: %s", nvml_error(rc, buf));
        return -1;
    }
    if (nv.name && nv.name(d, a->name, sizeof a->name) != NVML_SUCCESS)
        a->name[0] = 0;
    nvmlPciInfo_t pci;
    if (nv.pci && nv.pci(d, &pci) == NVML_SUCCESS)
        snprintf(a->pci_bus_id, sizeof a->pci_bus_id, "%.*s", (int)sizeof pci.busId, pci.busId);
    unsigned minor;
    if (nv.minor && nv.minor(d, &minor) == NVML_SUCCESS && minor < 1u << 20)
        a->minor = (int)minor;
    return 0;
}

/* NVML's original figures count what the driver reserves as used and in
 * the total (an idle H100: 81,559 MiB, 480 MiB used); CUDA's total leaves
 * it out (79.18 GiB). _v2 gives it apart: the total here is what processes
 * can have, as CUDA counts it, so that total = used + free. */
int nvml_memory(nvmlDevice_t d, struct nvml_memory *m, char *err, size_t n)
{
    char buf[32];
    nvmlMemory_v2_t v2 = {.version = nvmlMemory_v2};
    if (nv.memory_v2 && nv.memory_v2(d, &v2) == NVML_SUCCESS && v2.reserved <= v2.total) {
        *m = (struct nvml_memory){v2.total - v2.reserved, v2.used, v2.free, v2.reserved};
        return 0;
    }
    nvmlMemory_t mem;
    nvmlReturn_t rc = nv.memory(d, &mem);
    if (rc != NVML_SUCCESS) {
        snprintf(err, n, "NVML cannot read a GPU's memory: %s", nvml_error(rc, buf));
        return -1;
    }
    *m = (struct nvml_memory){mem.total, mem.used, mem.free, 0};
    return 0;
}

int nvml_processes_on(nvmlDevice_t d, struct nvml_process **out, char *err, size_t n)
{
    char buf[32];
    nvmlReturn_t rc;
    int count = nvml_process_read(&nv.processes, d, out, &rc);
    if (count >= 0)
        return count;
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE)
        snprintf(err, n, "NVML's list of a GPU's processes did not fit the room NVML asked for "
                 "(it kept growing while it was read, or NVML miscounts it)");
    else
        snprintf(err, n, "NVML cannot list a GPU's processes: %s", nvml_error(rc, buf));
    return -1;
}

void nvml_versions(struct nvml_versions *v)
{
    memset(v, 0, sizeof *v);
    if (!nv.lib)
        return;
    if (nv.driver_version && nv.driver_version(v->driver, sizeof v->driver) != NVML_SUCCESS)
        v->driver[0] = 0;
    if (nv.nvml_version && nv.nvml_version(v->nvml, sizeof v->nvml) != NVML_SUCCESS)
        v->nvml[0] = 0;
    int cuda;
    /* CUDA's encoding: 1000 * major + 10 * minor. */
    if (nv.cuda_version && nv.cuda_version(&cuda) == NVML_SUCCESS && cuda > 0)
        snprintf(v->cuda, sizeof v->cuda, "%d.%d", cuda / 1000, cuda % 1000 / 10);
}

void nvml_sensors(nvmlDevice_t d, struct nvml_sensors *s)
{
    *s = (struct nvml_sensors){-1, -1, -1, -1, -1};
    if (!nv.lib)
        return;
    /* Each figure on its own: a GPU (or an older driver, or a library
     * without the symbol) may answer some and not others. */
    nvmlUtilization_t u;
    if (nv.utilization && nv.utilization(d, &u) == NVML_SUCCESS && u.gpu <= 100 && u.memory <= 100)
        s->gpu_percent = (int)u.gpu, s->memory_percent = (int)u.memory;
    unsigned v;
    if (nv.temperature && nv.temperature(d, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS && v < 1000)
        s->celsius = (int)v;
    if (nv.power && nv.power(d, &v) == NVML_SUCCESS && v < 100000000u)
        s->milliwatts = (long)v;
    /* The limit in force where the driver says it, else the one set. */
    if ((nv.enforced_limit && nv.enforced_limit(d, &v) == NVML_SUCCESS && v < 100000000u) ||
        (nv.power_limit && nv.power_limit(d, &v) == NVML_SUCCESS && v < 100000000u))
        s->limit_milliwatts = (long)v;
}
