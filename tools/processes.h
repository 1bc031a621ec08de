/* processes: who holds memory on a GPU, as NVML says (the real NVML on a
 * GPU node, the simulated one here), and who they are, as /proc says.
 *
 * For `vram devices`, which shows it as nvidia-smi's process table does.
 * NVML is dlopen()ed, never linked; it creates no CUDA context, so the
 * listing does not show itself.
 */
#ifndef VRAM_PROCESSES_H
#define VRAM_PROCESSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gpu_memory {
    uint64_t total, used, free;
};

struct gpu_process {
    unsigned pid;
    bool used_known; /* NVML may not know (NVML_VALUE_NOT_AVAILABLE) */
    uint64_t used;
};

/* Loads and starts NVML (libnvidia-ml.so.1). 0, or -1 with the reason. */
int processes_open(char *err, size_t n);
void processes_close(void);

/* The memory of the GPU with this UUID. 0, or -1 with the reason. */
int processes_memory(const char *uuid, struct gpu_memory *m, char *err, size_t n);

/* The compute processes holding memory on the GPU with this UUID, in a
 * malloc()ed array (the caller frees it): their count, or -1 with the
 * reason. */
int processes_on(const char *uuid, struct gpu_process **out, char *err, size_t n);

/* Who a process is: its real uid and user name, and its command line
 * (arguments joined by spaces). Unknown parts (a process gone, or hidden
 * by /proc's hidepid) are "-" and uid -1. */
struct process_identity {
    long uid;
    char user[64];
    char command[256];
};
void process_identify(unsigned pid, struct process_identity *id);

#endif
