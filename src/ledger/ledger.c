#include "ledger.h"

#include "../util/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    memset(l, 0, sizeof *l);
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
    c->id = l->next_id++;
    c->role = role;
    c->pid = pid;
    c->uid = uid;
    c->gid = gid;
    snprintf(c->cmd, sizeof c->cmd, "-");
    snprintf(c->job, sizeof c->job, "-");
    l->clients[l->nclients++] = c;
    return c;
}

int ledger_set_groups(struct ledger_client *c, const gid_t *groups, int n)
{
    gid_t *g = n > 0 ? malloc((size_t)n * sizeof *g) : NULL;
    if (n > 0 && !g)
        return -1;
    if (n > 0)
        memcpy(g, groups, (size_t)n * sizeof *g);
    free(c->groups);
    c->groups = g;
    c->ngroups = n > 0 ? n : 0;
    return 0;
}

void ledger_leave(struct ledger *l, struct ledger_client *c)
{
    for (int i = 0; i < l->nclients; i++)
        if (l->clients[i] == c) {
            l->clients[i] = l->clients[--l->nclients];
            free(c->groups);
            free(c);
            return;
        }
}

/* ------------------------------------------------------------ domains */

struct ledger_client *ledger_job_of(const struct ledger *l, const struct ledger_client *c,
                                    int dev)
{
    if (c->role != ROLE_PROCESS || strcmp(c->job, "-") == 0)
        return NULL;
    for (int i = 0; i < l->nclients; i++) {
        struct ledger_client *j = l->clients[i];
        if (j->role == ROLE_JOB && j->uid == c->uid && strcmp(j->job, c->job) == 0 &&
            j->use[dev].grant)
            return j;
    }
    return NULL;
}

/* What a client adds to the device: a job's grant counts once, for the
 * job; its processes draw from it. */
static uint64_t top_level_grant(const struct ledger *l, const struct ledger_client *c, int dev)
{
    if (c->role == ROLE_MONITOR || ledger_job_of(l, c, dev))
        return 0;
    return c->use[dev].grant;
}

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
    case WHO_JOB: return strcmp(c->job, "-") != 0 && job_matches(r->name, c->job);
    }
    return false;
}

/* Usage NVML sees beyond a grant: the context, libraries. */
static uint64_t excess(const struct ledger_use *u)
{
    return u->nvml > u->grant ? u->nvml - u->grant : 0;
}

struct device_sums {
    uint64_t granted, excess;
};

static struct device_sums sums(const struct ledger *l, int dev)
{
    struct device_sums s = {0, 0};
    for (int i = 0; i < l->nclients; i++) {
        s.granted += top_level_grant(l, l->clients[i], dev);
        s.excess += excess(&l->clients[i]->use[dev]);
    }
    return s;
}

/* Unused reservations that count against `c` if it takes `w` more. */
static uint64_t reserved_against(const struct ledger *l, const struct ledger_client *c, int dev,
                                 uint64_t w)
{
    uint64_t against = 0;
    for (int r = 0; r < l->policy.nrules; r++) {
        const struct policy_rule *rule = &l->policy.rules[r];
        if (rule->kind != RULE_RESERVE || !policy_on_device(rule, dev, l->dev[dev].uuid))
            continue;
        uint64_t amount = amount_of(&rule->amount, l->dev[dev].total), held = 0;
        for (int i = 0; i < l->nclients; i++)
            if (rule_covers(rule, l->clients[i]))
                held += top_level_grant(l, l->clients[i], dev);
        if (c && rule_covers(rule, c))
            held += w;
        if (amount > held)
            against += amount - held;
    }
    return against;
}

/* Per-user holdings on a device, for reasons: "alice 4.00 GiB, bob 2.00 GiB". */
static void holders(const struct ledger *l, int dev, bool (*which)(const struct ledger_client *,
                                                                    const void *),
                    const void *arg, char *out, size_t n)
{
    struct {
        char user[64];
        uint64_t bytes;
    } u[8];
    int nu = 0;
    uint64_t others = 0;
    for (int i = 0; i < l->nclients; i++) {
        const struct ledger_client *c = l->clients[i];
        uint64_t g = top_level_grant(l, c, dev);
        if (!g || (which && !which(c, arg)))
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
        snprintf(out, n, "nobody");
}

static bool covered_by(const struct ledger_client *c, const void *rule)
{
    return rule_covers(rule, c);
}

/* 0 if w fits now; 1 if it could fit once others release; -1 never. */
static int fits(const struct ledger *l, const struct ledger_client *c, int dev, uint64_t w,
                char *why, size_t n)
{
    const struct ledger_device *d = &l->dev[dev];
    char who[256];
    for (int r = 0; r < l->policy.nrules; r++) {
        const struct policy_rule *rule = &l->policy.rules[r];
        if (rule->kind != RULE_CAP || !policy_on_device(rule, dev, d->uuid) ||
            !rule_covers(rule, c))
            continue;
        uint64_t cap = amount_of(&rule->amount, d->total), held = 0;
        for (int i = 0; i < l->nclients; i++)
            if (rule_covers(rule, l->clients[i]))
                held += top_level_grant(l, l->clients[i], dev);
        if (held + w <= cap)
            continue;
        holders(l, dev, covered_by, rule, who, sizeof who);
        snprintf(why, n, "%s %s may hold %s of %s (policy line %d); it holds %s (%s); "
                 "requested %s",
                 rule->who == WHO_USER ? "user" : "group", rule->name,
                 format_size(cap).text, d->uuid, rule->line, format_size(held).text, who,
                 format_size(w).text);
        return w > cap ? -1 : 1;
    }
    uint64_t reserved = reserved_against(l, c, dev, w);
    struct device_sums s = sums(l, dev);
    uint64_t busy = s.granted + s.excess + d->unseen + reserved;
    if (busy <= d->total && w <= d->total - busy)
        return 0;
    holders(l, dev, NULL, NULL, who, sizeof who);
    /* Were everyone else to release, only others' reservations would stand
     * between the request and the device. */
    uint64_t never = 0;
    for (int r = 0; r < l->policy.nrules; r++) {
        const struct policy_rule *rule = &l->policy.rules[r];
        if (rule->kind == RULE_RESERVE && policy_on_device(rule, dev, d->uuid) &&
            !rule_covers(rule, c))
            never += amount_of(&rule->amount, d->total);
    }
    snprintf(why, n, "%s has %s: %s granted (%s), %s reserved for others, %s used outside "
             "any grant; requested %s",
             d->uuid, format_size(d->total).text, format_size(s.granted).text, who,
             format_size(reserved).text, format_size(s.excess + d->unseen).text,
             format_size(w).text);
    return w + never > d->total ? -1 : 1;
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
    if (!w) {
        if (!l->policy.has_default) {
            snprintf(why, whylen, "no budget was asked for and the policy sets no default-budget; "
                                  "give one (vram run --limit SIZE)");
            return VERDICT_DENY;
        }
        w = amount_of(&l->policy.default_budget, d->total);
    }
    struct ledger_client *job = ledger_job_of(l, c, dev);
    if (job) { /* a process of a job: within what the job was granted */
        uint64_t held = 0;
        for (int i = 0; i < l->nclients; i++)
            if (l->clients[i] != c && ledger_job_of(l, l->clients[i], dev) == job)
                held += l->clients[i]->use[dev].grant;
        uint64_t left = job->use[dev].grant > held ? job->use[dev].grant - held : 0;
        if (!bytes)
            w = left;
        if (w && w <= left) {
            u->grant = *granted = w;
            return VERDICT_GRANT;
        }
        snprintf(why, whylen, "job %s was granted %s of %s; its other processes hold %s; "
                 "requested %s",
                 job->job, format_size(job->use[dev].grant).text, d->uuid,
                 format_size(held).text, format_size(w).text);
        return VERDICT_DENY;
    }
    int f = fits(l, c, dev, w, why, whylen);
    if (f == 0) {
        u->grant = *granted = w;
        return VERDICT_GRANT;
    }
    if (f > 0 && may_wait) {
        u->waiting = true;
        u->want = w;
        u->wait_seq = ++l->next_seq;
        u->deadline_ms = deadline_ms;
        return VERDICT_WAIT;
    }
    return VERDICT_DENY;
}

void ledger_restore(struct ledger *l, struct ledger_client *c, int dev, uint64_t bytes)
{
    (void)l;
    c->use[dev].grant = bytes;
    c->use[dev].waiting = false;
}

void ledger_release(struct ledger *l, struct ledger_client *c, int dev)
{
    (void)l;
    struct ledger_use *u = &c->use[dev];
    u->grant = u->used = u->want = 0;
    u->waiting = false;
}

void ledger_report(struct ledger *l, struct ledger_client *c, int dev, uint64_t used,
                   uint64_t peak)
{
    (void)l;
    c->use[dev].used = used;
    if (peak > c->use[dev].peak)
        c->use[dev].peak = peak;
    if (used > c->use[dev].peak)
        c->use[dev].peak = used;
}

void ledger_admit_waiting(struct ledger *l, uint64_t now_ms, ledger_answer_fn answer, void *arg)
{
    char why[512];
    for (;;) { /* oldest first, until a pass admits nothing */
        struct ledger_client *best = NULL;
        int best_dev = -1;
        uint64_t best_seq = UINT64_MAX;
        for (int i = 0; i < l->nclients; i++)
            for (int d = 0; d < l->ndev; d++) {
                struct ledger_use *u = &l->clients[i]->use[d];
                if (!u->waiting)
                    continue;
                if (now_ms >= u->deadline_ms) {
                    int f = fits(l, l->clients[i], d, u->want, why, sizeof why);
                    if (f != 0) {
                        u->waiting = false;
                        answer(l->clients[i], d, false, 0, why, arg);
                        continue;
                    }
                }
                if (u->wait_seq < best_seq &&
                    fits(l, l->clients[i], d, u->want, why, sizeof why) == 0) {
                    best = l->clients[i];
                    best_dev = d;
                    best_seq = u->wait_seq;
                }
            }
        if (!best)
            return;
        struct ledger_use *u = &best->use[best_dev];
        u->waiting = false;
        u->grant = u->want;
        answer(best, best_dev, true, u->grant, "", arg);
    }
}

int ledger_reconcile(struct ledger *l, int dev, const unsigned *pids, const uint64_t *used,
                     int n, ledger_same_process_fn same, struct ledger_client **over, int max)
{
    int nover = 0;
    uint64_t unseen = 0;
    for (int i = 0; i < l->nclients; i++)
        l->clients[i]->use[dev].nvml = 0;
    for (int k = 0; k < n; k++) {
        struct ledger_client *c = NULL;
        for (int i = 0; i < l->nclients && !c; i++) {
            struct ledger_client *x = l->clients[i];
            if (x->role == ROLE_PROCESS && (unsigned)x->pid == pids[k] &&
                (!same || same(x->pid, x->start)))
                c = x;
        }
        if (!c || !c->use[dev].grant) {
            unseen += used[k];
            continue;
        }
        struct ledger_use *u = &c->use[dev];
        u->nvml = used[k];
        bool over_now = u->nvml > u->grant + l->policy.over_margin;
        if (over_now && !u->over && nover < max)
            over[nover++] = c;
        u->over = over_now;
    }
    l->dev[dev].unseen = unseen;
    return nover;
}

void ledger_snapshot(const struct ledger *l, uid_t viewer_uid, struct snapshot *s)
{
    s->n = 0;
    s->ndev = l->ndev;
    for (int d = 0; d < l->ndev; d++) {
        struct snap_device *sd = &s->dev[d];
        struct device_sums sum = sums(l, d);
        memset(sd, 0, sizeof *sd);
        sd->index = d;
        snprintf(sd->uuid, sizeof sd->uuid, "%s", l->dev[d].uuid);
        sd->total = l->dev[d].total;
        sd->granted = sum.granted;
        sd->unseen = l->dev[d].unseen;
        /* Reserved: what the reservations set aside and nobody entitled holds yet. */
        sd->reserved = reserved_against(l, NULL, d, 0);
        uint64_t used = l->dev[d].unseen;
        for (int i = 0; i < l->nclients; i++) {
            const struct ledger_client *c = l->clients[i];
            const struct ledger_use *u = &c->use[d];
            if (c->role == ROLE_MONITOR || (!u->grant && !u->waiting && !u->used))
                continue;
            if (c->role == ROLE_PROCESS)
                used += u->used > u->nvml ? u->used : u->nvml;
            struct snap_entry *e = snapshot_add(s);
            if (!e)
                break;
            bool mine = viewer_uid == 0 || viewer_uid == c->uid;
            e->dev = d;
            e->id = c->id;
            e->pid = mine ? c->pid : 0;
            e->uid = c->uid;
            e->role = c->role == ROLE_JOB ? 'j' : 'p';
            snprintf(e->user, sizeof e->user, "%s", c->user);
            snprintf(e->cmd, sizeof e->cmd, "%s", mine ? c->cmd : "-");
            snprintf(e->job, sizeof e->job, "%s", mine ? c->job : "-");
            e->grant = u->grant;
            e->used = u->used;
            e->peak = u->peak;
            e->nvml = u->nvml;
            e->want = u->waiting ? u->want : 0;
            e->waiting = u->waiting;
            e->over = u->over;
        }
        sd->used = used;
    }
}
