/* libvram with vramd: the budget is the daemon's grant, usage reaches the
 * daemon from the agent's thread while the program's threads allocate, a
 * daemon killed and restarted gets the grant back, and the grant ends with
 * the process. Runs under ThreadSanitizer (the agent's thread). */
#include "check.h"
#include "../src/client/client.h"
#include "../src/client/fetch.h"
#include "../src/protocol/snapshot.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

static char sock[256], state[256], policy[256];
static const char *vramd;

static pid_t start_daemon(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl(vramd, vramd, "--socket", sock, "--state", state, "--policy", policy, "--log",
              "warn", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200 && access(sock, F_OK) != 0; i++)
        usleep(10000);
    return pid;
}

/* Under ThreadSanitizer the daemon (its NVML reader is a thread) exits
 * with 66 if it saw a race: a SIGTERM must end it with 0. */
static void stop_daemon(pid_t pid, int sig)
{
    int st;
    kill(pid, sig);
    CHECK(waitpid(pid, &st, 0) == pid);
    if (sig == SIGTERM)
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* This process's entry in the ledger: grant and used, or -1 if absent. */
static int my_entry(uint64_t *grant, uint64_t *used)
{
    struct snapshot s;
    char err[256];
    int found = -1;
    if (snapshot_fetch(sock, &s, err, sizeof err) != 0)
        return -1;
    for (int i = 0; i < s.n; i++)
        if (s.e[i].pid == getpid()) {
            *grant = s.e[i].grant;
            *used = s.e[i].used;
            found = 0;
        }
    snapshot_free(&s);
    return found;
}

static bool wait_for_used(uint64_t want_grant, bool nonzero_use)
{
    for (int i = 0; i < 100; i++) { /* 5 s */
        uint64_t g, u;
        if (my_entry(&g, &u) == 0 && g == want_grant && (!nonzero_use || u > 0))
            return true;
        usleep(50000);
    }
    return false;
}

static void *allocate(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200; i++) {
        void *p;
        if (vram_malloc(0, 8 * MiB, NULL, &p) == VRAM_OK)
            CHECK_OK(vram_free(p, NULL));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    vramd = argv[1];
    private_gpu("4GiB");
    const char *dir = getenv("VRAM_SIM_DIR");
    snprintf(sock, sizeof sock, "%s/vramd.sock", dir);
    snprintf(state, sizeof state, "%s/vramd.state", dir);
    snprintf(policy, sizeof policy, "%s/policy.conf", dir);
    FILE *f = fopen(policy, "w");
    fprintf(f, "default-budget 1GiB\nwhen-full fail\nreconcile-every 50ms\n");
    fclose(f);
    setenv("VRAM_DAEMON", sock, 1);
    setenv("VRAM_ALLOW_GROWTH", "true", 1);
    pid_t d = start_daemon();

    /* No limit configured: the policy's default budget is the limit. */
    CHECK_OK(vram_init());
    vram_device_info info;
    CHECK_OK(vram_device_get_info(0, &info));
    CHECK(info.limit == 1 * GiB);
    void *keep;
    CHECK_OK(vram_malloc(0, 64 * MiB, NULL, &keep));
    void *big;
    CHECK_STATUS(vram_malloc(0, 1 * GiB, NULL, &big), VRAM_ERROR_OUT_OF_MEMORY);

    /* Usage reaches the daemon while threads allocate. */
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, allocate, NULL) == 0);
    CHECK(wait_for_used(1 * GiB, true));
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);

    /* The daemon dies and comes back: the limit held meanwhile, and the grant
     * is registered again, once. */
    stop_daemon(d, SIGKILL);
    CHECK_STATUS(vram_malloc(0, 1 * GiB, NULL, &big), VRAM_ERROR_OUT_OF_MEMORY);
    d = start_daemon();
    CHECK(wait_for_used(1 * GiB, true));

    /* A child after fork holds nothing of the parent's, and cannot allocate
     * under the parent's grant: as with the real driver, CUDA refuses a
     * child forked after its parent initialised it. */
    pid_t c = fork();
    if (c == 0) {
        void *p;
        _exit(vram_malloc(0, 1 * MiB, NULL, &p) == VRAM_OK ? 1 : 0);
    }
    int st;
    waitpid(c, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(wait_for_used(1 * GiB, true));

    CHECK_OK(vram_free(keep, NULL));
    vram_shutdown();
    stop_daemon(d, SIGTERM);
    printf("test_agent: ok\n");
    return 0;
}
