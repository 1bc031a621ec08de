/* What NVML shows for a process (nvidia-smi's per-process figure) stays
 * within its budget: the CUDA contexts and loaded modules of a program under
 * the interposer are charged to its budget beside its allocations, on the
 * simulated driver whose contexts take 518 MiB (sim/config.h) and whose
 * modules take their image's size, as a GPU's do.
 *
 * Checked: a primary context is charged when first retained and given back
 * when last released or reset, on every device it is made on; created
 * contexts (cuCtxCreate, every version, also through cuGetProcAddress) are
 * charged each, refused when the budget has no room for one, and given back
 * when destroyed; modules and libraries (from memory, from a file, the JIT
 * linker's output) are charged what they take, refused when they do not fit,
 * and given back when unloaded; the view (cuMemGetInfo, NVML's memory info)
 * is the budget less all of it; and the budget filled to the edge through
 * every allocation family, with a module loaded, never lets NVML's figure
 * for the process pass the budget. A program it executes joins the command's
 * budget with its own context.
 *
 * The test re-executes itself three times: with LD_PRELOAD set (a budget of
 * its own), under `vram run` (the command's budget, which vram run measures
 * a context for before the program starts), and under `vram run` where NVML
 * cannot be loaded, so that contexts and modules are measured from the
 * driver alone (a scratch context, the free memory). */
#include "../src/cuda/cuda_prototypes.h"
#include "check.h"
#include "nvml_test.h"

#include <stdbool.h>
#include <sys/wait.h>

#define CTX (518 * MiB)     /* a context on the simulated H100 (sim/config.h) */
/* Two contexts fit on device 0 and not three; one on device 1 and not two. */
#define BUDGET0 (2 * CTX + 240 * MiB) /* device 0 */
#define BUDGET1 (CTX + 376 * MiB)     /* device 1 */
#define BUDGETS "0=1276MiB,1=894MiB"  /* both, as vram takes them */
_Static_assert(BUDGET0 == 1276 * MiB && BUDGET1 == 894 * MiB, "BUDGETS says the budgets");

static bool with_nvml; /* false in the run where NVML cannot be loaded */
static const char *mode;

/* ------------------------------------------------------------- figures */

static PFN_nvmlDeviceGetComputeRunningProcesses_v3 nvml_procs;
static PFN_nvmlDeviceGetMemoryInfo nvml_info;
static nvmlDevice_t nvml_dev[2];

static void nvml_up(void)
{
    if (!with_nvml)
        return;
    nvml_procs = NVML_FUNCTION(nvmlDeviceGetComputeRunningProcesses_v3);
    nvml_info = NVML_FUNCTION(nvmlDeviceGetMemoryInfo);
    nvml_dev[0] = nvml_test_device(0);
    nvml_dev[1] = nvml_test_device(1);
}

/* What NVML says `pid` holds on dev, as nvidia-smi shows it. */
static uint64_t nvml_of(unsigned pid, int dev)
{
    nvmlProcessInfo_t list[64];
    unsigned n = 64;
    CHECK(nvml_procs(nvml_dev[dev], &n, list) == NVML_SUCCESS);
    for (unsigned i = 0; i < n; i++)
        if (list[i].pid == pid)
            return list[i].usedGpuMemory;
    return 0;
}

static uint64_t nvml_own(int dev) { return nvml_of((unsigned)getpid(), dev); }

/* NVML's figure for this process on dev is `want` (when NVML can say). */
#define NVML_OWN(dev, want)                                                                    \
    do {                                                                                       \
        if (with_nvml && nvml_own(dev) != (want)) {                                            \
            fprintf(stderr, "%s:%d (%s): NVML shows %llu MiB for this process on device %d, "  \
                            "expected %llu MiB\n", __FILE__, __LINE__, mode,                    \
                    (unsigned long long)(nvml_own(dev) / MiB), dev,                             \
                    (unsigned long long)((want) / MiB));                                        \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static size_t free_now(void)
{
    size_t f, t;
    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS);
    return f;
}

/* The view of the current context's device: total = budget, free = the
 * budget less everything charged; NVML's memory info says the same. */
#define VIEW(dev, budget, held)                                                                \
    do {                                                                                       \
        size_t f_, t_;                                                                         \
        CHECK(cuMemGetInfo_v2(&f_, &t_) == CUDA_SUCCESS);                                      \
        if (t_ != (budget) || f_ != (budget) - (held)) {                                       \
            fprintf(stderr, "%s:%d (%s): the view is %zu MiB free of %zu MiB, expected %llu "  \
                            "of %llu\n", __FILE__, __LINE__, mode, (size_t)(f_ / MiB),         \
                    (size_t)(t_ / MiB),                                                        \
                    (unsigned long long)(((budget) - (held)) / MiB),                           \
                    (unsigned long long)((budget) / MiB));                                     \
            exit(1);                                                                           \
        }                                                                                      \
        nvmlMemory_t m_;                                                                       \
        CHECK(!with_nvml || (nvml_info(nvml_dev[dev], &m_) == NVML_SUCCESS &&                  \
                             m_.total == t_ && m_.free == f_));                                \
    } while (0)

/* ------------------------------------------------------------ contexts */

static CUcontext primary[2];

static void primary_contexts(void)
{
    NVML_OWN(0, 0);
    CHECK(cuDevicePrimaryCtxRetain(&primary[0], 0) == CUDA_SUCCESS);
    CHECK(cuCtxPushCurrent_v2(primary[0]) == CUDA_SUCCESS);
    NVML_OWN(0, CTX);
    VIEW(0, BUDGET0, CTX);
    /* Device 1's primary context: charged on device 1. */
    CHECK(cuDevicePrimaryCtxRetain(&primary[1], 1) == CUDA_SUCCESS);
    NVML_OWN(1, CTX);
    NVML_OWN(0, CTX);
    CHECK(cuCtxPushCurrent_v2(primary[1]) == CUDA_SUCCESS);
    VIEW(1, BUDGET1, CTX);
    CUcontext c;
    CHECK(cuCtxPopCurrent_v2(&c) == CUDA_SUCCESS && c == primary[1]);
    /* A second retain makes nothing new; its release ends nothing. */
    CHECK(cuDevicePrimaryCtxRetain(&c, 0) == CUDA_SUCCESS && c == primary[0]);
    CHECK(cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS);
    VIEW(0, BUDGET0, CTX);
    /* The last release gives device 1 its context's memory back, and so
     * does a reset. */
    CHECK(cuDevicePrimaryCtxRelease_v2(1) == CUDA_SUCCESS);
    NVML_OWN(1, 0);
    CHECK(cuDevicePrimaryCtxRetain(&primary[1], 1) == CUDA_SUCCESS);
    NVML_OWN(1, CTX);
    CHECK(cuDevicePrimaryCtxReset_v2(1) == CUDA_SUCCESS);
    NVML_OWN(1, 0);
    CHECK(cuDevicePrimaryCtxRetain(&primary[1], 1) == CUDA_SUCCESS);
    CHECK(cuCtxPushCurrent_v2(primary[1]) == CUDA_SUCCESS);
    VIEW(1, BUDGET1, CTX);
    CHECK(cuCtxPopCurrent_v2(&c) == CUDA_SUCCESS);
}

static void created_contexts(void)
{
    CUcontext a, b;
    CHECK(cuCtxCreate_v2(&a, 0, 0) == CUDA_SUCCESS); /* current now */
    NVML_OWN(0, 2 * CTX);
    VIEW(0, BUDGET0, 2 * CTX);
    /* A third does not fit: refused as a driver refuses it, and
     * nothing of it is left on the device. */
    CHECK(cuCtxCreate_v2(&b, 0, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    NVML_OWN(0, 2 * CTX);
    /* Device 1 has room for one more beside its primary context? No. */
    CHECK(cuCtxCreate_v2(&b, 0, 1) == CUDA_ERROR_OUT_OF_MEMORY);
    NVML_OWN(1, CTX);
    CHECK(cuCtxDestroy_v2(a) == CUDA_SUCCESS);
    NVML_OWN(0, CTX);
    CHECK(cuCtxSetCurrent(primary[0]) == CUDA_SUCCESS);
    VIEW(0, BUDGET0, CTX);
    /* The CUDA runtime's way: the versions cuGetProcAddress hands out. */
    PFN_cuCtxCreate_v4 create4;
    PFN_cuCtxDestroy_v2 destroy;
    PFN_cuCtxCreate_v2 create2;
    CHECK(cuGetProcAddress_v2("cuCtxCreate", (void **)&create4, 13000, 0, NULL) == CUDA_SUCCESS);
    CHECK(cuGetProcAddress_v2("cuCtxCreate", (void **)&create2, 11000, 0, NULL) == CUDA_SUCCESS);
    CHECK(cuGetProcAddress_v2("cuCtxDestroy", (void **)&destroy, 13000, 0, NULL) == CUDA_SUCCESS);
    CHECK(create4(&a, NULL, 0, 0) == CUDA_SUCCESS);
    NVML_OWN(0, 2 * CTX);
    VIEW(0, BUDGET0, 2 * CTX);
    CHECK(create2(&b, 0, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(destroy(a) == CUDA_SUCCESS);
    NVML_OWN(0, CTX);
    CHECK(cuCtxSetCurrent(primary[0]) == CUDA_SUCCESS);
    VIEW(0, BUDGET0, CTX);
}

/* The legacy way (PyCUDA's Context.attach() and .detach()): a created
 * context has one user, cuCtxAttach adds one, cuCtxDetach takes one away
 * and the last destroys it. Its charge goes with it, not before: twenty
 * rounds leave the budget where it was. */
static void attached_contexts(void)
{
    for (int i = 0; i < 20; i++) {
        CUcontext a, b;
        CHECK(cuCtxCreate_v2(&a, 0, 0) == CUDA_SUCCESS);
        CHECK(cuCtxAttach(&b, 0) == CUDA_SUCCESS && b == a);
        VIEW(0, BUDGET0, 2 * CTX);
        CHECK(cuCtxDetach(a) == CUDA_SUCCESS); /* one user left */
        NVML_OWN(0, 2 * CTX);
        VIEW(0, BUDGET0, 2 * CTX);
        CHECK(cuCtxDetach(a) == CUDA_SUCCESS); /* the last: destroyed */
        NVML_OWN(0, CTX);
        CHECK(cuCtxSetCurrent(primary[0]) == CUDA_SUCCESS);
        VIEW(0, BUDGET0, CTX);
    }
    /* The primary context's users are its retains. */
    CUcontext p;
    CHECK(cuCtxAttach(&p, 0) == CUDA_SUCCESS && p == primary[0]);
    CHECK(cuCtxDetach(p) == CUDA_SUCCESS);
    NVML_OWN(0, CTX);
    VIEW(0, BUDGET0, CTX);
}

/* ------------------------------------------------------------- modules */

/* A PTX image of `bytes` (with its NUL), one entry point. */
static char *ptx(size_t bytes)
{
    char *p = malloc(bytes);
    CHECK(p != NULL);
    const char *head = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry kernel()\n{\nret;\n}\n";
    memset(p, ' ', bytes - 1);
    memcpy(p, head, strlen(head));
    p[bytes - 1] = 0;
    return p;
}

static void modules(void)
{
    uint64_t held = CTX;
    char *image = ptx(3 * MiB + 1); /* takes 4 MiB: whole 2 MiB pages */
    CUmodule m1, m2, m3;
    CHECK(cuModuleLoadData(&m1, image) == CUDA_SUCCESS);
    held += 4 * MiB;
    NVML_OWN(0, held);
    VIEW(0, BUDGET0, held);
    /* From a file. */
    char path[4200];
    snprintf(path, sizeof path, "%s/module.ptx", private_gpu_dir);
    FILE *f = fopen(path, "w");
    CHECK(f && fwrite(image, 1, 3 * MiB, f) == 3 * MiB && fclose(f) == 0);
    CHECK(cuModuleLoad(&m2, path) == CUDA_SUCCESS);
    held += 4 * MiB;
    NVML_OWN(0, held);
    VIEW(0, BUDGET0, held);
    /* A library, as the CUDA runtime loads a program's kernels. */
    CUlibrary lib;
    CHECK(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0) == CUDA_SUCCESS);
    held += 4 * MiB;
    NVML_OWN(0, held);
    VIEW(0, BUDGET0, held);
    /* The JIT linker's output: nothing on the device until it is loaded. */
    CUlinkState link;
    void *cubin;
    size_t size;
    CHECK(cuLinkCreate_v2(0, NULL, NULL, &link) == CUDA_SUCCESS);
    CHECK(cuLinkAddData_v2(link, 1, image, 5 * MiB / 2, "a.ptx", 0, NULL, NULL) == CUDA_SUCCESS);
    CHECK(cuLinkComplete(link, &cubin, &size) == CUDA_SUCCESS);
    VIEW(0, BUDGET0, held);
    CHECK(cuModuleLoadData(&m3, cubin) == CUDA_SUCCESS);
    held += 4 * MiB; /* 2.5 MiB and a header */
    NVML_OWN(0, held);
    VIEW(0, BUDGET0, held);
    CHECK(cuLinkDestroy(link) == CUDA_SUCCESS);
    /* A module the budget has no room for: refused, nothing left of it. */
    CUdeviceptr fill;
    CHECK(cuMemAlloc_v2(&fill, BUDGET0 - held - 2 * MiB) == CUDA_SUCCESS);
    CUmodule none;
    CHECK(cuModuleLoadData(&none, image) == CUDA_ERROR_OUT_OF_MEMORY);
    NVML_OWN(0, BUDGET0 - 2 * MiB);
    CHECK(cuMemFree_v2(fill) == CUDA_SUCCESS);
    /* Unloading gives it all back. */
    CHECK(cuModuleUnload(m1) == CUDA_SUCCESS && cuModuleUnload(m2) == CUDA_SUCCESS &&
          cuModuleUnload(m3) == CUDA_SUCCESS && cuLibraryUnload(lib) == CUDA_SUCCESS);
    NVML_OWN(0, CTX);
    VIEW(0, BUDGET0, CTX);
    free(image);
}

/* ------------------------------------------- every family to the edge */

#define CHUNK (64 * MiB)
#define MAXN 64

/* After a family filled the budget: NVML's figure for the process is at
 * the budget, never past it. */
static void at_the_edge(const char *family, uint64_t step)
{
    size_t f = free_now();
    if (f >= step) {
        fprintf(stderr, "(%s) %s: refused with %zu MiB still free\n", mode, family, (size_t)(f / MiB));
        exit(1);
    }
    if (!with_nvml)
        return;
    uint64_t own = nvml_own(0);
    if (own > BUDGET0 || own + step + 2 * MiB < BUDGET0) {
        fprintf(stderr, "(%s) %s filled to the edge: NVML shows %llu MiB for the process, the "
                        "budget is %llu MiB\n", mode, family, (unsigned long long)(own / MiB),
                (unsigned long long)(BUDGET0 / MiB));
        exit(1);
    }
}

/* A graph of `nodes` 64 MiB allocation nodes, instantiated; kept (in g)
 * until the end, so that no graph's address is reused while the
 * interposer knows it. */
static CUgraphExec graph_of(int nodes, CUgraph *g)
{
    CUgraphNode n;
    CUgraphExec e;
    CHECK(cuGraphCreate(g, 0) == CUDA_SUCCESS);
    for (int i = 0; i < nodes; i++) {
        CUDA_MEM_ALLOC_NODE_PARAMS p = {
            .poolProps = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                          .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}},
            .bytesize = CHUNK};
        CHECK(cuGraphAddMemAllocNode(&n, *g, NULL, 0, &p) == CUDA_SUCCESS);
    }
    CHECK(cuGraphInstantiateWithFlags(&e, *g, 0) == CUDA_SUCCESS);
    return e;
}

static void every_family(void)
{
    uint64_t base = CTX + 4 * MiB; /* the context and a module loaded */
    char *image = ptx(3 * MiB);
    CUmodule m;
    CHECK(cuModuleLoadData(&m, image) == CUDA_SUCCESS);
    NVML_OWN(0, base);
    CUdeviceptr p[MAXN];
    int n;

    for (n = 0; n < MAXN && cuMemAlloc_v2(&p[n], CHUNK) == CUDA_SUCCESS; n++)
        ;
    at_the_edge("cuMemAlloc", CHUNK);
    while (n--)
        CHECK(cuMemFree_v2(p[n]) == CUDA_SUCCESS);

    size_t pitch;
    for (n = 0; n < MAXN && cuMemAllocPitch_v2(&p[n], &pitch, 4000, 16000, 4) == CUDA_SUCCESS; n++)
        ;
    at_the_edge("cuMemAllocPitch", CHUNK);
    while (n--)
        CHECK(cuMemFree_v2(p[n]) == CUDA_SUCCESS);

    for (n = 0; n < MAXN && cuMemAllocManaged(&p[n], CHUNK, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS; n++)
        ;
    at_the_edge("cuMemAllocManaged", CHUNK);
    while (n--)
        CHECK(cuMemFree_v2(p[n]) == CUDA_SUCCESS);

    for (n = 0; n < MAXN && cuMemAllocAsync(&p[n], CHUNK, NULL) == CUDA_SUCCESS; n++)
        ;
    at_the_edge("cuMemAllocAsync", CHUNK);
    while (n--)
        CHECK(cuMemFreeAsync(p[n], NULL) == CUDA_SUCCESS);

    CUmemoryPool pool;
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
    for (n = 0; n < MAXN && cuMemAllocFromPoolAsync(&p[n], CHUNK, pool, NULL) == CUDA_SUCCESS; n++)
        ;
    at_the_edge("cuMemAllocFromPoolAsync", CHUNK);
    while (n--)
        CHECK(cuMemFreeAsync(p[n], NULL) == CUDA_SUCCESS);
    CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS);

    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUmemGenericAllocationHandle h[MAXN];
    for (n = 0; n < MAXN && cuMemCreate(&h[n], CHUNK, &prop, 0) == CUDA_SUCCESS; n++)
        ;
    at_the_edge("cuMemCreate", CHUNK);
    while (n--)
        CHECK(cuMemRelease(h[n]) == CUDA_SUCCESS);

    CUarray a[MAXN];
    CUDA_ARRAY_DESCRIPTOR d = {4096, 4096, CU_AD_FORMAT_FLOAT, 1}; /* 64 MiB */
    for (n = 0; n < MAXN && cuArrayCreate_v2(&a[n], &d) == CUDA_SUCCESS; n++)
        ;
    at_the_edge("cuArrayCreate", CHUNK);
    while (n--)
        CHECK(cuArrayDestroy(a[n]) == CUDA_SUCCESS);

    CUmipmappedArray mm[MAXN];
    CUDA_ARRAY3D_DESCRIPTOR tex = {2048, 2048, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
    for (n = 0; n < MAXN && cuMipmappedArrayCreate(&mm[n], &tex, 12) == CUDA_SUCCESS; n++)
        ;
    at_the_edge("cuMipmappedArrayCreate", 2 * CHUNK);
    while (n--)
        CHECK(cuMipmappedArrayDestroy(mm[n]) == CUDA_SUCCESS);

    /* Graph memory: each graph one more 64 MiB allocation node. */
    CUgraph g[MAXN];
    CUgraphExec e[MAXN];
    CUresult rc = CUDA_SUCCESS;
    for (n = 0; n < MAXN && rc == CUDA_SUCCESS; n++) {
        e[n] = graph_of(n + 1, &g[n]);
        rc = cuGraphLaunch(e[n], NULL);
    }
    at_the_edge("graph memory", CHUNK);
    while (n--)
        CHECK(cuGraphExecDestroy(e[n]) == CUDA_SUCCESS && cuGraphDestroy(g[n]) == CUDA_SUCCESS);
    CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS);

    NVML_OWN(0, base);
    VIEW(0, BUDGET0, base);
    CHECK(cuModuleUnload(m) == CUDA_SUCCESS);
    NVML_OWN(0, CTX);
    free(image);
}

/* ------------------------------------------- a program it executes */

/* Under the command's budget the child's context and allocations count
 * with the parent's: NVML's figures for both together stay within it. */
static void executed_child(char **argv)
{
    CUdeviceptr held;
    CHECK(cuMemAlloc_v2(&held, 100 * MiB) == CUDA_SUCCESS);
    int out[2];
    CHECK(pipe(out) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        setenv("VRAM_TEST_CHILD", "1", 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(out[1]);
    char line[128] = "";
    FILE *f = fdopen(out[0], "r");
    CHECK(f && fgets(line, sizeof line, f));
    /* The child holds its context and all it could take, and waits. */
    unsigned long long child_took = 0;
    CHECK(sscanf(line, "TOOK %llu", &child_took) == 1);
    if (with_nvml) {
        uint64_t both = nvml_own(0) + nvml_of((unsigned)pid, 0);
        CHECK(nvml_of((unsigned)pid, 0) == CTX + child_took);
        CHECK(both <= BUDGET0);
        CHECK(both + 2 * MiB > BUDGET0);
    }
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    fclose(f);
    CHECK(cuMemFree_v2(held) == CUDA_SUCCESS);
}

static int child(void)
{
    CUcontext c;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&c, 0) == CUDA_SUCCESS && cuCtxPushCurrent_v2(c) == CUDA_SUCCESS);
    size_t f = free_now();
    /* The parent holds its context and 100 MiB; this process its context. */
    CHECK(f == BUDGET0 - CTX - 100 * MiB - CTX);
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, f + 1) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAlloc_v2(&p, f) == CUDA_SUCCESS);
    printf("TOOK %zu\n", f);
    fflush(stdout);
    pause();
    return 0;
}

/* ------------------------------------------------------------------ main */

/* Runs this test again under the interposer: "process" (LD_PRELOAD),
 * "command" (vram run) or "driver-only" (vram run, NVML not loadable). */
static int again(const char *how, char **argv)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TEST_CONTEXTS_UNDER", how, 1);
        unsetenv("VRAM_SIM_CONTEXT_SIZE"); /* the profile's: 518 MiB */
        if (!strcmp(how, "driver-only")) {
            /* A folder with the driver and no NVML. */
            char dir[4200], link[4300], sim[4300];
            snprintf(dir, sizeof dir, "%s/driver-only", private_gpu_dir);
            snprintf(link, sizeof link, "%s/libcuda.so.1", dir);
            snprintf(sim, sizeof sim, "%s/sim/libcuda.so.1", argv[3]);
            CHECK(mkdir(dir, 0700) == 0 && symlink(sim, link) == 0);
            setenv("LD_LIBRARY_PATH", dir, 1);
        }
        exec_self_under_budget(!strcmp(how, "process"), BUDGETS, argv, NULL, NULL);
        _exit(1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "test_contexts: the run under %s failed\n", how);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char **argv)
{
    mode = getenv("TEST_CONTEXTS_UNDER");
    if (!mode) {
        CHECK(argc == 4); /* the interposer's path, the vram command's, the build folder */
        private_gpu("4GiB,2GiB");
        int rc = again("process", argv);
        rc = again("command", argv) || rc;
        rc = again("driver-only", argv) || rc;
        return rc;
    }
    with_nvml = strcmp(mode, "driver-only") != 0;
    if (getenv("VRAM_TEST_CHILD"))
        return child();
    CHECK(cuInit(0) == CUDA_SUCCESS);
    nvml_up();
    primary_contexts();
    created_contexts();
    attached_contexts();
    modules();
    every_family();
    if (strcmp(mode, "process") != 0)
        executed_child(argv);
    return 0;
}
