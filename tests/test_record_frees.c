/* test_record_frees: a recording holds every free it is given.
 *
 * Every PyTorch recording on the H100 and H200 said "3 frees of allocations
 * the recording does not hold were ignored" (4 on the H100). The reader
 * ignores a free it holds no allocation for, and counts an allocation of
 * an address it still holds: a free recorded after another thread's
 * allocation of the same address. The interposer stamped a free after the
 * driver had freed the address; a thread given that address at once
 * recorded its allocation first. PyTorch frees and allocates on several
 * threads, with no common lock: its caching allocator (releasing its
 * cached blocks and allocating again when refused), the handles of cuBLAS
 * and cuDNN made per thread with workspaces of their own, expandable
 * segments (VMM: map, unmap, release), the cudaMallocAsync backend. The
 * program here does each on threads of its own, on the simulated GPU under
 * `vram run --record` (before: 14 to 42 frees ignored in a run), then
 * `vram record info` must say it holds every free.
 *
 * Usage: test_record_frees VRAM
 */
#include "../src/cuda/cuda_prototypes.h"
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/wait.h>

#define PAIRS 3000
#define THREADS 4

static CUcontext ctx;

/* The pool's thread fills the budget now and then: the others, refused,
 * wait for room as a caching allocator would. */
static void room_for(CUresult (*call)(void *), void *arg)
{
    CUresult rc;
    while ((rc = call(arg)) == CUDA_ERROR_OUT_OF_MEMORY)
        sched_yield();
    CHECK(rc == CUDA_SUCCESS);
}

static CUresult alloc_2mib(void *p) { return cuMemAlloc_v2(p, 2 * MiB); }

struct create {
    CUmemGenericAllocationHandle *h;
    const CUmemAllocationProp *prop;
};
static CUresult create_2mib(void *arg)
{
    struct create *c = arg;
    return cuMemCreate(c->h, 2 * MiB, c->prop, 0);
}

/* A caching allocator's misses, a handle's workspaces: cuMemAlloc, then
 * cuMemFree, 2 MiB each time (the same addresses come back). */
static void *plain(void *arg)
{
    (void)arg;
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    for (int i = 0; i < PAIRS; i++) {
        CUdeviceptr p;
        room_for(alloc_2mib, &p);
        CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    }
    return NULL;
}

/* Expandable segments: a handle made, mapped, unmapped, released (PyTorch's
 * order), and every other time released while mapped, then unmapped (the
 * order of programs that keep only the mapping). */
static void *vmm(void *arg)
{
    (void)arg;
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    for (int i = 0; i < PAIRS / 10; i++) {
        CUmemGenericAllocationHandle h;
        CUdeviceptr va;
        CHECK(cuMemAddressReserve(&va, 2 * MiB, 0, 0, 0) == CUDA_SUCCESS);
        room_for(create_2mib, &(struct create){&h, &prop});
        CHECK(cuMemMap(va, 2 * MiB, 0, h, 0) == CUDA_SUCCESS);
        if (i % 2) {
            CHECK(cuMemRelease(h) == CUDA_SUCCESS);
            CHECK(cuMemUnmap(va, 2 * MiB) == CUDA_SUCCESS);
        } else {
            CHECK(cuMemUnmap(va, 2 * MiB) == CUDA_SUCCESS);
            CHECK(cuMemRelease(h) == CUDA_SUCCESS);
        }
        CHECK(cuMemAddressFree(va, 2 * MiB) == CUDA_SUCCESS);
    }
    return NULL;
}

/* The cudaMallocAsync backend near its budget: a pool filled until
 * refused (the last allocations made outside the pool), then emptied. */
static void *pool(void *arg)
{
    (void)arg;
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    static CUdeviceptr held[2048];
    for (int round = 0; round < 3; round++) {
        int n = 0;
        for (size_t step = 64 * MiB; step >= 2 * MiB && n < 2048;) {
            if (cuMemAllocAsync(&held[n], step, NULL) == CUDA_SUCCESS)
                n++;
            else
                step /= 2;
        }
        while (n > 0)
            CHECK(cuMemFreeAsync(held[--n], NULL) == CUDA_SUCCESS);
    }
    return NULL;
}

static int program(void)
{
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    pthread_t t[THREADS + 2];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, plain, NULL) == 0);
    CHECK(pthread_create(&t[THREADS], NULL, vmm, NULL) == 0);
    CHECK(pthread_create(&t[THREADS + 1], NULL, pool, NULL) == 0);
    for (int i = 0; i < THREADS + 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    return 0;
}

int main(int argc, char **argv)
{
    if (getenv("TEST_RECORD_FREES_PROGRAM"))
        return program();
    CHECK(argc == 2); /* the vram command */
    private_gpu("8GiB");
    char file[4200], self[4096], info[8600];
    snprintf(file, sizeof file, "%s/frees.vrec", private_gpu_dir);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TEST_RECORD_FREES_PROGRAM", "1", 1);
        execl(argv[1], argv[1], "run", "--limit", "2GiB", "--log", "off", "--record", file, "--",
              self, (char *)NULL);
        _exit(127);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    snprintf(info, sizeof info, "'%s' record info --json '%s'", argv[1], file);
    FILE *p = popen(info, "r");
    CHECK(p != NULL);
    static char out[1 << 16];
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = 0;
    CHECK(pclose(p) == 0);
    const char *u = strstr(out, "\"unmatched_frees\":");
    CHECK(u != NULL);
    unsigned long long unmatched = strtoull(u + strlen("\"unmatched_frees\":"), NULL, 10);
    printf("%llu frees of allocations the recording does not hold\n", unmatched);
    CHECK(unmatched == 0);
    return 0;
}
