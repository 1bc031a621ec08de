/* summary: the figures of a recording a person asks for first: how much,
 * when, by whom, and what was refused. `vram record info` prints it; the
 * supervisor of `vram run --record` can print its one line at the end. */
#ifndef VRAM_SUMMARY_H
#define VRAM_SUMMARY_H

#include "reader.h"

#include <stdbool.h>
#include <stdio.h>

struct summary_device {
    uint64_t peak, peak_time;              /* bytes in use at the busiest moment, and when */
    uint64_t family_peak[RECORD_FAMILIES]; /* each family's own peak */
    uint64_t budget_peak;                  /* highest budget line; 0: none */
    uint64_t nvml_peak;                    /* highest NVML line (usage.h) */
    bool nvml;                             /* ... NVML's readings are recorded */
    uint64_t refusals, allocations, events;
};

struct summary {
    size_t events;
    uint64_t duration; /* ns from the first event to the last */
    int ndevices;
    struct summary_device *devices; /* [device ordinal] */
    uint64_t peak_all, peak_all_time; /* all devices together */
    size_t processes, exited, threads;
    uint64_t unmatched;
};

/* 0, or -1 if memory ran out. */
int summary_build(const struct recording *r, struct summary *s);
void summary_free(struct summary *s);

/* For people: a few lines. `name` is what the recording is called. */
void summary_print(const struct recording *r, const struct summary *s, const char *name,
                   FILE *out);
/* For scripts: one JSON object, every figure in bytes and seconds. */
void summary_print_json(const struct recording *r, const struct summary *s, FILE *out);

#endif
