/* The real driver's figures that the simulated H100 (sim/config.h) is
 * calibrated to, measured on the GPU: the device's size as CUDA and NVML
 * (v1 and v2) give it, what a context takes, what the driver takes on its
 * own when kernels are first launched (CUDA_MODULE_LOADING=LAZY, the
 * default), and the steps in which a stream-ordered pool grows.
 * Built and run by tests/gpu/run.sh (nvcc); one `facts:` line per figure.
 * Run it without the interposer: it measures the driver, not vram. */
#include "nvml_own.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>

typedef struct {
    unsigned long long total, free, used;
} mem_v1;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} mem_v2;

static void nvml_memory(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!h) {
        printf("facts: nvml not loadable\n");
        return;
    }
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    int (*get)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    int (*v1)(void *, mem_v1 *) = (int (*)(void *, mem_v1 *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    int (*v2)(void *, mem_v2 *) = (int (*)(void *, mem_v2 *))dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
    void *dev;
    if (!init || !get || init() || get(0, &dev)) {
        printf("facts: nvml init failed\n");
        return;
    }
    mem_v1 a = {0, 0, 0};
    mem_v2 b = {(unsigned)sizeof(mem_v2) | 2u << 24, 0, 0, 0, 0};
    int ra = v1 ? v1(dev, &a) : -1, rb = v2 ? v2(dev, &b) : -1;
    printf("facts: nvml v1 rc=%d total=%llu free=%llu used=%llu\n", ra, a.total, a.free, a.used);
    printf("facts: nvml v2 rc=%d total=%llu reserved=%llu free=%llu used=%llu\n", rb, b.total,
           b.reserved, b.free, b.used);
    printf("facts: nvml SetMemoryLimits_v1 %s\n",
           dlsym(h, "nvmlDeviceSetMemoryLimits_v1") ? "present" : "absent");
}

template <int N> __global__ void kernel(float *p)
{
    p[threadIdx.x] += N;
}

template <int N> struct launcher {
    static void all(float *p)
    {
        kernel<N><<<1, 32>>>(p);
        launcher<N - 1>::all(p);
    }
};
template <> struct launcher<0> {
    static void all(float *) {}
};

int main(void)
{
    nvml_memory();
    size_t free_b, total;
    cudaFree(0); /* the primary context */
    cudaMemGetInfo(&free_b, &total);
    long long with_context = nvml_own();
    printf("facts: cuda total=%zu free=%zu; nvidia-smi lists the process at %lld (its context)\n",
           total, free_b, with_context);
    float *p;
    cudaMalloc(&p, 4096);
    cudaDeviceSynchronize();
    long long before = nvml_own();
    launcher<200>::all(p); /* 200 kernels, each loaded at its first launch */
    cudaDeviceSynchronize();
    long long after = nvml_own();
    printf("facts: lazy loading: 200 kernels first launched took %lld bytes the program never "
           "asked for (nvidia-smi %lld -> %lld)\n",
           after - before, before, after);
    cudaMemPool_t pool;
    cudaDeviceGetDefaultMemPool(&pool, 0);
    size_t sizes[] = {1, 1 << 20, 3 << 20, 33 << 20, 100 << 20, 1 << 30};
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        void *q;
        unsigned long long reserved = 0;
        cudaMallocAsync(&q, sizes[i], 0);
        cudaStreamSynchronize(0);
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
        printf("facts: pool after a live allocation of %zu more bytes: reserved %llu\n", sizes[i],
               reserved);
    }
    return 0;
}
