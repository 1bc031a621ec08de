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
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -1;
    fchmod(fd, mode);
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    fill(f);
    if (fflush(f) != 0 || ferror(f)) {
        fclose(f);
        unlink(tmp);
        return -1;
    }
    fclose(f);
    if (rename(tmp, path) != 0) {
        unlink(tmp);
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
