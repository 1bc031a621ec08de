/* timeline: a recording brought down to what a picture of it can show.
 *
 * A page is a thousand or so pixels wide; a recording may hold millions
 * of events. The time axis is cut into `ncols` columns, one per pixel, and
 * each column keeps, for every series of a chart, the highest value it
 * reached in the column, the highest value each stack level (the sum of
 * the series below and including it) reached, and the value at the
 * column's end; for the device's total also the lowest. Every
 * intermediate state counts, so no peak is lost however many events fall
 * into one column, and the drawing is exact where a column holds one
 * event or none.
 *
 * Per device there are two charts over the same columns: stacked by
 * family, and stacked by process (the processes with the highest peaks on
 * the device, the rest summed as "other"), and the budget line, NVML's
 * line (usage.h) where the recording has NVML's readings, the refusals per
 * column and the device's peak.
 */
#ifndef VRAM_TIMELINE_H
#define VRAM_TIMELINE_H

#include "reader.h"

#define TIMELINE_MAX_SERIES 12

struct timeline_chart {
    int nseries;
    /* A process's pid and whole command line (recording.h's 224 bytes):
     * the chart's legend and tip show what a reader would look up, from a
     * checkout under any path. */
    char names[TIMELINE_MAX_SERIES][240];
    int family[TIMELINE_MAX_SERIES]; /* by family: its enum record_family; else -1 */
    uint32_t pid[TIMELINE_MAX_SERIES]; /* by process: its pid; 0 for "other" */
    uint64_t series_peak[TIMELINE_MAX_SERIES];
    /* Per column c and series s, at [c * nseries + s]: */
    uint64_t *level_max;   /* highest sum of series 0..s within the column */
    uint64_t *series_max;  /* highest value of series s within the column */
    uint64_t *series_last; /* value of series s at the column's end */
};

struct timeline_refusal {
    uint64_t time, bytes, in_use, budget;
    uint32_t pid;
    uint8_t family, reason;
};

#define TIMELINE_LISTED_REFUSALS 1000
#define TIMELINE_NO_NVML UINT64_MAX

struct timeline_device {
    int dev;
    struct timeline_chart by_family, by_process;
    uint64_t *total_min, *total_max, *total_last; /* [column] */
    uint64_t *budget;   /* [column]: the budget line's highest value in it; 0: none */
    uint32_t *refusals; /* [column]: refusals in it */
    struct timeline_refusal *listed; /* the first TIMELINE_LISTED_REFUSALS */
    size_t nlisted;
    uint64_t refusal_count;
    uint64_t peak, peak_time; /* exact: the highest total of any moment */
    uint64_t budget_peak;
    bool command_budget; /* the line is the command's budget, not the processes' */
    /* [column]: NVML's line, its highest value in the column and its value
     * at the column's end; TIMELINE_NO_NVML before the device's first
     * reading. NULL when the device has none (an old recording, no NVML). */
    uint64_t *nvml_max, *nvml_last;
    uint64_t nvml_peak;
    uint64_t events;
};

struct timeline {
    int ncols;
    uint64_t start, end; /* CLOCK_MONOTONIC ns: column c starts at timeline_column_time(c) */
    int64_t realtime_offset;
    int ndevices;
    struct timeline_device *devices; /* the devices that have events */
    size_t nevents, nimages;
    uint64_t unmatched;
};

/* Builds the timeline of `r` in `ncols` columns, of every device or only
 * `only_device` (>= 0). 0, or -1 if memory ran out. */
int timeline_build(const struct recording *r, int ncols, int only_device, struct timeline *t);
void timeline_free(struct timeline *t);

/* Where column c begins, and the column of a time. */
uint64_t timeline_column_time(const struct timeline *t, int c);
int timeline_column_of(const struct timeline *t, uint64_t time);
/* How long the columns together are, ns (end - start + 1: up to 2^64). */
double timeline_span_ns(const struct timeline *t);

#endif
