/* footprint: measuring what the device gives this process (footprint.h). */
#include "footprint.h"
#include "budget.h"
#include "driver_memory.h"
#include "nvml_reader.h"
#include "real.h"

#include "../cuda/context_cost.h"
#include "../record/recorder.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t event = PTHREAD_MUTEX_INITIALIZER; /* one measured event at a time */

/* A context or module being made may hold more than it was charged until
 * it is measured: no reading of the driver's part may count that. */
void footprint_lock(void)
{
    pthread_mutex_lock(&event);
    driver_memory_enter();
}
void footprint_unlock(void)
{
    driver_memory_leave();
    pthread_mutex_unlock(&event);
}

static int free_in(CUcontext ctx, uint64_t *bytes)
{
    size_t f = 0, t;
    CUcontext popped;
    if (!ctx || !real.cuCtxPushCurrent_v2 || !real.cuCtxPopCurrent_v2 ||
        real.cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS)
        return -1;
    CUresult rc = real.cuMemGetInfo_v2(&f, &t);
    real.cuCtxPopCurrent_v2(&popped);
    *bytes = f;
    return rc == CUDA_SUCCESS ? 0 : -1;
}

void footprint_begin(struct footprint *f, int dev, CUcontext ctx)
{
    f->dev = dev;
    f->listed = nvml_reader_own(dev, &f->used);
    /* Not listed yet: NVML may not see this process at all, so the free
     * memory is read too, where there is a context to read it in. */
    f->has_free = f->listed <= 0 && free_in(ctx, &f->free) == 0;
}

int footprint_end(struct footprint *f, CUcontext ctx, bool fresh, uint64_t *bytes)
{
    uint64_t now;
    if (f->listed >= 0 && nvml_reader_own(f->dev, &now) > 0) {
        *bytes = now > f->used ? now - f->used : 0;
        return 0;
    }
    /* Not listed after the call either: NVML cannot see this process (or
     * it holds nothing); the driver can say. */
    if (f->has_free && free_in(ctx, &now) == 0) {
        *bytes = f->free > now ? f->free - now : 0;
        return 0;
    }
    if (!fresh)
        return -1;
    struct context_calls c = {real.cuCtxPushCurrent_v2, real.cuCtxPopCurrent_v2,
                              real.cuMemGetInfo_v2, real.cuCtxCreate_v2, real.cuCtxDestroy_v2};
    return context_cost_by_scratch(&c, ctx, f->dev, bytes);
}

void footprint_after_fork(void) { pthread_mutex_init(&event, NULL); }

/* ---------------------------------------------------------------- charges */

bool footprint_room(struct footprint_charges *t)
{
    if (t->n < t->cap)
        return true;
    int cap = t->cap ? t->cap * 2 : 16;
    struct footprint_charge *grown = realloc(t->v, (size_t)cap * sizeof *grown);
    if (!grown)
        return false;
    t->v = grown;
    t->cap = cap;
    return true;
}

void footprint_charged(struct footprint_charges *t, const void *handle, int dev, uint64_t bytes)
{
    t->v[t->n++] = (struct footprint_charge){handle, dev, bytes, 1};
}

struct footprint_charge *footprint_find(struct footprint_charges *t, const void *handle)
{
    for (int i = 0; i < t->n; i++)
        if (t->v[i].handle == handle)
            return &t->v[i];
    return NULL;
}

bool footprint_ended(struct footprint_charges *t, const void *handle, enum command_part part,
                     enum record_family family)
{
    for (int i = 0; i < t->n; i++)
        if (t->v[i].handle == handle) {
            budget_release_part(t->v[i].dev, t->v[i].bytes, part);
            record_free(family, t->v[i].dev, (uint64_t)(uintptr_t)handle, t->v[i].bytes, 0);
            t->v[i] = t->v[--t->n];
            return true;
        }
    return false;
}

void footprint_forget(struct footprint_charges *t)
{
    free(t->v);
    *t = (struct footprint_charges){0};
}
