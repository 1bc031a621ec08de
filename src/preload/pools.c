/* pools: stream-ordered allocation from default and user pools (and the
 * _ptsz variants), exact under a budget both ways.
 *
 * A pool's cost to the device is its reservation, not the sum of its live
 * pointers: freed memory stays reserved up to the release threshold, and
 * the driver grows a pool in whole chunks sized against the card
 * (pool_growth, src/cuda/granularity.h: 32 MiB on the H100 and H200). So a
 * pool is charged what it reserves, re-read from the driver
 * (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) after every operation that can
 * change it, and an allocation reserves beforehand what the pool will grow
 * by. Near the budget the pool's next chunk may not fit while the memory
 * asked for does: the allocation is then made outside the pool, exactly
 * (cuMemAlloc: 2 MiB pages), and freed when the program frees it (after
 * its stream has finished with it, as the pool would). So a program gets
 * its budget to the 2 MiB page through a pool as through cuMemAlloc, and
 * the device never holds more than the budget for it: a chunk is never
 * let past the budget (where the driver grew a pool by more than the rule
 * said, that is undone, the stream synchronised, the pool trimmed back to
 * what was charged, and the allocation made outside it). Pool operations
 * are serialised here so that each settles alone. */
#include "driver_memory.h"
#include "interposer.h"

#include "../util/parse.h"
#include "../util/report.h"

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
 * grew past the budget (nothing of it charged: the caller undoes its
 * operation). */
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

/* The stream as the driver reads it: a _ptsz entry point's NULL is the
 * calling thread's per-thread stream. */
static CUstream stream_of(CUstream s, bool ptsz) { return !s && ptsz ? CU_STREAM_PER_THREAD : s; }

/* A stream being captured into a graph: an allocation on it is a graph
 * node, which no memory outside the pool can stand for. */
static bool capturing(CUstream s)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    return real.cuStreamIsCapturing && real.cuStreamIsCapturing(s, &status) == CUDA_SUCCESS &&
           status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* The allocation made outside the pool, exactly: the pool's next chunk
 * does not fit in the budget, what was asked may. Charged and remembered
 * as a stream-ordered allocation, which cuMemFreeAsync gives back. */
static CUresult outside_pool(const char *name, int dev, CUdeviceptr *dptr, size_t bytesize,
                             CUstream s)
{
    uint64_t charge = device_charge(bytesize);
    if (capturing(s) || !real.cuMemAlloc_v2 || budget_reserve(dev, charge) != 0) {
        governed_refusal(dev, RECORD_POOL, charge, (uintptr_t)s, name, 0);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = real.cuMemAlloc_v2(dptr, bytesize);
    if (rc != CUDA_SUCCESS) {
        budget_release(dev, charge);
        return rc;
    }
    budget_commit(dev, *dptr, charge, CHARGE_ASYNC);
    record_alloc(RECORD_POOL, dev, *dptr, charge, (uintptr_t)s);
    return CUDA_SUCCESS;
}

/* The pool grew past what was reserved and the budget cannot hold the
 * rest: the allocation is undone, the pool trimmed back to what it was
 * charged (once the stream has done the free), settled. */
static void undo_growth(struct pool_charge *pc, uint64_t grow, CUdeviceptr p, CUstream s,
                        PFN_cuMemFreeAsync undo)
{
    vlog(LOG_DEBUG, "device %d: a stream-ordered pool grew more than its %s chunks would; "
         "given back", pc->dev, format_size(POOL_CHUNK).text);
    undo(p, s);
    if (real.cuStreamSynchronize)
        real.cuStreamSynchronize(s);
    if (real.cuMemPoolTrimTo)
        real.cuMemPoolTrimTo(pc->pool, pc->charged + grow);
    if (pool_settle(pc, grow, s) != 0)
        vlog(LOG_WARN, "device %d: a stream-ordered pool holds %s more than its budget after "
             "being trimmed", pc->dev,
             format_size(pool_attr(pc->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) -
                         pc->charged).text);
}

static CUresult pool_alloc(const char *name, CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                           CUstream s, bool ptsz, PFN_cuMemAllocFromPoolAsync from_pool,
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
    /* What it holds now (it may have given memory back at a synchronize),
     * then what it will grow by for this allocation. */
    pool_settle(pc, 0, s);
    uint64_t grow = pool_growth(pc->charged, pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT),
                                device_charge(bytesize), POOL_CHUNK);
    CUresult rc;
    if (grow && budget_try_reserve(dev, grow) != 0) {
        rc = outside_pool(name, dev, dptr, bytesize, stream_of(s, ptsz));
    } else if ((rc = from_pool ? from_pool(dptr, bytesize, pool, s)
                               : from_default(dptr, bytesize, s)) != CUDA_SUCCESS) {
        budget_release(dev, grow);
    } else if (pool_settle(pc, grow, s) != 0) {
        undo_growth(pc, grow, *dptr, stream_of(s, ptsz), undo);
        rc = outside_pool(name, dev, dptr, bytesize, stream_of(s, ptsz));
    }
    pool_unlock();
    return rc;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s)
{
    need_real();
    return pool_alloc("cuMemAllocAsync", dptr, bytesize, NULL, s, false, NULL,
                      real.cuMemAllocAsync, real.cuMemFreeAsync);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream s)
{
    need_real();
    return pool_alloc("cuMemAllocAsync", dptr, bytesize, NULL, s, true, NULL,
                      real.cuMemAllocAsync_ptsz, real.cuMemFreeAsync_ptsz);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream s)
{
    need_real();
    if (!pool)
        return real.cuMemAllocFromPoolAsync(dptr, bytesize, pool, s);
    return pool_alloc("cuMemAllocFromPoolAsync", dptr, bytesize, pool, s, false,
                      real.cuMemAllocFromPoolAsync, NULL, real.cuMemFreeAsync);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream s)
{
    need_real();
    if (!pool)
        return real.cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, s);
    return pool_alloc("cuMemAllocFromPoolAsync", dptr, bytesize, pool, s, true,
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

/* A free: of an allocation made outside its pool, once the stream has done
 * the work before it (as the pool would reuse it); else the pool's. */
static CUresult free_async(CUdeviceptr p, CUstream s, bool ptsz, PFN_cuMemFreeAsync driver)
{
    int dev;
    uint64_t bytes;
    enum charge_kind kind;
    bool outside = p && budget_forget(p, &dev, &bytes, &kind);
    if (outside && kind != CHARGE_ASYNC) {
        budget_commit(dev, p, bytes, kind); /* not stream-ordered: the driver's say */
        outside = false;
    }
    if (outside) {
        CUresult rc = real.cuStreamSynchronize ? real.cuStreamSynchronize(stream_of(s, ptsz))
                                               : CUDA_SUCCESS;
        if (rc == CUDA_SUCCESS) {
            /* Recorded before the address can be given out again (governed_free). */
            record_free(RECORD_POOL, dev, p, bytes, (uintptr_t)s);
            if ((rc = real.cuMemFree_v2(p)) != CUDA_SUCCESS)
                record_alloc(RECORD_POOL, dev, p, bytes, (uintptr_t)s);
        }
        if (rc != CUDA_SUCCESS) {
            budget_commit(dev, p, bytes, CHARGE_ASYNC); /* still held */
            return rc;
        }
        budget_release(dev, bytes);
        return CUDA_SUCCESS;
    }
    return settled(driver(p, s), s);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    need_real();
    return free_async(dptr, s, false, real.cuMemFreeAsync);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
    need_real();
    return free_async(dptr, s, true, real.cuMemFreeAsync_ptsz);
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
