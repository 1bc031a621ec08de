/* The simulated driver as a real program meets it:
 *   - every entry point of CUDA 13's cuda.h is exported, and cuGetProcAddress
 *     hands out, for every base name, version and stream flavour, the symbol
 *     the real driver does; what is not modelled is CUDA_ERROR_NOT_SUPPORTED;
 *   - the device is an H100 80GB: its name (the same in NVML), its
 *     attributes (every one of the enum answered), its PCI address;
 *   - contexts and modules take device memory, seen by cuMemGetInfo and as
 *     the process's usage in NVML; kernels load but do not run;
 *   - host memory, copies (2D, async), memsets, events, pointer attributes,
 *     address ranges, IPC handles behave as documented;
 *   - CUDA_VISIBLE_DEVICES is honoured as by the real driver (indices, UUIDs,
 *     prefixes, order, an invalid entry hiding the rest) and ignored by NVML,
 *     so `vram run --devices 1` shows one device to CUDA.
 * Cases that need a fresh process run this program again. */
#include "../src/cuda/cuda_abi.h"
#include "../src/cuda/nvml_abi.h"
#include "../src/cuda/granularity.h"
#include "check.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

static void *cuda, *nvml;

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "missing symbol %s\n", name);
        exit(1);
    }
    return p;
}
#define CU(name) ((PFN_##name)sym(cuda, #name))
#define NV(name) ((PFN_##name)sym(nvml, #name))

#define OK(call) CHECK((call) == CUDA_SUCCESS)

static char *self, *vram;

/* ------------------------------------------------------------- exports */

static void every_entry_point(void)
{
    int symbols = 0, rows = 0;
#define SIM_SYMBOL(name) (sym(cuda, #name), symbols++);
#define SIM_FORWARD(name, to, params, args) SIM_SYMBOL(name)
#define SIM_PROC(base, version, variant, symbol)
#include "../sim/entry_points.inc"
#undef SIM_SYMBOL
#undef SIM_FORWARD
#undef SIM_PROC
    CHECK(symbols > 600);
    PFN_cuGetProcAddress_v2 get = CU(cuGetProcAddress_v2);
    void *fn;
    CUdriverProcAddressQueryResult status;
    /* Each row is what the real driver answers from that version on, in
     * that flavour. */
#define SIM_PTDS CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
#define SIM_SYMBOL(name)
#define SIM_FORWARD(name, to, params, args)
#define SIM_PROC(base, version, variant, symbol)                                               \
    do {                                                                                       \
        OK(get(base, &fn, version, variant, &status));                                         \
        CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS && fn == dlsym(cuda, #symbol));            \
        rows++;                                                                                \
    } while (0);
#include "../sim/entry_points.inc"
#undef SIM_SYMBOL
#undef SIM_FORWARD
#undef SIM_PROC
    CHECK(rows > 600);
    /* Named examples: the base name, the version asked, the symbol given. */
    OK(get("cuMemAlloc", &fn, 13000, 0, NULL));
    CHECK(fn == dlsym(cuda, "cuMemAlloc_v2"));
    OK(get("cuMemAlloc", &fn, 3010, 0, NULL));
    CHECK(fn == dlsym(cuda, "cuMemAlloc"));
    OK(get("cuCtxGetDevice", &fn, 12080, 0, NULL));
    CHECK(fn == dlsym(cuda, "cuCtxGetDevice"));
    OK(get("cuCtxGetDevice", &fn, 13000, 0, NULL));
    CHECK(fn == dlsym(cuda, "cuCtxGetDevice_v2"));
    OK(get("cuMemcpyHtoDAsync", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
    CHECK(fn == dlsym(cuda, "cuMemcpyHtoDAsync_v2_ptsz"));
    OK(get("cuGraphInstantiate", &fn, 12000, 0, NULL));
    CHECK(fn == dlsym(cuda, "cuGraphInstantiateWithFlags"));
    CHECK(get("cuMemAllocAsync", &fn, 11000, 0, &status) == CUDA_ERROR_NOT_FOUND);
    CHECK(status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT && !fn);
    CHECK(get("cuNoSuchThing", &fn, 13000, 0, &status) == CUDA_ERROR_NOT_FOUND);
    CHECK(status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    /* Not modelled: exported, and says so. */
    CHECK(((CUresult(*)(void))sym(cuda, "cuTexObjectCreate"))() == CUDA_ERROR_NOT_SUPPORTED);
    CHECK(((CUresult(*)(void))sym(cuda, "cuGraphicsGLRegisterImage"))() == CUDA_ERROR_NOT_SUPPORTED);
    const char *name;
    OK(CU(cuGetErrorName)(CUDA_ERROR_NOT_SUPPORTED, &name));
    CHECK(strcmp(name, "CUDA_ERROR_NOT_SUPPORTED") == 0);
    OK(CU(cuGetErrorName)(CUDA_ERROR_STUB_LIBRARY, &name));
    CHECK(strcmp(name, "CUDA_ERROR_STUB_LIBRARY") == 0);
}

/* -------------------------------------------------------------- device */

static void the_device(void)
{
    char name[128];
    int v, major, minor, n = 0;
    size_t total;
    OK(CU(cuDeviceGetName)(name, sizeof name, 0));
    CHECK(strcmp(name, "NVIDIA H100 80GB HBM3") == 0);
    OK(CU(cuDeviceTotalMem_v2)(&total, 0));
    CHECK(total == 81079ull * MiB); /* NVML's 81,559 MiB less the 480 it reserves */
    OK(CU(cuDeviceComputeCapability)(&major, &minor, 0));
    CHECK(major == 9 && minor == 0);
    OK(CU(cuDeviceGetAttribute)(&v, 16 /* MULTIPROCESSOR_COUNT */, 0));
    CHECK(v == 132);
    OK(CU(cuDeviceGetAttribute)(&v, 14 /* TEXTURE_ALIGNMENT */, 0));
    CHECK(v == 512);
#define SIM_RESULT(name, value)
#define SIM_ATTRIBUTE(name, value)                                                             \
    {                                                                                          \
        OK(CU(cuDeviceGetAttribute)(&v, value, 0));                                            \
        n++;                                                                                   \
    }
#include "../sim/driver_enums.inc"
#undef SIM_RESULT
#undef SIM_ATTRIBUTE
    CHECK(n > 140);
    CHECK(CU(cuDeviceGetAttribute)(&v, 100000, 0) == CUDA_ERROR_INVALID_VALUE);
    CUdevprop p;
    OK(CU(cuDeviceGetProperties)(&p, 0));
    CHECK(p.maxThreadsPerBlock == 1024 && p.SIMDWidth == 32 && p.textureAlign == 512);
    char bus[32];
    CUdevice d;
    OK(CU(cuDeviceGetPCIBusId)(bus, sizeof bus, 0));
    OK(CU(cuDeviceGetByPCIBusId)(&d, bus));
    CHECK(d == 0);
    /* NVML: the same device. */
    nvmlDevice_t h;
    nvmlPciInfo_t pci;
    unsigned count, index;
    char nname[96], ver[80];
    int cuda_version;
    CHECK(NV(nvmlInit)() == NVML_SUCCESS);
    CHECK(NV(nvmlDeviceGetCount)(&count) == NVML_SUCCESS && count == 1);
    CHECK(NV(nvmlDeviceGetHandleByIndex)(0, &h) == NVML_SUCCESS);
    CHECK(NV(nvmlDeviceGetName)(h, nname, sizeof nname) == NVML_SUCCESS);
    CHECK(strcmp(nname, name) == 0);
    CHECK(NV(nvmlDeviceGetPciInfo_v3)(h, &pci) == NVML_SUCCESS);
    CHECK(strcmp(pci.busIdLegacy, bus) == 0 && pci.pciDeviceId == 0x233010de);
    CHECK(NV(nvmlDeviceGetIndex)(h, &index) == NVML_SUCCESS && index == 0);
    CHECK(NV(nvmlSystemGetDriverVersion)(ver, sizeof ver) == NVML_SUCCESS && strchr(ver, '.'));
    CHECK(NV(nvmlSystemGetNVMLVersion)(ver, sizeof ver) == NVML_SUCCESS);
    CHECK(NV(nvmlSystemGetCudaDriverVersion_v2)(&cuda_version) == NVML_SUCCESS);
    int driver_version;
    OK(CU(cuDriverGetVersion)(&driver_version));
    CHECK(cuda_version == driver_version && driver_version == 13000);
    nvmlUtilization_t u;
    nvmlBAR1Memory_t bar1;
    unsigned temp;
    CHECK(NV(nvmlDeviceGetUtilizationRates)(h, &u) == NVML_SUCCESS && u.gpu == 0);
    CHECK(NV(nvmlDeviceGetBAR1MemoryInfo)(h, &bar1) == NVML_SUCCESS && bar1.bar1Total > 0);
    CHECK(NV(nvmlDeviceGetTemperature)(h, NVML_TEMPERATURE_GPU, &temp) == NVML_SUCCESS);
    CHECK(NV(nvmlDeviceGetFanSpeed)(h, &temp) == NVML_ERROR_NOT_SUPPORTED);
}

/* ------------------------------------------------- what costs memory */

static size_t used_now(void)
{
    size_t f, t;
    OK(CU(cuMemGetInfo_v2)(&f, &t));
    return t - f;
}

static unsigned long long nvml_usage_of_me(void)
{
    nvmlDevice_t h;
    nvmlProcessInfo_t p[16];
    unsigned n = 16;
    CHECK(NV(nvmlDeviceGetHandleByIndex_v2)(0, &h) == NVML_SUCCESS);
    CHECK(NV(nvmlDeviceGetComputeRunningProcesses_v3)(h, &n, p) == NVML_SUCCESS);
    for (unsigned i = 0; i < n; i++)
        if (p[i].pid == (unsigned)getpid())
            return p[i].usedGpuMemory;
    return 0;
}

static const char ptx[] = "//\n.version 8.0\n.target sm_90\n.address_size 64\n\n"
                          ".visible .entry scale(\n\t.param .u64 p\n)\n{\n\tret;\n}\n";

static void contexts_and_modules(void)
{
    const size_t ctx = 518 * MiB; /* the profile's context (sim/config.h) */
    CUcontext primary, created;
    OK(CU(cuDevicePrimaryCtxRetain)(&primary, 0));
    OK(CU(cuCtxSetCurrent)(primary));
    CHECK(used_now() == ctx);
    CHECK(nvml_usage_of_me() == ctx);
    OK(CU(cuCtxCreate_v2)(&created, 0, 0));
    CHECK(used_now() == 2 * ctx);
    OK(CU(cuCtxDestroy_v2)(created));
    OK(CU(cuCtxSetCurrent)(primary));
    CHECK(used_now() == ctx);
    unsigned flags;
    int active;
    OK(CU(cuDevicePrimaryCtxGetState)(0, &flags, &active));
    CHECK(active == 1);

    /* A module costs its image; its function is found; a launch is
     * accepted and runs nothing, and the first one brings the module's
     * code to the device (CUDA_MODULE_LOADING=LAZY, the driver's default). */
    CUmodule m;
    CUfunction f;
    OK(CU(cuModuleLoadData)(&m, ptx));
    CHECK(used_now() == ctx + device_charge(sizeof ptx));
    OK(CU(cuModuleGetFunction)(&f, m, "scale"));
    CHECK(CU(cuModuleGetFunction)(&f, m, "absent") == CUDA_ERROR_NOT_FOUND);
    OK(CU(cuLaunchKernel)(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(used_now() == ctx + device_charge(sizeof ptx) + 2 * MiB);
    OK(CU(cuLaunchKernel)(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(used_now() == ctx + device_charge(sizeof ptx) + 2 * MiB); /* once per module */
    /* The legacy launch, as PyCUDA's prepared calls make it. */
    OK(CU(cuFuncSetBlockShape)(f, 32, 1, 1));
    OK(CU(cuFuncSetSharedSize)(f, 0));
    OK(CU(cuParamSetSize)(f, 8));
    OK(CU(cuParamSeti)(f, 0, 7));
    OK(CU(cuParamSetf)(f, 4, 1.5f));
    OK(CU(cuLaunchGrid)(f, 1, 1));
    OK(CU(cuLaunch)(f));
    OK(CU(cuLaunchGridAsync)(f, 1, 1, NULL));
    CHECK(CU(cuFuncSetBlockShape)(f, 0, 1, 1) == CUDA_ERROR_INVALID_VALUE);
    CHECK(CU(cuLaunch)(NULL) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(CU(cuModuleLoadData)(&m, "\x01\x02garbage") == CUDA_ERROR_INVALID_IMAGE);
    OK(CU(cuModuleUnload)(m));
    CHECK(used_now() == ctx);
    CUlinkState link;
    void *cubin;
    size_t size;
    OK(CU(cuLinkCreate_v2)(0, NULL, NULL, &link));
    OK(CU(cuLinkAddData_v2)(link, 1, (void *)ptx, sizeof ptx, "a.ptx", 0, NULL, NULL));
    OK(CU(cuLinkComplete)(link, &cubin, &size));
    OK(CU(cuModuleLoadData)(&m, cubin));
    CHECK(used_now() == ctx + device_charge(size));
    OK(CU(cuModuleGetFunction)(&f, m, "scale"));
    OK(CU(cuModuleUnload)(m));
    OK(CU(cuLinkDestroy)(link));
}

static void memory_paths(void)
{
    /* Host memory: page-locked, mapped, registered; costs no device memory. */
    size_t before = used_now();
    void *host, *reg = malloc(1 << 20);
    CUdeviceptr mapped;
    OK(CU(cuMemHostAlloc)(&host, 1 << 20, CU_MEMHOSTALLOC_DEVICEMAP));
    OK(CU(cuMemHostGetDevicePointer_v2)(&mapped, host, 0));
    CHECK(used_now() == before);
    OK(CU(cuMemHostRegister_v2)(reg, 1 << 20, 0));
    CHECK(CU(cuMemHostRegister_v2)(reg, 4096, 0) == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);

    /* A pitched allocation, filled by a 2D copy from host and read back
     * through a stream after a memset of one row. */
    CUdeviceptr d;
    size_t pitch;
    OK(CU(cuMemAllocPitch_v2)(&d, &pitch, 100, 8, 4));
    CHECK(pitch == 512);
    unsigned char *src = host, out[800];
    for (int i = 0; i < 800; i++)
        src[i] = (unsigned char)i;
    CUDA_MEMCPY2D up = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src, .srcPitch = 100,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d, .dstPitch = pitch,
                        .WidthInBytes = 100, .Height = 8};
    OK(CU(cuMemcpy2D_v2)(&up));
    CUstream s;
    CUevent a, b;
    float ms;
    OK(CU(cuStreamCreate)(&s, 0));
    OK(CU(cuEventCreate)(&a, 0));
    OK(CU(cuEventCreate)(&b, 0));
    OK(CU(cuEventRecord)(a, s));
    OK(CU(cuMemsetD32Async)(d + pitch, 0x01010101, 25, s));
    CUDA_MEMCPY2D down = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d, .srcPitch = pitch,
                          .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = out, .dstPitch = 100,
                          .WidthInBytes = 100, .Height = 8};
    OK(CU(cuMemcpy2DAsync_v2)(&down, s));
    OK(CU(cuEventRecord)(b, s));
    OK(CU(cuStreamWaitEvent)(NULL, b, 0));
    OK(CU(cuStreamSynchronize)(s));
    OK(CU(cuEventElapsedTime_v2)(&ms, a, b));
    CHECK(ms >= 0);
    for (int i = 0; i < 800; i++)
        CHECK(out[i] == (i / 100 == 1 ? 1 : (unsigned char)i));
    CHECK(CU(cuMemcpyHtoD_v2)(d + pitch * 8, src, 1) == CUDA_ERROR_INVALID_VALUE); /* past the end */

    /* What the driver says of pointers. */
    unsigned type;
    CUdeviceptr base;
    size_t len;
    OK(CU(cuPointerGetAttribute)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 10));
    CHECK(type == CU_MEMORYTYPE_DEVICE);
    OK(CU(cuPointerGetAttribute)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, mapped));
    CHECK(type == CU_MEMORYTYPE_HOST);
    OK(CU(cuMemGetAddressRange_v2)(&base, &len, d + 10));
    CHECK(base == d && len == pitch * 8);
    CHECK(CU(cuPointerGetAttribute)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    (CUdeviceptr)(uintptr_t)out) == CUDA_ERROR_INVALID_VALUE);

    /* IPC: a handle is made; the process that made it cannot open it. */
    CUipcMemHandle ipc;
    CUdeviceptr opened;
    OK(CU(cuIpcGetMemHandle)(&ipc, d));
    CHECK(CU(cuIpcOpenMemHandle_v2)(&opened, ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ==
          CUDA_ERROR_INVALID_CONTEXT);

    OK(CU(cuMemFree_v2)(d));
    OK(CU(cuMemHostUnregister)(reg));
    OK(CU(cuMemFreeHost)(host));
    OK(CU(cuEventDestroy_v2)(a));
    OK(CU(cuEventDestroy_v2)(b));
    OK(CU(cuStreamDestroy_v2)(s));
    CHECK(used_now() == before);
    free(reg);
}

/* ------------------------------------------------ visible devices */

/* In a fresh process: how CUDA and NVML see the machine ("count uuid0..."). */
static int show_devices(void)
{
    int n = -1;
    CUresult rc = CU(cuInit)(0);
    if (rc == CUDA_SUCCESS)
        OK(CU(cuDeviceGetCount)(&n));
    printf("cuda %d", rc == CUDA_SUCCESS ? n : -(int)rc);
    for (int i = 0; i < n; i++) {
        CUuuid u;
        OK(CU(cuDeviceGetUuid_v2)(&u, i));
        printf(" %02x", (unsigned char)u.bytes[15]); /* the simulator's physical index */
    }
    unsigned count;
    CHECK(NV(nvmlInit_v2)() == NVML_SUCCESS);
    CHECK(NV(nvmlDeviceGetCount_v2)(&count) == NVML_SUCCESS);
    printf(" nvml %u\n", count);
    return 0;
}

/* What a fresh process sees with `prefix` before it (env or a command). */
static void sees(const char *visible, const char *want)
{
    char cmd[512], got[256] = "";
    snprintf(cmd, sizeof cmd, "%s '%s' show", visible, self); /* a path may have a space */
    FILE *p = popen(cmd, "r");
    CHECK(p && fgets(got, sizeof got, p));
    pclose(p);
    got[strcspn(got, "\n")] = 0;
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "with %s: saw \"%s\", expected \"%s\"\n", visible, got, want);
        exit(1);
    }
}

static void visible_devices(void)
{
    char cmd[512];
    setenv("VRAM_SIM_DEVICES", "12GiB,80GiB,4GiB", 1);
    sees("env -u CUDA_VISIBLE_DEVICES", "cuda 3 00 01 02 nvml 3");
    sees("CUDA_VISIBLE_DEVICES=1", "cuda 1 01 nvml 3");
    sees("CUDA_VISIBLE_DEVICES=2,0", "cuda 2 02 00 nvml 3");
    sees("CUDA_VISIBLE_DEVICES=0,7,1", "cuda 1 00 nvml 3");  /* an invalid entry hides the rest */
    sees("CUDA_VISIBLE_DEVICES=1,1", "cuda 1 01 nvml 3");    /* so does a repeated one */
    sees("CUDA_VISIBLE_DEVICES=GPU-5a1d0e5a-a200-4000-8000-000000000002", "cuda 1 02 nvml 3");
    sees("CUDA_VISIBLE_DEVICES=GPU-5a1d0e5a-a1,0", "cuda 2 01 00 nvml 3"); /* a unique prefix */
    sees("CUDA_VISIBLE_DEVICES=GPU-5a1d0e5a", "cuda -100 nvml 3"); /* ambiguous: no device */
    sees("CUDA_VISIBLE_DEVICES=", "cuda -100 nvml 3");
    sees("CUDA_VISIBLE_DEVICES=-1", "cuda -100 nvml 3");
    setenv("VRAM_SIM_DEVICES", "12GiB,12GiB", 1);
    snprintf(cmd, sizeof cmd, "'%s' run --devices 1 --limit 1GiB --", vram);
    sees(cmd, "cuda 1 01 nvml 2");
    unsetenv("VRAM_SIM_DEVICES");
}

/* A bad VRAM_SIM_CONTEXT_SIZE is refused, naming the variable. */
static void bad_context_size(void)
{
    char cmd[512], line[512] = "";
    snprintf(cmd, sizeof cmd, "VRAM_SIM_CONTEXT_SIZE=lots '%s' show 2>&1", self);
    FILE *p = popen(cmd, "r");
    CHECK(p && fgets(line, sizeof line, p));
    pclose(p);
    CHECK_CONTAINS(line, "VRAM_SIM_CONTEXT_SIZE=\"lots\"");
}

/* CUDA_MODULE_LOADING=EAGER: a module's code reaches the device at its
 * load, not at its first launch (run in a process of its own: cuInit reads
 * it). A value the driver does not know is refused, naming it. */
static int eager_loading(void)
{
    CUcontext c;
    CUmodule m;
    CUfunction f;
    OK(CU(cuInit)(0));
    OK(CU(cuDevicePrimaryCtxRetain)(&c, 0));
    OK(CU(cuCtxPushCurrent_v2)(c));
    size_t before = used_now();
    OK(CU(cuModuleLoadData)(&m, ptx));
    CHECK(used_now() == before + device_charge(sizeof ptx) + 2 * MiB);
    OK(CU(cuModuleGetFunction)(&f, m, "scale"));
    OK(CU(cuLaunchKernel)(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(used_now() == before + device_charge(sizeof ptx) + 2 * MiB); /* nothing more */
    OK(CU(cuModuleUnload)(m));
    CHECK(used_now() == before);
    return 0;
}

static void module_loading(void)
{
    char cmd[512], line[512] = "";
    snprintf(cmd, sizeof cmd, "CUDA_MODULE_LOADING=EAGER '%s' eager", self);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "CUDA_MODULE_LOADING=sometimes '%s' show 2>&1", self);
    FILE *p = popen(cmd, "r");
    CHECK(p && fgets(line, sizeof line, p));
    pclose(p);
    CHECK_CONTAINS(line, "CUDA_MODULE_LOADING=\"sometimes\"");
}

static char *state_dir;
static void remove_state_dir(void) { rmdir(state_dir); }

int main(int argc, char **argv)
{
    self = argv[0];
    cuda = dlopen("libcuda.so.1", RTLD_NOW);
    nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    CHECK(cuda && nvml);
    if (argc == 2 && strcmp(argv[1], "show") == 0)
        return show_devices();
    if (argc == 2 && strcmp(argv[1], "eager") == 0)
        return eager_loading();
    CHECK(argc == 2);
    vram = argv[1];
    private_gpu("");
    state_dir = getenv("VRAM_SIM_DIR");
    atexit(remove_state_dir); /* after the driver's own record is gone */
    unsetenv("VRAM_SIM_DEVICES"); /* the profile's own size */
    unsetenv("VRAM_SIM_CONTEXT_SIZE");
    unsetenv("CUDA_VISIBLE_DEVICES");
    OK(CU(cuInit)(0));
    every_entry_point();
    the_device();
    contexts_and_modules();
    memory_paths();
    visible_devices();
    bad_context_size();
    module_loading();
    printf("test_driver_api: ok\n");
    return 0;
}
