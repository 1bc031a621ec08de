/* ledger_view.c: what a reader of the ledger may see, in pages. */
#include "ledger_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- pictures */

/* The order of entries in a picture, as one number: the clients the viewer
 * sees by id and device, the processes outside grants by pid and device,
 * then the users' totals by uid and device. */
#define OUTSIDE (1ull << 61)
#define TOTALS (1ull << 62)
static uint64_t own_key(int id, int dev) { return (uint64_t)id << 4 | (unsigned)dev; }
static uint64_t outside_key(pid_t pid, int dev) { return OUTSIDE | (uint64_t)pid << 4 | (unsigned)dev; }
static uint64_t total_key(uid_t uid, int dev) { return TOTALS | (uint64_t)uid << 4 | (unsigned)dev; }

static bool sees_uid(uid_t viewer, uid_t uid)
{
    return viewer == 0 || (viewer == uid && viewer != LEDGER_VIEW_ANYONE);
}

static bool shown(const struct ledger_client *c, int d)
{
    const struct ledger_use *u = &c->use[d];
    return c->role != ROLE_MONITOR &&
           (u->grant || u->waiting || u->used || (c->member_of && (u->peak || u->nvml)));
}

/* A waiting request's place in its device's queue (1: the next). */
static int place_in_queue(const struct ledger *l, const struct ledger_use *u, int d)
{
    int k = 1;
    for (const struct ledger_use *q = l->dev[d].qhead; q && q != u; q = q->qnext)
        k++;
    return k;
}

static void fill_entry(const struct ledger *l, struct snap_entry *e, const struct ledger_client *c,
                       int d)
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
    e->start = c->start;
    e->want = u->waiting ? u->want : 0;
    e->waiting = u->waiting;
    e->queue = u->waiting ? place_in_queue(l, u, d) : 0;
    e->over = u->over;
    /* A member, or a grant drawn from a job, is held as its job's grant is:
     * they are in the job's cgroup. */
    const struct ledger_client *holder = c->member_of ? c->member_of : u->job ? u->job : c;
    if (holder->use[d].grant)
        e->backend = holder->use[d].by_driver ? SNAP_BY_DRIVER : SNAP_BY_INTERPOSER;
}

/* A user's name as the ledger knows it: the daemon's, else one of their
 * clients'. */
static void name_of(const struct ledger *l, const struct ledger_user *w, char *out, size_t n)
{
    if (w->name[0]) {
        snprintf(out, n, "%s", w->name);
        return;
    }
    for (int i = 0; i < l->nclients; i++)
        if (l->clients[i]->who == w && l->clients[i]->user[0]) {
            snprintf(out, n, "%s", l->clients[i]->user);
            return;
        }
    snprintf(out, n, "uid%u", (unsigned)w->uid);
}

/* A user's totals on every device, into t[dev]; which devices have any. */
static void user_totals(const struct ledger *l, const struct ledger_user *w,
                        struct snap_entry t[LEDGER_MAX_DEVICES], bool any[LEDGER_MAX_DEVICES])
{
    for (int d = 0; d < l->ndev; d++) {
        struct snap_entry *e = &t[d];
        memset(e, 0, sizeof *e);
        e->dev = d;
        e->uid = w->uid;
        e->role = 'u';
        snprintf(e->cmd, sizeof e->cmd, "-");
        snprintf(e->job, sizeof e->job, "-");
        e->used = w->in_use[d];
        e->peak = w->peak[d];
        const struct ledger_device *dv = &l->dev[d];
        for (int k = 0; k < dv->nunseen; k++)
            if (dv->unseen_by[k].uid == w->uid) {
                e->unseen += dv->unseen_by[k].used;
                e->procs++;
            }
        e->nvml = e->unseen;
    }
    for (int i = 0; i < l->nclients; i++) {
        const struct ledger_client *c = l->clients[i];
        if (c->who != w)
            continue;
        for (int d = 0; d < l->ndev; d++) {
            if (!shown(c, d))
                continue;
            const struct ledger_use *u = &c->use[d];
            struct snap_entry *e = &t[d];
            e->grant += ledger_own_grant(c, d); /* each grant once, as the device counts it */
            e->nvml += c->member_of ? 0 : u->nvml; /* a member's is inside its job's */
            e->want += u->waiting ? u->want : 0;
            e->waiting |= u->waiting;
            e->over |= u->over;
            e->procs += c->role == ROLE_PROCESS;
        }
    }
    char name[64];
    name_of(l, w, name, sizeof name);
    for (int d = 0; d < l->ndev; d++) {
        struct snap_entry *e = &t[d];
        snprintf(e->user, sizeof e->user, "%s", name);
        any[d] = e->grant || e->used || e->peak || e->waiting || e->procs;
    }
}

/* The processes outside grants the viewer may see, after `after`, by key:
 * their count (-1 if out of memory), in a malloc()ed array. */
struct outside {
    uint64_t key;
    int dev;
    const struct ledger_nvml_process *p;
};

static int by_key(const void *a, const void *b)
{
    uint64_t x = ((const struct outside *)a)->key, y = ((const struct outside *)b)->key;
    return x < y ? -1 : x > y;
}

static int outside_after(const struct ledger *l, uid_t viewer, uint64_t after, struct outside **out)
{
    int n = 0;
    for (int d = 0; d < l->ndev; d++)
        n += l->dev[d].nunseen;
    struct outside *o = malloc((size_t)(n + 1) * sizeof *o);
    if (!o)
        return -1;
    int k = 0;
    for (int d = 0; d < l->ndev; d++)
        for (int i = 0; i < l->dev[d].nunseen; i++) {
            const struct ledger_nvml_process *p = &l->dev[d].unseen_by[i];
            uint64_t key = outside_key(p->pid, d);
            if (key > after && (viewer == 0 || (p->uid != (uid_t)-1 && sees_uid(viewer, p->uid))))
                o[k++] = (struct outside){key, d, p};
        }
    if (k > 1)
        qsort(o, (size_t)k, sizeof *o, by_key);
    *out = o;
    return k;
}

static void fill_outside(const struct ledger *l, struct snap_entry *e, const struct outside *o)
{
    const struct ledger_nvml_process *p = o->p;
    e->dev = o->dev;
    e->pid = p->pid;
    e->uid = p->uid == (uid_t)-1 ? UINT32_MAX : (uint32_t)p->uid;
    e->role = 'n';
    int i = 0;
    while (i < l->nusers && l->users[i]->uid != p->uid)
        i++;
    if (p->uid != (uid_t)-1 && i < l->nusers)
        name_of(l, l->users[i], e->user, sizeof e->user);
    else
        snprintf(e->user, sizeof e->user, "-");
    snprintf(e->cmd, sizeof e->cmd, "%s", p->cmd[0] ? p->cmd : "-");
    snprintf(e->job, sizeof e->job, "-");
    e->used = e->nvml = e->peak = p->used;
    e->start = p->start;
}

void ledger_snapshot_page(const struct ledger *l, uid_t viewer, uint64_t after, int max,
                          struct snapshot *s, uint64_t *next)
{
    s->n = 0;
    s->ndev = l->ndev;
    *next = 0;
    for (int d = 0; d < l->ndev; d++) {
        struct snap_device *sd = &s->dev[d];
        const struct ledger_device *ld = &l->dev[d];
        memset(sd, 0, sizeof *sd);
        sd->index = d;
        snprintf(sd->uuid, sizeof sd->uuid, "%s", ld->uuid);
        snprintf(sd->name, sizeof sd->name, "%s", ld->name);
        snprintf(sd->pci_bus_id, sizeof sd->pci_bus_id, "%s", ld->pci_bus_id);
        sd->minor = ld->minor;
        sd->total = ld->total;
        sd->granted = ld->granted;
        sd->unseen = ld->unseen;
        sd->used = ld->used;
        /* Reserved: what the reservations set aside and no one entitled holds yet. */
        sd->reserved = ledger_reserved_against(l, NULL, d, 0);
        /* What a request no reservation is for could be granted now, as
         * admission counts it (ledger_admit.c): usage beyond grants too. */
        uint64_t busy = ld->granted + sd->reserved + ld->excess + ld->unseen;
        sd->grantable = busy < ld->total ? ld->total - busy : 0;
        sd->overcommitted = ld->overcommitted;
        sd->waiting = ld->nwaiting;
        sd->refused = ld->counters.refused;
        sd->reclaimed = ld->counters.reclaimed;
        sd->reclaimed_bytes = ld->counters.reclaimed_bytes;
        sd->waits = ld->counters.waits;
        sd->waited_ms = ld->counters.waited_ms;
    }
    uint64_t last = 0;
    bool more = false;
    if (after < OUTSIDE && viewer != LEDGER_VIEW_ANYONE) { /* clients, from the cursor's */
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
            if (!sees_uid(viewer, c->uid))
                continue;
            for (int d = 0; d < l->ndev && !more; d++) {
                if (!shown(c, d) || own_key(c->id, d) <= after)
                    continue;
                struct snap_entry *e = s->n < max ? snapshot_add(s) : NULL;
                if (!e) {
                    more = true;
                    break;
                }
                fill_entry(l, e, c, d);
                last = own_key(c->id, d);
            }
        }
    }
    if (after < OUTSIDE)
        after = OUTSIDE - 1;
    if (!more && after < TOTALS && viewer != LEDGER_VIEW_ANYONE) {
        struct outside *o = NULL;
        int n = outside_after(l, viewer, after, &o);
        for (int k = 0; k < n && !more; k++) {
            struct snap_entry *e = s->n < max ? snapshot_add(s) : NULL;
            if (!e) {
                more = true;
                break;
            }
            fill_outside(l, e, &o[k]);
            last = o[k].key;
        }
        free(o);
    }
    if (after < TOTALS)
        after = TOTALS - 1;
    for (int i = 0; !more && i < l->nusers; i++) {
        const struct ledger_user *w = l->users[i];
        if (total_key(w->uid, LEDGER_MAX_DEVICES - 1) <= after)
            continue;
        struct snap_entry t[LEDGER_MAX_DEVICES];
        bool any[LEDGER_MAX_DEVICES];
        user_totals(l, w, t, any);
        for (int d = 0; d < l->ndev && !more; d++) {
            if (!any[d] || total_key(w->uid, d) <= after)
                continue;
            struct snap_entry *e = s->n < max ? snapshot_add(s) : NULL;
            if (!e) {
                more = true;
                break;
            }
            *e = t[d];
            last = total_key(w->uid, d);
        }
    }
    if (more)
        *next = last;
}

void ledger_snapshot(const struct ledger *l, uid_t viewer_uid, struct snapshot *s)
{
    uint64_t next;
    ledger_snapshot_page(l, viewer_uid, 0, INT32_MAX, s, &next);
}
