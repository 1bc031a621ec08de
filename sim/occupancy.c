#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "occupancy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct record {
    char magic[8];
    int64_t pid;
    uint64_t used[SIM_MAX_DEVICES];
};
static const char MAGIC[8] = "VRAMSIM1";

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* threads of this process */
static char dir[512];
static int lock_fd = -1;
static int own_fd = -1;
static char own_name[64];
static struct record own;

static void remove_own_record(void)
{
    if (own_fd >= 0 && own.pid == getpid()) {
        char path[640];
        snprintf(path, sizeof path, "%s/%s", dir, own_name);
        unlink(path);
    }
}

static int check_dir(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        fprintf(stderr, "vram-sim: state directory %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "vram-sim: state directory %s is not a directory (or is a link)\n", path);
        return -1;
    }
    /* A directory that someone else owns and that anyone may write without
     * the sticky bit would let them replace our records. */
    if (st.st_uid != getuid() && st.st_uid != 0 && (st.st_mode & S_IWOTH) &&
        !(st.st_mode & S_ISVTX)) {
        fprintf(stderr, "vram-sim: state directory %s is world-writable without the sticky bit; "
                        "refusing to use it\n", path);
        return -1;
    }
    return 0;
}

/* The state directory and its lock file: all that a process needs to read
 * occupancy. Caller holds `lock`. */
static int open_directory(void)
{
    if (lock_fd >= 0)
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
    if (check_dir(dir) != 0)
        return -1;
    char path[640];
    snprintf(path, sizeof path, "%s/devices.lock", dir);
    lock_fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (lock_fd < 0) {
        fprintf(stderr, "vram-sim: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ... and this process's own record, for a process that holds memory. */
static int open_locked(void)
{
    if (open_directory() != 0)
        return -1;
    char path[640];

    /* Create the record under a name scanners ignore, lock it, then rename
     * it into place: a scanner never sees a record without its lock. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char tmp[640];
    snprintf(own_name, sizeof own_name, "proc-%d-%lx", (int)getpid(),
             (unsigned long)(ts.tv_nsec ^ ((unsigned long)ts.tv_sec << 20)));
    snprintf(tmp, sizeof tmp, "%s/.new-%s", dir, own_name);
    own_fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (own_fd < 0) {
        fprintf(stderr, "vram-sim: cannot create %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    fchmod(own_fd, 0644);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    memset(&own, 0, sizeof own);
    memcpy(own.magic, MAGIC, sizeof MAGIC);
    own.pid = getpid();
    snprintf(path, sizeof path, "%s/%s", dir, own_name);
    if (fcntl(own_fd, F_OFD_SETLK, &fl) != 0 || pwrite(own_fd, &own, sizeof own, 0) != sizeof own ||
        rename(tmp, path) != 0) {
        fprintf(stderr, "vram-sim: cannot set up %s: %s\n", path, strerror(errno));
        unlink(tmp);
        close(own_fd);
        own_fd = -1;
        return -1;
    }
    static int registered;
    if (!registered++)
        atexit(remove_own_record);
    return 0;
}

int occ_open(void)
{
    pthread_mutex_lock(&lock);
    int rc = own_fd >= 0 ? 0 : open_locked();
    pthread_mutex_unlock(&lock);
    return rc;
}

/* Calls fn for every live record other than this copy's own. The locks
 * are open-file-description locks (F_OFD_*): they belong to the record's
 * open file, not to the process, so opening and closing a record here —
 * even one of this very process, held by another copy of this code (the
 * simulated NVML) — leaves its lock alone; the kernel drops it when the
 * owner's last descriptor goes, that is when the owner dies. */
static void each_live(void (*fn)(const struct record *r, void *arg), void *arg)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "proc-", 5) != 0 || strcmp(e->d_name, own_name) == 0)
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        struct record r;
        if (fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK) {
            /* Its owner is gone: the memory came back when it died. */
            struct stat st;
            if (fstat(fd, &st) == 0 && (st.st_uid == getuid() || getuid() == 0))
                unlinkat(dirfd(d), e->d_name, 0);
        } else if (pread(fd, &r, sizeof r, 0) == sizeof r && memcmp(r.magic, MAGIC, 8) == 0) {
            fn(&r, arg);
        }
        close(fd);
    }
    closedir(d);
}

static void add_usage(const struct record *r, void *arg)
{
    uint64_t *used = arg;
    for (int i = 0; i < SIM_MAX_DEVICES; i++)
        used[i] += r->used[i];
}

/* Sums every live record (our own from memory). Caller holds both locks. */
static void sum_all(uint64_t used[SIM_MAX_DEVICES])
{
    memcpy(used, own.used, sizeof own.used);
    each_live(add_usage, used);
}

static void lock_machine(void)
{
    pthread_mutex_lock(&lock);
    while (flock(lock_fd, LOCK_EX) != 0 && errno == EINTR)
        ;
}

static void unlock_machine(void)
{
    flock(lock_fd, LOCK_UN);
    pthread_mutex_unlock(&lock);
}

int occ_charge(int dev, uint64_t bytes, uint64_t total)
{
    if (occ_open() != 0)
        return -2;
    lock_machine();
    uint64_t used[SIM_MAX_DEVICES];
    sum_all(used);
    int rc = 0;
    if (used[dev] > total || bytes > total - used[dev]) {
        rc = -1;
    } else {
        own.used[dev] += bytes;
        if (pwrite(own_fd, &own.used[dev], sizeof(uint64_t),
                   (off_t)offsetof(struct record, used[dev])) != sizeof(uint64_t)) {
            own.used[dev] -= bytes;
            rc = -2;
        }
    }
    unlock_machine();
    return rc;
}

void occ_uncharge(int dev, uint64_t bytes)
{
    if (occ_open() != 0)
        return;
    lock_machine();
    own.used[dev] = own.used[dev] > bytes ? own.used[dev] - bytes : 0;
    if (pwrite(own_fd, &own.used[dev], sizeof(uint64_t),
               (off_t)offsetof(struct record, used[dev])) != sizeof(uint64_t)) {
        /* Nothing to undo: at worst others see us holding more until we exit. */
    }
    unlock_machine();
}

uint64_t occ_used(int dev)
{
    if (occ_open() != 0)
        return 0;
    lock_machine();
    uint64_t used[SIM_MAX_DEVICES];
    sum_all(used);
    unlock_machine();
    return used[dev];
}

void occ_forget_after_fork(void)
{
    /* The child shares the parent's open file descriptions: close our copies
     * (the parent's locks stay, they are the parent's) and start afresh. */
    if (lock_fd >= 0)
        close(lock_fd);
    if (own_fd >= 0)
        close(own_fd);
    lock_fd = own_fd = -1;
    memset(&own, 0, sizeof own);
    pthread_mutex_init(&lock, NULL);
}

struct listing {
    int dev, n, max;
    struct occ_process *out;
};

static void list_one(const struct record *r, void *arg)
{
    struct listing *l = arg;
    if (r->used[l->dev] && l->n < l->max)
        l->out[l->n++] = (struct occ_process){(int)r->pid, r->used[l->dev]};
}

int occ_processes(int dev, struct occ_process *out, int max)
{
    /* Readers need no record of their own: only the directory and lock. */
    pthread_mutex_lock(&lock);
    int opened = open_directory();
    pthread_mutex_unlock(&lock);
    if (opened != 0)
        return 0;
    lock_machine();
    struct listing l = {dev, 0, max, out};
    if (own_fd >= 0 && own.used[dev] && max > 0)
        out[l.n++] = (struct occ_process){(int)own.pid, own.used[dev]};
    each_live(list_one, &l);
    unlock_machine();
    return l.n;
}
