/* vram-demo-grab: an unmodified CUDA program that behaves like TensorFlow
 * at start: it asks the driver how much memory the device has free and
 * takes all of it for its own pool, then trains inside that pool. It knows
 * nothing of vram; it is linked with -lcuda like any CUDA program.
 *
 * Prints: RESULT <name> <device size it saw> <bytes it took> ok|OOM
 * (NEED_MIB: what the model needs at least, 3072 MiB unless given). */
#define _POSIX_C_SOURCE 200809L
#include "../src/cuda/cuda_abi.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

CUresult cuInit(unsigned int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxPushCurrent_v2(CUcontext);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: vram-demo-grab NAME STEPS [NEED_MIB]\n");
        return 2;
    }
    const char *name = argv[1];
    int steps = atoi(argv[2]);
    /* What the model needs: 3 GiB unless told. */
    size_t NEED = (argc == 4 ? strtoull(argv[3], NULL, 10) : 3072) << 20;
    CUcontext ctx;
    size_t free_bytes = 0, total = 0;
    if (cuInit(0) != CUDA_SUCCESS) {
        fprintf(stderr, "job %s: no CUDA device\n", name);
        return 1;
    }
    /* A context takes device memory too: on a full device (or a budget
     * that cannot hold one) there is none to be had. */
    if (cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_ERROR_OUT_OF_MEMORY) {
        fprintf(stderr, "job %s: CUDA_ERROR_OUT_OF_MEMORY: no room for a CUDA context\n", name);
        printf("RESULT %s 0 0 OOM\n", name);
        return 1;
    }
    if (cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS || cuMemGetInfo_v2(&free_bytes, &total) != CUDA_SUCCESS) {
        fprintf(stderr, "job %s: no CUDA device\n", name);
        return 1;
    }
    /* All that is free; or, when that is too little, at least what the model
     * needs, as a framework would try before giving up. */
    CUdeviceptr pool;
    CUresult rc = cuMemAlloc_v2(&pool, free_bytes >= NEED ? free_bytes : NEED);
    if (rc != CUDA_SUCCESS) {
        fprintf(stderr, "job %s: CUDA_ERROR_OUT_OF_MEMORY: the device has %.2f GiB free of %.2f GiB, "
                        "the model needs %.2f GiB\n",
                name, free_bytes / 1073741824.0, total / 1073741824.0, NEED / 1073741824.0);
        printf("RESULT %s %zu 0 OOM\n", name, total);
        return 1;
    }
    for (int s = 0; s < steps; s++) {
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    cuMemFree_v2(pool);
    printf("RESULT %s %zu %zu ok\n", name, total, free_bytes);
    return 0;
}
