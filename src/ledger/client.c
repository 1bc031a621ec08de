#include "client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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

static bool is_socket(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

int ledger_find_socket(char *out, size_t n, char *err, size_t errlen)
{
    const char *env = getenv("VRAM_DAEMON");
    if (env && *env) {
        if (strcmp(env, "off") == 0)
            return 1;
        if (env[0] != '/' || strlen(env) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
            snprintf(err, errlen, "VRAM_DAEMON=\"%.200s\": not an absolute path of at most 107 "
                     "characters; accepted: the daemon's socket path, or \"off\"", env);
            return -1;
        }
        snprintf(out, n, "%s", env);
        return 0; /* named: a missing socket is then an error the caller reports */
    }
    if (is_socket(LEDGER_SYSTEM_SOCKET)) {
        snprintf(out, n, "%s", LEDGER_SYSTEM_SOCKET);
        return 0;
    }
    char user[256];
    ledger_default_socket(user, sizeof user);
    if (strcmp(user, LEDGER_SYSTEM_SOCKET) != 0 && is_socket(user)) {
        snprintf(out, n, "%s", user);
        return 0;
    }
    return 1;
}

int ledger_connect(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int ledger_send(int fd, struct proto_writer *w)
{
    int len = proto_end(w);
    if (len < 0)
        return -1;
    ssize_t n;
    do
        n = send(fd, w->buf, (size_t)len, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == len ? 0 : -1;
}

int ledger_recv(int fd, struct proto_msg *m, int timeout_ms, char *err, size_t errlen)
{
    char buf[PROTO_MAX + 1];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r == 0) {
        snprintf(err, errlen, "no answer from the daemon within %d ms", timeout_ms);
        return -1;
    }
    ssize_t n;
    do
        n = recv(fd, buf, sizeof buf, MSG_TRUNC);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
        snprintf(err, errlen, "the daemon closed the connection");
        return -1;
    }
    if ((size_t)n > PROTO_MAX) {
        snprintf(err, errlen, "a message from the daemon longer than %d bytes", PROTO_MAX);
        return -1;
    }
    char why[256];
    if (proto_parse(buf, (size_t)n, m, why, sizeof why) != 0) {
        snprintf(err, errlen, "a malformed message from the daemon: %s", why);
        return -1;
    }
    return 0;
}
