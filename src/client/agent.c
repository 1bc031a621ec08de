#include "agent.h"

#include "../util/parse.h"
#include "../util/report.h"
#include "client.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REPORT_EVERY_MS 200
#define RECONNECT_EVERY_MS 1000
#define REGISTER_RETRY_MS 5000  /* a budget the daemon would not take: asked again this often */
#define DOWN_WAIT_MS 5000       /* how long a first use waits for a daemon that is down */
#define DOWN_RETRY_MS 250
#define WAIT_POLICY AGENT_WAIT_POLICY

/* A device's standing with the daemon. In every standing but REFUSED the
 * caller enforces `budget` on its own; what differs is whether the daemon
 * counts it. */
enum standing {
    NOT_ASKED,
    GRANTED,      /* the daemon granted `budget` on this connection */
    UNREGISTERED, /* held to `budget` here; the daemon does not count it yet (it was
                     down, restarted, or would not take it back): registered when it can */
    REFUSED,      /* the daemon, or its absence with no fallback, refused: nothing to register */
};

struct slot {
    enum standing standing;
    bool stopped; /* the daemon would not take the budget back: no more memory until it does */
    char uuid[48];
    uint64_t total, budget;
    uint64_t sent_used, sent_peak;
};

static struct {
    pthread_mutex_t mu;
    pthread_once_t once;
    int fd;    /* -1: not connected */
    int found; /* 0 unknown, 1 a socket to use, -1 no daemon */
    char path[256];
    agent_usage_fn usage;
    agent_allow_fn allow;
    bool reporter;
    bool gave_up; /* a first use waited for the daemon in vain, and it is still down */
    uint64_t last_attempt_ms, next_register_ms;
    struct slot slot[AGENT_MAX_SLOTS];
} A = {.mu = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT, .fd = -1};


/* This process's pid on the host, as vramd said it (0: not said). Read
 * without the lock: the interposer's NVML readings ask for it. */
static _Atomic unsigned host_pid;

unsigned agent_host_pid(void) { return atomic_load(&host_pid); }

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static void after_fork_child(void)
{
    /* A child is a new process: it holds nothing and registers itself if it
     * uses a GPU. The parent's connection stays the parent's. */
    pthread_mutex_init(&A.mu, NULL);
    if (A.fd >= 0)
        close(A.fd);
    A.fd = -1;
    A.reporter = false;
    A.gave_up = false;
    atomic_store(&host_pid, 0); /* the parent's */
    memset(A.slot, 0, sizeof A.slot);
}

static void setup(void) { pthread_atfork(NULL, NULL, after_fork_child); }

/* The connection is the grant: once it is gone, the daemon no longer
 * counts what it granted on it, and the budgets are held here alone. */
static void disconnect(void)
{
    if (A.fd >= 0)
        close(A.fd);
    A.fd = -1;
    for (int i = 0; i < AGENT_MAX_SLOTS; i++)
        if (A.slot[i].standing == GRANTED)
            A.slot[i].standing = UNREGISTERED;
}

enum hello_result { HELLO_OK, HELLO_DOWN, HELLO_REFUSED };

/* HELLO on a fresh connection, answered within timeout_ms; mu held.
 * HELLO_REFUSED (with why) when the daemon, or who is at the socket, says
 * no: not the same as a daemon that is down, which a process may outlive
 * on a fallback budget. */
static enum hello_result hello(int timeout_ms, char *why, size_t n)
{
    int fd = ledger_connect(A.path);
    if (fd < 0) {
        snprintf(why, n, "%s", strerror(errno));
        return HELLO_DOWN;
    }
    if (!ledger_peer_trusted(fd, why, n)) {
        close(fd);
        return HELLO_REFUSED;
    }
    struct proto_writer w;
    proto_begin(&w, VERB_HELLO);
    proto_add(&w, "role", "process");
    char name[PROTO_NAME_MAX], comm[64] = "";
    FILE *f = fopen("/proc/self/comm", "re");
    if (f) {
        if (fgets(comm, sizeof comm, f))
            comm[strcspn(comm, "\n")] = 0;
        fclose(f);
    }
    proto_name_clean(comm, name, sizeof name);
    proto_add(&w, "cmd", name);
    const char *job = getenv("VRAM_JOB");
    if (job && *job) {
        proto_name_clean(job, name, sizeof name);
        proto_add(&w, "job", name);
    }
    struct proto_msg m;
    if (ledger_send(fd, &w) != 0 || ledger_recv(fd, &m, timeout_ms, why, n) != 0) {
        close(fd);
        return HELLO_DOWN;
    }
    if (m.verb != VERB_OK) {
        const char *text = proto_get(&m, "text");
        snprintf(why, n, "%s", text ? text : "the daemon refused this process");
        close(fd);
        return HELLO_REFUSED;
    }
    uint64_t pid;
    char bad[128];
    if (proto_get_u64(&m, "pid", INT32_MAX, &pid, bad, sizeof bad) == 0 && pid > 0)
        atomic_store(&host_pid, (unsigned)pid);
    A.fd = fd;
    A.gave_up = false;
    return HELLO_OK;
}

/* Connected, or waiting for a daemon that is down: up to DOWN_WAIT_MS, said
 * on stderr, once per time it is down (a second device's first use does
 * not wait again for a daemon the first one waited for in vain); mu held. */
static enum hello_result reach(char *why, size_t n)
{
    if (A.fd >= 0)
        return HELLO_OK;
    uint64_t until = ledger_now_ms() + (A.gave_up ? 0 : DOWN_WAIT_MS);
    bool said = false;
    for (;;) {
        uint64_t now = ledger_now_ms();
        /* A daemon that accepts but does not answer (stopped) is down too:
         * its answer is waited for only as long as the wait has left. */
        int timeout = now + 1000 < until ? (int)(until - now) : 1000;
        enum hello_result h = hello(timeout, why, n);
        if (h != HELLO_DOWN)
            return h;
        if (ledger_now_ms() >= until)
            break;
        if (!said)
            vlog(LOG_ERROR, "vramd at %s does not answer (%s); waiting up to %d s for it ("
                 LEDGER_DOWN_ADVICE ")", A.path, why, DOWN_WAIT_MS / 1000);
        said = true;
        sleep_ms(DOWN_RETRY_MS);
    }
    A.gave_up = true;
    return HELLO_DOWN;
}

static void said_waiting(void *arg, uint64_t until_ms, const char *text)
{
    (void)until_ms;
    vlog(LOG_WARN, "waiting for GPU memory on %s: %s", ((struct slot *)arg)->uuid, text);
}

/* One REQUEST and its final answer; mu held. 1 granted (s->budget is the
 * grant), 0 refused (why), -1 the daemon is gone (why), -2 it did not
 * answer in time (ledger_answer bounds every wait, queued or not). */
static int ask(struct slot *s, uint64_t bytes, bool restore, uint64_t wait_ms, char *why, size_t n)
{
    struct proto_writer w;
    proto_begin(&w, VERB_REQUEST);
    proto_add(&w, "dev", s->uuid);
    proto_add_u64(&w, "total", s->total);
    proto_add_u64(&w, "bytes", bytes);
    if (wait_ms)
        proto_add_u64(&w, "wait", wait_ms == WAIT_POLICY ? UINT64_MAX / 2 : wait_ms);
    if (restore)
        proto_add_u64(&w, "restore", bytes);
    if (ledger_send(A.fd, &w) != 0) {
        snprintf(why, n, "the daemon does not take requests");
        return -1;
    }
    struct proto_msg m;
    char err[256];
    bool timed_out;
    if (ledger_answer(A.fd, wait_ms, said_waiting, s, &m, &timed_out, why, n) != 0)
        return timed_out ? -2 : -1;
    if (m.verb == VERB_GRANT) {
        uint64_t g;
        if (proto_get_u64(&m, "bytes", UINT64_MAX, &g, err, sizeof err) != 0) {
            snprintf(why, n, "a GRANT without bytes=");
            return -1;
        }
        s->budget = g;
        return 1;
    }
    const char *text = proto_get(&m, "text");
    snprintf(why, n, "%s", text ? text : "refused by the daemon");
    return 0;
}

/* Tells the daemon of a budget held here that it does not count: one it
 * granted before it went away (it takes back what it held for this
 * process), or one taken while it was down (a new request, admitted as any
 * other). A refusal is obeyed: the daemon may have given that memory to
 * someone else, so until it takes the budget (it is offered again every
 * REGISTER_RETRY_MS) the caller takes no more memory of the device; what
 * the program holds stays its own. mu held. */
static void register_budget(int i)
{
    struct slot *s = &A.slot[i];
    char why[512];
    int r = ask(s, s->budget, true, 0, why, sizeof why);
    if (r < 0) {
        disconnect();
        return;
    }
    if (r > 0) {
        s->standing = GRANTED;
        s->sent_used = s->sent_peak = UINT64_MAX;
        if (s->stopped) {
            vlog(LOG_WARN, "vramd at %s now counts the budget of %s on %s; this process may "
                 "take memory of it again", A.path, format_size(s->budget).text, s->uuid);
            if (A.allow)
                A.allow(i, true);
        }
        s->stopped = false;
        return;
    }
    if (!s->stopped) {
        vlog(LOG_ERROR, "vramd at %s did not take back the budget of %s on %s that this process "
             "held (%s); until it does, this process takes no more memory of that GPU (what it "
             "holds stays its own; offered again every %d s)", A.path,
             format_size(s->budget).text, s->uuid, why, REGISTER_RETRY_MS / 1000);
        if (A.allow)
            A.allow(i, false);
    }
    s->stopped = true;
}

static void register_all(void)
{
    for (int i = 0; i < AGENT_MAX_SLOTS && A.fd >= 0; i++)
        if (A.slot[i].standing == UNREGISTERED)
            register_budget(i);
    A.next_register_ms = ledger_now_ms() + REGISTER_RETRY_MS;
}

static void report_usage(void)
{
    for (int i = 0; i < AGENT_MAX_SLOTS && A.fd >= 0 && A.usage; i++) {
        struct slot *s = &A.slot[i];
        if (s->standing != GRANTED) /* the daemon takes usage of its grants only */
            continue;
        uint64_t used = 0, peak = 0;
        A.usage(i, &used, &peak);
        if (used == s->sent_used && peak == s->sent_peak)
            continue;
        struct proto_writer w;
        proto_begin(&w, VERB_REPORT);
        proto_add(&w, "dev", s->uuid);
        proto_add_u64(&w, "used", used);
        proto_add_u64(&w, "peak", peak);
        int len = proto_end(&w);
        if (len < 0 || send(A.fd, w.buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) != len) {
            if (errno != EAGAIN)
                disconnect();
            break;
        }
        s->sent_used = used;
        s->sent_peak = peak;
    }
}

/* Every 200 ms: notice a daemon that went away, reconnect to one that came
 * back and register what it does not count, report what changed. */
static void *reporter(void *arg)
{
    (void)arg;
    for (;;) {
        sleep_ms(REPORT_EVERY_MS);
        pthread_mutex_lock(&A.mu);
        if (A.fd >= 0) {
            struct pollfd p = {.fd = A.fd, .events = POLLIN};
            if (poll(&p, 1, 0) > 0) /* the daemon sends nothing unasked: it closed */
                disconnect();
        }
        char why[256];
        if (A.fd < 0 && ledger_now_ms() - A.last_attempt_ms >= RECONNECT_EVERY_MS) {
            A.last_attempt_ms = ledger_now_ms();
            if (hello(LEDGER_ANSWER_TIMEOUT_MS, why, sizeof why) == HELLO_OK) {
                register_all();
                if (A.fd >= 0)
                    vlog(LOG_INFO, "registered again with the daemon at %s", A.path);
            }
        } else if (A.fd >= 0 && ledger_now_ms() >= A.next_register_ms) {
            register_all();
        }
        report_usage();
        pthread_mutex_unlock(&A.mu);
    }
    return NULL;
}

static void start_reporter(void)
{
    if (A.reporter)
        return;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    /* Signals belong to the program's threads, not to ours. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    A.reporter = pthread_create(&t, &at, reporter, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
}

/* VRAM_WAIT: how long a request may wait in the daemon's queue. A duration
 * first, as everywhere else (VRAM_WAIT=1 is one second, as vram run --wait 1
 * is; 0 does not wait), then true/false: true is as long as the policy lets
 * requests wait. */
int agent_wait_setting(uint64_t *ms, char *why, size_t n)
{
    return agent_wait_parse(getenv("VRAM_WAIT"), ms, why, n);
}

int agent_wait_parse(const char *v, uint64_t *ms, char *why, size_t n)
{
    *ms = 0;
    if (!v || !*v)
        return 0;
    parse_why pw;
    if (parse_duration(v, ms, &pw) == 0)
        return 0;
    static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
    for (int i = 0; i < 3; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *ms = WAIT_POLICY;
            return 0;
        }
        if (strcasecmp(v, no[i]) == 0)
            return 0;
    }
    snprintf(why, n, "VRAM_WAIT=\"%.60s\": %s; accepted: the longest wait for memory, as %s "
             "(0 does not wait), or true (as long as vramd's policy allows) or false", v, pw.text,
             PARSE_DURATION_FORMS);
    return -1;
}

/* The daemon is down (or did not answer): the process may take what the
 * daemon's fallback file says it may while it is down, and no more than
 * its own budget; with neither, nothing. mu held. */
static enum agent_result fallback(struct slot *s, const char *down, uint64_t *granted, char *why,
                                  size_t n)
{
    uint64_t allowed = 0;
    char fwhy[256] = "";
    int r = ledger_fallback(A.path, s->uuid, &allowed, fwhy, sizeof fwhy);
    uint64_t budget = s->budget;
    if (r == 0 && (!budget || allowed < budget))
        budget = allowed;
    if (r < 0)
        vlog(LOG_ERROR, "ignored vramd's fallback file beside %s: %s", A.path, fwhy);
    char file[300];
    ledger_fallback_path(A.path, file, sizeof file);
    if (!budget) {
        s->standing = REFUSED;
        if (r == 0)
            snprintf(why, n, "vramd at %s is down (%s), and its policy lets no process take "
                     "memory of this GPU while it is down (no default-budget), as its fallback "
                     "file %s says; " LEDGER_DOWN_ADVICE " (held to VRAM_MEMORY_LIMIT)",
                     A.path, down, file);
        else
            snprintf(why, n, "vramd at %s is down (%s), and no budget was given "
                     "(VRAM_MEMORY_LIMIT, vram run --limit SIZE) and the daemon left no fallback "
                     "budget; " LEDGER_DOWN_ADVICE, A.path, down);
        return AGENT_DENIED;
    }
    s->standing = UNREGISTERED;
    s->budget = budget;
    *granted = budget;
    vlog(LOG_ERROR, "vramd at %s is down (%s); %s held to %s (%s%s) until it is back; "
         LEDGER_DOWN_ADVICE, A.path, down, s->uuid, format_size(budget).text,
         r == 0 && budget == allowed ? "the budget a process gets while vramd is down, from "
                                     : "its own budget",
         r == 0 && budget == allowed ? file : "");
    A.last_attempt_ms = ledger_now_ms();
    return AGENT_GRANTED;
}

enum agent_result agent_request(int slot, const char *uuid, uint64_t total, uint64_t bytes,
                                agent_usage_fn usage, agent_allow_fn allow, uint64_t *granted,
                                char *why, size_t n)
{
    if (slot < 0 || slot >= AGENT_MAX_SLOTS)
        return AGENT_ALONE;
    pthread_once(&A.once, setup);
    pthread_mutex_lock(&A.mu);
    enum agent_result res = AGENT_ALONE;
    if (A.found == 0) {
        char err[512];
        int r = ledger_find_socket(A.path, sizeof A.path, err, sizeof err);
        if (r < 0) {
            snprintf(why, n, "%s", err);
            pthread_mutex_unlock(&A.mu);
            return AGENT_DENIED;
        }
        if (r > 0 && err[0]) /* a socket someone else put where a daemon's would be */
            vlog(LOG_ERROR, "%s; working without vramd", err);
        A.found = r == 0 ? 1 : -1;
    }
    if (A.found < 0)
        goto out;
    struct slot *s = &A.slot[slot];
    *s = (struct slot){.standing = REFUSED, .total = total, .budget = bytes};
    snprintf(s->uuid, sizeof s->uuid, "%s", uuid);
    s->sent_used = s->sent_peak = UINT64_MAX;
    A.usage = usage;
    A.allow = allow;
    uint64_t wait_ms;
    if (agent_wait_setting(&wait_ms, why, n) != 0) {
        res = AGENT_DENIED;
        goto out;
    }
    /* A daemon that goes away in the middle of a request may be restarting:
     * it is reached (waited for, bounded) and asked once more. One that
     * does not answer in time is down. */
    char down[PROTO_MAX + 1] = ""; /* a refusal says why, in full */
    for (int attempt = 0;; attempt++) {
        enum hello_result h = reach(down, sizeof down);
        if (h == HELLO_REFUSED) {
            snprintf(why, n, "vramd at %s refused this process: %s", A.path, down);
            res = AGENT_DENIED;
            break;
        }
        if (h == HELLO_DOWN) {
            res = fallback(s, down, granted, why, n);
            break;
        }
        int r = ask(s, bytes, false, wait_ms, down, sizeof down);
        if (r > 0) {
            s->standing = GRANTED;
            *granted = s->budget;
            res = AGENT_GRANTED;
            break;
        }
        if (r == 0) {
            snprintf(why, n, "%s", down);
            res = AGENT_DENIED;
            break;
        }
        disconnect();
        if (r == -2 || attempt == 1) {
            res = fallback(s, down, granted, why, n);
            break;
        }
    }
    start_reporter(); /* reports, and registers a fallback budget when the daemon is back */
out:
    pthread_mutex_unlock(&A.mu);
    return res;
}

int agent_container_state(int *fd, char *job, size_t jobn, char *why, size_t n)
{
    char path[108], err[256] = "";
    *fd = -1;
    int r = ledger_find_socket(path, sizeof path, err, sizeof err);
    if (r != 0) {
        snprintf(why, n, "%s", r > 0 ? "no vramd is configured" : err);
        return r > 0 ? 1 : -1;
    }
    int s = ledger_connect(path);
    if (s < 0) {
        snprintf(why, n, "vramd at %s does not answer (%s)", path, strerror(errno));
        return 1;
    }
    struct proto_msg m;
    struct proto_writer w;
    proto_begin(&w, VERB_STATE);
    int rc = -1;
    if (!ledger_peer_trusted(s, why, n)) {
        ;
    } else if (ledger_send(s, &w) != 0 ||
               ledger_recv_fd(s, &m, fd, AGENT_STATE_TIMEOUT_MS, err, sizeof err) != 0) {
        snprintf(why, n, "vramd at %s did not answer: %s", path, err[0] ? err : strerror(errno));
        rc = 1;
    } else if (m.verb == VERB_OK && *fd >= 0) {
        const char *name = proto_get(&m, "job");
        snprintf(job, jobn, "%s", name ? name : "-");
        rc = 0;
    } else {
        const char *text = proto_get(&m, "text");
        snprintf(why, n, "%s", text ? text : "vramd gave no command state");
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        rc = m.verb == VERB_DENY ? 1 : -1;
    }
    close(s);
    return rc;
}
