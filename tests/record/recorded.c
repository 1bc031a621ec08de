/* recorded: an unmodified CUDA program (linked with -lcuda and
 * -lnvidia-ml only) for the tests of `vram run --record`. It uses the
 * governed families and writes to LOG what the recording of it must hold,
 * from what it saw itself: the pointers and handles the driver gave it, the
 * bytes each call was charged (the budget the program sees went down by
 * them), what was in use when a request was refused.
 *
 *   recorded families LOG   every family on device 0 (its context and a
 *                           second one, modules and a library, plain,
 *                           legacy, pitched, managed, pools, VMM, arrays,
 *                           graph memory), refusals of each, four threads at
 *                           once, then a peak of its context and 640 MiB
 *   recorded pairs LOG N    N allocate-free pairs (2 MiB, 4 MiB, ...)
 *   recorded forks LOG N    four threads allocate and free while the program
 *                           forks N children, one after the other, which
 *                           find CUDA unusable (forked after cuInit) and exit
 *   recorded churn LOG      allocate and free without end (to be killed)
 *   recorded lazy LOG N     N modules of 2 MiB, a kernel of each launched (the
 *                           driver takes its code then, 2 MiB each, which no
 *                           call vram governs asks for) and 64 MiB, held
 *                           while the interposer reads NVML (350 ms): its
 *                           STEP "held" says what NVML and the budget counted
 *   recorded exec MIB PROGRAM ARGS...  allocate MIB MiB, hold it a second (the
 *                           recorder writes what threads buffered every
 *                           100 ms), then exec PROGRAM without freeing it:
 *                           the driver frees it at exec
 *   recorded train STEPS    the memory of a training loop, for the README's
 *                           picture (docs/timeline.sh, where a link named
 *                           train runs it as "train STEPS"): weights, optimizer
 *                           state, a workspace, activations from the stream-
 *                           ordered pool growing and shrinking every step
 *                           (a smaller batch when refused), a CUDA graph
 *                           from the middle on, an evaluation array now and
 *                           then; writes no LOG
 *
 * LOG, one line each:
 *   EXPECT tid action family device address bytes aux stream reason
 *          an event the recording must hold (numbers of recording.h), in
 *          the order of its thread
 *   STEP name time used nvml
 *          after a step: CLOCK_MONOTONIC (ns), what the budget counts in use
 *          (the budget less what cuMemGetInfo says is free; "-" in pairs,
 *          whose processes share the budget with others at the same time)
 *          and what the simulated GPU says this process holds (NVML's
 *          process list)
 *   DONE time address   (churn) a pair done, written at once with write(2)
 * Runs under a budget of 1276 MiB, its CUDA contexts inside it (the
 * simulated GPU's 518 MiB each: two of them and 240 MiB); every charge is a multiple of 2 MiB, so cuMemGetInfo's
 * figure is exact. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../../src/cuda/array_layout.h"
#include "../../src/cuda/cuda_abi.h"
#include "../../src/cuda/nvml_abi.h"
#include "../../src/record/recording.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The driver's entry points this program calls, declared with the
 * driver's own function types (cuda_api.h, nvml_abi.h). */
#define DRIVER(fn) extern __typeof__(*(PFN_##fn)0) fn
DRIVER(cuInit);
DRIVER(cuDevicePrimaryCtxRetain);
DRIVER(cuCtxPushCurrent_v2);
DRIVER(cuCtxCreate_v2);
DRIVER(cuCtxDestroy_v2);
DRIVER(cuModuleLoadData);
DRIVER(cuModuleUnload);
DRIVER(cuModuleGetFunction);
DRIVER(cuLaunchKernel);
DRIVER(cuLibraryLoadData);
DRIVER(cuLibraryUnload);
DRIVER(cuCtxSetCurrent);
DRIVER(cuStreamCreate);
DRIVER(cuMemGetInfo_v2);
DRIVER(cuMemAlloc_v2);
DRIVER(cuMemAlloc);
DRIVER(cuMemAllocPitch_v2);
DRIVER(cuMemAllocManaged);
DRIVER(cuMemFree_v2);
DRIVER(cuDeviceGetMemPool);
DRIVER(cuMemAllocAsync);
DRIVER(cuMemFreeAsync);
DRIVER(cuMemAllocFromPoolAsync);
DRIVER(cuMemPoolCreate);
DRIVER(cuMemPoolDestroy);
DRIVER(cuMemPoolTrimTo);
DRIVER(cuMemPoolSetAttribute);
DRIVER(cuMemCreate);
DRIVER(cuMemRelease);
DRIVER(cuMemAddressReserve);
DRIVER(cuMemAddressFree);
DRIVER(cuMemMap);
DRIVER(cuMemUnmap);
DRIVER(cuArrayCreate_v2);
DRIVER(cuArray3DCreate_v2);
DRIVER(cuArrayDestroy);
DRIVER(cuMipmappedArrayCreate);
DRIVER(cuMipmappedArrayDestroy);
DRIVER(cuGraphCreate);
DRIVER(cuGraphAddMemAllocNode);
DRIVER(cuGraphInstantiateWithFlags);
DRIVER(cuGraphLaunch);
DRIVER(cuGraphExecDestroy);
DRIVER(cuGraphDestroy);
DRIVER(cuDeviceGraphMemTrim);
DRIVER(nvmlInit_v2);
DRIVER(nvmlDeviceGetHandleByIndex_v2);
DRIVER(nvmlDeviceGetComputeRunningProcesses_v3);

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define BUDGET (1276ull << 20) /* test_run_record.sh gives it */

static FILE *log_file;

#define MUST(x)                                                                                \
    do {                                                                                       \
        if (!(x)) {                                                                            \
            fprintf(stderr, "recorded: %s:%d: %s failed\n", __FILE__, __LINE__, #x);            \
            exit(3);                                                                           \
        }                                                                                      \
    } while (0)

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static CUcontext cuda_up(void)
{
    CUcontext ctx;
    MUST(cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS &&
         cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
    return ctx;
}

/* What the budget counts in use: its total less what is free in it. */
static uint64_t used(void)
{
    size_t f, t;
    MUST(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS && t == BUDGET);
    return t - f;
}

/* What the simulated GPU says this process holds. */
static uint64_t nvml_used(void)
{
    nvmlDevice_t d;
    nvmlProcessInfo_t info[256];
    unsigned n = 256;
    MUST(nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS &&
         nvmlDeviceGetComputeRunningProcesses_v3(d, &n, info) == NVML_SUCCESS);
    for (unsigned i = 0; i < n; i++)
        if (info[i].pid == (unsigned)getpid())
            return info[i].usedGpuMemory;
    return 0;
}

struct expect_buffer {
    char *text;
    size_t len;
};

/* One event the recording must hold, into `b` (a thread's) or the log. */
static void expect_to(struct expect_buffer *b, enum record_action action,
                      enum record_family family, uint64_t address, uint64_t bytes, uint64_t aux,
                      uint64_t stream, unsigned reason)
{
    char line[256];
    int n = snprintf(line, sizeof line, "EXPECT %d %d %d 0 %llu %llu %llu %llu %u\n", gettid(),
                     action, family, (unsigned long long)address, (unsigned long long)bytes,
                     (unsigned long long)aux, (unsigned long long)stream, reason);
    if (!b) {
        fputs(line, log_file);
        return;
    }
    b->text = realloc(b->text, b->len + (size_t)n + 1);
    MUST(b->text);
    memcpy(b->text + b->len, line, (size_t)n + 1);
    b->len += (size_t)n;
}

#define expect(...) expect_to(NULL, __VA_ARGS__)

static bool alone = true; /* no other process uses the budget meanwhile */

static void step(const char *name)
{
    uint64_t t = now_ns();
    char budget[32] = "-";
    if (alone)
        snprintf(budget, sizeof budget, "%llu", (unsigned long long)used());
    fprintf(log_file, "STEP %s %llu %s %llu\n", name, (unsigned long long)t, budget,
            (unsigned long long)nvml_used());
}

/* NVML started, the primary context made: the first governed call
 * resolves the device's budget (its event), then the context is made and
 * charged what the simulated GPU says this process holds now (nothing
 * before it). */
static void started(void)
{
    MUST(nvmlInit_v2() == NVML_SUCCESS && nvml_used() == 0);
    CUcontext ctx = cuda_up();
    expect(RECORD_BUDGET, RECORD_NO_FAMILY, 0, BUDGET, 0, 0, RECORD_COMMAND_BUDGET);
    expect(RECORD_CONTEXT, RECORD_NO_FAMILY, (uint64_t)(uintptr_t)ctx, 0, 0, 0, 0);
    expect(RECORD_ALLOC, RECORD_CONTEXT_MEMORY, (uint64_t)(uintptr_t)ctx, nvml_used(), 0, 0, 0);
    step("start");
}

/* An allocation of `family` through `call`: what it was charged is what
 * the budget lost. */
#define ALLOCATED(family, ptr, call)                                                           \
    do {                                                                                       \
        uint64_t before_ = used();                                                             \
        MUST((call) == CUDA_SUCCESS);                                                          \
        expect(RECORD_ALLOC, family, (uint64_t)(uintptr_t)(ptr), used() - before_, 0, 0, 0);   \
    } while (0)

#define FREED(family, key, call)                                                               \
    do {                                                                                       \
        uint64_t before_ = used();                                                             \
        MUST((call) == CUDA_SUCCESS);                                                          \
        expect(RECORD_FREE, family, (uint64_t)(uintptr_t)(key), before_ - used(), 0, 0, 0);    \
    } while (0)

/* Refused for being over the budget, asking `bytes`. */
#define REFUSED(family, bytes, stream, call)                                                   \
    do {                                                                                       \
        uint64_t before_ = used();                                                             \
        MUST((call) == CUDA_ERROR_OUT_OF_MEMORY);                                              \
        MUST(used() == before_);                                                               \
        expect(RECORD_REFUSE, family, 0, bytes, before_, (uint64_t)(uintptr_t)(stream),        \
               RECORD_OVER_BUDGET);                                                            \
    } while (0)

/* A pool's (or the graph reservation's) charge went from before to after. */
#define RESIZED(family, key, stream, call)                                                     \
    do {                                                                                       \
        uint64_t before_ = used();                                                             \
        MUST((call) == CUDA_SUCCESS);                                                          \
        uint64_t after_ = used();                                                              \
        MUST(after_ != before_);                                                               \
        resized(family, (uint64_t)(uintptr_t)(key), (uint64_t)(uintptr_t)(stream), before_,    \
                after_);                                                                       \
    } while (0)

/* What the one reservation live at a time (a pool's, the graph memory's)
 * holds, as the program has seen it change. */
static uint64_t reserved;

static void resized(enum record_family family, uint64_t key, uint64_t stream, uint64_t before,
                    uint64_t after)
{
    uint64_t was = reserved;
    reserved = was + after - before;
    expect(RECORD_RESIZE, family, key, reserved, was, stream, 0);
}

/* A context of its own beside the primary one; a third has no room. */
static void contexts(void)
{
    CUcontext c, x;
    uint64_t before = used();
    MUST(cuCtxCreate_v2(&c, 0, 0) == CUDA_SUCCESS); /* current now */
    uint64_t size = used() - before;
    expect(RECORD_CONTEXT, RECORD_NO_FAMILY, (uint64_t)(uintptr_t)c, 0, 0, 0, 0);
    expect(RECORD_ALLOC, RECORD_CONTEXT_MEMORY, (uint64_t)(uintptr_t)c, size, 0, 0, 0);
    step("context");
    REFUSED(RECORD_CONTEXT_MEMORY, size, 0, cuCtxCreate_v2(&x, 0, 0));
    FREED(RECORD_CONTEXT_MEMORY, c, cuCtxDestroy_v2(c)); /* the primary one is current again */
    step("context-destroyed");
}

/* A PTX image of `bytes` (with its NUL). */
static char *ptx(size_t bytes)
{
    static const char head[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                               ".visible .entry kernel()\n{\nret;\n}\n";
    char *p = malloc(bytes);
    MUST(p);
    memset(p, ' ', bytes - 1);
    memcpy(p, head, sizeof head - 1);
    p[bytes - 1] = 0;
    return p;
}

/* A module and a library charged their code; a fatbinary whose header says
 * 2 GiB is refused before the driver reads it. */
static void modules(void)
{
    char *image = ptx(3 * MiB + 1); /* whole 2 MiB pages: 4 MiB */
    CUmodule m, x;
    CUlibrary l;
    ALLOCATED(RECORD_MODULE, m, cuModuleLoadData(&m, image));
    ALLOCATED(RECORD_MODULE, l, cuLibraryLoadData(&l, image, NULL, NULL, 0, NULL, NULL, 0));
    unsigned char fat[16] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0}; /* magic, version, header */
    uint64_t body = 2 * GiB - sizeof fat;
    memcpy(fat + 8, &body, sizeof body); /* little-endian, as the header's */
    REFUSED(RECORD_MODULE, 2 * GiB, 0, cuModuleLoadData(&x, fat));
    step("modules");
    FREED(RECORD_MODULE, m, cuModuleUnload(m));
    FREED(RECORD_MODULE, l, cuLibraryUnload(l));
    step("modules-done");
    free(image);
}

static void plain_pitched_managed(void)
{
    CUdeviceptr p, q, m, x;
    CUdeviceptr_v1 x32;
    size_t pitch;
    ALLOCATED(RECORD_PLAIN, p, cuMemAlloc_v2(&p, 64 * MiB));
    ALLOCATED(RECORD_PITCHED, q, cuMemAllocPitch_v2(&q, &pitch, 4000, 1024, 4));
    ALLOCATED(RECORD_MANAGED, m, cuMemAllocManaged(&m, 32 * MiB, CU_MEM_ATTACH_GLOBAL));
    step("allocated");
    REFUSED(RECORD_PLAIN, 2 * GiB, 0, cuMemAlloc_v2(&x, 2 * GiB));
    REFUSED(RECORD_PLAIN, 2 * GiB, 0, cuMemAlloc(&x32, (unsigned)(2 * GiB)));
    REFUSED(RECORD_PITCHED, 2 * GiB, 0, cuMemAllocPitch_v2(&x, &pitch, 65536, 32768, 4));
    REFUSED(RECORD_MANAGED, 2 * GiB, 0, cuMemAllocManaged(&x, 2 * GiB, CU_MEM_ATTACH_GLOBAL));
    step("refused");
    FREED(RECORD_PLAIN, p, cuMemFree_v2(p));
    FREED(RECORD_PITCHED, q, cuMemFree_v2(q));
    FREED(RECORD_MANAGED, m, cuMemFree_v2(m));
    step("freed");
}

static void pools(CUstream st)
{
    CUmemoryPool dflt, pool;
    CUdeviceptr a, b;
    MUST(cuDeviceGetMemPool(&dflt, 0) == CUDA_SUCCESS);
    RESIZED(RECORD_POOL, dflt, st, cuMemAllocAsync(&a, 16 * MiB, st));
    step("pool-grown");
    REFUSED(RECORD_POOL, 2 * GiB, st, cuMemAllocAsync(&b, 2 * GiB, st));
    RESIZED(RECORD_POOL, dflt, st, cuMemFreeAsync(a, st)); /* threshold 0: it shrinks */
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    MUST(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
    cuuint64_t keep = GiB;
    MUST(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) == CUDA_SUCCESS);
    RESIZED(RECORD_POOL, pool, st, cuMemAllocFromPoolAsync(&a, 20 * MiB, pool, st));
    uint64_t kept = used();
    MUST(cuMemFreeAsync(a, st) == CUDA_SUCCESS && used() == kept); /* kept: no event */
    RESIZED(RECORD_POOL, pool, 0, cuMemPoolTrimTo(pool, 0));
    RESIZED(RECORD_POOL, pool, st, cuMemAllocFromPoolAsync(&a, 8 * MiB, pool, st));
    step("user-pool");
    RESIZED(RECORD_POOL, pool, 0, cuMemPoolDestroy(pool));
    step("pools-done");
}

static void virtual_memory(void)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUmemGenericAllocationHandle h, h2, x;
    CUdeviceptr va;
    ALLOCATED(RECORD_VMM, h, cuMemCreate(&h, 32 * MiB, &prop, 0));
    ALLOCATED(RECORD_VMM, h2, cuMemCreate(&h2, 16 * MiB, &prop, 0));
    REFUSED(RECORD_VMM, 2 * GiB, 0, cuMemCreate(&x, 2 * GiB, &prop, 0));
    MUST(cuMemAddressReserve(&va, 32 * MiB, 0, 0, 0) == CUDA_SUCCESS);
    MUST(cuMemMap(va, 32 * MiB, 0, h, 0) == CUDA_SUCCESS);
    expect(RECORD_MAP, RECORD_VMM, va, 32 * MiB, h, 0, 0);
    uint64_t before = used();
    MUST(cuMemRelease(h) == CUDA_SUCCESS && used() == before); /* mapped: still held */
    expect(RECORD_RELEASE, RECORD_VMM, h, 32 * MiB, 0, 0, 0);
    step("vmm-mapped");
    MUST(cuMemUnmap(va, 32 * MiB) == CUDA_SUCCESS && used() == before - 32 * MiB);
    expect(RECORD_UNMAP, RECORD_VMM, va, 32 * MiB, 0, 0, 0);
    expect(RECORD_FREE, RECORD_VMM, h, 32 * MiB, 0, 0, 0);
    MUST(cuMemAddressFree(va, 32 * MiB) == CUDA_SUCCESS);
    FREED(RECORD_VMM, h2, cuMemRelease(h2)); /* never mapped: freed at release */
    step("vmm-done");
}

static void arrays(void)
{
    CUarray a, b, x;
    CUmipmappedArray m;
    CUDA_ARRAY_DESCRIPTOR d = {1000, 1000, CU_AD_FORMAT_FLOAT, 4};
    ALLOCATED(RECORD_ARRAY, a, cuArrayCreate_v2(&a, &d));
    CUDA_ARRAY3D_DESCRIPTOR vol = {256, 256, 256, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
    ALLOCATED(RECORD_ARRAY, b, cuArray3DCreate_v2(&b, &vol));
    CUDA_ARRAY3D_DESCRIPTOR tex = {2048, 2048, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
    ALLOCATED(RECORD_ARRAY, m, cuMipmappedArrayCreate(&m, &tex, 12));
    CUDA_ARRAY3D_DESCRIPTOR big = {4096, 4096, 16, CU_AD_FORMAT_FLOAT, 4, 0};
    REFUSED(RECORD_ARRAY, array_layout_bytes(&big, 1), 0, cuArray3DCreate_v2(&x, &big));
    step("arrays");
    FREED(RECORD_ARRAY, m, cuMipmappedArrayDestroy(m));
    FREED(RECORD_ARRAY, a, cuArrayDestroy(a));
    FREED(RECORD_ARRAY, b, cuArrayDestroy(b));
    step("arrays-done");
}

static void graph_memory(CUstream st)
{
    CUgraph g;
    CUgraphNode n;
    CUDA_MEM_ALLOC_NODE_PARAMS p = {.poolProps = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                  .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}},
                                    .bytesize = 64 * MiB};
    MUST(cuGraphCreate(&g, 0) == CUDA_SUCCESS);
    MUST(cuGraphAddMemAllocNode(&n, g, NULL, 0, &p) == CUDA_SUCCESS);
    p.bytesize = 32 * MiB;
    MUST(cuGraphAddMemAllocNode(&n, g, NULL, 0, &p) == CUDA_SUCCESS);
    p.bytesize = 2 * GiB;
    REFUSED(RECORD_GRAPH, 2 * GiB, 0, cuGraphAddMemAllocNode(&n, g, NULL, 0, &p));
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS);
    RESIZED(RECORD_GRAPH, 1, st, cuGraphLaunch(e, st)); /* key: device 0 + 1 */
    uint64_t held = used();
    MUST(cuGraphLaunch(e, st) == CUDA_SUCCESS && used() == held); /* the reservation again */
    step("graph-launched");
    RESIZED(RECORD_GRAPH, 1, 0, cuDeviceGraphMemTrim(0));
    MUST(cuGraphExecDestroy(e) == CUDA_SUCCESS && cuGraphDestroy(g) == CUDA_SUCCESS);
    step("graph-trimmed");
}

/* Threads at once: each thread's events in its order, under its id. */
#define THREADS 4
#define PAIRS 25

/* A thread's i-th allocate-free pair, and what the recording must hold. */
static void thread_pair(struct expect_buffer *b, int i)
{
    CUdeviceptr p;
    uint64_t bytes = 2 * MiB * (uint64_t)(1 + i % 3);
    MUST(cuMemAlloc_v2(&p, bytes) == CUDA_SUCCESS);
    expect_to(b, RECORD_ALLOC, RECORD_PLAIN, p, bytes, 0, 0, 0);
    MUST(cuMemFree_v2(p) == CUDA_SUCCESS);
    expect_to(b, RECORD_FREE, RECORD_PLAIN, p, bytes, 0, 0, 0);
}

static void *thread_pairs(void *arg)
{
    for (int i = 0; i < PAIRS; i++)
        thread_pair(arg, i);
    return NULL;
}

static CUcontext main_ctx;

static void *thread_main(void *arg)
{
    MUST(cuCtxSetCurrent(main_ctx) == CUDA_SUCCESS);
    return thread_pairs(arg);
}

static void threads(void)
{
    pthread_t t[THREADS];
    struct expect_buffer b[THREADS] = {{0}};
    MUST(cuDevicePrimaryCtxRetain(&main_ctx, 0) == CUDA_SUCCESS);
    for (int i = 0; i < THREADS; i++)
        MUST(pthread_create(&t[i], NULL, thread_main, &b[i]) == 0);
    for (int i = 0; i < THREADS; i++) {
        MUST(pthread_join(t[i], NULL) == 0);
        if (b[i].text)
            fputs(b[i].text, log_file);
        free(b[i].text);
    }
    step("threads");
}

static int families(void)
{
    started();
    CUstream st;
    MUST(cuStreamCreate(&st, 0) == CUDA_SUCCESS);
    contexts();
    modules();
    plain_pitched_managed();
    pools(st);
    virtual_memory();
    arrays();
    graph_memory(st);
    threads();
    CUdeviceptr p;
    /* More than the two contexts at once, so that the peak is this. */
    ALLOCATED(RECORD_PLAIN, p, cuMemAlloc_v2(&p, 640 * MiB));
    step("peak");
    FREED(RECORD_PLAIN, p, cuMemFree_v2(p));
    step("end");
    return 0;
}

/* A threaded program that forks while its threads allocate, as PyTorch's
 * DataLoader forks its workers: N children, one after the other, each of
 * which finds CUDA unusable (forked after cuInit: CUDA_ERROR_NOT_INITIALIZED,
 * as on NVIDIA's driver), so records nothing, and exits (exit: the
 * recorder's end and every atexit handler run in it). A child that has not
 * ended in a minute (it takes milliseconds) waits on a lock nobody will
 * let go: the program fails. The threads' events are all in the recording,
 * each once; at most FORK_PAIRS pairs a thread per fork, not gigabytes. */
#define FORK_PAIRS 40

static _Atomic int forks_done;
static atomic_bool forking_over;
static bool lsan_off;

/* LeakSanitizer cannot check a child of a threaded process (see
 * tests/test_record.c): off in the children. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return lsan_off; }
/* ThreadSanitizer waits a second at exit while other threads are listed,
 * as a child of a threaded process lists its parent's: 200 seconds for
 * nothing. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "atexit_sleep_ms=0"; }

static void *thread_forked_around(void *arg)
{
    struct expect_buffer *b = arg;
    MUST(cuCtxSetCurrent(main_ctx) == CUDA_SUCCESS);
    for (int i = 0; !atomic_load(&forking_over);) {
        if (i >= (atomic_load(&forks_done) + 1) * FORK_PAIRS) {
            usleep(100);
            continue;
        }
        thread_pair(b, i++);
    }
    return NULL;
}

static int forks(int n)
{
    started();
    pthread_t t[THREADS];
    struct expect_buffer b[THREADS] = {{0}};
    MUST(cuDevicePrimaryCtxRetain(&main_ctx, 0) == CUDA_SUCCESS);
    for (int i = 0; i < THREADS; i++)
        MUST(pthread_create(&t[i], NULL, thread_forked_around, &b[i]) == 0);
    for (int c = 0; c < n; c++) {
        fflush(NULL); /* the child's exit writes its copy of what is buffered */
        pid_t pid = fork();
        MUST(pid >= 0);
        if (pid == 0) {
            lsan_off = true;
            CUdeviceptr p;
            exit(cuMemAlloc_v2(&p, 2 * MiB) == CUDA_ERROR_NOT_INITIALIZED ? 0 : 4);
        }
        int st = 0;
        pid_t got = 0;
        for (int ms = 0; ms < 60000 && (got = waitpid(pid, &st, WNOHANG)) == 0; ms++)
            usleep(1000);
        if (got != pid) {
            fprintf(stderr, "recorded: child %d of %d (pid %d) hung: it did not end in a minute\n",
                    c + 1, n, (int)pid);
            kill(pid, SIGKILL);
            exit(3);
        }
        MUST(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        atomic_fetch_add(&forks_done, 1);
    }
    atomic_store(&forking_over, true);
    for (int i = 0; i < THREADS; i++) {
        MUST(pthread_join(t[i], NULL) == 0);
        if (b[i].text)
            fputs(b[i].text, log_file);
        free(b[i].text);
    }
    /* No step: what the reader last made of NVML while the threads ran
     * may stand until its next reading. */
    return 0;
}

/* With other processes allocating at the same time, what the budget lost
 * is not this process's alone: sizes of whole pages are their own charge. */
static int pairs(int n)
{
    alone = false;
    started();
    for (int i = 0; i < n; i++) {
        CUdeviceptr p;
        uint64_t bytes = 2 * MiB * (uint64_t)(1 + i % 4);
        MUST(cuMemAlloc_v2(&p, bytes) == CUDA_SUCCESS);
        expect(RECORD_ALLOC, RECORD_PLAIN, p, bytes, 0, 0, 0);
        step("allocated");
        MUST(cuMemFree_v2(p) == CUDA_SUCCESS);
        expect(RECORD_FREE, RECORD_PLAIN, p, bytes, 0, 0, 0);
    }
    step("end");
    return 0;
}

/* Each pair is written to the log by itself, at once: what the log says
 * was done, the program did, whenever it is killed. */
static int churn(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    MUST(fd >= 0);
    cuda_up();
    for (unsigned long i = 0;; i++) {
        CUdeviceptr p;
        MUST(cuMemAlloc_v2(&p, 2 * MiB) == CUDA_SUCCESS);
        MUST(cuMemFree_v2(p) == CUDA_SUCCESS);
        char line[64];
        int n = snprintf(line, sizeof line, "DONE %llu %llu\n", (unsigned long long)now_ns(),
                         (unsigned long long)p);
        MUST(write(fd, line, (size_t)n) == n);
        if (i % 64 == 0)
            usleep(1000);
    }
}

static void pause_ms(long ms)
{
    struct timespec t = {ms / 1000, ms % 1000 * 1000000L};
    nanosleep(&t, NULL);
}

static int train(int steps)
{
    cuda_up();
    CUstream st;
    MUST(cuStreamCreate(&st, 0) == CUDA_SUCCESS);
    CUdeviceptr weights[4], optimizer, act[10];
    for (int i = 0; i < 4; i++) {
        MUST(cuMemAlloc_v2(&weights[i], 256 * MiB) == CUDA_SUCCESS);
        pause_ms(20);
    }
    MUST(cuMemAllocManaged(&optimizer, 512 * MiB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUmemGenericAllocationHandle ws;
    CUdeviceptr va;
    MUST(cuMemCreate(&ws, 256 * MiB, &prop, 0) == CUDA_SUCCESS);
    MUST(cuMemAddressReserve(&va, 256 * MiB, 0, 0, 0) == CUDA_SUCCESS);
    MUST(cuMemMap(va, 256 * MiB, 0, ws, 0) == CUDA_SUCCESS);
    CUgraphExec graph = NULL;
    for (int s = 0; s < steps; s++) {
        if (s == steps / 2) { /* captured from here on: its memory stays reserved */
            CUgraph g;
            CUgraphNode n;
            CUDA_MEM_ALLOC_NODE_PARAMS p = {
                .poolProps = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}},
                .bytesize = 384 * MiB};
            MUST(cuGraphCreate(&g, 0) == CUDA_SUCCESS &&
                 cuGraphAddMemAllocNode(&n, g, NULL, 0, &p) == CUDA_SUCCESS &&
                 cuGraphInstantiateWithFlags(&graph, g, 0) == CUDA_SUCCESS &&
                 cuGraphDestroy(g) == CUDA_SUCCESS);
        }
        /* Forward: activations pile up (a smaller batch when the budget
         * says no); backward: they go, and the pool shrinks. */
        size_t chunk = 128 * MiB;
        int n = 0;
        while (n < 10) {
            if (cuMemAllocAsync(&act[n], chunk, st) == CUDA_SUCCESS) {
                n++;
                pause_ms(4);
            } else if ((chunk /= 2) < 16 * MiB) {
                break;
            }
        }
        if (graph && cuGraphLaunch(graph, st) != CUDA_SUCCESS)
            pause_ms(5); /* no room for it this step */
        CUarray eval = NULL;
        if (s % 8 == 7) {
            CUDA_ARRAY3D_DESCRIPTOR vol = {512, 512, 256, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
            if (cuArray3DCreate_v2(&eval, &vol) != CUDA_SUCCESS)
                eval = NULL;
        }
        pause_ms(15);
        while (n > 0) {
            MUST(cuMemFreeAsync(act[--n], st) == CUDA_SUCCESS);
            pause_ms(3);
        }
        if (eval)
            MUST(cuArrayDestroy(eval) == CUDA_SUCCESS);
        pause_ms(10);
    }
    if (graph)
        MUST(cuGraphExecDestroy(graph) == CUDA_SUCCESS && cuDeviceGraphMemTrim(0) == CUDA_SUCCESS);
    MUST(cuMemUnmap(va, 256 * MiB) == CUDA_SUCCESS && cuMemRelease(ws) == CUDA_SUCCESS &&
         cuMemAddressFree(va, 256 * MiB) == CUDA_SUCCESS);
    MUST(cuMemFree_v2(optimizer) == CUDA_SUCCESS);
    for (int i = 0; i < 4; i++)
        MUST(cuMemFree_v2(weights[i]) == CUDA_SUCCESS);
    return 0;
}

/* The driver's own memory: code loaded lazily at a kernel's first launch.
 * Its events come from the interposer's readings, whose times the program
 * does not choose: the log has no EXPECT lines, only its steps. */
static int lazy(int n)
{
    MUST(nvmlInit_v2() == NVML_SUCCESS); /* before the reader thread: see test_driver_memory */
    cuda_up();
    step("start");
    char *image = ptx(2 * MiB);
    CUmodule *mods = calloc((size_t)n, sizeof *mods);
    MUST(mods);
    for (int i = 0; i < n; i++) {
        CUfunction f;
        MUST(cuModuleLoadData(&mods[i], image) == CUDA_SUCCESS &&
             cuModuleGetFunction(&f, mods[i], "kernel") == CUDA_SUCCESS &&
             cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
    }
    CUdeviceptr p;
    MUST(cuMemAlloc_v2(&p, 64 * MiB) == CUDA_SUCCESS);
    pause_ms(350); /* three of the interposer's readings */
    step("held");
    MUST(cuMemFree_v2(p) == CUDA_SUCCESS);
    for (int i = 0; i < n; i++)
        MUST(cuModuleUnload(mods[i]) == CUDA_SUCCESS);
    free(mods);
    free(image);
    return 0;
}

static int exec_holding(int mib, char **argv)
{
    cuda_up();
    CUdeviceptr p;
    MUST(cuMemAlloc_v2(&p, (size_t)mib * MiB) == CUDA_SUCCESS);
    pause_ms(1000);
    execv(argv[0], argv);
    perror(argv[0]);
    return 127;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "exec") == 0)
        return exec_holding(atoi(argv[2]), &argv[3]);
    if (argc >= 3 && strcmp(argv[1], "churn") == 0)
        return churn(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "train") == 0)
        return train(atoi(argv[2]));
    /* Called "train" (docs/timeline.sh links it so): "train STEPS", as the
     * README's commands show it. */
    const char *base = strrchr(argv[0], '/');
    if (argc == 2 && strcmp(base ? base + 1 : argv[0], "train") == 0)
        return train(atoi(argv[1]));
    if (argc < 3 || (strcmp(argv[1], "families") != 0 && strcmp(argv[1], "pairs") != 0 &&
                     strcmp(argv[1], "lazy") != 0 && strcmp(argv[1], "forks") != 0)) {
        fprintf(stderr, "usage: recorded families LOG | pairs LOG N | lazy LOG N | forks LOG N | "
                        "churn LOG | train STEPS | exec MIB PROGRAM ARGS...\n");
        return 2;
    }
    log_file = fopen(argv[2], "w");
    MUST(log_file);
    fprintf(log_file, "PID %d\n", getpid());
    int n = argc > 3 ? atoi(argv[3]) : 10;
    int rc = strcmp(argv[1], "families") == 0 ? families()
             : strcmp(argv[1], "lazy") == 0   ? lazy(n)
             : strcmp(argv[1], "forks") == 0  ? forks(n)
                                              : pairs(n);
    MUST(fclose(log_file) == 0);
    return rc;
}
