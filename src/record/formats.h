/* formats: a recording written in the form a reader of it wants.
 *
 *   .vrec  vram's own: the events as recorded, merged into one file;
 *          what `vram plot` and `vram record` read fastest.
 *   .csv   RMM's allocation log (Thread,Time,Action,Pointer,Size,Stream),
 *          read by vram-replay and RMM's REPLAY_BENCHMARK. One line per
 *          charge: an allocation (a context and a loaded module too: the
 *          budget charges them) is allocated and freed; a reservation
 *          (pool, graph memory) is one block, and each change of its size
 *          is a free of the old size and an allocation of the new, so the
 *          log's peak is the recording's; a refusal is "allocate failure";
 *          NVML's readings have no line (they allocate nothing).
 *          Pointers are the recorded ones, or made-up ones where two
 *          processes' (or a reservation's) would collide.
 *   .json  Chrome's trace-event format (ui.perfetto.dev, chrome://tracing):
 *          per device a counter of bytes in use by family, one of the
 *          budget and one of NVML's figure where it was read; per process
 *          a counter of its bytes on each device;
 *          refusals, contexts and exits as instant events.
 *
 * The supervisor of `vram run --record FILE` prepares a directory for the
 * recorders of the command's processes (recording_prepare) and, when the
 * command has ended, writes FILE from it and removes it
 * (recording_finish).
 */
#ifndef VRAM_FORMATS_H
#define VRAM_FORMATS_H

#include "reader.h"

#include <stdio.h>

enum recording_format { FORMAT_VREC, FORMAT_CSV, FORMAT_TRACE };

#define RECORDING_FORMATS                                                                       \
    "vrec (vram's own), csv (RMM's allocation log) or json (Chrome/Perfetto trace events); "   \
    "by the file's extension: .vrec, .csv, .json"

/* The format named by `forced` (when not NULL), else by the extension of
 * `path`. 0, or -1 with a message naming the value and the forms. */
int recording_format_of(const char *path, const char *forced, enum recording_format *f,
                        char *err, size_t n);
const char *recording_format_name(enum recording_format f);

/* Writes the recording in format f. `device` >= 0 keeps only that device's
 * events (RMM's log is one device's). 0, or -1 with a message. */
int recording_write(const struct recording *r, enum recording_format f, int device, FILE *out,
                    char *err, size_t n);

/* Loads `in` (a file or a recorder's directory) and writes `out` in format
 * f, whole or not at all (a temporary file renamed over it); "-" is
 * stdout. `notes` (may be NULL) gets what the reader noted. */
int recording_convert(const char *in, const char *out, enum recording_format f, int device,
                      char *notes, size_t notes_len, char *err, size_t n);

/* For `vram run --record OUT`: makes a private directory (0700) beside OUT
 * for the recorders of the command's processes (VRAM_RECORD). */
int recording_prepare(const char *out, char *dir, size_t dir_len, char *err, size_t n);
/* When the command has ended: writes OUT in format f from the directory,
 * then removes the directory. A directory without recordings (the command
 * touched no GPU) gives a recording without events. If writing fails the
 * directory is kept and the message says how to convert it later. */
int recording_finish(const char *dir, const char *out, enum recording_format f, char *notes,
                     size_t notes_len, char *err, size_t n);

/* Writes the file `path` whole or not at all: fn writes into a temporary
 * file beside it, renamed over it once complete; "-" is standard output.
 * fn returns 0 or -1. 0, or -1 with a message naming the file. */
typedef int write_fn(FILE *out, void *arg);
int write_whole(const char *path, write_fn *fn, void *arg, char *err, size_t n);

/* The writers, one per format (export_*.c). */
int write_vrec(const struct recording *r, int device, FILE *out);
int write_rmm_csv(const struct recording *r, int device, FILE *out);
int write_trace_json(const struct recording *r, int device, FILE *out);

#endif
