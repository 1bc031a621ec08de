/* ledger_held.c: the grants of the daemon before a restart, held for
 * their owners until they take them back or the time is up. */
#include "ledger_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ledger_client *ledger_hold(struct ledger *l, enum client_role role, bool by_root,
                                  pid_t pid, uint64_t start, uid_t uid, gid_t gid,
                                  const char *job, int dev, uint64_t bytes, const char *from_job,
                                  uint64_t until_ms)
{
    struct ledger_client *c = NULL;
    for (int i = 0; i < l->nclients && !c; i++) {
        struct ledger_client *x = l->clients[i];
        if (x->held_until_ms && x->role == role && x->by_root == by_root && x->pid == pid &&
            x->start == start && x->uid == uid && strcmp(x->job, job) == 0)
            c = x;
    }
    if (!c) {
        c = ledger_join(l, role, pid, uid, gid);
        if (!c)
            return NULL;
        c->by_root = by_root && role == ROLE_JOB;
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
    ledger_set_grant(l, c, dev, bytes, j);
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
        if (x->held_until_ms && x->role == c->role && x->by_root == c->by_root &&
            x->pid == c->pid && x->start == c->start && x->uid == c->uid &&
            x->use[dev].grant >= bytes && bytes &&
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
            ledger_account(l, l->clients[i], dev, -1);
            l->clients[i]->use[dev].job = c;
        }
    ledger_set_grant(l, h, dev, 0, NULL);
    ledger_set_grant(l, c, dev, bytes, job);
    for (int i = 0; c->role == ROLE_JOB && i < l->nclients; i++)
        if (l->clients[i]->use[dev].job == c)
            ledger_account(l, l->clients[i], dev, +1);
    forget_if_empty(l, h);
    return true;
}

void ledger_expire_held(struct ledger *l, uint64_t now_ms, ledger_alive_fn alive,
                        bool (*gone)(struct ledger_client *c, void *arg), void *arg)
{
    if (now_ms > l->now_ms)
        l->now_ms = now_ms;
    for (int i = 0; l->nheld && i < l->nclients;) {
        struct ledger_client *c = l->clients[i];
        if (c->held_until_ms && (now_ms >= c->held_until_ms || (alive && !alive(c->pid, c->start)))) {
            if (gone && gone(c, arg) && c->kept) {
                i++;
                continue;
            }
            ledger_leave(l, c); /* the array closes up: the same i is the next */
        } else {
            i++;
        }
    }
}

void ledger_keep(struct ledger *l, struct ledger_client *c)
{
    if (c->role != ROLE_JOB || c->kept)
        return;
    if (c->held_until_ms) {
        c->held_until_ms = 0;
        l->nheld--;
    }
    for (int d = 0; d < l->ndev; d++)
        if (c->use[d].waiting)
            ledger_dequeue(l, c, d);
    c->owner = NULL;
    c->kept = true;
    l->nkept++;
}

void ledger_unkeep(struct ledger *l, struct ledger_client *c, void *owner)
{
    if (!c->kept)
        return;
    c->kept = false;
    l->nkept--;
    c->owner = owner;
}
