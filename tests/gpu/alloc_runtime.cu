// A CUDA runtime program: reports the device size it sees and what it said
// was free, allocates until the allocation fails, and reports what
// nvidia-smi then lists for it. Built with nvcc by tests/gpu/run.sh.
//   alloc_runtime            cudaMalloc in 64 MiB steps
//   alloc_runtime async      cudaMallocAsync on a stream (the device's pool)
//   alloc_runtime pool       cudaMallocFromPoolAsync on a pool of its own
// The stream-ordered ones go on in halving steps down to 2 MiB (the
// granularity), so that got= says how close to free= a pool can fill.
#include "nvml_own.h"

#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "default";
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess)
        return 1;
    size_t got = 0, step = 64ull << 20;
    void *p;
    cudaError_t e = cudaSuccess;
    if (!strcmp(mode, "default")) {
        while ((e = cudaMalloc(&p, step)) == cudaSuccess)
            got += step;
    } else {
        cudaStream_t s;
        cudaMemPool_t pool;
        bool own = !strcmp(mode, "pool");
        if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
            return 1;
        if (own) {
            cudaMemPoolProps props = {};
            props.allocType = cudaMemAllocationTypePinned;
            props.location.type = cudaMemLocationTypeDevice;
            props.location.id = 0;
            if (cudaMemPoolCreate(&pool, &props) != cudaSuccess)
                return 1;
        }
        while (step >= (2ull << 20)) {
            cudaError_t r = own ? cudaMallocFromPoolAsync(&p, step, pool, s)
                                : cudaMallocAsync(&p, step, s);
            if (r == cudaSuccess) {
                got += step;
            } else {
                e = r;
                (void)cudaGetLastError();
                step /= 2;
            }
        }
        cudaStreamSynchronize(s);
    }
    printf("runtime %s total=%zu free=%zu got=%zu nvml=%lld error=%s\n", mode, total, free_b, got,
           nvml_own(), cudaGetErrorName(e));
    return 0;
}
