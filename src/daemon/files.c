/* files: what vramd writes beside itself, each whole or not at all.
 *   - the state file: the grants, by pid + start time + uid, so that
 *     clients re-registering after a restart cannot claim more than they
 *     held; written by root, atomically, within 100 ms of a change; and
 *     before a grant is said (a kill -9 after GRANT must find it), each
 *     new grant is appended to the file's journal (STATE.grants), one
 *     write per turn of the loop, which the next whole write empties;
 *   - the metrics file: the ledger in Prometheus text format, for
 *     node_exporter's textfile collector.
 */
#include "containers.h"
#include "daemon.h"

#include "../protocol/snapshot.h"
#include "../view/metrics.h"

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
    /* A temporary name no one can guess, created here (O_EXCL: never an
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

/* Anyone may read the metrics file (node_exporter's collector does): it
 * shows what anyone may see, per-user totals, never a process. */
void fill_metrics(FILE *f)
{
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot(&D.L, LEDGER_VIEW_ANYONE, &s);
    s.node = D.node;
    snapshot_prometheus(&s, f);
    snapshot_free(&s);
}

/* The state file: one line per device ("d UUID TOTAL") and per grant
 *   p|j|c PID START UID GID JOB UUID BYTES FROM-JOB
 * (a process, a job root registered, or a user's command; JOB and
 * FROM-JOB are names or "-"), so that the
 * daemon after this one holds each grant for its owner until it
 * re-registers (answers.c) or RESTORE_GRACE_MS pass; and one per process
 * of a job
 *   m j|c HOLDER-PID HOLDER-START UID JOB PID START
 * so that a job whose holder is gone by then is kept for them
 * (job_keep.h); and one per container's job (containers.h: "k ..."), the
 * cgroup that holds it. */
static int state_line(char *buf, size_t n, const struct ledger_client *c, int d)
{
    const struct ledger_use *u = &c->use[d];
    if (c->role == ROLE_MONITOR || !u->grant)
        return 0;
    int len = snprintf(buf, n, "%c %d %llu %u %u %s %s %llu %s\n",
                       c->role != ROLE_JOB ? 'p' : c->by_root ? 'j' : 'c', (int)c->pid,
                       (unsigned long long)c->start, (unsigned)c->uid, (unsigned)c->gid, c->job,
                       D.L.dev[d].uuid, (unsigned long long)u->grant, u->job ? u->job->job : "-");
    return len > 0 && (size_t)len < n ? len : 0;
}

void fill_state(FILE *f)
{
    fprintf(f, "# vramd grants: p|j|c pid start uid gid job device bytes from-job\n");
    fprintf(f, "# and jobs' processes: m j|c holder-pid holder-start uid job pid start\n");
    fprintf(f, "# and containers' jobs: k j|c holder-pid holder-start uid job as id cgroup\n");
    for (int d = 0; d < D.L.ndev; d++)
        fprintf(f, "d %s %llu\n", D.L.dev[d].uuid, (unsigned long long)D.L.dev[d].total);
    char line[STATE_LINE_MAX];
    for (int i = 0; i < D.L.nclients; i++)
        for (int d = 0; d < D.L.ndev; d++)
            if (state_line(line, sizeof line, D.L.clients[i], d))
                fputs(line, f);
    containers_fill_state(&D.L, f);
    for (int i = 0; i < D.L.njobs; i++) {
        const struct ledger_client *j = D.L.jobs[i];
        for (int k = 0; k < j->nmembers; k++)
            fprintf(f, "m %c %d %llu %u %s %d %llu\n", j->by_root ? 'j' : 'c', (int)j->pid,
                    (unsigned long long)j->start, (unsigned)j->uid, j->job,
                    (int)j->members[k]->pid, (unsigned long long)j->members[k]->start);
    }
}

/* A process of a job held for its holder: "m ..." (above). 0, or -1 if
 * the line cannot be read. */
static int read_member(const char *line)
{
    char role[2], job[64];
    int hpid, pid;
    unsigned long long hstart, start;
    unsigned uid;
    if (sscanf(line, "m %1s %d %llu %u %63s %d %llu", role, &hpid, &hstart, &uid, job, &pid,
               &start) != 7 ||
        !strchr("jc", role[0]) || hpid <= 0 || pid <= 0 || !hstart || !start ||
        !proto_name_ok(job))
        return -1;
    for (int i = 0; i < D.L.njobs; i++) {
        struct ledger_client *j = D.L.jobs[i];
        if (j->held_until_ms && j->by_root == (role[0] == 'j') && j->pid == hpid &&
            j->start == hstart && j->uid == uid && strcmp(j->job, job) == 0) {
            ledger_member(&D.L, j, (pid_t)pid, start);
            return 0;
        }
    }
    return 0; /* its job's grant is not there (dropped above): nothing to keep */
}

struct held_line {
    char role;
    int pid;
    unsigned long long start, bytes;
    unsigned uid, gid;
    char job[64], uuid[48], from[64];
};

static int read_held(const char *line, struct held_line *h)
{
    char role[2];
    if (sscanf(line, "%1s %d %llu %u %u %63s %47s %llu %63s", role, &h->pid, &h->start, &h->uid,
               &h->gid, h->job, h->uuid, &h->bytes, h->from) != 9 ||
        !strchr("pjc", role[0]) || h->pid <= 0 || !h->start || !h->bytes ||
        !proto_name_ok(h->job) || !proto_name_ok(h->from))
        return -1;
    h->role = role[0];
    return 0;
}

void load_state_from(FILE *f)
{
    char line[512];
    int held = 0, bad = 0;
    uint64_t until = now_ms() + RESTORE_GRACE_MS;
    /* Two passes: the jobs first, so that their processes' grants draw from them. */
    for (int pass = 0; pass < 2; pass++) {
        rewind(f);
        while (fgets(line, sizeof line, f)) {
            char uuid[48];
            unsigned long long total;
            struct held_line h;
            if (line[0] == '#')
                continue;
            if (line[0] == 'm' || line[0] == 'k') {
                if (pass == 1 && (line[0] == 'm' ? read_member(line)
                                                 : containers_read_line(&D.L, line)) != 0)
                    bad++;
                continue;
            }
            if (line[0] == 'd') {
                /* Devices NVML lists keep NVML's size; without NVML, the
                 * daemon's own file is as good as root's word. */
                if (pass == 0 && sscanf(line, "d %47s %llu", uuid, &total) == 2 &&
                    proto_name_ok(uuid) && total && D.ngpus == 0 &&
                    ledger_device(&D.L, uuid, total) < 0)
                    bad++;
                continue;
            }
            if (read_held(line, &h) != 0) {
                bad += pass == 0;
                continue;
            }
            if ((h.role != 'p') != (pass == 0))
                continue;
            int dev = ledger_find_device(&D.L, h.uuid);
            if (dev < 0) {
                dlog(L_WARN, "%s: a grant on %s, which is not a GPU of this node; dropped",
                     D.state_path, h.uuid);
                continue;
            }
            struct ledger_client *c =
                ledger_hold(&D.L, h.role == 'p' ? ROLE_PROCESS : ROLE_JOB, h.role == 'j',
                            (pid_t)h.pid, h.start, (uid_t)h.uid, (gid_t)h.gid, h.job, dev, h.bytes,
                            strcmp(h.from, "-") ? h.from : NULL, until);
            if (!c)
                break;
            user_name(c->uid, c->user, sizeof c->user);
            held++;
        }
    }
    if (bad)
        dlog(L_WARN, "%s: %d line%s that cannot be read; ignored", D.state_path, bad,
             bad == 1 ? "" : "s");
    if (held) {
        dlog(L_INFO, "%d grant%s of the previous daemon %s held for their owners for %d s",
             held, held == 1 ? "" : "s", held == 1 ? "is" : "are", RESTORE_GRACE_MS / 1000);
        D.state_dirty = true;
    }
}

/* Only a file this daemon's user wrote and no one else can is believed. */
static bool trusted(int fd, const char *path)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 022))
        return true;
    dlog(L_WARN, "%s: not a regular file of this daemon's user that only it may write; ignored",
         path);
    return false;
}

static void journal_path(char *out, size_t n) { snprintf(out, n, "%s.grants", D.state_path); }

void files_read_trusted(const char *path, char **buf, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return;
    struct stat st;
    if (trusted(fd, path) && fstat(fd, &st) == 0 && st.st_size < (64 << 20)) {
        char *t = realloc(*buf, *len + (size_t)st.st_size + 2);
        if (t) {
            *buf = t;
            ssize_t r;
            size_t got = 0;
            while (got < (size_t)st.st_size &&
                   (r = read(fd, t + *len + got, (size_t)st.st_size - got)) > 0)
                got += (size_t)r;
            *len += got;
            if (*len && t[*len - 1] != '\n') /* a journal's torn last line stays one line */
                t[(*len)++] = '\n';
        }
    }
    close(fd);
}

/* The state file, then its journal: a grant in both is held once (the
 * journal's, newer, last). */
void load_state(void)
{
    char jpath[sizeof D.state_path + 8], *buf = NULL;
    size_t len = 0;
    journal_path(jpath, sizeof jpath);
    files_read_trusted(D.state_path, &buf, &len);
    files_read_trusted(jpath, &buf, &len);
    FILE *f = len ? fmemopen(buf, len, "r") : NULL;
    if (f) {
        load_state_from(f);
        fclose(f);
    }
    free(buf);
}

/* The fallback file, beside the socket: what a process may take of each
 * GPU while the daemon is down (the policy's default budget; 0 without
 * one). Clients read it when the daemon does not answer (agent.c), so a
 * daemon that is down never means a node without budgets. */
static void fill_fallback(FILE *f)
{
    fprintf(f, "# written by vramd: what a process may take of each GPU while vramd is down\n");
    for (int d = 0; d < D.L.ndev; d++)
        fprintf(f, "%s %llu\n", D.L.dev[d].uuid,
                (unsigned long long)(D.L.policy.has_default
                                         ? amount_of(&D.L.policy.default_budget, D.L.dev[d].total)
                                         : 0));
}

void files_fallback(void)
{
    if (D.fallback_path[0] && write_atomically(D.fallback_path, 0644, fill_fallback) != 0)
        dlog(L_WARN, "cannot write the fallback file %s: %s; while the daemon is down, processes "
             "will hold only the budgets they give", D.fallback_path, strerror(errno));
}

/* One file, written every `every_ms` while `due`; a failed write is tried
 * again at the next turn, and said once until it works again. */
struct output {
    const char *what;
    uint64_t last_ms;
    bool failing;
};

static int write_one(struct output *o, const char *path, mode_t mode, void (*fill)(FILE *),
                     bool *due)
{
    if (write_atomically(path, mode, fill) != 0) {
        if (!o->failing)
            dlog(L_WARN, "cannot write the %s file %s: %s%s; trying again", o->what, path,
                 strerror(errno), errno == EEXIST ? " (it is not a regular file)" : "");
        o->failing = true;
        return -1;
    }
    if (o->failing)
        dlog(L_WARN, "the %s file %s is written again", o->what, path);
    o->failing = false;
    if (due)
        *due = false;
    return 0;
}

static struct output state = {"state", 0, false}, metrics = {"metrics", 0, false};
static int journal = -1; /* 0: none to be had */

static int open_journal(void);

/* The whole state is in the file: the journal starts again (the previous
 * daemon's too, read by now). A daemon killed between the two finds the
 * journal's grants in both, which holds each once. */
static void write_state(void)
{
    if (write_one(&state, D.state_path, 0600, fill_state, &D.state_dirty) != 0)
        return;
    if (journal < 0)
        journal = open_journal();
    if (journal > 0 && ftruncate(journal, 0) != 0)
        dlog(L_WARN, "cannot empty the state's journal: %s", strerror(errno));
}

static int open_journal(void)
{
    char path[sizeof D.state_path + 8];
    journal_path(path, sizeof path);
    /* Written through, unlike the state file: never a link (O_NOFOLLOW),
     * a FIFO (O_NONBLOCK, then trusted()), or a second name of a file. */
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    struct stat st;
    if (fd >= 0 && (!trusted(fd, path) || fstat(fd, &st) != 0 || st.st_nlink != 1)) {
        close(fd);
        fd = -1;
        errno = EEXIST;
    }
    if (fd < 0)
        dlog(L_WARN, "cannot use %s (%s): each grant rewrites the whole state file instead",
             path, strerror(errno));
    return fd < 0 ? 0 : fd;
}

/* No fsync: the file is for a daemon killed or crashed, not for a machine
 * that loses power, and what a write() put in a file every process sees,
 * whatever then happens to the writer; the clients whose grants it holds
 * die with the machine. */
void files_grants_durable(struct ledger_client *const *who, const int *dev, int n)
{
    if (!D.state_path[0])
        return;
    if (journal < 0)
        journal = open_journal();
    size_t cap = (size_t)n * STATE_LINE_MAX, len = 0;
    char *buf = journal > 0 && n > 0 ? malloc(cap) : NULL;
    for (int i = 0; buf && i < n; i++)
        if (who[i])
            len += (size_t)state_line(buf + len, cap - len, who[i], dev[i]);
    bool journaled = buf && (!len || write(journal, buf, len) == (ssize_t)len);
    free(buf);
    if (!journaled)
        write_state(); /* no journal, or it failed: the whole file */
}

void files_tick(uint64_t now)
{
    if (D.state_dirty && D.state_path[0] && now - state.last_ms >= STATE_EVERY_MS) {
        state.last_ms = now;
        write_state();
    }
    if (D.metrics_path[0] && now - metrics.last_ms >= D.metrics_ms) {
        metrics.last_ms = now;
        write_one(&metrics, D.metrics_path, 0644, fill_metrics, NULL);
    }
}

void files_flush(void)
{
    if (!D.state_dirty || !D.state_path[0])
        return;
    if (write_atomically(D.state_path, 0600, fill_state) != 0)
        dlog(L_ERROR, "cannot write the state file %s: %s", D.state_path, strerror(errno));
    else if ((journal > 0 || (journal < 0 && (journal = open_journal()) > 0)) &&
             ftruncate(journal, 0) != 0)
        dlog(L_WARN, "cannot empty the state's journal: %s", strerror(errno));
}
