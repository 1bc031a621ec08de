/* limits: NVML's per-cgroup device-memory limits (driver R615,
 * nvmlDeviceSetMemoryLimits_v1) as state of the simulated machine, which
 * the simulated NVML sets and reads and the simulated driver enforces.
 *
 * They live beside the occupancy records (occupancy.h's rules for
 * VRAM_SIM_DIR) in one text file, `limits`, that counts only while it is a
 * regular file owned by root and writable by no one else, in a directory
 * of root's: in that sticky directory no other user can replace or remove
 * it, and a file another user makes under that name is ignored. Root replaces it whole (a new file
 * renamed over it: a process killed at any instruction leaves the old one
 * or the new one, at worst with a stray `limits.new-*` beside it), with
 * writers taking turns on `limits.lock` (root's, 0600, so no one else can
 * hold it); with no limit left the file is removed, and a charge then
 * costs one fstatat. Its lines:
 *
 *   # comments
 *   DEVICE CGROUP-ID SOFT HARD NAMESPACE
 *
 * in decimal, one space apart: DEVICE the NVML index (the physical
 * device), CGROUP-ID the inode number of the cgroup's directory (cgroup.h:
 * the same on every cgroup2 mount, never reused), SOFT and HARD in bytes
 * (HARD 18446744073709551615 = NVML_DEVICE_MEMORY_LIMIT_MAX: no hard limit),
 * NAMESPACE the path the caller gave, to the end of the line. A limit
 * belongs to its cgroup id: a cgroup removed takes its limit with it, even
 * if one is made again at the same path.
 *
 * The hard limit bounds every byte the live processes of the cgroup and
 * its descendants hold on the device (occupancy.h's records, each process's
 * cgroup read from /proc/PID/cgroup), checked on every charge of the
 * driver. The soft limit is kept and answered, not enforced: what the
 * driver does to a cgroup above it under pressure is not modelled.
 */
#ifndef VRAM_SIM_LIMITS_H
#define VRAM_SIM_LIMITS_H

#include "cgroup.h"
#include "occupancy.h"

#include <stdint.h>

#define LIMITS_FILE "limits"
#define LIMITS_NONE UINT64_MAX /* a hard limit of none */
#define LIMITS_MAX 256         /* entries in the file */
#define LIMITS_NESTED 8        /* limited cgroups one process can be in */

enum limits_result {
    LIMITS_OK,
    LIMITS_MISSING,    /* no cgroup at that path */
    LIMITS_NOT_CGROUP, /* not a directory of a cgroup2 mount, or not a path */
    LIMITS_FULL,       /* LIMITS_MAX entries already */
    LIMITS_IO,         /* the state could not be read or written (printed) */
};

/* Sets the limits of the cgroup at `path` on physical device `dev`
 * (soft 0 and hard LIMITS_NONE: clears them). For root only: the caller
 * checks. */
enum limits_result limits_set(int dev, const char *path, uint64_t soft, uint64_t hard);
/* The limits of the cgroup at `path` on `dev` (soft 0, hard LIMITS_NONE
 * when it has none) and what its processes hold there now. */
enum limits_result limits_get(int dev, const char *path, uint64_t *soft, uint64_t *hard,
                              uint64_t *used);

/* The hard limits that bound this process on `dev`: occ_charge's groups,
 * valid while *self is. */
struct limits_self {
    int n;
    struct occ_group group[LIMITS_NESTED];
    struct limits_member {
        const struct cg_view *view;
        uint64_t cgroup;
    } member[LIMITS_NESTED];
    struct cg_view view;
};
void limits_of_self(int dev, struct limits_self *self);

/* What this process is shown of device `dev` inside its cgroup's limit
 * (cuMemGetInfo, nvmlDeviceGetMemoryInfo*): false when no hard limit bounds
 * it; else the tightest one (the least left) as *total and what its cgroup
 * holds as *used. */
bool limits_view(int dev, uint64_t *total, uint64_t *used);

#endif
