#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

static bool on_cgroup2(const char *path)
{
    struct statfs fs;
    return statfs(path, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static bool unescape(const char *in, size_t len, char *out, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (c == '\\' && i + 3 < len && in[i + 1] >= '0' && in[i + 1] <= '3') {
            c = (char)((in[i + 1] - '0') << 6 | (in[i + 2] - '0') << 3 | (in[i + 3] - '0'));
            i += 3;
        }
        if (n + 1 >= size)
            return false;
        out[n++] = c;
    }
    out[n] = 0;
    return true;
}

/* The n-th space-separated field of line (0-based), as a pointer and length. */
static bool field(const char *line, int n, const char **start, size_t *len)
{
    const char *p = line;
    for (int i = 0; i < n; i++) {
        p = strchr(p, ' ');
        if (!p)
            return false;
        p++;
    }
    *start = p;
    *len = strcspn(p, " \n");
    return true;
}

bool cg_view_open(struct cg_view *v)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return false;
    char line[4096];
    bool found = false, whole_line = true;
    while (fgets(line, sizeof line, f)) {
        bool starts = whole_line; /* not the rest of a line longer than the buffer */
        whole_line = strchr(line, '\n') != NULL;
        if (!starts)
            continue;
        const char *sep = strstr(line, " - "), *root, *point;
        size_t root_len, point_len;
        struct cg_view c;
        struct stat st;
        if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0 || !field(line, 3, &root, &root_len) ||
            !field(line, 4, &point, &point_len) ||
            !unescape(root, root_len, c.root, sizeof c.root) ||
            !unescape(point, point_len, c.mount, sizeof c.mount) || stat(c.mount, &st) != 0 ||
            !on_cgroup2(c.mount))
            continue;
        c.dev = st.st_dev;
        bool whole = strcmp(c.root, "/") == 0;
        if (!found || whole)
            *v = c, found = true;
        if (whole)
            break;
    }
    fclose(f);
    return found;
}

enum cg_lookup cg_id_of_path(const char *path, uint64_t *id)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return errno == ENOENT || errno == ENOTDIR ? CG_MISSING : CG_NOT_CGROUP;
    if (!S_ISDIR(st.st_mode) || !on_cgroup2(path))
        return CG_NOT_CGROUP;
    *id = st.st_ino;
    return CG_FOUND;
}

bool cg_gone(const char *path, uint64_t id)
{
    struct stat st;
    if (stat(path, &st) == 0)
        return on_cgroup2(path) && st.st_ino != id;
    if (errno != ENOENT)
        return false;
    char parent[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path || (size_t)(slash - path) >= sizeof parent)
        return false;
    memcpy(parent, path, (size_t)(slash - path));
    parent[slash - path] = 0;
    return on_cgroup2(parent);
}

/* The "0::" path of /proc/PID/cgroup into out. */
static bool hierarchy_path(long pid, char *out, size_t size)
{
    char file[64], text[8192];
    if (pid)
        snprintf(file, sizeof file, "/proc/%ld/cgroup", pid);
    else
        snprintf(file, sizeof file, "/proc/self/cgroup");
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return false;
    text[n] = 0;
    const char *line = strncmp(text, "0::", 3) == 0 ? text : strstr(text, "\n0::");
    if (!line)
        return false;
    line += line == text ? 3 : 4;
    size_t len = strcspn(line, "\n");
    /* A cgroup removed while the process was in it: the process is in none. */
    static const char deleted[] = " (deleted)";
    if (len >= sizeof deleted - 1 &&
        memcmp(line + len - (sizeof deleted - 1), deleted, sizeof deleted - 1) == 0)
        return false;
    if (len == 0 || len >= size || line[0] != '/')
        return false;
    memcpy(out, line, len);
    out[len] = 0;
    return true;
}

int cg_chain(const struct cg_view *v, long pid, uint64_t *ids, int max)
{
    char in_hierarchy[PATH_MAX], dir[PATH_MAX];
    if (max <= 0 || !hierarchy_path(pid, in_hierarchy, sizeof in_hierarchy))
        return 0;
    /* Below the mount's root: the rest of the path after it. */
    const char *rest = in_hierarchy;
    if (strcmp(v->root, "/") != 0) {
        size_t r = strlen(v->root);
        if (strncmp(in_hierarchy, v->root, r) != 0 || (in_hierarchy[r] && in_hierarchy[r] != '/'))
            return 0;
        rest = in_hierarchy + r;
    } else if (strcmp(in_hierarchy, "/") == 0) {
        rest = "";
    }
    size_t m = strlen(v->mount);
    if (snprintf(dir, sizeof dir, "%s%s", v->mount, rest) >= (int)sizeof dir)
        return 0;
    int n = 0;
    for (size_t len = strlen(dir);;) {
        struct stat st;
        if (stat(dir, &st) != 0 || st.st_dev != v->dev)
            return 0; /* moved or removed meanwhile, or not the view's hierarchy */
        ids[n++] = st.st_ino;
        if (len <= m || n == max)
            break;
        char *slash = strrchr(dir, '/');
        len = slash && (size_t)(slash - dir) > m ? (size_t)(slash - dir) : m;
        dir[len] = 0;
    }
    return n;
}

bool cg_contains(const struct cg_view *v, long pid, uint64_t id)
{
    uint64_t ids[CG_MAX_DEPTH];
    int n = cg_chain(v, pid, ids, CG_MAX_DEPTH);
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}
