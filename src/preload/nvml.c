/* nvml: NVML's memory figures, process list, per-process utilisation and
 * accounting, through the same view as CUDA's.
 *
 * Inside a budget NVML answers with the command's own view, as CUDA does:
 * the device is the budget. Its total is the budget; its free is what
 * cuMemGetInfo says the command can still have; its used is the rest (what
 * the command holds, and other processes' memory only where the device has
 * less free than the budget leaves). The driver's reserve is outside every
 * budget: _v2's reserved is 0. The process list adds up to that used: the
 * command's processes at their size, then other processes, each shown only
 * as far as it fits in what remains of used (in NVML's order), and left out
 * when nothing remains. A monitor run under `vram run` thus never shows a
 * 2 GiB device with someone else's 3 GiB process on it. The per-process
 * utilisation and accounting queries list the processes that list lists
 * and no other, so that every query shows one view. Without a budget every call passes
 * through unchanged. */
#include "interposer.h"
#include "../cuda/uuid.h"
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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
            char text[UUID_TEXT_SIZE];
            if (real.cuDeviceGetUuid(&u, o) == CUDA_SUCCESS) {
                uuid_text((const unsigned char *)u.bytes, text);
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

/* The budget's view of a device, from NVML's own free and total: its
 * total and free as cuMemGetInfo gives them. False when d has no budget. */
static bool budget_of(nvmlDevice_t d, unsigned long long phys_free, unsigned long long phys_total,
                      unsigned long long *total, unsigned long long *free_b)
{
    pthread_once(&budget_once, setup_budgets);
    int dev = cuda_ordinal_of(d);
    if (dev < 0 || !budget_limited(dev))
        return false;
    uint64_t f, t;
    budget_view(dev, phys_free, phys_total, &f, &t);
    *total = t;
    *free_b = f;
    return true;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    need_real();
    need_nvml();
    if (!real.nvmlDeviceGetMemoryInfo)
        return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t rc = real.nvmlDeviceGetMemoryInfo(d, m);
    unsigned long long t, f;
    if (rc == NVML_SUCCESS && budget_of(d, m->free, m->total, &t, &f))
        *m = (nvmlMemory_t){.total = t, .free = f, .used = t - f};
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
    need_real();
    need_nvml();
    if (!real.nvmlDeviceGetMemoryInfo_v2)
        return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t rc = real.nvmlDeviceGetMemoryInfo_v2(d, m);
    unsigned long long t, f;
    if (rc == NVML_SUCCESS && budget_of(d, m->free, m->total, &t, &f)) {
        m->total = t;
        m->reserved = 0;
        m->free = f;
        m->used = t - f;
    }
    return rc;
}

/* --------------------------------------------------------- process list */

/* NVML's entries in one form, whichever layout the caller asked for. */
struct entry {
    unsigned pid;
    unsigned long long used;
    unsigned gi, ci;
};
enum layout { V1, V2, V3 };

static nvmlReturn_t real_list(enum layout l, nvmlDevice_t d, unsigned *count, void *infos)
{
    switch (l) {
    case V1: return real.nvmlDeviceGetComputeRunningProcesses(d, count, infos);
    case V2: return real.nvmlDeviceGetComputeRunningProcesses_v2(d, count, infos);
    default: return real.nvmlDeviceGetComputeRunningProcesses_v3(d, count, infos);
    }
}

static bool have_list(enum layout l)
{
    return l == V1   ? real.nvmlDeviceGetComputeRunningProcesses != NULL
           : l == V2 ? real.nvmlDeviceGetComputeRunningProcesses_v2 != NULL
                     : real.nvmlDeviceGetComputeRunningProcesses_v3 != NULL;
}

/* One of NVML's lists, whole: read(d, arg, buffer, &count) into buffers of
 * `size`-byte entries, larger each time the list grew while it was read,
 * into a malloc()ed array of *n entries; the real call's error. */
typedef nvmlReturn_t (*list_reader)(nvmlDevice_t d, const void *arg, void *buffer, unsigned *count);
static nvmlReturn_t read_all(list_reader read, nvmlDevice_t d, const void *arg, size_t size,
                             void **out, unsigned *n)
{
    unsigned room = 64;
    for (int tries = 0; tries < 4; tries++) {
        *out = calloc(room, size);
        if (!*out)
            return NVML_ERROR_UNKNOWN;
        unsigned count = room;
        nvmlReturn_t rc = read(d, arg, *out, &count);
        if (rc == NVML_SUCCESS) {
            *n = count;
            return rc;
        }
        free(*out);
        if (rc != NVML_ERROR_INSUFFICIENT_SIZE)
            return rc;
        room = count + 16;
    }
    return NVML_ERROR_INSUFFICIENT_SIZE;
}

static nvmlReturn_t read_processes(nvmlDevice_t d, const void *layout, void *buffer, unsigned *count)
{
    return real_list(*(const enum layout *)layout, d, count, buffer);
}

/* NVML's compute processes, in one form, into a malloc()ed array (*n
 * entries); the real call's error. */
static nvmlReturn_t read_list(enum layout l, nvmlDevice_t d, struct entry **out, unsigned *n)
{
    void *raw;
    nvmlReturn_t rc =
        read_all(read_processes, d, &l, l == V1 ? sizeof(nvmlProcessInfo_v1_t) : sizeof(nvmlProcessInfo_t),
                 &raw, n);
    if (rc != NVML_SUCCESS)
        return rc;
    *out = calloc(*n + 1, sizeof **out);
    for (unsigned i = 0; *out && i < *n; i++) {
        if (l == V1) {
            nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *)raw + i;
            (*out)[i] = (struct entry){p->pid, p->usedGpuMemory, 0xFFFFFFFFu, 0xFFFFFFFFu};
        } else {
            nvmlProcessInfo_t *p = (nvmlProcessInfo_t *)raw + i;
            (*out)[i] = (struct entry){p->pid, p->usedGpuMemory, p->gpuInstanceId, p->computeInstanceId};
        }
    }
    free(raw);
    return *out ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

/* The budget's view of d's processes, the one every per-process query
 * shows: NVML's compute processes (layout l) cut to add up to the budget's
 * used, the command's first at their size, then the others in what is
 * left of used, left out when nothing is; into a malloc()ed array of
 * *shown entries, or *rc, the real call's error. False, with nothing
 * allocated, when d has no budget: the caller passes the call through. */
static bool budget_view_of(enum layout l, nvmlDevice_t d, struct entry **e, unsigned *shown,
                           nvmlReturn_t *rc)
{
    nvmlMemory_t m;
    unsigned long long total, free_b;
    if (!real.nvmlDeviceGetMemoryInfo || !have_list(l) ||
        real.nvmlDeviceGetMemoryInfo(d, &m) != NVML_SUCCESS ||
        !budget_of(d, m.free, m.total, &total, &free_b))
        return false;
    unsigned n;
    *rc = read_list(l, d, e, &n);
    if (*rc != NVML_SUCCESS)
        return true;
    unsigned long long left = total - free_b;
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++)
        if (command_member((int)(*e)[i].pid)) {
            left -= (*e)[i].used < left ? (*e)[i].used : left;
            struct entry t = (*e)[k];
            (*e)[k++] = (*e)[i];
            (*e)[i] = t;
        }
    for (unsigned i = k; i < n; i++) {
        unsigned long long part = (*e)[i].used < left ? (*e)[i].used : left;
        if (part == 0)
            continue;
        left -= part;
        (*e)[k] = (*e)[i];
        (*e)[k++].used = part;
    }
    *shown = k;
    return true;
}

static nvmlReturn_t processes(enum layout l, nvmlDevice_t d, unsigned *count, void *infos)
{
    need_real();
    need_nvml();
    if (!real.nvmlDeviceGetMemoryInfo || !have_list(l))
        return NVML_ERROR_UNINITIALIZED;
    struct entry *e;
    unsigned shown;
    nvmlReturn_t rc;
    if (!count || !budget_view_of(l, d, &e, &shown, &rc))
        return real_list(l, d, count, infos);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!infos || *count < shown) {
        *count = shown;
        free(e);
        return shown == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < shown; i++) {
        if (l == V1)
            ((nvmlProcessInfo_v1_t *)infos)[i] = (nvmlProcessInfo_v1_t){e[i].pid, e[i].used};
        else
            ((nvmlProcessInfo_t *)infos)[i] = (nvmlProcessInfo_t){e[i].pid, e[i].used, e[i].gi, e[i].ci};
    }
    *count = shown;
    free(e);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *count,
                                                         nvmlProcessInfo_v1_t *infos)
{
    return processes(V1, d, count, infos);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count,
                                                            nvmlProcessInfo_t *infos)
{
    return processes(V2, d, count, infos);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                            nvmlProcessInfo_t *infos)
{
    return processes(V3, d, count, infos);
}

/* ------------------------------------- process utilisation and accounting */

/* The budget's view of d as a set of pids, from the newest list the real
 * NVML has; false when d has no budget. */
static bool budget_pids(nvmlDevice_t d, struct entry **e, unsigned *n, nvmlReturn_t *rc)
{
    enum layout l = real.nvmlDeviceGetComputeRunningProcesses_v3 ? V3 : V1;
    return budget_view_of(l, d, e, n, rc);
}

static bool in_view(const struct entry *e, unsigned n, unsigned pid)
{
    for (unsigned i = 0; i < n; i++)
        if (e[i].pid == pid)
            return true;
    return false;
}

/* One of NVML's per-process lists of d, read whole by `read` (entries of
 * `size` bytes, each with its pid at `pid_at`), cut to the processes of
 * the budget's view, into the caller's array of *count entries, NVML's
 * way: none left is `none` (NVML_ERROR_NOT_FOUND for samples: none
 * newer), too many for the array NVML_ERROR_INSUFFICIENT_SIZE with *count
 * the entries needed; *rc says which. False when d has no budget: the
 * caller passes the call through. */
static bool viewed_list(nvmlDevice_t d, list_reader read, const void *arg, size_t size,
                        size_t pid_at, void *out, unsigned *count, nvmlReturn_t none,
                        nvmlReturn_t *rc)
{
    struct entry *view;
    unsigned shown, n, k = 0;
    if (!budget_pids(d, &view, &shown, rc))
        return false;
    if (*rc != NVML_SUCCESS)
        return true; /* no view to cut to: NVML's error */
    void *all;
    *rc = read_all(read, d, arg, size, &all, &n);
    if (*rc == NVML_SUCCESS) {
        for (unsigned i = 0; i < n; i++) {
            char *s = (char *)all + i * size;
            unsigned pid;
            memcpy(&pid, s + pid_at, sizeof pid);
            if (in_view(view, shown, pid))
                memmove((char *)all + k++ * size, s, size);
        }
        if (k == 0)
            *rc = none;
        else if (!out || *count < k)
            *rc = NVML_ERROR_INSUFFICIENT_SIZE;
        else
            memcpy(out, all, k * size);
        *count = k;
        free(all);
    }
    free(view);
    return true;
}

static nvmlReturn_t read_utilization(nvmlDevice_t d, const void *last_seen, void *buffer,
                                     unsigned *count)
{
    return real.nvmlDeviceGetProcessUtilization(d, buffer, count,
                                                *(const unsigned long long *)last_seen);
}

/* Per-process utilisation lists the processes the memory queries list,
 * and no other: a monitor under `vram run` shows the same processes in
 * both. */
EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d,
                                                    nvmlProcessUtilizationSample_t *samples,
                                                    unsigned int *count, unsigned long long last_seen)
{
    need_real();
    need_nvml();
    if (!real.nvmlDeviceGetProcessUtilization)
        return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t rc;
    if (count && viewed_list(d, read_utilization, &last_seen, sizeof *samples,
                             offsetof(nvmlProcessUtilizationSample_t, pid), samples, count,
                             NVML_ERROR_NOT_FOUND, &rc))
        return rc;
    return real.nvmlDeviceGetProcessUtilization(d, samples, count, last_seen);
}

static nvmlReturn_t read_utilization_info(nvmlDevice_t d, const void *last_seen, void *buffer,
                                          unsigned *count)
{
    nvmlProcessesUtilizationInfo_v1_t q = {.version = nvmlProcessesUtilizationInfo_v1,
                                           .processSamplesCount = *count,
                                           .lastSeenTimeStamp = *(const unsigned long long *)last_seen,
                                           .procUtilArray = buffer};
    nvmlReturn_t rc = real.nvmlDeviceGetProcessesUtilizationInfo(d, &q);
    *count = q.processSamplesCount;
    return rc;
}

/* The same in the versioned form. A version this file does not know the
 * layout of passes through. */
EXPORT nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t d,
                                                          nvmlProcessesUtilizationInfo_t *info)
{
    need_real();
    need_nvml();
    if (!real.nvmlDeviceGetProcessesUtilizationInfo)
        return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t rc;
    if (info && info->version == nvmlProcessesUtilizationInfo_v1 &&
        viewed_list(d, read_utilization_info, &info->lastSeenTimeStamp, sizeof *info->procUtilArray,
                    offsetof(nvmlProcessUtilizationInfo_v1_t, pid), info->procUtilArray,
                    &info->processSamplesCount, NVML_ERROR_NOT_FOUND, &rc))
        return rc;
    return real.nvmlDeviceGetProcessesUtilizationInfo(d, info);
}

static nvmlReturn_t read_accounted(nvmlDevice_t d, const void *unused, void *buffer, unsigned *count)
{
    (void)unused;
    return real.nvmlDeviceGetAccountingPids(d, count, buffer);
}

/* Accounting (where the administrator turned it on) lists the processes
 * of the view, and has no stats for any other. */
EXPORT nvmlReturn_t nvmlDeviceGetAccountingPids(nvmlDevice_t d, unsigned int *count,
                                                unsigned int *pids)
{
    need_real();
    need_nvml();
    if (!real.nvmlDeviceGetAccountingPids)
        return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t rc;
    if (count && viewed_list(d, read_accounted, NULL, sizeof *pids, 0, pids, count, NVML_SUCCESS, &rc))
        return rc;
    return real.nvmlDeviceGetAccountingPids(d, count, pids);
}

EXPORT nvmlReturn_t nvmlDeviceGetAccountingStats(nvmlDevice_t d, unsigned int pid,
                                                 nvmlAccountingStats_t *stats)
{
    need_real();
    need_nvml();
    if (!real.nvmlDeviceGetAccountingStats)
        return NVML_ERROR_UNINITIALIZED;
    struct entry *view;
    unsigned shown;
    nvmlReturn_t rc;
    if (stats && budget_pids(d, &view, &shown, &rc) && rc == NVML_SUCCESS) {
        bool seen = in_view(view, shown, pid);
        free(view);
        if (!seen)
            return NVML_ERROR_NOT_FOUND;
    }
    return real.nvmlDeviceGetAccountingStats(d, pid, stats);
}
