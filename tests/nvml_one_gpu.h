/* What the test programs' own libnvidia-ml.so.1 (nvml_stall.c, nvml_liar.c)
 * share: NVML started, and one GPU, index 0, whose handle is the_gpu. Each
 * says the rest itself (its UUID, its memory, its process list). Included
 * once, by the library's one source file. */
#ifndef VRAM_TEST_NVML_ONE_GPU_H
#define VRAM_TEST_NVML_ONE_GPU_H

#include "../src/cuda/nvml_abi.h"

#define EXPORT __attribute__((visibility("default")))

static struct nvmlDevice_st {
    int index;
} the_gpu;

EXPORT nvmlReturn_t nvmlInit_v2(void) { return NVML_SUCCESS; }

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    *count = 1;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (index != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &the_gpu;
    return NVML_SUCCESS;
}

#endif
