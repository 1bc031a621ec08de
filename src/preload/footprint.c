/* footprint: measuring what the device gives this process (footprint.h). */
#include "driver_memory.h"
#include "footprint.h"
#include "interposer.h"

#include "../util/parse.h"
#include "../util/report.h"

#include "../cuda/context_cost.h"
#include "../cuda/nvml_pid.h"
#include "../cuda/nvml_processes.h"
#include "../client/agent.h"
#include "../util/proc.h"
#include "../cuda/uuid.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static struct {
    pthread_mutex_t event; /* one measured event at a time */
    pthread_mutex_t handles; /* handle[], known[]: measures and driver_memory.c's readings */
    pthread_once_t once;
    bool nvml; /* loaded and started */
    PFN_nvmlDeviceGetHandleByUUID by_uuid;
    struct nvml_process_calls list;
    char driver[96];     /* NVML's driver version, "" when it does not say */
    bool initial_pid_ns; /* this process is in the host's pid namespace */
    nvmlDevice_t handle[BUDGET_MAX_DEVICES];
    signed char known[BUDGET_MAX_DEVICES]; /* 0 not asked, 1 handle, -1 NVML does not know it */
} fp = {.event = PTHREAD_MUTEX_INITIALIZER, .handles = PTHREAD_MUTEX_INITIALIZER,
        .once = PTHREAD_ONCE_INIT};

/* A context or module being made may hold more than it was charged until
 * it is measured: no reading of the driver's part may count that. */
void footprint_lock(void)
{
    pthread_mutex_lock(&fp.event);
    driver_memory_enter();
}
void footprint_unlock(void)
{
    driver_memory_leave();
    pthread_mutex_unlock(&fp.event);
}

static void load_nvml(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return;
    PFN_nvmlInit_v2 init = (PFN_nvmlInit_v2)real_symbol(lib, "nvmlInit_v2");
    fp.by_uuid = (PFN_nvmlDeviceGetHandleByUUID)real_symbol(lib, "nvmlDeviceGetHandleByUUID");
    fp.list.v3 = (PFN_nvmlDeviceGetComputeRunningProcesses_v3)real_symbol(
        lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    fp.list.v1 = (PFN_nvmlDeviceGetComputeRunningProcesses)real_symbol(
        lib, "nvmlDeviceGetComputeRunningProcesses");
    PFN_nvmlSystemGetDriverVersion version =
        (PFN_nvmlSystemGetDriverVersion)real_symbol(lib, "nvmlSystemGetDriverVersion");
    /* Kept loaded: the program may use NVML too, and counts its own start. */
    fp.nvml = init && fp.by_uuid && (fp.list.v3 || fp.list.v1) && init() == NVML_SUCCESS;
    if (!fp.nvml || !version || version(fp.driver, sizeof fp.driver) != NVML_SUCCESS)
        fp.driver[0] = 0;
    fp.driver[sizeof fp.driver - 1] = 0;
    fp.initial_pid_ns = proc_in_initial_pid_namespace();
    if (!fp.nvml)
        vlog(LOG_INFO, "NVML cannot say what this process holds; contexts and modules are "
                       "measured from the device's free memory");
}

/* NVML's handle of dev, or NULL when NVML cannot say. */
static bool nvml_handle(int dev, nvmlDevice_t *out)
{
    pthread_once(&fp.once, load_nvml);
    if (!fp.nvml || dev < 0 || dev >= BUDGET_MAX_DEVICES)
        return false;
    pthread_mutex_lock(&fp.handles);
    if (!fp.known[dev]) {
        CUuuid u;
        char text[UUID_TEXT_SIZE];
        fp.known[dev] = -1;
        if (real.cuDeviceGetUuid && real.cuDeviceGetUuid(&u, dev) == CUDA_SUCCESS) {
            uuid_text((const unsigned char *)u.bytes, text);
            if (fp.by_uuid(text, &fp.handle[dev]) == NVML_SUCCESS)
                fp.known[dev] = 1;
        }
    }
    bool known = fp.known[dev] > 0;
    *out = fp.handle[dev];
    pthread_mutex_unlock(&fp.handles);
    return known;
}

struct nvml_pid_view footprint_nvml_self(void)
{
    pthread_once(&fp.once, load_nvml);
    return nvml_pid_view(fp.driver[0] ? fp.driver : NULL, fp.initial_pid_ns, (unsigned)getpid(),
                         agent_host_pid());
}

/* What NVML says this process holds on dev: 1 (listed), 0 (not listed),
 * -1 (NVML cannot say, or cannot name this process). */
static int nvml_usage(int dev, uint64_t *bytes)
{
    nvmlDevice_t h;
    if (!nvml_handle(dev, &h))
        return -1;
    struct nvml_pid_view self = footprint_nvml_self();
    if (!self.self)
        return -1;
    *bytes = 0;
    return nvml_process_usage(&fp.list, h, self.self, bytes);
}

int footprint_nvml_read(int dev, struct nvml_process **out)
{
    nvmlDevice_t h;
    nvmlReturn_t rc;
    *out = NULL;
    return nvml_handle(dev, &h) ? nvml_process_read(&fp.list, h, out, &rc) : -1;
}

static int free_in(CUcontext ctx, uint64_t *bytes)
{
    size_t f = 0, t;
    CUcontext popped;
    if (!ctx || !real.cuCtxPushCurrent_v2 || !real.cuCtxPopCurrent_v2 ||
        real.cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS)
        return -1;
    CUresult rc = real.cuMemGetInfo_v2(&f, &t);
    real.cuCtxPopCurrent_v2(&popped);
    *bytes = f;
    return rc == CUDA_SUCCESS ? 0 : -1;
}

void footprint_begin(struct footprint *f, int dev, CUcontext ctx)
{
    f->dev = dev;
    f->listed = nvml_usage(dev, &f->used);
    /* Not listed yet: NVML may not see this process at all, so the free
     * memory is read too, where there is a context to read it in. */
    f->has_free = f->listed <= 0 && free_in(ctx, &f->free) == 0;
}

int footprint_end(struct footprint *f, CUcontext ctx, bool fresh, uint64_t *bytes)
{
    uint64_t now;
    if (f->listed >= 0 && nvml_usage(f->dev, &now) > 0) {
        *bytes = now > f->used ? now - f->used : 0;
        return 0;
    }
    /* Not listed after the call either: NVML cannot see this process (or
     * it holds nothing); the driver can say. */
    if (f->has_free && free_in(ctx, &now) == 0) {
        *bytes = f->free > now ? f->free - now : 0;
        return 0;
    }
    if (!fresh)
        return -1;
    struct context_calls c = {real.cuCtxPushCurrent_v2, real.cuCtxPopCurrent_v2,
                              real.cuMemGetInfo_v2, real.cuCtxCreate_v2, real.cuCtxDestroy_v2};
    return context_cost_by_scratch(&c, ctx, f->dev, bytes);
}

void footprint_after_fork(void)
{
    pthread_mutex_init(&fp.event, NULL);
    pthread_mutex_init(&fp.handles, NULL);
}

/* ---------------------------------------------------------------- charges */

bool footprint_room(struct footprint_charges *t)
{
    if (t->n < t->cap)
        return true;
    int cap = t->cap ? t->cap * 2 : 16;
    struct footprint_charge *grown = realloc(t->v, (size_t)cap * sizeof *grown);
    if (!grown)
        return false;
    t->v = grown;
    t->cap = cap;
    return true;
}

void footprint_charged(struct footprint_charges *t, const void *handle, int dev, uint64_t bytes)
{
    t->v[t->n++] = (struct footprint_charge){handle, dev, bytes, 1};
}

struct footprint_charge *footprint_find(struct footprint_charges *t, const void *handle)
{
    for (int i = 0; i < t->n; i++)
        if (t->v[i].handle == handle)
            return &t->v[i];
    return NULL;
}

bool footprint_ended(struct footprint_charges *t, const void *handle, enum command_part part,
                     enum record_family family)
{
    for (int i = 0; i < t->n; i++)
        if (t->v[i].handle == handle) {
            budget_release_part(t->v[i].dev, t->v[i].bytes, part);
            record_free(family, t->v[i].dev, (uint64_t)(uintptr_t)handle, t->v[i].bytes, 0);
            t->v[i] = t->v[--t->n];
            return true;
        }
    return false;
}

void footprint_forget(struct footprint_charges *t)
{
    free(t->v);
    *t = (struct footprint_charges){0};
}
