/* job: a group of processes' standing with vramd, held for them by one
 * process: `vram run` for its command (HELLO role=command, as the user),
 * the Slurm plugin in slurmstepd for a step (JOB, as root, for the job's
 * user). One mechanism for both.
 *
 * The holder asks vramd for the job's grant on each GPU before the job's
 * processes start (job_ask), and keeps the connection for the job's life:
 * however the holder ends, vramd takes the grants back at once once no
 * process of the job runs; while one does (a process that outlived its
 * command's first), vramd keeps them for it (src/daemon/job_keep.h). The grant is then the budget in the job's command
 * states (src/command/command_state.h: one for vram run, one per task for
 * Slurm), registered there before the processes start (command_grant); the
 * processes hold to it on their own hot path and never talk to vramd. A
 * thread of the holder's (job_start) reports every 200 ms what the job
 * holds, as its command states say: the job's total per GPU and each
 * process's own (MEMBER), so that vramd shows the job with its processes
 * and knows their usage by NVML for the job's. The thread also notices
 * vramd going away, re-registers the grants with the vramd that comes back
 * (which held them meanwhile), and registers those it could not take while
 * vramd was down.
 *
 * Not for processes asking for themselves: that is agent.h's.
 */
#ifndef VRAM_JOB_H
#define VRAM_JOB_H

#include "../command/command.h"
#include "../protocol/protocol.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define JOB_MAX_DEVICES 16
#define JOB_REPORT_EVERY_MS 200
/* A REPORT goes at least this often, changed or not: vramd answers it with
 * what NVML saw of the job over its grant (OK over=), which only it sees. */
#define JOB_TOLD_EVERY_MS 1000

enum job_grant {
    JOB_UNASKED,  /* not asked yet */
    JOB_GRANTED,  /* vramd granted dev[i].grant */
    JOB_PENDING,  /* vramd was down: held to dev[i].grant until it is back, then registered */
    JOB_REFUSED,  /* vramd refused it: no memory there */
};

/* What the holder says about itself while the job runs: `error` true for
 * what a person must hear (a grant refused), false for the rest. */
typedef void (*job_say_fn)(void *arg, bool error, const char *line);

struct job {
    /* Set by the holder before anything else. */
    char socket[108];
    bool for_user;  /* root registering for uid/gid (JOB); else the holder's own command */
    uid_t uid;      /* for_user: the job's user and group */
    gid_t gid;
    char name[PROTO_NAME_MAX]; /* the job's name (for_user: required; else the label, or "") */
    char cmd[PROTO_NAME_MAX];  /* the program, for vram top */
    int ndev;
    struct job_device {
        char uuid[48]; /* known, or filled from vramd's GRANT when asked by index */
        int index;     /* NVML's index (for_user: how Slurm names GPUs); -1 if by UUID */
        int ordinal;   /* as the job's processes number it */
        uint64_t total, ask, grant;
        enum job_grant state;
        uint64_t over; /* the most vramd saw the job use by NVML, over its grant; 0: never */
        bool by_driver; /* the driver's per-cgroup limit holds the grant too (GRANT backend=driver) */
    } dev[JOB_MAX_DEVICES];
    job_say_fn say;
    void *say_arg;

    /* The holder's, under mu. */
    pthread_mutex_t mu;
    int fd; /* the connection that holds the grants; -1 while vramd is away */
    int nstates;
    struct job_state {
        struct command_shared *shared;
        int fd; /* for its locks: reclaiming slots of processes that died */
    } *states;
    uint64_t peak[JOB_MAX_DEVICES];
    int nsent;
    struct job_sent *sent; /* what vramd was last told, per process (by pid) */
    struct {
        uint64_t used, peak;
        uint64_t at_ms; /* when: a REPORT goes at least every JOB_TOLD_EVERY_MS */
    } sent_total[JOB_MAX_DEVICES];
    int wake[2];
    bool thread;
    pthread_t tid;
    uint64_t last_attempt_ms;
};

/* Fills in the defaults (no connection, no thread). */
void job_init(struct job *j);

/* Connects and introduces the holder: 0; 1 if vramd does not answer (down,
 * or restarting: try again); -1 with why if it refused, or if the daemon
 * at the socket is not to be trusted. */
int job_connect(struct job *j, char *why, size_t n);

/* Called while a request waits in vramd's queue: for at most until_ms
 * more, and why (the daemon's words: who holds the GPU, who waits ahead). */
typedef void (*job_waiting_fn)(void *arg, int i, uint64_t until_ms, const char *why);

/* Asks for dev[i]: dev[i].ask bytes (0: the policy's default), waiting in
 * vramd's queue up to wait_ms (0: not at all) when the policy lets
 * requests wait. 1 granted (dev[i].grant, .uuid); 0 refused (why: the
 * daemon's reason); -1 if vramd went away or did not answer (why). */
int job_ask(struct job *j, int i, uint64_t wait_ms, job_waiting_fn waiting, void *arg, char *why,
            size_t n);

/* A command state whose processes are the job's (their use is reported);
 * before job_start, or while it runs. 0, or -1 if out of memory. */
int job_watch(struct job *j, struct command_shared *shared, int fd);

/* A process of the job, named to vramd as soon as it exists (the holder's
 * child, before it runs the program), so that vramd never counts what it
 * takes as used outside the job's grant; its usage is reported from the
 * job's state once it has any. */
void job_member(struct job *j, pid_t pid);

/* For a job root registers (for_user) some of whose grants the driver
 * holds (dev[i].by_driver): this process, root's (a Slurm task before it
 * execs), asks vramd on a connection of its own to be put in the job's
 * cgroup, where the driver holds the job's grants, or, with `cgroup` (the
 * step's cgroup Slurm made, which this process is in), to have the
 * driver hold that one (src/daemon/driver_limits.h). Touches nothing of j
 * but its socket and name: it runs in a forked copy of the holder. 1
 * placed; 0 the job's grants are the interposer's alone (nothing to do);
 * -1 with why; -2 with why: the driver refused the job's limit, and the
 * task must not run (vramd fails closed). */
int job_place(const struct job *j, const char *cgroup, char *why, size_t n);

/* Starts the thread that reports and re-registers (see above). */
void job_start(struct job *j);

/* Ends it: the thread stops, vramd hears the job's last usage and every
 * process with a slot in its states that still runs (name the others
 * first, job_member), and the connection closes; vramd takes the grants
 * back once none of them runs. */
void job_end(struct job *j);

#endif
