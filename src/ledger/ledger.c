/* ledger.c: the ledger's set of devices and clients, the sums it keeps as
 * grants change, the devices' wait queues, NVML's figures, and a recount
 * of it all for tests. What a request may have is ledger_admit.c's; grants
 * held across a restart ledger_held.c's; what a reader sees
 * ledger_view.c's. */
#include "ledger_internal.h"

#include "../util/parse.h"
#include "../util/saturate.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- domains */

static bool in_group(const struct ledger_client *c, gid_t g)
{
    if (c->gid == g)
        return true;
    for (int i = 0; i < c->ngroups; i++)
        if (c->groups[i] == g)
            return true;
    return false;
}

static bool job_matches(const char *pattern, const char *job)
{
    size_t n = strlen(pattern);
    if (n && pattern[n - 1] == '*')
        return strncmp(pattern, job, n - 1) == 0;
    return strcmp(pattern, job) == 0;
}

bool ledger_rule_covers(const struct policy_rule *r, const struct ledger_client *c)
{
    switch (r->who) {
    case WHO_USER: return c->uid == r->id;
    case WHO_GROUP: return in_group(c, r->id);
    /* A job name a process gives itself is a label: without "of", only a
     * job root registered is what a reservation "for job" is for. With
     * "of user|group OWNER", any job or process of the owner's with the
     * name (vram run --job, VRAM_JOB): the kernel says whose it is, so no
     * one else can take it. */
    case WHO_JOB:
        if (c->role == ROLE_MONITOR || c->member_of || !job_matches(r->name, c->job))
            return false;
        if (!r->owner.given)
            return c->role == ROLE_JOB && c->by_root;
        return r->owner.who == WHO_USER ? c->uid == r->owner.id : in_group(c, r->owner.id);
    }
    return false;
}

/* What a client's grant on a device adds to what the device has granted:
 * nothing for a monitor or a grant drawn from a job (the job's counts). */
uint64_t ledger_own_grant(const struct ledger_client *c, int d)
{
    const struct ledger_use *u = &c->use[d];
    return c->role == ROLE_MONITOR || u->job ? 0 : u->grant;
}

/* Usage NVML sees beyond a grant: the context, libraries. A member's
 * figure is also its job's, whose grant it is inside. */
uint64_t ledger_excess(const struct ledger_client *c, int d)
{
    const struct ledger_use *u = &c->use[d];
    return c->member_of || u->nvml <= u->grant ? 0 : u->nvml - u->grant;
}

/* What a client has in use on a device, for the device's figure. */
uint64_t ledger_in_use(const struct ledger_client *c, int d)
{
    const struct ledger_use *u = &c->use[d];
    return c->role != ROLE_PROCESS ? 0 : u->used > u->nvml ? u->used : u->nvml;
}

static void add(uint64_t *sum, uint64_t v, int sign)
{
    if (sign > 0)
        *sum += v;
    else
        *sum -= v;
}

/* A user's usage on a device changes by v; its peak follows it up. Every
 * change is made as a taking away before an adding, so the sum never passes
 * through a value above what it settles at, and the peak is one that was. */
static void user_use(struct ledger_user *w, int d, uint64_t v, int sign)
{
    if (!w)
        return;
    add(&w->in_use[d], v, sign);
    if (w->in_use[d] > w->peak[d])
        w->peak[d] = w->in_use[d];
}

/* Adds (sign +1) or takes away (-1) what a client's standing on a device
 * puts in the kept sums: around every change of a grant, the job it draws
 * from, or NVML's figure. */
void ledger_account(struct ledger *l, struct ledger_client *c, int d, int sign)
{
    struct ledger_use *u = &c->use[d];
    uint64_t own = ledger_own_grant(c, d);
    add(&l->dev[d].granted, own, sign);
    add(&l->dev[d].excess, ledger_excess(c, d), sign);
    add(&l->dev[d].used, ledger_in_use(c, d), sign);
    user_use(c->who, d, ledger_in_use(c, d), sign);
    if (u->job)
        add(&u->job->use[d].drawn, u->grant, sign);
    if (own)
        for (int r = 0; r < l->policy.nrules; r++)
            if (ledger_rule_covers(&l->policy.rules[r], c))
                add(&l->held[r][d], own, sign);
}

/* Sets a client's grant on a device and what it draws from. */
void ledger_set_grant(struct ledger *l, struct ledger_client *c, int d, uint64_t bytes,
                      struct ledger_client *job)
{
    ledger_account(l, c, d, -1);
    c->use[d].grant = bytes;
    c->use[d].job = bytes ? job : NULL;
    ledger_account(l, c, d, +1);
}

/* ----------------------------------------------------------- the queues */

void ledger_enqueue(struct ledger *l, struct ledger_client *c, int d)
{
    struct ledger_device *dv = &l->dev[d];
    struct ledger_use *u = &c->use[d];
    u->client = c;
    u->qnext = NULL;
    u->qprev = dv->qtail;
    if (dv->qtail)
        dv->qtail->qnext = u;
    else
        dv->qhead = u;
    dv->qtail = u;
    dv->nwaiting++;
    u->waiting = true;
    u->wait_since_ms = l->now_ms;
}

void ledger_dequeue(struct ledger *l, struct ledger_client *c, int d)
{
    struct ledger_device *dv = &l->dev[d];
    struct ledger_use *u = &c->use[d];
    if (!u->waiting)
        return;
    if (u->qprev)
        u->qprev->qnext = u->qnext;
    else
        dv->qhead = u->qnext;
    if (u->qnext)
        u->qnext->qprev = u->qprev;
    else
        dv->qtail = u->qprev;
    u->qprev = u->qnext = NULL;
    u->waiting = false;
    u->want = 0;
    dv->nwaiting--;
    dv->counters.waits++;
    if (l->now_ms > u->wait_since_ms)
        dv->counters.waited_ms += l->now_ms - u->wait_since_ms;
}

/* ------------------------------------------------------------- the set */

void ledger_init(struct ledger *l, const struct policy *p)
{
    memset(l, 0, sizeof *l);
    l->policy = *p;
    l->next_id = 1;
}

void ledger_destroy(struct ledger *l)
{
    for (int i = 0; i < l->nclients; i++) {
        free(l->clients[i]->groups);
        free(l->clients[i]->members);
        free(l->clients[i]);
    }
    free(l->clients);
    free(l->jobs);
    for (int i = 0; i < l->nusers; i++)
        free(l->users[i]);
    free(l->users);
    for (int d = 0; d < LEDGER_MAX_DEVICES; d++)
        free(l->dev[d].unseen_by);
    memset(l, 0, sizeof *l);
}

/* The index of uid's record, or where it would go (as ~index). */
static int user_index(const struct ledger *l, uid_t uid)
{
    int lo = 0, hi = l->nusers;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (l->users[mid]->uid == uid)
            return mid;
        if (l->users[mid]->uid < uid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return ~lo;
}

struct ledger_user *ledger_user_of(struct ledger *l, uid_t uid)
{
    int i = user_index(l, uid);
    if (i >= 0)
        return l->users[i];
    i = ~i;
    if (l->nusers == l->users_cap) {
        int cap = l->users_cap ? l->users_cap * 2 : 16;
        struct ledger_user **u = realloc(l->users, (size_t)cap * sizeof *u);
        if (!u)
            return NULL;
        l->users = u;
        l->users_cap = cap;
    }
    struct ledger_user *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->uid = uid;
    memmove(&l->users[i + 1], &l->users[i], (size_t)(l->nusers - i) * sizeof *l->users);
    l->users[i] = w;
    l->nusers++;
    return w;
}

void ledger_set_policy(struct ledger *l, const struct policy *p)
{
    l->policy = *p;
    memset(l->held, 0, sizeof l->held);
    for (int d = 0; d < l->ndev; d++) {
        memset(l->dev[d].cap_blocked, 0, sizeof l->dev[d].cap_blocked);
        for (int i = 0; i < l->nclients; i++) {
            const struct ledger_client *c = l->clients[i];
            uint64_t own = ledger_own_grant(c, d);
            for (int r = 0; own && r < l->policy.nrules; r++)
                if (ledger_rule_covers(&l->policy.rules[r], c))
                    l->held[r][d] += own;
        }
    }
}

int ledger_find_device(const struct ledger *l, const char *uuid)
{
    for (int d = 0; d < l->ndev; d++)
        if (strcmp(l->dev[d].uuid, uuid) == 0)
            return d;
    return -1;
}

int ledger_device(struct ledger *l, const char *uuid, uint64_t total)
{
    int d = ledger_find_device(l, uuid);
    if (d < 0) {
        if (l->ndev == LEDGER_MAX_DEVICES)
            return -1;
        d = l->ndev++;
        free(l->dev[d].unseen_by);
        memset(&l->dev[d], 0, sizeof l->dev[d]);
        l->dev[d].minor = -1;
        snprintf(l->dev[d].uuid, sizeof l->dev[d].uuid, "%s", uuid);
    }
    if (total)
        l->dev[d].total = total;
    return d;
}

struct ledger_client *ledger_join(struct ledger *l, enum client_role role, pid_t pid, uid_t uid,
                                  gid_t gid)
{
    if (l->nclients == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        struct ledger_client **c = realloc(l->clients, (size_t)cap * sizeof *c);
        if (!c)
            return NULL;
        l->clients = c;
        l->cap = cap;
    }
    struct ledger_user *who = ledger_user_of(l, uid);
    struct ledger_client *c = who ? calloc(1, sizeof *c) : NULL;
    if (!c)
        return NULL;
    c->who = who;
    if (role == ROLE_JOB) {
        struct ledger_client **j = realloc(l->jobs, (size_t)(l->njobs + 1) * sizeof *j);
        if (!j) {
            free(c);
            return NULL;
        }
        l->jobs = j;
        l->jobs[l->njobs++] = c;
    }
    c->id = l->next_id++;
    c->role = role;
    c->pid = pid;
    c->uid = uid;
    c->gid = gid;
    snprintf(c->cmd, sizeof c->cmd, "-");
    snprintf(c->job, sizeof c->job, "-");
    for (int d = 0; d < LEDGER_MAX_DEVICES; d++)
        c->use[d].client = c;
    l->clients[l->nclients++] = c; /* the highest id yet: the order holds */
    return c;
}

int ledger_set_groups(struct ledger *l, struct ledger_client *c, const gid_t *groups, int n)
{
    gid_t *g = n > 0 ? malloc((size_t)n * sizeof *g) : NULL;
    if (n > 0 && !g)
        return -1;
    if (n > 0)
        memcpy(g, groups, (size_t)n * sizeof *g);
    for (int d = 0; d < l->ndev; d++)
        ledger_account(l, c, d, -1);
    free(c->groups);
    c->groups = g;
    c->ngroups = n > 0 ? n : 0;
    for (int d = 0; d < l->ndev; d++)
        ledger_account(l, c, d, +1);
    return 0;
}

/* Where pid is in a job's members (by pid), or where it would go. */
static int member_slot(const struct ledger_client *job, pid_t pid, bool *found)
{
    int lo = 0, hi = job->nmembers;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (job->members[mid]->pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < job->nmembers && job->members[lo]->pid == pid;
    return lo;
}

static void forget_member(struct ledger_client *job, const struct ledger_client *m)
{
    bool found;
    int k = member_slot(job, m->pid, &found);
    if (!found || job->members[k] != m)
        return;
    memmove(&job->members[k], &job->members[k + 1],
            (size_t)(job->nmembers - k - 1) * sizeof *job->members);
    job->nmembers--;
    if (job->who)
        job->who->members--;
}

static int index_of(const struct ledger *l, int id)
{
    int lo = 0, hi = l->nclients - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (l->clients[mid]->id == id)
            return mid;
        if (l->clients[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

struct ledger_client *ledger_find_client(const struct ledger *l, int id)
{
    int i = index_of(l, id);
    return i < 0 ? NULL : l->clients[i];
}

/* A job's grant on a device ends: the grants its processes drew from it
 * count for themselves from now on (they still hold them). */
static void job_ends(struct ledger *l, struct ledger_client *job, int d)
{
    if (job->role != ROLE_JOB || !job->use[d].drawn)
        return;
    for (int i = 0; i < l->nclients; i++)
        if (l->clients[i]->use[d].job == job)
            ledger_set_grant(l, l->clients[i], d, l->clients[i]->use[d].grant, NULL);
}

void ledger_release(struct ledger *l, struct ledger_client *c, int dev)
{
    struct ledger_use *u = &c->use[dev];
    if (c->member_of)
        c->member_of->use[dev].members_used -= u->used;
    ledger_dequeue(l, c, dev);
    job_ends(l, c, dev);
    ledger_account(l, c, dev, -1);
    u->grant = u->used = 0;
    u->job = NULL;
    u->by_driver = false;
    ledger_account(l, c, dev, +1);
}

void ledger_leave(struct ledger *l, struct ledger_client *c)
{
    int i = index_of(l, c->id);
    if (i < 0 || l->clients[i] != c)
        return;
    /* A job's members go with it. */
    while (c->nmembers)
        ledger_leave(l, c->members[c->nmembers - 1]);
    if (c->member_of)
        forget_member(c->member_of, c);
    i = index_of(l, c->id); /* the members have gone from the array */
    for (int d = 0; d < l->ndev; d++) {
        /* The connection is the grant: what it still held comes back. */
        if (c->use[d].grant && c->role != ROLE_MONITOR) {
            l->dev[d].counters.reclaimed++;
            l->dev[d].counters.reclaimed_bytes += c->use[d].grant;
        }
        ledger_release(l, c, d);
        ledger_account(l, c, d, -1); /* what NVML saw of it */
    }
    memmove(&l->clients[i], &l->clients[i + 1], (size_t)(l->nclients - i - 1) * sizeof *l->clients);
    l->nclients--;
    if (c->held_until_ms)
        l->nheld--;
    if (c->kept)
        l->nkept--;
    for (int k = 0; k < l->njobs; k++)
        if (l->jobs[k] == c)
            l->jobs[k] = l->jobs[--l->njobs];
    free(c->groups);
    free(c->members);
    free(c);
}

struct ledger_client *ledger_job_of(const struct ledger *l, const struct ledger_client *c,
                                    int dev)
{
    if (c->role != ROLE_PROCESS || strcmp(c->job, "-") == 0)
        return NULL;
    for (int i = 0; i < l->njobs; i++) {
        struct ledger_client *j = l->jobs[i];
        if (j->role == ROLE_JOB && j->uid == c->uid && strcmp(j->job, c->job) == 0 &&
            j->use[dev].grant)
            return j;
    }
    return NULL;
}

struct ledger_client *ledger_find_member(const struct ledger *l, const struct ledger_client *job,
                                         pid_t pid)
{
    (void)l;
    bool found;
    int k = member_slot(job, pid, &found);
    return found ? job->members[k] : NULL;
}

struct ledger_client *ledger_member(struct ledger *l, struct ledger_client *job, pid_t pid,
                                    uint64_t start)
{
    bool found;
    int k = member_slot(job, pid, &found);
    if (found) {
        struct ledger_client *m = job->members[k];
        if (m->start == start)
            return m;
        ledger_leave(l, m); /* the pid's previous process, gone: k is where it goes */
    }
    if (job->nmembers >= LEDGER_MAX_MEMBERS || !job->who ||
        job->who->members >= LEDGER_USER_MEMBERS)
        return NULL;
    if (job->nmembers == job->members_cap) {
        int cap = job->members_cap ? job->members_cap * 2 : 8;
        struct ledger_client **t = realloc(job->members, (size_t)cap * sizeof *t);
        if (!t)
            return NULL;
        job->members = t;
        job->members_cap = cap;
    }
    struct ledger_client *m = ledger_join(l, ROLE_PROCESS, pid, job->uid, job->gid);
    if (!m)
        return NULL;
    /* Nothing it holds counts for a rule, so its groups do not matter. */
    m->start = start;
    m->member_of = job;
    memmove(&job->members[k + 1], &job->members[k],
            (size_t)(job->nmembers - k) * sizeof *job->members);
    job->members[k] = m;
    job->nmembers++;
    job->who->members++;
    snprintf(m->user, sizeof m->user, "%s", job->user);
    snprintf(m->job, sizeof m->job, "%s", job->job);
    return m;
}

/* A process NVML's last look saw outside any grant that is now a client
 * (a process that connected since, a job's member its holder reports, as
 * after a restart of the daemon): its usage there leaves the device's
 * unseen figure and its user's now, so that it is never counted twice, not
 * even until NVML's next look (a user's peak would keep the double). */
static void claim_unseen(struct ledger *l, const struct ledger_client *c, int dev)
{
    struct ledger_device *d = &l->dev[dev];
    for (int k = 0; k < d->nunseen; k++) {
        struct ledger_nvml_process *p = &d->unseen_by[k];
        if (p->pid != c->pid || !c->start || p->start != c->start)
            continue;
        int i = p->uid != (uid_t)-1 ? user_index(l, p->uid) : -1;
        if (i >= 0)
            user_use(l->users[i], dev, p->used, -1);
        d->unseen -= p->used;
        d->used -= p->used;
        memmove(p, p + 1, (size_t)(d->nunseen - k - 1) * sizeof *p);
        d->nunseen--;
        return;
    }
}

void ledger_report(struct ledger *l, struct ledger_client *c, int dev, uint64_t used,
                   uint64_t peak)
{
    /* What a client says it uses is within its grant: what it may have.
     * Beyond, only NVML's figure counts (and says it is over): ten grants
     * of 1 MiB each saying 12 GiB do not make a GPU show ten times its
     * size. */
    uint64_t granted = c->use[dev].grant;
    if (!c->member_of && used > granted)
        used = granted;
    if (!c->member_of && peak > granted)
        peak = granted;
    if (c->member_of) {
        struct ledger_use *j = &c->member_of->use[dev];
        uint64_t most = j->grant < l->dev[dev].total ? j->grant : l->dev[dev].total;
        uint64_t others = j->members_used - c->use[dev].used;
        uint64_t room = most > others ? most - others : 0;
        if (used > room)
            used = room;
        if (peak > most)
            peak = most;
        j->members_used = others + used;
    }
    /* Of the kept sums only the device's in-use figure depends on it: the
     * hot message of the protocol touches no rule. */
    uint64_t before = ledger_in_use(c, dev);
    if (!before && c->role == ROLE_PROCESS && l->dev[dev].nunseen)
        claim_unseen(l, c, dev);
    l->dev[dev].used -= before;
    user_use(c->who, dev, before, -1);
    c->use[dev].used = used;
    l->dev[dev].used += ledger_in_use(c, dev);
    user_use(c->who, dev, ledger_in_use(c, dev), +1);
    if (peak > c->use[dev].peak)
        c->use[dev].peak = peak;
    if (used > c->use[dev].peak)
        c->use[dev].peak = used;
    /* The user held at least what one of their processes did. */
    if (c->who && c->role == ROLE_PROCESS && c->use[dev].peak > c->who->peak[dev])
        c->who->peak[dev] = c->use[dev].peak;
}

/* ------------------------------------------------------------- NVML */

static int by_pid(const void *a, const void *b)
{
    const struct ledger_client *x = *(struct ledger_client *const *)a,
                               *y = *(struct ledger_client *const *)b;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* The job whose member or holder process `ppid` is, or NULL. */
static struct ledger_client *job_of_parent(const struct ledger *l, struct ledger_client **sorted,
                                           int n, pid_t ppid)
{
    struct ledger_client key = {.pid = ppid}, *kp = &key;
    struct ledger_client **hit = bsearch(&kp, sorted, (size_t)n, sizeof *sorted, by_pid);
    for (; hit && hit > sorted && hit[-1]->pid == ppid; hit--)
        ;
    for (; hit && hit < sorted + n && (*hit)->pid == ppid; hit++)
        if ((*hit)->member_of)
            return (*hit)->member_of;
    /* A holder gone (held, kept) may have left its pid to another. */
    for (int i = 0; i < l->njobs; i++)
        if (l->jobs[i]->pid == ppid && !l->jobs[i]->held_until_ms && !l->jobs[i]->kept)
            return l->jobs[i];
    return NULL;
}

/* The job whose command's state the process holds open, of the process's
 * user (a file of the user's own, so no one else's job), or NULL. */
static struct ledger_client *job_of_state(const struct ledger *l,
                                          const struct ledger_nvml_process *p)
{
    for (int i = 0; i < l->njobs; i++) {
        struct ledger_client *j = l->jobs[i];
        if (j->state_ino && j->state_ino == p->state_ino && j->state_dev == p->state_dev &&
            j->uid == p->uid && !j->held_until_ms)
            return j;
    }
    return NULL;
}

int ledger_reconcile(struct ledger *l, int dev, const struct ledger_nvml_process *procs, int n,
                     struct ledger_client **over, int max)
{
    int nover = 0, nproc = 0;
    uint64_t unseen = 0;
    struct ledger_device *d = &l->dev[dev];
    /* The processes with a grant here, by pid: one sort, then a lookup each. */
    struct ledger_client **sorted = malloc((size_t)(l->nclients + 1) * sizeof *sorted);
    struct ledger_nvml_process *by = malloc((size_t)(n + 1) * sizeof *by);
    if (!sorted || !by) {
        free(sorted);
        free(by);
        return 0;
    }
    /* The last look's usage outside grants leaves its users first, so that
     * a process that has since been granted is never counted twice. */
    for (int k = 0; k < d->nunseen; k++) {
        int i = d->unseen_by[k].uid != (uid_t)-1 ? user_index(l, d->unseen_by[k].uid) : -1;
        if (i >= 0)
            user_use(l->users[i], dev, d->unseen_by[k].used, -1);
    }
    int nby = 0;
    for (int i = 0; i < l->nclients; i++) {
        struct ledger_client *c = l->clients[i];
        if (c->use[dev].nvml) {
            ledger_account(l, c, dev, -1);
            c->use[dev].nvml = 0;
            ledger_account(l, c, dev, +1);
        }
        if (c->role == ROLE_PROCESS && (c->use[dev].grant || c->member_of) && c->start)
            sorted[nproc++] = c;
    }
    qsort(sorted, (size_t)nproc, sizeof *sorted, by_pid);
    for (int k = 0; k < n; k++) {
        /* A process holds no more than the device has, whatever NVML says:
         * the sums below stay within n devices' worth. */
        uint64_t used = d->total && procs[k].used > d->total ? d->total : procs[k].used;
        struct ledger_client key = {.pid = procs[k].pid}, *kp = &key, *c = NULL;
        struct ledger_client **hit = bsearch(&kp, sorted, (size_t)nproc, sizeof *sorted, by_pid);
        /* Several clients may share a pid (a process with two connections):
         * any with the same start time is that process. */
        for (; hit && hit > sorted && hit[-1]->pid == procs[k].pid; hit--)
            ;
        for (; hit && hit < sorted + nproc && (*hit)->pid == procs[k].pid && !c; hit++)
            if ((*hit)->start == procs[k].start)
                c = *hit;
        if (!c && procs[k].ppid) /* a child of a job's, not reported yet: the job's */
            c = job_of_parent(l, sorted, nproc, procs[k].ppid);
        if (!c && procs[k].state_ino) /* one that left the tree, by what it inherited */
            c = job_of_state(l, &procs[k]);
        if (c && c->role == ROLE_JOB) {
            ledger_account(l, c, dev, -1);
            c->use[dev].nvml = add_saturating(c->use[dev].nvml, used);
            ledger_account(l, c, dev, +1);
            continue;
        }
        if (!c) {
            unseen = add_saturating(unseen, used);
            by[nby] = procs[k];
            by[nby++].used = used;
            continue;
        }
        struct ledger_use *u = &c->use[dev];
        ledger_account(l, c, dev, -1);
        u->nvml = add_saturating(u->nvml, used);
        ledger_account(l, c, dev, +1);
        if (c->member_of) { /* its job's figure too, against the job's grant (below) */
            ledger_account(l, c->member_of, dev, -1);
            c->member_of->use[dev].nvml = add_saturating(c->member_of->use[dev].nvml, used);
            ledger_account(l, c->member_of, dev, +1);
            continue;
        }
        bool over_now = u->nvml > u->grant + l->policy.over_margin;
        if (over_now && !u->over && nover < max)
            over[nover++] = c;
        u->over = over_now;
    }
    for (int i = 0; i < nproc; i++)
        if (!sorted[i]->use[dev].nvml)
            sorted[i]->use[dev].over = false;
    for (int i = 0; i < l->njobs; i++) {
        struct ledger_client *j = l->jobs[i];
        struct ledger_use *u = &j->use[dev];
        bool over_now = j->nmembers && u->nvml > u->grant + l->policy.over_margin;
        if (over_now && !u->over && nover < max)
            over[nover++] = j;
        u->over = over_now;
        if (over_now && u->nvml > u->over_most)
            u->over_most = u->nvml;
    }
    free(sorted);
    free(d->unseen_by);
    d->unseen_by = by;
    d->nunseen = nby;
    for (int k = 0; k < nby; k++) {
        struct ledger_user *w = by[k].uid != (uid_t)-1 ? ledger_user_of(l, by[k].uid) : NULL;
        if (w)
            user_use(w, dev, by[k].used, +1);
        else
            by[k].uid = (uid_t)-1; /* counted for no one (out of memory) */
    }
    d->used = d->used - d->unseen + unseen;
    d->unseen = unseen;
    d->overcommitted = d->granted > d->total || d->excess + d->unseen > d->total - d->granted;
    return nover;
}

/* ------------------------------------------------------------- checks */

int ledger_check(const struct ledger *l, char *err, size_t errlen)
{
    for (int i = 1; i < l->nclients; i++)
        if (l->clients[i - 1]->id >= l->clients[i]->id) {
            snprintf(err, errlen, "clients out of order at %d", i);
            return -1;
        }
    int nheld = 0, nkept = 0;
    for (int i = 0; i < l->nclients; i++) {
        nheld += l->clients[i]->held_until_ms != 0;
        nkept += l->clients[i]->kept;
        if (l->clients[i]->kept && (l->clients[i]->role != ROLE_JOB || l->clients[i]->owner)) {
            snprintf(err, errlen, "client %d is kept, but not a job whose holder is gone",
                     l->clients[i]->id);
            return -1;
        }
    }
    if (nheld != l->nheld || nkept != l->nkept) {
        snprintf(err, errlen, "%d held (counted %d), %d kept (counted %d)", nheld, l->nheld, nkept,
                 l->nkept);
        return -1;
    }
    for (int i = 0; i < l->nclients; i++) {
        const struct ledger_client *c = l->clients[i];
        int members = 0;
        for (int k = 0; k < l->nclients; k++)
            members += l->clients[k]->member_of == c;
        const struct ledger_client *j = c->member_of;
        for (int k = 0; k < c->nmembers; k++)
            if (c->members[k]->member_of != c ||
                (k && c->members[k - 1]->pid >= c->members[k]->pid)) {
                snprintf(err, errlen, "job %d: its index of members is wrong at %d", c->id, k);
                return -1;
            }
        if (members != c->nmembers ||
            (j && (j->role != ROLE_JOB || ledger_find_client(l, j->id) != j || j->id > c->id))) {
            snprintf(err, errlen, "client %d: %d members, counted %d%s", c->id, members,
                     c->nmembers, j ? ", or a member of a job that is gone" : "");
            return -1;
        }
        for (int d = 0; j && d < l->ndev; d++)
            if (c->use[d].grant || c->use[d].waiting) {
                snprintf(err, errlen, "member %d holds or waits on %d", c->id, d);
                return -1;
            }
    }
    for (int k = 0; k < l->nusers; k++) {
        int members = 0;
        for (int i = 0; i < l->nclients; i++)
            members += l->clients[i]->member_of && l->clients[i]->who == l->users[k];
        if (members != l->users[k]->members) {
            snprintf(err, errlen, "user %u: %d members in its jobs, counted %d",
                     (unsigned)l->users[k]->uid, members, l->users[k]->members);
            return -1;
        }
    }
    for (int d = 0; d < l->ndev; d++) {
        const struct ledger_device *dv = &l->dev[d];
        uint64_t granted = 0, ex = 0, used = dv->unseen;
        int waiting = 0;
        for (int i = 0; i < l->nclients; i++) {
            const struct ledger_client *c = l->clients[i];
            const struct ledger_use *u = &c->use[d];
            granted += ledger_own_grant(c, d);
            ex += ledger_excess(c, d);
            used += ledger_in_use(c, d);
            waiting += u->waiting;
            if (u->waiting && u->grant) {
                snprintf(err, errlen, "client %d both waits and holds on %d", c->id, d);
                return -1;
            }
            if (u->job && (u->job->role != ROLE_JOB || !u->job->use[d].grant ||
                           ledger_find_client(l, u->job->id) != u->job)) {
                snprintf(err, errlen, "client %d draws from a job that is gone on %d", c->id, d);
                return -1;
            }
            uint64_t drawn = 0;
            for (int k = 0; c->role == ROLE_JOB && k < l->nclients; k++)
                if (l->clients[k]->use[d].job == c)
                    drawn += l->clients[k]->use[d].grant;
            uint64_t members_used = 0;
            for (int k = 0; c->role == ROLE_JOB && k < l->nclients; k++)
                if (l->clients[k]->member_of == c)
                    members_used += l->clients[k]->use[d].used;
            if (members_used != u->members_used) {
                snprintf(err, errlen, "job %d: its members use %llu, counted %llu on %d", c->id,
                         (unsigned long long)members_used, (unsigned long long)u->members_used, d);
                return -1;
            }
            if (drawn != u->drawn || drawn > u->grant) {
                snprintf(err, errlen, "job %d: drawn %llu, counted %llu, granted %llu on %d", c->id,
                         (unsigned long long)drawn, (unsigned long long)u->drawn,
                         (unsigned long long)u->grant, d);
                return -1;
            }
        }
        for (int k = 0; k < l->nusers; k++) {
            const struct ledger_user *w = l->users[k];
            uint64_t in_use = 0;
            for (int i = 0; i < l->nclients; i++)
                if (l->clients[i]->who == w)
                    in_use += ledger_in_use(l->clients[i], d);
            for (int i = 0; i < dv->nunseen; i++)
                if (dv->unseen_by[i].uid == w->uid)
                    in_use += dv->unseen_by[i].used;
            if (in_use != w->in_use[d] || w->peak[d] < in_use ||
                (k && l->users[k - 1]->uid >= w->uid)) {
                snprintf(err, errlen, "user %u on device %d: in use %llu, kept %llu, peak %llu",
                         (unsigned)w->uid, d, (unsigned long long)in_use,
                         (unsigned long long)w->in_use[d], (unsigned long long)w->peak[d]);
                return -1;
            }
        }
        if (used != dv->used) {
            snprintf(err, errlen, "device %d: used %llu, kept %llu", d, (unsigned long long)used,
                     (unsigned long long)dv->used);
            return -1;
        }
        if (granted != dv->granted || ex != dv->excess || waiting != dv->nwaiting) {
            snprintf(err, errlen, "device %d: granted %llu (kept %llu), excess %llu (kept %llu), "
                     "waiting %d (kept %d)", d, (unsigned long long)granted,
                     (unsigned long long)dv->granted, (unsigned long long)ex,
                     (unsigned long long)dv->excess, waiting, dv->nwaiting);
            return -1;
        }
        int inq = 0;
        uint64_t seq = 0;
        for (const struct ledger_use *u = dv->qhead; u; u = u->qnext, inq++)
            if (!u->waiting || u->wait_seq <= seq || &u->client->use[d] != u) {
                snprintf(err, errlen, "device %d: the queue is broken at %d", d, inq);
                return -1;
            } else {
                seq = u->wait_seq;
            }
        if (inq != waiting) {
            snprintf(err, errlen, "device %d: %d in the queue, %d waiting", d, inq, waiting);
            return -1;
        }
        for (int r = 0; r < l->policy.nrules; r++) {
            uint64_t held = 0;
            for (int i = 0; i < l->nclients; i++)
                if (ledger_rule_covers(&l->policy.rules[r], l->clients[i]))
                    held += ledger_own_grant(l->clients[i], d);
            if (held != l->held[r][d]) {
                snprintf(err, errlen, "rule %d on device %d: held %llu, kept %llu", r, d,
                         (unsigned long long)held, (unsigned long long)l->held[r][d]);
                return -1;
            }
        }
    }
    return 0;
}
