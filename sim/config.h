/* The simulated machine's devices, as both simulated libraries (CUDA and
 * NVML) see them: sizes from VRAM_SIM_DEVICES, and stable UUIDs so that the
 * same device is recognised by every process and by both libraries. */
#ifndef VRAM_SIM_CONFIG_H
#define VRAM_SIM_CONFIG_H

#include <stdint.h>

/* Fills total[] (SIM_MAX_DEVICES entries) and returns the device count, or
 * -1 after printing what is wrong with VRAM_SIM_DEVICES. */
int sim_config_devices(uint64_t *total);
void sim_config_uuid(int dev, unsigned char out[16]);
/* "GPU-5a1d0e5a-a000-4000-8000-000000000000" */
void sim_config_uuid_text(int dev, char out[48]);

#endif
