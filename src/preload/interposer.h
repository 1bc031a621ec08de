/* interposer: what the governed calls of libvram-preload.so share
 * (governed.c), and the hooks themselves, with the driver's own names.
 *
 * The parts, from the bottom (real.h says it whole): the real driver
 * (real.c), NVML's readings (nvml_reader.c), the driver's part
 * (driver_memory.c), the budget (budget.c), what every governed call
 * shares (governed.c: the budgets' setup, the device of the current
 * context, frees, refusals) and the measures of contexts and modules
 * (footprint.c); then one file per family of governed entry points
 * (memory.c, pools.c, vmm.c, graphs.c, nvml.c, contexts.c, modules.c); on
 * top, resolve.c, whose table of governed entry points names every hook
 * to hand it out by identity from dlsym and cuGetProcAddress. Each part
 * calls only parts below it. Internal to the library: nothing here is
 * exported except the hooks.
 */
#ifndef VRAM_INTERPOSER_H
#define VRAM_INTERPOSER_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../cuda/cuda_abi.h"
#include "../cuda/granularity.h"
#include "../cuda/nvml_abi.h"
#include "../record/recorder.h"
#include "budget.h"
#include "real.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

/* Budgets are read on the first governed call. */
extern pthread_once_t budget_once;
void setup_budgets(void);

/* The device of the calling thread's current context, if a budget governs
 * it; -1 means "not ours: pass through". */
int governed_device(void);

/* Frees through `driver`; the charge comes back only if the driver agreed.
 * A key the budget does not know is the driver's business alone. */
CUresult governed_free(uint64_t key, CUresult (*driver)(uint64_t));

/* What a charge is, in a recording. */
static inline enum record_family family_of(enum charge_kind kind)
{
    static const unsigned char family[CHARGE_KINDS] = {
        [CHARGE_MEMALLOC] = RECORD_PLAIN, [CHARGE_PITCH] = RECORD_PITCHED,
        [CHARGE_MANAGED] = RECORD_MANAGED, [CHARGE_ASYNC] = RECORD_POOL,
        [CHARGE_VMM] = RECORD_VMM,         [CHARGE_ARRAY] = RECORD_ARRAY,
        [CHARGE_MIPMAP] = RECORD_ARRAY,    [CHARGE_GRAPH] = RECORD_GRAPH,
    };
    return (unsigned)kind < CHARGE_KINDS ? (enum record_family)family[kind] : RECORD_NO_FAMILY;
}

/* A governed request for `bytes` on `dev` refused: said (VRAM_LOG) and
 * recorded with its reason, `why`, or the budget's when 0. */
void governed_refusal(int dev, enum record_family family, uint64_t bytes, uint64_t stream,
                      const char *call, enum record_reason why);
/* Only recorded: for a refusal said in words of its own (a context's). */
void record_governed_refusal(int dev, enum record_family family, uint64_t bytes,
                             uint64_t stream, enum record_reason why);

/* Reserve, call the driver, then commit or roll back: the budget is never
 * exceeded, not even for an instant, by any number of threads. */
#define GOVERNED_ALLOC(call_name, charge_expr, kind, driver_call, key_expr)                   \
    do {                                                                                      \
        int dev_ = governed_device();                                                         \
        if (dev_ < 0)                                                                         \
            return driver_call;                                                               \
        uint64_t charge_ = (charge_expr);                                                     \
        if (budget_reserve(dev_, charge_) != 0) {                                             \
            governed_refusal(dev_, family_of(kind), charge_, 0, call_name, 0);                \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                  \
        }                                                                                     \
        CUresult rc_ = driver_call;                                                           \
        if (rc_ == CUDA_SUCCESS) {                                                            \
            uint64_t key_ = (key_expr);                                                       \
            budget_commit(dev_, key_, charge_, kind);                                         \
            record_alloc(family_of(kind), dev_, key_, charge_, 0);                            \
        } else {                                                                              \
            budget_release(dev_, charge_);                                                    \
        }                                                                                     \
        return rc_;                                                                           \
    } while (0)

/* The hooks, with the driver's exact names and signatures. */
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize);
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t w, size_t h,
                                   unsigned int elem);
EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int w,
                                unsigned int h, unsigned int elem);
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr);
EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr);
EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total);
EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total);
EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev);
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *status);
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s);
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream s);
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream s);
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream s);
EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s);
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);
EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep);
EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool);
EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags);
EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags);
EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d);
EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d);
EXPORT CUresult cuArrayDestroy(CUarray a);
EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                       unsigned int levels);
EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray m);
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m);
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m);
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *count,
                                                         nvmlProcessInfo_v1_t *infos);
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count,
                                                            nvmlProcessInfo_t *infos);
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                            nvmlProcessInfo_t *infos);
EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d,
                                                    nvmlProcessUtilizationSample_t *samples,
                                                    unsigned int *count, unsigned long long last_seen);
EXPORT nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t d,
                                                          nvmlProcessesUtilizationInfo_t *info);
EXPORT nvmlReturn_t nvmlDeviceGetAccountingPids(nvmlDevice_t d, unsigned int *count,
                                                unsigned int *pids);
EXPORT nvmlReturn_t nvmlDeviceGetAccountingStats(nvmlDevice_t d, unsigned int pid,
                                                 nvmlAccountingStats_t *stats);
EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                       size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS *params);
EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g, unsigned long long flags);
EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s);
EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s);
EXPORT CUresult cuGraphUpload(CUgraphExec e, CUstream s);
EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec e, CUstream s);
EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev);
EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev);
EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n,
                               unsigned int flags, CUdevice dev);
EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                               CUdevice dev);
EXPORT CUresult cuCtxDestroy(CUcontext ctx);
EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx);
EXPORT CUresult cuCtxAttach(CUcontext *pctx, unsigned int flags);
EXPORT CUresult cuCtxDetach(CUcontext ctx);
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev);
EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev);
EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname);
EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image);
EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n,
                                   CUjit_option *options, void **values);
EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin);
EXPORT CUresult cuModuleUnload(CUmodule hmod);
EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                  void **jitOptionsValues, unsigned int numJitOptions,
                                  CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                  unsigned int numLibraryOptions);
EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
                                      CUjit_option *jitOptions, void **jitOptionsValues,
                                      unsigned int numJitOptions, CUlibraryOption *libraryOptions,
                                      void **libraryOptionValues, unsigned int numLibraryOptions);
EXPORT CUresult cuLibraryUnload(CUlibrary library);


#endif
