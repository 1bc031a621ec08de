/* peer: a hand-driven vramd client for test_daemon.sh.
 *
 *   peer SOCKET send MSG...        sends each MSG as one message (\xNN escapes;
 *                                  "@big:N" is N bytes of 'a') and prints each
 *                                  answer, or "closed"
 *   peer SOCKET hold UUID BYTES [WAIT_MS [DIRECT_BYTES]]
 *                                  registers as a process, asks for BYTES, prints
 *                                  the answer, and holds the grant until killed;
 *                                  DIRECT_BYTES are then allocated from the
 *                                  driver behind the daemon's back
 *   peer SOCKET job JOB UID GID UUID BYTES
 *                                  as root: holds a job's grant until killed
 *   peer SOCKET step JOB UID GID UUID BYTES
 *                                  as root: a Slurm step's holder, as the
 *                                  plugin is one (src/client/job.h): holds the
 *                                  job's grant, prints GRANT backend=B, and
 *                                  registers it again with a vramd that
 *                                  restarts, until killed
 *   peer SOCKET serve LOG [wait]   a daemon that is not one: listens at SOCKET,
 *                                  answers HELLO with OK and nothing else, and
 *                                  writes every message it gets to LOG; with
 *                                  "wait", answers a REQUEST with WAIT until=1000
 *                                  and again every 2 s, for ever
 *   peer SOCKET idle N             N connections that say nothing, held until killed
 *   peer SOCKET stall MSG          sends MSG and never reads the answer; holds the
 *                                  connection until killed
 *   peer SOCKET waiters N UUID BYTES JOB WAIT_MS
 *                                  N processes' worth of connections, each with
 *                                  the job name JOB, asking for BYTES and
 *                                  waiting; prints how many wait, then holds
 *                                  them until killed
 *   peer SOCKET commands N UUID BYTES
 *                                  one process, N jobs of its own: N connections,
 *                                  each HELLO role=command job=cmdK (K = 1..N)
 *                                  asking for BYTES; prints each answer, then
 *                                  holds them until killed
 *   peer SOCKET forkhello UUID BYTES
 *                                  connects, forks, and the parent exits; the
 *                                  child, once it is an orphan, says HELLO on
 *                                  the inherited connection, asks for BYTES,
 *                                  prints the answer and holds it until killed
 *   peer SOCKET cloneleave UUID BYTES STOPFILE
 *                                  a job's holder (HELLO role=command job=clone)
 *                                  asks for BYTES and prints the answer; then
 *                                  starts a clone of itself that shares its
 *                                  memory and descriptors (CLONE_VM and
 *                                  CLONE_FILES, not a thread: as
 *                                  LeakSanitizer's tracer at an ASan-built
 *                                  program's exit) and prints "clone PID",
 *                                  closes the connection and prints "closed",
 *                                  and waits for the clone, which ends once
 *                                  STOPFILE exists (exits 77 at once where built
 *                                  with ThreadSanitizer, whose clone() cannot
 *                                  start one)
 */
#include "../src/cuda/cuda_prototypes.h"
#include "../src/client/client.h"
#include "../src/client/job.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int answer(int fd)
{
    struct proto_msg m;
    char err[256];
    if (ledger_recv(fd, &m, 2000, err, sizeof err) != 0) {
        printf("closed (%s)\n", err);
        return -1;
    }
    printf("%s", proto_verb_name(m.verb));
    for (int i = 0; i < m.nfields; i++)
        printf(" %s=%s", m.field[i].key, m.field[i].value);
    printf("\n");
    fflush(stdout);
    return m.verb;
}

static size_t unescape(const char *in, char *out, size_t cap)
{
    if (strncmp(in, "@big:", 5) == 0) {
        size_t n = strtoul(in + 5, NULL, 10);
        n = n < cap ? n : cap;
        memset(out, 'a', n);
        return n;
    }
    size_t n = 0;
    for (const char *p = in; *p && n < cap; p++) {
        if (p[0] == '\\' && p[1] == 'x' && p[2] && p[3]) {
            char hex[3] = {p[2], p[3], 0};
            out[n++] = (char)strtoul(hex, NULL, 16);
            p += 3;
        } else {
            out[n++] = *p;
        }
    }
    return n;
}

/* The clone's life: system calls alone (it runs on the memory, and so the
 * errno and allocator, of the process it was cloned from), until the file
 * is there. */
__attribute__((no_sanitize("address", "thread", "undefined"))) static int clone_waits(void *file)
{
    struct timespec t = {0, 20000000};
    while (syscall(SYS_faccessat, AT_FDCWD, (const char *)file, F_OK, 0) != 0)
        syscall(SYS_nanosleep, &t, NULL);
    syscall(SYS_exit, 0);
    return 0;
}

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

static int clone_leaves(int fd, char **argv)
{
#ifdef UNDER_TSAN
    /* Its clone() runs the new process's function on the parent's
     * thread state, and it crashes. */
    (void)fd, (void)argv;
    printf("cloneleave: not under ThreadSanitizer, whose clone() cannot start a clone that "
           "shares memory\n");
    return 77;
#endif
    struct proto_writer w;
    proto_begin(&w, VERB_HELLO);
    proto_add(&w, "role", "command");
    proto_add(&w, "job", "clone");
    if (ledger_send(fd, &w) != 0 || answer(fd) != VERB_OK)
        return 1;
    proto_begin(&w, VERB_REQUEST);
    proto_add(&w, "dev", argv[3]);
    proto_add(&w, "bytes", argv[4]);
    if (ledger_send(fd, &w) != 0 || answer(fd) != VERB_GRANT)
        return 1;
    enum { STACK = 64 * 1024 };
    char *stack = malloc(STACK);
    pid_t clone_pid = stack ? clone(clone_waits, stack + STACK,
                                         CLONE_VM | CLONE_FS | CLONE_FILES | SIGCHLD, argv[5]) : -1;
    if (clone_pid < 0) {
        perror("clone");
        return 1;
    }
    printf("clone %d\n", (int)clone_pid);
    close(fd);
    printf("closed\n");
    fflush(stdout);
    int status;
    waitpid(clone_pid, &status, 0);
    free(stack);
    return 0;
}

static int serve(const char *path, const char *log, bool keep_waiting)
{
    int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    unlink(path);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 64) != 0 ||
        chmod(path, 0666) != 0) {
        perror(path);
        return 1;
    }
    FILE *out = fopen(log, "a");
    if (!out)
        return 1;
    struct pollfd p[65] = {{.fd = l, .events = POLLIN}};
    bool asked[65] = {false};
    static const char wait[] = "VRAM/1 WAIT until=1000 text=held for ever";
    int n = 1;
    for (;;) {
        int r = poll(p, (nfds_t)n, keep_waiting ? 2000 : -1);
        if (r == 0)
            for (int i = 1; i < n; i++)
                if (asked[i])
                    send(p[i].fd, wait, sizeof wait - 1, MSG_NOSIGNAL);
        if (r <= 0)
            continue;
        if (p[0].revents && n < 65) {
            asked[n] = false;
            p[n].fd = accept(l, NULL, NULL);
            p[n++].events = POLLIN;
        }
        for (int i = 1; i < n; i++) {
            if (!p[i].revents)
                continue;
            char buf[PROTO_MAX + 1];
            ssize_t k = recv(p[i].fd, buf, PROTO_MAX, 0);
            if (k <= 0) {
                close(p[i].fd);
                asked[i] = asked[n - 1];
                p[i--] = p[--n];
                continue;
            }
            buf[k] = 0;
            fprintf(out, "%s\n", buf);
            fflush(out);
            if (strstr(buf, " HELLO "))
                send(p[i].fd, "VRAM/1 OK client=1", 18, MSG_NOSIGNAL);
            if (keep_waiting && strstr(buf, " REQUEST ")) {
                send(p[i].fd, wait, sizeof wait - 1, MSG_NOSIGNAL);
                asked[i] = true;
            }
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: peer SOCKET send|hold|job ...\n");
        return 2;
    }
    if ((argc == 4 || argc == 5) && strcmp(argv[2], "serve") == 0)
        return serve(argv[1], argv[3], argc == 5 && strcmp(argv[4], "wait") == 0);
    int fd = ledger_connect(argv[1]);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    struct proto_writer w;
    if (strcmp(argv[2], "send") == 0) {
        static char buf[1 << 16];
        for (int i = 3; i < argc; i++) {
            size_t n = unescape(argv[i], buf, sizeof buf);
            if (send(fd, buf, n, MSG_NOSIGNAL) < 0) {
                printf("closed (send)\n");
                return 0;
            }
            if (answer(fd) < 0)
                return 0;
        }
        return 0;
    }
    if (strcmp(argv[2], "idle") == 0 && argc == 4) {
        int n = atoi(argv[3]), made = 0;
        for (int i = 1; i < n && ledger_connect(argv[1]) >= 0; i++)
            made++;
        printf("%d connected\n", made + 1);
        fflush(stdout);
        for (;;)
            pause();
    }
    if (strcmp(argv[2], "stall") == 0 && argc == 4) {
        if (send(fd, argv[3], strlen(argv[3]), MSG_NOSIGNAL) < 0)
            return 1;
        printf("sent\n");
        fflush(stdout);
        for (;;)
            pause();
    }
    if (strcmp(argv[2], "waiters") == 0 && argc == 8) {
        int n = atoi(argv[3]), waiting = 0;
        close(fd);
        for (int i = 0; i < n; i++) {
            int c = ledger_connect(argv[1]);
            if (c < 0)
                break;
            proto_begin(&w, VERB_HELLO);
            proto_add(&w, "role", "process");
            proto_add(&w, "job", argv[6]);
            struct proto_msg m;
            char err[256];
            if (ledger_send(c, &w) != 0 || ledger_recv(c, &m, 5000, err, sizeof err) != 0)
                break;
            proto_begin(&w, VERB_REQUEST);
            proto_add(&w, "dev", argv[4]);
            proto_add(&w, "bytes", argv[5]);
            proto_add(&w, "wait", argv[7]);
            if (ledger_send(c, &w) != 0 || ledger_recv(c, &m, 5000, err, sizeof err) != 0)
                break;
            waiting += m.verb == VERB_WAIT;
        }
        printf("%d waiting\n", waiting);
        fflush(stdout);
        for (;;)
            pause();
    }
    if (strcmp(argv[2], "step") == 0 && argc == 8) {
        static struct job j;
        char why[1024];
        close(fd);
        job_init(&j);
        snprintf(j.socket, sizeof j.socket, "%s", argv[1]);
        snprintf(j.name, sizeof j.name, "%s", argv[3]);
        j.for_user = true;
        j.uid = (uid_t)atoi(argv[4]);
        j.gid = (gid_t)atoi(argv[5]);
        j.ndev = 1;
        j.dev[0].index = -1;
        snprintf(j.dev[0].uuid, sizeof j.dev[0].uuid, "%s", argv[6]);
        j.dev[0].ask = strtoull(argv[7], NULL, 10);
        if (job_connect(&j, why, sizeof why) != 0 ||
            job_ask(&j, 0, 0, NULL, NULL, why, sizeof why) != 1) {
            printf("refused: %s\n", why);
            return 1;
        }
        printf("GRANT backend=%s\n", j.dev[0].by_driver ? "driver" : "interposer");
        fflush(stdout);
        job_start(&j);
        for (;;)
            pause();
    }
    if (strcmp(argv[2], "commands") == 0 && argc == 6) {
        int n = atoi(argv[3]);
        close(fd);
        for (int i = 0; i < n; i++) {
            int c = ledger_connect(argv[1]);
            char name[32];
            snprintf(name, sizeof name, "cmd%d", i + 1);
            proto_begin(&w, VERB_HELLO);
            proto_add(&w, "role", "command");
            proto_add(&w, "job", name);
            if (c < 0 || ledger_send(c, &w) != 0 || answer(c) != VERB_OK)
                return 1;
            proto_begin(&w, VERB_REQUEST);
            proto_add(&w, "dev", argv[4]);
            proto_add(&w, "bytes", argv[5]);
            if (ledger_send(c, &w) != 0 || answer(c) < 0)
                return 1;
        }
        fflush(stdout);
        for (;;)
            pause();
    }
    if (strcmp(argv[2], "cloneleave") == 0 && argc == 6)
        return clone_leaves(fd, argv);
    if (strcmp(argv[2], "forkhello") == 0 && argc == 5) {
        pid_t parent = getpid();
        pid_t child = fork();
        if (child != 0)
            _exit(child < 0); /* the process the kernel saw connect is gone */
        for (int i = 0; i < 500 && getppid() == parent; i++) {
            struct timespec t = {0, 10000000};
            nanosleep(&t, NULL);
        }
        struct timespec t = {0, 100000000}; /* and reaped */
        nanosleep(&t, NULL);
        printf("pid %d\n", (int)getpid());
        static char hold_mode[] = "hold";
        argv[2] = hold_mode;
    }
    if (strcmp(argv[2], "hold") == 0 && argc >= 5) {
        proto_begin(&w, VERB_HELLO);
        proto_add(&w, "role", "process");
        proto_add(&w, "cmd", "peer");
        if (ledger_send(fd, &w) != 0 || answer(fd) != VERB_OK)
            return 1;
        proto_begin(&w, VERB_REQUEST);
        proto_add(&w, "dev", argv[3]);
        proto_add(&w, "total", "0");
        proto_add(&w, "bytes", argv[4]);
        if (argc > 5 && strcmp(argv[5], "0") != 0)
            proto_add(&w, "wait", argv[5]);
        if (ledger_send(fd, &w) != 0)
            return 1;
        int v;
        while ((v = answer(fd)) == VERB_WAIT)
            ;
        if (v != VERB_GRANT)
            return 1;
        if (argc > 6) {
            CUcontext ctx;
            CUdeviceptr p;
            if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxPushCurrent_v2(ctx) ||
                cuMemAlloc_v2(&p, strtoull(argv[6], NULL, 10)))
                return 1;
        }
    } else if (strcmp(argv[2], "job") == 0 && argc == 8) {
        proto_begin(&w, VERB_JOB);
        proto_add(&w, "job", argv[3]);
        proto_add(&w, "uid", argv[4]);
        proto_add(&w, "gid", argv[5]);
        proto_add(&w, "dev", argv[6]);
        proto_add(&w, "total", "0");
        proto_add(&w, "bytes", argv[7]);
        if (ledger_send(fd, &w) != 0 || answer(fd) != VERB_GRANT)
            return 1;
    } else {
        fprintf(stderr, "peer: unknown mode %s\n", argv[2]);
        return 2;
    }
    for (;;)
        pause();
}
