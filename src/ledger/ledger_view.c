/* ledger_view.c: what a reader of the ledger may see, in pages. */
#include "ledger_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    return c->role != ROLE_MONITOR &&
           (u->grant || u->waiting || u->used || (c->member_of && (u->peak || u->nvml)));
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
        /* A member's figures are inside its job's. */
        if (sees(viewer, c) || c->member_of)
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
            e->grant += ledger_own_grant(c, d); /* each grant once, as the device counts it */
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
        /* Reserved: what the reservations set aside and no one entitled holds yet. */
        sd->reserved = ledger_reserved_against(l, NULL, d, 0);
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
