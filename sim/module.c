/* module: modules, libraries, the JIT linker, functions and kernels.
 *
 * Code loads as on a GPU: a module costs its image's size in device memory
 * (charged like an allocation, from load to unload), and its functions are
 * found by name. Nothing runs: every launch returns
 * CUDA_ERROR_NOT_SUPPORTED and says so in one line under VRAM_LOG.
 *
 * An image is PTX (text), a cubin (ELF) or a fatbinary; its size is read
 * from its own header, as the driver must. A name is found when the image
 * holds it (a compressed fatbinary hides its names, so nothing is found in
 * one).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../src/cuda/granularity.h"
#include "sim.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct CUfunc_st {
    struct CUmod_st *mod;
    struct CUfunc_st *next; /* the module's functions */
    char name[];
};

struct CUmod_st {
    int dev;
    uint64_t charge;
    size_t size;
    unsigned char *image; /* our copy, to find names in */
    pthread_mutex_t mu;
    struct CUfunc_st *functions; /* handed out; valid until the module is unloaded */
};

struct CUkern_st {
    struct CUlib_st *lib;
    CUfunction fn;
    struct CUkern_st *next;
};

struct CUlib_st {
    CUmodule mod;
    struct CUkern_st *kernels;
};

struct CUlinkState_st {
    unsigned char *data;
    size_t size;
};

#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_WRAPPER_MAGIC 0x466243B1u

static uint32_t u32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t u16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint64_t u64(const unsigned char *p) { return u32(p) | (uint64_t)u32(p + 4) << 32; }

/* The size of an image, or 0 when it is none of the kinds a driver loads. */
static size_t image_size(const void *image, const void **start)
{
    const unsigned char *p = image;
    *start = image;
    if (u32(p) == FATBIN_WRAPPER_MAGIC) { /* __fatBinC_Wrapper_t: magic, version, data */
        const void *data;
        memcpy(&data, p + 8, sizeof data);
        return data ? image_size(data, start) : 0;
    }
    if (u32(p) == FATBIN_MAGIC) /* magic, version, header size, fat size */
        return (size_t)u16(p + 6) + (size_t)u64(p + 8);
    if (p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F' && p[4] == 2) {
        uint64_t phoff = u64(p + 0x20), shoff = u64(p + 0x28);
        uint64_t ph = phoff + (uint64_t)u16(p + 0x36) * u16(p + 0x38);
        uint64_t sh = shoff + (uint64_t)u16(p + 0x3a) * u16(p + 0x3c);
        return (size_t)(ph > sh ? ph : sh);
    }
    /* PTX: text, NUL-terminated. */
    size_t n = 0;
    while (p[n]) {
        if (!isprint(p[n]) && !isspace(p[n]))
            return 0;
        n++;
    }
    return n ? n + 1 : 0;
}

static CUresult load(CUmodule *out, const void *image, size_t size_hint)
{
    int dev;
    CUresult rc = sim_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!out || !image)
        return CUDA_ERROR_INVALID_VALUE;
    const void *start;
    size_t size = size_hint ? size_hint : image_size(image, &start);
    if (size_hint)
        start = image;
    if (!size)
        return CUDA_ERROR_INVALID_IMAGE;
    CUmodule m = calloc(1, sizeof *m);
    unsigned char *copy = m ? malloc(size) : NULL;
    if (!copy) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(copy, start, size);
    uint64_t charge = device_charge(size);
    if ((rc = sim_charge(dev, charge)) != CUDA_SUCCESS) {
        free(copy);
        free(m);
        return rc;
    }
    *m = (struct CUmod_st){dev, charge, size, copy};
    pthread_mutex_init(&m->mu, NULL);
    *out = m;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image) { return load(module, image, 0); }

EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                   CUjit_option *options, void **optionValues)
{
    (void)numOptions, (void)options, (void)optionValues;
    return load(module, image, 0);
}

EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    return load(module, fatCubin, 0);
}

/* Reads a whole file; NULL (and errno) when it cannot. */
static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            unsigned char *b = realloc(buf, cap = cap ? cap * 2 : 65536);
            if (!b)
                break;
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    *size = n;
    return buf;
}

EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!module || !fname)
        return CUDA_ERROR_INVALID_VALUE;
    size_t size;
    unsigned char *data = read_file(fname, &size);
    if (!data)
        return CUDA_ERROR_FILE_NOT_FOUND;
    rc = size ? load(module, data, size) : CUDA_ERROR_INVALID_IMAGE;
    free(data);
    return rc;
}

EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!hmod)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_uncharge(hmod->dev, hmod->charge);
    for (struct CUfunc_st *f = hmod->functions, *next; f; f = next) {
        next = f->next;
        free(f);
    }
    pthread_mutex_destroy(&hmod->mu);
    free(hmod->image);
    free(hmod);
    return CUDA_SUCCESS;
}

/* The image holds `name` as a symbol: followed by a NUL (a string table),
 * or by '(' or white space (a PTX entry). */
static bool holds(CUmodule m, const char *name)
{
    size_t n = strlen(name);
    if (!n || n > m->size)
        return false;
    for (size_t i = 0; i + n <= m->size; i++) {
        if (m->image[i] != (unsigned char)name[0] || memcmp(m->image + i, name, n) != 0)
            continue;
        unsigned char before = i ? m->image[i - 1] : 0, after = i + n < m->size ? m->image[i + n] : 0;
        bool starts = !before || isspace(before) || before == '.';
        bool ends = !after || after == '(' || isspace(after);
        if (starts && ends)
            return true;
    }
    return false;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!hfunc || !hmod || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!holds(hmod, name))
        return CUDA_ERROR_NOT_FOUND;
    /* One handle per name, as the driver gives. */
    pthread_mutex_lock(&hmod->mu);
    CUfunction f = hmod->functions;
    while (f && strcmp(f->name, name) != 0)
        f = f->next;
    if (!f && (f = malloc(sizeof *f + strlen(name) + 1))) {
        f->mod = hmod;
        strcpy(f->name, name);
        f->next = hmod->functions;
        hmod->functions = f;
    }
    pthread_mutex_unlock(&hmod->mu);
    if (!f)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *hfunc = f;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    (void)dptr, (void)bytes;
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!hmod || !name)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_NOT_FOUND; /* globals' storage is not modelled */
}

EXPORT CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!count || !mod)
        return CUDA_ERROR_INVALID_VALUE;
    *count = 0; /* not enumerated: functions are found by name */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!hmod || !hfunc)
        return CUDA_ERROR_INVALID_VALUE;
    *hmod = hfunc->mod;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!name || !hfunc)
        return CUDA_ERROR_INVALID_VALUE;
    *name = hfunc->name;
    return CUDA_SUCCESS;
}

/* -------------------------------------------------------------- libraries */

/* A library is a module, loaded by `loader` from `from`. */
static CUresult library(CUlibrary *library, const void *from,
                        CUresult (*loader)(CUmodule *, const void *))
{
    if (!library)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    CUlibrary l = calloc(1, sizeof *l);
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = loader(&l->mod, from);
    if (rc != CUDA_SUCCESS) {
        free(l);
        return rc;
    }
    *library = l;
    return CUDA_SUCCESS;
}

static CUresult load_file(CUmodule *m, const void *path) { return cuModuleLoad(m, path); }

EXPORT CUresult cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jitOptions,
                                  void **jitOptionsValues, unsigned int numJitOptions,
                                  CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                  unsigned int numLibraryOptions)
{
    (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
    (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
    return library(lib, code, cuModuleLoadData);
}

EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *lib, const char *fileName, CUjit_option *jitOptions,
                                      void **jitOptionsValues, unsigned int numJitOptions,
                                      CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                      unsigned int numLibraryOptions)
{
    (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
    (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
    return library(lib, fileName, load_file);
}

EXPORT CUresult cuLibraryUnload(CUlibrary library)
{
    if (!library)
        return sim_ready() ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = cuModuleUnload(library->mod);
    if (rc == CUDA_SUCCESS) {
        for (struct CUkern_st *k = library->kernels, *next; k; k = next) {
            next = k->next;
            free(k);
        }
        free(library);
    }
    return rc;
}

EXPORT CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
    if (!pMod || !library)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    *pMod = library->mod;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    if (!pKernel || !library)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    CUfunction f;
    CUresult rc = cuModuleGetFunction(&f, library->mod, name);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&library->mod->mu);
    CUkernel k = library->kernels;
    while (k && k->fn != f)
        k = k->next;
    if (!k && (k = malloc(sizeof *k))) {
        *k = (struct CUkern_st){library, f, library->kernels};
        library->kernels = k;
    }
    pthread_mutex_unlock(&library->mod->mu);
    if (!k)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pKernel = k;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    if (!pFunc || !kernel)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    *pFunc = kernel->fn;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
    if (!name || !hfunc)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    *name = hfunc->fn->name;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
    if (!pLib || !kernel)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    *pLib = kernel->lib;
    return CUDA_SUCCESS;
}

/* ----------------------------------------------------------------- linker */

EXPORT CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                                CUlinkState *stateOut)
{
    (void)numOptions, (void)options, (void)optionValues;
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!stateOut)
        return CUDA_ERROR_INVALID_VALUE;
    /* The output is a fatbinary header followed by every input. */
    CUlinkState s = calloc(1, sizeof *s);
    if (!s || !(s->data = calloc(1, 16))) {
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s->size = 16;
    *stateOut = s;
    return CUDA_SUCCESS;
}

static CUresult link_add(CUlinkState state, const void *data, size_t size)
{
    unsigned char *d = realloc(state->data, state->size + size);
    if (!d)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(d + state->size, data, size);
    state->data = d;
    state->size += size;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                                 const char *name, unsigned int numOptions, CUjit_option *options,
                                 void **optionValues)
{
    (void)type, (void)name, (void)numOptions, (void)options, (void)optionValues;
    if (!state || !data || !size)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return link_add(state, data, size);
}

EXPORT CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
                                 unsigned int numOptions, CUjit_option *options, void **optionValues)
{
    (void)type, (void)numOptions, (void)options, (void)optionValues;
    if (!state || !path)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    size_t size;
    unsigned char *data = read_file(path, &size);
    if (!data)
        return CUDA_ERROR_FILE_NOT_FOUND;
    CUresult rc = link_add(state, data, size);
    free(data);
    return rc;
}

EXPORT CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    if (!state || !cubinOut || !sizeOut)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    unsigned char *h = state->data;
    uint64_t fat = state->size - 16;
    uint32_t magic = FATBIN_MAGIC;
    memcpy(h, &magic, 4);
    h[4] = 1, h[5] = 0, h[6] = 16, h[7] = 0;
    memcpy(h + 8, &fat, 8);
    *cubinOut = state->data;
    *sizeOut = state->size;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLinkDestroy(CUlinkState state)
{
    if (!state)
        return sim_ready() ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_NOT_INITIALIZED;
    free(state->data);
    free(state);
    return CUDA_SUCCESS;
}

/* --------------------------------------------------------------- launches */

static CUresult no_kernels(const char *call, const char *name)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    sim_log(2, "%s(%s): the simulated GPU runs no kernels; CUDA_ERROR_NOT_SUPPORTED", call,
            name ? name : "?");
    return CUDA_ERROR_NOT_SUPPORTED;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                               unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                               unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                               void **kernelParams, void **extra)
{
    (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
    (void)blockDimZ, (void)sharedMemBytes, (void)hStream, (void)kernelParams, (void)extra;
    return no_kernels("cuLaunchKernel", f ? f->name : NULL);
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                 void **extra)
{
    (void)config, (void)kernelParams, (void)extra;
    return no_kernels("cuLaunchKernelEx", f ? f->name : NULL);
}

EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                          unsigned int gridDimZ, unsigned int blockDimX,
                                          unsigned int blockDimY, unsigned int blockDimZ,
                                          unsigned int sharedMemBytes, CUstream hStream,
                                          void **kernelParams)
{
    (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
    (void)blockDimZ, (void)sharedMemBytes, (void)hStream, (void)kernelParams;
    return no_kernels("cuLaunchCooperativeKernel", f ? f->name : NULL);
}

SAME_TYPE(cuModuleLoadData);
SAME_TYPE(cuModuleLoadDataEx);
SAME_TYPE(cuModuleLoadFatBinary);
SAME_TYPE(cuModuleLoad);
SAME_TYPE(cuModuleUnload);
SAME_TYPE(cuModuleGetFunction);
SAME_TYPE(cuModuleGetGlobal_v2);
SAME_TYPE(cuModuleGetFunctionCount);
SAME_TYPE(cuFuncGetModule);
SAME_TYPE(cuFuncGetName);
SAME_TYPE(cuLibraryLoadData);
SAME_TYPE(cuLibraryLoadFromFile);
SAME_TYPE(cuLibraryUnload);
SAME_TYPE(cuLibraryGetModule);
SAME_TYPE(cuLibraryGetKernel);
SAME_TYPE(cuKernelGetFunction);
SAME_TYPE(cuKernelGetName);
SAME_TYPE(cuKernelGetLibrary);
SAME_TYPE(cuLinkCreate_v2);
SAME_TYPE(cuLinkAddData_v2);
SAME_TYPE(cuLinkAddFile_v2);
SAME_TYPE(cuLinkComplete);
SAME_TYPE(cuLinkDestroy);
SAME_TYPE(cuLaunchKernel);
SAME_TYPE(cuLaunchKernelEx);
SAME_TYPE(cuLaunchCooperativeKernel);
