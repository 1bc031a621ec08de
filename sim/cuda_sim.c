/* The simulated CUDA driver: a libcuda.so.1 with the real names, signatures
 * and error codes, for machines without a GPU.
 *
 * Devices come from VRAM_SIM_DEVICES ("12GiB,12GiB"; one 12 GiB device when
 * unset). Device memory is host address space reserved with
 * MAP_NORESERVE: pages exist only once touched, so an 80 GiB device works on
 * a small machine and tests can still copy data in and out. Occupancy is
 * shared by every process on the machine (occupancy.c), so cuMemGetInfo sees
 * what other processes hold and a dead process's memory comes back.
 *
 * Streams run host functions (cuLaunchHostFunc) in order on a worker thread;
 * that is the only kind of "work" there is, and it is enough to make events
 * and stream-ordered reuse observable in tests exactly as on a real GPU.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../src/cuda/cuda_abi.h"
#include "../src/cuda/granularity.h"
#include "../src/util/addrmap.h"
#include "../src/util/parse.h"
#include "config.h"
#include "occupancy.h"
#include "sim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SIM_DRIVER_VERSION 12080 /* what cuDriverGetVersion reports: CUDA 12.8 */

struct CUctx_st {
    int dev;
    bool primary;
    atomic_int refs; /* read without the lock on every current-context check */
};

struct host_task {
    CUhostFn fn;
    void *arg;
    struct host_task *next;
};

struct CUstream_st {
    int dev;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t enqueued, completed; /* work items, in order */
    struct host_task *head, *tail;
    bool has_worker, stopping;
    pthread_t worker;
    int refs; /* 1 for the handle, +1 per event recorded on it */
};

struct CUevent_st {
    struct CUstream_st *stream; /* NULL: never recorded, or complete */
    uint64_t seq;
};

static struct {
    pthread_mutex_t mu;
    bool initialized;
    int ndev;
    uint64_t total[SIM_MAX_DEVICES];
    struct CUctx_st primary[SIM_MAX_DEVICES];
    struct addrmap allocs; /* device pointer -> ENTRY(bytes, dev) */
} sim = {.mu = PTHREAD_MUTEX_INITIALIZER};

static struct CUstream_st default_stream = {
    .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .refs = 1};

#define CTX_STACK 16
static _Thread_local CUcontext ctx_stack[CTX_STACK];
static _Thread_local int ctx_depth; /* ctx_stack[ctx_depth-1] is current */

/* ------------------------------------------------------------------ setup */

static void after_fork_child(void)
{
    /* Like a real driver, nothing of the parent's GPU state is the child's. */
    pthread_mutex_init(&sim.mu, NULL);
    sim.initialized = false;
    addrmap_destroy(&sim.allocs);
    memset(sim.primary, 0, sizeof sim.primary);
    ctx_depth = 0;
    pthread_mutex_init(&default_stream.mu, NULL);
    pthread_cond_init(&default_stream.cv, NULL);
    default_stream.head = default_stream.tail = NULL;
    default_stream.has_worker = false;
    default_stream.enqueued = default_stream.completed = 0;
    sim_families_after_fork();
    occ_forget_after_fork();
}

static void before_fork(void) { pthread_mutex_lock(&sim.mu); }
static void after_fork_parent(void) { pthread_mutex_unlock(&sim.mu); }

__attribute__((constructor)) static void sim_load(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

static CUresult configure(void)
{
    int n = sim_config_devices(sim.total);
    if (n < 0)
        return CUDA_ERROR_INVALID_VALUE;
    sim.ndev = n;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuInit(unsigned int flags)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim.mu);
    CUresult rc = CUDA_SUCCESS;
    if (!sim.initialized) {
        rc = configure();
        if (rc == CUDA_SUCCESS && occ_open() != 0)
            rc = CUDA_ERROR_NOT_INITIALIZED;
        if (rc == CUDA_SUCCESS) {
            for (int i = 0; i < sim.ndev; i++)
                sim.primary[i] = (struct CUctx_st){.dev = i, .primary = true};
            sim.initialized = true;
        }
    }
    pthread_mutex_unlock(&sim.mu);
    return rc;
}

EXPORT CUresult cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = SIM_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

bool sim_ready(void) { return sim.initialized; }
uint64_t sim_device_total(int dev) { return sim.total[dev]; }
CUresult sim_check_device(CUdevice dev)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= sim.ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

/* --------------------------------------------------------------- devices */

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
    snprintf(name, (size_t)len, "vram simulated GPU (%s)", format_size(sim.total[dev]).text);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    /* Stable across processes and libraries: see sim/config.c. */
    sim_config_uuid(dev, (unsigned char *)uuid->bytes);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid(uuid, dev); }

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

EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = dev + 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* -------------------------------------------------------------- contexts */

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim.mu);
    sim.primary[dev].refs++;
    *pctx = &sim.primary[dev];
    pthread_mutex_unlock(&sim.mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&sim.mu);
    rc = sim.primary[dev].refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS)
        sim.primary[dev].refs--;
    pthread_mutex_unlock(&sim.mu);
    return rc;
}

EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

static bool ctx_valid(CUcontext c) { return c && atomic_load(&c->refs) > 0; }

EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    (void)flags;
    CUresult rc = sim_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->dev = dev;
    c->refs = 1;
    if (ctx_depth == CTX_STACK) {
        free(c);
        return CUDA_ERROR_UNKNOWN;
    }
    ctx_stack[ctx_depth++] = c; /* a created context becomes current */
    *pctx = c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    if (!ctx || ctx->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    for (int i = 0; i < ctx_depth; i++)
        if (ctx_stack[i] == ctx) {
            memmove(&ctx_stack[i], &ctx_stack[i + 1], sizeof(CUcontext) * (size_t)(ctx_depth - i - 1));
            ctx_depth--;
            i--;
        }
    free(ctx);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx) {
        if (ctx_depth > 0)
            ctx_depth--;
        return CUDA_SUCCESS;
    }
    if (ctx_depth == 0)
        ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == CTX_STACK)
        return CUDA_ERROR_UNKNOWN;
    ctx_stack[ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext c = ctx_stack[--ctx_depth];
    if (pctx)
        *pctx = c;
    return CUDA_SUCCESS;
}

CUresult sim_current_device(int *dev)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUcontext c = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
    if (!ctx_valid(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = c->dev;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    return sim_current_device(device);
}

/* ---------------------------------------------------------------- memory */

/* An allocation's entry in sim.allocs: the requested size, with the device
 * in the top byte. What it maps and what it charges follow from the size. */
#define ENTRY(bytes, dev) ((uint64_t)(bytes) | ((uint64_t)(dev) << 56))
#define ENTRY_BYTES(v) ((size_t)((v) & ((1ull << 56) - 1)))
#define ENTRY_DEV(v) ((int)((v) >> 56))

static size_t mapped_of(size_t bytes) { return (bytes + 4095) & ~(size_t)4095; }

void *sim_map(size_t bytes)
{
    void *p = mmap(NULL, mapped_of(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void sim_unmap(void *p, size_t bytes) { munmap(p, mapped_of(bytes)); }

/* What a device allocation occupies: see granularity.h. */
static uint64_t charge_of(size_t bytes) { return device_charge(bytes); }

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    int dev;
    CUresult rc = sim_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytesize > sim.total[dev])
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t charge = charge_of(bytesize);
    int oc = occ_charge(dev, charge, sim.total[dev]);
    if (oc != 0)
        return oc == -1 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
    void *p = sim_map(bytesize);
    if (!p) {
        occ_uncharge(dev, charge);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;
    pthread_mutex_lock(&sim.mu);
    int put = addrmap_put(&sim.allocs, d, ENTRY(bytesize, dev));
    pthread_mutex_unlock(&sim.mu);
    if (put != 0) {
        sim_unmap(p, bytesize);
        occ_uncharge(dev, charge);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = d;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                   size_t Height, unsigned int ElementSizeBytes)
{
    if (!pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    /* Rows are padded to 512 bytes, as a real device's texture alignment. */
    size_t pitch = (WidthInBytes + 511) & ~(size_t)511;
    CUresult rc = cuMemAlloc_v2(dptr, pitch * Height);
    if (rc == CUDA_SUCCESS)
        *pPitch = pitch;
    return rc;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return cuMemAlloc_v2(dptr, bytesize);
}

/* The legacy 32-bit ABI: only allocations whose address fits in 32 bits
 * could be returned, which a simulated (host) address never does. Like a
 * 64-bit driver, refuse rather than truncate. */
EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    (void)dptr, (void)bytesize;
    return sim.initialized ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED;
}

EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                unsigned int Height, unsigned int ElementSizeBytes)
{
    (void)dptr, (void)pPitch, (void)WidthInBytes, (void)Height, (void)ElementSizeBytes;
    return sim.initialized ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr);
EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) { return cuMemFree_v2(dptr); }

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!dptr)
        return CUDA_SUCCESS;
    uint64_t v;
    pthread_mutex_lock(&sim.mu);
    bool found = addrmap_take(&sim.allocs, dptr, &v);
    pthread_mutex_unlock(&sim.mu);
    if (!found)
        return CUDA_ERROR_INVALID_VALUE;
    sim_unmap((void *)(uintptr_t)dptr, ENTRY_BYTES(v));
    occ_uncharge(ENTRY_DEV(v), charge_of(ENTRY_BYTES(v)));
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    int dev;
    CUresult rc = sim_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t used = occ_used(dev);
    *total = sim.total[dev];
    *free_bytes = used >= sim.total[dev] ? 0 : sim.total[dev] - used;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
    size_t f, t;
    CUresult rc = cuMemGetInfo_v2(&f, &t);
    if (rc == CUDA_SUCCESS) {
        *free_bytes = f > UINT32_MAX ? UINT32_MAX : (unsigned int)f;
        *total = t > UINT32_MAX ? UINT32_MAX : (unsigned int)t;
    }
    return rc;
}

struct range_query {
    CUdeviceptr p;
    size_t n;
    bool inside;
};

static bool range_check(uint64_t key, uint64_t value, void *arg)
{
    struct range_query *q = arg;
    q->inside = q->p >= key && q->p + q->n <= key + ENTRY_BYTES(value);
    return !q->inside;
}

/* A device range is valid if it lies inside one live allocation. A scan,
 * not a lookup: copies are for tests, not for the hot path. */
static bool range_valid(CUdeviceptr p, size_t n)
{
    struct range_query q = {p, n, false};
    pthread_mutex_lock(&sim.mu);
    addrmap_each(&sim.allocs, range_check, &q);
    pthread_mutex_unlock(&sim.mu);
    return q.inside;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    int dev;
    CUresult rc = sim_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!range_valid(dst, n) || (!src && n))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy((void *)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    int dev;
    CUresult rc = sim_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!range_valid(src, n) || (!dst && n))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n)
{
    int dev;
    CUresult rc = sim_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!range_valid(dst, n))
        return CUDA_ERROR_INVALID_VALUE;
    memset((void *)(uintptr_t)dst, value, n);
    return CUDA_SUCCESS;
}

/* --------------------------------------------------------------- streams */

static struct CUstream_st *stream_of(CUstream s)
{
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return &default_stream;
    return s;
}

static void *stream_worker(void *arg)
{
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head)
            break;
        struct host_task *t = s->head;
        pthread_mutex_unlock(&s->mu);
        t->fn(t->arg);
        pthread_mutex_lock(&s->mu);
        s->head = t->next;
        if (!s->head)
            s->tail = NULL;
        free(t);
        s->completed++;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void stream_unref(struct CUstream_st *s)
{
    if (s == &default_stream)
        return;
    pthread_mutex_lock(&s->mu);
    int left = --s->refs;
    pthread_mutex_unlock(&s->mu);
    if (left)
        return;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    int dev;
    CUresult rc = sim_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!phStream || flags > CU_STREAM_NON_BLOCKING)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->dev = dev;
    s->refs = 1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    *phStream = s;
    return CUDA_SUCCESS;
}

static void stream_wait(struct CUstream_st *s, uint64_t seq)
{
    pthread_mutex_lock(&s->mu);
    while (s->completed < seq)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

EXPORT CUresult cuStreamSynchronize(CUstream h)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct CUstream_st *s = stream_of(h);
    pthread_mutex_lock(&s->mu);
    uint64_t seq = s->enqueued;
    pthread_mutex_unlock(&s->mu);
    stream_wait(s, seq);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamQuery(CUstream h)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct CUstream_st *s = stream_of(h);
    pthread_mutex_lock(&s->mu);
    bool done = s->completed == s->enqueued;
    pthread_mutex_unlock(&s->mu);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream h)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUstream_st *s = h;
    /* Like the driver, destroying a stream lets queued work finish. */
    cuStreamSynchronize(h);
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    bool joined = s->has_worker;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (joined)
        pthread_join(s->worker, NULL);
    stream_unref(s);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void *userData)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s = stream_of(h);
    struct host_task *t = calloc(1, sizeof *t);
    if (!t)
        return CUDA_ERROR_OUT_OF_MEMORY;
    t->fn = fn;
    t->arg = userData;
    pthread_mutex_lock(&s->mu);
    if (!s->has_worker) {
        if (pthread_create(&s->worker, NULL, stream_worker, s) != 0) {
            pthread_mutex_unlock(&s->mu);
            free(t);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (s == &default_stream)
            pthread_detach(s->worker);
        s->has_worker = true;
    }
    if (s->tail)
        s->tail->next = t;
    else
        s->head = t;
    s->tail = t;
    s->enqueued++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- events */

EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int flags)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!phEvent || flags > (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | 4))
        return CUDA_ERROR_INVALID_VALUE;
    CUevent e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phEvent = e;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream h)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUstream_st *s = stream_of(h);
    if (e->stream)
        stream_unref(e->stream);
    e->stream = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->completed < s->enqueued) {
        e->seq = s->enqueued;
        e->stream = s;
        s->refs++;
    }
    pthread_mutex_unlock(&s->mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventQuery(CUevent e)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!e->stream)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&e->stream->mu);
    bool done = e->stream->completed >= e->seq;
    pthread_mutex_unlock(&e->stream->mu);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventSynchronize(CUevent e)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    if (e->stream)
        stream_wait(e->stream, e->seq);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent e)
{
    if (!sim.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    if (e->stream)
        stream_unref(e->stream);
    free(e);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- errors */

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

EXPORT CUresult cuGetErrorName(CUresult error, const char **str)
{
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
        if (errors[i].code == error) {
            *str = errors[i].name;
            return CUDA_SUCCESS;
        }
    *str = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **str)
{
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
        if (errors[i].code == error) {
            *str = errors[i].text;
            return CUDA_SUCCESS;
        }
    *str = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

/* ------------------------------------------------------- entry-point table */

/* What cuGetProcAddress resolves: the base name a caller asks for, the CUDA
 * version from which this implementation is the one to hand out, and it. */
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *symbolStatus);
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

/* Declared in families.c. */
#define F(ret, name, args) EXPORT ret name args;
F(CUresult, cuMemAllocAsync, (CUdeviceptr *, size_t, CUstream))
F(CUresult, cuMemAllocAsync_ptsz, (CUdeviceptr *, size_t, CUstream))
F(CUresult, cuMemFreeAsync, (CUdeviceptr, CUstream))
F(CUresult, cuMemFreeAsync_ptsz, (CUdeviceptr, CUstream))
F(CUresult, cuMemAllocFromPoolAsync, (CUdeviceptr *, size_t, CUmemoryPool, CUstream))
F(CUresult, cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr *, size_t, CUmemoryPool, CUstream))
F(CUresult, cuDeviceGetDefaultMemPool, (CUmemoryPool *, CUdevice))
F(CUresult, cuDeviceGetMemPool, (CUmemoryPool *, CUdevice))
F(CUresult, cuDeviceSetMemPool, (CUdevice, CUmemoryPool))
F(CUresult, cuMemPoolCreate, (CUmemoryPool *, const CUmemPoolProps *))
F(CUresult, cuMemPoolDestroy, (CUmemoryPool))
F(CUresult, cuMemPoolTrimTo, (CUmemoryPool, size_t))
F(CUresult, cuMemPoolGetAttribute, (CUmemoryPool, CUmemPool_attribute, void *))
F(CUresult, cuMemPoolSetAttribute, (CUmemoryPool, CUmemPool_attribute, void *))
F(CUresult, cuMemCreate, (CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long))
F(CUresult, cuMemRelease, (CUmemGenericAllocationHandle))
F(CUresult, cuMemGetAllocationGranularity, (size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags))
F(CUresult, cuMemAddressReserve, (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))
F(CUresult, cuMemAddressFree, (CUdeviceptr, size_t))
F(CUresult, cuMemMap, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long))
F(CUresult, cuMemUnmap, (CUdeviceptr, size_t))
F(CUresult, cuMemSetAccess, (CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))
F(CUresult, cuArrayCreate_v2, (CUarray *, const CUDA_ARRAY_DESCRIPTOR *))
F(CUresult, cuArray3DCreate_v2, (CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *))
F(CUresult, cuArrayDestroy, (CUarray))
F(CUresult, cuArrayGetMemoryRequirements, (CUDA_ARRAY_MEMORY_REQUIREMENTS *, CUarray, CUdevice))
F(CUresult, cuMipmappedArrayCreate, (CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int))
F(CUresult, cuMipmappedArrayDestroy, (CUmipmappedArray))
F(CUresult, cuMipmappedArrayGetMemoryRequirements, (CUDA_ARRAY_MEMORY_REQUIREMENTS *, CUmipmappedArray, CUdevice))
F(CUresult, cuGraphCreate, (CUgraph *, unsigned int))
F(CUresult, cuGraphDestroy, (CUgraph))
F(CUresult, cuGraphAddMemAllocNode, (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUDA_MEM_ALLOC_NODE_PARAMS *))
F(CUresult, cuGraphAddMemFreeNode, (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUdeviceptr))
F(CUresult, cuGraphInstantiateWithFlags, (CUgraphExec *, CUgraph, unsigned long long))
F(CUresult, cuGraphLaunch, (CUgraphExec, CUstream))
F(CUresult, cuGraphLaunch_ptsz, (CUgraphExec, CUstream))
F(CUresult, cuGraphUpload, (CUgraphExec, CUstream))
F(CUresult, cuGraphUpload_ptsz, (CUgraphExec, CUstream))
F(CUresult, cuGraphExecDestroy, (CUgraphExec))
F(CUresult, cuDeviceGetGraphMemAttribute, (CUdevice, CUgraphMem_attribute, void *))
F(CUresult, cuDeviceGraphMemTrim, (CUdevice))
#undef F

/* What cuGetProcAddress resolves: the base name a caller asks for, the CUDA
 * version from which this implementation is the one to hand out, it, and
 * its per-thread-default-stream variant where the driver has one. */
static const struct {
    const char *name;
    int since;
    void *fn, *ptsz;
} procs[] = {
#define P(name, since, fn) {name, since, (void *)fn, NULL}
#define PS(name, since, fn) {name, since, (void *)fn, (void *)fn##_ptsz}
    P("cuInit", 2000, cuInit),
    P("cuDriverGetVersion", 2020, cuDriverGetVersion),
    P("cuGetErrorName", 6000, cuGetErrorName),
    P("cuGetErrorString", 6000, cuGetErrorString),
    P("cuDeviceGetCount", 2000, cuDeviceGetCount),
    P("cuDeviceGet", 2000, cuDeviceGet),
    P("cuDeviceGetName", 2000, cuDeviceGetName),
    P("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    P("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
    P("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    P("cuDeviceTotalMem", 2000, cuDeviceTotalMem),
    P("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    P("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    P("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    P("cuCtxCreate", 3020, cuCtxCreate_v2),
    P("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    P("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
    P("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
    P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    P("cuCtxGetDevice", 2000, cuCtxGetDevice),
    P("cuMemAlloc", 3020, cuMemAlloc_v2),
    P("cuMemAlloc", 2000, cuMemAlloc),
    P("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    P("cuMemAllocPitch", 2000, cuMemAllocPitch),
    P("cuMemAllocManaged", 6000, cuMemAllocManaged),
    P("cuMemFree", 3020, cuMemFree_v2),
    P("cuMemFree", 2000, cuMemFree),
    P("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    P("cuMemGetInfo", 2000, cuMemGetInfo),
    P("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2),
    P("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2),
    P("cuMemsetD8", 3020, cuMemsetD8_v2),
    P("cuStreamCreate", 2000, cuStreamCreate),
    P("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    P("cuStreamSynchronize", 2000, cuStreamSynchronize),
    P("cuStreamQuery", 2000, cuStreamQuery),
    P("cuLaunchHostFunc", 10000, cuLaunchHostFunc),
    P("cuEventCreate", 2000, cuEventCreate),
    P("cuEventDestroy", 4000, cuEventDestroy_v2),
    P("cuEventRecord", 2000, cuEventRecord),
    P("cuEventQuery", 2000, cuEventQuery),
    P("cuEventSynchronize", 2000, cuEventSynchronize),
    PS("cuMemAllocAsync", 11020, cuMemAllocAsync),
    PS("cuMemFreeAsync", 11020, cuMemFreeAsync),
    PS("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    P("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    P("cuDeviceGetMemPool", 11020, cuDeviceGetMemPool),
    P("cuDeviceSetMemPool", 11020, cuDeviceSetMemPool),
    P("cuMemPoolCreate", 11020, cuMemPoolCreate),
    P("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
    P("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),
    P("cuMemPoolGetAttribute", 11020, cuMemPoolGetAttribute),
    P("cuMemPoolSetAttribute", 11020, cuMemPoolSetAttribute),
    P("cuMemCreate", 10020, cuMemCreate),
    P("cuMemRelease", 10020, cuMemRelease),
    P("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    P("cuMemAddressReserve", 10020, cuMemAddressReserve),
    P("cuMemAddressFree", 10020, cuMemAddressFree),
    P("cuMemMap", 10020, cuMemMap),
    P("cuMemUnmap", 10020, cuMemUnmap),
    P("cuMemSetAccess", 10020, cuMemSetAccess),
    P("cuArrayCreate", 3020, cuArrayCreate_v2),
    P("cuArray3DCreate", 3020, cuArray3DCreate_v2),
    P("cuArrayDestroy", 2000, cuArrayDestroy),
    P("cuArrayGetMemoryRequirements", 11060, cuArrayGetMemoryRequirements),
    P("cuMipmappedArrayCreate", 5000, cuMipmappedArrayCreate),
    P("cuMipmappedArrayDestroy", 5000, cuMipmappedArrayDestroy),
    P("cuMipmappedArrayGetMemoryRequirements", 11060, cuMipmappedArrayGetMemoryRequirements),
    P("cuGraphCreate", 10000, cuGraphCreate),
    P("cuGraphDestroy", 10000, cuGraphDestroy),
    P("cuGraphAddMemAllocNode", 11040, cuGraphAddMemAllocNode),
    P("cuGraphAddMemFreeNode", 11040, cuGraphAddMemFreeNode),
    P("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    P("cuGraphInstantiate", 12000, cuGraphInstantiateWithFlags),
    PS("cuGraphLaunch", 10000, cuGraphLaunch),
    PS("cuGraphUpload", 11010, cuGraphUpload),
    P("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
    P("cuDeviceGetGraphMemAttribute", 11040, cuDeviceGetGraphMemAttribute),
    P("cuDeviceGraphMemTrim", 11040, cuDeviceGraphMemTrim),
    P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    P("cuGetProcAddress", 11030, cuGetProcAddress),
#undef P
#undef PS
};

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *symbolStatus)
{
    if (!symbol || !pfn || flags > CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    bool known = false;
    for (size_t i = 0; i < sizeof procs / sizeof *procs; i++) {
        if (strcmp(procs[i].name, symbol) != 0)
            continue;
        known = true;
        if (cudaVersion >= procs[i].since) {
            /* Per-thread default stream where asked and where it exists. */
            *pfn = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM && procs[i].ptsz
                       ? procs[i].ptsz
                       : procs[i].fn;
            if (symbolStatus)
                *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    }
    if (symbolStatus)
        *symbolStatus = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                              : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/* Every export has exactly the driver's signature: the compiler checks each
 * against the PFN_ type declared from cuda.h. */
#define SAME_TYPE(fn, pfn) _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), pfn), #fn)
SAME_TYPE(cuInit, PFN_cuInit);
SAME_TYPE(cuDriverGetVersion, PFN_cuDriverGetVersion);
SAME_TYPE(cuGetErrorName, PFN_cuGetErrorName);
SAME_TYPE(cuGetErrorString, PFN_cuGetErrorString);
SAME_TYPE(cuDeviceGetCount, PFN_cuDeviceGetCount);
SAME_TYPE(cuDeviceGet, PFN_cuDeviceGet);
SAME_TYPE(cuDeviceGetName, PFN_cuDeviceGetName);
SAME_TYPE(cuDeviceGetUuid, PFN_cuDeviceGetUuid);
SAME_TYPE(cuDeviceGetUuid_v2, PFN_cuDeviceGetUuid);
SAME_TYPE(cuDeviceTotalMem_v2, PFN_cuDeviceTotalMem_v2);
SAME_TYPE(cuDeviceGetAttribute, PFN_cuDeviceGetAttribute);
SAME_TYPE(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain);
SAME_TYPE(cuDevicePrimaryCtxRelease_v2, PFN_cuDevicePrimaryCtxRelease_v2);
SAME_TYPE(cuCtxCreate_v2, PFN_cuCtxCreate_v2);
SAME_TYPE(cuCtxDestroy_v2, PFN_cuCtxDestroy_v2);
SAME_TYPE(cuCtxPushCurrent_v2, PFN_cuCtxPushCurrent_v2);
SAME_TYPE(cuCtxPopCurrent_v2, PFN_cuCtxPopCurrent_v2);
SAME_TYPE(cuCtxSetCurrent, PFN_cuCtxSetCurrent);
SAME_TYPE(cuCtxGetCurrent, PFN_cuCtxGetCurrent);
SAME_TYPE(cuCtxGetDevice, PFN_cuCtxGetDevice);
SAME_TYPE(cuMemAlloc_v2, PFN_cuMemAlloc_v2);
SAME_TYPE(cuMemAllocPitch_v2, PFN_cuMemAllocPitch_v2);
SAME_TYPE(cuMemAllocManaged, PFN_cuMemAllocManaged);
SAME_TYPE(cuMemAlloc, PFN_cuMemAlloc);
SAME_TYPE(cuMemAllocPitch, PFN_cuMemAllocPitch);
SAME_TYPE(cuMemFree, PFN_cuMemFree);
SAME_TYPE(cuMemGetInfo, PFN_cuMemGetInfo);
SAME_TYPE(cuDeviceTotalMem, PFN_cuDeviceTotalMem);
SAME_TYPE(cuMemFree_v2, PFN_cuMemFree_v2);
SAME_TYPE(cuMemGetInfo_v2, PFN_cuMemGetInfo_v2);
SAME_TYPE(cuMemcpyHtoD_v2, PFN_cuMemcpyHtoD_v2);
SAME_TYPE(cuMemcpyDtoH_v2, PFN_cuMemcpyDtoH_v2);
SAME_TYPE(cuMemsetD8_v2, PFN_cuMemsetD8_v2);
SAME_TYPE(cuStreamCreate, PFN_cuStreamCreate);
SAME_TYPE(cuStreamDestroy_v2, PFN_cuStreamDestroy_v2);
SAME_TYPE(cuStreamSynchronize, PFN_cuStreamSynchronize);
SAME_TYPE(cuStreamQuery, PFN_cuStreamQuery);
SAME_TYPE(cuLaunchHostFunc, PFN_cuLaunchHostFunc);
SAME_TYPE(cuEventCreate, PFN_cuEventCreate);
SAME_TYPE(cuEventDestroy_v2, PFN_cuEventDestroy_v2);
SAME_TYPE(cuEventRecord, PFN_cuEventRecord);
SAME_TYPE(cuEventQuery, PFN_cuEventQuery);
SAME_TYPE(cuEventSynchronize, PFN_cuEventSynchronize);
SAME_TYPE(cuGetProcAddress, PFN_cuGetProcAddress);
SAME_TYPE(cuGetProcAddress_v2, PFN_cuGetProcAddress_v2);
