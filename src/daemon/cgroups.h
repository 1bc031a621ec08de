/* cgroups: the cgroup2 hierarchy, as vramd uses it for job cgroups
 * (driver_limits.h): where it is mounted, which cgroup a process is in, a
 * process moved, a cgroup's processes read, whether a user may move
 * processes out of a cgroup. Files of the hierarchy only, no state but the
 * mount point (found once, before any other call): safe on any thread
 * (driver_work.c's and the loop).
 *
 * A cgroup is named here by its directory on the mount ("/sys/fs/cgroup/
 * a/b"); /proc/PID/cgroup and the Slurm plugin name it by its path in the
 * hierarchy ("/a/b"). */
#ifndef VRAM_CGROUPS_H
#define VRAM_CGROUPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CG_PATH_LEN 512

/* Finds the mount of the whole cgroup2 hierarchy (root "/"; a bind mount
 * of a subtree would misplace every path /proc/PID/cgroup gives): 0, or -1
 * if there is none. */
int cg_init(void);
/* The mount point ("" before cg_init found one). */
const char *cg_mount(void);

/* Whether `path` is a cgroup (it has cgroup.procs). */
bool cg_is_cgroup(const char *path);
/* A path in the hierarchy as /proc/PID/cgroup writes it ("/a/b"): no
 * empty, . or .. part, nothing but printable characters. */
bool cg_hierarchy_path_ok(const char *p);
/* The cgroup a process is in, as a directory of the mount: 0, or -1 if it
 * is gone or not in this hierarchy (or its line was cut short). */
int cg_of(pid_t pid, char *out, size_t n);
/* Whether cgroup `inner` is `outer` or below it. */
bool cg_at_or_below(const char *inner, const char *outer);
/* The cgroup above `path` (the mount's root has none: itself). */
void cg_parent(const char *path, char *out, size_t n);

/* Moves a process into the cgroup `dir`: 0, or an errno. */
int cg_move(const char *dir, pid_t pid);
/* What runs in the cgroup `path` moved to the cgroup above it, where it
 * came from: never anywhere else, which would take it out of what that
 * cgroup and its ancestors hold it to. A process that is exiting cannot be
 * moved (the kernel passes it over) and keeps the cgroup busy until it is
 * gone. */
void cg_move_out(const char *path);
/* The processes in the cgroup `path` (cgroup.procs), at most max of them
 * in out: how many there are (more than max: only max read), or -1 if it
 * cannot be read (gone). */
int cg_procs(const char *path, pid_t *out, int max);

/* Whether a user (uid, gid, its supplementary groups) may write the
 * cgroup.procs of `path` or of a cgroup above it, up to the mount's root:
 * then the user could move a process out of any cgroup made below `path`
 * (cgroup v2 lets whoever may write the cgroup.procs of the source's and
 * the destination's common ancestor move it), as in a cgroup systemd
 * delegated to the user (user@UID.service, systemd-run --user). The first
 * such cgroup in `which`. Never for root, which may clear the driver's
 * limits anyway. */
bool cg_user_may_move(const char *path, uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
                      char *which, size_t n);

#endif
