/* answers: what vramd says to each message, and what happens when a client
 * goes. Everything the protocol lets a client do passes here; the loop
 * (vramd.c, conns.c) only moves bytes. Callable without the loop: the
 * daemon-level fuzzer and the handler tests drive it with a ledger.
 *
 * The connection is the grant: when it closes, for whatever reason, its
 * grants return at once (answers_gone), except a job's while processes of
 * it live, which vramd keeps for them (job_keep.h).
 */
#include "containers.h"
#include "daemon.h"
#include "driver_limits.h"
#include "job_keep.h"

#include "../protocol/snapshot.h"
#include "../util/container.h"
#include "../util/parse.h"
#include "../util/proc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ sending */

/* Never blocks: a client that does not read its answers is dropped. */
static int reply(struct conn *c, struct proto_writer *w)
{
    int len = proto_end(w);
    if (len < 0) {
        dlog(L_ERROR, "an answer to pid %d did not fit in a message", (int)c->pid);
        return -1;
    }
    return conn_send(c, w->buf, (size_t)len);
}

static int reply_text(struct conn *c, enum proto_verb v, const char *dev, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int reply_text(struct conn *c, enum proto_verb v, const char *dev, const char *fmt, ...)
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

/* A job's grant: the driver's limit set first, where it holds job grants
 * (and vram run put in the job's cgroup), off the loop, before the client
 * hears GRANT and starts anything. `restored`: a grant given back after a
 * restart, or a budget held while vramd was down, whose processes run. */
/* A grant the driver would not hold is no grant: back to the ledger. */
static void undo_grant(struct ledger_client *lc, int d)
{
    if (!lc || d < 0 || !lc->use[d].grant)
        return;
    driver_limits_release(lc, d);
    ledger_release(&D.L, lc, d);
    D.state_dirty = true;
}

static int reply_grant(struct conn *c, const char *dev, uint64_t bytes, bool restored)
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
        uint64_t ticket = ++A.tickets;
        if (driver_limits_grant(&D.L, c->client, d, restored, ticket) == DL_WAIT)
            return await_driver(c, ticket, AWAIT_GRANT, dev, bytes) ? 0 : -1;
    }
    return grant_ready(c, dev, bytes);
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

/* ---------------------------------------------------------- admission */

static void answer_waiter(struct ledger_client *lc, int dev, bool granted, uint64_t bytes,
                          const char *why, void *arg)
{
    (void)arg;
    struct conn *c = lc->owner;
    const char *uuid = D.L.dev[dev].uuid;
    if (granted)
        dlog(L_INFO, "pid %d (%s): granted %s on %s after waiting", (int)lc->pid, lc->user,
             format_size(bytes).text, uuid);
    int rc = granted ? reply_grant(c, uuid, bytes, false)
                     : reply_text(c, VERB_DENY, uuid, "waited as long as allowed: %s", why);
    D.state_dirty = true;
    if (rc != 0)
        c->strikes = MAX_STRIKES; /* dropped after this pass */
}

void answers_admit_waiting(void)
{
    ledger_admit_waiting(&D.L, now_ms(), answer_waiter, NULL);
    conns_drop_struck();
}

/* ----------------------------------------------------------- messages */

int answers_strike(struct conn *c, const char *fmt, ...)
{
    char text[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    dlog(L_INFO, "pid %d uid %u: refused a message: %s", (int)c->pid, (unsigned)c->uid, text);
    c->strikes++;
    if (reply_text(c, VERB_ERR, NULL, "%s", text) != 0 || c->strikes >= MAX_STRIKES)
        return -1;
    return 0;
}

/* An answer that ends the handling of a message: 1, or -1 when the
 * client is to be dropped. */
static int answered(int rc) { return rc < 0 ? -1 : 1; }

/* The device a message names, added if NVML does not know the node's GPUs.
 * 0 with *dev; otherwise the message was answered (ERR or DENY) and is done:
 * 1, or -1 when the client is to be dropped. */
static int device_of(struct conn *c, const struct proto_msg *m, int *dev)
{
    const char *uuid = proto_get(m, "dev"), *verb = proto_verb_name(m->verb);
    char err[256] = "";
    uint64_t total = 0;
    if (!uuid || !proto_name_ok(uuid) || strlen(uuid) >= 48)
        return answered(answers_strike(c, "%s: dev= must be a GPU UUID such as GPU-5a1d...", verb));
    if (proto_get_u64(m, "total", (uint64_t)1 << 56, &total, err, sizeof err) < 0)
        return answered(answers_strike(c, "%s: %s", verb, err));
    *dev = ledger_find_device(&D.L, uuid);
    if (*dev >= 0)
        return 0;
    if (D.ngpus > 0)
        return answered(reply_text(c, VERB_DENY, uuid, "%s is not a GPU of this node (NVML lists %d)",
                                   uuid, D.ngpus));
    /* Without NVML the daemon learns GPUs from its clients, but believes a
     * GPU's existence and size only from root or its own user: anyone else
     * could make every request fail (total=1) or fill the device table. */
    if (c->uid != 0 && c->uid != geteuid())
        return answered(reply_text(c, VERB_DENY, uuid, "%s is not known to this daemon (it has no "
                                   "NVML, and learns GPUs only from processes of root or uid %u)",
                                   uuid, (unsigned)geteuid()));
    if (!total)
        return answered(answers_strike(c, "%s: %s is new to this daemon and total= is missing",
                                       verb, uuid));
    *dev = ledger_device(&D.L, uuid, total);
    if (*dev < 0)
        return answered(reply_text(c, VERB_DENY, uuid, "the daemon keeps at most %d devices",
                                   LEDGER_MAX_DEVICES));
    files_fallback(); /* a GPU more to hold processes to while the daemon is down */
    return 0;
}

static int on_hello(struct conn *c, const struct proto_msg *m)
{
    if (c->client)
        return answers_strike(c, "HELLO twice");
    const char *role = proto_get(m, "role"), *cmd = proto_get(m, "cmd"), *job = proto_get(m, "job");
    enum client_role r;
    bool command = role && strcmp(role, "command") == 0;
    if (role && strcmp(role, "process") == 0)
        r = ROLE_PROCESS;
    else if (role && strcmp(role, "monitor") == 0)
        r = ROLE_MONITOR;
    else if (command) /* vram run: a job of the user's own, for its command */
        r = ROLE_JOB;
    else
        return answers_strike(c, "HELLO: role= must be process, command or monitor");
    if ((cmd && !proto_name_ok(cmd)) || (job && !proto_name_ok(job)))
        return answers_strike(c, "HELLO: cmd= and job= are names of [A-Za-z0-9._:@+/-], at most 63");
    struct ledger_client *lc = ledger_join(&D.L, r, c->pid, c->uid, c->gid);
    if (!lc)
        return answers_strike(c, "HELLO: the daemon is out of memory");
    lc->owner = c;
    lc->start = c->start;
    if (ledger_set_groups(&D.L, lc, c->groups, c->ngroups) != 0) {
        ledger_leave(&D.L, lc);
        return answers_strike(c, "HELLO: the daemon is out of memory");
    }
    user_name(c->uid, lc->user, sizeof lc->user);
    if (cmd)
        snprintf(lc->cmd, sizeof lc->cmd, "%s", cmd);
    if (job)
        snprintf(lc->job, sizeof lc->job, "%s", job);
    else if (command)
        snprintf(lc->job, sizeof lc->job, "run-%d", (int)c->pid);
    c->client = lc;
    struct proto_writer w;
    proto_begin(&w, VERB_OK);
    proto_add_u64(&w, "client", (uint64_t)lc->id);
    if (proc_in_initial_pid_namespace()) /* the host's view of the client */
        proto_add_u64(&w, "pid", (uint64_t)c->pid);
    dlog(L_DEBUG, "pid %d uid %u (%s) joined as client %d", (int)c->pid, (unsigned)c->uid, lc->cmd,
         lc->id);
    return reply(c, &w);
}

/* A request's answer once admission has spoken (`who` asked, as the log
 * names it): GRANT (reply_grant), WAIT with until= (how long the daemon
 * holds the request at most, so that the client's own wait for an answer
 * is bounded too), or DENY with why; `no_wait` adds that the request
 * asked to wait and the policy lets none. */
static int reply_verdict(struct conn *c, const char *who, enum verdict v, int dev,
                         uint64_t granted, uint64_t longest, bool restored, bool no_wait,
                         const char *why)
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

static int on_request(struct conn *c, const struct proto_msg *m)
{
    struct ledger_client *lc = c->client;
    /* A process's own grant, or a command's (a job of the user's own). */
    if (!lc || lc->role == ROLE_MONITOR || lc->by_root)
        return answers_strike(c, "REQUEST before HELLO role=process or role=command");
    uint64_t bytes = 0, wait = 0, restore = 0;
    int dev, r;
    char err[256] = "";
    /* Every field is checked before anything changes, the device included. */
    if (proto_get_u64(m, "bytes", (uint64_t)1 << 56, &bytes, err, sizeof err) != 0 ||
        proto_get_u64(m, "wait", UINT64_MAX, &wait, err, sizeof err) < 0 ||
        proto_get_u64(m, "restore", (uint64_t)1 << 56, &restore, err, sizeof err) < 0)
        return answers_strike(c, "REQUEST: %s", err[0] ? err : "bytes= is required");
    if ((r = device_of(c, m, &dev)) != 0)
        return r < 0 ? -1 : 0;
    const char *uuid = D.L.dev[dev].uuid;
    /* A re-registration after a restart takes back the grant held for this
     * process; so does a request it makes again because the daemon before
     * this one stopped after writing its grant and before saying it.
     * Anything else is a new request, admitted as any other. */
    if ((restore || bytes) && ledger_adopt(&D.L, lc, dev, restore ? restore : bytes)) {
        restore = restore ? restore : bytes;
        D.state_dirty = true;
        dlog(L_INFO, "pid %d (%s): re-registered %s on %s", (int)lc->pid, lc->user,
             format_size(restore).text, uuid);
        return reply_grant(c, uuid, restore, true);
    }
    const struct policy *p = &D.L.policy;
    char why[700];
    /* A user's job beyond the jobs the driver holds for one user: refused
     * rather than held by the interposer alone. */
    if (!restore && driver_limits_admit(&D.L, lc, why, sizeof why) != 0) {
        dlog(L_INFO, "pid %d (%s): refused on %s: %s", (int)lc->pid, lc->user, uuid, why);
        return reply_text(c, VERB_DENY, uuid, "%s", why);
    }
    bool may_wait = wait && p->wait && !restore;
    uint64_t longest = wait < p->wait_ms ? wait : p->wait_ms;
    uint64_t deadline = now_ms() + longest;
    uint64_t granted = 0;
    enum verdict v = restore ? ledger_register(&D.L, lc, dev, bytes, &granted, why, sizeof why)
                             : ledger_request(&D.L, lc, dev, bytes, may_wait, deadline, &granted,
                                              why, sizeof why);
    char who[200];
    snprintf(who, sizeof who, "pid %d (%s, %s)", (int)lc->pid, lc->user, lc->cmd);
    return reply_verdict(c, who, v, dev, granted, longest, restore != 0,
                         wait && !p->wait && !restore, why);
}

static int on_report(struct conn *c, const struct proto_msg *m)
{
    struct ledger_client *lc = c->client;
    if (!lc || lc->role == ROLE_MONITOR)
        return answers_strike(c, "REPORT before HELLO role=process or role=command, or JOB");
    const char *uuid = proto_get(m, "dev");
    int dev = uuid ? ledger_find_device(&D.L, uuid) : -1;
    uint64_t used = 0, peak = 0;
    char err[256] = "";
    if (dev < 0 || !lc->use[dev].grant)
        return answers_strike(c, "REPORT: dev= is not a device this client holds a grant on");
    /* Usage is of one device: never more than it has. */
    uint64_t most = D.L.dev[dev].total;
    if (proto_get_u64(m, "used", most, &used, err, sizeof err) != 0 ||
        proto_get_u64(m, "peak", most, &peak, err, sizeof err) < 0)
        return answers_strike(c, "REPORT: %s", err[0] ? err : "used= is required");
    ledger_report(&D.L, lc, dev, used, peak);
    uint64_t now = now_ms();
    history_note_client(&D.history, lc, dev, now);
    history_note_device(&D.history, &D.L, dev, now);
    /* A job that NVML saw over its grant hears it (job.c), for its end-of-run
     * line: a process of it that the interposer does not hold (one that
     * cleared LD_PRELOAD) is what only NVML sees. */
    struct ledger_use *u = &lc->use[dev];
    if (lc->role == ROLE_JOB && u->over_most > u->over_told) {
        u->over_told = u->over_most;
        struct proto_writer w;
        proto_begin(&w, VERB_OK);
        proto_add(&w, "dev", uuid);
        proto_add_u64(&w, "over", u->over_most);
        return reply(c, &w);
    }
    return 0;
}

static int on_release(struct conn *c, const struct proto_msg *m)
{
    struct ledger_client *lc = c->client;
    const char *uuid = proto_get(m, "dev");
    int dev = uuid ? ledger_find_device(&D.L, uuid) : -1;
    if (!lc || dev < 0)
        return answers_strike(c, "RELEASE: dev= is not a device this client holds");
    driver_limits_release(lc, dev);
    ledger_release(&D.L, lc, dev);
    D.state_dirty = true;
    answers_admit_waiting();
    struct proto_writer w;
    proto_begin(&w, VERB_OK);
    return reply(c, &w);
}

/* The Slurm plugin, as root, registers a job's grant on its user's behalf;
 * the connection then holds it for the job's life. */
static int on_job(struct conn *c, const struct proto_msg *m)
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
    } else if ((r = device_of(c, m, &dev)) != 0) {
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
static int on_member(struct conn *c, const struct proto_msg *m)
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
static int on_place(struct conn *c, const struct proto_msg *m)
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
    uint64_t ticket = ++A.tickets;
    int r = driver_limits_place(&D.L, job, c->pid, c->start, cgroup, ticket, why, sizeof why);
    if (r == DL_WAIT) { /* answered when the work is done */
        struct awaiting *w = await_driver(c, ticket, AWAIT_PLACE, NULL, 0);
        if (!w)
            return -1;
        snprintf(w->placed, sizeof w->placed, "job %s (%s): pid %d %s", job->job, job->user,
                 (int)c->pid, cgroup ? "is in the step's cgroup, which holds it"
                                     : "joined its cgroup");
        return 0;
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
static int on_container(struct conn *c, const struct proto_msg *m)
{
    int dev, r;
    if ((r = device_of(c, m, &dev)) != 0)
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

static void client_over(struct ledger_client *lc, const char *why);

/* vram oci-hook after a container stopped: its job ends now, whatever
 * its cgroup still holds. Root, or the job's own user. */
static int on_stopped(struct conn *c, const struct proto_msg *m)
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
    client_over(lc, "the container stopped");
    answers_admit_waiting();
    proto_begin(&w, VERB_OK);
    return reply(c, &w);
}

/* A process in a container, through the interposer (VRAM_COMMAND=vramd):
 * the command state of the job its cgroup is, which all the container's
 * processes share (containers.h). */
static int on_state(struct conn *c, const struct proto_msg *m)
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

/* The ledger as this client may see it, one page per STATUS: the node and
 * the devices on the first, then at most STATUS_PAGE entries, then END (next=CURSOR
 * when there is more). A page fits in a socket's ordinary send buffer, so
 * the daemon never raises one and a reader who does not read pins no more
 * of the kernel's memory than any connection may. */
static int on_status(struct conn *c, const struct proto_msg *m)
{
    uint64_t after = 0, next = 0;
    char err[256] = "";
    if (proto_get_u64(m, "after", UINT64_MAX, &after, err, sizeof err) < 0)
        return answers_strike(c, "STATUS: %s", err);
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot_page(&D.L, c->uid, after, STATUS_PAGE, &s, &next);
    struct proto_writer w;
    int rc = 0;
    if (!after && snapshot_encode_node(&D.node, &w) >= 0)
        rc = reply(c, &w);
    for (int d = 0; !after && d < s.ndev && rc == 0; d++)
        if (snapshot_encode_device(&s.dev[d], &w) >= 0)
            rc = reply(c, &w);
    for (int i = 0; i < s.n && rc == 0; i++)
        if (snapshot_encode_entry(&s.e[i], &w) >= 0)
            rc = reply(c, &w);
    snapshot_free(&s);
    if (rc == 0) {
        proto_begin(&w, VERB_END);
        if (next)
            proto_add_u64(&w, "next", next);
        rc = reply(c, &w);
    }
    return rc;
}

static int send_history(struct proto_writer *w, void *c) { return reply(c, w); }

/* The last hour (history.h) as this client may see it: its own clients'
 * series and the devices', one page per HISTORY of at most HISTORY_PAGE
 * messages (a page fits in a socket's ordinary send buffer, as STATUS's). */
static int on_history(struct conn *c, const struct proto_msg *m)
{
    uint64_t after = 0;
    char err[256] = "";
    const char *job = proto_get(m, "job"), *tier = proto_get(m, "tier");
    if (proto_get_u64(m, "after", UINT64_MAX, &after, err, sizeof err) < 0)
        return answers_strike(c, "HISTORY: %s", err);
    if (job && !proto_name_ok(job))
        return answers_strike(c, "HISTORY: job= must be a name of [A-Za-z0-9._:@+/-], at most 63");
    if (tier && strcmp(tier, "recent") != 0 && strcmp(tier, "all") != 0)
        return answers_strike(c, "HISTORY: tier=\"%.40s\": expected recent or all", tier);
    struct history_query q = {c->uid, job, tier && strcmp(tier, "recent") == 0, after};
    uint64_t next, now = now_ms();
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    int rc = history_page(&D.history, &q, now, HISTORY_PAGE, send_history, c, &next);
    if (rc == 0) {
        struct proto_writer w;
        proto_begin(&w, VERB_END);
        if (next)
            proto_add_u64(&w, "next", next);
        proto_add_u64(&w, "now", now);
        proto_add_u64(&w, "wall", (uint64_t)wall.tv_sec * 1000 + (uint64_t)wall.tv_nsec / 1000000);
        rc = reply(c, &w);
    }
    return rc;
}

int answers_handle(struct conn *c, const char *buf, size_t len)
{
    struct proto_msg m;
    char err[256];
    if (proto_parse(buf, len, &m, err, sizeof err) != 0)
        return answers_strike(c, "%s", err);
    switch (m.verb) {
    case VERB_HELLO: return on_hello(c, &m);
    case VERB_REQUEST: return on_request(c, &m);
    case VERB_REPORT: return on_report(c, &m);
    case VERB_RELEASE: return on_release(c, &m);
    case VERB_JOB: return on_job(c, &m);
    case VERB_STATUS: return on_status(c, &m);
    case VERB_MEMBER: return on_member(c, &m);
    case VERB_HISTORY: return on_history(c, &m);
    case VERB_PLACE: return on_place(c, &m);
    case VERB_CONTAINER: return on_container(c, &m);
    case VERB_STOPPED: return on_stopped(c, &m);
    case VERB_STATE: return on_state(c, &m);
    default: return answers_strike(c, "%s is not something a client sends", proto_verb_name(m.verb));
    }
}

/* A client leaves the ledger (a job: `why`, or NULL for its end as a
 * client's): what it held comes back. */
static void client_over(struct ledger_client *lc, const char *why)
{
    bool held = false;
    for (int d = 0; d < D.L.ndev; d++)
        held |= lc->use[d].grant != 0;
    if (why || (held && lc->kept))
        dlog(L_INFO, "job %s (%s): %s%s", lc->job, lc->user,
             why ? why : "its last process is gone", held ? ": its grants are back" : "");
    else if (held)
        dlog(L_INFO, "pid %d (%s, %s%s%s) gone: its grants are back", (int)lc->pid, lc->user,
             lc->cmd, lc->role == ROLE_JOB ? " " : "", lc->role == ROLE_JOB ? lc->job : "");
    history_client_left(&D.history, lc->id, now_ms());
    driver_limits_end(lc);
    containers_end(lc);
    ledger_leave(&D.L, lc);
    D.state_dirty = true;
}

void answers_job_over(struct ledger_client *lc)
{
    client_over(lc, NULL);
    answers_admit_waiting();
}

void answers_gone(struct conn *c)
{
    for (int i = 0; i < P.n; i++)
        if (P.p[i].c == c)
            P.p[i--] = P.p[--P.n];
    for (int i = 0; i < A.n; i++)
        if (A.a[i].c == c)
            A.a[i--] = A.a[--A.n];
    struct ledger_client *lc = c->client;
    if (!lc)
        return;
    c->client = NULL;
    bool held = false;
    for (int d = 0; d < D.L.ndev; d++)
        held |= lc->use[d].grant != 0;
    /* A job's processes that outlive its holder still charge its grant:
     * it is kept for them. */
    if (lc->role == ROLE_JOB && held && job_keep_lives(&D.L, lc)) {
        ledger_keep(&D.L, lc);
        dlog(L_INFO, "job %s (%s): its holder, pid %d, is gone; vramd keeps its grants for its "
             "%d process%s still running", lc->job, lc->user, (int)lc->pid, lc->nmembers,
             lc->nmembers == 1 ? "" : "es");
        D.state_dirty = true;
        return;
    }
    client_over(lc, NULL);
}
