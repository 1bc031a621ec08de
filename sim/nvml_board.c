/* nvml_board: the simulated H100 SXM5's figures beyond memory and
 * processes, for monitors (nvtop, nvitop, gpustat), hwloc and NVML
 * bindings: identity (serial, VBIOS, board, InfoROM), PCIe (Gen5 x16),
 * clocks, power and its 700 W limit, energy, temperature, utilisation, ECC
 * (enabled, no errors), the video engines (idle), display (none), MIG
 * (off). NVLink is NOT_SUPPORTED (nvml_stubs.c), as the measured H100, a
 * single GPU, answered on driver 580: hwloc's plugin then lists no link.
 *
 * No kernel runs on the simulated GPU, so load is read from what it can
 * see cheaply: the share of the device's memory that processes hold.
 * Utilisation, per-process utilisation, temperature and power follow it
 * (idle: 0 %, 30 C, 70 W); clocks stay at their maxima, as on a device in
 * persistence mode at P0. What an SXM board lacks (fans) answers
 * NVML_ERROR_NOT_SUPPORTED, as on the real one. */
#define _GNU_SOURCE /* clock_gettime */
#include "nvml_sim.h"
#include "config.h"
#include "occupancy.h"

#include <pthread.h>
#include <stdio.h>
#include <time.h>

enum { DISABLED = 0, ENABLED = 1 }; /* nvmlEnableState_t */
#define IDLE_MW 70000u
#define LIMIT_MW 700000u
#define MIN_LIMIT_MW 200000u

/* Percent of the device's memory its processes hold. */
static unsigned load(nvmlDevice_t d)
{
    uint64_t room = d->total - d->reserved, used = nvml_sim_used(d->index);
    if (used >= room || room == 0)
        return 100;
    return (unsigned)((used * 100 + room / 2) / room);
}

static unsigned power_mw(nvmlDevice_t d) { return IDLE_MW + (LIMIT_MW - IDLE_MW) / 100 * load(d); }

/* Fills *out with f(d) after the usual checks. */
static nvmlReturn_t measured(nvmlDevice_t d, unsigned int *out, unsigned (*f)(nvmlDevice_t))
{
    nvmlReturn_t rc = nvml_sim_check(d);
    return rc != NVML_SUCCESS ? rc : nvml_sim_figure(d, out, f(d));
}

static nvmlReturn_t not_supported(nvmlDevice_t d, const void *out)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && !out)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    return rc == NVML_SUCCESS ? NVML_ERROR_NOT_SUPPORTED : rc;
}

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

/* ------------------------------------------------------ clocks and power */

static const unsigned max_clock[] = {1980, 1980, 2619, 1755}; /* graphics, SM, memory, video */

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned int *clock)
{
    if (type < 0 || type > NVML_CLOCK_VIDEO)
        return NVML_ERROR_INVALID_ARGUMENT;
    return nvml_sim_figure(d, clock, max_clock[type]);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned int *clock)
{
    return nvmlDeviceGetClockInfo(d, type, clock);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxCustomerBoostClock(nvmlDevice_t d, nvmlClockType_t type,
                                                       unsigned int *clock)
{
    return nvmlDeviceGetClockInfo(d, type, clock);
}

/* Current, application target, default application target, customer
 * boost maximum: all the maximum on this board. */
EXPORT nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t d, nvmlClockType_t type, nvmlClockId_t id,
                                       unsigned int *clock)
{
    if (id < 0 || id > 3)
        return NVML_ERROR_INVALID_ARGUMENT;
    return nvmlDeviceGetClockInfo(d, type, clock);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *reasons)
{
    return nvml_sim_figure64(d, reasons, load(d) ? 0 : 0x1); /* GPU idle */
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t d,
                                                             unsigned long long *reasons)
{
    return nvml_sim_figure64(d, reasons, 0x1ff);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d,
                                                              unsigned long long *reasons)
{
    return nvmlDeviceGetCurrentClocksEventReasons(d, reasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t d,
                                                                unsigned long long *reasons)
{
    return nvmlDeviceGetSupportedClocksEventReasons(d, reasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
    return measured(d, mw, power_mw);
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw)
{
    return nvml_sim_figure(d, mw, LIMIT_MW);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t d, unsigned int *mw)
{
    return nvml_sim_figure(d, mw, LIMIT_MW);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t d, unsigned int *mw)
{
    return nvml_sim_figure(d, mw, LIMIT_MW);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t d, unsigned int *min,
                                                                 unsigned int *max)
{
    nvmlReturn_t rc = nvml_sim_figure(d, min, MIN_LIMIT_MW);
    return rc != NVML_SUCCESS ? rc : nvml_sim_figure(d, max, LIMIT_MW);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t d, nvmlEnableState_t *mode)
{
    return nvml_sim_figure(d, (unsigned *)mode, ENABLED);
}

/* Millijoules since the library was first asked, at the power each
 * reading saw: it only grows, as the real counter does. */
static pthread_mutex_t energy_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    unsigned long long mj;
    long long at_ns;
} energy[SIM_MAX_DEVICES];

EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc != NVML_SUCCESS || !mj)
        return rc != NVML_SUCCESS ? rc : NVML_ERROR_INVALID_ARGUMENT;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long now = ts.tv_sec * 1000000000ll + ts.tv_nsec;
    unsigned mw = power_mw(d);
    pthread_mutex_lock(&energy_mu);
    if (energy[d->index].at_ns)
        energy[d->index].mj += (unsigned long long)mw * (unsigned long long)(now - energy[d->index].at_ns) /
                               1000000000ull;
    energy[d->index].at_ns = now;
    *mj = energy[d->index].mj;
    pthread_mutex_unlock(&energy_mu);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t d, nvmlComputeMode_t *mode)
{
    return nvml_sim_figure(d, (unsigned *)mode, 0); /* default: shared */
}

EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t d, nvmlPstates_t *state)
{
    return nvml_sim_figure(d, (unsigned *)state, 0); /* P0 */
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerState(nvmlDevice_t d, nvmlPstates_t *state)
{
    return nvmlDeviceGetPerformanceState(d, state);
}

EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, nvmlEnableState_t *mode)
{
    return nvml_sim_figure(d, (unsigned *)mode, ENABLED);
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && (!major || !minor))
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        *major = 9, *minor = 0;
    return rc;
}

/* ---------------------------------------------------- thermal and fans */

static unsigned temperature(nvmlDevice_t d) { return 30 + 45 * load(d) / 100; }

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, nvmlTemperatureSensors_t sensor,
                                             unsigned int *temp)
{
    if (sensor != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    return measured(d, temp, temperature);
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
    return not_supported(d, speed);
}

EXPORT nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t d, unsigned int *fans)
{
    return not_supported(d, fans);
}

/* ---------------------------------------------------------- utilisation */

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && !u)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS) {
        unsigned l = load(d);
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

/* Each process's share of the device's load, by the memory it holds, as a
 * sample taken now. */
EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d,
                                                    nvmlProcessUtilizationSample_t *samples,
                                                    unsigned int *count, unsigned long long last_seen)
{
    struct occ_process p[NVML_SIM_MAX_PROCESSES];
    int n;
    nvmlReturn_t rc = nvml_sim_processes(d, count, samples != NULL, p, &n);
    if (rc != NVML_SUCCESS)
        return rc;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long now = (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000;
    if (n == 0 || now <= last_seen) {
        *count = 0;
        return NVML_ERROR_NOT_FOUND; /* no sample since last_seen */
    }
    uint64_t room = d->total - d->reserved;
    for (int i = 0; i < n; i++) {
        unsigned share = room ? (unsigned)((p[i].bytes * 100 + room / 2) / room) : 0;
        samples[i] = (nvmlProcessUtilizationSample_t){(unsigned)p[i].pid, now, share, share, 0, 0};
    }
    *count = (unsigned)n;
    return NVML_SUCCESS;
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

EXPORT nvmlReturn_t nvmlDeviceGetVirtualizationMode(nvmlDevice_t d, nvmlGpuVirtualizationMode_t *mode)
{
    return nvml_sim_figure(d, (unsigned *)mode, 0); /* NVML_GPU_VIRTUALIZATION_MODE_NONE */
}
