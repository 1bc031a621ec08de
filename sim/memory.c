/* memory: device, managed and page-locked host allocations, what the
 * driver says about a pointer, and IPC handles.
 *
 * Device memory is host address space reserved with MAP_NORESERVE: pages
 * exist only once written, so an 80 GiB device works on a small machine and
 * programs can still copy data in and out. Each allocation is charged to
 * the shared occupancy by what a device would lose (granularity.h), so that
 * cuMemGetInfo and NVML see what every process holds.
 *
 * Host memory does not cost device memory. With unified addressing, a
 * mapped host allocation's device pointer is its host pointer, as on a
 * 64-bit system with a real GPU.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../src/cuda/granularity.h"
#include "sim.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t mapped_of(size_t bytes) { return (bytes + 4095) & ~(size_t)4095; }

void *sim_map(size_t bytes)
{
    void *p = mmap(NULL, mapped_of(bytes ? bytes : 1), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void sim_unmap(void *p, size_t bytes) { munmap(p, mapped_of(bytes ? bytes : 1)); }

/* ---------------------------------------------------------------- device */

static CUresult device_alloc(CUdeviceptr *dptr, size_t bytesize, enum sim_range_kind kind)
{
    int dev;
    CUcontext ctx;
    CUresult rc = sim_current_context(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    dev = sim_context_device(ctx);
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytesize > sim_device_total(dev))
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t charge = device_charge(bytesize);
    if ((rc = sim_charge(dev, charge)) != CUDA_SUCCESS)
        return rc;
    void *p = sim_map(bytesize);
    struct sim_range r = {(uint64_t)(uintptr_t)p, bytesize, kind, dev, 0, 0, ctx, NULL};
    if (!p || sim_range_add(&r) != 0) {
        if (p)
            sim_unmap(p, bytesize);
        sim_uncharge(dev, charge);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = r.base;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    return device_alloc(dptr, bytesize, RANGE_DEVICE);
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                   size_t Height, unsigned int ElementSizeBytes)
{
    if (!pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    /* Rows are padded to 512 bytes, as a real device's texture alignment. */
    size_t pitch = (WidthInBytes + 511) & ~(size_t)511;
    CUresult rc = device_alloc(dptr, pitch * Height, RANGE_DEVICE);
    if (rc == CUDA_SUCCESS)
        *pPitch = pitch;
    return rc;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return device_alloc(dptr, bytesize, RANGE_MANAGED);
}

/* The legacy 32-bit ABI: only allocations whose address fits in 32 bits
 * could be returned, which a simulated (host) address never does. Like a
 * 64-bit driver, refuse rather than truncate. */
EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    (void)dptr, (void)bytesize;
    return sim_ready() ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED;
}

EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                unsigned int Height, unsigned int ElementSizeBytes)
{
    (void)dptr, (void)pPitch, (void)WidthInBytes, (void)Height, (void)ElementSizeBytes;
    return sim_ready() ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!dptr)
        return CUDA_SUCCESS;
    struct sim_range r;
    if (!sim_range_take(dptr, (1u << RANGE_DEVICE) | (1u << RANGE_MANAGED), &r))
        return CUDA_ERROR_INVALID_VALUE;
    sim_unmap((void *)(uintptr_t)dptr, r.size);
    sim_uncharge(r.dev, device_charge(r.size));
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) { return cuMemFree_v2(dptr); }

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    int dev;
    CUresult rc = sim_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t f, t;
    sim_memory_info(dev, &f, &t);
    *free_bytes = f;
    *total = t;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
    size_t f, t;
    CUresult rc = cuMemGetInfo_v2(&f, &t);
    if (rc == CUDA_SUCCESS) {
        *free_bytes = f > UINT32_MAX ? UINT32_MAX : (unsigned int)f;
        *total = t > UINT32_MAX ? UINT32_MAX : (unsigned int)t;
    }
    return rc;
}

EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_range r;
    if (!sim_range_find(dptr, 0, RANGES_ALL, &r))
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = r.base;
    if (psize)
        *psize = r.size;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ host */

EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    CUcontext ctx;
    CUresult rc = sim_current_context(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pp || !bytesize ||
        Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                            CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    void *p = sim_map(bytesize);
    struct sim_range r = {(uint64_t)(uintptr_t)p, bytesize, RANGE_HOST, -1, Flags, 0, ctx, NULL};
    if (!p || sim_range_add(&r) != 0) {
        if (p)
            sim_unmap(p, bytesize);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return cuMemHostAlloc(pp, bytesize, 0);
}

EXPORT CUresult cuMemFreeHost(void *p)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_range r;
    if (!p || !sim_range_take((uint64_t)(uintptr_t)p, 1u << RANGE_HOST, &r))
        return CUDA_ERROR_INVALID_VALUE;
    sim_unmap(p, r.size);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_range r;
    if (!pdptr || Flags || !p || !sim_range_find((uint64_t)(uintptr_t)p, 1, RANGES_HOST, &r))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p; /* unified addressing */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_range r;
    if (!pFlags || !p || !sim_range_find((uint64_t)(uintptr_t)p, 1, RANGES_HOST, &r))
        return CUDA_ERROR_INVALID_VALUE;
    /* Every allocation is mapped under unified addressing. */
    *pFlags = r.flags | CU_MEMHOSTALLOC_DEVICEMAP;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    CUcontext ctx;
    CUresult rc = sim_current_context(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!p || !bytesize ||
        Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                            CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t base = (uint64_t)(uintptr_t)p;
    if (sim_range_find(base, 1, RANGES_ALL, NULL) ||
        sim_range_find(base + bytesize - 1, 1, RANGES_ALL, NULL))
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    struct sim_range r = {base, bytesize, RANGE_REGISTERED, -1, Flags, 0, ctx, NULL};
    return sim_range_add(&r) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    return cuMemHostRegister_v2(p, bytesize, Flags);
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!p || !sim_range_take((uint64_t)(uintptr_t)p, 1u << RANGE_REGISTERED, NULL))
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    return CUDA_SUCCESS;
}

/* -------------------------------------------------------------- pointers */

static CUmemorytype memory_type(const struct sim_range *r)
{
    return r->kind == RANGE_HOST || r->kind == RANGE_REGISTERED ? CU_MEMORYTYPE_HOST
                                                                : CU_MEMORYTYPE_DEVICE;
}

/* One attribute of a pointer the driver knows; sizes as cuda.h documents
 * them for each attribute. */
static CUresult pointer_attribute(void *data, CUpointer_attribute a, const struct sim_range *r,
                                  uint64_t p)
{
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = r->ctx; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned int *)data = (unsigned)memory_type(r); break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = p; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (memory_type(r) != CU_MEMORYTYPE_HOST && r->kind != RANGE_MANAGED)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)(uintptr_t)p;
        break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *(int *)data = 1; break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: *(unsigned long long *)data = r->id; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(int *)data = r->kind == RANGE_MANAGED; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = r->dev >= 0 ? r->dev : r->ctx ? sim_context_device(r->ctx) : 0;
        break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: *(int *)data = r->kind == RANGE_DEVICE; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: *(CUdeviceptr *)data = r->base; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: *(size_t *)data = r->size; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(int *)data = 1; break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: *(unsigned long long *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: *(int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: *(unsigned int *)data = 3; break; /* read-write */
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(void **)data = r->kind == RANGE_POOL ? r->owner : NULL;
        break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_range r;
    if (!data || !sim_range_find(ptr, 0, RANGES_ALL, &r))
        return CUDA_ERROR_INVALID_VALUE;
    return pointer_attribute(data, attribute, &r, ptr);
}

/* A default for a pointer the driver does not know, per the plural call's
 * contract: no error, NULL or zero values. */
static void pointer_default(void *data, CUpointer_attribute a)
{
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *(void **)data = NULL; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: *(CUdeviceptr *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: *(unsigned long long *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: *(size_t *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = -2; break;
    default: *(int *)data = 0; break;
    }
}

EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                       void **data, CUdeviceptr ptr)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_range r;
    bool known = sim_range_find(ptr, 0, RANGES_ALL, &r);
    for (unsigned i = 0; i < numAttributes; i++) {
        if (!data[i])
            continue;
        if (!known || pointer_attribute(data[i], attributes[i], &r, ptr) != CUDA_SUCCESS)
            pointer_default(data[i], attributes[i]);
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!value || attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS ||
        !sim_range_find(ptr, 0, RANGES_DEVICE, NULL))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS; /* every memory operation here is synchronous already */
}

/* ------------------------------------------------------------------- IPC */

/* What a handle carries: which process made it and which allocation. A
 * simulated allocation is private memory of its process, so another
 * process cannot map it; the handle is still made and checked as the
 * driver would. */
struct ipc_handle {
    char magic[8];
    int64_t pid;
    uint64_t base, size;
    int32_t dev;
};
static const char IPC_MAGIC[8] = "VRAMIPC1";

EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_range r;
    if (!pHandle || !sim_range_find(dptr, 0, 1u << RANGE_DEVICE, &r))
        return CUDA_ERROR_INVALID_VALUE;
    struct ipc_handle h = {.pid = getpid(), .base = r.base, .size = r.size, .dev = r.dev};
    memcpy(h.magic, IPC_MAGIC, sizeof h.magic);
    memset(pHandle, 0, sizeof *pHandle);
    memcpy(pHandle->reserved, &h, sizeof h);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct ipc_handle h;
    memcpy(&h, handle.reserved, sizeof h);
    if (!pdptr || Flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS ||
        memcmp(h.magic, IPC_MAGIC, sizeof h.magic) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (h.pid == getpid())
        return CUDA_ERROR_INVALID_CONTEXT; /* a process cannot open its own handles */
    sim_log(2, "cuIpcOpenMemHandle: the simulated GPU's memory is private to each process; "
               "process %lld's allocation cannot be mapped here", (long long)h.pid);
    return CUDA_ERROR_NOT_SUPPORTED;
}

EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    return cuIpcOpenMemHandle_v2(pdptr, handle, Flags);
}

EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    return sim_range_take(dptr, 1u << RANGE_IPC, NULL) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SAME_TYPE(cuMemAlloc);
SAME_TYPE(cuMemAlloc_v2);
SAME_TYPE(cuMemAllocPitch);
SAME_TYPE(cuMemAllocPitch_v2);
SAME_TYPE(cuMemAllocManaged);
SAME_TYPE(cuMemFree);
SAME_TYPE(cuMemFree_v2);
SAME_TYPE(cuMemGetInfo);
SAME_TYPE(cuMemGetInfo_v2);
SAME_TYPE(cuMemGetAddressRange_v2);
SAME_TYPE(cuMemHostAlloc);
SAME_TYPE(cuMemAllocHost_v2);
SAME_TYPE(cuMemFreeHost);
SAME_TYPE(cuMemHostGetDevicePointer_v2);
SAME_TYPE(cuMemHostGetFlags);
SAME_TYPE(cuMemHostRegister);
SAME_TYPE(cuMemHostRegister_v2);
SAME_TYPE(cuMemHostUnregister);
SAME_TYPE(cuPointerGetAttribute);
SAME_TYPE(cuPointerGetAttributes);
SAME_TYPE(cuPointerSetAttribute);
SAME_TYPE(cuIpcGetMemHandle);
SAME_TYPE(cuIpcOpenMemHandle);
SAME_TYPE(cuIpcOpenMemHandle_v2);
SAME_TYPE(cuIpcCloseMemHandle);
