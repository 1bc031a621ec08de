/* An unmodified CUDA program that allocates and frees without pause, for
 * killing at arbitrary instructions in test_run.sh: whatever it held when it
 * died must come back. Linked with -lcuda only. */
#include "../src/cuda/cuda_prototypes.h"

#include <stdio.h>

int main(void)
{
    CUcontext ctx;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxPushCurrent_v2(ctx))
        return 1;
    CUdeviceptr live[16] = {0};
    unsigned long long seed = 88172645463325252ull;
    printf("churning\n");
    fflush(stdout);
    for (unsigned long i = 0;; i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        CUdeviceptr *slot = &live[seed % 16];
        size_t size = (size_t)(seed >> 40) % (64u << 20) + 1;
        /* Even slots hold plain allocations, odd ones stream-ordered. */
        int async = (int)(slot - live) & 1;
        if (*slot) {
            if (async)
                cuMemFreeAsync(*slot, NULL);
            else
                cuMemFree_v2(*slot);
            *slot = 0;
        } else if ((async ? cuMemAllocAsync(slot, size, NULL) : cuMemAlloc_v2(slot, size)) != 0) {
            *slot = 0;
        }
    }
}
