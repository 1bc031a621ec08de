/* history_view: vramd's history (history.h) as a reader gets it, and its
 * forms: the JSON of `vram status --json` and the series `vram top` and
 * `vram plot --job` draw.
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

/* Asks the daemon at socket_path for its history (HISTORY page after page;
 * job NULL: the devices and the live clients). v is initialised here; the
 * caller frees it. 0, or -1 with err (the daemon's own words when it
 * refused). */
int history_fetch(const char *socket_path, const char *job, bool recent_only,
                  struct history_view *v, char *err, size_t errlen);

/* The series of a device, or of a client on a device; NULL if none. */
const struct history_line *history_view_device(const struct history_view *v, int dev);
const struct history_line *history_view_client(const struct history_view *v, int id, int dev);

/* ,"history":{...} for a JSON object (nothing when line is NULL): each
 * ring as its start (Unix seconds), step and the arrays "used" and
 * "budget" ("granted" for a device). */
void history_view_json(FILE *out, const struct history_view *v, const struct history_line *line);

#endif
