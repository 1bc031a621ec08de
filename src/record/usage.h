/* usage: what a recording says was in use at each moment.
 *
 * usage_walk() goes through a recording's events in time order and keeps
 * the bytes in use per device, per device and family, and per process
 * image and device, and the budget line of each device; it calls back
 * after every event with what changed. It is the one reading of a
 * recording's meaning that every form shares (the CSV, the trace, the plot,
 * `vram record info`), so they all agree on every figure.
 *
 * Its rules: an allocation is in use from its ALLOC to its FREE; a
 * reservation (RESIZE) is in use at its latest size; when a process image
 * exits, what it still held is freed then (the driver frees it), as
 * implied frees, and so when an image without an exit record is followed
 * by the next image of its pid (it exec'd: reader.h's `replaces`); a free
 * of something never allocated is counted in `unmatched` and changes
 * nothing. The budget line of a device is the
 * command's budget where one was recorded, else the sum of the budgets of
 * the process images that set one and have not exited. NVML's line of a
 * device is the sum of each live image's latest NVML reading there (an
 * image that ended holds nothing); it changes nothing in use.
 */
#ifndef VRAM_USAGE_H
#define VRAM_USAGE_H

#include "reader.h"

enum usage_kind {
    USAGE_NONE,   /* nothing in use changed (map, refusal, budget, context, exit,
                     an NVML reading) */
    USAGE_ALLOC,  /* an object appeared: before = 0 */
    USAGE_FREE,   /* it went: after = 0 */
    USAGE_RESIZE, /* a reservation changed from before to after (both may be > 0) */
};

struct usage_change {
    enum usage_kind kind;
    const struct record_event *e; /* the event (for an implied free: the exit) */
    size_t index;                 /* of e in the recording */
    uint32_t image;
    int dev;                      /* -1 for events without a device */
    enum record_family family;
    uint64_t address;
    uint64_t before, after; /* the object's charge */
    bool implied;           /* a free implied by its process's exit */
    uint64_t *tag; /* the caller's word for this object, kept from its ALLOC to its FREE
                      (0 at first); NULL for USAGE_NONE */
};

struct usage {
    const struct recording *r;
    int ndevices;
    uint64_t *total;     /* [dev]: in use on the device */
    uint64_t *by_family; /* [dev * RECORD_FAMILIES + family] */
    uint64_t *by_image;  /* [image * ndevices + dev] */
    uint64_t *budget;    /* [dev]: the budget line, 0 when none */
    bool *command_budget; /* [dev]: the line is the command's budget */
    uint64_t *nvml;      /* [dev]: NVML's line (valid where nvml_seen) */
    bool *nvml_seen;     /* [dev]: an NVML reading of the device came before */
    uint64_t nvml_changes; /* goes up whenever nvml[] changes, on any device */
    uint64_t unmatched;  /* frees of what was not allocated, ignored */
    void *priv;
};

typedef void usage_fn(const struct usage *u, const struct usage_change *c, void *arg);

/* Calls fn after each change, in time order. 0, or -1 if memory ran out. */
int usage_walk(const struct recording *r, usage_fn *fn, void *arg);

#endif
