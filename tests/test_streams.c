/* Stream-ordered frees: a block freed on a stream is reused at once by that
 * stream, and by another stream only after the work queued before the free
 * has completed. The "work" is a host function that blocks until released,
 * queued with cuLaunchHostFunc as on a real GPU. */
#include "../src/cuda/cuda_prototypes.h"
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>

static atomic_int gate;

static void wait_for_gate(void *arg)
{
    (void)arg;
    while (!atomic_load(&gate))
        usleep(1000);
}

int main(void)
{
    private_gpu("1GiB");
    CHECK_OK(vram_set_allow_growth(1));
    CHECK_OK(vram_init());
    CUcontext ctx;
    CUstream s1, s2;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
    CHECK(cuStreamCreate(&s1, 0) == CUDA_SUCCESS && cuStreamCreate(&s2, 0) == CUDA_SUCCESS);

    /* s1 is busy until the gate opens. */
    CHECK(cuLaunchHostFunc(s1, wait_for_gate, NULL) == CUDA_SUCCESS);
    void *p, *q;
    CHECK_OK(vram_malloc(0, MiB, s1, &p));
    CHECK_OK(vram_free(p, s1));
    vram_stats st;
    CHECK_OK(vram_get_stats(0, &st));
    CHECK(st.bytes_pending == MiB && st.bytes_in_use == 0);

    /* The same stream takes it back at once: its work runs in order. */
    CHECK_OK(vram_malloc(0, MiB, s1, &q));
    CHECK(q == p);
    CHECK_OK(vram_free(q, s1));

    /* Another stream must not get it while s1's work is pending, however
     * many allocations it makes. */
    void *others[8];
    for (int i = 0; i < 8; i++) {
        CHECK_OK(vram_malloc(0, MiB, s2, &others[i]));
        CHECK(others[i] != p);
    }
    CHECK_OK(vram_malloc(0, MiB, NULL, &q));
    CHECK(q != p);
    CHECK_OK(vram_free(q, NULL));
    CHECK_OK(vram_get_stats(0, &st));
    CHECK(st.bytes_pending == MiB);

    /* Once s1's work is done, the block is free for everyone. */
    atomic_store(&gate, 1);
    CHECK(cuStreamSynchronize(s1) == CUDA_SUCCESS);
    CHECK_OK(vram_malloc(0, MiB, s2, &q));
    CHECK_OK(vram_get_stats(0, &st));
    CHECK(st.bytes_pending == 0);
    CHECK_OK(vram_free(q, s2));
    for (int i = 0; i < 8; i++)
        CHECK_OK(vram_free(others[i], s2));

    /* Trim waits for pending frees, then everything goes back. */
    atomic_store(&gate, 0);
    CHECK(cuLaunchHostFunc(s2, wait_for_gate, NULL) == CUDA_SUCCESS);
    CHECK_OK(vram_malloc(0, MiB, s2, &q));
    CHECK_OK(vram_free(q, s2));
    atomic_store(&gate, 1);
    uint64_t released;
    CHECK_OK(vram_trim(0, &released));
    CHECK_OK(vram_get_stats(0, &st));
    CHECK(st.bytes_pending == 0 && st.bytes_reserved == 0 && st.device_free == st.device_total);
    CHECK(cuStreamDestroy_v2(s1) == CUDA_SUCCESS && cuStreamDestroy_v2(s2) == CUDA_SUCCESS);
    vram_shutdown();
    return 0;
}
