/* Processes share one simulated GPU the way they share a real one: each
 * sees what the others hold, and a killed process's memory comes back. */
#include "check.h"

#include <signal.h>
#include <sys/wait.h>

static const char *holder_path;

struct holder {
    pid_t pid;
    int in;         /* closing it ends the holder */
    char line[512]; /* what it said first: "held", or "oom <message>" */
};

static struct holder start_holder(const char *size)
{
    struct holder h;
    int out[2], in[2];
    CHECK(pipe(out) == 0 && pipe(in) == 0);
    h.pid = fork();
    CHECK(h.pid >= 0);
    if (h.pid == 0) {
        dup2(out[1], 1);
        dup2(in[0], 0);
        close(out[0]);
        close(in[1]);
        execl(holder_path, holder_path, size, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    close(in[0]);
    h.in = in[1];
    h.line[0] = 0;
    FILE *f = fdopen(out[0], "r");
    CHECK(fgets(h.line, sizeof h.line, f) != NULL);
    fclose(f);
    return h;
}

static uint64_t device_used(void)
{
    vram_stats s;
    CHECK_OK(vram_get_physical_stats(0, &s));
    return s.device_total - s.device_free;
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    holder_path = argv[1];
    private_gpu("12GiB");
    setenv("VRAM_ALLOW_GROWTH", "true", 1);

    /* Three processes on one device: two holders and this one. */
    struct holder a = start_holder("8GiB");
    CHECK_CONTAINS(a.line, "held");
    CHECK(device_used() == 8 * GiB);
    struct holder b = start_holder("3GiB");
    CHECK_CONTAINS(b.line, "held");
    CHECK(device_used() == 11 * GiB);
    void *p;
    CHECK_STATUS(vram_malloc(0, 2 * GiB, NULL, &p), VRAM_ERROR_OUT_OF_MEMORY);
    CHECK_CONTAINS(vram_last_error(), "other processes and contexts hold about 11.00 GiB");
    CHECK_OK(vram_malloc(0, 512 * MiB, NULL, &p));

    /* A third holder does not fit, and is told why. */
    struct holder c = start_holder("2GiB");
    CHECK_CONTAINS(c.line, "oom out of memory");
    int status;
    waitpid(c.pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);

    /* SIGKILL: no chance to clean up, yet the memory comes back at once. */
    kill(a.pid, SIGKILL);
    waitpid(a.pid, &status, 0);
    CHECK(device_used() == 3 * GiB + 512 * MiB);
    CHECK_OK(vram_malloc(0, 6 * GiB, NULL, &p));

    /* A normal exit releases too. */
    close(b.in);
    waitpid(b.pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(device_used() == 6 * GiB + 512 * MiB);
    vram_shutdown();
    CHECK(device_used() == 0);
    return 0;
}
