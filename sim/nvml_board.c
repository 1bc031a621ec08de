/* nvml_board: the simulated H100 SXM5's figures beyond memory, processes,
 * clocks and power, for monitors (nvtop, nvitop, gpustat), hwloc and NVML
 * bindings: identity (serial, VBIOS, board, InfoROM), PCIe (Gen5 x16),
 * temperature, utilisation (the device's and each process's), per-process
 * accounting (off unless VRAM_SIM_ACCOUNTING turns it on), ECC
 * (enabled, no errors, no rows remapped), the video engines (idle),
 * display (none), MIG (off). NVLink is NOT_SUPPORTED (nvml_stubs.c), as
 * the measured H100, a single GPU, answered on driver 580: hwloc's plugin
 * then lists no link, and Slurm's gpu/nvml plugin none.
 *
 * No kernel runs on the simulated GPU, so load is read from what it can
 * see cheaply: the share of the device's memory that processes hold
 * (nvml_sim_load). Utilisation, per-process utilisation and temperature
 * follow it (idle: 0 %, 30 C), as power does (nvml_clocks.c). What an SXM
 * board lacks (fans) answers NVML_ERROR_NOT_SUPPORTED, as on the real
 * one. */
#define _GNU_SOURCE /* clock_gettime */
#include "nvml_sim.h"
#include "../src/cuda/nvml_later.h"
#include "config.h"
#include "occupancy.h"

#include <stdio.h>
#include <time.h>

/* ------------------------------------------------------------- identity */

EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t d, char *serial, unsigned int length)
{
    char text[32];
    nvmlReturn_t rc = nvml_sim_check(d);
    snprintf(text, sizeof text, "165492300%04d", d && rc == NVML_SUCCESS ? d->index + 1 : 0);
    return rc != NVML_SUCCESS ? rc : nvml_sim_text(serial, length, text);
}

EXPORT nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t d, char *version, unsigned int length)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    return rc != NVML_SUCCESS ? rc : nvml_sim_text(version, length, "96.00.99.00.01");
}

EXPORT nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t d, char *part, unsigned int length)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    return rc != NVML_SUCCESS ? rc : nvml_sim_text(part, length, "692-2G520-0200-000");
}

EXPORT nvmlReturn_t nvmlDeviceGetInforomImageVersion(nvmlDevice_t d, char *version,
                                                     unsigned int length)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    return rc != NVML_SUCCESS ? rc : nvml_sim_text(version, length, "G520.0200.00.05");
}

EXPORT nvmlReturn_t nvmlDeviceGetInforomVersion(nvmlDevice_t d, nvmlInforomObject_t object,
                                                char *version, unsigned int length)
{
    static const char *const objects[] = {"1.1", "7.0", "2.0"}; /* OEM, ECC, power */
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && (object < 0 || object > 2))
        rc = NVML_ERROR_INVALID_ARGUMENT;
    return rc != NVML_SUCCESS ? rc : nvml_sim_text(version, length, objects[object]);
}

/* One board per GPU: the id is unique to it. */
EXPORT nvmlReturn_t nvmlDeviceGetBoardId(nvmlDevice_t d, unsigned int *id)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    return rc != NVML_SUCCESS ? rc : nvml_sim_figure(d, id, (unsigned)d->bus << 8);
}

EXPORT nvmlReturn_t nvmlDeviceGetMultiGpuBoard(nvmlDevice_t d, unsigned int *multi)
{
    return nvml_sim_figure(d, multi, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t d, nvmlBrandType_t *brand)
{
    return nvml_sim_figure(d, (unsigned *)brand, 14); /* NVML_BRAND_NVIDIA */
}

EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t d, nvmlDeviceArchitecture_t *arch)
{
    return nvml_sim_figure(d, arch, 9); /* NVML_DEVICE_ARCH_HOPPER */
}

EXPORT nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t d, unsigned int *cores)
{
    return nvml_sim_figure(d, cores, SIM_SM_COUNT * 128);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryBusWidth(nvmlDevice_t d, unsigned int *bits)
{
    return nvml_sim_figure(d, bits, 5120);
}

EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t d, nvmlBAR1Memory_t *bar1)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && !bar1)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS) /* an H100's BAR1 aperture; nothing mapped through it */
        *bar1 = (nvmlBAR1Memory_t){131072ull << 20, 131072ull << 20, 0};
    return rc;
}

/* ----------------------------------------------------------------- PCIe */

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *gen)
{
    return nvml_sim_figure(d, gen, 5);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *gen)
{
    return nvml_sim_figure(d, gen, 5);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *gen)
{
    return nvml_sim_figure(d, gen, 5);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *width)
{
    return nvml_sim_figure(d, width, 16);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int *width)
{
    return nvml_sim_figure(d, width, 16);
}

/* MB/s per lane (NVML_PCIE_LINK_MAX_SPEED_32000MBPS's value): Gen5. */
EXPORT nvmlReturn_t nvmlDeviceGetPcieLinkMaxSpeed(nvmlDevice_t d, unsigned int *speed)
{
    return nvml_sim_figure(d, speed, 32000);
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieSpeed(nvmlDevice_t d, unsigned int *speed)
{
    return nvml_sim_figure(d, speed, 32000);
}

/* KB/s over the last 20 ms: copies are memcpy in the simulator, unseen here. */
EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, nvmlPcieUtilCounter_t counter,
                                                unsigned int *value)
{
    if (counter < 0 || counter > 1) /* TX_BYTES, RX_BYTES */
        return nvml_sim_check(d) == NVML_SUCCESS ? NVML_ERROR_INVALID_ARGUMENT : nvml_sim_check(d);
    return nvml_sim_figure(d, value, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t d, unsigned int *value)
{
    return nvml_sim_figure(d, value, 0);
}

/* ---------------------------------------------------- thermal and fans */

static unsigned temperature(nvmlDevice_t d) { return 30 + 45 * nvml_sim_load(d) / 100; }

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, nvmlTemperatureSensors_t sensor,
                                             unsigned int *temp)
{
    if (sensor != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    return nvml_sim_measured(d, temp, temperature);
}

/* The versioned form: the sensor in the struct, the reading back in it. */
EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t d, nvmlTemperature_t *t)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && !t)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS && t->version != nvmlTemperature_v1)
        rc = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (rc == NVML_SUCCESS && t->sensorType != NVML_TEMPERATURE_GPU)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        t->temperature = (int)temperature(d);
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t d, nvmlTemperatureThresholds_t type,
                                                      unsigned int *temp)
{
    static const unsigned values[] = {92, 89, 95, 87};
    if (type < 0 || type > NVML_TEMPERATURE_THRESHOLD_GPU_MAX)
        return nvml_sim_check(d) == NVML_SUCCESS ? NVML_ERROR_NOT_SUPPORTED : nvml_sim_check(d);
    return nvml_sim_figure(d, temp, values[type]);
}

/* An SXM board is cooled by the chassis: it has no fan. */
EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t d, unsigned int *speed)
{
    return nvml_sim_not_supported(d, speed);
}

EXPORT nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t d, unsigned int *fans)
{
    return nvml_sim_not_supported(d, fans);
}

/* ---------------------------------------------------------- utilisation */

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && !u)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS) {
        unsigned l = nvml_sim_load(d);
        *u = (nvmlUtilization_t){l, l};
    }
    return rc;
}

/* The video engines, JPEG and optical flow: idle (nothing runs on them),
 * over NVML's usual sampling period. */
static nvmlReturn_t engine_idle(nvmlDevice_t d, unsigned int *util, unsigned int *period_us)
{
    nvmlReturn_t rc = nvml_sim_figure(d, util, 0);
    return rc != NVML_SUCCESS ? rc : nvml_sim_figure(d, period_us, 167000);
}

EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t d, unsigned int *u, unsigned int *p)
{
    return engine_idle(d, u, p);
}

EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t d, unsigned int *u, unsigned int *p)
{
    return engine_idle(d, u, p);
}

EXPORT nvmlReturn_t nvmlDeviceGetJpgUtilization(nvmlDevice_t d, unsigned int *u, unsigned int *p)
{
    return engine_idle(d, u, p);
}

EXPORT nvmlReturn_t nvmlDeviceGetOfaUtilization(nvmlDevice_t d, unsigned int *u, unsigned int *p)
{
    return engine_idle(d, u, p);
}

EXPORT nvmlReturn_t nvmlDeviceGetEncoderStats(nvmlDevice_t d, unsigned int *sessions,
                                              unsigned int *fps, unsigned int *latency_us)
{
    nvmlReturn_t rc = nvml_sim_figure(d, sessions, 0);
    if (rc == NVML_SUCCESS)
        rc = nvml_sim_figure(d, fps, 0);
    return rc != NVML_SUCCESS ? rc : nvml_sim_figure(d, latency_us, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetEncoderSessions(nvmlDevice_t d, unsigned int *count,
                                                 nvmlEncoderSessionInfo_t *infos)
{
    (void)infos;
    return nvml_sim_figure(d, count, 0);
}

/* A process's share of the device's load, in percent: of its memory. */
static unsigned share(nvmlDevice_t d, uint64_t bytes)
{
    uint64_t room = d->total - d->reserved;
    return room ? (unsigned)((bytes * 100 + room / 2) / room) : 0;
}

/* Each process's share of the device's load, by the memory it holds, as a
 * sample taken now: into out[] (*count entries; `buffer`, whether the
 * caller gave any), NVML's way for lists (nvml_sim_processes);
 * NVML_ERROR_NOT_FOUND when there is no sample newer than last_seen. */
struct sample {
    unsigned pid;
    unsigned long long at_us;
    unsigned share;
};
static nvmlReturn_t sample(nvmlDevice_t d, unsigned int *count, bool buffer,
                           unsigned long long last_seen, struct sample *out, int *n)
{
    struct occ_process p[NVML_SIM_MAX_PROCESSES];
    nvmlReturn_t rc = nvml_sim_processes(d, count, buffer, p, n);
    if (rc != NVML_SUCCESS)
        return rc;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long now = (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000;
    if (*n == 0 || now <= last_seen) {
        *count = 0;
        return NVML_ERROR_NOT_FOUND;
    }
    for (int i = 0; i < *n; i++)
        out[i] = (struct sample){(unsigned)p[i].pid, now, share(d, p[i].bytes)};
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d,
                                                    nvmlProcessUtilizationSample_t *samples,
                                                    unsigned int *count, unsigned long long last_seen)
{
    struct sample s[NVML_SIM_MAX_PROCESSES];
    int n;
    nvmlReturn_t rc = sample(d, count, samples != NULL, last_seen, s, &n);
    for (int i = 0; rc == NVML_SUCCESS && i < n; i++)
        samples[i] = (nvmlProcessUtilizationSample_t){s[i].pid, s[i].at_us, s[i].share, s[i].share, 0, 0};
    return rc;
}

/* The same in the versioned form (the JPEG and optical-flow engines idle). */
EXPORT nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t d,
                                                          nvmlProcessesUtilizationInfo_t *info)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && !info)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS && info->version != nvmlProcessesUtilizationInfo_v1)
        rc = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (rc != NVML_SUCCESS)
        return rc;
    struct sample s[NVML_SIM_MAX_PROCESSES];
    int n;
    rc = sample(d, &info->processSamplesCount, info->procUtilArray != NULL, info->lastSeenTimeStamp,
                s, &n);
    for (int i = 0; rc == NVML_SUCCESS && i < n; i++)
        info->procUtilArray[i] = (nvmlProcessUtilizationInfo_v1_t){
            .timeStamp = s[i].at_us, .pid = s[i].pid, .smUtil = s[i].share, .memUtil = s[i].share};
    return rc;
}

/* ----------------------------------------------------------- accounting */

/* Off unless VRAM_SIM_ACCOUNTING says the administrator turned it on
 * (nvidia-smi -am 1; setting it through NVML is not modelled). On, it
 * keeps the processes that hold memory on the device now, each with its
 * share of the load and what it holds as its most (a real driver keeps
 * terminated processes too, in a buffer of 4,000, and their peaks). */
EXPORT nvmlReturn_t nvmlDeviceGetAccountingMode(nvmlDevice_t d, nvmlEnableState_t *mode)
{
    return nvml_sim_figure(d, (unsigned *)mode, nvml_sim_accounting() ? ENABLED : DISABLED);
}

EXPORT nvmlReturn_t nvmlDeviceGetAccountingBufferSize(nvmlDevice_t d, unsigned int *size)
{
    return nvml_sim_figure(d, size, 4000);
}

EXPORT nvmlReturn_t nvmlDeviceGetAccountingPids(nvmlDevice_t d, unsigned int *count,
                                                unsigned int *pids)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && !nvml_sim_accounting())
        rc = count ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
    struct occ_process p[NVML_SIM_MAX_PROCESSES];
    int n;
    if (rc == NVML_SUCCESS)
        rc = nvml_sim_processes(d, count, pids != NULL, p, &n);
    for (int i = 0; rc == NVML_SUCCESS && i < n; i++)
        pids[i] = (unsigned)p[i].pid;
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetAccountingStats(nvmlDevice_t d, unsigned int pid,
                                                 nvmlAccountingStats_t *stats)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && !stats)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS && !nvml_sim_accounting())
        rc = NVML_ERROR_NOT_SUPPORTED;
    if (rc != NVML_SUCCESS)
        return rc;
    struct occ_process p[NVML_SIM_MAX_PROCESSES];
    int n = occ_processes(d->index, p, NVML_SIM_MAX_PROCESSES);
    for (int i = 0; i < n; i++)
        if ((unsigned)p[i].pid == pid) {
            unsigned load = share(d, p[i].bytes);
            *stats = (nvmlAccountingStats_t){.gpuUtilization = load, .memoryUtilization = load,
                                             .maxMemoryUsage = p[i].bytes, .isRunning = 1};
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

/* ------------------------------------------------------------------ ECC */

EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, nvmlEnableState_t *current,
                                         nvmlEnableState_t *pending)
{
    nvmlReturn_t rc = nvml_sim_figure(d, (unsigned *)current, ENABLED);
    return rc != NVML_SUCCESS ? rc : nvml_sim_figure(d, (unsigned *)pending, ENABLED);
}

EXPORT nvmlReturn_t nvmlDeviceGetDefaultEccMode(nvmlDevice_t d, nvmlEnableState_t *mode)
{
    return nvml_sim_figure(d, (unsigned *)mode, ENABLED);
}

/* Corrected or not, volatile or aggregate: none. */
EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, nvmlMemoryErrorType_t type,
                                                nvmlEccCounterType_t counter, unsigned long long *count)
{
    if (type < 0 || type > 1 || counter < 0 || counter > 1)
        return nvml_sim_check(d) == NVML_SUCCESS ? NVML_ERROR_INVALID_ARGUMENT : nvml_sim_check(d);
    return nvml_sim_figure64(d, count, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t d, nvmlMemoryErrorType_t type,
                                                    nvmlEccCounterType_t counter,
                                                    nvmlMemoryLocation_t location,
                                                    unsigned long long *count)
{
    if (location < 0)
        return nvml_sim_check(d) == NVML_SUCCESS ? NVML_ERROR_INVALID_ARGUMENT : nvml_sim_check(d);
    return nvmlDeviceGetTotalEccErrors(d, type, counter, count);
}

/* Hopper remaps rows rather than retiring pages: none remapped. */
EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int *corrected,
                                              unsigned int *uncorrected, unsigned int *pending,
                                              unsigned int *failed)
{
    nvmlReturn_t rc = nvml_sim_figure(d, corrected, 0);
    if (rc == NVML_SUCCESS)
        rc = nvml_sim_figure(d, uncorrected, 0);
    if (rc == NVML_SUCCESS)
        rc = nvml_sim_figure(d, pending, 0);
    return rc != NVML_SUCCESS ? rc : nvml_sim_figure(d, failed, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows_v2(nvmlDevice_t d, nvmlRemappedRowsInfo_v2_t *info)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && !info)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        *info = (nvmlRemappedRowsInfo_v2_t){0};
    return rc;
}

/* Hopper reports memory it could not repair: none. */
EXPORT nvmlReturn_t nvmlDeviceGetUnrepairableMemoryFlag_v1(nvmlDevice_t d,
                                                           nvmlUnrepairableMemoryStatus_v1_t *status)
{
    return nvml_sim_figure(d, status ? &status->bUnrepairableMemory : NULL, 0);
}

/* NVLink ports' counters are Blackwell's, and this GPU lists no link. */
EXPORT nvmlReturn_t nvmlDeviceReadPRMCounters_v1(nvmlDevice_t d, nvmlPRMCounterList_v1_t *list)
{
    return nvml_sim_not_supported(d, list);
}

/* ----------------------------------------- display, MIG, virtualisation */

EXPORT nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t d, nvmlEnableState_t *mode)
{
    return nvml_sim_figure(d, (unsigned *)mode, DISABLED);
}

EXPORT nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t d, nvmlEnableState_t *active)
{
    return nvml_sim_figure(d, (unsigned *)active, DISABLED);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending)
{
    nvmlReturn_t rc = nvml_sim_figure(d, current, DISABLED);
    return rc != NVML_SUCCESS ? rc : nvml_sim_figure(d, pending, DISABLED);
}

/* Every handle is a whole GPU's: with MIG off there is no other kind. */
EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t d, unsigned int *is_mig)
{
    return nvml_sim_figure(d, is_mig, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetVirtualizationMode(nvmlDevice_t d, nvmlGpuVirtualizationMode_t *mode)
{
    return nvml_sim_figure(d, (unsigned *)mode, 0); /* NVML_GPU_VIRTUALIZATION_MODE_NONE */
}
