/* isolate: run a function in a fresh process and get its result back.
 *
 * A forked child shares nothing with the GPU that a driver would honour:
 * CUDA state does not survive fork(). So, like Python's multiprocessing
 * with "spawn", the child is a new execution of the same program
 * (/proc/self/exe, same arguments and environment), and libvram's
 * constructor runs the function there before main(). The function is named
 * by the object it lives in and its offset inside it, which is the same in
 * every execution of the program even though load addresses are not.
 *
 * Parent and child talk over a socketpair: the parent sends the input,
 * the child sends back a header (status, result length, message length),
 * the result and vram_last_error(). A child that dies sends nothing, and
 * waitpid() says why.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../../include/vram.h"
#include "../util/report.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILD_VAR "VRAM_ISOLATE_CHILD"
#define MAGIC 0x76726d31u /* "vrm1" */

extern char **environ;

struct request {
    uint64_t in_len, out_cap;
};

struct reply {
    uint32_t magic;
    int32_t status;
    uint64_t out_len, msg_len;
};

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* ------------------------------------------------ naming the function */

struct locate {
    uintptr_t addr;
    char name[512];
    uintptr_t base;
    bool found;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct locate *q = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (q->addr >= start && q->addr < start + ph->p_memsz) {
            snprintf(q->name, sizeof q->name, "%s", info->dlpi_name ? info->dlpi_name : "");
            q->base = info->dlpi_addr;
            q->found = true;
            return 1;
        }
    }
    return 0;
}

static int find_base(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct locate *q = arg;
    if (strcmp(info->dlpi_name ? info->dlpi_name : "", q->name) == 0) {
        q->base = info->dlpi_addr;
        q->found = true;
        return 1;
    }
    return 0;
}

/* --------------------------------------------------------- the child */

static void child_main(const char *spec)
{
    int fd;
    unsigned long long offset;
    int used = 0;
    if (sscanf(spec, "%d,%llx,%n", &fd, &offset, &used) != 2 || used == 0)
        _exit(126);
    struct locate q = {0};
    snprintf(q.name, sizeof q.name, "%s", spec + used);
    dl_iterate_phdr(find_base, &q);
    struct request req;
    if (!q.found || read_all(fd, &req, sizeof req) != 0)
        _exit(126);
    vram_isolated_fn fn = (vram_isolated_fn)(q.base + (uintptr_t)offset);
    void *in = malloc(req.in_len ? req.in_len : 1);
    void *out = malloc(req.out_cap ? req.out_cap : 1);
    if (!in || !out || read_all(fd, in, req.in_len) != 0)
        _exit(126);
    size_t out_len = 0;
    report_clear();
    vram_status st = fn(in, req.in_len, out, req.out_cap, &out_len);
    if (st == VRAM_OK && out_len > req.out_cap) {
        st = report_fail(VRAM_ERROR_INVALID_ARGUMENT,
                         "the isolated function reported a %zu-byte result, more than the %llu "
                         "bytes of room it was given",
                         out_len, (unsigned long long)req.out_cap);
    }
    if (st != VRAM_OK)
        out_len = 0;
    const char *msg = report_last();
    struct reply rep = {MAGIC, st, out_len, strlen(msg)};
    if (write_all(fd, &rep, sizeof rep) != 0 || write_all(fd, out, out_len) != 0 ||
        write_all(fd, msg, rep.msg_len) != 0)
        _exit(125);
    free(in);
    free(out);
    /* exit(), not _exit(): the child's GPU state and the driver's own
     * cleanup run as in any process that ends normally. */
    exit(0);
}

__attribute__((constructor)) static void isolate_child_entry(void)
{
    const char *spec = getenv(CHILD_VAR);
    if (!spec)
        return;
    char copy[600];
    snprintf(copy, sizeof copy, "%s", spec);
    unsetenv(CHILD_VAR); /* the child's own children are ordinary */
    child_main(copy);
}

/* -------------------------------------------------------- the parent */

/* The program's arguments, from /proc/self/cmdline, NULL-terminated. */
static char **read_argv(char **buf)
{
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    *buf = malloc(cap);
    size_t r;
    while (*buf && (r = fread(*buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *b = realloc(*buf, cap *= 2);
            if (!b) {
                free(*buf);
                *buf = NULL;
            } else {
                *buf = b;
            }
        }
    }
    fclose(f);
    if (!*buf)
        return NULL;
    size_t argc = 0;
    for (size_t i = 0; i < n; i++)
        argc += (*buf)[i] == 0;
    char **argv = calloc(argc + 1, sizeof *argv);
    if (!argv)
        return NULL;
    for (size_t i = 0, a = 0; i < n && a < argc; a++) {
        argv[a] = *buf + i;
        i += strlen(*buf + i) + 1;
    }
    return argv;
}

static vram_status child_failed(pid_t pid, int status)
{
    if (WIFSIGNALED(status))
        return report_fail(VRAM_ERROR_CHILD_FAILED,
                           "the isolated child (pid %d) was killed by signal %d (%s) before "
                           "returning a result",
                           (int)pid, WTERMSIG(status), strsignal(WTERMSIG(status)));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return report_fail(VRAM_ERROR_CHILD_FAILED,
                           "the isolated child (pid %d) could not start this program again from "
                           "/proc/self/exe",
                           (int)pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 126)
        return report_fail(VRAM_ERROR_CHILD_FAILED,
                           "the isolated child (pid %d) could not find the function: it must be "
                           "in the program or a library loaded at start-up",
                           (int)pid);
    return report_fail(VRAM_ERROR_CHILD_FAILED,
                       "the isolated child (pid %d) exited with status %d before returning a result",
                       (int)pid, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

vram_status vram_run_isolated(vram_isolated_fn fn, const void *in, size_t in_len, void *out,
                              size_t out_cap, size_t *out_len)
{
    if (!fn || (in_len && !in) || (out_cap && !out) || !out_len)
        return report_fail(VRAM_ERROR_INVALID_ARGUMENT,
                           "vram_run_isolated: fn, out_len, and in/out when their sizes are not 0, "
                           "must not be NULL");
    struct locate q = {.addr = (uintptr_t)fn};
    dl_iterate_phdr(find_object, &q);
    if (!q.found)
        return report_fail(VRAM_ERROR_INVALID_ARGUMENT,
                           "vram_run_isolated: the function at %p is not in any loaded object",
                           (void *)fn);

    /* Everything the child needs is built before fork(): between fork and
     * exec a threaded program may only make async-signal-safe calls. */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return report_fail(VRAM_ERROR_SYSTEM, "vram_run_isolated: socketpair: %s", strerror(errno));
    char *argbuf = NULL;
    char **argv = read_argv(&argbuf);
    size_t nenv = 0;
    while (environ && environ[nenv])
        nenv++;
    char **envp = calloc(nenv + 2, sizeof *envp);
    char var[700];
    snprintf(var, sizeof var, CHILD_VAR "=%d,%llx,%s", sv[1],
             (unsigned long long)(q.addr - q.base), q.name);
    if (!argv || !envp) {
        free(argv);
        free(argbuf);
        free(envp);
        close(sv[0]);
        close(sv[1]);
        return report_fail(VRAM_ERROR_SYSTEM, "vram_run_isolated: cannot read this program's "
                                              "arguments from /proc/self/cmdline");
    }
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++)
        if (strncmp(environ[i], CHILD_VAR "=", sizeof CHILD_VAR) != 0)
            envp[k++] = environ[i];
    envp[k++] = var;
    envp[k] = NULL;

    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        fcntl(sv[1], F_SETFD, 0); /* the child's end survives exec */
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    int fork_errno = errno;
    free(argv);
    free(argbuf);
    free(envp);
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        return report_fail(VRAM_ERROR_SYSTEM, "vram_run_isolated: fork: %s", strerror(fork_errno));
    }

    struct request req = {in_len, out_cap};
    struct reply rep = {0};
    bool sent = write_all(sv[0], &req, sizeof req) == 0 && write_all(sv[0], in, in_len) == 0;
    bool got = sent && read_all(sv[0], &rep, sizeof rep) == 0 && rep.magic == MAGIC &&
               rep.out_len <= out_cap && read_all(sv[0], out, rep.out_len) == 0;
    char msg[2048] = "";
    if (got) {
        size_t keep = rep.msg_len < sizeof msg - 1 ? rep.msg_len : sizeof msg - 1;
        got = read_all(sv[0], msg, keep) == 0;
        msg[keep] = 0;
    }
    close(sv[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!got)
        return child_failed(pid, status);
    if (rep.status != VRAM_OK)
        return report_fail((vram_status)rep.status, "in the isolated child (pid %d): %s", (int)pid,
                           msg);
    *out_len = rep.out_len;
    return VRAM_OK;
}
