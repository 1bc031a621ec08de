#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../src/cuda/granularity.h"
#include "sim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t graph_reserved[SIM_MAX_DEVICES], graph_reserved_high[SIM_MAX_DEVICES];

/* graphs: graph memory. A graph's memory is reserved per device when an executable graph is
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
    struct sim_range r = {(uint64_t)(uintptr_t)va, params->bytesize, RANGE_GRAPH,
                          params->poolProps.location.id, 0, 0, NULL, g};
    sim_current_context(&r.ctx);
    if (sim_range_add(&r) != 0) {
        munmap(va, params->bytesize);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
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
        if (sim_charge(e->dev, grow) != CUDA_SUCCESS)
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
EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
    (void)s;
    return graph_reserve(e);
}

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
    sim_uncharge(dev, graph_reserved[dev]);
    graph_reserved[dev] = 0;
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

SAME_TYPE(cuGraphCreate);
SAME_TYPE(cuGraphDestroy);
SAME_TYPE(cuGraphAddMemAllocNode);
SAME_TYPE(cuGraphAddMemFreeNode);
SAME_TYPE(cuGraphInstantiateWithFlags);
SAME_TYPE(cuGraphLaunch);
SAME_TYPE(cuGraphUpload);
SAME_TYPE(cuGraphExecDestroy);
SAME_TYPE(cuDeviceGetGraphMemAttribute);
SAME_TYPE(cuDeviceGraphMemTrim);
