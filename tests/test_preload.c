/* Programs written against the driver API, linked with -lcuda as real ones
 * are, run under the interposer on the simulated driver: every governed
 * allocation family is held to the budget, the program sees the budget as
 * the device (through CUDA and NVML alike), resolution through
 * cuGetProcAddress and dlsym is governed, threads racing at the edge never
 * pass it (the CUDA context inside it: what a program has is the budget
 * less its context), a forked child cannot use CUDA (as with the real
 * driver) and an executed one joins the budget it is under. The test re-executes itself
 * twice: with LD_PRELOAD set (a budget of its own per process), and under
 * `vram run` (one budget for the command, which an executed child shares). */
#include "../src/cuda/cuda_prototypes.h"
#include "../src/cuda/nvml_abi.h"
#include "check.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>

/* The budget of device 0: its context (518 MiB on the simulated H100,
 * sim/config.h) and 1 GiB beside it, which is what a program has left. */
#define CTX (518 * MiB)
#define BUDGET (GiB + CTX)
#define ROOM GiB
#define BUDGET_TEXT "0=1542MiB" /* BUDGET, as vram takes it */
_Static_assert(BUDGET == 1542 * MiB, "BUDGET_TEXT says the budget");

static void use_device(int dev)
{
    CUcontext ctx;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
    CHECK(cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
}

static void leave_device(void)
{
    CUcontext c;
    CHECK(cuCtxPopCurrent_v2(&c) == CUDA_SUCCESS);
}

static size_t free_now(void)
{
    size_t f, t;
    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS);
    return f;
}

static void sees_the_budget(void)
{
    size_t f, t;
    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS);
    CHECK(t == BUDGET && f == ROOM);
    CHECK(cuDeviceTotalMem_v2(&t, 0) == CUDA_SUCCESS && t == BUDGET);
    unsigned int f32, t32;
    CHECK(cuMemGetInfo(&f32, &t32) == CUDA_SUCCESS && t32 == BUDGET && f32 == ROOM);
    /* Device 1 has no budget: the driver's own figures. */
    CHECK(cuDeviceTotalMem_v2(&t, 1) == CUDA_SUCCESS && t == 2 * GiB);
    leave_device();
    use_device(1);
    /* ... less its context, which no budget there counts. */
    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS && t == 2 * GiB && f == 2 * GiB - CTX);
    CUdeviceptr big;
    CHECK(cuMemAlloc_v2(&big, ROOM + 256 * MiB) == CUDA_SUCCESS); /* beyond device 0's room: fine here */
    CHECK(cuMemFree_v2(big) == CUDA_SUCCESS);
    leave_device();
    use_device(0);
}

static void families(void)
{
    CUdeviceptr a[4], p;
    for (int i = 0; i < 4; i++)
        CHECK(cuMemAlloc_v2(&a[i], 256 * MiB) == CUDA_SUCCESS);
    CHECK(free_now() == 0);
    /* Every family is refused at the budget, with the right code. */
    CHECK(cuMemAlloc_v2(&p, 1) == CUDA_ERROR_OUT_OF_MEMORY);
    size_t pitch;
    CHECK(cuMemAllocPitch_v2(&p, &pitch, 100, 100, 4) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAllocManaged(&p, 4096, CU_MEM_ATTACH_GLOBAL) == CUDA_ERROR_OUT_OF_MEMORY);
    CUdeviceptr_v1 p32;
    CHECK(cuMemAlloc(&p32, 4096) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemFree_v2(a[0]) == CUDA_SUCCESS);
    CHECK(free_now() == 256 * MiB);

    /* Pitched: charged by the pitch the driver chose, not by the width. */
    CHECK(cuMemAllocPitch_v2(&p, &pitch, 1000, 1000, 4) == CUDA_SUCCESS);
    CHECK(pitch >= 1000);
    uint64_t rows = (uint64_t)pitch * 1000;
    CHECK(free_now() == 256 * MiB - ((rows + 2 * MiB - 1) & ~(2 * MiB - 1)));
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    /* Managed: charged in full. */
    CHECK(cuMemAllocManaged(&p, 100 * MiB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
    CHECK(free_now() == 156 * MiB);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    /* The legacy 32-bit entry point is governed too: charged, then the
     * driver's refusal rolls the charge back. */
    CHECK(cuMemAlloc(&p32, 4096) != CUDA_SUCCESS);
    CHECK(free_now() == 256 * MiB);
    /* A pointer the interposer does not know: the driver's answer. */
    CHECK(cuMemFree_v2((CUdeviceptr)0x1234500) == CUDA_ERROR_INVALID_VALUE);
    for (int i = 1; i < 4; i++)
        CHECK(cuMemFree_v2(a[i]) == CUDA_SUCCESS);
    CHECK(free_now() == ROOM);
}

/* As the CUDA runtime does: dlsym the resolver, then everything through it. */
static void resolution(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    CHECK(lib != NULL);
    PFN_cuGetProcAddress_v2 gpa = (PFN_cuGetProcAddress_v2)dlsym(lib, "cuGetProcAddress_v2");
    CHECK(gpa != NULL);
    PFN_cuMemAlloc_v2 alloc;
    PFN_cuMemFree_v2 release;
    PFN_cuMemGetInfo_v2 info;
    CUdriverProcAddressQueryResult status = -1;
    CHECK(gpa("cuMemAlloc", (void **)&alloc, 12000, 0, &status) == CUDA_SUCCESS);
    CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS);
    CHECK(gpa("cuMemFree", (void **)&release, 12000, 0, NULL) == CUDA_SUCCESS);
    CHECK(gpa("cuMemGetInfo", (void **)&info, 12000, 0, NULL) == CUDA_SUCCESS);
    size_t f, t;
    CHECK(info(&f, &t) == CUDA_SUCCESS && t == BUDGET);
    CUdeviceptr p, q;
    CHECK(alloc(&p, 900 * MiB) == CUDA_SUCCESS);
    CHECK(alloc(&q, 200 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(release(p) == CUDA_SUCCESS);
    /* The resolver of the resolver is governed too. */
    PFN_cuGetProcAddress_v2 gpa2;
    CHECK(gpa("cuGetProcAddress", (void **)&gpa2, 12000, 0, NULL) == CUDA_SUCCESS);
    CHECK(gpa2("cuMemAlloc", (void **)&alloc, 12000, 0, NULL) == CUDA_SUCCESS);
    CHECK(alloc(&q, 1100 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    /* Versions are honoured: before 3.2, "cuMemAlloc" is the legacy ABI. */
    PFN_cuMemAlloc legacy;
    CHECK(gpa("cuMemAlloc", (void **)&legacy, 3000, 0, NULL) == CUDA_SUCCESS);
    CUdeviceptr_v1 p32;
    CHECK(legacy(&p32, 2 * GiB) == CUDA_ERROR_OUT_OF_MEMORY);
    /* Unknown symbols keep the driver's status. */
    void *none;
    CHECK(gpa("cuNoSuchThing", &none, 12000, 0, &status) == CUDA_ERROR_NOT_FOUND);
    CHECK(status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    /* Plain dlsym of a versioned name. */
    PFN_cuMemAlloc_v2 direct = (PFN_cuMemAlloc_v2)dlsym(lib, "cuMemAlloc_v2");
    CHECK(direct(&q, 1100 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(free_now() == ROOM);
}

/* Stream-ordered pools are charged what they reserve, not what is live: on
 * the simulated H100 as on a GPU, whole 32 MiB chunks. */
static void pools(void)
{
    CUdeviceptr a, b;
    CHECK(cuMemAllocAsync(&a, 600 * MiB, NULL) == CUDA_SUCCESS);
    CHECK(free_now() == ROOM - 608 * MiB);
    CHECK(cuMemAllocAsync(&b, 600 * MiB, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemFreeAsync(a, NULL) == CUDA_SUCCESS); /* threshold 0: the pool shrinks */
    CHECK(free_now() == ROOM);

    /* A pool that keeps freed memory (release threshold) keeps its charge,
     * and reusing that memory needs no more budget. */
    CUmemoryPool pool;
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
    cuuint64_t keep = GiB;
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) == CUDA_SUCCESS);
    CHECK(cuMemAllocFromPoolAsync(&a, 512 * MiB, pool, NULL) == CUDA_SUCCESS);
    CHECK(cuMemFreeAsync(a, NULL) == CUDA_SUCCESS);
    CHECK(free_now() == 512 * MiB); /* still reserved by the pool */
    CHECK(cuMemAllocFromPoolAsync(&a, 512 * MiB, pool, NULL) == CUDA_SUCCESS);
    CHECK(free_now() == 512 * MiB);
    CHECK(cuMemAllocAsync(&b, 600 * MiB, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemFreeAsync(a, NULL) == CUDA_SUCCESS);
    CHECK(cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS);
    CHECK(free_now() == ROOM);
    CHECK(cuMemAllocFromPoolAsync(&a, 256 * MiB, pool, NULL) == CUDA_SUCCESS);
    CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS);
    CHECK(free_now() == ROOM);

    /* The per-thread-default-stream variant, as the runtime resolves it. */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    PFN_cuGetProcAddress_v2 gpa = (PFN_cuGetProcAddress_v2)dlsym(lib, "cuGetProcAddress_v2");
    PFN_cuMemAllocAsync ptsz;
    CHECK(gpa("cuMemAllocAsync", (void **)&ptsz, 12000,
              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL) == CUDA_SUCCESS);
    CHECK(ptsz != (PFN_cuMemAllocAsync)cuMemAllocAsync); /* the _ptsz hook, not the plain one */
    CHECK(ptsz(&a, 2 * GiB, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(ptsz(&a, 100 * MiB, NULL) == CUDA_SUCCESS);
    CHECK(free_now() == ROOM - 128 * MiB);
    CHECK(cuMemFreeAsync(a, NULL) == CUDA_SUCCESS);
    CHECK(free_now() == ROOM);
}

/* VMM: charged at creation when on the device, until released and unmapped. */
static void virtual_memory(void)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUmemGenericAllocationHandle h, h2;
    CHECK(cuMemCreate(&h, 512 * MiB, &prop, 0) == CUDA_SUCCESS);
    CHECK(free_now() == 512 * MiB);
    CHECK(cuMemCreate(&h2, 600 * MiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    CUdeviceptr va;
    CHECK(cuMemAddressReserve(&va, 512 * MiB, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(va, 512 * MiB, 0, h, 0) == CUDA_SUCCESS);
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK(free_now() == 512 * MiB); /* mapped: still the device's */
    CHECK(cuMemUnmap(va, 512 * MiB) == CUDA_SUCCESS);
    CHECK(free_now() == ROOM);
    CHECK(cuMemAddressFree(va, 512 * MiB) == CUDA_SUCCESS);
    /* Host-located memory is not the device's. */
    CUmemAllocationProp host = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_HOST, 0}};
    CHECK(cuMemCreate(&h, 2 * GiB, &host, 0) == CUDA_SUCCESS);
    CHECK(free_now() == ROOM);
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
}

/* Arrays: charged what the driver says they take. */
static void arrays(void)
{
    CUarray a, b;
    CUDA_ARRAY_DESCRIPTOR d = {1000, 1000, CU_AD_FORMAT_FLOAT, 4};
    CHECK(cuArrayCreate_v2(&a, &d) == CUDA_SUCCESS);
    CHECK(free_now() == ROOM - 16 * MiB); /* 16,384-byte rows x 1000 in 2 MiB pages */
    CUDA_ARRAY3D_DESCRIPTOR big = {4096, 4096, 16, CU_AD_FORMAT_FLOAT, 4, 0};
    CHECK(cuArray3DCreate_v2(&b, &big) == CUDA_ERROR_OUT_OF_MEMORY); /* 4 GiB */
    CUDA_ARRAY3D_DESCRIPTOR vol = {256, 256, 256, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
    CHECK(cuArray3DCreate_v2(&b, &vol) == CUDA_SUCCESS);
    CHECK(free_now() == ROOM - 16 * MiB - 32 * MiB); /* 512-byte rows x 256 x 256 */
    CUmipmappedArray m;
    CUDA_ARRAY3D_DESCRIPTOR tex = {2048, 2048, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
    CHECK(cuMipmappedArrayCreate(&m, &tex, 12) == CUDA_SUCCESS);
    CHECK(free_now() < ROOM - 48 * MiB - 16 * MiB); /* 16 MiB base level and more */
    CHECK(cuMipmappedArrayDestroy(m) == CUDA_SUCCESS);
    CHECK(cuArrayDestroy(a) == CUDA_SUCCESS);
    CHECK(cuArrayDestroy(b) == CUDA_SUCCESS);
    CHECK(free_now() == ROOM);
}

/* Graph memory: reserved at launch, kept until trimmed. */
static CUgraphExec graph_of(size_t a, size_t b)
{
    CUgraph g;
    CUgraphNode n;
    CHECK(cuGraphCreate(&g, 0) == CUDA_SUCCESS);
    CUDA_MEM_ALLOC_NODE_PARAMS p = {.poolProps = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                  .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}},
                                    .bytesize = a};
    CHECK(cuGraphAddMemAllocNode(&n, g, NULL, 0, &p) == CUDA_SUCCESS);
    p.bytesize = b;
    CHECK(cuGraphAddMemAllocNode(&n, g, NULL, 0, &p) == CUDA_SUCCESS);
    CUgraphExec e;
    CHECK(cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS);
    CHECK(cuGraphDestroy(g) == CUDA_SUCCESS);
    return e;
}

static void graphs(void)
{
    CUgraphExec fits = graph_of(300 * MiB, 300 * MiB), too_big = graph_of(700 * MiB, 400 * MiB);
    CHECK(free_now() == ROOM); /* nothing is taken before launch */
    CHECK(cuGraphLaunch(fits, NULL) == CUDA_SUCCESS);
    CHECK(free_now() == ROOM - 600 * MiB);
    CHECK(cuGraphLaunch(fits, NULL) == CUDA_SUCCESS); /* relaunch reuses the reservation */
    CHECK(free_now() == ROOM - 600 * MiB);
    CHECK(cuGraphLaunch(too_big, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS);
    CHECK(free_now() == ROOM);
    CHECK(cuGraphLaunch(too_big, NULL) == CUDA_ERROR_OUT_OF_MEMORY); /* 1100 MiB > budget */
    CUgraph g;
    CUgraphNode n;
    CUDA_MEM_ALLOC_NODE_PARAMS huge = {.poolProps = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                     .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}},
                                       .bytesize = 2 * GiB};
    CHECK(cuGraphCreate(&g, 0) == CUDA_SUCCESS);
    CHECK(cuGraphAddMemAllocNode(&n, g, NULL, 0, &huge) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuGraphDestroy(g) == CUDA_SUCCESS);
    CHECK(cuGraphExecDestroy(fits) == CUDA_SUCCESS && cuGraphExecDestroy(too_big) == CUDA_SUCCESS);
    CHECK(free_now() == ROOM);
}

/* NVML's memory figures are the same view as CUDA's, device by UUID; its
 * process list shows what this process really holds. */
static void nvml(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    CHECK(lib != NULL);
    PFN_nvmlInit_v2 init = (PFN_nvmlInit_v2)dlsym(lib, "nvmlInit_v2");
    PFN_nvmlDeviceGetHandleByIndex_v2 by_index =
        (PFN_nvmlDeviceGetHandleByIndex_v2)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    PFN_nvmlDeviceGetMemoryInfo info = (PFN_nvmlDeviceGetMemoryInfo)dlsym(lib, "nvmlDeviceGetMemoryInfo");
    PFN_nvmlDeviceGetMemoryInfo_v2 info2 =
        (PFN_nvmlDeviceGetMemoryInfo_v2)dlsym(lib, "nvmlDeviceGetMemoryInfo_v2");
    PFN_nvmlDeviceGetComputeRunningProcesses_v3 procs =
        (PFN_nvmlDeviceGetComputeRunningProcesses_v3)dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    CHECK(init && by_index && info && info2 && procs);
    CHECK(init() == NVML_SUCCESS);
    nvmlDevice_t d0, d1;
    CHECK(by_index(0, &d0) == NVML_SUCCESS && by_index(1, &d1) == NVML_SUCCESS);
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 300 * MiB) == CUDA_SUCCESS);
    nvmlMemory_t m;
    CHECK(info(d0, &m) == NVML_SUCCESS);
    size_t f, t;
    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS);
    CHECK(m.total == t && m.free == f && m.used == t - f); /* the same view */
    CHECK(m.total == BUDGET && m.free == ROOM - 300 * MiB);
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    CHECK(info2(d0, &m2) == NVML_SUCCESS && m2.total == BUDGET && m2.free == f &&
          m2.used + m2.reserved == t - f);
    CHECK(info(d1, &m) == NVML_SUCCESS && m.total == 2 * GiB); /* no budget there */
    nvmlProcessInfo_t list[8];
    unsigned int n = 8;
    CHECK(procs(d0, &n, list) == NVML_SUCCESS);
    int mine = 0;
    for (unsigned i = 0; i < n; i++)
        mine |= list[i].pid == (unsigned)getpid() && list[i].usedGpuMemory == CTX + 300 * MiB;
    CHECK(mine);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    CHECK(info(d0, &m) == NVML_SUCCESS && m.free == ROOM);
}

static atomic_uint_fast64_t granted;

static void *racer(void *arg)
{
    (void)arg;
    use_device(0);
    CUdeviceptr mine[64];
    int n = 0;
    for (int i = 0; i < 64; i++) {
        if (cuMemAlloc_v2(&mine[n], 48 * MiB) != CUDA_SUCCESS)
            continue;
        atomic_fetch_add(&granted, 48 * MiB);
        CHECK(atomic_load(&granted) <= ROOM);
        n++;
        if (i % 3 == 2) {
            atomic_fetch_sub(&granted, 48 * MiB);
            CHECK(cuMemFree_v2(mine[--n]) == CUDA_SUCCESS);
        }
    }
    while (n--) {
        atomic_fetch_sub(&granted, 48 * MiB);
        CHECK(cuMemFree_v2(mine[n]) == CUDA_SUCCESS);
    }
    leave_device();
    return NULL;
}

static void threads_at_the_edge(void)
{
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, racer, NULL);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    CHECK(free_now() == ROOM);
}

/* A child forked after the parent initialised CUDA cannot use it, as with
 * the real driver: cuInit and every call after it return
 * CUDA_ERROR_NOT_INITIALIZED, so it takes nothing. A program it executes is
 * a new process under the same interposer (executed_child). */
static void forked_child(char **argv)
{
    /* Under the command's budget this leaves the executed child its context
     * and 256 MiB. */
    CUdeviceptr held;
    CHECK(cuMemAlloc_v2(&held, ROOM - CTX - 256 * MiB) == CUDA_SUCCESS);
    pid_t pid = fork();
    if (pid == 0) {
        CUdeviceptr p;
        int n;
        CHECK(cuInit(0) == CUDA_ERROR_NOT_INITIALIZED);
        CHECK(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED);
        CHECK(cuMemAlloc_v2(&p, 1 * MiB) == CUDA_ERROR_NOT_INITIALIZED);
        setenv("VRAM_TEST_EXECUTED_CHILD", "1", 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(free_now() == CTX + 256 * MiB);
    CHECK(cuMemFree_v2(held) == CUDA_SUCCESS);
}

/* The executed child: under a budget per process, its own, nothing of the
 * parent's counted; under the command's, what the parent holds (its
 * context too) counts, and so does this process's context. */
static int executed_child(bool command)
{
    CHECK(cuInit(0) == CUDA_SUCCESS);
    use_device(0);
    CUdeviceptr p;
    if (command) {
        CHECK(cuMemAlloc_v2(&p, 300 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
        CHECK(cuMemAlloc_v2(&p, 256 * MiB) == CUDA_SUCCESS);
    } else {
        CHECK(cuMemAlloc_v2(&p, 1000 * MiB) == CUDA_SUCCESS);
        CHECK(cuMemAlloc_v2(&p, 100 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    }
    return 0;
}

/* Runs this test again, under the interposer: "process" (LD_PRELOAD) or
 * "command" (vram run). */
static int again(const char *how, char **argv)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TEST_PRELOAD_UNDER", how, 1);
        /* Device 1's budget is the whole device, as under vram run, which
         * gives every GPU the program sees a budget (issue 22). */
        exec_self_under_budget(!strcmp(how, "process"), BUDGET_TEXT ",1=2GiB", argv, NULL, NULL);
        _exit(1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "test_preload: the run under a budget per %s failed\n", how);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* A budget for device 1 alone, the interposer preloaded by hand on two
 * GPUs: device 0 is refused, loudly, not taken whole (before: the program
 * could take all of device 0, and nothing was said). */
static int partial_budget(char **argv)
{
    char err[4200];
    snprintf(err, sizeof err, "%s/partial.err", private_gpu_dir);
    pid_t pid = fork();
    if (pid == 0) {
        CHECK(freopen(err, "w", stderr) != NULL);
        setenv("TEST_PRELOAD_UNDER", "partial", 1);
        preload_interposer(argv[1]);
        setenv("VRAM_MEMORY_LIMIT", "1=1GiB", 1);
        unsetenv("VRAM_LOG");
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    char text[2048] = "";
    FILE *f = fopen(err, "r");
    CHECK(f != NULL);
    text[fread(text, 1, sizeof text - 1, f)] = 0;
    fclose(f);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        !strstr(text, "VRAM_MEMORY_LIMIT=\"1=1GiB\" gives device 1 a budget and device 0 (GPU-") ||
        !strstr(text, "every GPU allocation on device 0 will be refused")) {
        fprintf(stderr, "test_preload: a budget for device 1 alone: %s\n", text);
        return 1;
    }
    return 0;
}

static int partial_program(void)
{
    CUdeviceptr p;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    use_device(1);
    CHECK(cuMemAlloc_v2(&p, 256 * MiB) == CUDA_SUCCESS); /* within device 1's budget */
    CHECK(cuMemAlloc_v2(&p, GiB) == CUDA_ERROR_OUT_OF_MEMORY);
    leave_device();
    CUcontext ctx;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_ERROR_OUT_OF_MEMORY); /* nothing on device 0 */
    return 0;
}

int main(int argc, char **argv)
{
    const char *how = getenv("TEST_PRELOAD_UNDER");
    if (!how) {
        CHECK(argc == 3); /* the interposer's path, the vram command's */
        private_gpu("4GiB,2GiB");
        int rc = again("process", argv);
        rc = again("command", argv) || rc;
        rc = partial_budget(argv) || rc;
        return rc; /* private_gpu's folder is removed at exit */
    }
    if (!strcmp(how, "partial"))
        return partial_program();
    if (getenv("VRAM_TEST_EXECUTED_CHILD"))
        return executed_child(!strcmp(how, "command"));
    CHECK(cuInit(0) == CUDA_SUCCESS);
    use_device(0);
    sees_the_budget();
    families();
    resolution();
    pools();
    virtual_memory();
    arrays();
    nvml();
    graphs();
    threads_at_the_edge();
    forked_child(argv);
    return 0;
}
