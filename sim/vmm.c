/* vmm: virtual memory management and arrays. A VMM handle is charged by
 * its physical size until it is released and its last mapping is gone; an
 * array by its padded layout (array_layout.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../src/cuda/array_layout.h"
#include "../src/cuda/granularity.h"
#include "sim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* -------------------------------------------- virtual memory management */

struct physical {
    int dev; /* -1: host memory, not charged to a device */
    size_t size;
    int refs; /* the handle until released, plus one per mapping */
};


static void physical_unref(struct physical *ph)
{
    if (--ph->refs == 0) {
        if (ph->dev >= 0)
            sim_uncharge(ph->dev, ph->size);
        free(ph);
    }
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option)
{
    (void)option;
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!granularity || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = DEVICE_PAGE;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!handle || !prop || flags || !size || size % DEVICE_PAGE ||
        prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    int dev = -1;
    if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        if (sim_check_device(prop->location.id) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_DEVICE;
        dev = prop->location.id;
    } else if (prop->location.type != CU_MEM_LOCATION_TYPE_HOST) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct physical *ph = malloc(sizeof *ph);
    if (!ph)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (dev >= 0 && sim_charge(dev, size) != CUDA_SUCCESS) {
        free(ph);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ph = (struct physical){dev, size, 1};
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)ph;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    physical_unref((struct physical *)(uintptr_t)handle);
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                    unsigned long long flags)
{
    (void)alignment, (void)addr;
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ptr || !size || flags)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    munmap((void *)(uintptr_t)ptr, size);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    struct physical *ph = (struct physical *)(uintptr_t)handle;
    if (!ptr || !ph || flags || offset + size > ph->size)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_range r = {ptr, size, RANGE_VMM, ph->dev, 0, 0, NULL, ph};
    sim_current_context(&r.ctx);
    pthread_mutex_lock(&mu);
    int rc = sim_range_find(ptr, 0, RANGES_ALL, NULL) ? -1 : sim_range_add(&r);
    if (rc == 0)
        ph->refs++;
    pthread_mutex_unlock(&mu);
    return rc == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    (void)size;
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    struct sim_range r;
    pthread_mutex_lock(&mu);
    bool found = sim_range_take(ptr, 1u << RANGE_VMM, &r);
    if (found)
        physical_unref(r.owner);
    pthread_mutex_unlock(&mu);
    if (found)
        mprotect((void *)(uintptr_t)ptr, size, PROT_NONE);
    return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ptr || !size || !desc || !count)
        return CUDA_ERROR_INVALID_VALUE;
    return mprotect((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE) == 0
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
}

/* ---------------------------------------------------------------- arrays */

struct CUarray_st {
    int dev;
    uint64_t bytes;
};
struct CUmipmappedArray_st {
    int dev;
    uint64_t bytes;
};

static CUresult array_sizes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels, uint64_t *bytes)
{
    *bytes = array_layout_bytes(d, levels);
    return *bytes ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult charge_new(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels, int *dev_out,
                           uint64_t *bytes)
{
    int dev;
    CUresult rc = sim_current_device(&dev);
    if (rc == CUDA_SUCCESS)
        rc = array_sizes(d, levels, bytes);
    if (rc == CUDA_SUCCESS && sim_charge(dev, *bytes) != CUDA_SUCCESS)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    *dev_out = dev;
    return rc;
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pDesc)
{
    if (!pHandle || !pDesc)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUarray_st a;
    CUresult rc = charge_new(pDesc, 1, &a.dev, &a.bytes);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!(*pHandle = malloc(sizeof a))) {
        sim_uncharge(a.dev, a.bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    **pHandle = a;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pDesc)
{
    if (!pDesc)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = {pDesc->Width, pDesc->Height, 0, pDesc->Format, pDesc->NumChannels, 0};
    return cuArray3DCreate_v2(pHandle, &d);
}

EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!hArray)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_uncharge(hArray->dev, hArray->bytes);
    free(hArray);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *req, CUarray array,
                                             CUdevice device)
{
    (void)device;
    if (!req || !array)
        return CUDA_ERROR_INVALID_VALUE;
    memset(req, 0, sizeof *req);
    req->size = array->bytes;
    req->alignment = DEVICE_ALIGN;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pDesc,
                                       unsigned int numMipmapLevels)
{
    if (!pHandle || !pDesc)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUmipmappedArray_st m;
    CUresult rc = charge_new(pDesc, numMipmapLevels, &m.dev, &m.bytes);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!(*pHandle = malloc(sizeof m))) {
        sim_uncharge(m.dev, m.bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    **pHandle = m;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray h)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!h)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_uncharge(h->dev, h->bytes);
    free(h);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *req,
                                                      CUmipmappedArray mipmap, CUdevice device)
{
    (void)device;
    if (!req || !mipmap)
        return CUDA_ERROR_INVALID_VALUE;
    memset(req, 0, sizeof *req);
    req->size = mipmap->bytes;
    req->alignment = DEVICE_ALIGN;
    return CUDA_SUCCESS;
}

SAME_TYPE(cuMemCreate);
SAME_TYPE(cuMemRelease);
SAME_TYPE(cuMemGetAllocationGranularity);
SAME_TYPE(cuMemAddressReserve);
SAME_TYPE(cuMemAddressFree);
SAME_TYPE(cuMemMap);
SAME_TYPE(cuMemUnmap);
SAME_TYPE(cuMemSetAccess);
SAME_TYPE(cuArrayCreate_v2);
SAME_TYPE(cuArray3DCreate_v2);
SAME_TYPE(cuArrayDestroy);
SAME_TYPE(cuArrayGetMemoryRequirements);
SAME_TYPE(cuMipmappedArrayCreate);
SAME_TYPE(cuMipmappedArrayDestroy);
SAME_TYPE(cuMipmappedArrayGetMemoryRequirements);
