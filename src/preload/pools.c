/* pools: stream-ordered allocation from default and user pools (and the
 * _ptsz variants), charged by what each pool reserves. */
#include "driver_memory.h"
#include "interposer.h"

/* ------------------------------------------------ stream-ordered pools */

/* A pool's cost to the device is its reservation, not the sum of its live
 * pointers: freed memory stays reserved up to the release threshold. So a
 * pool is charged what it reserves, re-read from the driver
 * (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) after every operation that can
 * change it. Pool operations are serialised here so each settles alone. */
#define MAX_POOLS 256
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
/* Its holder may have the driver take memory not charged yet: no reading
 * of the driver's part may count that (driver_memory.h). */
static void pool_lock(void)
{
    pthread_mutex_lock(&pool_mu);
    driver_memory_enter();
}
static void pool_unlock(void)
{
    driver_memory_leave();
    pthread_mutex_unlock(&pool_mu);
}
static struct pool_charge {
    CUmemoryPool pool;
    int dev;
    uint64_t charged;
} pools[MAX_POOLS];
static int npools;

static struct pool_charge *pool_entry(CUmemoryPool pool, int dev)
{
    for (int i = 0; i < npools; i++)
        if (pools[i].pool == pool)
            return &pools[i];
    if (npools == MAX_POOLS)
        return NULL;
    pools[npools] = (struct pool_charge){pool, dev, 0};
    return &pools[npools++];
}

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute attr)
{
    cuuint64_t v = 0;
    if (!real.cuMemPoolGetAttribute || real.cuMemPoolGetAttribute(pool, attr, &v) != CUDA_SUCCESS)
        return 0;
    return v;
}

/* Brings a pool's charge to what it reserves now; `pre` is what the caller
 * already reserved for this operation, on `stream`. Returns -1 if the pool
 * grew past the budget (the caller undoes its operation). */
static int pool_settle(struct pool_charge *pc, uint64_t pre, CUstream stream)
{
    uint64_t now = pool_attr(pc->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
    uint64_t had = pc->charged + pre;
    if (now < had) {
        budget_release(pc->dev, had - now);
    } else if (now > had && budget_reserve_held(pc->dev, now - had) != 0) {
        budget_release(pc->dev, pre);
        return -1;
    }
    record_resize(RECORD_POOL, pc->dev, (uintptr_t)pc->pool, pc->charged, now, (uintptr_t)stream);
    pc->charged = now;
    return 0;
}

static void settle_all_pools(CUstream stream)
{
    for (int i = 0; i < npools; i++)
        pool_settle(&pools[i], 0, stream);
}

static CUresult pool_alloc(const char *name, CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                           CUstream s, PFN_cuMemAllocFromPoolAsync from_pool,
                           PFN_cuMemAllocAsync from_default, PFN_cuMemFreeAsync undo)
{
    int dev = governed_device();
    if (dev < 0 || !dptr || !bytesize)
        return from_pool ? from_pool(dptr, bytesize, pool, s) : from_default(dptr, bytesize, s);
    if (!pool && (!real.cuDeviceGetMemPool || real.cuDeviceGetMemPool(&pool, dev) != CUDA_SUCCESS))
        return from_default(dptr, bytesize, s);
    pool_lock();
    struct pool_charge *pc = pool_entry(pool, dev);
    if (!pc) {
        pool_unlock();
        governed_refusal(dev, RECORD_POOL, bytesize, (uintptr_t)s, name, RECORD_TOO_MANY_POOLS);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* Room the pool may need beyond what it holds free. */
    uint64_t charge = device_charge(bytesize);
    uint64_t idle = pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) -
                    pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
    uint64_t pre = charge > idle ? device_charge(charge - idle) : 0;
    if (pre && budget_reserve(dev, pre) != 0) {
        pool_unlock();
        governed_refusal(dev, RECORD_POOL, charge, (uintptr_t)s, name, 0);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = from_pool ? from_pool(dptr, bytesize, pool, s) : from_default(dptr, bytesize, s);
    if (rc != CUDA_SUCCESS) {
        budget_release(dev, pre);
    } else if (pool_settle(pc, pre, s) != 0) {
        undo(*dptr, s);
        pool_settle(pc, 0, s);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        governed_refusal(dev, RECORD_POOL, charge, (uintptr_t)s, name, 0);
    }
    pool_unlock();
    return rc;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s)
{
    need_real();
    return pool_alloc("cuMemAllocAsync", dptr, bytesize, NULL, s, NULL, real.cuMemAllocAsync,
                      real.cuMemFreeAsync);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream s)
{
    need_real();
    return pool_alloc("cuMemAllocAsync", dptr, bytesize, NULL, s, NULL, real.cuMemAllocAsync_ptsz,
                      real.cuMemFreeAsync_ptsz);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream s)
{
    need_real();
    if (!pool)
        return real.cuMemAllocFromPoolAsync(dptr, bytesize, pool, s);
    return pool_alloc("cuMemAllocFromPoolAsync", dptr, bytesize, pool, s,
                      real.cuMemAllocFromPoolAsync, NULL, real.cuMemFreeAsync);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream s)
{
    need_real();
    if (!pool)
        return real.cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, s);
    return pool_alloc("cuMemAllocFromPoolAsync", dptr, bytesize, pool, s,
                      real.cuMemAllocFromPoolAsync_ptsz, NULL, real.cuMemFreeAsync_ptsz);
}

/* After anything that can shrink pools, their charges follow. */
static CUresult settled(CUresult rc, CUstream stream)
{
    pool_lock();
    settle_all_pools(stream);
    pool_unlock();
    return rc;
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    need_real();
    return settled(real.cuMemFreeAsync(dptr, s), s);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
    need_real();
    return settled(real.cuMemFreeAsync_ptsz(dptr, s), s);
}

EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    need_real();
    return settled(real.cuMemPoolTrimTo(pool, keep), NULL);
}

EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    need_real();
    return settled(real.cuMemPoolSetAttribute(pool, attr, value), NULL);
}

EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    need_real();
    CUresult rc = real.cuMemPoolDestroy(pool);
    if (rc != CUDA_SUCCESS)
        return rc;
    pool_lock();
    for (int i = 0; i < npools; i++)
        if (pools[i].pool == pool) {
            budget_release(pools[i].dev, pools[i].charged);
            record_resize(RECORD_POOL, pools[i].dev, (uintptr_t)pool, pools[i].charged, 0, 0);
            pools[i] = pools[--npools];
            break;
        }
    pool_unlock();
    return rc;
}
