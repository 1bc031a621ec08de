/* history_view: vramd's history (src/ledger/history.h) as a reader gets
 * it: the series `vram status --json`, `vram top` and `vram plot --job`
 * show (asked for by history_fetch, src/client/fetch.h).
 *
 * The answer to HISTORY is, per series:
 *   SERIES key=K dev=D kind=device|process|job [id= pid= uid= user= cmd= job=]
 *          begin=MS [end=MS]
 *   SAMPLES key=K tier=recent|hour first=MS step=MS used=RUNS budget=RUNS  (one or more)
 * then END [next=CURSOR] now=MS wall=MS. Times are the daemon's monotonic
 * clock in ms (now= is its present, wall= the same moment as Unix time in
 * ms); first= is the start of the first sample's step, and each sample is
 * the highest value within its step. A device's budget is what it has
 * granted.
 */
#ifndef VRAM_HISTORY_VIEW_H
#define VRAM_HISTORY_VIEW_H

#include "protocol.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define HISTORY_VIEW_MAX_SAMPLES 4096 /* per ring: what a reader accepts */

struct history_ring {
    uint64_t first_ms, step_ms;
    int n;
    uint64_t *used, *budget;
};

struct history_line {
    uint64_t key;
    char kind; /* 'd', 'p', 'j' */
    int dev, id, pid;
    uint32_t uid;
    char user[64], cmd[64], job[64];
    uint64_t begin_ms, end_ms; /* end_ms 0: still connected */
    struct history_ring recent, hour;
};

struct history_view {
    int n, cap;
    struct history_line *line;
    uint64_t now_ms;       /* the daemon's clock when the last page was made */
    int64_t wall_offset_ms; /* + a daemon time = Unix time, ms */
};

void history_view_init(struct history_view *v);
void history_view_free(struct history_view *v);

/* Takes one SERIES, SAMPLES or END message. 0; 1 for END (with *next, 0
 * when it was the last page); -1 with err if it is malformed or does not
 * follow (SAMPLES of another series, a gap in a ring). */
int history_view_take(struct history_view *v, const struct proto_msg *m, uint64_t *next,
                      char *err, size_t errlen);

/* The series of a device, or of a client on a device; NULL if none. */
const struct history_line *history_view_device(const struct history_view *v, int dev);
const struct history_line *history_view_client(const struct history_view *v, int id, int dev);

#endif
