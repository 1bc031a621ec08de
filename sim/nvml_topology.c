/* nvml_topology: where the simulated devices sit on the host, as Slurm's
 * gpu/nvml plugin (AutoDetect=nvml), hwloc and schedulers ask: the CPUs
 * and NUMA nodes near each device, from the host's own topology
 * (config.h: the devices spread over the NUMA nodes that have CPUs), so
 * that what NVML names exists here. A real driver reads the same from the
 * PCI slot its GPU is in.
 *
 * nvmlDeviceGetNumaNodeId is for platforms where the GPU's memory is a
 * NUMA node of its own (Grace Hopper and later, coherent): on an x86 host
 * the driver answers NVML_ERROR_NOT_SUPPORTED (driver 580 on eight L4s,
 * kubernetes-sigs/dra-driver-nvidia-gpu#1165), and so does the simulated
 * H100 SXM5; its host node is in nvmlDeviceGetMemoryAffinity.
 *
 * NVLink: the measured H100 (one GPU, driver 580) answered NOT_SUPPORTED
 * for every link, which Slurm reads as "no links" (nvml_stubs.c). */
#include "nvml_sim.h"
#include "config.h"

#include <string.h>

enum { SCOPE_NODE = 0, SCOPE_SOCKET = 1 }; /* nvmlAffinityScope_t */

/* A bitmask of SIM_CPU_WORDS words into the caller's `size` words: what
 * does not fit is left out, what the mask lacks is 0. */
static void put_mask(unsigned long *out, unsigned size, const unsigned long mask[SIM_CPU_WORDS])
{
    for (unsigned i = 0; i < size; i++)
        out[i] = i < SIM_CPU_WORDS ? mask[i] : 0;
}

/* The checks every affinity query makes (nvml.h: a zero size, no array or
 * an unknown scope is INVALID_ARGUMENT). */
static nvmlReturn_t affinity_args(nvmlDevice_t d, unsigned size, const unsigned long *set,
                                  nvmlAffinityScope_t scope)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc == NVML_SUCCESS && (size == 0 || !set || scope > SCOPE_SOCKET))
        rc = NVML_ERROR_INVALID_ARGUMENT;
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t d, unsigned int size,
                                                        unsigned long *set,
                                                        nvmlAffinityScope_t scope)
{
    unsigned long cpus[SIM_CPU_WORDS];
    nvmlReturn_t rc = affinity_args(d, size, set, scope);
    if (rc != NVML_SUCCESS)
        return rc;
    if (sim_config_cpus(d->node, scope == SCOPE_SOCKET, cpus) != 0)
        return NVML_ERROR_UNKNOWN; /* no sysfs to read the host from */
    put_mask(set, size, cpus);
    return NVML_SUCCESS;
}

/* The ideal CPUs: those of the device's node. */
EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t d, unsigned int size, unsigned long *set)
{
    return nvmlDeviceGetCpuAffinityWithinScope(d, size, set, SCOPE_NODE);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t d, unsigned int size,
                                                unsigned long *set, nvmlAffinityScope_t scope)
{
    unsigned long nodes[SIM_CPU_WORDS];
    nvmlReturn_t rc = affinity_args(d, size, set, scope);
    if (rc != NVML_SUCCESS)
        return rc;
    if (sim_config_nodes(d->node, scope == SCOPE_SOCKET, nodes) != 0)
        return NVML_ERROR_UNKNOWN;
    put_mask(set, size, nodes);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t d, unsigned int *node)
{
    return nvml_sim_not_supported(d, node);
}
