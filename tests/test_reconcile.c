/* vramd's NVML thread (src/daemon/reconcile.c) against an NVML that stalls
 * (nvml_stall.c, argv[1]): the loop's tick says a stall in the log once it
 * has lasted STALL_MS, and never for a tick whose clock was read before the
 * reading began (issue 22, item 2: "NVML has not answered for
 * 18446744073709551 s" from an unsigned subtraction). */
#include "check.h"
#include "../src/cuda/nvml_query.h"
#include "../src/daemon/reconcile.h"

#include <fcntl.h>
#include <time.h>

static char dir[] = "/tmp/vram-reconcile.XXXXXX";
static char stall[64], stalled[64], log_path[64];

/* What the daemon logged during fn(now), from its stderr. */
static void logged(void (*fn)(uint64_t), uint64_t now, char *out, size_t n)
{
    fflush(stderr);
    int saved = dup(2), fd = open(log_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    fn(now);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t k = pread(fd, out, n - 1, 0);
    out[k > 0 ? k : 0] = 0;
    close(fd);
}

/* Also when a check fails (it exits): nothing left in /tmp. */
static void clean(void)
{
    unlink(stall);
    unlink(stalled);
    unlink(log_path);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    CHECK(mkdtemp(dir));
    atexit(clean);
    snprintf(stall, sizeof stall, "%s/stall", dir);
    snprintf(stalled, sizeof stalled, "%s/stalled", dir);
    snprintf(log_path, sizeof log_path, "%s/log", dir);
    FILE *f = fopen(stall, "w");
    CHECK(f && fclose(f) == 0);
    setenv("NVML_STALL_FILE", stall, 1);
    setenv("NVML_STALLED_FILE", stalled, 1);
    char err[256];
    CHECK(nvml_open(argv[1], "test_reconcile", err, sizeof err) == 0);

    /* A tick's clock read before the reading began, as the loop's can be. */
    uint64_t before = now_ms();
    struct timespec ms5 = {0, 5000000};
    nanosleep(&ms5, NULL);
    CHECK(reconcile_start(1, 1000) >= 0);
    for (int i = 0; i < 200 && access(stalled, F_OK) != 0; i++)
        nanosleep(&ms5, NULL), nanosleep(&ms5, NULL);
    CHECK(access(stalled, F_OK) == 0);
    char text[512];
    logged(reconcile_tick, before, text, sizeof text);
    if (text[0])
        fprintf(stderr, "said: %s", text);
    CHECK(text[0] == 0);
    /* A stall that lasts is said, with its length. */
    logged(reconcile_tick, now_ms() + 6000, text, sizeof text);
    CHECK(strstr(text, "vramd: NVML has not answered for 6 s"));
    /* Once. */
    logged(reconcile_tick, now_ms() + 7000, text, sizeof text);
    CHECK(text[0] == 0);

    clean();
    CHECK(access(dir, F_OK) != 0);
    printf("test_reconcile: ok\n");
    return 0;
}
