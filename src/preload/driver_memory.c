/* driver_memory: the driver's own memory, read from NVML and charged
 * (driver_memory.h). */
#include "driver_memory.h"
#include "nvml_reader.h"

#include "../command/command.h"
#include "../cuda/nvml_processes.h"
#include "../record/recorder.h"
#include "../util/parse.h"
#include "../util/report.h"
#include "../util/saturate.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEVICES DRIVER_MEMORY_MAX_DEVICES

static struct {
    pthread_mutex_t mu; /* one reading at a time; guards what follows */
    bool reader;        /* the reader thread runs (in this process image) */
    uint64_t part[MAX_DEVICES];    /* the driver's part charged, by CUDA ordinal */
    uint64_t escaped[MAX_DEVICES]; /* ... of which processes that escaped */
    /* NVML's figures last recorded (this process's, the command's): a
     * reading that repeats them adds nothing to NVML's line, and ten events
     * a second per device would outgrow a long run's allocations. */
    uint64_t recorded[MAX_DEVICES][2];
    bool recorded_any[MAX_DEVICES];
    bool unseen_said[MAX_DEVICES]; /* NVML could not name this process there: said */
    _Atomic bool watched[MAX_DEVICES];
    /* The device's entry in the command's state, plus one (0: none yet). */
    _Atomic int entry[MAX_DEVICES];
} drv = {.mu = PTHREAD_MUTEX_INITIALIZER};

void driver_memory_account(int dev, int entry)
{
    if (dev >= 0 && dev < MAX_DEVICES)
        atomic_store(&drv.entry[dev], entry + 1);
}

/* dev's entry in the command's state, or -1. */
static int entry_of(int dev)
{
    return atomic_load_explicit(&drv.entry[dev], memory_order_relaxed) - 1;
}

static _Atomic int in_flight;          /* governed calls that may take more than charged */
static _Thread_local int in_flight_here; /* ... of them, this thread's */

void driver_memory_enter(void)
{
    in_flight_here++;
    atomic_fetch_add(&in_flight, 1);
}

void driver_memory_leave(void)
{
    atomic_fetch_sub(&in_flight, 1);
    in_flight_here--;
}

/* vram run's pid when the command is vram run's: its descendants are the
 * command. (A Slurm task's state is made by slurmstepd, whose descendants
 * are every task of the step, each with a budget of its own.) */
static int vram_run_pid(void)
{
    static _Atomic int known = -1; /* any thread may ask first; each finds the same */
    int pid = atomic_load(&known);
    if (pid < 0) {
        int s = command_supervisor();
        char path[64], exe[4096];
        snprintf(path, sizeof path, "/proc/%d/exe", s);
        ssize_t len = s > 0 ? readlink(path, exe, sizeof exe - 1) : -1;
        exe[len > 0 ? len : 0] = 0;
        const char *base = strrchr(exe, '/');
        pid = base && strcmp(base + 1, "vram") == 0 ? s : 0;
        atomic_store(&known, pid);
    }
    return pid;
}

/* Escaped processes' memory is charged by one member only. With a budget
 * per process (--per-process) there is no command-wide budget to charge
 * it to, and the command's other processes, each under a budget of its
 * own, are not members of this one's: none of them is escaped. */
static uint64_t escaped_on(int dev, const struct nvml_process *p, int n, uint64_t *members,
                           const struct nvml_pid_view *view)
{
    *members = 0;
    /* NVML's pids are the host's, not this namespace's (a container on a
     * driver before R535): none can be matched to the command's. */
    if (command_mode() == COMMAND_PER_PROCESS || !view->this_namespace)
        return 0;
    int supervisor = vram_run_pid(), self = (int)view->self;
    bool charger = supervisor > 0 && command_first_member() == self;
    uint64_t escaped = 0;
    *members = 0;
    for (int i = 0; i < n; i++) {
        if (!p[i].used_known || (int)p[i].pid == self)
            continue;
        if (command_member((int)p[i].pid))
            *members = add_saturating(*members, p[i].used);
        else if (supervisor > 0 && command_descends((int)p[i].pid, supervisor))
            escaped = add_saturating(escaped, p[i].used);
    }
    (void)dev;
    *members = add_saturating(*members, escaped);
    return charger ? escaped : 0;
}

int driver_memory_settle(int dev, uint64_t pending)
{
    int c;
    if (dev < 0 || dev >= MAX_DEVICES || !atomic_load(&drv.watched[dev]) || (c = entry_of(dev)) < 0)
        return -1;
    struct nvml_process *p;
    pthread_mutex_lock(&drv.mu);
    /* What vram charged, read on both sides of NVML's figure, taking the
     * larger: an allocation is charged before the driver makes it and a
     * free given back after, so memory coming or going between the reads
     * is never taken for the driver's. */
    uint64_t before = command_own_used(c);
    int n = nvml_reader_list(dev, &p);
    if (n < 0) {
        pthread_mutex_unlock(&drv.mu);
        return -1;
    }
    uint64_t own = 0, others = 0;
    bool listed = false;
    struct nvml_pid_view self = nvml_reader_self();
    for (int i = 0; i < n; i++)
        if (self.self && p[i].pid == self.self && p[i].used_known)
            own = p[i].used, listed = true;
    if (!self.self && !drv.unseen_said[dev]) {
        /* Said once, at the end of the run, with why (command_peak_line). */
        drv.unseen_said[dev] = true;
        command_note_driver_unseen(c);
        vlog(LOG_INFO, "device %d: the driver's own part is not charged: %s", dev, self.why);
    }
    uint64_t escaped = escaped_on(dev, p, n, &others, &self);
    free(p);
    /* What vram charged this process apart from the driver's part, less a
     * reservation the driver has not been asked for yet. */
    uint64_t after = command_own_used(c);
    uint64_t charged = (before > after ? before : after) - drv.part[dev];
    charged = charged > pending ? charged - pending : 0;
    uint64_t part = add_saturating(listed && own > charged ? own - charged : 0, escaped);
    uint64_t was = drv.part[dev];
    /* Another thread's call may hold what it has not charged yet. */
    if (part > was && atomic_load(&in_flight) != in_flight_here)
        part = was;
    if (part > was) {
        /* On the device already: charged whatever the budget says. */
        command_force(c, part - was);
        command_part(c, COMMAND_DRIVER, part - was, true);
    } else if (part < was) {
        command_part(c, COMMAND_DRIVER, was - part, false);
        command_release(c, was - part);
    }
    if (part != was) {
        record_resize(RECORD_DRIVER, dev, 0, was, part, 0);
        vlog(LOG_DEBUG, "device %d: the driver holds %s beyond what vram charged%s", dev,
             format_size(part - escaped).text, escaped ? " (and escaped processes more)" : "");
    }
    drv.part[dev] = part;
    drv.escaped[dev] = escaped;
    command_note_nvml(c, add_saturating(own, others));
    /* Unlisted (another PID namespace, a figure NVML cannot give): NVML
     * says nothing of this process, which is not "0 bytes". */
    uint64_t figures[2] = {add_saturating(own, escaped), add_saturating(own, others)};
    if (listed && RECORDER_ON() &&
        (!drv.recorded_any[dev] || memcmp(figures, drv.recorded[dev], sizeof figures) != 0)) {
        record_nvml(dev, figures[0], figures[1]);
        memcpy(drv.recorded[dev], figures, sizeof figures);
        drv.recorded_any[dev] = true;
    }
    pthread_mutex_unlock(&drv.mu);
    return part < was;
}

uint64_t driver_memory_part(int dev)
{
    pthread_mutex_lock(&drv.mu);
    uint64_t part = dev >= 0 && dev < MAX_DEVICES ? drv.part[dev] : 0;
    pthread_mutex_unlock(&drv.mu);
    return part;
}

static void *reader(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec t = {0, DRIVER_MEMORY_PERIOD_MS * 1000000L};
        while (nanosleep(&t, &t) != 0)
            ;
        for (int d = 0; d < MAX_DEVICES; d++)
            if (atomic_load_explicit(&drv.watched[d], memory_order_relaxed))
                driver_memory_settle(d, 0);
    }
    return NULL;
}

void driver_memory_watch(int dev)
{
    if (dev < 0 || dev >= MAX_DEVICES || atomic_load(&drv.watched[dev]))
        return;
    atomic_store(&drv.watched[dev], true);
    pthread_mutex_lock(&drv.mu);
    if (!drv.reader) {
        /* The program's signals are never delivered to this thread. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&a, 64 << 10);
        pthread_t t;
        drv.reader = pthread_create(&t, &a, reader, NULL) == 0;
        pthread_attr_destroy(&a);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!drv.reader)
            vlog(LOG_WARN, "no thread to read what the driver holds; it is read only near the "
                           "budget");
    }
    pthread_mutex_unlock(&drv.mu);
    /* At once: what processes of the command that escaped the interposer
     * hold is charged before this one's first allocation. */
    driver_memory_settle(dev, 0);
}

void driver_memory_after_fork(void)
{
    pthread_mutex_init(&drv.mu, NULL);
    drv.reader = false;
    /* vram_run_pid() is the parent's answer, still right: the same command. */
    /* The fork happened under footprint_lock, whose child side re-makes
     * the lock without leaving it: nothing is in flight in the child. */
    in_flight_here = 0;
    atomic_store(&in_flight, 0);
    nvml_reader_after_fork();
    for (int d = 0; d < MAX_DEVICES; d++) {
        drv.part[d] = drv.escaped[d] = 0;
        drv.recorded_any[d] = drv.unseen_said[d] = false;
        atomic_store(&drv.watched[d], false);
    }
}
