/* vramd: the node's GPU memory ledger.
 *
 * One epoll loop: the listening socket, every client, a signal descriptor
 * (SIGHUP reloads the policy, SIGTERM/SIGINT stop), a 50 ms timer (wait
 * deadlines, held grants, idle connections, the metrics and state files),
 * NVML's readings, which a thread of their own makes (reconcile.c), and
 * the containers' cgroups emptying (containers.c, inotify).
 * Nothing a client sends can block the loop: sends never wait, and a client
 * too slow to take its answers is disconnected. The parts are listed in
 * daemon.h.
 */
#include "../cuda/nvml_query.h"
/* The client's own answers to where vramd's socket is and whether a place
 * can be trusted (one definition for both sides), and its connect, to see
 * whether another vramd already listens there. */
#include "../client/client.h"
#include "../ledger/policy.h"
#include "../util/parse.h"
#include "../util/text.h"
#include "conns.h"
#include "containers.h"
#include "driver_limits.h"
#include "job_keep.h"
#include "reconcile.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
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
#define BUILTIN_DEFAULT_SHARE 0.25 /* dist/policy.conf.sample's default-budget */

/* A held grant of the vramd before this one that was not taken back: a
 * job whose processes live is kept for them; the rest ends. */
static bool held_gone(struct ledger_client *c, void *arg)
{
    (void)arg;
    bool alive = same_process(c->pid, c->start);
    if (c->role == ROLE_JOB && job_keep_lives(&D.L, c)) {
        ledger_keep(&D.L, c);
        driver_limits_keep(&D.L, c);
        dlog(L_INFO, "job %s (%s): its holder, pid %d, %s; vramd keeps its grants for its %d "
             "process%s still running", c->job, c->user, (int)c->pid,
             alive ? "did not re-register in time" : "is gone", c->nmembers,
             c->nmembers == 1 ? "" : "es");
        D.state_dirty = true;
        return true;
    }
    for (int d = 0; d < D.L.ndev; d++)
        if (c->use[d].grant)
            dlog(L_INFO, "%s %d (%s%s%s) %s; its %s on %s are free",
                 c->role == ROLE_JOB ? "the holder of job" : "pid", (int)c->pid, c->user,
                 c->role == ROLE_JOB ? ", job " : "", c->role == ROLE_JOB ? c->job : "",
                 alive ? "did not re-register in time" : "is gone",
                 format_size(c->use[d].grant).text, D.L.dev[d].uuid);
    driver_limits_end(c);
    D.state_dirty = true;
    return false;
}

static void tick(void)
{
    uint64_t now = now_ms();
    conns_tick(now);
    if (D.L.nheld)
        ledger_expire_held(&D.L, now, same_process, held_gone, NULL);
    answers_admit_waiting();
    if (D.ngpus)
        reconcile_tick(now);
    history_tick(&D.history, &D.L, now);
    if (D.L.nkept)
        job_keep_tick(&D.L, now, answers_job_over);
    containers_report(&D.L, now);
    if (driver_limits_pending())
        driver_limits_tick(now);
    static unsigned long not_kept;
    static struct log_limit said;
    if (D.history.not_kept != not_kept) {
        dlog_limited(&said, L_WARN, "the history is full (%d series, %d a user at most): %lu new "
                     "ones not kept", HISTORY_SERIES_MAX, HISTORY_USER_SERIES_MAX,
                     D.history.not_kept - not_kept);
        not_kept = D.history.not_kept;
    }
    files_tick(now);
}

/* The policy against the GPUs NVML listed (none known: nothing to check). */
static int check_policy(const struct policy *p, char *err, size_t errlen)
{
    const char *uuids[LEDGER_MAX_DEVICES];
    uint64_t totals[LEDGER_MAX_DEVICES];
    if (!D.ngpus)
        return 0;
    for (int d = 0; d < D.ngpus; d++)
        uuids[d] = D.L.dev[d].uuid, totals[d] = D.L.dev[d].total;
    return policy_check_devices(p, uuids, totals, D.ngpus, err, errlen);
}

/* What a policy's rules may do that their writer may not mean: on
 * vramd --check's output, else in the log. */
static void warn_policy(const struct policy *p, FILE *out)
{
    char line[700];
    for (int i = 0; i < p->nrules; i++) {
        if (!policy_rule_warning(p, i, line, sizeof line))
            continue;
        if (out)
            fprintf(out, "warning: %s\n", line);
        else
            dlog(L_WARN, "%s", line);
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
    if (policy_load(D.policy_path, p, err, sizeof err) != 0 ||
        check_policy(p, err, sizeof err) != 0) {
        dlog(L_ERROR, "SIGHUP: %s; keeping the policy in force", err);
    } else {
        ledger_set_policy(&D.L, p);
        files_fallback();
        if (D.ngpus)
            reconcile_period(p->reconcile_ms);
        dlog(L_INFO, "SIGHUP: policy %s reloaded (%d directive%s, %d rule%s)", D.policy_path,
             p->ndirectives, p->ndirectives == 1 ? "" : "s", p->nrules, p->nrules == 1 ? "" : "s");
        warn_policy(p, NULL);
        answers_admit_waiting();
    }
    free(p);
}

/* The node's GPUs, from NVML, into the ledger, with what describes them
 * (name, PCI bus, /dev/nvidiaN) and the driver's versions. -1 with err if
 * NVML cannot be used; then devices are learnt from clients. */
static int open_gpus(const char *library, char *err, size_t errlen)
{
    if (nvml_open(library, "vramd", err, errlen) != 0)
        return -1;
    int n = nvml_count(err, errlen);
    if (n < 0)
        return -1;
    if (n > LEDGER_MAX_DEVICES) {
        dlog(L_WARN, "NVML lists %d GPUs; this daemon keeps the first %d", n, LEDGER_MAX_DEVICES);
        n = LEDGER_MAX_DEVICES;
    }
    for (int i = 0; i < n; i++) {
        nvmlDevice_t h;
        struct nvml_about a;
        struct nvml_memory m;
        if (nvml_by_index((unsigned)i, &h, err, errlen) != 0 ||
            nvml_about(h, &a, err, errlen) != 0 || nvml_memory(h, &m, err, errlen) != 0) {
            D.L.ndev = 0;
            return -1;
        }
        if (strlen(a.uuid) >= 48 || ledger_device(&D.L, a.uuid, m.total) != i) {
            snprintf(err, errlen, "NVML device %d cannot be read (UUID %s)", i, a.uuid);
            D.L.ndev = 0;
            return -1;
        }
        struct ledger_device *dv = &D.L.dev[i];
        text_printable(dv->name, sizeof dv->name, a.name);
        text_printable(dv->pci_bus_id, sizeof dv->pci_bus_id, a.pci_bus_id);
        dv->minor = a.minor;
    }
    struct nvml_versions v;
    nvml_versions(&v);
    text_printable(D.node.driver, sizeof D.node.driver, v.driver);
    text_printable(D.node.nvml, sizeof D.node.nvml, v.nvml);
    text_printable(D.node.cuda, sizeof D.node.cuda, v.cuda);
    D.ngpus = n;
    return 0;
}

/* open_gpus, bounded: NVML may not answer at all (a driver in trouble),
 * and a daemon that cannot learn its GPUs should say so and stop rather
 * than hang; the service manager starts it again. */
#define NVML_OPEN_MS 30000

static struct {
    pthread_mutex_t mu;
    pthread_cond_t done;
    bool finished;
    int rc;
    const char *library;
    char err[600];
} O = {.mu = PTHREAD_MUTEX_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

static void *opener(void *arg)
{
    (void)arg;
    char err[600] = "";
    int rc = open_gpus(O.library, err, sizeof err);
    pthread_mutex_lock(&O.mu);
    O.rc = rc;
    snprintf(O.err, sizeof O.err, "%s", err);
    O.finished = true;
    pthread_cond_signal(&O.done);
    pthread_mutex_unlock(&O.mu);
    return NULL;
}

static int open_gpus_within(const char *library, char *err, size_t errlen)
{
    O.library = library;
    pthread_t t;
    if (pthread_create(&t, NULL, opener, NULL) != 0)
        return open_gpus(library, err, errlen);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += NVML_OPEN_MS / 1000;
    pthread_mutex_lock(&O.mu);
    while (!O.finished && pthread_cond_timedwait(&O.done, &O.mu, &until) != ETIMEDOUT)
        ;
    bool finished = O.finished;
    int rc = O.rc;
    snprintf(err, errlen, "%s", O.err);
    pthread_mutex_unlock(&O.mu);
    if (!finished) {
        dlog(L_ERROR, "NVML (%s) did not answer within %d s; stopping", library,
             NVML_OPEN_MS / 1000);
        exit(1);
    }
    pthread_join(t, NULL);
    return rc;
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
    char why[300];
    if (!ledger_place_trusted(path, true, why, sizeof why)) {
        dlog(L_ERROR, "not serving %s: %s", path, why);
        return -1;
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
            "  --policy FILE         the policy (default /etc/vram/policy.conf if it exists;\n"
            "                        without a file: default-budget 25%%, nothing else);\n"
            "                        SIGHUP reloads it; a bad file keeps the last good one\n"
            "  --check               check the policy file (against NVML's GPUs), print what\n"
            "                        it says, and exit: 0 if it is good, 1 if not\n"
            "  --state FILE          grants, for clients re-registering after a restart\n"
            "                        (default: beside the socket, vramd.state)\n"
            "  --metrics-file FILE   write the ledger in Prometheus text format, atomically,\n"
            "                        for node_exporter's textfile collector\n"
            "  --metrics-every DUR   how often (default 5s)\n"
            "  --nvml LIBRARY|off    NVML to read devices and real usage from\n"
            "                        (default libnvidia-ml.so.1)\n"
            "  --driver-limits auto|off\n"
            "                        auto (default): where NVML has per-cgroup memory\n"
            "                        limits (driver R615 and later), each job (a vram run\n"
            "                        command, a Slurm step) runs in a cgroup of its own\n"
            "                        made below the one it was in (Slurm's step cgroup\n"
            "                        itself where there is one), which the driver holds to\n"
            "                        the job's grant, and which a restart keeps; off: the\n"
            "                        interposer alone holds grants, as on older drivers\n"
            "  --log LEVEL           error, warn (default), info, debug (to stderr)\n"
            "  --help, --version\n"
            "\n"
            "The policy file: default-budget, cap user|group, reserve ... for user|group|job,\n"
            "when-full wait DURATION|fail, over-margin, reconcile-every,\n"
            "connections-per-user, first-message-within, driver-jobs-per-user; see the\n"
            "sample installed as\n"
            "share/vram/policy.conf.sample and README.md. Beside the socket the daemon also\n"
            "writes vramd.fallback: what a process may take while the daemon is down\n"
            "(crashed or restarting); SIGTERM and SIGINT remove it with the socket, and\n"
            "leave what holds running jobs (their cgroups, the driver's limits) in place.\n",
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
        } else if (strcmp(a, "--driver-limits") == 0) {
            char err[700];
            if (driver_limits_option(v, err, sizeof err) != 0) {
                fprintf(stderr, "vramd: %s\n", err);
                return 2;
            }
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
    /* Without a policy file a command that asks for no budget (the
     * README's `vramd &` then `vram run -- python train.py`) gets the
     * sample policy's default-budget rather than a refusal. A file is the
     * administrator's word: one without default-budget means none. */
    if (!D.policy_path[0]) {
        policy->has_default = true;
        policy->default_budget = (struct amount){.is_share = true, .share = BUILTIN_DEFAULT_SHARE};
    }
    if (D.policy_path[0] && policy_load(D.policy_path, policy, err, sizeof err) != 0) {
        fprintf(stderr, "vramd: %s\n", err);
        return 1;
    }
    ledger_init(&D.L, policy);
    char host[256] = "";
    if (gethostname(host, sizeof host) == 0)
        text_printable(D.node.host, sizeof D.node.host, host);
    history_init(&D.history);
    char nvml_err[600] = "";
    if (nvml && open_gpus_within(nvml, nvml_err, sizeof nvml_err) != 0 && !check)
        dlog(L_WARN, "%s; devices will be learnt from clients, and real usage is not reconciled",
             nvml_err);
    int checked = check_policy(policy, err, sizeof err);
    if (check) {
        policy_describe(policy, stdout);
        warn_policy(policy, stdout);
        if (D.ngpus) {
            printf("checked against the %d GPU%s NVML lists:\n", D.ngpus, D.ngpus == 1 ? "" : "s");
            for (int d = 0; d < D.ngpus; d++)
                printf("  %d %s %s\n", d, D.L.dev[d].uuid, format_size(D.L.dev[d].total).text);
        } else {
            printf("not checked against GPUs: %s\n", nvml ? nvml_err : "--nvml off");
        }
    }
    fflush(stdout);
    if (checked != 0)
        fprintf(stderr, "vramd: %s\n", err);
    if (!check && checked == 0)
        warn_policy(policy, NULL);
    free(policy);
    if (check || checked != 0)
        return checked != 0;

    if (!D.socket_path[0])
        ledger_default_socket(D.socket_path, sizeof D.socket_path);
    if (!D.state_path[0]) {
        snprintf(D.state_path, sizeof D.state_path, "%s", D.socket_path);
        char *slash = strrchr(D.state_path, '/');
        snprintf(slash + 1, sizeof D.state_path - (size_t)(slash + 1 - D.state_path),
                 "vramd.state");
    }
    snprintf(D.fallback_path, sizeof D.fallback_path, "%s", D.socket_path);
    char *slash = strrchr(D.fallback_path, '/');
    snprintf(slash + 1, sizeof D.fallback_path - (size_t)(slash + 1 - D.fallback_path), "%s",
             LEDGER_FALLBACK_NAME);

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
    int ep = epoll_create1(EPOLL_CLOEXEC);
    /* Before the held grants: one whose holder is gone takes its cgroup
     * with it. */
    static const struct driver_limits_nvml limits_nvml = {nvml_symbol, nvml_by_index,
                                                          nvml_error_text};
    if (driver_limits_start(D.ngpus ? &limits_nvml : NULL, D.ngpus, D.state_path) != 0)
        return 1;
    driver_limits_on_done(answers_driver_done);
    load_state();
    /* Owners that died while the daemon was down hold nothing, unless
     * processes of their jobs live. */
    ledger_expire_held(&D.L, now_ms(), same_process, held_gone, NULL);
    driver_limits_settle(&D.L);
    int listen_fd = listen_on(D.socket_path);
    if (listen_fd >= 0)
        files_fallback();
    if (listen_fd < 0 || sfd < 0 || tfd < 0 || ep < 0 || timerfd_settime(tfd, 0, &its, NULL)) {
        driver_limits_stop();
        return 1;
    }
    static const struct conns_handlers answers = {
        .handle = answers_handle,
        .strike = answers_strike,
        .gone = answers_gone,
        .admit_waiting = answers_admit_waiting,
    };
    conns_init(listen_fd, ep, &answers);
    int rfd = D.ngpus ? reconcile_start(D.ngpus, D.L.policy.reconcile_ms) : -1;
    if (D.ngpus && rfd < 0) {
        dlog(L_ERROR, "cannot start the NVML reader: %s", strerror(errno));
        driver_limits_stop();
        return 1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = listen_fd};
    epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &ev);
    ev.data.fd = sfd;
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
    ev.data.fd = tfd;
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
    if (rfd >= 0) {
        ev.data.fd = rfd;
        epoll_ctl(ep, EPOLL_CTL_ADD, rfd, &ev);
    }
    int dfd = driver_limits_fd();
    if (dfd >= 0) {
        ev.data.fd = dfd;
        epoll_ctl(ep, EPOLL_CTL_ADD, dfd, &ev);
    }
    int cfd = containers_fd();
    if (cfd >= 0) {
        ev.data.fd = cfd;
        epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ev);
    }
    dlog(L_INFO, "serving %s (%d GPU%s from NVML, policy %s)", D.socket_path, D.ngpus,
         D.ngpus == 1 ? "" : "s",
         D.policy_path[0] ? D.policy_path : "none");
    if (!D.policy_path[0])
        dlog(L_WARN, "no policy file (no --policy, and /etc/vram/policy.conf does not exist): "
             "the built-in policy gives a command that asks for no budget default-budget %g%% "
             "of each GPU, and sets no caps",
             BUILTIN_DEFAULT_SHARE * 100);

    for (;;) {
        struct epoll_event evs[64];
        int n = epoll_wait(ep, evs, 64, -1);
        if (n < 0 && errno != EINTR) {
            dlog(L_ERROR, "epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == listen_fd) {
                conns_accept();
            } else if (fd == rfd) {
                reconcile_take();
            } else if (fd == dfd) {
                driver_limits_take();
            } else if (fd == cfd) {
                containers_take(&D.L, answers_job_over);
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
                        /* Stopped on purpose: nothing is left that
                         * would hold programs to a daemon that is not
                         * coming back (the fallback file is for a crash
                         * or a restart; the state file only this daemon
                         * reads). The jobs' cgroups and the driver's
                         * limits stay: a restart (systemctl restart)
                         * must not leave a job less held. */
                        struct stat st;
                        if (stat(D.socket_path, &st) == 0 && S_ISSOCK(st.st_mode))
                            unlink(D.socket_path);
                        if (lstat(D.fallback_path, &st) == 0 && S_ISREG(st.st_mode))
                            unlink(D.fallback_path);
                        files_flush();
                        driver_limits_stop();
                        dlog(L_INFO, "signal %u: stopped; removed %s and %s: programs started "
                             "from now on work without vramd, held only to their own budgets",
                             si.ssi_signo, D.socket_path, D.fallback_path);
                        return 0;
                    }
                }
            } else {
                conns_readable(fd);
            }
        }
        answers_flush_grants();
    }
    return 1;
}
