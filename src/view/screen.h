/* screen: the `vram top` screen, drawn from a snapshot.
 *
 * Top to bottom: a header (host, time, driver, CUDA and NVML versions),
 * the devices (one row and one bar each; always on screen), the users
 * (every user's total per device; as many rows as a third of what is left
 * allows), the processes (scrolling when they do not fit), and, on a live
 * screen, a footer that names the keys. Every table is a list of columns:
 * a column is shown when the width allows (the least useful go first), a
 * flexible one (names, the command) takes what is left; a new figure is a
 * new entry in a table's column list.
 */
#ifndef VRAM_SCREEN_H
#define VRAM_SCREEN_H

#include "../protocol/snapshot.h"

#include <stdbool.h>
#include <stdio.h>
#include <time.h>

enum top_sort { SORT_MEMORY, SORT_USER, SORT_PID, SORT_TIME, SORT_GPU, SORT_COUNT };

/* The key that chooses each sort ('m', 'u', 'p', 't', 'g'), and its name. */
extern const char top_sort_key[SORT_COUNT];
extern const char *const top_sort_name[SORT_COUNT];
/* The sort a name or an unambiguous prefix of one names ("mem"), or -1. */
int top_sort_named(const char *name);

/* Which entry a selected row is, so that the selection stays on it when
 * the rows change. */
struct top_pick {
    bool on;
    int pid, dev, id;
    char role;
};

struct top_view {
    const char *title; /* the header's first word: "vram status"; NULL: "vram top" */
    int width;  /* columns; 80 at least is assumed */
    int height; /* lines; 0: as many as it takes (not a terminal) */
    enum top_sort sort;
    bool reverse;
    int scroll;    /* the first process row shown; kept within bounds here */
    bool live;     /* a live screen: the footer names the keys */
    time_t now;    /* the header's time */
    double uptime; /* seconds since boot, for processes' running time; 0: unknown */
    long ticks;    /* clock ticks per second (processes' start times are in them) */
    const char *problem; /* said under the header (vramd does not answer...), or NULL */
    /* No vramd: the snapshot is NVML's figures and the commands' own
     * budgets (jobs are vram run commands), so the ledger's columns
     * (reserved, granted, unseen, waiting, state) are left out. */
    bool nvml_view;
    /* Live: the selected process row (-1: none), shown in reverse video and
     * kept on screen; `pick` in: the entry to keep it on (else the row
     * stays); out: the entry selected, with a copy in `selected`. */
    int cursor;
    struct top_pick pick;
    struct snap_entry selected;
    /* Live: a line that takes the footer's place (a question, an answer). */
    const char *prompt;
    /* A process's full command line where the viewer can read it, or NULL
     * for the name the ledger has. */
    const char *(*command_line)(const struct snap_entry *e, void *arg);
    void *arg;
};

/* Writes the screen: at most v->height lines, none wider than v->width
 * (the selected row's reverse video aside), each ended by a newline.
 * Returns the number of process rows, for scrolling. Processes of a job
 * follow its row, whatever the sort. */
int snapshot_top(const struct snapshot *s, struct top_view *v, FILE *out);

#endif
