/* cgroups: the cgroup2 hierarchy's files, for job cgroups (cgroups.h). */
#include "cgroups.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char mount_point[CG_PATH_LEN];

const char *cg_mount(void) { return mount_point; }

/* The mount from mountinfo: a mount of the whole hierarchy (root "/"),
 * since cg_of() joins the mount point with the paths /proc/PID/cgroup
 * gives from the hierarchy's root. (sim/cgroup.c reads the same file for
 * the simulated driver, which also follows subtree mounts: the two are
 * separate programs' views and not shared yet.) */
int cg_init(void)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char line[4096];
    int found = -1;
    while (found != 0 && fgets(line, sizeof line, f)) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE ... */
        char *sep = strstr(line, " - ");
        char root[8], point[CG_PATH_LEN], type[64];
        if (!sep || sscanf(line, "%*s %*s %*s %7s %511s", root, point) != 2 ||
            strcmp(root, "/") != 0 || sscanf(sep + 3, "%63s", type) != 1 ||
            strcmp(type, "cgroup2") != 0)
            continue;
        /* mountinfo writes a space, tab, newline or backslash as \ooo. */
        size_t k = 0;
        for (const char *p = point; *p && k + 1 < sizeof mount_point; k++) {
            if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
                mount_point[k] = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
                p += 4;
            } else {
                mount_point[k] = *p++;
            }
        }
        mount_point[k] = 0;
        found = 0;
    }
    fclose(f);
    return found;
}

bool cg_is_cgroup(const char *path)
{
    char f[CG_PATH_LEN + 32];
    snprintf(f, sizeof f, "%s/cgroup.procs", path);
    struct stat st;
    return stat(f, &st) == 0 && S_ISREG(st.st_mode);
}

bool cg_hierarchy_path_ok(const char *p)
{
    if (p[0] != '/')
        return false;
    if (!p[1])
        return true;
    for (const char *part = p + 1;;) {
        size_t len = strcspn(part, "/");
        if (len == 0 || (len == 1 && part[0] == '.') || (len == 2 && !strncmp(part, "..", 2)))
            return false;
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)part[i] < 0x20 || part[i] == 0x7f)
                return false;
        if (!part[len])
            return true;
        part += len + 1;
    }
}

int cg_of(pid_t pid, char *out, size_t n)
{
    char p[64], line[CG_PATH_LEN];
    snprintf(p, sizeof p, "/proc/%d/cgroup", (int)pid);
    FILE *f = fopen(p, "re");
    if (!f)
        return -1;
    int rc = -1;
    while (rc != 0 && fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::/", 4) != 0)
            continue;
        /* Cut short, it would name an ancestor: a job made there would
         * leave the cgroup its process is in. */
        if (!strchr(line, '\n'))
            break;
        line[strcspn(line, "\n")] = 0;
        if (!cg_hierarchy_path_ok(line + 3))
            break;
        int len = snprintf(out, n, "%s%s", mount_point, strcmp(line + 3, "/") ? line + 3 : "");
        rc = len >= 0 && (size_t)len < n ? 0 : -1;
    }
    fclose(f);
    return rc;
}

bool cg_at_or_below(const char *inner, const char *outer)
{
    size_t m = strlen(outer);
    return strncmp(inner, outer, m) == 0 && (inner[m] == 0 || inner[m] == '/');
}

void cg_parent(const char *path, char *out, size_t n)
{
    snprintf(out, n, "%s", path);
    char *slash = strrchr(out, '/');
    if (slash && strlen(out) > strlen(mount_point))
        *slash = 0;
}

int cg_move(const char *dir, pid_t pid)
{
    char f[CG_PATH_LEN + 32], num[24];
    snprintf(f, sizeof f, "%s/cgroup.procs", dir);
    int fd = open(f, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int len = snprintf(num, sizeof num, "%d", (int)pid);
    int rc = write(fd, num, (size_t)len) == len ? 0 : errno;
    close(fd);
    return rc;
}

void cg_move_out(const char *path)
{
    char parent[CG_PATH_LEN], f[CG_PATH_LEN + 32];
    cg_parent(path, parent, sizeof parent);
    snprintf(f, sizeof f, "%s/cgroup.procs", path);
    /* A process may fork while its siblings are moved: a few passes. */
    for (int pass = 0; pass < 8; pass++) {
        FILE *in = fopen(f, "re");
        if (!in)
            return;
        int pid, moved = 0;
        while (fscanf(in, "%d", &pid) == 1)
            moved += cg_move(parent, pid) == 0;
        fclose(in);
        if (!moved)
            return;
    }
}

int cg_procs(const char *path, pid_t *out, int max)
{
    char f[CG_PATH_LEN + 32];
    snprintf(f, sizeof f, "%s/cgroup.procs", path);
    FILE *in = fopen(f, "re");
    if (!in)
        return -1;
    int pid, n = 0;
    while (fscanf(in, "%d", &pid) == 1) {
        if (n < max)
            out[n] = pid;
        n++;
    }
    fclose(in);
    return n;
}

/* Whether the user may write the file: its owner with the owner's write
 * bit, its group (the user's, or one of theirs) with the group's, or
 * anyone with the others'. */
static bool writable_by(const struct stat *st, uid_t uid, gid_t gid, const gid_t *groups,
                        int ngroups)
{
    if (st->st_uid == uid)
        return st->st_mode & S_IWUSR;
    bool member = st->st_gid == gid;
    for (int i = 0; i < ngroups && !member; i++)
        member = groups[i] == st->st_gid;
    if (member)
        return st->st_mode & S_IWGRP;
    return st->st_mode & S_IWOTH;
}

bool cg_user_may_move(const char *path, uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
                      char *which, size_t n)
{
    /* Root may clear the driver's limits anyway: no cgroup keeps it in. */
    if (uid == 0)
        return false;
    char at[CG_PATH_LEN];
    snprintf(at, sizeof at, "%s", path);
    for (;;) {
        char f[CG_PATH_LEN + 32];
        struct stat st;
        snprintf(f, sizeof f, "%s/cgroup.procs", at);
        /* One that cannot be read is not known to be safe. */
        if (stat(f, &st) != 0 || writable_by(&st, uid, gid, groups, ngroups)) {
            snprintf(which, n, "%s", at);
            return true;
        }
        char up[CG_PATH_LEN];
        cg_parent(at, up, sizeof up);
        if (strcmp(up, at) == 0)
            return false;
        snprintf(at, sizeof at, "%s", up);
    }
}
