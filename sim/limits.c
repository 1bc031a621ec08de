#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "limits.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOCK_FILE "limits.lock"
#define PATH_LONGEST 1023 /* a nameSpace longer than this is refused */
#define FILE_LARGEST (LIMITS_MAX * (PATH_LONGEST + 96) + 4096)

struct entry {
    int dev;
    uint64_t cgroup, soft, hard;
    const char *path; /* to the end of its line */
    size_t path_len;
};

/* Whether the state directory is root's: in one of another user's, that
 * user could remove root's files, limits among them. */
static bool root_dir(int dir)
{
    struct stat st;
    return fstat(dir, &st) == 0 && st.st_uid == 0;
}

/* The limits file's contents, NUL-terminated (malloc'ed), if it counts:
 * root's regular file, writable by no one else, in root's directory. NULL
 * when there is none, which costs one failed openat. */
static char *read_file(int dir)
{
    int fd = openat(dir, LIMITS_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *text = NULL;
    if (root_dir(dir) && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
        !(st.st_mode & (S_IWGRP | S_IWOTH)) && st.st_size <= FILE_LARGEST &&
        (text = malloc((size_t)st.st_size + 1))) {
        ssize_t n = pread(fd, text, (size_t)st.st_size, 0);
        if (n < 0)
            n = 0;
        text[n] = 0;
    }
    close(fd);
    return text;
}

/* The next well-formed entry of text from *at; false at the end. Lines
 * that are not entries (comments, damage) are passed over. */
static bool next_entry(const char **at, struct entry *e)
{
    while (**at) {
        const char *line = *at;
        size_t len = strcspn(line, "\n");
        *at = line + len + (line[len] == '\n');
        char copy[PATH_LONGEST + 96]; /* sscanf on the line alone */
        int dev, used = 0;
        if (line[0] == '#' || len >= sizeof copy)
            continue;
        memcpy(copy, line, len);
        copy[len] = 0;
        if (sscanf(copy, "%d %" SCNu64 " %" SCNu64 " %" SCNu64 " %n", &dev, &e->cgroup, &e->soft,
                   &e->hard, &used) != 4 ||
            used == 0 || (size_t)used >= len || dev < 0 || dev >= SIM_MAX_DEVICES || line[used] != '/')
            continue;
        e->dev = dev;
        e->path = line + used;
        e->path_len = len - (size_t)used;
        return true;
    }
    return false;
}

static bool member(int64_t pid, const void *arg)
{
    const struct limits_member *m = arg;
    return cg_contains(m->view, (long)pid, m->cgroup);
}

/* ------------------------------------------------------------- writing */

/* Writers take turns on root's lock file. Another user cannot open it (it
 * is 0600), so cannot hold it; one they made under its name is removed
 * (root may, in the sticky directory) and made again. */
static int take_lock(int dir)
{
    for (int tries = 0; tries < 3; tries++) {
        int fd = openat(dir, LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                        0600);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
            !(st.st_mode & 077)) {
            struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
            if (fcntl(fd, F_OFD_SETLKW, &fl) == 0)
                return fd;
            close(fd);
            return -1;
        }
        if (fd >= 0)
            close(fd);
        unlinkat(dir, LOCK_FILE, 0);
    }
    return -1;
}

/* Replaces the limits file by `text` (removes it when there is no entry). */
static bool replace_file(int dir, const char *text, size_t len, int entries)
{
    if (entries == 0)
        return unlinkat(dir, LIMITS_FILE, 0) == 0 || errno == ENOENT;
    char name[64];
    int fd = -1;
    for (int tries = 0; tries < 8 && fd < 0; tries++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        snprintf(name, sizeof name, "%s.new-%d-%lx", LIMITS_FILE, (int)getpid(),
                 (unsigned long)ts.tv_nsec ^ (unsigned long)tries);
        fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0)
        return false;
    bool ok = fchmod(fd, 0644) == 0 && write(fd, text, len) == (ssize_t)len;
    ok = close(fd) == 0 && ok;
    if (ok && renameat(dir, name, dir, LIMITS_FILE) == 0)
        return true;
    unlinkat(dir, name, 0);
    return false;
}

/* The nameSpace a caller gave: the cgroup's id, or why not. */
static enum limits_result resolve(const char *path, uint64_t *id)
{
    if (!path || path[0] != '/' || strlen(path) > PATH_LONGEST || strchr(path, '\n'))
        return LIMITS_NOT_CGROUP;
    switch (cg_id_of_path(path, id)) {
    case CG_FOUND: return LIMITS_OK;
    case CG_MISSING: return LIMITS_MISSING;
    default: return LIMITS_NOT_CGROUP;
    }
}

/* ... and the state directory, for Set and Get. */
static enum limits_result resolve_in(const char *path, uint64_t *id, int *dir)
{
    enum limits_result rc = resolve(path, id);
    if (rc == LIMITS_OK && (*dir = occ_dir()) < 0)
        rc = LIMITS_IO;
    return rc;
}

enum limits_result limits_set(int dev, const char *path, uint64_t soft, uint64_t hard)
{
    uint64_t id;
    int dir;
    enum limits_result rc = resolve_in(path, &id, &dir);
    if (rc != LIMITS_OK)
        return rc;
    if (!root_dir(dir)) {
        fprintf(stderr, "vram-sim: the state directory (VRAM_SIM_DIR) belongs to a user other "
                        "than root, who could remove the limits; they need one of root's\n");
        return LIMITS_IO;
    }
    int lock = take_lock(dir);
    if (lock < 0) {
        fprintf(stderr, "vram-sim: cannot lock %s in the state directory (VRAM_SIM_DIR): %s\n",
                LOCK_FILE, strerror(errno));
        return LIMITS_IO;
    }
    char *old = read_file(dir), *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    int entries = 0;
    if (out) {
        fprintf(out, "# vram-sim: NVML's per-cgroup memory limits (nvmlDeviceSetMemoryLimits_v1)\n"
                     "# device cgroup-id soft-bytes hard-bytes namespace\n");
        struct entry e;
        for (const char *at = old ? old : ""; next_entry(&at, &e);) {
            char was[PATH_LONGEST + 1];
            snprintf(was, sizeof was, "%.*s", (int)e.path_len, e.path);
            /* A limit goes with its cgroup: dropped when that is known to be gone. */
            if ((e.dev == dev && e.cgroup == id) || cg_gone(was, e.cgroup))
                continue;
            fprintf(out, "%d %" PRIu64 " %" PRIu64 " %" PRIu64 " %s\n", e.dev, e.cgroup, e.soft,
                    e.hard, was);
            entries++;
        }
        if (soft != 0 || hard != LIMITS_NONE) {
            fprintf(out, "%d %" PRIu64 " %" PRIu64 " %" PRIu64 " %s\n", dev, id, soft, hard, path);
            entries++;
        }
    }
    if (!out || fclose(out) != 0)
        rc = LIMITS_IO;
    else if (entries > LIMITS_MAX)
        rc = LIMITS_FULL;
    else if (!replace_file(dir, text, len, entries))
        rc = LIMITS_IO;
    if (rc == LIMITS_IO)
        fprintf(stderr, "vram-sim: cannot write %s in the state directory (VRAM_SIM_DIR): %s\n",
                LIMITS_FILE, strerror(errno));
    free(text);
    free(old);
    close(lock);
    return rc;
}

/* ------------------------------------------------------------- reading */

enum limits_result limits_get(int dev, const char *path, uint64_t *soft, uint64_t *hard,
                              uint64_t *used)
{
    uint64_t id;
    int dir;
    enum limits_result rc = resolve_in(path, &id, &dir);
    if (rc != LIMITS_OK)
        return rc;
    *soft = 0;
    *hard = LIMITS_NONE;
    char *text = read_file(dir);
    struct entry e;
    for (const char *at = text ? text : ""; next_entry(&at, &e);)
        if (e.dev == dev && e.cgroup == id)
            *soft = e.soft, *hard = e.hard;
    free(text);
    struct limits_member m = {.cgroup = id};
    struct cg_view view;
    m.view = &view;
    *used = cg_view_open(&view) ? occ_used_by(dev, member, &m) : 0;
    return LIMITS_OK;
}

void limits_of_self(int dev, struct limits_self *self)
{
    self->n = 0;
    int dir = occ_dir();
    char *text = dir >= 0 ? read_file(dir) : NULL;
    if (!text)
        return;
    struct entry e;
    bool any = false; /* on this device: only then is this process's cgroup read */
    for (const char *at = text; !any && next_entry(&at, &e);)
        any = e.dev == dev && e.hard != LIMITS_NONE;
    uint64_t chain[CG_MAX_DEPTH];
    int depth = any && cg_view_open(&self->view) ? cg_chain(&self->view, 0, chain, CG_MAX_DEPTH) : 0;
    for (const char *at = text; depth && self->n < LIMITS_NESTED && next_entry(&at, &e);) {
        if (e.dev != dev || e.hard == LIMITS_NONE)
            continue;
        for (int i = 0; i < depth; i++)
            if (chain[i] == e.cgroup) {
                int n = self->n++;
                self->member[n] = (struct limits_member){&self->view, e.cgroup};
                self->group[n] = (struct occ_group){e.hard, member, &self->member[n]};
                break;
            }
    }
    free(text);
}

bool limits_view(int dev, uint64_t *total, uint64_t *used)
{
    struct limits_self self;
    limits_of_self(dev, &self);
    uint64_t least_left = UINT64_MAX;
    for (int i = 0; i < self.n; i++) {
        uint64_t held = occ_used_by(dev, member, &self.member[i]), hard = self.group[i].limit;
        uint64_t left = held < hard ? hard - held : 0;
        if (left < least_left || i == 0) {
            least_left = left;
            *total = hard;
            *used = held;
        }
    }
    return self.n > 0;
}
