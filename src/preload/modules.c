/* modules: code loaded on a device, charged to its budget.
 *
 * A loaded module (cuModuleLoad*, and a library, cuLibraryLoad*, which the
 * CUDA runtime uses for a program's own kernels) takes device memory for
 * its code and data in the current context. It is charged like an
 * allocation: the image's size (read from its header, as the driver reads
 * it; a file's size for a file) is reserved before the driver is called,
 * then settled to what the load measurably took (footprint.h); a module
 * the budget cannot hold is unloaded again and the call fails with
 * CUDA_ERROR_OUT_OF_MEMORY. Unloading gives the charge back. The JIT
 * linker (cuLinkCreate .. cuLinkComplete) produces an image in host memory
 * and takes nothing on the device until that image is loaded.
 *
 * What a driver loads later on its own is not seen here: with lazy loading
 * (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2) a kernel's code
 * goes to the device at its first launch (README.md, the tolerance).
 */
#include "footprint.h"
#include "interposer.h"

#include "../util/parse.h"
#include "../util/report.h"

#include "../cuda/module_image.h"

#include <stdlib.h>
#include <sys/stat.h>

/* Modules and libraries (CUmodule, CUlibrary) of this process the budget
 * charged. */
static struct footprint_charges mods;

/* How a module is loaded and unloaded, for charged_load(). */
struct loader {
    CUresult (*load)(const struct loader *l, void **out);
    void (*unload)(void *handle);
    const char *call;
    uint64_t estimate; /* the image's size, 0 when unknown */
    const void *image;
    const char *path;
    unsigned n;
    CUjit_option *options;
    void **values;
    CUlibraryOption *lib_options;
    void **lib_values;
    unsigned lib_n;
    int kind; /* which entry point */
};

static uint64_t estimate_image(const void *image)
{
    const void *start;
    return image ? device_charge(image_size(image, &start)) : 0;
}

static uint64_t estimate_file(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 && st.st_size > 0 ? device_charge((uint64_t)st.st_size)
                                                          : 0;
}

/* Loads through l charged to the budget of the current context's device. */
static CUresult charged_load(const struct loader *l, void **out)
{
    CUcontext ctx = NULL;
    int dev = out ? governed_device() : -1;
    if (dev < 0 || !real.cuCtxGetCurrent || real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
        return l->load(l, out);
    footprint_lock();
    if (!footprint_room(&mods)) {
        footprint_unlock();
        return CUDA_ERROR_OUT_OF_MEMORY; /* no host memory to remember it by */
    }
    uint64_t expected = l->estimate;
    if (expected && budget_reserve_part(dev, expected, COMMAND_MODULES, false) != 0) {
        footprint_unlock();
        governed_refusal(dev, RECORD_MODULE, expected, 0, l->call, 0);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct footprint f;
    footprint_begin(&f, dev, ctx);
    CUresult rc = l->load(l, out);
    uint64_t cost = expected;
    if (rc == CUDA_SUCCESS && footprint_end(&f, ctx, false, &cost) != 0)
        cost = expected;
    bool refused = false; /* by the budget, not by the driver */
    if (rc == CUDA_SUCCESS && cost > expected &&
        budget_reserve_part(dev, cost - expected, COMMAND_MODULES, true) != 0) {
        l->unload(*out);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        refused = true;
    }
    if (rc != CUDA_SUCCESS) {
        if (expected)
            budget_release_part(dev, expected, COMMAND_MODULES);
    } else {
        if (cost < expected)
            budget_release_part(dev, expected - cost, COMMAND_MODULES);
        footprint_charged(&mods, *out, dev, cost);
        record_alloc(RECORD_MODULE, dev, (uint64_t)(uintptr_t)*out, cost, 0);
    }
    footprint_unlock();
    if (refused)
        governed_refusal(dev, RECORD_MODULE, cost, 0, l->call, 0);
    else if (rc == CUDA_SUCCESS)
        vlog(LOG_DEBUG, "%s: %s on device %d", l->call, format_size(cost).text, dev);
    return rc;
}

/* Gives back the charge of `handle` once the driver has unloaded it (also
 * when its context was destroyed first, which unloaded it already). */
static CUresult governed_unload(void *handle, CUresult (*driver)(void *))
{
    footprint_lock();
    CUresult rc = driver(handle);
    if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_CONTEXT_IS_DESTROYED)
        footprint_ended(&mods, handle, COMMAND_MODULES, RECORD_MODULE);
    footprint_unlock();
    return rc;
}

/* ---------------------------------------------------------------- modules */

enum { LOAD_FILE, LOAD_DATA, LOAD_DATA_EX, LOAD_FATBIN, LIBRARY_DATA, LIBRARY_FILE };

static CUresult load_any(const struct loader *l, void **out)
{
    switch (l->kind) {
    case LOAD_FILE: return real.cuModuleLoad((CUmodule *)out, l->path);
    case LOAD_DATA: return real.cuModuleLoadData((CUmodule *)out, l->image);
    case LOAD_DATA_EX:
        return real.cuModuleLoadDataEx((CUmodule *)out, l->image, l->n, l->options, l->values);
    case LOAD_FATBIN: return real.cuModuleLoadFatBinary((CUmodule *)out, l->image);
    case LIBRARY_DATA:
        return real.cuLibraryLoadData((CUlibrary *)out, l->image, l->options, l->values, l->n,
                                      l->lib_options, l->lib_values, l->lib_n);
    default:
        return real.cuLibraryLoadFromFile((CUlibrary *)out, l->path, l->options, l->values, l->n,
                                          l->lib_options, l->lib_values, l->lib_n);
    }
}

static void unload_module(void *m) { real.cuModuleUnload((CUmodule)m); }
static void unload_library(void *l) { real.cuLibraryUnload((CUlibrary)l); }
static CUresult module_unload(void *m) { return real.cuModuleUnload((CUmodule)m); }
static CUresult library_unload(void *l) { return real.cuLibraryUnload((CUlibrary)l); }

/* The entry point's real function exists, or the program gets what the
 * driver would give for a symbol it lacks. */
#define NEED(fn)                                                                               \
    do {                                                                                       \
        need_real();                                                                           \
        if (!real.fn)                                                                          \
            return CUDA_ERROR_NOT_SUPPORTED;                                                   \
    } while (0)

EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    NEED(cuModuleLoad);
    struct loader l = {load_any, unload_module, "cuModuleLoad", estimate_file(fname), .path = fname,
                       .kind = LOAD_FILE};
    return charged_load(&l, (void **)module);
}

EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    NEED(cuModuleLoadData);
    struct loader l = {load_any, unload_module, "cuModuleLoadData", estimate_image(image),
                       .image = image, .kind = LOAD_DATA};
    return charged_load(&l, (void **)module);
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n,
                                   CUjit_option *options, void **values)
{
    NEED(cuModuleLoadDataEx);
    struct loader l = {load_any, unload_module, "cuModuleLoadDataEx", estimate_image(image),
                       .image = image, .n = n, .options = options, .values = values,
                       .kind = LOAD_DATA_EX};
    return charged_load(&l, (void **)module);
}

EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    NEED(cuModuleLoadFatBinary);
    struct loader l = {load_any, unload_module, "cuModuleLoadFatBinary", estimate_image(fatCubin),
                       .image = fatCubin, .kind = LOAD_FATBIN};
    return charged_load(&l, (void **)module);
}

EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    NEED(cuModuleUnload);
    return governed_unload(hmod, module_unload);
}

/* -------------------------------------------------------------- libraries */

EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                  void **jitOptionsValues, unsigned int numJitOptions,
                                  CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                  unsigned int numLibraryOptions)
{
    NEED(cuLibraryLoadData);
    struct loader l = {load_any, unload_library, "cuLibraryLoadData", estimate_image(code),
                       .image = code, .n = numJitOptions, .options = jitOptions,
                       .values = jitOptionsValues, .lib_options = libraryOptions,
                       .lib_values = libraryOptionValues, .lib_n = numLibraryOptions,
                       .kind = LIBRARY_DATA};
    return charged_load(&l, (void **)library);
}

EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
                                      CUjit_option *jitOptions, void **jitOptionsValues,
                                      unsigned int numJitOptions, CUlibraryOption *libraryOptions,
                                      void **libraryOptionValues, unsigned int numLibraryOptions)
{
    NEED(cuLibraryLoadFromFile);
    struct loader l = {load_any, unload_library, "cuLibraryLoadFromFile", estimate_file(fileName),
                       .path = fileName, .n = numJitOptions, .options = jitOptions,
                       .values = jitOptionsValues, .lib_options = libraryOptions,
                       .lib_values = libraryOptionValues, .lib_n = numLibraryOptions,
                       .kind = LIBRARY_FILE};
    return charged_load(&l, (void **)library);
}

EXPORT CUresult cuLibraryUnload(CUlibrary library)
{
    NEED(cuLibraryUnload);
    return governed_unload(library, library_unload);
}

/* ---------------------------------------------------------------- fork */

/* A forked child has no modules (a child cannot use its parent's CUDA); the
 * parent holds footprint_lock across fork() (contexts.c), so this table is
 * whole in the child. */
static void after_fork_child(void) { footprint_forget(&mods); }

__attribute__((constructor)) static void modules_load(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}
