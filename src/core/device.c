#include "device.h"

#include "../cuda/uuid.h"
#include "../client/agent.h"
#include "../util/parse.h"
#include "../util/report.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------- heap backend */

/* Every driver call is made with the device's primary context pushed and
 * popped again, so the caller's own current context is left as it was. */
static bool push(struct physical_device *p)
{
    return p->cu->cuCtxPushCurrent(p->ctx) == CUDA_SUCCESS;
}

static void pop(struct physical_device *p)
{
    CUcontext ignored;
    p->cu->cuCtxPopCurrent(&ignored);
}

static int backend_obtain(void *ctx, uint64_t size, uint64_t *base)
{
    struct logical_device *l = ctx;
    if (atomic_load_explicit(&l->phys->stopped, memory_order_relaxed))
        return CUDA_ERROR_OUT_OF_MEMORY; /* vramd does not count the budget (agent.h) */
    if (!push(l->phys))
        return CUDA_ERROR_INVALID_CONTEXT;
    CUdeviceptr d = 0;
    CUresult rc = l->phys->cu->cuMemAlloc(&d, (size_t)size);
    pop(l->phys);
    if (rc == CUDA_SUCCESS)
        *base = d;
    return rc;
}

static void backend_release(void *ctx, uint64_t base, uint64_t size)
{
    (void)size;
    struct logical_device *l = ctx;
    if (!push(l->phys))
        return;
    CUresult rc = l->phys->cu->cuMemFree(base);
    pop(l->phys);
    if (rc != CUDA_SUCCESS) {
        char buf[64];
        vlog(LOG_WARN, "device %d: returning %s to the driver failed: %s", l->index,
             format_size(size).text, driver_error_text(l->phys->cu, rc, buf));
    }
}

static uint64_t backend_available(void *ctx)
{
    struct logical_device *l = ctx;
    size_t free_bytes = 0, total = 0;
    if (!push(l->phys))
        return 0;
    if (l->phys->cu->cuMemGetInfo(&free_bytes, &total) != CUDA_SUCCESS)
        free_bytes = 0;
    pop(l->phys);
    return free_bytes;
}

static int backend_event_record(void *ctx, void *stream, void **event)
{
    struct logical_device *l = ctx;
    struct cuda_driver *cu = l->phys->cu;
    if (!push(l->phys))
        return -1;
    CUevent e;
    CUresult rc = cu->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    if (rc == CUDA_SUCCESS) {
        rc = cu->cuEventRecord(e, (CUstream)stream);
        if (rc != CUDA_SUCCESS)
            cu->cuEventDestroy(e);
    }
    pop(l->phys);
    if (rc != CUDA_SUCCESS)
        return -1;
    *event = e;
    return 0;
}

static bool backend_event_done(void *ctx, void *event)
{
    struct logical_device *l = ctx;
    /* Anything but "not ready" ends the wait: an event that cannot be
     * queried will never report completion. */
    return l->phys->cu->cuEventQuery((CUevent)event) != CUDA_ERROR_NOT_READY;
}

static void backend_event_wait(void *ctx, void *event)
{
    struct logical_device *l = ctx;
    l->phys->cu->cuEventSynchronize((CUevent)event);
}

static void backend_event_release(void *ctx, void *event)
{
    struct logical_device *l = ctx;
    l->phys->cu->cuEventDestroy((CUevent)event);
}

/* ---------------------------------------------------- visible devices */

/* Fills order[] with the driver ordinals to use, in order. Returns the
 * count, or -1 with the message recorded. */
static int choose_visible(const char *spec, const char *origin, struct physical_device *all,
                          int nall, int *order)
{
    if (!spec)
        return -1;
    if (!*spec)
        return 0;
    char items[OPT_MAX_DEVICES][64];
    parse_why why;
    int n = parse_split(spec, ',', items, OPT_MAX_DEVICES, &why);
    if (n < 0) {
        report_fail(VRAM_ERROR_CONFIG, "%s: %s; accepted: a comma-separated list of device "
                                       "ordinals or UUID prefixes",
                    origin, why.text);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int found = -1;
        uint64_t ord;
        if (isdigit((unsigned char)items[i][0])) {
            if (parse_uint(items[i], 1u << 20, &ord, &why) == 0 && ord < (uint64_t)nall)
                found = (int)ord;
        } else {
            /* A UUID prefix, with or without "GPU-"; it must name one device. */
            const char *want = strncasecmp(items[i], "GPU-", 4) == 0 ? items[i] + 4 : items[i];
            for (int d = 0; d < nall; d++) {
                if (strncasecmp(all[d].uuid + 4, want, strlen(want)) != 0)
                    continue;
                if (found >= 0) {
                    report_fail(VRAM_ERROR_CONFIG, "%s: \"%s\" matches more than one device (%s "
                                                   "and %s); give more of the UUID",
                                origin, items[i], all[found].uuid, all[d].uuid);
                    return -1;
                }
                found = d;
            }
        }
        if (found < 0) {
            report_fail(VRAM_ERROR_CONFIG, "%s: no device \"%s\"; this machine has %d device%s "
                                           "(ordinals 0 to %d; vram devices lists their UUIDs)",
                        origin, items[i], nall, nall == 1 ? "" : "s", nall - 1);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (order[j] == found) {
                report_fail(VRAM_ERROR_CONFIG, "%s: device %d (\"%s\") is listed twice", origin,
                            found, items[i]);
                return -1;
            }
        order[i] = found;
    }
    return n;
}

/* ---------------------------------------------------------------- open */

static vram_status query_physical(struct device_table *t, struct physical_device *p, int ordinal)
{
    struct cuda_driver *cu = &t->cu;
    char buf[64];
    CUresult rc;
    p->cu = cu;
    p->ordinal = ordinal;
    CUuuid uuid;
    size_t total;
    if ((rc = cu->cuDeviceGet(&p->dev, ordinal)) != CUDA_SUCCESS ||
        (rc = cu->cuDeviceGetName(p->name, sizeof p->name, p->dev)) != CUDA_SUCCESS ||
        (rc = cu->cuDeviceGetUuid(&uuid, p->dev)) != CUDA_SUCCESS ||
        (rc = cu->cuDeviceTotalMem(&total, p->dev)) != CUDA_SUCCESS)
        return report_fail(VRAM_ERROR_DRIVER, "cannot query device %d: %s", ordinal,
                           driver_error_text(cu, rc, buf));
    uuid_text((const unsigned char *)uuid.bytes, p->uuid);
    p->total = total;
    return VRAM_OK;
}

static vram_status resolve_limit(const struct limit_setting *s, const struct physical_device *p,
                                 int visible_index, uint64_t *limit, bool *configured)
{
    *configured = s->kind != LIMIT_NONE;
    switch (s->kind) {
    case LIMIT_NONE: *limit = p->total; break;
    case LIMIT_BYTES: *limit = s->bytes; break;
    case LIMIT_FRACTION: *limit = (uint64_t)((double)p->total * s->fraction); break;
    }
    if (*limit > p->total)
        return report_fail(VRAM_ERROR_CONFIG, "%s: the limit %s for device %d is more than its "
                                              "total memory %s",
                           s->origin, format_size(*limit).text, visible_index,
                           format_size(p->total).text);
    if (*limit < ARENA_GRANULE)
        return report_fail(VRAM_ERROR_CONFIG, "%s: the limit for device %d comes to %s; the "
                                              "smallest useful limit is 256 bytes",
                           s->origin, visible_index, format_size(*limit).text);
    return VRAM_OK;
}

/* A setting for a device index that is not visible is an error, not
 * something to ignore: the user meant some device. */
static vram_status check_indices(const struct options *o, int nphys)
{
    for (int d = nphys; d < OPT_MAX_DEVICES; d++) {
        const char *origin = o->limit[d].kind ? o->limit[d].origin
                             : o->virt[d].set ? o->virt[d].origin
                                              : NULL;
        if (origin)
            return report_fail(VRAM_ERROR_CONFIG, "%s: there is no visible device %d; %d "
                                                  "device%s visible (0 to %d)",
                               origin, d, nphys, nphys == 1 ? " is" : "s are", nphys - 1);
    }
    return VRAM_OK;
}

/* ------------------------------------------------------------ the daemon */

/* The table whose usage the agent reports; NULL once it is closed. */
static pthread_mutex_t reported_mu = PTHREAD_MUTEX_INITIALIZER;
static struct device_table *reported;

static void physical_usage(int v, uint64_t *used, uint64_t *peak)
{
    *used = *peak = 0;
    pthread_mutex_lock(&reported_mu);
    if (reported && v < reported->nphys) {
        struct physical_device *p = &reported->phys[v];
        for (int k = 0; k < p->nlogical; k++) {
            uint64_t reserved, peak_reserved; /* without the heap's lock */
            heap_reserved(&reported->logical[p->first_logical + k].heap, &reserved, &peak_reserved);
            *used += reserved;
            *peak += peak_reserved;
        }
    }
    pthread_mutex_unlock(&reported_mu);
}

/* A restarted vramd does not count the budget (yet): the heaps take no
 * more from the device (what they hold stays the program's). */
static void physical_allow(int v, bool allowed)
{
    pthread_mutex_lock(&reported_mu);
    if (reported && v < reported->nphys)
        atomic_store_explicit(&reported->phys[v].stopped, !allowed, memory_order_relaxed);
    pthread_mutex_unlock(&reported_mu);
}

/* Asks vramd for each physical device's budget and applies the grants. */
static vram_status ask_daemon(struct device_table *t)
{
    for (int v = 0; v < t->nphys; v++) {
        struct physical_device *p = &t->phys[v];
        struct logical_device *first = &t->logical[p->first_logical];
        uint64_t want = 0, granted = 0;
        bool configured = first->limit_configured;
        for (int k = 0; k < p->nlogical; k++)
            want += t->logical[p->first_logical + k].limit;
        char why[1024];
        switch (agent_request(v, p->uuid, p->total, configured ? want : 0, physical_usage,
                              physical_allow, &granted, why, sizeof why)) {
        case AGENT_ALONE: continue;
        case AGENT_DENIED:
            return report_fail(VRAM_ERROR_OUT_OF_MEMORY, "device %d (%s): vramd granted no "
                                                         "memory: %s", v, p->uuid, why);
        case AGENT_GRANTED: break;
        }
        if (p->nlogical == 1) {
            first->limit = granted;
            first->limit_configured = true;
            snprintf(first->limit_origin, sizeof first->limit_origin, "vramd's grant");
        } else if (granted < want) {
            return report_fail(VRAM_ERROR_OUT_OF_MEMORY, "device %d (%s): vramd granted %s, "
                               "less than its virtual devices' %s", v, p->uuid,
                               format_size(granted).text, format_size(want).text);
        }
        vlog(LOG_INFO, "device %d: vramd granted %s", v, format_size(granted).text);
    }
    return VRAM_OK;
}

vram_status devices_open(struct device_table *t, const struct options *call,
                         const struct options *env, bool growth, bool use_daemon)
{
    memset(t, 0, sizeof *t);
    char err[1024];
    if (driver_load(&t->cu, err, sizeof err) != 0)
        return report_fail(VRAM_ERROR_NO_DRIVER, "%s", err);
    char buf[64];
    int n = 0;
    CUresult rc = t->cu.cuDeviceGetCount(&n);
    if (rc != CUDA_SUCCESS)
        return report_fail(VRAM_ERROR_DRIVER, "cannot count devices: %s",
                           driver_error_text(&t->cu, rc, buf));
    struct physical_device *all = calloc((size_t)n + 1, sizeof *all);
    int order[OPT_MAX_DEVICES];
    vram_status st = VRAM_OK;
    for (int i = 0; i < n && st == VRAM_OK; i++)
        st = query_physical(t, &all[i], i);
    int nvis = n < OPT_MAX_DEVICES ? n : OPT_MAX_DEVICES;
    if (st == VRAM_OK) {
        const struct options *o = call->visible_set ? call : env->visible_set ? env : NULL;
        if (o)
            nvis = choose_visible(o->visible, o->visible_origin, all, n, order);
        else
            for (int i = 0; i < nvis; i++)
                order[i] = i;
        if (nvis < 0)
            st = VRAM_ERROR_CONFIG;
    }
    if (st == VRAM_OK && (st = check_indices(call, nvis)) == VRAM_OK)
        st = check_indices(env, nvis);
    if (st != VRAM_OK) {
        free(all);
        return st;
    }

    t->phys = calloc((size_t)nvis + 1, sizeof *t->phys);
    t->nphys = nvis;
    int nlogical = 0;
    for (int v = 0; v < nvis; v++) {
        t->phys[v] = all[order[v]];
        const struct virtual_setting *vs = options_virtual(call, env, v);
        nlogical += vs->set && vs->count > 0 ? vs->count : 1;
    }
    free(all);
    t->logical = calloc((size_t)nlogical + 1, sizeof *t->logical);

    /* Limits first, all of them, so a configuration error leaves nothing
     * half set up. */
    int li = 0;
    for (int v = 0; v < nvis && st == VRAM_OK; v++) {
        struct physical_device *p = &t->phys[v];
        const struct virtual_setting *vs = options_virtual(call, env, v);
        const struct limit_setting *ls = options_limit(call, env, v);
        p->first_logical = li;
        if (vs->set && vs->count > 0) {
            if (ls->kind != LIMIT_NONE) {
                st = report_fail(VRAM_ERROR_CONFIG, "device %d is split by %s and also limited by "
                                                    "%s; a split device's limits are its "
                                                    "virtual devices' sizes",
                                 v, vs->origin, ls->origin);
                break;
            }
            uint64_t sum = 0;
            for (int k = 0; k < vs->count; k++) {
                struct logical_device *l = &t->logical[li++];
                *l = (struct logical_device){.index = li - 1, .phys = p, .virtual_index = k,
                                             .limit = vs->limits[k], .limit_configured = true};
                snprintf(l->limit_origin, sizeof l->limit_origin, "%s", vs->origin);
                sum += vs->limits[k];
            }
            if (sum > p->total)
                st = report_fail(VRAM_ERROR_CONFIG, "%s: the virtual devices of device %d add up "
                                                    "to %s, more than its total memory %s",
                                 vs->origin, v, format_size(sum).text, format_size(p->total).text);
            p->nlogical = vs->count;
        } else {
            struct logical_device *l = &t->logical[li++];
            *l = (struct logical_device){.index = li - 1, .phys = p};
            st = resolve_limit(ls, p, v, &l->limit, &l->limit_configured);
            if (l->limit_configured)
                snprintf(l->limit_origin, sizeof l->limit_origin, "%s", ls->origin);
            p->nlogical = 1;
        }
    }
    t->nlogical = li;
    if (st == VRAM_OK && use_daemon)
        st = ask_daemon(t);
    if (st != VRAM_OK) {
        free(t->phys);
        free(t->logical);
        memset(t, 0, sizeof *t);
        return st;
    }

    for (int v = 0; v < nvis; v++) {
        struct physical_device *p = &t->phys[v];
        if ((rc = t->cu.cuDevicePrimaryCtxRetain(&p->ctx, p->dev)) != CUDA_SUCCESS) {
            st = report_fail(VRAM_ERROR_DRIVER, "cannot create a context on device %d (%s): %s", v,
                             p->name, driver_error_text(&t->cu, rc, buf));
            t->nphys = v; /* release only those retained */
            t->nlogical = 0;
            devices_close(t);
            return st;
        }
    }
    for (int i = 0; i < t->nlogical; i++) {
        struct logical_device *l = &t->logical[i];
        struct heap_backend be = {
            .ctx = l,
            .obtain = backend_obtain,
            .release = backend_release,
            .available = l->limit_configured ? NULL : backend_available,
            .event_record = backend_event_record,
            .event_done = backend_event_done,
            .event_wait = backend_event_wait,
            .event_release = backend_event_release,
        };
        if (heap_init(&l->heap, l->limit, growth, &be) != HEAP_OK) {
            t->nlogical = i;
            devices_close(t);
            return report_fail(VRAM_ERROR_SYSTEM, "out of host memory setting up device %d", i);
        }
        vlog(LOG_INFO, "device %d: %s (%s), limit %s%s, %s", i, l->phys->name, l->phys->uuid,
             format_size(l->limit).text, l->limit_configured ? "" : " (the whole device)",
             growth ? "growth" : "preallocation");
    }
    t->ready = true;
    pthread_mutex_lock(&reported_mu);
    reported = t;
    pthread_mutex_unlock(&reported_mu);
    return VRAM_OK;
}

void devices_close(struct device_table *t)
{
    pthread_mutex_lock(&reported_mu);
    if (reported == t)
        reported = NULL;
    pthread_mutex_unlock(&reported_mu);
    for (int i = 0; i < t->nlogical; i++)
        heap_destroy(&t->logical[i].heap);
    for (int v = 0; v < t->nphys; v++)
        if (t->phys[v].ctx)
            t->cu.cuDevicePrimaryCtxRelease(t->phys[v].dev);
    free(t->phys);
    free(t->logical);
    driver_unload(&t->cu);
    memset(t, 0, sizeof *t);
}

vram_status devices_driver_meminfo(struct device_table *t, struct physical_device *p,
                                   uint64_t *free_bytes, uint64_t *total)
{
    size_t f = 0, tot = 0;
    char buf[64];
    if (!push(p))
        return report_fail(VRAM_ERROR_DRIVER, "cannot make device %s current", p->name);
    CUresult rc = t->cu.cuMemGetInfo(&f, &tot);
    pop(p);
    if (rc != CUDA_SUCCESS)
        return report_fail(VRAM_ERROR_DRIVER, "cuMemGetInfo failed on %s: %s", p->name,
                           driver_error_text(&t->cu, rc, buf));
    *free_bytes = f;
    *total = tot;
    return VRAM_OK;
}
