/* vramd under load: 1,000 clients connected at once, registering and
 * reporting as the agent does; admission latency (REQUEST to GRANT) and
 * reclaim time (SIGKILL of a holder to its grant back in the ledger). Then,
 * as root, under attack (issue 11): one user (uid 60001) opens 20,000
 * connections and leaves them idle, another (uid 60002) has 2,000 requests
 * waiting on its cap, and the admission of a third user's requests (uid
 * 60003) is measured meanwhile. Last (issue 22), one user (uid 60004) with
 * 100 jobs each naming 1,000 of its own processes (MEMBER): root's STATUS
 * and another user's admission before and after, and vramd's memory.
 *
 *   vram-bench-daemon VRAMD   (the simulated NVML on LD_LIBRARY_PATH)
 */
#include "../src/client/client.h"
#include "../src/client/fetch.h"
#include "../src/protocol/history_view.h"
#include "../src/protocol/snapshot.h"

#include <dirent.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CLIENTS 1000
#define THREADS 4
#define IDLE 20000         /* the attacker's connections */
#define IDLE_PROCS 4       /* in processes of their own, for their descriptors */
#define WAITERS 2000
#define ATTACKER 60001
#define WAITING_USER 60002
#define MEASURED 60003
#define MEMBERS_USER 60004
#define MEMBER_JOBS 100
#define MEMBER_PIDS 1000
#define IDLE_HOLDERS 10000   /* issue 26: clients holding a grant and saying nothing more */
#define HOLDER_USERS 4       /* 2,500 each: more than the 2,048 series the history keeps a user */
#define HOLDER_UID 60010

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

/* HELLO + REQUEST on a new connection; the REQUEST's round trip in µs,
 * each answer awaited at most `timeout_ms`; -1 if one did not come, or
 * was not what was asked for. */
static double try_join(int *fd_out, unsigned long long bytes, int timeout_ms)
{
    struct proto_writer w;
    struct proto_msg m;
    char err[256];
    int fd = ledger_connect(sock);
    if (fd < 0)
        return -1;
    proto_begin(&w, VERB_HELLO);
    proto_add(&w, "role", "process");
    proto_add(&w, "cmd", "bench");
    if (ledger_send(fd, &w) || ledger_recv(fd, &m, timeout_ms, err, sizeof err) ||
        m.verb != VERB_OK) {
        close(fd);
        return -1;
    }
    proto_begin(&w, VERB_REQUEST);
    proto_add(&w, "dev", uuid);
    proto_add_u64(&w, "total", 0);
    proto_add_u64(&w, "bytes", bytes);
    double t0 = now_us();
    if (ledger_send(fd, &w) || ledger_recv(fd, &m, timeout_ms, err, sizeof err) ||
        m.verb != VERB_GRANT) {
        close(fd);
        return -1;
    }
    *fd_out = fd;
    return now_us() - t0;
}

static double join(int *fd_out, unsigned long long bytes)
{
    double us = try_join(fd_out, bytes, 5000);
    if (us < 0)
        die("a request not granted within 5 s");
    return us;
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

/* What the first device has granted: the first page of a STATUS (the
 * devices come first), on a connection kept open for it. */
static unsigned long long granted(void)
{
    static int fd = -1;
    if (fd < 0)
        fd = ledger_connect(sock);
    struct proto_writer w;
    struct proto_msg m;
    char err[256];
    unsigned long long g = 0;
    proto_begin(&w, VERB_STATUS);
    if (fd < 0 || ledger_send(fd, &w) != 0)
        die("status");
    bool first = true;
    while (ledger_recv(fd, &m, 5000, err, sizeof err) == 0 && m.verb != VERB_END) {
        uint64_t v;
        if (m.verb == VERB_DEV && first && proto_get_u64(&m, "granted", UINT64_MAX, &v, err,
                                                         sizeof err) == 0) {
            g = v;
            first = false;
        }
    }
    return g;
}

/* Becomes another user (the bench runs as root). */
static void become(uid_t uid)
{
    if (setresgid(uid, uid, uid) != 0 || setgroups(0, NULL) != 0 || setresuid(uid, uid, uid) != 0)
        die("cannot change user");
}

/* The attacker: `n` connections that say nothing, kept open; prints how
 * many the daemon kept (the others it refused and closed). */
static void idle_connections(int n, int out)
{
    static int fd[IDLE];
    int made = 0, kept = 0;
    for (; made < n; made++)
        if ((fd[made] = ledger_connect(sock)) < 0)
            break;
    /* The refused get their ERR and are closed: count until that settles
     * (the daemon may still be working through its backlog). */
    for (int last = -1, round = 0; round < 25 && kept != last; round++) {
        usleep(200000);
        last = kept;
        kept = 0;
        for (int i = 0; i < made; i++) {
            struct pollfd p = {.fd = fd[i], .events = POLLIN};
            kept += poll(&p, 1, 0) == 0;
        }
    }
    char line[64];
    int len = snprintf(line, sizeof line, "%d %d\n", made, kept);
    if (write(out, line, (size_t)len) != len)
        _exit(1);
    for (;;)
        pause();
}

/* `n` connections, each saying HELLO (with the job name, if any) and
 * asking for `bytes` (waiting up to `wait_ms`, if not 0), held open; how
 * many were answered `verb` is printed to `out`, then they are held until
 * the process is killed. */
static void held_requests(int n, int out, const char *job, uint64_t bytes, uint64_t wait_ms,
                          enum proto_verb verb)
{
    int answered = 0;
    for (int i = 0; i < n; i++) {
        struct proto_writer w;
        struct proto_msg m;
        char err[256];
        int fd = ledger_connect(sock);
        if (fd < 0)
            break;
        proto_begin(&w, VERB_HELLO);
        proto_add(&w, "role", "process");
        if (job)
            proto_add(&w, "job", job);
        if (ledger_send(fd, &w) || ledger_recv(fd, &m, 5000, err, sizeof err))
            break;
        proto_begin(&w, VERB_REQUEST);
        proto_add(&w, "dev", uuid);
        proto_add_u64(&w, "bytes", bytes);
        if (wait_ms)
            proto_add_u64(&w, "wait", wait_ms);
        if (ledger_send(fd, &w) || ledger_recv(fd, &m, 5000, err, sizeof err))
            break;
        answered += m.verb == verb;
    }
    char line[32];
    int len = snprintf(line, sizeof line, "%d\n", answered);
    if (write(out, line, (size_t)len) != len)
        _exit(1);
    for (;;)
        pause();
}

/* The waiting user: `n` requests that wait on the user's cap; prints how
 * many wait. */
static void waiting_requests(int n, int out)
{
    held_requests(n, out, "queue", 256 << 20, 3600000, VERB_WAIT);
}

/* An idle holder: `n` clients granted 1 MiB each, then silent; prints how
 * many were granted. */
static void idle_holders(int n, int out) { held_requests(n, out, NULL, 1 << 20, 0, VERB_GRANT); }

static pid_t as_user(uid_t uid, void (*work)(int, int), int n, int out)
{
    pid_t c = fork();
    if (c == 0) {
        become(uid);
        work(n, out);
        _exit(0);
    }
    return c;
}

static int read_line(int fd, char *buf, size_t n)
{
    size_t k = 0;
    while (k + 1 < n && read(fd, buf + k, 1) == 1 && buf[k] != '\n')
        k++;
    buf[k] = 0;
    return (int)k;
}

/* Another user's admission: `n` joins as uid MEASURED, one every
 * `every_us`, in a child (while this process's others attack). */
static void measured_admission(double *lat, int n, useconds_t every_us)
{
    int m[2];
    if (pipe(m))
        die("pipe");
    pid_t c = fork();
    if (c == 0) {
        become(MEASURED);
        close(m[0]);
        for (int i = 0; i < n; i++) {
            int fd;
            /* A slow answer is what is measured: waited for, up to a minute. */
            if ((lat[i] = try_join(&fd, 1 << 20, 60000)) < 0)
                _exit(1);
            close(fd);
            usleep(every_us);
        }
        if (write(m[1], lat, (size_t)n * sizeof *lat) != (ssize_t)((size_t)n * sizeof *lat))
            _exit(1);
        _exit(0);
    }
    close(m[1]); /* so that a child that ends without writing is an end of file */
    size_t got = 0, want = (size_t)n * sizeof *lat;
    while (got < want) {
        ssize_t r = read(m[0], (char *)lat + got, want - got);
        if (r <= 0)
            die("the measured user's request was not granted within a minute");
        got += (size_t)r;
    }
    waitpid(c, NULL, 0);
    close(m[0]);
}

/* A process's CPU time so far (user and system), in seconds. */
static double cpu_seconds(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Issue 26: 10,000 clients of four users, each holding 1 MiB and saying
 * nothing more, more than the history keeps series for: what the daemon
 * costs meanwhile, and another user's admission, over a few of the
 * history's once-a-second samplings. */
static void idle_clients(pid_t daemon)
{
    if (geteuid() != 0) {
        printf("10000 idle clients: skipped (other users' connections need root to make)\n");
        return;
    }
    int p[2];
    if (pipe(p))
        die("pipe");
    pid_t holders[HOLDER_USERS];
    double t0 = now_us();
    for (int k = 0; k < HOLDER_USERS; k++)
        holders[k] = as_user(HOLDER_UID + k, idle_holders, IDLE_HOLDERS / HOLDER_USERS, p[1]);
    int granted = 0;
    for (int k = 0; k < HOLDER_USERS; k++) {
        char line[32];
        read_line(p[0], line, sizeof line);
        granted += atoi(line);
    }
    double setup_ms = (now_us() - t0) / 1e3;
    sleep(2); /* the history's samplings take them in */
    /* What the daemon costs while nothing happens but its once-a-second
     * work (CPU time: other programs on the machine do not count). */
    double c0 = cpu_seconds(daemon), w0 = now_us();
    sleep(5);
    double idle_cpu = (cpu_seconds(daemon) - c0) / ((now_us() - w0) / 1e6);
    static double lat[1000];
    measured_admission(lat, 1000, 3000);
    printf("%d idle clients of %d users holding 1 MiB each (granted in %.0f ms); vramd meanwhile: "
           "%.1f%% of a core\n", granted, HOLDER_USERS, setup_ms, idle_cpu * 100);
    summary("admission of uid 60003 with 10000 idle:", lat, 1000);
    for (int k = 0; k < HOLDER_USERS; k++)
        kill(holders[k], SIGKILL);
    for (int k = 0; k < HOLDER_USERS; k++)
        waitpid(holders[k], NULL, 0);
    close(p[0]);
    close(p[1]);
}

static void under_attack(void)
{
    if (geteuid() != 0) {
        printf("under attack: skipped (another user's connections need root to make)\n");
        return;
    }
    int p[2];
    if (pipe(p))
        die("pipe");
    /* The waiting user holds its cap, then queues 2,000 requests on it. */
    pid_t waiter = as_user(WAITING_USER, waiting_requests, WAITERS + 1, p[1]); /* the first is granted */
    char line[64];
    read_line(p[0], line, sizeof line);
    int waiting = atoi(line);
    /* The attacker floods while the third user's admission is measured. */
    pid_t idle[IDLE_PROCS];
    for (int k = 0; k < IDLE_PROCS; k++)
        idle[k] = as_user(ATTACKER, idle_connections, IDLE / IDLE_PROCS, p[1]);
    static double lat[400];
    measured_admission(lat, 400, 5000);
    int made = 0, kept = 0;
    for (int k = 0; k < IDLE_PROCS; k++) {
        read_line(p[0], line, sizeof line);
        int a = 0, b = 0;
        sscanf(line, "%d %d", &a, &b);
        made += a, kept += b;
    }
    printf("under attack: uid %d opened %d idle connections (the daemon kept %d, refused the "
           "rest); uid %d has %d requests waiting on its cap\n",
           ATTACKER, made, kept, WAITING_USER, waiting);
    summary("admission of uid 60003 meanwhile:", lat, 400);
    for (int k = 0; k < IDLE_PROCS; k++)
        kill(idle[k], SIGKILL);
    kill(waiter, SIGKILL);
    for (int k = 0; k < IDLE_PROCS; k++)
        waitpid(idle[k], NULL, 0);
    waitpid(waiter, NULL, 0);
    close(p[0]);
    close(p[1]);
}

/* Root's whole STATUS (every page), in µs, and the entries it had. */
static double status_us(int *entries)
{
    struct snapshot s;
    char err[256];
    double t0 = now_us();
    if (snapshot_fetch(sock, &s, err, sizeof err) != 0)
        die(err);
    double t = now_us() - t0;
    *entries = s.n;
    snapshot_free(&s);
    return t;
}

static void *parked(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

/* The member attacker: MEMBER_PIDS threads of its own (each a pid /proc
 * knows, of this user), then MEMBER_JOBS jobs each naming all of them;
 * writes how many MEMBERs it sent and how many were refused, then holds. */
static void member_flood(int n, int out)
{
    (void)n;
    static pid_t tids[MEMBER_PIDS];
    /* A process that changed its uid is not dumpable, and then /proc/PID
     * is root's: the daemon would not take it for this user's. */
    prctl(PR_SET_DUMPABLE, 1);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 64 << 10);
    for (int i = 0; i < MEMBER_PIDS; i++) {
        pthread_t t;
        if (pthread_create(&t, &at, parked, NULL) != 0)
            break;
    }
    /* The threads' ids, from /proc: each is a pid the daemon can look up. */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)getpid());
    DIR *dir = opendir(path);
    struct dirent *e;
    int k = 0;
    while (dir && k < MEMBER_PIDS && (e = readdir(dir)))
        if (atoi(e->d_name) > 0 && atoi(e->d_name) != getpid())
            tids[k++] = atoi(e->d_name);
    if (dir)
        closedir(dir);
    long sent = 0, refused = 0;
    static int jfd[MEMBER_JOBS];
    for (int j = 0; j < MEMBER_JOBS; j++) {
        struct proto_writer w;
        struct proto_msg m;
        char err[256], name[32];
        int fd = jfd[j] = ledger_connect(sock);
        if (fd < 0)
            break;
        snprintf(name, sizeof name, "flood-%d", j);
        proto_begin(&w, VERB_HELLO);
        proto_add(&w, "role", "command");
        proto_add(&w, "job", name);
        if (ledger_send(fd, &w) || ledger_recv(fd, &m, 5000, err, sizeof err))
            break;
        proto_begin(&w, VERB_REQUEST);
        proto_add(&w, "dev", uuid);
        proto_add_u64(&w, "bytes", 1 << 20);
        if (ledger_send(fd, &w) || ledger_recv(fd, &m, 5000, err, sizeof err) || m.verb != VERB_GRANT)
            break;
        for (int i = 0; i < k; i++) {
            proto_begin(&w, VERB_MEMBER);
            proto_add_u64(&w, "pid", (uint64_t)tids[i]);
            proto_add(&w, "dev", uuid);
            proto_add_u64(&w, "used", 0);
            proto_add_u64(&w, "peak", 1 << 20); /* a peak: each is an entry of root's status */
            if (ledger_send(fd, &w) != 0)
                break;
            sent++;
            while (ledger_recv(fd, &m, 0, err, sizeof err) == 0) /* the ERRs past the cap */
                refused += m.verb == VERB_ERR;
        }
    }
    /* The answers still on their way. */
    for (int j = 0; j < MEMBER_JOBS; j++) {
        struct proto_msg m;
        char err[256];
        while (jfd[j] > 0 && ledger_recv(jfd[j], &m, 200, err, sizeof err) == 0)
            refused += m.verb == VERB_ERR;
    }
    char line[64];
    int len = snprintf(line, sizeof line, "%ld %ld\n", sent, refused);
    if (write(out, line, (size_t)len) != len)
        _exit(1);
    for (;;)
        pause();
}

static long rss_kib(pid_t pid);

static void member_attack(pid_t daemon)
{
    if (geteuid() != 0) {
        printf("member attack: skipped (another user's processes need root to make)\n");
        return;
    }
    static double before[100], after[100];
    int e0, e1;
    double s0 = status_us(&e0);
    measured_admission(before, 100, 2000);
    long rss0 = rss_kib(daemon);
    int p[2];
    if (pipe(p))
        die("pipe");
    double t0 = now_us();
    pid_t flood = as_user(MEMBERS_USER, member_flood, 0, p[1]);
    char line[64];
    read_line(p[0], line, sizeof line);
    double flood_ms = (now_us() - t0) / 1e3;
    long sent = 0, refused = 0;
    sscanf(line, "%ld %ld", &sent, &refused);
    double s1 = status_us(&e1);
    measured_admission(after, 100, 2000);
    printf("member attack: uid %d, %d jobs naming %d of its pids each: %ld MEMBERs in %.0f ms, "
           "%ld refused (a user's jobs list at most 4096)\n", MEMBERS_USER, MEMBER_JOBS,
           MEMBER_PIDS, sent, flood_ms, refused);
    printf("root's STATUS: %.1f ms (%d entries) before, %.1f ms (%d entries) during; vramd's "
           "memory %ld KiB before, %ld KiB during\n", s0 / 1e3, e0, s1 / 1e3, e1, rss0,
           rss_kib(daemon));
    summary("admission of uid 60003 before:", before, 100);
    summary("admission of uid 60003 during:", after, 100);
    kill(flood, SIGKILL);
    waitpid(flood, NULL, 0);
    close(p[0]);
    close(p[1]);
}

/* The daemon's resident memory, KiB. */
static long rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
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
    if (!mkdtemp(dir) || chmod(dir, 0755) != 0) /* other users reach the socket in it */
        die("mkdtemp");
    setenv("VRAM_SIM_DIR", dir, 1);
    setenv("VRAM_SIM_DEVICES", "80GiB", 1);
    snprintf(sock, sizeof sock, "%s/vramd.sock", dir);
    char policy[300];
    snprintf(policy, sizeof policy, "%s/policy", dir);
    FILE *f = fopen(policy, "w");
    /* The waiting user's cap holds its queue; the measured user's requests
     * are not behind it. */
    fprintf(f, "reconcile-every 1s\ncap user %d 256MiB\nwhen-full wait 1h\n", WAITING_USER);
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
    long rss_idle = rss_kib(d);

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
    /* The history of every client: what root's vram status --json fetches. */
    struct history_view hv;
    double h0 = now_us();
    if (history_fetch(sock, NULL, false, &hv, err, sizeof err) != 0)
        die(err);
    printf("history of %d series (the last hour) fetched in %.1f ms; vramd's memory: %ld KiB "
           "before the clients, %ld KiB with them\n", hv.n, (now_us() - h0) / 1e3, rss_idle,
           rss_kib(d));
    history_view_free(&hv);

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
    idle_clients(d);
    under_attack();
    member_attack(d);
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
