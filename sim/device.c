/* device: initialisation, the devices a process sees, and what it can ask
 * about them.
 *
 * cuInit reads the machine (config.c), then CUDA_VISIBLE_DEVICES exactly as
 * the real driver does: indices or UUIDs (or unique UUID prefixes), in the
 * order given, stopping at the first entry that names no device (or one
 * already named), so that an invalid entry hides the rest. CUDA ordinals
 * are positions in that list; everything shared with other processes (the
 * occupancy, UUIDs, PCI addresses) uses the physical index behind them.
 *
 * A child forked after its parent initialised CUDA cannot use it: as on the
 * real driver, cuInit and every call after it return
 * CUDA_ERROR_NOT_INITIALIZED there (a child forked before that may
 * initialise as a new process).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../src/cuda/uuid.h"
#include "../src/util/parse.h"
#include "config.h"
#include "limits.h"
#include "occupancy.h"
#include "sim.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    pthread_mutex_t mu;
    bool initialized, forked_after_init;
    uint64_t context_size, pool_chunk;
    bool lazy_loading;
    int ndev;
    int phys[SIM_MAX_DEVICES];
    uint64_t total[SIM_MAX_DEVICES];
} sim = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ----------------------------------------------------------------- log */

static int log_level_now(void)
{
    static int level = -1;
    if (level < 0) {
        const char *v = getenv("VRAM_LOG");
        static const char *names[] = {"off", "error", "warn", "info", "debug"};
        level = 0;
        for (int i = 0; v && i < 5; i++)
            if (strcmp(v, names[i]) == 0)
                level = i;
    }
    return level;
}

void sim_log(int level, const char *fmt, ...)
{
    if (level > log_level_now())
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "vram-sim: %s\n", line);
}

/* ---------------------------------------------------------------- fork */

static void after_fork_child(void)
{
    pthread_mutex_init(&sim.mu, NULL);
    sim.forked_after_init = sim.forked_after_init || sim.initialized;
    sim.initialized = false;
    /* The parent's records and locks stay the parent's. */
    occ_forget_after_fork();
}

static void before_fork(void) { pthread_mutex_lock(&sim.mu); }
static void after_fork_parent(void) { pthread_mutex_unlock(&sim.mu); }

__attribute__((constructor)) static void sim_load(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* ------------------------------------------------------ visible devices */

/* The physical index an entry of CUDA_VISIBLE_DEVICES names, or -1. */
static int visible_entry(const char *e, int nphys)
{
    if (!*e)
        return -1;
    if (isdigit((unsigned char)*e) || *e == '-' || *e == '+') {
        char *end;
        long v = strtol(e, &end, 10);
        while (isspace((unsigned char)*end))
            end++;
        return *end == 0 && v >= 0 && v < nphys ? (int)v : -1;
    }
    /* A UUID or a prefix of one, with or without "GPU-", naming one device. */
    const char *want = strncmp(e, "GPU-", 4) == 0 ? e + 4 : e;
    int found = -1;
    for (int i = 0; i < nphys; i++) {
        char text[48];
        sim_config_uuid_text(i, text);
        if (strncmp(text + 4, want, strlen(want)) == 0) {
            if (found >= 0)
                return -1; /* ambiguous */
            found = i;
        }
    }
    return found;
}

static int visible_devices(const uint64_t *phys_total, int nphys)
{
    const char *spec = getenv("CUDA_VISIBLE_DEVICES");
    if (!spec) {
        for (int i = 0; i < nphys; i++)
            sim.phys[i] = i, sim.total[i] = phys_total[i];
        return nphys;
    }
    int n = 0;
    const char *p = spec;
    while (n < nphys) {
        char e[128];
        size_t len = strcspn(p, ",");
        if (len >= sizeof e)
            break;
        memcpy(e, p, len);
        e[len] = 0;
        char *s = e;
        while (isspace((unsigned char)*s))
            s++;
        int phys = visible_entry(s, nphys);
        for (int i = 0; i < n && phys >= 0; i++)
            if (sim.phys[i] == phys)
                phys = -1;
        if (phys < 0)
            break; /* an invalid entry hides the rest */
        sim.phys[n] = phys;
        sim.total[n] = phys_total[phys];
        n++;
        if (!p[len])
            break;
        p += len + 1;
    }
    return n;
}

/* ---------------------------------------------------------------- init */

EXPORT CUresult cuInit(unsigned int flags)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim.forked_after_init)
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&sim.mu);
    CUresult rc = CUDA_SUCCESS;
    if (!sim.initialized) {
        uint64_t phys_total[SIM_MAX_DEVICES];
        int nphys = sim_config_devices(phys_total);
        if (nphys < 0 || sim_config_context_size(&sim.context_size) != 0 ||
            sim_config_pool_chunk(&sim.pool_chunk) != 0 ||
            sim_config_module_loading(&sim.lazy_loading) != 0 || sim_config_driver() < 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if (occ_open() != 0)
            rc = CUDA_ERROR_NOT_INITIALIZED;
        else if ((sim.ndev = visible_devices(phys_total, nphys)) == 0)
            rc = CUDA_ERROR_NO_DEVICE;
        else
            sim.initialized = true;
    }
    pthread_mutex_unlock(&sim.mu);
    return rc;
}

EXPORT CUresult cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = SIM_CUDA_VERSION;
    return CUDA_SUCCESS;
}

bool sim_ready(void) { return sim.initialized; }
CUresult sim_check_init(void) { return sim.initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }
int sim_device_count(void) { return sim.ndev; }
uint64_t sim_device_total(int dev) { return sim.total[dev]; }

CUresult sim_check_device(CUdevice dev)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= sim.ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

/* Every charge, whatever asked for the memory (an allocation, a context, a
 * module's code, a pool, VMM), is also held to the hard limits NVML set on
 * the process's cgroup and those above it (an R615 driver's, limits.h):
 * past one it fails as on a full device, with or without the interposer. */
CUresult sim_charge(int dev, uint64_t bytes)
{
    if (!bytes)
        return CUDA_SUCCESS;
    struct limits_self limited;
    limits_of_self(sim.phys[dev], &limited);
    int rc = occ_charge(sim.phys[dev], bytes, sim.total[dev], limited.group, limited.n);
    return rc == 0 ? CUDA_SUCCESS : rc == -1 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
}

/* Inside a cgroup with a hard limit, the device is the limit: its total,
 * and what the cgroup has left of it as far as the device has that. */
void sim_memory_info(int dev, uint64_t *free_bytes, uint64_t *total)
{
    uint64_t used = occ_used(sim.phys[dev]), all = sim.total[dev], limit, held;
    *total = all;
    *free_bytes = used >= all ? 0 : all - used;
    if (limits_view(sim.phys[dev], &limit, &held)) {
        uint64_t left = held >= limit ? 0 : limit - held;
        *total = limit < all ? limit : all;
        *free_bytes = left < *free_bytes ? left : *free_bytes;
    }
}

void sim_uncharge(int dev, uint64_t bytes)
{
    if (bytes)
        occ_uncharge(sim.phys[dev], bytes);
}

uint64_t sim_context_size(void) { return sim.context_size; }
uint64_t sim_pool_chunk(void) { return sim.pool_chunk; }
bool sim_lazy_loading(void) { return sim.lazy_loading; }

/* ------------------------------------------------------------- devices */

EXPORT CUresult cuDeviceGetCount(int *count)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = sim.ndev;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sim_check_device(ordinal);
    if (rc == CUDA_SUCCESS)
        *device = ordinal;
    return rc;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", SIM_DEVICE_NAME);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    sim_config_uuid(sim.phys[dev], (unsigned char *)uuid->bytes);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = sim.total[dev];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    size_t b;
    CUresult rc = cuDeviceTotalMem_v2(&b, dev);
    if (rc == CUDA_SUCCESS)
        *bytes = b > UINT32_MAX ? UINT32_MAX : (unsigned int)b;
    return rc;
}

/* Every attribute of CUDA 13's enum, by its name (generated from cuda.h). */
enum {
#define SIM_ATTRIBUTE(name, value) SIM_##name = value,
#define SIM_RESULT(name, value)
#include "driver_enums.inc"
#undef SIM_ATTRIBUTE
#undef SIM_RESULT
};

/* The profile's attributes, as an H100 80GB SXM5 reports them (CUDA's
 * deviceQuery and the published specifications); every other attribute of
 * CUDA 13's enum is a capability this device lacks, or a value of 0. */
static const struct {
    CUdevice_attribute attr;
    int value;
} profile[] = {
#define A(name, v) {SIM_CU_DEVICE_ATTRIBUTE_##name, v}
    A(MAX_THREADS_PER_BLOCK, 1024), A(MAX_BLOCK_DIM_X, 1024), A(MAX_BLOCK_DIM_Y, 1024),
    A(MAX_BLOCK_DIM_Z, 64), A(MAX_GRID_DIM_X, 2147483647), A(MAX_GRID_DIM_Y, 65535),
    A(MAX_GRID_DIM_Z, 65535), A(MAX_SHARED_MEMORY_PER_BLOCK, 49152),
    A(TOTAL_CONSTANT_MEMORY, 65536), A(WARP_SIZE, 32), A(MAX_PITCH, 2147483647),
    A(MAX_REGISTERS_PER_BLOCK, 65536), A(CLOCK_RATE, 1980000), A(TEXTURE_ALIGNMENT, 512),
    A(GPU_OVERLAP, 1), A(MULTIPROCESSOR_COUNT, SIM_SM_COUNT), A(KERNEL_EXEC_TIMEOUT, 0),
    A(INTEGRATED, 0), A(CAN_MAP_HOST_MEMORY, 1), A(COMPUTE_MODE, 0),
    A(MAXIMUM_TEXTURE1D_WIDTH, 131072), A(MAXIMUM_TEXTURE2D_WIDTH, 131072),
    A(MAXIMUM_TEXTURE2D_HEIGHT, 65536), A(MAXIMUM_TEXTURE3D_WIDTH, 16384),
    A(MAXIMUM_TEXTURE3D_HEIGHT, 16384), A(MAXIMUM_TEXTURE3D_DEPTH, 16384),
    A(MAXIMUM_TEXTURE2D_LAYERED_WIDTH, 32768), A(MAXIMUM_TEXTURE2D_LAYERED_HEIGHT, 32768),
    A(MAXIMUM_TEXTURE2D_LAYERED_LAYERS, 2048), A(SURFACE_ALIGNMENT, 512),
    A(CONCURRENT_KERNELS, 1), A(ECC_ENABLED, 1), A(TCC_DRIVER, 0),
    A(MEMORY_CLOCK_RATE, 2619000), A(GLOBAL_MEMORY_BUS_WIDTH, 5120),
    A(L2_CACHE_SIZE, 52428800), A(MAX_THREADS_PER_MULTIPROCESSOR, 2048),
    A(ASYNC_ENGINE_COUNT, 3), A(UNIFIED_ADDRESSING, 1), A(MAXIMUM_TEXTURE1D_LAYERED_WIDTH, 32768),
    A(MAXIMUM_TEXTURE1D_LAYERED_LAYERS, 2048), A(MAXIMUM_TEXTURE2D_GATHER_WIDTH, 32768),
    A(MAXIMUM_TEXTURE2D_GATHER_HEIGHT, 32768), A(MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE, 8192),
    A(MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE, 8192), A(MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE, 32768),
    A(PCI_DOMAIN_ID, 0), A(TEXTURE_PITCH_ALIGNMENT, 32), A(MAXIMUM_TEXTURECUBEMAP_WIDTH, 32768),
    A(MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH, 32768), A(MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS, 2046),
    A(MAXIMUM_SURFACE1D_WIDTH, 32768), A(MAXIMUM_SURFACE2D_WIDTH, 131072),
    A(MAXIMUM_SURFACE2D_HEIGHT, 65536), A(MAXIMUM_SURFACE3D_WIDTH, 16384),
    A(MAXIMUM_SURFACE3D_HEIGHT, 16384), A(MAXIMUM_SURFACE3D_DEPTH, 16384),
    A(MAXIMUM_SURFACE1D_LAYERED_WIDTH, 32768), A(MAXIMUM_SURFACE1D_LAYERED_LAYERS, 2048),
    A(MAXIMUM_SURFACE2D_LAYERED_WIDTH, 32768), A(MAXIMUM_SURFACE2D_LAYERED_HEIGHT, 32768),
    A(MAXIMUM_SURFACE2D_LAYERED_LAYERS, 2048), A(MAXIMUM_SURFACECUBEMAP_WIDTH, 32768),
    A(MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH, 32768), A(MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS, 2046),
    A(MAXIMUM_TEXTURE2D_LINEAR_WIDTH, 131072), A(MAXIMUM_TEXTURE2D_LINEAR_HEIGHT, 65000),
    A(MAXIMUM_TEXTURE2D_LINEAR_PITCH, 2097120), A(MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH, 32768),
    A(MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT, 32768), A(COMPUTE_CAPABILITY_MAJOR, 9),
    A(COMPUTE_CAPABILITY_MINOR, 0), A(MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH, 32768),
    A(STREAM_PRIORITIES_SUPPORTED, 1), A(GLOBAL_L1_CACHE_SUPPORTED, 1),
    A(LOCAL_L1_CACHE_SUPPORTED, 1), A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472),
    A(MAX_REGISTERS_PER_MULTIPROCESSOR, 65536), A(MANAGED_MEMORY, 1), A(MULTI_GPU_BOARD, 0),
    A(MULTI_GPU_BOARD_GROUP_ID, 0), A(HOST_NATIVE_ATOMIC_SUPPORTED, 0),
    A(SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO, 2), A(PAGEABLE_MEMORY_ACCESS, 0),
    A(CONCURRENT_MANAGED_ACCESS, 1), A(COMPUTE_PREEMPTION_SUPPORTED, 1),
    A(CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1), A(COOPERATIVE_LAUNCH, 1),
    A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448), A(CAN_FLUSH_REMOTE_WRITES, 0),
    A(HOST_REGISTER_SUPPORTED, 1), A(PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0),
    A(DIRECT_MANAGED_MEM_ACCESS_FROM_HOST, 0), A(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1),
    A(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1), A(MAX_BLOCKS_PER_MULTIPROCESSOR, 32),
    A(GENERIC_COMPRESSION_SUPPORTED, 1), A(MAX_PERSISTING_L2_CACHE_SIZE, 32505856),
    A(MAX_ACCESS_POLICY_WINDOW_SIZE, 134213632), A(RESERVED_SHARED_MEMORY_PER_BLOCK, 1024),
    A(SPARSE_CUDA_ARRAY_SUPPORTED, 1), A(READ_ONLY_HOST_REGISTER_SUPPORTED, 1),
    A(MEMORY_POOLS_SUPPORTED, 1), A(GPU_DIRECT_RDMA_SUPPORTED, 1),
    A(GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, 1), A(GPU_DIRECT_RDMA_WRITES_ORDERING, 100),
    A(MEMPOOL_SUPPORTED_HANDLE_TYPES, 1), A(CLUSTER_LAUNCH, 1),
    A(DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED, 1), A(DMA_BUF_SUPPORTED, 1),
    A(IPC_EVENT_SUPPORTED, 1), A(MEM_SYNC_DOMAIN_COUNT, 4), A(UNIFIED_FUNCTION_POINTERS, 1),
    A(TIMELINE_SEMAPHORE_INTEROP_SUPPORTED, 1), A(NUMA_ID, -1), A(HOST_NUMA_ID, 0),
    A(MULTICAST_SUPPORTED, 1), A(MPS_ENABLED, 0), A(GPU_PCI_DEVICE_ID, 0x233010de),
    A(GPU_PCI_SUBSYSTEM_ID, 0x16c110de),
#undef A
};

static const int known_attributes[] = {
#define SIM_ATTRIBUTE(name, value) value,
#define SIM_RESULT(name, value)
#include "driver_enums.inc"
#undef SIM_ATTRIBUTE
#undef SIM_RESULT
};

EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    bool known = false;
    for (size_t i = 0; i < sizeof known_attributes / sizeof *known_attributes; i++)
        known |= known_attributes[i] == attrib;
    if (!known)
        return CUDA_ERROR_INVALID_VALUE;
    *pi = 0;
    for (size_t i = 0; i < sizeof profile / sizeof *profile; i++)
        if (profile[i].attr == attrib)
            *pi = profile[i].value;
    if (attrib == SIM_CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)
        *pi = sim_config_pci_bus(sim.phys[dev]);
    return CUDA_SUCCESS;
}

static int attribute(CUdevice_attribute a, CUdevice dev)
{
    int v = 0;
    cuDeviceGetAttribute(&v, a, dev);
    return v;
}

EXPORT CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    *major = attribute(SIM_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    *minor = attribute(SIM_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetProperties(CUdevprop *p, CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    *p = (CUdevprop){
        .maxThreadsPerBlock = attribute(SIM_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev),
        .maxThreadsDim = {attribute(SIM_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, dev),
                          attribute(SIM_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, dev),
                          attribute(SIM_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, dev)},
        .maxGridSize = {attribute(SIM_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, dev),
                        attribute(SIM_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, dev),
                        attribute(SIM_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, dev)},
        .sharedMemPerBlock = attribute(SIM_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, dev),
        .totalConstantMemory = attribute(SIM_CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, dev),
        .SIMDWidth = attribute(SIM_CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev),
        .memPitch = attribute(SIM_CU_DEVICE_ATTRIBUTE_MAX_PITCH, dev),
        .regsPerBlock = attribute(SIM_CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, dev),
        .clockRate = attribute(SIM_CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev),
        .textureAlign = attribute(SIM_CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, dev),
    };
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(pciBusId, (size_t)len, "0000:%02X:00.0", sim_config_pci_bus(sim.phys[dev]));
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!dev || !pciBusId)
        return CUDA_ERROR_INVALID_VALUE;
    /* domain:bus:device.function, bus:device.function or domain:bus:device. */
    unsigned domain = 0, bus, device = 0, function = 0;
    if (sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4 &&
        sscanf(pciBusId, "%x:%x.%x", &bus, &device, &function) != 3 &&
        sscanf(pciBusId, "%x:%x:%x", &domain, &bus, &device) != 3)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < sim.ndev; i++)
        if (domain == 0 && bus == (unsigned)sim_config_pci_bus(sim.phys[i]) && device == 0 &&
            function == 0) {
            *dev = i;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult cuDeviceGetLuid(char *luid, unsigned int *mask, CUdevice dev)
{
    (void)luid, (void)mask;
    CUresult rc = sim_check_device(dev);
    return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_NOT_SUPPORTED; /* Windows only */
}

EXPORT CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    CUresult rc = sim_check_device(dev);
    if (rc == CUDA_SUCCESS)
        rc = sim_check_device(peerDev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    *canAccessPeer = 0; /* separate address spaces: no peer mappings */
    return CUDA_SUCCESS;
}

SAME_TYPE(cuInit);
SAME_TYPE(cuDriverGetVersion);
SAME_TYPE(cuDeviceGetCount);
SAME_TYPE(cuDeviceGet);
SAME_TYPE(cuDeviceGetName);
SAME_TYPE(cuDeviceGetUuid);
SAME_TYPE(cuDeviceGetUuid_v2);
SAME_TYPE(cuDeviceTotalMem);
SAME_TYPE(cuDeviceTotalMem_v2);
SAME_TYPE(cuDeviceGetAttribute);
SAME_TYPE(cuDeviceComputeCapability);
SAME_TYPE(cuDeviceGetProperties);
SAME_TYPE(cuDeviceGetPCIBusId);
SAME_TYPE(cuDeviceGetByPCIBusId);
SAME_TYPE(cuDeviceGetLuid);
SAME_TYPE(cuDeviceCanAccessPeer);
