/* nvml_reader: NVML as the interposer reads it (nvml_reader.h). */
#include "nvml_reader.h"
#include "real.h"

#include "../client/agent.h"
#include "../cuda/nvml_processes.h"
#include "../cuda/uuid.h"
#include "../util/proc.h"
#include "../util/report.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>

#define MAX_DEVICES 64

static struct {
    pthread_mutex_t handles; /* handle[], known[] */
    pthread_once_t once;
    bool nvml; /* loaded and started */
    PFN_nvmlDeviceGetHandleByUUID by_uuid;
    struct nvml_process_calls list;
    char driver[96];     /* NVML's driver version, "" when it does not say */
    bool initial_pid_ns; /* this process is in the host's pid namespace */
    nvmlDevice_t handle[MAX_DEVICES];
    signed char known[MAX_DEVICES]; /* 0 not asked, 1 handle, -1 NVML does not know it */
} nr = {.handles = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

static void load_nvml(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return;
    PFN_nvmlInit_v2 init = (PFN_nvmlInit_v2)real_symbol(lib, "nvmlInit_v2");
    nr.by_uuid = (PFN_nvmlDeviceGetHandleByUUID)real_symbol(lib, "nvmlDeviceGetHandleByUUID");
    nr.list.v3 = (PFN_nvmlDeviceGetComputeRunningProcesses_v3)real_symbol(
        lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    nr.list.v1 = (PFN_nvmlDeviceGetComputeRunningProcesses)real_symbol(
        lib, "nvmlDeviceGetComputeRunningProcesses");
    PFN_nvmlSystemGetDriverVersion version =
        (PFN_nvmlSystemGetDriverVersion)real_symbol(lib, "nvmlSystemGetDriverVersion");
    /* Kept loaded: the program may use NVML too, and counts its own start. */
    nr.nvml = init && nr.by_uuid && (nr.list.v3 || nr.list.v1) && init() == NVML_SUCCESS;
    if (!nr.nvml || !version || version(nr.driver, sizeof nr.driver) != NVML_SUCCESS)
        nr.driver[0] = 0;
    nr.driver[sizeof nr.driver - 1] = 0;
    nr.initial_pid_ns = proc_in_initial_pid_namespace();
    if (!nr.nvml)
        vlog(LOG_INFO, "NVML cannot say what this process holds; contexts and modules are "
                       "measured from the device's free memory");
}

/* NVML's handle of dev; false when NVML cannot say. */
static bool nvml_handle(int dev, nvmlDevice_t *out)
{
    pthread_once(&nr.once, load_nvml);
    if (!nr.nvml || dev < 0 || dev >= MAX_DEVICES)
        return false;
    pthread_mutex_lock(&nr.handles);
    if (!nr.known[dev]) {
        char text[UUID_TEXT_SIZE];
        nr.known[dev] = -1;
        if (real_device_uuid(dev, text) == 0 && nr.by_uuid(text, &nr.handle[dev]) == NVML_SUCCESS)
            nr.known[dev] = 1;
    }
    bool known = nr.known[dev] > 0;
    *out = nr.handle[dev];
    pthread_mutex_unlock(&nr.handles);
    return known;
}

struct nvml_pid_view nvml_reader_self(void)
{
    pthread_once(&nr.once, load_nvml);
    return nvml_pid_view(nr.driver[0] ? nr.driver : NULL, nr.initial_pid_ns, (unsigned)getpid(),
                         agent_host_pid());
}

int nvml_reader_own(int dev, uint64_t *bytes)
{
    nvmlDevice_t h;
    if (!nvml_handle(dev, &h))
        return -1;
    struct nvml_pid_view self = nvml_reader_self();
    if (!self.self)
        return -1;
    *bytes = 0;
    return nvml_process_usage(&nr.list, h, self.self, bytes);
}

int nvml_reader_list(int dev, struct nvml_process **out)
{
    nvmlDevice_t h;
    nvmlReturn_t rc;
    *out = NULL;
    return nvml_handle(dev, &h) ? nvml_process_read(&nr.list, h, out, &rc) : -1;
}

void nvml_reader_after_fork(void) { pthread_mutex_init(&nr.handles, NULL); }
