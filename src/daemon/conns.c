/* conns: the clients' connections. The only code that touches a client's
 * socket: accept (identity from the kernel, identity.c), read (a fair
 * share per turn, each message handed to the handlers: conns.h), send
 * (never waiting), and drop, after which the client's grants are back (the
 * handlers' gone).
 *
 * No user can take the daemon's descriptors from the others: a user (not
 * root) may hold at most the policy's connections-per-user; whoever is
 * refused gets an ERR saying why; the last ROOT_RESERVE descriptors are for
 * root (vram status, the Slurm plugin); a connection that says nothing for
 * the policy's first-message-within is closed; and when the descriptors
 * run out all the same, the daemon stops accepting for ACCEPT_PAUSE_MS
 * rather than spin on a listening socket it cannot serve. Every line this
 * can cause is rate-limited.
 */
#include "conns.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define ROOT_RESERVE 32    /* descriptors only root's connections may take */
#define OWN_FDS 32         /* the daemon's own: files, NVML, /proc, the loop */
#define ACCEPT_PAUSE_MS 100
#define ACCEPT_TURN 64     /* connections accepted per turn of the loop, then the others' */

struct user_conns {
    uid_t uid;
    int n;
};

static struct {
    struct conn **conn; /* by fd */
    int nslots;
    int listen_fd, ep;
    int nopen, most; /* connections open, and the most there may be */
    struct user_conns *users; /* connections per user with any (few users) */
    int nusers;
    struct conn *silent_head, *silent_tail; /* accepted and silent, oldest first */
    uint64_t paused_until;
    struct log_limit log_refused, log_accept, log_silent, log_slow;
    struct conns_handlers h;
} C = {.listen_fd = -1, .ep = -1};

void conns_init(int listen_fd, int ep, const struct conns_handlers *h)
{
    C.h = *h;
    C.listen_fd = listen_fd;
    C.ep = ep;
    struct rlimit rl;
    rlim_t fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    C.most = fds > OWN_FDS + ROOT_RESERVE + 16 && fds < (1 << 24) ? (int)fds - OWN_FDS : 16;
    if (C.most < 16 + ROOT_RESERVE)
        dlog(L_WARN, "only %llu descriptors: at most %d connections", (unsigned long long)fds,
             C.most);
}

static struct user_conns *user_of(uid_t uid, bool add)
{
    for (int i = 0; i < C.nusers; i++)
        if (C.users[i].uid == uid)
            return &C.users[i];
    if (!add)
        return NULL;
    struct user_conns *t = realloc(C.users, (size_t)(C.nusers + 1) * sizeof *t);
    if (!t)
        return NULL;
    C.users = t;
    C.users[C.nusers] = (struct user_conns){uid, 0};
    return &C.users[C.nusers++];
}

static void count(uid_t uid, int delta)
{
    struct user_conns *u = user_of(uid, delta > 0);
    if (!u)
        return;
    u->n += delta;
    if (u->n <= 0) /* a user with none is forgotten */
        *u = C.users[--C.nusers];
}

static void unsilence(struct conn *c)
{
    if (c->spoke)
        return;
    c->spoke = true;
    if (c->silent_prev)
        c->silent_prev->silent_next = c->silent_next;
    else
        C.silent_head = c->silent_next;
    if (c->silent_next)
        c->silent_next->silent_prev = c->silent_prev;
    else
        C.silent_tail = c->silent_prev;
    c->silent_prev = c->silent_next = NULL;
}

int conn_send(struct conn *c, const char *buf, size_t len)
{
    if (send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len) {
        dlog_limited(&C.log_slow, L_INFO, "pid %d does not take its answers (%s); dropping it",
                     (int)c->pid, strerror(errno));
        return -1;
    }
    return 0;
}

int conn_send_fd(struct conn *c, const char *buf, size_t len, int fd)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {(void *)buf, len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof control.buf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    if (sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len) {
        dlog_limited(&C.log_slow, L_INFO, "pid %d does not take its answers (%s); dropping it",
                     (int)c->pid, strerror(errno));
        return -1;
    }
    return 0;
}

static void drop(struct conn *c)
{
    C.h.gone(c);
    unsilence(c);
    count(c->uid, -1);
    C.nopen--;
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

/* Says why and closes: the client learns it was refused, not that the
 * daemon is gone. */
static void refuse(int fd, struct conn *c, const char *why)
{
    struct proto_writer w;
    proto_begin(&w, VERB_ERR);
    proto_add_text(&w, "%s", why);
    int len = proto_end(&w);
    if (len > 0)
        (void)send(fd, w.buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
    dlog_limited(&C.log_refused, L_WARN, "refused a connection of pid %d: %s", (int)c->pid, why);
    close(fd);
    free(c->groups);
    free(c);
}

static void pause_accepting(void)
{
    struct epoll_event ev = {.events = 0, .data.fd = C.listen_fd};
    epoll_ctl(C.ep, EPOLL_CTL_MOD, C.listen_fd, &ev);
    C.paused_until = now_ms() + ACCEPT_PAUSE_MS;
}

void conns_accept(void)
{
    /* A turn at a time: a flood of connections waits in the backlog while
     * the clients already here are served (the listening socket stays
     * readable, so the loop comes back). */
    for (int turn = 0; turn < ACCEPT_TURN; turn++) {
        int fd = accept4(C.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                dlog_limited(&C.log_accept, L_ERROR, "accept: %s; not accepting for %d ms",
                             strerror(errno), ACCEPT_PAUSE_MS);
                pause_accepting();
            } else if (errno != EAGAIN && errno != EINTR) {
                dlog_limited(&C.log_accept, L_WARN, "accept: %s", strerror(errno));
            }
            return;
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c || fd >= (1 << 24) || identity_creds(fd, c) != 0) {
            free(c);
            close(fd);
            continue;
        }
        char why[200];
        struct user_conns *u = user_of(c->uid, false);
        if (c->uid != 0 && C.nopen >= C.most - ROOT_RESERVE) {
            snprintf(why, sizeof why, "the daemon is at its connection limit (%d); the rest is "
                     "for root", C.most - ROOT_RESERVE);
            refuse(fd, c, why);
            continue;
        }
        if (c->uid != 0 && u && (uint64_t)u->n >= D.L.policy.connections_per_user) {
            snprintf(why, sizeof why, "uid %u has %d connections, the most a user may have "
                     "(policy: connections-per-user)", (unsigned)c->uid, u->n);
            refuse(fd, c, why);
            continue;
        }
        if (identity_rest(fd, c) != 0) {
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
        c->accepted_ms = now_ms();
        c->silent_prev = C.silent_tail;
        if (C.silent_tail)
            C.silent_tail->silent_next = c;
        else
            C.silent_head = c;
        C.silent_tail = c;
        C.conn[fd] = c;
        C.nopen++;
        count(c->uid, +1);
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        epoll_ctl(C.ep, EPOLL_CTL_ADD, fd, &ev);
    }
}

void conns_tick(uint64_t now)
{
    if (C.paused_until && now >= C.paused_until) {
        C.paused_until = 0;
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = C.listen_fd};
        epoll_ctl(C.ep, EPOLL_CTL_MOD, C.listen_fd, &ev);
    }
    int closed = 0;
    while (C.silent_head && now - C.silent_head->accepted_ms >= D.L.policy.silent_ms) {
        drop(C.silent_head);
        closed++;
    }
    if (closed)
        dlog_limited(&C.log_silent, L_INFO, "closed %d connection%s that said nothing for %llu ms",
                     closed, closed == 1 ? "" : "s", (unsigned long long)D.L.policy.silent_ms);
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
            if (C.h.strike(c, "an empty message") == 0)
                continue;
        }
        if (n <= 0) {
            drop(c);
            C.h.admit_waiting();
            return;
        }
        unsilence(c);
        int rc = (size_t)n > PROTO_MAX
                     ? C.h.strike(c, "a message of %zd bytes; at most %d are accepted", n, PROTO_MAX)
                     : C.h.handle(c, buf, (size_t)n);
        if (rc != 0) {
            drop(c);
            C.h.admit_waiting();
            return;
        }
    }
}

void conns_readable(int fd)
{
    if (fd >= 0 && fd < C.nslots && C.conn[fd])
        readable(C.conn[fd]);
}
