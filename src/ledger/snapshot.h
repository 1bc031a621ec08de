/* snapshot: one picture of the ledger and every form it is shown in.
 *
 * The daemon takes it (ledger_snapshot), sends it as DEV/PROC messages,
 * and writes it as Prometheus text for --metrics-file; the CLI rebuilds it
 * from those messages and prints it as `vram top`, `vram status --json` or
 * `--prometheus`. One structure and one renderer per form, so the views
 * cannot disagree.
 */
#ifndef VRAM_SNAPSHOT_H
#define VRAM_SNAPSHOT_H

#include "protocol.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define SNAP_MAX_DEVICES 16

struct snap_device {
    int index;
    char uuid[48];
    uint64_t total, reserved, granted, used, unseen;
    bool overcommitted; /* grants and usage outside them exceed the device */
};

/* One client's standing on one device; or, for a reader other than root,
 * another user's total on one device (role 'u': id and pid 0, cmd and job
 * "-"): a user sees their own processes and only totals of others. */
struct snap_entry {
    int dev;
    int id;
    int pid;
    uint32_t uid;
    char role; /* 'p' process, 'j' job, 'u' a user's total */
    char user[64], cmd[64], job[64];
    uint64_t grant, used, peak, nvml, want;
    bool waiting, over;
};

struct history_view;

struct snapshot {
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

/* As protocol messages: one DEV per device, one PROC per entry. */
int snapshot_encode_device(const struct snap_device *d, struct proto_writer *w);
int snapshot_encode_entry(const struct snap_entry *e, struct proto_writer *w);
/* Takes one DEV or PROC message into the snapshot; -1 with err if malformed. */
int snapshot_decode(struct snapshot *s, const struct proto_msg *m, char *err, size_t errlen);

/* Asks the daemon at `socket_path` for the ledger (STATUS, page after
 * page) and rebuilds it in s (initialised here; the caller frees it). 0,
 * or -1 with err. */
int snapshot_fetch(const char *socket_path, struct snapshot *s, char *err, size_t errlen);

void snapshot_json(const struct snapshot *s, FILE *out);
void snapshot_prometheus(const struct snapshot *s, FILE *out);
/* The `vram top` screen, `width` columns wide (80 at least). */
void snapshot_top(const struct snapshot *s, FILE *out, int width);

#endif
