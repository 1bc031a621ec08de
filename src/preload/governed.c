/* governed: what every governed call shares (interposer.h): the budgets'
 * setup at the first governed call, the device a call is charged to,
 * frees, and refusals said and recorded. Above the budget; below the
 * families of hooks. */
#include "interposer.h"

#include <limits.h>
#include <stdio.h>

pthread_once_t budget_once = PTHREAD_ONCE_INIT;

static void after_fork_child(void) { budget_after_fork(); }

void setup_budgets(void)
{
    need_real();
    /* Before the budgets, whose setting is the first event. A recording
     * asked for and not made is said whatever VRAM_LOG says, as a bad
     * budget is: the user would otherwise find out only at the end. */
    char err[PATH_MAX + 160];
    if (recorder_start_from_environment(err, sizeof err) != 0)
        fprintf(stderr, "vram: error: %s; this process's GPU memory events are not recorded\n",
                err);
    budget_setup();
    pthread_atfork(NULL, NULL, after_fork_child);
}

int governed_device(void)
{
    pthread_once(&budget_once, setup_budgets);
    CUdevice dev;
    if (!real.cuCtxGetDevice || real.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return -1;
    return budget_limited(dev) ? dev : -1;
}

/* Frees: the driver decides; the charge comes back only if it agreed. The
 * free is recorded before the driver is asked: once it has freed, another
 * thread may be given the same address, and that allocation must come
 * after this free in the recording (stamped after, it came before it now
 * and then, and the reader ignored the free). A free the driver refused is
 * recorded as held again. */
CUresult governed_free(uint64_t key, CUresult (*driver)(uint64_t))
{
    int dev;
    uint64_t bytes;
    enum charge_kind kind;
    if (!budget_forget(key, &dev, &bytes, &kind))
        return driver(key); /* not ours: the driver's answer, unchanged */
    record_free(family_of(kind), dev, key, bytes, 0);
    CUresult rc = driver(key);
    if (rc == CUDA_SUCCESS) {
        budget_release(dev, bytes);
    } else {
        budget_commit(dev, key, bytes, kind); /* still held */
        record_alloc(family_of(kind), dev, key, bytes, 0);
    }
    return rc;
}

void record_governed_refusal(int dev, enum record_family family, uint64_t bytes,
                             uint64_t stream, enum record_reason why)
{
    if (RECORDER_ON()) {
        uint64_t in_use = 0;
        unsigned reason = budget_refusal(dev, &in_use);
        record_refusal(family, dev, bytes, in_use, why ? why : reason, stream);
    }
}

void governed_refusal(int dev, enum record_family family, uint64_t bytes, uint64_t stream,
                      const char *call, enum record_reason why)
{
    record_governed_refusal(dev, family, bytes, stream, why);
    budget_report_oom(dev, bytes, call);
}
