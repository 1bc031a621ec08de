/* answers: what vramd says to each message, and what happens when a client
 * goes. Everything the protocol lets a client do passes here (answers_handle);
 * the loop (vramd.c, conns.c) only moves bytes. Callable without the loop:
 * the daemon-level fuzzer and the handler tests drive it with a ledger. The
 * messages of a job held for its processes and of a container's job are
 * answered in files of their own, and every answer is said through
 * answers_send.c (answers.h lists them).
 *
 * The connection is the grant: when it closes, for whatever reason, its
 * grants return at once (answers_gone), except a job's while processes of
 * it live, which vramd keeps for them (job_keep.h).
 */
#include "answers.h"
#include "containers.h"
#include "driver_limits.h"
#include "job_keep.h"

#include "../protocol/snapshot.h"
#include "../util/parse.h"
#include "../util/proc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

int message_device(struct conn *c, const struct proto_msg *m, int *dev)
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
    if ((r = message_device(c, m, &dev)) != 0)
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

/* ------------------------------------------------------- a client's end */

void end_client(struct ledger_client *lc, const char *why)
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
    end_client(lc, NULL);
    answers_admit_waiting();
}

void answers_gone(struct conn *c)
{
    reply_forget(c);
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
    end_client(lc, NULL);
}
