// A CUDA runtime program: reports the device size it sees, allocates in
// 64 MiB steps until cudaMalloc fails, and reports what nvidia-smi then lists
// for it. Built with nvcc by tests/gpu/run.sh.
#include "nvml_own.h"

#include <cstdio>
#include <cuda_runtime.h>

int main()
{
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess)
        return 1;
    size_t got = 0;
    void *p;
    cudaError_t e;
    while ((e = cudaMalloc(&p, 64ull << 20)) == cudaSuccess)
        got += 64ull << 20;
    printf("runtime default total=%zu got=%zu nvml=%lld error=%s\n", total, got, nvml_own(),
           cudaGetErrorName(e));
    return 0;
}
