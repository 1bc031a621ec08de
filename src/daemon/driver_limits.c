/* driver_limits: each job's grant held by the driver's per-cgroup limit
 * too, where NVML has one (see driver_limits.h). */
#include "driver_limits.h"

#include "../cuda/nvml_limits.h"
#include "../util/parse.h"
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_LEN 512
#define JOB_PREFIX "vram-job-"
#define PENDING_TRIES 200 /* 10 s of the daemon's 50 ms ticks */

/* A job cgroup: one vramd made (below where the job's first process was)
 * or Slurm's step cgroup, used in place. */
struct dl_job {
    int id; /* the ledger client's; -1: a vramd before this one's, its holder alive */
    pid_t pid; /* the job's holder */
    uint64_t start;
    char path[PATH_LEN]; /* "" until a job root registered has its first task placed */
    bool made;           /* vramd made it: removed at the job's end; else never */
    bool limited[LEDGER_MAX_DEVICES];
};

static struct {
    bool off, on;
    char mount[PATH_LEN];
    char record[600]; /* the state file's .cgroups: the job cgroups, for the next vramd */
    int ngpus;
    nvmlDevice_t dev[LEDGER_MAX_DEVICES];
    PFN_nvmlDeviceSetMemoryLimits_v1 set;
    PFN_nvmlDeviceGetMemoryLimits_v1 get;
    const char *(*error)(nvmlReturn_t rc, char buf[32]);
    struct dl_job *jobs;
    int njobs;
    /* Cgroups that could not be removed yet (a process still exiting in
     * them): tried again on the timer, only while there are any, and for
     * PENDING_TRIES ticks at most. */
    struct dl_pending {
        char path[PATH_LEN];
        int tries;
    } *pending;
    int npending;
} G;

int driver_limits_option(const char *value, char *err, size_t n)
{
    if (strcmp(value, "auto") == 0 || strcmp(value, "off") == 0) {
        G.off = value[1] == 'f';
        return 0;
    }
    snprintf(err, n, "--driver-limits \"%s\": unknown value; accepted: auto (the driver's "
             "per-cgroup limits where NVML has them) or off (the interposer alone)", value);
    return -1;
}

const char *driver_limits_backend(void) { return G.on ? "driver" : "interposer"; }

/* ------------------------------------------------------------ cgroups */

/* Where cgroup2 is mounted, from mountinfo: a mount of the whole hierarchy
 * (root "/"), since cgroup_of() joins the mount point with the paths
 * /proc/PID/cgroup gives from the hierarchy's root; a bind mount of a
 * subtree would put a job's cgroup somewhere else. (sim/cgroup.c reads the
 * same file for the simulated driver, which also follows subtree mounts:
 * the two are separate programs' views and not shared yet.) */
static int find_cgroup2(char *out, size_t n)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char line[4096];
    int found = -1;
    while (found != 0 && fgets(line, sizeof line, f)) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE ... */
        char *sep = strstr(line, " - ");
        char root[8], point[PATH_LEN], type[64];
        if (!sep || sscanf(line, "%*s %*s %*s %7s %511s", root, point) != 2 ||
            strcmp(root, "/") != 0 || sscanf(sep + 3, "%63s", type) != 1 ||
            strcmp(type, "cgroup2") != 0)
            continue;
        /* mountinfo writes a space, tab, newline or backslash as \ooo. */
        size_t k = 0;
        for (const char *p = point; *p && k + 1 < n; k++) {
            if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
                out[k] = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
                p += 4;
            } else {
                out[k] = *p++;
            }
        }
        out[k] = 0;
        found = 0;
    }
    fclose(f);
    return found;
}

static bool is_cgroup_dir(const char *path)
{
    char f[PATH_LEN + 32];
    snprintf(f, sizeof f, "%s/cgroup.procs", path);
    struct stat st;
    return stat(f, &st) == 0 && S_ISREG(st.st_mode);
}

/* A path in the hierarchy as /proc/PID/cgroup writes it ("/a/b"): no
 * empty, . or .. part, nothing but printable characters. */
static bool hierarchy_path_ok(const char *p)
{
    if (p[0] != '/')
        return false;
    if (!p[1])
        return true;
    for (const char *part = p + 1;;) {
        size_t len = strcspn(part, "/");
        if (len == 0 || (len == 1 && part[0] == '.') || (len == 2 && !strncmp(part, "..", 2)))
            return false;
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)part[i] < 0x20 || part[i] == 0x7f)
                return false;
        if (!part[len])
            return true;
        part += len + 1;
    }
}

/* The cgroup a process is in, as a directory of the mount; -1 if it is
 * gone or not in this hierarchy (or in a cgroup that was removed). */
static int cgroup_of(pid_t pid, char *out, size_t n)
{
    char p[64], line[PATH_LEN];
    snprintf(p, sizeof p, "/proc/%d/cgroup", (int)pid);
    FILE *f = fopen(p, "re");
    if (!f)
        return -1;
    int rc = -1;
    while (rc != 0 && fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::/", 4) != 0)
            continue;
        /* Cut short, it would name an ancestor: a job made there would
         * leave the cgroup its process is in. */
        if (!strchr(line, '\n'))
            break;
        line[strcspn(line, "\n")] = 0;
        if (!hierarchy_path_ok(line + 3))
            break;
        int len = snprintf(out, n, "%s%s", G.mount, strcmp(line + 3, "/") ? line + 3 : "");
        rc = len >= 0 && (size_t)len < n ? 0 : -1;
    }
    fclose(f);
    return rc;
}

/* Whether cgroup `inner` is `outer` or below it. */
static bool at_or_below(const char *inner, const char *outer)
{
    size_t m = strlen(outer);
    return strncmp(inner, outer, m) == 0 && (inner[m] == 0 || inner[m] == '/');
}

/* The cgroup above `path` (where a job cgroup vramd made was made). */
static void parent_of(const char *path, char *out, size_t n)
{
    snprintf(out, n, "%s", path);
    char *slash = strrchr(out, '/');
    if (slash && strlen(out) > strlen(G.mount))
        *slash = 0;
}

/* Moves a process into the cgroup at dir: 0, or an errno. */
static int move_into(const char *dir, pid_t pid)
{
    char f[PATH_LEN + 32], num[24];
    snprintf(f, sizeof f, "%s/cgroup.procs", dir);
    int fd = open(f, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int len = snprintf(num, sizeof num, "%d", (int)pid);
    int rc = write(fd, num, (size_t)len) == len ? 0 : errno;
    close(fd);
    return rc;
}

/* A job cgroup's leftover processes back to the cgroup it was made in,
 * where they came from: never anywhere else, which would take them out of
 * what that cgroup and its ancestors enforce. */
static void move_out(const char *path)
{
    char parent[PATH_LEN], f[PATH_LEN + 32];
    parent_of(path, parent, sizeof parent);
    snprintf(f, sizeof f, "%s/cgroup.procs", path);
    /* A process may fork while its siblings are moved: a few passes. */
    for (int pass = 0; pass < 8; pass++) {
        FILE *in = fopen(f, "re");
        if (!in)
            return;
        int pid, moved = 0;
        while (fscanf(in, "%d", &pid) == 1)
            moved += move_into(parent, pid) == 0;
        fclose(in);
        if (!moved)
            return;
    }
}

/* ------------------------------------------------------------- limits */

static const char *nv_error(nvmlReturn_t rc, char buf[32])
{
    if (G.error)
        return G.error(rc, buf);
    snprintf(buf, 32, "NVML error %d", (int)rc);
    return buf;
}

static nvmlReturn_t set_limits(const char *path, int dev, uint64_t soft, uint64_t hard)
{
    nvmlSetMemoryLimits_v1_t l = {path, soft, hard};
    return G.set(G.dev[dev], &l);
}

static void clear_limits(const char *path, int dev)
{
    nvmlReturn_t rc = set_limits(path, dev, 0, NVML_DEVICE_MEMORY_LIMIT_MAX);
    if (rc != NVML_SUCCESS) {
        static struct log_limit said;
        char buf[32];
        dlog_limited(&said, L_WARN, "cannot clear the driver's limits of %s on GPU %d: %s", path,
                     dev, nv_error(rc, buf));
    }
}

/* Every trace of a job cgroup vramd made: its processes moved back where
 * they came from, its limits cleared on every GPU, the cgroup removed (or
 * kept for the timer to try again, while a process is still leaving it). */
static void remove_cgroup(const char *path)
{
    move_out(path);
    for (int d = 0; d < G.ngpus; d++)
        clear_limits(path, d);
    if (rmdir(path) == 0 || errno == ENOENT) {
        dlog(L_DEBUG, "removed the cgroup %s", path);
        return;
    }
    if (errno != EBUSY) {
        dlog(L_WARN, "cannot remove the cgroup %s: %s", path, strerror(errno));
        return;
    }
    for (int i = 0; i < G.npending; i++)
        if (strcmp(G.pending[i].path, path) == 0)
            return;
    struct dl_pending *p = realloc(G.pending, (size_t)(G.npending + 1) * sizeof *p);
    if (!p)
        return;
    G.pending = p;
    p = &G.pending[G.npending++];
    snprintf(p->path, sizeof p->path, "%s", path);
    p->tries = 0;
}

/* A job's cgroup when the job ends: one vramd made goes; Slurm's stays,
 * as Slurm left it, its limits cleared. */
static void end_cgroup(const struct dl_job *j)
{
    if (!j->path[0])
        return;
    if (j->made) {
        remove_cgroup(j->path);
        return;
    }
    for (int d = 0; d < G.ngpus; d++)
        clear_limits(j->path, d);
    dlog(L_DEBUG, "cleared the driver's limits of %s (not vramd's: kept)", j->path);
}

/* ------------------------------------------------------------ records */

/* The job cgroups, one a line: "m|s PID START PATH" (m: vramd made it, s:
 * Slurm's, used in place; the job's holder), and those still being
 * removed ("m 0 0 PATH"), so that a vramd after this one, however this one
 * ends, removes what its holder no longer needs and never what it did not
 * make. */
static void fill_record(FILE *f)
{
    fprintf(f, "# vramd's job cgroups: m (made by vramd) or s (Slurm's) holder-pid start path\n");
    for (int i = 0; i < G.njobs; i++)
        if (G.jobs[i].path[0])
            fprintf(f, "%c %d %llu %s\n", G.jobs[i].made ? 'm' : 's', (int)G.jobs[i].pid,
                    (unsigned long long)G.jobs[i].start, G.jobs[i].path);
    for (int i = 0; i < G.npending; i++)
        fprintf(f, "m 0 0 %s\n", G.pending[i].path);
}

/* Written before a cgroup is made, and after one is gone. */
static void write_record(void)
{
    if (G.record[0] && write_atomically(G.record, 0600, fill_record) != 0) {
        static struct log_limit said;
        dlog_limited(&said, L_WARN, "cannot write %s: %s; a vramd after this one will not know "
                     "of the job cgroups this one made", G.record, strerror(errno));
    }
}

/* What the vramd before this one recorded: a cgroup whose holder is gone
 * is removed (Slurm's only cleared); one whose holder lives waits for it
 * to re-register, or for its held grant to end (driver_limits_end). Only
 * what the record may name: a path on the mount, and for one vramd made,
 * a name vramd gives. */
static void read_record(void)
{
    char *buf = NULL;
    size_t len = 0;
    if (!G.record[0])
        return;
    files_read_trusted(G.record, &buf, &len);
    if (!buf)
        return;
    FILE *f = fmemopen(buf, len, "r");
    char line[PATH_LEN + 64];
    while (f && fgets(line, sizeof line, f)) {
        char kind;
        int pid, at = 0;
        unsigned long long start;
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '#' || sscanf(line, "%c %d %llu %n", &kind, &pid, &start, &at) != 3 || !at)
            continue;
        const char *path = line + at, *name = strrchr(path, '/');
        size_t m = strlen(G.mount);
        if ((kind != 'm' && kind != 's') || strlen(path) >= PATH_LEN ||
            strncmp(path, G.mount, m) != 0 || path[m] != '/' || !hierarchy_path_ok(path + m) ||
            (kind == 'm' && strncmp(name + 1, JOB_PREFIX, strlen(JOB_PREFIX)) != 0)) {
            dlog(L_WARN, "%s: \"%s\" is not a job cgroup vramd records; ignored", G.record, line);
            continue;
        }
        if (!is_cgroup_dir(path))
            continue;
        struct dl_job j = {.id = -1, .pid = pid, .start = start, .made = kind == 'm'};
        snprintf(j.path, sizeof j.path, "%s", path);
        if (pid > 0 && same_process(pid, (uint64_t)start)) {
            struct dl_job *grown = realloc(G.jobs, (size_t)(G.njobs + 1) * sizeof *grown);
            if (grown) {
                G.jobs = grown;
                G.jobs[G.njobs++] = j;
            }
            continue;
        }
        dlog(L_INFO, "%s %s: a job cgroup of a vramd before this one, whose holder is gone",
             j.made ? "removing" : "clearing the limits of", path);
        end_cgroup(&j);
    }
    if (f)
        fclose(f);
    free(buf);
    write_record();
}

bool driver_limits_pending(void) { return G.npending > 0; }

void driver_limits_tick(void)
{
    int before = G.npending;
    for (int i = 0; i < G.npending; i++) {
        struct dl_pending *p = &G.pending[i];
        move_out(p->path);
        bool gone = rmdir(p->path) == 0 || errno == ENOENT;
        if (gone)
            dlog(L_DEBUG, "removed the cgroup %s", p->path);
        else if (errno != EBUSY || ++p->tries >= PENDING_TRIES)
            dlog(L_WARN, "cannot remove the cgroup %s: %s; left", p->path,
                 errno == EBUSY ? "a process stays in it" : strerror(errno));
        else
            continue;
        *p = G.pending[--G.npending];
        i--;
    }
    if (G.npending != before)
        write_record();
}

/* ------------------------------------------------------------- jobs */

static struct dl_job *find_job(int id)
{
    for (int i = 0; i < G.njobs; i++)
        if (G.jobs[i].id == id)
            return &G.jobs[i];
    return NULL;
}

/* A job cgroup of the vramd before this one, whose holder is c's. */
static struct dl_job *find_left(const struct ledger_client *c)
{
    for (int i = 0; i < G.njobs; i++)
        if (G.jobs[i].id < 0 && G.jobs[i].pid == c->pid && G.jobs[i].start == c->start)
            return &G.jobs[i];
    return NULL;
}

static void forget_job(struct dl_job *j) { *j = G.jobs[--G.njobs]; }

/* Job j's cgroup made below the cgroup process pid (started at `start`) is
 * in, and pid moved into it: never out of the cgroup it was in, so that
 * every limit of that cgroup and its ancestors (Slurm's device filter,
 * memory and CPU, a user slice's) still applies. 0, or -1 with why. */
static int make_below(struct dl_job *j, pid_t pid, uint64_t start, char *why, size_t n)
{
    char here[PATH_LEN];
    if (cgroup_of(pid, here, sizeof here) != 0 || !same_process(pid, start)) {
        snprintf(why, n, "cannot tell which cgroup pid %d is in (/proc/%d/cgroup): it is gone, "
                 "or not in the cgroup2 hierarchy at %s", (int)pid, (int)pid, G.mount);
        return -1;
    }
    int len = snprintf(j->path, sizeof j->path, "%s/" JOB_PREFIX "%d-%llu", here, (int)j->pid,
                       (unsigned long long)j->start);
    if (len < 0 || (size_t)len >= sizeof j->path) {
        j->path[0] = 0;
        snprintf(why, n, "the cgroup of pid %d, %.300s, has too long a path for one below it",
                 (int)pid, here);
        return -1;
    }
    j->made = true;
    write_record(); /* before it exists: a vramd killed now still finds it */
    if (mkdir(j->path, 0755) != 0 && (errno != EEXIST || !is_cgroup_dir(j->path))) {
        snprintf(why, n, "cannot make the cgroup %s below %s, where pid %d is: %s", j->path, here,
                 (int)pid, strerror(errno));
        j->path[0] = 0;
        write_record();
        return -1;
    }
    int err = move_into(j->path, pid);
    if (err) {
        /* EBUSY/EOPNOTSUPP: the cgroup pid is in gives its children
         * controllers (cgroup.subtree_control) or is threaded. */
        snprintf(why, n, "cannot move pid %d into %s: %s%s", (int)pid, j->path, strerror(err),
                 err == EBUSY || err == EOPNOTSUPP
                     ? " (the cgroup it is in enables controllers for its children, or is "
                       "threaded: a job's cgroup cannot be made below it)"
                     : "");
        remove_cgroup(j->path);
        j->path[0] = 0;
        write_record();
        return -1;
    }
    return 0;
}

/* Job c's limits on every GPU it has a grant on, in its cgroup. */
static void set_all(struct ledger *l, struct ledger_client *c, struct dl_job *j, int only)
{
    for (int dev = only < 0 ? 0 : only; dev < (only < 0 ? G.ngpus : only + 1); dev++) {
        if (!c->use[dev].grant)
            continue;
        uint64_t soft = ledger_guarantee(l, c, dev), hard = c->use[dev].grant;
        nvmlReturn_t rc = set_limits(j->path, dev, soft, hard);
        if (rc != NVML_SUCCESS) {
            char buf[32];
            dlog(L_WARN, "job %s (%s): the driver did not take its limit on %s (%s); the "
                 "interposer alone holds that grant", c->job, c->user, l->dev[dev].uuid,
                 nv_error(rc, buf));
            c->use[dev].by_driver = false;
            continue;
        }
        j->limited[dev] = true;
        c->use[dev].by_driver = true;
        dlog(L_INFO, "job %s (%s): the driver holds it to %s on %s (soft limit %s), cgroup %s",
             c->job, c->user, format_size(hard).text, l->dev[dev].uuid, format_size(soft).text,
             j->path);
    }
}

void driver_limits_grant(struct ledger *l, struct ledger_client *c, int dev)
{
    if (!G.on || c->role != ROLE_JOB || dev < 0 || dev >= G.ngpus || !c->use[dev].grant)
        return;
    struct dl_job *j = find_job(c->id);
    char why[PATH_LEN * 2 + 300];
    if (!j && (j = find_left(c))) {
        /* Its holder re-registers with this vramd: the cgroup it has. */
        j->id = c->id;
    } else if (!j) {
        struct dl_job *grown = realloc(G.jobs, (size_t)(G.njobs + 1) * sizeof *grown);
        if (!grown)
            return;
        G.jobs = grown;
        j = &G.jobs[G.njobs++];
        memset(j, 0, sizeof *j);
        j->id = c->id;
        j->pid = c->pid;
        j->start = c->start;
        /* A user's job: its holder, vram run, before it starts the command
         * (which inherits the cgroup). A job root registered (Slurm's) gets
         * its cgroup when its first task asks (PLACE). */
        if (!c->by_root && make_below(j, c->pid, c->start, why, sizeof why) != 0) {
            dlog(L_WARN, "job %s (%s): %s; the interposer alone holds its grants", c->job,
                 c->user, why);
            forget_job(j);
            return;
        }
    }
    if (!j->path[0]) {
        /* Said to the holder (GRANT backend=driver), whose tasks then ask
         * to be placed; the limit is set then. */
        c->use[dev].by_driver = true;
        return;
    }
    set_all(l, c, j, dev);
}

void driver_limits_release(struct ledger_client *c, int dev)
{
    struct dl_job *j = G.on ? find_job(c->id) : NULL;
    if (!j || dev < 0 || dev >= G.ngpus)
        return;
    if (j->limited[dev])
        clear_limits(j->path, dev);
    j->limited[dev] = false;
    c->use[dev].by_driver = false;
}

void driver_limits_end(const struct ledger_client *c)
{
    if (!G.on || c->role != ROLE_JOB)
        return;
    /* Its own job, or (a held grant of the vramd before this one whose
     * holder did not come back) the cgroup that vramd recorded for it. */
    struct dl_job *j = find_job(c->id);
    if (!j)
        j = find_left(c);
    if (!j)
        return;
    end_cgroup(j);
    forget_job(j);
    write_record();
}

/* PLACE naming Slurm's step cgroup: used in place, the sender at or below
 * it. */
static int place_in(struct ledger *l, struct ledger_client *c, struct dl_job *j, pid_t pid,
                    const char *here, const char *cgroup, char *why, size_t n)
{
    char step[PATH_LEN];
    int len = snprintf(step, sizeof step, "%s%s", G.mount, strcmp(cgroup, "/") ? cgroup : "");
    const char *name = strrchr(cgroup, '/');
    if (!hierarchy_path_ok(cgroup) || len < 0 || (size_t)len >= sizeof step ||
        strncmp(name + 1, "step_", 5) != 0) {
        snprintf(why, n, "cgroup=\"%.300s\" is not a Slurm step's cgroup; accepted: its path "
                 "in the cgroup2 hierarchy, / then names without . or .. parts, the last "
                 "step_<id>", cgroup);
        return -1;
    }
    if (!at_or_below(here, step)) {
        snprintf(why, n, "pid %d is in the cgroup %.250s, not at or below cgroup=%.250s",
                 (int)pid, here, cgroup);
        return -1;
    }
    if (!is_cgroup_dir(step)) {
        snprintf(why, n, "cgroup=%.250s: %.250s is not a cgroup", cgroup, step);
        return -1;
    }
    if (j->path[0] && strcmp(j->path, step) != 0) {
        snprintf(why, n, "job %s is held in the cgroup %.250s, not %.250s", c->job, j->path,
                 step);
        return -1;
    }
    if (!j->path[0]) {
        snprintf(j->path, sizeof j->path, "%s", step);
        j->made = false;
        write_record();
        set_all(l, c, j, -1);
    }
    return 1;
}

int driver_limits_place(struct ledger *l, struct ledger_client *c, pid_t pid, uint64_t start,
                        const char *cgroup, char *why, size_t n)
{
    struct dl_job *j = G.on ? find_job(c->id) : NULL;
    if (!j)
        return 0;
    char here[PATH_LEN];
    if (cgroup_of(pid, here, sizeof here) != 0 || !same_process(pid, start)) {
        snprintf(why, n, "cannot tell which cgroup pid %d is in: it is gone, or not in the "
                 "cgroup2 hierarchy at %s", (int)pid, G.mount);
        return -1;
    }
    if (cgroup)
        return place_in(l, c, j, pid, here, cgroup, why, n);
    if (!j->path[0]) {
        /* The step's first task: the step's cgroup, below the one it is in
         * (slurmstepd's, under task/none), which its other tasks join. */
        if (make_below(j, pid, start, why, n) != 0)
            return -1;
        set_all(l, c, j, -1);
        return 1;
    }
    char parent[PATH_LEN];
    parent_of(j->path, parent, sizeof parent);
    if (at_or_below(here, j->path))
        return 1;
    if (!j->made || strcmp(here, parent) != 0) {
        snprintf(why, n, "pid %d is in the cgroup %.250s; job %s is held in %.250s, which it may "
                 "join only from %.250s", (int)pid, here, c->job, j->path,
                 j->made ? parent : "inside it");
        return -1;
    }
    int err = move_into(j->path, pid);
    if (err) {
        snprintf(why, n, "cannot move pid %d into %s: %s", (int)pid, j->path, strerror(err));
        return -1;
    }
    return 1;
}

void driver_limits_stop(void)
{
    while (G.njobs) {
        end_cgroup(&G.jobs[0]);
        forget_job(&G.jobs[0]);
    }
    driver_limits_tick();
    write_record(); /* what is still being removed, for the next vramd */
    G.on = false;
}

/* ------------------------------------------------------------- start */

/* Whether NVML has the limits: both functions, and a Get that does not
 * say the function is missing or unsupported. */
static bool nvml_has_limits(const struct driver_limits_nvml *nv, int ngpus, char *why, size_t n)
{
    G.set = (PFN_nvmlDeviceSetMemoryLimits_v1)nv->symbol("nvmlDeviceSetMemoryLimits_v1");
    G.get = (PFN_nvmlDeviceGetMemoryLimits_v1)nv->symbol("nvmlDeviceGetMemoryLimits_v1");
    if (!G.set || !G.get) {
        snprintf(why, n, "NVML has no per-cgroup memory limits (no nvmlDevice%sMemoryLimits_v1: "
                 "a driver before R615)", G.set ? "Get" : "Set");
        return false;
    }
    if (ngpus <= 0) {
        snprintf(why, n, "NVML lists no GPU");
        return false;
    }
    char err[300];
    for (int d = 0; d < ngpus; d++)
        if (nv->device((unsigned)d, &G.dev[d], err, sizeof err) != 0) {
            snprintf(why, n, "%s", err);
            return false;
        }
    nvmlGetMemoryLimits_v1_t probe = {.nameSpace = G.mount};
    nvmlReturn_t rc = G.get(G.dev[0], &probe);
    if (rc == NVML_ERROR_FUNCTION_NOT_FOUND || rc == NVML_ERROR_NOT_SUPPORTED) {
        char buf[32];
        snprintf(why, n, "NVML has no per-cgroup memory limits here (nvmlDeviceGetMemoryLimits_v1 "
                 "answers %s: a driver before R615)", nv_error(rc, buf));
        return false;
    }
    return true;
}

int driver_limits_start(const struct driver_limits_nvml *nvml, int ngpus, const char *state)
{
    char why[PATH_LEN * 2 + 300] = "";
    G.error = nvml ? nvml->error : NULL;
    G.ngpus = ngpus > LEDGER_MAX_DEVICES ? LEDGER_MAX_DEVICES : ngpus;
    if (state && state[0])
        snprintf(G.record, sizeof G.record, "%.590s.cgroups", state);
    /* Where NVML has the limits and vramd cannot use them, that is said as
     * a warning: the administrator may want them. */
    bool has = false;
    bool mounted = find_cgroup2(G.mount, sizeof G.mount) == 0;
    if (!mounted)
        snprintf(G.mount, sizeof G.mount, "/sys/fs/cgroup"); /* only for the probe */
    if (G.off)
        snprintf(why, sizeof why, "--driver-limits off");
    else if (!nvml)
        snprintf(why, sizeof why, "no NVML");
    else if (!(has = nvml_has_limits(nvml, G.ngpus, why, sizeof why)))
        ;
    else if (!mounted)
        snprintf(why, sizeof why, "NVML has per-cgroup memory limits, but no cgroup2 hierarchy is "
                 "mounted (/proc/self/mountinfo)");
    else if (geteuid() != 0)
        snprintf(why, sizeof why, "NVML has per-cgroup memory limits, but vramd is not root, and "
                 "only root may set them");
    else if (!is_cgroup_dir(G.mount))
        snprintf(why, sizeof why, "NVML has per-cgroup memory limits, but %s is not a cgroup "
                 "(it has no cgroup.procs)", G.mount);
    else
        G.on = true;
    if (G.on) {
        dlog(L_INFO, "grants of jobs are held by the driver (NVML's per-cgroup memory limits), "
             "each job in a cgroup of its own below the one it runs in (hierarchy at %s), and by "
             "the interposer", G.mount);
        read_record();
        return 0;
    }
    dlog(has ? L_WARN : L_INFO, "grants are held by the interposer: %s", why);
    return 0;
}
