/* contexts: CUDA contexts, charged to the budget of their device.
 *
 * A context takes device memory that no allocation asks for: hundreds of
 * MiB on a GPU, as much as the driver decides. Every way a program makes one
 * is governed: cuCtxCreate (every version), and the first retain of a
 * device's primary context (the CUDA runtime's way, and libvram's); its end
 * (cuCtxDestroy, the primary context's last release, a reset, the last
 * cuCtxDetach) gives the charge back. The legacy cuCtxAttach and
 * cuCtxDetach count a context's users as the driver does (a created
 * context has one; a primary context's are its retains), so the charge
 * goes when the driver destroys the context, not before.
 *
 * What a context takes is measured (footprint.h) and charged like an
 * allocation, reserve before the driver is called: the reservation is the
 * size a context takes on that device as this process or its command knows
 * it (vram run measures it before the command starts; a process notes what
 * it measured for the others), settled to what this creation measurably
 * took once the driver has made it. A context the budget cannot hold is
 * destroyed again and the call fails with CUDA_ERROR_OUT_OF_MEMORY, as a
 * driver does when the device has no room for one; when the budget could
 * never hold one, the program hears why (budget_report_context).
 *
 * Contexts are made and ended one at a time in a process (footprint_lock):
 * they are rare, and a measure must not see another one's memory.
 */
#include "driver_memory.h"
#include "footprint.h"
#include "interposer.h"

#include "../record/recorder.h"
#include "../util/parse.h"
#include "../util/report.h"

#include <stdlib.h>

static struct {
    struct footprint_charges created; /* cuCtxCreate's, live */
    struct {
        int refs; /* retains the driver counted since the charged one */
        uint64_t charge;
        CUcontext ctx;
    } primary[BUDGET_MAX_DEVICES];
    uint64_t size[BUDGET_MAX_DEVICES]; /* what one took here, measured by this process */
} cx;

/* A device whose contexts a budget governs (an ordinal the driver knows). */
static bool governed_ordinal(CUdevice dev)
{
    pthread_once(&budget_once, setup_budgets);
    size_t total;
    return dev >= 0 && dev < BUDGET_MAX_DEVICES && real.cuDeviceTotalMem_v2 &&
           real.cuDeviceTotalMem_v2(&total, dev) == CUDA_SUCCESS && budget_limited(dev);
}

/* A live context of this process on dev, to read the free memory in. */
static CUcontext one_on(int dev)
{
    if (cx.primary[dev].refs > 0)
        return cx.primary[dev].ctx;
    for (int i = 0; i < cx.created.n; i++)
        if (cx.created.v[i].dev == dev)
            return (CUcontext)cx.created.v[i].handle;
    return NULL;
}

static void refuse(int dev, uint64_t bytes, const char *call)
{
    record_governed_refusal(dev, RECORD_CONTEXT_MEMORY, bytes, 0, 0);
    char name[128] = "a GPU";
    if (real.cuDeviceGetName)
        real.cuDeviceGetName(name, sizeof name, dev);
    budget_report_context(dev, bytes, call, name);
}

/* How a context is made and unmade, for charged(). */
struct maker {
    CUresult (*make)(const struct maker *m, CUcontext *out);
    void (*unmake)(const struct maker *m, CUcontext c);
    CUdevice dev;
    unsigned flags;
    int version; /* of cuCtxCreate */
    CUexecAffinityParam *affinity;
    int naffinity;
    CUctxCreateParams *params;
};

/* Makes a context on m->dev charged to its budget (caller holds the lock):
 * reserve what a context is known to take, make it, measure it, settle. */
static CUresult charged(const struct maker *m, const char *call, CUcontext *out, uint64_t *charge)
{
    int dev = m->dev;
    uint64_t expected = cx.size[dev] ? cx.size[dev] : budget_context_size(dev);
    /* Also when nothing is known yet: a process that cannot charge the
     * budget at all (a bad setting, no grant) is refused before the driver
     * makes anything. */
    if (budget_reserve_part(dev, expected, COMMAND_CONTEXTS, false) != 0) {
        refuse(dev, expected, call);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct footprint f;
    footprint_begin(&f, dev, one_on(dev));
    CUresult rc = m->make(m, out);
    if (rc != CUDA_SUCCESS) {
        budget_release_part(dev, expected, COMMAND_CONTEXTS);
        return rc;
    }
    uint64_t cost = expected;
    if (footprint_end(&f, *out, true, &cost) != 0) {
        cost = expected;
        vlog(LOG_WARN, "%s: cannot measure the device memory of the context on device %d; "
                       "charged %s", call, dev, format_size(cost).text);
    }
    /* Later contexts here reserve this much before they are made. */
    if (cost > cx.size[dev])
        cx.size[dev] = cost;
    budget_note_context_size(dev, cost);
    if (cost > expected &&
        budget_reserve_part(dev, cost - expected, COMMAND_CONTEXTS, true) != 0) {
        m->unmake(m, *out);
        budget_release_part(dev, expected, COMMAND_CONTEXTS);
        refuse(dev, cost, call);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (cost < expected)
        budget_release_part(dev, expected - cost, COMMAND_CONTEXTS);
    vlog(LOG_DEBUG, "%s: a context on device %d takes %s", call, dev, format_size(cost).text);
    *charge = cost;
    record_context(dev, (uint64_t)(uintptr_t)*out);
    record_alloc(RECORD_CONTEXT_MEMORY, dev, (uint64_t)(uintptr_t)*out, cost, 0);
    /* From now on the driver may take memory here on its own. */
    driver_memory_watch(dev);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------- created */

static CUresult create(const struct maker *m, CUcontext *out)
{
    switch (m->version) {
    case 1:
        return real.cuCtxCreate ? real.cuCtxCreate(out, m->flags, m->dev)
                                : CUDA_ERROR_NOT_SUPPORTED;
    case 3:
        return real.cuCtxCreate_v3
                   ? real.cuCtxCreate_v3(out, m->affinity, m->naffinity, m->flags, m->dev)
                   : CUDA_ERROR_NOT_SUPPORTED;
    case 4:
        return real.cuCtxCreate_v4 ? real.cuCtxCreate_v4(out, m->params, m->flags, m->dev)
                                   : CUDA_ERROR_NOT_SUPPORTED;
    default:
        return real.cuCtxCreate_v2 ? real.cuCtxCreate_v2(out, m->flags, m->dev)
                                   : CUDA_ERROR_NOT_SUPPORTED;
    }
}

static void destroy(const struct maker *m, CUcontext c)
{
    (void)m;
    real.cuCtxDestroy_v2(c);
}

static CUresult governed_create(struct maker *m, CUcontext *pctx, const char *call)
{
    if (!pctx || !governed_ordinal(m->dev))
        return create(m, pctx);
    m->make = create;
    m->unmake = destroy;
    footprint_lock();
    if (!footprint_room(&cx.created)) {
        footprint_unlock();
        return CUDA_ERROR_OUT_OF_MEMORY; /* no host memory to remember it by */
    }
    uint64_t charge = 0;
    CUresult rc = charged(m, call, pctx, &charge);
    if (rc == CUDA_SUCCESS)
        footprint_charged(&cx.created, *pctx, m->dev, charge);
    footprint_unlock();
    return rc;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    need_real();
    struct maker m = {.dev = dev, .flags = flags, .version = 2};
    return governed_create(&m, pctx, "cuCtxCreate");
}

EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    need_real();
    struct maker m = {.dev = dev, .flags = flags, .version = 1};
    return governed_create(&m, pctx, "cuCtxCreate");
}

EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n,
                               unsigned int flags, CUdevice dev)
{
    need_real();
    struct maker m = {.dev = dev, .flags = flags, .version = 3, .affinity = params, .naffinity = n};
    return governed_create(&m, pctx, "cuCtxCreate_v3");
}

EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                               CUdevice dev)
{
    need_real();
    struct maker m = {.dev = dev, .flags = flags, .version = 4, .params = params};
    return governed_create(&m, pctx, "cuCtxCreate");
}

static CUresult governed_destroy(CUcontext ctx, PFN_cuCtxDestroy_v2 driver)
{
    if (!driver)
        return CUDA_ERROR_NOT_SUPPORTED;
    footprint_lock();
    CUresult rc = driver(ctx);
    if (rc == CUDA_SUCCESS)
        footprint_ended(&cx.created, ctx, COMMAND_CONTEXTS, RECORD_CONTEXT_MEMORY);
    footprint_unlock();
    return rc;
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    need_real();
    return governed_destroy(ctx, real.cuCtxDestroy_v2);
}

EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
    need_real();
    return governed_destroy(ctx, real.cuCtxDestroy ? real.cuCtxDestroy : real.cuCtxDestroy_v2);
}

/* -------------------------------------------------------------- legacy */

/* The primary context of a device that `ctx` is, or -1. Caller holds the lock. */
static int primary_of(CUcontext ctx)
{
    for (int d = 0; ctx && d < BUDGET_MAX_DEVICES; d++)
        if (cx.primary[d].refs > 0 && cx.primary[d].ctx == ctx)
            return d;
    return -1;
}

static void primary_ended(CUdevice dev, bool reset);

EXPORT CUresult cuCtxAttach(CUcontext *pctx, unsigned int flags)
{
    need_real();
    if (!real.cuCtxAttach)
        return CUDA_ERROR_NOT_SUPPORTED;
    footprint_lock();
    CUresult rc = real.cuCtxAttach(pctx, flags);
    if (rc == CUDA_SUCCESS && pctx) {
        struct footprint_charge *c = footprint_find(&cx.created, *pctx);
        int d = primary_of(*pctx);
        if (c)
            c->users++;
        else if (d >= 0)
            cx.primary[d].refs++;
    }
    footprint_unlock();
    return rc;
}

EXPORT CUresult cuCtxDetach(CUcontext ctx)
{
    need_real();
    if (!real.cuCtxDetach)
        return CUDA_ERROR_NOT_SUPPORTED;
    footprint_lock();
    CUresult rc = real.cuCtxDetach(ctx);
    if (rc == CUDA_SUCCESS) {
        struct footprint_charge *c = footprint_find(&cx.created, ctx);
        int d = primary_of(ctx);
        if (c && --c->users == 0)
            footprint_ended(&cx.created, ctx, COMMAND_CONTEXTS, RECORD_CONTEXT_MEMORY);
        else if (d >= 0)
            primary_ended(d, false);
    }
    footprint_unlock();
    return rc;
}

/* ------------------------------------------------------------- primary */

static CUresult retain(const struct maker *m, CUcontext *out)
{
    return real.cuDevicePrimaryCtxRetain(out, m->dev);
}

static void release(const struct maker *m, CUcontext c)
{
    (void)c;
    if (real.cuDevicePrimaryCtxRelease_v2)
        real.cuDevicePrimaryCtxRelease_v2(m->dev);
}

/* The primary context is made by the retain that finds it inactive; the
 * others only count. */
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    need_real();
    if (!real.cuDevicePrimaryCtxRetain)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!pctx || !governed_ordinal(dev))
        return real.cuDevicePrimaryCtxRetain(pctx, dev);
    footprint_lock();
    CUresult rc;
    if (cx.primary[dev].refs > 0) {
        if ((rc = real.cuDevicePrimaryCtxRetain(pctx, dev)) == CUDA_SUCCESS)
            cx.primary[dev].refs++;
    } else {
        struct maker m = {.make = retain, .unmake = release, .dev = dev};
        uint64_t charge = 0;
        rc = charged(&m, "cuDevicePrimaryCtxRetain", pctx, &charge);
        if (rc == CUDA_SUCCESS) {
            cx.primary[dev].refs = 1;
            cx.primary[dev].charge = charge;
            cx.primary[dev].ctx = *pctx;
        }
    }
    footprint_unlock();
    return rc;
}

/* The primary context's end, if the driver agreed (caller holds the lock). */
static void primary_ended(CUdevice dev, bool reset)
{
    if (dev < 0 || dev >= BUDGET_MAX_DEVICES || cx.primary[dev].refs <= 0)
        return;
    if (!reset && --cx.primary[dev].refs > 0)
        return;
    cx.primary[dev].refs = 0;
    budget_release_part(dev, cx.primary[dev].charge, COMMAND_CONTEXTS);
    record_free(RECORD_CONTEXT_MEMORY, dev, (uint64_t)(uintptr_t)cx.primary[dev].ctx,
                cx.primary[dev].charge, 0);
    cx.primary[dev].charge = 0;
}

static CUresult governed_release(CUdevice dev, PFN_cuDevicePrimaryCtxRelease_v2 driver,
                                 bool reset)
{
    if (!driver)
        return CUDA_ERROR_NOT_SUPPORTED;
    footprint_lock();
    CUresult rc = driver(dev);
    if (rc == CUDA_SUCCESS)
        primary_ended(dev, reset);
    footprint_unlock();
    return rc;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    need_real();
    return governed_release(dev, real.cuDevicePrimaryCtxRelease_v2, false);
}

EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    need_real();
    return governed_release(dev,
                            real.cuDevicePrimaryCtxRelease ? real.cuDevicePrimaryCtxRelease
                                                           : real.cuDevicePrimaryCtxRelease_v2,
                            false);
}

EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    need_real();
    return governed_release(dev, real.cuDevicePrimaryCtxReset_v2, true);
}

EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    need_real();
    return governed_release(
        dev, real.cuDevicePrimaryCtxReset ? real.cuDevicePrimaryCtxReset : real.cuDevicePrimaryCtxReset_v2,
        true);
}

/* ---------------------------------------------------------------- fork */

/* Contexts do not survive fork(): the child has none, and nothing charged
 * (command.c makes it a new member). The parent holds the lock while it
 * forks, so the child's copy is never half-way through an event. */
static void before_fork(void) { footprint_lock(); }
static void after_fork_parent(void) { footprint_unlock(); }
static void after_fork_child(void)
{
    footprint_after_fork();
    driver_memory_after_fork();
    footprint_forget(&cx.created);
    for (int d = 0; d < BUDGET_MAX_DEVICES; d++)
        cx.primary[d].refs = 0, cx.primary[d].charge = 0;
}

__attribute__((constructor)) static void contexts_load(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}
