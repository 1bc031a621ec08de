/* The simulated NVML answers as the measured H100 SXM5 does: its memory
 * figures (NVML's total with the driver's reserve; _v1 counting the reserve
 * as used, _v2 giving it apart; CUDA's total without it) agree with CUDA's;
 * the board's figures monitors and hwloc read; load that follows what
 * processes hold; where the device sits on this host and its clocks, as
 * Slurm's gpu/nvml plugin reads them; and what the board lacks, or nothing
 * models, is NVML_ERROR_NOT_SUPPORTED, never a missing symbol. */
#include "../src/cuda/cuda_abi.h"
#include "../src/cuda/nvml_api.h"
#include "../src/cuda/nvml_later.h"
#include "check.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
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
    /* The versioned query: the same sample; a buffer too small says how
     * many there are. */
    nvmlProcessUtilizationInfo_v1_t a[8];
    nvmlProcessesUtilizationInfo_t info = {.version = nvmlProcessesUtilizationInfo_v1};
    CHECK(nvmlDeviceGetProcessesUtilizationInfo(h, &info) == NVML_ERROR_INSUFFICIENT_SIZE);
    CHECK(info.processSamplesCount == 1);
    info.procUtilArray = a;
    NV_OK(nvmlDeviceGetProcessesUtilizationInfo(h, &info));
    CHECK(info.processSamplesCount == 1 && a[0].pid == (unsigned)getpid() && a[0].smUtil == u.gpu);
    info.version = nvmlProcessesUtilizationInfo_v1 + 1;
    CHECK(nvmlDeviceGetProcessesUtilizationInfo(h, &info) == NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    /* Temperature through the versioned call too (nvitop uses it where
     * the library has it), as the original call reads it. */
    nvmlTemperature_t t = {.version = nvmlTemperature_v1, .sensorType = NVML_TEMPERATURE_GPU};
    NV_OK(nvmlDeviceGetTemperatureV(h, &t));
    CHECK(t.temperature == (int)temp);
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

/* Whether /sys/devices/system/<what> exists. */
static bool in_sysfs(const char *what, int i)
{
    char path[128];
    struct stat st;
    snprintf(path, sizeof path, "/sys/devices/system/%s%d", what, i);
    return stat(path, &st) == 0;
}

static int bits(const unsigned long *set, int words, const char *what)
{
    int n = 0;
    for (int i = 0; i < words * 64; i++)
        if (set[i / 64] >> (i % 64) & 1) {
            CHECK(in_sysfs(what, i)); /* a CPU or node of this machine */
            n++;
        }
    return n;
}

/* Where the device sits on this host, as Slurm's AutoDetect=nvml asks
 * (issue 28: it aborted on "No CPU affinity for device"): CPUs and NUMA
 * nodes of this machine; on a machine of one node, all its CPUs. The GPU
 * is no NUMA node of its own on an x86 host: NOT_SUPPORTED. */
static void where_it_sits(void)
{
    unsigned long cpus[4] = {~0ul, ~0ul, ~0ul, ~0ul}, socket[4], nodes[4], node_words[2];
    NV_OK(nvmlDeviceGetCpuAffinity(h, 4, cpus));
    int near = bits(cpus, 4, "cpu/cpu");
    CHECK(near >= 1 && near <= sysconf(_SC_NPROCESSORS_ONLN));
    NV_OK(nvmlDeviceGetCpuAffinityWithinScope(h, 4, socket, 1 /* socket */));
    CHECK(bits(socket, 4, "cpu/cpu") >= near);
    for (int w = 0; w < 4; w++)
        CHECK((cpus[w] & socket[w]) == cpus[w]);
    NV_OK(nvmlDeviceGetMemoryAffinity(h, 2, node_words, 0 /* node */));
    bool numa = in_sysfs("node/node", 0);
    CHECK(bits(node_words, 2, numa ? "node/node" : "cpu/cpu") == 1);
    int nnodes = 0;
    while (in_sysfs("node/node", nnodes))
        nnodes++;
    if (nnodes <= 1) { /* one node: every online CPU is near, node 0 */
        CHECK(near == sysconf(_SC_NPROCESSORS_ONLN));
        CHECK(node_words[0] == 1 && node_words[1] == 0);
    }
    NV_OK(nvmlDeviceGetMemoryAffinity(h, 4, nodes, 1));
    CHECK((nodes[0] & node_words[0]) == node_words[0]);
    CHECK(nvmlDeviceGetCpuAffinity(h, 0, cpus) == NVML_ERROR_INVALID_ARGUMENT);
    CHECK(nvmlDeviceGetCpuAffinity(h, 4, NULL) == NVML_ERROR_INVALID_ARGUMENT);
    CHECK(nvmlDeviceGetCpuAffinityWithinScope(h, 4, cpus, 2) == NVML_ERROR_INVALID_ARGUMENT);
    CHECK(nvmlDeviceGetCpuAffinity(NULL, 4, cpus) == NVML_ERROR_INVALID_ARGUMENT);
    unsigned node;
    CHECK(nvmlDeviceGetNumaNodeId(h, &node) == NVML_ERROR_NOT_SUPPORTED);
    unsigned minor;
    NV_OK(nvmlDeviceGetMinorNumber(h, &minor));
    CHECK(minor == 0); /* /dev/nvidia0 */
}

/* The clocks Slurm lists and sets from (an H100 80GB HBM3's: HBM3 at 2619
 * MHz; graphics 1980 down to 345 MHz in steps of 15). */
static void clocks(void)
{
    unsigned mem[4], gfx[128], n = 0;
    CHECK(nvmlDeviceGetSupportedMemoryClocks(h, &n, mem) == NVML_ERROR_INSUFFICIENT_SIZE);
    CHECK(n == 1);
    n = 4;
    NV_OK(nvmlDeviceGetSupportedMemoryClocks(h, &n, mem));
    CHECK(n == 1 && mem[0] == 2619);
    n = 128;
    NV_OK(nvmlDeviceGetSupportedGraphicsClocks(h, 2619, &n, gfx));
    CHECK(n == 110 && gfx[0] == 1980 && gfx[109] == 345);
    for (unsigned i = 1; i < n; i++)
        CHECK(gfx[i] == gfx[i - 1] - 15);
    n = 10;
    CHECK(nvmlDeviceGetSupportedGraphicsClocks(h, 2619, &n, gfx) == NVML_ERROR_INSUFFICIENT_SIZE);
    CHECK(n == 110);
    CHECK(nvmlDeviceGetSupportedGraphicsClocks(h, 1593, &n, gfx) == NVML_ERROR_NOT_FOUND);
    unsigned c;
    NV_OK(nvmlDeviceGetApplicationsClock(h, NVML_CLOCK_GRAPHICS, &c));
    CHECK(c == 1980);
    NV_OK(nvmlDeviceGetDefaultApplicationsClock(h, NVML_CLOCK_MEM, &c));
    CHECK(c == 2619);
}

/* Identity checks a monitor makes (nvitop: IsMigDeviceHandle), the
 * versioned temperature's checks, and the three functions driver
 * 580.159.04's library exports beyond its nvml.h (nvml_later.h). */
static void the_rest(void)
{
    unsigned mig = 7;
    NV_OK(nvmlDeviceIsMigDeviceHandle(h, &mig));
    CHECK(mig == 0); /* a whole GPU, as a real driver says */
    nvmlTemperature_t t = {.version = nvmlTemperature_v1, .sensorType = NVML_TEMPERATURE_GPU};
    NV_OK(nvmlDeviceGetTemperatureV(h, &t));
    CHECK(t.temperature >= 30 && t.temperature < 87);
    t.version = 1;
    CHECK(nvmlDeviceGetTemperatureV(h, &t) == NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    t = (nvmlTemperature_t){.version = nvmlTemperature_v1, .sensorType = 5};
    CHECK(nvmlDeviceGetTemperatureV(h, &t) == NVML_ERROR_INVALID_ARGUMENT);
    nvmlRemappedRowsInfo_v2_t rows;
    memset(&rows, 0xff, sizeof rows);
    NV_OK(nvmlDeviceGetRemappedRows_v2(h, &rows));
    CHECK(rows.corrActiveRemaps == 0 && rows.uncActiveRemaps == 0 && rows.bPending == 0 &&
          rows.bFailureOccurred == 0);
    nvmlUnrepairableMemoryStatus_v1_t flag = {1};
    NV_OK(nvmlDeviceGetUnrepairableMemoryFlag_v1(h, &flag));
    CHECK(flag.bUnrepairableMemory == 0);
    CHECK(nvmlDeviceReadPRMCounters_v1(h, (nvmlPRMCounterList_v1_t *)&flag) ==
          NVML_ERROR_NOT_SUPPORTED);
    /* Accounting is off, as on a new H100 (VRAM_SIM_ACCOUNTING turns it
     * on: test_nvml_view). */
    int mode = 1;
    unsigned count = 0;
    nvmlAccountingStats_t stats;
    NV_OK(nvmlDeviceGetAccountingMode(h, &mode));
    CHECK(mode == 0);
    CHECK(nvmlDeviceGetAccountingPids(h, &count, NULL) == NVML_ERROR_NOT_SUPPORTED);
    CHECK(nvmlDeviceGetAccountingStats(h, (unsigned)getpid(), &stats) == NVML_ERROR_NOT_SUPPORTED);
}

int main(void)
{
    private_gpu(""); /* no sizes given: the profile's own device */
    unsetenv("VRAM_SIM_CONTEXT_SIZE");
    unsetenv("VRAM_SIM_ACCOUNTING");
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
    where_it_sits();
    clocks();
    the_rest();
    memory_agrees_with_cuda();
    NV_OK(nvmlShutdown());
    puts("test_nvml_device: passed");
    return 0;
}
