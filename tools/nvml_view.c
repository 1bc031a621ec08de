/* nvml_view: vram top's picture without vramd (nvml_view.h). */
#include "nvml_view.h"

#include "../src/cuda/nvml_query.h"
#include "../src/command/command_state.h"
#include "processes.h"
#include "../src/util/saturate.h"
#include "../src/util/text.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int nvml_view_open(char *err, size_t n) { return nvml_open(NULL, "vram top", err, n); }

void nvml_view_close(void) { nvml_close(); }

/* The commands met while one picture is taken, mapped read-only. */
#define MAX_COMMANDS 64
struct commands {
    int n;
    struct command_seen {
        unsigned char id[16];
        const struct command_shared *s; /* NULL: not reachable by this user */
        int fd; /* the state's, for telling its live slots (-1 with s NULL) */
    } c[MAX_COMMANDS];
};

/* VRAM_COMMAND in the environment the process started with ("" if none or
 * not readable: another user's). */
static void command_of(unsigned pid, char *out, size_t n)
{
    char path[64], buf[32768];
    out[0] = 0;
    snprintf(path, sizeof path, "/proc/%u/environ", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    size_t key = strlen(COMMAND_ENV);
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
        if (strncmp(buf + i, COMMAND_ENV, key) == 0 && buf[i + key] == '=') {
            snprintf(out, n, "%s", buf + i + key + 1);
            return;
        }
}

/* The state of the command `pid` belongs to, or NULL: the places its
 * VRAM_COMMAND names ("ID:PID/FD,PID/FD,..."), each checked as the
 * command's own processes check it (command_state_open). */
static const struct command_seen *state_of(struct commands *cs, unsigned pid)
{
    char v[512];
    unsigned char id[16];
    command_of(pid, v, sizeof v);
    if (strlen(v) < 34 || v[32] != ':' || command_id_parse(v, id) != 0)
        return NULL;
    for (int i = 0; i < cs->n; i++)
        if (memcmp(cs->c[i].id, id, sizeof id) == 0)
            return cs->c[i].s ? &cs->c[i] : NULL;
    if (cs->n == MAX_COMMANDS)
        return NULL;
    struct command_seen *c = &cs->c[cs->n++];
    memcpy(c->id, id, sizeof id);
    c->s = NULL;
    c->fd = -1;
    for (const char *p = v + 33; *p && !c->s;) {
        int owner, fd, used = 0;
        if (sscanf(p, "%d/%d%n", &owner, &fd, &used) != 2)
            break;
        char why[256];
        int f = command_state_open(owner, fd, id, why, sizeof why);
        if (f >= 0) {
            void *m = mmap(NULL, sizeof(struct command_shared), PROT_READ, MAP_SHARED, f, 0);
            if (m != MAP_FAILED)
                c->s = m, c->fd = f;
            else
                close(f);
        }
        p += used;
        p += *p == ',';
    }
    return c->s ? c : NULL;
}

static void commands_free(struct commands *cs)
{
    for (int i = 0; i < cs->n; i++)
        if (cs->c[i].s) {
            munmap((void *)cs->c[i].s, sizeof(struct command_shared));
            close(cs->c[i].fd);
        }
    cs->n = 0;
}

/* The command's entry for the GPU `uuid`, or -1. */
static int device_in(const struct command_shared *s, const char *uuid)
{
    uint32_t n = atomic_load(&((struct command_shared *)s)->devices);
    for (uint32_t d = 0; d < n && d < COMMAND_MAX_DEVICES; d++)
        if (strncmp(s->device[d].uuid, uuid, sizeof s->device[d].uuid) == 0)
            return (int)d;
    return -1;
}

static uint64_t load64(const _Atomic uint64_t *p) { return atomic_load((_Atomic uint64_t *)p); }

/* The program a vram run command runs: what follows " -- " on vram run's
 * command line, else the line. */
static void program_of(int pid, char *out, size_t n)
{
    if (!process_program((unsigned)pid, true, out, n, NULL))
        snprintf(out, n, "-");
}

/* The command's row on a device: its budget, what its live processes hold
 * together by its own count, and the most they held. Added once. A killed
 * process's slot keeps its count until a process of the command next needs
 * the room (or vram run sums up at the end): it is left out here, as vramd
 * leaves out a client that went. */
static struct snap_entry *job_row(struct snapshot *s, const struct command_seen *c, int cd,
                                  const struct snap_entry *member)
{
    const struct command_shared *st = c->s;
    char name[64];
    snprintf(name, sizeof name, "run-%d", st->supervisor);
    for (int i = 0; i < s->n; i++)
        if (s->e[i].role == 'j' && s->e[i].dev == member->dev && s->e[i].uid == member->uid &&
            strcmp(s->e[i].job, name) == 0)
            return &s->e[i];
    struct snap_entry *j = snapshot_add(s);
    if (!j)
        return NULL;
    j->role = 'j';
    j->dev = member->dev;
    j->id = s->n;
    j->pid = st->supervisor;
    j->uid = member->uid;
    snprintf(j->user, sizeof j->user, "%s", member->user);
    snprintf(j->job, sizeof j->job, "%s", name);
    program_of(st->supervisor, j->cmd, sizeof j->cmd);
    j->start = process_start((unsigned)st->supervisor);
    j->grant = st->device[cd].budget;
    j->peak = load64(&st->device[cd].peak);
    uint32_t slots = atomic_load(&((struct command_shared *)st)->slots);
    for (uint32_t i = 0; i < slots && i < COMMAND_MAX_SLOTS; i++) {
        uint64_t u = load64(&st->used[cd][i]);
        if (u && command_slot_alive(c->fd, (int)i))
            j->used += u;
    }
    j->nvml = 0;
    return j;
}

/* A process's standing in its command on a device: its slot's peak, its
 * job (a shared budget) or its own budget (--per-process). */
static void in_command(struct snapshot *s, struct commands *cs, int e_index, const char *uuid,
                       uint64_t *granted)
{
    struct snap_entry *e = &s->e[e_index];
    const struct command_seen *c = state_of(cs, (unsigned)e->pid);
    const struct command_shared *st = c ? c->s : NULL;
    int cd = st ? device_in(st, uuid) : -1;
    if (cd < 0 || !st->device[cd].budget)
        return;
    for (int i = 0; i < COMMAND_MAX_SLOTS; i++)
        if (atomic_load((_Atomic int32_t *)&st->pid[i]) == e->pid)
            e->peak = load64(&st->peak[cd][i]);
    e->role = 'p';
    if (st->mode == COMMAND_PER_PROCESS) {
        e->grant = st->device[cd].budget;
        *granted += e->grant;
        return;
    }
    struct snap_entry copy = *e;
    size_t before = (size_t)s->n;
    struct snap_entry *j = job_row(s, c, cd, &copy);
    if (!j)
        return;
    if ((size_t)s->n > before)
        *granted += j->grant;
    snprintf(s->e[e_index].job, sizeof s->e[e_index].job, "%s", j->job);
}

/* Each user's total on each device, from the process rows. */
static void users(struct snapshot *s)
{
    int n = s->n;
    for (int i = 0; i < n; i++) {
        const struct snap_entry e = s->e[i];
        struct snap_entry *u = NULL;
        for (int k = n; k < s->n && !u; k++)
            if (s->e[k].uid == e.uid && s->e[k].dev == e.dev)
                u = &s->e[k];
        if (!u) {
            if (!(u = snapshot_add(s)))
                return;
            u->role = 'u';
            u->dev = e.dev;
            u->uid = e.uid;
            u->id = s->n;
            snprintf(u->user, sizeof u->user, "%s", e.user);
            snprintf(u->cmd, sizeof u->cmd, "-");
            snprintf(u->job, sizeof u->job, "-");
        }
        if (e.role == 'j') {
            u->grant += e.grant;
            continue;
        }
        u->procs++;
        u->used = add_saturating(u->used, e.used); /* NVML's figures, whatever they say */
        u->grant += e.grant;
        if (e.role == 'n') /* no budget of a command's */
            u->unseen += e.used;
    }
}

int nvml_view_take(struct snapshot *s, char *err, size_t n)
{
    snapshot_init(s);
    s->nvml_view = true;
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) == 0)
        text_printable(s->node.host, sizeof s->node.host, host);
    struct nvml_versions ver;
    nvml_versions(&ver);
    /* NVML's words go to a terminal: printable only, as vramd shows them. */
    text_printable(s->node.driver, sizeof s->node.driver, ver.driver);
    text_printable(s->node.nvml, sizeof s->node.nvml, ver.nvml);
    text_printable(s->node.cuda, sizeof s->node.cuda, ver.cuda);
    int count = nvml_count(err, n);
    if (count < 0)
        return -1;
    if (count > SNAP_MAX_DEVICES)
        count = SNAP_MAX_DEVICES;
    struct commands cs = {0};
    for (int g = 0; g < count; g++) {
        nvmlDevice_t d;
        struct nvml_about about;
        struct nvml_memory mem = {0, 0, 0};
        struct nvml_sensors sen;
        if (nvml_by_index((unsigned)g, &d, err, n) != 0 || nvml_about(d, &about, err, n) != 0 ||
            nvml_memory(d, &mem, err, n) != 0) {
            commands_free(&cs);
            return -1;
        }
        nvml_sensors(d, &sen);
        struct snap_device *dev = &s->dev[s->ndev++];
        *dev = (struct snap_device){.index = g, .minor = about.minor, .total = mem.total,
                                    .used = mem.used, .sensors = true,
                                    .gpu_percent = sen.gpu_percent, .celsius = sen.celsius,
                                    .milliwatts = sen.milliwatts,
                                    .limit_milliwatts = sen.limit_milliwatts};
        text_printable(dev->uuid, sizeof dev->uuid, about.uuid);
        text_printable(dev->name, sizeof dev->name, about.name);
        text_printable(dev->pci_bus_id, sizeof dev->pci_bus_id, about.pci_bus_id);
        struct nvml_process *p;
        int np = nvml_processes_on(d, &p, err, n);
        if (np < 0) {
            commands_free(&cs);
            return -1;
        }
        for (int i = 0; i < np; i++) {
            struct snap_entry *e = snapshot_add(s);
            if (!e)
                break;
            struct process_identity who;
            process_identify(p[i].pid, &who);
            e->role = 'n';
            e->dev = g;
            e->id = s->n;
            e->pid = (int)p[i].pid;
            e->uid = who.uid >= 0 ? (uint32_t)who.uid : UINT32_MAX;
            e->used = e->nvml = p[i].used;
            e->start = process_start(p[i].pid);
            snprintf(e->user, sizeof e->user, "%s", who.user);
            /* The program's name, as the ledger keeps it. */
            char line[256];
            size_t name = 0;
            if (!process_program(p[i].pid, false, line, sizeof line, &name))
                snprintf(line, sizeof line, "-"), name = 1;
            snprintf(e->cmd, sizeof e->cmd, "%.*s", (int)name, line);
            snprintf(e->job, sizeof e->job, "-");
            in_command(s, &cs, s->n - 1, dev->uuid, &dev->granted);
        }
        free(p);
    }
    commands_free(&cs);
    users(s);
    return 0;
}
