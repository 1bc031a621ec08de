/* What the simulated driver's parts share. Everything here is internal to
 * libcuda.so.1 (hidden); only EXPORT functions are the driver's API.
 *
 * The parts, each with one job; each uses only parts listed before it:
 *   device.c        initialisation, CUDA_VISIBLE_DEVICES, fork, the device
 *                   profile and its queries, each device's share of occupancy
 *   context.c       primary and created contexts, the current context, their
 *                   memory, cache/limit settings
 *   ranges.c        every address range the driver handed out, by kind: what
 *                   copies, pointer attributes and address ranges look up
 *   stream.c        streams, events, host functions, synchronisation
 *   memory.c        device, managed and host allocations, IPC handles
 *   copy.c          copies and memsets, synchronous and stream-ordered
 *   pools.c, vmm.c, graphs.c   stream-ordered pools; VMM and arrays; graph memory
 *   module.c        modules, libraries, the linker, functions, launches
 *   entry_points.c, entry_stubs.c   every exported symbol (generated list),
 *                   NOT_SUPPORTED for what is not modelled, cuGetProcAddress,
 *                   error names
 */
#ifndef VRAM_SIM_H
#define VRAM_SIM_H

#include "../src/cuda/cuda_abi.h"
#include "occupancy.h" /* SIM_MAX_DEVICES */

#include <stdbool.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))
/* An export has exactly the driver's signature: the compiler checks it
 * against the PFN_ type generated from cuda.h. */
#define SAME_TYPE(fn) _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), PFN_##fn), #fn)

/* ------------------------------------------------------------ device.c */

/* Initialised by cuInit in this process (false in a child forked after
 * its parent initialised CUDA: the driver refuses such a child). */
bool sim_ready(void);
/* CUDA_ERROR_NOT_INITIALIZED unless sim_ready(). */
CUresult sim_check_init(void);
CUresult sim_check_device(CUdevice dev);
int sim_device_count(void);
uint64_t sim_device_total(int dev);
/* Charges `bytes` of device `dev` (a CUDA ordinal) to this process if it
 * fits: CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY, or CUDA_ERROR_UNKNOWN when
 * the shared state cannot be written. */
CUresult sim_charge(int dev, uint64_t bytes);
void sim_uncharge(int dev, uint64_t bytes);
/* cuMemGetInfo's figures for device `dev` as this process sees them. */
void sim_memory_info(int dev, uint64_t *free_bytes, uint64_t *total);
/* Device memory a context takes (VRAM_SIM_CONTEXT_SIZE, read by cuInit). */
uint64_t sim_context_size(void);
/* The chunks a stream-ordered pool grows in (VRAM_SIM_POOL_CHUNK, read by
 * cuInit). */
uint64_t sim_pool_chunk(void);
/* CUDA_MODULE_LOADING is LAZY (read by cuInit): a module's code is charged
 * at its first launch, not at its load. */
bool sim_lazy_loading(void);

/* One line on stderr when VRAM_LOG asks for `level` (1 error .. 4 debug). */
void sim_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ----------------------------------------------------------- context.c */

/* The device of the calling thread's current context. */
CUresult sim_current_device(int *dev);
CUresult sim_current_context(CUcontext *ctx);
/* ctx names a live context (checked without dereferencing it). */
bool sim_context_live(CUcontext ctx);
int sim_context_device(CUcontext ctx);
/* A context argument: a live context, or NULL for the current one. */
CUresult sim_context_arg(CUcontext *ctx);

/* ------------------------------------------------------------ ranges.c */

enum sim_range_kind {
    RANGE_DEVICE,     /* cuMemAlloc, cuMemAllocPitch */
    RANGE_MANAGED,    /* cuMemAllocManaged */
    RANGE_POOL,       /* stream-ordered, from a pool */
    RANGE_VMM,        /* a mapping of a VMM handle */
    RANGE_GRAPH,      /* a graph allocation node's address */
    RANGE_HOST,       /* cuMemHostAlloc / cuMemAllocHost: page-locked host memory */
    RANGE_REGISTERED, /* cuMemHostRegister */
    RANGE_IPC,        /* another process's allocation, opened by IPC handle */
};

struct sim_range {
    uint64_t base, size;
    enum sim_range_kind kind;
    int dev;          /* ordinal; -1 for host memory */
    unsigned flags;   /* host: CU_MEMHOSTALLOC_* / CU_MEMHOSTREGISTER_* */
    uint64_t id;      /* process-wide buffer id */
    CUcontext ctx;    /* the context current when it was made */
    void *owner;      /* the family's own record (pool, handle, ...) */
};

/* 0, or -1 when host memory ran out. Fills r->id. */
int sim_range_add(struct sim_range *r);
/* Removes the range starting at base of one of the kinds in `kinds` (a
 * bit mask of 1 << kind); false if there is none. */
bool sim_range_take(uint64_t base, unsigned kinds, struct sim_range *out);
/* The range holding [p, p + n), of one of `kinds`. */
bool sim_range_find(uint64_t p, uint64_t n, unsigned kinds, struct sim_range *out);
#define RANGES_DEVICE ((1u << RANGE_DEVICE) | (1u << RANGE_MANAGED) | (1u << RANGE_POOL) | \
                       (1u << RANGE_VMM) | (1u << RANGE_GRAPH) | (1u << RANGE_IPC))
#define RANGES_HOST ((1u << RANGE_HOST) | (1u << RANGE_REGISTERED))
#define RANGES_ALL (RANGES_DEVICE | RANGES_HOST)

/* ------------------------------------------------------------ stream.c */

/* The stream a handle names (NULL and the special handles: the default
 * stream), or NULL for a destroyed or foreign handle. */
struct CUstream_st *sim_stream(CUstream h);
/* Waits until everything queued on the stream so far has run. */
void sim_stream_drain(struct CUstream_st *s);

/* ------------------------------------------------------------ memory.c */

/* Host address space standing in for device memory (pages exist once written). */
void *sim_map(size_t bytes);
void sim_unmap(void *p, size_t bytes);

#endif
