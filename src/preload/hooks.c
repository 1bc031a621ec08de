/* hooks: the CUDA driver entry points the interposer governs.
 *
 * libvram-preload.so is loaded with LD_PRELOAD. Programs reach the driver
 * three ways, and each is covered:
 *   - linked with -lcuda: the dynamic linker binds cuMemAlloc_v2 & co. to
 *     our exports, which carry the driver's exact versioned names;
 *   - dlsym(libcuda, "cuMemAlloc_v2"): our dlsym asks the real one, then
 *     swaps in a hook only if the answer *is* the driver function we wrap;
 *   - cuGetProcAddress(_v2), which the CUDA runtime uses for everything:
 *     the real resolver answers first (honouring the requested CUDA version,
 *     the per-thread-stream flag and the symbol status), then the same
 *     identity swap. Nothing is guessed from names, so an entry point we do
 *     not wrap (or a _ptsz variant we do not govern) passes through exactly
 *     as the driver gave it.
 *
 * dlsym and cuGetProcAddress do no work beyond the lookup: the table of
 * real functions is filled on the first lookup of a governed name, and
 * budgets are read on the first governed call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../cuda/cuda_abi.h"
#include "../cuda/array_layout.h"
#include "../cuda/granularity.h"
#include "../cuda/nvml_abi.h"
#include "budget.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* Tells libvram, in the same process, that the environment's budget is
 * already enforced here: the device it sees *is* the budget, and applying
 * VRAM_MEMORY_LIMIT/FRACTION again would take a fraction of a fraction. */
EXPORT const int vram_preload_active = 1;

/* ------------------------------------------------------ the real driver */

typedef void *(*dlsym_fn)(void *, const char *);
static _Atomic(dlsym_fn) real_dlsym_ptr;

/* The dlsym path can run inside a sanitizer's own start-up (ASan looks up
 * its interceptors' targets with dlsym before its shadow memory exists), so
 * it is not instrumented and calls nothing of libc but dlvsym. */
#define UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined", "thread"), noinline))

UNINSTRUMENTED static dlsym_fn real_dlsym(void)
{
    dlsym_fn f = atomic_load_explicit(&real_dlsym_ptr, memory_order_acquire);
    if (!f) {
        /* dlvsym is not ours, so this cannot recurse into our dlsym. */
        f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!f)
#if defined(__aarch64__)
            f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
#else
            f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
#endif
        atomic_store_explicit(&real_dlsym_ptr, f, memory_order_release);
    }
    return f;
}

static struct {
    PFN_cuCtxGetDevice cuCtxGetDevice;
    PFN_cuDeviceTotalMem_v2 cuDeviceTotalMem_v2;
    PFN_cuGetProcAddress cuGetProcAddress;
    PFN_cuGetProcAddress_v2 cuGetProcAddress_v2;
    PFN_cuMemAlloc_v2 cuMemAlloc_v2;
    PFN_cuMemAlloc cuMemAlloc;
    PFN_cuMemAllocPitch_v2 cuMemAllocPitch_v2;
    PFN_cuMemAllocPitch cuMemAllocPitch;
    PFN_cuMemAllocManaged cuMemAllocManaged;
    PFN_cuMemFree_v2 cuMemFree_v2;
    PFN_cuMemFree cuMemFree;
    PFN_cuMemGetInfo_v2 cuMemGetInfo_v2;
    PFN_cuMemGetInfo cuMemGetInfo;
    PFN_cuDeviceTotalMem cuDeviceTotalMem;
    PFN_cuMemAllocAsync cuMemAllocAsync, cuMemAllocAsync_ptsz;
    PFN_cuMemAllocFromPoolAsync cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz;
    PFN_cuMemFreeAsync cuMemFreeAsync, cuMemFreeAsync_ptsz;
    PFN_cuMemPoolTrimTo cuMemPoolTrimTo;
    PFN_cuMemPoolDestroy cuMemPoolDestroy;
    PFN_cuMemPoolSetAttribute cuMemPoolSetAttribute;
    PFN_cuMemCreate cuMemCreate;
    PFN_cuMemRelease cuMemRelease;
    PFN_cuMemMap cuMemMap;
    PFN_cuMemUnmap cuMemUnmap;
    PFN_cuArrayCreate_v2 cuArrayCreate_v2;
    PFN_cuArray3DCreate_v2 cuArray3DCreate_v2;
    PFN_cuArrayDestroy cuArrayDestroy;
    PFN_cuMipmappedArrayCreate cuMipmappedArrayCreate;
    PFN_cuMipmappedArrayDestroy cuMipmappedArrayDestroy;
    /* Called, not governed. */
    PFN_cuDeviceGetMemPool cuDeviceGetMemPool;
    PFN_cuMemPoolGetAttribute cuMemPoolGetAttribute;
    PFN_cuArrayGetMemoryRequirements cuArrayGetMemoryRequirements;
    PFN_cuMipmappedArrayGetMemoryRequirements cuMipmappedArrayGetMemoryRequirements;
    PFN_cuGraphAddMemAllocNode cuGraphAddMemAllocNode;
    PFN_cuGraphInstantiateWithFlags cuGraphInstantiateWithFlags;
    PFN_cuGraphLaunch cuGraphLaunch, cuGraphLaunch_ptsz;
    PFN_cuGraphUpload cuGraphUpload, cuGraphUpload_ptsz;
    PFN_cuDeviceGraphMemTrim cuDeviceGraphMemTrim;
    PFN_cuDeviceGetGraphMemAttribute cuDeviceGetGraphMemAttribute;
    PFN_cuInit cuInit;
    PFN_cuDeviceGetCount cuDeviceGetCount;
    PFN_cuDeviceGetUuid cuDeviceGetUuid;
    PFN_nvmlDeviceGetMemoryInfo nvmlDeviceGetMemoryInfo;
    PFN_nvmlDeviceGetMemoryInfo_v2 nvmlDeviceGetMemoryInfo_v2;
    PFN_nvmlDeviceGetUUID nvmlDeviceGetUUID;
} real;

/* Our hooks, declared so the table below can name them. */
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize);
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t w, size_t h,
                                   unsigned int elem);
EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int w,
                                unsigned int h, unsigned int elem);
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr);
EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr);
EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total);
EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total);
EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev);
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *status);
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s);
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream s);
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream s);
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream s);
EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s);
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);
EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep);
EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool);
EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags);
EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags);
EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d);
EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d);
EXPORT CUresult cuArrayDestroy(CUarray a);
EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                       unsigned int levels);
EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray m);
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m);
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m);
EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                       size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS *params);
EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g, unsigned long long flags);
EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s);
EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s);
EXPORT CUresult cuGraphUpload(CUgraphExec e, CUstream s);
EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec e, CUstream s);
EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev);

/* Each governed entry point: its exact exported name, where its real
 * address goes, and our hook. */
static const struct governed {
    const char *name;
    void **real;
    void *hook;
    int nvml; /* found in libnvidia-ml.so.1, not libcuda.so.1 */
} governed[] = {
#define G(fn) {#fn, (void **)&real.fn, (void *)fn, 0}
#define N(fn) {#fn, (void **)&real.fn, (void *)fn, 1}
    G(cuMemAlloc_v2),     G(cuMemAlloc),        G(cuMemAllocPitch_v2), G(cuMemAllocPitch),
    G(cuMemAllocManaged), G(cuMemFree_v2),      G(cuMemFree),          G(cuMemGetInfo_v2),
    G(cuMemGetInfo),      G(cuDeviceTotalMem_v2), G(cuDeviceTotalMem),  G(cuGetProcAddress),
    G(cuGetProcAddress_v2),
    G(cuMemAllocAsync),   G(cuMemAllocAsync_ptsz), G(cuMemAllocFromPoolAsync),
    G(cuMemAllocFromPoolAsync_ptsz), G(cuMemFreeAsync), G(cuMemFreeAsync_ptsz),
    G(cuMemPoolTrimTo),   G(cuMemPoolDestroy),  G(cuMemPoolSetAttribute),
    G(cuMemCreate),       G(cuMemRelease),      G(cuMemMap),           G(cuMemUnmap),
    G(cuArrayCreate_v2),  G(cuArray3DCreate_v2), G(cuArrayDestroy),
    G(cuMipmappedArrayCreate), G(cuMipmappedArrayDestroy),
    G(cuGraphAddMemAllocNode), G(cuGraphInstantiateWithFlags), G(cuGraphLaunch),
    G(cuGraphLaunch_ptsz), G(cuGraphUpload), G(cuGraphUpload_ptsz), G(cuDeviceGraphMemTrim),
    N(nvmlDeviceGetMemoryInfo), N(nvmlDeviceGetMemoryInfo_v2),
#undef G
#undef N
};
#define NGOVERNED (sizeof governed / sizeof *governed)

static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static void *real_lib;

static void load_real(void)
{
    /* The driver is normally loaded already (we are asked because the
     * program uses it); RTLD_NOLOAD avoids loading it on our own account. */
    real_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!real_lib)
        real_lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!real_lib)
        return;
    dlsym_fn sym = real_dlsym();
    for (size_t i = 0; i < NGOVERNED; i++)
        if (!governed[i].nvml)
            *governed[i].real = sym(real_lib, governed[i].name);
    real.cuInit = (PFN_cuInit)sym(real_lib, "cuInit");
    real.cuDeviceGetGraphMemAttribute =
        (PFN_cuDeviceGetGraphMemAttribute)sym(real_lib, "cuDeviceGetGraphMemAttribute");
    real.cuDeviceGetCount = (PFN_cuDeviceGetCount)sym(real_lib, "cuDeviceGetCount");
    real.cuDeviceGetUuid = (PFN_cuDeviceGetUuid)sym(real_lib, "cuDeviceGetUuid");
    real.cuCtxGetDevice = (PFN_cuCtxGetDevice)sym(real_lib, "cuCtxGetDevice");
    real.cuDeviceGetMemPool = (PFN_cuDeviceGetMemPool)sym(real_lib, "cuDeviceGetMemPool");
    real.cuMemPoolGetAttribute = (PFN_cuMemPoolGetAttribute)sym(real_lib, "cuMemPoolGetAttribute");
    real.cuArrayGetMemoryRequirements =
        (PFN_cuArrayGetMemoryRequirements)sym(real_lib, "cuArrayGetMemoryRequirements");
    real.cuMipmappedArrayGetMemoryRequirements = (PFN_cuMipmappedArrayGetMemoryRequirements)sym(
        real_lib, "cuMipmappedArrayGetMemoryRequirements");
}

static inline void need_real(void) { pthread_once(&real_once, load_real); }

/* NVML is resolved separately, once the program has loaded it (until then
 * each NVML lookup tries again): the interposer never loads NVML on a
 * program's behalf. */
static atomic_bool nvml_loaded;
static pthread_mutex_t nvml_load_mu = PTHREAD_MUTEX_INITIALIZER;

static void need_nvml(void)
{
    if (atomic_load_explicit(&nvml_loaded, memory_order_acquire))
        return;
    pthread_mutex_lock(&nvml_load_mu);
    void *lib = nvml_loaded ? NULL : dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib) {
        dlsym_fn sym = real_dlsym();
        for (size_t i = 0; i < NGOVERNED; i++)
            if (governed[i].nvml)
                *governed[i].real = sym(lib, governed[i].name);
        real.nvmlDeviceGetUUID = (PFN_nvmlDeviceGetUUID)sym(lib, "nvmlDeviceGetUUID");
        atomic_store_explicit(&nvml_loaded, true, memory_order_release);
    }
    pthread_mutex_unlock(&nvml_load_mu);
}

/* The hook for a real driver function, or the function itself. */
static void *swap(void *p)
{
    if (!p)
        return p;
    need_real();
    for (size_t i = 0; i < NGOVERNED; i++)
        if (*governed[i].real == p)
            return governed[i].hook;
    return p;
}

/* -------------------------------------------------------------- budgets */

static uint64_t physical_total(int dev)
{
    size_t t = 0;
    if (real.cuDeviceTotalMem_v2 && real.cuDeviceTotalMem_v2(&t, dev) != CUDA_SUCCESS)
        t = 0;
    return t;
}

static pthread_once_t budget_once = PTHREAD_ONCE_INIT;

static void after_fork_child(void) { budget_after_fork(); }

static void setup_budgets(void)
{
    need_real();
    budget_setup(physical_total);
    pthread_atfork(NULL, NULL, after_fork_child);
}

/* The device of the calling thread's current context, if a budget governs
 * it; -1 means "not ours: pass through". */
static int governed_device(void)
{
    pthread_once(&budget_once, setup_budgets);
    CUdevice dev;
    if (!real.cuCtxGetDevice || real.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return -1;
    return budget_limited(dev) ? dev : -1;
}

/* Reserve, call the driver, then commit or roll back: the budget is never
 * exceeded, not even for an instant, by any number of threads. */
#define GOVERNED_ALLOC(call_name, charge_expr, kind, driver_call, key_expr)                   \
    do {                                                                                      \
        int dev_ = governed_device();                                                         \
        if (dev_ < 0)                                                                         \
            return driver_call;                                                               \
        uint64_t charge_ = (charge_expr);                                                     \
        if (budget_reserve(dev_, charge_) != 0) {                                             \
            budget_report_oom(dev_, charge_, call_name);                                      \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                  \
        }                                                                                     \
        CUresult rc_ = driver_call;                                                           \
        if (rc_ == CUDA_SUCCESS)                                                              \
            budget_commit(dev_, (key_expr), charge_, kind);                                   \
        else                                                                                  \
            budget_rollback(dev_, charge_);                                                   \
        return rc_;                                                                           \
    } while (0)

/* Frees: the driver decides; the charge comes back only if it agreed. */
static CUresult governed_free(uint64_t key, CUresult (*driver)(uint64_t))
{
    int dev;
    uint64_t bytes;
    enum charge_kind kind;
    if (!budget_forget(key, &dev, &bytes, &kind))
        return driver(key); /* not ours: the driver's answer, unchanged */
    CUresult rc = driver(key);
    if (rc == CUDA_SUCCESS)
        budget_release(dev, bytes);
    else
        budget_commit(dev, key, bytes, kind); /* still held */
    return rc;
}

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
        budget_report_oom(dev, bound, "cuMemAllocPitch");
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = real.cuMemAllocPitch_v2(dptr, pPitch, w, h, elem);
    if (rc != CUDA_SUCCESS) {
        budget_rollback(dev, bound);
        return rc;
    }
    uint64_t actual = device_charge((uint64_t)*pPitch * h);
    if (actual < bound)
        budget_rollback(dev, bound - actual);
    else if (actual > bound && budget_reserve(dev, actual - bound) != 0) {
        /* The driver padded more than any device we know; over budget. */
        real.cuMemFree_v2(*dptr);
        budget_rollback(dev, bound);
        budget_report_oom(dev, actual, "cuMemAllocPitch");
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    budget_commit(dev, *dptr, actual, CHARGE_PITCH);
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

/* ------------------------------------------------ stream-ordered pools */

/* A pool's cost to the device is its reservation, not the sum of its live
 * pointers: freed memory stays reserved up to the release threshold. So a
 * pool is charged what it reserves, re-read from the driver
 * (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) after every operation that can
 * change it. Pool operations are serialised here so each settles alone. */
#define MAX_POOLS 256
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
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
 * already reserved for this operation. Returns -1 if the pool grew past the
 * budget (the caller undoes its operation). */
static int pool_settle(struct pool_charge *pc, uint64_t pre)
{
    uint64_t now = pool_attr(pc->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
    uint64_t had = pc->charged + pre;
    if (now < had) {
        budget_release(pc->dev, had - now);
    } else if (now > had && budget_reserve(pc->dev, now - had) != 0) {
        budget_release(pc->dev, pre);
        return -1;
    }
    pc->charged = now;
    return 0;
}

static void settle_all_pools(void)
{
    for (int i = 0; i < npools; i++)
        pool_settle(&pools[i], 0);
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
    pthread_mutex_lock(&pool_mu);
    struct pool_charge *pc = pool_entry(pool, dev);
    if (!pc) {
        pthread_mutex_unlock(&pool_mu);
        budget_report_oom(dev, bytesize, name);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* Room the pool may need beyond what it holds free. */
    uint64_t charge = device_charge(bytesize);
    uint64_t idle = pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) -
                    pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
    uint64_t pre = charge > idle ? device_charge(charge - idle) : 0;
    if (pre && budget_reserve(dev, pre) != 0) {
        pthread_mutex_unlock(&pool_mu);
        budget_report_oom(dev, charge, name);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = from_pool ? from_pool(dptr, bytesize, pool, s) : from_default(dptr, bytesize, s);
    if (rc != CUDA_SUCCESS) {
        budget_rollback(dev, pre);
    } else if (pool_settle(pc, pre) != 0) {
        undo(*dptr, s);
        pool_settle(pc, 0);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        budget_report_oom(dev, charge, name);
    }
    pthread_mutex_unlock(&pool_mu);
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
static CUresult settled(CUresult rc)
{
    pthread_mutex_lock(&pool_mu);
    settle_all_pools();
    pthread_mutex_unlock(&pool_mu);
    return rc;
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    need_real();
    return settled(real.cuMemFreeAsync(dptr, s));
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
    need_real();
    return settled(real.cuMemFreeAsync_ptsz(dptr, s));
}

EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    need_real();
    return settled(real.cuMemPoolTrimTo(pool, keep));
}

EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    need_real();
    return settled(real.cuMemPoolSetAttribute(pool, attr, value));
}

EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    need_real();
    CUresult rc = real.cuMemPoolDestroy(pool);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&pool_mu);
    for (int i = 0; i < npools; i++)
        if (pools[i].pool == pool) {
            budget_release(pools[i].dev, pools[i].charged);
            pools[i] = pools[--npools];
            break;
        }
    pthread_mutex_unlock(&pool_mu);
    return rc;
}

/* --------------------------------------------- virtual memory management */

/* Physical memory of a handle is the device's until it is released *and*
 * unmapped everywhere; only device-located handles are charged. */
static pthread_mutex_t vmm_mu = PTHREAD_MUTEX_INITIALIZER;
struct vmm_handle {
    CUmemGenericAllocationHandle handle;
    int dev;
    uint64_t bytes;
    int maps;
    bool released;
    CUdeviceptr mapped_at[8];
};
#define MAX_VMM 4096
static struct vmm_handle vmm[MAX_VMM];
static int nvmm;

static struct vmm_handle *vmm_find(CUmemGenericAllocationHandle h)
{
    for (int i = 0; i < nvmm; i++)
        if (vmm[i].handle == h)
            return &vmm[i];
    return NULL;
}

static void vmm_maybe_uncharge(struct vmm_handle *v)
{
    if (v->released && v->maps == 0) {
        budget_release(v->dev, v->bytes);
        *v = vmm[--nvmm];
    }
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    need_real();
    pthread_once(&budget_once, setup_budgets);
    if (!handle || !prop || !size || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        !budget_limited(prop->location.id))
        return real.cuMemCreate(handle, size, prop, flags);
    int dev = prop->location.id;
    uint64_t charge = device_charge(size);
    pthread_mutex_lock(&vmm_mu);
    if (nvmm == MAX_VMM || budget_reserve(dev, charge) != 0) {
        pthread_mutex_unlock(&vmm_mu);
        budget_report_oom(dev, charge, "cuMemCreate");
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = real.cuMemCreate(handle, size, prop, flags);
    if (rc == CUDA_SUCCESS)
        vmm[nvmm++] = (struct vmm_handle){.handle = *handle, .dev = dev, .bytes = charge};
    else
        budget_rollback(dev, charge);
    pthread_mutex_unlock(&vmm_mu);
    return rc;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    need_real();
    CUresult rc = real.cuMemRelease(handle);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&vmm_mu);
    struct vmm_handle *v = vmm_find(handle);
    if (v) {
        v->released = true;
        vmm_maybe_uncharge(v);
    }
    pthread_mutex_unlock(&vmm_mu);
    return rc;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    need_real();
    CUresult rc = real.cuMemMap(ptr, size, offset, handle, flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&vmm_mu);
    struct vmm_handle *v = vmm_find(handle);
    if (v && v->maps < 8)
        v->mapped_at[v->maps++] = ptr;
    pthread_mutex_unlock(&vmm_mu);
    return rc;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    need_real();
    CUresult rc = real.cuMemUnmap(ptr, size);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&vmm_mu);
    for (int i = 0; i < nvmm; i++) {
        struct vmm_handle *v = &vmm[i];
        for (int m = 0; m < v->maps; m++)
            if (v->mapped_at[m] == ptr) {
                v->mapped_at[m] = v->mapped_at[--v->maps];
                vmm_maybe_uncharge(v);
                i = nvmm; /* done */
                break;
            }
    }
    pthread_mutex_unlock(&vmm_mu);
    return rc;
}

/* ---------------------------------------------------------------- arrays */

/* What an array will take, before it exists: the layout of
 * array_layout.h, settled to the driver's figure
 * (cuArrayGetMemoryRequirements) once it exists. An array the layout calls
 * invalid is charged a page; the driver will refuse it anyway. */
static uint64_t array_estimate(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    uint64_t bytes = array_layout_bytes(d, levels);
    return bytes ? bytes : DEVICE_PAGE;
}

/* Creates through `create`, charging the estimate first and settling to
 * `actual` after. */
static CUresult governed_array(const char *name, uint64_t estimate, void **handle,
                               CUresult (*create)(void **, const void *, unsigned),
                               const void *desc, unsigned levels,
                               uint64_t (*actual)(void *, int), CUresult (*destroy)(void *),
                               enum charge_kind kind)
{
    int dev = governed_device();
    if (dev < 0)
        return create(handle, desc, levels);
    if (budget_reserve(dev, estimate) != 0) {
        budget_report_oom(dev, estimate, name);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = create(handle, desc, levels);
    if (rc != CUDA_SUCCESS) {
        budget_rollback(dev, estimate);
        return rc;
    }
    uint64_t exact = actual(*handle, dev);
    if (exact && exact < estimate) {
        budget_rollback(dev, estimate - exact);
    } else if (exact > estimate && budget_reserve(dev, exact - estimate) != 0) {
        destroy(*handle);
        budget_rollback(dev, estimate);
        budget_report_oom(dev, exact, name);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    budget_commit(dev, (uint64_t)(uintptr_t)*handle, exact ? exact : estimate, kind);
    return rc;
}

static CUresult create_2d(void **h, const void *d, unsigned levels)
{
    (void)levels;
    return real.cuArrayCreate_v2((CUarray *)h, d);
}
static CUresult create_3d(void **h, const void *d, unsigned levels)
{
    (void)levels;
    return real.cuArray3DCreate_v2((CUarray *)h, d);
}
static CUresult create_mip(void **h, const void *d, unsigned levels)
{
    return real.cuMipmappedArrayCreate((CUmipmappedArray *)h, d, levels);
}
static uint64_t array_actual(void *h, int dev)
{
    CUDA_ARRAY_MEMORY_REQUIREMENTS r;
    if (!real.cuArrayGetMemoryRequirements ||
        real.cuArrayGetMemoryRequirements(&r, (CUarray)h, dev) != CUDA_SUCCESS)
        return 0;
    return device_charge(r.size);
}
static uint64_t mip_actual(void *h, int dev)
{
    CUDA_ARRAY_MEMORY_REQUIREMENTS r;
    if (!real.cuMipmappedArrayGetMemoryRequirements ||
        real.cuMipmappedArrayGetMemoryRequirements(&r, (CUmipmappedArray)h, dev) != CUDA_SUCCESS)
        return 0;
    return device_charge(r.size);
}
static CUresult destroy_array(void *h) { return real.cuArrayDestroy((CUarray)h); }
static CUresult destroy_mip(void *h) { return real.cuMipmappedArrayDestroy((CUmipmappedArray)h); }

EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    need_real();
    if (!pHandle || !d)
        return real.cuArrayCreate_v2(pHandle, d);
    CUDA_ARRAY3D_DESCRIPTOR d3 = {d->Width, d->Height, 0, d->Format, d->NumChannels, 0};
    return governed_array("cuArrayCreate", array_estimate(&d3, 1), (void **)pHandle, create_2d, d,
                          1, array_actual, destroy_array, CHARGE_ARRAY);
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    need_real();
    if (!pHandle || !d)
        return real.cuArray3DCreate_v2(pHandle, d);
    return governed_array("cuArray3DCreate", array_estimate(d, 1), (void **)pHandle, create_3d, d,
                          1, array_actual, destroy_array, CHARGE_ARRAY);
}

EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                       unsigned int levels)
{
    need_real();
    if (!pHandle || !d || !levels)
        return real.cuMipmappedArrayCreate(pHandle, d, levels);
    return governed_array("cuMipmappedArrayCreate", array_estimate(d, levels), (void **)pHandle,
                          create_mip, d, levels, mip_actual, destroy_mip, CHARGE_MIPMAP);
}

static CUresult destroy_v(uint64_t h) { return real.cuArrayDestroy((CUarray)(uintptr_t)h); }
static CUresult destroy_m(uint64_t h) { return real.cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)h); }

EXPORT CUresult cuArrayDestroy(CUarray a)
{
    need_real();
    return governed_free((uint64_t)(uintptr_t)a, destroy_v);
}

EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray m)
{
    need_real();
    return governed_free((uint64_t)(uintptr_t)m, destroy_m);
}

/* ---------------------------------------------------- what the program sees */

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    need_real();
    CUresult rc = real.cuMemGetInfo_v2(free_bytes, total);
    if (rc != CUDA_SUCCESS)
        return rc;
    int dev = governed_device();
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
    uint64_t f, t;
    budget_view(dev, 0, *bytes, &f, &t);
    *bytes = t;
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

/* ---------------------------------------------------------- graph memory */

/* A graph's allocation nodes take memory when the executable graph is
 * uploaded or launched, from a per-device graph reservation that stays
 * until cuDeviceGraphMemTrim. So: remember what each graph's nodes ask for,
 * reserve what a launch may add before launching, then settle each device
 * to CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT. */
#define MAX_GRAPHS 1024
static pthread_mutex_t graph_mu = PTHREAD_MUTEX_INITIALIZER;
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

/* Caller holds graph_mu. `pre` was reserved for this operation. */
static void graph_settle(int dev, uint64_t pre)
{
    cuuint64_t now = 0;
    if (!real.cuDeviceGetGraphMemAttribute ||
        real.cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &now) !=
            CUDA_SUCCESS)
        now = graph_charged[dev] + pre;
    uint64_t had = graph_charged[dev] + pre;
    if (now < had)
        budget_release(dev, had - now);
    else if (now > had && budget_reserve(dev, now - had) != 0)
        /* The launch already happened: it cannot be refused any more. */
        budget_report_oom(dev, now - had, "graph launch (over budget after the fact)");
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
    if (charge > budget_limit(dev)) { /* could never be launched */
        budget_report_oom(dev, charge, "cuGraphAddMemAllocNode");
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = real.cuGraphAddMemAllocNode(node, g, deps, ndeps, params);
    if (rc == CUDA_SUCCESS) {
        pthread_mutex_lock(&graph_mu);
        struct graph_need *n = graph_add(g, dev);
        if (n)
            n->bytes += charge;
        pthread_mutex_unlock(&graph_mu);
    }
    return rc;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g, unsigned long long flags)
{
    need_real();
    CUresult rc = real.cuGraphInstantiateWithFlags(exec, g, flags);
    if (rc != CUDA_SUCCESS || !exec)
        return rc;
    pthread_mutex_lock(&graph_mu);
    struct graph_need *n = graph_find(g);
    if (n) {
        struct graph_need copy = *n;
        struct graph_need *e = graph_add(*exec, copy.dev);
        if (e)
            e->bytes = copy.bytes;
    }
    pthread_mutex_unlock(&graph_mu);
    return rc;
}

static CUresult graph_run(const char *name, CUgraphExec e, CUstream s, PFN_cuGraphLaunch run)
{
    pthread_mutex_lock(&graph_mu);
    struct graph_need *n = graph_find(e);
    if (!n) {
        pthread_mutex_unlock(&graph_mu);
        return run(e, s);
    }
    int dev = n->dev;
    uint64_t pre = n->bytes > graph_charged[dev] ? n->bytes - graph_charged[dev] : 0;
    if (pre && budget_reserve(dev, pre) != 0) {
        pthread_mutex_unlock(&graph_mu);
        budget_report_oom(dev, pre, name);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = run(e, s);
    if (rc != CUDA_SUCCESS)
        budget_rollback(dev, pre);
    else
        graph_settle(dev, pre);
    pthread_mutex_unlock(&graph_mu);
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
        pthread_mutex_lock(&graph_mu);
        graph_settle(dev, 0);
        pthread_mutex_unlock(&graph_mu);
    }
    return rc;
}

/* ------------------------------------------------------------------ NVML */

/* NVML numbers devices physically; the program's CUDA ordinals follow
 * CUDA_VISIBLE_DEVICES. The two meet only by UUID. */
#define MAX_NVML 64
static pthread_mutex_t nvml_mu = PTHREAD_MUTEX_INITIALIZER;
static struct nvml_ordinal {
    nvmlDevice_t dev;
    int ordinal; /* -1: not visible to CUDA in this process */
} nvml_map[MAX_NVML];
static int nnvml;

static void uuid_text(const CUuuid *u, char out[48])
{
    const unsigned char *b = (const unsigned char *)u->bytes;
    static const char hex[] = "0123456789abcdef";
    char *o = out;
    memcpy(o, "GPU-", 4);
    o += 4;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *o++ = '-';
        *o++ = hex[b[i] >> 4];
        *o++ = hex[b[i] & 15];
    }
    *o = 0;
}

static int cuda_ordinal_of(nvmlDevice_t d)
{
    pthread_mutex_lock(&nvml_mu);
    for (int i = 0; i < nnvml; i++)
        if (nvml_map[i].dev == d) {
            int o = nvml_map[i].ordinal;
            pthread_mutex_unlock(&nvml_mu);
            return o;
        }
    int ordinal = -1, n = 0;
    char want[96];
    if (real.nvmlDeviceGetUUID && real.nvmlDeviceGetUUID(d, want, sizeof want) == NVML_SUCCESS &&
        real.cuDeviceGetCount && real.cuDeviceGetUuid) {
        /* cuInit creates no context; it only lets us ask the driver. */
        if (real.cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED && real.cuInit &&
            real.cuInit(0) == CUDA_SUCCESS)
            real.cuDeviceGetCount(&n);
        for (int o = 0; o < n && ordinal < 0; o++) {
            CUuuid u;
            char text[48];
            if (real.cuDeviceGetUuid(&u, o) == CUDA_SUCCESS) {
                uuid_text(&u, text);
                if (strcmp(text, want) == 0)
                    ordinal = o;
            }
        }
        if (nnvml < MAX_NVML) /* remembered only once the answer is certain */
            nvml_map[nnvml++] = (struct nvml_ordinal){d, ordinal};
    }
    pthread_mutex_unlock(&nvml_mu);
    return ordinal;
}

/* The same view as cuMemGetInfo: NVML and CUDA always agree. NVML's v2
 * figures split what is not free into reserved and used. */
static void nvml_view(nvmlDevice_t d, unsigned long long *total, unsigned long long *free_b,
                      unsigned long long *used, unsigned long long *reserved)
{
    pthread_once(&budget_once, setup_budgets);
    int dev = cuda_ordinal_of(d);
    if (dev < 0 || !budget_limited(dev))
        return;
    uint64_t f, t;
    budget_view(dev, *free_b, *total, &f, &t);
    unsigned long long taken = t - f, r = reserved && *reserved < taken ? *reserved : 0;
    if (reserved)
        *reserved = r;
    *total = t;
    *free_b = f;
    *used = taken - r;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    need_real();
    need_nvml();
    if (!real.nvmlDeviceGetMemoryInfo)
        return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t rc = real.nvmlDeviceGetMemoryInfo(d, m);
    if (rc == NVML_SUCCESS)
        nvml_view(d, &m->total, &m->free, &m->used, NULL);
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
    need_real();
    need_nvml();
    if (!real.nvmlDeviceGetMemoryInfo_v2)
        return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t rc = real.nvmlDeviceGetMemoryInfo_v2(d, m);
    if (rc == NVML_SUCCESS)
        nvml_view(d, &m->total, &m->free, &m->used, &m->reserved);
    return rc;
}

/* ------------------------------------------------------------ resolution */

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    need_real();
    CUresult rc;
    if (real.cuGetProcAddress_v2)
        rc = real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, status);
    else if (real.cuGetProcAddress)
        rc = real.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    else
        return CUDA_ERROR_NOT_SUPPORTED;
    if (rc == CUDA_SUCCESS && pfn)
        *pfn = swap(*pfn);
    return rc;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    need_real();
    CUresult rc;
    if (real.cuGetProcAddress)
        rc = real.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    else if (real.cuGetProcAddress_v2)
        rc = real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
    else
        return CUDA_ERROR_NOT_SUPPORTED;
    if (rc == CUDA_SUCCESS && pfn)
        *pfn = swap(*pfn);
    return rc;
}

/* dlsym is exported twice: as dlsym@@GLIBC_2.34 (programs built on current
 * glibc) and under the older version that programs built before 2.34
 * reference (see preload.map). Only names we govern are looked at twice. */
/* A governed name asked of the driver: ask the real dlsym, swap by identity. */
static void *governed_lookup(void *handle, const char *name)
{
    void *p = real_dlsym()(handle, name);
    if (p && name[0] == 'n')
        need_nvml();
    return swap(p);
}

UNINSTRUMENTED static int same_name(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* Where a dlsym call goes: the real one for every name we do not govern
 * (and for RTLD_NEXT, which only the real one can answer for its caller),
 * governed_lookup otherwise. */
UNINSTRUMENTED void *vram_dlsym_route(void *handle, const char *name);
void *vram_dlsym_route(void *handle, const char *name)
{
    if (handle != RTLD_NEXT && name &&
        ((name[0] == 'c' && name[1] == 'u') || (name[0] == 'n' && name[1] == 'v')))
        for (size_t i = 0; i < NGOVERNED; i++)
            if (same_name(governed[i].name, name))
                return (void *)governed_lookup;
    return (void *)real_dlsym();
}

/* dlsym itself is a trampoline that *jumps* to the chosen function with
 * the caller's registers and return address untouched: glibc's dlsym finds
 * "the object after the caller" for RTLD_NEXT from its return address, so
 * a plain call from C would answer relative to this library instead.
 *
 * It is exported twice: dlsym@@GLIBC_2.34 for programs built on current
 * glibc (through preload.map) and dlsym@<older version> for programs built
 * before 2.34. */
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl vram_dlsym_entry\n"
        ".type vram_dlsym_entry, @function\n"
        "vram_dlsym_entry:\n"
        "    push %rdi\n"
        "    push %rsi\n"
        "    sub $8, %rsp\n" /* 16-byte alignment for the call */
        "    call vram_dlsym_route\n"
        "    add $8, %rsp\n"
        "    pop %rsi\n"
        "    pop %rdi\n"
        "    jmp *%rax\n"
        ".size vram_dlsym_entry, .-vram_dlsym_entry\n"
        ".globl vram_dlsym_compat\n"
        ".set vram_dlsym_compat, vram_dlsym_entry\n"
        ".symver vram_dlsym_entry, dlsym@@GLIBC_2.34\n"
        ".symver vram_dlsym_compat, dlsym@GLIBC_2.2.5\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl vram_dlsym_entry\n"
        ".type vram_dlsym_entry, %function\n"
        "vram_dlsym_entry:\n"
        "    stp x29, x30, [sp, #-32]!\n"
        "    mov x29, sp\n"
        "    stp x0, x1, [sp, #16]\n"
        "    bl vram_dlsym_route\n"
        "    mov x16, x0\n"
        "    ldp x0, x1, [sp, #16]\n"
        "    ldp x29, x30, [sp], #32\n"
        "    br x16\n"
        ".size vram_dlsym_entry, .-vram_dlsym_entry\n"
        ".globl vram_dlsym_compat\n"
        ".set vram_dlsym_compat, vram_dlsym_entry\n"
        ".symver vram_dlsym_entry, dlsym@@GLIBC_2.34\n"
        ".symver vram_dlsym_compat, dlsym@GLIBC_2.17\n");
#else
/* Elsewhere RTLD_NEXT lookups are answered relative to this library. */
EXPORT void *dlsym(void *handle, const char *name)
{
    return ((dlsym_fn)vram_dlsym_route(handle, name))(handle, name);
}
#endif
