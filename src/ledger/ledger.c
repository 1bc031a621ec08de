#include "ledger.h"

#include "../util/parse.h"

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

static bool rule_covers(const struct policy_rule *r, const struct ledger_client *c)
{
    switch (r->who) {
    case WHO_USER: return c->uid == r->id;
    case WHO_GROUP: return in_group(c, r->id);
    /* A job name a process gives itself is a label: only a job root
     * registered is what a reservation "for job" is for. */
    case WHO_JOB: return c->role == ROLE_JOB && job_matches(r->name, c->job);
    }
    return false;
}

/* What a client's grant on a device adds to what the device has granted:
 * nothing for a monitor or a grant drawn from a job (the job's counts). */
static uint64_t own_grant(const struct ledger_client *c, int d)
{
    const struct ledger_use *u = &c->use[d];
    return c->role == ROLE_MONITOR || u->job ? 0 : u->grant;
}

/* Usage NVML sees beyond a grant: the context, libraries. */
static uint64_t excess(const struct ledger_use *u)
{
    return u->nvml > u->grant ? u->nvml - u->grant : 0;
}

/* What a client has in use on a device, for the device's figure. */
static uint64_t in_use(const struct ledger_client *c, int d)
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

/* Adds (sign +1) or takes away (-1) what a client's standing on a device
 * puts in the kept sums: around every change of a grant, the job it draws
 * from, or NVML's figure. */
static void account(struct ledger *l, struct ledger_client *c, int d, int sign)
{
    struct ledger_use *u = &c->use[d];
    uint64_t own = own_grant(c, d);
    add(&l->dev[d].granted, own, sign);
    add(&l->dev[d].excess, excess(u), sign);
    add(&l->dev[d].used, in_use(c, d), sign);
    if (u->job)
        add(&u->job->use[d].drawn, u->grant, sign);
    if (own)
        for (int r = 0; r < l->policy.nrules; r++)
            if (rule_covers(&l->policy.rules[r], c))
                add(&l->held[r][d], own, sign);
}

/* Sets a client's grant on a device and what it draws from. */
static void set_grant(struct ledger *l, struct ledger_client *c, int d, uint64_t bytes,
                      struct ledger_client *job)
{
    account(l, c, d, -1);
    c->use[d].grant = bytes;
    c->use[d].job = bytes ? job : NULL;
    account(l, c, d, +1);
}

/* ----------------------------------------------------------- the queues */

static void enqueue(struct ledger *l, struct ledger_client *c, int d)
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
}

static void dequeue(struct ledger *l, struct ledger_client *c, int d)
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
}

static bool bit(const uint64_t *set, int i) { return set[i / 64] >> (i % 64) & 1; }
static void set_bit(uint64_t *set, int i) { set[i / 64] |= 1ull << (i % 64); }

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
        free(l->clients[i]);
    }
    free(l->clients);
    free(l->jobs);
    memset(l, 0, sizeof *l);
}

void ledger_set_policy(struct ledger *l, const struct policy *p)
{
    l->policy = *p;
    memset(l->held, 0, sizeof l->held);
    for (int d = 0; d < l->ndev; d++) {
        memset(l->dev[d].cap_blocked, 0, sizeof l->dev[d].cap_blocked);
        for (int i = 0; i < l->nclients; i++) {
            const struct ledger_client *c = l->clients[i];
            uint64_t own = own_grant(c, d);
            for (int r = 0; own && r < l->policy.nrules; r++)
                if (rule_covers(&l->policy.rules[r], c))
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
        memset(&l->dev[d], 0, sizeof l->dev[d]);
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
    struct ledger_client *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
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
        account(l, c, d, -1);
    free(c->groups);
    c->groups = g;
    c->ngroups = n > 0 ? n : 0;
    for (int d = 0; d < l->ndev; d++)
        account(l, c, d, +1);
    return 0;
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
            set_grant(l, l->clients[i], d, l->clients[i]->use[d].grant, NULL);
}

void ledger_release(struct ledger *l, struct ledger_client *c, int dev)
{
    struct ledger_use *u = &c->use[dev];
    dequeue(l, c, dev);
    job_ends(l, c, dev);
    account(l, c, dev, -1);
    u->grant = u->used = 0;
    u->job = NULL;
    account(l, c, dev, +1);
}

void ledger_leave(struct ledger *l, struct ledger_client *c)
{
    int i = index_of(l, c->id);
    if (i < 0 || l->clients[i] != c)
        return;
    for (int d = 0; d < l->ndev; d++) {
        ledger_release(l, c, d);
        account(l, c, d, -1); /* what NVML saw of it */
    }
    memmove(&l->clients[i], &l->clients[i + 1], (size_t)(l->nclients - i - 1) * sizeof *l->clients);
    l->nclients--;
    if (c->held_until_ms)
        l->nheld--;
    for (int k = 0; k < l->njobs; k++)
        if (l->jobs[k] == c)
            l->jobs[k] = l->jobs[--l->njobs];
    free(c->groups);
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

/* ----------------------------------------------------------- admission */

/* Unused reservations that count against `c` if it takes `w` more (c
 * NULL: against everyone). */
static uint64_t reserved_against(const struct ledger *l, const struct ledger_client *c, int dev,
                                 uint64_t w)
{
    uint64_t against = 0;
    for (int r = 0; r < l->policy.nrules; r++) {
        const struct policy_rule *rule = &l->policy.rules[r];
        if (rule->kind != RULE_RESERVE || !policy_on_device(rule, dev, l->dev[dev].uuid))
            continue;
        uint64_t amount = amount_of(&rule->amount, l->dev[dev].total), held = l->held[r][dev];
        if (c && rule_covers(rule, c))
            held += w;
        if (amount > held)
            against += amount - held;
    }
    return against;
}

/* What of c's own reservations on the device nobody entitled holds yet:
 * memory only c's kind may take, whoever waits. */
static uint64_t reserved_for(const struct ledger *l, const struct ledger_client *c, int dev)
{
    uint64_t room = 0;
    for (int r = 0; r < l->policy.nrules; r++) {
        const struct policy_rule *rule = &l->policy.rules[r];
        if (rule->kind != RULE_RESERVE || !policy_on_device(rule, dev, l->dev[dev].uuid) ||
            !rule_covers(rule, c))
            continue;
        uint64_t amount = amount_of(&rule->amount, l->dev[dev].total);
        if (amount > l->held[r][dev])
            room += amount - l->held[r][dev];
    }
    return room;
}

/* Why a request does not fit now. */
enum blocker { FITS, BY_CAP, BY_DEVICE, BY_QUEUE };

struct fit {
    enum blocker by;
    bool never;   /* and never will, whoever releases */
    int rule;     /* BY_CAP: the cap's rule */
};

static struct fit fits(const struct ledger *l, const struct ledger_client *c, int dev, uint64_t w)
{
    const struct ledger_device *d = &l->dev[dev];
    for (int r = 0; r < l->policy.nrules; r++) {
        const struct policy_rule *rule = &l->policy.rules[r];
        if (rule->kind != RULE_CAP || !policy_on_device(rule, dev, d->uuid) ||
            !rule_covers(rule, c))
            continue;
        uint64_t cap = amount_of(&rule->amount, d->total);
        if (l->held[r][dev] + w > cap)
            return (struct fit){BY_CAP, w > cap, r};
    }
    uint64_t busy = d->granted + d->excess + d->unseen + reserved_against(l, c, dev, w);
    if (busy <= d->total && w <= d->total - busy)
        return (struct fit){FITS, false, -1};
    /* Were everyone else to release, only others' reservations would stand
     * between the request and the device. */
    uint64_t never = 0;
    for (int r = 0; r < l->policy.nrules; r++) {
        const struct policy_rule *rule = &l->policy.rules[r];
        if (rule->kind == RULE_RESERVE && policy_on_device(rule, dev, d->uuid) &&
            !rule_covers(rule, c))
            never += amount_of(&rule->amount, d->total);
    }
    return (struct fit){BY_DEVICE, w > d->total || never > d->total - w, -1};
}

/* An older request waits for what this one would take. */
static bool queued_ahead(const struct ledger *l, const struct ledger_client *c, int dev,
                         uint64_t w)
{
    const struct ledger_device *d = &l->dev[dev];
    if (!d->nwaiting)
        return false;
    for (int r = 0; r < l->policy.nrules; r++)
        if (bit(d->cap_blocked, r) && l->policy.rules[r].kind == RULE_CAP &&
            policy_on_device(&l->policy.rules[r], dev, d->uuid) &&
            rule_covers(&l->policy.rules[r], c))
            return true;
    return d->queue_blocked && w > reserved_for(l, c, dev);
}

/* Notes what an older waiter waits for, for the requests after it. */
static void block(struct ledger *l, int dev, const struct fit *f)
{
    if (f->by == BY_CAP)
        set_bit(l->dev[dev].cap_blocked, f->rule);
    else if (f->by == BY_DEVICE)
        l->dev[dev].queue_blocked = true;
}

/* Per-user holdings on a device, for reasons: "alice 4.00 GiB, bob 2.00 GiB". */
static void holders(const struct ledger *l, int dev, const struct policy_rule *rule, char *out,
                    size_t n)
{
    struct {
        char user[64];
        uint64_t bytes;
    } u[8];
    int nu = 0;
    uint64_t others = 0;
    for (int i = 0; i < l->nclients; i++) {
        const struct ledger_client *c = l->clients[i];
        uint64_t g = own_grant(c, dev);
        if (!g || (rule && !rule_covers(rule, c)))
            continue;
        int k = 0;
        while (k < nu && strcmp(u[k].user, c->user) != 0)
            k++;
        if (k == nu && nu < 8) {
            snprintf(u[nu].user, sizeof u[nu].user, "%s", c->user);
            u[nu++].bytes = 0;
        }
        if (k < nu)
            u[k].bytes += g;
        else
            others += g;
    }
    size_t len = 0;
    out[0] = 0;
    for (int k = 0; k < nu && len < n; k++)
        len += (size_t)snprintf(out + len, n - len, "%s%s %s", k ? ", " : "", u[k].user,
                                format_size(u[k].bytes).text);
    if (others && len < n)
        snprintf(out + len, n - len, ", others %s", format_size(others).text);
    if (!nu && n)
        snprintf(out, n, "no one");
}

/* Why a request of w does not fit, in words. */
static void explain(const struct ledger *l, const struct ledger_client *c, int dev, uint64_t w,
                    const struct fit *f, char *why, size_t n)
{
    const struct ledger_device *d = &l->dev[dev];
    char who[256];
    if (f->by == BY_CAP) {
        const struct policy_rule *rule = &l->policy.rules[f->rule];
        holders(l, dev, rule, who, sizeof who);
        snprintf(why, n, "%s %s may hold %s of %s (policy line %d); it holds %s (%s); "
                 "requested %s",
                 rule->who == WHO_USER ? "user" : "group", rule->name,
                 format_size(amount_of(&rule->amount, d->total)).text, d->uuid, rule->line,
                 format_size(l->held[f->rule][dev]).text, who, format_size(w).text);
    } else if (f->by == BY_QUEUE) {
        snprintf(why, n, "%d earlier request%s for %s wait%s for this memory, and requests are "
                 "served in the order they came; requested %s",
                 d->nwaiting, d->nwaiting == 1 ? "" : "s", d->uuid, d->nwaiting == 1 ? "s" : "",
                 format_size(w).text);
    } else {
        holders(l, dev, NULL, who, sizeof who);
        snprintf(why, n, "%s has %s: %s granted (%s), %s reserved for others, %s used outside "
                 "any grant; requested %s",
                 d->uuid, format_size(d->total).text, format_size(d->granted).text, who,
                 format_size(reserved_against(l, c, dev, w)).text,
                 format_size(d->excess + d->unseen).text, format_size(w).text);
    }
}

enum verdict ledger_request(struct ledger *l, struct ledger_client *c, int dev, uint64_t bytes,
                            bool may_wait, uint64_t deadline_ms, uint64_t *granted, char *why,
                            size_t whylen)
{
    struct ledger_use *u = &c->use[dev];
    const struct ledger_device *d = &l->dev[dev];
    why[0] = 0;
    if (u->grant || u->waiting) {
        snprintf(why, whylen, "this process already %s %s on %s", u->waiting ? "waits for" : "holds",
                 format_size(u->waiting ? u->want : u->grant).text, d->uuid);
        return VERDICT_DENY;
    }
    uint64_t w = bytes;
    struct ledger_client *job = ledger_job_of(l, c, dev);
    if (job) { /* a process of a job: within what the job was granted */
        uint64_t left = job->use[dev].grant - job->use[dev].drawn;
        if (!bytes)
            w = left;
        if (w && w <= left) {
            set_grant(l, c, dev, w, job);
            *granted = w;
            return VERDICT_GRANT;
        }
        snprintf(why, whylen, "job %s was granted %s of %s; its other processes hold %s; "
                 "requested %s",
                 job->job, format_size(job->use[dev].grant).text, d->uuid,
                 format_size(job->use[dev].drawn).text, format_size(w).text);
        return VERDICT_DENY;
    }
    if (!w) {
        if (!l->policy.has_default) {
            snprintf(why, whylen, "no budget was asked for and the policy sets no default-budget; "
                                  "give one (vram run --limit SIZE)");
            return VERDICT_DENY;
        }
        w = amount_of(&l->policy.default_budget, d->total);
    }
    if (!w) {
        snprintf(why, whylen, "the default budget is 0 bytes of %s; give one (vram run --limit "
                 "SIZE)", d->uuid);
        return VERDICT_DENY;
    }
    struct fit f = fits(l, c, dev, w);
    if (f.by == FITS && queued_ahead(l, c, dev, w))
        f.by = BY_QUEUE;
    if (f.by == FITS) {
        set_grant(l, c, dev, w, NULL);
        *granted = w;
        return VERDICT_GRANT;
    }
    explain(l, c, dev, w, &f, why, whylen);
    if (!f.never && may_wait) {
        u->want = w;
        u->wait_seq = ++l->next_seq;
        u->deadline_ms = deadline_ms;
        enqueue(l, c, dev);
        block(l, dev, &f);
        return VERDICT_WAIT;
    }
    return VERDICT_DENY;
}

struct ledger_client *ledger_hold(struct ledger *l, enum client_role role, pid_t pid,
                                  uint64_t start, uid_t uid, gid_t gid, const char *job, int dev,
                                  uint64_t bytes, const char *from_job, uint64_t until_ms)
{
    struct ledger_client *c = NULL;
    for (int i = 0; i < l->nclients && !c; i++) {
        struct ledger_client *x = l->clients[i];
        if (x->held_until_ms && x->role == role && x->pid == pid && x->start == start &&
            x->uid == uid && strcmp(x->job, job) == 0)
            c = x;
    }
    if (!c) {
        c = ledger_join(l, role, pid, uid, gid);
        if (!c)
            return NULL;
        c->start = start;
        c->held_until_ms = until_ms;
        l->nheld++;
        snprintf(c->job, sizeof c->job, "%s", job);
        snprintf(c->cmd, sizeof c->cmd, "restarting");
        snprintf(c->user, sizeof c->user, "uid%u", (unsigned)uid);
    }
    struct ledger_client *j = NULL;
    for (int i = 0; from_job && i < l->njobs && !j; i++)
        if (l->jobs[i]->uid == uid && strcmp(l->jobs[i]->job, from_job) == 0 &&
            l->jobs[i]->use[dev].grant >= l->jobs[i]->use[dev].drawn + bytes)
            j = l->jobs[i];
    set_grant(l, c, dev, bytes, j);
    return c;
}

static void forget_if_empty(struct ledger *l, struct ledger_client *held)
{
    for (int d = 0; d < l->ndev; d++)
        if (held->use[d].grant)
            return;
    ledger_leave(l, held);
}

bool ledger_adopt(struct ledger *l, struct ledger_client *c, int dev, uint64_t bytes)
{
    if (!l->nheld || !c->start || c->use[dev].grant || c->use[dev].waiting)
        return false;
    struct ledger_client *h = NULL;
    for (int i = 0; i < l->nclients && !h; i++) {
        struct ledger_client *x = l->clients[i];
        if (x->held_until_ms && x->role == c->role && x->pid == c->pid && x->start == c->start &&
            x->uid == c->uid && x->use[dev].grant >= bytes && bytes &&
            (c->role != ROLE_JOB || strcmp(x->job, c->job) == 0))
            h = x;
    }
    if (!h)
        return false;
    if (c->role == ROLE_JOB && bytes < h->use[dev].drawn)
        return false; /* less than its processes hold: not the job it was */
    /* The held grant moves over whole: a job's processes now draw from the
     * job that came back (no process drew from c here: it held nothing). */
    struct ledger_client *job = h->use[dev].job;
    for (int i = 0; c->role == ROLE_JOB && i < l->nclients; i++)
        if (l->clients[i]->use[dev].job == h) {
            account(l, l->clients[i], dev, -1);
            l->clients[i]->use[dev].job = c;
        }
    set_grant(l, h, dev, 0, NULL);
    set_grant(l, c, dev, bytes, job);
    for (int i = 0; c->role == ROLE_JOB && i < l->nclients; i++)
        if (l->clients[i]->use[dev].job == c)
            account(l, l->clients[i], dev, +1);
    forget_if_empty(l, h);
    return true;
}

void ledger_expire_held(struct ledger *l, uint64_t now_ms, ledger_alive_fn alive,
                        void (*gone)(const struct ledger_client *c, void *arg), void *arg)
{
    for (int i = 0; l->nheld && i < l->nclients;) {
        struct ledger_client *c = l->clients[i];
        if (c->held_until_ms && (now_ms >= c->held_until_ms || (alive && !alive(c->pid, c->start)))) {
            if (gone)
                gone(c, arg);
            ledger_leave(l, c); /* the array closes up: the same i is the next */
        } else {
            i++;
        }
    }
}

void ledger_report(struct ledger *l, struct ledger_client *c, int dev, uint64_t used,
                   uint64_t peak)
{
    account(l, c, dev, -1);
    c->use[dev].used = used;
    account(l, c, dev, +1);
    if (peak > c->use[dev].peak)
        c->use[dev].peak = peak;
    if (used > c->use[dev].peak)
        c->use[dev].peak = used;
}

void ledger_admit_waiting(struct ledger *l, uint64_t now_ms, ledger_answer_fn answer, void *arg)
{
    char why[512];
    for (int dev = 0; dev < l->ndev; dev++) {
        struct ledger_device *d = &l->dev[dev];
        /* One pass, oldest first: granting only takes memory, so a request
         * that did not fit when looked at does not fit later in the pass;
         * what an older one waits for is held back from the younger. */
        d->queue_blocked = false;
        memset(d->cap_blocked, 0, sizeof d->cap_blocked);
        struct ledger_use *u = d->qhead;
        while (u) {
            struct ledger_use *next = u->qnext;
            struct ledger_client *c = u->client;
            struct fit f = fits(l, c, dev, u->want);
            if (f.by == FITS && queued_ahead(l, c, dev, u->want))
                f.by = BY_QUEUE;
            if (f.by == FITS) {
                uint64_t w = u->want;
                dequeue(l, c, dev);
                set_grant(l, c, dev, w, NULL);
                answer(c, dev, true, w, "", arg);
            } else if (now_ms >= u->deadline_ms || f.never) {
                explain(l, c, dev, u->want, &f, why, sizeof why);
                dequeue(l, c, dev);
                answer(c, dev, false, 0, why, arg);
            } else {
                block(l, dev, &f);
            }
            u = next;
        }
    }
}

/* ------------------------------------------------------------- NVML */

static int by_pid(const void *a, const void *b)
{
    const struct ledger_client *x = *(struct ledger_client *const *)a,
                               *y = *(struct ledger_client *const *)b;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

int ledger_reconcile(struct ledger *l, int dev, const struct ledger_nvml_process *procs, int n,
                     struct ledger_client **over, int max)
{
    int nover = 0, nproc = 0;
    uint64_t unseen = 0;
    /* The processes with a grant here, by pid: one sort, then a lookup each. */
    struct ledger_client **sorted = malloc((size_t)(l->nclients + 1) * sizeof *sorted);
    if (!sorted)
        return 0;
    for (int i = 0; i < l->nclients; i++) {
        struct ledger_client *c = l->clients[i];
        if (c->use[dev].nvml) {
            account(l, c, dev, -1);
            c->use[dev].nvml = 0;
            account(l, c, dev, +1);
        }
        if (c->role == ROLE_PROCESS && c->use[dev].grant && c->start)
            sorted[nproc++] = c;
    }
    qsort(sorted, (size_t)nproc, sizeof *sorted, by_pid);
    for (int k = 0; k < n; k++) {
        struct ledger_client key = {.pid = procs[k].pid}, *kp = &key, *c = NULL;
        struct ledger_client **hit = bsearch(&kp, sorted, (size_t)nproc, sizeof *sorted, by_pid);
        /* Several clients may share a pid (a process with two connections):
         * any with the same start time is that process. */
        for (; hit && hit > sorted && hit[-1]->pid == procs[k].pid; hit--)
            ;
        for (; hit && hit < sorted + nproc && (*hit)->pid == procs[k].pid && !c; hit++)
            if ((*hit)->start == procs[k].start)
                c = *hit;
        if (!c) {
            unseen += procs[k].used;
            continue;
        }
        struct ledger_use *u = &c->use[dev];
        account(l, c, dev, -1);
        u->nvml += procs[k].used;
        account(l, c, dev, +1);
        bool over_now = u->nvml > u->grant + l->policy.over_margin;
        if (over_now && !u->over && nover < max)
            over[nover++] = c;
        u->over = over_now;
    }
    for (int i = 0; i < nproc; i++)
        if (!sorted[i]->use[dev].nvml)
            sorted[i]->use[dev].over = false;
    free(sorted);
    struct ledger_device *d = &l->dev[dev];
    d->used = d->used - d->unseen + unseen;
    d->unseen = unseen;
    d->overcommitted = d->granted > d->total || d->excess + d->unseen > d->total - d->granted;
    return nover;
}

/* ----------------------------------------------------------- pictures */

/* The order of entries in a picture, as one number: the viewer's own
 * clients by id and device first, then other users' totals by uid and
 * device. */
#define TOTALS (1ull << 62)
static uint64_t own_key(int id, int dev) { return (uint64_t)id << 4 | (unsigned)dev; }
static uint64_t total_key(uid_t uid, int dev) { return TOTALS | (uint64_t)uid << 4 | (unsigned)dev; }

static bool sees(uid_t viewer, const struct ledger_client *c)
{
    return viewer == 0 || (viewer == c->uid && viewer != LEDGER_VIEW_ANYONE);
}

static bool shown(const struct ledger_client *c, int d)
{
    const struct ledger_use *u = &c->use[d];
    return c->role != ROLE_MONITOR && (u->grant || u->waiting || u->used);
}

static void fill_entry(struct snap_entry *e, const struct ledger_client *c, int d)
{
    const struct ledger_use *u = &c->use[d];
    e->dev = d;
    e->id = c->id;
    e->pid = c->pid;
    e->uid = c->uid;
    e->role = c->role == ROLE_JOB ? 'j' : 'p';
    snprintf(e->user, sizeof e->user, "%s", c->user);
    snprintf(e->cmd, sizeof e->cmd, "%s", c->cmd);
    snprintf(e->job, sizeof e->job, "%s", c->job);
    e->grant = u->grant;
    e->used = u->used;
    e->peak = u->peak;
    e->nvml = u->nvml;
    e->want = u->waiting ? u->want : 0;
    e->waiting = u->waiting;
    e->over = u->over;
}

struct total {
    uint64_t key;
    struct snap_entry e;
};

static int by_key(const void *a, const void *b)
{
    uint64_t x = ((const struct total *)a)->key, y = ((const struct total *)b)->key;
    return x < y ? -1 : x > y;
}

/* Other users' totals after `after`, by key: the first `max` of them in
 * out (sorted), their count returned (-1 if out of memory). */
static int totals_after(const struct ledger *l, uid_t viewer, uint64_t after, struct total **out)
{
    int n = 0, cap = 0;
    struct total *t = NULL;
    for (int i = 0; i < l->nclients; i++) {
        const struct ledger_client *c = l->clients[i];
        if (sees(viewer, c))
            continue;
        for (int d = 0; d < l->ndev; d++) {
            if (!shown(c, d) || total_key(c->uid, d) <= after)
                continue;
            int k = 0;
            while (k < n && t[k].key != total_key(c->uid, d))
                k++;
            if (k == n) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 16;
                    struct total *g = realloc(t, (size_t)cap * sizeof *g);
                    if (!g) {
                        free(t);
                        return -1;
                    }
                    t = g;
                }
                memset(&t[n], 0, sizeof t[n]);
                t[n].key = total_key(c->uid, d);
                struct snap_entry *e = &t[n++].e;
                e->dev = d;
                e->uid = c->uid;
                e->role = 'u';
                snprintf(e->user, sizeof e->user, "%s", c->user);
                snprintf(e->cmd, sizeof e->cmd, "-");
                snprintf(e->job, sizeof e->job, "-");
            }
            const struct ledger_use *u = &c->use[d];
            struct snap_entry *e = &t[k].e;
            e->grant += own_grant(c, d); /* each grant once, as the device counts it */
            e->used += u->used, e->peak += u->peak, e->nvml += u->nvml;
            e->want += u->waiting ? u->want : 0;
            e->waiting |= u->waiting;
            e->over |= u->over;
        }
    }
    if (n > 1)
        qsort(t, (size_t)n, sizeof *t, by_key);
    *out = t;
    return n;
}

void ledger_snapshot_page(const struct ledger *l, uid_t viewer, uint64_t after, int max,
                          struct snapshot *s, uint64_t *next)
{
    s->n = 0;
    s->ndev = l->ndev;
    *next = 0;
    for (int d = 0; d < l->ndev; d++) {
        struct snap_device *sd = &s->dev[d];
        memset(sd, 0, sizeof *sd);
        sd->index = d;
        snprintf(sd->uuid, sizeof sd->uuid, "%s", l->dev[d].uuid);
        sd->total = l->dev[d].total;
        sd->granted = l->dev[d].granted;
        sd->unseen = l->dev[d].unseen;
        sd->used = l->dev[d].used;
        /* Reserved: what the reservations set aside and nobody entitled holds yet. */
        sd->reserved = reserved_against(l, NULL, d, 0);
        sd->overcommitted = l->dev[d].overcommitted;
    }
    uint64_t last = 0;
    bool more = false;
    if (after < TOTALS) { /* the viewer's own clients, from the cursor's */
        int lo = 0, hi = l->nclients;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (own_key(l->clients[mid]->id, LEDGER_MAX_DEVICES - 1) <= after)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (int i = lo; i < l->nclients && !more; i++) {
            const struct ledger_client *c = l->clients[i];
            if (!sees(viewer, c))
                continue;
            for (int d = 0; d < l->ndev && !more; d++) {
                if (!shown(c, d) || own_key(c->id, d) <= after)
                    continue;
                struct snap_entry *e = s->n < max ? snapshot_add(s) : NULL;
                if (!e) {
                    more = true;
                    break;
                }
                fill_entry(e, c, d);
                last = own_key(c->id, d);
            }
        }
        after = TOTALS - 1;
    }
    if (!more) {
        struct total *t = NULL;
        int n = totals_after(l, viewer, after, &t);
        for (int k = 0; k < n && !more; k++) {
            struct snap_entry *e = s->n < max ? snapshot_add(s) : NULL;
            if (!e) {
                more = true;
                break;
            }
            *e = t[k].e;
            last = t[k].key;
        }
        free(t);
    }
    if (more)
        *next = last;
}

void ledger_snapshot(const struct ledger *l, uid_t viewer_uid, struct snapshot *s)
{
    uint64_t next;
    ledger_snapshot_page(l, viewer_uid, 0, INT32_MAX, s, &next);
}

/* ------------------------------------------------------------- checks */

int ledger_check(const struct ledger *l, char *err, size_t errlen)
{
    for (int i = 1; i < l->nclients; i++)
        if (l->clients[i - 1]->id >= l->clients[i]->id) {
            snprintf(err, errlen, "clients out of order at %d", i);
            return -1;
        }
    for (int d = 0; d < l->ndev; d++) {
        const struct ledger_device *dv = &l->dev[d];
        uint64_t granted = 0, ex = 0, used = dv->unseen;
        int waiting = 0;
        for (int i = 0; i < l->nclients; i++) {
            const struct ledger_client *c = l->clients[i];
            const struct ledger_use *u = &c->use[d];
            granted += own_grant(c, d);
            ex += excess(u);
            used += in_use(c, d);
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
            if (drawn != u->drawn || drawn > u->grant) {
                snprintf(err, errlen, "job %d: drawn %llu, counted %llu, granted %llu on %d", c->id,
                         (unsigned long long)drawn, (unsigned long long)u->drawn,
                         (unsigned long long)u->grant, d);
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
                if (rule_covers(&l->policy.rules[r], l->clients[i]))
                    held += own_grant(l->clients[i], d);
            if (held != l->held[r][d]) {
                snprintf(err, errlen, "rule %d on device %d: held %llu, kept %llu", r, d,
                         (unsigned long long)held, (unsigned long long)l->held[r][d]);
                return -1;
            }
        }
    }
    return 0;
}
