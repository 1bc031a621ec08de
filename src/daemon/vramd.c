/* vramd: the node's GPU memory ledger.
 *
 * One thread, one epoll loop: the listening socket, every client, a signal
 * descriptor (SIGHUP reloads the policy, SIGTERM/SIGINT stop) and a 50 ms
 * timer (wait deadlines, NVML reconciliation, the metrics and state files).
 * Nothing a client sends can block the loop: sends never wait, and a client
 * too slow to take its answers is disconnected.
 *
 * The connection is the grant. Whoever a client is comes from the kernel
 * (SO_PEERCRED at accept), never from what it writes; when the connection
 * closes, for whatever reason, its grants return at once. A PID is only
 * ever used together with the process's start time.
 *
 * The state file (grants, by pid + start time + uid) is what lets clients
 * re-register after a daemon restart without being able to claim more than
 * they held: it is written by root, atomically, at most every 100 ms.
 */
#include "../ledger/client.h"
#include "../ledger/ledger.h"
#include "../ledger/policy.h"
#include "../ledger/protocol.h"
#include "../ledger/snapshot.h"
#include "../util/parse.h"
#include "gpus.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 50
#define STATE_EVERY_MS 100
#define MAX_STRIKES 16 /* malformed messages before a client is dropped */

struct conn {
    int fd;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    struct ledger_client *client;
    int strikes;
};

struct previous { /* a grant the daemon before this one made */
    pid_t pid;
    uint64_t start;
    uid_t uid;
    char uuid[48];
    uint64_t grant;
};

static struct {
    struct ledger L;
    struct conn **conn; /* by fd */
    int nconn_slots;
    int listen_fd, ep;
    char socket_path[108], policy_path[512], state_path[512], metrics_path[512];
    uint64_t metrics_ms, last_metrics, last_reconcile, last_state;
    bool state_dirty;
    struct previous *prev;
    int nprev;
    int ngpus; /* devices NVML knows: ledger slots 0..ngpus-1 */
    int log_level;
} D = {.listen_fd = -1, .ep = -1, .metrics_ms = 5000, .log_level = 2};

enum { L_ERROR = 1, L_WARN = 2, L_INFO = 3, L_DEBUG = 4 };

__attribute__((format(printf, 2, 3))) static void dlog(int level, const char *fmt, ...)
{
    if (level > D.log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "vramd: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* ------------------------------------------------ what the kernel knows */

/* Field 22 of /proc/PID/stat: when the process started, in clock ticks.
 * With the pid it names one process for the machine's uptime. */
static uint64_t start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command may contain spaces and parentheses */
    if (!p)
        return 0;
    int field = 2;
    for (; *p && field < 22; p++)
        if (*p == ' ')
            field++;
    return strtoull(p, NULL, 10);
}

static bool same_process(pid_t pid, uint64_t start) { return start && start_time(pid) == start; }

static void read_groups(struct ledger_client *c)
{
    char path[64], line[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)c->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Groups:", 7) == 0) {
            char *p = line + 7, *end;
            while (c->ngroups < LEDGER_MAX_GROUPS) {
                unsigned long g = strtoul(p, &end, 10);
                if (end == p)
                    break;
                c->groups[c->ngroups++] = (gid_t)g;
                p = end;
            }
        }
    fclose(f);
}

static void user_name(uid_t uid, char *out, size_t n)
{
    struct passwd *pw = getpwuid(uid);
    char name[PROTO_NAME_MAX];
    if (pw)
        proto_name_clean(pw->pw_name, name, sizeof name);
    else
        snprintf(name, sizeof name, "uid%u", (unsigned)uid);
    snprintf(out, n, "%s", name);
}

/* ------------------------------------------------------------ sending */

static void drop(struct conn *c);

/* Never blocks: a client that does not read its answers is dropped. */
static int reply(struct conn *c, struct proto_writer *w)
{
    int len = proto_end(w);
    if (len < 0) {
        dlog(L_ERROR, "an answer to pid %d did not fit in a message", (int)c->pid);
        return -1;
    }
    if (send(c->fd, w->buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) != len) {
        dlog(L_INFO, "pid %d does not take its answers (%s); dropping it", (int)c->pid,
             strerror(errno));
        return -1;
    }
    return 0;
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

static int reply_grant(struct conn *c, const char *dev, uint64_t bytes)
{
    struct proto_writer w;
    proto_begin(&w, VERB_GRANT);
    proto_add(&w, "dev", dev);
    proto_add_u64(&w, "bytes", bytes);
    return reply(c, &w);
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
    int rc = granted ? reply_grant(c, uuid, bytes)
                     : reply_text(c, VERB_DENY, uuid, "waited as long as allowed: %s", why);
    D.state_dirty = true;
    if (rc != 0)
        c->strikes = MAX_STRIKES; /* dropped after this pass */
}

static void admit_waiting(void)
{
    ledger_admit_waiting(&D.L, now_ms(), answer_waiter, NULL);
    for (int fd = 0; fd < D.nconn_slots; fd++)
        if (D.conn[fd] && D.conn[fd]->strikes >= MAX_STRIKES)
            drop(D.conn[fd]);
}

/* ----------------------------------------------------------- messages */

static int strike(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int strike(struct conn *c, const char *fmt, ...)
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

/* The device a message names, added if NVML does not know the node's GPUs. */
static int device_of(struct conn *c, const struct proto_msg *m, uint64_t *total, int *dev)
{
    const char *uuid = proto_get(m, "dev");
    char err[256] = "";
    if (!uuid || !proto_name_ok(uuid) || strlen(uuid) >= 48)
        return strike(c, "%s: dev= must be a GPU UUID such as GPU-5a1d...", proto_verb_name(m->verb));
    *total = 0;
    if (proto_get_u64(m, "total", (uint64_t)1 << 56, total, err, sizeof err) < 0)
        return strike(c, "%s: %s", proto_verb_name(m->verb), err);
    *dev = ledger_find_device(&D.L, uuid);
    if (*dev >= 0)
        return 0;
    if (D.ngpus > 0) {
        if (reply_text(c, VERB_DENY, uuid, "%s is not a GPU of this node (NVML lists %d)", uuid,
                       D.ngpus) != 0)
            return -1;
        return 1;
    }
    if (!*total)
        return strike(c, "%s: %s is new to this daemon and total= is missing",
                      proto_verb_name(m->verb), uuid);
    *dev = ledger_device(&D.L, uuid, *total);
    if (*dev < 0) {
        if (reply_text(c, VERB_DENY, uuid, "the daemon keeps at most %d devices", LEDGER_MAX_DEVICES) != 0)
            return -1;
        return 1;
    }
    return 0;
}

static int on_hello(struct conn *c, const struct proto_msg *m)
{
    if (c->client)
        return strike(c, "HELLO twice");
    const char *role = proto_get(m, "role"), *cmd = proto_get(m, "cmd"), *job = proto_get(m, "job");
    enum client_role r;
    if (role && strcmp(role, "process") == 0)
        r = ROLE_PROCESS;
    else if (role && strcmp(role, "monitor") == 0)
        r = ROLE_MONITOR;
    else
        return strike(c, "HELLO: role= must be process or monitor");
    if ((cmd && !proto_name_ok(cmd)) || (job && !proto_name_ok(job)))
        return strike(c, "HELLO: cmd= and job= are names of [A-Za-z0-9._:@+/-], at most 63");
    struct ledger_client *lc = ledger_join(&D.L, r, c->pid, c->uid, c->gid);
    if (!lc)
        return strike(c, "HELLO: the daemon is out of memory");
    lc->owner = c;
    lc->start = start_time(c->pid);
    read_groups(lc);
    user_name(c->uid, lc->user, sizeof lc->user);
    if (cmd)
        snprintf(lc->cmd, sizeof lc->cmd, "%s", cmd);
    if (job)
        snprintf(lc->job, sizeof lc->job, "%s", job);
    c->client = lc;
    struct proto_writer w;
    proto_begin(&w, VERB_OK);
    proto_add_u64(&w, "client", (uint64_t)lc->id);
    dlog(L_DEBUG, "pid %d uid %u (%s) joined as client %d", (int)c->pid, (unsigned)c->uid, lc->cmd,
         lc->id);
    return reply(c, &w);
}

/* A re-registration the previous daemon's state vouches for. */
static bool vouched(const struct ledger_client *lc, const char *uuid, uint64_t bytes)
{
    for (int i = 0; i < D.nprev; i++) {
        struct previous *p = &D.prev[i];
        if (p->pid == lc->pid && p->start == lc->start && p->uid == lc->uid &&
            strcmp(p->uuid, uuid) == 0 && bytes <= p->grant) {
            p->pid = 0; /* once */
            return true;
        }
    }
    return false;
}

static int on_request(struct conn *c, const struct proto_msg *m)
{
    struct ledger_client *lc = c->client;
    if (!lc || lc->role != ROLE_PROCESS)
        return strike(c, "REQUEST before HELLO role=process");
    uint64_t total, bytes = 0, wait = 0, restore = 0;
    int dev, r;
    char err[256] = "";
    if ((r = device_of(c, m, &total, &dev)) != 0)
        return r < 0 ? -1 : 0;
    const char *uuid = D.L.dev[dev].uuid;
    if (proto_get_u64(m, "bytes", (uint64_t)1 << 56, &bytes, err, sizeof err) != 0 ||
        proto_get_u64(m, "wait", UINT64_MAX, &wait, err, sizeof err) < 0 ||
        proto_get_u64(m, "restore", (uint64_t)1 << 56, &restore, err, sizeof err) < 0)
        return strike(c, "REQUEST: %s", err[0] ? err : "bytes= is required");
    if (restore && !lc->use[dev].grant && vouched(lc, uuid, restore)) {
        ledger_restore(&D.L, lc, dev, restore);
        D.state_dirty = true;
        dlog(L_INFO, "pid %d (%s): re-registered %s on %s", (int)lc->pid, lc->user,
             format_size(restore).text, uuid);
        return reply_grant(c, uuid, restore);
    }
    const struct policy *p = &D.L.policy;
    bool may_wait = wait && p->wait && !restore;
    uint64_t deadline = now_ms() + (wait < p->wait_ms ? wait : p->wait_ms);
    uint64_t granted = 0;
    char why[700];
    enum verdict v = ledger_request(&D.L, lc, dev, bytes, may_wait, deadline, &granted, why,
                                    sizeof why);
    if (v == VERDICT_GRANT) {
        D.state_dirty = true;
        dlog(L_INFO, "pid %d (%s, %s): granted %s on %s", (int)lc->pid, lc->user, lc->cmd,
             format_size(granted).text, uuid);
        return reply_grant(c, uuid, granted);
    }
    if (v == VERDICT_WAIT) {
        dlog(L_INFO, "pid %d (%s): waits for %s on %s", (int)lc->pid, lc->user,
             format_size(lc->use[dev].want).text, uuid);
        return reply_text(c, VERB_WAIT, uuid, "%s", why);
    }
    dlog(L_INFO, "pid %d (%s): refused on %s: %s", (int)lc->pid, lc->user, uuid, why);
    if (wait && !p->wait && !restore)
        return reply_text(c, VERB_DENY, uuid, "%s (the policy does not let requests wait)", why);
    return reply_text(c, VERB_DENY, uuid, "%s", why);
}

static int on_report(struct conn *c, const struct proto_msg *m)
{
    struct ledger_client *lc = c->client;
    if (!lc || lc->role != ROLE_PROCESS)
        return strike(c, "REPORT before HELLO role=process");
    const char *uuid = proto_get(m, "dev");
    int dev = uuid ? ledger_find_device(&D.L, uuid) : -1;
    uint64_t used = 0, peak = 0;
    char err[256] = "";
    if (dev < 0)
        return strike(c, "REPORT: dev= is not a device this client was granted");
    if (proto_get_u64(m, "used", (uint64_t)1 << 56, &used, err, sizeof err) != 0 ||
        proto_get_u64(m, "peak", (uint64_t)1 << 56, &peak, err, sizeof err) < 0)
        return strike(c, "REPORT: %s", err[0] ? err : "used= is required");
    ledger_report(&D.L, lc, dev, used, peak);
    return 0;
}

static int on_release(struct conn *c, const struct proto_msg *m)
{
    struct ledger_client *lc = c->client;
    const char *uuid = proto_get(m, "dev");
    int dev = uuid ? ledger_find_device(&D.L, uuid) : -1;
    if (!lc || dev < 0)
        return strike(c, "RELEASE: dev= is not a device this client holds");
    ledger_release(&D.L, lc, dev);
    D.state_dirty = true;
    admit_waiting();
    struct proto_writer w;
    proto_begin(&w, VERB_OK);
    return reply(c, &w);
}

/* The Slurm plugin, as root, registers a job's grant on its user's behalf;
 * the connection then holds it for the job's life. */
static int on_job(struct conn *c, const struct proto_msg *m)
{
    if (c->uid != 0)
        return strike(c, "JOB is only for root (the Slurm plugin); uid %u may not register jobs",
                      (unsigned)c->uid);
    const char *job = proto_get(m, "job");
    uint64_t uid = 0, gid = 0, total, bytes = 0;
    char err[256] = "";
    if (!job || !proto_name_ok(job))
        return strike(c, "JOB: job= must be a name of [A-Za-z0-9._:@+/-]");
    if (proto_get_u64(m, "uid", UINT32_MAX - 1, &uid, err, sizeof err) != 0 ||
        proto_get_u64(m, "gid", UINT32_MAX - 1, &gid, err, sizeof err) != 0 ||
        proto_get_u64(m, "bytes", (uint64_t)1 << 56, &bytes, err, sizeof err) != 0 || !bytes)
        return strike(c, "JOB: %s", err[0] ? err : "uid=, gid= and bytes= (more than 0) are required");
    struct ledger_client *lc = c->client;
    if (lc && (lc->role != ROLE_JOB || lc->uid != uid || strcmp(lc->job, job) != 0))
        return strike(c, "JOB: this connection already stands for something else");
    int dev, r;
    uint64_t index;
    /* The plugin knows GPUs as Slurm does, by index (CUDA_VISIBLE_DEVICES of
     * the job: NVML's order); or by UUID. */
    if ((r = proto_get_u64(m, "index", 1u << 20, &index, err, sizeof err)) < 0)
        return strike(c, "JOB: %s", err);
    if (r == 0) {
        if (index >= (uint64_t)D.ngpus) {
            if (reply_text(c, VERB_DENY, NULL, "GPU index %llu: NVML lists %d GPUs here",
                           (unsigned long long)index, D.ngpus) != 0)
                return -1;
            return 0;
        }
        dev = (int)index;
    } else if ((r = device_of(c, m, &total, &dev)) != 0) {
        return r < 0 ? -1 : 0;
    }
    if (!lc) {
        lc = ledger_join(&D.L, ROLE_JOB, c->pid, (uid_t)uid, (gid_t)gid);
        if (!lc)
            return strike(c, "JOB: the daemon is out of memory");
        lc->owner = c;
        lc->start = start_time(c->pid);
        user_name((uid_t)uid, lc->user, sizeof lc->user);
        snprintf(lc->job, sizeof lc->job, "%s", job);
        snprintf(lc->cmd, sizeof lc->cmd, "job");
        c->client = lc;
    }
    uint64_t granted;
    char why[700];
    const char *uuid = D.L.dev[dev].uuid;
    if (ledger_request(&D.L, lc, dev, bytes, false, 0, &granted, why, sizeof why) == VERDICT_GRANT) {
        D.state_dirty = true;
        dlog(L_INFO, "job %s (%s): granted %s on %s", job, lc->user, format_size(granted).text, uuid);
        return reply_grant(c, uuid, granted);
    }
    dlog(L_INFO, "job %s (%s): refused on %s: %s", job, lc->user, uuid, why);
    return reply_text(c, VERB_DENY, uuid, "%s", why);
}

static int on_status(struct conn *c)
{
    /* A status is one message per device and per client: room for all of
     * it at once, so that the loop never waits on a reader. (FORCE needs
     * root, as a system daemon is; otherwise the system's maximum.) */
    int room = 16 << 20;
    if (setsockopt(c->fd, SOL_SOCKET, SO_SNDBUFFORCE, &room, sizeof room) != 0)
        setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &room, sizeof room);
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot(&D.L, c->uid, &s);
    struct proto_writer w;
    int rc = 0;
    for (int d = 0; d < s.ndev && rc == 0; d++)
        if (snapshot_encode_device(&s.dev[d], &w) >= 0)
            rc = reply(c, &w);
    for (int i = 0; i < s.n && rc == 0; i++)
        if (snapshot_encode_entry(&s.e[i], &w) >= 0)
            rc = reply(c, &w);
    snapshot_free(&s);
    if (rc == 0) {
        proto_begin(&w, VERB_END);
        rc = reply(c, &w);
    }
    return rc;
}

static int handle(struct conn *c, const char *buf, size_t len)
{
    struct proto_msg m;
    char err[256];
    if (proto_parse(buf, len, &m, err, sizeof err) != 0)
        return strike(c, "%s", err);
    switch (m.verb) {
    case VERB_HELLO: return on_hello(c, &m);
    case VERB_REQUEST: return on_request(c, &m);
    case VERB_REPORT: return on_report(c, &m);
    case VERB_RELEASE: return on_release(c, &m);
    case VERB_JOB: return on_job(c, &m);
    case VERB_STATUS: return on_status(c);
    default: return strike(c, "%s is not something a client sends", proto_verb_name(m.verb));
    }
}

/* ------------------------------------------------------- connections */

static void drop(struct conn *c)
{
    if (c->client) {
        struct ledger_client *lc = c->client;
        bool held = false;
        for (int d = 0; d < D.L.ndev; d++)
            held |= lc->use[d].grant != 0;
        if (held)
            dlog(L_INFO, "pid %d (%s, %s%s%s) gone: its grants are back", (int)lc->pid, lc->user,
                 lc->cmd, lc->role == ROLE_JOB ? " " : "", lc->role == ROLE_JOB ? lc->job : "");
        ledger_leave(&D.L, lc);
        D.state_dirty = true;
    }
    epoll_ctl(D.ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    D.conn[c->fd] = NULL;
    free(c);
}

static void accept_all(void)
{
    for (;;) {
        int fd = accept4(D.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR)
                dlog(L_WARN, "accept: %s", strerror(errno));
            return;
        }
        struct ucred cred;
        socklen_t len = sizeof cred;
        struct conn *c = calloc(1, sizeof *c);
        if (!c || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
            fd >= (1 << 24)) {
            free(c);
            close(fd);
            continue;
        }
        if (fd >= D.nconn_slots) {
            int n = fd * 2 + 64;
            struct conn **t = realloc(D.conn, (size_t)n * sizeof *t);
            if (!t) {
                free(c);
                close(fd);
                continue;
            }
            memset(t + D.nconn_slots, 0, (size_t)(n - D.nconn_slots) * sizeof *t);
            D.conn = t;
            D.nconn_slots = n;
        }
        c->fd = fd;
        c->pid = cred.pid;
        c->uid = cred.uid;
        c->gid = cred.gid;
        D.conn[fd] = c;
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        epoll_ctl(D.ep, EPOLL_CTL_ADD, fd, &ev);
    }
}

/* A zero-length read is the end of the connection or an empty message;
 * only the socket's state tells which. */
static bool hung_up(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static void readable(struct conn *c)
{
    char buf[PROTO_MAX + 1];
    for (int i = 0; i < 64; i++) { /* a fair share, then the others' turn */
        ssize_t n = recv(c->fd, buf, sizeof buf, MSG_TRUNC | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n == 0 && !hung_up(c->fd)) { /* an empty message, not the end */
            if (strike(c, "an empty message") == 0)
                continue;
        }
        if (n <= 0) {
            drop(c);
            admit_waiting();
            return;
        }
        int rc = (size_t)n > PROTO_MAX
                     ? strike(c, "a message of %zd bytes; at most %d are accepted", n, PROTO_MAX)
                     : handle(c, buf, (size_t)n);
        if (rc != 0) {
            drop(c);
            admit_waiting();
            return;
        }
    }
}

/* ---------------------------------------------------------- the files */

/* Writes a file whole or not at all: a reader sees the old or the new. */
static int write_atomically(const char *path, mode_t mode, void (*fill)(FILE *))
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -1;
    fchmod(fd, mode);
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    fill(f);
    if (fflush(f) != 0 || ferror(f)) {
        fclose(f);
        unlink(tmp);
        return -1;
    }
    fclose(f);
    if (rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void fill_metrics(FILE *f)
{
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot(&D.L, 0, &s);
    snapshot_prometheus(&s, f);
    snapshot_free(&s);
}

static void fill_state(FILE *f)
{
    fprintf(f, "# vramd grants: pid start uid device bytes\n");
    for (int i = 0; i < D.L.nclients; i++) {
        const struct ledger_client *c = D.L.clients[i];
        if (c->role != ROLE_PROCESS)
            continue;
        for (int d = 0; d < D.L.ndev; d++)
            if (c->use[d].grant)
                fprintf(f, "%d %llu %u %s %llu\n", (int)c->pid, (unsigned long long)c->start,
                        (unsigned)c->uid, D.L.dev[d].uuid, (unsigned long long)c->use[d].grant);
    }
}

static void load_state(void)
{
    FILE *f = fopen(D.state_path, "re");
    if (!f)
        return;
    struct stat st;
    /* Only a file this daemon's user wrote and nobody else can is believed. */
    if (fstat(fileno(f), &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
        dlog(L_WARN, "%s: not owned by this daemon's user or writable by others; ignored",
             D.state_path);
        fclose(f);
        return;
    }
    char line[256];
    while (fgets(line, sizeof line, f)) {
        struct previous p;
        unsigned long long start, grant;
        int pid;
        unsigned uid;
        if (line[0] == '#' ||
            sscanf(line, "%d %llu %u %47s %llu", &pid, &start, &uid, p.uuid, &grant) != 5)
            continue;
        struct previous *t = realloc(D.prev, (size_t)(D.nprev + 1) * sizeof *t);
        if (!t)
            break;
        D.prev = t;
        p.pid = pid, p.start = start, p.uid = uid, p.grant = grant;
        D.prev[D.nprev++] = p;
    }
    fclose(f);
    if (D.nprev)
        dlog(L_INFO, "%d grants of the previous daemon may be re-registered", D.nprev);
}

/* ------------------------------------------------------------ the timer */

static void reconcile(void)
{
    static unsigned pids[GPUS_MAX_PROCESSES];
    static uint64_t used[GPUS_MAX_PROCESSES];
    for (int i = 0; i < D.ngpus; i++) {
        int n = gpus_processes(i, pids, used, GPUS_MAX_PROCESSES);
        if (n < 0)
            continue;
        struct ledger_client *over[16];
        int no = ledger_reconcile(&D.L, i, pids, used, n, same_process, over, 16);
        for (int k = 0; k < no; k++)
            dlog(L_WARN, "pid %d (%s, %s) uses %s on %s by NVML, over its budget of %s by more "
                 "than the margin %s",
                 (int)over[k]->pid, over[k]->user, over[k]->cmd,
                 format_size(over[k]->use[i].nvml).text, D.L.dev[i].uuid,
                 format_size(over[k]->use[i].grant).text, format_size(D.L.policy.over_margin).text);
    }
}

static void tick(void)
{
    uint64_t now = now_ms();
    admit_waiting();
    if (D.L.policy.reconcile_ms && D.ngpus && now - D.last_reconcile >= D.L.policy.reconcile_ms) {
        D.last_reconcile = now;
        reconcile();
        admit_waiting(); /* unseen usage may have gone */
    }
    if (D.state_dirty && D.state_path[0] && now - D.last_state >= STATE_EVERY_MS) {
        D.last_state = now;
        D.state_dirty = false;
        if (write_atomically(D.state_path, 0600, fill_state) != 0)
            dlog(L_WARN, "cannot write %s: %s", D.state_path, strerror(errno));
    }
    if (D.metrics_path[0] && now - D.last_metrics >= D.metrics_ms) {
        D.last_metrics = now;
        if (write_atomically(D.metrics_path, 0644, fill_metrics) != 0)
            dlog(L_WARN, "cannot write the metrics file %s: %s", D.metrics_path, strerror(errno));
    }
}

static void reload(void)
{
    if (!D.policy_path[0]) {
        dlog(L_INFO, "SIGHUP: no policy file to reload");
        return;
    }
    struct policy *p = malloc(sizeof *p);
    char err[600];
    if (!p)
        return;
    if (policy_load(D.policy_path, p, err, sizeof err) != 0) {
        dlog(L_ERROR, "SIGHUP: %s; keeping the policy in force", err);
    } else {
        D.L.policy = *p;
        dlog(L_INFO, "SIGHUP: policy %s reloaded (%d rules)", D.policy_path, p->nrules);
        admit_waiting();
    }
    free(p);
}

/* ------------------------------------------------------------- set-up */

static int listen_on(const char *path)
{
    char dir[sizeof D.socket_path];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        /* The system directory is for everyone to reach; a user's own
         * daemon's is theirs alone. */
        if (mkdir(dir, geteuid() == 0 ? 0755 : 0700) != 0 && errno != EEXIST) {
            dlog(L_ERROR, "cannot create %s: %s", dir, strerror(errno));
            return -1;
        }
    }
    int probe = ledger_connect(path);
    if (probe >= 0) {
        close(probe);
        dlog(L_ERROR, "another vramd already serves %s", path);
        return -1;
    }
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            dlog(L_ERROR, "%s exists and is not a socket; not touching it", path);
            return -1;
        }
        unlink(path); /* a dead daemon's */
    }
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, path, strlen(path) + 1);
    mode_t old = umask(geteuid() == 0 ? 0 : 077);
    int rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&a, sizeof a);
    umask(old);
    if (rc != 0 || listen(fd, 4096) != 0) {
        dlog(L_ERROR, "cannot listen on %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    /* Anyone may connect: who they are comes from the kernel, and the
     * policy says what they may have. */
    if (geteuid() == 0)
        chmod(path, 0666);
    return fd;
}

static void usage(FILE *out)
{
    char sock[256];
    ledger_default_socket(sock, sizeof sock);
    fprintf(out,
            "usage: vramd [OPTIONS]\n"
            "\n"
            "The node's GPU memory ledger: per-user and per-group caps, reserved memory,\n"
            "admission (grant, wait or refuse), instant reclaim of dead processes,\n"
            "monitoring. Programs under `vram run` and libvram use it when its socket\n"
            "exists.\n"
            "\n"
            "options:\n"
            "  --socket PATH         where clients connect (default for this user:\n"
            "                        %s;\n"
            "                        root's is " LEDGER_SYSTEM_SOCKET ")\n"
            "  --policy FILE         the policy (default /etc/vram/policy.conf if it exists);\n"
            "                        SIGHUP reloads it; a bad file keeps the last good one\n"
            "  --check               check the policy file, print its rules' count, and exit\n"
            "  --state FILE          grants, for clients re-registering after a restart\n"
            "                        (default: beside the socket, vramd.state)\n"
            "  --metrics-file FILE   write the ledger in Prometheus text format, atomically,\n"
            "                        for node_exporter's textfile collector\n"
            "  --metrics-every DUR   how often (default 5s)\n"
            "  --nvml LIBRARY|off    NVML to read devices and real usage from\n"
            "                        (default libnvidia-ml.so.1)\n"
            "  --log LEVEL           error, warn (default), info, debug (to stderr)\n"
            "  --help, --version\n"
            "\n"
            "The policy file: default-budget, cap user|group, reserve ... for user|group|job,\n"
            "when-full wait DURATION|fail, over-margin, reconcile-every; see the sample\n"
            "installed as share/vram/policy.conf.sample and README.md.\n",
            sock);
}

static int bad_option(const char *opt, const char *value, const char *why, const char *forms)
{
    fprintf(stderr, "vramd: %s \"%s\": %s; accepted: %s\n", opt, value, why, forms);
    return 2;
}

int main(int argc, char **argv)
{
    const char *nvml = "libnvidia-ml.so.1";
    bool check = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        parse_why why;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("vramd 0.1.0 (protocol VRAM/%d)\n", PROTO_VERSION);
            return 0;
        } else if (strcmp(a, "--check") == 0) {
            check = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "vramd: %s needs a value; vramd --help lists the options\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--socket") == 0) {
            if (v[0] != '/' || strlen(v) >= sizeof D.socket_path)
                return bad_option(a, v, "not an absolute path of at most 107 characters",
                                  "an absolute path");
            snprintf(D.socket_path, sizeof D.socket_path, "%s", v);
        } else if (strcmp(a, "--policy") == 0) {
            snprintf(D.policy_path, sizeof D.policy_path, "%s", v);
        } else if (strcmp(a, "--state") == 0) {
            snprintf(D.state_path, sizeof D.state_path, "%s", v);
        } else if (strcmp(a, "--metrics-file") == 0) {
            snprintf(D.metrics_path, sizeof D.metrics_path, "%s", v);
        } else if (strcmp(a, "--metrics-every") == 0) {
            if (parse_duration(v, &D.metrics_ms, &why) != 0 || D.metrics_ms == 0)
                return bad_option(a, v, D.metrics_ms ? why.text : "must be more than 0",
                                  PARSE_DURATION_FORMS);
        } else if (strcmp(a, "--nvml") == 0) {
            nvml = strcmp(v, "off") == 0 ? NULL : v;
        } else if (strcmp(a, "--log") == 0) {
            static const char *levels[] = {"off", "error", "warn", "info", "debug"};
            D.log_level = -1;
            for (int k = 0; k < 5; k++)
                if (strcmp(v, levels[k]) == 0)
                    D.log_level = k;
            if (D.log_level < 0)
                return bad_option(a, v, "unknown level", "off, error, warn, info, debug");
        } else {
            fprintf(stderr, "vramd: unknown option \"%s\"; vramd --help lists the options\n", a);
            return 2;
        }
    }

    struct policy *policy = calloc(1, sizeof *policy);
    char err[600];
    if (!policy)
        return 1;
    policy_default(policy);
    if (!D.policy_path[0] && access("/etc/vram/policy.conf", F_OK) == 0)
        snprintf(D.policy_path, sizeof D.policy_path, "/etc/vram/policy.conf");
    if (D.policy_path[0] && policy_load(D.policy_path, policy, err, sizeof err) != 0) {
        fprintf(stderr, "vramd: %s\n", err);
        return 1;
    }
    if (check) {
        printf("%s: %d rules; default budget %s; when full: %s\n",
               D.policy_path[0] ? D.policy_path : "(no policy file)", policy->nrules,
               policy->has_default ? "set" : "none", policy->wait ? "wait" : "fail");
        free(policy);
        return 0;
    }
    ledger_init(&D.L, policy);
    free(policy);

    if (!D.socket_path[0])
        ledger_default_socket(D.socket_path, sizeof D.socket_path);
    if (!D.state_path[0]) {
        snprintf(D.state_path, sizeof D.state_path, "%s", D.socket_path);
        char *slash = strrchr(D.state_path, '/');
        snprintf(slash + 1, sizeof D.state_path - (size_t)(slash + 1 - D.state_path),
                 "vramd.state");
    }

    if (nvml) {
        int n;
        if (gpus_open(nvml, &n, err, sizeof err) != 0) {
            dlog(L_WARN, "%s; devices will be learnt from clients, and real usage is not reconciled",
                 err);
        } else {
            for (int i = 0; i < n && i < LEDGER_MAX_DEVICES; i++) {
                char uuid[96];
                uint64_t total;
                if (gpus_device(i, uuid, sizeof uuid, &total) != 0 || strlen(uuid) >= 48 ||
                    ledger_device(&D.L, uuid, total) != i) {
                    dlog(L_ERROR, "NVML device %d cannot be read; not reconciling", i);
                    n = 0;
                    break;
                }
            }
            D.ngpus = n < LEDGER_MAX_DEVICES ? n : LEDGER_MAX_DEVICES;
        }
    }

    /* Room for a thousand clients and more. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct itimerspec its = {{0, TICK_MS * 1000000L}, {0, TICK_MS * 1000000L}};
    D.ep = epoll_create1(EPOLL_CLOEXEC);
    load_state();
    D.listen_fd = listen_on(D.socket_path);
    if (D.listen_fd < 0 || sfd < 0 || tfd < 0 || D.ep < 0 || timerfd_settime(tfd, 0, &its, NULL))
        return 1;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = D.listen_fd};
    epoll_ctl(D.ep, EPOLL_CTL_ADD, D.listen_fd, &ev);
    ev.data.fd = sfd;
    epoll_ctl(D.ep, EPOLL_CTL_ADD, sfd, &ev);
    ev.data.fd = tfd;
    epoll_ctl(D.ep, EPOLL_CTL_ADD, tfd, &ev);
    dlog(L_INFO, "serving %s (%d GPUs from NVML, policy %s)", D.socket_path, D.ngpus,
         D.policy_path[0] ? D.policy_path : "none");

    for (;;) {
        struct epoll_event evs[64];
        int n = epoll_wait(D.ep, evs, 64, -1);
        if (n < 0 && errno != EINTR) {
            dlog(L_ERROR, "epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == D.listen_fd) {
                accept_all();
            } else if (fd == tfd) {
                uint64_t expirations;
                if (read(tfd, &expirations, sizeof expirations) > 0)
                    tick();
            } else if (fd == sfd) {
                struct signalfd_siginfo si;
                while (read(sfd, &si, sizeof si) == sizeof si) {
                    if (si.ssi_signo == SIGHUP) {
                        reload();
                    } else {
                        dlog(L_INFO, "signal %u: stopping", si.ssi_signo);
                        struct stat st;
                        if (stat(D.socket_path, &st) == 0 && S_ISSOCK(st.st_mode))
                            unlink(D.socket_path);
                        if (D.state_dirty)
                            write_atomically(D.state_path, 0600, fill_state);
                        return 0;
                    }
                }
            } else if (fd < D.nconn_slots && D.conn[fd]) {
                readable(D.conn[fd]);
            }
        }
    }
    return 1;
}
