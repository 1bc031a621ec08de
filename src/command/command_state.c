/* command_state: the shared state's rules, for vram run and the command's
 * processes alike (see command_state.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "command_state.h"

#include "../util/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- locks, ids */

int command_lock_byte(int fd, int byte, short type, bool wait)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1};
    int rc;
    while ((rc = fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl)) != 0 && errno == EINTR)
        ;
    return rc;
}

bool command_slot_alive(int fd, int i)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = i, .l_len = 1};
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0)
        return true;
    return fl.l_type != F_UNLCK;
}

void command_id_text(const unsigned char id[16], char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", id[i]);
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int command_id_parse(const char *s, unsigned char id[16])
{
    for (int i = 0; i < 16; i++) {
        int hi = hex_digit(s[2 * i]), lo = hi < 0 ? -1 : hex_digit(s[2 * i + 1]);
        if (lo < 0)
            return -1;
        id[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

/* A new open file description of the state another process of the command
 * holds. stat() first: never open a device, a socket or a pipe by mistake. */
int command_state_open(int pid, int fd, const unsigned char id[16], char *why, size_t n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(why, n, "%s: %s", path,
                 errno == ENOENT   ? "gone (the process has ended)"
                 : errno == EACCES ? "not this user's (the command belongs to another user)"
                                   : strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_size != (off_t)sizeof(struct command_shared)) {
        snprintf(why, n, "%s is not a vram command's state", path);
        return -1;
    }
    int f = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (f < 0) {
        snprintf(why, n, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct command_shared head;
    int seals = fcntl(f, F_GET_SEALS);
    if (fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, n, "%s is not a vram command's state", path);
    } else if (st.st_uid != geteuid()) {
        snprintf(why, n, "%s belongs to another user (uid %u)", path, (unsigned)st.st_uid);
    } else if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW) ||
               st.st_size != (off_t)sizeof head) {
        snprintf(why, n, "%s is not a vram command's state (not a sealed memfd of %zu bytes)", path,
                 sizeof head);
    } else if (pread(f, &head, offsetof(struct command_shared, devices), 0) !=
                   (ssize_t)offsetof(struct command_shared, devices) ||
               memcmp(head.magic, COMMAND_MAGIC, sizeof COMMAND_MAGIC) != 0 || head.version != COMMAND_VERSION ||
               head.size != sizeof head ||
               (head.mode != COMMAND_SHARED && head.mode != COMMAND_PER_PROCESS)) {
        snprintf(why, n, "%s is not a vram command's state (bad header)", path);
    } else if (memcmp(head.id, id, sizeof head.id) != 0) {
        snprintf(why, n, "%s belongs to another command", path);
    } else {
        return f;
    }
    close(f);
    return -1;
}

/* ------------------------------------------------------- slots and the dead */

/* Nothing charged on any device: counters exist only for registered
 * devices (a device is registered before anything is charged on it). */
bool command_slot_clean(struct command_shared *s, int i)
{
    uint32_t nd = atomic_load(&s->devices);
    for (uint32_t d = 0; d < nd && d < COMMAND_MAX_DEVICES; d++) {
        if (atomic_load(&s->used[d][i]) || atomic_load(&s->peak[d][i]))
            return false;
        for (int p = 0; p < COMMAND_PARTS; p++)
            if (atomic_load(&s->part[p][d][i]))
                return false;
    }
    return true;
}

static void record_ended(struct command_shared *s, int pid, int i)
{
    uint64_t peak[COMMAND_MAX_DEVICES];
    bool any = false;
    for (int d = 0; d < COMMAND_MAX_DEVICES; d++)
        any |= (peak[d] = atomic_load(&s->peak[d][i])) != 0;
    if (!any)
        return;
    uint32_t r = atomic_fetch_add(&s->records, 1);
    if (r >= COMMAND_MAX_RECORDS) {
        atomic_fetch_add(&s->records_lost, 1);
        return;
    }
    memcpy(s->record[r].peak, peak, sizeof peak);
    atomic_store_explicit(&s->record[r].pid, pid, memory_order_release);
}

/* Slot i's process is dead and the caller holds i's lock: nothing of that
 * process is in flight any more, so its counters are what it held when it
 * died — all of which the driver took back with the process — and they are
 * cleared whole. */
void command_reclaim(struct command_shared *s, int i)
{
    int32_t pid = atomic_load(&s->pid[i]);
    if (pid > 0) {
        record_ended(s, pid, i);
        atomic_store(&s->pid[i], -pid); /* recorded: a reclaimer dying now does not record twice */
    }
    for (int d = 0; d < COMMAND_MAX_DEVICES; d++) {
        atomic_store(&s->used[d][i], 0);
        atomic_store(&s->peak[d][i], 0);
        for (int p = 0; p < COMMAND_PARTS; p++)
            atomic_store(&s->part[p][d][i], 0);
    }
    atomic_store(&s->pid[i], 0);
}

int command_sweep(struct command_shared *s, int fd, int own)
{
    int got = 0;
    uint32_t n = atomic_load(&s->slots);
    for (uint32_t i = 0; i < n && i < COMMAND_MAX_SLOTS; i++) {
        if ((int)i == own || (atomic_load(&s->pid[i]) == 0 && command_slot_clean(s, (int)i)))
            continue;
        if (command_lock_byte(fd, (int)i, F_WRLCK, false) != 0)
            continue; /* alive (or being claimed or reclaimed right now) */
        command_reclaim(s, (int)i);
        command_lock_byte(fd, (int)i, F_UNLCK, false);
        got++;
    }
    return got;
}

/* ------------------------------------------------------------ vram run */

int command_create(struct command_owner *o, enum command_mode mode, const char *limit_var,
                   const char *limit_value, const struct command_context_size *sizes,
                   int nsizes, char *why, size_t n)
{
    memset(o, 0, sizeof *o);
    o->fd = memfd_create("vram-command", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (o->fd < 0) {
        snprintf(why, n, "cannot create the command's shared state (memfd_create): %s",
                 strerror(errno));
        return -1;
    }
    struct command_shared *s = MAP_FAILED;
    if (fchmod(o->fd, 0600) != 0 || ftruncate(o->fd, sizeof *s) != 0 ||
        fcntl(o->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
        (s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, o->fd, 0)) == MAP_FAILED ||
        getrandom(s->id, sizeof s->id, 0) != (ssize_t)sizeof s->id) {
        snprintf(why, n, "cannot set up the command's shared state: %s", strerror(errno));
        if (s != MAP_FAILED)
            munmap(s, sizeof *s);
        close(o->fd);
        return -1;
    }
    memcpy(s->magic, COMMAND_MAGIC, sizeof COMMAND_MAGIC);
    s->version = COMMAND_VERSION;
    s->mode = mode;
    s->size = sizeof *s;
    s->supervisor = getpid();
    snprintf(s->limit_var, sizeof s->limit_var, "%s", limit_var ? limit_var : "");
    snprintf(s->limit_value, sizeof s->limit_value, "%s", limit_value ? limit_value : "");
    for (int i = 0; i < nsizes && i < COMMAND_MAX_DEVICES; i++) {
        snprintf(s->probe[i].uuid, sizeof s->probe[i].uuid, "%s", sizes[i].uuid);
        s->probe[i].context_size = sizes[i].bytes;
        s->probes = (uint32_t)i + 1;
    }
    o->shared = s;
    char idhex[33];
    command_id_text(s->id, idhex);
    snprintf(o->env, sizeof o->env, "%s:%d/%d", idhex, (int)getpid(), o->fd);
    return 0;
}

int command_inheritable(const struct command_owner *o)
{
    /* "/proc/self/fd/N" by hand: after fork() in a threaded vram run, no
     * stdio. */
    char path[32] = "/proc/self/fd/", digits[12];
    int k = 0;
    for (unsigned v = (unsigned)o->fd; k == 0 || v; v /= 10)
        digits[k++] = (char)('0' + v % 10);
    size_t at = strlen(path);
    while (k)
        path[at++] = digits[--k];
    path[at] = 0;
    int f = open(path, O_RDONLY); /* inherited: no O_CLOEXEC */
    if (f < 0)
        return -1;
    int high = fcntl(f, F_DUPFD, 100);
    close(f);
    return high;
}

void command_summarize(struct command_owner *o, struct command_summary *out)
{
    struct command_shared *s = o->shared;
    memset(out, 0, sizeof *out);
    command_sweep(s, o->fd, -1);
    out->mode = (enum command_mode)s->mode;
    uint32_t nd = atomic_load(&s->devices);
    for (uint32_t d = 0; d < nd && d < COMMAND_MAX_DEVICES; d++) {
        struct command_summary_device *e = &out->device[out->ndevices++];
        e->ordinal = s->device[d].ordinal;
        snprintf(e->uuid, sizeof e->uuid, "%.*s", COMMAND_UUID_SIZE - 1, s->device[d].uuid);
        e->budget = s->device[d].budget;
        e->peak = atomic_load(&s->device[d].peak);
        e->refused = atomic_load(&s->device[d].refused);
        for (int p = 0; p < COMMAND_PARTS; p++)
            e->part[p] = atomic_load(&s->device[d].part_peak[p]);
        e->nvml_peak = atomic_load(&s->device[d].nvml_peak);
        e->driver_unseen = atomic_load(&s->device[d].flags) & COMMAND_DEVICE_DRIVER_UNSEEN;
    }
    uint32_t nr = atomic_load(&s->records);
    for (uint32_t r = 0; r < nr && r < COMMAND_MAX_RECORDS; r++) {
        int pid = atomic_load_explicit(&s->record[r].pid, memory_order_acquire);
        if (pid <= 0)
            continue;
        struct command_summary_process *p = &out->process[out->nprocesses++];
        p->pid = pid;
        memcpy(p->peak, s->record[r].peak, sizeof p->peak);
    }
    out->processes_not_listed = (int)atomic_load(&s->records_lost);
    /* Still running (a daemon the command left behind): what it held so far. */
    uint32_t ns = atomic_load(&s->slots);
    for (uint32_t i = 0; i < ns && i < COMMAND_MAX_SLOTS; i++) {
        int pid = atomic_load(&s->pid[i]);
        if (pid <= 0 || command_slot_clean(s, (int)i))
            continue;
        struct command_summary_process *p = &out->process[out->nprocesses++];
        p->pid = pid;
        p->running = true;
        for (int d = 0; d < COMMAND_MAX_DEVICES; d++)
            p->peak[d] = atomic_load(&s->peak[d][i]);
    }
}

void command_peak_line(const struct command_summary *s, int i, char *out, size_t n)
{
    const struct command_summary_device *e = &s->device[i];
    if (e->ungoverned) {
        snprintf(out, n, "GPU %d (%s): NVML showed the command's processes holding %s, none of "
                         "them under vram's budget (LD_PRELOAD cleared)",
                 e->ordinal, e->uuid, format_size(e->nvml_peak).text);
        return;
    }
    int len = snprintf(out, n, "GPU %d (%s): peak %s of %s budget%s", e->ordinal, e->uuid,
                       format_size(e->peak).text, format_size(e->budget).text,
                       s->mode == COMMAND_PER_PROCESS ? " per process" : "");
    static const char *const name[COMMAND_PARTS] = {"context", "modules", "driver"};
    for (int p = 0, said = 0; p < COMMAND_PARTS; p++)
        if (e->part[p] && len >= 0 && (size_t)len < n)
            len += snprintf(out + len, n - (size_t)len, "%s%s %s", said++ ? ", " : " (", name[p],
                            format_size(e->part[p]).text);
    if ((e->part[COMMAND_CONTEXTS] || e->part[COMMAND_MODULES] || e->part[COMMAND_DRIVER]) &&
        len >= 0 && (size_t)len < n)
        len += snprintf(out + len, n - (size_t)len, ")");
    /* NVML's own figure, where it saw more than vram counted. It is the
     * whole command's, its processes together: with a budget per process
     * the peak is one process's, and what vram counted for them all is at
     * most their peaks added up (unknown when some were not listed). */
    uint64_t counted = e->peak;
    bool known = true;
    if (s->mode == COMMAND_PER_PROCESS) {
        counted = 0;
        for (int k = 0; k < s->nprocesses; k++)
            counted += s->process[k].peak[i];
        known = s->processes_not_listed == 0;
    }
    if (known && e->nvml_peak > counted && len >= 0 && (size_t)len < n) {
        if (s->mode == COMMAND_PER_PROCESS)
            len += snprintf(out + len, n - (size_t)len, "; NVML showed the command's processes "
                            "holding %s together, more than their peaks add up to (%s)",
                            format_size(e->nvml_peak).text, format_size(counted).text);
        else
            len += snprintf(out + len, n - (size_t)len, "; NVML showed %s",
                            format_size(e->nvml_peak).text);
    }
    if (e->refused && len >= 0 && (size_t)len < n)
        len += snprintf(out + len, n - (size_t)len, "; %llu allocation%s refused",
                        (unsigned long long)e->refused, e->refused == 1 ? "" : "s");
    if (e->driver_unseen && len >= 0 && (size_t)len < n)
        snprintf(out + len, n - (size_t)len,
                 "; the driver's own part was not charged: a process of the command could not be "
                 "found in NVML's list (in a pid namespace of its own, on a driver that lists "
                 "processes by their pid on the host, without vramd to say it)");
}

/* ------------------------------------------------------ vramd's grants */

void command_set_granted(struct command_owner *o) { o->shared->flags |= COMMAND_GRANTED; }

int command_grant(struct command_owner *o, const char *uuid, int ordinal, uint64_t bytes)
{
    /* Before the command starts: no process can be looking yet. */
    struct command_shared *s = o->shared;
    uint32_t n = atomic_load(&s->devices);
    if (n >= COMMAND_MAX_DEVICES)
        return -1;
    struct command_device_entry *e = &s->device[n];
    snprintf(e->uuid, sizeof e->uuid, "%s", uuid);
    e->ordinal = ordinal;
    e->budget = bytes;
    atomic_store(&s->devices, n + 1);
    command_set_granted(o);
    return 0;
}

/* ------------------------------------------------------- processes */

/* The parent of `pid`, from /proc/PID/stat (after the command's name,
 * which may itself contain parentheses). */
int command_parent_of(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int f = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t len = f < 0 ? -1 : read(f, buf, sizeof buf - 1);
    if (f >= 0)
        close(f);
    if (len <= 0)
        return 0;
    buf[len] = 0;
    char *end = strrchr(buf, ')');
    char state;
    int ppid;
    return end && sscanf(end + 1, " %c %d", &state, &ppid) == 2 ? ppid : 0;
}

bool command_descends(int pid, int ancestor)
{
    for (int depth = 0; pid > 1 && depth < 64; depth++) {
        if (pid == ancestor)
            return true;
        pid = command_parent_of(pid);
    }
    return false;
}
