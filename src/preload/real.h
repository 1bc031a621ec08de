/* real: the real driver's and NVML's entry points, the bottom of the
 * interposer.
 *
 * Every part of libvram-preload.so calls the driver through `real`: the
 * functions it governs (filled by name from libcuda.so.1 and, once the
 * program has loaded it, libnvidia-ml.so.1) and those it only calls. Nothing
 * here calls any other part of the interposer. The parts above it, from
 * the bottom: NVML's readings for vram's own measures (nvml_reader.h), what
 * the driver holds beyond the charges (driver_memory.h), the budget
 * (budget.h), what a governed call shares (interposer.h), the families of
 * governed calls (memory.c, pools.c, vmm.c, graphs.c, contexts.c,
 * modules.c, nvml.c) and, on top, the resolution that hands their hooks to
 * the program (resolve.c). Each part calls only parts below it
 * (tests/test_preload_layers.sh checks it).
 */
#ifndef VRAM_PRELOAD_REAL_H
#define VRAM_PRELOAD_REAL_H

#include "../cuda/cuda_abi.h"
#include "../cuda/nvml_abi.h"

#include <stdint.h>

/* Every entry point of the driver the interposer reaches, as X(type, name):
 * those it governs and those it calls. */
#define REAL_CUDA(X)                                                                              \
    X(PFN_cuCtxGetDevice, cuCtxGetDevice)                                                         \
    X(PFN_cuDeviceTotalMem_v2, cuDeviceTotalMem_v2)                                               \
    X(PFN_cuGetProcAddress, cuGetProcAddress)                                                     \
    X(PFN_cuGetProcAddress_v2, cuGetProcAddress_v2)                                               \
    X(PFN_cuMemAlloc_v2, cuMemAlloc_v2)                                                           \
    X(PFN_cuMemAlloc, cuMemAlloc)                                                                 \
    X(PFN_cuMemAllocPitch_v2, cuMemAllocPitch_v2)                                                 \
    X(PFN_cuMemAllocPitch, cuMemAllocPitch)                                                       \
    X(PFN_cuMemAllocManaged, cuMemAllocManaged)                                                   \
    X(PFN_cuMemFree_v2, cuMemFree_v2)                                                             \
    X(PFN_cuMemFree, cuMemFree)                                                                   \
    X(PFN_cuMemGetInfo_v2, cuMemGetInfo_v2)                                                       \
    X(PFN_cuMemGetInfo, cuMemGetInfo)                                                             \
    X(PFN_cuDeviceTotalMem, cuDeviceTotalMem)                                                     \
    X(PFN_cuMemAllocAsync, cuMemAllocAsync)                                                       \
    X(PFN_cuMemAllocAsync, cuMemAllocAsync_ptsz)                                                  \
    X(PFN_cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync)                                       \
    X(PFN_cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz)                                  \
    X(PFN_cuMemFreeAsync, cuMemFreeAsync)                                                         \
    X(PFN_cuMemFreeAsync, cuMemFreeAsync_ptsz)                                                    \
    X(PFN_cuMemPoolTrimTo, cuMemPoolTrimTo)                                                       \
    X(PFN_cuMemPoolDestroy, cuMemPoolDestroy)                                                     \
    X(PFN_cuMemPoolSetAttribute, cuMemPoolSetAttribute)                                           \
    X(PFN_cuMemCreate, cuMemCreate)                                                               \
    X(PFN_cuMemRelease, cuMemRelease)                                                             \
    X(PFN_cuMemMap, cuMemMap)                                                                     \
    X(PFN_cuMemUnmap, cuMemUnmap)                                                                 \
    X(PFN_cuArrayCreate_v2, cuArrayCreate_v2)                                                     \
    X(PFN_cuArray3DCreate_v2, cuArray3DCreate_v2)                                                 \
    X(PFN_cuArrayDestroy, cuArrayDestroy)                                                         \
    X(PFN_cuMipmappedArrayCreate, cuMipmappedArrayCreate)                                         \
    X(PFN_cuMipmappedArrayDestroy, cuMipmappedArrayDestroy)                                       \
    X(PFN_cuCtxCreate, cuCtxCreate)                                                               \
    X(PFN_cuCtxCreate_v2, cuCtxCreate_v2)                                                         \
    X(PFN_cuCtxCreate_v3, cuCtxCreate_v3)                                                         \
    X(PFN_cuCtxCreate_v4, cuCtxCreate_v4)                                                         \
    X(PFN_cuCtxDestroy, cuCtxDestroy)                                                             \
    X(PFN_cuCtxDestroy_v2, cuCtxDestroy_v2)                                                       \
    X(PFN_cuCtxAttach, cuCtxAttach)                                                               \
    X(PFN_cuCtxDetach, cuCtxDetach)                                                               \
    X(PFN_cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)                                     \
    X(PFN_cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease)                                   \
    X(PFN_cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease_v2)                             \
    X(PFN_cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset)                                       \
    X(PFN_cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset_v2)                                 \
    X(PFN_cuModuleLoad, cuModuleLoad)                                                             \
    X(PFN_cuModuleLoadData, cuModuleLoadData)                                                     \
    X(PFN_cuModuleLoadDataEx, cuModuleLoadDataEx)                                                 \
    X(PFN_cuModuleLoadFatBinary, cuModuleLoadFatBinary)                                           \
    X(PFN_cuModuleUnload, cuModuleUnload)                                                         \
    X(PFN_cuLibraryLoadData, cuLibraryLoadData)                                                   \
    X(PFN_cuLibraryLoadFromFile, cuLibraryLoadFromFile)                                           \
    X(PFN_cuLibraryUnload, cuLibraryUnload)                                                       \
    X(PFN_cuGraphAddMemAllocNode, cuGraphAddMemAllocNode)                                         \
    X(PFN_cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags)                               \
    X(PFN_cuGraphLaunch, cuGraphLaunch)                                                           \
    X(PFN_cuGraphLaunch, cuGraphLaunch_ptsz)                                                      \
    X(PFN_cuGraphUpload, cuGraphUpload)                                                           \
    X(PFN_cuGraphUpload, cuGraphUpload_ptsz)                                                      \
    X(PFN_cuDeviceGraphMemTrim, cuDeviceGraphMemTrim)                                             \
    /* Called, not governed. */                                                                   \
    X(PFN_cuCtxGetCurrent, cuCtxGetCurrent)                                                       \
    X(PFN_cuCtxPushCurrent_v2, cuCtxPushCurrent_v2)                                               \
    X(PFN_cuCtxPopCurrent_v2, cuCtxPopCurrent_v2)                                                 \
    X(PFN_cuDeviceGetName, cuDeviceGetName)                                                       \
    X(PFN_cuDeviceGetMemPool, cuDeviceGetMemPool)                                                 \
    X(PFN_cuMemPoolGetAttribute, cuMemPoolGetAttribute)                                           \
    X(PFN_cuStreamSynchronize, cuStreamSynchronize)                                               \
    X(PFN_cuStreamIsCapturing, cuStreamIsCapturing)                                               \
    X(PFN_cuArrayGetMemoryRequirements, cuArrayGetMemoryRequirements)                             \
    X(PFN_cuMipmappedArrayGetMemoryRequirements, cuMipmappedArrayGetMemoryRequirements)           \
    X(PFN_cuDeviceGetGraphMemAttribute, cuDeviceGetGraphMemAttribute)                             \
    X(PFN_cuInit, cuInit)                                                                         \
    X(PFN_cuDeviceGetCount, cuDeviceGetCount)                                                     \
    X(PFN_cuDeviceGetUuid, cuDeviceGetUuid)

/* ... and of NVML, found once the program has loaded it (need_nvml). */
#define REAL_NVML(X)                                                                              \
    X(PFN_nvmlDeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo)                                       \
    X(PFN_nvmlDeviceGetMemoryInfo_v2, nvmlDeviceGetMemoryInfo_v2)                                 \
    X(PFN_nvmlDeviceGetComputeRunningProcesses, nvmlDeviceGetComputeRunningProcesses)             \
    X(PFN_nvmlDeviceGetComputeRunningProcesses_v2, nvmlDeviceGetComputeRunningProcesses_v2)       \
    X(PFN_nvmlDeviceGetComputeRunningProcesses_v3, nvmlDeviceGetComputeRunningProcesses_v3)       \
    X(PFN_nvmlDeviceGetProcessUtilization, nvmlDeviceGetProcessUtilization)                       \
    X(PFN_nvmlDeviceGetProcessesUtilizationInfo, nvmlDeviceGetProcessesUtilizationInfo)           \
    X(PFN_nvmlDeviceGetAccountingPids, nvmlDeviceGetAccountingPids)                               \
    X(PFN_nvmlDeviceGetAccountingStats, nvmlDeviceGetAccountingStats)                             \
    X(PFN_nvmlDeviceGetUUID, nvmlDeviceGetUUID)

struct real_driver {
#define REAL_FIELD(type, name) type name;
    REAL_CUDA(REAL_FIELD)
    REAL_NVML(REAL_FIELD)
#undef REAL_FIELD
};
extern struct real_driver real;

/* Resolves the driver's functions (once); NVML's once the program loaded it
 * (until then each call tries again: the interposer never loads NVML on a
 * program's behalf). */
void need_real(void);
void need_nvml(void);

/* The real dlsym, which the interposer's own dlsym hands every name it does
 * not govern; and a symbol of a library the interposer opened itself,
 * through it (ours would swap in hooks). */
typedef void *(*real_dlsym_fn)(void *, const char *);
real_dlsym_fn real_dlsym(void);
void *real_symbol(void *lib, const char *name);

/* A device's memory as the driver gives it (0 when it cannot say), and its
 * UUID in text ("GPU-...": 0, or -1). */
uint64_t real_device_total(int dev);
int real_device_uuid(int dev, char *out);

#endif
