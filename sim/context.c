/* context: primary and created contexts, each thread's current context,
 * and the device memory a context takes.
 *
 * A context costs VRAM_SIM_CONTEXT_SIZE of its device (config.h says where
 * the default comes from) from its creation until its destruction: a
 * created context at cuCtxCreate, a primary context from the retain that
 * activates it until the release that drops it to no references, or a
 * reset. That memory shows in cuMemGetInfo and as the process's usage in
 * NVML, as on a GPU. The legacy cuCtxAttach and cuCtxDetach count a
 * context's users as the driver does: a created context starts with one,
 * attach adds one to the current context, detach takes one away and
 * destroys the context at none (a primary context's users are its
 * retains).
 *
 * Handles are checked against the live contexts without being dereferenced,
 * so a stale or made-up handle is CUDA_ERROR_INVALID_CONTEXT, not a crash.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "occupancy.h"
#include "sim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define LIMITS 7

struct CUctx_st {
    int dev;
    bool primary, active; /* a primary context is active while retained */
    int refs;             /* primary: retains; created: users (cuCtxAttach) */
    unsigned flags;
    CUfunc_cache cache;
    CUsharedconfig shmem;
    size_t limits[LIMITS];
    unsigned long long id;
    struct CUctx_st *next; /* created contexts, in the live list */
};

static struct {
    pthread_mutex_t mu;
    struct CUctx_st primary[SIM_MAX_DEVICES];
    struct CUctx_st *created;
    unsigned long long next_id;
} ctxs = {.mu = PTHREAD_MUTEX_INITIALIZER};

#define CTX_STACK 16
static _Thread_local CUcontext ctx_stack[CTX_STACK];
static _Thread_local int ctx_depth; /* ctx_stack[ctx_depth-1] is current */

static const size_t default_limits[LIMITS] = {1024, 1 << 20, 8 << 20, 2, 2048, 32, 0};

static bool primary_handle(CUcontext c) { return c >= ctxs.primary && c < ctxs.primary + SIM_MAX_DEVICES; }

static void setup(struct CUctx_st *c, int dev, unsigned flags)
{
    c->dev = dev;
    c->flags = flags;
    c->cache = CU_FUNC_CACHE_PREFER_NONE;
    c->shmem = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
    memcpy(c->limits, default_limits, sizeof c->limits);
    c->id = ++ctxs.next_id;
}

/* Caller holds ctxs.mu. */
static bool live_locked(CUcontext c)
{
    if (!c)
        return false;
    if (primary_handle(c))
        return c->active;
    for (struct CUctx_st *x = ctxs.created; x; x = x->next)
        if (x == c)
            return true;
    return false;
}

bool sim_context_live(CUcontext c)
{
    pthread_mutex_lock(&ctxs.mu);
    bool live = live_locked(c);
    pthread_mutex_unlock(&ctxs.mu);
    return live;
}

int sim_context_device(CUcontext c) { return c->dev; }

static CUcontext current(void) { return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL; }

CUresult sim_current_context(CUcontext *out)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    CUcontext c = current();
    if (!sim_context_live(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = c;
    return CUDA_SUCCESS;
}

CUresult sim_current_device(int *dev)
{
    CUcontext c;
    CUresult rc = sim_current_context(&c);
    if (rc == CUDA_SUCCESS)
        *dev = c->dev;
    return rc;
}

CUresult sim_context_arg(CUcontext *c)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!*c)
        return sim_current_context(c);
    return sim_context_live(*c) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* ------------------------------------------------------------- primary */

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&ctxs.mu);
    struct CUctx_st *c = &ctxs.primary[dev];
    if (!c->active) {
        rc = sim_charge(dev, sim_context_size());
        if (rc == CUDA_SUCCESS) {
            unsigned flags = c->flags; /* set by cuDevicePrimaryCtxSetFlags while inactive */
            setup(c, dev, flags);
            c->primary = c->active = true;
        }
    }
    if (rc == CUDA_SUCCESS) {
        c->refs++;
        *pctx = c;
    }
    pthread_mutex_unlock(&ctxs.mu);
    return rc;
}

/* Caller holds ctxs.mu. */
static void primary_end(struct CUctx_st *c)
{
    sim_uncharge(c->dev, sim_context_size());
    c->active = false;
    c->refs = 0;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&ctxs.mu);
    struct CUctx_st *c = &ctxs.primary[dev];
    rc = c->active ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS && --c->refs == 0)
        primary_end(c);
    pthread_mutex_unlock(&ctxs.mu);
    return rc;
}

EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&ctxs.mu);
    *flags = ctxs.primary[dev].flags;
    *active = ctxs.primary[dev].active;
    pthread_mutex_unlock(&ctxs.mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (flags & ~(unsigned)CU_CTX_FLAGS_MASK)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&ctxs.mu);
    ctxs.primary[dev].flags = flags;
    pthread_mutex_unlock(&ctxs.mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&ctxs.mu);
    if (ctxs.primary[dev].active)
        primary_end(&ctxs.primary[dev]);
    ctxs.primary[dev].flags = 0;
    pthread_mutex_unlock(&ctxs.mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return cuDevicePrimaryCtxReset_v2(dev); }

/* ------------------------------------------------------------- created */

static CUresult create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pctx || flags & ~(unsigned)CU_CTX_FLAGS_MASK)
        return CUDA_ERROR_INVALID_VALUE;
    if (ctx_depth == CTX_STACK)
        return CUDA_ERROR_UNKNOWN;
    CUcontext c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((rc = sim_charge(dev, sim_context_size())) != CUDA_SUCCESS) {
        free(c);
        return rc;
    }
    pthread_mutex_lock(&ctxs.mu);
    setup(c, dev, flags);
    c->refs = 1;
    c->next = ctxs.created;
    ctxs.created = c;
    pthread_mutex_unlock(&ctxs.mu);
    ctx_stack[ctx_depth++] = c; /* a created context becomes current */
    *pctx = c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return create(pctx, flags, dev);
}

EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return create(pctx, flags, dev);
}

EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                               unsigned int flags, CUdevice dev)
{
    /* Execution affinity (SM partitions) is not modelled. */
    if (paramsArray && numParams > 0)
        return sim_ready() ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED;
    return create(pctx, flags, dev);
}

EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                               CUdevice dev)
{
    /* Execution affinity and shared-memory (CIG) parameters are not modelled. */
    if (params)
        return sim_ready() ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED;
    return create(pctx, flags, dev);
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&ctxs.mu);
    struct CUctx_st **pp = &ctxs.created;
    while (*pp && *pp != ctx)
        pp = &(*pp)->next;
    bool found = ctx && *pp == ctx;
    if (found)
        *pp = ctx->next;
    pthread_mutex_unlock(&ctxs.mu);
    if (!found) /* a primary context, or not a live context */
        return CUDA_ERROR_INVALID_CONTEXT;
    for (int i = 0; i < ctx_depth; i++)
        if (ctx_stack[i] == ctx) {
            memmove(&ctx_stack[i], &ctx_stack[i + 1], sizeof(CUcontext) * (size_t)(ctx_depth - i - 1));
            ctx_depth--;
            i--;
        }
    sim_uncharge(ctx->dev, sim_context_size());
    free(ctx);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxDestroy(CUcontext ctx) { return cuCtxDestroy_v2(ctx); }

EXPORT CUresult cuCtxAttach(CUcontext *pctx, unsigned int flags)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pctx || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext c = current();
    pthread_mutex_lock(&ctxs.mu);
    if (!live_locked(c))
        rc = CUDA_ERROR_INVALID_CONTEXT;
    else
        c->refs++;
    pthread_mutex_unlock(&ctxs.mu);
    if (rc == CUDA_SUCCESS)
        *pctx = c;
    return rc;
}

EXPORT CUresult cuCtxDetach(CUcontext ctx)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    /* The driver detaches only the calling thread's current context. */
    if (!ctx || ctx != current())
        return CUDA_ERROR_INVALID_CONTEXT;
    bool last = false;
    pthread_mutex_lock(&ctxs.mu);
    if (!live_locked(ctx)) {
        rc = CUDA_ERROR_INVALID_CONTEXT;
    } else if (--ctx->refs == 0) {
        if (primary_handle(ctx))
            primary_end(ctx);
        else
            last = true;
    }
    pthread_mutex_unlock(&ctxs.mu);
    return last ? cuCtxDestroy_v2(ctx) : rc;
}

/* ------------------------------------------------------------- current */

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!ctx) {
        if (ctx_depth > 0)
            ctx_depth--;
        return CUDA_SUCCESS;
    }
    if (!sim_context_live(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == 0)
        ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = current();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!sim_context_live(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == CTX_STACK)
        return CUDA_ERROR_UNKNOWN;
    ctx_stack[ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent(CUcontext ctx) { return cuCtxPushCurrent_v2(ctx); }

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext c = ctx_stack[--ctx_depth];
    if (pctx)
        *pctx = c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx) { return cuCtxPopCurrent_v2(pctx); }

EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    return sim_current_device(device);
}

EXPORT CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    CUresult rc = sim_context_arg(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = ctx->dev;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ settings */

/* The current context, for the settings below. */
#define CURRENT(c)                                                                             \
    CUcontext c;                                                                               \
    do {                                                                                       \
        CUresult rc_ = sim_current_context(&c);                                                \
        if (rc_ != CUDA_SUCCESS)                                                               \
            return rc_;                                                                        \
    } while (0)

EXPORT CUresult cuCtxGetFlags(unsigned int *flags)
{
    CURRENT(c);
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = c->flags;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetFlags(unsigned int flags)
{
    CURRENT(c);
    if (flags & ~(unsigned)CU_CTX_FLAGS_MASK)
        return CUDA_ERROR_INVALID_VALUE;
    c->flags = flags;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    CUresult rc = sim_context_arg(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!ctxId)
        return CUDA_ERROR_INVALID_VALUE;
    *ctxId = ctx->id;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    CUresult rc = sim_context_arg(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = 3020; /* contexts made through the _v2 ABI */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
    CURRENT(c);
    if (!pconfig)
        return CUDA_ERROR_INVALID_VALUE;
    *pconfig = c->cache;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCacheConfig(CUfunc_cache config)
{
    CURRENT(c);
    if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL)
        return CUDA_ERROR_INVALID_VALUE;
    c->cache = config;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetSharedMemConfig(CUsharedconfig *pConfig)
{
    CURRENT(c);
    if (!pConfig)
        return CUDA_ERROR_INVALID_VALUE;
    *pConfig = c->shmem;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetSharedMemConfig(CUsharedconfig config)
{
    CURRENT(c);
    if (config < CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE ||
        config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
        return CUDA_ERROR_INVALID_VALUE;
    c->shmem = config; /* accepted, as on devices with a fixed bank size */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    CURRENT(c);
    if (!pvalue || limit < 0 || limit >= LIMITS)
        return CUDA_ERROR_INVALID_VALUE;
    *pvalue = c->limits[limit];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    CURRENT(c);
    if (limit < 0 || limit >= LIMITS)
        return CUDA_ERROR_INVALID_VALUE;
    c->limits[limit] = value;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxResetPersistingL2Cache(void)
{
    CURRENT(c);
    (void)c;
    return CUDA_SUCCESS;
}

SAME_TYPE(cuDevicePrimaryCtxRetain);
SAME_TYPE(cuDevicePrimaryCtxRelease);
SAME_TYPE(cuDevicePrimaryCtxRelease_v2);
SAME_TYPE(cuDevicePrimaryCtxGetState);
SAME_TYPE(cuDevicePrimaryCtxSetFlags);
SAME_TYPE(cuDevicePrimaryCtxSetFlags_v2);
SAME_TYPE(cuDevicePrimaryCtxReset);
SAME_TYPE(cuDevicePrimaryCtxReset_v2);
SAME_TYPE(cuCtxCreate);
SAME_TYPE(cuCtxCreate_v2);
SAME_TYPE(cuCtxCreate_v3);
SAME_TYPE(cuCtxCreate_v4);
SAME_TYPE(cuCtxDestroy);
SAME_TYPE(cuCtxDestroy_v2);
SAME_TYPE(cuCtxAttach);
SAME_TYPE(cuCtxDetach);
SAME_TYPE(cuCtxSetCurrent);
SAME_TYPE(cuCtxGetCurrent);
SAME_TYPE(cuCtxPushCurrent);
SAME_TYPE(cuCtxPushCurrent_v2);
SAME_TYPE(cuCtxPopCurrent);
SAME_TYPE(cuCtxPopCurrent_v2);
SAME_TYPE(cuCtxGetDevice);
SAME_TYPE(cuCtxGetDevice_v2);
SAME_TYPE(cuCtxGetFlags);
SAME_TYPE(cuCtxSetFlags);
SAME_TYPE(cuCtxGetId);
SAME_TYPE(cuCtxGetApiVersion);
SAME_TYPE(cuCtxGetCacheConfig);
SAME_TYPE(cuCtxSetCacheConfig);
SAME_TYPE(cuCtxGetSharedMemConfig);
SAME_TYPE(cuCtxSetSharedMemConfig);
SAME_TYPE(cuCtxGetLimit);
SAME_TYPE(cuCtxSetLimit);
SAME_TYPE(cuCtxGetStreamPriorityRange);
SAME_TYPE(cuCtxResetPersistingL2Cache);
