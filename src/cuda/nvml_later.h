/* Three functions NVIDIA's libnvidia-ml of driver 580.159.04 exports (read
 * on the H200 with nm -D: 404 names) that driver 580's nvml.h (NVML API 13,
 * the header nvml_api.h is generated from) does not declare. Later headers
 * do, with these prototypes and layouts (nvmlDeviceGetRemappedRows_v2
 * CUDA 13.2's, the others 13.1's): a tool built against one looks them up
 * on a 580 driver and finds them, so the simulated NVML exports them too
 * (sim/nvml_board.c). The library's fourth name beyond the header,
 * nvmlInternalGetExportTable, is NVIDIA's private table, which nothing
 * public calls. */
#ifndef VRAM_NVML_LATER_H
#define VRAM_NVML_LATER_H

#include "nvml_abi.h"

/* Row remapping's counts (Ampere and later); no version field. */
typedef struct nvmlRemappedRowsInfo_v2_t {
    unsigned int corrActiveRemaps;
    unsigned int corrInactiveRemaps;
    unsigned int uncActiveRemaps;
    unsigned int uncInactiveRemaps;
    unsigned int bPending;
    unsigned int bFailureOccurred;
} nvmlRemappedRowsInfo_v2_t;

/* Whether the device has memory it cannot repair (Hopper and later). */
typedef struct {
    unsigned int bUnrepairableMemory;
} nvmlUnrepairableMemoryStatus_v1_t;

/* NVLink ports' PRM counters (Blackwell and later): only passed on. */
typedef struct nvmlPRMCounterList_v1_st nvmlPRMCounterList_v1_t;

nvmlReturn_t nvmlDeviceGetRemappedRows_v2(nvmlDevice_t device, nvmlRemappedRowsInfo_v2_t *info);
nvmlReturn_t nvmlDeviceGetUnrepairableMemoryFlag_v1(
    nvmlDevice_t device, nvmlUnrepairableMemoryStatus_v1_t *unrepairableMemoryStatus);
nvmlReturn_t nvmlDeviceReadPRMCounters_v1(nvmlDevice_t device, nvmlPRMCounterList_v1_t *counterList);

#endif
