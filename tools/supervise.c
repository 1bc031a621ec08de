/* vram run's supervisor: the command as a child, its signals, its end. */
#include "supervise.h"
#include "grants.h"
#include "../src/util/json.h"
#include "../src/cuda/nvml_query.h"
#include "../src/util/parse.h"
#include "../src/util/saturate.h"
#include "../src/util/proc.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------- signals */

static volatile sig_atomic_t child;

/* Signals whose default would end vram run and leave the command running
 * without it: they are passed on to the command instead. Stop signals keep
 * their default, so that ^Z stops vram run with the command (a shell's job
 * control sees them stop together). */
static const int passed_on[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM};
#define NPASSED (int)(sizeof passed_on / sizeof *passed_on)

static void pass_on(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    /* From the terminal (^C, ^\, a hang-up) the kernel signals the whole
     * foreground process group, the command included: passing it on would
     * deliver it twice. So would a signal the command sent itself. */
    if (si->si_code == SI_KERNEL || (child > 0 && si->si_pid == child))
        return;
    if (child > 0)
        kill(child, sig);
}

/* ------------------------------------------------------------ the end */

static const char *signal_name(int sig, char *buf, size_t n)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev)
        snprintf(buf, n, "SIG%s", abbrev);
    else
        snprintf(buf, n, "signal %d", sig);
    return buf;
}

/* The devices in the order the command numbered them. */
struct order {
    int n, index[COMMAND_MAX_DEVICES];
};

static void device_order(const struct command_summary *s, struct order *o)
{
    o->n = s->ndevices;
    for (int i = 0; i < o->n; i++) {
        int j = i;
        for (; j > 0 && s->device[o->index[j - 1]].ordinal > s->device[i].ordinal; j--)
            o->index[j] = o->index[j - 1];
        o->index[j] = i;
    }
}

static void write_summary(FILE *f, char **argv, int status, const struct command_summary *s,
                          const struct order *order)
{
    char name[32];
    fprintf(f, "{\n  \"command\": [");
    for (int i = 0; argv[i]; i++) {
        fputs(i ? ", " : "", f);
        json_string(f, argv[i]);
    }
    fprintf(f, "],\n  \"budget_for\": \"%s\",\n  \"exit\": ",
            s->mode == COMMAND_SHARED ? "command" : "process");
    if (WIFSIGNALED(status))
        fprintf(f, "{\"signal\": %d, \"name\": \"%s\"}", WTERMSIG(status),
                signal_name(WTERMSIG(status), name, sizeof name));
    else
        fprintf(f, "{\"code\": %d}", WEXITSTATUS(status));
    fprintf(f, ",\n  \"devices\": [");
    for (int i = 0; i < order->n; i++) {
        const struct command_summary_device *e = &s->device[order->index[i]];
        fprintf(f, "%s\n    {\"index\": %d, \"uuid\": ", i ? "," : "", e->ordinal);
        json_string(f, e->uuid);
        fprintf(f,
                ", \"budget\": %llu, \"peak\": %llu, \"context\": %llu, \"modules\": %llu, "
                "\"driver\": %llu, \"driver_charged\": %s, \"nvml_peak\": %llu, "
                "\"refused\": %llu}",
                (unsigned long long)e->budget, (unsigned long long)e->peak,
                (unsigned long long)e->part[COMMAND_CONTEXTS],
                (unsigned long long)e->part[COMMAND_MODULES],
                (unsigned long long)e->part[COMMAND_DRIVER],
                e->driver_unseen ? "false" : "true", (unsigned long long)e->nvml_peak,
                (unsigned long long)e->refused);
    }
    fprintf(f, "%s],\n  \"processes\": [", order->n ? "\n  " : "");
    for (int p = 0; p < s->nprocesses; p++) {
        const struct command_summary_process *e = &s->process[p];
        fprintf(f, "%s\n    {\"pid\": %d, \"running\": %s, \"devices\": [", p ? "," : "", e->pid,
                e->running ? "true" : "false");
        for (int i = 0, n = 0; i < order->n; i++) {
            int d = order->index[i];
            if (!e->peak[d])
                continue;
            fprintf(f, "%s{\"index\": %d, \"uuid\": ", n++ ? ", " : "", s->device[d].ordinal);
            json_string(f, s->device[d].uuid);
            fprintf(f, ", \"peak\": %llu}", (unsigned long long)e->peak[d]);
        }
        fputs("]}", f);
    }
    fprintf(f, "%s],\n  \"processes_not_listed\": %d\n}\n", s->nprocesses ? "\n  " : "",
            s->processes_not_listed);
}

/* "vram: GPU 0: peak 3.21 GiB of 4.00 GiB budget (context 518.00 MiB)"
 * for each device (the part of it the command's contexts, and modules, held
 * at most), and what else a person needs to read it right. */
static void report(const struct command_summary *s, const struct order *order, int status,
                   const struct job *grants)
{
    for (int i = 0; i < order->n; i++) {
        char line[512];
        command_peak_line(s, order->index[i], line, sizeof line);
        fprintf(stderr, "vram: %s\n", line);
    }
    /* What only vramd saw (NVML): memory of the command's processes beyond
     * its grant, which the peak above, the interposer's count, cannot show. */
    for (int i = 0; grants && i < grants->ndev; i++)
        if (grants->dev[i].over)
            fprintf(stderr, "vram: GPU %d (%s): vramd saw the command's processes use %s by NVML, "
                    "over its budget of %s: a process of it was not held to the budget (one that "
                    "cleared LD_PRELOAD or VRAM_COMMAND, or reached the GPU another way)\n",
                    grants->dev[i].ordinal, grants->dev[i].uuid,
                    format_size(grants->dev[i].over).text, format_size(grants->dev[i].grant).text);
    int running = 0, first = 0;
    for (int p = 0; p < s->nprocesses; p++)
        if (s->process[p].running && !running++)
            first = s->process[p].pid;
    bool granted = false;
    for (int i = 0; grants && i < grants->ndev; i++)
        granted |= grants->dev[i].state == JOB_GRANTED;
    if (running)
        fprintf(stderr,
                "vram: %d process%s of the command still hold%s GPU memory (pid %d%s); the peak "
                "above is until now%s\n",
                running, running == 1 ? "" : "es", running == 1 ? "s" : "", first,
                running > 1 ? ", ..." : "",
                granted ? "; vramd keeps the command's grant until they end" : "");
    char name[32];
    if (WIFSIGNALED(status))
        fprintf(stderr, "vram: the command was killed by %s\n",
                signal_name(WTERMSIG(status), name, sizeof name));
}

/* --record: the files of the command's processes, merged into FILE. What a
 * process still running writes after this is not in it (the reader's note
 * says which processes left no exit record). */
static void finish_recording(const struct supervise_options *o)
{
    char notes[1024] = "", err[PATH_MAX + 1024];
    if (recording_finish(o->record_dir, o->record_path, o->record_format, notes, sizeof notes,
                         err, sizeof err) != 0)
        fprintf(stderr, "vram run: --record %s: %s\n", o->record_path, err);
    else if (notes[0] && o->report)
        fprintf(stderr, "vram run: --record %s: note: %s\n", o->record_path, notes);
}

/* ------------------------------------------------- what NVML shows */

/* While the command runs, NVML's figure for its processes (vram run's
 * descendants) on each GPU it can see, every 200 ms: the command's NVML
 * peak, also where no process of it loaded the interposer (all of them
 * cleared LD_PRELOAD), which no member's reading can see. */
static struct {
    pthread_t thread;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool stop;
    int n;
    char uuid[COMMAND_MAX_DEVICES][COMMAND_UUID_SIZE];
    nvmlDevice_t dev[COMMAND_MAX_DEVICES];
    _Atomic uint64_t most[COMMAND_MAX_DEVICES];
} nv = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static void nvml_look(void)
{
    int self = getpid();
    for (int i = 0; i < nv.n; i++) {
        struct nvml_process *p;
        char err[256];
        int count = nvml_processes_on(nv.dev[i], &p, err, sizeof err);
        uint64_t sum = 0;
        for (int k = 0; k < count; k++)
            if (p[k].used_known && command_descends((int)p[k].pid, self))
                sum = add_saturating(sum, p[k].used);
        if (count >= 0)
            free(p);
        if (sum > atomic_load(&nv.most[i]))
            atomic_store(&nv.most[i], sum);
    }
}

static void *nvml_watch(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&nv.mu);
    while (!nv.stop) {
        pthread_mutex_unlock(&nv.mu);
        nvml_look();
        pthread_mutex_lock(&nv.mu);
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 200 * 1000000L;
        if (t.tv_nsec >= 1000000000L)
            t.tv_sec++, t.tv_nsec -= 1000000000L;
        while (!nv.stop && pthread_cond_timedwait(&nv.wake, &nv.mu, &t) == EINTR)
            ;
    }
    pthread_mutex_unlock(&nv.mu);
    return NULL;
}

static void nvml_watch_start(const struct supervise_options *o)
{
    char err[512];
    if (o->ncontext_sizes == 0 || nvml_open(NULL, "vram run", err, sizeof err) != 0)
        return;
    for (int i = 0; i < o->ncontext_sizes && nv.n < COMMAND_MAX_DEVICES; i++)
        if (nvml_by_uuid(o->context_sizes[i].uuid, &nv.dev[nv.n], err, sizeof err) == 0)
            snprintf(nv.uuid[nv.n++], COMMAND_UUID_SIZE, "%s", o->context_sizes[i].uuid);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay vram run's main thread's */
    nv.running = nv.n > 0 && pthread_create(&nv.thread, NULL, nvml_watch, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!nv.running)
        nvml_close();
}

static void nvml_watch_stop(void)
{
    if (!nv.running)
        return;
    pthread_mutex_lock(&nv.mu);
    nv.stop = true;
    pthread_cond_signal(&nv.wake);
    pthread_mutex_unlock(&nv.mu);
    pthread_join(nv.thread, NULL);
    nvml_look(); /* what is left at the end (a process the command left behind) */
    nvml_close();
    nv.running = false;
}

/* NVML's figures into the summary: each GPU's NVML peak, and for a GPU no
 * process of the command registered (none used vram there), an entry of
 * its own. */
static void nvml_into(struct command_summary *s)
{
    for (int i = 0; i < nv.n; i++) {
        uint64_t most = atomic_load(&nv.most[i]);
        int d = 0;
        while (d < s->ndevices && strcmp(s->device[d].uuid, nv.uuid[i]) != 0)
            d++;
        if (!most || (d == s->ndevices && d == COMMAND_MAX_DEVICES))
            continue;
        struct command_summary_device *e = &s->device[d];
        if (d == s->ndevices) {
            memset(e, 0, sizeof *e);
            s->ndevices++;
            e->ordinal = i;
            snprintf(e->uuid, sizeof e->uuid, "%s", nv.uuid[i]);
            e->ungoverned = true;
        }
        if (most > e->nvml_peak)
            e->nvml_peak = most;
        if (e->ungoverned && most > e->peak)
            e->peak = most;
    }
}

/* The command has ended with `status`: everything that must happen when a
 * command ends happens here (the peak, the summary, the recording). */
static int command_ended(struct command_owner *owner, char **argv, int status,
                         const struct supervise_options *o)
{
    struct command_summary *s = malloc(sizeof *s);
    struct order order = {0};
    if (s) {
        command_summarize(owner, s);
        nvml_into(s);
        device_order(s, &order);
        if (o->report)
            report(s, &order, status, o->grants);
    } else if (o->report) {
        fprintf(stderr, "vram run: no memory for the command's summary\n");
    }
    if (o->summary_fd >= 0) {
        FILE *f = fdopen(o->summary_fd, "w");
        if (f && s)
            write_summary(f, argv, status, s, &order);
        if (!f || !s || fclose(f) != 0)
            fprintf(stderr, "vram run: --summary %s: cannot write it: %s\n", o->summary_path,
                    s ? strerror(errno) : "no memory");
    }
    free(s);
    if (o->record_dir)
        finish_recording(o);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/* ----------------------------------------------------------- the command */

/* With vramd, vram run is the subreaper of the command's processes: one
 * whose parent ends comes to vram run (instead of init), so that when the
 * command's first process ends, every process of it still running is
 * below vram run, and vramd hears of each (job_member): it keeps the
 * command's grant until they are gone (src/daemon/job_keep.h). The
 * orphans that end meanwhile are reaped here. */
#define NAMED_MAX 4096

static void name_the_rest(struct job *grants)
{
    static pid_t found[NAMED_MAX];
    int n = proc_children(getpid(), found, NAMED_MAX);
    for (int i = 0; i < n; i++) { /* their descendants follow them in found */
        job_member(grants, found[i]);
        n += proc_children(found[i], found + n, NAMED_MAX - n);
    }
}

int supervise(char **argv, const struct supervise_options *o)
{
    char why[512];
    struct command_owner owner;
    if (command_create(&owner, o->mode, o->limit_var, o->limit_value, o->context_sizes,
                       o->ncontext_sizes, why, sizeof why) != 0) {
        fprintf(stderr, "vram run: %s; the program was not started\n", why);
        if (o->record_dir)
            rmdir(o->record_dir);
        return 2;
    }
    setenv(COMMAND_ENV, owner.env, 1);
    if (o->grants)
        grants_apply(o->grants, &owner);

    /* The command inherits vram run's dispositions as it would have with a
     * plain exec; vram run itself needs SIGCHLD's default to wait. */
    struct sigaction chld_old, dfl = {.sa_handler = SIG_DFL};
    sigaction(SIGCHLD, &dfl, &chld_old);
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old); /* no signal lost between fork and the handlers */
    if (o->grants)
        prctl(PR_SET_CHILD_SUBREAPER, 1);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        fprintf(stderr, "vram run: cannot start %s: %s\n", argv[0], strerror(errno));
        if (o->record_dir)
            rmdir(o->record_dir);
        return 2;
    }
    if (pid == 0) {
        /* SIGKILL of vram run is SIGKILL of the command's first process, as
         * when vram run was the command; what it started keeps the budget. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(128 + SIGKILL);
        sigaction(SIGCHLD, &chld_old, NULL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        command_inheritable(&owner); /* how vramd knows an escaped process of it */
        execvp(argv[0], argv);
        int e = errno;
        fprintf(stderr, "vram run: cannot run %s: %s\n", argv[0], strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }
    child = pid;
    nvml_watch_start(o);
    if (o->grants) { /* after the fork: the child is only ever this thread's copy */
        job_member(o->grants, pid);
        job_start(o->grants);
    }
    struct sigaction sa = {.sa_sigaction = pass_on, .sa_flags = SA_SIGINFO | SA_RESTART};
    sigfillset(&sa.sa_mask);
    for (int i = 0; i < NPASSED; i++) {
        struct sigaction was;
        /* A signal the caller ignores (nohup) stays ignored, for both. */
        if (sigaction(passed_on[i], NULL, &was) == 0 && was.sa_handler != SIG_IGN)
            sigaction(passed_on[i], &sa, NULL);
    }
    signal(SIGPIPE, SIG_IGN); /* a closed stderr must not cost the summary */
    sigprocmask(SIG_SETMASK, &old, NULL);

    int status = 0;
    for (;;) {
        /* As a subreaper, vram run also hears of the orphans it took in. */
        pid_t done = waitpid(o->grants ? -1 : pid, &status, 0);
        if (done == pid)
            break;
        if (done < 0 && errno != EINTR) {
            fprintf(stderr, "vram run: waiting for %s: %s\n", argv[0], strerror(errno));
            status = 1 << 8;
            break;
        }
    }
    child = 0;
    nvml_watch_stop();
    if (o->grants) { /* what reads the state from here is this thread */
        name_the_rest(o->grants);
        job_end(o->grants);
    }
    return command_ended(&owner, argv, status, o);
}
