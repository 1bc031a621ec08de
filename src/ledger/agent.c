#include "agent.h"

#include "../util/parse.h"
#include "../util/report.h"
#include "client.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REPORT_EVERY_MS 200
#define RECONNECT_EVERY_MS 1000
#define ANSWER_TIMEOUT_MS 10000 /* a daemon that takes longer is treated as down */
#define DOWN_WAIT_MS 5000       /* how long a first use waits for a daemon that is down */
#define DOWN_RETRY_MS 250

struct slot {
    bool known, granted;
    char uuid[48];
    uint64_t total, local, grant;
    uint64_t sent_used, sent_peak;
};

static struct {
    pthread_mutex_t mu;
    pthread_once_t once;
    int fd; /* -1: not connected */
    int found; /* 0 unknown, 1 a socket to use, -1 no daemon */
    char path[256];
    agent_usage_fn usage;
    bool reporter;
    uint64_t last_attempt_ms;
    struct slot slot[AGENT_MAX_SLOTS];
} A = {.mu = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT, .fd = -1};

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
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
    memset(A.slot, 0, sizeof A.slot);
}

static void setup(void) { pthread_atfork(NULL, NULL, after_fork_child); }

static void disconnect(void)
{
    if (A.fd >= 0)
        close(A.fd);
    A.fd = -1;
}

enum hello_result { HELLO_OK, HELLO_DOWN, HELLO_REFUSED };

/* HELLO on a fresh connection; mu held. HELLO_REFUSED (with why) when the
 * daemon, or who is at the socket, says no: not the same as a daemon that
 * is down, which a process may outlive on a fallback budget. */
static enum hello_result hello(char *why, size_t n)
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
    if (ledger_send(fd, &w) != 0 || ledger_recv(fd, &m, ANSWER_TIMEOUT_MS, why, n) != 0) {
        close(fd);
        return HELLO_DOWN;
    }
    if (m.verb != VERB_OK) {
        const char *text = proto_get(&m, "text");
        snprintf(why, n, "%s", text ? text : "the daemon refused this process");
        close(fd);
        return HELLO_REFUSED;
    }
    A.fd = fd;
    return HELLO_OK;
}

/* One REQUEST and its final answer; mu held. 1 granted, 0 denied, -1 the
 * daemon is gone or did not answer in time. */
static int ask(struct slot *s, uint64_t bytes, bool restore, uint64_t wait_ms, char *why, size_t n)
{
    struct proto_writer w;
    proto_begin(&w, VERB_REQUEST);
    proto_add(&w, "dev", s->uuid);
    proto_add_u64(&w, "total", s->total);
    proto_add_u64(&w, "bytes", bytes);
    if (wait_ms)
        proto_add_u64(&w, "wait", wait_ms);
    if (restore)
        proto_add_u64(&w, "restore", bytes);
    if (ledger_send(A.fd, &w) != 0) {
        snprintf(why, n, "the daemon does not take requests");
        return -1;
    }
    struct proto_msg m;
    char err[256];
    int timeout = ANSWER_TIMEOUT_MS;
    for (;;) {
        if (ledger_recv(A.fd, &m, timeout, err, sizeof err) != 0) {
            snprintf(why, n, "%s", err);
            return -1;
        }
        const char *text = proto_get(&m, "text");
        if (m.verb == VERB_WAIT) {
            /* A queued request is answered when memory frees or its wait
             * ends: the daemon says when at the latest. */
            uint64_t until = 0;
            if (proto_get_u64(&m, "until", UINT64_MAX, &until, err, sizeof err) != 0)
                until = wait_ms;
            if (until > wait_ms)
                until = wait_ms;
            timeout = until > (uint64_t)INT32_MAX - ANSWER_TIMEOUT_MS
                          ? INT32_MAX
                          : (int)until + ANSWER_TIMEOUT_MS;
            vlog(LOG_WARN, "waiting for GPU memory on %s: %s", s->uuid, text ? text : "");
            continue;
        }
        if (m.verb == VERB_GRANT) {
            uint64_t g;
            if (proto_get_u64(&m, "bytes", UINT64_MAX, &g, err, sizeof err) != 0) {
                snprintf(why, n, "a GRANT without bytes=");
                return -1;
            }
            s->grant = g;
            s->granted = true;
            return 1;
        }
        snprintf(why, n, "%s", text ? text : "refused by the daemon");
        return 0;
    }
}

/* Every 200 ms: report what changed, notice a daemon that went away, and
 * re-register with one that came back. */
static void *reporter(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec t = {0, REPORT_EVERY_MS * 1000000L};
        nanosleep(&t, NULL);
        pthread_mutex_lock(&A.mu);
        if (A.fd >= 0) {
            struct pollfd p = {.fd = A.fd, .events = POLLIN};
            if (poll(&p, 1, 0) > 0) /* the daemon sends nothing unasked: it closed */
                disconnect();
        }
        char hwhy[256];
        if (A.fd < 0 && now_ms() - A.last_attempt_ms >= RECONNECT_EVERY_MS) {
            A.last_attempt_ms = now_ms();
            if (hello(hwhy, sizeof hwhy) == HELLO_OK) {
                for (int i = 0; i < AGENT_MAX_SLOTS && A.fd >= 0; i++) {
                    struct slot *s = &A.slot[i];
                    uint64_t held = s->granted ? s->grant : s->local;
                    char why[512];
                    if (!s->known || !held)
                        continue;
                    /* The budget is already enforced here and cannot shrink;
                     * the daemon checks the claim against what it granted. */
                    int r = ask(s, held, true, 0, why, sizeof why);
                    if (r < 0)
                        disconnect();
                    else if (r == 0)
                        vlog(LOG_WARN, "the daemon did not take back the budget of %s on %s: %s",
                             format_size(held).text, s->uuid, why);
                    s->sent_used = s->sent_peak = UINT64_MAX;
                }
                if (A.fd >= 0)
                    vlog(LOG_INFO, "re-registered with the daemon at %s", A.path);
            }
        }
        for (int i = 0; i < AGENT_MAX_SLOTS && A.fd >= 0; i++) {
            struct slot *s = &A.slot[i];
            if (!s->known || !s->granted || !A.usage) /* the daemon takes usage of grants only */
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

static int wait_setting(uint64_t *ms, char *why, size_t n)
{
    const char *v = getenv("VRAM_WAIT");
    *ms = 0;
    if (!v || !*v)
        return 0;
    parse_why pw;
    bool yes;
    if (parse_bool(v, &yes, &pw) == 0) {
        *ms = yes ? UINT64_MAX / 2 : 0; /* as long as the policy allows */
        return 0;
    }
    if (parse_duration(v, ms, &pw) == 0)
        return 0;
    snprintf(why, n, "VRAM_WAIT=\"%.60s\": %s; accepted: true/false, or the longest wait as %s", v,
             pw.text, PARSE_DURATION_FORMS);
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
    uint64_t budget = s->local;
    if (r == 0 && (!budget || allowed < budget))
        budget = allowed;
    if (r < 0)
        vlog(LOG_ERROR, "ignored vramd's fallback file beside %s: %s", A.path, fwhy);
    if (!budget) {
        snprintf(why, n, "vramd at %s is down (%s), and %s", A.path, down,
                 r == 0 ? "its policy lets no process take memory of this GPU while it is down "
                          "(no default-budget)"
                        : "no budget was given (vram run --limit SIZE) and the daemon left no "
                          "fallback budget");
        return AGENT_DENIED;
    }
    s->local = budget;
    *granted = budget;
    vlog(LOG_ERROR, "vramd at %s is down (%s); %s held to %s (%s) until it is back", A.path, down,
         s->uuid, format_size(budget).text,
         r == 0 && budget == allowed ? "the budget a process gets while vramd is down"
                                     : "its own budget");
    A.last_attempt_ms = now_ms();
    return AGENT_GRANTED;
}

enum agent_result agent_request(int slot, const char *uuid, uint64_t total, uint64_t bytes,
                                agent_usage_fn usage, uint64_t *granted, char *why, size_t n)
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
    s->known = true;
    snprintf(s->uuid, sizeof s->uuid, "%s", uuid);
    s->total = total;
    s->local = bytes;
    s->sent_used = s->sent_peak = UINT64_MAX;
    A.usage = usage;
    uint64_t wait_ms;
    if (wait_setting(&wait_ms, why, n) != 0) {
        res = AGENT_DENIED;
        goto out;
    }
    char down[256] = "";
    if (A.fd < 0) {
        /* A daemon restarting is back within a second or two: wait for it a
         * little, and say so, rather than run on a fallback at once. */
        uint64_t until = now_ms() + DOWN_WAIT_MS;
        bool said = false;
        enum hello_result h;
        while ((h = hello(down, sizeof down)) == HELLO_DOWN && now_ms() < until) {
            if (!said)
                vlog(LOG_ERROR, "vramd at %s does not answer (%s); waiting up to %d s for it",
                     A.path, down, DOWN_WAIT_MS / 1000);
            said = true;
            struct timespec t = {0, DOWN_RETRY_MS * 1000000L};
            nanosleep(&t, NULL);
        }
        if (h == HELLO_REFUSED) {
            snprintf(why, n, "vramd at %s refused this process: %s", A.path, down);
            res = AGENT_DENIED;
            goto out;
        }
        if (h == HELLO_DOWN) {
            res = fallback(s, down, granted, why, n);
            start_reporter(); /* registers the budget when the daemon is back */
            goto out;
        }
    }
    int r = ask(s, bytes, false, wait_ms, down, sizeof down);
    if (r < 0) {
        disconnect();
        res = fallback(s, down, granted, why, n);
    } else if (r == 0) {
        snprintf(why, n, "%s", down);
        res = AGENT_DENIED;
    } else {
        *granted = s->grant;
        res = AGENT_GRANTED;
    }
    start_reporter();
out:
    pthread_mutex_unlock(&A.mu);
    return res;
}
