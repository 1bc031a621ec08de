/* vramd's admission with the driver's per-cgroup limits on (issue 26 item
 * 8): each job's grant makes a cgroup, moves the job's holder into it and
 * sets the driver's limit there (the simulated R615, VRAM_SIM_DRIVER=615).
 * Measured, REQUEST to GRANT:
 *   - a job's admission (HELLO role=command, REQUEST: what vram run waits
 *     for before it starts the command), one job at a time, each from a
 *     process of its own that then ends (the job's end removes its cgroup);
 *     under driver 580 too (no limits: the cost of the rest);
 *   - another user's admission (a process's REQUEST, no job) while a user
 *     churns jobs from CHURNERS processes: what the work of the churner's
 *     grants costs everyone else.
 * Needs root and a cgroup2 hierarchy it can write (the jobs' cgroups are
 * made below the bench's own, a cgroup it makes and removes); says why and
 * skips otherwise.
 *
 *   vram-bench-limits VRAMD   (the simulated NVML on LD_LIBRARY_PATH)
 */
#include "../src/client/client.h"
#include "../src/client/fetch.h"
#include "../src/protocol/snapshot.h"
#include "timing.h"

#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define JOBS 200
#define MEASURED 300
#define CHURNERS 2
#define JOB_USER 60005
#define OTHER_USER 60006

static char sock[256], uuid[64], dir[64], cgroup[512];

static void die(const char *what)
{
    fprintf(stderr, "vram-bench-limits: %s\n", what);
    exit(1);
}

static void become(uid_t uid)
{
    if (setresgid(uid, uid, uid) != 0 || setgroups(0, NULL) != 0 || setresuid(uid, uid, uid) != 0)
        die("cannot change user");
}

/* HELLO with `role`, then REQUEST of 64 MiB: the REQUEST's round trip in
 * µs, or a negative number if it was not granted. The connection is left
 * open in *fd. */
static double admit(const char *role, int *fd)
{
    struct proto_writer w;
    struct proto_msg m;
    char err[256];
    *fd = ledger_connect(sock);
    if (*fd < 0)
        return -1;
    proto_begin(&w, VERB_HELLO);
    proto_add(&w, "role", role);
    proto_add(&w, "cmd", "bench");
    if (ledger_send(*fd, &w) || ledger_recv(*fd, &m, 10000, err, sizeof err) || m.verb != VERB_OK)
        return -1;
    proto_begin(&w, VERB_REQUEST);
    proto_add(&w, "dev", uuid);
    proto_add_u64(&w, "bytes", 64 << 20);
    double t0 = now();
    if (ledger_send(*fd, &w) || ledger_recv(*fd, &m, 10000, err, sizeof err) ||
        m.verb != VERB_GRANT)
        return -1;
    return (now() - t0) / 1e3;
}

/* One job from a process of its own (its holder, as vram run is), as
 * JOB_USER; its latency through a pipe. */
static double one_job(void)
{
    int p[2];
    if (pipe(p))
        die("pipe");
    pid_t c = fork();
    if (c == 0) {
        become(JOB_USER);
        int fd;
        double us = admit("command", &fd);
        if (write(p[1], &us, sizeof us) != sizeof us)
            _exit(1);
        _exit(0);
    }
    double us = -1;
    if (read(p[0], &us, sizeof us) != sizeof us)
        us = -1;
    waitpid(c, NULL, 0);
    close(p[0]);
    close(p[1]);
    return us;
}

static void summary(const char *what, double *v, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++)
        if (v[i] >= 0)
            v[ok++] = v[i];
    if (!ok) {
        printf("%-52s none granted\n", what);
        return;
    }
    qsort(v, (size_t)ok, sizeof *v, cmp);
    printf("%-52s p50 %7.1f us  p99 %7.1f us  max %7.1f us  (n=%d%s)\n", what, v[ok / 2],
           v[(int)(ok * 0.99)], v[ok - 1], ok, ok < n ? ", some refused" : "");
}

static pid_t start_daemon(const char *driver)
{
    setenv("VRAM_SIM_DRIVER", driver, 1);
    unlink(sock);
    pid_t d = fork();
    if (d == 0) {
        char state[128];
        snprintf(state, sizeof state, "%s/state", dir);
        execl(getenv("VRAMD"), "vramd", "--socket", sock, "--state", state, "--log", "error",
              (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1000; i++) {
        int fd = ledger_connect(sock);
        if (fd >= 0) {
            close(fd);
            return d;
        }
        usleep(10000);
    }
    die("vramd did not start");
    return -1;
}

static void stop_daemon(pid_t d)
{
    kill(d, SIGTERM);
    waitpid(d, NULL, 0);
}

/* Jobs one after another, their admission in lat[]. */
static void jobs(double *lat, int n)
{
    for (int i = 0; i < n; i++) {
        lat[i] = one_job();
        usleep(2000);
    }
}

/* A churner: jobs as fast as they come, until killed. */
static void churn(void)
{
    for (;;)
        one_job();
}

/* OTHER_USER's admission, `n` requests 5 ms apart, in a child. */
static void others(double *lat, int n)
{
    int p[2];
    if (pipe(p))
        die("pipe");
    pid_t c = fork();
    if (c == 0) {
        become(OTHER_USER);
        for (int i = 0; i < n; i++) {
            int fd;
            lat[i] = admit("process", &fd);
            close(fd);
            usleep(5000);
        }
        if (write(p[1], lat, (size_t)n * sizeof *lat) != (ssize_t)((size_t)n * sizeof *lat))
            _exit(1);
        _exit(0);
    }
    size_t got = 0, want = (size_t)n * sizeof *lat;
    while (got < want) {
        ssize_t r = read(p[0], (char *)lat + got, want - got);
        if (r <= 0)
            die("the measured user's process");
        got += (size_t)r;
    }
    waitpid(c, NULL, 0);
    close(p[0]);
    close(p[1]);
}

/* The cgroup2 mount (of the whole hierarchy) and this process's cgroup in
 * it; the bench's cgroup is made below that and this process moved in. */
static int enter_cgroup(char *why, size_t n)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[4096], mount[256] = "";
    while (f && fgets(line, sizeof line, f)) {
        char root[8], point[256], *sep = strstr(line, " - ");
        if (sep && strncmp(sep + 3, "cgroup2 ", 8) == 0 &&
            sscanf(line, "%*s %*s %*s %7s %255s", root, point) == 2 && strcmp(root, "/") == 0) {
            snprintf(mount, sizeof mount, "%s", point);
            break;
        }
    }
    if (f)
        fclose(f);
    char here[256] = "";
    f = fopen("/proc/self/cgroup", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "0::", 3) == 0)
            sscanf(line + 3, "%255s", here);
    if (f)
        fclose(f);
    if (!mount[0] || !here[0]) {
        snprintf(why, n, "no cgroup2 hierarchy is mounted, or this process is in none");
        return -1;
    }
    snprintf(cgroup, sizeof cgroup, "%s%s/vram-bench-%d", mount, strcmp(here, "/") ? here : "",
             (int)getpid());
    if (mkdir(cgroup, 0755) != 0) {
        snprintf(why, n, "cannot make %s: %s", cgroup, strerror(errno));
        return -1;
    }
    char procs[600];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", cgroup);
    f = fopen(procs, "w");
    if (!f || fprintf(f, "%d", (int)getpid()) < 0 || fclose(f) != 0) {
        snprintf(why, n, "cannot move into %s", cgroup);
        rmdir(cgroup);
        return -1;
    }
    return 0;
}

/* Back where it came from, the bench's cgroups removed (deepest first). */
static void leave_cgroup(void)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "up=$(dirname '%s'); for d in $(find '%s' -depth -type d); do "
             "for p in $(cat \"$d/cgroup.procs\"); do echo $p >\"$up/cgroup.procs\" 2>/dev/null; done; "
             "rmdir \"$d\" 2>/dev/null; done", cgroup, cgroup);
    if (system(cmd) != 0)
        fprintf(stderr, "vram-bench-limits: could not remove %s\n", cgroup);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: vram-bench-limits VRAMD");
    char why[600];
    if (geteuid() != 0) {
        printf("admission with driver limits: skipped (making cgroups and setting the driver's "
               "limits need root)\n");
        return 0;
    }
    if (enter_cgroup(why, sizeof why) != 0) {
        printf("admission with driver limits: skipped (%s)\n", why);
        return 0;
    }
    setenv("VRAMD", argv[1], 1);
    snprintf(dir, sizeof dir, "/tmp/vram-bench-limits.XXXXXX");
    if (!mkdtemp(dir) || chmod(dir, 0755) != 0) /* other users reach the socket in it */
        die("mkdtemp");
    setenv("VRAM_SIM_DIR", dir, 1);
    setenv("VRAM_SIM_DEVICES", "80GiB", 1);
    snprintf(sock, sizeof sock, "%s/vramd.sock", dir);

    static double lat[JOBS], other[MEASURED];
    for (int k = 0; k < 2; k++) {
        const char *driver = k ? "615" : "580";
        pid_t d = start_daemon(driver);
        struct snapshot first;
        if (snapshot_fetch(sock, &first, why, sizeof why) != 0 || first.ndev == 0)
            die("no device in the ledger (is the simulated NVML on LD_LIBRARY_PATH?)");
        snprintf(uuid, sizeof uuid, "%s", first.dev[0].uuid);
        snapshot_free(&first);
        char what[80];
        jobs(lat, JOBS);
        snprintf(what, sizeof what, "driver %s: a job's admission (%s):", driver,
                 k ? "cgroup and limit" : "no limits");
        summary(what, lat, JOBS);
        if (k) {
            others(other, MEASURED);
            summary("driver 615: another user's admission, alone:", other, MEASURED);
            pid_t churner[CHURNERS];
            for (int c = 0; c < CHURNERS; c++)
                if ((churner[c] = fork()) == 0)
                    churn();
            others(other, MEASURED);
            for (int c = 0; c < CHURNERS; c++)
                kill(churner[c], SIGKILL);
            for (int c = 0; c < CHURNERS; c++)
                waitpid(churner[c], NULL, 0);
            snprintf(what, sizeof what, "driver 615: another user's, while %d churn jobs:",
                     CHURNERS);
            summary(what, other, MEASURED);
        }
        stop_daemon(d);
    }
    leave_cgroup();
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) != 0;
}
