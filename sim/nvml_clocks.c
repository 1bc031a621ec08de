/* nvml_clocks: the simulated H100 SXM5's clocks and power: the clocks
 * NVML reports (each at its maximum, as on a device in persistence mode at
 * P0), the lists of supported clocks and the application clocks Slurm's
 * gpu/nvml plugin reads (config.h), the reasons clocks would be held back
 * (idle, when no process holds memory), power and its 700 W limit
 * (following the device's load: 70 W idle), energy, performance state,
 * persistence and compute modes, compute capability. */
#define _GNU_SOURCE /* clock_gettime */
#include "nvml_sim.h"
#include "config.h"

#include <pthread.h>
#include <time.h>

#define IDLE_MW 70000u
#define LIMIT_MW 700000u
#define MIN_LIMIT_MW 200000u

static unsigned power_mw(nvmlDevice_t d)
{
    return IDLE_MW + (LIMIT_MW - IDLE_MW) / 100 * nvml_sim_load(d);
}

/* --------------------------------------------------------------- clocks */

static const unsigned max_clock[] = {SIM_CLOCK_GRAPHICS_MAX, SIM_CLOCK_GRAPHICS_MAX, SIM_CLOCK_MEM,
                                     SIM_CLOCK_VIDEO_MAX}; /* graphics, SM, memory, video */

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
    nvmlReturn_t rc = nvml_sim_check(d);
    return rc != NVML_SUCCESS ? rc : nvml_sim_figure64(d, reasons, nvml_sim_load(d) ? 0 : 0x1); /* GPU idle */
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

/* A list into the caller's array of *count entries, NVML's way: with
 * NVML_ERROR_INSUFFICIENT_SIZE, and *count the entries needed, when they
 * do not fit. */
static nvmlReturn_t clock_list(unsigned int *count, unsigned int *mhz, const unsigned *list,
                               unsigned n)
{
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned room = *count;
    *count = n;
    if (room < n || !mhz)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    for (unsigned i = 0; i < n; i++)
        mhz[i] = list[i];
    return NVML_SUCCESS;
}

/* HBM3 runs at one clock. */
EXPORT nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t d, unsigned int *count,
                                                       unsigned int *mhz)
{
    static const unsigned mem[] = {SIM_CLOCK_MEM};
    nvmlReturn_t rc = nvml_sim_check(d);
    return rc != NVML_SUCCESS ? rc : clock_list(count, mhz, mem, 1);
}

/* At that memory clock, the graphics clocks from the highest down. */
#define GRAPHICS_CLOCKS                                                                           \
    ((SIM_CLOCK_GRAPHICS_MAX - SIM_CLOCK_GRAPHICS_MIN) / SIM_CLOCK_GRAPHICS_STEP + 1)
EXPORT nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t d, unsigned int mem_mhz,
                                                         unsigned int *count, unsigned int *mhz)
{
    unsigned list[GRAPHICS_CLOCKS];
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (mem_mhz != SIM_CLOCK_MEM)
        return count ? NVML_ERROR_NOT_FOUND : NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < GRAPHICS_CLOCKS; i++)
        list[i] = SIM_CLOCK_GRAPHICS_MAX - i * SIM_CLOCK_GRAPHICS_STEP;
    return clock_list(count, mhz, list, GRAPHICS_CLOCKS);
}

/* The application clocks (what a kernel is launched at), set by root with
 * nvmlDeviceSetApplicationsClocks (not modelled: NOT_SUPPORTED): the
 * highest pair, their default. nvidia-smi shows them for graphics and
 * memory only. */
EXPORT nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t d, nvmlClockType_t type,
                                                   unsigned int *clock)
{
    if (type == NVML_CLOCK_VIDEO)
        return nvml_sim_not_supported(d, clock);
    return nvmlDeviceGetClockInfo(d, type, clock);
}

EXPORT nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t d, nvmlClockType_t type,
                                                          unsigned int *clock)
{
    return nvmlDeviceGetApplicationsClock(d, type, clock);
}

/* ---------------------------------------------------------------- power */

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
    return nvml_sim_measured(d, mw, power_mw);
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
