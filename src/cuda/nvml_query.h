/* nvml_query: NVML loaded at run time, and the questions vram asks it.
 *
 * One loader for the programs that read NVML: vramd (its GPUs, and the
 * processes it reconciles against its ledger), `vram devices` and `vram top`
 * without vramd.
 * libnvidia-ml.so.1 is dlopen()ed, never linked (the real one on a GPU
 * node, the simulated one here); nothing here creates a CUDA context.
 *
 * nvml_open and nvml_close are not thread-safe and are called once; the
 * questions may be asked from any thread, as NVML's own calls may.
 */
#ifndef VRAM_NVML_QUERY_H
#define VRAM_NVML_QUERY_H

#include "nvml_abi.h"
#include "nvml_processes.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Loads `library` (NULL: libnvidia-ml.so.1) and starts NVML. 0, or -1 with
 * the reason in err. `who` names the program in the message ("vramd"). */
int nvml_open(const char *library, const char *who, char *err, size_t n);
void nvml_close(void);

/* A function of the loaded NVML that vram does not ask for otherwise
 * (NULL without NVML or where this driver lacks it): vramd's driver limits
 * look up functions newer drivers add, such as nvmlDeviceSetMemoryLimits_v1. */
void *nvml_symbol(const char *name);
/* NVML's words for an error (nvmlErrorString), or "NVML error N" in buf. */
const char *nvml_error_text(nvmlReturn_t rc, char buf[32]);

/* How many GPUs NVML lists; -1 with the reason. */
int nvml_count(char *err, size_t n);

/* A GPU, by NVML's index or by UUID: 0, or -1 with the reason. */
int nvml_by_index(unsigned index, nvmlDevice_t *d, char *err, size_t n);
int nvml_by_uuid(const char *uuid, nvmlDevice_t *d, char *err, size_t n);

/* What describes a GPU; parts NVML cannot say are "" (minor -1). */
struct nvml_about {
    char uuid[96];
    char name[96];       /* "NVIDIA H100 80GB HBM3" */
    char pci_bus_id[32]; /* "00000000:01:00.0" */
    int minor;           /* N of /dev/nvidiaN */
};
/* The UUID is required (-1 with the reason without it); the rest is best
 * effort. */
int nvml_about(nvmlDevice_t d, struct nvml_about *a, char *err, size_t n);

/* total: what processes can have (NVML's total less what the driver
 * reserves, as CUDA counts it) = used + free; reserved: the driver's. */
struct nvml_memory {
    uint64_t total, used, free, reserved;
};
int nvml_memory(nvmlDevice_t d, struct nvml_memory *m, char *err, size_t n);

/* The compute processes holding memory on a GPU (struct nvml_process),
 * into a malloc()ed array (the caller frees it): their count, or -1 with
 * the reason. The list can change while it is read; it is asked again a
 * few times with room for what NVML last said. */
int nvml_processes_on(nvmlDevice_t d, struct nvml_process **out, char *err, size_t n);

/* What the GPU is doing, as nvidia-smi and nvitop show it: each figure -1
 * where NVML cannot say (NVML_ERROR_NOT_SUPPORTED, as for an H100 SXM's
 * fan, or a library without the function). */
struct nvml_sensors {
    int gpu_percent, memory_percent; /* utilisation over NVML's last sample */
    int celsius;                     /* the GPU's temperature */
    long milliwatts, limit_milliwatts; /* power drawn, and the limit */
};
void nvml_sensors(nvmlDevice_t d, struct nvml_sensors *s);

/* The versions of the node's driver, of NVML and of the CUDA driver API
 * ("580.65.06", "13.580.65.06", "13.0"); "" for one NVML cannot say. */
struct nvml_versions {
    char driver[80], nvml[80], cuda[16];
};
void nvml_versions(struct nvml_versions *v);

#endif
