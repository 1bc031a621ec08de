/* context_cost: a context's cost from the driver alone (see context_cost.h). */
#include "context_cost.h"

int context_cost_by_scratch(const struct context_calls *c, CUcontext ctx, CUdevice dev,
                            uint64_t *bytes)
{
    if (!c->push || !c->pop || !c->mem_get_info || !c->create || !c->destroy ||
        c->push(ctx) != CUDA_SUCCESS)
        return -1;
    size_t before = 0, during = 0, after = 0, total;
    CUcontext scratch = NULL, popped;
    int rc = -1;
    if (c->mem_get_info(&before, &total) == CUDA_SUCCESS &&
        c->create(&scratch, 0, dev) == CUDA_SUCCESS) {
        /* The scratch context is current now, above ctx. */
        CUresult got = c->mem_get_info(&during, &total);
        if (c->destroy(scratch) == CUDA_SUCCESS && got == CUDA_SUCCESS &&
            c->mem_get_info(&after, &total) == CUDA_SUCCESS) {
            uint64_t fell = before > during ? before - during : 0;
            uint64_t rose = after > during ? after - during : 0;
            *bytes = fell < rose ? fell : rose;
            rc = 0;
        }
    }
    c->pop(&popped);
    return rc;
}
