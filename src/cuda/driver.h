/* driver: the CUDA driver, loaded at run time.
 *
 * The one place that knows how to find libcuda.so.1 and its entry points.
 * Whether the library is NVIDIA's or vram's simulated driver makes no
 * difference here or above: both are a libcuda.so.1 with the same ABI
 * (cuda_abi.h). Entry points are resolved as the CUDA runtime does, through
 * cuGetProcAddress when the driver has it, so the simulator is exercised
 * along the same path a real program takes.
 */
#ifndef VRAM_DRIVER_H
#define VRAM_DRIVER_H

#include "cuda_abi.h"

struct cuda_driver {
    void *lib;
    PFN_cuInit cuInit;
    PFN_cuDriverGetVersion cuDriverGetVersion;
    PFN_cuGetErrorName cuGetErrorName;
    PFN_cuDeviceGetCount cuDeviceGetCount;
    PFN_cuDeviceGet cuDeviceGet;
    PFN_cuDeviceGetName cuDeviceGetName;
    PFN_cuDeviceGetUuid cuDeviceGetUuid;
    PFN_cuDeviceTotalMem_v2 cuDeviceTotalMem;
    PFN_cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRetain;
    PFN_cuDevicePrimaryCtxRelease_v2 cuDevicePrimaryCtxRelease;
    PFN_cuCtxPushCurrent_v2 cuCtxPushCurrent;
    PFN_cuCtxPopCurrent_v2 cuCtxPopCurrent;
    PFN_cuMemAlloc_v2 cuMemAlloc;
    PFN_cuMemFree_v2 cuMemFree;
    PFN_cuMemGetInfo_v2 cuMemGetInfo;
    PFN_cuEventCreate cuEventCreate;
    PFN_cuEventDestroy_v2 cuEventDestroy;
    PFN_cuEventRecord cuEventRecord;
    PFN_cuEventQuery cuEventQuery;
    PFN_cuEventSynchronize cuEventSynchronize;
};

/* Loads the driver named by VRAM_CUDA_LIBRARY (default libcuda.so.1) and
 * calls cuInit. 0 on success; otherwise -1 with a message in `err`. */
int driver_load(struct cuda_driver *cu, char *err, size_t errlen);
/* What to say where the driver (or NVML) cannot be loaded: on a machine
 * without a GPU, vram's simulated one can stand in. Names the folder that
 * holds it where this build has one beside the code running (a build
 * tree); else says how to get one. */
void driver_simulated_hint(char *out, size_t n);
void driver_unload(struct cuda_driver *cu);

/* "CUDA_ERROR_OUT_OF_MEMORY (2)". */
const char *driver_error_text(const struct cuda_driver *cu, CUresult rc, char buf[64]);

#endif
