#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "driver.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The CUDA version we ask entry points for: 12.0, whose ABI cuda_abi.h
 * declares. */
#define REQUESTED_CUDA_VERSION 12000

static const struct {
    const char *base;      /* the name cuGetProcAddress takes */
    const char *versioned; /* the exported symbol of that version */
    size_t offset;
} entries[] = {
#define E(base, versioned, field) {base, versioned, offsetof(struct cuda_driver, field)}
    E("cuInit", "cuInit", cuInit),
    E("cuDriverGetVersion", "cuDriverGetVersion", cuDriverGetVersion),
    E("cuGetErrorName", "cuGetErrorName", cuGetErrorName),
    E("cuDeviceGetCount", "cuDeviceGetCount", cuDeviceGetCount),
    E("cuDeviceGet", "cuDeviceGet", cuDeviceGet),
    E("cuDeviceGetName", "cuDeviceGetName", cuDeviceGetName),
    E("cuDeviceGetUuid", "cuDeviceGetUuid", cuDeviceGetUuid),
    E("cuDeviceTotalMem", "cuDeviceTotalMem_v2", cuDeviceTotalMem),
    E("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain),
    E("cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", cuDevicePrimaryCtxRelease),
    E("cuCtxPushCurrent", "cuCtxPushCurrent_v2", cuCtxPushCurrent),
    E("cuCtxPopCurrent", "cuCtxPopCurrent_v2", cuCtxPopCurrent),
    E("cuMemAlloc", "cuMemAlloc_v2", cuMemAlloc),
    E("cuMemFree", "cuMemFree_v2", cuMemFree),
    E("cuMemGetInfo", "cuMemGetInfo_v2", cuMemGetInfo),
    E("cuEventCreate", "cuEventCreate", cuEventCreate),
    E("cuEventDestroy", "cuEventDestroy_v2", cuEventDestroy),
    E("cuEventRecord", "cuEventRecord", cuEventRecord),
    E("cuEventQuery", "cuEventQuery", cuEventQuery),
    E("cuEventSynchronize", "cuEventSynchronize", cuEventSynchronize),
#undef E
};

void driver_simulated_hint(char *out, size_t n)
{
    /* The file this code is in: libvram.so, the interposer, or a program
     * linked with libvram.a; a build tree has sim/ beside each. */
    Dl_info info;
    char dir[4096] = "", sim[4200];
    if (dladdr((void *)driver_simulated_hint, &info) && info.dli_fname &&
        info.dli_fname[0] == '/') {
        snprintf(dir, sizeof dir, "%s", info.dli_fname);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
    } else {
        ssize_t len = readlink("/proc/self/exe", dir, sizeof dir - 1);
        dir[len > 0 ? len : 0] = 0;
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
    }
    snprintf(sim, sizeof sim, "%s/sim/libcuda.so.1", dir);
    /* Quoted for a shell where the path needs it. */
    bool quote = strpbrk(dir, " \t\"'$`\\;&|<>()*?[]!#~") != NULL && !strchr(dir, '\'');
    if (dir[0] && access(sim, R_OK) == 0)
        snprintf(out, n, "On a machine without a GPU, put vram's simulated driver first: "
                         "LD_LIBRARY_PATH=%s%s/sim%s", quote ? "'" : "", dir, quote ? "'" : "");
    else
        snprintf(out, n, "On a machine without a GPU, vram's simulated driver can stand in: it "
                         "is built with vram (make build), into the folder sim of the build; "
                         "put that folder first in LD_LIBRARY_PATH");
}

int driver_load(struct cuda_driver *cu, char *err, size_t errlen)
{
    memset(cu, 0, sizeof *cu);
    const char *name = getenv("VRAM_CUDA_LIBRARY");
    if (!name || !*name)
        name = "libcuda.so.1";
    cu->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!cu->lib) {
        char why[512], hint[4400];
        snprintf(why, sizeof why, "%s", dlerror());
        driver_simulated_hint(hint, sizeof hint);
        snprintf(err, errlen, "cannot load the CUDA driver %s (%s). %s", name, why, hint);
        return -1;
    }
    PFN_cuGetProcAddress_v2 gpa2 = (PFN_cuGetProcAddress_v2)dlsym(cu->lib, "cuGetProcAddress_v2");
    PFN_cuGetProcAddress gpa = (PFN_cuGetProcAddress)dlsym(cu->lib, "cuGetProcAddress");
    for (size_t i = 0; i < sizeof entries / sizeof *entries; i++) {
        void *fn = NULL;
        if (gpa2)
            gpa2(entries[i].base, &fn, REQUESTED_CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, NULL);
        else if (gpa)
            gpa(entries[i].base, &fn, REQUESTED_CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT);
        if (!fn)
            fn = dlsym(cu->lib, entries[i].versioned);
        if (!fn) {
            snprintf(err, errlen, "the CUDA driver %s has no %s: it is too old for vram", name,
                     entries[i].versioned);
            dlclose(cu->lib);
            cu->lib = NULL;
            return -1;
        }
        memcpy((char *)cu + entries[i].offset, &fn, sizeof fn);
    }
    CUresult rc = cu->cuInit(0);
    if (rc != CUDA_SUCCESS) {
        char buf[64];
        snprintf(err, errlen, "the CUDA driver %s failed to initialise: cuInit returned %s", name,
                 driver_error_text(cu, rc, buf));
        dlclose(cu->lib);
        cu->lib = NULL;
        return -1;
    }
    return 0;
}

void driver_unload(struct cuda_driver *cu)
{
    /* The library stays loaded: the driver may have threads of its own, and
     * unloading a CUDA driver under them is not supported. */
    memset(cu, 0, sizeof *cu);
}

const char *driver_error_text(const struct cuda_driver *cu, CUresult rc, char buf[64])
{
    const char *name = NULL;
    if (cu && cu->cuGetErrorName)
        cu->cuGetErrorName(rc, &name);
    snprintf(buf, 64, "%s (%d)", name ? name : "CUDA error", rc);
    return buf;
}
