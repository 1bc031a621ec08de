/* vramd under load: 1,000 clients connected at once, registering and
 * reporting as the agent does; admission latency (REQUEST to GRANT) and
 * reclaim time (SIGKILL of a holder to its grant back in the ledger).
 *
 *   vram-bench-daemon VRAMD   (the simulated NVML on LD_LIBRARY_PATH)
 */
#include "../src/ledger/client.h"
#include "../src/ledger/snapshot.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CLIENTS 1000
#define THREADS 4

static char sock[256], uuid[64];
static int fds[CLIENTS];
static double reg_lat[CLIENTS];
static volatile int reporting = 1;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void die(const char *what)
{
    fprintf(stderr, "vram-bench-daemon: %s\n", what);
    exit(1);
}

/* HELLO + REQUEST on a new connection; the REQUEST's round trip in µs. */
static double join(int *fd_out, unsigned long long bytes)
{
    struct proto_writer w;
    struct proto_msg m;
    char err[256];
    int fd = ledger_connect(sock);
    if (fd < 0)
        die("connect");
    proto_begin(&w, VERB_HELLO);
    proto_add(&w, "role", "process");
    proto_add(&w, "cmd", "bench");
    if (ledger_send(fd, &w) || ledger_recv(fd, &m, 5000, err, sizeof err) || m.verb != VERB_OK)
        die("hello");
    proto_begin(&w, VERB_REQUEST);
    proto_add(&w, "dev", uuid);
    proto_add_u64(&w, "total", 0);
    proto_add_u64(&w, "bytes", bytes);
    double t0 = now_us();
    if (ledger_send(fd, &w) || ledger_recv(fd, &m, 5000, err, sizeof err) || m.verb != VERB_GRANT)
        die("request not granted");
    *fd_out = fd;
    return now_us() - t0;
}

static void *registrar(void *arg)
{
    long k = (long)arg;
    for (int i = (int)k; i < CLIENTS; i += THREADS)
        reg_lat[i] = join(&fds[i], 1 << 20);
    return NULL;
}

static void *reporter(void *arg)
{
    long k = (long)arg;
    unsigned long long tick = 0;
    while (reporting) {
        for (int i = (int)k; i < CLIENTS; i += THREADS) {
            struct proto_writer w;
            proto_begin(&w, VERB_REPORT);
            proto_add(&w, "dev", uuid);
            proto_add_u64(&w, "used", (tick % 7) << 20);
            proto_add_u64(&w, "peak", 8 << 20);
            ledger_send(fds[i], &w);
        }
        tick++;
        usleep(200000); /* every client reports at 5 Hz, as the agent at most does */
    }
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summary(const char *what, double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    printf("%-44s p50 %7.1f us  p99 %7.1f us  max %7.1f us  (n=%d)\n", what, v[n / 2],
           v[(int)(n * 0.99)], v[n - 1], n);
}

static unsigned long long granted(void)
{
    struct snapshot s;
    char err[256];
    if (snapshot_fetch(sock, &s, err, sizeof err) != 0)
        die(err);
    unsigned long long g = s.ndev ? s.dev[0].granted : 0;
    snapshot_free(&s);
    return g;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: vram-bench-daemon VRAMD");
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    char dir[] = "/tmp/vram-bench.XXXXXX";
    if (!mkdtemp(dir))
        die("mkdtemp");
    setenv("VRAM_SIM_DIR", dir, 1);
    setenv("VRAM_SIM_DEVICES", "80GiB", 1);
    snprintf(sock, sizeof sock, "%s/vramd.sock", dir);
    char policy[300];
    snprintf(policy, sizeof policy, "%s/policy", dir);
    FILE *f = fopen(policy, "w");
    fprintf(f, "reconcile-every 1s\n");
    fclose(f);
    pid_t d = fork();
    if (d == 0) {
        execl(argv[1], argv[1], "--socket", sock, "--policy", policy, "--log", "error",
              (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500 && access(sock, F_OK) != 0; i++)
        usleep(10000);
    /* The device's UUID, from the ledger (NVML's). */
    struct snapshot first;
    char err[256];
    if (snapshot_fetch(sock, &first, err, sizeof err) != 0 || first.ndev == 0)
        die("no device in the ledger (is the simulated NVML on LD_LIBRARY_PATH?)");
    snprintf(uuid, sizeof uuid, "%s", first.dev[0].uuid);
    snapshot_free(&first);

    pthread_t t[THREADS + 1];
    double t0 = now_us();
    for (long k = 0; k < THREADS; k++)
        pthread_create(&t[k], NULL, registrar, (void *)k);
    for (int k = 0; k < THREADS; k++)
        pthread_join(t[k], NULL);
    printf("%d clients registered in %.1f ms (%d threads)\n", CLIENTS, (now_us() - t0) / 1e3,
           THREADS);
    summary("admission while 1000 clients register:", reg_lat, CLIENTS);

    for (long k = 0; k < THREADS; k++)
        pthread_create(&t[k], NULL, reporter, (void *)k);
    static double lat[400];
    int n = 0;
    for (; n < 400; n++) { /* new clients come and go while the 1000 report */
        int fd;
        lat[n] = join(&fd, 1 << 20);
        close(fd);
        usleep(5000);
    }
    reporting = 0;
    for (int k = 0; k < THREADS; k++)
        pthread_join(t[k], NULL);
    summary("admission while 1000 clients report at 5 Hz:", lat, n);

    static double reclaim[50];
    unsigned long long base = granted();
    for (int r = 0; r < 50; r++) {
        int p[2];
        if (pipe(p))
            die("pipe");
        pid_t c = fork();
        if (c == 0) {
            int fd;
            join(&fd, 1ull << 30);
            if (write(p[1], "x", 1) != 1)
                _exit(1);
            for (;;)
                pause();
        }
        char x;
        if (read(p[0], &x, 1) != 1)
            die("holder");
        close(p[0]);
        close(p[1]);
        double k0 = now_us();
        kill(c, SIGKILL);
        while (granted() != base)
            ;
        reclaim[r] = now_us() - k0;
        waitpid(c, NULL, 0);
    }
    summary("reclaim: SIGKILL to grant back (1000 connected):", reclaim, 50);
    for (int i = 0; i < CLIENTS; i++)
        close(fds[i]);
    kill(d, SIGTERM);
    waitpid(d, NULL, 0);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return 0;
}
