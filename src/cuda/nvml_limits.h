/* NVML's per-cgroup device-memory limits (driver R615 / CUDA 13.4), which no
 * nvml.h we generate from (NVML API 13, driver 580) declares yet, so they are
 * declared here by hand from NVIDIA's NVML reference
 * (docs.nvidia.com/deploy/nvml-api: nvmlSetMemoryLimits_v1_t,
 * nvmlGetMemoryLimits_v1_t) and "MPS v3 Memory Partitioning".
 *
 * The driver enforces the limit itself: every byte a process of the cgroup
 * holds on the device (contexts, modules, the driver's own memory) counts
 * against hardLimit, and nvmlDeviceGetMemoryInfo_v2 / cuMemGetInfo inside
 * the cgroup show the limit. Linux only, root only for Set, not for MIG
 * handles. On driver 580 (the H100 measured on 2026-11-26) libnvidia-ml
 * exports neither function: look them up with dlsym, and treat
 * NVML_ERROR_NOT_SUPPORTED / NVML_ERROR_FUNCTION_NOT_FOUND as "absent".
 *
 * Not run on an R615 driver yet: the layout and the value of
 * NVML_DEVICE_MEMORY_LIMIT_MAX below follow the reference, which gives the
 * members in this order and no version field; the constant's value is not
 * printed there and is taken to be the largest unsigned long long. */
#ifndef VRAM_NVML_LIMITS_H
#define VRAM_NVML_LIMITS_H

#include "nvml_abi.h"

/* hardLimit meaning "no limit"; with softLimit 0 it clears the limits. */
#define NVML_DEVICE_MEMORY_LIMIT_MAX 0xffffffffffffffffull

typedef struct {
    const char *nameSpace;        /* in: the cgroup's full sysfs path */
    unsigned long long softLimit; /* in: bytes guaranteed before pressure */
    unsigned long long hardLimit; /* in: bytes the cgroup may hold at most */
} nvmlSetMemoryLimits_v1_t;

typedef struct {
    const char *nameSpace;          /* in: the cgroup's full sysfs path */
    unsigned long long softLimit;   /* out */
    unsigned long long hardLimit;   /* out */
    unsigned long long currentUsed; /* out: what the cgroup holds now */
} nvmlGetMemoryLimits_v1_t;

typedef nvmlReturn_t (*PFN_nvmlDeviceSetMemoryLimits_v1)(nvmlDevice_t device,
                                                         nvmlSetMemoryLimits_v1_t *limits);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetMemoryLimits_v1)(nvmlDevice_t device,
                                                         nvmlGetMemoryLimits_v1_t *limits);

#endif
