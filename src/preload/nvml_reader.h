/* nvml_reader: NVML as the interposer reads it for itself, to measure
 * what the device gives this process (footprint.h) and what the driver
 * holds beyond the charges (driver_memory.h).
 *
 * NVML is loaded for this at the first reading (never for a program that
 * makes no context), started with nvmlInit_v2, which the program's own
 * use of NVML counts beside ours, and kept loaded. Devices are the
 * program's CUDA ordinals, matched to NVML's by UUID. Any thread, any
 * time. Above real.h; below everything else.
 */
#ifndef VRAM_NVML_READER_H
#define VRAM_NVML_READER_H

#include "../cuda/nvml_pid.h"

#include <stdint.h>

struct nvml_process;

/* What NVML says this process holds on dev: 1 (listed, *bytes), 0 (not
 * listed: nothing held, or NVML cannot see this process), -1 (NVML cannot
 * say, or cannot name this process: nvml_reader_self). */
int nvml_reader_own(int dev, uint64_t *bytes);

/* The pid NVML lists this process under, and whether its list's pids are
 * this process's namespace's (src/cuda/nvml_pid.h): asked at each reading,
 * as vramd may say it later than NVML was loaded. */
struct nvml_pid_view nvml_reader_self(void);

/* NVML's list of the processes holding memory on dev, read whole: its
 * count and a malloc()ed array in *out, or -1 when NVML cannot say. */
int nvml_reader_list(int dev, struct nvml_process **out);

/* In a child after fork(). */
void nvml_reader_after_fork(void);

#endif
