/* A driver API program (linked with -lcuda): the device size it sees, what
 * it can allocate in 64 MiB steps, and what nvidia-smi then lists for it.
 * Built by tests/gpu/run.sh. */
#include "nvml_own.h"

#include <cuda.h>
#include <stdio.h>

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx))
        return 1;
    size_t free_b, total, total2, got = 0;
    cuMemGetInfo(&free_b, &total);
    cuDeviceTotalMem(&total2, dev);
    CUdeviceptr p;
    CUresult rc;
    while ((rc = cuMemAlloc(&p, 64ull << 20)) == CUDA_SUCCESS)
        got += 64ull << 20;
    const char *name;
    cuGetErrorName(rc, &name);
    printf("driver default total=%zu devicetotal=%zu got=%zu nvml=%lld error=%s\n", total, total2,
           got, nvml_own(), name);
    return 0;
}
