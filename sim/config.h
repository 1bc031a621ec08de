/* The simulated machine, as both simulated libraries (CUDA and NVML) see
 * it: device sizes from VRAM_SIM_DEVICES, the device profile (an H100 80GB
 * SXM5's public figures), stable UUIDs and PCI addresses so that every
 * process and both libraries recognise the same device, and the driver's
 * versions. */
#ifndef VRAM_SIM_CONFIG_H
#define VRAM_SIM_CONFIG_H

#include <stdbool.h>
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
/* VRAM_SIM_DRIVER=615 makes it an R615 driver, whose NVML has per-cgroup
 * memory limits (nvmlDeviceSetMemoryLimits_v1, limits.h). Its version is
 * invented (no R615 driver has been seen here): "615.23.04". The API stays
 * CUDA 13.0's (cuDriverGetVersion 13000), as nothing the simulator models
 * needs a later one. */
#define SIM_DRIVER_DEFAULT 580
#define SIM_DRIVER_R615 615
#define SIM_DRIVER_R615_VERSION_TEXT "615.23.04"
#define SIM_NVML_R615_VERSION_TEXT "13.615.23.04"
/* Device memory a CUDA context takes on the profile, unless
 * VRAM_SIM_CONTEXT_SIZE says otherwise: 518 MiB, measured on an H100 80GB
 * HBM3 with driver 580.159.04 and CUDA 13.0 on 2026-11-26 (issue 21): a
 * budget of 4,096 MiB left 3,578 MiB to the CUDA runtime, the driver API,
 * PyTorch and CuPy alike, and `vram run` measured the primary context at
 * 518 MiB through NVML's per-process figure. (Before that measurement the
 * profile interpolated 392 MiB from llama.cpp PR #23604's two GPUs.) */
#define SIM_CONTEXT_SIZE_DEFAULT (518ull << 20)
/* Device memory the driver takes on its own when a module's first kernel
 * is launched: with CUDA_MODULE_LOADING=LAZY (the default since CUDA 12.2)
 * a module's code reaches the device only then, outside every call that
 * loads or allocates; with EAGER it is taken at the module's load. The
 * code goes into each device's code memory, which grows in 2 MiB steps:
 * on the H100 of 2026-11-26, 200 tiny kernels launched for the first time
 * took one step (NVML's figure 545,259,520 -> 547,356,672 bytes). The
 * simulator puts each module's image there (its code, as far as the
 * simulator knows), so that a ResNet-like program of some fifty modules
 * of 2 MiB, each launched, holds about 100 MiB more in NVML's
 * per-process figure than it allocated and loaded: ResNet-50 there held
 * 89 MiB more in nvidia-smi than vram counted (4,320 MiB against 4,231),
 * and 88 MiB more than its 3 GiB budget. */
#define SIM_CODE_STEP (2ull << 20)
/* A stream-ordered pool grows as src/cuda/granularity.h's pool_growth
 * says (32 MiB chunks, measured on the H100 and H200); a 12-byte
 * cudaMallocAsync left 33,554,432 bytes reserved in CuPy PR #5177 too: a
 * pool holds its live allocations in whole chunks. */

/* Its clocks, in MHz, as nvidia-smi -q -d CLOCK,SUPPORTED_CLOCKS shows them
 * on an H100 80GB HBM3: HBM3 at 2619; graphics (and SM) from 1980 down to
 * 345 in steps of 15, the list NVML gives for that memory clock (110 of
 * them); video at most 1755; the application clocks, and their defaults,
 * the highest pair. */
#define SIM_CLOCK_MEM 2619
#define SIM_CLOCK_GRAPHICS_MAX 1980
#define SIM_CLOCK_GRAPHICS_MIN 345
#define SIM_CLOCK_GRAPHICS_STEP 15
#define SIM_CLOCK_VIDEO_MAX 1755

/* Fills total[] (SIM_MAX_DEVICES entries) with each device's memory as CUDA
 * sees it and returns the device count, or -1 after printing what is wrong
 * with VRAM_SIM_DEVICES. */
int sim_config_devices(uint64_t *total);
/* What NVML says the driver reserves on each device, beyond CUDA's total:
 * the profile's on its own device; none on devices VRAM_SIM_DEVICES sizes
 * (a size given is the whole of what NVML and CUDA both count). */
uint64_t sim_config_reserved(void);
/* VRAM_SIM_POOL_CHUNK (a whole number of 2 MiB pages), or the H100's and
 * H200's 32 MiB (POOL_CHUNK); -1 after printing what is wrong. */
int sim_config_pool_chunk(uint64_t *bytes);
/* VRAM_SIM_CONTEXT_SIZE, or the profile's; -1 after printing what is wrong. */
int sim_config_context_size(uint64_t *bytes);
/* CUDA_MODULE_LOADING: *lazy true for LAZY (and when unset, the driver's
 * default), false for EAGER; -1 after printing what is wrong. */
int sim_config_module_loading(bool *lazy);
/* VRAM_SIM_DRIVER: the driver series, SIM_DRIVER_DEFAULT or
 * SIM_DRIVER_R615; -1 after printing what is wrong. */
int sim_config_driver(void);
/* VRAM_SIM_ACCOUNTING: whether NVML's per-process accounting is on (as
 * root's `nvidia-smi -am 1` sets it on a GPU; off by default, as on a new
 * H100): 1 on, 0 off, -1 after printing what is wrong. */
int sim_config_accounting(void);
void sim_config_uuid(int phys, unsigned char out[16]);
/* "GPU-5a1d0e5a-a000-4000-8000-000000000000" */
void sim_config_uuid_text(int phys, char out[48]);
/* Where the devices sit on the host, from the host's own topology (sysfs),
 * so that NVML's CPU and memory affinity name CPUs and NUMA nodes that
 * exist here, as a real driver's name the ones its GPU's PCI slot is near:
 * the devices are spread over the NUMA nodes that have CPUs, in order, as
 * on an eight-GPU board (with two nodes, the first half of the devices on
 * the first). On a machine with one node every device is near all its
 * CPUs. */
#define SIM_CPU_WORDS 64 /* bitmasks of 64 unsigned longs: 4,096 CPUs or nodes */
/* The NUMA node of physical device `phys` of `count`; -1 on a kernel
 * without NUMA (no /sys/devices/system/node), where every online CPU is
 * near it. */
int sim_config_device_node(int phys, int count);
/* The online CPUs of `node` (-1: all of them), or with `socket` of the
 * sockets its CPUs are on, as a bitmask (CPU i: bit i % 64 of word i / 64);
 * -1 when sysfs cannot say. */
int sim_config_cpus(int node, bool socket, unsigned long set[SIM_CPU_WORDS]);
/* The NUMA nodes that are `node` (-1: node 0, the only one there is), or
 * with `socket` the nodes with CPUs on its sockets, as a bitmask; -1 when
 * sysfs cannot say. */
int sim_config_nodes(int node, bool socket, unsigned long set[SIM_CPU_WORDS]);

/* The PCI bus number of physical device `phys` (domain 0, device 0,
 * function 0), spread as on an eight-GPU board. */
int sim_config_pci_bus(int phys);

#endif
