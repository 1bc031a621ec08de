/* What the parts of the simulated NVML share: its devices (nvml_sim.c:
 * initialisation, handles, PCI, memory, processes), the board's other
 * figures (nvml_board.c), clocks and power (nvml_clocks.c), where the
 * devices sit on the host (nvml_topology.c) and R615's per-cgroup memory
 * limits (nvml_limits.c); nvml_stubs.c answers the rest. */
#ifndef VRAM_NVML_SIM_H
#define VRAM_NVML_SIM_H

#include "../src/cuda/nvml_api.h"
#include "occupancy.h"

#include <stdbool.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

struct nvmlDevice_st {
    int index;
    uint64_t total;    /* NVML's: CUDA's and the driver's reserve */
    uint64_t reserved; /* what the driver and firmware set aside */
    char uuid[48];
    int bus;
    int node; /* the host's NUMA node it sits on; -1 without NUMA (config.h) */
};

/* Whether nvmlInit has succeeded more often than nvmlShutdown was called. */
bool nvml_sim_ready(void);
/* The driver series nvmlInit read (config.h: VRAM_SIM_DRIVER). */
int nvml_sim_driver(void);
/* Whether per-process accounting is on (config.h: VRAM_SIM_ACCOUNTING). */
bool nvml_sim_accounting(void);
/* NVML_SUCCESS for a device handle of an initialised library, else the
 * error a real NVML gives. */
nvmlReturn_t nvml_sim_check(nvmlDevice_t d);
/* A figure of a device into *out, after the checks every query makes. */
nvmlReturn_t nvml_sim_figure(nvmlDevice_t d, unsigned int *out, unsigned int value);
nvmlReturn_t nvml_sim_figure64(nvmlDevice_t d, unsigned long long *out, unsigned long long value);
/* f(d) into *out, after the checks (f is called only for a valid d). */
nvmlReturn_t nvml_sim_measured(nvmlDevice_t d, unsigned int *out, unsigned (*f)(nvmlDevice_t));
/* NVML_ERROR_NOT_SUPPORTED for what the board lacks, after the checks. */
nvmlReturn_t nvml_sim_not_supported(nvmlDevice_t d, const void *out);
/* The device's load in percent: the share of its memory processes hold
 * (no kernel runs on it). */
unsigned nvml_sim_load(nvmlDevice_t d);
enum { DISABLED = 0, ENABLED = 1 }; /* nvmlEnableState_t */
/* A string into a caller's buffer of `length` bytes, NVML's way. */
nvmlReturn_t nvml_sim_text(char *out, unsigned int length, const char *value);
/* The bytes processes hold on physical device `dev` (contexts included). */
uint64_t nvml_sim_used(int dev);
/* The processes holding memory on d, into p (*n of them), after the
 * checks; NVML's convention for lists: NVML_ERROR_INSUFFICIENT_SIZE, with
 * *count saying how many there are, when the caller's buffer (`buffer`:
 * whether it gave one) of *count entries cannot hold them. */
#define NVML_SIM_MAX_PROCESSES 256
nvmlReturn_t nvml_sim_processes(nvmlDevice_t d, unsigned int *count, bool buffer,
                                struct occ_process *p, int *n);

#endif
