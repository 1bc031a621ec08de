/* gpus: what NVML says about the node's GPUs, for the daemon.
 *
 * NVML is dlopen()ed (libnvidia-ml.so.1: the real one on a GPU node, the
 * simulated one in tests); without it the daemon learns devices from its
 * clients and cannot reconcile. */
#ifndef VRAM_GPUS_H
#define VRAM_GPUS_H

#include <stddef.h>
#include <stdint.h>

#define GPUS_MAX_PROCESSES 1024

/* 0 with the number of devices, or -1 with the reason in err. */
int gpus_open(const char *library, int *count, char *err, size_t errlen);
int gpus_device(int index, char *uuid, size_t uuid_len, uint64_t *total);
/* Processes using the device and their memory; the count, or -1. */
int gpus_processes(int index, unsigned *pids, uint64_t *used, int max);

#endif
