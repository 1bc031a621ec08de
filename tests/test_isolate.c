/* Work run in an isolated child: results come back, failures come back as
 * errors with their cause, and the child's GPU memory is returned when it
 * ends, even when this process had already initialised the GPU. */
#include "check.h"

#include <signal.h>

static vram_status allocate_and_report(const void *in, size_t in_len, void *out, size_t out_cap,
                                       size_t *out_len)
{
    uint64_t want;
    CHECK(in_len == sizeof want && out_cap >= sizeof(vram_stats));
    memcpy(&want, in, sizeof want);
    void *p;
    vram_status st = vram_malloc(0, want, NULL, &p);
    if (st != VRAM_OK)
        return st;
    vram_stats s;
    if ((st = vram_get_stats(0, &s)) != VRAM_OK)
        return st;
    memcpy(out, &s, sizeof s);
    *out_len = sizeof s;
    return VRAM_OK; /* exits holding p: the process's end must release it */
}

static vram_status crash(const void *in, size_t in_len, void *out, size_t out_cap, size_t *out_len)
{
    (void)in, (void)in_len, (void)out, (void)out_cap, (void)out_len;
    abort(); /* a crash; sanitizers leave SIGABRT alone, unlike SIGSEGV */
    return VRAM_OK;
}

static vram_status quit_early(const void *in, size_t in_len, void *out, size_t out_cap,
                              size_t *out_len)
{
    (void)in, (void)in_len, (void)out, (void)out_cap, (void)out_len;
    exit(3);
}

static vram_status too_much(const void *in, size_t in_len, void *out, size_t out_cap,
                            size_t *out_len)
{
    (void)in, (void)in_len, (void)out;
    *out_len = out_cap + 1;
    return VRAM_OK;
}

static uint64_t device_used(void)
{
    vram_stats s;
    CHECK_OK(vram_get_physical_stats(0, &s));
    return s.device_total - s.device_free;
}

int main(void)
{
    private_gpu("4GiB");
    setenv("VRAM_ALLOW_GROWTH", "true", 1);
    /* This process initialises the GPU and holds memory first. */
    void *mine;
    CHECK_OK(vram_malloc(0, 512 * MiB, NULL, &mine));
    CHECK(device_used() == 512 * MiB);

    uint64_t want = GiB;
    vram_stats child;
    size_t len = 0;
    CHECK_OK(vram_run_isolated(allocate_and_report, &want, sizeof want, &child, sizeof child, &len));
    CHECK(len == sizeof child);
    CHECK(child.bytes_in_use == GiB);               /* the child's own, fresh state */
    CHECK(child.device_free == 4 * GiB - 512 * MiB - GiB); /* it saw us, and itself */
    CHECK(device_used() == 512 * MiB);                /* and its memory is back */

    /* Out of memory in the child: its status and message come back. */
    want = 8 * GiB;
    CHECK_STATUS(vram_run_isolated(allocate_and_report, &want, sizeof want, &child, sizeof child,
                                   &len),
                 VRAM_ERROR_OUT_OF_MEMORY);
    CHECK_CONTAINS(vram_last_error(), "in the isolated child");
    CHECK_CONTAINS(vram_last_error(), "out of memory on device 0");

    CHECK_STATUS(vram_run_isolated(crash, NULL, 0, NULL, 0, &len), VRAM_ERROR_CHILD_FAILED);
    CHECK_CONTAINS(vram_last_error(), "killed by signal 6");
    CHECK_STATUS(vram_run_isolated(quit_early, NULL, 0, NULL, 0, &len), VRAM_ERROR_CHILD_FAILED);
    CHECK_CONTAINS(vram_last_error(), "exited with status 3");
    char small[4];
    CHECK_STATUS(vram_run_isolated(too_much, NULL, 0, small, sizeof small, &len),
                 VRAM_ERROR_INVALID_ARGUMENT);
    CHECK_CONTAINS(vram_last_error(), "more than the 4 bytes");
    CHECK_STATUS(vram_run_isolated(NULL, NULL, 0, NULL, 0, &len), VRAM_ERROR_INVALID_ARGUMENT);

    CHECK(device_used() == 512 * MiB);
    CHECK_OK(vram_free(mine, NULL));
    vram_shutdown();
    return 0;
}
