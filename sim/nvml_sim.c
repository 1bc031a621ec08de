/* The simulated NVML: a libnvidia-ml.so.1 for machines without a GPU, over
 * the same devices and the same shared occupancy as the simulated driver,
 * so that its memory figures and process list agree with cuMemGetInfo, and
 * its device (name, UUID, PCI address) is the one CUDA shows.
 *
 * Like the real NVML, it lists every device of the machine whatever
 * CUDA_VISIBLE_DEVICES says (that variable is the CUDA driver's). This file
 * answers initialisation, handles, versions, PCI, memory and processes
 * (compute; there are no graphics ones), under the original and the
 * versioned names; nvml_board.c the board's other figures; nvml_limits.c
 * R615's per-cgroup memory limits; nvml_stubs.c every other function of
 * nvml.h. */
#include "nvml_sim.h"
#include "config.h"
#include "limits.h"
#include "occupancy.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>


static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct nvmlDevice_st devices[SIM_MAX_DEVICES];
static int ndev, inits;
static int driver = SIM_DRIVER_DEFAULT; /* the series, read by the first nvmlInit */
static int accounting;                  /* VRAM_SIM_ACCOUNTING, read with it */

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    pthread_mutex_lock(&mu);
    nvmlReturn_t rc = NVML_SUCCESS;
    if (inits == 0) {
        uint64_t total[SIM_MAX_DEVICES], reserved = sim_config_reserved();
        int n = sim_config_devices(total), series = sim_config_driver(),
            accounts = sim_config_accounting();
        if (n < 0 || series < 0 || accounts < 0) {
            rc = NVML_ERROR_UNKNOWN;
        } else {
            for (int i = 0; i < n; i++) {
                devices[i].index = i;
                devices[i].reserved = reserved;
                devices[i].total = total[i] + reserved;
                sim_config_uuid_text(i, devices[i].uuid);
                devices[i].bus = sim_config_pci_bus(i);
                devices[i].node = sim_config_device_node(i, n);
            }
            ndev = n;
            __atomic_store_n(&driver, series, __ATOMIC_RELAXED);
            __atomic_store_n(&accounting, accounts, __ATOMIC_RELAXED);
        }
    }
    if (rc == NVML_SUCCESS)
        __atomic_add_fetch(&inits, 1, __ATOMIC_RELAXED); /* read without the lock */
    pthread_mutex_unlock(&mu);
    return rc;
}

EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags; /* NO_GPUS and NO_ATTACH: the simulator never needs to attach */
    return nvmlInit_v2();
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&mu);
    nvmlReturn_t rc = inits ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    if (inits)
        __atomic_sub_fetch(&inits, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&mu);
    return rc;
}

bool nvml_sim_ready(void) { return __atomic_load_n(&inits, __ATOMIC_RELAXED) > 0; }
int nvml_sim_driver(void) { return __atomic_load_n(&driver, __ATOMIC_RELAXED); }
bool nvml_sim_accounting(void) { return __atomic_load_n(&accounting, __ATOMIC_RELAXED) > 0; }
static bool ready(void) { return nvml_sim_ready(); }

nvmlReturn_t nvml_sim_check(nvmlDevice_t d)
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

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!ready())
        return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= (unsigned)ndev)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    if (!ready())
        return NVML_ERROR_UNINITIALIZED;
    unsigned domain = 0, bus, dev = 0, fn = 0;
    if (!pciBusId || !device ||
        (sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4 &&
         sscanf(pciBusId, "%x:%x.%x", &bus, &dev, &fn) != 3))
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < ndev; i++)
        if (domain == 0 && bus == (unsigned)devices[i].bus && dev == 0 && fn == 0) {
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
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
    nvmlReturn_t rc = nvml_sim_check(d);
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
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!name || !length)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (length <= strlen(SIM_DEVICE_NAME))
        return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(name, length, "%s", SIM_DEVICE_NAME);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)d->index;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor)
{
    return nvmlDeviceGetIndex(d, minor); /* /dev/nvidiaN */
}

/* ---------------------------------------------------------------- system */

nvmlReturn_t nvml_sim_text(char *out, unsigned int length, const char *value)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (length <= strlen(value))
        return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(out, value);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (!ready())
        return NVML_ERROR_UNINITIALIZED;
    return nvml_sim_text(version, length, nvml_sim_driver() == SIM_DRIVER_R615
                                              ? SIM_DRIVER_R615_VERSION_TEXT
                                              : SIM_DRIVER_VERSION_TEXT);
}

/* Answered before nvmlInit too, as NVIDIA's is: the series from the
 * environment then. */
EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    int series = ready() ? nvml_sim_driver() : sim_config_driver();
    if (series < 0)
        return NVML_ERROR_UNKNOWN;
    return nvml_sim_text(version, length,
                         series == SIM_DRIVER_R615 ? SIM_NVML_R615_VERSION_TEXT : SIM_NVML_VERSION_TEXT);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
    if (!v)
        return NVML_ERROR_INVALID_ARGUMENT;
    *v = SIM_CUDA_VERSION;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

nvmlReturn_t nvml_sim_figure(nvmlDevice_t d, unsigned int *out, unsigned int value)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && !out)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        *out = value;
    return rc;
}

nvmlReturn_t nvml_sim_figure64(nvmlDevice_t d, unsigned long long *out, unsigned long long value)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && !out)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        *out = value;
    return rc;
}

nvmlReturn_t nvml_sim_measured(nvmlDevice_t d, unsigned int *out, unsigned (*f)(nvmlDevice_t))
{
    nvmlReturn_t rc = nvml_sim_check(d);
    return rc != NVML_SUCCESS ? rc : nvml_sim_figure(d, out, f(d));
}

nvmlReturn_t nvml_sim_not_supported(nvmlDevice_t d, const void *out)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && !out)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    return rc == NVML_SUCCESS ? NVML_ERROR_NOT_SUPPORTED : rc;
}

/* ------------------------------------------------------------------- PCI */

/* The first 36 bytes, common to every layout. */
static nvmlReturn_t pci(nvmlDevice_t d, nvmlPciInfo_t *p)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!p)
        return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02X:00.0", d->bus);
    p->domain = 0;
    p->bus = (unsigned)d->bus;
    p->device = 0;
    p->pciDeviceId = SIM_PCI_DEVICE << 16 | SIM_PCI_VENDOR;
    p->pciSubSystemId = SIM_PCI_SUBSYSTEM << 16 | SIM_PCI_VENDOR;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p)
{
    nvmlReturn_t rc = pci(d, p);
    if (rc == NVML_SUCCESS)
        snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", d->bus);
    return rc;
}

/* nvml.h declares the original names with today's struct, but a program
 * built when they were current passes the original, shorter layout: only
 * its bytes are written. */
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_t *out)
{
    nvmlPciInfo_v1_t *p = (nvmlPciInfo_v1_t *)(void *)out;
    nvmlPciInfo_t v3;
    nvmlReturn_t rc = p ? pci(d, &v3) : NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS) {
        memcpy(p->busId, v3.busIdLegacy, sizeof p->busId);
        p->domain = v3.domain, p->bus = v3.bus, p->device = v3.device;
        p->pciDeviceId = v3.pciDeviceId, p->pciSubSystemId = v3.pciSubSystemId;
    }
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, nvmlPciInfo_t *p)
{
    return nvmlDeviceGetPciInfo_v2(d, p);
}

uint64_t nvml_sim_used(int dev)
{
    /* Every process's, those in pid namespaces this reader cannot see too:
     * the memory is used whoever may list its holder. */
    return occ_used(dev);
}

unsigned nvml_sim_load(nvmlDevice_t d)
{
    uint64_t room = d->total - d->reserved, used = nvml_sim_used(d->index);
    if (used >= room || room == 0)
        return 100;
    return (unsigned)((used * 100 + room / 2) / room);
}

/* NVML's two answers, as nvml.h documents them: the original counts what
 * the driver reserves as used (an idle H100 shows 480 MiB used); _v2 gives
 * it apart, and its used is what processes allocated. free is the same in
 * both, and is what CUDA's cuMemGetInfo says with no context of its own.
 * Called from inside a cgroup with a hard limit (R615, limits.h), both
 * show the limit as the device: its total, what the cgroup holds as used,
 * the rest as free as far as the device has it, and no reserve (the
 * driver's is outside every cgroup's limit). */
static void memory(nvmlDevice_t d, uint64_t *total, uint64_t *reserved, uint64_t *used,
                   uint64_t *free_b)
{
    uint64_t held = nvml_sim_used(d->index), room = d->total - d->reserved, limit, in_cgroup;
    *total = d->total;
    *reserved = d->reserved;
    *used = held < room ? held : room;
    *free_b = room - *used;
    if (limits_view(d->index, &limit, &in_cgroup)) {
        *total = limit < room ? limit : room;
        *reserved = 0;
        *used = in_cgroup < *total ? in_cgroup : *total;
        *free_b = *total - *used < *free_b ? *total - *used : *free_b;
    }
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!m)
        return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t total, reserved, used, free_b;
    memory(d, &total, &reserved, &used, &free_b);
    *m = (nvmlMemory_t){.total = total, .free = free_b, .used = reserved + used};
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!m || m->version != nvmlMemory_v2)
        return m ? NVML_ERROR_ARGUMENT_VERSION_MISMATCH : NVML_ERROR_INVALID_ARGUMENT;
    uint64_t total, reserved, used, free_b;
    memory(d, &total, &reserved, &used, &free_b);
    *m = (nvmlMemory_v2_t){.version = m->version, .total = total, .reserved = reserved,
                           .free = free_b, .used = used};
    return NVML_SUCCESS;
}

nvmlReturn_t nvml_sim_processes(nvmlDevice_t d, unsigned int *count, bool buffer,
                                struct occ_process *p, int *n)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *n = occ_processes(d->index, p, NVML_SIM_MAX_PROCESSES);
    if ((unsigned)*n > *count || (!buffer && *n > 0)) {
        *count = (unsigned)*n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = (unsigned)*n;
    return NVML_SUCCESS;
}

/* The list through put(), in the caller's layout. */
static nvmlReturn_t processes(nvmlDevice_t d, unsigned int *count,
                              void (*put)(void *infos, int i, const struct occ_process *p),
                              void *infos)
{
    struct occ_process p[NVML_SIM_MAX_PROCESSES];
    int n;
    nvmlReturn_t rc = nvml_sim_processes(d, count, infos != NULL, p, &n);
    for (int i = 0; rc == NVML_SUCCESS && i < n; i++)
        put(infos, i, &p[i]);
    return rc;
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

/* _v2's entries have _v3's layout. */
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count,
                                                            nvmlProcessInfo_t *infos)
{
    return processes(d, count, put_v3, infos);
}

/* No process draws on the simulated GPU. */
static nvmlReturn_t no_processes(nvmlDevice_t d, unsigned int *count) { return nvml_sim_figure(d, count, 0); }

EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int *count,
                                                          nvmlProcessInfo_v1_t *infos)
{
    (void)infos;
    return no_processes(d, count);
}

EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int *count,
                                                             nvmlProcessInfo_t *infos)
{
    (void)infos;
    return no_processes(d, count);
}

EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                             nvmlProcessInfo_t *infos)
{
    (void)infos;
    return no_processes(d, count);
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient Resources";
    default: return "Unknown Error";
    }
}
