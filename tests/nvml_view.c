/* Inside `vram run`, what a monitor reads from NVML: this process takes a
 * CUDA context and HOLD bytes, then prints cuMemGetInfo, NVML's memory
 * figures (_v1 and _v2), its compute process list (_v1 and _v3) and the
 * processes its per-process utilisation lists (the original call and the
 * versioned one), one line each, for test_nvml_view.sh:
 *   cuda TOTAL FREE / mem TOTAL USED FREE / mem2 TOTAL RESERVED USED FREE /
 *   proc self:BYTES other:BYTES ... / proc3 ... / util self other ... /
 *   utilv ... / acct self other ... (the processes accounting lists, where
 *   VRAM_SIM_ACCOUNTING turns it on) / acctstats OTHER RC (what asking for
 *   process OTHER's accounting answers, when it is given)
 *     nvml_view HOLD [OTHER]
 * Both libraries are found with dlopen and dlsym, as monitors find them. */
#include "../src/cuda/cuda_abi.h"
#include "../src/cuda/nvml_abi.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *cuda, *nvml;

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "nvml_view: no %s\n", name);
        exit(1);
    }
    return p;
}
#define CU(name) ((PFN_##name)sym(cuda, #name))
#define NV(name) ((PFN_##name)sym(nvml, #name))
#define OK(call, want)                                                                          \
    do {                                                                                        \
        int rc_ = (call);                                                                       \
        if (rc_ != (want)) {                                                                    \
            fprintf(stderr, "nvml_view: %s: error %d\n", #call, rc_);                          \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static void list(const char *label, int v3, nvmlDevice_t d)
{
    unsigned n = 0;
    nvmlReturn_t rc = v3 ? NV(nvmlDeviceGetComputeRunningProcesses_v3)(d, &n, NULL)
                         : NV(nvmlDeviceGetComputeRunningProcesses)(d, &n, NULL);
    if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE)
        OK(rc, NVML_SUCCESS);
    nvmlProcessInfo_t *p3 = calloc(n + 1, sizeof *p3);
    nvmlProcessInfo_v1_t *p1 = calloc(n + 1, sizeof *p1);
    if (v3)
        OK(NV(nvmlDeviceGetComputeRunningProcesses_v3)(d, &n, p3), NVML_SUCCESS);
    else
        OK(NV(nvmlDeviceGetComputeRunningProcesses)(d, &n, p1), NVML_SUCCESS);
    printf("%s", label);
    for (unsigned i = 0; i < n; i++) {
        unsigned pid = v3 ? p3[i].pid : p1[i].pid;
        printf(" %s:%llu", pid == (unsigned)getpid() ? "self" : "other",
               v3 ? p3[i].usedGpuMemory : p1[i].usedGpuMemory);
    }
    printf("\n");
    free(p1);
    free(p3);
}

/* Who NVML's per-process utilisation lists: self or other, in its order. */
static void utilisation(nvmlDevice_t d)
{
    enum { ROOM = 64 };
    nvmlProcessUtilizationSample_t s[ROOM];
    unsigned n = ROOM;
    nvmlReturn_t rc = NV(nvmlDeviceGetProcessUtilization)(d, s, &n, 0);
    if (rc != NVML_ERROR_NOT_FOUND)
        OK(rc, NVML_SUCCESS);
    printf("util");
    for (unsigned i = 0; rc == NVML_SUCCESS && i < n; i++)
        printf(" %s", s[i].pid == (unsigned)getpid() ? "self" : "other");
    nvmlProcessUtilizationInfo_v1_t a[ROOM];
    nvmlProcessesUtilizationInfo_t info = {.version = nvmlProcessesUtilizationInfo_v1,
                                           .processSamplesCount = ROOM, .procUtilArray = a};
    rc = NV(nvmlDeviceGetProcessesUtilizationInfo)(d, &info);
    if (rc != NVML_ERROR_NOT_FOUND)
        OK(rc, NVML_SUCCESS);
    printf("\nutilv");
    for (unsigned i = 0; rc == NVML_SUCCESS && i < info.processSamplesCount; i++)
        printf(" %s", a[i].pid == (unsigned)getpid() ? "self" : "other");
    printf("\n");
}

/* Who accounting lists, and its answer for process `other`. */
static void accounting(nvmlDevice_t d, unsigned other)
{
    unsigned pids[64], n = 0;
    nvmlReturn_t rc = NV(nvmlDeviceGetAccountingPids)(d, &n, NULL);
    if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE)
        OK(rc, NVML_SUCCESS);
    if (n > 64)
        n = 64;
    if (n > 0)
        OK(NV(nvmlDeviceGetAccountingPids)(d, &n, pids), NVML_SUCCESS);
    printf("acct");
    for (unsigned i = 0; i < n; i++)
        printf(" %s", pids[i] == (unsigned)getpid() ? "self" : "other");
    printf("\n");
    nvmlAccountingStats_t st;
    if (other)
        printf("acctstats %u %d\n", other, NV(nvmlDeviceGetAccountingStats)(d, other, &st));
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: nvml_view HOLD [OTHER]\n");
        return 2;
    }
    unsigned long long hold = strtoull(argv[1], NULL, 10);
    cuda = dlopen("libcuda.so.1", RTLD_NOW);
    nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!cuda || !nvml) {
        fprintf(stderr, "nvml_view: %s\n", dlerror());
        return 1;
    }
    CUcontext ctx;
    CUdeviceptr p;
    size_t free_b, total;
    OK(CU(cuInit)(0), CUDA_SUCCESS);
    OK(CU(cuDevicePrimaryCtxRetain)(&ctx, 0), CUDA_SUCCESS);
    OK(CU(cuCtxSetCurrent)(ctx), CUDA_SUCCESS);
    if (hold)
        OK(CU(cuMemAlloc_v2)(&p, hold), CUDA_SUCCESS);
    OK(CU(cuMemGetInfo_v2)(&free_b, &total), CUDA_SUCCESS);
    printf("cuda %zu %zu\n", total, free_b);

    nvmlDevice_t d;
    nvmlMemory_t m;
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    OK(NV(nvmlInit_v2)(), NVML_SUCCESS);
    OK(NV(nvmlDeviceGetHandleByIndex_v2)(0, &d), NVML_SUCCESS);
    OK(NV(nvmlDeviceGetMemoryInfo)(d, &m), NVML_SUCCESS);
    printf("mem %llu %llu %llu\n", m.total, m.used, m.free);
    OK(NV(nvmlDeviceGetMemoryInfo_v2)(d, &m2), NVML_SUCCESS);
    printf("mem2 %llu %llu %llu %llu\n", m2.total, m2.reserved, m2.used, m2.free);
    list("proc", 0, d);
    list("proc3", 1, d);
    utilisation(d);
    accounting(d, argc == 3 ? (unsigned)strtoul(argv[2], NULL, 10) : 0);
    NV(nvmlShutdown)();
    return 0;
}
