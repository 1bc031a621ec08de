/* reader: a recording loaded whole, its events in time order.
 *
 * A recording is a .vrec file (one process image's, or several merged) or
 * the directory the recorder writes during a run (one file per process
 * image). Every whole block is read; a block cut short or damaged (a
 * process killed while writing, a full disk) ends what is read of that
 * file, and `notes` says so: the events before it are all there.
 */
#ifndef VRAM_READER_H
#define VRAM_READER_H

#include "recording.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One process image: a process between two execs. */
struct recording_image {
    uint64_t id;
    struct record_process info; /* pid at least, even without its block */
    bool has_info;              /* its process block was read */
    bool exited;                /* it wrote its exit record */
    uint64_t events;
    /* The image of the same pid whose events came before this one's (the
     * program it exec'd from, or a dead process whose pid came round
     * again): it had ended by this image's first event. RECORDING_NONE if
     * none. */
    uint32_t replaces;
    bool replaced; /* ... this image, by a later one */
};

#define RECORDING_NONE UINT32_MAX

struct recording {
    struct record_event *events; /* by time; ties keep the order written */
    uint32_t *image_of;          /* events[i] is images[image_of[i]]'s */
    size_t nevents;
    struct recording_image *images;
    size_t nimages;
    uint64_t start, end;     /* CLOCK_MONOTONIC ns of the first and last event */
    int64_t realtime_offset; /* + a monotonic time = CLOCK_REALTIME; 0 if unknown */
    int ndevices;            /* 1 + the highest device ordinal seen (0: none) */
    char notes[1024];        /* what was cut short or damaged, for the reader */
    size_t capacity;         /* events the arrays hold room for */
};

/* Loads `path` (a .vrec file or a recorder's directory). 0, or -1 with a
 * message in err that names the file and what is wrong. */
int recording_load(const char *path, struct recording *r, char *err, size_t n);
void recording_free(struct recording *r);

/* A recording built in memory rather than loaded (vram plot --job draws
 * vramd's history as one): begin, add images and their events in any
 * order, then end, which settles it as recording_load does (time order,
 * span, exits, images that replaced others) and keeps `notes` (NULL: none)
 * for the reader. recording_build_image returns the image's index, the
 * others 0; -1 if memory ran out. */
void recording_build_begin(struct recording *r);
long recording_build_image(struct recording *r, const struct record_process *info);
int recording_build_event(struct recording *r, uint32_t image, const struct record_event *e);
int recording_build_end(struct recording *r, const char *notes);

/* "1234 python train.py": how pages and messages name a process image. */
void recording_image_name(const struct recording_image *im, char *out, size_t n);

#endif
