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

nvmlReturn_t nvml_processes(const struct nvml_process_calls *c, nvmlDevice_t d, unsigned *count,
                            struct nvml_process *out)
{
    if (!c->v3 && !c->v1)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    size_t stride = c->v3 ? sizeof(nvmlProcessInfo_t) : sizeof(nvmlProcessInfo_v1_t);
    unsigned char *buf = calloc(*count ? *count : 1, stride);
    if (!buf)
        return NVML_ERROR_UNKNOWN;
    nvmlReturn_t rc = c->v3 ? c->v3(d, count, (nvmlProcessInfo_t *)buf)
                            : c->v1(d, count, (nvmlProcessInfo_v1_t *)buf);
    for (unsigned i = 0; rc == NVML_SUCCESS && i < *count; i++) {
        nvmlProcessInfo_v1_t p;
        memcpy(&p, buf + i * stride, sizeof p);
        out[i] = (struct nvml_process){p.pid, p.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE,
                                       p.usedGpuMemory};
    }
    free(buf);
    return rc;
}

int nvml_process_usage(const struct nvml_process_calls *c, nvmlDevice_t d, unsigned pid,
                       uint64_t *bytes)
{
    /* The list can grow between asking its size and reading it: a few
     * tries, each with room for what the last one said plus some. */
    unsigned cap = 64;
    for (int attempt = 0; attempt < 4; attempt++) {
        struct nvml_process *p = calloc(cap, sizeof *p);
        if (!p)
            return -1;
        unsigned count = cap;
        nvmlReturn_t rc = nvml_processes(c, d, &count, p);
        if (rc == NVML_SUCCESS) {
            int found = 0;
            for (unsigned i = 0; i < count && !found; i++)
                if (p[i].pid == pid && p[i].used_known) {
                    *bytes = p[i].used;
                    found = 1;
                }
            free(p);
            return found;
        }
        free(p);
        if (rc != NVML_ERROR_INSUFFICIENT_SIZE)
            return -1;
        cap = count + 16;
    }
    return -1;
}
