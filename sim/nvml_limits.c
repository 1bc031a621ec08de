/* nvml_limits: nvmlDeviceSetMemoryLimits_v1 and nvmlDeviceGetMemoryLimits_v1,
 * the per-cgroup device-memory limits of driver R615
 * (src/cuda/nvml_limits.h), over the simulated machine's limits (limits.h),
 * which the simulated driver enforces on every charge.
 *
 * They are exported by hand, beside the generated entry points: the list
 * (nvml_entry_points.inc, nvml_api.h) is generated from driver 580's nvml.h
 * (NVML API 13), which predates them, and no R615 header has been seen
 * here to generate from; tests/test_nvml_symbols.sh names them as the
 * library's only functions beyond that list. The library's symbols cannot
 * follow the profile, so under the default one (driver 580, which has no
 * such functions) they answer NVML_ERROR_FUNCTION_NOT_FOUND, which callers
 * that found them with dlsym treat as absent; VRAM_SIM_DRIVER=615 makes
 * them work.
 *
 * The reference's errors where it gives them: NO_PERMISSION for Set but by
 * root; a nameSpace naming nothing is NOT_FOUND, one that is not a
 * cgroup v2 directory (or not an absolute path) INVALID_ARGUMENT, as is a
 * soft limit above the hard one. Judged here: a hard limit below what the
 * cgroup holds already is accepted (its further charges fail), and Get of
 * a cgroup with no limits answers soft 0 and hard
 * NVML_DEVICE_MEMORY_LIMIT_MAX, the values that clear them.
 */
#include "../src/cuda/nvml_limits.h"
#include "config.h"
#include "limits.h"
#include "nvml_sim.h"

#include <unistd.h>

_Static_assert(NVML_DEVICE_MEMORY_LIMIT_MAX == LIMITS_NONE, "one value means no hard limit");

static nvmlReturn_t check(nvmlDevice_t d, const void *limits, const char *name_space)
{
    nvmlReturn_t rc = nvml_sim_check(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (nvml_sim_driver() != SIM_DRIVER_R615)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    return limits && name_space ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

static nvmlReturn_t answer(enum limits_result rc)
{
    switch (rc) {
    case LIMITS_OK: return NVML_SUCCESS;
    case LIMITS_MISSING: return NVML_ERROR_NOT_FOUND;
    case LIMITS_NOT_CGROUP: return NVML_ERROR_INVALID_ARGUMENT;
    case LIMITS_FULL: return NVML_ERROR_INSUFFICIENT_RESOURCES;
    default: return NVML_ERROR_UNKNOWN;
    }
}

EXPORT nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t d, nvmlSetMemoryLimits_v1_t *limits)
{
    nvmlReturn_t rc = check(d, limits, limits ? limits->nameSpace : NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (limits->softLimit > limits->hardLimit)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (geteuid() != 0)
        return NVML_ERROR_NO_PERMISSION;
    return answer(limits_set(d->index, limits->nameSpace, limits->softLimit, limits->hardLimit));
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryLimits_v1(nvmlDevice_t d, nvmlGetMemoryLimits_v1_t *limits)
{
    nvmlReturn_t rc = check(d, limits, limits ? limits->nameSpace : NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    uint64_t soft, hard, used;
    rc = answer(limits_get(d->index, limits->nameSpace, &soft, &hard, &used));
    if (rc == NVML_SUCCESS) {
        limits->softLimit = soft;
        limits->hardLimit = hard;
        limits->currentUsed = used;
    }
    return rc;
}

/* The exports have the declared types (nvml_limits.h's PFN_ types). */
#define SAME_TYPE(fn) _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), PFN_##fn), #fn)
SAME_TYPE(nvmlDeviceSetMemoryLimits_v1);
SAME_TYPE(nvmlDeviceGetMemoryLimits_v1);
