/* driver_work: job cgroups and the driver's limits, on a thread of their
 * own (driver_work.h). */
#include "driver_work.h"

#include "daemon.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work, idle;
    struct driver_task *todo, *todo_tail, *done, *done_tail;
    bool running; /* a task is under way */
    int event_fd;
    PFN_nvmlDeviceSetMemoryLimits_v1 set;
    nvmlDevice_t dev[LEDGER_MAX_DEVICES];
    int ngpus;
    bool (*same)(pid_t pid, uint64_t start);
} W = {.mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER,
       .idle = PTHREAD_COND_INITIALIZER, .event_fd = -1};

static nvmlReturn_t set_limits(const char *path, int dev, uint64_t soft, uint64_t hard)
{
    if (dev < 0 || dev >= W.ngpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlSetMemoryLimits_v1_t l = {path, soft, hard};
    return W.set(W.dev[dev], &l);
}

static void set_all(struct driver_task *t)
{
    for (int i = 0; i < t->nlim; i++)
        t->rc[i] = set_limits(t->path, t->lim[i].dev, t->lim[i].soft, t->lim[i].hard);
}

static void make(struct driver_task *t)
{
    char here[CG_PATH_LEN], parent[CG_PATH_LEN], which[CG_PATH_LEN];
    cg_parent(t->path, parent, sizeof parent);
    if (cg_of(t->pid, here, sizeof here) != 0 || !W.same(t->pid, t->start)) {
        t->err = ESRCH;
        snprintf(t->why, sizeof t->why, "pid %d is gone, or not in the cgroup2 hierarchy at %s",
                 (int)t->pid, cg_mount());
        return;
    }
    if (strcmp(here, parent) != 0) {
        t->err = EAGAIN;
        snprintf(t->why, sizeof t->why, "pid %d moved from %.250s to %.250s meanwhile",
                 (int)t->pid, parent, here);
        return;
    }
    if (cg_user_may_move(here, t->uid, t->gid, t->groups, t->ngroups, which, sizeof which)) {
        t->err = EPERM;
        snprintf(t->why, sizeof t->why, "uid %u may move processes out of %.300s (it may write "
                 "its cgroup.procs, as in a cgroup delegated to the user), so no cgroup below "
                 "it would hold the job", (unsigned)t->uid, which);
        return;
    }
    /* Always a new one: a directory that is there already (a user's, in
     * a cgroup they may write; another job's) is never taken for it. */
    if (mkdir(t->path, 0755) != 0) {
        t->err = errno;
        snprintf(t->why, sizeof t->why, "cannot make the cgroup %s below %s, where pid %d is: %s",
                 t->path, here, (int)t->pid, strerror(t->err));
        return;
    }
    int err = cg_move(t->path, t->pid);
    if (err) {
        t->err = err;
        /* EBUSY/EOPNOTSUPP: the cgroup pid is in gives its children
         * controllers (cgroup.subtree_control) or is threaded. */
        snprintf(t->why, sizeof t->why, "cannot move pid %d into %s: %s%s", (int)t->pid, t->path,
                 strerror(err),
                 err == EBUSY || err == EOPNOTSUPP
                     ? " (the cgroup it is in enables controllers for its children, or is "
                       "threaded: a job's cgroup cannot be made below it)"
                     : "");
        cg_move_out(t->path);
        t->left = rmdir(t->path) != 0 && errno != ENOENT;
        return;
    }
    set_all(t);
}

static void move(struct driver_task *t)
{
    if (!W.same(t->pid, t->start)) {
        t->err = ESRCH;
        snprintf(t->why, sizeof t->why, "pid %d is gone", (int)t->pid);
        return;
    }
    t->err = cg_move(t->path, t->pid);
    if (t->err)
        snprintf(t->why, sizeof t->why, "cannot move pid %d into %s: %s", (int)t->pid, t->path,
                 strerror(t->err));
}

static void clear(struct driver_task *t)
{
    for (int i = 0; i < t->nlim; i++)
        t->rc[i] = set_limits(t->path, t->lim[i].dev, 0, NVML_DEVICE_MEMORY_LIMIT_MAX);
}

static void remove_cgroup(struct driver_task *t)
{
    t->nlim = W.ngpus;
    for (int d = 0; d < W.ngpus; d++)
        t->lim[d].dev = d;
    if (!t->made) {
        clear(t);
        t->gone = true;
        return;
    }
    cg_move_out(t->path);
    /* Its limits go before it: a cgroup made again at the path is another. */
    clear(t);
    t->gone = rmdir(t->path) == 0 || errno == ENOENT;
    if (!t->gone) {
        t->err = errno;
        snprintf(t->why, sizeof t->why, "%s", errno == EBUSY ? "a process is still in it (one "
                 "that is exiting cannot be moved out)" : strerror(errno));
    }
}

static void run(struct driver_task *t)
{
    switch (t->kind) {
    case TASK_MAKE: make(t); break;
    case TASK_MOVE: move(t); break;
    case TASK_SET: set_all(t); break;
    case TASK_CLEAR: clear(t); break;
    case TASK_REMOVE: remove_cgroup(t); break;
    }
}

/* t at the end of the list head..tail. */
static void append(struct driver_task **head, struct driver_task **tail, struct driver_task *t)
{
    t->next = NULL;
    if (*tail)
        (*tail)->next = t;
    else
        *head = t;
    *tail = t;
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&W.mu);
    for (;;) {
        while (!W.todo)
            pthread_cond_wait(&W.work, &W.mu);
        struct driver_task *t = W.todo;
        W.todo = t->next;
        if (!W.todo)
            W.todo_tail = NULL;
        W.running = true;
        pthread_mutex_unlock(&W.mu);
        run(t);
        pthread_mutex_lock(&W.mu);
        append(&W.done, &W.done_tail, t);
        W.running = false;
        if (!W.todo)
            pthread_cond_broadcast(&W.idle);
        uint64_t one = 1;
        if (write(W.event_fd, &one, sizeof one) != sizeof one && errno != EAGAIN)
            break;
    }
    pthread_mutex_unlock(&W.mu);
    return NULL;
}

int driver_work_start(PFN_nvmlDeviceSetMemoryLimits_v1 set, const nvmlDevice_t *dev, int ngpus,
                      bool (*same)(pid_t pid, uint64_t start))
{
    W.set = set;
    W.ngpus = ngpus > LEDGER_MAX_DEVICES ? LEDGER_MAX_DEVICES : ngpus;
    memcpy(W.dev, dev, (size_t)W.ngpus * sizeof *dev);
    W.same = same;
    W.event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (W.event_fd < 0)
        return -1;
    if (daemon_thread(worker, NULL) != 0) {
        close(W.event_fd);
        W.event_fd = -1;
        return -1;
    }
    return W.event_fd;
}

void driver_work_submit(struct driver_task *t)
{
    pthread_mutex_lock(&W.mu);
    append(&W.todo, &W.todo_tail, t);
    pthread_cond_signal(&W.work);
    pthread_mutex_unlock(&W.mu);
}

struct driver_task *driver_work_take(void)
{
    uint64_t count;
    if (read(W.event_fd, &count, sizeof count) < 0 && errno != EAGAIN)
        return NULL;
    pthread_mutex_lock(&W.mu);
    struct driver_task *t = W.done;
    if (t) {
        W.done = t->next;
        if (!W.done)
            W.done_tail = NULL;
        t->next = NULL;
    }
    pthread_mutex_unlock(&W.mu);
    return t;
}

bool driver_work_busy(void)
{
    pthread_mutex_lock(&W.mu);
    bool busy = W.todo || W.running;
    pthread_mutex_unlock(&W.mu);
    return busy;
}

void driver_work_drain(int ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L)
        until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&W.mu);
    while ((W.todo || W.running) && pthread_cond_timedwait(&W.idle, &W.mu, &until) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&W.mu);
}
