/* cgroup: which cgroup (v2) a process is in, for the per-cgroup memory
 * limits of the simulated R615 driver (limits.c).
 *
 * A cgroup is known by its id: the inode number of its directory on a
 * cgroup2 mount. Every cgroup2 mount of a machine shows the one hierarchy
 * with the same inodes (a private `mount -t cgroup2` shows the ids that
 * /sys/fs/cgroup/unified shows), so an id one process writes down means the
 * same cgroup to every other process whatever its mounts, and a cgroup
 * removed and made again under the same name has another id.
 *
 * A process's cgroup is the "0::" line of /proc/PID/cgroup: a path in the
 * hierarchy as the reader's cgroup namespace sees it, as is the root field
 * of a cgroup2 mount in /proc/self/mountinfo; the cgroup's directory is the
 * mount point joined with what follows the mount's root. Nothing is cached:
 * processes move between cgroups, and mounts come and go.
 */
#ifndef VRAM_SIM_CGROUP_H
#define VRAM_SIM_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The cgroup2 mount this process reads the hierarchy through. */
struct cg_view {
    char mount[1024]; /* its mount point */
    char root[1024];  /* the cgroup it shows at its mount point */
    dev_t dev;
};

/* Finds a cgroup2 mount in this process's mount namespace (preferring one
 * of the whole hierarchy); false when there is none. */
bool cg_view_open(struct cg_view *v);

/* What `path` names, for nvmlDeviceSetMemoryLimits_v1's nameSpace:
 * CG_FOUND with the cgroup's id, CG_MISSING when nothing is there, or
 * CG_NOT_CGROUP when it is not a directory of a cgroup2 mount. */
enum cg_lookup { CG_FOUND, CG_MISSING, CG_NOT_CGROUP };
enum cg_lookup cg_id_of_path(const char *path, uint64_t *id);

/* Whether a cgroup written down with `id` at `path` is known to be gone:
 * the path is in this process's view of the hierarchy (its parent is a
 * cgroup2 directory) and holds nothing or another cgroup. A path this
 * process cannot see (another mount namespace's) is not known gone. */
bool cg_gone(const char *path, uint64_t id);

/* The ids of the cgroup of process `pid` (0: this process) and of its
 * ancestors as far as the view shows them, innermost first: how many (at
 * most max), 0 when that is not known (no such process, a cgroup outside
 * the view). */
#define CG_MAX_DEPTH 64
int cg_chain(const struct cg_view *v, long pid, uint64_t *ids, int max);

/* Whether process `pid` (0: this process) is in cgroup `id` or below it. */
bool cg_contains(const struct cg_view *v, long pid, uint64_t id);

#endif
