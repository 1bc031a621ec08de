/* nvml_processes: NVML's per-process figures (see nvml_processes.h). */
#include "nvml_processes.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* What NVML writes where it does not know a process's memory. */
#define NVML_VALUE_NOT_AVAILABLE 0xFFFFFFFFFFFFFFFFull

/* The older entry is the start of the newer one, so one loop reads both. */
_Static_assert(offsetof(nvmlProcessInfo_t, pid) == offsetof(nvmlProcessInfo_v1_t, pid) &&
                   offsetof(nvmlProcessInfo_t, usedGpuMemory) ==
                       offsetof(nvmlProcessInfo_v1_t, usedGpuMemory),
               "NVML's process entries share their start");

nvmlReturn_t nvml_process_list(const struct nvml_process_calls *c, nvmlDevice_t d, unsigned *count,
                               struct nvml_process *out)
{
    if (!c->v3 && !c->v1)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    size_t stride = c->v3 ? sizeof(nvmlProcessInfo_t) : sizeof(nvmlProcessInfo_v1_t);
    unsigned capacity = *count;
    unsigned char *buf = calloc(capacity ? capacity : 1, stride);
    if (!buf)
        return NVML_ERROR_UNKNOWN;
    nvmlReturn_t rc = c->v3 ? c->v3(d, count, (nvmlProcessInfo_t *)buf)
                            : c->v1(d, count, (nvmlProcessInfo_v1_t *)buf);
    /* NVML's count is NVML's word: more than the room it was given, even
     * with SUCCESS, is a list that did not fit (only `capacity` entries
     * are ever read). */
    if (rc == NVML_SUCCESS && *count > capacity)
        rc = NVML_ERROR_INSUFFICIENT_SIZE;
    for (unsigned i = 0; rc == NVML_SUCCESS && i < *count; i++) {
        nvmlProcessInfo_v1_t p;
        memcpy(&p, buf + i * stride, sizeof p);
        bool known = p.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE;
        out[i] = (struct nvml_process){p.pid, known, known ? p.usedGpuMemory : 0};
    }
    free(buf);
    return rc;
}

int nvml_process_read(const struct nvml_process_calls *c, nvmlDevice_t d,
                      struct nvml_process **out, nvmlReturn_t *rc)
{
    *out = NULL;
    unsigned cap = 64;
    for (int attempt = 0; attempt < 4; attempt++) {
        struct nvml_process *p = calloc(cap, sizeof *p);
        if (!p) {
            *rc = NVML_ERROR_UNKNOWN; /* out of memory */
            return -1;
        }
        unsigned count = cap;
        *rc = nvml_process_list(c, d, &count, p);
        if (*rc == NVML_SUCCESS && count <= cap) {
            *out = p;
            return (int)count;
        }
        free(p);
        if (*rc != NVML_ERROR_INSUFFICIENT_SIZE)
            return -1;
        /* Room for what NVML said, within reason: no GPU runs more
         * processes than this, and a count near UINT_MAX must not wrap. */
        if (count > NVML_PROCESSES_MOST - 16)
            return -1;
        cap = count + 16;
    }
    return -1;
}

int nvml_process_usage(const struct nvml_process_calls *c, nvmlDevice_t d, unsigned pid,
                       uint64_t *bytes)
{
    struct nvml_process *p;
    nvmlReturn_t rc;
    int n = nvml_process_read(c, d, &p, &rc);
    if (n < 0)
        return -1;
    int found = 0;
    for (int i = 0; i < n && !found; i++)
        if (p[i].pid == pid && p[i].used_known) {
            *bytes = p[i].used;
            found = 1;
        }
    free(p);
    return found;
}
