/* NVML as the test programs reach it: libnvidia-ml.so.1 found with dlopen
 * and its functions with dlsym, as monitors and frameworks find them (the
 * simulated one, on the tests' library path, unless a test says otherwise).
 * Every test that reads NVML's own figures opens it this way. */
#ifndef VRAM_TESTS_NVML_TEST_H
#define VRAM_TESTS_NVML_TEST_H

#include "../src/cuda/nvml_abi.h"
#include "check.h"

#include <dlfcn.h>

static void *nvml_test_lib;

/* NVML's function `name`, or NULL where this libnvidia-ml lacks it. */
static inline void *nvml_test_symbol(const char *name)
{
    if (!nvml_test_lib)
        nvml_test_lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    CHECK(nvml_test_lib != NULL);
    return dlsym(nvml_test_lib, name);
}
/* The function, typed as nvml_abi.h's PFN_<name>, which must exist. */
#define NVML_FUNCTION(name) ((PFN_##name)nvml_test_function(#name))
static inline void *nvml_test_function(const char *name)
{
    void *f = nvml_test_symbol(name);
    if (!f)
        fprintf(stderr, "libnvidia-ml.so.1 has no %s\n", name);
    CHECK(f != NULL);
    return f;
}

/* Initialises NVML and returns the handle of the device at `index`. */
static inline nvmlDevice_t nvml_test_device(unsigned index)
{
    CHECK(NVML_FUNCTION(nvmlInit_v2)() == NVML_SUCCESS);
    nvmlDevice_t dev;
    CHECK(NVML_FUNCTION(nvmlDeviceGetHandleByIndex_v2)(index, &dev) == NVML_SUCCESS);
    return dev;
}

#endif
