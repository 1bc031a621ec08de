/* What the interposer adds to a driver call: run plainly, under
 * LD_PRELOAD=libvram-preload.so (a budget of the process's own), and under
 * vram run (one budget for the command) against the null driver, and
 * compare (make bench does all).
 *   alloc+free: a governed pair (cuMemAlloc_v2 + cuMemFree_v2), 64 live
 *               allocations cycling, as a caching allocator's misses do;
 *   cuDeviceGet: a call the interposer does not wrap.
 * --members N: N other processes of the command hold memory meanwhile (a
 * reservation sums every process's counter). --pairs N: N pairs a run
 * (2,000,000 by default; fewer under vram run --record, where each pair
 * is two events on disk: the writer thread, on the same core, is in the
 * figure). --context: make the device's primary context first (the
 * simulated driver needs one; with it the interposer reads what the
 * driver holds, and near the budget before every allocation: run once with
 * a budget far from the 64 live allocations and once with one within 64
 * MiB of them, and the difference is what a reading costs). */
#define _POSIX_C_SOURCE 200809L
#include "../src/cuda/cuda_abi.h"
#include "timing.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice) __attribute__((weak));
CUresult cuCtxPushCurrent_v2(CUcontext) __attribute__((weak));

#define RUNS 7

/* Another process of the command: holds a little, until stdin closes. */
static int member(void)
{
    CUdeviceptr p;
    cuInit(0);
    if (cuMemAlloc_v2(&p, 1 << 20) != CUDA_SUCCESS)
        return 1;
    printf("ready\n");
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0)
        ;
    return 0;
}

static int start_members(const char *self, int n, int *keep)
{
    int to[2], from[2];
    if (pipe(to) || pipe(from))
        return -1;
    for (int i = 0; i < n; i++)
        if (fork() == 0) {
            dup2(to[0], 0);
            dup2(from[1], 1);
            close(to[1]);
            execl(self, self, "--member", (char *)NULL);
            _exit(127);
        }
    close(to[0]);
    close(from[1]);
    char line[16];
    FILE *in = fdopen(from[0], "r");
    for (int i = 0; i < n; i++)
        if (!fgets(line, sizeof line, in) || strcmp(line, "ready\n") != 0)
            return -1;
    *keep = to[1]; /* closed at exit: they end */
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--member"))
        return member();
    bool context = argc >= 2 && !strcmp(argv[1], "--context");
    if (context)
        argc--, argv++;
    int members = argc == 3 && !strcmp(argv[1], "--members") ? atoi(argv[2]) : 0, keep = -1;
    int N = argc == 3 && !strcmp(argv[1], "--pairs") ? atoi(argv[2]) : 2000000;
    if (N < 64) {
        fprintf(stderr, "vram-bench-overhead: --pairs %s: expected at least 64\n", argv[2]);
        return 2;
    }
    if (members && start_members(argv[0], members, &keep) != 0) {
        fprintf(stderr, "vram-bench-overhead: the other processes did not start\n");
        return 1;
    }
    cuInit(0);
    CUcontext ctx;
    if (context && (!cuDevicePrimaryCtxRetain || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
                    cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS)) {
        fprintf(stderr, "vram-bench-overhead: --context: no context on device 0\n");
        return 1;
    }
    CUdeviceptr live[64] = {0};
    double pair[RUNS], plain[RUNS];
    int refused = 0;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now();
        for (int i = 0; i < N; i++) {
            CUdeviceptr *slot = &live[i & 63];
            if (*slot)
                cuMemFree_v2(*slot);
            *slot = 0;
            refused += cuMemAlloc_v2(slot, 4096 + (size_t)(i & 7) * 65536) != CUDA_SUCCESS;
        }
        pair[r] = (now() - t0) / N;
        CUdevice d;
        t0 = now();
        for (int i = 0; i < N; i++)
            cuDeviceGet(&d, 0);
        plain[r] = (now() - t0) / N;
    }
    /* A refusal is a shorter path than a grant: a figure with refusals in
     * it would be of the wrong thing (a budget above the device is refused
     * whole, and once made `make bench` time refusals without a word). */
    if (refused) {
        fprintf(stderr, "vram-bench-overhead: %d allocations were refused; the budget must hold "
                "64 live allocations (at most 29 MiB) beside the context\n", refused);
        return 1;
    }
    qsort(pair, RUNS, sizeof *pair, cmp);
    qsort(plain, RUNS, sizeof *plain, cmp);
    char what[64];
    if (getenv("VRAM_COMMAND") && getenv("VRAM_RECORD"))
        snprintf(what, sizeof what, "command budget, recorded");
    else if (getenv("VRAM_COMMAND"))
        snprintf(what, sizeof what, "command budget, %d process%s", members + 1,
                 members ? "es" : "");
    else
        snprintf(what, sizeof what, "%s", getenv("LD_PRELOAD") ? "per-process budget" : "plain");
    if (getenv("OVERHEAD_LABEL"))
        snprintf(what, sizeof what, "%s", getenv("OVERHEAD_LABEL"));
    printf("%-28s alloc+free pair %5.1f ns, cuDeviceGet %4.1f ns (median of %d runs of %d)\n",
           what, pair[RUNS / 2], plain[RUNS / 2], RUNS, N);
    return 0;
}
