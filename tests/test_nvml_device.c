/* The simulated NVML answers as the measured H100 SXM5 does: its memory
 * figures (NVML's total with the driver's reserve; _v1 counting the reserve
 * as used, _v2 giving it apart; CUDA's total without it) agree with CUDA's;
 * the board's figures monitors and hwloc read; load that follows what
 * processes hold; and what the board lacks, or nothing models, is
 * NVML_ERROR_NOT_SUPPORTED, never a missing symbol. */
#include "../src/cuda/cuda_abi.h"
#include "../src/cuda/nvml_api.h"
#include "check.h"

#include <dlfcn.h>
#include <unistd.h>

static void *cuda;
#define CU(name) ((PFN_##name)dlsym(cuda, #name))
#define NV_OK(call) CHECK((call) == NVML_SUCCESS)

static nvmlDevice_t h;

static void memory_agrees_with_cuda(void)
{
    nvmlMemory_t v1;
    nvmlMemory_v2_t v2 = {.version = nvmlMemory_v2};
    size_t cuda_total, cuda_free;
    NV_OK(nvmlDeviceGetMemoryInfo(h, &v1));
    NV_OK(nvmlDeviceGetMemoryInfo_v2(h, &v2));
    /* Idle, as the H100 measured it (issue 21). */
    CHECK(v1.total == 81559 * MiB && v1.used == 480 * MiB && v1.free == v1.total - v1.used);
    CHECK(v2.total == 81559 * MiB && v2.reserved == 480 * MiB && v2.used == 0);
    CHECK(v2.free == v1.free);
    CHECK(CU(cuDeviceTotalMem_v2)(&cuda_total, 0) == CUDA_SUCCESS);
    CHECK(cuda_total == v2.total - v2.reserved); /* 79.18 GiB */

    /* A context and an allocation: CUDA's free is NVML's; _v2's used is
     * what processes hold, _v1's adds the reserve. */
    CUcontext ctx;
    CUdeviceptr p;
    CHECK(CU(cuDevicePrimaryCtxRetain)(&ctx, 0) == CUDA_SUCCESS);
    CHECK(CU(cuCtxSetCurrent)(ctx) == CUDA_SUCCESS);
    CHECK(CU(cuMemAlloc_v2)(&p, 40ull << 30) == CUDA_SUCCESS);
    CHECK(CU(cuMemGetInfo_v2)(&cuda_free, &cuda_total) == CUDA_SUCCESS);
    NV_OK(nvmlDeviceGetMemoryInfo(h, &v1));
    NV_OK(nvmlDeviceGetMemoryInfo_v2(h, &v2));
    CHECK(cuda_total == 81079 * MiB && cuda_free == v2.free && v1.free == v2.free);
    CHECK(v2.used == cuda_total - cuda_free && v2.used >= 40ull << 30);
    CHECK(v1.used == v2.used + v2.reserved);
    CHECK(v2.reserved + v2.used + v2.free == v2.total);

    /* Load follows what processes hold: about half the device. */
    nvmlUtilization_t u;
    unsigned mw, temp, n = 8;
    nvmlProcessUtilizationSample_t s[8];
    NV_OK(nvmlDeviceGetUtilizationRates(h, &u));
    CHECK(u.gpu >= 49 && u.gpu <= 52 && u.memory == u.gpu);
    NV_OK(nvmlDeviceGetPowerUsage(h, &mw));
    CHECK(mw > 70000 && mw < 700000);
    NV_OK(nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU, &temp));
    CHECK(temp > 30 && temp < 87);
    NV_OK(nvmlDeviceGetProcessUtilization(h, s, &n, 0));
    CHECK(n == 1 && s[0].pid == (unsigned)getpid() && s[0].smUtil == u.gpu);
    unsigned long long e1, e2;
    NV_OK(nvmlDeviceGetTotalEnergyConsumption(h, &e1));
    usleep(20000);
    NV_OK(nvmlDeviceGetTotalEnergyConsumption(h, &e2));
    CHECK(e2 > e1); /* 20 ms at over 70 W: more than a joule */
    CHECK(CU(cuMemFree_v2)(p) == CUDA_SUCCESS);
    NV_OK(nvmlDeviceGetUtilizationRates(h, &u));
    CHECK(u.gpu <= 1);
}

static void the_board(void)
{
    unsigned v, a, b;
    char text[96];
    unsigned long long ull;
    int state, pending;
    NV_OK(nvmlDeviceGetMaxPcieLinkGeneration(h, &v));
    CHECK(v == 5);
    NV_OK(nvmlDeviceGetMaxPcieLinkWidth(h, &v));
    CHECK(v == 16);
    NV_OK(nvmlDeviceGetCurrPcieLinkGeneration(h, &v));
    CHECK(v == 5);
    NV_OK(nvmlDeviceGetCurrPcieLinkWidth(h, &v));
    CHECK(v == 16);
    NV_OK(nvmlDeviceGetPcieThroughput(h, 0, &v));
    NV_OK(nvmlDeviceGetPowerManagementLimit(h, &v));
    CHECK(v == 700000);
    NV_OK(nvmlDeviceGetEnforcedPowerLimit(h, &v));
    CHECK(v == 700000);
    NV_OK(nvmlDeviceGetMaxClockInfo(h, NVML_CLOCK_SM, &a));
    NV_OK(nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM, &b));
    CHECK(a == 1980 && b <= a);
    NV_OK(nvmlDeviceGetEccMode(h, &state, &pending));
    CHECK(state == 1 && pending == 1);
    NV_OK(nvmlDeviceGetTotalEccErrors(h, 1 /* uncorrected */, 1 /* aggregate */, &ull));
    CHECK(ull == 0);
    NV_OK(nvmlDeviceGetSerial(h, text, sizeof text));
    CHECK(strlen(text) == 13);
    NV_OK(nvmlDeviceGetVbiosVersion(h, text, sizeof text));
    NV_OK(nvmlDeviceGetBoardPartNumber(h, text, sizeof text));
    NV_OK(nvmlDeviceGetBoardId(h, &v));
    NV_OK(nvmlDeviceGetEncoderUtilization(h, &a, &b));
    CHECK(a == 0 && b > 0);
    NV_OK(nvmlDeviceGetDecoderUtilization(h, &a, &b));
    CHECK(a == 0);
    NV_OK(nvmlDeviceGetDisplayActive(h, &state));
    CHECK(state == 0);
    NV_OK(nvmlDeviceGetDisplayMode(h, &state));
    CHECK(state == 0);
    /* What an SXM board on Linux lacks, what the measured single H100
     * (driver 580) did not support, and what nothing models. */
    CHECK(nvmlDeviceGetNvLinkState(h, 0, &state) == NVML_ERROR_NOT_SUPPORTED);
    CHECK(nvmlDeviceGetFanSpeed(h, &v) == NVML_ERROR_NOT_SUPPORTED);
    CHECK(nvmlDeviceGetDriverModel_v2(h, &state, &pending) == NVML_ERROR_NOT_SUPPORTED);
    CHECK(nvmlDeviceGetVgpuUtilization(h, 0, NULL, NULL, NULL) == NVML_ERROR_NOT_SUPPORTED);
}

int main(void)
{
    private_gpu(""); /* no sizes given: the profile's own device */
    unsetenv("VRAM_SIM_CONTEXT_SIZE");
    cuda = dlopen("libcuda.so.1", RTLD_NOW);
    CHECK(cuda != NULL);
    /* Before nvmlInit a function nothing models says so, as every other. */
    unsigned v;
    CHECK(nvmlDeviceGetNumFans(NULL, &v) == NVML_ERROR_UNINITIALIZED);
    CHECK(nvmlDeviceGetGspFirmwareMode(NULL, NULL, NULL) == NVML_ERROR_UNINITIALIZED);
    CHECK(CU(cuInit)(0) == CUDA_SUCCESS);
    NV_OK(nvmlInit_v2());
    NV_OK(nvmlDeviceGetHandleByIndex_v2(0, &h));
    the_board();
    memory_agrees_with_cuda();
    NV_OK(nvmlShutdown());
    puts("test_nvml_device: passed");
    return 0;
}
