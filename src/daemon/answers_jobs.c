/* answers_jobs: the answers for a job held for its processes (answers.h):
 * JOB, the Slurm plugin's registration of a job's grant on its user's
 * behalf; MEMBER, a job's holder naming the job's processes; PLACE, a
 * Slurm task put in its job's cgroup.
 */
#include "answers.h"
#include "driver_limits.h"

#include "../util/parse.h"

#include <stdio.h>
#include <string.h>

/* The Slurm plugin, as root, registers a job's grant on its user's behalf;
 * the connection then holds it for the job's life. */
int on_job(struct conn *c, const struct proto_msg *m)
{
    if (c->uid != 0)
        return answers_strike(c, "JOB is only for root (the Slurm plugin); uid %u may not register jobs",
                      (unsigned)c->uid);
    const char *job = proto_get(m, "job");
    uint64_t uid = 0, gid = 0, bytes = 0, restore = 0;
    char err[256] = "";
    if (!job || !proto_name_ok(job))
        return answers_strike(c, "JOB: job= must be a name of [A-Za-z0-9._:@+/-]");
    if (proto_get_u64(m, "uid", UINT32_MAX - 1, &uid, err, sizeof err) != 0 ||
        proto_get_u64(m, "gid", UINT32_MAX - 1, &gid, err, sizeof err) != 0 ||
        proto_get_u64(m, "bytes", (uint64_t)1 << 56, &bytes, err, sizeof err) != 0 || !bytes ||
        proto_get_u64(m, "restore", (uint64_t)1 << 56, &restore, err, sizeof err) < 0)
        return answers_strike(c, "JOB: %s", err[0] ? err : "uid=, gid= and bytes= (more than 0) are required");
    struct ledger_client *lc = c->client;
    if (lc && (lc->role != ROLE_JOB || lc->uid != uid || strcmp(lc->job, job) != 0))
        return answers_strike(c, "JOB: this connection already stands for something else");
    int dev, r;
    uint64_t index;
    /* The plugin knows GPUs as Slurm does, by index (CUDA_VISIBLE_DEVICES of
     * the job: NVML's order); or by UUID. */
    if ((r = proto_get_u64(m, "index", 1u << 20, &index, err, sizeof err)) < 0)
        return answers_strike(c, "JOB: %s", err);
    if (r == 0) {
        if (index >= (uint64_t)D.ngpus) {
            if (reply_text(c, VERB_DENY, NULL, "GPU index %llu: NVML lists %d GPU%s here",
                           (unsigned long long)index, D.ngpus, D.ngpus == 1 ? "" : "s") != 0)
                return -1;
            return 0;
        }
        dev = (int)index;
    } else if ((r = message_device(c, m, &dev)) != 0) {
        return r < 0 ? -1 : 0;
    }
    if (!lc) {
        lc = ledger_join(&D.L, ROLE_JOB, c->pid, (uid_t)uid, (gid_t)gid);
        if (!lc)
            return answers_strike(c, "JOB: the daemon is out of memory");
        lc->owner = c;
        lc->start = c->start;
        lc->by_root = true; /* before any grant: it decides which rules cover the job */
        user_name((uid_t)uid, lc->user, sizeof lc->user);
        snprintf(lc->job, sizeof lc->job, "%s", job);
        snprintf(lc->cmd, sizeof lc->cmd, "job");
        c->client = lc;
    }
    uint64_t granted;
    char why[700];
    const char *uuid = D.L.dev[dev].uuid;
    if (restore && ledger_adopt(&D.L, lc, dev, restore)) {
        D.state_dirty = true;
        dlog(L_INFO, "job %s (%s): re-registered %s on %s", job, lc->user,
             format_size(restore).text, uuid);
        return reply_grant(c, uuid, restore, true);
    }
    if (ledger_request(&D.L, lc, dev, bytes, false, 0, &granted, why, sizeof why) == VERDICT_GRANT) {
        D.state_dirty = true;
        dlog(L_INFO, "job %s (%s): granted %s on %s", job, lc->user, format_size(granted).text, uuid);
        return reply_grant(c, uuid, granted, false);
    }
    dlog(L_INFO, "job %s (%s): refused on %s: %s", job, lc->user, uuid, why);
    return reply_text(c, VERB_DENY, uuid, "%s", why);
}

/* A job's holder (vram run for its command, the Slurm plugin for a
 * step's tasks) says what one of the job's processes uses, or that it has
 * left. The process is taken to be the job's only if the kernel says it
 * is a process of the job's user (or root says so, for a job it
 * registered); its start time and name are the kernel's too. A process that is gone, or is someone else's, by the time
 * the message is read is passed over: the holder read its list a moment
 * ago, and pids are reused. */
int on_member(struct conn *c, const struct proto_msg *m)
{
    struct ledger_client *lc = c->client;
    if (!lc || lc->role != ROLE_JOB)
        return answers_strike(c, "MEMBER before JOB or HELLO role=command");
    uint64_t pid = 0, used = 0, peak = 0;
    char err[256] = "";
    if (proto_get_u64(m, "pid", INT32_MAX, &pid, err, sizeof err) != 0 || !pid)
        return answers_strike(c, "MEMBER: %s", err[0] ? err : "pid= (more than 0) is required");
    const char *uuid = proto_get(m, "dev");
    if (!uuid) { /* it left the job */
        struct ledger_client *gone = ledger_find_member(&D.L, lc, (pid_t)pid);
        if (gone) {
            ledger_leave(&D.L, gone);
            D.state_dirty = true;
        }
        return 0;
    }
    int dev = ledger_find_device(&D.L, uuid);
    if (dev < 0 || !lc->use[dev].grant)
        return answers_strike(c, "MEMBER: dev= is not a device this job holds a grant on");
    uint64_t most = D.L.dev[dev].total;
    if (proto_get_u64(m, "used", most, &used, err, sizeof err) != 0 ||
        proto_get_u64(m, "peak", most, &peak, err, sizeof err) < 0)
        return answers_strike(c, "MEMBER: %s", err[0] ? err : "used= is required with dev=");
    /* Root's word (the Slurm plugin's) is taken for any process: a task
     * may not yet have become its user's when slurmstepd names it. */
    struct process_info pi;
    if (process_info((pid_t)pid, &pi) != 0 || (!lc->by_root && pi.uid != lc->uid)) {
        dlog(L_DEBUG, "job %s: pid %llu is not a process of uid %u (now); passed over", lc->job,
             (unsigned long long)pid, (unsigned)lc->uid);
        return 0;
    }
    int before = lc->nmembers;
    struct ledger_client *mb = ledger_member(&D.L, lc, (pid_t)pid, pi.start);
    if (lc->nmembers != before)
        D.state_dirty = true; /* the state file names a job's processes, for a restart */
    /* A cap reached is not a malformed message: ERR, but no strike (the
     * holder of a large job would be dropped, and its grants with it). */
    if (!mb && lc->nmembers >= LEDGER_MAX_MEMBERS)
        return reply_text(c, VERB_ERR, NULL, "MEMBER: pid %llu not listed: a job may list at most "
                          "%d processes", (unsigned long long)pid, LEDGER_MAX_MEMBERS);
    if (!mb && lc->who && lc->who->members >= LEDGER_USER_MEMBERS)
        return reply_text(c, VERB_ERR, NULL, "MEMBER: pid %llu not listed: uid %u has %d "
                          "processes in its jobs, the most a user may have across all of them",
                          (unsigned long long)pid, (unsigned)lc->uid, LEDGER_USER_MEMBERS);
    if (!mb)
        return answers_strike(c, "MEMBER: the daemon is out of memory");
    proto_name_clean(pi.comm, mb->cmd, sizeof mb->cmd);
    ledger_report(&D.L, mb, dev, used, peak);
    uint64_t now = now_ms();
    history_note_client(&D.history, mb, dev, now);
    history_note_device(&D.history, &D.L, dev, now);
    return 0;
}

/* A process of root's (a Slurm task, before it execs the user's program)
 * asks to be put in the cgroup of a job root registered, or names the
 * step's cgroup it is in (cgroup=). The process moved
 * is the one the kernel says is at the other end, so nothing here lets
 * anyone move another process; and only root's, since whoever is in a
 * job's cgroup takes from the job's grant. */
int on_place(struct conn *c, const struct proto_msg *m)
{
    if (c->uid != 0)
        return answers_strike(c, "PLACE is only for root (the Slurm plugin's tasks); uid %u may "
                              "not join a job's cgroup", (unsigned)c->uid);
    const char *name = proto_get(m, "job");
    if (!name || !proto_name_ok(name))
        return answers_strike(c, "PLACE: job= must be a name of [A-Za-z0-9._:@+/-]");
    struct ledger_client *job = NULL;
    for (int i = 0; i < D.L.njobs && !job; i++)
        if (D.L.jobs[i]->by_root && !D.L.jobs[i]->held_until_ms && !D.L.jobs[i]->kept &&
            strcmp(D.L.jobs[i]->job, name) == 0)
            job = D.L.jobs[i];
    if (!job)
        return reply_text(c, VERB_ERR, NULL, "PLACE: no job %s registered by root", name);
    /* Slurm's step cgroup, where it made one: the limits are set there. */
    const char *cgroup = proto_get(m, "cgroup");
    char why[1200];
    uint64_t ticket = await_ticket();
    int r = driver_limits_place(&D.L, job, c->pid, c->start, cgroup, ticket, why, sizeof why);
    if (r == DL_WAIT) { /* answered when the work is done */
        char placed[200];
        snprintf(placed, sizeof placed, "job %s (%s): pid %d %s", job->job, job->user,
                 (int)c->pid, cgroup ? "is in the step's cgroup, which holds it"
                                     : "joined its cgroup");
        return await_place(c, ticket, placed);
    }
    if (r < 0) {
        dlog(L_WARN, "job %s (%s): %s", job->job, job->user, why);
        return reply_text(c, VERB_ERR, NULL, "PLACE: %s", why);
    }
    if (r > 0)
        dlog(L_INFO, "job %s (%s): pid %d %s", job->job, job->user, (int)c->pid,
             cgroup ? "is in the step's cgroup, which holds it" : "joined its cgroup");
    struct proto_writer w;
    proto_begin(&w, VERB_OK);
    proto_add(&w, "backend", r > 0 ? "driver" : "interposer");
    return reply(c, &w);
}
