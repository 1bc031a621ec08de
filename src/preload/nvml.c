/* nvml: NVML's memory figures, through the same view as CUDA's. */
#include "interposer.h"
#include "../cuda/uuid.h"
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
