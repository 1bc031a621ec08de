/* answers_send: how vramd's answers are said (answers.h). Never blocking:
 * a client that does not read its answers is dropped. A grant is said once
 * the driver's work for it is done (driver_limits.h: the answer waits for
 * its ticket, answers_driver_done) and the state file holds it (the grants
 * of a turn of the loop, answers_flush_grants). What waits for a client
 * that goes is forgotten with it (reply_forget).
 */
#include "answers.h"
#include "containers.h"
#include "driver_limits.h"

#include "../util/parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* Never blocks: a client that does not read its answers is dropped. */
int reply(struct conn *c, struct proto_writer *w)
{
    int len = proto_end(w);
    if (len < 0) {
        dlog(L_ERROR, "an answer to pid %d did not fit in a message", (int)c->pid);
        return -1;
    }
    return conn_send(c, w->buf, (size_t)len);
}

int reply_text(struct conn *c, enum proto_verb v, const char *dev, const char *fmt, ...)
{
    char text[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    struct proto_writer w;
    proto_begin(&w, v);
    if (dev)
        proto_add(&w, "dev", dev);
    proto_add_text(&w, "%s", text);
    return reply(c, &w);
}

/* A grant is said only once the state file holds it: a daemon killed after
 * the client heard GRANT must find the grant in the file when it starts
 * again, or the client's re-registration would be a new request, refused
 * while the client goes on holding the budget. The grants of one turn of the
 * loop wait here for one write of the file (answers_flush_grants). Without a
 * state file (a daemon driven without the loop), there is nothing to wait
 * for. */
struct pending_grant {
    struct conn *c;
    char dev[48];
    uint64_t bytes;
};
static struct {
    struct pending_grant *p;
    int n, cap;
} P;

static int send_grant(struct conn *c, const char *dev, uint64_t bytes)
{
    struct proto_writer w;
    proto_begin(&w, VERB_GRANT);
    proto_add(&w, "dev", dev);
    proto_add_u64(&w, "bytes", bytes);
    /* The job's holder learns that its processes are to join the job's
     * cgroup (the Slurm plugin's tasks: PLACE). */
    int d = ledger_find_device(&D.L, dev);
    if (c->client && d >= 0 && c->client->use[d].by_driver)
        proto_add(&w, "backend", "driver");
    return reply(c, &w);
}

/* A grant whose driver work is done (or that has none): its history
 * begins, and it is said once the state file holds it. */
static int grant_ready(struct conn *c, const char *dev, uint64_t bytes)
{
    /* Every grant is answered here: the client's history begins (or goes
     * on) with it, not a second later. */
    int d = ledger_find_device(&D.L, dev);
    if (c->client && d >= 0) {
        uint64_t now = now_ms();
        history_note_client(&D.history, c->client, d, now);
        history_note_device(&D.history, &D.L, d, now);
    }
    D.state_dirty = true;
    if (!D.state_path[0])
        return send_grant(c, dev, bytes);
    if (P.n == P.cap) {
        int cap = P.cap ? P.cap * 2 : 64;
        struct pending_grant *t = realloc(P.p, (size_t)cap * sizeof *t);
        if (!t) { /* no room to wait: written and said at once */
            struct ledger_client *who = c->client;
            files_grants_durable(&who, &d, 1);
            return send_grant(c, dev, bytes);
        }
        P.p = t;
        P.cap = cap;
    }
    struct pending_grant *g = &P.p[P.n++];
    g->c = c;
    snprintf(g->dev, sizeof g->dev, "%s", dev);
    g->bytes = bytes;
    return 0;
}

/* Messages whose answer waits for the driver's work (driver_limits.h):
 * a job's grant (GRANT, or DENY where the driver refuses its limit) and a
 * task's PLACE. */
enum awaiting_kind { AWAIT_GRANT, AWAIT_PLACE };
struct awaiting {
    uint64_t ticket;
    struct conn *c;
    enum awaiting_kind kind;
    char dev[48];
    uint64_t bytes;
    char placed[200]; /* a PLACE's: what vramd's log says once the driver holds it */
};
static struct {
    struct awaiting *a;
    int n, cap;
    uint64_t tickets;
} A;

static struct awaiting *await_driver(struct conn *c, uint64_t ticket, enum awaiting_kind kind,
                                     const char *dev, uint64_t bytes)
{
    if (A.n == A.cap) {
        int cap = A.cap ? A.cap * 2 : 16;
        struct awaiting *t = realloc(A.a, (size_t)cap * sizeof *t);
        if (!t)
            return NULL; /* the work goes on; the client is dropped */
        A.a = t;
        A.cap = cap;
    }
    struct awaiting *w = &A.a[A.n++];
    *w = (struct awaiting){.ticket = ticket, .c = c, .kind = kind, .bytes = bytes};
    snprintf(w->dev, sizeof w->dev, "%s", dev ? dev : "");
    return w;
}

uint64_t await_ticket(void) { return ++A.tickets; }

int await_place(struct conn *c, uint64_t ticket, const char *placed)
{
    struct awaiting *w = await_driver(c, ticket, AWAIT_PLACE, NULL, 0);
    if (!w)
        return -1;
    snprintf(w->placed, sizeof w->placed, "%s", placed);
    return 0;
}

/* A grant the driver would not hold is no grant: back to the ledger. */
static void undo_grant(struct ledger_client *lc, int d)
{
    if (!lc || d < 0 || !lc->use[d].grant)
        return;
    driver_limits_release(lc, d);
    ledger_release(&D.L, lc, d);
    D.state_dirty = true;
}

/* A job's grant: the driver's limit set first, where it holds job grants
 * (and vram run put in the job's cgroup), off the loop, before the client
 * hears GRANT and starts anything. `restored`: a grant given back after a
 * restart, or a budget held while vramd was down, whose processes run. */
int reply_grant(struct conn *c, const char *dev, uint64_t bytes, bool restored)
{
    int d = ledger_find_device(&D.L, dev);
    char why[400];
    /* A container's grant is in the command state its processes share
     * (containers.h) before anything of it starts. */
    if (c->client && d >= 0 && !restored &&
        containers_grant(c->client, dev, d, bytes, why, sizeof why) != 0) {
        dlog(L_WARN, "job %s (%s): %s; its grant on %s is refused", c->client->job,
             c->client->user, why, dev);
        undo_grant(c->client, d);
        return reply_text(c, VERB_DENY, dev, "%s", why);
    }
    if (c->client && d >= 0) {
        uint64_t ticket = await_ticket();
        if (driver_limits_grant(&D.L, c->client, d, restored, ticket) == DL_WAIT)
            return await_driver(c, ticket, AWAIT_GRANT, dev, bytes) ? 0 : -1;
    }
    return grant_ready(c, dev, bytes);
}

int reply_verdict(struct conn *c, const char *who, enum verdict v, int dev, uint64_t granted,
                  uint64_t longest, bool restored, bool no_wait, const char *why)
{
    const char *uuid = D.L.dev[dev].uuid;
    if (v == VERDICT_GRANT) {
        D.state_dirty = true;
        dlog(L_INFO, "%s: granted %s on %s", who, format_size(granted).text, uuid);
        return reply_grant(c, uuid, granted, restored);
    }
    if (v == VERDICT_WAIT) {
        dlog(L_INFO, "%s: waits for %s on %s", who,
             format_size(c->client->use[dev].want).text, uuid);
        struct proto_writer w;
        proto_begin(&w, VERB_WAIT);
        proto_add(&w, "dev", uuid);
        proto_add_u64(&w, "until", longest);
        proto_add_text(&w, "%s", why);
        return reply(c, &w);
    }
    dlog(L_INFO, "%s: refused on %s: %s", who, uuid, why);
    if (no_wait)
        return reply_text(c, VERB_DENY, uuid, "%s (the policy does not let requests wait)", why);
    return reply_text(c, VERB_DENY, uuid, "%s", why);
}

void answers_driver_done(uint64_t ticket, int job, int dev, enum driver_verdict v,
                         const char *why)
{
    int i = 0;
    while (i < A.n && A.a[i].ticket != ticket)
        i++;
    if (i == A.n) { /* its client went meanwhile */
        if (v == DRIVER_REFUSED) {
            undo_grant(ledger_find_client(&D.L, job), dev);
            answers_admit_waiting();
        }
        return;
    }
    struct awaiting w = A.a[i];
    A.a[i] = A.a[--A.n];
    struct conn *c = w.c;
    int rc;
    if (w.kind == AWAIT_GRANT && v == DRIVER_REFUSED) {
        undo_grant(c->client, ledger_find_device(&D.L, w.dev));
        dlog(L_INFO, "pid %d (%s): refused on %s: %s", (int)c->pid,
             c->client ? c->client->user : "?", w.dev, why);
        rc = reply_text(c, VERB_DENY, w.dev, "%s", why);
        answers_admit_waiting();
    } else if (w.kind == AWAIT_GRANT) {
        rc = grant_ready(c, w.dev, w.bytes);
    } else if (v == DRIVER_HELD || v == DRIVER_INTERPOSER) {
        if (v == DRIVER_HELD)
            dlog(L_INFO, "%s", w.placed);
        struct proto_writer pw;
        proto_begin(&pw, VERB_OK);
        proto_add(&pw, "backend", v == DRIVER_HELD ? "driver" : "interposer");
        rc = reply(c, &pw);
    } else {
        /* A limit the driver refuses: the task must not run unheld (DENY);
         * anything else leaves it to the interposer (ERR). */
        rc = reply_text(c, v == DRIVER_REFUSED ? VERB_DENY : VERB_ERR, NULL, "PLACE: %s", why);
    }
    if (rc != 0) {
        c->strikes = MAX_STRIKES;
        conns_drop_struck();
    }
}

void answers_flush_grants(void)
{
    if (!P.n)
        return;
    daemon_test_point("admitted");
    /* A write that fails (a full disk) is said and tried again on the timer;
     * the grants are said all the same rather than held back from clients
     * for as long as the disk is full. */
    int n = P.n;
    struct ledger_client **who = malloc((size_t)n * sizeof *who);
    int *dev = malloc((size_t)n * sizeof *dev);
    if (who && dev) {
        for (int i = 0; i < n; i++) {
            who[i] = P.p[i].c->client;
            dev[i] = ledger_find_device(&D.L, P.p[i].dev);
            if (dev[i] < 0)
                who[i] = NULL;
        }
        files_grants_durable(who, dev, n);
    } else {
        files_grants_durable(NULL, NULL, 0); /* the whole file */
    }
    free(who);
    free(dev);
    daemon_test_point("written");
    P.n = 0;
    bool struck = false;
    for (int i = 0; i < n; i++)
        if (send_grant(P.p[i].c, P.p[i].dev, P.p[i].bytes) != 0) {
            P.p[i].c->strikes = MAX_STRIKES;
            struck = true;
        }
    daemon_test_point("sent");
    if (struck)
        conns_drop_struck();
}

void reply_forget(struct conn *c)
{
    for (int i = 0; i < P.n; i++)
        if (P.p[i].c == c)
            P.p[i--] = P.p[--P.n];
    for (int i = 0; i < A.n; i++)
        if (A.a[i].c == c)
            A.a[i--] = A.a[--A.n];
}
