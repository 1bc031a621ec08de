/* reconcile: NVML's view of the GPUs, read on a thread of its own.
 *
 * NVML can be slow (a thousand processes on a GPU) or stuck (a driver in
 * trouble; on the simulated GPU, a lock someone holds): the loop never
 * waits for it. Every reconcile-every, this thread asks NVML for each GPU's
 * processes, reads each one's start time (/proc, so that a pid is matched
 * to the process that holds it), and hands the lot to the loop through an
 * eventfd; the loop takes it into the ledger in one go (reconcile_take).
 * A read that has not finished after STALL_MS is said in the log, once,
 * and its end too; meanwhile the ledger keeps NVML's last figures.
 *
 * Only this thread calls NVML once the loop runs; what it shares with the
 * loop is the result and the period, under one mutex.
 */
#include "reconcile.h"

#include "../cuda/nvml_query.h"
#include "../util/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define STALL_MS 5000
#define MAX_PROCESSES 1024 /* per GPU and reading; NVML's list beyond is left out */

struct reading {
    bool ok; /* NVML answered for this device */
    char err[256]; /* else why not */
    int n;
    struct ledger_nvml_process procs[MAX_PROCESSES];
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t changed;
    int ngpus;
    int event_fd;
    uint64_t period_ms;       /* 0: not now */
    bool ready;               /* a reading waits for the loop */
    uint64_t started_ms;      /* the reading under way began then; 0: none */
    bool stalled;             /* said so in the log */
    struct reading *shared;   /* [ngpus], under mu */
    struct reading *taken;    /* [ngpus], the loop's copy */
} R = {.mu = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER, .event_fd = -1};

/* Whose a process is: its real uid, from /proc/PID/status ((uid_t)-1 if
 * it is gone). Plain reads: safe on this thread. */
static uid_t real_uid(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return (uid_t)-1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    const char *u = strstr(buf, "\nUid:");
    return u ? (uid_t)strtoul(u + 5, NULL, 10) : (uid_t)-1;
}

/* What each process NVML lists holds of a vram run command's state: read
 * from /proc/PID/fd once per process (pid and start time), kept from one
 * reading to the next. The thread's own. */
struct inherited {
    pid_t pid;
    uint64_t start, dev, ino;
};
static struct {
    struct inherited *was, *now;
    int nwas, nnow, cap;
} I;

static int by_pid(const void *a, const void *b)
{
    pid_t x = ((const struct inherited *)a)->pid, y = ((const struct inherited *)b)->pid;
    return (x > y) - (x < y);
}

static void inherited_of(struct ledger_nvml_process *q)
{
    struct inherited key = {.pid = q->pid}, *hit = NULL;
    if (I.nwas)
        hit = bsearch(&key, I.was, (size_t)I.nwas, sizeof *I.was, by_pid);
    if (hit && hit->start == q->start) {
        key = *hit;
    } else {
        key.start = q->start;
        if (!q->start || !process_command_state(q->pid, false, &key.dev, &key.ino))
            key.dev = key.ino = 0;
    }
    q->state_dev = key.dev;
    q->state_ino = key.ino;
    if (I.nnow == I.cap) {
        int cap = I.cap ? I.cap * 2 : 64;
        struct inherited *w = realloc(I.was, (size_t)cap * sizeof *w);
        struct inherited *n = w ? realloc(I.now, (size_t)cap * sizeof *n) : NULL;
        if (w)
            I.was = w;
        if (!n)
            return; /* not kept: read again next time */
        I.now = n;
        I.cap = cap;
    }
    I.now[I.nnow++] = key;
}

/* The reading's list becomes the one the next reading starts from. */
static void inherited_next(void)
{
    if (I.nnow > 1)
        qsort(I.now, (size_t)I.nnow, sizeof *I.now, by_pid);
    struct inherited *t = I.was;
    I.was = I.now;
    I.now = t;
    I.nwas = I.nnow;
    I.nnow = 0;
}

static void *reader(void *arg)
{
    (void)arg;
    struct reading *mine = calloc((size_t)R.ngpus, sizeof *mine);
    if (!mine)
        return NULL;
    uint64_t last = 0;
    for (;;) {
        pthread_mutex_lock(&R.mu);
        /* Sleeps until a period has passed since the last reading began. */
        for (;;) {
            uint64_t now = now_ms();
            if (R.period_ms && now - last >= R.period_ms)
                break;
            uint64_t wait = R.period_ms ? R.period_ms - (now - last) : 1000;
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            t.tv_sec += (time_t)(wait / 1000);
            t.tv_nsec += (long)(wait % 1000) * 1000000L;
            if (t.tv_nsec >= 1000000000L)
                t.tv_sec++, t.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&R.changed, &R.mu, &t);
        }
        last = now_ms();
        R.started_ms = last;
        pthread_mutex_unlock(&R.mu);

        for (int d = 0; d < R.ngpus; d++) {
            char err[256];
            nvmlDevice_t h;
            struct nvml_process *p = NULL;
            int n = nvml_by_index((unsigned)d, &h, err, sizeof err) == 0
                        ? nvml_processes_on(h, &p, err, sizeof err)
                        : -1;
            mine[d].ok = n >= 0;
            memcpy(mine[d].err, n >= 0 ? "" : err, n >= 0 ? 1 : sizeof err);
            mine[d].n = n > MAX_PROCESSES ? MAX_PROCESSES : n > 0 ? n : 0;
            for (int k = 0; k < mine[d].n; k++) {
                /* Who it is: gone, start 0, parent unknown, uid (uid_t)-1. */
                struct process_info pi = {0};
                process_info((pid_t)p[k].pid, &pi);
                struct ledger_nvml_process *q = &mine[d].procs[k];
                *q = (struct ledger_nvml_process){.pid = (pid_t)p[k].pid,
                                                  .uid = real_uid((pid_t)p[k].pid),
                                                  .start = pi.start,
                                                  .used = p[k].used,
                                                  .ppid = pi.ppid};
                snprintf(q->cmd, sizeof q->cmd, "%.*s", (int)sizeof q->cmd - 1, pi.comm);
                inherited_of(q);
            }
            free(p);
        }
        inherited_next();

        pthread_mutex_lock(&R.mu);
        memcpy(R.shared, mine, (size_t)R.ngpus * sizeof *mine);
        R.ready = true;
        R.started_ms = 0;
        pthread_mutex_unlock(&R.mu);
        uint64_t one = 1;
        if (write(R.event_fd, &one, sizeof one) != sizeof one && errno != EAGAIN)
            return NULL;
    }
}

int reconcile_start(int ngpus, uint64_t period_ms)
{
    if (ngpus <= 0)
        return -1;
    R.ngpus = ngpus;
    R.period_ms = period_ms;
    R.shared = calloc((size_t)ngpus, sizeof *R.shared);
    R.taken = calloc((size_t)ngpus, sizeof *R.taken);
    R.event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!R.shared || !R.taken || R.event_fd < 0)
        return -1;
    /* The thread's deadlines are CLOCK_MONOTONIC's (a clock set back must
     * not stop the readings); a condition variable waits on CLOCK_REALTIME
     * unless told, and would take every such deadline as long past. */
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0 || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&R.changed, &ca) != 0)
        return -1;
    pthread_condattr_destroy(&ca);
    return daemon_thread(reader, NULL) == 0 ? R.event_fd : -1;
}

void reconcile_period(uint64_t period_ms)
{
    pthread_mutex_lock(&R.mu);
    R.period_ms = period_ms;
    pthread_cond_signal(&R.changed);
    pthread_mutex_unlock(&R.mu);
}

/* A process NVML saw holds a vram run command's state: the jobs of vram
 * run commands whose state is not known yet learn theirs, from the
 * holder's descriptors (vram run holds it; it may have connected before
 * making it, so this is tried until it is found). */
static void learn_command_states(void)
{
    bool any = false;
    for (int i = 0; i < R.ngpus && !any; i++)
        for (int k = 0; R.taken[i].ok && k < R.taken[i].n && !any; k++)
            any = R.taken[i].procs[k].state_ino != 0;
    for (int i = 0; any && i < D.L.njobs; i++) {
        struct ledger_client *j = D.L.jobs[i];
        uint64_t dev, ino;
        if (j->by_root || j->state_ino || j->held_until_ms || !j->start)
            continue;
        if (process_command_state(j->pid, true, &dev, &ino) && same_process(j->pid, j->start))
            j->state_dev = dev, j->state_ino = ino;
    }
}

void reconcile_take(void)
{
    uint64_t count;
    if (read(R.event_fd, &count, sizeof count) != sizeof count)
        return;
    pthread_mutex_lock(&R.mu);
    bool ready = R.ready;
    if (ready)
        memcpy(R.taken, R.shared, (size_t)R.ngpus * sizeof *R.taken);
    R.ready = false;
    bool was_stalled = R.stalled;
    R.stalled = false;
    pthread_mutex_unlock(&R.mu);
    if (!ready)
        return;
    if (was_stalled)
        dlog(L_WARN, "NVML answers again");
    learn_command_states();
    for (int i = 0; i < R.ngpus && i < D.L.ndev; i++) {
        static struct log_limit unread;
        if (!R.taken[i].ok) {
            dlog_limited(&unread, L_WARN, "%s: %s; its figures stay those of NVML's last look",
                         D.L.dev[i].uuid, R.taken[i].err);
            continue;
        }
        struct ledger_client *over[16];
        bool was = D.L.dev[i].overcommitted;
        int no = ledger_reconcile(&D.L, i, R.taken[i].procs, R.taken[i].n, over, 16);
        const struct ledger_device *dv = &D.L.dev[i];
        /* Usage outside grants is shown by user: name the users it is of. */
        for (int k = 0; k < dv->nunseen; k++) {
            struct ledger_user *w =
                dv->unseen_by[k].uid != (uid_t)-1 ? ledger_user_of(&D.L, dv->unseen_by[k].uid) : NULL;
            if (w && !w->name[0])
                user_name(w->uid, w->name, sizeof w->name);
        }
        if (dv->overcommitted && !was)
            dlog(L_WARN, "%s is overcommitted: %s granted and %s in use outside grants, of %s; "
                 "some budgets cannot be had in full", dv->uuid, format_size(dv->granted).text,
                 format_size(dv->excess + dv->unseen).text, format_size(dv->total).text);
        for (int k = 0; k < no; k++)
            dlog(L_WARN, "pid %d (%s, %s) uses %s on %s by NVML, over its budget of %s by more "
                 "than the margin %s",
                 (int)over[k]->pid, over[k]->user, over[k]->cmd,
                 format_size(over[k]->use[i].nvml).text, dv->uuid,
                 format_size(over[k]->use[i].grant).text, format_size(D.L.policy.over_margin).text);
    }
    answers_admit_waiting(); /* unseen usage may have gone */
}

void reconcile_tick(uint64_t now)
{
    pthread_mutex_lock(&R.mu);
    uint64_t started = R.started_ms;
    /* The reading may have begun after the caller read its clock. */
    bool say = started && now > started && now - started >= STALL_MS && !R.stalled;
    if (say)
        R.stalled = true;
    pthread_mutex_unlock(&R.mu);
    if (say)
        dlog(L_WARN, "NVML has not answered for %llu s; admission goes on with its last figures",
             (unsigned long long)((now - started) / 1000));
}
