/* What charging contexts and modules to the budget adds to making them, on
 * the simulated driver and NVML (make bench runs it plainly and under
 * LD_PRELOAD=libvram-preload.so with a budget, through bench/contexts.sh):
 *   context: cuCtxCreate_v2 + cuCtxDestroy_v2, beside the primary context;
 *   module:  cuModuleLoadData + cuModuleUnload of a 64 KiB PTX image.
 * --start VRAM: instead, the wall-clock time of `VRAM run --limit 8GiB
 * --log off -- true`, which makes, measures and releases a context on each
 * GPU the program will see before it starts anything.
 * Under the interposer each is reserved, measured with NVML's figure for
 * the process before and after the driver's call, and settled: that, not
 * the simulator's own work, is the difference. A context is made rarely
 * (a process's first use of a GPU); a module, a few times per library. */
#define _POSIX_C_SOURCE 200809L
#include "../src/cuda/cuda_abi.h"
#include "timing.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define DRIVER(fn) extern __typeof__(*(PFN_##fn)0) fn
DRIVER(cuInit);
DRIVER(cuDevicePrimaryCtxRetain);
DRIVER(cuCtxPushCurrent_v2);
DRIVER(cuCtxSetCurrent);
DRIVER(cuCtxCreate_v2);
DRIVER(cuCtxDestroy_v2);
DRIVER(cuModuleLoadData);
DRIVER(cuModuleUnload);

#define RUNS 7
#define PAIRS 300

static void fail(const char *what)
{
    fprintf(stderr, "vram-bench-contexts: %s failed\n", what);
    exit(1);
}

extern char **environ;

/* The median wall-clock time of `vram run ... -- true`, in ms. */
static int start(char *vram)
{
    enum { STARTS = 21 };
    char *argv[] = {vram, "run", "--limit", "8GiB", "--log", "off", "--", "true", NULL};
    double t[STARTS];
    for (int i = 0; i < STARTS; i++) {
        pid_t pid;
        int status;
        double t0 = now();
        if (posix_spawn(&pid, vram, NULL, NULL, argv, environ) != 0 ||
            waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail("vram run --limit 8GiB --log off -- true");
        t[i] = now() - t0;
    }
    qsort(t, STARTS, sizeof *t, cmp);
    printf("%6.1f ms (median of %d)\n", t[STARTS / 2] / 1e6, STARTS);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--start") == 0)
        return start(argv[2]);
    CUcontext primary;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&primary, 0) != CUDA_SUCCESS ||
        cuCtxPushCurrent_v2(primary) != CUDA_SUCCESS)
        fail("cuInit and the primary context");
    static char image[64 << 10];
    static const char head[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                               ".visible .entry kernel()\n{\nret;\n}\n";
    memset(image, ' ', sizeof image - 1);
    memcpy(image, head, sizeof head - 1);
    double context[RUNS], module[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now();
        for (int i = 0; i < PAIRS; i++) {
            CUcontext c;
            if (cuCtxCreate_v2(&c, 0, 0) != CUDA_SUCCESS || cuCtxDestroy_v2(c) != CUDA_SUCCESS)
                fail("cuCtxCreate_v2 + cuCtxDestroy_v2");
        }
        context[r] = (now() - t0) / PAIRS;
        if (cuCtxSetCurrent(primary) != CUDA_SUCCESS)
            fail("cuCtxSetCurrent");
        t0 = now();
        for (int i = 0; i < PAIRS; i++) {
            CUmodule m;
            if (cuModuleLoadData(&m, image) != CUDA_SUCCESS || cuModuleUnload(m) != CUDA_SUCCESS)
                fail("cuModuleLoadData + cuModuleUnload");
        }
        module[r] = (now() - t0) / PAIRS;
    }
    qsort(context, RUNS, sizeof *context, cmp);
    qsort(module, RUNS, sizeof *module, cmp);
    printf("%-28s context create+destroy %6.1f us, module load+unload %6.1f us "
           "(median of %d runs of %d)\n",
           getenv("LD_PRELOAD") ? "budget, contexts charged" : "plain", context[RUNS / 2] / 1e3,
           module[RUNS / 2] / 1e3, RUNS, PAIRS);
    return 0;
}
