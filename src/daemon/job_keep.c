/* job_keep: a job kept while processes of it live (job_keep.h). */
#include "job_keep.h"

#include "../protocol/protocol.h"
#include "../util/proc.h"
#include "cgroups.h"
#include "containers.h"
#include "daemon.h"
#include "driver_limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FOUND_MAX 1024 /* processes found in one look, beyond the members */

/* Whether pid is still the process started at `start`, and not a zombie. */
static bool running(pid_t pid, uint64_t start, struct process_info *pi)
{
    return process_info(pid, pi) == 0 && (!start || pi->start == start) && pi->state != 'Z' &&
           pi->state != 'X';
}

/* Whether process pid shares the memory of the holder, which still runs:
 * a clone of the holder's (LeakSanitizer's tracer, which an ASan-built
 * vram run starts at its exit, after its connection closed; a vfork()ed
 * child before its exec), which is the holder, not a process of its
 * command. kcmp(2) compares the two; where it cannot (no such call, no
 * right to look), pid is taken for the command's. */
static bool holder_clone(pid_t holder, pid_t pid)
{
#ifdef SYS_kcmp
    enum { KCMP_VM = 1 }; /* linux/kcmp.h */
    return syscall(SYS_kcmp, holder, pid, KCMP_VM, 0, 0) == 0;
#else
    (void)holder, (void)pid;
    return false;
#endif
}

struct found {
    int n;
    pid_t pid[FOUND_MAX];
};

static void add(struct found *f, pid_t pid)
{
    for (int i = 0; i < f->n; i++)
        if (f->pid[i] == pid)
            return;
    if (f->n < FOUND_MAX)
        f->pid[f->n++] = pid;
}

/* The children of process pid, found. */
static void children_of(pid_t pid, struct found *f)
{
    pid_t kids[256];
    int n = proc_children(pid, kids, 256);
    for (int i = 0; i < n; i++)
        add(f, kids[i]);
}

bool job_keep_lives(struct ledger *l, struct ledger_client *c)
{
    struct found *f = malloc(sizeof *f);
    if (!f)
        return true; /* not known to be over */
    f->n = 0;
    bool lives = false;
    struct process_info pi;
    /* The members: the gone leave, the children of the others are found. */
    for (int k = c->nmembers - 1; k >= 0; k--) {
        struct ledger_client *m = c->members[k];
        if (!running(m->pid, m->start, &pi)) {
            ledger_leave(l, m);
            D.state_dirty = true;
            continue;
        }
        lives = true;
        children_of(m->pid, f);
    }
    bool holder_runs = !c->kept && running(c->pid, c->start, &pi);
    if (holder_runs)
        children_of(c->pid, f); /* a holder still exiting: what it started */
    /* A container's own cgroup (the runtime's), or the one vramd made. */
    const char *cgroup = containers_cgroup(c);
    if (!cgroup)
        cgroup = driver_limits_cgroup(c);
    if (cgroup) {
        pid_t in[256];
        int n = cg_procs(cgroup, in, 256);
        for (int i = 0; i < n && i < 256; i++)
            add(f, in[i]);
    }
    /* What was found joins, as a member does; the holder is not the job's
     * process, and nothing of another user's is taken for a user's job
     * but what its cgroup holds. */
    for (int i = 0; i < f->n; i++) {
        pid_t pid = f->pid[i];
        if (pid == c->pid || !running(pid, 0, &pi) || ledger_find_member(l, c, pid) ||
            (holder_runs && holder_clone(c->pid, pid)))
            continue;
        lives = true;
        bool in_cgroup = false;
        char at[CG_PATH_LEN];
        if (cgroup && cg_of(pid, at, sizeof at) == 0)
            in_cgroup = cg_at_or_below(at, cgroup);
        if (!c->by_root && pi.uid != c->uid && !in_cgroup)
            continue;
        struct ledger_client *m = ledger_member(l, c, pid, pi.start);
        if (m) {
            proto_name_clean(pi.comm, m->cmd, sizeof m->cmd);
            D.state_dirty = true;
        }
    }
    free(f);
    return lives;
}

void job_keep_tick(struct ledger *l, uint64_t now, void (*over)(struct ledger_client *c))
{
    static uint64_t last;
    if (!l->nkept || now - last < KEEP_CHECK_MS)
        return;
    last = now;
    for (int i = 0; i < l->njobs; i++) {
        struct ledger_client *c = l->jobs[i];
        if (!c->kept || job_keep_lives(l, c))
            continue;
        over(c); /* it leaves l->jobs: the one now at i is next */
        i--;
    }
}
