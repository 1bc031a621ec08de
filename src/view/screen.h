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

struct top_view {
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
    /* A process's full command line where the viewer can read it, or NULL
     * for the name the ledger has. */
    const char *(*command_line)(const struct snap_entry *e, void *arg);
    void *arg;
};

/* Writes the screen: at most v->height lines, none wider than v->width,
 * each ended by a newline. Returns the number of process rows, for
 * scrolling. */
int snapshot_top(const struct snapshot *s, struct top_view *v, FILE *out);

#endif
