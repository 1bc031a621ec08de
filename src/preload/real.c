/* real: the real driver's and NVML's entry points (real.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "real.h"
#include "../cuda/uuid.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct real_driver real;

static _Atomic(real_dlsym_fn) real_dlsym_ptr;

/* The dlsym path can run inside a sanitizer's own start-up (ASan looks up
 * its interceptors' targets with dlsym before its shadow memory exists), so
 * it is not instrumented and calls nothing of libc but dlvsym. */
__attribute__((no_sanitize("address", "undefined", "thread"), noinline)) real_dlsym_fn
real_dlsym(void)
{
    real_dlsym_fn f = atomic_load_explicit(&real_dlsym_ptr, memory_order_acquire);
    if (!f) {
        /* dlvsym is not ours, so this cannot recurse into our dlsym. */
        f = (real_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!f)
#if defined(__aarch64__)
            f = (real_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
#else
            f = (real_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
#endif
        atomic_store_explicit(&real_dlsym_ptr, f, memory_order_release);
    }
    return f;
}

void *real_symbol(void *lib, const char *name) { return real_dlsym()(lib, name); }

static pthread_once_t real_once = PTHREAD_ONCE_INIT;

static void load_real(void)
{
    /* The driver is normally loaded already (we are asked because the
     * program uses it); RTLD_NOLOAD avoids loading it on our own account. */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib)
        lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib)
        return;
    real_dlsym_fn sym = real_dlsym();
#define REAL_LOAD(type, name) real.name = (type)sym(lib, #name);
    REAL_CUDA(REAL_LOAD)
#undef REAL_LOAD
}

void need_real(void) { pthread_once(&real_once, load_real); }

static atomic_bool nvml_loaded;
static pthread_mutex_t nvml_load_mu = PTHREAD_MUTEX_INITIALIZER;

void need_nvml(void)
{
    if (atomic_load_explicit(&nvml_loaded, memory_order_acquire))
        return;
    pthread_mutex_lock(&nvml_load_mu);
    void *lib = nvml_loaded ? NULL : dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib) {
        real_dlsym_fn sym = real_dlsym();
#define REAL_LOAD(type, name) real.name = (type)sym(lib, #name);
        REAL_NVML(REAL_LOAD)
#undef REAL_LOAD
        atomic_store_explicit(&nvml_loaded, true, memory_order_release);
    }
    pthread_mutex_unlock(&nvml_load_mu);
}

uint64_t real_device_total(int dev)
{
    size_t t = 0;
    need_real();
    if (!real.cuDeviceTotalMem_v2 || real.cuDeviceTotalMem_v2(&t, dev) != CUDA_SUCCESS)
        t = 0;
    return t;
}

int real_device_uuid(int dev, char *out)
{
    CUuuid u;
    need_real();
    if (!real.cuDeviceGetUuid || real.cuDeviceGetUuid(&u, dev) != CUDA_SUCCESS)
        return -1;
    uuid_text((const unsigned char *)u.bytes, out);
    return 0;
}
