/* driver_work: the cgroup and NVML work of job grants (driver_limits.h), on
 * a thread of its own, so that vramd's loop never waits for it: making a
 * cgroup and moving a process into it (a migration waits for the kernel's
 * threadgroup lock), removing one, and NVML's per-cgroup limits, which a
 * driver in trouble may answer slowly or not at all. Admission, everyone
 * else's answers and the reclaim of the dead go on meanwhile; a job's GRANT
 * waits for its task (answers_send.c).
 *
 * The loop hands a task over (driver_work_submit) and goes on; the thread
 * does the tasks one at a time in the order given, so a job's cgroup is
 * made before its limits are set, set before they are cleared, and cleared
 * before the cgroup is removed. A task carries everything it needs and
 * gets its results written in; the thread touches nothing else of the
 * loop's and logs nothing. Done tasks come back through an eventfd the loop
 * watches (driver_work_fd), taken in the order they were done
 * (driver_work_take).
 */
#ifndef VRAM_DRIVER_WORK_H
#define VRAM_DRIVER_WORK_H

#include "../cuda/nvml_limits.h"
#include "../ledger/ledger.h"
#include "cgroups.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum driver_task_kind {
    /* The job's cgroup made at path (below the cgroup pid is in, which
     * must still be path's parent, and must not be one the user may move
     * processes out of), pid moved in, then the limits set. */
    TASK_MAKE,
    /* pid (still the process started at `start`) moved into path. */
    TASK_MOVE,
    TASK_SET,   /* the limits set on path */
    TASK_CLEAR, /* the limits of the devices in lim[] cleared on path */
    /* A job's cgroup at its end: made (by vramd): what still runs in it
     * moved to its parent, its limits cleared on every GPU, removed;
     * otherwise (Slurm's) its limits cleared, the cgroup left. */
    TASK_REMOVE,
};

struct driver_limit {
    int dev;
    uint64_t soft, hard;
};

struct driver_task {
    enum driver_task_kind kind;
    uint64_t ticket; /* the caller's: who waits for it (0: no one) */
    int job;         /* the ledger client's id (-1: none) */
    char path[CG_PATH_LEN];
    bool made;         /* TASK_REMOVE: vramd made it */
    pid_t pid;         /* TASK_MAKE, TASK_MOVE */
    uint64_t start;
    uid_t uid;         /* TASK_MAKE: the job's user, who must not be able to move out */
    gid_t gid;
    int ngroups;
    gid_t groups[32];
    int nlim;
    struct driver_limit lim[LEDGER_MAX_DEVICES];
    /* Results. */
    int err;                          /* 0, or an errno: the cgroup was not made/moved into */
    char why[CG_PATH_LEN * 2 + 200];  /* with err: what failed, in words */
    bool left;                        /* TASK_MAKE failed after the cgroup was made, and
                                         it could not be removed again */
    nvmlReturn_t rc[LEDGER_MAX_DEVICES]; /* per lim[]: NVML's answer */
    bool gone;                        /* TASK_REMOVE: the cgroup is no more (or not vramd's) */
    /* The loop's own, which the thread does not read. */
    uint64_t serial;
    bool restored; /* the limits of grants given back after a restart */
    int dev;       /* the device of the grant the ticket's caller waits for; -1: none */
    struct driver_task *next;
};

/* Starts the thread: `set` is NVML's nvmlDeviceSetMemoryLimits_v1, dev[]
 * its handles of the ngpus GPUs; `same` tells whether a pid is still the
 * process started at `start`. The descriptor that becomes readable when a
 * task is done, or -1 (the thread could not be started). */
int driver_work_start(PFN_nvmlDeviceSetMemoryLimits_v1 set, const nvmlDevice_t *dev, int ngpus,
                      bool (*same)(pid_t pid, uint64_t start));
/* A task (malloc'ed; the thread owns it until it comes back). */
void driver_work_submit(struct driver_task *t);
/* The next done task (the caller frees it), or NULL. */
struct driver_task *driver_work_take(void);
/* Whether tasks are queued or under way. */
bool driver_work_busy(void);
/* Waits until every task given is done, `ms` at most (vramd stops). */
void driver_work_drain(int ms);

#endif
