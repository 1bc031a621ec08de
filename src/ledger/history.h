/* history: what vramd remembers of the last hour, per device and per
 * client (a process or a job) on each device: the memory in use and the
 * budget.
 *
 * A series holds two rings, both of the highest value within each step,
 * so that no peak between two samples is lost (as the timeline keeps the
 * highest level per pixel column):
 *   recent: HISTORY_RECENT steps of 1 s, the last 2 minutes (vram top's trend);
 *   hour:   HISTORY_HOUR steps of 10 s, the last hour.
 * A device's series is its in-use figure (clients' reports and NVML's) and
 * what it has granted; a client's, what it reports in use and its grant.
 * They are fed at every REPORT (history_note_client, _device: a binary
 * search and four maxima) and once a second from the ledger
 * (history_tick: grants, NVML's figures, and steps in which nothing was
 * reported take the value carried from the step before).
 *
 * Memory is fixed per series (HISTORY_SERIES_BYTES, 7,984 bytes), allocated
 * when a client first holds, waits for or uses memory on a device. When a
 * client leaves its series end but are kept, so that a job can be plotted
 * after it ended (vram plot --job): for an hour, and at most
 * HISTORY_ENDED_MAX of them, the oldest dropped first. With 1,000 clients
 * on one GPU each that is 1,000 live series and up to 1,024 ended: 15 MiB.
 * Whatever clients do, the store holds at most HISTORY_SERIES_MAX series
 * (62 MiB), and a user other than root at most HISTORY_USER_SERIES_MAX of
 * them (16 MiB: 4,096 connections waiting on 16 GPUs would otherwise be
 * 500 MiB): a new series takes the place of the oldest ended one (the
 * user's own, at the user's bound) or, if none has ended, is not kept.
 * A client whose series was not kept is remembered (not_kept counts them)
 * and tried again only once room may have come (a series ended or went).
 *
 * Nothing here costs in proportion to the clients at each step: series
 * are found by key (a binary search), each user's series are counted as
 * they come and go, and the ended ones are kept in the order they ended,
 * all of them and each user's, so the oldest is the first. At 10,000
 * clients the once-a-second sampling is a lookup per client.
 * The history is in memory only: a restarted daemon begins a new one.
 *
 * Who sees what (history_page): root, every series; anyone else the
 * devices' series and their own clients', never another user's. Pure: the
 * caller gives the time and sends the messages.
 */
#ifndef VRAM_HISTORY_H
#define VRAM_HISTORY_H

#include "ledger.h"
#include "../protocol/protocol.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HISTORY_RECENT_MS 1000
#define HISTORY_RECENT 120
#define HISTORY_HOUR_MS 10000
#define HISTORY_HOUR 360
#define HISTORY_KEEP_MS 3600000 /* an ended series is kept this long after its end */
#define HISTORY_ENDED_MAX 1024
#define HISTORY_SERIES_MAX 8192      /* live and ended, every user's */
#define HISTORY_USER_SERIES_MAX 2048 /* of one user other than root */

struct history_sample {
    uint64_t used, budget; /* the highest within the step */
};

struct history_user;

struct history_series {
    uint64_t key; /* the order of pages: a device's is dev + 1, a client's id << 5 | dev */
    char kind;    /* 'd' a device, 'p' a process, 'j' a job */
    int dev, id;
    pid_t pid;
    uid_t uid; /* a device's: -1 */
    char user[64], cmd[64], job[64];
    uint64_t begin_ms, end_ms; /* end_ms: 0 while the client is connected */
    uint64_t step;             /* the open recent step: time / HISTORY_RECENT_MS */
    struct history_sample last; /* the latest values, carried into later steps */
    struct history_user *owner; /* a client's: its user's count and ended list */
    /* Once ended: the ended series in the order they ended, all of them
     * and the owner's. */
    struct history_series *ended_prev, *ended_next, *mine_prev, *mine_next;
    struct history_sample recent[HISTORY_RECENT], hour[HISTORY_HOUR];
};

#define HISTORY_SERIES_BYTES sizeof(struct history_series)

/* A user's series (root's too, which no bound limits): how many, and the
 * ended ones, oldest first. */
struct history_user {
    uid_t uid;
    int series;
    struct history_series *ended_head, *ended_tail;
};

/* A client's series on a device that was not kept: not tried again until
 * `room` differs from the history's (room may have come since). */
struct history_refused {
    uint64_t key;
    uint64_t room;
};

struct history {
    struct history_series **series; /* by key */
    int n, cap;
    int nended;
    struct history_series *ended_head, *ended_tail; /* in the order they ended */
    struct history_user **users; /* by uid */
    int nusers, users_cap;
    struct history_refused *refused; /* by key */
    int nrefused, refused_cap;
    uint64_t room; /* changes whenever a series ends or goes */
    unsigned long not_kept; /* clients' series on a device not kept for the bounds */
    uint64_t next_tick_ms;
    size_t bytes; /* what the series take */
};

void history_init(struct history *h);
void history_destroy(struct history *h);

/* A client's standing on a device (what it reports in use, its grant),
 * at `now_ms`; a series is begun if the client holds, waits for or uses
 * memory there. Monitors have none. */
void history_note_client(struct history *h, const struct ledger_client *c, int dev,
                         uint64_t now_ms);
/* A device's in-use and granted figures. */
void history_note_device(struct history *h, const struct ledger *l, int dev, uint64_t now_ms);
/* The client left: its series end now. */
void history_client_left(struct history *h, int id, uint64_t now_ms);
/* Once every HISTORY_RECENT_MS (sooner does nothing): every device and
 * client of the ledger noted, the series of clients no longer in it
 * ended, ended series past HISTORY_KEEP_MS dropped. */
void history_tick(struct history *h, const struct ledger *l, uint64_t now_ms);

/* What a HISTORY message asks for. */
struct history_query {
    uid_t viewer;     /* root sees every series, anyone else theirs and the devices' */
    const char *job;  /* NULL: the devices and the live clients; else this job's clients,
                         live or ended: the job name, or NAME.STEP for a Slurm job NAME */
    bool recent_only; /* only the recent ring (vram top) */
    uint64_t after;   /* the cursor: series after this key */
};

/* Sends one page of the answer: for each series, SERIES and its SAMPLES
 * (history_view.h), at most `max_messages` messages in all (a series is
 * never split between pages; one is sent whatever its size). *next is the
 * cursor of the next page, 0 when this is the last. Live series are
 * brought up to `now_ms` first. `send` returns non-zero to stop: that is
 * returned. */
typedef int (*history_send_fn)(struct proto_writer *w, void *arg);
int history_page(struct history *h, const struct history_query *q, uint64_t now_ms,
                 int max_messages, history_send_fn send, void *arg, uint64_t *next);

/* Recounts what is kept as series come and go (each user's count, the
 * ended lists and their order, the refused clients' order) from scratch:
 * 0 if they agree, -1 with what differs (tests and the fuzzer). */
int history_check(const struct history *h, char *err, size_t errlen);

/* True if a series of job `name` belongs to the job asked for: the same
 * name, or a step of it ("1234.0" of "1234"). */
bool history_job_matches(const char *name, const char *asked);

#endif
