/* module: modules, libraries, the JIT linker, functions and kernels.
 *
 * Code loads as on a GPU: a module costs its image's size in device memory
 * (charged like an allocation, from load to unload), and its functions are
 * found by name. Its code (its image's size again) goes into the device's
 * code memory, which grows in SIM_CODE_STEP steps (config.h), when its
 * first kernel is launched, as under CUDA_MODULE_LOADING=LAZY, the
 * driver's default: memory no loading or allocating call asked for, until
 * the module is unloaded; with EAGER at the load. Nothing runs:
 * every launch, the legacy ones (cuLaunch, cuLaunchGrid, set up by
 * cuFuncSetBlockShape and cuParamSet*) included, is accepted and does
 * nothing, and says so in one line under VRAM_LOG=debug.
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
#include "../src/cuda/module_image.h"
#include "config.h"
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
    uint64_t charge; /* the image */
    bool code;       /* its code is in the device's code memory */
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

/* Each device's code memory: what the modules' code holds in it, and what
 * it takes of the device (whole steps). */
static pthread_mutex_t code_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t code_used[SIM_MAX_DEVICES], code_taken[SIM_MAX_DEVICES];

static uint64_t code_steps(uint64_t bytes)
{
    return (bytes + SIM_CODE_STEP - 1) / SIM_CODE_STEP * SIM_CODE_STEP;
}

static CUresult code_in(int dev, uint64_t bytes)
{
    pthread_mutex_lock(&code_mu);
    uint64_t need = code_steps(code_used[dev] + bytes);
    CUresult rc = need > code_taken[dev] ? sim_charge(dev, need - code_taken[dev]) : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS) {
        code_used[dev] += bytes;
        if (need > code_taken[dev])
            code_taken[dev] = need;
    }
    pthread_mutex_unlock(&code_mu);
    return rc;
}

static void code_out(int dev, uint64_t bytes)
{
    pthread_mutex_lock(&code_mu);
    code_used[dev] -= bytes;
    uint64_t keep = code_steps(code_used[dev]);
    sim_uncharge(dev, code_taken[dev] - keep);
    code_taken[dev] = keep;
    pthread_mutex_unlock(&code_mu);
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
    if (!sim_lazy_loading() && (rc = code_in(dev, size)) != CUDA_SUCCESS) {
        sim_uncharge(dev, charge);
        free(copy);
        free(m);
        return rc;
    }
    *m = (struct CUmod_st){dev, charge, !sim_lazy_loading(), size, copy};
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
    if (hmod->code)
        code_out(hmod->dev, hmod->size);
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

/* A launch of f: its module's code brought to the device at the first
 * (lazy loading), then nothing run. */
static CUresult launch(const char *call, CUfunction f)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    CUmodule m = f->mod;
    pthread_mutex_lock(&m->mu);
    /* As a GPU's driver does: a launch whose code finds no room fails. */
    if (!m->code && (rc = code_in(m->dev, m->size)) == CUDA_SUCCESS)
        m->code = true;
    pthread_mutex_unlock(&m->mu);
    if (rc == CUDA_SUCCESS)
        sim_log(4, "%s(%s): accepted; the simulated GPU runs no kernels", call, f->name);
    return rc;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                               unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                               unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                               void **kernelParams, void **extra)
{
    (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
    (void)blockDimZ, (void)sharedMemBytes, (void)hStream, (void)kernelParams, (void)extra;
    return launch("cuLaunchKernel", f);
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                 void **extra)
{
    (void)kernelParams, (void)extra;
    if (!config && sim_ready())
        return CUDA_ERROR_INVALID_VALUE;
    return launch("cuLaunchKernelEx", f);
}

EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                          unsigned int gridDimZ, unsigned int blockDimX,
                                          unsigned int blockDimY, unsigned int blockDimZ,
                                          unsigned int sharedMemBytes, CUstream hStream,
                                          void **kernelParams)
{
    (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
    (void)blockDimZ, (void)sharedMemBytes, (void)hStream, (void)kernelParams;
    return launch("cuLaunchCooperativeKernel", f);
}

/* The legacy execution control (deprecated since CUDA 4.0, still exported,
 * and what PyCUDA's prepared calls use): the block shape and parameters
 * are set on the function, then cuLaunch or cuLaunchGrid. Accepted; the
 * settings are not kept, since nothing runs. */

/* A legacy setter's arguments: a function, and nothing negative. */
static CUresult legacy_setting(CUfunction f, long long least)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    return least < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static long long least(long long a, long long b) { return a < b ? a : b; }

EXPORT CUresult cuFuncSetBlockShape(CUfunction hfunc, int x, int y, int z)
{
    return legacy_setting(hfunc, least(least(x, y), z) - 1);
}

EXPORT CUresult cuFuncSetSharedSize(CUfunction hfunc, unsigned int bytes)
{
    (void)bytes;
    return legacy_setting(hfunc, 0);
}

EXPORT CUresult cuParamSetSize(CUfunction hfunc, unsigned int numbytes)
{
    (void)numbytes;
    return legacy_setting(hfunc, 0);
}

EXPORT CUresult cuParamSeti(CUfunction hfunc, int offset, unsigned int value)
{
    (void)value;
    return legacy_setting(hfunc, offset);
}

EXPORT CUresult cuParamSetf(CUfunction hfunc, int offset, float value)
{
    (void)value;
    return legacy_setting(hfunc, offset);
}

EXPORT CUresult cuParamSetv(CUfunction hfunc, int offset, void *ptr, unsigned int numbytes)
{
    if (!ptr && numbytes && sim_ready())
        return CUDA_ERROR_INVALID_VALUE;
    return legacy_setting(hfunc, offset);
}

EXPORT CUresult cuLaunch(CUfunction f) { return launch("cuLaunch", f); }

EXPORT CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height)
{
    if (sim_ready() && (grid_width < 1 || grid_height < 1))
        return CUDA_ERROR_INVALID_VALUE;
    return launch("cuLaunchGrid", f);
}

EXPORT CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream hStream)
{
    if (sim_ready() && (grid_width < 1 || grid_height < 1))
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_ready() && !sim_stream(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    return launch("cuLaunchGridAsync", f);
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
SAME_TYPE(cuFuncSetBlockShape);
SAME_TYPE(cuFuncSetSharedSize);
SAME_TYPE(cuParamSetSize);
SAME_TYPE(cuParamSeti);
SAME_TYPE(cuParamSetf);
SAME_TYPE(cuParamSetv);
SAME_TYPE(cuLaunch);
SAME_TYPE(cuLaunchGrid);
SAME_TYPE(cuLaunchGridAsync);
