#include "job.h"

#include "../command/command_state.h"
#include "../util/parse.h"
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RECONNECT_EVERY_MS 1000

/* What vramd was last told of one process of the job. */
struct job_sent {
    int pid;
    uint64_t used[JOB_MAX_DEVICES], peak[JOB_MAX_DEVICES];
};


static void say(struct job *j, bool error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(struct job *j, bool error, const char *fmt, ...)
{
    if (!j->say)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    j->say(j->say_arg, error, line);
}

void job_init(struct job *j)
{
    memset(j, 0, sizeof *j);
    pthread_mutex_init(&j->mu, NULL);
    j->fd = -1;
    j->wake[0] = j->wake[1] = -1;
}

/* ------------------------------------------------------------ asking */

int job_connect(struct job *j, char *why, size_t n)
{
    int fd = ledger_connect(j->socket);
    if (fd < 0) {
        snprintf(why, n, "%s", strerror(errno));
        return 1;
    }
    if (!ledger_peer_trusted(fd, why, n)) {
        close(fd);
        return -1;
    }
    if (!j->for_user) { /* root's JOB needs no introduction: it names the user itself */
        struct proto_writer w;
        struct proto_msg m;
        proto_begin(&w, VERB_HELLO);
        proto_add(&w, "role", "command");
        if (j->cmd[0])
            proto_add(&w, "cmd", j->cmd);
        if (j->name[0])
            proto_add(&w, "job", j->name);
        if (ledger_send(fd, &w) != 0 || ledger_recv(fd, &m, LEDGER_ANSWER_TIMEOUT_MS, why, n) != 0) {
            close(fd);
            return 1;
        }
        if (m.verb != VERB_OK) {
            const char *text = proto_get(&m, "text");
            snprintf(why, n, "%s", text ? text : "vramd refused the command");
            close(fd);
            return -1;
        }
    }
    j->fd = fd; /* close-on-exec: the job's processes do not inherit it */
    return 0;
}

/* Who hears of a WAIT for dev[i]. */
struct heard {
    job_waiting_fn waiting;
    void *arg;
    int i;
};

static void heard_wait(void *arg, uint64_t until_ms, const char *text)
{
    const struct heard *h = arg;
    if (h->waiting)
        h->waiting(h->arg, h->i, until_ms, text);
}

/* One request for dev[i] on the connection, and its final answer; mu held
 * or not yet shared. `restore`: re-registering what vramd held for us. */
static int ask(struct job *j, int i, bool restore, uint64_t wait_ms, job_waiting_fn waiting,
               void *arg, char *why, size_t n)
{
    struct job_device *d = &j->dev[i];
    uint64_t bytes = restore || d->state == JOB_PENDING ? d->grant : d->ask;
    struct proto_writer w;
    if (j->for_user) {
        char num[24];
        proto_begin(&w, VERB_JOB);
        proto_add(&w, "job", j->name);
        snprintf(num, sizeof num, "%u", (unsigned)j->uid);
        proto_add(&w, "uid", num);
        snprintf(num, sizeof num, "%u", (unsigned)j->gid);
        proto_add(&w, "gid", num);
        if (d->index >= 0) /* as Slurm knows the GPU */
            proto_add_u64(&w, "index", (uint64_t)d->index);
        else
            proto_add(&w, "dev", d->uuid);
    } else {
        proto_begin(&w, VERB_REQUEST);
        proto_add(&w, "dev", d->uuid);
    }
    if (d->total)
        proto_add_u64(&w, "total", d->total);
    proto_add_u64(&w, "bytes", bytes);
    if (wait_ms && !restore && !j->for_user)
        proto_add_u64(&w, "wait", wait_ms);
    if (restore)
        proto_add_u64(&w, "restore", bytes);
    if (ledger_send(j->fd, &w) != 0) {
        snprintf(why, n, "vramd does not take requests");
        return -1;
    }
    struct proto_msg m;
    char err[256];
    bool timed_out;
    struct heard heard = {waiting, arg, i};
    if (ledger_answer(j->fd, wait_ms, heard_wait, &heard, &m, &timed_out, why, n) != 0)
        return -1;
    const char *text = proto_get(&m, "text");
    const char *uuid = proto_get(&m, "dev");
    if (m.verb == VERB_GRANT) {
        uint64_t g;
        if (proto_get_u64(&m, "bytes", UINT64_MAX, &g, err, sizeof err) != 0 || !uuid ||
            !proto_name_ok(uuid) || strlen(uuid) >= sizeof d->uuid) {
            snprintf(why, n, "a GRANT without bytes= or dev=");
            return -1;
        }
        const char *backend = proto_get(&m, "backend");
        snprintf(d->uuid, sizeof d->uuid, "%s", uuid);
        d->grant = g;
        d->state = JOB_GRANTED;
        d->by_driver = backend && strcmp(backend, "driver") == 0;
        return 1;
    }
    if (m.verb == VERB_DENY || m.verb == VERB_ERR) {
        snprintf(why, n, "%s", text ? text : "refused by vramd");
        return 0;
    }
    snprintf(why, n, "vramd answered %s", proto_verb_name(m.verb));
    return -1;
}

int job_ask(struct job *j, int i, uint64_t wait_ms, job_waiting_fn waiting, void *arg, char *why,
            size_t n)
{
    if (i < 0 || i >= j->ndev || j->fd < 0) {
        snprintf(why, n, "not connected to vramd");
        return -1;
    }
    int r = ask(j, i, false, wait_ms, waiting, arg, why, n);
    if (r == 0)
        j->dev[i].state = JOB_REFUSED;
    return r;
}

int job_watch(struct job *j, struct command_shared *shared, int fd)
{
    /* Locks through a description of our own: OFD locks do not exclude
     * their own description, and the holder's other threads lock through
     * theirs (vram run's summary at the end). */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int own = open(path, O_RDWR | O_CLOEXEC);
    if (own < 0)
        return -1;
    pthread_mutex_lock(&j->mu);
    struct job_state *s = realloc(j->states, (size_t)(j->nstates + 1) * sizeof *s);
    if (s) {
        j->states = s;
        s[j->nstates++] = (struct job_state){shared, own};
    }
    pthread_mutex_unlock(&j->mu);
    if (!s)
        close(own);
    return s ? 0 : -1;
}

int job_place(const struct job *j, const char *cgroup, char *why, size_t n)
{
    int fd = ledger_connect(j->socket);
    if (fd < 0) {
        snprintf(why, n, "vramd at %s does not answer: %s", j->socket, strerror(errno));
        return -1;
    }
    struct proto_writer w;
    struct proto_msg m;
    int r = -1;
    proto_begin(&w, VERB_PLACE);
    proto_add(&w, "job", j->name);
    if (cgroup)
        proto_add(&w, "cgroup", cgroup);
    if (!ledger_peer_trusted(fd, why, n)) {
        ;
    } else if (ledger_send(fd, &w) != 0) {
        snprintf(why, n, "vramd does not take messages");
    } else if (ledger_recv(fd, &m, LEDGER_ANSWER_TIMEOUT_MS, why, n) == 0) {
        const char *backend = proto_get(&m, "backend"), *text = proto_get(&m, "text");
        if (m.verb == VERB_OK && backend)
            r = strcmp(backend, "driver") == 0;
        else
            snprintf(why, n, "%s", text ? text : "vramd refused");
        if (m.verb == VERB_DENY)
            r = -2;
    }
    close(fd);
    return r;
}

/* ------------------------------------------------------------ reports */

static int by_pid(const void *a, const void *b)
{
    int x = ((const struct job_sent *)a)->pid, y = ((const struct job_sent *)b)->pid;
    return x < y ? -1 : x > y;
}

/* What the job holds now: per device (its total; the peak so far) and per
 * process, sorted by pid; processes that died are reclaimed first. mu held. */
static int gather(struct job *j, uint64_t *used, struct job_sent **out)
{
    int n = 0, cap = 0;
    struct job_sent *p = NULL;
    memset(used, 0, JOB_MAX_DEVICES * sizeof *used);
    for (int k = 0; k < j->nstates; k++) {
        struct command_shared *s = j->states[k].shared;
        command_sweep(s, j->states[k].fd, -1);
        int entry[JOB_MAX_DEVICES];
        uint32_t nd = atomic_load(&s->devices);
        for (int i = 0; i < j->ndev; i++) {
            entry[i] = -1;
            for (uint32_t e = 0; e < nd && e < COMMAND_MAX_DEVICES; e++)
                if (strncmp(s->device[e].uuid, j->dev[i].uuid, COMMAND_UUID_SIZE) == 0)
                    entry[i] = (int)e;
            if (entry[i] >= 0 && atomic_load(&s->device[entry[i]].peak) > j->peak[i])
                j->peak[i] = atomic_load(&s->device[entry[i]].peak);
        }
        uint32_t slots = atomic_load(&s->slots);
        for (uint32_t x = 0; x < slots && x < COMMAND_MAX_SLOTS; x++) {
            int pid = atomic_load(&s->pid[x]);
            struct job_sent e = {.pid = pid};
            bool any = false;
            for (int i = 0; i < j->ndev; i++)
                if (entry[i] >= 0) {
                    e.used[i] = atomic_load(&s->used[entry[i]][x]);
                    e.peak[i] = atomic_load(&s->peak[entry[i]][x]);
                    used[i] += e.used[i];
                    any |= e.used[i] || e.peak[i];
                }
            if (pid <= 0 || !any)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                struct job_sent *g = realloc(p, (size_t)cap * sizeof *g);
                if (!g)
                    break;
                p = g;
            }
            p[n++] = e;
        }
    }
    for (int i = 0; i < j->ndev; i++)
        if (used[i] > j->peak[i]) /* several states: the highest sum seen */
            j->peak[i] = used[i];
    if (n > 1)
        qsort(p, (size_t)n, sizeof *p, by_pid);
    *out = p;
    return n;
}

static bool send_now(struct job *j, struct proto_writer *w)
{
    int len = proto_end(w);
    if (len < 0)
        return false;
    if (send(j->fd, w->buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) == len)
        return true;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
        close(j->fd);
        j->fd = -1;
    }
    return false;
}

/* One process's usage on dev[i] (or, with i < 0, that it left). */
static bool send_member(struct job *j, int pid, int i, uint64_t used, uint64_t peak)
{
    struct proto_writer w;
    proto_begin(&w, VERB_MEMBER);
    proto_add_u64(&w, "pid", (uint64_t)pid);
    if (i >= 0) {
        proto_add(&w, "dev", j->dev[i].uuid);
        proto_add_u64(&w, "used", used);
        proto_add_u64(&w, "peak", peak);
    }
    return send_now(j, &w);
}

/* Tells vramd what changed since it was last told. What could not be sent
 * (a full socket) is sent next time. mu held, connected. */
static void report(struct job *j)
{
    uint64_t used[JOB_MAX_DEVICES];
    struct job_sent *cur = NULL;
    int ncur = gather(j, used, &cur);
    for (int i = 0; i < j->ndev && j->fd >= 0; i++) {
        uint64_t now = ledger_now_ms();
        if (j->dev[i].state != JOB_GRANTED ||
            (used[i] == j->sent_total[i].used && j->peak[i] == j->sent_total[i].peak &&
             now - j->sent_total[i].at_ms < JOB_TOLD_EVERY_MS))
            continue;
        struct proto_writer w;
        proto_begin(&w, VERB_REPORT);
        proto_add(&w, "dev", j->dev[i].uuid);
        proto_add_u64(&w, "used", used[i]);
        proto_add_u64(&w, "peak", j->peak[i]);
        if (send_now(j, &w)) {
            j->sent_total[i].used = used[i];
            j->sent_total[i].peak = j->peak[i];
            j->sent_total[i].at_ms = now;
        }
    }
    /* The processes: merge what is with what was sent, both by pid. */
    struct job_sent *next = calloc((size_t)(ncur + j->nsent) + 1, sizeof *next);
    int nnext = 0, a = 0, b = 0;
    while (next && (a < ncur || b < j->nsent)) {
        struct job_sent *c = a < ncur ? &cur[a] : NULL, *s = b < j->nsent ? &j->sent[b] : NULL;
        if (c && s && c->pid != s->pid) {
            if (c->pid < s->pid)
                s = NULL;
            else
                c = NULL;
        }
        if (!c) {
            /* Named before it held anything (job_member), and alive: still
             * the job's. Otherwise it left. */
            bool named = true;
            for (int i = 0; i < j->ndev; i++)
                named &= !s->used[i] && !s->peak[i];
            if ((named && kill(s->pid, 0) == 0) || j->fd < 0 ||
                !send_member(j, s->pid, -1, 0, 0))
                next[nnext++] = *s;
            b++;
            continue;
        }
        struct job_sent told = s ? *s : (struct job_sent){.pid = c->pid};
        for (int i = 0; i < j->ndev && j->fd >= 0; i++)
            if (j->dev[i].state == JOB_GRANTED &&
                (c->used[i] != told.used[i] || c->peak[i] != told.peak[i]) &&
                send_member(j, c->pid, i, c->used[i], c->peak[i])) {
                told.used[i] = c->used[i];
                told.peak[i] = c->peak[i];
            }
        next[nnext++] = told;
        a++;
        b += s != NULL;
    }
    free(cur);
    if (next) {
        free(j->sent);
        j->sent = next;
        j->nsent = nnext;
    }
}

/* pid named to vramd (with no usage yet) unless it was already; mu held. */
static void name_member(struct job *j, pid_t pid)
{
    int at = 0;
    while (at < j->nsent && j->sent[at].pid < pid)
        at++;
    struct job_sent *grown = at < j->nsent && j->sent[at].pid == pid
                                 ? NULL
                                 : realloc(j->sent, (size_t)(j->nsent + 1) * sizeof *grown);
    if (grown) {
        memmove(&grown[at + 1], &grown[at], (size_t)(j->nsent - at) * sizeof *grown);
        grown[at] = (struct job_sent){.pid = pid};
        j->sent = grown;
        j->nsent++;
        for (int i = 0; i < j->ndev && j->fd >= 0; i++)
            if (j->dev[i].state == JOB_GRANTED)
                send_member(j, pid, i, 0, 0);
    }
}

void job_member(struct job *j, pid_t pid)
{
    pthread_mutex_lock(&j->mu);
    name_member(j, pid);
    pthread_mutex_unlock(&j->mu);
}

/* The holder ends: vramd hears what the job holds now, and every process
 * with a slot in its states that still runs, memory or not (it may take
 * some yet): vramd keeps the job's grants for them. mu held. */
static void last_report(struct job *j)
{
    if (j->fd < 0)
        return;
    report(j);
    for (int k = 0; k < j->nstates; k++) {
        struct command_shared *s = j->states[k].shared;
        uint32_t slots = atomic_load(&s->slots);
        for (uint32_t x = 0; x < slots && x < COMMAND_MAX_SLOTS; x++) {
            int pid = atomic_load(&s->pid[x]);
            if (pid > 0 && kill(pid, 0) == 0)
                name_member(j, pid);
        }
    }
}

/* vramd is back (a restart): the grants it held for us are taken back,
 * and those it could not take while it was down are asked for now. mu held. */
static void reregister(struct job *j)
{
    char why[1024];
    if (job_connect(j, why, sizeof why) != 0)
        return;
    for (int i = 0; i < j->ndev && j->fd >= 0; i++) {
        struct job_device *d = &j->dev[i];
        if (d->state != JOB_GRANTED && d->state != JOB_PENDING)
            continue;
        bool restore = d->state == JOB_GRANTED;
        int r = ask(j, i, restore, 0, NULL, NULL, why, sizeof why);
        if (r < 0) {
            close(j->fd);
            j->fd = -1;
        } else if (r == 0) {
            say(j, true, "vramd %s %s on GPU %d (%s): %s; the job keeps it as its budget",
                restore ? "did not take back" : "refused, now that it is back,",
                format_size(d->grant).text, d->ordinal, d->uuid, why);
            d->state = JOB_PENDING; /* asked again when vramd is next back */
        } else {
            say(j, false, "%s %s on GPU %d (%s) with vramd", restore ? "re-registered" : "registered",
                format_size(d->grant).text, d->ordinal, d->uuid);
        }
    }
    /* Everything is news to this daemon. */
    free(j->sent);
    j->sent = NULL;
    j->nsent = 0;
    memset(j->sent_total, 0xff, sizeof j->sent_total);
}

static void *holder(void *arg)
{
    struct job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int fd = j->fd;
        pthread_mutex_unlock(&j->mu);
        struct pollfd p[2] = {{j->wake[0], POLLIN, 0}, {fd, POLLIN, 0}};
        int r = poll(p, fd >= 0 ? 2 : 1, JOB_REPORT_EVERY_MS);
        if (r < 0 && errno != EINTR)
            return NULL;
        if (r > 0 && p[0].revents)
            return NULL; /* the job is over */
        pthread_mutex_lock(&j->mu);
        if (j->fd >= 0 && r > 0 && p[1].revents) {
            /* The daemon sends nothing unasked but an ERR, and what NVML saw
             * of the job over its grant (OK over=, to a REPORT): anything
             * else is its going away. */
            struct proto_msg m;
            char err[256];
            int got = ledger_recv(j->fd, &m, 0, err, sizeof err);
            const char *uuid = got == 0 ? proto_get(&m, "dev") : NULL;
            uint64_t over;
            if (got == 0 && m.verb == VERB_ERR) {
                const char *text = proto_get(&m, "text");
                say(j, false, "vramd: %s", text ? text : "an error");
            } else if (got == 0 && m.verb == VERB_OK && uuid &&
                       proto_get_u64(&m, "over", UINT64_MAX, &over, err, sizeof err) == 0) {
                for (int i = 0; i < j->ndev; i++)
                    if (strcmp(j->dev[i].uuid, uuid) == 0 && over > j->dev[i].over)
                        j->dev[i].over = over;
            } else {
                close(j->fd);
                j->fd = -1;
                say(j, false, "vramd went away; the job keeps its budgets and registers them "
                              "again when vramd is back");
                j->last_attempt_ms = ledger_now_ms();
            }
        }
        if (j->fd < 0 && ledger_now_ms() - j->last_attempt_ms >= RECONNECT_EVERY_MS) {
            j->last_attempt_ms = ledger_now_ms();
            reregister(j);
        }
        if (j->fd >= 0)
            report(j);
        pthread_mutex_unlock(&j->mu);
    }
}

void job_start(struct job *j)
{
    memset(j->sent_total, 0xff, sizeof j->sent_total);
    if (j->thread || pipe2(j->wake, O_CLOEXEC) != 0)
        return;
    /* Signals are the holder's business, not this thread's. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    j->thread = pthread_create(&j->tid, NULL, holder, j) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    /* Named, so that it can be found in slurmstepd (its cost is measured). */
    if (j->thread)
        pthread_setname_np(j->tid, "vram-job");
}

void job_end(struct job *j)
{
    if (j->thread) {
        if (write(j->wake[1], "x", 1) != 1)
            pthread_cancel(j->tid);
        pthread_join(j->tid, NULL);
        j->thread = false;
    }
    pthread_mutex_lock(&j->mu);
    last_report(j);
    pthread_mutex_unlock(&j->mu);
    for (int k = 0; k < 2; k++)
        if (j->wake[k] >= 0)
            close(j->wake[k]);
    j->wake[0] = j->wake[1] = -1;
    if (j->fd >= 0)
        close(j->fd);
    j->fd = -1;
    for (int k = 0; k < j->nstates; k++)
        close(j->states[k].fd);
    free(j->states);
    free(j->sent);
    j->states = NULL;
    j->sent = NULL;
    j->nstates = j->nsent = 0;
}
