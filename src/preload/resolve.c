/* resolve: how a program's driver calls reach libvram-preload.so's hooks.
 *
 * libvram-preload.so is loaded with LD_PRELOAD. Programs reach the driver
 * three ways, and each is covered:
 *   - linked with -lcuda: the dynamic linker binds cuMemAlloc_v2 & co. to
 *     our exports, which carry the driver's exact versioned names;
 *   - dlsym(libcuda, "cuMemAlloc_v2"): our dlsym asks the real one, then
 *     swaps in a hook only if the answer *is* the driver function we wrap;
 *   - cuGetProcAddress(_v2), which the CUDA runtime uses for everything:
 *     the real resolver answers first (honouring the requested CUDA version,
 *     the per-thread-stream flag and the symbol status), then the same
 *     identity swap. Nothing is guessed from names, so an entry point we do
 *     not wrap (or a _ptsz variant we do not govern) passes through exactly
 *     as the driver gave it.
 *
 * dlsym and cuGetProcAddress do no work beyond the lookup: the table of
 * real functions is filled on the first lookup of a governed name, and
 * budgets are read on the first governed call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "interposer.h"

#include <dlfcn.h>
#include <string.h>

/* The dlsym path can run inside a sanitizer's own start-up (real.c). */
#define UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined", "thread"), noinline))

/* Tells libvram, in the same process, that the environment's budget is
 * already enforced here: the device it sees *is* the budget, and applying
 * VRAM_MEMORY_LIMIT/FRACTION again would take a fraction of a fraction. */
EXPORT const int vram_preload_active = 1;

/* ---------------------------------------------------------------- hooks */

/* Each governed entry point: its exact exported name, where its real
 * address goes, and our hook. */
static const struct governed {
    const char *name;
    void **real;
    void *hook;
} governed[] = {
#define G(fn) {#fn, (void **)&real.fn, (void *)fn}
    G(cuMemAlloc_v2),     G(cuMemAlloc),        G(cuMemAllocPitch_v2), G(cuMemAllocPitch),
    G(cuMemAllocManaged), G(cuMemFree_v2),      G(cuMemFree),          G(cuMemGetInfo_v2),
    G(cuMemGetInfo),      G(cuDeviceTotalMem_v2), G(cuDeviceTotalMem),  G(cuGetProcAddress),
    G(cuGetProcAddress_v2),
    G(cuMemAllocAsync),   G(cuMemAllocAsync_ptsz), G(cuMemAllocFromPoolAsync),
    G(cuMemAllocFromPoolAsync_ptsz), G(cuMemFreeAsync), G(cuMemFreeAsync_ptsz),
    G(cuMemPoolTrimTo),   G(cuMemPoolDestroy),  G(cuMemPoolSetAttribute),
    G(cuMemCreate),       G(cuMemRelease),      G(cuMemMap),           G(cuMemUnmap),
    G(cuArrayCreate_v2),  G(cuArray3DCreate_v2), G(cuArrayDestroy),
    G(cuMipmappedArrayCreate), G(cuMipmappedArrayDestroy),
    G(cuGraphAddMemAllocNode), G(cuGraphInstantiateWithFlags), G(cuGraphLaunch),
    G(cuGraphLaunch_ptsz), G(cuGraphUpload), G(cuGraphUpload_ptsz), G(cuDeviceGraphMemTrim),
    G(cuCtxCreate),       G(cuCtxCreate_v2),    G(cuCtxCreate_v3),     G(cuCtxCreate_v4),
    G(cuCtxDestroy),      G(cuCtxDestroy_v2),   G(cuCtxAttach),        G(cuCtxDetach),
    G(cuDevicePrimaryCtxRetain),
    G(cuDevicePrimaryCtxRelease), G(cuDevicePrimaryCtxRelease_v2), G(cuDevicePrimaryCtxReset),
    G(cuDevicePrimaryCtxReset_v2), G(cuModuleLoad), G(cuModuleLoadData), G(cuModuleLoadDataEx),
    G(cuModuleLoadFatBinary), G(cuModuleUnload), G(cuLibraryLoadData), G(cuLibraryLoadFromFile),
    G(cuLibraryUnload),
    G(nvmlDeviceGetMemoryInfo), G(nvmlDeviceGetMemoryInfo_v2),
    G(nvmlDeviceGetComputeRunningProcesses), G(nvmlDeviceGetComputeRunningProcesses_v2),
    G(nvmlDeviceGetComputeRunningProcesses_v3), G(nvmlDeviceGetProcessUtilization),
    G(nvmlDeviceGetProcessesUtilizationInfo), G(nvmlDeviceGetAccountingPids),
    G(nvmlDeviceGetAccountingStats),
#undef G
};
#define NGOVERNED (sizeof governed / sizeof *governed)

/* The hook for a real driver function, or the function itself. */
static void *swap(void *p)
{
    if (!p)
        return p;
    need_real();
    for (size_t i = 0; i < NGOVERNED; i++)
        if (*governed[i].real == p)
            return governed[i].hook;
    return p;
}

/* ------------------------------------------------------------ resolution */

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    need_real();
    CUresult rc;
    if (real.cuGetProcAddress_v2)
        rc = real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, status);
    else if (real.cuGetProcAddress)
        rc = real.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    else
        return CUDA_ERROR_NOT_SUPPORTED;
    if (rc == CUDA_SUCCESS && pfn)
        *pfn = swap(*pfn);
    return rc;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    need_real();
    CUresult rc;
    if (real.cuGetProcAddress)
        rc = real.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    else if (real.cuGetProcAddress_v2)
        rc = real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
    else
        return CUDA_ERROR_NOT_SUPPORTED;
    if (rc == CUDA_SUCCESS && pfn)
        *pfn = swap(*pfn);
    return rc;
}

/* dlsym is exported twice: as dlsym@@GLIBC_2.34 (programs built on current
 * glibc) and under the older version that programs built before 2.34
 * reference (see preload.map). Only names we govern are looked at twice. */
/* A governed name asked of the driver: ask the real dlsym, swap by identity. */
static void *governed_lookup(void *handle, const char *name)
{
    void *p = real_dlsym()(handle, name);
    if (p && name[0] == 'n')
        need_nvml();
    return swap(p);
}

UNINSTRUMENTED static int same_name(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* Where a dlsym call goes: the real one for every name we do not govern
 * (and for RTLD_NEXT, which only the real one can answer for its caller),
 * governed_lookup otherwise. */
UNINSTRUMENTED void *vram_dlsym_route(void *handle, const char *name);
void *vram_dlsym_route(void *handle, const char *name)
{
    if (handle != RTLD_NEXT && name &&
        ((name[0] == 'c' && name[1] == 'u') || (name[0] == 'n' && name[1] == 'v')))
        for (size_t i = 0; i < NGOVERNED; i++)
            if (same_name(governed[i].name, name))
                return (void *)governed_lookup;
    return (void *)real_dlsym();
}

/* dlsym itself is a trampoline that *jumps* to the chosen function with
 * the caller's registers and return address untouched: glibc's dlsym finds
 * "the object after the caller" for RTLD_NEXT from its return address, so
 * a plain call from C would answer relative to this library instead.
 *
 * It is exported twice: dlsym@@GLIBC_2.34 for programs built on current
 * glibc (through preload.map) and dlsym@<older version> for programs built
 * before 2.34. */
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl vram_dlsym_entry\n"
        ".type vram_dlsym_entry, @function\n"
        "vram_dlsym_entry:\n"
        "    push %rdi\n"
        "    push %rsi\n"
        "    sub $8, %rsp\n" /* 16-byte alignment for the call */
        "    call vram_dlsym_route\n"
        "    add $8, %rsp\n"
        "    pop %rsi\n"
        "    pop %rdi\n"
        "    jmp *%rax\n"
        ".size vram_dlsym_entry, .-vram_dlsym_entry\n"
        ".globl vram_dlsym_compat\n"
        ".set vram_dlsym_compat, vram_dlsym_entry\n"
        ".symver vram_dlsym_entry, dlsym@@GLIBC_2.34\n"
        ".symver vram_dlsym_compat, dlsym@GLIBC_2.2.5\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl vram_dlsym_entry\n"
        ".type vram_dlsym_entry, %function\n"
        "vram_dlsym_entry:\n"
        "    stp x29, x30, [sp, #-32]!\n"
        "    mov x29, sp\n"
        "    stp x0, x1, [sp, #16]\n"
        "    bl vram_dlsym_route\n"
        "    mov x16, x0\n"
        "    ldp x0, x1, [sp, #16]\n"
        "    ldp x29, x30, [sp], #32\n"
        "    br x16\n"
        ".size vram_dlsym_entry, .-vram_dlsym_entry\n"
        ".globl vram_dlsym_compat\n"
        ".set vram_dlsym_compat, vram_dlsym_entry\n"
        ".symver vram_dlsym_entry, dlsym@@GLIBC_2.34\n"
        ".symver vram_dlsym_compat, dlsym@GLIBC_2.17\n");
#else
/* Elsewhere RTLD_NEXT lookups are answered relative to this library. */
EXPORT void *dlsym(void *handle, const char *name)
{
    return ((real_dlsym_fn)vram_dlsym_route(handle, name))(handle, name);
}
#endif

