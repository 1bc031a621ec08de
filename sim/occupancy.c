#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "occupancy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char MAGIC[8] = OCC_RECORD_MAGIC;

/* An unlocked record younger than this may be one being set up by a system
 * without O_TMPFILE (see open_record): it is left alone until then. */
#define GRACE_SECONDS 2
/* The longest a charge waits for charges announced before it to be decided. */
#define WAIT_AHEAD_NS 200000000u

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* threads of this process */
static char dir[512];
static int dir_fd = -1;
static int own_fd = -1;
static char own_name[64];
static struct occ_record own;

static void remove_own_record(void)
{
    if (own_fd >= 0 && own.pid == getpid())
        unlinkat(dir_fd, own_name, 0);
}

/* Whose directory may hold our state: ours or root's; and if others may
 * write in it, only with the sticky bit (so they cannot remove our files).
 * A sticky directory's owner may still remove anything in it, so it must
 * be someone we trust. */
static int check_dir(const struct stat *st)
{
    if (!S_ISDIR(st->st_mode)) {
        fprintf(stderr, "vram-sim: state directory %s (VRAM_SIM_DIR) is not a directory\n", dir);
        return -1;
    }
    if (st->st_uid != getuid() && st->st_uid != 0) {
        fprintf(stderr, "vram-sim: state directory %s (VRAM_SIM_DIR) belongs to user %u, who "
                        "could remove any process's record in it; it must belong to root (mode "
                        "1777, like /tmp) or to you\n",
                dir, (unsigned)st->st_uid);
        return -1;
    }
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX)) {
        fprintf(stderr, "vram-sim: state directory %s (VRAM_SIM_DIR) is writable by others "
                        "without the sticky bit; refusing to use it (chmod 1777 or 0755)\n",
                dir);
        return -1;
    }
    return 0;
}

/* The state directory: all that a process needs to read occupancy. Caller
 * holds `lock`. */
static int open_directory(void)
{
    if (dir_fd >= 0)
        return 0;
    const char *env = getenv("VRAM_SIM_DIR");
    snprintf(dir, sizeof dir, "%s", env && *env ? env : "/tmp/vram-sim");
    if (mkdir(dir, 01777) == 0)
        chmod(dir, 01777); /* mkdir applies the umask */
    else if (errno != EEXIST) {
        fprintf(stderr, "vram-sim: cannot create state directory %s (VRAM_SIM_DIR): %s\n", dir,
                strerror(errno));
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "vram-sim: state directory %s (VRAM_SIM_DIR): %s\n", dir,
                errno == ELOOP ? "is a symbolic link" : strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (check_dir(&st) != 0) {
        close(fd);
        return -1;
    }
    dir_fd = fd;
    return 0;
}

/* The inode of this process's pid namespace, 0 when /proc cannot say. */
static uint64_t pid_namespace(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static void new_name(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(own_name, sizeof own_name, "proc-%d-%llx-%lx", (int)getpid(),
             (unsigned long long)own.pidns,
             (unsigned long)(ts.tv_nsec ^ ((unsigned long)ts.tv_sec << 20)));
}

/* ... and this process's own record, for a process that holds memory. It
 * is made unnamed (O_TMPFILE), locked and written, and only then given its
 * name: a process killed at any instruction before that leaves nothing. */
static int open_record(void)
{
    if (open_directory() != 0)
        return -1;
    memset(&own, 0, sizeof own);
    memcpy(own.magic, MAGIC, sizeof MAGIC);
    own.pid = getpid();
    own.pidns = pid_namespace();
    /* Liveness below OCC_PID_BYTE, the holder's pid at it (occupancy.h). */
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = OCC_PID_BYTE};
    struct flock pid_lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = OCC_PID_BYTE,
                             .l_len = 1};
    int fd = openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
    bool unnamed = fd >= 0;
    for (int tries = 0; tries < 8; tries++) {
        new_name();
        if (!unnamed) /* no O_TMPFILE here: named at once, locked at once */
            fd = openat(dir_fd, own_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0)
            break;
        if (fchmod(fd, 0644) != 0 || fcntl(fd, F_OFD_SETLK, &fl) != 0 ||
            fcntl(fd, F_SETLK, &pid_lock) != 0 || pwrite(fd, &own, sizeof own, 0) != sizeof own) {
            close(fd);
            fd = -1;
            break;
        }
        if (!unnamed)
            goto done;
        char self[64];
        snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
        if (linkat(AT_FDCWD, self, dir_fd, own_name, AT_SYMLINK_FOLLOW) == 0)
            goto done;
        if (errno != EEXIST) {
            close(fd);
            fd = -1;
            break;
        }
    }
    fprintf(stderr, "vram-sim: cannot create this process's record in %s (VRAM_SIM_DIR): %s\n",
            dir, strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
done:
    own_fd = fd;
    static int registered;
    if (!registered++)
        atexit(remove_own_record);
    return 0;
}

int occ_open(void)
{
    pthread_mutex_lock(&lock);
    int rc = own_fd >= 0 ? 0 : open_record();
    pthread_mutex_unlock(&lock);
    return rc;
}

/* The user a process runs as, or -1 when there is no such process. */
static long owner_of_pid(int64_t pid)
{
    if (pid <= 0 || pid > 0x3fffffff)
        return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%lld", (long long)pid);
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_uid : -1;
}

static uint64_t add_saturating(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* Records of this very process (made by another copy of this code: the
 * simulated CUDA's, read by the simulated NVML's), kept open once opened:
 * closing one would drop the classic lock its maker holds (occupancy.h). */
#define KEPT_MAX 4
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char name[64];
    int fd;
    int64_t pid; /* who kept it: a child after fork() keeps none of its parent's */
} kept[KEPT_MAX];

/* A fork() while another thread holds kept_lock must not leave the
 * child's copy of it held (in the simulated NVML too, which has no fork
 * handler of its own): the child makes it anew. It is not taken around
 * fork(): the interposer reads NVML while holding its own lock, which its
 * fork handler takes, and this handler, registered later, would take
 * kept_lock first, the other way round (a fork beside a context being made
 * could deadlock; ThreadSanitizer said so). The child keeps none of its
 * parent's records (each names its pid), so one half written at the fork
 * is only a slot to reuse. */
static void kept_after_fork_child(void) { pthread_mutex_init(&kept_lock, NULL); }
static void kept_at_first_use(void) { pthread_atfork(NULL, NULL, kept_after_fork_child); }

/* Whether `name` is a record of this process: proc-<pid>-<pidns>-... */
static bool names_this_process(const char *name, int64_t pid, uint64_t ns)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "proc-%lld-%llx-", (long long)pid, (unsigned long long)ns);
    return strncmp(name, prefix, strlen(prefix)) == 0;
}

/* A descriptor of record `name` to read (and release with put_record). */
static int get_record(int dirfd_, const char *name, bool mine)
{
    int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
    if (!mine)
        return openat(dirfd_, name, flags);
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, kept_at_first_use);
    int fd = -1;
    pthread_mutex_lock(&kept_lock);
    int64_t self = getpid();
    for (int i = 0; i < KEPT_MAX && fd < 0; i++)
        if (kept[i].pid == self && kept[i].fd >= 0 && strcmp(kept[i].name, name) == 0)
            fd = kept[i].fd;
    if (fd < 0 && (fd = openat(dirfd_, name, flags)) >= 0) {
        int slot = -1;
        for (int i = 0; i < KEPT_MAX && slot < 0; i++)
            if (kept[i].pid != self || kept[i].fd < 0)
                slot = i;
        if (slot >= 0) {
            /* A parent's, inherited: closing it here leaves the parent's locks. */
            if (kept[slot].pid != self && kept[slot].fd >= 0 && kept[slot].pid != 0)
                close(kept[slot].fd);
            size_t len = strnlen(name, sizeof kept[slot].name - 1);
            memcpy(kept[slot].name, name, len); /* own_name's length at most: never cut */
            kept[slot].name[len] = 0;
            kept[slot].fd = fd;
            kept[slot].pid = self;
        }
        /* With no slot free the descriptor is never closed either: a
         * descriptor leaks rather than the lock. */
    }
    pthread_mutex_unlock(&kept_lock);
    return fd;
}

static void put_record(int fd, bool mine)
{
    if (!mine)
        close(fd);
}

/* Old records of this process that are gone from the directory: closed. */
static void forget_kept(const char *name)
{
    pthread_mutex_lock(&kept_lock);
    for (int i = 0; i < KEPT_MAX; i++)
        if (kept[i].pid == getpid() && kept[i].fd >= 0 && strcmp(kept[i].name, name) == 0) {
            close(kept[i].fd);
            kept[i].fd = -1;
            kept[i].pid = 0;
        }
    pthread_mutex_unlock(&kept_lock);
}

/* The pid record r's holder has in this reader's pid namespace (`ns`),
 * read through fd: what the kernel says of the holder of the classic lock
 * (0: a process this reader cannot see), else the record's own word where
 * it can be taken (its holder is this process, or another process of this
 * namespace whose lock is not there to ask); -1 when nothing vouches for
 * the record. */
static int64_t holder_pid(int fd, const struct occ_record *r, uint64_t ns)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = OCC_PID_BYTE,
                       .l_len = 1};
    /* An OFD lock over the byte answers too, with l_pid -1: it names no one. */
    if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK && fl.l_pid >= 0)
        return fl.l_pid;
    return r->pidns == ns ? r->pid : -1;
}

/* Calls fn for every live record other than this copy's own, that is
 * trustworthy: a regular file of the right size, locked by a live owner,
 * naming a process of the user who owns the file (so no one can charge
 * their usage to someone else), with the pid it names replaced by the
 * holder's pid in this reader's pid namespace (0 for a holder this reader
 * cannot see, which fn still counts but cannot name). The liveness locks
 * are open-file-description locks (F_OFD_*): they belong to the record's
 * open file, not to the process, so opening and closing a record here
 * leaves them alone; the kernel drops them when the owner's last
 * descriptor goes, that is when the owner dies. (The classic lock naming
 * the holder is spared by never closing a record of this process.) Nothing
 * here can block: records are opened non-blocking and anything but a
 * regular file is passed over. */
static void each_live(void (*fn)(const struct occ_record *r, void *arg), void *arg)
{
    /* A description of its own: dup() would share dir_fd's offset, and two
     * threads listing at once (a charge and NVML's reader) would each skip
     * the records the other's readdir moved past. */
    int fd_dir = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd_dir >= 0 ? fdopendir(fd_dir) : NULL;
    if (!d) {
        if (fd_dir >= 0)
            close(fd_dir);
        return;
    }
    rewinddir(d);
    struct dirent *e;
    time_t now = time(NULL);
    int64_t self = getpid();
    uint64_t ns = pid_namespace();
    while ((e = readdir(d))) {
        bool record = strncmp(e->d_name, "proc-", 5) == 0;
        bool leftover = strncmp(e->d_name, ".new-proc-", 10) == 0; /* from older versions */
        if ((!record && !leftover) || strcmp(e->d_name, own_name) == 0)
            continue;
        bool mine = record && names_this_process(e->d_name, self, ns);
        int fd = get_record(dirfd(d), e->d_name, mine);
        if (fd < 0)
            continue;
        struct stat st;
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        struct occ_record r;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            put_record(fd, mine);
            continue;
        }
        if (fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK) {
            /* Its owner is gone: the memory came back when it died. */
            if ((st.st_uid == getuid() || getuid() == 0) && now - st.st_mtime >= GRACE_SECONDS)
                unlinkat(dirfd(d), e->d_name, 0);
            put_record(fd, mine);
            if (mine)
                forget_kept(e->d_name);
            continue;
        }
        int64_t pid;
        if (record && st.st_size == (off_t)sizeof r && pread(fd, &r, sizeof r, 0) == sizeof r &&
            memcmp(r.magic, MAGIC, 8) == 0 && (pid = holder_pid(fd, &r, ns)) >= 0 &&
            (pid == 0 || owner_of_pid(pid) == (long)st.st_uid)) {
            r.pid = pid;
            fn(&r, arg);
        }
        put_record(fd, mine);
    }
    closedir(d);
}

static void add_usage(const struct occ_record *r, void *arg)
{
    uint64_t *used = arg;
    for (int i = 0; i < SIM_MAX_DEVICES; i++)
        used[i] = add_saturating(used[i], r->used[i]);
}

static bool write_own(int dev)
{
    return pwrite(own_fd, &own.used[dev], sizeof(uint64_t),
                  (off_t)offsetof(struct occ_record, used[dev])) == sizeof(uint64_t);
}

static bool write_pending(void)
{
    off_t at = (off_t)offsetof(struct occ_record, pending_dev);
    size_t n = sizeof own - (size_t)at;
    return pwrite(own_fd, (const char *)&own + at, n, at) == (ssize_t)n;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct decision {
    int dev;
    uint64_t held;  /* by others, decided */
    uint64_t ahead; /* announced by others before us (or being announced), undecided */
    const struct occ_group *groups;
    int ngroups;
    uint64_t group_held[OCC_MAX_GROUPS], group_ahead[OCC_MAX_GROUPS]; /* the same, by members */
};

static void weigh(const struct occ_record *r, void *arg)
{
    struct decision *d = arg;
    uint64_t used = r->used[d->dev];
    d->held = add_saturating(d->held, used);
    /* A ticket of 0 is being taken: it may come before ours. */
    uint64_t ahead = r->pending_bytes && r->pending_dev == d->dev &&
                             (r->ticket == 0 || r->ticket < own.ticket ||
                              (r->ticket == own.ticket && r->pid < own.pid))
                         ? r->pending_bytes
                         : 0;
    d->ahead = add_saturating(d->ahead, ahead);
    for (int g = 0; r->pid > 0 && (used || ahead) && g < d->ngroups; g++)
        if (d->groups[g].member(r->pid, d->groups[g].arg)) {
            d->group_held[g] = add_saturating(d->group_held[g], used);
            d->group_ahead[g] = add_saturating(d->group_ahead[g], ahead);
        }
}

enum verdict { NO, IF_AHEAD_FAIL, YES };

/* Whether `bytes` fits in `room` beside what others hold, even if all the
 * charges ahead of it are served. */
static enum verdict weigh_room(uint64_t room, uint64_t held, uint64_t ahead, uint64_t bytes)
{
    if (held > room || bytes > room - held)
        return NO;
    return ahead <= room - held - bytes ? YES : IF_AHEAD_FAIL;
}

/* Lamport's bakery with the clock as the ticket: announce the charge, take
 * a ticket, then decide against what others hold and what was announced
 * before; wait (bounded) while those may still fail and leave room. */
static int decide(int dev, uint64_t bytes, uint64_t total, const struct occ_group *groups, int n)
{
    own.pending_dev = dev;
    own.pending_bytes = bytes;
    own.ticket = 0;
    if (!write_pending())
        return -2;
    own.ticket = now_ns();
    if (!write_pending())
        return -2;
    uint64_t deadline = own.ticket + WAIT_AHEAD_NS;
    uint64_t mine = own.used[dev];
    for (;;) {
        struct decision d = {.dev = dev, .groups = groups, .ngroups = n};
        each_live(weigh, &d);
        enum verdict v = weigh_room(total - mine, d.held, d.ahead, bytes);
        for (int g = 0; g < n && v != NO; g++) {
            uint64_t room = groups[g].limit > mine ? groups[g].limit - mine : 0;
            enum verdict in_group = weigh_room(room, d.group_held[g], d.group_ahead[g], bytes);
            v = in_group < v ? in_group : v;
        }
        if (v == NO)
            return -1; /* it does not fit, whatever those ahead decide */
        if (v == YES)
            break; /* it fits, even if all ahead are served */
        if (now_ns() >= deadline)
            return -1; /* those ahead are taken to be served */
        struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
    }
    /* Held first, then no longer announced: a reader in between counts it twice, never not at all. */
    own.used[dev] += bytes;
    if (!write_own(dev)) {
        own.used[dev] -= bytes;
        return -2;
    }
    return 0;
}

int occ_charge(int dev, uint64_t bytes, uint64_t total, const struct occ_group *groups, int n)
{
    if (occ_open() != 0)
        return -2;
    if (n > OCC_MAX_GROUPS)
        n = OCC_MAX_GROUPS;
    pthread_mutex_lock(&lock);
    int rc = -1;
    if (own.used[dev] <= total && bytes <= total - own.used[dev]) {
        rc = decide(dev, bytes, total, groups, n);
        own.pending_bytes = 0;
        own.ticket = 0;
        write_pending();
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

void occ_uncharge(int dev, uint64_t bytes)
{
    if (occ_open() != 0)
        return;
    pthread_mutex_lock(&lock);
    own.used[dev] = own.used[dev] > bytes ? own.used[dev] - bytes : 0;
    /* Nothing to undo on failure: at worst others see us holding more until we exit. */
    (void)write_own(dev);
    pthread_mutex_unlock(&lock);
}

uint64_t occ_used(int dev)
{
    /* Readers need no record of their own: only the directory. */
    uint64_t used[SIM_MAX_DEVICES] = {0};
    pthread_mutex_lock(&lock);
    int opened = open_directory();
    uint64_t mine = own_fd >= 0 ? own.used[dev] : 0;
    pthread_mutex_unlock(&lock);
    if (opened != 0)
        return 0;
    each_live(add_usage, used);
    return add_saturating(used[dev], mine);
}

struct members {
    int dev;
    uint64_t sum;
    bool (*member)(int64_t pid, const void *arg);
    const void *arg;
};

static void add_member(const struct occ_record *r, void *arg)
{
    struct members *m = arg;
    if (r->used[m->dev] && r->pid > 0 && m->member(r->pid, m->arg))
        m->sum = add_saturating(m->sum, r->used[m->dev]);
}

uint64_t occ_used_by(int dev, bool (*member)(int64_t pid, const void *arg), const void *arg)
{
    pthread_mutex_lock(&lock);
    int opened = open_directory();
    uint64_t mine = own_fd >= 0 ? own.used[dev] : 0;
    int64_t self = own.pid;
    pthread_mutex_unlock(&lock);
    if (opened != 0)
        return 0;
    struct members m = {dev, 0, member, arg};
    if (mine && member(self, arg))
        m.sum = mine;
    each_live(add_member, &m);
    return m.sum;
}

int occ_dir(void)
{
    pthread_mutex_lock(&lock);
    int fd = open_directory() == 0 ? dir_fd : -1;
    pthread_mutex_unlock(&lock);
    return fd;
}

void occ_forget_after_fork(void)
{
    /* The child shares the parent's open file descriptions: close our copies
     * (the parent's locks stay, they are the parent's) and start afresh. */
    if (dir_fd >= 0)
        close(dir_fd);
    if (own_fd >= 0)
        close(own_fd);
    dir_fd = own_fd = -1;
    own_name[0] = 0;
    memset(&own, 0, sizeof own);
    pthread_mutex_init(&lock, NULL);
}

struct listing {
    int dev, n, max;
    struct occ_process *out;
};

static void list_one(const struct occ_record *r, void *arg)
{
    struct listing *l = arg;
    if (r->used[l->dev] && r->pid > 0 && l->n < l->max)
        l->out[l->n++] = (struct occ_process){(int)r->pid, r->used[l->dev]};
}

int occ_processes(int dev, struct occ_process *out, int max)
{
    /* Readers need no record of their own: only the directory. */
    pthread_mutex_lock(&lock);
    int opened = open_directory();
    struct listing l = {dev, 0, max, out};
    if (opened == 0 && own_fd >= 0 && own.used[dev] && max > 0)
        out[l.n++] = (struct occ_process){(int)own.pid, own.used[dev]};
    pthread_mutex_unlock(&lock);
    if (opened != 0)
        return 0;
    each_live(list_one, &l);
    return l.n;
}
