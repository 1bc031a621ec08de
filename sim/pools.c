/* pools: stream-ordered allocation from default and user pools. A pool is
 * charged to the shared occupancy by its reservation, which grows in whole
 * chunks as the H100's and H200's do (pool_growth, src/cuda/granularity.h;
 * VRAM_SIM_POOL_CHUNK for another size; in 2 MiB pages when the device
 * has no room for them) and shrinks to
 * the release threshold when memory is freed (the simulator's streams have
 * always finished the work a free waits for). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../src/cuda/granularity.h"
#include "config.h"
#include "sim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* ---------------------------------------------------------------- pools */

struct CUmemPoolHandle_st {
    int dev;
    bool is_default;
    uint64_t reserved, used, threshold, reserved_high, used_high;
};

static struct CUmemPoolHandle_st default_pool[SIM_MAX_DEVICES];
static CUmemoryPool current_pool[SIM_MAX_DEVICES];

static CUmemoryPool pool_of_device(int dev)
{
    if (!current_pool[dev]) {
        default_pool[dev] = (struct CUmemPoolHandle_st){.dev = dev, .is_default = true};
        current_pool[dev] = &default_pool[dev];
    }
    return current_pool[dev];
}

/* Gives back what the pool holds beyond max(used, threshold): as if the
 * stream had synchronised, which in the simulator it always has. */
static void pool_release_to(CUmemoryPool p, uint64_t keep)
{
    uint64_t chunk = sim_pool_chunk();
    uint64_t floor = (p->used + chunk - 1) / chunk * chunk;
    keep = (keep + DEVICE_PAGE - 1) & ~(DEVICE_PAGE - 1);
    if (keep < floor)
        keep = floor;
    if (p->reserved > keep) {
        sim_uncharge(p->dev, p->reserved - keep);
        p->reserved = keep;
    }
}

static CUresult alloc_from(CUdeviceptr *dptr, size_t bytes, CUmemoryPool p)
{
    CUcontext ctx;
    CUresult rc = sim_current_context(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!dptr || !bytes || !p)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t charge = device_charge(bytes);
    void *mem = sim_map(bytes);
    if (!mem)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_range r = {(uint64_t)(uintptr_t)mem, bytes, RANGE_POOL, p->dev, 0, 0, ctx, p};
    pthread_mutex_lock(&mu);
    uint64_t grow = pool_growth(p->reserved, p->used, charge, sim_pool_chunk());
    if (grow) {
        uint64_t need = p->used + charge - p->reserved;
        if (sim_charge(p->dev, grow) == CUDA_SUCCESS)
            rc = CUDA_SUCCESS;
        else if ((rc = sim_charge(p->dev, grow = (need + DEVICE_PAGE - 1) & ~(DEVICE_PAGE - 1))) !=
                 CUDA_SUCCESS) {
            pthread_mutex_unlock(&mu);
            sim_unmap(mem, bytes);
            return rc;
        }
        p->reserved += grow;
        if (p->reserved > p->reserved_high)
            p->reserved_high = p->reserved;
    }
    p->used += charge;
    if (p->used > p->used_high)
        p->used_high = p->used;
    if (sim_range_add(&r) != 0) {
        p->used -= charge;
        pool_release_to(p, p->threshold);
        pthread_mutex_unlock(&mu);
        sim_unmap(mem, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&mu);
    *dptr = r.base;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream hStream)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!sim_stream(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    return alloc_from(dptr, bytesize, pool);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    int dev;
    CUresult rc = sim_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!sim_stream(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&mu);
    CUmemoryPool p = pool_of_device(dev);
    pthread_mutex_unlock(&mu);
    return alloc_from(dptr, bytesize, p);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!sim_stream(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    struct sim_range r;
    pthread_mutex_lock(&mu);
    if (!sim_range_take(dptr, 1u << RANGE_POOL, &r)) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUmemoryPool p = r.owner;
    p->used -= device_charge(r.size);
    pool_release_to(p, p->threshold);
    pthread_mutex_unlock(&mu);
    sim_unmap((void *)(uintptr_t)dptr, r.size);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    pool_of_device(dev);
    *pool_out = &default_pool[dev];
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    *pool = pool_of_device(dev);
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pool || pool->dev != dev)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    current_pool[dev] = pool;
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        sim_check_device(props->location.id) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    CUmemoryPool p = calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->dev = props->location.id;
    *pool = p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pool || pool->is_default)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    if (current_pool[pool->dev] == pool)
        current_pool[pool->dev] = &default_pool[pool->dev];
    sim_uncharge(pool->dev, pool->reserved);
    pthread_mutex_unlock(&mu);
    free(pool);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    pool_release_to(pool, minBytesToKeep);
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pool || !value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    CUresult rc = CUDA_SUCCESS;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *(int *)value = 1; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = pool->threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = pool->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = pool->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = pool->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = pool->used_high; break;
    default: rc = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pool || !value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    CUresult rc = CUDA_SUCCESS;
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        pool->threshold = *(cuuint64_t *)value;
        pool_release_to(pool, pool->threshold);
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: pool->reserved_high = pool->reserved; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: pool->used_high = pool->used; break;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: break;
    default: rc = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

SAME_TYPE(cuMemAllocAsync);
SAME_TYPE(cuMemFreeAsync);
SAME_TYPE(cuMemAllocFromPoolAsync);
SAME_TYPE(cuDeviceGetDefaultMemPool);
SAME_TYPE(cuDeviceGetMemPool);
SAME_TYPE(cuDeviceSetMemPool);
SAME_TYPE(cuMemPoolCreate);
SAME_TYPE(cuMemPoolDestroy);
SAME_TYPE(cuMemPoolTrimTo);
SAME_TYPE(cuMemPoolGetAttribute);
SAME_TYPE(cuMemPoolSetAttribute);
