/* processes: NVML's process list and memory figures, and /proc's names. */
#include "processes.h"

#include "../src/cuda/nvml_abi.h"

#include <dlfcn.h>
#include <stddef.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What NVML writes where it does not know a process's memory. */
#define NVML_VALUE_NOT_AVAILABLE 0xFFFFFFFFFFFFFFFFull

static struct {
    void *lib;
    PFN_nvmlShutdown shutdown;
    PFN_nvmlDeviceGetHandleByUUID by_uuid;
    PFN_nvmlDeviceGetMemoryInfo memory;
    PFN_nvmlDeviceGetComputeRunningProcesses_v3 processes_v3;
    PFN_nvmlDeviceGetComputeRunningProcesses processes_v1;
    PFN_nvmlErrorString error_string;
} nv;

static const char *nvml_error(nvmlReturn_t rc, char buf[32])
{
    if (nv.error_string)
        return nv.error_string(rc);
    snprintf(buf, 32, "NVML error %d", rc);
    return buf;
}

int processes_open(char *err, size_t n)
{
    nv.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nv.lib) {
        snprintf(err, n, "cannot load NVML (libnvidia-ml.so.1): %s", dlerror());
        return -1;
    }
    PFN_nvmlInit_v2 init = (PFN_nvmlInit_v2)dlsym(nv.lib, "nvmlInit_v2");
    nv.shutdown = (PFN_nvmlShutdown)dlsym(nv.lib, "nvmlShutdown");
    nv.by_uuid = (PFN_nvmlDeviceGetHandleByUUID)dlsym(nv.lib, "nvmlDeviceGetHandleByUUID");
    nv.memory = (PFN_nvmlDeviceGetMemoryInfo)dlsym(nv.lib, "nvmlDeviceGetMemoryInfo");
    nv.processes_v3 = (PFN_nvmlDeviceGetComputeRunningProcesses_v3)dlsym(
        nv.lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    nv.processes_v1 = (PFN_nvmlDeviceGetComputeRunningProcesses)dlsym(
        nv.lib, "nvmlDeviceGetComputeRunningProcesses");
    nv.error_string = (PFN_nvmlErrorString)dlsym(nv.lib, "nvmlErrorString");
    if (!init || !nv.by_uuid || !nv.memory || (!nv.processes_v3 && !nv.processes_v1)) {
        snprintf(err, n, "libnvidia-ml.so.1 lacks the NVML functions vram devices needs");
        processes_close();
        return -1;
    }
    char buf[32];
    nvmlReturn_t rc = init();
    if (rc != NVML_SUCCESS) {
        snprintf(err, n, "NVML failed to start: %s", nvml_error(rc, buf));
        nv.shutdown = NULL; /* nothing to shut down */
        processes_close();
        return -1;
    }
    return 0;
}

void processes_close(void)
{
    if (nv.shutdown)
        nv.shutdown();
    if (nv.lib)
        dlclose(nv.lib);
    memset(&nv, 0, sizeof nv);
}

static int device(const char *uuid, nvmlDevice_t *d, char *err, size_t n)
{
    char buf[32];
    nvmlReturn_t rc = nv.lib ? nv.by_uuid(uuid, d) : NVML_ERROR_UNINITIALIZED;
    if (rc != NVML_SUCCESS) {
        snprintf(err, n, "NVML does not know %s: %s", uuid, nvml_error(rc, buf));
        return -1;
    }
    return 0;
}

int processes_memory(const char *uuid, struct gpu_memory *m, char *err, size_t n)
{
    nvmlDevice_t d;
    nvmlMemory_t mem;
    char buf[32];
    if (device(uuid, &d, err, n) != 0)
        return -1;
    nvmlReturn_t rc = nv.memory(d, &mem);
    if (rc != NVML_SUCCESS) {
        snprintf(err, n, "NVML cannot read the memory of %s: %s", uuid, nvml_error(rc, buf));
        return -1;
    }
    *m = (struct gpu_memory){mem.total, mem.used, mem.free};
    return 0;
}

/* One call to whichever list NVML has (_v3 first), into room for *count
 * entries; NVML's convention: too small a buffer gives
 * NVML_ERROR_INSUFFICIENT_SIZE and the count needed. The older entry is
 * the start of the newer one, so one loop reads both. */
_Static_assert(offsetof(nvmlProcessInfo_t, pid) == offsetof(nvmlProcessInfo_v1_t, pid) &&
                   offsetof(nvmlProcessInfo_t, usedGpuMemory) ==
                       offsetof(nvmlProcessInfo_v1_t, usedGpuMemory),
               "NVML's process entries share their start");

static nvmlReturn_t list(nvmlDevice_t d, unsigned *count, struct gpu_process *out)
{
    size_t stride = nv.processes_v3 ? sizeof(nvmlProcessInfo_t) : sizeof(nvmlProcessInfo_v1_t);
    unsigned char *buf = calloc(*count, stride);
    if (!buf)
        return NVML_ERROR_UNKNOWN;
    nvmlReturn_t rc = nv.processes_v3 ? nv.processes_v3(d, count, (nvmlProcessInfo_t *)buf)
                                      : nv.processes_v1(d, count, (nvmlProcessInfo_v1_t *)buf);
    for (unsigned i = 0; rc == NVML_SUCCESS && i < *count; i++) {
        nvmlProcessInfo_v1_t p;
        memcpy(&p, buf + i * stride, sizeof p);
        out[i] = (struct gpu_process){p.pid, p.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE,
                                      p.usedGpuMemory};
    }
    free(buf);
    return rc;
}

int processes_on(const char *uuid, struct gpu_process **out, char *err, size_t n)
{
    nvmlDevice_t d;
    char buf[32];
    *out = NULL;
    if (device(uuid, &d, err, n) != 0)
        return -1;
    /* The list can grow between asking its size and reading it: a few
     * tries, each with room for what the last one said plus some. */
    unsigned cap = 64;
    for (int attempt = 0; attempt < 4; attempt++) {
        struct gpu_process *p = calloc(cap, sizeof *p);
        if (!p) {
            snprintf(err, n, "out of memory");
            return -1;
        }
        unsigned count = cap;
        nvmlReturn_t rc = list(d, &count, p);
        if (rc == NVML_SUCCESS) {
            *out = p;
            return (int)count;
        }
        free(p);
        if (rc != NVML_ERROR_INSUFFICIENT_SIZE) {
            snprintf(err, n, "NVML cannot list the processes of %s: %s", uuid,
                     nvml_error(rc, buf));
            return -1;
        }
        cap = count + 16;
    }
    snprintf(err, n, "NVML's list of processes of %s kept growing while it was read", uuid);
    return -1;
}

void process_identify(unsigned pid, struct process_identity *id)
{
    id->uid = -1;
    snprintf(id->user, sizeof id->user, "-");
    snprintf(id->command, sizeof id->command, "-");
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%u/status", pid);
    FILE *f = fopen(path, "re");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "Uid:", 4) == 0) {
                id->uid = strtol(line + 4, NULL, 10);
                break;
            }
        fclose(f);
    }
    if (id->uid >= 0) {
        struct passwd pw, *res = NULL;
        char buf[4096];
        if (getpwuid_r((uid_t)id->uid, &pw, buf, sizeof buf, &res) == 0 && res)
            snprintf(id->user, sizeof id->user, "%s", pw.pw_name);
        else
            snprintf(id->user, sizeof id->user, "%ld", id->uid);
    }
    snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
    f = fopen(path, "re");
    if (f) {
        size_t len = fread(id->command, 1, sizeof id->command - 1, f);
        fclose(f);
        while (len > 0 && id->command[len - 1] == 0)
            len--;
        for (size_t i = 0; i < len; i++)
            if (id->command[i] == 0 || id->command[i] == '\n' || id->command[i] == '\t')
                id->command[i] = ' ';
        id->command[len] = 0;
        if (len == 0) /* a kernel thread or a zombie: its name, at least */
            snprintf(id->command, sizeof id->command, "-");
    }
}
