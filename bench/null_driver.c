/* A libcuda.so.1 whose calls return at once, for measuring what the
 * interposer adds to a call: with the simulated driver, a real allocation's
 * cost (file locks, shared occupancy) would hide tens of nanoseconds. Only
 * for bench/overhead.c; never a stand-in for the simulator. */
#include "../src/cuda/cuda_abi.h"

#define EXPORT __attribute__((visibility("default")))

static CUdeviceptr next = (CUdeviceptr)1 << 40;

EXPORT CUresult cuInit(unsigned int flags) { return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS; }
EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
    *d = 0;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    *d = ordinal;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    (void)dev;
    *bytes = (size_t)80 << 30;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    *p = next;
    next += (n + 511) & ~(size_t)511;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
    (void)p;
    return CUDA_SUCCESS;
}
