/* The simulated NVML: a libnvidia-ml.so.1 for machines without a GPU, over
 * the same devices and the same shared occupancy as the simulated driver,
 * so that its memory figures and process list agree with cuMemGetInfo, and
 * its device (name, UUID, PCI address) is the one CUDA shows.
 *
 * Like the real NVML, it lists every device of the machine whatever
 * CUDA_VISIBLE_DEVICES says (that variable is the CUDA driver's). It answers
 * what monitoring tools and NVML bindings ask: the original and versioned
 * names of the calls, versions, PCI, processes (compute; there are no
 * graphics ones), BAR1, utilization (0: no kernels run), temperatures,
 * clocks and power of an idle H100. */
#include "../src/cuda/nvml_api.h"
#include "nvml_sim.h"
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
    int bus;
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
                devices[i].bus = sim_config_pci_bus(i);
            }
            ndev = n;
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
static bool ready(void) { return nvml_sim_ready(); }

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
    if (length <= strlen(SIM_DEVICE_NAME))
        return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(name, length, "%s", SIM_DEVICE_NAME);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index)
{
    nvmlReturn_t rc = check(d);
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

static nvmlReturn_t text(char *out, unsigned int length, const char *value)
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
    return ready() ? text(version, length, SIM_DRIVER_VERSION_TEXT) : NVML_ERROR_UNINITIALIZED;
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    return text(version, length, SIM_NVML_VERSION_TEXT);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
    if (!v)
        return NVML_ERROR_INVALID_ARGUMENT;
    *v = SIM_CUDA_VERSION;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

/* An unsigned figure of the idle profile. */
static nvmlReturn_t figure(nvmlDevice_t d, unsigned int *out, unsigned int value)
{
    nvmlReturn_t rc = check(d);
    if (rc == NVML_SUCCESS && !out)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        *out = value;
    return rc;
}

static nvmlReturn_t figure64(nvmlDevice_t d, unsigned long long *out, unsigned long long value)
{
    nvmlReturn_t rc = check(d);
    if (rc == NVML_SUCCESS && !out)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        *out = value;
    return rc;
}

/* ------------------------------------------------------------------- PCI */

/* The first 36 bytes, common to every layout. */
static nvmlReturn_t pci(nvmlDevice_t d, nvmlPciInfo_t *p)
{
    nvmlReturn_t rc = check(d);
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

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *gen)
{
    return figure(d, gen, 5);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *width)
{
    return figure(d, width, 16);
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

/* _v2's entries have _v3's layout. */
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count,
                                                            nvmlProcessInfo_t *infos)
{
    return processes(d, count, put_v3, infos);
}

/* No process draws on the simulated GPU. */
static nvmlReturn_t no_processes(nvmlDevice_t d, unsigned int *count) { return figure(d, count, 0); }

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

/* ------------------------------------------------- the rest of the board */

EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t d, nvmlBAR1Memory_t *bar1)
{
    nvmlReturn_t rc = check(d);
    if (rc == NVML_SUCCESS && !bar1)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS) /* an H100's BAR1 aperture; nothing mapped through it */
        *bar1 = (nvmlBAR1Memory_t){131072ull << 20, 131072ull << 20, 0};
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    nvmlReturn_t rc = check(d);
    if (rc == NVML_SUCCESS && !u)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        *u = (nvmlUtilization_t){0, 0}; /* no kernel ever runs */
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, nvmlTemperatureSensors_t sensor,
                                             unsigned int *temp)
{
    if (sensor != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    return figure(d, temp, 30); /* idle */
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t d, nvmlTemperatureThresholds_t type,
                                                      unsigned int *temp)
{
    static const unsigned values[] = {92, 89, 95, 87};
    if (type < 0 || type > NVML_TEMPERATURE_THRESHOLD_GPU_MAX)
        return check(d) == NVML_SUCCESS ? NVML_ERROR_NOT_SUPPORTED : check(d);
    return figure(d, temp, values[type]);
}

EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t d, unsigned int *speed)
{
    nvmlReturn_t rc = check(d);
    if (rc == NVML_SUCCESS && !speed)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    return rc == NVML_SUCCESS ? NVML_ERROR_NOT_SUPPORTED : rc; /* an SXM board has no fan */
}

static const unsigned max_clock[] = {1980, 1980, 2619, 1755};

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned int *clock)
{
    if (type < 0 || type > NVML_CLOCK_VIDEO)
        return NVML_ERROR_INVALID_ARGUMENT;
    return figure(d, clock, max_clock[type]);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned int *clock)
{
    return nvmlDeviceGetClockInfo(d, type, clock);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d,
                                                              unsigned long long *reasons)
{
    return figure64(d, reasons, 0x1); /* idle */
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t d,
                                                                unsigned long long *reasons)
{
    return figure64(d, reasons, 0x1ff);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
    return figure(d, mw, 70000);
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw)
{
    return figure(d, mw, 700000);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t d, unsigned int *mw)
{
    return figure(d, mw, 700000);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t d, nvmlComputeMode_t *mode)
{
    return figure(d, (unsigned *)mode, 0); /* default: shared */
}

EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t d, nvmlPstates_t *state)
{
    return figure(d, (unsigned *)state, 0); /* P0 */
}

EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, nvmlEnableState_t *mode)
{
    return figure(d, (unsigned *)mode, 1);
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor)
{
    nvmlReturn_t rc = check(d);
    if (rc == NVML_SUCCESS && (!major || !minor))
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        *major = 9, *minor = 0;
    return rc;
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
    default: return "Unknown Error";
    }
}
