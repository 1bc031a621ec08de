/* vmm: virtual memory management (cuMemCreate, map, unmap, release) and
 * arrays (2D, 3D, mipmapped), charged by the physical memory behind them. */
#include "interposer.h"
#include "../cuda/array_layout.h"

/* --------------------------------------------- virtual memory management */

/* Physical memory of a handle is the device's until it is released *and*
 * unmapped everywhere; only device-located handles are charged. */
static pthread_mutex_t vmm_mu = PTHREAD_MUTEX_INITIALIZER;
struct vmm_handle {
    CUmemGenericAllocationHandle handle;
    int dev;
    uint64_t bytes;
    int maps;
    bool released;
    CUdeviceptr mapped_at[8];
};
#define MAX_VMM 4096
static struct vmm_handle vmm[MAX_VMM];
static int nvmm;

static struct vmm_handle *vmm_find(CUmemGenericAllocationHandle h)
{
    for (int i = 0; i < nvmm; i++)
        if (vmm[i].handle == h)
            return &vmm[i];
    return NULL;
}

/* The last of a handle's release and its unmaps gives its memory back.
 * Its free is recorded before the driver is asked (governed_free says
 * why), and recorded as held again if the driver refused. */
static bool vmm_last(const struct vmm_handle *v, bool releasing, bool unmapping)
{
    return (v->released || releasing) && v->maps - (unmapping ? 1 : 0) == 0;
}

static void vmm_uncharge(struct vmm_handle *v)
{
    budget_release(v->dev, v->bytes);
    *v = vmm[--nvmm];
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    need_real();
    pthread_once(&budget_once, setup_budgets);
    if (!handle || !prop || !size || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        !budget_limited(prop->location.id))
        return real.cuMemCreate(handle, size, prop, flags);
    int dev = prop->location.id;
    uint64_t charge = device_charge(size);
    pthread_mutex_lock(&vmm_mu);
    bool full = nvmm == MAX_VMM;
    if (full || budget_reserve(dev, charge) != 0) {
        pthread_mutex_unlock(&vmm_mu);
        governed_refusal(dev, RECORD_VMM, charge, 0, "cuMemCreate",
                         full ? RECORD_TOO_MANY_HANDLES : 0);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = real.cuMemCreate(handle, size, prop, flags);
    if (rc == CUDA_SUCCESS) {
        vmm[nvmm++] = (struct vmm_handle){.handle = *handle, .dev = dev, .bytes = charge};
        record_alloc(RECORD_VMM, dev, *handle, charge, 0);
    } else
        budget_release(dev, charge);
    pthread_mutex_unlock(&vmm_mu);
    return rc;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    need_real();
    pthread_mutex_lock(&vmm_mu);
    struct vmm_handle *v = vmm_find(handle);
    bool last = v && !v->released && vmm_last(v, true, false);
    if (last)
        record_free(RECORD_VMM, v->dev, handle, v->bytes, 0);
    CUresult rc = real.cuMemRelease(handle);
    if (rc != CUDA_SUCCESS) {
        if (last)
            record_alloc(RECORD_VMM, v->dev, handle, v->bytes, 0);
    } else if (last) {
        vmm_uncharge(v);
    } else if (v && !v->released) {
        v->released = true;
        record_release(v->dev, handle, v->bytes);
    }
    pthread_mutex_unlock(&vmm_mu);
    return rc;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    need_real();
    CUresult rc = real.cuMemMap(ptr, size, offset, handle, flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&vmm_mu);
    struct vmm_handle *v = vmm_find(handle);
    if (v && v->maps < 8) {
        v->mapped_at[v->maps++] = ptr;
        record_map(v->dev, ptr, size, handle);
    }
    pthread_mutex_unlock(&vmm_mu);
    return rc;
}

/* The handle mapped at ptr, and which of its mappings it is; NULL if none. */
static struct vmm_handle *vmm_mapped_at(CUdeviceptr ptr, int *m)
{
    for (int i = 0; i < nvmm; i++)
        for (*m = 0; *m < vmm[i].maps; ++*m)
            if (vmm[i].mapped_at[*m] == ptr)
                return &vmm[i];
    return NULL;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    need_real();
    pthread_mutex_lock(&vmm_mu);
    int m = 0;
    struct vmm_handle *v = vmm_mapped_at(ptr, &m);
    bool last = v && vmm_last(v, false, true);
    if (v)
        record_unmap(v->dev, ptr, size);
    if (last)
        record_free(RECORD_VMM, v->dev, v->handle, v->bytes, 0);
    CUresult rc = real.cuMemUnmap(ptr, size);
    if (rc != CUDA_SUCCESS) {
        if (last)
            record_alloc(RECORD_VMM, v->dev, v->handle, v->bytes, 0);
        if (v)
            record_map(v->dev, ptr, size, v->handle);
    } else if (v) {
        v->mapped_at[m] = v->mapped_at[--v->maps];
        if (last)
            vmm_uncharge(v);
    }
    pthread_mutex_unlock(&vmm_mu);
    return rc;
}

/* ---------------------------------------------------------------- arrays */

/* What an array will take, before it exists: the layout of
 * array_layout.h, settled to the driver's figure
 * (cuArrayGetMemoryRequirements) once it exists. An array the layout calls
 * invalid is charged a page; the driver will refuse it anyway. */
static uint64_t array_estimate(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    uint64_t bytes = array_layout_bytes(d, levels);
    return bytes ? bytes : DEVICE_PAGE;
}

/* Creates through `create`, charging the estimate first and settling to
 * `actual` after. */
static CUresult governed_array(const char *name, uint64_t estimate, void **handle,
                               CUresult (*create)(void **, const void *, unsigned),
                               const void *desc, unsigned levels,
                               uint64_t (*actual)(void *, int), CUresult (*destroy)(void *),
                               enum charge_kind kind)
{
    int dev = governed_device();
    if (dev < 0)
        return create(handle, desc, levels);
    if (budget_reserve(dev, estimate) != 0) {
        governed_refusal(dev, RECORD_ARRAY, estimate, 0, name, 0);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = create(handle, desc, levels);
    if (rc != CUDA_SUCCESS) {
        budget_release(dev, estimate);
        return rc;
    }
    uint64_t exact = actual(*handle, dev);
    if (exact && exact < estimate) {
        budget_release(dev, estimate - exact);
    } else if (exact > estimate && budget_reserve_held(dev, exact - estimate) != 0) {
        destroy(*handle);
        budget_release(dev, estimate);
        governed_refusal(dev, RECORD_ARRAY, exact, 0, name, 0);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    budget_commit(dev, (uint64_t)(uintptr_t)*handle, exact ? exact : estimate, kind);
    record_alloc(RECORD_ARRAY, dev, (uintptr_t)*handle, exact ? exact : estimate, 0);
    return rc;
}

static CUresult create_2d(void **h, const void *d, unsigned levels)
{
    (void)levels;
    return real.cuArrayCreate_v2((CUarray *)h, d);
}
static CUresult create_3d(void **h, const void *d, unsigned levels)
{
    (void)levels;
    return real.cuArray3DCreate_v2((CUarray *)h, d);
}
static CUresult create_mip(void **h, const void *d, unsigned levels)
{
    return real.cuMipmappedArrayCreate((CUmipmappedArray *)h, d, levels);
}
static uint64_t array_actual(void *h, int dev)
{
    CUDA_ARRAY_MEMORY_REQUIREMENTS r;
    if (!real.cuArrayGetMemoryRequirements ||
        real.cuArrayGetMemoryRequirements(&r, (CUarray)h, dev) != CUDA_SUCCESS)
        return 0;
    return device_charge(r.size);
}
static uint64_t mip_actual(void *h, int dev)
{
    CUDA_ARRAY_MEMORY_REQUIREMENTS r;
    if (!real.cuMipmappedArrayGetMemoryRequirements ||
        real.cuMipmappedArrayGetMemoryRequirements(&r, (CUmipmappedArray)h, dev) != CUDA_SUCCESS)
        return 0;
    return device_charge(r.size);
}
static CUresult destroy_array(void *h) { return real.cuArrayDestroy((CUarray)h); }
static CUresult destroy_mip(void *h) { return real.cuMipmappedArrayDestroy((CUmipmappedArray)h); }

EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    need_real();
    if (!pHandle || !d)
        return real.cuArrayCreate_v2(pHandle, d);
    CUDA_ARRAY3D_DESCRIPTOR d3 = {d->Width, d->Height, 0, d->Format, d->NumChannels, 0};
    return governed_array("cuArrayCreate", array_estimate(&d3, 1), (void **)pHandle, create_2d, d,
                          1, array_actual, destroy_array, CHARGE_ARRAY);
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    need_real();
    if (!pHandle || !d)
        return real.cuArray3DCreate_v2(pHandle, d);
    return governed_array("cuArray3DCreate", array_estimate(d, 1), (void **)pHandle, create_3d, d,
                          1, array_actual, destroy_array, CHARGE_ARRAY);
}

EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                       unsigned int levels)
{
    need_real();
    if (!pHandle || !d || !levels)
        return real.cuMipmappedArrayCreate(pHandle, d, levels);
    return governed_array("cuMipmappedArrayCreate", array_estimate(d, levels), (void **)pHandle,
                          create_mip, d, levels, mip_actual, destroy_mip, CHARGE_MIPMAP);
}

static CUresult destroy_v(uint64_t h) { return real.cuArrayDestroy((CUarray)(uintptr_t)h); }
static CUresult destroy_m(uint64_t h) { return real.cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)h); }

EXPORT CUresult cuArrayDestroy(CUarray a)
{
    need_real();
    return governed_free((uint64_t)(uintptr_t)a, destroy_v);
}

EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray m)
{
    need_real();
    return governed_free((uint64_t)(uintptr_t)m, destroy_m);
}
