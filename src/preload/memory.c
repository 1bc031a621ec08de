/* memory: the plain allocation entry points (cuMemAlloc_v2, pitched,
 * managed, the legacy 32-bit ABI, their frees) and what the program sees of
 * a device (cuMemGetInfo, cuDeviceTotalMem, every version). */
#include "interposer.h"
#include <limits.h>

/* -------------------------------------------------------- allocations */

static CUresult free_v2(uint64_t p) { return real.cuMemFree_v2(p); }
static CUresult free_v1(uint64_t p) { return real.cuMemFree((CUdeviceptr_v1)p); }

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    need_real();
    if (!dptr || !bytesize)
        return real.cuMemAlloc_v2(dptr, bytesize);
    GOVERNED_ALLOC("cuMemAlloc", device_charge(bytesize), CHARGE_MEMALLOC,
                   real.cuMemAlloc_v2(dptr, bytesize), *dptr);
}

EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    need_real();
    if (!real.cuMemAlloc)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!dptr || !bytesize)
        return real.cuMemAlloc(dptr, bytesize);
    GOVERNED_ALLOC("cuMemAlloc (legacy)", device_charge(bytesize), CHARGE_MEMALLOC,
                   real.cuMemAlloc(dptr, bytesize), *dptr);
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t w, size_t h,
                                   unsigned int elem)
{
    need_real();
    if (!dptr || !pPitch || !w || !h || h > SIZE_MAX / w)
        return real.cuMemAllocPitch_v2(dptr, pPitch, w, h, elem);
    /* The charge is reserved for the widest pitch the driver may choose
     * (rows padded to 512 bytes), then settled to what it chose. */
    uint64_t bound = device_charge(((w + 511) & ~(size_t)511) * h);
    int dev = governed_device();
    if (dev < 0)
        return real.cuMemAllocPitch_v2(dptr, pPitch, w, h, elem);
    if (budget_reserve(dev, bound) != 0) {
        governed_refusal(dev, RECORD_PITCHED, bound, 0, "cuMemAllocPitch", 0);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = real.cuMemAllocPitch_v2(dptr, pPitch, w, h, elem);
    if (rc != CUDA_SUCCESS) {
        budget_release(dev, bound);
        return rc;
    }
    uint64_t actual = device_charge((uint64_t)*pPitch * h);
    if (actual < bound)
        budget_release(dev, bound - actual);
    else if (actual > bound && budget_reserve_held(dev, actual - bound) != 0) {
        /* The driver padded more than any device we know; over budget. */
        real.cuMemFree_v2(*dptr);
        budget_release(dev, bound);
        governed_refusal(dev, RECORD_PITCHED, actual, 0, "cuMemAllocPitch", 0);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    budget_commit(dev, *dptr, actual, CHARGE_PITCH);
    record_alloc(RECORD_PITCHED, dev, *dptr, actual, 0);
    return rc;
}

EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int w,
                                unsigned int h, unsigned int elem)
{
    need_real();
    if (!real.cuMemAllocPitch)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!dptr || !pPitch || !w || !h)
        return real.cuMemAllocPitch(dptr, pPitch, w, h, elem);
    GOVERNED_ALLOC("cuMemAllocPitch (legacy)",
                   device_charge((((uint64_t)w + 511) & ~(uint64_t)511) * h), CHARGE_PITCH,
                   real.cuMemAllocPitch(dptr, pPitch, w, h, elem), *dptr);
}

/* Managed memory may live on the device whole: charged in full. */
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    need_real();
    if (!dptr || !bytesize)
        return real.cuMemAllocManaged(dptr, bytesize, flags);
    GOVERNED_ALLOC("cuMemAllocManaged", device_charge(bytesize), CHARGE_MANAGED,
                   real.cuMemAllocManaged(dptr, bytesize, flags), *dptr);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    need_real();
    return governed_free(dptr, free_v2);
}

EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    need_real();
    if (!real.cuMemFree)
        return CUDA_ERROR_NOT_SUPPORTED;
    return governed_free(dptr, free_v1);
}

/* ---------------------------------------------------- what the program sees */

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    need_real();
    /* The budget first: with vramd, the first look at a device may wait for
     * its grant, and what is free must be read after that wait. */
    int dev = governed_device();
    CUresult rc = real.cuMemGetInfo_v2(free_bytes, total);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (dev >= 0) {
        uint64_t f, t;
        budget_view(dev, *free_bytes, *total, &f, &t);
        *free_bytes = f;
        *total = t;
    }
    return rc;
}

EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
    size_t f, t;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = cuMemGetInfo_v2(&f, &t);
    if (rc == CUDA_SUCCESS) {
        *free_bytes = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
        *total = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    }
    return rc;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    need_real();
    CUresult rc = real.cuDeviceTotalMem_v2(bytes, dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_once(&budget_once, setup_budgets);
    *bytes = budget_total(dev, *bytes);
    return rc;
}

EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    size_t t;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = cuDeviceTotalMem_v2(&t, dev);
    if (rc == CUDA_SUCCESS)
        *bytes = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    return rc;
}
