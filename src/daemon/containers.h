/* containers: a container as one vramd job (issue 29).
 *
 * vram oci-hook, which the container runtime runs at a container's
 * creation (the CDI spec of vram cdi generate names it), says CONTAINER:
 * the container's id and name, its first process and the cgroup the
 * runtime made for it. vramd believes the kernel, not the message: the
 * process must be in that cgroup (/proc/PID/cgroup), and the cgroup's last
 * part must name the container's id; a user who is not root registers
 * only a container of their own (rootless podman: the process is theirs,
 * in a pid namespace of its own, and so is everything in its cgroup) and
 * is its owner, whatever the message says. The job is held by that
 * cgroup, never moved nor made: the hook exits at once, and the job is
 * kept for the cgroup's processes (job_keep.h) until none is left (an
 * inotify watch on its cgroup.events says so the moment it empties, a kill
 * -9 of the container included) or the hook says STOPPED at poststop.
 *
 * One budget for all the container's processes: vramd makes the job's
 * command state (a sealed memfd, as vram run makes one: src/command), its
 * device entries the job's grants, owned by the user the container's
 * processes run as, and hands it over (SCM_RIGHTS) to each process of the
 * container's cgroup that asks (STATE: the interposer with
 * VRAM_COMMAND=vramd, which the CDI spec sets, at its start). The process
 * then uses it as if vram run had made it, and names itself in
 * VRAM_COMMAND for its children, which find it as a vram run command's
 * processes do. After a restart of vramd the state is taken back from a
 * process of the container that holds it open (every governed process
 * does), or made again when none does (then nothing charges the old one).
 *
 * Everything here is the loop's; the cgroup's files are read where they
 * are needed (cgroups.h).
 */
#ifndef VRAM_CONTAINERS_H
#define VRAM_CONTAINERS_H

#include "../ledger/ledger.h"
#include "cgroups.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* A registration as the hook sent it, before vramd believes it. */
struct container_claim {
    const char *id, *name; /* the runtime's id; the name podman ps shows */
    pid_t pid;             /* the container's first process, as vramd sees it */
    const char *cgroup;    /* as /proc/PID/cgroup writes it */
};

/* Checks a claim against the kernel, for a sender of uid `uid` (root's
 * word is taken for who owns it; anyone else's claim must be a container
 * of their own): 0 with the cgroup's directory in dir (on the cgroup2
 * mount) and the process's start time, or -1 with why. */
int containers_check(const struct container_claim *k, uid_t uid, char *dir, size_t n,
                     uint64_t *start, char *why, size_t whylen);
/* The job name of a container: NAME@ID's first 12 characters (NAME alone
 * when it is those 12), as vram top shows it. */
void containers_job_name(const char *id, const char *name, char *out, size_t n);

/* The job registered for container `id`, or NULL. */
struct ledger_client *containers_find(const struct ledger *l, const char *id);
/* Job c is container `id`, held by the cgroup at `dir`; its command state
 * is to be owned by `as` (the user its processes run as). 0, or -1 (out of
 * memory, or the cgroup is another job's already: why). */
int containers_add(const struct ledger_client *c, const char *id, const char *dir, uid_t as,
                   char *why, size_t n);
/* The cgroup's directory of container job c, or NULL if c is none. */
const char *containers_cgroup(const struct ledger_client *c);
/* Job c's grant of `bytes` on device `uuid` (GPU index `index`) goes
 * into its command state (made at the first, with its owner): 0, or -1
 * with why. Sets c->state_dev and c->state_ino. */
int containers_grant(struct ledger_client *c, const char *uuid, int index, uint64_t bytes,
                     char *why, size_t n);
/* STATE: the container job whose cgroup process pid (started at `start`)
 * is in, at or below; NULL (and why) if none. Its state's descriptor in
 * *fd (vramd's own: the caller sends it and keeps it), or -1 if it has
 * none and could not make one (why). */
struct ledger_client *containers_of_process(const struct ledger *l, pid_t pid, uint64_t start,
                                            int *fd, char *why, size_t n);
/* Job c leaves: its state closed, its watch removed, forgotten. */
void containers_end(const struct ledger_client *c);

/* On the timer, every CONTAINERS_REPORT_MS while there are containers:
 * what each container's processes hold, read from its command state (its
 * live slots; nothing in it is written), as a vram run job's holder
 * reports its command's (REPORT). */
#define CONTAINERS_REPORT_MS 500
void containers_report(struct ledger *l, uint64_t now);

/* The inotify descriptor the loop watches (-1: none could be made), and
 * what it calls when it is readable: each kept container job whose cgroup
 * has emptied (or gone) is handed to `over`. */
int containers_fd(void);
void containers_take(struct ledger *l, void (*over)(struct ledger_client *c));

/* The state file: one line per container job,
 *   k j|c HOLDER-PID HOLDER-START UID JOB AS ID DIR
 * beside the job's grant lines, so that a vramd after this one keeps the
 * job for its cgroup. containers_read_line takes one (after the held
 * grants are loaded): 0, or -1 if it cannot be read. */
void containers_fill_state(const struct ledger *l, FILE *f);
int containers_read_line(struct ledger *l, const char *line);

#endif
