/* context_cost: the device memory a CUDA context takes, measured with the
 * driver alone, for where NVML cannot say what a process holds (no NVML,
 * or a PID namespace it does not see into).
 *
 * cuMemGetInfo needs a context, so the memory a process's first context
 * took cannot be read as "free before minus free after". Instead a scratch
 * context is created beside it and destroyed: the free memory's drop at
 * its creation and its rise at its destruction are both what one more
 * context takes, and the smaller of the two is kept, since another
 * process's allocation between two readings inflates one of them (a free
 * can still shrink one: the tolerance README.md states). Used by vram
 * run's probe before a command starts and by the interposer. */
#ifndef VRAM_CONTEXT_COST_H
#define VRAM_CONTEXT_COST_H

#include "cuda_abi.h"

struct context_calls {
    PFN_cuCtxPushCurrent_v2 push;
    PFN_cuCtxPopCurrent_v2 pop;
    PFN_cuMemGetInfo_v2 mem_get_info;
    PFN_cuCtxCreate_v2 create;
    PFN_cuCtxDestroy_v2 destroy;
};

/* What one more context takes on the device of `ctx` (a live context on
 * `dev`), into *bytes. 0, or -1 when the driver would not say. The scratch
 * context is the driver's own: not charged to any budget. */
int context_cost_by_scratch(const struct context_calls *c, CUcontext ctx, CUdevice dev,
                            uint64_t *bytes);

#endif
