/* files: what vramd writes beside itself, each whole or not at all.
 *   - the state file: the grants, by pid + start time + uid, so that
 *     clients re-registering after a restart cannot claim more than they
 *     held; written by root, atomically, at most every 100 ms;
 *   - the metrics file: the ledger in Prometheus text format, for
 *     node_exporter's textfile collector.
 */
#include "daemon.h"

#include "../ledger/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int write_atomically(const char *path, mode_t mode, void (*fill)(FILE *))
{
    /* The file may be in a directory others can write (an administrator's
     * choice): whatever they put at its name is replaced, never written
     * through, and a name that is not a plain file is refused. */
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        errno = EEXIST;
        return -1;
    }
    /* A temporary name nobody can guess, created here (O_EXCL: never an
     * existing file, FIFO or link), so it is ours before a byte is written. */
    char tmp[600];
    if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return -1;
    FILE *f = fchmod(fd, mode) == 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        errno = e;
        return -1;
    }
    fill(f);
    if (fflush(f) != 0 || ferror(f)) {
        int e = errno;
        fclose(f);
        unlink(tmp);
        errno = e ? e : EIO;
        return -1;
    }
    fclose(f);
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

void fill_metrics(FILE *f)
{
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot(&D.L, 0, &s);
    snapshot_prometheus(&s, f);
    snapshot_free(&s);
}

void fill_state(FILE *f)
{
    fprintf(f, "# vramd grants: pid start uid device bytes\n");
    for (int i = 0; i < D.L.nclients; i++) {
        const struct ledger_client *c = D.L.clients[i];
        if (c->role != ROLE_PROCESS)
            continue;
        for (int d = 0; d < D.L.ndev; d++)
            if (c->use[d].grant)
                fprintf(f, "%d %llu %u %s %llu\n", (int)c->pid, (unsigned long long)c->start,
                        (unsigned)c->uid, D.L.dev[d].uuid, (unsigned long long)c->use[d].grant);
    }
}

void load_state(void)
{
    FILE *f = fopen(D.state_path, "re");
    if (!f)
        return;
    struct stat st;
    /* Only a file this daemon's user wrote and nobody else can is believed. */
    if (fstat(fileno(f), &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
        dlog(L_WARN, "%s: not owned by this daemon's user or writable by others; ignored",
             D.state_path);
        fclose(f);
        return;
    }
    char line[256];
    while (fgets(line, sizeof line, f)) {
        struct previous p;
        unsigned long long start, grant;
        int pid;
        unsigned uid;
        if (line[0] == '#' ||
            sscanf(line, "%d %llu %u %47s %llu", &pid, &start, &uid, p.uuid, &grant) != 5)
            continue;
        struct previous *t = realloc(D.prev, (size_t)(D.nprev + 1) * sizeof *t);
        if (!t)
            break;
        D.prev = t;
        p.pid = pid, p.start = start, p.uid = uid, p.grant = grant;
        D.prev[D.nprev++] = p;
    }
    fclose(f);
    if (D.nprev)
        dlog(L_INFO, "%d grants of the previous daemon may be re-registered", D.nprev);
}

bool vouched(const struct ledger_client *lc, const char *uuid, uint64_t bytes)
{
    for (int i = 0; i < D.nprev; i++) {
        struct previous *p = &D.prev[i];
        if (p->pid == lc->pid && p->start == lc->start && p->uid == lc->uid &&
            strcmp(p->uuid, uuid) == 0 && bytes <= p->grant) {
            p->pid = 0; /* once */
            return true;
        }
    }
    return false;
}

/* One file, written every `every_ms` while `due`; a failed write is tried
 * again at the next turn, and said once until it works again. */
struct output {
    const char *what;
    uint64_t last_ms;
    bool failing;
};

static void write_one(struct output *o, const char *path, mode_t mode, void (*fill)(FILE *),
                      bool *due)
{
    if (write_atomically(path, mode, fill) != 0) {
        if (!o->failing)
            dlog(L_WARN, "cannot write the %s file %s: %s%s; trying again", o->what, path,
                 strerror(errno), errno == EEXIST ? " (it is not a regular file)" : "");
        o->failing = true;
        return;
    }
    if (o->failing)
        dlog(L_WARN, "the %s file %s is written again", o->what, path);
    o->failing = false;
    if (due)
        *due = false;
}

void files_tick(uint64_t now)
{
    static struct output state = {"state", 0, false}, metrics = {"metrics", 0, false};
    if (D.state_dirty && D.state_path[0] && now - state.last_ms >= STATE_EVERY_MS) {
        state.last_ms = now;
        write_one(&state, D.state_path, 0600, fill_state, &D.state_dirty);
    }
    if (D.metrics_path[0] && now - metrics.last_ms >= D.metrics_ms) {
        metrics.last_ms = now;
        write_one(&metrics, D.metrics_path, 0644, fill_metrics, NULL);
    }
}

void files_flush(void)
{
    if (D.state_dirty && D.state_path[0] && write_atomically(D.state_path, 0600, fill_state) != 0)
        dlog(L_ERROR, "cannot write the state file %s: %s", D.state_path, strerror(errno));
}
