/* copy: copies and memsets, plain, 2D and 3D, synchronous and
 * stream-ordered.
 *
 * Every device address must lie inside memory the driver handed out
 * (ranges.c), as on a GPU where anything else faults; host addresses are
 * the caller's. A stream-ordered operation runs once what was queued on its
 * stream before it has run, and is complete when the call returns: as if
 * the GPU were infinitely fast, which keeps stream order and makes events
 * and synchronisation behave as programs expect. Arrays have no storage in
 * the simulator, so copies to and from them are not supported.
 */
#include "sim.h"

#include <string.h>

/* A device-side span [p, p + n) the driver knows. */
static bool device_span(uint64_t p, uint64_t n)
{
    return sim_range_find(p, n, RANGES_ALL, NULL);
}

static CUresult ready_with_context(void)
{
    CUcontext c;
    return sim_current_context(&c);
}

static CUresult on_stream(CUstream h)
{
    struct CUstream_st *s = sim_stream(h);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_stream_drain(s);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- linear */

static CUresult copy(uint64_t dst, bool dst_dev, uint64_t src, bool src_dev, size_t n)
{
    CUresult rc = ready_with_context();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (n == 0)
        return CUDA_SUCCESS;
    if (!dst || !src || (dst_dev && !device_span(dst, n)) || (src_dev && !device_span(src, n)))
        return CUDA_ERROR_INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

/* A unified-address copy: a pointer the driver knows is checked whole; any
 * other is the caller's host memory. */
static CUresult copy_unified(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    bool d = sim_range_find(dst, 0, RANGES_ALL, NULL), s = sim_range_find(src, 0, RANGES_ALL, NULL);
    return copy(dst, d, src, s, n);
}

#define H(p) ((uint64_t)(uintptr_t)(p))

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    return copy(dst, true, H(src), false, n);
}
EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    return copy(H(dst), false, src, true, n);
}
EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy(dst, true, src, true, n);
}
EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy_unified(dst, src, n); }

EXPORT CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dstContext, CUdeviceptr src,
                             CUcontext srcContext, size_t n)
{
    if (!sim_context_live(dstContext) || !sim_context_live(srcContext))
        return sim_ready() ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_NOT_INITIALIZED;
    return copy(dst, true, src, true, n);
}

#define ASYNC(call, h)                                                                         \
    do {                                                                                       \
        CUresult rc_ = sim_check_init();                                                       \
        if (rc_ == CUDA_SUCCESS)                                                               \
            rc_ = on_stream(h);                                                                \
        return rc_ == CUDA_SUCCESS ? (call) : rc_;                                             \
    } while (0)

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream h)
{
    ASYNC(cuMemcpyHtoD_v2(dst, src, n), h);
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream h)
{
    ASYNC(cuMemcpyDtoH_v2(dst, src, n), h);
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h)
{
    ASYNC(cuMemcpyDtoD_v2(dst, src, n), h);
}
EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h)
{
    ASYNC(cuMemcpy(dst, src, n), h);
}
EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dstContext, CUdeviceptr src,
                                  CUcontext srcContext, size_t n, CUstream h)
{
    ASYNC(cuMemcpyPeer(dst, dstContext, src, srcContext, n), h);
}

/* ------------------------------------------------------------------ 2D/3D */

struct side {
    CUmemorytype type;
    uint64_t addr; /* of the first byte copied */
    size_t pitch, height; /* bytes per row, rows per slice */
};

/* Resolves one side of a copy; a unified pointer becomes device or host by
 * what the driver knows of it. */
static CUresult side_of(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array,
                        size_t x, size_t y, size_t z, size_t pitch, size_t height, struct side *s)
{
    (void)array;
    uint64_t base;
    if (type == CU_MEMORYTYPE_UNIFIED)
        type = sim_range_find(dev, 0, RANGES_ALL, NULL) ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST,
        host = (const void *)(uintptr_t)dev;
    if (type == CU_MEMORYTYPE_HOST)
        base = H(host);
    else if (type == CU_MEMORYTYPE_DEVICE)
        base = dev;
    else if (type == CU_MEMORYTYPE_ARRAY)
        return CUDA_ERROR_NOT_SUPPORTED;
    else
        return CUDA_ERROR_INVALID_VALUE;
    if (!base)
        return CUDA_ERROR_INVALID_VALUE;
    *s = (struct side){type, base + x + pitch * (y + height * z), pitch, height};
    return CUDA_SUCCESS;
}

static CUresult copy_3d(const struct side *d, const struct side *s, size_t width, size_t height,
                        size_t depth)
{
    CUresult rc = ready_with_context();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!width || !height || !depth)
        return CUDA_SUCCESS;
    if ((height > 1 || depth > 1) && (d->pitch < width || s->pitch < width))
        return CUDA_ERROR_INVALID_VALUE;
    if (depth > 1 && (d->height < height || s->height < height))
        return CUDA_ERROR_INVALID_VALUE;
    const struct side *sides[2] = {d, s};
    for (int i = 0; i < 2; i++) {
        const struct side *x = sides[i];
        uint64_t span = x->pitch * x->height * (depth - 1) + x->pitch * (height - 1) + width;
        if (x->type == CU_MEMORYTYPE_DEVICE && !device_span(x->addr, span))
            return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t z = 0; z < depth; z++)
        for (size_t y = 0; y < height; y++)
            memmove((void *)(uintptr_t)(d->addr + d->pitch * (y + d->height * z)),
                    (const void *)(uintptr_t)(s->addr + s->pitch * (y + s->height * z)), width);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p)
{
    if (!p)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    struct side d, s;
    CUresult rc = side_of(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes,
                          p->dstY, 0, p->dstPitch, 0, &d);
    if (rc == CUDA_SUCCESS)
        rc = side_of(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes,
                     p->srcY, 0, p->srcPitch, 0, &s);
    return rc == CUDA_SUCCESS ? copy_3d(&d, &s, p->WidthInBytes, p->Height, 1) : rc;
}

EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p) { return cuMemcpy2D_v2(p); }

EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream h) { ASYNC(cuMemcpy2D_v2(p), h); }

EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *p)
{
    if (!p)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    if (p->srcLOD || p->dstLOD || p->reserved0 || p->reserved1)
        return CUDA_ERROR_INVALID_VALUE;
    struct side d, s;
    CUresult rc = side_of(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes,
                          p->dstY, p->dstZ, p->dstPitch, p->dstHeight, &d);
    if (rc == CUDA_SUCCESS)
        rc = side_of(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes,
                     p->srcY, p->srcZ, p->srcPitch, p->srcHeight, &s);
    return rc == CUDA_SUCCESS ? copy_3d(&d, &s, p->WidthInBytes, p->Height, p->Depth) : rc;
}

EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *p, CUstream h) { ASYNC(cuMemcpy3D_v2(p), h); }

/* ---------------------------------------------------------------- memset */

/* Sets `height` rows of `width` elements of `size` bytes, `pitch` apart. */
static CUresult set(CUdeviceptr dst, size_t pitch, unsigned value, unsigned size, size_t width,
                    size_t height)
{
    CUresult rc = ready_with_context();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!width || !height)
        return CUDA_SUCCESS;
    size_t row = width * size;
    if (dst % size || (height > 1 && pitch < row) ||
        !device_span(dst, pitch * (height - 1) + row))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t y = 0; y < height; y++) {
        unsigned char *p = (unsigned char *)(uintptr_t)(dst + pitch * y);
        if (size == 1) {
            memset(p, (int)value, row);
        } else {
            for (size_t i = 0; i < width; i++)
                memcpy(p + i * size, size == 2 ? (void *)&(uint16_t){(uint16_t)value}
                                               : (void *)&(uint32_t){value},
                       size);
        }
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { return set(d, 0, v, 1, n, 1); }
EXPORT CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) { return set(d, 0, v, 2, n, 1); }
EXPORT CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) { return set(d, 0, v, 4, n, 1); }
EXPORT CUresult cuMemsetD2D8_v2(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h)
{
    return set(d, pitch, v, 1, w, h);
}
EXPORT CUresult cuMemsetD2D16_v2(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h)
{
    return set(d, pitch, v, 2, w, h);
}
EXPORT CUresult cuMemsetD2D32_v2(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h)
{
    return set(d, pitch, v, 4, w, h);
}
EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{
    ASYNC(set(d, 0, v, 1, n, 1), s);
}
EXPORT CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s)
{
    ASYNC(set(d, 0, v, 2, n, 1), s);
}
EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s)
{
    ASYNC(set(d, 0, v, 4, n, 1), s);
}
EXPORT CUresult cuMemsetD2D8Async(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h,
                                  CUstream s)
{
    ASYNC(set(d, pitch, v, 1, w, h), s);
}
EXPORT CUresult cuMemsetD2D16Async(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h,
                                   CUstream s)
{
    ASYNC(set(d, pitch, v, 2, w, h), s);
}
EXPORT CUresult cuMemsetD2D32Async(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h,
                                   CUstream s)
{
    ASYNC(set(d, pitch, v, 4, w, h), s);
}

SAME_TYPE(cuMemcpyHtoD_v2);
SAME_TYPE(cuMemcpyDtoH_v2);
SAME_TYPE(cuMemcpyDtoD_v2);
SAME_TYPE(cuMemcpy);
SAME_TYPE(cuMemcpyPeer);
SAME_TYPE(cuMemcpyHtoDAsync_v2);
SAME_TYPE(cuMemcpyDtoHAsync_v2);
SAME_TYPE(cuMemcpyDtoDAsync_v2);
SAME_TYPE(cuMemcpyAsync);
SAME_TYPE(cuMemcpyPeerAsync);
SAME_TYPE(cuMemcpy2D_v2);
SAME_TYPE(cuMemcpy2DUnaligned_v2);
SAME_TYPE(cuMemcpy2DAsync_v2);
SAME_TYPE(cuMemcpy3D_v2);
SAME_TYPE(cuMemcpy3DAsync_v2);
SAME_TYPE(cuMemsetD8_v2);
SAME_TYPE(cuMemsetD16_v2);
SAME_TYPE(cuMemsetD32_v2);
SAME_TYPE(cuMemsetD2D8_v2);
SAME_TYPE(cuMemsetD2D16_v2);
SAME_TYPE(cuMemsetD2D32_v2);
SAME_TYPE(cuMemsetD8Async);
SAME_TYPE(cuMemsetD16Async);
SAME_TYPE(cuMemsetD32Async);
SAME_TYPE(cuMemsetD2D8Async);
SAME_TYPE(cuMemsetD2D16Async);
SAME_TYPE(cuMemsetD2D32Async);
