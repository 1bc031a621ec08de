/* What the interposer adds to a driver call: run once plainly and once
 * under LD_PRELOAD=libvram-preload.so (make bench does both) against the
 * null driver, and compare.
 *   alloc+free: a governed pair (cuMemAlloc_v2 + cuMemFree_v2), 64 live
 *               allocations cycling, as a caching allocator's misses do;
 *   cuDeviceGet: a call the interposer does not wrap. */
#define _POSIX_C_SOURCE 200809L
#include "../src/cuda/cuda_abi.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define N 2000000
#define RUNS 7

int main(void)
{
    cuInit(0);
    CUdeviceptr live[64] = {0};
    double pair[RUNS], plain[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now();
        for (int i = 0; i < N; i++) {
            CUdeviceptr *slot = &live[i & 63];
            if (*slot)
                cuMemFree_v2(*slot);
            cuMemAlloc_v2(slot, 4096 + (size_t)(i & 7) * 65536);
        }
        pair[r] = (now() - t0) / N;
        CUdevice d;
        t0 = now();
        for (int i = 0; i < N; i++)
            cuDeviceGet(&d, 0);
        plain[r] = (now() - t0) / N;
    }
    qsort(pair, RUNS, sizeof *pair, cmp);
    qsort(plain, RUNS, sizeof *plain, cmp);
    printf("%s: alloc+free pair %.1f ns, cuDeviceGet %.1f ns (median of %d runs of %d)\n",
           getenv("LD_PRELOAD") ? "interposed" : "plain     ", pair[RUNS / 2], plain[RUNS / 2],
           RUNS, N);
    return 0;
}
