/* answers_containers: the answers for a container's job (answers.h,
 * containers.h): CONTAINER and STOPPED from vram oci-hook at a container's
 * creation and after it stopped; STATE, a process in a container asking
 * for its job's command state.
 */
#include "answers.h"
#include "containers.h"
#include "driver_limits.h"

#include "../util/container.h"

#include <stdio.h>
#include <stdlib.h>

/* The budget a container asks for on dev: bytes=, or fraction= of the
 * GPU, or neither (0: the policy's default). 0, or 1 after a refusal. */
static int container_amount(struct conn *c, const struct proto_msg *m, int dev, uint64_t *bytes)
{
    char err[256] = "";
    const char *fraction = proto_get(m, "fraction");
    *bytes = 0;
    if (proto_get_u64(m, "bytes", (uint64_t)1 << 56, bytes, err, sizeof err) < 0)
        return answers_strike(c, "CONTAINER: %s", err) < 0 ? -1 : 1;
    if (fraction && *bytes)
        return answers_strike(c, "CONTAINER: bytes= and fraction= are both given; give one")
                   < 0 ? -1 : 1;
    if (fraction) {
        char *end;
        double f = strtod(fraction, &end);
        if (*end || !(f > 0 && f <= 1))
            return answers_strike(c, "CONTAINER: fraction=\"%.40s\": accepted: a number above 0, "
                                  "at most 1", fraction) < 0 ? -1 : 1;
        *bytes = (uint64_t)((double)D.L.dev[dev].total * f);
        if (!*bytes)
            *bytes = 1;
    }
    return 0;
}

/* The job a CONTAINER message is for: a new one (the claim checked against
 * the kernel), or, for a container registered already (the hook of its
 * next GPU), that one, taken over by this connection. NULL when the
 * message was answered (*rc). */
static struct ledger_client *container_job(struct conn *c, const struct proto_msg *m, int *rc)
{
    const char *id = proto_get(m, "id"), *name = proto_get(m, "name"),
               *cgroup = proto_get(m, "cgroup");
    uint64_t pid = 0, uid = c->uid, gid = c->gid, as = 0;
    char err[256] = "", why[800];
    *rc = 0;
    if (!id || !container_id_ok(id) || !name || !proto_name_ok(name) || !cgroup) {
        *rc = answers_strike(c, "CONTAINER: id= (a container's id), name= (a name of "
                             "[A-Za-z0-9._:@+/-]) and cgroup= are required");
        return NULL;
    }
    if (proto_get_u64(m, "pid", INT32_MAX, &pid, err, sizeof err) != 0 || !pid) {
        *rc = answers_strike(c, "CONTAINER: %s", err[0] ? err : "pid= (more than 0) is required");
        return NULL;
    }
    int ru = proto_get_u64(m, "uid", UINT32_MAX - 1, &uid, err, sizeof err),
        rg = proto_get_u64(m, "gid", UINT32_MAX - 1, &gid, err, sizeof err),
        ra = proto_get_u64(m, "as", UINT32_MAX - 1, &as, err, sizeof err);
    if (ru < 0 || rg < 0 || ra < 0) {
        *rc = answers_strike(c, "CONTAINER: %s", err);
        return NULL;
    }
    if (ra == 1)
        as = uid;
    /* Whose the container is: root's word (the runtime's state), or the
     * kernel's for anyone else, who registers only their own. */
    if (c->uid != 0 && (uid != c->uid || as != c->uid || (rg == 0 && gid != c->gid))) {
        dlog(L_INFO, "pid %d uid %u: refused container %.12s: it named another user", (int)c->pid,
             (unsigned)c->uid, id);
        *rc = reply_text(c, VERB_DENY, NULL, "uid=, gid= and as= are root's to say: a user "
                         "registers only a container of their own, as themselves (uid %u)",
                         (unsigned)c->uid);
        return NULL;
    }
    struct ledger_client *lc = c->client;
    if (lc) {
        struct ledger_client *same = containers_find(&D.L, id);
        if (same != lc) {
            *rc = answers_strike(c, "CONTAINER: this connection already stands for something "
                                 "else");
            return NULL;
        }
        return lc;
    }
    struct ledger_client *known = containers_find(&D.L, id);
    if (known) {
        if ((c->uid != 0 && known->uid != c->uid) || !known->kept) {
            *rc = reply_text(c, VERB_DENY, NULL, "container %.12s's job is %s", id,
                             known->kept ? "another user's" : "being registered on another "
                                                               "connection");
            return NULL;
        }
        ledger_unkeep(&D.L, known, c);
        c->client = known;
        return known;
    }
    struct container_claim k = {id, name, (pid_t)pid, cgroup};
    char dir[CG_PATH_LEN];
    uint64_t start = 0;
    if (containers_check(&k, c->uid, dir, sizeof dir, &start, why, sizeof why) != 0) {
        dlog(L_INFO, "pid %d uid %u: refused container %.12s: %s", (int)c->pid, (unsigned)c->uid,
             id, why);
        *rc = reply_text(c, VERB_DENY, NULL, "%s", why);
        return NULL;
    }
    lc = ledger_join(&D.L, ROLE_JOB, c->pid, (uid_t)uid, (gid_t)gid);
    if (!lc) {
        *rc = answers_strike(c, "CONTAINER: the daemon is out of memory");
        return NULL;
    }
    lc->owner = c;
    lc->start = c->start;
    /* Root's registration stands for the runtime, as the Slurm plugin's
     * JOB does: a reservation "for job" may name it. */
    lc->by_root = c->uid == 0;
    if (c->uid != 0 && ledger_set_groups(&D.L, lc, c->groups, c->ngroups) != 0) {
        ledger_leave(&D.L, lc);
        *rc = answers_strike(c, "CONTAINER: the daemon is out of memory");
        return NULL;
    }
    user_name(lc->uid, lc->user, sizeof lc->user);
    containers_job_name(id, name, lc->job, sizeof lc->job);
    snprintf(lc->cmd, sizeof lc->cmd, "container");
    if (containers_add(lc, id, dir, (uid_t)as, why, sizeof why) != 0) {
        ledger_leave(&D.L, lc);
        *rc = reply_text(c, VERB_DENY, NULL, "%s", why);
        return NULL;
    }
    c->client = lc;
    /* Its first process, the first of the job's (the rest are found in
     * its cgroup: job_keep.h). */
    ledger_member(&D.L, lc, (pid_t)pid, start);
    driver_limits_in_place(&D.L, lc, dir);
    dlog(L_INFO, "job %s (%s): container %s, cgroup %s, pid %d", lc->job, lc->user, id, cgroup,
         (int)pid);
    D.state_dirty = true;
    return lc;
}

/* vram oci-hook at a container's creation: the container is one job,
 * held by its cgroup (containers.h); its budget on one GPU per message,
 * admitted as a REQUEST is. */
int on_container(struct conn *c, const struct proto_msg *m)
{
    int dev, r;
    if ((r = message_device(c, m, &dev)) != 0)
        return r < 0 ? -1 : 0;
    uint64_t bytes, wait = 0;
    char err[256] = "";
    if ((r = container_amount(c, m, dev, &bytes)) != 0)
        return r < 0 ? -1 : 0;
    if (proto_get_u64(m, "wait", UINT64_MAX, &wait, err, sizeof err) < 0)
        return answers_strike(c, "CONTAINER: %s", err);
    struct ledger_client *lc = container_job(c, m, &r);
    if (!lc)
        return r < 0 ? -1 : 0;
    const char *uuid = D.L.dev[dev].uuid;
    if (lc->use[dev].grant || lc->use[dev].waiting)
        return answers_strike(c, "CONTAINER: job %s has asked for %s already", lc->job, uuid);
    char why[700];
    if (driver_limits_admit(&D.L, lc, why, sizeof why) != 0) {
        dlog(L_INFO, "job %s (%s): refused on %s: %s", lc->job, lc->user, uuid, why);
        return reply_text(c, VERB_DENY, uuid, "%s", why);
    }
    const struct policy *p = &D.L.policy;
    bool may_wait = wait && p->wait;
    uint64_t longest = wait < p->wait_ms ? wait : p->wait_ms, granted = 0;
    enum verdict v = ledger_request(&D.L, lc, dev, bytes, may_wait, now_ms() + longest,
                                    &granted, why, sizeof why);
    char who[200];
    snprintf(who, sizeof who, "job %s (%s)", lc->job, lc->user);
    return reply_verdict(c, who, v, dev, granted, longest, false, wait && !p->wait, why);
}


/* vram oci-hook after a container stopped: its job ends now, whatever
 * its cgroup still holds. Root, or the job's own user. */
int on_stopped(struct conn *c, const struct proto_msg *m)
{
    const char *id = proto_get(m, "id");
    if (!id || !container_id_ok(id))
        return answers_strike(c, "STOPPED: id= must be a container's id");
    struct ledger_client *lc = containers_find(&D.L, id);
    struct proto_writer w;
    if (!lc) { /* never registered (vramd was down), or ended already */
        proto_begin(&w, VERB_OK);
        return reply(c, &w);
    }
    if (c->uid != 0 && c->uid != lc->uid) {
        dlog(L_INFO, "pid %d uid %u: refused to end job %s, user %u's", (int)c->pid,
             (unsigned)c->uid, lc->job, (unsigned)lc->uid);
        return reply_text(c, VERB_DENY, NULL, "container %.12s's job %s is user %u's: only root "
                          "or that user may end it", id, lc->job, (unsigned)lc->uid);
    }
    struct conn *holder = lc->owner;
    if (holder)
        holder->client = NULL; /* a hook still registering it: the job is over all the same */
    end_client(lc, "the container stopped");
    answers_admit_waiting();
    proto_begin(&w, VERB_OK);
    return reply(c, &w);
}

/* A process in a container, through the interposer (VRAM_COMMAND=vramd):
 * the command state of the job its cgroup is, which all the container's
 * processes share (containers.h). */
int on_state(struct conn *c, const struct proto_msg *m)
{
    (void)m;
    char why[500];
    int fd;
    struct ledger_client *lc = containers_of_process(&D.L, c->pid, c->start, &fd, why, sizeof why);
    if (!lc || fd < 0)
        return reply_text(c, VERB_DENY, NULL, "%s", why);
    struct proto_writer w;
    proto_begin(&w, VERB_OK);
    proto_add(&w, "job", lc->job);
    int len = proto_end(&w);
    return len < 0 ? -1 : conn_send_fd(c, w.buf, (size_t)len, fd);
}
