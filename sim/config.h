/* The simulated machine, as both simulated libraries (CUDA and NVML) see
 * it: device sizes from VRAM_SIM_DEVICES, the device profile (an H100 80GB
 * SXM5's public figures), stable UUIDs and PCI addresses so that every
 * process and both libraries recognise the same device, and the driver's
 * versions. */
#ifndef VRAM_SIM_CONFIG_H
#define VRAM_SIM_CONFIG_H

#include <stdint.h>

/* The profile. */
#define SIM_DEVICE_NAME "NVIDIA H100 80GB HBM3"
/* An H100 80GB HBM3's memory as measured (driver 580.159.04, 2026-11-26,
 * tests/gpu/facts.cu; issue 21 estimated the reserve at 483 MiB): NVML's
 * total is 81,559 MiB, of which nvmlDeviceGetMemoryInfo_v2 says 480 MiB
 * (503,316,480 bytes) are reserved for the driver and firmware; CUDA's
 * total (cuDeviceTotalMem, cuMemGetInfo) is exactly the rest, 81,079 MiB
 * (79.18 GiB). */
#define SIM_DEVICE_TOTAL (81559ull << 20)
#define SIM_DEVICE_RESERVED (480ull << 20)
#define SIM_PCI_VENDOR 0x10de
#define SIM_PCI_DEVICE 0x2330    /* GH100 [H100 SXM5 80GB] */
#define SIM_PCI_SUBSYSTEM 0x16c1 /* and NVIDIA's subsystem id for it */
#define SIM_SM_COUNT 132
/* The driver: CUDA 13.0's API, as a 580-series driver provides it. */
#define SIM_CUDA_VERSION 13000
#define SIM_DRIVER_VERSION_TEXT "580.65.06"
#define SIM_NVML_VERSION_TEXT "13.580.65.06"
/* Device memory a CUDA context takes on the profile, unless
 * VRAM_SIM_CONTEXT_SIZE says otherwise: 392 MiB. A bare context's cost
 * grows with the SM count; llama.cpp PR #23604 measured 107 MiB on an RTX
 * 4060 Ti (34 SMs) and 555 MiB on an RTX PRO 6000 Blackwell (188 SMs) for
 * a primary context and nothing else. The line through those two points at
 * the H100's 132 SMs, rounded to whole 2 MiB pages, is 392 MiB. */
#define SIM_CONTEXT_SIZE_DEFAULT (392ull << 20)

/* Fills total[] (SIM_MAX_DEVICES entries) with each device's memory as CUDA
 * sees it and returns the device count, or -1 after printing what is wrong
 * with VRAM_SIM_DEVICES. */
int sim_config_devices(uint64_t *total);
/* What NVML says the driver reserves on each device, beyond CUDA's total:
 * the profile's on its own device; none on devices VRAM_SIM_DEVICES sizes
 * (a size given is the whole of what NVML and CUDA both count). */
uint64_t sim_config_reserved(void);
/* VRAM_SIM_CONTEXT_SIZE, or the profile's; -1 after printing what is wrong. */
int sim_config_context_size(uint64_t *bytes);
void sim_config_uuid(int phys, unsigned char out[16]);
/* "GPU-5a1d0e5a-a000-4000-8000-000000000000" */
void sim_config_uuid_text(int phys, char out[48]);
/* The PCI bus number of physical device `phys` (domain 0, device 0,
 * function 0), spread as on an eight-GPU board. */
int sim_config_pci_bus(int phys);

#endif
