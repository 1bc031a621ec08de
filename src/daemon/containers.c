/* containers: a container as one vramd job (containers.h). */
#include "containers.h"

#include "../command/command_state.h"
#include "../protocol/protocol.h"
#include "../util/container.h"
#include "daemon.h"
#include "job_keep.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CGROUP_PROCS_MAX 4096 /* processes of one cgroup looked at, at most */

struct ctr {
    int job;                       /* the ledger client's id */
    char id[CONTAINER_ID_MAX + 1]; /* the runtime's */
    char dir[CG_PATH_LEN];         /* its cgroup, on the mount */
    uid_t as;                      /* its command state's owner */
    struct command_owner state;    /* fd -1 until made or found */
    int watch;                     /* its cgroup.events' inotify watch, or -1 */
    bool looked;                   /* for a state its processes hold (found_state) */
};

static struct {
    struct ctr *c;
    int n;
    int inotify;
    bool started;
} K = {.inotify = -1};

/* The inotify descriptor, made once: vramd's loop watches it from its
 * start (a test's daemon without the loop has none, and no watch). */
int containers_fd(void)
{
    if (!K.started) {
        K.started = true;
        K.inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (K.inotify < 0)
            dlog(L_WARN, "inotify: %s; a container's job ends only at its poststop hook or when "
                 "vramd next looks at its cgroup (every %d ms)", strerror(errno), KEEP_CHECK_MS);
    }
    return K.inotify;
}

static struct ctr *by_job(int job)
{
    for (int i = 0; i < K.n; i++)
        if (K.c[i].job == job)
            return &K.c[i];
    return NULL;
}

/* ------------------------------------------------------------- checks */

static unsigned long pid_namespace(pid_t pid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid);
    return stat(path, &st) == 0 ? (unsigned long)st.st_ino : 0;
}

int containers_check(const struct container_claim *k, uid_t uid, char *dir, size_t n,
                     uint64_t *start, char *why, size_t whylen)
{
    if (!container_id_ok(k->id)) {
        snprintf(why, whylen, "id=\"%.80s\" is not a container's id (1 to %d of A-Z a-z 0-9 _ . "
                 "+ -)", k->id, CONTAINER_ID_MAX);
        return -1;
    }
    if (!cg_hierarchy_path_ok(k->cgroup) || strcmp(k->cgroup, "/") == 0 ||
        !container_cgroup_names(k->cgroup, k->id)) {
        snprintf(why, whylen, "cgroup=%.300s is not container %.12s's own: a container's cgroup "
                 "is a path in the cgroup2 hierarchy (/ then names without . or .. parts) whose "
                 "last part names its id (libpod-ID, docker-ID.scope, ID)", k->cgroup, k->id);
        return -1;
    }
    struct process_info pi;
    if (k->pid <= 0 || process_info(k->pid, &pi) != 0 || pi.state == 'Z' || pi.state == 'X') {
        snprintf(why, whylen, "pid %d: no such process (a container's first process is there "
                 "while its runtime runs the hook)", (int)k->pid);
        return -1;
    }
    char here[CG_PATH_LEN];
    int len = snprintf(dir, n, "%s%s", cg_mount(), k->cgroup);
    if (len < 0 || (size_t)len >= n || cg_of(k->pid, here, sizeof here) != 0) {
        snprintf(why, whylen, "cannot tell which cgroup pid %d is in (/proc/%d/cgroup): it is "
                 "gone, or not in the cgroup2 hierarchy at %s", (int)k->pid, (int)k->pid,
                 cg_mount()[0] ? cg_mount() : "(none mounted)");
        return -1;
    }
    if (strcmp(here, dir) != 0) {
        snprintf(why, whylen, "pid %d is in the cgroup %.250s, not in cgroup=%.250s: not the "
                 "container's process, or not its cgroup", (int)k->pid, here, k->cgroup);
        return -1;
    }
    if (uid != 0) {
        /* A user's own container (rootless podman): the kernel says whose
         * its processes are, and that it is one. */
        if (pi.uid != uid) {
            snprintf(why, whylen, "pid %d is user %u's, not yours (user %u): a user registers "
                     "only a container of their own", (int)k->pid, (unsigned)pi.uid,
                     (unsigned)uid);
            return -1;
        }
        if (pid_namespace(k->pid) == pid_namespace(getpid())) {
            snprintf(why, whylen, "pid %d is in vramd's own pid namespace: not a container's "
                     "first process", (int)k->pid);
            return -1;
        }
        pid_t *in = malloc(CGROUP_PROCS_MAX * sizeof *in);
        int found = in ? cg_procs(dir, in, CGROUP_PROCS_MAX) : -1;
        for (int i = 0; i < found && i < CGROUP_PROCS_MAX; i++) {
            struct process_info other;
            if (process_info(in[i], &other) == 0 && other.uid != uid) {
                snprintf(why, whylen, "the cgroup %.300s holds pid %d, a process of user %u: "
                         "a user registers only a cgroup of their own processes", k->cgroup,
                         (int)in[i], (unsigned)other.uid);
                free(in);
                return -1;
            }
        }
        free(in);
        if (found < 0 || found > CGROUP_PROCS_MAX) {
            snprintf(why, whylen, "cannot read the processes of the cgroup %.300s", k->cgroup);
            return -1;
        }
    }
    *start = pi.start;
    return 0;
}

void containers_job_name(const char *id, const char *name, char *out, size_t n)
{
    char short_id[13];
    snprintf(short_id, sizeof short_id, "%.12s", id);
    if (strcmp(name, short_id) == 0)
        snprintf(out, n, "%s", short_id);
    else /* a name of at most 50 characters, then @ and the short id: 63 */
        snprintf(out, n, "%.50s@%s", name, short_id);
}

/* ------------------------------------------------------------ records */

struct ledger_client *containers_find(const struct ledger *l, const char *id)
{
    for (int i = 0; i < K.n; i++)
        if (strcmp(K.c[i].id, id) == 0)
            return ledger_find_client(l, K.c[i].job);
    return NULL;
}

static void watch(struct ctr *k)
{
    char events[CG_PATH_LEN + 16];
    snprintf(events, sizeof events, "%s/cgroup.events", k->dir);
    k->watch = containers_fd() >= 0 ? inotify_add_watch(K.inotify, events, IN_MODIFY) : -1;
    if (k->watch < 0 && K.inotify >= 0)
        dlog(L_WARN, "cannot watch %s (%s): container %.12s's job ends at its poststop hook, "
             "or when vramd next looks at its cgroup", events, strerror(errno), k->id);
}

int containers_add(const struct ledger_client *c, const char *id, const char *dir, uid_t as,
                   char *why, size_t n)
{
    for (int i = 0; i < K.n; i++)
        if (strcmp(K.c[i].dir, dir) == 0 || strcmp(K.c[i].id, id) == 0) {
            snprintf(why, n, "the cgroup %.300s is container %.12s's job already", dir,
                     K.c[i].id);
            return -1;
        }
    struct ctr *grown = realloc(K.c, (size_t)(K.n + 1) * sizeof *grown);
    if (!grown) {
        snprintf(why, n, "vramd is out of memory");
        return -1;
    }
    K.c = grown;
    struct ctr *k = &K.c[K.n++];
    memset(k, 0, sizeof *k);
    k->job = c->id;
    snprintf(k->id, sizeof k->id, "%s", id);
    snprintf(k->dir, sizeof k->dir, "%s", dir);
    k->as = as;
    k->state.fd = -1;
    watch(k);
    return 0;
}

const char *containers_cgroup(const struct ledger_client *c)
{
    const struct ctr *k = c->role == ROLE_JOB ? by_job(c->id) : NULL;
    return k ? k->dir : NULL;
}

static void forget_state(struct ctr *k)
{
    if (k->state.shared)
        munmap(k->state.shared, sizeof *k->state.shared);
    if (k->state.fd >= 0)
        close(k->state.fd);
    k->state.shared = NULL;
    k->state.fd = -1;
}

void containers_end(const struct ledger_client *c)
{
    struct ctr *k = c->role == ROLE_JOB ? by_job(c->id) : NULL;
    if (!k)
        return;
    forget_state(k);
    if (k->watch >= 0)
        inotify_rm_watch(K.inotify, k->watch);
    *k = K.c[--K.n];
}

/* ------------------------------------------------- the command state */

static void note_state(struct ledger_client *c, const struct ctr *k)
{
    struct stat st;
    if (fstat(k->state.fd, &st) == 0) {
        c->state_dev = (uint64_t)st.st_dev;
        c->state_ino = (uint64_t)st.st_ino;
    }
}

/* A new state for the job, its device entries its grants so far. */
static int make_state(struct ledger_client *c, const struct ledger *l, struct ctr *k, char *why,
                      size_t n)
{
    if (command_create(&k->state, COMMAND_SHARED, NULL, NULL, NULL, 0, why, n) != 0) {
        k->state.fd = -1;
        return -1;
    }
    /* No supervisor: vramd is not an ancestor of the container's processes. */
    k->state.shared->supervisor = 0;
    command_set_granted(&k->state);
    if (k->as && fchown(k->state.fd, k->as, (gid_t)-1) != 0) {
        snprintf(why, n, "cannot give the container's command state to user %u: %s",
                 (unsigned)k->as, strerror(errno));
        forget_state(k);
        return -1;
    }
    for (int d = 0; l && d < l->ndev; d++)
        if (c->use[d].grant)
            command_grant(&k->state, l->dev[d].uuid, d, c->use[d].grant);
    note_state(c, k);
    return 0;
}

int containers_grant(struct ledger_client *c, const char *uuid, int index, uint64_t bytes,
                     char *why, size_t n)
{
    struct ctr *k = by_job(c->id);
    if (!k)
        return 0;
    if (k->state.fd < 0)
        return make_state(c, &D.L, k, why, n);
    if (command_grant(&k->state, uuid, index, bytes) != 0) {
        snprintf(why, n, "the container's command state has %d GPUs already", COMMAND_MAX_DEVICES);
        return -1;
    }
    return 0;
}

/* A state a process of the container holds open (vramd restarted, and
 * made the one it hands out before): the first one that is one. */
static bool found_state(struct ctr *k)
{
    pid_t *in = malloc(CGROUP_PROCS_MAX * sizeof *in);
    int found = in ? cg_procs(k->dir, in, CGROUP_PROCS_MAX) : -1;
    for (int i = 0; i < found && i < CGROUP_PROCS_MAX && k->state.fd < 0; i++) {
        char dir[64];
        snprintf(dir, sizeof dir, "/proc/%d/fd", (int)in[i]);
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && k->state.fd < 0 && (e = readdir(d))) {
            char target[64], path[320];
            ssize_t len = readlinkat(dirfd(d), e->d_name, target, sizeof target - 1);
            if (len <= 0 || (target[len] = 0, strncmp(target, "/memfd:vram-command", 19) != 0))
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            int f = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
            struct stat st;
            int seals = f >= 0 ? fcntl(f, F_GET_SEALS) : -1;
            struct command_shared *s = MAP_FAILED;
            if (f >= 0 && fstat(f, &st) == 0 && S_ISREG(st.st_mode) &&
                st.st_size == (off_t)sizeof *s &&
                (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) == (F_SEAL_SHRINK | F_SEAL_GROW))
                s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
            if (s != MAP_FAILED && memcmp(s->magic, COMMAND_MAGIC, sizeof COMMAND_MAGIC) == 0 &&
                s->version == COMMAND_VERSION && (s->flags & COMMAND_GRANTED)) {
                k->state.fd = f;
                k->state.shared = s;
                continue;
            }
            if (s != MAP_FAILED)
                munmap(s, sizeof *s);
            if (f >= 0)
                close(f);
        }
        if (d)
            closedir(d);
    }
    free(in);
    return k->state.fd >= 0;
}

struct ledger_client *containers_of_process(const struct ledger *l, pid_t pid, uint64_t start,
                                            int *fd, char *why, size_t n)
{
    char here[CG_PATH_LEN];
    *fd = -1;
    if (cg_of(pid, here, sizeof here) != 0 || !same_process(pid, start)) {
        snprintf(why, n, "cannot tell which cgroup pid %d is in", (int)pid);
        return NULL;
    }
    for (int i = 0; i < K.n; i++) {
        struct ctr *k = &K.c[i];
        struct ledger_client *c = ledger_find_client(l, k->job);
        if (!c || !cg_at_or_below(here, k->dir))
            continue;
        if (k->state.fd < 0 && found_state(k)) {
            note_state(c, k);
            dlog(L_INFO, "job %s (%s): its command state, held by its processes, taken back",
                 c->job, c->user);
        } else if (k->state.fd < 0 && make_state(c, l, k, why, n) != 0) {
            return c;
        }
        *fd = k->state.fd;
        return c;
    }
    snprintf(why, n, "pid %d is in the cgroup %.300s, which is no container's job", (int)pid,
             here);
    return NULL;
}

/* ------------------------------------------------------------ reports */

static bool found_state(struct ctr *k);

void containers_report(struct ledger *l, uint64_t now)
{
    static uint64_t last;
    if (!K.n || now - last < CONTAINERS_REPORT_MS)
        return;
    last = now;
    for (int i = 0; i < K.n; i++) {
        struct ledger_client *c = ledger_find_client(l, K.c[i].job);
        /* After a restart: the state the container's processes hold. */
        if (c && !K.c[i].state.shared && !K.c[i].looked) {
            K.c[i].looked = true;
            if (found_state(&K.c[i]))
                note_state(c, &K.c[i]);
        }
        struct command_shared *s = K.c[i].state.shared;
        if (!s || !c)
            continue;
        /* Read only: the state is the container's processes' to write, so
         * every count in it is bounded here, and nothing is written back
         * (dead slots are the processes' to reclaim). */
        uint32_t nd = atomic_load(&s->devices), slots = atomic_load(&s->slots);
        nd = nd < COMMAND_MAX_DEVICES ? nd : COMMAND_MAX_DEVICES;
        slots = slots < COMMAND_MAX_SLOTS ? slots : COMMAND_MAX_SLOTS;
        bool alive[COMMAND_MAX_SLOTS];
        for (uint32_t x = 0; x < slots; x++)
            alive[x] = atomic_load(&s->pid[x]) != 0 && command_slot_alive(K.c[i].state.fd, (int)x);
        for (uint32_t e = 0; e < nd; e++) {
            char uuid[COMMAND_UUID_SIZE];
            snprintf(uuid, sizeof uuid, "%.*s", COMMAND_UUID_SIZE - 1, s->device[e].uuid);
            int d = ledger_find_device(l, uuid);
            if (d < 0 || !c->use[d].grant)
                continue;
            uint64_t used = 0, total = l->dev[d].total;
            for (uint32_t x = 0; x < slots; x++) {
                uint64_t v = alive[x] ? atomic_load(&s->used[e][x]) : 0;
                used = v > total - used ? total : used + v;
            }
            uint64_t peak = atomic_load(&s->device[e].peak);
            ledger_report(l, c, d, used, peak > total ? total : peak > used ? peak : used);
            history_note_client(&D.history, c, d, now);
        }
    }
}

/* ---------------------------------------------------------- the watch */

/* Whether the cgroup has no process left: its cgroup.events says
 * "populated 0", or it is gone. */
static bool emptied(const struct ctr *k)
{
    char path[CG_PATH_LEN + 16], text[256];
    snprintf(path, sizeof path, "%s/cgroup.events", k->dir);
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0)
        return errno == ENOENT;
    ssize_t len = read(f, text, sizeof text - 1);
    close(f);
    if (len <= 0)
        return false;
    text[len] = 0;
    return strstr(text, "populated 0") != NULL;
}

void containers_take(struct ledger *l, void (*over)(struct ledger_client *c))
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool changed = false;
    ssize_t len;
    while (K.inotify >= 0 && (len = read(K.inotify, buf, sizeof buf)) > 0)
        changed = true;
    if (!changed)
        return;
    /* Few containers, and an event is rare: every watched one is looked at.
     * The kernel's "populated 0" is the end: its last process may not be a
     * zombie yet in /proc (it leaves its cgroup a moment before), but its
     * files, the GPU's among them, are closed by then. */
    for (int i = 0; i < K.n; i++) {
        struct ledger_client *c = ledger_find_client(l, K.c[i].job);
        if (!c || !c->kept || !emptied(&K.c[i]))
            continue;
        over(c); /* it leaves K.c: the one now at i is next */
        i--;
    }
}

/* ------------------------------------------------------- the state file */

void containers_fill_state(const struct ledger *l, FILE *f)
{
    for (int i = 0; i < K.n; i++) {
        const struct ledger_client *c = ledger_find_client(l, K.c[i].job);
        if (c)
            fprintf(f, "k %c %d %llu %u %s %u %s %s\n", c->by_root ? 'j' : 'c', (int)c->pid,
                    (unsigned long long)c->start, (unsigned)c->uid, c->job, (unsigned)K.c[i].as,
                    K.c[i].id, K.c[i].dir);
    }
}

int containers_read_line(struct ledger *l, const char *line)
{
    char role[2], job[64], id[CONTAINER_ID_MAX + 1], why[400];
    int hpid, at = 0;
    unsigned long long hstart;
    unsigned uid, as;
    if (sscanf(line, "k %1s %d %llu %u %63s %u %255s %n", role, &hpid, &hstart, &uid, job, &as,
               id, &at) != 7 || !at || !strchr("jc", role[0]) || hpid <= 0 || !hstart ||
        !proto_name_ok(job) || !container_id_ok(id))
        return -1;
    char dir[CG_PATH_LEN];
    snprintf(dir, sizeof dir, "%.*s", (int)strcspn(line + at, "\n"), line + at);
    const char *mount = cg_mount();
    size_t m = strlen(mount);
    if (strncmp(dir, mount, m) != 0 || !cg_hierarchy_path_ok(dir + m) ||
        !container_cgroup_names(dir, id))
        return -1;
    if (!cg_is_cgroup(dir))
        return 0; /* the container is gone: its job ends with its held grant */
    for (int i = 0; i < l->njobs; i++) {
        struct ledger_client *j = l->jobs[i];
        if (j->held_until_ms && j->by_root == (role[0] == 'j') && j->pid == hpid &&
            j->start == hstart && j->uid == uid && strcmp(j->job, job) == 0) {
            if (containers_add(j, id, dir, (uid_t)as, why, sizeof why) != 0)
                dlog(L_WARN, "job %s: %s", job, why);
            snprintf(j->cmd, sizeof j->cmd, "container");
            return 0;
        }
    }
    return 0;
}
