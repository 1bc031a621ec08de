/* identity: who a client is, from the kernel and never from what it writes.
 * A PID is only ever used together with the process's start time. */
#include "daemon.h"

#include "../protocol/protocol.h"
#include "../util/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* Field 22 of /proc/PID/stat: when the process started, in clock ticks.
 * With the pid it names one process for the machine's uptime. */
uint64_t start_time(pid_t pid) { return proc_start_time(pid); }

int process_info(pid_t pid, struct process_info *out)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    ssize_t len = fstat(fd, &st) == 0 ? read(fd, buf, sizeof buf - 1) : -1;
    close(fd);
    if (len <= 0)
        return -1;
    buf[len] = 0;
    char *open_paren = strchr(buf, '('), *p = strrchr(buf, ')');
    if (!open_paren || !p || p < open_paren)
        return -1;
    snprintf(out->comm, sizeof out->comm, "%.*s", (int)(p - open_paren - 1), open_paren + 1);
    char state;
    int ppid;
    if (sscanf(p + 1, " %c %d", &state, &ppid) != 2)
        return -1;
    out->ppid = (pid_t)ppid;
    out->state = state;
    int field = 2;
    for (; *p && field < 22; p++)
        if (*p == ' ')
            field++;
    out->start = strtoull(p, NULL, 10);
    out->uid = st.st_uid; /* /proc/PID belongs to the process's effective uid */
    return out->start ? 0 : -1;
}

bool same_process(pid_t pid, uint64_t start) { return start && start_time(pid) == start; }

/* Whether the process's descriptor `name` was opened for reading and
 * writing (/proc/PID/fdinfo's flags). */
static bool opened_rw(int pid, const char *name)
{
    char path[300], buf[256];
    snprintf(path, sizeof path, "/proc/%d/fdinfo/%.255s", pid, name);
    int f = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = f >= 0 ? read(f, buf, sizeof buf - 1) : -1;
    if (f >= 0)
        close(f);
    if (n <= 0)
        return false;
    buf[n] = 0;
    const char *flags = strstr(buf, "flags:");
    return flags && (strtoul(flags + 6, NULL, 8) & O_ACCMODE) == O_RDWR;
}

bool process_command_state(pid_t pid, bool own, uint64_t *dev, uint64_t *ino)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return false;
    /* vram run's own is the one it reads and writes; of those inherited
     * (read-only), the highest-numbered: a vram run inside a vram run's
     * command leaves its own command a descriptor numbered above the
     * outer one's, and a process is the innermost command's. */
    bool found = false;
    int highest = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        char target[64];
        struct stat st;
        ssize_t len = readlinkat(dirfd(d), e->d_name, target, sizeof target - 1);
        if (len <= 0 || (target[len] = 0, strncmp(target, "/memfd:vram-command", 19) != 0))
            continue;
        if (own ? !opened_rw((int)pid, e->d_name) : found && atoi(e->d_name) < highest)
            continue;
        /* The file itself (the link followed): its identity is the kernel's. */
        if (fstatat(dirfd(d), e->d_name, &st, 0) == 0 && st.st_ino) {
            *dev = (uint64_t)st.st_dev;
            *ino = (uint64_t)st.st_ino;
            highest = atoi(e->d_name);
            found = true;
        }
    }
    closedir(d);
    return found;
}

int identity_creds(int fd, struct conn *c)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return -1;
    c->pid = cred.pid;
    c->uid = cred.uid;
    c->gid = cred.gid;
    return 0;
}

int identity_rest(int fd, struct conn *c)
{
    /* The groups the process had when it connected: asking the kernel for
     * the size first, as a user may be in many. */
    socklen_t len = 0;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, NULL, &len) != 0 && errno != ERANGE)
        return -1;
    c->ngroups = (int)(len / sizeof(gid_t));
    c->groups = NULL;
    if (c->ngroups > 0) {
        c->groups = malloc(len);
        if (!c->groups || getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, c->groups, &len) != 0) {
            free(c->groups);
            c->groups = NULL;
            return -1;
        }
        c->ngroups = (int)(len / sizeof(gid_t));
    }
    c->start = start_time(c->pid);
    return 0;
}

/* A user's name, as the protocol carries names. Looked up once a minute
 * at most per user: a lookup can mean reading /etc/passwd or asking a
 * directory server, and every HELLO needs one. */
void user_name(uid_t uid, char *out, size_t n)
{
    enum { SLOTS = 64, TTL_MS = 60000 };
    static struct {
        uid_t uid;
        uint64_t at_ms;
        char name[PROTO_NAME_MAX];
    } cache[SLOTS];
    uint64_t now = now_ms() + 1; /* never 0: 0 is an empty slot */
    unsigned k = (unsigned)uid % SLOTS;
    if (cache[k].at_ms && cache[k].uid == uid && now - cache[k].at_ms < TTL_MS) {
        snprintf(out, n, "%s", cache[k].name);
        return;
    }
    struct passwd *pw = getpwuid(uid);
    if (pw)
        proto_name_clean(pw->pw_name, cache[k].name, sizeof cache[k].name);
    else
        snprintf(cache[k].name, sizeof cache[k].name, "uid%u", (unsigned)uid);
    cache[k].uid = uid;
    cache[k].at_ms = now;
    snprintf(out, n, "%s", cache[k].name);
}
