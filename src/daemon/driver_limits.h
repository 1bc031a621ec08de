/* driver_limits: the driver's own per-cgroup memory limits for vramd's job
 * grants, where NVML offers them (nvmlDeviceSetMemoryLimits_v1 and
 * nvmlDeviceGetMemoryLimits_v1, driver R615: src/cuda/nvml_limits.h).
 *
 * The backend is "driver" when NVML exports both functions and a Get on
 * the first GPU answers anything but FUNCTION_NOT_FOUND or NOT_SUPPORTED,
 * vramd runs as root, and the root of vram's job cgroups (--cgroup-root,
 * default <the cgroup2 mount>/vram) is a directory of the cgroup2
 * hierarchy vramd can make cgroups in. Otherwise it is "interposer" and
 * nothing here acts: every grant is held by the interposer alone, as
 * before. vramd says which, once, when it starts.
 *
 * Under the driver, a job (a `vram run` command, a Slurm step: a client of
 * role JOB) gets a cgroup of its own, ROOT/job-PID-START (its holder's pid
 * and start time, so that a holder re-registering with a vramd that
 * restarted finds its cgroup again), made at its first grant. Each grant
 * on a GPU sets the cgroup's limits there (soft: what the policy
 * guarantees the job, hard: the grant) and marks the grant as the
 * driver's (ledger_use.by_driver); a release clears them; the job's end
 * clears them all and removes the cgroup, moving what still runs in it
 * back where it came from first. The driver then counts every byte the
 * cgroup's processes hold on the GPU (contexts, modules, its own) against
 * the grant, whether or not they loaded the interposer.
 *
 * Who is put in a job's cgroup: only a process the kernel vouches for, and
 * never one of another user's at a user's word. For a user's own job
 * (vram run), its holder, the peer of the connection (SO_PEERCRED, its
 * start time checked), at the job's first grant: vram run has not started
 * the command yet, which inherits the cgroup. For a job root registered
 * (a Slurm step, held by slurmstepd, which stays where Slurm put it), the
 * process that asks with PLACE on a connection of its own, as root: a
 * task, before it execs the user's program.
 *
 * All of it runs on vramd's loop, at grants and releases: nothing polls.
 */
#ifndef VRAM_DRIVER_LIMITS_H
#define VRAM_DRIVER_LIMITS_H

#include "../cuda/nvml_abi.h"
#include "../ledger/ledger.h"

#include <stdbool.h>
#include <stddef.h>

/* --cgroup-root: an absolute path, or "off" (the interposer holds every
 * grant). 0, or -1 with the reason (the accepted forms) in err; whether
 * the place can be used is found at driver_limits_start. */
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
 * one left whose holder is gone. 0; -1 (the message said) when
 * --cgroup-root was given, NVML has the limits, and the place cannot be
 * used: vramd then stops rather than hold grants otherwise than asked. */
int driver_limits_start(const struct driver_limits_nvml *nvml, int ngpus);
/* "driver" or "interposer". */
const char *driver_limits_backend(void);

/* A grant of job c on dev (c->use[dev].grant, just granted): its cgroup
 * made (and, for a user's job, its holder moved in) and the limits set.
 * Marks c->use[dev].by_driver where the driver holds it. Nothing for a
 * client that is not a job, or under the interposer. */
void driver_limits_grant(struct ledger *l, struct ledger_client *c, int dev);
/* Before job c's grant on dev is given back: its limits there cleared. */
void driver_limits_release(struct ledger_client *c, int dev);
/* Before job c leaves the ledger (its holder gone, its held grant
 * expired): every limit cleared and its cgroup removed. Also for a held
 * grant of a vramd before this one, whose cgroup is found by name. */
void driver_limits_end(const struct ledger_client *c);
/* PLACE: the process pid (the peer, as the kernel said, started at
 * `start`) into the cgroup of job c. 1 placed; 0 the job's grants are
 * the interposer's (nothing to do); -1 with why. */
int driver_limits_place(const struct ledger_client *c, pid_t pid, uint64_t start, char *why,
                        size_t n);
/* Whether a removed job's cgroup is still there (a process of it still
 * exiting): then the timer calls driver_limits_tick, which tries again. */
bool driver_limits_pending(void);
void driver_limits_tick(void);
/* vramd stops: every job's limits cleared, every job cgroup removed, and
 * the root too if vramd made it. */
void driver_limits_stop(void);

#endif
