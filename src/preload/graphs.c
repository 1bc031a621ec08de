/* graphs: memory of graph allocation nodes, reserved by the driver at
 * upload or launch and kept until cuDeviceGraphMemTrim. */
#include "driver_memory.h"
#include "interposer.h"

/* ---------------------------------------------------------- graph memory */

/* A graph's allocation nodes take memory when the executable graph is
 * uploaded or launched, from a per-device graph reservation that stays
 * until cuDeviceGraphMemTrim. So: remember what each graph's nodes ask for,
 * reserve what a launch may add before launching, then settle each device
 * to CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT. */
#define MAX_GRAPHS 1024
static pthread_mutex_t graph_mu = PTHREAD_MUTEX_INITIALIZER;
/* Its holder may have the driver take memory not charged yet: no reading
 * of the driver's part may count that (driver_memory.h). */
static void graph_lock(void)
{
    pthread_mutex_lock(&graph_mu);
    driver_memory_enter();
}
static void graph_unlock(void)
{
    driver_memory_leave();
    pthread_mutex_unlock(&graph_mu);
}
static struct graph_need {
    void *key; /* a CUgraph, or a CUgraphExec instantiated from one */
    int dev;
    uint64_t bytes;
} graphs[MAX_GRAPHS];
static int ngraphs;
static uint64_t graph_charged[BUDGET_MAX_DEVICES];

static struct graph_need *graph_find(void *key)
{
    for (int i = 0; i < ngraphs; i++)
        if (graphs[i].key == key)
            return &graphs[i];
    return NULL;
}

static struct graph_need *graph_add(void *key, int dev)
{
    struct graph_need *g = graph_find(key);
    if (!g && ngraphs < MAX_GRAPHS) {
        g = &graphs[ngraphs++];
        *g = (struct graph_need){key, dev, 0};
    }
    return g;
}

/* Caller holds graph_mu. `pre` was reserved for this operation, on
 * `stream`. */
static void graph_settle(int dev, uint64_t pre, CUstream stream)
{
    cuuint64_t now = 0;
    if (!real.cuDeviceGetGraphMemAttribute ||
        real.cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &now) !=
            CUDA_SUCCESS)
        now = graph_charged[dev] + pre;
    uint64_t had = graph_charged[dev] + pre;
    if (now < had)
        budget_release(dev, had - now);
    else if (now > had && budget_reserve_held(dev, now - had) != 0)
        /* The launch already happened: it cannot be refused any more. */
        budget_report_oom(dev, now - had, "graph launch (over budget after the fact)");
    record_resize(RECORD_GRAPH, dev, (uint64_t)dev + 1, graph_charged[dev], now, (uintptr_t)stream);
    graph_charged[dev] = now;
}

EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                       size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS *params)
{
    need_real();
    pthread_once(&budget_once, setup_budgets);
    if (!params || params->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        !budget_limited(params->poolProps.location.id))
        return real.cuGraphAddMemAllocNode(node, g, deps, ndeps, params);
    int dev = params->poolProps.location.id;
    uint64_t charge = device_charge(params->bytesize);
    /* A node larger than the whole budget could never be launched: refused
     * now, and counted as every refusal is (budget_reserve reserves
     * nothing for it, and counts it in the command's figures). */
    if (charge > budget_limit(dev) && budget_reserve(dev, charge) != 0) {
        governed_refusal(dev, RECORD_GRAPH, charge, 0, "cuGraphAddMemAllocNode", 0);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = real.cuGraphAddMemAllocNode(node, g, deps, ndeps, params);
    if (rc == CUDA_SUCCESS) {
        graph_lock();
        struct graph_need *n = graph_add(g, dev);
        if (n)
            n->bytes += charge;
        graph_unlock();
    }
    return rc;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g, unsigned long long flags)
{
    need_real();
    CUresult rc = real.cuGraphInstantiateWithFlags(exec, g, flags);
    if (rc != CUDA_SUCCESS || !exec)
        return rc;
    graph_lock();
    struct graph_need *n = graph_find(g);
    if (n) {
        struct graph_need copy = *n;
        struct graph_need *e = graph_add(*exec, copy.dev);
        if (e)
            e->bytes = copy.bytes;
    }
    graph_unlock();
    return rc;
}

static CUresult graph_run(const char *name, CUgraphExec e, CUstream s, PFN_cuGraphLaunch run)
{
    graph_lock();
    struct graph_need *n = graph_find(e);
    if (!n) {
        graph_unlock();
        return run(e, s);
    }
    int dev = n->dev;
    uint64_t pre = n->bytes > graph_charged[dev] ? n->bytes - graph_charged[dev] : 0;
    if (pre && budget_reserve(dev, pre) != 0) {
        graph_unlock();
        governed_refusal(dev, RECORD_GRAPH, pre, (uintptr_t)s, name, 0);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = run(e, s);
    if (rc != CUDA_SUCCESS)
        budget_release(dev, pre);
    else
        graph_settle(dev, pre, s);
    graph_unlock();
    return rc;
}

EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
    need_real();
    return graph_run("cuGraphLaunch", e, s, real.cuGraphLaunch);
}

EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s)
{
    need_real();
    return graph_run("cuGraphLaunch", e, s, real.cuGraphLaunch_ptsz);
}

EXPORT CUresult cuGraphUpload(CUgraphExec e, CUstream s)
{
    need_real();
    return graph_run("cuGraphUpload", e, s, real.cuGraphUpload);
}

EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec e, CUstream s)
{
    need_real();
    return graph_run("cuGraphUpload", e, s, real.cuGraphUpload_ptsz);
}

EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev)
{
    need_real();
    CUresult rc = real.cuDeviceGraphMemTrim(dev);
    if (rc == CUDA_SUCCESS && dev >= 0 && dev < BUDGET_MAX_DEVICES && budget_limited(dev)) {
        graph_lock();
        graph_settle(dev, 0, NULL);
        graph_unlock();
    }
    return rc;
}
