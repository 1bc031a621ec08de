/* vram.h: GPU memory controls for programs that share a GPU.
 *
 * libvram gives a native program the controls that TensorFlow, PyTorch and
 * JAX each offer in their own way, once and for any CUDA device:
 *
 *   - which devices are visible, and in what order;
 *   - a memory limit per device, in bytes or as a fraction of the device's
 *     total memory;
 *   - growth (take memory as needed) or preallocation (take the whole limit
 *     at first use);
 *   - virtual devices: one physical GPU split into several logical devices,
 *     each with its own limit and allocator;
 *   - allocation and free, optionally ordered on a CUDA stream;
 *   - statistics (in use, peak, reserved, fragmentation, OOMs), trimming of
 *     cached memory, and out-of-memory messages a person can act on;
 *   - running a function in a fresh child process, so that everything it
 *     held on the GPU is surely returned.
 *
 * The CUDA driver (libcuda.so.1) is loaded at run time; nothing here needs
 * the CUDA toolkit. On a machine without a GPU, vram's simulated driver
 * takes its place (see README).
 *
 * Conventions
 *   - Every function returns a vram_status. On failure, vram_last_error()
 *     returns a message for a person: what failed, the values involved, and
 *     what is accepted. The message is per thread and lasts until that
 *     thread's next failing call.
 *   - Devices are numbered by *logical* index: the visible physical devices
 *     in order, each replaced by its virtual devices if it is split.
 *     Functions named "physical" take the index of a visible physical device.
 *   - Configuration (vram_set_* and vram_configure) must come before first
 *     use; first use is any call that needs devices (vram_init, vram_malloc,
 *     vram_device_count, ...). The environment variables (VRAM_*) are read
 *     then; a setting made through these functions overrides the variable.
 *   - All functions are thread-safe, except that configuring from one thread
 *     while another makes first use is a race the caller must avoid.
 *
 * Environment variables (each validated when read; an error names the
 * variable, the value and the accepted forms; an unknown VRAM_* variable is
 * warned about):
 *   VRAM_VISIBLE_DEVICES   "1,0" or UUID prefixes "GPU-5a1d,GPU-77"; "" for none
 *   VRAM_MEMORY_LIMIT      "4GiB" for every device, or "0=4GiB,1=2GiB"
 *   VRAM_MEMORY_FRACTION   "0.33" or "33%" of each device's total, or "0=0.5,1=25%"
 *   VRAM_ALLOW_GROWTH      "true" or "false"; when unset, TF_FORCE_GPU_ALLOW_GROWTH
 *                          is honoured with TensorFlow's meaning; default true
 *   VRAM_VIRTUAL_DEVICES   "0:2GiB,2GiB;1:4GiB": device 0 split in two, device 1 one
 *   VRAM_LOG               "off", "error", "warn" (default), "info" or "debug"
 *   VRAM_CUDA_LIBRARY      the driver library to load (default libcuda.so.1)
 */
#ifndef VRAM_H
#define VRAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the functions the shared library exports; empty for users. */
#ifndef VRAM_EXPORT
#define VRAM_EXPORT
#endif

#define VRAM_VERSION_MAJOR 0
#define VRAM_VERSION_MINOR 1
#define VRAM_VERSION_PATCH 0

typedef enum vram_status {
    VRAM_OK = 0,
    VRAM_ERROR_INVALID_ARGUMENT = 1, /* a bad argument to a call */
    VRAM_ERROR_CONFIG = 2,           /* a bad configuration value, from the environment or a call */
    VRAM_ERROR_FROZEN = 3,           /* configuration changed after first use */
    VRAM_ERROR_OUT_OF_MEMORY = 4,    /* the limit or the device is exhausted */
    VRAM_ERROR_NO_DRIVER = 5,        /* the CUDA driver library could not be loaded */
    VRAM_ERROR_DRIVER = 6,           /* the driver failed a call */
    VRAM_ERROR_NO_DEVICE = 7,        /* no such device, or no devices at all */
    VRAM_ERROR_UNKNOWN_POINTER = 8,  /* a pointer vram did not allocate, or already freed */
    VRAM_ERROR_CHILD_FAILED = 9,     /* an isolated child crashed, was killed, or exited early */
    VRAM_ERROR_SYSTEM = 10,          /* the operating system refused (fork, pipe, memory) */
} vram_status;

/* The name of a status, e.g. "VRAM_ERROR_OUT_OF_MEMORY". */
VRAM_EXPORT const char *vram_status_name(vram_status status);

/* The message of this thread's last failing call ("" if none). */
VRAM_EXPORT const char *vram_last_error(void);

/* "0.1.0". */
VRAM_EXPORT const char *vram_version(void);

/* ------------------------------------------------------------ configuration */

/* Which physical devices are visible, in order: a comma-separated list of
 * driver ordinals or UUID prefixes ("1,0", "GPU-5a1d"); "" for none; NULL to
 * see every device. Same forms as VRAM_VISIBLE_DEVICES. */
VRAM_EXPORT vram_status vram_set_visible_devices(const char *spec);

/* The memory limit of visible physical device `physical` (-1: every device),
 * in bytes. What the process reserves from the driver on that device never
 * exceeds it. Replaces any fraction set for the device. */
VRAM_EXPORT vram_status vram_set_memory_limit(int physical, uint64_t bytes);

/* The limit as a fraction in (0, 1] of the device's *total* memory (not of
 * what happens to be free). Replaces any byte limit set for the device. */
VRAM_EXPORT vram_status vram_set_memory_fraction(int physical, double fraction);

/* Nonzero: grow the reserve in steps as allocations need it. Zero: reserve
 * the whole limit at the first allocation on each device. */
VRAM_EXPORT vram_status vram_set_allow_growth(int allow);

/* Splits visible physical device `physical` into `count` logical devices
 * with the given limits in bytes (count 0 undoes a split). Limits that
 * together exceed the device are refused at first use. A device that is
 * split takes no limit or fraction of its own. */
VRAM_EXPORT vram_status vram_set_virtual_devices(int physical, int count, const uint64_t *limits);

/* Sets an option by the name of its environment variable, with the same
 * forms, e.g. vram_configure("VRAM_MEMORY_LIMIT", "0=4GiB,1=2GiB"). */
VRAM_EXPORT vram_status vram_configure(const char *name, const char *value);

/* Reads the environment, loads the driver and sets up the devices. Called
 * by every function that needs devices; calling it first only moves where a
 * configuration error is reported. Calling it again does nothing. */
VRAM_EXPORT vram_status vram_init(void);

/* Frees every region vram reserved and forgets the configuration, so that
 * the next call starts afresh. Every pointer vram returned becomes invalid.
 * Not to be called while other threads use vram. */
VRAM_EXPORT void vram_shutdown(void);

/* ------------------------------------------------------------------ devices */

typedef struct vram_device_info {
    int index;             /* logical index (physical index for the physical calls) */
    int physical;          /* visible physical device it lives on */
    int ordinal;           /* the driver's ordinal of that device */
    int virtual_index;     /* which part of a split device; 0 if not split */
    int virtual_count;     /* how many logical devices share the physical one */
    char name[128];
    char uuid[48];         /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
    uint64_t total;        /* the physical device's total memory */
    uint64_t limit;        /* this device's limit (physical: the sum of its logical devices) */
    uint64_t driver_free;  /* free memory of the physical device, as the driver reports it now */
} vram_device_info;

/* The number of logical devices. */
VRAM_EXPORT vram_status vram_device_count(int *count);
VRAM_EXPORT vram_status vram_device_get_info(int device, vram_device_info *info);

/* The number of visible physical devices. */
VRAM_EXPORT vram_status vram_physical_device_count(int *count);
VRAM_EXPORT vram_status vram_physical_device_get_info(int physical, vram_device_info *info);

/* --------------------------------------------------------------- allocation */

/* A CUstream, or NULL for none. */
typedef void *vram_stream;

/* Allocates `size` bytes of device memory on logical device `device`,
 * 256-byte aligned, for use on `stream`. size 0 gives *ptr = NULL and
 * VRAM_OK. On VRAM_ERROR_OUT_OF_MEMORY the message gives the requested and
 * rounded size, the limit, what is in use and reserved, the largest free
 * block, and the device's total and free memory as the driver reports them
 * (which shows what other processes hold). Before failing, vram waits for
 * pending stream frees, returns free regions to the driver, and retries. */
VRAM_EXPORT vram_status vram_malloc(int device, size_t size, vram_stream stream, void **ptr);

/* Frees memory from vram_malloc. With a stream, the memory is reused at
 * once by work on that stream and by other streams only after the work
 * queued on it before the free has completed; with NULL, the caller
 * promises the device is done with it. NULL ptr: nothing to do. */
VRAM_EXPORT vram_status vram_free(void *ptr, vram_stream stream);

/* The size vram reserved for an allocation (its size rounded up to 256). */
VRAM_EXPORT vram_status vram_allocation_size(const void *ptr, size_t *size);

/* -------------------------------------------------------------------- stats */

typedef struct vram_stats {
    uint64_t bytes_in_use;        /* allocated to the program (rounded sizes) */
    uint64_t peak_bytes_in_use;
    uint64_t bytes_reserved;      /* obtained from the driver */
    uint64_t peak_bytes_reserved;
    uint64_t bytes_limit;
    uint64_t bytes_pending;       /* freed on a stream, waiting for its work */
    uint64_t num_allocs;          /* allocations made since start */
    uint64_t active_allocs;       /* allocations live now */
    uint64_t largest_alloc_size;  /* since the last peak reset */
    uint64_t largest_free_block;  /* within the reserve */
    uint64_t num_regions;         /* separate reservations from the driver */
    uint64_t num_ooms;            /* allocations refused */
    uint64_t num_alloc_retries;   /* allocations that succeeded only after trimming */
    double fragmentation;         /* 1 - largest free block / free bytes in the reserve */
    uint64_t device_total;        /* the physical device, as the driver reports it now */
    uint64_t device_free;
} vram_stats;

/* Statistics of one logical device. */
VRAM_EXPORT vram_status vram_get_stats(int device, vram_stats *stats);

/* Statistics of one visible physical device: the sums over its logical
 * devices (peaks, largest sizes and fragmentation are the largest among
 * them). */
VRAM_EXPORT vram_status vram_get_physical_stats(int physical, vram_stats *stats);

/* Sets the peaks to the current values (device -1: every device). */
VRAM_EXPORT vram_status vram_reset_peak_stats(int device);

/* Returns every fully free region to the driver (device -1: every device),
 * after waiting for pending stream frees. *released (may be NULL) gets the
 * bytes returned. */
VRAM_EXPORT vram_status vram_trim(int device, uint64_t *released);

/* ---------------------------------------------------------------- isolation */

/* A function to run in a child process. It gets the input bytes and writes
 * at most out_cap result bytes to `out`, setting *out_len. It returns
 * VRAM_OK, or a status that is handed back to the caller together with the
 * child's vram_last_error(). */
typedef vram_status (*vram_isolated_fn)(const void *in, size_t in_len, void *out, size_t out_cap,
                                        size_t *out_len);

/* Runs fn in a fresh process and returns its result, like Python's
 * multiprocessing with "spawn": the child is a new execution of this
 * program (/proc/self/exe) that runs fn before main(), so it inherits no
 * GPU state even when this process has initialised the GPU, and everything
 * it held is released when it ends.
 *
 * fn must live in the executable or in a library loaded at start-up (not
 * one opened later with dlopen). The child gets the same environment and
 * arguments; it must not depend on state that main() sets up.
 *
 * Returns VRAM_OK with the result in out and *out_len; the child's own status
 * and message if fn failed; VRAM_ERROR_CHILD_FAILED with the cause if the
 * child crashed, was killed or exited without a result; or
 * VRAM_ERROR_INVALID_ARGUMENT if the result did not fit in out_cap. */
VRAM_EXPORT vram_status vram_run_isolated(vram_isolated_fn fn, const void *in, size_t in_len, void *out,
                              size_t out_cap, size_t *out_len);

#ifdef __cplusplus
}
#endif

#endif
