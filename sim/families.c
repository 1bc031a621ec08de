/* The simulated driver's other ways of consuming device memory:
 * stream-ordered pools, virtual memory management and arrays. Each charges
 * the shared occupancy the way a device would lose memory: pools by their
 * reservation (which grows in 2 MiB steps and shrinks to the release
 * threshold when memory is freed), VMM by the physical handle (released
 * after the last unmap and the release), arrays by their padded layout.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../src/cuda/array_layout.h"
#include "../src/cuda/granularity.h"
#include "../src/util/addrmap.h"
#include "occupancy.h"
#include "sim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* ---------------------------------------------------------------- pools */

struct CUmemPoolHandle_st {
    int dev;
    bool is_default;
    uint64_t reserved, used, threshold, reserved_high, used_high;
};

struct async_alloc {
    size_t bytes;
    uint64_t charge;
    struct CUmemPoolHandle_st *pool;
};

static struct CUmemPoolHandle_st default_pool[SIM_MAX_DEVICES];
static CUmemoryPool current_pool[SIM_MAX_DEVICES];
static struct addrmap async_allocs; /* pointer -> struct async_alloc * */

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
    uint64_t floor = (p->used + DEVICE_PAGE - 1) & ~(DEVICE_PAGE - 1);
    keep = (keep + DEVICE_PAGE - 1) & ~(DEVICE_PAGE - 1);
    if (keep < floor)
        keep = floor;
    if (p->reserved > keep) {
        occ_uncharge(p->dev, p->reserved - keep);
        p->reserved = keep;
    }
}

static CUresult alloc_from(CUdeviceptr *dptr, size_t bytes, CUmemoryPool p)
{
    if (!dptr || !bytes || !p)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t charge = device_charge(bytes);
    struct async_alloc *a = malloc(sizeof *a);
    void *mem = a ? sim_map(bytes) : NULL;
    if (!mem) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&mu);
    if (p->used + charge > p->reserved) {
        uint64_t grow = (p->used + charge - p->reserved + DEVICE_PAGE - 1) & ~(DEVICE_PAGE - 1);
        if (occ_charge(p->dev, grow, sim_device_total(p->dev)) != 0) {
            pthread_mutex_unlock(&mu);
            sim_unmap(mem, bytes);
            free(a);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        p->reserved += grow;
        if (p->reserved > p->reserved_high)
            p->reserved_high = p->reserved;
    }
    p->used += charge;
    if (p->used > p->used_high)
        p->used_high = p->used;
    *a = (struct async_alloc){bytes, charge, p};
    addrmap_put(&async_allocs, (uint64_t)(uintptr_t)mem, (uint64_t)(uintptr_t)a);
    pthread_mutex_unlock(&mu);
    *dptr = (CUdeviceptr)(uintptr_t)mem;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream hStream)
{
    (void)hStream;
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    return alloc_from(dptr, bytesize, pool);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    (void)hStream;
    int dev;
    CUresult rc = sim_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&mu);
    CUmemoryPool p = pool_of_device(dev);
    pthread_mutex_unlock(&mu);
    return alloc_from(dptr, bytesize, p);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    (void)hStream;
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    uint64_t v;
    pthread_mutex_lock(&mu);
    if (!addrmap_take(&async_allocs, dptr, &v)) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct async_alloc *a = (struct async_alloc *)(uintptr_t)v;
    a->pool->used -= a->charge;
    pool_release_to(a->pool, a->pool->threshold);
    pthread_mutex_unlock(&mu);
    sim_unmap((void *)(uintptr_t)dptr, a->bytes);
    free(a);
    return CUDA_SUCCESS;
}

/* The per-thread-default-stream variants: the simulator has one default
 * stream, so they behave alike, but they are distinct exports as in the
 * driver, for an interposer to govern separately. */
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return cuMemAllocAsync(dptr, bytesize, hStream);
}
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return cuMemFreeAsync(dptr, hStream);
}
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream hStream)
{
    return cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream);
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
    occ_uncharge(pool->dev, pool->reserved);
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

/* -------------------------------------------- virtual memory management */

struct physical {
    int dev; /* -1: host memory, not charged to a device */
    size_t size;
    int refs; /* the handle until released, plus one per mapping */
};

static struct addrmap mappings; /* mapped address -> struct physical * */

static void physical_unref(struct physical *ph)
{
    if (--ph->refs == 0) {
        if (ph->dev >= 0)
            occ_uncharge(ph->dev, ph->size);
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
    if (dev >= 0 && occ_charge(dev, size, sim_device_total(dev)) != 0) {
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
    pthread_mutex_lock(&mu);
    int rc = addrmap_get(&mappings, ptr, NULL) ? -1 : addrmap_put(&mappings, ptr, handle);
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
    uint64_t v;
    pthread_mutex_lock(&mu);
    bool found = addrmap_take(&mappings, ptr, &v);
    if (found)
        physical_unref((struct physical *)(uintptr_t)v);
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
    if (rc == CUDA_SUCCESS && occ_charge(dev, *bytes, sim_device_total(dev)) != 0)
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
        occ_uncharge(a.dev, a.bytes);
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
    occ_uncharge(hArray->dev, hArray->bytes);
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
        occ_uncharge(m.dev, m.bytes);
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
    occ_uncharge(h->dev, h->bytes);
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

static uint64_t graph_reserved[SIM_MAX_DEVICES], graph_reserved_high[SIM_MAX_DEVICES];

void sim_families_after_fork(void)
{
    pthread_mutex_init(&mu, NULL);
    memset(graph_reserved, 0, sizeof graph_reserved);
    memset(current_pool, 0, sizeof current_pool);
    addrmap_destroy(&async_allocs);
    addrmap_destroy(&mappings);
}

/* Same signatures as the driver's, checked by the compiler. */
#define SAME_TYPE(fn, pfn) _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), pfn), #fn)
SAME_TYPE(cuMemAllocAsync, PFN_cuMemAllocAsync);
SAME_TYPE(cuMemAllocAsync_ptsz, PFN_cuMemAllocAsync);
SAME_TYPE(cuMemFreeAsync, PFN_cuMemFreeAsync);
SAME_TYPE(cuMemFreeAsync_ptsz, PFN_cuMemFreeAsync);
SAME_TYPE(cuMemAllocFromPoolAsync, PFN_cuMemAllocFromPoolAsync);
SAME_TYPE(cuMemAllocFromPoolAsync_ptsz, PFN_cuMemAllocFromPoolAsync);
SAME_TYPE(cuDeviceGetDefaultMemPool, PFN_cuDeviceGetDefaultMemPool);
SAME_TYPE(cuDeviceGetMemPool, PFN_cuDeviceGetMemPool);
SAME_TYPE(cuDeviceSetMemPool, PFN_cuDeviceSetMemPool);
SAME_TYPE(cuMemPoolCreate, PFN_cuMemPoolCreate);
SAME_TYPE(cuMemPoolDestroy, PFN_cuMemPoolDestroy);
SAME_TYPE(cuMemPoolTrimTo, PFN_cuMemPoolTrimTo);
SAME_TYPE(cuMemPoolGetAttribute, PFN_cuMemPoolGetAttribute);
SAME_TYPE(cuMemPoolSetAttribute, PFN_cuMemPoolSetAttribute);
SAME_TYPE(cuMemCreate, PFN_cuMemCreate);
SAME_TYPE(cuMemRelease, PFN_cuMemRelease);
SAME_TYPE(cuMemGetAllocationGranularity, PFN_cuMemGetAllocationGranularity);
SAME_TYPE(cuMemAddressReserve, PFN_cuMemAddressReserve);
SAME_TYPE(cuMemAddressFree, PFN_cuMemAddressFree);
SAME_TYPE(cuMemMap, PFN_cuMemMap);
SAME_TYPE(cuMemUnmap, PFN_cuMemUnmap);
SAME_TYPE(cuMemSetAccess, PFN_cuMemSetAccess);
SAME_TYPE(cuArrayCreate_v2, PFN_cuArrayCreate_v2);
SAME_TYPE(cuArray3DCreate_v2, PFN_cuArray3DCreate_v2);
SAME_TYPE(cuArrayDestroy, PFN_cuArrayDestroy);
SAME_TYPE(cuArrayGetMemoryRequirements, PFN_cuArrayGetMemoryRequirements);
SAME_TYPE(cuMipmappedArrayCreate, PFN_cuMipmappedArrayCreate);
SAME_TYPE(cuMipmappedArrayDestroy, PFN_cuMipmappedArrayDestroy);
SAME_TYPE(cuMipmappedArrayGetMemoryRequirements, PFN_cuMipmappedArrayGetMemoryRequirements);

/* ---------------------------------------------------------- graph memory */

/* A graph's memory is reserved per device when an executable graph is
 * uploaded or launched, enough for its allocation nodes, and kept for
 * reuse until cuDeviceGraphMemTrim (which the simulator may always honour:
 * its graphs finish at once). Allocations a graph leaves live (no free
 * node) stay used until freed with cuMemFreeAsync or cuMemFree. */
struct CUgraph_st {
    uint64_t alloc_bytes, freed_bytes;
};
struct CUgraphNode_st {
    int unused;
};
struct CUgraphExec_st {
    int dev;
    uint64_t need; /* reservation the executable needs */
};

static struct CUgraphNode_st graph_node;

EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!phGraph || flags)
        return CUDA_ERROR_INVALID_VALUE;
    return (*phGraph = calloc(1, sizeof **phGraph)) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuGraphDestroy(CUgraph g)
{
    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    free(g);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                       size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS *params)
{
    (void)deps, (void)ndeps;
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!node || !g || !params || !params->bytesize ||
        params->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        sim_check_device(params->poolProps.location.id) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    /* The address is fixed now; the memory behind it comes at launch. */
    void *va = mmap(NULL, params->bytesize, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (va == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    params->dptr = (CUdeviceptr)(uintptr_t)va;
    g->alloc_bytes += device_charge(params->bytesize);
    *node = &graph_node;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                      size_t ndeps, CUdeviceptr dptr)
{
    (void)deps, (void)ndeps;
    if (!node || !g || !dptr)
        return CUDA_ERROR_INVALID_VALUE;
    *node = &graph_node;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g, unsigned long long flags)
{
    (void)flags;
    int dev;
    CUresult rc = sim_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!exec || !g)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(*exec = malloc(sizeof **exec)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    (*exec)->dev = dev;
    (*exec)->need = g->alloc_bytes;
    return CUDA_SUCCESS;
}

static CUresult graph_reserve(CUgraphExec e)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    CUresult rc = CUDA_SUCCESS;
    if (e->need > graph_reserved[e->dev]) {
        uint64_t grow = e->need - graph_reserved[e->dev];
        if (occ_charge(e->dev, grow, sim_device_total(e->dev)) != 0)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else
            graph_reserved[e->dev] = e->need;
        if (graph_reserved[e->dev] > graph_reserved_high[e->dev])
            graph_reserved_high[e->dev] = graph_reserved[e->dev];
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

EXPORT CUresult cuGraphUpload(CUgraphExec e, CUstream s)
{
    (void)s;
    return graph_reserve(e);
}
EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec e, CUstream s) { return cuGraphUpload(e, s); }
EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
    (void)s;
    return graph_reserve(e);
}
EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s) { return cuGraphLaunch(e, s); }

EXPORT CUresult cuGraphExecDestroy(CUgraphExec e)
{
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    free(e);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void *value)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = graph_reserved[dev]; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = graph_reserved_high[dev]; break;
    default: rc = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&mu);
    occ_uncharge(dev, graph_reserved[dev]);
    graph_reserved[dev] = 0;
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

SAME_TYPE(cuGraphCreate, PFN_cuGraphCreate);
SAME_TYPE(cuGraphDestroy, PFN_cuGraphDestroy);
SAME_TYPE(cuGraphAddMemAllocNode, PFN_cuGraphAddMemAllocNode);
SAME_TYPE(cuGraphAddMemFreeNode, PFN_cuGraphAddMemFreeNode);
SAME_TYPE(cuGraphInstantiateWithFlags, PFN_cuGraphInstantiateWithFlags);
SAME_TYPE(cuGraphLaunch, PFN_cuGraphLaunch);
SAME_TYPE(cuGraphLaunch_ptsz, PFN_cuGraphLaunch);
SAME_TYPE(cuGraphUpload, PFN_cuGraphUpload);
SAME_TYPE(cuGraphUpload_ptsz, PFN_cuGraphUpload);
SAME_TYPE(cuGraphExecDestroy, PFN_cuGraphExecDestroy);
SAME_TYPE(cuDeviceGetGraphMemAttribute, PFN_cuDeviceGetGraphMemAttribute);
SAME_TYPE(cuDeviceGraphMemTrim, PFN_cuDeviceGraphMemTrim);
