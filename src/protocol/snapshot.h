/* snapshot: one picture of the ledger, and its messages.
 *
 * The daemon takes it (ledger_snapshot, src/ledger) and sends it as
 * NODE/DEV/PROC messages; a reader asks for it (snapshot_fetch,
 * src/client/fetch.h), rebuilds it from those messages and shows it in one
 * of its forms (src/view): `vram top` (screen.h), `vram status --json`
 * (snapshot_json.h) or Prometheus's text (metrics.h, also vramd's
 * --metrics-file). One structure, and one renderer per form, so the views
 * cannot disagree.
 */
#ifndef VRAM_SNAPSHOT_H
#define VRAM_SNAPSHOT_H

#include "protocol.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The node the daemon runs on; "" where unknown (no NVML). */
struct snap_node {
    char host[64];
    char driver[80], nvml[80], cuda[16]; /* versions */
};

struct snap_device {
    int index;
    char uuid[48], name[64], pci_bus_id[32]; /* name, bus id: "" unknown */
    int minor;                               /* N of /dev/nvidiaN; -1 unknown */
    uint64_t total, reserved, granted, used, unseen;
    /* What vramd would grant now to a request no reservation is for: the
     * device less its grants, what reservations set aside and the usage
     * outside grants (as a refusal counts it). "free" is physical: total
     * less used. */
    uint64_t grantable;
    bool overcommitted; /* grants and usage outside them exceed the device */
    int waiting;        /* requests waiting for it now */
    /* Since the daemon started: requests refused (at once or after
     * waiting), grants taken back from clients that went (and their
     * bytes), waits that ended and the time they took together. */
    uint64_t refused, reclaimed, reclaimed_bytes, waits, waited_ms;
    /* What NVML says the GPU is doing, where the reader asked it (vram top
     * without vramd): sensors false when not asked; each figure -1 where
     * NVML cannot say. Not in vramd's messages. */
    bool sensors;
    int gpu_percent, celsius;
    long milliwatts, limit_milliwatts;
};

/* One entry on one device:
 *   'p' a client process, 'j' a job's grant (Slurm): their standing;
 *   'n' a process NVML sees using the device without a grant (its usage in
 *       used and nvml);
 *   'u' a user's total: every process of theirs together (grant counted
 *       once, used with usage outside grants, unseen that usage alone,
 *       procs how many processes), with the most they ever held at once in
 *       peak; no pid, command, job or client id.
 * A reader other than root gets 'p', 'j' and 'n' entries only for their own
 * processes, and every user's 'u'. */
struct snap_entry {
    int dev;
    int id;
    int pid;
    uint32_t uid; /* UINT32_MAX: unknown */
    char role;
    char user[64], cmd[64], job[64];
    uint64_t grant, used, peak, nvml, want;
    uint64_t unseen; /* 'u' */
    uint64_t start;  /* 'p', 'n': the process's start, clock ticks after boot; 0 unknown */
    int procs;       /* 'u' */
    int queue;       /* waiting: its place in the device's queue, 1 the next */
    bool waiting, over;
    /* 'p', 'j' holding or drawing from a grant: what holds it to the grant,
     * SNAP_BY_DRIVER (the driver's own per-cgroup limit, besides the
     * interposer) or SNAP_BY_INTERPOSER; 0 for the rest, and from a vramd
     * that does not say. */
    char backend;
};
#define SNAP_BY_DRIVER 'd'
#define SNAP_BY_INTERPOSER 'i'
/* Its name in messages, JSON and on the screen ("driver", "interposer"),
 * or NULL for 0. */
const char *snapshot_backend_name(char backend);

struct history_view;

struct snapshot {
    /* Not vramd's ledger but NVML's figures and the commands' own budgets
     * (tools/nvml_view.h: no vramd runs): the ledger's own figures
     * (reserved, grantable, unseen on a device, waiting, the counters) are
     * not known. */
    bool nvml_view;
    struct snap_node node;
    int ndev;
    struct snap_device dev[SNAP_MAX_DEVICES];
    int n, cap;
    struct snap_entry *e;
    /* vramd's history of the devices and entries (history_view.h), when it
     * was fetched too; snapshot_free frees it. */
    struct history_view *history;
};

void snapshot_init(struct snapshot *s);
void snapshot_free(struct snapshot *s);
/* Appends an entry (NULL if out of memory). */
struct snap_entry *snapshot_add(struct snapshot *s);
/* The role's name in messages and JSON ("process", "job", "unseen", "user"). */
const char *snapshot_role_name(char role);
/* The entry's device, or NULL. */
const struct snap_device *snapshot_device(const struct snapshot *s, int index);

/* As protocol messages: one NODE, one DEV per device, one PROC per entry. */
int snapshot_encode_node(const struct snap_node *n, struct proto_writer *w);
int snapshot_encode_device(const struct snap_device *d, struct proto_writer *w);
int snapshot_encode_entry(const struct snap_entry *e, struct proto_writer *w);
/* Takes one NODE, DEV or PROC message into the snapshot; -1 with err if
 * malformed. */
int snapshot_decode(struct snapshot *s, const struct proto_msg *m, char *err, size_t errlen);

#endif
