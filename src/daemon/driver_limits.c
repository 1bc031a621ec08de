/* driver_limits: each job's grant held by the driver's per-cgroup limit
 * too, where NVML has one (see driver_limits.h). */
#include "driver_limits.h"

#include "../cuda/nvml_limits.h"
#include "../util/parse.h"
#include "daemon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_LEN 512
#define JOB_PREFIX "job-"
#define PENDING_TRIES 200 /* 10 s of the daemon's 50 ms ticks */

/* A job the driver holds: its cgroup, and the GPUs where its limits are set. */
struct dl_job {
    int id; /* the ledger client's */
    char path[PATH_LEN];
    char origin[PATH_LEN]; /* where the first process put in it came from; "" unknown */
    bool limited[LEDGER_MAX_DEVICES];
};

static struct {
    bool off, given, on, made_root;
    char root[PATH_LEN], mount[PATH_LEN];
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
    if (strcmp(value, "off") == 0) {
        G.off = true;
        return 0;
    }
    if (value[0] != '/' || strlen(value) >= PATH_LEN - 64 || strstr(value, "/../") ||
        strstr(value, "/./")) {
        snprintf(err, n, "--cgroup-root \"%s\": not an absolute path of at most %d characters "
                 "without . or .. parts; accepted: a directory of the cgroup2 hierarchy (such as "
                 "/sys/fs/cgroup/vram), or off", value, PATH_LEN - 65);
        return -1;
    }
    snprintf(G.root, sizeof G.root, "%s", value);
    size_t len = strlen(G.root);
    while (len > 1 && G.root[len - 1] == '/')
        G.root[--len] = 0;
    G.given = true;
    return 0;
}

const char *driver_limits_backend(void) { return G.on ? "driver" : "interposer"; }

/* ------------------------------------------------------------ cgroups */

/* Where cgroup2 is mounted (the first such mount), from mountinfo. */
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
        char point[PATH_LEN], type[64];
        if (!sep || sscanf(line, "%*s %*s %*s %*s %511s", point) != 1 ||
            sscanf(sep + 3, "%63s", type) != 1 || strcmp(type, "cgroup2") != 0)
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

/* The cgroup a process is in, as a path under the mount; -1 if it is gone
 * or not in this hierarchy. */
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
        line[strcspn(line, "\n")] = 0;
        int len = snprintf(out, n, "%s%s", G.mount, strcmp(line + 3, "/") ? line + 3 : "");
        rc = len >= 0 && (size_t)len < n ? 0 : -1;
    }
    fclose(f);
    return rc;
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

/* Where a job's leftover processes go: where they came from, else the
 * root's parent (a process may not stay in the root: it is removed with
 * vramd). */
static void move_out(const char *path, const char *origin)
{
    char parent[PATH_LEN];
    snprintf(parent, sizeof parent, "%s", G.root);
    char *slash = strrchr(parent, '/');
    if (slash && strlen(parent) > strlen(G.mount))
        *slash = 0;
    char f[PATH_LEN + 32];
    snprintf(f, sizeof f, "%s/cgroup.procs", path);
    /* A process may fork while its siblings are moved: a few passes. */
    for (int pass = 0; pass < 8; pass++) {
        FILE *in = fopen(f, "re");
        if (!in)
            return;
        int pid, moved = 0;
        while (fscanf(in, "%d", &pid) == 1) {
            if ((!origin[0] || move_into(origin, pid) != 0) && move_into(parent, pid) != 0)
                continue;
            moved++;
        }
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

/* Every trace of a job's cgroup: its processes moved out, its limits
 * cleared on every GPU, the cgroup removed (or kept for the timer to try
 * again, while a process is still leaving it). */
static void remove_cgroup(const char *path, const char *origin)
{
    move_out(path, origin);
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

bool driver_limits_pending(void) { return G.npending > 0; }

void driver_limits_tick(void)
{
    for (int i = 0; i < G.npending; i++) {
        struct dl_pending *p = &G.pending[i];
        move_out(p->path, "");
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
}

/* ------------------------------------------------------------- jobs */

/* The root is at most PATH_LEN - 64 long (driver_limits_option): the
 * name always fits. */
static void job_path(const struct ledger_client *c, char *out, size_t n)
{
    int len = snprintf(out, n, "%s/" JOB_PREFIX "%d-%llu", G.root, (int)c->pid,
                       (unsigned long long)c->start);
    if (len < 0 || (size_t)len >= n)
        out[0] = 0;
}

static struct dl_job *find_job(int id)
{
    for (int i = 0; i < G.njobs; i++)
        if (G.jobs[i].id == id)
            return &G.jobs[i];
    return NULL;
}

static void forget_job(struct dl_job *j) { *j = G.jobs[--G.njobs]; }

/* Puts pid (started at `start`) into job j's cgroup: 0, or -1 with why. */
static int place(struct dl_job *j, pid_t pid, uint64_t start, char *why, size_t n)
{
    char origin[PATH_LEN];
    bool known = cgroup_of(pid, origin, sizeof origin) == 0;
    /* The kernel's pid, checked against its start: not another process
     * that took the number since. */
    if (!same_process(pid, start)) {
        snprintf(why, n, "pid %d is gone", (int)pid);
        return -1;
    }
    int err = move_into(j->path, pid);
    if (err) {
        snprintf(why, n, "cannot move pid %d into %s: %s", (int)pid, j->path, strerror(err));
        return -1;
    }
    if (!j->origin[0] && known && strcmp(origin, j->path) != 0)
        snprintf(j->origin, sizeof j->origin, "%s", origin);
    return 0;
}

void driver_limits_grant(struct ledger *l, struct ledger_client *c, int dev)
{
    if (!G.on || c->role != ROLE_JOB || dev < 0 || dev >= G.ngpus || !c->use[dev].grant)
        return;
    struct dl_job *j = find_job(c->id);
    char why[PATH_LEN + 200];
    if (!j) {
        struct dl_job *grown = realloc(G.jobs, (size_t)(G.njobs + 1) * sizeof *grown);
        if (!grown)
            return;
        G.jobs = grown;
        j = &G.jobs[G.njobs++];
        memset(j, 0, sizeof *j);
        j->id = c->id;
        job_path(c, j->path, sizeof j->path);
        /* There already when its holder re-registers after a restart. */
        if (mkdir(j->path, 0755) != 0 && (errno != EEXIST || !is_cgroup_dir(j->path))) {
            dlog(L_WARN, "job %s (%s): cannot make the cgroup %s: %s; the interposer alone "
                 "holds its grants", c->job, c->user, j->path, strerror(errno));
            forget_job(j);
            return;
        }
        /* A user's job: its holder, vram run, before it starts the command
         * (which inherits the cgroup). A job root registered is joined by
         * its processes themselves (PLACE). */
        if (!c->by_root && place(j, c->pid, c->start, why, sizeof why) != 0) {
            dlog(L_WARN, "job %s (%s): %s; the interposer alone holds its grants", c->job,
                 c->user, why);
            remove_cgroup(j->path, j->origin);
            forget_job(j);
            return;
        }
    }
    uint64_t soft = ledger_guarantee(l, c, dev), hard = c->use[dev].grant;
    nvmlReturn_t rc = set_limits(j->path, dev, soft, hard);
    if (rc != NVML_SUCCESS) {
        char buf[32];
        dlog(L_WARN, "job %s (%s): the driver did not take its limit on %s (%s); the interposer "
             "alone holds that grant", c->job, c->user, l->dev[dev].uuid, nv_error(rc, buf));
        return;
    }
    j->limited[dev] = true;
    c->use[dev].by_driver = true;
    dlog(L_INFO, "job %s (%s): the driver holds it to %s on %s (soft limit %s), cgroup %s", c->job,
         c->user, format_size(hard).text, l->dev[dev].uuid, format_size(soft).text, j->path);
}

void driver_limits_release(struct ledger_client *c, int dev)
{
    struct dl_job *j = G.on ? find_job(c->id) : NULL;
    if (!j || dev < 0 || dev >= G.ngpus || !j->limited[dev])
        return;
    clear_limits(j->path, dev);
    j->limited[dev] = false;
    c->use[dev].by_driver = false;
}

void driver_limits_end(const struct ledger_client *c)
{
    if (!G.on || c->role != ROLE_JOB)
        return;
    struct dl_job *j = find_job(c->id);
    if (j) {
        remove_cgroup(j->path, j->origin);
        forget_job(j);
        return;
    }
    /* A held grant of the vramd before this one: its cgroup by name,
     * unless the holder came back and a job of this daemon's has it. */
    char path[PATH_LEN];
    job_path(c, path, sizeof path);
    for (int i = 0; i < G.njobs; i++)
        if (strcmp(G.jobs[i].path, path) == 0)
            return;
    if (is_cgroup_dir(path))
        remove_cgroup(path, "");
}

int driver_limits_place(const struct ledger_client *c, pid_t pid, uint64_t start, char *why,
                        size_t n)
{
    struct dl_job *j = G.on ? find_job(c->id) : NULL;
    if (!j)
        return 0;
    return place(j, pid, start, why, n) == 0 ? 1 : -1;
}

void driver_limits_stop(void)
{
    while (G.njobs) {
        remove_cgroup(G.jobs[0].path, G.jobs[0].origin);
        forget_job(&G.jobs[0]);
    }
    driver_limits_tick();
    if (G.made_root && rmdir(G.root) != 0 && errno != ENOENT)
        dlog(L_WARN, "cannot remove %s: %s", G.root, strerror(errno));
    G.on = false;
}

/* ------------------------------------------------------------- start */

/* The job cgroups of a vramd before this one whose holder is gone. One
 * whose holder lives is kept: it re-registers (and its job takes the
 * cgroup back) or its held grant ends (driver_limits_end). */
static void remove_stale(void)
{
    DIR *d = opendir(G.root);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid;
        unsigned long long start;
        char tail;
        if (strncmp(e->d_name, JOB_PREFIX, strlen(JOB_PREFIX)) != 0 ||
            sscanf(e->d_name + strlen(JOB_PREFIX), "%d-%llu%c", &pid, &start, &tail) != 2)
            continue;
        char path[PATH_LEN + 256];
        snprintf(path, sizeof path, "%s/%s", G.root, e->d_name);
        if (strlen(path) >= PATH_LEN || !is_cgroup_dir(path) || same_process(pid, start))
            continue;
        dlog(L_INFO, "removing %s: a job cgroup of a vramd before this one, whose holder is gone",
             path);
        remove_cgroup(path, "");
    }
    closedir(d);
}

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

/* The root of the job cgroups: there (made if missing, its parent a
 * cgroup), on the cgroup2 mount. 0, or -1 with why. */
static int use_root(char *why, size_t n)
{
    size_t m = strlen(G.mount);
    if (strncmp(G.root, G.mount, m) != 0 || (G.root[m] != '/' && G.root[m] != 0)) {
        snprintf(why, n, "--cgroup-root \"%.200s\" is not in the cgroup2 hierarchy, mounted at "
                 "%.200s; accepted: a directory under %.200s, or off", G.root, G.mount, G.mount);
        return -1;
    }
    if (mkdir(G.root, 0755) == 0) {
        G.made_root = true;
    } else if (errno != EEXIST) {
        snprintf(why, n, "cannot make the cgroup %s: %s", G.root, strerror(errno));
        return -1;
    }
    if (!is_cgroup_dir(G.root)) {
        if (G.made_root)
            rmdir(G.root);
        G.made_root = false;
        snprintf(why, n, "%s is not a cgroup (it has no cgroup.procs)", G.root);
        return -1;
    }
    return 0;
}

int driver_limits_start(const struct driver_limits_nvml *nvml, int ngpus)
{
    char why[PATH_LEN * 2 + 300] = "";
    G.error = nvml ? nvml->error : NULL;
    G.ngpus = ngpus > LEDGER_MAX_DEVICES ? LEDGER_MAX_DEVICES : ngpus;
    /* Where NVML has the limits and vramd cannot use them, that is said as
     * a warning: the administrator may want them. */
    bool has = false, tried_root = false;
    bool mounted = find_cgroup2(G.mount, sizeof G.mount) == 0;
    if (!mounted)
        snprintf(G.mount, sizeof G.mount, "/sys/fs/cgroup"); /* only for the probe */
    if (G.off)
        snprintf(why, sizeof why, "--cgroup-root off");
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
    else if (!G.given && strlen(G.mount) + 5 >= sizeof G.root)
        snprintf(why, sizeof why, "the cgroup2 mount's path is too long");
    else {
        if (!G.given)
            snprintf(G.root, sizeof G.root, "%s/vram", G.mount);
        tried_root = true;
        G.on = use_root(why, sizeof why) == 0;
    }
    if (G.on) {
        dlog(L_INFO, "grants of jobs are held by the driver (NVML's per-cgroup memory limits), "
             "each job in a cgroup under %s, and by the interposer", G.root);
        remove_stale();
        return 0;
    }
    /* An administrator's place that cannot be used where the driver has
     * limits: said, and vramd does not start. */
    if (tried_root && G.given) {
        dlog(L_ERROR, "%s", why);
        return -1;
    }
    dlog(has ? L_WARN : L_INFO, "grants are held by the interposer: %s", why);
    return 0;
}
