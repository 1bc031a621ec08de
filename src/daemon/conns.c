/* conns: the clients' connections. The only code that touches a client's
 * socket: accept (identity from the kernel, SO_PEERCRED), read (a fair
 * share per turn), send (never waiting), and drop, after which the client's
 * grants are back (answers_gone).
 */
#include "conns.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static struct {
    struct conn **conn; /* by fd */
    int nslots;
    int listen_fd, ep;
} C = {.listen_fd = -1, .ep = -1};

void conns_init(int listen_fd, int ep)
{
    C.listen_fd = listen_fd;
    C.ep = ep;
}

int conn_send(struct conn *c, const char *buf, size_t len)
{
    if (send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len) {
        dlog(L_INFO, "pid %d does not take its answers (%s); dropping it", (int)c->pid,
             strerror(errno));
        return -1;
    }
    return 0;
}

static void drop(struct conn *c)
{
    answers_gone(c);
    epoll_ctl(C.ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    C.conn[c->fd] = NULL;
    free(c->groups);
    free(c);
}

void conns_drop_struck(void)
{
    for (int fd = 0; fd < C.nslots; fd++)
        if (C.conn[fd] && C.conn[fd]->strikes >= MAX_STRIKES)
            drop(C.conn[fd]);
}

void conns_accept(void)
{
    for (;;) {
        int fd = accept4(C.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR)
                dlog(L_WARN, "accept: %s", strerror(errno));
            return;
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c || fd >= (1 << 24) || identity_of(fd, c) != 0) {
            if (c)
                free(c->groups);
            free(c);
            close(fd);
            continue;
        }
        if (fd >= C.nslots) {
            int n = fd * 2 + 64;
            struct conn **t = realloc(C.conn, (size_t)n * sizeof *t);
            if (!t) {
                free(c->groups);
                free(c);
                close(fd);
                continue;
            }
            memset(t + C.nslots, 0, (size_t)(n - C.nslots) * sizeof *t);
            C.conn = t;
            C.nslots = n;
        }
        c->fd = fd;
        C.conn[fd] = c;
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        epoll_ctl(C.ep, EPOLL_CTL_ADD, fd, &ev);
    }
}

/* A zero-length read is the end of the connection or an empty message;
 * only the socket's state tells which. */
static bool hung_up(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static void readable(struct conn *c)
{
    char buf[PROTO_MAX + 1];
    for (int i = 0; i < 64; i++) { /* a fair share, then the others' turn */
        ssize_t n = recv(c->fd, buf, sizeof buf, MSG_TRUNC | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n == 0 && !hung_up(c->fd)) { /* an empty message, not the end */
            if (answers_strike(c, "an empty message") == 0)
                continue;
        }
        if (n <= 0) {
            drop(c);
            answers_admit_waiting();
            return;
        }
        int rc = (size_t)n > PROTO_MAX
                     ? answers_strike(c, "a message of %zd bytes; at most %d are accepted", n, PROTO_MAX)
                     : answers_handle(c, buf, (size_t)n);
        if (rc != 0) {
            drop(c);
            answers_admit_waiting();
            return;
        }
    }
}

void conns_readable(int fd)
{
    if (fd >= 0 && fd < C.nslots && C.conn[fd])
        readable(C.conn[fd]);
}
