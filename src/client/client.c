#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

void ledger_default_socket(char *out, size_t n)
{
    if (geteuid() == 0) {
        snprintf(out, n, "%s", LEDGER_SYSTEM_SOCKET);
        return;
    }
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (xdg && xdg[0] == '/')
        snprintf(out, n, "%s/vram/vramd.sock", xdg);
    else
        snprintf(out, n, "/tmp/vram-%u/vramd.sock", (unsigned)geteuid());
}

static bool trusted_owner(uid_t uid) { return uid == 0 || uid == geteuid(); }

bool ledger_place_trusted(const char *path, bool socket, char *why, size_t n)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) {
        snprintf(why, n, "%s is not an absolute path", path);
        return false;
    }
    if (slash == dir)
        slash[1] = 0;
    else
        *slash = 0;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, n, "%s is not a directory", dir);
        return false;
    }
    /* Someone who may write the directory could put anything at the name,
     * unless the sticky bit keeps them to their own entries (as in /tmp). */
    if (!trusted_owner(st.st_uid) || ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))) {
        snprintf(why, n, "its directory %s belongs to uid %u or others may write it", dir,
                 (unsigned)st.st_uid);
        return false;
    }
    if (lstat(path, &st) != 0)
        return true; /* nothing there: nothing to believe or not */
    if (socket ? !S_ISSOCK(st.st_mode) : !S_ISREG(st.st_mode)) {
        snprintf(why, n, "%s is not a %s", path, socket ? "socket" : "regular file");
        return false;
    }
    if (!trusted_owner(st.st_uid) || (!socket && (st.st_mode & 022))) {
        snprintf(why, n, "%s belongs to uid %u%s", path, (unsigned)st.st_uid,
                 socket ? "" : " or others may write it");
        return false;
    }
    return true;
}

static bool exists(const char *path, mode_t type)
{
    struct stat st;
    return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

void ledger_fallback_path(const char *socket_path, char *out, size_t n)
{
    snprintf(out, n, "%s", socket_path);
    char *slash = strrchr(out, '/');
    if (slash)
        snprintf(slash + 1, n - (size_t)(slash + 1 - out), "%s", LEDGER_FALLBACK_NAME);
}

/* A daemon is configured at `path`: its socket is there, or it left its
 * fallback file when it stopped. Either must be trustworthy. */
static int configured(const char *path, char *why, size_t n)
{
    char fb[300];
    ledger_fallback_path(path, fb, sizeof fb);
    bool sock = exists(path, S_IFSOCK), file = exists(fb, S_IFREG);
    if (!sock && !file)
        return 1;
    if (!ledger_place_trusted(path, true, why, n) ||
        (file && !ledger_place_trusted(fb, false, why, n)))
        return -1;
    return 0;
}

int ledger_find_socket(char *out, size_t n, char *err, size_t errlen)
{
    char why[300] = "";
    err[0] = 0;
    const char *env = getenv("VRAM_DAEMON");
    if (env && *env) {
        if (strcmp(env, "off") == 0)
            return 1;
        if (env[0] != '/' || strlen(env) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
            snprintf(err, errlen, "VRAM_DAEMON=\"%.200s\": not an absolute path of at most 107 "
                     "characters; accepted: the daemon's socket path, or \"off\"", env);
            return -1;
        }
        if (!ledger_place_trusted(env, true, why, sizeof why)) {
            snprintf(err, errlen, "VRAM_DAEMON=\"%.200s\": not to be trusted: %s", env, why);
            return -1;
        }
        snprintf(out, n, "%s", env);
        return 0; /* named: a missing socket is then an error the caller reports */
    }
    int r = configured(LEDGER_SYSTEM_SOCKET, why, sizeof why);
    if (r == 0) {
        snprintf(out, n, "%s", LEDGER_SYSTEM_SOCKET);
        return 0;
    }
    if (r < 0)
        snprintf(err, errlen, "ignored %s: %s", LEDGER_SYSTEM_SOCKET, why);
    char user[256];
    ledger_default_socket(user, sizeof user);
    if (strcmp(user, LEDGER_SYSTEM_SOCKET) != 0) {
        r = configured(user, why, sizeof why);
        if (r == 0) {
            snprintf(out, n, "%s", user);
            return 0;
        }
        if (r < 0)
            snprintf(err, errlen, "ignored %s: %s", user, why);
    }
    return 1;
}

int ledger_fallback(const char *socket_path, const char *uuid, uint64_t *bytes, char *why,
                    size_t n)
{
    char path[300], line[256];
    ledger_fallback_path(socket_path, path, sizeof path);
    if (!exists(path, S_IFREG))
        return 1;
    if (!ledger_place_trusted(path, false, why, n))
        return -1;
    FILE *f = fopen(path, "re");
    if (!f)
        return 1;
    int rc = 1;
    while (rc == 1 && fgets(line, sizeof line, f)) {
        char u[64];
        unsigned long long b;
        if (sscanf(line, "%63s %llu", u, &b) == 2 && strcmp(u, uuid) == 0) {
            *bytes = b;
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

uint64_t ledger_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

int ledger_connect(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    /* A daemon whose backlog is full makes a blocking connect wait for
     * ever; a non-blocking one says EAGAIN, and is tried again a while. */
    uint64_t until = ledger_now_ms() + LEDGER_TIMEOUT_MS;
    int rc;
    while ((rc = connect(fd, (struct sockaddr *)&a, sizeof a)) != 0 &&
           (errno == EAGAIN || errno == EINTR) && ledger_now_ms() < until) {
        struct timespec t = {0, 20 * 1000000L};
        nanosleep(&t, NULL);
    }
    if (rc != 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        int e = errno == EAGAIN ? ETIMEDOUT : errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

bool ledger_peer_trusted(int fd, char *why, size_t n)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        snprintf(why, n, "cannot tell who the daemon is: %s", strerror(errno));
        return false;
    }
    if (!trusted_owner(cred.uid)) {
        snprintf(why, n, "the daemon runs as uid %u, neither root nor this user",
                 (unsigned)cred.uid);
        return false;
    }
    return true;
}

int ledger_send(int fd, struct proto_writer *w)
{
    int len = proto_end(w);
    if (len < 0)
        return -1;
    uint64_t until = ledger_now_ms() + LEDGER_TIMEOUT_MS;
    for (;;) {
        ssize_t n = send(fd, w->buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == len)
            return 0;
        if (n >= 0 || (errno != EAGAIN && errno != EINTR))
            return -1;
        uint64_t now = ledger_now_ms();
        if (now >= until)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        poll(&p, 1, (int)(until - now));
    }
}

int ledger_recv(int fd, struct proto_msg *m, int timeout_ms, char *err, size_t errlen)
{
    return ledger_recv_fd(fd, m, NULL, timeout_ms, err, errlen);
}

int ledger_recv_fd(int fd, struct proto_msg *m, int *passed, int timeout_ms, char *err,
                   size_t errlen)
{
    char buf[PROTO_MAX + 1];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    if (passed)
        *passed = -1;
    do
        r = poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r == 0) {
        snprintf(err, errlen, "no answer from the daemon within %d ms", timeout_ms);
        return -1;
    }
    /* Without room for a descriptor, the kernel closes any that came. */
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct iovec iov = {buf, sizeof buf};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1,
                         .msg_control = passed ? control.buf : NULL,
                         .msg_controllen = passed ? sizeof control.buf : 0};
    ssize_t n;
    do
        n = recvmsg(fd, &msg, MSG_TRUNC | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    for (struct cmsghdr *cm = passed ? CMSG_FIRSTHDR(&msg) : NULL; cm; cm = CMSG_NXTHDR(&msg, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
            cm->cmsg_len == CMSG_LEN(sizeof(int)) && *passed < 0)
            memcpy(passed, CMSG_DATA(cm), sizeof(int));
    if (n <= 0 || (size_t)n > PROTO_MAX) {
        snprintf(err, errlen, n <= 0 ? "the daemon closed the connection"
                                     : "a message from the daemon longer than %d bytes",
                 PROTO_MAX);
        goto fail;
    }
    char why[256];
    if (proto_parse(buf, (size_t)n, m, why, sizeof why) != 0) {
        snprintf(err, errlen, "a malformed message from the daemon: %s", why);
        goto fail;
    }
    return 0;
fail:
    if (passed && *passed >= 0) {
        close(*passed);
        *passed = -1;
    }
    return -1;
}

int ledger_answer(int fd, uint64_t wait_ms, ledger_wait_fn on_wait, void *arg,
                  struct proto_msg *m, bool *timed_out, char *why, size_t n)
{
    uint64_t deadline = ledger_now_ms() + LEDGER_ANSWER_TIMEOUT_MS;
    bool queued = false;
    *timed_out = false;
    for (;;) {
        char err[256];
        uint64_t now = ledger_now_ms();
        if (now >= deadline) {
            *timed_out = true;
            if (queued)
                snprintf(why, n, "no answer from vramd by the time it said");
            else
                snprintf(why, n, "no answer from vramd within %d s",
                         LEDGER_ANSWER_TIMEOUT_MS / 1000);
            return -1;
        }
        uint64_t left = deadline - now;
        if (ledger_recv(fd, m, left > INT32_MAX ? INT32_MAX : (int)left, err, sizeof err) != 0) {
            snprintf(why, n, "%s", err);
            *timed_out = ledger_now_ms() >= deadline;
            return -1;
        }
        if (m->verb != VERB_WAIT)
            return 0;
        /* Answered when memory frees or the wait ends: the daemon says when
         * at the latest, and that bounds our wait too. */
        uint64_t until;
        if (proto_get_u64(m, "until", UINT64_MAX, &until, err, sizeof err) != 0)
            until = wait_ms == UINT64_MAX ? 0 : wait_ms;
        if (until > wait_ms)
            until = wait_ms;
        if (!queued && until < UINT64_MAX - LEDGER_ANSWER_TIMEOUT_MS - now)
            deadline = now + until + LEDGER_ANSWER_TIMEOUT_MS;
        queued = true;
        if (on_wait) {
            const char *text = proto_get(m, "text");
            on_wait(arg, until, text ? text : "");
        }
    }
}
