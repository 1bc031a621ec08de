/* The subset of the CUDA driver ABI that vram uses, declared by us.
 *
 * The driver ABI is stable: these names, values and signatures are those of
 * cuda.h, so building vram needs no CUDA toolkit. Both libvram (which loads
 * libcuda.so.1 at run time) and the simulated driver (which *is* a
 * libcuda.so.1) include this header, which is what keeps the two honest: the
 * simulator cannot offer a signature the real driver does not have.
 */
#ifndef VRAM_CUDA_ABI_H
#define VRAM_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_CONTEXT_ALREADY_CURRENT = 202,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999,
};

typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef uint64_t cuuint64_t;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;
typedef void (*CUhostFn)(void *userData);

typedef int CUdevice_attribute;
enum {
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
    CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};

/* Stream and event creation flags. */
enum {
    CU_MEM_ATTACH_GLOBAL = 1,
    CU_MEM_ATTACH_HOST = 2,
    CU_STREAM_DEFAULT = 0,
    CU_STREAM_NON_BLOCKING = 1,
    CU_EVENT_DEFAULT = 0,
    CU_EVENT_BLOCKING_SYNC = 1,
    CU_EVENT_DISABLE_TIMING = 2,
};

/* Special stream handles. */
#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

/* cuGetProcAddress flags and symbol status (CUDA 11.3+, status since 12.0). */
enum {
    CU_GET_PROC_ADDRESS_DEFAULT = 0,
    CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2,
};
typedef int CUdriverProcAddressQueryResult;
enum {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};

/* Stream-ordered allocation (CUDA 11.2+). */
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef int CUmemPool_attribute;
enum {
    CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
    CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
    CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
    CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
    CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
    CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
    CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
    CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8,
};
typedef int CUmemLocationType;
enum { CU_MEM_LOCATION_TYPE_INVALID = 0, CU_MEM_LOCATION_TYPE_DEVICE = 1, CU_MEM_LOCATION_TYPE_HOST = 2 };
typedef int CUmemAllocationType;
enum { CU_MEM_ALLOCATION_TYPE_INVALID = 0, CU_MEM_ALLOCATION_TYPE_PINNED = 1 };
typedef int CUmemAllocationHandleType;
typedef struct CUmemLocation_st {
    CUmemLocationType type;
    int id;
} CUmemLocation;
typedef struct CUmemPoolProps_st {
    CUmemAllocationType allocType;
    CUmemAllocationHandleType handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps;

/* Virtual memory management (CUDA 10.2+). */
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUmemAllocationProp_st {
    CUmemAllocationType type;
    CUmemAllocationHandleType requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;
typedef int CUmemAllocationGranularity_flags;
enum { CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1 };
typedef struct CUmemAccessDesc_st {
    CUmemLocation location;
    int flags;
} CUmemAccessDesc;

/* Arrays. */
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;
typedef int CUarray_format;
enum {
    CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
    CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
    CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
    CU_AD_FORMAT_SIGNED_INT8 = 0x08,
    CU_AD_FORMAT_SIGNED_INT16 = 0x09,
    CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
    CU_AD_FORMAT_HALF = 0x10,
    CU_AD_FORMAT_FLOAT = 0x20,
};
typedef struct CUDA_ARRAY_DESCRIPTOR_st {
    size_t Width;
    size_t Height;
    CUarray_format Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
    size_t Width;
    size_t Height;
    size_t Depth;
    CUarray_format Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;
typedef struct CUDA_ARRAY_MEMORY_REQUIREMENTS_st {
    size_t size;
    size_t alignment;
    unsigned int reserved[4];
} CUDA_ARRAY_MEMORY_REQUIREMENTS;

/* Graphs and graph memory (CUDA 11.4+). */
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
typedef int CUgraphMem_attribute;
enum {
    CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT = 0,
    CU_GRAPH_MEM_ATTR_USED_MEM_HIGH = 1,
    CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2,
    CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH = 3,
};
typedef struct CUDA_MEM_ALLOC_NODE_PARAMS_st {
    CUmemPoolProps poolProps;
    const CUmemAccessDesc *accessDescs;
    size_t accessDescCount;
    size_t bytesize;
    CUdeviceptr dptr;
} CUDA_MEM_ALLOC_NODE_PARAMS;

/* Function types, one per entry point we call. The names are the ABI
 * symbols; cuda.h's macros map e.g. cuMemAlloc to cuMemAlloc_v2. */
typedef CUresult (*PFN_cuInit)(unsigned int flags);
typedef CUresult (*PFN_cuDriverGetVersion)(int *version);
typedef CUresult (*PFN_cuGetErrorName)(CUresult error, const char **str);
typedef CUresult (*PFN_cuGetErrorString)(CUresult error, const char **str);
typedef CUresult (*PFN_cuDeviceGetCount)(int *count);
typedef CUresult (*PFN_cuDeviceGet)(CUdevice *device, int ordinal);
typedef CUresult (*PFN_cuDeviceGetName)(char *name, int len, CUdevice dev);
typedef CUresult (*PFN_cuDeviceGetUuid)(CUuuid *uuid, CUdevice dev);
typedef CUresult (*PFN_cuDeviceTotalMem_v2)(size_t *bytes, CUdevice dev);
typedef CUresult (*PFN_cuDeviceGetAttribute)(int *pi, CUdevice_attribute attrib, CUdevice dev);
typedef CUresult (*PFN_cuDevicePrimaryCtxRetain)(CUcontext *pctx, CUdevice dev);
typedef CUresult (*PFN_cuDevicePrimaryCtxRelease_v2)(CUdevice dev);
typedef CUresult (*PFN_cuCtxCreate_v2)(CUcontext *pctx, unsigned int flags, CUdevice dev);
typedef CUresult (*PFN_cuCtxDestroy_v2)(CUcontext ctx);
typedef CUresult (*PFN_cuCtxPushCurrent_v2)(CUcontext ctx);
typedef CUresult (*PFN_cuCtxPopCurrent_v2)(CUcontext *pctx);
typedef CUresult (*PFN_cuCtxSetCurrent)(CUcontext ctx);
typedef CUresult (*PFN_cuCtxGetCurrent)(CUcontext *pctx);
typedef CUresult (*PFN_cuCtxGetDevice)(CUdevice *device);
typedef CUresult (*PFN_cuCtxSynchronize)(void);
typedef CUresult (*PFN_cuMemAlloc_v2)(CUdeviceptr *dptr, size_t bytesize);
typedef CUresult (*PFN_cuMemAllocPitch_v2)(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                           size_t Height, unsigned int ElementSizeBytes);
typedef CUresult (*PFN_cuMemAllocManaged)(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
/* The legacy ABI (before CUDA 3.2): 32-bit device pointers and sizes. Still
 * exported by the driver; an interposer must govern them too. */
typedef unsigned int CUdeviceptr_v1;
typedef CUresult (*PFN_cuMemAlloc)(CUdeviceptr_v1 *dptr, unsigned int bytesize);
typedef CUresult (*PFN_cuMemAllocPitch)(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
                                        unsigned int WidthInBytes, unsigned int Height,
                                        unsigned int ElementSizeBytes);
typedef CUresult (*PFN_cuMemFree)(CUdeviceptr_v1 dptr);
typedef CUresult (*PFN_cuMemGetInfo)(unsigned int *free, unsigned int *total);
typedef CUresult (*PFN_cuDeviceTotalMem)(unsigned int *bytes, CUdevice dev);
typedef CUresult (*PFN_cuMemFree_v2)(CUdeviceptr dptr);
typedef CUresult (*PFN_cuMemGetInfo_v2)(size_t *free, size_t *total);
typedef CUresult (*PFN_cuMemcpyHtoD_v2)(CUdeviceptr dst, const void *src, size_t n);
typedef CUresult (*PFN_cuMemcpyDtoH_v2)(void *dst, CUdeviceptr src, size_t n);
typedef CUresult (*PFN_cuMemsetD8_v2)(CUdeviceptr dst, unsigned char value, size_t n);
typedef CUresult (*PFN_cuStreamCreate)(CUstream *phStream, unsigned int flags);
typedef CUresult (*PFN_cuStreamDestroy_v2)(CUstream hStream);
typedef CUresult (*PFN_cuStreamSynchronize)(CUstream hStream);
typedef CUresult (*PFN_cuStreamQuery)(CUstream hStream);
typedef CUresult (*PFN_cuLaunchHostFunc)(CUstream hStream, CUhostFn fn, void *userData);
typedef CUresult (*PFN_cuEventCreate)(CUevent *phEvent, unsigned int flags);
typedef CUresult (*PFN_cuEventDestroy_v2)(CUevent hEvent);
typedef CUresult (*PFN_cuEventRecord)(CUevent hEvent, CUstream hStream);
typedef CUresult (*PFN_cuEventQuery)(CUevent hEvent);
typedef CUresult (*PFN_cuEventSynchronize)(CUevent hEvent);
typedef CUresult (*PFN_cuMemAllocAsync)(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
typedef CUresult (*PFN_cuMemFreeAsync)(CUdeviceptr dptr, CUstream hStream);
typedef CUresult (*PFN_cuMemAllocFromPoolAsync)(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                CUstream hStream);
typedef CUresult (*PFN_cuDeviceGetDefaultMemPool)(CUmemoryPool *pool_out, CUdevice dev);
typedef CUresult (*PFN_cuDeviceGetMemPool)(CUmemoryPool *pool, CUdevice dev);
typedef CUresult (*PFN_cuDeviceSetMemPool)(CUdevice dev, CUmemoryPool pool);
typedef CUresult (*PFN_cuMemPoolCreate)(CUmemoryPool *pool, const CUmemPoolProps *poolProps);
typedef CUresult (*PFN_cuMemPoolDestroy)(CUmemoryPool pool);
typedef CUresult (*PFN_cuMemPoolTrimTo)(CUmemoryPool pool, size_t minBytesToKeep);
typedef CUresult (*PFN_cuMemPoolGetAttribute)(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
typedef CUresult (*PFN_cuMemPoolSetAttribute)(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
typedef CUresult (*PFN_cuMemCreate)(CUmemGenericAllocationHandle *handle, size_t size,
                                    const CUmemAllocationProp *prop, unsigned long long flags);
typedef CUresult (*PFN_cuMemRelease)(CUmemGenericAllocationHandle handle);
typedef CUresult (*PFN_cuMemGetAllocationGranularity)(size_t *granularity,
                                                      const CUmemAllocationProp *prop,
                                                      CUmemAllocationGranularity_flags option);
typedef CUresult (*PFN_cuMemAddressReserve)(CUdeviceptr *ptr, size_t size, size_t alignment,
                                            CUdeviceptr addr, unsigned long long flags);
typedef CUresult (*PFN_cuMemAddressFree)(CUdeviceptr ptr, size_t size);
typedef CUresult (*PFN_cuMemMap)(CUdeviceptr ptr, size_t size, size_t offset,
                                 CUmemGenericAllocationHandle handle, unsigned long long flags);
typedef CUresult (*PFN_cuMemUnmap)(CUdeviceptr ptr, size_t size);
typedef CUresult (*PFN_cuMemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                       size_t count);
typedef CUresult (*PFN_cuArrayCreate_v2)(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray);
typedef CUresult (*PFN_cuArray3DCreate_v2)(CUarray *pHandle,
                                           const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray);
typedef CUresult (*PFN_cuArrayDestroy)(CUarray hArray);
typedef CUresult (*PFN_cuArrayGetMemoryRequirements)(CUDA_ARRAY_MEMORY_REQUIREMENTS *req,
                                                     CUarray array, CUdevice device);
typedef CUresult (*PFN_cuMipmappedArrayCreate)(CUmipmappedArray *pHandle,
                                               const CUDA_ARRAY3D_DESCRIPTOR *pDesc,
                                               unsigned int numMipmapLevels);
typedef CUresult (*PFN_cuMipmappedArrayDestroy)(CUmipmappedArray hMipmappedArray);
typedef CUresult (*PFN_cuMipmappedArrayGetMemoryRequirements)(CUDA_ARRAY_MEMORY_REQUIREMENTS *req,
                                                              CUmipmappedArray mipmap,
                                                              CUdevice device);
typedef CUresult (*PFN_cuGraphCreate)(CUgraph *phGraph, unsigned int flags);
typedef CUresult (*PFN_cuGraphDestroy)(CUgraph hGraph);
typedef CUresult (*PFN_cuGraphAddMemAllocNode)(CUgraphNode *phGraphNode, CUgraph hGraph,
                                               const CUgraphNode *dependencies,
                                               size_t numDependencies,
                                               CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams);
typedef CUresult (*PFN_cuGraphAddMemFreeNode)(CUgraphNode *phGraphNode, CUgraph hGraph,
                                              const CUgraphNode *dependencies,
                                              size_t numDependencies, CUdeviceptr dptr);
typedef CUresult (*PFN_cuGraphInstantiateWithFlags)(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                    unsigned long long flags);
typedef CUresult (*PFN_cuGraphLaunch)(CUgraphExec hGraphExec, CUstream hStream);
typedef CUresult (*PFN_cuGraphUpload)(CUgraphExec hGraphExec, CUstream hStream);
typedef CUresult (*PFN_cuGraphExecDestroy)(CUgraphExec hGraphExec);
typedef CUresult (*PFN_cuDeviceGetGraphMemAttribute)(CUdevice device, CUgraphMem_attribute attr,
                                                     void *value);
typedef CUresult (*PFN_cuDeviceGraphMemTrim)(CUdevice device);
typedef CUresult (*PFN_cuGetProcAddress)(const char *symbol, void **pfn, int cudaVersion,
                                         cuuint64_t flags);
typedef CUresult (*PFN_cuGetProcAddress_v2)(const char *symbol, void **pfn, int cudaVersion,
                                            cuuint64_t flags,
                                            CUdriverProcAddressQueryResult *symbolStatus);

#endif
