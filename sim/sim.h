/* What the simulated driver's parts share. Everything here is internal to
 * libcuda.so.1 (hidden); only EXPORT functions are the driver's API. */
#ifndef VRAM_SIM_H
#define VRAM_SIM_H

#include "../src/cuda/cuda_abi.h"

#include <stdbool.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

bool sim_ready(void);
/* The device of the calling thread's current context. */
CUresult sim_current_device(int *dev);
CUresult sim_check_device(CUdevice dev);
uint64_t sim_device_total(int dev);
/* Host address space standing in for device memory (pages exist once written). */
void *sim_map(size_t bytes);
void sim_unmap(void *p, size_t bytes);
/* Drops the state of families.c in a forked child. */
void sim_families_after_fork(void);

#endif
