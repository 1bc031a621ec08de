/* ledger_admit.c: whether a request fits, who is admitted from the wait
 * queues, and the reasons given when it does not (the rules are in
 * ledger.h). */
#include "ledger_internal.h"

#include "../util/parse.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool bit(const uint64_t *set, int i) { return set[i / 64] >> (i % 64) & 1; }
static void set_bit(uint64_t *set, int i) { set[i / 64] |= 1ull << (i % 64); }

/* ----------------------------------------------------------- admission */

/* Unused reservations that count against `c` if it takes `w` more (c
 * NULL: against everyone). */
uint64_t ledger_reserved_against(const struct ledger *l, const struct ledger_client *c, int dev,
                                 uint64_t w)
{
    uint64_t against = 0;
    for (int r = 0; r < l->policy.nrules; r++) {
        const struct policy_rule *rule = &l->policy.rules[r];
        if (rule->kind != RULE_RESERVE || !policy_on_device(rule, dev, l->dev[dev].uuid))
            continue;
        uint64_t amount = amount_of(&rule->amount, l->dev[dev].total), held = l->held[r][dev];
        if (c && ledger_rule_covers(rule, c))
            held += w;
        if (amount > held)
            against += amount - held;
    }
    return against;
}

/* What reservation `rule` sets aside for c on dev (its user, a group of
 * its, its job): the amount, or 0 if the rule is no such reservation. */
static uint64_t reserved_by(const struct ledger *l, const struct policy_rule *rule,
                            const struct ledger_client *c, int dev)
{
    if (rule->kind != RULE_RESERVE || !policy_on_device(rule, dev, l->dev[dev].uuid) ||
        !ledger_rule_covers(rule, c))
        return 0;
    return amount_of(&rule->amount, l->dev[dev].total);
}

uint64_t ledger_guarantee(const struct ledger *l, const struct ledger_client *c, int dev)
{
    uint64_t most = 0;
    for (int r = 0; r < l->policy.nrules; r++) {
        uint64_t amount = reserved_by(l, &l->policy.rules[r], c, dev);
        if (amount > most)
            most = amount;
    }
    return most < c->use[dev].grant ? most : c->use[dev].grant;
}

/* What of c's own reservations on the device no one entitled holds yet:
 * memory only c's kind may take, whoever waits. */
static uint64_t reserved_for(const struct ledger *l, const struct ledger_client *c, int dev)
{
    uint64_t room = 0;
    for (int r = 0; r < l->policy.nrules; r++) {
        uint64_t amount = reserved_by(l, &l->policy.rules[r], c, dev);
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

/* A request of w fits, where in_use of c's usage outside grants (NVML's
 * last look) is memory the grant will cover, already counted in unseen. */
static struct fit fits(const struct ledger *l, const struct ledger_client *c, int dev, uint64_t w,
                       uint64_t in_use)
{
    const struct ledger_device *d = &l->dev[dev];
    for (int r = 0; r < l->policy.nrules; r++) {
        const struct policy_rule *rule = &l->policy.rules[r];
        if (rule->kind != RULE_CAP || !policy_on_device(rule, dev, d->uuid) ||
            !ledger_rule_covers(rule, c))
            continue;
        uint64_t cap = amount_of(&rule->amount, d->total);
        if (l->held[r][dev] + w > cap)
            return (struct fit){BY_CAP, w > cap, r};
    }
    uint64_t busy = d->granted + d->excess + d->unseen + ledger_reserved_against(l, c, dev, w);
    busy -= in_use < d->unseen ? in_use : d->unseen;
    uint64_t need = w > in_use ? w : in_use;
    if (busy <= d->total && need <= d->total - busy)
        return (struct fit){FITS, false, -1};
    /* Were everyone else to release, only others' reservations would stand
     * between the request and the device. */
    uint64_t never = 0;
    for (int r = 0; r < l->policy.nrules; r++) {
        const struct policy_rule *rule = &l->policy.rules[r];
        if (rule->kind == RULE_RESERVE && policy_on_device(rule, dev, d->uuid) &&
            !ledger_rule_covers(rule, c))
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
            ledger_rule_covers(&l->policy.rules[r], c))
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

/* Amounts by user, for reasons: "alice 4.00 GiB, bob 2.00 GiB" (eight
 * users by name, the rest as "others"; user names only, as anyone may see
 * them in vram status, never a process). */
struct by_user {
    struct {
        char user[64];
        uint64_t bytes;
    } u[8];
    int n;
    uint64_t others;
};

static void by_user_add(struct by_user *b, const char *user, uint64_t bytes)
{
    int k = 0;
    while (k < b->n && strcmp(b->u[k].user, user) != 0)
        k++;
    if (k == b->n && b->n < 8) {
        snprintf(b->u[b->n].user, sizeof b->u[b->n].user, "%s", user);
        b->u[b->n++].bytes = 0;
    }
    if (k < b->n)
        b->u[k].bytes += bytes;
    else
        b->others += bytes;
}

static void by_user_text(const struct by_user *b, char *out, size_t n)
{
    size_t len = 0;
    out[0] = 0;
    for (int k = 0; k < b->n && len < n; k++)
        len += (size_t)snprintf(out + len, n - len, "%s%s %s", k ? ", " : "", b->u[k].user,
                                format_size(b->u[k].bytes).text);
    if (b->others && len < n)
        snprintf(out + len, n - len, ", others %s", format_size(b->others).text);
}

/* Per-user holdings on a device (under a rule, or all). */
static void holders(const struct ledger *l, int dev, const struct policy_rule *rule, char *out,
                    size_t n)
{
    struct by_user b = {0};
    for (int i = 0; i < l->nclients; i++) {
        const struct ledger_client *c = l->clients[i];
        uint64_t g = ledger_own_grant(c, dev);
        if (g && (!rule || ledger_rule_covers(rule, c)))
            by_user_add(&b, c->user, g);
    }
    by_user_text(&b, out, n);
}

/* The users whose requests wait on a device ahead of c's, with what they
 * wait for; how many requests in *count. */
static void waiting_ahead(const struct ledger *l, const struct ledger_client *c, int dev,
                          char *out, size_t n, int *count)
{
    struct by_user b = {0};
    *count = 0;
    for (const struct ledger_use *q = l->dev[dev].qhead; q && q->client != c; q = q->qnext) {
        by_user_add(&b, q->client->user, q->want);
        (*count)++;
    }
    by_user_text(&b, out, n);
}

/* A rule as a refusal names it: "line 3: job critical-* of user alice". */
static size_t rule_text(const struct policy_rule *r, char *out, size_t n)
{
    static const char *const who[] = {"user", "group", "job"};
    int len = snprintf(out, n, "line %d: %s %s", r->line, who[r->who], r->name);
    if (len >= 0 && (size_t)len < n && r->owner.given)
        len += snprintf(out + len, n - (size_t)len, " of %s %s", who[r->owner.who], r->owner.name);
    return len < 0 ? 0 : (size_t)len < n ? (size_t)len : n - 1;
}

/* The reservations on dev that are not c's, by line: those with an unused
 * part (unused_only), or all of them, and what they set aside (their
 * unused part, or all of it) in *total. */
static void others_reservations(const struct ledger *l, const struct ledger_client *c, int dev,
                                bool unused_only, char *out, size_t n, uint64_t *total)
{
    size_t len = 0;
    *total = 0;
    out[0] = 0;
    for (int r = 0; r < l->policy.nrules; r++) {
        const struct policy_rule *rule = &l->policy.rules[r];
        if (rule->kind != RULE_RESERVE || !policy_on_device(rule, dev, l->dev[dev].uuid) ||
            ledger_rule_covers(rule, c))
            continue;
        uint64_t amount = amount_of(&rule->amount, l->dev[dev].total);
        uint64_t part = unused_only ? (amount > l->held[r][dev] ? amount - l->held[r][dev] : 0)
                                    : amount;
        if (!part)
            continue;
        *total += part;
        if (len + 1 < n)
            len += (size_t)snprintf(out + len, n - len, "%s", len ? ", " : "");
        if (len + 1 < n)
            len += rule_text(rule, out + len, n - len);
    }
}

/* A "for job" reservation (without "of") whose name c's job has, though c
 * is not a job root registered: the rule, or NULL. Said in a refusal, as
 * the reservation c may have thought was its. */
static const struct policy_rule *job_rule_not_for(const struct ledger *l,
                                                  const struct ledger_client *c, int dev)
{
    for (int r = 0; r < l->policy.nrules; r++) {
        const struct policy_rule *rule = &l->policy.rules[r];
        if (rule->kind == RULE_RESERVE && rule->who == WHO_JOB && !rule->owner.given &&
            policy_on_device(rule, dev, l->dev[dev].uuid) && !ledger_rule_covers(rule, c) &&
            strcmp(c->job, "-") != 0) {
            size_t k = strlen(rule->name);
            bool prefix = k && rule->name[k - 1] == '*';
            if (prefix ? strncmp(rule->name, c->job, k - 1) == 0 : strcmp(rule->name, c->job) == 0)
                return rule;
        }
    }
    return NULL;
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
        /* "it holds 0 B (no one)" would read as a fault of the ledger: a
         * request above the cap itself is refused before anything is held. */
        char held[320];
        if (who[0])
            snprintf(held, sizeof held, "it holds %s (%s)",
                     format_size(l->held[f->rule][dev]).text, who);
        else
            snprintf(held, sizeof held, "it holds nothing yet");
        snprintf(why, n, "%s %s may hold %s of %s (policy line %d); %s; requested %s%s",
                 rule->who == WHO_USER ? "user" : "group", rule->name,
                 format_size(amount_of(&rule->amount, d->total)).text, d->uuid, rule->line,
                 held, format_size(w).text,
                 f->never ? ", more than the cap: waiting cannot help" : "");
    } else if (f->by == BY_QUEUE) {
        int ahead;
        waiting_ahead(l, c, dev, who, sizeof who, &ahead);
        snprintf(why, n, "%d earlier request%s for %s wait%s for this memory (%s), and requests "
                 "are served in the order they came; requested %s",
                 ahead, ahead == 1 ? "" : "s", d->uuid, ahead == 1 ? "s" : "", who,
                 format_size(w).text);
    } else {
        holders(l, dev, NULL, who, sizeof who);
        uint64_t reserved = ledger_reserved_against(l, c, dev, w), outside = d->excess + d->unseen;
        uint64_t busy = d->granted + reserved + outside, unused;
        /* Which reservations, by their lines: what a person can look up. */
        char lines[200], named[220] = "";
        others_reservations(l, c, dev, true, lines, sizeof lines, &unused);
        if (reserved && lines[0])
            snprintf(named, sizeof named, " (policy %s)", lines);
        size_t len = (size_t)snprintf(why, n, "%s has %s: %s granted%s%s%s, %s reserved for "
                                      "others%s, %s used outside any grant, %s grantable; "
                                      "requested %s",
                                      d->uuid, format_size(d->total).text,
                                      format_size(d->granted).text, who[0] ? " (" : "", who,
                                      who[0] ? ")" : "", format_size(reserved).text, named,
                                      format_size(outside).text,
                                      format_size(busy < d->total ? d->total - busy : 0).text,
                                      format_size(w).text);
        if (f->never && len < n) {
            uint64_t all;
            others_reservations(l, c, dev, false, lines, sizeof lines, &all);
            if (w > d->total)
                len += (size_t)snprintf(why + len, n - len, ", more than the GPU has: waiting "
                                        "cannot help");
            else
                len += (size_t)snprintf(why + len, n - len, ": waiting cannot help, the "
                                        "reservations for others (policy %s) leave at most %s "
                                        "of the GPU to it", lines,
                                        format_size(all < d->total ? d->total - all : 0).text);
        }
        const struct policy_rule *mine = job_rule_not_for(l, c, dev);
        if (mine && len < n)
            snprintf(why + len, n - len, "; policy line %d, \"for job %s\", is for jobs root "
                     "registers (Slurm steps), not a user's own vram run --job or VRAM_JOB such "
                     "as %s: for those it would say \"for job %s of user %s\"", mine->line,
                     mine->name, c->job, mine->name, c->user);
    }
}

/* What NVML's last look saw c's process use on the device outside any
 * grant: its pid with its start time, so that a reused pid is not it. */
static uint64_t outside_grants(const struct ledger *l, const struct ledger_client *c, int dev)
{
    const struct ledger_device *d = &l->dev[dev];
    uint64_t in_use = 0;
    for (int k = 0; k < d->nunseen && c->start; k++)
        if (d->unseen_by[k].pid == c->pid && d->unseen_by[k].start == c->start)
            in_use += d->unseen_by[k].used;
    return in_use;
}

static enum verdict request(struct ledger *l, struct ledger_client *c, int dev, uint64_t bytes,
                            bool may_wait, uint64_t deadline_ms, uint64_t in_use,
                            uint64_t *granted, char *why, size_t whylen);

enum verdict ledger_request(struct ledger *l, struct ledger_client *c, int dev, uint64_t bytes,
                            bool may_wait, uint64_t deadline_ms, uint64_t *granted, char *why,
                            size_t whylen)
{
    enum verdict v = request(l, c, dev, bytes, may_wait, deadline_ms, 0, granted, why, whylen);
    if (v == VERDICT_DENY)
        l->dev[dev].counters.refused++;
    return v;
}

enum verdict ledger_register(struct ledger *l, struct ledger_client *c, int dev, uint64_t bytes,
                             uint64_t *granted, char *why, size_t whylen)
{
    return request(l, c, dev, bytes, false, 0, bytes ? outside_grants(l, c, dev) : 0, granted,
                   why, whylen);
}

static enum verdict request(struct ledger *l, struct ledger_client *c, int dev, uint64_t bytes,
                            bool may_wait, uint64_t deadline_ms, uint64_t in_use,
                            uint64_t *granted, char *why, size_t whylen)
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
            ledger_set_grant(l, c, dev, w, job);
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
    struct fit f = fits(l, c, dev, w, in_use);
    if (f.by == FITS && queued_ahead(l, c, dev, w > in_use ? w - in_use : 0))
        f.by = BY_QUEUE;
    if (f.by == FITS) {
        ledger_set_grant(l, c, dev, w, NULL);
        *granted = w;
        return VERDICT_GRANT;
    }
    explain(l, c, dev, w, &f, why, whylen);
    if (!f.never && may_wait) {
        u->want = w;
        u->wait_seq = ++l->next_seq;
        u->deadline_ms = deadline_ms;
        ledger_enqueue(l, c, dev);
        block(l, dev, &f);
        return VERDICT_WAIT;
    }
    return VERDICT_DENY;
}

void ledger_admit_waiting(struct ledger *l, uint64_t now_ms, ledger_answer_fn answer, void *arg)
{
    char why[512];
    if (now_ms > l->now_ms)
        l->now_ms = now_ms;
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
            struct fit f = fits(l, c, dev, u->want, 0);
            if (f.by == FITS && queued_ahead(l, c, dev, u->want))
                f.by = BY_QUEUE;
            if (f.by == FITS) {
                uint64_t w = u->want;
                ledger_dequeue(l, c, dev);
                ledger_set_grant(l, c, dev, w, NULL);
                answer(c, dev, true, w, "", arg);
            } else if (now_ms >= u->deadline_ms || f.never) {
                explain(l, c, dev, u->want, &f, why, sizeof why);
                ledger_dequeue(l, c, dev);
                d->counters.refused++;
                answer(c, dev, false, 0, why, arg);
            } else {
                block(l, dev, &f);
            }
            u = next;
        }
    }
}
