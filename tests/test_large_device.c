/* An 80 GiB simulated device on a machine with far less memory: occupancy
 * is bookkeeping, and only the pages a program writes exist. */
#include "../src/cuda/cuda_prototypes.h"
#include "check.h"

int main(void)
{
    private_gpu("80GiB");
    CHECK_OK(vram_set_allow_growth(0)); /* take all 80 GiB at once */
    void *p;
    CHECK_OK(vram_malloc(0, 64 * MiB, NULL, &p));
    vram_stats s;
    CHECK_OK(vram_get_stats(0, &s));
    CHECK(s.bytes_reserved == 80 * GiB && s.device_free == 0 && s.device_total == 80 * GiB);
    /* Far into the reservation, data written is data read back. */
    void *far;
    CHECK_OK(vram_malloc(0, 70 * GiB, NULL, &far));
    CUcontext ctx;
    CHECK(cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
    const char msg[] = "written on the device";
    char back[sizeof msg] = "";
    CUdeviceptr at = (CUdeviceptr)(uintptr_t)far + 69 * GiB;
    CHECK(cuMemcpyHtoD_v2(at, msg, sizeof msg) == CUDA_SUCCESS);
    CHECK(cuMemcpyDtoH_v2(back, at, sizeof msg) == CUDA_SUCCESS);
    CHECK(strcmp(back, msg) == 0);
    CHECK_OK(vram_free(far, NULL));
    CHECK_OK(vram_free(p, NULL));
    vram_shutdown();
    return 0;
}
