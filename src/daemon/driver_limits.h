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
 *   - a user's job (vram run): CURRENT/vram-job-PID-START, below the
 *     cgroup vram run is in at its first grant (PID, START: the holder's,
 *     so that a holder re-registering with a vramd that restarted finds its
 *     cgroup again); vram run is moved in before it starts the command,
 *     which inherits the cgroup;
 *   - a job root registered (a Slurm step, held by slurmstepd, which stays
 *     where Slurm put it): where Slurm made a cgroup for the step (cgroup/v2
 *     with task/cgroup: .../step_S, the tasks in .../step_S/user/task_T),
 *     the task's PLACE names it and the limits are set on it in place,
 *     nothing moved, made or removed (Slurm owns it); otherwise (task/none:
 *     the tasks run in slurmstepd's cgroup) the first task's PLACE makes
 *     vram-job-PID-START below the cgroup it is in and the step's other
 *     tasks join it from there.
 * Each grant on a GPU sets the cgroup's limits there (soft: what the
 * policy guarantees the job, hard: the grant) and marks the grant as the
 * driver's (ledger_use.by_driver; for a Slurm step from its grant on, the
 * limit itself from its first task's PLACE); a release clears them; the
 * job's end clears them all and removes a cgroup vramd made, moving what
 * still runs in it back to the cgroup it was made in. The driver then
 * counts every byte the cgroup's processes hold on the GPU (contexts,
 * modules, its own) against the grant, whether or not they loaded the
 * interposer. A cgroup that cannot be made below a process's (a cgroup
 * that enables controllers for its children, a threaded one) is said in
 * vramd's log, and that job is held by the interposer alone.
 *
 * Every job cgroup is recorded beside the state file (STATE.cgroups),
 * before vramd makes it: the next vramd removes those whose holder is gone
 * (Slurm's: only their limits cleared) and gives the others back to their
 * holders when they re-register.
 *
 * Who is put in a job's cgroup: only a process the kernel vouches for, and
 * never one of another user's at a user's word. For a user's own job, its
 * holder, the peer of the connection (SO_PEERCRED, its start time
 * checked). For a job root registered, the process that asks with PLACE
 * on a connection of its own, as root: a task, before it execs the user's
 * program.
 *
 * All of it runs on vramd's loop, at grants and releases: nothing polls.
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
 * 0..ngpus-1), says it, and removes the job cgroups a vramd before this
 * one recorded (beside `state`, the state file; NULL or "": none) whose
 * holder is gone. 0. */
int driver_limits_start(const struct driver_limits_nvml *nvml, int ngpus, const char *state);
/* "driver" or "interposer". */
const char *driver_limits_backend(void);

/* A grant of job c on dev (c->use[dev].grant, just granted): for a
 * user's job, its cgroup made and its holder moved in; the limits set
 * where the job has its cgroup.
 * Marks c->use[dev].by_driver where the driver holds it. Nothing for a
 * client that is not a job, or under the interposer. */
void driver_limits_grant(struct ledger *l, struct ledger_client *c, int dev);
/* Before job c's grant on dev is given back: its limits there cleared. */
void driver_limits_release(struct ledger_client *c, int dev);
/* Before job c leaves the ledger (its holder gone, its held grant
 * expired): every limit cleared and a cgroup vramd made removed. Also for
 * a held grant of a vramd before this one, whose cgroup it recorded. */
void driver_limits_end(const struct ledger_client *c);
/* PLACE: the process pid (the peer, as the kernel said, started at
 * `start`), a task of job c (a job root registered). With `cgroup` (the
 * step's cgroup Slurm made, a path in the hierarchy as /proc/PID/cgroup
 * writes it, its last part step_<id>): pid must be in it or below it, and
 * the limits are set on it, nothing moved. Without: pid joins the job's
 * cgroup, made below the cgroup pid is in by the first task to ask, which
 * the others must share. 1 placed; 0 the job's grants are the
 * interposer's (nothing to do); -1 with why. */
int driver_limits_place(struct ledger *l, struct ledger_client *c, pid_t pid, uint64_t start,
                        const char *cgroup, char *why, size_t n);
/* Whether a removed job's cgroup is still there (a process of it still
 * exiting): then the timer calls driver_limits_tick, which tries again. */
bool driver_limits_pending(void);
void driver_limits_tick(void);
/* vramd stops: every job's limits cleared, every job cgroup vramd made
 * removed (Slurm's kept). */
void driver_limits_stop(void);

#endif
