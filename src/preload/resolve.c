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
#include "../cuda/uuid.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* Tells libvram, in the same process, that the environment's budget is
 * already enforced here: the device it sees *is* the budget, and applying
 * VRAM_MEMORY_LIMIT/FRACTION again would take a fraction of a fraction. */
EXPORT const int vram_preload_active = 1;

/* ------------------------------------------------------ the real driver */

typedef void *(*dlsym_fn)(void *, const char *);
static _Atomic(dlsym_fn) real_dlsym_ptr;

/* The dlsym path can run inside a sanitizer's own start-up (ASan looks up
 * its interceptors' targets with dlsym before its shadow memory exists), so
 * it is not instrumented and calls nothing of libc but dlvsym. */
#define UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined", "thread"), noinline))

UNINSTRUMENTED static dlsym_fn real_dlsym(void)
{
    dlsym_fn f = atomic_load_explicit(&real_dlsym_ptr, memory_order_acquire);
    if (!f) {
        /* dlvsym is not ours, so this cannot recurse into our dlsym. */
        f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!f)
#if defined(__aarch64__)
            f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
#else
            f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
#endif
        atomic_store_explicit(&real_dlsym_ptr, f, memory_order_release);
    }
    return f;
}

struct real_driver real;

/* Each governed entry point: its exact exported name, where its real
 * address goes, and our hook. */
static const struct governed {
    const char *name;
    void **real;
    void *hook;
    int nvml; /* found in libnvidia-ml.so.1, not libcuda.so.1 */
} governed[] = {
#define G(fn) {#fn, (void **)&real.fn, (void *)fn, 0}
#define N(fn) {#fn, (void **)&real.fn, (void *)fn, 1}
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
    N(nvmlDeviceGetMemoryInfo), N(nvmlDeviceGetMemoryInfo_v2),
    N(nvmlDeviceGetComputeRunningProcesses), N(nvmlDeviceGetComputeRunningProcesses_v2),
    N(nvmlDeviceGetComputeRunningProcesses_v3), N(nvmlDeviceGetProcessUtilization),
    N(nvmlDeviceGetProcessesUtilizationInfo), N(nvmlDeviceGetAccountingPids),
    N(nvmlDeviceGetAccountingStats),
#undef G
#undef N
};
#define NGOVERNED (sizeof governed / sizeof *governed)

static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static void *real_lib;

static void load_real(void)
{
    /* The driver is normally loaded already (we are asked because the
     * program uses it); RTLD_NOLOAD avoids loading it on our own account. */
    real_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!real_lib)
        real_lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!real_lib)
        return;
    dlsym_fn sym = real_dlsym();
    for (size_t i = 0; i < NGOVERNED; i++)
        if (!governed[i].nvml)
            *governed[i].real = sym(real_lib, governed[i].name);
    real.cuInit = (PFN_cuInit)sym(real_lib, "cuInit");
    real.cuDeviceGetGraphMemAttribute =
        (PFN_cuDeviceGetGraphMemAttribute)sym(real_lib, "cuDeviceGetGraphMemAttribute");
    real.cuDeviceGetCount = (PFN_cuDeviceGetCount)sym(real_lib, "cuDeviceGetCount");
    real.cuDeviceGetUuid = (PFN_cuDeviceGetUuid)sym(real_lib, "cuDeviceGetUuid");
    real.cuCtxGetDevice = (PFN_cuCtxGetDevice)sym(real_lib, "cuCtxGetDevice");
    real.cuCtxGetCurrent = (PFN_cuCtxGetCurrent)sym(real_lib, "cuCtxGetCurrent");
    real.cuCtxPushCurrent_v2 = (PFN_cuCtxPushCurrent_v2)sym(real_lib, "cuCtxPushCurrent_v2");
    real.cuCtxPopCurrent_v2 = (PFN_cuCtxPopCurrent_v2)sym(real_lib, "cuCtxPopCurrent_v2");
    real.cuDeviceGetName = (PFN_cuDeviceGetName)sym(real_lib, "cuDeviceGetName");
    real.cuDeviceGetMemPool = (PFN_cuDeviceGetMemPool)sym(real_lib, "cuDeviceGetMemPool");
    real.cuMemPoolGetAttribute = (PFN_cuMemPoolGetAttribute)sym(real_lib, "cuMemPoolGetAttribute");
    real.cuArrayGetMemoryRequirements =
        (PFN_cuArrayGetMemoryRequirements)sym(real_lib, "cuArrayGetMemoryRequirements");
    real.cuMipmappedArrayGetMemoryRequirements = (PFN_cuMipmappedArrayGetMemoryRequirements)sym(
        real_lib, "cuMipmappedArrayGetMemoryRequirements");
}

void need_real(void) { pthread_once(&real_once, load_real); }

void *real_symbol(void *lib, const char *name) { return real_dlsym()(lib, name); }

/* NVML is resolved separately, once the program has loaded it (until then
 * each NVML lookup tries again): the interposer never loads NVML on a
 * program's behalf. */
static atomic_bool nvml_loaded;
static pthread_mutex_t nvml_load_mu = PTHREAD_MUTEX_INITIALIZER;

void need_nvml(void)
{
    if (atomic_load_explicit(&nvml_loaded, memory_order_acquire))
        return;
    pthread_mutex_lock(&nvml_load_mu);
    void *lib = nvml_loaded ? NULL : dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib) {
        dlsym_fn sym = real_dlsym();
        for (size_t i = 0; i < NGOVERNED; i++)
            if (governed[i].nvml)
                *governed[i].real = sym(lib, governed[i].name);
        real.nvmlDeviceGetUUID = (PFN_nvmlDeviceGetUUID)sym(lib, "nvmlDeviceGetUUID");
        atomic_store_explicit(&nvml_loaded, true, memory_order_release);
    }
    pthread_mutex_unlock(&nvml_load_mu);
}

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

/* -------------------------------------------------------------- budgets */

static uint64_t physical_total(int dev)
{
    size_t t = 0;
    if (real.cuDeviceTotalMem_v2 && real.cuDeviceTotalMem_v2(&t, dev) != CUDA_SUCCESS)
        t = 0;
    return t;
}

static int physical_uuid(int dev, char *out)
{
    CUuuid u;
    if (!real.cuDeviceGetUuid || real.cuDeviceGetUuid(&u, dev) != CUDA_SUCCESS)
        return -1;
    uuid_text((const unsigned char *)u.bytes, out);
    return 0;
}

pthread_once_t budget_once = PTHREAD_ONCE_INIT;

static void after_fork_child(void) { budget_after_fork(); }

void setup_budgets(void)
{
    need_real();
    /* Before the budgets, whose setting is the first event. A recording
     * asked for and not made is said whatever VRAM_LOG says, as a bad
     * budget is: the user would otherwise find out only at the end. */
    char err[PATH_MAX + 160];
    if (recorder_start_from_environment(err, sizeof err) != 0)
        fprintf(stderr, "vram: error: %s; this process's GPU memory events are not recorded\n",
                err);
    budget_setup(physical_total, physical_uuid);
    pthread_atfork(NULL, NULL, after_fork_child);
}

/* The device of the calling thread's current context, if a budget governs
 * it; -1 means "not ours: pass through". */
int governed_device(void)
{
    pthread_once(&budget_once, setup_budgets);
    CUdevice dev;
    if (!real.cuCtxGetDevice || real.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return -1;
    return budget_limited(dev) ? dev : -1;
}

/* Frees: the driver decides; the charge comes back only if it agreed. */
CUresult governed_free(uint64_t key, CUresult (*driver)(uint64_t))
{
    int dev;
    uint64_t bytes;
    enum charge_kind kind;
    if (!budget_forget(key, &dev, &bytes, &kind))
        return driver(key); /* not ours: the driver's answer, unchanged */
    CUresult rc = driver(key);
    if (rc == CUDA_SUCCESS) {
        budget_release(dev, bytes);
        record_free(family_of(kind), dev, key, bytes, 0);
    } else {
        budget_commit(dev, key, bytes, kind); /* still held */
    }
    return rc;
}

void record_governed_refusal(int dev, enum record_family family, uint64_t bytes,
                             uint64_t stream, enum record_reason why)
{
    if (RECORDER_ON()) {
        uint64_t in_use = 0;
        unsigned reason = budget_refusal(dev, &in_use);
        record_refusal(family, dev, bytes, in_use, why ? why : reason, stream);
    }
}

void governed_refusal(int dev, enum record_family family, uint64_t bytes, uint64_t stream,
                      const char *call, enum record_reason why)
{
    record_governed_refusal(dev, family, bytes, stream, why);
    budget_report_oom(dev, bytes, call);
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
    return ((dlsym_fn)vram_dlsym_route(handle, name))(handle, name);
}
#endif

