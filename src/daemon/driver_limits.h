/* driver_limits: the driver's own per-cgroup memory limits for vramd's job
 * grants, where NVML offers them (nvmlDeviceSetMemoryLimits_v1 and
 * nvmlDeviceGetMemoryLimits_v1, driver R615: src/cuda/nvml_limits.h).
 *
 * The backend is "driver" when NVML exports both functions and a Get on
 * the first GPU answers anything but FUNCTION_NOT_FOUND or NOT_SUPPORTED,
 * vramd runs as root, a cgroup2 hierarchy is mounted, and --driver-limits
 * is not off. Otherwise it is "interposer" and nothing here acts: every
 * grant is held by the interposer alone, as before. vramd says which,
 * once, when it starts.
 *
 * A job never leaves a cgroup it was in. Whatever a job's processes are
 * in (Slurm's task cgroup with its device filter, memory and CPU limits; a
 * user's systemd slice) keeps holding them, since cgroup v2 is
 * hierarchical and each job's cgroup is made below it:
 *   - a user's job (vram run): CURRENT/vram-job-NAME (NAME: the job's,
 *     with -2, -3... where that is taken), below the cgroup vram run is in
 *     at its first grant; vram run is moved in before it starts the
 *     command, which inherits the cgroup;
 *   - a job root registered (a Slurm step, held by slurmstepd, which stays
 *     where Slurm put it): where Slurm made a cgroup for the step (cgroup/v2
 *     with task/cgroup: .../step_S, the tasks in .../step_S/user/task_T),
 *     the task's PLACE names it and the limits are set on it in place,
 *     nothing moved, made or removed (Slurm owns it); otherwise (task/none:
 *     the tasks run in slurmstepd's cgroup) the first task's PLACE makes
 *     vram-job-NAME below the cgroup it is in and the step's other tasks
 *     join it from there.
 * A job's cgroup is never made inside another job's (a process with two
 * jobs: the second is the interposer's), nor below a cgroup whose
 * cgroup.procs the job's user may write, up to the mount (a cgroup systemd
 * delegated to the user, from which they could move the job's processes
 * out of it): that job is held by the interposer alone, and vramd says
 * why. Each grant on a GPU sets the cgroup's limits there (soft: what the
 * policy guarantees the job, hard: the grant) and marks the grant as the
 * driver's (ledger_use.by_driver); a release clears them; the job's end
 * clears them all and removes a cgroup vramd made, moving what still runs
 * in it back to the cgroup it was made in. The driver then counts every
 * byte the cgroup's processes hold on the GPU (contexts, modules, its own)
 * against the grant, whether or not they loaded the interposer.
 *
 * Fail closed: a new grant the driver is to hold and whose limit the
 * driver refuses (its table full, say) is refused (DENY, with NVML's
 * reason), and so is a job beyond the policy's driver-jobs-per-user, for a
 * user's own jobs (a job root registered is bounded by its scheduler).
 * Only where the cgroup cannot be had at all (the cases above, a cgroup
 * that enables controllers for its children) does a job run held by the
 * interposer alone, said in vramd's log and in its grant's backend.
 *
 * The work (cgroups made, processes moved, NVML's limits set, cleared and
 * cgroups removed) is done off the loop (driver_work.h): a grant waits for
 * its work before its GRANT is said (driver_limits_grant answers
 * DL_WAIT, and the answer comes through the function given to
 * driver_limits_on_done), while the loop serves everyone else.
 *
 * Every job cgroup is recorded beside the state file (STATE.cgroups),
 * before vramd makes it, and stays recorded while it exists: a cgroup that
 * cannot be removed yet (a process of it still exiting) is tried again,
 * less and less often, until it is gone. A vramd stopped (SIGTERM, as a
 * restart does) or killed leaves every job cgroup and its limits in place:
 * the next vramd gives them back to their holders when they re-register,
 * keeps those of jobs whose holder is gone while processes of theirs live
 * (job_keep.h), and removes the rest (Slurm's: only their limits cleared).
 * A job that comes back after a restart without the cgroup it had is never
 * given a new one (its processes would stay outside it): its grant says
 * "interposer".
 *
 * Who is put in a job's cgroup: only a process the kernel vouches for, and
 * never one of another user's at a user's word. For a user's own job, its
 * holder, the peer of the connection (SO_PEERCRED, its start time
 * checked). For a job root registered, the process that asks with PLACE
 * on a connection of its own, as root: a task, before it execs the user's
 * program.
 */
#ifndef VRAM_DRIVER_LIMITS_H
#define VRAM_DRIVER_LIMITS_H

#include "../cuda/nvml_abi.h"
#include "../ledger/ledger.h"

#include <stdbool.h>
#include <stddef.h>

/* --driver-limits: auto or off (the interposer holds every grant). 0, or
 * -1 with the reason (the accepted forms) in err. */
int driver_limits_option(const char *value, char *err, size_t n);

/* What this module asks of NVML, which vramd loaded (nvml_query.h): kept
 * apart so that the daemon's handlers link without NVML (tests, fuzzer). */
struct driver_limits_nvml {
    void *(*symbol)(const char *name);
    int (*device)(unsigned index, nvmlDevice_t *d, char *err, size_t n);
    const char *(*error)(nvmlReturn_t rc, char buf[32]);
};

/* Chooses the backend for the ngpus GPUs NVML lists (the ledger's devices
 * 0..ngpus-1), says it, starts the work's thread, and reads the job
 * cgroups a vramd before this one recorded (beside `state`, the state
 * file; NULL or "": none), which wait for driver_limits_settle. 0. */
int driver_limits_start(const struct driver_limits_nvml *nvml, int ngpus, const char *state);
/* The descriptor the loop watches for work done (-1: none), and what it
 * calls when it is readable. */
int driver_limits_fd(void);
void driver_limits_take(void);
/* "driver" or "interposer". */
const char *driver_limits_backend(void);

/* What became of the work a caller waits for (its ticket). */
enum driver_verdict {
    DRIVER_HELD,       /* the driver holds it */
    DRIVER_INTERPOSER, /* the interposer alone: the cgroup could not be had (why) */
    DRIVER_REFUSED,    /* the driver refused the limit of a new grant: refuse it (why) */
    DRIVER_FAILED,     /* a PLACE that could not be done (why) */
};
/* Told of each ticket's work once it is done: the job (ledger client id)
 * and the device of a grant (-1 for a PLACE). */
typedef void (*driver_limits_done_fn)(uint64_t ticket, int job, int dev,
                                      enum driver_verdict verdict, const char *why);
void driver_limits_on_done(driver_limits_done_fn fn);

enum { DL_NOW = 0, DL_WAIT = 2 };

/* Before a user's job c is granted anything: -1 with why if it would need
 * a cgroup of its own and its user has the policy's driver-jobs-per-user
 * already; 0 otherwise. */
int driver_limits_admit(const struct ledger *l, const struct ledger_client *c, char *why,
                        size_t n);
/* A grant of job c on dev (c->use[dev].grant, just granted; `restored`:
 * given back after a restart, whose processes already run): DL_NOW when
 * nothing is to be done (c->use[dev].by_driver says who holds it), or
 * DL_WAIT when the work was handed over and `ticket`'s verdict will come
 * (for a grant that comes back, never DRIVER_REFUSED: the interposer
 * then holds it, as it did before). */
int driver_limits_grant(struct ledger *l, struct ledger_client *c, int dev, bool restored,
                        uint64_t ticket);
/* Before job c's grant on dev is given back: its limits there cleared. */
void driver_limits_release(struct ledger_client *c, int dev);
/* Before job c leaves the ledger (its holder gone and no process of it
 * left, its held grant expired): every limit cleared and a cgroup vramd
 * made removed. Also for a held grant of a vramd before this one, whose
 * cgroup it recorded. */
void driver_limits_end(const struct ledger_client *c);
/* PLACE: the process pid (the peer, as the kernel said, started at
 * `start`), a task of job c (a job root registered). With `cgroup` (the
 * step's cgroup Slurm made, a path in the hierarchy as /proc/PID/cgroup
 * writes it, its last part step_<id>): pid must be in it or below it, and
 * the limits are set on it, nothing moved. Without: pid joins the job's
 * cgroup, made below the cgroup pid is in by the first task to ask, which
 * the others must share. DL_WAIT (`ticket`'s verdict comes), 1 placed
 * already, 0 the job's grants are the interposer's (nothing to do), -1
 * with why. */
int driver_limits_place(struct ledger *l, struct ledger_client *c, pid_t pid, uint64_t start,
                        const char *cgroup, uint64_t ticket, char *why, size_t n);
/* Job c (a container's: containers.h) is held in the cgroup `dir` its
 * runtime made, in place: never moved, made or removed, its limits set
 * with each grant and cleared at the job's end, as Slurm's step cgroup. Not
 * where the job's user may move processes out of it (said): then the
 * interposer alone holds it. Before the job's first grant. */
void driver_limits_in_place(struct ledger *l, struct ledger_client *c, const char *dir);
/* The cgroup vramd made for job c, whose processes are all the job's
 * (job_keep.h watches them), or NULL. */
const char *driver_limits_cgroup(const struct ledger_client *c);
/* A held grant of job c (a vramd before this one's) kept for its
 * processes, its holder gone: the cgroup recorded for it is its own, its
 * limits set again. */
void driver_limits_keep(struct ledger *l, struct ledger_client *c);
/* After the held grants were loaded and those whose holder and processes
 * are gone ended: a recorded cgroup no held grant is for is ended. */
void driver_limits_settle(const struct ledger *l);
/* Whether cgroups wait to be removed: then the timer calls
 * driver_limits_tick, which tries again those whose time has come. */
bool driver_limits_pending(void);
void driver_limits_tick(uint64_t now);
/* vramd stops: the work under way finished (a few seconds at most), the
 * record written; every job cgroup and its limits stay, for the next
 * vramd. */
void driver_limits_stop(void);

#endif
