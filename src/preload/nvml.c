/* nvml: NVML's memory figures and process list, through the same view as
 * CUDA's.
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
 * 2 GiB device with someone else's 3 GiB process on it. Without a budget
 * every call passes through unchanged. */
#include "interposer.h"
#include "../cuda/uuid.h"
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

static size_t entry_size(enum layout l)
{
    return l == V1 ? sizeof(nvmlProcessInfo_v1_t) : sizeof(nvmlProcessInfo_t);
}

/* NVML's list, into a malloc()ed array (*n entries); the real call's error. */
static nvmlReturn_t read_list(enum layout l, nvmlDevice_t d, struct entry **out, unsigned *n)
{
    unsigned room = 64;
    for (int tries = 0; tries < 4; tries++) {
        void *raw = calloc(room, entry_size(l));
        *out = calloc(room, sizeof **out);
        if (!raw || !*out) {
            free(raw);
            free(*out);
            return NVML_ERROR_UNKNOWN;
        }
        unsigned count = room;
        nvmlReturn_t rc = real_list(l, d, &count, raw);
        if (rc == NVML_SUCCESS) {
            for (unsigned i = 0; i < count; i++) {
                if (l == V1) {
                    nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *)raw + i;
                    (*out)[i] = (struct entry){p->pid, p->usedGpuMemory, 0xFFFFFFFFu, 0xFFFFFFFFu};
                } else {
                    nvmlProcessInfo_t *p = (nvmlProcessInfo_t *)raw + i;
                    (*out)[i] = (struct entry){p->pid, p->usedGpuMemory, p->gpuInstanceId,
                                               p->computeInstanceId};
                }
            }
            *n = count;
        }
        free(raw);
        if (rc != NVML_SUCCESS)
            free(*out);
        if (rc != NVML_ERROR_INSUFFICIENT_SIZE)
            return rc;
        room = count + 16; /* the list grew while it was read */
    }
    return NVML_ERROR_INSUFFICIENT_SIZE;
}

static nvmlReturn_t processes(enum layout l, nvmlDevice_t d, unsigned *count, void *infos)
{
    need_real();
    need_nvml();
    nvmlMemory_t m;
    bool have = l == V1   ? real.nvmlDeviceGetComputeRunningProcesses != NULL
                : l == V2 ? real.nvmlDeviceGetComputeRunningProcesses_v2 != NULL
                          : real.nvmlDeviceGetComputeRunningProcesses_v3 != NULL;
    if (!real.nvmlDeviceGetMemoryInfo || !have)
        return NVML_ERROR_UNINITIALIZED;
    unsigned long long total, free_b;
    if (!count || real.nvmlDeviceGetMemoryInfo(d, &m) != NVML_SUCCESS ||
        !budget_of(d, m.free, m.total, &total, &free_b))
        return real_list(l, d, count, infos);
    struct entry *e;
    unsigned n;
    nvmlReturn_t rc = read_list(l, d, &e, &n);
    if (rc != NVML_SUCCESS)
        return rc;
    /* The command's first, then the others in what is left of used. */
    unsigned long long left = total - free_b;
    unsigned shown = 0;
    for (unsigned i = 0; i < n; i++)
        if (command_member((int)e[i].pid)) {
            left -= e[i].used < left ? e[i].used : left;
            struct entry t = e[shown];
            e[shown++] = e[i];
            e[i] = t;
        }
    for (unsigned i = shown; i < n; i++) {
        unsigned long long part = e[i].used < left ? e[i].used : left;
        if (part == 0)
            continue;
        left -= part;
        e[shown] = e[i];
        e[shown++].used = part;
    }
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
