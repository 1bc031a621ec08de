/* test_pools: stream-ordered pools are exact under a budget, both ways.
 *
 * The driver grows a pool in whole chunks (32 MiB on the H100 and H200, the
 * simulated H100 likewise), sized against the card, not the budget. What a
 * user relies on: a program that fills its budget through a pool gets every
 * byte cuMemGetInfo said was free (before: it stopped up to a chunk short,
 * 26 MiB of a 2 GiB budget with cudarc's stream.alloc), and NVML's figure
 * for it (what nvidia-smi lists) never passes the budget (before: the
 * driver's own memory was forgotten near the budget while a pool grew, and
 * the pool's chunk went past it). Each way frameworks reach a pool, each in
 * a process of its own, under a budget per process (LD_PRELOAD) and under
 * `vram run`:
 *   default   cuMemAllocAsync on the device's pool, found with dlsym on a
 *             stream of its own (cudarc's stream.alloc);
 *   torch     cuMemAllocAsync found through cuGetProcAddress on the legacy
 *             stream, the pool's release threshold at its highest, a
 *             synchronize and one retry on out-of-memory (PyTorch's
 *             cudaMallocAsync backend); kernels launched first, whose code
 *             the driver takes on its own (lazy loading);
 *   cupy      cuMemAllocFromPoolAsync on the device's current pool, through
 *             cuGetProcAddress (CuPy's MemoryAsyncPool);
 *   created   cuMemAllocFromPoolAsync on a pool of the program's own;
 *   current   a pool of its own made the device's current pool, then
 *             cuMemAllocAsync.
 * Each fills in halving steps from 64 MiB to 2 MiB (the granularity), then
 * frees everything; a line per run says how many bytes it got short of
 * what was free, and how far NVML's figure went over the budget.
 *
 * And first, without vram, the simulated pool grows as the H100's and
 * H200's did for tests/gpu/facts.cu (docs/gpu-validation.md): 32 MiB
 * reserved after live allocations of 1 B, 1 MiB and 3 MiB, 64 MiB after
 * 33 MiB more, 160 MiB after 100 MiB more, 1,184 MiB after 1 GiB more.
 *
 * Usage: test_pools PRELOAD VRAM
 */
#include "../src/cuda/cuda_prototypes.h"
#include "check.h"
#include "nvml_test.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>

#define STEP (64 * MiB)
#define GRAIN (2 * MiB)
#define MAX_HELD 4096

static PFN_nvmlDeviceGetComputeRunningProcesses_v3 nvml_procs;
static nvmlDevice_t nvml_dev;

/* What NVML lists for this process, as nvidia-smi shows it. */
static uint64_t nvml_own(void)
{
    nvmlProcessInfo_t list[64];
    unsigned n = 64;
    CHECK(nvml_procs(nvml_dev, &n, list) == NVML_SUCCESS);
    for (unsigned i = 0; i < n; i++)
        if (list[i].pid == (unsigned)getpid())
            return list[i].usedGpuMemory;
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, ms % 1000 * 1000000L};
    while (nanosleep(&t, &t) != 0)
        ;
}

/* Kernels launched for the first time: the driver loads their code then,
 * beyond every call vram governs (CUDA_MODULE_LOADING=LAZY): MODULES of
 * 2 MiB, each launched, take 2 MiB each on the simulated H100. */
#define MODULES 8
#define IMAGE (2 * MiB)
static void launch_kernels(void)
{
    for (int m = 0; m < MODULES; m++) {
        char *image = malloc(IMAGE), name[16];
        CHECK(image != NULL);
        memset(image, ' ', IMAGE - 1);
        int len = snprintf(image, IMAGE, ".version 8.0\n.target sm_90\n.address_size 64\n"
                                         ".visible .entry k%d()\n{\nret;\n}\n", m);
        image[len] = ' ';
        image[IMAGE - 1] = 0;
        snprintf(name, sizeof name, "k%d", m);
        CUmodule mod;
        CUfunction f;
        CHECK(cuModuleLoadData(&mod, image) == CUDA_SUCCESS);
        CHECK(cuModuleGetFunction(&f, mod, name) == CUDA_SUCCESS);
        CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
        free(image);
    }
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
}

struct path {
    const char *name;
    PFN_cuMemAllocAsync alloc;          /* or */
    PFN_cuMemAllocFromPoolAsync from;   /* with pool */
    CUmemoryPool pool;
    CUstream stream;
    bool retry; /* synchronize and try once more on out-of-memory */
};

static CUresult take(struct path *p, CUdeviceptr *ptr, size_t bytes)
{
    CUresult rc = p->from ? p->from(ptr, bytes, p->pool, p->stream) : p->alloc(ptr, bytes, p->stream);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && p->retry) {
        CHECK(cuStreamSynchronize(p->stream) == CUDA_SUCCESS);
        rc = p->from ? p->from(ptr, bytes, p->pool, p->stream) : p->alloc(ptr, bytes, p->stream);
    }
    return rc;
}

static void *gpa(const char *name)
{
    void *f = NULL;
    CUdriverProcAddressQueryResult status;
    CHECK(cuGetProcAddress_v2(name, &f, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==
          CUDA_SUCCESS);
    CHECK(f != NULL);
    return f;
}

static CUmemoryPool own_pool(void)
{
    CUmemoryPool pool;
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
    return pool;
}

/* One run: fills through path `name`, then gives everything back. */
static int program(const char *name, uint64_t budget)
{
    CUcontext ctx;
    nvml_procs = NVML_FUNCTION(nvmlDeviceGetComputeRunningProcesses_v3);
    nvml_dev = nvml_test_device(0);
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
    struct path p = {.name = name};
    if (!strcmp(name, "default") || !strcmp(name, "larger")) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW);
        CHECK(lib != NULL);
        p.alloc = (PFN_cuMemAllocAsync)dlsym(lib, "cuMemAllocAsync");
        CHECK(cuStreamCreate(&p.stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    } else if (!strcmp(name, "torch")) {
        p.alloc = (PFN_cuMemAllocAsync)gpa("cuMemAllocAsync");
        p.retry = true;
        launch_kernels();
    } else if (!strcmp(name, "cupy")) {
        p.from = (PFN_cuMemAllocFromPoolAsync)gpa("cuMemAllocFromPoolAsync");
        CHECK(cuDeviceGetMemPool(&p.pool, 0) == CUDA_SUCCESS);
    } else if (!strcmp(name, "created")) {
        p.from = cuMemAllocFromPoolAsync;
        p.pool = own_pool();
    } else {
        CHECK(!strcmp(name, "current"));
        p.alloc = cuMemAllocAsync;
        p.pool = own_pool();
        CHECK(cuDeviceSetMemPool(0, p.pool) == CUDA_SUCCESS);
    }
    /* The pool the allocations come from. */
    CUmemoryPool pool = p.pool;
    if (!pool)
        CHECK(cuDeviceGetMemPool(&pool, 0) == CUDA_SUCCESS);
    /* What the driver took on its own is charged by the next reading. */
    sleep_ms(300);
    size_t free_b, total;
    CHECK(cuMemGetInfo_v2(&free_b, &total) == CUDA_SUCCESS);
    CHECK(total == budget);
    static CUdeviceptr held[MAX_HELD];
    int n = 0;
    uint64_t got = 0, most = nvml_own();
    for (size_t step = STEP; step >= GRAIN;) {
        CHECK(n < MAX_HELD);
        CUresult rc = take(&p, &held[n], step);
        if (rc == CUDA_SUCCESS) {
            n++;
            got += step;
            if (p.retry && n == 1) {
                /* As PyTorch's backend sets it: the pool keeps what is freed. */
                cuuint64_t keep = UINT64_MAX;
                CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) ==
                      CUDA_SUCCESS);
            }
        } else {
            CHECK(rc == CUDA_ERROR_OUT_OF_MEMORY);
            step /= 2;
        }
        uint64_t now = nvml_own();
        if (now > most)
            most = now;
    }
    sleep_ms(250); /* a reading or two later */
    uint64_t now = nvml_own();
    if (now > most)
        most = now;
    int64_t short_by = (int64_t)free_b - (int64_t)got;
    int64_t over_by = (int64_t)most - (int64_t)budget;
    printf("%-8s got %llu of the %llu bytes free: short by %lld; NVML at most %llu of %llu: "
           "over by %lld\n",
           name, (unsigned long long)got, (unsigned long long)free_b, (long long)short_by,
           (unsigned long long)most, (unsigned long long)budget,
           (long long)(over_by > 0 ? over_by : 0));
    fflush(stdout);
    int rc = 0;
    if (short_by != 0 || over_by > 0)
        rc = 1;
    /* Everything back: the pool's charge follows what it gives back. */
    for (int i = 0; i < n; i++)
        CHECK(cuMemFreeAsync(held[i], p.stream) == CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(p.stream) == CUDA_SUCCESS);
    CHECK(cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS);
    size_t after;
    CHECK(cuMemGetInfo_v2(&after, &total) == CUDA_SUCCESS);
    if (after != free_b) {
        fprintf(stderr, "%s: %zu bytes free after everything was given back, %zu before\n", name,
                after, free_b);
        rc = 1;
    }
    return rc;
}

/* Each path and its budget. torch's leaves room for 47 chunks and 16 MiB
 * beside its context (518 MiB), modules (16 MiB) and their code (16 MiB,
 * which the driver took): a 48th chunk fits only where that code is
 * forgotten. "larger" is the default path on a driver whose pools grow in
 * 64 MiB chunks where vram expects 32 (VRAM_SIM_POOL_CHUNK): a chunk it did
 * not expect is given back before it passes the budget. */
static const struct {
    const char *name, *budget, *chunk;
} paths[] = {{"default", "2GiB", ""},   {"torch", "2070MiB", ""}, {"cupy", "2GiB", ""},
             {"created", "2GiB", ""},   {"current", "2GiB", ""},  {"larger", "2GiB", "64MiB"}};

static int again(const char *how, const char *path, const char *budget, const char *chunk,
                 char **argv)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TEST_POOLS_UNDER", how, 1);
        setenv("TEST_POOLS_PATH", path, 1);
        setenv("TEST_POOLS_BUDGET", budget, 1);
        setenv("VRAM_SIM_POOL_CHUNK", chunk, 1);
        unsetenv("VRAM_SIM_CONTEXT_SIZE"); /* the profile's: 518 MiB */
        unsetenv("CUDA_MODULE_LOADING");   /* the driver's default: lazy */
        exec_self_under_budget(!strcmp(how, "process"), budget, argv, NULL, NULL);
        _exit(1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "test_pools: %s under a budget per %s failed\n", path, how);
        return 1;
    }
    return 0;
}

/* The simulated driver's default pool, as facts.cu measures a GPU's. */
static int facts(void)
{
    static const struct {
        size_t bytes;
        uint64_t reserved;
    } step[] = {{1, 32 * MiB},        {MiB, 32 * MiB},         {3 * MiB, 32 * MiB},
                {33 * MiB, 64 * MiB}, {100 * MiB, 160 * MiB}, {GiB, 1184 * MiB}};
    CUcontext ctx;
    CUmemoryPool pool;
    CHECK(getenv("LD_PRELOAD") == NULL);
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0) == CUDA_SUCCESS);
    int rc = 0;
    for (unsigned i = 0; i < sizeof step / sizeof *step; i++) {
        CUdeviceptr p;
        cuuint64_t reserved = 0;
        CHECK(cuMemAllocAsync(&p, step[i].bytes, NULL) == CUDA_SUCCESS);
        CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) ==
              CUDA_SUCCESS);
        if (reserved != step[i].reserved) {
            fprintf(stderr, "the pool reserved %llu bytes after a live allocation of %zu more, "
                            "where the H100 and H200 reserved %llu\n",
                    (unsigned long long)reserved, step[i].bytes,
                    (unsigned long long)step[i].reserved);
            rc = 1;
        }
    }
    return rc;
}

int main(int argc, char **argv)
{
    const char *how = getenv("TEST_POOLS_UNDER");
    if (!how) {
        CHECK(argc == 3); /* the interposer's path, the vram command's */
        private_gpu("8GiB");
        unsetenv("VRAM_SIM_CONTEXT_SIZE");
        pid_t pid = fork();
        if (pid == 0)
            _exit(facts());
        int status, rc = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "test_pools: the simulated pool does not grow as a GPU's\n");
            rc = 1;
        }
        for (unsigned i = 0; i < sizeof paths / sizeof *paths; i++) {
            rc = again("process", paths[i].name, paths[i].budget, paths[i].chunk, argv) || rc;
            rc = again("command", paths[i].name, paths[i].budget, paths[i].chunk, argv) || rc;
        }
        return rc;
    }
    const char *budget = getenv("TEST_POOLS_BUDGET");
    return program(getenv("TEST_POOLS_PATH"), strtoull(budget, NULL, 10) *
                                                   (strstr(budget, "GiB") ? GiB : MiB));
}
