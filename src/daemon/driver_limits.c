/* driver_limits: each job's grant held by the driver's per-cgroup limit
 * too, where NVML has one (see driver_limits.h). The loop's side: which
 * job has which cgroup, the record, and what a finished piece of work
 * means; the work itself is driver_work.c's, the cgroups' files
 * cgroups.c's. */
#include "driver_limits.h"

#include "../cuda/nvml_limits.h"
#include "../util/parse.h"
#include "cgroups.h"
#include "containers.h"
#include "daemon.h"
#include "driver_work.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOB_PREFIX "vram-job-"
#define RETRY_FIRST_MS 100   /* a cgroup still busy is tried again after this, */
#define RETRY_LONGEST_MS 5000 /* twice as long each time, up to this */
#define STOP_WAIT_MS 5000    /* for the work under way when vramd stops */

/* A job cgroup: one vramd made (below where the job's first process was)
 * or Slurm's step cgroup, used in place. */
struct dl_job {
    int id; /* the ledger client's; -1: a vramd before this one's, not claimed yet */
    pid_t pid; /* the job's holder */
    uint64_t start;
    uid_t uid; /* the job's user */
    bool by_root;
    char path[CG_PATH_LEN]; /* "" until a job root registered has its first task placed */
    bool made;              /* vramd made it: removed at the job's end; else never */
    bool limited[LEDGER_MAX_DEVICES];
    /* The last task given for each device: only its result says whether
     * the driver holds the grant there (a release may follow a set). */
    uint64_t last[LEDGER_MAX_DEVICES];
};

/* A cgroup being removed (or, Slurm's, cleared), in the record until it
 * is gone. */
struct dl_removing {
    char path[CG_PATH_LEN];
    bool made;
    bool queued; /* its TASK_REMOVE is with the thread */
    int tries;
    uint64_t due_ms;
};

static struct {
    bool off, on;
    char record[600]; /* the state file's .cgroups: the job cgroups, for the next vramd */
    int ngpus, fd;
    nvmlDevice_t dev[LEDGER_MAX_DEVICES];
    PFN_nvmlDeviceSetMemoryLimits_v1 set;
    PFN_nvmlDeviceGetMemoryLimits_v1 get;
    const char *(*error)(nvmlReturn_t rc, char buf[32]);
    driver_limits_done_fn done;
    struct dl_job *jobs;
    int njobs;
    struct dl_removing *removing;
    int nremoving;
    uint64_t serial;
} G = {.fd = -1};

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
int driver_limits_fd(void) { return G.on ? G.fd : -1; }
void driver_limits_on_done(driver_limits_done_fn fn) { G.done = fn; }

static const char *nv_error(nvmlReturn_t rc, char buf[32])
{
    if (G.error)
        return G.error(rc, buf);
    snprintf(buf, 32, "NVML error %d", (int)rc);
    return buf;
}

/* ------------------------------------------------------------ records */

/* The job cgroups, one a line: "m|s PID START PATH" (m: vramd made it, s:
 * Slurm's, used in place; the job's holder), and those being removed
 * ("m|s 0 0 PATH"), so that a vramd after this one, however this one ends,
 * removes what no one needs and never what it did not make. */
static void fill_record(FILE *f)
{
    fprintf(f, "# vramd's job cgroups: m (made by vramd) or s (Slurm's) holder-pid start path\n");
    for (int i = 0; i < G.njobs; i++)
        if (G.jobs[i].path[0])
            fprintf(f, "%c %d %llu %s\n", G.jobs[i].made ? 'm' : 's', (int)G.jobs[i].pid,
                    (unsigned long long)G.jobs[i].start, G.jobs[i].path);
    for (int i = 0; i < G.nremoving; i++)
        fprintf(f, "%c 0 0 %s\n", G.removing[i].made ? 'm' : 's', G.removing[i].path);
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

/* ------------------------------------------------------------- work */

static struct driver_task *new_task(enum driver_task_kind kind, int job, const char *path)
{
    struct driver_task *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->kind = kind;
    t->job = job;
    t->ticket = ++G.serial; /* the ticket a caller waits on is set after */
    t->dev = -1;
    snprintf(t->path, sizeof t->path, "%s", path);
    return t;
}

/* The limits of job c on dev: soft what the policy guarantees it, hard
 * its grant. */
static void add_limit(struct driver_task *t, const struct ledger *l,
                      const struct ledger_client *c, int dev)
{
    t->lim[t->nlim++] = (struct driver_limit){dev, ledger_guarantee(l, c, dev), c->use[dev].grant};
}

/* A task given; its serial noted as the last of each device it sets. */
static void submit(struct driver_task *t, struct dl_job *j, uint64_t ticket, bool restored)
{
    uint64_t serial = t->ticket;
    t->ticket = ticket;
    t->restored = restored;
    t->serial = serial;
    for (int i = 0; j && i < t->nlim; i++)
        j->last[t->lim[i].dev] = serial;
    driver_work_submit(t);
}

/* A cgroup to remove (or clear), in the record until it is gone. */
static void remove_later(const char *path, bool made)
{
    for (int i = 0; i < G.nremoving; i++)
        if (strcmp(G.removing[i].path, path) == 0)
            return;
    struct dl_removing *r = realloc(G.removing, (size_t)(G.nremoving + 1) * sizeof *r);
    if (!r)
        return;
    G.removing = r;
    r = &G.removing[G.nremoving++];
    memset(r, 0, sizeof *r);
    snprintf(r->path, sizeof r->path, "%s", path);
    r->made = made;
}

static void remove_now(struct dl_removing *r)
{
    struct driver_task *t = new_task(TASK_REMOVE, -1, r->path);
    if (!t)
        return;
    t->made = r->made;
    r->queued = true;
    submit(t, NULL, 0, false);
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

/* A new entry, zeroed; NULL if out of memory. */
static struct dl_job *new_job(void)
{
    struct dl_job *grown = realloc(G.jobs, (size_t)(G.njobs + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    G.jobs = grown;
    struct dl_job *j = &G.jobs[G.njobs++];
    memset(j, 0, sizeof *j);
    return j;
}

static struct dl_job *add_job(const struct ledger_client *c)
{
    struct dl_job *j = new_job();
    if (!j)
        return NULL;
    j->id = c->id;
    j->pid = c->pid;
    j->start = c->start;
    j->uid = c->uid;
    j->by_root = c->by_root;
    return j;
}

static void forget_job(struct dl_job *j) { *j = G.jobs[--G.njobs]; }

/* A job's cgroup when the job ends: one vramd made goes; Slurm's stays,
 * as Slurm left it, its limits cleared. */
static void end_cgroup(const struct dl_job *j)
{
    if (!j->path[0])
        return;
    remove_later(j->path, j->made);
    remove_now(&G.removing[G.nremoving - 1]);
}

/* Where job j's cgroup is to be made, below the cgroup process pid is in:
 * j->path, recorded before the cgroup exists (a vramd killed meanwhile
 * still finds it). Never inside another job's cgroup. 0, or -1 with why. */
static int plan_cgroup(struct dl_job *j, const struct ledger_client *c, pid_t pid,
                       uint64_t start, char *why, size_t n)
{
    char here[CG_PATH_LEN];
    if (cg_of(pid, here, sizeof here) != 0 || !same_process(pid, start)) {
        snprintf(why, n, "cannot tell which cgroup pid %d is in (/proc/%d/cgroup): it is gone, "
                 "or not in the cgroup2 hierarchy at %s", (int)pid, (int)pid, cg_mount());
        return -1;
    }
    for (int i = 0; i < G.njobs; i++)
        if (&G.jobs[i] != j && G.jobs[i].made && G.jobs[i].path[0] &&
            cg_at_or_below(here, G.jobs[i].path)) {
            snprintf(why, n, "pid %d is in the cgroup of another job, %.300s: one job's cgroup "
                     "is never made inside another's", (int)pid, G.jobs[i].path);
            return -1;
        }
    if (strstr(here, "/" JOB_PREFIX)) {
        snprintf(why, n, "pid %d is in %.300s, a job's cgroup: one job's cgroup is never made "
                 "inside another's", (int)pid, here);
        return -1;
    }
    /* Named by the job, so that two jobs never share one: the job's name,
     * in the characters a cgroup's name may have, then -2, -3... where a
     * cgroup of that name is there or recorded. */
    char name[64];
    size_t k = 0;
    for (const char *p = c->job; *p && k + 1 < sizeof name; p++)
        name[k++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                            (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || *p == '_'
                        ? *p
                        : '_';
    name[k] = 0;
    for (int dup = 1; dup < 1000; dup++) {
        char suffix[16] = "";
        if (dup > 1)
            snprintf(suffix, sizeof suffix, "-%d", dup);
        int len = snprintf(j->path, sizeof j->path, "%s/" JOB_PREFIX "%s%s", here, name, suffix);
        if (len < 0 || (size_t)len >= sizeof j->path)
            break;
        struct stat st;
        bool taken = lstat(j->path, &st) == 0;
        for (int i = 0; i < G.njobs && !taken; i++)
            taken = &G.jobs[i] != j && strcmp(G.jobs[i].path, j->path) == 0;
        for (int i = 0; i < G.nremoving && !taken; i++)
            taken = strcmp(G.removing[i].path, j->path) == 0;
        if (taken)
            continue;
        j->made = true;
        write_record(); /* before it exists */
        return 0;
    }
    j->path[0] = 0;
    snprintf(why, n, "no name is left below %.300s for a cgroup of job %s", here, c->job);
    return -1;
}

int driver_limits_admit(const struct ledger *l, const struct ledger_client *c, char *why,
                        size_t n)
{
    if (!G.on || c->role != ROLE_JOB || c->by_root || find_job(c->id))
        return 0;
    uint64_t most = l->policy.driver_jobs_per_user, has = 0;
    for (int i = 0; i < G.njobs; i++)
        has += G.jobs[i].uid == c->uid && !G.jobs[i].by_root && G.jobs[i].made;
    if (has < most)
        return 0;
    snprintf(why, n, "uid %u has %llu jobs held by the driver, each in a cgroup of its own: the "
             "most a user may have (policy: driver-jobs-per-user)", (unsigned)c->uid,
             (unsigned long long)has);
    return -1;
}

int driver_limits_grant(struct ledger *l, struct ledger_client *c, int dev, bool restored,
                        uint64_t ticket)
{
    if (!G.on || c->role != ROLE_JOB || dev < 0 || dev >= G.ngpus || !c->use[dev].grant)
        return DL_NOW;
    struct dl_job *j = find_job(c->id);
    if (!j && (j = find_left(c)))
        j->id = c->id; /* its holder re-registers with this vramd: the cgroup it has */
    if (!j && containers_cgroup(c)) {
        /* A container's job is held in its own cgroup or not at all (its
         * user may move processes out of it: driver_limits_in_place said
         * so); never in one made below its hook's. */
        c->use[dev].by_driver = false;
        return DL_NOW;
    }
    if (!j && restored) {
        /* Its processes run outside any cgroup of this vramd's: a new one
         * would hold the holder alone. */
        dlog(L_WARN, "job %s (%s): its grant on %s comes back without a cgroup this vramd knows "
             "(none was recorded, or it is gone); the interposer alone holds it", c->job, c->user,
             l->dev[dev].uuid);
        c->use[dev].by_driver = false;
        return DL_NOW;
    }
    if (!j && !(j = add_job(c)))
        return DL_NOW;
    if (!j->path[0] && c->by_root) {
        /* Said to the holder (GRANT backend=driver), whose tasks then ask
         * to be placed; the limit is set then. After a restart they will
         * not ask again. */
        c->use[dev].by_driver = !restored;
        return DL_NOW;
    }
    struct driver_task *t;
    if (!j->path[0]) {
        /* A user's job: its holder, vram run, before it starts the command
         * (which inherits the cgroup). */
        char why[CG_PATH_LEN * 2 + 300];
        if (plan_cgroup(j, c, c->pid, c->start, why, sizeof why) != 0) {
            dlog(L_WARN, "job %s (%s): %s; the interposer alone holds its grants", c->job,
                 c->user, why);
            forget_job(j);
            c->use[dev].by_driver = false;
            return DL_NOW;
        }
        if (!(t = new_task(TASK_MAKE, c->id, j->path)))
            return DL_NOW;
        t->pid = c->pid;
        t->start = c->start;
        t->uid = c->uid;
        t->gid = c->gid;
        t->ngroups = c->groups ? (c->ngroups < 32 ? c->ngroups : 32) : 0;
        if (t->ngroups > 0)
            memcpy(t->groups, c->groups, (size_t)t->ngroups * sizeof *t->groups);
    } else if (!(t = new_task(TASK_SET, c->id, j->path))) {
        return DL_NOW;
    }
    add_limit(t, l, c, dev);
    t->dev = dev;
    submit(t, j, ticket, restored);
    return DL_WAIT;
}

void driver_limits_release(struct ledger_client *c, int dev)
{
    struct dl_job *j = G.on ? find_job(c->id) : NULL;
    if (!j || dev < 0 || dev >= G.ngpus)
        return;
    c->use[dev].by_driver = false;
    j->limited[dev] = false;
    if (!j->path[0])
        return;
    struct driver_task *t = new_task(TASK_CLEAR, c->id, j->path);
    if (!t)
        return;
    t->lim[t->nlim++] = (struct driver_limit){.dev = dev};
    submit(t, j, 0, false);
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

const char *driver_limits_cgroup(const struct ledger_client *c)
{
    if (!G.on || c->role != ROLE_JOB)
        return NULL;
    const struct dl_job *j = find_job(c->id);
    if (!j)
        j = find_left(c);
    return j && j->made && j->path[0] ? j->path : NULL;
}

void driver_limits_keep(struct ledger *l, struct ledger_client *c)
{
    struct dl_job *j = G.on ? find_left(c) : NULL;
    if (!j)
        return;
    j->id = c->id;
    struct driver_task *t = new_task(TASK_SET, c->id, j->path);
    if (!t)
        return;
    for (int dev = 0; dev < G.ngpus; dev++)
        if (c->use[dev].grant)
            add_limit(t, l, c, dev);
    submit(t, j, 0, true);
}

void driver_limits_settle(const struct ledger *l)
{
    bool changed = false;
    for (int i = 0; i < G.njobs; i++) {
        struct dl_job *j = &G.jobs[i];
        bool claimed = j->id >= 0;
        for (int k = 0; k < l->nclients && !claimed; k++) {
            const struct ledger_client *c = l->clients[k];
            claimed = c->role == ROLE_JOB && c->held_until_ms && c->pid == j->pid &&
                      c->start == j->start;
        }
        if (claimed)
            continue;
        dlog(L_INFO, "%s %s: a job cgroup of a vramd before this one, whose job is gone",
             j->made ? "removing" : "clearing the limits of", j->path);
        end_cgroup(j);
        forget_job(j);
        i--;
        changed = true;
    }
    if (changed)
        write_record();
}

void driver_limits_in_place(struct ledger *l, struct ledger_client *c, const char *dir)
{
    (void)l;
    if (!G.on || c->role != ROLE_JOB || find_job(c->id))
        return;
    /* A user who may move processes out of it (a rootless container's
     * cgroup, in the user's delegated tree) is not held by its limit. */
    char which[CG_PATH_LEN];
    if (cg_user_may_move(dir, c->uid, c->gid, c->groups, c->groups ? c->ngroups : 0, which,
                         sizeof which)) {
        dlog(L_WARN, "job %s (%s): user %u may move processes out of %s (%s's cgroup.procs is "
             "theirs to write); the interposer alone holds its grants", c->job, c->user,
             (unsigned)c->uid, dir, which);
        return;
    }
    struct dl_job *j = add_job(c);
    if (!j)
        return;
    snprintf(j->path, sizeof j->path, "%s", dir);
    j->made = false;
    write_record();
}

/* PLACE naming Slurm's step cgroup: used in place, the sender at or below
 * it. */
static int place_in(struct ledger *l, struct ledger_client *c, struct dl_job *j, pid_t pid,
                    const char *here, const char *cgroup, uint64_t ticket, char *why, size_t n)
{
    char step[CG_PATH_LEN];
    int len = snprintf(step, sizeof step, "%s%s", cg_mount(), strcmp(cgroup, "/") ? cgroup : "");
    const char *name = strrchr(cgroup, '/');
    if (!cg_hierarchy_path_ok(cgroup) || len < 0 || (size_t)len >= sizeof step ||
        strncmp(name + 1, "step_", 5) != 0) {
        snprintf(why, n, "cgroup=\"%.300s\" is not a Slurm step's cgroup; accepted: its path "
                 "in the cgroup2 hierarchy, / then names without . or .. parts, the last "
                 "step_<id>", cgroup);
        return -1;
    }
    if (!cg_at_or_below(here, step)) {
        snprintf(why, n, "pid %d is in the cgroup %.250s, not at or below cgroup=%.250s",
                 (int)pid, here, cgroup);
        return -1;
    }
    if (!cg_is_cgroup(step)) {
        snprintf(why, n, "cgroup=%.250s: %.250s is not a cgroup", cgroup, step);
        return -1;
    }
    if (j->path[0] && strcmp(j->path, step) != 0) {
        snprintf(why, n, "job %s is held in the cgroup %.250s, not %.250s", c->job, j->path,
                 step);
        return -1;
    }
    if (j->path[0])
        return 1;
    snprintf(j->path, sizeof j->path, "%s", step);
    j->made = false;
    write_record();
    struct driver_task *t = new_task(TASK_SET, c->id, j->path);
    if (!t)
        return -1;
    for (int dev = 0; dev < G.ngpus; dev++)
        if (c->use[dev].grant)
            add_limit(t, l, c, dev);
    submit(t, j, ticket, false);
    return DL_WAIT;
}

int driver_limits_place(struct ledger *l, struct ledger_client *c, pid_t pid, uint64_t start,
                        const char *cgroup, uint64_t ticket, char *why, size_t n)
{
    struct dl_job *j = G.on ? find_job(c->id) : NULL;
    if (!j)
        return 0;
    char here[CG_PATH_LEN];
    if (cg_of(pid, here, sizeof here) != 0 || !same_process(pid, start)) {
        snprintf(why, n, "cannot tell which cgroup pid %d is in: it is gone, or not in the "
                 "cgroup2 hierarchy at %s", (int)pid, cg_mount());
        return -1;
    }
    if (cgroup) {
        return place_in(l, c, j, pid, here, cgroup, ticket, why, n);
    }
    struct driver_task *t;
    if (!j->path[0]) {
        /* The step's first task: the step's cgroup, below the one it is in
         * (slurmstepd's, under task/none), which its other tasks join. */
        if (plan_cgroup(j, c, pid, start, why, n) != 0)
            return -1;
        if (!(t = new_task(TASK_MAKE, c->id, j->path)))
            return -1;
        t->uid = c->uid;
        t->gid = c->gid;
        for (int dev = 0; dev < G.ngpus; dev++)
            if (c->use[dev].grant)
                add_limit(t, l, c, dev);
    } else {
        char parent[CG_PATH_LEN];
        cg_parent(j->path, parent, sizeof parent);
        if (cg_at_or_below(here, j->path))
            return 1;
        if (!j->made || strcmp(here, parent) != 0) {
            snprintf(why, n, "pid %d is in the cgroup %.250s; job %s is held in %.250s, which it "
                     "may join only from %.250s", (int)pid, here, c->job, j->path,
                     j->made ? parent : "inside it");
            return -1;
        }
        if (!(t = new_task(TASK_MOVE, c->id, j->path)))
            return -1;
    }
    t->pid = pid;
    t->start = start;
    submit(t, j, ticket, false);
    return DL_WAIT;
}

/* ------------------------------------------------------------ results */

/* What the driver's answers on the devices of task t mean for job j (its
 * ledger client c): the grants it holds, and the verdict for its caller. */
static enum driver_verdict limits_set(const struct driver_task *t, struct dl_job *j,
                                      struct ledger_client *c, char *why, size_t n)
{
    enum driver_verdict v = DRIVER_HELD;
    for (int i = 0; i < t->nlim; i++) {
        int dev = t->lim[i].dev;
        if (!j || j->last[dev] != t->serial || !c || !c->use[dev].grant)
            continue; /* a later task decides, or the grant is gone */
        char buf[32];
        if (t->rc[i] == NVML_SUCCESS) {
            j->limited[dev] = true;
            c->use[dev].by_driver = true;
            dlog(L_INFO, "job %s (%s): the driver holds it to %s on %s (soft limit %s), cgroup "
                 "%s", c->job, c->user, format_size(t->lim[i].hard).text, D.L.dev[dev].uuid,
                 format_size(t->lim[i].soft).text, t->path);
            continue;
        }
        c->use[dev].by_driver = false;
        snprintf(why, n, "the driver did not take the job's limit of %s on %s (%s)",
                 format_size(t->lim[i].hard).text, D.L.dev[dev].uuid, nv_error(t->rc[i], buf));
        dlog(L_WARN, "job %s (%s): %s; %s", c->job, c->user, why,
             t->restored ? "the interposer alone holds that grant" : "the grant is refused");
        v = t->restored ? DRIVER_INTERPOSER : DRIVER_REFUSED;
    }
    return v;
}

static void made_or_not(struct driver_task *t, struct dl_job *j, struct ledger_client *c,
                        enum driver_verdict *v, char *why, size_t n)
{
    if (!t->err) {
        *v = limits_set(t, j, c, why, n);
        return;
    }
    if (t->left)
        remove_later(t->path, true);
    snprintf(why, n, "%s", t->why);
    if (j && strcmp(j->path, t->path) == 0) {
        j->path[0] = 0;
        j->made = false;
        for (int d = 0; d < G.ngpus; d++)
            if (c && c->use[d].grant)
                c->use[d].by_driver = false;
        if (!j->by_root)
            forget_job(j);
    }
    write_record();
    if (c)
        dlog(L_WARN, "job %s (%s): %s; the interposer alone holds its grants", c->job, c->user,
             why);
    *v = t->ticket && c && c->by_root ? DRIVER_FAILED : DRIVER_INTERPOSER;
}

static void removed(struct driver_task *t, uint64_t now)
{
    int i = 0;
    while (i < G.nremoving && strcmp(G.removing[i].path, t->path) != 0)
        i++;
    if (i == G.nremoving)
        return;
    struct dl_removing *r = &G.removing[i];
    r->queued = false;
    if (t->gone) {
        dlog(L_DEBUG, "removed the cgroup %s", t->path);
        G.removing[i] = G.removing[--G.nremoving];
        write_record();
        return;
    }
    /* Kept in the record, tried again less and less often: a process
     * that stays in it does not keep the timer busy, and the cgroup is
     * never forgotten while it is there. */
    uint64_t wait = RETRY_FIRST_MS << (r->tries < 9 ? r->tries : 9);
    r->due_ms = now + (wait < RETRY_LONGEST_MS ? wait : RETRY_LONGEST_MS);
    if (r->tries++ == 0 || (r->tries & (r->tries - 1)) == 0) {
        static struct log_limit said;
        dlog_limited(&said, L_WARN, "cannot remove the cgroup %s yet: %s; trying again", t->path,
                     t->why);
    }
}

void driver_limits_take(void)
{
    struct driver_task *t;
    uint64_t now = now_ms();
    while ((t = driver_work_take())) {
        struct dl_job *j = t->job >= 0 ? find_job(t->job) : NULL;
        struct ledger_client *c = j ? ledger_find_client(&D.L, t->job) : NULL;
        enum driver_verdict v = DRIVER_HELD;
        char why[CG_PATH_LEN * 2 + 300] = "";
        switch (t->kind) {
        case TASK_MAKE: made_or_not(t, j, c, &v, why, sizeof why); break;
        case TASK_SET: v = limits_set(t, j, c, why, sizeof why); break;
        case TASK_MOVE:
            if (t->err) {
                v = DRIVER_FAILED;
                snprintf(why, sizeof why, "%s", t->why);
            }
            break;
        case TASK_CLEAR:
            for (int i = 0; i < t->nlim; i++)
                if (t->rc[i] != NVML_SUCCESS) {
                    static struct log_limit said;
                    char buf[32];
                    dlog_limited(&said, L_WARN, "cannot clear the driver's limits of %s on GPU "
                                 "%d: %s", t->path, t->lim[i].dev, nv_error(t->rc[i], buf));
                }
            break;
        case TASK_REMOVE: removed(t, now); break;
        }
        if (t->ticket && G.done)
            G.done(t->ticket, t->job, t->dev, v, why);
        free(t);
    }
}

bool driver_limits_pending(void) { return G.nremoving > 0; }

void driver_limits_tick(uint64_t now)
{
    for (int i = 0; i < G.nremoving; i++)
        if (!G.removing[i].queued && now >= G.removing[i].due_ms)
            remove_now(&G.removing[i]);
}

void driver_limits_stop(void)
{
    if (!G.on)
        return;
    driver_work_drain(STOP_WAIT_MS);
    G.done = NULL; /* no one to tell any more */
    driver_limits_take();
    write_record(); /* every job cgroup stays, for the next vramd */
    G.on = false;
}

/* ------------------------------------------------------------- start */

/* What the vramd before this one recorded, for driver_limits_settle and
 * the holders that re-register: only what the record may name (a path on
 * the mount, and for one vramd made, a name vramd gives), and only a
 * cgroup that is still there. */
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
    char line[CG_PATH_LEN + 64];
    const char *mount = cg_mount();
    size_t m = strlen(mount);
    while (f && fgets(line, sizeof line, f)) {
        char kind;
        int pid, at = 0;
        unsigned long long start;
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '#' || sscanf(line, "%c %d %llu %n", &kind, &pid, &start, &at) != 3 || !at)
            continue;
        const char *path = line + at, *name = strrchr(path, '/');
        if ((kind != 'm' && kind != 's') || strlen(path) >= CG_PATH_LEN ||
            strncmp(path, mount, m) != 0 || path[m] != '/' || !cg_hierarchy_path_ok(path + m) ||
            (kind == 'm' && strncmp(name + 1, JOB_PREFIX, strlen(JOB_PREFIX)) != 0)) {
            dlog(L_WARN, "%s: \"%s\" is not a job cgroup vramd records; ignored", G.record, line);
            continue;
        }
        if (!cg_is_cgroup(path))
            continue;
        if (pid <= 0) {
            remove_later(path, kind == 'm');
            continue;
        }
        struct dl_job *j = new_job();
        if (!j)
            break;
        *j = (struct dl_job){.id = -1, .pid = pid, .start = start, .made = kind == 'm'};
        snprintf(j->path, sizeof j->path, "%s", path);
        /* Its user, for driver-jobs-per-user: the cgroup's holder's. */
        struct process_info pi;
        j->uid = process_info(pid, &pi) == 0 ? pi.uid : 0;
    }
    if (f)
        fclose(f);
    free(buf);
}

/* Whether NVML has the limits: both functions, and a Get that does not
 * say the function is missing or unsupported. */
static bool nvml_has_limits(const struct driver_limits_nvml *nv, int ngpus, const char *mount,
                            char *why, size_t n)
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
    nvmlGetMemoryLimits_v1_t probe = {.nameSpace = mount};
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
    char why[CG_PATH_LEN * 2 + 300] = "";
    G.error = nvml ? nvml->error : NULL;
    G.ngpus = ngpus > LEDGER_MAX_DEVICES ? LEDGER_MAX_DEVICES : ngpus;
    if (state && state[0])
        snprintf(G.record, sizeof G.record, "%.590s.cgroups", state);
    /* Where NVML has the limits and vramd cannot use them, that is said as
     * a warning: the administrator may want them. */
    bool has = false;
    bool mounted = cg_init() == 0;
    const char *mount = mounted ? cg_mount() : "/sys/fs/cgroup"; /* only for the probe */
    if (G.off)
        snprintf(why, sizeof why, "--driver-limits off");
    else if (!nvml)
        snprintf(why, sizeof why, "no NVML");
    else if (!(has = nvml_has_limits(nvml, G.ngpus, mount, why, sizeof why)))
        ;
    else if (!mounted)
        snprintf(why, sizeof why, "NVML has per-cgroup memory limits, but no cgroup2 hierarchy is "
                 "mounted (/proc/self/mountinfo)");
    else if (geteuid() != 0)
        snprintf(why, sizeof why, "NVML has per-cgroup memory limits, but vramd is not root, and "
                 "only root may set them");
    else if (!cg_is_cgroup(mount))
        snprintf(why, sizeof why, "NVML has per-cgroup memory limits, but %s is not a cgroup "
                 "(it has no cgroup.procs)", mount);
    else if ((G.fd = driver_work_start(G.set, G.dev, G.ngpus, same_process)) < 0)
        snprintf(why, sizeof why, "NVML has per-cgroup memory limits, but the thread that sets "
                 "them cannot be started: %s", strerror(errno));
    else
        G.on = true;
    if (G.on) {
        dlog(L_INFO, "grants of jobs are held by the driver (NVML's per-cgroup memory limits), "
             "each job in a cgroup of its own below the one it runs in (hierarchy at %s), and by "
             "the interposer", mount);
        read_record();
        return 0;
    }
    dlog(has ? L_WARN : L_INFO, "grants are held by the interposer: %s", why);
    return 0;
}
