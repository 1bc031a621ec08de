/* command: this process as a member of its command (see command.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "command_state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------- this process's standing */

#define MAX_ENTRIES 4 /* places VRAM_COMMAND names: vram run's, then the nearest members' */

static struct {
    /* Claim, sweep and registry: the probe's locks belong to its open file
     * description, which all threads share, so they exclude no thread of
     * this process; this does. */
    pthread_mutex_t mu;
    struct command_shared *s;
    bool named;  /* VRAM_COMMAND was set: this process belongs to a command */
    bool shared; /* s is a command's state, not private memory */
    enum command_mode mode;
    _Atomic int own;    /* this process's slot; -1 until its first reservation */
    int probe;          /* a descriptor of the state: for locks, and for children */
    dev_t probe_dev;
    ino_t probe_ino;
    unsigned char id[16];
    int nentries;
    int entry_pid[MAX_ENTRIES], entry_fd[MAX_ENTRIES];
    char open_error[384]; /* why the state could not be opened */
    char claim_error[256];
    uint64_t margin; /* command_set_margin */
} me = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .own = -1,
    .probe = -1,
};

/* Reads VRAM_COMMAND ("ID:PID/FD,PID/FD,...") into me.entry_*. */
static int parse_env(const char *v, char *why, size_t n)
{
    const char *accepted = "accepted: what vram run sets, 32 hex digits, a colon, then "
                           "PID/FD pairs separated by commas";
    if (strlen(v) < 34 || v[32] != ':' || command_id_parse(v, me.id) != 0) {
        snprintf(why, n, "%s=\"%.80s\" is not a command reference; %s", COMMAND_ENV, v, accepted);
        return -1;
    }
    const char *p = v + 33;
    me.nentries = 0;
    while (*p && me.nentries < MAX_ENTRIES) {
        int pid, fd, used = 0;
        if (sscanf(p, "%d/%d%n", &pid, &fd, &used) != 2 || pid <= 0 || fd < 0 ||
            (p[used] && p[used] != ',')) {
            snprintf(why, n, "%s=\"%.80s\" is not a command reference; %s", COMMAND_ENV, v,
                     accepted);
            return -1;
        }
        me.entry_pid[me.nentries] = pid;
        me.entry_fd[me.nentries++] = fd;
        p += used + (p[used] == ',');
    }
    if (!me.nentries) {
        snprintf(why, n, "%s=\"%.80s\" names no process; %s", COMMAND_ENV, v, accepted);
        return -1;
    }
    return 0;
}


/* The state held by the nearest live ancestor: a process that started
 * while the command's state was reachable holds it for its descendants,
 * even after vram run and the processes VRAM_COMMAND names have gone (a
 * forked subshell, whose environment still names its dead parent, too). */
static int open_from_ancestors(void)
{
    char why[256];
    for (int pid = getppid(), depth = 0; pid > 1 && depth < 64; pid = command_parent_of(pid), depth++) {
        char dir[64];
        snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
        DIR *d = opendir(dir);
        if (!d)
            continue;
        struct dirent *e;
        int f = -1;
        while (f < 0 && (e = readdir(d))) {
            char path[320], target[64];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            ssize_t len = readlink(path, target, sizeof target - 1);
            if (len > 0 && (target[len] = 0, strncmp(target, "/memfd:vram-command", 19) == 0))
                f = command_state_open(pid, atoi(e->d_name), me.id, why, sizeof why);
        }
        closedir(d);
        if (f >= 0)
            return f;
    }
    return -1;
}

/* A descriptor of the state from the places VRAM_COMMAND names, then from
 * this process's ancestors; or -1 with the first reason (vram run's, which
 * is what a person can act on). */
static int open_named(char *why, size_t n)
{
    char first[256] = "", other[256];
    for (int i = 0; i < me.nentries; i++) {
        int f = command_state_open(me.entry_pid[i], me.entry_fd[i], me.id, i ? other : first,
                           i ? sizeof other : sizeof first);
        if (f >= 0)
            return f;
    }
    int f = open_from_ancestors();
    if (f >= 0)
        return f;
    snprintf(why, n,
             "cannot join the GPU budget of the vram run command this process belongs to: its "
             "shared state is not reachable: %s",
             first[0] ? first : other);
    return -1;
}

static void keep_probe(int f)
{
    /* Out of the way of the low numbers shells and programs pick themselves. */
    int high = fcntl(f, F_DUPFD_CLOEXEC, 100);
    if (high >= 0) {
        close(f);
        f = high;
    }
    struct stat st;
    fstat(f, &st);
    me.probe = f;
    me.probe_dev = st.st_dev;
    me.probe_ino = st.st_ino;
}

/* The probe is still ours: a program may have closed it, and the number
 * may now be another file's, whose locks we must never touch. */
static bool probe_ok(void)
{
    struct stat st;
    if (me.probe >= 0 && fstat(me.probe, &st) == 0 && st.st_dev == me.probe_dev &&
        st.st_ino == me.probe_ino)
        return true;
    char why[256];
    me.probe = -1;
    int f = open_named(why, sizeof why);
    if (f < 0)
        return false;
    keep_probe(f);
    return true;
}

/* A new open file description of the state (locks through it are its own). */
static int reopen_probe(void)
{
    if (!probe_ok())
        return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", me.probe);
    int f = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (f >= 0 && (fstat(f, &st) != 0 || st.st_ino != me.probe_ino || st.st_dev != me.probe_dev)) {
        close(f);
        f = -1;
    }
    return f;
}

/* ---------------------------------------------------- opening and joining */

static void before_fork(void);
static void after_fork_parent(void);
static void after_fork_child(void);

/* VRAM_COMMAND's entry in the environment. Read and changed in place, not
 * with getenv/setenv: a program may bring its own (bash does, and its
 * setenv before main() changes nothing its children will see). */
static char **environment_entry(void)
{
    extern char **environ;
    size_t n = strlen(COMMAND_ENV);
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, COMMAND_ENV, n) == 0 && (*e)[n] == '=')
            return e;
    return NULL;
}

/* VRAM_COMMAND=vramd: the state comes from vramd (a container's job), and
 * this process names itself for its children, who find it as a vram run
 * command's processes do. */
static void open_from_daemon(char **entry, const struct command_from_daemon *answer)
{
    int given = answer ? answer->fd : -1;
    int r = answer ? answer->r : 1;
    if (answer && r < 0)
        snprintf(me.open_error, sizeof me.open_error, "%s", answer->why);
    if (r > 0) {
        /* None to be had: this process works as without vram run. */
        me.open_error[0] = 0;
        return;
    }
    me.named = true;
    if (r < 0)
        return; /* refused, with why */
    struct command_shared head;
    if (pread(given, &head, offsetof(struct command_shared, devices), 0) !=
        (ssize_t)offsetof(struct command_shared, devices)) {
        snprintf(me.open_error, sizeof me.open_error, "the command state vramd gave cannot be "
                 "read: %s", strerror(errno));
        close(given);
        return;
    }
    memcpy(me.id, head.id, sizeof me.id);
    /* Its own open file description (the one passed is vramd's, shared by
     * every process it was passed to, and OFD locks through it would not
     * tell them apart), checked as any state is. */
    int f = command_state_open((int)getpid(), given, me.id, me.open_error,
                               sizeof me.open_error);
    close(given);
    if (f < 0)
        return;
    me.open_error[0] = 0;
    keep_probe(f);
    me.nentries = 1;
    me.entry_pid[0] = (int)getpid();
    me.entry_fd[0] = me.probe;
    char idhex[33], value[128];
    command_id_text(me.id, idhex);
    snprintf(value, sizeof value, "%s=%s:%d/%d", COMMAND_ENV, idhex, (int)getpid(), me.probe);
    char *copy = strdup(value); /* the environment's for good */
    if (copy)
        *entry = copy;
}

bool command_asks_daemon(void)
{
    char **entry = environment_entry();
    return entry && strcmp(*entry + strlen(COMMAND_ENV) + 1, COMMAND_FROM_DAEMON) == 0;
}

void command_open_from_environment(const struct command_from_daemon *given)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    char **entry = environment_entry();
    if (!entry)
        return;
    const char *v = *entry + strlen(COMMAND_ENV) + 1;
    if (strcmp(v, COMMAND_FROM_DAEMON) == 0) {
        open_from_daemon(entry, given);
        return;
    }
    me.named = true;
    if (parse_env(v, me.open_error, sizeof me.open_error) != 0)
        return;
    int f = open_named(me.open_error, sizeof me.open_error);
    if (f < 0)
        return;
    me.open_error[0] = 0;
    keep_probe(f);

    /* Pass this process on: its children find the state through it even
     * after vram run (and this process's parent) have gone. vram run's own
     * entry stays first, then this process, then its nearest ancestors. */
    char idhex[33], value[256];
    command_id_text(me.id, idhex);
    int len = snprintf(value, sizeof value, "%s=%s:%d/%d,%d/%d", COMMAND_ENV, idhex,
                       me.entry_pid[0], me.entry_fd[0], (int)getpid(), me.probe);
    for (int i = 1, kept = 2; i < me.nentries && kept < MAX_ENTRIES; i++)
        if (me.entry_pid[i] != getpid() && me.entry_pid[i] != me.entry_pid[0]) {
            len += snprintf(value + len, sizeof value - (size_t)len, ",%d/%d", me.entry_pid[i],
                            me.entry_fd[i]);
            kept++;
        }
    char *copy = strdup(value); /* the environment's for good */
    if (copy)
        *entry = copy;
}

static void *map_private(void)
{
    void *p = mmap(NULL, sizeof(struct command_shared), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int command_join(char *why, size_t n)
{
    if (me.s)
        return 0;
    if (!me.named) {
        /* Alone: the same accounting on private memory, one process. */
        struct command_shared *s = map_private();
        if (!s) {
            snprintf(why, n, "no memory for the budget's accounting: %s", strerror(errno));
            return -1;
        }
        s->mode = COMMAND_PER_PROCESS;
        atomic_store(&s->slots, 1);
        me.mode = COMMAND_PER_PROCESS;
        atomic_store(&me.own, 0);
        me.s = s;
        return 0;
    }
    if (me.open_error[0]) {
        snprintf(why, n, "%s", me.open_error);
        return -1;
    }
    /* Mapped through a description of its own that is never locked, so a
     * forked child may inherit the mapping without keeping any lock alive. */
    int f = reopen_probe();
    void *p = f < 0 ? MAP_FAILED
                    : mmap(NULL, sizeof(struct command_shared), PROT_READ | PROT_WRITE, MAP_SHARED,
                           f, 0);
    if (f >= 0)
        close(f);
    if (p == MAP_FAILED) {
        snprintf(why, n,
                 "cannot join the GPU budget of the vram run command this process belongs to: "
                 "%s",
                 f < 0 ? "its shared state was closed" : strerror(errno));
        return -1;
    }
    me.s = p;
    me.shared = true;
    me.mode = (enum command_mode)me.s->mode;
    return 0;
}

enum command_mode command_mode(void) { return me.mode; }

bool command_granted(void) { return me.shared && (me.s->flags & COMMAND_GRANTED); }

bool command_budget_setting(char *var, size_t varlen, char *value, size_t valuelen)
{
    if (!me.shared)
        return false;
    snprintf(var, varlen, "%.*s", (int)sizeof me.s->limit_var, me.s->limit_var);
    snprintf(value, valuelen, "%.*s", (int)sizeof me.s->limit_value, me.s->limit_value);
    return true;
}

/* ------------------------------------------------------- slots and the dead */

static int sweep_here(void)
{
    if (!me.shared)
        return 0;
    pthread_mutex_lock(&me.mu);
    int got = probe_ok() ? command_sweep(me.s, me.probe, atomic_load(&me.own)) : 0;
    pthread_mutex_unlock(&me.mu);
    return got;
}

/* This process's slot, claimed at its first reservation (processes that
 * never allocate — shells, launchers — take none). */
__attribute__((noinline, cold)) static int claim(void)
{
    pthread_mutex_lock(&me.mu);
    int own = atomic_load(&me.own);
    if (own >= 0 || !me.shared)
        goto out;
    int f = reopen_probe(), i = 0;
    if (f < 0) {
        snprintf(me.claim_error, sizeof me.claim_error,
                 "this process lost its command's shared state (its descriptor was closed, "
                 "and vram run has gone)");
        goto out;
    }
    while (i < COMMAND_MAX_SLOTS && command_lock_byte(f, i, F_WRLCK, false) != 0)
        i++;
    long page = sysconf(_SC_PAGESIZE);
    void *pin = i < COMMAND_MAX_SLOTS ? mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, f, 0)
                                      : MAP_FAILED;
    int err = errno;
    if (pin != MAP_FAILED)
        madvise(pin, (size_t)page, MADV_DONTFORK);
    close(f); /* from here only the pin holds the lock */
    if (pin == MAP_FAILED) {
        if (i < COMMAND_MAX_SLOTS)
            snprintf(me.claim_error, sizeof me.claim_error,
                     "cannot map the command's shared state: %s", strerror(err));
        else
            snprintf(me.claim_error, sizeof me.claim_error,
                     "the command already has %d processes holding GPU memory", COMMAND_MAX_SLOTS);
        goto out;
    }
    if (atomic_load(&me.s->pid[i]) != 0 || !command_slot_clean(me.s, i))
        command_reclaim(me.s, i); /* its last owner died and no one swept it yet */
    atomic_store(&me.s->pid[i], (int32_t)getpid());
    /* Published before this process charges anything: a reservation that
     * sums after our first add reads `slots` after it, so it counts us. */
    uint32_t n = atomic_load(&me.s->slots);
    while (n < (uint32_t)i + 1 && !atomic_compare_exchange_weak(&me.s->slots, &n, (uint32_t)i + 1))
        ;
    own = i;
    atomic_store_explicit(&me.own, own, memory_order_release);
out:
    pthread_mutex_unlock(&me.mu);
    return own;
}

/* fork(): the parent holds the lock while it forks, so that no claim,
 * sweep or registry change is half-way in the child's copy; the child then
 * shares the state (the mapping is inherited) but not the parent's slot
 * (its lock's pin is not inherited), and must not lock through the
 * parent's probe description: it takes a description of its own. It
 * claims a slot of its own at its first reservation. */
static void before_fork(void) { pthread_mutex_lock(&me.mu); }
static void after_fork_parent(void) { pthread_mutex_unlock(&me.mu); }
static void after_fork_child(void)
{
    pthread_mutex_init(&me.mu, NULL);
    if (!me.s)
        return;
    if (!me.shared) {
        /* Private memory, copied: the child starts with nothing charged. */
        for (int d = 0; d < COMMAND_MAX_DEVICES; d++) {
            atomic_store(&me.s->used[d][0], 0);
            atomic_store(&me.s->peak[d][0], 0);
            for (int p = 0; p < COMMAND_PARTS; p++)
                atomic_store(&me.s->part[p][d][0], 0);
        }
        return;
    }
    atomic_store(&me.own, -1);
    if (me.probe >= 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", me.probe);
        int f = open(path, O_RDWR | O_CLOEXEC);
        if (f >= 0 && dup3(f, me.probe, O_CLOEXEC) >= 0) {
            close(f);
        } else {
            if (f >= 0)
                close(f);
            close(me.probe);
            me.probe = -1;
        }
    }
}

/* ----------------------------------------------------------- the registry */

int command_device(const char *uuid, int ordinal, bool register_budget, uint64_t budget,
                   uint64_t *budget_out, char *why, size_t n)
{
    struct command_shared *s = me.s;
    pthread_mutex_lock(&me.mu);
    bool locked = false;
    if (me.shared) {
        if (!probe_ok() || command_lock_byte(me.probe, COMMAND_REGISTRY_BYTE, F_WRLCK, true) != 0) {
            pthread_mutex_unlock(&me.mu);
            snprintf(why, n, "cannot lock the command's device table: %s",
                     me.probe < 0 ? "its shared state was closed" : strerror(errno));
            return -2;
        }
        locked = true;
    }
    int found = -1;
    uint32_t count = atomic_load(&s->devices);
    for (uint32_t d = 0; d < count && d < COMMAND_MAX_DEVICES; d++)
        if (strncmp(s->device[d].uuid, uuid, COMMAND_UUID_SIZE) == 0)
            found = (int)d;
    if (found < 0 && register_budget) {
        if (count >= COMMAND_MAX_DEVICES) {
            snprintf(why, n, "the command uses more than %d devices", COMMAND_MAX_DEVICES);
            found = -2;
        } else {
            /* Written whole before it is published: a writer that dies
             * half-way leaves an entry no one can see, which the next
             * writer overwrites. */
            struct command_device_entry *e = &s->device[count];
            snprintf(e->uuid, sizeof e->uuid, "%s", uuid);
            e->ordinal = ordinal;
            e->budget = budget;
            atomic_store(&e->peak, 0);
            atomic_store(&e->refused, 0);
            for (int p = 0; p < COMMAND_PARTS; p++)
                atomic_store(&e->part_peak[p], 0);
            /* What vram run measured a context to take here, if it did. */
            uint64_t size = 0;
            for (uint32_t i = 0; i < s->probes && i < COMMAND_MAX_DEVICES; i++)
                if (strncmp(s->probe[i].uuid, uuid, COMMAND_UUID_SIZE) == 0)
                    size = s->probe[i].context_size;
            atomic_store(&e->context_size, size);
            atomic_store(&s->devices, count + 1);
            found = (int)count;
        }
    }
    if (found >= 0)
        *budget_out = s->device[found].budget;
    if (locked)
        command_lock_byte(me.probe, COMMAND_REGISTRY_BYTE, F_UNLCK, false);
    pthread_mutex_unlock(&me.mu);
    return found;
}

/* ----------------------------------------------------- reserve and release
 *
 * Exactness. Each process adds to and subtracts from its own counter
 * used[d][own] only; a reservation of b bytes is
 *     1. used[d][own] += b          (sequentially consistent read-modify-write)
 *     2. n = slots; S = sum of used[d][0..n)   (sequentially consistent loads)
 *     3. S <= limit: granted.  Otherwise used[d][own] -= b and refused.
 * Two reservations A and B never pass the budget together: in the single
 * order of sequentially consistent operations, say A's add comes before
 * B's. B's loads come after B's add, so after A's add, and after A's slot
 * was published in `slots` (before A's process charged anything): B's sum
 * includes A's bytes unless A has already returned them, and B's own. So the
 * last reservation to pass counts every earlier one still held, and the
 * total held never exceeds the limit, not even for an instant. The price is
 * pessimism: a sum may include another reservation that is about to be
 * refused, so at the very edge an allocation can be refused that would fit
 * a moment later; that is why a refusal is retried while the sum without it
 * leaves room.
 *
 * Death. A process that dies at any instruction leaves its counter as it
 * was: whatever it had added, granted or still in flight, is in its own
 * slot, and all of it went back to the driver with the process. Its slot's
 * lock went with its address space, so the next reclaimer (a refusal, a
 * view of the device, a new process claiming the slot, vram run at the end)
 * takes the lock and clears the slot whole. Nothing can be lost or counted
 * twice: no other counter holds any part of it. (A shared total updated
 * beside the per-slot counters could not be kept exact: a process killed
 * between the two updates leaves them disagreeing, and no one can tell by
 * how much.)
 *
 * Peak. The command's peak on a device is the largest sum S at which a
 * reservation was granted: the smallest budget under which every
 * reservation of this run, in this interleaving, would still have passed.
 * When processes do not race, it is exactly the most the command held.
 */

static inline void raise_to(_Atomic uint64_t *p, uint64_t v)
{
    uint64_t cur = atomic_load_explicit(p, memory_order_relaxed);
    while (v > cur && !atomic_compare_exchange_weak_explicit(p, &cur, v, memory_order_relaxed,
                                                             memory_order_relaxed))
        ;
}

/* The sum of d's counters; stops (returning more than limit) once past it,
 * so that no amount of garbage can wrap the sum around. */
static inline uint64_t sum_until(_Atomic uint64_t *row, uint32_t n, uint64_t limit)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v = atomic_load(&row[i]);
        if (v > limit - sum)
            return limit < UINT64_MAX ? limit + 1 : UINT64_MAX;
        sum += v;
    }
    return sum;
}

/* 1 when a sum after a reservation came within the margin of the limit. */
static inline int near(uint64_t sum, uint64_t limit)
{
    return me.margin && sum > limit - (me.margin < limit ? me.margin : limit);
}

/* A budget per process: a compare-and-swap on this process's counter. */
static inline __attribute__((always_inline)) int reserve_own(struct command_shared *s, int d,
                                                               int own, uint64_t limit,
                                                               uint64_t bytes)
{
    _Atomic uint64_t *mine = &s->used[d][own];
    uint64_t cur = atomic_load_explicit(mine, memory_order_relaxed);
    do {
        if (cur > limit - bytes)
            return -1;
    } while (!atomic_compare_exchange_weak_explicit(mine, &cur, cur + bytes, memory_order_relaxed,
                                                    memory_order_relaxed));
    raise_to(&s->peak[d][own], cur + bytes);
    raise_to(&s->device[d].peak, cur + bytes);
    return near(cur + bytes, limit);
}

/* The first try did not fit: take it back, then try again while what the
 * others hold (reservations in flight elsewhere come and go) leaves room;
 * before refusing, reclaim the dead and try once more. */
__attribute__((noinline, cold)) static int reserve_contended(struct command_shared *s, int d,
                                                             int own, uint64_t limit,
                                                             uint64_t bytes)
{
    _Atomic uint64_t *row = s->used[d];
    atomic_fetch_sub(&row[own], bytes);
    bool swept = false;
    for (int tries = 0;; tries++) {
        if (tries >= 16 || sum_until(row, atomic_load(&s->slots), limit) > limit - bytes) {
            if (swept)
                return -1;
            swept = true;
            sweep_here();
        }
        uint64_t mine = atomic_fetch_add(&row[own], bytes) + bytes;
        uint64_t sum = sum_until(row, atomic_load(&s->slots), limit);
        if (sum <= limit) {
            raise_to(&s->peak[d][own], mine);
            raise_to(&s->device[d].peak, sum);
            return near(sum, limit);
        }
        atomic_fetch_sub(&row[own], bytes);
    }
}

/* The command's budget: add to this process's counter, then sum them all. */
static inline __attribute__((always_inline)) int reserve_shared(struct command_shared *s, int d,
                                                                  int own, uint64_t limit,
                                                                  uint64_t bytes)
{
    _Atomic uint64_t *row = s->used[d];
    uint64_t mine = atomic_fetch_add(&row[own], bytes) + bytes;
    uint64_t sum = sum_until(row, atomic_load(&s->slots), limit);
    if (sum > limit)
        return reserve_contended(s, d, own, limit, bytes);
    raise_to(&s->peak[d][own], mine);
    raise_to(&s->device[d].peak, sum);
    return near(sum, limit);
}

__attribute__((noinline, cold)) static int refused(int d)
{
    atomic_fetch_add_explicit(&me.s->device[d].refused, 1, memory_order_relaxed);
    return -1;
}

/* Inlined, with the two above, into both below: command_reserve is the
 * hot path of every allocation. */
static inline __attribute__((always_inline)) int reserve(int d, uint64_t limit, uint64_t bytes)
{
    int own = atomic_load_explicit(&me.own, memory_order_acquire);
    if ((own < 0 && (own = claim()) < 0) || bytes > limit)
        return -1;
    return me.mode == COMMAND_PER_PROCESS ? reserve_own(me.s, d, own, limit, bytes)
                                          : reserve_shared(me.s, d, own, limit, bytes);
}

int command_reserve(int d, uint64_t limit, uint64_t bytes)
{
    int rc = reserve(d, limit, bytes);
    return rc >= 0 ? rc : refused(d);
}

int command_try_reserve(int d, uint64_t limit, uint64_t bytes) { return reserve(d, limit, bytes); }

void command_set_margin(uint64_t bytes) { me.margin = bytes; }

int command_recheck(int d, uint64_t limit, uint64_t bytes)
{
    if (command_used(d) <= limit)
        return 0;
    command_release(d, bytes);
    return refused(d);
}

void command_force(int d, uint64_t bytes)
{
    int own = atomic_load_explicit(&me.own, memory_order_acquire);
    if (own < 0)
        return;
    uint64_t mine = atomic_fetch_add(&me.s->used[d][own], bytes) + bytes;
    raise_to(&me.s->peak[d][own], mine);
    raise_to(&me.s->device[d].peak, me.mode == COMMAND_PER_PROCESS
                                        ? mine
                                        : sum_until(me.s->used[d], atomic_load(&me.s->slots),
                                                    UINT64_MAX - 1));
}

void command_note_nvml(int d, uint64_t bytes) { raise_to(&me.s->device[d].nvml_peak, bytes); }

void command_note_driver_unseen(int d)
{
    atomic_fetch_or(&me.s->device[d].flags, COMMAND_DEVICE_DRIVER_UNSEEN);
}

int command_supervisor(void) { return me.shared ? me.s->supervisor : 0; }


int command_first_member(void)
{
    uint32_t n = atomic_load(&me.s->slots);
    for (uint32_t i = 0; i < n && i < COMMAND_MAX_SLOTS; i++) {
        int pid = atomic_load(&me.s->pid[i]);
        if (pid > 0)
            return pid;
    }
    return 0;
}

void command_release(int d, uint64_t bytes)
{
    int own = atomic_load_explicit(&me.own, memory_order_relaxed);
    if (own >= 0)
        atomic_fetch_sub_explicit(&me.s->used[d][own], bytes, memory_order_release);
}

const char *command_claim_error(void) { return me.claim_error[0] ? me.claim_error : NULL; }

/* ------------------------------------------------- contexts and modules */

void command_part(int d, enum command_part part, uint64_t bytes, bool add)
{
    int own = atomic_load_explicit(&me.own, memory_order_acquire);
    if (own < 0)
        return; /* nothing was reserved: there is no slot to count it in */
    _Atomic uint64_t *row = me.s->part[part][d];
    if (!add) {
        atomic_fetch_sub(&row[own], bytes);
        return;
    }
    uint64_t mine = atomic_fetch_add(&row[own], bytes) + bytes;
    /* As the peak: the command's sum, or with a budget per process, the
     * most one process held. */
    raise_to(&me.s->device[d].part_peak[part],
             me.mode == COMMAND_PER_PROCESS
                 ? mine
                 : sum_until(row, atomic_load(&me.s->slots), UINT64_MAX - 1));
}

uint64_t command_own_part(int d, enum command_part part)
{
    int own = atomic_load(&me.own);
    return own >= 0 ? atomic_load(&me.s->part[part][d][own]) : 0;
}

uint64_t command_context_size(int d) { return atomic_load(&me.s->device[d].context_size); }

void command_note_context_size(int d, uint64_t bytes)
{
    raise_to(&me.s->device[d].context_size, bytes);
}

uint64_t command_used(int d)
{
    int own = atomic_load(&me.own);
    if (me.mode == COMMAND_PER_PROCESS)
        return own >= 0 ? atomic_load(&me.s->used[d][own]) : 0;
    sweep_here();
    return sum_until(me.s->used[d], atomic_load(&me.s->slots), UINT64_MAX - 1);
}

uint64_t command_own_used(int d)
{
    int own = atomic_load(&me.own);
    return own >= 0 ? atomic_load(&me.s->used[d][own]) : 0;
}

uint64_t command_own_peak(int d)
{
    int own = atomic_load(&me.own);
    return own >= 0 ? atomic_load(&me.s->peak[d][own]) : 0;
}

int command_processes(int d)
{
    int count = 0;
    uint32_t n = atomic_load(&me.s->slots);
    for (uint32_t i = 0; i < n && i < COMMAND_MAX_SLOTS; i++)
        count += atomic_load(&me.s->used[d][i]) != 0;
    return count;
}

bool command_member(int pid)
{
    if (pid == (int)getpid())
        return true;
    if (!me.s || !me.shared || me.mode == COMMAND_PER_PROCESS)
        return false;
    uint32_t n = atomic_load(&me.s->slots);
    for (uint32_t i = 0; i < n && i < COMMAND_MAX_SLOTS; i++)
        if (atomic_load(&me.s->pid[i]) == pid)
            return true;
    return false;
}

bool command_inside_live(void)
{
    const char *v = getenv(COMMAND_ENV);
    char why[256];
    if (!v || parse_env(v, why, sizeof why) != 0)
        return false;
    int f = open_named(why, sizeof why);
    if (f < 0)
        return false;
    close(f);
    return true;
}

