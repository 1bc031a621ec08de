/* nvml_limits: what NVML's per-cgroup memory limits (driver R615,
 * src/cuda/nvml_limits.h) say of a cgroup, for the tests of vramd's driver
 * backend:
 *     nvml_limits PATH [INDEX]
 * prints "soft=N hard=N used=N" for the cgroup at PATH on GPU INDEX
 * (default 0), or "error=NAME" with NVML's error; exits 0 either way (1
 * when NVML cannot be used at all). NVML is found with dlopen and dlsym, as
 * vramd finds it. */
#include "../src/cuda/nvml_abi.h"
#include "../src/cuda/nvml_limits.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: nvml_limits PATH [INDEX]\n");
        return 2;
    }
    void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    PFN_nvmlInit_v2 init = nvml ? (PFN_nvmlInit_v2)dlsym(nvml, "nvmlInit_v2") : NULL;
    PFN_nvmlDeviceGetHandleByIndex_v2 by_index =
        nvml ? (PFN_nvmlDeviceGetHandleByIndex_v2)dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2")
             : NULL;
    PFN_nvmlErrorString error = nvml ? (PFN_nvmlErrorString)dlsym(nvml, "nvmlErrorString") : NULL;
    PFN_nvmlDeviceGetMemoryLimits_v1 get =
        nvml ? (PFN_nvmlDeviceGetMemoryLimits_v1)dlsym(nvml, "nvmlDeviceGetMemoryLimits_v1") : NULL;
    nvmlDevice_t dev;
    if (!init || !by_index || init() != NVML_SUCCESS ||
        by_index(argc > 2 ? (unsigned)atoi(argv[2]) : 0, &dev) != NVML_SUCCESS) {
        fprintf(stderr, "nvml_limits: NVML cannot be used\n");
        return 1;
    }
    if (!get) {
        printf("error=no nvmlDeviceGetMemoryLimits_v1\n");
        return 0;
    }
    nvmlGetMemoryLimits_v1_t l = {.nameSpace = argv[1]};
    nvmlReturn_t rc = get(dev, &l);
    if (rc != NVML_SUCCESS)
        printf("error=%s\n", error ? error(rc) : "?");
    else
        printf("soft=%llu hard=%llu used=%llu\n", l.softLimit, l.hardLimit, l.currentUsed);
    return 0;
}
