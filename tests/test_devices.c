/* The controls of libvram on the simulated GPU: visible devices, limits in
 * bytes and as fractions of the total, growth and preallocation, virtual
 * devices, trimming, statistics and out-of-memory reports. */
#include "../src/cuda/cuda_prototypes.h"
#include "check.h"

/* The test is linked to the (simulated) driver like a real CUDA program, to
 * hold memory behind libvram's back as another library or process would. */

static CUdeviceptr driver_hold(int dev, size_t bytes)
{
    CUcontext ctx, old;
    CUdeviceptr p = 0;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
    CHECK(cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&p, bytes) == CUDA_SUCCESS);
    CHECK(cuCtxPopCurrent_v2(&old) == CUDA_SUCCESS);
    return p;
}

static void driver_release(int dev, CUdeviceptr p)
{
    CUcontext ctx, old;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
    CHECK(cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    CHECK(cuCtxPopCurrent_v2(&old) == CUDA_SUCCESS);
}

static void visible_devices(void)
{
    setenv("VRAM_VISIBLE_DEVICES", "2,0", 1);
    int n;
    vram_device_info d;
    CHECK_OK(vram_device_count(&n));
    CHECK(n == 2);
    CHECK_OK(vram_device_get_info(0, &d));
    CHECK(d.ordinal == 2 && d.total == 3 * GiB && d.limit == 3 * GiB);
    CHECK_CONTAINS(d.uuid, "GPU-");
    CHECK_OK(vram_device_get_info(1, &d));
    CHECK(d.ordinal == 0 && d.total == GiB);
    CHECK_STATUS(vram_device_get_info(2, &d), VRAM_ERROR_NO_DEVICE);
    vram_shutdown();
    unsetenv("VRAM_VISIBLE_DEVICES");

    /* By UUID prefix through the API, which wins over the environment. */
    setenv("VRAM_VISIBLE_DEVICES", "0", 1);
    CHECK_OK(vram_set_visible_devices("GPU-5a1d0e5a-a1"));
    CHECK_OK(vram_device_count(&n));
    CHECK_OK(vram_device_get_info(0, &d));
    CHECK(n == 1 && d.ordinal == 1 && d.total == 2 * GiB);
    vram_shutdown();
    unsetenv("VRAM_VISIBLE_DEVICES");

    /* None visible: a clear error, not a crash. */
    CHECK_OK(vram_set_visible_devices(""));
    CHECK_OK(vram_device_count(&n));
    CHECK(n == 0);
    void *p;
    CHECK_STATUS(vram_malloc(0, 1, NULL, &p), VRAM_ERROR_NO_DEVICE);
    CHECK_CONTAINS(vram_last_error(), "VRAM_VISIBLE_DEVICES");
    vram_shutdown();
}

static void limits_and_oom(void)
{
    /* Per device: bytes on 0, a fraction of the total on 1, while another
     * holder has taken half of device 1: the fraction is of the total. */
    CUdeviceptr held = driver_hold(1, GiB);
    setenv("VRAM_MEMORY_LIMIT", "0=512MiB", 1);
    CHECK_OK(vram_set_memory_fraction(1, 0.5));
    vram_device_info d;
    CHECK_OK(vram_device_get_info(0, &d));
    CHECK(d.limit == 512 * MiB);
    CHECK_OK(vram_device_get_info(1, &d));
    CHECK(d.limit == GiB);
    CHECK(d.driver_free == GiB);

    void *p, *q;
    CHECK_OK(vram_malloc(0, 300 * MiB, NULL, &p));
    CHECK_STATUS(vram_malloc(0, 300 * MiB, NULL, &q), VRAM_ERROR_OUT_OF_MEMORY);
    const char *m = vram_last_error();
    CHECK_CONTAINS(m, "out of memory on device 0");
    CHECK_CONTAINS(m, "limit 512.00 MiB");
    CHECK_CONTAINS(m, "requested 300.00 MiB");
    CHECK_CONTAINS(m, "rounded to 314572800");
    CHECK_CONTAINS(m, "in use 300.00 MiB");
    CHECK_CONTAINS(m, "reserved");
    CHECK_CONTAINS(m, "largest free block");
    CHECK_CONTAINS(m, "of 1.00 GiB in total");
    vram_stats s;
    CHECK_OK(vram_get_stats(0, &s));
    CHECK(s.num_ooms == 1 && s.bytes_limit == 512 * MiB && s.bytes_in_use == 300 * MiB);
    CHECK(s.bytes_reserved <= s.bytes_limit);
    /* Larger than the limit alone: said so. */
    CHECK_STATUS(vram_malloc(0, 600 * MiB, NULL, &q), VRAM_ERROR_OUT_OF_MEMORY);
    CHECK_CONTAINS(vram_last_error(), "larger than the limit (VRAM_MEMORY_LIMIT=\"0=512MiB\")");
    /* Device 1: another holder has 1 GiB of its 2; ours is the other. */
    CHECK_OK(vram_malloc(1, 900 * MiB, NULL, &q));
    CHECK_STATUS(vram_malloc(1, 200 * MiB, NULL, &p), VRAM_ERROR_OUT_OF_MEMORY);
    CHECK_CONTAINS(vram_last_error(), "other processes and contexts hold about 1.00 GiB");
    vram_shutdown();
    unsetenv("VRAM_MEMORY_LIMIT");
    driver_release(1, held);
}

static void growth_and_preallocation(void)
{
    void *p;
    vram_stats s;
    /* TensorFlow's variable, with TensorFlow's meaning, when ours is unset. */
    setenv("TF_FORCE_GPU_ALLOW_GROWTH", "false", 1);
    CHECK_OK(vram_set_memory_limit(0, 256 * MiB));
    CHECK_OK(vram_malloc(0, 1 * MiB, NULL, &p));
    CHECK_OK(vram_get_stats(0, &s));
    CHECK(s.bytes_reserved == 256 * MiB && s.num_regions == 1); /* the whole limit at once */
    CHECK(s.device_total - s.device_free == 256 * MiB);
    vram_shutdown();

    setenv("VRAM_ALLOW_GROWTH", "true", 1); /* ours wins */
    CHECK_OK(vram_set_memory_limit(0, 256 * MiB));
    CHECK_OK(vram_malloc(0, 1 * MiB, NULL, &p));
    CHECK_OK(vram_get_stats(0, &s));
    CHECK(s.bytes_reserved == 2 * MiB);
    uint64_t last = s.bytes_reserved;
    for (int i = 0; i < 40; i++) {
        void *q;
        CHECK_OK(vram_malloc(0, 4 * MiB, NULL, &q));
        CHECK_OK(vram_get_stats(0, &s));
        CHECK(s.bytes_reserved >= last && s.bytes_reserved <= 256 * MiB);
        last = s.bytes_reserved;
    }
    CHECK(s.num_regions < 10); /* geometric, not one region per allocation */
    vram_shutdown();
    unsetenv("TF_FORCE_GPU_ALLOW_GROWTH");

    /* Growth backs off when the driver refuses a large region. */
    CUdeviceptr held = driver_hold(0, GiB - 40 * MiB);
    CHECK_OK(vram_malloc(0, 16 * MiB, NULL, &p)); /* next region would be 32 MiB */
    CHECK_OK(vram_malloc(0, 20 * MiB, NULL, &p)); /* only 24 MiB are left on the device */
    CHECK_OK(vram_get_stats(0, &s));
    CHECK(s.bytes_reserved == 36 * MiB && s.num_regions == 2);
    vram_shutdown();
    driver_release(0, held);
    unsetenv("VRAM_ALLOW_GROWTH");
}

static void virtual_devices(void)
{
    uint64_t parts[2] = {256 * MiB, 512 * MiB};
    CHECK_OK(vram_set_virtual_devices(0, 2, parts));
    int n;
    CHECK_OK(vram_device_count(&n));
    CHECK(n == 4); /* two parts of GPU 0, then GPUs 1 and 2 */
    vram_device_info d;
    CHECK_OK(vram_device_get_info(1, &d));
    CHECK(d.physical == 0 && d.virtual_index == 1 && d.virtual_count == 2 && d.limit == 512 * MiB);
    CHECK_OK(vram_device_get_info(2, &d));
    CHECK(d.physical == 1 && d.virtual_count == 1);
    void *a, *b;
    CHECK_STATUS(vram_malloc(0, 300 * MiB, NULL, &a), VRAM_ERROR_OUT_OF_MEMORY);
    CHECK_OK(vram_malloc(1, 300 * MiB, NULL, &b));
    CHECK_OK(vram_malloc(0, 200 * MiB, NULL, &a));
    vram_stats s;
    CHECK_OK(vram_get_physical_stats(0, &s));
    CHECK(s.bytes_in_use == 500 * MiB && s.bytes_limit == 768 * MiB && s.num_ooms == 1);
    vram_shutdown();
    /* From the environment, with the exact syntax of the docs. */
    setenv("VRAM_VIRTUAL_DEVICES", "0:256MiB,256MiB;2:1GiB", 1);
    CHECK_OK(vram_device_count(&n));
    CHECK(n == 4);
    CHECK_OK(vram_device_get_info(3, &d));
    CHECK(d.physical == 2 && d.limit == GiB);
    /* Out of memory on a part: the advice names the setting that made it
     * (issue 27, item 14), not VRAM_MEMORY_LIMIT, which would refuse to be
     * set beside it. */
    CHECK_STATUS(vram_malloc(0, 300 * MiB, NULL, &a), VRAM_ERROR_OUT_OF_MEMORY);
    CHECK_CONTAINS(vram_last_error(),
                   "larger than the limit (VRAM_VIRTUAL_DEVICES=\"0:256MiB,256MiB;2:1GiB\"): raise it");
    CHECK(strstr(vram_last_error(), "VRAM_MEMORY_LIMIT") == NULL);
    CHECK_OK(vram_malloc(1, 200 * MiB, NULL, &a));
    CHECK_STATUS(vram_malloc(1, 100 * MiB, NULL, &b), VRAM_ERROR_OUT_OF_MEMORY);
    CHECK_CONTAINS(vram_last_error(), "The limit (VRAM_VIRTUAL_DEVICES=");
    CHECK_CONTAINS(vram_last_error(), "is reached: free memory or raise it");
    vram_shutdown();
    unsetenv("VRAM_VIRTUAL_DEVICES");
}

static void trim_and_retry(void)
{
    vram_stats s;
    CHECK_OK(vram_set_allow_growth(1));
    CHECK_OK(vram_set_memory_limit(0, 64 * MiB));
    void *a, *b, *c;
    CHECK_OK(vram_malloc(0, 16 * MiB, NULL, &a));
    CHECK_OK(vram_malloc(0, 16 * MiB, NULL, &b));
    CHECK_OK(vram_get_stats(0, &s));
    CHECK(s.num_regions == 2);
    CHECK_OK(vram_free(a, NULL));
    CHECK_OK(vram_free(b, NULL));
    /* 60 MiB fits the limit but no region: the free regions go back to the
     * driver and one large one is taken (CuPy #7678 failed here). */
    CHECK_OK(vram_malloc(0, 60 * MiB, NULL, &c));
    CHECK_OK(vram_get_stats(0, &s));
    CHECK(s.num_alloc_retries == 1 && s.num_ooms == 0 && s.num_regions == 1);
    CHECK(s.peak_bytes_in_use == 60 * MiB && s.largest_alloc_size == 60 * MiB);
    CHECK_OK(vram_free(c, NULL));
    CHECK_OK(vram_reset_peak_stats(0));
    CHECK_OK(vram_get_stats(0, &s));
    CHECK(s.peak_bytes_in_use == 0 && s.largest_alloc_size == 0);
    uint64_t released;
    CHECK_OK(vram_trim(0, &released));
    CHECK(released == 64 * MiB);
    CHECK_OK(vram_get_stats(0, &s));
    CHECK(s.bytes_reserved == 0 && s.device_free == s.device_total);
    vram_shutdown();
}

static void pointers(void)
{
    void *p = (void *)1;
    CHECK_OK(vram_malloc(0, 0, NULL, &p));
    CHECK(p == NULL);
    CHECK_OK(vram_free(NULL, NULL));
    CHECK_OK(vram_malloc(0, 1000, NULL, &p));
    CHECK(((uintptr_t)p % 256) == 0);
    size_t size;
    CHECK_OK(vram_allocation_size(p, &size));
    CHECK(size == 1024);
    int on_stack;
    CHECK_STATUS(vram_free(&on_stack, NULL), VRAM_ERROR_UNKNOWN_POINTER);
    CHECK_OK(vram_free(p, NULL));
    CHECK_STATUS(vram_free(p, NULL), VRAM_ERROR_UNKNOWN_POINTER); /* double free */
    CHECK_CONTAINS(vram_last_error(), "already freed");
    CHECK_STATUS(vram_malloc(7, 1, NULL, &p), VRAM_ERROR_NO_DEVICE);
    CHECK_STATUS(vram_malloc(0, SIZE_MAX, NULL, &p), VRAM_ERROR_OUT_OF_MEMORY);
    CHECK_STATUS(vram_malloc(0, 1, NULL, NULL), VRAM_ERROR_INVALID_ARGUMENT);
    vram_shutdown();
}

int main(void)
{
    private_gpu("1GiB,2GiB,3GiB");
    visible_devices();
    limits_and_oom();
    growth_and_preallocation();
    virtual_devices();
    trim_and_retry();
    pointers();
    return 0;
}
